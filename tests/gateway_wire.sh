#!/bin/sh
# tests/gateway_wire.sh — kbox-gateway run (src/gateway/gateway_proto.h)
# against a hostile Jupyter server at the wire: tests/gateway_wire.py
# speaks raw HTTP/1.1 and RFC 6455 on 127.0.0.1 and drives the helper as
# the supervisor does (its two lines on standard input, its status lines
# on descriptor 3, its sockets' directory on descriptor 4, its sockets
# with ZeroMQ).  What the upgrade asks, exactly; a wrong
# Sec-WebSocket-Accept and a subprotocol not offered, refused; pings
# never read (the helper's queue bound); an iopub flood (RECV_BUDGET:
# the heartbeat and a shell request still pass); the legacy framing's
# decode bound (LEGACY_COST_MAX) and MAX_MSG; a stop while the start
# stalls (the one slow test: a POST unanswered through the helper's 25 s
# grace).  Each scenario is one run of the helper; its checks judge what
# both sides saw (the status lines, the requests, the frames, VmHWM).
# TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON.
# Needs $PY to import zmq (python3-zmq); skipped, with the reason, without.
# shellcheck disable=SC2016 # Python expressions, in single quotes on purpose
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
ROOT_TAG=kw
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"

GATEWAY=$top_builddir/kbox-gateway
if ! "$PY" -c 'import zmq' 2>/dev/null; then
	echo "1..0 # SKIP $PY cannot import zmq (python3-zmq)"
	exit 0
fi
[ -x "$GATEWAY" ] || { echo "Bail out! $GATEWAY is not built"; exit 1; }

# wire SCENARIO: tests/gateway_wire.py's SCENARIO against the helper, in a
# fresh directory: what both sides saw in $T/wire.json, its log in
# $T/wire.log.  Nothing while skipping.
wire() {
	[ -z "$SKIPPING" ] || return 0
	fresh
	timeout -k 5 600 "$PY" "$top_srcdir/tests/gateway_wire.py" "$GATEWAY" "$1" "$T" \
		>"$T/wire.json" 2>"$T/wire.log"
}

# saw EXPR: EXPR (Python) holds of what the last wire saw: j (the whole),
# S (the status lines), R (the requests), lines (their request lines),
# st(KEY) (the values of the status lines of KEY), err(KIND, MESSAGE) (an
# error line), U (the server's URL), K (the kernel's id), TOK (the token),
# ws and drv (what the server's WebSocket side and the supervisor's side
# saw).  Else what was judged, and the log's tail.
saw() {
	"$PY" - "$T/wire.json" "$1" <<'PYEOF' && return 0
import base64, json, re, sys
try:
    j = json.load(open(sys.argv[1]))
except ValueError as e:
    print("#   no JSON from tests/gateway_wire.py (%s)" % e)
    sys.exit(1)
S, R, U, K, TOK, ws, drv = (j["status"], j["requests"], j["url"], j["kid"], j["token"], j["ws"],
                            j["driver"])
lines = [r["line"] for r in R]
st = lambda key: [s[key] for s in S if isinstance(s, dict) and key in s]
err = lambda kind, message: {"error": {"kind": kind, "message": message}}
try:
    ok = eval("(" + sys.argv[2] + ")")
except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
    print("#   %s: %s" % (type(e).__name__, e))
    ok = False
if not ok:
    for k in ("error", "rc", "status", "ws", "driver"):
        print("#   %s: %s" % (k, json.dumps(j.get(k))[:600]))
    print("#   requests:", lines)
sys.exit(0 if ok else 1)
PYEOF
	tail -n 12 "$T/wire.log" | cut -c 1-300 | sed 's/^/#   log: /'
	return 1
}

# Python for saw: the started line's id and protocol and the session id
# of the channels' URL (the line has more, "dir" among them)
started_v1='[{k: s[k] for k in ("id", "protocol")} for s in st("started")] ==
	[{"id": K, "protocol": "v1"}]'
