#!/bin/sh
# tests/cli.sh — kbox(1) run as a user runs it, each test in a fresh empty
# directory, asserting exit statuses and exact output.  TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON
# (the Python with ipykernel, default /usr/bin/python3).  The tests that
# start a kernel need the kernelspec "python3"; they are skipped when
# KERNEL_PYTHON cannot import ipykernel.
# shellcheck disable=SC2016 # eval strings expand later, on purpose
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"
DEMO=$top_srcdir/tests/demo
WARNING='kbox: warning: backend none: the kernel runs unsandboxed'
ESC=$(printf '\033')
TAB=$(printf '\t')

# No pager.
MANPAGER=cat PAGER=cat
export MANPAGER PAGER

# sandbox_dir DIR: make DIR for a --workspace: under root each sandbox runs
# as a uid of its own in the sandbox user's group (kbox(7), Identity), so
# it must be reachable by that group, and its to write.
sandbox_dir() {
	mkdir -m 711 "$1" || return 1
	writable_by_sandboxes "$1"
}

# kbox_here ARGS...: kbox ARGS with XDG_RUNTIME_DIR the current directory,
# so that kbox run makes its private session (its workspace, and what its
# sandbox binds) here.
kbox_here() {
	xdg_had=${XDG_RUNTIME_DIR+y} xdg_was=${XDG_RUNTIME_DIR-}
	XDG_RUNTIME_DIR=$(pwd -P)
	export XDG_RUNTIME_DIR
	kbox "$@"
	if [ -n "$xdg_had" ]; then XDG_RUNTIME_DIR=$xdg_was; else unset XDG_RUNTIME_DIR; fi
}

# ---- assertions (besides tests/lib.sh's) ----

no_ansi_escapes() { ! grep -q "$ESC" stdout stderr; }
# one_line_starting FILE PREFIX: FILE is one line, starting with PREFIX.
one_line_starting() {
	[ "$(wc -l <"$1")" -eq 1 ] || return 1
	case $(cat "$1") in "$2"*) return 0 ;; *) return 1 ;; esac
}
# no_bwrap_here: no bwrap process binds anything in this directory.
no_bwrap_here() {
	! grep -lsF -- "$(pwd -P)" /proc/[0-9]*/cmdline 2>/dev/null |
		xargs -r grep -lsa bwrap >/dev/null
}
# no_sandbox_left: no bwrap process is left that binds anything in this
# directory (the sandbox of a kbox run started by kbox_here is gone;
# polled, as its end follows kbox run's exit).
no_sandbox_left() { wait_for no_bwrap_here; }
# process_gone PID-FILE: the process whose pid the file holds exits.
process_gone() { [ -s "$1" ] && gone "$(cat "$1")"; }
# demo_aggregate_is_shown: the result of the aggregate cell, exactly.
demo_aggregate_is_shown() {
	sed -n '/^Out\[3\]:$/,+6p' stdout >aggregate
	cat >expected <<'EOF'
Out[3]:
region
north    14277.73
east     13419.18
south    13091.53
west     12095.32
Name: revenue, dtype: float64
EOF
	cmp -s expected aggregate
}
# image_saved: stdout has one "[image saved: PATH.png (W×H px)]" line, PATH is
# a PNG and W×H is its size.
image_path() { sed -n 's/^\[image saved: \(.*\.png\) ([0-9]*×[0-9]* px)\]$/\1/p' stdout; }
image_saved() {
	[ "$(grep -c '^\[image saved: .*\.png ([0-9]*×[0-9]* px)\]$' stdout)" -eq 1 ] || return 1
	path=$(image_path)
	size=$(sed -n 's/^\[image saved: .* (\([0-9]*\)×\([0-9]*\) px)\]$/\1 \2/p' stdout)
	is_png "$path" && png_size_is "$path" $size
}
image_saved_in() {
	path=$(image_path)
	[ "$(cd "$(dirname "$path")" && pwd -P)" = "$(cd "$1" && pwd -P)" ]
}
# run_dir: the name of the directory of the run's own, from the last line of
# stdout ("[files saved in: DIR/]", DIR in the current directory).
run_dir() { sed -n "\$s|^\[files saved in: $(pwd -P)/\(kbox-run-[^/]*\)/\]\$|\1|p" stdout 2>/dev/null; }
# run_dir_is_new_and_named_for_now: there is one kbox-run-YYYYMMDD-HHMMSS
# directory here, and the last line of stdout names it.
run_dir_is_new_and_named_for_now() {
	# shellcheck disable=SC2012 # names made here
	[ "$(ls -d kbox-run-* | wc -l)" -eq 1 ] || return 1
	case $(run_dir) in
	kbox-run-[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]-[0-9][0-9][0-9][0-9][0-9][0-9]) [ -d "$(run_dir)" ] ;;
	*) false ;;
	esac
}
# image_named NAME: the saved image's file name is NAME.
image_named() {
	path=$(image_path)
	[ "${path##*/}" = "$1" ]
}
json_is_valid() { "$PY" -m json.tool stdout >/dev/null 2>&1; }
json_has_python3() {
	"$PY" -c '
import json, sys
spec = json.load(open("stdout"))["python3"]
assert set(spec) >= {"resource_dir", "display_name", "language", "argv"}, spec
assert spec["language"] == "python" and isinstance(spec["argv"], list), spec
' 2>/dev/null
}

# ---- commands that start no kernel ----

fresh
kbox version
check version_prints_name_and_version stdout_is "kbox 0.1.0"
check version_exits_0 status_is 0

fresh
kbox --version
check dash_dash_version_prints_name_and_version stdout_is "kbox 0.1.0"
# an operand is refused, as every command refuses one (newcomer 26, N5)
kbox --version extra
check dash_dash_version_with_an_operand_is_exit_2 fails_with 2 \
	'kbox version: unexpected argument "extra" (see kbox version --help)'

