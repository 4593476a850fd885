#!/bin/sh
# tests/mcp_conformance.sh — kbox mcp --http against the official MCP
# conformance suite (npm @modelcontextprotocol/conformance, `server
# --url`): every server scenario that applies to a server with kbox's
# tools passes.  The suite is installed once, from the npm registry, into
# a cache (CONFORMANCE_DIR); without npm, or when it cannot be installed,
# the test is skipped and says why.  TAP.
#
# The version is pinned: 0.1.12 is the last that runs on node 20 (0.1.13
# on asks for fs.globSync, node 22).  The suite sends no token, so it
# speaks to kbox mcp --http through tests/mcp_auth_proxy.py, which adds
# the bearer token and changes nothing else.
#
# The scenarios that do not apply (each needs what kbox does not offer):
#   tools-call-* and json-schema-2020-12  tools of the suite's own test
#       server (test_simple_text, test_tool_with_progress, ...): kbox's
#       tools are run_python and the file tools; their progress over HTTP
#       is tests/mcp_http.py's and the SDK's (mcp_inspector.sh)
#   elicitation-*  elicitation requests from the server
#   logging-set-level  the logging capability
#   completion-complete  the completions capability (no prompts or resources)
#   resources-*, prompts-*  resources and prompts
#
# Environment (set by `make check`): top_srcdir, top_builddir,
# KERNEL_PYTHON; CONFORMANCE_DIR (default:
# ~/.cache/kbox/mcp-conformance-0.1.12).
# shellcheck disable=SC2016 # eval strings expand later, on purpose
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"
VERSION=0.1.12
CONFORMANCE_DIR=${CONFORMANCE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kbox/mcp-conformance-$VERSION}
SUITE=$CONFORMANCE_DIR/node_modules/.bin/conformance
APPLY="server-initialize ping tools-list dns-rebinding-protection server-sse-multiple-streams server-sse-polling"
NOT_APPLY="logging-set-level completion-complete tools-call-simple-text tools-call-image tools-call-audio tools-call-embedded-resource tools-call-mixed-content tools-call-with-logging tools-call-error tools-call-with-progress tools-call-sampling tools-call-elicitation json-schema-2020-12 elicitation-sep1034-defaults elicitation-sep1330-enums resources-list resources-read-text resources-read-binary resources-templates-read resources-subscribe resources-unsubscribe prompts-list prompts-get-simple prompts-get-with-args prompts-get-embedded-resource prompts-get-with-image"

npm_tool "the MCP conformance suite $VERSION" 20 "$CONFORMANCE_DIR" "$SUITE" \
	"{\"private\": true, \"dependencies\": {\"@modelcontextprotocol/conformance\": \"$VERSION\"}}"

fresh
# the suite's list of server scenarios: each is one of the two lists above
# (a new one must be looked at, not passed over)
[ -n "$SKIPPING" ] || timeout -k 5 120 "$SUITE" list --server >scenarios 2>&1
check every_server_scenario_of_the_suite_is_known eval '
	[ "$(sed -n "s/^  - //p" scenarios | sort)" = "$(printf "%s\n" $APPLY $NOT_APPLY | sort)" ] ||
	{ why="$(cat scenarios)"; false; }'

[ -n "$SKIPPING" ] || http_relay 900
for sc in $APPLY; do
	fresh
	name=$(printf '%s' "$sc" | tr - _)
	if selected "scenario_${name}_passes"; then
		timeout -k 5 300 "$SUITE" server --url "$RELAY_URL" --scenario "$sc" \
			-o "$T/results" >stdout 2>stderr
		rc=$?
	fi
	check "scenario_${name}_passes" eval '[ "$rc" = 0 ] || { why="$(grep -A4 "Failed Checks" stdout)"; false; }'
done
if [ -z "$SKIPPING" ]; then
	kill -TERM $RELAY $SERVER
	wait $RELAY $SERVER
	BG_PIDS=
fi

tests_done
