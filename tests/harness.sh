#!/bin/sh
# tests/harness.sh — tests/lib.sh itself: after each test's TAP line it
# says how long the test took ("#   took N.NN s") when that is at least
# TOOK_SAY_CS centiseconds, and says nothing for a quicker one.  Each case
# runs a small script that sources lib.sh and makes two checks; a
# KBOX_TEST_RUN that selects none of them says so.  Then a
# script that needs no kbox (NEEDS_KBOX=no) and one that does, where
# kbox is not built; and no_sanitizer_report over supervisor logs with and
# without a report.  TAP.
# shellcheck disable=SC2016 # eval strings expand later, on purpose
set -u
: "${top_srcdir:?}" "${top_builddir:?}"
. "$top_srcdir/tests/lib.sh"

# run_inner CS: a script with two passing checks, TOOK_SAY_CS=CS; its
# output in $W/inner.out
run_inner() {
	cat >"$C/inner.sh" <<INNER
. "$top_srcdir/tests/lib.sh"
check first true
check second true
INNER
	TOOK_SAY_CS=$1 top_srcdir=$top_srcdir top_builddir=$top_builddir KBOX=$KBOX \
		sh "$C/inner.sh" >"$W/inner.out" 2>&1
}

run_inner 0
check took_line_follows_each_test_at_a_threshold_of_0 eval \
	'[ "$(grep -c "^ok" "$W/inner.out")" = 2 ] &&
	[ "$(grep -Ec "^#   took [0-9]+\.[0-9][0-9] s$" "$W/inner.out")" = 2 ] &&
	[ "$(sed -n 2p "$W/inner.out" | cut -c1-9)" = "#   took " ]'
run_inner 100000
check no_took_line_under_the_threshold eval \
	'[ "$(grep -c "^ok" "$W/inner.out")" = 2 ] && ! grep -q "took" "$W/inner.out"'

# a KBOX_TEST_RUN that selects none of a script's tests says so before
# the plan (a typo would look like a pass); one that selects a test, not
cat >"$C/select.sh" <<INNER
. "$top_srcdir/tests/lib.sh"
check first true
check second true
tests_done
INNER
for sel in no_such second; do
	KBOX_TEST_RUN=$sel TOOK_SAY_CS=100000 top_srcdir=$top_srcdir top_builddir=$top_builddir \
		KBOX=$KBOX sh "$C/select.sh" >"$W/select-$sel.out" 2>&1
done
check a_selection_of_no_test_says_so_before_the_plan eval \
	'[ "$(tail -n 2 "$W/select-no_such.out")" = "# KBOX_TEST_RUN=no_such selects none of the 2 tests above: check its names and numbers
1..2" ]'
check a_selection_of_a_test_says_nothing_more eval \
	'[ "$(cat "$W/select-second.out")" = "ok 1 - first # SKIP not selected by KBOX_TEST_RUN
ok 2 - second
1..2" ]'

# run_script NAME: the script $C/NAME.sh run with a kbox that is not
# built; its output in $W/NAME.out, its exit status in $W/NAME.rc.
run_script() {
	TOOK_SAY_CS=100000 top_srcdir=$top_srcdir top_builddir=$top_builddir \
		KBOX=$ROOT/nowhere/kbox sh "$C/$1.sh" >"$W/$1.out" 2>&1
	echo $? >"$W/$1.rc"
}

# A script that says it needs no kbox (NEEDS_KBOX=no) runs without one; a
# failing check's $why follows its "not ok" line, and with no kbox run
# nothing else does.
cat >"$C/nokbox.sh" <<INNER
NEEDS_KBOX=no
. "$top_srcdir/tests/lib.sh"
fails() { why="because"; return 1; }
check first true
check second fails
tests_done
INNER
run_script nokbox
check a_script_that_needs_no_kbox_runs_without_one eval '[ "$(cat "$W/nokbox.rc")" = 0 ] &&
	[ "$(cat "$W/nokbox.out")" = "ok 1 - first
not ok 2 - second
#   because
1..2" ]'
# any other bails out
cat >"$C/kbox.sh" <<INNER
. "$top_srcdir/tests/lib.sh"
check first true
tests_done
INNER
run_script kbox
check a_script_that_needs_kbox_bails_out_without_it eval '[ "$(cat "$W/kbox.rc")" = 1 ] &&
	[ "$(cat "$W/kbox.out")" = "Bail out! $ROOT/nowhere/kbox is not built" ]'
# The hang guard: a script whose test hangs (a child that does not end)
# is stopped once no test has ended for KBOX_TEST_STALL seconds: "Bail
# out!" names the last test that ended and shows what ran under the
# script, the stuck child is ended, the script exits 1 and its cleanup
# removes its root.  A script that ends ends its guard.
cat >"$C/stuck.sh" <<INNER
NEEDS_KBOX=no
. "$top_srcdir/tests/lib.sh"
echo "# root \$ROOT"
check first true
sleep 86399
check second true
tests_done
INNER
KBOX_TEST_STALL=1 run_script stuck
stuck_root=$(sed -n 's/^# root //p' "$W/stuck.out")
check a_stuck_script_bails_out_naming_the_last_test_that_ended eval '[ "$(cat "$W/stuck.rc")" = 1 ] &&
	[ "$(sed -n 2p "$W/stuck.out")" = "ok 1 - first" ] &&
	[ "$(sed -n 3p "$W/stuck.out")" = "Bail out! no test has ended for 1 s (the last: 1 - first): the script is stuck; what runs under it, and what names $stuck_root:" ] &&
	grep -q "^#   .* sleep 86399$" "$W/stuck.out" && ! grep -q "^ok 2" "$W/stuck.out" ||
	{ echo "# rc $(cat "$W/stuck.rc")"; sed "s/^/# | /" "$W/stuck.out" "$W/stuck.err" | cut -c1-200; false; }'
check a_stuck_scripts_child_is_ended_and_its_root_removed eval '[ -n "$stuck_root" ] &&
	[ ! -e "$stuck_root" ] && ! pgrep -f "^sleep 86399$" >/dev/null'
cat >"$C/ends.sh" <<INNER
NEEDS_KBOX=no
. "$top_srcdir/tests/lib.sh"
echo "# root \$ROOT"
check first true
tests_done
INNER
run_script ends
ends_root=$(sed -n 's/^# root //p' "$W/ends.out")
# (the guard reads its root every 5 s and sleeps between reads)
guard_of() { pgrep -f "^sh -c .* hang-guard [0-9]+ $1 " >/dev/null; }
check a_script_that_ends_ends_its_guard eval '[ "$(cat "$W/ends.rc")" = 0 ] &&
	[ -n "$ends_root" ] && ! guard_of "$ends_root" && guard_of "$ROOT"'
# The guard is a job of the script: a bare `wait` (every job) would wait
# for it, and for any job an earlier section left, so no script has one.
bare_waits() {
	grep -nE "(^|[;&|(][[:space:]]*|^[[:space:]]+)wait([[:space:]]*($|;|\)|&&|\|\|)|[[:space:]]+2>)" \
		"$top_srcdir"/tests/*.sh "$top_srcdir"/tests/security/*.sh >"$W/bare.out"
	[ ! -s "$W/bare.out" ] || { cat "$W/bare.out" | sed 's/^/#   /'; return 1; }
}
check no_script_waits_for_every_job bare_waits
# no_sanitizer_report (tests_done's last test in a sanitizer build): a
# supervisor.log under $ROOT that holds a report fails it, and the report
# is shown; logs without one pass.
mkdir -p "$ROOT/h2/sessions/a" "$ROOT/h2/sessions/b"
echo "kbox-supervisor: a line of its own" >"$ROOT/h2/sessions/a/supervisor.log"
check a_supervisor_log_without_a_report_passes no_sanitizer_report
printf '%s\n' "==1==ERROR: LeakSanitizer: detected memory leaks" "Direct leak of 8 byte(s)" \
	>"$ROOT/h2/sessions/b/supervisor.log"
if no_sanitizer_report >"$W/report.out"; then sr=0; else sr=1; fi
check a_supervisor_log_with_a_leak_report_fails_and_is_shown eval '[ $sr = 1 ] &&
	grep -qxF "#   $ROOT/h2/sessions/b/supervisor.log:" "$W/report.out" &&
	grep -qxF "#     ==1==ERROR: LeakSanitizer: detected memory leaks" "$W/report.out" &&
	! grep -q "sessions/a/" "$W/report.out"'
echo "1..$n"

