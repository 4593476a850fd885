#!/usr/bin/python3
"""bench/mcp.py - a run_python call through kbox mcp versus jupyter_client.

    /usr/bin/python3 bench/mcp.py [KBOX] [-n N] [--rounds R] [--warmup W] [--pause MS]
                                  [--json FILE]

KBOX is the kbox program (default: $KBOX, else ./kbox).  One session
"bench" is started with `kbox start -s bench` in a private KBOX_HOME (a
fresh /tmp/kb.XXXXXXXX, removed at the end), and two clients run "1+1"
on its one kernel, each from one long-lived process, as an agent's tool
server would:

  kbox mcp        one `KBOX mcp -s bench` process; each call is a JSON-RPC
                  tools/call of run_python {"code": "1+1"}, timed from the
                  write of the request line to the read of its response
                  line (the client: this script, on the server's stdio)
  kbox mcp http   one `KBOX mcp --http 127.0.0.1:0 -s bench` (the Streamable
                  HTTP transport: kbox-mcp-http and the conversation's kbox
                  mcp behind it); each call a POST of the same tools/call on
                  one kept-alive connection (http.client), timed from the
                  request to the whole response
  kbox mcp http raw
                  the same server and conversation, each call the same POST
                  on a kept-alive socket of its own, framed as the stdio
                  client frames its lines: the request written whole, the
                  response read by its Content-Length (http.client parses
                  every header with the email package, about 0.15 ms of
                  this process's CPU per call: the client's cost, not the
                  server's)
  jupyter_client  a BlockingKernelClient of the session's connection file
                  (`kbox status --json`), in this process; each call is
                  execute_interactive("1+1") - what a tool server written
                  in Python on jupyter_client does per call, with no
                  sandbox, supervisor or MCP framing in between

Every call is checked: the MCP result's text must be "Out[N]: 2" (N the
execution count), its isError false and, as kbox mcp gives by default, no
structuredContent; jupyter_client's reply status "ok".  W unmeasured calls of each come
first, then R rounds; in each round every client makes N calls in each of
two ways, the order of the clients rotated from round to round:

  settled       each call MS ms (--pause, default 5) after the answer to
                the one before, off the clock: as an agent's calls come
                (each after a turn of its model), to a kernel, supervisor
                and server that have finished their work for the call
                before.  The figures of record.
  back to back  each call as soon as the one before is answered
                (jupyter_client's own ~1.2 ms of Python per call is a
                pause of a kind; what the kernel spends per call of
                each client, either way: bench/README.md).
                --pause 0 measures this way only.

Reported: per client the median, p10 and p90 of the wall time per call;
the CPU each process spent per call of that client, summed over its
rounds (the run time of all its threads, /proc/PID/task/*/schedstat):
this script ("client"), the stdio kbox mcp, kbox-mcp-http and the
conversation's kbox mcp behind it ("mcp http"), the session's supervisor
and its kernel (each process's figure counts every client's calls only
while that client is measured; a figure that cannot be read is null);
and the ratios kbox mcp / jupyter_client, kbox mcp http /
jupyter_client and kbox mcp http raw / jupyter_client of the medians (the median over
rounds of the ratio within a round): what the MCP server, the
supervisor's protocol and the capture add to a bare Jupyter round trip
(issue 19's goal: <= 1.0 over stdio and over HTTP); each way of calling
apart.  Also the peak RSS of the kbox mcp process (VmHWM) at the end.
The last line of stdout is one JSON object with every figure: the
settled ones at its top level, the back-to-back ones under
"back_to_back" (at the top level with --pause 0); --json FILE writes
them with every call's time ("lat": way -> client -> seconds).  Exit
status 0 when every call was correct, 1 otherwise, 2
on a usage error.  The session is stopped and its directory removed at
the end, also after a failure.
"""

import argparse
import http.client
import json
import re
import os
import queue
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import kconn


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def cpu_s(pids):
    """The CPU time of the processes PIDS, all their threads, in seconds
    (schedstat: user and system time as the scheduler counts it); None when
    one cannot be read."""
    tot = 0
    try:
        for pid in pids:
            for t in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                    tot += int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return tot / 1e9


