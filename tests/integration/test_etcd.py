"""The etcd rendezvous backend against real etcd (Debian's etcd-server): a gloo job, an etcd
member lost mid-job, the agent that is node rank 0 and coordinator lost, etcd lost as a whole,
TLS with client certificates, answers that are not etcd's, and the job's keys in etcd after the
job. Every test starts its own etcd on loopback ports and stops exactly its own processes. What
both backends must do alike (joins, ranks, a failure pushed, restarts, a node leaving or lost, the
coordinator lost) is in test_rdzv_contract.py."""
import http.server
import json
import os
import pathlib
import re
import signal
import socketserver
import subprocess
import sys
import threading
import uuid
import time

import pytest

from cluster import (WORKERS, Agent, killed_on_failure, no_leftovers, parse_kv, result_lines,
                     started_dir, wait_all, wait_for, wait_started)
from conftest import PODRUN, free_port
from etcd_util import Etcd, etcd_agent

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fakes"))
import k8s_api  # noqa: E402
import tlsca  # noqa: E402

ALLREDUCE = os.path.join(WORKERS, "allreduce.py")
ENV_SH = os.path.join(WORKERS, "env.sh")
FAIL_SH = os.path.join(WORKERS, "fail.sh")
NOPY = ["--no-python", "--term-timeout", "2"]
PEER_LOST, STORE_LOST = 171, 172


@pytest.fixture
def etcd():
    e = Etcd(1)
    yield e
    e.stop()


@pytest.fixture
def etcd3():
    e = Etcd(3)
    yield e
    e.stop()


def run_id(tag):
    return f"{tag}-{os.getpid()}-{free_port()}"


def sleeper_job(n, endpoints, rid, extra=(), env=None, nnodes=None):
    """n agents whose workers sleep (fail.sh), marked so no_leftovers can find them; each
    agent's .up is where the workers say they run."""
    marker = f"300.{os.getpid()}{free_port()}"
    up = started_dir()
    agents = [etcd_agent(i, nnodes or n, endpoints, rid, FAIL_SH, extra=NOPY + list(extra),
                         env={"SLEEP": marker, "STARTED_DIR": up, **(env or {})})
              for i in range(n)]
    for a in agents:
        a.up = up
    return agents, marker


def test_gloo_allreduce_four_agents(etcd):
    rid = run_id("gloo")
    agents = [etcd_agent(i, 4, etcd.endpoints(), rid, ALLREDUCE, nproc=2) for i in range(4)]
    codes = wait_all(agents, timeout=150)
    assert codes == [0] * 4, [a.err for a in agents]
    res = [parse_kv(line) for line in result_lines(agents)]
    assert sorted(int(r["rank"]) for r in res) == list(range(8))
    assert all(int(r["sum"]) == sum(range(8)) and int(r["world"]) == 8 for r in res)
    # the finished job's keys are gone: the last coordinator removed them
    assert etcd.keys(f"podrun/{rid}/") == []


def test_workers_use_node_rank_0s_store(etcd):
    rid = run_id("env")
    agents = [etcd_agent(i, 3, etcd.endpoints(), rid, ENV_SH, nproc=2, extra=NOPY)
              for i in range(3)]
    assert wait_all(agents, timeout=60) == [0] * 3, [a.err for a in agents]
    res = [parse_kv(line) for line in result_lines(agents, "env ")]
    assert sorted(int(r["rank"]) for r in res) == list(range(6))
    masters = {r["master"] for r in res}
    assert len(masters) == 1
    rank0 = [r for r in res if r["group_rank"] == "0"]
    # node0 (127.0.0.2) sorts first, so it is node rank 0 and its own store serves everyone
    host, port = masters.pop().rsplit(":", 1)
    assert host == "127.0.0.2" and int(port) > 0 and len(rank0) == 2
    assert all(r["agent_store"] == "True" for r in res)


