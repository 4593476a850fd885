#!/bin/bash
# tests/r_kernel.sh — a kernel other than Python in the default (bwrap)
# sandbox, and what the sandbox gives a kernel's installation: IRkernel
# (R reads /usr/lib/R/etc/*, symlinks into /etc/R) running four cells;
# the binds a kernelspec asks for (metadata.kbox.ro_bind), read-only, and
# those refused; and the kernel's last lines in the message of a start
# that failed.  TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON.
# Needs bubblewrap; the R tests need R and IRkernel (setup.sh installs
# r-cran-irkernel), the others a Python kernel; each is skipped, with the
# reason, without them.
# shellcheck disable=SC2016 # eval strings expand later, on purpose
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"

have_bwrap=yes
[ -x /usr/bin/bwrap ] || [ -x /usr/local/bin/bwrap ] || [ -x /bin/bwrap ] || have_bwrap=no
have_ir=yes
command -v R >/dev/null && R --slave -e 'library(IRkernel)' >/dev/null 2>&1 || have_ir=no
"$KBOX" kernelspecs 2>/dev/null | grep -q '^ir	' || have_ir=no

# sandboxed WHAT...: as needs, plus bwrap; "r" for R and IRkernel.
sandboxed() {
	SKIPPING=
	[ "$have_bwrap" = yes ] || SKIPPING="bubblewrap is not installed"
	for what in "$@"; do
		case $what in
		r) [ "$have_ir" = yes ] || SKIPPING="R or IRkernel (r-cran-irkernel) is not installed, or no ir kernelspec" ;;
		*) [ -n "$SKIPPING" ] || needs "$what" ;;
		esac
	done
}

# kernelspecs of the tests' own, first on the search path
JP=$ROOT/jp
export JUPYTER_PATH=$JP
# spec NAME ARGV-JSON [METADATA-JSON]: a kernelspec NAME.
spec() {
	mkdir -p "$JP/kernels/$1" || exit 1
	printf '{"argv": %s, "display_name": "%s", "language": "x", "metadata": %s}\n' \
		"$2" "$1" "${3:-{\}}" >"$JP/kernels/$1/kernel.json"
}
PYK='["'"$PY"'", "-m", "ipykernel_launcher", "-f", "{connection_file}"]'

# ---- IRkernel: four cells ----

