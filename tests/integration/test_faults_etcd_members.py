"""The network-fault matrix, etcd backend, faults of etcd's own members (test_faults_etcd.py has
etcd out of the agents' reach behind packet filters, and its raft leader killed): the raft leader
frozen (SIGSTOP: it holds its connections and answers nothing) while the job's rendezvous is open
and while its workers run; every member frozen for less than the agents' lease, for more, and,
in the rendezvous, past read_timeout; every member killed mid-run; the member an agent talks to
cut from the other two (in network namespaces, etcd_faults.EtcdNet). Every case
ends with EtcdJob.check(): no agent or worker left, no rank held twice at any moment, no worker
line lost; and the codes and the times to them are those of doc/failures.md#etcd.

The timings are podrun's defaults unless a case says: keep_alive_interval K = 1 s, so the lease
L = 3 K = 3 s; etcd's own are its defaults (heartbeat 100 ms, election 1 s). The cases marked
slow (scripts/test leaves them out) run with `-m ""`, as scripts/fault-table runs them."""
import time

import pytest

from cluster import wait_for
from etcd_faults import STORE_LOST, TERM, EtcdJob, EtcdNet, freeze, record, thaw
from etcd_util import Etcd

K, L = 1.0, 3.0
# a bound is the documented time plus this much for a loaded 2-core machine: a case fails on a
# hang or a stop that waits for the wrong timeout, not on a slow turn of a loop
SLACK = 5


@pytest.fixture
def etcd3():
    e = Etcd(3)
    yield e
    e.stop()


def conf(*kv):
    return ["--rdzv-conf", ",".join(kv)]


def test_raft_leader_frozen_mid_rendezvous(etcd3):
    """Two of three agents have joined when etcd's raft leader freezes; the third joins after.
    The two members left elect a leader (etcd's election timeout, 1 s) and the agents' requests
    move to them once the frozen one has been silent for a third of the lease: the round fills,
    the job runs once and finishes, nothing restarts. When a silent member was left only after
    a whole lease, the leases of the agents that talked to it had run out by then (172)."""
    job = EtcdJob(etcd3, 3, nodes=[0, 1])
    wait_joins(job, 2)
    freeze(etcd3, [etcd3.raft_leader()])
    t0 = time.monotonic()
    job.start(2)
    job.wait_up(3)
    up_after = time.monotonic() - t0
    job.finish()
    codes = job.wait_exit()
    assert codes == [0, 0, 0], job.errs()
    assert job.attempts() == [(3, 0)], job.attempts()
    job.check()
    record("etcd: the raft leader frozen (SIGSTOP) mid-rendezvous", "meets, nothing restarts, "
           "exits 0", up_after, "etcd's election (1 s); a member silent for L/3 is left")


def test_raft_leader_frozen_mid_run(etcd3):
    """etcd's raft leader freezes while the workers run: the job is coordinated through the two
    members left (the coordinator's view is written again, with every node running, more than
    a lease after the freeze: no lease ran out), the workers never stop, nothing restarts."""
    job = EtcdJob(etcd3, 3)
    job.wait_up(3)
    freeze(etcd3, [etcd3.raft_leader()])
    t0, at = time.monotonic(), time.time()
    job.wait_coordinated_after(at)
    took = time.monotonic() - t0
    job.wait_coordinated_after(at + L + K)   # a lease and a renewal later: no agent was lost
    job.wait_ticks(0, 3)
    job.finish()
    codes = job.wait_exit()
    assert codes == [0, 0, 0], job.errs()
    assert job.attempts() == [(3, 0)], job.attempts()
    assert "lost" not in "".join(a.err for a in job.agents), job.errs()
    job.check()
    record("etcd: the raft leader frozen (SIGSTOP) mid-run", "goes on, nothing restarts, exits 0",
           took, "etcd's election (1 s); a member silent for L/3 is left")


def test_etcd_frozen_shorter_than_the_lease(etcd3):
    """Every member frozen for a third of the lease: the agents' requests wait and are sent
    again, no lease runs out, the workers never stop, nothing restarts."""
    job = EtcdJob(etcd3, 3)
    job.wait_up(3)
    freeze(etcd3, range(3))
    time.sleep(L / 3)   # the behaviour under test: etcd gone this long
    thaw(etcd3, range(3))
    t0, at = time.monotonic(), time.time()
    job.wait_coordinated_after(at)
    took = time.monotonic() - t0
    job.wait_coordinated_after(at + L)   # a lease later: no agent was lost
    job.wait_ticks(0, 3)
    job.finish()
    codes = job.wait_exit()
    assert codes == [0, 0, 0], job.errs()
    assert job.attempts() == [(3, 0)], job.attempts()
    job.check()
    record("etcd: every member frozen L/3 (< the lease's ttl)",
           "goes on, nothing restarts, exits 0", took, "lease ttl = 3 s")


