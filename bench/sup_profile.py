#!/usr/bin/python3
"""bench/sup_profile.py - what the supervisor spends on one `kbox exec '1+1'`.

    /usr/bin/python3 bench/sup_profile.py [KBOX] [--tool cpu|strace|callgrind]
        [-n N] [--warmup W] [--windows K] [--backend B] [--out FILE]

KBOX is the build tree's kbox (default ./kbox); its kbox-supervisor is
the one beside it.  A private KBOX_HOME, one session ("prof"), the
kernel's output cache off, W unmeasured kbox exec calls, then N measured
ones, nothing else on the kernel:

  cpu        (default) the supervisor's utime + stime (/proc/PID/stat, all
             threads) and the sum of its threads' schedstat run times,
             over K windows of N calls each; the median per call of the
             windows, and each window.
  strace     `strace -f -c` attached to the supervisor over the N calls:
             its system calls per call, by kind (native: clock_gettime is
             in the vDSO and not counted).
  callgrind  the supervisor under valgrind --tool=callgrind
             --collect-systime=nsec (backend none: libseccomp's rules cannot
             be added under valgrind); counters zeroed after the warm-up and
             dumped after the N calls: instructions and system calls per
             call (under valgrind clock_gettime is a system call), and
             callgrind_annotate's inclusive list in FILE (--out).

The numbers of the `cpu` tool depend on the machine's load (quote
`uptime`); the instruction counts of `callgrind` do not.
"""

import argparse
import glob
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

SESSION = "prof"
SETUP_CODE = "get_ipython().displayhook.cache_size = 0"


