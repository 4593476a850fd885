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
files=$(git ls-files 'src/*.[ch]' 'include/*.h' 'tests/*.[ch]' 'bench/*.c')
echo "1..1"
# shellcheck disable=SC2086 # a list of paths without blanks
if out=$(clang-format --dry-run --Werror $files 2>&1); then
	echo "ok 1 - every_c_file_follows_clang_format"
else
	echo "not ok 1 - every_c_file_follows_clang_format"
	printf '%s\n' "$out" | grep -E '^[^ ].*: (error|warning):' | head -20 | sed 's/^/#   /'
	echo "#   fix: clang-format -i FILE (the layout is .clang-format's)"
fi
