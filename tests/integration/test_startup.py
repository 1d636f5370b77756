"""What a plain one-node CPU job costs at start: podrun reads only what the job uses. Observed with
strace: the files opened, the sockets made and the threads started. The HCAs (NCCL's) and the
CPU topology (--numa-binding's) are not read, the route to the master is not asked (no netlink
socket: a one-node job without a GPU names no socket interface, as torchrun), no thread is started
(a name lookup would start libuv's thread pool), and `podrun env`, which shows the whole node,
does read them, so the same trace would see a probe that came back."""
import os
import re
import shutil
import subprocess

import pytest

HCA = re.compile(r'"[^"]*/sys/class/infiniband[^"]*"|libibverbs')
TOPOLOGY = re.compile(r'"/sys/devices/system/(node/|cpu/cpu[0-9]+/(topology|cache))')


def traced(tmp_path, podrun, *args, env=None):
    """podrun's syscalls (and its children's up to their exec) as text, and its exit status."""
    if not shutil.which("strace"):
        pytest.skip("strace is not installed")
    out = tmp_path / "trace"
    # -f follows the forked workers too: their exec ends what is podrun's
    r = subprocess.run(["strace", "-f", "-qq", "-o", str(out), "-e",
                        "trace=openat,open,clone,clone3,execve,socket", podrun, *args],
                       env=env, capture_output=True, text=True, timeout=60)
    if r.returncode != 0 and "ptrace" in r.stderr:
        pytest.skip(f"strace cannot trace here: {r.stderr.strip()}")
    return out.read_text(), r


def threads(trace):
    return [l for l in trace.splitlines()
            if re.search(r"\bclone3?\(", l) and "CLONE_THREAD" in l]


def test_one_node_cpu_job_probes_nothing_it_does_not_use(podrun, tmp_path):
    env = dict(os.environ)
    env["PATH"] = f"{tmp_path}:/nonexistent:{env.get('PATH', '/usr/bin:/bin')}"
    for k in ("NCCL_SOCKET_IFNAME", "OMP_NUM_THREADS", "PODRUN_NUMA_BINDING"):
        env.pop(k, None)
    trace, r = traced(tmp_path, podrun, "--nproc-per-node", "8", "--no-python", "true", env=env)
    assert r.returncode == 0, r.stderr
    assert len(re.findall(r'execve\("[^"]*/true"', trace)) >= 8   # the workers did run
    # `true` is looked up in PATH once, not by each worker trying every entry before its own
    failed = [l for l in trace.splitlines() if re.search(r'execve\("[^"]*/true".* = -1 ', l)]
    assert failed == [], failed[:3]
    assert not HCA.findall(trace), HCA.findall(trace)
    assert not TOPOLOGY.findall(trace), TOPOLOGY.findall(trace)[:5]
    assert threads(trace) == [], threads(trace)
    assert "AF_NETLINK" not in trace
    # the workers' environment is what it was: torchrun's OMP_NUM_THREADS for 8 workers
    assert re.search(r"^podrun sets .*OMP_NUM_THREADS=1", r.stderr, re.M), r.stderr


def test_podrun_env_reads_the_whole_node(podrun, tmp_path):
    """The control: the same trace sees the probes where they are wanted."""
    if not os.path.isdir("/sys/devices/system/cpu/cpu0"):
        pytest.skip("no /sys/devices/system/cpu here")
    trace, r = traced(tmp_path, podrun, "env", "--nproc-per-node", "2")
    assert r.returncode == 0, r.stderr
    assert HCA.findall(trace)
    assert TOPOLOGY.findall(trace)


def test_one_node_cpu_workers_get_no_socket_interface(podrun, tmp_path):
    """torchrun names no interface for a one-node job; neither does podrun without a GPU."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")}
    r = subprocess.run([podrun, "--nproc-per-node", "2", "--no-python", "sh", "-c",
                        'echo "IF ${NCCL_SOCKET_IFNAME:--} ${GLOO_SOCKET_IFNAME:--}"'],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert re.findall(r"IF (\S+) (\S+)", r.stdout) == [("-", "-")] * 2, r.stdout
    assert "SOCKET_IFNAME" not in r.stderr
