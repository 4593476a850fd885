#!/usr/bin/python3
"""raw_client.py — the kernel's floor: execute("1+1") over bare pyzmq.

Usage: raw_client.py CONNFILE N [WARMUP]

A hand-rolled Jupyter client that does the least a correct client must do:
sign an execute_request with HMAC-SHA256 and send it on a DEALER (shell),
then wait on a SUB (iopub) and the DEALER until both the execute_reply and
the status "idle" whose parent is that request have arrived.  Nothing else:
no signature check on what comes back, no heartbeat, no stdin, no message
objects.  Whatever a real client adds on top of this is overhead.

After connecting it waits until shell and iopub both answer (kernel_info),
runs WARMUP unmeasured calls, then N measured ones, and prints one JSON
object on stdout:

  {"client": "raw-pyzmq", "calls": N, "warmup": W,
   "lat_s": [...], "cpu_s": [...], "cpu_total_s": S, "errors": E,
   "rusage": {"user_s", "sys_s", "nvcsw", "nivcsw"}}

lat_s is the wall time of each call (time.perf_counter, CLOCK_MONOTONIC),
cpu_s its CPU time in this process (time.process_time, user + sys, all
threads), rusage the getrusage(RUSAGE_SELF) differences over the N calls.
"""

import datetime
import hashlib
import hmac
import json
import resource
import sys
import time
import uuid

import zmq

DELIM = b"<IDS|MSG>"
CALL_TIMEOUT_S = 10.0


def rusage_delta(r0, r1):
    """getrusage(RUSAGE_SELF) differences, as bench_exec reports them."""
    return {"user_s": r1.ru_utime - r0.ru_utime, "sys_s": r1.ru_stime - r0.ru_stime,
            "nvcsw": r1.ru_nvcsw - r0.ru_nvcsw, "nivcsw": r1.ru_nivcsw - r0.ru_nivcsw}


def endpoint(conn, channel):
    """The ZeroMQ address of CHANNEL ("shell", "iopub", ...) in CONN."""
    port = conn[channel + "_port"]
    if conn.get("transport", "tcp") == "ipc":
        return "ipc://%s-%d" % (conn["ip"], port)
    return "tcp://%s:%d" % (conn["ip"], port)


class RawClient:
    """Two sockets, a key and a session id: nothing more."""

    def __init__(self, conn):
        self.key = conn["key"].encode()
        scheme = conn.get("signature_scheme", "hmac-sha256")
        if scheme != "hmac-sha256":
            raise SystemExit("raw_client: unsupported signature scheme %s" % scheme)
        self.session = uuid.uuid4().hex
        self.ctx = zmq.Context()
        self.shell = self.ctx.socket(zmq.DEALER)
        self.shell.linger = 0
        self.shell.connect(endpoint(conn, "shell"))
        self.iopub = self.ctx.socket(zmq.SUB)
        self.iopub.linger = 0
        self.iopub.setsockopt(zmq.SUBSCRIBE, b"")
        self.iopub.connect(endpoint(conn, "iopub"))
        self.poller = zmq.Poller()
        self.poller.register(self.shell, zmq.POLLIN)
        self.poller.register(self.iopub, zmq.POLLIN)

    def send(self, msg_type, content):
        """Sign and send one request on shell; return its msg_id."""
        msg_id = uuid.uuid4().hex
        header = json.dumps({
            "msg_id": msg_id,
            "session": self.session,
            "username": "bench",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "msg_type": msg_type,
            "version": "5.3",
        }).encode()
        parts = [header, b"{}", b"{}", json.dumps(content).encode()]
        mac = hmac.new(self.key, digestmod=hashlib.sha256)
        for p in parts:
            mac.update(p)
        self.shell.send_multipart([DELIM, mac.hexdigest().encode()] + parts)
        return msg_id

    @staticmethod
    def split(frames):
        """(header, parent_header, content) as raw bytes, or None."""
        try:
            i = frames.index(DELIM)
        except ValueError:
            return None
        if len(frames) < i + 6:
            return None
        return frames[i + 2], frames[i + 3], frames[i + 5]

    def wait(self, msg_id, reply_type, timeout_s, need_idle=True):
        """Wait for REPLY_TYPE and (when NEED_IDLE) iopub idle for MSG_ID.

        Returns True when both came, False on timeout."""
        got_reply = False
        got_idle = not need_idle
        deadline = time.monotonic() + timeout_s
        while not (got_reply and got_idle):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for sock, _ in self.poller.poll(left * 1000):
                while sock.getsockopt(zmq.EVENTS) & zmq.POLLIN:
                    parts = self.split(sock.recv_multipart())
                    if parts is None:
                        continue
                    header, parent, content = parts
                    if json.loads(parent).get("msg_id") != msg_id:
                        continue
                    mtype = json.loads(header)["msg_type"]
                    if sock is self.shell:
                        if mtype == reply_type:
                            got_reply = True
                    elif mtype == "status" and \
                            json.loads(content).get("execution_state") == "idle":
                        got_idle = True
        return True

    def wait_ready(self, timeout_s=30.0):
        """kernel_info until the reply AND its iopub idle arrive (slow joiner)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msg_id = self.send("kernel_info_request", {})
            if self.wait(msg_id, "kernel_info_reply", 1.0):
                return True
        return False

    def execute(self, code):
        msg_id = self.send("execute_request", {
            "code": code,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        })
        return self.wait(msg_id, "execute_reply", CALL_TIMEOUT_S)

    def close(self):
        self.shell.close()
        self.iopub.close()
        self.ctx.term()


def main(argv):
    if len(argv) not in (3, 4):
        sys.stderr.write("usage: raw_client.py CONNFILE N [WARMUP]\n")
        return 2
    with open(argv[1]) as f:
        conn = json.load(f)
    n = int(argv[2])
    warmup = int(argv[3]) if len(argv) == 4 else 20
    client = RawClient(conn)
    if not client.wait_ready():
        sys.stderr.write("raw_client: kernel not ready within 30 s\n")
        return 1
    errors = 0
    for _ in range(warmup):
        if not client.execute("1+1"):
            errors += 1
    lat, cpu = [], []
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(n):
        c0 = time.process_time()
        t0 = time.perf_counter()
        ok = client.execute("1+1")
        t1 = time.perf_counter()
        c1 = time.process_time()
        if not ok:
            errors += 1
        lat.append(t1 - t0)
        cpu.append(c1 - c0)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    client.close()
    json.dump({"client": "raw-pyzmq", "calls": n, "warmup": warmup, "lat_s": lat,
               "cpu_s": cpu, "cpu_total_s": sum(cpu), "errors": errors,
               "rusage": rusage_delta(r0, r1)}, sys.stdout)
    sys.stdout.write("\n")
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
