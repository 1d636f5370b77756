"""Stopping the workers: whom the stop signal reaches (--stop-signal-to), the line at the grace's
end, what the failure report and the termination log say about simultaneous failures, programs
that cannot start and processes left behind."""
import ctypes
import os
import re
import signal

import pytest

from conftest import TORCH_PY, free_port
from cluster import (Agent, agent_args, killed_on_failure, run, start, wait_all, wait_lines,
                     worker)

# a wrapper that does not forward signals: its child, the real worker, is not its last command,
# so no shell execs it in its place
WRAPPER = ('sh -c \'trap "echo child got TERM >> \\"$OUT\\"; exit 0" TERM; echo ready; '
           'while :; do sleep 0.05; done\'; echo wrapper done')


@pytest.mark.parametrize("mode", [None, "worker"])
def test_dataloader_trainer_saves_on_sigterm(podrun, tmp_path, mode):
    """torch 1.13's DataLoader(num_workers=2) processes are in the trainer's process group: a
    SIGTERM to the group kills them first and the trainer dies of it before it saves."""
    extra = ["--stop-signal-to", mode] if mode else []
    p = start(podrun, "--nproc-per-node", "2", "--term-timeout", "60", *extra, "--python",
              TORCH_PY, worker("ckpt_dataloader.py"), env={"OUT": str(tmp_path)})
    try:
        wait_lines(p, "ready", 2, timeout=120)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert p.returncode == 143, err
    assert sorted(f.name for f in tmp_path.iterdir()) == ["ckpt.0", "ckpt.1"], err
    assert "grace" not in err   # the trainers saved and exited within it


@pytest.mark.parametrize("mode", [None, "group"])
def test_wrapper_child_hears_the_stop(podrun, tmp_path, mode):
    got = tmp_path / "got"
    extra = ["--stop-signal-to", mode] if mode else []
    p = start(podrun, "--nproc-per-node", "2", "--term-timeout", "60", *extra, "sh", "-c",
              WRAPPER, env={"OUT": str(got)})
    wait_lines(p, "ready", 2)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert got.read_text().splitlines() == ["child got TERM"] * 2, err
    assert "grace" not in err


def test_worker_alone_leaves_wrapper_child_to_the_sigkill(podrun, tmp_path):
    """The trade-off of --stop-signal-to worker, and the line that says the grace ended."""
    got = tmp_path / "got"
    p = start(podrun, "--nproc-per-node", "2", "--term-timeout", "1", "--stop-signal-to",
              "worker", "sh", "-c", WRAPPER, env={"OUT": str(got)})
    wait_lines(p, "ready", 2)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert not got.exists()
    assert ("podrun: the 1.0s grace after SIGTERM passed; sending SIGKILL to "
            "rank 0 (local_rank 0)'s leftover processes, rank 1 (local_rank 1)'s leftover "
            "processes") in err, err


def test_grace_end_names_the_killed_ranks(podrun):
    p = start(podrun, "--nproc-per-node", "3", "--term-timeout", "0.5", "sh", "-c",
              '[ "$RANK" = 1 ] || trap "" TERM; echo ready; while :; do sleep 0.05; done')
    wait_lines(p, "ready", 3)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert ("the 0.5s grace after SIGTERM passed; sending SIGKILL to rank 0 (local_rank 0), "
            "rank 2 (local_rank 2)\n") in err, err


def test_grace_end_not_said_when_all_exit(podrun):
    p = start(podrun, "--nproc-per-node", "2", "--term-timeout", "30", "sh", "-c",
              'echo ready; while :; do sleep 0.05; done')
    wait_lines(p, "ready", 2)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143 and "grace" not in err, err


def test_stop_signal_to_bad_value(podrun):
    r = run(podrun, "--stop-signal-to", "leader", "true")
    assert r.returncode == 2
    assert "'worker-first', 'worker' or 'group'" in r.stderr
    r = run(podrun, "true", env={"PODRUN_STOP_SIGNAL_TO": "everyone"})
    assert r.returncode == 2 and "PODRUN_STOP_SIGNAL_TO" in r.stderr, r.stderr


def failures(err):
    m = re.search(r"^Failures:\n(.*?)^-{20,}", err, re.S | re.M)
    assert m, err
    return m.group(1)


def test_forwarded_sighup_killing_every_worker_lists_them_all(podrun):
    p = start(podrun, "--nproc-per-node", "3", "sh", "-c",
              'echo ready; while :; do sleep 0.05; done')
    wait_lines(p, "ready", 3)
    p.send_signal(signal.SIGHUP)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGHUP, err
    listed = failures(err)
    root = re.search(r"rank      : (\d)", err[err.index("Root Cause"):]).group(1)
    others = sorted(re.findall(r"rank      : (\d)", listed))
    assert sorted(others + [root]) == ["0", "1", "2"], err
    assert listed.count("exitcode  : -1 (SIGHUP)") == 2, err


def test_program_that_cannot_start_is_not_restarted(podrun, tmp_path):
    r = run(podrun, "--nproc-per-node", "2", "--max-restarts", "3", "no-such-program-anywhere",
            timeout=60)
    assert r.returncode == 127, r.stderr
    assert "restarting" not in r.stderr, r.stderr
    first = next(line for line in r.stderr.splitlines() if "failed" in line)
    assert "cannot run 'no-such-program-anywhere': No such file or directory" in first
    # both workers could not start: both are in the report
    assert "cannot run" in failures(r.stderr)
    f = tmp_path / "prog"
    f.write_text("#!/bin/sh\n")
    r = run(podrun, "--max-restarts", "3", str(f), timeout=60)
    assert r.returncode == 126 and "restarting" not in r.stderr, r.stderr
    assert f"cannot run '{f}': Permission denied" in r.stderr


