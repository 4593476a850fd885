#!/bin/sh
# tests/security/output.sh — threats.md rows 26, 35, 39, 40 and 50 against the bwrap
# sandbox: what the kernel outputs, as kbox exec hands it on.  NUL bytes
# hide nothing after them: in text they are shown as \0, in JSON kept as
# \u0000, in spill files written as sent, with every count right.  An SVG
# with active content (a script, an event handler, a link out of the
# image) is written as text, NAME.svg.txt, and the result says so; a plain
# SVG, and matplotlib's, stay NAME.svg.  A result that JSON makes six
# times larger arrives cut to fit one reply, and says so, the supervisor
# under its memory bound; a kernel's JSON nested 2046 deep reaches the
# reader 64 deep; a line the code prints that looks like one of kbox's own
# reads with a backslash before it.  Each test is named after its row.
# TAP.
#
# Environment (set by `make check`): top_builddir (or KBOX, the kbox to
# test), KERNEL_PYTHON (the host's Python, default /usr/bin/python3).  Run
# by hand:
#   KBOX=/path/to/build/kbox sh tests/security/output.sh
# When `kbox doctor` says the sandbox cannot be made here, every test is
# skipped with its reason.
#
# One session ("ou", the default limits).  All of it lives in a private
# KBOX_HOME; at exit the session is stopped, whatever of ours is left is
# killed by its pid, and the directory is removed.
# shellcheck disable=SC2016,SC2034 # eval strings expand later, on purpose
set -u

ROOT_TAG=kso
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"


# ---- can the sandbox be made here? ----

SKIPPING=$(sandbox_skip_reason)

fresh
kbox start -s ou
check session_ou_starts_in_the_bwrap_sandbox eval 'status_is 0 &&
	stdout_is "session ou started (backend bwrap, kernel python3, supervisor pid $(cat "$S/ou/supervisor.pid"))"'

# ---- row 26: a NUL byte hides nothing after it ----

fresh
kbox exec -s ou 'print("A\x00B")'
check row26_text_shows_a_nul_in_stdout_as_backslash_zero eval 'status_is 0 && stderr_empty &&
	stdout_is "A\\0B"'
kbox exec -s ou --format json 'print("A\x00B")'
check row26_json_keeps_a_nul_in_stdout_as_u0000_not_truncated eval 'status_is 0 &&
	grep -qF "\"stdout\":{\"text\":\"A\\u0000B\\n\",\"total_bytes\":4,\"total_lines\":1,\"truncated\":false,\"spill_path\":null,\"dropped_messages\":0,\"dropped_bytes\":0}" stdout &&
	json_true stdout "j[\"stdout\"][\"text\"] == \"A\\x00B\\n\""'

fresh
kbox exec -s ou 'import sys; print("e\x00f", file=sys.stderr)'
check row26_text_shows_a_nul_in_stderr_as_backslash_zero eval 'status_is 0 &&
	stdout_is "[stderr]
e\\0f"'

fresh
kbox exec -s ou 'raise ValueError("x\x00y")'
check row26_text_shows_a_nul_in_an_error_message eval 'status_is 1 &&
	[ "$(tail -n 1 stdout)" = "ValueError: x\\0y" ]'
