#!/bin/sh
# tests/mcp_views.sh — what a model reads of kbox mcp's run_python results
# in each kind of MCP client (content only, structured content only, or
# both), against what kbox exec prints: tests/mcp_views.py, run as
# tests/mcp.sh runs its client.  TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
MCP_SCRIPT=mcp_views.py
export MCP_SCRIPT
exec sh "$top_srcdir/tests/mcp.sh"
