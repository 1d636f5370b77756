#!/bin/sh
# Prints what a worker got from podrun's view of the node, on one line: its ranks, the GPU it
# sees, the derived variables (unset ones as "-"), and the CPUs it may run on, read from
# /proc/self/status by the shell itself (no child process, so it is the worker's own affinity).
cpus=-
while read -r key value; do
    [ "$key" = "Cpus_allowed_list:" ] && cpus=$value
done </proc/self/status
echo "DEV rank=$RANK local_rank=$LOCAL_RANK world=$WORLD_SIZE" \
     "cvd=${CUDA_VISIBLE_DEVICES--} omp=${OMP_NUM_THREADS--} ib_disable=${NCCL_IB_DISABLE--}" \
     "ib_hca=${NCCL_IB_HCA--} gid=${NCCL_IB_GID_INDEX--} nccl_if=${NCCL_SOCKET_IFNAME--}" \
     "gloo_if=${GLOO_SOCKET_IFNAME--} order=${CUDA_DEVICE_ORDER--} cpus=$cpus"