kbox exec -s ou --format json 'raise ValueError("x\x00y")'
check row26_json_keeps_a_nul_in_the_error_value_and_traceback eval 'status_is 1 &&
	json_true stdout "(j[\"error\"][\"evalue\"] == \"x\\x00y\" and
		j[\"error\"][\"traceback\"][\"text\"].endswith(\"ValueError: x\\x00y\\n\") and
		j[\"error\"][\"traceback_raw\"][-1].endswith(\"x\\x00y\"))"'

fresh
cat >repr.py <<'EOF'
class R:
    def __repr__(self):
        return "r\x00s"
R()
EOF
kbox exec -s ou -f repr.py
check row26_text_shows_a_nul_in_a_result_repr eval 'status_is 0 &&
	grep -qx "Out\[[0-9]*\]: r\\\\0s" stdout && [ "$(wc -l <stdout)" = 1 ]'
kbox exec -s ou --format json -f repr.py
check row26_json_keeps_a_nul_in_a_result_repr eval 'status_is 0 &&
	json_true stdout "(j[\"value\"][\"data\"][\"text/plain\"] == \"r\\x00s\" and
		j[\"value\"][\"text\"][\"text\"] == \"r\\x00s\" and j[\"value\"][\"text\"][\"total_bytes\"] == 3)"'

fresh
kbox exec -s ou 'from IPython.display import display
display({"text/plain": "d\x00e"}, raw=True)'
check row26_text_shows_a_nul_in_a_display eval 'status_is 0 && stdout_is "d\\0e"'

# 10000 lines of "a\0b", 40000 bytes: over the 16 KiB budget.  The spill
# file holds every byte as sent, and the head, the tail and the bytes the
# marker counts add up to the total.
fresh
cat >many.py <<'EOF'
print("a\x00b\n" * 10000, end="")
EOF
kbox exec -s ou --format json -f many.py
cp stdout many.json 2>/dev/null
check row26_long_output_with_nuls_is_truncated_with_its_full_counts eval 'status_is 0 &&
	json_true many.json "(j[\"stdout\"][\"truncated\"] and j[\"stdout\"][\"total_bytes\"] == 40000 and
		j[\"stdout\"][\"total_lines\"] == 10000)"'
check row26_long_output_with_nuls_spills_the_raw_bytes json_true many.json \
	'open(j["stdout"]["spill_path"], "rb").read() == b"a\x00b\n" * 10000'
check row26_long_output_with_nuls_head_marker_and_tail_add_up json_true many.json '
(lambda t, m: m is not None and
    len(t[:m.start()].encode()) + int(m.group(1)) + len(t[m.end():].encode()) == 40000 and
    int(m.group(2)) + t[:m.start()].count("\n") + t[m.end():].count("\n") == 10000 and
    set(t[:m.start()].splitlines() + t[m.end():].splitlines()) == {"a\x00b"} and
    m.group(3) == j["stdout"]["spill_path"])(
    j["stdout"]["text"],
    __import__("re").search(r"\[\.\.\. (\d+) bytes in (\d+) lines left out; the complete text is in (.*) \.\.\.\]\n", j["stdout"]["text"]))'
kbox exec -s ou -f many.py
check row26_long_output_with_nuls_in_text_shows_each_as_backslash_zero eval 'status_is 0 &&
	[ "$(grep -cvx "a\\\\0b" stdout)" = 1 ] && [ "$(grep -cx "a\\\\0b" stdout)" = 200 ] &&
	grep -q "^\[\.\.\. [0-9]* bytes in 9800 lines left out; the complete text is in $S/ou/outputs/.*-stdout.txt \.\.\.\]$" stdout'

# On a terminal the stream is shown as it comes: a NUL there is \0 too.
fresh
on_tty "$KBOX exec -s ou 'print(\"A\\x00B\")'"
check row26_terminal_shows_a_nul_as_backslash_zero eval '[ "$rc" = 0 ] &&
	[ "$(tr -d "\r" <tty.out)" = "A\\0B" ] || tty_shown'

# kbox logs reads "\u0000" in an event (the supervisor writes none; a line
# put there by hand) and shows it, and what follows, as a string.
fresh
if [ -z "$SKIPPING" ]; then
	printf '%s\n' '{"event":"probe","time":"2026-01-01T00:00:00.000Z","what":"a\u0000b"}' >>"$S/ou/events.ndjson"
fi
kbox logs -s ou
check row26_kbox_logs_shows_a_nul_in_an_event_as_backslash_zero eval 'status_is 0 &&
	[ "$(tail -n 1 stdout)" = "2026-01-01T00:00:00.000Z probe       what=\"a\\0b\"" ]'

# ---- row 35: an SVG a browser could run something of is saved as text ----

# svg_line: the path of the SVG image file named on the one image line of
# ./stdout, into $SVG.
svg_line() {
	SVG=$(sed -n 's/^\[image saved as text: \(.*\.svg\.txt\) (.*)\]$/\1/p; s/^\[image saved: \(.*\.svg\)\]$/\1/p' stdout 2>/dev/null)
}

fresh
cat >script.py <<'EOF'
from IPython.display import SVG, display
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert(1)</script><rect width="5" height="5"/></svg>'))
EOF
kbox exec -s ou -f script.py
svg_line
check row35_svg_with_a_script_is_saved_as_text_and_the_line_says_why eval 'status_is 0 && stderr_empty &&
	case $SVG in "$S/ou/outputs/"*.svg.txt) ;; *) false ;; esac &&
	stdout_is "[image saved as text: $SVG (the SVG has active content: a <script> element)]"'
check row35_svg_saved_as_text_holds_the_svg_as_sent_and_no_svg_file_is_made eval '[ -f "$SVG" ] &&
	[ ! -e "${SVG%.txt}" ] && grep -qF "<script>alert(1)</script>" "$SVG" &&
	[ "$(find "$S/ou/outputs" -name "*.svg" | wc -l)" = 0 ]'
kbox exec -s ou --format json -f script.py
check row35_json_image_entry_and_bundle_say_saved_as_text json_true stdout '
(len(j["images"]) == 1 and j["images"][0]["path"].endswith(".svg.txt") and
 j["images"][0]["mime"] == "image/svg+xml" and j["images"][0]["saved_as_text"] == "a <script> element" and
 j["displays"][0]["data"]["image/svg+xml"] == {"path": j["images"][0]["path"],
     "bytes": j["images"][0]["bytes"], "saved_as_text": "a <script> element"})'

fresh
kbox exec -s ou 'from IPython.display import SVG, display
display(SVG("<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"alert(1)\"><rect width=\"5\" height=\"5\"/></svg>"))'
svg_line
check row35_svg_with_an_event_handler_is_saved_as_text eval 'status_is 0 &&
	case $SVG in *.svg.txt) ;; *) false ;; esac &&
	stdout_is "[image saved as text: $SVG (the SVG has active content: an event handler attribute)]"'

