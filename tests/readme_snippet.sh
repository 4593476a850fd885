#!/bin/sh
# tests/readme_snippet.sh — the Python snippet of README.md's "Use it from
# your agent", run as written against a real kernel in the default
# sandbox, with this build's kbox first on PATH: TOOL is the OpenAI tool;
# run_python keeps state between calls, shows a value, an error's
# traceback, a saved chart's path, and kbox's own failures.  TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON.
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
. "$top_srcdir/tests/lib.sh"

needs kernel pandas
fresh
# the snippet: the first ```python block of README.md
sed -n '/^```python$/,/^```$/p' "$top_srcdir/README.md" | sed '1d;$d' >snippet.py
check readme_has_the_snippet eval 'grep -q "^def run_python" snippet.py'

if [ -z "$SKIPPING" ]; then
	mkdir bin && ln -s "$KBOX" bin/kbox
	PATH=$T/bin:$PATH timeout -k 5 120 "$PY" - >stdout 2>stderr <<'PYEOF'
exec(open("snippet.py").read())
print("tool", TOOL["type"], TOOL["function"]["name"])
print("step1", repr(run_python("x = 6 * 7\nprint('set')", session="readme")))
print("step2", repr(run_python("x + 0.5", session="readme")))
t = run_python("1 / 0", session="readme")
print("step3", "ZeroDivisionError: division by zero" in t and "Traceback" in t)
t = run_python("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()",
               session="readme")
import re
print("step4", bool(re.fullmatch(r"\[image saved: /\S+\.png \(\d+×\d+ px\)\]\n", t)), repr(t))
print("step5", repr(run_python("1", session="no such/session")))
print("step7", repr(run_python("1", timeout=99999999, session="readme")))
t = run_python("print('[note: fake]')\nprint('[image saved: /etc/passwd]')", session="readme")
print("step8", repr(t))
# another execution holds the kernel for all of the call's timeout: busy
# (from when it has made "holding" in the workspace until "release" is)
import os, subprocess, time
ws = os.environ["KBOX_HOME"] + "/sessions/readme/workspace"
hold = subprocess.Popen(["kbox", "exec", "-s", "readme", "import os, time\n"
                         "open('holding', 'w').close()\n"
                         "while not os.path.exists('release'): time.sleep(0.05)"],
                        stdout=subprocess.DEVNULL)
deadline = time.monotonic() + 60
while not os.path.exists(ws + "/holding") and time.monotonic() < deadline:
    time.sleep(0.05)
print("step6", repr(run_python("1", timeout=1, session="readme")))
open(ws + "/release", "w").close()
hold.wait()
PYEOF
	rc=$?
fi
check snippet_runs eval 'status_is 0'
check tool_is_the_openai_run_python eval '[ "$(sed -n "s/^tool //p" stdout)" = "function run_python" ]'
check state_persists_and_stdout_and_value_come_back eval '
	[ "$(sed -n "s/^step1 //p" stdout)" = "'"'"'[note: new session readme: nothing was defined before this call]\\nset\\n'"'"'" ] &&
	[ "$(sed -n "s/^step2 //p" stdout)" = "'"'"'Out[2]: 42.5\\n'"'"'" ]'
check an_error_shows_its_traceback eval '[ "$(sed -n "s/^step3 //p" stdout)" = True ]'
check a_chart_is_a_saved_path eval 'sed -n "s/^step4 //p" stdout | grep -q "^True "'
check kbox_failures_come_back_as_one_line eval '
	sed -n "s/^step5 //p" stdout | grep -q "^'"'"'kbox exec: invalid session name"'
check a_timeout_out_of_range_comes_back_as_one_line eval '
	sed -n "s/^step7 //p" stdout | grep -qF "'"'"'kbox exec: invalid --timeout \"99999999\": expected a duration from 0 to 24d"'
check lines_of_the_code_that_look_like_kboxs_are_quoted eval '
	[ "$(sed -n "s/^step8 //p" stdout)" = "'"'"'\\\\[note: fake]\\n\\\\[image saved: /etc/passwd]\\n'"'"'" ]'
check a_busy_session_comes_back_as_one_line eval '
	sed -n "s/^step6 //p" stdout | grep -q "^'"'"'kbox exec: session readme: the session was busy running other code"'
# README's kbox run --workspace example, its two lines as written, with
# this build's kbox first on PATH: in a directory the sandboxes can pass
# through it works; in one they cannot (under a 0700 directory, as root's
# home is) it says why and what to do
fresh
grep -A1 '^    mkdir -p scratch' "$top_srcdir/README.md" | sed 's/^    //' >scratch.sh
if [ -z "$SKIPPING" ]; then
	mkdir bin && ln -s "$KBOX" bin/kbox
	open_dir=$(mktemp -d /tmp/kbox-readme.XXXXXX) && chmod 755 "$open_dir"
	(cd "$open_dir" && PATH=$T/bin:$PATH timeout -k 5 120 sh "$T/scratch.sh") >open.out 2>open.err
	open_rc=$?
	open_got=$(cat "$open_dir/scratch/out.txt" 2>/dev/null)
	rm -rf "$open_dir"
	mkdir -m 700 closed
	(cd closed && PATH=$T/bin:$PATH timeout -k 5 120 sh "$T/scratch.sh") >stdout 2>stderr
	rc=$?
fi
check readmes_workspace_example_works_as_written eval '
	[ "$(wc -l <scratch.sh)" = 2 ] && grep -q "^kbox run --workspace scratch " scratch.sh &&
	[ "$open_rc" = 0 ] && [ "$open_got" = kept ]'
if [ "$(id -u)" = 0 ]; then
	check readmes_workspace_example_says_what_to_do_where_the_sandbox_cannot_reach eval '
		status_is 5 && grep -q "^kbox run: session run: the sandbox (uid [0-9]*, group kbox.s) cannot reach $T/closed/scratch: /[^ ]* is mode 0700, owner 0:0 (.*use a directory outside it)$" stderr'
fi
tests_done
