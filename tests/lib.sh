# tests/lib.sh — the one harness of every shell test (sourced; POSIX sh, so
# that the /bin/sh and the bash scripts alike can source it).  tests/README
# says how to run one file or one test, and what each function promises.
#
# It gives a script:
#   - the kbox under test ($KBOX), the host's Python ($PY), and the
#     defaults under test (no KBOX_KERNEL, KBOX_SESSION, XDG_STATE_HOME
#     from the caller; stdin /dev/null);
#   - a private KBOX_HOME under a short /tmp root ($ROOT, named by
#     $ROOT_TAG when the script sets it before sourcing), with $BASE for
#     fresh test directories and $W, $C for kx's outputs and pyx's code;
#   - a cleanup at exit: background jobs in $BG_PIDS are ended, every
#     session stopped, whatever supervisor or kernel of ours is left is
#     killed by its pid, and the root removed (a script may define
#     cleanup_first, run before the sessions are stopped, and cleanup_more,
#     after);
#   - TAP: `check NAME CMD...`, `skip NAME REASON`, test selection by
#     KBOX_TEST_RUN (`selected`), diag and say;
#   - kbox wrappers (kbox, kx, pyx, kexec), bounded polls (wait_for, gone,
#     wait_idle), and assertions.
#
# A script that does not need the build's kbox (a lint, configure, the
# installation, the fuzzer) sets NEEDS_KBOX=no before sourcing: it runs
# with no kbox built, and tests_done adds no sanitizer test.
#
# Environment (set by `make check`): top_srcdir, top_builddir,
# KERNEL_PYTHON; KBOX (default: the build tree's kbox); KBOX_TEST_RUN.
# shellcheck shell=sh disable=SC2034,SC2016

if [ -z "${top_srcdir-}" ]; then
	top_srcdir=$(cd "$(dirname "$0")" && while [ ! -f tests/lib.sh ] && [ "$(pwd)" != / ]; do cd ..; done && pwd)
