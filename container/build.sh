#!/bin/sh
# container/build.sh: the kernel image's root file system, built offline
# from Debian packages with mmdebstrap (Debian's mirror is all it needs).
#
#   container/build.sh [--out DIR] [--packages LIST] [--requirements FILE]
#                      [--index-url URL] [--mirror URL]
#   container/build.sh --print-recipe | --print-labels [RECIPE-OPTION...]
#   container/build.sh --print-path [--out DIR] [RECIPE-OPTION...]
#
# The recipe (printed by --print-recipe) is the suite, the packages, the
# requirements' text and the hooks' own; its SHA-256 names the result,
# DIR/HASH.tar (--print-path prints it), so a second build of the same
# recipe says "up to date" and does nothing.  DIR: $KBOX_IMAGE_CACHE,
# else ~/.cache/kbox/image.  RECIPE-OPTIONs: --packages, --requirements.
# LIST: extra Debian packages, separated by commas or spaces.  FILE: a
# pip requirements file, installed with pip (python3-pip is added) from
# the package index URL (else PIP_INDEX_URL's, else pip's default); the
# index is not part of the recipe: pin versions.  --print-labels: the
# image's labels that say what was added (kbox.packages=LIST,
# kbox.requirements=sha256:HASH).  As root mmdebstrap runs as root; as
# another user, in a user namespace of the user's subordinate ids
# (/etc/subuid, the uidmap package).
set -eu
# (the recipe's lists are sorted the same whatever the caller's locale)
export LC_ALL=C

here=$(cd "$(dirname "$0")" && pwd)
me=${KBOX_IMAGE_ME:-container/build.sh}
out=${KBOX_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kbox/image}
extra=
mirror=
reqs=
index=${PIP_INDEX_URL:-}
print=no
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=${2:?--out needs a directory}; shift 2 ;;
	--out=*) out=${1#--out=}; shift ;;
	--packages) extra=${2?--packages needs a list}; shift 2 ;;
	--packages=*) extra=${1#--packages=}; shift ;;
	--requirements) reqs=${2:?--requirements needs a file}; shift 2 ;;
	--requirements=*) reqs=${1#--requirements=}; shift ;;
	--index-url) index=${2:?--index-url needs a URL}; shift 2 ;;
	--index-url=*) index=${1#--index-url=}; shift ;;
	--mirror) mirror=${2:?--mirror needs a URL}; shift 2 ;;
	--mirror=*) mirror=${1#--mirror=}; shift ;;
	--print-recipe) print=yes; shift ;;
	--print-path) print=path; shift ;;
	--print-labels) print=labels; shift ;;
	-h | --help)
		sed -n '2,22s/^# \{0,1\}//p' "$0"
		exit 0 ;;
	*)
		echo "$me: unknown argument \"$1\" (see --help)" >&2
		exit 2 ;;
	esac
done

# the packages, sorted, each once; a name that is no Debian package name
# is refused here rather than by apt half-way through
base="python3-ipykernel python3-numpy python3-pandas python3-matplotlib python3-scipy"
if [ -n "$reqs" ]; then
	if [ ! -f "$reqs" ] || [ ! -r "$reqs" ]; then
		echo "$me: --requirements $reqs: no readable file" >&2
		exit 2
	fi
	base="$base python3-pip"
	reqs_hash=$(sha256sum <"$reqs" | cut -d' ' -f1)
fi
# shellcheck disable=SC2046 # (the words of LIST)
added=$(printf '%s\n' $(printf '%s' "$extra" | tr ',' ' ') | sort -u)
pkgs=$(printf '%s\n' $base $added | sort -u)
for p in $pkgs; do
	case $p in
	[a-z0-9]*[!a-z0-9.+-]* | [!a-z0-9]*)
		echo "$me: \"$p\" is no Debian package name (lower-case letters, digits, '+', '-', '.')" >&2
		exit 2 ;;
	esac
done

recipe() {
	echo "kbox-image 1"
	echo "suite bookworm"
	echo "variant minbase"
	echo "include $(echo $pkgs | tr ' ' ',')"
	if [ -n "$reqs" ]; then
		echo "requirements $reqs_hash"
		echo "hook requirements-kbox.sh $(sha256sum <"$here/hooks/requirements-kbox.sh" | cut -d' ' -f1)"
	fi
	echo "hook customize-kbox.sh $(sha256sum <"$here/hooks/customize-kbox.sh" | cut -d' ' -f1)"
}
if [ "$print" = yes ]; then
	recipe
	exit 0
fi
if [ "$print" = labels ]; then
	echo "kbox.packages=$(echo $added | tr ' ' ',')"
	[ -z "$reqs" ] || echo "kbox.requirements=sha256:$reqs_hash"
	exit 0
fi
hash=$(recipe | sha256sum | cut -d' ' -f1)
if [ "$print" = path ]; then
	echo "$out/$hash.tar"
	exit 0
fi
if [ -f "$out/$hash.tar" ]; then
	echo "$me: up to date: $out/$hash.tar"
	exit 0
fi
command -v mmdebstrap >/dev/null || {
	echo "$me: mmdebstrap is not installed (apt-get install mmdebstrap)" >&2
	exit 1
}
mkdir -p "$out"
# the hooks, where the user mmdebstrap maps can read them, with the recipe;
# the tarball is written under a name of this build's own (another build
# of the recipe may run beside it), renamed when whole
tmp=$(mktemp -d)
part=$(mktemp "$out/$hash.tar.part.XXXXXX") || exit 1
trap 'rm -rf "$tmp" "$part"' EXIT
trap 'rm -rf "$tmp" "$part"; echo "$me: interrupted" >&2; exit 130' INT
trap 'rm -rf "$tmp" "$part"; echo "$me: terminated" >&2; exit 143' TERM
cp "$here"/hooks/*.sh "$tmp/"
recipe >"$tmp/recipe"
set --
restore=
if [ -n "$reqs" ]; then
	cp "$reqs" "$tmp/requirements.txt"
	set -- --customize-hook="upload $tmp/requirements.txt /tmp/kbox-requirements.txt" \
		--customize-hook="env KBOX_INDEX_URL='$index' $tmp/requirements-kbox.sh install \"\$1\""
	restore="$tmp/requirements-kbox.sh restore \"\$1\""
	case $index in *\'*)
		echo "$me: --index-url: a URL with a quote in it" >&2
		exit 2 ;;
	esac
fi
chmod -R a+rX "$tmp"
echo "$me: building $out/$hash.tar (a few minutes: packages from the mirror)"
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1700000000} mmdebstrap --variant=minbase --format=tar \
	--aptopt='APT::Install-Recommends "false"' --aptopt='Acquire::Languages "none"' \
	--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
	--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--include="$(echo $pkgs | tr ' ' ',')" \
	--customize-hook="upload $tmp/recipe /tmp/kbox-recipe" "$@" \
	--customize-hook="$tmp/customize-kbox.sh \"\$1\"" ${restore:+--customize-hook="$restore"} \
	bookworm "$part" $mirror || {
	echo "$me: the build failed: mmdebstrap's messages above say why" >&2
	exit 1
}
chmod 0644 "$part"
mv "$part" "$out/$hash.tar"
echo "$me: built $out/$hash.tar"
