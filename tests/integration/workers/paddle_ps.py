"""A parameter-server job's two roles, as Paddle's CTR demo has them, over plain TCP: a pserver
listens on PADDLE_PORT and answers every connection until it is stopped; a trainer connects to
every pserver of PADDLE_PSERVERS_IP_PORT_LIST, gets an answer from each, and exits 0.
PS_DIE=<pserver id> makes that pserver exit 3 after a second."""
import os
import socket
import sys
import time

e = os.environ
role = e["TRAINING_ROLE"]
assert role == e["PADDLE_ROLE"] and e["POD_IP"]
if role == "PSERVER":
    sid = int(e["PADDLE_PSERVER_ID"])
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((e["POD_IP"], int(e["PADDLE_PORT"])))
    s.listen(16)
    print(f"pserver {sid} listening on {e['POD_IP']}:{e['PADDLE_PORT']}", flush=True)
    if e.get("PS_DIE") == str(sid):
        time.sleep(1)
        print(f"pserver {sid} dies", file=sys.stderr, flush=True)
        sys.exit(3)
    while True:
        c, _ = s.accept()
        c.sendall(f"pserver {sid}\n".encode())
        c.close()
tid = int(e["PADDLE_TRAINER_ID"])
got = []
for ep in e["PADDLE_PSERVERS_IP_PORT_LIST"].split(","):
    host, port = ep.rsplit(":", 1)
    for _ in range(100):      # the pservers start at the same time as the trainers
        try:
            with socket.create_connection((host, int(port)), timeout=5) as c:
                got.append(c.makefile().readline().strip())
            break
        except OSError:
            time.sleep(0.1)
if e.get("PS_DIE"):
    time.sleep(60)            # wait to be stopped by the job's failure
print(f"trainer {tid} of {e['PADDLE_TRAINERS_NUM']} reached {','.join(got)}", flush=True)
