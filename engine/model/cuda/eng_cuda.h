/* eng_cuda.h - the GPT-2 model on a CUDA GPU, behind a C interface without CUDA types.
 *
 * The same model as eng_model.h, on the device: master weights, gradients and AdamW
 * moments in float32; activations (and the working copy of the weights) in bfloat16 as
 * llm.c trains on GPUs, or in float32 for comparisons with the CPU backend. Activations
 * are laid out per section under the same policies (off / selective / full for blocks,
 * off / chunked for the head) plus `offload`: a block keeps its input on the device, and
 * everything `off` would keep goes to pinned host memory during forward and comes back on
 * a second stream, ahead of the block's backward.
 *
 * The host eng_model (eng_model.h) stays the owner of the tensor table, and of the host
 * copies of the weights and moments that checkpoints read and write: eng_cuda_upload and
 * eng_cuda_download move them. Device memory goes through eng_cuda_mem.h.
 *
 * Every call runs on one thread (the training thread), the GPU's work on its streams;
 * errors (no device, out of device memory, a CUDA fault) come back as -1 with a message.
 * A build without nvcc links eng_nocuda.c instead, whose functions all fail with a message
 * saying so.
 */
#ifndef ENG_CUDA_H
#define ENG_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "eng_err.h"
#include "eng_model.h"
#include "eng_policy.h"

#define ENG_CUDA_MAX_GPUS 16  /* GPUs eng_cuda_probe describes */
#define ENG_CUDA_NAME_LEN 128 /* longest GPU name kept, with its NUL */

typedef struct eng_cuda_gpu {
	int device;                   /* the runtime's number for it (cudaSetDevice) */
	char name[ENG_CUDA_NAME_LEN]; /* "NVIDIA H200" */
	size_t memory_bytes;          /* total device memory */
	int cc_major, cc_minor;       /* compute capability */
} eng_cuda_gpu;

typedef struct eng_cuda_info {
	int built;                    /* this build has the CUDA backend */
	int ngpus;                    /* usable GPUs (0: see why) */
	eng_cuda_gpu gpu[ENG_CUDA_MAX_GPUS];
	char why[256];                /* why there is none: no driver, no device, not built */
	char runtime[64];             /* "CUDA runtime 13.0, driver 13.0" ("" when not built) */
} eng_cuda_info;

/* What this process can use. The first call asks the CUDA runtime (which loads the driver:
 * some 0.1 s on a GPU machine, nothing without one); later calls return the cached answer.
 * Links the CUDA runtime only: rematd calls it for daemon-info. */
void eng_cuda_probe(eng_cuda_info *out);

/* cuBLASLt's and cuDNN's versions, for --version ("" when not built). */
const char *eng_cuda_libraries(void);

typedef struct eng_cuda eng_cuda;

/* How a data-parallel job sums its ranks' gradients (eng_cuda_dp_open). */
typedef enum eng_cuda_comm {
	ENG_CUDA_COMM_AUTO, /* NCCL where it serves (libnccl.so.2 loads on every rank, each on
			     * a GPU of its own), host memory otherwise */
	ENG_CUDA_COMM_NCCL, /* NCCL, or the job fails saying why not */
	ENG_CUDA_COMM_HOST, /* host memory and MPI */
} eng_cuda_comm;

typedef struct eng_cuda_opts {
	int fp32;     /* 1: float32 activations and matmuls (comparisons); 0: bf16 (training) */
	int no_cudnn; /* 1: the engine's own attention even where cuDNN could serve */
	int gpu;      /* which GPU, modulo the GPUs there are (a rank's node-local rank) */
	int accum;    /* 1: a buffer for the sum of a step's micro-batches (grad_accum > 1) */
	eng_cuda_comm comm; /* data parallel */
} eng_cuda_opts;

/* Options from the environment: REMAT_CUDA_PRECISION=bf16|fp32 (default bf16),
 * REMAT_CUDA_ATTENTION=cudnn|own (default cudnn where it serves the shape) and
 * REMAT_CUDA_COMM=auto|nccl|host (default auto); gpu and accum 0. -1 with a message on a
 * value it does not know. */
int eng_cuda_opts_from_env(eng_cuda_opts *o, eng_err *err);

/* A model on GPU o->gpu (modulo the GPUs) for host's shape, batch and chunking (host->cfg, B, T, chunk_rows,
 * tensors): weights, gradients, moments and workspace allocated, nothing uploaded yet and
 * no activations (eng_cuda_set_policy lays them out). */
