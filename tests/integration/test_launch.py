"""podrun on one node: the workers' environment, real gloo jobs, exit codes, usage errors."""
import json
import os
import re

import pytest

from conftest import ROOT, TORCH_PY, free_port
from cluster import PY, run, worker

TORCHRUN_VARS = ["LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE",
                 "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                 "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
                 "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE"]
KNOBS = ["TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS"]


def envs_of(out):
    envs = {}
    for line in out.splitlines():
        m = re.match(r"\[rank (\d+)\]:ENV (.*)$", line)
        if m:
            envs[int(m.group(1))] = json.loads(m.group(2))
    return envs


def test_exact_env_per_rank(podrun, tmp_path):
    names = ",".join(TORCHRUN_VARS + KNOBS + ["USER_VAR"])
    port = str(free_port())
    r = run(podrun, "--nproc-per-node", "3", "--rdzv-id", "job7", "--role", "trainer",
            "--master-port", port, "--log-dir", str(tmp_path), *PY,
            worker("env_dump.py"), names,
            env={"USER_VAR": "kept", "NCCL_ASYNC_ERROR_HANDLING": "0", "RANK": "9"})
    assert r.returncode == 0, r.stderr
    envs = envs_of(r.stdout)
    assert sorted(envs) == [0, 1, 2]
    for rank, e in envs.items():
        assert e == {
            "LOCAL_RANK": str(rank), "RANK": str(rank), "GROUP_RANK": "0",
            "ROLE_RANK": str(rank), "ROLE_NAME": "trainer", "LOCAL_WORLD_SIZE": "3",
            "WORLD_SIZE": "3", "GROUP_WORLD_SIZE": "1", "ROLE_WORLD_SIZE": "3",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
            "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
            "TORCHELASTIC_RUN_ID": "job7", "TORCHELASTIC_USE_AGENT_STORE": "True",
            "TORCHELASTIC_ERROR_FILE": f"{tmp_path}/job7/attempt_0/{rank}/error.json",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
            "NCCL_ASYNC_ERROR_HANDLING": "0",        # the user's value is kept
            "OMP_NUM_THREADS": "1",                  # unset and more than one worker
            "USER_VAR": "kept",
        }
    # what was set for the user is said, in one line each
    assert re.search(r"^podrun sets .*OMP_NUM_THREADS=1", r.stderr, re.M)
    assert re.search(r"^podrun: the inherited RANK is replaced", r.stderr, re.M)


def test_env_single_worker_and_user_omp(podrun):
    r = run(podrun, *PY, worker("env_dump.py"), "OMP_NUM_THREADS,WORLD_SIZE")
    assert r.returncode == 0, r.stderr
    assert envs_of(r.stdout)[0] == {"OMP_NUM_THREADS": None, "WORLD_SIZE": "1"}
    assert "OMP_NUM_THREADS" not in r.stderr
    r = run(podrun, "--nproc-per-node", "2", *PY, worker("env_dump.py"), "OMP_NUM_THREADS",
            env={"OMP_NUM_THREADS": "4"})
    assert [e["OMP_NUM_THREADS"] for e in envs_of(r.stdout).values()] == ["4", "4"]
    assert "OMP_NUM_THREADS" not in r.stderr


