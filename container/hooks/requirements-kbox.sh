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
# as nobody (65534), in the root (pivot_root), with no new privileges, in
# user, process, mount, IPC and host-name namespaces of its own (its /proc
# shows only its processes, its /dev/shm and user keyring are its own,
# and it has no /sys), in a session of its own without a terminal, with a
# session keyring of its own, no descriptor it did not need and limits on
# processes, file sizes, memory and descriptors, with the network (the
# index).  It installs into
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
	# root's, with no link out of it (a sbin leading to /tmp, first on
	# root's PATH), no FIFO, socket or device, and no mode root's would not
	# have: no write for group or others, no set-id or sticky bit
	find "$root/usr/local" \( -type l \( -lname '/*' -o -lname '*..*' \) -o -type p -o \
		-type s -o -type b -o -type c \) -delete
	chown -R -h 0:0 "$root/usr/local"
	chmod -R go-w,ug-s,-t "$root/usr/local"
	# and no extended attribute (an ACL that lets nobody write, say)
	python3 -I -S -c 'import os, sys
for d, dirs, files in os.walk(sys.argv[1]):
    for n in [d] + [os.path.join(d, f) for f in files if not os.path.islink(os.path.join(d, f))]:
        for a in os.listxattr(n, follow_symlinks=False):
            os.removexattr(n, a, follow_symlinks=False)' "$root/usr/local"
	exit 0
fi
[ "$1" = install ] || { echo "requirements-kbox.sh: install or restore, not $1" >&2; exit 2; }
chmod 0644 "$root/tmp/kbox-requirements.txt"
chown -R -h "$nobody:$nobody" "$root/usr/local"
# In pip's mount namespace, before anything of pip's runs: a /dev/shm of
# its own (mmdebstrap binds the host's into the tree), /dev/null for the
# tree's /dev/console (mmdebstrap makes it 0666: the host's console) and
# for /proc/keys and key-users (the host's nobody's keys by name), and no
# /sys; the tree becomes the namespace's root (pivot_root: nothing of
# the host's is left in it, and unlike a chroot it lets pip have a user
# namespace of its own); then, in a session of its own (no controlling
# terminal: nothing to push input into), as nobody, with no new
# privileges.  (The tree's own programs from there on, Debian's.)
inner='root=$1 id=$2
shift 2
mount -t tmpfs -o nosuid,nodev,size=64m,mode=1777 kbox-shm "$root/dev/shm" || exit 1
if [ -e "$root/dev/console" ]; then mount --bind /dev/null "$root/dev/console" || exit 1; fi
umount -l "$root/sys" 2>/dev/null
for k in keys key-users; do
	if [ -e "$root/proc/$k" ]; then mount --bind /dev/null "$root/proc/$k" || exit 1; fi
done
mount --rbind "$root" "$root" && cd "$root" && pivot_root . . || exit 1
/usr/bin/umount -l . && cd / || exit 1
exec /usr/bin/setsid /usr/bin/setpriv --reuid="$id" --regid="$id" --clear-groups \
	--no-new-privs -- "$@"'
# In the tree, as nobody: a user namespace of its own (nobody's user
# keyring there is its own, not the host's nobody's), a session keyring
# of its own (the one root's build runs in holds root's keys, which
# nobody would still possess), no descriptor but 0, 1 and 2, limits
# (1024 processes of the uid's, files of 4 GiB at most, 8 GiB of address
# space and an hour of CPU time a process, 4096 descriptors, no core
# file), a seccomp filter (no key management system call at all: keys
# are found by uid, and the host's nobody may hold some; no further user
# namespace; no system call of another ABI) and, where Linux has it, a
# Landlock scope; then pip, which has no capability in its namespace.
leave='import ctypes, os, resource as r, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def fail(what):
    sys.exit("requirements-kbox.sh: cannot %s: %s" % (what, os.strerror(ctypes.get_errno())))
# AUDIT_ARCH_*, add_key, request_key, keyctl, unshare, clone, clone3
abi = {"x86_64": (0xC000003E, 248, 249, 250, 272, 56, 435),
       "aarch64": (0xC00000B7, 217, 218, 219, 97, 220, 435)}.get(os.uname().machine)
if abi is None:
    sys.exit("requirements-kbox.sh: pip is confined on x86_64 and aarch64 only")
if libc.unshare(0x10000000) < 0:
    fail("make a user namespace")
for f, text in (("setgroups", "deny"), ("uid_map", "%d %d 1" % (os.getuid(), os.getuid())),
                ("gid_map", "%d %d 1" % (os.getgid(), os.getgid()))):
    with open("/proc/self/" + f, "w") as out:
        out.write(text)
if libc.syscall(abi[3], 1, None) < 0:
    fail("join a session keyring of its own")