fi
top_builddir=${top_builddir:-$(pwd)}
KBOX=${KBOX:-$top_builddir/kbox}
case $KBOX in /*) ;; *) KBOX=$(pwd)/$KBOX ;; esac
PY=${KERNEL_PYTHON:-/usr/bin/python3}

# The defaults are under test: no session or kernel from the caller, and
# no test reads the terminal.
unset KBOX_KERNEL KBOX_SESSION XDG_STATE_HOME
exec </dev/null

if [ "${NEEDS_KBOX-}" != no ] && [ ! -x "$KBOX" ]; then
	echo "Bail out! $KBOX is not built"
	exit 1
fi

# ---- the private root ----

# A short root, as most users have (tests/long_home.sh tries a long one).
ROOT=$(mktemp -d "/tmp/${ROOT_TAG:-ks}.XXXX") || exit 1
# under root, sandboxes run as the sandbox user (kbox(7)), whom bwrap finds
# its directories as: it must pass through (not list)
chmod 711 "$ROOT" || exit 1
KBOX_HOME=$ROOT/h
BASE=$ROOT/t
W=$ROOT/w
C=$ROOT/c
mkdir -m 700 "$KBOX_HOME" "$W" "$C" && mkdir -m 711 "$BASE" || exit 1
export KBOX_HOME
S=$KBOX_HOME/sessions

# who owns what (kbox(7), Identity): as an ordinary user, everything is
# ours, 0700; under root the sandbox's own directories (workspace, home)
# are the session's own uid's (sb_uid), in the sandbox user's
# group, and the host's directories it passes through are 0710, root's,
# in that group
if [ "$(id -u)" = 0 ]; then
	SB_GID=$(id -g "${KBOX_SANDBOX_USER:-kbox}" 2>/dev/null)
	SB_GROUP=$(id -gn "${KBOX_SANDBOX_USER:-kbox}" 2>/dev/null)
	PASS_MODE=710
else
	SB_GID=$(id -g)
	PASS_MODE=700
fi
# sb_uid SESSION: the host uid of the session's sandbox
sb_uid() {
	if [ "$(id -u)" = 0 ]; then cat "$S/$1/sandbox.uid" 2>/dev/null; else id -u; fi
}
# writable_by_sandboxes DIR: under root, give DIR to the sandbox user's
# group, rwx (each session's sandbox is a uid of its own in that group)
writable_by_sandboxes() {
	[ "$(id -u)" != 0 ] || { chgrp "$SB_GROUP" "$@" && chmod g+rwx "$@"; }
}

# An AddressSanitizer build (configure --enable-sanitizers): a process's
# memory there is mostly the sanitizer's (shadow, quarantine), so tests
# measure it and do not judge it; tests_done reads the supervisors' logs
# (unless NEEDS_KBOX is no).
asan=no
[ "${NEEDS_KBOX-}" = no ] || ! ldd "$KBOX" 2>/dev/null | grep -q libasan || asan=yes
# There LeakSanitizer judges what lives on: the supervisors, kbox mcp and
# kbox agent, and the C programs; a one-shot kbox's check (about 50 ms a
# process, a third of a shell suite's time) is skipped (src/cli/main.c).
[ "$asan" = no ] || { KBOX_LEAK_CHECK=long-lived && export KBOX_LEAK_CHECK; }

BG_PIDS=

# cleanup: end the background jobs, stop every session, then kill
# whatever of ours is left by its pid: supervisors named in supervisor.pid
# files (checked to be ours by their command line) and processes
# (kernels) working in our sessions' directories; remove the root.
cleanup() {
	cd / || return
	# background workers start no new kbox once $ROOT/stop exists (nor
	# the hang guard, which is ended)
	touch "$ROOT/stop"
	kill "${GUARD_PID-}" 2>/dev/null
	for p in $BG_PIDS; do
		kill "$p" 2>/dev/null
	done
	# (by pid: a bare wait would wait for any job the script left)
	# shellcheck disable=SC2086 # a list of pids
	wait ${GUARD_PID-} $BG_PIDS 2>/dev/null
	! command -v cleanup_first >/dev/null 2>&1 || cleanup_first
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
	# what the script itself leaves (cgroups of a supervisor it killed)
	! command -v cleanup_more >/dev/null 2>&1 || cleanup_more
	rm -rf "$ROOT"
}
trap cleanup EXIT
trap 'exit 1' HUP INT PIPE TERM

# ---- the hang guard ----

# A test that hangs must not hang the suite (nor CI, which has a time
# limit).  A guard in the background reads $ROOT/progress, which every
# test line touches: when no test has ended for KBOX_TEST_STALL seconds
# (600; a test and its setup take under 10 s here, 20 s on a loaded
# machine), it prints "Bail out!" with the last test that ended and the
# processes still running under the script (and those naming $ROOT: its
# supervisors and kernels), then TERMs them and the script, whose cleanup
# runs, and KILLs what is left 30 s later.  It judges no test's speed: it
# only turns a hang into a failure that says where it hung.  The cleanup
# ends it (a script waits for its own jobs by pid, never with a bare
# `wait`, which would wait for the guard); it also ends when the script
# is gone.
KBOX_TEST_STALL=${KBOX_TEST_STALL:-600}
hang_guard_sh='
script=$1 root=$2 stall=$3
tree() { # the processes under the script, but for the guard
	ps -e -o pid= -o ppid= | awk -v top="$script" -v me=$$ "
		{ up[\$1] = \$2 }
		END { for (p in up) { q = p; while ((q in up) && q != top && q != me && q > 1) q = up[q]; if (q == top && p != top) print p } }"
}
while sleep 5 >/dev/null; do
	kill -0 "$script" 2>/dev/null && [ ! -e "$root/stop" ] || exit 0
	last=$(stat -c %Y "$root/progress" 2>/dev/null) || exit 0
	[ $(($(date +%s) - last)) -ge "$stall" ] || continue
	echo "Bail out! no test has ended for $stall s (the last: $(cat "$root/progress")): the script is stuck; what runs under it, and what names $root:"
	under=$(tree)
	ps -e -o pid,ppid,stat,etimes,wchan:18,args --forest |
		awk -v pids=" $(echo $under) " -v root="$root" -v me=$$ "NR == 1 ||
			index(pids, \" \" \$1 \" \") || (index(\$0, root) && \$1 != me && \$2 != me)" |
		cut -c 1-220 | sed "s/^/#   /"
	# (the script first: its TERM waits while its child runs, and ends it
	# as soon as the child is gone; the other way round, a script that
	# runs between the two signals goes on to its next test)
	kill -TERM "$script" $under 2>/dev/null
	i=0
	while [ $i -lt 30 ] && kill -0 "$script" 2>/dev/null; do
		sleep 1 >/dev/null
		i=$((i + 1))
	done
	kill -0 "$script" 2>/dev/null && kill -KILL $(tree) "$script" 2>/dev/null
	exit 0
done'
: >"$ROOT/progress"
sh -c "$hang_guard_sh" hang-guard "$$" "$ROOT" "$KBOX_TEST_STALL" &
GUARD_PID=$!

# ---- TAP, and test selection ----

n=0
ran=0 # the tests KBOX_TEST_RUN selected
rc=
rss=
T=
why=
DIAG=
SKIPPING=
setup_was=
setup_names=
setup_first=
ncode=0
last_out=
last_err=

# run_item_matches ITEM NUM NAME: ITEM (a number N, a range N-M or a glob)
# matches test NUM named NAME.
run_item_matches() {
	case $1 in
	'' | *[!0-9-]* | -* | *-*-* | *-)
		# a glob on the name (set -f is on: $1 is a pattern here)
		# shellcheck disable=SC2254
		case $3 in $1) return 0 ;; esac
		return 1
		;;
	*-*)
		[ "$2" -ge "${1%-*}" ] && [ "$2" -le "${1#*-}" ]
		;;
	*)
		[ "$2" -eq "$1" ]
		;;
	esac
}

# test_selected NUM NAME: KBOX_TEST_RUN selects test NUM named NAME.  The
# variable is a comma-separated list of items: a number N, a range N-M, or
# a glob matched against the name; an item that starts with "!" excludes.
# A test runs when it matches some positive item (or there is none) and
# no excluding one.
test_selected() {
	[ -n "${KBOX_TEST_RUN-}" ] || return 0
	ts_pos=no
	ts_hit=no
	ts_ifs=$IFS
	case $- in *f*) ts_f=yes ;; *) ts_f=no ;; esac
	set -f
	IFS=,
	for ts_item in $KBOX_TEST_RUN; do
		case $ts_item in
		!*)
			if run_item_matches "${ts_item#!}" "$1" "$2"; then
				ts_hit=excluded
				break
			fi
			;;
		*)
			ts_pos=yes
			[ "$ts_hit" = yes ] || ! run_item_matches "$ts_item" "$1" "$2" || ts_hit=yes
			;;
		esac
	done
	IFS=$ts_ifs
	[ "$ts_f" = yes ] || set +f
	case $ts_hit in
	excluded) return 1 ;;
	yes) return 0 ;;
	esac
	[ "$ts_pos" = no ]
}

# selected NAME...: the next tests, named NAME... in the order they come
# (the first is test n+1), has one KBOX_TEST_RUN selects.  A script asks
# it before setup that only those tests need, to skip the setup too (the
# tests are still counted, and reported as not selected).
selected() { selected_at $((n + 1)) "$@"; }

# selected_at NUM NAME...: as selected, for the tests numbered NUM,
# NUM+1, ... (a script that counts the tests between its setup and them).
selected_at() {
	sel_i=$(($1 - 1))
	shift
	for sel_name in "$@"; do
		sel_i=$((sel_i + 1))
		test_selected "$sel_i" "$sel_name" && return 0
	done
	return 1
}

# selected_later NAME...: KBOX_TEST_RUN may select one of the tests named
# NAME..., which come later, after others (for setup shared by tests far
# apart): a glob of it matches one of the names (and no "!" glob does), or
# it has no positive item, or a number or range beyond n (their numbers
# are not known here: any may be theirs).
selected_later() {
	[ -n "${KBOX_TEST_RUN-}" ] || return 0
	sl_ifs=$IFS
	case $- in *f*) sl_f=yes ;; *) sl_f=no ;; esac
	set -f
	IFS=,
	sl_hit=no
	for sl_name in "$@"; do
		sl_pos=no
		sl_this=no
		for sl_item in $KBOX_TEST_RUN; do
			sl_neg=no
			case $sl_item in !*) sl_neg=yes sl_item=${sl_item#!} ;; esac
			[ "$sl_neg" = yes ] || sl_pos=yes
			case $sl_item in
			'' | *[!0-9-]* | -* | *-*-* | *-)
				# a glob (set -f is on: a pattern here)
				# shellcheck disable=SC2254
				case $sl_name in $sl_item) ;; *) continue ;; esac
				[ "$sl_neg" = no ] || { sl_this=excluded; break; }
				sl_this=yes
				;;
			*)
				# a number or a range: it may be the test's unless it
				# ends at n (an excluded number may be another's)
				[ "$sl_neg" = no ] && [ "${sl_item#*-}" -gt "$n" ] && sl_this=yes
				;;
			esac
		done
		case $sl_this in
		yes) sl_hit=yes ;;
		no) [ "$sl_pos" = yes ] || sl_hit=yes ;;
		esac
		[ "$sl_hit" = no ] || break
	done
	IFS=$sl_ifs
	[ "$sl_f" = yes ] || set +f
	[ "$sl_hit" = yes ]
}

# setup_for NAME... [-- LATER...]: the setup that follows, up to the next
# setup_for, serves the next tests, NAME... in the order they come (every
# one up to there: check fails a test it does not name), and the tests
# LATER... further on (as selected_later takes them).  When KBOX_TEST_RUN
# selects none of them, $SKIPPING says so (until the next setup_for or
# needs: it comes after needs), and kbox and the script's blocks guarded
# by $SKIPPING do nothing.  setup_for with no NAME ends the last one.
SETUP_SKIPPED="its setup is not selected by KBOX_TEST_RUN"
setup_for() {
	[ "$SKIPPING" != "$SETUP_SKIPPED" ] || SKIPPING=$setup_was
	setup_first=$((n + 1))
	setup_names=
	[ $# -gt 0 ] || return 0
	sf_i=$n
	sf_hit=no
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		sf_i=$((sf_i + 1))
		setup_names="$setup_names $1"
		[ "$sf_hit" = yes ] || ! test_selected "$sf_i" "$1" || sf_hit=yes
		shift
	done
	if [ $# -gt 0 ]; then
		shift
		[ "$sf_hit" = yes ] || ! selected_later "$@" || sf_hit=yes
	fi
	[ "$sf_hit" = yes ] && return 0
	setup_was=$SKIPPING
	SKIPPING=$SETUP_SKIPPED
}

# setup_name_at NUM: the name the last setup_for gave test NUM.
setup_name_at() {
	sn_k=$(($1 - setup_first + 1))
	# shellcheck disable=SC2086 # a list of names
	set -- $setup_names
	[ "$sn_k" -ge 1 ] && [ "$sn_k" -le $# ] && eval "printf '%s\n' \"\${$sn_k}\""
}

# say TEXT...: a diagnostic line, for a failing assertion to explain itself.
say() { echo "#   $*"; }

# diag [NAME...]: as TAP comments, $why, then the outputs kept as NAME
# (keep), or, without NAME, the last kbox's: where it ran, its exit
# status (and peak RSS, when measured) and the head of its output (none
# when no kbox has run and $rc is empty).
diag() {
	[ -z "$why" ] || printf '%s\n' "$why" | sed 's/^/#   /'
	if [ $# -eq 0 ]; then
		[ -n "${last_dir-}$rc" ] || return 0
		echo "#   in ${last_dir:-?}: exit status $rc${rss:+, peak RSS $rss KiB}"
		[ -z "$last_out" ] || [ ! -f "$last_out" ] || head -n 30 "$last_out" | cut -c 1-300 | sed 's/^/#   stdout: /'
		[ -z "$last_err" ] || [ ! -f "$last_err" ] || head -n 30 "$last_err" | cut -c 1-300 | sed 's/^/#   stderr: /'
		return 0
	fi
	for k in "$@"; do
		echo "#   $k: exit status $(cat "$W/$k.rc" 2>/dev/null)"
		[ ! -f "$W/$k.out" ] || head -n 30 "$W/$k.out" | cut -c 1-300 | sed 's/^/#   stdout: /'
		[ ! -f "$W/$k.err" ] || head -n 20 "$W/$k.err" | cut -c 1-300 | sed 's/^/#   stderr: /'
	done
	return 0
}

# tap_took: after a test's line, how long it took since the line before
# (its setup included), when that is TOOK_SAY_CS centiseconds or more:
# "#   took N.NN s" (.ci/run names the slowest).  /proc/uptime: no fork.
TOOK_SAY_CS=${TOOK_SAY_CS:-200}
tap_cs() { # tap_now: the uptime in centiseconds
	read -r tap_now _ </proc/uptime 2>/dev/null || tap_now=0.00
	tap_now=${tap_now%.*}${tap_now#*.}
}
tap_cs
tap_last=$tap_now
tap_took() {
	printf '%s - %s\n' "$n" "${name-}" >"$ROOT/progress"
	tap_cs
	tap_d=$((tap_now - tap_last))
	tap_last=$tap_now
	[ "$tap_d" -lt "$TOOK_SAY_CS" ] || printf '#   took %d.%02d s\n' $((tap_d / 100)) $((tap_d % 100))
}

# check NAME CMD...: test n+1, NAME, passed when CMD succeeds.  Not run
# when KBOX_TEST_RUN does not select it, or while $SKIPPING says why not;
# on failure, diag shows the outputs named in $DIAG (or the last kbox's).
check() {
	name=$1
	shift
	n=$((n + 1))
	why=
	if ! test_selected "$n" "$name"; then
		echo "ok $n - $name # SKIP not selected by KBOX_TEST_RUN"
	elif [ -n "$setup_names" ] && [ "$(setup_name_at "$n")" != "$name" ]; then
		echo "not ok $n - $name"
		say "the setup_for above does not name it test $n: its list is behind the tests"
	elif ran=$((ran + 1)) && [ -n "$SKIPPING" ]; then
		echo "ok $n - $name # SKIP $SKIPPING"
	elif "$@"; then
		echo "ok $n - $name"
	else
		echo "not ok $n - $name"
		# shellcheck disable=SC2086 # a list of names
		diag $DIAG
	fi
	why=
	tap_took
}

# skip NAME REASON: test n+1, NAME, skipped for REASON (or not selected).
skip() {
	n=$((n + 1))
	name=$1
	if test_selected "$n" "$1"; then
		echo "ok $n - $1 # SKIP $2"
	else
		echo "ok $n - $1 # SKIP not selected by KBOX_TEST_RUN"
	fi
	tap_took
}

# tests_done: the plan, the script's last line.  In an AddressSanitizer
# build one more test comes before it: every session under $ROOT is
# stopped, and no supervisor's log (its stderr, which no other test
# reads) holds a report of AddressSanitizer, LeakSanitizer (its leak check
# runs as the supervisor exits) or UndefinedBehaviorSanitizer.
tests_done() {
	if [ "$asan" = yes ]; then
		find "$ROOT" -path '*/sessions/*/supervisor.pid' 2>/dev/null |
			sed 's|/sessions/[^/]*/supervisor.pid$||' | sort -u |
			while IFS= read -r home; do
				KBOX_HOME=$home timeout -k 5 60 "$KBOX" stop --all >/dev/null 2>&1
			done
		check no_supervisor_log_has_a_sanitizer_report no_sanitizer_report
	fi
	# (a pattern that matches nothing looks like a pass: said)
	[ -z "${KBOX_TEST_RUN-}" ] || [ "$ran" -gt 0 ] ||
		echo "# KBOX_TEST_RUN=$KBOX_TEST_RUN selects none of the $n tests above: check its names and numbers"
	echo "1..$n"
}

