#!/bin/sh
# tests/functions.sh — host functions (kbox-functions(5), issue 21): a
# session started with --functions FILE gives its kernel code the file's
# functions, run on the host: the issue's example end to end through kbox
# exec (plain calls, awaited ones, gathered ones run at once), a command
# function and an HTTP one (a server the test runs on 127.0.0.1), each
# error kind with the exact text the code gets, the calls in the result
# and in events.ndjson, input() beside the calls, a restart, and the
# functions file's bad input (one line, exit 2).  TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON.
# Needs a kernel; sessions use the default backend (bwrap), or none
# where bubblewrap cannot run.
# shellcheck disable=SC2016 # eval strings expand later, on purpose
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"

S=$KBOX_HOME/sessions
BACKEND=bwrap
[ -n "$(sandbox_skip_reason)" ] && BACKEND=none

# The functions and their programs, where no session's workspace is.
FN=$ROOT/functions
mkdir -p "$FN/bin" "$FN/calls" || exit 1

cat >"$FN/bin/get_order" <<'EOF'
#!/usr/bin/python3
# get_order: one order; "missing" fails; "togetherN" marks its arrival in
# calls/ and answers only once 8 such calls are there at once (a barrier,
# waited for at most 20 s, so that calls run one after another fail)
import json, os, sys, time
a = json.load(sys.stdin)
oid = a["order_id"]
if oid == "missing":
    print("no order missing", file=sys.stderr)
    sys.exit(1)
if oid.startswith("together"):
    open(os.path.join("calls", oid), "w").close()
    end = time.monotonic() + 20
    while len(os.listdir("calls")) < 8:
        if time.monotonic() > end:
            print("only %d of the 8 calls ran at once" % len(os.listdir("calls")),
                  file=sys.stderr)
            sys.exit(1)
        time.sleep(0.01)
