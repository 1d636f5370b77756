"""Helpers for the integration tests: run podrun or start it, wait — with a bound — for the event
a test needs (a line, a file, a process state) instead of sleeping for an assumed time (every
test's waits go through wait_for here), and several podrun agents on one machine, each on its own
loopback address (127.0.0.x) or in its own network namespace, for the multi-node, failure and
rendezvous tests. The worker programs the tests run are in workers/."""
import atexit
import contextlib
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time

from conftest import PODRUN, TORCH_PY

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "workers")
PY = ["--python", TORCH_PY]


def worker(name):
    return os.path.join(WORKERS, name)


def run(podrun, *args, env=None, timeout=60, **kw):
    """podrun ARGS to the end; returns the CompletedProcess (text)."""
    e = dict(os.environ)
    e.pop("OMP_NUM_THREADS", None)
    e.update(env or {})
    return subprocess.run([podrun, *args], env=e, capture_output=True, text=True,
                          timeout=timeout, **kw)


def start(podrun, *args, env=None, **kw):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.Popen([podrun, *args], env=e, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def wait_for(pred, timeout=30, what="the condition", every=0.05):
    """Calls pred until it returns something true and returns that; fails the test after
    timeout seconds, naming `what` (a string, or a function giving one)."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout}s for {what() if callable(what) else what}")
        time.sleep(every)   # the poll interval, not an assumed duration


def wait_file(path, text="", timeout=30):
    """Waits until the file at path exists and holds text; returns its content."""
    def content():
        try:
            with open(path, errors="replace") as f:
                s = f.read()
        except OSError:
            return None
        return s if text in s else None
    return wait_for(content, timeout, lambda: f"{text!r} in {path}")


def wait_files(d, n, timeout=60, pattern="*", alive=()):
    """Waits until directory d holds at least n entries matching pattern; returns their names.
    Fails at once when one of the processes in `alive` (Popen objects) has exited."""
    def files():
        for p in alive:
            assert p.poll() is None, f"process {p.args} exited early ({p.returncode})"
        names = sorted(os.path.basename(f) for f in glob.glob(os.path.join(str(d), pattern)))
        return names if len(names) >= n else None
    return wait_for(files, timeout, lambda: f"{n} files {pattern} in {d}: {os.listdir(d)}")


def wait_gone(pids, timeout=30):
    """Waits up to timeout s until none of pids is alive (gone, or a zombie); returns those
    still alive then (empty: all gone)."""
    try:
        wait_for(lambda: not any(pid_alive(p) for p in pids), timeout, "the processes to go")
    except AssertionError:
        pass
    return [p for p in pids if pid_alive(p)]


def wait_lines(proc, marker, count, timeout=30):
    """Reads proc's stdout until `count` lines contain marker; returns the lines read."""
    lines = []
    deadline = time.monotonic() + timeout
    while sum(marker in line for line in lines) < count:
        assert time.monotonic() < deadline, f"waited for {count}x {marker!r}: {lines}"
        line = proc.stdout.readline()
        assert line, f"podrun's stdout closed early: {lines} {proc.stderr.read()}"
        lines.append(line)
    return lines


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read()
    except OSError:
        return False
    return st[st.rindex(")") + 2] != "Z"


class Agent:
    """A podrun agent whose stdout and stderr go to files, so that a test can wait for a line
    while it runs (err_now, out_now, wait_err) and read all of it once it ended (out, err)."""

    def __init__(self, args, env=None, prefix=(), name=""):
        self.name = name
        e = dict(os.environ)
        e.update(env or {})
        self._files = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        self.proc = subprocess.Popen(list(prefix) + [PODRUN] + list(args), env=e,
                                     stdout=self._files[0], stderr=self._files[1],
                                     start_new_session=True)
        self.out = self.err = None

    def _read(self, i):
        f = self._files[i]
        return os.pread(f.fileno(), os.fstat(f.fileno()).st_size, 0).decode(errors="replace")

    def out_now(self):
        return self._read(0)

    def err_now(self):
        return self._read(1)

    def wait_err(self, text, timeout=60):
        """Waits until the agent's stderr holds text (failing at once if it exited first)."""
        def seen():
            if text in self.err_now():
                return True
            assert self.proc.poll() is None, \
                f"agent {self.name} exited ({self.proc.returncode}) before saying {text!r}:\n" \
                f"{self.err_now()}"
            return False
        wait_for(seen, timeout, lambda: f"{text!r} from agent {self.name}:\n{self.err_now()}")

    def wait(self, timeout=60):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()
            raise AssertionError(f"agent {self.name} still running after {timeout}s\n"
                                 f"stdout:\n{self.out_now()}\nstderr:\n{self.err_now()}")
        self.out, self.err = self.out_now(), self.err_now()
        return self.proc.returncode

    def signal(self, sig):
        self.proc.send_signal(sig)

    def kill(self):
        """SIGKILLs the agent's session while the agent is not reaped: once it is, its process
        group's number may belong to another session."""
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def agent_args(nnodes, nproc, endpoint, local_addr, run_id="job1", extra=(), script=None,
               script_args=()):
    args = ["--nnodes", str(nnodes), "--nproc-per-node", str(nproc),
            "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", run_id,
            "--local-addr", local_addr, "--python", TORCH_PY, *extra]
    args.append(script or os.path.join(WORKERS, "allreduce.py"))
    return args + list(script_args)


def start_agents(n, nproc, port, run_id="job1", extra=(), env=None, script=None,
                 order=None, before=None):
    """Starts n agents on 127.0.0.2 … 127.0.0.(n+1), in `order`, calling before[i](agents)
    before agent i (a wait for what the others must have done by then); the agent on
    127.0.0.2 (the endpoint) hosts the store."""
    endpoint = f"127.0.0.2:{port}"
    agents = [None] * n
    for i in (order or range(n)):
        if before and before.get(i):
            before[i]([a for a in agents if a])
        np = nproc[i] if isinstance(nproc, (list, tuple)) else nproc
        agents[i] = Agent(agent_args(n, np, endpoint,
                                     f"127.0.0.{2 + i}", run_id, extra, script),
                          env=env, name=f"node{i}")
    return agents


@contextlib.contextmanager
def killed_on_failure(agents):
    """Kills the agents (their sessions) when the block fails: a job whose workers wait for the
    test's word is not left running by a wait that failed."""
    try:
        yield
    except BaseException:
        for a in agents:
            a.kill()
        raise


def wait_all(agents, timeout=60):
    return [a.wait(timeout) for a in agents]


def result_lines(agents, tag="allreduce "):
    lines = []
    for a in agents:
        for line in (a.out or "").splitlines():
            if tag in line:
                lines.append(line[line.index(tag):])
    return lines


def parse_kv(line):
    return dict(p.split("=", 1) for p in line.split()[1:])


def leftovers(marker):
    """The processes whose command line contains `marker` (orphans and zombies included), each
    with its parent and process group, so that a leftover says who should have stopped it."""
    out = subprocess.run(["ps", "-eo", "pid,ppid,pgid,stat,args"], capture_output=True,
                         text=True).stdout
    return [l for l in out.splitlines() if marker in l and "ps -eo" not in l]


def no_leftovers(marker, timeout=10):
    """(True, []) once no process whose command line contains `marker` is alive, waiting up to
    timeout s for the last ones to be reaped; (False, those left) after that. The workers
    that carry a marker would run for minutes, so one left behind is still there then."""
    try:
        wait_for(lambda: not leftovers(marker), timeout, "the marked processes to go")
    except AssertionError:
        pass
    left = leftovers(marker)
    return not left, left


def started_dir():
    """A directory in which fail.sh workers say they run (their env: STARTED_DIR); removed when
    the test run ends."""
    d = tempfile.mkdtemp(prefix="podrun-started-")
    atexit.register(shutil.rmtree, d, True)
    return d


def wait_started(d, n, timeout=60, pattern="*", agents=()):
    """Waits until n fail.sh workers (pattern: e.g. "w3.*" for a world of 3) said they run."""
    return wait_files(d, n, timeout, pattern, alive=[a.proc for a in agents])


class Netns:
    """A tiny switched network: namespace `<prefix>sw` holds a bridge; each host namespace
    `<prefix>N` gets a veth to it and the address 10.250.0.(N+1)/24. Torn down on close()."""

    def __init__(self, prefix, n):
        self.prefix, self.n = prefix, n
        self.names = [f"{prefix}{i}" for i in range(n)]
        sw = f"{prefix}sw"
        self._run("ip", "netns", "add", sw)
        self._run("ip", "-n", sw, "link", "add", "br0", "type", "bridge")
        self._run("ip", "-n", sw, "link", "set", "br0", "up")
        for i, ns in enumerate(self.names):
            self._run("ip", "netns", "add", ns)
            self._run("ip", "-n", ns, "link", "set", "lo", "up")
            self._run("ip", "link", "add", f"{prefix}h{i}", "netns", ns, "type", "veth",
                      "peer", "name", f"{prefix}p{i}", "netns", sw)
            self._run("ip", "-n", sw, "link", "set", f"{prefix}p{i}", "master", "br0", "up")
            self._run("ip", "-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", f"{prefix}h{i}")
            self._run("ip", "-n", ns, "link", "set", f"{prefix}h{i}", "up")

    @staticmethod
    def addr(i):
        return f"10.250.0.{i + 1}"

    def prefix_cmd(self, i):
        return ["ip", "netns", "exec", self.names[i]]

    def link_down(self, i):
        self._run("ip", "-n", f"{self.prefix}sw", "link", "set", f"{self.prefix}p{i}", "down")

    def close(self):
        for ns in self.names + [f"{self.prefix}sw"]:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    @staticmethod
    def _run(*cmd):
        subprocess.run(cmd, check=True, capture_output=True)
