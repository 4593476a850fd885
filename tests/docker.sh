#!/bin/bash
# tests/docker.sh — backend docker against a real engine: a session's
# kernel in a container of the kernel image (container/), its lifecycle
# (start, exec, interrupt, restart, timeout's escalation, stop, the
# supervisor killed), the container's confinement (no network but lo, a
# read-only root, no capabilities, no new privileges, memory, pids and
# /tmp limits), and what kbox says when the engine or the image is
# missing.  TAP.
#
# The engine: KBOX_TEST_DOCKER_HOST (unix:///PATH; default: DOCKER_HOST,
# else /var/run/docker.sock), with the image KBOX_TEST_IMAGE (default
# kbox-kernel, `kbox image build`).  Without them every test is skipped, saying
# why; with KBOX_TEST_ENGINE_REQUIRED=1 (CI) that is a failure instead.
# The docker CLI, when installed, is used only to look (never by kbox).
# shellcheck disable=SC2016 # eval strings expand later, on purpose
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
ROOT_TAG=kd
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"

export DOCKER_HOST=${KBOX_TEST_DOCKER_HOST:-${DOCKER_HOST:-unix:///var/run/docker.sock}}
IMAGE=${KBOX_TEST_IMAGE:-kbox-kernel}
ENGINE=$top_builddir/kbox-engine

# Why the tests cannot run here, or nothing.
engine_skip_reason() {
	[ -x "$ENGINE" ] || { echo "$ENGINE is not built"; return; }
	if ! "$ENGINE" ping >"$ROOT/ping.json" 2>&1; then
		echo "no engine: $(cat "$ROOT/ping.json")"
		return
	fi
	"$ENGINE" image "$IMAGE" >"$ROOT/image.json" 2>&1 ||
		echo "no image $IMAGE (kbox image build): $(cat "$ROOT/image.json")"
}
why_not=$(engine_skip_reason)
if [ -n "$why_not" ] && [ "${KBOX_TEST_ENGINE_REQUIRED-}" = 1 ]; then
	echo "Bail out! KBOX_TEST_ENGINE_REQUIRED=1, and $why_not"
	exit 1
fi
needs kernel
[ -n "$SKIPPING" ] || SKIPPING=$why_not
# docker or podman: what the engine says it is
ENGINE_KIND=$(sed -n 's/.*"engine":"\([a-z]*\)".*/\1/p' "$ROOT/ping.json" 2>/dev/null)

# The containers of this KBOX_HOME, by name (the engine's word).
containers() {
	"$PY" - "$KBOX_HOME" <<'EOF'
import json, os, socket, sys, urllib.parse
path = os.environ["DOCKER_HOST"].removeprefix("unix://")
q = urllib.parse.quote(json.dumps({"label": ["kbox.home=" + sys.argv[1]]}))
s = socket.socket(socket.AF_UNIX)
s.connect(path)
s.sendall(b"GET /v1.41/containers/json?all=1&filters=%s HTTP/1.0\r\nHost: x\r\n\r\n" % q.encode())
data = b""
while chunk := s.recv(65536):
    data += chunk
body = json.loads(data.split(b"\r\n\r\n", 1)[1])
for c in sorted(body, key=lambda c: c["Names"][0]):
    print(c["Names"][0].lstrip("/"), c["Labels"].get("kbox.session"), c["Labels"].get("kbox.generation"))
EOF
}
# True when the engine has no container ID (an id, or a prefix of one).
container_gone() {
	"$PY" - "$1" <<'EOF'
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["DOCKER_HOST"].removeprefix("unix://"))
s.sendall(b"GET /v1.41/containers/%s/json HTTP/1.0\r\nHost: x\r\n\r\n" % sys.argv[1].encode())
data = b""
while chunk := s.recv(65536):
    data += chunk
sys.exit(0 if data.split(b" ")[1] == b"404" else 1)
EOF
}
# The name kbox gives session NAME's container of generation GEN.
hash=$(printf %s "$KBOX_HOME" | sha256sum | cut -c1-12)
cname() { echo "kbox-$hash-$1-$2"; }
no_containers() { [ -z "$(containers)" ]; }
only_container() { [ "$(containers)" = "$(cname "$1" "$2") $1 $2" ]; }

cleanup_more() {
	# (a test that failed half-way: what it left, by this home's label)
	[ -n "$SKIPPING" ] || containers 2>/dev/null | while read -r c _; do
		"$PY" - "$c" <<'EOF' 2>/dev/null
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["DOCKER_HOST"].removeprefix("unix://"))
s.sendall(b"DELETE /v1.41/containers/%s?force=1 HTTP/1.0\r\nHost: x\r\n\r\n" % sys.argv[1].encode())
s.recv(4096)
EOF
	done
}

fresh

# ---- a session, its container, its kernel ----

