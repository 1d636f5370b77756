"""A stranger on the job store's port: raw TCPStore requests (both torch dialects) from a chosen
source address, and the token handshake of rdzv/store/auth.h done by hand."""
import hashlib
import hmac
import os
import socket
import struct

V2 = {"VALIDATE": 0, "SET": 1, "COMPARE_SET": 2, "GET": 3, "ADD": 4, "CHECK": 5, "WAIT": 6,
      "GETNUMKEYS": 7, "DELETE_KEY": 8, "APPEND": 9, "MULTI_GET": 10, "MULTI_SET": 11,
      "PING": 13, "LIST": 17}
V1 = {"SET": 0, "GET": 2, "GETNUMKEYS": 6}
MAGIC = 0x3C85F7CE
REFUSED = struct.pack("<I", 0x21434C41)  # rdzv/store/wire.h WIRE_REFUSED: refused by the allow-list


def vec(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<Q", len(b)) + b


class Rogue:
    def __init__(self, port, src, host="127.0.0.2", v2=True):
        self.s = socket.socket()
        self.s.settimeout(10)
        self.s.bind((src, 0))
        self.s.connect((host, port))
        self.ops = V2 if v2 else V1
        if v2:
            self.s.sendall(struct.pack("<BI", 0, MAGIC))

    def close(self):
        self.s.close()

    def send(self, data):
        self.s.sendall(data)

    def recv_exact(self, n):
        b = b""
        while len(b) < n:
            c = self.s.recv(n - len(b))
            if not c:
                raise ConnectionError("closed by the store")
            b += c
        return b

    def closed(self):
        """True when the store closed this connection (EOF or reset) within the timeout, having
        sent nothing or only the allow-list's refusal (REFUSED)."""
        got = b""
        try:
            while len(got) <= len(REFUSED):
                c = self.s.recv(8)
                if not c:
                    return got in (b"", REFUSED)
                got += c
        except ConnectionResetError:
            return got in (b"", REFUSED)
        return False

    def refused(self):
        """True when the allow-list refused this connection: its 4 bytes, then the close."""
        b = self.s.recv(8)
        return b == REFUSED and self.closed()

    def op(self, name, *args):
        return bytes([self.ops[name]]) + b"".join(args)

    def set(self, key, val):
        self.send(self.op("SET", vec(key), vec(val)))

    def get(self, key):
        self.send(self.op("GET", vec(key)))
        n = struct.unpack("<Q", self.recv_exact(8))[0]
        return self.recv_exact(n)

    def numkeys(self):
        self.send(self.op("GETNUMKEYS"))
        return struct.unpack("<q", self.recv_exact(8))[0]

    def list(self):
        self.send(self.op("LIST"))
        n = struct.unpack("<q", self.recv_exact(8))[0]
        return [self.recv_exact(struct.unpack("<Q", self.recv_exact(8))[0]) for _ in range(n)]

    def ping(self, nonce=0x1234):
        self.send(self.op("PING", struct.pack("<I", nonce)))
        return struct.unpack("<I", self.recv_exact(4))[0]

    # the handshake (rdzv/store/auth.h)
    def hello(self, nc=None):
        self.nc = nc or os.urandom(16)
        reply = self.get("podrun//auth/c/" + self.nc.hex())
        return reply

    def prove(self, token, reply):
        """The client's proof key for the server's answer `reply` to this connection's hello."""
        k = hashlib.sha256(token.encode()).digest()
        ns = bytes.fromhex(reply[:32].decode())
        want = hmac.new(k, b"podrun-auth-1 server" + self.nc + ns, "sha256").hexdigest()
        assert reply[33:].decode() == want, "the store does not hold the token"
        mac = hmac.new(k, b"podrun-auth-1 client" + ns + self.nc, "sha256").hexdigest()
        return "podrun//auth/p/" + mac

    def login(self, token):
        key = self.prove(token, self.hello())
        return key, self.get(key)
