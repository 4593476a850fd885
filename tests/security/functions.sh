#!/bin/sh
# tests/security/functions.sh — threats.md row 54 against the bwrap
# sandbox: hostile kernel code abuses the session's host functions
# (kbox start --functions).  It reads the shim's marker and sends its own
# requests of calls on the kernel's stdin socket (an unknown function,
# arguments that break the schema, malformed JSON, "calls" not a list,
# 1025 calls, 32 MiB and a byte, 100000 levels of nesting); it passes a
# 2 MiB argument, calls in a loop past the execution's budget, calls from
# a thread after its execution ended and from four threads at once; its
# functions hang (and fork), flood their standard output and error, and
# are interrupted; it looks for a function's "env" secret wherever it can
# read.  And a functions file or program in the session's workspace is
# refused at kbox start.  Each test is named after its row.  TAP.
#
# Environment (set by `make check`): top_builddir (or KBOX, the kbox to
# test), KERNEL_PYTHON (the host's Python, default /usr/bin/python3).  Run
# by hand (as root and as a user):
#   KBOX=/path/to/build/kbox sh tests/security/functions.sh
# When `kbox doctor` says the sandbox cannot be made here, every test is
# skipped with its reason.
#
# Two sessions: "fn", given the functions of $FN/fns.json (the default
# limits: 200 calls an execution, 8 at once), whose programs this script
# writes to $FN, outside every workspace; and "ws", whose workspace holds
# the functions files that kbox start must refuse.  All of it lives in a
# private KBOX_HOME; at exit the sessions are stopped, whatever of ours
# is left is killed by its pid, and the directory is removed.
# shellcheck disable=SC2016,SC2034 # eval strings expand later, on purpose
set -u

ROOT_TAG=ksc
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"

# The functions' directory, and the word in the command line of every
# process they start (pgrep finds what is left of them by it).
FN=$ROOT/fn
TAG=kbox-fn-$(basename "$ROOT")
SECRET=kbox-secret-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
mkdir -m 700 "$FN" "$FN/marks" "$FN/pids" "$FN/running" || exit 1
FN_REAL=$(cd "$FN" && pwd -P)

# the processes of function NAME that live: none
no_procs() { ! pgrep -f -- "$TAG-$1" >/dev/null; }
# procs_gone NAME: the child and the grandchild of hang.sh NAME (their
# pids in pids/) have exited, and no process of NAME is left.
procs_gone() {
	if [ ! -s "$FN/pids/$1.child" ] || [ ! -s "$FN/pids/$1.grandchild" ]; then
		say "hang.sh $1 did not start both: $(ls "$FN/pids")"
		return 1
	fi
	gone "$(cat "$FN/pids/$1.child")" && gone "$(cat "$FN/pids/$1.grandchild")" &&
		wait_for no_procs "$1"
}
# vm KEY PID: the KEY (VmHWM, VmRSS) of PID in KiB.
vm() { sed -n "s/^$1:[[:space:]]*\([0-9]*\) kB\$/\1/p" "/proc/$2/status"; }

cat >"$FN/fn.py" <<'EOF'
#!/usr/bin/python3
# fn.py MODE: the host functions of tests/security/functions.sh.  The
# arguments (JSON) on standard input, the result (JSON) on standard output;
# relative paths are in the functions file's directory, the working one.
import json, os, sys, time

mode = sys.argv[1]
args = json.load(sys.stdin)
if mode == "touch":  # a mark that it ran: marks/NAME
    open(os.path.join("marks", args["name"]), "x").close()
    json.dump(args["name"], sys.stdout)
elif mode == "env":
    json.dump({"env": dict(os.environ), "cwd": os.getcwd(),
               "own_group": os.getpgid(0) == os.getpid(),
               "own_session": os.getsid(0) == os.getpid()}, sys.stdout)
elif mode == "secretive":  # it has its secret
    json.dump(os.environ.get("KBOX_FN_TOKEN", "").startswith("kbox-secret-"), sys.stdout)
elif mode == "errflood":  # 1 MiB of TEXT on stderr, and fail
    sys.stderr.write(args["text"] * (1 << 20))
    sys.exit(3)
