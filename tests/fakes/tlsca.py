"""tests/fakes/tlsca.py — a throwaway certificate authority for tests, made with the openssl CLI.

make_pki(dir) writes, unless they are there already:
  ca.crt ca.key            the CA the servers' and clients' certificates chain to
  server.crt server.key    for localhost and 127.0.0.1 (serverAuth)
  client.crt client.key    CN=podrun-test-client, O=podrun-testers (clientAuth), as Kubernetes
                           reads a user (CN) and its groups (O)
  other-ca.crt             a CA that signed nothing here: trusting it must fail verification
EC P-256 keys keep generation fast. Returns a dict of the paths."""
import os
import pathlib
import subprocess

NAMES = ("ca.crt", "ca.key", "server.crt", "server.key", "client.crt", "client.key",
         "other-ca.crt", "other-ca.key")


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _make_ca(d, stem, cn):
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", f"{stem}.key", "-out", f"{stem}.crt", "-days", "3",
             "-subj", f"/CN={cn}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def _make_leaf(d, stem, subj, ext):
    (pathlib.Path(d) / f"{stem}.ext").write_text(ext)
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{stem}.key", "-out", f"{stem}.csr", "-subj", subj, cwd=d)
    _openssl("x509", "-req", "-in", f"{stem}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{stem}.crt", "-days", "3", "-extfile", f"{stem}.ext",
             cwd=d)


def make_pki(d):
    d = str(d)
    os.makedirs(d, exist_ok=True)
    paths = {n: os.path.join(d, n) for n in NAMES}
    if all(os.path.exists(p) for p in paths.values()):
        return paths
    _make_ca(d, "ca", "podrun-test-ca")
    _make_ca(d, "other-ca", "podrun-other-ca")
    _make_leaf(d, "server", "/CN=localhost",
               "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
               "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _make_leaf(d, "client", "/O=podrun-testers/CN=podrun-test-client",
               "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
               "extendedKeyUsage=clientAuth\n")
    return paths