# no_sanitizer_report: no supervisor.log under $ROOT holds a sanitizer's
# report; each one that does is shown.
no_sanitizer_report() {
	sr_bad=$(find "$ROOT" -path '*/sessions/*/supervisor.log' -exec grep -lE \
		'ERROR: (AddressSanitizer|LeakSanitizer)|SUMMARY: [A-Za-z]+Sanitizer|runtime error: ' {} + 2>/dev/null)
	[ -z "$sr_bad" ] && return 0
	printf '%s\n' "$sr_bad" | while IFS= read -r f; do
		say "$f:"
		grep -E -A12 'ERROR: [A-Za-z]+Sanitizer|runtime error: ' "$f" | head -n 40 | sed 's/^/#     /'
	done
	return 1
}

# ---- what the tests need ----

have_kernel=
have_pandas=

# needs WHAT...: the tests that follow need a kernel ("kernel") and maybe
# pandas and matplotlib ("pandas"); when one is missing SKIPPING says so.
needs() {
	SKIPPING=
	for what in "$@"; do
		case $what in
		kernel)
			[ -n "$have_kernel" ] || { "$PY" -c 'import ipykernel' 2>/dev/null && have_kernel=yes || have_kernel=no; }
			[ "$have_kernel" = yes ] || SKIPPING="$PY cannot import ipykernel"
			;;
		pandas)
			[ -n "$have_pandas" ] || { "$PY" -c 'import pandas, matplotlib' 2>/dev/null && have_pandas=yes || have_pandas=no; }
			[ "$have_pandas" = yes ] || SKIPPING="$PY cannot import pandas, matplotlib"
			;;
		esac
		[ -z "$SKIPPING" ] || return 0
	done
}

