"""torch's file-based timer watchdog (TORCHELASTIC_ENABLE_FILE_TIMER=1) under podrun: torch 1.13's
own FileTimerClient and expires() in real workers, podrun's agent as the FileTimerServer."""
import re

from cluster import PY, run, worker

HANG = 174   # --exit-code-hang: a timer's expiry is this node's hang
ON = {"TORCHELASTIC_ENABLE_FILE_TIMER": "1"}


def timers(podrun, nproc, env, *extra, timeout=90):
    return run(podrun, "--nproc-per-node", str(nproc), "--term-timeout", "5", *extra, *PY,
               worker("timer_worker.py"), env={**ON, **env}, timeout=timeout)


def root_cause(text):
    m = re.search(r"Root Cause.*?(?=\n=+|\Z)", text, re.S)
    assert m, text
    return m.group(0)


def test_expired_timer_kills_its_worker_and_is_the_root_cause(podrun):
    r = timers(podrun, 2, {"MODE": "overrun", "OVERRUN": "1", "AFTER": "1"})
    assert r.returncode == HANG, r.stderr
    assert "survived" not in r.stdout
    cause = root_cause(r.stderr)
    assert "rank      : 1" in cause and "timer 'step' expired after 1 s" in cause, cause
    assert "rank 1 (pid" in r.stderr and "failed: timer 'step' expired after 1 s" in r.stderr


def test_expired_timer_sends_the_signal_it_asked_for(podrun):
    r = timers(podrun, 1, {"MODE": "overrun", "OVERRUN": "0", "SIGNAL": "SIGUSR2",
                           "SCOPE": "data load"})
    assert "caught SIGUSR2 rank=0" in r.stdout, r.stdout + r.stderr
    assert "timer 'data load' expired" in root_cause(r.stderr)
    assert r.returncode == HANG


def test_released_timers_do_nothing(podrun):
    r = timers(podrun, 2, {"MODE": "release", "AFTER": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("done rank=") == 2
    assert "timer" not in r.stderr


def test_several_ranks_only_the_overrun_one_fails(podrun):
    r = timers(podrun, 4, {"MODE": "overrun", "OVERRUN": "2", "AFTER": "2"})
    assert r.returncode == HANG, r.stderr
    cause = root_cause(r.stderr)
    assert "rank      : 2" in cause and "timer 'step' expired after 2 s" in cause, cause
    assert "<NO_OTHER_FAILURES>" in r.stderr
    assert "survived" not in r.stdout


def test_dead_worker_holding_a_timer_leaves_no_stale_kill(podrun):
    # attempt 0: rank 1 exits 3 holding a 2 s timer; attempt 1 runs past it and succeeds
    r = timers(podrun, 2, {"MODE": "die", "DIE": "1", "AFTER": "2"}, "--max-restarts", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("done rank=") == 2
    assert "restarting the job in place" in r.stderr
    assert "expired" not in r.stderr
    assert "exit code 3" in r.stderr


def test_bad_requests_are_one_line_each_and_kill_nobody(podrun):
    r = timers(podrun, 1, {"MODE": "garbage", "AFTER": "1"})
    assert r.returncode == 0, r.stderr
    assert "done rank=0" in r.stdout
    assert "not torch's (not JSON)" in r.stderr
    assert "longer than 4096 bytes" in r.stderr
    assert "not torch's (no valid \"pid\")" in r.stderr
    assert r.stderr.count("not a process of this node's running workers") == 2
    assert "expired" not in r.stderr


def test_timer_file_path_given_is_used_and_removed(podrun, tmp_path):
    fifo = tmp_path / "timers.fifo"
    r = timers(podrun, 1, {"MODE": "release", "TORCHELASTIC_TIMER_FILE": str(fifo)})
    assert r.returncode == 0, r.stderr
    assert f"file={fifo}" in r.stdout
    assert not fifo.exists()


def test_timer_file_that_is_a_regular_file_is_refused(podrun, tmp_path):
    f = tmp_path / "precious"
    f.write_text("keep me")
    r = timers(podrun, 1, {"MODE": "release", "TORCHELASTIC_TIMER_FILE": str(f)})
    assert r.returncode != 0
    assert str(f) in r.stderr and "TORCHELASTIC_TIMER_FILE" in r.stderr
    assert f.read_text() == "keep me"


def test_without_the_variable_workers_get_no_timer_file(podrun):
    r = run(podrun, *PY, worker("env_dump.py"), "TORCHELASTIC_TIMER_FILE")
    assert r.returncode == 0, r.stderr
    assert '"TORCHELASTIC_TIMER_FILE": null' in r.stdout, r.stdout
