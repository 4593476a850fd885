"""bench/kconn.py - a connection file for the kernel of a running kbox
session, for a peer client (jupyter_client, bench_exec) measured beside
kbox on the same kernel.

kbox writes no connection file the host can read (a sandboxed kernel's is
in a tmpfs of its sandbox, the backend none's a descriptor it inherits:
kbox(7), The protocol), so the connection is asked of the kernel itself,
with one `kbox exec`: its key, and its sockets.  Those are in no
directory of the host's either (bwrap: the sandbox's /run/kernel; none:
a directory outside every state directory, the kernel's descriptor 3):
they are reached through the kernel's process, /proc/PID/root or
/proc/PID/fd/3, PID the kernel_pid of `kbox status --json`.
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


def kernel_pid(kbox, env, session):
    """The host pid of SESSION's kernel (kbox status --json)."""
    p = subprocess.run([kbox, "status", "-s", session, "--json"], env=env,
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError("kbox status: exit %d: %s" % (p.returncode, p.stderr.strip()))
    return json.loads(p.stdout)["kernel_pid"]


def host_dir(pid, inside):
    """The directory INSIDE (as the kernel PID names it) as the host reaches it."""
    if inside.startswith("/proc/self/"):
        return "/proc/%d/%s" % (pid, inside[len("/proc/self/"):])
    return "/proc/%d/root%s" % (pid, inside)


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
    j["ip"] = os.path.join(host_dir(kernel_pid(kbox, env, session), os.path.dirname(j["ip"])),
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


def socket_binds(kbox, env, session):
    """The bind times (time.time()) of the kernel's ipc sockets (bwrap's
    in the sandbox's /run/kernel, none's in the directory of its descriptor
    3): a socket's inode is made by its bind, so its mtime is the time of
    the bind.  [] when there are none."""
    pid = kernel_pid(kbox, env, session)
    d = host_dir(pid, "/proc/self/fd/3")
    if not os.path.isdir(d):
        d = host_dir(pid, "/run/kernel")
    binds = []
    try:
        for n in os.listdir(d):
            st = os.lstat(os.path.join(d, n))
            if stat.S_ISSOCK(st.st_mode):
                binds.append(st.st_mtime)
    except OSError:
        return []
    return binds
