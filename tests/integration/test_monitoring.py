"""podrun's health port as Prometheus sees it, and docker/monitoring/ (PodMonitor, ServiceMonitor,
alert rules, Grafana dashboard) checked against what /metrics really serves: Debian's prometheus
scrapes a 3-node job through a failure and an in-place restart, and promtool checks the text and
the rules."""
import json
import os
import re
import shutil
import signal
import subprocess
import urllib.parse
import urllib.request

import pytest
import yaml

from cluster import WORKERS, Agent, agent_args, wait_for
from conftest import PODRUN, ROOT, free_port
from test_watch import get

MONITORING = ROOT / "docker" / "monitoring"
PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
need_prometheus = pytest.mark.skipif(not (PROMTOOL and PROMETHEUS),
                                     reason="needs Debian's prometheus (scripts/deps)")
METRIC = re.compile(r"\bpodrun_[a-z0-9_]+")


class Prometheus:
    """A prometheus of its own: its config, its storage in tmp_path, a free port."""

    def __init__(self, tmp_path, targets):
        self.port = free_port()
        cfg = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
               "scrape_configs": [{"job_name": "podrun",
                                   "static_configs": [{"targets": targets}]}]}
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(cfg))
        self.log = open(tmp_path / "prometheus.log", "w+")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        try:
            wait_for(what="prometheus ready", pred=lambda: self.proc.poll() is None and
                     get(self.port, "/-/ready")[0] == 200 or self.proc.poll() is not None,
                     timeout=60)
            assert self.proc.poll() is None, self.output()
        except BaseException:
            self.proc.kill()   # a prometheus that never got ready is not left running
            self.proc.wait(30)
            raise

    def output(self):
        self.log.seek(0)
        return self.log.read()[-4000:]

    def query(self, promql):
        """{instance: value} of an instant PromQL query over the HTTP API."""
        url = (f"http://127.0.0.1:{self.port}/api/v1/query?"
               + urllib.parse.urlencode({"query": promql}))
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return {s["metric"].get("instance", ""): float(s["value"][1])
                for s in body["data"]["result"]}

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)
        self.log.close()


def served_names(port):
    """The sample names an agent's /metrics serves."""
    st, body = get(port, "/metrics")
    assert st == 200
    return {line.split("{")[0].split(" ")[0] for line in body.splitlines()
            if line and not line.startswith("#")}


def dashboard_exprs():
    dash = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in dash["templating"]["list"] if "definition" in v]
    return exprs


def grafana_to_promql(expr):
    """A dashboard query with Grafana's variables as Prometheus would get it."""
    return (expr.replace("$__rate_interval", "1m").replace('=~"$job"', '=~".*"')
            .replace('=~"$instance"', '=~".*"'))


def rule_exprs():
    groups = yaml.safe_load((MONITORING / "alerts.rules.yaml").read_text())["groups"]
    return [r["expr"] for g in groups for r in g["rules"]]