elif mode == "big":  # a string of MIB MiB
    json.dump("x" * (args["mib"] << 20), sys.stdout)
elif mode == "busy":  # how many of its calls run now, itself included
    me = os.path.join("running", str(os.getpid()))
    open(me, "w").close()
    n = len(os.listdir("running"))
    time.sleep(0.2)
    os.unlink(me)
    json.dump(n, sys.stdout)
EOF
cat >"$FN/hang.sh" <<'EOF'
#!/bin/sh
# hang.sh NAME WORD: sleep for ever as two processes of its process group,
# the grandchild (orphaned) and the child (this one, exec'ed), each writing
# its pid to pids/NAME.grandchild or pids/NAME.child first (the child once
# the grandchild has); WORD in their command lines.
sleep='import os, sys, time
want, mine = sys.argv[1:3]
while want and not os.path.exists(want):
    time.sleep(0.01)
open(mine + ".tmp", "w").write(str(os.getpid()))
os.rename(mine + ".tmp", mine)
time.sleep(1000)'
(/usr/bin/python3 -c "$sleep" "" "pids/$1.grandchild" "$2" &)
exec /usr/bin/python3 -c "$sleep" "pids/$1.grandchild" "pids/$1.child" "$2"
EOF
chmod 755 "$FN/fn.py" "$FN/hang.sh"
# The functions file: relative programs are in its directory.
cat >"$FN/fns.json" <<EOF
{"functions": [
 {"name": "get_order", "description": "One order, by its id (the arguments back).",
  "parameters": {"type": "object", "properties": {"id": {"type": "string"}},
                 "required": ["id"], "additionalProperties": false},
  "command": ["/bin/cat"]},
 {"name": "ping", "parameters": {"type": "object", "properties": {"i": {"type": "integer"}},
                                 "additionalProperties": false},
  "command": ["/bin/cat"]},
 {"name": "touch", "parameters": {"type": "object",
                                  "properties": {"name": {"type": "string", "pattern": "^[a-z0-9-]+\$"}},
                                  "required": ["name"]},
  "command": ["./fn.py", "touch"]},
 {"name": "tree", "parameters": {"type": "object", "properties": {"t": {"\$ref": "#/definitions/t"}},
                                 "definitions": {"t": {"type": "array", "items": {"\$ref": "#/definitions/t"}}}},
  "command": ["/bin/cat"]},
 {"name": "busy", "command": ["./fn.py", "busy"]},
 {"name": "big", "parameters": {"type": "object", "properties": {"mib": {"type": "integer", "maximum": 15}},
                                "required": ["mib"]},
  "command": ["./fn.py", "big"]},
 {"name": "hang", "command": ["./hang.sh", "hang", "$TAG-hang"], "timeout": 1},
 {"name": "slow", "command": ["./hang.sh", "slow", "$TAG-slow"], "timeout": 600},
 {"name": "outflood", "command": ["/usr/bin/yes", "$TAG-outflood"]},
 {"name": "errflood", "parameters": {"type": "object", "properties": {"text": {"enum": ["e", "\u00e9"]}},
                                     "required": ["text"]},
  "command": ["./fn.py", "errflood"]},
 {"name": "env", "command": ["./fn.py", "env"], "env": {"KBOX_FN_COLOUR": "blue"}},
 {"name": "secretive", "command": ["./fn.py", "secretive"], "env": {"KBOX_FN_TOKEN": "$SECRET"}}
]}
EOF

# ---- can the sandbox be made here? ----

SKIPPING=$(sandbox_skip_reason zmq)

fresh
kbox start -s fn --functions "$FN/fns.json"
check row54_session_fn_starts_with_its_functions eval 'status_is 0 && started_line fn'
SPID=$(cat "$S/fn/supervisor.pid" 2>/dev/null)

# ---- requests of calls forged on the kernel's stdin socket ----

