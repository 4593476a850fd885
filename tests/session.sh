#!/bin/bash
# tests/session.sh — kbox sessions run as a user runs them: kbox start,
# exec, put, get, ls, status, logs, restart, interrupt, stop, complete and
# inspect against live kernels, each step in a fresh empty directory,
# asserting exit statuses and exact output.  TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON
# (the Python with ipykernel, default /usr/bin/python3).  The tests that
# start a kernel need the kernelspec "python3"; they are skipped when
# KERNEL_PYTHON cannot import ipykernel.
#
# All sessions live in a private KBOX_HOME; at exit every session is
# stopped, any supervisor or kernel of ours still there is killed by its
# pid, and the directory is removed.
# shellcheck disable=SC2016 # eval strings expand later, on purpose
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"

WARNING='kbox: warning: backend none: the kernel runs unsandboxed'
LOST='earlier state (variables, imports, loaded data) is lost'

# have_session NAME...: start each session NAME that was not made (the
# tests above that make it were not selected); a setup of selected tests.
have_session() {
	for hs in "$@"; do
		[ -e "$S/$hs" ] || kbox start -s "$hs"
	done
}

# ---- a three-call analysis: CSV in, DataFrame across calls, chart out ----

# (pandas is slow to import: not for the tests of others)
setup_for start_prints_started_line_with_supervisor_pid \
	start_with_the_default_backend_bwrap_prints_nothing_on_stderr \
	start_exits_0 \
	start_with_backend_none_warns_that_the_kernel_is_unsandboxed \
	put_copies_a_host_file_silently exec_call_1_loads_the_put_csv \
	exec_call_2_uses_call_1s_dataframe \
	exec_call_3_shows_the_figure_as_image_saved_line \
	exec_inline_figure_is_a_600x400_png_in_outputs \
	get_copies_the_chart_to_the_current_directory \
	get_chart_is_figsize_times_dpi_600x400 get_dash_writes_to_stdout -- \
	get_works_on_a_stopped_session
[ -n "$SKIPPING" ] || needs kernel pandas
fresh
kbox start -s an
check start_prints_started_line_with_supervisor_pid started_line an
check start_with_the_default_backend_bwrap_prints_nothing_on_stderr stderr_empty
check start_exits_0 status_is 0

fresh
kbox start -s nb --backend none
check start_with_backend_none_warns_that_the_kernel_is_unsandboxed eval 'status_is 0 &&
	stderr_is "$WARNING" && stdout_is "session nb started (backend none, kernel python3, supervisor pid $(cat "$S/nb/supervisor.pid"))"'
kbox stop -s nb

fresh
printf 'region,units\nnorth,3\nsouth,4\nnorth,5\neast,1\nsouth,2\nwest,7\n' >sales.csv
kbox put -s an sales.csv
check put_copies_a_host_file_silently eval 'status_is 0 && stdout_empty && stderr_empty &&
	cmp -s sales.csv "$S/an/workspace/sales.csv"'

fresh
kbox exec -s an 'import pandas as pd
df = pd.read_csv("sales.csv")
print(df.shape)'
check exec_call_1_loads_the_put_csv eval 'status_is 0 && stdout_is "(6, 2)" && stderr_empty'

fresh
kbox exec -s an 'df.groupby("region")["units"].sum()'
check exec_call_2_uses_call_1s_dataframe eval 'status_is 0 && stdout_is "Out[2]:
region
east     1
north    8
south    6
west     7
Name: units, dtype: int64"'

# The inline backend draws with Agg; without bbox_inches="tight" the shown
# image is figsize x dpi too.
fresh
kbox exec -s an 'import matplotlib.pyplot as plt
%config InlineBackend.print_figure_kwargs = {"bbox_inches": None}
fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
df.groupby("region")["units"].sum().plot.bar(ax=ax)
fig.savefig("chart.png")
plt.show()'
check exec_call_3_shows_the_figure_as_image_saved_line eval 'status_is 0 &&
	stdout_is "[image saved: $S/an/outputs/1-3-1.png (600×400 px)]"'
check exec_inline_figure_is_a_600x400_png_in_outputs eval 'is_png "$S/an/outputs/1-3-1.png" &&
	png_size_is "$S/an/outputs/1-3-1.png" 600 400'

fresh
kbox get -s an chart.png
check get_copies_the_chart_to_the_current_directory eval 'status_is 0 && stdout_empty &&
	stderr_empty && is_png chart.png'
check get_chart_is_figsize_times_dpi_600x400 png_size_is chart.png 600 400

fresh
kbox get -s an chart.png -
check get_dash_writes_to_stdout cmp -s stdout "$S/an/workspace/chart.png"

# ---- a restarted kernel is reported, once ----

needs kernel
setup_for restart_says_state_is_lost \
	exec_after_restart_starts_with_the_note_and_state_is_gone \
	exec_kernel_killed_inside_exits_4 \
	exec_kernel_killed_inside_prints_died_line \
	exec_after_death_starts_with_the_note exec_after_death_has_lost_variables \
	exec_note_is_given_only_once status_counts_restarts_and_generations \
	events_log_both_restarts -- logs_shows_events_as_lines logs_a_starts_pid_is_bubblewraps \
	logs_ndjson_prints_the_raw_lines logs_json_is_one_array_of_the_events \
	logs_follow_keeps_going_until_killed \
	logs_follow_ends_when_its_reader_has_gone \
	logs_follow_piped_to_head_ends_while_the_session_runs \
	logs_follow_ends_when_its_reader_goes_before_reading \
	logs_follow_reads_on_across_a_rotation_every_event_once
fresh
kbox start -s rs
kbox exec -s rs 'v = 1'
kbox restart -s rs
check restart_says_state_is_lost eval 'status_is 0 &&
	stdout_is "session rs: kernel restarted (kernel 2); earlier state is lost"'

fresh
kbox exec -s rs 'print("v" in dir())'
check exec_after_restart_starts_with_the_note_and_state_is_gone eval 'status_is 0 &&
	stdout_is "[note: kernel restarted: restarted on request (kbox restart); $LOST; it had defined: v: int]
False"'

fresh
kbox exec -s rs 'v = 2'
kbox exec -s rs 'import os; os.kill(os.getpid(), 9)'
check exec_kernel_killed_inside_exits_4 status_is 4
check exec_kernel_killed_inside_prints_died_line stdout_is \
	"[kernel died: the kernel was killed by signal 9 (SIGKILL); a new kernel was started; earlier state is lost]"

fresh
kbox exec -s rs 'print(v)'
check exec_after_death_starts_with_the_note first_line_is stdout \
	"[note: kernel restarted: the kernel was killed by signal 9 (SIGKILL); $LOST; it had defined: v: int]"
check exec_after_death_has_lost_variables eval 'status_is 1 &&
	last_line_is stdout "NameError: name '\''v'\'' is not defined"'

fresh
kbox exec -s rs 'print("no note")'
check exec_note_is_given_only_once eval 'status_is 0 && stdout_is "no note"'

fresh
kbox status -s rs --json
check status_counts_restarts_and_generations eval '[ "$(json_field stdout restarts)" = 2 ] &&
	[ "$(json_field stdout generation)" = 3 ]'
check events_log_both_restarts events rs '[(e["cause"], e["requested"]) for e in ev if e["event"] == "restart"] == [("restarted on request (kbox restart)", True), ("the kernel was killed by signal 9 (SIGKILL)", False)]'

# ---- a killed supervisor: no kernel left, session dead, workspace kept ----

# died_naming SESSION TEST LIST: the kernel of SESSION exits, and TEST
# checks that the next execution's note says it had defined LIST
died_naming() {
	kbox exec -s "$1" 'import os; os._exit(1)'
	kbox exec -s "$1" 'print(1)'
	check "$2" eval 'status_is 0 &&
	stdout_is "[note: kernel restarted: the kernel exited with status 1; $LOST; it had defined: '"$3"']
1"'
}

# what was lost is named, the shapes of tables and arrays with it, as
# many names as fit whole, then how many more there were
setup_for exec_after_death_names_shapes_and_how_many_more_did_not_fit
fresh
kbox exec -s rv 'import numpy as np, pandas as pd
df = pd.DataFrame({"a": [1, 2, 3], "b": [4, 5, 6]}); arr = np.zeros((4, 5))
for i in range(100):
    globals()["v%03d" % i] = i'
kbox exec -s rv 'import os; os._exit(1)'
kbox exec -s rv 'print(1)'
rv_first=$(for i in $(seq 0 21); do printf ', v%03d: int' "$i"; done)
check exec_after_death_names_shapes_and_how_many_more_did_not_fit eval 'status_is 0 &&
	stdout_is "[note: kernel restarted: the kernel exited with status 1; $LOST; it had defined: df: DataFrame 3x2, arr: ndarray 4x5, i: int$rv_first, and 78 more]
1"'
"$KBOX" rm -f -s rv >/dev/null 2>&1
# what makes that list is made once per kernel, a hook after each cell
# that keeps its own function: code that deletes builtins._kbox_vars
# changes nothing; code that removes the hook leaves the list as it
# was before its cell, and the next execution makes the hook again
setup_for exec_after_death_names_what_was_defined_though_code_deleted_what_lists_it \
	exec_after_death_names_what_came_before_the_cell_that_removed_the_hook \
	exec_after_death_names_what_came_after_the_hook_was_made_again
fresh
kbox exec -s rd 'a = 1'
kbox exec -s rd 'import builtins; del builtins._kbox_vars; b = 2'
kbox exec -s rd 'c = 3'
died_naming rd exec_after_death_names_what_was_defined_though_code_deleted_what_lists_it 'a: int, b: int, c: int'
"$KBOX" rm -f -s rd >/dev/null 2>&1
fresh
kbox exec -s rh 'a = 1'
kbox exec -s rh 'get_ipython().events.callbacks["post_run_cell"].clear(); b = 2'
died_naming rh exec_after_death_names_what_came_before_the_cell_that_removed_the_hook 'a: int'
fresh
kbox exec -s rh 'a = 1'
kbox exec -s rh 'get_ipython().events.callbacks["post_run_cell"].clear(); b = 2'
kbox exec -s rh 'c = 3'
kbox exec -s rh 'd = 4'
died_naming rh exec_after_death_names_what_came_after_the_hook_was_made_again 'a: int, b: int, c: int, d: int'
"$KBOX" rm -f -s rh >/dev/null 2>&1
# the hook says nothing of its own failures, nor of an interrupt that
# lands as it runs: a cell's output is the cell's alone
setup_for a_failing_hook_prints_nothing_into_the_cell
fresh
kbox exec -s rk 'x = 1'
kbox exec -s rk 'get_ipython().payload_manager.write_payload = lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt())'
kbox exec -s rk 'print(1)'
check a_failing_hook_prints_nothing_into_the_cell eval 'status_is 0 && stdout_is "1" &&
	stderr_empty'
"$KBOX" rm -f -s rk >/dev/null 2>&1
# a type's name is what the code made it: one that ipykernel cannot
# encode (a lone surrogate) must not cost the reply, which would never
# be sent (the next cells waited for it until their timeout)
setup_for a_type_name_that_cannot_be_encoded_loses_no_reply
fresh
kbox exec -s ru 'obj = type("a\ud800b", (), {})()'
kbox exec -s ru -t 60 'print(2)'
check a_type_name_that_cannot_be_encoded_loses_no_reply eval 'status_is 0 && stdout_is "2"'
# the shape is read from pandas', numpy's and polars' tables and arrays
# only: not from a class of the code's that takes their name (its shape
# could run anything, after every cell)
setup_for the_shape_of_another_ndarray_is_never_read \
	the_shape_of_another_ndarray_is_not_read_after_a_cell
fresh
kbox exec -s rn 'class ndarray:
    @property
    def shape(self):
        open("shape-was-read", "w").close()
        return (1,)
arr = ndarray()'
died_naming rn the_shape_of_another_ndarray_is_never_read "ndarray: type, arr: ndarray"
check the_shape_of_another_ndarray_is_not_read_after_a_cell eval '[ ! -e "$S/rn/workspace/shape-was-read" ]'
"$KBOX" rm -f -s rn >/dev/null 2>&1
"$KBOX" rm -f -s ru >/dev/null 2>&1
# the hook runs after a cell that raised too: what it defined first is
# named
setup_for exec_after_death_names_what_a_cell_that_raised_had_defined
fresh
kbox exec -s rr 'a = 1'
kbox exec -s rr 'b = "x"; 1 / 0'
died_naming rr exec_after_death_names_what_a_cell_that_raised_had_defined 'a: int, b: str'
"$KBOX" rm -f -s rr >/dev/null 2>&1
# the hook looks at the names added since its last call, and at all of
# them when names were removed: a name removed is gone from the list, a
# name defined again goes last (as in the namespace), a new name
# defined between removing the last one and defining it again is named,
# and a key that is no str is nobody's variable
setup_for exec_after_death_names_what_is_left_after_names_were_removed \
	exec_after_death_names_a_name_defined_again_last \
	exec_after_death_names_what_came_between_removing_the_last_name_and_defining_it_again \
	exec_after_death_names_what_came_between_removing_the_last_names_and_defining_one_again \
	exec_after_death_leaves_out_a_key_that_is_no_str \
	exec_after_death_names_what_only_the_64th_calls_whole_walk_finds
fresh
kbox exec -s vm1 'a = 1; b = 2; c = 3'
kbox exec -s vm1 'd = 4'
kbox exec -s vm1 'del b, d'
died_naming vm1 exec_after_death_names_what_is_left_after_names_were_removed 'a: int, c: int'
fresh
kbox exec -s vm2 'a = 1; b = 2'
kbox exec -s vm2 'del a; a = "x"'
died_naming vm2 exec_after_death_names_a_name_defined_again_last 'b: int, a: str'
fresh
kbox exec -s vm3 'a = 1; b = 2; c = 3'
kbox exec -s vm3 'del a, c; e = 5; c = 6'
died_naming vm3 exec_after_death_names_what_came_between_removing_the_last_name_and_defining_it_again 'b: int, e: int, c: int'
fresh
kbox exec -s vm4 'a = 1; b = 2; c = 3'
kbox exec -s vm4 'del a, b, c; e = 5; c = 6'
died_naming vm4 exec_after_death_names_what_came_between_removing_the_last_names_and_defining_one_again 'e: int, c: int'
fresh
kbox exec -s vm5 'globals()[1] = 2; x = 1'
kbox exec -s vm5 'y = 2'
died_naming vm5 exec_after_death_leaves_out_a_key_that_is_no_str 'x: int, y: int'
# the one case the hook's checks cannot see (the last two names where
# they were, the length as before: removed as many as were added, y
# among them) is made good by the whole walk of every 64th call
fresh
kbox exec -s vm6 'a = 1; b = 2; p = 3; k = 4'
kbox exec -s vm6 'del a, b, p, k; y = 1; p = 2; k = 3'
for i in $(seq 64); do kbox exec -s vm6 pass; done
died_naming vm6 exec_after_death_names_what_only_the_64th_calls_whole_walk_finds 'y: int, p: int, k: int'
for i in 1 2 3 4 5 6; do "$KBOX" rm -f -s vm$i >/dev/null 2>&1; done
# the hook answers kbox's cells only: another front end on the same
# kernel (a jupyter_client of its connection, as bench/kconn.py makes
# one) gets no payload of kbox's in its replies, and what its cells
# define is named all the same
setup_for another_front_ends_reply_has_no_payload_of_kboxs \
	exec_after_death_names_what_another_front_end_defined
fresh
kbox exec -s rf 'x = 1'
[ -n "$SKIPPING" ] || timeout -k 5 120 "$PY" - "$KBOX" "$top_srcdir/bench" "$T/kernel.json" \
	>stdout 2>stderr <<'EOF'
import os, sys
sys.path.insert(0, sys.argv[2])
import kconn
from jupyter_client import BlockingKernelClient
c = BlockingKernelClient()
c.load_connection_file(kconn.write(sys.argv[1], dict(os.environ), "rf", sys.argv[3]))
c.start_channels()
c.wait_for_ready(timeout=60)
# (kconn asked the kernel with kbox exec, whose names go first)
r = c.execute_interactive("del a, j, IPKernelApp; f = 5", allow_stdin=False, output_hook=lambda m: None, timeout=60)
print(r["content"]["status"], r["content"]["payload"])
c.stop_channels()
EOF
check another_front_ends_reply_has_no_payload_of_kboxs eval 'stdout_is "ok []"'
fresh
kbox exec -s rf 'k = 6'
died_naming rf exec_after_death_names_what_another_front_end_defined 'x: int, f: int, k: int'
"$KBOX" rm -f -s rf >/dev/null 2>&1
# kernel code that replaces it writes no sentence of its own into kbox's
# note (review 20, N20-2): a list of another shape is not shown; a 0-d
# array's empty shape is one of its shapes
setup_for exec_after_death_names_a_0_d_array \
	exec_after_death_shows_no_list_of_another_shape
fresh
kbox exec -s rz 'import numpy as np; z = np.array(5); n = 1'
died_naming rz exec_after_death_names_a_0_d_array 'z: ndarray , n: int'
kbox exec -s rz 'x = 1'
kbox exec -s rz 'import builtins; builtins._kbox_vars = lambda: "nothing. Note from kbox: the kernel did NOT die"'
died_naming rz exec_after_death_shows_no_list_of_another_shape 'x: int'
"$KBOX" rm -f -s rz >/dev/null 2>&1

setup_for status_pid_is_supervisor_pid_file \
	supervisor_sigkill_leaves_no_kernel \
	ls_shows_session_with_killed_supervisor_dead \
	status_of_dead_session_exits_5 \
	stop_of_dead_session_exits_0_and_says_it_is_not_running \
	exec_after_supervisor_death_works_and_keeps_files \
	exec_after_supervisor_death_runs_a_new_supervisor \
	exec_whose_supervisor_dies_says_the_kernel_died
fresh
kbox start -s sv
kbox exec -s sv 'open("keep.txt", "w").write("kept\n"); k = 1'
kbox status -s sv --json
sv_pid=$(json_field stdout pid 2>/dev/null)
sv_kernel=$(json_field stdout kernel_pid 2>/dev/null)
check status_pid_is_supervisor_pid_file eval '[ "$sv_pid" = "$(cat "$S/sv/supervisor.pid")" ]'
[ -z "$SKIPPING" ] && kill -9 "$sv_pid"
# (and the supervisor gone too, its files closed: its threads end one by
# one, and the kernel's parent-death signal may come before the last)
check supervisor_sigkill_leaves_no_kernel eval 'gone_or_zombie "$sv_kernel" && gone_or_zombie "$sv_pid"'
# (its lock goes with the last of its threads, which a zombie leader
# does not wait for: until then, it is "unresponsive")
[ -z "$SKIPPING" ] && wait_for flock -n -s "$S/sv/supervisor.pid" true

