#!/bin/bash
# tests/security/limits.sh — threats.md row 32: where cgroups cannot bound
# a session, what it can take from all that the processes of the user
# sandboxes run as share.  Each session's user namespace bounds its
# inotify instances (32) and watches (8192) and, through RLIMIT_NPROC counted in that
# namespace, its processes and threads: one session at its limits leaves
# another session its own, and the user theirs; kbox doctor checks both
# bounds, and where cgroups cannot be used says how to get them.  Each
# test is named after its row.  TAP.
#
# Environment (set by `make check`): top_builddir (or KBOX), KERNEL_PYTHON.
# Run by hand (as root and as a user):
#   KBOX=/path/to/build/kbox bash tests/security/limits.sh
#
# Two sessions, "a" and "b", --pids 64.  Under root they start in a mount
# namespace of their own where every cgroup hierarchy is read-only (as
# for an ordinary user without delegated cgroups), so that the fallbacks
# are what is tested in both identities; an ordinary user's start as this
# machine allows (without delegated cgroups: the same fallbacks).
# shellcheck disable=SC2016,SC2034 # eval strings expand later, using these variables
set -u
[ -n "${BASH_VERSION-}" ] || exec bash "$0" "$@"

# shellcheck source=tests/lib.sh
ROOT_TAG=ksl
. "$(dirname "$0")/../lib.sh"

cd "$W" || exit 1
sandbox_or_skip

# kx_nocg ARGS...: kx, under root in a mount namespace where every cgroup
# hierarchy is read-only (what it starts stays there).
kx_nocg() {
	if [ "$(id -u)" != 0 ]; then
		kx "$@"
		return
	fi
	[ -z "$SKIPPING" ] || return 0
	timeout -k 5 90 unshare -m --propagation private sh -c '
		for m in $(awk "\$3 == \"cgroup\" || \$3 == \"cgroup2\" { print \$2 }" /proc/self/mounts); do
			mount -o remount,bind,ro "$m" || exit 99
		done
		exec "$@"' sh "$KBOX" "$@" >"$W/out" 2>"$W/err" </dev/null
	rc=$?
}

# doctor_check NAME [FILE]: "STATUS DETAIL" of kbox doctor's check NAME in
# the JSON output FILE (default the first doctor's); its meaning follows
# on the next lines.
doctor_check() {
	"$PY" -c '
import json, sys
for c in json.load(open(sys.argv[1]))["checks"]:
    if c["check"] == sys.argv[2]:
        print(c["status"], c["detail"])
        print(c["meaning"])
' "${2:-$W/doctor.out}" "$1" 2>/dev/null
}

# ---- kbox doctor ----

DIAG=doctor
# Linux 5.14 and later count RLIMIT_NPROC per user namespace
kv=$(uname -r | sed 's/^\([0-9]*\)\.\([0-9]*\).*/\1 \2/')
# shellcheck disable=SC2086 # two numbers
nproc_want=$(printf '%s %s\n' $kv | awk '{ print ($1 > 5 || ($1 == 5 && $2 >= 14)) ? "ok" : "warn" }')
check "row32_kbox_doctor_checks_that_rlimit_nproc_is_counted_per_session" eval '
	rc_is doctor 0 && eq "$(doctor_check "rlimit nproc" | head -1 | cut -d" " -f1)" "$nproc_want"'
# and says how many sessions the user's own limit holds (under root, each
# session's uid has it to itself)
user_max=$(cat /proc/sys/fs/inotify/max_user_instances 2>/dev/null || echo 128)
if [ "$(id -u)" = 0 ]; then
	room="each session's own uid has the $user_max of fs.inotify.max_user_instances to itself"
else
	room="the user's $user_max (fs.inotify.max_user_instances) are room for $((user_max / 32)) sessions at that bound, shared with your own programs"
fi
check "row32_kbox_doctor_checks_that_inotify_is_bounded_per_session" eval '
	rc_is doctor 0 && eq "$(doctor_check inotify | head -1)" "ok each session may hold 32 inotify instances and 8192 watches (the limits of its own user namespace); $room"'
