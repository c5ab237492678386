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

#include "eng_cuda.h"
#include "eng_cuda_mem.h"
#include "kc.h"

#define EC_VOCAB_ALIGN 64 /* logits rows padded to a multiple of this many elements */
#define EC_NSLOTS 2       /* device slots of offloaded blocks: one in use, one loading */

/* A block's activations on the device (void *: dt or float32 as ec_fields says). In
 * `saved`, NULL means the policy does not keep it there; in a view for one forward or
 * backward, dropped ones point into the recompute pool or an offload slot. */
typedef struct ec_acts {
	void *x;                    /* (B,T,C) block input */
	void *ln1;                  /* (B,T,C) */
	void *ln1_mean, *ln1_rstd;  /* (B,T) float32 */
	void *qkv;                  /* (B,T,3C) */
	void *att_lse;              /* (B,NH,T) float32: log-sum-exp of the attention rows */
	void *atty;                 /* (B,T,C) attention output before c_proj */
	void *res2;                 /* (B,T,C) residual after attention */
	void *ln2;                  /* (B,T,C) */
	void *ln2_mean, *ln2_rstd;  /* (B,T) float32 */
	void *fch;                  /* (B,T,4C) before GELU */
	void *gelu;                 /* (B,T,4C) */
} ec_acts;

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

struct eng_cuda {
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
	void *wcopy;                 /* bf16 working copy of params, NULL in float32 */
	ec_weights w;                /* into wcopy, or params in float32 */
	ec_weights g;                /* into grads */

	eng_policy policy;           /* the layout below (n_layer 0: none yet) */
	ec_acts saved[ENG_MAX_LAYERS];
	ec_acts pool;                /* recompute pool shared by blocks (ENG_MEM_RECOMPUTE) */
	void *host_off[ENG_MAX_LAYERS]; /* pinned: what an offloaded block keeps */
	void *slot[EC_NSLOTS];       /* device slots for offloaded blocks (ENG_MEM_RECOMPUTE) */
	size_t off_offset[16];       /* per ec_fields entry: offset in a slot, or (size_t)-1 */
	size_t off_bytes;            /* bytes of one slot */
	cudaEvent_t ev_written[EC_NSLOTS], ev_free[EC_NSLOTS]; /* forward: slot -> host */
	cudaEvent_t ev_loaded[EC_NSLOTS], ev_used[EC_NSLOTS];  /* backward: host -> slot */

	/* head */
	void *xf, *lnf;              /* (B,T,C) input and output of ln_f */
	float *lnf_mean, *lnf_rstd, *lse; /* (B,T) */
	void *logits;                /* chunks of (chunk_rows, Vp) under head=off, else NULL */
	void *chunk;                 /* one chunk under head=chunked */

	/* workspace */
	float *losses;               /* (B,T) */
	void *tmp, *dres, *dbuf;     /* (B,T,C) */
	void *dbig;                  /* (B,T,4C) */
	void *dqkv;                  /* (B,T,3C) */
	void *red_scratch;           /* column-sum partials of LayerNorm and bias gradients */
	double *sumsq;               /* KC_SUMSQ_PARTS partials, then the total */

	/* data: the batch on the device, and the token buckets of the embedding gradient */
	uint16_t *d_inp, *d_tgt;     /* (B,T) */
	int *d_order, *d_bstart, *d_btok;
	int *h_count, *h_order, *h_bstart, *h_btok; /* host side of the buckets */
	int nb;                      /* distinct tokens of the batch */
	float *h_losses;             /* (B,T) host copy */

	cudaEvent_t rc_ev[2 * ENG_MAX_LAYERS]; /* around each block's recompute */
	int rc_n;                    /* pairs recorded in the last step */
	double recompute_ms;
	char desc[512];              /* eng_cuda_describe */
};

/* The fields of ec_acts: size kind, float32 or dt, and the modes that keep them on the
 * device (bit 1 << eng_mode). */
enum { EC_SZ_NC, EC_SZ_N, EC_SZ_3NC, EC_SZ_4NC, EC_SZ_LSE };
typedef struct ec_field {
	size_t offset; /* of the pointer in ec_acts */
	int size;      /* EC_SZ_* */
	int f32;       /* 1: float32, 0: dt */
	int keep;      /* modes whose blocks keep it in `saved` */
} ec_field;
extern const ec_field ec_fields[];
extern const int ec_nfields;

static inline void **ec_field_ptr(ec_acts *a, int k)
{
	return (void **)((char *)a + ec_fields[k].offset);
}
size_t ec_field_bytes(const eng_cuda *g, int k);
/* Bytes of one chunk of logits, (chunk_rows, Vp), rounded up to the alignment: the stride
 * of the chunks in the head=off buffer. */
size_t ec_chunk_bytes(const eng_cuda *g);
/* 1 when an offloaded block's host copy holds field k (what `off` keeps, but x) */
int ec_field_offloaded(int k);

/* Block l's activations for this pass: saved, then the pool, or slot `slot` (>= 0) for an
 * offloaded block. */
ec_acts ec_block_view(const eng_cuda *g, int l, int slot);

/* Checks a CUDA call; on failure formats "what: error" into err and returns -1. */
int ec_cuda_check(int cuda_error, const char *what, eng_err *err);
/* Formats the kernel layer's last message (kc_error) into err, returns -1. */
int ec_kc_fail(const char *what, eng_err *err);

#endif
