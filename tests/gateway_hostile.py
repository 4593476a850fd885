"""tests/gateway_hostile.py — a hostile Jupyter server, for tests/gateway.sh
(threats.md row 58): it speaks the REST API and the kernel channels'
v1.kernel.websocket.jupyter.org framing as a real server does, and plays
a kernel that answers, but before every answer it sends what a hostile or
broken server could: a text frame, offsets that point past the end, the
channel "hb", a header that is no JSON, a reply to a request nobody made,
2000 parts.  A stand-in is right here: the attack is the server itself.

Usage: gateway_hostile.py PORTFILE DIR [MODE]: with "redirect",
every request is answered with a redirect to a second server of its own,
which records what reaches it (DIR/reached); with "flood", once the
kernel first answered, output nobody asked for is sent without end.  Writes its port to
PORTFILE; DIR/post.json the body of each POST /api/kernels (the last), and
DIR/deleted when its kernel is deleted.

Without a mode it has no contents API (as a Kernel Gateway).  The modes
"patch_fails" and "contents_stall" have one, jupyter_server's shapes
(GET, PUT with "chunk", DELETE, PATCH of /api/contents/PATH) over the
files of DIR/root, which misbehaves: with "patch_fails", every PATCH (a
rename) fails with jupyter_server's 500 for an error of the disk, and a
PUT of a file whose name begins with "denied" with its 403 for a file it
may not write, and its file handler (/files/PATH) lies about some files
(see Files); with
"contents_stall", a GET of the content of a file whose name begins with
"stall" is answered with a 200 and its headers, then a space every 2 s
and never its end (DIR/stalled once it came, DIR/stall-closed once the
client went away).
"""
import base64, json, os, shutil, socket, struct, sys, uuid, datetime
import tornado.gen, tornado.ioloop, tornado.iostream, tornado.web, tornado.websocket

