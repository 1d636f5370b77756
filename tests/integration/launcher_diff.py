"""The worker's world under a real launcher against podrun's: the same command line through both,
each worker's environment, argv, command line, cwd and process group captured by
workers/capture.py, the launchers' exit codes and log files, and a comparer that sorts every
difference into equal, differs-expected (values that differ by nature: ports, run ids, temp
directories — each side's value only has to have the expected shape), differs, only-in-real
and only-in-podrun. The last three are findings: a test accepts one only where doc/frontends.md
lists it in that launcher's table (after a `<!-- launcher-diff: NAME -->` line), so the
documented differences are kept in one place, the doc, and a row whose fate says "fixed" is a
difference that must no longer be seen.

    real = run_side("real", [[TORCHRUN, "--nproc-per-node", "2", CAPTURE]])
    pod = run_side("podrun", [[PODRUN, "--nproc-per-node", "2", CAPTURE]])
    found = compare(real, pod, expected=TORCH_EXPECTED)
    assert_documented(found, "torchrun")
"""
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field

from conftest import ROOT

CAPTURE = str(pathlib.Path(__file__).resolve().parent / "workers" / "capture.py")
DOC = ROOT / "doc" / "frontends.md"

EQUAL, EXPECTED, DIFFERS, ONLY_REAL, ONLY_PODRUN = (
    "equal", "differs-expected", "differs", "only-in-real", "only-in-podrun")
FINDINGS = (DIFFERS, ONLY_REAL, ONLY_PODRUN)

# Variables whose values differ between any two runs of one launcher: only their shape is
# compared. Each launcher's test adds its own (a run id, the error file's temp directory).
COMMON_EXPECTED = {
    "LAUNCHER_DIFF_DIR": r"/.+",      # the harness's: each side captures into its own directory
    "MASTER_PORT": r"[0-9]+",         # a free port each run
    "TORCHELASTIC_RUN_ID": r".+",     # a fresh id per run where none was given
}


@dataclass
class Side:
    """One launcher's run: per node its exit code and output, per worker its capture."""
    name: str
    rcs: list
    outs: list
    errs: list
    workers: dict = field(default_factory=dict)   # key -> capture record

    def err_text(self):
        return "\n".join(f"--- {self.name} node {i} rc={rc}\nstdout:\n{o}\nstderr:\n{e}"
                         for i, (rc, o, e) in enumerate(zip(self.rcs, self.outs, self.errs)))


def worker_key(rec):
    """Which worker a capture is, the same on both sides: its global rank (Paddle's trainer id),
    "0" for a launcher that gives none; "RANK@N" in restart N."""
    env = rec["env"]
    restart = env.get("TORCHELASTIC_RESTART_COUNT", "0")
    for name in ("RANK", "PADDLE_TRAINER_ID", "PADDLE_GLOBAL_RANK"):
        if name in env:
            return env[name] + (f"@{restart}" if restart != "0" else "")
    return "0"