kbox start -s d --backend docker
check start_says_started_with_backend_docker eval 'status_is 0 && stderr_empty &&
	stdout_is "session d started (backend docker, kernel python3, supervisor pid $(cat "$S/d/supervisor.pid"))"'
check its_container_is_named_and_labelled_for_this_home only_container d 1
check the_start_event_names_the_container events d "[e.get('container') for e in ev if e['event'] == 'start'] == ['$(cname d 1)']"
check session_json_keeps_the_backend_and_the_engine eval '
	[ "$(json_field "$S/d/session.json" backend)" = docker ] &&
	[ "$(json_field "$S/d/session.json" engine)" = "$DOCKER_HOST" ]'

kbox exec -s d 'print(6 * 7)'
check exec_prints_the_result eval 'status_is 0 && stdout_is 42 && stderr_empty'

kbox exec -s d 'import os; print(os.getuid(), os.getcwd(), os.environ["HOME"], "KBOX_CONNECTION" in os.environ)'
check the_kernel_runs_as_the_sandbox_user_in_the_workspace eval 'status_is 0 &&
	stdout_is "$(sb_uid d) /workspace /home/kbox False"'

kbox exec -s d 'import os; print(sorted(os.listdir("/sys/class/net")))'
check no_network_interface_but_lo eval 'status_is 0 && stdout_is "['"'"'lo'"'"']"'

kbox exec -s d 'import socket; print(socket.getaddrinfo("localhost", 80)[0][4][0])
routes = open("/proc/net/route").read().splitlines()[1:]
print(len(routes))'
check no_route_at_all eval 'status_is 0 && [ "$(tail -n 1 stdout)" = 0 ]'

kbox exec -s d '
try:
    open("/etc/kbox-probe", "w")
except OSError as e:
    print(e.errno)'
check the_root_is_read_only eval 'status_is 0 && stdout_is 30'

kbox exec -s d 'st = dict(l.split(":\t") for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
print(st["CapEff"].strip(), st["CapBnd"].strip(), st["NoNewPrivs"].strip())'
check no_capabilities_and_no_new_privileges eval 'status_is 0 &&
	stdout_is "0000000000000000 0000000000000000 1"'

# ---- kbox's seccomp filter, over the engine's own profile ----
# kbox-seccomp, bound read-only, installs the filter bwrap sandboxes have
# before the entrypoint runs: two filters, the answers of row 33
# (tests/security/syscalls.py) as in a bwrap sandbox, and an x32 system
# call kills the whole kernel.

kbox exec -s d 'import os
def st(p):
    s = dict(l.split(":\t") for l in open("/proc/%s/status" % p).read().splitlines() if ":\t" in l)
    return s["Seccomp"].strip(), s["Seccomp_filters"].strip()
print(*st("self"), "KBOX_SECCOMP" in os.environ)
print([m.split()[3].split(",")[0] for m in open("/proc/self/mounts") if m.split()[1] == "/run/kbox-seccomp"])
print(open("/proc/1/cmdline").read().split("\0")[0], *st(1))'
# (pid 1 too: an init outside the filter, of the kernel's uid, could have
# its memory written through /proc/1/mem and run anything)
check the_kernel_and_its_init_are_under_the_engines_profile_and_kboxs_filter eval 'status_is 0 &&
	stdout_is "2 2 False
['"'"'ro'"'"']
/run/kbox-seccomp 2 2"'
kbox exec -s d 'import glob, json
key = json.load(open(glob.glob("/tmp/.kbox/*.json")[0]))["key"]
e = open("/proc/1/environ", "rb").read()
print(len(key) > 8, key.encode() in e, any(v.startswith(b"KBOX_SECCOMP=") and len(v) > 13 for v in e.split(b"\0")))'
check the_inits_environment_shows_neither_the_key_nor_the_filter eval 'status_is 0 &&
	stdout_is "True False False"'

# shellcheck source=tests/security/syscalls.sh
. "$top_srcdir/tests/security/syscalls.sh"
syscall_probe d seccomp
SKIPPING_BEFORE_SYS=$SKIPPING

[ "$(uname -m)" = x86_64 ] || [ -n "$SKIPPING" ] || SKIPPING="x32 is x86_64's"
kbox start -s x32 --backend docker
pyx x32 -t 30 <<'EOF'
import ctypes
print("before", flush=True)
ctypes.CDLL(None).syscall(ctypes.c_long(0x40000000 | 39))  # getpid, x32's number
print("after")
EOF
keep x32
DIAG=x32
check an_x32_system_call_kills_the_kernel_at_once eval '
	rc_is x32 4 && grep -q "SIGSYS" "$W/x32.out" && ! grep -qx after "$W/x32.out" &&
	! grep -q "timed out" "$W/x32.out" "$W/x32.err"'
kbox stop -s x32
SKIPPING=$SKIPPING_BEFORE_SYS
DIAG=