KID = "0e9a6f0c-hostile"
PROTO = "v1.kernel.websocket.jupyter.org"
SPEC = {"argv": ["python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Hostile", "language": "python", "interrupt_mode": "signal",
        "env": {}, "metadata": {}}


def v1(channel, parts):
    offs = [8 * (1 + 1 + len(parts) + 1)]
    offs.append(offs[-1] + len(channel))
    for p in parts:
        offs.append(offs[-1] + len(p))
    head = struct.pack("<Q", len(offs)) + b"".join(struct.pack("<Q", o) for o in offs)
    return head + channel.encode() + b"".join(parts)


def unv1(data):
    n = struct.unpack("<Q", data[:8])[0]
    offs = [struct.unpack("<Q", data[8 * (i + 1):8 * (i + 2)])[0] for i in range(n)]
    channel = data[offs[0]:offs[1]].decode()
    return channel, [data[offs[i]:offs[i + 1]] for i in range(1, n - 1)]


def msg(msg_type, parent, content, session="hostile"):
    h = {"msg_id": uuid.uuid4().hex, "msg_type": msg_type, "session": session,
         "username": "k", "version": "5.3",
         "date": datetime.datetime.utcnow().isoformat() + "Z"}
    return [json.dumps(h).encode(), json.dumps(parent).encode(), b"{}",
            json.dumps(content).encode()]


class Specs(tornado.web.RequestHandler):
    def get(self, name):
        if name != "python3":
            self.set_status(404)
            return self.finish({"message": "No such kernel spec %s" % name})
        self.finish({"name": "python3", "spec": SPEC, "resources": {}})


class SpecList(tornado.web.RequestHandler):
    def get(self):
        self.finish({"default": "python3",
                     "kernelspecs": {"python3": {"name": "python3", "spec": SPEC, "resources": {}}}})


class Kernels(tornado.web.RequestHandler):
    def post(self):
        # what a client asks, as Enterprise Gateway reads it (its "env")
        with open(os.path.join(DIR, "post.json"), "wb") as f:
            f.write(self.request.body)
        self.set_status(201)
        self.finish({"id": KID, "name": "python3", "execution_state": "starting",
                     "connections": 0, "last_activity": "2026-01-01T00:00:00Z"})


class Kernel(tornado.web.RequestHandler):
    def get(self, kid):
        self.finish({"id": KID, "name": "python3", "execution_state": "idle",
                     "connections": 1, "last_activity": "2026-01-01T00:00:00Z"})

    def delete(self, kid):
        open(os.path.join(DIR, "deleted"), "w").close()
        self.set_status(204)
        self.finish()


class Interrupt(tornado.web.RequestHandler):
    def post(self, kid):
        self.set_status(204)
        self.finish()


class Channels(tornado.websocket.WebSocketHandler):
    def select_subprotocol(self, subprotocols):
        return PROTO if PROTO in subprotocols else None

    def junk(self, parent):
        self.write_message("{\"channel\": \"shell\"}")             # text in v1
        good = v1("iopub", msg("stream", parent, {"name": "stdout", "text": "forged\n"}))
        bad = bytearray(good)
        bad[16:24] = struct.pack("<Q", 1 << 40)                     # past the end
        self.write_message(bytes(bad), binary=True)
        self.write_message(v1("hb", msg("status", parent, {})), binary=True)
        parts = msg("stream", parent, {"name": "stdout", "text": "forged\n"})
        self.write_message(v1("iopub", [b"not json {"] + parts[1:]), binary=True)
        self.write_message(v1("shell", msg("execute_reply", {"msg_id": "nope"},
                                           {"status": "ok", "execution_count": 99})),
                           binary=True)
        self.write_message(v1("iopub", parts + [b"x"] * 2000), binary=True)
        self.write_message(b"\x01\x00", binary=True)               # too short

    def on_message(self, data):
        if isinstance(data, str):
            return
        channel, parts = unv1(data)
        header = json.loads(parts[0])
        t = header["msg_type"]
        self.junk(header)
        send = lambda ch, m: self.write_message(v1(ch, m), binary=True)
        send("iopub", msg("status", header, {"execution_state": "busy"}))
        if t == "kernel_info_request":
            send(channel, msg("kernel_info_reply", header, {
                "status": "ok", "protocol_version": "5.3", "implementation": "hostile",
                "implementation_version": "1", "banner": "",
                "language_info": {"name": "python", "version": "3", "mimetype": "text/x-python",
                                  "file_extension": ".py"}}))
        elif t == "execute_request":
            send("iopub", msg("stream", header, {"name": "stdout", "text": "ok\n"}))
            send(channel, msg("execute_reply", header, {"status": "ok", "execution_count": 1,
                                                         "user_expressions": {}}))
        else:
            send(channel, msg(t.replace("_request", "_reply"), header, {"status": "ok"}))
        send("iopub", msg("status", header, {"execution_state": "idle"}))
        if FLOOD and not getattr(self, "flooding", False):
            # from now on, without end: output nobody asked for, as fast
            # as the loop turns (a kernel's flood, or a server's)
            self.flooding = True
            junk = v1("iopub", msg("stream", {}, {"name": "stdout", "text": "x" * 65536}))

            def more():
                if self.ws_connection is None:
                    return
                for _ in range(16):
                    self.write_message(junk, binary=True)
                tornado.ioloop.IOLoop.current().add_callback(more)
            more()


class Contents(tornado.web.RequestHandler):
    """/api/contents/PATH over DIR/root, as jupyter_server's
    FileContentsManager (LargeFileManager) answers, but for MODE's
    misbehaviour."""

    def write_error(self, status_code, **kwargs):
        e = kwargs.get("exc_info", (None, None))[1]
        self.finish({"message": getattr(e, "log_message", None) or self._reason,
                     "reason": getattr(e, "reason", None)})

    def os_path(self, path):
        path = path.strip("/")
        if any(c in ("", ".", "..") or c.startswith(".") for c in path.split("/") if path):
            raise tornado.web.HTTPError(400, "Cannot access file or directory %r" % path)
        return os.path.join(ROOT, path) if path else ROOT

    def model(self, path, content=False):
        path = path.strip("/")
        p = self.os_path(path)
        if not os.path.lexists(p):
            raise tornado.web.HTTPError(404, "file or directory does not exist: %r" % path)
        st = os.lstat(p)
        when = datetime.datetime.utcfromtimestamp(st.st_mtime).isoformat() + "Z"
        m = {"name": path.rsplit("/", 1)[-1], "path": path, "last_modified": when,
             "created": when, "content": None, "format": None, "mimetype": None,
             "size": st.st_size, "writable": True}
        if os.path.isdir(p):
            m.update(type="directory", size=None)
            if content:
                m.update(format="json", content=[self.model(path + "/" + n if path else n)
                                                 for n in sorted(os.listdir(p))
                                                 if not n.startswith(".")])
        else:
            m["type"] = "file"
            if content:
                with open(p, "rb") as f:
                    data = f.read()
                m.update(format="base64", mimetype="application/octet-stream",
                         content=base64.encodebytes(data).decode("ascii"))
        return m

    async def get(self, path=""):
        content = self.get_query_argument("content", "1") == "1"
        want = self.get_query_argument("type", None)
        m = self.model(path)
        if content and m["type"] == "file":
            asked("contents " + path.strip("/"))
        if want == "directory" and m["type"] != "directory":
            raise tornado.web.HTTPError(400, "%s is not a directory" % path)
        if content and m["type"] == "file" and STALL and m["name"].startswith("stall"):
            # the reply begins, and never ends
            open(os.path.join(DIR, "stalled"), "w").close()
            self.stalling = True
            self.set_header("Content-Type", "application/json")
            self.write(b"{")
            try:
                while True:
                    await self.flush()
                    await tornado.gen.sleep(2)
                    self.write(b" ")
            except tornado.iostream.StreamClosedError:
                return
        self.finish(self.model(path, content))

    def on_connection_close(self):
        if getattr(self, "stalling", False):
            open(os.path.join(DIR, "stall-closed"), "w").close()

    def put(self, path):
        body = json.loads(self.request.body or b"{}")
        p = self.os_path(path)
        if PATCH_FAILS and os.path.basename(path).startswith("denied"):
            # jupyter_server's perm_to_403: a file the server may not write
            raise tornado.web.HTTPError(403, "Permission denied: %s" % path.strip("/"))
        existed = os.path.lexists(p)
        if body.get("type") == "directory":
            if not os.path.isdir(p):
                os.mkdir(p)
        elif body.get("type") == "file" and body.get("format") == "base64":
            if not os.path.isdir(os.path.dirname(p)):
                raise tornado.web.HTTPError(404, "No such directory: %r" % path)
            chunk = body.get("chunk")
            data = base64.b64decode(body.get("content", ""))
            if os.path.islink(p):
                os.unlink(p)
            with open(p, "ab" if chunk and chunk != 1 else "wb") as f:
                f.write(data)
        else:
            raise tornado.web.HTTPError(400, "No file type provided")
        self.set_status(200 if existed else 201)
        self.finish(self.model(path))

    def delete(self, path):
        p = self.os_path(path)
        if not os.path.lexists(p):
            raise tornado.web.HTTPError(404, "File or directory does not exist: %s" % path)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)
        self.set_status(204)
        self.finish()

    def patch(self, path):
        new = json.loads(self.request.body or b"{}").get("path", "").strip("/")
        old_p, new_p = self.os_path(path), self.os_path(new)
        if PATCH_FAILS:
            # jupyter_server's rename_file, when the move fails
            raise tornado.web.HTTPError(
                500, "Unknown error renaming file: %s [Errno 28] No space left on device"
                % path.strip("/"))
        if os.path.lexists(new_p):
            raise tornado.web.HTTPError(409, "File already exists: %s" % new)
        os.rename(old_p, new_p)
        self.finish(self.model(new))