# The code reads the marker where the shim keeps it, and sends what it
# likes after it, as the shim sends a request; each answer is printed.
setup_for row54_the_marker_is_readable_by_the_code \
	row54_forged_call_of_a_function_that_does_not_exist_fails_invalid \
	row54_forged_arguments_that_break_the_schema_fail_invalid_each_with_its_rule \
	row54_forged_malformed_json_is_refused_whole \
	row54_forged_calls_not_a_list_is_refused_whole \
	row54_forged_request_with_a_member_twice_is_refused_whole \
	row54_forged_1025_calls_are_refused_whole_and_none_runs \
	row54_forged_request_of_32_mib_and_a_byte_is_refused_by_its_size \
	row54_forged_100000_levels_of_nesting_are_refused_whole \
	row54_forged_2000_levels_of_nesting_stop_the_schema_check_at_64 \
	row54_forged_valid_call_is_answered \
	row54_forged_request_with_another_marker_is_input_answered_eof_and_runs_nothing \
	row54_after_the_forgeries_kbox_status_answers \
	row54_after_the_forgeries_a_call_works
fresh
kexec fn <<'EOF'
import json, zmq
k = get_ipython().kernel
marker = get_order.__globals__["_marker"]

def forge(text, prefix=marker):
    # TEXT after the marker, sent as the shim sends a request: the answer
    sent = k.session.send(k.stdin_socket, "input_request",
                          {"prompt": prefix + text, "password": False},
                          k.get_parent("shell"), ident=k._parent_ident["shell"])
    while True:
        r, _, _ = zmq.select([k.stdin_socket], [], [], 60)
        if not r:
            return "no answer"
        _, reply = k.session.recv(k.stdin_socket)
        if reply["parent_header"].get("msg_id") == sent["header"]["msg_id"]:
            v = reply["content"]["value"]
            return json.loads(v) if prefix == marker else v

def req(*calls):
    return json.dumps({"calls": [{"name": n, "args": a} for n, a in calls]})

head, tail = '{"calls": [{"name": "get_order", "args": {"id": "', '"}}]}'
nest = '{"calls": [{"name": "tree", "args": {"t": %s}}]}'
out = {
    "marker": [marker[:12], len(marker), marker[-1]],
    "unknown": forge(req(("nosuch", {}))),
    "schema": forge(req(("get_order", {"id": 5}), ("get_order", {}),
                        ("get_order", {"id": "o1", "extra": 1}), ("get_order", ["o1"]))),
    "malformed": forge('{"calls": [{"name": "get_order", "args": {"id": '),
    "not_list": forge('{"calls": {"name": "get_order", "args": {"id": "o1"}}}'),
    "twice": forge('{"calls": [{"name": "get_order", "args": {"id": "o1"}}], "calls": []}'),
    "batch": forge(req(*[("touch", {"name": "batch-%d" % i}) for i in range(1025)])),
    "huge": forge(head + "x" * ((32 << 20) + 1 - len(head) - len(tail)) + tail),
    "deep": forge(nest % ("[" * 100000 + "]" * 100000)),
    "deep_2000": forge(nest % ("[" * 2000 + "]" * 2000)),
    "valid": forge(req(("get_order", {"id": "o1"}))),
    "other_marker": forge(req(("touch", {"name": "other-marker"})), "kbox-call/1 " + "0" * 32 + " "),
}
print(json.dumps(out))
EOF
# (the last line: a request with another marker is the code's input(),
# which kbox shows above it)
tail -n 1 stdout >"$ROOT/forged.json" 2>/dev/null
F=$ROOT/forged.json
check row54_the_marker_is_readable_by_the_code json_true "$F" \
	'j["marker"] == ["kbox-call/1 ", 45, " "]'
check row54_forged_call_of_a_function_that_does_not_exist_fails_invalid json_true "$F" \
	'j["unknown"] == {"results": [{"ok": False, "kind": "invalid", "error": "there is no host function nosuch"}]}'
check row54_forged_arguments_that_break_the_schema_fail_invalid_each_with_its_rule json_true "$F" \
	'j["schema"] == {"results": [
		{"ok": False, "kind": "invalid", "error": "id must be a string, got int"},
		{"ok": False, "kind": "invalid", "error": "id is missing (it is required)"},
		{"ok": False, "kind": "invalid", "error": "extra is not expected (expected: id)"},
		{"ok": False, "kind": "invalid", "error": "the arguments must be given by name (a dict)"}]}'
