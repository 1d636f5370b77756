"""Worker output: whole prefixed lines, nothing lost, per-rank log files, tee/redirects/filter."""
import os
import re
import select
import subprocess
import time

import pytest

from conftest import TORCH_PY
from cluster import PY, run, wait_for, worker

LINE = re.compile(r"^\[rank (\d+)\]:r=(\d+) i=(\d+) (x+)$")
ELINE = re.compile(r"^\[rank (\d+)\]:e r=(\d+) i=(\d+)$")


def check_flood(out, err, nproc, n):
    seen = {r: 0 for r in range(nproc)}
    tails = set()
    for line in out.split("\n")[:-1]:
        m = LINE.match(line)
        if not m:
            t = re.fullmatch(r"\[rank (\d+)\]:tail r=(\d+)", line)
            assert t and t.group(1) == t.group(2), f"mangled line: {line[:200]!r}"
            tails.add(int(t.group(1)))
            continue
        rank, r, i, pad = int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4)
        assert rank == r and len(pad) == rank * 7 + 3, line[:200]
        assert i == seen[rank], f"rank {rank}: line {i} after {seen[rank] - 1}"
        seen[rank] += 1
    assert seen == {r: n for r in range(nproc)}
    assert tails == set(range(nproc))        # partial last lines flushed, each on its own line
    assert out.endswith("\n")
    eseen = {r: 0 for r in range(nproc)}
    for line in err.splitlines():
        m = ELINE.match(line)
        if m:
            assert int(m.group(1)) == int(m.group(2)) and int(m.group(3)) == eseen[int(m.group(2))]
            eseen[int(m.group(2))] += 10
    assert eseen == {r: n for r in range(nproc)}


