#!/bin/sh
# Install every Debian package kbox needs to build, run and test.  (The
# second line of -dev packages: what libzmq's static archive needs, for
# ./configure --enable-static-deps and its test.)
# Idempotent and non-interactive; run as root (or through sudo).
set -eu

PKGS="
build-essential autoconf automake libtool pkg-config
libzmq3-dev libczmq-dev libsodium-dev libjansson-dev libseccomp-dev
libpgm-dev libnorm-dev libbsd-dev libmd-dev uuid-dev libkrb5-dev libsystemd-dev
bubblewrap
clang libclang-rt-14-dev
mandoc
python3 python3-ipykernel python3-jupyter-client python3-zmq
python3-pandas python3-numpy python3-matplotlib python3-scipy
python3-jupyter-kernel-test python3-jsonschema jupyter-core jupyter-client
procps time
"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	echo "setup: all packages present"
	exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
echo "setup: installing:$missing"
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing
