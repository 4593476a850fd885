#!/bin/sh
# tests/security/protocol.sh — threats.md rows 15, 16, 18, 41-43 and 49
# against the bwrap sandbox: output floods (a print loop, a 200 MB
# display, 10^5 stream messages) come back bounded and marked with kbox's
# memory bounded; forged, unsigned and replayed execute_requests sent
# straight to the kernel's shell socket do not run; the kernel cannot be
# reached over the network from outside its namespace; and clients of the
# control socket that do not read, idle connections, partial requests on
# many connections and requests with a member given twice neither cost
# other clients their output or access, nor the supervisor unbounded
# memory, nor run what a filter did not see.  Each test is named after its row.
# TAP.
#
# Environment (set by `make check`): top_builddir (or KBOX, the kbox to
# test), KERNEL_PYTHON (the host's Python with pyzmq, default
# /usr/bin/python3).  Run by hand:
#   KBOX=/path/to/build/kbox sh tests/security/protocol.sh
# When `kbox doctor` says the sandbox cannot be made here, every test is
# skipped with its reason.
#
# One session ("pr", the default limits).  All of it lives in a private
# KBOX_HOME; at exit the session is stopped, whatever of ours is left is
# killed by its pid, and the directory is removed.
# shellcheck disable=SC2016,SC2034 # eval strings expand later, on purpose
set -u

ROOT_TAG=ksp
# the memory bounds below are judged by kbox's peak RSS (GNU time)
measure_rss=yes
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"

# check_rss NAME KIB: the last kbox's peak RSS was under KIB (skipped
# without GNU time).
check_rss() {
	if [ -z "$SKIPPING" ] && [ ! -x /usr/bin/time ]; then
		n=$((n + 1))
		echo "ok $n - $1 # SKIP GNU time (/usr/bin/time) is not installed"
		return
	fi
	if [ -z "$SKIPPING" ] && [ "$asan" = yes ]; then
		n=$((n + 1))
		echo "ok $n - $1 # SKIP AddressSanitizer build: memory measured (${rss:-?} KiB), not judged"
		return
	fi
	check "$1" eval '[ -n "$rss" ] && [ "$rss" -lt '"$2"' ]'
}

# marker_field N: field N (1 bytes, 2 lines, 3 spill path) of the one
# truncation marker in ./stdout.
marker_field() {
	case $1 in 3) f=3- ;; *) f=$1 ;; esac
	# (or, when messages never arrived, "the text kept is in PATH, but ...")
	sed -n -e 's/^\[\.\.\. \([0-9]*\) bytes in \([0-9]*\) lines left out; the complete text is in \(.*\) \.\.\.\]$/\1 \2 \3/p' \
		-e 's/^\[\.\.\. \([0-9]*\) bytes in \([0-9]*\) lines left out; the text kept is in \(.*\), but [0-9]* messages of the kernel never arrived (see the notes) \.\.\.\]$/\1 \2 \3/p' \
		stdout 2>/dev/null | cut -d' ' -f"$f"
}
# vmrss PID: the VmRSS of PID in KiB.
vmrss() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB$/\1/p' "/proc/$1/status"; }

# ---- can the sandbox be made here? ----

SKIPPING=$(sandbox_skip_reason zmq)

fresh
kbox start -s pr
check session_pr_starts_in_the_bwrap_sandbox eval 'status_is 0 &&
	stdout_is "session pr started (backend bwrap, kernel python3, supervisor pid $(cat "$S/pr/supervisor.pid"))"'
SPID=$(cat "$S/pr/supervisor.pid" 2>/dev/null)
kbox status -s pr --json
cp stdout "$ROOT/status.json" 2>/dev/null
CONN=$ROOT/conn-pr.json
kernel_conn pr "$CONN"
KPID=$(py -c 'import json, sys; print(json.load(open(sys.argv[1]))["kernel_pid"])' "$ROOT/status.json")

# ---- row 18: no port to scan from outside the sandbox ----

# (its sockets are in the sandbox's own tmpfs, /run/kernel: the host
# reaches them through the sandbox's root only)
check row18_connection_file_transport_is_ipc_in_the_sandboxs_run_kernel json_true "$CONN" \
	'j["transport"] == "ipc" and j["ip"].startswith(a[0] + "/")' "/proc/$KPID/root/run/kernel"
