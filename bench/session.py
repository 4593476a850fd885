#!/usr/bin/python3
"""bench/session.py - kbox exec on a running session versus jupyter run and libkbox.

    /usr/bin/python3 bench/session.py [KBOX] [-n N] [--rounds R] [--warmup W]
        [--bench-exec PATH] [--floor-ctl PATH] [--exec-n M] [--exec-warmup V]
        [--rss-calls C] [--cpu-calls K] [--long-calls L] [--python PY] [--jupyter J]
        [--json FILE]

KBOX is the kbox program (default: $KBOX, else ./kbox).  One session
"bench" is started with `kbox start -s bench` in a private KBOX_HOME (a
fresh /tmp/kb.XXXXXXXX, removed at the end) and three clients run
against its one kernel:

  kbox exec       KBOX exec -s bench 1+1               (a process per call)
  jupyter run     JUPYTER run --existing CONNFILE FILE (a process per call)
  libkbox         BENCH_EXEC CONNFILE M V              (one process per round:
                                                        M calls in process)
  control socket  this script, in process               (N calls a round)
  floor           FLOOR_CTL SESSION-DIR                (a process per call)

where CONNFILE is a connection file for the session's kernel, asked of
the kernel itself (bench/kconn.py), FILE holds "1+1" and BENCH_EXEC is bench/bench_exec
(default: bench/bench_exec beside KBOX, else $BENCH_EXEC), libkbox's own
execute round trip (kbox_client_execute) as a second client of the
kernel, whose supervisor is already connected.  JUPYTER is
/usr/bin/jupyter (Debian's jupyter-core, which runs jupyter-run from
jupyter-client; both installed by setup.sh): the command a user types.
Without it (--jupyter none), PY -m jupyter_client.runapp is run instead,
which is what jupyter-run itself runs, minus the `jupyter` dispatcher's
own start.

kbox exec and jupyter run are timed from spawn to exit (wall clock), with
their CPU (user + sys) and peak RSS from wait4(2); bench_exec times each
of its calls itself (lat_s, from before kbox_client_execute to its
return; its start, connection and V warm-up calls are not measured).
Every call is checked: kbox must print exactly "Out[N]: 2" with N the
kernel's next execution count, jupyter run exactly "2"; both must exit 0
and print nothing on stderr; bench_exec must exit 0 with no errors (its
M + V executions advance the count).  W unmeasured calls of kbox exec and
jupyter run come first, then R rounds, each running N calls of kbox exec,
N of jupyter run, one bench_exec of M calls, N calls on the control
socket and N of floor_ctl (below), back to back, the order rotated from
round to round.

The fourth, control socket, is what kbox exec does after its start,
without the process: this script connects to the supervisor's
control.sock, sends the two lines kbox exec sends (kbox-protocol(7): the
session line, then {"op":"execute","code":"1+1","format":"text",
"grace":5.0}) in one write, and reads the two replies (started, then the
result, checked as kbox exec's output is), on a connection of its own
each call.  So the supervisor's hop is libkbox's round trip plus what the
supervisor adds, and kbox exec is `kbox version` (a start) plus this plus
its own work (finding the session, printing).  The fifth, floor, is
FLOOR_CTL, bench/floor_ctl (default: beside KBOX, else $FLOOR_CTL; left
out when there is none and --floor-ctl is not given): a C program linked
with libc alone that does just that, connect, one write, read the
replies, print the text, as a process of its own per call: the least
any kbox exec program can take on this machine.

Also measured:
  * the floor of any kbox command, `kbox version`, R x N times after the
    rounds;
  * the libraries: `ldd KBOX`, and the objects `kbox version` loads
    (LD_DEBUG=files, which also shows a dlopen), and /proc/PID/maps of a
    running `kbox exec -s bench 'import time; time.sleep(1)'` (read every
    50 ms while it runs): none may be libzmq, libczmq, libsodium or
    libcurl;
  * the supervisor's VmRSS (with its RssAnon / RssFile / RssShmem split)
    right after `kbox start` (idle, the kernel connected) and after at
    least C (default 200) kbox exec calls (unmeasured ones are added after
    the rounds if the rounds made fewer), target at most 12 MiB at both;
    its VmHWM, the growth of its RssAnon per execution the kernel ran;
    with --long-calls L, L more unmeasured kbox exec calls and a reading
    every 500 (no target);
  * the supervisor's CPU per kbox exec (target at most 0.6 ms): its
    utime + stime (/proc/PID/stat) read before and after every run of
    kbox exec calls that has nothing else running on the kernel (each
    round's N calls, and K (default 200) more back to back after the
    rounds), summed and divided by the number of those calls.  The
    supervisor verifies every iopub message of the kernel, whichever
    client's execution it belongs to, so its CPU over the whole run
    (also shown) is not a per-kbox-exec figure.

Reported: per client the median, mean, p10, p90 and max wall time per
call, the median CPU and peak RSS per call; the ratio jupyter run / kbox
exec of the wall time (target >= 30), and kbox exec / libkbox (target <=
1.8), each the median over rounds of the ratio of the two medians within
a round (the ratio of the pooled medians is shown too), and the ratio of
CPU per call; kbox exec's parts (kbox version + the control socket's
round trip) and floor_ctl / libkbox, the least kbox exec / libkbox can be
on the machine.  The last line of stdout is one JSON object with every
figure (--json FILE adds each call's figures).  Exit status 0 when every
call was correct (a missed target is reported, not fatal); 1 when the
session did not start or any call or check failed to run; 2 on a usage
error.  The session is stopped and its directory removed at the end, also
after a failure, ^C or SIGTERM.
"""

import argparse
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import kconn

