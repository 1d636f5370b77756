"""podrun as one file (meson -Dstatic=true), built the way docker/Dockerfile's build stage builds
it and run where nothing but glibc is.

docker/Dockerfile cannot be built on this machine (the docker client has no daemon, Debian's
podman cannot start a container here, and no image registry is reachable), so this test is the
builder: it makes the stage's base image with debootstrap (debian:11 is Debian 11, "bullseye"),
replays the stage's COPY and RUN instructions in it with chroot — the same commands, read from
the Dockerfile — and takes the file the next stage copies. Then it checks that the file needs
glibc alone, no newer than Debian 11's 2.31 (Ubuntu 20.04's, the oldest base of today's CUDA
images), and runs jobs with it in a bare Debian 11 root that has no libuv, jansson, libyaml or
libcurl, and the Kubernetes client against the test API server with the libcurl of Debian 11 and
of this machine.

The roots are cached under build-static/ (a few minutes to make, once). Without debootstrap, or
without the network to make them, the tests that need them are skipped with the reason."""
import fcntl
import hashlib
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import PODRUN, ROOT, free_port

# the one thing this module makes in the source tree (conftest.py, "one worker") is made once
pytestmark = pytest.mark.xdist_group("static")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fakes"))
import k8s_api  # noqa: E402

DOCKERFILE = ROOT / "docker" / "Dockerfile"
CACHE = ROOT / "build-static"
MIRROR = "http://deb.debian.org/debian"
SUITES = {"debian:11": "bullseye", "debian:12": "bookworm"}
GLIBC_FLOOR = (2, 31)                 # Debian 11 / Ubuntu 20.04
GLIBC_LIBS = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1"}
CHROOT_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
              "HOME": "/root", "LANG": "C.UTF-8"}


# ---- docker/Dockerfile, as docker reads it -------------------------------------------------

def dockerfile_stages(path=DOCKERFILE):
    """[{'from': image, 'name': alias, 'steps': [(INSTRUCTION, text)]}], comments dropped and
    continuation lines joined."""
    stages, logical = [], ""
    for line in path.read_text().splitlines():
        if not logical and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            logical += line.rstrip()[:-1] + " "
            continue
        logical += line
        op, _, rest = logical.strip().partition(" ")
        logical = ""
        op, rest = op.upper(), rest.strip()
        if op == "FROM":
            m = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", rest, re.I)
            stages.append({"from": m.group(1), "name": m.group(2), "steps": []})
        else:
            stages[-1]["steps"].append((op, rest))
    return stages


def stage(name):
    return next(s for s in dockerfile_stages() if s["name"] == name)


def copy_args(text):
    words = text.split()
    opts = [w for w in words if w.startswith("--")]
    rest = [w for w in words if not w.startswith("--")]
    return opts, rest[:-1], rest[-1]


def test_dockerfile_stages_build_copy_and_demo():
    """build (Debian 11) -> podrun (the one file, from scratch) -> demo (the default stage)."""
    stages = dockerfile_stages()
    assert [s["name"] for s in stages] == ["build", "podrun", "demo"]
    build, one, demo = stages
    assert build["from"] in SUITES, "the build stage's base must be one debootstrap can make"
    # the build: the deps script alone first (its layer survives source changes), then the tree
    steps = build["steps"]
    assert [op for op, _ in steps] == ["COPY", "RUN", "COPY", "RUN"]
    assert steps[1][1] == "/src/scripts/static-deps"
    assert steps[3][1] == "/src/scripts/static-build /build"
    # the podrun stage holds that one file and nothing else
    assert one["from"] == "scratch"
    assert one["steps"] == [("COPY", "--from=build /build/launcher/podrun /usr/local/bin/podrun")]
    # the demo image takes it from there, as any training image would
    copies = [copy_args(t) for op, t in demo["steps"] if op == "COPY"]
    assert (["--from=podrun"], ["/usr/local/bin/podrun"], "/usr/local/bin/podrun") in copies
    entry = [t for op, t in demo["steps"] if op == "ENTRYPOINT"]
    assert [json.loads(e) for e in entry] == [["/usr/local/bin/podrun"]]
    # every file the stages copy from the context exists
    for s in stages:
        for op, t in s["steps"]:
            if op == "COPY":
                opts, srcs, _ = copy_args(t)
                if not any(o.startswith("--from=") for o in opts):
                    assert all((ROOT / src).exists() for src in srcs), t


