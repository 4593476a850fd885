# tests/security/syscalls.py — what a session's kernel may and may not ask
# of Linux: the system calls Docker's default seccomp profile refuses,
# kbox's own refusals, and what must still work.  Run in a session by
# tests/security/syscalls.sh (bwrap: isolation.sh; docker: docker.sh);
# prints "NAME RESULT" lines, RESULT an errno's name, "ok" or "absent".
# Raw system calls go by their x86_64 or aarch64 number (a call the
# architecture lacks is "absent"), the others through Python's os and
# socket.
import ctypes, errno, os, socket, stat
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
X86 = os.uname().machine == "x86_64"
NR = {  # name: (x86_64, aarch64), None where the architecture has no such call
    "personality": (135, 92), "socket": (41, 198), "mknod": (133, None), "mknodat": (259, 33),
    "mbind": (237, 235), "set_mempolicy": (238, 237), "get_mempolicy": (239, 236),
    "migrate_pages": (256, 238), "move_pages": (279, 239), "set_mempolicy_home_node": (450, 450),
    "memfd_secret": (447, 447), "modify_ldt": (154, None), "fanotify_init": (300, 262),
    "fanotify_mark": (301, 263), "pidfd_getfd": (438, 438), "process_madvise": (440, 440),
    "sethostname": (170, 161), "setdomainname": (171, 162), "lsm_get_self_attr": (459, 459),
    "lsm_set_self_attr": (460, 460), "lsm_list_modules": (461, 461), "open_tree_attr": (467, 467),
    "file_getattr": (468, 468), "file_setattr": (469, 469), "listns": (470, 470),
    "getpmsg": (181, None), "putpmsg": (182, None), "afs_syscall": (183, None),
    "tuxcall": (184, None), "security": (185, None), "vserver": (236, None),
}
def sc(name, *args):
    """(result, errno name) of the raw system call NAME; (None, "absent") where there is none"""
    nr = NR[name][0 if X86 else 1]
    if nr is None:
        return None, "absent"
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_ulong(a & (1 << 64) - 1) for a in args])
    return r, ("ok" if r != -1 else errno.errorcode[ctypes.get_errno()])
def e(f):
    try:
        f()
        return "ok"
    except OSError as x:
        return errno.errorcode[x.errno]
# refused outright (where allowed, each of these does nothing: a query, a
# zero length, a bad descriptor; the descriptors it could make are closed)
for name, args in (
        ("mbind", (0, 0, 0, 0, 0, 0)), ("set_mempolicy", (0, 0, 0)), ("get_mempolicy", (0, 0, 0, 0, 0)),
        ("migrate_pages", (0, 0, 0, 0)), ("move_pages", (0, 0, 0, 0, 0, 0)),
        ("set_mempolicy_home_node", (0, 0, 0, 0)), ("memfd_secret", (0,)), ("modify_ldt", (0, 0, 0)),
        ("fanotify_init", (0x200, 0)),  # FAN_REPORT_FID: allowed without privilege
        ("fanotify_mark", (-1, 1, 2, -100, 0)), ("pidfd_getfd", (-1, 0, 0)),
        ("process_madvise", (-1, 0, 0, 0, 0)), ("sethostname", (0, 0)), ("setdomainname", (0, 0)),
        ("lsm_get_self_attr", (100, 0, 0, 0)), ("lsm_set_self_attr", (100, 0, 0, 0)),
        ("lsm_list_modules", (0, 0, 0)), ("open_tree_attr", (-1, 0, 0, 0, 0)),
        ("file_getattr", (-1, 0, 0, 0, 0)), ("file_setattr", (-1, 0, 0, 0, 0)), ("listns", (0, 0, 0, 0)),
        ("getpmsg", (0, 0, 0, 0, 0)), ("putpmsg", (0, 0, 0, 0, 0)), ("afs_syscall", ()),
        ("tuxcall", ()), ("security", ()), ("vserver", ())):
    r, res = sc(name, *args)
    if name in ("memfd_secret", "fanotify_init") and r is not None and r >= 0:
        os.close(r)
    print(name, res)
# personality: what Docker allows (each set back to PER_LINUX after)
def pers(label, v):
    print("personality_" + label, sc("personality", v)[1])
    sc("personality", 0)
for label, v in (("query", 0xffffffff), ("PER_LINUX", 0), ("PER_LINUX32", 0x8),
                 ("UNAME26", 0x20000), ("UNAME26_PER_LINUX32", 0x20008),
                 ("ADDR_NO_RANDOMIZE", 0x0040000), ("READ_IMPLIES_EXEC", 0x0400000),
                 ("PER_SVR4", 0x4000001), ("UNAME26_1", 0x20001), ("0xfffffffe", 0xfffffffe),
                 ("0x80000000", 0x80000000), ("1_32", 1 << 32), ("minus_1_in_64_bits", -1)):
    pers(label, v)
print("personality_after", "%#x" % sc("personality", 0xffffffff)[0])
# sockets
def raw_socket(family, type_, proto):
    r, res = sc("socket", family, type_, proto)
    if r is not None and r >= 0:
        os.close(r)
    return res