def run_side(name, cmds, env=None, cwd=None, timeout=180, key=worker_key, unset=()):
    """Runs the nodes' command lines `cmds` (one argv each, started together, each in its own
    session) with the test's environment plus `env`, less `unset`, waits for all of them (killing
    every node's session past timeout) and collects the workers' captures."""
    d = tempfile.mkdtemp(prefix=f"launcher-diff-{name}-")
    e = dict(os.environ)
    for k in unset:
        e.pop(k, None)
    e.update(env or {})
    e["LAUNCHER_DIFF_DIR"] = d
    files, procs = [], []
    try:
        for argv in cmds:
            f = tempfile.TemporaryFile(), tempfile.TemporaryFile()
            files.append(f)
            procs.append(subprocess.Popen([str(a) for a in argv], env=e, cwd=cwd, stdout=f[0],
                                          stderr=f[1], start_new_session=True))
        rcs = []
        for p in procs:
            try:
                rcs.append(p.wait(timeout=timeout))
            except subprocess.TimeoutExpired:
                for q in procs:
                    try:
                        os.killpg(q.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                for q in procs:
                    q.wait()
                raise AssertionError(f"{name}: {argv} still running after {timeout}s:\n"
                                     + _dump(name, [q.returncode for q in procs], files))
        side = Side(name, rcs, *zip(*[(_read(f[0]), _read(f[1])) for f in files]))
        side.outs, side.errs = list(side.outs), list(side.errs)
        for path in sorted(pathlib.Path(d).glob("[0-9]*.json")):
            rec = json.loads(path.read_text())
            k = key(rec)
            while k in side.workers:
                k += "+"
            side.workers[k] = rec
        return side
    finally:
        for f in files:
            f[0].close()
            f[1].close()
        shutil.rmtree(d, True)


def _read(f):
    f.seek(0)
    return f.read().decode(errors="replace")


def _dump(name, rcs, files):
    return "\n".join(f"--- node {i} rc={rc}\nstdout:\n{_read(f[0])}\nstderr:\n{_read(f[1])}"
                     for i, (rc, f) in enumerate(zip(rcs, files)))


@dataclass(frozen=True)
class Finding:
    key: str        # a variable's name, or "argv", "cwd", "exit code", "workers", ...
    kind: str       # DIFFERS, ONLY_REAL or ONLY_PODRUN
    real: object
    podrun: object
    where: str      # which worker or node

    def __str__(self):
        return f"{self.key} [{self.kind}] at {self.where}: real={self.real!r} podrun={self.podrun!r}"


def classify(name, real, pod, expected):
    """One variable's class: real or pod is None where that side lacks it."""
    if real is None and pod is None:
        return EQUAL
    if real is None:
        return ONLY_PODRUN
    if pod is None:
        return ONLY_REAL
    if real == pod:
        return EQUAL
    shape = expected.get(name)
    if shape is not None and re.fullmatch(shape, real) and re.fullmatch(shape, pod):
        return EXPECTED
    return DIFFERS


def compare_env(real_env, pod_env, expected=None):
    """{name: (class, real value, podrun value)} for every variable either side has."""
    exp = {**COMMON_EXPECTED, **(expected or {})}
    return {n: (classify(n, real_env.get(n), pod_env.get(n), exp), real_env.get(n),
                pod_env.get(n)) for n in sorted(set(real_env) | set(pod_env))}


def compare(real, pod, expected=None, fields=("argv", "cwd", "pgid_is_pid", "sid_is_pid"),
            argv_subs=()):
    """Every finding between two Sides: the nodes' exit codes, which workers ran, and per
    worker each variable and each of `fields` (argv's words after `argv_subs`, a list of
    (regex, replacement), so that a path that differs by nature compares equal)."""
    out = []
    if real.rcs != pod.rcs:
        out.append(Finding("exit code", DIFFERS, real.rcs, pod.rcs, "nodes"))
    if set(real.workers) != set(pod.workers):
        out.append(Finding("workers", DIFFERS, sorted(real.workers), sorted(pod.workers), "job"))
    for k in sorted(set(real.workers) & set(pod.workers)):
        r, p = real.workers[k], pod.workers[k]
        for name, (cls, rv, pv) in compare_env(r["env"], p["env"], expected).items():
            if cls in FINDINGS:
                out.append(Finding(name, cls, rv, pv, f"rank {k}"))
        for f in fields:
            rv, pv = r.get(f), p.get(f)
            if f in ("argv", "cmdline"):
                rv, pv = _subs(rv, argv_subs), _subs(pv, argv_subs)
            if rv != pv:
                out.append(Finding(f, DIFFERS, rv, pv, f"rank {k}"))
    return out


def _subs(words, subs):
    if words is None:
        return None
    for pat, rep in subs:
        words = [re.sub(pat, rep, w) for w in words]
    return words


def tree(root, subs=()):
    """A directory's files as {relative path: content}, each path and content passed through
    `subs` (regex, replacement) so that run ids and pids compare equal."""
    out = {}
    root = pathlib.Path(root)
    for p in sorted(root.rglob("*")):
        if p.is_file():
            rel, text = str(p.relative_to(root)), p.read_text(errors="replace")
            for pat, rep in subs:
                rel, text = re.sub(pat, rep, rel), re.sub(pat, rep, text)
            out[rel] = text
    return out


_ROW = re.compile(r"^\|(.+)\|\s*$")


def documented(launcher, doc=DOC):
    """The table of `launcher`'s differences in doc/frontends.md: {key: fate}, a key for each
    backquoted word of a row's first cell (`NAME`, `argv`, `exit code`, ...)."""
    lines = pathlib.Path(doc).read_text().splitlines()
    marker = f"<!-- launcher-diff: {launcher} -->"
    assert marker in lines, f"{doc} has no {marker!r} line before {launcher}'s table"
    rows = {}
    started = False
    for line in lines[lines.index(marker) + 1:]:
        m = _ROW.match(line)
        if not m:
            if started:
                break
            continue
        cells = [c.strip() for c in m.group(1).split("|")]
        if not started or set(cells[0]) <= set("-: "):
            started = True
            continue
        for name in re.findall(r"`([^`]+)`", cells[0]):
            rows[name] = cells[-1]
    assert rows, f"{launcher}'s table after {marker!r} in {doc} is empty"
    return rows


def is_fixed(fate):
    return fate.lower().startswith("fixed")


def assert_documented(found, launcher, doc=DOC):
    """Every finding is a difference that doc/frontends.md lists for `launcher` and that is not
    marked fixed; returns the keys seen."""
    rows = documented(launcher, doc)
    unexplained = [str(f) for f in found if f.key not in rows]
    regressed = [str(f) for f in found if f.key in rows and is_fixed(rows[f.key])]
    assert not unexplained, (f"differences from the real {launcher} that {doc.name}'s table does "
                             "not list:\n  " + "\n  ".join(unexplained))
    assert not regressed, (f"differences from the real {launcher} that {doc.name} says are "
                           "fixed:\n  " + "\n  ".join(regressed))
    return {f.key for f in found}
