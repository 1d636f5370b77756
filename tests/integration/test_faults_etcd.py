"""The network-fault matrix on the etcd backend: a 3-member etcd cluster (Debian's etcd-server) in
a network namespace of its own, the agents in theirs (faults.py): the raft leader lost while the
job meets and while it runs, etcd out of every agent's reach for less and more than the agents'
lease (ttl 3 s: keep_alive_interval 1 s x 3) and, in the rendezvous, past read_timeout, and one
node out of its reach alone. The same checks at the end of every case as test_faults.py."""
import time

import pytest

from cluster import wait_for
from etcd_util import Etcd
from faults import STORE_LOST, FaultNet, Job, record

SLACK = 5   # as in test_faults.py: a loaded machine's turn, not a timeout
TTL = 3     # the agents' lease: keep_alive_interval 1 s x keep_alive_max_attempt 3
UNRENEWED = 2 * TTL   # an agent whose lease etcd did not renew this long stops its workers
TERM = 2    # --term-timeout in every Job
SAVING = {"SAVE_S": "1", "SAVE_RANK": "0"}  # rank 0 saves for 1 s of the 2 s grace when stopped
ETCD = 3    # the namespace of the etcd cluster
AGENTS = [0, 1, 2]


@pytest.fixture
def cluster():
    net = FaultNet(4)
    try:
        e = Etcd(3, host=net.addr(ETCD), prefix=net.prefix_cmd(ETCD))
    except Exception:
        net.close()
        raise
    yield net, e
    e.stop()
    net.close()


def view_moves(e, job):
    """Waits until the coordinator has written the job's view (every keep-alive interval, with
    each node's last renewal) anew since now: etcd takes the job's writes again."""
    key = f"podrun/{job.run_id}/view"
    first = wait_for(lambda: e.get(key), 60, "etcd to answer", every=0.2)
    wait_for(lambda: e.get(key) not in ("", first), 60, lambda: "a view of the job written "
             f"after the fault:\n{job.errs()}", every=0.2)


def test_raft_leader_lost_mid_rendezvous(cluster, port):
    """Two of three agents have joined when etcd's raft leader is killed: the two members left
    elect another, the agents' requests move to a member that answers, the third agent joins,
    and the job meets and finishes with no restart."""
    net, e = cluster
    job = Job(net, port, 3, [], nodes=[0, 1], etcd=e.endpoints())
    e.wait_for(f"podrun/{job.run_id}/status", "2/3", timeout=60)
    e.kill(e.raft_leader())
    t0 = time.monotonic()
    job.start(2)
    job.wait_up(3)
    job.finish()
    assert job.wait_exit(t0=t0) == [0, 0, 0], job.errs()
    assert not job.up(3, 1), "the job restarted"
    job.check()
    record("etcd: the raft leader killed mid-rendezvous", "meets, nothing restarts, exits 0",
           max(job.ended.values()), "etcd's election")


def test_raft_leader_lost_mid_run(cluster, port):
    """The raft leader killed while the workers run: the job's leases are renewed through the
    new leader (the coordinator's next view is written) and the job finishes untouched."""
    net, e = cluster
    job = Job(net, port, 3, [], etcd=e.endpoints(), nodes=AGENTS)
    job.wait_up(3)
    e.kill(e.raft_leader())
    t0 = time.monotonic()
    view_moves(e, job)
    took = time.monotonic() - t0
    job.finish()
    assert job.wait_exit(t0=t0) == [0, 0, 0], job.errs()
    assert not job.up(3, 1), "the job restarted"
    job.check()
    record("etcd: the raft leader killed mid-run", "goes on, nothing restarts, exits 0", took,
           "etcd's election")


def test_etcd_unreachable_shorter_than_the_lease(cluster, port):
    """Every agent cut from etcd for 1 s: the agents retry, the workers run on, the leases are
    renewed once etcd answers, the job finishes and nothing restarts."""
    net, e = cluster
    job = Job(net, port, 3, [], etcd=e.endpoints(), nodes=AGENTS)
    job.wait_up(3)
    net.cut([0, 1, 2], [ETCD])
    time.sleep(1)   # the behaviour under test: etcd out of reach this long
    net.heal()
    t0 = time.monotonic()
    view_moves(e, job)
    job.finish()
    assert job.wait_exit(t0=t0) == [0, 0, 0], job.errs()
    assert not job.up(3, 1), "the job restarted"
    job.check()
    record("etcd: out of every agent's reach 1 s (< the lease's ttl)",
           "goes on, nothing restarts, exits 0", max(job.ended.values()), f"lease ttl = {TTL} s")


