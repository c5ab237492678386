/* eng_model.h - the model on the CPU (GPT-2 or the Llama family, eng_config.h):
 * parameters, activations per section, one training step (forward + backward) under a
 * replaceable recompute policy.
 *
 * Layout follows llm.c: parameters, gradients and AdamW moments are each one block of
 * floats with a table of named tensors into it (Hugging Face names; GPT-2's Conv1D
 * [in, out] weights, the Llama family's Linear [out, in] ones; every tensor 64-byte aligned
 * but k_proj and v_proj, which follow q_proj, and up_proj, which follows gate_proj, so that
 * q|k|v and gate|up are each one weight of one product). Activations are allocated per
 * section as the policy asks (eng_model_set_policy), so switching a block to `full` frees
 * its buffers.
 *
 * Not here: the optimizer loop, data, files (eng_train.c, eng_data.c, eng_ckpt_*.c).
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
#include "eng_timing.h"
#include "eng_policy.h"
#include "eng_tensors.h"
#include "kn.h"


/* The parts of a section's time in a step (eng_model.sec_ms). */
enum { ENG_SEC_FWD, ENG_SEC_RECOMPUTE, ENG_SEC_BWD };

/* Pointers into one block of parameters (or of gradients, or of a moment). GPT-2's shapes;
 * under llama (no biases: those are NULL) ln1w input_layernorm, qkvw q|k|v_proj
 * ((NH + 2 NKV) hs, C), attprojw o_proj (C, C), ln2w post_attention_layernorm, fcw
 * gate|up_proj (2I, C), fcprojw down_proj (C, I). */
typedef struct eng_layer_w {
	float *ln1w, *ln1b;         /* (C) */
	float *qkvw, *qkvb;         /* (C, 3C), (3C) */
	float *attprojw, *attprojb; /* (C, C), (C) */
	float *ln2w, *ln2b;         /* (C) */
	float *fcw, *fcb;           /* (C, 4C), (4C) */
	float *fcprojw, *fcprojb;   /* (4C, C), (C) */
	/* LoRA: unit u's (eng_lora_units) A (r, in) and B (cols, r); NULL where none */
	float *lora_a[ENG_LORA_UNITS], *lora_b[ENG_LORA_UNITS];
} eng_layer_w;

typedef struct eng_weights {
	float *wte;                  /* (V, C): wte, embed_tokens */
	float *wpe;                  /* (P, C); NULL under llama (rotary positions) */
	eng_layer_w h[ENG_MAX_LAYERS];
	float *lnfw, *lnfb;          /* (C) ln_f; llama's model.norm (lnfb NULL) */
	float *lmw;                  /* (V, C) the lm_head: wte when tied */
} eng_weights;

/* ---- the matmul products of a step: one table, that the engine runs and bench-sgemm times */

/* Who runs a product. Float32: OpenBLAS, unless oneDNN's matmul primitive measured faster
 * on it (the lm_head's chunks: bench-blas); bf16: always oneDNN. PACKED: oneDNN with its B
 * (a weight) packed once after each optimizer step, not copied into blocks on every call. */
enum { ENG_ROUTE_OPENBLAS, ENG_ROUTE_DNNL, ENG_ROUTE_PACKED };

#define ENG_PRODUCTS 18 /* 4 linear layers x 3 products, the head's 3 for 2 chunk sizes */
_Static_assert(ENG_PRODUCTS == ENG_TIMING_PRODUCTS, "the timing has a row per product");

typedef struct eng_product {
	const char *name; /* "fc dW", "head dinp" */
	kn_mm mm;         /* shape, strides, beta; bf16 under precision bf16 */
	int count;        /* how many of it a step makes */
	int route;        /* ENG_ROUTE_* */
} eng_product;

