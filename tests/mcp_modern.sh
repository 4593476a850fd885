#!/bin/sh
# tests/mcp_modern.sh — kbox mcp and the MCP revision of 2026-07-28 (no
# handshake; server/discover; resultType; cacheable lists), beside the
# handshake revisions: tests/mcp_modern.py, run as tests/mcp.sh runs its
# client.  TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
MCP_SCRIPT=mcp_modern.py
export MCP_SCRIPT
exec sh "$top_srcdir/tests/mcp.sh"
