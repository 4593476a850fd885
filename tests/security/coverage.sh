#!/bin/sh
# tests/security/coverage.sh — every row of the threat table in
# tests/security/threats.md has at least one test: a test named rowNN_...
# (NN the row's number in two digits) in one of the other scripts of
# tests/security/.  One test per row, row_NN_is_covered.  TAP.
#
# Environment (set by `make check`): top_srcdir.  Run by hand:
#   sh tests/security/coverage.sh
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
DIR=$top_srcdir/tests/security
TABLE=$DIR/threats.md

if [ ! -r "$TABLE" ]; then
	echo "Bail out! cannot read $TABLE"
	exit 1
fi

n=0

# The rows: table lines that start with "| N |".
ROWS=$(sed -n 's/^| *\([0-9][0-9]*\) *|.*/\1/p' "$TABLE")

# The test names: rowNN_... words outside comment lines of the scripts
# (this one has none).
NAMES=$(for f in "$DIR"/*.sh; do
	[ "$(basename "$f")" = coverage.sh ] && continue
	grep -v '^[[:space:]]*#' "$f" | grep -oE '\brow[0-9]{2}_[A-Za-z0-9_]*[A-Za-z0-9]' | sed "s|^|$(basename "$f") |"
done | sort -u)

n=$((n + 1))
last=$(printf '%s\n' "$ROWS" | tail -n 1)
if [ -n "$ROWS" ] && [ "$ROWS" = "$(seq 1 "$last")" ] && [ "$last" -ge 21 ]; then
	echo "ok $n - threats_table_rows_are_numbered_1_to_$last"
else
	echo "not ok $n - threats_table_rows_are_numbered_1_to_${last:-N}"
	echo "#   rows found in $TABLE: $(printf '%s' "$ROWS" | tr '\n' ' ')"
fi

for r in $ROWS; do
	nn=$(printf '%02d' "$r")
	n=$((n + 1))
	tests=$(printf '%s\n' "$NAMES" | grep " row${nn}_" | sort -u)
	if [ -n "$tests" ]; then
		echo "ok $n - row_${nn}_is_covered"
	else
		echo "not ok $n - row_${nn}_is_covered"
		echo "#   no test named row${nn}_... in $DIR/*.sh"
		echo "#   row $r: $(grep "^| *$r *|" "$TABLE" | sed 's/\\|/\//g' | cut -d'|' -f3 | sed 's/^ *//; s/ *$//')"
	fi
done

echo "1..$n"
