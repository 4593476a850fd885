#!/bin/bash
# tests/security/resources.sh — threats.md rows 1 to 4, 30 and 31 against
# the bwrap sandbox: a fork bomb, ten times the memory limit, filling /tmp,
# /dev/shm and the workspace, a busy loop that ignores SIGINT and SIGTERM,
# a session named after another's cgroup prefix, a kernel that floods its
# log or leaves a deep tree in its run directory.  Each test is named after
# its row.  TAP.
#
# Environment (set by `make check`): top_builddir (or KBOX, the kbox to
# test), KERNEL_PYTHON (the host's Python for helpers, default
# /usr/bin/python3).  Run by hand:
#   KBOX=/path/to/build/kbox sh tests/security/resources.sh
# When `kbox doctor` says the sandbox cannot be made here every test is
# skipped with its reason; the fork bomb and memory tests are skipped when
# the pids or memory cgroup cannot be written.
#
# One session ("r") serves every row: --pids 64 --memory 256M --tmp-size
# 16M --file-size 8M.  All of it lives in a private KBOX_HOME; at exit the
# session is stopped, whatever of ours is left is killed by its pid, and
# the directory is removed.
# shellcheck disable=SC2016,SC2034 # eval strings expand later, using these variables
set -u
# bash is needed (`sh tests/security/X.sh` runs it with bash)
[ -n "${BASH_VERSION-}" ] || exec bash "$0" "$@"

# shellcheck source=tests/lib.sh
ROOT_TAG=ksr
. "$(dirname "$0")/../lib.sh"

# ---- can the sandbox be made here? ----

cd "$W" || exit 1
skip_all=
skip_pids=
skip_memory=
kx doctor --json
if [ "$rc" != 0 ]; then
	skip_all="kbox doctor: the bwrap sandbox cannot be made here: $("$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
print("; ".join(c["check"] + ": " + c["detail"] for c in d["checks"] if c["status"] == "fail"))
' "$W/out" 2>/dev/null)"
else
	lim=$("$PY" -c 'import json, sys; print(" ".join(json.load(open(sys.argv[1]))["cgroup_limits"]))' "$W/out")
	case " $lim " in *" pids "*) ;; *) skip_pids="the pids cgroup cannot be written here (kbox doctor)" ;; esac
	case " $lim " in *" memory "*) ;; *) skip_memory="the memory cgroup cannot be written here (kbox doctor)" ;; esac
fi

SKIPPING=$skip_all
kx start -s r --pids 64 --memory 256M --tmp-size 16M --file-size 8M
keep start
SUP=$(cat "$S/r/supervisor.pid" 2>/dev/null)
DIAG="start status"
# (where the cgroups cannot be written, as for a user without a delegated
# subtree, the rlimits stand in: kbox(7), Limits)
mem_by=cgroup pids_by=cgroup
[ -z "$skip_memory" ] || mem_by=RLIMIT_DATA
[ -z "$skip_pids" ] || pids_by=RLIMIT_NPROC
check "the_session_starts_with_the_limits_under_test" eval '
	rc_is start 0 && kx status -s r && keep status &&
	grep -qxF "limits:            memory 256 MiB ($mem_by), pids 64 ($pids_by), cpus all, /tmp 16 MiB (tmpfs), files up to 8 MiB (rlimit), inotify 32 instances and 8192 watches (user namespace)" "$W/status.out"'
# without a session the rest cannot run: the test above failed
[ -n "$SKIPPING" ] || [ -n "$SUP" ] || SKIPPING="the session did not start"
base_skip=$SKIPPING

# ---- row 3: fill /tmp, /dev/shm and the workspace ----

# fill DIR: files of 4 MiB (below --file-size) in DIR until a write fails:
# prints "fill DIR ERRNO BYTES", then removes them.
cat >"$C/fill.py" <<'EOF'
import errno, os

