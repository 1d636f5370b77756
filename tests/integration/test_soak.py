"""Long-running jobs: the store host's state across many restarts, and a store host that stops
for a while (SIGSTOP: CPU-throttled, swapped out, a long turn of its loop) is a slow one, not a
dead one, up to the documented hang bound.

Real agents on 127.0.0.2-4; the key count is read with torch 1.13's own TCPStore client."""
import os
import signal
import subprocess
import time

from cluster import (WORKERS, start_agents, started_dir, wait_all, wait_started, no_leftovers,
                     result_lines, parse_kv)
from conftest import TORCH_PY, free_port

FAIL_SH = os.path.join(WORKERS, "fail.sh")
PEER_FAILURE, PEER_LOST, STORE_LOST = 170, 171, 172

# Polls the store's key count for up to `secs` seconds: one "keys N" line per answer. After
# answer n it creates the file gate/n: the job's attempt n starts only then (fail.sh's GATE_DIR),
# so the job cannot outrun the poller however fast this machine restarts it.
POLL_KEYS = r"""
import os, sys, time
from datetime import timedelta
import torch.distributed as dist
port, secs, gate = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
print("ready", flush=True)  # torch is imported; the client retries until the store listens
s = dist.TCPStore("127.0.0.2", port, is_master=False, timeout=timedelta(seconds=30))
end = time.time() + secs
n = 0
while time.time() < end:
    try:
        print("keys", s.num_keys(), flush=True)
    except Exception:
        break
    open(os.path.join(gate, str(n)), "w").close()
    n += 1
    time.sleep(0.05)  # the sampling period: the job waits for the samples, not for this
"""


def test_restart_soak_key_count_levels_off(port, tmp_path):
    """A worker that fails at once on every attempt, 60 counted restarts: the store holds each
    node's latest answer and the last few end records, not three keys per restart. Each attempt
    waits for one more sample of the key count, so the samples span every restart."""
    restarts = 60
    marker = f"300.{os.getpid()}{port}"
    gate = tmp_path / "gate"
    gate.mkdir()
    poll = subprocess.Popen([TORCH_PY, "-c", POLL_KEYS, str(port), "200", str(gate)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert poll.stdout.readline().strip() == "ready"
    agents = start_agents(2, 1, port, env={"SLEEP": marker, "FAIL_RANK": "1", "FAIL_AFTER": "0",
                                           "FAIL_UNTIL": "100000", "GATE_DIR": str(gate)},
                          extra=["--no-python", "--term-timeout", "2", "--max-restarts",
                                 str(restarts)], script=FAIL_SH)
    try:
        codes = wait_all(agents, timeout=240)
    finally:
        if poll.poll() is None:
            poll.send_signal(signal.SIGTERM)
        poll.wait(timeout=30)
    keys = [int(l.split()[1]) for l in poll.stdout.read().splitlines() if l.startswith("keys ")]
    assert codes == [PEER_FAILURE, 1], [a.err for a in agents]
    starts = [parse_kv(l)["restart"] for l in result_lines(agents[1:], "start ")]
    assert starts[-1] == str(restarts)
    assert len(keys) >= 10, keys
    # 2 assign keys + 4 end records + the status line, and what a round briefly adds
    assert max(keys) <= 12, keys
    assert no_leftovers(marker)[0]


def stopped_host(port, stop_s, conf, done_after):
    """3 agents whose workers finish after done_after s; the store host (agent 0) is stopped for
    stop_s seconds once the job runs. Returns the agents and their exit codes."""
    marker = f"300.{os.getpid()}{port}"
    up = started_dir()
    agents = start_agents(3, 1, port, env={"SLEEP": marker, "DONE_AFTER": str(done_after),
                                           "STARTED_DIR": up},
                          extra=["--no-python", "--term-timeout", "2", "--rdzv-conf", conf],
                          script=FAIL_SH)
    wait_started(up, 3, agents=agents)   # the job runs
    agents[0].proc.send_signal(signal.SIGSTOP)
    time.sleep(stop_s)   # the behaviour under test: the host stopped for this long
    agents[0].proc.send_signal(signal.SIGCONT)
    codes = wait_all(agents, timeout=60)
    assert no_leftovers(marker)[0]
    return agents, codes


def test_store_host_stopped_twice_the_window_is_not_lost(port):
    """The heartbeat window W is 0.2 s x 3 = 0.6 s here: a host stopped for 2 W, and again for
    5 W, is late, not lost; the job finishes."""
    conf = "keep_alive_interval=0.2"
    agents, codes = stopped_host(port, 1.2, conf, 5)
    assert codes == [0, 0, 0], [a.err for a in agents]
    agents, codes = stopped_host(free_port(), 3.0, conf, 6)
    assert codes == [0, 0, 0], [a.err for a in agents]


def test_store_host_stopped_past_the_hang_bound_ends_the_job(port):
    """Past the hang bound H (10 W = 6 s here) the host is hung: the other agents leave with the
    store-lost code and say so in their last line; the host, woken, finds them gone."""
    agents, codes = stopped_host(port, 8.0, "keep_alive_interval=0.2", 30)
    assert codes[1:] == [STORE_LOST, STORE_LOST], [a.err for a in agents]
    assert codes[0] == PEER_LOST, agents[0].err
    for a in agents[1:]:
        assert "did not answer" in a.err or "stopped answering" in a.err, a.err
        assert a.err.rstrip().splitlines()[-1].endswith(f"exit code {STORE_LOST}"), a.err
