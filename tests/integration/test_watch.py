"""A job you can watch: each agent's --health-port (/healthz, /metrics in Prometheus text) and
`podrun status` during a 3-node job with a failure and an in-place restart, after it ended, the
health port under bad clients, and --log-format json."""
import http.client
import json
import os
import re
import socket
import subprocess
import time

from cluster import WORKERS, Agent, agent_args, started_dir, wait_for
from conftest import PODRUN, free_port

FAIL_SH = os.path.join(WORKERS, "fail.sh")
NOPY = ["--no-python"]

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def parse_prom(text):
    """Prometheus text format 0.0.4 into {(name, frozenset(labels)): value}; asserts the
    grammar: HELP and TYPE once per family before its samples, every sample of the family
    announced last (a histogram's _bucket/_sum/_count included), values that parse."""
    out, families, fam, ftype = {}, set(), None, None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            fam = line.split(" ", 3)[2]
            assert fam not in families, f"family {fam} announced twice"
            families.add(fam)
            continue
        if line.startswith("# TYPE "):
            _, _, name, ftype = line.split(" ")
            assert name == fam and ftype in ("counter", "gauge", "histogram"), line
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name, labels, value = m.groups()
        base = name
        if ftype == "histogram":
            base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert base == fam, f"{name} outside its family {fam}"
        lab = {}
        if labels:
            pos = 0
            while pos < len(labels):
                lm = LABEL.match(labels, pos)
                assert lm, f"bad labels in {line!r}"
                lab[lm.group(1)] = re.sub(r'\\(.)', lambda x: {"n": "\n"}.get(x.group(1),
                                                                             x.group(1)),
                                          lm.group(2))
                pos = lm.end()
        out[(name, frozenset(lab.items()))] = float(value)
    return out


def metric(m, name, **labels):
    return m.get((name, frozenset(labels.items())))


