"""tests/kernelspec_test.py — kbox's kernelspec through jupyter_client, as a
Jupyter front end uses it: the Jupyter project's kernel conformance suite
(python3-jupyter-kernel-test's KernelTests) against kbox-python3, then
what that suite (0.4.5) does not cover: stdin, interrupts of both modes,
comm messages, restart and shutdown leaving nothing behind, messages
with a bad signature.  Run by tests/kernelspec.sh, which makes the
kernelspecs (kbox kernelspec install) in a private JUPYTER_PATH and a
private KBOX_HOME.  TAP on standard output; KBOX_TEST_RUN selects tests
by number or name glob, as tests/lib.sh reads it.
"""
import fnmatch
import hashlib
import hmac
import json
import os
import queue
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

import zmq
from jupyter_client.manager import KernelManager, start_new_kernel
from jupyter_kernel_test import KernelTests

KBOX = os.environ["KBOX"]
TIMEOUT = 30


def sessions():
    """The names of the sessions of the private KBOX_HOME."""
    d = os.path.join(os.environ["KBOX_HOME"], "sessions")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def wait_until(pred, what, limit=30):
    """Poll PRED (bounded: a failure, not a hang) until it holds."""
    end = time.monotonic() + limit
    while not pred():
        if time.monotonic() > end:
            raise AssertionError(f"still not: {what}")
        time.sleep(0.02)


