#!/bin/sh
# tests/mcp.sh — kbox mcp, the Model Context Protocol server, through
# tests/mcp_client.py: a client written from the specification that speaks
# JSON-RPC on the server's standard input and output (lifecycle and
# version negotiation, tools/list and its schemas, run_python with its
# structured content, images, ping and cancellation while code runs, the
# JSON-RPC errors, the file tools and their confinement, the session's
# end).  Real kernels, in sessions of a private KBOX_HOME.  TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON;
# MCP_SCRIPT, the client to run instead (tests/mcp_views.sh sets it).
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$(pwd)}
KBOX=$top_builddir/kbox
PY=${KERNEL_PYTHON:-/usr/bin/python3}

if [ ! -x "$KBOX" ]; then
	echo "Bail out! $KBOX is not built"
	exit 1
fi
if ! "$PY" -c 'import jsonschema' 2>/dev/null; then
	echo "1..0 # SKIP $PY has no jsonschema (apt-get install python3-jsonschema)"
	exit 0
fi
BASE=$(mktemp -d "${TMPDIR:-/tmp}/kbox-mcp.XXXXXX") || exit 1
# under root the sandbox user must pass through to the sessions
chmod 711 "$BASE" || exit 1
KBOX_HOME=$BASE/home
export KBOX_HOME
unset KBOX_SESSION
trap '"$KBOX" stop --all >/dev/null 2>&1; cd / && rm -rf "$BASE"' EXIT
trap 'exit 1' HUP INT TERM
cd "$BASE" || exit 1
timeout -k 10 600 "$PY" "$top_srcdir/tests/${MCP_SCRIPT:-mcp_client.py}" "$KBOX" \
	"$top_srcdir/tests/result.schema.json"
