/* eng_model.h - the GPT-2 model on the CPU: parameters, activations per section, one
 * training step (forward + backward) under a replaceable recompute policy.
 *
 * Layout follows llm.c: parameters, gradients and AdamW moments are each one block of
 * floats with a table of named tensors into it (Hugging Face names, Conv1D [in, out]
 * weights, every tensor 64-byte aligned). Activations are allocated per section as the
 * policy asks (eng_model_set_policy), so switching a block to `full` frees its buffers.
 *
 * Not here: the optimizer loop, data, files (eng_train.c, eng_data.c, eng_ckpt.c).
 */
#ifndef ENG_MODEL_H
#define ENG_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "eng_acts.h"
#include "eng_mem.h"
#include "eng_config.h"
#include "eng_err.h"
#include "eng_plan.h"
#include "eng_policy.h"

#define ENG_NAME_MAX 64 /* longest tensor name, with its NUL */

/* The parts of a section's time in a step (eng_model.sec_ms). */
enum { ENG_SEC_FWD, ENG_SEC_RECOMPUTE, ENG_SEC_BWD };

typedef struct eng_ptensor {
	char name[ENG_NAME_MAX]; /* "transformer.h.3.attn.c_attn.weight" */
	int ndim;                /* 1 or 2 */
	int64_t shape[2];
	size_t offset;           /* floats from the start of the block; multiple of 16 */
	size_t numel;
	int decay;               /* 1 for 2-D weights (wte, wpe, linear weights) */
} eng_ptensor;

/* Pointers into one block of parameters (or of gradients, or of a moment). */
typedef struct eng_layer_w {
	float *ln1w, *ln1b;         /* (C) */
	float *qkvw, *qkvb;         /* (C, 3C), (3C) */
	float *attprojw, *attprojb; /* (C, C), (C) */
	float *ln2w, *ln2b;         /* (C) */
	float *fcw, *fcb;           /* (C, 4C), (4C) */
	float *fcprojw, *fcprojb;   /* (4C, C), (C) */
} eng_layer_w;

typedef struct eng_weights {
	float *wte;                  /* (V, C), also the lm_head */
	float *wpe;                  /* (P, C) */
	eng_layer_w h[ENG_MAX_LAYERS];
	float *lnfw, *lnfb;          /* (C) */
} eng_weights;

typedef struct eng_model {
	eng_config cfg;
	int B, T;                    /* batch and sequence length the buffers are sized for */
	int chunk_rows;              /* rows per logits chunk (same under off and chunked) */

	eng_ptensor *tensors;        /* ntensors entries, Hugging Face order */
	int ntensors;
	size_t nfloats;              /* floats in each of params/grads/m/v, padding included */
	float *params, *grads, *m, *v;
	eng_weights w, g;            /* pointer tables into params and grads */

	/* activations (eng_acts.h): saved per section, the shared recompute pool, the head's;
	 * lay.policy is what they are laid out for now */
	eng_layout lay;
	eng_layout_mem mem;          /* their sizes for B x T, and eng_mem */
	/* workspace (ENG_MEM_WORKSPACE) */
	float *losses;               /* (B,T) per-row loss */
	float *tmp;                  /* (B,T,C) linear outputs before the residual add */
	float *dres;                 /* (B,T,C) gradient of the residual stream */
	float *dbuf;                 /* (B,T,C) */
	float *dbig;                 /* (B,T,4C) */
	float *dqkv;                 /* (B,T,3C) */
	float *att_scratch;          /* kn_attention_scratch_floats(T): per-thread blocks */
	int scratch_threads;         /* threads att_scratch was sized for */

	/* precision bf16 (cfg.mm_bf16): the matmuls' bf16 operands (kn_gemm_bf16) */
	uint16_t *wbf;               /* (nfloats) params rounded to bf16, ENG_MEM_PARAMS */
	int wbf_valid;               /* 0: params changed since (eng_model_params_changed) */
	uint16_t *bf_out;            /* workspace: a gradient rounded, max(4 N C, R V) */
	uint16_t *bf_in;             /* workspace: atty rounded, (B,T,C) */
	void *mm_scratch;            /* oneDNN's scratchpads, the largest of the step's shapes */
	size_t mm_scratch_bytes;
	int mm_threads;              /* threads mm_scratch was sized for (0: not yet) */
	char mm_err[256];            /* a bf16 matmul's failure in this pass, "" when none */

	float *logits_tap;           /* tests: when set, (B,T,V) receives every chunk's logits */
	float *row_tap;              /* when set, (V) receives the logits of row row_tap_at */
	int row_tap_at;              /* (of the B*T rows) */
	double recompute_ms;         /* time spent recomputing in the last backward */
	/* the last step's time per section (blocks 0..L-1, the head at L), in milliseconds:
	 * its forward, its recompute in backward, its backward (the cost table's samples) */
	double sec_ms[ENG_MAX_LAYERS + 1][3];
	struct eng_memtrace *trace;  /* NULL, or the step's memory timeline (eng_memtrace.h) */
} eng_model;

