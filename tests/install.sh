#!/bin/sh
# `make install` installs kbox, its supervisor program, libkbox (shared and
# static), the headers, libkbox.pc and the man pages; a program builds against
# them with pkg-config, linked both ways; the installed kbox runs a session.
#
# Environment (set by `make check`): top_srcdir, top_builddir, MAKE, CC,
# KBOX_LDFLAGS, KERNEL_PYTHON.
set -u
: "${top_srcdir:?}" "${top_builddir:?}"
# it tests the installed kbox, not the build tree's (which make install makes)
NEEDS_KBOX=no
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"
CC=${CC:-cc}

tmp=$ROOT
dest="$tmp/root"

# quiet CMD...: CMD succeeds; its output is kept in $tmp/out, and its end
# is $why when it fails.
quiet() {
	"$@" >"$tmp/out" 2>&1 && return 0
	why=$(tail -20 "$tmp/out")
	return 1
}
# run_logged NAME CMD...: run CMD, the setup of the tests that follow,
# its output in $tmp/NAME.log and its exit status in $tmp/NAME.rc.
run_logged() {
	log=$1
	shift
	"$@" >"$tmp/$log.log" 2>&1
	echo $? >"$tmp/$log.rc"
}
# succeeded NAME: the command run_logged as NAME exited 0; else the end
# of its output is $why.
succeeded() {
	[ "$(cat "$tmp/$1.rc" 2>/dev/null)" = 0 ] && return 0
	why=$(tail -20 "$tmp/$1.log" 2>/dev/null)
	return 1
}

run_logged install "${MAKE:-make}" -C "$top_builddir" install DESTDIR="$dest"
check make_install_succeeds succeeded install
prefix=$(sed -n 's/^prefix = //p' "$top_builddir/Makefile")
libdir=$(sed -n 's/^libdir = //p' "$top_builddir/Makefile" | sed "s|\${exec_prefix}|$prefix|; s|\$(exec_prefix)|$prefix|")
root="$dest$prefix"
lib="$dest$libdir"

check installs_kbox_binary quiet test -x "$root/bin/kbox"
check installs_shared_library quiet test -e "$lib/libkbox.so"
check installs_static_library quiet test -f "$lib/libkbox.a"
check installs_umbrella_header quiet test -f "$root/include/kbox.h"
check installs_module_headers quiet sh -c "for h in error wire conn kspec client kernel; do test -f '$root/include/kbox/'\$h.h || exit 1; done"
check installs_pkgconfig_file quiet test -f "$lib/pkgconfig/libkbox.pc"
check installs_man_pages quiet sh -c "test -f '$root/share/man/man1/kbox.1' && test -f '$root/share/man/man1/kbox-run.1'"

# The public surface: headers that name no czmq or libzmq type, and a
# shared library that exports the kbox_ API and nothing else.
check public_headers_include_no_czmq_or_zmq quiet sh -c "! grep -l 'include <c\\?zmq\\.h>\\|zsock_t\\|zmsg_t' '$root/include/kbox.h' '$root/include/kbox/'*.h"
check shared_library_exports_only_kbox_api quiet sh -c "nm -D --defined-only '$lib/libkbox.so' | awk '\$2 ~ /^[TDBRW]\$/ {print \$3}' >'$tmp/syms' && [ -s '$tmp/syms' ] && ! grep -v '^kbox_[a-z]' '$tmp/syms'"
check shared_library_hides_internal_symbols quiet sh -c "! nm -D --defined-only '$lib/libkbox.so' | grep -q ' kbox__'"
check shared_library_symbols_carry_version_KBOX_0 quiet sh -c "nm -D --defined-only '$lib/libkbox.so' | awk '\$2 ~ /^[TDBRW]\$/ {print \$3}' >'$tmp/vsyms' && [ -s '$tmp/vsyms' ] && ! grep -v '@@KBOX_0\$' '$tmp/vsyms'"

