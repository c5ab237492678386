/* kn_adamw.c - global-norm reduction, scaling, and the AdamW update.
 *
 * Legend: N elements of one tensor. kn_sumsq splits its input into a fixed number of
 * slices whatever the thread count and adds their partial sums in slice order, so the
 * gradient norm, and with it the clipping, is the same for 1 or 2 threads.
 */
#include "kn.h"

#include <math.h>

#include "kn_rows.h"


/* sum of x(n)^2 in double lanes (kn_rows.h) */
static KN_SIMD double sumsq_slice(const float *x, size_t n)
{
	kn_vd acc = {0};
	size_t i = 0;
	for (; i + KN_LANES <= n; i += KN_LANES) {
		kn_vd v = KN_LOAD_D(x + i);
		acc += v * v;
	}
	for (int j = 0; i < n; i++, j++)
		acc[j] += (double)x[i] * x[i];
	return kn_lanes_total(&acc);
}

void kn_sumsq_slices(const float *x, size_t N, int s0, int s1, double *part)
{
#pragma omp parallel for schedule(static)
	for (int s = s0; s < s1; s++) {
		size_t i0 = kn_sumsq_cut(N, s), i1 = kn_sumsq_cut(N, s + 1);
		part[s] = sumsq_slice(x + i0, i1 - i0);
	}
}

double kn_sumsq(const float *x, size_t N)
{
	double part[KN_SUMSQ_SLICES], total = 0.0;
	kn_sumsq_slices(x, N, 0, KN_SUMSQ_SLICES, part);
	for (int s = 0; s < KN_SUMSQ_SLICES; s++)
		total += part[s];
	return total;
}

/* x(N) *= s */
void kn_scale(float *x, float s, size_t N)
{
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < N; i++)
		x[i] *= s;
}

/* y(N) += x(N) */
void kn_add(float *y, const float *x, size_t N)
{
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < N; i++)
		y[i] += x[i];
}

static KN_SIMD void add_span(float *y, const float *x, size_t N)
{
	for (size_t i = 0; i < N; i++)
		y[i] += x[i];
}

void kn_add_here(float *y, const float *x, size_t N)
{
	add_span(y, x, N);
}

/* AdamW's constants for one tensor */
typedef struct adamw_k {
	float gscale, decay, step_size, bc2_sqrt, beta1, beta2, eps;
} adamw_k;

#define ADAMW_SPAN 16384 /* elements per task of kn_adamw_update */

/* param, m, v (n) updated from grad(n); pbf (may be NULL) = param rounded to bf16 */
static KN_SIMD void adamw_span(float *param, uint16_t *pbf, float *m, float *v,
	const float *grad, size_t n, const adamw_k *k)
{
	for (size_t i = 0; i < n; i++) {
		float g = grad[i] * k->gscale;
		float p = param[i] * k->decay;
		float mi = k->beta1 * m[i] + (1.0f - k->beta1) * g;
		float vi = k->beta2 * v[i] + (1.0f - k->beta2) * g * g;
		m[i] = mi;
		v[i] = vi;
		param[i] = p - k->step_size * (mi / (sqrtf(vi) / k->bc2_sqrt + k->eps));
	}
	for (size_t i = 0; pbf && i < n; i++) /* the span still in L1 */
		pbf[i] = kn_bf16_from_f32(param[i]);
}

/* param, m, v (N) updated as torch.optim.AdamW (decoupled decay, bias correction) from
 * grad * gscale (as a kn_scale before it would have made the gradient: the same bits) */
void kn_adamw_update(float *param, uint16_t *param_bf16, float *m, float *v,
	const float *grad, float gscale, size_t N, float lr, float beta1, float beta2, float eps,
	float weight_decay, double bc1, double bc2)
{
	adamw_k k = {gscale, 1.0f - lr * weight_decay, (float)(lr / bc1), (float)sqrt(bc2),
		beta1, beta2, eps};
	size_t nspan = (N + ADAMW_SPAN - 1) / ADAMW_SPAN;
#pragma omp parallel for schedule(static)
	for (size_t s = 0; s < nspan; s++) {
		size_t i0 = s * ADAMW_SPAN, n = N - i0 < ADAMW_SPAN ? N - i0 : ADAMW_SPAN;
		adamw_span(param + i0, param_bf16 ? param_bf16 + i0 : NULL, m + i0, v + i0,
			grad + i0, n, &k);
	}
}
