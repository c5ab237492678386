/* kc_attn.cu - causal multi-head attention of our own: float32 runs, and the shapes cuDNN
 * cannot serve. The same maths as kernels/cpu/kn_attention.c: only out and the
 * log-sum-exp of each row are kept; backward recomputes the probabilities from q, k and
 * lse, and uses D = rowsum(dout * out) in place of rowsum(P * dP).
 *
 * Legend: B batch, T time, C channels, NH heads, hs = C/NH; qkv(B,T,3C) holds q | k | v
 * column blocks, head h at columns h*hs of each; scale = 1/sqrt(hs).
 *
 * One batch row b at a time: the NH heads of b are one strided-batched product (head h
 * starts hs columns after head h-1, the rows are 3C apart), the scores S(NH,T,T) float32 and
 * the probabilities P(NH,T,T) in the activation type live in scratch and are gone when the
 * call returns. The full T x T products are computed and the causal half masked: simple,
 * and on a GPU the wasted half costs less than a blocked loop of small products.
 *
 * Forward and backward compute P with the same kernel arithmetic (exp(S - lse) from the
 * same product), so the probabilities a backward sees are bitwise the forward's.
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "kc.h"
#include "kc_dev.cuh"

#define ATT_WARPS 8 /* warps per block, one warp per row of scores */
#define ALIGN 256   /* bytes: where P starts in scratch */

extern "C" size_t kc_attention_scratch_bytes(kc_dtype dt, int T, int NH)
{
	size_t n = (size_t)NH * T * T;
	size_t s = (n * sizeof(float) + ALIGN - 1) / ALIGN * ALIGN;
	return s + n * kc_dtype_size(dt);
}

/* Row r = h*T + t of S: lse[r] = log-sum-exp over u <= t; P[r] = exp(S - lse), zeros above
 * the diagonal. */
template <typename F>
__global__ void att_softmax(F *P, float *lse, const float *S, int T, int rows)
{
	int r = blockIdx.x * ATT_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
	if (r >= rows)
		return;
	int t = r % T;
	const float *s = S + (size_t)r * T;
	float mx = -INFINITY;
	for (int u = lane; u <= t; u += 32)
		mx = fmaxf(mx, s[u]);
	mx = warp_max(mx);
	float sum = 0.0f;
	for (int u = lane; u <= t; u += 32)
		sum += expf(s[u] - mx);
	sum = warp_sum(sum);
	float z = mx + logf(sum);
	if (lane == 0)
		lse[r] = z;
	F *p = P + (size_t)r * T;
	for (int u = lane; u < T; u += 32)
		stf(p + u, u <= t ? expf(s[u] - z) : 0.0f);
}

/* P(rows, T) = exp(S - lse) below the diagonal: the forward's probabilities again */
template <typename F>
__global__ void att_probs(F *P, const float *lse, const float *S, int T, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
		i += (size_t)gridDim.x * blockDim.x) {
		size_t r = i / T;
		int u = (int)(i % T), t = (int)(r % T);
		stf(P + i, u <= t ? expf(S[i] - lse[r]) : 0.0f);
	}
}

/* Row r = h*T + t: D = dy . o over the head's hs columns; then P(r) is overwritten by
 * dS = P * (dP - D) * scale below the diagonal, zeros above. */
template <typename F>
__global__ void att_dscores(F *P, const float *dP, const F *dy, const F *o, int T, int C, int hs,
	float scale, int rows)
{
	int r = blockIdx.x * ATT_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
	if (r >= rows)
		return;
	int h = r / T, t = r % T;
	const F *yr = dy + (size_t)t * C + h * hs, *orow = o + (size_t)t * C + h * hs;
	float d = 0.0f;
	for (int j = lane; j < hs; j += 32)
		d += ldf(yr + j) * ldf(orow + j);
	d = warp_sum(d);
	F *p = P + (size_t)r * T;
	const float *dp = dP + (size_t)r * T;
	for (int u = lane; u < T; u += 32)
		stf(p + u, u <= t ? ldf(p + u) * (dp[u] - d) * scale : 0.0f);
}

/* S(NH,T,T) = scale q k^T for every head of batch row b (q, k: that row's blocks) */
static int scores(kc_blas *h, cudaStream_t st, kc_dtype dt, float *S, const char *q, int T, int C,
	int NH)
{
	int hs = C / NH;
	size_t es = kc_dtype_size(dt);
	float scale = 1.0f / sqrtf((float)hs);
	return kc_gemm(h, st, 0, 1, T, T, hs, scale, q, 3 * C, hs, q + es * C, 3 * C, hs, dt, 0.0f,
		S, T, (long long)T * T, KC_F32, NH, KC_EPI_NONE, NULL);
}