# where kbox may make cgroups (pids among them) there is no delegation
# check; where it may not (an ordinary user without delegated cgroups,
# and root with read-only cgroups, made here) it warns how to get them
pids_cg=$("$PY" -c 'import json, sys; print("pids" in json.load(open(sys.argv[1]))["cgroup_limits"])' "$W/doctor.out" 2>/dev/null)
# delegation_said FILE: the delegation check of FILE warns, says what the
# fallbacks share and how to get cgroups
delegation_said() {
	doctor_check delegation "$1" >"$W/delegation"
	head -1 "$W/delegation" | grep -q "^warn " &&
		grep -qF "without cgroups each session is bounded process by process" "$W/delegation" &&
		grep -qF "RLIMIT_NPROC, which stands in for the pids cgroup," "$W/delegation" &&
		grep -qF "to get cgroup limits, " "$W/delegation" ||
		{ say "delegation check: $(cat "$W/delegation")"; return 1; }
}
if [ "$pids_cg" = True ]; then
	check "row32_kbox_doctor_has_no_delegation_warning_where_cgroups_can_be_made" eval '
		rc_is doctor 0 && eq "$(doctor_check delegation)" ""'
else
	check "row32_kbox_doctor_says_how_to_get_cgroups_where_none_can_be_made" eval '
		rc_is doctor 0 && delegation_said "$W/doctor.out" &&
		grep -qF "start kbox inside a cgroup of your own" "$W/delegation"'
fi
if [ "$(id -u)" = 0 ]; then
	kx_nocg doctor --json
	keep doctor_nocg
	DIAG=doctor_nocg
	check "row32_kbox_doctor_as_root_without_writable_cgroups_says_so" eval '
		rc_is doctor_nocg 0 && delegation_said "$W/doctor_nocg.out" &&
		grep -qF "run kbox where root may write /sys/fs/cgroup" "$W/delegation"'
fi

# ---- two sessions ----

kx_nocg start -s a --pids 64
keep start_a
kx_nocg start -s b --pids 64
keep start_b
DIAG="start_a start_b"
INOTIFY="inotify 32 instances and 8192 watches (user namespace)"
check "row32_kbox_status_gives_each_session_its_inotify_bound" eval '
	rc_is start_a 0 && rc_is start_b 0 &&
	status_field a limits | grep -qF ", $INOTIFY" && status_field b limits | grep -qF ", $INOTIFY"'
[ -n "$SKIPPING" ] || { [ -s "$S/a/supervisor.pid" ] && [ -s "$S/b/supervisor.pid" ]; } ||
	SKIPPING="the sessions did not start"
LIMITS_A=$(status_field a limits)
echo "# session a's limits: $LIMITS_A"

# ---- inotify: a at its bound; b and the host still get theirs ----

# inotify_hold NAME: in the session, inotify instances until one fails;
# kept open, in the kernel's variable NAME
inotify_hold() {
	pyx "$1" <<EOF
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
$2 = []
while len($2) < 1000:
    fd = libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0:
        print("refused", errno.errorcode[ctypes.get_errno()])
        break
    $2.append(fd)
print("instances", len($2))
EOF
}
# what the processes of the sandbox's host user hold already (others'
# sessions under root, the user's own programs): the two sessions' 64 and
# the host's one must fit in what that user may have
in_use=$(for d in /proc/[0-9]*; do
	[ "$(stat -c %u "$d" 2>/dev/null)" = "$(sb_uid a)" ] || continue
	ls -l "$d/fd" 2>/dev/null | grep -c "anon_inode:inotify"
done | awk '{ n += $1 } END { print n + 0 }')
user_max=$(cat /proc/sys/fs/inotify/max_user_instances 2>/dev/null || echo 128)
base_skip=$SKIPPING
[ -n "$SKIPPING" ] || [ $((user_max - in_use)) -gt 64 ] ||
	SKIPPING="uid $(sb_uid a)'s processes already hold $in_use of its $user_max inotify instances"
inotify_hold a held
keep inotify_a
inotify_hold b held
keep inotify_b
[ -n "$SKIPPING" ] || "$PY" -c '
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_CLOEXEC)
print("host", "ok" if fd >= 0 else errno.errorcode[ctypes.get_errno()])
' >"$W/inotify_host.out" 2>&1
DIAG=inotify_a
check "row32_inotify_instances_in_a_session_stop_with_EMFILE_at_32" eval '
	rc_is inotify_a 0 && eq "$(val inotify_a instances)" 32 && eq "$(val inotify_a refused)" EMFILE'
DIAG="inotify_a inotify_b"
check "row32_while_a_holds_its_32_another_session_gets_its_own_32" eval '
	rc_is inotify_b 0 && eq "$(val inotify_b instances)" 32 && eq "$(val inotify_b refused)" EMFILE'
DIAG=
check "row32_while_both_hold_theirs_the_host_user_makes_an_inotify_instance" eval '
	eq "$(cat "$W/inotify_host.out")" "host ok"'
