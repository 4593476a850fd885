#!/bin/sh
# tests/long_home.sh — a state directory of any length (kbox issue 12): a
# unix socket's path has at most 107 bytes, and a KBOX_HOME of 200
# characters puts the control socket and the kernel's sockets well past
# that.  kbox start, exec, status, interrupt, restart and stop work there
# all the same, in the bwrap sandbox and with --backend none, and so does
# kbox run (its session under a long XDG_RUNTIME_DIR too).  TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON.
# Needs a kernel (and bubblewrap for the sandbox's half).  All sessions
# live in a private KBOX_HOME; at exit they are stopped, whatever of ours
# is left is killed by its pid, and the directory is removed.
# shellcheck disable=SC2016,SC2034 # eval strings expand later, on purpose
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"

WARNING='kbox: warning: backend none: the kernel runs unsandboxed'
LOST='earlier state (variables, imports, loaded data) is lost'

# chars N C: N times the character C.
chars() { printf "%${1}s" '' | tr ' ' "$2"; }

# A KBOX_HOME of exactly 200 characters, in two directories (a name has
# at most 255 bytes) that the sandbox user may pass through under root,
# as the harness's own.
part=$(((200 - ${#ROOT} - 2) / 2))
mid=$ROOT/$(chars "$part" m)
KBOX_HOME=$mid/$(chars $((200 - ${#mid} - 1)) h)
mkdir -m 711 "$mid" && mkdir -m 700 "$KBOX_HOME" || exit 1
export KBOX_HOME
S=$KBOX_HOME/sessions
# kbox run's session directory is under XDG_RUNTIME_DIR when it may be
# (not under root with the sandbox: the sandbox user must reach it)
XDG_RUNTIME_DIR=$mid/$(chars $((200 - ${#mid} - 1)) r)
mkdir -m 700 "$XDG_RUNTIME_DIR" || exit 1
export XDG_RUNTIME_DIR

have_bwrap=yes
[ -x /usr/bin/bwrap ] || [ -x /usr/local/bin/bwrap ] || [ -x /bin/bwrap ] || have_bwrap=no

# one_session SES BACKEND: the whole life of session SES in BACKEND (not
# "name": check uses that).
one_session() {
	ses=$1 backend=$2
	warn=
	[ "$backend" = none ] && warn=$WARNING

	fresh
	kbox start -s "$ses" --backend "$backend"
	check "${backend}_start_under_a_200_character_home" eval 'status_is 0 &&
		stdout_is "session $ses started (backend $backend, kernel python3, supervisor pid $(cat "$S/$ses/supervisor.pid"))" &&
		{ [ -z "$warn" ] && stderr_empty || stderr_is "$warn"; }'
	# the premise: these paths do not fit in a unix socket's 108 bytes
	check "${backend}_control_socket_path_is_longer_than_a_unix_socket_allows" eval \
		'[ -S "$S/$ses/control.sock" ] && [ ${#S} -gt 108 ]'
	check "${backend}_control_socket_is_mode_0600" eval '[ "$(stat -c %a "$S/$ses/control.sock")" = 600 ]'
	# (the kernel's five sockets are never in the session's directory:
	# bwrap's in the sandbox's tmpfs, none's outside every state directory)
	check "${backend}_no_kernel_socket_is_in_the_session_directory" eval \
		'[ "$(find "$S/$ses" -type s ! -name control.sock | wc -l)" = 0 ]'

	fresh
	kbox exec -s "$ses" 'x = 41'
	check "${backend}_exec_defines_a_name" eval 'status_is 0 && stdout_empty && stderr_empty'

	fresh
	kbox exec -s "$ses" 'print(x + 1)'
	check "${backend}_exec_uses_it_in_the_next_call" eval 'status_is 0 && stdout_is 42 && stderr_empty'

	fresh
	kbox status -s "$ses"
	check "${backend}_status_shows_the_session_idle_in_its_long_directory" eval 'status_is 0 &&
		[ "$(status_line state)" = idle ] && [ "$(status_line backend)" = "$backend" ] &&
		[ "$(status_line dir)" = "$S/$ses" ] && [ "$(status_line executions)" = 2 ]'

	fresh
	kbox interrupt -s "$ses"
	check "${backend}_interrupt_reaches_the_kernel" eval 'status_is 0 &&
		stdout_is "session $ses: kernel interrupted (it was running no code)" && stderr_empty'

	fresh
	kbox restart -s "$ses"
	check "${backend}_restart_starts_kernel_2" eval 'status_is 0 &&
		stdout_is "session $ses: kernel restarted (kernel 2); earlier state is lost" && stderr_empty'

	fresh
	kbox exec -s "$ses" 'print(6 * 7)'
	check "${backend}_exec_after_restart_answers_from_the_new_kernel" eval 'status_is 0 &&
		stdout_is "[note: kernel restarted: restarted on request (kbox restart); $LOST; it had defined: x: int]
42" && stderr_empty'

	fresh
	kbox stop -s "$ses"
	check "${backend}_stop_stops_the_session" eval 'status_is 0 &&
		stdout_is "session $ses stopped" && stderr_empty && [ ! -e "$S/$ses/control.sock" ]'

	fresh
	kbox run --backend "$backend" -c 'print(1)'
	check "${backend}_run_under_a_200_character_home_and_runtime_dir" eval 'status_is 0 &&
		stdout_is 1 && { [ -z "$warn" ] && stderr_empty || stderr_is "$warn"; }'
}

needs kernel
[ -z "$SKIPPING" ] && [ "$have_bwrap" = no ] && SKIPPING="bubblewrap is not installed"
one_session lb bwrap

needs kernel
one_session ln none

tests_done