# sandbox_skip_reason [MODULE...]: why the sandbox tests cannot run here,
# or nothing when they can: the host's Python cannot import ipykernel (and
# MODULEs), or kbox doctor says the bwrap sandbox cannot be made (naming
# the failed checks).  Leaves doctor's JSON in $ROOT/doctor.json.
sandbox_skip_reason() {
	mods=ipykernel
	for m in "$@"; do
		mods="$mods, $m"
	done
	if ! "$PY" -c "import $mods" 2>/dev/null; then
		echo "$PY cannot import $mods"
		return
	fi
	"$KBOX" doctor --json >"$ROOT/doctor.json" 2>/dev/null
	"$PY" -c '
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError:
    print("kbox doctor gave no JSON"); sys.exit()
if not d.get("isolates"):
    bad = ["%s: %s" % (c["check"], c["detail"]) for c in d["checks"] if c["status"] == "fail"]
    print("the bwrap sandbox cannot be made here (" + "; ".join(bad) + ")")
' "$ROOT/doctor.json"
}

# sandbox_or_skip: run `kbox doctor --json` (kept as "doctor"); when it
# says the sandbox cannot be made here, SKIPPING says why, and every test
# that follows is skipped.
sandbox_or_skip() {
	kx doctor --json
	keep doctor
	[ "$rc" = 0 ] && return 0
	SKIPPING="kbox doctor: the bwrap sandbox cannot be made here: $("$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
print("; ".join(c["check"] + ": " + c["detail"] for c in d["checks"] if c["status"] == "fail"))
' "$W/doctor.out" 2>/dev/null)"
}

