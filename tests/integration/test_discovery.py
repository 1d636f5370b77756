"""Discovery: podrun started in a pod with nothing but what its scheduler put there. Every fixture
under tests/fixtures/operators is a pod as an operator makes it (reference/k8s.md); `podrun
--print-config` must show the values and their sources, or stop with one line naming the
inputs that contradict each other. Then real jobs: agents that find themselves in one hostfile
(no ssh, no --nnodes, no endpoint), and a Volcano job started from its variables alone."""
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from cluster import WORKERS, Agent, Netns, parse_kv, result_lines, wait_all
from conftest import PODRUN, ROOT, TORCH_PY, free_port

FIXTURES = ROOT / "tests" / "fixtures" / "operators"
CASES = sorted(FIXTURES.glob("*.env"))
ENV_SH = os.path.join(WORKERS, "env.sh")
ALLREDUCE = os.path.join(WORKERS, "allreduce.py")


def fixture(path):
    """(env, directives) of one pod; {here} is the fixtures directory."""
    env, d = {}, {"args": [], "expect": [], "error": [], "hostname": None, "hosts": []}
    here = str(FIXTURES)
    for line in path.read_text().splitlines():
        line = line.replace("{here}", here)
        m = re.match(r"#\s*(args|expect|error|hostname|hosts):\s*(.*)$", line)
        if m:
            key, val = m.groups()
            if key == "args":
                d["args"] += val.split()
            elif key == "hostname":
                d["hostname"] = val.strip()
            elif key == "expect":
                d["expect"].append(tuple(p.strip() for p in val.split("|")))
            else:
                d[key].append(val.strip())
        elif line and not line.startswith("#"):
            k, v = line.split("=", 1)
            env[k] = v
    return env, d


def in_pod(cmd, hostname, hosts, tmp_path):
    """cmd in a UTS and mount namespace of its own: the pod's host name, and its /etc/hosts with
    the lines kubelet writes (the FQDN first), as the resolver gives them back."""
    if not hostname:
        return cmd
    etc_hosts = tmp_path / "hosts"
    shutil.copy("/etc/hosts", etc_hosts)
    with open(etc_hosts, "a") as f:
        for h in hosts:
            f.write(h + "\n")
    script = f'hostname "$0" && mount --bind {etc_hosts} /etc/hosts && exec "$@"'
    return ["unshare", "--uts", "--mount", "sh", "-c", script, hostname] + cmd


