"""Writes N numbered lines to stdout and N/10 to stderr as fast as it can, then a partial line."""
import os
import sys

n = int(sys.argv[1])
rank = os.environ["RANK"]
pad = "x" * (int(rank) * 7 + 3)
out = sys.stdout
for i in range(n):
    out.write(f"r={rank} i={i} {pad}\n")
    if i % 10 == 0:
        sys.stderr.write(f"e r={rank} i={i}\n")
out.write(f"tail r={rank}")
out.flush()