# ---- running kbox ----

# fresh: make a new empty directory under $BASE and go there ($T).
fresh() {
	T=$(mktemp -d "$BASE/t.XXXXXX") && cd "$T" || exit 1
}

# on_tty [-t SECONDS] COMMAND: the shell command line COMMAND run on a
# terminal of its own (script(1)), with no input, what the terminal shows
# in ./tty.out and its exit status in $rc; killed after SECONDS (60).
# Does nothing while skipping.  tty_shown: a check's failure that shows
# the first 12 lines of `od -c tty.out` (... || tty_shown).
on_tty() {
	_secs=60
	[ "$1" != -t ] || { _secs=$2; shift 2; }
	[ -z "$SKIPPING" ] || return 0
	timeout -k 5 "$_secs" script -qec "$1" /dev/null >tty.out 2>&1 </dev/null
	rc=$?
}
tty_shown() {
	why=$(od -c tty.out | head -n 12)
	false
}

# kbox ARGS...: run kbox in the current directory, stdout to ./stdout,
# stderr to ./stderr; $rc is its exit status.  With measure_rss=yes (and
# GNU time), $rss is its peak RSS in KiB (in ./rss).  A kbox that hangs is
# killed after 120 s (status 124).  Does nothing while skipping.
kbox() {
	[ -z "$SKIPPING" ] || return 0
	last_dir=$(pwd)
	last_out=$last_dir/stdout
	last_err=$last_dir/stderr
	if [ "${measure_rss-}" = yes ] && [ -x /usr/bin/time ]; then
		rm -f rss
		timeout -k 5 120 /usr/bin/time -f %M -o rss "$KBOX" "$@" >stdout 2>stderr
		rc=$?
		rss=$(tail -n 1 rss 2>/dev/null)
	else
		timeout -k 5 120 "$KBOX" "$@" >stdout 2>stderr
		rc=$?
	fi
}

# kexec SESSION [OPTION...] <CODE: kbox exec the code read from stdin
# (kept in ./code.py).
kexec() {
	[ -z "$SKIPPING" ] || { cat >/dev/null; return 0; }
	cat >code.py
	sess=$1
	shift
	kbox exec -s "$sess" "$@" -f code.py
}

# kx ARGS...: run kbox, stdout to $W/out, stderr to $W/err; $rc is its
# exit status.  A hung kbox is killed after 120 s.  Nothing while skipping.
kx() {
	[ -z "$SKIPPING" ] || return 0
	last_dir=$(pwd)
	last_out=$W/out
	last_err=$W/err
	timeout -k 5 120 "$KBOX" "$@" >"$W/out" 2>"$W/err"
	rc=$?
}