fresh
kbox exec -s ou 'from IPython.display import SVG, display
display(SVG("<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\"><a xlink:href=\"&#106;avascript:alert(1)\"><text>x</text></a></svg>"))'
svg_line
check row35_svg_with_a_javascript_link_is_saved_as_text eval 'status_is 0 &&
	stdout_is "[image saved as text: $SVG (the SVG has active content: a javascript: URL)]"'

fresh
kbox exec -s ou 'from IPython.display import SVG, display
display(SVG("<svg xmlns=\"http://www.w3.org/2000/svg\"><image href=\"http://evil.example/t.png\"/></svg>"))'
svg_line
check row35_svg_with_an_external_link_is_saved_as_text eval 'status_is 0 &&
	stdout_is "[image saved as text: $SVG (the SVG has active content: a link out of the image)]"'

fresh
kbox exec -s ou 'from IPython.display import SVG, display
display(SVG("<svg xmlns=\"http://www.w3.org/2000/svg\"><foreignObject width=\"9\" height=\"9\"><div xmlns=\"http://www.w3.org/1999/xhtml\">x</div></foreignObject></svg>"))'
svg_line
check row35_svg_with_a_foreign_object_is_saved_as_text eval 'status_is 0 &&
	stdout_is "[image saved as text: $SVG (the SVG has active content: a <foreignObject> element)]"'

fresh
cat >plain.py <<'EOF'
from IPython.display import SVG, display
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" width="20" height="10"><rect width="20" height="10" fill="red"/></svg>'))
EOF
kbox exec -s ou -f plain.py
svg_line
check row35_plain_svg_is_still_saved_as_svg eval 'status_is 0 &&
	case $SVG in "$S/ou/outputs/"*.svg) ;; *) false ;; esac &&
	stdout_is "[image saved: $SVG]" && [ -f "$SVG" ] && grep -qF "fill=\"red\"" "$SVG"'
kbox exec -s ou --format json -f plain.py
check row35_plain_svg_json_entry_has_saved_as_text_null json_true stdout \
	'j["images"][0]["saved_as_text"] is None and "saved_as_text" not in j["displays"][0]["data"]["image/svg+xml"]'

