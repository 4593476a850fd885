#!/bin/bash
# tests/man_examples.sh — every example of every manual page runs: each
# command line of the EXAMPLES section of man/*.1 is run, in the order of
# its page, with the kbox just built first on PATH, and exits as the page
# says.  TAP.
#
# A page's examples are the lines of its EXAMPLES section's literal blocks
# (.Bd -literal ... .Ed, and .Dl) that start with "$ ": the command, up to
# where it is a whole command for bash -n (a quote left open, a line ending
# with a backslash or a pipe goes on to the next line).  The lines after
# it, up to the next command, are its output.  Each command runs with
# bash -o pipefail: kbox failing before a pipe is not hidden by the command
# after it.  It must exit 0, unless
#   - it ends with "; echo $?": then its output ends with the status the
#     page shows;
#   - the next command is "echo $?": then it exits with the status the
#     page shows after that (and "echo $?" itself is not run);
#   - a roff comment before it, `.\" example: ...`, says otherwise:
#       status N        it exits N (a traceback on the page says so);
#       background      it runs in the background while the next commands
#                       run; once a session is busy the page goes on, and
#                       at the end of the page it must have exited 0 (or
#                       status N);
#       until-killed    it runs until killed (kbox logs -f): after 3
#                       seconds it still runs;
#       needs cgroup-memory
#                       it needs the memory cgroup (kbox doctor's
#                       cgroup_limits): skipped without it;
#       skip REASON     it cannot run here (REASON says why).
# A command that starts the kernelspec ir is skipped when that kernelspec
# is not installed or cannot run in the sandbox (kbox doctor -k ir), one
# that pipes into jq or less when that is not installed.
#
# kbox doctor --fix (kbox-doctor(1)) changes nothing here: without the
# sandbox user, kbox doctor fails and every example is skipped.
#
# Each page runs in a new scratch directory, with HOME a scratch directory
# inside it, and a state directory of its own, holding the files its
# examples use (sales.csv, load.py, ...) and, when the page uses the
# session "sales" without starting it, that session with the data loaded;
# every session is stopped when the page is done.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON.
# shellcheck disable=SC2016 # eval strings expand later, on purpose
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"

PATH=$top_builddir:$PATH
export PATH
unset KBOX_SESSION KBOX_KERNEL

# R's kernel: installed, and able to run in the sandbox
have_ir=no
"$KBOX" kernelspecs 2>/dev/null | grep -q '^ir	' && "$KBOX" doctor -k ir >/dev/null 2>&1 &&
	have_ir=yes

# examples PAGE: the examples of PAGE, a record a line: "B" and "E" begin
# and end a literal block, "L TEXT" is one of its lines, "M TEXT" a
# marker (.\" example: TEXT); roff escapes decoded.
examples() {
	awk '
	/^\.Sh / { ex = ($2 == "EXAMPLES"); next }
	!ex { next }
	/^\.\\" example: / { sub(/^\.\\" example: /, ""); print "M " $0; next }
	/^\.Bd -literal/ { lit = 1; print "B"; next }
	lit && /^\.Ed/ { lit = 0; print "E"; next }
	lit && /^\.\\"/ { next }
	lit { print "L " $0; next }
	/^\.Dl \$ / { print "B"; print "L " substr($0, 5); print "E" }
	' "$1" | sed -e 's/\\e/\\/g' -e 's/\\&//g' -e 's/\\(dq/"/g' -e 's/\\(mu/x/g' -e 's/\\-/-/g'
}

# whole CMD: CMD is a whole command (not one that goes on next line).
whole() {
	case $1 in
	*\\ | *\|) return 1 ;;
	esac
	bash -n -c "$1" 2>/dev/null
}

