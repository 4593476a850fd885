#!/bin/sh
# mmdebstrap's customize hook for the user's pip requirements
# (container/build.sh --requirements): $1 is the root, the requirements
# are in its /tmp/kbox-requirements.txt, the package index is
# KBOX_INDEX_URL (pip's default when empty).  pip installs them into
# /usr/local as root, beside Debian's packages (Debian marks its Python
# as managed by apt: --break-system-packages says that is meant), and
# keeps no cache.  It runs before customize-kbox.sh, so what pip builds
# from a source distribution still finds the compilers that hook purges.
set -eu
root=$1
chroot "$root" env HOME=/nonexistent PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
	PIP_NO_INPUT=1 ${KBOX_INDEX_URL:+PIP_INDEX_URL=$KBOX_INDEX_URL} \
	python3 -m pip install --break-system-packages --root-user-action=ignore \
	--no-warn-script-location -r /tmp/kbox-requirements.txt
rm -f "$root/tmp/kbox-requirements.txt"
