/* kn_attention.c - causal multi-head self-attention, blocked over queries, without the
 * B*NH*T*T probabilities; grouped key/value heads (GQA) for the Llama family.
 *
 * Legend: B batch, T time, NH query heads, NKV key/value heads (NH a multiple of NKV: q head
 * h reads kv head h / (NH/NKV), as Hugging Face's repeat_kv lays them out), hs head size;
 * W = (NH + 2 NKV) hs; qkv(B,T,W) holds q | k | v column blocks, head h at columns h*hs of
 * its block; QB = KN_ATT_QB query rows per block. GPT-2 is NKV = NH, hs = C/NH (W = 3C).
 *
 * Forward, per (b, h) and per block of QB query rows [q0, q1): the scores of those rows
 * against keys [0, q1) only (the causal past: about half the products of a full T x T),
 * the softmax of each row, its log-sum-exp kept in lse, and the block's output P v. The
 * probabilities live in a per-thread QB x T scratch and are gone when the block is done.
 * Backward recomputes them from q, k and lse (one more q k^T product per block) and uses
 * D = rowsum(dout * out) in place of rowsum(P * dP) (equal: out = P v).
 *
 * Every (b, h) pair is one task of the forward's static OpenMP loop, every (b, kv head) one
 * of the backward's (its query heads in order: they add into the same dk and dv), blocks in
 * order and matmuls on that thread alone (kn_sgemm inside a parallel region), so the
 * results are the same bits for any thread count and any policy.
 */
#include "kn.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "kn_rows.h"

#define KN_ATT_QB 64 /* query rows per block */

size_t kn_attention_scratch_floats_for(int T, int threads)
{
	return (size_t)threads * 2 * KN_ATT_QB * T;
}

size_t kn_attention_scratch_floats(int T)
{
	return kn_attention_scratch_floats_for(T, kn_get_threads());
}

/* A row of scaled scores row(nk) of query t: its causal part [0, t] into its softmax, the
 * rest zeroed (P v reads nk columns); returns the log-sum-exp. Sums in kn_rows.h's lanes. */
static KN_SIMD float softmax_row(float *row, int t, int nk)
{
	float mx = kn_max_f(row, t + 1);
	for (int u = 0; u <= t; u++)
		row[u] = kn_expf(row[u] - mx);
	float sum = kn_sum_f(row, t + 1), inv = 1.0f / sum;
	for (int u = 0; u <= t; u++)
		row[u] *= inv;
	for (int u = t + 1; u < nk; u++)
		row[u] = 0.0f;
	return mx + logf(sum);
}

/* The backward's row of query t: pr(nk) the scaled scores into P = exp(s - z), dr(nk)
 * dy v^T into dS = P (dP - d) scale with d = dy . out (yr, orow: hs each); zero past t */
static KN_SIMD void softmax_grad_row(float *pr, float *dr, const float *yr,
	const float *orow, int hs, float z, float scale, int t, int nk)
{
	float d = kn_dot_f(yr, orow, hs);
	for (int u = 0; u <= t; u++) {
		pr[u] = kn_expf(pr[u] - z);
		dr[u] = pr[u] * (dr[u] - d) * scale;
	}
	for (int u = t + 1; u < nk; u++)
		pr[u] = dr[u] = 0.0f;
}

/* out(B,T,NH*hs) = causal softmax(q k^T * scale) v; lse(B,NH,T) = log-sum-exp of each
 * row of scaled scores; scratch: kn_attention_scratch_floats(T) floats */
void kn_gqa_attention_forward(float *out, float *lse, float *scratch, const float *qkv,
	int B, int T, int NH, int NKV, int hs)
{
	int C = NH * hs, C3 = (NH + 2 * NKV) * hs, rep = NH / NKV;
	float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for schedule(static)
	for (int bh = 0; bh < B * NH; bh++) {
		int b = bh / NH, h = bh % NH;
		const float *row = qkv + (size_t)b * T * C3, *q = row + h * hs;
		const float *k = row + C + (h / rep) * hs, *v = k + NKV * hs;
		float *o = out + (size_t)b * T * C + h * hs;
		float *l = lse + (size_t)bh * T;
		float *s = scratch + (size_t)omp_get_thread_num() * 2 * KN_ATT_QB * T;
		for (int q0 = 0; q0 < T; q0 += KN_ATT_QB) {
			int rows = T - q0 < KN_ATT_QB ? T - q0 : KN_ATT_QB, nk = q0 + rows;
			/* s(rows, nk) = scale * q[q0:nk] k[0:nk]^T */
			kn_sgemm(0, 1, rows, nk, hs, scale, q + (size_t)q0 * C3, C3, k, C3, 0.0f, s,
				nk);
			for (int i = 0; i < rows; i++)
				l[q0 + i] = softmax_row(s + (size_t)i * nk, q0 + i, nk);
			/* out[q0:nk] (rows, hs) = P (rows, nk) v[0:nk] */
			kn_sgemm(0, 0, rows, hs, nk, 1.0f, s, nk, v, C3, 0.0f, o + (size_t)q0 * C, C);
		}
	}
}

