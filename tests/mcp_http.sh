#!/bin/sh
# tests/mcp_http.sh — kbox mcp --http, the Streamable HTTP transport, over
# 127.0.0.1: tests/mcp_http.py, run as tests/mcp.sh runs its client.  TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
MCP_SCRIPT=mcp_http.py
export MCP_SCRIPT
exec sh "$top_srcdir/tests/mcp.sh"
