#!/bin/sh
# tests/harness.sh — tests/lib.sh itself: after each test's TAP line it
# says how long the test took ("#   took N.NN s") when that is at least
# TOOK_SAY_CS centiseconds, and says nothing for a quicker one.  Each case
# runs a small script that sources lib.sh and makes two checks.  TAP.
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
echo "1..$n"
