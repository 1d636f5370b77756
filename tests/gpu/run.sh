#!/bin/sh
# tests/gpu/run.sh [PODRUN] — the checks that need a real NVIDIA GPU, one line each:
#   ok NAME | FAIL NAME: why | skip NAME: why
# PODRUN is the podrun to test (the argument, else $PODRUN, else podrun on PATH); the one-file
# build (scripts/static-build) works on a machine without libuv. PYTHON (default python3) is the
# interpreter with torch for the torch checks. Without a GPU every check is skipped and the exit
# status is 0; otherwise it is 1 when a check failed.
#
# Checks: NVML discovery against nvidia-smi -L; --nproc-per-node gpu; the NCCL preflight with the
# real NCCL; torch init_process_group("nccl") + all_reduce under podrun; the GPU memory check
# before a restart against the real NVML; accelerate's worker environment against the real
# `accelerate launch`, where accelerate is installed.
set -u
PODRUN=${1:-${PODRUN:-podrun}}
PY=${PYTHON:-python3}
CHECKS="nvml-discovery nproc-gpu nccl-preflight torch-nccl-allreduce gpu-memory-restart accelerate-env"
failed=0
ok() { echo "ok $1"; }
fail() { echo "FAIL $1: $2"; failed=1; }
skip() { echo "skip $1: $2"; }

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    for c in $CHECKS; do skip "$c" "no NVIDIA GPU here (nvidia-smi -L fails or is missing)"; done
    exit 0
fi
if ! command -v "$PODRUN" >/dev/null 2>&1; then
    for c in $CHECKS; do fail "$c" "no podrun at '$PODRUN' (give its path as the argument)"; done
    exit 1
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# every job on its own free port
port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 29611; }
NGPU=$(nvidia-smi -L | grep -c '^GPU ')
HAVE_TORCH=0
"$PY" -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1 && HAVE_TORCH=1

# --- NVML discovery: the same GPUs, by UUID, as nvidia-smi ---------------------------------
"$PODRUN" env --nproc-per-node gpu >"$TMP/env.out" 2>&1
if ! grep -q "^GPUs        $NGPU found (NVML)" "$TMP/env.out"; then
    fail nvml-discovery "nvidia-smi lists $NGPU GPUs, podrun env says: $(grep '^GPUs' "$TMP/env.out")"
else
    missing=""
    for u in $(nvidia-smi -L | sed -n 's/.*(UUID: \(GPU-[^)]*\)).*/\1/p'); do
        grep -q "$u" "$TMP/env.out" || missing="$missing $u"
    done
    if [ -n "$missing" ]; then fail nvml-discovery "UUIDs not found by podrun:$missing"
    else ok nvml-discovery; fi
fi

# --- --nproc-per-node gpu: one worker per GPU, each LOCAL_RANK once ------------------------
"$PODRUN" --nproc-per-node gpu --master-port "$(port)" --no-python sh -c 'echo "lr=$LOCAL_RANK ws=$LOCAL_WORLD_SIZE"' >"$TMP/np.out" 2>"$TMP/np.err"
rc=$?
got=$(grep -c 'lr=' "$TMP/np.out")
if [ $rc -ne 0 ]; then fail nproc-gpu "exit $rc: $(tail -n 3 "$TMP/np.err" | tr '\n' ' ')"
elif [ "$got" -ne "$NGPU" ] || ! grep -q "ws=$NGPU" "$TMP/np.out"; then
    fail nproc-gpu "$got workers for $NGPU GPUs"
else ok nproc-gpu; fi

# --- the NCCL preflight with the real NCCL -------------------------------------------------
if ! ldconfig -p 2>/dev/null | grep -q 'libnccl.so.2' && [ -z "${PODRUN_PREFLIGHT_NCCL_LIB:-}" ] &&
   ! "$PY" -c 'import nvidia.nccl' >/dev/null 2>&1; then
    skip nccl-preflight "no libnccl.so.2 on the library path (set PODRUN_PREFLIGHT_NCCL_LIB)"