# pyx SESSION [EXEC-OPTION...] <CODE: kbox exec the code on standard input
# (kept in $C), through kx.
pyx() {
	sess=$1
	shift
	ncode=$((ncode + 1))
	cat >"$C/$ncode.py"
	kx exec -s "$sess" "$@" -f "$C/$ncode.py"
}

# keep NAME: save the last kx's output as $W/NAME.{out,err,rc}.
keep() {
	[ -z "$SKIPPING" ] || return 0
	cp "$W/out" "$W/$1.out"
	cp "$W/err" "$W/$1.err"
	echo "$rc" >"$W/$1.rc"
}

# val NAME KEY: the rest of the line "KEY ..." in $W/NAME.out.
val() { awk -v k="$2 " 'index($0, k) == 1 { print substr($0, length(k) + 1); exit }' "$W/$1.out"; }

# py ARGS...: the host's Python, unless skipping.
py() {
	[ -z "$SKIPPING" ] || return 0
	"$PY" "$@"
}

# fill_log PATH SIZE: append filler events to the event log PATH until it
# is SIZE bytes long (to bring it to its rotation).
fill_log() {
	"$PY" - "$1" "$2" <<'EOF'
import os, sys
path, size = sys.argv[1], int(sys.argv[2])
line = '{"event":"filler","pad":"%s"}\n'
with open(path, "a") as f:
    left = size - os.path.getsize(path)
    while left > 0:
        pad = min(left - len(line % ""), 200)
        f.write(line % ("x" * pad))
        left -= len(line % "") + pad
EOF
}

# ---- polls: what the product reports, waited for with a bound ----

# The bound of every poll: generous, so that a loaded machine does not
# fail a test; a poll that succeeds returns at once.
WAIT_SECS=${WAIT_SECS:-60}

# wait_for CMD...: CMD succeeds within $WAIT_SECS seconds (polled every
# 0.1 s); else say so, and fail.
wait_for() {
	wf_end=$(($(date +%s) + WAIT_SECS))
	while :; do
		"$@" && return 0
		if [ "$(date +%s)" -ge "$wf_end" ]; then
			say "still false after $WAIT_SECS s: $*"
			return 1
		fi
		sleep 0.1
	done
}

# is_idle NAME: `kbox status` says session NAME's kernel is idle.
is_idle() { "$KBOX" status -s "$1" 2>/dev/null | grep -q "^state: *idle$"; }
# wait_idle NAME: session NAME's kernel becomes ready and idle (a kernel
# the supervisor replaced starts in the background).
wait_idle() { wait_for is_idle "$1"; }
# running_execs NAME: `kbox status --json`'s running_execs of session NAME.
running_execs() {
	"$KBOX" status -s "$1" --json 2>/dev/null |
		"$PY" -c 'import json, sys; print(json.load(sys.stdin).get("running_execs", ""))' 2>/dev/null
}
# is_busy NAME: session NAME runs an execution (status's running_execs).
is_busy() { [ "$(running_execs "$1")" = 1 ]; }
# queued NAME: an execution of session NAME waits its turn (status's
# queued is 1).
queued() { [ "$(status_field "$1" queued)" = 1 ]; }

ppid() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f2; }
pstate() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1; }
# exited PID: the process is gone or a zombie.
exited() {
	case $(pstate "$1") in
	Z | X | "") return 0 ;;
	esac
	return 1
}
# gone PID: the process exits (is gone or a zombie) within the bound.
gone() {
	wait_for exited "$1" >/dev/null && return 0
	say "process $1 still runs: $(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)"
	return 1
}
gone_or_zombie() { gone "$@"; }
# alive PID: the process exists and has not exited.
alive() {
	! exited "$1" && return 0
	say "process $1 is gone"
	return 1
}

# cg_dir CONTROLLER PID: the directory of PID's cgroup for CONTROLLER
# (cgroup v1, or v2 where the controller is not in a v1 hierarchy).
cg_dir() {
	"$PY" - "$1" "$2" <<'EOF'
import sys
ctl, pid = sys.argv[1], sys.argv[2]
mounts = []
for line in open("/proc/self/mountinfo"):
    f = line.split()
    d = f.index("-")
    mounts.append((f[4], f[3], f[d + 1], f[d + 3].split(",")))
lines = [l.rstrip("\n").split(":", 2) for l in open("/proc/%s/cgroup" % pid)]
for hid, ctls, path in lines:
    if ctl in ctls.split(","):
        mp = [(p, r) for p, r, t, o in mounts if t == "cgroup" and ctl in o]
        break
else:
    path = [p for h, c, p in lines if h == "0"][0]
    mp = [(p, r) for p, r, t, o in mounts if t == "cgroup2"]
point, root = mp[0]
if root != "/" and path.startswith(root):
    path = path[len(root):]
print(point + (path if path != "/" else ""))
EOF
}

# status_field NAME KEY: KEY of `kbox status --json` of session NAME.
status_field() {
	[ -z "$SKIPPING" ] || return 0
	timeout -k 5 30 "$KBOX" status -s "$1" --json 2>/dev/null |
		"$PY" -c 'import json, sys; print(json.load(sys.stdin).get(sys.argv[1], ""))' "$2" 2>/dev/null
}

