#!/usr/bin/python3
"""tests/fakes/http_server.py — the peer of podrun's HTTP client tests
(tests/unit/rdzv/base/test_http.c).

  http_server.py --pki DIR [--plain]

Listens on 127.0.0.1 (a free port), HTTPS with DIR's certificates (tlsca.make_pki; a client
certificate is asked for and checked when sent) or plain HTTP, and prints "PORT <n>" once ready.
HTTP/1.1 with keep-alive, one thread per connection. Paths:
  GET  /hello              200 "hello world\\n"
  ANY  /echo               200 JSON {method, path, auth, content_type, expect, body}
  GET  /whoami             200 the client certificate's CN, or "anonymous"
  GET  /stream             chunked: "first\\n", then waits for GET /release, then "second\\n",
                           "third" (no final newline)
  GET  /release            lets /stream go on
  GET  /split              chunked: lines cut across chunks ("ab" "cd\\nef" "gh\\n")
  GET  /big?n=N            N bytes of 'x'
  GET  /longline?n=N       chunked: "ok\\n", then one N-byte line
  GET  /silent             200 headers of a chunked body, then nothing for 60 s
  GET  /nothing            reads the request, never answers (60 s)
  GET  /forever            chunked "tick N\\n" every 20 ms until the client goes away
  GET  /forever_closed     waits (up to 10 s) until a /forever stream has ended: "closed" or "open"
  GET  /status/NNN         status NNN with a JSON body {"code": NNN}
"""
import argparse
import json
import os
import socket
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tlsca  # noqa: E402

release = threading.Event()
forever_ended = threading.Event()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send_body(self, code, body, ctype="text/plain"):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def start_chunked(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def chunk(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_chunked(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query)
        route = {
            "/hello": lambda: self.send_body(200, "hello world\n"),
            "/echo": self.echo,
            "/whoami": self.whoami,
            "/stream": self.stream,
            "/release": self.do_release,
            "/split": self.split,
            "/big": lambda: self.send_body(200, b"x" * int(q["n"][0])),
            "/longline": lambda: self.longline(int(q["n"][0])),
            "/silent": self.silent,
            "/nothing": lambda: time.sleep(60),
            "/forever": self.forever,
            "/forever_closed": self.forever_closed,
        }.get(u.path)
        if route:
            return route()
        if u.path.startswith("/status/"):
            code = int(u.path.rsplit("/", 1)[1])
            return self.send_body(code, json.dumps({"code": code}), "application/json")
        self.send_body(404, "no such path\n")

    do_POST = do_PUT = do_DELETE = do_PATCH = do_GET

    def echo(self):
        self.send_body(200, json.dumps({
            "method": self.command, "path": self.path,
            "auth": self.headers.get("Authorization"),
            "content_type": self.headers.get("Content-Type"),
            "expect": self.headers.get("Expect"),
            "body": self.body().decode(),
        }), "application/json")

    def whoami(self):
        cn = "anonymous"
        if isinstance(self.connection, ssl.SSLSocket):
            cert = self.connection.getpeercert()
            for rdn in (cert or {}).get("subject", ()):
                for k, v in rdn:
                    if k == "commonName":
                        cn = v
        self.send_body(200, cn)

    def stream(self):
        self.start_chunked()
        self.chunk("first\n")
        release.wait(10)
        self.chunk("second\n")
        self.chunk("third")
        self.end_chunked()

    def do_release(self):
        release.set()
        self.send_body(200, "ok")

    def split(self):
        self.start_chunked()
        for part in ("ab", "cd\nef", "gh\n"):
            self.chunk(part)
            time.sleep(0.02)
        self.end_chunked()

    def longline(self, n):
        self.start_chunked()
        self.chunk("ok\n")
        for _ in range(n // 4096):
            self.chunk("y" * 4096)
        self.chunk("y" * (n % 4096) + "\n")
        self.end_chunked()

    def silent(self):
        self.start_chunked()
        time.sleep(60)

    def forever(self):
        self.start_chunked()
        i = 0
        try:
            while True:
                self.chunk(f"tick {i}\n")
                i += 1
                time.sleep(0.02)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            forever_ended.set()
            raise

    def forever_closed(self):
        self.send_body(200, "closed" if forever_ended.wait(10) else "open")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    ssl_ctx = None

    def finish_request(self, request, client_address):
        # The TLS handshake runs in the connection's own thread, so a client that never
        # finishes one cannot hold up the others.
        if self.ssl_ctx:
            try:
                request = self.ssl_ctx.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return
        try:
            super().finish_request(request, client_address)
        except (ssl.SSLError, OSError):
            pass

    def handle_error(self, request, client_address):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pki", required=True)
    ap.add_argument("--plain", action="store_true")
    a = ap.parse_args()
    srv = Server(("127.0.0.1", 0), Handler)
    if not a.plain:
        p = tlsca.make_pki(a.pki)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(p["server.crt"], p["server.key"])
        ctx.load_verify_locations(p["ca.crt"])
        ctx.verify_mode = ssl.CERT_OPTIONAL
        srv.ssl_ctx = ctx
    print("PORT", srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