@pytest.mark.slow
def test_etcd_unreachable_longer_than_the_lease(cluster, port):
    """Every agent cut from etcd until it stops: no agent can tell whether it alone is cut off
    (then the others take its ranks after the lease's ttl) or etcd is out of everyone's reach,
    so each stops its workers once twice the ttl has passed since its last renewal and exits
    172,
    whatever is left of read_timeout (60 s)."""
    net, e = cluster
    job = Job(net, port, 3, [], etcd=e.endpoints(), nodes=AGENTS)
    job.wait_up(3)
    net.cut([0, 1, 2], [ETCD])
    t0 = time.monotonic()
    codes = job.wait_exit(t0=t0)
    net.heal()
    assert codes == [STORE_LOST] * 3, job.errs()
    assert all("etcd has not renewed this node's lease" in a.err for a in job.agents), job.errs()
    assert max(job.ended.values()) < UNRENEWED + TERM + SLACK, job.ended
    job.check()
    record("etcd: out of every agent's reach for longer than the lease's ttl, mid-run",
           "every agent stops its workers, 172", max(job.ended.values()),
           f"twice the lease's ttl = {UNRENEWED} s, --term-timeout 2 s")


@pytest.mark.slow
def test_etcd_unreachable_past_read_timeout(cluster, port):
    """Two agents of three wait in the rendezvous (no workers, no ranks) when etcd goes out of
    their reach for good: after read_timeout (4 s here) each gives up and exits 172."""
    net, e = cluster
    job = Job(net, port, 3, ["--rdzv-conf", "read_timeout=4"], etcd=e.endpoints(),
              nodes=[0, 1])
    e.wait_for(f"podrun/{job.run_id}/status", "2/3", timeout=60)
    net.cut([0, 1], [ETCD])
    t0 = time.monotonic()
    assert job.wait_exit(t0=t0) == [STORE_LOST] * 2, job.errs()
    net.heal()
    assert all("etcd did not answer for 4s" in a.err for a in job.agents), job.errs()
    assert max(job.ended.values()) < 4 + 1 + SLACK, job.ended
    job.check()
    record("etcd: out of the reach of agents waiting in the rendezvous, for good",
           "every agent 172", max(job.ended.values()), "read_timeout = 4 s, a keep-alive tick")


@pytest.mark.slow
def test_one_node_cut_from_etcd_no_split_brain(cluster, port):
    """Node 0 (rank 0) cut from etcd alone, its peers not: its lease ends after the ttl and the
    others restart as a world of 2 in which node 1 is rank 0. Node 0 cannot know whether it
    alone is cut off: once twice the ttl has passed since its last renewal it stops its workers
    (rank 0
    saves for 1 s of its 2 s grace) and exits 172, long before read_timeout (60 s). The new
    rank 0 starts only once the old one must have stopped (the fence: the lease's end + the ttl
    + --term-timeout + 1 s), so the ledger never sees two rank 0s: without the node's own stop
    the two ran for read_timeout, and without the fence for the second the old one saved."""
    net, e = cluster
    job = Job(net, port, "2:3", [], etcd=e.endpoints(), nodes=AGENTS, env=SAVING)
    job.wait_up(3)
    net.cut([0], [ETCD])
    t0 = time.monotonic()
    assert job.wait_exit([0], t0=t0) == [STORE_LOST], job.errs()
    assert "etcd has not renewed this node's lease for 6s" in job.agents[0].err, job.errs()
    assert job.ended[0] < UNRENEWED + TERM + SLACK, job.ended
    job.wait_up(2)   # a membership change: no restart counted
    job.finish()
    assert job.wait_exit([1, 2], t0=t0) == [0, 0], job.errs()
    net.heal()
    job.check()
    assert "once node0, lost while it may be alive, must have stopped its workers" in \
        job.agents[1].err + job.agents[2].err, job.errs()
    record("etcd: one node (rank 0) out of etcd's reach alone, elastic 2:3",
           "the node stops its workers, 172; the others restart as a world of 2 after the "
           "fence and exit 0; no rank twice", max(job.ended.values()),
           "twice the lease's ttl = 6 s; the fence (ttl 3 s + --term-timeout 2 s + 1 s "
           "after the lease's end)")
