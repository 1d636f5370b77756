"""Shared fixtures for podrun's integration tests: where the binary is, which python has torch."""
import os
import pathlib
import socket

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("PODRUN_BUILD", ROOT / "build"))
PODRUN = str(BUILD / "launcher" / "podrun")
TORCH_PY = "/usr/bin/python3"   # Debian's python3-torch belongs to this interpreter
# The software users run today, from PyPI (scripts/deps, pinned in scripts/peers.txt): torch 2.15,
# accelerate, deepspeed and paddle, in the project's environment .venv/.
VENV_BIN = ROOT / ".venv" / "bin"
VENV_PY = str(VENV_BIN / "python")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: a long case (the network-fault matrix's); scripts/test leaves these "
        "out, scripts/fault-table runs them with the rest")


@pytest.fixture
def podrun():
    assert os.access(PODRUN, os.X_OK), f"{PODRUN} is not built"
    return PODRUN


@pytest.fixture
def venv_py():
    """The .venv's python (torch 2.15 and the other launchers); scripts/deps installs it."""
    assert os.access(VENV_PY, os.X_OK), f"{VENV_PY} is missing: scripts/deps installs it"
    return VENV_PY


_given = set()   # the ports free_port gave out in this process


def _port_block():
    """This process's own block of ports, below the kernel's range for outgoing connections
    (ip_local_port_range, 32768-60999 by default): a port the kernel hands out as "free" from
    that range can be taken a moment later by any process's outgoing connection, and a test
    worker beside this one would be offered the same ports. Each pytest-xdist worker (gwN) gets
    a block of its own."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    k = int(worker[2:]) if worker[2:].isdigit() else 0
    size = 2800
    first = 10000 + (k % 8) * size
    return first, first + size


_next_port = None


def free_port(host="127.0.0.1"):
    """A port that is free now (tests bind it right away), from this process's block, and
    never one this process gave out before (a test that asks for several binds them later)."""
    global _next_port
    first, end = _port_block()
    if _next_port is None:
        _next_port = first + os.getpid() % (end - first)
    for _ in range(end - first):
        p = _next_port
        _next_port = first + (p + 1 - first) % (end - first)
        if p in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, p))
            except OSError:
                continue
        _given.add(p)
        return p
    raise RuntimeError(f"no free port left in {first}-{end - 1} on {host}")


# One worker: the modules whose tests share one thing that the first of them makes in the
# source tree (test_static.py: a root file system under build-static/; test_wheel.py: the
# one-file build in build-wheel/; test_install.py: meson's install of the build directory) mark
# themselves with `pytestmark = pytest.mark.xdist_group(NAME)`, so under pytest-xdist's
# --dist loadgroup (scripts/test) all of a module's tests run in one worker and the thing is
# never made by two workers at a time. The mark must be on the module: pytest-xdist reads it
# before any conftest hook could add it.


@pytest.fixture
def port():
    return free_port()


@pytest.fixture(autouse=True)
def _own_master_port(monkeypatch):
    """Single-node podrun hosts the job store on --master-port when one is given (a free port
    otherwise, as torchrun 2.x): give every test one of its own, so that what a test expects
    of the port holds and a stray listener on this machine cannot get in the way."""
    monkeypatch.setenv("PODRUN_MASTER_PORT", str(free_port()))


@pytest.fixture
def store(podrun, port):
    """`podrun store` on 127.0.0.1:port for the test, stopped after it."""
    from store_util import podrun_store
    s = podrun_store(podrun, port)
    yield s
    s.stop()
