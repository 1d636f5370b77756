"""Writes podrun's wheel (see scripts/wheel): wheel.py BINARY DIR VERSION GLIBC ARCH LICENSE.
Standard library only; the same inputs give the same bytes (fixed timestamps, sorted entries)."""
import base64
import hashlib
import os
import sys
import zipfile

INIT = '''"""podrun: the container entrypoint of a distributed training job. The podrun command this
package installs is the program itself; `python -m podrun` runs it."""
__version__ = "{version}"
'''

MAIN = '''"""python -m podrun: runs the podrun program this package installed, in this process's
place."""
import os
import sys
from importlib import metadata


def binary():
    """The installed podrun program, found through the package's own RECORD."""
    dist = metadata.distribution("podrun")
    for f in dist.files or ():
        if f.name == "podrun" and f.parent.name != "podrun":
            return str(dist.locate_file(f))
    raise SystemExit("podrun: the podrun program is not installed with this package; "
                     "reinstall it with pip install --force-reinstall podrun")


def main():
    path = binary()
    os.execv(path, ["podrun", *sys.argv[1:]])


if __name__ == "__main__":
    main()
'''

METADATA = """Metadata-Version: 2.1
Name: podrun
Version: {version}
Summary: The container entrypoint of a distributed training job (torchrun, accelerate, deepspeed, paddle)
License: Apache-2.0
Requires-Python: >=3.8
Classifier: License :: OSI Approved :: Apache Software License
Classifier: Operating System :: POSIX :: Linux
Classifier: Programming Language :: C

podrun as one file: it needs nothing but glibc {glibc} or newer. `pip install podrun` puts the
`podrun` command on PATH; `python -m podrun` runs it too. The other launchers' command lines are
`podrun accelerate launch ...`, `podrun deepspeed ...`, `podrun paddle ...`; torchrun's are
podrun's own. The wheel installs no command named torchrun, accelerate or deepspeed.
"""


def digest(data):
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={h}"


def write(path, entries):
    """entries: [(name, bytes, mode)]; RECORD is added last."""
    record = [f"{name},{digest(data)},{len(data)}" for name, data, _ in entries]
    dist_info = next(n for n, _, _ in entries if n.endswith(".dist-info/WHEEL")).rsplit("/", 1)[0]
    record.append(f"{dist_info}/RECORD,,")
    entries = entries + [(f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode(), 0o644)]
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(tmp, path)


def main(binary, out_dir, version, glibc, arch, license_file):
    major, minor = glibc.split(".")[:2]
    tag = f"py3-none-manylinux_{major}_{minor}_{arch}"
    name = f"podrun-{version}"
    with open(binary, "rb") as f:
        prog = f.read()
    with open(license_file, "rb") as f:
        lic = f.read()
    wheel = (f"Wheel-Version: 1.0\nGenerator: podrun scripts/wheel\nRoot-Is-Purelib: false\n"
             f"Tag: {tag}\n").encode()
    entries = [
        ("podrun/__init__.py", INIT.format(version=version).encode(), 0o644),
        ("podrun/__main__.py", MAIN.encode(), 0o644),
        (f"{name}.data/scripts/podrun", prog, 0o755),
        (f"{name}.dist-info/LICENSE", lic, 0o644),
        (f"{name}.dist-info/METADATA", METADATA.format(version=version, glibc=glibc).encode(),
         0o644),
        (f"{name}.dist-info/WHEEL", wheel, 0o644),
        (f"{name}.dist-info/top_level.txt", b"podrun\n", 0o644),
    ]
    path = os.path.join(out_dir, f"{name}-{tag}.whl")
    write(path, entries)
    print(path)


if __name__ == "__main__":
    if len(sys.argv) != 7:
        sys.exit("usage: wheel.py BINARY DIR VERSION GLIBC ARCH LICENSE")
    main(*sys.argv[1:])