def test_elastic_last_call_and_a_node_joining_later(etcd, tmp_path):
    """--nnodes 2:3: the round closes with two nodes after last call; a third joining the
    running job is a membership change (a new round of three), not a restart used."""
    rid = run_id("elastic")
    extra = NOPY + ["--rdzv-conf", "last_call_timeout=0.5"]
    up, done = started_dir(), tmp_path / "done"
    env = {"DONE_FILE": str(done), "STARTED_DIR": up}
    agents = [etcd_agent(i, "2:3", etcd.endpoints(), rid, FAIL_SH, extra=extra, env=env)
              for i in range(2)]
    with killed_on_failure(agents):
        etcd.wait_for(f"podrun/{rid}/state", "phase=running", timeout=60)
        wait_started(up, 2, pattern="w2.*", agents=agents)   # the job runs as two
        agents.append(etcd_agent(2, "2:3", etcd.endpoints(), rid, FAIL_SH, extra=extra, env=env))
        wait_started(up, 3, pattern="w3.*", agents=agents)   # ... and then as three
        done.write_text("")
    codes = wait_all(agents, timeout=60)
    assert codes == [0, 0, 0], [a.err for a in agents]
    done = [parse_kv(line) for line in result_lines(agents, "done ")]
    assert sorted(int(d["rank"]) for d in done) == [0, 1, 2]
    assert all(d["world"] == "3" and d["restart"] == "0" for d in done), done
    for a in agents[:2]:  # the first two ran as two before the third came
        starts = [parse_kv(line) for line in result_lines([a], "start ")]
        assert [(s["world"], s["restart"]) for s in starts] == [("2", "0"), ("3", "0")], a.out


def member_of(etcd, pid):
    """The index of the etcd member the process pid has a connection to."""
    out = subprocess.run(["ss", "-Htnp", "state", "established"], capture_output=True,
                         text=True).stdout
    for line in out.splitlines():
        if f"pid={pid}," in line:
            port = int(line.split()[3].rsplit(":", 1)[1])
            if port in etcd.client:
                return etcd.client.index(port)
    raise AssertionError(f"process {pid} has no connection to etcd:\n{out}")


def test_etcd_member_killed_mid_job(etcd3, tmp_path):
    """The member of three that node0 talks to goes mid-job: node0 (and whoever else used it)
    moves to another, the job goes on untouched and finishes with no restart."""
    rid = run_id("member")
    up, done = started_dir(), tmp_path / "done"
    # the kill comes once the workers run; they finish once node0 has said it moved on (what
    # they then write to etcd waits, with the client's retries, for the two members left to
    # elect a leader again)
    agents = [etcd_agent(i, 4, etcd3.endpoints(), rid, FAIL_SH, extra=NOPY,
                         env={"DONE_FILE": str(done), "STARTED_DIR": up}) for i in range(4)]
    with killed_on_failure(agents):
        etcd3.wait_for(f"podrun/{rid}/state", "phase=running", timeout=60)
        wait_started(up, 4, agents=agents)
        gone = member_of(etcd3, agents[0].proc.pid)
        etcd3.kill(gone)
        agents[0].wait_err("going on with etcd at")
        done.touch()
        codes = wait_all(agents, timeout=60)
    assert codes == [0] * 4, [a.err for a in agents]
    done = result_lines(agents, "done ")
    assert len(done) == 4 and all("restart=0" in line for line in done), done
    assert not any("stopped" in a.err for a in agents), [a.err for a in agents]
    assert etcd3.endpoint(gone) in agents[0].err


def test_rank0_coordinator_kill9_restarts_in_place_with_spare(etcd):
    """The agent that is node rank 0 — and, started first, the coordinator — is SIGKILLed in a
    gloo job: another agent takes over from the state in etcd, the job restarts in place with
    the spare that was waiting (one restart of one used), the new node rank 0 hosts the workers'
    store, and the gloo job finishes."""
    rid = run_id("rank0")
    env = {"HOLD": "60", "HOLD_UNTIL": "1"}
    extra = ["--max-restarts", "1"]
    agents = [etcd_agent(0, 4, etcd.endpoints(), rid, ALLREDUCE, extra=extra, env=env)]
    assert etcd.wait_for(f"podrun/{rid}/leader", timeout=30)
    agents += [etcd_agent(i, 4, etcd.endpoints(), rid, ALLREDUCE, extra=extra, env=env)
               for i in (1, 2, 3)]
    etcd.wait_for(f"podrun/{rid}/state", "phase=running", timeout=60)
    spare = etcd_agent(4, 4, etcd.endpoints(), rid, ALLREDUCE, extra=extra, env=env)
    joins(etcd, rid, 5)   # the spare's join is in etcd: it waits for a place
    agents[0].kill()
    codes = wait_all(agents[1:] + [spare], timeout=150)
    assert codes == [0] * 4, [a.err for a in agents[1:] + [spare]]
    errs = "".join(a.err for a in agents[1:] + [spare])
    assert "coordinates the job from round 0 (running" in errs, errs
    assert "node0: agent lost: its etcd lease ended" in errs
    assert "restarting the job in place (restart 1 of 1)" in errs
    res = [parse_kv(line) for line in result_lines(agents[1:] + [spare])]
    again = [r for r in res if r["restart"] == "1"]
    assert sorted(int(r["rank"]) for r in again) == [0, 1, 2, 3], res
    assert all(int(r["sum"]) == 6 for r in again)
    assert etcd.keys(f"podrun/{rid}/") == []


