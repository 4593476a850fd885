#!/bin/sh
# tests/security/workspace.sh — threats.md rows 24 and 44: kbox run started in a
# directory that matters (/, a home) must not hand it to the code.  By
# default the code gets a new, empty workspace of its own, into which only
# the files named on the command line are copied; a host directory is the
# workspace only when --workspace names it, with a warning, and never /, a
# home directory, a directory that holds one, a system directory, or any
# kbox state directory (the current one, the default ones, any found by
# what is in it), a directory in one or holding one, however the path is
# spelt (links, "..").  Each test is named after its row.  TAP.
#
# Environment (set by `make check`): top_builddir (or KBOX, the kbox to
# test), KERNEL_PYTHON (the host's Python, default /usr/bin/python3).  Run
# by hand:
#   KBOX=/path/to/build/kbox sh tests/security/workspace.sh
# The refusals need no kernel and always run; when `kbox doctor` says the
# sandbox cannot be made here, the tests that run code are skipped with
# the reason.
# shellcheck disable=SC2016 # eval strings expand later, on purpose
set -u

ROOT_TAG=ksw
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"

# file_is FILE TEXT: FILE is exactly TEXT and a newline.
file_is() { printf '%s\n' "$2" | cmp -s - "$1"; }
# refused ARG WHY: kbox run --workspace ARG failed as a usage error, with
# the one line that says WHY.
refused() {
	fails_with 2 "kbox run: --workspace $1: refused: $2, and the code can change everything in its workspace"
}
# token: a random word of 24 hex digits.
token() { od -An -tx1 -N12 /dev/urandom | tr -d ' \n'; }

# ---- --workspace DIR: what is refused (no kernel is started) ----

fresh
kbox run --workspace / -c 'print(1)'
check row24_workspace_root_is_refused refused / "/ is the root directory"

fresh
kbox run --workspace /usr/.. -c 'print(1)'
check row24_workspace_root_spelt_with_dotdot_is_refused refused /usr/.. "/ is the root directory"

fresh
kbox run --workspace /etc -c 'print(1)'
check row24_workspace_etc_is_refused refused /etc "/etc is a system directory"

fresh
ln -s /etc etc-link
kbox run --workspace etc-link -c 'print(1)'
check row24_workspace_link_to_etc_is_refused refused etc-link "/etc is a system directory"

fresh
kbox run --workspace /usr/bin -c 'print(1)'
check row24_workspace_in_a_system_directory_is_refused refused /usr/bin \
	"/usr/bin is in the system directory /usr"

fresh
kbox run --workspace /tmp -c 'print(1)'
check row24_workspace_tmp_itself_is_refused refused /tmp "/tmp is a system directory"

# the caller's home, however $HOME spells it
if [ -n "${HOME:-}" ] && [ -d "$HOME" ]; then
	fresh
	kbox run --workspace "$HOME" -c 'print(1)'
	check row24_workspace_home_is_refused refused "$HOME" "$(cd "$HOME" && pwd -P) is a home directory"
else
	skip row24_workspace_home_is_refused "HOME is not a directory"
fi

# a home of the password database, whatever $HOME says
PWHOME=$(getent passwd "$(id -u)" | cut -d: -f6)
fresh
if [ -d "$PWHOME" ]; then
	mkdir other-home
	HOME=$T/other-home "$KBOX" run --workspace "$PWHOME" -c 'print(1)' >stdout 2>stderr </dev/null
	rc=$?
	check row24_workspace_a_home_from_the_password_database_is_refused refused "$PWHOME" \
		"$(cd "$PWHOME" && pwd -P) is a home directory"
else
	skip row24_workspace_a_home_from_the_password_database_is_refused \
		"the password database gives no home directory for uid $(id -u)"
fi

# a directory that holds a home: made here, as $HOME
fresh
mkdir -p homes/ada
HOME=$T/homes/ada "$KBOX" run --workspace homes -c 'print(1)' >stdout 2>stderr </dev/null
rc=$?
check row24_workspace_holding_a_home_is_refused refused homes \
	"$(pwd -P)/homes holds the home directory $(pwd -P)/homes/ada"

fresh
kbox run --workspace "$KBOX_HOME" -c 'print(1)'
check row24_workspace_kbox_state_directory_is_refused refused "$KBOX_HOME" \
	"$(cd "$KBOX_HOME" && pwd -P) is kbox's state directory"

# however KBOX_HOME spells it, before it exists: through a link, "..",
# "//" or a trailing "/"
fresh
mkdir w3 && ln -s w3 w3link
for spelt in "$T/w3link/state" "$T/x/../w3/state/" "$T//w3/./state"; do
	KBOX_HOME=$spelt "$KBOX" run --workspace w3 -c 'print(1)' >stdout 2>stderr </dev/null
	rc=$?
	# (run by an ordinary user, a link in a directory the user can write
	# is refused on the way to a state directory, before the workspace
	# is looked at: row 44)
	if [ "$(id -u)" != 0 ] && [ "$spelt" = "$T/w3link/state" ]; then
		[ "$rc" = 5 ] && grep -qF "$T/w3link is a symbolic link in a directory you can write" stderr || break
	else
		refused w3 "$(pwd -P)/w3 holds kbox's state directory $(pwd -P)/w3/state" || break
	fi
done
check row24_workspace_holding_the_state_directory_however_kbox_home_spells_it_is_refused \
	refused w3 "$(pwd -P)/w3 holds kbox's state directory $(pwd -P)/w3/state"

# A run refused there after it made its own session directory (an
# ordinary user's state directory through a link, row 44) takes that
# directory back: nothing of it is left in XDG_RUNTIME_DIR.
if [ "$(id -u)" = 0 ]; then
	skip row44_a_run_refused_for_its_state_directory_leaves_no_run_directory \
		"root is not refused for a link on the way to its state directory"
else
	fresh
	mkdir -m 700 xdg real && ln -s real link
	XDG_RUNTIME_DIR=$T/xdg KBOX_HOME=$T/link/state "$KBOX" run -c 'print(1)' \
		>stdout 2>stderr </dev/null
	rc=$?
	check row44_a_run_refused_for_its_state_directory_leaves_no_run_directory eval '
		[ "$rc" = 5 ] && grep -qF "$T/link is a symbolic link in a directory you can write" stderr &&
		[ -z "$(ls -A xdg)" ]'
fi

# Any kbox state directory, found by what is in it (the mark kbox writes,
# or a session's session.json), whatever KBOX_HOME is: row 44.
fresh
mkdir -p proj/a/b/st proj2/x/kh/sessions/s1
: >proj/a/b/st/.kbox-state
echo '{}' >proj2/x/kh/sessions/s1/session.json
kbox run --workspace proj -c 'print(1)'
check row44_workspace_holding_a_marked_state_directory_is_refused refused proj \
	"$(pwd -P)/proj holds the kbox state directory $(pwd -P)/proj/a/b/st"
kbox run --workspace proj2 -c 'print(1)'
check row44_workspace_holding_a_state_directory_with_a_session_is_refused refused proj2 \
	"$(pwd -P)/proj2 holds the kbox state directory $(pwd -P)/proj2/x/kh"
kbox run --workspace proj2/x/kh/sessions/s1 -c 'print(1)'
check row44_workspace_in_another_state_directory_is_refused refused proj2/x/kh/sessions/s1 \
	"$(pwd -P)/proj2/x/kh/sessions/s1 is in the kbox state directory $(pwd -P)/proj2/x/kh"

# kbox run's own session directory ($XDG_RUNTIME_DIR/kbox-run-*), which
# holds its kernel's key and sockets while it runs (as an ordinary user
# every sandbox is of one uid): found by its mark, so a directory that
# holds it is refused.  The run waits in its cell until the check is done.
fresh
mkdir xdg && chmod 700 xdg
XDG_RUNTIME_DIR=$T/xdg timeout -k 5 120 "$KBOX" run --backend none -c "
import os, time
open('$T/ready', 'w').close()
while not os.path.exists('$T/go'):
    time.sleep(0.05)" >run.out 2>run.err </dev/null &
bg=$!
wait_for test -e ready
set -- xdg/kbox-run-*
kbox run --workspace xdg -c 'print(1)'
: >go
wait $bg
check row44_workspace_holding_a_running_kbox_run_directory_is_refused refused xdg \
	"$(pwd -P)/xdg holds the kbox state directory $(pwd -P)/$1"

# a session's own directory without the mark (a kbox before it wrote
# one): its session.json beside its sockets, connection files or pid
fresh
mkdir -p proj/a/s1/run proj/b/s2 proj/c/s3
echo '{}' | tee proj/a/s1/session.json proj/b/s2/session.json proj/c/s3/session.json >/dev/null
: >proj/b/s2/supervisor.pid
kbox run --workspace proj/a -c 'print(1)'
check row44_workspace_holding_an_unmarked_session_directory_is_refused refused proj/a \
	"$(pwd -P)/proj/a holds the kbox state directory $(pwd -P)/proj/a/s1"