def test_readme_two_line_dockerfile_copies_what_the_podrun_stage_holds():
    text = (ROOT / "README.md").read_text()
    m = re.search(r"```dockerfile\n(FROM .*\nCOPY --from=\S+ (\S+) (\S+)\n)```", text)
    assert m, "README shows the two-line Dockerfile"
    _, _, held = copy_args(stage("podrun")["steps"][0][1])
    assert m.group(2) == held == "/usr/local/bin/podrun"
    assert m.group(3) in ("/usr/local/bin/", "/usr/local/bin/podrun")


# ---- the documentation's links ----------------------------------------------------------------
# README.md is the front page and doc/*.md hold one topic each. Code cites a page's section as
# doc/<page>.md#<anchor>; a heading renamed or moved to another page must not leave a citation
# or a link pointing at nothing.

DOC_PAGES = sorted((ROOT / "doc").glob("*.md"))
CODE_DIRS = ("launcher", "rdzv", "include", "scripts", "docker", "tests")


def github_anchors(path):
    """The anchors GitHub gives a markdown file's headings: lower case, punctuation but '-'
    and '_' dropped, spaces to '-', '-1', '-2', ... for repeats; code blocks hold no headings."""
    seen, fence = {}, False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
            continue
        m = re.match(r"#{1,6} (.*)", line)
        if m and not fence:
            a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n = seen.get(a, 0)
            seen[a] = n + 1
            yield a if n == 0 else f"{a}-{n}"


def link_problem(base, target):
    """None where TARGET (FILE or FILE#ANCHOR, relative to folder BASE) exists, else why."""
    name, _, anchor = target.partition("#")
    path = (base / name).resolve() if name else base
    if not path.exists():
        return f"{target}: no file {path.relative_to(ROOT) if ROOT in path.parents else path}"
    if anchor and path.suffix == ".md" and anchor not in set(github_anchors(path)):
        return f"{target}: {path.relative_to(ROOT)} has no heading with anchor '{anchor}'"
    return None


def markdown_links(path):
    """(line number, target) of each link in a markdown file to a file or anchor of the tree."""
    for n, line in enumerate(path.read_text().splitlines(), 1):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if not re.match(r"[a-z]+:", target):
                yield n, target


def code_files():
    yield ROOT / "meson.build"
    yield ROOT / "doc" / "podrun.1"
    for d in CODE_DIRS:
        for f in sorted((ROOT / d).rglob("*")):
            if f.is_file() and "corpus" not in f.parts and "__pycache__" not in f.parts:
                yield f


def test_markdown_links_reach_a_page_and_heading():
    bad = []
    for md in [ROOT / "README.md", *DOC_PAGES]:
        for n, target in markdown_links(md):
            # "#anchor" is this file's own heading
            why = link_problem(md.parent, md.name + target if target.startswith("#") else target)
            if why:
                bad.append(f"{md.relative_to(ROOT)}:{n}: {why}")
    assert not bad, "\n".join(bad)


def test_code_cites_pages_that_have_the_heading():
    bad, cited = [], 0
    for f in code_files():
        try:
            text = f.read_text()
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            for target in re.findall(r"(?<![\w/.])((?:doc/[\w-]+\.md|README\.md)#[\w-]+)", line):
                cited += 1
                why = link_problem(ROOT, target)
                if why:
                    bad.append(f"{f.relative_to(ROOT)}:{n}: {why}")
            if re.search(r'README[ ]"', line):
                bad.append(f"{f.relative_to(ROOT)}:{n}: cites a README heading by name; "
                           "cite the page: doc/<page>.md#<anchor>")
    assert cited, "the code cites doc pages"
    assert not bad, "\n".join(bad)


def test_readme_links_every_page():
    linked = {(ROOT / t.partition("#")[0]).resolve()
              for _, t in markdown_links(ROOT / "README.md") if not t.startswith("#")}
    assert DOC_PAGES
    missing = [p.name for p in DOC_PAGES if p.resolve() not in linked]
    assert not missing, f"README.md links no page named {missing}"


# ---- rdzv/'s layers ---------------------------------------------------------------------------
# base/ knows no job; store/ (the job store, libpodrun) and etcd/ (the etcd client) stand on base/
# alone. The rendezvous (rdzv/*.h at the top level) and the launcher sit above them: a file under
# the three layers that includes one of those pulls the job into code that must not know it.

RDZV_LAYERS = {"base": {"base"}, "store": {"base", "store"}, "etcd": {"base", "etcd"}}


def project_includes(path):
    """(line number, included path) of each #include of a path under rdzv/ or launcher/."""
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        m = re.match(r'\s*#\s*include\s*["<]((?:rdzv|launcher)/[^">]+)[">]', line)
        if m:
            yield n, m.group(1)


