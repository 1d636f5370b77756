"""Checks the environment a paddle.distributed.launch trainer gets (Paddle itself is not
installable here): ids, sizes and endpoints agree with each other, and this trainer's endpoint
is a port it can listen on. Prints one line with what it checked."""
import os
import socket
import sys

e = os.environ
try:
    eps = e["PADDLE_TRAINER_ENDPOINTS"].split(",")
    tid, num = int(e["PADDLE_TRAINER_ID"]), int(e["PADDLE_TRAINERS_NUM"])
    assert len(eps) == num == int(e["PADDLE_GLOBAL_SIZE"]), "sizes"
    assert 0 <= tid < num and int(e["PADDLE_GLOBAL_RANK"]) == tid, "ids"
    assert eps[tid] == e["PADDLE_CURRENT_ENDPOINT"], "own endpoint"
    assert len(set(eps)) == num, "endpoints differ"
    assert int(e["PADDLE_LOCAL_RANK"]) == int(e["PADDLE_RANK_IN_NODE"]), "local rank"
    assert e["PADDLE_MASTER"] and e["PADDLE_DISTRI_BACKEND"] == "gloo", "master/backend"
    assert os.path.isabs(e["PADDLE_LOG_DIR"]), "log dir"
    host, port = e["PADDLE_CURRENT_ENDPOINT"].rsplit(":", 1)
    with socket.socket() as s:      # the port podrun picked is free on this node
        s.bind((host, int(port)))
except (AssertionError, KeyError, OSError) as x:
    print(f"paddle-env BAD {type(x).__name__} {x}", flush=True)
    sys.exit(3)
print(f"paddle-env ok id={tid} num={num} nnodes={e['PADDLE_NNODES']} "
      f"local={e['PADDLE_LOCAL_RANK']}/{e['PADDLE_LOCAL_SIZE']} ep={e['PADDLE_CURRENT_ENDPOINT']} "
      f"master={e['PADDLE_MASTER']} job={e.get('PADDLE_JOB_ID')}", flush=True)
