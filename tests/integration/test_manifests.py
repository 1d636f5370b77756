"""The Kubernetes manifests under docker/: each parses, runs podrun with flags and environment
that podrun accepts (checked against `podrun --help` and `podrun --print-config`), and maps podrun's
exit codes onto its operator's restart or failure policy the way podrun's exit-code table intends:
1-127 permanent, >= 128 retryable, and a node stopped because of another node never decides the
job's fate by itself."""
import os
import pathlib
import re
import subprocess

import pytest
import yaml

from conftest import PODRUN, ROOT

DOCKER = ROOT / "docker"
MANIFESTS = sorted(p for p in DOCKER.iterdir() if p.suffix in (".yaml", ".yml"))

# podrun's exit-code table: what `--exit-code-<reason>` defaults to
NODE_CODES = {"peer-failure": 170, "peer-lost": 171, "store-lost": 172, "rdzv-timeout": 173,
              "hang": 174}
SIGNALLED = 128 + 15                      # podrun itself got SIGTERM (pod deleted, node drained)
PERMANENT = set(range(1, 128))            # a worker's own code, 2 usage, 126/127 program
# a node stopped because of another node: the other node's pod carries the cause
CONSEQUENCES = ("peer-failure", "peer-lost", "store-lost")

TERMINATION_LOG = "/dev/termination-log"


def run_podrun(*args, env=None):
    assert os.access(PODRUN, os.X_OK), f"{PODRUN} is not built"
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("PODRUN_", "PET_", "TORCHELASTIC_"))}
    e.update(env or {})
    return subprocess.run([PODRUN, *args], capture_output=True, text=True, env=e, timeout=10)


_help = {}


def podrun_help():
    if "text" not in _help:
        r = run_podrun("--help")
        assert r.returncode == 0, r.stderr
        _help["text"] = r.stdout
    return _help["text"]


def podrun_options():
    """{'--flag': takes_value} from --help: a flag followed by one space and a word takes a value."""
    opts = {}
    for m in re.finditer(r"^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)( \S)?", podrun_help(), re.M):
        opts[m.group(1)] = bool(m.group(2))
    assert "--nnodes" in opts and "--rdzv-endpoint" in opts, podrun_help()
    return opts


def rdzv_conf_keys():
    line = next(l for l in podrun_help().splitlines() if "--rdzv-conf" in l)
    return {k.strip() for k in line.split("K=V,...", 1)[1].split(",")}


def print_config(args, env):
    """podrun --print-config under this env and these args: {name: (value, source)}."""
    r = run_podrun("--print-config", *args, env=env)
    assert r.returncode == 0, f"podrun rejects {args} with {env}: {r.stderr}"
    cfg = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^(rdzv-conf \S+|\S+)\s+(.*?)\s+\(((?:[^()]|\([^()]*\))*)\)$", line)
        if m:
            cfg[m.group(1)] = (m.group(2), m.group(3))
        elif line.startswith("program"):
            cfg["program"] = (line.split(None, 1)[1].strip(), "")
    return cfg


# ---- the manifests' shapes ------------------------------------------------------------------

def docs(path):
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def all_docs():
    return [(p.name, d) for p in MANIFESTS for d in docs(p)]


def workload(kind_api, file=None):
    found = [(n, d) for n, d in all_docs() if (d["apiVersion"], d["kind"]) == kind_api
             and (file is None or n == file)]
    assert len(found) == 1, f"expected one {kind_api} in {file or 'docker/'}, found {len(found)}"
    return found[0]


def workloads(kind_api, file):
    return [d for n, d in all_docs() if (d["apiVersion"], d["kind"]) == kind_api and n == file]


def pod_templates(doc):
    """Every pod template of a workload, with the number of pods made from it."""
    spec = doc.get("spec")
    kind = (doc["apiVersion"], doc["kind"])
    if spec is None:
        return []
    if kind == ("kubeflow.org/v1", "PyTorchJob"):
        return [(r["template"], r.get("replicas", 1)) for r in spec["pytorchReplicaSpecs"].values()]
    if kind == ("batch.volcano.sh/v1alpha1", "Job"):
        return [(t["template"], t.get("replicas", 1)) for t in spec["tasks"]]
    if kind == ("jobset.x-k8s.io/v1alpha2", "JobSet"):
        return [(r["template"]["spec"]["template"],
                 r.get("replicas", 1) * r["template"]["spec"].get("parallelism", 1))
                for r in spec["replicatedJobs"]]
    if kind == ("batch/v1", "Job"):
        return [(spec["template"], spec.get("parallelism", 1))]
    if kind == ("batch.paddlepaddle.org/v1", "PaddleJob"):
        return [(spec[r]["template"], spec[r].get("replicas", 1))
                for r in ("worker", "ps", "heter") if r in spec]
    if kind == ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"):
        return [(r["template"]["spec"]["template"], r.get("replicas", 1))
                for r in spec["template"]["spec"]["replicatedJobs"]]
    if kind == ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"):
        lwt = spec["leaderWorkerTemplate"]
        return [(lwt.get("leaderTemplate", lwt["workerTemplate"]), spec.get("replicas", 1)),
                (lwt["workerTemplate"], spec.get("replicas", 1) * (lwt["size"] - 1))]
    return []


