#!/bin/bash
# tests/security/isolation.sh — threats.md rows 5, 6, 7, 8, 9, 10, 11, 13,
# 14, 19, 33, 34, 44, 51 and 52 against the bwrap sandbox: the network, terminal
# injection, /proc, secrets of the caller and of other sessions, ptrace and
# kill(-1), orphans, the death of the supervisor, leaked fds, privilege,
# one session's key used on another, the system calls Docker's seccomp
# profile refuses, what of the host the kernel can read, a session's
# event log kept bounded, and the kernel's control bytes never printed by
# kbox logs.  Each test is named after its row.  TAP.
#
# Environment (set by `make check`): top_builddir (or KBOX, the kbox to
# test), KERNEL_PYTHON (the host's Python, with jupyter_client; default
# /usr/bin/python3).  Run by hand:
#   KBOX=/path/to/build/kbox sh tests/security/isolation.sh
# When `kbox doctor` says the sandbox cannot be made here every test is
# skipped with its reason.
#
# Two sessions: "a", started with a fake LLM key in its environment and
# HOME pointing at a directory holding a fake ~/.ssh/id_rsa, and "b".  No
# address outside the machine is contacted: the network tests look at the
# sandbox's interfaces and routes, resolve a name (no resolver is
# configured, so nothing is sent) and connect to a listener the test runs
# on the host's 127.0.0.1.  Nothing here writes a sysctl: the sysctl test
# only opens them.
# shellcheck disable=SC2016,SC2034 # eval strings expand later, using these variables
set -u
# bash is needed (`sh tests/security/X.sh` runs it with bash)
[ -n "${BASH_VERSION-}" ] || exec bash "$0" "$@"

# shellcheck source=tests/lib.sh
ROOT_TAG=ksi
. "$(dirname "$0")/../lib.sh"

# a supervisor killed by row 11 leaves its empty cgroups behind
cleanup_more() {
	# shellcheck disable=SC2086 # a list of directories
	[ -z "${CG_B-}" ] || rmdir $CG_B 2>/dev/null
}

# ---- can the sandbox be made here? ----

cd "$W" || exit 1
sandbox_or_skip

# the secrets of the caller of `kbox start -s a`
CANARY=canary-$$-$RANDOM$RANDOM
FAKEHOME=$ROOT/home
mkdir -m 700 "$FAKEHOME" "$FAKEHOME/.ssh"
printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\n%s\n' "$CANARY" >"$FAKEHOME/.ssh/id_rsa"
if [ -z "$SKIPPING" ]; then
	timeout -k 5 90 env OPENAI_API_KEY="$CANARY" HOME="$FAKEHOME" "$KBOX" start -s a \
		>"$W/start_a.out" 2>"$W/start_a.err" </dev/null
	echo $? >"$W/start_a.rc"
fi
kx start -s b
keep start_b
DIAG="start_a start_b"
check "two_sandboxed_sessions_start" eval '
	rc_is start_a 0 && rc_is start_b 0 && eq "$(status_field a backend)" bwrap &&
	eq "$(status_field b backend)" bwrap'
[ -n "$SKIPPING" ] || { [ -s "$S/a/supervisor.pid" ] && [ -s "$S/b/supervisor.pid" ]; } ||
	SKIPPING="the sessions did not start"
SUP_A=$(cat "$S/a/supervisor.pid" 2>/dev/null)
SUP_B=$(cat "$S/b/supervisor.pid" 2>/dev/null)
KPID_A=$(status_field a kernel_pid)
INIT_A=$(ppid "$KPID_A")

# ---- row 13: the fds of the kernel (first, while the kernel is fresh) ----

DIAG=fds
pyx a <<EOF
import errno, os, subprocess
listed = sorted(int(f) for f in os.listdir("/proc/self/fd"))
targets = {}
for fd in listed:
    try:
        targets[fd] = os.readlink("/proc/self/fd/%d" % fd)
    except OSError:
        pass  # the listing's own descriptor, closed again
def documented(t):
    return (t == "/dev/null"
            or t.startswith(("pipe:[", "socket:[", "anon_inode:"))
            # IPython's history, in the sandbox's /tmp (or home, with --home-config on)
            or t.startswith(("/tmp/.ipython/", "/home/kbox/.ipython/")))
print("fd0", targets.get(0))
print("undocumented", sorted((fd, t) for fd, t in targets.items() if not documented(t)))
# every number from 3 to 1024, as a probe would: closed (EBADF), or the
# kernel's own (its threads may open one meanwhile: judged by its target)
probed = []
for fd in range(3, 1025):
    try:
        os.fstat(fd)
    except OSError as e:
        if e.errno != errno.EBADF:
            probed.append((fd, errno.errorcode[e.errno]))
        continue
    try:
        t = os.readlink("/proc/self/fd/%d" % fd)
    except OSError:
        continue  # closed again since
    if not documented(t):
        probed.append((fd, t))
print("probed_undocumented", probed)
child = subprocess.run(["ls", "/proc/self/fd"], capture_output=True, text=True, close_fds=False)
print("child_fds", " ".join(sorted(child.stdout.split(), key=int)))
EOF
keep fds
check "row13_the_kernels_fd_0_is_dev_null" eval 'rc_is fds 0 && eq "$(val fds fd0)" /dev/null'
check "row13_the_kernel_holds_no_host_file_or_directory" eval '
	rc_is fds 0 && eq "$(val fds undocumented)" "[]"'
check "row13_fds_3_to_1024_are_closed_or_the_kernels_own" eval '
	rc_is fds 0 && eq "$(val fds probed_undocumented)" "[]"'
check "row13_a_subprocess_of_the_kernel_inherits_only_fds_0_to_2" eval '
	rc_is fds 0 && eq "$(val fds child_fds)" "0 1 2 3"'

# ---- row 5: the network ----

# a listener on the host's 127.0.0.1, on a free port
if [ -z "$SKIPPING" ]; then
	"$PY" -c '
import os, socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    c, _ = s.accept()
    c.sendall(b"host\n")
    c.close()
' "$W/port" &
	BG_PIDS="$BG_PIDS $!"
	wait_for test -s "$W/port"
fi
PORT=$(cat "$W/port" 2>/dev/null)
DIAG=
check "row05_the_hosts_listener_answers_on_the_host" eval '
	eq "$("$PY" -c "
