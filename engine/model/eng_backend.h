/* eng_backend.h - what runs the model: one table of operations for the trainer, whichever
 * backend is behind it (design.md §7). The trainer (engine/run/eng_train*.c) calls through it
 * and never asks which backend it runs on.
 *
 * A backend holds the model's trainable state where the maths runs: the gradients of a
 * step (and, with grad_accum > 1, their sum over its micro-batches), the activations of a
 * policy, and on the GPU the weights and moments too. Two implementations:
 *   - cpu  (eng_backend_cpu.c): over eng_model.h, whose weights, gradients and moments are
 *          the host's, in the tracked allocator (eng_mem.h);
 *   - cuda (cuda/eng_backend_cuda.c): over eng_cuda.h; the trainer's eng_model is then only
 *          the tensor table and the host copies of weights and moments that checkpoints read
 *          and write (download/upload move them). A build without CUDA links the same file
 *          over eng_nocuda.c: its create fails with "this build has no CUDA backend".
 *
 * What each operation promises:
 *   - The host eng_model belongs to the trainer; the backend keeps a pointer to it (never
 *     frees it). Buffers a backend allocates (the cpu's accumulated gradients, the GPU
 *     model) are its own, freed by destroy.
 *   - inp/tgt are B*T tokens each in host memory (B, T: the host model's); a micro-batch's
 *     loss is its mean cross-entropy.
 *   - Every op returning int gives 0, or -1 with a message in err: out of memory (kind
 *     ENG_ERR_NOMEM: a policy's lay-out or a step's buffers; the state left as it was), a
 *     device fault, MPI failing. The cpu backend's grad and update ops cannot fail.
 *   - Calls come from the training thread, except where a function below says otherwise.
 * What a backend lacks is said once, here, not asked of its name by the trainer: a flag
 * (tracked_host, sum_fails_alone) or a NULL op (section_ms, step_end, download, upload),
 * which the eng_backend_* helpers below check.
 *
 * Not in it: which policies a device takes (eng_policy_check_device), the planner's figures,
 * checkpoints, data, the schedule, clipping (the trainer's: it passes the scale), the
 * probe of the GPUs this build can use (eng_cuda_probe, eng_devices.h).
 */
#ifndef ENG_BACKEND_H
#define ENG_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "eng_cuda_mem.h"
#include "eng_err.h"
#include "eng_mem.h"
#include "eng_memtrace.h"
#include "eng_model.h"
#include "eng_policy.h"
#include "eng_spec.h"

typedef struct eng_backend eng_backend;

/* The AdamW update of one optimizer step (every trainable tensor; decay where the table
 * says), the step's gradient times grad_scale first (the clipping; 1: none). */
typedef struct eng_adamw_args {
	float grad_scale, lr, beta1, beta2, eps, weight_decay;
	double bc1, bc2;         /* bias corrections 1 - beta^t */
} eng_adamw_args;

/* The device allocator's counters (eng_cuda_mem.h; zeros while no GPU model has allocated
 * in this process, and in a build without CUDA). */
typedef eng_cuda_mem_stats eng_device_mem;

