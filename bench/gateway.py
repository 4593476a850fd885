#!/usr/bin/python3
"""bench/gateway.py - backend gateway: a call's round trip and a start, against Python clients of the same server.

    /usr/bin/python3 bench/gateway.py [KBOX] [-n N] [--rounds R] [--starts S] [--json FILE]

Starts a Jupyter Server (Debian's python3-jupyter-server) on 127.0.0.1
with a token, in a private directory (removed at the end), and a kbox
session on it (`kbox start --backend gateway`).  On the session's remote
kernel, in R rounds (default 5) whose order rotates, N calls (default
100) of execute("1+1") each, the round trip until the reply and the
kernel's idle:

  kbox mcp      run_python through `kbox mcp -s bench` over stdio (kbox's
                path as an agent uses it: the supervisor, kbox-gateway,
                the server's WebSocket);
  ws v1         a Python WebSocket client (python3-websocket) on the
                kernel's channels, the v1.kernel.websocket.jupyter.org
                framing, its own session;
  ws legacy     the same with the legacy JSON framing, as jupyter_server's
                GatewayClient speaks it;
  zmq           jupyter_client's BlockingKernelClient on the kernel's own
                connection file (the server's, in its runtime directory):
                the floor, no server in the way.

Then S starts (default 5) to the first result: `kbox start` + `kbox exec
'1+1'` (and the kernel deleted with `kbox stop`, not timed), against POST
/api/kernels + the WebSocket + execute in Python (then DELETE, not timed).

Every answer is checked (2, and status ok).  Reported: median, p10, p90 (ms)
per measure, and the ratios kbox mcp / ws legacy, kbox mcp / ws v1 (goal
<= 1.0), kbox mcp / zmq, and start kbox / start Python.
The Python WebSocket client leaves TCP's delayed ACK on, as every client
does but kbox-gateway (TCP_QUICKACK); Jupyter Server leaves Nagle's
algorithm on, so each of its small messages after the first waits for
that ACK (~40 ms): the ratio says what a client gets, and why.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Rest:
    def __init__(self, port, token):
        self.base = "http://127.0.0.1:%d" % port
        self.h = {"Authorization": "token " + token}

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=dict(
            self.h, **({"Content-Type": "application/json"} if body is not None else {})))
        with urllib.request.urlopen(req, timeout=120) as r:
            text = r.read()
            return json.loads(text) if text else None


def v1_pack(channel, parts):
    offs = [8 * (1 + 1 + len(parts) + 1)]
    offs.append(offs[-1] + len(channel))
    for p in parts:
        offs.append(offs[-1] + len(p))
    return (struct.pack("<Q", len(offs)) + b"".join(struct.pack("<Q", o) for o in offs)
            + channel.encode() + b"".join(parts))


def v1_unpack(data):
    n = struct.unpack("<Q", data[:8])[0]
    offs = [struct.unpack("<Q", data[8 * (i + 1):8 * (i + 2)])[0] for i in range(n)]
    return data[offs[0]:offs[1]].decode(), [data[offs[i]:offs[i + 1]] for i in range(1, n - 1)]


class WsClient:
    """A kernel's channels over the server's WebSocket, as a Python front end has them."""

    def __init__(self, port, token, kid, v1):
        import websocket
        self.v1 = v1
        self.session = uuid.uuid4().hex
        self.ws = websocket.create_connection(
            "ws://127.0.0.1:%d/api/kernels/%s/channels?session_id=%s" % (port, kid, self.session),
            header=["Authorization: token " + token],
            subprotocols=["v1.kernel.websocket.jupyter.org"] if v1 else None)

    def execute(self, code):
        mid = uuid.uuid4().hex
        header = {"msg_id": mid, "msg_type": "execute_request", "session": self.session,
                  "username": "bench", "version": "5.3", "date": ""}
        content = {"code": code, "silent": False, "store_history": True,
                   "user_expressions": {}, "allow_stdin": False}
        if self.v1:
            self.ws.send_binary(v1_pack("shell", [json.dumps(x).encode() for x in
                                                  (header, {}, {}, content)]))
        else:
            self.ws.send(json.dumps({"header": header, "parent_header": {}, "metadata": {},
                                     "content": content, "channel": "shell", "buffers": []}))
        reply = idle = None
        result = None
        while reply is None or idle is None:
            data = self.ws.recv()
            if self.v1:
                ch, parts = v1_unpack(data)
                m = {"channel": ch, "header": json.loads(parts[0]),
                     "parent_header": json.loads(parts[1]), "content": json.loads(parts[3])}
            else:
                m = json.loads(data)
            if m["parent_header"].get("msg_id") != mid:
                continue
            t = m["header"]["msg_type"]
            if t == "execute_reply":
                reply = m["content"]
            elif t == "execute_result":
                result = m["content"]["data"]["text/plain"]
            elif t == "status" and m["content"]["execution_state"] == "idle":
                idle = True
        return reply["status"], result

    def close(self):
        self.ws.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kbox", nargs="?", default=os.environ.get("KBOX", "./kbox"))
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.n < 1 or a.rounds < 1 or a.starts < 1 or a.warmup < 0:
        ap.error("-n, --rounds and --starts must be at least 1, --warmup at least 0")
    kbox = os.path.abspath(a.kbox)
    home = tempfile.mkdtemp(prefix="kbg.", dir="/tmp")
    os.chmod(home, 0o711)
    env = dict(os.environ, KBOX_HOME=os.path.join(home, "h"))
    os.mkdir(env["KBOX_HOME"], 0o700)
    for v in ("KBOX_SESSION", "KBOX_KERNEL", "KBOX_BACKEND"):
        env.pop(v, None)
    token = uuid.uuid4().hex
    with open(os.path.join(home, "token"), "w") as f:
        f.write(token + "\n")
    port = free_port()
    sdir = os.path.join(home, "server")
    for d in ("root", "rt"):
        os.makedirs(os.path.join(sdir, d))
    senv = dict(env, JUPYTER_RUNTIME_DIR=os.path.join(sdir, "rt"),
                JUPYTER_CONFIG_DIR=os.path.join(sdir, "rt"),
                JUPYTER_DATA_DIR=os.path.join(sdir, "rt"))
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter_server", "--ip=127.0.0.1", "--port=%d" % port,
         "--port-retries=0", "--no-browser", "--allow-root", "--ServerApp.token=" + token,
         "--ServerApp.root_dir=" + os.path.join(sdir, "root"), "--ServerApp.limit_rate=False"],
        env=senv, stdout=subprocess.DEVNULL, stderr=open(os.path.join(sdir, "log"), "w"))
    rest = Rest(port, token)
    failures = 0
    mcp = None
    clients = []
    try:
        for _ in range(300):
            try:
                rest.call("GET", "/api/status")
                break
            except OSError:
                time.sleep(0.1)
        url = "http://127.0.0.1:%d" % port
        kstart = [kbox, "start", "-s", "bench", "--backend", "gateway", "--url", url,
                  "--token-file", os.path.join(home, "token")]
        subprocess.run(kstart, env=env, check=True, stdout=subprocess.DEVNULL)
        kid = json.loads(subprocess.run([kbox, "status", "-s", "bench", "--json"], env=env,
                                        check=True, capture_output=True,
                                        text=True).stdout)["remote_kernel"]

        from jupyter_client import BlockingKernelClient
        jc = BlockingKernelClient()
        jc.load_connection_file(os.path.join(sdir, "rt", "kernel-%s.json" % kid))
        jc.start_channels()
        jc.wait_for_ready(timeout=60)
        jc.execute_interactive("get_ipython().displayhook.cache_size = 0", allow_stdin=False,
                               output_hook=lambda m: None, timeout=60)
        ws1 = WsClient(port, token, kid, True)
        wsl = WsClient(port, token, kid, False)
        clients = [ws1, wsl]

        mcp = subprocess.Popen([kbox, "mcp", "-s", "bench"], env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, bufsize=1)
        ids = iter(range(1, 10 ** 9))

        def rpc(method, params):
            i = next(ids)
            mcp.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method,
                                        "params": params}) + "\n")
            mcp.stdin.flush()
            while True:
                m = json.loads(mcp.stdout.readline())
                if m.get("id") == i:
                    return m

        rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "bench", "version": "1"}})
        mcp.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
                        + "\n")

        def mcp_call():
            nonlocal failures
            t = time.perf_counter()
            r = rpc("tools/call", {"name": "run_python", "arguments": {"code": "1+1"}})
            dt = time.perf_counter() - t
            res = r.get("result", {})
            text = res.get("content", [{}])[0].get("text", "")
            if res.get("isError") or not text.endswith("]: 2\n"):
                failures += 1
                print("bench/gateway.py: kbox mcp answered %s" % json.dumps(r)[:300],
                      file=sys.stderr)
            return dt

        def ws_call(c):
            def call():
                nonlocal failures
                t = time.perf_counter()
                st, res = c.execute("1+1")
                dt = time.perf_counter() - t
                if st != "ok" or res != "2":
                    failures += 1
                return dt
            return call

        def jc_call():
            nonlocal failures
            t = time.perf_counter()
            reply = jc.execute_interactive("1+1", allow_stdin=False, output_hook=lambda m: None,
                                           timeout=60)
            dt = time.perf_counter() - t
            if reply["content"]["status"] != "ok":
                failures += 1
            return dt

        kinds = [("kbox mcp", mcp_call), ("ws v1", ws_call(ws1)), ("ws legacy", ws_call(wsl)),
                 ("zmq", jc_call)]
        for _, f in kinds:
            for _ in range(a.warmup):
                f()
        times = {k: [] for k, _ in kinds}
        for r in range(a.rounds):
            order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]
            for k, f in order:
                times[k] += [f() * 1000 for _ in range(a.n)]
        mcp.stdin.close()
        mcp.wait(timeout=60)
        mcp = None
        jc.stop_channels()
        for c in clients:
            c.close()
        subprocess.run([kbox, "stop", "-s", "bench"], env=env, stdout=subprocess.DEVNULL)

        # starts to the first result
        nstart = iter(range(1, 10 ** 6))

        def kbox_start():
            nonlocal failures
            name = "start%d" % next(nstart)
            cmd = [x if x != "bench" else name for x in kstart]
            t = time.perf_counter()
            subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
            p = subprocess.run([kbox, "exec", "-s", name, "1+1"], env=env,
                               capture_output=True, text=True)
            dt = time.perf_counter() - t
            if p.returncode != 0 or p.stdout != "Out[1]: 2\n":
                failures += 1
                print("bench/gateway.py: kbox exec: %d %r" % (p.returncode, p.stdout),
                      file=sys.stderr)
            subprocess.run([kbox, "stop", "-s", name], env=env, stdout=subprocess.DEVNULL)
            subprocess.run([kbox, "rm", "-s", name], env=env, stdout=subprocess.DEVNULL)
            return dt

        def py_start():
            nonlocal failures
            t = time.perf_counter()
            k = rest.call("POST", "/api/kernels", {"name": "python3"})["id"]
            c = WsClient(port, token, k, True)
            st, res = c.execute("1+1")
            dt = time.perf_counter() - t
            if st != "ok" or res != "2":
                failures += 1
            c.close()
            rest.call("DELETE", "/api/kernels/" + k)
            return dt

        starts = {"start kbox": [], "start python": []}
        for i in range(a.starts):
            pair = [("start kbox", kbox_start), ("start python", py_start)]
            for k, f in (pair if i % 2 == 0 else pair[::-1]):
                starts[k].append(f() * 1000)
        times.update(starts)

        med = {k: statistics.median(v) for k, v in times.items()}
        print("bench/gateway.py: Jupyter Server %s, %d rounds of %d calls, %d starts (ms)" %
              (__import__("jupyter_server").__version__, a.rounds, a.n, a.starts))
        print("%-14s %8s %8s %8s" % ("", "median", "p10", "p90"))
        for k, v in times.items():
            print("%-14s %8.2f %8.2f %8.2f" % (k, med[k], pct(v, 10), pct(v, 90)))
        ratios = {
            "kbox mcp / ws legacy": med["kbox mcp"] / med["ws legacy"],
            "kbox mcp / ws v1": med["kbox mcp"] / med["ws v1"],
            "kbox mcp / zmq": med["kbox mcp"] / med["zmq"],
            "start kbox / start python": med["start kbox"] / med["start python"],
        }
        for k, v in ratios.items():
            print("%-26s %6.2fx%s" % (k, v, "  (goal <= 1.0: %s)" % ("PASS" if v <= 1.0 else "FAIL")
                                      if k.startswith("kbox mcp / ws") else ""))
        if failures:
            print("bench/gateway.py: %d answers were wrong" % failures)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"median_ms": med, "ratios": ratios, "failures": failures,
                           "samples_ms": times}, f)
        return 1 if failures else 0
    finally:
        if mcp:
            mcp.kill()
        subprocess.run([kbox, "stop", "--all"], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
