/* kn_pointwise.c - embedding, GELU (alone and fused with a bias), residual: the
 * elementwise kernels.
 *
 * Legend: B batch, T time, C channels, V vocab, N elements; row-major float32. Each output
 * element is computed by exactly one thread from its own inputs, so results never depend on
 * the thread count. The embedding backward's scatter is parallel over channels for the same
 * reason: every row of dwte is summed in (b, t) order.
 */
#include <string.h>

#include "kn.h"

#include "kn_rows.h"

#define ENC_COLS 64               /* channels per task of the embedding backward */

/* out(B,T,C) = wte[tok] + wpe[t] */
void kn_encoder_forward(float *out, const uint32_t *tok, const float *wte, const float *wpe,
	int B, int T, int C)
{
#pragma omp parallel for schedule(static)
	for (int bt = 0; bt < B * T; bt++) {
		const float *e = wte + (size_t)tok[bt] * C;
		float *o = out + (size_t)bt * C;
		if (!wpe) {
			memcpy(o, e, sizeof(float) * C);
			continue;
		}
		const float *p = wpe + (size_t)(bt % T) * C;
		for (int c = 0; c < C; c++)
			o[c] = e[c] + p[c];
	}
}

/* dwte(V,C) += scatter(dout, tok); dwpe(T,C) += sum over b of dout */
void kn_encoder_backward(float *dwte, float *dwpe, const float *dout, const uint32_t *tok,
	int B, int T, int C)
{
	int nblk = dwte ? (C + ENC_COLS - 1) / ENC_COLS : 0;
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
	if (!dwpe)
		return;
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

/* The elementwise kernels' work on n elements (or one row), in KN_SIMD clones */
static KN_SIMD void gelu_span(float *out, uint16_t *ob, const float *inp, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = kn_gelu(inp[i]);
	if (ob)
		kn_round_row(ob, out, n);
}

static KN_SIMD void bias_gelu_row(float *f, float *g, uint16_t *gb, const float *bias, int OC)
{
	for (int j = 0; j < OC; j++) {
		f[j] += bias[j];
		g[j] = kn_gelu(f[j]);
	}
	if (gb)
		kn_round_row(gb, g, (size_t)OC);
}

static KN_SIMD void gelu_bwd_span(float *dinp, uint16_t *db, const float *inp,
	const float *dout, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float x = inp[i];
		float u = KN_GELU_K * (x + 0.044715f * x * x * x);
		float th = kn_fast_tanhf(u);
		float sech2 = 1.0f - th * th;
		float g = 0.5f * (1.0f + th) +
			  0.5f * x * sech2 * KN_GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
		dinp[i] = g * dout[i];
	}
	if (db)
		kn_round_row(db, dinp, n);
}

#define SPAN 4096 /* elements per task of the flat elementwise loops */

/* out(N) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
void kn_gelu_forward(float *out, const float *inp, size_t N, uint16_t *bf)
{
	size_t nspan = (N + SPAN - 1) / SPAN;
#pragma omp parallel for schedule(static)
	for (size_t k = 0; k < nspan; k++) {
		size_t i0 = k * SPAN, n = N - i0 < SPAN ? N - i0 : SPAN;
		gelu_span(out + i0, kn_bf_at(bf, i0), inp + i0, n);
	}
}

/* fch(N,OC) += bias; gelu(N,OC) = gelu(fch) */
void kn_bias_gelu_forward(float *fch, float *gelu, const float *bias, int N, int OC,
	uint16_t *bf)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		size_t o = (size_t)r * OC;
		bias_gelu_row(fch + o, gelu + o, kn_bf_at(bf, o), bias, OC);
	}
}

/* dinp(N) = gelu'(inp) * dout; dinp may be dout */
void kn_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N,
	uint16_t *bf)
{
	size_t nspan = (N + SPAN - 1) / SPAN;
#pragma omp parallel for schedule(static)
	for (size_t k = 0; k < nspan; k++) {
		size_t i0 = k * SPAN, n = N - i0 < SPAN ? N - i0 : SPAN;
		gelu_bwd_span(dinp + i0, kn_bf_at(bf, i0), inp + i0, dout + i0, n);
	}
}

/* out(N,C) = a + (y + bias) */
void kn_residual_forward(float *out, const float *a, const float *y, const float *bias, int N,
	int C)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		size_t o = (size_t)r * C;
		if (bias)
			for (int c = 0; c < C; c++)
				out[o + c] = a[o + c] + (y[o + c] + bias[c]);
		else
			for (int c = 0; c < C; c++)
				out[o + c] = a[o + c] + y[o + c];
	}
}