kbox exec -s d 'import os; print(sorted(m.split()[1] for m in open("/proc/self/mounts") if " rw," in m and m.split()[1] not in ("/dev", "/dev/pts", "/dev/mqueue", "/sys/fs/cgroup") and not m.split()[1].startswith("/proc")))'
# (under /proc: procfs itself, and the files the engine masks with /dev/null)
# (Podman mounts a tmpfs on /run and /var/tmp of a read-only root too:
# its pages count in the container's memory)
if [ "$ENGINE_KIND" = podman ]; then
	want="['/dev/shm', '/home/kbox', '/run', '/run/kernel', '/tmp', '/var/tmp', '/workspace']"
else
	want="['/dev/shm', '/home/kbox', '/run/kernel', '/tmp', '/workspace']"
fi
check writable_mounts_are_only_tmp_home_workspace_and_sockets eval 'status_is 0 && stdout_is "$want"'

printf 'a,b\n1,2\n3,4\n' >data.csv
kbox put -s d data.csv
kbox exec -s d 'import pandas as pd, matplotlib.pyplot as plt
df = pd.read_csv("data.csv"); df.to_csv("sums.csv", index=False); print(int(df.b.sum()))
plt.plot(df.a, df.b); plt.show()'
check pandas_reads_what_put_gave_and_a_chart_is_saved eval 'status_is 0 && stderr_empty &&
	[ "$(head -n 1 stdout)" = 6 ] && grep -q "^\[image saved: $S/d/outputs/.*\.png" stdout'
kbox get -s d sums.csv
check get_returns_what_the_kernel_wrote eval 'status_is 0 && [ "$(cat sums.csv)" = "$(printf "a,b\n1,2\n3,4")" ]'

kbox exec -s d 'x = 5'
"$KBOX" exec -s d 'import time; time.sleep(60)' >sleep.out 2>&1 &
bg=$!
BG_PIDS="$bg"
wait_for is_busy d
kbox interrupt -s d
wait "$bg"
brc=$?
kbox exec -s d 'print(x)'
check interrupt_stops_the_cell_and_keeps_state eval '[ $brc = 3 ] && status_is 0 && stdout_is 5 &&
	grep -q "^KeyboardInterrupt" sleep.out'

kbox restart -s d
check restart_makes_a_new_container_and_removes_the_old eval 'status_is 0 && only_container d 2'

kbox exec -s d --timeout 2s 'import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(120)'
check a_timeout_that_interrupt_cannot_end_kills_and_replaces_the_container eval 'status_is 4 &&
	grep -qF "the execution timed out after 2 s and did not stop within 5 s of an interrupt, so the kernel was killed; a new kernel was started" stdout &&
	wait_for only_container d 3'
kbox exec -s d 'print("again")'
check the_new_kernel_answers_after_a_note_of_the_restart eval 'status_is 0 &&
	first_line_is stdout "[note: kernel restarted: the execution timed out after 2 s and did not stop within 5 s of an interrupt, so the kernel was killed; earlier state (variables, imports, loaded data) is lost]" &&
	last_line_is stdout again'

kbox status -s d
check status_shows_backend_docker_its_limits_and_container eval 'status_is 0 &&
	[ "$(status_line backend)" = docker ] &&
	[ "$(status_line limits)" = "memory 2 GiB (cgroup), pids 1024 (cgroup), cpus all, /tmp 512 MiB (tmpfs), files up to 4 GiB (rlimit), inotify not bounded (no user namespace)" ] &&
	[ "$(status_line container)" = "$(cname d 3)" ] && [ "$(status_line image)" = "$IMAGE" ] &&
	[ "$(status_line engine)" = "${DOCKER_HOST#unix://}" ]'

kbox stop -s d
check stop_removes_the_container eval 'status_is 0 && wait_for no_containers'
DIAG=
kbox status -s d
# (exit 5: it is not running)
check a_stopped_sessions_status_keeps_its_image_and_engine eval 'status_is 5 &&
	[ "$(status_line state)" = stopped ] && [ "$(status_line image)" = "$IMAGE" ] &&
	[ "$(status_line engine)" = "${DOCKER_HOST#unix://}" ]'

# ---- limits ----

if selected memory_bomb_is_named_out_of_memory fork_bomb_meets_the_pids_limit tmp_fill_meets_enospc \
	a_kill_after_a_childs_oom_is_not_called_out_of_memory \
	the_sockets_tmpfs_fill_meets_enospc_at_1_MiB; then
	kbox start -s lim --backend docker --memory 256M --pids 64 --tmp-size 16M
fi
kbox exec -s lim 'x = bytearray(600 << 20); x[::4096] = b"a" * len(x[::4096])'
if [ "$ENGINE_KIND" = podman ]; then
	oom="the kernel was killed by signal 9 (SIGKILL), not by kbox: most likely out of memory (limit 256 MiB; Podman reports no OOM kill on cgroup v1)"