void kn_attention_forward(float *out, float *lse, float *scratch, const float *qkv, int B,
	int T, int C, int NH)
{
	kn_gqa_attention_forward(out, lse, scratch, qkv, B, T, NH, NH, C / NH);
}

/* Query head h of batch row b's backward: dq of h, its part of dk and dv of its kv head
 * added, query block by query block (p and ds: the thread's scratch) */
static void head_backward(float *dqkv, float *p, const float *dout, const float *qkv,
	const float *out, const float *lse, int b, int h, int T, int NH, int NKV, int hs)
{
	int C = NH * hs, C3 = (NH + 2 * NKV) * hs, kv = C + (h / (NH / NKV)) * hs;
	float scale = 1.0f / sqrtf((float)hs);
	size_t base = (size_t)b * T * C3;
	const float *q = qkv + base + h * hs, *k = qkv + base + kv, *v = k + NKV * hs;
	float *dq = dqkv + base + h * hs, *dk = dqkv + base + kv, *dv = dk + NKV * hs;
	const float *dy = dout + (size_t)b * T * C + h * hs;
	const float *o = out + (size_t)b * T * C + h * hs;
	const float *l = lse + ((size_t)b * NH + h) * T;
	float *ds = p + (size_t)KN_ATT_QB * T;
	for (int q0 = 0; q0 < T; q0 += KN_ATT_QB) {
		int rows = T - q0 < KN_ATT_QB ? T - q0 : KN_ATT_QB, nk = q0 + rows;
		const float *qb = q + (size_t)q0 * C3, *dyb = dy + (size_t)q0 * C;
		/* P(rows, nk) = exp(scale q k^T - lse), recomputed; dP(rows, nk) = dy v^T */
		kn_sgemm(0, 1, rows, nk, hs, scale, qb, C3, k, C3, 0.0f, p, nk);
		kn_sgemm(0, 1, rows, nk, hs, 1.0f, dyb, C, v, C3, 0.0f, ds, nk);
		for (int i = 0; i < rows; i++) {
			int t = q0 + i;
			softmax_grad_row(p + (size_t)i * nk, ds + (size_t)i * nk,
				dyb + (size_t)i * C, o + (size_t)t * C, hs, l[t], scale, t, nk);
		}
		/* dv[0:nk] += P^T dy; dq[q0:nk] = dS k[0:nk]; dk[0:nk] += dS^T q[q0:nk] */
		kn_sgemm(1, 0, nk, hs, rows, 1.0f, p, nk, dyb, C, 1.0f, dv, C3);
		kn_sgemm(0, 0, rows, hs, nk, 1.0f, ds, nk, k, C3, 0.0f, dq + (size_t)q0 * C3,
			C3);
		kn_sgemm(1, 0, nk, hs, rows, 1.0f, ds, nk, qb, C3, 1.0f, dk, C3);
	}
}

/* dqkv(B,T,W) = from dout(B,T,NH*hs), with out and lse(B,NH,T) of the forward; scratch:
 * kn_attention_scratch_floats(T) floats. One task per (b, kv head): its query heads in
 * order, so that dk and dv sum in one order whatever the thread count. */
void kn_gqa_attention_backward(float *dqkv, float *scratch, const float *dout,
	const float *qkv, const float *out, const float *lse, int B, int T, int NH, int NKV,
	int hs)
{
	int C3 = (NH + 2 * NKV) * hs, rep = NH / NKV;
#pragma omp parallel for schedule(static)
	for (int bk = 0; bk < B * NKV; bk++) {
		int b = bk / NKV, kh = bk % NKV;
		float *p = scratch + (size_t)omp_get_thread_num() * 2 * KN_ATT_QB * T;
		/* dk and dv accumulate over the group's heads and their query blocks */
		float *dk = dqkv + (size_t)b * T * C3 + (NH + kh) * hs, *dv = dk + NKV * hs;
		for (int t = 0; t < T; t++) {
			memset(dk + (size_t)t * C3, 0, sizeof(float) * hs);
			memset(dv + (size_t)t * C3, 0, sizeof(float) * hs);
		}
		for (int h = kh * rep; h < (kh + 1) * rep; h++)
			head_backward(dqkv, p, dout, qkv, out, lse, b, h, T, NH, NKV, hs);
	}
}

void kn_attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
	const float *out, const float *lse, int B, int T, int C, int NH)
{
	kn_gqa_attention_backward(dqkv, scratch, dout, qkv, out, lse, B, T, NH, NH, C / NH);
}
