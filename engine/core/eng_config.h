/* eng_config.h - the architecture of a model, and the named presets.
 *
 * Two families (design.md §5):
 *   gpt2   pre-LayerNorm (eps 1e-5), tanh GELU MLP of 4*n_embd, learned positions, biases,
 *          tied lm_head. The shape: n_layer, n_embd, n_head, n_positions, vocab_size.
 *   llama  pre-RMSNorm (rms_norm_eps, fp32), rotary positions (rope_theta, Hugging Face's
 *          rotate_half convention), grouped-query attention (n_kv_head key/value heads,
 *          n_head % n_kv_head == 0), a SwiGLU MLP of intermediate_size, no biases, the
 *          lm_head tied or not (tie_word_embeddings). head_dim is n_embd / n_head.
 * The fields after mm_bf16 are zero for GPT-2 (ENG_GPT2): arch 0 is gpt2, and the accessors
 * below give GPT-2's implicit values where the fields are 0.
 */
#ifndef ENG_CONFIG_H
#define ENG_CONFIG_H

#include <stddef.h>

#include "eng_err.h"

#define ENG_MAX_LAYERS 128      /* more layers than any shape this engine serves */
#define ENG_MAX_EMBD 8192       /* upper bound on n_embd accepted from outside */
#define ENG_MAX_VOCAB (1 << 20) /* upper bound on vocab_size accepted from outside */
#define ENG_MAX_POSITIONS 65536 /* upper bound on n_positions accepted from outside */
#define ENG_MAX_FFN 65536       /* upper bound on intermediate_size accepted from outside */
#define ENG_MAX_TENSORS (4 + 24 * ENG_MAX_LAYERS) /* entries of any model's tensor table */

typedef enum { ENG_ARCH_GPT2, ENG_ARCH_LLAMA } eng_arch;

/* A GPT-2 shape, as an initializer: ENG_GPT2(L, C, NH, P, V) */
#define ENG_GPT2(L, C, NH, P, V)                                                            \
	{.n_layer = (L), .n_embd = (C), .n_head = (NH), .n_positions = (P), .vocab_size = (V)}

typedef struct eng_config {
	int n_layer;     /* L, number of transformer blocks */
	int n_embd;      /* C, channels */
	int n_head;      /* NH, attention heads; C % NH == 0 */
	int n_positions; /* P, longest sequence (rows of wpe; llama: max_position_embeddings) */
	int vocab_size;  /* V, rows of wte */
	/* Not the model's but its run's (never in config.json or a checkpoint): 1 under the
	 * CPU's precision bf16, where the matmuls take bf16 operands and their inputs are kept
	 * in bf16 (eng_acts.h `mm`). In the shape so that every size the engine derives from
	 * it (the model's buffers, the planner, the accounting) sees it. */
	int mm_bf16;
	/* Not the model's but its run's, as mm_bf16: 1 when a GPU run keeps its activations
	 * in bf16 (device cuda's precision bf16, eng_cuda.h), every field but the float32 ones
	 * (eng_acts.h `f32`) 2 bytes. Only the planner's and the accounting's sizes follow it:
	 * the host mirror of a GPU run lays out no activations. */
	int act_bf16;
	eng_arch arch;            /* ENG_ARCH_GPT2 (0) or ENG_ARCH_LLAMA */
	/* llama only (0 under gpt2) */
	int n_kv_head;            /* NKV, key/value heads; NH % NKV == 0 */
	int intermediate_size;    /* I, the SwiGLU MLP's width */
	int untied;               /* 1: lm_head.weight of its own (tie_word_embeddings false) */
	double rope_theta;        /* rotary base, > 0 */
	double rms_norm_eps;      /* > 0 */
	/* LoRA adapters (the job's "lora"; lora_r 0: none): A (r, in) and B (out, r) beside each
	 * targeted linear weight, y += (alpha / r) (x A^T) B^T, as PEFT's LoraLayer. Part of the
	 * model's tensors, but written to adapter_config.json, never config.json. */
	int lora_r;
	double lora_alpha;
	unsigned lora_units;      /* bit u: unit u of eng_lora_units (which weights carry one) */
	/* Not the model's but its run's, as mm_bf16 (the job's model.quantize, eng_quant.h,
	 * bitsandbytes' BitsAndBytesConfig): the blocks' frozen linear weights held in 4 bits,
	 * quant 0 none. In the shape because the tensor table's layout follows it. Written to
	 * adapter_config.json's base_model_quantization, never config.json. */
	int quant;                /* ENG_QUANT_NONE, ENG_QUANT_NF4, ENG_QUANT_FP4 */
	int quant_dq;             /* 1: the absmax values double-quantized (8 bits, 256 a block) */
	int quant_block;          /* consecutive elements sharing one absmax (64) */
	int quant_bf16;           /* 1: the 4-bit products compute in bf16 (compute_dtype) */
	/* Not the model's but its run's, as mm_bf16 (train.freeze, resolved by
	 * eng_spec_finish): bit i set when tensor i of the table (eng_model_table) is frozen,
	 * so that it has no gradient and no optimizer state. All clear: everything trains. */
	unsigned char frozen[(ENG_MAX_TENSORS + 7) / 8];
	/* Not the model's but its run's, as mm_bf16 (the job's parallel.shard "optimizer",
	 * DeepSpeed's ZeRO stage 1): the AdamW moments split between opt_shards ranks, this one
	 * holding part opt_rank of the trainable floats (eng_config_opt_part). opt_shards 0:
	 * every rank holds them all. */
	int opt_shards;
	int opt_rank;
} eng_config;