class Files(tornado.web.RequestHandler):
    """/files/PATH over DIR/root, as jupyter_server's file handler sends a
    file's bytes, but a file whose name begins with "liar" comes with 100
    bytes more after it (no length said), one whose name begins with "short"
    without its last byte (and a Content-Length that says so), and one whose
    name begins with "cut" with its whole length said, then the connection
    closed 10 bytes short, and one whose name begins with "hang" its first
    half, then nothing.  Each request's path, and each GET of a file's
    content by the contents API, is a line of DIR/asked."""

    async def get(self, path):
        p = os.path.join(ROOT, path)
        if path.startswith(".") or "/." in path or not os.path.isfile(p):
            raise tornado.web.HTTPError(404)
        with open(p, "rb") as f:
            data = f.read()
        name = os.path.basename(p)
        asked("files " + path)
        self.set_header("Content-Type", "application/octet-stream")
        if name.startswith("short"):
            data = data[:-1]
        if name.startswith("hang"):
            # its first half, then nothing, until the client goes
            self.write(data[:len(data) // 2])
            await self.flush()
            while not self.request.connection.stream.closed():
                await tornado.gen.sleep(0.5)
            return
        if name.startswith("cut"):
            # its length said, then the connection closed 10 bytes short
            # (as jupyter_server's, when the file shrank as it was sent)
            self.set_header("Content-Length", str(len(data)))
            self.write(data[:-10])
            await self.flush()
            self.request.connection.close()
            return
        self.write(data)
        if name.startswith("liar"):
            # the file whole, then (a moment later: a read of its own)
            # more
            await self.flush()
            await tornado.gen.sleep(0.2)
            self.write(b"x" * 100)
        self.finish()


def asked(what):
    with open(os.path.join(DIR, "asked"), "a") as f:
        f.write(what + "\n")


class Redirect(tornado.web.RequestHandler):
    def prepare(self):
        self.redirect("http://127.0.0.1:%s%s" % (TARGET, self.request.uri), status=302)


class Record(tornado.web.RequestHandler):
    def prepare(self):
        with open(os.path.join(DIR, "reached"), "a") as f:
            f.write("%s %s %s\n" % (self.request.method, self.request.uri,
                                    dict(self.request.headers)))
        self.finish({})


def listen(app):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(128)
    s.setblocking(False)
    server = tornado.httpserver.HTTPServer(app)
    server.add_sockets([s])
    return s.getsockname()[1]


if __name__ == "__main__":
    import tornado.httpserver
    portfile, DIR = sys.argv[1], sys.argv[2]
    MODE = sys.argv[3] if len(sys.argv) > 3 else ""
    FLOOD = MODE == "flood"
    PATCH_FAILS = MODE == "patch_fails"
    STALL = MODE == "contents_stall"
    ROOT = os.path.join(DIR, "root")
    contents = []
    if MODE in ("patch_fails", "contents_stall"):
        os.makedirs(ROOT, exist_ok=True)
        contents = [(r"/api/contents/?(.*)", Contents)]
    if PATCH_FAILS:
        contents.append((r"/files/(.*)", Files))
    if MODE == "redirect":
        TARGET = listen(tornado.web.Application([(r".*", Record)]))
        port = listen(tornado.web.Application([(r".*", Redirect)]))
    else:
        port = listen(tornado.web.Application([
            (r"/api/kernelspecs", SpecList),
            (r"/api/kernelspecs/([^/]+)", Specs),
            (r"/api/kernels", Kernels),
            (r"/api/kernels/([^/]+)/channels", Channels),
            (r"/api/kernels/([^/]+)/interrupt", Interrupt),
            (r"/api/kernels/([^/]+)", Kernel),
        ] + contents))
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % port)
    os.rename(portfile + ".tmp", portfile)
    tornado.ioloop.IOLoop.current().start()