def fill(d):
    block, total, made, err = b"\0" * (1 << 20), 0, 0, None
    try:
        while err is None and made < 32:
            fd = os.open("%s/fill-%d" % (d, made), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            made += 1
            try:
                left = 4 << 20
                while left and err is None:
                    try:
                        w = os.write(fd, block[:left])
                    except OSError as e:
                        err = errno.errorcode[e.errno]
                    else:
                        total += w
                        left -= w
            finally:
                os.close(fd)
    finally:
        for i in range(made):
            os.unlink("%s/fill-%d" % (d, i))
    print("fill", d, err, total)
EOF

DIAG=fill
{
	cat "$C/fill.py"
	echo 'fill("/tmp")'
	echo 'fill("/dev/shm")'
} | pyx r
keep fill
# filled DIR: the fill of DIR stopped with ENOSPC after 15 to 16 MiB.
filled() {
	# shellcheck disable=SC2046 # two words wanted
	set -- $(val fill "fill $1") "" ""
	eq "$1" ENOSPC && le "$2" 16777216 && ge "$2" 15728640
}
check "row03_filling_tmp_stops_with_ENOSPC_at_the_16_MiB_tmpfs_cap" eval '
	rc_is fill 0 && filled /tmp'
check "row03_filling_dev_shm_stops_with_ENOSPC_at_the_same_cap" eval '
	rc_is fill 0 && filled /dev/shm'

DIAG=efbig
pyx r <<'EOF'
import errno, os
block, total, err = b"\1" * (1 << 20), 0, None
with open("/workspace/big", "wb", buffering=0) as f:
    while err is None and total < (64 << 20):
        try:
            total += f.write(block)
        except OSError as e:
            err = errno.errorcode[e.errno]
print("efbig", err, total, os.path.getsize("/workspace/big"))
EOF
keep efbig
check "row03_a_workspace_file_stops_with_EFBIG_at_exactly_8_MiB" eval '
	rc_is efbig 0 && eq "$(val efbig efbig)" "EFBIG 8388608 8388608"'
check "row03_the_hosts_copy_of_the_workspace_file_is_8_MiB" eval '
	eq "$(stat -c %s "$S/r/workspace/big" 2>&1)" 8388608'
rm -f "$S/r/workspace/big"

# ---- row 1: a fork bomb ----

[ -n "$SKIPPING" ] || SKIPPING=$skip_pids
KPID=$(status_field r kernel_pid)
PIDS_CG=
[ -n "$SKIPPING" ] || PIDS_CG=$(cg_dir pids "$KPID")
DIAG=bomb
pyx r <<'EOF'
import errno, os, time
bomb, refused = [], None
while len(bomb) < 500:
    try:
        pid = os.fork()
    except OSError as e:
        refused = errno.errorcode[e.errno]
        break
    if pid == 0:
        try:
            time.sleep(300)
        finally:
            os._exit(0)
    bomb.append(pid)
print("refused", refused)
print("children", len(bomb))
EOF
keep bomb
check "row01_a_fork_bomb_gets_EAGAIN_at_the_pids_limit" eval '
	rc_is bomb 0 && eq "$(val bomb refused)" EAGAIN && ge "$(val bomb children)" 1 &&
	le "$(val bomb children)" 63'
DIAG=bomb
check "row01_the_sandboxs_pids_cgroup_is_capped_at_64_and_refused_forks" eval '
	say "cgroup $PIDS_CG" &&
	eq "$(cat "$PIDS_CG/pids.max")" 64 && le "$(cat "$PIDS_CG/pids.current")" 64 &&
	ge "$(cat "$PIDS_CG/pids.current")" "$(val bomb children)" &&
	ge "$(sed -n "s/^max //p" "$PIDS_CG/pids.events")" 1'
DIAG=
# the supervisor is not starved: its answer is the promise (how long it
# took is the machine's; kx gives up after 120 s)
check "row01_kbox_status_answers_while_the_bomb_lives" eval '
	kx status -s r && eq "$rc" 0 &&
	grep -qxF "state:             idle" "$W/out"'
check "row01_the_host_still_forks_while_the_bomb_lives" eval '
	eq "$(for i in 1 2 3 4 5 6 7 8 9 10; do /bin/sh -c "echo \$0" "$i"; done | tr "\n" " ")" \
		"1 2 3 4 5 6 7 8 9 10 "'
DIAG=unbomb
pyx r <<'EOF'
import os, signal
for pid in bomb:
    os.kill(pid, signal.SIGKILL)
print("reaped", sum(os.waitpid(pid, 0)[0] == pid for pid in bomb))
EOF
keep unbomb
pyx r <<'EOF'
print(1 + 1)
EOF
keep after_bomb
DIAG="unbomb after_bomb"
check "row01_after_the_bomb_the_same_kernel_runs_code" eval '
	rc_is unbomb 0 && eq "$(val unbomb reaped)" "$(val bomb children)" &&
	rc_is after_bomb 0 && out_is after_bomb 2 && eq "$(status_field r kernel_pid)" "$KPID" &&
	le "$(cat "$PIDS_CG/pids.current")" 32'
SKIPPING=$base_skip

# ---- row 2: ten times the memory limit ----

[ -n "$SKIPPING" ] || SKIPPING=$skip_memory
OOM_CAUSE="the kernel was killed: out of memory (limit 256 MiB)"
DIAG=oom
pyx r <<'EOF'
chunks = []
for i in range(40):  # 40 x 64 MiB: 2560 MiB, ten times the limit, each page touched
    chunks.append(b"\1" * (64 << 20))
print("survived", len(chunks))
EOF
keep oom
check "row02_touching_ten_times_the_memory_limit_kills_the_kernel_with_the_oom_cause" eval '
	rc_is oom 4 &&
	out_is oom "[kernel died: $OOM_CAUSE; a new kernel was started; earlier state is lost]"'
check "row02_the_oom_kill_stayed_in_the_sandbox_the_supervisor_runs_on" eval '
	alive "$SUP" && eq "$(status_field r pid)" "$SUP" && kx status -s r && eq "$rc" 0'
pyx r <<'EOF'
print(1 + 1)
EOF
keep after_oom
DIAG=after_oom
check "row02_the_next_exec_notes_the_out_of_memory_cause" eval '
	rc_is after_oom 0 &&
	note_line_is "$W/after_oom.out" "kernel restarted: $OOM_CAUSE; earlier state (variables, imports, loaded data) is lost" &&
	[ "$(sed -n "2,\$p" "$W/after_oom.out")" = 2 ]'
DIAG=
check "row02_status_json_gives_the_out_of_memory_cause" eval '
	eq "$(status_field r last_restart_cause)" "$OOM_CAUSE"'
# a process the code started goes over the limit: the OOM killer takes it
# (the largest), the kernel lives on, and the result says what happened
KPID=$(status_field r kernel_pid)
pyx r <<'EOF'
import subprocess, sys
x = 6
r = subprocess.run([sys.executable, "-c", "b = b'\\1' * (600 << 20)"])
print(r.returncode, x * 7)
EOF
keep child_oom
DIAG=child_oom
check "row02_a_child_killed_for_memory_is_named_and_the_kernel_lives" eval '
	rc_is child_oom 0 && out_is child_oom "-9 42
[note: out of memory: 1 process the code started was killed for going over the session'"'"'s memory limit (256 MiB); the kernel and its state are kept]" &&
	eq "$(status_field r kernel_pid)" "$KPID"'
# then the kernel is killed otherwise: that OOM kill, already named, is
# not its cause
pyx r <<'EOF'
import os, signal
os.kill(os.getpid(), signal.SIGKILL)
EOF
keep self_kill
DIAG=self_kill
check "row02_a_kill_after_a_childs_oom_is_not_blamed_on_memory" eval '
	rc_is self_kill 4 && out_is self_kill "[kernel died: the kernel was killed by signal 9 (SIGKILL); a new kernel was started; earlier state is lost]"'
DIAG=
# (the new kernel's note of that restart, taken here: row 4 reads r's next)
pyx r <<'EOF'
pass
EOF
SKIPPING=$base_skip

# ---- row 4: a busy loop that ignores SIGINT and SIGTERM ----

KPID=$(status_field r kernel_pid)
INIT=$(ppid "$KPID")
BWRAP=$(ppid "$INIT")
BWRAP_PARENT=$(ppid "$BWRAP")
ncode=$((ncode + 1))
cat >"$C/$ncode.py" <<'EOF'
import signal, subprocess
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen(["sleep", "1000"])
while True:
    pass
EOF
SLEEP=
if [ -z "$SKIPPING" ]; then
	(
		timeout -k 5 60 "$KBOX" exec -s r -t 2s --grace 1s -f "$C/$ncode.py" \
			>"$W/loop.out" 2>"$W/loop.err" </dev/null
		echo $? >"$W/loop.rc"
	) &
	BG_PIDS="$BG_PIDS $!"
	# the loop's child: "sleep 1000", a child of the kernel
	SLEEP=$("$PY" - "$KPID" <<'EOF'
import os, sys, time
deadline = time.time() + 60  # a bound: it is found at once
while time.time() < deadline:
    for p in os.listdir("/proc"):
        try:
            if open("/proc/%s/cmdline" % p, "rb").read() != b"sleep\x001000\x00":
                continue
            if open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()[1] == sys.argv[1]:
                print(p)
                sys.exit(0)
        except (OSError, IndexError):
            pass
    time.sleep(0.05)
EOF
)
	# shellcheck disable=SC2086 # a list of pids (not a bare wait: tests/lib.sh)
	wait $BG_PIDS
	BG_PIDS=
fi
TIMEOUT_CAUSE="the execution timed out after 2 s and did not stop within 1 s of an interrupt, so the kernel was killed"
DIAG=loop
check "row04_the_loop_is_interrupted_then_killed_after_timeout_and_grace" eval '
	rc_is loop 4 &&
	out_is loop "[kernel died: $TIMEOUT_CAUSE; a new kernel was started; earlier state is lost]"'
DIAG=
# the reply goes out before the killed kernel is reaped and replaced: its
# restart event follows
[ -n "$SKIPPING" ] ||
	wait_for grep -qF "\"cause\":\"$TIMEOUT_CAUSE\"" "$S/r/events.ndjson"
check "row04_the_interrupt_came_first_then_the_kill" "$PY" -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
names = [e["event"] for e in ev]
kill = [i for i, e in enumerate(ev) if e["event"] == "restart" and e.get("cause") == sys.argv[2]]
ok = len(kill) == 1 and "interrupt" in names[:kill[0]] and ev[kill[0]]["requested"] is True
if not ok:
    print("#   events:", names)
sys.exit(0 if ok else 1)
' "$S/r/events.ndjson" "$TIMEOUT_CAUSE"
check "row04_the_whole_sandbox_died_kernel_bwrap_init_and_bwrap" eval '
	say "kernel $KPID, init $INIT, bwrap $BWRAP (supervisor $SUP)" &&
	eq "$BWRAP_PARENT" "$SUP" &&
	gone "$KPID" && gone "$INIT" && gone "$BWRAP"'
check "row04_the_loops_child_process_died_with_the_pid_namespace" eval '
	say "sleep 1000: host pid ${SLEEP:-not found}" && [ -n "$SLEEP" ] && gone "$SLEEP"'
pyx r <<'EOF'
print(1 + 1)
EOF
keep after_loop
DIAG=after_loop
check "row04_a_new_kernel_answers_and_says_why_it_was_restarted" eval '
	rc_is after_loop 0 &&
	note_line_is "$W/after_loop.out" "kernel restarted: $TIMEOUT_CAUSE; earlier state (variables, imports, loaded data) is lost" &&
	[ "$(sed -n "2,\$p" "$W/after_loop.out")" = 2 ] && [ "$(status_field r kernel_pid)" != "$KPID" ]'

# ---- row 30: leftover cgroups are removed by recorded path, never by prefix ----

# Session c's supervisor is killed; session c-SUP (SUP its pid) has
# cgroups named kbox-c-SUP-…, under the prefix of those c's supervisor
# left.  Starting c again removes c's leftovers, and c-SUP runs on.
SKIPPING=$skip_all
[ -n "$SKIPPING" ] || [ -z "$skip_memory" ] || [ -z "$skip_pids" ] || SKIPPING=$skip_memory
CTL=memory
[ -z "$skip_memory" ] || CTL=pids
kx start -s c
keep start_c
SUP_C=$(cat "$S/c/supervisor.pid" 2>/dev/null)
CC=c-$SUP_C
kx start -s "$CC"
keep start_cc
DIAG="start_c start_cc"
check "row30_a_session_named_after_anothers_cgroup_prefix_starts" eval '
	rc_is start_c 0 && rc_is start_cc 0 && [ -n "$SUP_C" ]'
[ -n "$SKIPPING" ] || [ -n "$SUP_C" ] || SKIPPING="the sessions did not start"
SUP_CC=$(cat "$S/$CC/supervisor.pid" 2>/dev/null)
KPID_CC=$(status_field "$CC" kernel_pid)
CG_C=
CG_CC=
if [ -z "$SKIPPING" ]; then
	CG_C=$(cg_dir "$CTL" "$(status_field c kernel_pid)")
	CG_CC=$(cg_dir "$CTL" "$KPID_CC")
	kill -9 "$SUP_C"
	# the kernel dies with the supervisor (PDEATHSIG), the session lock
	# with the supervisor's last thread, a little later
	wait_for flock -n -s "$S/c/supervisor.pid" true
fi
kx start -s c
keep restart_c
DIAG=restart_c
check "row30_the_killed_supervisors_own_leftover_cgroup_is_removed" eval '
	rc_is restart_c 0 && say "c: $CG_C; $CC: $CG_CC" &&
	case $CG_CC in "${CG_C%-1}"-*) ;; *) say "not under the prefix"; false ;; esac &&
	[ ! -d "$CG_C" ]'