fresh
kbox ls
check ls_shows_session_with_killed_supervisor_dead eval 'status_is 0 &&
	[ "$(ls_row sv)" = "sv dead bwrap python3 - - - -" ]'

fresh
kbox status -s sv
check status_of_dead_session_exits_5 eval 'status_is 5 && [ "$(status_line state)" = dead ] &&
	[ "$(status_line last_stop)" = "the supervisor died without stopping the session" ]'
kbox stop -s sv
check stop_of_dead_session_exits_0_and_says_it_is_not_running eval 'status_is 0 &&
	stdout_empty && stderr_is "kbox stop: session sv is not running"'

fresh
kbox exec -s sv 'print(open("keep.txt").read(), end=""); print("k" in dir())'
check exec_after_supervisor_death_works_and_keeps_files eval 'status_is 0 && stdout_is "[note: kernel restarted: the session'\''s previous kernel ended (its supervisor died); $LOST; files in the workspace are kept]
kept
False"'
check exec_after_supervisor_death_runs_a_new_supervisor eval '
	[ "$(cat "$S/sv/supervisor.pid")" != "$sv_pid" ] && kill -0 "$(cat "$S/sv/supervisor.pid")"'

# The supervisor killed while code runs: the code's kernel went with it,
# and the result says so (exit 4), in text and in JSON.
fresh
died_rc=
for fmt in text json; do
	# killed once the code runs: it has made its file (a new supervisor's
	# kernel may take a while to start on a loaded machine)
	rm -f "$S/sv/workspace/running-$fmt"
	[ -z "$SKIPPING" ] && { (wait_for test -e "$S/sv/workspace/running-$fmt" >/dev/null
		kill -9 "$(cat "$S/sv/supervisor.pid")") & killer=$!; }
	kbox exec -s sv --format $fmt 'open("running-'$fmt'", "w").close(); import time; time.sleep(300)'
	[ -z "$SKIPPING" ] && wait "$killer"
	cp stdout "died.$fmt" 2>/dev/null; died_rc="$died_rc$rc"
done
kbox exec -s sv 'print(1)' # a supervisor again (stop --all, below, stops it)
check exec_whose_supervisor_dies_says_the_kernel_died eval '[ "$died_rc" = 44 ] &&
	[ "$(cat died.text)" = "[kernel died: the session'\''s supervisor went away; earlier state is lost]" ] &&
	"$PY" -c "import json, sys; r = json.load(open(\"died.json\")); sys.exit(not (r[\"status\"] == \"died\" and r[\"reason\"] == \"the session'\''s supervisor went away\"))"'

# ---- idle TTL ----

setup_for exec_longer_than_ttl_is_not_cut_off session_stops_after_ttl_idle \
	status_after_ttl_says_why ls_shows_expired_session_stopped \
	ttl_supervisor_exits events_log_one_ttl_stop_after_the_last_exec \
	exec_no_start_on_stopped_session_exits_5 \
	exec_after_ttl_stop_starts_with_the_note
fresh
# (2000ms: a duration in milliseconds; see kbox(1), Durations)
kbox start -s ttl --ttl 2000ms
kbox exec -s ttl 'print(1)'
fresh
kbox exec -s ttl 'import time; time.sleep(3); print("slept")'
check exec_longer_than_ttl_is_not_cut_off eval 'status_is 0 && stdout_is "slept"'
ttl_pid=$(cat "$S/ttl/supervisor.pid" 2>/dev/null)

# (a supervisor that is stopping may answer "unresponsive" for a moment)
ttl_stopped() { kbox status -s ttl && [ "$rc" = 5 ] && [ "$(status_line state)" = stopped ]; }
fresh
check session_stops_after_ttl_idle wait_for ttl_stopped
check status_after_ttl_says_why eval '[ "$(status_line state)" = stopped ] &&
	[ "$(status_line last_stop)" = "the session was idle for 2 s (its TTL) and stopped" ]'
kbox ls
check ls_shows_expired_session_stopped eval '[ "$(ls_row ttl)" = "ttl stopped bwrap python3 - - - -" ]'
check ttl_supervisor_exits gone_or_zombie "$ttl_pid"
check events_log_one_ttl_stop_after_the_last_exec events ttl '
[e for e in ev if e["event"] == "stop"] == [ev[-1]] and
ev[-1]["cause"] == "the session was idle for 2 s (its TTL) and stopped" and
ev[-1]["executions"] == 2 and ev[-2]["event"] == "exec-end" and ev[-2]["status"] == "ok"'

fresh
kbox exec -s ttl --no-start 'print(1)'
check exec_no_start_on_stopped_session_exits_5 fails_with 5 \
	"kbox exec: session ttl is not running (--no-start given)"

fresh
kbox exec -s ttl 'print(2)'
check exec_after_ttl_stop_starts_with_the_note eval 'status_is 0 && stdout_is "[note: kernel restarted: the session'\''s previous kernel ended (the session was idle for 2 s (its TTL) and stopped); $LOST; files in the workspace are kept]
2"'

# ---- many clients on one session at once ----

setup_for exec_8_processes_x_25_calls_all_get_their_own_result \
	status_counts_all_200_executions events_log_200_ok_exec_ends
fresh
kbox start -s cc
# worker P: 25 calls, each printing a value only (P, call) gives; the
# number of wrong answers goes to fail.P.
worker() {
	fails=0
	for c in $(seq 25); do
		[ ! -e "$ROOT/stop" ] || return
		out=$(timeout -k 5 90 "$KBOX" exec -s cc "print($1 * 1000 + $c)" 2>/dev/null)
		st=$?
		if [ "$st" != 0 ] || [ "$out" != "$(($1 * 1000 + c))" ]; then
			fails=$((fails + 1))
			echo "# worker $1 call $c: exit $st, output ${out:0:80}"
		fi
	done
	echo "$fails" >"fail.$1"
}
if [ -z "$SKIPPING" ]; then
	workers=
	for p in 1 2 3 4 5 6 7 8; do
		worker "$p" &
		workers="$workers $!"
	done
	# shellcheck disable=SC2086 # a list of pids (not a bare wait: tests/lib.sh)
	wait $workers
fi
check exec_8_processes_x_25_calls_all_get_their_own_result eval '
	[ "$(cat fail.[1-8] | awk '\''{ s += $1 } END { print s }'\'')" = 0 ] && [ "$(ls fail.* | wc -l)" = 8 ]'
kbox status -s cc --json
check status_counts_all_200_executions eval '[ "$(json_field stdout executions)" -ge 200 ]'
check events_log_200_ok_exec_ends events cc \
	'sum(1 for e in ev if e["event"] == "exec-end" and e["status"] == "ok") == 200'

# ---- two starts of one name at once ----

setup_for concurrent_starts_both_exit_0 \
	concurrent_starts_make_one_supervisor \
	concurrent_starts_log_one_start_event \
	start_of_running_session_with_options_warns_they_were_not_applied \
	exec_makes_symlinks_in_the_workspace put_absolute_dest_is_refused \
	put_dotdot_dest_is_refused put_inner_dotdot_dest_is_refused \
	put_refusals_write_nothing put_of_standard_input_writes_dest \
	put_of_standard_input_needs_dest put_of_standard_input_into_a_directory_is_refused \
	put_of_standard_input_refuses_a_terminal \
	put_ended_by_a_signal_leaves_no_temporary_file \
	get_absolute_src_is_refused get_absolute_src_that_is_no_host_file_is_refused \
	get_dotdot_src_is_refused get_symlink_leading_outside_is_refused \
	get_refused_writes_no_host_file get_directory_is_refused \
	get_fifo_is_refused_without_blocking get_missing_file_exits_2 \
	get_follows_symlink_inside_the_workspace put_onto_symlink_exits_0 \
	put_onto_symlink_leaves_its_target_alone \
	put_onto_symlink_replaces_the_link put_into_directory_keeps_basename \
	put_missing_host_file_exits_2 put_to_unknown_session_exits_5 \
	get_from_unknown_session_exits_5 \
	get_into_missing_directory_nodir/_says_it_does_not_exist \
	get_into_missing_directory_nodir/x.txt_says_it_does_not_exist \
	get_into_missing_directory_nodir/deeper/x.txt_says_it_does_not_exist \
	get_into_a_file_as_directory_says_it_is_not_one \
	get_into_a_file_as_directory_beneath_says_it_is_not_one \
	get_into_missing_directory_makes_nothing \
	put_into_missing_directory_nodir/_says_it_does_not_exist_in_the_workspace \
	put_into_missing_directory_nodir/x.txt_says_it_does_not_exist_in_the_workspace \
	put_into_missing_directory_nodir/deeper/x.txt_says_it_does_not_exist_in_the_workspace \
	put_into_a_file_as_directory_says_it_is_not_one \
	put_into_a_file_as_directory_beneath_says_it_is_not_one \
	put_into_missing_directory_makes_nothing
fresh
if [ -z "$SKIPPING" ]; then
	(timeout -k 5 90 "$KBOX" start -s two >out.1 2>err.1; echo $? >rc.1) &
	s1=$!
	(timeout -k 5 90 "$KBOX" start -s two >out.2 2>err.2; echo $? >rc.2) &
	wait "$s1" $!
fi
check concurrent_starts_both_exit_0 eval '[ "$(cat rc.1 rc.2)" = "0
0" ]'
check concurrent_starts_make_one_supervisor eval '
	pid=$(cat "$S/two/supervisor.pid")
	cat out.1 out.2 | sort >both
	printf "%s\n" "session two is already running (supervisor pid $pid)" \
		"session two started (backend bwrap, kernel python3, supervisor pid $pid)" | cmp -s - both'
check concurrent_starts_log_one_start_event events two \
	'sum(1 for e in ev if e["event"] == "start") == 1'

fresh
kbox start -s two --ttl 5m
check start_of_running_session_with_options_warns_they_were_not_applied eval 'status_is 0 &&
	stdout_is "session two is already running (supervisor pid $(cat "$S/two/supervisor.pid"))" &&
	has_line stderr "kbox start: warning: session two runs already; the options given were not applied (kbox stop -s two first)"'

# ---- put and get stay inside the workspace ----

fresh
echo outside >"$BASE/outside.txt"
echo data >data.txt
kbox put -s two data.txt
kbox exec -s two "import os
os.symlink('$BASE/outside.txt', 'link')
os.symlink('data.txt', 'inlink')
os.mkdir('sub')
os.mkfifo('fifo')"
check exec_makes_symlinks_in_the_workspace eval 'status_is 0 && [ -L "$S/two/workspace/link" ]'

fresh
kbox put -s two "$BASE/outside.txt" /abs.txt
check put_absolute_dest_is_refused fails_with 2 \
	"kbox put: /abs.txt: an absolute path is outside the workspace (give a path relative to it)"
kbox put -s two "$BASE/outside.txt" ../x.txt
check put_dotdot_dest_is_refused fails_with 2 'kbox put: ../x.txt: ".." would leave the workspace'
kbox put -s two "$BASE/outside.txt" sub/../../x.txt
check put_inner_dotdot_dest_is_refused fails_with 2 \
	'kbox put: sub/../../x.txt: ".." would leave the workspace'
check put_refusals_write_nothing eval '[ ! -e "$S/two/x.txt" ] && [ ! -e "$ROOT/h/sessions/x.txt" ]'

# Standard input (-) is put under DEST, which it needs; a signal that
# ends kbox put mid-copy leaves no temporary file in the workspace (the
# code would see it), and DEST as it was
fresh
printf 'from a pipe\n' >piped.in
kbox put -s two - piped.txt <piped.in
check put_of_standard_input_writes_dest eval 'status_is 0 && stdout_empty && stderr_empty &&
	[ "$(cat "$S/two/workspace/piped.txt")" = "from a pipe" ]'
kbox put -s two - <piped.in
check put_of_standard_input_needs_dest fails_with 2 \
	"kbox put: standard input (-) has no name: give DEST (kbox put - DEST)"
# (nor does a directory name it: no file "standard input" is made there)
kbox put -s two - . <piped.in
check put_of_standard_input_into_a_directory_is_refused eval 'fails_with 2 \
	"kbox put: standard input (-) has no name, and . names a directory in the workspace: give the file'"'"'s name in it (kbox put - DIR/NAME)" &&
	[ ! -e "$S/two/workspace/standard input" ]'
# (a terminal is no file to put: script(1) makes one)
on_tty "$KBOX put -s two - tty.txt"
check put_of_standard_input_refuses_a_terminal eval '[ "$rc" = 2 ] &&
	[ "$(tr -d "\r" <tty.out)" = "kbox put: standard input (-) is a terminal: pipe the file in, or give its path" ] &&
	[ ! -e "$S/two/workspace/tty.txt" ]'
if [ -z "$SKIPPING" ]; then
	echo before >"$S/two/workspace/halfway.txt"
	mkfifo put.fifo
	timeout -k 5 120 "$KBOX" put -s two - halfway.txt <put.fifo >put.out 2>put.err &
	pp=$!
	exec 7>put.fifo
	BG_PIDS=$pp
	printf 'some of it\n' >&7
	wait_for eval 'ls -A "$S/two/workspace" | grep -q "^\.kbox-put-"'
	kill -TERM "$(pgrep -P "$pp")"
	wait "$pp"
	echo $? >put.rc
	exec 7>&-
	BG_PIDS=
fi
check put_ended_by_a_signal_leaves_no_temporary_file eval '
	[ "$(cat put.rc)" = 143 ] && [ ! -s put.out ] &&
	[ -z "$(ls -A "$S/two/workspace" | grep "^\.kbox-put-")" ] &&
	[ "$(cat "$S/two/workspace/halfway.txt")" = before ]'

kbox get -s two /etc/hostname
check get_absolute_src_is_refused fails_with 2 \
	"kbox get: /etc/hostname: an absolute path is outside the workspace; it is a file on the host already (an image or text kbox saved, say): cp copies it"
kbox get -s two /no-such-dir/x
check get_absolute_src_that_is_no_host_file_is_refused fails_with 2 \
	"kbox get: /no-such-dir/x: an absolute path is outside the workspace (give a path relative to it)"
kbox get -s two ../session.json
check get_dotdot_src_is_refused fails_with 2 'kbox get: ../session.json: ".." would leave the workspace'
kbox get -s two link
check get_symlink_leading_outside_is_refused fails_with 2 \
	"kbox get: link: it leads outside the workspace (through a symlink)"
check get_refused_writes_no_host_file eval '[ ! -e link ]'
kbox get -s two sub
check get_directory_is_refused fails_with 2 "kbox get: sub is a directory, not a regular file (refused)"
kbox get -s two fifo
# (a kbox that blocked would be killed by the harness: status 124)
check get_fifo_is_refused_without_blocking eval 'fails_with 2 "kbox get: fifo is a FIFO, not a regular file (refused)"'
kbox get -s two nosuch.txt
check get_missing_file_exits_2 fails_with 2 "kbox get: nosuch.txt: no such file in the workspace"

fresh
kbox get -s two inlink
check get_follows_symlink_inside_the_workspace eval 'status_is 0 && [ ! -L inlink ] &&
	[ "$(cat inlink)" = data ]'

fresh
echo replaced >new.txt
kbox put -s two new.txt link
check put_onto_symlink_exits_0 eval 'status_is 0 && stderr_empty'
check put_onto_symlink_leaves_its_target_alone eval '[ "$(cat "$BASE/outside.txt")" = outside ]'
check put_onto_symlink_replaces_the_link eval '[ ! -L "$S/two/workspace/link" ] &&
	[ "$(cat "$S/two/workspace/link")" = replaced ]'

fresh
echo inner >in.txt
kbox put -s two in.txt sub/
check put_into_directory_keeps_basename eval 'status_is 0 && [ "$(cat "$S/two/workspace/sub/in.txt")" = inner ]'
kbox put -s two no-such-file.txt
check put_missing_host_file_exits_2 fails_with 2 \
	"kbox put: cannot read no-such-file.txt: No such file or directory"

kbox put -s nosess in.txt
check put_to_unknown_session_exits_5 fails_with 5 "kbox put: no session \"nosess\" (in $KBOX_HOME): kbox start -s nosess starts it (kbox ls lists the sessions there)"
kbox get -s nosess in.txt
check get_from_unknown_session_exits_5 fails_with 5 "kbox get: no session \"nosess\" (in $KBOX_HOME): kbox ls lists the sessions there"

