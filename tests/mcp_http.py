#!/usr/bin/python3
"""tests/mcp_http.py KBOX RESULT_SCHEMA — kbox mcp --http: the Streamable
HTTP transport (docs/specification/2025-06-18/basic/transports): one
endpoint, /mcp, a JSON-RPC message a POST, a request answered with one
JSON object (or, when it asks for progress and the client takes a stream,
with text/event-stream: its progress, then its response), a notification
with 202; Mcp-Session-Id from initialize on,
404 for one that ended, 400 without one; DELETE ends a conversation and
its session; a bearer token, compared by the server; a Host or Origin not
of this server refused (DNS rebinding); bounded bodies.  Each
conversation has a session of its own.  Spoken to over 127.0.0.1 with
urllib, a real HTTP client.  Prints TAP.  KBOX_HOME must be set."""
import json
import os
import re
import signal
import stat
import subprocess
import time
import urllib.error
import urllib.request

from mcp_lib import HOME, KBOX, check, gone, plan

TOKEN = "t0k3n-" + os.urandom(12).hex()
BASE = os.path.dirname(HOME)


class Http:
    """A kbox mcp --http and its address."""

    def __init__(self, *args, env=None):
        self.err = open(os.path.join(BASE, f"mcp-stderr-{time.time_ns()}"), "w+")
        self.p = subprocess.Popen([KBOX, "mcp", "--http", "127.0.0.1:0", *args],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=self.err, env=dict(os.environ, **(env or {})))
        self.port = None
        deadline = time.time() + 60
        while self.port is None and time.time() < deadline:
            self.err.seek(0)
            m = re.search(r"kbox mcp: listening on http://127\.0\.0\.1:(\d+)/mcp\n",
                          self.err.read())
            if m:
                self.port = int(m[1])
            elif self.p.poll() is not None:
                break
            else:
                time.sleep(0.05)
        assert self.port, "no listening line: " + self.stderr()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.next_id = 1

    def stderr(self):
        self.err.seek(0)
        return self.err.read()

    def post(self, msg, sid=None, token=TOKEN, headers=None, raw=None, method="POST",
             url=None):
        """(status, headers, body as JSON or None)."""
        h = {"Content-Type": "application/json",
             "Accept": "application/json, text/event-stream"}
        if token is not None:
            h["Authorization"] = "Bearer " + token
        if sid:
            h["Mcp-Session-Id"] = sid
        h.update(headers or {})
        data = raw if raw is not None else (json.dumps(msg).encode() if msg is not None
                                            else None)
        req = urllib.request.Request(url or self.url, data=data, headers=h, method=method)
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                body = r.read()
                return r.status, r.headers, json.loads(body) if body else None
        except urllib.error.HTTPError as e:
            body = e.read()
            return e.code, e.headers, json.loads(body) if body else None

    def request(self, method, params=None, sid=None, **kw):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        return self.post(msg, sid=sid, **kw)

    def initialize(self):
        st, h, body = self.request("initialize", {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "mcp_http.py", "version": "1"}})
        assert st == 200 and body["result"]["serverInfo"]["name"] == "kbox", (st, body)
        sid = h["Mcp-Session-Id"]
        assert re.fullmatch(r"[0-9a-f]{32}", sid), sid
        st, _, body = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"},
                                sid=sid)
        assert st == 202 and body is None, (st, body)
        return sid

    def run(self, sid, code):
        st, _, body = self.request("tools/call", {"name": "run_python",
                                                  "arguments": {"code": code}}, sid=sid)
        assert st == 200, (st, body)
        return "".join(c["text"] for c in body["result"]["content"] if c["type"] == "text")

    def stop(self, sig=signal.SIGTERM, wait=90):
        self.p.send_signal(sig)
        return self.p.wait(wait)


def own_sessions():
    d = os.path.join(HOME, "sessions")
    return sorted(x for x in os.listdir(d) if x.startswith("mcp-")) if os.path.isdir(d) else []


s = Http(env={"KBOX_MCP_TOKEN": TOKEN})
state = {}


def ping_until(q, sid, want, meanwhile, why):
    """Ping the conversation SID of Q until it answers status WANT, every
    answer before it MEANWHILE, within a bound (WHY says what never came);
    the answer's body."""
    deadline = time.time() + 120  # a bound
    while True:
        assert time.time() < deadline, why
        st, _, body = q.request("ping", sid=sid)
        if st == want:
            return body
        assert st == meanwhile, (st, body)
        time.sleep(0.05)


def t_conversation():
    sid = s.initialize()
    state["a"] = sid
    st, _, body = s.request("tools/list", sid=sid)
    assert st == 200 and "run_python" in [t["name"] for t in body["result"]["tools"]], body
    assert s.run(sid, "x = 6 * 7\nx").endswith("Out[1]: 42\n")
    assert s.run(sid, "x + 1") == "Out[2]: 43\n"


check("a_conversation_initializes_gets_a_session_id_and_keeps_its_kernel_state", t_conversation)


def t_two():
    b = s.initialize()
    state["b"] = b
    assert b != state["a"]
    t = s.run(b, "'x' in dir()")
    assert t.endswith("Out[1]: False\n"), t
    assert s.run(state["a"], "x") == "Out[3]: 42\n"
    assert len(own_sessions()) == 2, own_sessions()


check("two_conversations_have_a_session_each", t_two)


def children_argv(pid):
    """The argument lists of the processes whose parent is PID."""
    found = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")[:-1])
        except (OSError, IndexError, ValueError):
            pass  # (a process that ended meanwhile)
    return found


