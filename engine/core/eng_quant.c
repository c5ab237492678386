/* eng_quant.c - which tensors a run holds in 4 bits, and their layout (see eng_quant.h). */
#include "eng_quant.h"

#include "eng_util.h"

int eng_quant_targets(const eng_config *c, int adapter, int ndim, int section)
{
	return c->quant && !adapter && ndim == 2 && section >= 0 && section < c->n_layer;
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