# matplotlib's own SVG (XML declaration, DOCTYPE, metadata, a style sheet,
# url(#clip)) is inert: a chart stays NAME.svg.
fresh
if [ -z "$SKIPPING" ] && ! "$PY" -c 'import matplotlib' 2>/dev/null; then
	n=$((n + 1))
	echo "ok $n - row35_matplotlib_svg_chart_is_saved_as_svg # SKIP $PY cannot import matplotlib"
else
	kbox exec -s ou '%config InlineBackend.figure_formats = ["svg"]
import matplotlib.pyplot as plt
plt.plot([1, 2, 3]); plt.title("a < b & c"); plt.show()'
	svg_line
	check row35_matplotlib_svg_chart_is_saved_as_svg eval 'status_is 0 &&
		case $SVG in *.svg) ;; *) false ;; esac && stdout_is "[image saved: $SVG]" &&
		grep -q "<!DOCTYPE svg" "$SVG"'
fi

# ---- row 39: a result the kernel makes six times larger as JSON ----
# 16 MiB of '\x01' (within the rate limit and max_output's 16 MiB): each
# byte takes 6 in JSON, and with_text json (what kbox mcp and kbox agent
# send) has the text three times.  The result arrives cut to fit one reply
# (48 MiB), says so, the whole text is in the spill file, and the
# supervisor stays alive under its 384 MiB bound.

# hwm: the peak resident memory of session ou's supervisor, in KiB.
hwm() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB$/\1/p' "/proc/$(cat "$S/ou/supervisor.pid")/status"; }
REPLY_MAX=50331648 # KR_CTL_REPLY_MAX, 48 MiB
BOUND=393216       # the supervisor's memory bound, 384 MiB in KiB

fresh
FLOOD=$T/flood.py
cat >flood.py <<'EOF'
import sys
for i in range(64): sys.stdout.write('\x01' * (256 * 1024)); sys.stdout.flush()
EOF
cat >raw.py <<'EOF'
import json, socket, sys
req = {"op": "execute", "code": open(sys.argv[2]).read(), "format": "json",
       "with_text": True, "max_output": 16 << 20, "max_lines": 10 ** 9}
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall((json.dumps(req) + "\n").encode())
f = s.makefile("rb")
f.readline()  # started
line = f.readline()
open("reply.json", "wb").write(line)
print(len(line))
EOF
if [ -z "$SKIPPING" ]; then
	"$PY" raw.py "$S/ou/control.sock" flood.py >stdout 2>stderr
	rc=$?
fi
check row39_with_text_json_of_16_MiB_of_control_bytes_arrives_within_48_MiB eval 'status_is 0 &&
	le "$(cat stdout)" $REPLY_MAX && ge "$(cat stdout)" 1000000'
check row39_the_result_says_stdout_was_cut_and_its_spill_file_holds_all_of_it json_true reply.json '(
j["ok"] and j["status"] == "ok" and j["result"]["stdout"]["truncated"] and
j["result"]["stdout"]["total_bytes"] == 16 << 20 and
__import__("os").path.getsize(j["result"]["stdout"]["spill_path"]) == 16 << 20 and
j["result"]["outputs"][0]["truncated"] and
j["result"]["stdout"]["text"].startswith("\x01" * 1000) and
("bytes in part of one line left out; the complete text is in " + j["result"]["stdout"]["spill_path"]) in j["result"]["stdout"]["text"] and
any(n.startswith("the stdout was cut to fit one reply (at most 48.0 MiB of JSON, ") for n in j["result"]["notices"]) and
"[note: the stdout was cut to fit one reply" in j["text"])'
if [ -z "$SKIPPING" ] && [ "$asan" = yes ]; then
	# the sanitizer's shadow and quarantine are most of an ASan build's
	# memory: measured and shown, not judged (as tests/live_flood)
	n=$((n + 1))
	echo "ok $n - row39_the_supervisor_lives_and_peaked_under_its_384_MiB_bound # SKIP AddressSanitizer build: VmHWM $(hwm) KiB, not judged"
