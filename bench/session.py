#!/usr/bin/python3
"""bench/session.py - kbox exec against a running session versus jupyter run.

    /usr/bin/python3 bench/session.py [KBOX] [-n N] [--rounds R] [--warmup W]
        [--python PY] [--json FILE]

KBOX is the kbox program (default: $KBOX, else ./kbox).  One session
"bench" is started with `kbox start -s bench` in a private KBOX_HOME (a
fresh /tmp/kb.XXXXXXXX, removed at the end) and both clients run
against its one kernel:

  kbox exec       KBOX exec -s bench 1+1
  jupyter run     JUPYTER run --existing CONNFILE FILE

where CONNFILE is the session's connection file (the connection_file of
`kbox status --json`) and FILE holds "1+1".  JUPYTER is /usr/bin/jupyter
(Debian's jupyter-core, which runs jupyter-run from jupyter-client; both
installed by setup.sh): the command a user types.  Without it (--jupyter
none), PY -m jupyter_client.runapp is run instead, which is what
jupyter-run itself runs, minus the `jupyter` dispatcher's own start.

Each call is a whole process, timed from spawn to exit (wall clock), with
its CPU (user + sys) and peak RSS from wait4(2).  Every call's output is
checked: kbox must print exactly "Out[N]: 2" with N the kernel's next
execution count, jupyter run exactly "2"; both must exit 0 and print
nothing on stderr.  W unmeasured calls of each client come first, then R
rounds, each running N calls of each client back to back, the order
alternating from round to round.

Also measured: the floor of any kbox command, `kbox version` (a process
that starts, loads the same libraries as kbox exec and exits), R x N
times after the rounds; the supervisor's VmRSS (with its RssAnon / RssFile /
RssShmem split) right after `kbox start` and after all the calls, its
VmHWM and the CPU it used during the calls.

Reported: per client the median, mean, p10, p90 and max wall time, the
median CPU and peak RSS per call; the ratio jupyter run / kbox exec of
the wall time (target >= 15), the median over rounds of the ratio of the
two medians within a round, and the ratio of CPU per call.  The last
line of stdout is one JSON object with every figure (--json FILE adds
each call's figures).  Exit status 0 when every call was correct (a
missed target is reported, not fatal); 1 when the session did not start
or any call failed; 2 on a usage error.  The session is stopped and its
directory removed at the end, also after a failure, ^C or SIGTERM.
"""

import argparse
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

SESSION = "bench"
RATIO_TARGET = 15.0  # jupyter run wall time / kbox exec wall time, at least
KBOX_OUT = re.compile(rb"\AOut\[(\d+)\]: 2\n\Z")


def log(fmt, *args):
    sys.stderr.write((fmt % args if args else fmt) + "\n")
    sys.stderr.flush()