@pytest.mark.slow
def test_etcd_frozen_longer_than_the_lease(etcd3):
    """Every member frozen while the workers run, until the agents stop: no renewal is answered,
    and an agent cannot tell etcd gone for everyone from itself cut off alone (then the others
    take its ranks after the lease), so each stops its workers once twice the ttl has
    passed since its last renewal and exits 172, whatever is left of read_timeout (30 s)."""
    job = EtcdJob(etcd3, 3, conf("read_timeout=30"))
    job.wait_up(3)
    freeze(etcd3, range(3))
    t0 = time.monotonic()
    try:
        codes = job.wait_exit(t0=t0, timeout=60)
    finally:
        thaw(etcd3, range(3))
    assert codes == [STORE_LOST] * 3, job.errs()
    assert all("etcd has not renewed this node's lease" in a.err for a in job.agents), job.errs()
    took = max(job.ended.values())
    assert took < 2 * L + TERM + SLACK, job.ended
    job.check()
    record("etcd: every member frozen longer than the lease's ttl, mid-run",
           "every agent stops its workers, 172", took,
           "twice the lease's ttl = 6 s, --term-timeout 2 s")


@pytest.mark.slow
def test_etcd_restarted_after_longer_than_the_lease(etcd3):
    """Every member killed, and started again (same data) once the agents have stopped: a
    restarted etcd would give every lease a full ttl again, but an agent cannot know that while
    etcd is gone, nor that no other agent took its ranks: each stops its workers once twice the ttl
    has passed since its last renewal and exits 172."""
    job = EtcdJob(etcd3, 3, conf("read_timeout=30"))
    job.wait_up(3)
    for i in range(3):
        etcd3.kill(i)
    t0 = time.monotonic()
    try:
        codes = job.wait_exit(t0=t0, timeout=60)
    finally:
        for i in range(3):
            etcd3.start(i)
    assert codes == [STORE_LOST] * 3, job.errs()
    assert all("etcd has not renewed this node's lease" in a.err for a in job.agents), job.errs()
    took = max(job.ended.values())
    assert took < 2 * L + TERM + SLACK, job.ended
    job.check()
    record("etcd: every member killed mid-run (restarted after the agents stopped)",
           "every agent stops its workers, 172", took,
           "twice the lease's ttl = 6 s, --term-timeout 2 s")


@pytest.mark.slow
def test_etcd_frozen_past_read_timeout(etcd3):
    """Every member frozen while two agents of three wait in the rendezvous (no workers, no
    ranks) until they give up: after read_timeout (4 s here) each exits 172."""
    job = EtcdJob(etcd3, 3, conf("read_timeout=4"), nodes=[0, 1])
    wait_joins(job, 2)
    freeze(etcd3, range(3))
    t0 = time.monotonic()
    try:
        codes = job.wait_exit(t0=t0, timeout=60)
    finally:
        thaw(etcd3, range(3))
    assert codes == [STORE_LOST] * 2, job.errs()
    assert all("etcd did not answer for 4s" in a.err for a in job.agents), job.errs()
    took = max(job.ended.values())
    assert took < 4 + K + SLACK, job.ended
    job.check()
    record("etcd: every member frozen for good while agents wait in the rendezvous",
           "every agent 172", took, "read_timeout = 4 s, a keep-alive tick")


def wait_joins(job, n, timeout=60):
    wait_for(lambda: job.joins() >= n, timeout, lambda: f"{n} joins in etcd:\n{job.errs()}")


@pytest.fixture
def etcd_net():
    e = EtcdNet(3, agents=3)
    yield e
    e.stop()


def test_member_cut_from_its_peers_while_agents_use_it(etcd_net):
    """The member node0 talks to is cut from the other two (a minority of one) while every agent
    still reaches it: what it is asked waits for a quorum it cannot reach, so it answers nothing.
    The agents that talked to it go on with the other members after a third of the lease's
    silence; the job is coordinated through the majority, nothing restarts."""
    e = etcd_net
    job = EtcdJob(e, 3, net=e.net)
    job.wait_up(3)
    m = wait_for(lambda: e.member_of(job.agents[0], e.net.first_agent), 30,
                 "node0's connection to an etcd member") - 1
    was_leader = m == e.raft_leader()
    e.partition(m)
    t0, at = time.monotonic(), time.time()
    job.wait_coordinated_after(at)
    took = time.monotonic() - t0
    job.wait_coordinated_after(at + L + K)   # a lease and a renewal later: no agent was lost
    job.agents[0].wait_err("going on with etcd at")
    job.wait_ticks(0, 3)
    job.finish()
    codes = job.wait_exit()
    assert codes == [0, 0, 0], job.errs()
    assert job.attempts() == [(3, 0)], job.attempts()
    job.check()
    record("etcd: the member agents use cut from its peers (minority of one)"
           + (", the raft leader" if was_leader else ""), "goes on, nothing restarts, exits 0",
           took, "a member silent for L/3 is left; etcd's election (1 s) if it led")