kbox run --workspace proj/b/s2 -c 'print(1)'
check row44_workspace_that_is_an_unmarked_session_directory_is_refused refused proj/b/s2 \
	"$(pwd -P)/proj/b/s2 is a kbox state directory"
kbox run --backend none --workspace proj/c -c 'print(1)'
check row44_a_lone_session_json_is_no_state_directory stdout_is 1

# one of our directories kbox may not read (mode 0311) could hold one,
# and the code, our uid, could chmod it and look: refused.  (Root reads
# every directory: only an ordinary user meets this.)
fresh
if [ "$(id -u)" = 0 ]; then
	skip row44_workspace_holding_a_directory_of_ours_kbox_cannot_read_is_refused \
		"root reads every directory"
else
	mkdir -p proj/hid/x && chmod 311 proj/hid
	kbox run --workspace proj -c 'print(1)'
	chmod 755 proj/hid
	check row44_workspace_holding_a_directory_of_ours_kbox_cannot_read_is_refused fails_with 2 \
		"kbox run: --workspace proj: refused: $(pwd -P)/proj holds $(pwd -P)/proj/hid, which kbox may not read but the code could pass through: make it readable (chmod u+rx if it is yours), or give another directory"
fi

# whoever owns it: one the caller may pass but not read (root's, mode
# 0711) could hide a state directory of the caller's from kbox, not from
# the code, which opens names it knows.  One the caller may not pass
# either (0700) hides nothing from the code: passed over.  A user other
# than root is needed to be refused by root's directory: root makes the
# layout and runs kbox as uid 54321.
fresh
other_why=
if [ "$(id -u)" != 0 ]; then
	other_why="needs a directory of another owner, which root makes"
elif ! setpriv --reuid=54321 --regid=54321 --clear-groups test -x "$KBOX"; then
	# a build tree under a directory of mode 0700 (mktemp -d makes one)
	other_why="uid 54321 cannot reach $KBOX: a directory above it is closed to others"
fi
if [ -n "$other_why" ]; then
	skip row44_workspace_holding_a_passable_unreadable_directory_of_another_owner_is_refused \
		"$other_why"
	skip row44_workspace_holding_a_directory_the_caller_cannot_pass_is_accepted "$other_why"
else
	chmod 711 "$T"
	mkdir -p proj/shared/kb proj/closed/kb2 uh
	chown 54321:54321 proj proj/shared/kb proj/closed/kb2 uh
	chmod 711 proj/shared
	chmod 700 proj/closed
	as_other() {
		setpriv --reuid=54321 --regid=54321 --clear-groups \
			env HOME="$T/uh" KBOX_HOME="$T/uh/state" "$KBOX" "$@" </dev/null >stdout 2>stderr
		rc=$?
	}
	as_other run --workspace proj -c 'print(1)'
	check row44_workspace_holding_a_passable_unreadable_directory_of_another_owner_is_refused \
		fails_with 2 "kbox run: --workspace proj: refused: $T/proj holds $T/proj/shared, which kbox may not read but the code could pass through: make it readable (chmod u+rx if it is yours), or give another directory"
	chmod 700 proj/shared
	as_other run --workspace proj -c 'import os; print(*sorted(os.listdir(".")))'
	check row44_workspace_holding_a_directory_the_caller_cannot_pass_is_accepted eval '
		status_is 0 && stdout_is "closed shared"'
fi

# the look fails closed: a directory it cannot open for want of a
# descriptor (a low ulimit -n) is no directory passed over
fresh
d=deep
i=0
while [ $i -lt 40 ]; do d=$d/d; i=$((i + 1)); done
mkdir -p "$d/kb/sessions/x"
echo '{}' >"$d/kb/sessions/x/session.json"
: >"$d/kb/.kbox-state"
(ulimit -n 48 && exec "$KBOX" run --workspace deep -c 'print(1)') </dev/null >stdout 2>stderr
rc=$?
check row44_workspace_looked_through_without_descriptors_left_is_refused eval '
	[ "$rc" = 2 ] && stdout_empty &&
	grep -q "^kbox run: --workspace deep: refused: .* cannot be looked through for kbox state directories: .*: Too many open files" stderr'

# the default ones, by their path, whether they exist or not
fresh
mkdir -p h/.local x
HOME=$T/h "$KBOX" run --workspace h/.local -c 'print(1)' >stdout 2>stderr </dev/null
rc=$?
check row44_workspace_holding_the_default_state_directory_is_refused refused h/.local \
	"$(pwd -P)/h/.local holds a default kbox state directory $(pwd -P)/h/.local/state/kbox"
XDG_STATE_HOME=$T/x/state "$KBOX" run --workspace x -c 'print(1)' >stdout 2>stderr </dev/null
rc=$?
check row44_workspace_holding_the_xdg_state_directory_is_refused refused x \
	"$(pwd -P)/x holds a default kbox state directory $(pwd -P)/x/state/kbox"

# a tree too deep to look through is refused, and says why
fresh
d=deep
i=0
while [ $i -lt 130 ]; do d=$d/d; i=$((i + 1)); done
mkdir -p "$d"
kbox run --workspace deep -c 'print(1)'
check row44_workspace_too_deep_to_look_through_is_refused fails_with 2 \
	"kbox run: --workspace deep: refused: $(pwd -P)/deep has directories deeper than 128 levels, too deep to look through for kbox state directories: give one less deep"

fresh
kbox run --workspace no-such-dir -c 'print(1)'
check row24_workspace_that_does_not_exist_is_a_usage_error fails_with 2 \
	"kbox run: --workspace no-such-dir: No such file or directory"

fresh
mkdir proj
echo 'x' >data.csv
kbox run --workspace proj --put data.csv -c 'print(1)'
check row24_put_with_workspace_is_refused fails_with 2 \
	"kbox run: --put copies into a new workspace; with --workspace proj, copy data.csv there instead"

fresh
kbox run --put /dev/null -c 'print(1)'
check row24_put_of_a_device_is_refused fails_with 2 "kbox run: /dev/null is not a regular file"

fresh
mkdir a b
echo 'print("a")' >a/step.py
echo 'print("b")' >b/step.py
kbox run a/step.py b/step.py
check row24_two_files_of_one_name_are_refused fails_with 2 \
	"kbox run: a/step.py and b/step.py would both be step.py in the workspace"

# ---- the code's view (a kernel in the sandbox) ----

SKIPPING=$(sandbox_skip_reason)
SECRET=secret$(token)

# Started in a directory with files in it, as in a home: the code sees an
# empty workspace, and what it writes there stays there.
fresh
printf '%s\n' "$SECRET" >.bashrc
printf 'precious\n' >notes.txt
kbox run -c '
import errno, os
print(os.getcwd(), sorted(os.listdir()))
for name in (".bashrc", "notes.txt"):
    try:
        print(open(name).read().strip())
    except OSError as e:
        print(errno.errorcode[e.errno])
for name in (".bashrc", "notes.txt", "x"):
    with open(name, "a") as f:
        f.write("echo owned\n")
with open("/workspace/x", "a") as f:
    f.write("more\n")
print(sorted(os.listdir()))'
check row24_code_starts_in_an_empty_workspace eval 'status_is 0 &&
	[ "$(head -n 1 stdout)" = "/workspace []" ]'
check row24_code_cannot_read_the_directory_kbox_run_started_in eval '
	[ "$(sed -n 2,3p stdout)" = "$(printf "ENOENT\nENOENT")" ] &&
	! grep -q "$SECRET" stdout && ! grep -q precious stdout'
check row24_code_writes_do_not_reach_the_directory_kbox_run_started_in eval '
	[ "$(tail -n 1 stdout)" = "['"'.bashrc', 'notes.txt', 'x'"']" ] &&
	file_is .bashrc "$SECRET" && file_is notes.txt precious && [ ! -e x ] && [ ! -L x ]'

# Started in /: the host's root is not the workspace.
fresh
if [ -z "$SKIPPING" ]; then
	(cd / && timeout -k 5 120 "$KBOX" run -o "$T" -c 'import os; print(os.listdir("/workspace"))' \
		>"$T/stdout" 2>"$T/stderr" </dev/null)
	rc=$?
fi
check row24_run_started_in_root_gets_an_empty_workspace eval 'status_is 0 && stdout_is "[]"'

