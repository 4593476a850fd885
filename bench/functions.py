#!/usr/bin/python3
"""bench/functions.py - a host function's call from kernel code, against a tool call per lookup.

    /usr/bin/python3 bench/functions.py [--kbox PATH] [--calls N] [--rounds M]
        [--blocks B] [--backend B] [--command cat|sh] [--json FILE]

PATH is the kbox program (default: $KBOX, else ./kbox).  Everything runs
in a private directory (a fresh /tmp/kbf.XXXXXXXX, mode 0711 so that the
sandbox's user passes through it, removed at the end, also after ^C or
SIGTERM): a KBOX_HOME, and beside it (not in the session's workspace) a
functions file with one function,

    {"name": "lookup", "parameters": {"type": "object",
       "properties": {"key": {"type": "string"}}, "required": ["key"]},
     "command": ["/bin/cat"]}

and "max_calls": 100000 (max_concurrent stays at its default, 8).  The
command is the trivial function: /bin/cat itself (--command cat, the
default) echoes the arguments' JSON object it reads on stdin, which is its
result (lookup('k1') returns {'key': 'k1'}); no shell, no interpreter, so
what is measured is kbox's path and one fork/exec of the smallest program
that answers.  --command sh runs a script `#!/bin/sh` `exec cat` instead
(a relative program, beside the file), one more exec and a shell's start.
One session, `kbox start -s fbench --functions FILE --backend B` (default
bwrap), and in B blocks (default 10), each running once, the order rotated
from block to block, its share of:

  call          N plain calls (default 200) in the kernel: one kbox exec
                per block runs a loop of `lookup('kI')`, each timed there
                with time.perf_counter: the round trip kernel -> host
                (supervisor, the command) -> kernel, checked ({'key': 'kI'});
  gathered      M rounds (default 30) of
                `await asyncio.gather(*[lookup(k) for k in 8 keys])` in
                the kernel, each round timed there, checked;
  exec          N `kbox exec -s fbench "lookup_value = {'key': 'k1'}"`,
                wall time from the host (spawn to exit): the same lookup
                done as a model's tool call of its own costs one kbox exec
                (the model's own turn not counted);
  exec+call     N `kbox exec -s fbench "lookup_value = lookup('k1')"`:
                a tool call that makes one host call;
  8 execs       M groups of 8 consecutive `kbox exec` as in exec, each
                group timed whole: 8 lookups as 8 tool calls;
  exec 8 gath.  M `kbox exec` each running one gather of 8 calls, host
                wall time: 8 lookups in one tool call;
  floor         N runs of the command by the host itself: os.posix_spawn
                (vfork and exec) with stdin and stdout on pipes, the
                arguments written, the result read to EOF, the child
                reaped; wall time.  (subprocess.run costs ~0.6 ms more
                here: Python's own work, not the command's.)
  floor 8       M runs of 8 of them at once: all 8 started, then each
                read and reaped; wall time.

Every exec must exit 0 with nothing on stderr and the output expected; an
in-kernel block is run with --format json and its "calls" list must hold
one "ok" entry per call (the "seconds" of the plain calls, the
supervisor's view of each, rounded to the ms, are reported too).  Unmeasured warm-up first (a
few of each).  Reported: per measurement n, median, p10, p90, max (ms);
the ratios of the medians: exec / call (how many calls one tool call
costs), 8 execs / gathered round and 8 execs / exec with 8 gathered
(8 lookups), gathered round / call (what 8 at once cost against one),
call / floor and call - floor (kbox's own part of a call), gathered
round / floor 8 and their difference; exec / call is
also given as the median and range of its per-block ratios.  The last
line of stdout is one JSON object with every figure (--json FILE also
writes it, with every sample).  Exit 0 when every call was right, 1 when
the session did not start or a call failed, 2 on a usage error.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

SESSION = "fbench"
WIDTH = 8  # calls gathered per round: max_concurrent's default
EXEC_CODE = "lookup_value = {'key': 'k1'}"
EXEC_CALL_CODE = "lookup_value = lookup('k1')"
EXEC_GATHER_CODE = ("import asyncio\n"
                    "lookup_values = await asyncio.gather(*[lookup(f'k{i}') for i in range(%d)])"
                    % WIDTH)
# Run once, unmeasured: no output cache (as bench/session.py), and the
# in-kernel loops.  A plain call in a def returns the result; one in an
# async def (its comprehension included) an awaitable.
SETUP_CODE = r"""
get_ipython().displayhook.cache_size = 0
get_ipython().displayhook.do_full_cache = 0
import asyncio as _kb_asyncio, json as _kb_json, time as _kb_time