import socket, sys
c = socket.create_connection((\"127.0.0.1\", int(sys.argv[1])), 3)
print(c.recv(16).decode().strip())
" "$PORT" 2>&1)" host'
DIAG=net
pyx a <<EOF
import errno, os, socket
print("interfaces", socket.if_nameindex())
print("ipv4_routes", len(open("/proc/net/route").read().splitlines()) - 1)
print("ipv6_route_devices", sorted(set(l.split()[-1] for l in open("/proc/net/ipv6_route"))))
s = socket.socket()
s.settimeout(5)
# the namespace's own listeners on the port (ipykernel binds a random
# 127.0.0.1 port for its subprocesses' output): a connection to one of
# those is not one to the host's
own = [l for l in open("/proc/net/tcp").read().splitlines()[1:]
       if l.split()[1].endswith(":%04X" % $PORT) and l.split()[3] == "0A"]
try:
    s.connect(("127.0.0.1", $PORT))
    got = s.recv(16)
    if got.startswith(b"host"):
        print("host_listener", "reached_the_host", got)
    elif own:
        print("host_listener", "ECONNREFUSED_or_own")
    else:
        print("host_listener", "connected_to_an_unknown_listener", got)
except OSError as e:
    print("host_listener", "ECONNREFUSED_or_own" if e.errno == errno.ECONNREFUSED
          else errno.errorcode.get(e.errno, e))
print("resolv_conf", os.path.exists("/etc/resolv.conf"))
try:
    print("dns", socket.getaddrinfo("example.com", 80))
except socket.gaierror as e:
    print("dns", {socket.EAI_NONAME: "EAI_NONAME", socket.EAI_AGAIN: "EAI_AGAIN"}.get(e.errno, e.errno))
EOF
keep net
check "row05_only_the_loopback_interface_exists" eval '
	rc_is net 0 && eq "$(val net interfaces)" "[(1, '"'lo'"')]"'
check "row05_no_ipv4_route_and_ipv6_routes_only_on_lo" eval '
	rc_is net 0 && eq "$(val net ipv4_routes)" 0 &&
	eq "$(val net ipv6_route_devices)" "['"'lo'"']"'
check "row05_the_hosts_127_0_0_1_listener_is_refused_from_inside" eval '
	rc_is net 0 && eq "$(val net host_listener)" ECONNREFUSED_or_own'
check "row05_a_name_does_not_resolve_no_resolver_is_configured" eval '
	rc_is net 0 && eq "$(val net resolv_conf)" False && eq "$(val net dns)" EAI_NONAME'

# ---- row 6: pushing input into a terminal ----

# In a child that made a pty its controlling terminal, where TIOCSTI would
# otherwise succeed (dev.tty.legacy_tiocsti permitting); TIOCGWINSZ on the
# same pty shows the descriptor works.
DIAG="tty"
pyx a <<'EOF'
import subprocess, sys
probe = r'''
import ctypes, errno, fcntl, os, termios
m, s = os.openpty()
os.setsid()
fcntl.ioctl(s, termios.TIOCSCTTY, 0)
libc = ctypes.CDLL(None, use_errno=True)
libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_char_p]
def py(req, arg):
    try:
        fcntl.ioctl(s, req, arg)
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
def raw(req, arg):
    return "ok" if libc.ioctl(s, req, arg) == 0 else errno.errorcode[ctypes.get_errno()]
print("TIOCGWINSZ", py(termios.TIOCGWINSZ, b"\0" * 8))
print("TIOCSTI", py(termios.TIOCSTI, b"x"))
print("TIOCSTI_1_32", raw(termios.TIOCSTI | (1 << 32), b"y"))
print("TIOCLINUX", raw(0x541C, b"\x0b"))
os.set_blocking(m, False)
try:
    print("injected", os.read(m, 64))
except BlockingIOError:
    print("injected", b"")
'''
r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
print(r.stdout + r.stderr, end="")
EOF
keep tty
check "row06_TIOCGWINSZ_on_the_pty_succeeds" eval 'rc_is tty 0 && eq "$(val tty TIOCGWINSZ)" ok'
check "row06_TIOCSTI_is_EPERM" eval 'rc_is tty 0 && eq "$(val tty TIOCSTI)" EPERM'
check "row06_TIOCSTI_with_bit_32_set_is_EPERM" eval 'rc_is tty 0 && eq "$(val tty TIOCSTI_1_32)" EPERM'
check "row06_TIOCLINUX_is_EPERM" eval 'rc_is tty 0 && eq "$(val tty TIOCLINUX)" EPERM'
check "row06_nothing_reached_the_terminal" eval 'rc_is tty 0 && eq "$(val tty injected)" "b'"''"'"'

# ---- row 7: /proc ----

DIAG=proc
pyx a <<'EOF'
import errno, hashlib, os, subprocess
pids = lambda: sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print("pids", pids())
child = subprocess.Popen(["sleep", "30"])
print("pids_with_child", pids(), child.pid)
child.kill()
child.wait()
print("pid1_cmdline_sha256", hashlib.sha256(open("/proc/1/cmdline", "rb").read()).hexdigest())
print("pid1_environ", sorted(v.split(b"=")[0].decode() for v in open("/proc/1/environ", "rb").read().split(b"\0") if v))
try:
    open("/proc/kcore", "rb").read(1)
    print("kcore", "readable")
except OSError as e:
    print("kcore", errno.errorcode[e.errno])
masked = []
for f in ("kpageflags", "kpagecount", "slabinfo", "vmallocinfo", "timer_list", "kallsyms"):
    try:
        open("/proc/" + f, "rb").read(1)
        masked.append(f + " readable")
    except OSError as e:
        masked.append(f + " " + errno.errorcode[e.errno])
print("root_only_proc_files", " ".join(masked))
print("hostname", open("/proc/sys/kernel/hostname").read().strip())
writable = []
for root, dirs, files in os.walk("/proc/sys"):
    for f in files:
        try:
            os.close(os.open(os.path.join(root, f), os.O_WRONLY))  # opened, never written
            writable.append(os.path.join(root, f))
        except OSError:
            pass
print("writable_sysctls", len(writable), writable[:5])
EOF
keep proc
check "row07_only_the_sandboxs_pids_are_visible" eval '
	rc_is proc 0 && eq "$(val proc pids)" "[1, 2]" &&
	set -- $(val proc pids_with_child | tr -d "[],") && eq "$*" "1 2 ${3-} ${3-}"'
check "row07_pid_1_is_bwraps_init_not_the_hosts_init" eval '
	rc_is proc 0 && say "init: host pid $INIT_A" &&
	eq "$(val proc pid1_cmdline_sha256)" "$(sha256sum <"/proc/$INIT_A/cmdline" | cut -d" " -f1)" &&
	ne "$(val proc pid1_cmdline_sha256)" "$(sha256sum </proc/1/cmdline | cut -d" " -f1)"'
check "row07_pid_1s_environ_is_the_sandboxs_cleared_one" eval '
	rc_is proc 0 &&
	eq "$(val proc pid1_environ)" "['"'HOME', 'IPYTHONDIR', 'JPY_PARENT_PID', 'JUPYTER_CONFIG_DIR', 'LANG', 'PATH', 'PYTHONNOUSERSITE', 'PYTHONSAFEPATH', 'R_ENVIRON_USER', 'R_LIBS_USER', 'R_PROFILE_USER', 'XDG_CONFIG_HOME'"']"'
check "row07_proc_kcore_cannot_be_read" eval '
	rc_is proc 0 && one_of "$(val proc kcore)" ENOENT EACCES EPERM'
# what only root may read of the host's memory and kernel is masked (each
# of these exists on this host: the mask needs it to)
check "row07_root_only_proc_files_are_masked" eval '
	rc_is proc 0 && eq "$(val proc root_only_proc_files)" "$(for f in kpageflags kpagecount slabinfo vmallocinfo timer_list kallsyms; do printf "%s EACCES " "$f"; done | sed "s/ $//")"'
check "row07_the_hostname_is_kbox" eval 'rc_is proc 0 && eq "$(val proc hostname)" kbox'
# kbox run as root maps the sandbox's uid to the host's root: the kernel
# passes the kernel's owner-is-root test of every global sysctl
# (/proc/sys/kernel/core_pattern and the like) unless /proc/sys is
# read-only.  Only opened for writing here, never written.
check "row07_no_sysctl_can_be_opened_for_writing" eval '
	rc_is proc 0 && eq "$(val proc writable_sysctls)" "0 []"'

# ---- row 8: the caller's secrets and other sessions ----

MARKER=row08-other-session-$$
[ -n "$SKIPPING" ] || echo "b's file" >"$S/b/workspace/$MARKER"
DIAG=secrets
pyx a <<EOF
import hashlib, json, os
canary = b"$CANARY"
print("env_has_key", "OPENAI_API_KEY" in os.environ)
hits = []
for p in os.listdir("/proc"):
    if p.isdigit() or p == "self":
        try:
            if canary in open("/proc/%s/environ" % p, "rb").read():
                hits.append(p)
        except OSError as e:
            hits.append("%s: %s" % (p, e))
print("canary_in_environ", hits)
print("callers_home", os.path.exists("$FAKEHOME"), os.path.exists("$FAKEHOME/.ssh/id_rsa"))
print("home", os.path.expanduser("~"), os.path.exists(os.path.expanduser("~/.ssh")))
print("shadow", os.path.exists("/etc/shadow"))
print("passwd", [l.split(":")[0] for l in open("/etc/passwd")])
found = []
for root, dirs, files in os.walk("/"):
    if root == "/":
        dirs[:] = [d for d in dirs if d != "proc"]
    for f in files + dirs:
        if f == "$MARKER" or (f.startswith("kernel-") and f.endswith(".json") and root != "/run/kernel"):
            found.append(os.path.join(root, f))
print("other_sessions_files", found)
import stat
from ipykernel.kernelapp import IPKernelApp
tag = os.path.basename(IPKernelApp.instance().ip)
print("run", sorted(os.listdir("/run")))
print("run_kernel_files", sorted(n for n in os.listdir("/run/kernel") if not n.startswith(tag + "-")))
print("run_kernel_sockets", sorted(n[len(tag):] for n in os.listdir("/run/kernel")
                                   if n.startswith(tag + "-") and stat.S_ISSOCK(os.lstat("/run/kernel/" + n).st_mode)))
EOF
keep secrets
kernel_conn a "$ROOT/conn-a.json"
kernel_conn b "$ROOT/conn-b.json"
KEY_A=$(conn_key "$ROOT/conn-a.json" 2>/dev/null)
KEY_B=$(conn_key "$ROOT/conn-b.json" 2>/dev/null)
check "row08_the_llm_key_is_not_in_the_kernels_environment" eval '
	rc_is secrets 0 && eq "$(val secrets env_has_key)" False &&
	eq "$(val secrets canary_in_environ)" "[]"'
check "row08_the_callers_home_and_ssh_key_are_not_visible" eval '
	rc_is secrets 0 && eq "$(val secrets callers_home)" "False False" &&
	eq "$(val secrets home)" "/home/kbox False"'
check "row08_there_is_no_etc_shadow" eval 'rc_is secrets 0 && eq "$(val secrets shadow)" False'
check "row08_etc_passwd_holds_only_kbox_and_nobody" eval '
	rc_is secrets 0 && eq "$(val secrets passwd)" "['"'kbox', 'nobody'"']"'
check "row08_another_sessions_files_and_connection_files_are_not_visible" eval '
	rc_is secrets 0 && eq "$(val secrets other_sessions_files)" "[]"'
# the kernel's connection file and its sockets are in /run/kernel, a
# tmpfs of the sandbox's: no file of the host's (B10-1: a sandbox that
# holds the session's directory open, once in its workspace, finds no
# socket to subscribe to there)
check "row08_run_holds_only_the_kernels_own_tmpfs" eval '
	rc_is secrets 0 && eq "$(val secrets run)" "['"'"'kernel'"'"']"'
check "row08_run_kernel_holds_this_kernels_connection_file_and_its_five_sockets" eval '
	rc_is secrets 0 &&
	eq "$(val secrets run_kernel_files)" "['"'"'kernel-$(cat "$S/a/generation" 2>/dev/null).json'"'"']" &&
	eq "$(val secrets run_kernel_sockets)" "['"'"'-1'"'"', '"'"'-2'"'"', '"'"'-3'"'"', '"'"'-4'"'"', '"'"'-5'"'"']"'
check "row08_no_kernel_socket_is_in_the_state_directory" eval '
	[ "$(find "$KBOX_HOME" -type s ! -name control.sock | wc -l)" = 0 ] &&
	[ "$(find "$KBOX_HOME" -type s -name control.sock | wc -l)" -ge 2 ] ||
	{ why="$(find "$KBOX_HOME" -type s)"; false; }'

# An unsandboxed kernel (none) binds its sockets in a fresh 0700 directory
# of the user's outside every state directory, beside the record of live
# workspaces (/run/kbox under root, else ~/.local/state/kbox/live of the
# password database's home), removed when its supervisor stops; one left
# by a supervisor that is gone (unlocked) goes with the next start.
if [ "$(id -u)" = 0 ]; then LIVE=/run/kbox; else LIVE=$(getent passwd "$(id -u)" | cut -d: -f6)/.local/state/kbox/live; fi
STALE=$LIVE/.sockets/none-stale$$
# (one a supervisor was making when it died, and one being made now)
HALF=$LIVE/.sockets/.new-stale$$
NEW=$LIVE/.sockets/.new-young$$
[ -n "$SKIPPING" ] || { mkdir -p "$STALE" "$HALF" "$NEW" && : >"$STALE/kernel-x-ipc-1" &&
	touch -d '-2 minutes' "$HALF"; }
# (made 0755 here: kbox makes it 0700 again)
kx start -s nn --backend none
keep start_nn
NNPID=$(status_field nn kernel_pid)
NNDIR=$(readlink "/proc/$NNPID/fd/3" 2>/dev/null)
DIAG=start_nn
check "row44_a_none_kernels_sockets_are_in_a_private_directory_outside_the_state_directory" eval '
	rc_is start_nn 0 && case "$NNDIR" in "$LIVE"/.sockets/none-??????) true ;; *) false ;; esac &&
	eq "$(stat -c %a:%u "$NNDIR")" "700:$(id -u)" &&
	eq "$(stat -c %a:%u "$LIVE/.sockets")" "700:$(id -u)" &&
	[ "$(find "$NNDIR" -type s | wc -l)" = 5 ] &&
	[ "$(find "$KBOX_HOME" -type s ! -name control.sock | wc -l)" = 0 ] ||
	{ why="fd 3: $NNDIR"; false; }'
