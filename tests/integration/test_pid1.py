"""podrun as PID 1 / subreaper: reaping orphans, forwarding signals, stopping the job."""
import os
import re
import shlex
import shutil
import signal
import subprocess

import pytest

from conftest import TORCH_PY
from cluster import (Agent, agent_args, killed_on_failure, no_leftovers, pid_alive, run, start,
                     wait_all, wait_file, wait_for, wait_gone, wait_lines, worker)

TRAP_TERM = ('trap \'echo "rank $RANK got TERM" >> "$OUT"; exit 0\' TERM; '
             'echo "ready $RANK"; while :; do sleep 0.05; done')


def can_unshare():
    return subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                          capture_output=True).returncode == 0


@pytest.mark.skipif(not can_unshare(), reason="needs unshare --pid (root)")
def test_pid1_reaps_100_orphaned_grandchildren(podrun):
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", podrun, "--python",
                        TORCH_PY, worker("orphans.py"), "100"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "[rank 0]:reaper=1 orphans=100" in r.stdout, r.stdout   # podrun is PID 1
    assert "[rank 0]:alive=0 zombies=0" in r.stdout, r.stdout


def test_subreaper_reaps_100_orphaned_grandchildren(podrun):
    r = run(podrun, "--python", TORCH_PY, worker("orphans.py"), "100")
    assert r.returncode == 0, r.stderr
    m = re.search(r"^\[rank 0\]:reaper=(\d+) orphans=(\d+)$", r.stdout, re.M)
    assert m and int(m.group(2)) == 100, r.stdout   # re-parented to podrun, not to init
    assert "[rank 0]:alive=0 zombies=0" in r.stdout, r.stdout


@pytest.mark.skipif(not can_unshare(), reason="needs unshare --pid (root)")
def test_pid1_sigterm_stops_job_143(podrun, tmp_path):
    out = tmp_path / "got"
    p = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child=SIGTERM",
                          podrun, "--nproc-per-node", "2", "sh", "-c", TRAP_TERM],
                         env={**os.environ, "OUT": str(out)}, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        wait_lines(p, "ready", 2)
        # podrun is unshare's child, PID 1 in the new namespace: a PID 1 gets only the signals
        # it installed handlers for, so this checks that podrun did
        with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
            pid1 = int(f.read().split()[0])
        os.kill(pid1, signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert p.returncode == 143, err
    assert sorted(out.read_text().splitlines()) == ["rank 0 got TERM", "rank 1 got TERM"]


def test_sigterm_forwarded_to_every_group_exit_143(podrun, tmp_path):
    out = tmp_path / "got"
    p = start(podrun, "--nproc-per-node", "3", "sh", "-c",
              'sleep 300 & echo "$!" >> "$OUT.kids"; ' + TRAP_TERM, env={"OUT": str(out)})
    wait_lines(p, "ready", 3)
    kids = [int(x) for x in open(f"{out}.kids").read().split()]
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 143, err
    assert sorted(out.read_text().splitlines()) == [f"rank {i} got TERM" for i in range(3)]
    assert "got SIGTERM; stopping 3 workers" in err
    # the whole process group got it: the background sleeps are gone too
    assert not any(pid_alive(k) for k in kids)


def test_sigint_exit_130(podrun, tmp_path):
    p = start(podrun, "--nproc-per-node", "2", "sh", "-c",
              'trap "exit 0" INT; echo ready; while :; do sleep 0.05; done')
    wait_lines(p, "ready", 2)
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=30)
    assert p.returncode == 130


def test_worker_ignoring_sigterm_is_sigkilled_after_grace(podrun, tmp_path):
    pids = tmp_path / "pids"
    p = start(podrun, "--nproc-per-node", "2", "--term-timeout", "0.5", "sh", "-c",
              'trap "" TERM; echo $$ >> "$OUT"; echo ready; exec sleep 300',
              env={"OUT": str(pids)})
    wait_lines(p, "ready", 2)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 143, err
    assert "SIGKILL after 0.5s" in err
    for pid in map(int, pids.read_text().split()):
        assert not pid_alive(pid)


def test_second_sigterm_kills_at_once(podrun, tmp_path):
    p = start(podrun, "--term-timeout", "300", "sh", "-c",
              'trap "" TERM; echo ready; exec sleep 300')
    wait_lines(p, "ready", 1)
    p.send_signal(signal.SIGTERM)
    for line in iter(p.stderr.readline, ""):   # podrun's notices, then "got SIGTERM; stopping
        if "got SIGTERM" in line:              # …": the stop has begun
            break
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 143
    assert "got SIGTERM again; sending SIGKILL now" in err


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2])
def test_other_signals_forwarded_to_groups(podrun, sig):
    name = signal.Signals(sig).name[3:]
    p = start(podrun, "--nproc-per-node", "2", "sh", "-c",
              f'trap "echo got-{name}; exit 0" {name}; echo ready; while :; do sleep 0.05; done')
    wait_lines(p, "ready", 2)
    p.send_signal(sig)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert sorted(re.findall(rf"^\[rank (\d)\]:got-{name}$", out, re.M)) == ["0", "1"]


