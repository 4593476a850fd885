#!/bin/bash
# tests/security/identity.sh — threats.md rows 22, 29, 44 and 48: who the
# sandbox is on the host, and what of it outlives a kernel.  Under root
# each session's sandbox runs as a uid of its own, from the unprivileged
# sandbox user's range in /etc/subuid (KBOX_SANDBOX_USER, default kbox), in
# that user's group: nothing in it is root outside, the device nodes bound
# into /dev cannot be chmod'ed or chown'ed (a chown to their own owner,
# which changes nothing, is allowed, and sets their ctime on the host),
# files it makes are that uid's,
# and one session's uid cannot read another's files.  As an ordinary user
# it is that user.  In both,
# nothing outside /workspace, /home/kbox, /tmp, /dev/shm and /run/kernel
# is writable.  What code leaves in the sandbox's home (IPython startup files
# and configuration, a .pth or usercustomize in the user site, a
# matplotlibrc) does not run in the next kernel, unless the session is
# started with --home-config on; a module it leaves in the workspace named
# like one of the system's (json, a site package) is not what the next
# kernel imports: the workspace is last on the module path.  Each test is
# named after its row.  TAP.
#
# Environment (set by `make check`): top_builddir (or KBOX), KERNEL_PYTHON.
# Run by hand (as root and as a user):
#   KBOX=/path/to/build/kbox bash tests/security/identity.sh
# shellcheck disable=SC2016,SC2034 # eval strings expand later, using these variables
set -u
[ -n "${BASH_VERSION-}" ] || exec bash "$0" "$@"

# shellcheck source=tests/lib.sh
ROOT_TAG=ksd
. "$(dirname "$0")/../lib.sh"

cd "$W" || exit 1
sandbox_or_skip

# who the sandbox must be on the host
if [ "$(id -u)" = 0 ]; then
	SU=${KBOX_SANDBOX_USER:-kbox}
	SXU=$(id -u "$SU" 2>/dev/null)
	XG=$(id -g "$SU" 2>/dev/null)
	[ -n "$SXU" ] || SKIPPING=${SKIPPING:-"no sandbox user $SU (kbox doctor --fix makes it)"}
	# the sessions' uids: the sandbox user's range (kbox doctor --fix gives it)
	RANGE=$(awk -F: -v u="$SU" '$1 == u { print $2, $2 + ($3 > 65536 ? 65536 : $3) - 1; exit }' /etc/subuid 2>/dev/null)
	[ -n "$RANGE" ] || SKIPPING=${SKIPPING:-"the sandbox user $SU has no range in /etc/subuid (kbox doctor --fix gives one)"}
	XU="(the session's)"
else
	XU=$(id -u)
	XG=$(id -g)
fi
echo "# running as uid $(id -u); the sandbox must be uid ${XU:-?} gid ${XG:-?} on the host${RANGE:+ (uids $RANGE)}"

