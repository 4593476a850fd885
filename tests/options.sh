#!/bin/sh
# tests/options.sh — every command's options, as its table declares them:
# `kbox CMD --help` shows each option the parser takes, and its manual page
# documents the same ones; a bad option, an option without its argument and
# a flag given one are refused in one line each, in one format.  TAP.
#
# The options of a command are read from the "options:" section of its
# --help; those of its page, man/kbox-CMD.1, from the mdoc source: the Fl
# arguments of the SYNOPSIS and of the tags of the list that follows "The
# options are as follows:".  No command here gets as far as a session.
#
# Environment (set by `make check`): top_srcdir, top_builddir.
# shellcheck disable=SC2016 # eval strings expand later, on purpose
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"
fresh

# fails_as_json_with STATUS KIND TEXT: as fails_with, and, --json having
# come first, the failure object on stdout (kbox(1), EXIT STATUS).
fails_as_json_with() {
	[ "$rc" = "$1" ] && printf '%s\n' "$3" | cmp -s - stderr &&
		"$PY" -c '
import json, sys
m = sys.argv[2].split(": ", 1)[1]
sys.exit(json.load(open("stdout")) != {"schema": "kbox.result/2", "status": "failed", "error": {"kind": sys.argv[1], "message": m}})' "$2" "$3"
}

# ---- reading options ----

# help_rows FILE: the options section of a --help in FILE, one option a
# line: "SHORT LONG ARG", SHORT "-" when there is none, ARG "arg" when the
# option takes an argument, else "none".
help_rows() {
	awk '
	/^options:$/ { on = 1; next }
	on && /^$/ { exit }
	on && /^ +-/ {
		s = $0
		sub(/^ +/, "", s)
		i = index(s, "  ")
		label = i ? substr(s, 1, i - 1) : s
		k = split(label, w, " ")
		if (w[1] ~ /^-[A-Za-z],$/) {
			short = substr(w[1], 1, 2)
			long = w[2]
			arg = k > 2 ? "arg" : "none"
		} else {
			short = "-"
			long = w[1]
			arg = k > 1 ? "arg" : "none"
		}
		print short, long, arg
	}' "$1"
}

# help_options FILE: the options (-x, --long) of the --help in FILE, one a line.
help_options() {
	help_rows "$1" | awk '$1 != "-" { print $1 } { print $2 }' | sort -u
}

# page_options PAGE WHERE: the options (-x, --long) of the mdoc page PAGE
# in its SYNOPSIS (WHERE "synopsis") or its option list ("list"), one a line.
page_options() {
	awk -v want="$2" '
	function flags(i, fl, w) {
		fl = 0
		for (i = 1; i <= NF; i++) {
			w = $i
			if (w == "Fl" || w == ".Fl") {
				fl = 1
			} else if (w ~ /^\.?[A-Z][a-z][a-z]?$/) {
				fl = 0 # another macro
			} else if (w !~ /^[|,;:()]$/ && fl && w ~ /^-?[A-Za-z][A-Za-z0-9-]*$/) {
				print "-" w
			}
		}
	}
	/^\.Sh / { sec = $2 }
	want == "synopsis" && sec == "SYNOPSIS" { flags() }
	want == "list" && /The options are as follows/ { list = 1; next }
	want == "list" && list && /^\.Bl/ { depth++; next }
	want == "list" && list && /^\.El/ { if (--depth == 0) list = 0; next }
	want == "list" && list && depth == 1 && /^\.It / { flags() }
	' "$1" | sort -u
}

# missing_from WORDS_FILE LIST_FILE WHAT: each line of WORDS_FILE that
# LIST_FILE lacks, as a line "OPTION WHAT" added to $why; true when there
# is none (and $why was empty).
missing_from() {
	while read -r opt; do
		grep -qxF -- "$opt" "$2" || why="${why:+$why
}$opt $3"
	done <"$1"
	[ -z "$why" ]
}

