"""podrun's wheel (scripts/wheel): built offline from the one-file build, installed with
`pip install --no-index` into a fresh venv, and a 2-node job run through the installed `podrun`
and through `python -m podrun`.

The one file is built once in build-wheel/ (a few minutes) and kept there."""
import base64
import hashlib
import os
import re
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT, free_port

# the one thing this module makes in the source tree (conftest.py, "one worker") is made once
pytestmark = pytest.mark.xdist_group("wheel")

NAME = re.compile(r"^podrun-(\d+\.\d+\.\d+)-py3-none-manylinux_(\d+)_(\d+)_x86_64\.whl$")
OTHER_LAUNCHERS = {"torchrun", "accelerate", "deepspeed", "paddle-launch"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    env = dict(os.environ, PODRUN_STATIC_BUILD=str(ROOT / "build-wheel"))
    r = subprocess.run([str(ROOT / "scripts" / "wheel"), str(out)], capture_output=True,
                       text=True, env=env, timeout=1800)
    assert r.returncode == 0, r.stderr
    (path,) = out.iterdir()
    assert r.stdout.strip() == str(path)
    return path


def glibc_floor(data, tmp_path):
    f = tmp_path / "podrun.bin"
    f.write_bytes(data)
    syms = subprocess.run(["objdump", "-T", str(f)], capture_output=True, text=True).stdout
    versions = {tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_([0-9.]+)", syms)}
    return max(versions)[:2]


def test_wheel_is_honest(wheel, tmp_path):
    m = NAME.match(wheel.name)
    assert m, wheel.name
    version = m.group(1)
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        prog = z.read(f"podrun-{version}.data/scripts/podrun")
        assert z.getinfo(f"podrun-{version}.data/scripts/podrun").external_attr >> 16 & 0o111
        # the platform tag is the file's own glibc floor
        assert glibc_floor(prog, tmp_path) == (int(m.group(2)), int(m.group(3)))
        wheel_meta = z.read(f"podrun-{version}.dist-info/WHEEL").decode()
        assert f"Tag: {wheel.name[len(f'podrun-{version}-'):-4]}" in wheel_meta
        assert "Root-Is-Purelib: false" in wheel_meta
        # RECORD lists every other file with its hash and size
        record = z.read(f"podrun-{version}.dist-info/RECORD").decode().splitlines()
        listed = {}
        for line in record:
            name, h, size = line.rsplit(",", 2)
            listed[name] = (h, size)
        assert set(listed) == set(names)
        for name in names:
            if name.endswith("/RECORD"):
                continue
            data = z.read(name)
            h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert listed[name] == (f"sha256={h}", str(len(data))), name
    # nothing that would shadow another launcher
    assert not {n.rsplit("/", 1)[-1] for n in names} & OTHER_LAUNCHERS, names


def test_pip_install_and_a_two_node_job(wheel, tmp_path, port):
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True, timeout=120)
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-index", str(wheel)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    bindir = venv / "bin"
    assert not {p.name for p in bindir.iterdir()} & OTHER_LAUNCHERS
    with open(bindir / "podrun", "rb") as f:
        assert f.read(4) == b"\x7fELF"   # the program itself on PATH, no wrapper
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PODRUN_", "PET_", "TORCHELASTIC_"))}
    env["PATH"] = f"{bindir}:{env['PATH']}"
    r = subprocess.run(["podrun", "--version"], capture_output=True, text=True, env=env,
                       timeout=30)
    assert r.returncode == 0 and r.stdout.startswith("podrun "), r.stderr
    r = subprocess.run([str(bindir / "python"), "-m", "podrun", "--version"],
                       capture_output=True, text=True, env=env, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith("podrun "), r.stderr

    # node 0 through the installed command, node 1 through python -m podrun
    endpoint = f"127.0.0.2:{port}"
    job = ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
           "--rdzv-endpoint", endpoint, "--rdzv-id", "wheel", "--no-python", "sh", "-c",
           'echo "rank $RANK of $WORLD_SIZE"']
    cmds = [["podrun", "--local-addr", "127.0.0.2", *job],
            [str(bindir / "python"), "-m", "podrun", "--local-addr", "127.0.0.3", *job]]
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True) for c in cmds]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
    assert [p.returncode for p in procs] == [0, 0], [e for _, e in outs]
    said = sorted(line.split(":", 1)[1] for o, _ in outs for line in o.splitlines())
    assert said == ["rank 0 of 2", "rank 1 of 2"], outs
