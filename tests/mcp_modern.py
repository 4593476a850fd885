#!/usr/bin/python3
"""tests/mcp_modern.py KBOX RESULT_SCHEMA — kbox mcp and the revision of
2026-07-28, which has no handshake: every request carries its protocol
version and the client's capabilities in its _meta, server/discover says
what the server speaks, results carry resultType and the server's
identity, list results are cacheable (ttlMs, cacheScope).  The handshake
revisions go on working beside it, on the same connection.  Written from
docs/specification/2026-07-28 (changelog, basic/index, basic/versioning,
server/discover, server/utilities/caching).  Prints TAP.  KBOX_HOME must
be set."""
import os
import re
import subprocess

from mcp_lib import HOME, KBOX, LATEST, Server, check, err_code, ok_result, plan

MODERN = "2026-07-28"
VERSIONS = [MODERN, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07"]
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def meta(version=MODERN, caps=True, extra=None):
    m = {"io.modelcontextprotocol/protocolVersion": version,
         "io.modelcontextprotocol/clientInfo": {"name": "mcp_modern.py", "version": "1"}}
    if caps:
        m["io.modelcontextprotocol/clientCapabilities"] = {}
    m.update(extra or {})
    return {"_meta": m}


s = Server()


def t_discover():
    r = ok_result(s.request("server/discover", meta()))
    assert r["resultType"] == "complete", r
    assert r["supportedVersions"] == VERSIONS, r
    assert r["capabilities"] == {"tools": {}}, r
    assert r["_meta"][SERVER_INFO]["name"] == "kbox" and r["_meta"][SERVER_INFO]["version"], r
    assert r["ttlMs"] >= 0 and r["cacheScope"] in ("public", "private"), r
    assert r["instructions"].startswith("run_python runs Python"), r


check("server_discover_says_the_versions_capabilities_and_identity_cacheably", t_discover)


def t_no_handshake():
    r = ok_result(s.request("tools/list", meta()))
    assert r["resultType"] == "complete" and r["_meta"][SERVER_INFO]["name"] == "kbox", r
    assert r["ttlMs"] >= 0 and r["cacheScope"] == "private", r
    names = [t["name"] for t in r["tools"]]
    assert names == ["run_python", "wait_python", "list_files", "read_file", "write_file",
                     "read_image", "new_session"], names
    # deterministic: the same list again
    assert ok_result(s.request("tools/list", meta()))["tools"] == r["tools"]
    r = ok_result(s.request("tools/call", dict(meta(), name="run_python",
                                               arguments={"code": "x = 6 * 7\nx"})))
    assert r["resultType"] == "complete" and r["isError"] is False, r
    assert r["content"][0]["text"].endswith("Out[1]: 42\n"), r
    assert r["_meta"][SERVER_INFO]["name"] == "kbox", r
    r = ok_result(s.request("tools/call", dict(meta(), name="list_files", arguments={})))
    assert r["resultType"] == "complete" and r["isError"] is False, r


check("requests_with_their_version_in_meta_need_no_initialize_and_say_result_type",
      t_no_handshake)


def t_unsupported():
    r = s.request("tools/list", meta("1999-01-01"))
    assert r["error"] == {"code": -32022, "message": "Unsupported protocol version",
                          "data": {"supported": VERSIONS, "requested": "1999-01-01"}}, r
    # a handshake revision named in _meta is not one of the revision
    # without a handshake either
    r = s.request("server/discover", meta(LATEST))
    assert r["error"]["code"] == -32022 and r["error"]["data"]["requested"] == LATEST, r


check("an_unsupported_version_gets_32022_with_the_supported_and_the_requested", t_unsupported)


def t_missing():
    r = s.request("server/discover", {})
    assert r["error"] == {"code": -32602, "message": 'Invalid params: _meta '
                          '"io.modelcontextprotocol/protocolVersion" (a string) is required'}, r
    r = s.request("tools/list", meta(caps=False))
    assert r["error"] == {"code": -32602, "message": 'Invalid params: _meta '
                          '"io.modelcontextprotocol/clientCapabilities" (an object) is '
                          'required'}, r
    r = s.request("tools/list", meta(extra={"io.modelcontextprotocol/clientCapabilities": 3}))
    assert err_code(r) == -32602, r
    r = s.request("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": 7,
                                           "io.modelcontextprotocol/clientCapabilities": {}}})
    assert err_code(r) == -32602, r


check("a_request_missing_its_version_or_capabilities_is_invalid_params", t_missing)


def t_eras():
    # ping and initialize are not of the revision without a handshake
    assert err_code(s.request("ping", meta())) == -32601
    assert err_code(s.request("initialize", dict(meta(), protocolVersion=MODERN))) == -32601
    # a request without _meta still needs the handshake, which then works
    # on the same connection, and the session is the same
    r = s.request("tools/list")
    assert err_code(r) == -32600 and "2026-07-28" in r["error"]["message"], r
    r = ok_result(s.init(LATEST))
    assert r["protocolVersion"] == LATEST and "resultType" not in r, r
    r = ok_result(s.call("run_python", {"code": "x"}))
    assert r["content"][0]["text"] == "Out[2]: 42\n" and "resultType" not in r, r
    assert ok_result(s.request("ping")) == {}
    # an initialize asking for the revision without a handshake gets the
    # latest handshake one
    o = Server()
    assert ok_result(o.init(MODERN))["protocolVersion"] == LATEST
    assert o.close(30) == 0