def get(port, path, timeout=5):
    """(status, body) of GET http://127.0.0.1:port/path; (0, "") when nothing listens yet."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode()
    except ConnectionRefusedError:
        return 0, ""
    finally:
        c.close()


def scrape(port):
    st, body = get(port, "/metrics")
    assert st == 200
    return parse_prom(body)


def status(*args, timeout=30):
    return subprocess.run([PODRUN, "status", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_three_nodes_failure_restart(port, tmp_path):
    """Round 0: rank 2 fails once it was looked at; the job restarts in place once (round 1) and
    finishes once that was looked at too."""
    hports = [free_port() for _ in range(3)]
    fail, done = tmp_path / "fail", tmp_path / "done"
    env = {"FAIL_RANK": "2", "FAIL_UNTIL": "1", "FAIL_FILE": str(fail), "DONE_FILE": str(done)}
    endpoint = f"127.0.0.2:{port}"
    agents = [Agent(agent_args(3, 1, endpoint, f"127.0.0.{2 + i}", extra=NOPY + [
        "--max-restarts", "1", "--health-port", str(hports[i])], script=FAIL_SH), env=env,
        name=f"node{i}") for i in range(3)]
    try:
        # round 0 running on every node: /healthz 200, the round's gauges
        for hp in hports:
            wait_for(lambda: get(hp, "/healthz")[0] == 200 and
                     "running" in get(hp, "/healthz")[1], 30, "/healthz ok", every=0.1)
        ms = [scrape(hp) for hp in hports]
        for m in ms:
            assert metric(m, "podrun_rendezvous_rounds_total") == 1
            assert metric(m, "podrun_rendezvous_round") == 0
            assert metric(m, "podrun_world_size") == 3
            assert metric(m, "podrun_agent_state", state="running") == 1
            assert metric(m, "podrun_restarts_total", counted="true") == 0
            assert metric(m, "podrun_rendezvous_duration_seconds_count") == 1
            assert metric(m, "podrun_rendezvous_duration_seconds_bucket", le="+Inf") == 1
        assert [metric(m, "podrun_store_hosted") for m in ms] == [1, 0, 0]
        assert metric(ms[0], "podrun_store_connections") >= 3
        assert metric(ms[0], "podrun_store_requests_total", op="SET") > 0
        node_rank = {int(metric(m, "podrun_node_rank")): i for i, m in enumerate(ms)}
        failing = node_rank[2]

        r = status(endpoint)
        assert r.returncode == 0, r.stderr
        assert "job 'job1' at 127.0.0.2:" in r.stdout and "running, round 0" in r.stdout
        assert "restarts used 0 of 1" in r.stdout and "last failure: none" in r.stdout
        rows = [l.split() for l in r.stdout.splitlines() if re.match(r"^  \d ", l)]
        assert [row[0] for row in rows] == ["0", "1", "2"]
        assert sorted(row[4] for row in rows) == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
        assert all(row[5] == "running" for row in rows)

        # the failure, the restart: the counters move on every node
        fail.write_text("")

        def restarted():
            m = [scrape(hp) for hp in hports]
            ok = all(metric(x, "podrun_rendezvous_round") == 1 and
                     metric(x, "podrun_agent_state", state="running") == 1 for x in m)
            return ok and m
        ms = wait_for(restarted, 40, "round 1 running", every=0.2)
        for i, m in enumerate(ms):
            assert metric(m, "podrun_rendezvous_rounds_total") == 2
            assert metric(m, "podrun_restarts_total", counted="true") == 1
            assert metric(m, "podrun_restart_attempt") == 1
            assert metric(m, "podrun_restarts_used") == 1
            assert metric(m, "podrun_max_restarts") == 1
            assert metric(m, "podrun_failure_push_seconds_count") == 1
            assert 0 <= metric(m, "podrun_failure_push_seconds_sum") < 10
            exits = {c: metric(m, "podrun_worker_exits_total", cause=c)
                     for c in ("exit_code", "stopped", "success")}
            if i == failing:
                assert exits["exit_code"] == 1 and exits["stopped"] == 0, exits
            else:
                assert exits["exit_code"] == 0 and exits["stopped"] == 1, exits
            assert metric(m, "podrun_heartbeats_total") > 0

        r = status("--json", endpoint)
        assert r.returncode == 0, r.stderr
        (job,) = [json.loads(l) for l in r.stdout.splitlines()]
        assert job["run_id"] == "job1" and job["phase"] == "running" and job["round"] == 1
        assert job["restarts_used"] == 1 and job["max_restarts"] == 1
        assert job["nodes_total"] == 3 and job["world_size"] == 3
        f = job["last_failure"]
        assert f["round"] == 0 and f["rank"] == 2 and f["then"] == "restarted"
        assert f["host"] == f"127.0.0.{2 + failing}" and f["reason"] == "exit code 1"
        assert "failing on purpose" in f["message"]
        assert sorted(n["rank_base"] for n in job["nodes"]) == [0, 1, 2]
        assert all(job["time"] - n["last_heartbeat"] < 5 for n in job["nodes"])
        r = status(endpoint)
        assert "last failure: round 0" in r.stdout and "rank 2" in r.stdout
        assert "the job restarted in place" in r.stdout and "  | rank 2 failing" in r.stdout

        done.write_text("")
        codes = [a.wait(60) for a in agents]
        assert codes == [0, 0, 0], [a.err for a in agents]
    finally:
        for a in agents:
            a.kill()
    # a stopped job: nobody answers there any more, said in one line, exit 3
    r = status("--timeout", "1", endpoint)
    assert r.returncode == 3
    assert r.stderr.count("\n") == 1 and "no job store answers at 127.0.0.2:" in r.stderr


def test_healthz_503_while_stopping(podrun, tmp_path):
    """A worker failed and its sibling takes its time to stop: the probe says so."""
    hp = free_port()
    fail = tmp_path / "fail"
    # rank 1 ignores SIGTERM only once its trap is set: until then the stop would be instant
    env = dict(os.environ, FAIL_RANK="0", FAIL_FILE=str(fail), IGNORE_TERM="1",
               STARTED_DIR=started_dir(), FAIL_AFTER_ALL="1")
    p = subprocess.Popen([podrun, "--nproc-per-node", "2", "--term-timeout", "6",
                          "--health-port", str(hp), "--no-python", FAIL_SH], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: get(hp, "/healthz") == (200, get(hp, "/healthz")[1]) and
                 "running 2 workers" in get(hp, "/healthz")[1], 20, "running", every=0.1)
        fail.write_text("")   # rank 0 fails now (once rank 1's trap is set)
        st, body = wait_for(lambda: (lambda r: r[0] == 503 and r)(get(hp, "/healthz")),
                            20, "503", every=0.05)
        assert body.startswith("unhealthy: ") and "rank 0" in body and "exit code 1" in body, body
        m = scrape(hp)
        assert metric(m, "podrun_healthy") == 0
        assert metric(m, "podrun_worker_exits_total", cause="exit_code") == 1
        assert metric(m, "podrun_store_hosted") == 1   # a one-node job hosts its own store
    finally:
        out, err = p.communicate(timeout=30)
    assert p.returncode == 1, err


def test_healthz_while_stopping_names_this_attempts_reason(port, tmp_path):
    """Round 0 stops on this node's own failure; round 1 on a peer's. While node-0 stops round 1's
    worker the probe names the job's reason for it, not round 0's failure of node-0."""
    hp, fail = free_port(), tmp_path / "fail"
    script = tmp_path / "w.sh"
    # restart 0: rank 0 fails; restart 1: rank 0 takes its time to stop, rank 1 fails once told
    script.write_text(f"""#!/bin/sh
