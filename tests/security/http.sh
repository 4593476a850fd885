#!/bin/sh
# tests/security/http.sh — kbox mcp --http, the Streamable HTTP transport,
# over 127.0.0.1, as an attacker meets it (row 53 of threats.md): no
# token, a wrong one, another Host or Origin, oversized bodies, headers
# that never end (slowloris), many connections, idle ones, a client that
# goes away mid-call or mid-stream (its cell is interrupted, the session
# stays), a unix socket only its owner may use; and as a client uses it.
# tests/mcp_http.py, run as tests/mcp.sh runs its client, as root and as
# an ordinary user (make check-security).  TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
MCP_SCRIPT=mcp_http.py
export MCP_SCRIPT
exec sh "$top_srcdir/tests/mcp.sh"