check row54_forged_malformed_json_is_refused_whole json_true "$F" \
	'j["malformed"] == {"error": "the request of calls is not valid"}'
check row54_forged_calls_not_a_list_is_refused_whole json_true "$F" \
	'j["not_list"] == {"error": "the request of calls is not valid"}'
check row54_forged_request_with_a_member_twice_is_refused_whole json_true "$F" \
	'j["twice"] == {"error": "the request of calls is not valid"}'
check row54_forged_1025_calls_are_refused_whole_and_none_runs eval 'json_true "$F" \
	"j[\"batch\"] == {\"error\": \"1025 calls at once, over the 1024 allowed: gather fewer at a time\"}" &&
	[ -z "$(ls "$FN/marks")" ]'
check row54_forged_request_of_32_mib_and_a_byte_is_refused_by_its_size json_true "$F" \
	'j["huge"] == {"error": "the request of calls takes 33554433 bytes, over the 33554432 allowed"}'
check row54_forged_100000_levels_of_nesting_are_refused_whole json_true "$F" \
	'j["deep"] == {"error": "the request of calls is not valid"}'
check row54_forged_2000_levels_of_nesting_stop_the_schema_check_at_64 json_true "$F" \
	'([(r["ok"], r["kind"]) for r in j["deep_2000"]["results"]] == [(False, "invalid")] and
	  j["deep_2000"]["results"][0]["error"].endswith("] is nested deeper than 64 levels"))'
check row54_forged_valid_call_is_answered json_true "$F" \
	'j["valid"] == {"results": [{"ok": True, "value": {"id": "o1"}}]}'
check row54_forged_request_with_another_marker_is_input_answered_eof_and_runs_nothing eval '
	json_true "$F" "j[\"other_marker\"] == \"\\x04\"" && [ ! -e "$FN/marks/other-marker" ]'
kbox status -s fn
check row54_after_the_forgeries_kbox_status_answers eval 'status_is 0 && [ "$(status_line state)" = idle ]'
kbox exec -s fn 'print(get_order("o1"))'
check row54_after_the_forgeries_a_call_works eval 'status_is 0 && stdout_is "{'"'"'id'"'"': '"'"'o1'"'"'}"'

# ---- huge arguments, and the execution's budget of calls ----

setup_for row54_a_2_mib_argument_is_an_argument_error_naming_the_limit \
	row54_the_201st_call_of_an_execution_raises_call_budget_exceeded \
	row54_the_result_records_the_200_calls_and_the_refused_one \
	row54_the_refused_call_is_logged_as_budget \
	row54_gathered_calls_past_the_budget_fail_each_with_call_budget_exceeded \
	row54_gathered_calls_run_at_most_8_at_once \
	row54_gathered_results_past_64_mib_fail_the_call_that_passes_it \
	row54_the_next_execution_has_a_budget_of_its_own
fresh
kexec fn --format json <<'EOF'
get_order("x" * (2 << 20))
EOF
check row54_a_2_mib_argument_is_an_argument_error_naming_the_limit json_true stdout \
	'(j["error"]["ename"] == "ArgumentError" and
	  j["error"]["evalue"] == "get_order(): the arguments take 2097161 bytes as JSON, over the 1048576 allowed" and
	  [(c["name"], c["status"], c["args_bytes"]) for c in j["calls"]] == [("get_order", "invalid", 2097161)])'

fresh
kexec fn --format json <<'EOF'
from kbox_functions import CallBudgetExceeded
n = 0
try:
    for i in range(1000):
        ping(i=i)
        n += 1
except CallBudgetExceeded as e:
    print(n, type(e).__name__, e)
EOF
cp stdout "$ROOT/budget.json" 2>/dev/null
check row54_the_201st_call_of_an_execution_raises_call_budget_exceeded json_true "$ROOT/budget.json" \
	'j["status"] == "ok" and j["stdout"]["text"] == "200 CallBudgetExceeded ping(): this execution has made the 200 calls it may make: make fewer calls (one call can do more), or go on in another execution\n"'
