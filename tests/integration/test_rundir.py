"""The run directory where the root file system is read-only and /tmp cannot be written."""
import subprocess

import pytest

from conftest import TORCH_PY
from cluster import worker


def can_unshare_mount():
    return subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode == 0


def run_with_readonly(podrun, *args, dirs=("/tmp",), env=("-u", "TMPDIR")):
    """podrun ARGS in a private mount namespace where each of dirs is a read-only bind of
    itself, under `env ENV...`."""
    ro = " && ".join(f"mount --bind {d} {d} && mount -o remount,bind,ro {d}" for d in dirs)
    script = (f"mount --make-rprivate / && {ro} && "
              "! touch /tmp/podrun-rw-probe 2>/dev/null && exec env \"$@\"")
    return subprocess.run(["unshare", "--mount", "sh", "-c", script, "sh", *env, podrun, *args],
                          capture_output=True, text=True, timeout=120)


FALLBACK = ("cannot create the run directory under /tmp (Read-only file system); using "
            "/dev/shm/podrun_")


@pytest.mark.skipif(not can_unshare_mount(), reason="needs unshare --mount (root)")
def test_readonly_tmp_falls_back_and_the_job_runs(podrun):
    r = run_with_readonly(podrun, "--nproc-per-node", "2", "sh", "-c",
                          'echo "rank $RANK error file in $TORCHELASTIC_ERROR_FILE"')
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("cannot create the run directory") == 1, r.stderr
    assert FALLBACK in r.stderr, r.stderr
    for rank in (0, 1):
        assert f"rank {rank} error file in /dev/shm/podrun_" in r.stdout, r.stdout


@pytest.mark.skipif(not can_unshare_mount(), reason="needs unshare --mount (root)")
def test_readonly_tmp_error_file_still_reaches_the_report(podrun):
    # the fallback directory really holds the workers' files: the error file is read back
    r = run_with_readonly(podrun, "--nproc-per-node", "2", "--term-timeout", "5",
                          "--python", TORCH_PY, worker("fail_record.py"))
    assert r.returncode == 1, r.stderr
    assert FALLBACK in r.stderr, r.stderr
    assert "RuntimeError: boom from rank 1" in r.stderr, r.stderr
    assert "traceback : Traceback (most recent call last):" in r.stderr, r.stderr


@pytest.mark.skipif(not can_unshare_mount(), reason="needs unshare --mount (root)")
def test_unwritable_tmpdir_falls_back_too(podrun):
    r = run_with_readonly(podrun, "true", env=("TMPDIR=/proc/podrun-nowhere",))
    assert r.returncode == 0, r.stderr
    assert ("cannot create the run directory under /proc/podrun-nowhere (No such file or "
            "directory); using /dev/shm/podrun_") in r.stderr, r.stderr


@pytest.mark.skipif(not can_unshare_mount(), reason="needs unshare --mount (root)")
def test_no_writable_place_names_the_fix(podrun):
    r = run_with_readonly(podrun, "true", dirs=("/tmp", "/dev/shm", "/var/tmp", "/run"))
    assert r.returncode == 1, r.stderr
    line = ("podrun: cannot start the job: cannot create the run directory under /tmp (Read-only "
            "file system), nor under /dev/shm, /var/tmp or /run; set TMPDIR to a writable "
            "directory (in Kubernetes, mount an emptyDir there)\n")
    assert r.stderr == line, r.stderr   # one line, the last: the reason and the fix


@pytest.mark.skipif(not can_unshare_mount(), reason="needs unshare --mount (root)")
def test_log_dir_on_a_readonly_path_reports_no_pid_nor_exit_code(podrun, tmp_path):
    """No worker can start, found before the first attempt: nothing claims a worker ran (no
    pid, no exit code), and the last line and the termination log give the reason and the fix."""
    ro, term = tmp_path / "ro", tmp_path / "term"
    ro.mkdir()
    term.write_text("")
    script = (f"mount --make-rprivate / && mount --bind {ro} {ro} && "
              f"mount -o remount,bind,ro {ro} && ! touch {ro}/probe 2>/dev/null && exec \"$@\"")
    r = subprocess.run(["unshare", "--mount", "sh", "-c", script, "sh", podrun,
                        "--nproc-per-node", "2", "--log-dir", str(ro / "logs"),
                        "--termination-log", str(term), "true"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    text = r.stderr + term.read_text()
    for bad in ("pid", "exit code", "exitcode", "rank 0"):
        assert bad not in text, (bad, text)
    why = (f"podrun: cannot start the job: cannot create the run directory under {ro}/logs: "
           "Read-only file system; give --log-dir a writable directory")
    assert r.stderr.rstrip("\n").split("\n")[-1] == why, r.stderr
    assert term.read_text().strip() == why, term.read_text()
