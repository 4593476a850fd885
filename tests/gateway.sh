#!/bin/bash
# tests/gateway.sh — backend gateway against a real Jupyter Server
# (Debian's python3-jupyter-server) that the script starts on 127.0.0.1
# with token auth: a session's kernel runs on the server, driven over its
# REST API and the kernel's WebSocket, with the same commands and results
# as a local one.  TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON.
# Needs jupyter_server and ipykernel importable by $PY; skipped, with the
# reason, without them.
# shellcheck disable=SC2016 # eval strings expand later, on purpose
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
ROOT_TAG=kg
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"

# (the environment's gateway settings are the tests' to give)
unset KBOX_GATEWAY_URL KBOX_GATEWAY_TOKEN
TOKEN=kbox-test-$$-token
printf '%s\n' "$TOKEN" >"$ROOT/token"
chmod 600 "$ROOT/token"

have_server=yes
"$PY" -c 'import jupyter_server, ipykernel' 2>/dev/null || have_server=no
server_or_skip() {
	SKIPPING=
	[ "$have_server" = yes ] || SKIPPING="$PY cannot import jupyter_server and ipykernel (python3-jupyter-server)"
}

# api METHOD PATH [PORT]: the server's REST API with the token; prints
# "STATUS BODY".
api() {
	"$PY" - "$1" "$2" "${3:-$PORT}" "$TOKEN" "${API_HOST:-127.0.0.1}" <<'PYEOF'
import sys, urllib.request, urllib.error
method, path, port, token, host = sys.argv[1:6]
req = urllib.request.Request("http://%s:%s%s" % (host, port, path), method=method,
                             headers={"Authorization": "token " + token},
                             data=b"" if method == "POST" else None)
try:
    with urllib.request.urlopen(req, timeout=30) as r:
        print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
except OSError as e:
    print(0, e)
PYEOF
}
# kernels: the ids of the server's kernels, one a line.
kernels() {
	api GET /api/kernels | "$PY" -c '
import json, sys
code, _, body = sys.stdin.read().partition(" ")
for k in json.loads(body): print(k["id"])'
}
no_kernels() { [ -z "$(kernels)" ]; }
# kernels_at PORT: those of the server at PORT.
kernels_at() { PORT=$1 kernels; }
server_up() { api GET /api/status | grep -q '^200 '; }

# start_server DIR [OPTION...]: a Jupyter Server on a free port ($PORT)
# of 127.0.0.1 (or of $SERVER_IP, which api then reaches as $API_HOST),
# its pid $SERVER_PID (ended at exit), its files in DIR, its log
# DIR/server.log.
start_server() {
	sdir=$1
	shift
	mkdir -p "$sdir/root" "$sdir/rt" "$sdir/cfg" "$sdir/data"
	PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	JUPYTER_RUNTIME_DIR=$sdir/rt JUPYTER_CONFIG_DIR=$sdir/cfg JUPYTER_DATA_DIR=$sdir/data \
		"$PY" -m jupyter_server --ip="${SERVER_IP:-127.0.0.1}" --port="$PORT" --port-retries=0 --no-browser \
		--allow-root --ServerApp.token="$TOKEN" --ServerApp.root_dir="$sdir/root" \
		--ServerApp.limit_rate=False --FileContentsManager.delete_to_trash=False "$@" \
		>"$sdir/server.log" 2>&1 &
	SERVER_PID=$!
	BG_PIDS="$BG_PIDS $SERVER_PID"
	wait_for server_up
}
URL() { echo "http://127.0.0.1:$PORT"; }

# ---- a session on the server ----

server_or_skip
# (its log has each request: the paged read_file's fetches are counted)
[ -n "$SKIPPING" ] || { start_server "$ROOT/s1" --log-level=DEBUG; S1_PID=$SERVER_PID; }

fresh
kbox start -s g --backend gateway --url "$(URL)" --token-file "$ROOT/token"
check start_runs_the_kernel_on_the_server eval 'status_is 0 && stderr_empty &&
	stdout_is "session g started (backend gateway, kernel python3, supervisor pid $(cat "$KBOX_HOME/sessions/g/supervisor.pid"))" &&
	[ "$(kernels | wc -l)" = 1 ]'
check the_token_is_kept_beside_session_json_not_in_it eval '
	[ "$(cat "$KBOX_HOME/sessions/g/gateway-token")" = "$TOKEN" ] &&
	[ "$(stat -c %a "$KBOX_HOME/sessions/g/gateway-token")" = 600 ] &&
	! grep -q "$TOKEN" "$KBOX_HOME/sessions/g/session.json" &&
	grep -q "\"gateway\": \"$(URL)\"" "$KBOX_HOME/sessions/g/session.json"'
# (the supervisor and its helper kbox-gateway: the server's own command
# line has it, as the test gives it)
sup=$(cat "$KBOX_HOME/sessions/g/supervisor.pid" 2>/dev/null)
helper=$(pgrep -P "$sup" -x kbox-gateway)
check row56_the_token_is_in_no_argument_or_variable_of_kbox_processes eval '[ -n "$helper" ] &&
	! grep -qF "$TOKEN" "/proc/$sup/cmdline" "/proc/$sup/environ" "/proc/$helper/cmdline" \
		"/proc/$helper/environ"'

kbox status -s g
check status_names_the_remote_kernel_and_its_server eval 'status_is 0 &&
	[ "$(status_line remote_kernel)" = "$(kernels)" ] && [ "$(status_line server)" = "$(URL)" ] &&
	[ "$(status_line memory)" = - ] && [ "$(status_line backend)" = gateway ]'

