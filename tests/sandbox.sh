#!/bin/bash
# tests/sandbox.sh — the bwrap backend as a user meets it: kbox doctor,
# what kbox start says when bubblewrap is missing, --rootfs, the limits a
# session gets (cgroup files, status, the limits event, the view from
# inside), their removal, the rlimit fallback when cgroups are read-only,
# and --cpus holding CPU time down.  TAP.  (The attacks of threats.md are
# in tests/security/.)
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON.
# Needs bubblewrap and a kernel; the tests that hide bwrap or make cgroups
# read-only need root (a private mount namespace) and are skipped, with
# the reason, without it.
# shellcheck disable=SC2016 # eval strings expand later, on purpose
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"

have_root=yes
[ "$(id -u)" = 0 ] && command -v unshare >/dev/null || have_root=no
have_bwrap=yes
[ -x /usr/bin/bwrap ] || [ -x /usr/local/bin/bwrap ] || [ -x /bin/bwrap ] || have_bwrap=no

# sandboxed WHAT...: as needs, plus bwrap; "root" for the mount namespace tests.
sandboxed() {
	needs kernel
	[ -n "$SKIPPING" ] && return
	[ "$have_bwrap" = yes ] || SKIPPING="bubblewrap is not installed"
	for what in "$@"; do
		case $what in
		root) [ "$have_root" = yes ] || SKIPPING="needs root and unshare(1) for a private mount namespace" ;;
		esac
	done
}

# kbox_nobwrap ARGS...: kbox in a mount namespace where bwrap is /dev/null
# (not executable): as on a machine without bubblewrap.
kbox_nobwrap() {
	[ -z "$SKIPPING" ] || return 0
	t0=$(date +%s)
	timeout -k 5 90 unshare -m --propagation private sh -c '
		for b in /usr/local/bin/bwrap /usr/bin/bwrap /bin/bwrap; do
			[ -e "$b" ] && { mount --bind /dev/null "$b" || exit 99; }
		done
		exec "$@"' sh "$KBOX" "$@" >stdout 2>stderr
	rc=$?
	secs=$(($(date +%s) - t0))
}

# kbox_rocgroup ARGS...: kbox in a mount namespace where every cgroup
# hierarchy is read-only (as for a user who may not write cgroups).
kbox_rocgroup() {
	[ -z "$SKIPPING" ] || return 0
	t0=$(date +%s)
	timeout -k 5 90 unshare -m --propagation private sh -c '
		for m in $(awk "\$3 == \"cgroup\" || \$3 == \"cgroup2\" { print \$2 }" /proc/self/mounts); do
			mount -o remount,bind,ro "$m" || exit 99
		done
		exec "$@"' sh "$KBOX" "$@" >stdout 2>stderr
	rc=$?
	secs=$(($(date +%s) - t0))
}

# own_cgroup CONTROLLER: the directory of our cgroup in CONTROLLER's v1 hierarchy.
own_cgroup() {
	awk -F: -v c="$1" '{ n = split($2, a, ","); for (i = 1; i <= n; i++) if (a[i] == c) print $3 }' \
		/proc/self/cgroup | sed "s|^/*|/sys/fs/cgroup/$1/|; s|/*$||"
}

# ---- kbox doctor ----

sandboxed
fresh
kbox doctor
check doctor_exits_0_when_bwrap_isolates eval 'status_is 0 &&
	last_line_is stdout "the default backend (bwrap) isolates kernels here, with cgroup limits for memory, pids and cpu"'
check doctor_reports_each_check_ok eval '
	for c in bubblewrap "user namespaces" seccomp sandbox "rlimit nproc" inotify \
		"cgroup memory" "cgroup pids" "cgroup cpu" kernelspec interpreter packages supervisor; do
		grep -q "^ok    $(printf "%-16s" "$c") " stdout || { echo "# no ok line for $c"; exit 1; }
	done'
check doctor_names_the_packages_found_in_the_sandbox eval '
	grep -Eq "^ok    packages         ipykernel [0-9.]+, pandas [0-9.]+, numpy [0-9.]+, matplotlib [0-9.]+, scipy [0-9.]+$" stdout'