cat >"$tmp/prog.c" <<'PROG'
#include <stdio.h>
#include <kbox.h>
/* Every entry point initialises the library itself: the first call here is
 * kbox_conn_load, with no kbox_init before it. */
int main(int argc, char **argv)
{
	kbox_error_t err = {0};
	kbox_conn_t *c = kbox_conn_load(argc > 1 ? argv[1] : "/nonexistent", &err);
	kbox_auth_t *a;
	if (argc > 1 && !c)
		return 2;
	kbox_conn_destroy(&c);
	a = kbox_auth_new("hmac-md5", "k", 1, 0, &err);
	if (a || err.code != KBOX_E_UNSUPPORTED)
		return 1;
	printf("%s\n", kbox_version());
	return 0;
}
PROG
pcenv() { PKG_CONFIG_SYSROOT_DIR="$dest" PKG_CONFIG_PATH="$lib/pkgconfig" "$@"; }
cflags=$(pcenv pkg-config --cflags libkbox) || cflags=
libs=$(pcenv pkg-config --libs libkbox) || libs=
# libkbox.a with its dependencies linked as shared libraries (Debian ships
# no static libczmq fit for linking, whose --static flags name libraries
# that are not installed)
dep_libs="$(pkg-config --libs libczmq libzmq libsodium jansson) -lm"
version=$(sed -n 's/^PACKAGE_VERSION = //p' "$top_builddir/Makefile")

# shellcheck disable=SC2086 # lists of flags
! selected builds_against_installed_shared_library shared_program_runs_and_reports_version ||
	run_logged shared $CC $cflags "$tmp/prog.c" -o "$tmp/prog" $libs ${KBOX_LDFLAGS:-}
