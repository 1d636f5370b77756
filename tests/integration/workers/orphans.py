"""Leaves N orphaned grandchildren to whoever reaps for this worker (podrun as PID 1 or as a
subreaper), lets them all exit at once, then reports how many zombies podrun left behind."""
import os
import sys
import time

n = int(sys.argv[1])
reaper = os.getppid()           # podrun
r, w = os.pipe()
for _ in range(n):
    pid = os.fork()
    if pid == 0:                 # child: start a grandchild, then exit so it is orphaned
        if os.fork() == 0:
            os.close(w)
            os.read(r, 1)        # blocks until the worker closes the write end
            os._exit(0)
        os._exit(0)
    os.waitpid(pid, 0)
os.close(r)


def orphans():
    """(alive, zombies) among podrun's children other than this worker and podrun's guard
    (the process that kills the workers' groups should podrun itself be killed)."""
    alive = zombies = 0
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        if st[st.index("(") + 1:st.rindex(")")] == "podrun-guard":
            continue
        fields = st[st.rindex(")") + 2:].split()
        if int(fields[1]) != reaper:
            continue
        if fields[0] == "Z":
            zombies += 1
        else:
            alive += 1
    return alive, zombies


print(f"reaper={reaper} orphans={orphans()[0]}", flush=True)
os.close(w)                      # every grandchild exits now
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    alive, zombies = orphans()
    if alive == 0 and zombies == 0:
        break
    time.sleep(0.05)
alive, zombies = orphans()
print(f"alive={alive} zombies={zombies}", flush=True)