check doctor_prints_nothing_on_stderr stderr_empty
check doctor_removes_its_probe_cgroups eval '[ -z "$(find /sys/fs/cgroup -maxdepth 4 -name "kbox-doctor-*" 2>/dev/null)" ]'

fresh
kbox doctor --json
check doctor_json_is_one_object_with_every_check "$PY" -c '
import json, os
lines = open("stdout").read().splitlines()
assert len(lines) == 1, lines
d = json.loads(lines[0])
assert d["backend"] == "bwrap" and d["isolates"] is True and d["kernel_runs"] is True, d
assert d["kernel"] == "python3", d
names = [c["check"] for c in d["checks"]]
assert names == ["bubblewrap", "user namespaces", "seccomp", "identity", "state directory",
    "sandbox", "rlimit nproc", "inotify", "cgroup memory", "cgroup pids", "cgroup cpu",
     "kernelspec", "interpreter", "packages", "supervisor"], names
assert all(c["status"] == "ok" and c["meaning"] == "" for c in d["checks"]), d["checks"]
assert d["cgroup_limits"] == ["memory", "pids", "cpu"], d
'

fresh
kbox doctor --frobnicate
check doctor_unknown_option_exits_2 fails_with 2 'kbox doctor: unknown option --frobnicate (see kbox doctor --help)'
kbox doctor -k no-such-kernel
check doctor_with_an_unknown_kernelspec_fails_that_check eval 'status_is 5 &&
	grep -q "^fail  kernelspec       no kernelspec named \"no-such-kernel\" (searched " stdout &&
	has_line stdout "skip  interpreter      not checked: no kernelspec" &&
	has_line stdout "skip  packages         not checked: no kernelspec" &&
	last_line_is stdout "the default backend (bwrap) isolates kernels here, but the kernel no-such-kernel cannot run in it (see above)"'

# a --rootfs that is no root filesystem is said so, not blamed on the
# machine (the sandbox is judged on the host's files)
mkdir norootfs
kbox doctor --rootfs norootfs
check doctor_with_a_rootfs_without_usr_fails_that_check eval 'status_is 5 &&
	has_line stdout "fail  rootfs           $T/norootfs is a directory without usr: no root filesystem" &&
	grep -q "^ok    sandbox          bwrap made one" stdout &&
	last_line_is stdout "the default backend (bwrap) isolates kernels here, but no session with this --rootfs can start (see above)"'
: >rootfs.file
kbox doctor --rootfs rootfs.file
check doctor_with_a_rootfs_that_is_a_file_fails_that_check eval 'status_is 5 &&
	has_line stdout "fail  rootfs           $T/rootfs.file is not a directory"'

sandboxed root
fresh
kbox_nobwrap doctor
check doctor_without_bwrap_exits_5_and_says_why eval 'status_is 5 &&
	has_line stdout "fail  bubblewrap       bwrap not found in /usr/local/bin, /usr/bin or /bin" &&
	has_line stdout "skip  sandbox          not made: no bwrap" &&
	has_line stdout "skip  interpreter      /usr/bin/python3 found; not run: no sandbox" &&
	last_line_is stdout "the default backend (bwrap) CANNOT isolate kernels here (see above); kbox start will refuse it, and --backend none runs kernels unsandboxed"'

# ---- kbox start without bubblewrap ----

fresh
kbox_nobwrap start -s nobw
check start_without_bwrap_exits_5_in_one_line fails_with 5 \
	"kbox start: backend bwrap: bubblewrap is not installed (apt-get install bubblewrap, see kbox doctor), or choose --backend none to run the kernel unsandboxed"
check start_without_bwrap_leaves_no_session eval '[ ! -e "$S/nobw" ]'
kbox_nobwrap exec -s nobw 1+1
check exec_without_bwrap_exits_5_in_one_line fails_with 5 \
	"kbox exec: backend bwrap: bubblewrap is not installed (apt-get install bubblewrap, see kbox doctor), or choose --backend none to run the kernel unsandboxed"
