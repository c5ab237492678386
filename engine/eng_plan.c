/* eng_plan.c - analytic per-section memory and FLOPs (see eng_plan.h).
 *
 * Per block, with N = B*T (floats):
 *   off        x, ln1, qkv(3), atty, res2, ln2, fch(4), gelu(4) = 16 N C, stats 4 N,
 *              attention log-sum-exp NH N (the probabilities are never kept: the
 *              attention kernel recomputes them in backward under every mode)
 *   selective  x, qkv(3), atty, res2, fch(4) = 10 N C, stats 4 N, lse NH N
 *   full       x = N C
 *   offload    x = N C on the device (cuda only; the rest of off's, in host memory)
 * Head: x and ln_f output 2 N C, ln_f stats 2 N, lse N; off adds the N V logits.
 */
#include "eng_plan.h"

#include <string.h>

#define F 4 /* bytes per float */
#define CHUNK_ROWS 256                   /* default rows per logits chunk */
#define CHUNK_MAX_BYTES ((size_t)64 << 20) /* most bytes of logits in one chunk */

int eng_plan_chunk_rows(const eng_config *cfg, int B, int T)
{
	/* 256 rows keep the lm_head's products near the sgemm ceiling (measured with
	 * OpenBLAS on gpt2-small: 64 rows 256 GFLOP/s, 256 rows 333, all 1024 rows 364) while
	 * a chunk of logits stays small (51 MB for GPT-2's vocabulary against 206 MB for
	 * 4 x 256 rows); no chunk over CHUNK_MAX_BYTES for huge vocabularies. */
	size_t N = (size_t)B * T;
	size_t rows = CHUNK_ROWS, cap = CHUNK_MAX_BYTES / (F * (size_t)cfg->vocab_size);
	if (rows > cap)
		rows = cap < 16 ? 16 : cap;
	if (rows > N)
		rows = N;
	return (int)rows;
}

void eng_plan_block(const eng_config *cfg, int B, int T, eng_mode mode, eng_plan_section *s)
{
	size_t N = (size_t)B * T, C = cfg->n_embd, NH = cfg->n_head;
	size_t lse = NH * N;
	/* recompute pools (floats): selective rebuilds ln1, ln2, gelu (no matmul); full all
	 * of a block's internals: ln1, qkv, atty, res2, ln2, fch, gelu, stats, lse */
	size_t pool_sel = 6 * N * C;
	size_t pool_full = 16 * N * C - N * C + 4 * N + lse; /* all but x */
	/* pointwise work counted as FLOPs: 4 per LayerNorm output, 8 per GELU output */
	double flops_sel = 2 * 4.0 * N * C + 8.0 * 4 * N * C;
	double flops_full = 2.0 * N * C * (3 * C + C + 4 * C) + 4.0 * N * T * C + flops_sel;
	memset(s, 0, sizeof *s);
	switch (mode) {
	case ENG_MODE_OFF:
		s->saved_bytes = F * (16 * N * C + 4 * N + lse);
		break;
	case ENG_MODE_SELECTIVE:
		s->saved_bytes = F * (10 * N * C + 4 * N + lse);
		s->workspace_bytes = F * pool_sel;
		s->extra_flops = flops_sel;
		break;
	case ENG_MODE_OFFLOAD:
		/* device cuda: the input stays, the rest of what off keeps goes to host memory
		 * and comes back into one of two device slots; nothing is recomputed */
		s->saved_bytes = F * N * C;
		s->workspace_bytes = 2 * F * (15 * N * C + 4 * N + lse);
		break;
	default:
		s->saved_bytes = F * N * C;
		s->workspace_bytes = F * pool_full;
		s->extra_flops = flops_full;
		break;
	}
}

void eng_plan_head(const eng_config *cfg, int B, int T, int chunk_rows, eng_mode mode,
	eng_plan_section *s)
{
	size_t N = (size_t)B * T, C = cfg->n_embd, V = cfg->vocab_size;
	memset(s, 0, sizeof *s);
	s->saved_bytes = F * (2 * N * C + 3 * N);
	if (mode == ENG_MODE_CHUNKED) {
		s->workspace_bytes = F * (size_t)chunk_rows * V;
		s->extra_flops = 2.0 * N * C * V;
	} else {
		s->saved_bytes += F * N * V;
	}
}