for fmt in "--format json" "--format ndjson" --json; do
	fresh
	# shellcheck disable=SC2086 # two words
	kbox version $fmt
	check "version_$(echo "${fmt#--}" | tr ' ' _)_prints_one_json_line" \
		stdout_is '{"name":"kbox","version":"0.1.0"}'
done

# Output that cannot be written is not a success; a reader that has gone
# (| head) is not an error.
fresh
"$KBOX" version >/dev/full 2>stderr
rc=$?
check output_to_a_full_disk_fails_with_one_line eval '[ "$rc" = 5 ] &&
	[ "$(cat stderr)" = "kbox version: cannot write standard output: No space left on device" ]'
for opt in --help --version; do
	"$KBOX" "$opt" >/dev/full 2>"stderr$opt"
	echo $? >>rcs
done
check kbox_help_and_version_to_a_full_disk_fail_with_one_line eval '[ "$(cat rcs)" = "$(printf "5\n5")" ] &&
	[ "$(cat stderr--help stderr--version)" = "$(printf "kbox: cannot write standard output: No space left on device\nkbox: cannot write standard output: No space left on device")" ]'
fresh
{ "$KBOX" kernelspecs --help 2>stderr; echo $? >rc.out; } | head -c 1 >/dev/null
rc=$(cat rc.out)
check output_to_a_reader_that_has_gone_is_no_error eval '[ "$rc" = 0 ] && [ ! -s stderr ]'
# kbox mcp's own options, bad: one line, exit 2, before it reads anything
kbox mcp --soft-timeout abc </dev/null
check mcp_bad_soft_timeout_is_one_line_and_exit_2 eval 'status_is 2 && [ ! -s stdout ] &&
	[ "$(cat stderr)" = "kbox mcp: invalid --soft-timeout \"abc\": expected a duration from 0 to 24d, such as 30, 1.5s, 500ms, 2m or 1h" ]'
kbox mcp --files-timeout -1 </dev/null
check mcp_bad_files_timeout_is_one_line_and_exit_2 eval 'status_is 2 && [ ! -s stdout ] &&
	[ "$(cat stderr)" = "kbox mcp: invalid --files-timeout \"-1\": expected a duration from 0 to 24d, such as 30, 1.5s, 500ms, 2m or 1h" ]'
kbox mcp --structured yes </dev/null
check mcp_bad_structured_is_one_line_and_exit_2 eval 'status_is 2 && [ ! -s stdout ] &&
	[ "$(cat stderr)" = "kbox mcp: invalid --structured \"yes\": expected none, text or full" ]'
# Input that cannot be read is not the end of it: kbox mcp with standard
# input closed says so and fails (kbox opens /dev/null in its place, in
# which reading still fails).
fresh
timeout -k 5 120 "$KBOX" mcp <&- >stdout 2>stderr
rc=$?
check mcp_with_stdin_closed_fails_with_one_line eval '[ "$rc" = 5 ] && [ ! -s stdout ] &&
	[ "$(cat stderr)" = "kbox mcp: cannot read standard input: Bad file descriptor" ]'

for cmd in "" help kernelspecs run version; do
	fresh
	# shellcheck disable=SC2086 # an empty $cmd must vanish
	kbox $cmd --help
	check "${cmd:-kbox}_help_exits_0_with_usage" eval '[ "$rc" = 0 ] && [ -s stdout ]'
done

fresh
kbox help run
check help_run_prints_its_usage_then_its_page eval '[ "$rc" = 0 ] &&
	head -n 1 stdout | grep -q "^usage: kbox run " &&
	[ "$(tail -n 1 stdout)" = "full reference: man kbox-run (in a source tree: man ./man/kbox-run.1)" ]'

fresh
kbox help frobnicate
check help_unknown_command_exits_2 status_is 2

fresh
kbox frobnicate
check unknown_command_exits_2 status_is 2
check unknown_command_says_so_in_one_line one_line_starting stderr "kbox"

fresh
kbox kernelspecs
check kernelspecs_lists_python3 grep -q "^python3${TAB}/.*${TAB}." stdout
check kernelspecs_exits_0 status_is 0

fresh
mkdir -p specs/kernels/mine
cat >specs/kernels/mine/kernel.json <<'EOF'
{"argv": ["/bin/false", "{connection_file}"], "display_name": "My Kernel", "language": "none"}
EOF
JUPYTER_PATH=$T/specs kbox kernelspecs
check kernelspecs_lists_a_spec_on_JUPYTER_PATH_as_name_dir_display_name \
	has_line stdout "mine${TAB}$T/specs/kernels/mine${TAB}My Kernel"

fresh
kbox kernelspecs --json
check kernelspecs_json_is_valid_json json_is_valid
check kernelspecs_json_describes_python3 json_has_python3
cp stdout json.out
kbox kernelspecs --format json
check kernelspecs_format_json_is_dash_dash_json eval 'status_is 0 && cmp -s stdout json.out'
kbox kernelspecs -j
check kernelspecs_j_is_dash_dash_json eval 'status_is 0 && cmp -s stdout json.out'

fresh
kbox kernelspecs --format ndjson
check kernelspecs_ndjson_is_the_json_object_a_line_with_its_name "$PY" -c '
import json, subprocess, sys
lines = [json.loads(l) for l in open("stdout")]
whole = json.loads(subprocess.run([sys.argv[1], "kernelspecs", "--json"], capture_output=True).stdout)
assert [list(l)[0] for l in lines] == ["name"] * len(lines), lines
assert {l.pop("name"): l for l in lines} == whole, (lines, whole)
assert "python3" in whole
' "$KBOX"

fresh
kbox kernelspecs --no-such-option
check kernelspecs_unknown_option_exits_2 status_is 2

fresh
selected run_unknown_option_exits_2 run_unknown_option_says_so_in_one_line && kbox run --no-such-option -c 'print(1)'
check run_unknown_option_exits_2 status_is 2
check run_unknown_option_says_so_in_one_line one_line_starting stderr "kbox run: "

fresh
selected run_without_cells_exits_2 run_without_cells_says_so_in_one_line && kbox run
check run_without_cells_exits_2 status_is 2
check run_without_cells_says_so_in_one_line one_line_starting stderr "kbox run: "

fresh
selected run_missing_file_exits_2 run_missing_file_says_so_in_one_line && kbox run no-such-file.py
check run_missing_file_exits_2 status_is 2
check run_missing_file_says_so_in_one_line one_line_starting stderr "kbox run: "

# a notebook is not run as Python (newcomer 12, F6: its JSON raised
# NameError), whatever its name
fresh
printf '{"cells": [{"cell_type": "code", "source": "1+1", "metadata": {}, "outputs": [], "execution_count": null}],\n "metadata": {}, "nbformat": 4, "nbformat_minor": 5}\n' >nb.txt
kbox run nb.txt
check run_of_a_notebook_says_it_runs_code_not_notebooks fails_with 2 \
	"kbox run: nb.txt is a Jupyter notebook: kbox run runs code, not the JSON of a notebook; make a script of it first (jupyter nbconvert --to script nb.txt)"
KBOX_HOME=$T/home kbox exec -s nb - <nb.txt
check exec_of_a_notebook_says_it_runs_code_not_notebooks eval 'fails_with 2 "kbox exec: standard input is a Jupyter notebook: kbox exec runs code, not the JSON of a notebook; make a script of it first (jupyter nbconvert --to script NOTEBOOK)" &&
	[ ! -e home ]'

fresh
selected run_bad_timeout_exits_2 run_bad_timeout_says_so_in_one_line && kbox run --timeout abc -c 'print(1)'
check run_bad_timeout_exits_2 status_is 2
check run_bad_timeout_says_so_in_one_line one_line_starting stderr "kbox run: "

fresh
selected run_bad_format_exits_2 run_bad_format_says_so_in_one_line && kbox run --format xml -c 'print(1)'
check run_bad_format_exits_2 status_is 2
check run_bad_format_says_so_in_one_line one_line_starting stderr "kbox run: invalid --format"

# Code is at most 16 MiB, as the JSON string of its request (the protocol's
# KR_CTL_CODE_MAX): more is a usage error that says the limit, found before
# any session starts (so no session's directory is made) and before the
# kernelspec is looked for; a file or standard input is read up to one byte
# past it.  kbox mcp's and kbox agent's are in mcp_client.py and agent.sh.
# too_long WHO N [AS_JSON]: standard error is WHO's one line refusing code
# of N bytes (AS_JSON as a JSON string), whose room is exactly 16 MiB
# less the rest of the request, both said.
too_long() {
	"$PY" -c '
import re, sys
who, n = sys.argv[1], sys.argv[2]
js = " (%s as the JSON string sent, its escapes counted)" % sys.argv[3] if len(sys.argv) > 3 else ""
text = open("stderr").read()
m = re.fullmatch(re.escape("%s: the code is %s bytes%s; at most " % (who, n, js)) +
                 r"(\d+) can run \(16 MiB, less (\d+) bytes of the request.s own\): make it shorter\n", text)
sys.exit(not (m and int(m[1]) + int(m[2]) == 16 << 20 and int(m[1]) < int(sys.argv[-1])))' "$@"
}
OVER_16="longer than 16 MiB (16777216 bytes), the most kbox sends the kernel at once"
fresh
if selected run_reads_a_cell_of_exactly_16_MiB exec_refuses_code_over_16_MiB_from_a_file \
	exec_refuses_code_over_16_MiB_on_stdin run_refuses_a_cell_over_16_MiB \
	run_refuses_a_cell_over_16_MiB_on_stdin exec_refuses_a_file_over_16_MiB; then
	head -c 16777216 /dev/zero | tr '\0' '#' >cell.py
	selected run_reads_a_cell_of_exactly_16_MiB && kbox run -k no-such-kernel cell.py
fi
check run_reads_a_cell_of_exactly_16_MiB eval 'status_is 2 && [ ! -s stdout ] &&
	too_long "kbox run: cell 1" 16777216'
selected exec_refuses_code_over_16_MiB_from_a_file && kbox exec -s big -f cell.py
check exec_refuses_code_over_16_MiB_from_a_file eval 'status_is 2 && [ ! -s stdout ] &&
	too_long "kbox exec" 16777216 && [ ! -e "$S/big" ]'
selected exec_refuses_code_over_16_MiB_on_stdin && kbox exec -s big - <cell.py
check exec_refuses_code_over_16_MiB_on_stdin eval 'status_is 2 && [ ! -s stdout ] &&
	too_long "kbox exec" 16777216 && [ ! -e "$S/big" ]'
[ ! -e cell.py ] || echo >>cell.py
selected run_refuses_a_cell_over_16_MiB && kbox run -k no-such-kernel cell.py
check run_refuses_a_cell_over_16_MiB eval 'status_is 2 && [ ! -s stdout ] &&
	[ "$(cat stderr)" = "kbox run: cannot read cell.py: $OVER_16" ]'
selected run_refuses_a_cell_over_16_MiB_on_stdin && kbox run -k no-such-kernel - <cell.py
check run_refuses_a_cell_over_16_MiB_on_stdin eval 'status_is 2 && [ ! -s stdout ] &&
	[ "$(cat stderr)" = "kbox run: cannot read standard input: $OVER_16" ]'
selected exec_refuses_a_file_over_16_MiB && kbox exec -s big -f cell.py
check exec_refuses_a_file_over_16_MiB eval 'status_is 2 && [ ! -s stdout ] &&
	[ "$(cat stderr)" = "kbox exec: cannot read cell.py: $OVER_16" ] && [ ! -e "$S/big" ]'
rm -f cell.py
# code typed on a terminal ends with one ^D (a second read after the end
# waited for another); then the kernelspec that is not there ends it
# (exit 5), with no kernel to start
if selected code_typed_on_a_terminal_ends_with_one_eof; then
	last_dir=$(pwd) last_out=$(pwd)/stdout last_err=$(pwd)/stderr
	"$PY" - "$KBOX" >stdout 2>stderr <<'PYEOF'
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], ["kbox", "run", "-k", "no-such-kernel", "-"])
os.write(fd, b"print(1)\n\x04")
# until the terminal's end (kbox closed it: it ends), 60 s at most
end, closed = time.monotonic() + 60, False
while not closed and time.monotonic() < end:
    if select.select([fd], [], [], 1)[0]:
        try:
            closed = not os.read(fd, 4096)
        except OSError:
            closed = True
if not closed:
    os.kill(pid, 9)
status = os.waitpid(pid, 0)[1]
print("exit", os.waitstatus_to_exitcode(status) if closed else "none: it waited")
PYEOF
	rc=$?
fi
check code_typed_on_a_terminal_ends_with_one_eof eval 'status_is 0 && stdout_is "exit 5"'
# code where a file's name goes: no such file, and where code goes instead
selected run_of_code_as_a_file_name_says_where_code_goes && kbox run -k no-such-kernel 'print(1)'
check run_of_code_as_a_file_name_says_where_code_goes eval 'status_is 2 && [ ! -s stdout ] &&
	[ "$(cat stderr)" = "kbox run: cannot read print(1): No such file or directory: code given as text goes after -c (kbox run -c '"'CODE'"')" ]'
selected exec_of_code_after_f_says_where_code_goes && kbox exec -s none -f 'x = 1'
check exec_of_code_after_f_says_where_code_goes eval 'status_is 2 && [ ! -s stdout ] &&
	[ "$(cat stderr)" = "kbox exec: cannot read x = 1: No such file or directory: code given as text goes as the operand (kbox exec '"'CODE'"')" ] && [ ! -e "$S/none" ]'
# Escapes count: 3 MB of control characters take 18 MB as JSON.
if selected exec_refuses_code_whose_escapes_pass_16_MiB; then
	head -c 3000000 /dev/zero | tr '\0' '\001' >ctl.py
	kbox exec -s big -f ctl.py
	rm -f ctl.py
fi
check exec_refuses_code_whose_escapes_pass_16_MiB eval 'status_is 2 && [ ! -s stdout ] &&
	too_long "kbox exec" 3000000 18000000 &&
	[ ! -e "$S/big" ]'

