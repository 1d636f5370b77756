"""The network-fault matrix, c10d: partitions (short, long, one-way, half from half), a frozen
store host and packet loss, on agents in network namespaces (faults.py). Every case ends with
Job.check(): no agent or worker left, no rank held twice at any moment, no worker line lost; and
the codes and the time to them are those doc/failures.md#a-bad-network documents.

Timeouts come from flags to keep the cases short: keep_alive_interval K gives the heartbeat
window W = 3 K (TCP_USER_TIMEOUT and keep-alive) and the hang bound H = 10 W."""
import os
import signal
import time

import pytest

from cluster import wait_for
from faults import PEER_LOST, STORE_LOST, FaultNet, Job, record

FAST_K = "keep_alive_interval=0.2"   # W = 0.6 s, H = 6 s
W, H = 0.6, 6.0
TERM = 2                             # --term-timeout in every Job
# a bound is the documented time plus this much for a loaded 2-core machine: a case fails on a
# hang or a stop that waits for the wrong timeout, not on a slow turn of a loop
SLACK = 5
# the time a lost node that may be alive keeps its ranks (doc/multinode.md): W + grace + 1 s
FENCE = W + TERM + 1
SAVING = {"SAVE_S": "1", "SAVE_RANK": "0"}  # rank 0 saves for 1 s of the 2 s grace when stopped


@pytest.fixture
def net3():
    net = FaultNet(3)
    yield net
    net.close()


@pytest.fixture
def net4():
    net = FaultNet(4)
    yield net
    net.close()


def conf(*kv):
    return ["--rdzv-conf", ",".join(kv)]


def test_partition_shorter_than_the_window_changes_nothing(net3, port):
    """Node 2 cut from the store host for 1 s, a third of W (3 s at K = 1 s): TCP retransmits
    across the gap, the job goes on, nothing restarts and every agent exits 0."""
    job = Job(net3, port, 3, conf("keep_alive_interval=1"))
    job.wait_up(3)
    net3.cut([2], [0])
    healed_at = time.time()
    time.sleep(1.0)   # the behaviour under test: a partition this long
    net3.heal()
    t0 = time.monotonic()
    # the host hears node 2 again: a heartbeat of it after the heal is in the job's state
    def heard():
        st = job.status(0)
        return st and st["nodes"][2]["last_heartbeat"] > healed_at + 1.0
    wait_for(heard, 30, "a heartbeat of node 2 after the partition")
    job.wait_ticks(2, 3)
    job.finish()
    codes = job.wait_exit(t0=t0)
    assert codes == [0, 0, 0], job.errs()
    assert not job.up(3, 1), "the job restarted"
    job.check()
    record("partition of a node from the store host, 1 s (< W)", "goes on, nothing restarts, "
           "all exit 0", time.monotonic() - t0, "W = 3 s")


@pytest.mark.parametrize("elastic", [False, True], ids=["fixed", "elastic"])
def test_partition_longer_than_the_window_loses_the_node(net3, port, elastic):
    """Node 0 (rank 0, not the host: node 1 hosts) cut from everyone until it has gone. It
    loses the store after W and exits 172 once its rank 0 has saved (1 s of its 2 s grace).
    Fixed size, no restart left: the others exit 171. Elastic 2:3: the others restart as a world
    of 2 in which node 1 is rank 0, and finish. The new rank 0 starts only once the lost node
    must have stopped its own (the fence: W + grace + 1 s after the host lost it), so the two
    never run at once: without the fence they did, for the second the old one saved."""
    extra = conf(FAST_K) + (["--max-restarts", "1"] if elastic else [])
    job = Job(net3, port, "2:3" if elastic else 3, extra, host=1, env=SAVING)
    job.wait_up(3)
    net3.cut([0], [1, 2])
    t0 = time.monotonic()
    assert job.wait_exit([0], t0=t0) == [STORE_LOST], job.errs()
    lost_after = job.ended[0]
    net3.heal()
    if elastic:
        job.wait_up(2)   # a membership change: no restart counted
        job.finish()
        assert job.wait_exit([1, 2], t0=t0) == [0, 0], job.errs()
    else:
        assert job.wait_exit([1, 2], t0=t0) == [PEER_LOST] * 2, job.errs()
    job.check()
    # one window (plus a heartbeat's period) to the store lost, then at most the stop's grace
    assert lost_after < 2 * W + TERM + SLACK, lost_after
    assert max(job.ended.values()) < 2 * W + (FENCE if elastic else TERM) + SLACK, job.ended
    record(f"partition of a node from all, until it is lost (> W), "
           f"{'elastic 2:3' if elastic else 'fixed size'}",
           "the node 172; the others " + ("restart as a world of 2 and exit 0" if elastic
                                          else "171"), max(job.ended.values()),
           "W = 0.6 s, the fence (W + 2 s + 1 s)" if elastic else "W = 0.6 s, --term-timeout 2 s")


@pytest.mark.parametrize("deaf", ["host", pytest.param("node", marks=pytest.mark.slow)])
def test_one_way_partition_loses_the_node(net3, port, deaf):
    """A one-way cut: the host does not hear node 2 (which hears the host), or node 2 does not
    hear the host (which hears it). Either way a connection with nothing acknowledged fails
    after W on the side that sends: node 2 exits 172, the others 171."""
    job = Job(net3, port, 3, conf(FAST_K))
    job.wait_up(3)
    if deaf == "host":
        net3.deaf(0, 2)
    else:
        net3.deaf(2, 0)
    t0 = time.monotonic()
    codes = job.wait_exit(t0=t0)
    net3.heal()
    assert codes == [PEER_LOST, PEER_LOST, STORE_LOST], job.errs()
    assert max(job.ended.values()) < 2 * W + TERM + SLACK, job.ended
    job.check()
    who = "store host does not hear the node" if deaf == "host" else \
        "node does not hear the store host"
    record(f"one-way partition: the {who}",
           "the node 172; the others 171", max(job.ended.values()),
           "W = 0.6 s, --term-timeout 2 s")