check "row44_a_sockets_directory_no_supervisor_holds_goes_with_the_next_start" eval '
	[ ! -e "$STALE" ] && [ ! -e "$HALF" ] && [ -d "$NEW" ]'
kx stop -s nn
keep stop_nn
DIAG=stop_nn
check "row44_a_none_kernels_sockets_directory_goes_when_its_session_stops" eval '
	rc_is stop_nn 0 && [ -n "$NNDIR" ] && [ ! -e "$NNDIR" ]'
DIAG=
rm -rf "$STALE" "$HALF" "$NEW"

# ---- row 14: privilege ----

DIAG=priv
pyx a <<'EOF'
import ctypes, errno, os, subprocess
libc = ctypes.CDLL(None, use_errno=True)
def e(f):
    try:
        f()
        return "ok"
    except OSError as x:
        return errno.errorcode[x.errno]
def c(r):
    return "ok" if r == 0 else errno.errorcode[ctypes.get_errno()]
print("write_proc_self_exe", e(lambda: os.close(os.open("/proc/self/exe", os.O_WRONLY))))
print("write_usr_bin_python3", e(lambda: os.close(os.open("/usr/bin/python3", os.O_WRONLY))))
print("write_stdlib", e(lambda: os.close(os.open(os.__file__, os.O_WRONLY))))
print("create_in_root", e(lambda: os.close(os.open("/row14", os.O_WRONLY | os.O_CREAT, 0o600))))
print("write_etc_passwd", e(lambda: os.close(os.open("/etc/passwd", os.O_WRONLY))))
print("setuid_0", e(lambda: os.setuid(0)))
print("setgroups_0", e(lambda: os.setgroups([0])))
print("unshare_newuser", c(libc.unshare(0x10000000)))
print("unshare_newns", c(libc.unshare(0x00020000)))
print("mount", c(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)))
r = subprocess.run(["unshare", "-U", "true"], capture_output=True, text=True)
print("unshare_U", r.returncode, r.stderr.strip())
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
for k in ("NoNewPrivs", "Seccomp", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
    print(k, status[k].strip())
st = os.stat("/usr/bin/su")
print("su_is_setuid", bool(st.st_mode & 0o4000))
r = subprocess.run(["su", "-c", "id -u"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
print("su", r.returncode, repr(r.stdout))
print("ids", os.getuid(), os.geteuid(), os.getgid(), os.getegid())
# no set-user-ID or set-group-ID file can be made (they would be root's on
# the host when kbox runs as root)
open("/workspace/row14-suid", "w").close()
print("chmod_4755", e(lambda: os.chmod("/workspace/row14-suid", 0o4755)))
print("chmod_2755", e(lambda: os.chmod("/workspace/row14-suid", 0o2755)))
print("chmod_755", e(lambda: os.chmod("/workspace/row14-suid", 0o755)))
fd = os.open("/workspace/row14-suid", os.O_RDONLY)
print("fchmod_6755", e(lambda: os.fchmod(fd, 0o6755)))
os.close(fd)
print("open_creat_4755", e(lambda: os.close(os.open("/workspace/row14-new", os.O_WRONLY | os.O_CREAT, 0o4755))))
print("open_creat_644", e(lambda: os.close(os.open("/workspace/row14-new", os.O_WRONLY | os.O_CREAT, 0o644))))
print("mode", oct(os.stat("/workspace/row14-suid").st_mode & 0o7777))
print("fchmodat2", c(libc.syscall(452, -100, b"/workspace/row14-suid", 0o4755, 0)))
# bwrap's options, which name host paths, are not on its command line
args = open("/proc/1/cmdline").read().split("\0")
print("pid1_args", args[1], args[3])
print("pid1_names_a_host_path", any("/sessions/" in a or "/workspace" in a for a in args))
EOF
keep priv
check "row14_proc_self_exe_cannot_be_opened_for_writing" eval '
	rc_is priv 0 && one_of "$(val priv write_proc_self_exe)" ETXTBSY EACCES EROFS'
check "row14_system_files_are_read_only" eval '
	rc_is priv 0 && one_of "$(val priv write_usr_bin_python3)" ETXTBSY EROFS EACCES &&
	one_of "$(val priv write_stdlib)" EROFS EACCES && eq "$(val priv create_in_root)" EROFS &&
	eq "$(val priv write_etc_passwd)" EROFS'
# uid 0 does not exist in the sandbox's user namespace: EINVAL, not EPERM
check "row14_setuid_0_fails_and_setgroups_is_EPERM" eval '
	rc_is priv 0 && eq "$(val priv setuid_0)" EINVAL && eq "$(val priv setgroups_0)" EPERM'
check "row14_unshare_is_EPERM" eval '
	rc_is priv 0 && eq "$(val priv unshare_newuser)" EPERM && eq "$(val priv unshare_newns)" EPERM'
check "row14_unshare_minus_U_fails" eval '
	rc_is priv 0 && eq "$(val priv unshare_U)" "1 unshare: unshare failed: Operation not permitted"'
check "row14_mount_is_EPERM" eval 'rc_is priv 0 && eq "$(val priv mount)" EPERM'
check "row14_no_new_privs_seccomp_filter_and_no_capabilities" eval '
	rc_is priv 0 && eq "$(val priv NoNewPrivs)" 1 && eq "$(val priv Seccomp)" 2 &&
	eq "$(val priv CapInh) $(val priv CapPrm) $(val priv CapEff) $(val priv CapBnd) $(val priv CapAmb)" \
		"0000000000000000 0000000000000000 0000000000000000 0000000000000000 0000000000000000"'
check "row14_a_setuid_binary_does_not_gain_root" eval '
	rc_is priv 0 && eq "$(val priv su_is_setuid)" True && eq "$(val priv su)" "1 '"''"'" &&
	eq "$(val priv ids)" "1000 1000 1000 1000"'

check "row14_no_setuid_or_setgid_file_can_be_made" eval '
	rc_is priv 0 && eq "$(val priv chmod_4755)" EPERM && eq "$(val priv chmod_2755)" EPERM &&
	eq "$(val priv fchmod_6755)" EPERM && eq "$(val priv open_creat_4755)" EPERM &&
	eq "$(val priv chmod_755)" ok && eq "$(val priv open_creat_644)" ok &&
	eq "$(val priv mode)" 0o755 && eq "$(val priv fchmodat2)" ENOSYS &&
	eq "$(stat -c %a "$KBOX_HOME/sessions/a/workspace/row14-suid")" 755'
check "row14_bwraps_command_line_names_no_host_path" eval '
	rc_is priv 0 && eq "$(val priv pid1_args)" "--args --" &&
	eq "$(val priv pid1_names_a_host_path)" False'

# ---- row 33: what Docker's default seccomp profile refuses, and kbox's own ----
# Raw system calls by their x86_64 or aarch64 number (a call the
# architecture lacks is "absent"), the others through Python's os and
# socket; each asserts the exact errno, and what must still work works.

# shellcheck source=tests/security/syscalls.sh
. "$top_srcdir/tests/security/syscalls.sh"
syscall_probe a row33

# ---- row 34: what names the host ----
# /proc/cmdline and /proc/swaps are replaced (empty; no swap); no fd of
# the kernel or of the sandbox's init names a host file that the sandbox
# does not see at that path (kernel.log included: the kernel writes to a
# pipe, row 31); and /proc/self/mountinfo, which cannot be masked, lists only the
# mounts kbox(7) documents, and of the state directory only this
# session's own workspace, home and run directory (kbox(7), CAVEATS).

DIAG=host
pyx a <<EOF
import os
STATE = "$KBOX_HOME/"
print("cmdline", repr(open("/proc/cmdline").read()))
print("swaps", repr(open("/proc/swaps").read()))
def host_fds(pid):
    named = []
    for fd in os.listdir("/proc/%s/fd" % pid):
        path = "/proc/%s/fd/%s" % (pid, fd)
        try:
            target, st = os.readlink(path), os.stat(path)
        except OSError:
            continue  # the listing's own descriptor, closed again
        if not target.startswith("/"):
            continue  # a pipe, socket or anonymous inode
        try:
            seen = os.stat(target)  # the same file at that path in the sandbox?
            if (seen.st_dev, seen.st_ino) == (st.st_dev, st.st_ino):
                continue
        except OSError:
            pass
        named.append((pid, int(fd), target))
    return named
print("host_fds", sorted(host_fds("self") + host_fds("1")))
mounts = [l.split()[3:5] for l in open("/proc/self/mountinfo")]
print("state_dir_mounts", sorted((point, root) for root, point in mounts if root.startswith(STATE)))
system = ("/", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/proc",
          "/proc/sys", "/dev", "/dev/pts", "/dev/shm", "/tmp", "/home/kbox", "/run/kernel",
          "/workspace")
etc = ("ld.so.cache", "localtime", "timezone", "alternatives", "fonts", "matplotlibrc",
       "mime.types", "os-release", "debian_version", "passwd", "group", "hosts", "hostname",
       "nsswitch.conf")
proc = ("kcore", "kallsyms", "kpageflags", "kpagecount", "kpagecgroup", "slabinfo",
        "vmallocinfo", "pagetypeinfo", "timer_list", "timer_stats", "sched_debug",
        "latency_stats", "keys", "key-users", "sysrq-trigger", "acpi", "scsi", "asound",
        "firmware", "cmdline", "bootconfig", "swaps")
dev = ("null", "zero", "full", "random", "urandom", "tty")
def documented(point):
    d, _, name = point.rpartition("/")
    return (point in system or (d == "/etc" and (name in etc or name.startswith("python3")))
            or (d == "/proc" and name in proc) or (d == "/dev" and name in dev))
print("undocumented_mounts", sorted(point for root, point in mounts if not documented(point)))
EOF
keep host
NO_SWAP="'Filename\\t\\t\\t\\tType\\t\\tSize\\t\\tUsed\\t\\tPriority\\n'"
OWN_DIRS="[('/home/kbox', '$S/a/home'), ('/workspace', '$S/a/workspace')]"
check "row34_proc_cmdline_reads_empty" eval 'rc_is host 0 && eq "$(val host cmdline)" "'"''"'"'
check "row34_proc_swaps_lists_no_swap_file" eval 'rc_is host 0 && eq "$(val host swaps)" "$NO_SWAP"'
check "row34_no_fd_of_the_kernel_or_its_init_names_a_host_file" eval '
	rc_is host 0 && eq "$(val host host_fds)" "[]"'
check "row34_mountinfo_names_of_the_state_directory_only_this_sessions_own_directories" eval '
	rc_is host 0 && eq "$(val host state_dir_mounts)" "$OWN_DIRS"'
check "row34_mountinfo_lists_only_the_mounts_kbox_7_documents" eval '
	rc_is host 0 && eq "$(val host undocumented_mounts)" "[]"'

# ---- row 19: session a's key on session b ----

CONN_B=$ROOT/conn-b.json
# sign_b KEY CODE: send an execute_request for CODE on b's shell socket,
# signed with KEY; prints "reply STATUS" or "reply none" after 3 s.
sign_b() {
	[ -z "$SKIPPING" ] || return 0
	timeout -k 5 30 "$PY" - "$CONN_B" "$1" "$2" <<'EOF' >"$W/out" 2>"$W/err"
import queue, sys
from jupyter_client import BlockingKernelClient
c = BlockingKernelClient()
c.load_connection_file(sys.argv[1])
c.session.key = sys.argv[2].encode()
c.start_channels(hb=False)
msg_id = c.execute(sys.argv[3])
try:
    while True:
        r = c.get_shell_msg(timeout=3)
        if r["parent_header"].get("msg_id") == msg_id:
            print("reply", r["content"]["status"])
            break
except queue.Empty:
    print("reply none")
c.stop_channels()
EOF
	rc=$?
}
sign_b "$KEY_A" "open('/workspace/row19-key-a', 'w').close()"
keep key_a
sign_b "$KEY_B" "open('/workspace/row19-key-b', 'w').close()"
keep key_b
DIAG="key_a key_b"
check "row19_the_sessions_keys_differ" eval '
	say "key of a: ${#KEY_A} characters, of b: ${#KEY_B}" &&
	[ "${#KEY_A}" -ge 32 ] && ne "$KEY_A" "$KEY_B"'
check "row19_bs_kernel_ignores_a_request_signed_with_as_key" eval '
	rc_is key_a 0 && eq "$(val key_a reply)" none'
check "row19_the_same_request_signed_with_bs_own_key_is_answered" eval '
	rc_is key_b 0 && eq "$(val key_b reply)" ok && [ -e "$S/b/workspace/row19-key-b" ]'
check "row19_nothing_signed_with_as_key_ran_in_b" eval '
	[ ! -e "$S/b/workspace/row19-key-a" ]'
# (under root the sandbox's own are the sandbox user's; those it passes
# through, root's 0710: kbox(7), Identity)
check "row19_each_sessions_run_and_workspace_directories_are_private" eval '
	private_to "$(id -u)" 700 "$S/a/run" && private_to "$(id -u)" 700 "$S/b/run" &&
	private_to "$(sb_uid a)" 700 "$S/a/workspace" && private_to "$(sb_uid b)" 700 "$S/b/workspace" &&
	[ ! -e "$S/a/run/sandbox" ] && private_to "$(id -u)" "$PASS_MODE" "$S/a" &&
	private_to "$(id -u)" "$PASS_MODE" "$S/b"'

# ---- row 44: what reaches a session's supervisor ----

# ctl_ask SESSION [unshare-option...]: send a status request to the
# session's control socket, then an execute naming an outputs directory
# (/tmp) without passing it, and one passing its outputs directory open;
# from this user namespace, or (options given) from one unshare makes
# with this uid mapped, as a sandbox's is.  Prints "status STATE",
# "outputs_by_name KIND ERROR" and "outputs_passed OK", or "refused WHAT"
# when the supervisor closes the connection.
ctl_ask() {
	[ -z "$SKIPPING" ] || return 0
	sess=$1
	shift
	timeout -k 5 60 ${1+unshare "$@"} "$PY" - "$S/$sess/control.sock" <<'EOF' >"$W/out" 2>"$W/err"
import errno, json, os, socket, sys
def ask(req, fds=()):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    try:
        socket.send_fds(s, [json.dumps(req).encode() + b"\n"], list(fds))
        for line in s.makefile():  # events, then the reply
            if "ok" in json.loads(line):
                return json.loads(line), None
    except OSError as e:
        return None, "refused " + errno.errorcode[e.errno]
    finally:
        s.close()
    return None, "refused EOF"
r, e = ask({"op": "status"})
print(e or "status " + r["state"])
if not e:
    r, e = ask({"op": "execute", "code": "1", "outputs": "/tmp"})
    print(e or "outputs_by_name %s %s" % (r["kind"], r["error"]))
    fd = os.open(os.path.dirname(sys.argv[1]) + "/outputs", os.O_RDONLY | os.O_DIRECTORY)
    r, e = ask({"op": "execute", "code": "1", "outputs": "/x"}, [fd])
    print(e or "outputs_passed %s" % r["ok"])
EOF
	rc=$?
}
ctl_ask a
keep ctl_here
ctl_ask a --user --map-current-user
keep ctl_userns
DIAG="ctl_here ctl_userns"
check "row44_the_supervisor_answers_its_own_user_in_its_namespace" eval '
	rc_is ctl_here 0 && eq "$(val ctl_here status)" idle'
check "row44_a_peer_of_the_same_uid_in_another_user_namespace_is_refused" eval '
	rc_is ctl_userns 0 && one_of "$(cat "$W/ctl_userns.out")" "refused EPIPE" \
		"refused ECONNRESET" "refused EOF" && logged a client-refused'
check "row44_an_outputs_directory_named_but_not_passed_is_refused" eval '
	rc_is ctl_here 0 && eq "$(val ctl_here outputs_by_name)" \
		"usage \"outputs\" /tmp: pass the directory open, as SCM_RIGHTS with the request (the supervisor opens no directory a request names)"'
check "row44_an_outputs_directory_passed_open_is_taken" eval '
	rc_is ctl_here 0 && eq "$(val ctl_here outputs_passed)" True'
# The other way: code in a sandbox that can reach a state directory (a
# directory it held open, later used as one) puts a socket of its own at
# a session's control.sock, and takes the lock of its supervisor.pid, as
# a supervisor does.  kbox talks to no listener in another user
# namespace: it sends it nothing (no code, no outputs directory open).
fake_sup() {
	[ -z "$SKIPPING" ] || return 0
	mkdir -m 700 "$S/fake"
	timeout -k 5 90 unshare --user --map-current-user "$PY" - "$S/fake" <<'EOF' >"$W/fake.out" 2>"$W/fake.err" &
import fcntl, os, socket, sys
d = sys.argv[1]
pid = os.open(d + "/supervisor.pid", os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(pid, fcntl.LOCK_EX)
os.write(pid, b"%d\n" % os.getpid())
s = socket.socket(socket.AF_UNIX)
s.bind(d + "/control.sock")
s.listen(8)
print("listening", flush=True)
c, _ = s.accept()
got, fds = b"", []
while True:
    data, passed, _, _ = socket.recv_fds(c, 65536, 8)
    fds += passed
    if not data:
        break
    got += data
print("bytes", len(got))
print("fds", len(fds), flush=True)
EOF
	FAKE=$!
	wait_for grep -qx listening "$W/fake.out" || return 0
	kx exec -s fake 'print(1)'
	keep fake_exec
	wait "$FAKE"
}
fake_sup
DIAG="fake_exec fake"
check "row44_kbox_sends_nothing_to_a_control_socket_of_another_user_namespace" eval '
	rc_is fake_exec 5 && [ ! -s "$W/fake_exec.out" ] &&
	eq "$(cat "$W/fake_exec.err")" "kbox exec: session fake: $S/fake/control.sock is not a supervisor'"'"'s of this user: the process listening there is another user'"'"'s, or in another user namespace (code in a sandbox that can reach this state directory); nothing was sent to it. Stop using this state directory (kbox(7), threat 44)" &&
	eq "$(val fake bytes)" 0 && eq "$(val fake fds)" 0'
# Nor does a genuine supervisor of the user serve a session other than
# its own: a link at "fake"'s control.sock to a's (what code that could
# reach the state directory can make) reaches a's supervisor, which
# answers kbox's first line, naming the session meant, with an error and
# runs nothing (the lock of fake's supervisor.pid held meanwhile, as a
# supervisor's would be).
if [ -z "$SKIPPING" ]; then
	rm -f "$S/fake/control.sock"
	ln -s "$S/a/control.sock" "$S/fake/control.sock"
	timeout -k 5 120 flock "$S/fake/supervisor.pid" "$KBOX" exec -s fake \
		'open("/workspace/row44-misrouted", "w").close()' >"$W/out" 2>"$W/err"
	rc=$?
fi
keep misrouted
DIAG=misrouted
check "row44_a_supervisor_runs_nothing_meant_for_another_session" eval '
	rc_is misrouted 5 && [ ! -s "$W/misrouted.out" ] &&
	eq "$(cat "$W/misrouted.err")" "kbox exec: session fake: the supervisor that answered is that of the session in $S/a, not of $S/fake: something put its socket in the place of that session'"'"'s (kbox(7), threat 44); nothing was run" &&
	[ ! -e "$S/a/workspace/row44-misrouted" ]'
# Nor one whose directory was moved away while it ran (review 15's
# B15-3): its session directory renamed, another made under the old name
# (with the same session.json, whose seal names that path), and the old
# supervisor's socket moved into it.  The session line gives the identity
# of the directory kbox opened: the old supervisor refuses it, runs
# nothing, and is stopped by its pid.
if [ -z "$SKIPPING" ]; then
	kx start -s mv --backend none
	keep mv_start
	mv "$S/mv" "$S/mv-away"
	mkdir -m 700 "$S/mv" && cp "$S/mv-away/session.json" "$S/mv/" &&
		mv "$S/mv-away/control.sock" "$S/mv/control.sock"
	timeout -k 5 120 flock "$S/mv/supervisor.pid" "$KBOX" exec -s mv \
		'open("row44-moved", "w").close()' >"$W/out" 2>"$W/err"
	rc=$?
	keep moved
	# and a link put at its name to the directory moved away (review 16,
	# B16-3): kbox refuses the link, and the old supervisor, reached
	# through it with the right path and identity, answers for nothing
	mv "$S/mv/control.sock" "$S/mv-away/control.sock" && rm -rf "$S/mv" &&
		ln -s "$S/mv-away" "$S/mv"
	kx exec -s mv 'open("row44-linked", "w").close()'
	keep linked
	timeout -k 5 60 "$PY" - "$S/mv" <<'EOF' >"$W/out" 2>"$W/err"
import json, os, socket, sys
d = sys.argv[1]
st = os.stat(d)
s = socket.socket(socket.AF_UNIX)
s.connect(d + "/control.sock")
s.sendall(json.dumps({"op": "session", "dir": d, "dev": st.st_dev, "ino": st.st_ino}).encode()
          + b"\n" + b'{"op": "status"}\n')
r = json.loads(s.makefile().readline())
print("linked", r["re"], r["ok"], r["kind"])
EOF
	rc=$?
	keep linked_op
	rm -f "$S/mv"
	MVPID=$(head -n 1 "$S/mv-away/supervisor.pid")
	kill -TERM "$MVPID" && wait_for eval '! kill -0 "$MVPID" 2>/dev/null'
	rm -rf "$S/mv" "$S/mv-away"
fi
DIAG="linked linked_op"
check "row44_a_link_to_a_session_moved_away_is_refused_and_its_supervisor_answers_nothing" eval '
	rc_is linked 5 &&
	eq "$(cat "$W/linked.err")" "kbox exec: session directory $S/mv is a symbolic link, not a directory kbox made: something else put it there; remove the link (rm $S/mv: what it leads to stays)" &&
	rc_is linked_op 0 && eq "$(val linked_op linked)" "session False state" &&
	[ ! -e "$S/mv-away/workspace/row44-linked" ]'
DIAG="mv_start moved"
check "row44_a_supervisor_moved_away_runs_nothing_meant_for_the_session_now_there" eval '
	rc_is mv_start 0 && rc_is moved 5 && [ ! -s "$W/moved.out" ] &&
	eq "$(cat "$W/moved.err")" "kbox exec: session mv: the supervisor that answered is that of the session that was in $S/mv, not of the directory there now: it was moved away and another put in its place (kbox(7), threat 44); nothing was run" &&
	[ ! -e "$S/mv-away/workspace/row44-moved" ] && [ ! -e "$S/mv/workspace/row44-moved" ]'
# the session line of a client of its own: its own directory is taken
# silently (the status after it is answered), one that is not a string is
# a usage error that ends the connection, as is an identity not its
# directory's (the path alone is still taken: clients that do not send it)
if [ -z "$SKIPPING" ]; then
	timeout -k 5 60 "$PY" - "$S/a" <<'EOF' >"$W/out" 2>"$W/err"
import json, os, socket, sys
def ask(*lines):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1] + "/control.sock")
    s.sendall(b"".join(json.dumps(l).encode() + b"\n" for l in lines))
    first = json.loads(s.makefile().readline())
    s.close()
    return first
r = ask({"op": "session", "dir": sys.argv[1]}, {"op": "status"})
print("own", r["re"], r["ok"])
r = ask({"op": "session", "dir": 5}, {"op": "status"})
print("bad", r["re"], r["ok"], r["kind"], r["error"])
r = ask({"op": "session", "dir": sys.argv[1], "dev": 1}, {"op": "status"})
print("half", r["re"], r["ok"], r["kind"])
st = os.stat(sys.argv[1])
r = ask({"op": "session", "dir": sys.argv[1], "dev": st.st_dev, "ino": st.st_ino},
        {"op": "status"})
print("same", r["re"], r["ok"])
r = ask({"op": "session", "dir": sys.argv[1], "dev": st.st_dev, "ino": st.st_ino + 1},
        {"op": "status"})
print("other", r["re"], r["ok"], r["kind"])
EOF
	rc=$?
fi
keep session_op
DIAG=session_op
check "row44_the_session_line_of_its_own_directory_is_silent_and_a_bad_one_a_usage_error" eval '
	rc_is session_op 0 && eq "$(val session_op own)" "status True" &&
	eq "$(val session_op bad)" "session False usage \"dir\" must be a string, and \"dev\" and \"ino\" integers, both or neither" &&
	eq "$(val session_op half)" "session False usage" &&
	eq "$(val session_op same)" "status True" &&
	eq "$(val session_op other)" "session False state"'
# A supervisor started by a kbox older than the session line (still
# running across an upgrade) answers it as an unknown op and reads on:
# kbox takes that answer as no answer, and its request is served.  Here a
# stand-in of ours, in our own namespace, answers as such a one does.
if [ -z "$SKIPPING" ]; then
	rm -f "$S/fake/control.sock"
	timeout -k 5 90 "$PY" - "$S/fake" <<'EOF' >"$W/old.out" 2>"$W/old.err" &
import fcntl, json, os, socket, sys
d = sys.argv[1]
pid = os.open(d + "/supervisor.pid", os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(pid, fcntl.LOCK_EX)
s = socket.socket(socket.AF_UNIX)
s.bind(d + "/control.sock")
s.listen(8)
print("listening", flush=True)
c, _ = s.accept()
f = c.makefile("rwb")
for line in f:
    op = json.loads(line)["op"]
    print("op", op, flush=True)
    if op == "stop":
        f.write(b'{"ok": true, "re": "stop"}\n')
        f.flush()
        break
    f.write(json.dumps({"ok": False, "re": op, "kind": "usage",
                        "error": 'unknown op "%s"' % op}).encode() + b"\n")
    f.flush()
EOF
	OLD=$!
	wait_for grep -qx listening "$W/old.out" &&
		kx stop -s fake
	keep old_stop
	wait "$OLD"
fi
DIAG="old_stop old"
check "row44_a_supervisor_older_than_the_session_line_is_still_served" eval '
	rc_is old_stop 0 && eq "$(cat "$W/old_stop.out")" "session fake stopped" &&
	eq "$(grep "^op " "$W/old.out" | tr "\n" " ")" "op session op stop "'
# the state directory kbox made sessions in is marked, as
# tests/security/workspace.sh's row 44 finds it
check "row44_kbox_marks_the_state_directory_it_makes_sessions_in" eval '
	[ -f "$KBOX_HOME/.kbox-state" ] && [ ! -L "$KBOX_HOME/.kbox-state" ] &&
	head -n 1 "$KBOX_HOME/.kbox-state" | grep -qx "This is a kbox state directory: .*"'

# ---- row 10: orphans ----

DIAG=orphans
pyx a <<'EOF'
import os, time
def procs():
    out = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                f = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[int(p)] = (f[0], int(f[1]))
    return out
# each orphan waits for the end of this pipe (not for a time: on a loaded
# machine a sleep could end before all twenty are counted)
r, w = os.pipe()
middle = []
for i in range(20):
    pid = os.fork()
    if pid == 0:
        try:
            if os.fork() == 0:
                os.close(w)
                os.read(r, 1)  # outlives its parent: an orphan, for pid 1 to reap
        finally:
            os._exit(0)
    middle.append(pid)
for pid in middle:  # the double fork's parent waits for the middle child only
    os.waitpid(pid, 0)
print("orphans_of_pid_1", sum(1 for p, (s, pp) in procs().items() if pp == 1 and p != 2))
os.close(w)  # the orphans end now
os.close(r)
deadline = time.time() + 60  # a bound; pid 1 reaps them long before
while time.time() < deadline and sorted(procs()) != [1, 2]:
    time.sleep(0.05)
ps = procs()
print("pids_after", sorted(ps))
print("zombies", sorted(p for p, (s, pp) in ps.items() if s == "Z"))
EOF
keep orphans
check "row10_orphans_are_reparented_to_the_sandboxs_pid_1" eval '
	rc_is orphans 0 && eq "$(val orphans orphans_of_pid_1)" 20'
check "row10_pid_1_reaps_them_no_zombie_remains_inside" eval '
	rc_is orphans 0 && eq "$(val orphans pids_after)" "[1, 2]" && eq "$(val orphans zombies)" "[]"'
DIAG=
check "row10_no_host_zombie_has_a_sandbox_parent" eval '
	eq "$("$PY" - "$KPID_A" "$INIT_A" <<"EOF"
import os, sys
z = []
for p in os.listdir("/proc"):
    try:
        f = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        continue
    if f[0] == "Z" and f[1] in sys.argv[1:]:
        z.append(p)
print(z)
EOF
)" "[]"'

# ---- row 9: ptrace and kill(-1) ----

DIAG=ptrace
pyx a <<EOF
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PTRACE_ATTACH = 16
for name, pid in (("pid_1", 1), ("supervisor", $SUP_A)):
    r = libc.ptrace(PTRACE_ATTACH, pid, None, None)
    print("ptrace_" + name, "ok" if r == 0 else errno.errorcode[ctypes.get_errno()])
EOF
keep ptrace
check "row09_ptrace_attach_to_pid_1_is_EPERM" eval 'rc_is ptrace 0 && eq "$(val ptrace ptrace_pid_1)" EPERM'
check "row09_ptrace_attach_to_the_supervisors_host_pid_is_EPERM" eval '
	rc_is ptrace 0 && eq "$(val ptrace ptrace_supervisor)" EPERM'

# b keeps a value across a's kill(-1); the test's own process waits
pyx b <<'EOF'
kept = 41
EOF
keep b_before
SLEEPER=
if [ -z "$SKIPPING" ]; then
	sleep 300 &
	SLEEPER=$!
	BG_PIDS="$BG_PIDS $SLEEPER"
fi
KPID_B=$(status_field b kernel_pid)
KPID_A=$(status_field a kernel_pid)
DIAG=kill_all
pyx a <<'EOF'
import subprocess
subprocess.run(["sh", "-c", "kill -9 -1; sleep 10"])
print("survived")
EOF
keep kill_all
SIGKILL_CAUSE="the kernel was killed by signal 9 (SIGKILL)"
check "row09_kill_minus_1_from_inside_kills_the_kernel_and_a_new_one_starts" eval '
	rc_is kill_all 4 &&
	out_is kill_all "[kernel died: $SIGKILL_CAUSE; a new kernel was started; earlier state is lost]"'
DIAG=
check "row09_kill_minus_1_spares_the_supervisor_and_the_hosts_processes" eval '
	alive "$SUP_A" && alive "$SUP_B" && alive "$SLEEPER" && gone "$KPID_A"'
pyx b <<'EOF'
print(kept + 1)
EOF
keep b_after
DIAG="b_before b_after"
check "row09_kill_minus_1_spares_the_other_session" eval '
	rc_is b_before 0 && rc_is b_after 0 && out_is b_after 42 &&
	eq "$(status_field b kernel_pid)" "$KPID_B"'
pyx a <<'EOF'
print(1 + 1)
EOF
keep a_after
DIAG=a_after
check "row09_the_next_exec_in_a_notes_the_SIGKILL" eval '
	rc_is a_after 0 &&
	note_line_is "$W/a_after.out" "kernel restarted: $SIGKILL_CAUSE; earlier state (variables, imports, loaded data) is lost" &&
	[ "$(sed -n "2,\$p" "$W/a_after.out")" = 2 ]'

# ---- row 11: SIGKILL the supervisor (of b) ----

KPID_B=$(status_field b kernel_pid)
INIT_B=$(ppid "$KPID_B")
BWRAP_B=$(ppid "$INIT_B")
BWRAP_B_PARENT=$(ppid "$BWRAP_B")
CG_B=
if [ -z "$SKIPPING" ]; then
	for ctl in pids memory; do
		# the kernel's own cgroups only (without cgroups it is in its user's)
		d=$(cg_dir "$ctl" "$KPID_B")
		case ${d##*/} in kbox-b-*) CG_B="$CG_B $d" ;; esac
	done
	kill -9 "$SUP_B"
fi
# absent PATH...: none of the PATHs exists.
absent() {
	for d in "$@"; do
		[ ! -e "$d" ] || { say "$d is left"; return 1; }
	done
}
# no_procs DIR...: no process is left in the cgroup DIRs (polled).
procs_left() {
	left=$(cat "${@/%//cgroup.procs}" 2>/dev/null)
	[ -z "$left" ]
}
no_procs() {
	wait_for procs_left "$@" >/dev/null && return 0
	say "still in the cgroups: $left"
	return 1
}
DIAG=
check "row11_killing_the_supervisor_kills_the_kernel_bwrap_init_and_bwrap" eval '
	say "supervisor $SUP_B: bwrap $BWRAP_B, init $INIT_B, kernel $KPID_B" &&
	eq "$BWRAP_B_PARENT" "$SUP_B" && gone "$SUP_B" && gone "$KPID_B" && gone "$INIT_B" && gone "$BWRAP_B"'
no_cg_skip=$SKIPPING
[ -n "$SKIPPING" ] || [ -n "$CG_B" ] || no_cg_skip="the sandbox has no cgroups of its own here"
# shellcheck disable=SC2086 # a list of directories
SKIPPING=$no_cg_skip check "row11_no_process_is_left_in_the_sandboxs_cgroups" eval 'say "cgroups:$CG_B" && no_procs $CG_B'
check "row11_kbox_ls_says_the_session_is_dead" eval '
	kx ls && eq "$rc" 0 && eq "$(awk "\$1 == \"b\" { print \$2 }" "$W/out")" dead'
kx start -s b
keep restart_b
DIAG=restart_b
# the dead supervisor could not remove its cgroups: the next one does
# shellcheck disable=SC2086 # a list of directories
SKIPPING=$no_cg_skip check "row11_the_next_start_removes_the_dead_sandboxs_cgroups" eval '
	rc_is restart_b 0 && absent $CG_B'

# ---- row 33: a system call of another ABI (x32) kills the whole kernel ----
# (killing only the calling thread would leave a kernel that never answers)
kx start -s x
pyx x -t 30 <<'EOF'
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print("before", flush=True)
libc.syscall(ctypes.c_long(0x40000000 | 39))  # getpid, x32's number
print("after")
EOF
keep x32
DIAG=x32
# "at once": the kernel dies of SIGSYS itself (exit 4, the signal named),
# not of the escalation of its 30 s timeout (which would say it timed out)
check "row33_an_x32_system_call_kills_the_kernel_at_once" eval '
	rc_is x32 4 && grep -q "SIGSYS" "$W/x32.out" && ! grep -qx after "$W/x32.out" &&
	! grep -q "timed out" "$W/x32.out" "$W/x32.err"'

# ---- row 52: the kernel's control bytes (session x) ----

# The kernel writes escape sequences (a colour, a window title ended by
# BEL) to its stderr directly (ipykernel takes fd 2 for the execution's
# output, and keeps the kernel's own stderr, the pipe to kernel.log, as
# sys.stderr._original_stdstream_copy): kernel.log keeps the bytes as
# written; kbox logs shows the event log only, in which nothing of the
# kernel's stderr is, and prints no control byte in any format.
pyx x <<'EOF'
import os, sys
fd = getattr(sys.stderr, "_original_stdstream_copy", None) or 2
os.write(fd, b"\x1b[31mred\x1b]0;title\x07\n")
print("written")
EOF
keep ctl_bytes
kx logs -s x
keep logs_text
kx logs -s x --format ndjson
keep logs_ndjson
DIAG=ctl_bytes
check "row52_kernel_log_keeps_the_control_bytes_the_kernel_wrote" eval '
	rc_is ctl_bytes 0 && eq "$(tail -n 1 "$W/ctl_bytes.out")" written &&
	"$PY" -c "import sys; sys.exit(b\"\\x1b[31mred\\x1b]0;title\\x07\\n\" not in open(sys.argv[1], \"rb\").read())" \
		"$S/x/kernel.log"'
DIAG=
check "row52_kbox_logs_prints_no_control_byte_in_text_or_ndjson" eval '
	rc_is logs_text 0 && rc_is logs_ndjson 0 &&
	! tr -d "\n" <"$W/logs_text.out" | LC_ALL=C grep -q "[[:cntrl:]]" &&
	! tr -d "\n" <"$W/logs_ndjson.out" | LC_ALL=C grep -q "[[:cntrl:]]" &&
	! grep -q title "$W/logs_text.out"'

# ---- row 51: the event log stays bounded (session x, before it stops) ----

# A peer of the same uid in another user namespace (as in row 44) is
# refused 1000 times, each refusal awaited, in less than 60 s (timeout):
# within one fold interval, so x's log has the first refusal, and the
# other 999 are held and written as one line, with "folded": 998, when the
# interval ends or the session stops.  Then the log is filled to 50 bytes
# short of its bound (1 MiB): the next line, that one, rotates it.
if [ -z "$SKIPPING" ]; then
	timeout -k 5 60 unshare --user --map-current-user "$PY" - "$S/x/control.sock" 1000 \
		<<'EOF' >"$W/refused.out" 2>"$W/refused.err"
import socket, sys
n = 0
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    try:
        s.recv(1)  # b"" or ECONNRESET: the supervisor has refused it
    except OSError:
        pass
    s.close()
    n += 1
print(n)
EOF
	fill_log "$S/x/events.ndjson" $((1048576 - 50))
	cp "$S/x/events.ndjson" "$W/events.before"
fi
kx stop -s x
kx logs -s x --format ndjson
keep logs_x
DIAG=refused
# refused_lines FILE: the client-refused lines of FILE, as their "folded"
# members (0 when absent), one a line
refused_lines() {
	"$PY" -c 'import json, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e["event"] == "client-refused":
        print(e.get("folded", 0))' "$1"
}
check "row51_a_peer_refused_1000_times_is_logged_once_then_once_with_998_folded" eval '
	eq "$(cat "$W/refused.out")" 1000 &&
	eq "$(refused_lines "$S/x/events.ndjson.1") / $(refused_lines "$S/x/events.ndjson")" "0 / 998"'
check "row51_the_event_log_is_rotated_before_it_would_pass_1_mib" eval '
	eq "$(stat -c %s "$S/x/events.ndjson.1")" $((1048576 - 50)) &&
	cmp -s "$W/events.before" "$S/x/events.ndjson.1" &&
	le "$(stat -c %s "$S/x/events.ndjson")" 1048576 &&
	eq "$(sed "s/\"time\":\"[^\"]*\"//" "$S/x/events.ndjson")" \
		"{\"event\":\"client-refused\",\"folded\":998,,\"why\":\"another user, or another user namespace (a sandbox)\"}
{\"cause\":\"stopped on request (kbox stop)\",\"event\":\"stop\",\"executions\":2,}"'
check "row51_kbox_logs_reads_the_rotated_log_then_the_new_one" eval '
	rc_is logs_x 0 && [ -s "$S/x/events.ndjson.1" ] &&
	cat "$S/x/events.ndjson.1" "$S/x/events.ndjson" | cmp -s - "$W/logs_x.out"'

tests_done