sandboxed r
# kbox doctor checks a kernel of another language by running its program
# (--version) in the sandbox with its installation's binds
fresh
kbox doctor -k ir
check doctor_runs_the_r_interpreter_in_the_sandbox eval 'status_is 0 &&
	grep -q "^ok    interpreter      /usr/bin/R runs in the sandbox: R version " stdout &&
	grep -qxF "skip  packages         not checked: the kernel'"'"'s language is R (kbox checks Python'"'"'s packages)" stdout'
fresh
kbox start -s r -k ir
check ir_session_starts_in_the_bwrap_sandbox eval 'status_is 0 && stderr_empty &&
	stdout_is "session r started (backend bwrap, kernel ir, supervisor pid $(cat "$S/r/supervisor.pid"))"'
kbox exec -s r 'x <- 41L'
check r_assignment_prints_nothing eval 'status_is 0 && stdout_empty && stderr_empty'
kbox exec -s r 'cat(x + 1L, "\n", sep = "")'
check r_state_persists_between_cells eval 'status_is 0 && stdout_is 42 && stderr_empty'
# an execution's own variables (exec -e) need a Python kernel: refused
kbox exec -s r -e A=1 'cat(1)'
check exec_env_on_an_r_kernel_says_it_needs_python fails_with 2 \
	'kbox exec: session r: "env" (kbox exec -e) needs a Python kernel: the kernel ir is R; a session'"'"'s own variables (kbox start -e) work with any'
kbox exec -s r 'plot(1:10)'
png=$(sed -n 's/^\[image saved: \(.*\) ([0-9]*×[0-9]* px)\]$/\1/p' stdout 2>/dev/null)
check r_plot_is_saved_as_png_and_its_path_reported eval 'status_is 0 && stderr_empty &&
	[ "$(wc -l <stdout)" -eq 1 ] && case $png in "$S"/r/outputs/*.png) true ;; *) false ;; esac &&
	[ -f "$png" ] && is_png "$png"'
kbox exec -s r 'stop("boom")'
# IRkernel's traceback begins with the value: it is not said twice
check r_error_is_reported_once_with_exit_status_1 eval 'status_is 1 && stderr_empty &&
	stdout_is "Error in eval(expr, envir, enclos): boom
Traceback:
1. stop(\"boom\")"'
kbox exec -s r --format json 'stop("boom")'
check r_error_name_and_message_in_json eval 'status_is 1 &&
	"$PY" -c "import json, sys; e = json.load(open(\"stdout\"))[\"error\"]
sys.exit(not (e[\"ename\"] == \"ERROR\" and e[\"evalue\"] == \"Error in eval(expr, envir, enclos): boom\\n\"))"'
# what R found through its symlinks: /etc/R, bound read-only, and no more
kbox exec -s r 'cat(file.exists("/etc/R/Renviron"), file.access("/etc/R/Renviron", 2) == 0, file.exists("/etc/shadow"), file.exists("/etc/R/../shadow"), "\n")'
check r_sees_etc_r_read_only_and_not_the_rest_of_etc eval 'status_is 0 &&
	stdout_is "TRUE FALSE FALSE FALSE "'
kbox exec -s r 'tryCatch(writeLines("x", "/etc/R/Renviron"), warning = function(w) cat(conditionMessage(w), "\n", sep = ""))'
check r_cannot_write_etc_r eval 'status_is 0 &&
	stdout_is "cannot open file '"'"'/etc/R/Renviron'"'"': Read-only file system"'
# what code leaves in the workspace or the home does not start with the
# next kernel: R's profile, Renviron, user library (--home-config off)
kbox exec -s r 'writeLines("Sys.setenv(FROM_WS_PROFILE = 1)", ".Rprofile")
writeLines("Sys.setenv(FROM_HOME_PROFILE = 1)", "~/.Rprofile")
writeLines("FROM_WS_RENVIRON=1", ".Renviron")
writeLines("FROM_HOME_RENVIRON=1", "~/.Renviron")
dir.create(file.path("~", "R"), showWarnings = FALSE)'
kbox restart -s r
kbox exec -s r 'cat(Sys.getenv(c("FROM_WS_PROFILE", "FROM_HOME_PROFILE", "FROM_WS_RENVIRON", "FROM_HOME_RENVIRON")), "|", Sys.getenv("R_LIBS_USER"), .libPaths()[1], "\n")'
check r_startup_files_left_in_workspace_or_home_do_not_run eval 'status_is 0 &&
	has_line stdout "    | /tmp/.R-library /usr/local/lib/R/site-library "'
kbox stop -s r

# ---- metadata.kbox.ro_bind ----

sandboxed kernel
fresh
spec pyconf "$PYK" '{"kbox": {"ro_bind": ["/etc/ld.so.conf.d"]}}'
kbox start -s conf -k pyconf
check kernelspec_ro_bind_starts eval 'status_is 0 && stderr_empty'
kbox exec -s conf 'import os; print(sorted(os.listdir("/etc/ld.so.conf.d")))'
check kernelspec_ro_bind_shows_the_directory eval 'status_is 0 &&
	stdout_is "$("$PY" -c "import os; print(sorted(os.listdir(\"/etc/ld.so.conf.d\")))")"'
kbox exec -s conf 'import errno
try:
    open("/etc/ld.so.conf.d/kbox-test", "w")
except OSError as e:
    print(errno.errorcode[e.errno])'
check kernelspec_ro_bind_is_read_only eval 'status_is 0 && stdout_is EROFS'
kbox stop -s conf

# refused-bind TEST PATH REASON: a kernelspec asking for PATH does not
# start, and says REASON.
refused_bind() {
	spec refused "$PYK" "{\"kbox\": {\"ro_bind\": [\"$2\"]}}"
	kbox start -s refused -k refused
	check "$1" fails_with 5 "kbox start: session refused: kernelspec refused: metadata.kbox.ro_bind: cannot bind $2: $3"
}
refused_bind ro_bind_refuses_etc_shadow /etc/shadow "its name looks secret (shadow)"
refused_bind ro_bind_refuses_ssh_config /etc/ssh/ssh_config "its name looks secret (ssh)"
refused_bind ro_bind_refuses_proc /proc/1/environ "only what lies below /etc, /opt or /srv may be bound"
refused_bind ro_bind_refuses_dev /dev/sda "only what lies below /etc, /opt or /srv may be bound"
refused_bind ro_bind_refuses_sys /sys/kernel "only what lies below /etc, /opt or /srv may be bound"
refused_bind ro_bind_refuses_home /home "only what lies below /etc, /opt or /srv may be bound"
refused_bind ro_bind_refuses_the_state_dir "$KBOX_HOME" "only what lies below /etc, /opt or /srv may be bound"
refused_bind ro_bind_refuses_all_of_etc /etc "only what lies below /etc, /opt or /srv may be bound"
refused_bind ro_bind_refuses_a_dotdot_path /etc/R/../shadow 'not an absolute path without ".."'
refused_bind ro_bind_refuses_the_sandbox_passwd /etc/passwd "the sandbox has its own /etc/passwd"
spec notalist "$PYK" '{"kbox": {"ro_bind": "/etc/R"}}'
kbox start -s notalist -k notalist
check ro_bind_that_is_not_a_list_is_refused fails_with 5 \
	"kbox start: session notalist: kernelspec notalist: metadata.kbox.ro_bind is not a list of at most 32 paths"

# ---- a start that fails: the kernel's last lines ----

sandboxed
fresh
# eleven lines on stderr, then one in colour, then exit 3
mkdir -p "$JP/kernels/dies" || exit 1
cat >"$JP/kernels/dies/kernel.json" <<'EOF'
{"argv": ["sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10 11; do echo line $i >&2; done; printf '\\033[31mred\\033[0m last\\n' >&2; exit 3", "{connection_file}"],
 "display_name": "dies", "language": "sh"}
EOF
tail10='  line 3
  line 4
  line 5
  line 6
  line 7
  line 8
  line 9
  line 10
  line 11
  red last'
kbox start -s dies -k dies
check failed_start_shows_the_kernels_last_10_lines eval 'status_is 5 && stdout_empty &&
	stderr_is "kbox start: session dies: the kernel exited with status 3 before it was ready; its last lines:
$tail10" && [ ! -e "$S/dies" ]'
kbox run -k dies -c 1
check failed_run_shows_the_kernels_last_10_lines eval 'status_is 5 && stdout_empty &&
	stderr_is "kbox run: session run: the kernel exited with status 3 before it was ready; its last lines:
$tail10"'

tests_done
