"""The job store lets only the job in (doc/store.md#security): with a token, a stranger on the store's
port can neither read nor write podrun's keys, nor steer the job with forged records, a replayed
handshake or junk, while torch's workers use the same port as always; the allow-list refuses
sources outside it at accept. Without a token the store stays open to reads, as documented."""
import os
import re

from cluster import WORKERS, Agent, agent_args, wait_files, wait_for
from conftest import free_port
from rogue import Rogue, vec

TOKEN = "c0ffee" * 8
HOLD = os.path.join(WORKERS, "hold.py")


def start_job(tmp_path, port, run_id, extra=(), env=None, n=3):
    """n agents on 127.0.0.2 ... (the first hosts the store), one worker each running hold.py."""
    marks = tmp_path / run_id
    marks.mkdir()
    e = {"MARK_DIR": str(marks), **(env or {})}
    agents = [Agent(agent_args(n, 1, f"127.0.0.2:{port}", f"127.0.0.{2 + i}", run_id, extra,
                               script=HOLD), env=e, name=f"node{i}") for i in range(n)]
    wait_files(marks, n, 60, pattern="up.*", alive=[a.proc for a in agents])  # the job runs
    return agents, marks


def finish(agents, marks):
    (marks / "release").write_text("")
    codes = [a.wait(90) for a in agents]
    assert codes == [0] * len(agents), [a.err for a in agents]
    out = "".join(a.out for a in agents)
    assert sorted(re.findall(r"allreduce rank=(\d) world=3 sum=3", out)) == ["0", "1", "2"], out
    return agents[0].err


def refusals(host_err, src):
    return [l for l in host_err.splitlines() if f"from {src}:" in l]


def test_token_keeps_strangers_out(tmp_path):
    port = free_port("127.0.0.2")
    allow = "127.0.0.1,127.0.0.2/31,127.0.0.4,127.0.0.16/28"
    agents, marks = start_job(tmp_path, port, "sec", ["--store-allow", allow],
                              {"PODRUN_RDZV_TOKEN": TOKEN})
    try:
        # the workers ran init_process_group and all_reduce through this port: torch's clients
        # need no token; and they were not handed the secret
        assert all(p.read_text() == "\n" for p in marks.glob("up.*"))
        # outside the allow-list: refused at accept
        r = Rogue(port, "127.0.0.9")
        assert r.refused()      # told so in 4 bytes, then closed
        # a worker key stays open to every client; podrun's keys are not even listed
        r = Rogue(port, "127.0.0.17")
        r.set("user/x", "1")
        assert r.get("user/x") == b"1"
        keys = r.list()
        assert b"user/x" in keys and not [k for k in keys if k.startswith(b"podrun/")], keys
        assert r.numkeys() == len(keys)
        assert r.ping() == 0x1234   # the connection is still good
        # a 1.13 client: the same
        r1 = Rogue(port, "127.0.0.18", v2=False)
        assert r1.get("user/x") == b"1"
        assert r1.numkeys() == len(keys)
        # reads and writes of podrun's keys: refused, the connection closed
        attacks = {
            "127.0.0.19": lambda r: r.set("podrun/sec/r/0/end", "end=stop\naction=exit\nround=0\n"),
            "127.0.0.20": lambda r: r.get("podrun/sec/status"),
            "127.0.0.21": lambda r: r.set("podrun/sec/n/00000000000000ab/join/0",
                                          "name=evil\nnproc=1\n"),
            "127.0.0.22": lambda r: r.set("podrun/sec/n/00000000000000ab/fail/0",
                                          "reason=forged\nexit_code=1\n"),
            "127.0.0.23": lambda r: r.send(r.op("MULTI_GET", (2).to_bytes(8, "little"),
                                                vec("user/x"), vec("podrun/sec/status"))),
            "127.0.0.24": lambda r: r.send(bytes([0xee]) + os.urandom(40)),   # junk
        }
        for src, attack in attacks.items():
            r = Rogue(port, src)
            try:
                attack(r)
            except ConnectionError:
                pass
            assert r.closed(), src
        # a genuine handshake, then junk after it: only that connection goes
        good = Rogue(port, "127.0.0.25")
        proof, verdict = good.login(TOKEN)
        assert verdict == b"ok"
        assert good.get("podrun/sec/status") is not None   # it may read the job's keys
        # ... but even an authenticated client writes no answer of the coordinator's
        good.set("podrun/sec/r/0/end", "garbage")
        assert good.closed()
        # the recorded proof replayed on a new connection: a fresh nonce, refused
        rep = Rogue(port, "127.0.0.26")
        rep.hello()
        assert rep.get(proof) == b""
        assert rep.closed()
        # the proof without any hello, and a wrong token
        nohello = Rogue(port, "127.0.0.27")
        assert nohello.get(proof) == b""
        assert nohello.closed()
        wrong = Rogue(port, "127.0.0.28")
        try:
            wrong.login("not the token at all!")
            raise AssertionError("a store without the token passed the check")
        except AssertionError as e:
            assert "does not hold the token" in str(e)
        # junk after a good handshake
        late = Rogue(port, "127.0.0.29")
        assert late.login(TOKEN)[1] == b"ok"
        late.send(b"\xff\xfe" * 16)
        assert late.closed()
    finally:
        host_err = finish(agents, marks)
    # the host named each refusal once, with the peer
    assert len(refusals(host_err, "127.0.0.9")) == 1
    assert "not in the job store's allow-list" in refusals(host_err, "127.0.0.9")[0]
    for src in ["127.0.0.17", "127.0.0.18"]:
        assert refusals(host_err, src) == [], host_err
    for src in list(attacks) + ["127.0.0.25", "127.0.0.26", "127.0.0.27", "127.0.0.29"]:
        assert len(refusals(host_err, src)) == 1, (src, host_err)
    assert "did not authenticate" in refusals(host_err, "127.0.0.19")[0]
    assert "podrun/sec/r/0/end" in refusals(host_err, "127.0.0.19")[0]
    assert "unknown opcode" in refusals(host_err, "127.0.0.24")[0]
    assert "no client writes this key" in refusals(host_err, "127.0.0.25")[0]
    assert "proof is wrong" in refusals(host_err, "127.0.0.26")[0]
    assert "stopped" not in host_err