def test_8_workers_100k_lines_each_whole_and_complete(podrun):
    r = run(podrun, "--nproc-per-node", "8", *PY, worker("flood.py"), "100000", timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    check_flood(r.stdout, r.stderr, 8, 100000)


def pipe_full(pid, fd=1):
    """True when the pipe that process pid writes to on fd has no room left, as poll tells its
    writer (through a write end opened in /proc). Not a byte count: a loaded writer makes
    larger writes that each start a page, so a full pipe may hold well under its size."""
    w = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
    try:
        return not select.select([], [w], [], 0)[1]
    finally:
        os.close(w)


def blocked_writers(pid, n):
    """True when n of pid's children are blocked writing to a full pipe."""
    kids = []
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/children") as f:
            kids += f.read().split()
    blocked = 0
    for k in kids:
        try:
            with open(f"/proc/{k}/wchan") as f:
                blocked += "pipe_write" in f.read()
        except OSError:
            pass
    return blocked >= n


def test_slow_reader_loses_nothing(podrun):
    """podrun's stdout is a pipe nobody reads for a while: the workers are held back (their
    pipes fill up) instead of podrun buffering without bound or dropping lines."""
    e = dict(os.environ)
    p = subprocess.Popen([podrun, "--nproc-per-node", "4", *PY, worker("flood.py"), "50000"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
    try:
        # every pipe on the way fills up: podrun's stdout, then each worker's into podrun
        wait_for(lambda: pipe_full(p.pid), 60, "podrun's stdout pipe to fill up")
        wait_for(lambda: blocked_writers(p.pid, 4), 60, "the 4 workers to be held back")
        with open(f"/proc/{p.pid}/status") as f:
            rss_kib = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
        out, err = p.communicate(timeout=300)
    finally:   # a failed wait leaves no podrun blocked on a pipe nobody reads
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0
    check_flood(out.decode(), err.decode(), 4, 50000)
    assert rss_kib < 64 * 1024, f"podrun held {rss_kib} KiB while its reader was stalled"


def test_long_line_split_into_prefixed_chunks(podrun):
    n = 100000
    r = run(podrun, "--nproc-per-node", "2", "--no-python", TORCH_PY, "-c",
            f"import sys; sys.stdout.write('a' * {n} + '\\n' + 'b' * 10 + '\\n')")
    assert r.returncode == 0
    for rank in (0, 1):
        chunks = [l[len(f"[rank {rank}]:"):] for l in r.stdout.splitlines()
                  if l.startswith(f"[rank {rank}]:")]
        assert "".join(chunks[:-1]) == "a" * n and chunks[-1] == "b" * 10
        assert len(chunks) > 2                          # split, each piece prefixed


@pytest.mark.parametrize("char", ["\u00e9", "\u20ac", "\U0001F600"], ids=["2-byte", "3-byte", "4-byte"])
def test_long_line_split_between_utf8_characters(podrun, char):
    """A line of several 16 KiB buffers of 2-, 3- or 4-byte characters, offset so that the
    buffer's end falls inside a character: every piece is whole UTF-8, and they join to the
    line."""
    n = 100000 // len(char.encode())
    line = "x" + char * n
    r = subprocess.run([podrun, "--nproc-per-node", "1", "--no-python", TORCH_PY, "-c",
                        f"import sys; sys.stdout.buffer.write(b'x' + {char.encode()!r} * {n} "
                        f"+ b'\\n')"],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    chunks = [l[len(b"[rank 0]:"):] for l in r.stdout.split(b"\n") if l.startswith(b"[rank 0]:")]
    assert len(chunks) > 2
    text = [c.decode("utf-8") for c in chunks]   # strict: a cut inside a character fails here
    assert "".join(text) == line


PARTIAL = """
import os, sys, time
def wait(path):
    while not os.path.exists(path):
        time.sleep(0.05)   # the poll interval until the test opens the gate
if os.environ["RANK"] == "0":
    os.write(1, b"x\\xc3")            # half of an e-acute, and then silence
    wait(os.environ["GATE2"])
    os.write(1, b"\\xa9 end\\n")
else:
    wait(os.environ["GATE1"])
    os.write(1, b"other\\n")
"""


def test_partial_line_shown_whole_characters_only(podrun, tmp_path):
    """A partial line shown after its idle time, then cut by another worker's line: the piece
    on the console ends before a character that is not whole yet, and the rest comes whole."""
    gate1, gate2 = tmp_path / "g1", tmp_path / "g2"
    p = subprocess.Popen([podrun, "--nproc-per-node", "2", "--no-python", TORCH_PY, "-c",
                          PARTIAL], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env={**os.environ, "GATE1": str(gate1), "GATE2": str(gate2)})
    out = b""
    try:
        def seen(what):
            nonlocal out
            if select.select([p.stdout], [], [], 0.1)[0]:
                out += os.read(p.stdout.fileno(), 65536)
            return what in out
        wait_for(lambda: seen(b"[rank 0]:x"), 30, "rank 0's partial line")
        gate1.touch()
        wait_for(lambda: seen(b"[rank 1]:other\n"), 30, "rank 1's line")
        gate2.touch()
        rest, err = p.communicate(timeout=30)
    finally:
        p.kill()
    out += rest
    assert p.returncode == 0, err
    lines = out.split(b"\n")
    text = [l.decode("utf-8") for l in lines]   # strict: half a character fails here
    mine = [l[len("[rank 0]:"):] for l in text if l.startswith("[rank 0]:")]
    assert "".join(mine) == "x\u00e9 end", text


def test_log_dir_layout(podrun, tmp_path):
    r = run(podrun, "--nproc-per-node", "2", "--log-dir", str(tmp_path), "--rdzv-id", "run1",
            "sh", "-c", 'echo "out $RANK"; echo "err $RANK" >&2')
    assert r.returncode == 0, r.stderr
    for rank in (0, 1):
        d = tmp_path / "run1" / "attempt_0" / str(rank)
        assert (d / "stdout.log").read_text() == f"out {rank}\n"
        assert (d / "stderr.log").read_text() == f"err {rank}\n"
    assert "[rank 1]:out 1" in r.stdout                 # and still on the console


def test_redirects_and_tee_as_torchrun(podrun, tmp_path):
    # -r 1: stdout only to files; stderr stays on the console and gets no file
    r = run(podrun, "--nproc-per-node", "2", "--log-dir", str(tmp_path), "-r", "1",
            "sh", "-c", 'echo "out $RANK"; echo "err $RANK" >&2')
    assert "out" not in r.stdout and "[rank 0]:err 0" in r.stderr
    d = tmp_path / "none" / "attempt_0"
    assert (d / "0" / "stdout.log").read_text() == "out 0\n"
    assert not (d / "0" / "stderr.log").exists()
    # --tee 0:3,1:2 — rank 0 both streams to files and console, rank 1 only stderr to a file
    r = run(podrun, "--nproc-per-node", "2", "--log-dir", str(tmp_path / "t"), "--tee", "0:3,1:2",
            "sh", "-c", 'echo "out $RANK"; echo "err $RANK" >&2')
    d = tmp_path / "t" / "none" / "attempt_0"
    assert "[rank 0]:out 0" in r.stdout and "[rank 1]:out 1" in r.stdout
    assert (d / "0" / "stdout.log").read_text() == "out 0\n"
    assert (d / "0" / "stderr.log").read_text() == "err 0\n"
    assert (d / "1" / "stderr.log").read_text() == "err 1\n"
    assert not (d / "1" / "stdout.log").exists()
    # --redirects 3 without --log-dir: files in a temporary directory that podrun names
    r = run(podrun, "--redirects", "3", "sh", "-c", 'echo hidden')
    assert r.stdout == ""
    m = re.search(r"worker log files are in (\S+)", r.stderr)
    assert m and open(os.path.join(m.group(1), "0", "stdout.log")).read() == "hidden\n"


def test_local_ranks_filter(podrun, tmp_path):
    r = run(podrun, "--nproc-per-node", "3", "--local_ranks_filter", "0,2", "--log-dir",
            str(tmp_path), "sh", "-c", 'echo "out $RANK"')
    assert sorted(r.stdout.splitlines()) == ["[rank 0]:out 0", "[rank 2]:out 2"]
    assert (tmp_path / "none" / "attempt_0" / "1" / "stdout.log").read_text() == "out 1\n"


def test_prefix_template(podrun):
    r = run(podrun, "--nproc-per-node", "2", "--role", "trainer", "sh", "-c", "echo hi",
            env={"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "[${role_name}${local_rank}]:"})
    assert sorted(r.stdout.splitlines()) == ["[trainer0]:hi", "[trainer1]:hi"]


def test_no_temp_files_left_without_log_dir(podrun, tmp_path):
    r = run(podrun, "--nproc-per-node", "2", "true", env={"TMPDIR": str(tmp_path)})
    assert r.returncode == 0
    assert list(tmp_path.iterdir()) == []
    # each worker writes its error file, on both attempts (the first fails): none is left
    r = run(podrun, "--nproc-per-node", "2", "--max-restarts", "1", "sh", "-c",
            'echo "{}" > "$TORCHELASTIC_ERROR_FILE" && [ "$TORCHELASTIC_RESTART_COUNT" = 1 ]',
            env={"TMPDIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert "restarting" in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []


def test_stdout_closed_by_reader_does_not_hang(podrun):
    p = subprocess.Popen(f"{podrun} --nproc-per-node 2 sh -c 'yes | head -c 2000000' | head -n 1",
                         shell=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, _ = p.communicate(timeout=60)
    assert out.startswith(b"[rank ")


def test_stalled_reader_is_not_a_hang(podrun):
    """A worker blocked in write() because podrun's own stdout is behind (its reader stalled)
    is held back by podrun, not hung: --hang-timeout does not stop it."""
    p = subprocess.Popen([podrun, "--hang-timeout", "1", "--no-python", "sh", "-c",
                          "yes xxxxxxxxxxxxxxx | head -c 3000000"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(3)   # the behaviour under test: the reader stalls three hang timeouts long
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err.decode()
    assert b"hang" not in err
    assert len(out) > 3000000


def test_lost_output_is_said_on_the_other_stream(podrun, tmp_path):
    """stdout's reader went away: the loss is reported once on stderr and in the termination
    log, instead of vanishing."""
    term = tmp_path / "term"
    p = subprocess.Popen([podrun, "--termination-log", str(term), "--no-python", "sh", "-c",
                          "sleep 0.5; echo one; echo two"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()                          # the reader is gone before the worker writes
    err = p.stderr.read()
    p.wait(timeout=30)
    want = "bytes of worker output could not be written to stdout: Broken pipe"
    assert err.count(want) == 1, err
    assert want in term.read_text()


def read_until(fd, want, timeout=30):
    """Bytes from fd until `want` is among them (bounded)."""
    import select
    got = b""
    deadline = time.monotonic() + timeout
    while want not in got:
        left = deadline - time.monotonic()
        assert left > 0, f"waited for {want!r}, got {got!r}"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 4096)
            assert chunk, f"stdout closed before {want!r}: {got!r}"
            got += chunk
    return got


def test_progress_bar_shows_before_the_newline(podrun, tmp_path):
    """A progress bar ('\\r' redraws, as tqdm writes them) reaches the console as it is drawn,
    each redraw prefixed, while the worker is still inside the line: here it holds the line open
    until the test has seen the bar and writes to its FIFO."""
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    script = f"printf 'step 1\\r\\rprog 42%%'; read x < '{fifo}'; echo ' done'"
    p = subprocess.Popen([podrun, "sh", "-c", script], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        got = read_until(p.stdout.fileno(), b"prog 42%")
        assert got == b"[rank 0]:step 1\r\r[rank 0]:prog 42%", got
        with open(fifo, "w") as f:
            f.write("go\n")
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert got + out == b"[rank 0]:step 1\r\r[rank 0]:prog 42% done\n"