# --put FILE and a cell's FILE: copies, visible inside; the host's files
# stay as they were.
fresh
printf '%s\n' "$SECRET" >data.csv
cat >step.py <<'EOF'
import os
print(sorted(os.listdir()))
print(open("data.csv").read().strip())
with open("data.csv", "w") as f:
    f.write("changed\n")
EOF
kbox run --put data.csv step.py
check row24_put_file_and_cell_file_are_copied_into_the_workspace eval 'status_is 0 &&
	stdout_is "['"'data.csv', 'step.py'"']
$SECRET"'
check row24_put_file_is_a_copy_the_code_cannot_change eval 'status_is 0 &&
	file_is data.csv "$SECRET"'

# --workspace DIR of the caller's: bound, written, and said so.
fresh
chmod 711 "$T"
mkdir proj
# under root the code runs as a uid of its own in the sandbox user's
# group: the directory must be that group's to write (kbox(7), Identity)
writable_by_sandboxes proj
kbox run --workspace proj -c 'import os; print(os.getcwd()); print("inside", file=open("made", "w"))'
check row24_workspace_dir_is_bound_and_writable eval 'status_is 0 && stdout_is /workspace &&
	file_is proj/made inside'
check row24_workspace_dir_warns_that_it_is_writable has_line stderr \
	"kbox run: warning: --workspace proj: the code can change and delete every file in $(pwd -P)/proj"

# The directory checked is the one the sandbox binds: kbox run records its
# device and inode, and before the kernel runs the supervisor compares them
# with what is mounted at /workspace, so a directory swapped in under the
# name since (a race a local user could run) is refused.  A session whose
# configuration names one directory with another's identity stands for
# the swap.
fresh
chmod 711 "$T"
mkdir checked swapped
writable_by_sandboxes checked swapped
if [ -z "$SKIPPING" ]; then
	mkdir -p "$S" && mkdir -m 700 "$S/sw" &&
		printf '{"name": "sw", "kernel": "python3", "backend": "bwrap", "workspace": "%s", "workspace_dev": %s, "workspace_ino": %s}\n' \
			"$T/swapped" "$(stat -c %d checked)" "$(stat -c %i checked)" >"$S/sw/session.json"
fi
kbox start --reseal -s sw # (written by hand: sealed as it is, for an ordinary user)
kbox start -s sw
check row24_a_workspace_swapped_after_it_was_checked_is_refused eval '[ "$rc" = 5 ] &&
	grep -qF "the workspace $T/swapped is no longer the directory that was checked (it was replaced under its name): refusing it" stderr'
kbox stop -s sw

# The outputs directory (images, the whole text of what was cut) is kept
# for the caller out of the code's reach: with --workspace ., the new one
# goes to $TMPDIR instead of the current directory, and says so; -o in the
# workspace is refused, however spelt; and the directory is held open for
# the run, so renaming it and making another of its name (the code could,
# were it in reach) does not move where the files go.
fresh
chmod 711 "$T"
mkdir proj tmpd
writable_by_sandboxes proj
if [ -z "$SKIPPING" ]; then
	(cd proj && TMPDIR=$T/tmpd timeout -k 5 120 "$KBOX" run --workspace . -c 'print("x" * 100000)' \
		>../stdout 2>../stderr </dev/null)
	rc=$?
fi
check row44_outputs_of_a_run_in_its_workspace_go_outside_it eval '
	status_is 0 && [ -z "$(ls -A proj)" ] &&
	out=$(sed -n "s|^kbox run: the current directory is in the workspace, which the code can change: images and long texts go to \($T/tmpd/kbox-run-[0-9]*-[0-9]*-[A-Za-z0-9]*\) instead (removed at the end if none is saved)\$|\1|p" stderr) &&
	[ -n "$out" ] && [ "$(wc -c <"$out/1-stdout.txt")" = 100001 ] &&
	last_line_is stdout "[files saved in: $out/]"'

fresh
chmod 711 "$T"
mkdir -p proj/out proj/sub
writable_by_sandboxes proj
ln -s proj plink
for o in proj/out proj/sub/../out plink/out proj; do
	kbox run --workspace proj -o "$o" -c 'print(1)'
	printf '%s %s\n' "$rc" "$(cat stderr)" >>refusals
done
check row44_outputs_in_the_workspace_are_refused eval '
	[ "$(cat refusals)" = "$(for o in proj/out proj/sub/../out plink/out proj; do
		printf "2 kbox run: --outputs %s: refused: it is in the workspace %s, where the code could read and change the images and texts kept for you; give a directory outside it\n" "$o" "$T/proj"
	done)" ]'

fresh
chmod 711 "$T"
mkdir proj o
writable_by_sandboxes proj o
mkfifo -m 666 proj/ready proj/gate
if [ -z "$SKIPPING" ]; then
	timeout -k 5 120 "$KBOX" run --workspace proj -o o -c 'print("a" * 100000)' -c '
open("ready", "w").close()
open("gate").read()
print("b" * 100000)' >stdout 2>stderr </dev/null &
	run_pid=$!
	timeout 120 cat proj/ready
	mv o o-moved && mkdir o
	echo go >proj/gate
	wait "$run_pid"
	rc=$?
fi
check row44_outputs_directory_renamed_during_a_run_keeps_the_files eval '
	status_is 0 && [ -z "$(ls -A o)" ] &&
	[ "$(cd o-moved && ls | tr "\n" " ")" = "1-stdout.txt 2-stdout.txt " ]'

# A state directory made in a workspace while its run goes on (KBOX_HOME=
# W/st kbox exec ...) would hand that sandbox its sessions' keys and
# sockets: kbox run's supervisor records its workspace where every kbox of
# the user looks (LIVE, below), and a state directory in a recorded one
# is refused, before anything is made in it.  The code waits on a FIFO
# while the other kbox runs; the record goes with the run.
fresh
chmod 711 "$T"
mkdir proj
writable_by_sandboxes proj
mkfifo -m 666 proj/ready proj/gate
# (where kbox keeps the record: under root /run/kbox, else in the
# user's default state directory, by the password database's home)
if [ "$(id -u)" = 0 ]; then
	LIVE=/run/kbox
else
	LIVE=$(getent passwd "$(id -u)" | cut -d: -f6)/.local/state/kbox/live
fi
if [ -z "$SKIPPING" ]; then
	timeout -k 5 120 "$KBOX" run --workspace proj -c '
open("ready", "w").close()
print(open("gate").read().strip())' >run.out 2>run.err </dev/null &
	run_pid=$!
	timeout 120 cat proj/ready
	grep -lx "$T/proj" "$LIVE"/ws-* >records 2>/dev/null
	rec_pid=$(sed -n 's/^[0-9]* [0-9]* \([0-9]*\)$/\1/p' "$(head -n 1 records)")
	KBOX_HOME=$T/proj/st timeout -k 5 120 "$KBOX" exec -s victim 'print(1)' >stdout 2>stderr
	rc=$?
	last_dir=$T last_out=$T/stdout last_err=$T/stderr
	ls -A proj >in_proj
	# however deep: a link the code could plant, to a directory 300
	# levels down in the workspace (review 5's B1-5a)
	deep=$(printf 'a/%.0s' $(seq 300))
	mkdir -p "proj/$deep" && ln -s "${deep%/}" proj/st2
	KBOX_HOME=$T/proj/st2 timeout -k 5 120 "$KBOX" exec -s victim 'print(1)' >deep.out 2>deep.err
	echo $? >deep.rc
	rm -f proj/st2 && rm -r proj/a
	# an outputs directory there: the code would read and rewrite it
	mkdir proj/out
	KBOX_HOME=$T/elsewhere timeout -k 5 120 "$KBOX" exec -s o -o "$T/proj/out" 'print(1)' \
		>outw.out 2>outw.err
	echo $? >outw.rc
	rmdir proj/out
	echo released >proj/gate
	wait "$run_pid"
	run_rc=$?
	grep -lx "$T/proj" "$LIVE"/ws-* >records_after 2>/dev/null
fi
check row44_a_state_directory_made_in_a_running_workspace_is_refused fails_with 5 \
	"kbox exec: state directory $T/proj/st is in $T/proj, the workspace of a running sandbox (supervisor pid ${rec_pid-}): its code could reach the sessions' keys and sockets; keep state directories (KBOX_HOME, XDG_RUNTIME_DIR) outside it"
check row44_a_state_directory_however_deep_in_a_running_workspace_is_refused eval '
	[ "$(cat deep.rc)" = 5 ] && [ ! -s deep.out ] &&
	grep -qE "^kbox exec: state directory .* (is in $T/proj, the workspace of a running sandbox|is a symbolic link in a directory you can write)" deep.err ||
	{ sed "s/^/#   /" deep.err | cut -c1-300; false; }'