for s in a b; do
	pyx "$s" <<'EOF'
for fd in held:
    os.close(fd)
print("closed", len(held))
EOF
done
SKIPPING=$base_skip

# what a session gets besides: 8192 watches in all (its namespace's
# user.max_inotify_watches), then ENOSPC; one file of /tmp watched each
pyx a <<'EOF'
import ctypes, errno, os, tempfile
libc = ctypes.CDLL(None, use_errno=True)
d = tempfile.mkdtemp()
fd = libc.inotify_init1(os.O_CLOEXEC)
watches, refused = 0, None
while watches < 9000:
    p = os.path.join(d, str(watches))
    open(p, "w").close()
    if libc.inotify_add_watch(fd, p.encode(), 0x2) < 0:  # IN_MODIFY
        refused = errno.errorcode[ctypes.get_errno()]
        break
    watches += 1
os.close(fd)
print("watches", watches)
print("refused", refused)
EOF
keep watches_a
DIAG=watches_a
check "row32_inotify_watches_in_a_session_stop_with_ENOSPC_at_8192" eval '
	rc_is watches_a 0 && eq "$(val watches_a watches)" 8192 && eq "$(val watches_a refused)" ENOSPC'

# ---- processes: a at its pids limit; b and the host still fork ----

pyx a <<'EOF'
import threading
release = threading.Event()
threads, refused = [], None
while len(threads) < 200:
    t = threading.Thread(target=release.wait)
    try:
        t.start()
    except RuntimeError as e:
        refused = str(e)
        break
    threads.append(t)
print("threads", len(threads))
print("refused", refused)
EOF
keep threads_a
pyx b <<'EOF'
import threading
release = threading.Event()
threads, refused = [], None
for i in range(40):
    t = threading.Thread(target=release.wait)
    try:
        t.start()
    except RuntimeError as e:
        refused = str(e)
        break
    threads.append(t)
release.set()
for t in threads:
    t.join()
print("threads", len(threads))
print("refused", refused)
EOF
keep threads_b
[ -n "$SKIPPING" ] || "$PY" -c '
import threading
release = threading.Event()
threads = [threading.Thread(target=release.wait) for i in range(40)]
n = 0
try:
    for t in threads:
        t.start()
        n += 1
finally:
    release.set()
print("host", n)
' >"$W/threads_host.out" 2>&1
pyx a <<'EOF'
release.set()
for t in threads:
    t.join()
print("released", len(threads))
EOF
keep release_a
DIAG=threads_a
check "row32_threads_in_a_session_stop_at_its_pids_limit" eval '
	rc_is threads_a 0 && eq "$(val threads_a refused)" "can'"'"'t start new thread" &&
	ge "$(val threads_a threads)" 30 && le "$(val threads_a threads)" 63'
DIAG="threads_a threads_b"
check "row32_while_a_is_at_its_limit_another_session_starts_40_threads" eval '
	rc_is threads_b 0 && eq "$(val threads_b threads)" 40 && eq "$(val threads_b refused)" None'
DIAG=
check "row32_while_a_is_at_its_limit_the_host_user_starts_40_threads" eval '
	eq "$(cat "$W/threads_host.out")" "host 40"'
DIAG=release_a
check "row32_the_session_at_its_limit_still_runs_code" eval '
	rc_is release_a 0 && ge "$(val release_a released)" 30'

# What the limits fall back to is said in one short line that points at
# kbox doctor, once for a session: its next start does not say it again.
# Under root here the cgroups are there (nothing to say); an ordinary
# user has none of its own here.
kx start -s cw
keep cw1
kx stop -s cw
kx start -s cw
keep cw2
kx rm -f -s cw
DIAG="cw1 cw2"
if [ "$(id -u)" = 0 ]; then
	check "row32_the_cgroup_fallback_warning_is_one_line_once_per_session" eval '
		rc_is cw1 0 && rc_is cw2 0 && [ ! -s "$W/cw1.err" ] && [ ! -s "$W/cw2.err" ]'
else
	check "row32_the_cgroup_fallback_warning_is_one_line_once_per_session" eval '
		rc_is cw1 0 && rc_is cw2 0 && [ "$(wc -l <"$W/cw1.err")" = 1 ] &&
		grep -qx "kbox start: warning: no cgroups here for [a-z, ]*: bounded per process[a-z, ]* (kbox doctor says how to get them)" "$W/cw1.err" &&
		[ ! -s "$W/cw2.err" ]'
fi
DIAG=

tests_done