check row54_the_result_records_the_200_calls_and_the_refused_one json_true "$ROOT/budget.json" \
	'[c["status"] for c in j["calls"]] == ["ok"] * 200 + ["budget"]'
check row54_the_refused_call_is_logged_as_budget events fn \
	'[e["name"] for e in ev if e["event"] == "call" and e["status"] == "budget"] == ["ping"]'

fresh
kexec fn --format json <<'EOF'
import asyncio
r = await asyncio.gather(*[ping(i=i) for i in range(300)], return_exceptions=True)
print(r[:200] == [{"i": i} for i in range(200)],
      [type(x).__name__ for x in r[200:]] == ["CallBudgetExceeded"] * 100)
EOF
check row54_gathered_calls_past_the_budget_fail_each_with_call_budget_exceeded json_true stdout \
	'j["stdout"]["text"] == "True True\n" and [c["status"] for c in j["calls"]].count("budget") == 100'
fresh
kexec fn <<'EOF'
import asyncio
print(max(await asyncio.gather(*[busy() for i in range(32)])) <= 8)
EOF
check row54_gathered_calls_run_at_most_8_at_once eval 'status_is 0 && stdout_is True'
# five results of 15 MiB together: the four first to end are answered
fresh
kexec fn <<'EOF'
import asyncio
r = await asyncio.gather(*[big(mib=15) for i in range(5)], return_exceptions=True)
for x in sorted("ok" if x == "x" * (15 << 20) else "%s: %s" % (type(x).__name__, x) for x in r):
    print(x)
EOF
check row54_gathered_results_past_64_mib_fail_the_call_that_passes_it eval 'status_is 0 && stdout_is "FunctionError: big(): the results of the calls made together take over 67108864 bytes: gather fewer at a time
ok
ok
ok
ok"'
kbox exec -s fn 'print(ping(i=1))'
check row54_the_next_execution_has_a_budget_of_its_own eval 'status_is 0 && stdout_is "{'"'"'i'"'"': 1}"'

# ---- a function that hangs, and one that is interrupted ----

setup_for row54_a_function_that_hangs_past_its_timeout_raises_function_timeout \
	row54_its_process_group_is_killed_grandchild_too \
	row54_kbox_interrupt_during_a_slow_call_interrupts_the_execution \
	row54_the_interrupted_call_is_recorded_cancelled \
	row54_the_interrupted_calls_process_group_is_killed_grandchild_too \
	row54_the_cancelled_call_is_logged \
	row54_an_execution_that_times_out_during_a_call_cancels_it \
	row54_its_process_group_is_killed_grandchild_too_after_the_timeout \
	row54_a_kernel_killed_during_a_call_ends_the_execution_and_cancels_it \
	row54_its_process_group_is_killed_grandchild_too_after_the_kernels_death
fresh
kexec fn --format json <<'EOF'
hang()
EOF
check row54_a_function_that_hangs_past_its_timeout_raises_function_timeout json_true stdout \
	'(j["error"]["ename"] == "FunctionTimeout" and
	  j["error"]["evalue"] == "hang(): no answer within 1 s (its timeout): it was stopped" and
	  [(c["name"], c["status"]) for c in j["calls"]] == [("hang", "timeout")])'
check row54_its_process_group_is_killed_grandchild_too procs_gone hang

fresh
irc=
if [ -z "$SKIPPING" ]; then
	timeout -k 5 120 "$KBOX" exec -s fn --format json 'slow()' >int.json 2>int.err &
	IPID=$!
	BG_PIDS="$BG_PIDS $IPID"
	wait_for test -s "$FN/pids/slow.child" >/dev/null
	kbox interrupt -s fn
	wait "$IPID"
	irc=$?
	BG_PIDS=
fi
check row54_kbox_interrupt_during_a_slow_call_interrupts_the_execution eval '[ "$irc" = 3 ] &&
	json_true int.json "j[\"status\"] == \"interrupted\" and j[\"error\"][\"ename\"] == \"KeyboardInterrupt\""'
check row54_the_interrupted_call_is_recorded_cancelled json_true int.json \
	'[(c["name"], c["status"]) for c in j["calls"]] == [("slow", "cancelled")]'