def _kb_plain(n):
    pc = _kb_time.perf_counter
    lat = []
    for i in range(n):
        k = 'k%d' % i
        t0 = pc()
        r = lookup(k)
        t1 = pc()
        if r != {'key': k}:
            raise AssertionError('lookup(%r) returned %r' % (k, r))
        lat.append(t1 - t0)
    return lat

async def _kb_gathered(m, width):
    pc = _kb_time.perf_counter
    lat = []
    for j in range(m):
        keys = ['k%d' % (j * width + i) for i in range(width)]
        t0 = pc()
        rs = await _kb_asyncio.gather(*[lookup(k) for k in keys])
        t1 = pc()
        if rs != [{'key': k} for k in keys]:
            raise AssertionError('gather returned %r' % (rs,))
        lat.append(t1 - t0)
    return lat
"""
FLOOR_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
PLAIN_CODE = "print(_kb_json.dumps([round(x * 1e6, 2) for x in _kb_plain(%d)]))"
GATHER_CODE = "print(_kb_json.dumps([round(x * 1e6, 2) for x in await _kb_gathered(%d, %d)]))"


class Terminated(Exception):
    pass


def on_sigterm(signum, frame):
    raise Terminated()


class Failed(Exception):
    pass


def log(fmt, *args):
    sys.stderr.write((fmt % args if args else fmt) + "\n")
    sys.stderr.flush()


def pct(xs, p):
    """The P-th percentile of XS (nearest rank)."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


def summarize(xs):
    if not xs:
        return None
    return {"n": len(xs), "median_s": statistics.median(xs), "mean_s": statistics.mean(xs),
            "p10_s": pct(xs, 10), "p90_s": pct(xs, 90), "min_s": min(xs), "max_s": max(xs)}


