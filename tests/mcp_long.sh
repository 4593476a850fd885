#!/bin/sh
# tests/mcp_long.sh — kbox mcp and cells that outlive a client's time
# limits: early answers at the soft time limit, wait_python, progress
# notifications: tests/mcp_long.py, run as tests/mcp.sh runs its client.
# TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
MCP_SCRIPT=mcp_long.py
export MCP_SCRIPT
exec sh "$top_srcdir/tests/mcp.sh"
