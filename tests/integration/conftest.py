"""Shared fixtures for podrun's integration tests: where the binary is, which python has torch."""
import os
import pathlib
import socket

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("PODRUN_BUILD", ROOT / "build"))
PODRUN = str(BUILD / "launcher" / "podrun")
TORCH_PY = "/usr/bin/python3"   # Debian's python3-torch belongs to this interpreter


@pytest.fixture
def podrun():
    assert os.access(PODRUN, os.X_OK), f"{PODRUN} is not built"
    return PODRUN


def free_port(host="127.0.0.1"):
    """A port that was free a moment ago (tests bind it right away)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@pytest.fixture
def port():
    return free_port()


@pytest.fixture(autouse=True)
def _own_master_port(monkeypatch):
    """Single-node podrun hosts the job store on --master-port (29500 by default, as torchrun):
    give every test a free one so a stray listener on this machine cannot get in the way."""
    monkeypatch.setenv("PODRUN_MASTER_PORT", str(free_port()))


@pytest.fixture
def store(podrun, port):
    """`podrun store` on 127.0.0.1:port for the test, stopped after it."""
    from store_util import podrun_store
    s = podrun_store(podrun, port)
    yield s
    s.stop()