def pid_alive(pid):
    """Whether PID runs: a zombie (an orphan that init has not reaped
    yet) has ended."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def status_of(name):
    r = subprocess.run([KBOX, "status", "-s", name, "--format", "json"],
                       capture_output=True, text=True, check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def drain(kc):
    for get in (kc.get_shell_msg, kc.get_iopub_msg):
        while True:
            try:
                get(timeout=0.1)
            except queue.Empty:
                break


def reply_to(kc, msg_id, channel="shell"):
    get = kc.get_shell_msg if channel == "shell" else kc.get_control_msg
    while True:
        m = get(timeout=TIMEOUT)
        if m["parent_header"].get("msg_id") == msg_id:
            return m


def iopub_flows(kc):
    """After a flood, until what the kernel publishes reaches KC again.
    iopub is publish-subscribe: what a kernel publishes while its queue to
    a slow subscriber (here the relay, behind on the flood) is full is
    dropped by the kernel's own socket, a cell's idle status too, so one
    cell's status may never come.  As jupyter_client's wait_for_ready
    does, a request at a time until the status of one arrives: each
    cell's reply first (shell loses nothing), then what iopub brings,
    until it has brought nothing for a second (the backlog is through)
    and another cell is sent.  Bounded: a failure, not a hang."""
    end = time.monotonic() + 2 * TIMEOUT
    ids = set()
    while time.monotonic() < end:
        msg_id = kc.execute("pass", store_history=False)
        ids.add(msg_id)
        if reply_to(kc, msg_id)["content"]["status"] != "ok":
            raise AssertionError("a cell of 'pass' did not end ok")
        while time.monotonic() < end:
            try:
                m = kc.get_iopub_msg(timeout=1)
            except queue.Empty:
                break
            if (m["parent_header"].get("msg_id") in ids and m["msg_type"] == "status"
                    and m["content"]["execution_state"] == "idle"):
                return
    raise AssertionError(f"nothing the kernel published reached the front end within "
                         f"{2 * TIMEOUT} s")


SLEEPER = "import time; print('sleeping', flush=True); time.sleep(120)"


def wait_sleeping(kc, msg_id):
    """Until the code of SLEEPER runs (a signal before the cell runs is the
    kernel's to take, not the cell's)."""
    while True:
        m = kc.get_iopub_msg(timeout=TIMEOUT)
        if (m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "stream"
                and "sleeping" in m["content"]["text"]):
            return


def stdout_of(kc, msg_id):
    out = ""
    while True:
        m = kc.get_iopub_msg(timeout=TIMEOUT)
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        if m["msg_type"] == "stream" and m["content"]["name"] == "stdout":
            out += m["content"]["text"]
        if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            return out


# ---- the Jupyter project's suite ----

class Conformance(KernelTests):
    """jupyter_kernel_test's KernelTests, with IPython's samples."""
    kernel_name = "kbox-python3"
    language_name = "python"
    file_extension = ".py"
    code_hello_world = "print('hello, world')"
    code_stderr = "import sys; print('test', file=sys.stderr)"
    completion_samples = [{"text": "zi", "matches": {"zip"}}]
    complete_code_samples = ["1", "print('hello, world')", "def f(x):\n  return x*2\n\n\n"]
    incomplete_code_samples = ["print('''hello", "def f(x):\n  x*2"]
    invalid_code_samples = ["import = 7q"]
    code_page_something = "zip?"
    code_generate_error = "raise ValueError('kbox')"
    code_execute_result = [{"code": "1+2+3", "result": "6"},
                           {"code": "[n*n for n in range(1, 4)]", "result": "[1, 4, 9]"}]
    code_display_data = [
        {"code": "from IPython.display import HTML, display; display(HTML('<b>kbox</b>'))",
         "mime": "text/html"},
        {"code": "from IPython.display import Math, display; display(Math('\\\\frac{1}{2}'))",
         "mime": "text/latex"}]
    code_history_pattern = "1?2*"
    supported_history_operations = ("tail", "search")
    code_inspect_sample = "zip"
    code_clear_output = "from IPython.display import clear_output; clear_output()"


# ---- what the suite does not cover ----

class Beyond(unittest.TestCase):
    """One kernel of kbox-python3 (interrupt_mode signal) for these."""

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="kbox-ks-ws-", dir=os.environ["BASE"])
        os.chmod(cls.work, 0o777)
        with open(os.path.join(cls.work, "data.csv"), "w") as f:
            f.write("a,b\n1,2\n")
        cls.km = KernelManager(kernel_name="kbox-python3")
        cls.km.start_kernel(cwd=cls.work)
        cls.kc = cls.km.client()
        cls.kc.start_channels()
        cls.kc.wait_for_ready(timeout=60)

    @classmethod
    def tearDownClass(cls):
        cls.kc.stop_channels()
        cls.km.shutdown_kernel()

    def run_code(self, code, **kw):
        drain(self.kc)
        msg_id = self.kc.execute(code, **kw)
        out = stdout_of(self.kc, msg_id)
        return reply_to(self.kc, msg_id), out

    def test_stdin_input_request(self):
        drain(self.kc)
        msg_id = self.kc.execute("x = input('name? ')\nprint('hello', x)", allow_stdin=True)
        req = self.kc.get_stdin_msg(timeout=TIMEOUT)
        self.assertEqual(req["msg_type"], "input_request")
        self.assertEqual(req["content"]["prompt"], "name? ")
        self.assertEqual(req["parent_header"]["msg_id"], msg_id)
        self.kc.input("kbox")
        out = stdout_of(self.kc, msg_id)
        self.assertEqual(reply_to(self.kc, msg_id)["content"]["status"], "ok")
        self.assertEqual(out, "hello kbox\n")

    def test_interrupt_signal(self):
        drain(self.kc)
        msg_id = self.kc.execute(SLEEPER)
        wait_sleeping(self.kc, msg_id)
        self.km.interrupt_kernel()  # SIGINT to kbox kernel's process group
        r = reply_to(self.kc, msg_id)
        self.assertEqual(r["content"]["status"], "error")
        self.assertEqual(r["content"]["ename"], "KeyboardInterrupt")
        r, out = self.run_code("print(6 * 7)")
        self.assertEqual((r["content"]["status"], out), ("ok", "42\n"))

    def test_comm_round_trip(self):
        r, _ = self.run_code(
            "def _echo(comm, msg):\n"
            "    comm.on_msg(lambda m: comm.send({'echo': m['content']['data']}))\n"
            "get_ipython().kernel.comm_manager.register_target('kbox-echo', _echo)")
        self.assertEqual(r["content"]["status"], "ok")
        drain(self.kc)
        comm_id = uuid.uuid4().hex
        s = self.kc.session
        self.kc.shell_channel.send(s.msg("comm_open", {"comm_id": comm_id,
                                                       "target_name": "kbox-echo",
                                                       "data": {}}))
        self.kc.shell_channel.send(s.msg("comm_msg", {"comm_id": comm_id,
                                                      "data": {"n": 42}}))
        while True:
            m = self.kc.get_iopub_msg(timeout=TIMEOUT)
            if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == comm_id:
                self.assertEqual(m["content"]["data"], {"echo": {"n": 42}})
                break

    def test_workspace_is_the_front_ends_directory(self):
        r, out = self.run_code("import os; print(os.getcwd(), open('data.csv').read().split())")
        self.assertEqual(out, "/workspace ['a,b', '1,2']\n")
        r, out = self.run_code("open('made.txt', 'w').write('kbox'); print('ok')")
        self.assertEqual(out, "ok\n")
        with open(os.path.join(self.work, "made.txt")) as f:
            self.assertEqual(f.read(), "kbox")

    def test_row55_sandbox_holds_through_the_kernelspec(self):
        r, out = self.run_code(
            "import os, socket\n"
            "ifs = sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:])\n"
            "print(ifs, os.path.exists(%r))" % os.environ["KBOX_HOME"])
        self.assertEqual(out, "['lo'] False\n")

    def test_put_and_get_say_where_the_workspace_is(self):
        name = sessions()[0]
        for args in (("put", "-s", name, "-", "x.txt"), ("get", "-s", name, "data.csv", "-")):
            r = subprocess.run([KBOX, *args], input="x", capture_output=True, text=True,
                               check=False)
            self.assertEqual((r.returncode, r.stdout), (2, ""), r.stderr)
            self.assertEqual(r.stderr, f"kbox {args[0]}: session {name} is a Jupyter front "
                             f"end's kernel (kbox kernel): its workspace is "
                             f"{os.path.realpath(self.work)}, the directory the front end "
                             "started it in: copy files there\n")

    def test_control_socket_refuses_code(self):
        name = sessions()[0]
        r = subprocess.run([KBOX, "exec", "-s", name, "1+1"], capture_output=True,
                           text=True, check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("a Jupyter front end's kernel (kbox kernel)", r.stderr)

    def test_row55_front_end_forged_and_replayed_messages_dropped(self):
        """A message signed with another key, and a replay of a good one,
        sent to the relay's shell socket: no reply, both counted."""
        name = sessions()[0]
        before = status_of(name)["relay"]["dropped"]["front"]
        info = self.km.get_connection_info()
        ctx = zmq.Context.instance()
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(f"tcp://{info['ip']}:{info['shell_port']}")

        key = info["key"] if isinstance(info["key"], bytes) else info["key"].encode()

        def frames(key, msg_type, content):
            h = json.dumps({"msg_id": uuid.uuid4().hex, "msg_type": msg_type,
                            "session": "forger", "username": "x",
                            "date": "2026-01-01T00:00:00Z", "version": "5.3"}).encode()
            parts = [h, b"{}", b"{}", json.dumps(content).encode()]
            sig = hmac.new(key, b"".join(parts), hashlib.sha256).hexdigest().encode()
            return [b"<IDS|MSG>", sig] + parts
        sock.send_multipart(frames(b"not the key", "execute_request",
                                   {"code": "print('forged')", "silent": False,
                                    "store_history": False, "user_expressions": {},
                                    "allow_stdin": False, "stop_on_error": True}))
        good = frames(key, "kernel_info_request", {})
        sock.send_multipart(good)
        self.assertTrue(sock.poll(TIMEOUT * 1000))
        sock.recv_multipart()  # the good one's reply
        sock.send_multipart(good)  # the same again: a replay
        wait_until(lambda: status_of(name)["relay"]["dropped"]["front"] >= before + 2,
                   "two dropped messages counted")
        self.assertEqual(sock.poll(500), 0)  # (no reply to either)
        sock.close()