/* The products of a step of B x T rows with logits chunks of R rows (the last chunk's
 * N % R rows a shape of its own), in a fixed order: per linear layer (qkv, proj, fc,
 * fcproj) forward, dinp, dW; then the head's logits, dlnf, dwte for a full chunk, and for
 * the last when it is short. A linear layer's dW writes its gradient (beta 0: the step
 * zeroes only the gradients nothing overwrites); the head's dwte adds. flags:
 * ENG_PRODUCTS_DNNL when oneDNN runs here (kn_dnnl_available: the float32 routes),
 * ENG_PRODUCTS_PACK_BF16 when bf16 products pack their weights (kn_bf16_pack_weights).
 * Returns how many (at most ENG_PRODUCTS). */
#define ENG_PRODUCTS_DNNL 1u
#define ENG_PRODUCTS_PACK_BF16 2u
int eng_model_products(const eng_config *cfg, int B, int T, int R, unsigned flags,
	eng_product *out);
/* The flags a model of cfg runs with here: ENG_PRODUCTS_DNNL where oneDNN runs, unless
 * REMAT_FP32_DNNL=0 keeps every float32 product on OpenBLAS (the bits of builds without
 * oneDNN); ENG_PRODUCTS_PACK_BF16 under bf16 where kn_bf16_pack_weights says so. */
unsigned eng_model_route_flags(const eng_config *cfg);
/* Precision bf16: the head's dwte is made in blocks of this many vocabulary rows (oneDNN's
 * bf16 kernels ran the whole V-row product at half the speed of 4096-row ones): as even as
 * blocks of at most 4096 rows, and of what the free dbig workspace holds at N rows, make
 * them, the last one ending at V (eng_model.c). */
int eng_model_dwte_rows(const eng_config *cfg, int N);

typedef struct eng_model {
	eng_config cfg;
	int B, T;                    /* batch and sequence length the buffers are sized for */
	int chunk_rows;              /* rows per logits chunk (same under off and chunked) */

	eng_ptensor *tensors;        /* ntensors entries, Hugging Face order */
	int ntensors;
	size_t nfloats;              /* floats of params, padding included */
	size_t ngrad;                /* floats of grads: the trainable tensors' */
	float *params, *grads;
	/* AdamW's moments of the trainable floats [opt_lo, opt_hi): all ngrad, or this rank's
	 * part under a sharded optimizer (cfg.opt_shards); m[0] is float opt_lo's */
	float *m, *v;
	size_t opt_lo, opt_hi;
	eng_weights w, g;            /* pointer tables into params and grads (NULL: frozen) */
	int bwd_floor;               /* the lowest block whose backward a step runs: below it
	                              * nothing trains (0 when the embedding does) */

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
	float *dmid;                 /* LoRA: (B,T,r) an adapter's d(x A^T); NULL without */
	float *att_scratch;          /* kn_attention_scratch_floats(T): per-thread blocks */
	float *rope;                 /* llama: (T, hs) cos | sin (kn_rope_table), at init */
	int scratch_threads;         /* threads att_scratch was sized for */

	/* the step's products and who runs each (eng_model_products, fixed at init) */
	eng_product prod[ENG_PRODUCTS];
	int nprod;
	/* copies of the weights, made again after each change (eng_model_params_changed) */
	int wcopy_valid;             /* 0: params changed since */
	int wbf_valid;               /* wbf alone: 0 params changed since, but for an optimizer
	                              * step that wrote it (eng_model_opt_wbf) */
	uint16_t *wbf;               /* precision bf16: (nfloats) params rounded, ENG_MEM_PARAMS */
	void *wpack;                 /* the packed B of ENG_ROUTE_PACKED products, ENG_MEM_PARAMS */
	size_t wpack_bytes;
	size_t pack_at[ENG_PRODUCTS], pack_sz[ENG_PRODUCTS]; /* product i's copy for layer l:
	                                * wpack + pack_at[i] + l * pack_sz[i] */
	/* precision bf16 (cfg.mm_bf16): the matmuls' bf16 operands */
	uint16_t *bf_out;            /* workspace: a gradient rounded, max(4 N C, R V); from a
	                              * norm's backward (ln_f's, ln_1's) to the next block's
	                              * first product, dres's rounding (mm_grad_bf) */
	uint16_t *bf_in;             /* workspace: atty rounded, (B,T,C) */
	void *mm_scratch;            /* oneDNN's scratchpads, the largest of the step's products */
	size_t mm_scratch_bytes;
	int mm_threads;              /* threads mm_scratch and wpack were sized for (0: not yet) */
	char mm_err[256];            /* a oneDNN matmul's failure in this pass, "" when none */

	/* model.quantize (eng_quant.h): the blocks' frozen linear weights in 4 bits */
	uint8_t *q4;                 /* ENG_MEM_PARAMS: every quantized tensor's region */
	kn_q4_weight *qw;            /* (ntensors) the quantized tensors' views into q4 */
	int qlin[ENG_MAX_LAYERS][4]; /* block l's linear layer k: its first tensor, -1 float */
	float *q4_scratch;           /* workspace: a tile of the widest (kn_q4_scratch_floats) */
	uint16_t *q4_bf;             /* workspace under compute bf16: a product's input or
	                              * output gradient rounded, (B,T, the widest layer) */
	float *qstage;               /* while loading: one tensor's floats, its transpose, its
	                              * absmax values (eng_model_tensor_dst) */

	float *logits_tap;           /* tests: when set, (B,T,V) receives every chunk's logits */
	float *row_tap;              /* when set, (V) receives the logits of row row_tap_at */
	int row_tap_at;              /* (of the B*T rows) */
	double recompute_ms;         /* time spent recomputing in the last backward */
	/* told as eng_model_step's backward makes gradients final, from the end of the table:
	 * stage L after the head, l after block l, -1 after the embedding (data parallel's
	 * overlapped sum); NULL: nobody */
	void (*on_final)(void *ud, int stage);
	void *on_final_ud;
	/* the last step's time per section (blocks 0..L-1, the head at L), in milliseconds:
	 * its forward, its recompute in backward, its backward (the cost table's samples) */
	double sec_ms[ENG_MAX_LAYERS + 1][3];
	struct eng_memtrace *trace;  /* NULL, or the step's memory timeline (eng_memtrace.h) */
	eng_timing *timing;          /* NULL, or where the step's time goes (eng_timing.h;
	                              * malloc'd, freed with the model) */
} eng_model;