channels='"GET /api/kernels/%s/channels?session_id=%s HTTP/1.1" % (K, st("started")[0]["session"])'
# the channels dropped and connected again, the kernel deleted at the end:
# the requests, with a GET of the kernel before the new upgrade (and
# maybe more: the keep-alive's, after 10 s of silence on a slow machine)
dropped_and_back='lines[:2] == ["POST /api/kernels HTTP/1.1", '"$channels"'] and
	lines[-2:] == ['"$channels"', "DELETE /api/kernels/%s HTTP/1.1" % K] and len(lines) >= 5 and
	set(lines[2:-2]) == {"GET /api/kernels/%s HTTP/1.1" % K}'
deleted_at_exit='st("exit") == [{"cause": "the remote kernel was deleted", "deleted": True,
	"server_gone": False}] and
	"exit" in S[-1] and j["rc"] == 0 and lines[-1] == "DELETE /api/kernels/%s HTTP/1.1" % K'
# memory_under KIB NAME KEY: test NAME, the helper's VmHWM (the supervisor
# side's KEY) under KIB KiB; not judged in an AddressSanitizer build (its
# memory is mostly the sanitizer's)
memory_under() {
	if [ "$asan" = yes ]; then
		skip "$2" "AddressSanitizer build: memory not judged"
	else
		check "$2" saw "drv[\"$3\"] < $1"
	fi
}

# ---- the upgrade, as the server reads it ----

setup_for upgrade_is_an_http11_get_of_the_kernels_channels_with_its_session \
	upgrade_asks_for_websocket_version_13_with_a_16_byte_key \
	upgrade_offers_the_v1_subprotocol_and_the_server_choosing_it_makes_it_v1 \
	the_token_is_in_an_authorization_header_of_every_request_never_in_a_url \
	every_frame_of_the_helpers_is_masked \
	remove_closes_the_channels_with_1000_and_deletes_the_kernel
wire upgrade
check upgrade_is_an_http11_get_of_the_kernels_channels_with_its_session saw '
	lines[:2] == ["POST /api/kernels HTTP/1.1", '"$channels"'] and
	re.fullmatch("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
	             st("started")[0]["session"]) and
	R[1]["headers"]["host"] == U[len("http://"):] and R[1]["body"] is None and
	R[0]["body"] == {"name": "python3"}'
check upgrade_asks_for_websocket_version_13_with_a_16_byte_key saw '
	R[1]["headers"]["upgrade"] == "websocket" and R[1]["headers"]["connection"] == "Upgrade" and
	R[1]["headers"]["sec-websocket-version"] == "13" and
	len(base64.b64decode(R[1]["headers"]["sec-websocket-key"], validate=True)) == 16'
check upgrade_offers_the_v1_subprotocol_and_the_server_choosing_it_makes_it_v1 saw '
	R[1]["headers"]["sec-websocket-protocol"] == "v1.kernel.websocket.jupyter.org" and '"$started_v1"
check the_token_is_in_an_authorization_header_of_every_request_never_in_a_url saw '
	lines[0] == "POST /api/kernels HTTP/1.1" and lines[-1] == "DELETE /api/kernels/%s HTTP/1.1" % K and
	len(R) >= 3 and all(r["headers"]["authorization"] == "token " + TOK for r in R) and
	not any(TOK in l for l in lines) and TOK not in json.dumps(S)'
check every_frame_of_the_helpers_is_masked saw 'ws["frames"] >= 1 and ws["unmasked_frames"] == 0'
check remove_closes_the_channels_with_1000_and_deletes_the_kernel saw '
	ws["close_1"] == 1000 and len(S) == 2 and '"$deleted_at_exit"

# ---- an upgrade the helper refuses: the kernel it started is deleted ----

setup_for a_wrong_sec_websocket_accept_is_refused_with_an_error_line \
	the_kernel_of_the_refused_upgrade_is_deleted
wire bad_accept
check a_wrong_sec_websocket_accept_is_refused_with_an_error_line saw '
	S == [err("server", "the Jupyter server at %s: the WebSocket upgrade\x27s "
	                    "Sec-WebSocket-Accept is wrong" % U)] and
	j["rc"] == 1'
check the_kernel_of_the_refused_upgrade_is_deleted saw '
	lines == ["POST /api/kernels HTTP/1.1", lines[1], "DELETE /api/kernels/%s HTTP/1.1" % K] and
	lines[1].startswith("GET /api/kernels/%s/channels?session_id=" % K) and
	ws["bad_accept_closed_by_helper"]'