check exec_without_bwrap_leaves_no_session eval '[ ! -e "$S/nobw" ]'
kbox_nobwrap start -s nobw --backend none
check start_without_bwrap_works_with_backend_none eval 'status_is 0 &&
	stderr_is "kbox: warning: backend none: the kernel runs unsandboxed"'
kbox stop -s nobw

# ---- limits: cgroups, status, the view from inside ----

sandboxed
fresh
kbox start -s lim --memory 300M --pids 100 --cpus 0.5 --tmp-size 20M --file-size 30M
check start_with_limits_exits_0_silently eval 'status_is 0 && stderr_empty'
sv=$(cat "$S/lim/supervisor.pid" 2>/dev/null)
mem_cg=$(own_cgroup memory)/kbox-lim-$sv-1
pids_cg=$(own_cgroup pids)/kbox-lim-$sv-1
cpu_cg=$(own_cgroup cpu)/kbox-lim-$sv-1
check limits_are_written_to_the_sessions_cgroups eval '
	[ "$(cat "$mem_cg/memory.limit_in_bytes")" = 314572800 ] &&
	[ "$(cat "$pids_cg/pids.max")" = 100 ] &&
	[ "$(cat "$cpu_cg/cpu.cfs_quota_us")" = 50000 ] &&
	[ "$(cat "$cpu_cg/cpu.cfs_period_us")" = 100000 ]'
check the_kernel_runs_in_those_cgroups eval '
	k=$("$KBOX" status -s lim --json | "$PY" -c "import json, sys; print(json.load(sys.stdin)[\"kernel_pid\"])") &&
	grep -qx "$k" "$mem_cg/cgroup.procs" && grep -qx "$k" "$pids_cg/cgroup.procs" &&
	grep -qx "$k" "$cpu_cg/cgroup.procs"'
kbox status -s lim
check status_shows_the_limits_applied eval 'status_is 0 &&
	[ "$(status_line limits)" = "memory 300 MiB (cgroup), pids 100 (cgroup), cpus 0.5 (cgroup), /tmp 20 MiB (tmpfs), files up to 30 MiB (rlimit), inotify 32 instances and 8192 watches (user namespace)" ] &&
	[ -z "$(status_line limits_missing)" ]'
check the_limits_event_is_logged events lim \
	'[e for e in ev if e["event"] == "limits"] and [e for e in ev if e["event"] == "limits"][0]["applied"] == "memory 300 MiB (cgroup), pids 100 (cgroup), cpus 0.5 (cgroup), /tmp 20 MiB (tmpfs), files up to 30 MiB (rlimit), inotify 32 instances and 8192 watches (user namespace)" and [e for e in ev if e["event"] == "limits"][0]["missing"] == ""'
kbox exec -s lim 'import os, resource
st = os.statvfs("/tmp"); sh = os.statvfs("/dev/shm")
print(st.f_blocks * st.f_frsize, sh.f_blocks * sh.f_frsize, resource.getrlimit(resource.RLIMIT_FSIZE))'
check inside_tmp_and_shm_are_capped_and_files_limited eval 'status_is 0 &&
	stdout_is "20971520 20971520 (31457280, 31457280)"'

# the data stack under the seccomp filter and the limits
kbox exec -s lim 'import numpy as np, pandas as pd, scipy.stats, scipy.linalg, matplotlib
matplotlib.use("agg")
import matplotlib.pyplot as plt
a = np.arange(1, 7, dtype=float).reshape(2, 3)
df = pd.DataFrame({"g": ["x", "y", "x"], "v": [1, 2, 3]})
fig, ax = plt.subplots(); ax.plot([1, 2, 3]); fig.savefig("/tmp/p.png")
print(a.sum(), df.groupby("g").v.sum().to_dict(), round(scipy.stats.norm.cdf(1.96), 4),
      round(float(scipy.linalg.det(np.array([[2.0, 1.0], [1.0, 3.0]]))), 6),
      open("/tmp/p.png", "rb").read(4) == b"\x89PNG")'
check numpy_pandas_scipy_matplotlib_run_in_the_sandbox eval 'status_is 0 &&
	stdout_is "21.0 {'"'"'x'"'"': 4, '"'"'y'"'"': 2} 0.975 5.0 True"'

