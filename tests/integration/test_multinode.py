"""Multi-node rendezvous: several podrun agents on one machine, each with its own loopback
address (or its own network namespace), agree on ranks and run one job. The join timeout, and
what the etcd backend must do alike, are in test_rdzv_contract.py."""
import os
import re
import shutil

from cluster import (WORKERS, Agent, Netns, agent_args, killed_on_failure, parse_kv,
                     result_lines, start_agents, started_dir, wait_all, wait_started)
from conftest import free_port

ENV_SH = os.path.join(WORKERS, "env.sh")
FAIL_SH = os.path.join(WORKERS, "fail.sh")
NOPY = ["--no-python"]


def env_results(agents):
    return [parse_kv(l) for l in result_lines(agents, "env ")]


def check_ranks(results, nproc_per_node):
    """Global ranks are 0..W-1 once each, contiguous per node in node-rank order."""
    world = sum(nproc_per_node)
    assert sorted(int(r["rank"]) for r in results) == list(range(world))
    by_node = {}
    for r in results:
        assert int(r["world"]) == world
        assert int(r["group_world"]) == len(nproc_per_node)
        by_node.setdefault(int(r["group_rank"]), []).append(r)
    assert sorted(by_node) == list(range(len(nproc_per_node)))
    base = 0
    for node in sorted(by_node):
        rs = by_node[node]
        n = len(rs)
        assert all(int(r["local_world"]) == n for r in rs)
        assert sorted(int(r["rank"]) for r in rs) == list(range(base, base + n))
        assert sorted(int(r["local_rank"]) for r in rs) == list(range(n))
        base += n
    return by_node


def test_four_nodes_gloo_allreduce(port):
    agents = start_agents(4, 2, port)
    codes = wait_all(agents, timeout=120)
    assert codes == [0] * 4, [a.err for a in agents]
    res = [parse_kv(l) for l in result_lines(agents)]
    assert sorted(int(r["rank"]) for r in res) == list(range(8))
    assert all(int(r["sum"]) == sum(range(8)) and int(r["world"]) == 8 for r in res)
    # workers use the job store: one store per job
    env_agents = start_agents(4, 2, free_port("127.0.0.2"), extra=NOPY,
                              script=ENV_SH)
    assert wait_all(env_agents) == [0] * 4
    res = env_results(env_agents)
    check_ranks(res, [2, 2, 2, 2])
    assert all(r["agent_store"] == "True" for r in res)
    assert len({r["master"] for r in res}) == 1


def test_mixed_worker_counts(port):
    nproc = [1, 3, 2, 2]
    agents = start_agents(4, nproc, port, extra=NOPY, script=ENV_SH)
    assert wait_all(agents) == [0] * 4, [a.err for a in agents]
    by_node = check_ranks(env_results(agents), nproc)
    assert sorted(len(v) for v in by_node.values()) == sorted(nproc)


def test_store_host_started_last(port):
    def others_waiting(agents):   # the store host comes once the others wait for it
        for a in agents:
            a.wait_err("waiting for the job store at")

    agents = start_agents(4, 1, port, extra=NOPY, script=ENV_SH, order=[1, 2, 3, 0],
                          before={0: others_waiting})
    assert wait_all(agents) == [0] * 4, [a.err for a in agents]
    check_ranks(env_results(agents), [1] * 4)


def test_agent_joins_five_seconds_late(port):
    # the third comes once the first two have joined and said so
    agents = start_agents(3, 1, port, extra=NOPY, script=ENV_SH,
                          before={2: lambda agents: agents[0].wait_err("2/3")})
    assert wait_all(agents) == [0] * 3, [a.err for a in agents]
    check_ranks(env_results(agents), [1] * 3)
    # while waiting, the others said who had joined and how many were missing
    assert "2/3" in agents[0].err or "2/3" in agents[1].err


def test_node_ranks_stable_and_given(port):
    """--node-rank decides the order; without it, the same nodes get the same ranks again."""
    n = 3
    endpoint = f"127.0.0.2:{port}"
    agents = [Agent(agent_args(n, 1, endpoint, f"127.0.0.{2 + i}", extra=NOPY + [
        "--node-rank", str(n - 1 - i)], script=ENV_SH)) for i in range(n)]
    assert wait_all(agents) == [0] * n
    for i, a in enumerate(agents):
        (r,) = env_results([a])
        assert int(r["group_rank"]) == n - 1 - i
    runs = []
    for p in (free_port("127.0.0.2"), free_port("127.0.0.2")):
        agents = start_agents(n, 1, p, extra=NOPY, script=ENV_SH, order=[2, 0, 1])
        assert wait_all(agents) == [0] * n
        runs.append([env_results([a])[0]["group_rank"] for a in agents])
    assert runs[0] == runs[1]