# wrong_refused CMD: each option of CMD's table (./rows), given wrong, is
# refused in one line; else each one that is not, in $why.
# refused_as CMD STATUS TEXT: fails_with STATUS TEXT, but for kbox
# tool-schema, whose errors are JSON on standard output (its output is
# JSON in every format): that failure there, TEXT on standard error.
refused_as() {
	if [ "$1" = tool-schema ]; then
		[ "$rc" = "$2" ] && [ "$(wc -l <stderr)" -eq 1 ] && stderr_is "$3" &&
			grep -q '^{"schema":"kbox.result/2","status":"failed",' stdout
	else
		fails_with "$2" "$3"
	fi
}

wrong_refused() {
	: >wrong
	while read -r short long arg; do
		if [ "$arg" = arg ]; then
			for opt in "$long" "$short"; do
				[ "$opt" = - ] && continue
				kbox "$1" "$opt"
				refused_as "$1" 2 "kbox $1: option $opt needs an argument (see kbox $1 --help)" ||
					echo "kbox $1 $opt: exit status $rc: $(head -n 2 stderr)" >>wrong
			done
		else
			kbox "$1" "$long=x"
			refused_as "$1" 2 "kbox $1: option $long takes no argument (see kbox $1 --help)" ||
				echo "kbox $1 $long=x: exit status $rc: $(head -n 2 stderr)" >>wrong
		fi
	done <rows
	why=$(cat wrong)
	[ ! -s wrong ]
}

# formats_alike: every --format is checked the same way, and --json is
# --format json in each help; else what is not, in $why.
formats_alike() {
	: >wrong.format
	for cmd in complete doctor inspect kernelspecs logs ls status version; do
		kbox "$cmd" --format xml x
		fails_with 2 "kbox $cmd: invalid --format \"xml\": expected text, json or ndjson" ||
			echo "kbox $cmd --format xml: exit status $rc: $(head -n 2 stderr)" >>wrong.format
		grep -q -- '^      --json  *the same as --format json$\|^  -j, --json  *the same as --format json$' \
			"help.$cmd" || echo "kbox $cmd --help has no --json alias" >>wrong.format
	done
	why=$(cat wrong.format)
	[ ! -s wrong.format ]
}

# ---- the tests ----

"$KBOX" --help | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p' >commands
check kbox_help_lists_the_commands [ -s commands ]

# shellcheck disable=SC2013 # a command is one word
for cmd in $(cat commands); do
	page=$top_srcdir/man/kbox-$cmd.1

	kbox "$cmd" --help
	cp stdout "help.$cmd"
	check "${cmd}_help_exits_0_with_usage_options_and_example" eval '
		[ "$rc" = 0 ] && [ ! -s stderr ] &&
		head -n 1 stdout | grep -q "^usage: kbox $cmd\( \|\$\)" &&
		grep -qx "options:" stdout && grep -qx "example:" stdout'

	kbox "$cmd" -h
	check "${cmd}_dash_h_prints_the_same_help" eval '[ "$rc" = 0 ] && cmp -s stdout "help.$cmd"'

	# the example runs this command, with options its help shows
	sed -n '/^example:$/{n;s/^  //p;}' "help.$cmd" >example
	help_options "help.$cmd" >help.opts
	check "${cmd}_help_example_uses_its_options" eval '
		grep -q "^kbox $cmd\( \|\$\)" example &&
		grep -oE -- "(^| )--?[[:alpha:]][[:alnum:]-]*" example | tr -d " " |
			sort -u >example.opts &&
		missing_from example.opts help.opts "is in the example, not among the options of --help"'

	# every option the parser takes is documented in the page's list
	if [ -f "$page" ]; then
		page_options "$page" list >page.list
		page_options "$page" synopsis >page.synopsis
	else
		: >page.list
		: >page.synopsis
	fi
	check "${cmd}_help_options_are_in_its_page" \
		missing_from help.opts page.list \
		"is in 'kbox $cmd --help', not in the options of ${page##*/}"
	sort -u page.list page.synopsis >page.opts
	check "${cmd}_page_options_are_in_its_help" \
		missing_from page.opts help.opts "is in ${page##*/}, not in 'kbox $cmd --help'"

	kbox "$cmd" --bogus
	check "${cmd}_unknown_option_exits_2_in_one_line" \
		refused_as "$cmd" 2 "kbox $cmd: unknown option --bogus (see kbox $cmd --help)"

	# each option of the table, given wrong, is refused in one line
	help_rows "help.$cmd" >rows
	check "${cmd}_options_given_wrong_are_refused_in_one_line" wrong_refused "$cmd"

	# kbox help CMD prints the command's own help, which ends with where
	# its page is
	kbox help "$cmd"
	check "help_${cmd}_prints_its_help_and_names_its_page" eval \
		'[ "$rc" = 0 ] && [ ! -s stderr ] && cmp -s stdout "help.$cmd" &&
		[ "$(tail -n 1 stdout)" = "full reference: man kbox-$cmd (in a source tree: man ./man/kbox-$cmd.1)" ]'