/* Builds the tensor table and allocates parameters, gradients and moments (zeroed) and the
 * workspace, for batches of B x T; activations follow with eng_model_set_policy. chunk_rows
 * 0 picks eng_plan_chunk_rows. */
int eng_model_init(eng_model *m, const eng_config *cfg, int B, int T, int chunk_rows,
	eng_err *err);
void eng_model_free(eng_model *m); /* safe on a zeroed or failed model */

/* GPT-2 initialisation from a seed: N(0, 0.02) weights, c_proj weights N(0, 0.02/sqrt(2L)),
 * zero biases, LayerNorm weight 1. Deterministic for a seed. */
void eng_model_init_weights(eng_model *m, uint64_t seed);

/* The parameters were written (a load, an optimizer step): under precision bf16 their bf16
 * copy is rounded again before the next forward. Nothing in float32. */
void eng_model_params_changed(eng_model *m);

/* Lays out activation buffers for policy p: allocates what it needs first, then frees what
 * it no longer needs (returned to the OS). On failure the old layout is untouched. */
int eng_model_set_policy(eng_model *m, const eng_policy *p, eng_err *err);

/* One forward and backward over inp/tgt (B*T tokens each): gradients overwritten, *loss the
 * mean cross-entropy. -1 when a workspace could not be allocated (err says which). */
int eng_model_step(eng_model *m, const uint16_t *inp, const uint16_t *tgt, float *loss,
	eng_err *err);

/* Forward only: *loss the mean loss, no gradient; -1 as eng_model_step. */
int eng_model_loss(eng_model *m, const uint16_t *inp, const uint16_t *tgt, float *loss,
	eng_err *err);

/* Measured bytes of saved activations of block i (i < L) or of the head (i == L). */
size_t eng_model_saved_bytes(const eng_model *m, int i);

/* The parameter table of shape c, in Hugging Face order, without allocating anything:
 * fills tab (eng_model_ntensors(c) entries) and returns the floats of one block of them,
 * padding included. The one description of which tensors a GPT-2 has: the model, the
 * checkpoint checks and the importers all read it. */
int eng_model_ntensors(const eng_config *c);
size_t eng_model_table(const eng_config *c, eng_ptensor *tab);

/* What a model of shape cfg for batches of B x T (logits chunks of chunk_rows, 0: the
 * default), run with `threads` threads, holds whatever its policy: parameters, gradients,
 * moments and the step's workspace, by category (the rest 0), as eng_model_init allocates
 * them, without allocating (under precision bf16 also the bf16 weights, the rounded
 * operands and oneDNN's scratchpads, at the current thread count). */
void eng_model_fixed_bytes(const eng_config *cfg, int B, int T, int chunk_rows, int threads,
	size_t out[ENG_MEM_NCAT]);

/* Tensor by name, NULL when none. */
const eng_ptensor *eng_model_find(const eng_model *m, const char *name);

#endif
