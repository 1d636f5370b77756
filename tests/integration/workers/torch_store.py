"""torch's own TCPStore server (the baseline podrun's job store is measured and compared with):
listens on 127.0.0.1:PORT with a store timeout of TIMEOUT seconds, says "ready", serves until
killed. Usage: torch_store.py PORT TIMEOUT"""
import datetime
import sys
import time

import torch.distributed as dist

store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), is_master=True, wait_for_workers=False,
                      timeout=datetime.timedelta(seconds=int(sys.argv[2])))
print("ready", flush=True)
while True:
    time.sleep(3600)
