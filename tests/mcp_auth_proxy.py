#!/usr/bin/python3
"""tests/mcp_auth_proxy.py UPSTREAM_PORT TOKEN PORT_FILE — an HTTP relay on
127.0.0.1 (its port written to PORT_FILE once it listens) to kbox mcp
--http on 127.0.0.1:UPSTREAM_PORT that adds "Authorization: Bearer
TOKEN" to every request: the MCP conformance suite has no way to send a
token, and kbox mcp --http takes no request without one.  Nothing else
changes: the method, path, body and headers go as they came (Host and
Origin with the relay's port made the server's, so that what the suite
sends as this server's address stays so, and anything else stays
foreign), and the response, a stream of events included, comes back as
it is sent."""
import http.client
import http.server
import os
import socketserver
import sys

UP, TOKEN, PORT_FILE = int(sys.argv[1]), sys.argv[2], sys.argv[3]


class Relay(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def relay(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        mine = ":%d" % self.server.server_address[1]
        h = {k: v for k, v in self.headers.items()
             if k.lower() not in ("host", "origin", "connection", "content-length",
                                  "authorization")}
        h["Authorization"] = "Bearer " + TOKEN
        h["Host"] = self.headers.get("Host", "").replace(mine, ":%d" % UP)
        if "Origin" in self.headers:
            h["Origin"] = self.headers["Origin"].replace(mine, ":%d" % UP)
        up = http.client.HTTPConnection("127.0.0.1", UP, timeout=600)
        up.request(self.command, self.path, body=body, headers=h)
        r = up.getresponse()
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                self.send_header(k, v)
        self.send_header("Connection", "close")
        self.end_headers()
        while True:
            chunk = r.read1(65536)
            if not chunk:
                break
            self.wfile.write(chunk)
            self.wfile.flush()
        up.close()
        self.close_connection = True

    do_GET = do_POST = do_DELETE = relay

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


srv = Server(("127.0.0.1", 0), Relay)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write("%d\n" % srv.server_address[1])
os.rename(PORT_FILE + ".tmp", PORT_FILE)
srv.serve_forever()