/* Builds the tensor table and allocates parameters, gradients and moments (zeroed) and the
 * workspace, for batches of B x T; activations follow with eng_model_set_policy. chunk_rows
 * 0 picks eng_plan_chunk_rows. */
int eng_model_init(eng_model *m, const eng_config *cfg, int B, int T, int chunk_rows,
	eng_err *err);
/* The same for a model that never steps on the CPU (the CUDA backend's host copy of the
 * weights and moments): batch 1 x 1, and no matmul products (no oneDNN state). */
int eng_model_init_host(eng_model *m, const eng_config *cfg, eng_err *err);
void eng_model_free(eng_model *m); /* safe on a zeroed or failed model */

/* Initialisation from a seed: GPT-2's N(0, 0.02) weights, c_proj weights
 * N(0, 0.02/sqrt(2L)), zero biases, LayerNorm weight 1; the Llama family's as Hugging Face's
 * LlamaPreTrainedModel._init_weights: every 2-D weight N(0, 0.02), RMSNorm weights 1.
 * Deterministic for a seed (4-bit weights quantized from the same draws). -1 when the
 * quantization's stage cannot be allocated. */
int eng_model_init_weights(eng_model *m, uint64_t seed, eng_err *err);

/* The LoRA adapters alone, as PEFT initialises them: A uniform(-1/sqrt(in), 1/sqrt(in)),
 * B zero (eng_model_init_weights calls it; a run of a loaded base with "lora" too). */
void eng_model_init_adapters(eng_model *m, uint64_t seed);

/* The parameters were written (a load, an optimizer step): their copies (bf16, packed for
 * oneDNN) are made again before the next forward. */