HOSTILE = r"""
import json, time
k = get_ipython().kernel
s = k.session
def parts(msg_type, content, header=None):
    h = header if header is not None else json.dumps(
        {"msg_id": "forged-%s" % time.time(), "msg_type": msg_type, "session": s.session,
         "username": "x", "date": "2026-01-01T00:00:00Z", "version": "5.3"}).encode()
    return [h, b"{}", b"{}", json.dumps(content).encode()]
def signed(p):
    return s.sign(p)
forged = parts("stream", {"name": "stdout", "text": "FORGED-BADSIG"})
k.iopub_socket.send_multipart([b"kbox-forged", b"<IDS|MSG>", b"0" * 64] + forged)
bad = parts("stream", {}, header=b"not json at all")
k.iopub_socket.send_multipart([b"kbox-forged", b"<IDS|MSG>", signed(bad)] + bad)
many = parts("stream", {"name": "stdout", "text": "FORGED-FRAMES"})
k.iopub_socket.send_multipart([b"kbox-forged", b"<IDS|MSG>", signed(many)] + many + [b"x"] * 2000)
reply = parts("execute_reply", {"status": "ok", "execution_count": 1, "user_expressions": {}})
# (to the relay, the one routing frame the kernel's shell ROUTER takes,
# without the front end's after it)
relay_id = k._parent_ident["shell"][0]
k.shell_stream.send_multipart([relay_id, b"<IDS|MSG>", signed(reply)] + reply)
print("sent")
"""