DIAG=
check "row30_the_other_sessions_kernel_supervisor_and_cgroup_are_untouched" eval '
	alive "$KPID_CC" && alive "$SUP_CC" && [ -d "$CG_CC" ] &&
	grep -qx "$KPID_CC" "$CG_CC/cgroup.procs" && eq "$(status_field "$CC" kernel_pid)" "$KPID_CC"'
pyx "$CC" <<'EOF'
print(6 * 7)
EOF
keep after_cc
DIAG=after_cc
check "row30_the_other_sessions_kernel_still_answers_without_a_restart" eval '
	rc_is after_cc 0 && out_is after_cc 42'
# A ledger put in c's session directory, where code that reached the
# state directory can write, is never read (review 18, B18-2: it named
# c-SUP's cgroups, and c's next supervisor killed c-SUP's supervisor and
# kernel); a supervisor keeps its ledger where no sandbox reaches.
if [ -z "$SKIPPING" ]; then
	printf '%s\n%s\n' "$CG_CC" "$(cg_dir "$CTL" "$SUP_CC")" >"$S/c/cgroups"
fi
kx stop -s c
kx start -s c
keep replant_c
DIAG=replant_c
check "row30_a_ledger_put_in_the_session_directory_is_never_read" eval '
	rc_is replant_c 0 && alive "$KPID_CC" && alive "$SUP_CC" && [ -d "$CG_CC" ] &&
	eq "$(status_field "$CC" kernel_pid)" "$KPID_CC"'