def joins(etcd, rid, n, timeout=30):
    """Waits until n joins of job rid are in etcd."""
    wait_for(lambda: len([k for k in etcd.keys(f"podrun/{rid}/n/") if "/join/" in k]) >= n,
             timeout, lambda: f"{n} joins: {etcd.keys(f'podrun/{rid}/')}")


def test_coordinator_kill9_while_round_open(etcd):
    """The coordinator dies before the round has filled: another agent takes over the open round
    with the joins already in etcd, and the round closes with those who come later."""
    rid = run_id("open")
    first = etcd_agent(0, 3, etcd.endpoints(), rid, ENV_SH, extra=NOPY)
    etcd.wait_for(f"podrun/{rid}/leader", timeout=30)
    second = etcd_agent(1, 3, etcd.endpoints(), rid, ENV_SH, extra=NOPY)
    joins(etcd, rid, 2)
    first.kill()
    late = [etcd_agent(i, 3, etcd.endpoints(), rid, ENV_SH, extra=NOPY) for i in (2, 3)]
    codes = wait_all([second] + late, timeout=60)
    assert codes == [0, 0, 0], [a.err for a in [second] + late]
    res = [parse_kv(line) for line in result_lines([second] + late, "env ")]
    assert sorted(int(r["rank"]) for r in res) == [0, 1, 2]
    assert all(r["world"] == "3" and r["restart"] == "0" for r in res)
    errs = "".join(a.err for a in [second] + late)
    assert "coordinates the job from round 0 (open" in errs, errs
    wait_all([first], timeout=10)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP])
def test_etcd_gone_every_agent_exits_store_lost(etcd, how):
    """etcd stopped (killed, or frozen so that requests hang) while the workers run: the agents
    retry and each says what fails; once twice its lease's ttl (3 s) has passed since its
    last renewal, long before read_timeout (30 s), an agent can no longer know that the job did not
    give its ranks to others: every agent stops its workers, ends with the store-lost code and
    leaves nothing running."""
    rid = run_id("gone")
    agents, marker = sleeper_job(3, etcd.endpoints(), rid, extra=["--rdzv-conf", "read_timeout=30"])
    etcd.wait_for(f"podrun/{rid}/state", "phase=running", timeout=60)
    wait_started(agents[0].up, 3, agents=agents)
    t0 = time.time()
    etcd.kill(0, how)
    codes = wait_all(agents, timeout=30)
    took = time.time() - t0
    assert codes == [STORE_LOST] * 3, [a.err for a in agents]
    # twice the lease's ttl, plus stopping the workers
    assert took < 2 * 3 + 2 + 4, took
    assert all("etcd is not answering" in a.err and
               "etcd has not renewed this node's lease for 6s (its ttl: 3 s)" in a.err
               for a in agents), [a.err for a in agents]
    clean, left = no_leftovers(marker)
    assert clean, left


def test_etcd_unreachable_from_the_start():
    port = free_port()
    agent = etcd_agent(0, 2, f"127.0.0.1:{port}", run_id("none"), ENV_SH,
                       extra=NOPY + ["--rdzv-conf", "read_timeout=2"])
    t0 = time.time()
    assert agent.wait(timeout=20) == STORE_LOST, agent.err
    assert time.time() - t0 < 8
    assert f"127.0.0.1:{port}" in agent.err and "etcd did not answer for 2s" in agent.err


def etcd_pki(d):
    """The test CA's files, and a server certificate for etcd that is also a client one: etcd
    3.4's JSON gateway dials etcd's own gRPC port with it (kubeadm's etcd certificates are both
    too)."""
    pki = tlsca.make_pki(d)
    if not os.path.exists(os.path.join(d, "etcd.crt")):
        tlsca._make_leaf(str(d), "etcd", "/CN=localhost",
                         "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                         "extendedKeyUsage=serverAuth,clientAuth\n"
                         "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    return {**pki, "server.crt": os.path.join(d, "etcd.crt"),
            "server.key": os.path.join(d, "etcd.key")}


