"""The stacks of hung workers before the kill (doc/failures.md#stacks-before-the-kill): real
torch 1.13 and 2.15 workers stuck in a sleep, in a gloo collective and in C code, killed by
--hang-timeout after podrun gathered where each rank was; a worker that does not answer is killed
all the same, within the bound; a worker's own sitecustomize still runs; a normal run shows and
leaves nothing of it."""
import os
import re
import signal
import subprocess

import pytest

from cluster import WORKERS
from conftest import PODRUN, TORCH_PY, VENV_PY

STUCK = os.path.join(WORKERS, "stuck.py")
HANG = 174
BOUND = 2.0   # STACKS_BOUND_MS
GATHERED = re.compile(r"podrun: the stacks of (\d+) workers? before the kill \(([\d.]+)s\), "
                      r"in (\S+):")
PYTHONS = [pytest.param(TORCH_PY, id="torch1.13"), pytest.param(VENV_PY, id="torch2.15")]


def line_of(text):
    """stuck.py's line number holding text."""
    with open(STUCK) as f:
        return next(i for i, l in enumerate(f, 1) if text in l)


def run(tmp_path, args, env=None, hang="3", timeout=120):
    """podrun with --hang-timeout on 2 local workers; (rc, stderr, termination log)."""
    term = tmp_path / "term"
    (tmp_path / "logs").mkdir(exist_ok=True)   # the timers' FIFO is made before the run's dirs
    e = dict(os.environ, **(env or {}))
    p = subprocess.run([PODRUN, "--hang-timeout", hang, "--nproc-per-node", "2",
                        "--termination-log", str(term), "--log-dir", str(tmp_path / "logs"),
                        "--no-python", *args], capture_output=True, text=True, env=e,
                       timeout=timeout, cwd=tmp_path)
    return p.returncode, p.stdout + p.stderr, term.read_text() if term.exists() else ""


def gathered(out, n=2):
    """(seconds the gather took, the stacks file's text) from podrun's line about it."""
    m = GATHERED.search(out)
    assert m, out
    assert int(m.group(1)) == n and os.path.isfile(m.group(3)), out
    with open(m.group(3)) as f:
        return float(m.group(2)), m.group(3), f.read()


def named(out, term, path, lines):
    """Each rank's line is in the failure report and in the termination log, with the file."""
    for l in lines:
        assert f"podrun: {l}" in out, out
        assert f"podrun: {l}" in term, term
    assert f"podrun: stacks in {path}" in out and f"podrun: stacks in {path}" in term, term


@pytest.mark.parametrize("py", PYTHONS)
def test_stacks_of_a_sleep(tmp_path, py):
    rc, out, term = run(tmp_path, [py, STUCK], {"HOW": "sleep"})
    assert rc == HANG, out
    took, path, text = gathered(out)
    assert took <= BOUND, out
    n = line_of("time.sleep(100000)")
    assert f'stuck.py", line {n} in sleep_forever' in text, text
    assert path.startswith(str(tmp_path / "logs")), path
    named(out, term, path, [f"rank {r} was in sleep_forever at stuck.py:{n}" for r in (0, 1)])
    assert "wchan" in text and "syscall" in text, text
    for r in (0, 1):   # each rank's section is in its own log too: its file and its console lines
        log = (tmp_path / "logs" / "none" / "attempt_0" / str(r) / "stderr.log").read_text()
        assert f"--- rank {r} " in log and f"line {n} in sleep_forever" in log, log
        assert f"[rank {r}]:--- rank {r} " in out, out


@pytest.mark.parametrize("py", PYTHONS)
def test_stacks_of_a_gloo_collective(tmp_path, py):
    """Rank 0 waits in all_reduce for rank 1, which never joins: both ranks' stacks say so."""
    rc, out, term = run(tmp_path, [py, STUCK], {"HOW": "collective"}, hang="10")
    assert rc == HANG, out
    took, path, text = gathered(out)
    assert took <= BOUND, out
    named(out, term, path, [
        f"rank 0 was in all_reduce at stuck.py:{line_of('dist.all_reduce(t)')}",
        f"rank 1 was in never_join at stuck.py:{line_of('time.sleep(100000)') + 4}"])


@pytest.mark.parametrize("py", PYTHONS)
def test_stacks_of_c_code(tmp_path, py):
    """Stuck in libc's pause(): faulthandler answers from its signal handler all the same, and
    /proc says which syscall (pause, 34 on x86_64) and where in the kernel it sleeps."""
    rc, out, term = run(tmp_path, [py, STUCK], {"HOW": "native"})
    assert rc == HANG, out
    took, path, text = gathered(out)
    assert took <= BOUND, out
    n = line_of(".pause()")
    named(out, term, path, [f"rank {r} was in native_pause at stuck.py:{n}" for r in (0, 1)])
    assert re.search(r"pid \d+ \(python3?\) state S, syscall \d+", text), text


