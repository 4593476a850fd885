#!/bin/sh
# Install every Debian package kbox needs to build, run and test.  (The
# second line of -dev packages: what libzmq's static archive needs, for
# ./configure --enable-static-deps and its test; r-cran-irkernel: R's
# kernel, for tests/r_kernel.sh; json-schema-test-suite: the official
# JSON Schema tests, for tests/unit_schema.c.)
# Also creates the system user kbox that root's sandboxes run as.
# Idempotent and non-interactive; run as root (or through sudo).
set -eu

PKGS="
build-essential autoconf automake libtool pkg-config
libzmq3-dev libczmq-dev libsodium-dev libjansson-dev libseccomp-dev libcurl4-openssl-dev
libmicrohttpd-dev libwslay-dev libssl-dev
libpgm-dev libnorm-dev libbsd-dev libmd-dev uuid-dev libkrb5-dev libsystemd-dev
bubblewrap
clang libclang-rt-14-dev clang-format
mandoc groff-base
python3 python3-ipykernel python3-jupyter-client python3-zmq
python3-pandas python3-numpy python3-matplotlib python3-scipy
python3-jupyter-kernel-test python3-jsonschema jupyter-core jupyter-client
python3-nbclient jupyter-nbconvert jupyter-console python3-jupyter-server python3-websocket
json-schema-test-suite python3-mypy
procps time jq iproute2 openssl
r-cran-irkernel
"
# npm, for the MCP Inspector of tests/mcp_inspector.sh: Debian's, unless
# a node with npx is there already (nodesource's, say: Debian's npm would
# conflict with it)
if ! command -v npx >/dev/null 2>&1; then
	PKGS="$PKGS npm"
fi

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi

if [ -z "$missing" ]; then
	echo "setup: all packages present"
else
	export DEBIAN_FRONTEND=noninteractive
	echo "setup: installing:$missing"
	$SUDO apt-get update -q
	# shellcheck disable=SC2086
	$SUDO apt-get install -y -q --no-install-recommends $missing
fi

# Debian's r-cran-irkernel registers the kernelspec ir in
# /usr/share/jupyter/kernels, where kbox looks (kbox kernelspecs); should a
# package not, register the one IRkernel ships.
ir=/usr/lib/R/site-library/IRkernel/kernelspec
if [ ! -e /usr/share/jupyter/kernels/ir/kernel.json ] && [ -f "$ir/kernel.json" ]; then
	echo "setup: registering the kernelspec ir in /usr/share/jupyter/kernels"
	$SUDO mkdir -p /usr/share/jupyter/kernels/ir
	$SUDO cp "$ir"/* /usr/share/jupyter/kernels/ir/
fi

# Under root, kbox runs each sandbox as an unprivileged system user, never
# as root (kbox(7), IDENTITY); `kbox doctor --fix` makes the same account.
# Only root's kbox needs it: as root, or where sudo works.
if ! id kbox >/dev/null 2>&1; then
	if [ "$(id -u)" -eq 0 ] || sudo -n true 2>/dev/null; then
		echo "setup: creating the system user kbox (root's sandboxes run as it)"
		$SUDO useradd --system --user-group --no-create-home --home-dir /nonexistent \
			--shell /usr/sbin/nologin --comment "kbox sandboxes" kbox
	else
		echo "setup: no system user kbox (needed only to run kbox as root: sudo kbox doctor --fix)"
	fi
fi
# ... and each session's sandbox under root a uid of its own, from kbox's
# range in /etc/subuid (as Docker's userns-remap takes dockremap's): the
# first 65536 from 100000 up that no range and no account holds.
if id kbox >/dev/null 2>&1 && ! grep -q '^kbox:' /etc/subuid 2>/dev/null &&
	{ [ "$(id -u)" -eq 0 ] || sudo -n true 2>/dev/null; }; then
	start=$({ cat /etc/subuid 2>/dev/null; getent passwd | awk -F: '{ print "-:" $3 ":1" }'; } |
		awk -F: 'BEGIN { n = 65536; s = 100000 }
			{ a[NR] = $2; c[NR] = $3 }
			END { do { moved = 0; for (i in a) if (a[i] < s + n && s < a[i] + c[i]) {
				s = int((a[i] + c[i] + n - 1) / n) * n; moved = 1 } } while (moved); print s }')
	echo "setup: giving kbox the uids $start-$((start + 65535)) for sessions' sandboxes"
	$SUDO usermod --add-subuids "$start-$((start + 65535))" kbox
fi
