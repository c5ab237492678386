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
 * FLOPs are closed formulas of their own. The Llama family's block has the same fields, of
 * its own widths (eng_acts.h: q|k|v (NH + 2 NKV) hs, gate|up 2I, SwiGLU's product I, no
 * LayerNorm means).
 */
#include "eng_plan.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
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
			total += eng_act_bytes(&tab[k], cfg, B, T, R);
	return total;
}

void eng_plan_block(const eng_config *cfg, int B, int T, eng_mode mode, eng_plan_section *s)
{
	size_t N = (size_t)B * T, C = cfg->n_embd;
	double W = eng_config_qkv(cfg), Fi = eng_config_ffn_in(cfg), Ff = eng_config_ffn(cfg);
	/* pointwise work counted as FLOPs: 4 per LayerNorm (RMSNorm) output, 8 per GELU
	 * (SwiGLU) output; full reruns the products up to the MLP's last and the attention */
	double flops_sel = 2 * 4.0 * N * C + 8.0 * N * Ff;
	double flops_full = 2.0 * N * C * (W + C + Fi) + 4.0 * N * T * C + flops_sel;
	/* LoRA: full reruns every adapter's x A^T and its s mid B^T but down_proj's / the MLP's
	 * c_proj's last (the block stops before that product) */
	eng_lora_unit u[ENG_LORA_UNITS];
	int nu = cfg->lora_r ? eng_lora_units(cfg, u) : 0;
	for (int k = 0; k < nu; k++)
		if (cfg->lora_units >> k & 1)
			flops_full += 2.0 * N * cfg->lora_r * (u[k].in + (u[k].layer == 3 ? 0 : u[k].cols));
	memset(s, 0, sizeof *s);
	s->saved_bytes = table_bytes(eng_block_fields, ENG_ACT_N, cfg, B, T, 0, ENG_KEEP(mode), 0);
	s->workspace_bytes = table_bytes(eng_block_fields, ENG_ACT_N, cfg, B, T, 0, ENG_KEEP(mode),
		1);
	if (mode == ENG_MODE_OFFLOAD) {
		/* the rest of what off keeps goes to host memory and comes back into one of the
		 * device slots; nothing is recomputed */
		for (int k = 0; k < ENG_ACT_N; k++) {
			const eng_act_field *f = &eng_block_fields[k];
			if (eng_act_offloaded(k))
				s->workspace_bytes += ENG_LAYOUT_SLOTS * eng_act_bytes(f, cfg, B, T, 0);
		}
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
	double W = eng_config_qkv(cfg), Fi = eng_config_ffn_in(cfg), Ff = eng_config_ffn(cfg);
	/* q|k|v, the attention's projection, the MLP's two (GPT-2: 12 C^2 a block) */
	double matmul_params = L * C * (W + C + Fi + Ff) + V * C;
	/* the adapters' products too, at 6 per parameter-token; frozen weights are still
	 * counted at 6 (their dW is skipped): a ceiling, not what a frozen run computes */
	eng_lora_unit u[ENG_LORA_UNITS];
	int nu = cfg->lora_r ? eng_lora_units(cfg, u) : 0;
	for (int k = 0; k < nu; k++)
		if (cfg->lora_units >> k & 1)
			matmul_params += L * (double)cfg->lora_r * (u[k].in + u[k].cols);
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
	out->peak_bytes = out->saved_bytes + out->recompute_bytes;
	out->cost = out->extra_flops;
}

/* A block's modes in the order ties go to: full, then selective, then off. */
static const eng_mode search_modes[3] = {ENG_MODE_FULL, ENG_MODE_SELECTIVE, ENG_MODE_OFF};

/* The search's tables: the least costs of blocks i.. (two rows, i and i + 1, W x W each,
 * W = L + 1) and each block's choice (L + 1 rows of W x W bytes). */
#define G(row, f, s) g[(row) * (size_t)W * W + (size_t)(f) * W + (size_t)(s)]
#define CHOICE(i, f, s) choice[((size_t)(i) * W + (size_t)(f)) * W + (size_t)(s)]

/* The peak of a policy with f blocks full, s selective, the rest off, and head mode h. */
static size_t counts_peak(const eng_plan_section *blk, const eng_plan_section *head, int L,
	int f, int s, size_t fixed)
{
	size_t pool = f ? blk[ENG_MODE_FULL].workspace_bytes
		    : s ? blk[ENG_MODE_SELECTIVE].workspace_bytes : 0;
	return fixed + (size_t)(L - f - s) * blk[ENG_MODE_OFF].saved_bytes +
	       (size_t)s * blk[ENG_MODE_SELECTIVE].saved_bytes +
	       (size_t)f * blk[ENG_MODE_FULL].saved_bytes + pool + head->saved_bytes +
	       head->workspace_bytes;
}

/* The dynamic programme over the L blocks of query q (blk: a block's section under each
 * mode): fills G(i % 2, f, s), the least cost of blocks i..L-1 with f of them full and s
 * selective (HUGE_VAL: none), down to row 0, and CHOICE(i, f, s), block i's mode on the
 * way to that least. */
static void search_fill(const eng_plan_query *q, const eng_plan_section *blk, int L,
	double *g, unsigned char *choice)
{
	int W = L + 1;
	/* G(i % 2, f, s): the least cost of blocks i..L-1 with f of them full and s
	 * selective; each row needs only the one after it */
	for (int f = 0; f < W; f++)
		for (int s = 0; s < W; s++)
			G(L % 2, f, s) = f || s ? HUGE_VAL : 0.0;
	for (int i = L - 1; i >= 0; i--) {
		int cur = i % 2, nxt = (i + 1) % 2;
		for (int f = 0; f < W; f++) {
			for (int s = 0; s < W; s++) {
				double best = HUGE_VAL;
				unsigned char pick = ENG_MODE_OFF;
				for (int k = 0; k < 3; k++) {
					eng_mode m = search_modes[k];
					int f1 = f - (m == ENG_MODE_FULL), s1 = s - (m == ENG_MODE_SELECTIVE);
					if (f1 < 0 || s1 < 0 || G(nxt, f1, s1) == HUGE_VAL)
						continue;
					double c = q->costs ? q->costs->block[i][m] : blk[m].extra_flops;
					if (G(nxt, f1, s1) + c < best) {
						best = G(nxt, f1, s1) + c;
						pick = (unsigned char)m;
					}
				}
				G(cur, f, s) = best;
				CHOICE(i, f, s) = pick;
			}
		}
	}
}

/* Over every count of full and selective blocks and both head modes (g filled by
 * search_fill): the cheapest that fits q->budget, 1; or, when none does, the one of the
 * least peak, 0. Its counts into *bf, *bs and *bh (1: the head chunked). */
static int search_pick(const eng_plan_query *q, const eng_plan_section *blk,
	const eng_plan_section *head, int L, const double *g, int *bf, int *bs, int *bh)
{
	int W = L + 1;
	/* every count and head: the cheapest that fits, and the least peak of all */
	int found = 0, lf = L, ls = 0, lh = 1;
	double best_cost = 0;
	size_t best_peak = 0, least = SIZE_MAX;
	*bf = L, *bs = 0, *bh = 1;
	for (int h = 0; h < 2; h++) {
		double hc = q->costs ? q->costs->head[h] : head[h].extra_flops;
		for (int f = 0; f <= L; f++) {
			for (int s = 0; f + s <= L; s++) {
				if (G(0, f, s) == HUGE_VAL)
					continue;
				size_t peak = counts_peak(blk, &head[h], L, f, s, q->fixed);
				double cost = G(0, f, s) + hc; /* row 0: blocks 0..L-1 */
				/* equal peaks: the more aggressive (head chunked, more blocks full) */
				if (peak < least || (peak == least && (h > lh || (h == lh && f > lf)))) {
					least = peak;
					lf = f, ls = s, lh = h;
				}
				if (peak > q->budget)
					continue;
				if (!found || cost < best_cost || (cost == best_cost && peak < best_peak)) {
					found = 1;
					best_cost = cost, best_peak = peak;
					*bf = f, *bs = s, *bh = h;
				}
			}
		}
	}
	if (!found)
		*bf = lf, *bs = ls, *bh = lh;
	return found;
}

/* out: the counts of policy p for query q, its fixed bytes included in the peak. */
static void search_counts(const eng_plan_query *q, const eng_policy *p, eng_plan *out)
{
	eng_plan_policy(q->cfg, q->B, q->T, q->chunk_rows, p, out);
	out->fixed_bytes = q->fixed;
	out->peak_bytes = q->fixed + out->saved_bytes + out->recompute_bytes;
}

/* eng_plan_search without optional bytes: the exact search (eng_plan.h). */
static int plan_search(const eng_plan_query *q, eng_policy *p, eng_plan *out)
{
	const eng_config *cfg = q->cfg;
	int L = cfg->n_layer, W = L + 1, bf, bs, bh;
	eng_plan_section blk[3], head[2];
	for (int m = 0; m < 3; m++)
		eng_plan_block(cfg, q->B, q->T, (eng_mode)m, &blk[m]);
	eng_plan_head(cfg, q->B, q->T, q->chunk_rows, ENG_MODE_OFF, &head[0]);
	eng_plan_head(cfg, q->B, q->T, q->chunk_rows, ENG_MODE_CHUNKED, &head[1]);
	double *g = malloc(2 * (size_t)W * W * sizeof *g);
	unsigned char *choice = malloc((size_t)W * W * W);
	eng_policy_init(p, L);
	if (!g || !choice) {
		/* no memory for the search: the policy of the least memory, with its counts */
		free(g);
		free(choice);
		eng_policy_apply(p, NULL, "all", "full", NULL);
		p->head = ENG_MODE_CHUNKED;
		search_counts(q, p, out);
		return -1;
	}
	search_fill(q, blk, L, g, choice);
	int found = search_pick(q, blk, head, L, g, &bf, &bs, &bh);
	for (int i = 0, f = bf, s = bs; i < L; i++) {
		eng_mode m = (eng_mode)CHOICE(i, f, s);
		p->block[i] = m;
		f -= m == ENG_MODE_FULL;
		s -= m == ENG_MODE_SELECTIVE;
	}
	p->head = bh ? ENG_MODE_CHUNKED : ENG_MODE_OFF;
	free(g);
	free(choice);
	search_counts(q, p, out);
	out->cost = eng_plan_policy_cost(cfg, q->B, q->T, q->chunk_rows, q->costs, p);
	return found ? 0 : -1;
}

double eng_plan_policy_cost(const eng_config *cfg, int B, int T, int chunk_rows,
	const eng_plan_costs *c, const eng_policy *p)
{
	eng_plan pl;
	if (!c) {
		eng_plan_policy(cfg, B, T, chunk_rows, p, &pl);
		return pl.extra_flops;
	}
	double cost = c->head[p->head == ENG_MODE_CHUNKED];
	for (int i = 0; i < p->n_layer; i++)
		cost += p->block[i] <= ENG_MODE_FULL ? c->block[i][p->block[i]] : 0.0;
	return cost;
}

double eng_plan_live_save_cost(double save_ms, int save_every)
{
	return save_every > 0 && save_ms > 0 ? save_ms / save_every : 0.0;
}

size_t eng_plan_least(const eng_config *cfg, int B, int T, int chunk_rows, size_t fixed,
	eng_policy *p)
{
	eng_policy own;
	eng_plan pl;
	eng_plan_query q = {cfg, B, T, chunk_rows, fixed, NULL, 0, 0, 0.0};
	eng_plan_search(&q, p ? p : &own, &pl); /* no budget: the least there is */
	return pl.peak_bytes;
}

int eng_plan_search(const eng_plan_query *q, eng_policy *p, eng_plan *out)
{
	if (!q->optional) {
		int r = plan_search(q, p, out);
		out->optional_held = 0;
		return r;
	}
	/* with the optional bytes held, and without them at their cost a step: the cheaper
	 * that fits; holding them when both cost the same (nothing is gained without) */
	eng_plan_query with = *q;
	eng_policy p2;
	eng_plan o2;
	with.fixed += q->optional;
	with.optional = 0;
	int r1 = plan_search(&with, p, out);
	eng_plan_query without = with;
	without.fixed = q->fixed;
	int r2 = plan_search(&without, &p2, &o2);
	o2.cost += q->optional_cost;
	out->optional_held = r1 == 0;
	if (r1 < 0 || (r2 == 0 && o2.cost < out->cost)) {
		*p = p2;
		*out = o2;
		out->optional_held = 0;
	}
	return r1 == 0 || r2 == 0 ? 0 : -1;
}
