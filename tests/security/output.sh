#!/bin/sh
# tests/security/output.sh — threats.md row 26 against the bwrap sandbox:
# what the kernel outputs, as kbox exec hands it on.  NUL bytes hide
# nothing after them: in text they are shown as \0, in JSON kept as
# \u0000, in spill files written as sent, with every count right.  Each
# test is named after its row.  TAP.
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
# shellcheck source-path=SCRIPTDIR source=cwd.sh
. "$(dirname "$0")/cwd.sh"

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
	grep -qF "\"stdout\":{\"text\":\"A\\u0000B\\n\",\"total_bytes\":4,\"total_lines\":1,\"truncated\":false,\"spill_path\":null}" stdout &&
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
if [ -z "$SKIPPING" ]; then
	timeout -k 5 60 script -qec "$KBOX exec -s ou 'print(\"A\\x00B\")'" /dev/null >tty.out 2>&1 </dev/null
	rc=$?
fi
check row26_terminal_shows_a_nul_as_backslash_zero eval '[ "$rc" = 0 ] &&
	[ "$(tr -d "\r" <tty.out)" = "A\\0B" ] || { why="$(od -c tty.out | head -n 5)"; false; }'

# kbox logs reads "\u0000" in an event (the supervisor writes none; a line
# put there by hand) and shows it, and what follows, as a string.
fresh
if [ -z "$SKIPPING" ]; then
	printf '%s\n' '{"event":"probe","time":"2026-01-01T00:00:00.000Z","what":"a\u0000b"}' >>"$S/ou/events.ndjson"
fi
kbox logs -s ou
check row26_kbox_logs_shows_a_nul_in_an_event_as_backslash_zero eval 'status_is 0 &&
	[ "$(tail -n 1 stdout)" = "2026-01-01T00:00:00.000Z probe       what=\"a\\0b\"" ]'

echo "1..$n"