extern "C" int kc_attention_forward(kc_blas *h, cudaStream_t st, kc_dtype dt, void *out,
	float *lse, const void *qkv, int B, int T, int C, int NH, void *scratch)
{
	int hs = C / NH, rows = NH * T;
	size_t es = kc_dtype_size(dt);
	float *S = (float *)scratch;
	char *P = (char *)scratch + (kc_attention_scratch_bytes(dt, T, NH) - (size_t)rows * T * es);
	for (int b = 0; b < B; b++) {
		const char *q = (const char *)qkv + es * (size_t)b * T * 3 * C;
		char *o = (char *)out + es * (size_t)b * T * C;
		if (scores(h, st, dt, S, q, T, C, NH) < 0)
			return -1;
		KC_DISPATCH(dt, F, att_softmax<F><<<(rows + ATT_WARPS - 1) / ATT_WARPS,
					   ATT_WARPS * 32, 0, st>>>((F *)P, lse + (size_t)b * rows, S,
					   T, rows));
		if (kc_check_launch("attention softmax") < 0)
			return -1;
		/* out(T,hs) per head = P(T,T) v(T,hs), into the head's columns */
		if (kc_gemm(h, st, 0, 0, T, hs, T, 1.0f, P, T, (long long)T * T, q + es * 2 * C,
			    3 * C, hs, dt, 0.0f, o, C, hs, dt, NH, KC_EPI_NONE, NULL) < 0)
			return -1;
	}
	return 0;
}

extern "C" int kc_attention_backward(kc_blas *h, cudaStream_t st, kc_dtype dt, void *dqkv,
	const void *dout, const void *qkv, const void *out, const float *lse, int B, int T, int C,
	int NH, void *scratch)
{
	int hs = C / NH, rows = NH * T;
	size_t es = kc_dtype_size(dt), n = (size_t)rows * T;
	float scale = 1.0f / sqrtf((float)hs);
	float *S = (float *)scratch;
	char *P = (char *)scratch + (kc_attention_scratch_bytes(dt, T, NH) - n * es);
	unsigned eblocks = (unsigned)((n + 255) / 256 < (1u << 20) ? (n + 255) / 256 : (1u << 20));
	for (int b = 0; b < B; b++) {
		size_t bq = es * (size_t)b * T * 3 * C, bo = es * (size_t)b * T * C;
		const char *q = (const char *)qkv + bq, *k = q + es * C, *v = q + es * 2 * C;
		char *dq = (char *)dqkv + bq, *dk = dq + es * C, *dv = dq + es * 2 * C;
		const char *dy = (const char *)dout + bo, *o = (const char *)out + bo;
		const float *l = lse + (size_t)b * rows;
		/* P = exp(scale q k^T - lse), recomputed */
		if (scores(h, st, dt, S, q, T, C, NH) < 0)
			return -1;
		KC_DISPATCH(dt, F, att_probs<F><<<eblocks, 256, 0, st>>>((F *)P, l, S, T, n));
		if (kc_check_launch("attention probabilities") < 0)
			return -1;
		/* dv(T,hs) = P^T dy */
		if (kc_gemm(h, st, 1, 0, T, hs, T, 1.0f, P, T, (long long)T * T, dy, C, hs, dt, 0.0f,
			    dv, 3 * C, hs, dt, NH, KC_EPI_NONE, NULL) < 0)
			return -1;
		/* dP(T,T) = dy v^T, into S (float32) */
		if (kc_gemm(h, st, 0, 1, T, T, hs, 1.0f, dy, C, hs, v, 3 * C, hs, dt, 0.0f, S, T,
			    (long long)T * T, KC_F32, NH, KC_EPI_NONE, NULL) < 0)
			return -1;
		/* dS = P (dP - D) scale, over P */
		KC_DISPATCH(dt, F, att_dscores<F><<<(rows + ATT_WARPS - 1) / ATT_WARPS,
					   ATT_WARPS * 32, 0, st>>>((F *)P, S, (const F *)dy,
					   (const F *)o, T, C, hs, scale, rows));
		if (kc_check_launch("attention score gradients") < 0)
			return -1;
		/* dq(T,hs) = dS k; dk(T,hs) = dS^T q */
		if (kc_gemm(h, st, 0, 0, T, hs, T, 1.0f, P, T, (long long)T * T, k, 3 * C, hs, dt,
			    0.0f, dq, 3 * C, hs, dt, NH, KC_EPI_NONE, NULL) < 0 ||
			kc_gemm(h, st, 1, 0, T, hs, T, 1.0f, P, T, (long long)T * T, q, 3 * C, hs, dt,
				0.0f, dk, 3 * C, hs, dt, NH, KC_EPI_NONE, NULL) < 0)
			return -1;
	}
	return 0;
}