def children(pid):
    """The child processes of PID (all its threads'), recursively."""
    out = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        return out
    return out + [g for c in out for g in children(c)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kbox", nargs="?", default=os.environ.get("KBOX", "./kbox"))
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--pause", type=float, default=5.0)
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.n < 1 or a.rounds < 1 or a.warmup < 0 or not 0 <= a.pause <= 60000:
        ap.error("-n and --rounds must be at least 1, --warmup at least 0, "
                 "--pause from 0 to 60000 (ms)")
    kbox = os.path.abspath(a.kbox)
    home = tempfile.mkdtemp(prefix="kb.", dir="/tmp")
    os.chmod(home, 0o711)
    env = dict(os.environ, KBOX_HOME=os.path.join(home, "h"))
    os.mkdir(env["KBOX_HOME"], 0o700)
    for v in ("KBOX_SESSION", "KBOX_KERNEL"):
        env.pop(v, None)
    server = hserver = None
    failures = 0
    try:
        subprocess.run([kbox, "start", "-s", "bench"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        from jupyter_client import BlockingKernelClient
        jc = BlockingKernelClient()
        jc.load_connection_file(kconn.write(kbox, env, "bench",
                                            os.path.join(home, "kernel.json")))
        jc.start_channels()
        jc.wait_for_ready(timeout=30)
        # off the clock: no output cache, whose warning at its 1000th
        # entry would be an answer other than 2 for every client alike
        jc.execute_interactive("get_ipython().displayhook.cache_size = 0", allow_stdin=False,
                               output_hook=lambda m: None, timeout=60)

        server = subprocess.Popen([kbox, "mcp", "-s", "bench"], env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, bufsize=1)
        ids = iter(range(1, 10 ** 9))

        def rpc(method, params):
            i = next(ids)
            server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method,
                                           "params": params}) + "\n")
            server.stdin.flush()
            while True:
                m = json.loads(server.stdout.readline())
                if m.get("id") == i:
                    return m

        rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "bench", "version": "1"}})
        server.stdin.write(json.dumps({"jsonrpc": "2.0",
                                       "method": "notifications/initialized"}) + "\n")

        def mcp_call():
            nonlocal failures
            t = time.perf_counter()
            r = rpc("tools/call", {"name": "run_python", "arguments": {"code": "1+1"}})
            dt = time.perf_counter() - t
            res = r.get("result", {})
            text = res.get("content", [{}])[0].get("text", "")
            # the default: the text, no structured content (kbox-mcp(1))
            if (res.get("isError") or not text.startswith("Out[") or not text.endswith("]: 2\n")
                    or "structuredContent" in res):
                failures += 1
                print(f"bench/mcp.py: kbox mcp answered {json.dumps(r)[:300]}", file=sys.stderr)
            return dt

        def jc_call():
            nonlocal failures
            t = time.perf_counter()
            reply = jc.execute_interactive("1+1", allow_stdin=False, output_hook=lambda m: None,
                                           timeout=60)
            dt = time.perf_counter() - t
            if reply["content"]["status"] != "ok":
                failures += 1
            return dt

        token = os.urandom(16).hex()
        herr = open(os.path.join(home, "http.err"), "w+")
        hserver = subprocess.Popen([kbox, "mcp", "--http", "127.0.0.1:0", "-s", "bench"],
                                   env=dict(env, KBOX_MCP_TOKEN=token), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=herr)
        port = None
        for _ in range(600):
            herr.seek(0)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/mcp", herr.read())
            if m:
                port = int(m[1])
                break
            time.sleep(0.05)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        hdr = {"Authorization": "Bearer " + token, "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}

        def hpost(msg):
            conn.request("POST", "/mcp", json.dumps(msg), hdr)
            r = conn.getresponse()
            body = r.read()
            return r, json.loads(body) if body else None

        r, _ = hpost({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}})
        hdr["Mcp-Session-Id"] = r.getheader("Mcp-Session-Id")
        hpost({"jsonrpc": "2.0", "method": "notifications/initialized"})

        def timed_http(what, post):
            """A call of 1+1 by POST (a message -> the response's message), timed
            and checked."""
            nonlocal failures
            i = next(ids)
            t = time.perf_counter()
            m = post({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
                "name": "run_python", "arguments": {"code": "1+1"}}})
            dt = time.perf_counter() - t
            res = (m or {}).get("result", {})
            text = res.get("content", [{}])[0].get("text", "")
            if res.get("isError") or not text.endswith("]: 2\n"):
                failures += 1
                print(f"bench/mcp.py: {what} answered {json.dumps(m)[:300]}",
                      file=sys.stderr)
            return dt

        def http_call():
            return timed_http("kbox mcp http", lambda msg: hpost(msg)[1])

        # the same calls on a socket of its own, framed as the stdio
        # client frames its lines: the request written whole, the
        # response read by its Content-Length, nothing parsed but that
        # (http.client parses every header through the email package:
        # about 0.15 ms of this process's time per call here)
        sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sockf = sock.makefile("rb")
        head = ("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in hdr.items()) + "Content-Length: %d\r\n\r\n")

        def raw_post(msg):
            body = json.dumps(msg).encode()
            sock.sendall((head % len(body)).encode() + body)
            status, length = sockf.readline(), None
            for line in iter(sockf.readline, b"\r\n"):
                name, _, value = line.partition(b":")
                if name.lower() == b"content-length":
                    length = int(value)
            if not status.startswith(b"HTTP/1.1 200 ") or length is None:
                raise RuntimeError(f"bench/mcp.py: kbox mcp http answered {status!r}")
            return json.loads(sockf.read(length))

        def raw_call():
            return timed_http("kbox mcp http (raw)", raw_post)

        st = json.loads(subprocess.run([kbox, "status", "-s", "bench", "--json"], env=env,
                                       check=True, stdout=subprocess.PIPE).stdout)
        procs = {"client": [os.getpid()], "mcp": [server.pid],
                 "mcp http": [hserver.pid] + children(hserver.pid),
                 "supervisor": [st["pid"]], "kernel": [st["kernel_pid"]]}
        clients = {"kbox mcp": mcp_call, "kbox mcp http": http_call,
                   "kbox mcp http raw": raw_call, "jupyter_client": jc_call}
        for fn in clients.values():
            for _ in range(a.warmup):
                fn()
        # (name, pause in s); the first is the figure of record
        modes = ([("settled", a.pause / 1000.0)] if a.pause > 0 else []) + [("back to back", 0.0)]
        lat = {m: {k: [] for k in clients} for m, _ in modes}
        cpu = {m: {k: {p: 0.0 for p in procs} for k in clients} for m, _ in modes}
        ratios = {m: {"mcp": [], "http": [], "raw": []} for m, _ in modes}
        order = list(clients)
        for r in range(a.rounds):
            for mode, pause in modes:
                med = {}
                for k in order[r % len(order):] + order[:r % len(order)]:
                    if k == "jupyter_client":
                        # off the clock: what the kernel published for the other
                        # clients' calls meanwhile, which jupyter_client reads
                        # only when called (past its queue's 1000 messages, with
                        # 3 other clients, it lost its own and waited for ever)
                        while True:
                            try:
                                jc.get_iopub_msg(timeout=0)
                            except queue.Empty:
                                break
                    xs = []
                    c0 = {p: cpu_s(v) for p, v in procs.items()}
                    for _ in range(a.n):
                        xs.append(clients[k]())
                        if pause:
                            time.sleep(pause)
                    c1 = {p: cpu_s(v) for p, v in procs.items()}
                    for p in procs:
                        if c0[p] is None or c1[p] is None or cpu[mode][k][p] is None:
                            cpu[mode][k][p] = None
                        else:
                            # (the pauses' idle time runs on no thread)
                            cpu[mode][k][p] += c1[p] - c0[p]
                    lat[mode][k] += xs
                    med[k] = statistics.median(xs)
                ratios[mode]["mcp"].append(med["kbox mcp"] / med["jupyter_client"])
                ratios[mode]["http"].append(med["kbox mcp http"] / med["jupyter_client"])
                ratios[mode]["raw"].append(med["kbox mcp http raw"] / med["jupyter_client"])
        hwm = 0
        with open(f"/proc/{server.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1]) * 1024
        jc.stop_channels()
        out = {"calls_per_round": a.n, "rounds": a.rounds, "pause_ms": a.pause,
               "failures": failures, "mcp_peak_rss_bytes": hwm}
        for mode, _ in modes:
            fig = {"ratio_mcp_over_jc": round(statistics.median(ratios[mode]["mcp"]), 3),
                   "ratio_mcp_http_over_jc": round(statistics.median(ratios[mode]["http"]), 3),
                   "ratio_mcp_http_raw_over_jc": round(statistics.median(ratios[mode]["raw"]), 3)}
            for k, xs in lat[mode].items():
                fig[k] = {"median_ms": round(statistics.median(xs) * 1000, 3),
                          "p10_ms": round(pct(xs, 10) * 1000, 3),
                          "p90_ms": round(pct(xs, 90) * 1000, 3)}
                fig[k]["cpu_us_per_call"] = {
                    p: None if v is None else round(v / (a.n * a.rounds) * 1e6, 1)
                    for p, v in cpu[mode][k].items()}
            if mode == modes[0][0]:
                out.update(fig)
            if mode == "back to back" and len(modes) > 1:
                out["back_to_back"] = fig
            print(f"{mode}" + (f": each call {a.pause:g} ms after the answer to the one before"
                               if mode == "settled" else ": each call as soon as the one before "
                               "is answered"))
            print(f"  {'client':18} {'median ms':>10} {'p10 ms':>8} {'p90 ms':>8}")
            for k in lat[mode]:
                print(f"  {k:18} {fig[k]['median_ms']:10.3f} {fig[k]['p10_ms']:8.3f} "
                      f"{fig[k]['p90_ms']:8.3f}")
            print("  CPU per call, us (the run time of each process's threads while the "
                  "client was measured):")
            print(f"  {'client':18} " + " ".join(f"{p:>10}" for p in procs))
            for k in lat[mode]:
                print(f"  {k:18} " + " ".join(
                    f"{'-' if v is None else format(v, '.0f'):>10}"
                    for v in fig[k]["cpu_us_per_call"].values()))
            print(f"  kbox mcp / jupyter_client (median of per-round ratios): "
                  f"{fig['ratio_mcp_over_jc']:.2f}; kbox mcp http / jupyter_client: "
                  f"{fig['ratio_mcp_http_over_jc']:.2f} (raw: "
                  f"{fig['ratio_mcp_http_raw_over_jc']:.2f})")
        print(f"kbox mcp peak RSS {hwm / 2**20:.1f} MiB; {failures} incorrect calls")
        print(json.dumps(out))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(dict(out, lat=lat), f)
        return 0 if failures == 0 else 1
    finally:
        if hserver:
            hserver.terminate()
            try:
                hserver.wait(60)
            except subprocess.TimeoutExpired:
                hserver.kill()
        if server:
            server.stdin.close()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
        subprocess.run([kbox, "stop", "--all"], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
