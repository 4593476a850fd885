#!/bin/bash
# tests/security/binds.sh — threats.md row 36: a kernelspec's
# metadata.kbox.ro_bind asks the sandbox for host paths a kernel's
# installation needs.  Only world-readable files and directories below
# /etc, /opt or /srv are bound, read-only; secrets (by name, or not
# readable by everyone, inside a directory too), kbox's own directories,
# homes, /proc, /sys and /dev are refused, and the start fails with one
# line (exit 5).  Each test is named after its row.  TAP.
#
# Environment (set by `make check`): top_builddir (or KBOX), KERNEL_PYTHON.
# Run by hand (as root and as a user):
#   KBOX=/path/to/build/kbox bash tests/security/binds.sh
# shellcheck disable=SC2016,SC2034 # eval strings expand later, using these variables
set -u
[ -n "${BASH_VERSION-}" ] || exec bash "$0" "$@"

# shellcheck source=tests/lib.sh
ROOT_TAG=ksb
. "$(dirname "$0")/../lib.sh"

cd "$W" || exit 1
sandbox_or_skip

# kernelspecs of this test's own, first on the search path
JP=$ROOT/jp
export JUPYTER_PATH=$JP
PYK='["'"$PY"'", "-m", "ipykernel_launcher", "-f", "{connection_file}"]'
# spec NAME RO_BIND-JSON: a Python kernelspec NAME asking for those binds.
spec() {
	mkdir -p "$JP/kernels/$1" || exit 1
	printf '{"argv": %s, "display_name": "%s", "language": "python", "metadata": {"kbox": {"ro_bind": %s}}}\n' \
		"$PYK" "$1" "$2" >"$JP/kernels/$1/kernel.json"
}

# refused NAME PATH WHY: a kernelspec asking for PATH does not start.
refused() {
	bname=r$n bpath=$2 bwhy=$3
	spec "$bname" "[\"$bpath\"]"
	kx start -s "$bname" -k "$bname"
	check "$1" eval '[ "$rc" = 5 ] && [ ! -s "$W/out" ] &&
		eq "$(tail -n 1 "$W/err")" "kbox start: session $bname: kernelspec $bname: metadata.kbox.ro_bind: cannot bind $bpath: $bwhy" &&
		[ ! -e "$S/$bname/supervisor.pid" ]'
}

refused row36_a_kernelspec_cannot_bind_etc_shadow /etc/shadow "its name looks secret (shadow)"
refused row36_a_kernelspec_cannot_bind_ssh_host_keys /etc/ssh "its name looks secret (ssh)"
refused row36_a_kernelspec_cannot_bind_kboxs_state_directory "$KBOX_HOME" \
	"only what lies below /etc, /opt or /srv may be bound"
refused row36_a_kernelspec_cannot_bind_proc /proc/1/environ \
	"only what lies below /etc, /opt or /srv may be bound"
refused row36_a_kernelspec_cannot_bind_all_of_etc /etc \
	"only what lies below /etc, /opt or /srv may be bound"
refused row36_a_kernelspec_cannot_escape_with_dotdot /etc/ld.so.conf.d/../shadow \
	'not an absolute path without ".."'

# What may be bound is there, and read-only.
spec ok '["/etc/ld.so.conf.d"]'
kx start -s ok -k ok
check row36_an_allowed_bind_starts eval '[ "$rc" = 0 ]'
pyx ok <<'EOF'
import errno, os
print(" ".join(sorted(os.listdir("/etc/ld.so.conf.d"))))
try:
    open("/etc/ld.so.conf.d/kbox-test.conf", "w")
    print("WRITABLE")
except OSError as e:
    print(errno.errorcode[e.errno])
print(os.path.exists("/etc/shadow"), os.path.exists("/etc/ssh"))
EOF
keep ok
check row36_an_allowed_bind_is_there_and_read_only eval 'rc_is ok 0 &&
	eq "$(sed -n 1p "$W/ok.out")" "$(ls /etc/ld.so.conf.d | sort | tr "\n" " " | sed "s/ $//")" &&
	eq "$(sed -n 2p "$W/ok.out")" EROFS'
check row36_what_was_not_asked_for_stays_out eval '[ "$(sed -n 3p "$W/ok.out")" = "False False" ]'
kx stop -s ok

tests_done