check row54_the_interrupted_calls_process_group_is_killed_grandchild_too procs_gone slow
check row54_the_cancelled_call_is_logged events fn \
	'[e["name"] for e in ev if e["event"] == "call" and e["status"] == "cancelled"] == ["slow"]'

# The execution's own timeout (kbox exec --timeout), and the kernel's
# death (killed from the host once the call's processes run).
fresh
rm -f "$FN/pids/slow."*
kbox exec -s fn --timeout 3 --format json 'slow()'
check row54_an_execution_that_times_out_during_a_call_cancels_it eval 'status_is 3 &&
	json_true stdout "j[\"status\"] == \"timeout\" and [(c[\"name\"], c[\"status\"]) for c in j[\"calls\"]] == [(\"slow\", \"cancelled\")]"'
check row54_its_process_group_is_killed_grandchild_too_after_the_timeout procs_gone slow
fresh
rm -f "$FN/pids/slow."*
drc=
if [ -z "$SKIPPING" ]; then
	wait_idle fn >/dev/null
	timeout -k 5 120 "$KBOX" exec -s fn --format json 'slow()' >died.json 2>died.err &
	DPID=$!
	BG_PIDS="$BG_PIDS $DPID"
	wait_for test -s "$FN/pids/slow.child" >/dev/null
	kill -KILL "$(status_field fn kernel_pid)"
	wait "$DPID"
	drc=$?
	BG_PIDS=
fi
check row54_a_kernel_killed_during_a_call_ends_the_execution_and_cancels_it eval '[ "$drc" = 4 ] &&
	json_true died.json "j[\"status\"] == \"died\" and [(c[\"name\"], c[\"status\"]) for c in j[\"calls\"]] == [(\"slow\", \"cancelled\")]"'
check row54_its_process_group_is_killed_grandchild_too_after_the_kernels_death procs_gone slow
[ -n "$SKIPPING" ] || wait_idle fn >/dev/null

# ---- floods of a function's standard output and error ----

setup_for row54_a_stdout_flood_fails_past_16_mib \
	row54_the_flooding_process_is_killed \
	row54_the_supervisors_peak_memory_stays_under_48_mib \
	row54_a_stderr_flood_is_cut_to_4096_bytes_in_the_error \
	row54_a_stderr_flood_of_two_byte_characters_is_cut_to_4096_bytes_at_a_character
fresh
[ -n "$SKIPPING" ] || echo 5 >"/proc/$SPID/clear_refs"
kexec fn --format json <<'EOF'
outflood()
EOF
HWM=$(vm VmHWM "$SPID" 2>/dev/null)
check row54_a_stdout_flood_fails_past_16_mib json_true stdout \
	'(j["error"]["ename"] == "FunctionError" and
	  j["error"]["evalue"] == "outflood(): its output passed 16777216 bytes, the most a result may be: it was stopped" and
	  [(c["name"], c["status"]) for c in j["calls"]] == [("outflood", "error")])'
check row54_the_flooding_process_is_killed wait_for no_procs outflood
if [ -z "$SKIPPING" ] && [ "$asan" = yes ]; then
	n=$((n + 1))
	echo "ok $n - row54_the_supervisors_peak_memory_stays_under_48_mib # SKIP AddressSanitizer build: VmHWM $HWM KiB, not judged"
	tap_took
else
	check row54_the_supervisors_peak_memory_stays_under_48_mib eval '[ -n "$HWM" ] && [ "$HWM" -lt 49152 ] ||
		{ why="supervisor VmHWM ${HWM:-?} KiB"; false; }'
fi

# Its standard error is the error's text: the first 4096 bytes at most
# (cut at a character: the text is UTF-8).
fresh
kexec fn --format json <<'EOF'
errflood("e")
EOF
check row54_a_stderr_flood_is_cut_to_4096_bytes_in_the_error json_true stdout \
	'(j["error"]["ename"] == "FunctionError" and
	  (lambda e: 4000 < len(e) <= 4096 and e == "e" * len(e) and
	   j["error"]["evalue"] == "errflood(): " + e or
	   print("#   its error: %d bytes, ending %a" % (len(e.encode()), e[-3:])))(j["calls"][0]["error"]))'
