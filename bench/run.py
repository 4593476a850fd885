#!/usr/bin/python3
"""run.py — execute("1+1") round trip and client CPU: libkbox vs raw pyzmq vs jupyter_client.

Usage: run.py [--kbox-bench PATH] [-n N] [--rounds R] [--warmup W]
              [--transport ipc|tcp] [--jc-mode interactive|reply]
              [--kernel NAME] [--json FILE]

Starts ONE kernel (jupyter_client.KernelManager, kernelspec NAME, default
"python3", ipc transport by default) and runs three clients against its one
connection file, each as its own process:

  libkbox         PATH CONNFILE N W             (bench/bench_exec.c)
  raw-pyzmq       python raw_client.py CONNFILE N W
  jupyter_client  python jc_client.py --mode M CONNFILE N W

Each client connects, waits until the kernel answers, makes W unmeasured
warm-up calls, then N measured ones, and prints per-call latencies and CPU
seconds as JSON.  The clients are interleaved: R rounds, each running every
client once, the order rotated from round to round, so that machine noise
falls on all of them alike.

Reported: the median latency over all measured calls of each client, and
its client CPU per call (CPU seconds of the client process during the
measured calls divided by the calls, median over rounds); then the ratios
libkbox/raw-pyzmq latency (target <= 1.0) and libkbox/c-floor CPU (target
<= 1.2: libkbox's client CPU per call at most 1.2 times that of the bare
libzmq client floor_zmq, given with --floor-bench), each the median over
rounds of the ratio within a round; jupyter_client/libkbox CPU is shown
without a target.
A missed target is reported, not fatal: the exit status is 0 unless the
kernel or a client failed (then 1), or the usage was wrong (2).  Without
--kbox-bench (or if PATH does not exist) the libkbox column is skipped.
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LAT_TARGET = 1.0   # libkbox latency / raw-pyzmq latency, at most
FLOOR_TARGET = 1.2  # libkbox CPU per call / c-floor (floor_zmq) CPU per call, at most
# Keep the kernel's own work the same from the first call to the last: no
# output cache (it flushes with a printed notice every 1000 results) and no
# history database (a thread writing sqlite after each cell).
KERNEL_ARGS = ["--InteractiveShell.cache_size=0", "--HistoryManager.enabled=False"]


def log(fmt, *args):
    sys.stderr.write((fmt % args if args else fmt) + "\n")
    sys.stderr.flush()


def start_kernel(tmpdir, kernel_name, transport):
    """A running, ready kernel and its manager; connection file in TMPDIR."""
    # Finding the "python3" spec imports ipykernel, and with it debugpy,
    # which warns about frozen modules on stderr; the kernel would too.
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    from jupyter_client import KernelManager

    km = KernelManager(kernel_name=kernel_name)
    km.transport = transport
    km.connection_file = os.path.join(tmpdir, "kernel.json")
    if transport == "ipc":
        km.ip = os.path.join(tmpdir, "kernel-ipc")
    else:
        km.ip = "127.0.0.1"
    ipydir = os.path.join(tmpdir, "ipython")
    os.mkdir(ipydir, 0o700)
    env = dict(os.environ, IPYTHONDIR=ipydir)
    logf = open(os.path.join(tmpdir, "kernel.log"), "wb")
    km.start_kernel(cwd=tmpdir, env=env, stdout=logf, stderr=logf,
                    extra_arguments=KERNEL_ARGS)
    logf.close()
    kc = km.client()
    kc.start_channels(hb=False)
    try:
        kc.wait_for_ready(timeout=60)
    finally:
        kc.stop_channels()
    return km


def run_client(name, argv, timeout):
    """Run one client process; its parsed JSON result, or None after logging why."""
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        log("%s: no result within %d s", name, timeout)
        return None
    err = p.stderr.decode(errors="replace").strip()
    out = p.stdout.decode(errors="replace").strip().splitlines()
    result = None
    if out:
        try:
            result = json.loads(out[-1])
        except ValueError:
            pass
    if p.returncode != 0 or result is None:
        log("%s: exit status %d%s", name, p.returncode, ": " + err if err else "")
        if result is not None and result.get("errors"):
            log("%s: %d calls failed", name, result["errors"])
        return None
    if err:
        log("%s (stderr): %s", name, err)
    return result


def pct(xs, p):
    """The P-th percentile of XS (nearest rank)."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


