/* kn_layernorm.c - LayerNorm forward, re-apply from saved statistics, backward.
 *
 * Legend: N rows, C channels; row-major float32; eps 1e-5 (GPT-2). Statistics are
 * accumulated in double per row, so results do not depend on the thread count at all.
 * kn_layernorm_apply is the one place that turns (x, mean, rstd) into the output: the
 * forward calls it too, which is what makes selective recompute bitwise exact.
 */
#include "kn.h"

#include "kn_rows.h"

#define LN_COLS 64 /* columns per task of the parameter-gradient reductions */

/* out(N,C) =, mean(N) =, rstd(N) = */
void kn_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
	const float *w, const float *b, int N, int C)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++)
		kn_ln_stats(inp + (size_t)r * C, C, &mean[r], &rstd[r]);
	kn_layernorm_apply(out, inp, mean, rstd, w, b, N, C);
}

/* out(N,C) = (inp - mean) * rstd * w + b */
void kn_layernorm_apply(float *out, const float *inp, const float *mean, const float *rstd,
	const float *w, const float *b, int N, int C)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++)
		kn_ln_apply_row(out + (size_t)r * C, inp + (size_t)r * C, mean[r], rstd[r], w, b, C);
}

/* res(N,C) = a + (y + bias); out, mean, rstd = LayerNorm(res): the same arithmetic as
 * kn_residual_forward and kn_layernorm_forward, row by row while the row is in cache */
void kn_residual_layernorm_forward(float *res, float *out, float *mean, float *rstd,
	const float *a, const float *y, const float *bias, const float *w, const float *b, int N,
	int C)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		size_t o = (size_t)r * C;
		float *x = res + o;
		if (bias)
			for (int c = 0; c < C; c++)
				x[c] = a[o + c] + (y[o + c] + bias[c]);
		else
			for (int c = 0; c < C; c++)
				x[c] = a[o + c] + y[o + c];
		kn_ln_stats(x, C, &mean[r], &rstd[r]);
		kn_ln_apply_row(out + o, x, mean[r], rstd[r], w, b, C);
	}
}

/* dinp(N,C) +=, dw(C) +=, db(C) += */
void kn_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
	const float *inp, const float *mean, const float *rstd, const float *w, int N, int C)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		const float *x = inp + (size_t)r * C;
		const float *dy = dout + (size_t)r * C;
		float *dx = dinp + (size_t)r * C;
		float m = mean[r], s = rstd[r];
		double dmean = 0.0, dnorm_mean = 0.0;
		for (int c = 0; c < C; c++) {
			float norm = (x[c] - m) * s;
			float dn = w[c] * dy[c];
			dmean += dn;
			dnorm_mean += (double)dn * norm;
		}
		float a = (float)(dmean / C), bb = (float)(dnorm_mean / C);
		for (int c = 0; c < C; c++) {
			float norm = (x[c] - m) * s;
			float dn = w[c] * dy[c];
			dx[c] += (dn - a - norm * bb) * s;
		}
	}
	/* Parameter gradients (none of a frozen one: NULL): each task owns a block of columns
	 * and walks every row in order, so the sum's order is fixed whatever the thread count. */
	if (!dw && !db)
		return;
	int nblk = (C + LN_COLS - 1) / LN_COLS;
#pragma omp parallel for schedule(static)
	for (int k = 0; k < nblk; k++) {
		int c0 = k * LN_COLS, c1 = c0 + LN_COLS < C ? c0 + LN_COLS : C;
		float aw[LN_COLS] = {0}, ab[LN_COLS] = {0};
		for (int r = 0; r < N; r++) {
			const float *x = inp + (size_t)r * C;
			const float *dy = dout + (size_t)r * C;
			float m = mean[r], s = rstd[r];
			for (int c = c0; c < c1; c++) {
				aw[c - c0] += (x[c] - m) * s * dy[c];
				ab[c - c0] += dy[c];
			}
		}
		for (int c = c0; dw && c < c1; c++)
			dw[c] += aw[c - c0];
		for (int c = c0; db && c < c1; c++)
			db[c] += ab[c - c0];
	}
}