def test_tls_with_client_certificates(tmp_path):
    pki = etcd_pki(tmp_path / "pki")
    e = Etcd(1, pki=pki)
    try:
        rid = run_id("tls")
        tls = ["--etcd-cacert", pki["ca.crt"], "--etcd-cert", pki["client.crt"],
               "--etcd-key", pki["client.key"]]
        # no scheme: https, because certificates are given
        agents = [etcd_agent(i, 2, e.endpoints(), rid, ENV_SH, extra=NOPY + tls)
                  for i in range(2)]
        assert wait_all(agents, timeout=60) == [0, 0], [a.err for a in agents]
        assert len(result_lines(agents, "env ")) == 2
        # podrun status over the same TLS: etcd answers (the job's keys are gone with it)
        r = etcd_status(e, rid, *tls)
        assert r.returncode == 3 and f"holds no job '{rid}'" in r.stderr, r.stderr
        r = etcd_status(e, rid, "--timeout", "2")
        assert r.returncode == 3 and "no etcd answers at" in r.stderr, r.stderr
        # a CA that did not sign etcd's certificate: no answer is trusted, bounded
        bad = ["--etcd-cacert", pki["other-ca.crt"], "--etcd-cert", pki["client.crt"],
               "--etcd-key", pki["client.key"], "--rdzv-conf", "read_timeout=2"]
        a = etcd_agent(0, 2, e.endpoints(scheme=True), run_id("tls2"), ENV_SH, extra=NOPY + bad)
        assert a.wait(timeout=20) == STORE_LOST, a.err
        assert "certificate" in a.err or "SSL" in a.err, a.err
    finally:
        e.stop()


class _Junk(http.server.BaseHTTPRequestHandler):
    """Answers that are not etcd's: garbage, JSON of the wrong shape, a body over every bound,
    or nothing at all."""
    mode = "garbage"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        mode = type(self).mode
        if mode == "silent":
            time.sleep(30)   # the behaviour under test: a server that never answers
            return
        if mode == "huge":
            self.send_response(200)
            self.send_header("Content-Length", str(80 << 20))
            self.end_headers()
            chunk = b"{" * (1 << 20)
            try:
                for _ in range(80):
                    self.wfile.write(chunk)
            except OSError:
                pass
            return
        body = {"garbage": b"\x00\xff{{{not json",
                "shape": b'{"header":{"revision":"x"},"kvs":[{"key":"!!"}],"ID":[]}'}[mode]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize("mode", ["garbage", "shape", "huge", "silent"])
def test_answers_that_are_not_etcds(mode):
    handler = type(f"Junk_{mode}", (_Junk,), {"mode": mode})
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        agent = etcd_agent(0, 2, f"127.0.0.1:{srv.server_address[1]}", run_id("junk"), ENV_SH,
                           extra=NOPY + ["--rdzv-conf", "read_timeout=2"])
        t0 = time.time()
        assert agent.wait(timeout=30) == STORE_LOST, agent.err
        assert time.time() - t0 < 12
        assert "etcd did not answer for 2s" in agent.err, agent.err
    finally:
        srv.shutdown()
        srv.server_close()


def test_keys_of_an_abandoned_job_expire(etcd):
    """A job whose agents are all killed leaves nothing behind for long: the agents' keys go
    with their leases, the job's with the job lease (close_timeout, at least 10 s)."""
    rid = run_id("gone")
    agents, marker = sleeper_job(2, etcd.endpoints(), rid, extra=["--rdzv-conf",
                                                                  "close_timeout=1"])
    etcd.wait_for(f"podrun/{rid}/state", "phase=running", timeout=60)
    assert f"podrun/{rid}/job" in etcd.keys(f"podrun/{rid}/")
    for a in agents:
        a.kill()
    wait_all(agents, timeout=10)
    wait_for(lambda: etcd.keys(f"podrun/{rid}/") == [], 20,
             lambda: f"the keys to expire: {etcd.keys(f'podrun/{rid}/')}", every=0.5)


