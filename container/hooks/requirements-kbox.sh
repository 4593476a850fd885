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
# only its processes; its /dev/shm is its own, and it has no /sys), in a
# session of its own without a terminal, with a session keyring of its
# own and no descriptor it did not need, with the network (the index).  It installs into
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
# In pip's mount namespace, before anything of pip's runs: a /dev/shm of
# its own (mmdebstrap binds the host's into the tree), /dev/null for the
# tree's /dev/console (mmdebstrap makes it 0666: the host's console) and
# no /sys; then,
# in a session of its own (no controlling terminal: nothing to push input
# into), as nobody, chrooted, with no new privileges.
inner='root=$1 id=$2
shift 2
mount -t tmpfs -o nosuid,nodev,size=64m,mode=1777 kbox-shm "$root/dev/shm" || exit 1
if [ -e "$root/dev/console" ]; then mount --bind /dev/null "$root/dev/console" || exit 1; fi
umount -l "$root/sys" 2>/dev/null
exec setsid setpriv --no-new-privs -- chroot --userspec="$id:$id" --groups="$id" "$root" "$@"'
# In the tree, still ours: a session keyring of its own (the one root's
# build runs in holds root's keys, which nobody would still possess), and
# no descriptor but 0, 1 and 2; then pip.
leave='import ctypes, os, sys
nr = {"x86_64": 250, "aarch64": 219, "i686": 288, "i386": 288, "armv7l": 311,
      "ppc64le": 280, "s390x": 280, "riscv64": 219}.get(os.uname().machine)
if nr is None or ctypes.CDLL(None, use_errno=True).syscall(nr, 1, None) < 0:
    sys.exit("requirements-kbox.sh: cannot join a session keyring of its own")
os.closerange(3, os.sysconf("SC_OPEN_MAX"))
os.execvp(sys.argv[1], sys.argv[1:])'
rc=$(mktemp)
# (its standard input nothing, its output a pipe: no terminal; and no
# control byte of its output reaches the caller's, so no escape sequence)
{
	unshare --pid --fork --kill-child --mount --ipc --uts --mount-proc="$root/proc" \
		sh -c "$inner" sh "$root" "$nobody" \
		env -i PATH=/usr/bin:/bin HOME=/nonexistent LC_ALL=C.UTF-8 PIP_NO_CACHE_DIR=1 \
		PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_USER=0 \
		${KBOX_INDEX_URL:+PIP_INDEX_URL=$KBOX_INDEX_URL} \
		python3 -c "$leave" python3 -m pip install --break-system-packages \
		--no-warn-script-location -r /tmp/kbox-requirements.txt
	echo $? >"$rc"
} </dev/null 2>&1 | LC_ALL=C tr -d '\000-\010\013-\037\177'
status=$(cat "$rc")
rm -f "$rc"
[ "$status" = 0 ] || exit "${status:-1}"
rm -f "$root/tmp/kbox-requirements.txt"
# whatever else it left (where anyone may write: /tmp, /var/tmp,
# /run/lock), but in /usr/local
find "$root" -xdev -path "$root/usr/local" -prune -o \( -user "$nobody" -o -group "$nobody" \) \
	-exec rm -rf {} + 2>/dev/null || true
mv "$root/usr/local" "$root/usr/.kbox-pip"
install -d -m 0755 "$root/usr/local"