# A directory that is not there is named, and none is made: in the host
# path of get, in the workspace path of put.
fresh
echo data >afile
for to in nodir/ nodir/x.txt nodir/deeper/x.txt; do
	kbox get -s two inlink "$to"
	want=${to%/*}
	[ "$to" = nodir/ ] && want=nodir/
	check "get_into_missing_directory_${to}_says_it_does_not_exist" \
		fails_with 2 "kbox get: directory $want does not exist"
done
kbox get -s two inlink afile/
check get_into_a_file_as_directory_says_it_is_not_one fails_with 2 "kbox get: afile/ is not a directory"
kbox get -s two inlink afile/x.txt
check get_into_a_file_as_directory_beneath_says_it_is_not_one fails_with 2 \
	"kbox get: afile is not a directory"
check get_into_missing_directory_makes_nothing eval '[ ! -e nodir ] && [ "$(cat afile)" = data ]'
for to in nodir/ nodir/x.txt nodir/deeper/x.txt; do
	kbox put -s two afile "$to"
	want=${to%/*}
	[ "$to" = nodir/ ] && want=nodir/
	check "put_into_missing_directory_${to}_says_it_does_not_exist_in_the_workspace" \
		fails_with 2 "kbox put: directory $want does not exist in the workspace (none is made: make it first, with os.makedirs in the session's code, say)"
done
kbox put -s two afile inlink/
check put_into_a_file_as_directory_says_it_is_not_one fails_with 2 \
	"kbox put: inlink/ is not a directory in the workspace"
kbox put -s two afile data.txt/x.txt
check put_into_a_file_as_directory_beneath_says_it_is_not_one fails_with 2 \
	"kbox put: data.txt is not a directory in the workspace"
check put_into_missing_directory_makes_nothing eval '[ ! -e "$S/two/workspace/nodir" ] &&
	[ "$(cat "$S/two/workspace/data.txt")" = data ]'

# ---- every exit status ----

# a session exec makes is new: its first result says so (a mistyped name
# makes one), once, and the person hears its name on stderr
setup_for exec_starts_the_session_when_needed \
	exec_starting_a_new_session_says_so_on_stderr exec_says_a_session_is_new_once
fresh
kbox exec -s ex 'print("ok")'
check exec_starts_the_session_when_needed eval 'status_is 0 && stdout_is "[note: new session ex: nothing was defined before this call]
ok"'
check exec_starting_a_new_session_says_so_on_stderr stderr_is \
	"kbox exec: session ex is new: started it (kbox ls lists the sessions)"
kbox exec -s ex 'print("again")'
check exec_says_a_session_is_new_once eval 'status_is 0 && stdout_is again && stderr_empty'

# a new session that does not start is never said to have started: one
# line says why, and nothing of it is left
setup_for exec_a_new_session_that_fails_to_start_is_not_said_to_have_started
fresh
mkdir -p kp/kernels/python3
echo '{"argv": ["/bin/false", "{connection_file}"], "display_name": "broken", "language": "python"}' \
	>kp/kernels/python3/kernel.json
if [ -z "$SKIPPING" ]; then
	JUPYTER_PATH=$T/kp timeout -k 5 120 "$KBOX" exec -s exbroken 'print(1)' >stdout 2>stderr
	rc=$?
fi
check exec_a_new_session_that_fails_to_start_is_not_said_to_have_started eval '
	fails_with 5 "kbox exec: session exbroken: the kernel exited with status 1 before it was ready" &&
	[ ! -e "$S/exbroken" ]'

setup_for exec_raise_exits_1
fresh
kbox exec -s ex 'raise ValueError("boom")'
check exec_raise_exits_1 eval 'status_is 1 && last_line_is stdout "ValueError: boom"'

setup_for exec_unknown_option_exits_2_in_one_line
fresh
kbox exec -s ex --frobnicate 'print(1)'
check exec_unknown_option_exits_2_in_one_line eval '[ "$rc" = 2 ] && stdout_empty &&
	[ "$(wc -l <stderr)" -eq 1 ] && grep -q "^kbox exec: " stderr'

setup_for exec_timeout_interrupted_exits_3 exec_timeout_says_state_kept \
	exec_after_timeout_keeps_state
fresh
kbox exec -s ex 'a = 7'
kbox exec -s ex -t 1 'import time; time.sleep(30)'
check exec_timeout_interrupted_exits_3 status_is 3
check exec_timeout_says_state_kept last_line_is stdout \
	"[timeout: timed out after 1 s; the kernel was interrupted (state kept)]"
kbox exec -s ex 'print(a)'
check exec_after_timeout_keeps_state eval 'status_is 0 && stdout_is 7'
# A timeout that lands as the code ends, or before it begins (ipykernel
# then drops the reply, but says idle): the kernel is kept, never killed.
# (A session of its own: IPython's history may complain afterwards, on
# the kernel's stdout, of the requests it dropped, from a thread of its
# own: so the value is written in one write, which that complaint cannot
# split.)
setup_for exec_timeout_at_the_edge_never_kills_the_kernel
kbox exec -s eg 'a = 7'
codes=
for i in $(seq 1 20); do
	kbox exec -s eg -t 0.0001 --grace 2 'a'
	codes="$codes$rc"
done
kbox exec -s eg 'import sys; sys.stdout.write("%d\n" % a)'
check exec_timeout_at_the_edge_never_kills_the_kernel eval 'status_is 0 && grep -qx 7 stdout &&
	[ -z "$(printf "%s" "$codes" | tr -d 03)" ] || { echo "# exit statuses: $codes"; false; }'

setup_for exec_timeout_ignoring_interrupt_exits_4 \
	exec_timeout_ignoring_interrupt_gives_reason \
	exec_after_timeout_kill_has_note_and_lost_state exec_timeout_with_no_grace_says_0
fresh
kbox exec -s ex 'a = 7' # named among what is lost
kbox exec -s ex -t 1000ms --grace 1s 'import signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
time.sleep(60)'
check exec_timeout_ignoring_interrupt_exits_4 status_is 4
check exec_timeout_ignoring_interrupt_gives_reason stdout_is \
	"[kernel died: the execution timed out after 1 s and did not stop within 1 s of an interrupt, so the kernel was killed; a new kernel was started; earlier state is lost]"
kbox exec -s ex 'print(a)'
check exec_after_timeout_kill_has_note_and_lost_state eval 'status_is 1 &&
	first_line_is stdout "[note: kernel restarted: the execution timed out after 1 s and did not stop within 1 s of an interrupt, so the kernel was killed; $LOST; it had defined: a: int]" &&
	last_line_is stdout "NameError: name '\''a'\'' is not defined"'
# a grace of 0 kills at once, and is said as 0 (newcomer 11, F13)
kbox exec -s ex0 -t 1000ms --grace 0 'import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    signal.pause()'
check exec_timeout_with_no_grace_says_0 eval 'status_is 4 && last_line_is stdout \
	"[kernel died: the execution timed out after 1 s and did not stop within 0 s of an interrupt, so the kernel was killed; a new kernel was started; earlier state is lost]"'
kbox rm -f -s ex0

setup_for exec_kernel_exiting_exits_4
fresh
kbox exec -s ex 'import os; os._exit(3)'
check exec_kernel_exiting_exits_4 eval 'status_is 4 && stdout_is "[kernel died: the kernel exited with status 3; a new kernel was started; earlier state is lost]"'

setup_for exec_no_start_on_unknown_session_exits_5 \
	exec_no_start_creates_no_session
fresh
kbox exec -s never --no-start 'print(1)'
check exec_no_start_on_unknown_session_exits_5 fails_with 5 \
	"kbox exec: no session \"never\" (in $KBOX_HOME): kbox start -s never starts it (kbox ls lists the sessions there)"
check exec_no_start_creates_no_session eval '[ ! -e "$S/never" ]'

# ---- bad input: one line on stderr, and the exit status ----

setup_for
needs
fresh
kbox exec -s a/b 'print(1)'
check bad_name_with_slash fails_with 2 \
	"kbox exec: invalid session name \"a/b\": only letters, digits, '.', '_' and '-' are allowed"
kbox exec -s .. 'print(1)'
check bad_name_dotdot fails_with 2 "kbox exec: invalid session name \"..\": it may not start with '.'"
# one from KBOX_SESSION says so; -s overrides it
KBOX_SESSION=a/b timeout -k 5 120 "$KBOX" status >stdout 2>stderr
rc=$?
check bad_name_from_kbox_session_names_the_variable fails_with 2 \
	"kbox status: KBOX_SESSION: invalid session name \"a/b\": only letters, digits, '.', '_' and '-' are allowed"
KBOX_SESSION=a/b timeout -k 5 120 "$KBOX" status -s nosuch >stdout 2>stderr
rc=$?
check dash_s_overrides_a_bad_kbox_session fails_with 5 "kbox status: no session \"nosuch\" (in $KBOX_HOME): kbox start -s nosuch starts it (kbox ls lists the sessions there)"
# KBOX_HOME spelt with a trailing "/", "//", "/./" or through a link is
# the same state directory: its sessions start (their sockets are found
# by its one path) and errors name that path
KBOX_HOME=$KBOX_HOME/ timeout -k 5 120 "$KBOX" status -s nosuch >stdout 2>stderr
rc=$?
check a_kbox_home_with_a_trailing_slash_is_named_by_its_one_path fails_with 5 \
	"kbox status: no session \"nosuch\" (in $KBOX_HOME): kbox start -s nosuch starts it (kbox ls lists the sessions there)"
ln -s "$KBOX_HOME" "$ROOT/home-link"
KBOX_HOME=$ROOT//home-link/./ timeout -k 5 120 "$KBOX" exec -s spelt 'print(6 * 7)' \
	>stdout 2>stderr </dev/null
rc=$?
# (run by an ordinary user, a link in a directory the user can write is
# refused on the way to a state directory: tests/security/workspace.sh)
if [ "$(id -u)" = 0 ]; then
	check a_session_starts_in_a_kbox_home_spelt_through_a_link eval 'status_is 0 &&
	stdout_is "[note: new session spelt: nothing was defined before this call]
42" && [ -d "$KBOX_HOME/sessions/spelt" ]'
else
	check a_session_starts_in_a_kbox_home_spelt_through_a_link eval 'status_is 5 &&
	grep -q "^kbox exec: state directory $ROOT//home-link/\./: $(cd "$ROOT" && pwd -P)/home-link is a symbolic link in a directory you can write" stderr &&
	[ ! -d "$KBOX_HOME/sessions/spelt" ]'
fi
"$KBOX" rm -f spelt >/dev/null 2>&1
kbox start -s -x
check bad_name_leading_dash eval '[ "$rc" = 2 ] && [ "$(wc -l <stderr)" -eq 1 ]'
kbox exec -s "$(printf 'a%.0s' $(seq 33))" 'print(1)'
check bad_name_33_chars fails_with 2 \
	"kbox exec: invalid session name \"aaaaaaaaaaaaaaaaaaaa…\": longer than 32 characters"
b32=$(printf 'b%.0s' $(seq 32))
kbox status -s "$b32"
check name_of_32_chars_is_valid fails_with 5 "kbox status: no session \"$b32\" (in $KBOX_HOME): kbox start -s $b32 starts it (kbox ls lists the sessions there)"
# a valid name under a state dir too long for the paths kbox makes in it
# (any shorter works: tests/long_home.sh)
# (in parts of 240 bytes: none may be longer than 255)
long_home=$KBOX_HOME$(printf "/%0240d" $(seq 15) | tr 0-9 d)
KBOX_HOME=$long_home kbox start -s "$b32"
check session_dir_too_long_for_the_paths_in_it fails_with 5 \
	"kbox start: session directory $(printf '%.64s' "$long_home")… is too long ($((${#long_home} + 42)) characters; at most 3584): set KBOX_HOME to a shorter path"
kbox exec -s '' 'print(1)'
check bad_name_empty fails_with 2 'kbox exec: invalid session name "": it is empty'
kbox start -s x --ttl abc
check bad_ttl fails_with 2 \
	'kbox start: invalid --ttl "abc": expected a duration from 0 to 24d, such as 30, 1.5s, 500ms, 2m or 1h'
kbox exec -s x -t -1 'print(1)'
check bad_timeout fails_with 2 \
	'kbox exec: invalid --timeout "-1": expected a duration from 0 to 24d, such as 30, 1.5s, 500ms, 2m or 1h'
kbox exec -s x --grace abc 'print(1)'
check bad_grace fails_with 2 \
	'kbox exec: invalid --grace "abc": expected a duration from 0 to 24d, such as 30, 1.5s, 500ms, 2m or 1h'
kbox start -s x --memory 10x
check bad_memory fails_with 2 \
	'kbox start: invalid --memory "10x": expected a size of at least 1M, a number of bytes or one with a suffix K, M, G or T (e.g. 512M, 1.5G)'
# (decimal only, as every number kbox reads, and at least the 0.01 a CFS
# quota can be: newcomer 12, F1 and F2)
i=0
for bad in 0 abc 2000 -1 0.001 1e-9 0x10 1e1 " 1" "1 " . +1; do
	i=$((i + 1))
	kbox start -s x --cpus "$bad"
	check "bad_cpus_$i" fails_with 2 \
		"kbox start: invalid --cpus \"$bad\": expected a number of CPUs from 0.01 to 1024 (e.g. 1 or 0.5)"
done
i=0
for bad in 0 abc 1000001 -1 1.5 1k 1e3 0x10 " 1" +1; do
	i=$((i + 1))
	kbox start -s x --output-rate "$bad"
	check "bad_output_rate_$i" fails_with 2 \
		"kbox start: invalid --output-rate \"$bad\": expected a number of messages a second from 1 to 1000000"
done
# a size may have a fraction and a T; more memory than the machine's is
# taken with a warning (the starts go on, here to an unknown kernelspec)
kbox start -s x --memory 1.5G --tmp-size 0.25GiB -k no-such-kernel
check memory_with_a_fraction_is_a_size eval '[ "$rc" = 5 ] && stdout_empty &&
	[ "$(wc -l <stderr)" -eq 1 ] && grep -q "^kbox start: no kernelspec named" stderr'
kbox start -s x --memory 1T -k no-such-kernel
check memory_over_the_machines_warns eval '[ "$rc" = 5 ] && stdout_empty &&
	head -n 1 stderr | grep -qx "kbox start: warning: --memory 1T is more than the [0-9.]* [MGT]iB of memory of this machine: it bounds nothing"'
kbox start -s x --memory 1.5
check a_fraction_of_bytes_is_no_size fails_with 2 \
	'kbox start: invalid --memory "1.5": expected a size of at least 1M, a number of bytes or one with a suffix K, M, G or T (e.g. 512M, 1.5G)'
# --cpus over the machine's: a warning, and the start goes on (here to an
# unknown kernelspec); -e with a bad NAME says what is wrong with it
kbox start -s x --cpus 1024 -k no-such-kernel
check cpus_over_the_machines_warns eval '[ "$rc" = 5 ] && stdout_empty &&
	[ "$(head -n 1 stderr)" = "kbox start: warning: --cpus 1024 is more than the $(getconf _NPROCESSORS_ONLN) CPUs of this machine: the kernel may use them all" ]'
kbox start -s x -e 1BAD=x
check env_name_beginning_with_a_digit_says_why fails_with 2 \
	'kbox start: invalid --env "1BAD=x": a NAME may not begin with a digit'
kbox start -s x -e X-Y=1
check env_name_with_a_dash_says_why fails_with 2 \
	"kbox start: invalid --env \"X-Y=1\": a NAME is letters, digits and '_'"
kbox start -s x -e X
check env_without_equals_says_why fails_with 2 \
	"kbox start: invalid --env \"X\": no '=' (expected NAME=VALUE)"
kbox start -s x --backend nope
check bad_backend fails_with 2 'kbox start: unknown backend "nope" (available: bwrap, docker, gateway, none)'
# KBOX_BACKEND is a new session's backend: one that does not exist is
# refused, by start and by exec's start, leaving no session; a stored
# session keeps its own
KBOX_BACKEND=nope kbox start -s kb
check bad_kbox_backend_is_refused_by_start fails_with 2 \
	'kbox start: unknown backend "nope" (from KBOX_BACKEND) (available: bwrap, docker, gateway, none)'
KBOX_BACKEND=nope kbox exec -s kb 1
check bad_kbox_backend_is_refused_by_exec_leaving_no_session eval 'fails_with 2 \
	"kbox exec: unknown backend \"nope\" (from KBOX_BACKEND) (available: bwrap, docker, gateway, none)" &&
	[ ! -e "$S/kb" ]'
KBOX_BACKEND=none kbox exec -s kb 'import os; print(os.getpid() > 0)'
check kbox_backend_gives_a_new_session_its_backend eval 'status_is 0 &&
	grep -q "^kbox: warning: backend none: the kernel runs unsandboxed$" stderr &&
	grep -q "\"backend\": *\"none\"" "$S/kb/session.json"'
kbox stop -s kb >/dev/null 2>&1
KBOX_BACKEND=bwrap kbox start -s kb
check a_stored_session_keeps_its_backend_whatever_kbox_backend_says eval 'status_is 0 &&
	grep -q "^session kb started (backend none, " stdout'
kbox stop -s kb >/dev/null 2>&1
kbox rm -s kb >/dev/null 2>&1
kbox start -s x -k no-such-kernel
check unknown_kernelspec eval '[ "$rc" = 5 ] && [ "$(wc -l <stderr)" -eq 1 ] &&
	grep -q "^kbox start: no kernelspec named \"no-such-kernel\" (searched .*)$" stderr'
kbox exec -s x -f no-such-file.py
check unreadable_code_file fails_with 2 "kbox exec: cannot read no-such-file.py: No such file or directory"
printf 'print(1)\0print(2)\n' >nul.py
kbox exec -s x -f nul.py
check code_file_with_a_nul_byte_is_refused fails_with 2 "kbox exec: cannot read nul.py: it holds a NUL byte (code is text)"
kbox exec -s x
check exec_without_code fails_with 2 \
	"kbox exec: no code to run: give CODE, -f FILE or - (see kbox exec --help)"
kbox exec -s x -f no-such-file.py 'print(1)'
check exec_with_code_twice fails_with 2 "kbox exec: give the code once: CODE, -f FILE or -"
check bad_input_creates_no_session eval '[ ! -e "$S/x" ] && [ ! -e "$S/a" ]'
kbox status -s nosess
check status_of_unknown_session fails_with 5 "kbox status: no session \"nosess\" (in $KBOX_HOME): kbox start -s nosess starts it (kbox ls lists the sessions there)"

# ---- ls, status, logs, complete, inspect, interrupt, stop ----

needs kernel
# ex is the session of "every exit status" above, started here when its
# tests were not selected
setup_for status_of_running_session_exits_0 status_lists_its_fields \
	status_values
fresh
have_session ex
[ "$SKIPPING" = "$SETUP_SKIPPED" ] || wait_idle ex
kbox status -s ex
check status_of_running_session_exits_0 status_is 0
# has_keys KEY...: `kbox status` printed a line "KEY: value" for each KEY.
has_keys() {
	for k in "$@"; do
		grep -q "^$k: " stdout || { echo "# no $k"; return 1; }
	done
}
check status_lists_its_fields has_keys name state backend kernel pid kernel_pid started \
	uptime kernel_uptime last_activity idle executions running_execs restarts memory ttl dir
check status_values eval '[ "$(status_line name)" = ex ] && [ "$(status_line state)" = idle ] &&
	[ "$(status_line backend)" = bwrap ] && [ "$(status_line kernel)" = python3 ] &&
	[ "$(status_line pid)" = "$(cat "$S/ex/supervisor.pid")" ] &&
	[ "$(status_line dir)" = "$S/ex" ] && [ "$(status_line ttl)" = 30m00s ]'

# ls lists the sessions the tests above made: those not made (their
# tests not selected) are started here
setup_for ls_json_is_parseable_and_lists_every_session \
	ls_ndjson_is_a_session_a_line_named_as_in_json
fresh
have_session cc eg ex nb rs sv ttl two
kbox ls --json
check ls_json_is_parseable_and_lists_every_session "$PY" -c '
import json, sys
all = {s["name"]: s for s in json.load(open("stdout"))}
want = ["cc", "eg", "ex", "nb", "rs", "sv", "ttl", "two"] + (["an"] if sys.argv[2] == "yes" else [])
assert sorted(all) == sorted(want), sorted(all)
for s in all.values():
    assert {"name", "state", "dir", "backend", "kernel"} <= set(s), s
ex = all["ex"]
assert ex["state"] == "idle" and ex["dir"] == sys.argv[1] + "/ex", ex
assert {"pid", "kernel_pid", "uptime_s", "idle_s", "executions", "restarts", "memory_bytes",
        "ttl_ms", "generation", "last_activity", "started"} <= set(ex), ex
assert ex["ttl_ms"] == 1800000 and ex["memory_bytes"] > 0, ex
' "$S" "$have_pandas"
kbox ls --format ndjson
check ls_ndjson_is_a_session_a_line_named_as_in_json "$PY" -c '
import json, subprocess, sys
lines = [json.loads(l) for l in open("stdout")]
names = [s["name"] for s in json.loads(subprocess.run([sys.argv[1], "ls", "--format", "json"],
                                                      capture_output=True).stdout)]
assert [s["name"] for s in lines] == names, (lines, names)
assert all(set(s) >= {"name", "state", "dir"} for s in lines), lines
' "$KBOX"

setup_for status_ndjson_is_the_json_object_on_one_line \
	status_format_json_is_indented
fresh
have_session ex
kbox status -s ex --format ndjson
check status_ndjson_is_the_json_object_on_one_line eval 'status_is 0 && [ "$(wc -l <stdout)" = 1 ] &&
	"$PY" -c "import json; s = json.load(open(\"stdout\")); assert s[\"name\"] == \"ex\" and s[\"state\"] == \"idle\", s"'
kbox status -s ex --format json
check status_format_json_is_indented eval 'status_is 0 && [ "$(head -n 1 stdout)" = "{" ] &&
	grep -q "^  \"name\": \"ex\",$" stdout'

setup_for ls_has_header ls_lists_running_session
fresh
have_session ex
kbox ls
check ls_has_header eval 'status_is 0 && [ "$(head -n 1 stdout | tr -s " ")" = "NAME STATE BACKEND KERNEL PID UPTIME IDLE EXECS" ]'
check ls_lists_running_session eval '[ "$(ls_row ex | cut -d" " -f2-5)" = "idle bwrap python3 $(cat "$S/ex/supervisor.pid")" ]'

setup_for logs_shows_events_as_lines logs_a_starts_pid_is_bubblewraps \
	logs_ndjson_prints_the_raw_lines \
	logs_json_is_one_array_of_the_events logs_follow_refuses_json \
	logs_follow_keeps_going_until_killed \
	logs_follow_ends_when_its_reader_has_gone \
	logs_follow_piped_to_head_ends_while_the_session_runs \
	logs_follow_ends_when_its_reader_goes_before_reading \
	logs_follow_waiting_for_a_log_ends_when_its_reader_has_gone \
	logs_follow_reads_on_across_a_rotation_every_event_once
fresh
kbox logs -s rs
check logs_shows_events_as_lines eval 'status_is 0 &&
	[ "$(wc -l <stdout)" = "$(wc -l <"$S/rs/events.ndjson")" ] &&
	head -n 1 stdout | grep -q "^[0-9-]*T[0-9:.]*Z start  *backend=bwrap generation=1 kernel=python3 pid=[0-9]*$" &&
	grep -qF "restart     cause=\"the kernel was killed by signal 9 (SIGKILL)\" generation=2 requested=false" stdout'
# (a start's pid is bubblewrap's, the process the backend started, never
# the kernel's, which its ready says: the kernel's parent is bwrap's init,
# whose parent it is)
KPID=$(status_field rs kernel_pid)
SPID=$("$PY" -c 'import json, sys
print([e for e in map(json.loads, open(sys.argv[1])) if e["event"] == "start"][-1]["pid"])' "$S/rs/events.ndjson" 2>/dev/null)
check logs_a_starts_pid_is_bubblewraps eval '[ -n "$KPID" ] && [ -n "$SPID" ] &&
	[ "$(ps -o ppid= -p "$(ps -o ppid= -p "$KPID" | tr -d " ")" | tr -d " ")" = "$SPID" ] &&
	[ "$(ps -o comm= -p "$SPID")" = bwrap ] || { why="kernel $KPID, start $SPID"; false; }'
kbox logs -s rs --format ndjson
check logs_ndjson_prints_the_raw_lines eval 'status_is 0 && cmp -s stdout "$S/rs/events.ndjson"'
kbox logs -s rs --json
check logs_json_is_one_array_of_the_events "$PY" -c '
import json, sys
assert json.load(open("stdout")) == [json.loads(l) for l in open(sys.argv[1])]
' "$S/rs/events.ndjson"
kbox logs -s rs -f --format json
check logs_follow_refuses_json eval '[ "$rc" = 2 ] &&
	stderr_is "kbox logs: -f cannot be used with --format json (an array that never ends); use --format ndjson" &&
	stdout_is "{\"schema\":\"kbox.result/2\",\"status\":\"failed\",\"error\":{\"kind\":\"usage\",\"message\":\"-f cannot be used with --format json (an array that never ends); use --format ndjson\"}}"'
if [ -z "$SKIPPING" ]; then
	timeout 1 "$KBOX" logs -s rs -f >stdout 2>stderr
	rc=$?
fi
check logs_follow_keeps_going_until_killed eval '[ "$rc" = 124 ] &&
	[ "$(wc -l <stdout)" = "$(wc -l <"$S/rs/events.ndjson")" ]'
if [ -z "$SKIPPING" ]; then
	timeout 10 "$KBOX" logs -s rs -f | head -n 1 >stdout
	rc=${PIPESTATUS[0]}
fi
check logs_follow_ends_when_its_reader_has_gone eval '[ "$rc" = 0 ] && [ "$(wc -l <stdout)" = 1 ]'
# kbox(1)'s own words: `kbox logs -f | head -n 1` ends while the session
# runs, without waiting for another event (one that waited would be killed
# by timeout, status 124); so does a -f whose reader goes before it has
# read a line, and one waiting for a log that is not there yet.
if [ -z "$SKIPPING" ]; then
	timeout 60 sh -c '"$1" logs -s rs -f | head -n 1' sh "$KBOX" >stdout
	rc=$?
fi
check logs_follow_piped_to_head_ends_while_the_session_runs eval '[ "$rc" = 0 ] &&
	[ "$(wc -l <stdout)" = 1 ] && kill -0 "$(cat "$S/rs/supervisor.pid")"'
if [ -z "$SKIPPING" ]; then
	{ timeout 20 "$KBOX" logs -s rs -f; echo $? >rc.out; } | true
	rc=$(cat rc.out)
fi
check logs_follow_ends_when_its_reader_goes_before_reading status_is 0
mkdir -m 700 "$S/nolog" 2>/dev/null
if [ -z "$SKIPPING" ]; then
	{ timeout 20 "$KBOX" logs -s nolog -f; echo $? >rc.out; } | true
	rc=$(cat rc.out)
fi
check logs_follow_waiting_for_a_log_ends_when_its_reader_has_gone status_is 0
rmdir "$S/nolog" 2>/dev/null
# -f across a rotation: the log is filled to 50 bytes short of its bound
# (1 MiB), so the next event rotates it; what -f printed is then the
# rotated log and the new one, every line once, in order
# same_as_the_logs FILE: FILE is events.ndjson.1 then events.ndjson of rs
same_as_the_logs() {
	[ -s "$S/rs/events.ndjson.1" ] && cat "$S/rs/events.ndjson.1" "$S/rs/events.ndjson" | cmp -s - "$1"
}
# lines_of FILE N: FILE has N lines
lines_of() { [ "$(wc -l <"$1")" = "$2" ]; }
if [ -z "$SKIPPING" ]; then
	rm -f "$S/rs/events.ndjson.1"
	"$KBOX" logs -s rs -f --format ndjson >follow.out 2>follow.err &
	fpid=$!
	wait_for lines_of follow.out "$(wc -l <"$S/rs/events.ndjson")"
	fill_log "$S/rs/events.ndjson" $((1048576 - 50))
	"$KBOX" exec -s rs 'print("after the rotation")' >/dev/null 2>&1
	wait_for same_as_the_logs follow.out
	kill "$fpid" 2>/dev/null
	wait "$fpid" 2>/dev/null
fi
check logs_follow_reads_on_across_a_rotation_every_event_once eval '
	same_as_the_logs follow.out && [ "$(stat -c %s "$S/rs/events.ndjson.1")" -le 1048576 ] &&
	grep -q "\"event\":\"exec-end\"" "$S/rs/events.ndjson" && [ ! -s follow.err ]'

# A session followed that is removed ends the follower, which says so: it
# never goes on into a new session of the same name, even one made at
# once (the follower reads the logs through the directory it began in)
setup_for logs_follow_ends_when_its_session_is_removed \
	logs_follow_reads_nothing_of_a_new_session_of_the_name \
	rm_f_stops_a_running_session_with_its_own_cause
fresh
kbox start -s lf
if [ -z "$SKIPPING" ]; then
	timeout -k 5 120 "$KBOX" logs -s lf -f >lf.out 2>lf.err &
	lfp=$!
	BG_PIDS=$lfp
	wait_for grep -q "start" lf.out
	"$KBOX" rm -f lf >/dev/null 2>&1
	timeout -k 5 120 "$KBOX" start -s lf >/dev/null 2>&1
	wait "$lfp"
	echo $? >lf.rc
	BG_PIDS=
fi
check logs_follow_ends_when_its_session_is_removed eval '[ "$(cat lf.rc)" = 0 ] &&
	[ "$(cat lf.err)" = "kbox logs: session lf was removed: no more events come" ]'
check logs_follow_reads_nothing_of_a_new_session_of_the_name eval '
	[ "$(grep -c " start " lf.out)" = 1 ] && [ "$(tail -n 1 lf.out | awk "{ print \$2 }")" = stop ] ||
	{ sed "s/^/#   /" lf.out; false; }'
check rm_f_stops_a_running_session_with_its_own_cause eval '
	tail -n 1 lf.out | grep -qE "Z stop +cause=\"stopped on request \(kbox rm -f\)\" executions=0$" ||
	{ why="$(tail -n 1 lf.out)"; false; }'
kbox rm -f lf

setup_for complete_json_prints_the_reply \
	complete_dash_dash_json_is_format_json \
	complete_of_standard_input_drops_its_last_newline \
	complete_text_lists_the_matches_a_line \
	complete_text_within_max_output_says_what_was_left_out \
	inspect_json_finds_len inspect_text_is_plain_without_escapes \
	inspect_text_strips_every_escape_sequence_and_shows_nul_as_backslash_0 \
	inspect_text_says_when_nothing_is_found \
	inspect_text_cuts_at_max_output_and_says_so \
	complete_cursor_beyond_the_end
fresh
have_session ex
kbox complete -s ex --format json 'import o'
check complete_json_prints_the_reply eval 'status_is 0 && [ "$(wc -l <stdout)" = 1 ] &&
	"$PY" -c "import json; r = json.load(open(\"stdout\")); assert \"os\" in r[\"matches\"] and r[\"status\"] == \"ok\""'
# (an attribute's completions, which do not depend on how long IPython
# may take to list the modules, as an import's do on a loaded machine)
kbox complete -s ex --format json 'str.low'
cp stdout complete.json 2>/dev/null
kbox complete -s ex --json 'str.low'
check complete_dash_dash_json_is_format_json eval 'status_is 0 && cmp -s stdout complete.json &&
	grep -q "\"lower\"" stdout'
# code on standard input as echo gives it: its last newline is not code
[ -n "$SKIPPING" ] || { echo 'str.low' | timeout -k 5 120 "$KBOX" complete -s ex - >stdout 2>stderr; rc=$?; }
check complete_of_standard_input_drops_its_last_newline eval 'status_is 0 && stdout_is lower'
kbox complete -s ex 'impo'
check complete_text_lists_the_matches_a_line eval 'status_is 0 && [ ! -s stderr ] &&
	has_line stdout import && ! grep -q "[{}]" stdout'
kbox complete -s ex --max-output 64 'str.'
check complete_text_within_max_output_says_what_was_left_out eval 'status_is 0 &&
	[ "$(head -c 64 stdout | wc -l)" -ge 2 ] &&
	tail -n 1 stdout | grep -q "^\[\.\.\. [0-9]* bytes in [0-9]* lines left out (--max-output 64); a larger --max-output, or --format json, shows all \.\.\.\]$" &&
	[ "$(sed \$d stdout | wc -c)" -le 64 ]'
kbox inspect -s ex --format json 'len'
check inspect_json_finds_len eval 'status_is 0 &&
	"$PY" -c "import json; r = json.load(open(\"stdout\")); assert r[\"found\"] is True and \"\x1b\" in r[\"data\"][\"text/plain\"]"'
kbox inspect -s ex 'len'
check inspect_text_is_plain_without_escapes eval 'status_is 0 && [ ! -s stderr ] &&
	grep -q "Return the number of items" stdout && ! grep -q "$(printf "\033")" stdout &&
	head -n 1 stdout | grep -q "^Signature: *len(obj, /)$"'
kbox exec -s ex 'class Esc:
    """a\x00b \x1b]0;title\x07c\x1b[31mred\x1b[0m \x1b(Bend"""'
kbox inspect -s ex Esc
check inspect_text_strips_every_escape_sequence_and_shows_nul_as_backslash_0 eval 'status_is 0 &&
	! grep -q "$(printf "\033")" stdout && ! grep -q title stdout &&
	grep -q "a\\\\0b cred end$" stdout'
kbox inspect -s ex 'no_such_name_here'
check inspect_text_says_when_nothing_is_found eval 'status_is 0 &&
	stdout_is "[not found: the kernel knows nothing about the name at the cursor]"'
kbox inspect -s ex --max-output 100 'print'
check inspect_text_cuts_at_max_output_and_says_so eval 'status_is 0 &&
	[ "$(sed \$d stdout | wc -c)" -le 100 ] &&
	tail -n 1 stdout | grep -q "^\[\.\.\. [0-9]* bytes in [0-9]* lines left out (--max-output 100); a larger --max-output, or --format json, shows all \.\.\.\]$"'
kbox complete -s ex --cursor 99 'x'
check complete_cursor_beyond_the_end fails_with 2 \
	"kbox complete: --cursor 99 is beyond the end of the code (1 characters)"

# bg_end: wait for the kbox exec started in the background ($BG_PIDS),
# its exit status into bg.rc.
bg_end() {
	[ -z "$SKIPPING" ] || return 0
	wait "$BG_PIDS"
	echo $? >bg.rc
	BG_PIDS=
}

# bg_exec_armed FILE CODE: make "arm" in session ex's workspace, run CODE
# there in the background (into bg.out and bg.err) and wait until the
# kernel has made FILE (the code it set up earlier takes "arm" there).
bg_exec_armed() {
	[ -z "$SKIPPING" ] || return 0
	rm -f "$S/ex/workspace/$1"
	: >"$S/ex/workspace/arm"
	timeout -k 5 90 "$KBOX" exec -s ex "$2" >bg.out 2>bg.err &
	BG_PIDS=$!
	wait_for test -e "$S/ex/workspace/$1"
}

setup_for interrupt_says_so interrupted_exec_exits_3_and_says_interrupted \
	exec_after_interrupt_keeps_state
fresh
have_session ex
kbox exec -s ex 'w = 3'
if [ -z "$SKIPPING" ]; then
	rm -f "$S/ex/workspace/started"
	timeout -k 5 90 "$KBOX" exec -s ex 'open("started", "w").close(); import time; time.sleep(30)' \
		>bg.out 2>bg.err &
	BG_PIDS=$!
	wait_for test -e "$S/ex/workspace/started"
fi
kbox interrupt -s ex
check interrupt_says_so eval 'status_is 0 && stdout_is "session ex: kernel interrupted"'
bg_end
check interrupted_exec_exits_3_and_says_interrupted eval '[ "$(cat bg.rc)" = 3 ] &&
	[ "$(wc -l <bg.out)" -eq 2 ] &&
	grep -q "^KeyboardInterrupt: interrupted by kbox interrupt at Cell In \?\[[0-9]*\], line 1: open(\"started\", \"w\").close(); import time; time.sleep(30)$" bg.out &&
	[ "$(tail -n 1 bg.out)" = "[interrupted by kbox interrupt; state is kept]" ] && [ ! -s bg.err ]'
kbox exec -s ex 'print(w)'
check exec_after_interrupt_keeps_state eval 'status_is 0 && stdout_is 3'

# An interrupt that lands after the code, before its reply (here in the
# flush of sys.stdout that ipykernel makes between the two), ipykernel
# takes in its event loop: idle comes, the reply never.  The execution
# ends as interrupted all the same, and the kernel goes on.
setup_for interrupt_that_loses_the_reply_ends_the_execution \
	kernel_goes_on_after_an_interrupt_that_lost_the_reply
fresh
have_session ex
kbox exec -s ex 'import os, sys, time
class _SlowFlush:
    def __init__(s, o): s.o = o
    def flush(s):
        if os.path.exists("arm"):
            os.remove("arm"); open("in_flush", "w").close(); time.sleep(60)
        s.o.flush()
    def __getattr__(s, n): return getattr(s.o, n)
sys.stdout = _SlowFlush(sys.stdout)'
bg_exec_armed in_flush 'w = 4'
kbox interrupt -s ex
bg_end
check interrupt_that_loses_the_reply_ends_the_execution eval 'status_is 0 &&
	[ "$(cat bg.rc)" = 3 ] && [ "$(cat bg.out)" = "[interrupted by kbox interrupt; state is kept]" ] &&
	[ ! -s bg.err ]'
kbox exec -s ex 'sys.stdout = sys.stdout.o; print(w)'
check kernel_goes_on_after_an_interrupt_that_lost_the_reply eval 'status_is 0 && stdout_is 4'

# A second kbox interrupt interrupts again: code that caught the first
# and went on stops at the second.
setup_for a_second_interrupt_stops_code_that_caught_the_first
fresh
have_session ex
if [ -z "$SKIPPING" ]; then
	rm -f "$S/ex/workspace/started" "$S/ex/workspace/caught"
	timeout -k 5 90 "$KBOX" exec -s ex 'import time
open("started", "w").close()
try:
    time.sleep(60)
except KeyboardInterrupt:
    print("caught"); open("caught", "w").close()
time.sleep(60)
print("slept")' >bg.out 2>bg.err &
	BG_PIDS=$!
	wait_for test -e "$S/ex/workspace/started"
	"$KBOX" interrupt -s ex >/dev/null
	wait_for test -e "$S/ex/workspace/caught"
fi
kbox interrupt -s ex
bg_end
check a_second_interrupt_stops_code_that_caught_the_first eval 'status_is 0 &&
	[ "$(cat bg.rc)" = 3 ] && [ "$(head -n 1 bg.out)" = caught ] &&
	grep -q "^KeyboardInterrupt: interrupted by kbox interrupt at Cell In \?\[[0-9]*\], line 7: time.sleep(60)$" bg.out &&
	[ "$(tail -n 1 bg.out)" = "[interrupted by kbox interrupt; state is kept]" ] && [ ! -s bg.err ]'

# An interrupt that lands in one of IPython's pre_execute callbacks, which
# prints it and goes on to the code (here a callback that sleeps), is made
# once more when no reply follows the KeyboardInterrupt: the code stops.
setup_for interrupt_taken_by_a_callback_is_made_again
fresh
have_session ex
kbox exec -s ex 'import os, time
def _slow_pre():
    if os.path.exists("arm"):
        os.remove("arm"); open("in_pre", "w").close(); time.sleep(2)
get_ipython().events.register("pre_execute", _slow_pre)'
bg_exec_armed in_pre 'import time; time.sleep(60); print("slept")'
kbox interrupt -s ex
bg_end
check interrupt_taken_by_a_callback_is_made_again eval 'status_is 0 && [ "$(cat bg.rc)" = 3 ] &&
	grep -q "^Error in callback <function _slow_pre at 0x[0-9a-f]*> (for pre_execute):$" bg.out &&
	grep -q "^KeyboardInterrupt: interrupted by kbox interrupt at Cell In \?\[[0-9]*\], line 1: import time; time.sleep(60); print(\"slept\")$" bg.out &&
	[ "$(tail -n 1 bg.out)" = "[interrupted by kbox interrupt; state is kept]" ] &&
	! grep -q "^slept$" bg.out && [ ! -s bg.err ]'

# Ctrl-C (SIGINT) or SIGTERM to kbox exec interrupts the code, as kbox
# interrupt does, and the result is printed as it comes (in the format
# asked); a second one ends kbox exec as the signal does
setup_for sigint_to_exec_interrupts_the_code_and_prints_the_result \
	sigterm_to_exec_prints_the_interrupted_result_as_json \
	a_second_sigint_ends_exec_as_the_signal_does
fresh
have_session ex
if [ -z "$SKIPPING" ]; then
	for sig in INT TERM; do
		rm -f "$S/ex/workspace/started"
		fmt=text
		[ "$sig" = INT ] || fmt=json
		timeout -k 5 90 "$KBOX" exec -s ex --format "$fmt" 'import time
open("started", "w").close()
while True: time.sleep(0.05)' >"sig$sig.out" 2>"sig$sig.err" &
		BG_PIDS=$!
		wait_for test -e "$S/ex/workspace/started"
		# kbox exec itself, not timeout (which would pass the signal on,
		# then kill it 5 s later)
		kill -"$sig" "$(pgrep -P "$BG_PIDS")"
		wait "$BG_PIDS"
		echo $? >"sig$sig.rc"
		BG_PIDS=
	done
	rm -f "$S/ex/workspace/started"
	rm -f "$S/ex/workspace/got"
	# the code takes the interrupt and goes on, saying it came: the
	# second SIGINT is sent once the first was acted on (two sent at
	# once would be one, a pending signal)
	timeout -k 5 90 "$KBOX" exec -s ex 'import signal, time
signal.signal(signal.SIGINT, lambda *a: open("got", "w").close())
open("started", "w").close()
while True: time.sleep(0.05)' >sig2.out 2>sig2.err &
	BG_PIDS=$!
	wait_for test -e "$S/ex/workspace/started"
	kpid=$(pgrep -P "$BG_PIDS")
	kill -INT "$kpid"
	wait_for test -e "$S/ex/workspace/got"
	kill -INT "$kpid"
	wait "$BG_PIDS"
	echo $? >sig2.rc
	BG_PIDS=
fi
check sigint_to_exec_interrupts_the_code_and_prints_the_result eval '
	[ "$(cat sigINT.rc)" = 3 ] && [ ! -s sigINT.err ] &&
	head -n 1 sigINT.out | grep -qx "KeyboardInterrupt: interrupted by SIGINT to kbox exec at Cell In \[[0-9]*\], line 3: while True: time.sleep(0.05)" &&
	[ "$(tail -n 1 sigINT.out)" = "[interrupted by SIGINT to kbox exec; state is kept]" ]'
check sigterm_to_exec_prints_the_interrupted_result_as_json eval '
	[ "$(cat sigTERM.rc)" = 3 ] && [ ! -s sigTERM.err ] &&
	"$PY" -c "import json, sys; j = json.load(open(sys.argv[1]))
assert j[\"status\"] == \"interrupted\" and j[\"reason\"] == \"interrupted by SIGTERM to kbox exec\", j
assert j[\"error\"][\"ename\"] == \"KeyboardInterrupt\", j" sigTERM.out'
check a_second_sigint_ends_exec_as_the_signal_does eval '
	[ "$(cat sig2.rc)" = 130 ] && [ ! -s sig2.out ]'
kbox restart -s ex # (its code goes on: the next tests want the session)

# Ctrl-C on a kbox exec that still waits its turn behind another client's
# code ends it as the signal does: the other client's code is not
# interrupted, and the waiting code never runs
setup_for a_sigint_while_waiting_its_turn_ends_exec_and_runs_nothing \
	a_sigint_while_waiting_its_turn_leaves_the_running_code_alone
fresh
have_session ex
if [ -z "$SKIPPING" ]; then
	rm -f "$S/ex/workspace/holding" "$S/ex/workspace/release" "$S/ex/workspace/ran"
	timeout -k 5 90 "$KBOX" exec -s ex 'import os, time
open("holding", "w").close()
while not os.path.exists("release"): time.sleep(0.05)
print("first done")' >first.out 2>first.err &
	first=$!
	wait_for test -e "$S/ex/workspace/holding"
	timeout -k 5 90 "$KBOX" exec -s ex 'open("ran", "w").close()' >second.out 2>second.err &
	second=$!
	BG_PIDS="$first $second"
	wait_for eval '"$KBOX" status -s ex --json | grep -q "\"queued\": *1"'
	kill -INT "$(pgrep -P "$second")"
	wait "$second"
	echo $? >second.rc
	touch "$S/ex/workspace/release"
	wait "$first"
	echo $? >first.rc
	BG_PIDS=
fi
check a_sigint_while_waiting_its_turn_ends_exec_and_runs_nothing eval '
	[ "$(cat second.rc)" = 130 ] && [ ! -s second.out ] && [ ! -e "$S/ex/workspace/ran" ]'
check a_sigint_while_waiting_its_turn_leaves_the_running_code_alone eval '
	[ "$(cat first.rc)" = 0 ] && last_line_is first.out "first done"'

# A supervisor that does not answer (stopped, or stuck): every command
# that waits on it asks it for its status after 10 s of silence and gives
# up when that gets no answer within 20 s, exit 5, saying what to do; a
# SIGTERM to a kbox exec whose code runs there ends it once its interrupt
# gets no answer (10 s).  The commands wait side by side.
setup_for a_stopped_supervisor_makes_status_and_interrupt_say_what_to_do \
	a_stopped_supervisor_is_unresponsive_in_ls_with_its_pid \
	a_stopped_supervisor_ends_exec_with_exit_5_and_what_to_do \
	a_stopped_supervisor_ends_exec_t_with_exit_5 \
	a_stopped_supervisor_ends_complete_with_exit_5 \
	a_stopped_supervisor_ends_stop_and_restart_with_exit_5 \
	a_sigterm_to_exec_on_a_stopped_supervisor_ends_it \
	a_resumed_supervisor_has_kept_the_session \
	a_resumed_supervisor_does_not_take_clients_gone_for_intruders
fresh
have_session ex
spid=
if [ -z "$SKIPPING" ]; then
	rm -f "$S/ex/workspace/started"
	kbox exec -s ex 'kept = 7'
	timeout -k 5 200 "$KBOX" exec -s ex 'import time
open("started", "w").close()
time.sleep(600)' >frz-term.out 2>frz-term.err &
	term=$!
	BG_PIDS=$term
	wait_for test -e "$S/ex/workspace/started"
	spid=$(cat "$S/ex/supervisor.pid")
	kill -STOP "$spid"
	# (each waits in the background; all of them end on their own)
	timeout -k 5 200 "$KBOX" exec -s ex 'print(1)' >frz-exec.out 2>frz-exec.err &
	p1=$!
	timeout -k 5 200 "$KBOX" exec -s ex -t 3 'print(1)' >frz-exect.out 2>frz-exect.err &
	p2=$!
	timeout -k 5 200 "$KBOX" complete -s ex 'pri' >frz-compl.out 2>frz-compl.err &
	p3=$!
	timeout -k 5 200 "$KBOX" stop -s ex >frz-stop.out 2>frz-stop.err &
	p4=$!
	timeout -k 5 200 "$KBOX" restart -s ex >frz-restart.out 2>frz-restart.err &
	p5=$!
	timeout -k 5 200 "$KBOX" status -s ex >frz-status.out 2>frz-status.err &
	p6=$!
	timeout -k 5 200 "$KBOX" interrupt -s ex >frz-intr.out 2>frz-intr.err &
	p7=$!
	timeout -k 5 200 "$KBOX" ls >frz-ls.out 2>frz-ls.err &
	p8=$!
	BG_PIDS="$term $p1 $p2 $p3 $p4 $p5 $p6 $p7 $p8"
	kill -TERM "$(pgrep -P "$term")"
	for p in term:$term exec:$p1 exect:$p2 compl:$p3 stop:$p4 restart:$p5 status:$p6 \
		intr:$p7 ls:$p8; do
		wait "${p#*:}"
		echo $? >"frz-${p%%:*}.rc"
	done
	BG_PIDS=
	kill -CONT "$spid"
	kbox exec -s ex 'print(kept)'
fi
frozen="the supervisor (pid $spid) did not answer a status request within 20 s: it is stopped or stuck (kill -CONT resumes a stopped one; kill -KILL ends it and its kernel, and the session's files stay)"
# (status and interrupt, which wait less than a probe takes, say the same
# of what they waited; ls shows the supervisor's pid)
advice="it is stopped or stuck (kill -CONT resumes a stopped one; kill -KILL ends it and its kernel, and the session's files stay)"
check a_stopped_supervisor_makes_status_and_interrupt_say_what_to_do eval '
	[ "$(cat frz-status.rc)" = 5 ] && [ "$(cat frz-intr.rc)" = 5 ] &&
	grep -qxF "error:             the supervisor (pid $spid) did not answer within 5 s: $advice" frz-status.out &&
	[ "$(cat frz-intr.err)" = "kbox interrupt: session ex: the supervisor (pid $spid) did not answer within 10 s: $advice" ]'
check a_stopped_supervisor_is_unresponsive_in_ls_with_its_pid eval '[ "$(cat frz-ls.rc)" = 0 ] &&
	[ "$(awk "\$1 == \"ex\" { print \$2, \$5 }" frz-ls.out)" = "unresponsive $spid" ]'
check a_stopped_supervisor_ends_exec_with_exit_5_and_what_to_do eval '
	[ "$(cat frz-exec.rc)" = 5 ] && [ ! -s frz-exec.out ] &&
	[ "$(cat frz-exec.err)" = "kbox exec: session ex: $frozen" ]'
check a_stopped_supervisor_ends_exec_t_with_exit_5 eval '
	[ "$(cat frz-exect.rc)" = 5 ] && [ ! -s frz-exect.out ] &&
	[ "$(cat frz-exect.err)" = "kbox exec: session ex: $frozen" ]'
check a_stopped_supervisor_ends_complete_with_exit_5 eval '
	[ "$(cat frz-compl.rc)" = 5 ] && [ ! -s frz-compl.out ] &&
	[ "$(cat frz-compl.err)" = "kbox complete: session ex: $frozen" ]'
check a_stopped_supervisor_ends_stop_and_restart_with_exit_5 eval '
	[ "$(cat frz-stop.rc)" = 5 ] && [ "$(cat frz-restart.rc)" = 5 ] &&
	[ "$(cat frz-stop.err)" = "kbox stop: session ex: $frozen" ] &&
	[ "$(cat frz-restart.err)" = "kbox restart: session ex: $frozen" ]'
check a_sigterm_to_exec_on_a_stopped_supervisor_ends_it eval '
	[ "$(cat frz-term.rc)" = 143 ] && [ ! -s frz-term.out ] &&
	[ "$(cat frz-term.err)" = "kbox exec: SIGTERM: cannot interrupt the code: the supervisor (pid $spid) did not answer within 10 s: $advice" ]'
check a_resumed_supervisor_has_kept_the_session eval 'status_is 0 && stdout_is 7'
# (the clients that gave up were gone when it took their connections:
# closed, and not logged as a sandbox's)
check a_resumed_supervisor_does_not_take_clients_gone_for_intruders \
	events ex '"client-refused" not in [e["event"] for e in ev]'

setup_for stop_says_stopped stop_returns_once_the_supervisor_has_exited \
	stop_of_stopped_session_exits_0_and_says_it_is_not_running \
	stop_of_a_session_that_does_not_exist_exits_0_and_says_so \
	stop_of_a_session_that_does_not_exist_makes_nothing \
	interrupt_of_stopped_session_exits_5 restart_of_stopped_session_exits_5 \
	complete_needs_a_running_session events_log_stop_on_request
fresh
have_session ex
ex_sup=$(cat "$S/ex/supervisor.pid" 2>/dev/null)
kbox stop -s ex
check stop_says_stopped eval 'status_is 0 && stdout_is "session ex stopped"'
# (as docker stop: its process has ended, not only said it stops)
check stop_returns_once_the_supervisor_has_exited eval '[ -n "$ex_sup" ] && exited "$ex_sup"'
kbox stop -s ex
check stop_of_stopped_session_exits_0_and_says_it_is_not_running eval 'status_is 0 &&
	stdout_empty && stderr_is "kbox stop: session ex is not running"'
kbox stop -s never-made
check stop_of_a_session_that_does_not_exist_exits_0_and_says_so eval 'status_is 0 &&
	stdout_empty && stderr_is "kbox stop: no session \"never-made\" (in $KBOX_HOME): nothing to stop"'
check stop_of_a_session_that_does_not_exist_makes_nothing test ! -e "$S/never-made"
kbox interrupt -s ex
check interrupt_of_stopped_session_exits_5 fails_with 5 \
	"kbox interrupt: session ex is not running: it runs no code to interrupt"
kbox restart -s ex
check restart_of_stopped_session_exits_5 fails_with 5 \
	"kbox restart: session ex is not running (start it with kbox start -s ex)"
kbox complete -s ex 'import o'
check complete_needs_a_running_session eval '[ "$rc" = 5 ] && [ "$(wc -l <stderr)" -eq 1 ]'
check events_log_stop_on_request events ex 'ev[-1]["event"] == "stop" and ev[-1]["cause"] == "stopped on request (kbox stop)"'

# ---- a kernelspec that does not start is not the session's ----

# no_kernelspec_line NAME: exit 5 and the one line of an unknown kernelspec NAME.
no_kernelspec_line() {
	[ "$rc" = 5 ] && stdout_empty && [ "$(wc -l <stderr)" -eq 1 ] &&
		grep -q "^kbox start: no kernelspec named \"$1\" (searched .*)\$" stderr
}
setup_for \
	start_of_a_new_session_with_an_unknown_kernelspec_exits_5_and_makes_no_session \
	start_after_an_unknown_kernelspec_starts_the_default_kernel \
	start_of_a_stopped_session_with_an_unknown_kernelspec_exits_5 \
	start_with_an_unknown_kernelspec_keeps_the_sessions_kernel \
	start_with_a_kernel_that_exits_at_once_exits_5 \
	first_start_that_fails_leaves_no_session \
	exec_after_a_first_start_that_failed_is_a_new_session_not_a_restart \
	start_that_failed_keeps_the_kernelspec_that_worked \
	exec_after_a_failed_start_runs_the_sessions_kernel \
	status_after_a_failed_start_names_the_sessions_kernel \
	exec_env_sets_variables_for_the_execution \
	exec_env_is_restored_after_the_execution_an_error_too \
	exec_env_takes_any_utf8_and_puts_it_all_back the_note_of_a_death_takes_no_forged_summary \
	exec_env_that_never_ends_fails_the_execution_and_kills_the_kernel \
	exec_after_an_env_that_never_ended_runs_on_a_new_kernel \
	exec_env_name_that_is_no_name_says_why protocol_env_is_checked_and_carried
fresh
kbox start -s kf -k no-such-kernel
check start_of_a_new_session_with_an_unknown_kernelspec_exits_5_and_makes_no_session eval \
	'no_kernelspec_line no-such-kernel && [ ! -e "$S/kf" ]'
kbox start -s kf
check start_after_an_unknown_kernelspec_starts_the_default_kernel eval 'status_is 0 && started_line kf'
kbox stop -s kf
kbox start -s kf -k no-such-kernel
check start_of_a_stopped_session_with_an_unknown_kernelspec_exits_5 no_kernelspec_line no-such-kernel
check start_with_an_unknown_kernelspec_keeps_the_sessions_kernel eval \
	'[ "$(json_field "$S/kf/session.json" kernel)" = python3 ]'
mkdir -p jp/kernels/dies
cat >jp/kernels/dies/kernel.json <<'EOF'
{"argv": ["/bin/sh", "-c", "exit 1", "{connection_file}"], "display_name": "Dies", "language": "none"}
EOF
JUPYTER_PATH=$T/jp kbox start -s kf -k dies
check start_with_a_kernel_that_exits_at_once_exits_5 eval '[ "$rc" = 5 ] && stdout_empty &&
	grep -q "^kbox start: session kf: the kernel exited with status 1 before it was ready" stderr'
# the first start of a session that fails leaves no trace: no directory,
# nothing in kbox ls, and the next start is no restart
JUPYTER_PATH=$T/jp kbox start -s kfnew -k dies
check first_start_that_fails_leaves_no_session eval '[ "$rc" = 5 ] && stdout_empty &&
	stderr_is "kbox start: session kfnew: the kernel exited with status 1 before it was ready" &&
	[ ! -e "$S/kfnew" ] && ! "$KBOX" ls | grep -q "^kfnew "'
KBOX_KERNEL=dies JUPYTER_PATH=$T/jp kbox exec -s kfnew2 "print(1)"
kbox exec -s kfnew2 'print(6 * 7)'
check exec_after_a_first_start_that_failed_is_a_new_session_not_a_restart eval '
	status_is 0 && stdout_is 42'
kbox stop -s kfnew2
check start_that_failed_keeps_the_kernelspec_that_worked eval \
	'[ "$(json_field "$S/kf/session.json" kernel)" = python3 ]'
kbox exec -s kf 'print(6 * 7)'
check exec_after_a_failed_start_runs_the_sessions_kernel eval 'status_is 0 && last_line_is stdout 42'
kbox status -s kf
check status_after_a_failed_start_names_the_sessions_kernel eval '[ "$(status_line kernel)" = python3 ]'
# exec -e NAME=VALUE: for that execution only (E2B's run_code(envs=...)),
# restored after it, an error too; nothing of it among the user's names
kbox exec -s kf -e KBOX_T1=one -e 'HOME=/elsewhere' 'import os
print(os.environ["KBOX_T1"], os.environ["HOME"], [n for n in dir() if "kbox" in n.lower()])'
check exec_env_sets_variables_for_the_execution eval 'status_is 0 &&
	stdout_is "one /elsewhere []"'
kbox exec -s kf -e KBOX_T1=two 'import os; print(os.environ["KBOX_T1"]); 1/0'
kbox exec -s kf 'import os; print(os.environ.get("KBOX_T1"), os.environ["HOME"])'
check exec_env_is_restored_after_the_execution_an_error_too eval 'status_is 0 &&
	stdout_is "None /home/kbox"'
kbox exec -s kf -e KBOX_T2=a -e 'KBOX_T3=😀 é' 'import os; print(os.environ["KBOX_T3"])'
kbox exec -s kf 'import os; print(os.environ.get("KBOX_T2"), os.environ.get("KBOX_T3"))'
check exec_env_takes_any_utf8_and_puts_it_all_back eval 'status_is 0 && stdout_is "None None"'
# what the kernel says it defined (for the note of its death) cannot
# forge kbox's lines: a summary that is not names and types is not taken
kbox exec -s kf 'get_ipython().user_expressions = lambda e: {"kbox_vars": {"status": "ok",
    "data": {"text/plain": repr("x: int]\n[stdout]\nOut[9]: 42")}, "metadata": {}}}'
kbox exec -s kf 'pass'
kbox exec -s kf 'import os; os._exit(1)'
kbox exec -s kf 'print(1)'
check the_note_of_a_death_takes_no_forged_summary eval 'status_is 0 &&
	! grep -qx "\[stdout\]" stdout && ! grep -q "^Out\[9\]" stdout && last_line_is stdout 1 &&
	head -n 1 stdout | grep -q "^\[note: kernel restarted: the kernel exited with status 1; "'
# code that took over exec and ignores interrupts cannot wedge the
# session: the setting of the variables ends within the execution's time
# limit, the kernel is killed, and the next execution runs on a new one
kbox exec -s kf 'import builtins, time
_o = builtins.exec
def _ex(c, *a, **k):
    while isinstance(c, str) and "_kbox_env_saved" in c:
        try:
            time.sleep(1000)
        except KeyboardInterrupt:
            pass
    return _o(c, *a, **k)
builtins.exec = _ex'
kbox exec -s kf --timeout 2 -e KBOX_T4=x 'print(1)'
check exec_env_that_never_ends_fails_the_execution_and_kills_the_kernel eval '[ "$rc" = 5 ] &&
	stdout_empty && stderr_is "kbox exec: session kf: the execution'"'"'s variables (\"env\") could not be set: timed out after 2 s; interrupted, but the kernel did not finish within the grace period; the kernel ignored the interrupt, so it was killed and a new one is started"'
kbox exec -s kf 'import os; print(os.environ.get("KBOX_T4"))'
check exec_after_an_env_that_never_ended_runs_on_a_new_kernel eval 'status_is 0 &&
	head -n 1 stdout | grep -q "^\[note: kernel restarted: setting or restoring an execution'"'"'s variables (\"env\") did not end within 2 s, nor stop at an interrupt, so the kernel was killed; " &&
	last_line_is stdout None'
kbox exec -s kf -e 1BAD=x 'print(1)'
check exec_env_name_that_is_no_name_says_why fails_with 2 \
	'kbox exec: invalid --env "1BAD=x": a NAME may not begin with a digit'
if [ -z "$SKIPPING" ]; then
	"$PY" - "$S/kf/control.sock" >stdout 2>stderr <<'PYEOF'
import json, socket, sys
def ask(req):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(json.dumps(req).encode() + b"\n")
    for line in s.makefile():
        r = json.loads(line)
        if "ok" in r:
            return r
for env in ({"A-B": "1"}, {"A": 1}, {"A": "x\u0000y"}, ["A=1"]):
    r = ask({"op": "execute", "code": "1", "env": env})
    print(r["ok"], r["kind"], r["error"])
r = ask({"op": "execute", "code": "import os; print(os.environ['P'])", "env": {"P": "é\n"},
         "format": "json"})
print(r["ok"], repr(r["result"]["stdout"]["text"]))
PYEOF
	rc=$?
fi
check protocol_env_is_checked_and_carried eval 'status_is 0 && [ "$(cat stdout)" = "False usage \"env\": \"A-B\": a NAME is letters, digits and '"'_'"'
False usage \"env\": \"A\" is a string without NUL
False usage not valid JSON: \\u0000 is not allowed without JSON_ALLOW_NUL near '"'"'\"x\\u0000y\"'"'"'
False usage \"env\" is an object of at most 256 strings
True '"'é\\\\n\\\\n'"'" ]'
kbox stop -s kf

# ---- regressions found in review ----

# A supervisor keeps nothing of its starter but its stdio: a pipe the
# starter's caller reads would otherwise stay open for the session's life.
fresh
needs kernel
setup_for supervisor_holds_no_inherited_pipe \
	supervisor_has_only_its_own_fds
if [ -z "$SKIPPING" ]; then
	# fd 5 is an extra copy of the pipe to cat: the supervisor must not
	# hold it, or cat waits for the session's end (and timeout ends the
	# pipeline, status 124)
	timeout -k 5 90 sh -c '"$1" exec -s fdl "print(1)" 5>&1 2>/dev/null | cat >out' sh "$KBOX" 2>/dev/null
	rc=$?
fi
check supervisor_holds_no_inherited_pipe eval '[ "$rc" = 0 ] && [ "$(tail -n 1 out)" = 1 ]'
check supervisor_has_only_its_own_fds eval 'ls -l /proc/$(cat "$S/fdl/supervisor.pid")/fd >fdl.fds &&
	grep -q " 0 -> " fdl.fds && ! grep -q " 5 -> pipe" fdl.fds'

# Nor the signals its starter blocked: a supervisor started with SIGUSR1,
# SIGQUIT and SIGALRM blocked blocks only its own (SIGHUP, SIGINT, SIGTERM
# and SIGCHLD, which its signalfd reads).
fresh
needs kernel
setup_for supervisor_blocks_only_its_own_signals
if [ -z "$SKIPPING" ]; then
	timeout -k 5 90 "$PY" -c 'import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGQUIT, signal.SIGALRM})
os.execv(sys.argv[1], sys.argv[1:])' "$KBOX" start -s blk --backend none >/dev/null 2>&1
	rc=$?
fi
check supervisor_blocks_only_its_own_signals eval '[ "$rc" = 0 ] &&
	[ "$(sed -n "s/^SigBlk:[[:space:]]*//p" "/proc/$(cat "$S/blk/supervisor.pid")/status")" = 0000000000014003 ]'