def test_no_token_is_open_to_reads(tmp_path):
    """Without a token the store is as open as torch's (documented): anyone reads podrun's keys
    and LIST shows the assignments; writing the coordinator's answers is refused even so."""
    port = free_port("127.0.0.2")
    agents, marks = start_job(tmp_path, port, "open")
    try:
        r = Rogue(port, "127.0.0.17")
        keys = r.list()
        assert [k for k in keys if k.startswith(b"podrun/open/n/") and b"/assign/" in k], keys
        r.set("podrun/open/r/0/end", "garbage")
        assert r.closed()
    finally:
        host_err = finish(agents, marks)
    assert len(refusals(host_err, "127.0.0.17")) == 1


def test_agent_with_another_token_is_refused(tmp_path):
    """A node with another token (or none) is told so and exits; the job's store says nothing
    about the token itself."""
    port = free_port("127.0.0.2")
    host = Agent(agent_args(2, 1, f"127.0.0.2:{port}", "127.0.0.2", "tok",
                            ["--no-python", "--rdzv-conf", "join_timeout=20"], script="true"),
                 env={"PODRUN_RDZV_TOKEN": TOKEN}, name="host")
    tokfile = tmp_path / "token"
    tokfile.write_text("another token, long enough\n")
    other = Agent(agent_args(2, 1, f"127.0.0.2:{port}", "127.0.0.3", "tok",
                             ["--no-python", "--rdzv-token-file", str(tokfile)], script="true"),
                  name="other")
    assert other.wait(30) != 0
    assert "holds another rendezvous token" in other.err, other.err
    none = Agent(agent_args(2, 1, f"127.0.0.2:{port}", "127.0.0.3", "tok", ["--no-python"],
                            script="true"), name="none")
    assert none.wait(30) != 0
    assert "asks for a rendezvous token, and this node has none" in none.err, none.err
    host.kill()
    host.wait(10)


