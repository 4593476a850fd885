#!/usr/bin/python3
"""bench/kernelspec.py - kbox's kernelspec (kbox kernel: relay + sandbox)
against the plain python3 kernelspec, both driven by jupyter_client.

    /usr/bin/python3 bench/kernelspec.py [KBOX] [--calls N] [--rounds M]
        [--starts S] [--json FILE]

KBOX is the kbox program (default: $KBOX, else ./kbox).  Everything runs
in a private directory (a fresh /tmp/kbk.XXXXXXXX, mode 0711 so that the
sandbox's user passes through it, removed at the end): a KBOX_HOME, a
JUPYTER_PATH holding kbox-python3 (written by `kbox kernelspec install
--prefix`) and the front ends' runtime directory; the kernels start in
its work/ directory (the kbox kernel's workspace).

  round trip   one kernel of each of three kernelspecs, started with
               jupyter_client.manager.start_new_kernel; then M rounds
               (default 7), each running, for both kernels in turn (the
               order alternating from round to round), N (default 200)
               calls of execute_interactive("1+1") whose result is
               checked, each timed with time.perf_counter from the
               request to its reply and the kernel's idle; a round's
               figure is its median call.  The ratio kbox/plain is the
               median of the rounds' ratios (goal: <= 1.1, the relay adds
               one hop on loopback).  The three: python3 (the plain
               kernelspec as installed), kbox-python3, and python3-mem,
               the plain kernel with IPython's history in memory as kbox
               runs it (--HistoryManager.hist_file=:memory:): the plain
               kernel writes each cell to a SQLite file, which costs
               more than the relay, so kbox/python3-mem is what the relay
               and the sandbox themselves cost.
  start        S (default 10) starts of each, alternating: from
               KernelManager.start_kernel to the reply of kernel_info
               (client.wait_for_ready), then a shutdown; the medians, and
               their ratio.

Figures in milliseconds.  --json FILE writes them as JSON too.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from jupyter_client.manager import KernelManager, start_new_kernel


def median(v):
    return statistics.median(v) if v else float("nan")


def calls(kc, n):
    out = []
    for _ in range(n):
        got = []
        t0 = time.perf_counter()
        r = kc.execute_interactive("1+1", timeout=60,
                                   output_hook=lambda m: got.append(m))
        out.append((time.perf_counter() - t0) * 1000)
        res = [m["content"]["data"]["text/plain"] for m in got
               if m["msg_type"] == "execute_result"]
        if r["content"]["status"] != "ok" or res != ["2"]:
            raise SystemExit(f"wrong result: {r['content']} {res}")
    return out


def start_once(name, cwd):
    km = KernelManager(kernel_name=name)
    t0 = time.perf_counter()
    km.start_kernel(cwd=cwd)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    ms = (time.perf_counter() - t0) * 1000
    kc.stop_channels()
    km.shutdown_kernel()
    return ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kbox", nargs="?", default=os.environ.get("KBOX", "./kbox"))
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--starts", type=int, default=10)
    ap.add_argument("--json")
    a = ap.parse_args()
    kbox = os.path.abspath(a.kbox)
    base = tempfile.mkdtemp(prefix="kbk.", dir="/tmp")
    os.chmod(base, 0o711)
    home = os.path.join(base, "home")
    work = os.path.join(base, "work")
    os.mkdir(home, 0o700)
    os.mkdir(work)
    os.chmod(work, 0o777)
    os.environ.update(KBOX_HOME=home, JUPYTER_PATH=os.path.join(base, "share", "jupyter"),
                      JUPYTER_RUNTIME_DIR=os.path.join(base, "run"))
    os.environ.pop("KBOX_SESSION", None)
    subprocess.run([kbox, "kernelspec", "install", "--prefix", base], check=True,
                   stdout=subprocess.DEVNULL)
    # the plain kernel as kbox runs it, its history in memory
    with open("/usr/share/jupyter/kernels/python3/kernel.json") as f:
        spec = json.load(f)
    spec["argv"].append("--HistoryManager.hist_file=:memory:")
    spec["display_name"] = "python3, history in memory"
    os.makedirs(os.path.join(base, "share", "jupyter", "kernels", "python3-mem"))
    with open(os.path.join(base, "share", "jupyter", "kernels", "python3-mem",
                           "kernel.json"), "w") as f:
        json.dump(spec, f)
    os.chdir(work)
    names = ["python3", "python3-mem", "kbox-python3"]
    figures = {}
    try:
        kernels = {}
        for name in names:
            kernels[name] = start_new_kernel(kernel_name=name, startup_timeout=120)
        for km, kc in kernels.values():
            calls(kc, 20)  # (warm-up)
        rounds = []
        for r in range(a.rounds):
            order = names[r % 3:] + names[:r % 3]
            got = {n: median(calls(kernels[n][1], a.calls)) for n in order}
            rounds.append(got)
            print(f"round {r + 1}: python3 {got['python3']:.3f} ms, python3-mem "
                  f"{got['python3-mem']:.3f} ms, kbox-python3 {got['kbox-python3']:.3f} ms",
                  flush=True)
        for km, kc in kernels.values():
            kc.stop_channels()
            km.shutdown_kernel()
        plain = median([g["python3"] for g in rounds])
        mem = median([g["python3-mem"] for g in rounds])
        kb = median([g["kbox-python3"] for g in rounds])
        ratio = median([g["kbox-python3"] / g["python3"] for g in rounds])
        ratio_mem = median([g["kbox-python3"] / g["python3-mem"] for g in rounds])
        figures["round_trip"] = {"plain_ms": plain, "plain_mem_ms": mem, "kbox_ms": kb,
                                 "ratio": ratio, "ratio_mem": ratio_mem, "goal": 1.1,
                                 "calls": a.calls, "rounds": a.rounds}
        print(f"execute('1+1') round trip: python3 {plain:.3f} ms, python3-mem {mem:.3f} ms, "
              f"kbox-python3 {kb:.3f} ms", flush=True)
        for what, r_ in (("python3", ratio), ("python3-mem", ratio_mem)):
            print(f"  kbox-python3 / {what}: {r_:.3f}x (goal <= 1.1: "
                  f"{'PASS' if r_ <= 1.1 else 'FAIL'})", flush=True)
        starts = {n: [] for n in names}
        for i in range(a.starts):
            for name in names[i % 3:] + names[:i % 3]:
                starts[name].append(start_once(name, work))
        sp, sm = median(starts["python3"]), median(starts["python3-mem"])
        sk = median(starts["kbox-python3"])
        figures["start"] = {"plain_ms": sp, "plain_mem_ms": sm, "kbox_ms": sk,
                            "ratio": sk / sp, "starts": a.starts}
        print(f"start to kernel_info: python3 {sp:.0f} ms, python3-mem {sm:.0f} ms, "
              f"kbox-python3 {sk:.0f} ms: {sk / sp:.2f}x python3's", flush=True)
    finally:
        subprocess.run([kbox, "stop", "--all"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        os.chdir("/")
        shutil.rmtree(base, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
