"""tests/gpu/run.sh, the checks that need a real GPU, on a machine without one: every check says
`skip` and the script exits 0; with a stand-in nvidia-smi and the fake NVML, its discovery checks
run against podrun and pass."""
import os
import subprocess

from conftest import BUILD, PODRUN, ROOT

SCRIPT = str(ROOT / "tests" / "gpu" / "run.sh")
FAKES = str(BUILD / "tests" / "fakes")
UUID = "GPU-0a1b2c3d-0000-4000-8000-000000000001"
CHECKS = ["nvml-discovery", "nproc-gpu", "nccl-preflight", "torch-nccl-allreduce",
          "gpu-memory-restart", "accelerate-env"]


def test_without_a_gpu_every_check_is_skipped(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}   # no nvidia-smi on it
    r = subprocess.run(["sh", SCRIPT, PODRUN], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert [l.split(":")[0] for l in lines] == [f"skip {c}" for c in CHECKS], lines


def test_discovery_checks_pass_against_nvidia_smi(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\necho "GPU 0: NVIDIA H100 (UUID: {UUID})"\n')
    smi.chmod(0o755)
    conf = tmp_path / "nvml.conf"
    conf.write_text(f"gpu uuid={UUID} pci=0000:3b:00.0 name=NVIDIA_H100 minor=0 numa=0\n")
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", PODRUN_FAKE_NVML=str(conf),
               LD_LIBRARY_PATH=FAKES, PYTHON="/nonexistent/python")
    env.pop("OMP_NUM_THREADS", None)
    r = subprocess.run(["sh", SCRIPT, PODRUN], env=env, capture_output=True, text=True,
                       timeout=120)
    lines = r.stdout.splitlines()
    assert "ok nvml-discovery" in lines and "ok nproc-gpu" in lines, lines
    # no torch and no accelerate for this interpreter: said, not failed
    assert any(l.startswith("skip torch-nccl-allreduce:") for l in lines), lines
    assert any(l.startswith("skip accelerate-env:") for l in lines), lines