def pct(xs, p):
    """The P-th percentile of XS (nearest rank)."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


def run_timed(argv, env, tmpdir, timeout=120):
    """Run ARGV to completion: (wall_s, exit_code, stdout, stderr, rusage).

    stdout and stderr go to files (no pipe to drain while timing); the
    child is reaped with wait4 so that its own CPU and peak RSS are known.
    exit_code is negative for a signal, None after TIMEOUT seconds (then the
    child is killed)."""
    outp = os.path.join(tmpdir, "call.out")
    errp = os.path.join(tmpdir, "call.err")
    with open(outp, "wb") as out, open(errp, "wb") as err:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        killer = threading.Timer(timeout, p.kill)
        killer.start()
        try:
            _, status, ru = os.wait4(p.pid, 0)
        except BaseException:
            # ^C or TERM: take the call down with us
            p.kill()
            os.wait4(p.pid, 0)
            p.returncode = -signal.SIGKILL
            raise
        finally:
            killer.cancel()
        wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if wall >= timeout:
        return wall, None, b"", b"timed out after %d s" % timeout, ru
    with open(outp, "rb") as f:
        stdout = f.read()
    with open(errp, "rb") as f:
        stderr = f.read()
    return wall, p.returncode, stdout, stderr, ru


def proc_mem(pid):
    """VmRSS, VmHWM, RssAnon, RssFile, RssShmem of PID in KiB (None if gone)."""
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                key, _, val = line.partition(":")
                if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
                    out[key] = int(val.split()[0])
    except OSError:
        return None
    return out


def alive(pid):
    """Whether PID is a live process (not gone, not a zombie waiting for init)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def proc_cpu(pid):
    """User + system CPU seconds PID has used so far (None if gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kbox_cmd(kbox, env, *args, timeout=120):
    """Run KBOX ARGS: (exit code, stdout text, stderr text)."""
    p = subprocess.run([kbox] + list(args), env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def status_json(kbox, env):
    rc, out, err = kbox_cmd(kbox, env, "status", "-s", SESSION, "--json")
    if rc != 0:
        raise RuntimeError("kbox status exited %d: %s" % (rc, err.strip()))
    return json.loads(out)


class Bench:
    """The state of one run: the session, the expected execution count, the calls."""

    def __init__(self, kbox, python, tmpdir, env):
        self.kbox = kbox
        self.python = python
        self.tmpdir = tmpdir
        self.env = env
        self.count = 0          # the kernel's execution count after the last call
        self.failures = []      # one line per failed call
        self.codefile = os.path.join(tmpdir, "one_plus_one.py")
        with open(self.codefile, "w") as f:
            f.write("1+1\n")
        self.connfile = None
        self.jupyter = None     # the jupyter command, or None for PY -m jupyter_client.runapp

    def argv(self, client):
        if client == "kbox":
            return [self.kbox, "exec", "-s", SESSION, "1+1"]
        if self.jupyter:
            return [self.jupyter, "run", "--existing", self.connfile, self.codefile]
        return [self.python, "-m", "jupyter_client.runapp", "--existing", self.connfile,
                self.codefile]

    def call(self, client):
        """One call of CLIENT, checked: a dict of its figures and whether it was right."""
        wall, rc, out, err, ru = run_timed(self.argv(client), self.env, self.tmpdir)
        why = None
        if rc != 0:
            why = "exit status %s" % rc
        elif client == "kbox":
            m = KBOX_OUT.match(out)
            if not m:
                why = "stdout %r is not \"Out[N]: 2\"" % out[:200]
            elif int(m.group(1)) != self.count + 1:
                why = "execution count %s, expected %d" % (m.group(1), self.count + 1)
            if m:
                self.count = int(m.group(1))
        else:
            if out != b"2":
                why = "stdout %r is not \"2\"" % out[:200]
            else:
                self.count += 1
        if why is None and err.strip():
            why = "unexpected stderr"
        if why:
            self.failures.append("%s: %s; stderr: %s"
                                 % (client, why, err.decode(errors="replace").strip()[:300]))
        return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
                "maxrss_kib": ru.ru_maxrss, "ok": why is None}


def summarize(calls):
    wall = [c["wall_s"] for c in calls]
    cpu = [c["cpu_s"] for c in calls]
    rss = [c["maxrss_kib"] for c in calls]
    return {
        "calls": len(calls),
        "failed": sum(1 for c in calls if not c["ok"]),
        "wall_median_s": statistics.median(wall),
        "wall_mean_s": statistics.fmean(wall),
        "wall_p10_s": pct(wall, 10),
        "wall_p90_s": pct(wall, 90),
        "wall_min_s": min(wall),
        "wall_max_s": max(wall),
        "cpu_median_s": statistics.median(cpu),
        "maxrss_median_kib": statistics.median(rss),
        "maxrss_max_kib": max(rss),
    }


def versions():
    v = {"python": platform.python_version(), "machine": platform.machine(),
         "cpus": os.cpu_count()}
    for mod in ("jupyter_client", "ipykernel", "zmq"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception:
            pass
    return v


def fmt_mem(m):
    if not m:
        return "(gone)"
    return ("VmRSS %6.1f MiB = anon %5.1f + file %5.1f + shmem %4.1f MiB"
            % (m["VmRSS"] / 1024, m["RssAnon"] / 1024, m["RssFile"] / 1024,
               m["RssShmem"] / 1024))


class Terminated(Exception):
    """SIGTERM arrived: stop the session and leave."""


def on_sigterm(signum, frame):
    raise Terminated()


def main(argv):
    ap = argparse.ArgumentParser(prog="session.py", description=__doc__.split("\n")[0])
    ap.add_argument("kbox", nargs="?", default=os.environ.get("KBOX", "./kbox"),
                    help="the kbox program (default: $KBOX, else ./kbox)")
    ap.add_argument("-n", type=int, default=10, help="calls per client per round")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3,
                    help="unmeasured calls of each client before the rounds")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter for jupyter run (default: this one)")
    ap.add_argument("--jupyter", default="/usr/bin/jupyter",
                    help="the jupyter command (default /usr/bin/jupyter; 'none': "
                         "PY -m jupyter_client.runapp)")
    ap.add_argument("--json", metavar="FILE",
                    help="also write the results and every call's figures as JSON to FILE")
    args = ap.parse_args(argv[1:])
    if args.n < 1 or args.rounds < 1 or args.warmup < 0:
        ap.error("-n and --rounds must be positive, --warmup not negative")
    if args.jupyter != "none" and not os.access(args.jupyter, os.X_OK):
        ap.error("%s is not an executable (install jupyter-core and jupyter-client, "
                 "or give --jupyter none)" % args.jupyter)
    kbox = os.path.abspath(args.kbox)
    if not os.access(kbox, os.X_OK):
        ap.error("%s is not an executable (give the kbox program as the argument "
                 "or in $KBOX)" % args.kbox)

    signal.signal(signal.SIGTERM, on_sigterm)
    # A short private state dir: socket paths under it must stay < 108 bytes.
    home = tempfile.mkdtemp(prefix="kb.", dir="/tmp")
    tmpdir = os.path.join(home, "bench")
    os.mkdir(tmpdir)
    env = dict(os.environ, KBOX_HOME=home, JUPYTER_RUNTIME_DIR=os.path.join(tmpdir, "rt"))
    env.pop("KBOX_SESSION", None)
    bench = Bench(kbox, args.python, tmpdir, env)
    if args.jupyter != "none":
        bench.jupyter = args.jupyter
    calls = {"kbox": [], "jupyter": []}
    floor = []
    per_round = []
    mem_start = mem_end = cpu_start = cpu_end = load_start = load_end = None
    started = False
    sup_pid = None
    start_s = None
    status_end = None
    fatal = None
    try:
        t0 = time.monotonic()
        rc, out, err = kbox_cmd(kbox, env, "start", "-s", SESSION)
        start_s = time.monotonic() - t0
        if rc != 0:
            fatal = "kbox start exited %d: %s" % (rc, err.strip())
            return 1
        started = True
        st = status_json(kbox, env)
        sup_pid = st["pid"]
        bench.connfile = st["connection_file"]
        mem_start = proc_mem(sup_pid)
        cpu_start = proc_cpu(sup_pid)
        load_start = os.getloadavg()
        log("session %s started in %.2f s: supervisor pid %d, kernel pid %d; %s",
            SESSION, start_s, sup_pid, st["kernel_pid"], fmt_mem(mem_start))

        for _ in range(args.warmup):
            for client in ("kbox", "jupyter"):
                bench.call(client)
        for r in range(args.rounds):
            order = ("kbox", "jupyter") if r % 2 == 0 else ("jupyter", "kbox")
            this = {}
            for client in order:
                cs = [bench.call(client) for _ in range(args.n)]
                calls[client].extend(cs)
                this[client] = statistics.median(c["wall_s"] for c in cs)
            per_round.append(this)
            log("round %2d/%d  kbox exec %7.1f ms  jupyter run %7.1f ms  ratio %5.1fx",
                r + 1, args.rounds, this["kbox"] * 1e3, this["jupyter"] * 1e3,
                this["jupyter"] / this["kbox"])

        # The floor of any kbox command: start, load the same libraries
        # (libc, libm: the rest is linked in, see bench/README.md), exit.
        for _ in range(args.rounds * args.n):
            wall, rc, out, err, ru = run_timed([kbox, "version"], env, tmpdir)
            if rc != 0 or not out.startswith(b"kbox "):
                raise RuntimeError("kbox version exited %s: %r" % (rc, out[:100]))
            floor.append({"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
                          "maxrss_kib": ru.ru_maxrss, "ok": True})

        mem_end = proc_mem(sup_pid)
        cpu_end = proc_cpu(sup_pid)
        load_end = os.getloadavg()
        status_end = status_json(kbox, env)
    except (RuntimeError, OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
        fatal = "%s: %s" % (type(e).__name__, e)
    except (KeyboardInterrupt, Terminated):
        fatal = "interrupted"
    finally:
        # Not to be cut short by a second ^C or TERM; bounded by the timeouts.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # Stop the session even if kbox start failed half-way.
        if not sup_pid:
            try:
                with open(os.path.join(home, "sessions", SESSION, "supervisor.pid")) as f:
                    sup_pid = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
        if started or sup_pid:
            try:
                rc, out, err = kbox_cmd(kbox, env, "stop", "-s", SESSION, timeout=60)
                if rc != 0 and started:
                    log("kbox stop exited %d: %s", rc, err.strip())
            except subprocess.SubprocessError as e:
                log("kbox stop: %s", e)
            for _ in range(50):
                if not sup_pid or not alive(sup_pid):
                    break
                time.sleep(0.1)
            else:
                if alive(sup_pid):
                    log("supervisor %d still running after kbox stop; killing it", sup_pid)
                    try:
                        os.kill(sup_pid, signal.SIGKILL)
                    except OSError:
                        pass
        shutil.rmtree(home, ignore_errors=True)
        if fatal:
            log("session.py: %s", fatal)

    if fatal or not calls["kbox"] or not calls["jupyter"]:
        return 1

    stats = {c: summarize(cs) for c, cs in calls.items()}
    ratios = [r["jupyter"] / r["kbox"] for r in per_round]
    ratio = statistics.median(ratios)
    pooled = stats["jupyter"]["wall_median_s"] / stats["kbox"]["wall_median_s"]
    ok = ratio >= RATIO_TARGET
    cpu_ratio = stats["jupyter"]["cpu_median_s"] / stats["kbox"]["cpu_median_s"]

    print("kbox exec -s %s '1+1' vs jupyter run --existing, one session kernel, "
          "%d rounds x %d calls per client (after %d warm-up calls), %d CPUs"
          % (SESSION, args.rounds, args.n, args.warmup, os.cpu_count() or 0))
    print()
    print("%-12s %6s %6s %9s %9s %9s %9s %9s %10s %10s"
          % ("client", "calls", "failed", "median", "mean", "p10", "p90", "max", "CPU/call",
             "peak RSS"))
    for client, label in (("kbox", "kbox exec"), ("jupyter", "jupyter run")):
        s = stats[client]
        print("%-12s %6d %6d %9.1f %9.1f %9.1f %9.1f %9.1f %10.1f %7.1f MiB"
              % (label, s["calls"], s["failed"], s["wall_median_s"] * 1e3,
                 s["wall_mean_s"] * 1e3, s["wall_p10_s"] * 1e3, s["wall_p90_s"] * 1e3,
                 s["wall_max_s"] * 1e3,
                 s["cpu_median_s"] * 1e3, s["maxrss_median_kib"] / 1024))
    print("(whole-process wall time and CPU (user + sys) per call in ms, medians; "
          "peak RSS: median ru_maxrss)")
    print()
    print("kbox start:                %.2f s" % start_s)
    print("supervisor after start:    %s" % fmt_mem(mem_start))
    ncalls = len(calls["kbox"]) + len(calls["jupyter"]) + 2 * args.warmup
    print("supervisor after the calls: %s" % fmt_mem(mem_end))
    if mem_end:
        print("supervisor peak (VmHWM):   %.1f MiB" % (mem_end["VmHWM"] / 1024))
    sup_cpu = None
    if cpu_start is not None and cpu_end is not None:
        sup_cpu = cpu_end - cpu_start
        print("supervisor CPU during the %d calls: %.2f s (%.1f ms per kbox exec)"
              % (ncalls, sup_cpu, 1e3 * sup_cpu / (len(calls["kbox"]) + args.warmup)))
    if status_end:
        print("supervisor counted %s executions (kbox exec calls: %d)"
              % (status_end.get("executions"), len(calls["kbox"]) + args.warmup))
    print("load average at the start %.2f, at the end %.2f (1 min)"
          % (load_start[0], load_end[0]))
    print()
    print("wall median  kbox exec %.1f ms  jupyter run %.1f ms" %
          (stats["kbox"]["wall_median_s"] * 1e3, stats["jupyter"]["wall_median_s"] * 1e3))
    print("ratio jupyter run / kbox exec %.1fx (target >= %.0fx)  %s  (rounds %.1fx .. %.1fx)"
          % (ratio, RATIO_TARGET, "PASS" if ok else "FAIL", min(ratios), max(ratios)))
    failed = len(bench.failures)
    print("CPU per call  kbox exec %.1f ms  jupyter run %.1f ms  ratio %.1fx"
          % (stats["kbox"]["cpu_median_s"] * 1e3, stats["jupyter"]["cpu_median_s"] * 1e3,
             cpu_ratio))
    fl = summarize(floor) if floor else None
    if fl:
        print("floor: kbox version (start, load the same libraries, exit) %.1f ms wall, "
              "%.1f ms CPU; kbox exec is %.1f ms above it"
              % (fl["wall_median_s"] * 1e3, fl["cpu_median_s"] * 1e3,
                 (stats["kbox"]["wall_median_s"] - fl["wall_median_s"]) * 1e3))
    print("failed calls: %d" % failed)
    for line in bench.failures[:10]:
        print("  " + line)

    doc = {
        "bench": "session",
        "config": {"rounds": args.rounds, "n": args.n, "warmup": args.warmup,
                   "kbox": kbox, "python": args.python,
                   "jupyter": bench.jupyter or "%s -m jupyter_client.runapp" % args.python},
        "versions": versions(),
        "kbox_start_s": start_s,
        "clients": stats,
        "round_medians_s": per_round,
        "ratio_jupyter_kbox": ratio,
        "floor_kbox_version": fl,
        "ratio_rounds": ratios,
        "ratio_pooled": pooled,
        "ratio_target": RATIO_TARGET,
        "cpu_ratio_jupyter_kbox": cpu_ratio,
        "ratio_pass": ok,
        "supervisor_mem_start_kib": mem_start,
        "supervisor_mem_end_kib": mem_end,
        "supervisor_executions": status_end.get("executions") if status_end else None,
        "supervisor_cpu_s": sup_cpu,
        "loadavg_start": load_start,
        "loadavg_end": load_end,
        "failed_calls": failed,
        "failures": bench.failures,
    }
    if args.json:
        raw = {c: [{k: x[k] for k in ("wall_s", "cpu_s", "maxrss_kib", "ok")} for x in cs]
               for c, cs in calls.items()}
        with open(args.json, "w") as f:
            json.dump(dict(doc, calls=raw), f, indent=1)
            f.write("\n")
    print(json.dumps(doc, sort_keys=True))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
