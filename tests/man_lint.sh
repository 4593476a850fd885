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
MANDOC=${MANDOC:-}

if [ -z "$MANDOC" ]; then
	echo "1..0 # SKIP mandoc not found"
	exit 0
fi

# the pages are linted without a kbox too (the tests of the commands are
# then skipped)
NEEDS_KBOX=no
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"
fresh
TMP=$T

# options FILE: the option names (-x, --long) that appear as words in FILE, one a line.
options() {
	grep -oE -- '(^|[^[:alnum:]_-])--?[[:alpha:]][[:alnum:]-]*' "$1" |
		sed 's/^[^-]*//' | sort -u
}

# render PAGE: the page as plain text, wide enough that no option is split.
render() {
	"$MANDOC" -Tascii -O width=1000 "$1" | sed 's/.\x08//g'
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

# lint_clean PAGE: `$MANDOC -Tlint -W warning` says nothing of PAGE; else
# what it says, in $why.
lint_clean() {
	"$MANDOC" -Tlint -W warning "$1" >"$TMP/lint" 2>&1
	status=$?
	[ "$status" -eq 0 ] && [ ! -s "$TMP/lint" ] && return 0
	echo "mandoc exited $status" >>"$TMP/lint"
	why=$(cat "$TMP/lint")
	return 1
}

# none_missing: $TMP/missing is empty; else it is $why.
none_missing() {
	[ ! -s "$TMP/missing" ] && return 0
	why=$(cat "$TMP/missing")
	return 1
}

# each_command_has_its_page: each command of $TMP/commands has its page
# man/kbox-COMMAND.1, and kbox.1 points to it.
each_command_has_its_page() {
	render "$top_srcdir/man/kbox.1" >"$TMP/kbox.page"
	: >"$TMP/missing"
	while read -r cmd; do
		[ -f "$top_srcdir/man/kbox-$cmd.1" ] ||
			echo "no man/kbox-$cmd.1 for the command $cmd" >>"$TMP/missing"
		grep -qF "kbox-$cmd(1)" "$TMP/kbox.page" ||
			echo "kbox.1 does not refer to kbox-$cmd(1)" >>"$TMP/missing"
	done <"$TMP/commands"
	none_missing
}

# help_options_in_page: every option of $TMP/help is a word of the page
# ($page, rendered in $TMP/page), and --help exited 0 ($status).
help_options_in_page() {
	options "$TMP/help" >"$TMP/help.opts"
	: >"$TMP/missing"
	[ "$status" -eq 0 ] || echo "kbox $cmd --help exited $status" >>"$TMP/missing"
	[ -s "$TMP/help" ] || echo "kbox $cmd --help printed nothing" >>"$TMP/missing"
	while read -r opt; do
		has_word "$TMP/page" "$opt" ||
			echo "$opt from 'kbox $cmd --help' is not in ${page##*/}" >>"$TMP/missing"
	done <"$TMP/help.opts"
	none_missing
}

# synopsis_options_in_help: every option of the page's SYNOPSIS but for -h
# and --help, which the usages leave out, is a word of $TMP/help.
synopsis_options_in_help() {
	options "$TMP/synopsis" | grep -vxe -h -e --help >"$TMP/synopsis.opts"
	: >"$TMP/missing"
	while read -r opt; do
		has_word "$TMP/help" "$opt" ||
			echo "$opt from the SYNOPSIS of ${page##*/} is not in 'kbox $cmd --help'" >>"$TMP/missing"
	done <"$TMP/synopsis.opts"
	none_missing
}

# usage_is_synopsis: the first line of each: "kbox run [-k NAME] ..."
# against "kbox run [-k name] ...".
usage_is_synopsis() {
	grep -m1 '^usage:' "$TMP/help" | normalize >"$TMP/usage.line"
	sed -n '/[^ ]/{p;q}' "$TMP/synopsis" | normalize >"$TMP/synopsis.line"
	[ -s "$TMP/usage.line" ] && cmp -s "$TMP/usage.line" "$TMP/synopsis.line" && return 0
	why="usage:    $(cat "$TMP/usage.line")
synopsis: $(cat "$TMP/synopsis.line")"
	return 1
}

for page in "$top_srcdir"/man/*.1 "$top_srcdir"/man/*.7; do
	check "mandoc_lint_is_clean_for_${page##*/}" lint_clean "$page"
done

# Each page renders at 80 columns (man's MANWIDTH=80) without a line
# groff cannot break: what a terminal of 80 columns shows.
renders_at_80() {
	why=$(groff -mandoc -Tutf8 -rLL=78n -rLT=78n "$1" 2>&1 >/dev/null)
	[ -z "$why" ]
}
for page in "$top_srcdir"/man/*.1 "$top_srcdir"/man/*.7; do
	if command -v groff >/dev/null 2>&1; then
		check "renders_at_80_columns_${page##*/}" renders_at_80 "$page"
	else
		skip "renders_at_80_columns_${page##*/}" "no groff"
	fi
done

# The commands, from the table `kbox --help` prints; each has its page
# man/kbox-COMMAND.1, and kbox.1 points to it.
if [ ! -x "$KBOX" ]; then
	skip "every_command_has_a_page_that_kbox_1_refers_to" "$KBOX not built"
	tests_done
	exit 0
fi
"$KBOX" --help 2>&1 | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p' >"$TMP/commands"
check kbox_help_lists_commands test -s "$TMP/commands"
check every_command_has_a_page_that_kbox_1_refers_to each_command_has_its_page

# kbox itself, then each command, against its page.
for cmd in "" $(cat "$TMP/commands"); do
	if [ -n "$cmd" ]; then
		page=$top_srcdir/man/kbox-$cmd.1
	else
		page=$top_srcdir/man/kbox.1
	fi
	label=${cmd:-kbox}
	[ -f "$page" ] || continue
	if selected "${label}_help_options_are_in_its_page" \
		"${label}_page_synopsis_options_are_in_its_help" "${label}_usage_matches_page_synopsis"; then
		render "$page" >"$TMP/page"
		synopsis "$TMP/page" >"$TMP/synopsis"
		# shellcheck disable=SC2086 # an empty $cmd must vanish
		"$KBOX" $cmd --help >"$TMP/help" 2>&1
		status=$?
	fi
	check "${label}_help_options_are_in_its_page" help_options_in_page
	check "${label}_page_synopsis_options_are_in_its_help" synopsis_options_in_help
	check "${label}_usage_matches_page_synopsis" usage_is_synopsis
done

tests_done