# kernel_conn SESSION FILE: a connection file for the kernel of session
# SESSION, as the host reaches it, written to FILE from what the kernel
# itself has: no file of the host's holds it (kbox(7), The protocol).  Its
# key, and its sockets: bwrap's in the sandbox's /run/kernel, reached
# through /proc/PID/root; none's through its descriptor 3.  Nothing while
# skipping.
kernel_conn() {
	[ -z "$SKIPPING" ] || return 0
	_kpid=$(status_field "$1" kernel_pid)
	timeout -k 5 120 "$KBOX" exec -s "$1" 'import json
from ipykernel.kernelapp import IPKernelApp
a = IPKernelApp.instance()
j = {c + "_port": getattr(a, c + "_port") for c in ("shell", "iopub", "stdin", "control", "hb")}
j.update(key=a.session.key.decode(), signature_scheme=a.session.signature_scheme,
         transport=a.transport, ip=a.ip)
print(json.dumps(j))' 2>/dev/null | tail -n 1 | "$PY" -c '
import json, sys
j = json.load(sys.stdin)
pid = sys.argv[1]
if j["ip"].startswith("/proc/self/"):
    j["ip"] = "/proc/%s/%s" % (pid, j["ip"][len("/proc/self/"):])
else:
    assert j["ip"].startswith("/run/kernel/"), j["ip"]
    j["ip"] = "/proc/%s/root%s" % (pid, j["ip"])
json.dump(j, open(sys.argv[2], "w"))' "$_kpid" "$2"
}
# npm_tool WHAT MIN_NODE DIR BIN PACKAGE_JSON: the program BIN of an npm
# package (WHAT names it), installed once into the cache DIR from
# PACKAGE_JSON (its dependencies, pinned); without npm, or node older than
# MIN_NODE, or when it cannot be installed from the npm registry, the
# script is skipped, saying why (TAP's 1..0 # SKIP).
npm_tool() {
	if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
		echo "1..0 # SKIP npm and node are not installed (setup.sh installs the npm package)"
		exit 0
	fi
	_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null)
	if [ "${_major:-0}" -lt "$2" ]; then
		echo "1..0 # SKIP node $(node --version) is older than $2, which $1 needs"
		exit 0
	fi
	[ -x "$4" ] && return 0
	mkdir -p "$3" || exit 1
	printf '%s\n' "$5" >"$3/package.json"
	if ! npm install --prefix "$3" --no-audit --no-fund --loglevel=error \
		>"$3/install.log" 2>&1 || [ ! -x "$4" ]; then
		echo "1..0 # SKIP $1 could not be installed from the npm registry (see $3/install.log)"
		exit 0
	fi
}
# http_relay SECONDS: kbox mcp --http on 127.0.0.1 (a new token) and
# tests/mcp_auth_proxy.py before it, which adds the token to every request
# for a client that cannot send one (the MCP Inspector 0.15, the
# conformance suite); both bounded by SECONDS.  RELAY_URL is the relay's
# /mcp; SERVER and RELAY their pids (in BG_PIDS: kill -TERM and wait
# them, then empty BG_PIDS).  Run in the current directory (http.err).
http_relay() {
	_token=relay-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')
	# (-k counts from our SIGTERM too: give the server's end its time;
	# --foreground: our SIGTERM goes to the server alone, which ends its
	# conversations, as a server's stop does; timeout's own signal to its
	# whole group, then SIGCONT, would reach each conversation as it exits,
	# and a SIGCONT discards the SIGSTOP of LeakSanitizer's attach, whose
	# check then waits for good)
	KBOX_MCP_TOKEN=$_token timeout --foreground -k 120 "$1" "$KBOX" mcp --http 127.0.0.1:0 >/dev/null 2>http.err &
	SERVER=$!
	wait_for grep -q "^kbox mcp: listening on http://127.0.0.1:[0-9]*/mcp$" http.err
	_port=$(sed -n 's|^kbox mcp: listening on http://127.0.0.1:\([0-9]*\)/mcp$|\1|p' http.err)
	rm -f relay.port
	timeout -k 5 "$1" "$PY" "$top_srcdir/tests/mcp_auth_proxy.py" "$_port" "$_token" \
		"$(pwd)/relay.port" &
	RELAY=$!
	BG_PIDS="$SERVER $RELAY"
	wait_for test -s relay.port
	RELAY_URL=http://127.0.0.1:$(cat relay.port)/mcp
}
# conn_key FILE: the key of a connection file.
conn_key() { [ -z "$SKIPPING" ] || return 0; "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["key"])' "$1"; }

# ---- assertions: the last kbox (./stdout, ./stderr, $rc) ----

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
# status_line KEY: the value of "KEY: value" in `kbox status` output.
status_line() { sed -n "s/^$1: *//p" stdout; }
# ls_row NAME: the row of NAME in `kbox ls` output, spaces squeezed.
ls_row() { awk -v n="$1" '$1 == n { $1 = $1; print }' stdout; }
# started_line NAME: stdout is the "started" line naming the pid in
# NAME's supervisor.pid.
started_line() {
	stdout_is "session $1 started (backend bwrap, kernel python3, supervisor pid $(cat "$S/$1/supervisor.pid"))"
}

# ---- assertions: files ----

# has_line FILE TEXT / lacks_line FILE TEXT: a line of FILE is (no line
# is) exactly TEXT.
has_line() { grep -qxF -- "$2" "$1"; }
lacks_line() { ! grep -qxF -- "$2" "$1"; }
first_line_is() { [ "$(head -n 1 "$1")" = "$2" ]; }
last_line_is() { [ "$(tail -n 1 "$1")" = "$2" ]; }
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
# json_true FILE EXPR [ARG...]: EXPR (Python, on j, the JSON in FILE, and a,
# the list of ARGs) is true; when it is not, what was judged is printed
# (a failure seen once can be read afterwards).
json_true() {
	"$PY" -c '
import json, sys
text = open(sys.argv[1]).read()
try:
    j = json.loads(text)
except ValueError as e:
    print("#   not JSON (%s): %r" % (e, text[:400]))
    sys.exit(1)
a = sys.argv[3:]
ok = eval(sys.argv[2])
if not ok:  # what was judged, for a failure seen once
    print("#   judged:", json.dumps(j)[:600])
sys.exit(0 if ok else 1)' "$@"
}
# events NAME PY-EXPR: PY-EXPR holds for ev, the list of session NAME's
# events (events.ndjson.1, the log before its last rotation, then
# events.ndjson).
events() {
	"$PY" -c '
import json, os, sys
ev = [json.loads(l) for p in (sys.argv[1] + ".1", sys.argv[1]) if os.path.exists(p)
      for l in open(p)]
ok = eval("(" + sys.argv[2] + ")")
if not ok:
    print("#   events:", [e["event"] for e in ev])
sys.exit(0 if ok else 1)
' "$S/$1/events.ndjson" "$2"
}
# logged NAME EVENT: session NAME's events.ndjson (or events.ndjson.1) has
# an event EVENT.
logged() {
	cat "$S/$1/events.ndjson.1" "$S/$1/events.ndjson" 2>/dev/null | grep -q "\"event\": *\"$2\""
}

# note_line_is FILE TEXT: FILE's first line is kbox's note "[note: TEXT]",
# or, after a kernel's death, that note naming what the code had defined
# ("[note: TEXT; it had defined: ...]").
note_line_is() {
	nl_first=$(head -n 1 "$1")
	case $nl_first in
	"[note: $2]" | "[note: $2; it had defined: "*"]") return 0 ;;
	esac
	say "first line: $nl_first"
	return 1
}

