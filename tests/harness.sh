# tests/harness.sh — the shell harness of the kbox CLI tests (sourced by
# tests/session.sh and tests/sandbox.sh): a private KBOX_HOME under a
# short /tmp root, cleanup of every session and process of ours at exit,
# `kbox` wrapper (stdout, stderr, $rc, $secs), `check NAME CMD...` TAP
# tests, and assertions.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON.
# shellcheck shell=bash disable=SC2016

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$(pwd)}
KBOX=$top_builddir/kbox
PY=${KERNEL_PYTHON:-/usr/bin/python3}

# The defaults are under test: no session or kernel from the caller.
unset KBOX_KERNEL KBOX_SESSION XDG_STATE_HOME

if [ ! -x "$KBOX" ]; then
	echo "Bail out! $KBOX is not built"
	exit 1
fi

# A short root, as most users have (tests/long_home.sh tries a long one).
ROOT=$(mktemp -d /tmp/ks.XXXX) || exit 1
# under root, sandboxes run as the sandbox user (kbox(7)), whom bwrap finds
# its directories as: it must pass through (not list)
chmod 711 "$ROOT" || exit 1
KBOX_HOME=$ROOT/h
BASE=$ROOT/t
mkdir -m 700 "$KBOX_HOME" "$BASE" || exit 1
export KBOX_HOME
S=$KBOX_HOME/sessions
BG_PIDS=