check row44_an_outputs_directory_in_a_running_workspace_is_refused eval '
	[ "$(cat outw.rc)" = 2 ] && [ ! -s outw.out ] &&
	grep -qF "kbox exec: --outputs $T/proj/out: outputs directory $T/proj/out is in $T/proj, the workspace of a running sandbox (supervisor pid ${rec_pid-}): its code could reach what is kept there; keep it outside it" outw.err'
check row44_a_refused_state_directory_is_not_made eval '
	[ "$(cat in_proj)" = "$(printf "gate\nready")" ]'
check row44_a_running_workspace_is_recorded_once eval '
	[ "$(wc -l <records)" = 1 ] && [ "$(stat -c %a "$LIVE")" = 700 ] &&
	[ "$(stat -c %u "$LIVE")" = "$(id -u)" ]'
check row44_the_record_of_a_workspace_goes_with_its_run eval '
	[ "$run_rc" = 0 ] && [ "$(cat run.out)" = released ] && [ ! -s records_after ] ||
	{ echo "# run: $run_rc"; sed "s/^/# /" run.out run.err records_after; false; }'
# (under root the sandboxes' group could still change proj, given to it
# above: a state directory there is refused for that, whatever the record
# says; once proj is root's alone it is taken)
if [ "$(id -u)" = 0 ]; then
	KBOX_HOME=$T/proj/st kbox exec -s after 'print(2)'
	check row44_under_root_a_state_directory_the_sandboxes_group_can_replace_is_refused fails_with 5 \
		"kbox exec: state directory $T/proj/st: $T/proj above it can be changed by its group (owner uid 0, mode $(stat -c %04a proj)), who could put another state directory in its place; use a directory whose every parent only you or root can change"
	chmod g-w proj
else
	skip row44_under_root_a_state_directory_the_sandboxes_group_can_replace_is_refused \
		"run by an ordinary user, nothing here is given to another group"
fi
# a directory above it that everyone may change (not sticky, as /tmp is):
# refused as well, in both lanes, and nothing is made there
mkdir open && chmod 777 open
KBOX_HOME=$T/open/st kbox exec -s after 'print(2)'
check row44_a_state_directory_below_a_directory_everyone_can_change_is_refused eval '
	status_is 5 && [ ! -s stdout ] &&
	stderr_is "kbox exec: state directory $T/open/st: $T/open above it can be changed by everyone (owner uid $(id -u), mode 0777), who could put another state directory in its place; use a directory whose every parent only you or root can change" &&
	[ ! -e open/st ]'
KBOX_HOME=$T/proj/st kbox exec -s after 'print(2)'
check row44_a_state_directory_in_a_workspace_whose_run_ended_is_taken eval '
	status_is 0 && last_line_is stdout 2'
KBOX_HOME=$T/proj/st kbox stop --all

# A state directory in another (a session's workspace is in one, and
# that session's sandbox has it) is refused: the code there would have
# its sessions (review 5's B1-5c)
# (while a runs, its workspace is live, and that is said first)
fresh
kbox exec -s a 'print(1)'
apid=$(cat "$S/a/supervisor.pid" 2>/dev/null)
KBOX_HOME=$S/a/workspace/st kbox exec -s victim 'print(2)'
check row44_a_state_directory_in_a_running_sessions_workspace_is_refused fails_with 5 \
	"kbox exec: state directory $S/a/workspace/st is in $S/a/workspace, the workspace of a running sandbox (supervisor pid ${apid-}): its code could reach the sessions' keys and sockets; keep state directories (KBOX_HOME, XDG_RUNTIME_DIR) outside it"
kbox stop -s a
KBOX_HOME=$S/a/workspace/st kbox exec -s victim 'print(2)'
check row44_a_state_directory_in_another_state_directory_is_refused fails_with 5 \
	"kbox exec: state directory $S/a/workspace/st is in the directory of the session $S/a, whose workspace and home its sandbox has: keep state directories apart"

# Elsewhere in a state directory (not in its sessions directory, where
# the sessions' workspaces and homes are) no sandbox reaches: a state
# directory there is taken, and its sessions start, list and stop
fresh
mkdir -m 700 "$KBOX_HOME/apart"
KBOX_HOME=$KBOX_HOME/apart/st kbox start -s beside --backend none
KBOX_HOME=$KBOX_HOME/apart/st kbox ls
check row44_a_state_directory_beside_another_ones_sessions_is_taken eval '
	status_is 0 && [ "$(awk "NR == 2 { print \$1, \$2 }" stdout)" = "beside idle" ]'
KBOX_HOME=$KBOX_HOME/apart/st kbox stop -s beside
check row44_a_state_directory_beside_another_ones_sessions_stops_its_sessions eval '
	status_is 0 && stdout_is "session beside stopped"'
KBOX_HOME=$KBOX_HOME/sessions/c/workspace/st kbox exec -s v 'print(1)'
check row44_a_refused_state_directory_leaves_nothing_made eval 'fails_with 5 \
	"kbox exec: state directory $KBOX_HOME/sessions/c/workspace/st is in the sessions of the kbox state directory $KBOX_HOME, whose workspaces and homes sandboxes have: keep state directories apart" &&
	[ ! -e "$S/c" ]'
KBOX_HOME=$KBOX_HOME/sessions kbox ls
check row44_a_state_directory_that_is_another_ones_sessions_directory_is_refused fails_with 5 \
	"kbox ls: state directory $KBOX_HOME/sessions is in the sessions of the kbox state directory $KBOX_HOME, whose workspaces and homes sandboxes have: keep state directories apart"

# A session's own workspace or home that holds a state directory made
# there before the session started is refused at its start: its sandbox
# would have that directory's sessions (review 6's B1-6a)
fresh
mkdir -p "$S/pre/workspace/st" "$S/pre2/home/st"
: >"$S/pre/workspace/st/.kbox-state"
: >"$S/pre2/home/st/.kbox-state"
chmod -R go-rwx "$S/pre" "$S/pre2"
# refused_at_start LINE: exit 5, nothing on standard output, and LINE on
# standard error (after the one warning an ordinary user gets without
# cgroups, if any)
refused_at_start() {
	[ "$rc" = 5 ] && [ ! -s stdout ] &&
		[ "$(grep -v "^kbox exec: warning: no cgroups here" stderr)" = "$1" ]
}
kbox exec -s pre 'print(1)'
check row44_a_sessions_workspace_holding_a_state_directory_is_refused_at_its_start refused_at_start \
	"kbox exec: session pre: the session's workspace: refused: $S/pre/workspace holds the kbox state directory $S/pre/workspace/st, and its sandbox's code could reach the sessions' keys and sockets there"
kbox exec -s pre2 'print(1)'
check row44_a_sessions_home_holding_a_state_directory_is_refused_at_its_start refused_at_start \
	"kbox exec: session pre2: the session's home: refused: $S/pre2/home holds the kbox state directory $S/pre2/home/st, and its sandbox's code could reach the sessions' keys and sockets there"

# An outputs directory in a running session's own workspace is refused,
# and kbox run's default one, from a current directory there, goes to
# TMPDIR: the session's code would read and rewrite it (review 6's W6-3)
fresh
kbox exec -s a 'print(1)'
mkdir -p "$S/a/workspace/out"
kbox exec -s b -o "$S/a/workspace/out" 'print(2)'
check row44_an_outputs_directory_in_a_sessions_own_workspace_is_refused fails_with 2 \
	"kbox exec: --outputs $S/a/workspace/out: outputs directory $S/a/workspace/out is in the kbox state directory $S/a, whose sessions' sandboxes have their workspaces there, running or not: keep it outside"
# and once a stops: its workspace is its sandbox's again at its next
# start (review 7's W7-1)
kbox stop -s a
kbox exec -s b -o "$S/a/workspace/out" 'print(2)'
check row44_an_outputs_directory_in_a_stopped_sessions_workspace_is_refused fails_with 2 \
	"kbox exec: --outputs $S/a/workspace/out: outputs directory $S/a/workspace/out is in the kbox state directory $S/a, whose sessions' sandboxes have their workspaces there, running or not: keep it outside"
# run_in_a NAME N: kbox run -c 'print(N)' from a's workspace, TMPDIR
# $T/tmpd; its outputs NAME.out, NAME.err, its status NAME.rc (in $T)
run_in_a() {
	mkdir -p "$T/tmpd"
	[ -z "$SKIPPING" ] || return 0
	(cd "$S/a/workspace" && TMPDIR=$T/tmpd timeout -k 5 120 "$KBOX" run -c "print($2)" \
		>"$T/$1.out" 2>"$T/$1.err")
	echo $? >"$T/$1.rc"
}
# ran_outside NAME N WHY: run_in_a NAME N printed N, and kept its outputs
# in $T/tmpd, out of a's workspace, saying WHY
ran_outside() {
	[ "$(cat "$T/$1.rc")" = 0 ] && [ "$(cat "$T/$1.out")" = "$2" ] &&
		grep -q "^kbox run: $3: images and long texts go to $T/tmpd/kbox-run-" "$T/$1.err" &&
		[ -z "$(ls -d "$S"/a/workspace/kbox-run-* 2>/dev/null)" ] && return 0
	sed "s/^/#   /" "$T/$1.err"
	return 1
}
run_in_a runs 4
check row44_a_run_from_a_stopped_sessions_workspace_keeps_its_outputs_outside ran_outside runs 4 \
	"the current directory is in a kbox state directory, where sessions keep the workspaces sandboxes can change"