class Hostile(unittest.TestCase):
    """Threat row 55: code in the kernel forges messages to the front end,
    floods it; the relay drops what is not right, and stays bounded."""

    @classmethod
    def setUpClass(cls):
        cls.km, cls.kc = start_new_kernel(kernel_name="kbox-python3")
        (cls.name,) = sessions()

    @classmethod
    def tearDownClass(cls):
        cls.kc.stop_channels()
        cls.km.shutdown_kernel()

    def run_code(self, code):
        drain(self.kc)
        msg_id = self.kc.execute(code)
        seen = []
        while True:
            m = self.kc.get_iopub_msg(timeout=TIMEOUT)
            seen.append(m)
            if (m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "status"
                    and m["content"]["execution_state"] == "idle"):
                break
        return reply_to(self.kc, msg_id), seen

    def test_row55_relay_drops_forged_kernel_messages(self):
        before = status_of(self.name)["relay"]["dropped"]["kernel"]
        r, seen = self.run_code(HOSTILE)
        self.assertEqual(r["content"]["status"], "ok")
        texts = "".join(m["content"].get("text", "") for m in seen if m["msg_type"] == "stream")
        self.assertEqual(texts, "sent\n")
        # (the forged reply went to no front end: it had no routing frame)
        wait_until(lambda: status_of(self.name)["relay"]["dropped"]["kernel"] >= before + 4,
                   "four messages of the kernel dropped")
        self.assertEqual(status_of(self.name)["relay"]["dropped"]["kernel"], before + 4)
        r, _ = self.run_code("print(1)")
        self.assertEqual(r["content"]["status"], "ok")

    def test_row55_a_70_mib_output_passes_and_the_kernel_goes_on(self):
        """Over libzmq's 64 MiB of a client's (which would cut the relay's
        connection for good): the relay passes what a plain kernel would."""
        r, seen = self.run_code("print('A' * (70 << 20), end='')")
        self.assertEqual(r["content"]["status"], "ok")
        got = sum(len(m["content"]["text"]) for m in seen if m["msg_type"] == "stream")
        self.assertEqual(got, 70 << 20)
        r, seen = self.run_code("print(6 * 7)")
        self.assertEqual([m["content"]["text"] for m in seen if m["msg_type"] == "stream"],
                         ["42\n"])

    def test_row55_relay_bounded_under_a_flood(self):
        """100000 output messages of 4 KiB sent as fast as the kernel can:
        the supervisor's resident memory stays under its bound (384 MiB)
        and the kernel answers after."""
        sup = status_of(self.name)["pid"]
        drain(self.kc)
        msg_id = self.kc.execute(
            "k = get_ipython().kernel\n"
            "for i in range(100000):\n"
            "    k.session.send(k.iopub_socket, 'stream', {'name': 'stdout', 'text': 'x' * 4096},"
            " parent=k.get_parent())\n")
        # (a front end's iopub subscriber may lose some of it, its idle
        # status too, as with any kernel: the reply says it ended)
        self.assertEqual(reply_to(self.kc, msg_id)["content"]["status"], "ok")
        with open(f"/proc/{sup}/status") as f:
            hwm = [int(l.split()[1]) for l in f if l.startswith("VmHWM:")][0]
        self.assertLess(hwm * 1024, 384 << 20)
        # what the kernel publishes reaches the front end again once the
        # flood is through (what it published meanwhile may be lost:
        # iopub_flows), and a cell's output with it
        iopub_flows(self.kc)
        r, seen = self.run_code("print(6 * 7)")
        self.assertEqual(r["content"]["status"], "ok")
        self.assertEqual([m["content"]["text"] for m in seen if m["msg_type"] == "stream"],
                         ["42\n"])