def test_manifests_wire_the_token_and_the_network_policy(tmp_path):
    """docker/security.yaml's Secret and NetworkPolicy fit docker/indexed-job.yaml's pods, and
    the Secret's placeholder stops podrun until a real token replaces it."""
    import subprocess

    import yaml

    from conftest import PODRUN, ROOT
    docker = ROOT / "docker"
    sec = [d for d in yaml.safe_load_all((docker / "security.yaml").read_text()) if d]
    job = [d for d in yaml.safe_load_all((docker / "indexed-job.yaml").read_text()) if d]
    (secret,) = [d for d in sec if d["kind"] == "Secret"]
    (policy,) = [d for d in sec if d["kind"] == "NetworkPolicy"]
    (j,) = [d for d in job if d["kind"] == "Job"]
    pod = j["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    # the policy selects the Job's pods and admits only them, to the store's port among others
    labels = {"batch.kubernetes.io/job-name": j["metadata"]["name"]}
    assert policy["spec"]["podSelector"]["matchLabels"] == labels
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    for rule in policy["spec"]["ingress"]:
        assert [f["podSelector"]["matchLabels"] for f in rule["from"]] == [labels]
    endpoint = next(e["value"] for e in c["env"] if e["name"] == "PODRUN_RDZV_ENDPOINT")
    assert any(p["port"] == int(endpoint.rsplit(":", 1)[1])
               for r in policy["spec"]["ingress"] for p in r.get("ports", []))
    # every pod mounts the Secret where --rdzv-token-file reads it
    path = c["args"][c["args"].index("--rdzv-token-file") + 1]
    (vol,) = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") ==
              secret["metadata"]["name"]]
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == vol["name"]]
    assert path == f"{mount['mountPath']}/{next(iter(secret['stringData']))}"
    # the placeholder as shipped is refused with the fix; a generated token runs
    tok = tmp_path / "token"
    tok.write_text(secret["stringData"]["token"])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PODRUN_", "PET_"))}
    r = subprocess.run([PODRUN, "--no-python", "--rdzv-token-file", str(tok), "true"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "openssl rand -hex 32" in r.stderr, r.stderr
    tok.write_text(os.urandom(32).hex() + "\n")
    r = subprocess.run([PODRUN, "--no-python", "--rdzv-token-file", str(tok), "true"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def test_allow_list_follows_the_job_pods(tmp_path):
    """--store-allow job with --discovery k8s: the store accepts the job's pods as the API shows
    them come and go, and refuses every other source at accept."""
    from test_k8s_discovery import k8s_agent, running  # also puts tests/fakes on the path
    import k8s_api
    api = k8s_api.FakeAPI(tmp_path / "api", bookmark_interval=0.5).start()
    marks = tmp_path / "marks"
    marks.mkdir()
    agents = []
    try:
        kc = api.kubeconfig(tmp_path / "kc")
        for i in range(2):
            api.put_pod(running(i))
        # on one machine every unbound client (the workers' torch clients) comes from 127.0.0.1
        agents = [k8s_agent(i, 2, kc, HOLD, extra=["--store-allow", "job,127.0.0.1"],
                            env={"MARK_DIR": str(marks)}) for i in range(2)]
        wait_files(marks, 2, 90, pattern="up.*", alive=[a.proc for a in agents])
        port = int(os.environ["PODRUN_MASTER_PORT"])   # static: the master port

        def admitted():
            r = Rogue(port, "127.0.0.9")
            try:
                return r.ping() == 0x1234
            except (ConnectionError, OSError):
                return False
            finally:
                r.close()

        def becomes(want):
            wait_for(lambda: admitted() == want, 10,
                     f"127.0.0.9 to be {'admitted' if want else 'refused'}", every=0.1)

        assert not admitted()
        api.put_pod(running(2, ip="127.0.0.9"))      # a pod of the job gets this address
        becomes(True)
        api.delete_pod("job-worker-2")               # ... and goes away
        becomes(False)
    finally:
        (marks / "release").write_text("")
        codes = [a.wait(60) for a in agents]
        api.stop()
    assert codes == [0, 0], [a.err for a in agents]
    assert "refused a connection from 127.0.0.9" in agents[0].err