# cleanup: stop every session, then kill whatever of ours is left by its
# pid: supervisors named in supervisor.pid files (checked to be ours by
# their command line) and processes (kernels) working in our workspaces.
cleanup() {
	cd / || return
	# background workers start no new kbox once $ROOT/stop exists; a
	# background kbox exec is ended through its timeout(1) wrapper
	touch "$ROOT/stop"
	for p in $BG_PIDS; do
		kill "$p" 2>/dev/null
	done
	wait
	timeout -k 5 60 "$KBOX" stop --all >/dev/null 2>&1
	for f in "$S"/*/supervisor.pid; do
		[ -s "$f" ] || continue
		pid=$(cat "$f")
		if tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "kbox-supervisor $S/"; then
			kill -9 "$pid" 2>/dev/null
		fi
	done
	for d in /proc/[0-9]*; do
		case $(readlink "$d/cwd" 2>/dev/null) in
		"$S"/*) kill -9 "${d#/proc/}" 2>/dev/null ;;
		esac
	done
	rm -rf "$ROOT"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

n=0
T=
rc=
secs=

have_kernel=yes
"$PY" -c 'import ipykernel' 2>/dev/null || have_kernel=no
have_pandas=yes
"$PY" -c 'import pandas, matplotlib' 2>/dev/null || have_pandas=no

# ---- harness (as tests/cli.sh) ----

# fresh: make a new empty directory and go there.
fresh() {
	T=$(mktemp -d "$BASE/t.XXXXXX") && cd "$T" || exit 1
}

# needs WHAT...: the tests that follow need a kernel ("kernel") and maybe
# pandas and matplotlib ("pandas"); when one is missing they are skipped.
needs() {
	SKIPPING=
	for what in "$@"; do
		case $what in
		kernel) [ "$have_kernel" = yes ] || SKIPPING="$PY cannot import ipykernel" ;;
		pandas) [ "$have_pandas" = yes ] || SKIPPING="$PY cannot import pandas, matplotlib" ;;
		esac
	done
}
SKIPPING=

# kbox ARGS...: run kbox in the current directory, stdout to ./stdout, stderr
# to ./stderr; set $rc to its exit status and $secs to the seconds it took.
# A kbox that hangs is killed after 90 s (status 124).  Does nothing while
# skipping.
kbox() {
	[ -z "$SKIPPING" ] || return 0
	t0=$(date +%s)
	timeout -k 5 90 "$KBOX" "$@" >stdout 2>stderr
	rc=$?
	secs=$(($(date +%s) - t0))
}

# diag: show what the last kbox did, as TAP comments.
diag() {
	echo "#   in $T: exit status $rc after ${secs}s"
	[ -f stdout ] && head -n 30 stdout | sed 's/^/#   stdout: /'
	[ -f stderr ] && head -n 30 stderr | sed 's/^/#   stderr: /'
	return 0
}

# check NAME CMD...: one test, passed when CMD succeeds.
check() {
	name=$1
	shift
	n=$((n + 1))
	if [ -n "$SKIPPING" ]; then
		echo "ok $n - $name # SKIP $SKIPPING"
	elif "$@"; then
		echo "ok $n - $name"
	else
		echo "not ok $n - $name"
		diag
	fi
}

# ---- assertions ----

status_is() { [ "$rc" = "$1" ]; }
# stdout_is TEXT / stderr_is TEXT: the file is exactly TEXT and a newline.
stdout_is() { printf '%s\n' "$1" | cmp -s - stdout; }
stderr_is() { printf '%s\n' "$1" | cmp -s - stderr; }
stdout_empty() { [ ! -s stdout ]; }
stderr_empty() { [ ! -s stderr ]; }
# fails_with STATUS TEXT: exit STATUS, nothing on stdout, and exactly the
# one line TEXT on stderr.
fails_with() {
	[ "$rc" = "$1" ] && [ ! -s stdout ] && [ "$(wc -l <stderr)" -eq 1 ] && stderr_is "$2"
}
has_line() { grep -qxF -- "$2" "$1"; }
lacks_line() { ! grep -qxF -- "$2" "$1"; }
first_line_is() { [ "$(head -n 1 "$1")" = "$2" ]; }
last_line_is() { [ "$(tail -n 1 "$1")" = "$2" ]; }
took_less_than() { [ "$secs" -lt "$1" ]; }
# is_png FILE: FILE starts with the PNG signature.
is_png() {
	[ "$(od -An -tx1 -N8 "$1" | tr -d ' \n')" = 89504e470d0a1a0a ]
}
# png_size_is FILE WIDTH HEIGHT: the IHDR chunk says WIDTH x HEIGHT.
png_size_is() {
	[ "$(od -An -tx1 -j12 -N4 "$1" | tr -d ' \n')" = 49484452 ] || return 1
	# shellcheck disable=SC2046 # eight numbers wanted
	set -- "$1" "$2" "$3" $(od -An -tu1 -j16 -N8 "$1")
	[ $# -eq 11 ] || return 1
	[ $((($4 << 24) + ($5 << 16) + ($6 << 8) + $7)) -eq "$2" ] &&
		[ $((($8 << 24) + ($9 << 16) + (${10} << 8) + ${11})) -eq "$3" ]
}
# json_field FILE KEY: the value of KEY in the JSON object in FILE.
json_field() {
	"$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}
# status_line KEY: the value of "KEY: value" in `kbox status` output.
status_line() { sed -n "s/^$1: *//p" stdout; }
# wait_idle NAME: within 30 s session NAME's kernel is ready and idle (a
# kernel the supervisor replaced starts in the background).
wait_idle() {
	for _ in $(seq 300); do
		"$KBOX" status -s "$1" 2>/dev/null | grep -q "^state: *idle$" && return 0
		sleep 0.1
	done
	return 1
}
# ls_row NAME: the row of NAME in `kbox ls` output, spaces squeezed.
ls_row() { awk -v n="$1" '$1 == n { $1 = $1; print }' stdout; }
# gone_or_zombie PID: within 5 s the process is gone or a zombie.
gone_or_zombie() {
	for _ in $(seq 25); do
		[ -e "/proc/$1" ] || return 0
		case $(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) in
		Z | X | "") return 0 ;;
		esac
		sleep 0.2
	done
	return 1
}
# started_line NAME: stdout is the "started" line naming the pid in
# NAME's supervisor.pid.
started_line() {
	stdout_is "session $1 started (backend bwrap, kernel python3, supervisor pid $(cat "$S/$1/supervisor.pid"))"
}
# events NAME PY-EXPR: PY-EXPR holds for ev, the list of NAME's events.
events() {
	"$PY" -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
ok = eval("(" + sys.argv[2] + ")")
if not ok:
    print("# events:", [e["event"] for e in ev])
sys.exit(0 if ok else 1)
' "$S/$1/events.ndjson" "$2"
}
# wait_for CMD...: CMD succeeds within 10 s.
wait_for() {
	for _ in $(seq 50); do
		"$@" && return 0
		sleep 0.2
	done
	return 1
}
