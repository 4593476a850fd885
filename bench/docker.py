#!/usr/bin/python3
"""bench/docker.py - what backend docker costs, against the bare container path.

    /usr/bin/python3 bench/docker.py [KBOX] [--rounds R] [--calls N] [--image NAME]
        [--json FILE]

KBOX is the kbox program (default: $KBOX, else ./kbox); the engine is
DOCKER_HOST's (unix:///PATH; default /var/run/docker.sock) with the image
NAME (default kbox-kernel, `make image`).  Everything runs in a private
KBOX_HOME.  In one run on one machine, R rounds (default 10), each running
once, in an order rotated from round to round:

  kbox   `KBOX start -s bN --backend docker`, then
         `KBOX exec -s bN 'import pandas, numpy, matplotlib; 1+1'`
         (must print exactly "Out[1]: 2");
  bare   `docker run -d` of the same image with the same confinement
         (--network none --init --read-only --cap-drop ALL
         --security-opt no-new-privileges, memory, pids, the tmpfs /tmp and
         home, the sockets' directory bound at /run/kernel, the same
         entrypoint script: matplotlib's font cache copied in), then a
         jupyter_client BlockingKernelClient: wait_for_ready, execute the
         same code, its execute_result "2".

Each is timed from spawning its first command to the first result; the
container is removed off the clock.  Reported: medians, p10, p90, and the
ratio kbox/bare of the medians (goal <= 1.05).  Then the round trip of
N (default 200) `kbox exec -s S '1'` calls in a docker session against a
bwrap session, interleaved in blocks of 10: medians and their ratio.  The
last line of stdout is one JSON object with every figure.
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
import uuid

CODE = "import pandas, numpy, matplotlib; 1+1"
ENTRY = ("umask 077; mkdir -p /tmp/matplotlib || exit 127; "
         "if [ -d /usr/share/kbox/mpl ]; then cp /usr/share/kbox/mpl/* /tmp/matplotlib/ 2>/dev/null; fi; "
         "exec \"$@\"")


def run(cmd, env=None, check=True):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        sys.exit("bench/docker.py: %s exited %d: %s %s" % (cmd[:3], p.returncode, p.stdout, p.stderr))
    return p


def kbox_path(kbox, env, name):
    t0 = time.monotonic()
    p = run([kbox, "start", "-s", name, "--backend", "docker"], env)
    if "backend docker" not in p.stdout:
        sys.exit("bench/docker.py: kbox start said " + p.stdout)
    p = run([kbox, "exec", "-s", name, CODE], env)
    t = time.monotonic() - t0
    if p.stdout.strip() != "Out[1]: 2" or p.stderr:
        sys.exit("bench/docker.py: kbox exec said %r %r" % (p.stdout, p.stderr))
    run([kbox, "stop", "-s", name], env)
    return t


def bare_path(docker, image, workdir, uid):
    from jupyter_client import BlockingKernelClient
    sockets = tempfile.mkdtemp(dir=workdir)
    os.chown(sockets, uid, uid)
    os.chmod(sockets, 0o700)
    key = uuid.uuid4().hex
    conn = {"transport": "ipc", "ip": "/run/kernel/k", "key": key, "signature_scheme": "hmac-sha256",
            "shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5,
            "kernel_name": "python3"}
    with open(os.path.join(sockets, "kernel.json"), "w") as f:
        json.dump(conn, f)
    os.chown(os.path.join(sockets, "kernel.json"), uid, uid)
    name = "kbox-bench-" + uuid.uuid4().hex[:12]
    t0 = time.monotonic()
    run([docker, "run", "-d", "--name", name, "--network", "none", "--init", "--read-only",
         "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--memory", "2g",
         "--memory-swap", "2g", "--pids-limit", "1024", "--user", "%d:%d" % (uid, uid),
         "--tmpfs", "/tmp:rw,exec,nosuid,nodev,size=512m,mode=1777",
         "--tmpfs", "/home/kbox:rw,nosuid,nodev,size=512m,mode=1777",
         "--mount", "type=bind,source=%s,target=/run/kernel" % sockets,
         "-e", "HOME=/home/kbox", "-e", "JPY_PARENT_PID=1", "-e", "MPLCONFIGDIR=/tmp/matplotlib",
         "-e", "PYDEVD_DISABLE_FILE_VALIDATION=1", "-w", "/workspace",
         "--entrypoint", "/bin/sh", image, "-c", ENTRY, "sh",
         "python3", "-m", "ipykernel_launcher", "-f", "/run/kernel/kernel.json"])
    host = dict(conn, ip=os.path.join(sockets, "k"))
    c = BlockingKernelClient()
    c.load_connection_info(host)
    c.start_channels(hb=False)
    c.wait_for_ready(timeout=60)
    msg_id = c.execute(CODE)
    result = None
    while True:
        m = c.get_iopub_msg(timeout=60)
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        if m["msg_type"] == "execute_result":
            result = m["content"]["data"]["text/plain"]
        if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            break
    t = time.monotonic() - t0
    c.stop_channels()
    run([docker, "rm", "-f", name])
    shutil.rmtree(sockets, ignore_errors=True)
    if result != "2":
        sys.exit("bench/docker.py: the bare kernel said %r" % result)
    return t


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kbox", nargs="?", default=os.environ.get("KBOX", "./kbox"))
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--image", default="kbox-kernel")
    ap.add_argument("--json")
    a = ap.parse_args()
    kbox = os.path.abspath(a.kbox)
    docker = shutil.which("docker")
    if not docker:
        sys.exit("bench/docker.py: the docker CLI is needed for the bare path")
    home = tempfile.mkdtemp(prefix="kbd.", dir="/tmp")
    os.chmod(home, 0o711)
    env = dict(os.environ, KBOX_HOME=os.path.join(home, "h"))
    uid = 1000
    times = {"kbox": [], "bare": []}
    try:
        # one of each unmeasured: the page cache, the image's layers
        kbox_path(kbox, env, "warm")
        bare_path(docker, a.image, home, uid)
        for r in range(a.rounds):
            order = ["kbox", "bare"] if r % 2 == 0 else ["bare", "kbox"]
            for which in order:
                if which == "kbox":
                    times["kbox"].append(kbox_path(kbox, env, "b%d" % r))
                else:
                    times["bare"].append(bare_path(docker, a.image, home, uid))
        med = {k: statistics.median(v) for k, v in times.items()}
        for k in ("kbox", "bare"):
            print("start to first result  %-5s median %.3f s  p10 %.3f  p90 %.3f" %
                  (k, med[k], pct(times[k], 0.1), pct(times[k], 0.9)))
        ratio = med["kbox"] / med["bare"]
        print("ratio kbox/bare %.3f (goal <= 1.05)  %s" % (ratio, "PASS" if ratio <= 1.05 else "FAIL"))
        # the round trip in a docker session against a bwrap one
        run([kbox, "start", "-s", "rt-d", "--backend", "docker"], env)
        run([kbox, "start", "-s", "rt-b"], env)
        rt = {"docker": [], "bwrap": []}
        for block in range(a.calls // 10):
            for s, k in (("rt-d", "docker"), ("rt-b", "bwrap")) if block % 2 == 0 else \
                    (("rt-b", "bwrap"), ("rt-d", "docker")):
                for _ in range(10):
                    t0 = time.monotonic()
                    p = run([kbox, "exec", "-s", s, "1"], env)
                    rt[k].append(time.monotonic() - t0)
                    if p.stdout.strip() != "Out[%d]: 1" % len(rt[k]):
                        sys.exit("bench/docker.py: exec said %r" % p.stdout)
        run([kbox, "stop", "--all"], env)
        rmed = {k: statistics.median(v) for k, v in rt.items()}
        print("kbox exec '1' round trip  docker %.2f ms  bwrap %.2f ms  ratio %.3f" %
              (rmed["docker"] * 1e3, rmed["bwrap"] * 1e3, rmed["docker"] / rmed["bwrap"]))
        out = {"bench": "docker", "start_median_s": med, "ratio": ratio, "ratio_goal": 1.05,
               "start_s": times, "roundtrip_median_s": rmed, "roundtrip_ratio": rmed["docker"] / rmed["bwrap"],
               "rounds": a.rounds, "calls": a.calls, "loadavg": os.getloadavg()}
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)
        print(json.dumps(out))
    finally:
        subprocess.run([kbox, "stop", "--all"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