/* Tensor i of the table is frozen (eng_config.frozen); set it */
static inline int eng_config_is_frozen(const eng_config *c, int i)
{
	return (c->frozen[i / 8] >> (i % 8)) & 1;
}
static inline void eng_config_freeze(eng_config *c, int i)
{
	c->frozen[i / 8] |= (unsigned char)(1u << (i % 8));
}

/* Looks up a preset by name ("tiny", "mini", "gpt2-small"; "gpt2" is gpt2-small; the Llama
 * shapes "llama-tiny", "smollm-135m") into *cfg. Returns 0, or -1 with a message listing
 * the known names. */
int eng_config_preset(const char *name, eng_config *cfg, eng_err *err);

/* "gpt2" or "llama"; and back: 0, or -1 when s names neither. */
const char *eng_arch_name(eng_arch a);
int eng_arch_parse(const char *s, eng_arch *a);

/* Checks that a shape is usable: all positive, within the limits above, C % NH == 0, and
 * under llama NH % NKV == 0, I, rope_theta and rms_norm_eps positive. `what` names the
 * source in the message ("job spec", "config.json 'x'"). */
int eng_config_validate(const eng_config *cfg, const char *what, eng_err *err);

/* The widths the rest of the engine sizes by, one place for both families: */
int eng_config_kv_heads(const eng_config *c); /* NKV: NH under gpt2 */
int eng_config_qkv(const eng_config *c);      /* q|k|v columns: (NH + 2 NKV) C/NH (gpt2 3C) */
int eng_config_ffn(const eng_config *c);      /* the MLP's hidden width: 4C, or I */
int eng_config_ffn_in(const eng_config *c);   /* its first product's columns: 4C, or 2I */
/* Floats a row of the backward's widest scratch (the model's dbig) holds: the MLP's first
 * product's gradient, 4C; a Llama's gate|up gradient and the hidden one after it, 3I */
size_t eng_config_big_width(const eng_config *c);
int eng_config_tied(const eng_config *c);     /* 1: the lm_head is the token embedding */

/* ---- LoRA: the weights an adapter can sit beside, per family ---- */

#define ENG_LORA_UNITS 7 /* most of one block: Llama's q, k, v, o, gate, up, down */
#define ENG_LORA_MAX_R 1024

/* One weight of a block as PEFT targets it: its module's path in the block ("self_attn.q_proj",
 * "attn.c_attn"), the linear layer of eng_model's it is part of (0 qkv, 1 attention
 * projection, 2 the MLP's first, 3 its last) and its columns there. */
typedef struct eng_lora_unit {
	const char *module;
	int layer;
	int col0, cols, in; /* output columns [col0, col0 + cols) of the layer's, input width */
} eng_lora_unit;

/* The family's units (n of them, at most ENG_LORA_UNITS), in block order. */
int eng_lora_units(const eng_config *c, eng_lora_unit *out);
/* The units target names (PEFT's target_modules: a module whose path is the name or ends
 * with "." name; "c_proj" is GPT-2's attn.c_proj and mlp.c_proj) into *units. 0, or -1 with
 * a message naming the first that matches nothing. */
int eng_lora_targets(const eng_config *c, const char *const *names, int n, unsigned *units,
	eng_err *err);
/* Units that carry an adapter in c, and the LoRA scale alpha / r */
int eng_lora_count(const eng_config *c);
float eng_lora_scale(const eng_config *c);

/* ---- a 4-bit frozen base (the run's model.quantize; eng_quant.h lays it out) ---- */

typedef enum { ENG_QUANT_NONE, ENG_QUANT_NF4, ENG_QUANT_FP4 } eng_quant_type;
/* "none", "nf4", "fp4": by eng_quant_type (bitsandbytes' bnb_4bit_quant_type), NULL-ended */
extern const char *const eng_quant_names[];

#define ENG_QUANT_BLOCK 64        /* QLoRA's block, the default */
#define ENG_QUANT_BLOCK_MIN 32    /* bitsandbytes' range of 4-bit blocks: powers of two */
#define ENG_QUANT_BLOCK_MAX 4096
#define ENG_QUANT_DQ_BLOCK 256    /* absmax values per block of the double quantization */

/* The quantization fields of c (quant, quant_dq, quant_block, quant_bf16) in range: -1 with
 * a message naming `what` otherwise (eng_config_validate calls it). */
int eng_quant_validate(const eng_config *c, const char *what, eng_err *err);
/* c without a 4-bit base: its base as the files hold it (an export, a merge) */
static inline void eng_config_no_quant(eng_config *c)
{
	c->quant = c->quant_dq = c->quant_block = c->quant_bf16 = 0;
}

/* Number of float parameters (a tied lm_head counted once). */
size_t eng_config_num_params(const eng_config *cfg);

/* kn_sumsq's slices (KN_SUMSQ_SLICES, which the kernels' layer keeps: the cpu backend, which
 * sees both, checks they agree) */
#define ENG_OPT_SLICES 64
/* The trainable floats [*lo, *hi) of ngrad that part r of `parts` holds: up to
 * ENG_OPT_SLICES parts, whole slices of kn_sumsq (each part's sum of squares is a run of
 * its slices, added in order by anyone with the partial sums); more, an even split; parts
 * 0 or 1: all of them. The ranks' parts of a data-parallel gradient sum and of a sharded
 * optimizer. */
void eng_config_opt_part(size_t ngrad, int parts, int r, size_t *lo, size_t *hi);
/* Those slices of part r: [*s0, *s1) (2 <= parts <= ENG_OPT_SLICES). */
void eng_config_opt_slices(int parts, int r, int *s0, int *s1);
/* The moments' floats of each of c's ranks at most (ngrad without sharding). */
size_t eng_config_opt_floats(const eng_config *c, size_t ngrad);

#endif
