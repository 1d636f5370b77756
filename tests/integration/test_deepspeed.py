"""`podrun deepspeed`: DeepSpeed's command line on real hosts' worth of agents.

From a head node with real pdsh (-R exec: each "host" 127.0.0.2-5 is an agent on this machine
advertising that address): the gloo all_reduce with DeepSpeed's environment and uneven slots, a
worker failing on host 2 stopping every host, SIGINT on the head leaving none of the recorded
processes behind, a host pdsh cannot reach named in one line, and the fallback without pdsh.
Without ssh: three agents on 127.0.0.2-4 reading one hostfile, each finding its own line."""
import os
import re
import signal
import subprocess

import pytest

from cluster import WORKERS, pid_alive, wait_files, wait_gone
from conftest import PODRUN, TORCH_PY, free_port

DS_WORKER = os.path.join(WORKERS, "ds_worker.py")
LINE = re.compile(r"ds rank=(\d+) local_rank=(\d+) world=(\d+) local_size=(\d+) "
                  r"cross_rank=(\d+) cross_size=(\d+) cvd=(\S+) arg_local_rank=(\S+) "
                  r"args=(.*) extra=(\S+) sum=(\d+)")


def env_for(**extra):
    e = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "PDSH_RCMD_TYPE"):
        e.pop(k, None)
    e.update({k: str(v) for k, v in extra.items()})
    return e


def hostfile(tmp_path, lines):
    hf = tmp_path / "hostfile"
    hf.write_text("".join(line + "\n" for line in lines))
    return str(hf)


def head(args, env, cwd, prog=None):
    """The head node: `podrun deepspeed ARGS` (or argv[0] = prog) in its own session."""
    argv = [prog] if prog else [PODRUN, "deepspeed"]
    return subprocess.Popen(argv + list(args), env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish(proc, timeout=90):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"still running after {timeout}s\n{out}\n{err}")
    return proc.returncode, out, err


def results(text):
    return {int(m.group(1)): m.groups() for m in LINE.finditer(text)}


def recorded(piddir):
    """Every pid the workers recorded: their own and their agent's."""
    pids = set()
    for name in os.listdir(piddir):
        with open(os.path.join(piddir, name)) as f:
            pids.update(int(p) for p in f.read().split())
    return pids


FOUR = ["127.0.0.2 slots=1", "127.0.0.3 slots=2", "127.0.0.4 slots=1", "127.0.0.5 slots=1"]


def test_pdsh_exec_four_hosts_allreduce(tmp_path):
    """pdsh -R exec starts one agent per host (%n = node rank); the agents rendezvous at the
    first host; each worker gets DeepSpeed's variables with its true LOCAL_RANK on a host of two
    slots, --local_rank=N after the script, and .deepspeed_env's variables from the head."""
    hf = hostfile(tmp_path, FOUR)
    (tmp_path / ".deepspeed_env").write_text("# exported to every host\nDS_EXTRA = from-file\n")
    port = free_port("127.0.0.2")
    p = head(["-H", hf, "--launcher_args", "-R exec", "--master_port", str(port),
              "--python", TORCH_PY, DS_WORKER, "two words", "x%ny"], env_for(), tmp_path)
    rc, out, err = finish(p)
    assert rc == 0, out + err
    res = results(out)
    assert sorted(res) == [0, 1, 2, 3, 4], out + err
    expect = {0: ("0", "1", "0", "0"), 1: ("0", "2", "1", "0,1"), 2: ("1", "2", "1", "0,1"),
              3: ("0", "1", "2", "0"), 4: ("0", "1", "3", "0")}
    for r, (lr, lsize, cross, cvd) in expect.items():
        g = res[r]
        assert (g[1], g[2], g[3], g[4], g[5], g[6]) == (lr, "5", lsize, cross, "4", cvd), g
        assert g[7] == lr                       # --local_rank=N, N the local index
        assert g[8] == "two words|x%ny"         # arguments as given, '%' untouched by pdsh
        assert g[9] == "from-file"              # .deepspeed_env reached the host
        assert g[10] == "10"
    # pdsh prefixes each host's lines with its name: rank 3 ran on the third host
    assert re.search(r"^127\.0\.0\.4: .*ds rank=3 ", out, re.M), out
    assert "through pdsh -R exec" in err


