"""The node's devices in a whole podrun job: a fixture machine (8 GPUs on 2 NUMA nodes, 4 HCAs;
tests/fixtures/mkmachine) read through --sysroot, with the fake NVML and libibverbs found on the
library path as the real ones would be. Workers print what they got (workers/devices.sh)."""
import os
import pathlib
import re
import shutil
import socket
import subprocess

import pytest

from conftest import BUILD
from cluster import run, worker

MKMACHINE = str(BUILD / "tests" / "fixtures" / "mkmachine")
FAKES = str(BUILD / "tests" / "fakes")
DEVICES_SH = worker("devices.sh")
UUIDS = ["GPU-8932f937-d72c-4106-c12f-20bd9faed9f6", "GPU-8932a1b2-0c3d-4e5f-8a9b-0c1d2e3f4a5b",
         "GPU-1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9", "GPU-2a3b4c5d-6e7f-4081-9203-b4c5d6e7f809",
         "GPU-3c4d5e6f-7081-4293-a4b5-c6d7e8f90a1b", "GPU-4d5e6f70-8192-4a3b-b5c6-d7e8f90a1b2c",
         "GPU-5e6f7081-92a3-4b4c-c6d7-e8f90a1b2c3d", "GPU-6f708192-a3b4-4c5d-d7e8-f90a1b2c3d4e"]