kbox start -s a
run_in_a runa 3
check row44_a_run_from_a_sessions_own_workspace_keeps_its_outputs_outside ran_outside runa 3 \
	"the current directory is in a sandbox.s workspace, which the code can change"
kbox stop --all

# As an ordinary user the code runs as the user: a directory of the
# user's that kbox may not open, the code may chmod open, so a state
# directory behind one is found by refusing it (review 5's B1-5b)
fresh
mkdir -p proj/p/st && : >proj/p/st/.kbox-state
if [ "$(id -u)" != 0 ]; then
	chmod 000 proj/p
	kbox run --workspace proj -c 'print(1)'
	chmod 700 proj/p
	check row44_workspace_holding_a_closed_directory_of_the_users_own_is_refused fails_with 2 \
		"kbox run: --workspace proj: refused: $T/proj holds $T/proj/p, a directory of yours that kbox may not open, and the code, running as you, could open it (chmod): make it readable (chmod u+rx $T/proj/p), or give another directory"
else
	skip row44_workspace_holding_a_closed_directory_of_the_users_own_is_refused \
		"under root the code is another uid, which cannot chmod root's directories"
fi

# A record whose supervisor is gone (its lock free: killed, say) refuses
# nothing, and the next kbox to see it removes it.
fresh
chmod 711 "$T"
mkdir ws
writable_by_sandboxes ws
# (the record's name is kept as it is written: another kbox running beside
# this one, the next to see it, may remove it first)
if [ -z "$SKIPPING" ]; then
	mkdir -p -m 700 "$LIVE"
	STALE_REC=$LIVE/ws-stale$(token)
	printf '%s %s 1\n%s\n' "$(stat -c %d ws)" "$(stat -c %i ws)" "$T/ws" >"$STALE_REC"
fi
[ "$(id -u)" != 0 ] || chmod g-w ws # (a parent the sandboxes' group can change is refused)
KBOX_HOME=$T/ws/st kbox exec -s s 'print(3)'
check row44_a_record_whose_supervisor_is_gone_refuses_nothing eval '
	status_is 0 && last_line_is stdout 3'
check row44_a_record_whose_supervisor_is_gone_is_removed eval '
	[ -n "${STALE_REC-}" ] && [ ! -e "$STALE_REC" ]'
KBOX_HOME=$T/ws/st kbox stop --all

# What kbox removes (hostile review 14, B14-2): code that could reach a
# state directory put a link at its "sessions" to a directory of the
# user's, whose private directories kbox ls then listed as stopped
# sessions and kbox prune removed.  A "sessions" that is a link, a session
# directory that is a link, and a directory holding none of the files
# kbox makes in a session are refused; nothing of the user's goes.
fresh
chmod 711 "$T"
mkdir -m 700 st mine mine/docs
echo keep >mine/docs/f
ln -s "$T/mine" st/sessions
KBOX_HOME=$T/st kbox prune
check row44_a_sessions_directory_that_is_a_link_is_refused fails_with 5 \
	"kbox prune: $T/st/sessions is not a directory of this user's (a symbolic link, owner uid $(id -u)): kbox makes it a directory of its own; something else put it there"
check row44_prune_removes_nothing_a_sessions_link_points_to eval '[ "$(cat mine/docs/f)" = keep ]'
rm st/sessions
mkdir -m 700 st/sessions st/sessions/plain
ln -s "$T/mine/docs" st/sessions/docs
echo keep >st/sessions/plain/f
KBOX_HOME=$T/st kbox rm -s docs
check row44_a_session_directory_that_is_a_link_is_not_removed eval '[ "$rc" = 5 ] &&
	stderr_is "kbox rm: session directory $T/st/sessions/docs is a symbolic link, not a directory kbox made: something else put it there; remove the link (rm $T/st/sessions/docs: what it leads to stays)" &&
	[ "$(cat mine/docs/f)" = keep ]'
KBOX_HOME=$T/st kbox rm -s plain
check row44_a_directory_without_kbox_files_is_not_removed_as_a_session eval '[ "$rc" = 5 ] &&
	stderr_is "kbox rm: session plain: $T/st/sessions/plain holds none of the files kbox makes in a session (session.json, supervisor.pid, events.ndjson): not removed; if it is yours to remove, rm -r $T/st/sessions/plain" &&
	[ "$(cat st/sessions/plain/f)" = keep ]'
# an empty one has nothing to lose: it goes (newcomer 11, F7)
mkdir -m 700 st/sessions/empty
KBOX_HOME=$T/st kbox rm -s empty
check row44_an_empty_directory_in_sessions_is_removed eval 'status_is 0 && [ ! -e st/sessions/empty ]'

# A FIFO put in place of a file kbox keeps (review 14, W14-1) hung kbox
# ls for the whole state directory, kbox status, rm and logs, and a
# supervisor that opened one ignored SIGTERM.  kbox never waits on one:
# it is refused as no file (a session without its files), never opened
# for a wait on its other end.
fresh
chmod 711 "$T"
mkdir -m 700 st st/sessions
for f in session.json supervisor.pid events.ndjson last-stop start.lock; do
	mkdir -m 700 "st/sessions/ff-${f%%.*}"
	mkfifo "st/sessions/ff-${f%%.*}/$f"
done
KBOX_HOME=$T/st kbox ls
check row44_ls_is_not_held_by_fifos_in_place_of_session_files eval 'status_is 0 &&
	[ "$(awk "NR > 1 { print \$1 }" stdout | tr "\n" " ")" = "ff-events ff-last-stop ff-session ff-start ff-supervisor " ]'
fifo_rcs=
for s in session supervisor last-stop start events; do
	KBOX_HOME=$T/st kbox status -s ff-$s
	fifo_rcs="$fifo_rcs status:$rc"
done
KBOX_HOME=$T/st kbox logs -s ff-events
fifo_rcs="$fifo_rcs logs:$rc"
KBOX_HOME=$T/st kbox rm -s ff-start
fifo_rcs="$fifo_rcs rm:$rc"
KBOX_HOME=$T/st kbox rm -s ff-supervisor
fifo_rcs="$fifo_rcs rm:$rc"
check row44_status_logs_and_rm_are_not_held_by_fifos eval '
	case "$fifo_rcs" in *:124*) say "$fifo_rcs"; false ;; esac'
# a session whose session.json is a FIFO, which ls shows as invalid, is
# still a session to rm (review 15, W15-1): its files are known by name
KBOX_HOME=$T/st kbox rm -s ff-session
check row44_a_session_whose_session_json_is_a_fifo_is_removed eval '
	status_is 0 && [ ! -e st/sessions/ff-session ]'
# and a supervisor: a session whose log files are FIFOs starts, stops
KBOX_HOME=$T/st kbox start -s ffs
KBOX_HOME=$T/st kbox stop -s ffs
for f in events.ndjson kernel.log supervisor.log generation cgroups last-stop; do
	rm -f "st/sessions/ffs/$f"
	mkfifo "st/sessions/ffs/$f"
done
KBOX_HOME=$T/st kbox start -s ffs
ffs_start=$rc
KBOX_HOME=$T/st kbox exec -s ffs 'print(6 * 7)'
check row44_a_supervisor_is_not_held_by_fifos_in_place_of_its_logs eval '
	[ "$ffs_start" = 0 ] && status_is 0 && last_line_is stdout 42'
KBOX_HOME=$T/st kbox rm -f -s ffs
check row44_a_session_with_fifos_for_logs_stops_and_goes eval 'status_is 0 && [ ! -e st/sessions/ffs ]'
# What its code made unremovable in its workspace (a file in a directory
# of mode 0 in one of mode 0500) goes with the session, removed by either
# identity: the documented way, as an ordinary user's rm -rf would fail
KBOX_HOME=$T/st kbox exec -s lk 'import os
os.makedirs("d/e"); open("d/e/f", "w").write("x")
os.chmod("d/e", 0); os.chmod("d", 0o500)'
lk_rc=$rc
lk_mode=$(stat -c %a st/sessions/lk/workspace/d 2>/dev/null)
KBOX_HOME=$T/st kbox rm -f -s lk
check row44_kbox_rm_removes_a_workspace_its_code_made_unremovable eval '[ "$lk_rc" = 0 ] &&
	[ "$lk_mode" = 500 ] && status_is 0 && stderr_empty && [ ! -e st/sessions/lk ]'