identity=$("$PY" -c '
import json, sys
for c in json.load(open(sys.argv[1]))["checks"]:
    if c["check"] == "identity": print(c["status"], c["detail"])
' "$W/doctor.out" 2>/dev/null)
DIAG=doctor
if [ "$(id -u)" = 0 ]; then
	want_identity="ok under root, each session's sandbox runs as a uid of its own, from ${RANGE% *}-${RANGE#* } (the sandbox user $SU's range), in group $SU (gid $XG): uid 1000 inside is that uid outside, never root"
else
	want_identity="ok sandboxes run as you (uid $XU); inside, uid 1000 is you, and nothing else of the host"
fi
check "row22_kbox_doctor_reports_the_sandboxs_host_identity" eval 'eq "$identity" "$want_identity"'
# (as an ordinary user, a state directory not made yet: it can be)
if [ "$(id -u)" != 0 ]; then
	KBOX_HOME=$ROOT/notyet/k kx doctor --json
	keep doctor_notyet
	check "row22_kbox_doctor_says_a_state_directory_not_made_yet_can_be" eval '
		"$PY" -c "import json, sys
c = [c for c in json.load(open(sys.argv[1]))[\"checks\"] if c[\"check\"] == \"state directory\"]
assert c == [{\"check\": \"state directory\", \"status\": \"ok\", \"detail\": sys.argv[2] + \": not made yet; it can be made, private to you\", \"meaning\": \"\"}] or print(c)" \
		"$W/doctor_notyet.out" "$ROOT/notyet/k"'
fi

# the host's device nodes, before
# (/dev/ptmx is a link to the sandbox's own devpts instance: not the host's)
devs="/dev/null /dev/zero /dev/full /dev/random /dev/urandom /dev/tty"
# shellcheck disable=SC2086
before=$(stat -c '%n %a %u %g' $devs)

kx start -s i
keep start
DIAG=start
check "row22_a_sandboxed_session_starts" eval 'rc_is start 0'
[ -n "$SKIPPING" ] || [ -s "$S/i/supervisor.pid" ] || SKIPPING="the session did not start"
SUP=$(cat "$S/i/supervisor.pid" 2>/dev/null)
KPID=$(status_field i kernel_pid)
[ "$(id -u)" != 0 ] || XU=$(status_field i sandbox_uid)
DIAG=
check "row22_kbox_status_says_the_sandboxs_host_uid" eval '
	if [ "$(id -u)" = 0 ]; then
		ge "$XU" "${RANGE% *}" && le "$XU" "${RANGE#* }" && ne "$XU" "$SXU" &&
		eq "$(cat "$S/i/sandbox.uid")" "$XU"
	else
		eq "$(status_field i sandbox_uid)" "$(id -u)"
	fi'

DIAG=probe
pyx i <<'EOF'
import errno, os
def tried(f, *a):
    try:
        f(*a)
        return "done"
    except OSError as e:
        return errno.errorcode[e.errno]
for dev in ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"):
    key = dev[1:].replace("/", "_")
    print("chmod_" + key, tried(os.chmod, dev, 0o600))
    print("chown_" + key, tried(os.chown, dev, 1000, 1000))
with open("/dev/null", "w") as f:
    print("devnull_write", f.write("x"))
print("urandom", len(os.urandom(8)))
print("uid", os.getuid(), os.geteuid(), os.getgid())
print("groups", sorted(set(os.getgroups()) - {os.getgid()}))
open("/workspace/made", "w").write("x")
open("/home/kbox/made", "w").write("x")
print("made_uid", os.stat("/workspace/made").st_uid, os.stat("/home/kbox/made").st_uid)
# every place that could be written: mount points, top-level directories
cands = set()
for l in open("/proc/self/mountinfo"):
    cands.add(l.split()[4])
for top in os.listdir("/"):
    cands.add("/" + top)
for sub in ("/dev/shm", "/dev/pts", "/dev/mqueue", "/etc", "/usr/lib", "/usr/local", "/var/tmp",
            "/run", "/proc/self", "/proc/sys", "/sys/fs/cgroup", "/home"):
    cands.add(sub)
ok = []
for d in sorted(cands):
    if os.path.islink(d) or not os.path.isdir(d):
        continue
    p = os.path.join(d, ".kbox-probe-%d" % os.getpid())
    if tried(os.mkdir, p) == "done":
        os.rmdir(p)
        ok.append(d)
        continue
    try:
        os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        os.unlink(p)
        ok.append(d)
    except OSError:
        pass
print("writable", " ".join(ok))
EOF
keep probe
for dev in $devs; do
	dk=${dev#/}
	dk=${dk//\//_}
	check "row22_chmod_of_${dk}_is_EPERM" eval 'rc_is probe 0 && eq "$(val probe chmod_'"$dk"')" EPERM'
	check "row22_chown_of_${dk}_is_EPERM" eval 'rc_is probe 0 && eq "$(val probe chown_'"$dk"')" EPERM'
done
# shellcheck disable=SC2086
after=$(stat -c '%n %a %u %g' $devs)
check "row22_the_hosts_device_nodes_are_unchanged" eval 'eq "$after" "$before"'
check "row22_the_device_nodes_still_work" eval '
	rc_is probe 0 && eq "$(val probe devnull_write)" 1 && eq "$(val probe urandom)" 8'
# chown(PATH, -1, -1) changes nothing, so Linux lets anyone make it, and
# it sets the node's ctime: the sandbox's /dev/null is the host's, bound,
# so its ctime on the host changes (kbox(7) CAVEATS); its owner, group
# and mode do not.  (Another process may change the ctime too: it is only
# said to differ, never to be a given time.)
ctime_before=$(stat -c '%z' /dev/null)
owner_before=$(stat -c '%a %u %g' /dev/null)
pyx i <<'EOF'
import errno, os
try:
    os.chown("/dev/null", -1, -1)
    print("chown_same done")
except OSError as e:
    print("chown_same", errno.errorcode[e.errno])
EOF
keep chown_same
DIAG=chown_same
check "row22_chown_of_dev_null_to_its_own_owner_succeeds_in_the_sandbox" eval '
	rc_is chown_same 0 && eq "$(val chown_same chown_same)" done'
check "row22_that_chown_changes_the_hosts_dev_null_ctime" eval '
	rc_is chown_same 0 && ne "$(stat -c %z /dev/null)" "$ctime_before"'
check "row22_that_chown_leaves_the_hosts_dev_null_owner_group_and_mode" eval '
	rc_is chown_same 0 && eq "$(stat -c "%a %u %g" /dev/null)" "$owner_before"'
check "row22_inside_the_kernel_is_uid_1000_without_other_groups" eval '
	rc_is probe 0 && eq "$(val probe uid)" "1000 1000 1000" && eq "$(val probe groups)" "[]"'
check "row22_files_the_kernel_makes_are_the_sandbox_users_on_the_host" eval '
	rc_is probe 0 && eq "$(val probe made_uid)" "1000 1000" &&
	eq "$(stat -c %u:%g "$S/i/workspace/made")" "$XU:$XG" &&
	eq "$(stat -c %u:%g "$S/i/home/made")" "$XU:$XG"'
# (/run/kernel: the tmpfs of the kernel's connection file and sockets,
# the sandbox's own; ipykernel writes its file again once its sockets are
# bound)
check "row22_only_workspace_home_tmp_dev_shm_and_run_kernel_are_writable" eval '
	rc_is probe 0 && eq "$(val probe writable)" "/dev/shm /home/kbox /run/kernel /tmp /workspace"'

# the kernel's process, seen from the host
ids_of() { awk '/^(Uid|Gid):/ { print $2, $3, $4, $5 }' "/proc/$1/status" 2>/dev/null | tr '\n' ' '; }
DIAG=
check "row22_the_kernel_runs_as_the_sandbox_user_on_the_host" eval '
	eq "$(ids_of "$KPID")" "$XU $XU $XU $XU $XG $XG $XG $XG "'
check "row22_the_kernels_uid_1000_maps_to_the_sandbox_user" eval '
	eq "$(awk "{ print \$1, \$2, \$3 }" "/proc/$KPID/uid_map")" "1000 $XU 1" &&
	eq "$(awk "{ print \$1, \$2, \$3 }" "/proc/$KPID/gid_map")" "1000 $XG 1"'
# every process under the supervisor: bwrap, its init, the kernel
descendants() {
	local p c
	for p in "$@"; do
		for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do
			echo "$c"
			descendants "$c"
		done
	done
}
# all_are_sandbox_user: every process under the supervisor (at least one)
# has the sandbox user's effective uid
all_are_sandbox_user() {
	local procs p u
	procs=$(descendants "$SUP")
	say "processes under the supervisor: $(echo $procs)"
	[ -n "$procs" ] || return 1
	for p in $procs; do
		u=$(awk '/^Uid:/ { print $3 }' "/proc/$p/status" 2>/dev/null)
		[ -z "$u" ] || eq "$u" "$XU" || return 1
	done
}
check "row22_no_process_of_the_sandbox_is_root_on_the_host" all_are_sandbox_user

# kbox put: the file is the workspace's, that is the sandbox user's
echo "from the host" >"$W/put.txt"
kx put -s i "$W/put.txt" put.txt
keep put
DIAG=put
check "row22_kbox_put_gives_the_file_to_the_sandbox_user" eval '
	rc_is put 0 && eq "$(stat -c %u:%g "$S/i/workspace/put.txt")" "$XU:$XG"'
pyx i <<'EOF'
with open("/workspace/put.txt", "a") as f:
    f.write("and from the kernel\n")
print(open("/workspace/put.txt").read(), end="")
EOF
keep put2
DIAG=put2
check "row22_the_kernel_can_write_a_file_kbox_put_gave_it" eval '
	rc_is put2 0 && eq "$(tail -n 1 "$W/put2.out")" "and from the kernel"'

# a restart: the new kernel is the sandbox user's too, in the same directories
kx restart -s i
keep restart
KPID2=$(status_field i kernel_pid)
DIAG=restart
check "row22_after_a_restart_the_kernel_is_still_the_sandbox_user" eval '
	rc_is restart 0 && ne "$KPID2" "$KPID" &&
	eq "$(ids_of "$KPID2")" "$XU $XU $XU $XU $XG $XG $XG $XG "'

# under root: the state directory is passed through, not opened to the user
if [ "$(id -u)" = 0 ]; then
	DIAG=
	check "row22_under_root_the_session_dir_is_0710_root_and_the_sandbox_users_group" eval '
		eq "$(stat -c %a:%u:%g "$S/i")" "710:0:$XG" && eq "$(stat -c %a:%u "$S/i/run")" "700:0" &&
		eq "$(stat -c %a:%u "$S/i/outputs")" "700:0" &&
		eq "$(stat -c %a:%u "$S/i/session.json")" "600:0"'
	# a state directory the sandbox user cannot reach: one clear error
	mkdir -m 700 "$ROOT/closed"
	kx_home() { KBOX_HOME=$ROOT/closed/h kx "$@"; }
	kx_home start -s c
	keep closed
	DIAG=closed
	check "row22_under_root_an_unreachable_state_dir_is_one_clear_error" eval '
		! rc_is closed 0 >/dev/null &&
		grep -q "the sandbox (uid [0-9]*, group $SU.s) cannot reach $ROOT/closed/h/sessions/c/home: $ROOT/closed is mode 0700, owner 0:0" "$W/closed.err"'
	# a home directory kbox did not make as the state directory
	# (KBOX_HOME=/root, say): refused as it is, not opened to the
	# sandboxes (newcomer 7's F2)
	mkdir -m 711 "$ROOT/pass"
	mkdir -m 700 "$ROOT/pass/own"
	HOME=$ROOT/pass/own KBOX_HOME=$ROOT/pass/own kx start -s c
	keep own_closed
	DIAG=own_closed
	check "row22_under_root_a_closed_home_as_state_dir_is_refused_unchanged" eval '
		rc_is own_closed 5 && eq "$(stat -c %a:%u:%g "$ROOT/pass/own")" 700:0:0 &&
		[ -z "$(ls -A "$ROOT/pass/own")" ] &&
		grep -qxF "kbox start: the state directory $ROOT/pass/own is a home directory, best kept closed: kbox would open it to the sandboxes (mode 0710, group $SU); give KBOX_HOME a directory of its own outside it, or leave KBOX_HOME unset for the default, /var/lib/kbox" "$W/own_closed.err"'
	# the advice names the variable the path came from, and none when it
	# was root's default, a home here (review 20, N20-1: it named
	# "XDG_STATE_HOME=(null)"); the default one seen in a mount namespace
	# of the test's own, /var/lib/kbox a private empty directory there
	mkdir -m 711 "$ROOT/pass/xdg" && mkdir -m 700 "$ROOT/pass/xdg/kbox"
	(unset KBOX_HOME && HOME=$ROOT/pass/xdg/kbox XDG_STATE_HOME=$ROOT/pass/xdg kx start -s c &&
		keep xdg_closed)
	mkdir -m 700 "$ROOT/pass/fake"
	if [ -z "$SKIPPING" ]; then
		(unset KBOX_HOME XDG_STATE_HOME && HOME=/var/lib/kbox timeout -k 5 120 unshare -m \
			--propagation private sh -c 'mount --bind "$1" /var/lib/kbox && exec "$2" start -s c' \
			sh "$ROOT/pass/fake" "$KBOX" >"$W/default_closed.out" 2>"$W/default_closed.err")
		echo $? >"$W/default_closed.rc"
	fi
	DIAG="xdg_closed default_closed"
	check "row22_under_root_a_closed_home_names_where_its_path_came_from" eval '
		rc_is xdg_closed 5 && rc_is default_closed 5 &&
		grep -qxF "kbox start: the state directory $ROOT/pass/xdg/kbox is a home directory, best kept closed: kbox would open it to the sandboxes (mode 0710, group $SU); its path comes from XDG_STATE_HOME=$ROOT/pass/xdg: give KBOX_HOME a directory of its own outside it, or leave XDG_STATE_HOME unset for the default, /var/lib/kbox" "$W/xdg_closed.err" &&
		grep -qxF "kbox start: the state directory /var/lib/kbox is a home directory, best kept closed: kbox would open it to the sandboxes (mode 0710, group $SU); give KBOX_HOME a directory of its own outside it" "$W/default_closed.err" &&
		[ -z "$(ls -A "$ROOT/pass/fake")" ]'
	# kbox doctor says so too, and its exit status says no session starts
	KBOX_HOME=$ROOT/closed/h kx doctor
	keep doctor_closed
	DIAG=doctor_closed
	check "row22_under_root_kbox_doctor_fails_an_unreachable_state_dir" eval '
		rc_is doctor_closed 5 &&
		grep -q "^fail  state directory  the sandboxes (a uid of their own each, group $SU.s) cannot reach $ROOT/closed: $ROOT/closed is mode 0700" "$W/doctor_closed.out" &&
		eq "$(tail -n 1 "$W/doctor_closed.out")" "the default backend (bwrap) isolates kernels here, but no session in the state directory can start (see above)"'
	KBOX_HOME=$ROOT/closed/h "$KBOX" stop --all >/dev/null 2>&1
	# kbox start of one: the same diagnosis (not a failure to move the
	# sandbox into its cgroup), and no session left
	mkdir -p "$ROOT/closed/rfs/etc" && ln -s /usr "$ROOT/closed/rfs/usr" &&
		for d in bin sbin lib lib64; do ln -s "usr/$d" "$ROOT/closed/rfs/$d"; done
	kx start -s rf --rootfs "$ROOT/closed/rfs"
	keep start_rootfs
	DIAG=start_rootfs
	check "row22_under_root_kbox_start_says_the_sandbox_cannot_reach_its_rootfs" eval '
		rc_is start_rootfs 5 && [ ! -e "$S/rf" ] &&
		grep -q "^kbox start: session rf: the sandbox (uid [0-9]*, group $SU.s) cannot reach $ROOT/closed/rfs: $ROOT/closed is mode 0700" "$W/start_rootfs.err"'
	# a --rootfs under a directory the sandboxes cannot pass: the same
	# diagnosis and chmod, not "cannot isolate kernels here"
	mkdir -p "$ROOT/closed/rootfs/usr"
	kx doctor --rootfs "$ROOT/closed/rootfs"
	keep doctor_rootfs
	DIAG=doctor_rootfs
	check "row22_under_root_kbox_doctor_says_the_sandbox_cannot_reach_a_rootfs" eval '
		rc_is doctor_rootfs 5 &&
		grep -qxF "fail  rootfs           the sandboxes (a uid of their own each, group $SU'"'"'s) cannot reach $ROOT/closed/rootfs: $ROOT/closed is mode 0700, owner 0:0 (make it searchable by that group or others, e.g. chmod o+x $ROOT/closed, or use a directory outside it)" "$W/doctor_rootfs.out" &&
		eq "$(tail -n 1 "$W/doctor_rootfs.out")" "the default backend (bwrap) isolates kernels here, but no session with this --rootfs can start (see above)"'
	# a state directory in a closed home (root's): the advice is another
	# directory, never to open the home
	RH=$(getent passwd 0 | cut -d: -f6)
	if [ -d "$RH" ] && [ $((0$(stat -c %a "$RH") & 011)) -eq 0 ] &&
		KH=$(mktemp -d "$RH/kbox-test.XXXXXX"); then
		KBOX_HOME=$KH kx start -s inhome
		keep start_in_home
		rm -rf "$KH"
		DIAG=start_in_home
		check "row22_under_root_a_state_directory_in_a_closed_home_is_told_to_move" eval '
			rc_is start_in_home 5 &&
			grep -q "cannot reach $KH/sessions/inhome/[a-z/]*: $RH is mode 0[0-7]*, owner 0:0 ($RH is a home directory, best kept closed: use a directory outside it)\$" "$W/start_in_home.err"'
	else
		skip row22_under_root_a_state_directory_in_a_closed_home_is_told_to_move \
			"root's home is not a closed directory here"
	fi
	# --fix makes no user of a name useradd would take as an option
	KBOX_SANDBOX_USER=-rf kx doctor --fix
	keep fix_bad
	DIAG=fix_bad
	check "row22_under_root_doctor_fix_refuses_a_bad_user_name" eval '
		rc_is fix_bad 5 && ! id -- -rf >/dev/null 2>&1 &&
		grep -qxF "fail  identity         cannot create the user \"-rf\": a user name is 1 to 32 of a-z, 0-9, '"'_'"' and '"'-'"', starting with a letter or '"'_'"'" "$W/fix_bad.out"'
	# kbox run --workspace of root's own: the code (a uid of its own in
	# the sandbox user's group) may only read it, and kbox run says that
	# instead
	mkdir -m 755 "$ROOT/rootws"
	cd "$ROOT" || exit 1
	kx run --workspace rootws -c 'print(1)'
	keep run_rootws
	cd "$W" || exit 1
	DIAG=run_rootws
	check "row22_under_root_kbox_run_says_the_sandbox_user_cannot_write_the_workspace" eval '
		rc_is run_rootws 0 &&
		eq "$(cat "$W/run_rootws.err")" "kbox run: warning: --workspace rootws: the code runs as a uid of its own in the sandbox group $SU (gid $XG), which cannot write $ROOT/rootws: the code can read its files, and change those that group may (chgrp $SU $ROOT/rootws && chmod g+rwx $ROOT/rootws to let it write)"'

	# a sandbox user that does not exist
	KBOX_SANDBOX_USER=kbox-no-such-user-$$ kx start -s nouser
	keep nouser
	DIAG=nouser
	check "row22_under_root_a_missing_sandbox_user_is_one_clear_error" eval '
		! rc_is nouser 0 >/dev/null &&
		grep -q "there is no user \"kbox-no-such-user-$$\": create it with .kbox doctor --fix." "$W/nouser.err"'
	KBOX_SANDBOX_USER=root kx start -s rootuser
	keep rootuser
	DIAG=rootuser
	check "row22_under_root_the_sandbox_user_may_not_be_root" eval '
		! rc_is rootuser 0 >/dev/null &&
		grep -q "the sandbox user \"root\" is uid 0, gid 0: it must be neither root nor in root.s group" "$W/rootuser.err"'

	# ---- row 44: each session's sandbox a uid of its own ----
	# A range of one uid of the sandbox user's own (its last, which the
	# other tests' sessions, taking the first free, do not reach), named by
	# KBOX_SUBUID_FILE: the second session gets none until the first's
	# directory goes.
	LAST=${RANGE#* }
	printf '%s:%s:1\n' "$SU" "$LAST" >"$W/subuid.one"
	: >"$W/subuid.none"
	kx_one() { KBOX_SUBUID_FILE=$W/subuid.one kx "$@"; }
	# no_process_as UID: no process (but zombies) runs as UID, real,
	# effective, saved or file-system
	no_process_as() {
		cat /proc/[0-9]*/status 2>/dev/null | awk -v u="$1" '
			/^Name:/ { z = 0 }
			/^State:/ { z = $2 == "Z" }
			/^Uid:/ && !z && ($2 == u || $3 == u || $4 == u || $5 == u) { found = 1 }
			END { exit found }'
	}
	pyx i <<'EOF'
import os
with open("/workspace/secret-i", "w") as f:
    f.write("of session i\n")
print("mode", oct(os.stat("/workspace/secret-i").st_mode & 0o777))
EOF
	keep secret_i
	kx_one start -s p1
	keep p1
	P1=$(status_field p1 sandbox_uid)
	kx_one start -s p2
	keep p2_taken
	DIAG="secret_i p1 p2_taken"
	check "row44_under_root_a_session_gets_its_own_uid_from_the_range" eval '
		rc_is p1 0 && eq "$P1" "$LAST" && ne "$P1" "$XU" && eq "$(cat "$S/p1/sandbox.uid")" "$LAST" &&
		eq "$(cut -d" " -f2- "/var/lib/kbox/uids/$LAST")" "$S/p1"'
	check "row44_under_root_another_sessions_uid_cannot_read_a_sessions_files" eval '
		rc_is secret_i 0 && eq "$(val secret_i mode)" 0o644 &&
		setpriv --reuid="$XU" --regid="$XG" --clear-groups cat "$S/i/workspace/secret-i" >/dev/null &&
		! setpriv --reuid="$P1" --regid="$XG" --clear-groups cat "$S/i/workspace/secret-i" 2>/dev/null &&
		! setpriv --reuid="$P1" --regid="$XG" --clear-groups ls "$S/i/home" >/dev/null 2>&1'
	check "row44_under_root_when_the_range_is_taken_a_start_says_so" eval '
		! rc_is p2_taken 0 >/dev/null &&
		grep -qF "all 1 sandbox uids ($LAST-$LAST, the sandbox user $SU'"'"'s range) are taken by sessions" "$W/p2_taken.err" &&
		[ ! -e "$S/p2/sandbox.uid" ]'
	# the uid goes back when its session's directory goes (here by hand;
	# kbox run's own at its end): the file the run makes in a workspace its
	# group may write is that uid's
	kx stop -s p1
	rm -rf "${S:?}/p1"
	mkdir -m 770 "$ROOT/ws1"
	chgrp "$XG" "$ROOT/ws1"
	KBOX_SUBUID_FILE=$W/subuid.one kx run --workspace "$ROOT/ws1" -c 'open("made", "w").close()'
	keep run_one
	DIAG=run_one
	check "row44_under_root_a_uid_whose_session_went_is_taken_again_and_given_back" eval '
		rc_is run_one 0 && eq "$(stat -c %u:%g "$ROOT/ws1/made")" "$LAST:$XG" &&
		[ ! -e "/var/lib/kbox/uids/$LAST" ]'
	# a session directory copied with its sandbox.uid does not share the
	# uid: the record names the first one's directory, the copy gets one
	# of its own (and what the copied files are, they become its)
	cp -a "$S/i" "$S/icopy" && rm -f "$S/icopy/control.sock" "$S/icopy/supervisor.pid"
	kx start -s icopy
	keep icopy
	ICOPY=$(status_field icopy sandbox_uid)
	DIAG=icopy
	check "row44_under_root_a_copied_session_gets_a_uid_of_its_own" eval '
		rc_is icopy 0 && [ -n "$ICOPY" ] && ne "$ICOPY" "$XU" &&
		eq "$(stat -c %u "$S/icopy/workspace/made")" "$ICOPY"'
	"$KBOX" rm -f icopy >/dev/null 2>&1
	# a session whose directory moved while it runs (renamed, or seen from
	# another mount namespace) keeps its uid: its record no longer names
	# it, but the uid's processes run, so no other session takes it
	# stop_moved NAME: stop the session moved to NAME while it ran: by its
	# supervisor's pid (SIGTERM), as kbox-protocol(7) says, since it
	# answers only by the directory it was started for
	stop_moved() {
		sm_pid=$(cat "$S/$1/supervisor.pid" 2>/dev/null)
		[ -z "$sm_pid" ] || { kill -TERM "$sm_pid" 2>/dev/null; gone "$sm_pid"; }
	}
	kx_one start -s p5
	keep p5
	P5=$(status_field p5 sandbox_uid)
	mv "$S/p5" "$S/p5moved"
	kx_one start -s p6
	keep p6_in_use
	DIAG="p5 p6_in_use"
	check "row44_under_root_a_uid_whose_session_moved_while_it_runs_is_not_taken" eval '
		rc_is p5 0 && eq "$P5" "$LAST" && ! rc_is p6_in_use 0 >/dev/null &&
		grep -qF "all 1 sandbox uids ($LAST-$LAST, the sandbox user $SU'"'"'s range) are taken by sessions" "$W/p6_in_use.err"'
	stop_moved p5moved
	"$KBOX" rm -f p5moved p6 >/dev/null 2>&1
	# and between its kernels too, when no process runs as the uid: its
	# supervisor holds the uid while it lives (here stopped, its sandbox
	# killed, as in the moment a kernel is replaced)
	kx_one start -s p7
	keep p7
	P7=$(status_field p7 sandbox_uid)
	P7SUP=$(cat "$S/p7/supervisor.pid" 2>/dev/null)
	mv "$S/p7" "$S/p7moved"
	kill -STOP "$P7SUP"
	pkill -KILL -U "$P7"
	wait_for no_process_as "$P7"
	kx_one start -s p8
	keep p8_held
	kill -CONT "$P7SUP"
	DIAG="p7 p8_held"
	check "row44_under_root_a_uid_held_by_a_live_supervisor_between_kernels_is_not_taken" eval '
		rc_is p7 0 && eq "$P7" "$LAST" && ! rc_is p8_held 0 >/dev/null &&
		grep -qF "all 1 sandbox uids ($LAST-$LAST, the sandbox user $SU'"'"'s range) are taken by sessions" "$W/p8_held.err"'
	stop_moved p7moved
	"$KBOX" rm -f p7moved p8 >/dev/null 2>&1
	# a range that overlaps another user's subordinate uids (their
	# containers' files) is refused, naming whose
	printf 'someone:%s:5\n%s:%s:1\n' "$LAST" "$SU" "$LAST" >"$W/subuid.shared"
	KBOX_SUBUID_FILE=$W/subuid.shared kx start -s p4
	keep overlap
	DIAG=overlap
	check "row44_under_root_a_range_shared_with_another_user_is_refused" eval '
		! rc_is overlap 0 >/dev/null && [ ! -e "$S/p4/sandbox.uid" ] &&
		grep -qF "the sandbox user $SU'"'"'s range in $W/subuid.shared, $LAST-$LAST, overlaps someone'"'"'s ($LAST-$((LAST + 4))): give it a range of its own" "$W/overlap.err"'
	KBOX_SUBUID_FILE=$W/subuid.none kx start -s p3
	keep no_range
	DIAG=no_range
	check "row44_under_root_a_sandbox_user_without_a_range_is_one_clear_error" eval '
		! rc_is no_range 0 >/dev/null &&
		grep -qF "from the sandbox user $SU'"'"'s range in $W/subuid.none, and it has none: add one with \`kbox doctor --fix\` (usermod --add-subuids FIRST-LAST $SU)" "$W/no_range.err"'
fi

# a kernel that opens its workspace to others does not lock its session
# out: the session directory above keeps others out, and the next kernel's
# start makes the workspace 0700 again
pyx i <<'EOF'
import os
os.chmod("/workspace", 0o755)
print("mode", oct(os.stat("/workspace").st_mode & 0o777))
EOF
keep open_ws
kx exec -s i 'print(6 * 7)'
keep after_open
kx restart -s i
keep restart_open
DIAG="open_ws after_open restart_open"
check "row22_a_kernel_that_opens_its_workspace_does_not_lock_its_session" eval '
	rc_is open_ws 0 && eq "$(val open_ws mode)" 0o755 && rc_is after_open 0 &&
	eq "$(tail -n 1 "$W/after_open.out")" 42 && rc_is restart_open 0 &&
	eq "$(stat -c %a "$S/i/workspace")" 700'

# ---- row 29: what a kernel leaves in its home does not run in the next ----

# the places IPython, ipykernel, site and matplotlib read code or settings
# from in a home, each planted to leave a mark in the workspace when run
DIAG=plant
pyx i <<'EOF'
import os, sys
def put(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
def mark(what):
    return "open('/workspace/planted-%s', 'w').close()\n" % what
home = "/home/kbox"
prof = home + "/.ipython/profile_default"
put(prof + "/startup/00-planted.py", mark("startup"))
put(prof + "/ipython_config.py", mark("ipython-config"))
put(prof + "/ipython_kernel_config.py", mark("kernel-config"))
put(home + "/.jupyter/ipython_kernel_config.py", mark("jupyter-config"))
usite = "%s/.local/lib/python%d.%d/site-packages" % (home, sys.version_info[0], sys.version_info[1])
put(usite + "/planted.pth", "import os; " + mark("pth"))
put(usite + "/usercustomize.py", mark("usercustomize"))
put(usite + "/planted_backend.py", mark("mpl-backend"))
put(home + "/.config/matplotlib/matplotlibrc", "backend: module://planted_backend\n")
# and the workspace, the kernel's working directory: the module that starts
# the next kernel must not be taken from there
put("/workspace/ipykernel_launcher.py", mark("launcher") + "raise SystemExit(3)\n")
# row 48: modules the next kernel's code imports, planted in the workspace:
# json, and a site package no kernel has imported when it starts (the
# first of ipykernel's dependencies that is such); the code's own module
# there must still import
import importlib.util
shadow = next(m for m in ("nest_asyncio", "matplotlib_inline", "pexpect", "decorator", "dateutil")
              if m not in sys.modules and importlib.util.find_spec(m))
for name in ("json", shadow):
    put("/workspace/%s.py" % name, "PLANTED = True\n" + mark("module-" + name))
put("/workspace/shadow-name", shadow)
put("/workspace/kbox_own_module.py", "OWN = 42\n")
print("planted", len(os.listdir(prof)))
EOF
keep plant
kx restart -s i
keep restart29
pyx i <<'EOF'
import os, sys
import matplotlib
print("marks", sorted(f for f in os.listdir("/workspace") if f.startswith("planted-")))
print("no_user_site", sys.flags.no_user_site)
print("backend", matplotlib.get_backend())
import importlib, json, kbox_own_module
site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
shadow = importlib.import_module(open("/workspace/shadow-name").read())
print("modules", [getattr(m, "PLANTED", False) or m.__file__.startswith("/workspace")
                  for m in (json, shadow)])
print("own", kbox_own_module.OWN)
print("cwd_last", len(site) > 0 and sys.path.index("") == len(sys.path) - 1 > max(site))
EOF
keep after29
DIAG="plant restart29 after29"
check "row29_after_a_restart_nothing_planted_in_the_home_has_run" eval '
	rc_is plant 0 && rc_is restart29 0 && rc_is after29 0 && eq "$(val after29 marks)" "[]"'
check "row29_the_new_kernel_ignores_the_user_site" eval '
	rc_is after29 0 && eq "$(val after29 no_user_site)" 1'
check "row29_the_new_kernel_ignores_a_matplotlibrc_in_the_home" eval '
	rc_is after29 0 && ne "$(val after29 backend)" "module://planted_backend"'
check "row48_a_module_left_in_the_workspace_does_not_replace_the_systems" eval '
	rc_is after29 0 && eq "$(val after29 modules)" "[False, False]"'
check "row48_the_workspace_is_last_on_the_module_path" eval '
	rc_is after29 0 && eq "$(val after29 cwd_last)" True'
check "row48_the_codes_own_module_in_the_workspace_still_imports" eval '
	rc_is after29 0 && eq "$(val after29 own)" 42'

# The same of an unsandboxed kernel (none), whose workspace code of a
# sandbox could reach (a directory it held open, kept as a state
# directory since: reviews 11 and 12, B11-1 and B12-1): a launcher,
# modules, optional dependencies that are not installed (pandas' numexpr
# and bottleneck) or an R profile left in the workspace do not start,
# shadow or complete anything in the next kernel, which would run them as
# the user, unsandboxed: its workspace is nowhere on its module path.
kx start -s nw --backend none
keep start_nw
pyx nw <<'EOF'
import os, sys, importlib.util
def put(path, text):
    with open(path, "w") as f:
        f.write(text)
def mark(what):
    return "open(%r, 'w').close()\n" % os.path.join(os.getcwd(), "planted-" + what)
put("ipykernel_launcher.py", mark("launcher") + "raise SystemExit(3)\n")
shadow = next(m for m in ("nest_asyncio", "matplotlib_inline", "pexpect", "decorator", "dateutil")
              if m not in sys.modules and importlib.util.find_spec(m))
for name in ("json", shadow) + tuple(m for m in ("numexpr", "bottleneck")
                                     if not importlib.util.find_spec(m)):
    put("%s.py" % name, "PLANTED = True\n" + mark("module-" + name))
put("shadow-name", shadow)
put("kbox_own_module.py", "OWN = 42\n")
put(".Rprofile", 'file.create(file.path(getwd(), "planted-rprofile"))\n')
put(".Renviron", "KBOX_PLANTED_RENVIRON=yes\n")
print("planted")
EOF
keep plant_nw
kx restart -s nw
keep restart_nw
pyx nw <<'EOF'
import os, sys, importlib, json
import pandas  # (tries numexpr and bottleneck)
print("marks", sorted(f for f in os.listdir() if f.startswith("planted-")))
shadow = importlib.import_module(open("shadow-name").read())
print("modules", [getattr(m, "PLANTED", False) for m in (json, shadow)])
print("cwd_on_path", [p for p in sys.path if p in ("", ".", os.getcwd())])
try:
    import kbox_own_module
    print("own", "imported")
except ModuleNotFoundError:
    sys.path.append(".")  # (what code that wants its own modules does)
    import kbox_own_module
    print("own", kbox_own_module.OWN)
EOF
keep after_nw
DIAG="start_nw plant_nw restart_nw after_nw"
check "row48_an_unsandboxed_kernel_is_not_started_or_shadowed_by_what_its_workspace_holds" eval '
	rc_is start_nw 0 && rc_is plant_nw 0 && rc_is restart_nw 0 && rc_is after_nw 0 &&
	eq "$(val after_nw marks)" "[]" && eq "$(val after_nw modules)" "[False, False]" &&
	eq "$(val after_nw cwd_on_path)" "[]" && eq "$(val after_nw own)" 42'
if command -v R >/dev/null 2>&1 && [ -d /usr/share/jupyter/kernels/ir ] ||
	[ -d /usr/local/share/jupyter/kernels/ir ]; then
	# (R reads a .Rprofile and .Renviron in its working directory first)
	kx stop -s nw
	kx start -s nw --backend none -k ir
	keep start_nwr
	kx exec -s nw 'cat(Sys.getenv("KBOX_PLANTED_RENVIRON"), file.exists("planted-rprofile"), "\n")'
	keep after_nwr
	DIAG="start_nwr after_nwr"
	check "row48_an_unsandboxed_r_kernel_reads_no_profile_its_workspace_holds" eval '
		rc_is start_nwr 0 && rc_is after_nwr 0 && eq "$(tail -n 1 "$W/after_nwr.out")" " FALSE "'
fi
kx rm -f -s nw
DIAG=

# A directory code of a sandbox held open, moved out of its workspace and
# then given a state directory (reviews 10 to 12's set-up).  Under root,
# whose sandboxes run as uids of their own, that directory is the
# sandbox's: a state directory below it is refused (its owner could put
# another in its place).  Run by an ordinary user, every sandbox runs as
# that user and writes there: the session.json it rewrites (backend none)
# is refused, its seal no longer matching, and a control.sock it puts in
# place of a supervisor's (taking the lock of supervisor.pid) is sent
# nothing.
kx start -s hd
keep start_hd
pyx hd <<'EOF'
import builtins, os
os.makedirs("/workspace/proj")
builtins.kbox_held = os.open("/workspace/proj", os.O_PATH | os.O_DIRECTORY)
print("held", builtins.kbox_held)
EOF
keep hold
[ -n "$SKIPPING" ] || mv "$S/hd/workspace/proj" "$ROOT/hd-proj"
HD=$ROOT/hd-proj/state
KBOX_HOME=$HD kx start -s v
keep start_v
DIAG="start_hd hold start_v"
if [ "$(id -u)" = 0 ]; then
	check "row44_under_root_a_state_directory_in_a_sandboxs_directory_is_refused" eval '
		rc_is start_hd 0 && rc_is hold 0 && rc_is start_v 5 &&
		eq "$(stat -c %u "$ROOT/hd-proj")" "$(sb_uid hd)" &&
		eq "$(cat "$W/start_v.err")" "kbox start: state directory $HD: $ROOT/hd-proj above it can be changed by its owner, another user (owner uid $(stat -c %u "$ROOT/hd-proj"), mode $(stat -c %04a "$ROOT/hd-proj")), who could put another state directory in its place; use a directory whose every parent only you or root can change" &&
		[ ! -e "$HD" ]'
else
	# bwrap binds v's workspace by its path: code that reaches it swaps it
	# with a link to a directory of the user's, over and over, while v
	# restarts (review 14, B14-3: the sandbox got that directory, and
	# wrote its .bashrc).  What bwrap bound is checked to be what was
	# looked at: a restart is refused or gets v's own workspace, never the
	# decoy.
	# v restarted (or started) ten times, each time the names of its
	# /workspace listed, into $W/$1
	restarts_into() {
		: >"$W/$1"
		for i in 1 2 3 4 5 6 7 8 9 10; do
			KBOX_HOME=$HD timeout -k 5 120 "$KBOX" restart -s v >/dev/null 2>&1 ||
				KBOX_HOME=$HD timeout -k 5 120 "$KBOX" start -s v >/dev/null 2>&1
			KBOX_HOME=$HD timeout -k 5 120 "$KBOX" exec -s v \
				'import os; print(sorted(os.listdir("/workspace")))' >>"$W/$1" 2>&1
		done
	}
	# code in hd swaps, over and over in a thread, the entry $2 of the
	# directory $1 (of the directory it holds, hd-proj) with a link to $3
	# (put beside it as x-$2); race_stop ends that
	race_start() {
		pyx hd <<EOF
import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
d = os.open("/proc/self/fd/%d/$1" % kbox_held, os.O_PATH | os.O_DIRECTORY)
os.symlink("$3", "/proc/self/fd/%d/$1/x-$2" % kbox_held)
kbox_racing = True
def race():
    while kbox_racing:
        libc.renameat2(d, b"$2", d, b"x-$2", 2)  # RENAME_EXCHANGE
kbox_race = threading.Thread(target=race, daemon=True)
kbox_race.start()
print("racing")
EOF
	}
	race_stop() {
		pyx hd <<'EOF'
kbox_racing = False
kbox_race.join()
print("stopped")
EOF
	}
	# race_restore DIR ENTRY: the names the swap left either way round put
	# back (DIR/ENTRY the directory, no x-ENTRY beside it)
	race_restore() {
		[ -d "$1/x-$2" ] && [ -L "$1/$2" ] && rm "$1/$2" && mv -T "$1/x-$2" "$1/$2"
		rm -f "$1/x-$2"
	}
	mkdir -m 700 "$ROOT/decoy"
	echo decoy >"$ROOT/decoy/.bashrc"
	race_start state/sessions/v workspace "$ROOT/decoy"
	keep race
	restarts_into race_runs
	race_stop
	keep race_end
	# (the swap left the names either way round: v's own workspace back)
	[ -d "$HD/sessions/v/x-workspace" ] && [ -L "$HD/sessions/v/workspace" ] &&
		mv -T "$HD/sessions/v/x-workspace" "$HD/sessions/v/workspace.own" &&
		rm "$HD/sessions/v/workspace" && mv "$HD/sessions/v/workspace.own" "$HD/sessions/v/workspace"
	rm -f "$HD/sessions/v/x-workspace"
	DIAG="race race_end"
	check "row44_a_workspace_swapped_for_a_link_as_bwrap_binds_it_is_never_the_sandboxs" eval '
		rc_is race 0 && eq "$(val race racing)" "" && rc_is race_end 0 &&
		! grep -q bashrc "$W/race_runs" && eq "$(cat "$ROOT/decoy/.bashrc")" decoy ||
		{ sed "s/^/#   /" "$W/race_runs" | cut -c1-200; false; }'
	# The same one level up (review 15, B15-1): v's session directory
	# itself swapped with a link to another session's directory (another
	# state directory's, here a stand-in with a workspace and a home), as
	# v restarts.  bwrap binds paths below it: what is bound must be
	# reached through no link, and the sandbox never gets the other's.
	mkdir -p -m 700 "$ROOT/decoy2/workspace" "$ROOT/decoy2/home"
	echo decoy2 >"$ROOT/decoy2/workspace/secret-of-decoy2"
	race_start state/sessions v "$ROOT/decoy2"
	keep race2
	restarts_into race2_runs
	race_stop
	keep race2_end
	race_restore "$HD/sessions" v
	DIAG="race2 race2_end"
	check "row44_a_session_directory_swapped_for_a_link_as_bwrap_binds_is_never_the_sandboxs" eval '
		rc_is race2 0 && rc_is race2_end 0 && eq "$(cat "$W/race2_end.out")" stopped &&
		[ -d "$HD/sessions/v" ] &&
		! grep -q secret-of-decoy2 "$W/race2_runs" &&
		eq "$(ls "$ROOT/decoy2/workspace")" secret-of-decoy2 ||
		{ sed "s/^/#   /" "$W/race2_runs" | cut -c1-200; false; }'
	KBOX_HOME=$HD kx stop -s v
	pyx hd <<'EOF'
import json
p = "/proc/self/fd/%d/state/sessions/v/session.json" % kbox_held
j = json.load(open(p))
j["backend"] = "none"
with open(p, "w") as f:
    json.dump(j, f)
print("rewritten", j["backend"])
EOF
	keep rewrite
	KBOX_HOME=$HD kx start -s v
	keep restart_v
	pyx hd <<'EOF'
import fcntl, os, socket
d = "/proc/self/fd/%d/state/sessions/v" % kbox_held
pid = os.open(d + "/supervisor.pid", os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(pid, fcntl.LOCK_EX)
os.unlink(d + "/control.sock") if os.path.exists(d + "/control.sock") else None
kbox_fake = socket.socket(socket.AF_UNIX)
kbox_fake.bind(d + "/control.sock")
kbox_fake.listen(8)
kbox_fake.setblocking(False)
kbox_pid = pid
print("listening")
EOF
	keep fake_listen
	KBOX_HOME=$HD kx exec -s v 'print(1)'
	keep exec_v
	pyx hd <<'EOF'
got, fds = b"", []
c, _ = kbox_fake.accept()  # (the connection kbox closed, still queued)
c.setblocking(True)
while True:
    data, passed, _, _ = socket.recv_fds(c, 65536, 8)
    fds += passed
    if not data:
        break
    got += data
print("received", len(got), len(fds))
EOF
	keep fake_got
	DIAG="start_hd hold start_v rewrite restart_v fake_listen exec_v fake_got"
	SV="$HD/sessions/v"
	check "row44_a_session_json_rewritten_by_a_sandbox_is_refused" eval '
		rc_is start_v 0 && rc_is rewrite 0 && eq "$(val rewrite rewritten)" none &&
		rc_is restart_v 5 &&
		eq "$(cat "$W/restart_v.err")" "kbox start: $SV/session.json is not as kbox wrote it: its seal does not match (it was changed, copied from another session, moved with its state directory, or sealed with another key); read it, then seal it as it is (kbox start --reseal -s v) or remove the session (kbox rm -s v)"'
	check "row44_a_control_socket_a_sandbox_put_in_place_is_sent_nothing" eval '
		rc_is fake_listen 0 && rc_is exec_v 5 && [ ! -s "$W/exec_v.out" ] &&
		eq "$(cat "$W/exec_v.err")" "kbox exec: session v: $SV/control.sock is not a supervisor'"'"'s of this user: the process listening there is another user'"'"'s, or in another user namespace (code in a sandbox that can reach this state directory); nothing was sent to it. Stop using this state directory (kbox(7), threat 44)" &&
		rc_is fake_got 0 && eq "$(val fake_got received)" "0 0"'
	# The state directory itself swapped with a link to another state
	# directory of the user's, over and over, as kbox resolves KBOX_HOME
	# and as it then reaches what is below it (review 16, B16-1, B16-2):
	# the other has a session of the same name, not sandboxed (code meant
	# for hd's would run on the host), and a stopped one that prune would
	# remove.  Each command is refused, or acts on HD, never on B.
	B=$ROOT/B
	KBOX_HOME=$B kx start -s w --backend none
	keep b_w
	KBOX_HOME=$B kx start -s keepme --backend none
	KBOX_HOME=$B kx exec -s keepme 'open("precious.txt", "w").write("p")'
	keep b_keep
	KBOX_HOME=$B kx stop -s keepme
	KBOX_HOME=$HD kx start -s w
	keep hd_w
	pyx hd <<'EOF'
import os
p = "/proc/self/fd/%d/state/sessions/keepme" % kbox_held
os.makedirs(p, mode=0o700)
open(p + "/events.ndjson", "w").close()
print("planted")
EOF
	keep plant_keep
	race_start . state "$B"
	keep race3
	: >"$W/race3_runs"
	for i in 1 2 3 4 5 6 7 8 9 10; do
		KBOX_HOME=$HD timeout -k 5 120 "$KBOX" exec -s w \
			'import os; print("cwd", os.getcwd())' >>"$W/race3_runs" 2>&1
		[ "$i" -gt 5 ] ||
			KBOX_HOME=$HD timeout -k 5 120 "$KBOX" prune >>"$W/race3_runs" 2>&1
	done
	race_stop
	keep race3_end
	race_restore "$ROOT/hd-proj" state
	# (whether a command got through the race is chance; once it is over
	# HD's own session answers)
	KBOX_HOME=$HD kx exec -s w 'import os; print("cwd", os.getcwd())'
	keep race3_after
	DIAG="b_w b_keep hd_w plant_keep race3 race3_end race3_after"
	check "row44_a_state_directory_swapped_for_a_link_as_kbox_uses_it_is_never_another" eval '
		rc_is b_w 0 && rc_is b_keep 0 && rc_is hd_w 0 && rc_is plant_keep 0 &&
		rc_is race3 0 && rc_is race3_end 0 && [ -d "$HD/sessions/w" ] &&
		! grep -q "^cwd $B" "$W/race3_runs" && rc_is race3_after 0 &&
		eq "$(val race3_after cwd)" /workspace &&
		eq "$(cat "$B/sessions/keepme/workspace/precious.txt")" p &&
		eq "$(ls "$B/sessions")" "keepme
w" || { sed "s/^/#   /" "$W/race3_runs" | sort | uniq -c | cut -c1-200; false; }'
	# A supervisor acts in the session directory it holds open, never by
	# its path (review 17, B17-1, B17-2): code in hd swaps the state
	# directory with a link to B once, while an execution of HD's w runs
	# and another, which spills its output to a file, waits its turn; then
	# the first ends, the second runs, and the supervisor is stopped
	# (SIGTERM; no kbox command resolves HD now).  The spill file is in
	# HD's w, and B's w (running) keeps its control.sock and
	# supervisor.pid and answers.  Before, the spill went to B's outputs
	# and the stop unlinked B's files.
	# swap_state TARGET KEEP: code in hd swaps the state directory HD for
	# a link to TARGET (HD goes to x-state beside it), kept as KEEP;
	# unswap_state puts HD back
	swap_state() {
		pyx hd <<EOF
import os
d = "/proc/self/fd/%d" % kbox_held
os.rename(d + "/state", d + "/x-state")
os.symlink("$1", d + "/state")
print("swapped", os.readlink(d + "/state"))
EOF
		keep "$2"
	}
	# (the kernel's code waits, blocked opening a FIFO, until the test
	# opens it to write: bounded, should the kernel be gone)
	release() {
		timeout -k 5 60 sh -c 'echo go >"$1"' sh "$1"
	}
	unswap_state() {
		rm "$ROOT/hd-proj/state" && mv -T "$ROOT/hd-proj/x-state" "$ROOT/hd-proj/state"
	}
	WH=$HD/sessions/w
	rm -f "$WH/workspace/holding" "$WH/workspace/release.fifo"
	KBOX_HOME=$HD kx exec -s w 'print("warm")'
	keep hd_w_warm
	hd_sup=$(cat "$WH/supervisor.pid" 2>/dev/null)
	b17_bg=
	if [ -z "$SKIPPING" ]; then
		(KBOX_HOME=$HD timeout -k 5 120 "$KBOX" exec -s w 'import os
os.mkfifo("release.fifo")
open("holding", "w").close()
open("release.fifo").read()
print("first")' >"$W/b17_first.out" 2>&1
			echo $? >"$W/b17_first.rc") &
		b17_bg=$!
		wait_for test -e "$WH/workspace/holding"
		(KBOX_HOME=$HD timeout -k 5 120 "$KBOX" exec -s w 'print("s" * 3000000)' \
			>"$W/b17_second.out" 2>&1
			echo $? >"$W/b17_second.rc") &
		b17_bg="$b17_bg $!"
		(export KBOX_HOME=$HD && wait_for queued w)
	fi
	swap_state "$B" b17_swap
	if [ -z "$SKIPPING" ]; then
		release "$ROOT/hd-proj/x-state/sessions/w/workspace/release.fifo"
		for p in $b17_bg; do wait "$p"; done
		[ -z "$hd_sup" ] || { kill -TERM "$hd_sup" && gone "$hd_sup"; }
		echo $? >"$W/b17_stop.rc"
		unswap_state
	fi
	KBOX_HOME=$B kx exec -s w 'print("b answers")'
	keep b17_b_w
	DIAG="hd_w_warm b17_swap b17_first b17_second b17_b_w"
	check "row44_a_supervisor_writes_a_spill_file_in_its_own_session_whatever_is_at_its_path" eval '
		rc_is hd_w_warm 0 && rc_is b17_swap 0 && eq "$(val b17_swap swapped)" "$B" &&
		rc_is b17_first 0 && rc_is b17_second 0 &&
		[ -z "$(ls -A "$B/sessions/w/outputs" 2>/dev/null)" ] &&
		[ "$(ls "$WH/outputs" | wc -l)" = 1 ] &&
		eq "$(head -c 3 "$WH/outputs/$(ls "$WH/outputs")")" sss'
	check "row44_a_supervisor_stopped_removes_its_own_files_whatever_is_at_its_path" eval '
		rc_is b17_stop 0 && [ ! -e "$WH/control.sock" ] && [ ! -e "$WH/supervisor.pid" ] &&
		[ -S "$B/sessions/w/control.sock" ] && [ -s "$B/sessions/w/supervisor.pid" ] &&
		rc_is b17_b_w 0 && last_line_is "$W/b17_b_w.out" "b answers"'
	# and it makes and gives the sandbox its workspace and home in the
	# directory it holds open (review 18, B18-3): the state directory is
	# swapped for a link to a tree of the user's while the kernel of HD's
	# w runs; the kernel then dies and the supervisor starts another,
	# sharing the two directories again.  Before, it made victim's home
	# and chmod'ed its workspace 0700 through the link.
	mkdir -p "$ROOT/victim3/sessions/w/workspace"
	chmod 755 "$ROOT/victim3/sessions/w/workspace"
	rm -f "$WH/workspace/holding" "$WH/workspace/release.fifo"
	KBOX_HOME=$HD kx exec -s w 'print("warm")'
	keep b18_warm
	b18_lines=$(wc -l <"$WH/events.ndjson" 2>/dev/null)
	if [ -z "$SKIPPING" ]; then
		(KBOX_HOME=$HD timeout -k 5 120 "$KBOX" exec -s w 'import os
os.mkfifo("release.fifo")
open("holding", "w").close()
open("release.fifo").read()
os._exit(1)' >"$W/b18_dies.out" 2>&1
			echo $? >"$W/b18_dies.rc") &
		b18_bg=$!
		wait_for test -e "$WH/workspace/holding"
	fi
	swap_state "$ROOT/victim3" b18_swap
	# (a kernel after the restart: ready, or the session stopped)
	restarted_after() {
		awk -v n="$b18_lines" 'NR > n && /"event": *"restart"/ { r = 1 }
			r && /"event": *"(ready|stop)"/ { f = 1 } END { exit !f }' "$1"
	}
	if [ -z "$SKIPPING" ]; then
		XW=$ROOT/hd-proj/x-state/sessions/w
		release "$XW/workspace/release.fifo"
		wait "$b18_bg"
		wait_for restarted_after "$XW/events.ndjson"
		echo $? >"$W/b18_restart.rc"
		unswap_state
	fi
	DIAG="b18_warm b18_swap b18_dies"
	check "row44_a_supervisor_makes_and_shares_its_own_workspace_and_home_whatever_is_at_its_path" eval '
		rc_is b18_warm 0 && rc_is b18_swap 0 && eq "$(val b18_swap swapped)" "$ROOT/victim3" &&
		[ "$(cat "$W/b18_restart.rc")" = 0 ] && [ ! -e "$ROOT/victim3/sessions/w/home" ] &&
		[ "$(stat -c %a "$ROOT/victim3/sessions/w/workspace")" = 755 ] &&
		[ -d "$WH/home" ] && [ -d "$WH/workspace" ]'
	KBOX_HOME=$B kx rm -f -s w
	KBOX_HOME=$B kx rm -f -s keepme
	KBOX_HOME=$HD kx rm -f -s w
fi
kx rm -f -s hd
[ "$(id -u)" = 0 ] || KBOX_HOME=$HD kx rm -f -s v
DIAG=

# --home-config on: the kernel reads its home as Jupyter would
kx stop -s i
kx start -s i --home-config on
keep start_hc
pyx i <<'EOF'
import os
print("marks", sorted(f for f in os.listdir("/workspace") if f.startswith("planted-")))
EOF
keep hc
DIAG="start_hc hc"
check "row29_with_home_config_on_the_homes_startup_files_run" eval '
	rc_is start_hc 0 && rc_is hc 0 && case "$(val hc marks)" in *planted-startup*) ;; *) false ;; esac'
check "row29_a_module_left_in_the_workspace_never_starts_a_kernel" eval '
	rc_is hc 0 && case "$(val hc marks)" in *planted-launcher*) false ;; *) true ;; esac'
kx start -s bad --home-config maybe
keep bad_hc
DIAG=bad_hc
check "row29_home_config_takes_on_or_off" eval '
	rc_is bad_hc 2 && eq "$(cat "$W/bad_hc.err")" "kbox start: invalid --home-config \"maybe\": expected on or off"'

kx stop -s i
tests_done
