/* kn_head.c - softmax cross-entropy over the vocabulary, row by row.
 *
 * Legend: N rows (a chunk of B*T), V vocab; row-major float32. Per-row work only, so the
 * engine can feed the whole logits matrix or one chunk of rows and get the same bits: the
 * basis of the chunked head. Sums in double: V is 50257 for GPT-2.
 */
#include "kn.h"

#include <math.h>

#include "kn_rows.h"

#define CE_BLOCK 256 /* exponentials computed (vectorised) before they are summed */

/* The sum of exp(l - mx) over a row l(V), in double lanes (kn_rows.h) block by block, the
 * exponentials into e (V floats, or CE_BLOCK when e_all is 0: a scratch reused): the one
 * order both kernels sum in, so that they give the same lse */
static KN_SIMD double exp_sum(float *e, int e_all, const float *l, float mx, int V)
{
	kn_vd acc = {0};
	for (int j0 = 0; j0 < V; j0 += CE_BLOCK) {
		int n = V - j0 < CE_BLOCK ? V - j0 : CE_BLOCK;
		float *eb = e_all ? e + j0 : e;
		for (int j = 0; j < n; j++)
			eb[j] = kn_expf(l[j0 + j] - mx);
		kn_add_lanes_d(&acc, eb, n);
	}
	return kn_lanes_total(&acc);
}

static KN_SIMD float row_max(const float *l, int V)
{
	return kn_max_f(l, V);
}

static KN_SIMD void row_scale(float *l, float k, int V)
{
	for (int j = 0; j < V; j++)
		l[j] *= k;
}

/* lse(N) = log sum exp logits[r]; loss(N) = lse - logits[r, target[r]] */
void kn_crossentropy_forward(float *lse, float *loss, const float *logits,
	const uint32_t *target, int N, int V)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		const float *l = logits + (size_t)r * V;
		float e[CE_BLOCK], mx = row_max(l, V);
		double z = mx + log(exp_sum(e, 0, l, mx, V));
		lse[r] = (float)z;
		loss[r] = (float)(z - l[target[r]]);
	}
}

/* lse(N) =, loss(N) = as kn_crossentropy_forward; logits(N,V) = (softmax - onehot) * scale.
 * Passes over a row that stays in cache: max; exp(l - max) written back and summed (the
 * forward's order, so the same lse); the scaling. */
void kn_crossentropy_fused(float *logits, float *lse, float *loss, const uint32_t *target,
	float scale, int N, int V)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		float *l = logits + (size_t)r * V;
		float mx = row_max(l, V), lt = l[target[r]];
		double s = exp_sum(l, 1, l, mx, V);
		double z = mx + log(s);
		lse[r] = (float)z;
		loss[r] = (float)(z - lt);
		row_scale(l, (float)(scale / s), V);
		l[target[r]] -= scale;
	}
}