# What ls, status and logs read of a session's files is bounded, however
# large code that reached the state directory made them (threat 45): its
# pid, generation, last stop and cgroups files of 20 MB, and an event log
# with a line of 100 MB between two events (kbox writes none over 1 MiB)
KBOX_HOME=$T/st kbox start -s huge
KBOX_HOME=$T/st kbox stop -s huge
for f in supervisor.pid generation last-stop cgroups; do
	head -c 20000000 /dev/zero | tr '\0' 7 >"st/sessions/huge/$f"
done
{
	echo '{"time":"2026-01-01T00:00:00.000Z","event":"start","pid":1}'
	head -c 100000000 /dev/zero | tr '\0' x
	echo
	echo '{"time":"2026-01-01T00:00:01.000Z","event":"stop"}'
} >st/sessions/huge/events.ndjson
measure_rss=yes
huge_rss=
for c in ls status logs; do
	if [ "$c" = ls ]; then KBOX_HOME=$T/st kbox ls; else KBOX_HOME=$T/st kbox "$c" -s huge; fi
	huge_rss="$huge_rss $c:$rc:${rss:-?}:$(wc -c <stdout)"
	cp stdout "huge-$c.out"
done
measure_rss=
say "ls, status, logs over huge session files (command:status:peak KiB:bytes out):$huge_rss"
why="command:status:peak KiB:bytes out:$huge_rss"
check row45_logs_of_a_100_mb_line_shows_the_events_around_it_and_says_it_left_it_out eval '
	status_is 0 && stdout_is "2026-01-01T00:00:00.000Z start       pid=1
2026-01-01T00:00:01.000Z stop" &&
	stderr_is "kbox logs: warning: 1 line longer than 1048576 bytes left out: kbox writes none (something else wrote it)"'
# (a pid file of digits that overflow is no pid, never -1: kill(-1, …))
check row45_a_pid_file_of_20_mb_of_digits_is_no_pid eval '
	grep -q "^state: *dead$" huge-status.out && ! grep -q "^pid:" huge-status.out &&
	grep -q "^huge  *dead .* -  " huge-ls.out'
if [ "$asan" = yes ]; then
	n=$((n + 1))
	echo "ok $n - row45_ls_status_and_logs_over_huge_session_files_peak_under_16_mib # SKIP AddressSanitizer build: not judged ($huge_rss)"
else
	huge_ok=yes
	for r in $huge_rss; do
		# shellcheck disable=SC2046 # the four fields of R
		set -- $(echo "$r" | tr : " ")
		[ "$3" != "?" ] && [ "$3" -lt 16384 ] && [ "$4" -lt 4096 ] || huge_ok=no
	done
	check row45_ls_status_and_logs_over_huge_session_files_peak_under_16_mib eval '
		[ "$huge_ok" = yes ]'
fi
KBOX_HOME=$T/st kbox rm -f -s huge

# A link put at a session's run directory (review 16, B16-4): the next
# supervisor emptied and removed what it led to.  It is refused, and
# nothing there goes.
fresh
chmod 711 "$T"
KBOX_HOME=$T/st kbox start -s r --backend none
KBOX_HOME=$T/st kbox stop -s r
mkdir -m 700 victim victim/sandbox
: >victim/kernel-keep
: >victim/sandbox/f
rm -rf st/sessions/r/run && ln -s "$T/victim" st/sessions/r/run
KBOX_HOME=$T/st kbox start -s r
check row44_a_link_at_a_sessions_run_directory_is_refused_and_nothing_there_goes eval '
	status_is 5 &&
	grep -qxF "kbox start: session r: $T/st/sessions/r/run is not a directory (a symbolic link): something else put it there; refusing it" stderr &&
	[ -e victim/kernel-keep ] && [ -e victim/sandbox/f ]'
rm st/sessions/r/run

# A link put in place of the state directory (review 15, B15-2): code
# of a sandbox that holds the directory above it swapped it for a link to
# another state directory of the user's, whose same-named session is
# unsandboxed, and kbox followed it (it resolves every link in
# KBOX_HOME).  Run by an ordinary user, a link in a directory the user can
# write is refused on the way to a state directory, and nothing of the
# other one is touched; under root the sandboxes are other uids, which
# cannot write root's directories (and one they can write is refused
# above), and the link is followed.
fresh
chmod 711 "$T"
KBOX_HOME=$T/B kbox start -s victim --backend none
KBOX_HOME=$T/B kbox stop -s victim
mkdir -m 700 proj proj/st.real
ln -s "$T/B" proj/st
KBOX_HOME=$T/proj/st kbox exec -s victim 'print("ran")'
if [ "$(id -u)" != 0 ]; then
	check row44_a_link_in_place_of_the_state_directory_is_refused fails_with 5 \
		"kbox exec: state directory $T/proj/st: $T/proj/st is a symbolic link in a directory you can write, where code of a sandbox could have put it to have kbox use another state directory (kbox(7), threat 44); give KBOX_HOME the directory it leads to: $T/B"
	KBOX_HOME=$T/proj/st kbox prune
	check row44_prune_through_a_link_in_place_of_the_state_directory_removes_nothing eval '
		status_is 5 && [ -f B/sessions/victim/session.json ] &&
		[ "$(KBOX_HOME=$T/B "$KBOX" ls | awk "NR > 1 { print \$1 }")" = victim ]'
	# the same link reached through XDG_STATE_HOME, or a HOME that is not
	# the one the password database names (review 18, B18-1): they can
	# name any directory too
	mkdir -m 700 proj/xdg proj/home proj/home/.local proj/home/.local/state
	ln -s "$T/B" proj/xdg/kbox
	ln -s "$T/B" proj/home/.local/state/kbox
	(unset KBOX_HOME && XDG_STATE_HOME=$T/proj/xdg kbox exec -s victim 'print("ran")')
	check row44_a_link_reached_through_xdg_state_home_is_refused fails_with 5 \
		"kbox exec: state directory $T/proj/xdg/kbox: $T/proj/xdg/kbox is a symbolic link in a directory you can write, where code of a sandbox could have put it to have kbox use another state directory (kbox(7), threat 44); its path comes from XDG_STATE_HOME=$T/proj/xdg: give KBOX_HOME the directory it leads to: $T/B"
	(unset KBOX_HOME XDG_STATE_HOME && HOME=$T/proj/home kbox exec -s victim 'print("ran")')
	check row44_a_link_reached_through_a_home_not_the_users_own_is_refused fails_with 5 \
		"kbox exec: state directory $T/proj/home/.local/state/kbox: $T/proj/home/.local/state/kbox is a symbolic link in a directory you can write, where code of a sandbox could have put it to have kbox use another state directory (kbox(7), threat 44); its path comes from HOME=$T/proj/home: give KBOX_HOME the directory it leads to: $T/B"
	# the advice is spelt as kbox spells a state directory (dots and
	# doubled slashes gone, ".." of a part not there yet taken)
	KBOX_HOME=$T/proj/st/./new/x/..//y// kbox ls
	check row44_the_advice_for_a_link_is_spelt_as_kbox_spells_it fails_with 5 \
		"kbox ls: state directory $T/proj/st/./new/x/..//y//: $T/proj/st is a symbolic link in a directory you can write, where code of a sandbox could have put it to have kbox use another state directory (kbox(7), threat 44); give KBOX_HOME the directory it leads to: $T/B/new/y"
	# and doctor, asked whether kernels can run, says it too
	KBOX_HOME=$T/proj/st kbox doctor
	check row44_doctor_fails_a_state_directory_every_command_refuses eval 'status_is 5 &&
		grep -qx "fail  state directory  state directory $T/proj/st: $T/proj/st is a symbolic link .*: $T/B" stdout'
	# a directory on the way the user may not pass through is named
	mkdir -m 0 shut
	KBOX_HOME=$T/shut/h kbox ls
	chmod 700 shut
	check row44_a_directory_on_the_way_not_to_be_passed_is_named_with_the_fix fails_with 5 \
		"kbox ls: state directory $T/shut/h: you may not pass through $T/shut (mode 0000, owner uid $(id -u)): give KBOX_HOME a directory of your own (KBOX_HOME=\$(mktemp -d)), or leave it unset for the default"
	# and one that cannot be made says where it cannot, and what to do
	mkdir -m 500 ro
	KBOX_HOME=$T/ro/h kbox start -s a
	chmod 700 ro
	check row44_a_state_directory_that_cannot_be_made_says_where_and_what_to_do eval '
		fails_with 5 "kbox start: state directory $T/ro/h cannot be made: $T/ro cannot be written: Permission denied; give KBOX_HOME a directory that can be (KBOX_HOME=\$(mktemp -d)), or leave it unset for the default" &&
		[ ! -e ro/h ]'