# kbox kernelspecs -s: those of the session's server, as its API lists them
kbox kernelspecs -s g
check kernelspecs_of_a_gateway_session_are_its_servers eval 'status_is 0 &&
	[ "$(cut -f 1 stdout | tr "\n" " ")" = "$(api GET /api/kernelspecs | "$PY" -c "
import json, sys
print(\" \".join(sorted(json.loads(sys.stdin.read().partition(\" \")[2])[\"kernelspecs\"])) + \" \", end=\"\")")" ] &&
	grep -qx "python3	$(URL)/api/kernelspecs/python3	Python 3 (ipykernel)" stdout'
kbox kernelspecs -s g --json
check and_in_json_each_names_its_server eval 'status_is 0 && json_true stdout \
	"(j[\"python3\"][\"server\"] == \"$(URL)/api/kernelspecs/python3\" and
	  j[\"python3\"][\"language\"] == \"python\" and \"resource_dir\" not in j[\"python3\"])"'

# a server at an IPv6 address: the URL's host as given, in brackets
# (curl gives them; they were doubled once).  API_HOST: api's host.
server_or_skip
setup_for a_server_at_an_ipv6_url_runs_the_kernel
[ -n "$SKIPPING" ] || "$PY" -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' \
	2>/dev/null || SKIPPING="no IPv6 loopback (::1) here"
if [ -z "$SKIPPING" ]; then
	OLD_PORT=$PORT
	SERVER_IP=::1 API_HOST='[::1]' start_server "$ROOT/s6"
	V6_PORT=$PORT V6_PID=$SERVER_PID PORT=$OLD_PORT
fi
kbox start -s v6 --backend gateway --url "http://[::1]:${V6_PORT-}" --token-file "$ROOT/token"
kbox exec -s v6 'print(6 * 7)'
check a_server_at_an_ipv6_url_runs_the_kernel eval 'status_is 0 && stdout_is 42 &&
	[ "$(API_HOST="[::1]" kernels_at "$V6_PORT" | wc -l)" = 1 ]'
kbox stop -s v6
[ -n "$SKIPPING" ] || { kill "$V6_PID"; wait "$V6_PID" 2>/dev/null; }
setup_for
server_or_skip

# the three-call analysis, with a chart
kbox exec -s g 'import pandas as pd; df = pd.DataFrame({"x": [1, 2, 3, 4], "y": [2, 4, 6, 9]})'
check a_remote_call_defines_a_dataframe eval 'status_is 0 && stdout_empty && stderr_empty'
kbox exec -s g 'print(df["y"].sum(), len(df))'
check the_dataframe_is_there_in_the_next_call eval 'status_is 0 && stdout_is "21 4" && stderr_empty'
kbox exec -s g 'import matplotlib.pyplot as plt; plt.plot(df["x"], df["y"]); plt.show()'
png=$(sed -n 's/^\[image saved: \(.*\) ([0-9]*×[0-9]* px)\]$/\1/p' stdout 2>/dev/null)
check the_chart_arrives_as_a_png_file_of_the_session eval 'status_is 0 && stderr_empty &&
	[ "$(wc -l <stdout)" = 1 ] && case $png in "$KBOX_HOME"/sessions/g/outputs/*.png) true ;; *) false ;; esac &&
	is_png "$png"'
kbox exec -s g 'import sys; print("out"); print("err", file=sys.stderr); 1/0'
check an_error_is_reported_with_stdout_and_stderr_apart eval 'status_is 1 && stderr_empty &&
	[ "$(head -n 3 stdout)" = "out
[stderr]
err" ] && tail -n 1 stdout | grep -qx "ZeroDivisionError: division by zero"'
kbox exec -s g -i 'ok' 'print(input("? ") * 2)'
check input_travels_over_the_stdin_channel eval 'status_is 0 &&
	stdout_is "[input: the code asked \"? \" and was given \"ok\"]
okok"'

# another client talks to the kernel while a cell runs: its request on
# control is answered meanwhile, numbered by the kernel but never kbox's:
# no output is said to be lost
kbox exec -s g --format ndjson "import os, time
print('waiting', flush=True)
while not os.path.exists('$ROOT/joined'):
    time.sleep(0.05)
print('done')" &
bg=$!
if [ -z "$SKIPPING" ]; then
	wait_for grep -qF '"text":"waiting\n"' "$T/stdout" >/dev/null
	"$PY" - "$PORT" "$TOKEN" "$(kernels)" <<'PYEOF'
import sys, websocket
port, token, kid = sys.argv[1:4]
import json, uuid
ws = websocket.create_connection("ws://127.0.0.1:%s/api/kernels/%s/channels?session_id=other" % (port, kid),
                                 header=["Authorization: token " + token])
# a request on control, answered while the cell runs (to this client)
mid = uuid.uuid4().hex
ws.send(json.dumps({"header": {"msg_id": mid, "msg_type": "kernel_info_request", "session": "other",
                               "username": "t", "version": "5.3", "date": ""},
                    "parent_header": {}, "metadata": {}, "content": {}, "channel": "control", "buffers": []}))
while json.loads(ws.recv())["parent_header"].get("msg_id") != mid:
    pass
ws.close()
PYEOF
	touch "$ROOT/joined"
fi
wait "$bg"
check another_clients_request_mid_cell_is_no_lost_output eval 'status_is 0 &&
	grep -qF "\"text\":\"done\\n\"" stdout && grep -q "\"event\":\"end\",\"status\":\"ok\"" stdout &&
	! grep -q "never reached kbox" stdout'

# files: the kernel's working directory is the session's directory on the
# server, kbox/NAME-HASH, made at start; kbox put and get and kbox mcp's
# file tools reach it through the server's contents API
kbox status -s g
rdir=$(status_line remote_dir)
SROOT=$ROOT/s1/root
check the_kernels_directory_on_the_server_is_made_and_named_in_status eval 'status_is 0 &&
	case $rdir in kbox/g-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]) true ;; *) false ;; esac &&
	[ -d "$SROOT/$rdir" ] && [ "$(cat "$KBOX_HOME/sessions/g/gateway-dir")" = "$rdir" ]'
kbox exec -s g 'import os; print(os.getcwd())'
check the_remote_kernel_works_in_that_directory eval 'status_is 0 && stdout_is "$SROOT/$rdir"'
printf 'a,b\n1,2\n' >"$T/local.csv"
kbox put -s g "$T/local.csv"
check put_copies_a_file_to_the_kernels_directory_on_the_server eval 'status_is 0 &&
	stdout_empty && stderr_empty && cmp -s "$T/local.csv" "$SROOT/$rdir/local.csv"'
kbox exec -s g 'import pandas as pd; print(pd.read_csv("local.csv")["b"].sum())'
check the_remote_kernel_reads_the_file_put eval 'status_is 0 && stdout_is 2'
kbox put -s g "$T/local.csv" "sub/dir/x y%.csv"
check put_makes_no_directory_as_in_a_workspace fails_with 2 \
	"kbox put: sub/dir/x y%.csv: its directory does not exist (none is made: make it in the code)"
kbox exec -s g 'import os; os.makedirs("sub/dir")'
kbox put -s g "$T/local.csv" "sub/dir/x y%.csv"
check put_into_a_directory_the_code_made eval 'status_is 0 &&
	cmp -s "$T/local.csv" "$SROOT/$rdir/sub/dir/x y%.csv"'
kbox put -s g "$T/local.csv" sub/dir/
check put_to_a_directory_keeps_the_files_name eval 'status_is 0 &&
	cmp -s "$T/local.csv" "$SROOT/$rdir/sub/dir/local.csv"'
kbox put -s g "$T/local.csv" local.csv/
check put_to_a_file_as_a_directory_is_refused_and_keeps_it fails_with 2 \
	"kbox put: local.csv/ is not a directory"
check the_file_is_as_it_was eval 'cmp -s "$T/local.csv" "$SROOT/$rdir/local.csv"'
printf 'x\n' | kbox put -s g - sub/dir
check standard_input_to_a_directory_is_refused fails_with 2 \
	"kbox put: sub/dir is a directory: give the file's name in it"
# a link the code made is replaced, as in a workspace, not written through
echo outside >"$ROOT/outside.txt"
kbox exec -s g "import os; os.symlink('$ROOT/outside.txt', 'lnk')"
kbox put -s g "$T/local.csv" lnk
check put_replaces_a_link_at_its_destination_and_writes_nothing_through_it eval 'status_is 0 &&
	[ "$(cat "$ROOT/outside.txt")" = outside ] && [ ! -L "$SROOT/$rdir/lnk" ] &&
	cmp -s "$T/local.csv" "$SROOT/$rdir/lnk"'
printf 'piped\n' | kbox put -s g - piped.txt
check put_takes_standard_input eval 'status_is 0 && [ "$(cat "$SROOT/$rdir/piped.txt")" = piped ]'
# over 8 MiB: in parts, to a file beside it that then replaces it
head -c 20000000 /dev/urandom >"$T/big.bin"
head -c 9000000 /dev/urandom >"$T/big2.bin"
kbox exec -s g 'import os; os.mkdir("data")'
kbox put -s g "$T/big.bin" data/big.bin
check a_large_file_goes_in_parts_and_arrives_whole eval 'status_is 0 &&
	cmp -s "$T/big.bin" "$SROOT/$rdir/data/big.bin" &&
	[ -z "$(ls "$SROOT/$rdir/data" | grep -v "^big.bin$")" ]'
kbox put -s g "$T/big2.bin" data/big.bin
check a_large_file_replaces_one_there_whole eval 'status_is 0 &&
	cmp -s "$T/big2.bin" "$SROOT/$rdir/data/big.bin" &&
	[ -z "$(ls "$SROOT/$rdir/data" | grep -v "^big.bin$")" ]'
kbox get -s g data/big.bin "$T/back.bin"
check get_copies_a_large_file_back_whole eval 'status_is 0 && cmp -s "$T/big2.bin" "$T/back.bin"'
kbox exec -s g 'df.to_csv("out.csv", index=False)'
kbox get -s g out.csv -
check get_copies_what_the_remote_kernel_wrote eval 'status_is 0 && stderr_empty &&
	[ "$(cat stdout)" = "$(printf "x,y\n1,2\n2,4\n3,6\n4,9")" ]'
kbox get -s g out.csv "$T/"
check get_into_a_directory_keeps_the_name eval 'status_is 0 && [ "$(head -n 1 "$T/out.csv")" = x,y ]'
kbox get -s g nope.txt
check get_of_a_missing_file_names_it_and_where_it_was_looked_for fails_with 2 \
	"kbox get: nope.txt: no such file in the session's directory $rdir on the Jupyter server at $(URL)"
kbox get -s g sub
check get_of_a_directory_is_refused fails_with 2 "kbox get: sub is a directory, not a file"
kbox get -s g "$(printf 'nu/tab\tname')" -
check get_of_a_name_with_a_control_character_says_why eval 'status_is 2 && stdout_empty &&
	grep -q "^kbox get: nu/tab.name: a name with a control character cannot go through the Jupyter server'"'"'s API$" stderr'
kbox put -s g "$T/local.csv" .hidden.csv
check put_of_a_name_the_server_refuses_says_why eval 'status_is 2 && stdout_empty &&
	grep -q "^kbox put: writing .hidden.csv: HTTP 400: " stderr'
kbox put -s g "$T/local.csv" ../escaped.csv
check row59_a_path_out_of_the_sessions_directory_is_refused eval 'status_is 2 && stdout_empty &&
	grep -q "^kbox put: \.\./escaped\.csv: " stderr && [ ! -e "$SROOT/kbox/escaped.csv" ]'
kbox get -s g "sub/../../g-x/local.csv"
check row59_so_is_one_to_get eval 'status_is 2 && stdout_empty && grep -q "^kbox get: " stderr'
[ -n "$SKIPPING" ] || printf '%s\n' "{\"url\": \"$(URL)\", \"token\": \"$TOKEN\"}" |
	"$top_builddir/kbox-gateway" get "$rdir" ../local.csv 1 >stdout 2>stderr
check row59_the_helper_refuses_a_dot_dot_component_itself eval '
	stdout_is "{\"error\":{\"kind\":\"usage\",\"message\":\"../local.csv: a path with \\\"..\\\" is refused\"}}"'
kbox exec -s g 'f = open("huge.bin", "wb"); f.truncate(129 << 20); f.close()'
kbox get -s g huge.bin "$T/huge.bin"
check row59_a_file_over_128_mib_is_refused_before_it_is_sent eval 'status_is 2 && stdout_empty &&
	grep -q "^kbox get: huge.bin is 135266304 bytes: a file of over 128 MiB is not taken" stderr &&
	[ ! -e "$T/huge.bin" ]'
# one of 128 MiB comes whole, from the server's file handler as it is
# (the contents API, base64 in JSON, is not asked for it)
kbox exec -s g 'f = open("huge.bin", "wb"); f.truncate(128 << 20); f.close()'
kbox get -s g huge.bin "$T/huge.bin"
check a_file_of_128_mib_comes_whole eval 'status_is 0 && stderr_empty &&
	[ "$(stat -c %s "$T/huge.bin")" = 134217728 ] && cmp -s "$T/huge.bin" /dev/zero -n 134217728 &&
	grep -q " 200 GET /files/$rdir/huge.bin " "$ROOT/s1/server.log" &&
	! grep -q "GET /api/contents/$rdir/huge.bin?type=file&format=base64&content=1 " "$ROOT/s1/server.log"'
rm -f "$T/huge.bin"
# a put of parts that ends early (kbox killed) leaves no part on the server:
# its helper removes it before it ends
if [ -z "$SKIPPING" ]; then
	mkfifo "$T/fifo"
	"$KBOX" put -s g - stopped.bin <"$T/fifo" >/dev/null 2>&1 &
	putpid=$!
	exec 3>"$T/fifo"
	head -c 9000000 /dev/zero >&3
	parts() { ls "$SROOT/$rdir" | grep -c "^stopped.bin.kbox-part-"; }
	wait_for [ "$(parts)" = 1 ]
	puthelper=$(pgrep -P "$putpid" -x kbox-gateway)
	kill -TERM "$putpid"
	wait "$putpid"
	[ -n "$puthelper" ] && wait_for gone "$puthelper"
	exec 3>&-
fi
check a_put_stopped_midway_leaves_no_part_and_no_file eval '[ -n "$puthelper" ] &&
	[ "$(parts)" = 0 ] && [ ! -e "$SROOT/$rdir/stopped.bin" ]'

# a timeout, and an interrupt
kbox exec -s g 'keep = 7'
kbox exec -s g -t 1 'import time; time.sleep(60)'
check a_timeout_interrupts_the_remote_kernel_and_keeps_its_state eval 'status_is 3 &&
	grep -q "^\[timeout: timed out after 1 s; the kernel was interrupted (state kept)\]$" stdout'
kbox exec -s g 'print(keep)'
check the_state_is_there_after_the_timeout eval 'status_is 0 && stdout_is 7'
# (the execution's output in a directory of its own: kbox interrupt's
# ./stdout, opened later, would be written over it)
fresh
bgdir=$(pwd)
kbox exec -s g 'import time; time.sleep(60)' &
bg=$!
fresh
wait_for is_busy g >/dev/null
kbox interrupt -s g
wait "$bg"
check kbox_interrupt_interrupts_the_remote_kernel eval 'grep -q "^KeyboardInterrupt" "$bgdir/stdout"'

# the kernel dies on the server: reported as a restart, with what it held
kbox exec -s g 'import os; os._exit(1)'
check a_remote_kernel_that_dies_is_reported_as_died eval 'status_is 4'
wait_idle g >/dev/null
kbox exec -s g 'print(2)'
check the_next_call_says_the_state_was_lost eval 'status_is 0 &&
	grep -q "^\[note: kernel restarted: .*earlier state .* is lost" stdout && tail -n 1 stdout | grep -qx 2'
one_kernel() { [ "$(kernels | wc -l)" = 1 ]; }
# (by its helper, while the next kernel starts)
check the_dead_kernel_is_deleted_on_the_server eval 'wait_for one_kernel'

# kbox restart: a new remote kernel, the old one deleted
old=$(kernels)
kbox restart -s g
check restart_replaces_the_remote_kernel eval 'status_is 0 && wait_for one_kernel &&
	[ "$(kernels)" != "$old" ]'

# kbox restart while the server is frozen (SIGSTOP): the old kernel's
# helper waits on the server, the supervisor does not, and goes on
# answering; once the server is back the restart ends and the old kernel
# is deleted
old=$(kernels)
sup=$(cat "$KBOX_HOME/sessions/g/supervisor.pid" 2>/dev/null)
oldhelper=$(pgrep -n -P "$sup" -x kbox-gateway)
restarts() { grep -c '"event":"restart"' "$KBOX_HOME/sessions/g/events.ndjson"; }
before=$(restarts)
restarted() { [ "$(restarts)" -gt "$before" ]; }
if [ -z "$SKIPPING" ]; then
	kill -STOP "$S1_PID"
	("$KBOX" restart -s g >"$ROOT/frozen.out" 2>&1; echo $? >"$ROOT/frozen.rc") &
	wait_for restarted
fi
kbox status -s g
check a_restart_waiting_on_a_frozen_server_leaves_the_session_answering eval 'status_is 0 &&
	[ "$(status_line state)" = starting ] && [ -n "$oldhelper" ] && kill -0 "$oldhelper"'
check and_its_status_names_the_server_and_directory_meanwhile eval '
	[ "$(status_line server)" = "$(URL)" ] && [ "$(status_line remote_dir)" = "$rdir" ] &&
	[ -z "$(status_line remote_kernel)" ]'
if [ -z "$SKIPPING" ]; then
	kill -CONT "$S1_PID"
	wait_for test -s "$ROOT/frozen.rc"
fi
old_deleted() { ! kernels | grep -qx "$old"; }
old_told() {
	grep -q "\"event\":\"remote-deleted\",\"id\":\"$old\"" "$KBOX_HOME/sessions/g/events.ndjson"
}
check once_the_server_is_back_the_restart_ends_and_the_old_kernel_goes eval '
	[ "$(cat "$ROOT/frozen.rc")" = 0 ] && grep -q "^session g: kernel restarted" "$ROOT/frozen.out" &&
	wait_for old_deleted && wait_for one_kernel && wait_for old_told &&
	! kill -0 "$oldhelper" 2>/dev/null'

# nothing the session wrote holds the token (its logs, its events, its
# results), but gateway-token
check row56_no_file_of_the_session_but_its_token_file_holds_the_token eval '
	[ -s "$KBOX_HOME/sessions/g/events.ndjson" ] &&
	[ -z "$(grep -rlF "$TOKEN" "$KBOX_HOME/sessions/g" | grep -v "/gateway-token$")" ]'

# another client deletes the kernel (as a culling would): the next call
# says the server no longer has it, and the session goes on
[ -z "$SKIPPING" ] && api DELETE "/api/kernels/$(kernels)" >/dev/null
kbox exec -s g 'print(1)'
check a_kernel_the_server_no_longer_has_is_reported_lost eval 'status_is 4 &&
	grep -q "^\[kernel died: the Jupyter server no longer has the remote kernel [-0-9a-f]* (culled, or shut down by another client); its state is lost" stdout'
wait_idle g >/dev/null
kbox exec -s g 'print(1)'
check the_session_goes_on_with_a_new_remote_kernel eval 'status_is 0 && tail -n 1 stdout | grep -qx 1 &&
	[ "$(kernels | wc -l)" = 1 ]'

# stop deletes the remote kernel
kbox stop -s g
check stop_deletes_the_remote_kernel eval 'status_is 0 && no_kernels'
# a start of it that cannot reach its server leaves it stopped, and says why
nothing=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
kbox start -s g --url "http://127.0.0.1:$nothing"
kbox status -s g
check a_failed_start_leaves_the_session_stopped_with_the_cause eval 'status_is 5 &&
	[ "$(status_line state)" = stopped ] &&
	status_line last_stop | grep -q "^it could not start: backend gateway: cannot reach the Jupyter server at http://127.0.0.1:$nothing: "'
check a_stopped_sessions_status_names_its_server_and_remote_dir eval '
	[ "$(status_line server)" = "$(URL)" ] && [ "$(status_line remote_dir)" = "$rdir" ] &&
	[ -d "$SROOT/$rdir" ]'
# so does one with a token the server refuses: the session keeps its own
# (as it keeps its URL), and its next start works with it
printf 'wrong-token\n' >"$ROOT/badtoken"
kbox start -s g --token-file "$ROOT/badtoken"
check a_failed_start_leaves_the_sessions_token_as_it_was eval 'status_is 5 &&
	grep -q "the Jupyter server refused the token (HTTP 403" stderr &&
	[ "$(cat "$KBOX_HOME/sessions/g/gateway-token")" = "$TOKEN" ] &&
	[ "$(stat -c %a "$KBOX_HOME/sessions/g/gateway-token")" = 600 ]'
kbox start -s g
check the_next_start_works_with_the_sessions_token eval 'status_is 0 && [ "$(kernels | wc -l)" = 1 ]'
kbox stop -s g
# and a session that had no token has none after such a start
[ -n "$SKIPPING" ] || { mkdir -p -m 700 "$KBOX_HOME/sessions/nt" &&
	printf '{"name": "nt", "kernel": "python3", "backend": "gateway", "gateway": "%s"}\n' \
		"$(URL)" >"$KBOX_HOME/sessions/nt/session.json"; }
kbox start -s nt --token-file "$ROOT/badtoken"
check a_failed_start_leaves_no_token_where_there_was_none eval 'status_is 5 &&
	grep -q "the Jupyter server refused the token (HTTP 403" stderr &&
	[ -e "$KBOX_HOME/sessions/nt/session.json" ] && [ ! -e "$KBOX_HOME/sessions/nt/gateway-token" ]'

# a kernel that dies as it starts, which the server removes once its
# restarts failed: the start says so then, not at the launch timeout
mkdir -p "$ROOT/s1/data/kernels/dies"
echo '{"argv": ["sh", "-c", "exit 3"], "display_name": "dies", "language": "python"}' \
	>"$ROOT/s1/data/kernels/dies/kernel.json"
kbox start -s dies -k dies --backend gateway --url "$(URL)" --token-file "$ROOT/token"
check a_kernel_that_dies_as_it_starts_is_reported_as_such eval 'status_is 5 && stdout_empty &&
	grep -Eqx "kbox start: session dies: the remote kernel could not start: the kernel [-0-9a-f]+ died on the Jupyter server as it started, and the server removed it \(the server.s log says why\)" stderr &&
	no_kernels'
rm -r "$ROOT/s1/data/kernels/dies"

# the idle TTL stops the session and deletes its remote kernel
kbox start -s ttl --backend gateway --url "$(URL)" --token-file "$ROOT/token" --ttl 2s
sup=$(cat "$KBOX_HOME/sessions/ttl/supervisor.pid" 2>/dev/null)
check the_ttl_stops_the_session_and_deletes_its_remote_kernel eval 'status_is 0 &&
	gone "$sup" && wait_for no_kernels &&
	grep -qF "\"cause\":\"the session was idle for 2 s (its TTL) and stopped\",\"event\":\"stop\"" \
		"$KBOX_HOME/sessions/ttl/events.ndjson"'

# the supervisor killed: its helper deletes the remote kernel
kbox start -s k --backend gateway --url "$(URL)" --token-file "$ROOT/token"
sup=$(cat "$KBOX_HOME/sessions/k/supervisor.pid" 2>/dev/null)
[ -z "$SKIPPING" ] && kill -KILL "$sup"
check a_killed_supervisor_leaves_no_remote_kernel eval 'gone "$sup" && wait_for no_kernels'

# the supervisor and its helper killed at once: the remote kernel is
# left, recorded, and the session's next start deletes it
kbox start -s z --backend gateway --url "$(URL)" --token-file "$ROOT/token"
kbox exec -s z 'pass'
sup=$(cat "$KBOX_HOME/sessions/z/supervisor.pid" 2>/dev/null)
helper=$(pgrep -P "$sup" -x kbox-gateway)
left=$(kernels)
[ -z "$SKIPPING" ] && kill -KILL "$helper" "$sup"
check a_kernel_left_by_killed_processes_stays_recorded eval 'gone "$sup" && gone "$helper" &&
	[ "$(kernels)" = "$left" ] && grep -q "\"id\":\"$left\"" "$KBOX_HOME/sessions/z/gateway-kernel"'
kbox exec -s z 'print(5)'
check the_next_start_deletes_the_left_kernel eval 'status_is 0 && tail -n 1 stdout | grep -qx 5 &&
	[ "$(kernels | wc -l)" = 1 ] && [ "$(kernels)" != "$left" ] &&
	grep -q "\"event\":\"remote-deleted\".*\"id\":\"$left\"" "$KBOX_HOME/sessions/z/events.ndjson"'
# the session's directory on the server is its own: one made anew after
# kbox rm gets another (kbox rm leaves the old one on the server)
zdir=$(cat "$KBOX_HOME/sessions/z/gateway-dir" 2>/dev/null)
kbox rm -f z
kbox start -s z --backend gateway --url "$(URL)" --token-file "$ROOT/token"
check a_session_made_anew_after_rm_gets_a_directory_of_its_own eval 'status_is 0 &&
	[ -n "$zdir" ] && [ "$(cat "$KBOX_HOME/sessions/z/gateway-dir")" != "$zdir" ] &&
	[ -d "$SROOT/$(cat "$KBOX_HOME/sessions/z/gateway-dir")" ] && [ -d "$SROOT/$zdir" ]'
kbox stop -s z
check stop_leaves_no_record eval 'status_is 0 && no_kernels && [ ! -e "$KBOX_HOME/sessions/z/gateway-kernel" ]'
# a kernel recorded on another server (the session's URL changed since):
# forgotten, and said, with no request to that server (the token is this
# server's) and no wait on it (a listener there that never answers)
"$PY" -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
__import__("os").rename(sys.argv[1] + ".tmp", sys.argv[1])
c, _ = s.accept()
open(sys.argv[2], "w").write("connected")
c.recv(65536)
' "$ROOT/other.port" "$ROOT/other.seen" &
OTHER_PID=$!
BG_PIDS="$BG_PIDS $OTHER_PID"
wait_for test -s "$ROOT/other.port"
printf '[{"url":"http://127.0.0.1:%s","id":"0e9a6f0c-other"}]' "$(cat "$ROOT/other.port")" \
	>"$KBOX_HOME/sessions/z/gateway-kernel"
kbox start -s z
check a_kernel_recorded_on_another_server_is_forgotten_and_said eval 'status_is 0 &&
	[ ! -e "$ROOT/other.seen" ] && ! grep -q other "$KBOX_HOME/sessions/z/gateway-kernel" &&
	grep -qF "\"error\":\"left on a server the session no longer uses (its URL changed): kbox has no token of that server'"'"'s; delete the kernel there\",\"event\":\"remote-orphan\",\"id\":\"0e9a6f0c-other\"" \
		"$KBOX_HOME/sessions/z/events.ndjson"'
kbox stop -s z

# host functions, called from the remote kernel (over its stdin
# channel), and kbox mcp's run_python on a remote session
mkdir -p "$ROOT/fn"
cat >"$ROOT/fn/double" <<'SH'
#!/bin/sh
# {"x": N} on stdin: {"y": 2N}
exec /usr/bin/python3 -c 'import json, sys; print(json.dumps({"y": 2 * json.load(sys.stdin)["x"]}))'
SH
chmod +x "$ROOT/fn/double"
cat >"$ROOT/fn/functions.json" <<JSON
{"functions": [{"name": "double", "command": ["$ROOT/fn/double"],
  "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}]}
JSON
fresh
kbox start -s f --backend gateway --url "$(URL)" --token-file "$ROOT/token" \
	--functions "$ROOT/fn/functions.json"
kbox status -s f
rdir_f=$(status_line remote_dir)
kbox exec -s f 'print(double(21))'
check host_functions_are_called_from_the_remote_kernel eval 'status_is 0 &&
	stdout_is "{'"'"'y'"'"': 42}"'
kbox exec -s f 'double("x")'
check a_remote_calls_bad_argument_is_refused_on_the_host eval 'status_is 1 &&
	[ "$(tail -n 1 stdout)" = "ArgumentError: double(): x must be an integer, got str" ]'
[ -n "$SKIPPING" ] || "$PY" - "$KBOX" <<'PYEOF' >stdout 2>stderr
import json, subprocess, sys
p = subprocess.Popen([sys.argv[1], "mcp", "-s", "f"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     text=True)
def ask(i, method, params):
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())
ask(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": "t", "version": "1"}})
p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
r = ask(2, "tools/call", {"name": "run_python", "arguments": {"code": "print(double(4)['y'] * 10)"}})
print(r["result"]["content"][0]["text"], end="")
def call(i, name, args):
    r = ask(i, "tools/call", {"name": name, "arguments": args})["result"]
    c = r["content"][0]
    print(name, r.get("isError", False), c.get("text", c.get("mimeType")).rstrip("\n"),
          file=sys.stderr)
call(20, "run_python", {"code": "import os; os.mkdir('notes')"})
call(3, "write_file", {"path": "notes/m.txt", "content": "h\u00e9llo\n"})
call(4, "list_files", {"path": "notes"})
call(5, "read_file", {"path": "/workspace/notes/m.txt", "length": 3})
call(6, "read_file", {"path": "notes/m.txt", "offset": 3})
call(7, "run_python", {"code": "import matplotlib.pyplot as plt; plt.plot([1, 2]); "
                                "plt.savefig('c.png'); plt.close(); print('saved')"})
call(8, "read_image", {"path": "c.png"})
call(9, "read_file", {"path": "nope.txt"})
call(10, "list_files", {"path": "notes/m.txt"})
call(11, "run_python", {"code": "f = open('big.png', 'wb'); f.truncate(6 << 20); f.close()"})
call(12, "read_image", {"path": "big.png"})
# (a name that is not UTF-8: the server writes it with a lone surrogate)
call(13, "run_python", {"code": "open(b'notes/b\\xff.txt', 'wb').write(b'hi');"})
call(14, "list_files", {"path": "notes"})
# (a file changed since it was read is read anew, not from the copy kept)
call(15, "run_python", {"code": "open('notes/m.txt', 'w').write('new text\\n');"})
call(16, "read_file", {"path": "notes/m.txt", "offset": 4})
p.stdin.close()
p.wait()
PYEOF
rc=$?
check kbox_mcp_runs_python_on_the_remote_kernel eval 'status_is 0 && stdout_is 80'
check kbox_mcps_file_tools_work_in_the_remote_kernels_directory eval 'cmp -s - stderr <<EOF
run_python False [no output]
write_file False wrote 7 bytes to notes/m.txt
list_files False m.txt	7 bytes
read_file False hé
read_file False llo
run_python False saved
read_image False image/png
read_file True read_file: nope.txt: no such file
list_files True list_files: notes/m.txt: not a directory
run_python False [no output]
read_image True read_image: big.png is 6291456 bytes, more than the 5242880 bytes this tool returns
run_python False [no output]
list_files False b�.txt	2 bytes
m.txt	7 bytes
run_python False [no output]
read_file False text
EOF'
# (the pages of a file read from the server's file handler: one fetch of
# it while it is unchanged, one more for a read once it changed)
check a_paged_remote_read_file_fetches_the_file_once_while_unchanged eval '
	[ "$(grep -c "GET /files/$rdir_f/notes/m.txt " "$ROOT/s1/server.log")" = 2 ]'
kbox stop -s f

# KBOX_BACKEND=gateway: a session kbox exec starts runs on the server of
# KBOX_GATEWAY_URL, with the token of KBOX_GATEWAY_TOKEN
fresh
KBOX_BACKEND=gateway KBOX_GATEWAY_URL=$(URL) KBOX_GATEWAY_TOKEN=$TOKEN kbox exec -s ex 'import os; print(os.getcwd())'
check exec_starts_a_gateway_session_from_the_environment eval 'status_is 0 &&
	[ "$(tail -n 1 stdout)" = "$SROOT/$(cat "$KBOX_HOME/sessions/ex/gateway-dir")" ] &&
	[ "$(cat "$KBOX_HOME/sessions/ex/gateway-token")" = "$TOKEN" ]'
kbox stop -s ex
KBOX_BACKEND=gateway kbox exec -s ex2 'print(1)'
check without_kbox_gateway_url_it_says_what_to_set fails_with 2 \
	"kbox exec: backend gateway (from KBOX_BACKEND): no server: set KBOX_GATEWAY_URL (and KBOX_GATEWAY_TOKEN), or start the session with kbox start --url"
check and_leaves_no_session eval '[ ! -e "$KBOX_HOME/sessions/ex2" ]'
KBOX_BACKEND=gateway kbox run -c 'print(1)'
check kbox_run_says_the_gateway_is_not_for_it fails_with 2 \
	"kbox run: backend gateway (from KBOX_BACKEND) is not for kbox run, whose kernel is this machine's: start a session on the server (kbox start --backend gateway), then kbox exec"

# ---- bad input ----

fresh
kbox start -s b --backend gateway --url "$(URL)" --token-env NO_SUCH_VAR_OF_KBOX
check token_env_of_an_unset_variable_is_refused fails_with 2 \
	'kbox start: invalid --token-env NO_SUCH_VAR_OF_KBOX: the variable is not set'
BAD=wrong-token kbox start -s b --backend gateway --url "$(URL)" --token-env BAD
check a_wrong_token_is_a_clear_error eval 'status_is 5 && stdout_empty &&
	grep -q "the Jupyter server refused the token (HTTP 403" stderr &&
	[ ! -e "$KBOX_HOME/sessions/b" ]'
kbox start -s b --backend gateway --url "$(URL)"
check no_token_given_is_said_so_not_a_refused_one fails_with 5 \
	"kbox start: session b: backend gateway: kernelspec python3: the Jupyter server requires a token and none was given (--token-file, --token-env or KBOX_GATEWAY_TOKEN; HTTP 403: Forbidden)"
check no_token_given_leaves_no_session eval '[ ! -e "$KBOX_HOME/sessions/b" ]'
kbox start -s b --backend gateway --url "$(URL)/nope" --token-file "$ROOT/token"
check a_url_whose_path_has_no_jupyter_api_says_so fails_with 5 \
	"kbox start: session b: backend gateway: there is no Jupyter API at $(URL)/nope (HTTP 404 on /api/kernelspecs): check the URL's path"
# (a stopped session's files: kbox put asks the contents API first)
[ -n "$SKIPPING" ] || { mkdir -p -m 700 "$KBOX_HOME/sessions/np" &&
	printf '{"name": "np", "kernel": "python3", "backend": "gateway", "gateway": "%s/nope"}\n' \
		"$(URL)" >"$KBOX_HOME/sessions/np/session.json" &&
	install -m 600 "$ROOT/token" "$KBOX_HOME/sessions/np/gateway-token"; }
kbox put -s np "$ROOT/token" t
check put_to_a_url_whose_path_has_no_jupyter_api_says_so fails_with 2 \
	"kbox put: there is no Jupyter API at $(URL)/nope (HTTP 404 on /api/kernelspecs): check the URL's path"
kbox start -s b --backend gateway
check no_url_is_a_usage_error fails_with 2 \
	'kbox start: backend gateway: no server: give its URL with --url URL, or in KBOX_GATEWAY_URL'
kbox start -s b --backend gateway --url "$(URL)/?token=$TOKEN"
check a_url_with_a_query_is_refused_without_showing_it eval 'status_is 2 && stdout_empty &&
	grep -q "^kbox start: invalid --url: expected http://HOST" stderr && ! grep -qF "$TOKEN" stderr'
kbox start -s b --url "$(URL)"
check url_is_for_the_gateway_backend fails_with 2 \
	'kbox start: --url is for --backend gateway (this session'"'"'s backend is bwrap)'
kbox start -s b --backend gateway --url "$(URL)" --token-file "$ROOT/token" -k nope
check an_unknown_remote_kernelspec_is_a_clear_error eval 'status_is 5 &&
	grep -q "has no kernelspec nope (it has: .*python3.*)$" stderr && [ ! -e "$KBOX_HOME/sessions/b" ]'
dead=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
kbox start -s b --backend gateway --url "http://127.0.0.1:$dead"
check no_server_at_the_url_is_a_clear_error eval 'status_is 5 &&
	grep -q "cannot reach the Jupyter server at http://127.0.0.1:$dead" stderr'
KBOX_GATEWAY_URL=$(URL) KBOX_GATEWAY_TOKEN=$TOKEN kbox start -s e --backend gateway
check the_url_and_token_may_come_from_the_environment eval 'status_is 0 &&
	grep -q "\"gateway\": \"$(URL)\"" "$KBOX_HOME/sessions/e/session.json"'
kbox stop -s e

# ---- the network drops the channels; the server goes, and comes back ----

# the channels cut mid-cell (tests/tcp_cut.py between kbox and the
# server): connected again in the same session, the server replays what
# it kept, and the result says output may be missing
server_or_skip
if [ -z "$SKIPPING" ]; then
	"$PY" "$top_srcdir/tests/tcp_cut.py" "$ROOT/cut" "$PORT" >"$ROOT/cut.log" 2>&1 &
	CUT_PID=$!
	BG_PIDS="$BG_PIDS $CUT_PID"
	wait_for test -s "$ROOT/cut"
fi
fresh
kbox start -s c --backend gateway --url "http://127.0.0.1:$(cat "$ROOT/cut" 2>/dev/null)" \
	--token-file "$ROOT/token"
kbox exec -s c --format ndjson "import os, time
print('before', flush=True)
while not os.path.exists('$ROOT/go'):
    time.sleep(0.05)
print('after')" &
bg=$!
cut_once() { [ "$(wc -l <"$ROOT/cut.cuts" 2>/dev/null)" = 1 ]; }
if [ -z "$SKIPPING" ]; then
	wait_for grep -qF '"text":"before\n"' "$T/stdout" >/dev/null
	kill -USR1 "$CUT_PID"
	wait_for cut_once >/dev/null
	touch "$ROOT/go"
fi
wait "$bg"
check the_channels_cut_mid_cell_come_back_with_the_output_and_a_note eval 'status_is 0 &&
	[ "$(grep -c "\"event\":\"stream\"" stdout)" = 2 ] &&
	grep -qF "\"text\":\"before\\n\"" stdout && grep -qF "\"text\":\"after\\n\"" stdout &&
	grep -q "\"event\":\"end\",\"status\":\"ok\".*the kernel'"'"'s channels dropped (.*) and were connected again after [0-9]* ms: output sent meanwhile may be missing" stdout &&
	[ "$(wc -l <"$ROOT/cut.cuts")" = 1 ] && [ "$(cat "$ROOT/cut.cuts")" -ge 1 ]'
kbox exec -s c 'print("still", 1)'
check the_session_goes_on_after_the_cut eval 'status_is 0 && stdout_is "still 1"'
kbox stop -s c

# the server gone: the call says so (the kernel is lost with it), the
# next is unavailable (5), and once it is back the session works again
server_or_skip
[ -n "$SKIPPING" ] || { OLD_PORT=$PORT; start_server "$ROOT/s4"; GONE_PORT=$PORT; GONE_PID=$SERVER_PID; }
fresh
kbox start -s o --backend gateway --url "http://127.0.0.1:${GONE_PORT-}" --token-file "$ROOT/token"
kbox exec -s o 'x = 1'
if [ -z "$SKIPPING" ]; then
	kill "$GONE_PID"
	wait "$GONE_PID" 2>/dev/null
fi
kbox exec -s o 'print(x)'
check a_call_when_the_server_is_gone_says_so eval 'status_is 4 &&
	grep -q "^\[kernel died: the Jupyter server is gone (no answer for 15 s: cannot reach the Jupyter server at http://127.0.0.1:$GONE_PORT: .*); the remote kernel is lost with it; earlier state is lost\]$" stdout'
kbox exec -s o 'print(2)'
check the_next_call_is_unavailable_with_a_clear_error eval 'status_is 5 && stdout_empty &&
	[ "$(wc -l <stderr)" = 1 ] &&
	grep -q "^kbox exec: session o: .*cannot reach the Jupyter server at http://127.0.0.1:$GONE_PORT: " stderr'
if [ -z "$SKIPPING" ]; then
	PORT=$GONE_PORT
	mkdir -p "$ROOT/s4b/root" "$ROOT/s4b/rt"
	JUPYTER_RUNTIME_DIR=$ROOT/s4b/rt JUPYTER_CONFIG_DIR=$ROOT/s4b/rt JUPYTER_DATA_DIR=$ROOT/s4b/rt \
		"$PY" -m jupyter_server --ip="${SERVER_IP:-127.0.0.1}" --port="$PORT" --port-retries=0 --no-browser \
		--allow-root --ServerApp.token="$TOKEN" --ServerApp.root_dir="$ROOT/s4b/root" \
		>"$ROOT/s4b/server.log" 2>&1 &
	BG_PIDS="$BG_PIDS $!"
	wait_for server_up
	PORT=$OLD_PORT
fi
kbox exec -s o 'print(3)'
check once_the_server_is_back_the_session_works_again eval 'status_is 0 && tail -n 1 stdout | grep -qx 3'
kbox stop -s o

# the server culls idle kernels, connected ones too: the session's is
# kept alive (a kernel_info_request each 10 s of silence), one nobody
# talks to is culled
server_or_skip
[ -n "$SKIPPING" ] || { OLD_PORT=$PORT; start_server "$ROOT/s5" \
	--MappingKernelManager.cull_idle_timeout=20 --MappingKernelManager.cull_interval=2 \
	--MappingKernelManager.cull_connected=True; CULL_PORT=$PORT; }
fresh
kbox start -s cull --backend gateway --url "http://127.0.0.1:${CULL_PORT-}" --token-file "$ROOT/token"
kbox exec -s cull 'x = 9'
control=$(api POST /api/kernels | "$PY" -c 'import json, sys; print(json.loads(sys.stdin.read().partition(" ")[2])["id"])' 2>/dev/null)
culled() { ! kernels | grep -qx "$control"; }
check the_server_culls_a_kernel_nobody_keeps_alive eval '[ -n "$control" ] && wait_for culled'
kbox exec -s cull 'print(x)'
check the_sessions_kernel_is_kept_alive_against_culling eval 'status_is 0 && stdout_is 9'
kbox stop -s cull
PORT=${OLD_PORT-}

# ---- the legacy framing (a server that offers no v1) ----

server_or_skip
[ -n "$SKIPPING" ] || { kill "$S1_PID"; wait "$S1_PID" 2>/dev/null; start_server "$ROOT/s2" --ServerApp.kernel_ws_protocol=''; }
fresh
kbox start -s l --backend gateway --url "$(URL)" --token-file "$ROOT/token"
kbox exec -s l 'x = [1, 2]; print(sum(x))'
check the_legacy_json_framing_works eval 'status_is 0 && stdout_is 3'
kbox exec -s l -i 'abc' 'print(input())'
check input_works_in_the_legacy_framing eval 'status_is 0 &&
	stdout_is "[input: the code asked \"\" and was given \"abc\"]
abc"'
kbox stop -s l
check stop_deletes_the_legacy_kernel eval 'status_is 0 && no_kernels'

# ---- threats.md rows 56 to 58: the token, TLS, a hostile server ----

# stand_in PORTFILE DIR [redirect]: tests/gateway_hostile.py, its port in
# $SPORT
stand_in() {
	"$PY" "$top_srcdir/tests/gateway_hostile.py" "$@" >"$2/stand-in.log" 2>&1 &
	BG_PIDS="$BG_PIDS $!"
	wait_for test -s "$1" && SPORT=$(cat "$1")
}
# stand_in_session NAME MODE: a stand-in of MODE in $ROOT/NAME, a fresh
# directory, and the session NAME started on it; SDIR is the session's
# directory on it (its root is $ROOT/NAME/root)
stand_in_session() {
	mkdir -p "$ROOT/$1"
	[ -n "$SKIPPING" ] || stand_in "$ROOT/$1/port" "$ROOT/$1" "$2"
	fresh
	kbox start -s "$1" --backend gateway --url "http://127.0.0.1:${SPORT-}"
	SDIR=$(cat "$KBOX_HOME/sessions/$1/gateway-dir" 2>/dev/null)
}

server_or_skip
mkdir -p "$ROOT/redir" "$ROOT/hostile"
[ -n "$SKIPPING" ] || stand_in "$ROOT/redir/port" "$ROOT/redir" redirect
fresh
kbox start -s r --backend gateway --url "http://127.0.0.1:${SPORT-}" --token-file "$ROOT/token"
check row56_a_redirect_is_not_followed_with_the_token eval 'status_is 5 && stdout_empty &&
	grep -q "HTTP 302: a redirect to http://127.0.0.1:[0-9]*/api/kernelspecs/python3, which kbox does not follow (the token would go with it)" stderr &&
	[ ! -e "$ROOT/redir/reached" ]'

# an https server: verified, against --ca-file
server_or_skip
command -v openssl >/dev/null || SKIPPING="openssl is not installed"
if [ -z "$SKIPPING" ]; then
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
		-addext subjectAltName=IP:127.0.0.1 -keyout "$ROOT/tls.key" -out "$ROOT/tls.pem" \
		>/dev/null 2>&1
	mkdir -p "$ROOT/s3"
	PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	JUPYTER_RUNTIME_DIR=$ROOT/s3 JUPYTER_CONFIG_DIR=$ROOT/s3 JUPYTER_DATA_DIR=$ROOT/s3 \
		"$PY" -m jupyter_server --ip="${SERVER_IP:-127.0.0.1}" --port="$PORT" --port-retries=0 --no-browser \
		--allow-root --ServerApp.token="$TOKEN" --ServerApp.root_dir="$ROOT/s3" \
		--certfile="$ROOT/tls.pem" --keyfile="$ROOT/tls.key" >"$ROOT/s3/server.log" 2>&1 &
	BG_PIDS="$BG_PIDS $!"
	wait_for grep -q "is running at" "$ROOT/s3/server.log"
fi
fresh
kbox start -s t --backend gateway --url "https://127.0.0.1:${PORT-}" --token-file "$ROOT/token"
check row57_an_unverified_certificate_is_refused eval 'status_is 5 && stdout_empty &&
	grep -q "TLS failed: .*(give its CA with --ca-file)" stderr && [ ! -e "$KBOX_HOME/sessions/t" ]'
kbox start -s t --backend gateway --url "https://127.0.0.1:${PORT-}" --token-file "$ROOT/token" \
	--ca-file "$ROOT/tls.pem"
kbox exec -s t 'print(6 * 7)'
check row57_with_its_ca_file_the_https_server_is_used eval 'status_is 0 && stdout_is 42 &&
	grep -q "\"gateway_ca\": \"$ROOT/tls.pem\"" "$KBOX_HOME/sessions/t/session.json"'
kbox stop -s t
# a CA file that does not verify the server is named, and giving one is
# not the advice
[ -n "$SKIPPING" ] || openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=other \
	-keyout "$ROOT/other.key" -out "$ROOT/other.pem" >/dev/null 2>&1
kbox start -s t2 --backend gateway --url "https://127.0.0.1:${PORT-}" --token-file "$ROOT/token" \
	--ca-file "$ROOT/other.pem"
check row57_a_ca_file_that_does_not_verify_the_server_is_named eval 'status_is 5 && stdout_empty &&
	[ "$(wc -l <stderr)" = 1 ] && grep -q "TLS failed: .* (with the CA file $ROOT/other.pem)$" stderr &&
	! grep -q "give its CA" stderr'
# one that stopped being a CA file after the start checked it (kbox
# start refuses one that is none): the file is what failed
cp "$ROOT/tls.pem" "$ROOT/ca2.pem"
kbox start -s t2 --backend gateway --url "https://127.0.0.1:${PORT-}" --token-file "$ROOT/token" \
	--ca-file "$ROOT/ca2.pem"
kbox stop -s t2
echo junk >"$ROOT/ca2.pem"
kbox get -s t2 x.txt
check a_ca_file_that_cannot_be_used_is_said_to_be_what_failed fails_with 5 \
	"kbox get: the Jupyter server at https://127.0.0.1:${PORT-}: TLS failed: the CA file $ROOT/ca2.pem cannot be used: error setting certificate file: $ROOT/ca2.pem"

# a hostile server: its malformed and forged messages are dropped
server_or_skip
[ -n "$SKIPPING" ] || stand_in "$ROOT/hostile/port" "$ROOT/hostile"
fresh
kbox start -s h --backend gateway --url "http://127.0.0.1:${SPORT-}" -e KERNEL_NAMESPACE=ns1 \
	--launch-timeout 90s
check the_start_asks_as_enterprise_gateway_wants eval 'status_is 0 && "$PY" -c "
import json, sys
b = json.load(open(sys.argv[1]))
sys.exit(b != {\"name\": \"python3\", \"env\": {\"KERNEL_NAMESPACE\": \"ns1\",
    \"KERNEL_USERNAME\": sys.argv[2], \"KERNEL_LAUNCH_TIMEOUT\": \"90\"}})
" "$ROOT/hostile/post.json" "$(id -un)"'
kbox exec -s h 'anything'
# (the result says messages were dropped)
check row58_a_hostile_servers_junk_is_dropped_and_the_result_is_exact eval 'status_is 0 &&
	stdout_is "ok
[note: the Jupyter server sent messages that were not passed on (not a kernel'"'"'s message, or over its bounds); output may be missing]" &&
	stderr_empty'
kbox status -s h
check row58_the_supervisor_goes_on eval 'status_is 0 && [ "$(status_line state)" = idle ]'
kbox put -s h "$ROOT/token" t
check put_on_a_server_without_a_contents_api_says_what_to_do_instead fails_with 2 \
	"kbox put: the Jupyter server at http://127.0.0.1:${SPORT-} has no contents API (/api/contents): it is a Kernel Gateway or an Enterprise Gateway, whose kernels keep their files themselves: write and read files from the code, or give the kernels a volume (Enterprise Gateway: KERNEL_WORKING_DIR with EG_MIRROR_WORKING_DIRS)"
kbox get -s h t
check get_on_it_says_so_too eval 'status_is 2 && stdout_empty &&
	grep -q "^kbox get: the Jupyter server at http://127.0.0.1:[0-9]* has no contents API" stderr'
kbox stop -s h
check row58_its_kernel_is_deleted_at_stop eval 'status_is 0 && [ -e "$ROOT/hostile/deleted" ]'

# a server that never stops sending: the session still answers, and a
# stop still deletes its kernel (its helper reads a bounded part a turn)
stand_in_session fl flood
kbox exec -s fl 'anything'
check row58_a_server_that_never_stops_sending_still_answers eval 'status_is 0 &&
	[ "$(tail -n 2 stdout)" = "ok
[note: the Jupyter server sent messages that were not passed on (not a kernel'"'"'s message, or over its bounds); output may be missing]" ]'
kbox stop -s fl
check row58_and_its_kernel_is_deleted_at_stop eval 'status_is 0 && [ -e "$ROOT/fl/deleted" ]'

# ---- a contents API that fails midway: a stand-in's (its modes) ----

# a put that replaces a file whose rename (PATCH) then fails: the old
# file is gone by then, so the new one is kept, beside it, and said
server_or_skip
setup_for a_put_whose_rename_fails_after_the_delete_says_where_the_file_is \
	and_the_new_file_is_kept_there_whole \
	a_403_for_a_file_the_server_may_not_write_is_no_token_error \
	a_file_comes_from_the_file_handler_alone \
	a_file_handler_reply_longer_than_the_file_is_not_taken \
	nor_one_shorter \
	nor_one_cut_short \
	a_get_stopped_midway_leaves_its_descriptor_empty
stand_in_session pf patch_fails
pfdir=$SDIR
[ -n "$SKIPPING" ] || printf 'old\n' >"$ROOT/pf/root/$pfdir/data.csv"
printf 'a,b\n1,2\n' >"$T/new.csv"
kbox put -s pf "$T/new.csv" data.csv
pfpart=$(cd "$ROOT/pf/root/$pfdir" 2>/dev/null && ls)
check a_put_whose_rename_fails_after_the_delete_says_where_the_file_is eval 'status_is 5 &&
	stdout_empty && [ "$(wc -l <stderr)" = 1 ] &&
	case $pfpart in data.csv.kbox-part-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]) true ;; *) false ;; esac &&
	stderr_is "kbox put: renaming the new file to data.csv: HTTP 500: Unknown error renaming file: $pfdir/$pfpart [Errno 28] No space left on device (the file is there as $pfpart)"'
check and_the_new_file_is_kept_there_whole eval '[ -n "$pfpart" ] && [ ! -e "$ROOT/pf/root/$pfdir/data.csv" ] &&
	cmp -s "$T/new.csv" "$ROOT/pf/root/$pfdir/$pfpart"'
# a file the server may not write (its 403, as for a refused token) is
# not taken for a refused token
kbox put -s pf "$T/new.csv" denied.csv
check a_403_for_a_file_the_server_may_not_write_is_no_token_error fails_with 5 \
	"kbox put: writing denied.csv: HTTP 403: Permission denied: $pfdir/denied.csv"
# a file's bytes come from the server's file handler (/files/PATH), as
# they are, when its reply is the size the contents API said, whole; else
# from the contents API (this stand-in's handler lies of liar*, short*
# and cut*)
if [ -z "$SKIPPING" ]; then
	head -c 3000 /dev/urandom >"$T/rand.bin"
	for f in plain liar short cut; do cp "$T/rand.bin" "$ROOT/pf/root/$pfdir/$f.bin"; done
	rm -f "$ROOT/pf/asked"
fi
kbox get -s pf plain.bin "$T/plain.bin"
check a_file_comes_from_the_file_handler_alone eval 'status_is 0 && stderr_empty &&
	cmp -s "$T/rand.bin" "$T/plain.bin" && [ "$(cat "$ROOT/pf/asked")" = "files $pfdir/plain.bin" ]'
kbox get -s pf liar.bin "$T/liar.bin"
check a_file_handler_reply_longer_than_the_file_is_not_taken eval 'status_is 0 && stderr_empty &&
	cmp -s "$T/rand.bin" "$T/liar.bin" &&
	[ "$(sed 1d "$ROOT/pf/asked")" = "$(printf "files %s\ncontents %s" "$pfdir/liar.bin" "$pfdir/liar.bin")" ]'
kbox get -s pf short.bin "$T/short.bin"
check nor_one_shorter eval 'status_is 0 && stderr_empty && cmp -s "$T/rand.bin" "$T/short.bin" &&
	[ "$(sed 1,3d "$ROOT/pf/asked")" = "$(printf "files %s\ncontents %s" "$pfdir/short.bin" "$pfdir/short.bin")" ]'
kbox get -s pf cut.bin "$T/cut.bin"
check nor_one_cut_short eval 'status_is 0 && stderr_empty && cmp -s "$T/rand.bin" "$T/cut.bin" &&
	[ "$(sed 1,5d "$ROOT/pf/asked")" = "$(printf "files %s\ncontents %s" "$pfdir/cut.bin" "$pfdir/cut.bin")" ]'
# the helper stopped while the file handler's reply has come in part
# (SIGTERM, as kbox sends it at a bound): what came is not left in its
# descriptor
if [ -z "$SKIPPING" ]; then
	cp "$T/rand.bin" "$ROOT/pf/root/$pfdir/hang.bin"
	: >"$T/hang.out"
	printf '%s\n' "{\"url\": \"http://127.0.0.1:$SPORT\"}" |
		"$top_builddir/kbox-gateway" get "$pfdir" hang.bin 3 3>"$T/hang.out" >hang.said 2>hang.err &
	hangpid=$!
	half_came() { [ "$(stat -c %s "$T/hang.out")" = 1500 ]; }
	wait_for half_came
	kill -TERM "$hangpid"
	wait "$hangpid"
	rc=$?
fi
check a_get_stopped_midway_leaves_its_descriptor_empty eval '[ "$rc" = 1 ] &&
	[ "$(cat hang.said)" = "{\"error\":{\"kind\":\"usage\",\"message\":\"stopped\"}}" ] &&
	[ ! -s hang.err ] && [ "$(stat -c %s "$T/hang.out")" = 0 ] || { why="$(cat hang.said hang.err)"; false; }'
kbox stop -s pf

# kbox mcp's file tool on a server that never ends its reply (a file's
# content, whose request may take 300 s): the call ends at kbox mcp's
# bound (--files-timeout: 15 s, so that the next call, which must end
# within it too, has room on a loaded machine), its helper ended, and
# kbox mcp goes on answering
server_or_skip
setup_for a_remote_file_tool_call_the_server_never_answers_ends_at_the_bound \
	its_helper_was_ended_and_the_server_saw_the_request_go
stand_in_session st contents_stall
stdir=$SDIR
if [ -z "$SKIPPING" ]; then
	printf 'never\n' >"$ROOT/st/root/$stdir/stall.txt"
	printf 'fine\n' >"$ROOT/st/root/$stdir/ok.txt"
	# (a kbox mcp that hangs is killed, as the kbox wrapper's are: after
	# more than the helper's own 300 s)
	timeout -k 5 400 "$PY" - "$KBOX" <<'PYEOF' >stdout 2>stderr
import json, subprocess, sys
p = subprocess.Popen([sys.argv[1], "mcp", "-s", "st", "--files-timeout", "15s"], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, text=True)
def ask(i, method, params):
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n")
    p.stdin.flush()
    while True:  # (its reply, past any notification)
        r = json.loads(p.stdout.readline())
        if r.get("id") == i:
            return r
ask(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": "t", "version": "1"}})
p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
def call(i, name, args):
    r = ask(i, "tools/call", {"name": name, "arguments": args})["result"]
    print(name, r.get("isError", False), r["content"][0]["text"].rstrip("\n"))
call(2, "read_file", {"path": "stall.txt"})
call(3, "read_file", {"path": "ok.txt"})
call(4, "list_files", {})
p.stdin.close()
print("exit", p.wait())
PYEOF
fi
check a_remote_file_tool_call_the_server_never_answers_ends_at_the_bound eval 'cmp -s - stdout <<EOF
read_file True read_file: backend gateway: the Jupyter server at http://127.0.0.1:$SPORT did not answer within 15 s
read_file False fine
list_files False ok.txt	5 bytes
stall.txt	6 bytes
exit 0
EOF'
check its_helper_was_ended_and_the_server_saw_the_request_go eval '
	[ -e "$ROOT/st/stalled" ] && wait_for test -e "$ROOT/st/stall-closed"'
kbox stop -s st
setup_for

tests_done