@pytest.mark.parametrize("nproc", [2, 4])
def test_gloo_all_reduce(podrun, nproc):
    r = run(podrun, "--nproc-per-node", str(nproc), "--master-port", str(free_port()), *PY,
            worker("allreduce.py"), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    got = sorted(re.findall(r"^\[rank (\d+)\]:allreduce rank=(\d+) local_rank=\d+ world=(\d+) "
                            r"group_rank=0 restart=0 sum=(\d+)$", r.stdout, re.M))
    want = nproc * (nproc - 1) // 2   # every rank adds its rank
    assert got == sorted((str(i), str(i), str(nproc), str(want)) for i in range(nproc))


def test_standalone_gets_free_port_and_random_id(podrun):
    r = run(podrun, "--standalone", "--nproc-per-node", "2", *PY, worker("allreduce.py"),
            timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("sum=1") == 2   # ranks 0 + 1
    r = run(podrun, "--standalone", *PY, worker("env_dump.py"), "MASTER_PORT,TORCHELASTIC_RUN_ID")
    e = envs_of(r.stdout)[0]
    assert e["MASTER_PORT"] != "29500" and re.fullmatch(r"[0-9a-f]{32}", e["TORCHELASTIC_RUN_ID"])


@pytest.mark.parametrize("code", [0, 1, 2, 3, 42, 100, 255])
def test_exit_code_passes_through(podrun, code):
    r = run(podrun, "--nproc-per-node", "2", "sh", "-c", f'[ "$RANK" = 1 ] && exit {code}; exit 0')
    assert r.returncode == code, r.stderr


@pytest.mark.parametrize("sig", ["KILL", "SEGV", "ABRT", "TERM", "USR1"])
def test_signal_death_is_128_plus_signal(podrun, sig):
    import signal
    num = getattr(signal, "SIG" + sig)
    r = run(podrun, "--nproc-per-node", "2", "sh", "-c",
            f'[ "$RANK" = 1 ] && kill -{sig} $$; sleep 30')
    assert r.returncode == 128 + num, r.stderr
    assert f"SIG{sig}" in r.stderr and "rank      : 1 (local_rank: 1)" in r.stderr


def test_first_failure_wins_and_siblings_are_stopped(podrun):
    r = run(podrun, "--nproc-per-node", "3", "sh", "-c",
            '[ "$RANK" = 2 ] && { echo "why it broke" >&2; exit 7; }; exec sleep 30')
    assert r.returncode == 7
    assert re.search(r"^podrun: rank 2 \(pid \d+\) failed: exit code 7; stopping 2 workers",
                     r.stderr, re.M)
    assert "rank      : 2 (local_rank: 2)" in r.stderr
    assert "  stderr    : why it broke" in r.stderr


def test_program_not_found_127_not_executable_126(podrun, tmp_path):
    r = run(podrun, "no-such-program-anywhere")
    assert r.returncode == 127
    assert "cannot run 'no-such-program-anywhere': No such file or directory" in r.stderr
    f = tmp_path / "script"
    f.write_text("#!/bin/sh\necho hi\n")
    r = run(podrun, str(f))
    assert r.returncode == 126
    assert f"cannot run '{f}': Permission denied" in r.stderr
    r = run(podrun, "--python", "/no/such/python", str(tmp_path / "x.py"))
    assert r.returncode == 127 and "cannot run '/no/such/python'" in r.stderr


def test_program_in_path_as_execvp_finds_it(podrun, tmp_path):
    """A bare name runs the first executable file of that name in PATH: a file that is not
    executable, or a directory, is passed over, and a script without #! runs under /bin/sh."""
    first, second, third = (tmp_path / d for d in ("a", "b", "c"))
    for d in (first, second, third):
        d.mkdir()
    (first / "prog").write_text("#!/bin/sh\necho first\n")          # not executable
    (second / "prog").mkdir()                                         # a directory
    (third / "prog").write_text("echo third $0 \"$@\"\n")            # no #!
    (third / "prog").chmod(0o755)
    path = f"{first}:{second}:{third}:/usr/bin:/bin"
    r = run(podrun, "--nproc-per-node", "2", "prog", "x y", env={"PATH": path})
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == [f"[rank {i}]:third {third}/prog x y" for i in (0, 1)]
    r = run(podrun, "prog", env={"PATH": f"{first}:{second}"})
    assert r.returncode == 126 and "cannot run 'prog': Permission denied" in r.stderr


def test_script_without_hashbang_and_a_long_argv(podrun, tmp_path):
    """The /bin/sh fallback copies argv before it execs: 150,000 arguments (1.2 MB of
    pointers) still reach the workers, as from a shell."""
    (tmp_path / "prog").write_text('echo "$# $1 ${150000}"\n')        # no #!
    (tmp_path / "prog").chmod(0o755)
    args = ["a"] + ["x"] * 149998 + ["z"]
    r = run(podrun, "--nproc-per-node", "2", "prog", *args,
            env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == [f"[rank {i}]:150000 a z" for i in (0, 1)]


def test_python_program_kinds(podrun, tmp_path):
    (tmp_path / "mod_under_test.py").write_text("import sys; print('module', sys.argv[1:])\n")
    (tmp_path / "script.py").write_text("import sys; print('script', __name__, sys.argv[1:])\n")
    env = {"PYTHONPATH": str(tmp_path)}
    r = run(podrun, *PY, "-m", "mod_under_test", "a", "--b", env=env)
    assert r.stdout == "[rank 0]:module ['a', '--b']\n", r.stderr
    r = run(podrun, *PY, str(tmp_path / "script.py"), "x")
    assert r.stdout == "[rank 0]:script __main__ ['x']\n", r.stderr
    r = run(podrun, *PY, "--run-path", str(tmp_path / "script.py"), "y")
    assert r.stdout == "[rank 0]:script __main__ ['y']\n", r.stderr
    # --no-python execs a .py directly (here: not executable → 126)
    r = run(podrun, "--no-python", str(tmp_path / "script.py"))
    assert r.returncode == 126
    r = run(podrun, "sh", "-c", "echo $0", env={"PODRUN_PYTHON": "/nonexistent"})
    assert r.stdout == "[rank 0]:sh\n"


def test_error_file_in_report_and_termination_log(podrun, tmp_path):
    term = tmp_path / "termination-log"
    r = run(podrun, "--nproc-per-node", "2", "--term-timeout", "5", "--termination-log",
            str(term), *PY, worker("fail_record.py"), timeout=120)
    assert r.returncode == 1, r.stderr
    err = r.stderr
    assert "Root Cause (first observed failure):" in err
    assert "rank      : 1 (local_rank: 1)" in err
    assert "RuntimeError: boom from rank 1" in err
    assert "traceback : Traceback (most recent call last):" in err
    assert "about to fail" in err
    text = term.read_text()
    assert len(text.encode()) <= 4096
    assert text.startswith("podrun: rank 1 (local_rank 1, pid ")
    assert "RuntimeError: boom from rank 1" in text


def test_termination_log_cut_to_4096(podrun, tmp_path):
    term = tmp_path / "t"
    r = run(podrun, "--termination-log", str(term), "sh", "-c",
            'i=0; while [ $i -lt 300 ]; do echo "line $i of a long stderr" >&2; '
            'i=$((i+1)); done; exit 5')
    assert r.returncode == 5
    data = term.read_bytes()
    assert 0 < len(data) <= 4096
    assert data.startswith(b"podrun: rank 0") and b"exit code 5" in data
    assert b"line 299 of a long stderr" in data      # the end of stderr is what is kept


def test_success_and_stop_write_termination_log(podrun, tmp_path):
    term = tmp_path / "t"
    r = run(podrun, "--nproc-per-node", "2", "--termination-log", str(term), "true")
    assert r.returncode == 0 and term.read_text() == "podrun: all 2 workers exited 0\n"


def test_print_config_names_sources(podrun):
    r = run(podrun, "--nproc_per_node=3", "--rdzv-conf", "join_timeout=5,is_host=1",
            "--print-config", "prog", env={"PODRUN_MASTER_PORT": "1234", "PET_ROLE": "r",
                                           "PODRUN_ROLE": "q", "PET_MAX_RESTARTS": "2"})
    assert r.returncode == 0, r.stderr
    rows = {}
    for line in r.stdout.splitlines():
        m = re.match(r"(\S+(?: \S+)?)\s+(.*?)\s+\((.*)\)$", line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3))
    assert rows["nproc-per-node"] == ("3", "flag --nproc_per_node")
    assert rows["master-port"] == ("1234", "env PODRUN_MASTER_PORT")
    assert rows["role"] == ("q", "env PODRUN_ROLE")          # PODRUN_ wins over PET_
    assert rows["max-restarts"] == ("2", "env PET_MAX_RESTARTS")
    assert rows["rdzv-conf join_timeout"] == ("5s", "flag --rdzv-conf")
    assert rows["rdzv-conf is_host"] == ("true", "flag --rdzv-conf")
    assert rows["rdzv-conf last_call_timeout"] == ("30s", "default")
    assert rows["term-timeout"] == ("25s", "default")
    assert rows["nnodes"] == ("1", "default")
    assert "program" in r.stdout and "prog" in r.stdout


def test_flag_beats_env_and_both_spellings(podrun):
    r = run(podrun, "--nproc_per_node", "2", "--master_port=2222", "--print-config",
            env={"PODRUN_NPROC_PER_NODE": "5"})
    assert re.search(r"^nproc-per-node\s+2\s+\(flag --nproc_per_node\)", r.stdout, re.M)
    assert re.search(r"^master-port\s+2222\s+\(flag --master_port\)", r.stdout, re.M)


def test_nproc_auto_and_cpu(podrun):
    n = len(os.sched_getaffinity(0))
    for v in ("auto", "cpu"):
        r = run(podrun, "--nproc-per-node", v, "--print-config")
        assert re.search(rf"^nproc-per-node\s+{n} \({v}\)", r.stdout, re.M), r.stdout


def test_help_and_version(podrun):
    r = run(podrun, "--help")
    assert r.returncode == 0 and "usage: podrun" in r.stdout and "--nproc-per-node" in r.stdout
    r = run(podrun, "--version")
    assert r.returncode == 0 and re.fullmatch(r"podrun \d+\.\d+\.\d+\n", r.stdout)


BAD = [
    (["--nproc-per-node", "zero", "true"], {}, "--nproc-per-node 'zero'"),
    (["--nproc-per-node", "0", "true"], {}, "--nproc-per-node '0'"),
    (["--nproc-per-node", "gpu", "true"], {}, "no GPU found"),
    (["--nproc-per-node"], {}, "option --nproc-per-node needs a value"),
    (["--bogus", "true"], {}, "unknown option '--bogus'"),
    (["-z", "true"], {}, "unknown option '-z'"),
    ([], {}, "no program to run"),
    ([""], {}, "the program name is empty"),
    (["--rdzv-backend", "c10d", "--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:0", "true"], {},
     "--rdzv-endpoint 127.0.0.1:0"),
    (["--nnodes", "3:2", "true"], {}, "MIN is larger than MAX"),
    (["--nnodes", "x", "true"], {}, "--nnodes 'x'"),
    (["--node-rank", "-1", "true"], {}, "--node-rank '-1'"),
    (["--master-port", "70000", "true"], {}, "--master-port '70000'"),
    (["--master-port", "", "true"], {}, "--master-port ''"),
    (["--rdzv-backend", "zk", "true"], {}, "--rdzv-backend 'zk'"),
    (["--rdzv-backend", "etcd", "true"], {}, "--rdzv-backend etcd needs --rdzv-endpoint"),
    (["--rdzv-endpoint", "host:port", "true"], {}, "--rdzv-endpoint 'host:port'"),
    (["--rdzv-conf", "join_timeout=soon", "true"], {}, "--rdzv-conf join_timeout=soon"),
    (["--rdzv-conf", "bogus_key=1", "true"], {}, "unknown key 'bogus_key'"),
    (["--rdzv-conf", "novalue", "true"], {}, "'novalue' is not KEY=VALUE"),
    (["--term-timeout", "-3", "true"], {}, "--term-timeout '-3'"),
    (["--term-timeout", "5parsecs", "true"], {}, "--term-timeout '5parsecs'"),
    (["--max-restarts", "many", "true"], {}, "--max-restarts 'many'"),
    (["--redirects", "4", "true"], {}, "--redirects '4'"),
    (["--tee", "0:1,7:2", "--nproc-per-node", "2", "true"], {}, "local rank 7"),
    (["--local-ranks-filter", "0,a", "true"], {}, "--local-ranks-filter '0,a'"),
    (["--local-ranks-filter", "3", "true"], {}, "local rank 3 is not below"),
    (["-m", "--no-python", "true"], {}, "--module and --no-python"),
    (["--standalone", "--nnodes", "2", "true"], {}, "--standalone"),
    (["--node-rank", "1", "true"], {}, "--node-rank 1"),
    (["--start-method", "thread", "true"], {}, "--start-method 'thread'"),
    (["--no-python=maybe", "true"], {}, "--no-python 'maybe'"),
    (["true"], {"PODRUN_NPROC_PER_NODE": "many"}, "PODRUN_NPROC_PER_NODE='many'"),
    (["true"], {"PET_NNODES": "1:x"}, "PET_NNODES='1:x'"),
    (["true"], {"PODRUN_TERM_TIMEOUT": "soon"}, "PODRUN_TERM_TIMEOUT='soon'"),
    (["true"], {"PET_RDZV_CONF": "foo=1"}, "unknown key 'foo'"),
]


@pytest.mark.parametrize("args,env,needle", BAD, ids=[" ".join(a) or str(e) for a, e, _ in BAD])
def test_bad_input_is_one_line_exit_2(podrun, args, env, needle):
    r = run(podrun, *args, env=env)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("podrun: "), r.stderr
    assert needle in r.stderr, r.stderr


def test_demo_training_runs(podrun):
    """scripts/demo's job: DDP over gloo, every rank ends with the same weights."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = run(podrun, "--nproc-per-node", "2", "--master-port", str(free_port()), *PY,
            os.path.join(root, "scripts", "demo_train.py"), env={"DEMO_STEPS": "6"}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(re.findall(r"^\[rank [01]\]:step +5 loss ", r.stdout, re.M)) == 2
    assert r.stdout.count("identical on all 2 ranks: True") == 2


def test_dockerfile_runs_podrun_as_entrypoint():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    lines = [l.strip() for l in open(os.path.join(root, "docker", "Dockerfile"))
             if l.strip() and not l.startswith("#")]
    entry = [l for l in lines if l.startswith("ENTRYPOINT")]
    assert len(entry) == 1
    assert json.loads(entry[0][len("ENTRYPOINT"):]) == ["/usr/local/bin/podrun"]   # exec form
    assert any(l.startswith("COPY --from=build /build/launcher/podrun") for l in lines)


def test_store_port_taken_is_a_clear_error(podrun):
    """The job store cannot bind: one line naming the port and the flag, and podrun ends."""
    import socket
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run(podrun, "--master-port", str(port), "--no-python", "true", timeout=20)
    assert r.returncode == 1
    assert f":{port}" in r.stderr and "--master-port" in r.stderr, r.stderr


def test_join_timeout_said_once(podrun, port):
    r = run(podrun, "--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
            f"127.0.0.1:{port}", "--rdzv-conf", "join_timeout=1", "true", timeout=30)
    assert r.returncode == 173, r.stderr
    *lines, last = r.stderr.splitlines()
    assert "\n".join(lines).count("timed out") == 1, r.stderr
    # the last line, as for every ending, says it again with the exit code
    assert last.startswith("podrun: this node lost the job: rendezvous 'none' round 0 timed out "
                           "after 1s") and last.endswith("; exit code 173"), r.stderr


def test_rdzv_endpoint_defaults_are_documented_as_they_are(podrun):
    """What the endpoint is when it is not given, by backend, and the three copies that say so
    (--help, podrun(1), doc/usage.md) say just that."""
    r = run(podrun, "--nnodes", "2", "--rdzv-backend", "c10d", "true")
    assert r.returncode == 2 and "c10d needs --rdzv-endpoint" in r.stderr, r.stderr
    r = run(podrun, "--rdzv-backend", "c10d", "--print-config", "true")
    assert re.search(r"^rdzv-endpoint\s+localhost:29400 ", r.stdout, re.M), r.stdout
    r = run(podrun, "--rdzv-backend", "c10d", "--rdzv-endpoint", "10.0.0.9", "--print-config",
            "true")
    assert re.search(r"^rdzv-endpoint\s+10\.0\.0\.9:29400 ", r.stdout, re.M), r.stdout
    r = run(podrun, "--nnodes", "2", "--rdzv-backend", "static", "--master-addr", "10.0.0.8",
            "--master-port", "1234", "--print-config", "true")
    assert re.search(r"^rdzv-endpoint\s+10\.0\.0\.8:1234 ", r.stdout, re.M), r.stdout
    said = "c10d: required with more than one node (one node: localhost), port 29400 when left out"
    usage = (ROOT / "doc" / "usage.md").read_text()
    man = (ROOT / "doc" / "podrun.1").read_text().replace("\\-", "-")
    help_text = " ".join(run(podrun, "--help").stdout.split())
    assert "static: master addr:port by default; " + said in help_text, help_text
    assert "static: master addr:port by default; " + said in man
    assert ("static: master addr:port; " + said.replace("localhost", "`localhost`")) in usage
    assert "master addr:port (c10d: port 29400)" not in usage