def test_program_that_cannot_start_says_so_with_restarts_left(podrun, tmp_path):
    """Two nodes, --max-restarts 2, a program that is not there: the job's end (the store host's
    line) says that the program cannot start, not that no restarts are left."""
    endpoint = f"127.0.0.2:{free_port('127.0.0.2')}"
    agents = [Agent(agent_args(2, 1, endpoint, f"127.0.0.{2 + i}",
                               extra=["--max-restarts", "2", "--no-python"],
                               script="no-such-program-anywhere")) for i in range(2)]
    with killed_on_failure(agents):
        codes = wait_all(agents, 60)
    errs = "".join(a.err for a in agents)
    assert 127 in codes, errs
    assert "restarting" not in errs, errs
    assert "no restarts left" not in errs, errs
    assert re.search(r"job '\S+' stopped in round 0: .*cannot run 'no-such-program-anywhere'.* "
                     r"\(the program cannot start, so no restart is tried\)$", agents[0].err,
                     re.M), errs


def test_unwritable_log_dir_is_found_before_the_first_attempt(podrun, tmp_path):
    """`--log-dir` where nothing can be written: found before any worker starts, like a program
    that cannot start (no restart mends it), with the hint; nothing is restarted."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ran = tmp_path / "ran"
    # a file where the directory should be: unwritable for root too
    blocker = tmp_path / "file"
    blocker.write_text("")
    for log_dir in ([str(blocker / "logs")] if os.geteuid() == 0 else
                    [str(blocker / "logs"), str(ro / "logs")]):
        if os.geteuid() != 0:
            ro.chmod(0o555)
        r = run(podrun, "--nproc-per-node", "2", "--max-restarts", "2", "--log-dir", log_dir,
                "--no-python", "sh", "-c", f'echo x >> "{ran}"', timeout=60)
        assert r.returncode == 1, r.stderr
        assert "give --log-dir a writable directory" in r.stderr, r.stderr
        assert log_dir in r.stderr, r.stderr
        assert "restarting" not in r.stderr, r.stderr
        assert not ran.exists(), r.stderr
    # several nodes: each finds it before the first attempt, none restarts
    endpoint = f"127.0.0.2:{free_port('127.0.0.2')}"
    extra = ["--max-restarts", "2", "--log-dir", str(blocker / "logs"), "--no-python"]
    agents = [Agent(agent_args(2, 1, endpoint, f"127.0.0.{2 + i}", extra=extra, script="sh",
                               script_args=["-c", f'echo x >> "{ran}"'])) for i in range(2)]
    with killed_on_failure(agents):
        codes = wait_all(agents, 60)
    assert codes == [1, 1], [a.err for a in agents]
    for a in agents:
        assert "give --log-dir a writable directory" in a.err, a.err
        assert "restarting" not in a.err, a.err
    assert not ran.exists()


@pytest.mark.parametrize("args,title", [
    (["SCRIPT"], "fail_exit.py"),
    (["-m", "fail_exit"], "fail_exit"),
    (["--no-python", "sh", "-c", "exit 3"], "sh"),
])
def test_report_title_names_the_script(podrun, tmp_path, args, title):
    (tmp_path / "fail_exit.py").write_text("raise SystemExit(3)\n")
    args = [str(tmp_path / "fail_exit.py") if a == "SCRIPT" else a for a in args]
    r = run(podrun, "--python", TORCH_PY, *args, cwd=tmp_path,
            env={"PYTHONPATH": str(tmp_path)}, timeout=60)
    assert r.returncode == 3, r.stderr
    m = re.search(r"^(\S+) FAILED$", r.stderr, re.M)
    assert m and os.path.basename(m.group(1)) == title, r.stderr


def test_process_left_behind_is_in_the_termination_log(podrun, tmp_path):
    """A worker that cannot be reaped after SIGKILL (here: ptraced by this test, which holds its
    exit back from podrun as a process stuck in the kernel would)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    log = tmp_path / "termlog"
    pids = tmp_path / "pids"
    p = start(podrun, "--term-timeout", "0.5", "--termination-log", str(log), "sh", "-c",
              'echo $$ > "$OUT"; echo ready; while :; do sleep 0.05; done', env={"OUT": str(pids)})
    wait_lines(p, "ready", 1)
    pid = int(pids.read_text())
    PTRACE_SEIZE = 0x4206
    if libc.ptrace(PTRACE_SEIZE, pid, None, None) != 0:
        p.kill()
        pytest.skip(f"cannot ptrace: {os.strerror(ctypes.get_errno())}")
    try:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
        try:
            os.waitpid(pid, os.WNOHANG | 0x40000000)   # __WALL: release it
        except ChildProcessError:
            pass
    assert p.returncode == 143, err
    line = f"rank 0 (pid {pid}) did not exit 5.0s after SIGKILL"
    assert line in err, err
    text = log.read_text()
    assert text.startswith("podrun: stopped by SIGTERM; exit code 143\n"), text
    assert f"podrun: {line}" in text, text