def print_config(out):
    """{name: (value, source)}: the source is the line's last parenthesised group (a value may
    hold parentheses too: "PaddleJob (paddle-operator)")."""
    cfg = {}
    for line in out.splitlines():
        m = re.match(r"^(rdzv-conf \S+|\S+)\s+(.*)\)$", line)
        if not m:
            continue
        rest, depth = m.group(2) + ")", 0
        for i in range(len(rest) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(rest[i], 0)
            if depth == 0:
                break
        cfg[m.group(1)] = (rest[:i].rstrip(), rest[i + 1:-1])
    return cfg


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_pod_environment(path, tmp_path):
    env, d = fixture(path)
    cmd = in_pod([PODRUN, "--print-config", *d["args"], "train.py"], d["hostname"], d["hosts"],
                 tmp_path)
    r = subprocess.run(cmd, env={"PATH": os.environ["PATH"], **env}, capture_output=True,
                       text=True, timeout=30)
    if d["error"]:
        assert r.returncode == 2, (r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("podrun: "), r.stderr
        for needle in d["error"]:
            assert needle in lines[0], (needle, lines[0])
        assert not r.stdout
        return
    assert r.returncode == 0, r.stderr
    assert d["expect"], f"{path.name} expects nothing"
    cfg = print_config(r.stdout)
    for name, value, source in d["expect"]:
        assert cfg.get(name) == (value, source), (name, cfg.get(name), r.stdout)


def test_help_names_discovery(podrun):
    r = subprocess.run([podrun, "--help"], capture_output=True, text=True)
    assert r.returncode == 0
    assert re.search(r"--hostfile FILE", r.stdout)
    assert re.search(r"--discovery auto\|env\|k8s\|hostfile\|none", r.stdout)
    assert "default < scheduler" in r.stdout, r.stdout


def hostfile_agent(hostfile, extra, prefix=(), name="", script=ALLREDUCE):
    args = ["--hostfile", str(hostfile), "--python", TORCH_PY, *extra, script]
    return Agent(args, prefix=prefix, name=name)


def test_hostfile_job_without_ssh(tmp_path):
    """Three agents on 127.0.0.2-4 read one hostfile and nothing else: each finds its own line
    (by its --local-addr), the line order is the node order (not the address order), the first
    line's host runs the store, the slots are the workers, and gloo all_reduces across them."""
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("127.0.0.3 slots=2\n127.0.0.2 slots=1\n127.0.0.4 slots=2\n")
    addrs = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    agents = [hostfile_agent(hostfile, ["--local-addr", a], name=a) for a in addrs]
    assert wait_all(agents, timeout=120) == [0, 0, 0], [a.err for a in agents]
    world = 5
    by_agent = {a.name: [parse_kv(l) for l in result_lines([a])] for a in agents}
    assert {n: sorted(int(r["group_rank"]) for r in rs) for n, rs in by_agent.items()} == {
        "127.0.0.3": [0, 0], "127.0.0.2": [1], "127.0.0.4": [2, 2]}
    ranks = sorted(int(r["rank"]) for rs in by_agent.values() for r in rs)
    assert ranks == list(range(world))
    assert all(int(r["sum"]) == sum(range(world)) and int(r["world"]) == world
               for rs in by_agent.values() for r in rs)


def test_hostfile_job_finds_own_address(tmp_path):
    """Hosts in their own network namespaces, no --local-addr: each agent finds its line by the
    addresses of its interfaces, advertises that address and binds the store on it."""
    net = Netns(f"pd{os.getpid()}h", 3)
    try:
        hostfile = tmp_path / "hostfile"
        order = [1, 0, 2]
        hostfile.write_text("".join(f"{Netns.addr(i)}\n" for i in order))
        agents = [hostfile_agent(hostfile, ["--no-python"], prefix=net.prefix_cmd(i),
                                 name=f"h{i}", script=ENV_SH) for i in range(3)]
        assert wait_all(agents, timeout=120) == [0, 0, 0], [a.err for a in agents]
        for i, a in enumerate(agents):
            (r,) = [parse_kv(l) for l in result_lines([a], "env ")]
            assert int(r["group_rank"]) == order.index(i)
            assert int(r["group_world"]) == 3
            assert r["master"].split(":")[0] == Netns.addr(order[0])
    finally:
        net.close()


@pytest.mark.parametrize("third_task", [False, True])
def test_volcano_job_from_its_variables(monkeypatch, third_task):
    """The issue's pod, three times: a Volcano job with the pytorch plugin (master + 2 workers)
    on 127.0.0.2-4 starts from the plugins' variables alone; node ranks are the plugin's RANK.
    With a third task (TensorBoard) the plugin's WORLD_SIZE counts its pod too: the job is still
    the master and worker tasks' three nodes."""
    monkeypatch.delenv("PODRUN_MASTER_PORT", raising=False)
    port = free_port("127.0.0.2")
    hosts = "job-worker-0.job,job-worker-1.job"
    pods = [{"VC_TASK_INDEX": "0", "RANK": "0"},            # job-master-0
            {"VC_TASK_INDEX": "1", "RANK": "2"},            # job-worker-1
            {"VC_TASK_INDEX": "0", "RANK": "1"}]            # job-worker-0
    agents = []
    for i, pod in enumerate(pods):
        env = {"MASTER_ADDR": "127.0.0.2", "MASTER_PORT": str(port), "WORLD_SIZE": "3",
               "VK_TASK_INDEX": pod["VC_TASK_INDEX"], "VC_MASTER_HOSTS": "job-master-0.job",
               "VC_MASTER_NUM": "1", "VC_WORKER_HOSTS": hosts, "VC_WORKER_NUM": "2", **pod}
        if third_task:
            env.update({"WORLD_SIZE": "4", "VC_TENSORBOARD_HOSTS": "job-tensorboard-0.job",
                        "VC_TENSORBOARD_NUM": "1"})
        agents.append(Agent(["--local-addr", f"127.0.0.{2 + i}", "--no-python", ENV_SH],
                            env=env, name=pod["RANK"]))
    assert wait_all(agents, timeout=120) == [0, 0, 0], [a.err for a in agents]
    for a in agents:
        (r,) = [parse_kv(l) for l in result_lines([a], "env ")]
        assert r["group_rank"] == a.name and r["group_world"] == "3"
        assert r["master"] == f"127.0.0.2:{port}"
