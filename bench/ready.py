#!/usr/bin/python3
"""bench/ready.py - how soon a kernel is found ready after it binds its sockets.

    /usr/bin/python3 bench/ready.py [KBOX] [--sessions N] [--restarts K]
        [--backend B ...]

For each backend (default: none and bwrap, alternating), N sessions (default
3) are started with `KBOX start -s NAME --backend B` (plus a checked `kbox
exec 1+1`), then restarted K times (default 2) with `kbox restart`, and
stopped.  For each start and each restart: the time from the kernel's last
bind (the mtime of the last of its five ipc socket files) to the
supervisor's `ready` event, exactly as bench/sandbox.py measures it
("last bind -> ready"), without sandbox.py's first-result rounds, font
cache probe and memory phase.  Everything runs in a private KBOX_HOME,
removed at the end.  Reported: the median and every value per backend,
for starts and for restarts, and the load average; the last line is one
JSON object with them.  No target: see bench/README.md."""
import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sandbox  # noqa: E402  (its Bench: start, restart, phases, stop, cleanup)


def main(argv):
    ap = argparse.ArgumentParser(description="last bind -> ready, at start and restart")
    ap.add_argument("kbox", nargs="?", default=os.environ.get("KBOX", "./kbox"))
    ap.add_argument("--sessions", type=int, default=3)
    ap.add_argument("--restarts", type=int, default=2)
    ap.add_argument("--backend", action="append", dest="backends")
    args = ap.parse_args(argv)
    backends = args.backends or ["none", "bwrap"]
    load0 = os.getloadavg()
    b = sandbox.Bench(os.path.abspath(args.kbox), tempfile.mkdtemp(prefix="kb."))
    res = {be: {"start": [], "restart": []} for be in backends}
    try:
        for i in range(args.sessions):
            for be in backends:
                name = "ready%d-%s" % (i, be)
                _, ws, we, _, t0 = b.start(name, be, code="1+1")
                p = b.phases(name, t0, ws, we, b.status(name))
                res[be]["start"].append(p["last_bind_to_ready_ms"])
                for _ in range(args.restarts):
                    res[be]["restart"].append(b.restart(name)["last_bind_to_ready_ms"])
                b.stop(name)
    except sandbox.Failed as e:
        print("FAILED: %s" % e, file=sys.stderr)
        return 1
    finally:
        b.cleanup()
    load1 = os.getloadavg()
    out = {"bench": "ready", "load_start": load0, "load_end": load1, "ms": res}
    print("load average %.1f at the start, %.1f at the end" % (load0[0], load1[0]))
    for be in backends:
        for k in ("start", "restart"):
            xs = [x for x in res[be][k] if x is not None]
            out.setdefault("median_ms", {}).setdefault(be, {})[k] = (
                statistics.median(xs) if xs else None)
            print("%-6s %-7s last bind -> ready: median %s ms (%s)"
                  % (be, k, "%.0f" % statistics.median(xs) if xs else "-",
                     " ".join("%.0f" % x for x in xs)))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