/* Forward+backward FLOPs of one step: 6 per parameter-token for the matmuls (lm_head
 * included, embeddings excluded) plus the attention products (q k^T and att v: 2 * 2 N T C
 * forward, twice that backward; the causal half is not discounted). */
static double model_flops(const eng_config *cfg, int B, int T)
{
	double N = (double)B * T, C = cfg->n_embd, V = cfg->vocab_size, L = cfg->n_layer;
	double matmul_params = L * (12.0 * C * C) + V * C;
	return 6.0 * N * matmul_params + L * 12.0 * N * T * C;
}

void eng_plan_policy(const eng_config *cfg, int B, int T, int chunk_rows, const eng_policy *p,
	eng_plan *out)
{
	memset(out, 0, sizeof *out);
	size_t pool = 0;
	for (int i = 0; i < cfg->n_layer; i++) {
		eng_plan_block(cfg, B, T, p->block[i], &out->block[i]);
		out->saved_bytes += out->block[i].saved_bytes;
		out->extra_flops += out->block[i].extra_flops;
		if (out->block[i].workspace_bytes > pool)
			pool = out->block[i].workspace_bytes;
	}
	eng_plan_head(cfg, B, T, chunk_rows, p->head, &out->head);
	out->saved_bytes += out->head.saved_bytes;
	out->extra_flops += out->head.extra_flops;
	out->recompute_bytes = pool + out->head.workspace_bytes;
	out->model_flops = model_flops(cfg, B, T);
}

int eng_plan_fit(const eng_config *cfg, int B, int T, int chunk_rows, size_t budget,
	eng_policy *p, eng_plan *out)
{
	/* Blocks of one model all cost the same, so a policy is, up to which block gets
	 * which mode, a count of full and selective blocks and the head's mode: at most
	 * 2 * (L+1)^2 candidates, each priced in O(1). Ties go to the smaller footprint.
	 * Full goes to the first blocks, then selective: their activations live longest. */
	int L = cfg->n_layer;
	eng_plan_section blk[3], head[2];
	for (int m = 0; m < 3; m++)
		eng_plan_block(cfg, B, T, (eng_mode)m, &blk[m]);
	eng_plan_head(cfg, B, T, chunk_rows, ENG_MODE_OFF, &head[0]);
	eng_plan_head(cfg, B, T, chunk_rows, ENG_MODE_CHUNKED, &head[1]);
	int best_h = 1, best_f = L, best_s = 0, found = 0;
	double best_flops = 0;
	size_t best_bytes = 0;
	for (int h = 0; h < 2; h++) {
		for (int nf = 0; nf <= L; nf++) {
			for (int ns = 0; ns + nf <= L; ns++) {
				int no = L - nf - ns;
				size_t pool = nf ? blk[2].workspace_bytes
					  : ns ? blk[1].workspace_bytes : 0;
				size_t bytes = no * blk[0].saved_bytes + ns * blk[1].saved_bytes +
					       nf * blk[2].saved_bytes + head[h].saved_bytes + pool +
					       head[h].workspace_bytes;
				double flops = ns * blk[1].extra_flops + nf * blk[2].extra_flops +
					       head[h].extra_flops;
				if (bytes > budget)
					continue;
				if (!found || flops < best_flops ||
					(flops == best_flops && bytes < best_bytes)) {
					found = 1;
					best_flops = flops;
					best_bytes = bytes;
					best_h = h;
					best_f = nf;
					best_s = ns;
				}
			}
		}
	}
	eng_policy_init(p, L);
	for (int i = 0; i < L; i++)
		p->block[i] = i < best_f ? ENG_MODE_FULL
			    : i < best_f + best_s ? ENG_MODE_SELECTIVE : ENG_MODE_OFF;
	p->head = best_h ? ENG_MODE_CHUNKED : ENG_MODE_OFF;
	eng_plan_policy(cfg, B, T, chunk_rows, p, out);
	return found ? 0 : -1;
}