kx stop -s c
kx stop -s "$CC"
SKIPPING=$base_skip

# ---- row 31: the kernel's own log, and a deep tree in its run directory ----

SKIPPING=$skip_all
kx start -s l
keep start_l
DIAG=start_l
check "row31_a_session_for_the_log_and_run_directory_starts" eval 'rc_is start_l 0'
[ -n "$SKIPPING" ] || [ -s "$S/l/supervisor.pid" ] || SKIPPING="the session did not start"

# every descriptor of the kernel: a pipe (its stdout and stderr, and
# ipykernel's copies of them), a socket, an anonymous inode, /dev/null or
# IPython's history in the sandbox's home; none names a file of the host
DIAG=fds_l
pyx l <<'EOF'
import os, sys
targets = {}
for fd in sorted(int(f) for f in os.listdir("/proc/self/fd")):
    try:
        targets[fd] = os.readlink("/proc/self/fd/%d" % fd)
    except OSError:
        pass  # the listing's own descriptor, closed again
def sandboxed(t):
    return (t == "/dev/null" or t.startswith(("pipe:[", "socket:[", "anon_inode:"))
            or t.startswith("/tmp/.ipython/"))  # IPython history, in its /tmp
print("stderr", targets.get(sys.stderr.fileno(), "?")[:6])
print("others", sorted((fd, t) for fd, t in targets.items() if not sandboxed(t)))
EOF
keep fds_l
check "row31_the_kernels_stderr_is_a_pipe_and_no_descriptor_names_a_host_file" eval '
	rc_is fds_l 0 && eq "$(val fds_l stderr)" "pipe:[" && eq "$(val fds_l others)" "[]" &&
	! grep -qF "$ROOT" "$W/fds_l.out"'