def t_options_carried():
    # each conversation's kbox mcp gets the server's options: the bound of
    # a gateway session's file calls among them (--files-timeout)
    h = Http("--files-timeout", "7s", env={"KBOX_MCP_TOKEN": TOKEN})
    try:
        h.initialize()
        kids = [a for a in children_argv(h.p.pid) if a[1:2] == [b"mcp"]]
        assert len(kids) == 1 and kids[0][kids[0].index(b"--files-timeout") + 1] == b"7000ms", \
            kids
    finally:
        assert h.stop() == 0, h.stderr()


check("a_conversation_gets_the_servers_files_timeout", t_options_carried)


def t_auth():
    for token in (None, "wrong-" + TOKEN, TOKEN[:-1], TOKEN + "x", ""):
        st, h, body = s.request("tools/list", sid=state["a"], token=token)
        assert st == 401 and h["WWW-Authenticate"] == "Bearer", (token, st)
        assert body["error"]["message"].startswith(
            "Unauthorized: give Authorization: Bearer" if token is None else
            "Unauthorized: the bearer token is not this server's"), (token, body)


check("a_request_without_the_token_is_401", t_auth)


def t_rebinding():
    st, _, body = s.request("tools/list", sid=state["a"],
                            headers={"Origin": "http://evil.example"})
    assert st == 403 and body["error"]["message"] == "Forbidden: the Origin is not this server"
    st, _, body = s.request("tools/list", sid=state["a"], headers={"Host": "evil.example"})
    assert st == 403 and body["error"]["message"] == "Forbidden: the Host is not this server"
    # a page of another port of this address is another origin
    st, _, body = s.request("tools/list", sid=state["a"], headers={"Origin": "http://127.0.0.1"})
    assert st == 403 and body["error"]["message"] == "Forbidden: the Origin is not this server"
    for origin in (f"http://127.0.0.1:{s.port}", f"http://localhost:{s.port}"):
        st, _, _ = s.request("tools/list", sid=state["a"], headers={"Origin": origin})
        assert st == 200, origin
    st, _, _ = s.request("tools/list", sid=state["a"],
                         headers={"Host": f"localhost:{s.port}"})
    assert st == 200


check("a_host_or_origin_not_of_this_server_is_403", t_rebinding)


def t_bad():
    st, _, body = s.request("tools/list")
    assert st == 400 and "Mcp-Session-Id header is required" in body["error"]["message"]
    st, _, body = s.request("tools/list", sid="0" * 32)
    assert st == 404 and body["error"]["message"].startswith("Not Found: no such conversation (MCP session")
    st, h, _ = s.post(None, sid=state["a"], method="GET")
    assert st == 405 and h["Allow"] == "POST, DELETE", st
    st, _, _ = s.request("tools/list", sid=state["a"], url=s.url + "x")
    assert st == 404
    st, _, body = s.request("tools/list", sid=state["a"], headers={"Content-Type": "text/plain"})
    assert st == 415 and body["error"]["message"] == (
        "Unsupported Media Type: Content-Type must be application/json"), body
    st, _, _ = s.request("tools/list", sid=state["a"], headers={"Accept": "text/html"})
    assert st == 406
    st, _, body = s.request("tools/list", sid=state["a"],
                            headers={"MCP-Protocol-Version": "1999-01-01"})
    assert st == 400 and body["error"]["message"] == (
        "Bad Request: unsupported MCP-Protocol-Version 1999-01-01 (this server speaks "
        "2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05, 2024-10-07)"), body
    st, _, body = s.post(None, sid=state["a"], raw=b"[1, 2")
    assert st == 400 and body["error"] == {"code": -32700,
                                           "message": "Parse error: the body is not JSON"}, body
    st, _, body = s.post(None, sid=state["a"], raw=b'"a string"')
    assert st == 400 and body["error"] == {
        "code": -32600,
        "message": "Invalid Request: the body must be one JSON-RPC message, an object"}, body
    st, _, body = s.post([{"jsonrpc": "2.0", "id": 5, "method": "ping"}], sid=state["a"])
    assert st == 400 and body["error"]["message"] == (
        "Invalid Request: batches are not supported (MCP since 2025-06-18): send one "
        "message a POST"), body
    big = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "run_python", "arguments": {"code": "#" + "x" * (4 * 1024 * 1024)}}})
    st, _, body = s.post(None, sid=state["a"], raw=big.encode())
    assert st == 413 and body["error"]["message"] == (
        "Content Too Large: a message longer than 4 MiB"), (st, body)
    # and the conversation goes on
    assert s.run(state["a"], "x * 2") == "Out[4]: 84\n"


check("bad_requests_get_the_http_status_that_says_why", t_bad)