check("the_handshake_revisions_work_beside_it_on_one_connection", t_eras)



def call(srv, tool, args):
    """tools/call of the revision without a handshake: (text, result)."""
    r = ok_result(srv.request("tools/call", dict(meta(), name=tool, arguments=args), 120))
    return "".join(c["text"] for c in r["content"] if c["type"] == "text"), r


def t_handles():
    o = Server()
    handles = []
    for _ in range(2):
        text, r = call(o, "new_session", {})
        m = re.fullmatch(r'session (mcp-[0-9a-f]{24}) started: give "session": "\1" to '
                         r'run_python, wait_python and the file tools to work in it; its '
                         r"kernel's state persists between calls, and nothing is defined in "
                         r"it yet", text)
        assert m and r["isError"] is False, text
        handles.append(m[1])
    a, b = handles
    assert a != b
    # one server, two conversations: each its own kernel and workspace
    call(o, "run_python", {"code": "x = 'a'", "session": a})
    call(o, "run_python", {"code": "x = 'b'", "session": b})
    t = call(o, "run_python", {"code": "x", "session": a})[0]
    assert t == "Out[2]: 'a'\n", t
    assert call(o, "run_python", {"code": "x", "session": b})[0] == "Out[2]: 'b'\n"
    call(o, "write_file", {"path": "only-a.txt", "content": "a", "session": a})
    t = call(o, "list_files", {"session": a})[0]
    assert t == "only-a.txt\t1 byte\n", t
    t = call(o, "list_files", {"session": b})[0]
    assert t == ". is empty\n", t
    # without a handle: the connection's own session, where x is not
    text, r = call(o, "run_python", {"code": "'x' in dir()"})
    assert text.endswith("Out[1]: False\n") and text.startswith("[note: new session mcp-"), text
    # a long cell in one session leaves the other free
    text, r = call(o, "run_python", {"code": "import time\nwhile True: time.sleep(0.05)",
                                     "soft_timeout": 1, "session": a})
    assert text.startswith("[note: still running after "), text
    assert call(o, "run_python", {"code": "x * 2", "session": b})[0] == "Out[3]: 'bb'\n"
    assert call(o, "wait_python", {"timeout": 0, "session": b})[0].startswith(
        "wait_python: no code is running")
    text, r = call(o, "wait_python", {"interrupt": True, "session": a})
    assert "[interrupted by wait_python (interrupt: true); state is kept]" in text, text
    # handles this server did not return are refused, whatever exists
    subprocess.run([KBOX, "exec", "-s", "elsewhere", "1"], capture_output=True, check=True)
    for bad in ("mcp-000000000000000000000000", "elsewhere", a.upper()):
        text, r = call(o, "run_python", {"code": "1", "session": bad})
        assert r["isError"] is True and text == (
            'run_python: no session "%s" of this server\'s: a session is a handle that '
            'new_session returned here (or leave "session" out for the connection\'s own)'
            % bad), text
    text, r = call(o, "list_files", {"session": 5})
    assert text == 'list_files: "session" is a handle that new_session returned (a string)', text
    # the sessions it made go with it
    assert o.close(90) == 0
    for h in handles:
        assert not os.path.exists(os.path.join(HOME, "sessions", h)), h
    subprocess.run([KBOX, "stop", "-s", "elsewhere"], capture_output=True)


check("new_session_gives_handles_one_server_serves_many_conversations", t_handles)


def t_handles_bounded():
    # each a kernel: at most --max-sessions of them (default 4), then an
    # error result that says so; the connection's own session still works
    o = Server("--max-sessions", "1")
    text, r = call(o, "new_session", {})
    assert r["isError"] is False and text.startswith("session mcp-"), text
    text, r = call(o, "new_session", {})
    assert r["isError"] is True and text == (
        "new_session: this server keeps at most 1 session of new_session's at once (each a "
        "kernel of its own; kbox mcp --max-sessions), and has made it: use that one, "
        'or the connection\'s own (leave "session" out)'), text
    assert len([d for d in os.listdir(os.path.join(HOME, "sessions"))
                if d.startswith("mcp-")]) >= 1
    assert o.close(90) == 0
    o = Server("--max-sessions", "0")
    text, r = call(o, "new_session", {})
    assert r["isError"] is True and text == (
        'new_session: this server makes no new sessions (kbox mcp --max-sessions 0): leave '
        '"session" out to work in the connection\'s own'), text
    assert o.close(60) == 0


check("new_session_makes_at_most_max_sessions", t_handles_bounded)

assert s.close(60) == 0
plan()