print("socket_AF_VSOCK", e(lambda: socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM).close()))
print("socket_AF_VSOCK_1_32", raw_socket(socket.AF_VSOCK | 1 << 32, socket.SOCK_STREAM, 0))
print("socket_AF_ALG", e(lambda: socket.socket(socket.AF_ALG, socket.SOCK_SEQPACKET).close()))
for label, proto in (("ROUTE", 0), ("SOCK_DIAG", 4), ("XFRM", 6), ("AUDIT", 9), ("NETFILTER", 12),
                     ("KOBJECT_UEVENT", 15), ("GENERIC", 16)):
    print("netlink_" + label, e(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, proto).close()))
print("netlink_ROUTE_dgram", e(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 0).close()))
print("netlink_GENERIC_family_1_32", raw_socket(socket.AF_NETLINK | 1 << 32, socket.SOCK_RAW, 16))
print("netlink_GENERIC_proto_1_32", raw_socket(socket.AF_NETLINK, socket.SOCK_RAW, 16 | 1 << 32))
print("socket_others", " ".join(e(lambda: socket.socket(f, t).close()) for f, t in (
    (socket.AF_UNIX, socket.SOCK_STREAM), (socket.AF_INET, socket.SOCK_STREAM),
    (socket.AF_INET6, socket.SOCK_DGRAM))))
# whiteouts: renameat2 with RENAME_WHITEOUT (4), mknod of a character device
d = "/tmp/row33"
os.mkdir(d)
for f in ("a", "b", "c"):
    open(os.path.join(d, f), "w").close()
def ren(old, new, flags):
    ctypes.set_errno(0)
    r = libc.renameat2(-100, os.path.join(d, old).encode(), -100, os.path.join(d, new).encode(), flags)
    return "ok" if r == 0 else errno.errorcode[ctypes.get_errno()]
print("renameat2_WHITEOUT", ren("a", "a2", 4), ren("a", "a3", 4 | 1))
print("renameat2_others", ren("b", "b2", 0), ren("b2", "b3", 1), ren("b3", "c", 2))  # b3 and c swap
path = ctypes.create_string_buffer(os.path.join(d, "w").encode())
print("mknod_whiteout",
      e(lambda: os.mknod(os.path.join(d, "w"), stat.S_IFCHR | 0o600, os.makedev(0, 0))),
      sc("mknod", ctypes.addressof(path), stat.S_IFCHR | 0o600, 0)[1],
      sc("mknodat", -100, ctypes.addressof(path), stat.S_IFCHR | 0o600, 0)[1])
print("mknod_others", e(lambda: os.mkfifo(os.path.join(d, "fifo"))),
      e(lambda: os.mknod(os.path.join(d, "reg"), stat.S_IFREG | 0o600)))
print("files", " ".join(sorted(os.listdir(d))))
# refused by kbox whatever the engine's profile allows: each would do
# nothing where allowed (a bad request, a null pointer), or makes a
# descriptor that is closed again
NR.update({"io_uring_setup": (425, 425), "userfaultfd": (323, 282), "ptrace": (101, 117),
           "kcmp": (312, 272), "process_vm_readv": (310, 270), "keyctl": (250, 219),
           "clone": (56, 220), "clone3": (435, 435), "openat2": (437, 437),
           "fchmodat2": (452, 452)})
for name, args in (("io_uring_setup", (1, 0)), ("userfaultfd", (1,)),  # UFFD_USER_MODE_ONLY
                   ("ptrace", (0x7fffffff, 0, 0, 0)), ("kcmp", (os.getpid(), os.getpid(), 0x7f, 0, 0)),
                   ("process_vm_readv", (os.getpid(), 0, 0, 0, 0, 0)), ("keyctl", (0, -3, 0)),
                   ("clone3", (0, 0)), ("openat2", (-100, 0, 0, 0))):
    r, res = sc(name, *args)
    if name == "userfaultfd" and r is not None and r >= 0:
        os.close(r)
    print(name, res)
# clone into a new user namespace (a child made anyway leaves at once)
r, res = sc("clone", 0x10000000 | 17, 0, 0, 0, 0)  # CLONE_NEWUSER | SIGCHLD
if r == 0:
    os._exit(0)
if r is not None and r > 0:
    os.waitpid(r, 0)
print("clone_NEWUSER", res)
# set-user-ID and set-group-ID modes
open("/tmp/row33/setid", "w").close()
print("chmod_setid", e(lambda: os.chmod("/tmp/row33/setid", 0o4755)), e(lambda: os.chmod("/tmp/row33/setid", 0o2755)),
      e(lambda: os.chmod("/tmp/row33/setid", 0o755)))
path = ctypes.create_string_buffer(b"/tmp/row33/setid")
print("fchmodat2_setuid", sc("fchmodat2", -100, ctypes.addressof(path), 0o4755, 0)[1])
print("setid_mode", oct(os.stat("/tmp/row33/setid").st_mode & 0o7777))
