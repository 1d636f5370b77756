#!/usr/bin/env python3
"""The launcher-diff worker: writes what its launcher gave it (environment, argv, the command
line the kernel ran, cwd, its process group and session) as JSON into $LAUNCHER_DIFF_DIR, one
file per process, then prints one line on stdout and one on stderr (for the log-file layouts)
and exits with $LAUNCHER_DIFF_EXIT if its rank is in $LAUNCHER_DIFF_EXIT_RANKS (a comma list;
every rank when unset) and its restart (TORCHELASTIC_RESTART_COUNT) is in
$LAUNCHER_DIFF_EXIT_RESTARTS (every one when unset), once $LAUNCHER_DIFF_WAIT_FOR workers have
written theirs (at most a minute; whatever its exit code): a launcher that stops the others at a
failure (or, as podrun paddle, the parameter servers when the trainers are done) then has every
capture. Imports nothing heavy: it runs under any python, as a script, as a module (-m capture)
or exec'd directly (--no-python)."""
import json
import os
import sys
import time


def rank():
    for name in ("RANK", "PADDLE_TRAINER_ID", "PADDLE_GLOBAL_RANK"):
        if name in os.environ:
            return os.environ[name]
    return "0"


def main():
    d = os.environ["LAUNCHER_DIFF_DIR"]
    with open("/proc/self/cmdline", "rb") as f:
        cmdline = [w.decode(errors="replace") for w in f.read().split(b"\0")[:-1]]
    rec = {"env": dict(os.environ), "argv": sys.argv, "cmdline": cmdline, "cwd": os.getcwd(),
           "pid": os.getpid(), "pgid_is_pid": os.getpgid(0) == os.getpid(),
           "sid_is_pid": os.getsid(0) == os.getpid(), "executable": sys.executable}
    # the lines first: a rank that waits for the others' records (LAUNCHER_DIFF_WAIT_FOR) and
    # then fails must find their lines written too, or a fast stop cuts them from the logs
    print(f"capture out rank {rank()}", flush=True)
    print(f"capture err rank {rank()}", file=sys.stderr, flush=True)
    tmp = os.path.join(d, f".{os.getpid()}.json")
    with open(tmp, "w") as f:
        json.dump(rec, f)
    os.rename(tmp, os.path.join(d, f"{os.getpid()}.json"))
    wait_for(d, int(os.environ.get("LAUNCHER_DIFF_WAIT_FOR", "0")))
    ranks = os.environ.get("LAUNCHER_DIFF_EXIT_RANKS")
    code = int(os.environ.get("LAUNCHER_DIFF_EXIT", "0"))
    restarts = os.environ.get("LAUNCHER_DIFF_EXIT_RESTARTS")
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    if (ranks is None or rank() in ranks.split(",")) and \
            (restarts is None or restart in restarts.split(",")):
        sys.exit(code)


def wait_for(d, n):
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if len([f for f in os.listdir(d) if f[0].isdigit()]) >= n:
            return
        time.sleep(0.02)   # the poll interval until n workers have written (60 s at most)


if __name__ == "__main__":
    main()
