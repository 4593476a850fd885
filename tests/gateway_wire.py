"""tests/gateway_wire.py — kbox-gateway run against a hostile Jupyter
server spoken on raw sockets, for tests/gateway_wire.sh: the server here is
a few lines of HTTP/1.1 and RFC 6455 of its own (no web framework, which
would not let it misbehave at the wire), on 127.0.0.1, its port the OS's.
This script also plays the supervisor: it runs the helper with the two
lines on its standard input, its status lines on descriptor 3 and the
directory of its sockets on descriptor 4 (gateway_proto.h), and talks to
the sockets it binds with ZeroMQ.

Usage: gateway_wire.py HELPER SCENARIO DIR
  HELPER    the kbox-gateway to run
  SCENARIO  upgrade | bad_accept | no_upgrade | unoffered_protocol | pingflood | flood |
            legacy | slowread | stall_post_remove | stall_post_sigterm |
            stall_post_unanswered | stall_dir_remove | stall_upgrade_eof
  DIR       a directory of the test's (the sockets are made in DIR/sock)

Standard output: one JSON object, what was seen (the shell test judges it):
  error     null, or why the script could not go on (an event that did not
            come within BOUND seconds: a hang guard, not a judgement)
  url, token, kid
  status    the helper's status lines, parsed, in order
  stderr    the lines of its standard error
  rc        its exit status (None when it had to be killed)
  requests  the requests the server read, in order: {"line", "headers"
            (lower-case names), "raw" (the header lines as sent), "body"}
  ws        what the server's WebSocket side saw, per scenario
  driver    what the supervisor's side saw, per scenario
A log of what happened goes to standard error.
"""
import base64, hashlib, hmac, json, os, signal, socket, struct, subprocess, sys
import threading, time, uuid

import zmq

HELPER, SCENARIO, DIR = sys.argv[1:4]
BOUND = 60  # s: the longest any one event is waited for (a hang guard)
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PROTO = "v1.kernel.websocket.jupyter.org"
KID = "0e9a6f0c-wire"
TOKEN = "wire-token-" + uuid.uuid4().hex
KEY = uuid.uuid4().hex.encode()
MAX_MSG = 64 << 20  # the helper's MAX_MSG (KBOX_MAX_MESSAGE_BYTES)
NUMBERED = 100000  # slowread's messages: ~20 MB, past every queue on the way
# what the helper says (to its log) when a stop comes while the POST that
# starts the kernel waits
GRACE_SAID = "kbox-gateway: stopped while the server starts the kernel"
# the legacy text that costs over LEGACY_COST_MAX (256 MiB) by kx_json_cost
# (64 a "," of 6 Mi zeros: 384 MiB) and would cost jansson about as much
COSTLY_ZEROS = 6 << 20


class Timeout(Exception):
    pass


T0 = time.monotonic()


def log(*a):
    """A line of the log (when, for whoever reads it: nothing is timed)."""
    print("[wire %.3f]" % (time.monotonic() - T0), *a, file=sys.stderr, flush=True)


# ---- shared state: one condition for every event of both sides ----

cond = threading.Condition()
state = {"requests": [], "ws": {}, "status": [], "status_eof": False, "stderr": []}


def note(**kw):
    """An event of either side's, under the name KEY."""
    log("event:", kw)
    with cond:
        state["ws"].update(kw)
        cond.notify_all()


def wait(pred, what):
    """Wait until PRED() (under the lock) is true, at most BOUND s."""
    with cond:
        if not cond.wait_for(pred, BOUND):
            raise Timeout("no %s within %d s" % (what, BOUND))


def ws_seen(key):
    return lambda: key in state["ws"]


# ---- the messages ----


def header(msg_type, session="wire"):
    return {"msg_id": uuid.uuid4().hex, "msg_type": msg_type, "session": session,
            "username": "k", "version": "5.3", "date": "2026-01-01T00:00:00.000000Z"}


def parts_of(msg_type, parent, content):
    return [json.dumps(header(msg_type)).encode(), json.dumps(parent).encode(), b"{}",
            json.dumps(content).encode()]


