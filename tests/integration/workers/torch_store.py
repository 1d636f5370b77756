"""torch's own TCPStore servers (the baseline podrun's job store is measured and compared with):
one per PORT on 127.0.0.1, with a store timeout of TIMEOUT seconds; says "ready" once all of them
listen, serves until killed. PORT:libuv or PORT:classic picks the server of torch >= 2.4
(use_libuv); a bare PORT gets the interpreter's torch's default.
Usage: torch_store.py PORT[:KIND] TIMEOUT [PORT[:KIND]...]"""
import datetime
import sys
import time

import torch.distributed as dist

timeout = datetime.timedelta(seconds=int(sys.argv[2]))
stores = []
for spec in sys.argv[1:2] + sys.argv[3:]:
    port, _, kind = spec.partition(":")
    kw = {"use_libuv": kind == "libuv"} if kind else {}
    stores.append(dist.TCPStore("127.0.0.1", int(port), is_master=True, wait_for_workers=False,
                                timeout=timeout, **kw))
print("ready", flush=True)
while True:
    time.sleep(3600)