check row18_kernel_sockets_are_unix_sockets_in_run_kernel eval '"$PY" -c "
import json, stat, os, sys
j = json.load(open(sys.argv[1]))
for ch in (\"shell\", \"iopub\", \"stdin\", \"control\", \"hb\"):
    assert stat.S_ISSOCK(os.lstat(\"%s-%d\" % (j[\"ip\"], j[ch + \"_port\"])).st_mode), ch
" "$CONN"'
check row18_kernel_net_namespace_differs_from_the_hosts eval '[ -n "$(readlink "/proc/$KPID/ns/net")" ] &&
	[ "$(readlink "/proc/$KPID/ns/net")" != "$(readlink /proc/$$/ns/net)" ]'

fresh
kexec pr <<'EOF'
import socket
print(socket.if_nameindex())
def entries(name):
    return [l.split() for l in open("/proc/net/" + name).read().splitlines()[1:]]
for name in ("tcp6", "udp", "udp6", "raw", "raw6"):
    print(name, len(entries(name)))
listen = sorted(e[1] for e in entries("tcp") if e[3] == "0A")
pipe = get_ipython().kernel.iopub_socket.io_thread._pipe_port
print(listen == ["0100007F:%04X" % pipe], listen)
EOF
check row18_sandbox_network_has_only_lo eval 'status_is 0 && [ "$(head -n 1 stdout)" = "[(1, '"'"'lo'"'"')]" ]'
check row18_sandbox_has_no_tcp6_udp_or_raw_sockets eval '[ "$(sed -n 2,6p stdout)" = "tcp6 0
udp 0
udp6 0
raw 0
raw6 0" ]'
# ipykernel's IOPub pipe (for forked children) listens on the sandbox's
# own 127.0.0.1; nothing else listens.
check row18_only_tcp_listener_is_ipykernels_iopub_pipe_on_loopback eval '[ "$(sed -n 7p stdout | cut -d" " -f1)" = True ]'

# A port the kernel listens on, reserved on the host's 127.0.0.1 by a
# bound socket that does not listen: from the host it is refused.
fresh
py - "$KBOX" >stdout 2>stderr <<'EOF'
import errno, socket, subprocess, sys
hold = socket.socket()
hold.bind(("127.0.0.1", 0))
port = hold.getsockname()[1]
code = """
import socket, threading
srv = socket.socket()
srv.bind(("127.0.0.1", %d))
srv.listen(4)
def serve():
    while True:
        c, _ = srv.accept()
        c.sendall(b"kernel-listener\\n")
        c.close()
threading.Thread(target=serve, daemon=True).start()
c = socket.create_connection(("127.0.0.1", %d), timeout=5)
print(c.recv(100).decode().strip())
""" % (port, port)
r = subprocess.run([sys.argv[1], "exec", "-s", "pr", code], capture_output=True, text=True, timeout=60)
print("inside:", r.returncode, r.stdout.strip())
try:
    c = socket.create_connection(("127.0.0.1", port), timeout=5)
    print("host: connected:", c.recv(100))
except OSError as e:
    print("host:", errno.errorcode.get(e.errno, e))
EOF
rc=$?
check row18_kernels_port_is_refused_from_the_host_namespace eval 'status_is 0 && stdout_is "inside: 0 kernel-listener
host: ECONNREFUSED"'

# ---- row 16: forged, unsigned and replayed execute_requests ----

cat >"$ROOT/forge.py" <<'EOF'
# forge.py CONNECTION-FILE RESULT: send execute_requests straight to the
# kernel's shell socket: signed with a wrong key, a valid signature of other
# content, unsigned, a valid one twice (the replay), and a valid barrier
# whose reply shows the ones before it were handled.  Each would touch or
# append to a file in /workspace.  RESULT gets the replies seen.
import hashlib, hmac, json, sys, time, uuid
import zmq

conn = json.load(open(sys.argv[1]))
key = conn["key"].encode()
ctx = zmq.Context()
s = ctx.socket(zmq.DEALER)
s.setsockopt(zmq.LINGER, 0)
s.setsockopt(zmq.IDENTITY, b"forger-" + uuid.uuid4().hex.encode())
s.connect("ipc://%s-%d" % (conn["ip"], conn["shell_port"]))

def frames(code):
    h = {"msg_id": uuid.uuid4().hex, "msg_type": "execute_request", "session": "forger",
         "username": "forger", "date": "2026-01-01T00:00:00.000000Z", "version": "5.3"}
    c = {"code": code, "silent": False, "store_history": False, "user_expressions": {},
         "allow_stdin": False, "stop_on_error": False}
    return h["msg_id"], [json.dumps(h).encode(), b"{}", b"{}", json.dumps(c).encode()]

def sign(k, parts):
    m = hmac.new(k, digestmod=hashlib.sha256)
    for p in parts:
        m.update(p)
    return m.hexdigest().encode()

def send(sig, parts):
    s.send_multipart([b"<IDS|MSG>", sig] + parts)

def touch(name):
    return "open('/workspace/%s', 'w').close()" % name

replies = []
def wait_reply(msg_id, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if s.poll(200):
            f = s.recv_multipart()
            i = f.index(b"<IDS|MSG>")
            h, p = json.loads(f[i + 2]), json.loads(f[i + 3])
            if h["msg_type"] == "execute_reply":
                replies.append(p.get("msg_id"))
                if p.get("msg_id") == msg_id:
                    return True
    return False

ids = {}
ids["wrong_key"], p = frames(touch("forged-wrong-key"))
send(sign(bytes(reversed(key)), p), p)
ids["tampered"], p = frames(touch("forged-tampered"))
send(sign(key, p[:3] + [json.dumps({"code": "1", "silent": True}).encode()]), p)
ids["unsigned"], p = frames(touch("forged-unsigned"))
send(b"", p)
ids["valid"], p = frames("open('/workspace/replayed.txt', 'a').write('ran\\n')")
vsig = sign(key, p)
send(vsig, p)
valid = wait_reply(ids["valid"])
send(vsig, p)
ids["barrier"], p = frames(touch("barrier"))
send(sign(key, p), p)
barrier = wait_reply(ids["barrier"])
json.dump({"ids": ids, "replies": replies, "valid_answered": valid, "barrier_answered": barrier,
           "valid_signature": vsig.decode()}, open(sys.argv[2], "w"))
EOF

fresh
W=$S/pr/workspace
LOG0=$(wc -l 2>/dev/null <"$S/pr/kernel.log")
py "$ROOT/forge.py" "$CONN" "$T/forge.json" >stdout 2>stderr
rc=$?
check row16_valid_requests_are_answered eval 'status_is 0 &&
	json_true forge.json "j[\"valid_answered\"] and j[\"barrier_answered\"]" && [ -e "$W/barrier" ]'
check row16_request_signed_with_a_wrong_key_does_not_run eval '[ ! -e "$W/forged-wrong-key" ]'
check row16_request_with_the_signature_of_other_content_does_not_run eval '[ ! -e "$W/forged-tampered" ]'
check row16_unsigned_request_does_not_run eval '[ ! -e "$W/forged-unsigned" ]'
check row16_replayed_request_does_not_run_again eval '[ "$(cat "$W/replayed.txt")" = ran ]'
check row16_only_the_two_valid_requests_get_replies json_true forge.json \
	'j["replies"] == [j["ids"]["valid"], j["ids"]["barrier"]]'
# the kernel's stderr reaches kernel.log through the supervisor (a pipe it
# reads): wait until the four rejections are there
# four_rejections: log.new, kernel.log's new lines, holds four ValueErrors.
four_rejections() {
	tail -n +"$((LOG0 + 1))" "$S/pr/kernel.log" >log.new
	[ "$(grep -c "^ValueError" log.new)" -ge 4 ]
}
[ -n "$SKIPPING" ] || wait_for four_rejections >/dev/null
VSIG=$(py -c 'import json; print(json.load(open("forge.json"))["valid_signature"])')
check row16_kernel_rejects_each_with_its_reason eval '
	[ "$(grep -cE "^ValueError: Invalid Signature: b'"'"'[0-9a-f]{64}'"'"'\$" log.new)" = 2 ] &&
	[ "$(grep -cxF "ValueError: Unsigned Message" log.new)" = 1 ] &&
	[ "$(grep -cxF "ValueError: Duplicate Signature: b'"'"'$VSIG'"'"'" log.new)" = 1 ] &&
	[ "$(grep -c "^ValueError" log.new)" = 4 ] || { why="$(grep ^ValueError log.new)"; false; }'
KEY=$(py -c 'import json, sys; print(json.load(open(sys.argv[1]))["key"])' "$CONN")
check row16_rejections_log_no_key eval '[ ${#KEY} -eq 64 ] && ! grep -qF -- "$KEY" "$S/pr/kernel.log"'

# ---- rows 41-43: the control socket's clients ----

cat >"$ROOT/ctl.py" <<'EOF'
# ctl.py SESSION_DIR KBOX TEST: clients of a session's control socket that
# misbehave (kbox-protocol(7)); one JSON object of what happened on
# standard output.  Every wait is for a line or a state the supervisor
# reports, bounded by the socket's timeout.
import json, os, socket, subprocess, sys

os.chdir(sys.argv[1])  # the socket's path may be long: connect by its name
kbox, test = sys.argv[2], sys.argv[3]
spid = int(open("supervisor.pid").read())

def connect(rcvbuf=0):
    s = socket.socket(socket.AF_UNIX)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect("control.sock")  # blocking: it waits for room in the backlog
    s.settimeout(120)
    return s

def send(s, req):
    s.sendall((req if isinstance(req, str) else json.dumps(req)).encode() + b"\n")

def line(s):
    b = b""
    while not b.endswith(b"\n"):
        d = s.recv(1)
        if not d:
            return None
        b += d
    return json.loads(b)

def call(req):
    s = connect()
    send(s, req)
    while True:
        m = line(s)
        if m is None or "ok" in m:
            s.close()
            return m

def closed(s):
    # read what it holds: has the supervisor closed it?
    s.setblocking(False)
    try:
        while s.recv(1 << 16):
            pass
        return True
    except BlockingIOError:
        return False
    finally:
        s.settimeout(120)

def kbox_exec(code):
    r = subprocess.run([kbox, "exec", "-s", os.path.basename(os.getcwd()), code],
                       capture_output=True, text=True, timeout=120)
    return {"rc": r.returncode, "stdout": r.stdout, "stderr": r.stderr}

def rss():
    for l in open("/proc/%d/status" % spid):
        if l.startswith("VmRSS:"):
            return int(l.split()[1])

out = {}
def report(kind, value, tb):
    # a test that failed says where, in what the check reads
    import traceback
    print(json.dumps({"error": "".join(traceback.format_exception(kind, value, tb))[-400:],
                      "so_far": out}))
sys.excepthook = report
if test == "duplicate":
    s = connect()
    send(s, '{"op":"status","op":"execute","code":"open(\'/workspace/dup-ran\', \'w\').close()"}')
    out["op_twice"] = line(s)
    send(s, '{"op":"execute","code":"print(1)","code":"print(2)"}')
    out["code_twice"] = line(s)
elif test == "busy":
    # one execution runs until its client goes, 255 more wait their turn:
    # every connection waits for an answer
    # (its grace is long: on a loaded machine the kernel may take seconds
    # to format the KeyboardInterrupt, and it is not the kill judged here)
    run = connect()
    send(run, {"op": "execute", "code": "import time\nwhile True: time.sleep(0.05)",
               "grace": 120})
    out["started"] = line(run).get("started")
    held = [run]
    for i in range(254):
        held.append(connect())
        send(held[-1], {"op": "execute", "code": "pass"})
    while call({"op": "status"})["queued"] != 254:
        pass
    held.append(connect())
    send(held[-1], {"op": "execute", "code": "pass"})
    send(held[-1], {"op": "status"})  # answered once the execute is queued
    out["queued"] = line(held[-1])["queued"]
    out["exec"] = kbox_exec("print(1)")
    for s in held:  # the clients go: what runs is interrupted, what waits dropped
        s.close()
    # once the supervisor has seen them go (until then a new connection is
    # the 257th, which gets the busy error): nothing queued or running
    while True:
        st = call({"op": "status"})
        if st and st.get("ok") and st["queued"] == 0 and st["running_execs"] == 0:
            break
    out["after"] = kbox_exec("print(2)")
elif test == "idle":
    # 256 connections that wait for nothing: a new one closes the idlest
    held = [connect() for i in range(256)]
    send(held[-1], {"op": "status"})
    out["status"] = line(held[-1])["ok"]  # all 256 are taken in
    out["exec"] = kbox_exec("print(1)")
    out["closed"] = [i for i, s in enumerate(held) if closed(s)]
elif test == "noread":
    # clients that never read their replies (~15 MB: the text three
    # times), each followed by a probe on a connection of its own, until
    # the supervisor has cut two of them off
    big = {"op": "execute", "code": "print('x' * 5_000_000)", "max_output": 16777216,
           "format": "json", "with_text": True}
    def cut_offs():
        return sum('"client-cut-off"' in l for l in open("events.ndjson"))
    stuck, out["probes"], before = [], [], cut_offs()
    while cut_offs() - before < 2 and len(stuck) < 16:
        s = connect(4096)
        send(s, big)
        line(s)  # its started line, and no more: the reply stays unread
        stuck.append(s)
        r = call({"op": "execute", "code": "print('probe %d')" % len(stuck)})
        out["probes"].append(r.get("text"))
    out["rss_kib"] = rss()
    out["closed"] = [i for i, s in enumerate(stuck[:-1]) if closed(s)]
    # a slow reader that reads at last gets its reply whole
    s, b = stuck[-1], b""
    while not b.endswith(b"\n"):
        d = s.recv(1 << 20)
        if not d:
            break
        b += d
    r = json.loads(b)
    out["last_reply"] = [r["re"], r["status"], len(r["text"]), r["result"]["stdout"]["total_bytes"]]
elif test == "partial":
    # 16 connections each send 15 MiB of a request line and no newline
    # (240 MiB in all): the supervisor holds at most 64 MiB of partial
    # lines, closing the largest, oldest first; the peak of its resident
    # memory is read from this test's start (clear_refs resets it)
    with open("/proc/%d/clear_refs" % spid, "w") as f:
        f.write("5")
    part = b'{"op":"execute","code":"' + b"x" * (15 << 20)
    held = []
    for i in range(16):
        s = connect()
        try:
            s.sendall(part)
        except (BrokenPipeError, ConnectionResetError):
            pass
        held.append(s)
    out["status"] = call({"op": "status"})["ok"]  # after every byte was read
    for l in open("/proc/%d/status" % spid):
        if l.startswith("VmHWM:"):
            out["hwm_kib"] = int(l.split()[1])
    out["closed"] = [i for i, s in enumerate(held) if closed(s)]
    for s in held:
        s.close()
print(json.dumps(out))
EOF

# Row 43: a member given twice is refused, naming it: a filter in front
# of the socket that reads the first "op" cannot be walked around.
fresh
py "$ROOT/ctl.py" "$S/pr" "$KBOX" duplicate >ctl.json 2>stderr
check row43_a_request_with_op_twice_is_refused_naming_it json_true ctl.json \
	'j["op_twice"] == {"ok": False, "kind": "usage", "error": "duplicate member \"op\": a member may be given once"}'
check row43_a_request_with_code_twice_is_refused_naming_it json_true ctl.json \
	'j["code_twice"] == {"ok": False, "kind": "usage", "error": "duplicate member \"code\": a member may be given once"}'
kbox exec -s pr 'import os; print(os.path.exists("/workspace/dup-ran"))'
check row43_neither_ran eval 'status_is 0 && stdout_is False'

# Row 49: partial request lines.  Each connection may hold one of up to a
# request's 16 MiB, all together 64 MiB: 16 connections that each send 15
# MiB of a line and no newline leave the supervisor's peak under 112 MiB
# (it would pass 240 MiB), the 12 whose lines were the largest and oldest
# when the bound was reached are closed and logged, and the session
# answers.
fresh
py "$ROOT/ctl.py" "$S/pr" "$KBOX" partial >ctl.json 2>stderr
check row49_partial_requests_past_the_bound_close_the_largest_oldest json_true ctl.json \
	'j["status"] is True and j["closed"] == list(range(12))'
check row49_the_closed_partial_requests_are_logged events pr \
	'[e["why"] for e in ev if e["event"] == "partial-request-cut-off"] ==
	 ["the partial requests of all clients passed what the supervisor holds"] * 12'
if [ -z "$SKIPPING" ] && [ "$asan" = yes ]; then
	n=$((n + 1))
	echo "ok $n - row49_supervisor_peak_stays_under_112_mib # SKIP AddressSanitizer build: not judged"
else
	check row49_supervisor_peak_stays_under_112_mib json_true ctl.json \
		'j["hwm_kib"] < 114688 or print("#   VmHWM", j["hwm_kib"], "KiB")'
fi

# Row 42: 256 connections.  When each waits for an answer (an execution
# runs, 255 wait their turn), one more gets the busy error, exit 6; when
# they wait for nothing, a new one closes the idlest and is served.
fresh
py "$ROOT/ctl.py" "$S/pr" "$KBOX" busy >ctl.json 2>stderr
check row42_when_256_connections_wait_for_answers_kbox_exec_is_busy_exit_6 json_true ctl.json \
	'j["started"] is True and j["queued"] == 255 and j["exec"] == {"rc": 6, "stdout": "",
	 "stderr": "kbox exec: session pr: too many control connections\n"}'
check row42_once_those_clients_go_the_session_answers json_true ctl.json \
	'j["after"] == {"rc": 0, "stdout": "2\n", "stderr": ""}'
fresh
py "$ROOT/ctl.py" "$S/pr" "$KBOX" idle >ctl.json 2>stderr
check row42_256_idle_connections_do_not_lock_kbox_exec_out json_true ctl.json \
	'j["status"] is True and j["exec"] == {"rc": 0, "stdout": "1\n", "stderr": ""}'
check row42_the_idlest_connection_is_closed_for_it json_true ctl.json 'j["closed"] == [0]'
# A connection that waits for nothing is closed after 60 s: opened now,
# judged at the end of this file.
IDLE_OUT=$ROOT/idle.out
if [ -z "$SKIPPING" ]; then
	(cd "$S/pr" && "$PY" -c '
import socket
s = socket.socket(socket.AF_UNIX)
s.connect("control.sock")
s.settimeout(180)
try:
    print("closed" if s.recv(1) == b"" else "data")
except socket.timeout:
    print("open")
' >"$IDLE_OUT" 2>&1) &
fi

# Row 41: clients that never read their replies (~15 MB each), until two
# are cut off.  What the supervisor holds for clients is bounded (64 MiB
# in all): those that read nothing for the longest are cut off, every
# execution keeps its output (the kernel is not blamed), the supervisor
# stays bounded, and a slow reader that reads at last gets its reply
# whole.
fresh
py "$ROOT/ctl.py" "$S/pr" "$KBOX" noread >ctl.json 2>stderr
check row41_executions_keep_their_output_while_clients_do_not_read json_true ctl.json \
	'len(j["probes"]) < 16 and j["probes"] == ["probe %d\n" % k for k in range(1, len(j["probes"]) + 1)]'
check row41_the_clients_that_read_nothing_longest_are_cut_off json_true ctl.json 'j["closed"] == [0, 1]'
check row41_a_slow_reader_that_reads_gets_its_reply_whole json_true ctl.json \
	'j["last_reply"] == ["execute", "ok", 5000001, 5000001]'
check row41_the_cut_offs_are_logged_and_no_output_is_shed events pr \
	'[e["why"] for e in ev if e["event"] == "client-cut-off"] == ["more waited for all clients than the supervisor holds"] * 2
	 and not [e for e in ev if e["event"] in ("shedding", "memory")]'
if [ -z "$SKIPPING" ] && [ "$asan" = yes ]; then
	n=$((n + 1))
	echo "ok $n - row41_supervisor_rss_stays_under_96_mib # SKIP AddressSanitizer build: not judged"
else
	check row41_supervisor_rss_stays_under_96_mib json_true ctl.json \
		'j["rss_kib"] < 98304 or print("#   VmRSS", j["rss_kib"], "KiB")'
fi

# ---- row 15: floods ----

# A `yes`: print in a loop for 3 s.
fresh
kexec pr <<'EOF'
import time
end = time.time() + 3
while time.time() < end:
    print("y")
EOF
SPILL=$(marker_field 3)
check row15_yes_flood_exits_0 eval 'status_is 0 && stderr_empty'
check row15_yes_flood_shows_100_lines_a_marker_and_100_lines eval '[ "$(wc -l <stdout)" = 201 ] &&
	[ "$(sed -n "1,100p;102,201p" stdout | sort -u)" = y ] &&
	[ "$(sed -n 101p stdout)" = "[... $(marker_field 1) bytes in $(marker_field 2) lines left out; the complete text is in $S/pr/outputs/$(basename "$SPILL") ...]" ]'
check row15_yes_flood_complete_text_is_spilled_as_the_marker_says eval '[ -f "$SPILL" ] &&
	[ "$(wc -l <"$SPILL")" = $(($(marker_field 2) + 200)) ] &&
	[ "$(wc -c <"$SPILL")" = $(($(marker_field 1) + 400)) ] && [ "$(sort -u "$SPILL")" = y ]'
check_rss row15_yes_flood_kbox_peak_rss_is_under_64_mib 65536

# One display of 200 MB: over the 64 MiB message cap, refused by the
# socket unread, and said so.
fresh
kexec pr <<'EOF'
from IPython.display import display
display({"text/plain": "x" * 200_000_000}, raw=True)
EOF
# (what never arrived is counted too: the display, and what iopub lost
# until it was connected again)
check row15_200_mb_display_is_left_out_with_a_note eval 'status_is 0 && stderr_empty &&
	[ "$(wc -l <stdout)" -eq 2 ] &&
	grep -qx "\[note: [1-9][0-9]* messages* the kernel sent during this execution never reached kbox (most likely its output queue overflowed while it flooded output faster than kbox reads): some output may be missing\]" stdout &&
	[ "$(tail -n 1 stdout)" = "[note: output was lost: iopub broke during this execution (most likely a message over 67108864 bytes, the most kbox takes) and was reconnected; what the kernel sent meanwhile (output, an error) is missing]" ]'
check_rss row15_200_mb_display_kbox_peak_rss_is_under_64_mib 65536
kbox exec -s pr 'print("next")'
check row15_after_the_lost_display_the_next_exec_has_its_output eval 'status_is 0 && stdout_is next'

# 60 MB: under the message cap, left out of the result with its size.
# (Output right after it would be over the rate limit's byte budget.)
fresh
cat >big.py <<'EOF'
from IPython.display import display
display({"text/plain": "x" * 60_000_000}, raw=True)
EOF
# (On a loaded machine libzmq can still be taking the 60 MB in two seconds
# after the reply: then iopub is given up and the loss said, with what
# never arrived counted and the display shown if it did arrive; that keeps
# the promise too: the test judges the bound, not which came first.)
LOST="[note: output was lost: iopub broke during this execution (most likely a message over 67108864 bytes, the most kbox takes) and was reconnected; what the kernel sent meanwhile (output, an error) is missing]"
kbox exec -s pr -f big.py
NEVER='^\[note: [1-9][0-9]* messages* the kernel sent during this execution never reached kbox (most likely its output queue overflowed while it flooded output faster than kbox reads): some output may be missing\]$'
DROPPED='^\[note: [1-9][0-9]* display messages were dropped: the kernel sent output faster than kbox reads\]$'
check row15_60_mb_display_is_left_out_with_its_size eval 'status_is 0 &&
	{ stdout_is "[display not shown: text/plain of 60000000 bytes]" ||
	  { grep -q "^\[note: " stdout &&
	    ! grep -v -x -F -e "[display not shown: text/plain of 60000000 bytes]" -e "$LOST" stdout |
	      grep -v -e "$NEVER" -e "$DROPPED" | grep -q .; }; }'
check_rss row15_60_mb_display_kbox_peak_rss_is_under_4_times_the_message_cap 262144
kbox exec -s pr --format json -f big.py
check row15_60_mb_display_in_json_is_omitted_bytes json_true stdout \
	'(j["displays"] in ([{"data": {"text/plain": {"omitted_bytes": 60000000}}, "display_id": None}], [])
	 and all(__import__("re").match("output was lost: iopub broke |[0-9]+ messages? the kernel sent during this execution never reached kbox |[0-9]+ display messages were dropped: ", n) for n in j["notices"])
	 and (j["displays"] != [] or j["notices"] != [])
	 or print("#   notices:", j["notices"], "displays:", j["displays"]))'

# FLOOD stream messages, one line each, sent as ipykernel's stdout sends
# a flushed write but without waiting for each to go out (a flush waits
# for the kernel's IOPub thread, at about 0.5 ms of the kernel's CPU a
# line): 7 x 10^4, 35 times the rate limit's burst, but read all the same
# while the outputs quota lasts: each line is shown and spilled, none
# dropped.  More than the replay history holds (65536), so that the
# supervisor's memory is judged below with that history full; an
# AddressSanitizer build does not judge it, and sends 2 x 10^4 (the
# sanitized supervisor's decoding is slow).  (live_flood, in make
# check-slow, sends 10^6 through libkbox.)
FLOOD=70000
[ "$asan" = no ] || FLOOD=20000
fresh
kexec pr <<EOF
import sys
o = sys.stdout
for i in range($FLOOD):
    o.session.send(o.pub_thread, "stream", {"name": "stdout", "text": "%d\\n" % i},
                   parent=o.parent_header, ident=o.topic)
EOF
SPILL=$(marker_field 3)
NEVER=$(sed -n 's/^\[note: \([0-9]*\) messages* the kernel sent during this execution never reached kbox.*/\1/p' stdout 2>/dev/null)
NEVER=${NEVER:-0}
check row15_line_flood_exit_0 eval 'status_is 0 && stderr_empty'
check row15_line_flood_head_is_lines_0_to_99 eval '[ "$(head -n 100 stdout)" = "$(seq 0 99)" ]'
check row15_line_flood_lines_over_the_rate_limit_are_kept_not_dropped eval '! grep -q "were dropped" stdout &&
	[ -n "$SPILL" ] && sed -n 101p stdout | grep -q "^\[\.\.\. [0-9]* bytes in [0-9]* lines left out; "'
check row15_line_flood_marker_matches_the_spill_file eval '[ -f "$SPILL" ] &&
	[ "$(wc -l <"$SPILL")" = $(($(marker_field 2) + 200)) ] &&
	[ "$(wc -c <"$SPILL")" = $(($(marker_field 1) + $(head -n 100 stdout | wc -c) + $(sed -n "102,201p" stdout | wc -c))) ]'
# Each line is one message, so the spill file holds FLOOD lines, but for
# what the kernel's own PUB socket drops at its high-water mark (1000
# queued) when the machine is too busy for kbox to keep up: that loss
# happens before kbox sees anything, and is counted by the numbers of
# ipykernel's message ids (NEVER, in a note).
check row15_line_flood_lines_are_all_spilled_or_counted_as_never_arrived eval '[ -f "$SPILL" ] &&
	l=$(wc -l <"$SPILL") && [ "$l" -le $FLOOD ] && [ $((l + NEVER)) -ge $FLOOD ] ||
	{ why="spilled $(wc -l <"$SPILL"), never arrived $NEVER"; false; }'
check row15_line_flood_spill_file_is_in_order "$PY" -c '
import sys
v = [int(x) for x in open(sys.argv[1])]
sys.exit(0 if v[0] == 0 and v[-1] < int(sys.argv[2]) and all(a < b for a, b in zip(v, v[1:])) else 1)
' "$SPILL" "$FLOOD"
check_rss row15_line_flood_kbox_peak_rss_is_under_64_mib 65536

# The supervisor read that flood: its memory came back, all but the
# replay history (the last 65536 signatures, as jupyter_client keeps) and
# its shared libraries (~7 MiB).  Idle, it is ~8 MiB (bench/session.py).
if [ -z "$SKIPPING" ] && [ "$asan" = yes ]; then
	n=$((n + 1))
	echo "ok $n - row15_supervisor_rss_after_a_flood_stays_under_24_mib # SKIP AddressSanitizer build: VmRSS $(vmrss "$SPID") KiB, not judged"
else
	check row15_supervisor_rss_after_a_flood_stays_under_24_mib eval 'r=$(vmrss "$SPID") && [ -n "$r" ] && [ "$r" -lt 24576 ] ||
		{ why="supervisor VmRSS ${r:-?} KiB"; false; }'
fi

# Messages of many frames: libzmq takes each one in whole before kbox sees
# any of it (16 frames of 60 MB, 960 MB apiece; the 64 MiB cap is per
# frame).  Over 384 MiB the supervisor stops that kernel and starts
# another; its own cgroup's limit (512 MiB) is the backstop.  Not in a
# sanitizer build, which has no such bound (its memory is the sanitizer's).
fresh
if [ -z "$SKIPPING" ] && [ "$asan" = yes ]; then
	for t in stop_the_kernel_or_say_the_output_was_lost supervisor_peak_stays_under_512_mib \
	         supervisor_cgroup_limit_is_512_mib session_goes_on; do
		n=$((n + 1))
		echo "ok $n - row23_many_frame_messages_$t # SKIP AddressSanitizer build: no memory bound"
	done
else
	cat >frames.py <<'EOF'
k = get_ipython().kernel
for _ in range(2):
    k.session.send(k.iopub_socket, "stream", {"name": "stdout", "text": "x"},
                   buffers=[b"x" * 60_000_000] * 16)
print("sent")
EOF
	kbox exec -s pr -f frames.py
	# Two outcomes keep the promise, and which one comes is a race the
	# test does not judge: the supervisor held more than 384 MiB and
	# stopped the kernel (exit 4, with the cause), or, on a loaded machine,
	# libzmq was still taking a message in 2 s after the reply, so iopub
	# was given up and reconnected (exit 0, the loss said).  Either way the
	# bound below holds and the session goes on.
	killed=no
	grep -Eq "^\[kernel died: it sent more than its supervisor may hold" stdout && killed=yes
	check row23_many_frame_messages_stop_the_kernel_or_say_the_output_was_lost eval '
		if [ $killed = yes ]; then status_is 4 &&
			grep -Eq "^\[kernel died: it sent more than its supervisor may hold \([0-9.]+ MiB in memory, over the bound of 384 MiB\), so the kernel was killed; a new kernel was started; earlier state is lost\]$" stdout
		else status_is 0 && grep -q "^\[note: output was lost: iopub broke during this execution" stdout 
		fi'
	SPID=$(cat "$S/pr/supervisor.pid" 2>/dev/null)
	hwm=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB$/\1/p' "/proc/$SPID/status" 2>/dev/null)
	check row23_many_frame_messages_supervisor_peak_stays_under_512_mib eval \
		'[ -n "$hwm" ] && [ "$hwm" -lt 524288 ] || { why="supervisor VmHWM ${hwm:-?} KiB"; false; }'
	cg=$(sed -n 's/^[0-9]*:[^:]*memory[^:]*:\(.*\)$/\1/p' "/proc/$SPID/cgroup" 2>/dev/null)
	case $cg in */kbox-pr-$SPID-supervisor) own_cg=yes ;; *) own_cg=no ;; esac
	if [ -z "$SKIPPING" ] && [ ! -f "/sys/fs/cgroup/memory$cg/memory.limit_in_bytes" ]; then
		n=$((n + 1))
		echo "ok $n - row23_many_frame_messages_supervisor_cgroup_limit_is_512_mib # SKIP no cgroup v1 memory controller here"
	elif [ -z "$SKIPPING" ] && [ $own_cg = no ] && [ ! -w "/sys/fs/cgroup/memory$cg" ]; then
		# an ordinary user without a delegated cgroup: kbox(7), Limits
		n=$((n + 1))
		echo "ok $n - row23_many_frame_messages_supervisor_cgroup_limit_is_512_mib # SKIP the memory cgroup cannot be written here"
	else
		check row23_many_frame_messages_supervisor_cgroup_limit_is_512_mib eval \
			'case $cg in */kbox-pr-$SPID-supervisor) ;; *) false ;; esac &&
			[ "$(cat "/sys/fs/cgroup/memory$cg/memory.limit_in_bytes")" = 536870912 ]'
	fi
	kbox exec -s pr 'print(6 * 7)'
	check row23_many_frame_messages_session_goes_on eval 'status_is 0 &&
		[ "$(tail -n 1 stdout)" = 42 ] &&
		{ [ $killed = no ] || grep -q "^\[note: kernel restarted: it sent more than its supervisor may hold" stdout; }'
fi

# One message of millions of tiny values (48 MB of "[]," that jansson
# would make ~3 GB of): refused before it is parsed, whatever its type.
fresh
cat >amp.py <<'EOF'
k = get_ipython().kernel
k.session.send(k.iopub_socket, "comm_msg", {"comm_id": "x", "data": [[]] * 12_000_000},
               parent=k.get_parent())
EOF
SPID=$(cat "$S/pr/supervisor.pid" 2>/dev/null)
[ -z "$SKIPPING" ] && [ -n "$SPID" ] && echo 5 >"/proc/$SPID/clear_refs"
kbox exec -s pr -f amp.py
hwm=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB$/\1/p' "/proc/$SPID/status" 2>/dev/null)
check row23_message_of_tiny_values_is_refused_and_the_session_goes_on eval 'status_is 0 &&
	kbox exec -s pr "print(6 * 7)" && stdout_is 42 && [ "$(cat "$S/pr/supervisor.pid")" = "$SPID" ]'
if [ -z "$SKIPPING" ] && [ "$asan" = yes ]; then
	n=$((n + 1))
	echo "ok $n - row23_message_of_tiny_values_leaves_the_supervisor_under_192_mib # SKIP AddressSanitizer build: VmHWM ${hwm:-?} KiB, not judged"
else
	check row23_message_of_tiny_values_leaves_the_supervisor_under_192_mib eval \
		'[ -n "$hwm" ] && [ "$hwm" -lt 196608 ] || { why="supervisor VmHWM ${hwm:-?} KiB"; false; }'
fi

# A kernel that hides its iopub socket, makes the supervisor drop iopub
# (a frame over the 64 MiB cap) and flickers a link to a host socket in
# its place: the supervisor never connects by path once the kernel has
# answered, so the host socket hears nothing; the kernel is lost to it,
# and replaced with that cause.
fresh
TRAP=$T/trap.sock
if [ -z "$SKIPPING" ]; then
	"$PY" - "$TRAP" >trap.count <<'EOF' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
s.listen(100)
s.settimeout(15)
n = 0
try:
    while True:
        s.accept()[0].close()
        n += 1
except OSError:
    pass
print(n)
EOF
	trap_pid=$!
	wait_for test -S "$TRAP"
fi
cat >flicker.py <<EOF
import glob, json, os, threading, time
k = get_ipython().kernel
from ipykernel.kernelapp import IPKernelApp
a = IPKernelApp.instance()
p = a.ip + "-%d" % a.iopub_port
os.rename(p, p + ".hidden")
def flicker():
    t = time.time()
    while time.time() - t < 5:
        time.sleep(0.02); os.symlink("$TRAP", p); time.sleep(0.02); os.unlink(p)
threading.Thread(target=flicker).start()
k.session.send(k.iopub_socket, "stream", {"name": "stdout", "text": "x"}, buffers=[b"x" * (70 << 20)])
EOF
kbox exec -s pr -f flicker.py
check row25_a_link_to_a_host_socket_in_place_of_iopub_is_never_followed eval 'status_is 4 &&
	grep -Eq "^\[kernel died: iopub could not be reconnected: the (kernel.s )?iopub socket .* (is gone or was replaced|is not a socket \(a symbolic link\): refusing to connect), so the kernel was killed; a new kernel was started; earlier state is lost\]$" stdout'
[ -z "$SKIPPING" ] && wait "$trap_pid"
check row25_the_host_socket_heard_no_connection eval '[ "$(cat trap.count)" = 0 ]'
kbox exec -s pr 'print(6 * 7)'
check row25_after_it_the_new_kernel_answers eval 'status_is 0 && [ "$(tail -n 1 stdout)" = 42 ]'

# Row 42, the end: the connection opened above, waiting for nothing, was
# closed (60 s after it was opened; its own bound is 180 s).
idle_told() { [ -s "$IDLE_OUT" ]; }
[ -n "$SKIPPING" ] || WAIT_SECS=200 wait_for idle_told
check row42_a_connection_that_waits_for_nothing_is_closed eval '[ "$(cat "$IDLE_OUT")" = closed ]'

tests_done