SESSION = "bench"
RATIO_TARGET = 30.0       # jupyter run wall time / kbox exec wall time, at least
EXEC_RATIO_TARGET = 1.8   # kbox exec wall time / libkbox's execute round trip, at most
RSS_TARGET_KIB = 12 * 1024  # the supervisor's VmRSS, at most, idle and after RSS_CALLS
RSS_CALLS = 200           # kbox exec calls before the second VmRSS reading, at least
CPU_CALLS = 200           # kbox exec calls of the supervisor's CPU window after the rounds
SUP_CPU_TARGET = 0.6e-3   # the supervisor's CPU per kbox exec (seconds), at most
KBOX_OUT = re.compile(rb"\AOut\[(\d+)\]: 2\n\Z")
# what neither `kbox version` nor a `kbox exec` process may load
FORBIDDEN_LIB = re.compile(r"\Alib(zmq|czmq|sodium|curl)([.-]|\Z)")
SLEEP_CODE = "import time; time.sleep(1)"
# Run once, unmeasured, before the calls: no output cache, as run.py's
# --InteractiveShell.cache_size=0, so that the kernel's work per call stays
# the same over the run's ~1700 executions (with it, the kernel culls the
# cache every 200 results past 1000, with a warning on stderr).
SETUP_CODE = ("get_ipython().displayhook.cache_size = 0; "
              "get_ipython().displayhook.do_full_cache = 0")


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


