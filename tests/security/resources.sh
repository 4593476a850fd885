#!/bin/bash
# tests/security/resources.sh — threats.md rows 1 to 4 against the bwrap
# sandbox: a fork bomb, ten times the memory limit, filling /tmp, /dev/shm
# and the workspace, and a busy loop that ignores SIGINT and SIGTERM.  Each
# test is named after its row.  TAP.
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

# shellcheck source-path=SCRIPTDIR source=lib.sh
ROOT_TAG=ksr
. "$(dirname "$0")/lib.sh"

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
check "the_session_starts_with_the_limits_under_test" eval '
	rc_is start 0 && kx status -s r && keep status &&
	grep -qxF "limits:            memory 256 MiB (cgroup), pids 64 (cgroup), cpus all, /tmp 16 MiB (tmpfs), files up to 8 MiB (rlimit), inotify 32 instances and 8192 watches (user namespace)" "$W/status.out"'
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
check "row01_kbox_status_answers_within_5_s_while_the_bomb_lives" eval '
	kx status -s r && eq "$rc" 0 && le "$ms" 5000 &&
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
	out_is after_oom "[note: kernel restarted: $OOM_CAUSE; earlier state (variables, imports, loaded data) is lost]
2"'
DIAG=
check "row02_status_json_gives_the_out_of_memory_cause" eval '
	eq "$(status_field r last_restart_cause)" "$OOM_CAUSE"'
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
t0=$(date +%s%N)
if [ -z "$SKIPPING" ]; then
	(
		timeout -k 5 60 "$KBOX" exec -s r -t 2s --grace 1s -f "$C/$ncode.py" \
			>"$W/loop.out" 2>"$W/loop.err" </dev/null
		echo $? >"$W/loop.rc"
	) &
	BG="$BG $!"
	# the loop's child: "sleep 1000", a child of the kernel
	SLEEP=$("$PY" - "$KPID" <<'EOF'
import os, sys, time
deadline = time.time() + 10
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
	wait
	BG=
fi
loop_ms=$((($(date +%s%N) - t0) / 1000000))
TIMEOUT_CAUSE="the execution timed out after 2 s and did not stop within 1 s of an interrupt, so the kernel was killed"
DIAG=loop
check "row04_the_loop_is_interrupted_then_killed_after_timeout_and_grace" eval '
	rc_is loop 4 && ge "$loop_ms" 3000 && le "$loop_ms" 20000 &&
	out_is loop "[kernel died: $TIMEOUT_CAUSE; a new kernel was started; earlier state is lost]"'
DIAG=
# the reply goes out before the killed kernel is reaped and replaced: its
# restart event follows within moments (longer under a sanitizer)
for _ in $(seq 1 50); do
	[ -z "$SKIPPING" ] || break
	grep -qF "\"cause\":\"$TIMEOUT_CAUSE\"" "$S/r/events.ndjson" 2>/dev/null && break
	sleep 0.2
done
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
	out_is after_loop "[note: kernel restarted: $TIMEOUT_CAUSE; earlier state (variables, imports, loaded data) is lost]
2" && [ "$(status_field r kernel_pid)" != "$KPID" ]'

echo "1..$n"