setup_for a_101_without_upgrade_websocket_is_refused_and_the_kernel_deleted
wire no_upgrade
check a_101_without_upgrade_websocket_is_refused_and_the_kernel_deleted saw '
	S == [err("server", "the Jupyter server at %s: its 101 reply lacks \"Upgrade: websocket\" "
	                    "or \"Connection: Upgrade\"" % U)] and
	j["rc"] == 1 and lines[-1] == "DELETE /api/kernels/%s HTTP/1.1" % K and
	ws["no_upgrade_closed_by_helper"]'

# (the run line's "legacy": the upgrade offers nothing, and a server that
# chooses v1 anyway is refused)
setup_for a_legacy_upgrade_offers_no_subprotocol \
	a_subprotocol_not_offered_is_refused_and_the_kernel_deleted
wire unoffered_protocol
check a_legacy_upgrade_offers_no_subprotocol saw '
	"sec-websocket-protocol" not in R[1]["headers"] and R[1]["headers"]["upgrade"] == "websocket"'
check a_subprotocol_not_offered_is_refused_and_the_kernel_deleted saw '
	S == [err("server", "the Jupyter server at %s chose a subprotocol it was not offered" % U)] and
	j["rc"] == 1 and lines[-1] == "DELETE /api/kernels/%s HTTP/1.1" % K'

# ---- pings, and nothing read: the pongs' queue is bounded ----

# The helper cuts the channels when more than 65536 messages wait to be
# sent (SEND_QUEUED_MSGS, gw.c: pongs of 125 bytes at most, 8 MiB), and
# connects them again; its memory stays under 64 MiB (about 30 here;
# with the 64 MiB byte bound alone, 500,000 pongs would wait, some
# 130 MiB; without a pump's 1 MiB budget, RECV_BUDGET, the queue is
# judged only when the socket runs dry: gigabytes).  Its notice says
# which bound it passed: the count of messages.
notice_re='(r"the kernel\x27s channels dropped \((.*)\) and were connected again after [0-9]+ ms: "
	r"output sent meanwhile may be missing")'
setup_for pings_never_read_drop_the_channels_which_are_connected_again \
	the_notice_says_over_65536_messages_wait \
	the_helper_stays_under_64_mib_while_pongs_wait \
	after_the_drop_remove_deletes_the_kernel
wire pingflood
check pings_never_read_drop_the_channels_which_are_connected_again saw '
	len(st("notice")) == 1 and re.fullmatch('"$notice_re"', st("notice")[0]) and
	'"$dropped_and_back"' and ws["ping_flood_end"] in ("ConnectionResetError", "BrokenPipeError")'
check the_notice_says_over_65536_messages_wait saw '
	re.fullmatch('"$notice_re"', st("notice")[0]).group(1) ==
	"the server does not read what is sent to it (over 65536 messages wait)" and
	ws["ping_bytes_sent"] < 64 << 20'
memory_under 65536 the_helper_stays_under_64_mib_while_pongs_wait hwm_kib
check after_the_drop_remove_deletes_the_kernel saw '
	ws["close_2"] == 1000 and len(S) == 3 and '"$deleted_at_exit"

# ---- an iopub flood without a pause: a pump reads 1 MiB at most ----

# The server sends 4 MiB of small iopub messages again and again, faster
# than the helper passes them on, and reads meanwhile: the heartbeat is
# answered (its own thread), a shell request goes through and its reply
# comes back signed, while the flood goes on ("after" messages, sent once
# the reply was, reach iopub).  (Without RECV_BUDGET the request passes
# too, when the helper happens to drain its socket: seconds later, which
# a test does not judge; the pings above catch that budget's loss.)

setup_for under_an_iopub_flood_the_heartbeat_is_echoed \
	under_an_iopub_flood_a_shell_request_reaches_the_server \
	and_its_reply_comes_back_signed_to_the_requester \
	the_flood_goes_on_past_the_reply_and_passes_signed \
	remove_under_the_flood_deletes_the_kernel
