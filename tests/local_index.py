#!/usr/bin/python3
"""tests/local_index.py DIR: a package index (PEP 503's simple API) on
127.0.0.1 for the image tests, with four distributions made here:

 - kbox-probe 1.0, a pure-Python wheel: the module kbox_probe has
   VALUE = 42 and SOURCE, the text of this wheel's index;
 - kbox-probe-pth 1.0, a wheel whose .pth file, run by every Python that
   starts in the image, writes /usr/share/kbox-probe-pth-UID (the uid it
   ran as): the build must never run it as root;
 - kbox-probe-build 1.0, a source distribution with an in-tree build
   backend (nothing to download): the code pip runs to build it records
   the uid it ran as, what writing /etc/kbox-probe-build, reading
   /proc/1/cmdline and opening /dev/tty gave, whether its standard
   descriptors are terminals, what add_key, keyctl and a new user
   namespace gave, the size of its /dev/shm, what its /sys holds, which
   device its /dev/console is, its soft limits (processes, file size,
   address space, CPU time, descriptors, core file) and its user
   namespace's uid map, what connecting to the abstract unix socket
   @kbox-probe-abstract gave and what /proc/keys holds, in the module
   kbox_probe_build; and it leaves /usr/local/kbox-probe-link (to /tmp),
   kbox-probe-fifo and kbox-probe-dir (3777, with an extended
   attribute), which the build must not keep;
 - kbox-probe-yanked 1.0, a pure-Python wheel, yanked for a reason with
   terminal escape sequences in it (YANKED), which pip prints: the
   build must drop their control bytes.

The index is written under DIR; the server binds a free port and prints
its URL (".../simple/") as its first line, then serves until it is
killed.  Nothing here leaves the machine."""
import base64
import hashlib
import http.server
import io
import os
import sys
import tarfile
import zipfile

DATE = (2026, 1, 1, 0, 0, 0)
# (an operating system command that sets a terminal's title, one that
# clears its screen, a C1 control sequence introducer, and a
# right-to-left override)
YANKED = "\x1b]0;kbox-probe\x07 a test of the control bytes\x1b[2J\u009b1m\u202e"


def record_hash(data):
    d = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + d.decode()


def wheel_bytes(name, files):
    """A wheel of distribution NAME 1.0 holding FILES (path: bytes)."""
    dist = name.replace("-", "_") + "-1.0.dist-info"
    files = dict(files)
    files[dist + "/METADATA"] = b"Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n" % name.encode()
    files[dist + "/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: kbox-tests\nRoot-Is-Purelib: true\n"
                              b"Tag: py3-none-any\n")
    record = "".join("%s,%s,%d\n" % (n, record_hash(d), len(d)) for n, d in files.items())
    record += dist + "/RECORD,,\n"
    files[dist + "/RECORD"] = record.encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files.items():
            info = zipfile.ZipInfo(n, date_time=DATE)
            info.external_attr = 0o644 << 16
            z.writestr(info, d)
    return out.getvalue()