for res, most in ((r.RLIMIT_NPROC, 1024), (r.RLIMIT_FSIZE, 4 << 30), (r.RLIMIT_AS, 8 << 30),
                  (r.RLIMIT_CPU, 3600), (r.RLIMIT_NOFILE, 4096), (r.RLIMIT_CORE, 0)):
    hard = r.getrlimit(res)[1]
    most = most if hard == r.RLIM_INFINITY else min(most, hard)
    r.setrlimit(res, (most, most))
os.closerange(3, os.sysconf("SC_OPEN_MAX"))
def op(code, k, jt=0, jf=0):
    return struct.pack("HBBI", code, jt, jf, k)
LD, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
ALLOW, EPERM, ENOSYS, NEWUSER = 0x7FFF0000, 0x50001, 0x50026, 0x10000000
prog = [op(LD, 4), op(JEQ, abi[0], 1, 0), op(RET, ENOSYS), op(LD, 0),
        op(JGE, 0x40000000, 0, 1), op(RET, ENOSYS)]
for nr in abi[1:4]:
    prog += [op(JEQ, nr, 0, 1), op(RET, EPERM)]
prog += [op(JEQ, abi[6], 0, 1), op(RET, ENOSYS)]
for nr in abi[4:6]:
    prog += [op(JEQ, nr, 0, 4), op(LD, 16), op(JSET, NEWUSER, 0, 1), op(RET, EPERM),
             op(RET, ALLOW)]
prog.append(op(RET, ALLOW))
code = ctypes.create_string_buffer(b"".join(prog))
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
fprog = Fprog(len(prog), ctypes.addressof(code))
if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) < 0:
    fail("install its seccomp filter")
# Landlock (ABI 6, Linux 6.12): no abstract unix socket or signal of the
# host'"'"'s (pip shares its network namespace); an older Linux has no scope
class Attr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]
if libc.syscall(444, None, 0, 1) >= 6:
    ruleset = libc.syscall(444, ctypes.byref(Attr(0, 0, 3)), ctypes.sizeof(Attr), 0)
    if ruleset < 0 or libc.syscall(446, ruleset, 0) < 0:
        fail("scope its abstract unix sockets and signals")
    os.close(ruleset)
os.execvp(sys.argv[1], sys.argv[1:])'
# What pip prints, with no control character (C0 but tab and newline,
# DEL, C1, and the bidirectional overrides: no escape sequence reaches the
# caller's terminal); a line that is not UTF-8 gets ? for its bytes
# above 127.  Read as it comes, 64 KiB at most at a time (a line need not
# end).
clean='binmode STDOUT; $| = 1;
my $tail = "";
sub out {
	my $s = shift;
	$s =~ s/[\x80-\xff]/?/g unless utf8::decode($s);
	$s =~ s/[\x00-\x08\x0b-\x1f\x7f-\x9f\x{200e}\x{200f}\x{202a}-\x{202e}\x{2066}-\x{2069}]//g;
	utf8::encode($s);
	print $s;
}
while (sysread(STDIN, my $s, 65536)) {
	$s = $tail . $s;
	# (a character cut at the end waits for the rest)
	$tail = $s =~ s/([\xc0-\xff][\x80-\xbf]{0,2})\z// ? $1 : "";
	out($_) for split /(?<=\n)/, $s;
}
out($tail);'
rc=$(mktemp)
# (its standard input nothing, its output a pipe: no terminal; two hours
# at most)
{
	timeout -s KILL 7200 \
		unshare --pid --fork --kill-child --mount --ipc --uts --mount-proc="$root/proc" \
		sh -c "$inner" sh "$root" "$nobody" \
		env -i PATH=/usr/bin:/bin HOME=/nonexistent LC_ALL=C.UTF-8 PIP_NO_CACHE_DIR=1 \
		PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_USER=0 \
		${KBOX_INDEX_URL:+PIP_INDEX_URL=$KBOX_INDEX_URL} \
		python3 -c "$leave" python3 -m pip install --break-system-packages \
		--no-warn-script-location -r /tmp/kbox-requirements.txt
	echo $? >"$rc"
} </dev/null 2>&1 | perl -e "$clean"
status=$(cat "$rc")
rm -f "$rc"
if [ "$status" = 137 ]; then
	echo "requirements-kbox.sh: pip was killed (two hours passed, or memory ran out)" >&2
fi
[ "$status" = 0 ] || exit "${status:-1}"
rm -f "$root/tmp/kbox-requirements.txt"
# whatever else it left (where anyone may write: /tmp, /var/tmp,
# /run/lock), but in /usr/local
find "$root" -xdev -path "$root/usr/local" -prune -o \( -user "$nobody" -o -group "$nobody" \) \
	-exec rm -rf {} + 2>/dev/null || true
mv "$root/usr/local" "$root/usr/.kbox-pip"
install -d -m 0755 "$root/usr/local"