wire flood
check under_an_iopub_flood_the_heartbeat_is_echoed saw 'drv["hb_echo_same"] is True'
check under_an_iopub_flood_a_shell_request_reaches_the_server saw '
	ws["request_channel"] == "shell" and ws["request_opcode"] == 2 and
	ws["request_after_blobs"] >= 1'
check and_its_reply_comes_back_signed_to_the_requester saw '
	drv["reply_signed"] is True and drv["reply_type"] == "execute_reply" and
	drv["reply_parent_is_the_request"] is True and
	drv["reply_content"] == {"status": "ok", "execution_count": 1, "user_expressions": {},
	                         "wire": "reply"}'
check the_flood_goes_on_past_the_reply_and_passes_signed saw '
	drv["iopub_topic"] == "kernel.%s.stream" % K and drv["iopub_signed"] is True and
	drv["iopub_content"] == {"name": "stdout", "text": "before\n"} and
	drv["flood_after_reply_signed"] is True'
check remove_under_the_flood_deletes_the_kernel saw '
	len(S) == 2 and '"$started_v1"' and '"$deleted_at_exit"

# ---- the legacy framing: the decode bound, and MAX_MSG ----

# A legacy text message whose JSON costs over LEGACY_COST_MAX (256 MiB:
# 6 Mi zeros in an array, 12 MiB of text; jansson takes some 250 MiB to
# decode it) is dropped undecoded: the reply after it comes first, and a
# notice says a message was not passed on.  The helper holds the message
# twice (wslay's chunk, then the whole): under 96 MiB.  A frame whose
# header says MAX_MSG + 1 (64 MiB + 1) is refused at its header, with
# close 1009, which the notice of the dropped channels names.
setup_for a_server_that_chooses_no_subprotocol_gets_the_legacy_framing \
	a_legacy_text_costing_over_256_mib_to_decode_is_dropped_and_a_notice_says_so \
	the_undecoded_text_leaves_the_helper_under_96_mib \
	a_frame_over_64_mib_is_refused_at_its_header_with_close_1009 \
	the_notice_names_the_1009_and_the_channels_come_back \
	and_the_oversized_frame_leaves_the_helper_under_96_mib
wire legacy
check a_server_that_chooses_no_subprotocol_gets_the_legacy_framing saw '
	[s["protocol"] for s in st("started")] == ["legacy"] and ws["legacy_request_opcode"] == 1 and
	ws["legacy_request_keys"] == ["buffers", "channel", "content", "header", "metadata",
	                              "parent_header"]'
check a_legacy_text_costing_over_256_mib_to_decode_is_dropped_and_a_notice_says_so saw '
	ws["costly_bytes"] < 64 << 20 and
	drv["first_reply_content"]["wire"] == "marker" and drv["first_reply_signed"] is True and
	drv["first_reply_parent_is_the_request"] is True and drv["more_replies"] == 0 and
	[list(s) for s in drv["status_before_oversized"]] in ([["started"]], [["started"], ["notice"]]) and
	st("notice")[0] == "the Jupyter server sent messages that were not passed on (not a kernel\x27s "
	                   "message, or over its bounds); output may be missing"'
memory_under 98304 the_undecoded_text_leaves_the_helper_under_96_mib hwm_kib
check a_frame_over_64_mib_is_refused_at_its_header_with_close_1009 saw '
	ws["oversized_answer"] == 1009'
check the_notice_names_the_1009_and_the_channels_come_back saw '
	len(st("notice")) == 2 and
	re.fullmatch('"$notice_re"', st("notice")[1]).group(1) ==
	"the server sent a message over 64 MiB, the most one may have (closed with 1009)" and
	'"$dropped_and_back"' and
	ws["close_2"] == 1000 and '"$deleted_at_exit"
memory_under 98304 and_the_oversized_frame_leaves_the_helper_under_96_mib hwm_kib_after_oversized

# ---- a stop while the start stalls ----

# The POST that starts the kernel waits (a pod's launch): "remove", or
# SIGTERM, is taken at once (the helper says in its log that it awaits
# the answer 25 s more, POST_GRACE_MS), and when the answer comes in that
# time its kernel is deleted, and the helper exits with an error line.
setup_for remove_while_the_post_stalls_waits_for_the_kernels_id \
	and_deletes_that_kernel_then_exits_with_an_error_line
