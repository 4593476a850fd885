#!/bin/sh
# mmdebstrap's customize hooks for the user's pip requirements
# (container/build.sh --requirements):
#
#   requirements-kbox.sh install ROOT   (before customize-kbox.sh)
#   requirements-kbox.sh restore ROOT   (after it, the last hook)
#
# The requirements are in ROOT's /tmp/kbox-requirements.txt, the package
# index is KBOX_INDEX_URL (pip's default when empty).
#
# pip runs a source distribution's build code, so it never runs as root:
# as nobody (65534), in the root by chroot, with no new privileges, in
# process, mount, IPC and host-name namespaces of its own (its /proc shows
# only its processes), with the network (the index).  It installs into
# /usr/local, which is nobody's meanwhile, beside Debian's packages
# (Debian marks its Python as managed by apt: --break-system-packages
# says that is meant), and keeps no cache.  It runs before
# customize-kbox.sh, so what it builds still finds the compilers that
# hook purges.  Then /usr/local is set aside (as /usr/.kbox-pip) while
# customize-kbox.sh runs, as root, the programs of the root: neither a
# .pth file nor a program the requirements installed runs as root (a
# /usr/local/bin/dpkg, say, would come first on PATH); restore puts it
# back, root's, when nothing runs in the root any more.
set -eu
root=$2
nobody=65534
if [ "$1" = restore ]; then
	rm -rf "$root/usr/local"
	mv "$root/usr/.kbox-pip" "$root/usr/local"
	chown -R -h 0:0 "$root/usr/local"
	exit 0
fi
[ "$1" = install ] || { echo "requirements-kbox.sh: install or restore, not $1" >&2; exit 2; }
chmod 0644 "$root/tmp/kbox-requirements.txt"
chown -R -h "$nobody:$nobody" "$root/usr/local"
unshare --pid --fork --kill-child --mount --ipc --uts --mount-proc="$root/proc" \
	setpriv --no-new-privs -- \
	chroot --userspec="$nobody:$nobody" --groups="$nobody" "$root" \
	env -i PATH=/usr/bin:/bin HOME=/nonexistent LC_ALL=C.UTF-8 PIP_NO_CACHE_DIR=1 \
	PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_USER=0 \
	${KBOX_INDEX_URL:+PIP_INDEX_URL=$KBOX_INDEX_URL} \
	python3 -m pip install --break-system-packages --no-warn-script-location \
	-r /tmp/kbox-requirements.txt
rm -f "$root/tmp/kbox-requirements.txt"
# what it left where anyone may write
find "$root/tmp" "$root/var/tmp" -mindepth 1 -user "$nobody" -delete 2>/dev/null || true
mv "$root/usr/local" "$root/usr/.kbox-pip"
install -d -m 0755 "$root/usr/local"
