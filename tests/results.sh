#!/bin/sh
# tests/results.sh — what a model reads, against a real kernel in the
# default sandbox: outputs in the order they came (text and kbox.result/2
# JSON, validated against tests/result.schema.json); a print flood read
# whole rather than dropped while the outputs quota lasts, and exact
# accounting (messages, bytes of text) of what is dropped past it; an
# interrupt from another shell shown as status "interrupted"; input() with
# and without -i and --input-file; kbox's own errors as JSON under
# --format json, and a wait behind another execution as status busy (6);
# reals in the event log printed short.  TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON.
# shellcheck disable=SC2016
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
. "$top_srcdir/tests/lib.sh"

SCHEMA=$top_srcdir/tests/result.schema.json

# valid FILE: each line of FILE is valid against the result schema.
valid() {
	"$PY" - "$SCHEMA" "$1" <<'EOF'
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
for line in open(sys.argv[2]):
    jsonschema.validate(json.loads(line), schema)
EOF
}

# py EXPR: EXPR holds for r, the JSON object on stdout.
py() {
	"$PY" -c '
import json, sys
r = json.load(open("stdout"))
ok = eval("(" + sys.argv[1] + ")")
if not ok:
    print("#   false:", sys.argv[1])
sys.exit(0 if ok else 1)' "$1" || { show_r; return 1; }
}

# show_r: the result in stdout on one comment line, every field shown and
# each long string cut
show_r() {
	"$PY" -c '
import json
def short(v):
    if isinstance(v, str) and len(v) > 200:
        return v[:80] + "...(%d chars)..." % len(v) + v[-80:]
    if isinstance(v, dict):
        return {k: short(x) for k, x in v.items()}
    if isinstance(v, list):
        return [short(x) for x in v]
    return v
print("#   r =", json.dumps(short(json.load(open("stdout"))))[:8000])'
}

needs kernel
fresh
kbox start -s r
check start_a_session status_is 0

# ---- order ----

ORDER='from IPython.display import display
import sys
print("a")
display("b")
print("w", file=sys.stderr); sys.stderr.flush()
print("c")
42'

fresh
kbox exec -s r "$ORDER"
check text_shows_outputs_in_the_order_they_came eval 'status_is 0 && stdout_is "a
'"'"'b'"'"'
[stderr]
w
[stdout]
c
Out[1]: 42"'