else
	check row44_a_link_in_place_of_the_state_directory_is_refused eval '
		status_is 0 && last_line_is stdout ran'
	for t in row44_prune_through_a_link_in_place_of_the_state_directory_removes_nothing \
		row44_a_link_reached_through_xdg_state_home_is_refused \
		row44_a_link_reached_through_a_home_not_the_users_own_is_refused \
		row44_the_advice_for_a_link_is_spelt_as_kbox_spells_it \
		row44_doctor_fails_a_state_directory_every_command_refuses \
		row44_a_directory_on_the_way_not_to_be_passed_is_named_with_the_fix \
		row44_a_state_directory_that_cannot_be_made_says_where_and_what_to_do; do
		skip "$t" "under root the link is followed (no sandbox can write root's directories), and root passes through every directory"
	done
fi
KBOX_HOME=$T/B kbox stop --all

# kbox run's own session directory is a state directory too: nobody but
# the user or root may change a directory above it (review 18, W18-6:
# under root it was made in a directory a sandbox's uid owned)
fresh
mkdir -m 700 xr
mkdir xr/shared
chmod 775 xr/shared
XDG_RUNTIME_DIR=$T/xr/shared kbox run --backend none -c 'print("ran")'
check row44_kbox_run_refuses_a_runtime_directory_others_can_change eval '
	status_is 5 && [ ! -s stdout ] &&
	[ "$(grep -v "^kbox: warning: " stderr)" = "kbox run: XDG_RUNTIME_DIR=$T/xr/shared: state directory $T/xr/shared/kbox-run-XXXXXX: $T/xr/shared above it can be changed by its group (owner uid $(id -u), mode 0775), who could put another state directory in its place; use a directory whose every parent only you or root can change (or unset XDG_RUNTIME_DIR: /tmp then)" ] &&
	[ -z "$(ls -A xr/shared)" ]'
# nor through a link, or /proc/self/cwd (review 20, W20-2): the
# directories above the one it leads to are those checked
ln -s "$T/xr/shared" xr/link
XDG_RUNTIME_DIR=$T/xr/link kbox run --backend none -c 'print("ran")'
cp stderr link.err
if [ -z "$SKIPPING" ]; then
	(cd xr/shared && XDG_RUNTIME_DIR=/proc/self/cwd timeout -k 5 120 "$KBOX" run \
		--backend none -c 'print("ran")') >cwd.out 2>cwd.err
	cwd_rc=$?
fi
check row44_kbox_run_refuses_a_runtime_directory_others_can_change_reached_through_a_link eval '
	status_is 5 && [ ! -s stdout ] && [ "$cwd_rc" = 5 ] && [ ! -s cwd.out ] &&
	[ "$(grep -v "^kbox: warning: " link.err)" = "kbox run: XDG_RUNTIME_DIR=$T/xr/link: state directory $T/xr/shared/kbox-run-XXXXXX: $T/xr/shared above it can be changed by its group (owner uid $(id -u), mode 0775), who could put another state directory in its place; use a directory whose every parent only you or root can change (or unset XDG_RUNTIME_DIR: /tmp then)" ] &&
	[ "$(grep -v "^kbox: warning: " cwd.err)" = "kbox run: XDG_RUNTIME_DIR=/proc/self/cwd: state directory $T/xr/shared/kbox-run-XXXXXX: $T/xr/shared above it can be changed by its group (owner uid $(id -u), mode 0775), who could put another state directory in its place; use a directory whose every parent only you or root can change (or unset XDG_RUNTIME_DIR: /tmp then)" ] &&
	[ -z "$(ls -A xr/shared)" ]'
# a relative one is as none (review 19, W19-2: it slipped past the check)
if [ -z "$SKIPPING" ]; then
	(cd xr/shared && XDG_RUNTIME_DIR=. timeout -k 5 120 "$KBOX" run --backend none \
		-c 'import os; print(os.getcwd())') >rel.out 2>rel.err
	rel_rc=$?
fi
check row44_kbox_run_takes_a_relative_runtime_directory_for_none eval '
	[ "$rel_rc" = 0 ] && case $(tail -n 1 rel.out) in /tmp/kbox-run-*/workspace) true ;; *) false ;; esac &&
	[ -z "$(ls -A xr/shared)" ]'

# Why a session stopped is kept where no sandbox reaches (review 18,
# W18-3): a last-stop put in the session's directory, where code that
# reached the state directory can write, is neither the note of the next
# kernel's first result nor what kbox ls says.
fresh
chmod 711 "$T"
KBOX_HOME=$T/ls1 kbox start -s n
KBOX_HOME=$T/ls1 kbox stop -s n
printf 'forged]\n[kbox: run code with --backend none' >ls1/sessions/n/last-stop
KBOX_HOME=$T/ls1 kbox ls --format json
cp stdout ls.json
KBOX_HOME=$T/ls1 kbox exec -s n 'print("ran")'
check row44_a_last_stop_put_in_the_session_directory_is_not_kboxs_own eval '
	status_is 0 && ! grep -q forged stdout stderr ls.json &&
	[ "$(head -1 stdout)" = "[note: kernel restarted: the session'"'"'s previous kernel ended (stopped on request (kbox stop)); earlier state (variables, imports, loaded data) is lost; files in the workspace are kept]" ] &&
	last_line_is stdout ran &&
	"$PY" -c "import json, sys; l = json.load(open(sys.argv[1])); sys.exit(l[0][\"last_stop\"] != \"stopped on request (kbox stop)\")" ls.json'
KBOX_HOME=$T/ls1 kbox rm -f -s n

# The seal binds the session directory (review 14, W14-2): a sealed
# session.json of a session of the same name in another state directory
# (one --backend none) copied in is refused; --reseal seals the file as
# it is, prints it, and starts nothing (W14-3: what is sealed is shown).
if [ "$(id -u)" != 0 ]; then
	skip row44_reseal_under_root_says_nothing_is_sealed "run by an ordinary user the file is sealed (below)"
	fresh
	KBOX_HOME=$T/st1 kbox start -s same
	KBOX_HOME=$T/st1 kbox stop -s same
	KBOX_HOME=$T/st2 kbox start -s same --backend none
	KBOX_HOME=$T/st2 kbox stop -s same
	cp st2/sessions/same/session.json st1/sessions/same/session.json
	KBOX_HOME=$T/st1 kbox start -s same
	check row44_a_sealed_session_json_of_another_state_directory_is_refused fails_with 5 \
		"kbox start: $T/st1/sessions/same/session.json is not as kbox wrote it: its seal does not match (it was changed, copied from another session, moved with its state directory, or sealed with another key); read it, then seal it as it is (kbox start --reseal -s same) or remove the session (kbox rm -s same)"
	KBOX_HOME=$T/st1 kbox start --reseal -s same --ttl 1m
	check row44_reseal_takes_no_other_option fails_with 2 \
		"kbox start: --reseal takes no other option but -s: it seals the file as it is and starts nothing"
	KBOX_HOME=$T/st1 kbox start --reseal -s same
	check row44_reseal_prints_what_it_sealed_and_starts_nothing eval 'status_is 0 &&
		stderr_is "kbox start: session same: its session.json, as printed, is sealed; start it with kbox start -s same" &&
		"$PY" -c "import json, sys; j = json.load(open(\"stdout\")); sys.exit(not (j[\"backend\"] == \"none\" and \"seal\" not in j))" &&
		[ ! -S st1/sessions/same/control.sock ] &&
		grep -q "\"seal\": \"[0-9a-f]\{64\}\"" st1/sessions/same/session.json'
	KBOX_HOME=$T/st1 kbox rm -s same
	KBOX_HOME=$T/st2 kbox rm -s same
else
	# under root --reseal prints the file and says nothing is sealed
	fresh
	KBOX_HOME=$T/st1 kbox start -s same --backend none
	KBOX_HOME=$T/st1 kbox stop -s same
	KBOX_HOME=$T/st1 kbox start --reseal -s same
	check row44_reseal_under_root_says_nothing_is_sealed eval 'status_is 0 &&
		stderr_is "kbox start: session same: its session.json is as printed; under root nothing is sealed (no sandbox can write the state directory): start it with kbox start -s same" &&
		"$PY" -c "import json, sys; j = json.load(open(\"stdout\")); sys.exit(j[\"backend\"] != \"none\")" &&
		! grep -q "\"seal\"" st1/sessions/same/session.json'
	KBOX_HOME=$T/st1 kbox rm -s same
	for t in row44_a_sealed_session_json_of_another_state_directory_is_refused \
		row44_reseal_takes_no_other_option row44_reseal_prints_what_it_sealed_and_starts_nothing; do
		skip "$t" "under root nothing is sealed: the sandboxes' uids cannot write a state directory"
	done
