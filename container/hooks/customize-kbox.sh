#!/bin/sh
# mmdebstrap's customize hook for the kernel image: $1 is the root.
#  - no compiler: bookworm's python3-scipy depends on python3-pythran,
#    which pulls in g++, boost's headers and python3-dev; none of them is
#    needed to import scipy, and code in a kernel has no business compiling
#    (they are purged, their dependants' claims on them ignored);
#  - the user kbox (uid 1000), /workspace and /home/kbox;
#  - matplotlib's font cache, built once;
#  - the recipe and the list of packages, in /usr/share/kbox.
set -eu
root=$1

# purge what compiles, by name: compilers, binutils, headers (-dev), pythran
purge=$(chroot "$root" dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n' |
	awk '$1 == "ii" { print $2 }' |
	grep -E '^(gcc(-[0-9]+)?|g\+\+(-[0-9]+)?|cpp(-[0-9]+)?|binutils.*|libbinutils|libctf0|libctf-nobfd0|libgprofng0|libasan[0-9]+|libtsan[0-9]+|liblsan[0-9]+|libubsan[0-9]+|libitm[0-9]+|libcc1-0|libisl[0-9]+|libmpc[0-9]+|libgcc-[0-9]+-dev|libstdc\+\+-[0-9]+-dev|lib.*-dev|linux-libc-dev|rpcsvc-proto|python3(\.[0-9]+)?-dev|python3-pythran|python3-gast|python3-beniget|python3-ply|python3-all-dev|python3-all)$' || true)
if [ -n "$purge" ]; then
	# shellcheck disable=SC2086 # a list of package names
	# (dpkg says each dependency it breaks: kept out of sight unless it fails)
	chroot "$root" dpkg --purge --force-depends $purge >"$root/tmp/purge.log" 2>&1 ||
		{ cat "$root/tmp/purge.log" >&2; exit 1; }
	rm -f "$root/tmp/purge.log"
fi
for tool in gcc cc g++ c++ cpp as ld; do
	if [ -e "$root/usr/bin/$tool" ]; then
		echo "customize-kbox.sh: /usr/bin/$tool is still there after the purge" >&2
		exit 1
	fi
done

chroot "$root" useradd --uid 1000 --user-group --no-create-home --home-dir /home/kbox \
	--shell /usr/sbin/nologin kbox
install -d -m 0755 -o 1000 -g 1000 "$root/workspace" "$root/home/kbox"
install -d -m 0755 "$root/usr/share/kbox"

# the font cache, so that the first plot neither waits for it nor warns
chroot "$root" env HOME=/nonexistent MPLCONFIGDIR=/usr/share/kbox/mpl \
	python3 -c 'import matplotlib.pyplot' >/dev/null
chmod -R a+rX "$root/usr/share/kbox"

mv "$root/tmp/kbox-recipe" "$root/usr/share/kbox/recipe"
chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' >"$root/usr/share/kbox/manifest"
# the engine gives these (mmdebstrap's advice for container images); in a
# container build (the root /: container/Containerfile) they are the
# engine's own mounts, which no layer keeps
[ "$root" = / ] || rm -f "$root/etc/resolv.conf" "$root/etc/hostname"
