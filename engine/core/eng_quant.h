/* eng_quant.h - a run's 4-bit frozen base (QLoRA, the job's model.quantize): which tensors
 * are held in 4 bits, and how each is laid out in the model's block of them. No maths and no
 * allocation: rematd links it to count the bytes (the quantizers are kernels/cpu/kn_q4.c).
 *
 * As bitsandbytes' Linear4bit under transformers' BitsAndBytesConfig(load_in_4bit): the
 * blocks' linear weights (q/k/v/o and gate/up/down; GPT-2's c_attn, c_proj, c_fc, whose
 * Conv1D [in, out] weight is transposed to [out, in] first), each Hugging Face tensor on its
 * own; the embeddings, the norms, the biases and the lm_head stay as they are. A weight's
 * row-major [out, in] elements in blocks of quant_block, each block's absmax in float32, or
 * double-quantized: 8 bits each, blocks of 256 of them with an absmax2 and one offset.
 */
#ifndef ENG_QUANT_H
#define ENG_QUANT_H

#include <jansson.h>
#include <stddef.h>

#include "eng_config.h"
#include "eng_err.h"

typedef enum { ENG_QUANT_NONE, ENG_QUANT_NF4, ENG_QUANT_FP4 } eng_quant_type;
/* "none", "nf4", "fp4": by eng_quant_type (bitsandbytes' bnb_4bit_quant_type), NULL-ended */
extern const char *const eng_quant_names[];

#define ENG_QUANT_BLOCK 64        /* QLoRA's block, the default */
#define ENG_QUANT_BLOCK_MIN 32    /* bitsandbytes' range of 4-bit blocks: powers of two */
#define ENG_QUANT_BLOCK_MAX 4096
#define ENG_QUANT_DQ_BLOCK 256    /* absmax values per block of the double quantization */

/* The quantization fields of c (quant, quant_dq, quant_block, quant_bf16) in range: -1 with
 * a message naming `what` otherwise. */
int eng_quant_validate(const eng_config *c, const char *what, eng_err *err);

/* 1 when the tensor of slot `slot`, `ndim` dimensions, in section `section` is held in 4
 * bits under c: a block's linear weight (or a part joined to one) while c->quant is set. */
int eng_quant_targets(const eng_config *c, int slot, int ndim, int section);

/* Where the parts of one quantized tensor of numel elements lie in its region of the 4-bit
 * block (bytes from the region's start, each 64-byte aligned): the codes (two a byte,
 * (numel + 1) / 2 bytes), then the absmax values (float32, nblocks), or under quant_dq their
 * 8-bit codes (nblocks bytes), the absmax2 (float32, nblocks2) and the offset (one float32).
 * `bytes`: the region's size, a multiple of 64. */
typedef struct eng_q4_layout {
	size_t nblocks, nblocks2;
	size_t codes, absmax, qabs, absmax2, offset;
	size_t bytes;
} eng_q4_layout;
void eng_q4_layout_of(const eng_config *c, size_t numel, eng_q4_layout *out);

/* c's quantization as JSON (a new reference): {"type", "double_quant", "block_size",
 * "compute"} as model.quantize writes them; with bytes, also "weights" (how many elements
 * are held in 4 bits), "bytes" (what they cost so) and "float32_bytes" (what they would
 * cost in float32). */
json_t *eng_quant_json(const eng_config *c, int bytes);
/* Back (remat-train --check's config): c's quant fields from q, all 0 when q is not an
 * object of a known type; eng_config_validate checks the rest. */
void eng_quant_from_json(const json_t *q, eng_config *c);

/* "nf4, blocks of 64, double-quantized, compute fp32": c's settings in words (buf). */
const char *eng_quant_describe(const eng_config *c, char *buf, size_t len);

#endif