def test_k8s_pod_deleted_is_a_lost_peer(etcd, tmp_path):
    """--discovery k8s over the test API server with the etcd backend: a pod deleted under the
    running job (its agent still alive) stops every agent at once with the peer-lost code."""
    api = k8s_api.FakeAPI(tmp_path / "api", bookmark_interval=0.5).start()
    marker = f"300.{os.getpid()}{free_port()}"
    up = started_dir()
    rid = run_id("k8s")
    try:
        kc = api.kubeconfig(tmp_path / "kc")
        for i in range(3):
            api.put_pod({"name": f"job-worker-{i}", "phase": "Running", "ip": f"127.0.0.{2 + i}",
                         "labels": {"training.kubeflow.org/job-name": "job",
                                    "training.kubeflow.org/replica-type": "worker",
                                    "training.kubeflow.org/replica-index": str(i)}})
        agents = [Agent(["--discovery", "k8s", "--nnodes", "3", "--rdzv-backend", "etcd",
                         "--rdzv-endpoint", etcd.endpoints(), "--rdzv-id", rid, *NOPY, FAIL_SH],
                        env={"KUBECONFIG": str(kc), "POD_NAME": f"job-worker-{i}",
                             "SLEEP": marker, "STARTED_DIR": up, "PODRUN_MASTER_PORT": ""},
                        name=f"job-worker-{i}")
                  for i in range(3)]
        etcd.wait_for(f"podrun/{rid}/state", "phase=running", timeout=60)
        wait_started(up, 3, agents=agents)
        api.delete_pod("job-worker-1")
        codes = wait_all(agents, timeout=30)
    finally:
        api.stop()
    assert codes == [PEER_LOST] * 3, [a.err for a in agents]
    for a in agents:
        assert "job-worker-1: agent lost: pod deleted (seen by job-worker-" in a.err, a.err
    clean, left = no_leftovers(marker)
    assert clean, left


def test_long_run_ids_single_node(etcd):
    """Run ids as long as PyTorch's run_test.py makes them (str(uuid4().int), 39 digits) and a
    job name with its uid: every single-node job runs its worker and finishes. The agent's watch
    requests with such ids outgrew what etcd's gateway reads of a stream's body before it answers,
    and one of its watchers could be dropped: the agent then waited forever, silent."""
    ids = [str(uuid.uuid4().int) for _ in range(26)]
    ids += [f"pytorchjob-bert-large-{uuid.uuid4()}" for _ in range(4)]
    for rid in ids:
        agent = etcd_agent(0, 1, etcd.endpoints(), rid, ENV_SH, extra=NOPY)
        assert agent.wait(timeout=30) == 0, (rid, agent.err)
        assert "env rank=0 " in agent.out, (rid, agent.out, agent.err)


def test_default_run_id_is_refused(etcd):
    """etcd outlives jobs and is shared by them: without --rdzv-id every job on it would be one
    job, so an agent with the default id stops at once with a usage error naming the fix."""
    agent = Agent(["--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint",
                   etcd.endpoints(), *NOPY, ENV_SH], env={"PODRUN_MASTER_PORT": ""})
    assert agent.wait(timeout=30) == 2, agent.err
    lines = agent.err.strip().splitlines()
    assert len(lines) == 1, agent.err
    assert "--rdzv-backend etcd needs the job's own --rdzv-id (or PET_RDZV_ID)" in lines[0]
    assert "'none'" in lines[0] and "the same id" in lines[0], lines[0]
    assert etcd.keys() == []


def test_two_jobs_under_one_run_id_never_fake_success(etcd):
    """Two jobs of two nodes started together under one run id: one round of two runs and the
    job finishes; the two agents that ran no worker do not say success (exit 1, naming why).
    The workers wait until all four have joined: an agent that comes only after the job is over
    and its keys are gone starts a new job of that run id, as any first agent does."""
    rid = run_id("shared")
    gate = os.path.join(started_dir(), "all-joined")
    agents = [etcd_agent(i, 2, etcd.endpoints(), rid, ENV_SH, extra=NOPY,
                         env={"GATE_FILE": gate}) for i in range(4)]
    joins(etcd, rid, 4)
    open(gate, "w").close()
    codes = wait_all(agents, timeout=60)
    assert sorted(codes) == [0, 0, 1, 1], [a.err for a in agents]
    for a, code in zip(agents, codes):
        ran = "env rank=" in a.out
        assert ran == (code == 0), (code, a.out, a.err)
        if not ran:
            assert "the job finished without this node, which ran no worker in it" in a.err, a.err
            assert "another job uses the same --rdzv-id" in a.err, a.err


def etcd_status(etcd, rid, *more):
    r = subprocess.run([PODRUN, "status", "--rdzv-backend", "etcd", "--rdzv-endpoint",
                        etcd.endpoints(), "--rdzv-id", rid, *more], capture_output=True,
                       text=True, timeout=30)
    return r


