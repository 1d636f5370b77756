"""The worker's world under accelerate 1.15's `accelerate launch` (the project's .venv) and under
`podrun accelerate launch`, for the same command lines and config files: every difference in the
workers' environment, argv, cwd, process group and the exit codes is one that doc/frontends.md's
accelerate table lists (launcher_diff.py compares, the doc is the allow-list). On a machine
without GPUs `--multi_gpu` is accelerate's torchrun launcher on CPU workers, which is all these
tests need of it."""
import json
import os
import subprocess

import pytest

from conftest import PODRUN, VENV_BIN, VENV_PY, free_port
from launcher_diff import (CAPTURE, assert_documented, compare, documented, is_fixed, run_side)

ACCELERATE = str(VENV_BIN / "accelerate")

pytestmark = [
    pytest.mark.skipif(not os.access(ACCELERATE, os.X_OK),
                       reason=f"{ACCELERATE} is missing: scripts/deps installs it"),
    pytest.mark.skipif(os.path.exists("/dev/nvidia0"),
                       reason="a GPU is present: accelerate would pick other launchers"),
]

EXPECTED = {"TORCHELASTIC_ERROR_FILE": r"/.+/attempt_0/[0-9]+[/.]error\.json"}
PY = [(r"^/.*/bin/python3?(\.[0-9]+)?$", "PYTHON")]
FIELDS = ("argv", "cmdline", "cwd", "pgid_is_pid", "sid_is_pid")


def both(nodes, tmp_path, env=None):
    """Each machine's `accelerate launch` arguments through accelerate 1.15, then through
    podrun; HF_HOME is the test's (no default config file unless the test writes one)."""
    e = {"HF_HOME": str(tmp_path), **(env or {})}
    real = run_side("accelerate", [[ACCELERATE, "launch", *a] for a in nodes], env=e,
                    unset=["OMP_NUM_THREADS"])
    pod = run_side("podrun", [[PODRUN, "accelerate", "launch", "--python", VENV_PY, *a]
                              for a in nodes], env=e, unset=["OMP_NUM_THREADS"])
    return real, pod


def own_port():
    """accelerate's torchrun launcher binds 29500 unless told: the tests that run it on one
    machine name a port of their own, so that two of them running at once do not collide."""
    return ["--main_process_port", str(free_port())]


def diff(real, pod):
    return compare(real, pod, expected=EXPECTED, fields=FIELDS, argv_subs=PY)


@pytest.mark.parametrize("cpu", [True, False], ids=["cpu", "no-gpus-no-python"])
def test_simple_launcher(tmp_path, cpu):
    """--cpu, or no launcher flag on a machine without GPUs: accelerate's simple launcher, one
    process whatever --num_processes says."""
    args = (["--cpu", "--num_processes", "2", "--mixed_precision", "bf16", "--debug",
             "--main_training_function", "main", "--downcast_bf16", CAPTURE, "x", "--y"] if cpu
            else ["--num_processes", "2", "--no_python", CAPTURE, "x"])
    real, pod = both([args], tmp_path)
    assert real.rcs == [0] and list(real.workers) == ["0"], real.err_text()
    found = diff(real, pod)
    keys = assert_documented(found, "accelerate")
    assert not {"argv", "cwd", "workers", "exit code", "KMP_AFFINITY", "KMP_BLOCKTIME"} & keys
    assert ("cmdline" in keys) == cpu   # podrun's -u, and no interpreter with --no_python
    e = pod.workers["0"]["env"]
    assert e["ACCELERATE_USE_CPU"] == str(cpu) and ("KMP_BLOCKTIME" in e) == cpu
    assert (e["MASTER_ADDR"], e["MASTER_PORT"]) == ("127.0.0.1", "29500")
    assert e.get("ACCELERATE_DEBUG_MODE") == ("true" if cpu else None)
    assert is_fixed(documented("accelerate")["KMP_AFFINITY"])


def test_multi_gpu_launcher_and_a_failing_worker(tmp_path):
    """--multi_gpu (accelerate's torchrun launcher) with its own variables; rank 1 exits 3."""
    real, pod = both([["--multi_gpu", "--num_processes", "2", "--mixed_precision", "fp16",
                       "--num_cpu_threads_per_process", "2", "--dynamo_backend", "eager",
                       *own_port(), "-m", "capture"]], tmp_path,
                     env={"LAUNCHER_DIFF_EXIT": "3", "LAUNCHER_DIFF_EXIT_RANKS": "1",
                          "LAUNCHER_DIFF_WAIT_FOR": "2", "PYTHONPATH": os.path.dirname(CAPTURE)})
    assert real.rcs == [1] and sorted(real.workers) == ["0", "1"], real.err_text()
    found = diff(real, pod)
    keys = assert_documented(found, "accelerate")
    assert "workers" not in keys and "argv" not in keys
    assert pod.rcs == [3]
    for w in pod.workers.values():
        e = w["env"]
        assert (e["ACCELERATE_MIXED_PRECISION"], e["OMP_NUM_THREADS"],
                e["ACCELERATE_DYNAMO_BACKEND"]) == ("fp16", "2", "EAGER")