void eng_model_params_changed(eng_model *m);
/* An optimizer step's way: where it writes the bf16 rounding of each parameter it updates,
 * in its own pass (the bf16 copy, when precision bf16 has one made and valid: the frozen
 * tensors' part of it stays so), or NULL; after the step, eng_model_params_stepped, 1 when
 * it did write there, in place of eng_model_params_changed. */
/* The floats of trainable tensor t in m's moments (all, or this rank's part): how many,
 * and from which of its elements *k (the first at m->m[t->goff + *k - m->opt_lo]). */
size_t eng_model_opt_span(const eng_model *m, const eng_ptensor *t, size_t *k);
uint16_t *eng_model_opt_wbf(const eng_model *m);
void eng_model_params_stepped(eng_model *m, int wbf_written);

/* Lays out activation buffers for policy p: allocates what it needs first, then frees what
 * it no longer needs (returned to the OS). On failure the old layout is untouched. */
int eng_model_set_policy(eng_model *m, const eng_policy *p, eng_err *err);

/* One forward and backward over inp/tgt (B*T tokens each): gradients overwritten, *loss the
 * mean cross-entropy. -1 when a workspace could not be allocated (err says which). */
int eng_model_step(eng_model *m, const uint32_t *inp, const uint32_t *tgt, float *loss,
	eng_err *err);

/* Forward only: *loss the mean loss, no gradient; -1 as eng_model_step. */
int eng_model_loss(eng_model *m, const uint32_t *inp, const uint32_t *tgt, float *loss,
	eng_err *err);

/* Measured bytes of saved activations of block i (i < L) or of the head (i == L). */
size_t eng_model_saved_bytes(const eng_model *m, int i);

/* What a model of shape cfg for batches of B x T (logits chunks of chunk_rows, 0: the
 * default), run with `threads` threads, holds whatever its policy: parameters, gradients,
 * moments and the step's workspace, by category (the rest 0), as eng_model_init allocates
 * them, without allocating (also oneDNN's scratchpads and packed weights, at the current
 * thread count, or those live (may be NULL: a plan), a running model of that shape, holds;
 * under precision bf16 the bf16 weights and the rounded operands). */
void eng_model_fixed_bytes(const eng_config *cfg, int B, int T, int chunk_rows, int threads,
	const eng_model *live, size_t out[ENG_MEM_NCAT]);

/* Loading weights, tensor by tensor (a file's, an initialisation's): where tensor t's
 * Hugging Face floats go, its place in params or, for a 4-bit one, a staging buffer
 * (ENG_MEM_WORKSPACE, allocated on the first call: NULL out of memory, err says so); then
 * eng_model_tensor_loaded, which quantizes a staged one into its 4 bits (a GPT-2 Conv1D
 * weight transposed to [out, in] first); eng_model_load_end frees the stage. The loader
 * calls eng_model_params_changed once it is done, as after any write of the weights. */
float *eng_model_tensor_dst(eng_model *m, const eng_ptensor *t, eng_err *err);
void eng_model_tensor_loaded(eng_model *m, const eng_ptensor *t);
void eng_model_load_end(eng_model *m);
/* Tensor t's floats as Hugging Face lays them out, into out (numel): a 4-bit one
 * dequantized (what the products multiply by), any other copied. -1 out of memory. */
int eng_model_tensor_get(const eng_model *m, const eng_ptensor *t, float *out, eng_err *err);
/* Every tensor quantization qc targets, of m (whose weights are all float32, qc's table
 * read on m's), replaced by dequant(quant(W)): the base a run quantized with qc computes
 * with (remat-train --merge-lora); eng_model_params_changed is the caller's. -1 out of
 * memory. */
int eng_model_q4_roundtrip(eng_model *m, const eng_config *qc, eng_err *err);

/* Tensor by name, NULL when none. */
const eng_ptensor *eng_model_find(const eng_model *m, const char *name);

#endif