def proc_cpu(pid, split=False):
    """User + system CPU seconds PID has used so far (None if gone); with
    SPLIT, (user, system)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    tck = os.sysconf("SC_CLK_TCK")
    if split:
        return int(fields[11]) / tck, int(fields[12]) / tck
    return (int(fields[11]) + int(fields[12])) / tck


def proc_csw(pid):
    """Context switches (voluntary + involuntary) of all PID's threads so far
    (None if gone)."""
    total = 0
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return total


def proc_runtime(pid):
    """CPU seconds PID's threads have run so far, to the nanosecond: the sum of
    the first field of /proc/PID/task/*/schedstat (None if gone or not
    available).  A cross-check of proc_cpu, whose clock ticks are 10 ms."""
    total = 0
    try:
        tids = os.listdir("/proc/%d/task" % pid)
        for tid in tids:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return total / 1e9


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


def forbidden(paths):
    """The objects among PATHS that are libzmq, libczmq, libsodium or libcurl."""
    return sorted({p for p in paths if FORBIDDEN_LIB.match(os.path.basename(p))})


def ldd(prog):
    """The shared objects `ldd PROG` lists (paths where resolved, else names)."""
    p = subprocess.run(["ldd", prog], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    if p.returncode != 0:
        raise RuntimeError("ldd %s exited %d: %s" % (prog, p.returncode,
                                                     p.stderr.decode(errors="replace")))
    libs = []
    for line in p.stdout.decode(errors="replace").splitlines():
        parts = line.split()
        if not parts:
            continue
        if "=>" in parts and parts.index("=>") + 1 < len(parts) \
                and parts[parts.index("=>") + 1].startswith("/"):
            libs.append(parts[parts.index("=>") + 1])
        else:
            libs.append(parts[0])
    return libs


def ld_debug_objects(argv, env, tmpdir):
    """Every object the dynamic loader loads for ARGV, dlopen included (LD_DEBUG=files):
    (objects, exit code, stdout)."""
    prefix = os.path.join(tmpdir, "lddebug")
    for f in os.listdir(tmpdir):
        if f.startswith("lddebug"):
            os.unlink(os.path.join(tmpdir, f))
    p = subprocess.run(argv, env=dict(env, LD_DEBUG="files", LD_DEBUG_OUTPUT=prefix),
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    objs = set()
    for f in os.listdir(tmpdir):
        if not f.startswith("lddebug"):
            continue
        with open(os.path.join(tmpdir, f), errors="replace") as fh:
            for line in fh:
                m = re.search(r"\bfile=(\S+)", line)
                if m:
                    objs.add(m.group(1))
        os.unlink(os.path.join(tmpdir, f))
    return sorted(objs), p.returncode, p.stdout


def read_maps(pid):
    """The files mapped by PID (None if it is gone)."""
    try:
        with open("/proc/%d/maps" % pid) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    out = set()
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            out.add(parts[5])
    return out


class Bench:
    """The state of one run: the session, the expected execution count, the calls."""

    def __init__(self, kbox, python, tmpdir, env, bench_exec):
        self.kbox = kbox
        self.python = python
        self.tmpdir = tmpdir
        self.env = env
        self.bench_exec = bench_exec
        self.count = 0          # the kernel's execution count after the last call
        self.kbox_calls = 0     # kbox exec calls made so far (measured or not)
        self.ctl_calls = 0      # executions on the control socket from this process
        self.failures = []      # one line per failed call
        self.codefile = os.path.join(tmpdir, "one_plus_one.py")
        with open(self.codefile, "w") as f:
            f.write("1+1\n")
        self.connfile = None
        self.jupyter = None     # the jupyter command, or None for PY -m jupyter_client.runapp
        self.sup_pid = None     # the supervisor, whose CPU kbox_block measures
        self.sup_cpu_s = 0.0    # its utime + stime over the kbox-only windows
        self.sup_user_s = 0.0   # of it, utime
        self.sup_csw = 0        # its threads' context switches in those windows
        self.sup_runtime_s = 0.0  # the same from its threads' schedstat (ns)
        self.sup_cpu_calls = 0  # the kbox exec calls in those windows
        self.sup_windows = 0
        self.floor_ctl = None   # bench/floor_ctl, or None: no floor client
        self.sdir = None        # the session's directory
        self.ctl_path = None    # the session's control.sock
        self.ctl_hello = None   # the session line kbox exec sends first

    def argv(self, client):
        if client == "kbox":
            return [self.kbox, "exec", "-s", SESSION, "1+1"]
        if client == "floor":
            return [self.floor_ctl, self.sdir]
        if self.jupyter:
            return [self.jupyter, "run", "--existing", self.connfile, self.codefile]
        return [self.python, "-m", "jupyter_client.runapp", "--existing", self.connfile,
                self.codefile]

    def take_out(self, out, what):
        """Check that OUT (bytes; WHAT names it) is "Out[N]: 2" with N the
        kernel's next execution count, and count it: None, or what is wrong."""
        m = KBOX_OUT.match(out)
        if not m:
            return "%s %r is not \"Out[N]: 2\"" % (what, out[:200])
        n, expected = int(m.group(1)), self.count + 1
        self.count = n
        if n != expected:
            return "execution count %d, expected %d" % (n, expected)
        return None

    def call(self, client):
        """One call of CLIENT, checked: a dict of its figures and whether it was right."""
        wall, rc, out, err, ru = run_timed(self.argv(client), self.env, self.tmpdir)
        why = None
        if client == "kbox":
            self.kbox_calls += 1
        if rc != 0:
            why = "exit status %s" % rc
        elif client in ("kbox", "floor"):
            why = self.take_out(out, "stdout")
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

    def kbox_block(self, n):
        """N kbox exec calls back to back, with the supervisor's CPU read before
        and after: nothing but these calls runs on the kernel meanwhile, so
        the difference is the supervisor's work for them alone (not the
        iopub traffic of another client's executions).  The calls' figures."""
        c0, r0 = proc_cpu(self.sup_pid, True), proc_runtime(self.sup_pid)
        w0 = proc_csw(self.sup_pid)
        cs = [self.call("kbox") for _ in range(n)]
        c1, r1 = proc_cpu(self.sup_pid, True), proc_runtime(self.sup_pid)
        w1 = proc_csw(self.sup_pid)
        if None not in (w0, w1):
            self.sup_csw += w1 - w0
        if None not in (c0, c1):
            self.sup_cpu_s += sum(c1) - sum(c0)
            self.sup_user_s += c1[0] - c0[0]
            self.sup_cpu_calls += n
            self.sup_windows += 1
            if None not in (r0, r1):
                self.sup_runtime_s += r1 - r0
        return cs

    def ctl_block(self, n):
        """N executions on the control socket from this process, as kbox exec
        sends them (the session line and the request, one write), a
        connection each: each call's figures, checked as kbox exec's."""
        req = self.ctl_hello + b'{"op":"execute","code":"1+1","format":"text","grace":5.0}\n'
        out = []
        self.ctl_calls += n
        for _ in range(n):
            buf = b""
            t0 = time.perf_counter()
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(120)  # (as run_timed bounds a process: a hang fails the call)
            try:
                s.connect(self.ctl_path)
                s.sendall(req)
                while buf.count(b"\n") < 2:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
            except OSError as e:
                buf = b"(%s)" % str(e).encode()
            finally:
                s.close()
            wall = time.perf_counter() - t0
            why = None
            lines = buf.split(b"\n")
            try:
                started, reply = json.loads(lines[0]), json.loads(lines[1])
                why = self.take_out(reply.get("text", "").encode(), "text")
                if started.get("started") is not True or reply.get("ok") is not True:
                    why = "not started and ok: %r" % buf[:300]
            except (ValueError, IndexError, AttributeError):
                why = "replies %r are not two JSON lines" % buf[:300]
            if why:
                self.failures.append("control socket: %s" % why)
            out.append({"wall_s": wall, "cpu_s": 0.0, "maxrss_kib": 0, "ok": why is None})
        return out

    def libkbox_batch(self, n, warmup):
        """One bench_exec process of N measured calls after WARMUP: its JSON, checked."""
        wall, rc, out, err, ru = run_timed([self.bench_exec, self.connfile, str(n), str(warmup)],
                                           self.env, self.tmpdir, timeout=120 + 10 * (n + warmup))
        why = None
        doc = None
        if rc != 0:
            why = "exit status %s" % rc
        else:
            try:
                doc = json.loads(out.decode().strip().splitlines()[-1])
            except (ValueError, IndexError, UnicodeDecodeError):
                why = "stdout %r is not its JSON line" % out[:200]
        if doc is not None:
            if doc.get("errors") or len(doc.get("lat_s", [])) != n:
                why = "errors %s, %d latencies for %d calls" % (doc.get("errors"),
                                                                len(doc.get("lat_s", [])), n)
            self.count += n + warmup  # each of its executions is counted by the kernel
        if why:
            self.failures.append("libkbox (bench_exec): %s; stderr: %s"
                                 % (why, err.decode(errors="replace").strip()[:300]))
            return None
        doc["process_wall_s"] = wall
        doc["maxrss_kib"] = ru.ru_maxrss
        return doc

    def setup(self):
        """kbox exec -s bench SETUP_CODE, unmeasured, checked (no output)."""
        wall, rc, out, err, ru = run_timed([self.kbox, "exec", "-s", SESSION, SETUP_CODE],
                                           self.env, self.tmpdir)
        self.kbox_calls += 1
        if rc != 0 or out or err:
            raise RuntimeError("kbox exec %r: exit %s, stdout %r, stderr %r"
                               % (SETUP_CODE, rc, out[:200], err[:300]))
        self.count += 1

    def maps_check(self):
        """kbox exec -s bench SLEEP_CODE, its /proc/PID/maps read every 50 ms while it runs:
        {objects, samples, wall_s}, checked."""
        outp = os.path.join(self.tmpdir, "maps.out")
        errp = os.path.join(self.tmpdir, "maps.err")
        objs = set()
        samples = 0
        hwm = rss = 0
        with open(outp, "wb") as out, open(errp, "wb") as err:
            t0 = time.monotonic()
            # Popen returns once the exec has succeeded (its error pipe is close-on-exec)
            p = subprocess.Popen([self.kbox, "exec", "-s", SESSION, SLEEP_CODE], env=self.env,
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=err)
            self.kbox_calls += 1
            try:
                while p.poll() is None and time.monotonic() - t0 < 60:
                    exe = None
                    try:
                        exe = os.readlink("/proc/%d/exe" % p.pid)
                    except OSError:
                        pass
                    m = read_maps(p.pid)
                    mem = proc_mem(p.pid)
                    if m is not None and exe == os.path.realpath(self.kbox) and p.poll() is None:
                        objs |= m
                        samples += 1
                        if mem:
                            hwm = max(hwm, mem.get("VmHWM", 0))
                            rss = max(rss, mem.get("VmRSS", 0))
                    time.sleep(0.05)
                rc = p.wait(timeout=60)
            except BaseException:
                p.kill()
                p.wait()
                raise
            wall = time.monotonic() - t0
        with open(outp, "rb") as f:
            o = f.read()
        with open(errp, "rb") as f:
            e = f.read()
        why = None
        if rc != 0 or o or e:
            why = "exit %s, stdout %r, stderr %r (want 0, nothing)" % (rc, o[:200], e[:300])
        elif samples < 5:
            why = "only %d readings of its maps while it ran" % samples
        else:
            self.count += 1
        if why:
            self.failures.append("kbox exec %r (maps check): %s" % (SLEEP_CODE, why))
        return {"objects": sorted(objs), "samples": samples, "wall_s": wall, "ok": why is None,
                "vmhwm_kib": hwm, "vmrss_kib": rss}


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


def summarize_libkbox(batches):
    """The figures of libkbox's batches, in the shape of summarize's (per call)."""
    lat = [x for b in batches for x in b["lat_s"]]
    cpu = [x for b in batches for x in b["cpu_s"]]
    rss = [b["maxrss_kib"] for b in batches]
    return {
        "calls": len(lat),
        "failed": 0,
        "processes": len(batches),
        "wall_median_s": statistics.median(lat),
        "wall_mean_s": statistics.fmean(lat),
        "wall_p10_s": pct(lat, 10),
        "wall_p90_s": pct(lat, 90),
        "wall_min_s": min(lat),
        "wall_max_s": max(lat),
        "cpu_median_s": statistics.median(cpu),
        "maxrss_median_kib": statistics.median(rss),
        "maxrss_max_kib": max(rss),
        "dropped": sum(b.get("dropped", 0) for b in batches),
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


CLIENTS = ("kbox", "jupyter", "libkbox", "ctl", "floor")
LABELS = {"kbox": "kbox exec", "jupyter": "jupyter run", "libkbox": "libkbox",
          "ctl": "control socket", "floor": "floor_ctl"}


def main(argv):
    ap = argparse.ArgumentParser(prog="session.py", description=__doc__.split("\n")[0])
    ap.add_argument("kbox", nargs="?", default=os.environ.get("KBOX", "./kbox"),
                    help="the kbox program (default: $KBOX, else ./kbox)")
    ap.add_argument("-n", type=int, default=20,
                    help="calls of kbox exec and of jupyter run per round (default 20)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3,
                    help="unmeasured calls of kbox exec and jupyter run before the rounds")
    ap.add_argument("--bench-exec", metavar="PATH",
                    help="libkbox's execute round trip, bench/bench_exec (default: "
                         "bench/bench_exec beside KBOX, else $BENCH_EXEC)")
    ap.add_argument("--floor-ctl", metavar="PATH",
                    help="the floor of a kbox exec process, bench/floor_ctl (default: "
                         "bench/floor_ctl beside KBOX, else $FLOOR_CTL; without one the "
                         "floor client is left out)")
    ap.add_argument("--exec-n", type=int, default=100,
                    help="measured calls of each bench_exec process (one per round; default 100)")
    ap.add_argument("--exec-warmup", type=int, default=20,
                    help="unmeasured calls each bench_exec process makes first (default 20)")
    ap.add_argument("--rss-calls", type=int, default=RSS_CALLS,
                    help="kbox exec calls before the supervisor's second VmRSS reading, at "
                         "least (default %d)" % RSS_CALLS)
    ap.add_argument("--cpu-calls", type=int, default=CPU_CALLS,
                    help="after the rounds, this many kbox exec calls back to back, with "
                         "nothing else running on the kernel, for the supervisor's CPU per "
                         "kbox exec (added to the rounds' kbox exec blocks; default %d)"
                         % CPU_CALLS)
    ap.add_argument("--long-calls", type=int, default=0,
                    help="after the second reading, this many more unmeasured kbox exec calls "
                         "and a third reading, to see whether the supervisor's memory levels "
                         "off (no target; default 0: none)")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter for jupyter run (default: this one)")
    ap.add_argument("--jupyter", default="/usr/bin/jupyter",
                    help="the jupyter command (default /usr/bin/jupyter; 'none': "
                         "PY -m jupyter_client.runapp)")
    ap.add_argument("--json", metavar="FILE",
                    help="also write the results and every call's figures as JSON to FILE")
    args = ap.parse_args(argv[1:])
    if args.n < 1 or args.rounds < 1 or args.warmup < 0 or args.exec_n < 1 \
            or args.exec_warmup < 0 or args.rss_calls < 0 or args.long_calls < 0 \
            or args.cpu_calls < 0:
        ap.error("-n, --rounds and --exec-n must be positive, --warmup, --exec-warmup and "
                 "--rss-calls not negative")
    if args.jupyter != "none" and not os.access(args.jupyter, os.X_OK):
        ap.error("%s is not an executable (install jupyter-core and jupyter-client, "
                 "or give --jupyter none)" % args.jupyter)
    kbox = os.path.abspath(args.kbox)
    if not os.access(kbox, os.X_OK):
        ap.error("%s is not an executable (give the kbox program as the argument "
                 "or in $KBOX)" % args.kbox)
    bench_exec = args.bench_exec or os.path.join(os.path.dirname(kbox), "bench", "bench_exec")
    if not args.bench_exec and not os.access(bench_exec, os.X_OK) and os.environ.get("BENCH_EXEC"):
        bench_exec = os.environ["BENCH_EXEC"]
    bench_exec = os.path.abspath(bench_exec)
    if not os.access(bench_exec, os.X_OK):
        ap.error("%s is not an executable (make bench/bench_exec, or give --bench-exec)"
                 % bench_exec)
    floor_ctl = args.floor_ctl or os.path.join(os.path.dirname(kbox), "bench", "floor_ctl")
    if not args.floor_ctl and not os.access(floor_ctl, os.X_OK) and os.environ.get("FLOOR_CTL"):
        floor_ctl = os.environ["FLOOR_CTL"]
    floor_ctl = os.path.abspath(floor_ctl)
    if not os.access(floor_ctl, os.X_OK):
        if args.floor_ctl:
            ap.error("%s is not an executable (make bench/floor_ctl, or give --floor-ctl)"
                     % args.floor_ctl)
        log("no %s (make bench/floor_ctl): the floor client is left out", floor_ctl)
        floor_ctl = None

    signal.signal(signal.SIGTERM, on_sigterm)
    # A short private state dir: socket paths under it must stay < 108 bytes.
    home = tempfile.mkdtemp(prefix="kb.", dir="/tmp")
    tmpdir = os.path.join(home, "bench")
    os.mkdir(tmpdir)
    env = dict(os.environ, KBOX_HOME=home, JUPYTER_RUNTIME_DIR=os.path.join(tmpdir, "rt"))
    env.pop("KBOX_SESSION", None)
    bench = Bench(kbox, args.python, tmpdir, env, bench_exec)
    bench.floor_ctl = floor_ctl
    clients = CLIENTS if floor_ctl else tuple(c for c in CLIENTS if c != "floor")
    if args.jupyter != "none":
        bench.jupyter = args.jupyter
    calls = {c: [] for c in clients if c != "libkbox"}
    batches = []
    floor = []
    per_round = []
    libs = {}
    mem_start = mem_end = cpu_start = cpu_end = load_start = load_end = None
    calls_at_mem_end = count_at_mem_end = None
    long_mem = []
    extra_calls = 0
    started = False
    sup_pid = None
    start_s = None
    st = status_end = None
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
        bench.connfile = kconn.write(kbox, env, SESSION, os.path.join(tmpdir, "kernel.json"))
        bench.count += 1  # (kconn asked the kernel with one execution)
        sdir = bench.sdir = os.path.join(home, "sessions", SESSION)
        sst = os.stat(sdir)
        bench.ctl_path = os.path.join(sdir, "control.sock")
        bench.ctl_hello = (json.dumps({"op": "session", "dir": sdir, "dev": sst.st_dev,
                                       "ino": sst.st_ino}, separators=(",", ":")) + "\n").encode()
        bench.sup_pid = sup_pid
        mem_start = proc_mem(sup_pid)
        cpu_start = proc_cpu(sup_pid)
        load_start = os.getloadavg()
        log("session %s started in %.2f s (backend %s): supervisor pid %d, kernel pid %d; %s",
            SESSION, start_s, st.get("backend"), sup_pid, st["kernel_pid"], fmt_mem(mem_start))

        bench.setup()
        for _ in range(args.warmup):
            for client in ("kbox", "jupyter"):
                bench.call(client)
        for r in range(args.rounds):
            k = r % len(clients)
            order = clients[k:] + clients[:k]
            this = {}
            for client in order:
                if client == "libkbox":
                    b = bench.libkbox_batch(args.exec_n, args.exec_warmup)
                    if b is None:
                        raise RuntimeError("bench_exec failed: %s" % bench.failures[-1])
                    b["round"] = r + 1
                    batches.append(b)
                    this[client] = statistics.median(b["lat_s"])
                else:
                    if client == "kbox":
                        cs = bench.kbox_block(args.n)
                    elif client == "ctl":
                        cs = bench.ctl_block(args.n)
                    else:
                        cs = [bench.call(client) for _ in range(args.n)]
                    calls[client].extend(cs)
                    this[client] = statistics.median(c["wall_s"] for c in cs)
            per_round.append(this)
            log("round %2d/%d  kbox exec %6.1f ms  jupyter run %6.1f ms  libkbox %5.2f ms  "
                "control socket %5.2f ms  floor_ctl %s ms  jupyter/kbox %5.1fx  "
                "kbox/libkbox %4.2fx",
                r + 1, args.rounds, this["kbox"] * 1e3, this["jupyter"] * 1e3,
                this["libkbox"] * 1e3, this["ctl"] * 1e3,
                "%5.2f" % (this["floor"] * 1e3) if "floor" in this else "-",
                this["jupyter"] / this["kbox"],
                this["kbox"] / this["libkbox"])

        # The floor of any kbox command: start, load the same libraries, exit.
        for _ in range(args.rounds * args.n):
            wall, rc, out, err, ru = run_timed([kbox, "version"], env, tmpdir)
            if rc != 0 or not out.startswith(b"kbox "):
                raise RuntimeError("kbox version exited %s: %r" % (rc, out[:100]))
            floor.append({"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
                          "maxrss_kib": ru.ru_maxrss, "ok": True})

        # What the kbox program loads: on disk (ldd), when it runs `version`
        # (LD_DEBUG=files: dlopen too) and while a kbox exec waits (its maps).
        libs["ldd"] = ldd(kbox)
        objs, rc, out = ld_debug_objects([kbox, "version"], env, tmpdir)
        if rc != 0 or not out.startswith(b"kbox "):
            raise RuntimeError("kbox version (LD_DEBUG=files) exited %s: %r" % (rc, out[:100]))
        libs["version_loaded"] = objs
        mc = bench.maps_check()
        libs["exec_maps"] = mc["objects"]
        libs["exec_maps_samples"] = mc["samples"]
        libs["exec_maps_ok"] = mc["ok"]
        libs["exec_vmhwm_kib"] = mc["vmhwm_kib"]
        libs["exec_vmrss_kib"] = mc["vmrss_kib"]
        libs["supervisor_maps"] = sorted(read_maps(sup_pid) or [])
        for k in ("ldd", "version_loaded", "exec_maps", "supervisor_maps"):
            libs[k + "_forbidden"] = forbidden(libs[k])
        libs["pass"] = (mc["ok"] and not libs["ldd_forbidden"]
                        and not libs["version_loaded_forbidden"]
                        and not libs["exec_maps_forbidden"])

        # At least RSS_CALLS kbox exec calls before the second reading.
        while bench.kbox_calls < args.rss_calls:
            bench.call("kbox")
            extra_calls += 1
        mem_end = proc_mem(sup_pid)
        cpu_end = proc_cpu(sup_pid)
        calls_at_mem_end = bench.kbox_calls
        count_at_mem_end = bench.count
        # The supervisor's CPU per kbox exec in one long window of kbox exec
        # calls alone (added to the rounds' kbox exec blocks): its clock
        # ticks are 10 ms, so a long window keeps the rounding small.
        if args.cpu_calls:
            bench.kbox_block(args.cpu_calls)
        load_end = os.getloadavg()
        for i in range(args.long_calls):
            bench.call("kbox")
            if (i + 1) % 500 == 0 or i + 1 == args.long_calls:
                m = proc_mem(sup_pid)
                long_mem.append({"kbox_calls": bench.kbox_calls, "executions": bench.count,
                                 "mem_kib": m})
                log("after %d kbox exec calls (%d executions): %s", bench.kbox_calls,
                    bench.count, fmt_mem(m))
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

    if fatal or not calls["kbox"] or not calls["jupyter"] or not calls["ctl"] or not batches:
        return 1

    stats = {c: summarize(cs) for c, cs in calls.items()}
    stats["libkbox"] = summarize_libkbox(batches)
    ratios = [r["jupyter"] / r["kbox"] for r in per_round]
    ratio = statistics.median(ratios)
    pooled = stats["jupyter"]["wall_median_s"] / stats["kbox"]["wall_median_s"]
    ok = ratio >= RATIO_TARGET
    cpu_ratio = stats["jupyter"]["cpu_median_s"] / stats["kbox"]["cpu_median_s"]
    xratios = [r["kbox"] / r["libkbox"] for r in per_round]
    xratio = statistics.median(xratios)
    xpooled = stats["kbox"]["wall_median_s"] / stats["libkbox"]["wall_median_s"]
    xok = xratio <= EXEC_RATIO_TARGET
    fratios = [r["floor"] / r["libkbox"] for r in per_round if "floor" in r]
    fratio = statistics.median(fratios) if fratios else None
    rss_start_ok = bool(mem_start) and mem_start["VmRSS"] <= RSS_TARGET_KIB
    rss_end_ok = bool(mem_end) and mem_end["VmRSS"] <= RSS_TARGET_KIB \
        and calls_at_mem_end >= args.rss_calls

    print("kbox exec -s %s '1+1' vs jupyter run --existing vs libkbox in process, one session "
          "kernel (backend %s), %d rounds x (%d + %d calls, and one bench_exec of %d calls after "
          "%d warm-up), after %d warm-up calls; %d CPUs"
          % (SESSION, st.get("backend"), args.rounds, args.n, args.n, args.exec_n,
             args.exec_warmup, args.warmup, os.cpu_count() or 0))
    print()
    print("%-14s %4s %6s %9s %9s %9s %9s %9s %10s %10s"
          % ("client", "calls", "failed", "median", "mean", "p10", "p90", "max", "CPU/call",
             "peak RSS"))
    for client in ("kbox", "jupyter", "libkbox", "ctl", "floor"):
        if client not in stats:
            continue
        s = stats[client]
        if client == "jupyter":
            peak = "%7.1f MiB" % (s["maxrss_median_kib"] / 1024)
        elif client == "kbox" and libs.get("exec_vmhwm_kib"):
            peak = "%7.1f MiB" % (libs["exec_vmhwm_kib"] / 1024)
        else:
            peak = "-"
        cpu = "%10.2f" % (s["cpu_median_s"] * 1e3) if client != "ctl" else "%10s" % "-"
        print("%-14s %4d %6d %9.2f %9.2f %9.2f %9.2f %9.2f %s %11s"
              % (LABELS[client], s["calls"], s["failed"], s["wall_median_s"] * 1e3,
                 s["wall_mean_s"] * 1e3, s["wall_p10_s"] * 1e3, s["wall_p90_s"] * 1e3,
                 s["wall_max_s"] * 1e3, cpu, peak))
    print("(ms per call; kbox exec and jupyter run: a whole process, spawn to exit, and its CPU "
          "(user + sys);\n libkbox: kbox_client_execute in bench_exec's process and its CPU per "
          "call; control socket: this script's own calls on the\n supervisor's control.sock, "
          "as kbox exec makes them (its CPU is not counted); floor_ctl: the same\n from a C "
          "program of libc alone, a process per call, spawn to exit; peak RSS: jupyter run's\n median ru_maxrss, kbox exec's VmHWM read while it "
          "waited (the maps check): its ru_maxrss would be\n this script's, which Linux carries "
          "across exec)")
    print()
    print("kbox start:                 %.2f s" % start_s)
    print("supervisor idle after start: %s" % fmt_mem(mem_start))
    print("supervisor after %d kbox exec calls (%d unmeasured added): %s"
          % (calls_at_mem_end, extra_calls, fmt_mem(mem_end)))
    growth = None
    if mem_end:
        print("supervisor peak (VmHWM):     %.1f MiB" % (mem_end["VmHWM"] / 1024))
    if mem_start and mem_end and count_at_mem_end:
        growth = (mem_end["RssAnon"] - mem_start["RssAnon"]) * 1024 / count_at_mem_end
        print("supervisor RssAnon growth:   %+.0f KiB over the kernel's %d executions (all clients'), "
              "%.0f bytes each" % (mem_end["RssAnon"] - mem_start["RssAnon"], count_at_mem_end,
                                   growth))
    for lm in long_mem[-1:]:
        print("supervisor after %d kbox exec calls (--long-calls): %s"
              % (lm["kbox_calls"], fmt_mem(lm["mem_kib"])))
    sup_cpu = None
    if cpu_start is not None and cpu_end is not None:
        sup_cpu = cpu_end - cpu_start
        print("supervisor CPU over the whole run (%d kbox exec, %d jupyter run calls and %d "
              "libkbox executions, whose iopub it verifies too): %.2f s"
              % (calls_at_mem_end, len(calls["jupyter"]) + args.warmup,
                 len(batches) * (args.exec_n + args.exec_warmup), sup_cpu))
    sup_per_call = sup_rt_per_call = None
    if bench.sup_cpu_calls:
        sup_per_call = bench.sup_cpu_s / bench.sup_cpu_calls
        sup_rt_per_call = bench.sup_runtime_s / bench.sup_cpu_calls
        print("supervisor CPU per kbox exec: %.2f ms = user %.2f + sys %.2f (/proc/PID/stat, "
              "over %d kbox exec calls in %d windows of kbox exec alone; schedstat: %.2f ms; "
              "%.1f context switches per call)"
              % (sup_per_call * 1e3, 1e3 * bench.sup_user_s / bench.sup_cpu_calls,
                 1e3 * (bench.sup_cpu_s - bench.sup_user_s) / bench.sup_cpu_calls,
                 bench.sup_cpu_calls, bench.sup_windows, sup_rt_per_call * 1e3,
                 bench.sup_csw / bench.sup_cpu_calls))
    if status_end:
        print("supervisor counted %s executions (kbox exec calls: %d, on the control socket "
              "from this script: %d)"
              % (status_end.get("executions"), bench.kbox_calls, bench.ctl_calls))
    print("load average at the start %.2f, at the end %.2f (1 min)"
          % (load_start[0], load_end[0]))
    print()
    print("libraries (none may be libzmq, libczmq, libsodium, libcurl):")
    print("  ldd kbox:                               %s"
          % " ".join(os.path.basename(x) for x in libs["ldd"]))
    print("  kbox version loads (LD_DEBUG=files):    %s"
          % (" ".join(os.path.basename(x) for x in libs["version_loaded"]) or "(nothing)"))
    print("  kbox exec maps (%2d readings while it ran): %s"
          % (libs["exec_maps_samples"],
             " ".join(os.path.basename(x) for x in libs["exec_maps"] if x != os.path.realpath(kbox))))
    print("  (the supervisor, for comparison, maps %s)"
          % (" ".join(os.path.basename(x) for x in libs["supervisor_maps_forbidden"])
             or "none of them"))
    print()
    print("wall median  kbox exec %.2f ms  jupyter run %.1f ms  libkbox %.2f ms" %
          (stats["kbox"]["wall_median_s"] * 1e3, stats["jupyter"]["wall_median_s"] * 1e3,
           stats["libkbox"]["wall_median_s"] * 1e3))
    print("ratio jupyter run / kbox exec %.1fx (target >= %.0fx)  %s  (rounds %.1fx .. %.1fx, "
          "pooled %.1fx)"
          % (ratio, RATIO_TARGET, "PASS" if ok else "FAIL", min(ratios), max(ratios), pooled))
    print("ratio kbox exec / libkbox %.2fx (target <= %.1fx)  %s  (rounds %.2fx .. %.2fx, "
          "pooled %.2fx; kbox exec is %.2f ms above libkbox's round trip)"
          % (xratio, EXEC_RATIO_TARGET, "PASS" if xok else "FAIL", min(xratios), max(xratios),
             xpooled, (stats["kbox"]["wall_median_s"] - stats["libkbox"]["wall_median_s"]) * 1e3))
    if sup_per_call is not None:
        print("supervisor CPU per kbox exec %.2f ms (target <= %.1f ms)  %s"
              % (sup_per_call * 1e3, SUP_CPU_TARGET * 1e3,
                 "PASS" if sup_per_call <= SUP_CPU_TARGET else "FAIL"))
    print("supervisor VmRSS idle %.1f MiB, after %d kbox exec %.1f MiB (target <= %.0f MiB)  %s"
          % (mem_start["VmRSS"] / 1024 if mem_start else float("nan"), calls_at_mem_end or 0,
             mem_end["VmRSS"] / 1024 if mem_end else float("nan"), RSS_TARGET_KIB / 1024,
             "PASS" if rss_start_ok and rss_end_ok else "FAIL"))
    print("kbox version and kbox exec load no libzmq, libczmq, libsodium, libcurl  %s%s"
          % ("PASS" if libs["pass"] else "FAIL",
             "" if libs["pass"] else "  (%s)" % ", ".join(
                 os.path.basename(x) for k in ("ldd", "version_loaded", "exec_maps")
                 for x in libs[k + "_forbidden"])))
    failed = len(bench.failures)
    print("CPU per call  kbox exec %.2f ms  jupyter run %.1f ms  ratio %.1fx  libkbox %.2f ms"
          % (stats["kbox"]["cpu_median_s"] * 1e3, stats["jupyter"]["cpu_median_s"] * 1e3,
             cpu_ratio, stats["libkbox"]["cpu_median_s"] * 1e3))
    fl = summarize(floor) if floor else None
    if fl:
        print("floor: kbox version (start, load the same libraries, exit) %.2f ms wall, "
              "%.2f ms CPU; kbox exec is %.2f ms above it"
              % (fl["wall_median_s"] * 1e3, fl["cpu_median_s"] * 1e3,
                 (stats["kbox"]["wall_median_s"] - fl["wall_median_s"]) * 1e3))
        least = fl["wall_median_s"] + stats["ctl"]["wall_median_s"]
        print("kbox exec's parts: a start (kbox version) %.2f ms + the supervisor's round trip "
              "on its control socket %.2f ms (libkbox's %.2f ms + the hop %.2f ms) = %.2f ms, "
              "%.2fx libkbox's: what a kbox exec that did nothing else would take; kbox exec's "
              "own work besides: %.2f ms"
              % (fl["wall_median_s"] * 1e3, stats["ctl"]["wall_median_s"] * 1e3,
                 stats["libkbox"]["wall_median_s"] * 1e3,
                 (stats["ctl"]["wall_median_s"] - stats["libkbox"]["wall_median_s"]) * 1e3,
                 least * 1e3, least / stats["libkbox"]["wall_median_s"],
                 (stats["kbox"]["wall_median_s"] - least) * 1e3))
    if "floor" in stats:
        print("floor of a kbox exec process: floor_ctl (libc alone: connect, one write, read "
              "the replies, print) %.2f ms, %.2fx libkbox's (rounds %.2fx .. %.2fx): the least "
              "any kbox exec program takes here; kbox exec is %.2f ms above it"
              % (stats["floor"]["wall_median_s"] * 1e3, fratio, min(fratios), max(fratios),
                 (stats["kbox"]["wall_median_s"] - stats["floor"]["wall_median_s"]) * 1e3))
    print("failed calls: %d" % failed)
    for line in bench.failures[:10]:
        print("  " + line)

    doc = {
        "bench": "session",
        "config": {"rounds": args.rounds, "n": args.n, "warmup": args.warmup,
                   "exec_n": args.exec_n, "exec_warmup": args.exec_warmup,
                   "rss_calls": args.rss_calls, "cpu_calls": args.cpu_calls, "kbox": kbox,
                   "bench_exec": bench_exec,
                   "python": args.python,
                   "jupyter": bench.jupyter or "%s -m jupyter_client.runapp" % args.python},
        "versions": versions(),
        "backend": st.get("backend"),
        "kbox_start_s": start_s,
        "clients": stats,
        "round_medians_s": per_round,
        "ratio_jupyter_kbox": ratio,
        "ratio_rounds": ratios,
        "ratio_pooled": pooled,
        "ratio_target": RATIO_TARGET,
        "ratio_pass": ok,
        "ratio_kbox_libkbox": xratio,
        "ratio_kbox_libkbox_rounds": xratios,
        "ratio_kbox_libkbox_pooled": xpooled,
        "ratio_kbox_libkbox_target": EXEC_RATIO_TARGET,
        "ratio_kbox_libkbox_pass": xok,
        "cpu_ratio_jupyter_kbox": cpu_ratio,
        "floor_kbox_version": fl,
        "least_kbox_exec_s": (fl["wall_median_s"] + stats["ctl"]["wall_median_s"]) if fl else None,
        "ratio_floor_libkbox": fratio,
        "ratio_floor_libkbox_rounds": fratios,
        "least_ratio_kbox_libkbox": ((fl["wall_median_s"] + stats["ctl"]["wall_median_s"])
                                     / stats["libkbox"]["wall_median_s"]) if fl else None,
        "libraries": libs,
        "libraries_pass": libs["pass"],
        "supervisor_mem_start_kib": mem_start,
        "supervisor_mem_end_kib": mem_end,
        "supervisor_kbox_calls_at_mem_end": calls_at_mem_end,
        "kernel_executions_at_mem_end": count_at_mem_end,
        "supervisor_anon_growth_bytes_per_execution": growth,
        "supervisor_mem_long": long_mem,
        "supervisor_rss_target_kib": RSS_TARGET_KIB,
        "supervisor_rss_pass": rss_start_ok and rss_end_ok,
        "supervisor_executions": status_end.get("executions") if status_end else None,
        "supervisor_cpu_s": sup_cpu,
        "supervisor_cpu_per_kbox_exec_s": sup_per_call,
        "supervisor_runtime_per_kbox_exec_s": sup_rt_per_call,
        "supervisor_user_per_kbox_exec_s": (bench.sup_user_s / bench.sup_cpu_calls
                                            if bench.sup_cpu_calls else None),
        "supervisor_csw_per_kbox_exec": (bench.sup_csw / bench.sup_cpu_calls
                                         if bench.sup_cpu_calls else None),
        "supervisor_cpu_window_calls": bench.sup_cpu_calls,
        "supervisor_cpu_target_s": SUP_CPU_TARGET,
        "supervisor_cpu_pass": None if sup_per_call is None else sup_per_call <= SUP_CPU_TARGET,
        "loadavg_start": load_start,
        "loadavg_end": load_end,
        "failed_calls": failed,
        "failures": bench.failures,
    }
    if args.json:
        raw = {c: [{k: x[k] for k in ("wall_s", "cpu_s", "maxrss_kib", "ok")} for x in cs]
               for c, cs in calls.items()}
        raw["libkbox"] = [{k: b[k] for k in ("round", "lat_s", "cpu_s", "process_wall_s",
                                            "maxrss_kib")} for b in batches]
        with open(args.json, "w") as f:
            json.dump(dict(doc, calls=raw), f, indent=1)
            f.write("\n")
    print(json.dumps(doc, sort_keys=True))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