def v1(channel, parts):
    offs = [8 * (1 + 1 + len(parts) + 1)]
    offs.append(offs[-1] + len(channel))
    for p in parts:
        offs.append(offs[-1] + len(p))
    return (struct.pack("<Q", len(offs)) + b"".join(struct.pack("<Q", o) for o in offs)
            + channel.encode() + b"".join(parts))


def unv1(data):
    n = struct.unpack("<Q", data[:8])[0]
    offs = [struct.unpack("<Q", data[8 * (i + 1):8 * (i + 2)])[0] for i in range(n)]
    return (data[offs[0]:offs[1]].decode(),
            [data[offs[i]:offs[i + 1]] for i in range(1, n - 1)])


def legacy(channel, parts):
    """A legacy (JSON text) message of the four dicts PARTS."""
    keys = ("header", "parent_header", "metadata", "content")
    j = {k: json.loads(p) for k, p in zip(keys, parts)}
    j.update(channel=channel, buffers=[])
    return json.dumps(j).encode()


def frame(op, payload):
    """A server's frame (unmasked), FIN set."""
    n = len(payload)
    if n < 126:
        head = bytes([0x80 | op, n])
    elif n < 65536:
        head = bytes([0x80 | op, 126]) + struct.pack(">H", n)
    else:
        head = bytes([0x80 | op, 127]) + struct.pack(">Q", n)
    return head + payload


def accept_of(key):
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


# ---- the server: HTTP/1.1 and RFC 6455 on raw sockets ----