done

# kbox help alone lists the commands, as kbox --help
"$KBOX" --help >expected
kbox help
check help_alone_prints_the_usage_and_the_commands eval \
	'[ "$rc" = 0 ] && [ ! -s stderr ] && cmp -s stdout expected'

# kbox help runs no other program: no man(1) on PATH changes nothing
env PATH=/nonexistent "$KBOX" help exec >stdout 2>stderr
rc=$?
check help_needs_no_man eval '[ "$rc" = 0 ] && cmp -s stdout help.exec'

kbox help nosuch
check help_of_an_unknown_command_exits_2 fails_with 2 \
	'kbox help: no command "nosuch" (see kbox --help)'

# --json is --format json, and every --format is checked the same way
check format_is_checked_alike_and_json_is_its_alias formats_alike
# and kbox(1)'s list of the commands that take it is the CLI's: those
# whose --help has -j, --json, and no other
man_json=$(sed -n '/^Every command that prints data$/,/^takes$/p' "$top_srcdir/man/kbox.1" |
	sed -n 's/^\.Cm \([a-z-]*\).*/\1/p' | sort | tr '\n' ' ')
# shellcheck disable=SC2013 # a command is one word
cli_json=$(for cmd in $(cat commands); do
	grep -q -- '^  -j, --json ' "help.$cmd" && echo "$cmd"
done | sort | tr '\n' ' ')
why="kbox(1): $man_json; the CLI: $cli_json"
check the_commands_kbox_1_says_take_json_are_those_that_do eval '
	[ -n "$cli_json" ] && [ "$man_json" = "$cli_json" ]'

# kernelspec/README.md says what is true: no kernelspec there yet, and the
# commands it points at are there with the option it gives them
why=
check kernelspec_readme_says_what_is_true eval '
	grep -q "^    kbox kernel --connection-file {connection_file}\$" "$top_srcdir/kernelspec/README.md" &&
	grep -q "\"@bindir@/kbox\",\$" "$top_srcdir/kernelspec/kbox-python3/kernel.json.in" &&
	grep -q "^    kbox kernelspec install --user -b docker -- --memory 4G --workspace ro\$" "$top_srcdir/kernelspec/README.md" &&
	grep -qx kernel commands && grep -qx kernelspec commands &&
	grep -q -- "^      --workspace cwd|ro|empty " help.kernel'

kbox exec -s x --timeout=abc 'print(1)'
check long_option_takes_its_argument_after_equals fails_with 2 \
	'kbox exec: invalid --timeout "abc": expected a duration from 0 to 24d, such as 30, 1.5s, 500ms, 2m or 1h'

kbox exec -s x --time abc 'print(1)'
check long_option_may_be_a_prefix_of_one_option fails_with 2 \
	'kbox exec: invalid --timeout "abc": expected a duration from 0 to 24d, such as 30, 1.5s, 500ms, 2m or 1h'

kbox exec -s x --ma 1000 'print(1)'
check prefix_of_two_options_is_ambiguous_and_names_them fails_with 2 \
	'kbox exec: ambiguous option --ma (--max-output, --max-lines)'

kbox exec -s x -tabc 'print(1)'
check short_option_takes_the_rest_of_its_word fails_with 2 \
	'kbox exec: invalid --timeout "abc": expected a duration from 0 to 24d, such as 30, 1.5s, 500ms, 2m or 1h'

