/* kn_head.c - softmax cross-entropy over the vocabulary, row by row.
 *
 * Legend: N rows (a chunk of B*T), V vocab; row-major float32. Per-row work only, so the
 * engine can feed the whole logits matrix or one chunk of rows and get the same bits: the
 * basis of the chunked head. Sums in double: V is 50257 for GPT-2.
 */
#include "kn.h"

#include <math.h>

#include "kn_rows.h"

#define CE_BLOCK 256 /* exponentials computed (vectorised) before they are summed in order */

/* lse(N) = log sum exp logits[r]; loss(N) = lse - logits[r, target[r]] */
void kn_crossentropy_forward(float *lse, float *loss, const float *logits,
	const uint32_t *target, int N, int V)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		const float *l = logits + (size_t)r * V;
		float mx = l[0];
		for (int j = 1; j < V; j++)
			mx = l[j] > mx ? l[j] : mx;
		double s = 0.0;
		for (int j0 = 0; j0 < V; j0 += CE_BLOCK) {
			float e[CE_BLOCK];
			int n = V - j0 < CE_BLOCK ? V - j0 : CE_BLOCK;
			for (int j = 0; j < n; j++)
				e[j] = kn_expf(l[j0 + j] - mx);
			for (int j = 0; j < n; j++)
				s += e[j];
		}
		double z = mx + log(s);
		lse[r] = (float)z;
		loss[r] = (float)(z - l[target[r]]);
	}
}

/* lse(N) =, loss(N) = as kn_crossentropy_forward; logits(N,V) = (softmax - onehot) * scale.
 * Passes over a row that stays in cache: max; exp(l - max) written back; their sum in
 * double (the forward's order, so the same lse); the scaling. */
void kn_crossentropy_fused(float *logits, float *lse, float *loss, const uint32_t *target,
	float scale, int N, int V)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		float *l = logits + (size_t)r * V;
		float mx = l[0], lt = l[target[r]];
		for (int j = 1; j < V; j++)
			mx = l[j] > mx ? l[j] : mx;
		double s = 0.0;
		for (int j = 0; j < V; j++)
			l[j] = kn_expf(l[j] - mx);
		for (int j = 0; j < V; j++)
			s += l[j];
		double z = mx + log(s);
		lse[r] = (float)z;
		loss[r] = (float)(z - lt);
		float k = (float)(scale / s);
		for (int j = 0; j < V; j++)
			l[j] *= k;
		l[target[r]] -= scale;
	}
}