class Lifecycle(unittest.TestCase):
    """Restart and shutdown, as KernelManager does them."""

    def test_message_mode_interrupt(self):
        km, kc = start_new_kernel(kernel_name="kbox-python3-message")
        try:
            msg_id = kc.execute(SLEEPER)
            wait_sleeping(kc, msg_id)
            km.interrupt_kernel()  # interrupt_request on control
            r = reply_to(kc, msg_id)
            self.assertEqual(r["content"]["ename"], "KeyboardInterrupt")
        finally:
            kc.stop_channels()
            km.shutdown_kernel()

    def test_restart_and_shutdown_leave_nothing(self):
        km, kc = start_new_kernel(kernel_name="kbox-python3")
        try:
            (name,) = sessions()
            old = status_of(name)
            kc.execute_interactive("kept = 42", timeout=TIMEOUT)
            km.restart_kernel()  # shutdown_request(restart), then a new kbox kernel
            kc.wait_for_ready(timeout=60)
            new = status_of(name)
            self.assertNotEqual(old["pid"], new["pid"])
            self.assertFalse(pid_alive(old["pid"]))
            self.assertFalse(pid_alive(old["kernel_pid"]))
            outs = []
            r = kc.execute_interactive("print('kept' in dir())", timeout=TIMEOUT,
                                       output_hook=lambda m: outs.append(m))
            self.assertEqual([m["content"]["text"] for m in outs if m["msg_type"] == "stream"],
                             ["False\n"])
        finally:
            kc.stop_channels()
            km.shutdown_kernel()
        self.assertEqual(sessions(), [])
        self.assertFalse(pid_alive(new["pid"]))
        self.assertFalse(pid_alive(new["kernel_pid"]))

    def test_killed_leaves_nothing(self):
        km, kc = start_new_kernel(kernel_name="kbox-python3")
        (name,) = sessions()
        st = status_of(name)
        kc.stop_channels()
        km.shutdown_kernel(now=True)  # SIGKILL to kbox kernel's process group
        wait_until(lambda: not pid_alive(st["pid"]), "the supervisor ended")
        self.assertFalse(pid_alive(st["kernel_pid"]))
        self.assertEqual(sessions(), [])


    def test_front_end_gone_ends_the_kernel(self):
        """A front end that ends without shutting its kernel down
        (JPY_PARENT_PID, as ipykernel watches it)."""
        code = ("import os, sys\n"
                "from jupyter_client.manager import start_new_kernel\n"
                "km, kc = start_new_kernel(kernel_name='kbox-python3')\n"
                "print(km.provisioner.process.pid, flush=True)\n"
                "os._exit(0)\n")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120, check=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        kernel = int(r.stdout.split()[-1])
        wait_until(lambda: sessions() == [] and not pid_alive(kernel),
                   "kbox kernel and its session gone with the front end")


    def test_heartbeat_answered_while_the_kernel_lives(self):
        km, kc = start_new_kernel(kernel_name="kbox-python3")
        try:
            kc.hb_channel.time_to_dead = 0.5
            kc.hb_channel.unpause()
            wait_until(lambda: kc.hb_channel.is_beating(), "the heartbeat answered")
            self.assertTrue(kc.is_alive())
        finally:
            kc.stop_channels()
            km.shutdown_kernel()

    def test_kernel_that_dies_ends_kbox_kernel(self):
        """The front end sees its kernel die (and restarts it itself)."""
        km, kc = start_new_kernel(kernel_name="kbox-python3")
        try:
            kc.execute("import os; os._exit(3)")
            wait_until(lambda: not km.is_alive(), "kbox kernel ended with its kernel")
            wait_until(lambda: sessions() == [], "the session gone")
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)

    def workspace_of(self, name, cwd, conn_file=None):
        km = KernelManager(kernel_name=name)
        if conn_file:
            km.connection_file = conn_file
        errf = tempfile.TemporaryFile(dir=os.environ["BASE"])
        km.start_kernel(cwd=cwd, stderr=errf)
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=60)
            outs = []
            kc.execute_interactive(
                "import os\n"
                "ls = sorted(os.listdir('.'))\n"
                "try:\n"
                "    open('w.txt', 'w').write('x'); w = 'writable'\n"
                "except OSError as e:\n"
                "    w = e.strerror\n"
                "print(ls, w)", timeout=TIMEOUT,
                output_hook=outs.append)
            out = "".join(m["content"]["text"] for m in outs if m["msg_type"] == "stream")
        finally:
            kc.stop_channels()
            km.shutdown_kernel()
        errf.seek(0)
        err = errf.read().decode()
        errf.close()
        return out, err

    def test_workspace_read_only_and_empty(self):
        d = tempfile.mkdtemp(prefix="kbox-ws-", dir=os.environ["BASE"])
        os.chmod(d, 0o777)
        with open(os.path.join(d, "data.csv"), "w") as f:
            f.write("a\n")
        out, _ = self.workspace_of("kbox-python3-ro", d)
        self.assertEqual(out, "['data.csv'] Read-only file system\n")
        self.assertFalse(os.path.exists(os.path.join(d, "w.txt")))
        out, _ = self.workspace_of("kbox-python3-empty", d)
        self.assertEqual(out, "[] writable\n")
        self.assertFalse(os.path.exists(os.path.join(d, "w.txt")))

    def test_row55_a_workspace_holding_the_connection_file_is_not_bound(self):
        """The kernel would read the front end's key there."""
        d = tempfile.mkdtemp(prefix="kbox-ws-", dir=os.environ["BASE"])
        os.chmod(d, 0o777)
        os.mkdir(os.path.join(d, "runtime"))
        out, err = self.workspace_of("kbox-python3", d,
                                     os.path.join(d, "runtime", "kernel-in.json"))
        self.assertEqual(out, "[] writable\n")
        self.assertIn(f"kbox kernel: warning: the current directory {os.path.realpath(d)} holds "
                      "the front end's connection file or sockets, which the kernel must not "
                      "reach: it starts in an empty workspace\n", err)

    def test_a_home_is_no_workspace_and_that_is_said(self):
        home = os.path.expanduser("~")
        out, err = self.workspace_of("kbox-python3", home)
        self.assertEqual(out, "[] writable\n")
        self.assertIn(f"kbox kernel: warning: the current directory cannot be the workspace: "
                      f"{os.path.realpath(home)}", err)
        self.assertIn("the kernel starts in an empty workspace", err)


