/* tests/fakes/fake_cuda.h — what the fake CUDA runtime and the fake NCCL share: a stream is this
 * struct, and an NCCL operation queued on it makes it busy until the operation says it is done
 * (the fake NCCL sets `busy`), as work queued on a real stream does. Device memory is host
 * memory, so the fake NCCL reads and writes the buffers it is given. */
#ifndef PODRUN_TESTS_FAKE_CUDA_H
#define PODRUN_TESTS_FAKE_CUDA_H

#define FAKE_STREAM_MAGIC 0x5354524du

struct fake_stream {
    unsigned magic;
    int (*busy)(void *op);   /* non-zero while the queued operation runs; NULL: idle */
    void *op;                /* malloc'd by the fake NCCL; freed with the stream */
};

#endif