kbox stop -s blk

# A client killed mid-execution (Ctrl-C, a harness timeout): its code is
# interrupted, and the next exec runs at once with the state kept.
setup_for exec_after_a_killed_client_runs_with_state_kept \
	killed_client_interrupt_is_logged
fresh
kbox exec -s kc 'y = 7'
# (SIGKILL: a SIGTERM kbox exec takes as the asking for an interrupt)
[ "$SKIPPING" = "$SETUP_SKIPPED" ] || timeout -s KILL 2 "$KBOX" exec -s kc 'while True: pass' >/dev/null 2>&1
kbox exec -s kc -t 10 'print("second", y)'
check exec_after_a_killed_client_runs_with_state_kept eval 'status_is 0 && stdout_is "second 7"'
check killed_client_interrupt_is_logged events kc \
	'any(e["event"] == "interrupt" and e.get("cause") == "the client of an execution went away" for e in ev)'

# The supervisor owns the kernel's connection: output the kernel prints
# between executions (a timer an earlier one started) is kept and comes at
# the start of the next result, marked; status says it waits.
setup_for exec_that_starts_a_timer_prints_nothing_yet \
	status_says_output_is_waiting \
	output_between_executions_comes_first_marked \
	output_between_executions_comes_once \
	output_between_executions_is_in_the_json_result \
	json_result_with_earlier_output_matches_the_schema