@need_prometheus
def test_prometheus_scrapes_a_job_through_failure_and_restart(port, tmp_path):
    hports = [free_port() for _ in range(3)]
    fail_gate, done_gate = tmp_path / "fail", tmp_path / "done"
    env = {"FAIL_RANK": "2", "FAIL_GATE": str(fail_gate), "DONE_GATE": str(done_gate)}
    endpoint = f"127.0.0.2:{port}"
    targets = [f"127.0.0.{2 + i}:{hports[i]}" for i in range(3)]
    agents = [Agent(agent_args(3, 1, endpoint, f"127.0.0.{2 + i}", extra=[
        "--no-python", "--max-restarts", "2", "--health-port", str(hports[i])],
        script=os.path.join(WORKERS, "gate.sh")), env=env, name=f"node{i}") for i in range(3)]
    prom = None
    try:
        prom = Prometheus(tmp_path, targets)

        def every(promql, want):
            got = prom.query(promql)
            return sorted(got) == sorted(targets) and all(v == want for v in got.values())
        # round 0 running on every node, as Prometheus scraped it
        wait_for(what="round 0 in prometheus", pred=lambda: every(
            'podrun_agent_state{state="running"} * on(instance) podrun_rendezvous_rounds_total',
            1), timeout=60, every=0.5)
        assert every('podrun_restarts_total{counted="true"}', 0)
        assert every("podrun_failure_push_seconds_count", 0)
        assert every("up", 1)

        fail_gate.touch()   # rank 2 fails; the job restarts in place (round 1)
        wait_for(what="round 1 in prometheus", pred=lambda: every(
            'podrun_agent_state{state="running"} * on(instance) podrun_rendezvous_rounds_total',
            2), timeout=60, every=0.5)
        wait_for(what="restart counted", pred=lambda: every('podrun_restarts_total{counted="true"}', 1),
                 timeout=30, every=0.5)
        assert every("podrun_restarts_used", 1) and every("podrun_max_restarts", 2)
        assert every("podrun_failure_push_seconds_count", 1)
        # the series moved, as a range over the stored samples shows
        assert every("min_over_time(podrun_rendezvous_rounds_total[10m])", 1)
        assert every("max_over_time(podrun_rendezvous_rounds_total[10m])", 2)
        assert every("increase(podrun_restarts_total{counted=\"true\"}[10m]) > bool 0", 1)
        p99 = prom.query("histogram_quantile(0.99, podrun_failure_push_seconds_bucket)")
        assert sorted(p99) == sorted(targets)
        assert all(0 <= v < 10 for v in p99.values()), p99
        exits = prom.query('sum(podrun_worker_exits_total{cause="exit_code"})')
        assert list(exits.values()) == [1.0], exits

        # the rules and the dashboard evaluate against the live series without errors
        for e in rule_exprs() + [grafana_to_promql(x) for x in dashboard_exprs()
                                 if not x.startswith("label_values")]:
            prom.query(e)

        done_gate.touch()
        codes = [a.wait(60) for a in agents]
        assert codes == [0, 0, 0], [a.err for a in agents]
    finally:
        for a in agents:
            a.kill()
        if prom:
            prom.stop()


@need_prometheus
def test_promtool_checks_metrics_and_rules(port):
    hp = free_port()
    env = dict(os.environ, PODRUN_MASTER_PORT=str(port))
    p = subprocess.Popen([PODRUN, "--health-port", str(hp), "--max-restarts", "1", "sh", "-c",
                          "while :; do sleep 0.1; done"], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    try:
        wait_for(what="running", pred=lambda: "running" in get(hp, "/healthz")[1], timeout=30)
        st, body = get(hp, "/metrics")
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), \
            r.stdout + r.stderr
        names = served_names(hp)
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=30)
    r = subprocess.run([PROMTOOL, "check", "rules", str(MONITORING / "alerts.rules.yaml")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "SUCCESS: 4 rules found" in r.stdout, r.stdout + r.stderr
    # every metric the rules and the dashboard name is one a live agent serves (a one-node job
    # hosts its store, so the store's metrics are there too)
    used = {m for e in rule_exprs() + dashboard_exprs() for m in METRIC.findall(e)}
    assert used and used <= names, sorted(used - names)


def test_monitoring_manifests_parse():
    docs = {}
    for f in ("podmonitor.yaml", "servicemonitor.yaml", "prometheusrule.yaml"):
        for d in yaml.safe_load_all((MONITORING / f).read_text()):
            docs[d["kind"]] = d
    assert set(docs) == {"PodMonitor", "Service", "ServiceMonitor", "PrometheusRule"}
    port = "podrun-health"
    assert docs["PodMonitor"]["spec"]["podMetricsEndpoints"][0]["port"] == port
    assert docs["ServiceMonitor"]["spec"]["endpoints"][0]["port"] == port
    assert docs["Service"]["spec"]["ports"][0]["name"] == port
    sel = {"podrun.io/metrics": "true"}
    assert docs["PodMonitor"]["spec"]["selector"]["matchLabels"] == sel
    assert docs["Service"]["spec"]["selector"] == sel
    assert docs["ServiceMonitor"]["spec"]["selector"]["matchLabels"] == sel
    assert docs["Service"]["metadata"]["labels"] == sel
    # the operator's rules are the plain rules file's, the same groups
    plain = yaml.safe_load((MONITORING / "alerts.rules.yaml").read_text())
    assert docs["PrometheusRule"]["spec"] == plain
    for p in json.loads((MONITORING / "grafana-dashboard.json").read_text())["panels"]:
        assert p["targets"] and all(t["expr"] for t in p["targets"]), p["title"]
