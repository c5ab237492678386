/* eng_tensors.h - which tensors a model has: the one table of a shape's parameters (names,
 * shapes, where each lives in the blocks of parameters and of gradients), and train.freeze
 * resolved into it. No allocation but a table's, no maths: rematd links it too.
 */
#ifndef ENG_TENSORS_H
#define ENG_TENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "eng_config.h"
#include "eng_err.h"
#include "eng_policy.h"

#define ENG_NAME_MAX 64 /* longest tensor name, with its NUL */

/* Which weight of the model a tensor is (eng_model's pointer tables bind by it): outside
 * the blocks, or one of a block's (GPT-2's field names: under llama ln1w is
 * input_layernorm, qkvw q_proj with k_proj and v_proj joined after it (ENG_SLOT_JOINED),
 * fcw gate_proj with up_proj, fcprojw down_proj), or a LoRA adapter's A or B. */
typedef enum eng_slot {
	ENG_SLOT_JOINED, /* the continuation of the tensor before it (k_proj, v_proj, up_proj) */
	ENG_SLOT_WTE, ENG_SLOT_WPE, ENG_SLOT_LNFW, ENG_SLOT_LNFB, ENG_SLOT_LMW,
	ENG_SLOT_LN1W, ENG_SLOT_LN1B, ENG_SLOT_QKVW, ENG_SLOT_QKVB, ENG_SLOT_PROJW,
	ENG_SLOT_PROJB, ENG_SLOT_LN2W, ENG_SLOT_LN2B, ENG_SLOT_FCW, ENG_SLOT_FCB,
	ENG_SLOT_FCPROJW, ENG_SLOT_FCPROJB,
	ENG_SLOT_LORA_A, ENG_SLOT_LORA_B,
} eng_slot;

typedef struct eng_ptensor {
	char name[ENG_NAME_MAX]; /* "transformer.h.3.attn.c_attn.weight" */
	int ndim;                /* 1 or 2 */
	int64_t shape[2];
	size_t offset;           /* floats from the start of the parameters' block; a multiple
	                          * of 16 but for a tensor joined to the one before it */
	size_t goff;             /* the same in the gradients' and the moments' blocks, which
	                          * hold the trainable tensors only (SIZE_MAX when frozen) */
	size_t numel;
	int decay;               /* 1 for 2-D weights (wte, wpe, linear weights) */
	int frozen;              /* 1: no gradient, no optimizer state (eng_config.frozen) */
	int joined;              /* 1: the next tensor follows it as one weight (q|k|v) */
	eng_slot slot;           /* which weight it is */
	int section;             /* -1 the embedding (wte, wpe; embed_tokens), 0 .. L-1 a
	                          * block, L the head (ln_f or model.norm, an untied lm_head) */
	int unit;                /* LoRA: the unit of eng_lora_units its adapter sits on */
	int quant;               /* 1: held in 4 bits (eng_quant.h): no floats in the
	                          * parameters' block (offset SIZE_MAX), its region of the
	                          * 4-bit block at qoff bytes (eng_q4_layout_of) */
	size_t qoff;
} eng_ptensor;

/* The parameter table of shape c, in Hugging Face order, without allocating anything:
 * fills tab (eng_model_ntensors(c) entries) and returns the floats of one block of them,
 * padding included; *ngrad (may be NULL) the floats of the trainable ones' gradient block.
 * The one description of which tensors a model has: the model, the checkpoint checks and
 * the importers all read it. */
int eng_model_ntensors(const eng_config *c);
size_t eng_model_table(const eng_config *c, eng_ptensor *tab, size_t *ngrad);
/* The same two counts without a table of the caller's (0 when out of memory). */
size_t eng_model_floats(const eng_config *c, size_t *ngrad);
/* Bytes of the 4-bit block of shape c (eng_quant.h), and in *weights (may be NULL) how many
 * elements it holds: 0 unless c->quant. */
size_t eng_model_q4_bytes(const eng_config *c, size_t *weights);

/* The parameters of shape c as PEFT's print_trainable_parameters() counts them: every
 * tensor of the table, LoRA adapters included (returned), and in *trainable those that
 * train (neither frozen by train.freeze nor a LoRA run's base). 0 when out of memory. */
size_t eng_model_params(const eng_config *c, size_t *trainable);

/* The table's first adapter tensor (LoRA): every one before it is the base model's, which
 * checkpoints write as model.safetensors; the adapters follow, A then B of each targeted
 * unit (eng_lora_units), block by block. */
int eng_lora_base_tensors(const eng_config *c);

/* train.freeze's items (n of them) into c->frozen (cleared first): "embed" (the embedding),
 * "all" (every tensor), a section selector of the policies' (h.N, h.N-M, blocks, head, an
 * alias of al: every tensor of those sections; "embed" is never an alias here), a tensor
 * name, or a glob over tensor names (fnmatch: "*.self_attn.*").
 * Refused with a message naming the item: one that names nothing; one that freezes part of
 * a joined weight (q_proj, k_proj and v_proj are one product, as gate_proj and up_proj);
 * freezing everything. */
int eng_freeze_resolve(eng_config *c, const eng_aliases *al, const char (*items)[ENG_SELECTOR_LEN],
	int n, eng_err *err);

#endif