else
	oom="the kernel was killed: out of memory (limit 256 MiB)"
fi
check memory_bomb_is_named_out_of_memory eval 'status_is 4 &&
	stdout_is "[kernel died: $oom; a new kernel was started; earlier state is lost]"'
# a process the code started goes over it: the OOM killer takes it, the
# kernel lives on, and the result says so (read from the container's
# memory cgroup: Podman sends no oom event on cgroup v1)
kbox exec -s lim 'import subprocess, sys
x = 6
r = subprocess.run([sys.executable, "-c", "b = bytearray(600 << 20); b[::4096] = b\"a\" * len(b[::4096])"])
print(r.returncode, x * 7)'
# (the first line: the restart after the memory bomb above)
check a_child_killed_for_memory_is_named_and_the_kernel_lives eval 'status_is 0 &&
	stdout_is "[note: kernel restarted: $oom; earlier state (variables, imports, loaded data) is lost]
-9 42
[note: out of memory: 1 process the code started was killed for going over the session'"'"'s memory limit (256 MiB); the kernel and its state are kept]"'
# then the kernel is killed otherwise: the engine says "OOM killed" of
# the container, which the child's kill, already named, makes so
# (Podman says no OOM kill at all: its word stays as for the bomb)
kbox exec -s lim 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'
if [ "$ENGINE_KIND" = podman ]; then
	killed=$oom
else
	killed="the kernel was killed by signal 9 (SIGKILL), not by kbox: perhaps out of memory (limit 256 MiB; the engine cannot tell it from the earlier kill of a process the code started)"
fi
check a_kill_after_a_childs_oom_is_not_called_out_of_memory eval 'status_is 4 &&
	stdout_is "[kernel died: $killed; a new kernel was started; earlier state is lost]"'
kbox exec -s lim 'import subprocess
try:
    ps = [subprocess.Popen(["sleep", "30"]) for i in range(100)]
except OSError as e:
    print(e.errno)'
check fork_bomb_meets_the_pids_limit eval 'status_is 0 && last_line_is stdout 11'
kbox exec -s lim '
try:
    open("/tmp/f", "wb").write(b"x" * (32 << 20))
except OSError as e:
    print(e.errno)'
check tmp_fill_meets_enospc eval 'status_is 0 && stdout_is 28'
kbox exec -s lim '
try:
    open("/run/kernel/f", "wb").write(b"x" * (2 << 20))
except OSError as e:
    print(e.errno)'
check the_sockets_tmpfs_fill_meets_enospc_at_1_MiB eval 'status_is 0 && stdout_is 28'
kbox stop -s lim

# ---- a hostile kernel: a flood on the container's own output, SIGTERM
# ignored.  The helper never blocks on the kernel's log (it drops what
# the log's pipe has no room for), so the restart and the stop still
# remove the container; and each kernel has a sockets directory of its
# own, so nothing of an earlier one would see the next one's sockets ----

if selected a_flooding_kernel_is_replaced_by_restart a_flooding_kernel_is_removed_by_stop; then
	kbox start -s fl --backend docker
	kbox exec -s fl 'import os, signal, subprocess, atexit, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
atexit.register(lambda: time.sleep(1e6))
subprocess.Popen(["python3", "-c", "import os, signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nb = b\"x\" * 16384\nwhile True:\n    os.write(1, b)"], stdout=open("/proc/1/fd/1", "wb"), start_new_session=True)
print(sorted(os.listdir("/run/kernel"))[:1])'
fi
kbox restart -s fl
check a_flooding_kernel_is_replaced_by_restart eval 'status_is 0 && wait_for only_container fl 2'
kbox exec -s fl 'import os, subprocess
subprocess.Popen(["sh", "-c", "trap \"\" TERM; yes xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx >/proc/1/fd/2"], start_new_session=True); print("flooding")'
kbox stop -s fl
check a_flooding_kernel_is_removed_by_stop eval 'status_is 0 && wait_for no_containers'

# ---- the helper killed: its supervisor removes the container by name,
# and a new kernel (a new container) takes its place ----

if selected a_killed_helpers_container_is_removed_and_replaced; then
	kbox start -s hk --backend docker
	sup=$(cat "$S/hk/supervisor.pid")
	kill -9 $(pgrep -P "$sup" -x kbox-engine)
fi
check a_killed_helpers_container_is_removed_and_replaced wait_for only_container hk 2
kbox stop -s hk

# (kbox image build of the recipe the engine has builds nothing:
# tests/image.sh)

# ---- the supervisor killed ----

if selected killing_the_supervisor_removes_its_container; then
	kbox start -s k --backend docker
	only_container k 1 || say "no container to begin with"
	kill -9 "$(cat "$S/k/supervisor.pid")"
fi
check killing_the_supervisor_removes_its_container wait_for no_containers

# the supervisor and its helper both killed at once (SIGKILL, as the OOM
# killer would): the container is left, until the next docker session's
# supervisor of this state directory removes it
if selected an_orphan_is_removed_by_the_next_docker_sessions_start; then
	kbox start -s o1 --backend docker
	sup=$(cat "$S/o1/supervisor.pid")
	kill -9 "$sup" $(pgrep -P "$sup" -x kbox-engine)
	wait_for gone "$sup"
	only_container o1 1 || say "no orphan made"
	kbox start -s o2 --backend docker
fi
check an_orphan_is_removed_by_the_next_docker_sessions_start eval 'status_is 0 && { only_container o2 1 || { say "containers: $(containers | tr "\\n" " ")"; false; }; }'
kbox stop -s o2

# kbox doctor --backend docker: the engine, the image, the orphans (one
# made as above, which doctor removes and names)
if selected doctor_docker_names_the_engine_and_the_image_and_removes_an_orphan; then
	kbox start -s o3 --backend docker
	sup=$(cat "$S/o3/supervisor.pid")
	kill -9 "$sup" $(pgrep -P "$sup" -x kbox-engine)
	wait_for gone "$sup"
	kbox doctor --backend docker --image "$IMAGE" --json
fi
check doctor_docker_names_the_engine_and_the_image_and_removes_an_orphan json_true stdout '(
	[c["check"] for c in j["checks"]] == ["engine", "image", "orphans"] and
	all(c["status"] == "ok" for c in j["checks"]) and j["kernel_runs"] is True and
	j["checks"][0]["detail"].endswith(" at " + a[0]) and
	j["checks"][1]["detail"].startswith(a[1] + ": sha256:") and
	j["checks"][2]["detail"] == "removed 1 left by supervisors that are gone: " + a[2])' \
	"${DOCKER_HOST#unix://}" "$IMAGE" "$(cname o3 1)"
