#!/usr/bin/python3
"""bench/ready.py - how soon after the kernel's last bind the session is ready.

    /usr/bin/python3 bench/ready.py [KBOX ...] [--rounds R] [--backend B]

For each KBOX (default ./kbox; several are run in turn within each round,
so that a slow phase of the machine falls on all of them): a private
KBOX_HOME, `kbox start -s r --backend B` (default bwrap), then `kbox
restart -s r`, R rounds.  For the start and for the restart, the time
from the kernel's last bound socket to the session's "ready" event:
a socket's inode is made by its bind, so the mtime of the five ipc socket
files named by the connection file is the time of each bind (as in
bench/sandbox.py, which measures the same among other things); the ready
event's "time" is the supervisor's clock when the kernel answered.
Reported: per KBOX, the median, min and max over the rounds, for start
and restart, with the load average.

The peer, in the same rounds: the kernel alone (ipykernel started by
hand, no sandbox, no kbox) and a jupyter_client BlockingKernelClient that
connected its sockets before the kernel started (reconnecting every 1 ms)
and asked kernel_info at once: the time from the kernel's last bind to
that reply is how soon the kernel itself can answer.  kbox's ready
minus the peer's median is what kbox adds.
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import kconn

SESSION = "r"


def run(kbox, env, *args):
    p = subprocess.run([kbox] + list(args), env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    if p.returncode != 0:
        raise RuntimeError("kbox %s: exit %d: %s" % (" ".join(args), p.returncode,
                                                      p.stderr.decode(errors="replace")))
    return p.stdout


def last_bind_to_ready(kbox, env, home):
    """ms from the last bind of the current kernel's sockets to its ready event."""
    st = json.loads(run(kbox, env, "status", "-s", SESSION, "--format", "json"))
    binds = kconn.socket_binds(kbox, env, SESSION)
    if len(binds) != 5:
        raise RuntimeError("session %s: %d sockets in its sandbox's /run/kernel, not 5"
                           % (SESSION, len(binds)))
    ready = None
    with open(os.path.join(home, "sessions", SESSION, "events.ndjson")) as f:
        for line in f:
            e = json.loads(line)
            if e.get("event") == "ready" and e.get("generation") == st["generation"]:
                ready = datetime.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
                    tzinfo=datetime.timezone.utc).timestamp()
    return (ready - max(binds)) * 1e3


def kernel_alone(py):
    """ms from the last bind of a bare ipykernel to its first kernel_info_reply,
    for a client connected before the kernel started."""
    import zmq
    from jupyter_client import BlockingKernelClient
    d = tempfile.mkdtemp(prefix="kr.", dir="/tmp")
    ip = os.path.join(d, "k")
    cf = os.path.join(d, "kernel.json")
    with open(cf, "w") as f:
        json.dump({"transport": "ipc", "ip": ip, "shell_port": 1, "iopub_port": 2,
                   "stdin_port": 3, "control_port": 4, "hb_port": 5, "key": uuid.uuid4().hex,
                   "signature_scheme": "hmac-sha256", "kernel_name": "python3"}, f)
    kc = BlockingKernelClient(connection_file=cf)
    kc.load_connection_file()
    kc.context.setsockopt(zmq.RECONNECT_IVL, 1)  # (a default for the sockets it makes next)
    kc.start_channels()
    p = subprocess.Popen([py, "-m", "ipykernel_launcher", "-f", cf],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        msg_id = kc.kernel_info()
        deadline = time.time() + 120
        while True:
            if time.time() > deadline:
                raise RuntimeError("the bare kernel did not answer kernel_info in 120 s")
            try:
                m = kc.get_shell_msg(timeout=0.002)
            except Exception:
                continue
            if m["parent_header"].get("msg_id") == msg_id:
                got = time.time()
                break
        binds = [os.stat("%s-%d" % (ip, i)).st_mtime for i in range(1, 6)]
        return (got - max(binds)) * 1e3
    finally:
        kc.stop_channels()
        p.kill()
        p.wait()
        shutil.rmtree(d, ignore_errors=True)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kbox", nargs="*", default=["./kbox"])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--backend", default="bwrap")
    args = ap.parse_args(argv)
    res = {k: {"start": [], "restart": []} for k in args.kbox}
    peer = []
    load0 = os.getloadavg()[0]
    for r in range(args.rounds):
        peer.append(kernel_alone(sys.executable))
        print("round %d kernel alone: %.1f ms" % (r + 1, peer[-1]), file=sys.stderr)
        for kbox in args.kbox:
            home = tempfile.mkdtemp(prefix="kr.", dir="/tmp")
            env = dict(os.environ, KBOX_HOME=home)
            env.pop("KBOX_SESSION", None)
            try:
                run(kbox, env, "start", "-s", SESSION, "--backend", args.backend)
                res[kbox]["start"].append(last_bind_to_ready(kbox, env, home))
                run(kbox, env, "restart", "-s", SESSION)
                res[kbox]["restart"].append(last_bind_to_ready(kbox, env, home))
            finally:
                subprocess.run([kbox, "stop", "-s", SESSION], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                shutil.rmtree(home, ignore_errors=True)
            print("round %d %s: start %.1f ms, restart %.1f ms" %
                  (r + 1, kbox, res[kbox]["start"][-1], res[kbox]["restart"][-1]),
                  file=sys.stderr)
    pm = statistics.median(peer)
    print("kernel alone    last bind -> first kernel_info_reply: median %.1f ms  (min %.1f, max %.1f)"
          % (pm, min(peer), max(peer)))
    for kbox in args.kbox:
        for what in ("start", "restart"):
            xs = res[kbox][what]
            print("%s  %-7s last bind -> ready: median %.1f ms  (min %.1f, max %.1f, %d rounds); "
                  "%.1f ms after the kernel alone answers"
                  % (kbox, what, statistics.median(xs), min(xs), max(xs), len(xs),
                     statistics.median(xs) - pm))
    print("load average %.2f -> %.2f (1 min), backend %s"
          % (load0, os.getloadavg()[0], args.backend))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
