#!/bin/sh
# container/image.sh HELPER [BUILD-OPTION...]: the kernel image of backend
# docker.  Builds its root file system with container/build.sh (given
# the BUILD-OPTIONs: --packages, --out, --mirror), then imports it through
# the Engine API with HELPER (kbox-engine) as image $KBOX_IMAGE_NAME
# (default kbox-kernel) into the engine DOCKER_HOST names (default
# /var/run/docker.sock).  Both steps do nothing when their result is
# there already: the tarball by the recipe's hash, the image by its label
# kbox.recipe.  `make image` runs it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
helper=${1:?usage: container/image.sh HELPER [BUILD-OPTION...]}
shift
name=${KBOX_IMAGE_NAME:-kbox-kernel}
"$here/build.sh" "$@"
tar=$("$here/build.sh" --print-path "$@")
hash=$(basename "$tar" .tar)
"$helper" import "$tar" "$name" "$hash"
