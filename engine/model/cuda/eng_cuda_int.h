/* eng_cuda_int.h - the GPU model's insides, shared by eng_cuda.c (lifetime, memory layout,
 * transfers) and eng_cuda_step.c (forward, backward, optimizer). Not a public header.
 *
 * Legend: B batch, T time, C channels, NH heads, V vocab, Vp = V rounded up to
 * EC_VOCAB_ALIGN (row stride of the logits), L layers, N = B*T rows; dt the activation
 * type, es its size in bytes.
 */
#ifndef ENG_CUDA_INT_H
#define ENG_CUDA_INT_H

#include <cuda_runtime_api.h>

#include "eng_acts.h"
#include "eng_cuda.h"
#include "eng_cuda_mem.h"
#include "kc.h"

#define EC_VOCAB_ALIGN 64 /* logits rows padded to a multiple of this many elements */

/* Pointers into one block of weights: the working copy (dt) or the gradients (float32). */
typedef struct ec_layer_w {
	void *ln1w, *ln1b;          /* (C) */
	void *qkvw, *qkvb;          /* (C, 3C), (3C) */
	void *attprojw, *attprojb;  /* (C, C), (C) */
	void *ln2w, *ln2b;          /* (C) */
	void *fcw, *fcb;            /* (C, 4C), (4C) */
	void *fcprojw, *fcprojb;    /* (4C, C), (C) */
} ec_layer_w;

typedef struct ec_weights {
	void *wte;                  /* (V, C), also the lm_head */
	void *wpe;                  /* (P, C) */
	ec_layer_w h[ENG_MAX_LAYERS];
	void *lnfw, *lnfb;          /* (C) */
} ec_weights;

/* Data parallel: how the gradient is summed across ranks (eng_cuda_dp.c). */
typedef struct ec_dp ec_dp;
void ec_dp_close(ec_dp *d); /* NULL is a no-op */

struct eng_cuda {
	int gpu;                     /* its device index */
	eng_config cfg;
	int B, T, chunk_rows, Vp;
	kc_dtype dt;
	size_t es;                   /* bytes per activation element */
	eng_ptensor *tensors;        /* own copy of the host's table */
	int ntensors;
	size_t nfloats;              /* floats of params/grads/m/v, padding included */

	cudaStream_t st;             /* compute */
	cudaStream_t cst;            /* offload copies */
	kc_blas *blas;
	kc_sdpa *sdpa;               /* NULL: our attention kernels */
	void *blas_ws, *sdpa_ws, *att_scratch; /* workspace */

	float *params, *grads, *m, *v; /* float32 (nfloats) */
	float *acc;                  /* grad_accum > 1: the sum of the step's micro-batches
				      * (nfloats), else NULL */
	ec_dp *dp;                   /* data parallel, else NULL */
	void *wcopy;                 /* bf16 working copy of params, NULL in float32 */
	ec_weights w;                /* into wcopy, or params in float32 */
	ec_weights g;                /* into grads */

	/* activations (eng_acts.h) in device memory, offloaded blocks' copies in pinned host
	 * memory; lay.policy n_layer 0: none laid out yet */
	eng_layout lay;
	eng_layout_mem mem;          /* their sizes (es or float32) and the device allocator */
	size_t off_offset[ENG_ACT_N]; /* per block field: offset in an offload slot, or -1 */
	cudaEvent_t ev_written[ENG_LAYOUT_SLOTS], ev_free[ENG_LAYOUT_SLOTS]; /* slot -> host */
	cudaEvent_t ev_loaded[ENG_LAYOUT_SLOTS], ev_used[ENG_LAYOUT_SLOTS];  /* host -> slot */

	/* workspace */
	float *losses;               /* (B,T) */
	void *tmp, *dres, *dbuf;     /* (B,T,C) */
	void *dbig;                  /* (B,T,4C) */
	void *dqkv;                  /* (B,T,3C) */
	void *red_scratch;           /* column-sum partials of LayerNorm and bias gradients */
	double *sumsq;               /* KC_SUMSQ_PARTS partials, then the total */

	/* data: the batch on the device, and the token buckets of the embedding gradient */
	uint32_t *d_inp, *d_tgt;     /* (B,T) */
	int *d_order, *d_bstart, *d_btok;
	int *h_count, *h_order, *h_bstart, *h_btok; /* host side of the buckets */
	int nb;                      /* distinct tokens of the batch */
	float *h_losses;             /* (B,T) host copy */

	cudaEvent_t rc_ev[2 * ENG_MAX_LAYERS]; /* around each block's recompute */
	int rc_n;                    /* pairs recorded in the last step */
	double recompute_ms;
	char desc[512];              /* eng_cuda_describe */
};

/* The step's gradient: the micro-batches' sum, or the one micro-batch's. */
static inline float *ec_step_grads(const eng_cuda *g)
{
	return g->acc ? g->acc : g->grads;
}

/* Bytes of one chunk of logits, (chunk_rows, Vp), rounded up to the alignment: the stride
 * of the chunks in the head=off buffer. */
size_t ec_chunk_bytes(const eng_cuda *g);
/* Block l's activations for this pass: saved, then the pool, or slot `slot` (>= 0) for an
 * offloaded block. */
eng_acts ec_block_view(const eng_cuda *g, int l, int slot);

/* Checks a CUDA call; on failure formats "what: error" into err and returns -1. */
int ec_cuda_check(int cuda_error, const char *what, eng_err *err);
/* Formats the kernel layer's last message (kc_error) into err, returns -1. */
int ec_kc_fail(const char *what, eng_err *err);

#endif