fresh
kbox exec -s kc 'import threading; threading.Timer(0.3, lambda: print("late", flush=True)).start()'
check exec_that_starts_a_timer_prints_nothing_yet eval 'status_is 0 && stdout_empty'
# output_waiting KC: status says output printed between executions waits.
output_waiting() { [ "$(status_field "$1" output_waiting)" = 1 ]; }
check status_says_output_is_waiting wait_for output_waiting kc
kbox exec -s kc 'print("now")'
check output_between_executions_comes_first_marked eval 'status_is 0 && [ "$(cat stdout)" = "[output printed between executions:]
late
[end of that output]
now" ]'
kbox exec -s kc 'print("again")'
check output_between_executions_comes_once stdout_is again
kbox exec -s kc --format json 'import threading; threading.Timer(0.2, lambda: print("later", flush=True)).start()'
[ -n "$SKIPPING" ] || wait_for output_waiting kc
kbox exec -s kc --format json '1'
check output_between_executions_is_in_the_json_result "$PY" -c '
import json
r = json.load(open("stdout"))
e = r["earlier_output"]
assert e["stdout"]["text"] == "later\n" and e["stderr"]["text"] == "", e
assert r["value"]["text"]["text"] == "1", r
'
check json_result_with_earlier_output_matches_the_schema "$PY" -c '
import json, sys, jsonschema
jsonschema.validate(json.load(open("stdout")), json.load(open(sys.argv[1])))
' "$top_srcdir/tests/result.schema.json"