def test_pdsh_exec_token_and_bind_cores(tmp_path):
    """Under the job's token (PODRUN_RDZV_TOKEN, which pdsh -R exec's commands inherit) the
    guarded store takes every key the agents the head starts write: the job runs and nothing is
    refused. --bind_cores_to_rank with --bind_core_list reaches every host's agent: each worker
    runs on its share of the list, with OMP_NUM_THREADS its size."""
    if len(os.sched_getaffinity(0)) < 2 or not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1")
    hf = hostfile(tmp_path, ["127.0.0.2 slots=2", "127.0.0.3 slots=1"])
    port = free_port("127.0.0.2")
    p = head(["-H", hf, "--launcher_args", "-R exec", "--master_port", str(port),
              "--bind_cores_to_rank", "--bind_core_list", "0-1", "--python", TORCH_PY,
              DS_WORKER], env_for(PODRUN_RDZV_TOKEN="c0ffee" * 8), tmp_path)
    rc, out, err = finish(p)
    assert rc == 0, out + err
    assert "refused" not in out + err, out + err
    assert sorted(results(out)) == [0, 1, 2], out + err
    cpus = {int(m.group(1)): (m.group(2), m.group(3))
            for m in re.finditer(r"ds-cpus rank=(\d+) cpus=(\S+) omp=(\S+)", out)}
    assert cpus == {0: ("0", "1"), 1: ("1", "1"), 2: ("0,1", "2")}, out + err


def test_pdsh_exec_env_and_argv0(tmp_path):
    """PDSH_RCMD_TYPE=exec in the environment picks the exec module too, and podrun answers to
    argv[0] `deepspeed`; --no_local_rank leaves the script's arguments alone."""
    link = tmp_path / "deepspeed"
    link.symlink_to(PODRUN)
    hf = hostfile(tmp_path, FOUR[:2])
    port = free_port("127.0.0.2")
    p = head(["-H", hf, "--master_port", str(port), "--no_local_rank", "--python", TORCH_PY,
              DS_WORKER], env_for(PDSH_RCMD_TYPE="exec"), tmp_path, prog=str(link))
    rc, out, err = finish(p)
    assert rc == 0, out + err
    res = results(out)
    assert sorted(res) == [0, 1, 2] and all(g[7] == "None" for g in res.values()), out + err


def test_worker_failure_on_host_two_stops_every_host(tmp_path):
    """Local rank 0 on host 2 exits 3: the job store pushes the failure to every agent, every
    host's workers stop, nothing recorded is left and the head exits non-zero."""
    hf = hostfile(tmp_path, FOUR)
    piddir = tmp_path / "pids"
    piddir.mkdir()
    port = free_port("127.0.0.2")
    p = head(["-H", hf, "--launcher_args", "-R exec", "--master_port", str(port),
              "--python", TORCH_PY, DS_WORKER],
             env_for(DS_PIDS=piddir, DS_FAIL_NODE=2, DS_FAIL_AFTER=2), tmp_path)
    rc, out, err = finish(p)
    assert rc == 3, out + err            # the failing worker's code, not a stopped host's 170
    for h in ("127.0.0.2", "127.0.0.3", "127.0.0.5"):   # each host names the root cause
        assert re.search(rf"^{h}: podrun: the job failed: rank 3 on 127\.0\.0\.4 exit code 3; "
                         r"exit code 170$", err, re.M), err
    assert not results(out)
    assert len(os.listdir(piddir)) == 5
    assert wait_gone(recorded(piddir)) == []