def podrun_container(template):
    cs = [c for c in template["spec"]["containers"]
          if c.get("command") and os.path.basename(c["command"][0]) == "podrun"]
    assert len(cs) == 1, f"one container must run podrun as its command: {template['spec']}"
    return cs[0]


def split_args(argv):
    """podrun's own options and the program, as podrun parses its command line."""
    opts, flags, i = podrun_options(), [], 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break
        name = a.split("=", 1)[0]
        name = "--" + name[2:].replace("_", "-") if name.startswith("--") else name
        flags.append(name)
        if opts.get(name) and "=" not in a:
            i += 1
        i += 1
    return flags, argv[i:]


def container_env(c, sample="0"):
    """The container's env as podrun would see it; downward-API values become `sample`."""
    env = {}
    for e in c.get("env", []):
        env[e["name"]] = e["value"] if "value" in e else sample
    return env


def trainjob_of(runtime):
    """The TrainJob under docker/ that uses this ClusterTrainingRuntime."""
    (tj,) = [d for _, d in all_docs() if d["kind"] == "TrainJob"
             and d["spec"]["runtimeRef"]["name"] == runtime["metadata"]["name"]]
    return tj


def trainer_status_env(ns, name):
    """What Kubeflow Trainer's trainjobstatus plugin gives the trainer container (its
    EnforcePodSpec: the webhook service, the status server's default port 10443, the
    projected volume's two files)."""
    d = "/var/run/secrets/kubeflow/trainer"
    return {"KUBEFLOW_TRAINER_SERVER_URL":
            f"https://kubeflow-trainer-controller-manager.kubeflow-system.svc:10443/apis/"
            f"trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{name}/status",
            "KUBEFLOW_TRAINER_SERVER_CA_CERT": f"{d}/ca.crt",
            "KUBEFLOW_TRAINER_SERVER_TOKEN": f"{d}/token"}


def operator_env(doc):
    """What the operator itself puts into the container's env (reference/k8s.md 1.2, 2;
    resilience.md 4.1, 4.3), for the first pod of the job."""
    if doc["kind"] == "PaddleJob":
        # paddle-operator: trainer 0, and the ConfigMap it makes once every pod has an IP
        spec = doc["spec"]
        nw, nps = spec["worker"].get("replicas", 1), spec.get("ps", {}).get("replicas", 0)
        port = 36123
        trainers = [f"10.0.1.{i + 1}" for i in range(nw)]
        return {"TRAINING_ROLE": "TRAINER", "PADDLE_TRAINING_ROLE": "TRAINER",
                "PADDLE_TRAINER_ID": "0", "POD_IP": trainers[0], "PADDLE_PORT": str(port),
                "TRAINER_PORTS_NUM": "20", "PADDLE_TRAINERS_NUM": str(nw),
                "PADDLE_TRAINERS": ",".join(trainers),
                "PADDLE_TRAINER_ENDPOINTS": ",".join(f"{t}:{port}" for t in trainers),
                "PADDLE_PSERVERS_IP_PORT_LIST": ",".join(f"10.0.2.{i + 1}:{port}"
                                                         for i in range(nps))}
    if doc["kind"] == "ClusterTrainingRuntime":
        tj = trainjob_of(doc)
        t, name = tj["spec"]["trainer"], tj["metadata"]["name"]
        # and, with the TrainJobStatus feature gate, the trainjobstatus plugin's status server
        ns = tj["metadata"].get("namespace", "default")
        return {"PET_NNODES": str(t["numNodes"]), "PET_NPROC_PER_NODE": str(t["numProcPerNode"]),
                "PET_NODE_RANK": "0", "PET_MASTER_ADDR": f"{name}-node-0-0.{name}",
                "PET_MASTER_PORT": "29500", "JOB_COMPLETION_INDEX": "0",
                **trainer_status_env(ns, name)}
    if doc["kind"] == "LeaderWorkerSet":
        name = doc["metadata"]["name"]
        return {"LWS_LEADER_ADDRESS": f"{name}-0.{name}.default",
                "LWS_GROUP_SIZE": str(doc["spec"]["leaderWorkerTemplate"]["size"]),
                "LWS_WORKER_INDEX": "0"}
    if doc["kind"] != "PyTorchJob":
        return {}
    spec, env = doc["spec"], {}
    if "nprocPerNode" in spec:
        env["PET_NPROC_PER_NODE"] = str(spec["nprocPerNode"])
    ep = spec.get("elasticPolicy")
    if ep is None:
        env["PET_NNODES"] = str(sum(r.get("replicas", 1)
                                    for r in spec["pytorchReplicaSpecs"].values()))
        return env
    worker = spec["pytorchReplicaSpecs"]["Worker"]
    port = ep.get("rdzvPort") or next(
        p["containerPort"] for p in podrun_container(worker["template"]).get("ports", [])
        if p["name"] == "pytorchjob-port")
    host = ep.get("rdzvHost") or f"{doc['metadata']['name']}-worker-0"
    env["PET_RDZV_ENDPOINT"] = f"{host}:{port}"
    env["PET_RDZV_BACKEND"] = ep.get("rdzvBackend", "c10d")
    lo, hi = ep.get("minReplicas"), ep.get("maxReplicas")
    lo, hi = lo if lo is not None else hi, hi if hi is not None else lo
    env["PET_NNODES"] = f"{lo}:{hi}" if lo is not None else str(worker.get("replicas", 1))
    if "maxRestarts" in ep:
        env["PET_MAX_RESTARTS"] = str(ep["maxRestarts"])
    if "rdzvId" in ep:
        env["PET_RDZV_ID"] = ep["rdzvId"]
    if ep.get("rdzvConf"):
        env["PET_RDZV_CONF"] = ",".join(f"{kv['key']}={kv['value']}" for kv in ep["rdzvConf"])
    return env


def resolved(doc, template):
    """podrun's resolved configuration in this pod, and the program it runs."""
    c = podrun_container(template)
    env = {**operator_env(doc), **container_env(c)}
    cfg = print_config(c["command"][1:] + c.get("args", []), env)
    return cfg, c


def exit_codes(cfg):
    return {r: int(cfg[f"exit-code-{r}"][0]) for r in NODE_CODES}


def failure_rules(job_spec):
    return job_spec["podFailurePolicy"]["rules"]


def exit_code_rules(rules, action):
    out = set()
    for r in rules:
        if r["action"] == action and "onExitCodes" in r:
            assert r["onExitCodes"]["operator"] == "In"
            out |= set(r["onExitCodes"]["values"])
    return out


# ---- tests -----------------------------------------------------------------------------------

def test_every_manifest_parses_and_each_operator_has_one():
    assert MANIFESTS, "no manifests under docker/"
    kinds = set()
    for name, d in all_docs():
        assert {"apiVersion", "kind", "metadata"} <= set(d), name
        if d["kind"] not in ("ServiceAccount", "Role", "RoleBinding", "Secret"):
            assert "spec" in d, name
        assert d["metadata"].get("name"), name
        kinds.add((d["apiVersion"], d["kind"]))
    assert {("kubeflow.org/v1", "PyTorchJob"), ("batch.volcano.sh/v1alpha1", "Job"),
            ("jobset.x-k8s.io/v1alpha2", "JobSet"), ("batch/v1", "Job"),
            ("batch.paddlepaddle.org/v1", "PaddleJob"),
            ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
            ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"),
            ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
            ("rbac.authorization.k8s.io/v1", "Role")} <= kinds


def test_dockerfile_env_is_podrun_s():
    opts = podrun_options()
    for m in re.finditer(r"^ENV\s+(PODRUN_|PET_)([A-Z_]+)=", (DOCKER / "Dockerfile").read_text(), re.M):
        assert "--" + m.group(2).lower().replace("_", "-") in opts, m.group(0)


def test_exit_code_flags_match_the_table():
    opts = podrun_options()
    text = podrun_help()
    for reason, code in NODE_CODES.items():
        flag = f"--exit-code-{reason}"
        assert flag in opts and opts[flag], f"{flag} missing from podrun --help"
        m = re.search(rf"{flag} \S+\s.*\[(\d+)\]", text)
        if m:
            assert int(m.group(1)) == code, (flag, m.group(0))
    # the retryable codes are >= 128 and the permanent ones below
    assert all(c >= 128 for c in NODE_CODES.values()) and SIGNALLED >= 128
    assert not PERMANENT & set(NODE_CODES.values())


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_podrun_flags_env_and_program_are_podrun_s(path):
    opts, keys = podrun_options(), rdzv_conf_keys()
    dockerfile = (DOCKER / "Dockerfile").read_text()
    runs = [d for d in docs(path) if pod_templates(d)]
    assert runs or path.name in ("rbac.yaml", "security.yaml"), f"{path.name} runs no pods"
    for d in runs:
        for template, _ in pod_templates(d):
            c = podrun_container(template)
            argv = c["command"][1:] + c.get("args", [])
            flags, program = split_args(argv)
            for f in flags:
                assert f in opts, f"{path.name}: podrun has no option {f}"
            envs = {**operator_env(d), **container_env(c)}
            for name in envs:
                for pre in ("PODRUN_", "PET_"):
                    if name.startswith(pre):
                        flag = "--" + name[len(pre):].lower().replace("_", "-")
                        assert flag in opts, f"{path.name}: {name} is no podrun option"
            for conf in [envs.get("PODRUN_RDZV_CONF"), envs.get("PET_RDZV_CONF")] + [
                    argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--rdzv-conf"]:
                for kv in (conf or "").split(","):
                    if kv:
                        assert kv.split("=", 1)[0] in keys, f"{path.name}: rdzv-conf {kv}"
            assert program, f"{path.name}: no program after podrun's options"
            # the image has the program where the manifest says
            assert re.search(rf"^COPY .* {re.escape(program[0])}$", dockerfile, re.M), program
            cfg, _ = resolved(d, template)
            assert cfg["program"][0] == " ".join(program)
            # podrun writes the root cause where Kubernetes reads it
            assert c.get("terminationMessagePath", TERMINATION_LOG) == TERMINATION_LOG


def test_pytorchjob_exit_code_policy_and_env_only_config():
    name, d = workload(("kubeflow.org/v1", "PyTorchJob"))
    job = d["metadata"]["name"]
    for rtype, r in d["spec"]["pytorchReplicaSpecs"].items():
        assert r["restartPolicy"] == "ExitCode", f"{rtype}: only ExitCode tells codes apart"
        containers = r["template"]["spec"]["containers"]
        # the operator reads the exit code of the container named pytorch: it must be podrun
        assert podrun_container(r["template"])["name"] == "pytorch"
        assert [c["name"] for c in containers].count("pytorch") == 1
        cfg, c = resolved(d, r["template"])
        # every code podrun uses for "stopped because of someone else" is retryable (>= 128)
        assert all(code >= 128 for code in exit_codes(cfg).values()), exit_codes(cfg)
        # configured from the operator's env: c10d at <job>-worker-0, which is pod 0's hostname
        assert cfg["rdzv-backend"] == ("c10d", "env PET_RDZV_BACKEND")
        assert cfg["rdzv-endpoint"][0].split(":")[0] == f"{job}-worker-0"
        assert cfg["nnodes"][1] == "env PET_NNODES"
        ep = d["spec"]["elasticPolicy"]
        lo, hi = ep["minReplicas"], ep["maxReplicas"]
        assert lo <= r["replicas"] <= hi
        assert cfg["max-restarts"] == (str(ep["maxRestarts"]), "env PET_MAX_RESTARTS")
        port = next(p["containerPort"] for p in c["ports"] if p["name"] == "pytorchjob-port")
        assert port == ep["rdzvPort"] == int(cfg["rdzv-endpoint"][0].split(":")[1])
        assert not [a for a in c.get("args", []) if a.startswith("-")], \
            "configuration comes from the env (PET_*/PODRUN_*) only"
    # pods still running once the job has failed are stopped
    assert d["spec"]["runPolicy"]["cleanPodPolicy"] in ("Running", "All")


def test_volcano_job_policies_restart_on_pod_failed():
    name, d = workload(("batch.volcano.sh/v1alpha1", "Job"), "volcano-job.yaml")
    spec, job = d["spec"], d["metadata"]["name"]
    assert {"svc", "env"} <= set(spec["plugins"])
    pols = spec["policies"]
    # the first matching policy wins: code rules come before the catch-all event rules
    restart = [i for i, p in enumerate(pols)
               if p.get("event") == "PodFailed" or "PodFailed" in p.get("events", [])]
    assert restart and pols[restart[0]]["action"] == "RestartJob"
    for i, p in enumerate(pols):
        assert not ("event" in p and "exitCode" in p), "event and exitCode exclude each other"
        if "exitCode" in p:
            assert i < restart[0]
            assert p["exitCode"] != 0
            if p["action"] in ("TerminateJob", "AbortJob", "CompleteJob"):
                assert p["exitCode"] in PERMANENT, f"retryable code {p['exitCode']} ends the job"
    assert any(p.get("event") == "PodEvicted" and p["action"] == "RestartJob" for p in pols)
    for t in spec["tasks"]:
        tmpl = t["template"]
        assert tmpl["spec"]["restartPolicy"] == "Never", "OnFailure never lets PodFailed fire"
        # Volcano reads containers[0]'s exit code
        assert tmpl["spec"]["containers"][0] is podrun_container(tmpl)
        cfg, _ = resolved(d, tmpl)
        codes = exit_codes(cfg)
        stopping = {p["exitCode"] for p in pols
                    if "exitCode" in p and p["action"] != "RestartJob"}
        assert not stopping & set(codes.values()), "a node stopped by another must restart the job"
        assert int(cfg["nnodes"][0]) == t["replicas"] == spec["minAvailable"]
        # svc plugin: pod 0 is <job>-<task>-0.<job>; its hostname makes it the store host
        assert cfg["rdzv-backend"][0] == "c10d"
        assert cfg["rdzv-endpoint"][0].split(":")[0] == f"{job}-{t['name']}-0.{job}"


def check_pod_failure_policy(job_spec, template, cfg):
    """podFailurePolicy rules against podrun's exit-code table, and the API's own rules."""
    rules = failure_rules(job_spec)
    assert len(rules) <= 20
    assert template["spec"]["restartPolicy"] == "Never", "podFailurePolicy needs Never"
    assert job_spec.get("podReplacementPolicy", "Failed") == "Failed"
    cname = podrun_container(template)["name"]
    for r in rules:
        assert r["action"] in ("FailJob", "FailIndex", "Ignore", "Count")
        if "onExitCodes" in r:
            oc = r["onExitCodes"]
            assert oc["containerName"] == cname
            vals = oc["values"]
            assert vals == sorted(set(vals)) and len(vals) <= 255 and 0 not in vals
        if "onPodConditions" in r:
            assert all(c["type"] == "DisruptionTarget" and c.get("status") == "True"
                       for c in r["onPodConditions"])
    codes = exit_codes(cfg)
    # permanent: exactly the codes below 128 fail the job
    assert exit_code_rules(rules, "FailJob") == PERMANENT
    # "do not retry" (--fatal-exit-codes): every node's code fails the job at once
    assert int(cfg["exit-code-fatal"][0]) in exit_code_rules(rules, "FailJob")
    # nodes stopped because of another node are replaced, not counted; nothing else is ignored
    ignored = exit_code_rules(rules, "Ignore")
    assert ignored == {codes[r] for r in CONSEQUENCES}
    # retryable codes are counted (never ignored, never fatal)
    for r in ("rdzv-timeout", "hang"):
        assert codes[r] not in ignored | PERMANENT
    assert SIGNALLED not in ignored | PERMANENT
    # a disruption (preemption, drain) is not the job's fault
    assert any(r["action"] == "Ignore" and "onPodConditions" in r for r in rules)


def test_jobset_failure_policy_on_podrun_codes():
    name, d = workload(("jobset.x-k8s.io/v1alpha2", "JobSet"), "jobset.yaml")
    spec, js = d["spec"], d["metadata"]["name"]
    fp = spec["failurePolicy"]
    assert fp["maxRestarts"] >= 1
    by_reason = {reason: r["action"] for r in fp["rules"] for reason in r["onJobFailureReasons"]}
    assert by_reason["PodFailurePolicy"] == "FailJobSet"          # FailJob: permanent codes
    assert by_reason.get("BackoffLimitExceeded", "RestartJobSet") == "RestartJobSet"
    sub = spec.get("network", {}).get("subdomain", js)
    for rj in spec["replicatedJobs"]:
        job_spec = rj["template"]["spec"]
        assert job_spec["backoffLimit"] == 0, "any counted pod failure restarts the JobSet"
        assert job_spec.get("completionMode", "Indexed") == "Indexed"
        tmpl = job_spec["template"]
        cfg, _ = resolved(d, tmpl)
        check_pod_failure_policy(job_spec, tmpl, cfg)
        assert int(cfg["nnodes"][0]) == rj.get("replicas", 1) * job_spec["parallelism"] \
            == rj.get("replicas", 1) * job_spec["completions"]
        # pod 0 of job 0: <jobset>-<rjob>-0-0.<subdomain>, its hostname makes it the store host
        assert cfg["rdzv-endpoint"][0].split(":")[0] == f"{js}-{rj['name']}-0-0.{sub}"


def test_indexed_job_pod_failure_policy_and_service():
    name, d = workload(("batch/v1", "Job"))
    spec, job = d["spec"], d["metadata"]["name"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"]
    assert spec["backoffLimit"] >= 1
    tmpl = spec["template"]
    cfg, c = resolved(d, tmpl)
    check_pod_failure_policy(spec, tmpl, cfg)
    assert int(cfg["nnodes"][0]) == spec["completions"]
    # node rank = completion index, through the downward API
    ann = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    rank_env = [e for e in c["env"] if e["name"] in ("PODRUN_NODE_RANK", "PET_NODE_RANK")]
    assert rank_env and rank_env[0]["valueFrom"]["fieldRef"]["fieldPath"] == ann
    assert cfg["node-rank"][1].startswith("env ")
    # pod names resolve through a headless Service named like the pods' subdomain
    sub = tmpl["spec"]["subdomain"]
    svcs = [s for n, s in all_docs() if n == name and s["kind"] == "Service"]
    assert len(svcs) == 1 and svcs[0]["metadata"]["name"] == sub
    assert svcs[0]["spec"]["clusterIP"] == "None"
    assert svcs[0]["spec"]["selector"] == {"batch.kubernetes.io/job-name": job}
    host, port = cfg["rdzv-endpoint"][0].split(":")
    assert host == f"{job}-0.{sub}"
    assert int(port) in [p["port"] for p in svcs[0]["spec"]["ports"]]


def dshm(template, c):
    """/dev/shm is a memory emptyDir in this pod (the runtime's 64 MiB is too small)."""
    mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in template["spec"].get("volumes", [])}
    return any(p == "/dev/shm" and vols.get(n, {}).get("emptyDir", {}).get("medium") == "Memory"
               for n, p in mounts.items())


def test_paddlejobs_collective_and_ps():
    """paddle-operator's PaddleJob: the collective job of seeds 000/001 (GPU limit, /dev/shm) and
    parameter-server mode; podrun finds the whole job in the operator's env: every pod a node,
    trainer 0 at node rank 0 hosting the static store."""
    jobs = {d["metadata"]["name"]: d for d in workloads(("batch.paddlepaddle.org/v1", "PaddleJob"),
                                                         "paddlejob.yaml")}
    assert len(jobs) == 2
    collective = [d for d in jobs.values() if "ps" not in d["spec"]]
    ps = [d for d in jobs.values() if "ps" in d["spec"]]
    assert len(collective) == 1 and len(ps) == 1
    for d in jobs.values():
        spec = d["spec"]
        assert spec.get("cleanPodPolicy", "OnCompletion") in ("Always", "Never", "OnFailure",
                                                            "OnCompletion")
        nodes = sum(spec[r].get("replicas", 1) for r in ("worker", "ps", "heter") if r in spec)
        for template, _ in pod_templates(d):
            c = podrun_container(template)
            # the operator injects its env into containers[0] only, and reads `paddle`'s status
            assert template["spec"]["containers"][0] is c and c["name"] == "paddle"
            # no restarts of its own: a Failed pod fails the job; Never keeps it Failed
            assert template["spec"]["restartPolicy"] == "Never"
        cfg, c = resolved(d, spec["worker"]["template"])
        assert cfg["discovered"][0].startswith("PaddleJob (paddle-operator)")
        assert int(cfg["nnodes"][0]) == nodes   # trainers, then pservers: one job
        assert cfg["node-rank"] == ("0", "env PADDLE_TRAINER_ID (paddle-operator)")
        assert cfg["master-addr"][0] == "10.0.1.1"
    (d,) = collective
    tmpl = d["spec"]["worker"]["template"]
    c = podrun_container(tmpl)
    assert dshm(tmpl, c)
    gpus = int(c["resources"]["limits"]["nvidia.com/gpu"])
    cfg, _ = resolved(d, tmpl)
    assert int(cfg["nproc-per-node"][0]) == gpus, "one worker per GPU of the limit"
    assert d["spec"]["worker"]["replicas"] == 2


def test_volcano_ctr_job_finds_its_pods_with_podrun_k8s():
    """Seed 003's CTR job: pservers and trainers under Volcano start through paddle_k8s, which
    asks `podrun k8s` where k8s_tools.py was asked; the pods' service account has the Role."""
    name, d = workload(("batch.volcano.sh/v1alpha1", "Job"), "volcano-ctr.yaml")
    spec, job = d["spec"], d["metadata"]["name"]
    flow = (ROOT / "scripts" / "paddle_k8s").read_text()
    assert "podrun k8s" in flow and "k8s_tools" not in flow.split("\nset -eu", 1)[1]
    roles = {}
    for t in spec["tasks"]:
        tmpl = t["template"]
        assert tmpl["spec"]["restartPolicy"] == "Never"
        c = podrun_container(tmpl)
        assert tmpl["spec"]["containers"][0] is c
        _, program = split_args(c["command"][1:] + c.get("args", []))
        assert program[0] == "/usr/local/bin/paddle_k8s" and len(program) > 1
        env = container_env(c)
        roles[env["PADDLE_TRAINING_ROLE"]] = (t, tmpl)
        assert env["PADDLE_JOB_NAME"] == job
        # the counts paddle_k8s waits for are the tasks' replicas
        reps = {tt["name"]: tt["replicas"] for tt in spec["tasks"]}
        assert int(env["PADDLE_PSERVERS"]) == reps["pserver"]
        assert int(env["PADDLE_TRAINERS"]) == reps["trainer"]
        assert any(e["name"] == "POD_IP" and e["valueFrom"]["fieldRef"]["fieldPath"] ==
                   "status.podIP" for e in c["env"])
        cfg, _ = resolved(d, tmpl)
        assert cfg["standalone"][0] == "true" and cfg["nnodes"][0] == "1"
        # the service account whose Role lets podrun k8s list and watch pods
        sa = tmpl["spec"]["serviceAccountName"]
        rbac = {dd["kind"]: dd for n, dd in all_docs() if n == "rbac.yaml"}
        assert rbac["ServiceAccount"]["metadata"]["name"] == sa
        assert rbac["RoleBinding"]["subjects"][0]["name"] == sa
    assert set(roles) == {"PSERVER", "TRAINER"}
    # the labels paddle_k8s selects on
    assert roles["PSERVER"][1]["metadata"]["labels"] == {"paddle-job-pserver": job}
    assert roles["TRAINER"][1]["metadata"]["labels"] == {"paddle-job": job}
    assert 'pserver_label="paddle-job-pserver=$job"' in flow
    assert 'trainer_label="paddle-job=$job"' in flow
    assert spec["minAvailable"] == sum(t["replicas"] for t in spec["tasks"])


def test_rbac_for_kubernetes_discovery():
    by_kind = {d["kind"]: d for n, d in all_docs() if n == "rbac.yaml"}
    assert set(by_kind) == {"ServiceAccount", "Role", "RoleBinding"}
    rule, events = by_kind["Role"]["rules"]
    assert rule["apiGroups"] == [""] and rule["resources"] == ["pods"]
    assert sorted(rule["verbs"]) == ["get", "list", "watch"], "read-only: podrun never writes"
    # the one write: Events on its own pod (doc/operators.md#events)
    assert events == {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}
    rb = by_kind["RoleBinding"]
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                             "name": by_kind["Role"]["metadata"]["name"]}
    assert rb["subjects"] == [{"kind": "ServiceAccount",
                               "name": by_kind["ServiceAccount"]["metadata"]["name"]}]
    # podrun's own line for a refused list names the Role these grant
    help_k8s = run_podrun("k8s", "--help").stdout
    assert "Role" in help_k8s


