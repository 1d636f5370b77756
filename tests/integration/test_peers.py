"""The Python peers' environment (scripts/peers.txt, made by scripts/deps) and the NCCL that its
pip-installed torch carries: podrun env and the nccl preflight find the file that torch loads, in
site-packages, not only libnccl.so.2 from the loader's path."""
import hashlib
import os
import re
import subprocess

from cluster import run
from conftest import BUILD, ROOT

PEERS = ROOT / "scripts" / "peers.txt"
FAKES = str(BUILD / "tests" / "fakes")
MKMACHINE = str(BUILD / "tests" / "fixtures" / "mkmachine")


def canon(name):
    """A distribution's name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def venv_says(venv_py, code):
    return subprocess.run([venv_py, "-c", code], capture_output=True, text=True, check=True,
                          timeout=60).stdout.strip()


def test_the_environment_is_what_peers_txt_pins(venv_py):
    """Every package peers.txt pins is installed at that version, nothing else is (pip, which
    the environment brings itself, aside), and .venv is the environment named by the file's
    hash."""
    pins = {}
    for line in PEERS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[canon(name)] = version
    have = {}
    for line in venv_says(venv_py, "import importlib.metadata as m\n"
                          "for d in m.distributions(): print(d.metadata['Name'], d.version)"
                          ).splitlines():
        name, version = line.split()
        have[canon(name)] = version
    have.pop("pip")
    assert have == pins
    key = hashlib.sha256(PEERS.read_bytes()).hexdigest()[:16]
    assert os.path.basename(os.path.realpath(ROOT / ".venv")) == f"peers-{key}"


def wheel_nccl(venv_py):
    """The NCCL the venv's torch loads, as its process maps it once imported, and the version
    of the package that holds it."""
    path = venv_says(venv_py, "import torch\n"
                     "print(next(l.split()[-1] for l in open('/proc/self/maps') "
                     "if '/libnccl.so' in l))")
    version = venv_says(venv_py, "import importlib.metadata as m\n"
                        "print(m.version('nvidia-nccl-cu13'))")
    assert "/site-packages/nvidia/nccl/lib/" in path
    return os.path.realpath(path), version


def test_env_names_the_nccl_the_workers_torch_loads(podrun, venv_py):
    path, version = wheel_nccl(venv_py)
    assert os.path.isfile(path)
    r = run(podrun, "env", "--python", venv_py, "--nproc-per-node", "1", "true")
    assert r.returncode == 0, r.stderr
    assert f"\nNCCL        {path}, version {version}\n" in r.stdout, r.stdout
    assert "the one the torch of the workers' python" in r.stdout, r.stdout
    # Debian's torch carries no NCCL: the loader's path decides, and podrun env says so
    r = run(podrun, "env", "--python", "/usr/bin/python3", "--nproc-per-node", "1", "true")
    assert r.returncode == 0, r.stderr
    assert path not in r.stdout
    assert re.search(r"^NCCL        (none: |\S+, version [\d.]+\n {12}from the loader's path: )",
                     r.stdout, re.M), r.stdout


def test_preflight_loads_the_nccl_of_the_workers_torch(podrun, venv_py, tmp_path):
    """No GPU here: the nccl check's helper loads the venv torch's own NCCL (not the loader's
    libnccl.so.2), which reports its version, and fails at the missing device, naming both."""
    path, version = wheel_nccl(venv_py)
    root = tmp_path / "machine"
    root.mkdir()
    subprocess.run([MKMACHINE, str(root), "--no-mig", "--no-hcas"], check=True)
    env = {"PODRUN_SYSROOT": str(root), "PODRUN_FAKE_NVML": str(root / "nvml.conf"),
           "LD_LIBRARY_PATH": "", "LD_PRELOAD": os.path.join(FAKES, "libnvidia-ml.so.1"),
           "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}
    r = run(podrun, "--python", venv_py, "--nproc-per-node", "1", "--preflight", "nccl",
            "--preflight-timeout", "5", "--no-python", "true", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    m = re.search(r"BAD: its own GPUs: local rank 0: device: cudaSetDevice\(0\): .+ "
                  r"\(NCCL (\S+), (\S+)\)$", r.stderr, re.M)
    assert m, r.stderr
    assert m.groups() == (version, path)