fi

# The seal is the last one kbox made for the session (review 17, B17-3):
# an older sealed session.json of the same session (--backend none),
# kept by code that could read it and put back after the session was
# made bwrap, is refused, by kbox start and by kbox exec's start; so is
# a sealed file kbox has no record of sealing; --reseal records it, and
# kbox rm forgets the record.
if [ "$(id -u)" != 0 ]; then
	fresh
	live=$(getent passwd "$(id -u)" | cut -d: -f6)/.local/state/kbox/live
	[ -d "$live" ] || live=/tmp/kbox-$(id -u)
	record=$live/.seals/$(printf %s "$T/st1/sessions/r" | sha256sum | cut -d' ' -f1)
	KBOX_HOME=$T/st1 kbox start -s r --backend none
	KBOX_HOME=$T/st1 kbox stop -s r
	cp st1/sessions/r/session.json old.json
	KBOX_HOME=$T/st1 kbox start -s r --backend bwrap
	KBOX_HOME=$T/st1 kbox stop -s r
	cp old.json st1/sessions/r/session.json
	replayed="$T/st1/sessions/r/session.json is not as kbox wrote it: it is not the file kbox sealed last for this session (an older one, put back since); read it, then seal it as it is (kbox start --reseal -s r) or remove the session (kbox rm -s r)"
	KBOX_HOME=$T/st1 kbox start -s r
	check row44_an_older_sealed_session_json_put_back_is_refused eval '
		fails_with 5 "kbox start: $replayed" && [ ! -S st1/sessions/r/control.sock ]'
	KBOX_HOME=$T/st1 kbox exec -s r 'print("ran")'
	check row44_an_older_sealed_session_json_put_back_runs_nothing eval '
		fails_with 5 "kbox exec: $replayed" &&
		[ ! -s stdout ] && [ ! -S st1/sessions/r/control.sock ]'
	rm -f "$record"
	KBOX_HOME=$T/st1 kbox start -s r
	check row44_a_sealed_session_json_kbox_has_no_record_of_is_refused fails_with 5 \
		"kbox start: $T/st1/sessions/r/session.json is not as kbox wrote it: kbox has no record of sealing it (sealed by a kbox older than that record, or the record was removed); read it, then seal it as it is (kbox start --reseal -s r) or remove the session (kbox rm -s r)"
	KBOX_HOME=$T/st1 kbox start --reseal -s r >/dev/null 2>&1
	KBOX_HOME=$T/st1 kbox exec -s r 'print("ran")'
	check row44_reseal_records_the_seal eval 'status_is 0 && last_line_is stdout ran &&
		[ "$(head -1 "$record")" = "$(sed -n "s/.*\"seal\": \"\([0-9a-f]*\)\".*/\1/p" st1/sessions/r/session.json)" ]'
	KBOX_HOME=$T/st1 kbox rm -f -s r
	check row44_rm_forgets_the_record_of_the_seal eval 'status_is 0 && [ ! -e "$record" ] && [ ! -e st1/sessions/r ]'
	# a session.json removed where kbox sealed one is refused, not taken
	# for a new session's defaults (review 18, W18-1: the limits, env,
	# rootfs and kernel dropped)
	KBOX_HOME=$T/st1 kbox start -s m --memory 300M --env MODE=kept
	KBOX_HOME=$T/st1 kbox stop -s m
	rm st1/sessions/m/session.json
	removed="$T/st1/sessions/m/session.json was removed since kbox sealed it (kbox removes it only with its session): the session's configuration is gone; remove the session (kbox rm -s m; kbox get -s m copies its workspace's files out first) and make it again"
	KBOX_HOME=$T/st1 kbox exec -s m 'print("ran")'
	check row44_a_session_json_removed_since_kbox_sealed_it_is_refused eval '
		fails_with 5 "kbox exec: $removed" && [ ! -s stdout ] &&
		[ ! -e st1/sessions/m/session.json ] && [ ! -S st1/sessions/m/control.sock ]'
	KBOX_HOME=$T/st1 kbox start -s m
	check row44_a_session_json_removed_is_not_made_again_by_start eval '
		fails_with 5 "kbox start: $removed" && [ ! -e st1/sessions/m/session.json ]'
	# nor is an empty directory put in place of the session's (review
	# 19, W19-1: the record is of another directory then)
	KBOX_HOME=$T/st1 kbox rm -f -s m
	KBOX_HOME=$T/st1 kbox start -s m --memory 300M --env MODE=kept
	KBOX_HOME=$T/st1 kbox stop -s m
	mv st1/sessions/m st1/sessions/m-away
	mkdir -m 700 st1/sessions/m
	KBOX_HOME=$T/st1 kbox exec -s m 'print("ran")'
	check row44_an_empty_directory_in_place_of_a_sealed_session_is_refused eval '
		fails_with 5 "kbox exec: $T/st1/sessions/m/session.json was removed since kbox sealed it, or its directory was made again (kbox removes it only with its session): the session'"'"'s configuration is gone; remove the session (kbox rm -s m; kbox get -s m copies its workspace'"'"'s files out first) and make it again" &&
		[ ! -e st1/sessions/m/session.json ]'
	rm -rf st1/sessions/m-away
	# the advice works: kbox rm removes a directory whose session.json
	# kbox sealed there (the state directory removed by hand, say)
	KBOX_HOME=$T/st1 kbox rm -s m
	check row44_kbox_rm_removes_a_session_directory_it_recorded_a_seal_of eval '
		status_is 0 && [ ! -e st1/sessions/m ]'
	KBOX_HOME=$T/st1 kbox exec -s m 'import os; print(os.environ.get("MODE"))'
	check row44_a_session_removed_with_kbox_rm_is_new_again eval '
		status_is 0 && last_line_is stdout None'
	KBOX_HOME=$T/st1 kbox rm -f -s m
	# the record is of the directory, not of its path (W18-4): one made
	# again by hand at the same path, with an old sealed file of the
	# session put in it, has no record
	KBOX_HOME=$T/st1 kbox start -s q --backend none
	KBOX_HOME=$T/st1 kbox stop -s q
	cp st1/sessions/q/session.json old-q.json
	rm -rf st1/sessions/q
	mkdir -m 700 st1/sessions/q
	cp old-q.json st1/sessions/q/session.json
	KBOX_HOME=$T/st1 kbox exec -s q 'print("ran")'
	check row44_an_old_session_json_in_a_session_directory_made_again_is_refused fails_with 5 \
		"kbox exec: $T/st1/sessions/q/session.json is not as kbox wrote it: kbox has no record of sealing it in this directory (the session's directory was made again at its path since); read it, then seal it as it is (kbox start --reseal -s q) or remove the session (kbox rm -s q)"
	rm -rf st1/sessions/q
	# kbox run's session leaves no record behind (W18-4: one a run)
	mkdir -m 700 xr
	XDG_RUNTIME_DIR=$T/xr kbox run --backend none -c "
import hashlib, os
d = os.path.dirname(os.getcwd())
print(os.path.exists(os.path.join('$live/.seals', hashlib.sha256(d.encode()).hexdigest())), d)"
	run_dir=$(sed -n 's/^True //p' stdout)
	check row44_kbox_run_drops_the_record_of_its_seal eval '
		status_is 0 && [ -n "$run_dir" ] &&
		[ ! -e "$live/.seals/$(printf %s "$run_dir" | sha256sum | cut -d" " -f1)" ]'
else
	for t in row44_an_older_sealed_session_json_put_back_is_refused \
		row44_an_older_sealed_session_json_put_back_runs_nothing \
		row44_a_sealed_session_json_kbox_has_no_record_of_is_refused \
		row44_reseal_records_the_seal row44_rm_forgets_the_record_of_the_seal \
		row44_a_session_json_removed_since_kbox_sealed_it_is_refused \
		row44_a_session_json_removed_is_not_made_again_by_start \
		row44_an_empty_directory_in_place_of_a_sealed_session_is_refused \
		row44_kbox_rm_removes_a_session_directory_it_recorded_a_seal_of \
		row44_a_session_removed_with_kbox_rm_is_new_again \
		row44_an_old_session_json_in_a_session_directory_made_again_is_refused \
		row44_kbox_run_drops_the_record_of_its_seal; do
		skip "$t" "under root nothing is sealed: the sandboxes' uids cannot write a state directory"
	done
fi

tests_done