# a full /tmp: the cell that filled it says so, and no later cell gets an
# error that is not its own (IPython's history is in memory, not a file
# that a full disk fails)
kbox exec -s lim 'try:
    with open("/tmp/fill", "wb") as f:
        while True: f.write(b"x" * 65536)
except OSError as e:
    print(e.strerror)'
cp stdout fill.out
kbox exec -s lim 'h = 6 * 7'
cp stdout after1.out
kbox exec -s lim 'print(h); import os; os.remove("/tmp/fill")'
check a_full_tmp_shows_no_error_in_a_later_cell eval 'status_is 0 && stdout_is 42 &&
	[ "$(cat fill.out)" = "No space left on device" ] && [ ! -s after1.out ]'

# --cpus 0.5: two processes that each burn 0.5 s of CPU need at least 2 s of
# wall time under the limit (0.5 s without it). A loaded machine only makes
# the wall time longer, so the bound holds whatever else runs beside it.
kbox exec -s lim -t 60s 'import os, time
def burn():
    while time.process_time() < 0.5: pass
start = time.monotonic()
kids = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        burn(); os._exit(0)
    kids.append(pid)
for k in kids: os.waitpid(k, 0)
t = os.times()
print(round(time.monotonic() - start, 2), t.children_user + t.children_system >= 1.0)'
check cpus_limit_makes_1_s_of_cpu_take_2_s_of_wall_time eval 'status_is 0 &&
	"$PY" -c "import sys; w, burnt = open(\"stdout\").read().split(); sys.exit(0 if float(w) >= 1.8 and burnt == \"True\" else 1)"'

kbox restart -s lim
check restart_removes_the_old_kernels_cgroup eval 'status_is 0 && [ ! -d "$mem_cg" ] && [ ! -d "$pids_cg" ] &&
	[ ! -d "$cpu_cg" ] && [ -d "${mem_cg%-1}-2" ]'
kbox stop -s lim
check stop_removes_the_sessions_cgroups eval 'status_is 0 && [ ! -d "${mem_cg%-1}-2" ] &&
	[ ! -d "${pids_cg%-1}-2" ] && [ ! -d "${cpu_cg%-1}-2" ]'

# a supervisor killed with SIGKILL leaves its cgroups; the session's next
# supervisor removes them
fresh
kbox start -s k9
sv=$(cat "$S/k9/supervisor.pid" 2>/dev/null)
k9_cg=$(own_cgroup memory)/kbox-k9-$sv-1
check killed_supervisors_cgroup_exists_while_it_runs eval '[ -d "$k9_cg" ]'
[ -z "$SKIPPING" ] && kill -9 "$sv"
check killed_supervisors_sandbox_goes_with_it wait_for eval '[ ! -s "$k9_cg/cgroup.procs" ]'
# the kernel dies with the supervisor's main thread (PDEATHSIG); the session
# lock goes with its last thread, a little later (under ASan, much later)
[ -z "$SKIPPING" ] && wait_for flock -n -s "$S/k9/supervisor.pid" true
kbox start -s k9
check the_sessions_next_supervisor_removes_the_leftover_cgroup eval 'status_is 0 &&
	[ ! -d "$k9_cg" ] && [ ! -d "$(own_cgroup pids)/kbox-k9-$sv-1" ]'
kbox stop -s k9

fresh
kbox start -s lim --tmp-size 0
check tmp_size_below_1M_is_a_usage_error fails_with 2 'kbox start: invalid --tmp-size "0": expected a size of at least 1M, a number of bytes or one with a suffix K, M, G or T (e.g. 256M, 4G)'
kbox start -s lim --file-size 12x
check file_size_that_is_no_size_is_a_usage_error fails_with 2 'kbox start: invalid --file-size "12x": expected a size of at least 1M, a number of bytes or one with a suffix K, M, G or T (e.g. 256M, 4G)'

# ---- without writable cgroups: rlimits, and kbox start says so ----

sandboxed root
fresh
kbox_rocgroup start -s rl --memory 400M
check start_warns_which_limits_fall_back eval 'status_is 0 &&
	[ "$(wc -l <stderr)" = 1 ] &&
	stderr_is "kbox start: warning: no cgroups here for memory, pids: bounded per process, cpus not at all (kbox doctor says how to get them)"'
