#!/bin/sh
# container/image.sh HELPER [--name NAME] [--rootfs DIR] [BUILD-OPTION...]:
# the kernel image, as `kbox image build` and `make image` make it.
#
# Without --rootfs: when the engine DOCKER_HOST names (default
# /var/run/docker.sock) has the image NAME (default $KBOX_IMAGE_NAME, else
# kbox-kernel) labelled with this recipe's hash already, it says so and
# does nothing.  Else it builds the root file system with
# container/build.sh (given the BUILD-OPTIONs: --packages, --requirements,
# --index-url, --out, --mirror; a tarball of the recipe in the cache is
# used as it is), and imports it through the Engine API with HELPER
# (kbox-engine), labelled with the recipe and what it adds.
# With --rootfs DIR (no engine; HELPER is not used): the tree unpacked
# into DIR, a new directory, for the bwrap backend's kbox start --rootfs.
# Exit status: 0; 1 the build or the unpacking failed; 2 bad options;
# 5 the engine refused or could not be reached.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
helper=${1:?usage: container/image.sh HELPER [--name NAME] [--rootfs DIR] [BUILD-OPTION...]}
shift
name=${KBOX_IMAGE_NAME:-kbox-kernel}
rootfs=
# the options of our own are taken out; the rest are build.sh's
n=$#
while [ "$n" -gt 0 ]; do
	case $1 in
	--name) name=${2:?--name needs a name}; shift 2; n=$((n - 2)) ;;
	--name=*) name=${1#--name=}; shift; n=$((n - 1)) ;;
	--rootfs) rootfs=${2:?--rootfs needs a directory}; shift 2; n=$((n - 2)) ;;
	--rootfs=*) rootfs=${1#--rootfs=}; shift; n=$((n - 1)) ;;
	*) set -- "$@" "$1"; shift; n=$((n - 1)) ;;
	esac
done
me=${KBOX_IMAGE_ME:-container/image.sh}
recipe=$("$here/build.sh" --print-recipe "$@") || exit 2
hash=$(printf '%s\n' "$recipe" | sha256sum | cut -d' ' -f1)

if [ -n "$rootfs" ]; then
	if [ -L "$rootfs" ] || { [ -e "$rootfs" ] && [ -n "$(ls -A "$rootfs" 2>/dev/null || echo x)" ]; }; then
		echo "$me: --rootfs $rootfs: exists and is not an empty directory" >&2
		exit 2
	fi
	"$here/build.sh" "$@" || exit 1
	tar=$("$here/build.sh" --print-path "$@")
	# unpacked into a new directory of our own beside it (no name someone
	# else could have made first, or linked elsewhere), then renamed onto
	# it, never through a link (mv -T: an empty directory is replaced, a
	# full one refused)
	part=$(mktemp -d "$(dirname "$rootfs")/.kbox-rootfs.XXXXXX") || exit 1
	# (an interrupted unpacking leaves nothing)
	trap 'rm -rf "$part"; exit 130' INT
	trap 'rm -rf "$part"; exit 143' TERM
	# (device nodes are the sandbox's own; as an ordinary user the files
	# are the user's)
	if ! tar -x --exclude='./dev/*' -f "$tar" -C "$part"; then
		rm -rf "$part"
		echo "$me: could not unpack $tar into $rootfs" >&2
		exit 1
	fi
	if ! mv -T "$part" "$rootfs"; then
		rm -rf "$part"
		echo "$me: --rootfs $rootfs: could not put the tree there (made meanwhile?)" >&2
		exit 1
	fi
	echo "$me: root file system in $rootfs (recipe sha256:$hash): kbox start --rootfs $rootfs"
	exit 0
fi

# The helper's error (JSON) $1: its message, said, and its exit status
# (2 for a usage error: a DOCKER_HOST kbox cannot use, say; else 5).
engine_failed() {
	printf '%s: %s\n' "$me" "$(printf '%s\n' "$1" | sed -n 's/.*"message":"\(.*\)"}}$/\1/p' |
		sed 's/\\"/"/g; s/\\\\/\\/g')" >&2
	case $1 in *'"kind":"usage"'*) exit 2 ;; esac
	exit 5
}

# the engine, and the image: up to date?  (a name that is in use by an
# image kbox did not build is not taken from its owner)
if ! have=$("$helper" image "$name" 2>/dev/null); then
	case $have in
	*'"kind":"no-image"'*) ;;
	*) engine_failed "$have" ;;
	esac
fi
case $have in
*"\"kbox.recipe\":\"sha256:$hash\""*)
	echo "$me: image $name is up to date (recipe sha256:$hash)"
	exit 0 ;;
*'"id":'*)
	case $have in *'"kbox.recipe":'*) ;; *)
		echo "$me: image $name is in the engine and kbox image build did not make it: choose another --name (or remove it yourself)" >&2
		exit 2 ;;
	esac ;;
esac
"$here/build.sh" "$@" || exit 1
tar=$("$here/build.sh" --print-path "$@")
labels=$("$here/build.sh" --print-labels "$@")
# shellcheck disable=SC2086 # the labels are KEY=VALUE words without blanks
if ! out=$("$helper" import "$tar" "$name" "$hash" $labels); then
	engine_failed "$out"
fi
echo "$me: image $name imported from $tar (recipe sha256:$hash)"
