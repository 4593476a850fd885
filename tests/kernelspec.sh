#!/bin/sh
# tests/kernelspec.sh — kbox's kernelspec as Jupyter front ends use it,
# through tests/kernelspec_test.py: the Jupyter project's kernel
# conformance suite (python3-jupyter-kernel-test) against kbox-python3,
# stdin, interrupts, comms, restart and shutdown, forged messages.  Real
# kernels, in a private KBOX_HOME; the kernelspecs in a private
# JUPYTER_PATH.  TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON.
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$(pwd)}
KBOX=$top_builddir/kbox
PY=${KERNEL_PYTHON:-/usr/bin/python3}

if [ ! -x "$KBOX" ]; then
	echo "Bail out! $KBOX is not built"
	exit 1
fi
if ! "$PY" -c 'import jupyter_kernel_test' 2>/dev/null; then
	echo "1..0 # SKIP $PY has no jupyter_kernel_test (apt-get install python3-jupyter-kernel-test)"
	exit 0
fi
BASE=$(mktemp -d "${TMPDIR:-/tmp}/kbox-ks.XXXXXX") || exit 1
# under root the sandbox user must pass through to the workspaces
chmod 711 "$BASE" || exit 1
KBOX_HOME=$BASE/home
mkdir -m 700 "$KBOX_HOME" || exit 1
JUPYTER_PATH=$BASE/share
export KBOX_HOME JUPYTER_PATH BASE KBOX
unset KBOX_SESSION JUPYTER_CONFIG_DIR
trap '"$KBOX" stop --all >/dev/null 2>&1; cd / && rm -rf "$BASE"' EXIT
trap 'exit 1' HUP INT TERM
# the kernelspecs, as kbox-kernel(1) says to write them
for mode in signal message; do
	name=kbox-python3
	[ $mode = message ] && name=kbox-python3-message
	mkdir -p "$JUPYTER_PATH/kernels/$name" || exit 1
	cat > "$JUPYTER_PATH/kernels/$name/kernel.json" <<EOF || exit 1
{"argv": ["$KBOX", "kernel", "--connection-file", "{connection_file}"],
 "display_name": "Python 3 (kbox sandbox, $mode)", "language": "python",
 "interrupt_mode": "$mode"}
EOF
done
# the front end starts kernels in a directory that can be a workspace
mkdir "$BASE/work" && chmod 777 "$BASE/work" && cd "$BASE/work" || exit 1
timeout -k 10 900 "$PY" "$top_srcdir/tests/kernelspec_test.py"