r=$TORCHELASTIC_RESTART_COUNT
[ "$r" = 0 ] && [ "$RANK" = 0 ] && exit 1
[ "$r" = 1 ] && [ "$RANK" = 1 ] && {{ while [ ! -e {fail} ]; do sleep 0.05; done; exit 7; }}
[ "$r" = 1 ] && {{ trap '' TERM; while :; do sleep 0.05; done; }}
exit 0
""")
    script.chmod(0o755)
    endpoint = f"127.0.0.2:{port}"
    extra = NOPY + ["--max-restarts", "2", "--term-timeout", "5"]
    agents = [Agent(agent_args(2, 1, endpoint, f"127.0.0.{2 + i}", extra=extra + (
                        ["--health-port", str(hp)] if i == 0 else []), script=str(script)),
                    name=f"node{i}") for i in range(2)]
    try:
        wait_for(lambda: "restart 1" in get(hp, "/healthz")[1], 30, "round 1 running",
                 every=0.05)
        fail.write_text("")
        wait_for(lambda: (lambda r: r[0] == 503 and "ing: " in r[1])(get(hp, "/healthz")), 20,
                 "503 while stopping or restarting", every=0.05)
        # the job's reason reaches node-0 a round trip after the stop began
        st, body = wait_for(lambda: (lambda r: "rank 1" in r[1] and r)(get(hp, "/healthz")),
                            10, "the job's reason on /healthz", every=0.05)
        assert st == 503 and "exit code 7" in body and "rank 0" not in body, body
    finally:
        codes = [a.wait(60) for a in agents]
    assert codes == [0, 0], [a.err for a in agents]


def test_healthz_ok_while_a_done_node_waits_for_the_job(port, tmp_path):
    """node-0's worker exited 0 and node-1's runs on: node-0 is not failing, stopping or
    restarting, so its probe stays 200 (a liveness probe must not kill it) until the job ends."""
    hp, done = free_port(), tmp_path / "done"
    script = tmp_path / "w.sh"
    script.write_text(f"""#!/bin/sh
