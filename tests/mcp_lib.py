#!/usr/bin/python3
"""tests/mcp_lib.py — what the MCP tests share: a client of `kbox mcp` on
its standard input and output (one JSON-RPC message a line, as the stdio
transport says), TAP's check() and plan, and small helpers.  KBOX is the
kbox to run; KBOX_HOME must be set (a private one)."""
import fnmatch
import glob
import json
import os
import select
import subprocess
import sys
import time

KBOX = sys.argv[1]
HOME = os.environ["KBOX_HOME"]
LATEST = "2025-11-25"
n = 0
failed = 0
ran = 0  # the tests KBOX_TEST_RUN selected


def selected(name, num):
    """Whether KBOX_TEST_RUN picks test NUM, NAME: as tests/lib.sh reads
    it (numbers, ranges N-M, name globs; ! excludes)."""
    def hit(p):
        lo, dash, hi = p.partition("-")
        if dash and lo.isdigit() and hi.isdigit():
            return int(lo) <= num <= int(hi)
        return p == str(num) or fnmatch.fnmatchcase(name, p)
    pats = [p for p in os.environ.get("KBOX_TEST_RUN", "").split(",") if p]
    pos = [p for p in pats if not p.startswith("!")]
    if any(hit(p[1:]) for p in pats if p.startswith("!")):
        return False
    return not pos or any(hit(p) for p in pos)


def check(name, fn):
    global n, failed, ran
    n += 1
    if not selected(name, n):
        print(f"ok {n} - {name} # SKIP not selected (KBOX_TEST_RUN)", flush=True)
        return
    ran += 1
    try:
        fn()
        print(f"ok {n} - {name}", flush=True)
    except Exception as e:  # noqa: BLE001 - a test reports any failure
        failed += 1
        print(f"not ok {n} - {name}", flush=True)
        for line in repr(e)[:3000].splitlines():
            print(f"#   {line}", flush=True)
        for f in glob.glob(os.path.join(os.path.dirname(HOME), "mcp-stderr-*")):
            for line in open(f).read().splitlines()[-5:]:
                print(f"#   stderr: {line}", flush=True)


class Server:
    """One `kbox mcp` process and its stdio."""

    def __init__(self, *args, env=None):
        self.err = open(os.path.join(os.path.dirname(HOME), f"mcp-stderr-{time.time_ns()}"), "w+")
        self.p = subprocess.Popen([KBOX, "mcp", *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self.err,
                                  env=dict(os.environ, **(env or {})))
        self.buf = b""
        self.next_id = 1000
        self.seen = []  # every message received

    def send(self, msg):
        raw = msg if isinstance(msg, (str, bytes)) else json.dumps(msg)
        raw = raw.encode() if isinstance(raw, str) else raw
        self.p.stdin.write(raw + b"\n")
        self.p.stdin.flush()

    def recv(self, timeout=60):
        deadline = time.time() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError("no message within %s s" % timeout)
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if r:
                chunk = os.read(self.p.stdout.fileno(), 1 << 20)
                if not chunk:
                    raise EOFError("kbox mcp closed its standard output")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        msg = json.loads(line)
        self.seen.append(msg)
        return msg

    def wait_for(self, id_, timeout=60):
        """The response to ID (other messages before it are kept in seen)."""
        while True:
            m = self.recv(timeout)
            if m.get("id") == id_:
                return m

    def request(self, method, params=None, timeout=60):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.wait_for(self.next_id, timeout)

    def init(self, version=LATEST):
        r = self.request("initialize", {"protocolVersion": version, "capabilities": {},
                                        "clientInfo": {"name": "mcp_client.py", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r

    def call(self, tool, args, timeout=60):
        return self.request("tools/call", {"name": tool, "arguments": args}, timeout)

    def close(self, timeout=60):
        self.p.stdin.close()
        rc = self.p.wait(timeout)
        self.p.stdout.close()
        return rc

    def stderr(self):
        self.err.seek(0)
        return self.err.read()


def text_of(resp):
    return "".join(c["text"] for c in resp["result"]["content"] if c["type"] == "text")


def ok_result(resp):
    assert "result" in resp, resp
    return resp["result"]


def err_code(resp):
    assert "error" in resp, resp
    return resp["error"]["code"]


def sessions():
    out = subprocess.run([KBOX, "ls", "--format", "json"], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out) if out.strip() else []


def gone(pid, wait=10):
    """Whether process PID ends (or is a zombie) within WAIT seconds."""
    deadline = time.time() + wait
    while time.time() < deadline:
        try:
            if open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False


def plan():
    """The TAP plan, and the exit status: 1 when a check failed."""
    if os.environ.get("KBOX_TEST_RUN") and not ran:
        print(f"# KBOX_TEST_RUN={os.environ['KBOX_TEST_RUN']} selects none of the {n} "
              "tests above: check its names and numbers", flush=True)
    print(f"1..{n}")
    sys.exit(1 if failed else 0)
