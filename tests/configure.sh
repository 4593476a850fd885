#!/bin/sh
# configure stops with a message naming the Debian package when a
# dependency is missing: one test per dependency, each run with a pkg-config
# search path that holds every .pc file on this machine but that one.  Then
# how the kbox program links its libraries (--enable/--disable-static-deps),
# and where kbox-supervisor finds libkbox.so relative to itself
# (--enable/--disable-relocatable).
#
# One configure first fills a cache of what does not depend on the case
# (the compiler's and the C library's answers), and each case starts from
# a copy of it: what a case checks (pkg-config's answers, the options'
# effects) is asked again every time, and the cases take a few seconds
# instead of a whole configure each.  The cache keeps neither the precious
# variables (ac_cv_env_*: a case sets its own PKG_CONFIG_LIBDIR) nor
# pkg-config's answers (pkg_cv_*).
#
# Every configure here runs under dash, Debian's /bin/sh, as CONFIG_SHELL
# (autoconf's way to choose the shell; a user's ./configure picks bash):
# what configure decides must not depend on bash, and dash forks in half
# the time.  None of these builds compiles anything, so none tracks
# dependencies (--disable-dependency-tracking: config.status makes no
# .deps files).
#
# Environment (set by `make check-slow`): top_srcdir, top_builddir.
set -u
: "${top_srcdir:?}" "${top_builddir:?}"
# it runs configure, no kbox
NEEDS_KBOX=no
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"

tmp=$ROOT

# A pristine copy of what configure needs (the source tree itself may be
# configured in place, which a second configure refuses).
src="$tmp/src"
mkdir -p "$src/src"
for f in configure config.h.in Makefile.in libkbox.pc.in; do
	cp "$top_srcdir/$f" "$src/" || exit 99
done
cp -R "$top_srcdir/build-aux" "$src/" || exit 99
cp "$top_srcdir/src/wire.c" "$src/src/" || exit 99

prime="$tmp/build-prime"
mkdir -p "$prime"
if command -v dash >/dev/null; then
	CONFIG_SHELL=$(command -v dash)
	export CONFIG_SHELL
fi
# configure ARGS...: $src/configure -q ARGS, under CONFIG_SHELL when set
configure() {
	${CONFIG_SHELL:-/bin/sh} "$src/configure" -q --disable-dependency-tracking "$@"
}
if ! (cd "$prime" && configure --cache-file=config.cache >/dev/null 2>&1); then
	tail -20 "$prime/config.log" | sed 's/^/# /'
	echo "Bail out! a plain configure fails"
	exit 1
fi
grep -v -e '^ac_cv_env_' -e '^pkg_cv_' "$prime/config.cache" >"$tmp/config.cache" || exit 99
# cached ARGS...: configure ARGS in the current directory, from a copy of
# the cache
cached() {
	cp "$tmp/config.cache" config.cache && configure --cache-file=config.cache "$@"
}

pcdirs=$(pkg-config --variable pc_path pkg-config 2>/dev/null)
[ -n "$pcdirs" ] || pcdirs=/usr/local/lib/x86_64-linux-gnu/pkgconfig:/usr/local/lib/pkgconfig:/usr/local/share/pkgconfig:/usr/lib/x86_64-linux-gnu/pkgconfig:/usr/lib/pkgconfig:/usr/share/pkgconfig