# read_page PAGE: the commands of PAGE into CMDS, their markers into MARKS
# and the last line of their output into LAST; N_CMDS of them.
read_page() {
	CMDS=() MARKS=() LAST=()
	N_CMDS=0
	local open=0 mark='' rec kind text
	while IFS= read -r rec; do
		kind=${rec%% *}
		text=${rec#? }
		case $kind in
		B | E) open=0 ;;
		M) mark=$text ;;
		L)
			if [ "$open" = 1 ] && ! whole "${CMDS[N_CMDS - 1]}"; then
				CMDS[N_CMDS - 1]+=$'\n'$text
			elif [ "${text#\$ }" != "$text" ]; then
				CMDS[N_CMDS]=${text#\$ }
				MARKS[N_CMDS]=$mark
				LAST[N_CMDS]=
				N_CMDS=$((N_CMDS + 1))
				mark=
				open=1
			elif [ "$open" = 1 ]; then
				LAST[N_CMDS - 1]=$text
			fi
			;;
		esac
	done < <(examples "$1")
}

# setup PAGE: what the examples of PAGE use, in a new directory.
setup() {
	fresh
	# under root, the sandbox user must pass through to --workspace work
	chmod 711 "$BASE" "$T" || exit 1
	mkdir -p home/exports home/reports data work
	HOME=$T/home
	export HOME
	cat >sales.csv <<'EOF'
region,units,price
east,120,19.99
north,80,24.5
south,95,18.25
west,60,30.0
east,45,21.0
EOF
	cp sales.csv data/sales.csv
	cp sales.csv home/exports/2026-11.csv
	cat >load.py <<'EOF'
import pandas as pd
df = pd.read_csv("sales.csv")
EOF
	cat >plot.py <<'EOF'
import matplotlib.pyplot as plt
df.groupby("region")["units"].sum().plot.bar()
plt.show()
EOF
	cat >clean.py <<'EOF'
import os
try:
    answer = input("drop empty rows? ")
except Exception:  # no -i: input is not available
    answer = "no"
print("files:", sorted(os.listdir()), "answer:", answer)
EOF
	# the sessions the page uses without starting them
	if grep -q -- '-s sales' "$1" && ! grep -q '^\$ kbox start -s sales' "$1"; then
		"$KBOX" start -s sales >setup.out 2>&1 &&
			"$KBOX" put -s sales sales.csv >>setup.out 2>&1 &&
			"$KBOX" exec -s sales 'import os
import pandas as pd
import matplotlib.pyplot as plt
df = pd.read_csv("sales.csv")
os.makedirs("results", exist_ok=True)
with open("results/summary.txt", "w") as f:
    print(len(df), "rows", file=f)
plt.plot([1, 2, 3]); plt.savefig("chart.png"); plt.close()' >>setup.out 2>&1 ||
			echo "setup: session sales: $(tail -n 3 setup.out)" >>setup.err
	fi
	# kbox-status(1): a session whose TTL of 3 seconds ran out
	if grep -q -- '-s t1' "$1"; then
		"$KBOX" start -s t1 --ttl 3 >>setup.out 2>&1 || echo "setup: session t1 did not start" >>setup.err
		wait_for stopped t1 >>setup.err
	fi
}

# stopped NAME: `kbox status` says session NAME is stopped.
stopped() { "$KBOX" status -s "$1" 2>/dev/null | grep -q '^state: *stopped$'; }
# some_busy: `kbox ls` says a session is running code.
some_busy() { "$KBOX" ls --format ndjson 2>/dev/null | grep -q '"state":"busy"'; }
# busy: a session comes to run code (within lib.sh's bound).
busy() { wait_for some_busy; }

# run_cmd CMD TIMEOUT: run CMD with bash -o pipefail (a pipeline fails
# when any of its commands does) in the current directory, at most
# TIMEOUT seconds; its output to ./stdout and ./stderr, status to $rc.
run_cmd() {
	t0=$(date +%s)
	timeout -k 5 "$2" bash -o pipefail -c "$1" >stdout 2>stderr </dev/null
	rc=$?
	secs=$(($(date +%s) - t0))
}