def raw_call(sid, id_, code, accept, meta=None, port=None):
    """A tools/call of run_python CODE on a socket of its own (to the
    server at PORT, s's by default), written whole; the socket (for a
    client that goes away from it)."""
    import socket
    port = port or s.port
    params = {"name": "run_python", "arguments": {"code": code}}
    if meta:
        params["_meta"] = meta
    body = json.dumps({"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params})
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall((f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                  f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                  f"Accept: {accept}\r\nMcp-Session-Id: {sid}\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
    return sock


def t_disconnect():
    # a client that goes away while its call runs: the cell is interrupted
    # (notifications/cancelled to the conversation), the session stays
    import glob
    sid = state["a"]
    sock = raw_call(sid, 77, "import time\nopen('going', 'w').close()\nwhile True: time.sleep(0.05)",
                    "application/json")
    deadline = time.time() + 120
    while not glob.glob(os.path.join(HOME, "sessions", "mcp-*", "workspace", "going")):
        assert time.time() < deadline, "the cell never began"
        time.sleep(0.05)
    sock.close()
    t = s.run(sid, "x + 100")
    assert t.endswith("]: 142\n"), t


check("a_client_that_goes_away_mid_call_has_its_cell_interrupted", t_disconnect)


def raw_response(sock, timeout=60):
    """(status, body as JSON) of the HTTP response on SOCK (Content-Length)."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        got = sock.recv(65536)
        assert got, data
        data += got
    head, body = data.split(b"\r\n\r\n", 1)
    n = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)[1])
    while len(body) < n:
        got = sock.recv(65536)
        assert got, body
        body += got
    return int(head.split()[1]), json.loads(body)


def t_cancel():
    # a call its client cancels on a POST of its own, keeping the call's
    # open (review 26, W26-1): that POST is answered at once, with an error
    # a client that cancelled ignores (kbox mcp sends no response for a
    # cancelled call), and the cell is interrupted
    import glob
    sid = state["a"]
    sock = raw_call(sid, 78, "import time\nopen('cancel-me', 'w').close()\n"
                    "while True: time.sleep(0.05)", "application/json")
    deadline = time.time() + 120
    while not glob.glob(os.path.join(HOME, "sessions", "mcp-*", "workspace", "cancel-me")):
        assert time.time() < deadline, "the cell never began"
        time.sleep(0.05)
    st, _, body = s.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": 78, "reason": "the user changed their mind"}},
                         sid=sid)
    assert st == 202 and body is None, (st, body)
    st, body = raw_response(sock)
    sock.close()
    assert st == 200 and body == {"jsonrpc": "2.0", "id": 78, "error": {
        "code": -32800,
        "message": "Request cancelled (notifications/cancelled): no result follows"}}, body
    t = s.run(sid, "x + 100")
    assert t.endswith("]: 142\n"), t


check("a_call_cancelled_on_another_post_is_answered_and_interrupted", t_cancel)


def t_nul():
    # a NUL in a message (\u0000) is JSON: taken as kbox mcp takes it on
    # stdio (review 26, W26-2); and a result that holds one is passed on,
    # not dropped with its call left waiting (B26-1: --structured full
    # carries the output as it is)
    st, _, body = s.request("tools/call", {"name": "write_file", "arguments": {
        "path": "nul.bin", "content": "a\0b"}}, sid=state["a"])
    assert st == 200 and body["result"]["content"] == [
        {"type": "text", "text": "wrote 3 bytes to nul.bin"}], (st, body)
    h = Http("--structured", "full", env={"KBOX_MCP_TOKEN": TOKEN})
    try:
        a = h.initialize()
        st, _, body = h.request("tools/call", {"name": "run_python", "arguments": {
            "code": "print('a\\x00b')"}}, sid=a)
        assert st == 200 and body["result"]["structuredContent"]["stdout"]["text"] == (
            "a\0b\n"), (st, body)
    finally:
        assert h.stop() == 0, h.stderr()


check("a_nul_in_a_message_or_a_result_is_passed_on", t_nul)


def sse_post(msg, sid, accept="application/json, text/event-stream"):
    """POST MSG; (status, content type, [events' data as JSON])."""
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
    c.request("POST", "/mcp", body=json.dumps(msg), headers={
        "Content-Type": "application/json", "Accept": accept,
        "Authorization": "Bearer " + TOKEN, "Mcp-Session-Id": sid})
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    if not r.getheader("Content-Type", "").startswith("text/event-stream"):
        return r.status, r.getheader("Content-Type"), [json.loads(body)]
    events = []
    for block in body.split("\n\n"):
        data = [l[6:] for l in block.split("\n") if l.startswith("data: ")]
        if data:
            events.append(json.loads("\n".join(data)))
    return r.status, r.getheader("Content-Type"), events


def t_sse():
    # a call that asks for progress, from a client that takes a stream:
    # its progress notifications, then its response, as events of one
    # stream (the cell prints, then sleeps: a long cell is the behaviour)
    sid = state["a"]
    code = ("import time\nfor i in range(3):\n    print('step', i, flush=True)\n"
            "    time.sleep(1.5)\n")
    msg = {"jsonrpc": "2.0", "id": "sse-1", "method": "tools/call", "params": {
        "name": "run_python", "arguments": {"code": code},
        "_meta": {"progressToken": "tok-1"}}}
    st, ctype, events = sse_post(msg, sid)
    assert st == 200 and ctype == "text/event-stream", (st, ctype)
    *progress, last = events
    assert progress and all(e["method"] == "notifications/progress" and
                            e["params"]["progressToken"] == "tok-1" for e in progress), events
    counts = [e["params"]["progress"] for e in progress]
    assert counts == sorted(set(counts)), counts
    assert any("step" in e["params"].get("message", "") for e in progress), progress
    assert last["id"] == "sse-1" and "result" in last, last
    text = "".join(c["text"] for c in last["result"]["content"] if c["type"] == "text")
    assert text == "step 0\nstep 1\nstep 2\n", text
    # the same without a stream taken: one JSON object, no progress
    msg["id"] = "sse-2"
    st, ctype, events = sse_post(msg, sid, accept="application/json")
    assert st == 200 and ctype == "application/json" and len(events) == 1, (st, ctype, events)
    assert events[0]["id"] == "sse-2" and "result" in events[0], events
    # a token longer than 256 characters, which every event would repeat:
    # one JSON object
    msg["id"] = "sse-2b"
    msg["params"]["_meta"] = {"progressToken": "t" * 300}
    st, ctype, events = sse_post(msg, sid)
    assert ctype == "application/json" and events[0]["id"] == "sse-2b", (ctype, events)
    # and a call without a token: JSON, whatever the client accepts
    del msg["params"]["_meta"]
    msg["id"] = "sse-3"
    msg["params"]["arguments"]["code"] = "print('plain')"
    st, ctype, events = sse_post(msg, sid)
    assert ctype == "application/json" and events[0]["id"] == "sse-3", (ctype, events)


check("a_call_that_asks_for_progress_gets_a_stream_of_its_progress_then_its_result", t_sse)


def t_sse_gone():
    # a client that goes away from its stream, after its first progress
    # event: the cell is interrupted, the session stays
    sid = state["a"]
    sock = raw_call(sid, 78, "import time\nprint('going', flush=True)\nwhile True: time.sleep(0.05)",
                    "application/json, text/event-stream", {"progressToken": 5})
    sock.settimeout(120)
    got = b""
    while b"notifications/progress" not in got:
        chunk = sock.recv(65536)
        assert chunk, got
        got += chunk
    assert b"text/event-stream" in got and b'"progressToken":5' in got, got
    sock.close()
    t = s.run(sid, "x + 100")
    assert t.endswith("]: 142\n"), t


check("a_client_that_leaves_its_stream_has_its_cell_interrupted", t_sse_gone)


def t_sse_at_stop():
    # the server stopped (SIGTERM) while a stream is open: the stream gets
    # its last event, the call's error, and then its end (the chunked
    # body's last chunk: http.client reads it whole, not cut short)
    import http.client
    q = Http(env={"KBOX_MCP_TOKEN": TOKEN})
    try:
        sid = q.initialize()
        c = http.client.HTTPConnection("127.0.0.1", q.port, timeout=120)
        c.request("POST", "/mcp", body=json.dumps({
            "jsonrpc": "2.0", "id": "at-stop", "method": "tools/call", "params": {
                "name": "run_python", "arguments": {
                    "code": "import time\nprint('going', flush=True)\n"
                            "while True: time.sleep(0.05)"},
                "_meta": {"progressToken": "stop-1"}}}), headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "Authorization": "Bearer " + TOKEN, "Mcp-Session-Id": sid})
        r = c.getresponse()
        assert r.status == 200 and r.getheader("Content-Type") == "text/event-stream", r.status
        seen = b""
        while b"notifications/progress" not in seen:
            line = r.readline()
            assert line, seen
            seen += line
        q.p.send_signal(signal.SIGTERM)
        rest = r.read().decode()  # (http.client.IncompleteRead if cut)
        c.close()
        last = json.loads([ln[6:] for ln in rest.split("\n") if ln.startswith("data: ")][-1])
        # (its conversation ends first, as the server stops: its own end,
        # the conversation's server as it stops, or the HTTP server,
        # answers the call)
        assert last["id"] == "at-stop" and last["error"]["message"] in (
            "the conversation's server ended", "the server is stopping",
            "kbox mcp is stopping (SIGTERM): the call ended unfinished"), last
        assert q.p.wait(90) == 0, q.stderr()
    finally:  # (a failure above leaves no server behind)
        if q.p.poll() is None:
            q.p.kill()
            q.p.wait(90)


check("a_stream_open_when_the_server_stops_gets_its_last_event_and_its_end", t_sse_at_stop)


def t_one_line():
    # a message with line breaks (pretty-printed) is one message: answered;
    # line breaks cannot carry a second message past the server
    sid = state["a"]
    st, _, body = s.post(None, sid=sid, raw=json.dumps(
        {"jsonrpc": "2.0", "id": 501, "method": "ping"}, indent=2).encode())
    assert st == 200 and body == {"jsonrpc": "2.0", "id": 501, "result": {}}, (st, body)
    inner = json.dumps({"jsonrpc": "2.0", "id": "smuggled", "method": "tools/call", "params": {
        "name": "run_python", "arguments": {"code": "x_smuggled = 1"}}})
    raw = ('{"a":\n' + inner + '\r\n,"jsonrpc":"2.0","method":"notifications/initialized"}')
    st, _, body = s.post(None, sid=sid, raw=raw.encode())
    assert st == 202 and body is None, (st, body)
    t = s.run(sid, "'x_smuggled' in dir()")
    assert t.endswith("]: False\n"), t


check("a_message_with_line_breaks_is_one_message", t_one_line)


def t_ids():
    # an id the conversation could not answer by is refused, not lost
    for bad in (1.5, True, None, {"a": 1}, [1]):
        st, _, body = s.post({"jsonrpc": "2.0", "id": bad, "method": "ping"}, sid=state["a"])
        assert st == 400 and body["error"] == {
            "code": -32600,
            "message": 'Invalid Request: "id" must be a string or an integer'}, (bad, st, body)


check("a_request_whose_id_is_not_a_string_or_an_integer_is_400", t_ids)


def t_big_integer():
    # an integer past 64 bits is JSON still: its request is answered by its
    # id, with the field that holds it named, not a parse error without one
    st, _, body = s.post(None, sid=state["a"], raw=(
        b'{"jsonrpc": "2.0", "id": 502, "method": "tools/call", "params": {"name": '
        b'"read_file", "arguments": {"path": "x", "offset": 99999999999999999999}}}'))
    assert st == 200 and body == {"jsonrpc": "2.0", "id": 502, "result": {
        "content": [{"type": "text",
                     "text": 'read_file: "offset" must be a whole number of bytes, 0 or more'}],
        "isError": True}}, (st, body)


check("a_request_with_an_integer_past_64_bits_is_answered_by_its_id", t_big_integer)


def t_early():
    # a request that is not let in is answered before its body: an 8 MiB
    # Content-Length, no body sent, gets its 401 (or 403) at once
    import socket
    for extra, want in (("", b"HTTP/1.1 401"),
                        (f"Authorization: Bearer {TOKEN}\r\nOrigin: http://127.0.0.1\r\n",
                         b"HTTP/1.1 403")):
        sock = socket.create_connection(("127.0.0.1", s.port), timeout=60)
        sock.sendall((f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{s.port}\r\n{extra}"
                      "Content-Type: application/json\r\nContent-Length: 8388608\r\n\r\n"
                      ).encode())
        got = sock.recv(4096)
        sock.close()
        assert got.startswith(want), (want, got[:200])


check("a_request_not_let_in_is_refused_before_its_body", t_early)


def t_idle():
    # idle connections (a local user's, no token needed) are closed after
    # 30 s of silence: as many as the server takes do not keep it from
    # the next client for long
    import socket
    idle = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(256)]
    try:
        st, _, body = s.request("ping", sid=state["a"])
        assert st == 200 and body["result"] == {}, (st, body)
    finally:
        for x in idle:
            x.close()


check("idle_connections_are_closed_and_let_the_next_client_in", t_idle)


def t_trickle():
    # connections that send their headers a byte at a time (no token
    # needed) are cut off once their headers are 10 s late: as many as
    # the server takes do not keep it from the next client for long
    import socket
    import threading
    socks = []
    for _ in range(256):
        x = socket.create_connection(("127.0.0.1", s.port))
        x.sendall(b"POST /mcp HTTP/1.1\r\nX-A: ")
        socks.append(x)
    done = threading.Event()

    def trickle():  # (the attack's pace: a byte a second each)
        while not done.wait(1):
            for x in socks:
                try:
                    x.send(b"a")
                except OSError:
                    pass
    t = threading.Thread(target=trickle)
    t.start()
    try:
        st, _, body = s.request("ping", sid=state["a"])
        assert st == 200 and body["result"] == {}, (st, body)
    finally:
        done.set()
        t.join()
        for x in socks:
            x.close()


check("connections_whose_headers_never_end_are_cut_off", t_trickle)


def t_modern():
    st, _, body = s.request("server/discover", {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}})
    assert st == 200 and "2026-07-28" in body["result"]["supportedVersions"], body


check("a_request_of_the_revision_without_a_handshake_needs_no_session_id", t_modern)


def t_delete():
    b = state["b"]
    before = own_sessions()
    st, _, _ = s.post(None, sid=b, method="DELETE")
    assert st == 200, st
    assert len(own_sessions()) == len(before) - 1, (before, own_sessions())
    st, _, body = s.request("tools/list", sid=b)
    assert st == 404, st
    st, _, _ = s.post(None, sid=b, method="DELETE")
    assert st == 404
    # without the header, which session to end is not said: 400, as a POST
    st, _, body = s.post(None, method="DELETE")
    assert st == 400 and body["error"]["message"] == (
        "Bad Request: the Mcp-Session-Id header is required (the conversation to end)"), (st, body)


check("delete_ends_the_conversation_and_removes_its_session", t_delete)


def t_conversations_bound():
    # 16 conversations at once: the 17th handshake is refused, saying what
    # to do and when an unused one ends (its --conversation-idle)
    q = Http("--conversation-idle", "90s", env={"KBOX_MCP_TOKEN": TOKEN})
    try:
        sids = [q.initialize() for _ in range(16)]
        st, _, body = q.request("initialize", {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "mcp_http.py", "version": "1"}})
        assert st == 503 and body["error"]["message"] == (
            "Service Unavailable: this server keeps at most 16 conversations (MCP sessions) "
            "at once: end one (DELETE) first; one unused for 90 s ends on its own"), (st, body)
        st, _, _ = q.post(None, sid=sids[0], method="DELETE")
        assert st == 200, st
        assert q.initialize()
    finally:
        assert q.stop() == 0, q.stderr()


check("a_seventeenth_conversation_is_refused_with_what_to_do", t_conversations_bound)


def t_delete_then_leave():
    # a DELETE while a call runs, then that call's client goes away: the
    # cancel still reaches the cell (interrupted), the DELETE is answered
    # once the session is removed, and the server serves its other
    # conversations meanwhile (it never waits for a conversation's end)
    import glob
    import threading
    q = Http(env={"KBOX_MCP_TOKEN": TOKEN})
    where = []
    try:
        a, b = q.initialize(), q.initialize()
        sock = raw_call(b, 7, "import os, time\nopen('going-del', 'w').close()\n"
                        "while not os.path.exists('stop-del'): time.sleep(0.05)",
                        "application/json", port=q.port)
        deadline = time.time() + 120
        while not where:
            assert time.time() < deadline, "the cell never began"
            where = glob.glob(os.path.join(HOME, "sessions", "mcp-*", "workspace", "going-del"))
            time.sleep(0.05)
        before = own_sessions()
        deleted = {}
        t = threading.Thread(target=lambda: deleted.update(
            st=q.post(None, sid=b, method="DELETE")[0]))
        t.start()
        body = ping_until(q, b, 404, 200, "the DELETE never reached the server")
        assert body["error"]["message"] == "Not Found: the conversation is ending", body
        sock.close()
        st, _, body = q.request("ping", sid=a)
        assert st == 200 and body["result"] == {}, (st, body)
        t.join(120)
        assert deleted.get("st") == 200, deleted
        assert len(own_sessions()) == len(before) - 1, (before, own_sessions())
        assert q.run(a, "6 * 7").endswith("Out[1]: 42\n")
    finally:
        if where and os.path.isdir(os.path.dirname(where[0])):
            # (a cell the cancel did not reach ends all the same)
            open(os.path.join(os.path.dirname(where[0]), "stop-del"), "w").close()
        assert q.stop() == 0, q.stderr()


check("a_call_left_after_its_sessions_delete_is_interrupted_and_blocks_nothing",
      t_delete_then_leave)


def t_unread_bound():
    # what waits to be written to a conversation that does not read (its
    # kbox mcp stopped here) is bounded: past 1 MiB a message is refused
    # (503, a JSON-RPC error), even a notification, which was answered
    # 202 at once; once it reads again, messages are taken again
    q = Http(env={"KBOX_MCP_TOKEN": TOKEN})
    child = None
    try:
        sid = q.initialize()
        child = int(open(f"/proc/{q.p.pid}/task/{q.p.pid}/children").read().split()[0])
        os.kill(child, signal.SIGSTOP)
        note = {"jsonrpc": "2.0", "method": "notifications/x-pad",
                "params": {"pad": "p" * (300 * 1024)}}
        accepted = 0
        while True:
            st, _, body = q.post(note, sid=sid)
            if st != 202:
                break
            accepted += 1
            assert accepted <= 5, accepted  # 1 MiB, and one more, and a pipe
        assert accepted >= 3 and st == 503 and body["error"] == {
            "code": -32600,
            "message": "Service Unavailable: the conversation has not yet read the 1 MiB of "
                       "messages before this one: send it again later"}, (accepted, st, body)
        st, _, body = q.request("ping", sid=sid)
        assert st == 503, (st, body)
        os.kill(child, signal.SIGCONT)
        body = ping_until(q, sid, 200, 503, "the conversation never read what waited")
        assert body["result"] == {}, body
        assert q.post(note, sid=sid)[0] == 202
    finally:
        if child:
            os.kill(child, signal.SIGCONT)
        assert q.stop() == 0, q.stderr()


check("messages_a_conversation_has_not_read_are_bounded_past_1_mib_503", t_unread_bound)


def t_shared_ids():
    # in the conversation shared by the requests of the revision without
    # a handshake, each request's id is its own: another client's request
    # of the same id is served, and no message of another client (one
    # with that id but no method, a cancel) answers, blocks or cancels it
    import glob
    import threading
    q = Http(env={"KBOX_MCP_TOKEN": TOKEN})
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}

    def call(code):
        return q.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "run_python", "arguments": {"code": code}, "_meta": meta}})

    def text(body):
        return "".join(c["text"] for c in body["result"]["content"] if c["type"] == "text")
    where = []
    try:
        y = {}
        t = threading.Thread(target=lambda: y.update(r=call(
            "import os, time\nopen('going-ids', 'w').close()\n"
            "while not os.path.exists('stop-ids'): time.sleep(0.05)\nprint('Y')")))
        t.start()
        deadline = time.time() + 120
        while not where:
            assert time.time() < deadline, "the cell never began"
            where = glob.glob(os.path.join(HOME, "sessions", "mcp-*", "workspace", "going-ids"))
            time.sleep(0.05)
        for msg, want in (({"jsonrpc": "2.0", "id": 1, "method": 123,
                            "params": {"_meta": meta}}, 400),
                          ({"jsonrpc": "2.0", "method": "notifications/cancelled",
                            "params": {"requestId": 1, "_meta": meta}}, 202)):
            st, _, body = q.post(msg)
            assert st == want, (msg, st, body)
            if want == 400:
                assert body["error"] == {"code": -32600, "message": 'Invalid Request: "method" '
                                         '(a string) is required'}, body
        st, _, body = q.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                              "params": {"_meta": meta}})
        assert st == 200 and body["id"] == 1 and "run_python" in [
            t["name"] for t in body["result"]["tools"]], (st, body)
        assert "r" not in y, y
        open(os.path.join(os.path.dirname(where[0]), "stop-ids"), "w").close()
        t.join(120)
        st, _, body = y["r"]
        # (its output whole: not cancelled, not answered by another's)
        assert st == 200 and body["id"] == 1 and text(body).endswith("]\nY\n"), (st, body)
    finally:
        if where and os.path.isdir(os.path.dirname(where[0])):
            open(os.path.join(os.path.dirname(where[0]), "stop-ids"), "w").close()
        assert q.stop() == 0, q.stderr()


