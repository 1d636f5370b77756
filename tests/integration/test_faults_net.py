"""The network-fault matrix, c10d, continued: latency with jitter and reordering (an NFQUEUE
delayer, faults.py), and the endpoint's name that stops resolving, mid-job or from the start (each
namespace's own /etc/hosts). The same checks at the end of every case as test_faults.py."""
import time

import pytest

from faults import FaultNet, Job, record

SLACK = 5   # as in test_faults.py: a loaded machine's turn, not a timeout


@pytest.fixture
def net3():
    net = FaultNet(3)
    yield net
    net.close()


def conf(*kv):
    return ["--rdzv-conf", ",".join(kv)]


@pytest.mark.parametrize("where", ["store-host", pytest.param("every-link",
                                                              marks=pytest.mark.slow)])
def test_latency_with_jitter_and_reordering(net3, port, where):
    """Every packet to and from the store host (or every packet on every link) waits its own
    100-300 ms, so TCP sees segments late and out of order, before the rendezvous and
    throughout. With the default window (W = 3 s, which the worst round trip, 0.6 s, stays well
    under) the job meets, runs, and a worker's failure still stops it and restarts it in place
    within the round trip; then it finishes."""
    if where == "store-host":
        net3.delay(0, 100, 300)
    else:
        for i in range(3):
            net3.delay(i, 100, 300, ways=("OUTPUT",))
    t0 = time.monotonic()
    job = Job(net3, port, 3, ["--max-restarts", "1"])
    job.wait_up(3)
    met = time.monotonic() - t0
    job.wait_ticks(2, 5)
    job.fail(2)
    t1 = time.monotonic()
    job.wait_up(3, 1)
    restarted = time.monotonic() - t1
    job.finish()
    assert job.wait_exit(t0=t0) == [0, 0, 0], job.errs()
    job.check()
    # a failure push and a rendezvous are a few round trips (each at most 0.6 s here), not W
    assert restarted < 3 + SLACK, restarted
    record("latency 100-300 ms with jitter and reordering, " +
           ("on the store host's link" if where == "store-host" else "on every link"),
           "meets, a worker's failure restarts the job in place, exits 0", restarted,
           "round trips (at most 0.6 s); W = 3 s")


def hosts_line(net, i, name):
    return f"{net.addr(i)} {name}\n"


def test_endpoint_name_stops_resolving_mid_job(net3, port):
    """The endpoint is a name that every node's /etc/hosts resolves to the store host; once the
    job runs the name goes away. The agents hold their connections: the job runs on, a worker's
    failure restarts it in place (the rendezvous goes over the open connections, no lookup), and
    it finishes."""
    name = "podrun-fault-store.test"
    for i in range(3):
        net3.hosts(i, hosts_line(net3, 0, name))
    job = Job(net3, port, 3, ["--max-restarts", "1"], name=name)
    job.wait_up(3)
    for i in range(3):
        net3.hosts(i, "")
    t0 = time.monotonic()
    job.fail(1)
    job.wait_up(3, 1)
    job.finish()
    assert job.wait_exit(t0=t0) == [0, 0, 0], job.errs()
    job.check()
    record("the endpoint's name stops resolving mid-job", "goes on; a worker's failure "
           "restarts the job in place; exits 0", max(job.ended.values()),
           "none: the agents keep their connections")


@pytest.mark.parametrize("ever", [False, True], ids=["never", "late"])
def test_endpoint_name_does_not_resolve_at_start(net3, port, ever):
    """The name does not resolve when the agents start (a headless service not yet in DNS).
    They retry without giving up until join_timeout (4 s here): a name that never comes ends
    every agent with 173 then; one that comes within it lets the job meet and finish."""
    name = "podrun-fault-late.test"
    for i in range(3):
        net3.hosts(i, "")
    t0 = time.monotonic()
    job = Job(net3, port, 3, conf("join_timeout=4"), name=name, host_extra=conf("is_host=1"))
    for a in job.agents[1:]:
        a.wait_err(name)   # each tried the name and waits on
    if ever:
        for i in range(3):
            net3.hosts(i, hosts_line(net3, 0, name))
        job.wait_up(3)
        job.finish()
        assert job.wait_exit(t0=t0) == [0, 0, 0], job.errs()
        outcome = "meets once the name resolves; exits 0"
    else:
        assert job.wait_exit(t0=t0) == [173] * 3, job.errs()
        assert max(job.ended.values()) < 4 + SLACK, job.ended
        outcome = "every agent 173 at join_timeout"
    job.check()
    record(f"the endpoint's name does not resolve at start, "
           f"{'then does' if ever else 'nor ever'}", outcome, max(job.ended.values()),
           "join_timeout = 4 s")