# the example's test: the page and the command's first line, in TAP words
test_name() {
	printf '%s: %s' "${1%.1}" "$(printf '%s\n' "$2" | head -n 1 | tr -d '#' | cut -c 1-72)"
}

needs kernel pandas
if [ -z "$SKIPPING" ] && ! "$KBOX" doctor >/dev/null 2>&1; then
	SKIPPING="kbox doctor: the sandbox cannot run kernels here"
fi
have_cgroup_memory=no
"$KBOX" doctor --format json 2>/dev/null | grep -q '"cgroup_limits":\[[^]]*"memory"' &&
	have_cgroup_memory=yes

for page in "$top_srcdir"/man/*.1; do
	p=${page##*/}
	read_page "$page"
	[ "$N_CMDS" -gt 0 ] || continue
	if [ -n "$SKIPPING" ]; then
		check "$p: every example" true
		continue
	fi
	setup "$page"
	check "$p: the examples' setup" eval '[ ! -s setup.err ] || { sed "s/^/#   /" setup.err; false; }'
	bg_pids=() bg_names=() bg_want=()
	i=0
	while [ "$i" -lt "$N_CMDS" ]; do
		c=${CMDS[i]} m=${MARKS[i]}
		name=$(test_name "$p" "$c")
		want=0 echo_want=
		if [ "$((i + 1))" -lt "$N_CMDS" ] && [ "${CMDS[i + 1]}" = 'echo $?' ]; then
			want=${LAST[i + 1]}
			i=$((i + 1))
		fi
		case $c in
		*'; echo $?') echo_want=${LAST[i]} ;;
		esac
		case " $m " in
		*" status "[0-9]*) want=$(printf '%s\n' "$m" | sed 's/.*status \([0-9]*\).*/\1/') ;;
		esac
		i=$((i + 1))
		skip=
		case $m in
		skip*) skip=${m#skip } ;;
		*"needs cgroup-memory"*)
			[ "$have_cgroup_memory" = yes ] ||
				skip="no memory cgroup here: --memory falls back to RLIMIT_DATA (MemoryError)"
			;;
		esac
		case $c in
		*'-k ir'*) [ "$have_ir" = yes ] || skip="the kernelspec ir cannot run here (kbox doctor -k ir)" ;;
		esac
		for tool in jq less; do
			case $c in
			*"| $tool"*) command -v "$tool" >/dev/null || skip="$tool is not installed" ;;
			esac
		done
		if [ -n "$skip" ]; then
			n=$((n + 1))
			echo "ok $n - $name # SKIP $skip"
			continue
		fi
		case $m in
		background*)
			timeout -k 5 90 bash -o pipefail -c "$c" >"bg$i.out" 2>"bg$i.err" </dev/null &
			bg_pids+=($!) bg_names+=("$name") bg_want+=("$want")
			check "$name: starts running" busy
			;;
		until-killed*)
			run_cmd "$c" 3
			check "$name: runs until killed" eval '[ "$rc" = 124 ] || { echo "#   $c"; false; }'
			;;
		*)
			run_cmd "$c" 120
			if [ -n "$echo_want" ]; then
				check "$name: exits $echo_want" eval \
					'[ "$rc" = 0 ] && [ "$(tail -n 1 stdout)" = "$echo_want" ] || { echo "#   $c"; false; }'
			else
				check "$name: exits $want" eval '[ "$rc" = "$want" ] || { echo "#   $c"; false; }'
			fi
			;;
		esac
	done
	for j in "${!bg_pids[@]}"; do
		wait "${bg_pids[j]}"
		rc=$?
		want=${bg_want[j]}
		check "${bg_names[j]}: exits $want" eval '[ "$rc" = "$want" ]'
	done
	# the page's sessions end with it
	timeout -k 5 60 "$KBOX" stop --all >/dev/null 2>&1
	rm -rf "$S"
done

echo "1..$n"