def summarize(rounds):
    """Statistics over the per-round results of one client."""
    lat = [x for r in rounds for x in r["lat_s"]]
    cpu_per_round = [r["cpu_total_s"] / r["calls"] for r in rounds]
    out = {
        "rounds": len(rounds),
        "calls": len(lat),
        "lat_median_s": statistics.median(lat),
        "lat_mean_s": statistics.fmean(lat),
        "lat_p10_s": pct(lat, 10),
        "lat_p90_s": pct(lat, 90),
        "lat_p99_s": pct(lat, 99),
        "lat_round_medians_s": [statistics.median(r["lat_s"]) for r in rounds],
        "cpu_per_call_s": statistics.median(cpu_per_round),
        "cpu_per_call_rounds_s": cpu_per_round,
    }
    ru = [r["rusage"] for r in rounds if "rusage" in r]
    if ru:
        calls = sum(r["calls"] for r in rounds if "rusage" in r)
        for key in ("user_s", "sys_s", "nvcsw", "nivcsw"):
            out["rusage_per_call_" + key] = sum(x[key] for x in ru) / calls
    return out


def versions():
    v = {"python": platform.python_version()}
    for mod in ("jupyter_client", "ipykernel", "zmq"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception:
            pass
    try:
        import zmq
        v["libzmq"] = zmq.zmq_version()
    except Exception:
        pass
    return v


def ms(s):
    return "%.3f ms" % (s * 1e3)


def us(s):
    return "%.0f us" % (s * 1e6)


def print_report(cfg, stats, skipped):
    print("execute(\"1+1\"): %d rounds x %d calls per client (after %d warm-up calls), "
          "kernel %s over %s, %d CPUs"
          % (cfg["rounds"], cfg["n"], cfg["warmup"], cfg["kernel"], cfg["transport"],
             os.cpu_count() or 0))
    print()
    print("%-16s %6s %9s %9s %9s %9s %9s %8s %6s  %s"
          % ("client", "calls", "median", "p10", "p90", "p99", "CPU/call", "of it sys",
             "csw", "median per round (ms)"))
    for name in ("libkbox", "c-floor", "raw-pyzmq", "jupyter_client"):
        if name == "c-floor" and name not in stats and name not in skipped:
            continue
        if name not in stats:
            print("%-16s  (not run: %s)" % (name, skipped.get(name, "failed")))
            continue
        s = stats[name]
        sys_share = csw = "-"
        if "rusage_per_call_sys_s" in s:
            tot = s["rusage_per_call_user_s"] + s["rusage_per_call_sys_s"]
            sys_share = "%.0f%%" % (100.0 * s["rusage_per_call_sys_s"] / tot) if tot else "-"
            csw = "%.1f" % (s["rusage_per_call_nvcsw"] + s["rusage_per_call_nivcsw"])
        print("%-16s %6d %9.3f %9.3f %9.3f %9.3f %9s %8s %6s  %s"
              % (name, s["calls"], s["lat_median_s"] * 1e3, s["lat_p10_s"] * 1e3,
                 s["lat_p90_s"] * 1e3, s["lat_p99_s"] * 1e3, us(s["cpu_per_call_s"]),
                 sys_share, csw,
                 " ".join("%.3f" % (x * 1e3) for x in s["lat_round_medians_s"])))
    print("(latencies in ms; CPU/call: user + sys of the client process, all threads; "
          "csw: context switches per call)")
    print()


def paired(results, a, b, value):
    """VALUE(a's result) / VALUE(b's result) for every round both completed."""
    rb = {res["round"]: res for res in results.get(b, [])}
    return [value(res) / value(rb[res["round"]]) for res in results.get(a, [])
            if res["round"] in rb and value(rb[res["round"]]) > 0]


def verdicts(stats, results):
    """The two ratios and whether each meets its target (None when not measured).

    Each ratio is the median over rounds of the ratio within a round: the
    clients of one round ran back to back, so a slow phase of the machine
    cancels out.  The ratio of the pooled figures is kept alongside."""
    out = {"lat_ratio_kbox_raw": None, "lat_pass": None,
           "cpu_ratio_kbox_floor": None, "floor_pass": None, "cpu_ratio_jc_kbox": None}
    k, r, f = stats.get("libkbox"), stats.get("raw-pyzmq"), stats.get("c-floor")
    j = stats.get("jupyter_client")
    lat = paired(results, "libkbox", "raw-pyzmq", lambda x: statistics.median(x["lat_s"]))
    if k and r and lat:
        out["lat_ratio_kbox_raw"] = statistics.median(lat)
        out["lat_ratio_rounds"] = lat
        out["lat_ratio_pooled"] = k["lat_median_s"] / r["lat_median_s"]
        out["lat_pass"] = out["lat_ratio_kbox_raw"] <= LAT_TARGET
    per_call = lambda x: x["cpu_total_s"] / x["calls"]
    cpu = paired(results, "libkbox", "c-floor", per_call)
    if k and f and cpu:
        out["cpu_ratio_kbox_floor"] = statistics.median(cpu)
        out["cpu_ratio_floor_rounds"] = cpu
        out["cpu_ratio_floor_pooled"] = (k["cpu_per_call_s"] / f["cpu_per_call_s"]
                                         if f["cpu_per_call_s"] > 0 else None)
        out["floor_pass"] = out["cpu_ratio_kbox_floor"] <= FLOOR_TARGET
    cpu = paired(results, "jupyter_client", "libkbox", per_call)
    if k and j and cpu:
        out["cpu_ratio_jc_kbox"] = statistics.median(cpu)
        out["cpu_ratio_rounds"] = cpu
        out["cpu_ratio_pooled"] = (j["cpu_per_call_s"] / k["cpu_per_call_s"]
                                   if k["cpu_per_call_s"] > 0 else None)
    return out


def print_summary(stats, v):
    def lat(name):
        return ms(stats[name]["lat_median_s"]) if name in stats else "n/a"

    def cpu(name):
        return us(stats[name]["cpu_per_call_s"]) if name in stats else "n/a"

    def verdict(ok):
        return "n/a" if ok is None else ("PASS" if ok else "FAIL")

    def spread(key, fmt):
        xs = v.get(key)
        return "  (rounds %s .. %s)" % (fmt % min(xs), fmt % max(xs)) if xs else ""

    print("latency median  libkbox %s  raw-pyzmq %s  jupyter_client %s"
          % (lat("libkbox"), lat("raw-pyzmq"), lat("jupyter_client")))
    ratio = v["lat_ratio_kbox_raw"]
    print("ratio libkbox/raw-pyzmq %s (target <= %.1f)  %s%s"
          % ("n/a" if ratio is None else "%.2f" % ratio, LAT_TARGET, verdict(v["lat_pass"]),
             spread("lat_ratio_rounds", "%.2f")))
    ratio = v["cpu_ratio_kbox_floor"]
    print("client CPU/call libkbox %s  c-floor %s  ratio libkbox/c-floor %s (target <= %.1fx)"
          "  %s%s"
          % (cpu("libkbox"), cpu("c-floor"),
             "n/a" if ratio is None else "%.2fx" % ratio, FLOOR_TARGET, verdict(v["floor_pass"]),
             spread("cpu_ratio_floor_rounds", "%.2fx")))
    ratio = v["cpu_ratio_jc_kbox"]
    if ratio is not None:
        best = ""
        if "c-floor" in stats and stats["c-floor"]["cpu_per_call_s"] > 0:
            best = ("; the best any libzmq client reaches here is %.1fx (jupyter_client / "
                    "c-floor)" % (stats["jupyter_client"]["cpu_per_call_s"]
                                  / stats["c-floor"]["cpu_per_call_s"]))
        print("client CPU/call jupyter_client %s: %.1fx libkbox's (no target)%s%s"
              % (cpu("jupyter_client"), ratio, spread("cpu_ratio_rounds", "%.1fx").rstrip(),
                 best))


def main(argv):
    ap = argparse.ArgumentParser(prog="run.py", description=__doc__.split("\n")[0])
    ap.add_argument("--kbox-bench", metavar="PATH",
                    help="the bench_exec program (libkbox client); skipped when absent")
    ap.add_argument("--floor-bench", metavar="PATH",
                    help="the floor_zmq program (bare libzmq C client, the CPU floor); "
                         "skipped when absent")
    ap.add_argument("-n", type=int, default=150, help="measured calls per client per round")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=50,
                    help="unmeasured calls each client process makes first")
    ap.add_argument("--transport", choices=("ipc", "tcp"), default="ipc")
    ap.add_argument("--jc-mode", choices=("interactive", "reply"), default="interactive",
                    help="execute_interactive (default) or execute(reply=True) + iopub drain")
    ap.add_argument("--kernel", default="python3", help="kernelspec name")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter for the Python clients (default: this one)")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    args = ap.parse_args(argv[1:])
    if args.n < 1 or args.rounds < 1 or args.warmup < 0:
        ap.error("-n and --rounds must be positive, --warmup not negative")

    cfg = {"n": args.n, "rounds": args.rounds, "warmup": args.warmup,
           "transport": args.transport, "kernel": args.kernel, "jc_mode": args.jc_mode}
    tail = [str(args.n), str(args.warmup)]
    clients = []
    skipped = {}
    if args.kbox_bench and os.access(args.kbox_bench, os.X_OK):
        clients.append(("libkbox", [os.path.abspath(args.kbox_bench)]))
    else:
        skipped["libkbox"] = ("no --kbox-bench given" if not args.kbox_bench
                              else "%s is not an executable" % args.kbox_bench)
    if args.floor_bench and os.access(args.floor_bench, os.X_OK):
        clients.append(("c-floor", [os.path.abspath(args.floor_bench)]))
    clients.append(("raw-pyzmq", [args.python, os.path.join(HERE, "raw_client.py")]))
    clients.append(("jupyter_client", [args.python, os.path.join(HERE, "jc_client.py"),
                                       "--mode", args.jc_mode]))

    tmpdir = tempfile.mkdtemp(prefix="kbox-bench-")
    km = None
    results = {name: [] for name, _ in clients}
    failed = False
    try:
        log("starting kernel %s (%s) ...", args.kernel, args.transport)
        try:
            km = start_kernel(tmpdir, args.kernel, args.transport)
        except Exception as e:
            log("kernel %s did not start: %s", args.kernel, e)
            return 1
        connfile = km.connection_file
        timeout = 120 + int(args.n + args.warmup) // 10
        for r in range(args.rounds):
            k = r % len(clients)
            order = clients[k:] + clients[:k]
            for name, prefix in order:
                t0 = time.monotonic()
                res = run_client(name, prefix + [connfile] + tail, timeout)
                if res is None:
                    failed = True
                    continue
                res["round"] = r
                results[name].append(res)
                log("round %d/%d  %-15s median %s  CPU/call %s  (%.1f s)",
                    r + 1, args.rounds, name, ms(statistics.median(res["lat_s"])),
                    us(res["cpu_total_s"] / res["calls"]), time.monotonic() - t0)
            if km.is_alive() is False:
                log("the kernel died; see %s", os.path.join(tmpdir, "kernel.log"))
                failed = True
                break
    finally:
        if km is not None:
            try:
                km.shutdown_kernel(now=False)
            except Exception:
                km.shutdown_kernel(now=True)
        shutil.rmtree(tmpdir, ignore_errors=True)

    stats = {name: summarize(rs) for name, rs in results.items() if rs}
    v = verdicts(stats, results)
    print_report(cfg, stats, skipped)
    print_summary(stats, v)
    if args.json:
        doc = {"config": cfg, "versions": versions(), "skipped": skipped,
               "targets": {"lat_ratio_kbox_raw_max": LAT_TARGET,
                           "cpu_ratio_kbox_floor_max": FLOOR_TARGET},
               "clients": stats, "raw": results, **v}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
