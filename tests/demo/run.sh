#!/bin/sh
# tests/demo/run.sh — the main job: a multi-step analysis in one persistent
# session, one `kbox exec` process per step (as an agent's tool calls are),
# state carried over by the session's kernel; the chart copied out at the end.
#
# usage: run.sh KBOX OUTDIR
set -eu
KBOX=$1
OUT=$2
DEMO=$(cd "$(dirname "$0")" && pwd)
KBOX_HOME=$(mktemp -d "${TMPDIR:-/tmp}/kbox-demo.XXXXXX")
export KBOX_HOME
trap '"$KBOX" stop --all >/dev/null 2>&1; rm -rf "$KBOX_HOME"' EXIT

mkdir -p "$OUT"
"$KBOX" start -s demo
for step in 1-write-csv 2-load 3-aggregate 4-plot; do
	echo "\$ kbox exec -s demo -f $step.py"
	"$KBOX" exec -s demo --outputs "$OUT" -f "$DEMO/$step.py"
done
"$KBOX" get -s demo chart.png "$OUT/chart.png"
# the events of the kernel and the executions, whole (kbox-logs(1) has
# the rest: the sandbox's limits, the supervisor's memory bounds)
echo "\$ kbox logs -s demo | grep -E ' (start|ready|exec-begin|exec-end) '"
"$KBOX" logs -s demo | grep -E '^[^ ]+ (start|ready|exec-begin|exec-end) '
"$KBOX" stop -s demo
echo "chart: $OUT/chart.png"