fresh
kexec fn --format json <<'EOF'
errflood("\u00e9")
EOF
check row54_a_stderr_flood_of_two_byte_characters_is_cut_to_4096_bytes_at_a_character json_true stdout \
	'((lambda e: 4000 < len(e.encode()) <= 4096 and e == "\u00e9" * len(e) and
	   j["error"]["evalue"] == "errflood(): " + e or
	   print("#   its error: %d bytes, ending %a" % (len(e.encode()), e[-3:])))(j["calls"][0]["error"]))'

# ---- the functions' environment, and their secrets ----

setup_for row54_a_command_gets_path_lang_and_its_own_env_only \
	row54_a_command_runs_in_the_functions_files_directory_in_its_own_session \
	row54_a_functions_env_secret_is_in_nothing_the_kernel_can_read
fresh
kexec fn <<'EOF'
import json
print(json.dumps(env()))
EOF
cp stdout env.json 2>/dev/null
check row54_a_command_gets_path_lang_and_its_own_env_only json_true env.json \
	'j["env"] == {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "KBOX_FN_COLOUR": "blue"}'
check row54_a_command_runs_in_the_functions_files_directory_in_its_own_session json_true env.json \
	'j["cwd"] == a[0] and j["own_group"] and j["own_session"]' "$FN_REAL"

# The secret's value is known to the host only; the code looks for its
# prefix (spelt so that no file the code lands in holds it) in its
# environment, every process's environment and command line, and every
# file it can read but the system's (/usr, and /proc, /sys, /dev), after
# a canary of its own in /tmp, which it must find.
fresh
kexec fn <<'EOF'
import os, stat
print(secretive())
pat = ("kbox-" + "secret-").encode()
open("/tmp/canary", "w").write("kbox-" + "secret-" + "canary")
hits = ["environ:" + k for k, v in os.environ.items() if pat in (k + "=" + v).encode()]
for top in sorted(os.listdir("/")):
    top = "/" + top
    if top in ("/proc", "/sys", "/dev", "/usr") or os.path.islink(top):
        continue
    for d, dirs, files in os.walk(top):
        for f in files:
            p = os.path.join(d, f)
            try:
                st = os.lstat(p)
                if stat.S_ISREG(st.st_mode) and st.st_size <= 64 << 20:
                    with open(p, "rb") as fh:
                        if pat in fh.read():
                            hits.append(p)
            except OSError:
                pass
for pid in os.listdir("/proc"):
    for what in ("environ", "cmdline"):
        try:
            if pid.isdigit() and pat in open("/proc/%s/%s" % (pid, what), "rb").read():
                hits.append("/proc/%s/%s" % (pid, what))
        except OSError:
            pass
print(hits)
EOF
check row54_a_functions_env_secret_is_in_nothing_the_kernel_can_read eval 'status_is 0 &&
	stdout_is "True
['"'"'/tmp/canary'"'"']"'

# ---- a call from a thread after its execution ended ----

# The thread waits for the execution's end (a file the host makes after
# kbox exec returned), then calls; the shim's kernel is wrapped so that
# it says when the request went out (so the host starts the next
# execution only after that).  The host must not run it; the next
# execution's calls, which come after it on the same socket, are
# answered.
setup_for row54_a_call_from_a_thread_after_its_execution_ended_does_not_run_on_the_host \
	row54_after_a_late_call_the_next_executions_calls_are_answered
fresh
kexec fn <<'EOF'
import os, threading, time
_real = touch.__globals__["_kernel"]
class _Session:
    def __getattr__(self, a):
        return getattr(_real.session, a)
    def send(self, *a, **kw):
        m = _real.session.send(*a, **kw)
        if threading.current_thread().name == "late":
            open("/workspace/late-sent", "w").close()
        return m
class _Kernel:
    session = _Session()
    def __getattr__(self, a):
        return getattr(_real, a)