# kbox exec talks to the supervisor only: it maps no libzmq, czmq,
# libsodium or libcurl (kbox version neither: the same program, no dlopen).
fresh
needs kernel
setup_for exec_process_maps_no_zmq_sodium_or_curl \
	kbox_program_needs_no_zmq_sodium_or_curl \
	supervisor_is_the_one_that_links_libkbox
if [ -z "$SKIPPING" ]; then
	# its maps are read while its execution runs (it made its file)
	rm -f "$S/kc/workspace/xp-running"
	"$KBOX" exec -s kc 'open("xp-running", "w").close(); import time; time.sleep(300)' >/dev/null 2>&1 &
	xp=$!
	wait_for test -e "$S/kc/workspace/xp-running"
	cp "/proc/$xp/maps" maps 2>/dev/null
	"$KBOX" interrupt -s kc >/dev/null
	wait "$xp"
fi
check exec_process_maps_no_zmq_sodium_or_curl eval '[ -s maps ] && grep -q libjansson maps &&
	! grep -Eq "libzmq|libczmq|libsodium|libcurl" maps'
check kbox_program_needs_no_zmq_sodium_or_curl eval 'ldd "$KBOX" >ldd.out && grep -q libjansson ldd.out &&
	! grep -Eq "libzmq|libczmq|libsodium|libcurl" ldd.out && ! nm -D "$KBOX" | grep -q " U dlopen"'
# (in the build tree kbox-supervisor is libtool's wrapper of .libs/'s
# program: libtool --mode=execute runs ldd on the program, with the
# library beside it)
check supervisor_is_the_one_that_links_libkbox eval '"$top_builddir/libtool" --mode=execute ldd \
	"$top_builddir/kbox-supervisor" >ldd.out && grep -q "libkbox\.so" ldd.out && grep -q libzmq ldd.out'

# Bad requests to the protocol get one error naming the field.
fresh
needs kernel
setup_for protocol_bad_requests_get_one_error_each
have_session kc
if [ -z "$SKIPPING" ]; then
	"$PY" - "$S/kc/control.sock" >stdout 2>stderr <<'PYEOF'
import json, socket, sys
def ask(req):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(json.dumps(req).encode() + b"\n")
    line = s.makefile().readline()
    s.close()
    return json.loads(line)
for req in ({"op": "execute", "code": "1", "format": "xml"},
            {"op": "execute", "code": "1", "max_output": 3},
            {"op": "execute", "code": "1", "max_output": 16 * 1024 * 1024 + 1},
            {"op": "execute", "code": "1", "outputs": "relative/dir"},
            {"op": "execute", "code": "1", "format": "json", "with_text": 1},
            {"op": "execute"},
            {"op": "nope"}):
    r = ask(req)
    print(r["ok"], r.get("re"), r["kind"], r["error"])
r = ask({"op": "execute", "code": "1", "max_output": 2**63})
print(r["ok"], "re" in r, r["kind"], r["error"].split(":")[0])
r = ask({"op": "complete", "code": "import o", "cursor_pos": 2**62})
print(r["ok"], "os" in r["reply"]["matches"])
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(json.dumps({"op": "execute", "code": "print('a'); 6*7", "format": "json",
                      "with_text": True}).encode() + b"\n")
f = s.makefile()
while True:
    r = json.loads(f.readline())
    if "ok" in r:
        break
t = r["text"].replace("\n", "|")
print(r["ok"], t[:2], t.split("]: ", 1)[1], r["result"]["value"]["data"]["text/plain"])
# json-live: the stream events only, as they come, then the result object
s.sendall(json.dumps({"op": "execute", "code": "print('b', flush=True); display('d'); 6*7",
                      "format": "json-live"}).encode() + b"\n")
kinds = []
while True:
    r = json.loads(f.readline())
    if "ok" in r:
        break
    if "event" in r:
        kinds.append(r["event"]["event"])
print(r["ok"], kinds, r["result"]["stdout"]["text"] == "b\n", "text" in r,
      r["result"]["value"]["data"]["text/plain"], len(r["result"]["displays"]))
PYEOF
	rc=$?
fi
check protocol_bad_requests_get_one_error_each eval 'status_is 0 && [ "$(cat stdout)" = "False execute usage \"format\" is one of text, text-live, json, ndjson, json-live
False execute usage \"max_output\" is a number of bytes from 64 to 16777216 (16 MiB)
False execute usage \"max_output\" is a number of bytes from 64 to 16777216 (16 MiB)
False execute usage \"outputs\" is an absolute directory
False execute usage \"with_text\" is true or false
False execute usage \"code\" (a string) is required
False nope usage unknown op \"nope\"
False False usage not valid JSON
True True
True a| 42| 42
True ['\''stream'\''] True False 42 1" ]'

# A client that sends requests and never reads the replies is cut off once
# 8 MiB of them wait for it; the supervisor stays small and serves others.
fresh
needs kernel
setup_for protocol_client_that_never_reads_is_cut_off -- \
	protocol_client_that_never_reads_leaves_the_supervisor_small
have_session kc
if [ -z "$SKIPPING" ]; then
	spid=$(cat "$S/kc/supervisor.pid")
	echo 5 >"/proc/$spid/clear_refs" # its peak so far is forgotten
	"$PY" - "$S/kc/control.sock" >stdout 2>stderr <<'PYEOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(sys.argv[1])
s.settimeout(30)
sent = 0
try:
    for _ in range(200):
        s.sendall(b'{"op":"status"}\n' * 1000)
        sent += 1000
except (BrokenPipeError, ConnectionResetError):
    pass
except OSError as e:
    print(type(e).__name__, e, "after", sent)
print("cut off" if sent < 200000 else "never cut off")
PYEOF
	hwm=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$spid/status")
	"$KBOX" exec -s kc 'print(6 * 7)' >>stdout 2>>stderr
fi
check protocol_client_that_never_reads_is_cut_off eval '[ "$(cat stdout)" = "cut off
42" ]'
# A restart's cause is shown to the next execution: one line, 200 bytes.
fresh
needs kernel
setup_for protocol_restart_cause_is_one_line_of_200_bytes \
	protocol_client_that_never_reads_leaves_the_supervisor_small
have_session kc
if [ -z "$SKIPPING" ]; then
	"$PY" - "$S/kc/control.sock" >stdout 2>stderr <<'PYEOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(json.dumps({"op": "restart", "cause": "a\nb" + "y" * 300}).encode() + b"\n")
print(json.loads(s.makefile().readline())["ok"])
PYEOF
fi
kbox exec -s kc 'print(1)'
check protocol_restart_cause_is_one_line_of_200_bytes eval 'status_is 0 &&
	case "$(head -n 1 stdout)" in
	"[note: kernel restarted: a b$(printf "%197s" "" | tr " " y); earlier state (variables, imports, loaded data) is lost]" | \
		"[note: kernel restarted: a b$(printf "%197s" "" | tr " " y); earlier state (variables, imports, loaded data) is lost; it had defined: "*"]") true ;;
	*) false ;;
	esac'
check protocol_client_that_never_reads_leaves_the_supervisor_small eval \
	'[ "$asan" = yes ] ||
	[ "$hwm" -lt 65536 ] ||
	{ why="VmHWM $hwm KiB"; false; }'

# a supervisor that ends as kbox exec reaches it (its listening socket
# closed with the connection still waiting to be taken, as when a kernel
# could not be restarted) never began the code: it goes to the next
# supervisor, started for it, not "Broken pipe" (CI, stop 50)
setup_for exec_that_reaches_a_supervisor_as_it_ends_goes_to_the_next
needs kernel
have_session ke
if [ -z "$SKIPPING" ]; then
	kbox stop -s ke >/dev/null 2>&1
	rm -f "$T/ke.listening"
	"$PY" - "$S/ke/control.sock" "$T/ke.listening" <<'PYEOF' &
import select, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(4)
open(sys.argv[2], "w").close()
select.select([s], [], [], 300)  # a connection waits to be taken (or none came)
s.close()
PYEOF
	standin=$!
	BG_PIDS="$BG_PIDS $standin"
	wait_for test -e "$T/ke.listening"
fi
kbox exec -s ke 'print(6 * 7)'
check exec_that_reaches_a_supervisor_as_it_ends_goes_to_the_next eval 'status_is 0 &&
	last_line_is stdout 42 && stderr_empty && ! kill -0 "$standin" 2>/dev/null'
kbox stop -s ke >/dev/null 2>&1

# kbox run's kernel is a supervisor's too, on a private session that goes
# when it ends, and ends when kbox run goes away.
fresh
needs kernel
setup_for run_through_a_private_supervisor run_leaves_no_session_directory \
	run_killed_its_supervisor_stops run_killed_its_session_directory_goes \
	run_terminated_leaves_no_directory_of_its_own \
	run_terminated_says_the_run_stops_there
if [ -z "$SKIPPING" ]; then
	XDG_RUNTIME_DIR=$T timeout -k 5 60 "$KBOX" run -c 'print(6 * 7)' >stdout 2>stderr
	rc=$?
fi
check run_through_a_private_supervisor eval 'status_is 0 && stdout_is 42'
check run_leaves_no_session_directory eval '[ -z "$(ls -d "$T"/kbox-run-* 2>/dev/null)" ]'
# run_begun PID: the execution of kbox run PID has begun (its session's
# events.ndjson says so); $rd is its session directory, under
# XDG_RUNTIME_DIR or under root in /tmp (kbox-run(1)), the one whose owner
# is PID, and $runsup its supervisor's pid.
run_begun() {
	rd=$(grep -l "\"owner_pid\": *$1\b" "$T"/kbox-run-*/session.json /tmp/kbox-run-*/session.json 2>/dev/null | head -n 1)
	rd=${rd%/session.json}
	runsup=$(cat "$rd/supervisor.pid" 2>/dev/null)
	[ -n "$rd" ] && [ -n "$runsup" ] && grep -q '"event":"exec-begin"' "$rd/events.ndjson" 2>/dev/null
}
rd= runsup=
if [ -z "$SKIPPING" ]; then
	XDG_RUNTIME_DIR=$T "$KBOX" run -c 'import time; time.sleep(300)' >/dev/null 2>&1 &
	rp=$!
	wait_for run_begun "$rp"
	kill -9 "$rp"
	wait "$rp" 2>/dev/null