def kbox_run(kbox, env, *args, check=True):
    p = subprocess.run([kbox] + list(args), env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    if check and p.returncode != 0:
        raise RuntimeError("kbox %s: exit %d: %s" % (" ".join(args), p.returncode,
                                                      p.stderr.decode(errors="replace")))
    return p


def calls(kbox, env, n):
    for _ in range(n):
        p = kbox_run(kbox, env, "exec", "-s", SESSION, "1+1")
        if not p.stdout.decode().strip().endswith(": 2"):
            raise RuntimeError("kbox exec printed %r" % p.stdout[:200])


def proc_cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rpartition(")")[2].split()
    tck = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tck, int(fields[12]) / tck


def proc_runtime(pid):
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
            total += int(f.read().split()[0])
    return total / 1e9


def sup_pid(kbox, env):
    st = json.loads(kbox_run(kbox, env, "status", "-s", SESSION, "--format", "json").stdout)
    return int(st["supervisor_pid"] if "supervisor_pid" in st else st["pid"])


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kbox", nargs="?", default="./kbox")
    ap.add_argument("--tool", choices=("cpu", "strace", "callgrind"), default="cpu")
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--windows", type=int, default=5)
    ap.add_argument("--backend", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    build = os.path.dirname(os.path.abspath(args.kbox))
    home = tempfile.mkdtemp(prefix="kp.", dir="/tmp")
    env = dict(os.environ, KBOX_HOME=home)
    env.pop("KBOX_SESSION", None)
    kbox = os.path.abspath(args.kbox)
    backend = args.backend
    cg_out = None
    if args.tool == "callgrind":
        # kbox looks for kbox-supervisor beside itself (/proc/self/exe):
        # a copy of kbox beside a script that runs the real one under valgrind
        bindir = os.path.join(home, "bin")
        os.mkdir(bindir)
        shutil.copy2(kbox, os.path.join(bindir, "kbox"))
        cg_out = os.path.join(home, "callgrind.out.%p")
        # (the build tree's kbox-supervisor is libtool's wrapper script:
        # valgrind must run the program it wraps, with its libraries)
        with open(os.path.join(bindir, "kbox-supervisor"), "w") as f:
            f.write("#!/bin/sh\nexec %s --mode=execute valgrind --tool=callgrind "
                    "--collect-systime=nsec --callgrind-out-file=%s %s \"$@\"\n"
                    % (os.path.join(build, "libtool"), cg_out,
                       os.path.join(build, "kbox-supervisor")))
        os.chmod(os.path.join(bindir, "kbox-supervisor"), 0o755)
        kbox = os.path.join(bindir, "kbox")
        backend = backend or "none"
    rc = 0
    try:
        start = ["start", "-s", SESSION] + (["--backend", backend] if backend else [])
        kbox_run(kbox, env, *start)
        kbox_run(kbox, env, "exec", "-s", SESSION, SETUP_CODE)
        pid = sup_pid(kbox, env)
        calls(kbox, env, args.warmup)
        load0 = os.getloadavg()[0]
        if args.tool == "cpu":
            per, per_rt, per_user = [], [], []
            for _ in range(args.windows):
                c0, r0 = proc_cpu(pid), proc_runtime(pid)
                calls(kbox, env, args.n)
                c1, r1 = proc_cpu(pid), proc_runtime(pid)
                per.append((sum(c1) - sum(c0)) / args.n)
                per_user.append((c1[0] - c0[0]) / args.n)
                per_rt.append((r1 - r0) / args.n)
            print("supervisor CPU per kbox exec (utime+stime): median %.3f ms  windows %s"
                  % (statistics.median(per) * 1e3, " ".join("%.3f" % (x * 1e3) for x in per)))
            print("  of it user: median %.3f ms" % (statistics.median(per_user) * 1e3))
            print("supervisor run time per kbox exec (schedstat): median %.3f ms  windows %s"
                  % (statistics.median(per_rt) * 1e3, " ".join("%.3f" % (x * 1e3) for x in per_rt)))
        elif args.tool == "strace":
            out = os.path.join(home, "strace.txt")
            st = subprocess.Popen(["strace", "-f", "-c", "-o", out, "-p", str(pid)],
                                  stderr=subprocess.DEVNULL)
            time.sleep(1.0)  # attached to every thread
            calls(kbox, env, args.n)
            time.sleep(0.2)
            st.send_signal(signal.SIGINT)
            st.wait()
            total = 0
            rows = []
            with open(out) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
                        n = int(parts[3])
                        rows.append((n, parts[-1]))
                        total += n
            print("supervisor system calls per kbox exec: %.1f" % (total / args.n))
            for n, name in sorted(rows, reverse=True):
                print("  %-16s %6.1f" % (name, n / args.n))
        else:
            subprocess.run(["callgrind_control", "-z", str(pid)], check=True,
                           stdout=subprocess.DEVNULL)
            calls(kbox, env, args.n)
            for f in glob.glob(os.path.join(home, "callgrind.out.%d*" % pid)):
                os.unlink(f)
            subprocess.run(["callgrind_control", "-d", str(pid)], check=True,
                           stdout=subprocess.DEVNULL)
            dumps = sorted(glob.glob(os.path.join(home, "callgrind.out.%d*" % pid)))
            events, totals = None, None
            for d in dumps:
                with open(d) as f:
                    for line in f:
                        if line.startswith("events:"):
                            events = line.split()[1:]
                        elif line.startswith("summary:"):
                            vals = [int(x) for x in line.split()[1:]]
                            totals = vals if totals is None else [a + b for a, b in
                                                                  zip(totals, vals)]
            for e, v in zip(events or [], totals or []):
                print("supervisor %s per kbox exec: %.1f" % (e, v / args.n))
            if args.out:
                with open(args.out, "w") as f:
                    subprocess.run(["callgrind_annotate", "--inclusive=yes"] + dumps, stdout=f)
                for i, d in enumerate(dumps):
                    shutil.copy(d, "%s.raw%s" % (args.out, "" if i == 0 else ".%d" % i))
                print("callgrind_annotate --inclusive=yes: %s (the profile: %s.raw)"
                      % (args.out, args.out))
        print("load average %.2f -> %.2f (1 min), %d calls%s" %
              (load0, os.getloadavg()[0], args.n,
               " x %d windows" % args.windows if args.tool == "cpu" else ""))
    except (RuntimeError, subprocess.SubprocessError, OSError, ValueError) as e:
        print("sup_profile: %s" % e, file=sys.stderr)
        rc = 1
    finally:
        kbox_run(kbox, env, "stop", "-s", SESSION, check=False)
        time.sleep(0.5)
        shutil.rmtree(home, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