def test_endpoint_name_resolves_late(port, tmp_path):
    """Headless-service DNS lag: the endpoint name is unknown for the first seconds."""
    hosts = tmp_path / "hosts"
    shutil.copy("/etc/hosts", hosts)
    name = "podrun-late-store.test"
    endpoint = f"{name}:{port}"

    def in_ns():
        script = f'mount --bind {hosts} /etc/hosts && exec "$@"'
        return ["unshare", "--mount", "sh", "-c", script, "sh"]

    agents = []
    for i in range(3):
        extra = NOPY + (["--rdzv-conf", "is_host=1"] if i == 0 else [])
        agents.append(Agent(agent_args(3, 1, endpoint, f"127.0.0.{2 + i}", extra=extra,
                                       script=ENV_SH), prefix=in_ns(), name=f"node{i}"))
    # every agent tried the name, which does not resolve yet, and goes on waiting
    for a in agents[1:]:
        a.wait_err(name)
        assert a.proc.poll() is None, "an agent gave up while the name did not resolve"
    with open(hosts, "a") as f:
        f.write(f"127.0.0.2 {name}\n")
    assert wait_all(agents) == [0] * 3, [a.err for a in agents]
    check_ranks(env_results(agents), [1] * 3)


def test_min_max_with_fewer_than_max(port):
    endpoint = f"127.0.0.2:{port}"
    agents = [Agent(agent_args("2:4", 2, endpoint, f"127.0.0.{2 + i}",
                               extra=NOPY + ["--rdzv-conf", "last_call_timeout=1"],
                               script=ENV_SH)) for i in range(3)]
    assert wait_all(agents) == [0] * 3, [a.err for a in agents]
    check_ranks(env_results(agents), [2, 2, 2])


def test_four_nodes_in_network_namespaces(port):
    net = Netns(f"pr{os.getpid()}n", 4)
    try:
        endpoint = f"{Netns.addr(0)}:{port}"
        agents = [Agent(agent_args(4, 2, endpoint, Netns.addr(i)), prefix=net.prefix_cmd(i),
                        name=f"node{i}") for i in range(4)]
        codes = wait_all(agents, timeout=120)
        assert codes == [0] * 4, [a.err for a in agents]
        res = [parse_kv(l) for l in result_lines(agents)]
        assert sorted(int(r["rank"]) for r in res) == list(range(8))
        assert all(int(r["sum"]) == 28 for r in res)
    finally:
        net.close()


def test_agent_of_another_run_id_is_named_on_both_sides(port, tmp_path):
    """An agent whose --rdzv-id is not the job's, pointed at the job's store: it stops with a
    usage error (2, not a code an operator retries) naming the store, both run ids and the fix,
    on its last line and in its termination log too, and the store's host names it, its address
    and its run id in one line; the job runs on."""
    endpoint = f"127.0.0.2:{port}"
    term = tmp_path / "term"
    term.write_text("")
    host = Agent(agent_args(2, 1, endpoint, "127.0.0.2", "job-a", NOPY, ENV_SH), name="host")
    stranger = Agent(agent_args(2, 1, endpoint, "127.0.0.4", "job-b",
                                (*NOPY, "--termination-log", str(term)), ENV_SH),
                     name="stranger")
    try:
        assert stranger.wait(timeout=60) == 2, stranger.err
    finally:
        stranger.kill()
    why = (f"the job store at 127.0.0.2:{port} belongs to run 'job-a', this agent's run id is "
           "'job-b'; give every node the same --rdzv-id")
    assert why in stranger.err, stranger.err
    last = stranger.err.rstrip("\n").splitlines()[-1]
    assert why in last and last.endswith("; exit code 2"), last
    assert why in term.read_text(), term.read_text()
    assert "lost the connection" not in stranger.err, stranger.err
    peer = Agent(agent_args(2, 1, endpoint, "127.0.0.3", "job-a", NOPY, ENV_SH), name="peer")
    assert wait_all([host, peer]) == [0, 0], [host.err, peer.err]
    named = [l for l in host.err.splitlines() if "'job-b'" in l]
    assert len(named) == 1, host.err
    assert re.search(r"from 127\.0\.0\.\d+:\d+: .*a node of run 'job-b' reached this job store, "
                     r"which belongs to run 'job-a'; give every node the same --rdzv-id",
                     named[0]), named[0]


def test_spare_of_elastic_job_exits_0_and_fixed_size_outsider_fails(port, tmp_path):
    """A node that an elastic job never needed ends with the job, successfully (torch 2.x's
    graceful exit for a node left out); in a job of a fixed size such a node is a mix-up and
    fails, so that no agent says success for workers it never ran."""
    for nnodes, code in (("1:2", 0), (2, 1)):
        up, done = started_dir(), tmp_path / f"done{code}"
        env = {"STARTED_DIR": up, "DONE_FILE": str(done)}
        endpoint = f"127.0.0.2:{port}"
        extra = NOPY + ["--rdzv-conf", "last_call_timeout=0.5"]
        agents = [Agent(agent_args(nnodes, 1, endpoint, f"127.0.0.{2 + i}", extra=extra,
                                   script=FAIL_SH), env=env, name=f"node{i}") for i in range(2)]
        with killed_on_failure(agents):
            wait_started(up, 2, agents=agents)
            spare = Agent(agent_args(nnodes, 1, endpoint, "127.0.0.4", extra=extra,
                                     script=FAIL_SH), env=env, name="spare")
            agents.append(spare)
            agents[0].wait_err("waits for the next round")
            done.touch()
            codes = wait_all(agents)
        assert codes == [0, 0, code], [a.err for a in agents]
        assert "nothing ran here" in spare.err if code == 0 else "ran no worker" in spare.err
        assert "start rank=" not in spare.out
        port = free_port("127.0.0.2")
