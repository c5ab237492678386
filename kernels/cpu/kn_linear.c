/* kn_linear.c - y = x W + b and its backward, on top of kn_sgemm.
 *
 * Legend: N rows (B*T), C input channels, OC output channels; W stored [C, OC] as Hugging
 * Face's Conv1D, so no transposed copies are ever made: the transposes are sgemm flags.
 */
#include "kn.h"

#define LIN_COLS 64 /* columns per task of the bias-gradient reduction */

/* out(N,OC) = inp(N,C) w(C,OC) + b(OC) */
void kn_linear_forward(float *out, const float *inp, const float *w, const float *b, int N,
	int C, int OC)
{
	kn_sgemm(0, 0, N, OC, C, 1.0f, inp, C, w, OC, 0.0f, out, OC);
	if (b)
		kn_add_bias(out, b, N, OC);
}

/* out(N,OC) += b(OC) */
void kn_add_bias(float *out, const float *b, int N, int OC)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		float *o = out + (size_t)r * OC;
		for (int j = 0; j < OC; j++)
			o[j] += b[j];
	}
}

/* dinp(N,C) = dout w^T, dw(C,OC) += inp^T dout, db(OC) += column sums of dout; each may be
 * NULL (not wanted: a frozen weight's) */
void kn_linear_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
	const float *w, int N, int C, int OC)
{
	if (dinp)
		kn_sgemm(0, 1, N, C, OC, 1.0f, dout, OC, w, OC, 0.0f, dinp, C);
	if (dw)
		kn_sgemm(1, 0, C, OC, N, 1.0f, inp, C, dout, OC, 1.0f, dw, OC);
	if (db)
		kn_bias_backward(db, dout, N, OC);
}

/* db(OC) += column sums of dout(N,OC) */
void kn_bias_backward(float *db, const float *dout, int N, int OC)
{
	/* Column blocks, rows in order: the sum's order never depends on the thread count. */
	int nblk = (OC + LIN_COLS - 1) / LIN_COLS;
#pragma omp parallel for schedule(static)
	for (int k = 0; k < nblk; k++) {
		int j0 = k * LIN_COLS, j1 = j0 + LIN_COLS < OC ? j0 + LIN_COLS : OC;
		float acc[LIN_COLS] = {0};
		for (int r = 0; r < N; r++) {
			const float *d = dout + (size_t)r * OC;
			for (int j = j0; j < j1; j++)
				acc[j - j0] += d[j];
		}
		for (int j = j0; j < j1; j++)
			db[j] += acc[j - j0];
	}
}