# 50 MiB written to the kernel's own stderr (ipykernel keeps it as
# sys.stderr.fileno(); fd 2 is its capture pipe), then a last line
DIAG=flood_l
pyx l -t 120s <<'EOF'
import os, sys
fd, line = sys.stderr.fileno(), b"x" * 1023 + b"\n"
written = 0
for _ in range(50 * 1024):
    written += os.write(fd, line)
os.write(fd, b"flood done\n")
print("written", written)
EOF
keep flood_l
# log_done: the flood's last line has reached the kernel's log
log_done() { [ "$(tail -n 1 "$S/l/kernel.log" 2>/dev/null)" = "flood done" ]; }
[ -n "$SKIPPING" ] || wait_for log_done
log_bytes() { stat -c %s "$S/l/kernel.log" "$S/l/kernel.log.1" 2>/dev/null | awk '{ t += $1 } END { print t + 0 }'; }
DIAG=flood_l
check "row31_50_MiB_to_the_kernels_stderr_leave_at_most_2_MiB_of_log" eval '
	rc_is flood_l 0 && eq "$(val flood_l written)" 52428800 &&
	le "$(stat -c %s "$S/l/kernel.log")" 1048576 && le "$(stat -c %s "$S/l/kernel.log.1")" 1048576 &&
	say "kernel.log and kernel.log.1: $(log_bytes) bytes" && le "$(log_bytes)" 2097152'