check builds_against_installed_shared_library succeeded shared
cat >"$tmp/conn.json" <<'CONN'
{"transport": "ipc", "ip": "/tmp/kbox-x", "key": "abc", "signature_scheme": "hmac-sha256",
 "shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5}
CONN
check shared_program_runs_and_reports_version quiet sh -c "test \"\$(LD_LIBRARY_PATH='$lib' '$tmp/prog' '$tmp/conn.json')\" = '$version'"
# shellcheck disable=SC2086 # lists of flags
! selected builds_against_installed_static_library static_program_runs_without_libkbox_so ||
	run_logged static $CC $cflags "$tmp/prog.c" -o "$tmp/prog-static" "$lib/libkbox.a" $dep_libs ${KBOX_LDFLAGS:-}
check builds_against_installed_static_library succeeded static
check static_program_runs_without_libkbox_so quiet sh -c "! ldd '$tmp/prog-static' | grep -q libkbox && test \"\$('$tmp/prog-static')\" = '$version'"
check installed_kbox_prints_version quiet sh -c "test \"\$(LD_LIBRARY_PATH='$lib' '$root/bin/kbox' version)\" = 'kbox $version'"
libexecdir=$(sed -n 's/^libexecdir = //p' "$top_builddir/Makefile" | sed "s|\${exec_prefix}|$prefix|; s|\$(exec_prefix)|$prefix|")
check installs_the_supervisor_program quiet test -x "$dest$libexecdir/kbox/kbox-supervisor"
check installs_the_http_helper_of_kbox_agent quiet test -x "$dest$libexecdir/kbox/kbox-http"
check installs_the_engine_helper_of_backend_docker quiet test -x "$dest$libexecdir/kbox/kbox-engine"
check installs_the_static_seccomp_loader_of_backend_docker quiet sh -c "
	test -x '$dest$libexecdir/kbox/kbox-seccomp' && ! ldd '$dest$libexecdir/kbox/kbox-seccomp' >/dev/null 2>&1"
# kbox-python3, where Jupyter looks in the prefix, its command the
# installed kbox (kbox-kernel(1))
datadir=$(sed -n 's/^datadir = //p' "$top_builddir/Makefile" | sed "s|\${datarootdir}|$prefix/share|; s|\$(datarootdir)|$prefix/share|")
bindir=$(sed -n 's/^bindir = //p' "$top_builddir/Makefile" | sed "s|\${exec_prefix}|$prefix|; s|\$(exec_prefix)|$prefix|")
check installs_the_kernelspec_kbox_python3 quiet sh -c "
	\"$PY\" -c 'import json, sys; k = json.load(open(sys.argv[1]))
assert k[\"argv\"] == [sys.argv[2], \"kernel\", \"--connection-file\", \"{connection_file}\"], k
assert k[\"display_name\"] == \"Python 3 (kbox sandbox)\" and k[\"language\"] == \"python\"
assert k[\"interrupt_mode\"] == \"signal\" and k[\"metadata\"][\"kbox\"][\"runs\"][\"kernel\"] == \"python3\"' \
		'$dest$datadir/jupyter/kernels/kbox-python3/kernel.json' '$bindir/kbox'"
# kbox image build's builder, in $(pkgdatadir)/container, which the
# installed kbox finds relative to itself (../share/kbox/container) and
# runs: a bad package name is refused by its build.sh
check installs_the_image_builder quiet sh -c "
	for f in image.sh build.sh hooks/customize-kbox.sh hooks/requirements-kbox.sh; do
		test -x '$root/share/kbox/container/'\$f || exit 1
	done && test -f '$root/share/kbox/container/Containerfile'"
check installed_kbox_image_build_runs_the_installed_builder quiet sh -c "
	LD_LIBRARY_PATH='$lib' '$root/bin/kbox' image build --packages 'Bad!' 2>'$tmp/image.err'
	rc=\$?; cat '$tmp/image.err'; [ \$rc = 2 ] &&
	[ \"\$(cat '$tmp/image.err')\" = \"kbox image build: \\\"Bad!\\\" is no Debian package name (lower-case letters, digits, '+', '-', '.')\" ]"
# Installed under DESTDIR, kbox finds its supervisor relative to itself
# (../libexec/kbox/), as in a moved prefix: a session starts, runs, stops.
if "$PY" -c 'import ipykernel' 2>/dev/null; then
	check installed_kbox_runs_a_session quiet sh -c "
		export LD_LIBRARY_PATH='$lib'
		'$root/bin/kbox' start -s inst --backend none >/dev/null &&
		out=\$('$root/bin/kbox' exec -s inst 6*7) &&
		'$root/bin/kbox' stop -s inst >/dev/null &&
		test \"\$out\" = 'Out[1]: 42'"
	"$root/bin/kbox" stop --all >/dev/null 2>&1
else
	skip installed_kbox_runs_a_session "$PY cannot import ipykernel"
fi

# A moved installation: the installed tree copied elsewhere and the
# original removed.  kbox finds its supervisor in ../libexec/kbox/, and the
# supervisor finds libkbox.so through its RUNPATH relative to itself
# (configure's --enable-relocatable), with no LD_LIBRARY_PATH: a session
# starts and runs 1+1 (kbox(1), FILES).
skip_moved=
bindir=$(sed -n 's/^bindir = //p' "$top_builddir/Makefile" | sed "s|\${exec_prefix}|$prefix|; s|\$(exec_prefix)|$prefix|")
if [ -z "$(sed -n 's/^SUPERVISOR_TO_LIBDIR = //p' "$top_builddir/Makefile")" ] &&
	[ -z "$(sed -n 's/^STATIC_SUPERVISOR_LIBS = //p' "$top_builddir/Makefile")" ]; then
	skip_moved="configured with --disable-relocatable"
elif [ "$bindir" != "$prefix/bin" ] || [ "$libexecdir" != "$prefix/libexec" ]; then
	skip_moved="bindir and libexecdir are not PREFIX/bin and PREFIX/libexec"
elif [ -e "$libexecdir/kbox/kbox-supervisor" ]; then
	skip_moved="kbox is installed in $libexecdir: kbox would take that supervisor"
fi
moved="$tmp/moved"
cp -a "$dest" "$moved" && rm -rf "$dest"
sup="$moved$libexecdir/kbox/kbox-supervisor"
if [ -n "$skip_moved" ]; then
	for t in moved_supervisor_loads_libkbox_beside_it moved_supervisor_reports_its_version \
		moved_installation_runs_a_session doctor_of_a_supervisor_that_cannot_run_fails_its_check; do
		skip "$t" "$skip_moved"
	done
else
	check moved_supervisor_loads_libkbox_beside_it quiet sh -c "
		lib=\$(env -u LD_LIBRARY_PATH ldd '$sup' | awk '\$1 == \"libkbox.so.0\" {print \$3}') &&
		echo \"libkbox.so.0 => \$lib\" && test \"\$(realpath -s \"\$lib\")\" = '$moved$libdir/libkbox.so.0'"
	check moved_supervisor_reports_its_version quiet sh -c "
		test \"\$(env -u LD_LIBRARY_PATH '$sup' --version)\" = 'kbox-supervisor $version (libkbox $version)'"
	if "$PY" -c 'import ipykernel' 2>/dev/null; then
		check moved_installation_runs_a_session quiet env -u LD_LIBRARY_PATH sh -c "
			export KBOX_HOME='$tmp/hm'
			'$moved$prefix/bin/kbox' start -s moved --backend none >/dev/null &&
			out=\$('$moved$prefix/bin/kbox' exec -s moved 1+1) &&
			exe=\$(readlink /proc/\$(cat '$tmp/hm/sessions/moved/supervisor.pid')/exe) &&
			'$moved$prefix/bin/kbox' stop -s moved >/dev/null &&
			echo \"\$out; \$exe\" && test \"\$out\" = 'Out[1]: 2' && test \"\$exe\" = \"\$(realpath '$sup')\""
		KBOX_HOME="$tmp/hm" "$moved$prefix/bin/kbox" stop --all >/dev/null 2>&1
		# without its libkbox.so, kbox doctor says that no session can start
		mv "$moved$libdir" "$moved$libdir.gone"
		check doctor_of_a_supervisor_that_cannot_run_fails_its_check quiet env -u LD_LIBRARY_PATH sh -c "
			KBOX_HOME='$tmp/hm' '$moved$prefix/bin/kbox' doctor >'$tmp/doctor'
			rc=\$?; cat '$tmp/doctor'; [ \$rc = 5 ] &&
			grep -q '^fail  supervisor       .*libkbox\.so\.0: cannot open shared object file' '$tmp/doctor'"
		mv "$moved$libdir.gone" "$moved$libdir"
	else
		skip moved_installation_runs_a_session "$PY cannot import ipykernel"
		skip doctor_of_a_supervisor_that_cannot_run_fails_its_check "$PY cannot import ipykernel"
	fi
fi

# make uninstall leaves no file, and removes kbox's own directories,
# $(pkglibexecdir) and $(includedir)/kbox.
includedir=$(sed -n 's/^includedir = //p' "$top_builddir/Makefile" | sed "s|\${prefix}|$prefix|; s|\$(prefix)|$prefix|")
check make_uninstall_removes_every_file_and_kbox_directories quiet sh -c "
	${MAKE:-make} -C '$top_builddir' install DESTDIR='$tmp/u' >/dev/null &&
	test -d '$tmp/u$libexecdir/kbox' && test -d '$tmp/u$includedir/kbox' &&
	${MAKE:-make} -C '$top_builddir' uninstall DESTDIR='$tmp/u' >/dev/null &&
	find '$tmp/u' ! -type d && test -z \"\$(find '$tmp/u' ! -type d)\" &&
	! test -e '$tmp/u$libexecdir/kbox' && ! test -e '$tmp/u$includedir/kbox'"

tests_done
