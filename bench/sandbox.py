#!/usr/bin/python3
"""bench/sandbox.py - what the bwrap sandbox costs: start-up time and memory per session.

    /usr/bin/python3 bench/sandbox.py [KBOX] [--rounds R] [--sessions N]
        [--no-fresh-home] [--no-warmup] [--json FILE]

KBOX is the kbox program (default: $KBOX, else ./kbox).  Everything runs
in a private KBOX_HOME (a fresh /tmp/kb.XXXXXXXX, removed at the end) and
compares, in one run on one machine, a session of backend bwrap (the
default sandbox) with one of backend none (the same kernel, started the
same way, unsandboxed):

1. Start-up: the wall time from launching

       KBOX start -s NAME --backend B
       KBOX exec -s NAME 'import pandas, numpy, matplotlib; 1+1'
                                      (must print exactly "Out[1]: 2")

   i.e. from spawning `kbox start` to `kbox exec` exiting with the first
   result of a typical first cell.  The same work on both sides: the same
   kernel and code, a fresh session each time; the plain kernel has the
   user's HOME (as kbox passes it), the sandboxed one its session's fresh
   /home/kbox.  A third variant, none-fresh (backend none with a fresh
   empty HOME; no target), tells what of the difference is the fresh home.
   One unmeasured session of each variant first (page cache, the user's
   HOME as after one kernel), then R rounds, each starting one fresh
   session of each variant, the order rotated from round to round; after
   each measurement, off the clock: where the time went (the session's
   events and the kernel's socket files' bind times), the first `import
   matplotlib.pyplot` in that session (the font cache), then the session
   is stopped, its supervisor waited for, its cgroups checked to be gone
   and its directory removed.  Reported: median, p10, p90 per variant, the
   ratio bwrap/none of the medians (target <= 1.03) and the difference in
   ms; the same paired by round; the phases; and the CPU used up to the
   first result: the two commands' (wait4, with what they reaped) plus
   every process of the session's (/proc/PID/stat utime + stime + cutime
   + cstime), which depends far less than wall time on what else the
   machine is doing.

2. Memory of an idle session (after a plain `1+1`).  The processes that
   exist only because of the sandbox are the two bwrap processes above the
   kernel: bwrap itself (the kernel's grandparent, a child of the
   supervisor) and bwrap's init (pid 1 of the sandbox, the kernel's
   parent).  Their Rss, Pss and private memory (USS) come from
   /proc/PID/smaps_rollup.  Also: the kernel's own Rss / Pss / USS under
   each backend and the difference, and the bwrap session's cgroup
   (memory.usage_in_bytes, or memory.current on cgroup v2) next to the Rss
   of the processes in it.  Measured with one session of each backend
   running, then with N (default 4) of each running at once, to show that
   the overhead is per session.  Reported: the sandbox's overhead per
   session as the Pss of its two bwrap processes (target < 5 MB,
   MB = 10^6 bytes).

Every call is checked: `kbox start` must exit 0 and name the backend, with
nothing on stderr but, for backend none, exactly the warning
"kbox: warning: backend none: the kernel runs unsandboxed"; `kbox exec`
must exit 0, print exactly "Out[1]: 2" and nothing on stderr; the process
tree must be supervisor -> bwrap -> bwrap -> kernel (bwrap) or
supervisor -> kernel (none).  The last line of stdout is one JSON object
with every figure (--json FILE also writes it, with each round's figures).
Exit status 0 when every call was correct (a missed target is reported,
not fatal); 1 when anything failed; 2 on a usage error.  Sessions are
stopped and the directory removed at the end, also after a failure, ^C or
SIGTERM.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import kconn

START_RATIO_TARGET = 1.03   # bwrap / none, median start-to-first-result, at most
MEM_TARGET_BYTES = 5e6      # Pss of the two bwrap processes per session, below
# The first code of every start-up round (the same on both sides): what an
# agent's first cell typically does.  The memory phase runs plain 1+1.
START_CODE = "import pandas, numpy, matplotlib; 1+1"
MEM_CODE = "1+1"
EXEC_OUT = b"Out[1]: 2\n"
NONE_WARNING = b"kbox: warning: backend none: the kernel runs unsandboxed\n"
BACKENDS = ("bwrap", "none")
# The start-up rounds' variants: (backend, HOME of `kbox start` and so of a
# none kernel: None = this process's, "fresh" = a new empty directory per
# session).  bwrap's kernel always has a fresh /home/kbox (the session's
# home directory); none-fresh is not compared against a target: it tells
# what of bwrap's extra time is the fresh HOME and what is the sandbox.
VARIANTS = {"bwrap": ("bwrap", None), "none": ("none", None), "none-fresh": ("none", "fresh")}
# Off the clock, in each start-up session after its measurement: the first
# import of matplotlib.pyplot (which builds the font cache,
# ~/.cache/matplotlib/fontlist-*.json, if HOME has none), timed by the
# kernel itself; and whether a font list is in the cache directory after it.
PYPLOT_CODE = ("import time as _t; _t0 = _t.perf_counter(); import matplotlib.pyplot; "
               "print('%.1f' % ((_t.perf_counter() - _t0) * 1e3)); "
               "import matplotlib, os; print(int(any(f.startswith('fontlist') for f in "
               "os.listdir(matplotlib.get_cachedir()))))")
ROLLUP_KEYS = ("Rss", "Pss", "Pss_Anon", "Pss_File", "Pss_Shmem", "Shared_Clean",
               "Shared_Dirty", "Private_Clean", "Private_Dirty", "Swap")


def log(fmt, *args):
    sys.stderr.write((fmt % args if args else fmt) + "\n")
    sys.stderr.flush()


def pct(xs, p):
    """The P-th percentile of XS (nearest rank)."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


