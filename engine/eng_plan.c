/* eng_plan.c - analytic per-section memory and FLOPs (see eng_plan.h).
 *
 * Bytes come from the activation tables (eng_acts.h), in float32 and without alignment:
 * what a mode keeps is saved, what it rebuilds is the pool it needs; `offload` keeps x on
 * the device and needs two device slots of the rest of what `off` keeps. So, per block
 * (floats, N = B*T):
 *   off        x, ln1, qkv(3), atty, res2, ln2, fch(4), gelu(4) = 16 N C, stats 4 N,
 *              attention log-sum-exp NH N (the probabilities are never kept: the
 *              attention kernel recomputes them in backward under every mode)
 *   selective  x, qkv(3), atty, res2, fch(4) = 10 N C, stats 4 N, lse NH N
 *   full       x = N C
 *   offload    x = N C on the device (cuda only; the rest of off's, in host memory)
 * Head: x and ln_f output 2 N C, ln_f stats 2 N, lse N; off adds the N V logits. The
 * FLOPs are closed formulas of their own.
 */
#include "eng_plan.h"

#include <string.h>

#include "eng_acts.h"

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

/* float32 bytes of the fields of `tab` (n of them) whose `keep` (or `pool`) has mode m */
static size_t table_bytes(const eng_act_field *tab, int n, const eng_config *cfg, int B, int T,
	int R, unsigned m, int pool)
{
	size_t total = 0;
	for (int k = 0; k < n; k++)
		if ((pool ? tab[k].pool : tab[k].keep) & m)
			total += F * eng_act_elems(&tab[k], cfg, B, T, R);
	return total;
}

void eng_plan_block(const eng_config *cfg, int B, int T, eng_mode mode, eng_plan_section *s)
{
	size_t N = (size_t)B * T, C = cfg->n_embd;
	/* pointwise work counted as FLOPs: 4 per LayerNorm output, 8 per GELU output */
	double flops_sel = 2 * 4.0 * N * C + 8.0 * 4 * N * C;
	double flops_full = 2.0 * N * C * (3 * C + C + 4 * C) + 4.0 * N * T * C + flops_sel;
	memset(s, 0, sizeof *s);
	s->saved_bytes = table_bytes(eng_block_fields, ENG_ACT_N, cfg, B, T, 0, ENG_KEEP(mode), 0);
	s->workspace_bytes = table_bytes(eng_block_fields, ENG_ACT_N, cfg, B, T, 0, ENG_KEEP(mode),
		1);
	if (mode == ENG_MODE_OFFLOAD) {
		/* the rest of what off keeps goes to host memory and comes back into one of the
		 * device slots; nothing is recomputed */
		for (int k = 0; k < ENG_ACT_N; k++)
			if (eng_act_offloaded(k))
				s->workspace_bytes += ENG_LAYOUT_SLOTS * F *
						      eng_act_elems(&eng_block_fields[k], cfg, B, T, 0);
	}
	s->extra_flops = mode == ENG_MODE_SELECTIVE ? flops_sel
		       : mode == ENG_MODE_FULL      ? flops_full : 0.0;
}

void eng_plan_head(const eng_config *cfg, int B, int T, int chunk_rows, eng_mode mode,
	eng_plan_section *s)
{
	size_t N = (size_t)B * T, C = cfg->n_embd, V = cfg->vocab_size;
	memset(s, 0, sizeof *s);
	s->saved_bytes = table_bytes(eng_head_fields, ENG_HEAD_N, cfg, B, T, chunk_rows,
		ENG_KEEP(mode), 0);
	s->workspace_bytes = table_bytes(eng_head_fields, ENG_HEAD_N, cfg, B, T, chunk_rows,
		ENG_KEEP(mode), 1);
	if (mode == ENG_MODE_CHUNKED)
		s->extra_flops = 2.0 * N * C * V;
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