def test_trainjob_runtime_runs_podrun():
    """Kubeflow Trainer v2: the runtime's `node` container is podrun, configured by the torch
    plugin's PET_* alone (reserved names the manifest must not set), with the JobSet's and the
    Job's failure policies on podrun's exit codes."""
    name, rt = workload(("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"))
    _, tj = workload(("trainer.kubeflow.org/v1alpha1", "TrainJob"))
    assert tj["spec"]["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org",
                                        "kind": "ClusterTrainingRuntime",
                                        "name": rt["metadata"]["name"]}
    assert "torch" in rt["spec"]["mlPolicy"]
    js = rt["spec"]["template"]["spec"]
    (rj,) = js["replicatedJobs"]
    assert rj["name"] == "node", "the torch plugin names pods and PET_MASTER_ADDR after 'node'"
    job_spec = rj["template"]["spec"]
    tmpl = job_spec["template"]
    c = podrun_container(tmpl)
    assert c["name"] == "node"
    reserved = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR",
                "PET_MASTER_PORT", *trainer_status_env("", "")}
    assert not reserved & {e["name"] for e in c.get("env", [])}
    cfg, _ = resolved(rt, tmpl)
    check_pod_failure_policy(job_spec, tmpl, cfg)
    assert int(cfg["nnodes"][0]) == tj["spec"]["trainer"]["numNodes"]
    assert int(cfg["nproc-per-node"][0]) == tj["spec"]["trainer"]["numProcPerNode"]
    assert cfg["master-addr"][0] == f"{tj['metadata']['name']}-node-0-0.{tj['metadata']['name']}"
    assert cfg["master-port"] == ("29500", "env PET_MASTER_PORT")
    assert dshm(tmpl, c)
    # the TrainJob's status: podrun takes the status server the controller names, and reports
    for k, v in trainer_status_env(tj["metadata"].get("namespace", "default"),
                                   tj["metadata"]["name"]).items():
        setting = {"KUBEFLOW_TRAINER_SERVER_URL": "trainjob-server-url",
                   "KUBEFLOW_TRAINER_SERVER_CA_CERT": "trainjob-server-ca-cert",
                   "KUBEFLOW_TRAINER_SERVER_TOKEN": "trainjob-server-token"}[k]
        assert cfg[setting] == (v, f"env {k}"), (setting, cfg.get(setting))
    assert cfg["trainjob-status-interval"][0] not in ("0", "0s"), cfg["trainjob-status-interval"]