class CommandLine(unittest.TestCase):
    """Bad input to kbox kernel and kbox kernelspec: one line, the right
    exit status, nothing left behind."""

    def kbox(self, *args):
        r = subprocess.run([KBOX, *args], capture_output=True, text=True, timeout=120,
                           check=False)
        return r.returncode, r.stdout, r.stderr

    def test_kernel_bad_connection_files(self):
        d = tempfile.mkdtemp(prefix="kbox-cf-", dir=os.environ["BASE"])
        cases = {"list.json": ("[1]", "not a connection file: not a JSON object"),
                 "text.json": ("{", "not a connection file: "),
                 "nokey.json": (json.dumps({"transport": "tcp", "ip": "127.0.0.1",
                                            "shell_port": 1, "iopub_port": 2, "stdin_port": 3,
                                            "control_port": 4, "hb_port": 5, "key": ""}),
                                "not a connection file: no valid key (a string, not empty: "
                                "kbox relays only signed messages)"),
                 "port.json": (json.dumps({"transport": "tcp", "ip": "127.0.0.1",
                                           "shell_port": 1, "iopub_port": 70000,
                                           "stdin_port": 3, "control_port": 4, "hb_port": 5,
                                           "key": "k"}),
                               "not a connection file: no valid iopub_port (a port, 1 to "
                               "65535)"),
                 "md5.json": (json.dumps({"transport": "tcp", "ip": "127.0.0.1",
                                          "shell_port": 1, "iopub_port": 2, "stdin_port": 3,
                                          "control_port": 4, "hb_port": 5, "key": "k",
                                          "signature_scheme": "hmac-md5"}),
                              "not a connection file: no valid signature_scheme (kbox signs "
                              "with hmac-sha256)\n"),
                 "twice.json": (json.dumps({"transport": "tcp", "ip": "127.0.0.1",
                                            "shell_port": 1, "iopub_port": 2, "stdin_port": 3,
                                            "control_port": 4, "hb_port": 1, "key": "k"}),
                                "not a connection file: no valid set of ports (two channels "
                                "have one port)\n")}
        for name, (text, why) in cases.items():
            path = os.path.join(d, name)
            with open(path, "w") as f:
                f.write(text)
            rc, out, err = self.kbox("kernel", "--connection-file", path)
            self.assertEqual((rc, out), (2, ""), name)
            self.assertTrue(err.startswith(f"kbox kernel: --connection-file {path}: {why}"),
                            err)
            self.assertEqual(err.count("\n"), 1, err)
        rc, _, err = self.kbox("kernel")
        self.assertEqual((rc, err), (2, "kbox kernel: no connection file: give "
                                        "--connection-file FILE (a Jupyter front end does, "
                                        "from the kernelspec's {connection_file})\n"))
        rc, _, err = self.kbox("kernel", "-f", d)
        self.assertEqual((rc, err), (2, f"kbox kernel: --connection-file {d}: not a "
                                        "connection file (not a regular file)\n"))
        rc, _, err = self.kbox("kernel", "-f", os.path.join(d, "list.json"), "--workspace", "x")
        self.assertEqual((rc, err), (2, 'kbox kernel: invalid --workspace "x": expected cwd, '
                                        "ro or empty\n"))
        self.assertEqual(sessions(), [])

    def test_kernelspec_install_bad_input(self):
        base = os.environ["BASE"]
        for args, err in [
                ((), "kbox kernelspec: say what to do: kbox kernelspec install [OPTIONS] "
                     "[-- KERNEL-OPTIONS]\n"),
                (("remove",), 'kbox kernelspec: unknown action "remove": the one action is '
                              "install\n"),
                (("install", "--user", "--prefix", base),
                 "kbox kernelspec: --user and --prefix name two places: give one\n"),
                (("install", "--prefix", base, "--name", "a b"),
                 'kbox kernelspec: invalid --name "a b": a kernelspec\'s name is 1 to 64 '
                 "letters, digits, '.', '_' or '-', not . or ..\n"),
                (("install", "--prefix", base, "--name", ".."),
                 'kbox kernelspec: invalid --name "..": a kernelspec\'s name is 1 to 64 '
                 "letters, digits, '.', '_' or '-', not . or ..\n"),
                (("install", "--prefix", ""), "kbox kernelspec: --prefix is empty: name a "
                                              "directory\n"),
                (("install", "--prefix", base, "--", "--image", "x"),
                 "kbox kernelspec: --image is for the backend docker: give -b docker too\n"),
                (("install", "--prefix", base, "--", "-s", "x"),
                 "kbox kernelspec: -s names one session: each kernel a front end starts gets "
                 "a session of its own (jupyter-ID); leave it out\n"),
                (("install", "--prefix", base, "-b", "none", "--", "-b", "docker"),
                 "kbox kernelspec: give the backend as kbox kernelspec install's -b, before "
                 "--\n"),
                (("install", "--prefix", base, "--interrupt-mode", "x"),
                 'kbox kernelspec: invalid --interrupt-mode "x": expected signal or message\n'),
                (("install", "--prefix", base, "-b", "x"),
                 'kbox kernelspec: invalid --backend "x": expected bwrap, docker or none\n'),
                (("install", "--prefix", base, "--", "--connection-file", "x"),
                 "kbox kernelspec: --connection-file is the front end's to give: leave it "
                 "out\n"),
                (("install", "--prefix", base, "--", "-k", "kbox-python3"),
                 "kbox kernelspec: kernelspec kbox-python3 is one of kbox's own: give -k the "
                 "kernelspec to run in the sandbox, such as python3\n")]:
            rc, out, e = self.kbox("kernelspec", *args)
            self.assertEqual((rc, out, e), (2, "", err), args)

    def test_a_session_refuses_kboxs_own_kernelspec(self):
        rc, _, err = self.kbox("start", "-s", "own", "-k", "kbox-python3")
        self.assertEqual(rc, 5, err)
        self.assertEqual(err, "kbox start: session own: kernelspec kbox-python3 is one of "
                              "kbox's own (it runs kbox kernel, for Jupyter front ends): give "
                              "the kernelspec it runs, such as python3\n")
        self.assertEqual(sessions(), [])