check doctor_docker_left_no_container no_containers

DOCKER_HOST=unix://$ROOT/no-engine.sock kbox doctor --backend docker
check doctor_docker_without_an_engine_exits_5_saying_so eval 'status_is 5 &&
	[ "$(head -n 1 stdout)" = "fail  engine           no container engine at $ROOT/no-engine.sock (No such file or directory): start dockerd (or podman system service), or name its socket with DOCKER_HOST=unix:///PATH when the session starts" ] &&
	last_line_is stdout "the backend docker CANNOT run kernels here (see above)"'

kbox doctor --backend docker --image kbox-test-no-such-image
check doctor_docker_without_the_image_exits_5 eval 'status_is 5 &&
	grep -q "^fail  image            image kbox-test-no-such-image not found in the engine" stdout'

# KBOX_BACKEND and KBOX_IMAGE_NAME: what a new session gets, kbox exec's
# start included, and what doctor checks
KBOX_BACKEND=docker kbox exec -s envd 'print(6 * 7)'
check kbox_backend_docker_gives_a_new_session_a_container eval 'status_is 0 &&
	stdout_is "[note: new session envd: nothing was defined before this call]
42" &&
	grep -q "\"backend\": *\"docker\"" "$S/envd/session.json" &&
	{ only_container envd 1 || { say "containers: $(containers | tr "\\n" " ")"; false; }; }'
kbox stop -s envd >/dev/null 2>&1
KBOX_BACKEND=docker KBOX_IMAGE_NAME=kbox-test-no-such-image kbox exec -s envi 1
check kbox_image_name_is_a_new_docker_sessions_image eval 'status_is 5 &&
	grep -q "image kbox-test-no-such-image not found in the engine" stderr'
KBOX_BACKEND=docker KBOX_IMAGE_NAME=kbox-test-no-such-image kbox doctor
check doctor_checks_the_backend_and_image_the_environment_names eval 'status_is 5 &&
	grep -q "^fail  image            image kbox-test-no-such-image not found in the engine" stdout'

# an image a session runs: rm names its container, not the engine's
# "(must force)", which kbox does not offer
if [ -z "$SKIPPING" ] && selected image_rm_of_an_image_in_use_names_its_container; then
	# (an image of kbox-kernel's files with one name, kbox-test-inuse: a
	# container made, never started, committed)
	echo '{"Image": "kbox-kernel", "Cmd": ["true"]}' >inuse.json
	echo '{}' >empty.json
	api POST "/containers/create?name=kbox-test-inuse-src" inuse.json >create.out
	api POST "/commit?container=kbox-test-inuse-src&repo=kbox-test-inuse&tag=latest" empty.json >commit.out
	api DELETE "/containers/kbox-test-inuse-src?force=1" >/dev/null
	kbox start -s iu2 --backend docker --image kbox-test-inuse
	kbox image rm kbox-test-inuse
	cp stderr inuse.err && echo "$rc" >inuse.rc
	# (a session's container committed: its image has a /run/kernel)
	api POST "/commit?container=$(cname iu2 1)&repo=kbox-test-runkernel&tag=latest" empty.json >commit2.out
	kbox stop -s iu2
	kbox start -s iu3 --backend docker --image kbox-test-runkernel
	cp stderr runkernel.err && echo "$rc" >runkernel.rc
	kbox stop -s iu3
	api DELETE "/images/kbox-test-runkernel?force=1" >/dev/null
	kbox image rm kbox-test-inuse