check("in_the_shared_conversation_each_requests_id_is_its_own", t_shared_ids)


def t_shared():
    # -s NAME: every conversation uses that one session, and the server
    # says so when it starts
    h = Http("-s", "shared-http", env={"KBOX_MCP_TOKEN": TOKEN})
    try:
        a, b = h.initialize(), h.initialize()
        assert a != b
        h.run(a, "shared_x = 5")
        assert h.run(b, "shared_x").endswith("]: 5\n")
        assert ("kbox mcp: every conversation uses the session shared-http (-s): its kernel, "
                "and what each client defines there, is every client's\n") in h.stderr(), h.stderr()
    finally:
        assert h.stop() == 0, h.stderr()
    subprocess.run([KBOX, "rm", "-f", "-s", "shared-http"], capture_output=True, timeout=120)


check("with_s_every_conversation_uses_that_session_and_it_is_said", t_shared)


def t_stop():
    assert s.stop() == 0
    assert own_sessions() == [], own_sessions()
    assert s.stderr().startswith("kbox mcp: listening on http://127.0.0.1:"), s.stderr()


check("sigterm_ends_every_conversation_and_their_sessions", t_stop)


def t_conversation_idle():
    # --conversation-idle 2s: a conversation no request comes to for 2 s
    # ends, its session removed; its id is then unknown (404)
    q = Http("--conversation-idle", "2s", env={"KBOX_MCP_TOKEN": TOKEN})
    try:
        sid = q.initialize()
        assert q.run(sid, "6 * 7").endswith("Out[1]: 42\n")
        assert len(own_sessions()) == 1, own_sessions()
        deadline = time.time() + 60  # a bound: it ends 2 s after the call
        while own_sessions() and time.time() < deadline:
            time.sleep(0.1)
        assert own_sessions() == [], own_sessions()
        said = (f"kbox mcp: the conversation {sid[:8]}\u2026 ended: no request came for "
                "2.0 s (--conversation-idle)\n")
        assert said in q.stderr(), q.stderr()
        st, _, body = q.request("tools/list", sid=sid)
        assert st == 404, (st, body)
        # a new conversation is served as before
        assert q.run(q.initialize(), "1 + 1").endswith("Out[1]: 2\n")
    finally:
        assert q.stop() == 0
    assert own_sessions() == [], own_sessions()


