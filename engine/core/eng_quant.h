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
 * The settings themselves (eng_quant_type, the block sizes) are eng_config.h's.
 */
#ifndef ENG_QUANT_H
#define ENG_QUANT_H

#include <stddef.h>

#include "eng_config.h"

/* 1 when a tensor of `ndim` dimensions in section `section` (a LoRA adapter's or not) is
 * held in 4 bits under c: a block's linear weight (or a part joined to one) while c->quant
 * is set. */
int eng_quant_targets(const eng_config *c, int adapter, int ndim, int section);

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

#endif