def cpu_pair():
    """Two CPUs this test may run on: the fixture puts NUMA node 0 on the first, node 1 on the
    second, so a binding is observable on this machine."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two usable CPUs to tell NUMA nodes apart")
    return cpus[0], cpus[1]


def machine(tmp_path, *opts):
    """Builds a fixture machine; returns the environment that points podrun at it."""
    root = tmp_path / "machine"
    root.mkdir()
    subprocess.run([MKMACHINE, str(root), *opts], check=True)
    return {"PODRUN_SYSROOT": str(root), "PODRUN_FAKE_NVML": str(root / "nvml.conf"),
            "PODRUN_FAKE_IBVERBS": str(root / "verbs.conf"), "LD_LIBRARY_PATH": FAKES,
            "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}


def small(tmp_path, *opts):
    a, b = cpu_pair()
    return machine(tmp_path, "--no-mig", "--node-cpus", str(a), str(b), *opts), (a, b)


def workers_of(out):
    """{rank: {key: value}} from the DEV lines."""
    got = {}
    for line in out.splitlines():
        m = re.search(r"DEV (.*)$", line)
        if m:
            kv = dict(p.split("=", 1) for p in m.group(1).split())
            got[int(kv["rank"])] = kv
    return got


def test_nproc_gpu_starts_one_worker_per_gpu(podrun, tmp_path):
    env, _ = small(tmp_path)
    r = run(podrun, "--nproc-per-node", "gpu", "--no-python", DEVICES_SH, env=env)
    assert r.returncode == 0, r.stderr
    got = workers_of(r.stdout)
    assert sorted(got) == list(range(8))
    for rank, w in got.items():
        assert w["local_rank"] == str(rank) and w["world"] == "8"
        assert w["cvd"] == "-"              # torchrun's default: every GPU visible, LOCAL_RANK picks
        assert w["omp"] == "1"
        assert w["ib_disable"] == "1"       # HCAs in sysfs, no /dev/infiniband in the container
        assert w["gloo_if"] != "-"
    assert re.search(r"^podrun sets .*NCCL_IB_DISABLE=1.*OMP_NUM_THREADS=1", r.stderr, re.M)
    assert "/dev/infiniband is not in the container" in r.stderr
    # auto counts the GPUs too; without the fake NVML the same machine is read from /proc
    r = run(podrun, "--nproc-per-node", "auto", "--no-python", DEVICES_SH, env=env)
    assert len(workers_of(r.stdout)) == 8
    no_nvml = dict(env, PODRUN_FAKE_NVML="/nonexistent")
    r = run(podrun, "--nproc-per-node", "gpu", "--no-python", DEVICES_SH, env=no_nvml)
    assert r.returncode == 0 and len(workers_of(r.stdout)) == 8, r.stderr


def test_nproc_gpu_without_gpus_is_a_usage_error(podrun, tmp_path):
    env = {"PODRUN_SYSROOT": str(tmp_path), "LD_LIBRARY_PATH": FAKES,
           "PODRUN_FAKE_NVML": "/nonexistent"}
    r = run(podrun, "--nproc-per-node", "gpu", "--no-python", "true", env=env)
    assert r.returncode == 2
    assert "--nproc-per-node gpu: no GPU found on this node" in r.stderr


def test_per_rank_visibility_and_virtual_local_rank(podrun, tmp_path):
    env, _ = small(tmp_path)
    r = run(podrun, "--nproc-per-node", "gpu", "--visible-devices", "per-rank", "--no-python",
            DEVICES_SH, env=env)
    assert r.returncode == 0, r.stderr
    got = workers_of(r.stdout)
    assert [got[i]["cvd"] for i in range(8)] == UUIDS
    assert [got[i]["local_rank"] for i in range(8)] == [str(i) for i in range(8)]
    # torch 2.x's spelling: every worker is local rank 0 of its own single GPU
    r = run(podrun, "--nproc_per_node", "gpu", "--virtual_local_rank", "--no-python",
            DEVICES_SH, env=env)
    got = workers_of(r.stdout)
    assert [got[i]["cvd"] for i in range(8)] == UUIDS
    assert {got[i]["local_rank"] for i in range(8)} == {"0"}
    assert "CUDA_VISIBLE_DEVICES=<one device per worker>" in r.stderr
    # an inherited list narrows the GPUs; each worker gets one device of it, by UUID
    r = run(podrun, "--nproc-per-node", "gpu", "--virtual-local-rank", "--no-python",
            DEVICES_SH, env=dict(env, CUDA_VISIBLE_DEVICES="5,2"))
    got = workers_of(r.stdout)
    assert [got[i]["cvd"] for i in range(2)] == [UUIDS[5], UUIDS[2]]
    # more workers than GPUs is a usage error naming the setting
    r = run(podrun, "--nproc-per-node", "9", "--virtual-local-rank", "--no-python", "true",
            env=env)
    assert r.returncode == 2
    assert "--virtual-local-rank (flag --virtual-local-rank) gives each worker a GPU of its " \
           "own, but there are 8 GPUs here for 9 workers" in r.stderr


def test_binding_seen_from_inside_the_workers(podrun, tmp_path):
    env, (a, b) = small(tmp_path)
    r = run(podrun, "--nproc-per-node", "gpu", "--numa-binding", "node", "--no-python",
            DEVICES_SH, env=env)
    assert r.returncode == 0, r.stderr
    got = workers_of(r.stdout)
    # GPUs 0-3 sit on NUMA node 0 (CPU a), 4-7 on node 1 (CPU b)
    assert [got[i]["cpus"] for i in range(8)] == [str(a)] * 4 + [str(b)] * 4
    assert f"workers are bound (--numa-binding node): local ranks 0-3: CPUs {a}; " \
           f"local ranks 4-7: CPUs {b}" in r.stderr
    # DeepSpeed's cores: the list split by local rank, OMP_NUM_THREADS the cores per rank
    r = run(podrun, "--nproc-per-node", "2", "--bind-core-list", f"{a},{b}", "--no-python",
            DEVICES_SH, env=env)
    assert r.returncode == 0, r.stderr
    got = workers_of(r.stdout)
    assert [got[0]["cpus"], got[1]["cpus"]] == [str(a), str(b)]
    assert got[0]["omp"] == "1"
    # without binding: the container's whole cpuset
    r = run(podrun, "--nproc-per-node", "2", "--no-python", DEVICES_SH, env=env)
    mine = open("/proc/self/status").read().split("Cpus_allowed_list:")[1].split()[0]
    assert {w["cpus"] for w in workers_of(r.stdout).values()} == {mine}


def test_binding_that_cannot_be_made_is_a_usage_error(podrun, tmp_path):
    env = machine(tmp_path, "--no-mig")   # the 64-CPU machine: node 1's CPUs are not ours
    if len(os.sched_getaffinity(0)) >= 64:
        pytest.skip("this machine has the fixture's CPUs")
    r = run(podrun, "--nproc-per-node", "gpu", "--numa-binding", "node", "--no-python", "true",
            env=env)
    assert r.returncode == 2
    assert "--numa-binding node: local rank 4's GPU is on NUMA node 1, which has no CPU in " \
           "this container's cpuset" in r.stderr


def test_podrun_env(podrun, tmp_path):
    env, (a, b) = small(tmp_path)
    r = run(podrun, "env", "--nproc-per-node", "gpu",
            "--numa-binding", "node", env=dict(env, OMP_NUM_THREADS="3"))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "podrun env: 8 workers on this node" in out
    assert "GPUs        8 found (NVML); 8 visible to the workers" in out
    assert re.search(r"mlx5_1:1 DOWN InfiniBand, uverbs no", out)
    assert re.search(r"^set         NCCL_IB_DISABLE=1\n\s+warning: HCAs mlx5_0, mlx5_1, mlx5_2, "
                     r"mlx5_3 are on this node but /dev/infiniband", out, re.M)
    assert re.search(r"^left alone  OMP_NUM_THREADS=3\n\s+set by the user or the operator", out,
                     re.M)
    assert re.search(r"^set         GLOO_SOCKET_IFNAME=\S+\n", out, re.M)
    assert f"local rank 7: CPUs {b}" in out
    # the options are a job's: a bad one is the same usage error
    r = run(podrun, "env", "--numa-binding", "sideways", env=env)
    assert r.returncode == 2 and "use 'none', 'node'" in r.stderr
    # --print-config includes the derived variables
    r = run(podrun, "--print-config", "--nproc-per-node", "gpu", env=env)
    assert re.search(r"^env NCCL_IB_DISABLE\s+1\s+\(derived", r.stdout, re.M)


def test_podrun_env_finds_the_master_as_the_job_does(podrun, tmp_path):
    """A hostfile names this node by its host name and the store's host first: `podrun env` reads
    the machine as a job's discovery does, so it shows the job's master and its interface."""
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.3 slots=1\n{socket.gethostname()} slots=1\n")
    env = {"PODRUN_SYSROOT": "", "LD_LIBRARY_PATH": FAKES, "PODRUN_DISCOVERY_ROOT": "/"}
    r = run(podrun, "env", "--hostfile", str(hosts), env=env)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^interface   lo \(127\.0\.0\.1\)\n\s+lo: MASTER_ADDR 127\.0\.0\.3 is a "
                     r"loopback address", r.stdout, re.M), r.stdout
    assert re.search(r"^set         GLOO_SOCKET_IFNAME=lo$", r.stdout, re.M), r.stdout


def test_ib_and_roce_variables(podrun, tmp_path):
    # /dev/infiniband mounted: mlx5_1 is DOWN, so the usable ports are named exactly
    env, _ = small(tmp_path, "--dev-infiniband")
    r = run(podrun, "--nproc-per-node", "2", "--no-python", DEVICES_SH, env=env)
    assert r.returncode == 0, r.stderr
    w = workers_of(r.stdout)[0]
    assert w["ib_disable"] == "-"
    assert w["ib_hca"] == "=mlx5_0:1,mlx5_2:1,mlx5_3:1"
    assert w["gid"] == "-"            # the RoCE ports' v2 GIDs are at different indices (3, 7)
    # the user's value stands, and the worker gets it unchanged
    r = run(podrun, "--nproc-per-node", "2", "--no-python", DEVICES_SH,
            env=dict(env, NCCL_IB_HCA="mlx5_1"))
    assert workers_of(r.stdout)[0]["ib_hca"] == "mlx5_1"
    assert "NCCL_IB_HCA" not in re.search(r"^podrun sets .*$", r.stderr, re.M).group(0)


def test_no_hcas_no_ib_variables(podrun, tmp_path):
    env, _ = small(tmp_path, "--no-hcas")
    r = run(podrun, "--nproc-per-node", "2", "--no-python", DEVICES_SH, env=env)
    w = workers_of(r.stdout)[0]
    assert (w["ib_disable"], w["ib_hca"], w["gid"]) == ("-", "-", "-")


def test_small_dev_shm_warns_with_the_fix(podrun, tmp_path):
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root to mount a small tmpfs in a mount namespace")
    env, _ = small(tmp_path)
    shm = os.path.join(env["PODRUN_SYSROOT"], "dev", "shm")
    script = f'mount -t tmpfs -o size=64m tmpfs {shm} && exec "$@"'
    r = run("unshare", "--mount", "sh", "-c", script, "sh", podrun, "--no-python", "true",
            env=env)
    if r.returncode != 0 and "mount" in r.stderr:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    assert re.search(r"^podrun: /dev/shm is 64 MiB: .*emptyDir volume with medium: Memory", r.stderr,
                     re.M)


def test_whole_job_never_loads_or_calls_cuda(podrun, tmp_path):
    """The agent must not touch CUDA: a process that initialised it cannot give CUDA to the
    children it forks. With fake libcuda/libcudart preloaded, every entry point records a call;
    through a whole job (8 workers, binding, per-rank visibility) only their loading is recorded,
    once per process. With the fakes only on the library path, nothing loads them at all."""
    env, _ = small(tmp_path)
    log = tmp_path / "cuda.log"
    cuda, cudart = os.path.join(FAKES, "libcuda.so.1"), os.path.join(FAKES, "libcudart.so")
    args = ["--nproc-per-node", "gpu", "--numa-binding", "node", "--visible-devices",
            "per-rank", "--no-python", "true"]
    pre = dict(env, LD_PRELOAD=f"{cuda}:{cudart}", PODRUN_FAKE_CUDA_LOG=str(log))
    r = run(podrun, *args, env=pre)
    assert r.returncode == 0, r.stderr
    lines = log.read_text().splitlines()
    assert lines and all(l in ("load libcuda.so.1", "load libcudart.so") for l in lines), lines
    assert len(lines) == 2 * (1 + 8)    # podrun and its 8 workers, each loading both, no call
    log.unlink()
    r = run(podrun, *args, env=dict(env, PODRUN_FAKE_CUDA_LOG=str(log)))
    assert r.returncode == 0, r.stderr
    assert not log.exists()


def cpu_limited(tmp_path, files):
    """A machine with no GPU whose cgroup files are `files` ({path: text}); the cpuset is this
    machine's, which must have two CPUs for a quota of one to be the tighter limit."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two usable CPUs for a quota of one to count")
    root = tmp_path / "limited"
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return {"PODRUN_SYSROOT": str(root), "PODRUN_FAKE_NVML": "/nonexistent",
            "LD_LIBRARY_PATH": FAKES,
            "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}


V2_ONE_CPU = {"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/cpu.max": "100000 100000\n"}
V1_ONE_CPU = {"proc/self/cgroup": "3:cpu,cpuacct:/\n",
              "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "150000\n",
              "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n"}
COUNT_SH = 'echo "w $LOCAL_RANK $LOCAL_WORLD_SIZE ${OMP_NUM_THREADS:--}"'


@pytest.mark.parametrize("files", [V2_ONE_CPU, V1_ONE_CPU], ids=["cgroup-v2", "cgroup-v1"])
@pytest.mark.parametrize("how", [["--nproc-per-node", "cpu"], ["--nproc-per-node", "auto"], []],
                         ids=["cpu", "auto", "PET_NPROC_PER_NODE=auto"])
def test_nproc_cpu_and_auto_honour_the_cpu_quota(podrun, tmp_path, files, how):
    """A container limited to one CPU (1 or 1.5, rounded down) on a machine of two or more starts
    one worker, for podrun's flag and for Kubeflow Trainer's PET_NPROC_PER_NODE=auto."""
    env = cpu_limited(tmp_path, files)
    if not how:
        env["PET_NPROC_PER_NODE"] = "auto"
    r = run(podrun, *how, "sh", "-c", COUNT_SH, env=env)
    assert r.returncode == 0, r.stderr
    assert re.findall(r"^\[rank \d\]:w .*$", r.stdout, re.M) == ["[rank 0]:w 0 1 -"], r.stdout
    r = run(podrun, "env", *how, env=env)
    assert r.returncode == 0, r.stderr
    assert "podrun env: 1 worker on this node" in r.stdout, r.stdout
    assert re.search(r"^\s+1 usable: the CPU quota decides \(1\.[05]0 CPUs in \S+/sys/fs/cgroup/",
                     r.stdout, re.M), r.stdout


def test_accelerate_cpu_threads_share_the_cpu_quota(podrun, tmp_path):
    """accelerate's --cpu OpenMP threads are the physical cores, but no more than the quota."""
    env = cpu_limited(tmp_path, V2_ONE_CPU)
    env["HF_HOME"] = str(tmp_path)
    r = run(podrun, "accelerate", "launch", "--cpu", "--num_processes", "1", "--no_python", "sh",
            "-c", 'echo "omp=$OMP_NUM_THREADS"', env=env)
    assert r.returncode == 0, r.stderr
    assert "[rank 0]:omp=1" in r.stdout.splitlines(), r.stdout


def test_cpu_quota_above_the_cpuset_leaves_the_cpuset_deciding(podrun, tmp_path):
    env = cpu_limited(tmp_path, {"proc/self/cgroup": "0::/\n",
                                 "sys/fs/cgroup/cpu.max": "100000000 100000\n"})
    n = len(os.sched_getaffinity(0))
    r = run(podrun, "--nproc-per-node", "cpu", "sh", "-c", COUNT_SH, env=env)
    assert r.returncode == 0, r.stderr
    assert len(re.findall(r"^\[rank \d+\]:w ", r.stdout, re.M)) == min(n, 128)
    r = run(podrun, "env", "--nproc-per-node", "cpu", env=env)
    assert re.search(rf"^\s+{n} usable: the cpuset decides \(the CPU quota in ", r.stdout, re.M)


def test_nproc_cpu_in_a_real_cpu_limited_cgroup(podrun, tmp_path):
    """The same in a real cgroup (v1 or v2) with a quota of one CPU, where this machine lets the
    test make one."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two usable CPUs for a quota of one to count")
    own = open("/proc/self/cgroup").read().splitlines()
    v2 = [l.split(":", 2)[2] for l in own if l.startswith("0::")]
    v1 = [l.split(":", 2) for l in own if "cpu" in l.split(":")[1].split(",")]
    if v1:
        base = pathlib.Path("/sys/fs/cgroup") / v1[0][1]
        if not base.exists():
            base = pathlib.Path("/sys/fs/cgroup/cpu")
        base = base / v1[0][2].lstrip("/")
    elif v2:
        base = pathlib.Path("/sys/fs/cgroup") / v2[0].lstrip("/")
    else:
        pytest.skip("no cgroup")
    cg = base / f"podrun-test-{os.getpid()}-{tmp_path.name}"
    try:
        cg.mkdir()
        if v1:
            (cg / "cpu.cfs_period_us").write_text("100000")
            (cg / "cpu.cfs_quota_us").write_text("100000")
        else:
            (cg / "cpu.max").write_text("100000 100000")
    except OSError as e:
        if cg.exists():
            cg.rmdir()
        pytest.skip(f"cannot make a CPU-limited cgroup here: {e}")
    try:
        procs = str(cg / "cgroup.procs")
        r = subprocess.run([podrun, "--nproc-per-node", "cpu", "sh", "-c", COUNT_SH],
                           capture_output=True, text=True, timeout=60,
                           preexec_fn=lambda: open(procs, "w").write(str(os.getpid())))
        assert r.returncode == 0, r.stderr
        assert re.findall(r"^\[rank \d\]:w .*$", r.stdout, re.M) == ["[rank 0]:w 0 1 -"], \
            r.stdout
    finally:
        cg.rmdir()