def test_status_reads_an_etcd_job(etcd, tmp_path):
    """`podrun status --rdzv-backend etcd --rdzv-endpoint ... --rdzv-id ...` shows what it shows
    for a store-backed job: the round, the restarts, each node with its ranks, heartbeat and
    health check, and the last failure's root cause, here after a failure and a restart."""
    rid = run_id("status")
    done = tmp_path / "done"
    agents, _ = sleeper_job(2, etcd.endpoints(), rid, extra=["--max-restarts", "1"],
                            env={"FAIL_RANK": "1", "FAIL_AFTER_ALL": "1", "FAIL_AFTER": "0",
                                 "DONE_FILE": str(done)})
    with killed_on_failure(agents):
        def restarted():
            r = etcd_status(etcd, rid, "--json")
            if r.returncode != 0 or not r.stdout.startswith("{"):
                return None
            j = json.loads(r.stdout)
            return j["round"] == 1 and j["phase"] == "running" and len(j["nodes"]) == 2 and \
                all(n["health_check"] for n in j["nodes"]) and j
        job = wait_for(restarted, 60, "round 1 running in podrun status")
        assert job["run_id"] == rid and job["store"] == f"etcd {etcd.endpoints()}", job
        assert (job["restarts_used"], job["max_restarts"], job["world_size"]) == (1, 1, 2), job
        assert sorted(n["node_rank"] for n in job["nodes"]) == [0, 1], job
        assert sorted(n["addr"] for n in job["nodes"]) == ["127.0.0.2", "127.0.0.3"], job
        for n in job["nodes"]:
            assert n["state"] == "running" and -1 < job["time"] - n["last_heartbeat"] < 10, job
        f = job["last_failure"]
        assert (f["round"], f["then"], f["rank"], f["exit_code"]) == (0, "restarted", 1, 1), f
        r = etcd_status(etcd, rid)
        assert r.returncode == 0, r.stderr
        head = r.stdout.splitlines()[0]
        assert head.startswith(f"job '{rid}' at etcd {etcd.endpoints()}: running, round 1 ")
        assert "restarts used 1 of 1; 2 nodes, world size 2" in head, r.stdout
        rows = [row for row in r.stdout.splitlines() if re.match(r"^  \d ", row)]
        assert len(rows) == 2 and all(" running " in row for row in rows), r.stdout
        assert re.search(r"^last failure: round 0, .*: rank 1 \(local rank 0\) on node1 "
                         r"\(127\.0\.0\.3, node rank 1\): .*; the job restarted in place$",
                         r.stdout, re.M), r.stdout
        done.write_text("")
        codes = wait_all(agents, timeout=60)
    assert codes == [0, 0], [a.err for a in agents]
    # the finished job's keys are gone with it: nothing to read, said in one line
    r = etcd_status(etcd, rid)
    assert r.returncode == 3 and f"holds no job '{rid}'" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr


@pytest.mark.parametrize("args,text", [
    (["--rdzv-backend", "etcd", "--rdzv-id", "x"], "--rdzv-backend etcd needs --rdzv-endpoint"),
    (["--rdzv-backend", "etcd", "--rdzv-endpoint", "127.0.0.1:2379"], "needs --rdzv-id"),
    (["--rdzv-backend", "etcd", "--rdzv-endpoint", "ftp://a", "--rdzv-id", "x"],
     "--rdzv-endpoint"),
    (["--rdzv-backend", "zk", "127.0.0.1"], "--rdzv-backend 'zk'"),
])
def test_status_etcd_usage_errors(args, text):
    r = subprocess.run([PODRUN, "status", *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and text in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_workers_inherit_no_etcd_connection(etcd):
    """A worker gets none of the agent's connections to etcd: an inherited one would outlive the
    agent in what the worker forked, and lets the worker's code speak on the agent's behalf."""
    script = "for f in /proc/$$/fd/*; do echo \"fd $f $(readlink $f)\"; done"
    agent = etcd_agent(0, 1, etcd.endpoints(), run_id("fds"), "/bin/sh",
                       extra=NOPY, script_args=["-c", script])
    assert agent.wait(timeout=60) == 0, agent.err
    fds = [line for line in agent.out.splitlines() if "fd /proc/" in line]
    assert fds, agent.out
    assert not [f for f in fds if "socket:" in f], fds
