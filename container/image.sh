#!/bin/sh
# container/image.sh HELPER [BUILD-OPTION...]: the kernel image of backend
# docker.  When the engine DOCKER_HOST names (default
# /var/run/docker.sock) has the image $KBOX_IMAGE_NAME (default
# kbox-kernel) labelled with this recipe's hash already, it says so and
# does nothing.  Else it builds the root file system with
# container/build.sh (given the BUILD-OPTIONs: --packages, --out,
# --mirror; a tarball of the recipe in the cache is used as it is), and
# imports it through the Engine API with HELPER (kbox-engine).  `make
# image` runs it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
helper=${1:?usage: container/image.sh HELPER [BUILD-OPTION...]}
shift
name=${KBOX_IMAGE_NAME:-kbox-kernel}
hash=$("$here/build.sh" --print-recipe "$@" | sha256sum | cut -d' ' -f1)
if "$helper" image "$name" 2>/dev/null | grep -q "\"kbox.recipe\":\"sha256:$hash\""; then
	echo "container/image.sh: image $name is up to date (recipe sha256:$hash)"
	exit 0
fi
"$here/build.sh" "$@"
tar=$("$here/build.sh" --print-path "$@")
if ! out=$("$helper" import "$tar" "$name" "$hash"); then
	echo "container/image.sh: $out" >&2
	exit 1
fi
echo "container/image.sh: image $name imported from $tar (recipe sha256:$hash)"
