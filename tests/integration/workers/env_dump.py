"""Prints this worker's launcher-given environment as one JSON line."""
import json
import os
import sys

NAMES = sys.argv[1].split(",")
print("ENV " + json.dumps({k: os.environ.get(k) for k in NAMES}, sort_keys=True), flush=True)
