#!/usr/bin/python3
"""bench/walk.py - what a sandboxed session's start pays for looking through
its own workspace and home for kbox state directories (kbox(7): a
session whose workspace or home holds one is refused at its start).

    /usr/bin/python3 bench/walk.py [KBOX] [--dirs N] [--rounds R] [--json FILE]

KBOX is the kbox program (default: $KBOX, else ./kbox).  In a private
KBOX_HOME (a fresh /tmp/kbw.XXXXXXXX, removed at the end), two sessions of
the default backend (bwrap), started once and stopped: "empty", whose
workspace stays empty, and "full", whose workspace then gets N
directories (default 99000, just under the walk's bound of 100000: the
worst a start accepts), 100 directories of N/100 each, all empty.  Then R
rounds (default 7), each starting and stopping both, the order swapped
from round to round; measured: the wall time of `KBOX start -s NAME`
(which returns once the kernel is ready; it must exit 0 and say
"session NAME started").  Reported: the median, p10 and p90 of each, the
ratio full/empty of the medians, and the difference in ms (what N
directories cost, and so about what 1000 cost).  The last line of stdout
is one JSON object with every figure (--json FILE also writes it).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def main():
    args = sys.argv[1:]
    kbox = os.environ.get("KBOX", "./kbox")
    dirs, rounds, out = 99000, 7, None
    while args:
        a = args.pop(0)
        if a == "--dirs":
            dirs = int(args.pop(0))
        elif a == "--rounds":
            rounds = int(args.pop(0))
        elif a == "--json":
            out = args.pop(0)
        else:
            kbox = a
    kbox = os.path.abspath(kbox)
    root = tempfile.mkdtemp(prefix="kbw.", dir="/tmp")
    os.chmod(root, 0o711)  # under root the sandbox user passes through
    env = dict(os.environ, KBOX_HOME=os.path.join(root, "k"))

    def kb(*a):
        return subprocess.run([kbox] + list(a), env=env, capture_output=True, text=True)

    def start(name):
        t = time.monotonic()
        r = kb("start", "-s", name)
        ms = (time.monotonic() - t) * 1000.0
        if r.returncode != 0 or not r.stdout.startswith("session %s started" % name):
            sys.exit("kbox start -s %s: exit %d: %s%s" % (name, r.returncode, r.stdout, r.stderr))
        return ms

    def stop(name):
        r = kb("stop", "-s", name)
        if r.returncode != 0:
            sys.exit("kbox stop -s %s: exit %d: %s" % (name, r.returncode, r.stderr))

    try:
        for name in ("empty", "full"):
            start(name)
            stop(name)
        ws = os.path.join(env["KBOX_HOME"], "sessions", "full", "workspace")
        per = max(0, dirs // 100 - 1)  # below each of (up to) 100
        made = i = 0
        while made < dirs:
            top = os.path.join(ws, "d%03d" % i)
            os.mkdir(top)
            made += 1
            for j in range(per):
                if made >= dirs:
                    break
                os.mkdir(os.path.join(top, "e%05d" % j))
                made += 1
            i += 1
        st = os.stat(ws)
        for dp, dn, fn in os.walk(ws):  # the session's own uid, as kbox made it
            for d in dn:
                os.chown(os.path.join(dp, d), st.st_uid, st.st_gid)
        times = {"empty": [], "full": []}
        for r in range(rounds):
            order = ("empty", "full") if r % 2 == 0 else ("full", "empty")
            for name in order:
                times[name].append(start(name))
                stop(name)
        res = {"dirs": made, "rounds": rounds}
        for name in ("empty", "full"):
            v = times[name]
            res[name] = {"median_ms": round(pct(v, 50), 1), "p10_ms": round(pct(v, 10), 1),
                         "p90_ms": round(pct(v, 90), 1), "all_ms": [round(x, 1) for x in v]}
        res["ratio_full_empty"] = round(res["full"]["median_ms"] / res["empty"]["median_ms"], 3)
        res["diff_ms"] = round(res["full"]["median_ms"] - res["empty"]["median_ms"], 1)
        res["per_1000_dirs_ms"] = round(res["diff_ms"] * 1000.0 / made, 2)
        print("kbox start, workspace empty: median %.1f ms (p10 %.1f, p90 %.1f)" %
              (res["empty"]["median_ms"], res["empty"]["p10_ms"], res["empty"]["p90_ms"]))
        print("kbox start, workspace of %d directories: median %.1f ms (p10 %.1f, p90 %.1f)" %
              (made, res["full"]["median_ms"], res["full"]["p10_ms"], res["full"]["p90_ms"]))
        print("ratio %.3f, difference %.1f ms (%.2f ms per 1000 directories)" %
              (res["ratio_full_empty"], res["diff_ms"], res["per_1000_dirs_ms"]))
        print(json.dumps(res))
        if out:
            with open(out, "w") as f:
                json.dump(res, f)
    finally:
        kb("stop", "--all")
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