else
    if [ -z "${PODRUN_PREFLIGHT_NCCL_LIB:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl.so.2'; then
        # the NCCL that torch's wheels ship
        d=$("$PY" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
        [ -n "$d" ] && export PODRUN_PREFLIGHT_NCCL_LIB="$d/libnccl.so.2"
    fi
    "$PODRUN" --nproc-per-node gpu --master-port "$(port)" --preflight nccl --preflight-policy fail --no-python true >"$TMP/pf.out" 2>"$TMP/pf.err"
    rc=$?
    if [ $rc -eq 0 ] && grep -qi 'nccl' "$TMP/pf.err"; then ok nccl-preflight
    else fail nccl-preflight "exit $rc: $(grep -i 'nccl\|preflight' "$TMP/pf.err" | tail -n 3 | tr '\n' ' ')"; fi
fi

# --- torch: init_process_group("nccl") + all_reduce on every GPU ---------------------------
cat >"$TMP/allreduce.py" <<'EOF'
import os, torch, torch.distributed as dist
lr = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(lr)
dist.init_process_group("nccl")
t = torch.ones(1 << 20, device="cuda") * (dist.get_rank() + 1)
dist.all_reduce(t)
n = dist.get_world_size()
assert int(t[0].item()) == n * (n + 1) // 2, t[0].item()
print(f"allreduce ok rank={dist.get_rank()} sum={int(t[0].item())}", flush=True)
dist.destroy_process_group()
EOF
if [ $HAVE_TORCH -eq 0 ]; then
    skip torch-nccl-allreduce "no torch with CUDA for $PY"
else
    "$PODRUN" --nproc-per-node gpu --master-port "$(port)" --python "$PY" "$TMP/allreduce.py" >"$TMP/ar.out" 2>"$TMP/ar.err"
    rc=$?
    got=$(grep -c 'allreduce ok' "$TMP/ar.out")
    if [ $rc -eq 0 ] && [ "$got" -eq "$NGPU" ]; then ok torch-nccl-allreduce
    else fail torch-nccl-allreduce "exit $rc, $got of $NGPU ranks: $(tail -n 3 "$TMP/ar.err" | tr '\n' ' ')"; fi
fi

# --- the GPU memory check before a restart, against the real NVML --------------------------
# attempt 0 takes 2 GiB on its GPU and fails; the restart waits until the memory is freed
cat >"$TMP/hold.py" <<'EOF'
import os, sys, torch
if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    sys.exit(1)
print("attempt1 ok", flush=True)
EOF
if [ $HAVE_TORCH -eq 0 ]; then
    skip gpu-memory-restart "no torch with CUDA for $PY"
else
    "$PODRUN" --master-port "$(port)" --max-restarts 1 --gpu-memory-reclaim-timeout 20 --python "$PY" "$TMP/hold.py" >"$TMP/gm.out" 2>"$TMP/gm.err"
    rc=$?
    if [ $rc -ne 0 ] || ! grep -q 'attempt1 ok' "$TMP/gm.out"; then
        fail gpu-memory-restart "exit $rc: $(tail -n 3 "$TMP/gm.err" | tr '\n' ' ')"
    elif grep -q 'cannot read the GPUs' "$TMP/gm.err"; then
        fail gpu-memory-restart "$(grep 'cannot read the GPUs' "$TMP/gm.err")"
    elif grep -q 'still hold' "$TMP/gm.err"; then
        fail gpu-memory-restart "$(grep 'still hold' "$TMP/gm.err")"
    else ok gpu-memory-restart; fi
fi

# --- accelerate's worker environment against the real `accelerate launch` ------------------
cat >"$TMP/accel_env.py" <<'EOF'
import json, os
keep = {k: v for k, v in os.environ.items()
        if k.startswith("ACCELERATE_") or k in ("RANK", "LOCAL_RANK", "WORLD_SIZE",
                                                "LOCAL_WORLD_SIZE", "OMP_NUM_THREADS")}
print("ENV " + json.dumps(keep, sort_keys=True), flush=True)
EOF
if ! "$PY" -c 'import accelerate' >/dev/null 2>&1 || ! command -v accelerate >/dev/null 2>&1; then
    skip accelerate-env "accelerate is not installed for $PY"
else
    p=$(port)
    accelerate launch --num_processes 1 --main_process_port "$p" "$TMP/accel_env.py" 2>/dev/null | grep '^ENV' | sort >"$TMP/a.real"
    "$PODRUN" accelerate launch --num_processes 1 --main_process_port "$(port)" "$TMP/accel_env.py" 2>/dev/null | sed 's/^\[[^]]*\]://' | grep '^ENV' | sort >"$TMP/a.podrun"
    if [ ! -s "$TMP/a.real" ]; then fail accelerate-env "accelerate launch printed no environment"
    elif cmp -s "$TMP/a.real" "$TMP/a.podrun"; then ok accelerate-env
    else fail accelerate-env "differs: accelerate $(cat "$TMP/a.real") podrun $(cat "$TMP/a.podrun")"; fi
fi
exit $failed
