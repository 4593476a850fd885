"""tests/tcp_cut.py — a TCP relay on 127.0.0.1 that a test can cut: each
connection it accepts is passed on to 127.0.0.1:TARGET; SIGUSR1 closes
every connection open then (both ends), as a network that drops them.
The network fault of tests/gateway.sh's channels test; no stand-in for
either end.

Usage: tcp_cut.py PORTFILE TARGET.  Writes its port to PORTFILE, and to
PORTFILE.cuts the number of connections each cut closed.
"""
import os, selectors, signal, socket, sys

portfile, target = sys.argv[1], int(sys.argv[2])
sel = selectors.DefaultSelector()
lsock = socket.socket()
lsock.bind(("127.0.0.1", 0))
lsock.listen(64)
lsock.setblocking(False)
sel.register(lsock, selectors.EVENT_READ, None)
pairs = {}  # socket -> its peer
cut = [False]
rpipe, wpipe = os.pipe()
os.set_blocking(wpipe, False)
sel.register(rpipe, selectors.EVENT_READ, "cut")
signal.signal(signal.SIGUSR1, lambda *a: os.write(wpipe, b"x"))


def close(s):
    p = pairs.pop(s, None)
    for x in (s, p):
        if x is None:
            continue
        try:
            sel.unregister(x)
        except (KeyError, ValueError):
            pass
        pairs.pop(x, None)
        x.close()


with open(portfile + ".tmp", "w") as f:
    f.write("%d\n" % lsock.getsockname()[1])
os.rename(portfile + ".tmp", portfile)
while True:
    for key, _ in sel.select():
        if key.data == "cut":
            os.read(rpipe, 64)
            n = len(pairs) // 2
            for s in list(pairs):
                if s in pairs:
                    close(s)
            with open(portfile + ".cuts", "a") as f:
                f.write("%d\n" % n)
        elif key.fileobj is lsock:
            c, _ = lsock.accept()
            u = socket.create_connection(("127.0.0.1", target))
            for s in (c, u):
                s.setblocking(False)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pairs[c], pairs[u] = u, c
            sel.register(c, selectors.EVENT_READ, None)
            sel.register(u, selectors.EVENT_READ, None)
        else:
            s = key.fileobj
            try:
                data = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if not data:
                close(s)
                continue
            try:
                pairs[s].setblocking(True)
                pairs[s].sendall(data)
                pairs[s].setblocking(False)
            except (OSError, KeyError):
                close(s)