# kbox logs --format json is one JSON array, whatever the log holds: a
# line torn by a crash is a string in it; no log at all is [].
fresh
mkdir -m 700 home && mkdir -p -m 700 home/sessions/torn home/sessions/new
printf '{"event":"start","time":"t1"}\n{"time":"t2","event":"st\n' >home/sessions/torn/events.ndjson
KBOX_HOME=$T/home
export KBOX_HOME
kbox logs -s torn --format json
check logs_json_keeps_a_torn_line_as_a_string eval 'status_is 0 && "$PY" -c "
import json
assert json.load(open(\"stdout\")) == [{\"event\": \"start\", \"time\": \"t1\"}, \"{\\\"time\\\":\\\"t2\\\",\\\"event\\\":\\\"st\"]
"'
kbox logs -s torn --format ndjson
check logs_ndjson_prints_the_lines_as_logged eval 'status_is 0 && cmp -s stdout home/sessions/torn/events.ndjson'
kbox logs -s new --json
check logs_json_of_no_events_is_an_empty_array eval 'status_is 0 && stdout_is "[]"'
# In text, what kbox logs prints of the log is shown, not obeyed: a torn
# line's escape sequence and BEL, a key's bidi control, a control
# character in a value that is not a string (ESC as ^[, BEL as ^G,
# U+202E as \u202e); the log keeps its bytes.
mkdir -p -m 700 home/sessions/ctl
printf '{"time":"t1","event":"st\033]0;title\007\n{"time":"t2","event":"x","k\342\200\256":["\302\233"]}\n' \
	>home/sessions/ctl/events.ndjson
kbox logs -s ctl
check logs_text_escapes_control_and_bidi_characters_of_every_part eval 'status_is 0 &&
	stdout_is "{\"time\":\"t1\",\"event\":\"st^[]0;title^G
t2 x           k\\u202e=[\"\\u009b\"]"'
# The log rotated: events.ndjson.1, then events.ndjson.
mkdir -p -m 700 home/sessions/rot
printf '{"event":"a","time":"t1"}\n' >home/sessions/rot/events.ndjson.1
printf '{"event":"b","time":"t2"}\n' >home/sessions/rot/events.ndjson
kbox logs -s rot
check logs_reads_the_rotated_log_first eval 'status_is 0 && stdout_is "t1 a
t2 b"'
KBOX_HOME=$ROOT/h

for bad in 12 abc 10X -5; do
	fresh
	selected "run_bad_max_output_${bad}_exits_2_in_one_line" && kbox run --max-output "$bad" -c 'print(1)'
	check "run_bad_max_output_${bad}_exits_2_in_one_line" eval '[ "$rc" = 2 ] &&
		one_line_starting stderr "kbox run: invalid --max-output"'
done

fresh
selected run_unknown_kernel_exits_5 && kbox run -k no-such-kernel -c 'print(1)'
check run_unknown_kernel_exits_5 status_is 5

fresh
selected run_takes_default_kernel_from_KBOX_KERNEL && KBOX_KERNEL=no-such-kernel kbox run -c 'print(1)'
check run_takes_default_kernel_from_KBOX_KERNEL status_is 5

fresh
mkdir -p specs/kernels/dies
cat >specs/kernels/dies/kernel.json <<'EOF'
{"argv": ["/bin/sh", "-c", "exit 1", "{connection_file}"], "display_name": "Dies", "language": "none"}
EOF
selected run_kernel_exiting_at_start_exits_5 && JUPYTER_PATH=$T/specs kbox run -k dies -c 'print(1)'
check run_kernel_exiting_at_start_exits_5 status_is 5

# The state directory (KBOX_HOME) must be private: one open to others is
# refused by every command that reads it, in one line with what fixes it:
# for a directory kbox did not make (no .kbox-state in it; KBOX_HOME=/tmp,
# say) a private directory of its own, never a chmod of one that others
# may use (in one anyone may write, as /tmp, of a name no one can guess);
# for one kbox made, the chmod.  Under root, 0710 (the sandbox
# user's group passes through, as kbox start makes it) is right; for
# another user it is open to a group.
need=0700
[ "$(id -u)" != 0 ] || need="0700 or 0710"
for mode in 755 777 1777 750; do
	fresh
	mkdir -m "$mode" home
	advice="directory $T/home is accessible to others (mode $(printf %04d "$mode"), need $need); kbox did not make it, and changing it could harm what else uses it: give KBOX_HOME a private directory of its own (mkdir -m 700 $T/home/kbox, then KBOX_HOME=$T/home/kbox)"
	# where anyone may make a name (as in /tmp, whose sticky bit is
	# shown), no name anyone can guess
	[ "$mode" != 777 ] && [ "$mode" != 1777 ] ||
		advice="directory $T/home is accessible to others (mode $(printf %04d "$mode"), need $need); kbox did not make it, and changing it could harm what else uses it: give KBOX_HOME a private directory of its own (KBOX_HOME=\$(mktemp -d), or leave KBOX_HOME unset for the default)"
	echo data >f
	for c in "ls" "ls --json" "stop -s x" "stop --all" "status -s x" "start -s x" \
		"exec -s x 1" "get -s x f" "put -s x f" "logs -s x" "rm -s x" "prune"; do
		name=state_dir_mode_${mode}_is_refused_by_$(echo "$c" | tr ' ' _)_with_what_fixes_it
		# (each command is the setup of the check that nothing was made)
		# shellcheck disable=SC2086 # the command's words
		{ selected "$name" || selected_later "state_dir_mode_${mode}_gets_nothing_made_in_it"; } &&
			KBOX_HOME=$T/home kbox $c
		check "$name" \
			eval '[ "$rc" = 5 ] && [ "$(cat stderr)" = "kbox ${c%% *}: $advice" ] &&
				if [ "$c" = "ls --json" ]; then
					[ "$(cat stdout)" = "{\"schema\":\"kbox.result/2\",\"status\":\"failed\",\"error\":{\"kind\":\"unavailable\",\"message\":\"$advice\"}}" ]
				else [ ! -s stdout ]; fi'
	done
	selected "state_dir_mode_${mode}_fails_kbox_doctor_with_what_fixes_it" \
		"state_dir_mode_${mode}_gets_nothing_made_in_it" && KBOX_HOME=$T/home kbox doctor
	check "state_dir_mode_${mode}_fails_kbox_doctor_with_what_fixes_it" eval '[ "$rc" = 5 ] &&
		grep -qxF "fail  state directory  $advice" stdout'
	check "state_dir_mode_${mode}_gets_nothing_made_in_it" eval '[ -z "$(ls -A home)" ]'
	chmod 700 home
	selected "state_dir_mode_${mode}_after_chmod_700_is_taken" && KBOX_HOME=$T/home kbox ls
	check "state_dir_mode_${mode}_after_chmod_700_is_taken" eval '[ "$rc" = 0 ] && [ ! -s stderr ] &&
		[ "$(head -n 1 stdout | tr -s " ")" = "NAME STATE BACKEND KERNEL PID UPTIME IDLE EXECS" ]'
done
# one that cannot be written: kbox doctor fails it, saying why, and kbox
# mcp refuses to start (not an error at every call); as an ordinary user,
# mode 500 (its advice makes no directory in it), and a state directory
# to be made where nothing can be; under root, a read-only mount
fresh
mkdir -m 700 home
if [ "$(id -u)" = 0 ]; then
	mount --bind home home && mount -o remount,bind,ro home &&
		nowrite="state directory $T/home cannot be written: Read-only file system; give KBOX_HOME a directory that can be (KBOX_HOME=\$(mktemp -d)), or leave it unset for the default"
	KBOX_HOME=$T/home kbox doctor
	cp stdout doctor.out
	echo "$rc" >doctor.rc
	KBOX_HOME=$T/home kbox mcp
	umount home
else
	chmod 500 home
	nowrite="state directory $T/home/st cannot be made: $T/home cannot be written: Permission denied; give KBOX_HOME a directory that can be (KBOX_HOME=\$(mktemp -d)), or leave it unset for the default"
	KBOX_HOME=$T/home/st kbox doctor
	cp stdout doctor.out
	echo "$rc" >doctor.rc
	KBOX_HOME=$T/home/st kbox mcp
fi
check doctor_fails_a_state_directory_it_cannot_write eval '[ "$(cat doctor.rc)" = 5 ] &&
	grep -qxF "fail  state directory  $nowrite" doctor.out'
check mcp_refuses_to_start_in_a_state_directory_it_cannot_write fails_with 5 "kbox mcp: $nowrite"
# root passes every access() check: a state directory to be made where
# the file system makes none (/proc) is tried, and refused the same way
if [ "$(id -u)" = 0 ]; then
	KBOX_HOME=/proc/kbox-nope kbox mcp
	check mcp_refuses_a_state_directory_no_file_system_can_make fails_with 5 \
		"kbox mcp: state directory /proc/kbox-nope cannot be made: cannot create directory /proc/kbox-nope: No such file or directory; give KBOX_HOME a directory that can be (KBOX_HOME=\$(mktemp -d)), or leave it unset for the default"
else
	skip mcp_refuses_a_state_directory_no_file_system_can_make "as an ordinary user access() says it first"
fi
# under root, a state directory its sessions' sandboxes cannot reach
# (below a directory of mode 0700, as mktemp -d makes) is said once, as
# kbox mcp starts, not as the error of every call (newcomer 26, B3)
if [ "$(id -u)" = 0 ] && id kbox >/dev/null 2>&1 && [ -z "${KBOX_SANDBOX_USER:-}" ]; then
	fresh
	mkdir -m 700 shut
	KBOX_HOME=$T/shut/home kbox mcp
	# (the first directory on the way that stops them is named: $T/shut,
	# or one above it, as a test's directory is private too)
	check mcp_refuses_a_state_directory_its_sandboxes_cannot_reach eval 'status_is 5 &&
		stdout_empty && [ "$(wc -l <stderr)" = 1 ] &&
		grep -q "^kbox mcp: the sandboxes (a uid of their own each, group kbox'"'"'s) cannot reach $T/shut: /.* is mode 0700, owner 0:0 (make it searchable by that group or others, e.g. chmod o+x /.*, or use a directory outside it)$" stderr'
	cp stderr shut.err
	# --http says the same, before it listens
	KBOX_HOME=$T/shut/home kbox mcp --http 127.0.0.1:0
	check mcp_http_refuses_a_state_directory_its_sandboxes_cannot_reach eval 'status_is 5 &&
		stdout_empty && cmp -s stderr shut.err'
else
	skip mcp_refuses_a_state_directory_its_sandboxes_cannot_reach "only root's sandboxes are users of their own"
	skip mcp_http_refuses_a_state_directory_its_sandboxes_cannot_reach "only root's sandboxes are users of their own"
fi
# a session kbox mcp cannot start (its kernel exits at once): a new one
# leaves nothing, its log neither, and the error names no log; one that
# stays names its log (newcomer 26, B3)
needs kernel
setup_for mcp_a_new_session_that_cannot_start_names_no_log \
	mcp_a_kept_session_that_cannot_start_names_its_log
fresh
mkdir -p jpdies/kernels/python3
printf '{"argv": ["/bin/false", "{connection_file}"], "display_name": "dies", "language": "python"}\n' \
	>jpdies/kernels/python3/kernel.json
mcp_call='{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "cli.sh", "version": "1"}}}
{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "run_python", "arguments": {"code": "1"}}}'
JUPYTER_PATH=$T/jpdies kbox mcp <<EOF
$mcp_call
EOF
check mcp_a_new_session_that_cannot_start_names_no_log eval 'status_is 0 &&
	tail -n 1 stdout | grep -q "^{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":\[{\"type\":\"text\",\"text\":\"run_python: session mcp-[0-9]*-[0-9a-f]* could not be started: session mcp-[0-9]*-[0-9a-f]*: the kernel exited with status 1 before it was ready\"}\],\"isError\":true}}$" &&
	[ -z "$(ls "$KBOX_HOME/sessions")" ]'
kbox start -s keep
kbox stop -s keep
JUPYTER_PATH=$T/jpdies kbox mcp -s keep <<EOF
$mcp_call
EOF
check mcp_a_kept_session_that_cannot_start_names_its_log eval 'status_is 0 &&
	tail -n 1 stdout | grep -qF "run_python: session keep could not be started: session keep: the kernel exited with status 1 before it was ready (see $KBOX_HOME/sessions/keep/kernel.log) (see also $KBOX_HOME/sessions/keep/supervisor.log)\"}],\"isError\":true}}" &&
	[ -e "$KBOX_HOME/sessions/keep/supervisor.log" ]'
kbox rm -s keep
setup_for
SKIPPING=
# the commands an error advises take a path as one shell word (newcomer
# 12, F4: a path with a space, pasted, made the wrong directories)
fresh
mkdir -m 755 "with space"
: >"with space/.kbox-state"
KBOX_HOME="$T/with space" kbox ls
check advice_quotes_a_path_with_a_space_as_one_shell_word eval 'status_is 5 &&
	stderr_is "kbox ls: directory $T/with space is accessible to others (mode 0755, need $need): chmod 700 '"'"'$T/with space'"'"'"'
rm "with space/.kbox-state"
KBOX_HOME="$T/with space" kbox ls
check advice_quotes_a_new_directory_with_a_space_as_one_shell_word eval 'status_is 5 &&
	stderr_is "kbox ls: directory $T/with space is accessible to others (mode 0755, need $need); kbox did not make it, and changing it could harm what else uses it: give KBOX_HOME a private directory of its own (mkdir -m 700 '"'"'$T/with space/kbox'"'"', then KBOX_HOME='"'"'$T/with space/kbox'"'"')"'
# a state directory no file system can have (a part over 255 bytes, a
# path over 4095) says which limit, with the path shown by its ends
long_part=$(printf "%0300d" 0)
KBOX_HOME=$T/$long_part/st kbox ls
shown="$(printf %s "$T/$long_part/st" | cut -c1-78)…$(printf %s "$T/$long_part/st" | rev | cut -c1-79 | rev)"
check a_state_directory_with_a_part_too_long_says_the_limit fails_with 5 \
	"kbox ls: state directory $shown: a part of it is 300 bytes long, more than the 255 a file name may have"
long_path=$T$(printf "/%0200d" $(seq 1 21))
KBOX_HOME=$long_path kbox exec 1
check a_state_directory_path_too_long_says_the_limit eval '
	status_is 5 && [ ! -s stdout ] &&
	grep -qx "kbox exec: state directory $T/0*…[0-9]*: its path is ${#long_path} bytes long, more than the 4095 a path may have" stderr'
if [ "$(id -u)" != 0 ]; then
	chmod 500 home
	KBOX_HOME=$T/home kbox exec 1
	check state_dir_mode_500_gets_advice_that_can_work fails_with 5 \
		"kbox exec: directory $T/home is not rwx for its owner (mode 0500, need 0700); kbox did not make it, and changing it could harm what else uses it: give KBOX_HOME a private directory of its own (KBOX_HOME=\$(mktemp -d), or leave KBOX_HOME unset for the default)"
else
	skip state_dir_mode_500_gets_advice_that_can_work "root may make a directory in a directory of mode 500"
fi
[ ! -d home ] || chmod 700 home
# a directory of the kernel's own file system (/proc): no mkdir in it is
# advised, none could work
KBOX_HOME=/proc/self/fd kbox exec 1
check state_dir_under_proc_gets_advice_that_can_work eval '[ "$rc" = 5 ] &&
	grep -qx "kbox exec: directory /proc/[0-9]*/fd is not rwx for its owner (mode 0500, need 0700); kbox did not make it, and changing it could harm what else uses it: give KBOX_HOME a private directory of its own (KBOX_HOME=\$(mktemp -d), or leave KBOX_HOME unset for the default)" stderr'
# a path that came from XDG_STATE_HOME or HOME, not KBOX_HOME: the line
# names where it came from, and what else would do (newcomer 11, F10)
fresh
if [ "$(id -u)" = 0 ]; then
	why="cannot create directory /proc/kbox: No such file or directory"
else
	why="/proc cannot be written: Permission denied"
fi
(unset KBOX_HOME && XDG_STATE_HOME=/proc kbox start -s a)
check a_state_directory_named_by_xdg_state_home_that_cannot_be_made_says_so fails_with 5 \
	"kbox start: state directory /proc/kbox cannot be made: $why; its path comes from XDG_STATE_HOME=/proc: give KBOX_HOME a directory that can be (KBOX_HOME=\$(mktemp -d)), or XDG_STATE_HOME another directory"
if [ "$(id -u)" != 0 ]; then
	(unset KBOX_HOME XDG_STATE_HOME && HOME=/proc kbox start -s a)
	check a_state_directory_below_home_that_cannot_be_made_says_so fails_with 5 \
		"kbox start: state directory /proc/.local/state/kbox cannot be made: /proc cannot be written: Permission denied; its path comes from HOME=/proc: give KBOX_HOME a directory that can be (KBOX_HOME=\$(mktemp -d)), or HOME your home directory"
else
	skip a_state_directory_below_home_that_cannot_be_made_says_so "root's is never below HOME"
fi
# and a file where a directory should be is said to be one
: >file
(unset KBOX_HOME && XDG_STATE_HOME=$T/file kbox start -s a)
check a_file_on_the_way_to_the_state_directory_is_said_to_be_no_directory fails_with 5 \
	"kbox start: state directory $T/file/kbox: $T/file is not a directory"
KBOX_HOME=$T/file kbox start -s a
check a_file_as_the_state_directory_is_said_to_be_no_directory fails_with 5 \
	"kbox start: state directory $T/file is not a directory; give KBOX_HOME a directory (KBOX_HOME=\$(mktemp -d)), or leave it unset for the default"
KBOX_HOME=$T/file kbox ls
check a_file_as_the_state_directory_is_said_to_be_no_directory_by_ls fails_with 5 \
	"kbox ls: state directory $T/file is not a directory; give KBOX_HOME a directory (KBOX_HOME=\$(mktemp -d)), or leave it unset for the default"

# a long path in a message is shortened where it comes first, the reason
# stands out, and kept whole in the fix, to be copied
fresh
long=$T/$(printf 'd%.0s' $(seq 40))/$(printf 'e%.0s' $(seq 30))/home
mkdir -p "$long" && chmod 755 "$long" && : >"$long/.kbox-state"
KBOX_HOME=$long kbox ls
short=$(printf %s "$long" | cut -c1-28)…$(printf %s "$long" | rev | cut -c1-36 | rev)
check error_shortens_a_long_path_but_keeps_it_whole_in_the_fix eval '[ "$rc" = 5 ] &&
	[ "$(cat stderr)" = "kbox ls: directory $short is accessible to others (mode 0755, need $need): chmod 700 $long" ]'

# another user's: whose it is, and what to do (under root, one given to
# nobody; as an ordinary user, root's)
fresh
if [ "$(id -u)" = 0 ]; then
	mkdir -m 700 home && chown 65534 home && owner=65534 h=$T/home
else
	h=/ owner=0
fi
KBOX_HOME=$h kbox ls
check state_dir_of_another_user_says_whose_and_what_to_do eval '[ "$rc" = 5 ] &&
	if [ "$owner" = 0 ]; then
		[ "$(cat stderr)" = "kbox ls: directory $h is root'"'"'s, not yours (uid $(id -u)): use a directory of your own" ]
	else
		[ "$(cat stderr)" = "kbox ls: directory $h is uid $owner'"'"'s, not yours (uid $(id -u)): run kbox as its owner, or use a directory of your own" ]
	fi'

# one kbox made (marked), opened since: the chmod
fresh
mkdir -m 755 home
: >home/.kbox-state
KBOX_HOME=$T/home kbox ls
check state_dir_kbox_made_and_open_to_others_is_refused_with_the_chmod eval '[ "$rc" = 5 ] &&
	[ "$(cat stderr)" = "kbox ls: directory $T/home is accessible to others (mode 0755, need $need): chmod 700 $T/home" ]'
# the directories kbox makes above a new KBOX_HOME: under root the
# sandboxes pass through them (0710, root's, in the sandbox user's group)
fresh
mkdir -p specs/kernels/dies
echo '{"argv": ["/bin/sh", "-c", "exit 1", "{connection_file}"], "display_name": "Dies", "language": "none"}' \
	>specs/kernels/dies/kernel.json
KBOX_HOME=$T/made/above/home JUPYTER_PATH=$T/specs kbox start -s x -k dies
if [ "$(id -u)" = 0 ]; then
	check state_dir_parents_kbox_makes_are_passable_by_the_sandboxes eval '[ "$rc" = 5 ] &&
		[ "$(stat -c %a:%u:%G made made/above)" = "$(printf "710:0:%s\n710:0:%s" "$SB_GROUP" "$SB_GROUP")" ]'
else
	check state_dir_parents_kbox_makes_are_private eval '[ "$rc" = 5 ] &&
		[ "$(stat -c %a made made/above)" = "$(printf "700\n700")" ]'
fi
fresh
mkdir -m 710 home
KBOX_HOME=$T/home kbox ls
if [ "$(id -u)" = 0 ]; then
	check state_dir_mode_0710_is_taken_under_root eval '[ "$rc" = 0 ] && [ ! -s stderr ]'
else
	check state_dir_mode_0710_is_refused_for_a_user eval '[ "$rc" = 5 ] &&
		[ "$(cat stderr)" = "kbox ls: directory $T/home is accessible to others (mode 0710, need 0700); kbox did not make it, and changing it could harm what else uses it: give KBOX_HOME a private directory of its own (mkdir -m 700 $T/home/kbox, then KBOX_HOME=$T/home/kbox)" ]'
fi

# A stray file in the sessions directory is no session: kbox ls shows it
# "invalid", and kbox stop --all passes over it (and over a session that
# is not running), with nothing to say.
fresh
mkdir -m 700 home home/sessions home/sessions/stopped
echo stray >home/sessions/afile
KBOX_HOME=$T/home kbox stop --all
check stop_all_passes_over_a_stray_file_in_the_sessions_directory eval '[ "$rc" = 0 ] &&
	[ ! -s stdout ] && [ ! -s stderr ]'
KBOX_HOME=$T/home kbox ls
check ls_shows_a_stray_file_in_the_sessions_directory_as_invalid eval '[ "$rc" = 0 ] &&
	[ "$(tr -s " " <stdout)" = "$(printf "NAME STATE BACKEND KERNEL PID UPTIME IDLE EXECS\nafile invalid - - - - - -\nstopped stopped - - - - - -")" ]'

# A session whose session.json is not valid (which kbox start refuses,
# naming the key) is "invalid" in kbox ls and kbox status, which says why.
fresh
mkdir -m 700 home home/sessions home/sessions/ex
echo '{"name":"ex","kernel":"python3","backend":"bwrap","colour":"blue"}' >home/sessions/ex/session.json
KBOX_HOME=$T/home kbox status -s ex
check status_of_a_session_with_an_invalid_config_says_invalid_and_why eval '[ "$rc" = 5 ] &&
	[ ! -s stderr ] && [ "$(cat stdout)" = "$(printf "%-18s %s\n" name: ex state: invalid \
		error: "$T/home/sessions/ex/session.json: unknown key \"colour\"" dir: "$T/home/sessions/ex")" ]'
KBOX_HOME=$T/home kbox ls
check ls_shows_a_session_with_an_invalid_config_as_invalid eval '[ "$rc" = 0 ] &&
	[ "$(sed -n 2p stdout | tr -s " ")" = "ex invalid - - - - - -" ]'
# kbox ls --json and kbox status --json give a session's members in the
# order kbox status prints them: the name first
mkdir -m 700 home/sessions/st
echo '{"name":"st","kernel":"python3","backend":"bwrap"}' >home/sessions/st/session.json
KBOX_HOME=$T/home kbox ls --json
cp stdout ls.json
KBOX_HOME=$T/home kbox status -s st --json
check ls_and_status_json_give_the_members_in_the_order_status_prints_them "$PY" -c '
import json
ls = {s["name"]: list(s) for s in json.load(open("ls.json"))}
st = list(json.load(open("stdout")))
assert st == ls["st"] == ["name", "state", "backend", "kernel", "dir"], (st, ls)
assert ls["ex"][:3] == ["name", "state", "error"], ls
'
KBOX_HOME=$T/home kbox start -s ex
check start_of_a_session_with_an_invalid_config_names_the_key eval '[ "$rc" = 5 ] &&
	[ "$(cat stderr)" = "kbox start: $T/home/sessions/ex/session.json: unknown key \"colour\"" ]'

# kbox rm and kbox prune remove what the code made unremovable (a
# directory of mode 0 holding files, one of mode 0500), as an ordinary
# user too, and only sessions that are not running; --older-than keeps
# those active since.  Sessions made by hand: no kernel.
fresh
mkdir -m 700 home home/sessions
for s in old new locked; do
	mkdir -m 700 "home/sessions/$s" "home/sessions/$s/workspace"
	echo '{"name":"'"$s"'","kernel":"python3","backend":"bwrap"}' >"home/sessions/$s/session.json"
	echo '{"event":"stop"}' >"home/sessions/$s/events.ndjson"
done
mkdir -p home/sessions/locked/workspace/d/e
echo x >home/sessions/locked/workspace/d/e/f
chmod 0 home/sessions/locked/workspace/d/e
chmod 500 home/sessions/locked/workspace/d
touch -d '3 days ago' home/sessions/old/events.ndjson home/sessions/old/session.json
KBOX_HOME=$T/home kbox rm locked
check rm_removes_a_workspace_the_code_made_unremovable eval 'status_is 0 && stderr_empty &&
	grep -qx "removed session locked ([0-9.]* [KM]iB)" stdout && [ ! -e home/sessions/locked ]'
KBOX_HOME=$T/home kbox prune --older-than 1d --dry-run
check prune_dry_run_older_than_names_only_the_old_session eval 'status_is 0 && stderr_empty &&
	sed -n 1p stdout | grep -qx "would remove session old ([0-9.]* [KM]iB)" && [ "$(wc -l <stdout)" = 2 ] &&
	[ -d home/sessions/old ]'
KBOX_HOME=$T/home kbox prune --older-than 1d
check prune_older_than_removes_only_the_session_inactive_since eval 'status_is 0 &&
	sed -n 1p stdout | grep -qx "removed session old ([0-9.]* [KM]iB)" && [ "$(wc -l <stdout)" = 2 ] &&
	[ ! -e home/sessions/old ] && [ -d home/sessions/new ]'
KBOX_HOME=$T/home kbox rm
check rm_without_a_name_is_a_usage_error fails_with 2 \
	"kbox rm: name the sessions to remove: kbox rm NAME... (or -s NAME)"
KBOX_HOME=$T/home kbox rm new new
check rm_of_a_name_given_twice_removes_it_once eval 'status_is 0 && stderr_empty &&
	[ "$(grep -c "^removed session new " stdout)" = 1 ] && [ ! -e home/sessions/new ]'
# a tree deeper than rm counts (256 levels) is removed all the same, and
# the size said is what was counted, "at least"
mkdir -m 700 home/sessions/deep
echo '{"name":"deep","kernel":"python3","backend":"bwrap"}' >home/sessions/deep/session.json
(cd home/sessions/deep && for i in $(seq 300); do mkdir d && cd d || exit; done && echo x >f)
KBOX_HOME=$T/home kbox rm deep
check rm_of_a_tree_deeper_than_it_counts_says_at_least eval 'status_is 0 && stderr_empty &&
	grep -qx "removed session deep (at least [0-9.]* [KM]iB)" stdout && [ ! -e home/sessions/deep ]'
KBOX_HOME=$T/home kbox rm no-such
check rm_of_a_session_that_does_not_exist_says_so fails_with 5 \
	"kbox rm: no session \"no-such\" (in $T/home)"
KBOX_HOME=$T/home kbox rm ../x
check rm_of_an_invalid_name_is_a_usage_error eval '[ "$rc" = 2 ] && stdout_empty &&
	grep -q "^kbox rm: invalid session name \"../x\"" stderr'
KBOX_HOME=$T/home kbox rm -s new new2
check rm_with_both_s_and_operands_is_a_usage_error fails_with 2 \
	"kbox rm: give the sessions either as -s NAME or as operands, not both"
KBOX_HOME=$T/home kbox prune new
check prune_takes_no_operands eval '[ "$rc" = 2 ] && stdout_empty && grep -q "^kbox prune: " stderr'
KBOX_HOME=$T/home kbox prune --older-than soon
check prune_with_a_bad_duration_is_a_usage_error fails_with 2 \
	'kbox prune: invalid --older-than "soon": expected a duration from 0 to 3650d, such as 12h, 7d or 30d'
# an age is not a timer: beyond the 24 days of the other durations
KBOX_HOME=$T/home kbox prune --older-than 90d --dry-run
check prune_older_than_takes_ages_beyond_24_days eval 'status_is 0 && stderr_empty &&
	stdout_is "would reclaim 0 bytes"'
KBOX_HOME=$T/home kbox prune --older-than 3651d
check prune_older_than_over_ten_years_is_a_usage_error fails_with 2 \
	'kbox prune: invalid --older-than "3651d": expected a duration from 0 to 3650d, such as 12h, 7d or 30d'

# The gateway backend's options are checked before a server is asked:
# one line, the value quoted, exit status 2, and no session left.  (No
# server listens at port 9 of 127.0.0.1: a value taken would fail later,
# with exit status 5.)
GW="--backend gateway --url http://127.0.0.1:9"
fresh
for v in 0 500ms 1h1s abc -1; do
	# shellcheck disable=SC2086 # options
	kbox start -s gw $GW --launch-timeout "$v"
	check "start_launch_timeout_${v}_is_refused_with_its_one_range" fails_with 2 \
		"kbox start: invalid --launch-timeout \"$v\": expected a duration from 1s to 1h, such as 30s, 2m or 1h"
done
check start_launch_timeout_refused_leaves_no_session eval '[ ! -e "$KBOX_HOME/sessions/gw" ]'
for p in 99999:http://127.0.0.1:99999 0:http://127.0.0.1:0 http:http://127.0.0.1:http/ \
	65536:"http://[::1]:65536"; do
	kbox start -s gw --backend gateway --url "${p#*:}"
	check "start_url_port_${p%%:*}_is_refused" fails_with 2 \
		"kbox start: invalid --url: expected http://HOST[:PORT][/PATH] or https://..., PORT from 1 to 65535, with no user, query or fragment (give the token with --token-file or --token-env)"
done
KBOX_BACKEND=gateway KBOX_GATEWAY_URL=http://127.0.0.1:99999 kbox exec -s gw 1
check exec_kbox_gateway_url_with_a_port_out_of_range_is_refused fails_with 2 \
	"kbox exec: KBOX_GATEWAY_URL is not a Jupyter server's URL: http:// or https:// HOST[:PORT][/PATH], PORT from 1 to 65535, with no user, query or fragment"
check start_url_refused_leaves_no_session eval '[ ! -e "$KBOX_HOME/sessions/gw" ]'
mkdir tokdir
# shellcheck disable=SC2086 # options
kbox start -s gw $GW --token-file tokdir
check start_token_file_that_is_a_directory_says_so fails_with 2 \
	'kbox start: invalid --token-file "tokdir": it is a directory, not a file holding the token'
check start_token_file_refused_leaves_no_session eval '[ ! -e "$KBOX_HOME/sessions/gw" ]'
printf 'not a certificate\n' >notpem
# shellcheck disable=SC2086 # options
kbox start -s gw $GW --ca-file notpem
check start_ca_file_without_a_pem_certificate_is_refused fails_with 2 \
	'kbox start: invalid --ca-file "notpem": no certificate in it (expected PEM: a line -----BEGIN CERTIFICATE----- and the certificate after it)'
# shellcheck disable=SC2086 # options
kbox start -s gw $GW --ca-file tokdir
check start_ca_file_that_is_a_directory_is_refused fails_with 2 \
	'kbox start: invalid --ca-file "tokdir": not a regular file'
mkfifo cafifo
# shellcheck disable=SC2086 # options
kbox start -s gw $GW --ca-file cafifo
check start_ca_file_that_is_a_fifo_is_refused_without_waiting_on_it fails_with 2 \
	'kbox start: invalid --ca-file "cafifo": not a regular file'
check start_ca_file_refused_leaves_no_session eval '[ ! -e "$KBOX_HOME/sessions/gw" ]'
# a stopped gateway session's status names its server and, once it has
# one, its directory there (where kbox put and get reach)
mkdir -m 700 home home/sessions home/sessions/gs home/sessions/gn
echo '{"name":"gs","kernel":"python3","backend":"gateway","gateway":"http://127.0.0.1:9/base"}' \
	>home/sessions/gs/session.json
echo kbox/gs-0123abcd >home/sessions/gs/gateway-dir
echo '{"name":"gn","kernel":"python3","backend":"gateway","gateway":"http://127.0.0.1:9"}' \
	>home/sessions/gn/session.json
KBOX_HOME=$T/home kbox status -s gs
check status_of_a_stopped_gateway_session_names_its_server_and_remote_dir eval 'status_is 5 &&
	stderr_empty && [ "$(cat stdout)" = "$(printf "%-18s %s\n" name: gs state: stopped \
		backend: gateway kernel: python3 server: http://127.0.0.1:9/base \
		remote_dir: kbox/gs-0123abcd dir: "$T/home/sessions/gs")" ]'
KBOX_HOME=$T/home kbox status -s gs --format ndjson
check status_json_of_a_stopped_gateway_session_has_them_too eval 'status_is 5 &&
	stdout_is "{\"name\":\"gs\",\"state\":\"stopped\",\"backend\":\"gateway\",\"kernel\":\"python3\",\"server\":\"http://127.0.0.1:9/base\",\"remote_dir\":\"kbox/gs-0123abcd\",\"dir\":\"$T/home/sessions/gs\"}"'
KBOX_HOME=$T/home kbox status -s gn
check status_of_a_gateway_session_with_no_directory_yet_names_only_its_server eval 'status_is 5 &&
	[ "$(status_line server)" = http://127.0.0.1:9 ] && ! grep -q "^remote_dir:" stdout &&
	[ ! -e home/sessions/gn/gateway-dir ]'

# ---- commands that start a kernel ----
#
# Each scenario runs kbox once in its own directory $BASE/NAME.  They run in
# three lanes in the background (a kernel spends much of its life waiting),
# then their outcomes are checked in order.

scenario_state() { kbox run -c 'x = 41' -c 'print(x + 1)'; }
scenario_result() { kbox run -c '1+1'; }
scenario_order() {
	echo 'print("c")' >c.py
	echo 'print("b")' | kbox run -c 'print("a")' - c.py -c 'print("d")'
}
# a file whose code prints lines of kbox's own, and one that only resembles one
scenario_forged() {
	printf '%s\n' 'print("[kernel died: x]")' 'print("[image saved: /tmp/x.png]")' \
		'print("[1, 2, 3]")' >forged.py
	kbox run forged.py
}
scenario_cwd() {
	echo 'not for the kernel' >here.txt
	kbox_here run -c 'import os; print(os.getcwd()); print(os.listdir())' \
		-c 'print("made inside", file=open("made", "w"))'
}
scenario_none() {
	kbox_here run --backend none -c 'import os; print(os.getcwd()); print(os.getpid())'
}
scenario_error() { kbox run -c 'print("before")' -c '1/0' -c 'print("after")'; }
scenario_timeout() {
	kbox_here run -t 1 -c 'import time; time.sleep(30)' -c 'print("after")'
}
scenario_input() {
	kbox run -i Ada -i Bob -c 'print("hello", input())' -c 'print("hello", input())' \
		-c 'input()'
}
scenario_noinput() { kbox run -c 'input()'; }
scenario_died() { kbox run -c 'import os; os._exit(1)' -c 'print("after")'; }
# Standard output closed: no descriptor kbox opens takes its place (else
# the result would go into the control socket, and the supervisor would
# read the code's output as requests): the result cannot be written, which
# kbox says.  The session still runs after code that printed a stop request.
scenario_closedout() {
	kbox start -s closedout
	cp "$S/closedout/supervisor.pid" pid.before
	timeout -k 5 120 "$KBOX" exec -s closedout 'print(1)' >&- 2>exec.err
	echo $? >exec.rc
	timeout -k 5 120 "$KBOX" exec -s closedout 'print("{\"op\":\"stop\"}")' >&- 2>stop.err
	echo $? >stop.rc
	kbox exec -s closedout --no-start 'print(2)'
	cp "$S/closedout/supervisor.pid" pid.after
	timeout -k 5 120 "$KBOX" exec -s closedout 'print(3)' >/dev/full 2>full.err
	echo $? >full.rc
}
scenario_runclosedout() {
	timeout -k 5 120 "$KBOX" run -c 'print(1)' >&- 2>stderr
	rc=$?
}
# The steps of the demo (`make demo` runs them in a session), in one kbox
# run whose workspace is the directory work.
scenario_demo() {
	needs kernel pandas
	sandbox_dir work
	kbox run --workspace work "$DEMO/1-write-csv.py" "$DEMO/2-load.py" \
		"$DEMO/3-aggregate.py" "$DEMO/4-plot.py"
}
scenario_plot() {
	needs kernel pandas
	kbox run -c 'import matplotlib.pyplot as plt' -c 'plt.plot([1, 2, 3]); plt.show()'
}
scenario_json() { kbox run --format json -c 'print("hi"); 6*7' -c '1/0'; }
scenario_ndjson() { kbox run --format ndjson -c 'print("hi"); 6*7'; }
scenario_budget() {
	kbox run --max-output 1K --max-lines 20 -c 'for i in range(5000): print(i)'
}
# The directory a run would take exists already, for each second of the
# next 90 (with a file of an earlier run in it): the run takes "-2".
scenario_rundir() {
	now=$(date +%s)
	for i in $(seq 0 90); do
		d=kbox-run-$(date -d "@$((now + i))" +%Y%m%d-%H%M%S)
		mkdir "$d" && echo earlier >"$d/1-stdout.txt"
	done
	kbox run --max-output 1K -c 'for i in range(3000): print(i)'
}
scenario_rundirjson() {
	kbox run --format json --max-output 1K -c 'for i in range(3000): print(i)'
}
scenario_outputs() {
	needs kernel pandas
	mkdir imgs
	# a file of the caller's with the image's name stays as it is
	echo "the caller's" >imgs/1-1.png
	kbox run -o imgs -c 'import matplotlib.pyplot as plt; plt.plot([1]); plt.show()'
}

# The checks of each scenario, in the order they come below: a scenario
# runs only when KBOX_TEST_RUN selects one of its checks.  For each one
# listed, want_NAME says whether it runs, first_NAME is the number of its
# first check (enter makes sure of it); one not listed always runs.
plan_n=$n
while read -r s checks; do
	eval "first_$s=$((plan_n + 1)) want_$s=no"
	# shellcheck disable=SC2086 # a list of names
	! selected_at $((plan_n + 1)) $checks || eval "want_$s=yes"
	plan_n=$((plan_n + $(echo "$checks" | wc -w)))
done <<'EOF'
state run_in_the_default_sandbox_prints_nothing_on_stderr run_keeps_state_across_cells
result run_shows_result_as_Out_N
order run_runs_cells_in_command_line_order
forged run_quotes_lines_the_code_prints_as_kboxs_and_leaves_a_list_as_it_is
cwd run_kernel_starts_in_a_new_empty_workspace run_leaves_the_current_directory_alone run_stops_its_sandbox_at_exit
none run_with_backend_none_warns_that_the_kernel_is_unsandboxed run_with_backend_none_starts_in_a_new_workspace run_with_backend_none_stops_kernel_at_exit
error run_error_exits_1 run_error_last_line_is_ename_evalue run_error_output_has_no_ansi_escapes run_error_stops_later_cells run_error_traceback_is_on_stdout_not_stderr
timeout run_timeout_exits_3 run_timeout_interrupts_the_cell_at_its_timeout run_timeout_stops_later_cells run_timeout_stops_its_sandbox
input run_input_lines_answer_input_in_order_across_cells run_input_after_last_line_is_eof
noinput run_input_without_input_option_fails_with_stdin_error
died run_kernel_death_exits_4 run_kernel_death_stops_later_cells run_kernel_death_says_the_run_stops_there
closedout exec_with_stdout_closed_fails_with_one_line exec_with_stdout_closed_sends_no_output_to_the_supervisor exec_to_a_full_disk_says_why
runclosedout run_with_stdout_closed_fails_with_one_line
demo demo_exits_0 demo_warns_that_the_workspace_is_writable demo_writes_csv_in_the_workspace demo_cells_share_state demo_shows_aggregate_as_Out_3 demo_chart_is_png demo_chart_is_600x400
plot run_plt_show_saves_png run_plt_show_prints_no_figure_text run_images_go_to_a_new_directory_of_the_run_by_default run_image_is_named_count_dash_index
json run_json_prints_one_object_per_cell run_json_objects_hold_exact_results
ndjson run_ndjson_streams_events_then_end
budget run_max_output_keeps_head_and_tail run_max_output_marker_names_spill_file run_max_output_takes_a_K_suffix_as_1024_bytes run_max_output_spill_file_is_complete run_max_output_spill_file_is_in_a_new_directory_named_last
rundir run_never_writes_into_a_directory_that_exists run_takes_the_next_free_name_for_its_directory run_writes_into_the_directory_it_named
rundirjson run_json_names_its_directory_on_stderr_and_writes_only_json_on_stdout
outputs run_outputs_option_sets_image_dir run_outputs_option_makes_no_directory_and_names_none run_never_replaces_a_file_in_the_outputs_dir
EOF

# lane NAME...: run the scenarios NAME... one after the other (one whose
# checks are not selected leaves "-" for its status).
lane() {
	for s in "$@"; do
		mkdir -m 711 "$BASE/$s" && cd "$BASE/$s" || exit 1
		if eval "[ \"\${want_$s-yes}\" = no ]"; then
			echo - >.status
			continue
		fi
		needs kernel
		"scenario_$s"
		echo "$rc" >.status
	done
}

# enter NAME: go to scenario NAME's directory and take its $rc.  Its
# first check must be the one the list above says (else the list is
# behind the checks, and would select the wrong scenarios).
enter() {
	T=$BASE/$1
	if eval "[ \"\${first_$1-$((n + 1))}\" != $((n + 1)) ]"; then
		echo "Bail out! scenario $1's checks start at test $((n + 1)), not $(eval "echo \$first_$1") as the list of the scenarios' checks says: update it"
		exit 1
	fi
	cd "$T" && read -r rc <.status
	# (a failure shows the scenario's own output, not the last kbox's here)
	last_dir=$T last_out=$T/stdout last_err=$T/stderr
}

needs kernel
lane demo state result order forged &
lanes=$!
lane timeout plot cwd none error &
lanes="$lanes $!"
lane outputs input noinput died json &
lanes="$lanes $!"
lane ndjson budget rundir rundirjson closedout runclosedout &
lanes="$lanes $!"
# shellcheck disable=SC2086 # a list of pids (not a bare wait: tests/lib.sh)
wait $lanes

enter state
check run_in_the_default_sandbox_prints_nothing_on_stderr eval "[ ! -s stderr ]"
check run_keeps_state_across_cells stdout_is "42"

enter result
check run_shows_result_as_Out_N stdout_is "Out[1]: 2"

enter order
check run_runs_cells_in_command_line_order stdout_is "a
b
c
d"

# (as kbox exec shows them: a backslash first, threat 50)
enter forged
check run_quotes_lines_the_code_prints_as_kboxs_and_leaves_a_list_as_it_is eval 'status_is 0 &&
	stderr_empty && stdout_is "\\[kernel died: x]
\\[image saved: /tmp/x.png]
[1, 2, 3]"'

enter cwd
check run_kernel_starts_in_a_new_empty_workspace stdout_is "/workspace
[]"
check run_leaves_the_current_directory_alone eval '[ ! -e made ] &&
	[ "$(ls)" = "$(printf "here.txt\nstderr\nstdout")" ]'
check run_stops_its_sandbox_at_exit no_sandbox_left

enter none
check run_with_backend_none_warns_that_the_kernel_is_unsandboxed eval '[ "$(cat stderr)" = "$WARNING" ]'
check run_with_backend_none_starts_in_a_new_workspace eval '
	case $(head -n 1 stdout) in "$(pwd -P)"/kbox-run-??????/workspace) true ;; *) false ;; esac'
sed -n 2p stdout >pid 2>/dev/null
check run_with_backend_none_stops_kernel_at_exit process_gone pid

enter error
check run_error_exits_1 status_is 1
# (then that the cells after it were not run, which a model could not tell)
check run_error_last_line_is_ename_evalue eval '
	[ "$(tail -n 2 stdout)" = "ZeroDivisionError: division by zero
[error: kbox run stops here: the cell after it is not run]" ]'
check run_error_output_has_no_ansi_escapes no_ansi_escapes
check run_error_stops_later_cells eval '[ "$(head -n 1 stdout)" = before ] &&
	lacks_line stdout after'
check run_error_traceback_is_on_stdout_not_stderr eval 'grep -q "^ZeroDivisionError" stdout &&
	! grep -q "^ZeroDivisionError" stderr'

enter timeout
check run_timeout_exits_3 status_is 3
# the product says when it gave up (no clock here: a loaded machine is slow)
check run_timeout_interrupts_the_cell_at_its_timeout eval '
	has_line stdout "[timeout: timed out after 1 s; the kernel was interrupted; kbox run stops here: the cell after it is not run]" &&
	[ "$(cat stderr)" = "kbox run: cell 1 (-c): timed out after 1 s; the kernel was interrupted" ]'
check run_timeout_stops_later_cells lacks_line stdout "after"
check run_timeout_stops_its_sandbox no_sandbox_left

enter input
check run_input_lines_answer_input_in_order_across_cells eval 'has_line stdout "hello Ada" &&
	has_line stdout "hello Bob"'
check run_input_after_last_line_is_eof eval '[ "$rc" = 1 ] &&
	tail -n 1 stdout | grep -q "^EOFError"'

enter noinput
check run_input_without_input_option_fails_with_stdin_error eval '[ "$rc" = 1 ] &&
	tail -n 1 stdout | grep -q "^StdinNotImplementedError: "'

enter died
check run_kernel_death_exits_4 status_is 4
check run_kernel_death_stops_later_cells lacks_line stdout "after"
check run_kernel_death_says_the_run_stops_there eval '
	last_line_is stdout "[kernel died: the kernel exited with status 1; kbox run stops here: the cell after it is not run]" &&
	[ "$(cat stderr)" = "kbox run: cell 1 (-c): the kernel exited with status 1" ]'

enter closedout
check exec_with_stdout_closed_fails_with_one_line eval '[ "$(cat exec.rc)" = 5 ] &&
	[ "$(cat exec.err)" = "kbox exec: cannot write standard output: Bad file descriptor" ]'
check exec_with_stdout_closed_sends_no_output_to_the_supervisor eval '[ "$(cat stop.rc)" = 5 ] &&
	[ "$rc" = 0 ] && [ "$(cat stdout)" = 2 ] && cmp -s pid.before pid.after &&
	! logged closedout stop'
check exec_to_a_full_disk_says_why eval '[ "$(cat full.rc)" = 5 ] &&
	[ "$(cat full.err)" = "kbox exec: cannot write standard output: No space left on device" ]'
kbox stop -s closedout

enter runclosedout
check run_with_stdout_closed_fails_with_one_line eval '[ "$rc" = 5 ] &&
	[ "$(cat stderr)" = "kbox run: cannot write standard output: Bad file descriptor" ]'

# (the import of pandas is slow: only when a scenario below runs)
for s in demo plot json ndjson budget rundir rundirjson outputs; do
	if eval "[ \"\${want_$s-yes}\" = yes ]"; then
		needs kernel pandas
		break
	fi
done
enter demo
check demo_exits_0 status_is 0
check demo_warns_that_the_workspace_is_writable eval '[ "$(cat stderr)" = "kbox run: warning: --workspace work: the code can change and delete every file in $(pwd -P)/work" ]'
check demo_writes_csv_in_the_workspace eval '[ "$(wc -l <work/sales.csv)" -eq 49 ] &&
	has_line stdout "wrote sales.csv with 48 rows"'
check demo_cells_share_state eval 'has_line stdout "(48, 5)" &&
	has_line stdout "total revenue: 52883.76" && has_line stdout "saved chart.png"'
check demo_shows_aggregate_as_Out_3 demo_aggregate_is_shown
check demo_chart_is_png is_png work/chart.png
check demo_chart_is_600x400 png_size_is work/chart.png 600 400

enter plot
check run_plt_show_saves_png image_saved
check run_plt_show_prints_no_figure_text eval '! grep -q "<Figure" stdout'
check run_images_go_to_a_new_directory_of_the_run_by_default eval 'run_dir_is_new_and_named_for_now &&
	image_saved_in "$T/$(run_dir)"'
check run_image_is_named_count_dash_index image_named 2-1.png

enter json
check run_json_prints_one_object_per_cell eval '[ "$rc" = 1 ] && [ "$(wc -l <stdout)" -eq 2 ]'
check run_json_objects_hold_exact_results "$PY" -c '
import json
a, b = [json.loads(l) for l in open("stdout")]
assert a["schema"] == "kbox.result/2" and a["status"] == "ok", a
assert a["stdout"]["text"] == "hi\n" and a["value"]["text"]["text"] == "42", a
assert a["execution_count"] == 1 and a["error"] is None, a
assert b["status"] == "error" and b["error"]["ename"] == "ZeroDivisionError", b
assert b["error"]["evalue"] == "division by zero", b
assert "\x1b" not in b["error"]["traceback"]["text"], b
'

enter ndjson
check run_ndjson_streams_events_then_end "$PY" -c '
import json
ev = [json.loads(l) for l in open("stdout")]
kinds = [e["event"] for e in ev]
assert kinds[0] == "stream" and ev[0]["text"] == "hi\n", ev
assert "result" in kinds and kinds[-1] == "end", kinds
assert ev[-1]["status"] == "ok" and ev[-1]["value"]["text"]["text"] == "42", ev[-1]
'

enter budget
check run_max_output_keeps_head_and_tail eval 'has_line stdout 0 && has_line stdout 4999 &&
	lacks_line stdout 2500 && [ "$(wc -l <stdout)" -le 22 ]'
check run_max_output_marker_names_spill_file eval 'grep -q "^\[\.\.\. [0-9]* bytes in [0-9]* lines left out; the complete text is in .*/1-stdout.txt \.\.\.\]$" stdout'
check run_max_output_takes_a_K_suffix_as_1024_bytes "$PY" -c '
import json, re
lines = open("stdout").readlines()
assert lines[-1].startswith("[files saved in: "), lines[-1]
text = "".join(lines[:-1])
head, tail = text.split("[... ")[0], text.split(" ...]\n")[1]
m = re.search(r"\[\.\.\. (\d+) bytes in", text)
# head and tail together hold at most 1024 bytes, and what was left out makes up the rest
assert len(head.encode()) + len(tail.encode()) <= 1024, (len(head), len(tail))
assert len(head.encode()) + len(tail.encode()) + int(m.group(1)) == 23890, m.group(1)
'
check run_max_output_spill_file_is_complete "$PY" -c '
import glob
assert open(glob.glob("kbox-run-*/1-stdout.txt")[0]).read() == "".join("%d\n" % i for i in range(5000))
'
check run_max_output_spill_file_is_in_a_new_directory_named_last run_dir_is_new_and_named_for_now

enter rundir
# earlier_runs_untouched: each directory made before the run still holds
# just its file, as it was.
earlier_runs_untouched() {
	for d in kbox-run-????????-??????; do
		[ "$(ls "$d")" = 1-stdout.txt ] && [ "$(cat "$d/1-stdout.txt")" = earlier ] || return 1
	done
}
check run_never_writes_into_a_directory_that_exists earlier_runs_untouched
check run_takes_the_next_free_name_for_its_directory eval 'd=$(run_dir) && case $d in
	kbox-run-????????-??????-2) [ -d "${d%-2}" ] ;;
	*) false ;; esac'
check run_writes_into_the_directory_it_named "$PY" -c '
import sys
assert open(sys.argv[1] + "/1-stdout.txt").read() == "".join("%d\n" % i for i in range(3000))
' "$(run_dir)"

enter rundirjson
check run_json_names_its_directory_on_stderr_and_writes_only_json_on_stdout "$PY" -c '
import json, os, re, sys
lines = open("stdout").readlines()
assert len(lines) == 1, lines
path = json.loads(lines[0])["stdout"]["spill_path"]
err = open("stderr").read()
m = re.fullmatch(r"kbox run: files saved in (.*/kbox-run-\d{8}-\d{6})/\n", err)
assert m and m.group(1) == os.path.realpath(".") + "/" + os.path.basename(m.group(1)), err
assert path == m.group(1) + "/1-stdout.txt" and os.path.isfile(path), path
'

enter outputs
check run_outputs_option_sets_image_dir eval 'image_saved && image_saved_in imgs'
check run_outputs_option_makes_no_directory_and_names_none eval '
	[ -z "$(ls -d kbox-run-* 2>/dev/null)" ] && ! grep -q "^\[files saved in: " stdout'
check run_never_replaces_a_file_in_the_outputs_dir eval '
	[ "$(cat imgs/1-1.png)" = "the caller'"'"'s" ] && [ "$(image_path)" = "$(pwd -P)/imgs/1-1-2.png" ]'

# A current directory kbox run cannot write in (here one that was
# removed; read-only, or another user's, alike): its images and long
# texts go to a new private directory in $TMPDIR instead, named at the
# end, and the run says why at its start
setup_for run_in_a_directory_it_cannot_write_saves_its_files_in_tmpdir \
	run_from_a_removed_directory_says_why_its_files_go_to_tmpdir \
	run_from_a_read_only_directory_says_why_its_files_go_to_tmpdir
fresh
mkdir tmpd gone
if [ -z "$SKIPPING" ] && cd gone && rmdir "$T/gone"; then
	TMPDIR=$T/tmpd timeout -k 5 120 "$KBOX" run \
		-c 'import matplotlib.pyplot as plt; plt.plot([1]); plt.show()' >"$T/stdout" 2>"$T/stderr"
	rc=$?
fi
cd "$T" || exit 1
check run_in_a_directory_it_cannot_write_saves_its_files_in_tmpdir eval 'status_is 0 &&
	d=$(ls -d tmpd/kbox-run-*) && [ -f "$d/1-1.png" ] && [ "$(stat -c %a "$d")" = 700 ] &&
	last_line_is stdout "[files saved in: $(pwd -P)/$d/]"'
# went_to_tmpdir WHY FILE: FILE (kbox run's stderr) is the line that says
# WHY, and where in $T/tmpd the files go
went_to_tmpdir() {
	grep -qx "kbox run: $1: images and long texts go to $(pwd -P)/tmpd/kbox-run-[0-9]*-[0-9]*-[A-Za-z0-9]* instead (removed at the end if none is saved)" "$2" ||
		{ sed "s/^/#   /" "$2"; return 1; }
}
check run_from_a_removed_directory_says_why_its_files_go_to_tmpdir \
	went_to_tmpdir "the current directory was removed" stderr
# (read-only: a read-only mount under root, whom no mode stops; mode 555
# for an ordinary user)
mkdir ro
if [ -z "$SKIPPING" ]; then
	if [ "$(id -u)" = 0 ]; then
		mount --bind ro ro && mount -o remount,bind,ro ro
		why_ro="the current directory cannot be written (Read-only file system)"
	else
		chmod 555 ro
		why_ro="the current directory cannot be written (Permission denied)"
	fi
	(cd ro && TMPDIR=$T/tmpd timeout -k 5 120 "$KBOX" run -c 'print(5)' >"$T/ro.out" 2>"$T/ro.err")
	[ "$(id -u)" != 0 ] || umount ro
fi
check run_from_a_read_only_directory_says_why_its_files_go_to_tmpdir eval '
	[ "$(cat ro.out)" = 5 ] && went_to_tmpdir "$why_ro" ro.err'
setup_for

# A figure that is the cell's value is shown twice by IPython (the value,
# then the inline backend's display): one file, said once
needs kernel pandas
setup_for a_figure_as_the_value_is_one_file_said_once
fresh
kbox run -o . -c 'import matplotlib.pyplot as plt
plt.plot([1, 2, 3])
plt.gcf()'
check a_figure_as_the_value_is_one_file_said_once eval 'status_is 0 && image_saved &&
	[ "$(ls ./*.png)" = ./1-1.png ] && has_line stdout "Out[1]: <Figure size 640x480 with 1 Axes>"'
setup_for

# kbox prune --older-than and a running session: of its outputs, the files
# last changed before the duration go (two long texts, made 2 hours old),
# a newer one stays, and so does the session, its kernel's state and all
fresh
needs kernel
setup_for prune_older_than_removes_only_the_old_outputs_of_a_running_session \
	prune_older_than_leaves_the_session_running
kbox start -s po
kbox exec -s po --max-output 1K 'x = 41
for i in range(3000): print(i)'
kbox exec -s po --max-output 1K 'for i in range(3000): print(i)'
if [ -z "$SKIPPING" ]; then
	# (their size as kbox counts it, in blocks, and says it under 1 MiB)
	stat -c %b "$S"/po/outputs/* | awk '{ n += $1 * 512 }
		END { if (n % 1024) printf "%.1f KiB\n", n / 1024; else printf "%d KiB\n", n / 1024 }' >old.size
	touch -d '2 hours ago' "$S"/po/outputs/*
fi
kbox exec -s po --max-output 1K 'for i in range(3000): print(i)'
sed -n 's|^\[\.\.\. .* the complete text is in '"$S"'/po/outputs/\(.*\) \.\.\.\]$|\1|p' stdout >new.file 2>/dev/null
kbox prune --older-than 1h
check prune_older_than_removes_only_the_old_outputs_of_a_running_session eval 'status_is 0 &&
	stderr_empty && stdout_is "removed 2 files of session po'"'"'s outputs ($(cat old.size))
reclaimed $(cat old.size)" && [ -s new.file ] && [ "$(ls "$S/po/outputs")" = "$(cat new.file)" ]'
kbox exec -s po --no-start 'print(x + 1)'
check prune_older_than_leaves_the_session_running eval 'status_is 0 && stdout_is 42'
"$KBOX" rm -f -s po >/dev/null 2>&1
setup_for

# ---- LeakSanitizer's check, in an AddressSanitizer build ----

# KBOX_LEAK_CHECK=long-lived (lib.sh exports it there) skips the check of
# a one-shot command and keeps it for kbox mcp; unset, every command is
# checked.  leak_checked ASSIGNMENT ARGS...: with ASSIGNMENT in its
# environment, kbox ARGS ran LeakSanitizer's exit check (at verbosity 2
# it says "Attached to thread" as it stops the process's threads).
leak_checked() {
	lc_env=$1
	shift
	env "$lc_env" ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=verbosity=2 \
		timeout -k 5 60 "$KBOX" "$@" >/dev/null 2>"$W/lsan.err" </dev/null
	grep -q "Attached to thread" "$W/lsan.err"
}
if [ "$asan" = yes ]; then
	check leak_check_skips_one_shot_commands_when_long_lived eval '
		! leak_checked KBOX_LEAK_CHECK=long-lived version &&
		! leak_checked KBOX_LEAK_CHECK=long-lived exec --no-such-option'
	check leak_check_keeps_kbox_mcp_when_long_lived leak_checked KBOX_LEAK_CHECK=long-lived mcp
	check leak_check_judges_every_command_by_default eval '
		leak_checked KBOX_LEAK_CHECK= version && leak_checked KBOX_LEAK_CHECK= exec --no-such-option'
else
	for t in skips_one_shot_commands_when_long_lived keeps_kbox_mcp_when_long_lived \
		judges_every_command_by_default; do
		skip "leak_check_$t" "not an AddressSanitizer build"
	done
fi

tests_done
