"""`podrun k8s`, a drop-in for PaddleCloud's k8s_tools.py, against the test API server: the
paddle_k8s start_fluid flow (seed 003: pservers and trainers wait for each other's pods, then
compute PADDLE_* from the API) run as a shell script with `podrun k8s` in place of
`python k8s_tools.py`, and each command's stdout compared byte for byte with what k8s_tools.py
prints for the same pods (its rules: the phase is "Terminating" once deletion began, IPs of the
pods in a phase sorted as strings, `print` of the result)."""
import os
import pathlib
import subprocess
import sys

import pytest

from cluster import wait_for

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fakes"))
import k8s_api  # noqa: E402

JOB = "fluid-ctr"
PSERVER = f"paddle-job-pserver={JOB}"
TRAINER = f"paddle-job={JOB}"
# IPs whose string order is not their numeric order, as k8s_tools.py sorts them
PSERVER_IPS = {"fluid-ctr-pserver-b9w99": "127.0.1.25", "fluid-ctr-pserver-pb9vd": "127.0.1.9"}
TRAINER_IPS = {"fluid-ctr-trainer-lg9n5": "127.0.2.10", "fluid-ctr-trainer-tvr99": "127.0.2.9"}

# The start_fluid flow of PaddleCloud's paddle_k8s entrypoint, with K8S_TOOLS as the tool.
FLOW = r"""#!/bin/bash
pserver_label="paddle-job-pserver=${PADDLE_JOB_NAME}"
trainer_label="paddle-job=${PADDLE_JOB_NAME}"
if [ "$PADDLE_TRAINING_ROLE" = TRAINER ] || [ "$PADDLE_TRAINING_ROLE" = PSERVER ]; then
  $K8S_TOOLS wait_pods_running "$pserver_label" "$PADDLE_PSERVERS"
fi
if [ "$PADDLE_TRAINING_ROLE" = TRAINER ] || [ "$PADDLE_TRAINING_ROLE" = WORKER ]; then
  $K8S_TOOLS wait_pods_running "$trainer_label" "$PADDLE_TRAINERS"
fi
export PADDLE_PSERVER_IPS=$($K8S_TOOLS fetch_ips "$pserver_label" "$PADDLE_INIT_PORT")
export PADDLE_PSERVERS_IP_PORT_LIST=$($K8S_TOOLS fetch_endpoints "$pserver_label" "$PADDLE_PORT")
export PADDLE_TRAINER_IPS=$($K8S_TOOLS fetch_ips "$trainer_label")
if [ "$PADDLE_TRAINING_ROLE" = TRAINER ]; then
  failed_count=$($K8S_TOOLS count_pods_by_phase "$trainer_label" Failed)
  if [ "$failed_count" -gt 1 ]; then
    echo "Failed trainer count beyond the threshold: 1"
    exit 0
  fi
  task_index=$($K8S_TOOLS fetch_id "$trainer_label")
else
  task_index=$($K8S_TOOLS fetch_id "$pserver_label")
fi
export PADDLE_TRAINER_ID=$task_index
sh -c "$ENTRY"
"""
ENTRY = ('echo "env role=$PADDLE_TRAINING_ROLE id=$PADDLE_TRAINER_ID '
         'pservers=$PADDLE_PSERVER_IPS endpoints=$PADDLE_PSERVERS_IP_PORT_LIST '
         'trainers=$PADDLE_TRAINER_IPS"')


# ---- what k8s_tools.py prints for a list of pods (phase, ip, deleting) ----

def tools_status(p):
    return "Terminating" if p.get("deleting") else p.get("phase", "Pending")


def tools_ips(pods, phase="Running"):
    return sorted(p["ip"] for p in pods if tools_status(p) == phase)


def tools_fetch_ips(pods):
    return ",".join(tools_ips(pods)) + "\n"


def tools_fetch_endpoints(pods, port):
    return ",".join(f"{ip}:{port}" for ip in tools_ips(pods)) + "\n"


def tools_fetch_id(pods, local_ip):
    ips = tools_ips(pods)
    return (str(ips.index(local_ip)) if local_ip in ips else "None") + "\n"


def tools_count(pods, phase):
    return f"{sum(tools_status(p) == phase for p in pods)}\n"


# ---- the pods ----

def pserver(name, **kw):
    d = {"name": name, "phase": "Pending", "labels": {"paddle-job-pserver": JOB}}
    d.update(kw)
    return d