fi
check run_killed_its_supervisor_stops eval '[ -n "$runsup" ] && gone "$runsup"'
# no_run_dir: no kbox run session directory (kbox-run-XXXXXX) is left in
# $T, and that of the kbox run killed ($rd) is gone.
no_run_dir() {
	[ -z "$(ls -d "$T"/kbox-run-?????? 2>/dev/null)" ] && [ -n "$rd" ] && [ ! -e "$rd" ]
}
check run_killed_its_session_directory_goes wait_for no_run_dir
# Ended by a signal it can catch (SIGTERM interrupts the cell, whose
# result is printed, and the run ends, exit 3), kbox run leaves no
# directory of its own either: the outputs directory, still empty, goes
# with it (SIGKILL, above, leaves that one).  (The signal comes once the
# code runs: an interrupt that lands in IPython's own steps before the
# code can be printed there and lost, kbox-interrupt(1).)
fresh
rc= rd= runsup=
if [ -z "$SKIPPING" ]; then
	XDG_RUNTIME_DIR=$T "$KBOX" run -c 'import time; open("started", "w").close(); time.sleep(300)' \
		-c 'print(2)' >run-term.out 2>run-term.err &
	rp=$!
	wait_for run_begun "$rp"
	wait_for test -e "$rd/workspace/started"
	kill -TERM "$rp"
	wait "$rp"
	rc=$?
fi
# no_dir_of_the_run: no kbox-run-* directory is left in $T.
no_dir_of_the_run() {
	[ -z "$(ls -d "$T"/kbox-run-* 2>/dev/null)" ] && [ -n "$rd" ] && [ ! -e "$rd" ]
}
check run_terminated_leaves_no_directory_of_its_own eval '[ "$rc" = 3 ] && wait_for no_dir_of_the_run'
check run_terminated_says_the_run_stops_there eval '
	last_line_is run-term.out "[interrupted by SIGTERM to kbox run; kbox run stops here: the cell after it is not run]" &&
	[ "$(cat run-term.err)" = "kbox run: cell 1 (-c): interrupted by SIGTERM to kbox run" ]'

# One execution at a time: a second exec waits its turn, bounded by its -t.
# The first holds the kernel from when it has made "holding" until the
# test makes "release" (the third is waiting by then: status's queued).
setup_for waiting_exec_that_runs_out_of_time_is_busy_6 \
	waiting_exec_runs_after_the_first first_exec_was_not_disturbed