@pytest.mark.parametrize("elastic", [pytest.param(False, marks=pytest.mark.slow), True],
                         ids=["fixed", "elastic"])
def test_half_from_half_no_split_brain(net4, port, elastic):
    """Nodes 0 and 1 cut from nodes 2 and 3; node 2 hosts the store. The side without the store
    exits 172. Fixed size: the store's side exits 171. Elastic 2:4: the store's side restarts
    as a world of 2 whose ranks 0 and 1 are those the other side's workers held: never both at
    once (the ledger's locks), and it finishes."""
    extra = conf(FAST_K) + (["--max-restarts", "1"] if elastic else [])
    job = Job(net4, port, "2:4" if elastic else 4, extra, host=2, env=SAVING)
    job.wait_up(4)
    net4.cut([0, 1], [2, 3])
    t0 = time.monotonic()
    assert job.wait_exit([0, 1], t0=t0) == [STORE_LOST] * 2, job.errs()
    net4.heal()
    if elastic:
        job.wait_up(2)   # a membership change: no restart counted
        job.finish()
        assert job.wait_exit([2, 3], t0=t0) == [0, 0], job.errs()
    else:
        assert job.wait_exit([2, 3], t0=t0) == [PEER_LOST] * 2, job.errs()
    assert max(job.ended.values()) < 2 * W + (FENCE if elastic else TERM) + SLACK, job.ended
    job.check()
    record(f"half the nodes from the other half, the store on one side, "
           f"{'elastic 2:4' if elastic else 'fixed size'}",
           "the side without the store 172; the store's side " +
           ("restarts as a world of 2, exits 0; no rank twice" if elastic else "171"),
           max(job.ended.values()),
           "W = 0.6 s, the fence (W + 2 s + 1 s)" if elastic else "W = 0.6 s, --term-timeout 2 s")


@pytest.mark.parametrize("longer", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["under-H", "over-H"])
def test_store_host_frozen(net3, port, longer):
    """The store host's agent stopped (SIGSTOP). For 2 W (under H = 6 s): late, not lost; the
    job finishes. Until the others have given up (past H): they exit 172, and the host, woken,
    finds them gone and exits 171."""
    job = Job(net3, port, 3, conf(FAST_K))
    job.wait_up(3)
    host = job.agents[0]
    host.signal(signal.SIGSTOP)
    t0 = time.monotonic()
    if longer:
        codes = job.wait_exit([1, 2], t0=t0, timeout=60)
        host.signal(signal.SIGCONT)
        assert codes == [STORE_LOST] * 2, job.errs()
        # H, then the PING's wait (W) before the hang is called
        assert max(job.ended[1], job.ended[2]) < H + W + TERM + SLACK, job.ended
        assert job.wait_exit([0], t0=t0) == [PEER_LOST], job.errs()
        record("store host frozen (SIGSTOP) until the others give up (> H)",
               "the others 172; the host 171 once woken", max(job.ended[1], job.ended[2]),
               "H = 6 s, then W before the PING")
    else:
        time.sleep(1.2)   # the behaviour under test: the host stopped for 2 W
        host.signal(signal.SIGCONT)
        job.wait_ticks(1, 3)
        job.finish()
        assert job.wait_exit(t0=t0) == [0, 0, 0], job.errs()
        assert not job.up(3, 1), "the job restarted"
        record("store host frozen (SIGSTOP) 1.2 s (2 W, < H)", "goes on, nothing restarts, "
               "all exit 0", job.ended[0] - 1.2, "H = 6 s")
    job.check()


@pytest.mark.parametrize("percent", [pytest.param(2, marks=pytest.mark.slow), 10,
                                     pytest.param(30, marks=pytest.mark.slow)])
def test_packet_loss_on_the_store_hosts_link(net3, port, percent):
    """percent % of the packets in and out of the store host's namespace lost for 10 s, with
    the default W (3 s): TCP retransmits what is lost and at 2 and 10 % the job finishes. At 30 %
    both ways a segment and its retransmits within W are all lost often enough (a third of the
    runs here) that a node's connection fails: then that node is lost as documented, 172 for it
    and 171 for the others, within W and the stop's grace; either way nothing hangs or runs
    twice."""
    job = Job(net3, port, 3, [])
    job.wait_up(3)
    net3.lose(0, percent)
    t0 = time.monotonic()
    time.sleep(10)   # the behaviour under test: the loss lasts this long
    net3.heal()
    job.finish()
    codes = job.wait_exit(t0=t0)
    if percent == 30 and codes != [0, 0, 0]:
        assert codes[0] == PEER_LOST and STORE_LOST in codes, job.errs()
        assert set(codes[1:]) <= {PEER_LOST, STORE_LOST}, job.errs()
        assert max(job.ended.values()) < 10 + 3 + TERM + SLACK, job.ended
        outcome, took = "a node lost: 172 for it, 171 for the others", max(job.ended.values())
    else:
        assert codes == [0, 0, 0], job.errs()
        assert not job.up(3, 1), "the job restarted"
        outcome, took = "goes on, nothing restarts, all exit 0", max(job.ended.values()) - 10
    job.check()
    record(f"loss of {percent} % on the store host's link, both ways, 10 s", outcome, took,
           "W = 3 s (a segment unacknowledged that long)")
