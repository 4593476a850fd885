# tests/security/cwd.sh — the harness of tests/security/files.sh and
# protocol.sh (sourced; POSIX sh): base.sh, then each test in a fresh
# directory of its own where `kbox` leaves ./stdout, ./stderr, $rc and $rss,
# check and diag for TAP, the assertions both use, and why the sandbox
# tests cannot run here, if they cannot.
# shellcheck shell=sh disable=SC2034

# shellcheck source-path=SCRIPTDIR source=base.sh
. "$(dirname "$0")/base.sh"
BASE=$ROOT/t
mkdir -m 711 "$BASE" || exit 1

n=0
rc=
rss=
T=
why=

# fresh: make a new empty directory and go there.
fresh() {
	T=$(mktemp -d "$BASE/t.XXXXXX") && cd "$T" || exit 1
}

# kbox ARGS...: run kbox in the current directory, stdout to ./stdout,
# stderr to ./stderr, stdin from /dev/null; $rc is its exit status and
# $rss its peak RSS in KiB (GNU time), empty without /usr/bin/time.  A kbox
# that hangs is killed after 120 s (status 124).  Nothing while skipping.
kbox() {
	[ -z "$SKIPPING" ] || return 0
	rm -f rss
	if [ -x /usr/bin/time ]; then
		timeout -k 5 120 /usr/bin/time -f %M -o rss "$KBOX" "$@" >stdout 2>stderr </dev/null
		rc=$?
		rss=$(tail -n 1 rss 2>/dev/null)
	else
		timeout -k 5 120 "$KBOX" "$@" >stdout 2>stderr </dev/null
		rc=$?
		rss=
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

# py ARGS...: the host's Python, unless skipping.
py() {
	[ -z "$SKIPPING" ] || return 0
	"$PY" "$@"
}

# diag: the last kbox's status, peak RSS and output, and $why, as comments.
diag() {
	echo "#   in $T: exit status $rc, peak RSS ${rss:-?} KiB"
	[ -n "$why" ] && printf '%s\n' "$why" | sed 's/^/#   /'
	[ -f stdout ] && head -n 20 stdout | cut -c 1-300 | sed 's/^/#   stdout: /'
	[ -f stderr ] && head -n 20 stderr | cut -c 1-300 | sed 's/^/#   stderr: /'
	return 0
}

# check NAME CMD...: one test, passed when CMD succeeds.
check() {
	name=$1
	shift
	n=$((n + 1))
	why=
	if [ -n "$SKIPPING" ]; then
		echo "ok $n - $name # SKIP $SKIPPING"
	elif "$@"; then
		echo "ok $n - $name"
	else
		echo "not ok $n - $name"
		diag
	fi
	why=
}

# ---- assertions ----

status_is() { [ "$rc" = "$1" ]; }
stdout_is() { printf '%s\n' "$1" | cmp -s - stdout; }
stderr_is() { printf '%s\n' "$1" | cmp -s - stderr; }
stdout_empty() { [ ! -s stdout ]; }
stderr_empty() { [ ! -s stderr ]; }
# fails_with STATUS TEXT: exit STATUS, nothing on stdout, exactly the line
# TEXT on stderr.
fails_with() {
	[ "$rc" = "$1" ] && [ ! -s stdout ] && [ "$(wc -l <stderr)" -eq 1 ] && stderr_is "$2"
}
has_line() { grep -qxF -- "$2" "$1"; }
# json_true FILE EXPR [ARG...]: EXPR (Python, on j, the JSON in FILE, and a,
# the list of ARGs) is true.
json_true() {
	"$PY" -c 'import json, sys; j = json.load(open(sys.argv[1])); a = sys.argv[3:]; sys.exit(0 if eval(sys.argv[2]) else 1)' "$@"
}

# ---- can the sandbox be made here? ----

# sandbox_skip_reason [MODULE...]: why the tests cannot run here, or nothing
# when they can: the host's Python cannot import ipykernel (and MODULEs), or
# kbox doctor says the bwrap sandbox cannot be made (naming the failed
# checks).  Leaves doctor's JSON in $ROOT/doctor.json.
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
