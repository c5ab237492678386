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
#include <stdint.h>
#include <string.h>

/* The hot row loops are compiled three times, for AVX-512, AVX2 and the build's baseline,
 * and the processor's best is picked when the program loads (GCC's target_clones; the
 * OpenMP loops call them, as the outlined parallel body would not be cloned). No clone
 * reassociates or contracts (ISO C's -ffp-contract=off, no -ffast-math): each gives the
 * same bits, only sooner. */
#define KN_SIMD __attribute__((target_clones("avx512f", "avx2", "default")))

/* Sums in double over a row run in KN_LANES interleaved partial sums (element i into lane
 * i % KN_LANES), added in one fixed tree: independent chains the vector units can run at
 * once, where one chain waited an addition's latency per element; one order for every
 * caller, thread count and clone. The lanes are GCC vectors (kn_vd: 8 doubles; kn_vf16:
 * 16 floats), held in registers whatever the clone's width; a row's tail goes into lanes
 * 0, 1, ... in order. */
#define KN_LANES 8
typedef float kn_vf8 __attribute__((vector_size(4 * KN_LANES)));
typedef double kn_vd __attribute__((vector_size(8 * KN_LANES)));
typedef float kn_vf16 __attribute__((vector_size(8 * KN_LANES)));
typedef int32_t kn_vi16 __attribute__((vector_size(8 * KN_LANES)));

/* (Loads are macros: a vector passed or returned by value is an ABI of its own per clone.)
 * x[0..8) widened to double; x[0..16) */
#define KN_LOAD_D(x) __builtin_convertvector(*(const kn_vf8u *)(x), kn_vd)
#define KN_LOAD_F16(x) (*(const kn_vf16u *)(x))
typedef float kn_vf8u __attribute__((vector_size(4 * KN_LANES), aligned(4), may_alias));
typedef float kn_vf16u __attribute__((vector_size(8 * KN_LANES), aligned(4), may_alias));

/* The lanes' total, in one fixed tree */
static inline double kn_lanes_total(const kn_vd *a)
{
	double c[KN_LANES];
	memcpy(c, a, sizeof c);
	return ((c[0] + c[4]) + (c[1] + c[5])) + ((c[2] + c[6]) + (c[3] + c[7]));
}

static inline float kn_lanes_total_f(const kn_vf16 *a)
{
	float c[KN_LANES * 2];
	memcpy(c, a, sizeof c);
	for (int w = KN_LANES; w >= 1; w /= 2)
		for (int j = 0; j < w; j++)
			c[j] += c[j + w];
	return c[0];
}

/* x(n) added into the lanes acc, element i into lane i % KN_LANES but the tail's, into
 * lanes 0, 1, ... in order */
static inline void kn_add_lanes_d(kn_vd *acc, const float *x, int n)
{
	int i = 0;
	for (; i + KN_LANES <= n; i += KN_LANES)
		*acc += KN_LOAD_D(x + i);
	for (int j = 0; i < n; i++, j++)
		(*acc)[j] += x[i];
}

/* sum of x(n), in double */
static inline double kn_sum_d(const float *x, int n)
{
	kn_vd acc = {0};
	kn_add_lanes_d(&acc, x, n);
	return kn_lanes_total(&acc);
}

/* sum of (x - m)^2 over x(n), in double */
static inline double kn_sumsq_dev_d(const float *x, double m, int n)
{
	kn_vd acc = {0};
	int i = 0;
	for (; i + KN_LANES <= n; i += KN_LANES) {
		kn_vd d = KN_LOAD_D(x + i) - m;
		acc += d * d;
	}
	for (int j = 0; i < n; i++, j++) {
		double d = x[i] - m;
		acc[j] += d * d;
	}
	return kn_lanes_total(&acc);
}

/* sum of x(n) in float, in 2 KN_LANES lanes */
static inline float kn_sum_f(const float *x, int n)
{
	kn_vf16 acc = {0};
	int i = 0;
	for (; i + KN_LANES * 2 <= n; i += KN_LANES * 2)
		acc += KN_LOAD_F16(x + i);
	for (int j = 0; i < n; i++, j++)
		acc[j] += x[i];
	return kn_lanes_total_f(&acc);
}