[ "$RANK" = 0 ] && exit 0
while [ ! -e {done} ]; do sleep 0.05; done
""")
    script.chmod(0o755)
    endpoint = f"127.0.0.2:{port}"
    agents = [Agent(agent_args(2, 1, endpoint, f"127.0.0.{2 + i}", extra=NOPY + (
                        ["--health-port", str(hp)] if i == 0 else []), script=str(script)),
                    name=f"node{i}") for i in range(2)]
    try:
        st, body = wait_for(lambda: (lambda r: "waiting for the job" in r[1] and r)(
            get(hp, "/healthz")), 30, "node-0 done", every=0.05)
        assert st == 200 and body.startswith("ok: "), body
        assert metric(scrape(hp), "podrun_healthy") == 1
        done.write_text("")
    finally:
        done.write_text("")
        codes = [a.wait(60) for a in agents]
    assert codes == [0, 0], [a.err for a in agents]


def test_health_port_bad_clients(podrun):
    """Junk, a TLS hello, a slow client, a flood of idle connections: each answered or cut off
    on its own, while the workers' output keeps flowing and probes are answered again."""
    hp = free_port()
    env = dict(os.environ, TICK="0.2")
    p = subprocess.Popen([podrun, "--nproc-per-node", "1", "--health-port", str(hp),
                          "--no-python", FAIL_SH], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    socks = []
    try:
        wait_for(lambda: "running" in get(hp, "/healthz")[1], 20, "running", every=0.1)

        def exchange(data):
            with socket.create_connection(("127.0.0.1", hp), timeout=5) as s:
                s.sendall(data)
                return s.recv(4096).decode(errors="replace")
        assert exchange(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03").startswith(
            "HTTP/1.1 400 ")
        assert exchange(b"DELETE /healthz HTTP/1.1\r\n\r\n").startswith("HTTP/1.1 405 ")
        assert exchange(b"GET /nope HTTP/1.1\r\n\r\n").startswith("HTTP/1.1 404 ")
        assert exchange(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n").split(" ")[1] in (
            "414", "431")
        head = exchange(b"HEAD /healthz HTTP/1.0\r\n\r\n")
        assert head.startswith("HTTP/1.1 200 ") and head.endswith("\r\n\r\n")
        def tick():
            """Reads up to the worker's next tick line."""
            line = ""
            while "tick" not in line:
                line = p.stdout.readline()
                assert line, "podrun's output ended"

        tick()   # the worker prints
        # 40 idle connections: 16 held (then cut at the 5 s timeout), the rest closed at once
        for _ in range(40):
            s = socket.create_connection(("127.0.0.1", hp), timeout=10)
            s.sendall(b"GET /hea")
            socks.append(s)
        t0 = time.monotonic()
        for _ in range(5):   # a tick each 0.2 s: five lines while the 16 are held
            tick()
        assert time.monotonic() - t0 < 4.5, "the workers' output stalled behind the health port"
        closed = 0
        for s in socks:
            s.settimeout(10)
            try:
                closed += s.recv(1) == b""
            except ConnectionResetError:
                closed += 1
        assert closed == 40
        assert time.monotonic() - t0 < 9
        # the port may still count the connections it is closing (a probe then is refused as
        # "busy", with a reset): what is under test is that probes are answered again
        def probe_ok():
            try:
                return get(hp, "/healthz")[0] == 200
            except OSError:
                return False
        wait_for(probe_ok, 10, "a probe again", every=0.1)
        m = scrape(hp)
        assert metric(m, "podrun_health_refused_total", reason="busy") >= 24
        assert metric(m, "podrun_health_refused_total", reason="timeout") >= 16
        assert metric(m, "podrun_health_refused_total", reason="bad") >= 2
        assert metric(m, "podrun_workers_running") == 1
        assert p.poll() is None
    finally:
        for s in socks:
            s.close()
        p.terminate()
        p.communicate(timeout=30)


def test_bad_health_port_and_log_format(podrun):
    for args, word in ((["--health-port", "70000"], "--health-port"),
                       (["--health-port", "x"], "--health-port"),
                       (["--log-format", "xml"], "--log-format")):
        r = subprocess.run([podrun, *args, "--no-python", "true"], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and word in r.stderr, r.stderr
    # a port that is taken: the agent does not start, and says which flag
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        taken = s.getsockname()[1]
        r = subprocess.run([podrun, "--health-port", str(taken), "--no-python", "true"],
                           capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "--health-port" in r.stderr, r.stderr
    r = status()
    assert r.returncode == 2 and "HOST[:PORT]" in r.stderr
    r = status("--watch", "0", "127.0.0.1:1")
    assert r.returncode == 2 and "--watch" in r.stderr


def test_log_format_json(podrun):
    """podrun's own lines, the failure report included, are JSON objects; the workers' are not
    touched."""
    env = dict(os.environ, FAIL_RANK="1", FAIL_AFTER="0.2", DONE_AFTER="5",
               STARTED_DIR=started_dir(), FAIL_AFTER_ALL="1")   # rank 0 says "start" first
    r = subprocess.run([podrun, "--nproc-per-node", "2", "--rdzv-id", "jj", "--log-format",
                        "json", "--no-python", FAIL_SH], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 1
    objs, worker_lines = [], []
    for line in r.stderr.splitlines():
        if line.startswith("{"):
            objs.append(json.loads(line))
        else:
            worker_lines.append(line)
    assert "[rank 1]:rank 1 failing on purpose" in worker_lines, r.stderr
    assert all(l.startswith("[rank ") for l in worker_lines), r.stderr
    assert objs and all(set(o) >= {"time", "source", "msg"} for o in objs)
    assert all(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", o["time"]) for o in objs)
    assert {o["source"] for o in objs} <= {"podrun", "report", "store"}
    assert all(o.get("run_id") == "jj" for o in objs)
    reports = [o for o in objs if o["source"] == "report"]
    assert reports and "exitcode  : 1" in reports[0]["msg"] and "\n" in reports[0]["msg"]
    assert any(l.startswith("[rank 0]:start rank=0") for l in r.stdout.splitlines()), r.stdout


def test_status_of_a_job_with_a_token(tmp_path):
    """A job whose agents hold a token shows its keys only to a reader that proves it holds it
    too: podrun status takes it from --rdzv-token-file or the agents' own variables."""
    port = free_port()
    token = "s3cret-token-of-this-job-0123456789"
    env = {"PODRUN_RDZV_TOKEN": token, "DONE_AFTER": "20"}
    a = Agent(agent_args(1, 1, f"127.0.0.2:{port}", "127.0.0.2", run_id="tok", extra=NOPY,
                         script=FAIL_SH), env=env, name="tok")
    try:
        endpoint = f"127.0.0.2:{port}"
        r = wait_for(lambda: (lambda x: x.returncode == 0 and "running" in x.stdout and x)(
            subprocess.run([PODRUN, "status", endpoint], capture_output=True, text=True,
                           env=dict(os.environ, PODRUN_RDZV_TOKEN=token), timeout=30)),
            30, "the job running", every=0.3)
        assert "job 'tok'" in r.stdout and "running" in r.stdout
        f = tmp_path / "token"
        f.write_text(token + "\n")
        r = status("--rdzv-token-file", str(f), endpoint)
        assert r.returncode == 0 and "job 'tok'" in r.stdout, r.stderr
        r = status(endpoint)
        assert r.returncode == 2 and "--rdzv-token-file" in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1
        f.write_text("another-token-0123456789abcdef\n")
        r = status("--rdzv-token-file", str(f), endpoint)
        assert r.returncode == 3 and "did not take this token" in r.stderr, r.stderr
    finally:
        a.kill()
        a.wait(30)