def trainer(name, **kw):
    d = {"name": name, "phase": "Pending", "labels": {"paddle-job": JOB}}
    d.update(kw)
    return d


def ready_pods():
    pods = [pserver(n, phase="Running", ip=ip) for n, ip in PSERVER_IPS.items()]
    pods += [trainer(n, phase="Running", ip=ip) for n, ip in TRAINER_IPS.items()]
    # a trainer of an earlier attempt being deleted, and one that failed: neither is Running
    pods.append(trainer("fluid-ctr-trainer-old1", phase="Running", ip="127.0.2.1",
                        deleting=True))
    pods.append(trainer("fluid-ctr-trainer-old2", phase="Failed", ip="127.0.2.2",
                        reason="Error"))
    return pods


@pytest.fixture
def api(tmp_path):
    a = k8s_api.FakeAPI(tmp_path / "api", bookmark_interval=0.5).start()
    yield a
    a.stop()


def tools_env(api, tmp_path, **kw):
    # the kubeconfig is written once: a command that runs already may be reading it
    kc = tmp_path / "kc"
    if not kc.exists():
        api.kubeconfig(kc)
    e = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "NAMESPACE": "default",
         "KUBECONFIG": str(kc)}
    e.update(kw)
    return e


def k8s(podrun, env, *args, timeout=60):
    return subprocess.run([podrun, "k8s", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_each_command_prints_what_k8s_tools_prints(api, tmp_path, podrun):
    pods = ready_pods()
    for p in pods:
        api.put_pod(p)
    env = tools_env(api, tmp_path)
    trainers = [p for p in pods if p["labels"].get("paddle-job")]
    pservers = [p for p in pods if p["labels"].get("paddle-job-pserver")]
    cases = [
        (("fetch_ips", PSERVER), tools_fetch_ips(pservers), 0),
        (("fetch_ips", PSERVER, "30236"), tools_fetch_ips(pservers), 0),
        (("fetch_ips", TRAINER), tools_fetch_ips(trainers), 0),
        (("fetch_endpoints", PSERVER, "30236"), tools_fetch_endpoints(pservers, "30236"), 0),
        (("count_pods_by_phase", TRAINER, "Failed"), tools_count(trainers, "Failed"), 0),
        (("count_pods_by_phase", TRAINER, "Terminating"), tools_count(trainers, "Terminating"),
         0),
        (("count_pods_by_phase", TRAINER, "Running"), tools_count(trainers, "Running"), 0),
        (("fetch_ips", "paddle-job=nobody"), "\n", 0),
        (("wait_pods_running", TRAINER, "2"), f"label selector: {TRAINER}, desired: 2\n", 0),
        (("wait_containers_ready", PSERVER),
         f"label selector: {PSERVER}, wait all containers ready\n", 0),
    ]
    for args, want, code in cases:
        r = k8s(podrun, env, *args)
        assert (r.stdout, r.returncode) == (want, code), (args, r.stderr)
    # the golden bytes themselves, as k8s_tools.py's string sort gives them
    assert tools_fetch_ips(pservers) == "127.0.1.25,127.0.1.9\n"
    assert tools_fetch_ips(trainers) == "127.0.2.10,127.0.2.9\n"
    assert tools_count(trainers, "Failed") == "1\n"
    for name, ip in TRAINER_IPS.items():
        r = k8s(podrun, dict(env, POD_IP=ip), "fetch_id", TRAINER)
        assert r.stdout == tools_fetch_id(trainers, ip) and r.returncode == 0, r.stderr
    assert k8s(podrun, dict(env, POD_IP="127.0.2.10"), "fetch_id", TRAINER).stdout == "0\n"
    # not among the Running pods: None, and an exit status a script can test
    r = k8s(podrun, dict(env, POD_IP="127.0.2.1"), "fetch_id", TRAINER)
    assert (r.stdout, r.returncode) == ("None\n", 3)
    # the namespace from --namespace over NAMESPACE
    r = k8s(podrun, env, "--namespace", "other", "fetch_ips", TRAINER)
    assert (r.stdout, r.returncode) == ("\n", 0)


def test_paddle_k8s_flow(api, tmp_path, podrun):
    """Two pservers and two trainers start before their pods are Running; each waits, then
    computes its PADDLE_* environment from `podrun k8s` exactly as k8s_tools.py would have it."""
    pods = ready_pods()
    for p in pods:
        if p["name"] in PSERVER_IPS or p["name"] in TRAINER_IPS:
            api.put_pod(dict(p, phase="Pending", ip=None))
        else:
            api.put_pod(p)
    flow = tmp_path / "paddle_k8s"
    flow.write_text(FLOW)
    flow.chmod(0o755)
    roles = [(n, "PSERVER", ip) for n, ip in PSERVER_IPS.items()]
    roles += [(n, "TRAINER", ip) for n, ip in TRAINER_IPS.items()]
    procs = []
    for name, role, ip in roles:
        env = tools_env(api, tmp_path, K8S_TOOLS=f"{podrun} k8s", PADDLE_JOB_NAME=JOB,
                        PADDLE_TRAINING_ROLE=role, PADDLE_PSERVERS="2", PADDLE_TRAINERS="2",
                        PADDLE_INIT_PORT="30236", PADDLE_PORT="30236", POD_IP=ip,
                        ENTRY=ENTRY)
        procs.append(subprocess.Popen([str(flow)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    # all four wait for the pservers' pods, following the watch
    wait_for(lambda: api.open_watches() >= 4, 60,
             lambda: f"4 watches: {api.open_watches()}, exits {[p.poll() for p in procs]}")
    # trainers first: a pserver does not wait for them, and seed 003's pserver, started before
    # its trainers, got PADDLE_TRAINER_IPS= (empty) from k8s_tools.py as well
    order = list(TRAINER_IPS.items()) + list(PSERVER_IPS.items())
    for name, ip in order:
        labels = "paddle-job-pserver" if name in PSERVER_IPS else "paddle-job"
        api.put_pod({"name": name, "phase": "Running", "ip": ip, "labels": {labels: JOB}})
    outs, errs = [], []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        outs.append(out)
        errs.append(err)
    trainers = [p for p in pods if p["labels"].get("paddle-job")]
    pservers = [p for p in pods if p["labels"].get("paddle-job-pserver")]
    for (name, role, ip), out, err in zip(roles, outs, errs):
        lines = out.splitlines()
        want_id = tools_fetch_id(trainers if role == "TRAINER" else pservers, ip).strip()
        assert lines[-1] == (f"env role={role} id={want_id} "
                             f"pservers={tools_fetch_ips(pservers).strip()} "
                             f"endpoints={tools_fetch_endpoints(pservers, '30236').strip()} "
                             f"trainers={tools_fetch_ips(trainers).strip()}"), (out, err)
        # the waits print k8s_tools.py's lines: the header, then the count while it is short
        waits = [PSERVER] + ([TRAINER] if role == "TRAINER" else [])
        body = lines[:-1]
        for sel in waits:
            assert f"label selector: {sel}, desired: 2" in body, out
        assert all(l.startswith("label selector: ") or
                   (l.startswith("current cnt: ") and l.endswith(" sleep for 5 seconds..."))
                   for l in body), out
        assert any(l.startswith("current cnt: 0 ") for l in body), out
    ids = sorted(l.splitlines()[-1].split()[2] for l in outs)
    assert ids == ["id=0", "id=0", "id=1", "id=1"]
    # they followed a watch: one list per command, no 5 s polling
    lists = [q for q in api.request_log() if "watch" not in q["query"]]
    assert len(lists) == 2 * 5 + 2 * 7, len(lists)   # pserver: 5 commands, trainer: 7


def test_exit_codes(api, tmp_path, podrun):
    api.put_pod(trainer("t-0", phase="Pending"))
    env = tools_env(api, tmp_path)
    r = k8s(podrun, env, "--timeout", "1", "wait_pods_running", TRAINER, "1")
    assert r.returncode == 124 and "not done within 1s" in r.stderr
    assert r.stdout == (f"label selector: {TRAINER}, desired: 1\n"
                        "current cnt: 0 sleep for 5 seconds...\n")
    r = k8s(podrun, env, "--timeout", "1", "wait_containers_ready", TRAINER)
    assert r.returncode == 124
    assert r.stdout == (f"label selector: {TRAINER}, wait all containers ready\n"
                        "not all containers ready, sleep for 5 seconds...\n")
    for args in (["fetch_ips"], ["nope", "x"], ["wait_pods_running", TRAINER, "two"],
                 ["--timeout", "0", "fetch_ips", TRAINER], ["--bad", "fetch_ips", TRAINER],
                 ["fetch_endpoints", TRAINER], ["count_pods_by_phase", TRAINER, "x", "y"]):
        r = k8s(podrun, env, *args)
        assert r.returncode == 2 and r.stdout == "", args
        assert len(r.stderr.splitlines()) == 1 and "see podrun k8s --help" in r.stderr, args
    r = k8s(podrun, env, "--help")
    assert r.returncode == 0 and "exit status:" in r.stdout
    api.deny(["list"])
    r = k8s(podrun, env, "fetch_ips", TRAINER)
    assert r.returncode == 4 and r.stdout == ""
    assert 'verbs: ["get", "list", "watch"]' in r.stderr
    # no credentials at all
    r = k8s(podrun, {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "none")}, "fetch_ips",
            TRAINER)
    assert r.returncode == 1 and "no kubeconfig" in r.stderr
    # an API server that is not there: retried until --timeout, then 1
    env2 = dict(env, KUBECONFIG=str(api.kubeconfig(tmp_path / "kc2",
                                                   server="https://127.0.0.1:9")))
    r = k8s(podrun, env2, "--timeout", "1.5", "fetch_ips", TRAINER)
    assert r.returncode == 1 and "no answer from the API server within 1.5s" in r.stderr


def test_wait_follows_the_watch(api, tmp_path, podrun):
    """wait_pods_running returns as soon as the pods are Running, long before a 5 s poll would
    have looked again, and counts a pod being deleted as k8s_tools.py does (not Running)."""
    env = tools_env(api, tmp_path)
    api.put_pod(trainer("t-0", phase="Running", ip="127.0.2.1"))
    api.put_pod(trainer("t-1", phase="Running", ip="127.0.2.2", deleting=True))
    p = subprocess.Popen([podrun, "k8s", "wait_pods_running", TRAINER, "2"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # it listed one Running pod, and waits on the watch
    wait_for(lambda: api.open_watches() >= 1 or p.poll() is not None, 30, "the watch")
    assert p.poll() is None
    api.put_pod(trainer("t-2", phase="Running", ip="127.0.2.3"))
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert out == (f"label selector: {TRAINER}, desired: 2\n"
                   "current cnt: 1 sleep for 5 seconds...\n")
    watches = [q for q in api.request_log() if q["query"].get("watch")]
    assert len(watches) == 1


def test_paddle_k8s_entrypoint(api, tmp_path, podrun):
    """scripts/paddle_k8s, the entrypoint docker/volcano-ctr.yaml runs under podrun: each of two
    pservers and two trainers waits for its pods, then runs its command with the endpoints and
    its own index from the API."""
    for p in ready_pods():
        api.put_pod(p)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "podrun").symlink_to(podrun)
    script = str(pathlib.Path(__file__).resolve().parents[2] / "scripts" / "paddle_k8s")
    show = 'echo "id=$PADDLE_TRAINER_ID eps=$PADDLE_PSERVERS_IP_PORT_LIST ips=$PADDLE_TRAINER_IPS"'
    pservers = [p for p in ready_pods() if p["labels"].get("paddle-job-pserver")]
    trainers = [p for p in ready_pods() if p["labels"].get("paddle-job")]
    for ips, role in ((PSERVER_IPS, "PSERVER"), (TRAINER_IPS, "TRAINER")):
        for name, ip in ips.items():
            env = tools_env(api, tmp_path, PATH=f"{bindir}:{os.environ['PATH']}",
                            PADDLE_JOB_NAME=JOB, PADDLE_TRAINING_ROLE=role, PADDLE_PSERVERS="2",
                            PADDLE_TRAINERS="2", PADDLE_PORT="30236", POD_IP=ip)
            r = subprocess.run([script, "sh", "-c", show], env=env, capture_output=True,
                               text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            mine = trainers if role == "TRAINER" else pservers
            assert r.stdout.splitlines()[-1] == (
                f"id={tools_fetch_id(mine, ip).strip()} "
                f"eps={tools_fetch_endpoints(pservers, '30236').strip()} "
                f"ips={tools_fetch_ips(trainers).strip()}"), r.stdout
    r = subprocess.run([script], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "usage" in r.stderr
    r = subprocess.run([script, "true"], env={"PATH": os.environ["PATH"], "PADDLE_JOB_NAME": JOB,
                                              "PADDLE_TRAINING_ROLE": "CHIEF"},
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "PSERVER or TRAINER" in r.stderr