fi
check image_rm_of_an_image_in_use_names_its_container eval '[ "$(cat inuse.rc)" = 5 ] &&
	grep -qx "kbox image rm: image kbox-test-inuse is in use by the container [0-9a-f]\{12\}: stop the session that runs it first (kbox ls lists the sessions)" inuse.err &&
	status_is 0 && stdout_is "removed image kbox-test-inuse"'
# an image with a /run/kernel of its own: Docker gives the tmpfs its mode,
# which kbox says (Podman gives the tmpfs the mode asked for, and the
# session starts)
if [ "$ENGINE_KIND" = podman ]; then
	check an_image_with_its_own_run_kernel_is_named_so eval '[ "$(cat runkernel.rc)" = 0 ] &&
	no_containers'
else
	check an_image_with_its_own_run_kernel_is_named_so eval '[ "$(cat runkernel.rc)" = 5 ] &&
	[ "$(cat runkernel.err)" = "kbox start: session iu3: the container failed: the container'"'"'s /run/kernel has the mode 0755, not 1777: the image has a /run/kernel of its own, whose mode the engine gave kbox'"'"'s tmpfs; use an image without it before it was ready" ] &&
	no_containers'
fi

kbox doctor --image x
check doctor_image_without_backend_docker_is_refused fails_with 2 \
	"kbox doctor: --image is for --backend docker"
kbox doctor --backend docker --image 'Bad Name'
check doctor_refuses_a_bad_image_name_as_start_does fails_with 2 \
	"kbox doctor: invalid --image \"Bad Name\": not an image reference (NAME, NAME:TAG, NAME@sha256:DIGEST or sha256:ID; NAME in lower case)"

# ---- two sessions: each container has its own files only, and no
# variable of the host's environment ----

if selected another_sessions_files_are_not_in_the_container its_sockets_directory_is_its_kernels_own_tmpfs \
	no_variable_of_the_hosts_environment_reaches_the_kernel; then
	kbox start -s sa --backend docker
	kbox exec -s sa 'open("secret-a.txt", "w").write("a")'
	KBOX_TEST_CANARY=canary-$$ kbox start -s sb --backend docker
	kbox exec -s sb --format json 'import os
roots = {l.split()[4]: l.split()[3] for l in open("/proc/self/mountinfo")}
print(sorted(set(l.split()[3] for l in open("/proc/self/mountinfo") if "/sessions/" in l.split()[3])))
kd = [l.split() for l in open("/proc/self/mounts") if l.split()[1] == "/run/kernel"]
print(kd[0][2], "size=1024k" in kd[0][3].split(","), oct(os.stat("/run/kernel").st_mode & 0o7777) == "0o1777", sorted(os.listdir("/run/kernel")))
print([k for k, v in os.environ.items() if "canary" in k.lower() or "canary" in v])'
	cp stdout two.json
fi
check another_sessions_files_are_not_in_the_container json_true two.json '(
	j["stdout"]["text"].split("\n")[0] == repr([a[0] + "/home", a[0] + "/workspace"]))' "$S/sb"
# (a tmpfs of the container's own, 1 MiB, 1777: the five sockets of one kernel)
check its_sockets_directory_is_its_kernels_own_tmpfs json_true two.json '(
	(l := j["stdout"]["text"].split("\n")[1]).startswith("tmpfs True True [") and
	len(names := eval(l[15:])) == 5 and len({n.rsplit("-", 1)[0] for n in names}) == 1 and
	sorted(n.rsplit("-", 1)[1] for n in names) == ["1", "2", "3", "4", "5"])'
check no_variable_of_the_hosts_environment_reaches_the_kernel json_true two.json '(
	j["stdout"]["text"].split("\n")[2] == "[]")'
kbox stop -s sa
kbox stop -s sb

# ---- kbox run: cells in a container of their own ----