class Failed(Exception):
    """A call did not do what it must: the figures mean nothing."""


class Terminated(Exception):
    """SIGTERM arrived: stop the sessions and leave."""


def on_sigterm(signum, frame):
    raise Terminated()


def run(argv, env, tmpdir, timeout=120):
    """Run ARGV to completion: (wall_s, exit_code, stdout, stderr, cpu_s).

    stdout and stderr go to files (no pipe to drain while the clock runs).
    cpu_s is the user + system CPU of the child and of the descendants it
    waited for (wait4).  exit_code is negative for a signal, None after
    TIMEOUT seconds (the child is then killed)."""
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
    cpu = ru.ru_utime + ru.ru_stime
    if wall >= timeout:
        return wall, None, b"", b"timed out after %d s" % timeout, cpu
    with open(outp, "rb") as f:
        stdout = f.read()
    with open(errp, "rb") as f:
        stderr = f.read()
    return wall, p.returncode, stdout, stderr, cpu


def proc_cpu(pid):
    """CPU seconds PID has used so far, with the children it has reaped (utime + stime +
    cutime + cstime)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rpartition(")")[2].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def alive(pid):
    """Whether PID is a live process (not gone, not a zombie)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def ppid(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rpartition(")")[2].split()[1])


def exe(pid):
    try:
        return os.readlink("/proc/%d/exe" % pid)
    except OSError:
        return None


