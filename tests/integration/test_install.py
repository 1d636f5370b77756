"""`meson install` puts the library, its public headers and a pkg-config file in place, and a C
program builds against the installed files alone (found with pkg-config, nothing from the source
tree) and talks to a running `podrun store`."""
import json
import os
import subprocess

from conftest import BUILD, PODRUN, free_port
from store_util import podrun_store

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