fresh
printf 'import pandas as pd\nprint(pd.Series([1, 2, 3]).sum())\n' >cell.py
# (its cgroup's name holds its container's id: gone once the run is over)
kbox run --backend docker --image "$IMAGE" cell.py -c 'import os, re
print(os.getuid() != 0, os.getcwd() == "/workspace")
print(re.findall("[0-9a-f]{64}", open("/proc/self/cgroup").read())[0])'
check run_with_backend_docker_runs_its_cells_in_a_container eval 'status_is 0 &&
	[ "$(head -n 2 stdout)" = "6
True True" ] && [ "$(wc -l <stdout)" = 3 ] && id=$(tail -n 1 stdout) &&
	[ "${#id}" = 64 ] && container_gone "$id"'
# a run beside a docker session named run: each has a container of its
# own (the run's name has its supervisor's pid), and the session keeps
# its kernel and state
if selected a_run_beside_a_session_named_run_leaves_it_alone; then
	kbox start -s run --backend docker
	kbox exec -s run 'x = "kept"'
	kbox run --backend docker --image "$IMAGE" -c 'print(1 + 1)'
	cp stdout run.out
	echo "$rc" >run.rc
	kbox exec -s run 'print(x)'
fi
check a_run_beside_a_session_named_run_leaves_it_alone eval '[ "$(cat run.rc)" = 0 ] &&
	[ "$(cat run.out)" = 2 ] && status_is 0 && stdout_is kept && only_container run 1'
kbox stop -s run
kbox run --image kbox-kernel -c 1
check run_image_is_only_for_backend_docker fails_with 2 \
	"kbox run: --image is for --backend docker (this session's backend is bwrap)"

# ---- what kbox says when it cannot ----

kbox start -s i --backend docker --image kbox-test-no-such-image
check a_missing_image_is_one_line_naming_the_build eval 'fails_with 5 "kbox start: session i: the container could not start: image kbox-test-no-such-image not found in the engine at ${DOCKER_HOST#unix://}: build it with kbox image build (--name for another than kbox-kernel), or start the session with another: kbox start --image" &&
	[ ! -e "$S/i" ] && no_containers'

# an image that cannot run the kernel (no /bin/sh: an empty one): the
# kernel's exit and its last line say why, not the sockets' directory
if [ -z "$SKIPPING" ] && selected an_image_without_a_shell_is_named_by_the_kernels_last_line \
	doctor_warns_of_an_image_kbox_did_not_build; then
	tar -cf empty.tar -T /dev/null
	api POST "/images/create?fromSrc=-&repo=kbox-test-noshell&tag=latest" empty.tar >import.out
	api POST "/images/$(grep -o 'sha256:[0-9a-f]*' import.out | tail -n 1)/tag?repo=kbox-test-noshell&tag=latest" >/dev/null
	kbox doctor --backend docker --image kbox-test-noshell
	cp stdout noshell.doctor && echo "$rc" >noshell.rc
	kbox start -s ns --backend docker --image kbox-test-noshell
	api DELETE "/images/kbox-test-noshell?force=1" >/dev/null
fi
# (doctor cannot tell: it warns, and says so at the end, with status 0)
check doctor_warns_of_an_image_kbox_did_not_build eval '[ "$(cat noshell.rc)" = 0 ] &&
	grep -q "^warn  image            kbox-test-noshell: sha256:[0-9a-f]\{12\} (not built by kbox image build)$" noshell.doctor &&
	[ "$(tail -n 1 noshell.doctor)" = "the backend docker reaches the engine and the image kbox-test-noshell, which kbox did not build (see above)" ]'

check an_image_without_a_shell_is_named_by_the_kernels_last_line eval 'status_is 5 &&
	stderr_is "kbox start: session ns: the kernel exited with status 127 (it could not be started) before it was ready; its last lines:
  kbox-seccomp: /bin/sh: No such file or directory" && no_containers'

DOCKER_HOST=unix://$ROOT/no-engine.sock kbox start -s n --backend docker
check no_engine_is_one_line_saying_start_it eval 'fails_with 5 "kbox start: session n: the container could not start: no container engine at $ROOT/no-engine.sock (No such file or directory): start dockerd (or podman system service), or name its socket with DOCKER_HOST=unix:///PATH when the session starts"'

DOCKER_HOST=tcp://127.0.0.1:2375 kbox start -s t --backend docker
check a_tcp_engine_is_refused eval 'fails_with 2 "kbox start: DOCKER_HOST=tcp://127.0.0.1:2375: kbox needs the engine on this machine, by its unix socket'"'"'s absolute path (unix:///PATH, at most 107 bytes): the kernel'"'"'s sockets are files here"'

# host functions (kbox-functions(5)): their calls go over the Jupyter
# protocol's stdin channel, the container's as any kernel's
mkdir -p "$ROOT/fn" && printf '%s\n' '{"functions": [{"name": "echo_args", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}, "command": ["/bin/cat"]}]}' >"$ROOT/fn/functions.json"
kbox start -s fnd --backend docker --image "$IMAGE" --functions "$ROOT/fn/functions.json"
kbox exec -s fnd "import asyncio
a = echo_args(1)
b = await asyncio.gather(echo_args(2), echo_args(x=3))
print(a, b)"
check host_functions_are_called_from_a_container eval 'status_is 0 && stdout_is "{'"'"'x'"'"': 1} [{'"'"'x'"'"': 2}, {'"'"'x'"'"': 3}]"'
kbox exec -s fnd "echo_args('1')"
check a_container_s_call_is_checked_on_the_host eval 'status_is 1 &&
	[ "$(tail -n 1 stdout)" = "ArgumentError: echo_args(): x must be an integer, got str" ]'
kbox stop -s fnd

# a Jupyter front end's kernel in a container (kbox kernel, kbox-kernel(1)):
# jupyter_client starts it from a kernelspec kbox kernelspec install wrote
mkdir -p "$ROOT/ks/nb" && chmod 777 "$ROOT/ks/nb" && echo 'a,b' >"$ROOT/ks/nb/data.csv"
kbox kernelspec install --prefix "$ROOT/ks" -b docker -- --image "$IMAGE"
check kernelspec_install_writes_a_docker_kernelspec eval 'status_is 0 &&
	stdout_is "kernelspec kbox-docker-python3 installed in $ROOT/ks/share/jupyter/kernels/kbox-docker-python3 (\"Python 3 (kbox docker sandbox)\": python3 in kbox'"'"'s sandbox)"'