/* x . y over n, in float, in 2 KN_LANES lanes */
static inline float kn_dot_f(const float *x, const float *y, int n)
{
	kn_vf16 acc = {0};
	int i = 0;
	for (; i + KN_LANES * 2 <= n; i += KN_LANES * 2)
		acc += KN_LOAD_F16(x + i) * KN_LOAD_F16(y + i);
	for (int j = 0; i < n; i++, j++)
		acc[j] += x[i] * y[i];
	return kn_lanes_total_f(&acc);
}

/* max of x(n), n >= 1 (exact in any order) */
static inline float kn_max_f(const float *x, int n)
{
	kn_vf16 mx = {0};
	float m = x[0];
	int i = 0;
	mx += m;
	for (; i + KN_LANES * 2 <= n; i += KN_LANES * 2) {
		kn_vf16 v = KN_LOAD_F16(x + i);
		kn_vi16 gt = v > mx;
		mx = (kn_vf16)(((kn_vi16)v & gt) | ((kn_vi16)mx & ~gt));
	}
	for (; i < n; i++)
		m = x[i] > m ? x[i] : m;
	for (int j = 0; j < KN_LANES * 2; j++)
		m = mx[j] > m ? mx[j] : m;
	return m;
}

#define KN_LN_EPS 1e-5 /* GPT-2's LayerNorm epsilon */
#define KN_GELU_K 0.7978845608028654f /* sqrt(2/pi) */

/* e^x in float, written so that loops over it vectorise (libm's expf is a call per
 * element): x = n ln2 + r with n rounded to nearest (the 1.5 * 2^23 trick) and |r| <= ln2/2
 * (Cody-Waite split of ln2), e^r by its Taylor polynomial to r^6, 2^n put into the exponent
 * bits. x is clamped to [-87, 88], so the result is always a normal float: 1.6e-38 at the
 * bottom, 1.65e38 at the top. Relative error below 3e-7 (two float ulps) over the range,
 * measured against exp in double by test_kn_expf. Every kernel that needs an exponential
 * calls this one, so a recomputed value is the same bits as the first. The clamp's
 * branches are if-converted only under -fno-trapping-math (the Makefile's): without it the
 * loops stay scalar. */
static inline float kn_expf(float x)
{
	x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
	float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
	float r = x - n * 0.693359375f + n * 2.12194440e-4f;
	float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.66666672e-1f + r * (4.16666679e-2f +
		r * (8.33333377e-3f + r * 1.38888892e-3f)))));
	int32_t bits = ((int32_t)n + 127) << 23;
	float scale;
	memcpy(&scale, &bits, sizeof scale);
	return p * scale;
}

/* tanh(u) as 1 - 2 / (exp(2u) + 1): one exponential, where glibc's tanhf goes through expm1f and
 * special cases at three times the cost (GELU was 10 % of a gpt2-small step). Exact at the
 * limits (kn_expf's clamp gives 1 - 1.2e-38 = 1 and 2 / (1 + 1.6e-38) - 1 = -1); absolute
 * error about 1e-7, which is what GELU's 1 + tanh needs. */
static inline float kn_fast_tanhf(float u)
{
	return 1.0f - 2.0f / (kn_expf(2.0f * u) + 1.0f);
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
	double m = kn_sum_d(x, C) / C;
	double v = kn_sumsq_dev_d(x, m, C) / C;
	*mean = (float)m;
	*rstd = (float)(1.0 / sqrt(v + KN_LN_EPS));
}

/* bf(n) = x(n) rounded to bf16 (kn_bf16_from_f32): a row a kernel has just written, still in
 * cache (kn.h's trailing bf) */
static inline void kn_round_row(uint16_t *bf, const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		bf[i] = kn_bf16_from_f32(x[i]);
}

/* A bf16 copy from element i0 on (bf NULL: there is none) */
static inline uint16_t *kn_bf_at(uint16_t *bf, size_t i0)
{
	return bf ? bf + i0 : NULL;
}

/* o(C) = (x - m) * s * w + b */
static inline void kn_ln_apply_row(float *o, const float *x, float m, float s, const float *w,
	const float *b, int C)
{
	for (int c = 0; c < C; c++)
		o[c] = (x[c] - m) * s * w[c] + b[c];
}

#endif