def in_dir(d):
    """Processes whose working directory is d: the head's agents and workers run there."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and os.readlink(f"/proc/{pid}/cwd") == str(d) and pid_alive(int(pid)):
                found.append(int(pid))
        except OSError:
            pass
    return found


@pytest.mark.parametrize("sig,early", [(signal.SIGINT, False), (signal.SIGTERM, True)],
                         ids=["sigint-running", "sigterm-starting"])
def test_signal_on_head_stops_exactly_this_job(tmp_path, sig, early):
    """SIGINT (SIGTERM) to the head while every worker runs (while the agents start): each
    host's agent of this job is stopped through its pid file, the head exits 128+signal and none
    of the recorded processes, nor any other running in the job's directory, is left; a
    bystander agent of another job on the same machine keeps running."""
    port = free_port("127.0.0.2")
    job = tmp_path / "job"
    job.mkdir()
    hf = hostfile(job, FOUR)
    piddir = tmp_path / "pids"
    piddir.mkdir()
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    bystander = subprocess.Popen(
        [PODRUN, "deepspeed", "--no_python", "--no_local_rank", "--master_port", str(free_port()),
         "sleep", "120"],
        env=env_for(), cwd=other_dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        p = head(["-H", hf, "--launcher_args", "-R exec", "--master_port", str(port),
                  "--python", TORCH_PY, DS_WORKER], env_for(DS_PIDS=piddir, DS_HOLD=120), job)
        if early:   # the head is fanning out: its agents are starting
            line = p.stderr.readline()
            assert "starting 4 hosts' agents" in line, line
        else:
            wait_files(piddir, 5, alive=[p])
        p.send_signal(sig)
        rc, out, err = finish(p, timeout=60)
        assert rc == 128 + sig, out + err
        assert wait_gone(recorded(piddir)) == [], err
        assert wait_gone(in_dir(job), timeout=10) == [], err
        assert bystander.poll() is None, "another job's agent was stopped"
    finally:
        os.killpg(bystander.pid, signal.SIGKILL)
        bystander.wait()


def test_save_pid(tmp_path):
    """--save_pid: /tmp/<pid>.deepspeed holds podrun's pid while the job runs, and goes after."""
    r = subprocess.run([PODRUN, "deepspeed", "--save_pid", "--no_python", "--no_local_rank", "sh",
                        "-c", "echo parent=$PPID; echo saved=$(cat /tmp/$PPID.deepspeed)"],
                       env=env_for(), cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    m = re.search(r"parent=(\d+)\s*\n.*saved=(\d+)", r.stdout)
    assert m and m.group(1) == m.group(2), r.stdout
    assert not os.path.exists(f"/tmp/{m.group(1)}.deepspeed")


def test_unreachable_host_is_named(tmp_path):
    """A host ssh cannot reach: one line names it, and the head does not wait for it."""
    hf = hostfile(tmp_path, ["podrun-nohost-a.invalid slots=1", "podrun-nohost-b.invalid slots=1"])
    p = head(["-H", hf, "--master_port", "29599", "--no_python", "true"],
             env_for(PDSH_RCMD_TYPE="ssh", PDSH_SSH_ARGS_APPEND="-o BatchMode=yes"), tmp_path)
    rc, out, err = finish(p, timeout=60)
    assert rc != 0
    assert re.search(r"podrun: host podrun-nohost-[ab]\.invalid \(node rank \d\) could not be "
                     r"reached", err), err


def test_fallback_without_pdsh(tmp_path):
    """pdsh missing from PATH: one line says so and each host's agent starts with sh -c
    (PDSH_RCMD_TYPE=exec), %n and %h done by podrun."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("sh", "cat"):
        (bindir / tool).symlink_to(f"/bin/{tool}")
    hf = hostfile(tmp_path, FOUR[:3])
    port = free_port("127.0.0.2")
    p = head(["-H", hf, "--master_port", str(port), "--python", TORCH_PY, DS_WORKER],
             env_for(PATH=bindir, PDSH_RCMD_TYPE="exec"), tmp_path)
    rc, out, err = finish(p)
    assert rc == 0, out + err
    assert "pdsh is not installed" in err
    assert sorted(results(out)) == [0, 1, 2, 3], out + err


def test_no_ssh_three_agents_one_hostfile(tmp_path):
    """--no_ssh: the same hostfile for three agents on 127.0.0.2-4 (as in three pods); each finds
    its own line by its address, node rank = line order, the first line hosts the store."""
    hf = hostfile(tmp_path, ["127.0.0.3 slots=2", "127.0.0.2 slots=1", "127.0.0.4 slots=2"])
    port = free_port("127.0.0.3")
    agents = []
    for a in ("127.0.0.2", "127.0.0.3", "127.0.0.4"):
        agents.append(head(["-H", hf, "--no_ssh", "--local_addr", a, "--master_port", str(port),
                            "--python", TORCH_PY, DS_WORKER], env_for(), tmp_path))
    outs = {}
    for a, p in zip(("127.0.0.2", "127.0.0.3", "127.0.0.4"), agents):
        rc, out, err = finish(p)
        assert rc == 0, out + err
        outs[a] = results(out)
    assert sorted(outs["127.0.0.3"]) == [0, 1]
    assert sorted(outs["127.0.0.2"]) == [2]
    assert sorted(outs["127.0.0.4"]) == [3, 4]
    assert outs["127.0.0.4"][4][1:7] == ("1", "5", "2", "2", "3", "0,1")
    assert outs["127.0.0.2"][2][4] == "1"


def test_no_ssh_node_rank_given(tmp_path):
    """DeepSpeed's documented `--no_ssh --node_rank N`: the hostfile names the hosts by names
    this machine does not have; each agent takes the Nth line as given, never looks for itself."""
    hf = hostfile(tmp_path, ["worker-0 slots=1", "worker-1 slots=2"])
    port = free_port("127.0.0.2")
    agents = [head(["-H", hf, "--no_ssh", "--node_rank", str(i), "--master_addr", "127.0.0.2",
                    "--local_addr", f"127.0.0.{2 + i}", "--master_port", str(port),
                    "--python", TORCH_PY, DS_WORKER], env_for(), tmp_path) for i in range(2)]
    outs = []
    for p in agents:
        rc, out, err = finish(p)
        assert rc == 0, out + err
        outs.append(results(out))
    assert sorted(outs[0]) == [0] and sorted(outs[1]) == [1, 2]
    assert outs[1][2][1:6] == ("1", "3", "2", "1", "2")


def test_include_one_other_host_runs_there(tmp_path):
    """`-i HOST` selecting one host that is not this machine: the job runs on that host, through
    pdsh, as DeepSpeed means it to (deepspeedai/DeepSpeed#713), not on the head."""
    hf = hostfile(tmp_path, FOUR[:2])
    port = free_port("127.0.0.3")
    p = head(["-H", hf, "-i", "127.0.0.3:1", "--launcher_args", "-R exec", "--master_port",
              str(port), "--python", TORCH_PY, DS_WORKER], env_for(), tmp_path)
    rc, out, err = finish(p)
    assert rc == 0, out + err
    assert sorted(results(out)) == [0], out + err
    assert re.search(r"^127\.0\.0\.3: .*ds rank=0 .* cvd=1 ", out, re.M), out
    assert "through pdsh -R exec" in err


@pytest.mark.parametrize("args,text", [
    (["--launcher", "slurm", "x.py"], "srun podrun deepspeed --no_ssh"),
    (["--launcher", "OpenMPI", "x.py"], "--launcher openmpi is not supported"),
    (["--autotuning", "tune", "x.py"], "does not run DeepSpeed's Autotuner"),
    (["-H", "/nonexistent/hostfile", "x.py"], "cannot read hostfile /nonexistent/hostfile"),
    (["-i", "a", "-e", "b", "x.py"], "include_str and exclude_str are mutually exclusive."),
    (["--force_multi", "--world_info=", "x.py"], "--world_info is empty"),
])
def test_usage_errors(tmp_path, args, text):
    r = subprocess.run([PODRUN, "deepspeed", *args], env=env_for(), cwd=tmp_path,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert text in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_seed_004_manifest_runs_without_ssh(tmp_path):
    """docker/deepspeed/indexed-job.yaml: seed 004's job as an Indexed Job whose pods all run
    `podrun deepspeed --no_ssh` over one ConfigMap hostfile. In a UTS namespace per pod with the
    pod's host name, each resolves to its own line (node rank = its index), the first pod hosting
    the store; the Job's podFailurePolicy reads podrun's exit-code table."""
    import yaml
    from conftest import ROOT
    docs = [d for d in yaml.safe_load_all((ROOT / "docker/deepspeed/indexed-job.yaml").read_text())
            if d]
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    job = next(d for d in docs if d["kind"] == "Job")
    svc = next(d for d in docs if d["kind"] == "Service")
    spec, name = job["spec"], job["metadata"]["name"]
    tmpl = spec["template"]["spec"]
    assert spec["completionMode"] == "Indexed" and tmpl["subdomain"] == svc["metadata"]["name"]
    assert tmpl["restartPolicy"] == "Never" and "initContainers" not in tmpl
    c = tmpl["containers"][0]
    assert os.path.basename(c["command"][0]) == "podrun" and c["args"][0] == "deepspeed"
    assert "--no_ssh" in c["args"] and not any("ssh" in (x.get("image") or "")
                                                for x in tmpl["containers"])
    mount = next(m["mountPath"] for m in c["volumeMounts"] if m["name"] == "hostfile")
    hf = tmp_path / "hostfile"
    hf.write_text(cm["data"]["hostfile"])
    args = [str(hf) if a == f"{mount}/hostfile" else a for a in c["args"][1:]]
    assert str(hf) in args
    env = env_for(**{e["name"]: e["value"] for e in c.get("env", [])})
    n = spec["completions"]
    assert n == spec["parallelism"] == len([line for line in cm["data"]["hostfile"].splitlines()
                                            if line and not line.startswith("#")])
    for i in range(n):
        cmd = f"hostname {name}-{i} && exec {PODRUN} deepspeed --print-config " + \
              " ".join(f"'{a}'" for a in args)
        r = subprocess.run(["unshare", "--uts", "sh", "-c", cmd], env=env, capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        cfg = {m.group(1): m.group(2) for m in
               re.finditer(r"^(\S+)\s+(.*?)\s+\(.*\)$", r.stdout, re.M)}
        assert cfg["node-rank"] == str(i) and cfg["nnodes"] == str(n), r.stdout
        assert cfg["master-addr"] == f"{name}-0.{svc['metadata']['name']}"
        assert cfg["master-port"] == str(svc["spec"]["ports"][0]["port"])
        assert cfg["ds-mode"] == "node" and cfg["ds-devices"] == "0"
        assert cfg["nproc-per-node"] == str(c["resources"]["limits"]["nvidia.com/gpu"])
        assert cfg["rdzv-id"] == "ds-bert" and cfg["max-restarts"] == "3"
    rules = spec["podFailurePolicy"]["rules"]
    fail = {v for r in rules if r["action"] == "FailJob" for v in r["onExitCodes"]["values"]}
    ignore = {v for r in rules if r["action"] == "Ignore" and "onExitCodes" in r
              for v in r["onExitCodes"]["values"]}
    assert fail == set(range(1, 128)) and ignore == {170, 171, 172}


def test_force_multi_without_hostfile_goes_through_pdsh(tmp_path):
    """--force_multi with no hostfile: as DeepSpeed, the multi-node runner to host localhost
    (pdsh), so .deepspeed_env reaches the workers; the job store is at 127.0.0.1."""
    (tmp_path / ".deepspeed_env").write_text("DS_EXTRA=from-file\n")
    port = free_port("127.0.0.1")
    p = head(["--force_multi", "--num_gpus", "2", "--launcher_args", "-R exec", "--master_port",
              str(port), "--python", TORCH_PY, DS_WORKER], env_for(), tmp_path)
    rc, out, err = finish(p)
    assert rc == 0, out + err
    res = results(out)
    assert sorted(res) == [0, 1], out + err
    assert all(g[9] == "from-file" for g in res.values()), out + err
    assert re.search(r"^localhost: .*ds rank=1 ", out, re.M), out
    assert "through pdsh -R exec" in err


def test_venv_script_is_sourced_with_dot_and_must_succeed(tmp_path):
    """--venv_script runs in each host's sh with '.' (sh has no 'source'): what it exports
    reaches the workers; a script that fails stops the job instead of running it without."""
    hf = hostfile(tmp_path, FOUR[:2])
    (tmp_path / "venv.sh").write_text("export DS_EXTRA=from-venv\n")
    port = free_port("127.0.0.2")
    p = head(["-H", hf, "--launcher_args", "-R exec", "--master_port", str(port),
              "--venv_script", str(tmp_path / "venv.sh"), "--python", TORCH_PY, DS_WORKER],
             env_for(), tmp_path)
    rc, out, err = finish(p)
    assert rc == 0, out + err
    res = results(out)
    assert sorted(res) == [0, 1, 2] and all(g[9] == "from-venv" for g in res.values()), out + err
    (tmp_path / "bad.sh").write_text("false\n")
    p = head(["-H", hf, "--launcher_args", "-R exec", "--master_port", str(port),
              "--venv_script", str(tmp_path / "bad.sh"), "--python", TORCH_PY, DS_WORKER],
             env_for(), tmp_path)
    rc, out, err = finish(p)
    assert rc != 0 and not results(out), out + err


def test_relative_venv_script_is_the_heads(tmp_path):
    """`podrun deepspeed -H hosts --venv_script v.sh ...` from the directory that holds v.sh:
    each host sources the head's v.sh (the directory every host works in), not a v.sh in PATH."""
    hostfile(tmp_path, FOUR[:2])
    (tmp_path / "v.sh").write_text("export DS_EXTRA=from-relative\n")
    port = free_port("127.0.0.2")
    p = head(["-H", "hostfile", "--launcher_args", "-R exec", "--master_port", str(port),
              "--venv_script", "v.sh", "--python", TORCH_PY, DS_WORKER], env_for(), tmp_path)
    rc, out, err = finish(p)
    assert rc == 0, out + err
    res = results(out)
    assert sorted(res) == [0, 1, 2], out + err
    assert all(g[9] == "from-relative" for g in res.values()), out + err


def test_enable_each_rank_log_is_deepspeeds_layout(tmp_path):
    """--enable_each_rank_log DIR: as DeepSpeed's launch.py, DIR (made if missing) gets one
    <YYYYmmddHHMMSS>_rank<RANK>.log per worker with its stdout and stderr; the console nothing."""
    d = tmp_path / "ranklogs"
    r = subprocess.run([PODRUN, "deepspeed", "--num_gpus", "2", "--enable_each_rank_log", str(d),
                        "--no_local_rank", "--no_python", "sh", "-c",
                        'echo "out $RANK"; echo "err $RANK" >&2'],
                       env=env_for(), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "[rank" not in r.stdout + r.stderr
    names = sorted(os.listdir(d))
    assert len(names) == 2 and all(re.fullmatch(r"\d{14}_rank[01]\.log", n) for n in names), names
    for rank, name in enumerate(names):
        assert name.endswith(f"_rank{rank}.log")
        assert sorted((d / name).read_text().splitlines()) == [f"err {rank}", f"out {rank}"]
