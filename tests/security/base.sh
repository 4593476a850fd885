# tests/security/base.sh — how every tests/security script begins (sourced;
# POSIX sh): the kbox under test and the host's Python, a private KBOX_HOME
# under a short /tmp root (ROOT_TAG names it), and a cleanup at exit that
# stops every session, kills by pid whatever supervisor of ours is left and
# removes the root.  A script may define cleanup_first (run before the
# sessions are stopped) and cleanup_more (after).  Sourced by lib.sh and
# cwd.sh.
# shellcheck shell=sh

top_builddir=${top_builddir:-$(pwd)}
KBOX=${KBOX:-$top_builddir/kbox}
case $KBOX in /*) ;; *) KBOX=$(pwd)/$KBOX ;; esac
PY=${KERNEL_PYTHON:-/usr/bin/python3}
unset KBOX_KERNEL KBOX_SESSION XDG_STATE_HOME

if [ ! -x "$KBOX" ]; then
	echo "Bail out! $KBOX is not built"
	exit 1
fi

# A short root, as most users have (tests/long_home.sh tries a long one).
ROOT=$(mktemp -d "/tmp/${ROOT_TAG:-ks}.XXXX") || exit 1
# under root, sandboxes run as the sandbox user (kbox(7)), whom bwrap finds
# its directories as: it must pass through (not list)
chmod 711 "$ROOT" || exit 1
# who owns what (kbox(7), Identity): as an ordinary user, everything is
# ours, 0700; under root the sandbox's own directories (workspace, home,
# run/sandbox) are the sandbox user's, and the host's directories it
# passes through are 0710, root's, in the sandbox user's group
if [ "$(id -u)" = 0 ]; then
	SB_UID=$(id -u "${KBOX_SANDBOX_USER:-kbox}" 2>/dev/null)
	SB_GID=$(id -g "${KBOX_SANDBOX_USER:-kbox}" 2>/dev/null)
	PASS_MODE=710
else
	SB_UID=$(id -u)
	SB_GID=$(id -g)
	PASS_MODE=700
fi
KBOX_HOME=$ROOT/h
mkdir -m 700 "$KBOX_HOME" || exit 1
export KBOX_HOME
S=$KBOX_HOME/sessions
BG=
SKIPPING=

cleanup() {
	cd / || return
	for p in $BG; do
		kill "$p" 2>/dev/null
	done
	wait 2>/dev/null
	! command -v cleanup_first >/dev/null 2>&1 || cleanup_first
	timeout -k 5 60 "$KBOX" stop --all >/dev/null 2>&1
	for f in "$S"/*/supervisor.pid; do
		[ -s "$f" ] || continue
		pid=$(cat "$f")
		if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "kbox-supervisor $S/"; then
			kill -9 "$pid" 2>/dev/null
		fi
	done
	# what the script itself leaves (cgroups of a supervisor it killed)
	! command -v cleanup_more >/dev/null 2>&1 || cleanup_more
	rm -rf "$ROOT"
}
trap cleanup EXIT
trap 'exit 1' HUP INT PIPE TERM