check "row31_the_log_keeps_the_newest_output_and_the_one_before_in_kernel_log_1" eval '
	eq "$(tail -n 1 "$S/l/kernel.log")" "flood done" &&
	eq "$(tail -n 1 "$S/l/kernel.log.1" | cut -c 1-8)" xxxxxxxx'
pyx l <<'EOF'
print(6 * 7)
EOF
keep after_flood_l
DIAG=after_flood_l
check "row31_the_same_kernel_answers_after_the_flood" eval '
	rc_is after_flood_l 0 && out_is after_flood_l 42'

# a tree 5000 directories deep in /run/kernel (the tmpfs of the kernel's
# sockets), its path far longer than PATH_MAX, with a link out at the
# bottom
DIAG=deep_l
pyx l <<'EOF'
import os
os.chdir("/run/kernel")
for _ in range(5000):
    os.mkdir("d")
    os.chdir("d")
os.symlink("/workspace", "out")
os.mkdir("locked")
os.chmod("locked", 0)
os.chdir("/workspace")
open("/workspace/kept", "w").write("kept\n")
print("deep", 5000)
EOF
keep deep_l
check "row31_a_5000_deep_tree_is_made_in_the_run_directory" eval '
	rc_is deep_l 0 && out_is deep_l "deep 5000"'
kx restart -s l
keep restart_l
DIAG=restart_l
check "row31_restart_succeeds_after_the_deep_tree" eval 'rc_is restart_l 0'
pyx l <<'EOF'
import os
print(sorted(n for n in os.listdir("/run/kernel") if not n.startswith("kernel-")), open("/workspace/kept").read().strip())
EOF
keep after_deep_l
DIAG=after_deep_l
check "row31_the_new_kernel_answers_the_tree_is_gone_and_the_workspace_kept" eval '
	rc_is after_deep_l 0 &&
	note_line_is "$W/after_deep_l.out" "kernel restarted: restarted on request (kbox restart); earlier state (variables, imports, loaded data) is lost" &&
	[ "$(sed -n "2,\$p" "$W/after_deep_l.out")" = "[] kept" ] &&
	[ "$(find "$S/l" -name d | wc -l)" = 0 ]'
kx stop -s l
SKIPPING=$base_skip

tests_done