def layer_problems(root):
    """'FILE:LINE includes PATH' for each include a layer of rdzv/ under root may not make."""
    bad = []
    for layer, allowed in RDZV_LAYERS.items():
        for f in sorted((root / "rdzv" / layer).rglob("*.[ch]")):
            for n, inc in project_includes(f):
                parts = inc.split("/")
                if parts[0] != "rdzv" or len(parts) < 3 or parts[1] not in allowed:
                    bad.append(f"{f.relative_to(root)}:{n} includes {inc}")
    return bad


def test_rdzv_layers_include_nothing_above_them():
    assert any(True for _ in project_includes(ROOT / "rdzv" / "store" / "server.c"))
    bad = layer_problems(ROOT)
    assert not bad, "rdzv/base/, rdzv/store/ and rdzv/etcd/ include only their own and lower " \
                    "layers (base/ is the lowest):\n" + "\n".join(bad)

# ---- the roots --------------------------------------------------------------------------------

def network_reason():
    try:
        urllib.request.urlopen(f"{MIRROR}/dists/bullseye/Release", timeout=15).close()
        return None
    except Exception as e:   # noqa: BLE001 — any failure means no network for debootstrap
        return f"{MIRROR} is not reachable ({e})"


def sh(*cmd, timeout=1800, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if r.returncode:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n"
                           f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


def in_root(root, argv, src=None, env=None):
    """argv chrooted into root, with /proc and (read-only) the tree at /src, in a mount
    namespace of its own so that nothing stays mounted, and an environment of its own."""
    mounts = f"mount -t proc proc {shlex.quote(str(root))}/proc"
    if src:
        r, t = shlex.quote(str(root)), shlex.quote(str(src))
        mounts += f" && mount --bind {t} {r}/src && mount -o remount,bind,ro {r}/src"
    e = " ".join(shlex.quote(f"{k}={v}") for k, v in dict(CHROOT_ENV, **(env or {})).items())
    return ["unshare", "-m", "--", "sh", "-c", f'{mounts} && exec env -i {e} chroot "$0" "$@"',
            str(root), *argv]


def debootstrap(suite, dest):
    """A minimal root of `suite`, made once: a half-made one is never taken for a whole one."""
    done = dest / ".podrun-complete"
    if done.exists():
        return dest
    if not shutil.which("debootstrap"):
        pytest.skip("debootstrap is not installed (scripts/deps installs it)")
    reason = network_reason()
    if reason:
        pytest.skip(f"cannot make a {suite} root: {reason}")
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    sh("debootstrap", "--variant=minbase", suite, str(tmp), MIRROR, timeout=3600)
    (tmp / ".podrun-complete").write_text(suite)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


def copy_root(base, dest):
    if not (dest / ".podrun-complete").exists():
        shutil.rmtree(dest, ignore_errors=True)
        sh("cp", "-a", str(base), str(dest))
    return dest


def build_in_root(root):
    """Replays the build stage in root: each COPY must put context paths at /src (the tree is
    mounted there), each RUN runs as `sh -c`. RUNs before the whole tree is copied are cached by
    what they see (their text and the files copied so far), as docker caches layers."""
    key = hashlib.sha256()
    whole_tree = False
    for op, text in stage("build")["steps"]:
        if op == "COPY":
            _, srcs, dst = copy_args(text)
            for s in srcs:
                want = "/src" if s == "." else f"/src/{s}"
                assert dst.rstrip("/") in (want, "/src"), f"COPY {text}: the tree is at /src"
                if s == ".":
                    whole_tree = True
                else:
                    key.update((ROOT / s).read_bytes())
        elif op == "RUN":
            key.update(text.encode())
            mark = root / f".podrun-run-{key.hexdigest()[:16]}"
            if not whole_tree and mark.exists():
                continue
            if not whole_tree:
                reason = network_reason()
                if reason:
                    pytest.skip(f"cannot install the build stage's packages: {reason}")
                shutil.copy("/etc/resolv.conf", root / "etc" / "resolv.conf")
            r = subprocess.run(in_root(root, ["/bin/sh", "-c", text], src=ROOT),
                               capture_output=True, text=True, timeout=3600)
            assert r.returncode == 0, f"RUN {text}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
            if not whole_tree:
                mark.write_text(text)
            else:
                print(r.stdout.strip())
    _, srcs, _ = copy_args(stage("podrun")["steps"][0][1])
    return root / srcs[0].lstrip("/")


@pytest.fixture(scope="module")
def roots():
    """(the static podrun, the build root, a bare root) — made and built once per run."""
    CACHE.mkdir(exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        suite = SUITES[stage("build")["from"]]
        base = debootstrap(suite, CACHE / f"{suite}-base")
        build = copy_root(base, CACHE / f"{suite}-build")
        bare = copy_root(base, CACHE / f"{suite}-bare")
        (build / "src").mkdir(exist_ok=True)
        t0 = time.monotonic()
        binary = build_in_root(build)
        print(f"static build: {time.monotonic() - t0:.1f} s, {binary.stat().st_size} bytes")
        shutil.copy(binary, bare / "usr" / "local" / "bin" / "podrun")
        yield binary, build, bare


# ---- what the file needs ----------------------------------------------------------------------

def needed(path):
    out = sh("objdump", "-p", str(path)).stdout
    return {l.split()[1] for l in out.splitlines() if l.split()[:1] == ["NEEDED"]}


def glibc_versions(path):
    out = sh("objdump", "-T", str(path)).stdout
    return {tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_([0-9.]+)", out)}


def test_one_file_needs_glibc_alone(roots):
    binary, _, _ = roots
    libs = needed(binary)
    assert libs <= GLIBC_LIBS, f"needs more than glibc: {libs - GLIBC_LIBS}"
    floor = max(glibc_versions(binary))
    assert floor <= GLIBC_FLOOR, f"needs glibc {floor}, newer than {GLIBC_FLOOR}"
    print(f"one file: {binary.stat().st_size} bytes, glibc >= {'.'.join(map(str, floor))}, "
          f"NEEDED {sorted(libs)}")
    # the ordinary build is the one that links the libraries (else this test proves nothing)
    assert {"libuv.so.1", "libjansson.so.4"} <= needed(PODRUN)


# ---- jobs in a bare root ------------------------------------------------------------------

def chroot_podrun(root, args, env=None):
    return in_root(root, ["/usr/local/bin/podrun", *args], env=env)


def test_bare_root_has_none_of_the_libraries(roots):
    _, _, bare = roots
    libdir = bare / "usr" / "lib" / "x86_64-linux-gnu"
    present = [p.name for p in libdir.iterdir()
               if re.match(r"lib(uv|jansson|yaml|curl)", p.name)]
    assert not present, present
    # the ordinary build cannot start there
    shutil.copy(PODRUN, bare / "tmp" / "podrun-linked")
    r = subprocess.run(in_root(bare, ["/tmp/podrun-linked", "--version"]),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 127 and "error while loading shared libraries" in r.stderr, r


def start_chroot_agents(root, n, nproc, port, extra, script):
    procs = []
    for i in range(n):
        addr = f"127.0.0.{2 + i}"
        args = ["--nnodes", str(n), "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
                "--rdzv-endpoint", f"127.0.0.2:{port}", "--local-addr", addr,
                "--node-name", f"node-{i}", "--rdzv-id", "onefile", "--term-timeout", "5",
                *extra, "--no-python", "/bin/sh", "-c", script]
        procs.append(subprocess.Popen(chroot_podrun(root, args), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=90)
            outs.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return outs


def test_multinode_job_in_a_bare_root(roots):
    """Two agents (the job store, the rendezvous, four workers) in a root with glibc alone."""
    _, _, bare = roots
    outs = start_chroot_agents(bare, 2, 2, free_port("127.0.0.2"), [],
                               'echo "rank $RANK of $WORLD_SIZE on node $GROUP_RANK"')
    for rc, out, err in outs:
        assert rc == 0, err
    lines = sorted(l.split("]:", 1)[1] for _, out, _ in outs for l in out.splitlines())
    assert lines == sorted(f"rank {r} of 4 on node {r // 2}" for r in range(4)), outs


def test_failure_and_restart_in_a_bare_root(roots):
    """A worker fails in the first attempt; the job restarts in place and then succeeds."""
    _, _, bare = roots
    script = ('if [ "$RANK" = 3 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then '
              'echo boom >&2; exit 3; fi; echo "ok $RANK attempt $TORCHELASTIC_RESTART_COUNT"')
    outs = start_chroot_agents(bare, 2, 2, free_port("127.0.0.2"), ["--max-restarts", "1"],
                               script)
    for rc, out, err in outs:
        assert rc == 0, err
        assert "restarting the job in place (restart 1 of 1)" in err, err
    oks = sorted(l.split("]:", 1)[1] for _, out, _ in outs for l in out.splitlines()
                 if l.endswith(" attempt 1"))
    assert oks == [f"ok {r} attempt 1" for r in range(4)], outs


def test_failure_report_and_exit_code_in_a_bare_root(roots):
    _, _, bare = roots
    (bare / "tmp" / "termination-log").unlink(missing_ok=True)
    outs = start_chroot_agents(bare, 2, 1, free_port("127.0.0.2"),
                               ["--termination-log", "/tmp/termination-log"],
                               '[ "$RANK" = 1 ] && { echo boom >&2; exit 7; }; sleep 30')
    codes = sorted(rc for rc, _, _ in outs)
    assert codes == [7, 170], outs
    assert all("Root Cause" in err and "exitcode  : 7" in err for _, _, err in outs), outs
    assert "exit code 7" in (bare / "tmp" / "termination-log").read_text()


# ---- libcurl, opened when the Kubernetes API is used --------------------------------------

PODS = {"web-0": "127.0.3.10", "web-1": "127.0.3.9"}


@pytest.fixture
def api(tmp_path):
    a = k8s_api.FakeAPI(tmp_path / "api", bookmark_interval=0.5).start()
    for name, ip in PODS.items():
        a.put_pod({"name": name, "phase": "Running", "ip": ip, "labels": {"app": "web"}})
    yield a
    a.stop()


def fetch_ips(argv_prefix, kubeconfig):
    return subprocess.run([*argv_prefix, "k8s", "--timeout", "20", "fetch_ips", "app=web"],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": CHROOT_ENV["PATH"], "KUBECONFIG": kubeconfig,
                               "NAMESPACE": "default"})


def chroot_k8s(root, kubeconfig, args):
    env = {"KUBECONFIG": kubeconfig, "NAMESPACE": "default"}
    return subprocess.run(chroot_podrun(root, ["k8s", *args], env=env), capture_output=True,
                          text=True, timeout=60)


WANT_IPS = ",".join(sorted(PODS.values())) + "\n"


def test_kubernetes_without_libcurl_names_the_package(roots, api):
    _, _, bare = roots
    api.kubeconfig(bare / "tmp" / "kubeconfig")
    r = chroot_k8s(bare, "/tmp/kubeconfig", ["--timeout", "20", "fetch_ips", "app=web"])
    assert r.returncode == 1, r
    assert "libcurl" in r.stderr and "apt-get install libcurl4" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_etcd_without_libcurl_names_the_package(roots):
    """The etcd backend opens libcurl when it starts: in an image without one, its line names
    the package, and the agent exits 1 (it could not start the job)."""
    _, _, bare = roots
    r = subprocess.run(chroot_podrun(bare, ["--rdzv-backend", "etcd", "--rdzv-endpoint",
                                            "127.0.0.1:2379", "--rdzv-id", "j", "--no-python",
                                            "true"]), capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r
    first = r.stderr.splitlines()[0]
    assert "etcd" in first and "apt-get install libcurl4" in first, r.stderr


def test_kubernetes_with_debian_11_libcurl(roots, api):
    """libcurl 7.74 knows neither CURLOPT_PROTOCOLS_STR nor CURLOPT_CAINFO_BLOB: the CA of the
    kubeconfig (inline) and the client certificate still reach it."""
    binary, build, _ = roots
    shutil.copy(binary, build / "usr" / "local" / "bin" / "podrun")
    api.kubeconfig(build / "tmp" / "kubeconfig", token=False, client_cert=True)
    r = chroot_k8s(build, "/tmp/kubeconfig", ["--timeout", "20", "fetch_ips", "app=web"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == WANT_IPS


def test_kubernetes_with_this_machine_s_libcurl(roots, api, tmp_path):
    binary, _, _ = roots
    r = fetch_ips([str(binary)], str(api.kubeconfig(tmp_path / "kc", client_cert=True)))
    assert r.returncode == 0, r.stderr
    assert r.stdout == WANT_IPS


def test_modules_that_share_a_build_run_in_one_worker():
    """test_static, test_wheel and test_install each make one thing in the source tree; their
    module-level xdist_group mark keeps each module's tests in one pytest-xdist worker (a mark
    added later, by a conftest hook, is read too late and the tests were spread out: two
    workers then built build-wheel/ at once)."""
    import importlib
    for name in ("test_static", "test_wheel", "test_install"):
        marks = getattr(importlib.import_module(name), "pytestmark", [])
        marks = marks if isinstance(marks, list) else [marks]
        assert [m.args for m in marks if m.name == "xdist_group"], name
