/* eng_quant.c - which tensors a run holds in 4 bits, and their layout (see eng_quant.h). */
#include "eng_quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_tensors.h"
#include "eng_util.h"

const char *const eng_quant_names[] = {"none", "nf4", "fp4", NULL};

int eng_quant_validate(const eng_config *c, const char *what, eng_err *err)
{
	int b = c->quant_block;
	if (c->quant == ENG_QUANT_NONE)
		return c->quant_dq || c->quant_bf16 || b
			? eng_errf(err, "%s: quantization settings without a quantization type",
				  what)
			: 0;
	if (c->quant != ENG_QUANT_NF4 && c->quant != ENG_QUANT_FP4)
		return eng_errf(err, "%s: unknown quantization type %d", what, c->quant);
	if (b < ENG_QUANT_BLOCK_MIN || b > ENG_QUANT_BLOCK_MAX || (b & (b - 1)))
		return eng_errf(err, "%s: quantization block size %d is not a power of two in "
				     "%d..%d (bitsandbytes' 4-bit blocks; QLoRA's is %d)", what, b,
			ENG_QUANT_BLOCK_MIN, ENG_QUANT_BLOCK_MAX, ENG_QUANT_BLOCK);
	if ((c->quant_dq != 0 && c->quant_dq != 1) || (c->quant_bf16 != 0 && c->quant_bf16 != 1))
		return eng_errf(err, "%s: quantization flags out of range", what);
	return 0;
}

int eng_quant_targets(const eng_config *c, int slot, int ndim, int section)
{
	if (!c->quant || ndim != 2 || section < 0 || section >= c->n_layer)
		return 0;
	return slot != ENG_SLOT_LORA_A && slot != ENG_SLOT_LORA_B;
}

void eng_q4_layout_of(const eng_config *c, size_t numel, eng_q4_layout *out)
{
	size_t bs = (size_t)c->quant_block, at;
	out->nblocks = (numel + bs - 1) / bs;
	out->nblocks2 = (out->nblocks + ENG_QUANT_DQ_BLOCK - 1) / ENG_QUANT_DQ_BLOCK;
	out->codes = 0;
	at = eng_round_up((numel + 1) / 2, 64);
	if (!c->quant_dq) {
		out->absmax = at;
		out->qabs = out->absmax2 = out->offset = 0;
		out->bytes = eng_round_up(at + 4 * out->nblocks, 64);
		return;
	}
	out->absmax = 0;
	out->qabs = at;
	out->absmax2 = eng_round_up(at + out->nblocks, 64);
	out->offset = eng_round_up(out->absmax2 + 4 * out->nblocks2, 64);
	out->bytes = out->offset + 64;
}

json_t *eng_quant_json(const eng_config *c, int bytes)
{
	json_t *o = json_pack("{s:s,s:b,s:i,s:s}", "type", eng_quant_names[c->quant],
		"double_quant", c->quant_dq, "block_size", c->quant_block, "compute",
		c->quant_bf16 ? "bf16" : "fp32");
	size_t n = 0, q = eng_model_q4_bytes(c), nt = (size_t)eng_model_ntensors(c);
	eng_ptensor *tab = o && bytes ? calloc(nt, sizeof *tab) : NULL;
	if (!tab)
		return o;
	eng_model_table(c, tab, NULL);
	for (size_t i = 0; i < nt; i++)
		n += tab[i].quant ? tab[i].numel : 0;
	free(tab);
	json_object_set_new(o, "weights", json_integer((json_int_t)n));
	json_object_set_new(o, "bytes", json_integer((json_int_t)q));
	json_object_set_new(o, "float32_bytes", json_integer((json_int_t)(4 * n)));
	return o;
}

void eng_quant_from_json(const json_t *q, eng_config *c)
{
	const char *t = json_string_value(json_object_get(q, "type"));
	const char *dt = json_string_value(json_object_get(q, "compute"));
	c->quant = c->quant_dq = c->quant_block = c->quant_bf16 = 0;
	for (int k = ENG_QUANT_NF4; t && k <= ENG_QUANT_FP4; k++)
		c->quant = strcmp(t, eng_quant_names[k]) == 0 ? k : c->quant;
	if (!c->quant)
		return;
	c->quant_dq = json_is_true(json_object_get(q, "double_quant"));
	c->quant_block = (int)json_integer_value(json_object_get(q, "block_size"));
	c->quant_bf16 = dt && strcmp(dt, "bf16") == 0;
}

const char *eng_quant_describe(const eng_config *c, char *buf, size_t len)
{
	if (!c->quant)
		snprintf(buf, len, "none");
	else
		snprintf(buf, len, "%s, blocks of %d%s, compute %s", eng_quant_names[c->quant],
			c->quant_block, c->quant_dq ? ", double-quantized" : "",
			c->quant_bf16 ? "bf16" : "fp32");
	return buf;
}
