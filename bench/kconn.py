"""bench/kconn.py - a connection file for the kernel of a running kbox
session, for a peer client (jupyter_client, bench_exec) measured beside
kbox on the same kernel.

kbox writes no connection file the host can read once a kernel runs (a
sandboxed kernel's is in a tmpfs of its sandbox, and the backend none's is
removed once the kernel has answered: kbox(7), The protocol), so the
connection is asked of the kernel itself, with one `kbox exec`: its key,
and its sockets, which are in the session's run/sandbox whatever the
kernel calls that directory (/run/kbox in bwrap, /proc/self/fd/3 with
the backend none).
"""
import json
import os
import stat
import subprocess

ASK = r'''import json
from ipykernel.kernelapp import IPKernelApp
a = IPKernelApp.instance()
j = {c + "_port": getattr(a, c + "_port") for c in ("shell", "iopub", "stdin", "control", "hb")}
j.update(key=a.session.key.decode(), signature_scheme=a.session.signature_scheme,
         transport=a.transport, ip=a.ip)
print(json.dumps(j))'''


def state_home(env):
    """The state directory kbox uses in ENV (KBOX_HOME, as the benches set it)."""
    return env["KBOX_HOME"]


def connection(kbox, env, session):
    """The connection of SESSION's kernel as the host reaches it (a dict)."""
    p = subprocess.run([kbox, "exec", "-s", session, ASK], env=env, capture_output=True,
                       text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError("kbox exec (asking the kernel its connection): exit %d: %s"
                           % (p.returncode, p.stderr.strip()))
    j = json.loads(p.stdout.strip().splitlines()[-1])
    if j["transport"] != "ipc":
        raise RuntimeError("the kernel's transport is %s, not ipc" % j["transport"])
    j["ip"] = os.path.join(state_home(env), "sessions", session, "run", "sandbox",
                           os.path.basename(j["ip"]))
    j["kernel_name"] = ""
    return j


def write(kbox, env, session, path):
    """Write the connection of SESSION's kernel to PATH (mode 0600); PATH."""
    j = connection(kbox, env, session)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(j, f)
    return path


def socket_binds(env, session):
    """The bind times (time.time()) of the kernel's ipc sockets, in the
    session's run/sandbox: a socket's inode is made by its bind, so its
    mtime is the time of the bind.  [] when there are none."""
    d = os.path.join(state_home(env), "sessions", session, "run", "sandbox")
    binds = []
    try:
        for n in os.listdir(d):
            st = os.lstat(os.path.join(d, n))
            if stat.S_ISSOCK(st.st_mode):
                binds.append(st.st_mtime)
    except OSError:
        return []
    return binds
