#!/usr/bin/python3
"""tests/local_index.py DIR: a package index (PEP 503's simple API) on
127.0.0.1 for the image tests, with one pure-Python wheel made here:
kbox-probe 1.0, whose module kbox_probe has VALUE = 42 and SOURCE, the
text of this wheel's index.  The index is written under DIR; the server
binds a free port and prints its URL (".../simple/") as its first line,
then serves until it is killed.  Nothing here leaves the machine."""
import base64
import hashlib
import http.server
import os
import sys
import zipfile


def record_hash(data):
    d = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + d.decode()


def make_wheel(path):
    files = {
        "kbox_probe/__init__.py": b"VALUE = 42\nSOURCE = 'the local index of kbox tests'\n",
        "kbox_probe-1.0.dist-info/METADATA":
            b"Metadata-Version: 2.1\nName: kbox-probe\nVersion: 1.0\n",
        "kbox_probe-1.0.dist-info/WHEEL":
            b"Wheel-Version: 1.0\nGenerator: kbox-tests\nRoot-Is-Purelib: true\n"
            b"Tag: py3-none-any\n",
    }
    record = "".join("%s,%s,%d\n" % (n, record_hash(d), len(d)) for n, d in files.items())
    record += "kbox_probe-1.0.dist-info/RECORD,,\n"
    files["kbox_probe-1.0.dist-info/RECORD"] = record.encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files.items():
            info = zipfile.ZipInfo(n, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, d)


def main():
    root = sys.argv[1]
    os.makedirs(os.path.join(root, "simple", "kbox-probe"), exist_ok=True)
    os.makedirs(os.path.join(root, "files"), exist_ok=True)
    whl = "kbox_probe-1.0-py3-none-any.whl"
    make_wheel(os.path.join(root, "files", whl))
    with open(os.path.join(root, "files", whl), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    with open(os.path.join(root, "simple", "index.html"), "w") as f:
        f.write('<!DOCTYPE html><html><body><a href="kbox-probe/">kbox-probe</a></body></html>\n')
    with open(os.path.join(root, "simple", "kbox-probe", "index.html"), "w") as f:
        f.write('<!DOCTYPE html><html><body><a href="../../files/%s#sha256=%s">%s</a>'
                "</body></html>\n" % (whl, digest, whl))

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
