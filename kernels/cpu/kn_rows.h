/* kn_rows.h - per-row and per-element arithmetic shared by the fused and unfused kernels.
 *
 * A fused kernel (bias + GELU, residual + LayerNorm) must give bitwise what the separate
 * kernels give, because selective recompute rebuilds a dropped value with the separate
 * kernel and the result has to match what the first forward kept. Both call these inline
 * functions, so the arithmetic is written once. Private to kernels/cpu/.
 */
#ifndef KN_ROWS_H
#define KN_ROWS_H

#include <math.h>

#define KN_LN_EPS 1e-5 /* GPT-2's LayerNorm epsilon */
#define KN_GELU_K 0.7978845608028654f /* sqrt(2/pi) */

/* tanh(u) as 1 - 2 / (exp(2u) + 1): one expf, where glibc's tanhf goes through expm1f and
 * special cases at three times the cost (GELU was 10 % of a gpt2-small step). Exact at the
 * limits (exp overflows to inf: 1; underflows to 0: -1); absolute error about 1e-7, which
 * is what GELU's 1 + tanh needs. */
static inline float kn_fast_tanhf(float u)
{
	return 1.0f - 2.0f / (expf(2.0f * u) + 1.0f);
}

/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
static inline float kn_gelu(float x)
{
	float u = KN_GELU_K * (x + 0.044715f * x * x * x);
	return 0.5f * x * (1.0f + kn_fast_tanhf(u));
}

/* mean and 1/sqrt(var + eps) of x(C), accumulated in double: no dependence on threads */
static inline void kn_ln_stats(const float *x, int C, float *mean, float *rstd)
{
	double s = 0.0;
	for (int c = 0; c < C; c++)
		s += x[c];
	double m = s / C;
	double v = 0.0;
	for (int c = 0; c < C; c++) {
		double d = x[c] - m;
		v += d * d;
	}
	v /= C;
	*mean = (float)m;
	*rstd = (float)(1.0 / sqrt(v + KN_LN_EPS));
}

/* o(C) = (x - m) * s * w + b */
static inline void kn_ln_apply_row(float *o, const float *x, float m, float s, const float *w,
	const float *b, int C)
{
	for (int c = 0; c < C; c++)
		o[c] = (x[c] - m) * s * w[c] + b[c];
}

#endif