typedef struct eng_backend_ops {
	const char *name;        /* "cpu", "cuda": logs only, never compared */
	int tracked_host;        /* 1: the model's memory is the host's tracked allocator:
				  * memory.limit bounds it, the run's fixed bytes are counted
				  * from its shape, the memory timeline traces it, the process's
				  * resident bytes are its untracked term. 0: device memory */
	int sum_fails_alone;     /* 1: a failure of sum_ranks is this rank's own (the others'
				  * sums went on): data parallel, the job cannot go on */

	/* Lays out the activations of policy p: what it needs allocated first, then what it no
	 * longer needs freed; on failure the old layout stays (NOMEM: a retry). */
	int (*set_policy)(eng_backend *be, const eng_policy *p, eng_err *err);
	/* The policy laid out (n_layer 0 before the first). */
	const eng_policy *(*policy)(const eng_backend *be);
	/* Micro-batch k (from 0) of a step of grad_accum: forward and backward over inp/tgt,
	 * *loss its mean loss; its gradient becomes the step's (k 0) or is added to it (the
	 * same bits on both backends: 0 + g, then kn_add's order). */
	int (*micro_step)(eng_backend *be, const uint32_t *inp, const uint32_t *tgt, int k,
		float *loss, eng_err *err);
	/* Forward only (no gradient touched). */
	int (*loss)(eng_backend *be, const uint32_t *inp, const uint32_t *tgt, float *loss,
		eng_err *err);
	/* Milliseconds of recomputation in the last micro_step. */
	double (*recompute_ms)(const eng_backend *be);
	/* The last micro_step's time per section (L blocks and the head) and part
	 * (ENG_SEC_*); NULL: not measured (cuda). */
	const double (*(*section_ms)(const eng_backend *be))[3];
	/* Data parallel (every rank, after its micro-batches whether they worked or not,
	 * before any other collective): this rank's part of the step's gradient summed over
	 * the ranks, the sum the last backward overlapped finished (be->exposed_ms and
	 * hidden_ms). NULL: sum_ranks sums it all. */
	void (*reduce_part)(eng_backend *be);
	/* Data parallel (collective, every rank): the step's gradient <- its sum over the
	 * ranks, the same bits on every rank. Called only with more than one rank. Under a
	 * sharded optimizer (cfg.opt_shards), only this rank's part is summed (a
	 * reduce-scatter), and the three below work on that part. */
	int (*sum_ranks)(eng_backend *be, eng_err *err);
	/* The step's gradient times s (kn_scale's bits). */
	int (*scale_grads)(eng_backend *be, float s, eng_err *err);
	/* The sum of squares of the step's gradient, in double (kn_sumsq's bits: with a
	 * sharded optimizer, each rank's slices told to the others). */
	int (*grad_sumsq)(eng_backend *be, double *out, eng_err *err);
	/* AdamW over the parameter table; the weights the next step reads are updated (bf16
	 * copies included: a sharded optimizer updates its part, then every rank's part goes
	 * to every rank, in be->gather_ms). May have begun when it fails. */
	int (*adamw)(eng_backend *be, const eng_adamw_args *a, eng_err *err);
	/* Bytes of saved activations of block i (i < L) or the head (i == L): host memory on
	 * the cpu, device memory on the GPU. */
	size_t (*saved_bytes)(const eng_backend *be, int i);
	/* Weights and moments to the host model (before a checkpoint reads them), and back
	 * (after a start or resume wrote them); NULL: the host model is the backend's. */
	int (*download)(eng_backend *be, eng_err *err);
	int (*upload)(eng_backend *be, eng_err *err);
	/* Bytes held now by category (into cur, ENG_MEM_NCAT) and in all (*total), as the
	 * backend's allocator counts them; atomics only (any thread). */
	void (*mem_now)(const eng_backend *be, size_t *cur, size_t *total);
	/* A step's window opens: its peaks restart, trace begins step `step` (events of the
	 * tracked allocator, the cpu only). */
	void (*step_begin)(eng_backend *be, eng_memtrace *trace, int step);
	/* And closes (NULL: nothing to close). */
	void (*step_end)(eng_backend *be);
	/* The most each category (peak, ENG_MEM_NCAT) and all together (*total) held in the
	 * window. */
	void (*step_peaks)(const eng_backend *be, size_t *peak, size_t *total);
	/* At a step's end, given its tracked peak: the memory beyond the tracked bytes into
	 * *untracked (cpu: the process's resident peak beyond peak_bytes, that peak into
	 * *rss_peak; cuda: the device's used memory beyond its tensors). -1: not known. */
	int (*step_untracked)(eng_backend *be, size_t peak_bytes, size_t *rss_peak,
		size_t *untracked);
	/* "cpu: OpenBLAS ..." or "cuda: GPU 0, NVIDIA H200 (...), bf16 ...": what runs the
	 * model (a static buffer). */
	const char *(*describe)(const eng_backend *be);
	/* "fp32" or "bf16": the matmuls' operands. */
	const char *(*precision)(const eng_backend *be);
	/* How the ranks' gradients are summed (job-status' "allreduce"), asked with more
	 * than one rank. */
	const char *(*allreduce)(const eng_backend *be);
	/* Frees what the backend allocated, itself included (never the host model). */
	void (*destroy)(eng_backend *be);

	/* Before a backend exists (eng_backend_ops_for): the host model it works over, for
	 * the spec's shape (s->cfg), batch, sequence length and chunking, weights not yet
	 * set (cpu: the whole model, eng_model_init; cuda: the host mirror, the tensor table
	 * and the host copies of weights and moments, nothing of a step); and the backend
	 * over it once its weights are in (its own buffers allocated, nothing uploaded). */
	int (*host_init)(eng_model *m, const eng_spec *s, eng_err *err);
	int (*create)(eng_backend **out, eng_model *host, const eng_spec *s, eng_err *err);
} eng_backend_ops;

struct eng_backend {
	const eng_backend_ops *ops;
	eng_model *host;         /* the trainer's model (cpu) or host mirror (cuda) */
	double gather_ms;        /* the last adamw's all-gather of the weights (0: none) */
	double exposed_ms, hidden_ms; /* the last reduce_part's: waited for after the backward,
				  * and run behind it */
};

/* The two backends' tables. cpu's create: with grad_accum > 1 the buffer of the step's sum
 * (ENG_MEM_GRADS; -1 when refused). cuda's: the GPU model with rank 0's options
 * (REMAT_CUDA_*, the spec's precision over them) on the rank's node-local GPU, and its
 * ranks' communicator; -1: no GPU, not built, out of memory. */
extern const eng_backend_ops eng_backend_cpu_ops, eng_backend_cuda_ops;
/* The table of device d's backend. */
const eng_backend_ops *eng_backend_ops_for(eng_device d);
void eng_backend_free(eng_backend *be); /* NULL is a no-op */
/* Whether device d's backend can run in this process (cuda: this build has it and a GPU is
 * usable, eng_cuda_probe), asked before any file is read: 0, or -1 saying why not. */
int eng_backend_usable(eng_device d, eng_err *err);
/* Tests: the GPU model of a cuda backend (eng_cuda.h's test hooks); NULL under another. */
struct eng_cuda *eng_backend_gpu(const eng_backend *be);

/* The helpers for the optional ops: whether section times are measured; the host model
 * brought up to date (download, or nothing); the device brought up to date (upload, or
 * nothing); the step's window closed. */
int eng_backend_has_sections(const eng_backend *be);
int eng_backend_sync_host(eng_backend *be, eng_err *err);
int eng_backend_sync_device(eng_backend *be, eng_err *err);
void eng_backend_step_end(eng_backend *be);

/* The process's device memory counters and their reset (any thread, no CUDA call). */
void eng_backend_device_mem(eng_device_mem *st);
void eng_backend_device_mem_reset_peak(void);

#endif