def nspid(pid):
    """PID's pid in its innermost pid namespace (the last NSpid field)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    return None


def rollup(pid):
    """The smaps_rollup fields of PID in KiB, with Uss = Private_Clean + Private_Dirty."""
    out = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            key, _, val = line.partition(":")
            if key in ROLLUP_KEYS:
                out[key] = int(val.split()[0])
    out["Uss"] = out.get("Private_Clean", 0) + out.get("Private_Dirty", 0)
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmPTE:"):
                out["VmPTE"] = int(line.split()[1])
    return out


def poll(cond, deadline_s, step=0.02):
    """Call COND until it is true or DEADLINE_S seconds have passed: its last value."""
    end = time.monotonic() + deadline_s
    while True:
        v = cond()
        if v or time.monotonic() >= end:
            return v
        time.sleep(step)


# ---- cgroups ----

def cgroup_mounts():
    """{controller or "" for cgroup2: (mount point, root)} from our mountinfo."""
    mounts = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            a, b = pre.split(), post.split()
            if len(a) < 5 or len(b) < 3:
                continue
            if b[0] == "cgroup2":
                mounts.setdefault("", (a[4], a[3]))
            elif b[0] == "cgroup":
                for opt in b[2].split(","):
                    mounts.setdefault(opt, (a[4], a[3]))
    return mounts


def cgroup_dirs(pid, mounts):
    """{controller: directory} of the cgroups PID is in (memory, pids, cpu; "" for v2)."""
    dirs = {}
    with open("/proc/%d/cgroup" % pid) as f:
        for line in f:
            hid, ctls, path = line.rstrip("\n").split(":", 2)
            names = [""] if hid == "0" and ctls == "" else ctls.split(",")
            for c in names:
                if c in ("memory", "pids", "cpu", "") and c in mounts:
                    point, root = mounts[c]
                    if root != "/" and (path == root or path.startswith(root + "/")):
                        path = path[len(root):] or "/"
                    dirs[c] = os.path.normpath(point + "/" + path)
    return dirs


def cgroup_memory(d):
    """The memory figures of cgroup directory D in bytes (v1 or v2)."""
    def read(name):
        try:
            with open(os.path.join(d, name)) as f:
                return f.read()
        except OSError:
            return None
    out = {"dir": d}
    usage = read("memory.usage_in_bytes")
    if usage is not None:
        out["usage"] = int(usage)
        kmem = read("memory.kmem.usage_in_bytes")
        if kmem is not None:
            out["kmem"] = int(kmem)
    else:
        cur = read("memory.current")
        if cur is None:
            return None
        out["usage"] = int(cur)
    stat = read("memory.stat") or ""
    for line in stat.splitlines():
        k, _, v = line.partition(" ")
        if k in ("rss", "cache", "shmem", "mapped_file", "anon", "file", "kernel", "slab"):
            out["stat_" + k] = int(v)
    procs = read("cgroup.procs") or ""
    out["procs"] = sorted(int(x) for x in procs.split())
    return out


# ---- the run ----

class Bench:
    """One run: the private KBOX_HOME, the sessions it started, the failures."""

    def __init__(self, kbox, home):
        self.kbox = kbox
        self.home = home
        self.tmpdir = os.path.join(home, "bench")
        os.mkdir(self.tmpdir)
        self.env = dict(os.environ, KBOX_HOME=home)
        self.env.pop("KBOX_SESSION", None)
        self.failures = []
        self.started = 0        # sessions started and checked (kbox start + kbox exec)
        self.mounts = cgroup_mounts()

    def fail(self, what):
        self.failures.append(what)
        raise Failed(what)

    def cmd(self, *args, timeout=120):
        """KBOX ARGS, untimed: (exit code, stdout, stderr)."""
        _, rc, out, err, _ = run([self.kbox] + list(args), self.env, self.tmpdir, timeout)
        return rc, out, err

    def start(self, name, backend, code=MEM_CODE, home=None):
        """kbox start + kbox exec CODE, checked: (total_s, start_s, exec_s, cpu_s, t_launch),
        cpu_s the CPU of the two commands, t_launch the wall-clock time (time.time())
        just before kbox start was spawned.  HOME: None for this process's HOME, "fresh"
        for a new empty directory (kbox start's HOME, which the supervisor and a none
        kernel inherit)."""
        env = self.env
        if home == "fresh":
            hd = os.path.join(self.tmpdir, "home-" + name)
            os.mkdir(hd, 0o700)
            env = dict(self.env, HOME=hd)
        t_launch = time.time()
        t0 = time.monotonic()
        ws, rc, out, err, cs = run([self.kbox, "start", "-s", name, "--backend", backend],
                                   env, self.tmpdir)
        want_err = NONE_WARNING if backend == "none" else b""
        if rc != 0 or b"(backend %s," % backend.encode() not in out or err != want_err:
            self.fail("kbox start -s %s --backend %s: exit %s, stdout %r, stderr %r"
                      % (name, backend, rc, out[:200], err[:300]))
        we, rc, out, err, ce = run([self.kbox, "exec", "-s", name, code], self.env,
                                   self.tmpdir)
        total = time.monotonic() - t0
        self.started += 1
        if rc != 0 or out != EXEC_OUT or err:
            self.fail("kbox exec -s %s %r (backend %s): exit %s, stdout %r (want %r), "
                      "stderr %r" % (name, code, backend, rc, out[:200], EXEC_OUT, err[:300]))
        return total, ws, we, cs + ce, t_launch

    def events(self, name):
        """The session's events (events.ndjson), each with "t": its time as time.time()."""
        evs = []
        try:
            with open(os.path.join(self.home, "sessions", name, "events.ndjson")) as f:
                for line in f:
                    ev = json.loads(line)
                    try:
                        ev["t"] = datetime.datetime.strptime(
                            ev["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
                                tzinfo=datetime.timezone.utc).timestamp()
                    except (KeyError, ValueError):
                        ev["t"] = None
                    evs.append(ev)
        except (OSError, ValueError):
            pass
        return evs

    def phases(self, name, t_launch, ws, we, st):
        """Where the time of one start went, from the session's events and the kernel's
        ipc socket files (a socket's inode is made by its bind: its mtime is the time
        of the bind, to the kernel's timestamp granularity); ms, None if unknown."""
        evs = self.events(name)
        def first(kind, **kw):
            for ev in evs:
                if ev.get("event") == kind and all(ev.get(k) == v for k, v in kw.items()):
                    return ev
            return None
        spawn = first("start", generation=1)
        ready = first("ready", generation=1)
        ebeg = first("exec-begin")
        eend = first("exec-end")
        binds = self.binds(name)
        t_start_ret = t_launch + ws
        p = {
            "launch_to_spawn_ms": ms(t_launch, spawn and spawn["t"]),
            "spawn_to_first_bind_ms": ms(spawn and spawn["t"], min(binds) if binds else None),
            "binds_span_ms": ms(min(binds), max(binds)) if binds else None,
            "first_bind_to_ready_ms": ms(min(binds) if binds else None, ready and ready["t"]),
            "last_bind_to_ready_ms": ms(max(binds) if binds else None, ready and ready["t"]),
            "ready_to_start_return_ms": ms(ready and ready["t"], t_start_ret),
            "ready_event_ms": ready.get("ms") if ready else None,
            "exec_kernel_ms": (eend["seconds"] * 1e3 if eend and "seconds" in eend else None),
            "exec_begin_to_end_ms": ms(ebeg and ebeg["t"], eend and eend["t"]),
        }
        p["exec_other_ms"] = (we * 1e3 - p["exec_kernel_ms"]
                              if p["exec_kernel_ms"] is not None else None)
        return p

    def binds(self, name):
        """The bind times (time.time()) of session NAME's kernel's ipc sockets, in
        its sandbox's /run/kernel (kconn.socket_binds); [] when there are none."""
        return kconn.socket_binds(self.kbox, self.env, name)

    def restart(self, name):
        """Off the clock: kbox restart -s NAME, checked, and where its time went (ms):
        the restart request's wall time, the new kernel's spawn (its "start"
        event) to its first socket bound, the binds' span, and the first and
        the last bind to its "ready" event."""
        st0 = self.status(name)
        gen = st0.get("generation", 0) + 1
        t_launch = time.time()
        w, rc, out, err, cpu = run([self.kbox, "restart", "-s", name], self.env, self.tmpdir)
        if rc != 0 or err:
            self.fail("kbox restart -s %s: exit %s, stdout %r, stderr %r"
                      % (name, rc, out[:200], err[:300]))
        st = self.status(name)
        if st.get("generation") != gen:
            self.fail("kbox restart -s %s: generation %r, expected %d"
                      % (name, st.get("generation"), gen))
        evs = self.events(name)
        def first(kind):
            for ev in evs:
                if ev.get("event") == kind and ev.get("generation") == gen:
                    return ev
            return None
        spawn, ready = first("start"), first("ready")
        binds = self.binds(name)
        return {
            "restart_wall_ms": w * 1e3,
            "launch_to_spawn_ms": ms(t_launch, spawn and spawn["t"]),
            "spawn_to_first_bind_ms": ms(spawn and spawn["t"], min(binds) if binds else None),
            "binds_span_ms": ms(min(binds), max(binds)) if binds else None,
            "first_bind_to_ready_ms": ms(min(binds) if binds else None, ready and ready["t"]),
            "last_bind_to_ready_ms": ms(max(binds) if binds else None, ready and ready["t"]),
            "ready_event_ms": ready.get("ms") if ready else None,
        }

    def pyplot_probe(self, name):
        """Off the clock: the first import of matplotlib.pyplot in session NAME, timed by
        its kernel (ms), and whether the cache directory then holds a font list."""
        rc, out, err = self.cmd("exec", "-s", name, PYPLOT_CODE)
        lines = out.decode(errors="replace").split()
        if rc != 0 or len(lines) != 2:
            self.fail("kbox exec -s %s (pyplot probe): exit %s, stdout %r, stderr %r"
                      % (name, rc, out[:200], err[:300]))
        return float(lines[0]), lines[1] == "1"

    def status(self, name):
        rc, out, err = self.cmd("status", "-s", name, "--json")
        if rc != 0:
            self.fail("kbox status -s %s: exit %s: %r" % (name, rc, err[:300]))
        return json.loads(out)

    def ready_ms(self, name):
        """The supervisor's own figure for the first kernel's start (the "ready" event)."""
        try:
            with open(os.path.join(self.home, "sessions", name, "events.ndjson")) as f:
                for line in f:
                    ev = json.loads(line)
                    if ev.get("event") == "ready" and ev.get("generation") == 1:
                        return ev.get("ms")
        except (OSError, ValueError):
            pass
        return None

    def tree(self, name, backend):
        """The session's processes, checked: {supervisor, kernel, bwrap, init} pids."""
        st = self.status(name)
        if st.get("backend") != backend:
            self.fail("session %s: backend %r, expected %s" % (name, st.get("backend"), backend))
        sup, kern = st["pid"], st["kernel_pid"]
        t = {"supervisor": sup, "kernel": kern}
        if backend == "none":
            if ppid(kern) != sup:
                self.fail("session %s: the kernel %d is not a child of the supervisor %d"
                          % (name, kern, sup))
            return t
        init = ppid(kern)
        outer = ppid(init)
        if (exe(init) != exe(outer) or not (exe(init) or "").endswith("/bwrap")
                or ppid(outer) != sup or nspid(init) != 1 or nspid(kern) != 2):
            self.fail("session %s: not supervisor %d -> bwrap -> bwrap (pid 1 inside) -> "
                      "kernel %d (pid 2 inside): %d (%s) -> %d (%s, pid %s inside), kernel pid "
                      "%s inside" % (name, sup, kern, outer, exe(outer), init, exe(init),
                                     nspid(init), nspid(kern)))
        t.update(bwrap=outer, init=init)
        return t

    def stop(self, name, cgdirs=None):
        """kbox stop -s NAME, wait for its supervisor, check its cgroups are gone, remove it."""
        sup = None
        try:
            with open(os.path.join(self.home, "sessions", name, "supervisor.pid")) as f:
                sup = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
        rc, out, err = self.cmd("stop", "-s", name, timeout=60)
        if rc != 0:
            self.fail("kbox stop -s %s: exit %s: %r" % (name, rc, err[:300]))
        if sup and not poll(lambda: not alive(sup), 10):
            self.fail("session %s: supervisor %d still running 10 s after kbox stop"
                      % (name, sup))
        dirs = list((cgdirs or {}).values())
        if not poll(lambda: not any(os.path.isdir(d) for d in dirs), 5):
            self.fail("session %s: cgroup left behind 5 s after kbox stop: %s"
                      % (name, [d for d in dirs if os.path.isdir(d)]))
        shutil.rmtree(os.path.join(self.home, "sessions", name))

    def own_cgroups(self, kernel_pid):
        """The kernel's cgroup directories that are the session's own (named kbox-...)."""
        return {c: d for c, d in cgroup_dirs(kernel_pid, self.mounts).items()
                if os.path.basename(d).startswith("kbox-")}

    def cleanup(self):
        """Stop every session still running (best effort, bounded) and remove the home."""
        sups = []
        sdir = os.path.join(self.home, "sessions")
        for name in os.listdir(sdir) if os.path.isdir(sdir) else []:
            try:
                with open(os.path.join(sdir, name, "supervisor.pid")) as f:
                    sups.append(int(f.read().split()[0]))
            except (OSError, ValueError, IndexError):
                pass
        if os.path.isdir(sdir) and os.listdir(sdir):
            try:
                rc, out, err = self.cmd("stop", "--all", timeout=60)
                if rc != 0:
                    log("kbox stop --all exited %s: %s", rc, err.decode(errors="replace").strip())
            except (OSError, subprocess.SubprocessError) as e:
                log("kbox stop --all: %s", e)
            for pid in sups:
                if not poll(lambda: not alive(pid), 10, 0.1):
                    log("supervisor %d still running after kbox stop; killing it", pid)
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
        shutil.rmtree(self.home, ignore_errors=True)


def ms(a, b):
    """B - A in ms (None when either is unknown)."""
    return (b - a) * 1e3 if a is not None and b is not None else None


def startup_rounds(b, rounds, variants, warmup=True, restarts=0):
    """Part 1: R rounds of start-to-first-result per variant, the order rotated from
    round to round; first, unmeasured, one session of each (page cache, and the
    plain kernel's HOME as it is after it has run once)."""
    res = {v: [] for v in variants}
    if warmup:
        for v in variants:
            be, home = VARIANTS[v]
            name = "w" + v[0] + ("f" if home else "")
            b.start(name, be, START_CODE, home)
            b.stop(name, b.own_cgroups(b.tree(name, be)["kernel"]))
        log("warm-up: one session of each of %s started and stopped", ", ".join(variants))
    for r in range(rounds):
        k = r % len(variants)
        order = variants[k:] + variants[:k]
        line = []
        for v in order:
            be, home = VARIANTS[v]
            name = "%s%s%d" % (v[0], "f" if home else "", r + 1)
            total, ws, we, cli_cpu, t_launch = b.start(name, be, START_CODE, home)
            t = b.tree(name, be)
            # the session's processes (each with the helpers it reaped) and the two commands
            parts = {"commands": cli_cpu}
            parts.update((k, proc_cpu(pid)) for k, pid in t.items())
            cpu = sum(parts.values())
            st = b.status(name)
            ph = b.phases(name, t_launch, ws, we, st)
            cg = b.own_cgroups(t["kernel"])
            if be == "bwrap" and "memory" not in cg and "" not in cg:
                b.fail("session %s: the kernel is in no cgroup of its own: %s"
                       % (name, cgroup_dirs(t["kernel"], b.mounts)))
            # off the clock: matplotlib's font cache in this session's HOME
            pyplot_ms, fontlist = b.pyplot_probe(name)
            rs = [b.restart(name) for _ in range(restarts)]
            res[v].append({"restarts": rs, "total_s": total, "start_s": ws, "exec_s": we, "cpu_s": cpu,
                           "cpu_parts_s": parts, "phases_ms": ph,
                           "pyplot_first_import_ms": pyplot_ms, "fontlist_after": fontlist,
                           "ready_ms": b.ready_ms(name), "round": r + 1,
                           "first": v == order[0]})
            b.stop(name, cg)
            line.append("%s %5.0f ms (start %4.0f + exec %3.0f, CPU %4.0f)"
                        % (v, total * 1e3, ws * 1e3, we * 1e3, cpu * 1e3))
        log("round %2d/%d  %s", r + 1, rounds, "  ".join(line))
    return res


def summarize_startup(res):
    out = {}
    for be, xs in res.items():
        tot = [x["total_s"] for x in xs]
        ready = [x["ready_ms"] for x in xs if x["ready_ms"] is not None]
        out[be] = {
            "n": len(xs),
            "median_s": statistics.median(tot),
            "mean_s": statistics.fmean(tot),
            "p10_s": pct(tot, 10),
            "p90_s": pct(tot, 90),
            "min_s": min(tot),
            "max_s": max(tot),
            "start_median_s": statistics.median(x["start_s"] for x in xs),
            "exec_median_s": statistics.median(x["exec_s"] for x in xs),
            "ready_median_ms": statistics.median(ready) if ready else None,
            "cpu_median_s": statistics.median(x["cpu_s"] for x in xs),
            "cpu_parts_median_s": {k: statistics.median(x["cpu_parts_s"][k] for x in xs)
                                   for k in xs[0]["cpu_parts_s"]},
            "phases_median_ms": {k: med([x["phases_ms"][k] for x in xs])
                                 for k in xs[0]["phases_ms"]},
            "pyplot_first_import_median_ms": statistics.median(
                x["pyplot_first_import_ms"] for x in xs),
            "fontlist_after": sum(1 for x in xs if x["fontlist_after"]),
            "restarts": sum(len(x["restarts"]) for x in xs),
            "restart_phases_median_ms": {
                k: med([r[k] for x in xs for r in x["restarts"]])
                for k in RESTART_KEYS} if any(x["restarts"] for x in xs) else None,
        }
    # paired by round: the sessions of a round started back to back
    def paired(a, z):
        ratios = [x["total_s"] / y["total_s"] for x, y in zip(res[a], res[z])]
        diffs = [x["total_s"] - y["total_s"] for x, y in zip(res[a], res[z])]
        return {
            "ratio_of_medians": out[a]["median_s"] / out[z]["median_s"],
            "diff_of_medians_s": out[a]["median_s"] - out[z]["median_s"],
            "ratio_rounds": ratios,
            "ratio_median": statistics.median(ratios),
            "diff_median_s": statistics.median(diffs),
            "ratio_of_minima": out[a]["min_s"] / out[z]["min_s"],
            "cpu_ratio_of_medians": out[a]["cpu_median_s"] / out[z]["cpu_median_s"],
            "cpu_diff_median_s": statistics.median(
                x["cpu_s"] - y["cpu_s"] for x, y in zip(res[a], res[z])),
        }
    out["paired"] = paired("bwrap", "none")
    if "none-fresh" in res:
        out["paired_fresh_none"] = paired("none-fresh", "none")
        out["paired_bwrap_fresh"] = paired("bwrap", "none-fresh")
    return out


RESTART_KEYS = ("restart_wall_ms", "launch_to_spawn_ms", "spawn_to_first_bind_ms",
                "binds_span_ms", "first_bind_to_ready_ms", "last_bind_to_ready_ms",
                "ready_event_ms")


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def measure_sessions(b, names):
    """Part 2: the memory of each running session in NAMES ({name: backend})."""
    out = {}
    for name, be in names.items():
        t = b.tree(name, be)
        m = {"backend": be, "pids": t, "kernel": rollup(t["kernel"]),
             "supervisor": rollup(t["supervisor"])}
        if be == "bwrap":
            m["bwrap"] = rollup(t["bwrap"])
            m["init"] = rollup(t["init"])
            cg = b.own_cgroups(t["kernel"])
            d = cg.get("memory") or cg.get("")
            cm = cgroup_memory(d) if d else None
            if not cm:
                b.fail("session %s: no memory cgroup of its own (%s)" % (name, cg))
            # the sandbox's init and its kernel; bwrap's own parent, which
            # only waits for them outside, is not in it
            want = sorted([t["init"], t["kernel"]])
            if cm["procs"] != want:
                b.fail("session %s: cgroup %s holds %s, expected init, kernel %s"
                       % (name, d, cm["procs"], want))
            cm["procs_rss_kib"] = sum(rollup(p)["Rss"] for p in cm["procs"])
            m["cgroup"] = cm
        out[name] = m
    return out


def mean(xs):
    return statistics.fmean(xs) if xs else None


def summarize_memory(sessions):
    """Per-session figures of one measurement (KiB unless named _bytes)."""
    bw = [m for m in sessions.values() if m["backend"] == "bwrap"]
    no = [m for m in sessions.values() if m["backend"] == "none"]
    pair = {k: [m["bwrap"][k] + m["init"][k] for m in bw] for k in ("Pss", "Rss", "Uss", "VmPTE")}
    s = {
        "sessions_per_backend": len(bw),
        "sandbox_pss_kib": pair["Pss"],          # per session: Pss(bwrap) + Pss(init)
        "sandbox_pss_total_kib": sum(pair["Pss"]),
        "sandbox_pss_mean_kib": mean(pair["Pss"]),
        "sandbox_pss_max_kib": max(pair["Pss"]),
        "sandbox_rss_mean_kib": mean(pair["Rss"]),
        "sandbox_uss_mean_kib": mean(pair["Uss"]),
        "sandbox_pte_mean_kib": mean(pair["VmPTE"]),
        "bwrap_outer_mean": {k: mean([m["bwrap"][k] for m in bw]) for k in ("Rss", "Pss", "Uss")},
        "bwrap_init_mean": {k: mean([m["init"][k] for m in bw]) for k in ("Rss", "Pss", "Uss")},
    }
    for k in ("Rss", "Pss", "Uss"):
        kb = mean([m["kernel"][k] for m in bw])
        kn = mean([m["kernel"][k] for m in no])
        s["kernel_%s_bwrap_kib" % k.lower()] = kb
        s["kernel_%s_none_kib" % k.lower()] = kn
        s["kernel_%s_diff_kib" % k.lower()] = kb - kn
        s["supervisor_%s_bwrap_kib" % k.lower()] = mean([m["supervisor"][k] for m in bw])
        s["supervisor_%s_none_kib" % k.lower()] = mean([m["supervisor"][k] for m in no])
    cg = [m["cgroup"] for m in bw]
    s["cgroup_usage_mean_bytes"] = mean([c["usage"] for c in cg])
    s["cgroup_kmem_mean_bytes"] = mean([c["kmem"] for c in cg]) if all("kmem" in c for c in cg) \
        else None
    s["cgroup_procs_rss_mean_kib"] = mean([c["procs_rss_kib"] for c in cg])
    s["cgroup_kernel_rss_mean_kib"] = s["kernel_rss_bwrap_kib"]
    for k in ("stat_rss", "stat_cache", "stat_anon", "stat_file"):
        if all(k in c for c in cg):
            s["cgroup_%s_mean_bytes" % k] = mean([c[k] for c in cg])
    return s


def memory_phase(b, n):
    """Start sessions up to N of each backend (one first, measured, then N): both measurements."""
    names = {}
    phases = []
    counts = [1, n] if n > 1 else [1]
    for count in counts:
        for i in range(count):
            for be in BACKENDS:
                name = "m%s%d" % (be[0], i + 1)
                if name not in names:
                    b.start(name, be, MEM_CODE)
                    names[name] = be
        # every kernel has answered its 1+1 and is idle
        sessions = measure_sessions(b, names)
        phases.append({"sessions": sessions, "summary": summarize_memory(sessions),
                       "loadavg": os.getloadavg()})
        s = phases[-1]["summary"]
        log("%d session(s) per backend: sandbox Pss %.0f KiB/session (Rss %.0f, Uss %.0f); "
            "kernel Rss bwrap %.0f none %.0f KiB", count, s["sandbox_pss_mean_kib"],
            s["sandbox_rss_mean_kib"], s["sandbox_uss_mean_kib"], s["kernel_rss_bwrap_kib"],
            s["kernel_rss_none_kib"])
    for name in list(names):
        b.stop(name)
    return phases


def versions():
    v = {"python": platform.python_version(), "machine": platform.machine(),
         "cpus": os.cpu_count(), "kernel": platform.release()}
    try:
        p = subprocess.run(["bwrap", "--version"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=10)
        v["bwrap"] = p.stdout.decode().strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return v


def mb(kib):
    return kib * 1024 / 1e6


def report(args, st, phases, b, load):
    variants = [v for v in VARIANTS if v in st]
    bw, no = st["bwrap"], st["none"]
    ratio = bw["median_s"] / no["median_s"]
    over_ms = (bw["median_s"] - no["median_s"]) * 1e3
    start_ok = ratio <= START_RATIO_TARGET
    print("kbox start -s NAME --backend bwrap|none, then kbox exec -s NAME %r: "
          "%d rounds, a fresh session each, %d CPUs" % (START_CODE, args.rounds,
                                                       os.cpu_count() or 0))
    print()
    print("%-10s %4s %8s %8s %8s %8s %8s %8s %10s %9s %10s %8s"
          % ("variant", "n", "median", "mean", "p10", "p90", "min", "max", "start med",
             "exec med", "ready med", "CPU med"))
    for v in variants:
        s = st[v]
        print("%-10s %4d %8.0f %8.0f %8.0f %8.0f %8.0f %8.0f %10.0f %9.0f %10s %8.0f"
              % (v, s["n"], s["median_s"] * 1e3, s["mean_s"] * 1e3, s["p10_s"] * 1e3,
                 s["p90_s"] * 1e3, s["min_s"] * 1e3, s["max_s"] * 1e3,
                 s["start_median_s"] * 1e3, s["exec_median_s"] * 1e3,
                 "%.0f" % s["ready_median_ms"] if s["ready_median_ms"] is not None else "-",
                 s["cpu_median_s"] * 1e3))
    print("(ms from launching kbox start to kbox exec printing Out[1]: 2; start, exec: each "
          "command's own wall time;\n ready: the supervisor's figure for the kernel's start; "
          "CPU: of both commands and of every process of\n the session, with the helpers "
          "they reaped; none-fresh: backend none with a fresh empty HOME, no target)")
    print()
    print("where the time goes (medians, ms):")
    keys = [("launch_to_spawn_ms", "kbox start spawned -> kernel spawned (start event)"),
            ("spawn_to_first_bind_ms", "kernel spawned -> its first socket bound"),
            ("binds_span_ms", "  first -> last of its 5 sockets bound"),
            ("first_bind_to_ready_ms", "first bind -> ready event"),
            ("last_bind_to_ready_ms", "last bind -> ready event"),
            ("ready_to_start_return_ms", "ready event -> kbox start returned"),
            ("exec_kernel_ms", "the first execution (the supervisor's seconds)"),
            ("exec_other_ms", "kbox exec's wall time beyond it")]
    print("  %-50s %s" % ("", " ".join("%10s" % v for v in variants)))
    for k, label in keys:
        print("  %-50s %s" % (label, " ".join(
            "%10s" % ("%.0f" % st[v]["phases_median_ms"][k]
                      if st[v]["phases_median_ms"].get(k) is not None else "-")
            for v in variants)))
    print("  %-50s %s" % ("off the clock: first import matplotlib.pyplot", " ".join(
        "%10.0f" % st[v]["pyplot_first_import_median_ms"] for v in variants)))
    print("  %-50s %s" % ("  sessions whose cache then held a font list", " ".join(
        "%10s" % ("%d/%d" % (st[v]["fontlist_after"], st[v]["n"])) for v in variants)))
    if all(st[v]["restart_phases_median_ms"] for v in variants):
        print("off the clock: kbox restart (medians, ms; %s restarts)"
              % "/".join(str(st[v]["restarts"]) for v in variants))
        for k, label in (("restart_wall_ms", "kbox restart's wall time"),
                         ("launch_to_spawn_ms", "kbox restart spawned -> new kernel spawned"),
                         ("spawn_to_first_bind_ms", "new kernel spawned -> its first bind"),
                         ("binds_span_ms", "  first -> last of its 5 sockets bound"),
                         ("first_bind_to_ready_ms", "first bind -> ready event"),
                         ("last_bind_to_ready_ms", "last bind -> ready event")):
            print("  %-50s %s" % (label, " ".join(
                "%10s" % ("%.0f" % st[v]["restart_phases_median_ms"][k]
                          if st[v]["restart_phases_median_ms"].get(k) is not None else "-")
                for v in variants)))
    print()
    for name, key in (("bwrap/none", "paired"), ("none-fresh/none", "paired_fresh_none"),
                      ("bwrap/none-fresh", "paired_bwrap_fresh")):
        pr = st.get(key)
        if not pr:
            continue
        print("%-16s medians %.3f (%+.0f ms); paired by round %.3f (rounds %.2f .. %.2f, "
              "median difference %+.0f ms); minima %.3f; CPU %.3f (%+.0f ms)"
              % (name, pr["ratio_of_medians"], pr["diff_of_medians_s"] * 1e3,
                 pr["ratio_median"], min(pr["ratio_rounds"]), max(pr["ratio_rounds"]),
                 pr["diff_median_s"] * 1e3, pr["ratio_of_minima"], pr["cpu_ratio_of_medians"],
                 pr["cpu_diff_median_s"] * 1e3))
    for v in variants:
        print("CPU median, ms, %-10s %s" % (v, "  ".join(
            "%s %.0f" % (k, x * 1e3) for k, x in st[v]["cpu_parts_median_s"].items())))
    print()
    first = phases[0]["summary"]
    last = phases[-1]["summary"]
    print("memory of an idle session (after its 1+1), KiB; 'sandbox' = bwrap + bwrap's init")
    print("%-34s %12s %12s" % ("", "1 per backend", "%d per backend" % last["sessions_per_backend"]))
    rows = [
        ("sandbox Pss per session (mean)", "sandbox_pss_mean_kib"),
        ("sandbox Pss per session (max)", "sandbox_pss_max_kib"),
        ("sandbox Pss, all sessions", "sandbox_pss_total_kib"),
        ("sandbox Uss per session", "sandbox_uss_mean_kib"),
        ("sandbox Rss per session", "sandbox_rss_mean_kib"),
        ("sandbox page tables per session", "sandbox_pte_mean_kib"),
        ("kernel Rss  bwrap", "kernel_rss_bwrap_kib"),
        ("kernel Rss  none", "kernel_rss_none_kib"),
        ("kernel Rss  bwrap - none", "kernel_rss_diff_kib"),
        ("kernel Pss  bwrap - none", "kernel_pss_diff_kib"),
        ("kernel Uss  bwrap - none", "kernel_uss_diff_kib"),
        ("cgroup usage (bwrap session)", "cgroup_usage_mean_bytes"),
        ("  of it kmem", "cgroup_kmem_mean_bytes"),
        ("Rss of the cgroup's 3 processes", "cgroup_procs_rss_mean_kib"),
    ]
    for label, key in rows:
        vals = []
        for ph in (first, last) if len(phases) > 1 else (first,):
            v = ph.get(key)
            if v is None:
                vals.append("-")
            elif key.endswith("_bytes"):
                vals.append("%.0f" % (v / 1024))
            else:
                vals.append("%.0f" % v)
        print("%-34s %12s %12s" % (label, vals[0], vals[1] if len(vals) > 1 else ""))
    print()
    pss_mb = mb(last["sandbox_pss_mean_kib"])
    pss1_mb = mb(first["sandbox_pss_mean_kib"])
    mem_ok = max(pss_mb, pss1_mb) * 1e6 < MEM_TARGET_BYTES
    print("load average at the start %.2f, at the end %.2f (1 min)" % (load[0][0], load[1][0]))
    print("start to first result of %r  bwrap %.0f ms  none %.0f ms  (sandbox %+.0f ms)"
          % (START_CODE, bw["median_s"] * 1e3, no["median_s"] * 1e3, over_ms))
    print("ratio bwrap/none %.3f (target <= %.2f)  %s"
          % (ratio, START_RATIO_TARGET, "PASS" if start_ok else "FAIL"))
    print("sandbox memory per session (Pss of bwrap + its init) %.2f MB with 1 session, "
          "%.2f MB with %d (target < %.0f MB)  %s"
          % (pss1_mb, pss_mb, last["sessions_per_backend"], MEM_TARGET_BYTES / 1e6,
             "PASS" if mem_ok else "FAIL"))
    print("sessions started and checked: %d, every call correct" % b.started)
    return {"ratio": ratio, "overhead_ms": over_ms, "start_pass": start_ok,
            "pss_mb_1": pss1_mb, "pss_mb_n": pss_mb, "mem_pass": mem_ok}


def main(argv):
    ap = argparse.ArgumentParser(prog="sandbox.py", description=__doc__.split("\n")[0])
    ap.add_argument("kbox", nargs="?", default=os.environ.get("KBOX", "./kbox"),
                    help="the kbox program (default: $KBOX, else ./kbox)")
    ap.add_argument("--rounds", type=int, default=20,
                    help="start-up rounds, each starting one session of each variant "
                         "(default 20)")
    ap.add_argument("--no-fresh-home", action="store_true",
                    help="leave out the none-fresh variant (backend none, fresh HOME)")
    ap.add_argument("--no-warmup", action="store_true",
                    help="no unmeasured session of each variant before the rounds")
    ap.add_argument("--sessions", type=int, default=4,
                    help="concurrent sessions of each backend for the memory figures")
    ap.add_argument("--restarts", type=int, default=1,
                    help="kbox restart calls in each session after its start was measured, "
                         "off the clock, for where a restart's time goes (default 1)")
    ap.add_argument("--json", metavar="FILE",
                    help="also write the results and every round's figures as JSON to FILE")
    args = ap.parse_args(argv[1:])
    if args.rounds < 1 or args.sessions < 1 or args.restarts < 0:
        ap.error("--rounds and --sessions must be positive, --restarts not negative")
    kbox = os.path.abspath(args.kbox)
    if not os.access(kbox, os.X_OK):
        ap.error("%s is not an executable (give the kbox program as the argument "
                 "or in $KBOX)" % args.kbox)

    signal.signal(signal.SIGTERM, on_sigterm)
    # A short private state dir: socket paths under it must stay < 108 bytes.
    home = tempfile.mkdtemp(prefix="kb.", dir="/tmp")
    b = Bench(kbox, home)
    fatal = None
    res = phases = None
    load_start = os.getloadavg()
    load_end = None
    try:
        variants = [v for v in VARIANTS if not (args.no_fresh_home and v == "none-fresh")]
        res = startup_rounds(b, args.rounds, variants, not args.no_warmup, args.restarts)
        phases = memory_phase(b, args.sessions)
        load_end = os.getloadavg()
    except Failed as e:
        fatal = str(e)
    except (OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
        fatal = "%s: %s" % (type(e).__name__, e)
    except (KeyboardInterrupt, Terminated):
        fatal = "interrupted"
    finally:
        # Not to be cut short by a second ^C or TERM; bounded by the timeouts.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        b.cleanup()
    if fatal:
        log("sandbox.py: %s", fatal)
        print(json.dumps({"bench": "sandbox", "failed": True, "error": fatal,
                          "failures": b.failures}, sort_keys=True))
        return 1

    st = summarize_startup(res)
    fig = report(args, st, phases, b, (load_start, load_end))
    doc = {
        "bench": "sandbox",
        "failed": False,
        "config": {"rounds": args.rounds, "sessions": args.sessions, "kbox": kbox,
                   "restarts": args.restarts,
                   "code": START_CODE, "variants": list(res),
                   "warmup": not args.no_warmup},
        "versions": versions(),
        "startup": st,
        "startup_ratio_bwrap_none": fig["ratio"],
        "startup_overhead_ms": fig["overhead_ms"],
        "startup_ratio_target": START_RATIO_TARGET,
        "startup_pass": fig["start_pass"],
        "memory": [ph["summary"] for ph in phases],
        "sandbox_pss_mb_per_session": fig["pss_mb_n"],
        "sandbox_pss_mb_one_session": fig["pss_mb_1"],
        "memory_target_mb": MEM_TARGET_BYTES / 1e6,
        "memory_pass": fig["mem_pass"],
        "loadavg_start": load_start,
        "loadavg_end": load_end,
        "sessions_started": b.started,
        "failures": b.failures,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(doc, rounds=res, sessions=[ph["sessions"] for ph in phases]), f,
                      indent=1)
            f.write("\n")
    print(json.dumps(doc, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