if [ -z "$SKIPPING" ]; then
	(cd "$ROOT/ks/nb" && JUPYTER_PATH=$ROOT/ks/share/jupyter JUPYTER_RUNTIME_DIR=$ROOT/ks/run \
		timeout -k 5 300 "$PY" - "$KBOX" "$S" >"$ROOT/ks/out" 2>"$ROOT/ks/err" <<'EOF'
import json, os, subprocess, sys
from jupyter_client.manager import start_new_kernel
km, kc = start_new_kernel(kernel_name="kbox-docker-python3", startup_timeout=120)
out = []
kc.execute_interactive("import os; print(os.getcwd(), os.listdir('.'))",
                       timeout=60, output_hook=out.append)
# (the session's container, as kbox status says it, whatever the engine)
(name,) = [n for n in os.listdir(sys.argv[2]) if n.startswith("jupyter-")]
st = json.loads(subprocess.run([sys.argv[1], "status", "-s", name, "--format", "json"],
                               capture_output=True, text=True).stdout)
print("".join(m["content"]["text"] for m in out if m["msg_type"] == "stream").strip(),
      bool(st.get("container")), st["backend"])
kc.stop_channels()
km.shutdown_kernel()
EOF
	)
	rc=$?
fi
# (a shutdown that takes the front end longer than its wait ends in a
# kill of kbox kernel: the session then stops by itself)
ks_gone() { no_containers && [ -z "$(ls -d "$S"/jupyter-* 2>/dev/null)" ]; }
check a_front_ends_kernel_runs_in_a_container eval '{ [ "$rc" = 0 ] &&
	[ "$(cat "$ROOT/ks/out")" = "/workspace ['"'"'data.csv'"'"'] True docker" ] && wait_for ks_gone; } ||
	{ why="rc $rc, out: $(cat "$ROOT/ks/out"), err: $(tail -n 5 "$ROOT/ks/err")"; false; }'

kbox start -s b --image kbox-kernel
check image_is_only_for_backend_docker fails_with 2 \
	"kbox start: --image is for --backend docker (this session's backend is bwrap)"

kbox start -s b --backend docker --image ' x'
check a_bad_image_name_is_refused fails_with 2 \
	'kbox start: invalid --image " x": not an image reference (NAME, NAME:TAG, NAME@sha256:DIGEST or sha256:ID; NAME in lower case)'

kbox start -s b --backend docker --image "$(printf 'Kbox\nx')"
check an_image_name_with_a_newline_is_refused_in_one_line fails_with 2 \
	'kbox start: invalid --image "Kbox\nx": not an image reference (NAME, NAME:TAG, NAME@sha256:DIGEST or sha256:ID; NAME in lower case)'

mkdir -p rootfs/usr
kbox start -s b --backend docker --rootfs rootfs
check rootfs_is_refused_with_backend_docker fails_with 2 \
	"kbox start: --rootfs is for the backend bwrap: with --backend docker the system files are the image's (--image)"

DOCKER_HOST=unix://var/run/docker.sock kbox start -s b --backend docker
check a_relative_docker_host_is_refused fails_with 2 \
	"kbox start: DOCKER_HOST=unix://var/run/docker.sock: kbox needs the engine on this machine, by its unix socket's absolute path (unix:///PATH, at most 107 bytes): the kernel's sockets are files here"

DOCKER_HOST=unix://$T kbox start -s b --backend docker
check a_docker_host_that_is_no_socket_is_named_so eval 'fails_with 5 "kbox start: session b: the container could not start: $T is not a socket (a directory): name the engine'"'"'s socket with DOCKER_HOST=unix:///PATH when the session starts" &&
	[ ! -e "$S/b" ]'

tests_done
