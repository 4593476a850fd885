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
JUPYTER_PATH=$BASE/share/jupyter
# (the front ends' connection files: not in the home of whoever runs it)
JUPYTER_RUNTIME_DIR=$BASE/runtime
export KBOX_HOME JUPYTER_PATH JUPYTER_RUNTIME_DIR BASE KBOX
unset KBOX_SESSION JUPYTER_CONFIG_DIR
trap '"$KBOX" stop --all >/dev/null 2>&1; cd / && rm -rf "$BASE"' EXIT
trap 'exit 1' HUP INT TERM
# the kernelspecs, made by kbox kernelspec install
"$KBOX" kernelspec install --prefix "$BASE" >/dev/null &&
	"$KBOX" kernelspec install --prefix "$BASE" --name kbox-python3-message \
		--interrupt-mode message >/dev/null &&
	"$KBOX" kernelspec install --prefix "$BASE" --name kbox-python3-ro -- --workspace ro >/dev/null &&
	"$KBOX" kernelspec install --prefix "$BASE" --name kbox-python3-empty -- --workspace empty \
		>/dev/null || exit 1
# the front end starts kernels in a directory that can be a workspace
mkdir "$BASE/work" && chmod 777 "$BASE/work" && cd "$BASE/work" || exit 1
timeout -k 10 900 "$PY" "$top_srcdir/tests/kernelspec_test.py"