def test_leaderworkerset_group_is_one_job():
    name, d = workload(("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"))
    lwt = d["spec"]["leaderWorkerTemplate"]
    assert lwt["restartPolicy"] == "RecreateGroupOnPodRestart"
    for tmpl, _ in pod_templates(d):
        cfg, c = resolved(d, tmpl)
        assert cfg["discovered"][0].startswith("LeaderWorkerSet")
        assert int(cfg["nnodes"][0]) == lwt["size"]
        assert cfg["node-rank"] == ("0", "env LWS_WORKER_INDEX (LeaderWorkerSet)")
        assert cfg["master-addr"][0].startswith(f"{d['metadata']['name']}-0.")
        assert dshm(tmpl, c)


def test_host_network_notes():
    """Seed 002 runs its pods with hostNetwork: the PyTorchJob manifest says what changes (the
    DNS policy that keeps the job's names resolvable, the ports that must be free on the node)."""
    text = (DOCKER / "pytorchjob.yaml").read_text()
    assert "hostNetwork: true" in text and "dnsPolicy: ClusterFirstWithHostNet" in text


def test_jobset_in_place_restart():
    """JobSet's in-place restart with podrun as the container's command: what JobSet's webhook
    requires, the codes that restart the container in place and those that fail the JobSet, the
    downward API that names the JobSet and the pod, and the rights podrun's protocol uses."""
    file = "jobset-in-place.yaml"
    _, d = workload(("jobset.x-k8s.io/v1alpha2", "JobSet"), file)
    fp = d["spec"]["failurePolicy"]
    assert fp["restartStrategy"] == "InPlaceRestart"
    assert {r["action"] for r in fp["rules"] if "PodFailurePolicy" in r["onJobFailureReasons"]} \
        == {"FailJobSet"}
    fatal = {2, 93, 126, 127}   # usage, --exit-code-fatal, a program that cannot start
    for rj in d["spec"]["replicatedJobs"]:
        job = rj["template"]["spec"]
        assert job["backoffLimit"] == 2**31 - 1 and job["podReplacementPolicy"] == "Failed"
        assert job["completions"] == job["parallelism"]
        assert exit_code_rules(job["podFailurePolicy"]["rules"], "FailJob") == fatal
        tmpl = job["template"]
        assert tmpl["spec"]["restartPolicy"] == "Never"
        c = podrun_container(tmpl)
        assert c["restartPolicy"] == "Never"
        (rule,) = c["restartPolicyRules"]
        assert rule["action"] == "Restart" and rule["exitCodes"]["operator"] == "NotIn"
        assert set(rule["exitCodes"]["values"]) == fatal | {0}
        # every other code of podrun's table restarts the container in place
        assert not (set(NODE_CODES.values()) | {SIGNALLED, 1, 3}) & set(rule["exitCodes"]["values"])
        env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]}
        assert env["JOBSET_NAME"] == "metadata.annotations['jobset.sigs.k8s.io/jobset-name']"
        assert env["POD_NAME"] == "metadata.name"
        cfg, _ = resolved(d, tmpl)
        assert int(cfg["max-restarts"][0]) == fp["maxRestarts"], "one podrun restart, one attempt"
        assert int(cfg["nnodes"][0]) == rj.get("replicas", 1) * job["parallelism"]
        sa = tmpl["spec"]["serviceAccountName"]
    by_kind = {dd["kind"]: dd for n, dd in all_docs() if n == file}
    assert by_kind["ServiceAccount"]["metadata"]["name"] == sa
    assert by_kind["RoleBinding"]["subjects"] == [{"kind": "ServiceAccount", "name": sa}]
    rights = {(g, r, v) for rule in by_kind["Role"]["rules"] for g in rule["apiGroups"]
              for r in rule["resources"] for v in rule["verbs"]}
    assert {("", "pods", "patch"), ("", "events", "create"), ("jobset.x-k8s.io", "jobsets", "get"),
            ("jobset.x-k8s.io", "jobsets", "watch")} <= rights
    vap = by_kind["ValidatingAdmissionPolicy"]
    assert sa in vap["spec"]["matchConditions"][0]["expression"]
    assert "jobset.sigs.k8s.io/in-place-restart-attempt" in str(vap["spec"]["variables"])
    assert by_kind["ValidatingAdmissionPolicyBinding"]["spec"]["policyName"] == \
        vap["metadata"]["name"]
