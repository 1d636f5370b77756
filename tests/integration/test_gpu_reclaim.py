"""Before a restart on a node with GPUs, podrun waits (bounded) for the GPUs' memory to be freed,
read through NVML: here the fake libnvidia-ml (tests/fakes/fake_nvml.c), whose answers come from
a file re-read at every nvmlInit, so a test changes what the GPUs hold while podrun waits."""
import os
import signal
import subprocess

from conftest import BUILD, PODRUN

FAKES = str(BUILD / "tests" / "fakes")
GIB = 1 << 30
# attempt 0 fails, attempt 1 succeeds: one restart
FAIL_ONCE = 'if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then exit 1; fi; echo "attempt1 ok"'


def gpu_conf(path, used, procs=""):
    path.write_text(f"gpu uuid=GPU-0a1b2c3d-0000-4000-8000-000000000001 pci=0000:3b:00.0 "
                    f"name=NVIDIA_H100 minor=0 numa=0 used={used}"
                    + (f" procs={procs}" if procs else "") + "\n")


def env_for(conf):
    e = dict(os.environ)
    e.update({"PODRUN_FAKE_NVML": str(conf), "LD_LIBRARY_PATH": FAKES})
    e.pop("OMP_NUM_THREADS", None)
    return e


def args(*extra):
    return [PODRUN, "--max-restarts", "1", "--no-python", *extra, "sh", "-c", FAIL_ONCE]


def test_memory_still_held_is_named_and_the_restart_goes_on(tmp_path):
    conf = tmp_path / "nvml.conf"
    gpu_conf(conf, 2 * GIB, f"4242:{2 * GIB}")
    # the wait's bound is the behaviour under test: 1 s
    r = subprocess.run(args("--gpu-memory-reclaim-timeout", "1"), env=env_for(conf),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "attempt1 ok" in r.stdout
    assert "waiting up to 1.0s for the GPUs' memory to be freed (2.00 GiB in use, tolerance " \
           "512 MiB)" in r.stderr
    assert "the GPUs still hold 2.00 GiB after 1.0s" in r.stderr
    assert "held by: GPU 0: pid 4242 (?) 2.00 GiB" in r.stderr
    assert "restarting anyway" in r.stderr


def test_restart_goes_on_as_soon_as_memory_is_freed(tmp_path):
    conf = tmp_path / "nvml.conf"
    gpu_conf(conf, 3 * GIB, f"4242:{3 * GIB}")
    p = subprocess.Popen(args("--gpu-memory-reclaim-timeout", "60"), env=env_for(conf),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = []
        for line in p.stderr:
            seen.append(line)
            if "waiting up to 60.0s" in line:
                gpu_conf(conf, 100 << 20)   # freed, below the tolerance
                break
        assert any("waiting up to" in s for s in seen), seen
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert "attempt1 ok" in out
    assert "the GPUs' memory was freed after" in err
    assert "still hold" not in err


def test_memory_within_tolerance_does_not_wait(tmp_path):
    conf = tmp_path / "nvml.conf"
    gpu_conf(conf, 100 << 20)
    r = subprocess.run(args(), env=env_for(conf), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "waiting up to" not in r.stderr and "restarting the job in place" in r.stderr


def test_zero_timeout_does_not_look(tmp_path):
    conf = tmp_path / "nvml.conf"
    gpu_conf(conf, 8 * GIB)
    r = subprocess.run(args("--gpu-memory-reclaim-timeout", "0"), env=env_for(conf),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "waiting up to" not in r.stderr


def test_sigterm_during_the_wait_exits_at_once(tmp_path):
    """A stop that comes while the restart waits for the GPUs' memory ends the wait: podrun exits
    128+SIGTERM without rejoining, long before the wait's bound."""
    conf = tmp_path / "nvml.conf"
    gpu_conf(conf, 3 * GIB, f"4242:{3 * GIB}")
    p = subprocess.Popen(args("--gpu-memory-reclaim-timeout", "600"), env=env_for(conf),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = []
        for line in p.stderr:
            seen.append(line)
            if "waiting up to 600.0s" in line:
                p.send_signal(signal.SIGTERM)
                break
        assert any("waiting up to" in s for s in seen), seen
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + signal.SIGTERM, err
    assert "attempt1 ok" not in out
    assert "still hold" not in err, err