# names_package PC PKG: configure with a pkg-config search path that holds
# every .pc file on this machine but PC.pc stops, naming the Debian package
# PKG.
names_package() {
	pcdir="$tmp/pc-$1"
	mkdir -p "$pcdir"
	old_ifs=$IFS
	IFS=:
	for d in $pcdirs; do
		[ -d "$d" ] || continue
		for f in "$d"/*.pc; do
			[ -e "$f" ] || continue
			base=$(basename "$f")
			[ "$base" = "$1.pc" ] && continue
			[ -e "$pcdir/$base" ] || ln -s "$f" "$pcdir/$base"
		done
	done
	IFS=$old_ifs
	build="$tmp/build-$1"
	mkdir -p "$build"
	out=$(cd "$build" && PKG_CONFIG_PATH='' PKG_CONFIG_LIBDIR="$pcdir" cached 2>&1)
	status=$?
	last=$(printf '%s\n' "$out" | grep 'configure: error' | tail -1)
	case "$last" in
	*"$1"*"not found"*"Debian package $2"*)
		[ $status -eq 0 ] || return 0
		;;
	esac
	why="exit $status; output: $(printf '%s' "$out" | tail -3)"
	return 1
}

for dep in "libzmq libzmq3-dev" "libczmq libczmq-dev" "libsodium libsodium-dev" "jansson libjansson-dev" "libcurl libcurl4-openssl-dev"; do
	# shellcheck disable=SC2086 # two words
	set -- $dep
	check "missing_${1}_names_debian_package_$2" names_package "$1" "$2"
done

# configure_in NAME ARGS...: configure with ARGS (from the cache) in a
# fresh build dir $build; its output in $out, its exit status in $status.
# The tests after it look at that build (setup_for names them); a few share
# one configure, since what they check is independent (the libraries, the
# RUNPATH).
configure_in() {
	[ -z "$SKIPPING" ] || return 0
	build="$tmp/build-$1"
	shift
	mkdir -p "$build"
	out=$(cd "$build" && cached "$@" 2>&1)
	status=$?
}

# The programs' libraries: shared by default (as distributions want), the
# static archives with --enable-static-deps (they link here: setup.sh
# installs them); --enable-static-deps that cannot be met stops configure.
# libs_are EXPECT: the last configure's; EXPECT is "static", "shared" or
# "error" (nonzero exit naming the option).
libs_are() {
	libs=$(sed -n 's/^STATIC_SUPERVISOR_LIBS = //p' "$build/Makefile" 2>/dev/null)
	ok=no
	case $1 in
	static) [ $status -eq 0 ] && case $libs in -Wl,-Bstatic\ -lczmq\ -lzmq*) ok=yes ;; esac ;;
	shared) [ $status -eq 0 ] && [ -f "$build/Makefile" ] && [ -z "$libs" ] && ok=yes ;;
	error) [ $status -ne 0 ] && printf '%s\n' "$out" |
		grep -q 'configure: error: --enable-static-deps: cannot link the static archives' && ok=yes ;;
	esac
	[ $ok = yes ] && return 0
	why="exit $status; STATIC_SUPERVISOR_LIBS=$libs; output: $(printf '%s' "$out" | tail -3)"
	return 1
}

# kbox-supervisor's RUNPATH relative to itself ($ORIGIN/...): the way from
# $(pkglibexecdir) to $(libdir), from the expanded directories; none with
# --disable-relocatable, or with --enable-static-deps (it needs no
# libkbox.so).  runpath_is EXPECT: the last configure's
# SUPERVISOR_TO_LIBDIR is EXPECT ("" for none).
runpath_is() {
	rel=$(sed -n 's/^SUPERVISOR_TO_LIBDIR = //p' "$build/Makefile" 2>/dev/null)
	[ $status -eq 0 ] && [ -f "$build/Makefile" ] && [ "$rel" = "$1" ] && return 0
	why="exit $status; SUPERVISOR_TO_LIBDIR=$rel, expected $1; output: $(printf '%s' "$out" | tail -3)"
	return 1
}

# the plain configure that filled the cache
build=$prime out='' status=0
check default_links_shared libs_are shared
check relocatable_by_default runpath_is ../../lib
setup_for disable_static_deps_links_shared relocatable_debian_layout
configure_in debian --disable-static-deps --prefix=/usr --libexecdir=/usr/libexec \
	--libdir=/usr/lib/x86_64-linux-gnu
check disable_static_deps_links_shared libs_are shared
check relocatable_debian_layout runpath_is ../../lib/x86_64-linux-gnu
setup_for sanitizers_link_shared relocatable_libdir_from_exec_prefix
# shellcheck disable=SC2016 # configure expands them
configure_in opt --enable-sanitizers --prefix=/opt/k --exec-prefix=/opt/k/x86_64 \
	--libexecdir='${prefix}/libexec' --libdir='${exec_prefix}/lib64'
check sanitizers_link_shared libs_are shared
check relocatable_libdir_from_exec_prefix runpath_is ../../x86_64/lib64
setup_for enable_static_deps_links_the_static_archives static_deps_need_no_runpath
configure_in static --enable-static-deps
check enable_static_deps_links_the_static_archives libs_are static
check static_deps_need_no_runpath runpath_is ""
# as if the archives could not be linked (the check's cached answer)
setup_for enable_static_deps_that_cannot_link_stops
configure_in static-no --enable-static-deps kbox_cv_static_deps=no
check enable_static_deps_that_cannot_link_stops libs_are error
setup_for disable_relocatable_gives_no_runpath
configure_in fixed --disable-relocatable
check disable_relocatable_gives_no_runpath runpath_is ""
setup_for
tests_done