print(json.dumps({"id": oid, "status": "shipped", "items": 2}))
EOF
cat >"$FN/bin/env_of" <<'EOF'
#!/bin/sh
# env_of: the names in its environment, as a JSON list
cat >/dev/null
env | sed 's/=.*//' | sort | /usr/bin/python3 -c 'import json, sys; print(json.dumps(sys.stdin.read().split()))'
EOF
cat >"$FN/bin/not_json" <<'EOF'
#!/bin/sh
cat >/dev/null
echo 'this is not JSON'
EOF
# (one that never answers: it waits for a writer of a FIFO that none
# opens, under a command line of this run's own, which no other test's
# process has: session.sh's hanging kernels run a waiting command too)
mkfifo "$FN/never"
UNANSWERING_CMD="cat $FN/never"
cat >"$FN/bin/unanswering" <<EOF
#!/bin/sh
cat >/dev/null
exec $UNANSWERING_CMD
EOF
cat >"$FN/bin/silent_fail" <<'EOF'
#!/bin/sh
exit 3
EOF
chmod +x "$FN"/bin/*

# The HTTP function's server: POST {"q": ...} answers {"echo": q}; a q of
# "404" answers 404, "500" 500.  It writes its port to $FN/port once it
# listens, and each request's body to $FN/port.requests.
cat >"$FN/server.py" <<'EOF'
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with open(sys.argv[1] + ".requests", "a") as f:
            f.write(json.dumps(body) + "\n")
        if body.get("q") == "500":
            self.send_response(500)
            self.send_header("Content-Length", "4")
            self.end_headers()
            self.wfile.write(b"down")
            return
        code, out = (404, b"no such thing") if body.get("q") == "404" else \
            (200, json.dumps({"echo": body.get("q"), "type": self.headers["Content-Type"]}).encode())
        self.send_response(code)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1] + ".tmp", "w").write(str(s.server_port))
__import__("os").rename(sys.argv[1] + ".tmp", sys.argv[1])
s.serve_forever()
EOF
/usr/bin/python3 "$FN/server.py" "$FN/port" &
BG_PIDS="${BG_PIDS-} $!"
has_port() { [ -s "$FN/port" ]; }
wait_for has_port x
PORT=$(cat "$FN/port" 2>/dev/null)

cat >"$FN/functions.json" <<EOF
{"functions": [
  {"name": "get_order",
   "description": "Return one order, with its \`status\` and number of \`items\`.",
   "parameters": {"type": "object",
                  "properties": {"order_id": {"type": "string", "description": "The order's id."}},
                  "required": ["order_id"], "additionalProperties": false},
   "returns": {"type": "object"},
   "command": ["bin/get_order"]},
  {"name": "env_of", "command": ["bin/env_of"], "env": {"SECRET": "s3cr3t"}},
  {"name": "not_json", "command": ["bin/not_json"]},
  {"name": "silent_fail", "command": ["bin/silent_fail"]},
  {"name": "unanswering", "command": ["bin/unanswering"], "timeout": 0.5},
  {"name": "echo", "http": "http://127.0.0.1:$PORT/echo",
   "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}
 ],
 "max_calls": 20}
EOF


fresh
kbox start -s fn --backend "$BACKEND" --functions "$FN/functions.json"
check start_with_functions_file eval 'status_is 0 && grep -q "^session fn started" stdout'

fresh
kbox exec -s fn "print(get_order('o1'))"
check plain_call_returns_the_result eval \
	'status_is 0 && stdout_is "{'"'"'id'"'"': '"'"'o1'"'"', '"'"'status'"'"': '"'"'shipped'"'"', '"'"'items'"'"': 2}" && stderr_empty'

fresh
kexec fn <<'EOF'
import asyncio
orders = await asyncio.gather(get_order('o1'), get_order('o2'))
print([o['status'] for o in orders])
EOF
check the_issue_example_gathers_two_calls eval 'status_is 0 && stdout_is "['"'"'shipped'"'"', '"'"'shipped'"'"']"'

# the example's second call: an error the model can read
fresh
kbox exec -s fn 'await get_order(42)'
check a_bad_argument_is_an_argument_error_naming_the_rule eval 'status_is 1 &&
	[ "$(tail -n 1 stdout)" = "ArgumentError: get_order(): order_id must be a string, got int" ]'

fresh
kbox exec -s fn "get_order('o1', note='x')"
check an_unknown_keyword_is_a_type_error eval 'status_is 1 &&
	[ "$(tail -n 1 stdout)" = "TypeError: get_order(): got an unexpected keyword argument '"'"'note'"'"'" ]'

fresh
kbox exec -s fn "get_order('missing')"
check the_function_s_own_error_is_its_stderr eval 'status_is 1 &&
	[ "$(tail -n 1 stdout)" = "FunctionError: get_order(): no order missing" ]'

fresh
kbox exec -s fn "silent_fail()"
check an_exit_status_without_stderr_is_said eval 'status_is 1 &&
	[ "$(tail -n 1 stdout)" = "FunctionError: silent_fail(): it failed with exit status 3, saying nothing" ]'

fresh
kbox exec -s fn "not_json()"
check output_that_is_not_json_is_an_error eval 'status_is 1 &&
	[ "$(tail -n 1 stdout)" = "FunctionError: not_json(): it gave a result that is not JSON: invalid token near '"'"'this'"'"'" ]'

fresh
kbox exec -s fn "unanswering()"
check a_call_past_its_timeout_is_a_function_timeout eval 'status_is 1 &&
	[ "$(tail -n 1 stdout)" = "FunctionTimeout: unanswering(): no answer within 500 ms (its timeout): it was stopped" ] &&
	! pgrep -xf "$UNANSWERING_CMD" >/dev/null'

# concurrency: 8 gathered calls all run at once (each answers only once
# all 8 have begun), whatever the machine's load
fresh
rm -f "$FN"/calls/*
kexec fn <<'EOF'
import asyncio
print(len(await asyncio.gather(*[get_order(f'together{i}') for i in range(8)])))
EOF
check eight_gathered_calls_run_at_once eval 'status_is 0 && stdout_is 8 && [ "$(ls "$FN/calls" | wc -l)" = 8 ]'

fresh
kbox exec -s fn --format json "get_order('o3')"
check the_result_lists_the_calls eval 'status_is 0 && "$PY" -c "
import json, sys
c = json.load(open(\"stdout\"))[\"calls\"]
assert len(c) == 1 and c[0][\"name\"] == \"get_order\" and c[0][\"status\"] == \"ok\", c
assert c[0][\"args_bytes\"] == 17 and c[0][\"result_bytes\"] == 40, c
assert set(c[0]) == {\"name\", \"status\", \"seconds\", \"args_bytes\", \"result_bytes\"}, c
"'

check the_event_log_records_each_call eval \
	'grep "\"event\": *\"call\"" "$S/fn/events.ndjson" | grep -q "\"name\": *\"get_order\""'

fresh
kexec fn --format json <<'EOF'
import asyncio
r = await asyncio.gather(*[get_order(f'b{i}') for i in range(22)], return_exceptions=True)
print(sum(isinstance(e, Exception) for e in r), type(r[-1]).__name__)
EOF
check calls_past_the_budget_fail_as_budget_exceeded eval 'status_is 0 && "$PY" -c "
import json
r = json.load(open(\"stdout\"))
assert r[\"stdout\"][\"text\"] == \"2 CallBudgetExceeded\\n\", r[\"stdout\"]
assert [c[\"status\"] for c in r[\"calls\"]].count(\"budget\") == 2, r[\"calls\"]
"'

fresh
kbox exec -s fn "print(env_of()); import os; print('SECRET' in os.environ)"
check a_command_gets_a_clean_environment_and_its_own_env eval \
	'status_is 0 && stdout_is "['"'"'LANG'"'"', '"'"'PATH'"'"', '"'"'PWD'"'"', '"'"'SECRET'"'"']
False"'

fresh
kbox exec -s fn "print(echo('hi'))"
check an_http_function_posts_the_arguments_as_json eval \
	'status_is 0 && stdout_is "{'"'"'echo'"'"': '"'"'hi'"'"', '"'"'type'"'"': '"'"'application/json'"'"'}"'

fresh
kbox exec -s fn "echo('404')"
check an_http_error_status_is_the_function_s_error eval 'status_is 1 &&
	[ "$(tail -n 1 stdout)" = "FunctionError: echo(): its URL answered HTTP 404: no such thing" ]'

fresh
kbox exec -s fn "input('name? ')"
check input_stays_refused_beside_the_functions eval 'status_is 1 &&
	[ "$(tail -n 1 stdout)" = "StdinNotImplementedError: input() is not available here: put the values in the code" ]'

fresh
kbox exec -s fn -i typed "print(get_order('o4')['id'], input(), get_order('o5')['id'])"
check input_lines_and_calls_do_not_mix eval 'status_is 0 && stdout_is "[input: the code asked \"\" and was given \"typed\"]
o4 typed o5"'

fresh
kbox restart -s fn
kbox exec -s fn "import kbox_functions; print(get_order('o6')['id'], kbox_functions.echo is echo)"
check a_new_kernel_has_the_functions_again eval 'status_is 0 && [ "$(tail -n 1 stdout)" = "o6 True" ] &&
	grep -q "^\[note: kernel restarted: .*it had defined: orders: list, r: list\]$" stdout'

fresh
kbox exec -s fn "import inspect; print(inspect.signature(get_order)); print(get_order.__doc__)"
check a_function_has_its_signature_and_docstring eval 'status_is 0 && stdout_is "(order_id: str) -> dict
Return one order, with its \`status\` and number of \`items\`."'

# ---- --type-check: mypy first ----

if /usr/bin/python3 -c 'import mypy' 2>/dev/null; then
	fresh
	kbox exec -s fn --type-check "x = get_order(42)"
	check type_check_returns_mypy_s_errors_instead_of_running eval 'status_is 1 && stdout_is "The code was not run: mypy found 1 error in its calls of the host functions:
line 1: Argument 1 to \"get_order\" has incompatible type \"int\"; expected \"str\"" &&
		! grep -q "\"order_id\": 42" "$S/fn/events.ndjson"'

	fresh
	kexec fn --type-check <<'EOF'
import asyncio
y: int = 'not checked: no host function'
orders = await asyncio.gather(get_order('t1'), get_order('t2'))
print([o['id'] for o in orders], undefined_here if False else 'ok')
EOF
	check type_check_lets_good_code_run eval 'status_is 0 && stdout_is "['"'"'t1'"'"', '"'"'t2'"'"'] ok"'

	fresh
	kbox exec -s fn --type-check -j "get_order()"
	check type_check_under_json_is_the_failure_object eval 'status_is 1 && "$PY" -c "
import json
o = json.load(open(\"stdout\"))
assert o[\"status\"] == \"failed\" and \"Missing positional argument\" in o[\"error\"][\"message\"], o
"'
else
	skip type_check_returns_mypy_s_errors_instead_of_running "no mypy (python3-mypy) for /usr/bin/python3"
	skip type_check_lets_good_code_run "no mypy"
	skip type_check_under_json_is_the_failure_object "no mypy"
fi

fresh
kbox exec -s inws_none --type-check "1"
check type_check_without_functions_is_refused eval 'status_is 2 &&
	stderr_is "kbox exec: --type-check checks the calls of host functions, and the session inws_none has none (see kbox-functions(5))" &&
	[ ! -e "$S/inws_none" ]'

# ---- through kbox mcp: a client reads the description, run_python calls ----

cat >"$FN/mcp_client.py" <<'EOF'
import json, subprocess, sys
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def rpc(i, method, params):
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n")
    p.stdin.flush()
    while True:
        m = json.loads(p.stdout.readline())
        if m.get("id") == i:
            return m["result"]
rpc(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": "t", "version": "1"}})
p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
p.stdin.flush()
tools = rpc(2, "tools/list", {})["tools"]
desc = [t for t in tools if t["name"] == "run_python"][0]["description"]
print("stub", "async def get_order(order_id: str) -> dict[str, Any]:" in desc)
print("listed", sorted(t["name"] for t in tools if "order" in t["name"]))
for i, code in enumerate(["import asyncio\norders = await asyncio.gather(get_order('o1'), get_order('o2'))\nprint([o['status'] for o in orders])",
                          "get_order(42)"]):
    r = rpc(3 + i, "tools/call", {"name": "run_python", "arguments": {"code": code}})
    print("call", r.get("isError", False), json.dumps(r["content"][0]["text"].splitlines()[-1]))
p.stdin.close()
p.wait()
EOF
if /usr/bin/python3 -c 'import mypy' 2>/dev/null; then
	fresh
	if [ -z "$SKIPPING" ]; then
		timeout 120 "$PY" "$FN/mcp_client.py" "$KBOX" mcp --functions "$FN/functions.json" --type-check >stdout 2>stderr
		rc=$?
	fi
	check mcp_client_reads_the_stubs_and_its_code_calls_them eval 'status_is 0 && stdout_is "stub True
listed []
call False \"['"'"'shipped'"'"', '"'"'shipped'"'"']\"
call True \"line 1: Argument 1 to \\\"get_order\\\" has incompatible type \\\"int\\\"; expected \\\"str\\\"\""'
else
	skip mcp_client_reads_the_stubs_and_its_code_calls_them "no mypy (python3-mypy) for /usr/bin/python3"
fi

# ---- an MCP server's tools as functions ----

MCP_SERVER=$top_srcdir/tests/mcp_tool_server.py
fresh
kbox start -s mcp --backend "$BACKEND" --functions-from-mcp "$MCP_SERVER"
check mcp_read_only_tools_are_taken_and_the_others_said eval 'status_is 0 &&
	stderr_is "kbox start: note: MCP server $MCP_SERVER: 1 tool left out, not marked read-only (\"allow\" or --functions-allow takes one by name): delete_order"'

fresh
kbox exec -s mcp "print(search('shoes'), search(q='hats', limit=9), order_count())"
check mcp_tools_answer_with_text_or_structured_content eval \
	'status_is 0 && stdout_is "found shoes (limit 3) found hats (limit 9) {'"'"'count'"'"': 7}"'

fresh
kbox exec -s mcp "search('fail')"
check an_mcp_tool_error_result_is_a_function_error eval 'status_is 1 &&
	[ "$(tail -n 1 stdout)" = "FunctionError: search(): search is down" ]'

fresh
kbox exec -s mcp "search(3)"
check an_mcp_tool_s_input_schema_checks_the_arguments eval 'status_is 1 &&
	[ "$(tail -n 1 stdout)" = "ArgumentError: search(): q must be a string, got int" ]'

fresh
kbox exec -s mcp "delete_order('o1')"
check a_tool_not_marked_read_only_is_not_a_function eval 'status_is 1 &&
	[ "$(tail -n 1 stdout)" = "NameError: name '"'"'delete_order'"'"' is not defined" ]'

fresh
kbox tool-schema --format anthropic --functions-from-mcp "$MCP_SERVER" --functions-allow delete_order
check tool_schema_shows_the_tools_stubs eval 'status_is 0 && stderr_empty && "$PY" -c "
import json
d = json.load(open(\"stdout\"))[\"description\"]
for stub in [\"async def search(q: str, limit: int = 3) -> Any:\", \"async def delete_order(order_id: str) -> Any:\",
             \"async def order_count() -> dict[str, Any]:\"]:
    assert stub in d, stub
"'

# a server of the file, with its environment, a call's timeout, and a
# tool allowed by name
cat >"$FN/mcp.json" <<EOF
{"mcp_servers": [{"command": ["$MCP_SERVER"], "allow": ["delete_order"], "timeout": 1,
                  "env": {"MCP_TOOL_LOG": "$FN/mcp.log"}}]}
EOF
fresh
kbox start -s mcpfile --backend "$BACKEND" --functions "$FN/mcp.json"
kbox exec -s mcpfile "print(delete_order('o9'))"
check an_allowed_tool_is_a_function eval 'status_is 0 && stdout_is deleted &&
	grep -qxF "{\"name\": \"delete_order\", \"arguments\": {\"order_id\": \"o9\"}}" "$FN/mcp.log"'

fresh
kbox exec -s mcpfile "search('slow')"
check an_mcp_call_past_its_timeout_is_a_function_timeout eval 'status_is 1 &&
	[ "$(tail -n 1 stdout)" = "FunctionTimeout: search(): no answer within 1 s (its timeout)" ]'

fresh
kbox exec -s mcpfile "print(search('after'))"
check the_server_answers_the_next_call eval 'status_is 0 && stdout_is "found after (limit 3)"'

fresh
kbox start -s mcpbad --backend "$BACKEND" --functions-from-mcp "/bin/true"
check a_server_that_says_nothing_is_refused eval 'status_is 2 &&
	stderr_is "kbox start: --functions-from-mcp: MCP server /usr/bin/true: the MCP server closed its output" &&
	[ ! -e "$S/mcpbad" ]'

# One that answers initialize, then closes its standard input and ends:
# whether the next write finds the input closed or its reader gone, the
# error is the same.
cat >"$FN/mcp_closes.sh" <<'EOF'
#!/bin/sh
read -r line
printf '%s\n' '{"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "closes", "version": "1"}}}'
exec 0<&-
EOF
chmod +x "$FN/mcp_closes.sh"
fresh
kbox start -s mcpbad3 --backend "$BACKEND" --functions-from-mcp "$FN/mcp_closes.sh"
check a_server_that_closes_its_input_is_refused eval 'status_is 2 &&
	stderr_is "kbox start: --functions-from-mcp: MCP server $FN/mcp_closes.sh: the MCP server closed its output" &&
	[ ! -e "$S/mcpbad3" ]'

fresh
kbox start -s mcpbad2 --backend "$BACKEND" --functions-allow x
check functions_allow_needs_a_server eval 'status_is 2 &&
	stderr_is "kbox start: --functions-allow is for the tools of --functions-from-mcp (a functions file'"'"'s server takes \"allow\")"'

# ---- the functions file's bad input: one line, exit 2, no session ----

bad_file() { # NAME JSON EXPECTED: kbox start with JSON as the file fails with EXPECTED
	bad=$1 expected=$3
	printf '%s\n' "$2" >"$FN/bad.json"
	fresh
	kbox start -s "bad_$bad" --backend "$BACKEND" --functions "$FN/bad.json"
	check "bad_file_$bad" eval 'status_is 2 && stdout_empty && stderr_is "kbox start: $expected" && [ ! -e "$S/bad_$bad" ]'
}
bad_file not_json '{"functions": [' "functions file $FN/bad.json: not valid JSON: ']' expected near end of file (line 2, column 0)"
bad_file no_list '{"functions": {}}' "functions file $FN/bad.json: \"functions\" must be an array of functions"
bad_file unknown_member '{"functions": [], "limit": 3}' "functions file $FN/bad.json: unknown member \"limit\" (it may have functions, mcp_servers, max_calls, max_concurrent)"
bad_file no_runner '{"functions": [{"name": "f"}]}' "functions file $FN/bad.json: function f: give it either \"command\" (an array: the program and its arguments) or \"http\" (a URL)"
bad_file both_runners '{"functions": [{"name": "f", "command": ["/bin/true"], "http": "http://127.0.0.1:1/"}]}' "functions file $FN/bad.json: function f: give it either \"command\" (an array: the program and its arguments) or \"http\" (a URL)"
bad_file missing_program '{"functions": [{"name": "f", "command": ["bin/nope"]}]}' "functions file $FN/bad.json: function f: program $FN/bin/nope: No such file or directory"
bad_file bad_name '{"functions": [{"name": "import", "command": ["/bin/true"]}]}' "functions file $FN/bad.json: host function \"import\": its name is not a Python identifier (letters, digits and _, at most 64, not a keyword, not starting with _ or a digit)"
bad_file twice '{"functions": [{"name": "f", "command": ["/bin/true"]}, {"name": "f", "command": ["/bin/true"]}]}' "functions file $FN/bad.json: host function \"f\" is defined twice"
bad_file typo '{"functions": [{"name": "f", "command": ["/bin/true"], "timout": 3}]}' "functions file $FN/bad.json: function f: unknown member \"timout\" (it may have name, description, parameters, returns, command or http, timeout, env)"
bad_file timeout '{"functions": [{"name": "f", "command": ["/bin/true"], "timeout": 0}]}' "functions file $FN/bad.json: function f: \"timeout\" must be a number of seconds, more than 0 and at most 3600"
bad_file url '{"functions": [{"name": "f", "http": "file:///etc/passwd"}]}' "functions file $FN/bad.json: function f: \"http\" must be an http:// or https:// URL"
bad_file bad_schema '{"functions": [{"name": "f", "command": ["/bin/true"], "parameters": {"type": "object", "properties": {"a": {"type": "strin"}}}}]}' "functions file $FN/bad.json: host function f: \"parameters\": the schema cannot be used: \"type\" in /properties/a is \"strin\", no JSON type"

fresh
kbox start -s nofile --backend "$BACKEND" --functions "$FN/absent.json"
check a_missing_functions_file_is_said eval 'status_is 2 && stderr_is "kbox start: functions file $FN/absent.json: No such file or directory" && [ ! -e "$S/nofile" ]'

# a program the kernel can write is never run on the host
fresh
kbox start -s inws --backend "$BACKEND"
kbox stop -s inws
mkdir -p "$S/inws/workspace/f" && cp "$FN/bin/not_json" "$S/inws/workspace/f/" &&
	printf '{"functions": [{"name": "f", "command": ["not_json"]}]}\n' >"$S/inws/workspace/f/functions.json"
kbox start -s inws --functions "$S/inws/workspace/f/functions.json"
check a_functions_file_in_the_workspace_is_refused eval 'status_is 2 &&
	grep -q "functions file'"'"'s directory $S/inws/workspace/f is in the session'"'"'s workspace, which the kernel can write" stderr'

# the commands' arguments and the paths to them: nothing the kernel can
# write, as written or through a link
mkdir -p "$FN/ws_link_dir"
ln -sfn "$S/inws/workspace" "$FN/ws_link"
printf '{"functions": [{"name": "f", "command": ["/usr/bin/python3", "%s/workspace/f/x.py"]}]}\n' "$S/inws" >"$FN/arg_in_ws.json"
fresh
kbox start -s inws --functions "$FN/arg_in_ws.json"
check a_script_argument_in_the_workspace_is_refused eval 'status_is 2 &&
	stderr_is "kbox start: session inws: function f: its argument $S/inws/workspace/f/x.py is in the session'"'"'s workspace, which the kernel can write"'
printf '{"functions": [{"name": "f", "command": ["%s/ws_link/f/not_json"]}]}\n' "$FN" >"$FN/link_to_ws.json"
fresh
kbox start -s inws --functions "$FN/link_to_ws.json"
check a_program_reached_through_a_link_into_the_workspace_is_refused eval 'status_is 2 &&
	stderr_is "kbox start: session inws: function f: its program $FN/ws_link/f/not_json is in the session'"'"'s workspace, which the kernel can write"'

# an HTTP function's POST is made once: a 5xx is its error, not retried
fresh
rm -f "$FN/port.requests"
kbox exec -s fn "echo('500')"
check an_http_5xx_is_not_retried eval 'status_is 1 &&
	[ "$(tail -n 1 stdout)" = "FunctionError: echo(): its URL answered HTTP 500: down" ] &&
	[ "$(grep -c "\"500\"" "$FN/port.requests")" = 1 ]'

# kbox run --functions: the run's private session has them
fresh
kbox run --backend "$BACKEND" --functions "$FN/functions.json" -c "print(get_order('r1')['id'])"
check kbox_run_gives_its_cells_the_functions eval 'status_is 0 && stdout_is r1'
mkdir -p ws_run && cp "$FN/functions.json" ws_run/ && cp -r "$FN/bin" ws_run/
kbox run --backend "$BACKEND" --workspace ws_run --functions ws_run/functions.json -c "1"
check kbox_run_refuses_functions_in_its_workspace eval 'status_is 2 &&
	grep -q "^kbox run: --workspace ws_run: the functions file.s directory .* is in the session.s workspace, which the kernel can write" stderr'

# a session that exists keeps its own functions: said, and described
fresh
if [ -z "$SKIPPING" ]; then
	timeout 60 "$KBOX" mcp -s fn --functions "$FN/mcp.json" </dev/null >stdout 2>stderr
	rc=$?
fi
check mcp_with_an_existing_session_warns_that_it_keeps_its_functions eval 'status_is 0 &&
	has_line stderr "kbox mcp: warning: session fn exists: it keeps its own host functions; --functions and --functions-from-mcp are for a new session"'

tests_done
