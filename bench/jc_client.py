#!/usr/bin/python3
"""jc_client.py — the jupyter_client column: execute("1+1") the usual way.

Usage: jc_client.py [--mode interactive|reply] CONNFILE N [WARMUP]

Connects a jupyter_client BlockingKernelClient to the kernel in CONNFILE
(shell, iopub and stdin channels; the heartbeat thread is left off so its
pings do not count against jupyter_client), waits for it with
wait_for_ready, runs WARMUP unmeasured calls, then N measured ones.

  --mode interactive  (default) kc.execute_interactive("1+1"), which returns
                      after iopub idle and the execute_reply; output goes to
                      a no-op hook instead of being printed.
  --mode reply        kc.execute("1+1", reply=True), then kc.get_iopub_msg
                      until the idle of that request, so that this mode too
                      waits for both (and leaves no backlog on iopub).

Prints one JSON object on stdout:

  {"client": "jupyter_client", "mode": M, "calls": N, "warmup": W,
   "lat_s": [...], "cpu_s": [...], "cpu_total_s": S, "errors": E,
   "rusage": {"user_s", "sys_s", "nvcsw", "nivcsw"}}

lat_s is the wall time of each call (time.perf_counter, CLOCK_MONOTONIC),
cpu_s its CPU time in this process, all threads (time.process_time), rusage
the getrusage(RUSAGE_SELF) differences over the N calls.
"""

import argparse
import json
import resource
import sys
import time

from jupyter_client import BlockingKernelClient

CALL_TIMEOUT_S = 10.0


def rusage_delta(r0, r1):
    """getrusage(RUSAGE_SELF) differences, as bench_exec reports them."""
    return {"user_s": r1.ru_utime - r0.ru_utime, "sys_s": r1.ru_stime - r0.ru_stime,
            "nvcsw": r1.ru_nvcsw - r0.ru_nvcsw, "nivcsw": r1.ru_nivcsw - r0.ru_nivcsw}


def _no_output(msg):
    pass


def call_interactive(kc):
    reply = kc.execute_interactive("1+1", allow_stdin=False, timeout=CALL_TIMEOUT_S,
                                   output_hook=_no_output)
    return reply["content"]["status"] == "ok"


def call_reply(kc):
    reply = kc.execute("1+1", reply=True, allow_stdin=False, timeout=CALL_TIMEOUT_S)
    msg_id = reply["parent_header"]["msg_id"]
    while True:
        msg = kc.get_iopub_msg(timeout=CALL_TIMEOUT_S)
        if msg["parent_header"].get("msg_id") == msg_id and \
                msg["msg_type"] == "status" and \
                msg["content"]["execution_state"] == "idle":
            break
    return reply["content"]["status"] == "ok"


def main(argv):
    ap = argparse.ArgumentParser(prog="jc_client.py")
    ap.add_argument("--mode", choices=("interactive", "reply"), default="interactive")
    ap.add_argument("connfile")
    ap.add_argument("n", type=int)
    ap.add_argument("warmup", type=int, nargs="?", default=20)
    args = ap.parse_args(argv[1:])
    call = call_interactive if args.mode == "interactive" else call_reply

    kc = BlockingKernelClient(connection_file=args.connfile)
    kc.load_connection_file()
    kc.start_channels(hb=False)
    kc.wait_for_ready(timeout=30)
    errors = 0
    for _ in range(args.warmup):
        try:
            if not call(kc):
                errors += 1
        except Exception:
            errors += 1
    lat, cpu = [], []
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(args.n):
        c0 = time.process_time()
        t0 = time.perf_counter()
        try:
            ok = call(kc)
        except Exception:
            ok = False
        t1 = time.perf_counter()
        c1 = time.process_time()
        if not ok:
            errors += 1
        lat.append(t1 - t0)
        cpu.append(c1 - c0)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    kc.stop_channels()
    json_out = {"client": "jupyter_client", "mode": args.mode, "calls": args.n,
                "warmup": args.warmup, "lat_s": lat, "cpu_s": cpu,
                "cpu_total_s": sum(cpu), "errors": errors,
                "rusage": rusage_delta(r0, r1)}
    json.dump(json_out, sys.stdout)
    sys.stdout.write("\n")
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
