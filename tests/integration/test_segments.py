"""NVLink domains: agents on 127.0.0.x whose (fake) NVML reports a GPU fabric cluster and clique
publish that domain when they join; the nodes of one domain get contiguous node ranks, and
--segment-size N admits only whole segments of N nodes of one domain."""
import os

from cluster import (WORKERS, Agent, agent_args, killed_on_failure, parse_kv, result_lines, run,
                     started_dir, wait_all, wait_for, wait_started)
from conftest import BUILD, free_port
from etcd_util import Etcd, etcd_agent

FAKES = str(BUILD / "tests" / "fakes")
FAIL_SH = os.path.join(WORKERS, "fail.sh")
ENV_SH = os.path.join(WORKERS, "env.sh")
DOMAIN_A = "aaaaaaaa000000000000000000000001"
DOMAIN_B = "bbbbbbbb000000000000000000000002"
A_TEXT = "aaaaaaaa-0000-0000-0000-000000000001/1"
B_TEXT = "bbbbbbbb-0000-0000-0000-000000000002/1"
ZERO = "0" * 32


def node_env(tmp_path, i, cluster, extra=None, fabric="", clique=1):
    """Node i's environment: its own fake NVML with one GPU in `cluster` (None: no fabric)."""
    conf = tmp_path / f"nvml{i}.conf"
    lines = [f"gpu uuid=GPU-0000000{i}-0000-0000-0000-000000000000 pci=0000:0{i + 1}:00.0 "
             f"name=Fake_GPU minor={i} numa=0"]
    if cluster:
        lines.append(f"fabric cluster={cluster} clique={clique} {fabric}")
    conf.write_text("\n".join(lines) + "\n")
    env = {"PODRUN_FAKE_NVML": str(conf), "LD_LIBRARY_PATH": FAKES,
           "PODRUN_NODE_NAME": f"node{i}",
           "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}
    env.update(extra or {})
    return env


def start(tmp_path, port, i, cluster, nnodes, extra, script, env=None):
    args = agent_args(nnodes, 1, f"127.0.0.2:{port}", f"127.0.0.{2 + i}", extra=extra,
                      script=script)
    return Agent(args, env=node_env(tmp_path, i, cluster, env), name=f"node{i}")


def group_rank(agent, tag):
    (line,) = result_lines([agent], tag)
    return int(parse_kv(line)["group_rank" if tag == "env " else "rank"])


def test_env_shows_the_nvlink_domain(podrun, tmp_path):
    """The domain is read from the versioned call, or the older one where the driver lacks it;
    a GPU whose fabric registration has not completed has none."""
    for i, (fabric, want) in enumerate((("", A_TEXT), ("v=0", A_TEXT), ("state=2", None))):
        r = run(podrun, "env", env=node_env(tmp_path, i, DOMAIN_A, fabric=fabric))
        assert r.returncode == 0, r.stderr
        if want:
            assert f"NVLink domain {want} (GPU fabric cluster/clique)" in r.stdout
        else:
            assert "NVLink domain" not in r.stdout


def test_all_zero_cluster_is_no_domain(podrun, port, tmp_path):
    """A GPU whose fabric reports an all-zero cluster UUID (H100 systems without multi-node
    NVLink) is in no NVLink domain: `podrun env` shows none, and such nodes rank by name with
    the nodes that report no fabric, whatever clique ids they report."""
    r = run(podrun, "env", env=node_env(tmp_path, 9, ZERO, clique=3))
    assert r.returncode == 0, r.stderr
    assert "NVLink domain" not in r.stdout, r.stdout
    # node0 zero/2, node1 no fabric, node2 zero/1: as domains, node1 would rank first
    fabrics = [(ZERO, 2), (None, 1), (ZERO, 1)]
    agents = [Agent(agent_args(3, 1, f"127.0.0.2:{port}", f"127.0.0.{2 + i}",
                               extra=["--no-python"], script=ENV_SH),
                    env=node_env(tmp_path, i, c, clique=q), name=f"node{i}")
              for i, (c, q) in enumerate(fabrics)]
    with killed_on_failure(agents):
        codes = wait_all(agents)
    assert codes == [0] * 3, [a.err for a in agents]
    assert [group_rank(a, "env ") for a in agents] == [0, 1, 2]


def test_domains_get_contiguous_node_ranks(port, tmp_path):
    """Node names interleave the domains (node0 B, node1 A, node2 B, node3 A): ranks follow the
    domain first (A's nodes 0-1, B's 2-3), then the name inside a domain."""
    domains = [DOMAIN_B, DOMAIN_A, DOMAIN_B, DOMAIN_A]
    agents = [start(tmp_path, port, i, d, 4, ["--no-python"], ENV_SH)
              for i, d in enumerate(domains)]
    with killed_on_failure(agents):
        codes = wait_all(agents)
    assert codes == [0] * 4, [a.err for a in agents]
    assert [group_rank(a, "env ") for a in agents] == [2, 0, 3, 1]


def test_without_fabric_ranks_as_before(port, tmp_path):
    """GPUs that report no fabric: one domain, ranks by name as always."""
    agents = [start(tmp_path, port, i, None, 3, ["--no-python"], ENV_SH) for i in range(3)]
    with killed_on_failure(agents):
        codes = wait_all(agents)
    assert codes == [0] * 3, [a.err for a in agents]
    assert [group_rank(a, "env ") for a in agents] == [0, 1, 2]


def test_segment_size_admits_whole_segments(port, tmp_path):
    """3 nodes of domain A, 2 of B, --nnodes 4 --segment-size 2: two of A and both of B run on
    contiguous ranks, the third of A waits as a spare (and ends with the job, successfully). The
    spare has joined before the last B node does, so the round picks among all five."""
    up, done = started_dir(), tmp_path / "done"
    run_env = {"STARTED_DIR": up, "DONE_FILE": str(done)}
    extra = ["--no-python", "--segment-size", "2"]
    domains = {0: DOMAIN_B, 1: DOMAIN_A, 2: DOMAIN_B, 3: DOMAIN_A, 4: DOMAIN_A}
    agents = {}
    for i in (0, 1, 3, 4):
        agents[i] = start(tmp_path, port, i, domains[i], 4, extra, FAIL_SH, run_env)
    host = agents[0]
    with killed_on_failure(list(agents.values())):
        # four joined, two of them in whole segments: the round is still open
        host.wait_err("round 0: 4 nodes joined")
        assert "2 of them in whole segments of 2" in host.err_now()
        agents[2] = start(tmp_path, port, 2, domains[2], 4, extra, FAIL_SH, run_env)
        ordered = [agents[i] for i in range(5)]
        wait_started(up, 4, agents=ordered)
        host.wait_err("node4 waits as a spare")
        done.touch()
        codes = wait_all(ordered)
    assert codes == [0] * 5, [a.err for a in ordered]
    ranks = {i: int(parse_kv(result_lines([agents[i]], "start ")[0])["rank"])
             for i in range(4)}
    assert ranks == {1: 0, 3: 1, 0: 2, 2: 3}
    assert "start rank=" not in agents[4].out
    assert "nothing ran here" in agents[4].err


def test_domain_smaller_than_segment_is_named(port, tmp_path):
    """--nnodes 2 --segment-size 2 with one node of B and two of A: B is left out by name."""
    extra = ["--no-python", "--segment-size", "2"]
    domains = [DOMAIN_B, DOMAIN_A, DOMAIN_A]
    agents = [start(tmp_path, port, 0, domains[0], 2, extra, ENV_SH)]
    with killed_on_failure(agents):
        agents[0].wait_err("1/2 nodes joined")
        agents += [start(tmp_path, port, i, domains[i], 2, extra, ENV_SH) for i in (1, 2)]
        codes = wait_all(agents)
    assert codes == [0] * 3, [a.err for a in agents]
    assert f"NVLink domain {B_TEXT} has 1 node, fewer than --segment-size 2: left out" \
        in agents[0].err
    assert [group_rank(a, "env ") for a in agents[1:]] == [0, 1]
    assert "nothing ran here" in agents[0].err


def test_segment_size_must_divide_nnodes(podrun):
    r = run(podrun, "--nnodes", "4:6", "--segment-size", "4", "--no-python", "true")
    assert r.returncode == 2
    assert "--segment-size 4 must divide both ends of --nnodes 4:6" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_etcd_domains_and_segments(tmp_path):
    """The etcd backend reads the domain from the same join record: 3 nodes of A, 2 of B,
    --nnodes 4 --segment-size 2, all five joined before the round closes (fixed size: it closes
    only once 4 nodes form whole segments, and B's second node comes last)."""
    e = Etcd(1)
    try:
        rid = f"seg-{os.getpid()}-{free_port()}"
        domains = {0: DOMAIN_B, 1: DOMAIN_A, 2: DOMAIN_B, 3: DOMAIN_A, 4: DOMAIN_A}
        extra = ["--no-python", "--segment-size", "2"]

        def agent(i):
            env = node_env(tmp_path, i, domains[i])
            return etcd_agent(i, 4, e.endpoints(), rid, ENV_SH, extra=extra, env=env)
        agents = {i: agent(i) for i in (0, 1, 3, 4)}
        with killed_on_failure(list(agents.values())):
            # the round is open with four joined and only one whole segment among them
            wait_for(lambda: any("4 nodes joined" in a.err_now() and
                                 "2 of them in whole segments of 2" in a.err_now()
                                 for a in agents.values()), 60, "four nodes joined")
            agents[2] = agent(2)
            ordered = [agents[i] for i in range(5)]
            codes = wait_all(ordered, timeout=120)
        assert codes == [0] * 5, [a.err for a in ordered]
        assert {i: group_rank(agents[i], "env ") for i in range(4)} == {1: 0, 3: 1, 0: 2, 2: 3}
        assert "nothing ran here" in agents[4].err
    finally:
        e.stop()