def test_nohup_hangup_reaches_neither_podrun_nor_workers(podrun, tmp_path):
    """Under nohup, SIGHUP was ignored on purpose: not forwarded, and still ignored by the
    workers when the terminal's hangup reaches their groups."""
    go = tmp_path / "go"
    p = subprocess.Popen(["nohup", podrun, "--nproc-per-node", "2", "sh", "-c",
                          'echo "ready $$"; while [ ! -e "$GO" ]; do sleep 0.05; done; echo done'],
                         env={**os.environ, "GO": str(go)}, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        lines = wait_lines(p, "ready", 2)
        p.send_signal(signal.SIGHUP)
        for pid in re.findall(r"ready (\d+)", "".join(lines)):   # each worker leads its group
            os.killpg(int(pid), signal.SIGHUP)
        go.touch()
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert p.returncode == 0, err
    assert sorted(re.findall(r"^\[rank (\d)\]:done$", out, re.M)) == ["0", "1"], out


def test_failure_stops_siblings_and_their_children(podrun, tmp_path):
    kids = tmp_path / "kids"
    r = run(podrun, "--nproc-per-node", "3", "sh", "-c",
            'sleep 300 & echo $! >> "$OUT"; [ "$RANK" = 0 ] && { sleep 0.3; exit 4; }; wait',
            env={"OUT": str(kids)}, timeout=30)
    assert r.returncode == 4, r.stderr
    for pid in map(int, kids.read_text().split()):
        assert not pid_alive(pid)


def test_leftover_processes_after_success_are_stopped(podrun, tmp_path):
    kids = tmp_path / "kids"
    r = run(podrun, "--nproc-per-node", "2", "--term-timeout", "1", "sh", "-c",
            'sleep 300 & echo $! >> "$OUT"; exit 0', env={"OUT": str(kids)}, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "left processes in its group" in r.stderr
    kid = kids.read_text().split()
    # each rank's leftovers by pid and name ("sh" until the forked shell has exec'd sleep)
    for rank in (0, 1):
        assert re.search(rf"rank {rank} \(local_rank {rank}\): \d+ \((sleep|sh)\)", r.stderr), \
            r.stderr
    for pid in map(int, kid):
        assert str(pid) in r.stderr, r.stderr
        assert not pid_alive(pid)


ZOMBIE = """
import os, time
pid = os.fork()
if pid == 0:
    os._exit(0)
# exit only once the child is a zombie nobody reaped: podrun adopts it with this exit
while open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
    time.sleep(0.01)   # the poll interval until the child is a zombie
print("left a zombie", flush=True)
"""


def test_zombie_left_by_a_worker_is_no_leftover(podrun, tmp_path):
    """A worker that exits leaving an unreaped child: the zombie comes to podrun with the
    worker's exit and is reaped, not taken for processes left in the worker's group."""
    script = tmp_path / "zombie.py"
    script.write_text(ZOMBIE)
    r = run(podrun, "--nproc-per-node", "2", "--python", TORCH_PY, str(script), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("left a zombie") == 2, r.stdout
    assert "left processes" not in r.stderr, r.stderr
    assert "stopping" not in r.stderr, r.stderr


def test_podrun_killed_takes_workers_with_it(podrun, tmp_path):
    pids = tmp_path / "pids"
    p = start(podrun, "--nproc-per-node", "2", "sh", "-c",
              'echo $$ >> "$OUT"; echo ready; exec sleep 300', env={"OUT": str(pids)})
    wait_lines(p, "ready", 2)
    p.kill()
    p.communicate(timeout=30)
    ws = list(map(int, pids.read_text().split()))
    assert wait_gone(ws, 10) == []


def can_strace():
    return shutil.which("strace") and subprocess.run(
        ["strace", "-qq", "-o", os.devnull, "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not can_strace(), reason="needs strace, allowed to trace")
def test_podrun_killed_before_it_ran_again_after_the_spawn_takes_the_workers_child(podrun,
                                                                                   tmp_path):
    """podrun is SIGKILLed once its worker has started a child, before podrun itself ran one
    more line (as on a busy machine, where the worker may run first): the worker's child goes
    with it too. strace holds podrun at the end of every clone after the first (the guard's
    fork), so the worker's clone has not returned when podrun is killed; strace is killed
    next, as a tracer holds its dying tracee until it lets it go."""
    marker = f"304.{os.getpid()}"
    agent = tmp_path / "agent"
    p = subprocess.Popen(["strace", "-qq", "-o", os.devnull, "-e", "trace=clone",
                          "-e", "inject=clone:delay_exit=300000000:when=2+", podrun,
                          "--no-python", "sh", "-c",
                          f'sleep {marker} & echo $PPID > "{agent}.new" && mv "{agent}.new" '
                          f'"{agent}"; wait'],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        os.kill(int(wait_file(agent, "\n")), signal.SIGKILL)
        p.kill()
        p.wait(timeout=30)
        clean, left = no_leftovers(marker)
        assert clean, f"left behind: {left}"
    finally:
        if p.poll() is None:   # strace's session: podrun too, held by it
            os.killpg(p.pid, signal.SIGKILL)
        for line in no_leftovers(marker, timeout=0)[1]:
            os.kill(int(line.split()[0]), signal.SIGKILL)


def guard_of(pid):
    """The guard process that podrun `pid` started: its child named podrun-guard."""
    def find():
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                kids = f.read().split()
        except OSError:
            return None
        for k in kids:
            try:
                with open(f"/proc/{k}/comm") as f:
                    if f.read().strip() == "podrun-guard":
                        return int(k)
            except OSError:
                pass
        return None
    return wait_for(find, 30, f"the guard of podrun {pid}")


def test_workers_start_with_the_guard_gone(port):
    """The guard is killed before the first worker starts (node0 waits for node1 meanwhile):
    the workers run without it, as where it could not be started, and are not killed by the
    SIGPIPE of telling a guard that is gone."""
    endpoint = f"127.0.0.2:{port}"
    node = [agent_args(2, 1, endpoint, f"127.0.0.{2 + i}", extra=["--no-python"],
                       script="true") for i in range(2)]
    agents = [Agent(node[0], name="node0")]
    with killed_on_failure(agents):
        guard = guard_of(agents[0].proc.pid)
        os.kill(guard, signal.SIGKILL)
        assert wait_gone([guard]) == []
        agents.append(Agent(node[1], name="node1"))
        codes = wait_all(agents)
    assert codes == [0, 0], [a.err for a in agents]


def test_descendant_that_left_its_group_goes_with_the_job(podrun):
    """A worker's child that made itself a session of its own (a daemon) is adopted by podrun
    as subreaper and stopped when the job ends: nothing outlives podrun."""
    marker = f"303.{os.getpid()}"
    r = run(podrun, "--no-python", "sh", "-c",
            f"setsid sleep {marker} & echo started; sleep 0.3", timeout=30)
    assert r.returncode == 0, r.stderr
    out = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
    assert out.stdout.strip() == "", "left behind: " + out.stdout


def test_stray_daemon_gets_its_grace(podrun, tmp_path):
    """A daemon (setsid) in its TERM handler gets its whole grace: an orphan it leaves, reaped
    by podrun meanwhile, does not end the grace early."""
    ready, done = tmp_path / "ready", tmp_path / "done"
    daemon = (f"trap '(sleep 0.1 &); sleep 0.5; echo flushed > \"{done}\"; exit 0' TERM; "
              f"touch \"{ready}\"; while :; do sleep 0.05; done")
    r = run(podrun, "--no-python", "sh", "-c",
            f"setsid sh -c {shlex.quote(daemon)} & "
            f"while [ ! -e \"{ready}\" ]; do sleep 0.01; done", timeout=30)
    assert r.returncode == 0, r.stderr
    assert done.exists() and done.read_text() == "flushed\n", r.stderr
    assert "after SIGTERM" not in r.stderr, r.stderr


def test_stray_daemon_ignoring_sigterm_is_named_and_killed(podrun, tmp_path):
    """A daemon that ignores SIGTERM: after its grace one line names it, then SIGKILL."""
    ready, pidf = tmp_path / "ready", tmp_path / "pid"
    daemon = (f"trap '' TERM; echo $$ > \"{pidf}\"; touch \"{ready}\"; "
              f"while :; do sleep 0.05; done")
    r = run(podrun, "--no-python", "sh", "-c",
            f"setsid sh -c {shlex.quote(daemon)} & "
            f"while [ ! -e \"{ready}\" ]; do sleep 0.01; done", timeout=30)
    assert r.returncode == 0, r.stderr
    pid = int(pidf.read_text())
    line = [x for x in r.stderr.splitlines() if "after SIGTERM" in x]
    assert line == [f"podrun: 1 process that left its worker's group still there 1.0s after "
                    f"SIGTERM: {pid} (sh); sending SIGKILL"], r.stderr
    assert wait_gone([pid], 10) == []


REAPER = r"""
import ctypes, os, subprocess, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)   # PR_SET_CHILD_SUBREAPER
rc = subprocess.run(sys.argv[1:]).returncode
# whatever podrun left is this process's child from the moment podrun exited (alive or zombie)
left = []
for t in os.listdir("/proc/self/task"):
    with open(f"/proc/self/task/{t}/children") as f:
        for pid in f.read().split():
            with open(f"/proc/{pid}/stat") as s:
                left.append(s.read().split(")")[0].split("(")[-1] + " " + pid)
print(rc, ",".join(left))
"""


def test_no_zombie_left_to_the_reaper_after_podrun(podrun):
    """podrun reaps its own helper processes before it exits: whoever reaps after it (the real
    init, a subreaper above it) finds none of them, not even as zombies."""
    out = subprocess.run([TORCH_PY, "-c", REAPER, podrun, "--nproc-per-node", "2", "true"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.split(" ", 1) == ["0", "\n"], out.stdout + out.stderr
