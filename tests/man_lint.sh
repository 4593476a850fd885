#!/bin/sh
# tests/man_lint.sh — the manual pages are clean mdoc and agree with the usage
# each command prints.  TAP.
#
# For each man/*.1 and man/*.7: `$MANDOC -Tlint -W warning` prints nothing.  Each command
# in the table `kbox --help` prints has its page man/kbox-COMMAND.1, which
# kbox.1 refers to.  For kbox and each command: every option its --help
# shows is documented in its page, every option of the page's SYNOPSIS is
# shown by --help, and the usage line reads as the first SYNOPSIS line.
#
# Environment (set by `make check`): MANDOC, the mandoc program (empty: skip);
# top_srcdir, top_builddir.
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$(pwd)}
MANDOC=${MANDOC:-}
KBOX=$top_builddir/kbox

if [ -z "$MANDOC" ]; then
	echo "1..0 # SKIP mandoc not found"
	exit 0
fi

n=0

# pass NAME / fail NAME [DIAGNOSTIC-FILE] / skip NAME REASON: report one test.
pass() {
	n=$((n + 1))
	echo "ok $n - $1"
}
fail() {
	n=$((n + 1))
	echo "not ok $n - $1"
	if [ $# -gt 1 ] && [ -s "$2" ]; then
		sed 's/^/#   /' "$2"
	fi
}
skip() {
	n=$((n + 1))
	echo "ok $n - $1 # SKIP $2"
}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/kbox-manlint.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
trap 'exit 1' HUP INT TERM

# options FILE: the option names (-x, --long) that appear as words in FILE, one a line.
options() {
	grep -oE -- '(^|[^[:alnum:]_-])--?[[:alpha:]][[:alnum:]-]*' "$1" |
		sed 's/^[^-]*//' | sort -u
}

# render PAGE: the page as plain text, wide enough that no option is split.
render() {
	"$MANDOC" -Tascii -O width=400 "$1" | sed 's/.\x08//g'
}

# synopsis FILE: the SYNOPSIS section of a rendered page.
synopsis() {
	sed -n '/^SYNOPSIS/,/^[A-Z]/{/^[A-Z]/!p}' "$1"
}

# normalize: a usage or SYNOPSIS line in one case, with single spaces and
# "X..." for "X ...", without "usage:".
normalize() {
	tr '[:upper:]' '[:lower:]' | tr -s ' \t' '  ' |
		sed -e 's/^ *//' -e 's/^usage: *//' -e 's/ *\.\.\./.../g' -e 's/ *$//'
}

# has_word FILE WORD: WORD occurs in FILE, not as part of a longer word.
has_word() {
	grep -qE -- "(^|[^[:alnum:]_-])$2(\$|[^[:alnum:]_-])" "$1"
}

for page in "$top_srcdir"/man/*.1 "$top_srcdir"/man/*.7; do
	name=${page##*/}
	"$MANDOC" -Tlint -W warning "$page" >"$TMP/lint" 2>&1
	status=$?
	if [ "$status" -eq 0 ] && [ ! -s "$TMP/lint" ]; then
		pass "mandoc_lint_is_clean_for_$name"
	else
		echo "mandoc exited $status" >>"$TMP/lint"
		fail "mandoc_lint_is_clean_for_$name" "$TMP/lint"
	fi
done

# The commands, from the table `kbox --help` prints; each has its page
# man/kbox-COMMAND.1, and kbox.1 points to it.
if [ ! -x "$KBOX" ]; then
	skip "every_command_has_a_page_that_kbox_1_refers_to" "$KBOX not built"
	echo "1..$n"
	exit 0
fi
"$KBOX" --help 2>&1 | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p' >"$TMP/commands"
if [ -s "$TMP/commands" ]; then
	pass "kbox_help_lists_commands"
else
	fail "kbox_help_lists_commands"
fi
render "$top_srcdir/man/kbox.1" >"$TMP/kbox.page"
: >"$TMP/missing"
while read -r cmd; do
	[ -f "$top_srcdir/man/kbox-$cmd.1" ] ||
		echo "no man/kbox-$cmd.1 for the command $cmd" >>"$TMP/missing"
	grep -qF "kbox-$cmd(1)" "$TMP/kbox.page" ||
		echo "kbox.1 does not refer to kbox-$cmd(1)" >>"$TMP/missing"
done <"$TMP/commands"
if [ -s "$TMP/missing" ]; then
	fail "every_command_has_a_page_that_kbox_1_refers_to" "$TMP/missing"
else
	pass "every_command_has_a_page_that_kbox_1_refers_to"
fi

# kbox itself, then each command, against its page.
for cmd in "" $(cat "$TMP/commands"); do
	if [ -n "$cmd" ]; then
		page=$top_srcdir/man/kbox-$cmd.1
	else
		page=$top_srcdir/man/kbox.1
	fi
	label=${cmd:-kbox}
	[ -f "$page" ] || continue
	render "$page" >"$TMP/page"
	# shellcheck disable=SC2086 # an empty $cmd must vanish
	"$KBOX" $cmd --help >"$TMP/help" 2>&1
	status=$?
	options "$TMP/help" >"$TMP/help.opts"
	: >"$TMP/missing"
	[ "$status" -eq 0 ] || echo "kbox $cmd --help exited $status" >>"$TMP/missing"
	[ -s "$TMP/help" ] || echo "kbox $cmd --help printed nothing" >>"$TMP/missing"
	while read -r opt; do
		has_word "$TMP/page" "$opt" ||
			echo "$opt from 'kbox $cmd --help' is not in ${page##*/}" >>"$TMP/missing"
	done <"$TMP/help.opts"
	if [ -s "$TMP/missing" ]; then
		fail "${label}_help_options_are_in_its_page" "$TMP/missing"
	else
		pass "${label}_help_options_are_in_its_page"
	fi

	# The page's SYNOPSIS against the command's usage, but for -h and
	# --help, which the usages leave out.
	synopsis "$TMP/page" >"$TMP/synopsis"
	options "$TMP/synopsis" | grep -vxe -h -e --help >"$TMP/synopsis.opts"
	: >"$TMP/missing"
	while read -r opt; do
		has_word "$TMP/help" "$opt" ||
			echo "$opt from the SYNOPSIS of ${page##*/} is not in 'kbox $cmd --help'" >>"$TMP/missing"
	done <"$TMP/synopsis.opts"
	if [ -s "$TMP/missing" ]; then
		fail "${label}_page_synopsis_options_are_in_its_help" "$TMP/missing"
	else
		pass "${label}_page_synopsis_options_are_in_its_help"
	fi

	# The first line of each: "kbox run [-k NAME] ..." against
	# "kbox run [-k name] ...".
	grep -m1 '^usage:' "$TMP/help" | normalize >"$TMP/usage.line"
	sed -n '/[^ ]/{p;q}' "$TMP/synopsis" | normalize >"$TMP/synopsis.line"
	if [ -s "$TMP/usage.line" ] && cmp -s "$TMP/usage.line" "$TMP/synopsis.line"; then
		pass "${label}_usage_matches_page_synopsis"
	else
		{
			echo "usage:    $(cat "$TMP/usage.line")"
			echo "synopsis: $(cat "$TMP/synopsis.line")"
		} >"$TMP/missing"
		fail "${label}_usage_matches_page_synopsis" "$TMP/missing"
	fi
done

echo "1..$n"
