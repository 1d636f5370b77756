"""Who hosts the job store, who joins it. An endpoint that is one of this node's own addresses (or
a name for one, on any of its interfaces) is hosted there without --local-addr, as torchrun does;
a second agent of the same run on that machine, which also took itself for the host, joins the
store the first one bound (Paddle's two-launchers-on-one-host tests); an agent of another run is
told the port is taken. Every agent connects from its advertised address, so an allow-list of the
agents' addresses admits them, and one outside it is told so, a few times, not hundreds."""
import os
import re
import shutil
import socket
import subprocess

from cluster import WORKERS, Agent, Netns, agent_args, parse_kv, result_lines, wait_all, wait_for
from conftest import PODRUN, TORCH_PY, free_port

ENV_SH = os.path.join(WORKERS, "env.sh")
PADDLE_ENV = os.path.join(WORKERS, "paddle_env.py")
GUEST = "joining the job store that another agent of this run hosts on this machine"


def plain_agent(nnodes, endpoint, extra=(), prefix=(), name="", run_id="job1"):
    """torchrun's bare-metal command line: the endpoint, and no --local-addr."""
    args = ["--nnodes", str(nnodes), "--nproc-per-node", "1", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", endpoint, "--rdzv-id", run_id, "--no-python", *extra, ENV_SH]
    return Agent(args, prefix=prefix, name=name)


def ranks(agents):
    return sorted(int(parse_kv(l)["rank"]) for l in result_lines(agents, "env "))


def test_endpoint_is_own_interface_address(port):
    """`--rdzv-endpoint 10.250.0.1:PORT` on the node that owns 10.250.0.1 (not loopback): that
    node hosts; the other joins it."""
    net = Netns(f"ph{os.getpid()}n", 2)
    try:
        ep = f"{Netns.addr(0)}:{port}"
        agents = [plain_agent(2, ep, ["--rdzv-conf", "join_timeout=30"], net.prefix_cmd(i),
                              f"node{i}") for i in range(2)]
        assert wait_all(agents, timeout=90) == [0, 0], [a.err for a in agents]
        assert ranks(agents) == [0, 1]
    finally:
        net.close()


def test_endpoint_name_for_another_interface(port, tmp_path):
    """A name that resolves to another of the node's interfaces (`node0i` -> an InfiniBand
    port's address): a one-node job is hosted there and runs."""
    net = Netns(f"pi{os.getpid()}n", 1)
    try:
        ns = net.names[0]
        for cmd in (["link", "add", "ib0", "type", "veth", "peer", "name", "ib0p"],
                    ["addr", "add", "10.251.0.1/24", "dev", "ib0"], ["link", "set", "ib0p", "up"],
                    ["link", "set", "ib0", "up"]):
            subprocess.run(["ip", "-n", ns, *cmd], check=True, capture_output=True)
        hosts = tmp_path / "hosts"
        shutil.copy("/etc/hosts", hosts)
        with open(hosts, "a") as f:
            f.write("10.251.0.1 node0i\n")
        in_ns = net.prefix_cmd(0) + ["unshare", "--mount", "sh", "-c",
                                     f'mount --bind {hosts} /etc/hosts && exec "$@"', "sh"]
        a = plain_agent(1, f"node0i:{port}", ["--rdzv-conf", "join_timeout=20"], in_ns, "node0")
        assert a.wait(60) == 0, a.err
        assert ranks([a]) == [0]
    finally:
        net.close()


def test_two_agents_one_host_one_endpoint(port):
    """Two torchrun-style agents on one host, both given 127.0.0.1:PORT: one hosts, the other
    finds the port taken by this run's store and joins it."""
    ep = f"127.0.0.1:{port}"
    agents = [plain_agent(2, ep, ["--rdzv-conf", "join_timeout=30"], name=f"n{i}")
              for i in range(2)]
    assert wait_all(agents) == [0, 0], [a.err for a in agents]
    assert ranks(agents) == [0, 1]
    assert sum(GUEST in a.err for a in agents) == 1, [a.err for a in agents]


def test_paddle_two_launchers_one_host(tmp_path):
    """Paddle's test_run.py: two `paddle --master 127.0.0.1:PORT --nnodes 2` on one host."""
    port = free_port()
    agents = [Agent(["paddle", "--master", f"127.0.0.1:{port}", "--nnodes", "2",
                     "--log_dir", str(tmp_path / f"log{i}"), "--python", TORCH_PY, PADDLE_ENV],
                    name=f"pod{i}") for i in range(2)]
    assert wait_all(agents, timeout=120) == [0, 0], [a.err for a in agents]
    res = [parse_kv(l.replace("paddle-env ok", "paddle-env"))
           for l in result_lines(agents, "paddle-env ")]
    assert sorted(int(r["id"]) for r in res) == [0, 1] and all(r["num"] == "2" for r in res)
    assert sum(GUEST in a.err for a in agents) == 1, [a.err for a in agents]


def wait_listening(port, proc, timeout=30):
    def listening():
        assert proc.poll() is None, "the hosting agent exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False
    wait_for(listening, timeout, "the hosting agent listening", every=0.1)


def test_port_held_by_another_runs_store(port):
    """The port is this machine's, held by the store of another run: the second job does not
    join it; it says the port is taken at once instead of waiting out its join timeout."""
    first = plain_agent(2, f"127.0.0.1:{port}", name="first", run_id="one")
    try:
        wait_listening(port, first.proc)
        second = plain_agent(1, f"127.0.0.1:{port}", ["--rdzv-conf", "join_timeout=60"],
                             name="second", run_id="two")
        assert second.wait(30) == 1, second.err
        assert f"cannot host the job store on *:{port}: Address already in use" in second.err, \
            second.err
        assert GUEST not in second.err
    finally:
        first.kill()
        first.wait()


def test_allow_list_of_the_agents_addresses(port):
    """Three agents on one machine at 127.0.0.2-4, the store admitting exactly those: each agent
    connects from its --local-addr, so none is refused."""
    allow = "127.0.0.2/32,127.0.0.3/32,127.0.0.4/32"
    agents = [Agent(agent_args(3, 1, f"127.0.0.2:{port}", f"127.0.0.{2 + i}",
                               extra=["--no-python", "--store-allow", allow,
                                      "--rdzv-conf", "join_timeout=30"], script=ENV_SH),
                    name=f"node{i}") for i in range(3)]
    assert wait_all(agents) == [0, 0, 0], [a.err for a in agents]
    assert "refused" not in agents[0].err, agents[0].err
    assert ranks(agents) == [0, 1, 2]


def test_refused_agent_is_told_and_backs_off(port):
    """An agent outside the allow-list hears that the allow-list refused it (not that another
    program holds the port), and retries backed off: the store logs a few refusals in the join
    timeout, not one per 50 ms attempt."""
    ep = f"127.0.0.2:{port}"
    extra = ["--no-python", "--store-allow", "127.0.0.2/32",
             "--rdzv-conf", "join_timeout=8"]   # the timeout is what ends this job
    agents = [Agent(agent_args(2, 1, ep, f"127.0.0.{2 + i}", extra=extra, script=ENV_SH),
                    name=f"node{i}") for i in range(2)]
    codes = wait_all(agents)
    assert codes[1] != 0
    err = agents[1].err
    assert "refused this node's address 127.0.0.3: it is not in the store's allow-list" in err, err
    assert "does not answer as a job store" not in err, err
    lines = [l for l in agents[0].err.splitlines() if "refused a connection from 127.0.0.3:" in l]
    assert 1 <= len(lines) <= 20, agents[0].err


def test_run_id_with_a_slash_hosts_and_joins(port, tmp_path):
    """torchrun takes any text as --rdzv-id: `--rdzv-id exp/1` is hosted and joined like any
    other id, `podrun status` finds it, and a node of run 'exp' is still another run's."""
    gate = tmp_path / "gate"
    agents = [Agent(agent_args(2, 1, f"127.0.0.2:{port}", f"127.0.0.{2 + i}", run_id="exp/1",
                               extra=["--no-python"], script=ENV_SH),
                    env={"GATE_FILE": str(gate)}, name=f"node{i}") for i in range(2)]
    try:
        def status():
            r = subprocess.run([PODRUN, "status", f"127.0.0.2:{port}"], capture_output=True,
                               text=True, timeout=30)
            return r.returncode == 0 and "exp/1" in r.stdout and r.stdout
        wait_for(status, 60, "podrun status naming run exp/1")
        for other in ("exp", "exp/2"):
            stranger = Agent(agent_args(2, 1, f"127.0.0.2:{port}", "127.0.0.4", run_id=other,
                                        extra=["--no-python"], script=ENV_SH), name="stranger")
            assert stranger.wait(30) == 2, stranger.err
            assert f"belongs to run 'exp/1', this agent's run id is '{other}'" in stranger.err, \
                stranger.err
            wait_for(lambda: f"a node of run '{other}' reached this job store, which belongs to "
                     "run 'exp/1'" in agents[0].err_now(), 30, "the host naming the stranger")
        gate.touch()
        assert wait_all(agents) == [0, 0], [a.err for a in agents]
    finally:
        for a in agents:
            a.kill()
    assert ranks(agents) == [0, 1]
    assert "port" not in agents[0].err, agents[0].err


def test_run_id_too_long_is_named(port):
    """An id whose keys cannot fit is the id's usage error, never the port's."""
    r = subprocess.run([PODRUN, "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
                        "--rdzv-id", "exp/" * 40, "true"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("podrun: --rdzv-id 'exp/exp/"), r.stderr
    assert "longer than 128 characters (a '/' or '%' counts as 3)" in r.stderr
    assert "port" not in r.stderr


def test_refused_burst_is_one_line_and_a_summary(port, tmp_path):
    """A scanner's burst of 100 connections from outside --store-allow: the first refusal is one
    line, the other 99 one summary line with their count."""
    gate = tmp_path / "gate"
    host = Agent(agent_args(1, 1, f"127.0.0.2:{port}", "127.0.0.2", script=ENV_SH,
                            extra=["--no-python", "--store-allow", "127.0.0.2/32"]),
                 env={"GATE_FILE": str(gate)}, name="host")
    def listening():   # from an address the list admits
        assert host.proc.poll() is None, host.err_now()
        try:
            socket.create_connection(("127.0.0.2", port), 1, ("127.0.0.2", 0)).close()
            return True
        except OSError:
            return False
    try:
        wait_for(listening, 30, "the hosting agent listening", every=0.1)
        for _ in range(100):
            s = socket.socket()
            s.bind(("127.0.0.5", 0))
            s.connect(("127.0.0.2", port))
            s.recv(8)   # WIRE_REFUSED: this one was refused before the next is made
            s.close()
        def summarised():   # 99, in one line unless the burst outlasted an interval
            counts = re.findall(r"refused (\d+) more connections? in the last 10 s, the last "
                                r"from 127\.0\.0\.5:", host.err_now())
            return sum(map(int, counts)) == 99
        wait_for(summarised, 60, "the refusals' summary")
        gate.touch()
        assert host.wait(30) == 0, host.err
    finally:
        host.kill()
    assert len(re.findall(r"refused a connection from 127\.0\.0\.5:", host.err)) == 1, host.err
    assert "refused a connection from 127.0.0.2" not in host.err, host.err