check("a_conversation_idle_for_its_limit_ends_with_its_session", t_conversation_idle)


def t_token_sources():
    # a generated token is printed; the helper takes it (kbox mcp execs it)
    g = Http(env={"KBOX_MCP_TOKEN": ""})
    m = re.match(r"kbox mcp: token: ([0-9a-f]{48})\n", g.stderr())
    assert m, g.stderr()
    st, _, _ = g.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                        "clientInfo": {"name": "c", "version": "1"}},
                         token=m[1])
    assert st == 200
    assert g.stop() == 0
    # a token file: private, its first line
    f = os.path.join(BASE, "token")
    with open(f, "w") as fh:
        fh.write(TOKEN + "\n")
    os.chmod(f, 0o600)
    t = Http("--token-file", f, env={"KBOX_MCP_TOKEN": ""})
    st, _, _ = t.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                        "clientInfo": {"name": "c", "version": "1"}})
    assert st == 200
    assert t.stop() == 0


check("the_token_is_the_token_files_the_environments_or_a_new_printed_one", t_token_sources)


def t_any_address():
    # on every address the machine's many names are taken; an Origin must
    # still be a page of the Host it names (spoken to over 127.0.0.1)
    err = open(os.path.join(BASE, f"mcp-stderr-any-{time.time_ns()}"), "w+")
    p = subprocess.Popen([KBOX, "mcp", "--http", "0.0.0.0:0"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=err,
                         env=dict(os.environ, KBOX_MCP_TOKEN=TOKEN))
    port = None
    deadline = time.time() + 60
    while port is None and time.time() < deadline and p.poll() is None:
        err.seek(0)
        m = re.search(r"listening on http://0\.0\.0\.0:(\d+)/mcp\n", err.read())
        port = int(m[1]) if m else None
        time.sleep(0.05)
    assert port, "no listening line"
    # plain HTTP on every address: said once, with what to do
    err.seek(0)
    assert ("kbox mcp: warning: every address of this machine is reachable from other "
            "machines, over plain HTTP: the bearer token and every call can be read on the "
            "way; listen on 127.0.0.1 (or a unix socket) and put a TLS proxy in front\n"
            ) in err.read()
    g = s.__class__.__new__(s.__class__)
    g.url, g.port, g.next_id = f"http://127.0.0.1:{port}/mcp", port, 1
    init = {"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"}}
    st, _, _ = g.request("initialize", init)
    assert st == 200, st
    st, _, _ = g.request("initialize", init, headers={"Host": f"kbox.example:{port}",
                                                      "Origin": f"http://kbox.example:{port}"})
    assert st == 200, st
    st, _, _ = g.request("initialize", init, headers={"Origin": "http://evil.example"})
    assert st == 403, st
    p.send_signal(signal.SIGTERM)
    assert p.wait(90) == 0


