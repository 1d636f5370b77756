"""Fails the way torch scripts do under torchrun: @record writes TORCHELASTIC_ERROR_FILE."""
import os
import sys

from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    if os.environ["RANK"] == "1":
        print("about to fail", file=sys.stderr, flush=True)
        raise RuntimeError("boom from rank 1")
    import time
    time.sleep(60)


main()