wire stall_post_remove
check remove_while_the_post_stalls_waits_for_the_kernels_id saw '
	j["stderr"] == ["kbox-gateway: stopped while the server starts the kernel: its answer is "
	                "awaited 25 s more, to delete the kernel it made"] and
	ws["post_answered"] is True'
check and_deletes_that_kernel_then_exits_with_an_error_line saw '
	lines == ["POST /api/kernels HTTP/1.1", "DELETE /api/kernels/%s HTTP/1.1" % K] and
	S == [err("usage", "stopped while the kernel started")] and j["rc"] == 1'
setup_for sigterm_while_the_post_stalls_deletes_the_kernel_alike
wire stall_post_sigterm
check sigterm_while_the_post_stalls_deletes_the_kernel_alike saw '
	lines == ["POST /api/kernels HTTP/1.1", "DELETE /api/kernels/%s HTTP/1.1" % K] and
	S == [err("usage", "stopped while the kernel started")] and j["rc"] == 1 and
	len(j["stderr"]) == 1'
# A POST still unanswered 25 s after the end of standard input is given
# up: the helper exits (the test waits for it), the kernel's id unknown,
# and nothing deletes the kernel a server that goes on starting it makes
# (its answer goes to a closed connection).
setup_for a_post_unanswered_25_s_after_the_stop_is_given_up_and_nothing_deleted
wire stall_post_unanswered
check a_post_unanswered_25_s_after_the_stop_is_given_up_and_nothing_deleted saw '
	S == [err("usage", "stopped while waiting for the Jupyter server at %s" % U)] and
	j["rc"] == 1 and lines == ["POST /api/kernels HTTP/1.1"] and
	ws["post_closed_by_helper"] is True and len(j["stderr"]) == 1'
# A supervisor that reads iopub slowly: the helper reads the server no
# more while IOPUB_HWM messages wait for it, so none of 100,000 is
# dropped (before, libzmq's PUB dropped what its queue could not hold,
# and nobody said so), and its memory stays bounded.
setup_for a_slow_reader_loses_none_of_100000_messages_and_gets_them_in_order \
	the_helper_stays_under_64_mib_meanwhile
wire slowread
check a_slow_reader_loses_none_of_100000_messages_and_gets_them_in_order saw '
	drv["numbered_got"] == 100000 and drv["numbered_in_order"] is True'
memory_under 65536 the_helper_stays_under_64_mib_meanwhile hwm_kib

# A stop while the kernel's directory is made (the run line's "dir": the
# server's contents API, asked before the POST) ends that wait, and no
# kernel is started: the one status line says the stop.
setup_for remove_while_the_kernels_directory_is_made_posts_no_kernel \
	and_its_one_status_line_says_it_stopped
wire stall_dir_remove
check remove_while_the_kernels_directory_is_made_posts_no_kernel saw '
	lines == ["GET /api/contents?content=0 HTTP/1.1"] and j["rc"] == 1'
check and_its_one_status_line_says_it_stopped saw '
	S == [err("usage", "stopped while the kernel started")]'
# The channels' upgrade waits (the kernel's id known): the end of standard
# input ends the wait and the kernel is deleted; the error line says the
# stop, not a timeout.
setup_for eof_while_the_upgrade_stalls_deletes_the_kernel \
	and_its_error_says_it_stopped_while_waiting
wire stall_upgrade_eof
check eof_while_the_upgrade_stalls_deletes_the_kernel saw '
	lines == ["POST /api/kernels HTTP/1.1", lines[1], "DELETE /api/kernels/%s HTTP/1.1" % K] and
	lines[1].startswith("GET /api/kernels/%s/channels?session_id=" % K) and
	ws["upgrade_closed_by_helper"] is True and j["rc"] == 1'
check and_its_error_says_it_stopped_while_waiting saw '
	S == [err("usage", "stopped while waiting for the Jupyter server to open the kernel\x27s "
	                   "channels")]'
setup_for # (the last group ends: tests_done's own may follow)

tests_done
