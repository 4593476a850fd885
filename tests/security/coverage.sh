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
# it reads the scripts, and runs no kbox
NEEDS_KBOX=no
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"

# The rows: table lines that start with "| N |".
ROWS=$(sed -n 's/^| *\([0-9][0-9]*\) *|.*/\1/p' "$TABLE")

# The test names: rowNN_... words outside comment lines of the scripts
# (this one has none).
NAMES=$(for f in "$DIR"/*.sh; do
	[ "$(basename "$f")" = coverage.sh ] && continue
	grep -v '^[[:space:]]*#' "$f" | grep -oE '\brow[0-9]{2}_[A-Za-z0-9_]*[A-Za-z0-9]' | sed "s|^|$(basename "$f") |"
done | sort -u)

# numbered_from_1: the rows are numbered 1 to $last, at least 21 of them.
numbered_from_1() {
	[ -n "$ROWS" ] && [ "$ROWS" = "$(seq 1 "$last")" ] && [ "$last" -ge 21 ] && return 0
	why="rows found in $TABLE: $(printf '%s' "$ROWS" | tr '\n' ' ')"
	return 1
}
# covered R: a test is named rowNN_... (NN: R in two digits).
covered() {
	nn=$(printf '%02d' "$1")
	printf '%s\n' "$NAMES" | grep -q " row${nn}_" && return 0
	why="no test named row${nn}_... in $DIR/*.sh
row $1: $(grep "^| *$1 *|" "$TABLE" | sed 's/\\|/\//g' | cut -d'|' -f3 | sed 's/^ *//; s/ *$//')"
	return 1
}

last=$(printf '%s\n' "$ROWS" | tail -n 1)
check "threats_table_rows_are_numbered_1_to_${last:-N}" numbered_from_1

for r in $ROWS; do
	check "row_$(printf '%02d' "$r")_is_covered" covered "$r"
done

tests_done