check("on_every_address_any_host_is_taken_and_the_origin_must_match_it", t_any_address)


def t_unix():
    # --http unix:PATH: a socket file of the owner's only (mode 0600),
    # spoken to over HTTP as on TCP (any Host; an Origin, which no page
    # can have here, refused); a second server on it is refused while the
    # first listens; one killed leaves a file the next takes over; SIGTERM
    # removes it
    import http.client
    import socket

    path = os.path.join(BASE, "mcp.sock")

    def serve():
        err = open(os.path.join(BASE, f"mcp-unix-{time.time_ns()}"), "w+")
        p = subprocess.Popen([KBOX, "mcp", "--http", "unix:" + path], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=err,
                             env=dict(os.environ, KBOX_MCP_TOKEN=TOKEN))
        deadline = time.time() + 60  # a bound: the line comes at once
        while time.time() < deadline:
            err.seek(0)
            if err.read() == f"kbox mcp: listening on unix:{path} (http://localhost/mcp)\n":
                return p
            assert p.poll() is None, (p.returncode, err.read())
            time.sleep(0.05)
        raise AssertionError("no listening line")

    def call(msg, sid=None, origin=None):
        # the request in one write (http.client writes a body after its
        # headers, and a request refused at its headers has its connection
        # closed by the server before that second write), the response
        # read by http.client
        body = json.dumps(msg).encode()
        head = ("POST /mcp HTTP/1.1\r\nHost: anything\r\nContent-Type: application/json\r\n"
                "Accept: application/json\r\nAuthorization: Bearer %s\r\n"
                "Content-Length: %d\r\nConnection: close\r\n" % (TOKEN, len(body)))
        if sid:
            head += "Mcp-Session-Id: %s\r\n" % sid
        if origin:
            head += "Origin: %s\r\n" % origin
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(120)
        sock.connect(path)
        sock.sendall(head.encode() + b"\r\n" + body)
        r = http.client.HTTPResponse(sock)
        r.begin()
        data = r.read()
        sock.close()
        return r.status, r.getheader("Mcp-Session-Id"), json.loads(data) if data else None

    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "mcp_http.py", "version": "1"}}}
    p = serve()
    try:
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600, oct(os.lstat(path).st_mode)
        st, sid, body = call(init)
        assert st == 200 and body["result"]["serverInfo"]["name"] == "kbox", (st, body)
        assert call({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)[0] == 202
        st, _, body = call({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                            "params": {"name": "run_python", "arguments": {"code": "6 * 7"}}},
                           sid)
        assert st == 200 and body["result"]["content"][0]["text"].endswith("Out[1]: 42\n"), body
        assert call({"jsonrpc": "2.0", "id": 3, "method": "ping"}, sid,
                    origin="http://localhost")[0] == 403
        r = subprocess.run([KBOX, "mcp", "--http", "unix:" + path], capture_output=True,
                           text=True, timeout=60, stdin=subprocess.DEVNULL,
                           env=dict(os.environ, KBOX_MCP_TOKEN=TOKEN))
        assert (r.returncode, r.stderr) == (
            5, f"kbox mcp: cannot listen on unix:{path}: a server listens there already\n"), r
    finally:
        p.kill()
        p.wait(60)
    assert stat.S_ISSOCK(os.lstat(path).st_mode)  # left by the kill
    p = serve()
    try:
        assert call(init)[0] == 200
        # its file removed by hand, and another server there since: the
        # first one's end removes only its own file, not the other's
        os.unlink(path)
        q = serve()
        p.send_signal(signal.SIGTERM)
        assert p.wait(90) == 0
        assert stat.S_ISSOCK(os.lstat(path).st_mode) and call(init)[0] == 200
        p = q
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(90) == 0
    assert not os.path.lexists(path)
    # the killed server's conversation ends at the end of its input, and
    # removes its session
    deadline = time.time() + 60  # a bound
    while own_sessions() and time.time() < deadline:
        time.sleep(0.1)
    assert own_sessions() == [], own_sessions()


check("a_unix_socket_address_serves_its_owner_only", t_unix)


def fails(args, env, want):
    r = subprocess.run([KBOX, "mcp", *args], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL, env=dict(os.environ, **env))
    assert (r.returncode, r.stdout, r.stderr) == (2, "", want + "\n"), r


def t_refused():
    f = os.path.join(BASE, "token-open")
    with open(f, "w") as fh:
        fh.write(TOKEN + "\n")
    os.chmod(f, 0o644)
    fails(["--http", "127.0.0.1:0", "--token-file", f], {},
          f"kbox mcp: --token-file {f}: others may read it (mode 0644): chmod 600 {f}")
    fails(["--http", "127.0.0.1:0"], {"KBOX_MCP_TOKEN": "short"},
          "kbox mcp: the token in KBOX_MCP_TOKEN is shorter than 16 characters "
          "(make one with: head -c 24 /dev/urandom | base64)")
    fails(["--token-file", f], {}, "kbox mcp: --token-file is for --http")
    # what no client could send, or no file at all (newcomer report 8, F6):
    # a FIFO is not waited on
    for name, make, want in (
            ("token-fifo", lambda p: os.mkfifo(p, 0o600), "not a regular file"),
            ("token-dir", lambda p: os.mkdir(p, 0o700), "not a regular file"),
            ("token-long", lambda p: open(p, "w").write("t" * 300 + "\n"),
             "its first line is longer than 254 characters"),
            ("token-link", lambda p: os.symlink("token-long", p),
             "a symbolic link (refused: give the file itself)"),
            ("token-spaced", lambda p: open(p, "w").write(" " + TOKEN + "\n"), None),
            ("token-empty-line", lambda p: open(p, "w").write("\n" + TOKEN + "\n"), None)):
        p = os.path.join(BASE, name)
        make(p)
        if not os.path.isdir(p):
            os.chmod(p, 0o600)
        if want:
            fails(["--http", "127.0.0.1:0", "--token-file", p], {},
                  f"kbox mcp: --token-file {p}: {want}")
    spaced = os.path.join(BASE, "token-spaced")
    fails(["--http", "127.0.0.1:0", "--token-file", spaced], {},
          f"kbox mcp: the token of --token-file {spaced} has a space or tab at its start or end")
    empty_line = os.path.join(BASE, "token-empty-line")
    fails(["--http", "127.0.0.1:0", "--token-file", empty_line], {},
          f"kbox mcp: the token of --token-file {empty_line} is shorter than 16 characters "
          f"(make one with: (umask 077; head -c 24 /dev/urandom | base64 >{empty_line}))")
    fails(["--http", "127.0.0.1:0"], {"KBOX_MCP_TOKEN": TOKEN + " "},
          "kbox mcp: the token in KBOX_MCP_TOKEN has a space or tab at its start or end")
    fails(["--conversation-idle", "5s"], {}, "kbox mcp: --conversation-idle is for --http")
    fails(["--http", "unix:"], {"KBOX_MCP_TOKEN": TOKEN},
          'kbox mcp: invalid --http "unix:": unix:PATH needs a PATH')
    fails(["--http", "unix:/" + "x" * 107], {"KBOX_MCP_TOKEN": TOKEN},
          'kbox mcp: invalid --http "unix:/%s": unix:PATH, PATH at most 107 bytes' % ("x" * 107))
    for bad in ("0", "-1", "soon"):
        fails(["--http", "127.0.0.1:0", "--conversation-idle", bad], {"KBOX_MCP_TOKEN": TOKEN},
              f'kbox mcp: invalid --conversation-idle "{bad}": expected a duration more than '
              '0 and at most 24d, such as 90s, 10m or 1h')
    fails(["--http", "nowhere"], {"KBOX_MCP_TOKEN": TOKEN},
          'kbox mcp: invalid --http "nowhere": expected ADDR:PORT, such as 127.0.0.1:8808, or '
          'unix:PATH')
    fails(["--http", "127.0.0.1:70000"], {"KBOX_MCP_TOKEN": TOKEN},
          'kbox mcp: invalid --http "127.0.0.1:70000": the port must be a number from 0 to 65535')
    # no token made (and printed) for an address that cannot be taken
    fails(["--http", "localhost:0"], {"KBOX_MCP_TOKEN": ""},
          'kbox mcp: invalid --http "localhost:0": localhost is not an IPv4 address '
          '(or [an IPv6 one])')


check("bad_http_options_are_one_line_and_exit_2", t_refused)

# (the server the tests share, when KBOX_TEST_RUN left out the test that
# stops it: never left running)
if s.p.poll() is None:
    s.stop()
plan()
