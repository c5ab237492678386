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

/* One row's output from its statistics, and its rounding into ob (may be NULL) */
static inline void ln_out_row(float *o, uint16_t *ob, const float *x, float m, float s,
	const float *w, const float *b, int C)
{
	kn_ln_apply_row(o, x, m, s, w, b, C);
	if (ob)
		kn_round_row(ob, o, (size_t)C);
}

static KN_SIMD void ln_apply_row(float *o, uint16_t *ob, const float *x, float m, float s,
	const float *w, const float *b, int C)
{
	ln_out_row(o, ob, x, m, s, w, b, C);
}

/* One row of the forward: statistics, then the output */
static KN_SIMD void ln_fwd_row(float *o, uint16_t *ob, float *mean, float *rstd,
	const float *x, const float *w, const float *b, int C)
{
	kn_ln_stats(x, C, mean, rstd);
	ln_out_row(o, ob, x, *mean, *rstd, w, b, C);
}

/* out(N,C) =, mean(N) =, rstd(N) = */
void kn_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
	const float *w, const float *b, int N, int C, uint16_t *bf)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		size_t o = (size_t)r * C;
		ln_fwd_row(out + o, kn_bf_at(bf, o), &mean[r], &rstd[r], inp + o, w, b, C);
	}
}

/* out(N,C) = (inp - mean) * rstd * w + b */
void kn_layernorm_apply(float *out, const float *inp, const float *mean, const float *rstd,
	const float *w, const float *b, int N, int C, uint16_t *bf)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		size_t o = (size_t)r * C;
		ln_apply_row(out + o, kn_bf_at(bf, o), inp + o, mean[r], rstd[r], w, b, C);
	}
}

/* One row of kn_residual_layernorm_forward */
static KN_SIMD void res_ln_row(float *x, float *o, uint16_t *ob, float *mean, float *rstd,
	const float *a, const float *y, const float *bias, const float *w, const float *b, int C)
{
	if (bias)
		for (int c = 0; c < C; c++)
			x[c] = a[c] + (y[c] + bias[c]);
	else
		for (int c = 0; c < C; c++)
			x[c] = a[c] + y[c];
	kn_ln_stats(x, C, mean, rstd);
	ln_out_row(o, ob, x, *mean, *rstd, w, b, C);
}

/* res(N,C) = a + (y + bias); out, mean, rstd = LayerNorm(res): the same arithmetic as
 * kn_residual_forward and kn_layernorm_forward, row by row while the row is in cache */
void kn_residual_layernorm_forward(float *res, float *out, float *mean, float *rstd,
	const float *a, const float *y, const float *bias, const float *w, const float *b, int N,
	int C, uint16_t *bf)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		size_t o = (size_t)r * C;
		res_ln_row(res + o, out + o, kn_bf_at(bf, o), &mean[r], &rstd[r], a + o, y + o,
			bias, w, b, C);
	}
}

/* One row of the input's gradient: dx(C) += (dn - mean(dn) - norm mean(dn norm)) s, with
 * dn = w dy and norm = (x - m) s, the two means summed in double lanes (kn_rows.h) */
static KN_SIMD void ln_bwd_row(float *dx, uint16_t *dxb, const float *x, const float *dy,
	const float *w, float m, float s, int C)
{
	kn_vd a1 = {0}, a2 = {0};
	int c = 0;
	for (; c + KN_LANES <= C; c += KN_LANES) {
		kn_vf8 xv = *(const kn_vf8u *)(x + c), wv = *(const kn_vf8u *)(w + c);
		kn_vf8 dv = *(const kn_vf8u *)(dy + c);
		kn_vf8 norm = (xv - m) * s, dn = wv * dv;
		kn_vd dnd = __builtin_convertvector(dn, kn_vd);
		a1 += dnd;
		a2 += dnd * __builtin_convertvector(norm, kn_vd);
	}
	for (int j = 0; c < C; c++, j++) {
		float norm = (x[c] - m) * s, dn = w[c] * dy[c];
		a1[j] += dn;
		a2[j] += (double)dn * norm;
	}
	float a = (float)(kn_lanes_total(&a1) / C), bb = (float)(kn_lanes_total(&a2) / C);
	for (c = 0; c < C; c++) {
		float norm = (x[c] - m) * s;
		float dn = w[c] * dy[c];
		dx[c] += (dn - a - norm * bb) * s;
	}
	if (dxb)
		kn_round_row(dxb, dx, (size_t)C);
}

/* Columns [c0, c1) of the parameters' gradients, every row in order */
static KN_SIMD void ln_dwdb_cols(float *aw, float *ab, const float *inp, const float *dout,
	const float *mean, const float *rstd, int N, int C, int c0, int c1)
{
	for (int r = 0; r < N; r++) {
		const float *x = inp + (size_t)r * C;
		const float *dy = dout + (size_t)r * C;
		float m = mean[r], s = rstd[r];
		for (int c = c0; c < c1; c++) {
			aw[c - c0] += (x[c] - m) * s * dy[c];
			ab[c - c0] += dy[c];
		}
	}
}

/* dinp(N,C) +=, dw(C) +=, db(C) +=; bf = dinp rounded */
void kn_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
	const float *inp, const float *mean, const float *rstd, const float *w, int N, int C,
	uint16_t *bf)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		size_t o = (size_t)r * C;
		ln_bwd_row(dinp + o, kn_bf_at(bf, o), inp + o, dout + o, w, mean[r], rstd[r], C);
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
		ln_dwdb_cols(aw, ab, inp, dout, mean, rstd, N, C, c0, c1);
		for (int c = c0; dw && c < c1; c++)
			dw[c] += aw[c - c0];
		for (int c = c0; db && c < c1; c++)
			db[c] += ab[c - c0];
	}
}