fresh
kbox exec -s r --format json "$ORDER"
check json_lists_the_outputs_in_order eval 'status_is 0 &&
	py "[(o[\"kind\"], o.get(\"name\")) for o in r[\"outputs\"]] == [(\"stream\", \"stdout\"), (\"display_data\", None), (\"stream\", \"stderr\"), (\"stream\", \"stdout\"), (\"execute_result\", None)]
	and r[\"outputs\"][0][\"text\"] == \"a\\n\" and r[\"outputs\"][1][\"data\"] == {\"text/plain\": \"'"'"'b'"'"'\"}
	and r[\"outputs\"][3][\"text\"] == \"c\\n\" and r[\"outputs\"][4][\"data\"] == {\"text/plain\": \"42\"}
	and r[\"stdout\"][\"text\"] == \"a\\nc\\n\" and r[\"schema\"] == \"kbox.result/2\""'
check json_with_outputs_is_valid_against_the_schema valid stdout

# ---- pages: what IPython hands its pager ----

# obj? (and %pinfo, %psource...) is a "page" payload of the reply, no
# message of iopub: shown as a display, after the cell's outputs, without
# the terminal colours IPython gives it (in the JSON too)
LEN_PAGE='Signature: len(obj, /)
Docstring: Return the number of items in a container.
Type:      builtin_function_or_method'
fresh
kbox exec -s r 'len?'
check a_help_page_is_shown eval 'status_is 0 && stdout_is "$LEN_PAGE"'
fresh
kbox exec -s r --format json 'len?'
printf '%s\n' "$LEN_PAGE" >page.expected
check a_help_page_is_a_display_in_json eval 'status_is 0 &&
	py "[o[\"kind\"] for o in r[\"outputs\"]] == [\"display_data\"] and r[\"status\"] == \"ok\"
	and r[\"displays\"][0][\"data\"] == {\"text/plain\": open(\"page.expected\").read()}"'
check a_help_page_result_is_valid_against_the_schema valid stdout
# a clear_output(wait=True) before it clears nothing: a page is no output
fresh
kbox exec -s r 'from IPython.display import clear_output
print("kept")
clear_output(wait=True)
get_ipython().run_line_magic("pinfo", "len")'
check a_page_after_a_waiting_clear_clears_nothing eval 'status_is 0 && stdout_is "kept
$LEN_PAGE"'
# exit() and quit() (IPython's "ask_exit" payload) end ipykernel 0.1 s
# after its reply; the supervisor replaces the kernel at once, so the
# very next code, however soon it comes, runs in the new one; the result
# of the code that asked says so.  Its own session: the next tests'
# kernel must not end under them.
EXIT_NOTE="exit() ends the kernel: a new one is started, without what the code defined"
restarts_are() { [ "$(status_field ex restarts)" = "$1" ] && is_idle ex; }
fresh
kbox start -s ex
kbox exec -s ex --format json 'kept_through_exit = 41; quit()'
check quit_is_a_notice_in_json eval 'status_is 0 &&
	py "r[\"notices\"] == [\"$EXIT_NOTE\"] and r[\"status\"] == \"ok\" and r[\"outputs\"] == []"'
kbox exec -s ex 'print("kept_through_exit" in dir())'
check after_exit_the_next_code_runs_in_a_new_kernel eval 'status_is 0 && stdout_is "[note: kernel restarted: the code called exit(); earlier state (variables, imports, loaded data) is lost; it had defined: kept_through_exit: int]
False"'
kbox exec -s ex 'exit()'
check exit_says_the_kernel_ends eval 'status_is 0 && stdout_is "[note: $EXIT_NOTE]"'
kbox exec -s ex 'kept = 1'
kbox exec -s ex 'exit(keep_kernel=True)'
check exit_keeping_the_kernel_says_nothing eval 'status_is 0 && stdout_empty'
kbox exec -s ex 'print(kept)'
check exit_keeping_the_kernel_keeps_it eval 'status_is 0 && stdout_is 1 && restarts_are 2'
kbox stop -s ex

# a reply that never comes ends the execution, an error that says why,
# 10 s after idle (before: it waited for ever, and no interrupt could end
# it): one kbox refuses (over its decode bound), one ipykernel cannot
# send (a lone surrogate in a help page: it sends no reply at all)
NOREPLY="[note: the kernel went idle, but its reply to the execution did not come within 10 s: the kernel could not send it (text it cannot encode, for one), or kbox could not read it; the kernel itself is unchanged]"
fresh
kbox exec -s nr 'get_ipython().payload_manager.write_payload({"source": "x", "data": [[]] * 700000}); print("x")'
check a_reply_kbox_refuses_ends_the_execution_saying_why eval 'status_is 1 &&
	has_line stdout x && has_line stdout "$NOREPLY"'
kbox exec -s nr 's = "a\ud800b"
s?'
check a_reply_the_kernel_cannot_send_ends_the_execution_saying_why eval 'status_is 1 &&
	has_line stdout "$NOREPLY"'
kbox exec -s nr 'print(2)'
check after_a_lost_reply_the_kernel_runs_the_next_code eval 'status_is 0 && stdout_is 2'
# a reply nested deeper than kbox reads JSON (2048 levels) came, but
# says nothing kbox can read: an error that says so, not the code's
UNREAD="kbox could not read the kernel's reply to the execution (its JSON is nested too deeply, or is no object): whether the code succeeded is unknown; what it printed is kept"
kbox exec -s nr --format json 'import sys; sys.setrecursionlimit(100000)
v = 1
for i in range(3000): v = [v]
get_ipython().payload_manager.write_payload({"source": "page", "data": {"text/plain": "deep", "application/json": {"a": v}}}, single=False)
del v
print("x")'
check an_unreadable_reply_is_an_error_that_says_so eval 'status_is 1 &&
	py "r[\"status\"] == \"error\" and r[\"error\"] is None and r[\"notices\"] == [\"$UNREAD\"] and r[\"stdout\"][\"text\"] == \"x\\n\""'
# a reply whose status is none of ok, error and aborted (the kernel's
# own do_execute replaced by the code) is an error that says so
kbox exec -s nr 'k = get_ipython().kernel
orig = k.do_execute
async def weird(*a, **kw):
    r = await orig(*a, **kw)
    r["status"] = "weird"
    return r
k.do_execute = weird'
UNKNOWN="the kernel's reply to the execution gave no status kbox knows (ok, error or aborted): whether the code succeeded is unknown; what it printed is kept"
kbox exec -s nr --format json 'print(3)'
check a_reply_of_an_unknown_status_is_an_error_that_says_so eval 'status_is 1 &&
	py "r[\"status\"] == \"error\" and r[\"error\"] is None and r[\"reason\"] == \"$UNKNOWN\" and r[\"notices\"] == [\"$UNKNOWN\"] and r[\"stdout\"][\"text\"] == \"3\\n\""'
kbox stop -s nr

# ---- a flood is read, not dropped, while the quota lasts ----

# the bytes of text of print(i) for i in range(N)
flood_bytes() { "$PY" -c "import sys; print(sum(len(str(i)) + 1 for i in range($1)))"; }

# One run, whatever the machine does: the flood arrives whole, or the
# result counts exactly what was lost.  ipykernel's iopub socket drops
# messages past its send high-water mark (1000) when kbox falls behind (a
# loaded machine deschedules the supervisor); those never reach kbox, and
# the result says how many ("N messages the kernel sent during this
# execution never reached kbox").  Each print(i, flush=True) is one
# message, so then exactly that many lines are missing, and the lines that
# came are still in order, with gaps.  What kbox itself drops (its rate
# limit, its memory) is counted in dropped_messages, and missing too.
if selected a_20000_line_print_flood_arrives_whole_or_counts_what_was_lost \
	its_text_holds_every_line_that_arrived_in_order; then
	fresh
	kbox exec -s r --format json 'for i in range(20000): print(i, flush=True)'
fi
want=$(flood_bytes 20000)
# flood_accounted: stdout is the flood's result, whole or with its losses
# counted exactly (besides the lines that came, which flood_in_order
# checks); says which.
flood_accounted() {
	"$PY" - "$want" <<'EOF'
import json, re, sys
want = int(sys.argv[1])
r = json.load(open("stdout"))
out = r["stdout"]
never = 0
for n in r["notices"]:
    m = re.fullmatch(r"(\d+) messages? the kernel sent during this execution never reached kbox "
                     r"\(most likely its output queue overflowed while it flooded output faster "
                     r"than kbox reads\): some output may be missing", n)
    if m:
        never += int(m.group(1))
lost = never + out["dropped_messages"]
if lost == 0:
    print("#   the flood arrived whole")
    ok = (out["total_bytes"] == want and r["notices"] == [] and out["truncated"]
          and "the complete text is in" in out["text"])
else:
    print("#   %d messages never reached kbox, %d kbox dropped: counted" % (never, out["dropped_messages"]))
    # the bytes of what never arrived are not known: the sum falls short
    sum_ok = (out["total_bytes"] + out["dropped_bytes"] < want if never
              else out["total_bytes"] + out["dropped_bytes"] == want)
    ok = (sum_ok and "the complete text" not in out["text"]
          and (never == 0 or "but %d messages of the kernel never arrived" % never in out["text"]))
sys.exit(0 if ok else 1)
EOF
	[ $? -eq 0 ] || { show_r; return 1; }
}
# flood_in_order: the text kept (the spill file, or the reply when it
# holds all of it) is the lines 0..19999 in order, exactly, when nothing
# was lost; else it is that text with pieces left out and nothing else: a
# subsequence of it, shorter.  (ipykernel sends a print's number and its
# newline in one message or in two, so a lost message can leave an empty
# line or join two numbers: the pieces are not whole lines.)
flood_in_order() {
	"$PY" - <<'EOF'
import json, re, sys
r = json.load(open("stdout"))
out = r["stdout"]
never = sum(int(m.group(1)) for m in (re.match(r"(\d+) messages? the kernel sent during this "
                                               r"execution never reached kbox ", n)
                                      for n in r["notices"]) if m)
lost = never + out["dropped_messages"]
text = open(out["spill_path"]).read() if out.get("spill_path") else out["text"]
full = "".join("%d\n" % i for i in range(20000))
if lost == 0:
    if text != full:
        print("#   nothing was lost, but the text is not lines 0..19999:", repr(text[:100]), "...")
        sys.exit(1)
    sys.exit(0)
j = 0
for i, c in enumerate(text):
    j = full.find(c, j)
    if j < 0:
        print("#   byte %d (%r) is not in order: %r" % (i, c, text[max(0, i - 40):i + 40]))
        sys.exit(1)
    j += 1
if len(text) >= len(full):
    print("#   %d messages counted lost, but the text is whole" % lost)
    sys.exit(1)
EOF
}
check a_20000_line_print_flood_arrives_whole_or_counts_what_was_lost eval 'status_is 0 &&
	flood_accounted'
check its_text_holds_every_line_that_arrived_in_order flood_in_order

if selected the_output_rate_is_kept_in_session_json \
	past_the_outputs_quota_a_flood_is_dropped_and_counted_exactly \
	dropped_output_is_never_called_complete a_dropping_result_is_valid_against_the_schema; then
	fresh
	# (a rate of 10 messages a second, past a burst of 20, once the
	# quota is used up: however slowly the supervisor reads, it reads
	# more than that, so kbox drops some; a rate of 1000, the default,
	# a supervisor starved of CPU reads under)
	kbox start -s q --outputs-quota 1M --output-rate 10
	# (sent as ipykernel's stdout sends a print, without waiting for each
	# to go out; lines of 1001 bytes, so that about 1000 fill the quota
	# even when the kernel's queue drops many of the others)
	kbox exec -s q --format json 'import sys
o = sys.stdout
for i in range(20000):
    o.session.send(o.pub_thread, "stream", {"name": "stdout", "text": str(i).rjust(1000, "x") + "\n"},
                   parent=o.parent_header, ident=o.topic)'
fi
want=$((20000 * 1001))
check the_output_rate_is_kept_in_session_json eval \
	'grep -qx "  \"output_rate\": 10," "$S/q/session.json"'
# (what the kernel's own queue dropped never arrived, and its size is not
# known: then the sum falls short, and a notice says how many messages)
check past_the_outputs_quota_a_flood_is_dropped_and_counted_exactly eval 'status_is 0 &&
	py "r[\"stdout\"][\"dropped_messages\"] > 0
	and (r[\"stdout\"][\"total_bytes\"] + r[\"stdout\"][\"dropped_bytes\"] == $want
	     if not any(\"never reached kbox\" in n for n in r[\"notices\"])
	     else r[\"stdout\"][\"total_bytes\"] + r[\"stdout\"][\"dropped_bytes\"] < $want)"'
check dropped_output_is_never_called_complete eval '
	py "\"the complete text\" not in r[\"stdout\"][\"text\"]
	and r[\"stdout\"][\"text\"].endswith(\"were dropped, not shown or saved: the kernel printed faster than kbox could keep it ...]\\n\")
	and any(\"stdout messages\" in n and \"outputs quota was used up\" in n for n in r[\"notices\"])"'
check a_dropping_result_is_valid_against_the_schema valid stdout
# the session's rate is the one applied: with the quota used up by the
# flood above, of 1000 messages kbox keeps at most the burst of 20 and
# 10 a second after it (and one more, should a byte of room be left);
# at the default rate it would keep all 1000
if selected the_sessions_output_rate_is_what_kbox_keeps_past_the_quota; then
	fresh
	kbox exec -s q --format json 'import sys
o = sys.stdout
for i in range(1000):
    o.session.send(o.pub_thread, "stream", {"name": "stdout", "text": "%d\n" % i},
                   parent=o.parent_header, ident=o.topic)'
fi
# (the messages that never came are counted by the kernel's numbers, and
# its status idle, numbered after the 1000, can be dropped by its full
# queue as well: then it is one of them)
check the_sessions_output_rate_is_what_kbox_keeps_past_the_quota eval 'status_is 0 &&
	py "[never := sum(int(n.split()[0]) for n in r[\"notices\"] if \"never reached kbox\" in n)] and
	r[\"stdout\"][\"dropped_messages\"] > 0 and
	r[\"stdout\"][\"total_lines\"] + r[\"stdout\"][\"dropped_messages\"] + never in (1000, 1001) and
	not [n for n in r[\"notices\"] if \"iopub broke\" in n] and
	r[\"stdout\"][\"total_lines\"] <= 21 + 10 * r[\"seconds\"]"'
[ ! -d "$S/q" ] || kbox stop -s q

# messages the kernel numbered but that never came are counted: here the
# kernel's session skips 5 numbers, as if its queue had dropped them
fresh
kbox exec -s r --format json 'get_ipython().kernel.session.message_count += 5; print("x")'
check messages_that_never_arrived_are_counted eval 'status_is 0 &&
	py "r[\"notices\"] == [\"5 messages the kernel sent during this execution never reached kbox (most likely its output queue overflowed while it flooded output faster than kbox reads): some output may be missing\"]"'
fresh
kbox exec -s r --format json 'get_ipython().kernel.session.message_count += 1; print("x")'
check one_message_that_never_arrived_is_one_message eval 'status_is 0 &&
	py "r[\"notices\"] == [\"1 message the kernel sent during this execution never reached kbox (most likely its output queue overflowed while it flooded output faster than kbox reads): some output may be missing\"]"'
# an interrupt can land between the numbering of a message and its send
# (in IPython's displayhook, say): in an interrupted execution a gap is
# not blamed on a flood
fresh
kbox exec -s r --format json 'get_ipython().kernel.session.message_count += 1; raise KeyboardInterrupt'
check in_an_interrupted_execution_a_gap_is_not_blamed_on_a_flood eval 'status_is 1 &&
	py "r[\"notices\"] == [\"1 message the kernel numbered during this execution never reached kbox (the interrupt may have stopped it before it sent it, or its output queue overflowed): some output may be missing\"]"'
# the reply came, and the kernel's IOPub thread is busy for 3 s before
# it sends idle (a starved kernel on a loaded machine): kbox asks
# kernel_info and waits on; nothing was lost and nothing is said
fresh
kbox exec -s r --format json 'import time
k = get_ipython().kernel
orig = k._publish_status
def slow(status, *a, **kw):
    if status == "idle":
        k._publish_status = orig
        k.iopub_thread.schedule(lambda: time.sleep(3))
    return orig(status, *a, **kw)
k._publish_status = slow
print("x")'
check a_kernel_slow_to_send_idle_loses_nothing eval 'status_is 0 &&
	py "r[\"stdout\"][\"text\"] == \"x\\n\" and r[\"notices\"] == []"'
# its idle never comes (dropped by its full queue): the status of the
# kernel_info kbox asks comes after it, so iopub works and the execution
# is over, with the one message counted
fresh
kbox exec -s r --format json 'k = get_ipython().kernel
orig = k._publish_status
def drop(status, *a, **kw):
    if status == "idle":
        k._publish_status = orig
        k.session.message_count += 1
        return
    return orig(status, *a, **kw)
k._publish_status = drop
print("x")'
check a_kernel_whose_idle_is_lost_is_over_without_reconnecting eval 'status_is 0 &&
	py "r[\"stdout\"][\"text\"] == \"x\\n\" and r[\"notices\"] == [\"1 message the kernel sent during this execution never reached kbox (most likely its output queue overflowed while it flooded output faster than kbox reads): some output may be missing\"]"'
fresh
kbox exec -s r --format json 'print("y")'
check an_execution_that_lost_nothing_has_no_such_notice eval 'status_is 0 && py "r[\"notices\"] == []"'

# ---- installing packages: one line the model can act on ----

fresh
kbox exec -s r '%pip install kbox-no-such-package'
check pip_install_gets_the_note_that_packages_cannot_be_installed eval '
	last_line_is stdout "[note: packages cannot be installed here: the sandbox has no network and its system files are read-only; use the packages that are installed (help(\"modules\") lists them)]"'
fresh
kbox exec -s r 'pip install kbox-no-such-package'
check a_bare_pip_install_gets_the_note_too eval '
	last_line_is stdout "[note: packages cannot be installed here: the sandbox has no network and its system files are read-only; use the packages that are installed (help(\"modules\") lists them)]"'
fresh
kbox exec -s r '!pip install kbox-no-such-package'
check a_shell_pip_install_gets_the_note_too eval '
	last_line_is stdout "[note: packages cannot be installed here: the sandbox has no network and its system files are read-only; use the packages that are installed (help(\"modules\") lists them)]"'

# ---- streaming: each event is out as the code runs, not at its end ----

# (the code waits for a file the test makes only once it has read the
# first event: that event came before the execution ended)
fresh
if [ -z "$SKIPPING" ]; then
	rm -f "$S/r/workspace/go"
	timeout -k 5 120 "$KBOX" exec -s r --format ndjson 'import os, time
print("first", flush=True)
while not os.path.exists("go"):
    time.sleep(0.05)
print("second")' >stream.out 2>stream.err &
	st_pid=$!
	BG_PIDS="$BG_PIDS $st_pid"
	st_seen=no
	wait_for grep -q '"text":"first' stream.out && st_seen=yes
	st_lines=$(wc -l <stream.out)
	: >"$S/r/workspace/go"
	wait "$st_pid"
	st_rc=$?
fi
check ndjson_events_come_out_while_the_code_still_runs eval '[ "$st_seen" = yes ] &&
	[ "$st_rc" = 0 ] && ! head -n "$st_lines" stream.out | grep -q "\"text\":\"second" &&
	grep -q "\"text\":\"second" stream.out && tail -n 1 stream.out | grep -q "\"event\":\"end\""'

# an error event says which error, as kbox-run(1) shows it (the traceback
# is the end event's)
fresh
kbox exec -s r --format ndjson 'raise ValueError("boom")'
check ndjson_error_event_carries_the_ename_and_evalue eval 'status_is 1 && stderr_empty &&
	[ "$(wc -l <stdout)" -eq 2 ] &&
	first_line_is stdout "{\"schema\":\"kbox.result/2\",\"event\":\"error\",\"ename\":\"ValueError\",\"evalue\":\"boom\"}" &&
	tail -n 1 stdout | grep -q "^{\"schema\":\"kbox.result/2\",\"event\":\"end\",\"status\":\"error\","'

# ---- interrupts ----

# interrupt_when_started FILE: in the background, interrupt session r once
# the code has made FILE in its workspace (it runs, then, where the
# interrupt must land).
interrupt_when_started() {
	rm -f "$S/r/workspace/$1"
	(wait_for test -e "$S/r/workspace/$1" >/dev/null && "$KBOX" interrupt -s r >/dev/null 2>&1) &
	BG_PIDS="$BG_PIDS $!"
}

fresh
interrupt_when_started started1
kbox exec -s r --format json 'import time; open("started1", "w").close()
for i in range(600):
    time.sleep(0.1)'
check an_interrupt_from_another_shell_is_status_interrupted eval 'status_is 3 &&
	py "r[\"status\"] == \"interrupted\" and r[\"reason\"] == \"interrupted by kbox interrupt\"
	and r[\"error\"][\"ename\"] == \"KeyboardInterrupt\"
	and r[\"error\"][\"traceback\"][\"text\"].startswith(\"KeyboardInterrupt: interrupted by kbox interrupt at Cell In\")
	and r[\"error\"][\"traceback\"][\"text\"].count(\"\\n\") == 1
	and len(r[\"error\"][\"traceback_raw\"]) > 0"'
check an_interrupted_result_is_valid_against_the_schema valid stdout

fresh
interrupt_when_started started2
kbox exec -s r 'import time; open("started2", "w").close()
for i in range(600):
    time.sleep(0.1)'
check the_text_of_an_interrupt_is_two_lines eval 'status_is 3 &&
	[ "$(wc -l <stdout)" -eq 2 ] &&
	grep -q "^KeyboardInterrupt: interrupted by kbox interrupt at Cell In \?\[[0-9]*\], line 3: time.sleep(0.1)$" stdout &&
	last_line_is stdout "[interrupted by kbox interrupt; state is kept]"'

# a loop that prints with flush=True as fast as it can (where IPython's
# traceback machinery once crashed on the interrupt): said all the same
fresh
interrupt_when_started started5
kbox exec -s r --format json 'open("started5", "w").close()
i = 0
while True:
    print(i, flush=True)
    i += 1'
check a_printing_loop_interrupted_is_status_interrupted_and_says_so eval 'status_is 3 &&
	py "r[\"status\"] == \"interrupted\" and r[\"reason\"] == \"interrupted by kbox interrupt\"
	and r[\"stdout\"][\"text\"].startswith(\"0\\n1\\n\")"'
fresh
kbox exec -s r 'print(i > 0)'
check a_printing_loop_interrupted_keeps_its_state eval 'status_is 0 && stdout_is True'

# kbox sent the interrupt: it is said, whatever the kernel's traceback
# machinery did (IPython's own "Unexpected exception formatting
# exception", which sends an error reply and no error output, stood in for
# by a showtraceback that only writes that line), and then put back
fresh
kbox exec -s r 'import sys
_kbox_st = get_ipython().showtraceback
get_ipython().showtraceback = lambda *a, **k: sys.stderr.write("Unexpected exception formatting exception. Falling back to standard exception\n")'
interrupt_when_started started3
kbox exec -s r --format json 'import time; open("started3", "w").close()
for i in range(600):
    time.sleep(0.1)'
cp stdout broken.json
broken_rc=$rc
kbox exec -s r 'get_ipython().showtraceback = _kbox_st; del _kbox_st'
check an_interrupt_is_said_when_the_kernels_traceback_machinery_fails eval '
	[ "$broken_rc" = 3 ] && "$PY" -c "import json, sys; r = json.load(open(\"broken.json\"))
sys.exit(not (r[\"status\"] == \"interrupted\" and r[\"reason\"] == \"interrupted by kbox interrupt\"
 and r[\"error\"] is None and r[\"stderr\"][\"text\"].startswith(\"Unexpected exception formatting\")))"'

# the one line is cut in whole characters: a long line of accented text
# that the interrupt stops in still gives the whole text result
fresh
kbox exec -s r -t 1 'import time; s = "'"$("$PY" -c 'print("é" * 150)')"'"; time.sleep(60)'
check an_interrupted_line_of_long_unicode_text_still_gives_the_text_result eval 'status_is 3 &&
	[ "$(wc -l <stdout)" -eq 2 ] &&
	head -n 1 stdout | grep -q "^KeyboardInterrupt: interrupted when it timed out at Cell In" &&
	head -n 1 stdout | "$PY" -c "import sys; sys.stdin.buffer.read().decode(\"utf-8\")" &&
	last_line_is stdout "[timeout: timed out after 1 s; the kernel was interrupted (state kept)]"'

# a message number far ahead (kernel code can set it) is another
# numbering, not a loss
fresh
kbox exec -s r --format json 'get_ipython().kernel.session.message_count += 10**15; print("x")'
check a_numbering_jump_is_not_counted_as_lost eval 'status_is 0 && py "r[\"notices\"] == []"'

# ---- input ----

fresh
kbox exec -s r 'name = input("Name? ")'
check input_without_i_is_one_line_saying_how_to_give_it eval 'status_is 1 &&
	stdout_is "StdinNotImplementedError: input() is not available here: put the values in the code" &&
	stderr_is "kbox exec: the code asked for input: besides putting the values in the code, you may give it lines with -i LINE or --input-file FILE"'

# in JSON, the result alone says it (the hint is for a person at a terminal)
fresh
kbox exec -s r --format json 'name = input("Name? ")'
check input_without_i_in_json_has_no_hint eval 'status_is 1 && stderr_empty &&
	py "r[\"error\"][\"traceback\"][\"text\"] == \"StdinNotImplementedError: input() is not available here: put the values in the code\\n\""'

fresh
kbox exec -s r -i Ada 'a = input("Name? "); b = input("Again? "); print(a)'
check input_with_i_shows_the_prompt_and_the_line_given eval 'status_is 1 &&
	first_line_is stdout "[input: the code asked \"Name? \" and was given \"Ada\"]" &&
	has_line stdout "[input: the code asked \"Again? \" and was given end of input: no input line was left]" &&
	last_line_is stdout "EOFError: the code asked for more input than the 1 line given: give more with -i LINE or --input-file FILE" &&
	[ "$(wc -l <stdout)" -eq 3 ]'

# the record of a long line given keeps its first 1024 bytes (the code
# gets it whole): a result does not grow by the size of its input
fresh
LONG=$(printf 'y%.0s' $(seq 5000))
kbox exec -s r -i "$LONG" 'print(len(input()))'
check input_a_long_line_is_shown_cut_and_given_whole eval 'status_is 0 &&
	stdout_is "[input: the code asked \"\" and was given \"$(printf "y%.0s" $(seq 1024))…\"]
5000"'

fresh
printf 'Ada\nLovelace\n' >answers
kbox exec -s r --format ndjson --input-file answers 'print(input("First? "), input("Last? "))'
check input_file_answers_with_its_lines_and_ndjson_has_input_events eval 'status_is 0 &&
	has_line stdout "{\"schema\":\"kbox.result/2\",\"event\":\"input\",\"prompt\":\"First? \",\"value\":\"Ada\",\"password\":false}" &&
	has_line stdout "{\"schema\":\"kbox.result/2\",\"event\":\"input\",\"prompt\":\"Last? \",\"value\":\"Lovelace\",\"password\":false}" &&
	tail -n 1 stdout | grep -qF "\"stdout\":{\"text\":\"Ada Lovelace\\n\""'
check input_events_are_valid_against_the_schema valid stdout

fresh
printf 'print(input())\n' >code.txt
kbox exec -s r -f - --input-file - <code.txt
check the_code_and_an_input_file_cannot_both_be_standard_input eval 'status_is 2 && stdout_empty &&
	stderr_is "kbox exec: standard input (-) given more than once (for the code and --input-file)"'
kbox run --input-file - - <code.txt
check a_run_cell_and_an_input_file_cannot_both_be_standard_input eval 'status_is 2 && stdout_empty &&
	stderr_is "kbox run: standard input (-) given more than once"'

fresh
kbox exec -s r --input-file missing 'input()'
check an_unreadable_input_file_is_a_usage_error eval 'status_is 2 && stdout_empty &&
	stderr_is "kbox exec: --input-file missing: No such file or directory"'

# ---- kbox's own errors under --format json ----

fresh
kbox exec -s nosuch --no-start --format json 'x'
check a_missing_session_under_format_json_prints_a_failure_object eval 'status_is 5 &&
	stdout_is "{\"schema\":\"kbox.result/2\",\"status\":\"failed\",\"error\":{\"kind\":\"unavailable\",\"message\":\"no session \\\"nosuch\\\" (in $KBOX_HOME): kbox start -s nosuch starts it (kbox ls lists the sessions there)\"}}" &&
	stderr_is "kbox exec: no session \"nosuch\" (in $KBOX_HOME): kbox start -s nosuch starts it (kbox ls lists the sessions there)"'
check a_failure_object_is_valid_against_the_schema valid stdout

fresh
kbox exec -s r --format json -f nothere.py
check an_unreadable_file_under_format_json_prints_a_usage_failure eval 'status_is 2 &&
	py "r == {\"schema\": \"kbox.result/2\", \"status\": \"failed\", \"error\": {\"kind\": \"usage\", \"message\": \"cannot read nothere.py: No such file or directory\"}}"'

fresh
kbox exec -s r --format json --bogus 'x'
check a_bad_option_after_format_json_prints_a_usage_failure eval 'status_is 2 &&
	py "r[\"error\"] == {\"kind\": \"usage\", \"message\": \"unknown option --bogus (see kbox exec --help)\"}"'

fresh
kbox exec -s r --bogus --format json 'x'
check a_bad_option_before_format_json_prints_a_usage_failure_too eval 'status_is 2 &&
	py "r[\"error\"] == {\"kind\": \"usage\", \"message\": \"unknown option --bogus (see kbox exec --help)\"}" &&
	stderr_is "kbox exec: unknown option --bogus (see kbox exec --help)"'

# another execution holds the kernel (from when it made "holding" until
# it is interrupted) for all of the waiting one's -t 1
fresh
rm -f "$S/r/workspace/holding"
(timeout -k 5 120 "$KBOX" exec -s r 'import time; open("holding", "w").close(); time.sleep(100)' >/dev/null 2>&1) &
hold=$!
BG_PIDS="$BG_PIDS $hold"
wait_for test -e "$S/r/workspace/holding" >/dev/null
kbox exec -s r --format json -t 1 'open("ran-while-busy", "w").close()'
check waiting_behind_another_execution_is_status_busy_exit_6 eval 'status_is 6 &&
	py "r[\"status\"] == \"busy\" and r[\"error\"][\"kind\"] == \"busy\"
	and \"it never ran\" in r[\"error\"][\"message\"]"'
"$KBOX" interrupt -s r >/dev/null 2>&1
wait "$hold"
check the_busy_code_never_ran eval 'status_is 6 && [ ! -e "$S/r/workspace/ran-while-busy" ]'

# ---- -j, and a completion that finds nothing ----

fresh
kbox exec -s r -j 'print(6 * 7)'
check exec_j_is_format_json eval 'status_is 0 && py "r[\"stdout\"][\"text\"] == \"42\\n\""'
kbox complete -s r 'zzzq_nothing'
check a_completion_that_finds_nothing_says_so eval 'status_is 0 &&
	stdout_is "[no completions: the kernel knows nothing that completes the code at the cursor]"'
kbox interrupt -s r
check an_interrupt_of_an_idle_kernel_says_no_code_ran eval 'status_is 0 &&
	stdout_is "session r: kernel interrupted (it was running no code)"'

# ---- numbers ----

fresh
kbox logs -s r --json
check the_event_log_prints_reals_short eval 'status_is 0 && grep -q "\"seconds\":" stdout &&
	! grep -qE "[0-9]\.[0-9]{10,}" stdout'

fresh
kbox stop -s r
tests_done
