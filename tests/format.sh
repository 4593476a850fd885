#!/bin/sh
# tests/format.sh — the C sources follow .clang-format: clang-format
# (Debian 12's, 14) changes nothing in any file git tracks under src/,
# include/, tests/ and bench/.  Outside a git checkout (a release
# tarball) there is no list of files to judge, and the test is skipped.
# TAP.
set -u
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$top_srcdir" || exit 1
if ! command -v clang-format >/dev/null 2>&1; then
	echo "1..0 # SKIP no clang-format (apt-get install clang-format)"
	exit 0
fi
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1 || [ ! -e .git ]; then
	echo "1..0 # SKIP not a git checkout: no list of the project's files"
	exit 0
fi
# it runs clang-format, no kbox
NEEDS_KBOX=no
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"

# formatted: clang-format changes none of the files git tracks; else the
# first of what it would change, and how to fix it, in $why.
formatted() {
	files=$(git ls-files 'src/*.[ch]' 'include/*.h' 'tests/*.[ch]' 'bench/*.c')
	# shellcheck disable=SC2086 # a list of paths without blanks
	out=$(clang-format --dry-run --Werror $files 2>&1) && return 0
	why="$(printf '%s\n' "$out" | grep -E '^[^ ].*: (error|warning):' | head -20)
fix: clang-format -i FILE (the layout is .clang-format's)"
	return 1
}

check every_c_file_follows_clang_format formatted
tests_done
