"""`meson install` puts the library, its public headers and a pkg-config file in place, and a C
program builds against the installed files alone (found with pkg-config, nothing from the source
tree) and talks to a running `podrun store`."""
import json
import os
import re
import subprocess

import pytest

from conftest import BUILD, PODRUN, free_port
from store_util import podrun_store

# the one thing this module makes in the source tree (conftest.py, "one worker") is made once
pytestmark = pytest.mark.xdist_group("install")

PROGRAM = r"""
#include <podrun/store.h>
#include <podrun/version.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    podrun_store_t *s;
    int r = podrun_store_connect("127.0.0.1", (uint16_t)atoi(argv[1]), 5000, &s);
    if (r < 0) {
        fprintf(stderr, "connect: %s\n", podrun_store_strerror(r));
        return 1;
    }
    int64_t n = 0;
    char *v = NULL;
    size_t len = 0;
    if (podrun_store_set(s, "/k", "v1", 2) || podrun_store_add(s, "/n", 41, &n) ||
        podrun_store_get(s, "/k", &v, &len))
        return 2;
    printf("%s %lld %s %s %d\n", v, (long long)n, podrun_version_string(), PODRUN_VERSION_STRING,
           podrun_version() == PODRUN_VERSION_NUMBER);
    free(v);
    podrun_store_close(s);
    return 0;
}
"""


def build_options():
    out = subprocess.run(["meson", "introspect", str(BUILD), "--buildoptions"],
                         capture_output=True, text=True, check=True).stdout
    return {o["name"]: o["value"] for o in json.loads(out)}


def test_installed_library_builds_a_program(tmp_path):
    opts = build_options()
    dest = tmp_path / "root"
    subprocess.run(["meson", "install", "-C", str(BUILD), "--destdir", str(dest), "--no-rebuild",
                    "--quiet"], capture_output=True, text=True, check=True)
    libdir = os.path.join(opts["prefix"], opts["libdir"])      # libdir may be relative
    installed = dest / libdir.lstrip("/")
    assert (installed / "pkgconfig" / "podrun.pc").is_file()
    inc = dest / os.path.join(opts["prefix"], opts["includedir"]).lstrip("/") / "podrun"
    assert {p.name for p in inc.iterdir()} >= {"store.h", "version.h"}

    env = dict(os.environ, PKG_CONFIG_PATH=str(installed / "pkgconfig"),
               PKG_CONFIG_SYSROOT_DIR=str(dest))
    pc = subprocess.run(["pkg-config", "--cflags", "--libs", "podrun"], env=env,
                        capture_output=True, text=True, check=True).stdout.split()
    assert f"-I{dest}" in " ".join(pc) and "-lpodrun" in pc, pc

    src = tmp_path / "prog.c"
    src.write_text(PROGRAM)
    prog = tmp_path / "prog"
    # a sanitized build's library needs the program built the same way
    san = [f"-fsanitize={opts['b_sanitize']}"] if opts.get("b_sanitize", "none") != "none" else []
    subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", *san, str(src), "-o", str(prog), *pc,
                    f"-Wl,-rpath,{installed}"], capture_output=True, text=True, check=True)

    port = free_port()
    srv = podrun_store(PODRUN, port)
    try:
        r = subprocess.run([str(prog), str(port)], capture_output=True, text=True, timeout=30)
    finally:
        srv.stop()
    assert r.returncode == 0, r.stderr
    version = subprocess.run([PODRUN, "--version"], capture_output=True, text=True).stdout.split()[1]
    assert r.stdout == f"v1 41 {version} {version} 1\n"


def install(tmp_path):
    """`meson install` into a fresh root; returns the installed share/ directory."""
    opts = build_options()
    dest = tmp_path / "root"
    subprocess.run(["meson", "install", "-C", str(BUILD), "--destdir", str(dest), "--no-rebuild",
                    "--quiet"], capture_output=True, text=True, check=True)
    return dest / os.path.join(opts["prefix"], opts["datadir"]).lstrip("/")


def help_options(*sub):
    text = subprocess.run([PODRUN, *sub, "--help"], capture_output=True, text=True,
                          check=True).stdout
    return set(re.findall(r"^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)", text, re.M)), text


def test_man_page_lists_every_option(tmp_path):
    """podrun(1) is installed and names exactly the options --help names, each with the same
    value word, and the subcommands and their options."""
    man = install(tmp_path) / "man" / "man1" / "podrun.1"
    src = man.read_text()
    opts, text = help_options()
    # the OPTIONS section's entries: .TP, then \fB--name\fR [\fIMETA\fR]
    section = src.split("\n.SH OPTIONS\n", 1)[1].split("\n.SH ", 1)[0]
    entries = re.findall(r"^\.TP\n(.*)$", section, re.M)
    in_man = {}
    for e in entries:
        e = e.replace("\\-", "-")
        names = re.findall(r"\\fB(--[a-z][a-z0-9-]*)\\fR", e)
        meta = re.search(r"\\fI(\S+)\\fR$", e)
        in_man[names[0]] = meta.group(1) if meta else None
    assert set(in_man) == opts, (opts - set(in_man), set(in_man) - opts)
    for name, meta in in_man.items():
        m = re.search(rf"^\s+(?:-\w, )?{re.escape(name)}(?: (\S+))?", text, re.M)
        assert (m.group(1) if m else None) == meta, name
    # the subcommands, and podrun status's options
    for sub in ("podrun store", "podrun k8s", "podrun status"):
        assert f"\\fB{sub}\\fR" in src, sub
    status_opts, _ = help_options("status")
    assert status_opts and all(o.replace("-", "\\-") in src for o in status_opts), status_opts
    # it renders without warnings
    r = subprocess.run(["groff", "-man", "-ww", "-z", str(man)], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def complete(script, *words):
    """What bash completes for words (the last one being completed), podrun on PATH."""
    prog = ("source \"$1\"; shift; COMP_WORDS=(\"$@\"); COMP_CWORD=$(($# - 1)); _podrun; "
            "printf '%s\\n' \"${COMPREPLY[@]}\"")
    env = dict(os.environ, PATH=f"{os.path.dirname(PODRUN)}:{os.environ['PATH']}")
    r = subprocess.run(["bash", "-c", prog, "bash", str(script), *words], capture_output=True,
                       text=True, env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    return sorted(w for w in r.stdout.splitlines() if w)


def test_bash_completion(tmp_path, monkeypatch):
    script = install(tmp_path) / "bash-completion" / "completions" / "podrun"
    opts, _ = help_options()
    assert set(complete(script, "podrun", "--")) == opts
    assert complete(script, "podrun", "--health-p") == ["--health-port"]
    assert complete(script, "podrun", "--health") == ["--health-check-interval", "--health-port"]
    assert complete(script, "podrun", "--log-format", "") == ["human", "json"]
    assert complete(script, "podrun", "--discovery", "") == ["auto", "env", "hostfile", "k8s",
                                                             "none"]
    assert complete(script, "podrun", "st") == ["status", "store"]
    assert complete(script, "podrun", "status", "--j") == ["--json"]
    assert complete(script, "podrun", "k8s", "fetch_i") == ["fetch_id", "fetch_ips",
                                                             "fetch_ips_string"]
    # the program's own arguments are not podrun's
    assert complete(script, "podrun", "--nnodes", "2", "train.py", "--no-") == []
    (tmp_path / "train.py").write_text("")
    monkeypatch.chdir(tmp_path)
    assert complete(script, "podrun", "--nnodes", "2", "tra") == ["train.py"]
