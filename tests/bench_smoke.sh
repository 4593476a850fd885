#!/bin/sh
# tests/bench_smoke.sh — the benchmarks of bench/ still run, each with a
# few calls: every call they make is correct and they end as they should
# (their figures are not judged here: bench/README.md says how to read
# them).  They ask the kernel its connection (bench/kconn.py), as kbox
# writes no connection file the host could read.  make check-slow.  TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir,
# KERNEL_PYTHON.
# shellcheck disable=SC2016 # eval strings expand later, on purpose
set -u

ROOT_TAG=ksb
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
B=$top_srcdir/bench
# last_json FILE EXPR: the last line of FILE is a JSON object r of which
# the Python expression EXPR holds
last_json() {
	tail -n 1 "$1" | "$PY" -c 'import json, sys; r = json.loads(sys.stdin.read()); sys.exit(0 if eval(sys.argv[1]) else 1)' "$2" ||
		{ tail -n 5 "$1" | cut -c 1-300 | sed 's/^/#   /'; return 1; }
}
needs kernel
SKIP_EXEC=
[ -x "$top_builddir/bench/bench_exec" ] || SKIP_EXEC="bench/bench_exec is not built (make bench/bench_exec)"
[ -x "$top_builddir/bench/floor_ctl" ] || SKIP_EXEC="bench/floor_ctl is not built (make bench/floor_ctl)"

fresh
if [ -z "$SKIPPING" ]; then
	timeout -k 5 600 "$PY" "$B/mcp.py" "$KBOX" -n 3 --rounds 1 --warmup 1 >mcp.out 2>&1
	echo $? >mcp.rc
fi
check bench_mcp_runs_every_call_correctly eval '[ "$(cat mcp.rc)" = 0 ] &&
	last_json mcp.out "r[\"failures\"] == 0 and r[\"calls_per_round\"] == 3"'
# both ways of calling: settled (the figures of record, 5 ms after each
# answer by default) and back to back, each with its own ratios
check bench_mcp_measures_settled_and_back_to_back_calls eval '
	last_json mcp.out "r[\"pause_ms\"] == 5 and r[\"ratio_mcp_over_jc\"] > 0 and r[\"back_to_back\"][\"ratio_mcp_over_jc\"] > 0 and r[\"back_to_back\"][\"kbox mcp\"][\"cpu_us_per_call\"][\"kernel\"] > 0"'
# each process a stdio call goes through spends CPU on it, and is counted
check bench_mcp_counts_the_cpu_of_each_process_of_a_call eval '
	last_json mcp.out "all(r[\"kbox mcp\"][\"cpu_us_per_call\"][p] > 0 for p in (\"client\", \"mcp\", \"supervisor\", \"kernel\")) and r[\"kbox mcp http\"][\"cpu_us_per_call\"][\"mcp http\"] > 0"'

# bench/gateway.py needs a Jupyter Server of its own (python3-jupyter-server)
GW_SKIP=
"$PY" -c 'import jupyter_server, websocket' 2>/dev/null ||
	GW_SKIP="$PY cannot import jupyter_server and websocket (python3-jupyter-server)"
if [ -z "$SKIPPING" ] && [ -z "$GW_SKIP" ]; then
	timeout -k 5 600 "$PY" "$B/gateway.py" "$KBOX" -n 3 --rounds 1 --starts 1 --warmup 1 \
		--json gateway.json >gateway.out 2>&1
	echo $? >gateway.rc
fi
if [ -n "$GW_SKIP" ]; then
	skip bench_gateway_runs_every_call_correctly "$GW_SKIP"
else
	check bench_gateway_runs_every_call_correctly eval '[ "$(cat gateway.rc)" = 0 ] &&
		"$PY" -c "import json, sys; r = json.load(open(sys.argv[1])); sys.exit(r[\"failures\"] != 0 or len(r[\"samples_ms\"][\"kbox mcp\"]) != 3)" gateway.json ||
		{ tail -n 5 gateway.out | sed "s/^/#   /"; false; }'
fi

if [ -z "$SKIPPING" ]; then
	timeout -k 5 600 "$PY" "$B/ready.py" --rounds 1 "$KBOX" >ready.out 2>&1
	echo $? >ready.rc
fi
check bench_ready_measures_start_and_restart eval '[ "$(cat ready.rc)" = 0 ] &&
	grep -q "restart last bind -> ready: median" ready.out || { tail -n 5 ready.out | sed "s/^/#   /"; false; }'

if [ -z "$SKIPPING" ]; then
	timeout -k 5 600 "$PY" "$B/walk.py" "$KBOX" --dirs 200 --rounds 1 >walk.out 2>&1
	echo $? >walk.rc
fi
check bench_walk_starts_both_sessions eval '[ "$(cat walk.rc)" = 0 ] &&
	last_json walk.out "r[\"dirs\"] == 200 and len(r[\"full\"][\"all_ms\"]) == 1"'

[ -z "$SKIP_EXEC" ] || SKIPPING=$SKIP_EXEC
if [ -z "$SKIPPING" ]; then
	timeout -k 5 900 "$PY" "$B/session.py" "$KBOX" --bench-exec "$top_builddir/bench/bench_exec" \
		--floor-ctl "$top_builddir/bench/floor_ctl" -n 3 --rounds 1 --warmup 1 --exec-n 3 --exec-warmup 1 --rss-calls 3 --cpu-calls 3 \
		--long-calls 3 >session.out 2>&1
fi
check bench_session_makes_every_call_correctly eval '
	last_json session.out "(r[\"failed_calls\"] == 0 and r[\"libraries_pass\"] is True and
		r[\"clients\"][\"ctl\"][\"calls\"] == 3 and r[\"clients\"][\"ctl\"][\"failed\"] == 0 and
		r[\"clients\"][\"floor\"][\"calls\"] == 3 and r[\"ratio_floor_libkbox\"] > 0 and
		r[\"least_kbox_exec_s\"] > r[\"clients\"][\"ctl\"][\"wall_median_s\"])"'

# floor_ctl's bad input: one line on stderr and its status, nothing sent
[ -z "$SKIP_EXEC" ] || SKIPPING=$SKIP_EXEC
fresh
if [ -z "$SKIPPING" ]; then
	"$top_builddir/bench/floor_ctl" >stdout 2>stderr
	rc=$?
fi
check floor_ctl_without_a_directory_is_a_usage_error fails_with 2 "usage: floor_ctl SESSION-DIR"
if [ -z "$SKIPPING" ]; then
	"$top_builddir/bench/floor_ctl" "$T/a\"b" >stdout 2>stderr
	rc=$?
fi
check floor_ctl_refuses_a_path_it_would_have_to_escape fails_with 1 \
	"floor_ctl: $T/a\"b: a quote, backslash or control character in the path: give another"
if [ -z "$SKIPPING" ]; then
	"$top_builddir/bench/floor_ctl" "$T/none" >stdout 2>stderr
	rc=$?
fi
check floor_ctl_of_no_session_directory_says_so fails_with 1 \
	"floor_ctl: $T/none: no session directory (or its path is too long)"
tests_done