# The in-tree backend of kbox-probe-build (as wheel_bytes), whose module
# says what the build could do.
BACKEND = r'''
import base64, ctypes, errno, hashlib, os, resource, zipfile


def probe():
    try:
        open("/etc/kbox-probe-build", "w").close()
        wrote = "ok"
    except OSError as e:
        wrote = errno.errorcode[e.errno]
    try:
        init = open("/proc/1/cmdline", "rb").read().split(b"\0")[0].decode()
    except OSError as e:
        init = errno.errorcode[e.errno]
    try:
        os.close(os.open("/dev/tty", os.O_RDWR))
        tty = "ok"
    except OSError as e:
        tty = errno.errorcode[e.errno]
    libc = ctypes.CDLL(None, use_errno=True)

    def call(rv):
        return "ok" if rv >= 0 else errno.errorcode[ctypes.get_errno()]
    # add_key to its user keyring, keyctl(KEYCTL_DESCRIBE) of its session
    # keyring, unshare(CLONE_NEWUSER)
    nr = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]
    desc = ctypes.create_string_buffer(256)
    refused = [call(libc.syscall(nr[0], b"user", b"kbox-probe", b"x", 1, -4)),
               call(libc.syscall(nr[1], 6, -3, desc, 256)), call(libc.unshare(0x10000000))]
    # what the build leaves for restore to undo: a link out of /usr/local,
    # a directory anyone may write, set-group-ID and sticky
    try:
        os.symlink("/tmp", "/usr/local/kbox-probe-link")
        os.mkdir("/usr/local/kbox-probe-dir")
        os.chmod("/usr/local/kbox-probe-dir", 0o3777)
        os.mkfifo("/usr/local/kbox-probe-fifo")
        os.setxattr("/usr/local/kbox-probe-dir", "user.kbox-probe", b"x")
        xattr = "ok"
    except OSError as e:
        xattr = errno.errorcode[e.errno]
    # the host's abstract unix socket @kbox-probe-abstract (the test's)
    import socket
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect("\0kbox-probe-abstract")
        abstract = "ok"
    except OSError as e:
        abstract = errno.errorcode[e.errno]
    s.close()
    shm = os.statvfs("/dev/shm")
    try:
        rdev = os.stat("/dev/console").st_rdev
        console = "%d:%d" % (os.major(rdev), os.minor(rdev))
    except OSError as e:
        console = errno.errorcode[e.errno]
    return ("UID = %d\nWROTE_ETC = %r\nPID1 = %r\nTTY = %r\nTTY_FDS = %r\n"
            "REFUSED = %r\nSHM_BYTES = %d\nSYS = %r\nCONSOLE = %r\nLIMITS = %r\nUID_MAP = %r\n"
            "XATTR = %r\nABSTRACT = %r\nPROC_KEYS = %r\n" % (
                os.getuid(), wrote, init, tty, [os.isatty(fd) for fd in (0, 1, 2)],
                refused, shm.f_blocks * shm.f_frsize, sorted(os.listdir("/sys")), console,
                [resource.getrlimit(getattr(resource, "RLIMIT_" + n))[0]
                 for n in ("NPROC", "FSIZE", "AS", "CPU", "NOFILE", "CORE")],
                open("/proc/self/uid_map").read().split(), xattr, abstract,
                open("/proc/keys").read()))


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    dist = "kbox_probe_build-1.0.dist-info"
    files = {"kbox_probe_build/__init__.py": probe().encode(),
             dist + "/METADATA": b"Metadata-Version: 2.1\nName: kbox-probe-build\nVersion: 1.0\n",
             dist + "/WHEEL": b"Wheel-Version: 1.0\nGenerator: kbox-tests\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n"}
    def h(d):
        return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
    record = "".join("%s,%s,%d\n" % (n, h(d), len(d)) for n, d in files.items())
    files[dist + "/RECORD"] = (record + dist + "/RECORD,,\n").encode()
    name = "kbox_probe_build-1.0-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for n, d in files.items():
            z.writestr(n, d)
    return name
'''


def sdist_bytes():
    base = "kbox_probe_build-1.0/"
    files = {
        base + "pyproject.toml": b'[build-system]\nrequires = []\nbuild-backend = "kbox_backend"\n'
                                 b'backend-path = ["."]\n',
        base + "kbox_backend.py": BACKEND.encode(),
        base + "PKG-INFO": b"Metadata-Version: 2.1\nName: kbox-probe-build\nVersion: 1.0\n",
    }
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as t:
        for n, d in files.items():
            info = tarfile.TarInfo(n)
            info.size, info.mode, info.mtime = len(d), 0o644, 1767225600
            t.addfile(info, io.BytesIO(d))
    return out.getvalue()


def main():
    root = sys.argv[1]
    pth = (b"import os; open('/usr/share/kbox-probe-pth-%d' % os.getuid(), 'a').close()"
           b" if os.access('/usr/share', os.W_OK) else None\n")
    dists = {
        "kbox-probe": ("kbox_probe-1.0-py3-none-any.whl", wheel_bytes("kbox-probe", {
            "kbox_probe/__init__.py": b"VALUE = 42\nSOURCE = 'the local index of kbox tests'\n"})),
        "kbox-probe-pth": ("kbox_probe_pth-1.0-py3-none-any.whl", wheel_bytes("kbox-probe-pth", {
            "kbox_probe_pth.pth": pth})),
        "kbox-probe-build": ("kbox_probe_build-1.0.tar.gz", sdist_bytes()),
        "kbox-probe-yanked": ("kbox_probe_yanked-1.0-py3-none-any.whl", wheel_bytes(
            "kbox-probe-yanked", {"kbox_probe_yanked/__init__.py": b"VALUE = 43\n"})),
    }
    os.makedirs(os.path.join(root, "files"), exist_ok=True)
    links = []
    for name, (file, data) in dists.items():
        os.makedirs(os.path.join(root, "simple", name), exist_ok=True)
        with open(os.path.join(root, "files", file), "wb") as f:
            f.write(data)
        yanked = ' data-yanked="%s"' % YANKED if name == "kbox-probe-yanked" else ""
        with open(os.path.join(root, "simple", name, "index.html"), "w", encoding="utf-8") as f:
            f.write('<!DOCTYPE html><html><body><a href="../../files/%s#sha256=%s"%s>%s</a>'
                    "</body></html>\n" % (file, hashlib.sha256(data).hexdigest(), yanked, file))
        links.append('<a href="%s/">%s</a>' % (name, name))
    with open(os.path.join(root, "simple", "index.html"), "w") as f:
        f.write("<!DOCTYPE html><html><body>%s</body></html>\n" % "".join(links))

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=root, **kw)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    print("http://127.0.0.1:%d/simple/" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