def test_fsdp_and_deepspeed_launchers(tmp_path):
    """--use_fsdp and --use_deepspeed on one machine: torchrun's launcher with their variables."""
    for args in (["--use_fsdp", "--num_processes", "2", "--fsdp_version", "2",
                  "--fsdp_activation_checkpointing_offload", "true",
                  "--fsdp_sharding_strategy", "FULL_SHARD", *own_port(), CAPTURE],
                 ["--use_deepspeed", "--num_processes", "2", "--zero_stage", "2",
                  "--mixed_precision", "bf16", *own_port(), CAPTURE]):
        real, pod = both([args], tmp_path)
        assert real.rcs == [0] and sorted(real.workers) == ["0", "1"], real.err_text()
        keys = assert_documented(diff(real, pod), "accelerate")
        assert not {"FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD", "PYTORCH_NVML_BASED_CUDA_CHECK",
                    "argv", "workers"} & keys


def test_default_config_file(tmp_path):
    """accelerate config's default_config.yaml ($HF_HOME/accelerate/), as its docs show one for
    a machine of 2 processes."""
    (tmp_path / "accelerate").mkdir()
    (tmp_path / "accelerate" / "default_config.yaml").write_text(
        "compute_environment: LOCAL_MACHINE\ndebug: false\ndistributed_type: MULTI_GPU\n"
        "downcast_bf16: 'no'\ngpu_ids: all\nmachine_rank: 0\nmain_training_function: main\n"
        f"main_process_port: {free_port()}\n"
        "mixed_precision: bf16\nnum_machines: 1\nnum_processes: 2\nrdzv_backend: static\n"
        "same_network: true\ntpu_env: []\ntpu_use_cluster: false\ntpu_use_sudo: false\n"
        "use_cpu: false\n")
    real, pod = both([[CAPTURE]], tmp_path)
    assert real.rcs == [0] and sorted(real.workers) == ["0", "1"], real.err_text()
    keys = assert_documented(diff(real, pod), "accelerate")
    assert not {"ACCELERATE_MIXED_PRECISION", "workers"} & keys


def test_two_machines(tmp_path):
    """--num_machines 2 on 127.0.0.2 and .3, the second reaching the first's port."""
    port = free_port("127.0.0.2")
    nodes = [["--multi_gpu", "--num_machines", "2", "--num_processes", "2", "--machine_rank",
              str(r), "--main_process_ip", "127.0.0.2", "--main_process_port", str(port),
              CAPTURE] for r in range(2)]
    real, pod = both(nodes, tmp_path)
    assert real.rcs == [0, 0] and sorted(real.workers) == ["0", "1"], real.err_text()
    keys = assert_documented(diff(real, pod), "accelerate")
    assert not {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "GROUP_RANK"} & keys
    assert {w["env"]["MASTER_ADDR"] for w in pod.workers.values()} == {"127.0.0.2"}


# accelerate's multi-CPU launch without mpirun: each machine's one process gets no rank, podrun's
# get torchrun's variables for the job it made of them: one row of the table for all of them
MULTI_CPU_ROW = "distributed_type: MULTI_CPU"


def test_multi_cpu_config_files_two_machines(tmp_path):
    """The multi-CPU config file of accelerate's docs, one per machine (machine_rank 0 and 1)."""
    port = free_port("127.0.0.2")
    nodes = []
    for r in range(2):
        y = tmp_path / f"machine{r}.yaml"
        y.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\n"
                     f"machine_rank: {r}\nmain_process_ip: 127.0.0.2\n"
                     f"main_process_port: {port}\nmain_training_function: main\n"
                     "mixed_precision: 'no'\nnum_machines: 2\nnum_processes: 2\n"
                     "rdzv_backend: static\nsame_network: true\nuse_cpu: true\n")
        nodes.append(["--config_file", str(y), CAPTURE])
    real, pod = both(nodes, tmp_path)
    assert real.rcs == pod.rcs == [0, 0], real.err_text() + pod.err_text()
    # accelerate: two unrelated processes with no rank; podrun: ranks 0 and 1 of one job
    assert sorted(real.workers) == ["0", "0+"] and sorted(pod.workers) == ["0", "1"]
    for w in real.workers.values():
        assert "RANK" not in w["env"] and w["env"]["MASTER_ADDR"] == "127.0.0.2"
    pod.workers["0+"] = pod.workers.pop("1")   # pair them by machine
    found = diff(real, pod)
    torch_vars = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                  "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "LOCAL_WORLD_SIZE",
                  "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
                  "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
                  "TORCHELASTIC_ERROR_FILE", "TORCH_NCCL_ASYNC_ERROR_HANDLING"}
    ours = [f for f in found if f.key in torch_vars]
    assert ours and all(f.kind == "only-in-podrun" for f in ours), ours
    assert MULTI_CPU_ROW in documented("accelerate")
    assert_documented([f for f in found if f.key not in torch_vars], "accelerate")


def test_every_launch_flag_is_known_or_listed():
    """Each flag of accelerate 1.15's `launch` parser is one podrun's front-end takes (or
    refuses by name), or a row of the doc's table."""
    code = ("import json; from accelerate.commands.launch import launch_command_parser as p\n"
            "print(json.dumps([[o, a.nargs != 0] for a in p()._actions "
            "for o in a.option_strings]))")
    out = subprocess.run([VENV_PY, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = documented("accelerate")
    missing = []
    for opt, takes in json.loads(out.stdout):
        if opt in ("-h", "--help"):
            continue
        p = subprocess.run([PODRUN, "accelerate", "launch", opt, *(["1"] if takes else []),
                            "--print-config", "t.py"], capture_output=True, text=True,
                           timeout=30)
        if "unknown option" in p.stderr and (opt not in rows or is_fixed(rows[opt])):
            missing.append(opt)
    assert not missing, f"accelerate 1.15 launch flags podrun neither takes nor lists: {missing}"
