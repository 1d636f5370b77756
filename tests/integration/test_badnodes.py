"""Bad nodes are remembered (doc/failures.md#bad-nodes): a node that caused --max-node-failures
of the job's stops is left out of later rounds where the job can do without it, exits
--exit-code-preflight, and podrun status, /metrics and the failure report name it; where the job
cannot do without it, it stays. On both rendezvous backends."""
import os
import re
import subprocess
import urllib.request

import pytest

from cluster import Agent, killed_on_failure, wait_all, wait_for
from conftest import PODRUN, free_port
from etcd_util import Etcd

LEFT_OUT = 175   # --exit-code-preflight
# n2's worker fails in every attempt; the others run until stopped while the job has 3 nodes,
# and with 2 they hold until the test releases them
WORKER = ('echo "up node=$NODE world=$GROUP_WORLD_SIZE restart=$TORCHELASTIC_RESTART_COUNT"; '
          'if [ -n "$BAD" ]; then echo "n2 failing on purpose" >&2; exit 3; fi; '
          'if [ "$GROUP_WORLD_SIZE" = 3 ]; then exec sleep 300; fi; '
          'while [ ! -e "$RELEASE" ]; do sleep 0.05; done; echo finished')


def start(tmp_path, n, nnodes, rdzv, extra=(), hports=()):
    agents = []
    for i in range(n):
        env = {"NODE": f"n{i}", "RELEASE": str(tmp_path / "release"),
               "BAD": "1" if i == n - 1 else "", "PODRUN_MASTER_PORT": ""}
        args = ["--nnodes", nnodes, "--nproc-per-node", "1", *rdzv, "--local-addr",
                f"127.0.0.{2 + i}", "--node-name", f"n{i}", "--rdzv-conf", "last_call_timeout=1",
                *extra, *(["--health-port", str(hports[i])] if hports else []),
                "--no-python", "sh", "-c", WORKER]
        agents.append(Agent(args, env=env, name=f"n{i}"))
    return agents


def rdzv_of(backend, port, etcd):
    if backend == "etcd":
        return ["--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints(),
                "--rdzv-id", f"bad-{os.getpid()}-{port}"]
    return ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.2:{port}", "--rdzv-id", "bad"]


def status(rdzv, port, backend, *flags):
    where = rdzv if backend == "etcd" else [f"127.0.0.2:{port}"]
    r = subprocess.run([PODRUN, "status", *flags, *where], capture_output=True, text=True,
                       timeout=30)
    return r.stdout


@pytest.mark.parametrize("backend", ["c10d", "etcd"])
def test_a_node_that_keeps_failing_is_left_out_and_named(tmp_path, port, backend):
    etcd = Etcd(1) if backend == "etcd" else None
    try:
        rdzv = rdzv_of(backend, port, etcd)
        hports = [free_port() for _ in range(3)]
        agents = start(tmp_path, 3, "2:3", rdzv, hports=hports,
                       extra=["--max-restarts", "5", "--max-node-failures", "2"])
        with killed_on_failure(agents):
            # two failures of n2: it is left out, and the job runs on with n0 and n1
            assert agents[2].wait(90) == LEFT_OUT, agents[2].err
            for a in agents[:2]:
                wait_for(lambda a=a: "world=2 restart=2" in a.out_now(), 60,
                         f"{a.name}'s worker of the round without n2")
            assert ("this node is left out of the job as a bad node: n2 (2 failures; left out); "
                    "the job goes on with the other 2 nodes; exit code 175") in agents[2].err
            assert agents[2].out_now().count("up node=n2") == 2
            text = wait_for(lambda: (t := status(rdzv, port, backend)) and "by node:" in t and t,
                            30, "the bad node in podrun status")
            assert re.search(r"^failures by node: n2 \(2 failures; left out\): a bad node$", text,
                             re.M), text
            js = status(rdzv, port, backend, "--json")
            assert ('"bad_nodes":[{"name":"n2","caused":2,"failed_checks":0,"asked":0,'
                    '"left_out":1,"bad":1}]') in js, js
            for hp in hports[:2]:
                m = urllib.request.urlopen(f"http://127.0.0.1:{hp}/metrics", timeout=10).read()
                m = m.decode()
                assert 'podrun_bad_node_failures{node="n2"} 2' in m, m
                assert 'podrun_bad_node_left_out{node="n2"} 1' in m, m
            (tmp_path / "release").write_text("")
            codes = wait_all(agents[:2], timeout=60)
        assert codes == [0, 0], [a.err for a in agents]
        log = agents[0].err if backend == "c10d" else "".join(a.err for a in agents)
        assert ("n2 (2 failures; left out) is a bad node (--max-node-failures reached): it is "
                "left out of the rounds to come") in log, log
    finally:
        if etcd:
            etcd.stop()


def test_a_job_that_needs_the_node_keeps_it_and_its_report_names_it(tmp_path, port):
    rdzv = rdzv_of("c10d", port, None)
    agents = start(tmp_path, 2, "2", rdzv, extra=["--max-restarts", "2", "--max-node-failures",
                                                  "2"])
    with killed_on_failure(agents):
        codes = wait_all(agents, timeout=90)
    assert codes == [170, 3], [a.err for a in agents]
    assert agents[1].out.count("up node=n1") == 3   # it stayed for every restart
    assert ("n1 (2 failures) is a bad node, but the job cannot do without it (1 other node, at "
            "least 2 needed (--nnodes)): it stays") in agents[0].err, agents[0].err
    for a in agents:
        assert "podrun: bad node: n1 (3 failures)" in a.err, a.err


def test_max_node_failures_is_checked(podrun):
    r = subprocess.run([podrun, "--max-node-failures", "-1", "true"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2
    assert "--max-node-failures '-1': expected a whole number from 0 to 1000000" in r.stderr