def test_a_worker_that_does_not_answer_is_killed_at_the_bound(tmp_path):
    """It catches the trigger and does nothing: the kill waits the bound, no longer."""
    rc, out, term = run(tmp_path, [TORCH_PY, STUCK], {"HOW": "deaf"})
    assert rc == HANG, out
    took, path, text = gathered(out)
    assert BOUND <= took <= BOUND + 0.5, out
    assert text.count("no Python stack came within the bound") == 2, text
    assert "rank 0 showed no Python stack; pid" in term, term


def test_a_native_worker(tmp_path):
    """No Python at all: the trigger is not sent (it would kill); /proc's line stands in."""
    rc, out, term = run(tmp_path, ["sh", "-c", "echo stuck; exec sleep 1000"])
    assert rc == HANG, out
    took, path, text = gathered(out)
    assert took <= BOUND and "no process catches the trigger" in text, out
    assert re.search(r"rank 0 showed no Python stack; pid \d+ \(sleep\) state S, syscall \d+",
                     term), term


def test_the_users_sitecustomize_runs_and_a_normal_run_shows_nothing(tmp_path):
    """A worker's own sitecustomize (on its PYTHONPATH) still runs, and stacks still come; a run
    that does not hang prints nothing about stacks and leaves no file of them."""
    site = tmp_path / "usersite"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['usersite_marker'] = sys\n")
    # a long PYTHONPATH is kept whole, the user's directory at its end included
    env = {"HOW": "sleep", "PYTHONPATH": ":".join(["/nonexistent/x" * 20] * 40 + [str(site)])}
    rc, out, term = run(tmp_path, [TORCH_PY, STUCK], env)
    assert rc == HANG and out.count("user-site ran") == 2, out
    gathered(out)

    ok = tmp_path / "ok"
    ok.mkdir()
    rc, out, _ = run(ok, [TORCH_PY, "-c", "import sys; print('fine', 'usersite_marker' in "
                          "sys.modules)"], {"PYTHONPATH": str(site)})
    assert rc == 0 and out.count("fine True") == 2, out
    assert "stack" not in out.lower(), out
    left = [os.path.join(d, f) for d, _, fs in os.walk(ok / "logs") for f in fs]
    assert not [f for f in left if "stack" in f or "podrun_site" in f], left
    assert not any(".podrun_site" in d for d in os.listdir(ok / "logs")), os.listdir(ok / "logs")


@pytest.mark.parametrize("py", PYTHONS)
def test_stacks_before_a_torch_timers_kill(tmp_path, py):
    """torch's file timer expired in rank 1: the stacks come first, then the timer's SIGKILL."""
    tw = os.path.join(WORKERS, "timer_worker.py")
    env = {"TORCHELASTIC_ENABLE_FILE_TIMER": "1", "MODE": "overrun", "OVERRUN": "1",
           "AFTER": "1"}
    rc, out, term = run(tmp_path, [py, tw], env, hang="60")
    assert rc == HANG and "survived" not in out, out
    took, path, text = gathered(out)
    assert took <= BOUND, out
    with open(tw) as f:
        n = next(i for i, l in enumerate(f, 1) if "time.sleep(after + 30)   # far past" in l)
    named(out, term, path, [f"rank 1 was in <module> at timer_worker.py:{n}"])
    assert out.index("the stacks of 2 workers") < out.index("failed: timer 'step' expired"), out


def test_stacks_before_the_sigkill_of_a_stop(tmp_path):
    """SIGTERM to podrun; the workers ignore it: when the grace has passed their stacks come,
    then the SIGKILL."""
    term = tmp_path / "term"
    (tmp_path / "logs").mkdir()
    p = subprocess.Popen([PODRUN, "--hang-timeout", "300", "--term-timeout", "1",
                          "--nproc-per-node", "2", "--termination-log", str(term), "--log-dir",
                          str(tmp_path / "logs"), "--no-python", TORCH_PY, STUCK],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(os.environ, HOW="sleep", IGNORE_TERM="1"))
    try:
        seen = []
        while sum("stuck" in l for l in seen) < 2:
            line = p.stdout.readline()
            assert line, "".join(seen)
            seen.append(line)
        p.send_signal(signal.SIGTERM)
        out = "".join(seen) + p.stdout.read()
        assert p.wait(timeout=60) == 143, out
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    took, path, text = gathered(out)
    assert path.endswith("stacks_at_sigkill.txt") and took <= BOUND, out
    assert out.index("grace after SIGTERM passed") < out.index("the stacks of 2 workers"), out
    n = line_of("time.sleep(100000)")
    assert text.count(f"line {n} in sleep_forever") == 2, text
    lines = [f"rank {r} was in sleep_forever at stuck.py:{n}" for r in (0, 1)]
    # a stop by a signal writes no failure report; a termination log, when there is one, says it
    named(out, term.read_text() if term.exists() else out, path, lines)