int eng_cuda_new(eng_cuda **out, const eng_model *host, const eng_cuda_opts *o, eng_err *err);
void eng_cuda_destroy(eng_cuda *g); /* NULL is a no-op */

/* "bf16, attention cuDNN" and the like: how this model runs. */
const char *eng_cuda_describe(const eng_cuda *g);
/* The index of its GPU. */
int eng_cuda_device(const eng_cuda *g);
/* "bf16" or "fp32": its activations' and matmuls' type. */
const char *eng_cuda_precision(const eng_cuda *g);

/* Weights and moments: host -> device (the working copy is rounded from the float32
 * weights), and device -> host. */
int eng_cuda_upload(eng_cuda *g, const eng_model *host, eng_err *err);
int eng_cuda_download(eng_cuda *g, eng_model *host, eng_err *err);

/* Lays out the activations of policy p: allocates what it needs first, then frees what it
 * no longer needs (returned to the device); on failure the old layout stays. */
int eng_cuda_set_policy(eng_cuda *g, const eng_policy *p, eng_err *err);
const eng_policy *eng_cuda_policy(const eng_cuda *g);

/* One forward and backward over inp/tgt (B*T tokens each, host memory): device gradients
 * overwritten, *loss the mean cross-entropy. */
int eng_cuda_step(eng_cuda *g, const uint32_t *inp, const uint32_t *tgt, float *loss,
	eng_err *err);
/* Forward only. */
int eng_cuda_loss(eng_cuda *g, const uint32_t *inp, const uint32_t *tgt, float *loss,
	eng_err *err);
/* Micro-batch k (from 0) of a step of several (opts.accum): the gradient eng_cuda_step just
 * wrote becomes the step's (k 0: copied, 0 + g exactly) or is added to it (kc_add, the bits
 * of the CPU's kn_add). Without opts.accum the step's gradient is eng_cuda_step's. */
int eng_cuda_accumulate(eng_cuda *g, int k, eng_err *err);
/* The step's gradient times s (kc_scale: kn_scale's bits). */
int eng_cuda_scale_grads(eng_cuda *g, float s, eng_err *err);

/* Data parallel (eng_dp.h), collective: every rank calls it once after eng_cuda_new, and
 * they agree on how the step's gradient is summed (eng_cuda_dp.c): ncclAllReduce on the
 * device, or a copy to host memory, eng_dp_sum_floats, and back. Nothing with one rank.
 * -1 with a message: comm NCCL where it cannot serve, or NCCL failing to start. */
int eng_cuda_dp_open(eng_cuda *g, eng_cuda_comm comm, eng_err *err);
/* The step's gradient <- its sum over the ranks, the same bits on every rank (collective;
 * nothing with one rank). */
int eng_cuda_sum_ranks(eng_cuda *g, eng_err *err);
/* How it is summed, for job-status' "allreduce": "nccl 2.27.7: ..." or "mpi: ... host
 * memory (not NCCL: why)"; NULL with one rank. */
const char *eng_cuda_dp_describe(const eng_cuda *g);

/* Sum of squares of the step's gradient, in double (fixed order). */
int eng_cuda_grad_sumsq(eng_cuda *g, double *out, eng_err *err);
/* AdamW on every tensor (decay where the table says), the step's gradient scaled by
 * grad_scale first; as eng_train.c does on the CPU. Waits for the GPU. */
int eng_cuda_adamw(eng_cuda *g, float grad_scale, float lr, float beta1, float beta2,
	float eps, float weight_decay, double bc1, double bc2, eng_err *err);

/* Device bytes of saved activations of block i (i < L) or of the head (i == L); pinned
 * host bytes an offloaded block keeps; milliseconds of recompute in the last step. */
size_t eng_cuda_saved_bytes(const eng_cuda *g, int i);
size_t eng_cuda_offloaded_bytes(const eng_cuda *g, int i);
double eng_cuda_recompute_ms(const eng_cuda *g);

/* Tests: the step's float32 gradient (nfloats of the host table) into host memory. */
int eng_cuda_get_grads(eng_cuda *g, float *out, eng_err *err);
/* Tests: the (B,T,C) input of block l (l == L: of ln_f) after the last forward, as
 * float32, into host memory. */
int eng_cuda_get_block_input(eng_cuda *g, int l, float *out, eng_err *err);

#endif