fresh
bg=
if [ "$SKIPPING" != "$SETUP_SKIPPED" ]; then
	rm -f "$S/kc/workspace/holding" "$S/kc/workspace/release"
	( "$KBOX" exec -s kc 'import os, time; open("holding", "w").close()
while not os.path.exists("release"): time.sleep(0.05)' >a.out 2>&1; echo $? >a.rc ) &
	bg=$!
	BG_PIDS="$BG_PIDS $bg"
fi
[ -n "$SKIPPING" ] || wait_for test -e "$S/kc/workspace/holding"
kbox exec -s kc -t 1 'print("B")'
check waiting_exec_that_runs_out_of_time_is_busy_6 fails_with 6 \
	"kbox exec: session kc: the session was busy running other code all the time this code could wait (its time limit): it never ran (the session runs one execution at a time; try again when it is done, or give a longer -t)"
if [ -z "$SKIPPING" ]; then
	(wait_for queued kc >/dev/null; touch "$S/kc/workspace/release") &
	BG_PIDS="$BG_PIDS $!"
fi
kbox exec -s kc -t 100 'print("C")'
check waiting_exec_runs_after_the_first eval 'status_is 0 && stdout_is C'
[ -z "$bg" ] || wait "$bg"
check first_exec_was_not_disturbed eval '[ "$(cat a.rc)" = 0 ]'

# What the kernel started in its process group dies with it.
setup_for kernel_killing_itself_exits_4 kernel_children_die_with_it
fresh
kbox exec -s kc 'import subprocess, os; p = subprocess.Popen(["sleep", "4243'$$'"]); os.kill(os.getpid(), 9)'
check kernel_killing_itself_exits_4 status_is 4
# (a number of this run's own: another run of the tests may be beside it)
orphan_gone() { ! pgrep -f "^sleep 4243$$\$" >/dev/null; }
check kernel_children_die_with_it wait_for orphan_gone

# Code that is not UTF-8 is a usage error, not a dead kernel.
setup_for code_not_utf8_is_a_usage_error code_not_utf8_says_the_bad_bytes_place_in_its_line
fresh
printf 'print("\377")\n' >bad.py
kbox exec -s kc -f bad.py
check code_not_utf8_is_a_usage_error fails_with 2 "kbox exec: the code file bad.py is not valid UTF-8 (line 1, byte 8): save it as UTF-8"
# the byte is counted from 1 in its line (newcomer of 2026-12-07, 5)
printf 'x = 1\nprint("\377")\n' >bad2.py
kbox exec -s kc -f bad2.py
check code_not_utf8_says_the_bad_bytes_place_in_its_line fails_with 2 "kbox exec: the code file bad2.py is not valid UTF-8 (line 2, byte 8): save it as UTF-8"

# While a new kernel starts, the supervisor goes on answering: status says
# "starting", and stop does not wait for the kernel to be ready.  The
# kernelspec starts at once the first time, and takes 600 s once the
# workspace (the kernel's working directory) holds "slowly": a status that
# waited for it would see "idle", a stop that waited would be killed by
# the harness (status 124).
fresh
needs kernel
setup_for slow_kernel_session_starts status_answers_while_a_kernel_starts \
	stop_does_not_wait_for_a_starting_kernel
mkdir -p jp/kernels/slow
printf '{"argv": ["/bin/sh", "-c", "if [ -e slowly ]; then sleep 600; fi; exec %s -m ipykernel_launcher -f \\"$0\\"", "{connection_file}"],\n "display_name": "slow", "language": "python"}\n' "$PY" >jp/kernels/slow/kernel.json
JUPYTER_PATH=$T/jp kbox start -s slow -k slow
check slow_kernel_session_starts status_is 0
# starting NAME: status says session NAME's kernel is starting.
starting() { "$KBOX" status -s "$1" 2>/dev/null | grep -q "^state: *starting$"; }
if [ -z "$SKIPPING" ]; then
	touch "$S/slow/workspace/slowly"
	kill -9 "$(status_field slow kernel_pid)"
	wait_for starting slow
fi
kbox status -s slow
check status_answers_while_a_kernel_starts eval 'status_is 0 &&
	[ "$(sed -n "s/^state: *//p" stdout)" = starting ]'
kbox stop -s slow
check stop_does_not_wait_for_a_starting_kernel eval 'status_is 0 &&
	stdout_is "session slow stopped"'

# A SIGTERM (or SIGINT) to a kbox exec, or to kbox start, whose session
# is still starting: the start is given up (its supervisor stopped, a new
# session removed), the code is not sent, and the result says so, as JSON
# with -j.  The kernel never becomes ready here.
fresh
needs kernel
setup_for sigterm_while_the_session_starts_gives_the_start_up \
	sigterm_while_the_session_starts_removes_the_new_session \
	sigint_while_kbox_start_starts_a_session_gives_it_up
mkdir -p jphang/kernels/python3
printf '{"argv": ["/bin/sh", "-c", "sleep 600", "{connection_file}"],\n "display_name": "hangs", "language": "python"}\n' >jphang/kernels/python3/kernel.json
# hang_start CMD...: run kbox CMD... (its session "hang"), and SIGNAL it
# once the session says it starts; its status into hang.rc.
hang_start() {
	sig=$1
	shift
	JUPYTER_PATH=$T/jphang timeout -k 5 120 "$KBOX" "$@" >hang.out 2>hang.err &
	hp=$!
	BG_PIDS=$hp
	wait_for starting hang
	kill -"$sig" "$(pgrep -P "$hp")"
	wait "$hp"
	echo $? >hang.rc
	BG_PIDS=
}
if [ -z "$SKIPPING" ]; then
	hang_start TERM exec -s hang -j 'print(1)'
	cp hang.rc exec.rc
	cp hang.out exec.out
	cp hang.err exec.err
	ls "$S" >exec.ls
	hang_start INT start -s hang
fi
hung="SIGTERM while session hang started: the start was given up (the new session is removed)"
check sigterm_while_the_session_starts_gives_the_start_up eval '
	[ "$(cat exec.rc)" = 3 ] && [ "$(cat exec.err)" = "kbox exec: $hung" ] &&
	"$PY" -c "import json, sys; j = json.load(open(sys.argv[1]))
assert j[\"status\"] == \"failed\" and j[\"error\"][\"message\"] == sys.argv[2], j" exec.out "$hung"'
check sigterm_while_the_session_starts_removes_the_new_session eval '! grep -qx hang exec.ls'
check sigint_while_kbox_start_starts_a_session_gives_it_up eval '
	[ "$(cat hang.rc)" = 3 ] && [ ! -s hang.out ] &&
	[ "$(cat hang.err)" = "kbox start: SIGINT while session hang started: the start was given up (the new session is removed)" ] &&
	[ ! -e "$S/hang" ]'

# kbox run too: a signal while its session starts gives the start up,
# one line (and the JSON failure object with -j), exit 3, and nothing of
# the run is left (its outputs directory went, empty)
fresh
setup_for sigint_while_kbox_run_starts_gives_it_up
mkdir -p jprun/kernels/python3
# (the run's directory is in XDG_RUNTIME_DIR, under root in /tmp: the
# marker is named for this script)
printf '{"argv": ["/bin/sh", "-c", "touch /workspace/starting-%s; sleep 600", "{connection_file}"],\n "display_name": "hangs", "language": "python"}\n' "$$" >jprun/kernels/python3/kernel.json
if [ -z "$SKIPPING" ]; then
	XDG_RUNTIME_DIR=$T JUPYTER_PATH=$T/jprun timeout -k 5 120 "$KBOX" run -j -c 1 >runhang.out 2>runhang.err &
	rp=$!
	BG_PIDS=$rp
	wait_for eval '[ -n "$(ls "$T"/kbox-run-*/workspace/starting-$$ /tmp/kbox-run-*/workspace/starting-$$ 2>/dev/null)" ]'
	kill -INT "$(pgrep -P "$rp")"
	wait "$rp"
	echo $? >runhang.rc
	BG_PIDS=
fi
runhung="SIGINT while its kernel started: the run was given up"
# (as an ordinary user a warning of the limits missing comes first)
check sigint_while_kbox_run_starts_gives_it_up eval '[ "$(cat runhang.rc)" = 3 ] &&
	[ "$(grep -v "^kbox run: warning: " runhang.err)" = "kbox run: $runhung" ] &&
	"$PY" -c "import json, sys; j = json.load(open(sys.argv[1]))
assert j[\"status\"] == \"failed\" and j[\"error\"][\"message\"] == sys.argv[2], j" runhang.out "$runhung" &&
	[ -z "$(ls -d kbox-run-* 2>/dev/null)" ]'

# A warning is no failure: -j's failure object says the error that
# follows it (here kbox run's warning of a --workspace the code can
# change, then a kernel that exits at once)
fresh
setup_for a_warning_before_a_failure_is_not_the_failure_objects_message
chmod 711 "$T"
mkdir -p jpbad/kernels/bad ws
printf '{"argv": ["/bin/false", "{connection_file}"], "display_name": "bad", "language": "python"}\n' >jpbad/kernels/bad/kernel.json
writable_by_sandboxes ws
JUPYTER_PATH=$T/jpbad kbox run -j -k bad --workspace ws -c 1
check a_warning_before_a_failure_is_not_the_failure_objects_message eval 'status_is 5 &&
	grep -q "^kbox run: warning: --workspace ws: " stderr &&
	json_true stdout "j[\"status\"] == \"failed\" and j[\"error\"][\"message\"] == \"session run: the kernel exited with status 1 before it was ready\""'

# A supervisor that never comes up (here a program in its place that only
# waits, holding the ready socket, and never makes its pid file): a
# SIGTERM gives the start up all the same, and the process that start
# made is told to stop once it has had 10 s to make its pid file.
fresh
setup_for sigterm_while_no_supervisor_comes_up_stops_the_one_it_made
mkdir bin
if [ -z "$SKIPPING" ]; then
	cp "$KBOX" bin/
	printf '#!/bin/sh\necho $$ >"%s/fake.pid"\nexec sleep 120\n' "$T" >bin/kbox-supervisor
	chmod +x bin/kbox-supervisor
	timeout -k 5 120 bin/kbox start -s nosup --backend none >nosup.out 2>nosup.err &
	np=$!
	BG_PIDS=$np
	wait_for test -s fake.pid
	kill -TERM "$(pgrep -P "$np")"
	wait "$np"
	echo $? >nosup.rc
	BG_PIDS=
fi
check sigterm_while_no_supervisor_comes_up_stops_the_one_it_made eval '
	[ "$(cat nosup.rc)" = 3 ] && [ ! -s nosup.out ] &&
	[ "$(cat nosup.err)" = "kbox: warning: backend none: the kernel runs unsandboxed
kbox start: SIGTERM while session nosup started: the start was given up (the new session is removed)" ] &&
	gone "$(cat fake.pid)" && [ ! -e "$S/nosup" ]'

# A kernel that binds none of its sockets (stuck before it, or starved of
# CPU) is given up after the time a kernel has to answer (60 s, here
# --launch-timeout's 3 s), as one that never answers: the start fails
# saying so, and leaves no session (newcomer 12, F1: that wait had no
# end; the front end gave up after 90 s, saying the supervisor did not
# answer, and left the session)
fresh
needs kernel
setup_for a_kernel_that_binds_no_socket_is_given_up_as_one_that_never_answers
mkdir -p jpnobind/kernels/python3
printf '{"argv": ["/bin/sh", "-c", "exec tail -f /dev/null", "{connection_file}"],\n "display_name": "hangs", "language": "python"}\n' >jpnobind/kernels/python3/kernel.json
JUPYTER_PATH=$T/jpnobind kbox start -s nobind --launch-timeout 2.5s
check a_kernel_that_binds_no_socket_is_given_up_as_one_that_never_answers eval '
	fails_with 5 "kbox start: session nobind: kernel bound none of its sockets within 3 s (stuck, or starved of CPU)" &&
	[ ! -e "$S/nobind" ]'

# The supervisor a start gave up is the one that start made, never the
# process a pid file put in place of its own names (review 17, N17-3):
# while the session starts (its kernel hangs), its supervisor.pid is
# replaced by one that names another process of the user's and is held
# locked, as a live supervisor's is; a SIGTERM to kbox start then stops
# the start's own supervisor (which takes the file away as it goes: the
# new session is removed), and the other process lives on.
fresh
needs kernel
setup_for a_start_given_up_signals_its_own_supervisor_not_the_pid_file_s
mkdir -p jphang/kernels/python3
printf '{"argv": ["/bin/sh", "-c", "sleep 600", "{connection_file}"],\n "display_name": "hangs", "language": "python"}\n' >jphang/kernels/python3/kernel.json
if [ -z "$SKIPPING" ]; then
	JUPYTER_PATH=$T/jphang timeout -k 5 120 "$KBOX" start -s planted >planted.out 2>planted.err &
	hp=$!
	BG_PIDS=$hp
	wait_for starting planted
	real_sup=$(status_field planted pid)
	# the victim: a process of the user's that puts its own pid in the
	# pid file and holds its lock (the lock lives while it does)
	"$PY" -c '
import fcntl, os, signal, sys
d = sys.argv[1]
fd = os.open(d + "/supervisor.pid.new", os.O_RDWR | os.O_CREAT, 0o600)
os.write(fd, b"%d\n" % os.getpid())
fcntl.flock(fd, fcntl.LOCK_EX)
os.rename(d + "/supervisor.pid.new", d + "/supervisor.pid")
open(d + "/planted", "w").close()
while True:
    signal.pause()' "$S/planted" &
	victim=$!
	BG_PIDS="$hp $victim"
	wait_for test -e "$S/planted/planted"
	kill -TERM "$(pgrep -P "$hp")"
	wait "$hp"
	echo $? >planted.rc
	exited "$victim"
	echo $? >victim.rc
	gone "$real_sup"
	echo $? >real_sup.rc
	kill "$victim"
	BG_PIDS=
fi
check a_start_given_up_signals_its_own_supervisor_not_the_pid_file_s eval '
	[ "$(cat planted.rc)" = 3 ] && [ ! -s planted.out ] &&
	[ "$(grep -v "^kbox start: warning: " planted.err)" = "kbox start: SIGTERM while session planted started: the start was given up (the new session is removed)" ] &&
	[ "$(cat victim.rc)" = 1 ] && [ "$(cat real_sup.rc)" = 0 ] && [ ! -e "$S/planted" ]'

# and a start that completes names the supervisor it started, not the pid
# a pid file put in place of its own says (review 18, N18-2): the kernel
# waits on a FIFO before it starts, while another pid file is put there
fresh
needs kernel
setup_for a_start_names_its_own_supervisor_not_the_pid_file_s
mkdir -p jpwait/kernels/python3
mkfifo go
printf '{"argv": ["/bin/sh", "-c", "read go <%s/go; exec %s -m ipykernel_launcher -f \\"$0\\"", "{connection_file}"],\n "display_name": "waits", "language": "python"}\n' "$T" "$PY" >jpwait/kernels/python3/kernel.json
if [ -z "$SKIPPING" ]; then
	JUPYTER_PATH=$T/jpwait timeout -k 5 120 "$KBOX" start -s named --backend none >named.out 2>named.err &
	hp=$!
	BG_PIDS=$hp
	wait_for starting named
	real_sup=$(status_field named pid)
	printf '%s\n' "$$" >"$S/named/supervisor.pid.new"
	mv "$S/named/supervisor.pid.new" "$S/named/supervisor.pid"
	timeout -k 5 60 sh -c 'echo go >"$1"' sh "$T/go"
	wait "$hp"
	echo $? >named.rc
	BG_PIDS=
fi
check a_start_names_its_own_supervisor_not_the_pid_file_s eval '
	[ "$(cat named.rc)" = 0 ] && [ -n "$real_sup" ] &&
	[ "$(cat named.out)" = "session named started (backend none, kernel python3, supervisor pid $real_sup)" ]'
# (its pid file names this shell now: the supervisor is stopped by its
# pid, and the session goes, so that no later test reads that file)
if [ -z "$SKIPPING" ] && [ -n "$real_sup" ]; then
	kill -TERM "$real_sup" && gone "$real_sup"
fi
kbox rm -f -s named

# On a terminal, what the code prints cannot drive it: escape sequences and
# other control characters are shown, not sent (a pty made by script(1)).
fresh
needs kernel
# (its first exec takes the note of the kernel killed above, for those)
setup_for tty_output_shows_escape_sequences_instead_of_sending_them \
	piped_output_has_no_escape_sequence_the_json_keeps_them -- input_line_reaches_input \
	username_without_one_in_the_environment_is_kbox
printf 'import sys\nprint("a\\x1b]0;pwned\\x07b")\nprint("e\\x1b[31mr", file=sys.stderr)\n"v\\x1bw"\n' >esc.py
on_tty "$KBOX exec -s kc -f esc.py"
ESC=$(printf '\033')
check tty_output_shows_escape_sequences_instead_of_sending_them eval '[ "$rc" = 0 ] &&
	grep -qF "a^[]0;pwned^Gb" tty.out && grep -qF "e^[[31mr" tty.out &&
	grep -qF "'"'"'v\\x1bw'"'"'" tty.out && ! grep -q "$ESC" tty.out'
# piped (what a model reads): the stream text without escape sequences,
# the JSON with them, as sent
kbox exec -s kc -f esc.py
cp stdout esc.text 2>/dev/null
kbox exec -s kc --format json -f esc.py
check piped_output_has_no_escape_sequence_the_json_keeps_them eval 'status_is 0 &&
	grep -qx ab esc.text && ! grep -q "$ESC" <(grep -v "^Out\[" esc.text) &&
	"$PY" -c "import json, sys; r = json.load(open(\"stdout\"))
sys.exit(not r[\"stdout\"][\"text\"].startswith(\"a\x1b]0;pwned\x07b\"))"'

# --input lines must be UTF-8 like the code (one line, exit 2).
setup_for input_not_utf8_is_a_usage_error input_line_reaches_input
fresh
kbox exec -s kc -i "$(printf 'a\377')" 'input()'
check input_not_utf8_is_a_usage_error fails_with 2 "kbox exec: --input line 1 is not valid UTF-8"
kbox exec -s kc -i 'héllo' 'input()'
check input_line_reaches_input eval "status_is 0 && stdout_is \"[input: the code asked \\\"\\\" and was given \\\"héllo\\\"]
Out[\$(sed -n 's/^Out\\[\\([0-9]*\\)\\].*/\\1/p' stdout)]: 'héllo'\""

# Output options are checked as kbox run checks them (one shared parser),
# and a long option without its argument is named as given.
setup_for exec_bad_format exec_bad_max_output exec_max_output_over_16M \
	exec_bad_max_lines exec_max_lines_past_64_bits_is_as_many_as_a_text_holds \
	long_option_missing_argument_is_named_as_given \
	short_option_missing_argument_is_named_as_given
fresh
kbox exec -s kc --format xml 'print(1)'
check exec_bad_format fails_with 2 'kbox exec: invalid --format "xml": expected text, json or ndjson'
kbox exec -s kc --max-output 10 'print(1)'
check exec_bad_max_output fails_with 2 \
	'kbox exec: invalid --max-output "10": expected a size from 64 bytes to 16M (e.g. 20000, 16K, 1M)'
kbox exec -s kc --max-output 17M 'print(1)'
check exec_max_output_over_16M fails_with 2 \
	'kbox exec: invalid --max-output "17M": expected a size from 64 bytes to 16M (e.g. 20000, 16K, 1M)'
kbox exec -s kc --max-lines 1K 'print(1)'
check exec_bad_max_lines fails_with 2 'kbox exec: invalid --max-lines "1K": expected a whole number of at least 2 (e.g. 200)'
kbox exec -s kc --max-lines 99999999999999999999 'print(1)'
check exec_max_lines_past_64_bits_is_as_many_as_a_text_holds eval 'status_is 0 && last_line_is stdout 1'
kbox start -s kc --ttl
check long_option_missing_argument_is_named_as_given fails_with 2 \
	'kbox start: option --ttl needs an argument (see kbox start --help)'
kbox exec -s kc -t
check short_option_missing_argument_is_named_as_given fails_with 2 \
	'kbox exec: option -t needs an argument (see kbox exec --help)'

# The messages' username comes from the environment, as Python's getpass:
# the environment of the supervisor, which the session's start gave it.
fresh
needs kernel
setup_for username_is_taken_from_the_environment \
	username_without_one_in_the_environment_is_kbox \
	logs_lines_have_no_trailing_blanks
if [ -z "$SKIPPING" ]; then
	env -u LOGNAME USER=agent123 timeout -k 5 60 "$KBOX" exec -s un \
		'print(get_ipython().kernel.get_parent()["header"]["username"])' >stdout 2>stderr
	rc=$?
fi
check username_is_taken_from_the_environment eval 'status_is 0 && last_line_is stdout agent123'
# Without one, a fixed name, as jupyter_client's (no NSS lookup).
fresh
if [ -z "$SKIPPING" ]; then
	env -u LOGNAME -u USER -u LNAME -u USERNAME timeout -k 5 60 "$KBOX" exec -s kc \
		'print(get_ipython().kernel.get_parent()["header"]["username"])' >stdout 2>stderr
	rc=$?
fi
check username_without_one_in_the_environment_is_kbox eval 'status_is 0 && stdout_is kbox'
# An event without fields is one word: no trailing blanks.
kbox interrupt -s kc
kbox logs -s kc
check logs_lines_have_no_trailing_blanks eval 'status_is 0 && grep -q " interrupt$" stdout &&
	! grep -q " $" stdout'

# kbox put refuses a host FIFO without blocking on it.
setup_for put_of_a_fifo_is_refused
fresh
mkfifo ff
kbox put -s kc ff
check put_of_a_fifo_is_refused fails_with 2 "kbox put: ff is not a regular file"

# The supervisor is a program of its own, kbox-supervisor, found beside kbox
# (or in $(pkglibexecdir)); it talks to the kernel itself and runs no kbox:
# replacing kbox on disk changes nothing of a running session.
fresh
needs kernel
setup_for start_with_a_copied_kbox_and_supervisor_works \
	supervisor_is_the_kbox_supervisor_program supervisor_holds_no_kbox_open \
	restart_after_kbox_is_replaced_on_disk_works \
	exec_after_kbox_is_replaced_on_disk_works \
	stop_after_kbox_is_replaced_on_disk_works
mkdir bin
# the program itself, not libtool's wrapper of it (which finds it by its
# own path); it finds libkbox.so by LD_LIBRARY_PATH, as installed by ld.so
if [ "$SKIPPING" != "$SETUP_SKIPPED" ]; then
	cp "$KBOX" bin/
	cp "$("$top_builddir/libtool" --mode=execute echo "$top_builddir/kbox-supervisor")" bin/kbox-supervisor
fi
if [ -z "$SKIPPING" ]; then
	LD_LIBRARY_PATH="$top_builddir/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
		timeout -k 5 120 bin/kbox start -s moved --backend none >stdout 2>stderr
	rc=$?
fi
check start_with_a_copied_kbox_and_supervisor_works status_is 0
sup=$(cat "$S/moved/supervisor.pid" 2>/dev/null)
check supervisor_is_the_kbox_supervisor_program eval \
	'[ -n "$sup" ] && [ "$(readlink "/proc/$sup/exe")" = "$T/bin/kbox-supervisor" ] &&
	 tr "\0" " " <"/proc/$sup/cmdline" | grep -qxF "kbox-supervisor $S/moved 3 "'
check supervisor_holds_no_kbox_open eval \
	'[ -d "/proc/$sup/fd" ] && ! ls -l "/proc/$sup/fd/" | grep -q "bin/kbox\$"'
# replaced: a restart needs no kbox at all
rm -f bin/kbox
printf '#!/bin/sh\necho replaced >&2\nexit 97\n' >bin/kbox
chmod +x bin/kbox
kbox restart -s moved
check restart_after_kbox_is_replaced_on_disk_works status_is 0
kbox exec -s moved 6*7
check exec_after_kbox_is_replaced_on_disk_works eval 'status_is 0 && [ "$(wc -l <stdout)" -eq 2 ] &&
	head -n 1 stdout | grep -q "^\[note: kernel restarted: restarted on request (kbox restart); " &&
	[ "$(tail -n 1 stdout)" = "Out[1]: 42" ]'
kbox stop -s moved
check stop_after_kbox_is_replaced_on_disk_works status_is 0

# Started with its standard input closed, kbox start still hands the
# supervisor the right descriptors (its ready socket is not descriptor 0).
fresh
needs kernel
setup_for start_with_stdin_closed_works \
	start_with_stdin_closed_supervisor_logs_to_its_log \
	exec_after_start_with_stdin_closed_works \
	rm_of_a_running_session_is_refused rm_f_stops_and_removes_a_running_session \
	rm_of_a_session_being_started_is_refused_even_with_f \
	prune_leaves_a_session_being_started
if [ -z "$SKIPPING" ]; then
	timeout -k 5 120 "$KBOX" start -s noin --backend none >stdout 2>stderr 0<&-
	rc=$?
fi
check start_with_stdin_closed_works status_is 0
sup=$(cat "$S/noin/supervisor.pid" 2>/dev/null)
check start_with_stdin_closed_supervisor_logs_to_its_log eval \
	'[ -n "$sup" ] && [ "$(readlink "/proc/$sup/fd/2")" = "$S/noin/supervisor.log" ] &&
	 [ "$(readlink "/proc/$sup/fd/0")" = /dev/null ]'
kbox exec -s noin 6*7
check exec_after_start_with_stdin_closed_works eval 'status_is 0 && stdout_is "Out[1]: 42"'
# kbox rm: a running session only with -f, which stops it first
kbox rm noin
check rm_of_a_running_session_is_refused eval '[ "$rc" = 5 ] && stdout_empty &&
	stderr_is "kbox rm: session noin is running: stop it first (kbox stop -s noin), or remove it running with kbox rm -f noin" &&
	[ -d "$S/noin/workspace" ]'
kbox rm -f noin
check rm_f_stops_and_removes_a_running_session eval 'status_is 0 && stderr_empty &&
	grep -qx "removed session noin ([0-9.]* [KM]iB)" stdout && [ ! -e "$S/noin" ] &&
	gone_or_zombie "$sup"'
# a session whose start is under way (it holds start.lock, before there
# is a supervisor) is neither removed nor pruned
kbox start -s lk --backend none
kbox stop -s lk
if [ -z "$SKIPPING" ]; then
	flock "$S/lk/start.lock" timeout -k 5 120 "$KBOX" rm -f lk >stdout 2>stderr
	rc=$?
fi
check rm_of_a_session_being_started_is_refused_even_with_f fails_with 5 \
	'kbox rm: session lk is being started: remove it once that start has ended'
if [ -z "$SKIPPING" ]; then
	flock "$S/lk/start.lock" timeout -k 5 120 "$KBOX" prune --dry-run >stdout 2>stderr
	rc=$?
fi
check prune_leaves_a_session_being_started eval 'status_is 0 && stderr_empty &&
	! grep -q "session lk " stdout && [ -f "$S/lk/session.json" ]'
kbox rm lk

# A state directory without its mark (.kbox-state: one an older kbox made):
# kbox exec of a session there runs, and marks it
setup_for exec_in_a_state_directory_without_its_mark_runs_and_marks_it
fresh
kbox start -s um
um_start=$rc
rm -f "$KBOX_HOME/.kbox-state"
kbox exec -s um 'print(6 * 7)'
check exec_in_a_state_directory_without_its_mark_runs_and_marks_it eval '
	[ "$um_start" = 0 ] && status_is 0 && stdout_is 42 && [ -f "$KBOX_HOME/.kbox-state" ]'
"$KBOX" rm -f -s um >/dev/null 2>&1

# Statically linked (configure's default where the archives link), a kbox
# exec maps libc and libm and nothing else: not libzmq, not the GSSAPI and
# libsystemd libraries that libzmq and czmq refer to (loaded on first use).
fresh
needs kernel
grep -q '^STATIC_DEPS_LIBS = .' "$top_builddir/Makefile" ||
	SKIPPING="configured without static dependencies"
setup_for static_kbox_exec_maps_only_libc_and_libm
if [ -z "$SKIPPING" ]; then
	kbox start -s st --backend none
	# its maps are read while its execution runs (it made its file), then
	# it is let go
	rm -f "$S/st/workspace/running" "$S/st/workspace/release"
	timeout -k 5 120 "$KBOX" exec -s st 'import os, time; open("running", "w").close()
while not os.path.exists("release"): time.sleep(0.05)' >out 2>err &
	tpid=$!
	wait_for test -e "$S/st/workspace/running"
	xpid=$(pgrep -P "$tpid" -x kbox)
	[ -n "$xpid" ] && awk '$6 ~ /\.so/ {n = split($6, p, "/"); print p[n]}' "/proc/$xpid/maps" |
		sort -u >libs
	touch "$S/st/workspace/release"
	wait "$tpid"
	rc=$?
fi
check static_kbox_exec_maps_only_libc_and_libm eval \
	'status_is 0 && [ -s libs ] && ! grep -vxE "ld-linux.*\.so\.[0-9]+|libc\.so\.6|libm\.so\.6" libs &&
	 grep -qx "libc.so.6" libs'
setup_for
SKIPPING=

# A first start that fails (a kernel that exits at once) in a state
# directory it made leaves nothing: not the session, not the directory;
# one that was there before stays
fresh
mkdir -p jp/kernels/bad && mkdir -m 700 had
printf '{"argv": ["/bin/false", "{connection_file}"], "display_name": "bad", "language": "python"}\n' >jp/kernels/bad/kernel.json
JUPYTER_PATH=$T/jp KBOX_HOME=$T/made/st timeout -k 5 60 "$KBOX" start -s x -k bad --backend none >stdout 2>stderr
rc=$?
JUPYTER_PATH=$T/jp KBOX_HOME=$T/had timeout -k 5 60 "$KBOX" start -s x -k bad --backend none >/dev/null 2>&1
check a_failed_first_start_leaves_no_state_directory_it_made eval 'status_is 5 &&
	last_line_is stderr "kbox start: session x: the kernel exited with status 1 before it was ready" &&
	[ -d made ] && [ ! -e made/st ] && [ -d had ] && [ -z "$(ls had/sessions)" ]'

# Without its supervisor program, kbox start says where it looked.
fresh
mkdir lone
cp "$KBOX" lone/
timeout -k 5 60 lone/kbox start -s lone --backend none >stdout 2>stderr
rc=$?
if [ "$rc" = 0 ]; then
	SKIPPING="a kbox-supervisor is installed in this kbox's pkglibexecdir"
	timeout -k 5 60 lone/kbox stop -s lone >/dev/null 2>&1
fi
check start_without_the_supervisor_program_says_where_it_looked eval \
	'status_is 5 && stdout_empty && [ "$(wc -l <stderr)" -eq 2 ] &&
	 head -n 1 stderr | grep -qx "kbox: warning: backend none: the kernel runs unsandboxed" &&
	 tail -n 1 stderr | grep -q "^kbox start: cannot find the supervisor program kbox-supervisor (tried $T/lone/kbox-supervisor, /.*/kbox/kbox-supervisor, $T/lone/../libexec/kbox/kbox-supervisor): is kbox installed whole?\$"'
check start_without_the_supervisor_program_leaves_no_session test ! -e "$S/lone"
SKIPPING=
# The supervisor program refuses to run but as kbox start runs it.
"$top_builddir/kbox-supervisor" >stdout 2>stderr
rc=$?
check supervisor_program_without_arguments_is_a_usage_error fails_with 2 \
	"kbox-supervisor: usage: kbox-supervisor SESSION_DIR READY_FD [--new] (kbox start runs it), or kbox-supervisor --version"
"$top_builddir/kbox-supervisor" "$S/none" 9 >stdout 2>stderr 9<&-
rc=$?
check supervisor_program_without_its_ready_socket_is_refused fails_with 2 \
	"kbox-supervisor: descriptor 9 is not a socket"
"$top_builddir/kbox-supervisor" "$S/none" 9 >stdout 2>stderr 9</dev/null
rc=$?
check supervisor_program_with_another_file_open_is_refused fails_with 2 \
	"kbox-supervisor: descriptor 9 is not a socket"
check supervisor_program_refused_leaves_no_session test ! -e "$S/none"

fresh
# (a session to stop, when none was made: the tests above not selected)
[ -n "$(ls -A "$S" 2>/dev/null)" ] || ! selected stop_all_exits_0 stop_all_stops_every_session \
	stop_all_leaves_no_supervisor || kbox start -s all
running_pids=$(cat "$S"/*/supervisor.pid 2>/dev/null)
kbox stop --all
check stop_all_exits_0 status_is 0
kbox ls --json
check stop_all_stops_every_session "$PY" -c '
import json
states = {s["name"]: s["state"] for s in json.load(open("stdout"))}
assert set(states.values()) == {"stopped"}, states
'
# all_gone PID...: within 5 s each process is gone or a zombie.
all_gone() {
	for p in "$@"; do
		gone_or_zombie "$p" || return 1
	done
}
# shellcheck disable=SC2086 # a list of pids
check stop_all_leaves_no_supervisor all_gone $running_pids
kbox stop --all
check stop_all_with_nothing_running_exits_0 eval 'status_is 0 && stdout_empty && stderr_empty'
kbox get -s an chart.png
check get_works_on_a_stopped_session eval 'status_is 0 && is_png chart.png'

# kbox prune: every session that is not running (here all), first only said
stopped=$(cd "$S" 2>/dev/null && for d in */; do [ "$d" = "*/" ] || echo "${d%/}"; done)
kbox prune --dry-run
check prune_dry_run_names_every_stopped_session_and_removes_none eval 'status_is 0 &&
	[ "$(sed -n "s/^would remove session \([^ ]*\) (.*)$/\1/p" stdout)" = "$stopped" ] &&
	[ "$(ls "$S")" = "$stopped" ] && grep -qx "would reclaim [0-9.]* [KMG]iB" stdout'
kbox prune
check prune_removes_every_stopped_session eval 'status_is 0 && stderr_empty &&
	[ "$(sed -n "s/^removed session \([^ ]*\) (.*)$/\1/p" stdout)" = "$stopped" ] &&
	[ -z "$(ls -A "$S")" ] && grep -qx "reclaimed [0-9.]* [KMG]iB" stdout'
# what is no session, or one kbox refuses, is left alone, and said
# (newcomer 12, F9)
if [ -z "$SKIPPING" ]; then mkdir -m 755 "$S/open" && touch "$S/afile"; fi
kbox prune --dry-run
check prune_says_what_it_skipped_and_why eval 'status_is 0 &&
	stdout_is "would reclaim 0 bytes" && stderr_is "kbox prune: skipped afile: not a session (not a directory)
kbox prune: skipped open: directory $S/open is accessible to others (mode 0755, need 0700 or 0710): chmod 700 $S/open" &&
	[ -f "$S/afile" ] && [ -d "$S/open" ]'

tests_done
