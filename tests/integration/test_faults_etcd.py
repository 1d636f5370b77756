"""The network-fault matrix on the etcd backend: a 3-member etcd cluster (Debian's etcd-server) in
a network namespace of its own, the agents in theirs (faults.py): the raft leader lost while the
job meets and while it runs, and etcd out of every agent's reach for less and more than the
agents' lease (ttl 3 s: keep_alive_interval 1 s x 3) and past read_timeout. The same checks at
the end of every case as test_faults.py."""
import time

import pytest

from cluster import wait_for
from etcd_util import Etcd
from faults import STORE_LOST, FaultNet, Job, record

SLACK = 5   # as in test_faults.py: a loaded machine's turn, not a timeout
TTL = 3     # the agents' lease: keep_alive_interval 1 s x keep_alive_max_attempt 3
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
    wait_for(lambda: e.get(key) not in ("", first), 60, "a view of the job written after the "
             "fault", every=0.2)


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


@pytest.mark.parametrize("cut_s", [1, pytest.param(2 * TTL, marks=pytest.mark.slow)],
                         ids=["under-ttl", "over-ttl"])
def test_etcd_unreachable(cluster, port, cut_s):
    """Every agent cut from etcd for cut_s. Under the lease's ttl: the agents retry, the
    workers run on, the leases are renewed once etcd answers, the job finishes. Over it (still
    well under read_timeout): etcd has expired every agent's lease, so each one, reaching etcd
    again, finds it was counted as lost and exits 172."""
    net, e = cluster
    job = Job(net, port, 3, [], etcd=e.endpoints(), nodes=AGENTS)
    job.wait_up(3)
    net.cut([0, 1, 2], [ETCD])
    time.sleep(cut_s)   # the behaviour under test: etcd out of reach this long
    net.heal()
    t0 = time.monotonic()
    if cut_s < TTL:
        view_moves(e, job)
        job.finish()
        assert job.wait_exit(t0=t0) == [0, 0, 0], job.errs()
        assert not job.up(3, 1), "the job restarted"
        outcome = "goes on, nothing restarts, exits 0"
    else:
        assert job.wait_exit(t0=t0) == [STORE_LOST] * 3, job.errs()
        assert max(job.ended.values()) < 1 + 2 + SLACK, job.ended
        assert all("lease has expired" in a.err for a in job.agents), job.errs()
        outcome = "every agent 172 once it reaches etcd (its lease expired)"
    job.check()
    record(f"etcd: out of every agent's reach {cut_s} s "
           f"({'<' if cut_s < TTL else '>'} the lease's ttl)", outcome, max(job.ended.values()),
           f"lease ttl = {TTL} s")


@pytest.mark.slow
def test_etcd_unreachable_past_read_timeout(cluster, port):
    """Every agent cut from etcd until it gives up: after read_timeout (4 s here) each stops its
    workers and exits 172, without etcd ever answering again."""
    net, e = cluster
    job = Job(net, port, 3, ["--rdzv-conf", "read_timeout=4"], etcd=e.endpoints(),
              nodes=AGENTS)
    job.wait_up(3)
    net.cut([0, 1, 2], [ETCD])
    t0 = time.monotonic()
    assert job.wait_exit(t0=t0) == [STORE_LOST] * 3, job.errs()
    net.heal()
    assert max(job.ended.values()) < 4 + 1 + 2 + SLACK, job.ended
    job.check()
    record("etcd: out of every agent's reach for good", "every agent 172",
           max(job.ended.values()), "read_timeout = 4 s, a keep-alive tick, --term-timeout 2 s")


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="a node cut from etcd alone runs its workers until "
                   "read_timeout, long after the job gave its ranks to others (no fence on etcd)")
def test_one_node_cut_from_etcd_no_split_brain(cluster, port):
    """Node 0 (rank 0) cut from etcd alone, its peers not: its lease ends after the ttl and the
    others restart as a world of 2 in which node 1 is rank 0. Node 0 hears nothing of it and runs
    its rank 0 on until read_timeout (10 s here), so two rank 0s run at once: the ledger sees it.
    Known and documented (doc/failures.md#a-bad-network); this case turns when it is fixed."""
    net, e = cluster
    job = Job(net, port, "2:3", ["--rdzv-conf", "read_timeout=10"], etcd=e.endpoints(),
              nodes=AGENTS)
    job.wait_up(3)
    net.cut([0], [ETCD])
    t0 = time.monotonic()
    job.wait_up(2)
    job.finish()
    codes = job.wait_exit(t0=t0)
    net.heal()
    assert codes == [STORE_LOST, 0, 0], job.errs()
    record("etcd: one node (rank 0) out of etcd's reach alone, elastic 2:3",
           "the others restart as a world of 2 after the ttl; the node runs on until "
           "read_timeout, then 172: two rank 0s meanwhile (known)", max(job.ended.values()),
           "lease ttl = 3 s; read_timeout = 10 s")
    job.check()
