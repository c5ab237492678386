/* kn_attention.c - causal multi-head self-attention, forward split in two and backward.
 *
 * Legend: B batch, T time, C channels, NH heads, hs = C/NH; qkv(B,T,3C) holds q | k | v
 * column blocks, head h at columns h*hs of each block. Every (b, h) pair is one task of a
 * static OpenMP loop and its matmuls run on that thread alone (kn_sgemm inside a parallel
 * region), so results are the same for any thread count.
 *
 * The forward is split so that selective recompute can rebuild the probabilities alone:
 * kn_attention_probs (q k^T, scale, causal softmax) and kn_attention_apply (att v). This
 * version materialises B*NH*T*T probabilities; not a flash-attention kernel.
 */
#include "kn.h"

#include <math.h>
#include <omp.h>

/* att(B,NH,T,T) = causal softmax(q k^T / sqrt(hs)), zeros above the diagonal */
void kn_attention_probs(float *att, const float *qkv, int B, int T, int C, int NH)
{
	int hs = C / NH;
	float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for schedule(static)
	for (int bh = 0; bh < B * NH; bh++) {
		int b = bh / NH, h = bh % NH;
		const float *q = qkv + (size_t)b * T * 3 * C + h * hs;
		const float *k = q + C;
		float *a = att + (size_t)bh * T * T;
		kn_sgemm(0, 1, T, T, hs, scale, q, 3 * C, k, 3 * C, 0.0f, a, T);
		for (int t = 0; t < T; t++) {
			float *row = a + (size_t)t * T;
			float mx = row[0];
			for (int u = 1; u <= t; u++)
				mx = row[u] > mx ? row[u] : mx;
			float sum = 0.0f;
			for (int u = 0; u <= t; u++) {
				row[u] = expf(row[u] - mx);
				sum += row[u];
			}
			float inv = 1.0f / sum;
			for (int u = 0; u <= t; u++)
				row[u] *= inv;
			for (int u = t + 1; u < T; u++)
				row[u] = 0.0f;
		}
	}
}

/* out(B,T,C) = att v, head h into columns h*hs */
void kn_attention_apply(float *out, const float *att, const float *qkv, int B, int T, int C,
	int NH)
{
	int hs = C / NH;
#pragma omp parallel for schedule(static)
	for (int bh = 0; bh < B * NH; bh++) {
		int b = bh / NH, h = bh % NH;
		const float *v = qkv + (size_t)b * T * 3 * C + 2 * C + h * hs;
		const float *a = att + (size_t)bh * T * T;
		kn_sgemm(0, 0, T, hs, T, 1.0f, a, T, v, 3 * C, 0.0f, out + (size_t)b * T * C + h * hs,
			C);
	}
}

size_t kn_attention_scratch_floats(int T)
{
	return (size_t)kn_get_threads() * T * T;
}

/* dqkv(B,T,3C) = backward of both forward halves, from dout(B,T,C) */
void kn_attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
	const float *att, int B, int T, int C, int NH)
{
	int hs = C / NH;
	float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for schedule(static)
	for (int bh = 0; bh < B * NH; bh++) {
		int b = bh / NH, h = bh % NH;
		size_t base = (size_t)b * T * 3 * C + h * hs;
		const float *q = qkv + base, *k = q + C, *v = q + 2 * C;
		float *dq = dqkv + base, *dk = dq + C, *dv = dq + 2 * C;
		const float *dy = dout + (size_t)b * T * C + h * hs;
		const float *p = att + (size_t)bh * T * T;
		float *ds = scratch + (size_t)omp_get_thread_num() * T * T;
		/* dP(T,T) = dy v^T; dv(T,hs) = P^T dy */
		kn_sgemm(0, 1, T, T, hs, 1.0f, dy, C, v, 3 * C, 0.0f, ds, T);
		kn_sgemm(1, 0, T, hs, T, 1.0f, p, T, dy, C, 0.0f, dv, 3 * C);
		/* dS = P * (dP - rowsum(P * dP)) * scale, causal part only */
		for (int t = 0; t < T; t++) {
			const float *pr = p + (size_t)t * T;
			float *dr = ds + (size_t)t * T;
			float dot = 0.0f;
			for (int u = 0; u <= t; u++)
				dot += pr[u] * dr[u];
			for (int u = 0; u <= t; u++)
				dr[u] = pr[u] * (dr[u] - dot) * scale;
			for (int u = t + 1; u < T; u++)
				dr[u] = 0.0f;
		}
		/* dq(T,hs) = dS k; dk(T,hs) = dS^T q */
		kn_sgemm(0, 0, T, hs, T, 1.0f, ds, T, k, 3 * C, 0.0f, dq, 3 * C);
		kn_sgemm(1, 0, T, hs, T, 1.0f, ds, T, q, 3 * C, 0.0f, dk, 3 * C);
	}
}