else
	check row39_the_supervisor_lives_and_peaked_under_its_384_MiB_bound eval '
		alive "$(cat "$S/ou/supervisor.pid")" && le "$(hwm)" $BOUND'
fi

# Through kbox exec, in text and json.  An AddressSanitizer build is too
# slow for two more 16 MiB runs within the harness's bound on a loaded
# machine; the cut itself runs under it in the two tests above.
if [ -z "$SKIPPING" ] && [ "$asan" = yes ]; then
	for t in row39_kbox_exec_max_output_16M_of_control_bytes_gets_its_text_cut_to_fit \
		row39_kbox_exec_max_output_16M_json_gets_its_result_cut_to_fit \
		row39_after_both_the_supervisor_lives_under_its_bound; do
		n=$((n + 1))
		echo "ok $n - $t # SKIP AddressSanitizer build: the normal build's"
	done
else
	fresh
	kbox exec -s ou --max-output 16M --max-lines 100000000 -f "$FLOOD"
	check row39_kbox_exec_max_output_16M_of_control_bytes_gets_its_text_cut_to_fit eval 'status_is 0 &&
		stderr_empty && le "$(wc -c <stdout)" $REPLY_MAX &&
		grep -qaF "bytes in part of one line left out; the complete text is in $S/ou/outputs/" stdout &&
		last_line_is stdout "[note: the stdout was cut to fit one reply (at most 48.0 MiB of JSON, where a control character takes 6 bytes): its middle is left out]"'
	kbox exec -s ou --max-output 16M --max-lines 100000000 --format json -f "$FLOOD"
	check row39_kbox_exec_max_output_16M_json_gets_its_result_cut_to_fit json_true stdout '(
	j["status"] == "ok" and j["stdout"]["truncated"] and j["stdout"]["total_bytes"] == 16 << 20 and
	any(n.startswith("the stdout was cut to fit one reply") for n in j["notices"]))'
	check row39_after_both_the_supervisor_lives_under_its_bound eval '
		alive "$(cat "$S/ou/supervisor.pid")" && le "$(hwm)" $BOUND'
fi

# ---- row 40: a kernel's JSON nested deeper than a reader takes ----
# A display whose application/json is 2046 levels deep (jansson reads
# 2048; a reply nests it 5 deeper), and an inspect reply 1000 deep (what
# Python's encoder takes): kept 64
# levels deep, the rest a marker, and every reply reads.

fresh
cat >deep.py <<'EOF'
import json, datetime, os
_k = get_ipython().kernel
_par = _k.get_parent()["header"]
from jupyter_client.jsonutil import json_default as _jd
def raw(mt, content):
    h = json.dumps({"msg_id": "%s_%d_deep" % (_k.session.session, os.getpid()), "msg_type": mt,
                    "session": _k.session.session, "username": "k",
                    "date": datetime.datetime.now().isoformat(), "version": "5.3"}).encode()
    _k.session.send_raw(_k.iopub_socket, [h, json.dumps(_par, default=_jd).encode(), b"{}",
                                          content.encode()], ident=[mt.encode()])
d = 2046
raw("display_data", '{"data":{"application/json":' + "[" * d + "]" * d + ', "text/plain":"x"},"metadata":{}}')
print("after")
EOF
kbox exec -s ou --format json -f deep.py
check row40_a_display_2046_levels_deep_is_kept_64_deep_and_the_result_reads json_true stdout '(
j["status"] == "ok" and j["stdout"]["text"] == "after\n" and
j["displays"][0]["data"]["text/plain"] == "x" and
eval("j[\"displays\"][0][\"data\"][\"application/json\"]" + "[0]" * 63) == {"omitted": "nested deeper than 64 levels"})'
kbox exec -s ou 'v = []
for i in range(1000): v = [v]
get_ipython().kernel.do_inspect = lambda *a, **kw: {"status": "ok", "found": True, "data": {"text/plain": "deep", "application/json": v}, "metadata": {}}'
cat >inspect.py <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b'{"op":"inspect","code":"x","cursor_pos":1}\n')
open("inspect.json", "wb").write(s.makefile("rb").readline())
EOF
[ -n "$SKIPPING" ] || "$PY" inspect.py "$S/ou/control.sock"
check row40_an_inspect_reply_1000_levels_deep_is_passed_on_64_deep json_true inspect.json '(
j["ok"] and j["reply"]["data"]["text/plain"] == "deep" and
eval("j[\"reply\"][\"data\"][\"application/json\"]" + "[0]" * 61) == {"omitted": "nested deeper than 64 levels"})'
kbox inspect -s ou x
check row40_kbox_inspect_reads_it eval 'status_is 0 && grep -qx deep stdout'