# ---- assertions: kept outputs (keep NAME) and values ----

rc_is() { [ "$(cat "$W/$1.rc")" = "$2" ] || { say "exit status $(cat "$W/$1.rc"), want $2"; return 1; }; }
out_is() { printf '%s\n' "$2" | cmp -s - "$W/$1.out"; }
eq() { [ "$1" = "$2" ] || { say "got \"$1\", want \"$2\""; return 1; }; }
ne() { [ "$1" != "$2" ] || { say "got \"$1\" twice"; return 1; }; }
le() { [ "$1" -le "$2" ] 2>/dev/null || { say "got \"$1\", want <= $2"; return 1; }; }
ge() { [ "$1" -ge "$2" ] 2>/dev/null || { say "got \"$1\", want >= $2"; return 1; }; }
one_of() {
	v=$1
	shift
	for w in "$@"; do
		[ "$v" = "$w" ] && return 0
	done
	say "got \"$v\", want one of: $*"
	return 1
}
# private DIR: DIR is ours and only we may enter it (rwx for the owner,
# nothing for group and others; a sticky bit does not matter).
private() {
	eq "$(stat -c %u "$1")" "$(id -u)" && eq "$(($(printf '%d' "0$(stat -c %a "$1")") & 511))" 448
}
# private_to UID MODE DIR: DIR is UID's with MODE (no more), in group
# SB_GID when MODE lets the group in.
private_to() {
	# ipykernel adds the sticky bit to its connection file's directory
	m=$(printf '%o' "$(($(printf '%d' "0$(stat -c %a "$3")") & 511))")
	eq "$(stat -c %u "$3")" "$1" && eq "$m" "$2" &&
		{ [ "$2" = 700 ] || eq "$(stat -c %g "$3")" "$SB_GID"; }
}

# api METHOD PATH [BODY-FILE]: the reply of the container engine
# DOCKER_HOST names (unix://PATH) to a request, its status on the first
# line, then its body (BODY-FILE a tar, or JSON when it ends in .json).
api() {
	"$PY" - "$@" <<'EOF'
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["DOCKER_HOST"].removeprefix("unix://"))
body = open(sys.argv[3], "rb").read() if len(sys.argv) > 3 else b""
kind = (b"" if len(sys.argv) <= 3 else b"Content-Type: application/json\r\n"
        if sys.argv[3].endswith(".json") else b"Content-Type: application/x-tar\r\n")
s.sendall(b"%s /v1.41%s HTTP/1.0\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n" % (
    sys.argv[1].encode(), sys.argv[2].encode(), kind, len(body)) + body)
data = b""
while chunk := s.recv(65536):
    data += chunk
head, _, rest = data.partition(b"\r\n\r\n")
print(head.split(b" ")[1].decode())
sys.stdout.write(rest.decode(errors="replace"))
EOF
}