# ---- durations: one parser, one placeholder, one message (kbox(1), Durations) ----

# Every option that takes a duration shows DURATION in its help.
for opt in "exec -t" "exec --grace" "run -t" "start --ttl"; do
	cmd=${opt% *}
	kbox "$cmd" --help
	check "${cmd}_${opt#* }_shows_the_placeholder_DURATION" eval \
		'grep -q "^  .*${opt#* }[^ ]* DURATION  " stdout && grep -q "^usage: .*${opt#* } DURATION" stdout'
done

# A duration that is taken gets as far as the session name (an invalid one,
# so that nothing starts); one that is not is refused in the one message.
dur_msg() {
	# (a unit spelt out gets kbox's spelling)
	case $3 in
	1sec) hint=" (did you mean 1s?)" ;;
	*) hint= ;;
	esac
	echo "kbox $1: invalid --$2 \"$3\": expected a duration from 0 to 24d, such as 30, 1.5s, 500ms, 2m or 1h$hint"
}
# dur_kbox CMD LONG D: kbox CMD --LONG D, with operands that stop it after
# its options (a cell that is not there, an invalid session name).
dur_kbox() {
	case $1 in
	run) kbox run --"$2" "$3" no-such-cell.py ;;
	start) kbox start -s a/b --"$2" "$3" ;;
	*) kbox "$1" -s a/b --"$2" "$3" 'print(1)' ;;
	esac
}
for opt in "exec timeout" "exec grace" "run timeout" "start ttl"; do
	cmd=${opt% *} long=${opt#* }
	if [ "$cmd" = run ]; then
		want='kbox run: cannot read no-such-cell.py: No such file or directory'
	else
		want="kbox $cmd: invalid session name \"a/b\": only letters, digits, '.', '_' and '-' are allowed"
	fi
	for d in 30 30s 1.5s 500ms 2m 1h 1.5h 2d 24d 0 0.0001 .5 5. 1h30m 4m10s 30m00s 1d2h3m4s5ms; do
		! selected "${cmd}_${long}_takes_${d}" || dur_kbox "$cmd" "$long" "$d"
		check "${cmd}_${long}_takes_${d}" fails_with 2 "$want"
	done
	for d in abc -1 +1 " 1" "1 " 1e3 0x10 inf nan 1.5.2 . s ms 1ms5 1x 1S 1sec 25d 24.001d "" 1h30 2mm 24d1s; do
		! selected "${cmd}_${long}_refuses_\"${d}\"_in_one_message" || dur_kbox "$cmd" "$long" "$d"
		check "${cmd}_${long}_refuses_\"${d}\"_in_one_message" fails_with 2 "$(dur_msg "$cmd" "$long" "$d")"
	done
done

kbox kernelspecs -jz
check unknown_short_option_in_a_cluster_is_named fails_as_json_with 2 usage \
	'kbox kernelspecs: unknown option -z (see kbox kernelspecs --help)'

kbox kernelspecs -jh
check help_in_a_cluster_prints_the_help eval '[ "$rc" = 0 ] && cmp -s stdout help.kernelspecs'

kbox kernelspecs --json extra
check operand_of_a_command_without_operands_is_refused fails_as_json_with 2 usage \
	'kbox kernelspecs: unexpected argument "extra" (see kbox kernelspecs --help)'
# a session's name given to kbox ls (as docker ps takes none): what shows one
kbox ls --json extra
check a_session_name_given_to_ls_points_at_status fails_as_json_with 2 usage \
	'kbox ls: unexpected argument "extra": kbox ls lists every session; kbox status -s extra shows one'
# a misspelt long option: the nearest of the command's, or of kbox's own
kbox exec --timout 5 1
check a_misspelt_long_option_gets_the_nearest fails_with 2 \
	'kbox exec: unknown option --timout: did you mean --timeout? (see kbox exec --help)'
kbox --verison
check a_misspelt_version_option_gets_it fails_with 2 \
	'kbox: unknown option --verison: did you mean --version? (see kbox --help)'
kbox help exce
check help_of_a_misspelt_command_gets_the_nearest fails_with 2 \
	'kbox help: no command "exce": did you mean "kbox help exec"?'
kbox stop --all extra
check stop_all_with_a_name_says_all_takes_none fails_with 2 \
	'kbox stop: unexpected argument "extra": --all stops every session, and takes no name (see kbox stop --help)'
# a bad option before the format that asks for JSON: JSON all the same
kbox ls --bogus --format json
check a_bad_option_before_format_json_is_json_too fails_as_json_with 2 usage \
	'kbox ls: unknown option --bogus (see kbox ls --help)'
kbox exec -t x -j 1
check a_bad_value_before_dash_j_is_json_too fails_as_json_with 2 usage \
	'kbox exec: invalid --timeout "x": expected a duration from 0 to 24d, such as 30, 1.5s, 500ms, 2m or 1h'

# docker's and jupyter's habits get a hint: the session as an operand, a
# command another tool has, a near miss, code that begins with '-'
kbox status sales
check session_as_an_operand_gets_the_s_hint fails_with 2 \
	'kbox status: unexpected argument "sales": did you mean -s sales? (see kbox status --help)'
kbox exec -t 5min 1
check a_duration_with_its_unit_spelt_out_gets_kboxs_spelling fails_with 2 \
	'kbox exec: invalid --timeout "5min": expected a duration from 0 to 24d, such as 30, 1.5s, 500ms, 2m or 1h (did you mean 5m?)'
kbox prune --older-than '7 days'
check a_duration_of_days_spelt_out_gets_kboxs_spelling fails_with 2 \
	'kbox prune: invalid --older-than "7 days": expected a duration from 0 to 3650d, such as 12h, 7d or 30d (did you mean 7d?)'
kbox exec sales 'df.head()'
check exec_with_the_session_as_first_operand_gets_the_s_hint fails_with 2 \
	"kbox exec: give the code once: CODE, -f FILE or -; did you mean -s sales? (kbox exec -s sales CODE)"
# kbox get and put: the session first, as docker cp and jupyter take it
# (a session directory is all it takes to be named)
mkdir -p "$S/sales" && chmod 700 "$KBOX_HOME" "$S" "$S/sales"
kbox get sales out.png
check get_with_the_session_as_first_operand_gets_the_s_hint fails_with 2 \
	'kbox get: "sales" is a session: did you mean kbox get -s sales out.png?'
kbox put sales data.csv
check put_with_the_session_as_first_operand_gets_the_s_hint fails_with 2 \
	'kbox put: "sales" is a session: did you mean kbox put -s sales data.csv?'
kbox exec sales
check exec_with_a_sessions_name_as_its_code_gets_the_s_hint fails_with 2 \
	'kbox exec: "sales" is a session: did you mean kbox exec -s sales CODE?'
kbox inspect sales
check inspect_with_a_sessions_name_as_its_code_gets_the_s_hint fails_with 2 \
	'kbox inspect: "sales" is a session: did you mean kbox inspect -s sales CODE?'
kbox complete sales
check complete_with_a_sessions_name_as_its_code_gets_the_s_hint fails_with 2 \
	'kbox complete: "sales" is a session: did you mean kbox complete -s sales CODE?'
# the cursor as a second operand (it is -c N): said, not "expected the CODE"
kbox complete -s sales 'import o' 8
check complete_with_the_cursor_as_an_operand_says_it_is_one_too_many fails_with 2 \
	'kbox complete: one operand, the CODE: "8" is one too many (the cursor'"'"'s offset goes in -c N; see kbox complete --help)'
rmdir "$S/sales"
kbox ps
check another_tools_command_names_ours fails_with 2 \
	'kbox: unknown command "ps": did you mean "kbox ls"? (see kbox --help)'
kbox statsu
check a_misspelt_command_names_the_nearest fails_with 2 \
	'kbox: unknown command "statsu": did you mean "kbox status"? (see kbox --help)'
kbox stauts
check two_swapped_letters_are_one_edit fails_with 2 \
	'kbox: unknown command "stauts": did you mean "kbox status"? (see kbox --help)'
# options a command does not have, that another has: what to do instead
kbox run -s x -c 1
check run_s_says_run_has_no_session fails_with 2 \
	'kbox run: unknown option -s: kbox run has no session: it starts a kernel of its own and stops it at the end; to run a file in a session, kbox exec -s NAME -f FILE'
kbox run -f a.py
check run_f_says_files_are_operands fails_with 2 \
	'kbox run: unknown option -f: kbox run takes its files as they are: kbox run FILE...'
kbox run --backend nope -c 1
check run_an_unknown_backend_reads_as_starts fails_with 2 \
	'kbox run: unknown backend "nope" (available: bwrap, docker, none)'
KBOX_BACKEND=nope kbox run -c 1
check run_an_unknown_kbox_backend_says_where_it_came_from fails_with 2 \
	'kbox run: unknown backend "nope" (from KBOX_BACKEND) (available: bwrap, docker, gateway, none)'
kbox doctor --backend docker --fix
check doctor_fix_is_for_bwrap fails_with 2 \
	'kbox doctor: --rootfs, --kernel and --fix are for the backend bwrap'
kbox run --workspace '' -c 1
check run_an_empty_workspace_is_said_to_be_empty fails_with 2 \
	'kbox run: --workspace is empty: name a directory'
kbox ls -s x
check ls_s_points_at_status fails_with 2 \
	'kbox ls: unknown option -s: kbox ls lists every session; kbox status -s NAME shows one'
kbox logs -n 5
check logs_n_points_at_tail fails_with 2 \
	'kbox logs: unknown option -n: kbox logs prints every event it keeps (kbox logs -s NAME | tail -n N)'
kbox -v
check dash_v_points_at_version fails_with 2 \
	'kbox: unknown option -v: kbox --version prints the version'
kbox frobnicate
check a_command_near_none_gets_no_guess fails_with 2 \
	'kbox: unknown command "frobnicate" (see kbox --help)'
# (two edits of a word that does not begin as the command does are no
# guess: "bogus" is not "logs")
kbox bogus
check a_word_two_edits_from_a_command_but_not_its_beginning_gets_no_guess fails_with 2 \
	'kbox: unknown command "bogus" (see kbox --help)'
kbox exec -s x '-1 + 2'
check code_that_begins_with_a_dash_gets_the_double_dash_hint fails_with 2 \
	"kbox exec: unknown option -1 (see kbox exec --help); code that begins with '-' goes after --, as in: kbox exec -- '-1 + 2'"
kbox exec -s x --x
check code_that_begins_with_two_dashes_gets_the_double_dash_hint fails_with 2 \
	"kbox exec: unknown option --x (see kbox exec --help); code that begins with '-' goes after --, as in: kbox exec -- '--x'"
kbox exec -s x --frobnicate
check an_unknown_long_option_gets_no_code_hint fails_with 2 \
	"kbox exec: unknown option --frobnicate (see kbox exec --help)"
# a session's setting given to a command that starts one for its code
kbox exec -s x --memory 4G 'print(1)'
check a_start_option_given_to_exec_points_at_kbox_start fails_with 2 \
	"kbox exec: unknown option --memory: a session's settings are kbox start's (kbox start -s NAME --memory ..., then kbox exec -s NAME)"
kbox exec -s x --output-rate 10 'print(1)'
check the_output_rate_given_to_exec_points_at_kbox_start fails_with 2 \
	"kbox exec: unknown option --output-rate: a session's settings are kbox start's (kbox start -s NAME --output-rate ..., then kbox exec -s NAME)"
kbox mcp -k python3
check a_start_option_given_to_mcp_points_at_kbox_start fails_with 2 \
	"kbox mcp: unknown option -k: a session's settings are kbox start's (kbox start -s NAME -k ..., then kbox mcp -s NAME)"

kbox get -s x -- -name-with-dash extra more
check double_dash_ends_the_options fails_with 2 \
	'kbox get: expected SRC [HOSTPATH] (see kbox get --help)'

kbox run -c 'print(1)' -- --no-such-file.py
check run_takes_operands_after_double_dash_as_files fails_with 2 \
	'kbox run: cannot read --no-such-file.py: No such file or directory'

tests_done