touch.__globals__["_kernel"] = _Kernel()
def late():
    while not os.path.exists("/workspace/go"):
        time.sleep(0.05)
    try:
        r = "returned %r" % touch("late")
    except BaseException as e:
        r = "%s: %s" % (type(e).__name__, e)
    open("/workspace/late-result", "w").write(r)
threading.Thread(target=late, name="late", daemon=True).start()
print("started")
EOF
if [ -z "$SKIPPING" ] && status_is 0 && stdout_is started; then
	touch "$S/fn/workspace/go"
	wait_for test -e "$S/fn/workspace/late-sent" >/dev/null
fi
kexec fn --timeout 20 <<'EOF'
n = 0
for i in range(10):
    touch("next-%d" % i)
    n += 1
print(n, "answered")
EOF
check row54_a_call_from_a_thread_after_its_execution_ended_does_not_run_on_the_host eval '
	[ -e "$S/fn/workspace/late-sent" ] && [ -e "$FN/marks/next-0" ] && [ ! -e "$FN/marks/late" ]'
check row54_after_a_late_call_the_next_executions_calls_are_answered eval 'status_is 0 && stdout_is "10 answered"'

# ---- calls from four threads at once ----

setup_for row54_calls_from_four_threads_at_once_are_each_answered \
	row54_after_calls_from_threads_the_session_answers
fresh
kbox restart -s fn
kexec fn --timeout 20 <<'EOF'
from concurrent.futures import ThreadPoolExecutor
with ThreadPoolExecutor(4) as ex:
    print(sum(ex.map(lambda i: ping(i=i)["i"], range(40))))
EOF
check row54_calls_from_four_threads_at_once_are_each_answered eval 'status_is 0 && [ "$(tail -n 1 stdout)" = 780 ]'
[ -n "$SKIPPING" ] || wait_idle fn >/dev/null
kbox exec -s fn 'print(ping(i=2))'
check row54_after_calls_from_threads_the_session_answers eval 'status_is 0 && [ "$(tail -n 1 stdout)" = "{'"'"'i'"'"': 2}" ]'

# ---- a functions file or program in the workspace ----

# "ws" has run once (its workspace exists); files the code could have
# written there, named by a functions file, are refused when it starts:
# a usage error (kbox-start(1): a bad functions file is one line and exit
# status 2), and no session.
setup_for row54_a_functions_file_in_the_workspace_is_refused \
	row54_a_program_in_the_workspace_is_refused \
	row54_a_link_outside_to_a_program_in_the_workspace_is_refused \
	row54_a_refused_start_leaves_the_session_without_functions
fresh
kbox start -s ws
kbox stop -s ws
WSD=$S/ws/workspace
if [ -z "$SKIPPING" ]; then
	cp "$FN/fn.py" "$WSD/fn.py"
	printf '{"functions": [{"name": "f", "command": ["./fn.py", "env"]}]}\n' >"$WSD/fns.json"
	printf '{"functions": [{"name": "f", "command": ["%s", "env"]}]}\n' "$WSD/fn.py" >"$FN/ws-program.json"
	ln -s "$WSD/fn.py" "$FN/link.py"
	printf '{"functions": [{"name": "f", "command": ["%s", "env"]}]}\n' "$FN/link.py" >"$FN/ws-link.json"
fi
kbox start -s ws --functions "$WSD/fns.json"
check row54_a_functions_file_in_the_workspace_is_refused fails_with 2 \
	"kbox start: session ws: the functions file's directory $WSD is in the session's workspace, which the kernel can write: keep it and its programs elsewhere"
kbox start -s ws --functions "$FN/ws-program.json"
check row54_a_program_in_the_workspace_is_refused fails_with 2 \
	"kbox start: session ws: function f: its program $WSD/fn.py is in the session's workspace, which the kernel can write"
kbox start -s ws --functions "$FN/ws-link.json"
check row54_a_link_outside_to_a_program_in_the_workspace_is_refused fails_with 2 \
	"kbox start: session ws: function f: its program $FN/link.py is in the session's workspace, which the kernel can write"
kbox start -s ws
check row54_a_refused_start_leaves_the_session_without_functions eval 'status_is 0 && started_line ws &&
	! grep -q "\"functions\"" "$S/ws/session.json"'
setup_for

tests_done