def split(total, blocks):
    """TOTAL spread over BLOCKS as evenly as it goes."""
    return [total // blocks + (1 if i < total % blocks else 0) for i in range(blocks)]


class Bench:
    def __init__(self, kbox, env, command):
        self.kbox = kbox
        self.env = env
        self.command = command       # the function's argv, for the floor
        self.sup_seconds = []        # the supervisor's "seconds" of each plain call

    def kb(self, *args, timeout=120):
        """Run kbox ARGS: (wall s, exit code, stdout, stderr)."""
        t0 = time.perf_counter()
        p = subprocess.run([self.kbox] + list(args), env=self.env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        return time.perf_counter() - t0, p.returncode, p.stdout, p.stderr

    def exec_quiet(self, code):
        """One kbox exec of CODE, which prints nothing: its wall time."""
        wall, rc, out, err = self.kb("exec", "-s", SESSION, code)
        if rc != 0 or out or err:
            raise Failed("kbox exec %r: exit %d, stdout %r, stderr %r"
                         % (code[:60], rc, out[:300], err[:300]))
        return wall

    def exec_json(self, code, ncalls):
        """One kbox exec --format json of CODE, which prints one JSON line and
        makes NCALLS calls: what it printed, decoded."""
        wall, rc, out, err = self.kb("exec", "-s", SESSION, "--format", "json",
                                     "--max-output", "16M", code)
        try:
            doc = json.loads(out)
        except ValueError:
            raise Failed("kbox exec --format json %r: exit %d, stdout %r, stderr %r"
                         % (code[:60], rc, out[:300], err[:300]))
        if rc != 0 or err or doc.get("status") != "ok" or doc.get("error"):
            raise Failed("kbox exec %r: exit %d, status %r, error %r, stderr %r"
                         % (code[:60], rc, doc.get("status"), doc.get("error"), err[:300]))
        calls = doc.get("calls") or []
        bad = [c for c in calls if c.get("status") != "ok" or c.get("name") != "lookup"]
        if len(calls) != ncalls or bad:
            raise Failed("kbox exec %r: %d calls listed (expected %d), %d not ok: %r"
                         % (code[:60], len(calls), ncalls, len(bad), bad[:3]))
        if doc["stdout"].get("truncated"):
            raise Failed("kbox exec %r: its output was truncated" % code[:60])
        return doc["stdout"]["text"], calls

    def plain_block(self, n):
        text, calls = self.exec_json(PLAIN_CODE % n, n)
        self.sup_seconds.extend(c["seconds"] for c in calls)
        return [x / 1e6 for x in json.loads(text)]

    def gathered_block(self, m):
        text, _ = self.exec_json(GATHER_CODE % (m, WIDTH), m * WIDTH)
        return [x / 1e6 for x in json.loads(text)]

    def spawn(self, arg):
        """Start the command with ARG on its stdin: (pid, the read end of its stdout)."""
        r0, w0 = os.pipe()
        r1, w1 = os.pipe()
        pid = os.posix_spawn(self.command[0], self.command, FLOOR_ENV, file_actions=[
            (os.POSIX_SPAWN_DUP2, r0, 0), (os.POSIX_SPAWN_DUP2, w1, 1),
            (os.POSIX_SPAWN_CLOSE, r0), (os.POSIX_SPAWN_CLOSE, w1),
            (os.POSIX_SPAWN_CLOSE, w0), (os.POSIX_SPAWN_CLOSE, r1)])
        os.close(r0)
        os.close(w1)
        os.write(w0, arg)
        os.close(w0)
        return pid, r1

    def finish(self, pid, fd, want):
        """Read the command's stdout FD to EOF and reap PID; it must have
        printed the JSON of WANT."""
        out = []
        while True:
            b = os.read(fd, 65536)
            if not b:
                break
            out.append(b)
        os.close(fd)
        _, status = os.waitpid(pid, 0)
        out = b"".join(out)
        if status != 0 or json.loads(out) != want:
            raise Failed("%s: wait status %d, stdout %r" % (self.command, status, out[:200]))

    def floor(self):
        """The command run by the host itself, as a supervisor runs it:
        posix_spawn (vfork and exec in glibc) with stdin and stdout on pipes,
        the arguments written, the result read to EOF, the child reaped."""
        t0 = time.perf_counter()
        pid, fd = self.spawn(b'{"key": "k1"}')
        self.finish(pid, fd, {"key": "k1"})
        return time.perf_counter() - t0

    def floor_gathered(self):
        """WIDTH of them at once: all started, then each read and reaped."""
        t0 = time.perf_counter()
        jobs = [self.spawn(b'{"key": "k%d"}' % i) for i in range(WIDTH)]
        for i, (pid, fd) in enumerate(jobs):
            self.finish(pid, fd, {"key": "k%d" % i})
        return time.perf_counter() - t0


def stop_session(kbox, env):
    """Stop the session (it may not have started); when kbox stop cannot
    (kbox gone, say), end its supervisor by the pid it recorded."""
    pidfile = os.path.join(env["KBOX_HOME"], "sessions", SESSION, "supervisor.pid")
    try:
        with open(pidfile) as f:
            pid = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pid = None
    try:
        subprocess.run([kbox, "stop", "-s", SESSION], env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        log("kbox stop: %s", e)
    if not pid:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for _ in range(50):
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    mine = pidfile.encode().rsplit(b"/", 1)[0] in f.read()
            except OSError:
                return
            if not mine:  # gone, its pid another's
                return
            time.sleep(0.1)
        log("supervisor %d still running after kbox stop: %s", pid, sig.name)
        try:
            os.kill(pid, sig)
        except OSError:
            return


def main(argv):
    ap = argparse.ArgumentParser(prog="bench/functions.py",
                                 description="A host function's call from kernel code, "
                                 "against one kbox exec per lookup.")
    ap.add_argument("--kbox", default=os.environ.get("KBOX", "./kbox"))
    ap.add_argument("--calls", type=int, default=200, metavar="N",
                    help="plain calls in the kernel, and kbox exec per lookup (default 200)")
    ap.add_argument("--rounds", type=int, default=30, metavar="M",
                    help="rounds of %d gathered calls, and groups of %d kbox exec (default 30)"
                    % (WIDTH, WIDTH))
    ap.add_argument("--blocks", type=int, default=10, metavar="B",
                    help="blocks the measurements are interleaved in (default 10)")
    ap.add_argument("--backend", default="bwrap")
    ap.add_argument("--command", choices=("cat", "sh"), default="cat",
                    help="the function: /bin/cat itself, or a sh script that execs cat")
    ap.add_argument("--json", metavar="FILE", help="also write every figure and sample")
    args = ap.parse_args(argv[1:])
    if args.calls < 1 or args.rounds < 1 or args.blocks < 1:
        ap.error("--calls, --rounds and --blocks must be at least 1")
    args.blocks = min(args.blocks, args.calls, args.rounds)
    kbox = os.path.abspath(args.kbox)
    if not os.access(kbox, os.X_OK):
        ap.error("%s is not an executable (give --kbox PATH)" % args.kbox)

    signal.signal(signal.SIGTERM, on_sigterm)
    # Short: socket paths under it must stay < 108 bytes.
    root = tempfile.mkdtemp(prefix="kbf.", dir="/tmp")
    os.chmod(root, 0o711)  # under root the sandbox user passes through
    fndir = os.path.join(root, "fn")
    os.mkdir(fndir)
    if args.command == "cat":
        command = ["/bin/cat"]
        floor_argv = ["/bin/cat"]
    else:
        script = os.path.join(fndir, "echo.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\nexec cat\n")
        os.chmod(script, 0o755)
        command = ["echo.sh"]  # relative to the file's directory
        floor_argv = [script]
    fnfile = os.path.join(fndir, "functions.json")
    with open(fnfile, "w") as f:
        json.dump({"functions": [{
            "name": "lookup",
            "description": "Return the record of key (here: the arguments, echoed).",
            "parameters": {"type": "object", "properties": {"key": {"type": "string"}},
                           "required": ["key"]},
            "command": command}],
            "max_calls": 100000}, f)
    env = dict(os.environ, KBOX_HOME=os.path.join(root, "h"))
    env.pop("KBOX_SESSION", None)
    bench = Bench(kbox, env, floor_argv)
    kinds = ("call", "gathered", "exec", "exec_call", "execs8", "exec_gathered", "floor",
             "floor8")
    samples = {k: [] for k in kinds}
    block_medians = []   # per block: (median call, median exec)
    fatal = None
    start_s = None
    load_start = os.getloadavg()
    try:
        start_s, rc, out, err = bench.kb("start", "-s", SESSION, "--functions", fnfile,
                                         "--backend", args.backend)
        if rc != 0:
            raise Failed("kbox start: exit %d: %s%s" % (rc, out.decode(errors="replace"),
                                                         err.decode(errors="replace")))
        log("%s", out.decode(errors="replace").strip())
        bench.exec_quiet(SETUP_CODE)
        # warm-up, unmeasured
        bench.plain_block(10)
        bench.gathered_block(2)
        for _ in range(5):
            bench.exec_quiet(EXEC_CODE)
            bench.exec_quiet(EXEC_CALL_CODE)
            bench.floor()
            bench.floor_gathered()
        bench.exec_json(EXEC_GATHER_CODE, WIDTH)
        bench.sup_seconds = []

        ncalls = split(args.calls, args.blocks)
        nrounds = split(args.rounds, args.blocks)

        def run(kind, b):
            n, m = ncalls[b], nrounds[b]
            if kind == "call":
                lat = bench.plain_block(n)
            elif kind == "gathered":
                lat = bench.gathered_block(m)
            elif kind == "exec":
                lat = [bench.exec_quiet(EXEC_CODE) for _ in range(n)]
            elif kind == "exec_call":
                lat = [bench.exec_quiet(EXEC_CALL_CODE) for _ in range(n)]
            elif kind == "execs8":
                lat = []
                for _ in range(m):
                    t0 = time.perf_counter()
                    for _ in range(WIDTH):
                        bench.exec_quiet(EXEC_CODE)
                    lat.append(time.perf_counter() - t0)
            elif kind == "exec_gathered":
                lat = []
                for _ in range(m):
                    t0 = time.perf_counter()
                    bench.exec_json(EXEC_GATHER_CODE, WIDTH)
                    lat.append(time.perf_counter() - t0)
            elif kind == "floor":
                lat = [bench.floor() for _ in range(n)]
            else:
                lat = [bench.floor_gathered() for _ in range(m)]
            samples[kind].extend(lat)
            return lat

        t_run = time.monotonic()
        for b in range(args.blocks):
            order = kinds[b % len(kinds):] + kinds[:b % len(kinds)]
            got = {k: run(k, b) for k in order}
            block_medians.append((statistics.median(got["call"]), statistics.median(got["exec"])))
            log("block %d/%d: call %.2f ms, gathered %.2f ms, exec %.2f ms, exec+call %.2f ms, "
                "8 execs %.1f ms, exec 8 gathered %.2f ms, floor %.2f ms, floor 8 %.2f ms",
                b + 1, args.blocks, *(statistics.median(got[k]) * 1e3 for k in kinds))
        run_s = time.monotonic() - t_run
    except Failed as e:
        fatal = str(e)
    except subprocess.TimeoutExpired as e:
        fatal = "timed out: %s" % e
    except (OSError, ValueError, KeyError) as e:
        fatal = "%s: %s" % (type(e).__name__, e)
    except (KeyboardInterrupt, Terminated):
        fatal = "interrupted"
    finally:
        # Not to be cut short by a second ^C or TERM; bounded by the timeouts.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stop_session(kbox, env)
        shutil.rmtree(root, ignore_errors=True)
    if fatal:
        log("bench/functions.py: %s", fatal)
        return 1
    load_end = os.getloadavg()

    st = {k: summarize(v) for k, v in samples.items()}
    st["supervisor_call"] = summarize(bench.sup_seconds)
    med = {k: st[k]["median_s"] for k in kinds}
    block_ratios = [e / c for c, e in block_medians]
    ratios = {
        "exec_over_call": med["exec"] / med["call"],
        "exec_over_call_blocks_median": statistics.median(block_ratios),
        "exec_over_call_blocks_min": min(block_ratios),
        "exec_over_call_blocks_max": max(block_ratios),
        "call_over_exec": med["call"] / med["exec"],
        "execs8_over_gathered": med["execs8"] / med["gathered"],
        "gathered_over_execs8": med["gathered"] / med["execs8"],
        "execs8_over_exec_gathered": med["execs8"] / med["exec_gathered"],
        "exec_call_minus_exec_s": med["exec_call"] - med["exec"],
        "gathered_over_call": med["gathered"] / med["call"],
        "call_over_floor": med["call"] / med["floor"],
        "gathered_over_floor8": med["gathered"] / med["floor8"],
        "gathered_minus_floor8_s": med["gathered"] - med["floor8"],
        "call_minus_floor_s": med["call"] - med["floor"],
    }

    label = {
        "call": "call round trip, in the kernel (plain)",
        "supervisor_call": "  of it, the call on the host (supervisor's 'seconds', 1 ms steps)",
        "gathered": "%d gathered calls, in the kernel, per round" % WIDTH,
        "exec": "kbox exec per lookup (a tool call), host wall",
        "exec_call": "kbox exec making one call, host wall",
        "execs8": "%d lookups as %d kbox exec, host wall" % (WIDTH, WIDTH),
        "exec_gathered": "one kbox exec with %d gathered calls, host wall" % WIDTH,
        "floor": "floor: the command by posix_spawn + pipes on the host",
        "floor8": "floor: %d of them at once on the host" % WIDTH,
    }
    print("host functions: lookup(key) -> %s, backend %s, %d blocks, load %.2f -> %.2f"
          % (" ".join(command) if args.command == "cat" else "echo.sh (sh: exec cat)",
             args.backend, args.blocks, load_start[0], load_end[0]))
    print("%-66s %5s %9s %9s %9s %9s" % ("(ms)", "n", "median", "p10", "p90", "max"))
    for k in ("call", "supervisor_call", "gathered", "exec", "exec_call", "execs8",
              "exec_gathered", "floor", "floor8"):
        s = st[k]
        print("%-66s %5d %9.3f %9.3f %9.3f %9.3f" % (label[k], s["n"], s["median_s"] * 1e3,
                                                     s["p10_s"] * 1e3, s["p90_s"] * 1e3,
                                                     s["max_s"] * 1e3))
    print()
    print("a call costs 1/%.1f of a kbox exec per lookup (call / exec %.3f; per block %.1f, "
          "%.1f .. %.1f)" % (ratios["exec_over_call"], ratios["call_over_exec"],
                             ratios["exec_over_call_blocks_median"],
                             ratios["exec_over_call_blocks_min"],
                             ratios["exec_over_call_blocks_max"]))
    print("%d lookups: %d gathered in the kernel %.2f ms, %d kbox exec %.1f ms: %.1fx; "
          "one exec with %d gathered %.2f ms: %.1fx"
          % (WIDTH, WIDTH, med["gathered"] * 1e3, WIDTH, med["execs8"] * 1e3,
             ratios["execs8_over_gathered"], WIDTH, med["exec_gathered"] * 1e3,
             ratios["execs8_over_exec_gathered"]))
    print("%d gathered / one plain call %.2f; a call / the bare command %.1fx (+%.2f ms); "
          "%d gathered / %d bare at once %.1fx (+%.2f ms)"
          % (WIDTH, ratios["gathered_over_call"], ratios["call_over_floor"],
             ratios["call_minus_floor_s"] * 1e3, WIDTH, WIDTH, ratios["gathered_over_floor8"],
             ratios["gathered_minus_floor8_s"] * 1e3))
    print("an exec making one call is %.2f ms above one that makes none"
          % (ratios["exec_call_minus_exec_s"] * 1e3))
    doc = {
        "bench": "functions",
        "config": {"calls": args.calls, "rounds": args.rounds, "blocks": args.blocks,
                   "width": WIDTH, "backend": args.backend, "command": command,
                   "kbox": kbox},
        "kbox_start_s": start_s,
        "run_s": run_s,
        "stats": st,
        "ratios": ratios,
        "block_medians_s": [{"call": c, "exec": e} for c, e in block_medians],
        "loadavg_start": load_start,
        "loadavg_end": load_end,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(doc, samples_s=samples, supervisor_seconds=bench.sup_seconds), f,
                      indent=1)
            f.write("\n")
    print(json.dumps(doc, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
