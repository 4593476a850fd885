#!/bin/sh
# container/build.sh: the kernel image's root file system, built offline
# from Debian packages with mmdebstrap (Debian's mirror is all it needs).
#
#   container/build.sh [--out DIR] [--packages LIST] [--mirror URL]
#   container/build.sh --print-recipe [--packages LIST]
#   container/build.sh --print-path [--out DIR] [--packages LIST]
#
# The recipe (printed by --print-recipe) is the suite, the packages and
# the hooks' own text; its SHA-256 names the result, DIR/HASH.tar
# (--print-path prints it), so a second build of the same recipe says
# "up to date" and does nothing.  DIR: $KBOX_IMAGE_CACHE, else
# ~/.cache/kbox/image.
# LIST: extra Debian packages, separated by commas or spaces.  As root
# mmdebstrap runs as root; as another user, in a user namespace of the
# user's subordinate ids (/etc/subuid, the uidmap package).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=${KBOX_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kbox/image}
extra=
mirror=
print=no
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=${2:?--out needs a directory}; shift 2 ;;
	--out=*) out=${1#--out=}; shift ;;
	--packages) extra=${2?--packages needs a list}; shift 2 ;;
	--packages=*) extra=${1#--packages=}; shift ;;
	--mirror) mirror=${2:?--mirror needs a URL}; shift 2 ;;
	--mirror=*) mirror=${1#--mirror=}; shift ;;
	--print-recipe) print=yes; shift ;;
	--print-path) print=path; shift ;;
	-h | --help)
		sed -n '2,16s/^# \{0,1\}//p' "$0"
		exit 0 ;;
	*)
		echo "container/build.sh: unknown argument \"$1\" (see --help)" >&2
		exit 2 ;;
	esac
done

# the packages, sorted, each once; a name that is no Debian package name
# is refused here rather than by apt half-way through
base="python3-ipykernel python3-numpy python3-pandas python3-matplotlib python3-scipy"
pkgs=$(printf '%s\n' $base $(printf '%s' "$extra" | tr ',' ' ') | sort -u)
for p in $pkgs; do
	case $p in
	[a-z0-9]*[!a-z0-9.+-]* | [!a-z0-9]*)
		echo "container/build.sh: \"$p\" is no Debian package name (lower-case letters, digits, '+', '-', '.')" >&2
		exit 2 ;;
	esac
done

recipe() {
	echo "kbox-image 1"
	echo "suite bookworm"
	echo "variant minbase"
	echo "include $(echo $pkgs | tr ' ' ',')"
	for h in "$here"/hooks/*.sh; do
		echo "hook $(basename "$h") $(sha256sum <"$h" | cut -d' ' -f1)"
	done
}
if [ "$print" = yes ]; then
	recipe
	exit 0
fi
hash=$(recipe | sha256sum | cut -d' ' -f1)
if [ "$print" = path ]; then
	echo "$out/$hash.tar"
	exit 0
fi
if [ -f "$out/$hash.tar" ]; then
	echo "container/build.sh: up to date: $out/$hash.tar"
	exit 0
fi
command -v mmdebstrap >/dev/null || {
	echo "container/build.sh: mmdebstrap is not installed (apt-get install mmdebstrap)" >&2
	exit 1
}
mkdir -p "$out"
# the hooks, where the user mmdebstrap maps can read them, with the recipe
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
cp "$here"/hooks/*.sh "$tmp/"
recipe >"$tmp/recipe"
chmod -R a+rX "$tmp"
echo "container/build.sh: building $out/$hash.tar (a few minutes: packages from the mirror)"
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1700000000} mmdebstrap --variant=minbase --format=tar \
	--aptopt='APT::Install-Recommends "false"' --aptopt='Acquire::Languages "none"' \
	--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
	--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--include="$(echo $pkgs | tr ' ' ',')" \
	--customize-hook="upload $tmp/recipe /tmp/kbox-recipe" \
	--customize-hook="$tmp/customize-kbox.sh \"\$1\"" \
	bookworm "$out/$hash.tar.part" $mirror
mv "$out/$hash.tar.part" "$out/$hash.tar"
echo "container/build.sh: built $out/$hash.tar"
