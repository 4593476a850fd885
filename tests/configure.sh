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
set -u
: "${top_srcdir:?}" "${top_builddir:?}"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kbox-configure-XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM

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
if ! (cd "$prime" && "$src/configure" -q --cache-file=config.cache >/dev/null 2>&1); then
	tail -20 "$prime/config.log" | sed 's/^/# /'
	echo "Bail out! a plain configure fails"
	exit 1
fi
grep -v -e '^ac_cv_env_' -e '^pkg_cv_' "$prime/config.cache" >"$tmp/config.cache" || exit 99
# cached ARGS...: $src/configure -q ARGS in the current directory, from a
# copy of the cache
cached() {
	cp "$tmp/config.cache" config.cache && "$src/configure" -q --cache-file=config.cache "$@"
}

pcdirs=$(pkg-config --variable pc_path pkg-config 2>/dev/null)
[ -n "$pcdirs" ] || pcdirs=/usr/local/lib/x86_64-linux-gnu/pkgconfig:/usr/local/lib/pkgconfig:/usr/local/share/pkgconfig:/usr/lib/x86_64-linux-gnu/pkgconfig:/usr/lib/pkgconfig:/usr/share/pkgconfig

n=0
failed=0
for dep in "libzmq libzmq3-dev" "libczmq libczmq-dev" "libsodium libsodium-dev" "jansson libjansson-dev" "libcurl libcurl4-openssl-dev"; do
	set -- $dep
	pc=$1 pkg=$2
	n=$((n + 1))
	pcdir="$tmp/pc-$pc"
	mkdir -p "$pcdir"
	old_ifs=$IFS
	IFS=:
	for d in $pcdirs; do
		[ -d "$d" ] || continue
		for f in "$d"/*.pc; do
			[ -e "$f" ] || continue
			base=$(basename "$f")
			[ "$base" = "$pc.pc" ] && continue
			[ -e "$pcdir/$base" ] || ln -s "$f" "$pcdir/$base"
		done
	done
	IFS=$old_ifs
	build="$tmp/build-$pc"
	mkdir -p "$build"
	out=$(cd "$build" && PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR="$pcdir" cached 2>&1)
	rc=$?
	last=$(printf '%s\n' "$out" | grep 'configure: error' | tail -1)
	case "$last" in
	*"$pc"*"not found"*"Debian package $pkg"*)
		if [ $rc -ne 0 ]; then
			echo "ok $n - missing_${pc}_names_debian_package_$pkg"
			continue
		fi ;;
	esac
	echo "# exit $rc; output: $(printf '%s' "$out" | tail -3)"
	echo "not ok $n - missing_${pc}_names_debian_package_$pkg"
	failed=$((failed + 1))
done

# configure_in NAME ARGS...: configure with ARGS (from the cache) in a
# fresh build dir $build; its output in $out, its exit status in $rc.  The
# tests after it look at that build; a few share one configure, since
# what they check is independent (the libraries, the RUNPATH).
configure_in() {
	build="$tmp/build-$1"
	shift
	mkdir -p "$build"
	out=$(cd "$build" && cached "$@" 2>&1)
	rc=$?
}

# The programs' libraries: shared by default (as distributions want), the
# static archives with --enable-static-deps (they link here: setup.sh
# installs them); --enable-static-deps that cannot be met stops configure.
# libs_are NAME EXPECT: the test NAME of the last configure; EXPECT is
# "static", "shared" or "error" (nonzero exit naming the option).
libs_are() {
	name=$1 expect=$2
	n=$((n + 1))
	libs=$(sed -n 's/^STATIC_SUPERVISOR_LIBS = //p' "$build/Makefile" 2>/dev/null)
	ok=no
	case $expect in
	static) [ $rc -eq 0 ] && case $libs in -Wl,-Bstatic\ -lczmq\ -lzmq*) ok=yes ;; esac ;;
	shared) [ $rc -eq 0 ] && [ -f "$build/Makefile" ] && [ -z "$libs" ] && ok=yes ;;
	error) [ $rc -ne 0 ] && printf '%s\n' "$out" |
		grep -q 'configure: error: --enable-static-deps: cannot link the static archives' && ok=yes ;;
	esac
	if [ $ok = yes ]; then
		echo "ok $n - $name"
	else
		echo "# exit $rc; STATIC_SUPERVISOR_LIBS=$libs; output: $(printf '%s' "$out" | tail -3)"
		echo "not ok $n - $name"
		failed=$((failed + 1))
	fi
}

# kbox-supervisor's RUNPATH relative to itself ($ORIGIN/...): the way from
# $(pkglibexecdir) to $(libdir), from the expanded directories; none with
# --disable-relocatable, or with --enable-static-deps (it needs no
# libkbox.so).  runpath_is NAME EXPECT: the test NAME of the last
# configure; EXPECT is SUPERVISOR_TO_LIBDIR, or "" for none.
runpath_is() {
	name=$1 expect=$2
	n=$((n + 1))
	rel=$(sed -n 's/^SUPERVISOR_TO_LIBDIR = //p' "$build/Makefile" 2>/dev/null)
	if [ $rc -eq 0 ] && [ -f "$build/Makefile" ] && [ "$rel" = "$expect" ]; then
		echo "ok $n - $name"
	else
		echo "# exit $rc; SUPERVISOR_TO_LIBDIR=$rel, expected $expect; output: $(printf '%s' "$out" | tail -3)"
		echo "not ok $n - $name"
		failed=$((failed + 1))
	fi
}

# the plain configure that filled the cache
build=$prime out= rc=0
libs_are default_links_shared shared
runpath_is relocatable_by_default ../../lib
configure_in debian --disable-static-deps --prefix=/usr --libexecdir=/usr/libexec \
	--libdir=/usr/lib/x86_64-linux-gnu
libs_are disable_static_deps_links_shared shared
runpath_is relocatable_debian_layout ../../lib/x86_64-linux-gnu
configure_in opt --enable-sanitizers --prefix=/opt/k --exec-prefix=/opt/k/x86_64 \
	--libexecdir='${prefix}/libexec' --libdir='${exec_prefix}/lib64'
libs_are sanitizers_link_shared shared
runpath_is relocatable_libdir_from_exec_prefix ../../x86_64/lib64
configure_in static --enable-static-deps
libs_are enable_static_deps_links_the_static_archives static
runpath_is static_deps_need_no_runpath ""
# as if the archives could not be linked (the check's cached answer)
configure_in static-no --enable-static-deps kbox_cv_static_deps=no
libs_are enable_static_deps_that_cannot_link_stops error
configure_in fixed --disable-relocatable
runpath_is disable_relocatable_gives_no_runpath ""
echo "1..$n"
[ $failed -eq 0 ]
