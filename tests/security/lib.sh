# tests/security/lib.sh — the harness of tests/security/resources.sh and
# isolation.sh (sourced; bash): base.sh (the kbox under test, a private
# KBOX_HOME, cleanup at exit), kx/pyx/keep/val to run kbox
# and keep its outputs, check and diag for TAP, process, cgroup and status
# helpers, and assertions that explain themselves.
# shellcheck shell=bash disable=SC2016,SC2034

# shellcheck source-path=SCRIPTDIR source=base.sh
. "$(dirname "$0")/base.sh"
W=$ROOT/w
C=$ROOT/c
mkdir -m 700 "$W" "$C" || exit 1

# ---- harness ----

n=0
rc=
ms=
ncode=0

# kx ARGS...: run kbox, stdout to $W/out, stderr to $W/err; $rc is its exit
# status, $ms the milliseconds it took.  A hung kbox is killed after 90 s.
# Does nothing while skipping.
kx() {
	[ -z "$SKIPPING" ] || return 0
	t0=$(date +%s%N)
	timeout -k 5 90 "$KBOX" "$@" >"$W/out" 2>"$W/err" </dev/null
	rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
}

# pyx SESSION [EXEC-OPTION...] <CODE: kbox exec the code on standard input.
pyx() {
	sess=$1
	shift
	ncode=$((ncode + 1))
	cat >"$C/$ncode.py"
	kx exec -s "$sess" "$@" -f "$C/$ncode.py"
}

# keep NAME: save the last kbox's output as $W/NAME.{out,err,rc}.
keep() {
	[ -z "$SKIPPING" ] || return 0
	cp "$W/out" "$W/$1.out"
	cp "$W/err" "$W/$1.err"
	echo "$rc" >"$W/$1.rc"
}

# val NAME KEY: the rest of the line "KEY ..." in $W/NAME.out.
val() { awk -v k="$2 " 'index($0, k) == 1 { print substr($0, length(k) + 1); exit }' "$W/$1.out"; }

# diag NAME...: the saved outputs NAME (or the last kbox's), as comments.
diag() {
	[ $# -gt 0 ] || set -- ""
	for k in "$@"; do
		if [ -n "$k" ]; then
			o=$W/$k.out e=$W/$k.err
			echo "#   $k: exit status $(cat "$W/$k.rc" 2>/dev/null)"
		else
			o=$W/out e=$W/err
			echo "#   exit status $rc after ${ms} ms"
		fi
		[ -f "$o" ] && head -n 30 "$o" | sed 's/^/#   stdout: /'
		[ -f "$e" ] && head -n 20 "$e" | sed 's/^/#   stderr: /'
	done
	return 0
}
DIAG=

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

# check NAME CMD...: one test, passed when CMD succeeds; on failure the
# outputs named in $DIAG (or the last kbox's) are shown.
check() {
	name=$1
	shift
	n=$((n + 1))
	if [ -n "$SKIPPING" ]; then
		echo "ok $n - $name # SKIP $SKIPPING"
	elif "$@"; then
		echo "ok $n - $name"
	else
		echo "not ok $n - $name"
		# shellcheck disable=SC2086 # a list of names
		diag $DIAG
	fi
}

# say TEXT...: a diagnostic line, for a failing assertion to explain itself.
say() { echo "#   $*"; }

# ---- processes, cgroups, status ----

ppid() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f2; }
pstate() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1; }

# gone PID: within 5 s the process is gone or a zombie (it has exited).
gone() {
	for _ in $(seq 50); do
		case $(pstate "$1") in
		Z | X | "") return 0 ;;
		esac
		sleep 0.1
	done
	say "process $1 still runs: $(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)"
	return 1
}

# alive PID: the process exists and has not exited.
alive() {
	case $(pstate "$1") in
	Z | X | "") say "process $1 is gone"; return 1 ;;
	esac
	return 0
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

# conn_key FILE: the key of a connection file.
conn_key() { [ -z "$SKIPPING" ] || return 0; "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["key"])' "$1"; }

# ---- assertions ----

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
# SB_GID when MODE lets the group in
private_to() {
	m=$(stat -c %a "$3") # ipykernel adds the sticky bit to its connection file's directory
	eq "$(stat -c %u "$3")" "$1" && eq "${m: -3}" "$2" &&
		{ [ "$2" = 700 ] || eq "$(stat -c %g "$3")" "$SB_GID"; }
}