class FrontEnds(unittest.TestCase):
    """Real front ends, as their users run them."""

    CELLS = ["import pandas as pd\ndf = pd.DataFrame({'x': [1, 2, 3], 'y': [2, 4, 8]})\ndf",
             "print(df.y.sum())",
             "%matplotlib inline\nimport matplotlib.pyplot as plt\n"
             "ax = df.plot(x='x', y='y')\nplt.show()",
             "raise ValueError('bad cell')",
             "import sys; print('to stderr', file=sys.stderr); 6 * 7"]

    def test_nbconvert_outputs_equal_plain_python3s(self):
        """jupyter nbconvert --execute through kbox-python3 and through the
        plain python3 kernel: the same outputs, cell by cell (the chart's
        PNG byte for byte)."""
        import nbformat
        d = tempfile.mkdtemp(prefix="kbox-nb-", dir=os.environ["BASE"])
        os.chmod(d, 0o777)
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(c) for c in self.CELLS]
        nbformat.write(nb, os.path.join(d, "nb.ipynb"))
        out = {}
        for k in ("python3", "kbox-python3"):
            r = subprocess.run(["jupyter", "nbconvert", "--to", "notebook", "--execute",
                                "--allow-errors", f"--ExecutePreprocessor.kernel_name={k}",
                                "--output", f"out-{k}.ipynb", "nb.ipynb"], cwd=d,
                               capture_output=True, text=True, timeout=300, check=False)
            self.assertEqual(r.returncode, 0, r.stderr)
            out[k] = nbformat.read(os.path.join(d, f"out-{k}.ipynb"), 4)
        a, b = out["python3"].cells, out["kbox-python3"].cells
        self.assertEqual(len(a), len(self.CELLS))
        self.assertEqual([[o.output_type for o in c.outputs] for c in b],
                         [["execute_result"], ["stream"], ["display_data"], ["error"],
                          ["stream", "execute_result"]])
        self.assertIn("image/png", b[2].outputs[0].data)
        self.assertEqual(b[3].outputs[0].ename, "ValueError")
        for i, (x, y) in enumerate(zip(a, b)):
            self.assertEqual(x.outputs, y.outputs, f"cell {i}")
            self.assertEqual(x.execution_count, y.execution_count, f"cell {i}")
        self.assertEqual(sessions(), [])

    def test_jupyter_console_through_a_pipe(self):
        p = subprocess.Popen(["jupyter", "console", "--kernel", "kbox-python3",
                              "--simple-prompt"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = p.communicate("print(6 * 7)\nimport os; os.getcwd()\n", timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            self.fail(f"jupyter console hangs: {out!r} {err!r}")
        r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("In [1]: 42\n", r.stdout)
        self.assertIn("Out[2]: '/workspace'\n", r.stdout)
        wait_until(lambda: sessions() == [], "the console's session gone")


def main():
    pats = [p for p in os.environ.get("KBOX_TEST_RUN", "").split(",") if p]
    loader = unittest.TestLoader()
    classes = [(cls, loader.getTestCaseNames(cls))
               for cls in (Conformance, Beyond, Hostile, Lifecycle, CommandLine, FrontEnds)]
    print(f"1..{sum(len(names) for _, names in classes)}", flush=True)
    failed = 0
    n = 0
    for cls, names in classes:
        # (in order: a class's selected tests run together, sharing its
        # setUpClass, then each test of the class is reported by number)
        plan = []
        for name in names:
            n += 1
            label = f"{cls.__name__}.{name}"

            def hit(p, n=n, name=name, label=label):
                return p == str(n) or fnmatch.fnmatch(name, p) or fnmatch.fnmatch(label, p)
            picked = not pats or (any(hit(p) for p in pats if not p.startswith("!"))
                                  and not any(hit(p[1:]) for p in pats if p.startswith("!")))
            plan.append((n, name, label, picked))
        chosen = [name for _, name, _, picked in plan if picked]
        bad, skipped, setup_error = {}, {}, []
        if chosen:
            result = unittest.TestResult()
            unittest.TestSuite(cls(name) for name in chosen).run(result)
            bad = {t.id().split(".")[-1]: tb for t, tb in result.failures + result.errors}
            skipped = {t.id().split(".")[-1]: why for t, why in result.skipped}
            setup_error = [tb for t, tb in result.errors if "setUpClass" in str(t)]
        for n_, name, label, picked in plan:
            if not picked:
                print(f"ok {n_} - {label} # SKIP not selected by KBOX_TEST_RUN", flush=True)
            elif setup_error or name in bad:
                failed += 1
                print(f"not ok {n_} - {label}", flush=True)
                tb = setup_error[0] if setup_error else bad[name]
                print("# " + tb.replace("\n", "\n# "), flush=True)
            elif name in skipped:
                print(f"ok {n_} - {label} # SKIP {skipped[name] or 'does not apply'}",
                      flush=True)
            else:
                print(f"ok {n_} - {label}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