class Conn:
    """A connection of the helper's, read as a stream."""

    def __init__(self, sock):
        self.s = sock
        self.buf = bytearray()
        sock.settimeout(BOUND)

    def need(self, n):
        while len(self.buf) < n:
            d = self.s.recv(1 << 20)
            if not d:
                raise EOFError("the helper closed the connection")
            self.buf += d
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def head(self):
        """The next request's head: (line, raw header lines), None at EOF."""
        while b"\r\n\r\n" not in self.buf:
            d = self.s.recv(65536)
            if not d:
                return None
            self.buf += d
        i = self.buf.index(b"\r\n\r\n")
        text = bytes(self.buf[:i]).decode("latin1")
        del self.buf[:i + 4]
        lines = text.split("\r\n")
        return lines[0], lines[1:]

    def eof(self):
        """Wait until the helper closes the connection (it sends nothing
        more first): True, or False when it sent something."""
        try:
            d = self.s.recv(65536)
        except ConnectionResetError:
            return True
        return not d

    def send(self, data):
        self.s.sendall(data)

    # RFC 6455's frames, as a server reads them (a client's are masked)
    def frame(self):
        b0, b1 = self.need(2)
        fin, op, masked, n = b0 >> 7, b0 & 15, b1 >> 7, b1 & 127
        if n == 126:
            n = struct.unpack(">H", self.need(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", self.need(8))[0]
        mask = self.need(4) if masked else None
        data = self.need(n)
        if mask and n:
            m = (mask * (n // 4 + 1))[:n]
            data = (int.from_bytes(data, "big") ^ int.from_bytes(m, "big")).to_bytes(n, "big")
        return fin, op, bool(masked), data

    def message(self):
        """The next message of the helper's: (opcode, payload); a close
        is (8, its payload); pings are answered."""
        op0, parts = None, []
        while True:
            fin, op, masked, data = self.frame()
            with cond:
                ws = state["ws"]
                ws["frames"] = ws.get("frames", 0) + 1
                ws["unmasked_frames"] = ws.get("unmasked_frames", 0) + (not masked)
            if op == 8:
                return 8, data
            if op == 9:
                self.send(frame(10, data))
                continue
            if op == 10:
                continue
            if op:
                op0 = op
            parts.append(data)
            if fin:
                return op0, b"".join(parts)


def close_code(payload):
    return struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None


def http_reply(c, code, body=None):
    b = json.dumps(body).encode() if body is not None else b""
    c.send(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
           % (code, len(b)) + b)


class Server:
    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.threads = []
        self.channels = 0  # the WebSocket connections so far
        self.wake = None  # finish's own connection: the last
        self.acceptor = threading.Thread(target=self.accept_loop, daemon=True)
        self.acceptor.start()

    def accept_loop(self):
        while True:
            s, addr = self.sock.accept()
            if addr == self.wake:
                s.close()
                return
            t = threading.Thread(target=self.serve, args=(s,), daemon=True)
            with cond:
                self.threads.append(t)
            t.start()

    def finish(self):
        """The helper is gone: take the connections it opened that wait to
        be accepted (a last one of our own comes after them, in the
        queue's order), and let each one's service end."""
        w = socket.socket()
        w.bind(("127.0.0.1", 0))
        self.wake = w.getsockname()
        w.connect(("127.0.0.1", self.port))
        w.close()
        self.acceptor.join(BOUND)
        with cond:
            threads = list(self.threads)
        for t in [self.acceptor] + threads:
            t.join(BOUND)
            if t.is_alive():
                raise Timeout("the server still served the helper's connections %d s after "
                              "it exited" % BOUND)
        self.sock.close()

    def serve(self, s):
        c = Conn(s)
        try:
            while True:
                h = c.head()
                if h is None:
                    return
                line, raw = h
                headers = {}
                for l in raw:
                    k, _, v = l.partition(":")
                    headers[k.strip().lower()] = v.strip()
                n = int(headers.get("content-length", "0"))
                body = c.need(n) if n else b""
                req = {"line": line, "headers": headers, "raw": raw,
                       "body": json.loads(body) if body else None}
                with cond:
                    state["requests"].append(req)
                    cond.notify_all()
                log(line)
                method, target, _ = line.split(" ", 2)
                if SCENARIO == "stall_dir_remove" and target.startswith("/api/contents"):
                    # the kernel's directory is made first: the server
                    # is slow to answer
                    note(contents_stalled=True)
                    wait(lambda: state["ws"].get("answer_contents"), "word to answer")
                    http_reply(c, 200, {"name": "", "path": "", "type": "directory"})
                elif method == "POST" and target == "/api/kernels":
                    if SCENARIO.startswith("stall_post"):
                        if not self.stall_post(c):
                            return
                    else:
                        http_reply(c, 201, {"id": KID, "name": "python3"})
                elif method == "GET" and target.startswith("/api/kernels/%s/channels?" % KID):
                    with cond:
                        self.channels += 1
                        nth = self.channels
                    return self.channels_of(c, headers, nth)
                elif method == "GET" and target == "/api/kernels/" + KID:
                    http_reply(c, 200, {"id": KID, "name": "python3",
                                        "execution_state": "idle"})
                elif method == "DELETE" and target == "/api/kernels/" + KID:
                    http_reply(c, 204)
                else:
                    http_reply(c, 404, {"message": "no " + target})
        except (OSError, EOFError, Timeout) as e:
            log("connection:", e)
        finally:
            s.close()

    def stall_post(self, c):
        """The kernel's start takes long (a pod's launch): the answer, its
        id, waits for the driver's word; or, in stall_post_unanswered,
        until the helper gave up the request (closed its connection), to
        a closed connection then, as a server that went on starting it
        would answer.  True when the connection goes on."""
        note(post_stalled=True)
        if SCENARIO == "stall_post_unanswered":
            note(post_closed_by_helper=c.eof())
        else:
            wait(lambda: state["ws"].get("answer_post"), "word to answer the POST")
        try:
            http_reply(c, 201, {"id": KID, "name": "python3"})
            note(post_answered=True)
        except OSError as e:
            note(post_answered=str(e))
        return SCENARIO != "stall_post_unanswered"

    def upgrade(self, c, headers, protocol=True, accept=None, upgrade="Upgrade: websocket\r\n"):
        key = headers.get("sec-websocket-key", "")
        c.send(("HTTP/1.1 101 Switching Protocols\r\n%s"
                "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n%s\r\n"
                % (upgrade, accept or accept_of(key),
                   "Sec-WebSocket-Protocol: %s\r\n" % PROTO if protocol else "")).encode())

    def quiet(self, c, nth):
        """A well-behaved server's channels: read until the close, which
        is answered, or the end."""
        try:
            while True:
                op, data = c.message()
                if op == 8:
                    note(**{"close_%d" % nth: close_code(data)})
                    c.send(frame(8, data[:2]))
                    return
        except (OSError, EOFError) as e:
            note(**{"end_%d" % nth: str(e)})

    def numbered(self, c, nth):
        """Warm-up output every 10 ms until the driver says it sees it
        (its subscription has arrived), then NUMBERED stream messages,
        "0\\n" to "N-1\\n", in one write (which blocks while the helper
        reads no more), then a quiet server."""
        warm = frame(2, v1("iopub", parts_of("stream", {}, {"name": "stdout",
                                                          "text": "warm\n"})))
        while not state["ws"].get("numbered_go"):
            c.s.sendall(warm)
            with cond:
                cond.wait_for(lambda: state["ws"].get("numbered_go"), 0.01)
        blob = b"".join(frame(2, v1("iopub", parts_of("stream", {}, {
            "name": "stdout", "text": "%d\n" % i}))) for i in range(NUMBERED))
        c.s.sendall(blob)
        note(numbered_sent=len(blob))
        self.quiet(c, nth)

    def channels_of(self, c, headers, nth):
        if SCENARIO == "stall_upgrade_eof":
            note(upgrade_stalled=True)
            note(upgrade_closed_by_helper=c.eof())
            return
        if SCENARIO == "bad_accept":
            # the accept of another key
            self.upgrade(c, headers, accept=accept_of(base64.b64encode(b"x" * 16).decode()))
            note(bad_accept_closed_by_helper=c.eof())
            return
        if SCENARIO == "no_upgrade":
            # a 101 that does not say it upgrades to a WebSocket
            self.upgrade(c, headers, upgrade="")
            note(no_upgrade_closed_by_helper=c.eof())
            return
        if SCENARIO == "unoffered_protocol":
            self.upgrade(c, headers, protocol=True)
            note(unoffered_closed_by_helper=c.eof())
            return
        self.upgrade(c, headers, protocol=SCENARIO != "legacy")
        if nth == 1 and SCENARIO == "pingflood":
            return self.ping_flood(c)
        if nth == 1 and SCENARIO == "slowread":
            return self.numbered(c, nth)
        if nth == 1 and SCENARIO == "flood":
            return self.iopub_flood(c)
        if nth == 1 and SCENARIO == "legacy":
            return self.legacy_bombs(c)
        self.quiet(c, nth)

    def ping_flood(self, c):
        """Pings (125 bytes, the most a ping may carry), and never a byte
        read, until the helper goes; the bytes it took, exactly."""
        blob = memoryview(frame(9, b"p" * 125) * 1024)
        sent = off = 0
        try:
            while True:
                n = c.s.send(blob[off:])
                sent += n
                off = (off + n) % len(blob)
        except OSError as e:
            note(ping_bytes_sent=sent, ping_flood_end=type(e).__name__)

    def iopub_flood(self, c):
        """Output nobody asked for, without a pause: a writer thread sends
        4 MiB of small messages (which cost the helper more to pass on
        than the server to send) again and again, their text "before"
        until a reply was sent between two of them, "after" from then on;
        requests are read meanwhile, and answered by the writer."""
        replies = []
        blobs = {}
        for text in ("before", "after"):
            m = frame(2, v1("iopub", parts_of("stream", {}, {"name": "stdout",
                                                           "text": text + "\n"})))
            blobs[text] = m * ((4 << 20) // len(m))
        sends = [0]

        def writer():
            blob = blobs["before"]
            try:
                while True:
                    with cond:
                        todo = replies[:]
                        del replies[:]
                    for r in todo:
                        c.send(r)
                        note(reply_sent_after_blobs=sends[0])
                        blob = blobs["after"]
                    c.send(blob)
                    sends[0] += 1
            except OSError as e:
                note(flood_blobs=sends[0], flood_end=type(e).__name__)

        w = threading.Thread(target=writer, daemon=True)
        w.start()
        try:
            while True:
                op, data = c.message()
                if op == 8:
                    break
                channel, parts = unv1(data)
                h = json.loads(parts[0])
                if h["msg_type"] == "execute_request":
                    note(request_after_blobs=sends[0], request_channel=channel,
                         request_opcode=op)
                    with cond:
                        replies.append(frame(2, v1(channel, parts_of(
                            "execute_reply", h, {"status": "ok", "execution_count": 1,
                                                 "user_expressions": {}, "wire": "reply"}))))
        except (OSError, EOFError):
            pass
        w.join(BOUND)

    def legacy_bombs(self, c):
        """Legacy framing (no subprotocol chosen).  To the first request:
        a reply whose JSON costs over LEGACY_COST_MAX to decode, then an
        ordinary one (the marker).  Then, when the driver asks, a frame
        whose header says MAX_MSG + 1 bytes, and what the helper answers."""
        op, data = c.message()
        req = json.loads(data)
        note(legacy_request_opcode=op, legacy_request_keys=sorted(req))
        h = req["header"]
        costly = (b'{"channel":"shell","header":' + json.dumps(header("execute_reply")).encode()
                  + b',"parent_header":' + json.dumps(h).encode()
                  + b',"metadata":{},"content":{"status":"ok","a":['
                  + b"0," * (COSTLY_ZEROS - 1) + b'0]},"buffers":[]}')
        c.send(frame(1, costly))
        marker = legacy("shell", parts_of("execute_reply", h, {
            "status": "ok", "execution_count": 1, "user_expressions": {}, "wire": "marker"}))
        c.send(frame(1, marker))
        note(costly_bytes=len(costly))
        wait(lambda: state["ws"].get("send_oversized"), "word to send the oversized frame")
        c.send(bytes([0x81, 127]) + struct.pack(">Q", MAX_MSG + 1) + b"0" * 1024)
        try:
            while True:
                op, data = c.message()
                if op == 8:
                    note(oversized_answer=close_code(data))
                    break
        except (OSError, EOFError) as e:
            note(oversized_answer=str(e))


# ---- the supervisor's side ----


def sign(parts):
    return hmac.new(KEY, b"".join(parts), hashlib.sha256).hexdigest().encode()


def request(msg_type, content):
    h = header(msg_type, "driver")
    parts = [json.dumps(h).encode(), b"{}", b"{}", json.dumps(content).encode()]
    return h, [b"<IDS|MSG>", sign(parts)] + parts


def signed(frames):
    """FRAMES after the delimiter: (signature right, [header, parent,
    metadata, content] as JSON)."""
    d = frames.index(b"<IDS|MSG>")
    parts = frames[d + 2:d + 6]
    return (hmac.compare_digest(frames[d + 1], sign(parts)),
            [json.loads(p) for p in parts])


def recv(sock, what):
    if not sock.poll(BOUND * 1000):
        raise Timeout("no %s within %d s" % (what, BOUND))
    return sock.recv_multipart()


def hwm_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        return int([l for l in f if l.startswith("VmHWM:")][0].split()[1])


def read_status(fd):
    buf = b""
    while True:
        d = os.read(fd, 65536)
        if not d:
            break
        buf += d
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                v = json.loads(line)
            except ValueError:
                v = line.decode("utf-8", "replace")
            log("status:", line.decode("utf-8", "replace")[:300])
            with cond:
                state["status"].append(v)
                cond.notify_all()
    with cond:
        state["status_eof"] = True
        cond.notify_all()


def read_stderr(f):
    for line in f:
        text = line.decode("utf-8", "replace").rstrip("\n")
        log("stderr:", text[:300])
        with cond:
            state["stderr"].append(text)
            cond.notify_all()


def status_with(key):
    return lambda: any(isinstance(s, dict) and key in s for s in state["status"])


def channels_notice():
    """The notice that the channels dropped (not that of a message dropped)."""
    return any(isinstance(s, dict) and str(s.get("notice", "")).startswith(
        "the kernel's channels dropped") for s in state["status"])


def main():
    out = {"error": None, "url": None, "token": TOKEN, "kid": KID, "rc": None, "status": [],
           "stderr": [], "requests": [], "ws": {}, "driver": {}}
    drv = out["driver"]
    sockdir = os.path.join(DIR, "sock")
    os.mkdir(sockdir, 0o700)
    server = Server()
    out["url"] = server.url
    st_r, st_w = os.pipe()
    dfd = os.open(sockdir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    # descriptors 3 and 4 as gateway_proto.h has them (sh makes them, then
    # is the helper: its pid is the helper's)
    p = subprocess.Popen(["/bin/sh", "-c", 'exec "$0" run 3>&%d 4<&%d %d>&- %d<&-'
                          % (st_w, dfd, st_w, dfd), HELPER],
                         stdin=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(st_w, dfd))
    os.close(st_w)
    os.close(dfd)
    reader = threading.Thread(target=read_status, args=(st_r,), daemon=True)
    reader.start()
    errors = threading.Thread(target=read_stderr, args=(p.stderr,), daemon=True)
    errors.start()
    ctx = zmq.Context()
    try:
        conn = {"transport": "ipc", "ip": "/proc/self/fd/4/k", "shell_port": 1,
                "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5,
                "key": KEY.decode(), "signature_scheme": "hmac-sha256"}
        p.stdin.write((json.dumps({"url": server.url, "token": TOKEN}) + "\n").encode())
        p.stdin.write((json.dumps({"kernel": "python3", "launch_timeout": 300,
                                   "legacy": SCENARIO == "unoffered_protocol",
                                   "dir": "kbox/wire" if SCENARIO == "stall_dir_remove" else None,
                                   "connection": conn}) + "\n").encode())
        p.stdin.flush()
        drive(p, server, ctx, sockdir, drv)
    except (Timeout, OSError, EOFError, KeyError, IndexError, ValueError) as e:
        out["error"] = "%s: %s" % (type(e).__name__, e)
        log("error:", out["error"])
    finally:
        ctx.destroy(linger=0)
        # the end: "remove" (the test's last command, when it gave none)
        try:
            if p.poll() is None and not p.stdin.closed:
                p.stdin.write(b"remove\n")
            p.stdin.close()
        except OSError:
            pass
        try:
            out["rc"] = p.wait(BOUND)
        except subprocess.TimeoutExpired:
            out["error"] = out["error"] or "the helper still ran %d s after remove" % BOUND
            p.kill()
            p.wait()
        reader.join(BOUND)
        errors.join(BOUND)
        try:
            server.finish()
        except Timeout as e:
            out["error"] = out["error"] or str(e)
        with cond:
            out["status"] = state["status"]
            out["stderr"] = state["stderr"]
            out["requests"] = state["requests"]
            out["ws"] = state["ws"]
    print(json.dumps(out))


def drive(p, server, ctx, sockdir, drv):
    ep = lambda port: "ipc://%s/k-%d" % (sockdir, port)
    if SCENARIO.startswith("stall_post"):
        wait(ws_seen("post_stalled"), "stalled POST /api/kernels")
        if SCENARIO == "stall_post_sigterm":
            p.send_signal(signal.SIGTERM)
        elif SCENARIO == "stall_post_remove":
            p.stdin.write(b"remove\n")
            p.stdin.flush()
        else:
            p.stdin.close()
        if SCENARIO != "stall_post_unanswered":
            # the stop was taken (the helper says so in its log): the
            # server answers now
            wait(lambda: any(GRACE_SAID in l for l in state["stderr"]),
                 "the helper's word that it awaits the POST's answer")
            note(answer_post=True)
        wait(lambda: state["status_eof"], "end of the status lines")
        wait(ws_seen("post_answered"), "answer of the stalled POST")
        return
    if SCENARIO == "stall_dir_remove":
        wait(ws_seen("contents_stalled"), "stalled GET /api/contents")
        p.stdin.write(b"remove\n")
        p.stdin.flush()
        wait(lambda: state["status_eof"], "end of the status lines")
        note(answer_contents=True)
        return
    if SCENARIO == "stall_upgrade_eof":
        wait(ws_seen("upgrade_stalled"), "stalled upgrade")
        p.stdin.close()
        wait(lambda: state["status_eof"], "end of the status lines")
        wait(ws_seen("upgrade_closed_by_helper"), "end of the upgrade's connection")
        return
    if SCENARIO in ("bad_accept", "unoffered_protocol", "no_upgrade"):
        wait(lambda: state["status_eof"], "end of the status lines")
        return
    wait(status_with("started"), "started line")
    if SCENARIO == "upgrade":
        drv["hwm_kib"] = hwm_kib(p.pid)  # (the helper's own, for comparison)
    elif SCENARIO == "pingflood":
        wait(channels_notice, "notice of the dropped channels")
        drv["hwm_kib"] = hwm_kib(p.pid)
        wait(lambda: len([r for r in state["requests"] if "/channels?" in r["line"]]) == 2,
             "second upgrade")
    elif SCENARIO == "flood":
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.connect(ep(2))
        text_of = lambda f: signed(f)[1][3]["text"]
        first = recv(sub, "flood message on iopub")
        ok, parts = signed(first)
        drv["iopub_topic"] = first[0].decode()
        drv["iopub_signed"] = ok
        drv["iopub_content"] = parts[3]
        hb = ctx.socket(zmq.REQ)
        hb.connect(ep(5))
        beat = b"beat-" + uuid.uuid4().hex.encode()
        hb.send(beat)
        drv["hb_echo_same"] = recv(hb, "heartbeat's echo") == [beat]
        shell = ctx.socket(zmq.DEALER)
        shell.setsockopt(zmq.IDENTITY, b"driver-shell")
        shell.connect(ep(1))
        h, frames = request("execute_request", {"code": "1", "silent": False})
        shell.send_multipart(frames)
        log("driver: execute_request sent")
        # (iopub read meanwhile, as the supervisor reads it: the helper
        # reads the server no more while its iopub queue is full)
        poller = zmq.Poller()
        poller.register(shell, zmq.POLLIN)
        poller.register(sub, zmq.POLLIN)
        end = time.monotonic() + BOUND
        reply = None
        while reply is None:
            if time.monotonic() > end:
                raise Timeout("no execute_reply within %d s" % BOUND)
            ready = dict(poller.poll(1000))
            for _ in range(10000 if sub in ready else 0):
                try:
                    sub.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
            if shell in ready:
                reply = shell.recv_multipart()
        log("driver: execute_reply received")
        ok, parts = signed(reply)
        drv["reply_signed"] = ok
        drv["reply_type"] = parts[0]["msg_type"]
        drv["reply_parent_is_the_request"] = parts[1]["msg_id"] == h["msg_id"]
        drv["reply_content"] = parts[3]
        # the flood goes on past the reply: its "after" messages come
        while True:
            f = recv(sub, "flood message sent after the reply")
            if text_of(f) == "after\n":
                drv["flood_after_reply_signed"] = signed(f)[0]
                break
    elif SCENARIO == "slowread":
        # a supervisor that reads slowly: nothing is lost, the helper
        # reads the server no more meanwhile
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.connect(ep(2))
        text_of = lambda f: json.loads(f[-1])["text"]
        while text_of(recv(sub, "warm-up output")) != "warm\n":
            pass
        note(numbered_go=True)
        got, slow = [], 0
        while len(got) < NUMBERED:
            t = text_of(recv(sub, "numbered output"))
            if t == "warm\n":
                continue
            got.append(t)
            # (the first 2000 read slowly: the server sends on, and the
            # queues on the way fill; what is read is judged, not when)
            if slow < 2000:
                slow += 1
                time.sleep(0.001)
        drv["numbered_in_order"] = got == ["%d\n" % i for i in range(NUMBERED)]
        drv["numbered_got"] = len(got)
        drv["hwm_kib"] = hwm_kib(p.pid)
    elif SCENARIO == "legacy":
        shell = ctx.socket(zmq.DEALER)
        shell.setsockopt(zmq.IDENTITY, b"driver-shell")
        shell.connect(ep(1))
        h, frames = request("execute_request", {"code": "1", "silent": False})
        shell.send_multipart(frames)
        reply = recv(shell, "execute_reply")
        ok, parts = signed(reply)
        drv["first_reply_signed"] = ok
        drv["first_reply_parent_is_the_request"] = parts[1]["msg_id"] == h["msg_id"]
        drv["first_reply_content"] = parts[3]
        drv["hwm_kib"] = hwm_kib(p.pid)
        with cond:
            drv["status_before_oversized"] = list(state["status"])
        note(send_oversized=True)
        wait(channels_notice, "notice of the dropped channels")
        wait(ws_seen("oversized_answer"), "the helper's answer to the oversized frame")
        drv["hwm_kib_after_oversized"] = hwm_kib(p.pid)
        drv["more_replies"] = shell.poll(0)
    # the supervisor's remove
    log("driver: remove")
    p.stdin.write(b"remove\n")
    p.stdin.flush()
    wait(lambda: state["status_eof"], "end of the status lines")


if __name__ == "__main__":
    main()