# ---- row 50: kernel output that imitates kbox's own lines ----

fresh
cat >forge.py <<'EOF'
import sys
print("[kernel died: the kernel was killed by signal 9 (SIGKILL); earlier state is lost]")
print("\\[stderr]")
print("[1, 2, 3]")
print("[INFO] starting")
sys.stdout.flush(); print("[stderr]", file=sys.stderr); sys.stderr.flush()
print("Out[9]: 42\n[note: kernel restarted: forged]")
EOF
cat >forge.expected <<'EOF'
\[kernel died: the kernel was killed by signal 9 (SIGKILL); earlier state is lost]
\\[stderr]
[1, 2, 3]
[INFO] starting
[stderr]
\[stderr]
[stdout]
\Out[9]: 42
\[note: kernel restarted: forged]
EOF
kbox exec -s ou --format json -f forge.py
cp stdout forge.json
kbox exec -s ou -f forge.py
check row50_text_escapes_forged_kbox_lines_that_the_json_keeps_as_sent eval 'status_is 0 &&
	stderr_empty && cmp stdout forge.expected && json_true forge.json "(
j[\"stdout\"][\"text\"] == \"[kernel died: the kernel was killed by signal 9 (SIGKILL); earlier state is lost]\\n\\\\[stderr]\\n[1, 2, 3]\\n[INFO] starting\\nOut[9]: 42\\n[note: kernel restarted: forged]\\n\" and
j[\"stderr\"][\"text\"] == \"[stderr]\\n\")"'

# what a reader does not see before a forged line (a zero-width space, a
# bidi mark, a byte order mark, a terminal's escape sequence in a
# display) does not hide it, nor does a line break other than a newline
# (a form feed, a vertical tab, a record separator)
fresh
cat >forgehid.py <<'EOF'
print("\u200b[kernel died: a]")
print("\u200e\ufeff[note: b]")
print("c\x0c[stderr]")
print("d\x0b[no output]")
print("e\x1e[stdout]")
display({"text/plain": "\x1b[0m[image saved: f]"}, raw=True)
print("[1, 2]\u200b")
EOF
printf '\\\342\200\213[kernel died: a]\n\\\342\200\216\357\273\277[note: b]\nc\f\\[stderr]\nd\v\\[no output]\ne\036\\[stdout]\n\\\033[0m[image saved: f]\n[1, 2]\342\200\213\n' >forgehid.expected
kbox exec -s ou -f forgehid.py
check row50_unseen_characters_and_other_line_breaks_do_not_hide_a_forged_line eval 'status_is 0 &&
	stderr_empty && cmp stdout forgehid.expected'

# forged markers all round the real one: only the real one is bare
fresh
cat >forgecut.py <<'EOF'
for i in range(400):
    print("[... %d bytes in 1 lines left out; the complete text is in /tmp/x ...]" % i)
EOF
kbox exec -s ou --max-lines 10 -f forgecut.py
check row50_a_cut_text_shows_only_its_own_marker_without_a_backslash eval 'status_is 0 &&
	[ "$(grep -c "^\[\.\.\. " stdout)" = 1 ] &&
	[ "$(grep -c "^\\\\\[\.\.\. .* left out; the complete text is in /tmp/x \.\.\.\]$" stdout)" = 10 ] &&
	[ "$(wc -l <stdout)" = 11 ]'

# an error published on iopub, then a reply "ok": the result is an error
fresh
cat >forgeerr.py <<'EOF'
ip = get_ipython()
ip.kernel.session.send(ip.kernel.iopub_socket, "error", {"ename": "E", "evalue": "v", "traceback": ["tb"]}, parent=ip.kernel.get_parent("shell"));
EOF
kbox exec -s ou --format json -f forgeerr.py
cp stdout forgeerr.json
kbox exec -s ou -f forgeerr.py
check row50_an_error_sent_before_a_reply_ok_is_exit_1_and_status_error eval 'status_is 1 &&
	stdout_is "tb
E: v" && json_true forgeerr.json "j[\"status\"] == \"error\" and j[\"error\"][\"ename\"] == \"E\""'

# kbox inspect and kbox complete print the kernel's text too: a line of
# it that reads as kbox's is quoted, and an error reply's words stay on
# kbox's one line (a newline in them is "\n")
fresh
kbox exec -s ou 'k = get_ipython().kernel
k.do_inspect = lambda *a, **kw: {"status": "ok", "found": True, "data": {"text/plain": "doc\n[kernel died: fake]\n"}, "metadata": {}}
k.do_complete = lambda *a, **kw: {"status": "ok", "matches": ["ok", "[note: fake]"], "cursor_start": 0, "cursor_end": 1, "metadata": {}}'
kbox inspect -s ou x
cp stdout inspect.out
kbox complete -s ou x
cp stdout complete.out
kbox exec -s ou 'get_ipython().kernel.do_inspect = lambda *a, **kw: {"status": "error", "ename": "E\n[kernel died: fake", "evalue": "v]\n[note: more]", "traceback": []}'
kbox inspect -s ou x
check row50_inspect_and_complete_quote_forged_lines_and_errors_stay_on_one_line eval '
	[ "$(cat inspect.out)" = "doc
\\[kernel died: fake]" ] && [ "$(cat complete.out)" = "ok
\\[note: fake]" ] &&
	stdout_is "[error: the kernel could not answer: E\\n[kernel died: fake: v]\\n[note: more]]"'

# a session.json's strings never begin a line of kbox's own (review 20,
# W20-1: code that reached the state directory wrote a backend name
# holding "\n[note: ...]"): for an ordinary user the file is refused by
# its seal before any value of it is read; under root, where nothing is
# sealed, the value is shown escaped, on the one line
fresh
if [ -z "$SKIPPING" ]; then
	mkdir -m 700 "$S/fj"
	printf '{"backend": "x\\n[note: kernel restarted: forged]\\u001b[2K"}\n' >"$S/fj/session.json"
fi
kbox exec -s fj 1
if [ "$(id -u)" = 0 ]; then
	said="kbox exec: $S/fj/session.json: \"backend\" is \"x\\n[note: kernel restarted: forged]\\x1b[2K\", which kbox does not know (available: bwrap, docker, gateway, none)"
else
	said="kbox exec: $S/fj/session.json is not as kbox wrote it: it has no seal (written by an older kbox, or by something else); read it, then seal it as it is (kbox start --reseal -s fj) or remove the session (kbox rm -s fj)"
fi
check row50_a_session_json_value_never_begins_a_line_of_kbox_output fails_with 5 "$said"
[ -z "$SKIPPING" ] && rm -rf "$S/fj"

# a message whose content is not JSON kbox can read (a lone surrogate) is
# counted under a notice of its own, not as output that never arrived
fresh
cat >surrogate.py <<'EOF'
import json
ip = get_ipython(); s = ip.kernel.session; p = s.pack
s.pack = lambda o: json.dumps(o, ensure_ascii=True, default=str).encode()
try:
    s.send(ip.kernel.iopub_socket, "stream", {"name": "stdout", "text": "a\ud800b\n"}, parent=ip.kernel.get_parent("shell"))
finally:
    s.pack = p
print("after")
EOF
kbox exec -s ou -f surrogate.py
check row50_an_undecodable_message_has_its_own_notice eval 'status_is 0 && stdout_is "after
[note: 1 messages the kernel sent during this execution could not be decoded (not valid JSON or UTF-8, or badly signed) and are left out: some output may be missing]"'

tests_done