kbox status -s rl
check status_shows_the_rlimit_fallbacks eval 'status_is 0 &&
	[ "$(status_line limits)" = "memory 400 MiB (RLIMIT_DATA), pids 1024 (RLIMIT_NPROC), cpus all, /tmp 512 MiB (tmpfs), files up to 4 GiB (rlimit), inotify 32 instances and 8192 watches (user namespace)" ] &&
	status_line limits_missing | grep -q "^cgroup limits not applied: memory: cannot create /sys/fs/cgroup/memory.*: Read-only file system"'
kbox exec -s rl --no-start 'import resource; print(resource.getrlimit(resource.RLIMIT_DATA), resource.getrlimit(resource.RLIMIT_NPROC))'
check inside_the_rlimits_are_set eval 'status_is 0 && stdout_is "(419430400, 419430400) (1024, 1024)"'
kbox exec -s rl --no-start 'try:
    x = bytearray(500 << 20)
except MemoryError:
    print("MemoryError")'
check a_memory_bomb_under_rlimit_data_gets_memory_error eval 'status_is 0 && stdout_is MemoryError'
kbox exec -s rl --no-start 'x = 1
y = bytearray(500 << 20)'
check an_uncaught_memory_error_says_the_limit_and_what_sets_it eval 'status_is 1 &&
	stdout_is "MemoryError: out of memory: the kernel may use 400 MiB (kbox start --memory sets it) at Cell In [3], line 2: y = bytearray(500 << 20)"'
kbox stop -s rl
# once a session: a later start of it does not say it again (here one
# whose kernel exits at once: its failure is all it says)
mkdir -p jp/kernels/dies
echo '{"argv": ["/bin/sh", "-c", "exit 1", "{connection_file}"], "display_name": "Dies", "language": "none"}' \
	>jp/kernels/dies/kernel.json
JUPYTER_PATH=$T/jp kbox_rocgroup start -s rl -k dies
check a_later_start_of_the_session_does_not_warn_again eval '[ "$rc" = 5 ] &&
	[ "$(wc -l <stderr)" = 1 ] && grep -q "^kbox start: session rl: the kernel exited with status 1" stderr'

# ---- --rootfs: system files from another tree ----

sandboxed
fresh
rootfs=$ROOT/rootfs
if [ -z "$SKIPPING" ]; then
	mkdir -p "$rootfs/etc" &&
		ln -s /usr "$rootfs/usr" &&
		for d in bin sbin lib lib64; do
			[ -L "/$d" ] && ln -s "$(readlink "/$d")" "$rootfs/$d"
		done &&
		cp /etc/ld.so.cache "$rootfs/etc/" &&
		printf 'ID=kbox-test-rootfs\n' >"$rootfs/etc/os-release"
fi
kbox start -s rf --rootfs "$rootfs"
check start_with_rootfs_exits_0 eval 'status_is 0 && stderr_empty'
kbox exec -s rf 'import os; print(open("/etc/os-release").read().strip(), os.path.exists("/etc/matplotlibrc"), os.path.exists("/etc/alternatives"))'
check the_sandbox_sees_the_rootfs_etc eval 'status_is 0 && stdout_is "ID=kbox-test-rootfs False False"'
check the_rootfs_is_stored_absolute eval '[ "$(json_field "$S/rf/session.json" rootfs)" = "$rootfs" ]'
kbox stop -s rf
kbox start -s rf2 --rootfs "$ROOT/no-such-dir"
check rootfs_that_does_not_exist_is_a_usage_error fails_with 2 \
	"kbox start: invalid --rootfs \"$ROOT/no-such-dir\": No such file or directory"
kbox start -s rf2 --rootfs "$T"
check rootfs_without_usr_is_a_usage_error fails_with 2 \
	"kbox start: invalid --rootfs \"$T\": a root filesystem has a usr directory, and $T/usr is none"
check failed_starts_leave_no_session eval '[ ! -e "$S/rf2" ]'

tests_done
