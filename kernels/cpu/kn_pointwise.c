/* kn_pointwise.c - embedding, GELU, residual: the elementwise kernels.
 *
 * Legend: B batch, T time, C channels, V vocab, N elements; row-major float32. Each output
 * element is computed by exactly one thread from its own inputs, so results never depend on
 * the thread count. The embedding backward's scatter is parallel over channels for the same
 * reason: every row of dwte is summed in (b, t) order.
 */
#include "kn.h"

#include <math.h>

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

/* tanh(u) as 1 - 2 / (exp(2u) + 1): one expf, where glibc's tanhf goes through expm1f and
 * special cases at three times the cost (GELU was 10 % of a gpt2-small step). Exact at the
 * limits (exp overflows to inf: 1; underflows to 0: -1); absolute error about 1e-7, which
 * is what GELU's 1 + tanh needs. The forward and backward use the same function, so
 * recomputed values stay bitwise those of the first forward. */
static inline float fast_tanhf(float u)
{
	return 1.0f - 2.0f / (expf(2.0f * u) + 1.0f);
}
#define ENC_COLS 64               /* channels per task of the embedding backward */

/* out(B,T,C) = wte[tok] + wpe[t] */
void kn_encoder_forward(float *out, const uint16_t *tok, const float *wte, const float *wpe,
	int B, int T, int C)
{
#pragma omp parallel for schedule(static)
	for (int bt = 0; bt < B * T; bt++) {
		const float *e = wte + (size_t)tok[bt] * C;
		const float *p = wpe + (size_t)(bt % T) * C;
		float *o = out + (size_t)bt * C;
		for (int c = 0; c < C; c++)
			o[c] = e[c] + p[c];
	}
}

/* dwte(V,C) += scatter(dout, tok); dwpe(T,C) += sum over b of dout */
void kn_encoder_backward(float *dwte, float *dwpe, const float *dout, const uint16_t *tok,
	int B, int T, int C)
{
	int nblk = (C + ENC_COLS - 1) / ENC_COLS;
#pragma omp parallel for schedule(static)
	for (int k = 0; k < nblk; k++) {
		int c0 = k * ENC_COLS, c1 = c0 + ENC_COLS < C ? c0 + ENC_COLS : C;
		for (int bt = 0; bt < B * T; bt++) {
			float *d = dwte + (size_t)tok[bt] * C;
			const float *g = dout + (size_t)bt * C;
			for (int c = c0; c < c1; c++)
				d[c] += g[c];
		}
	}
#pragma omp parallel for schedule(static)
	for (int t = 0; t < T; t++) {
		float *d = dwpe + (size_t)t * C;
		for (int b = 0; b < B; b++) {
			const float *g = dout + ((size_t)b * T + t) * C;
			for (int c = 0; c < C; c++)
				d[c] += g[c];
		}
	}
}

/* out(N) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
void kn_gelu_forward(float *out, const float *inp, size_t N)
{
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < N; i++) {
		float x = inp[i];
		float u = GELU_K * (x + 0.044715f * x * x * x);
		out[i] = 0.5f * x * (1.0f + fast_tanhf(u));
	}
}

/* dinp(N) = gelu'(inp) dout; in place allowed */
void kn_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N)
{
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < N; i++) {
		float x = inp[i];
		float u = GELU_K * (x + 0.044715f * x * x * x);
		float th = fast_tanhf(u);
		float sech2 = 1.0f - th * th;
		float g = 0.5f * (1.0f + th) +
			  0.5f * x * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
		dinp[i] = g * dout[i];
	}
}

/* out(N) = a + b */
void kn_residual_forward(float *out, const float *a, const float *b, size_t N)
{
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < N; i++)
		out[i] = a[i] + b[i];
}
