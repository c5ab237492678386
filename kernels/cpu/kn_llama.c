/* kn_llama.c - the Llama family's own kernels: RMSNorm, rotary position embeddings and the
 * SwiGLU gate, forward and backward (the attention is kn_attention.c's, with grouped
 * key/value heads).
 *
 * Legend: N rows (B*T), C channels, B batch, T time, nh heads of hs columns (hs even, half
 * = hs/2), I the MLP's intermediate size; row-major float32.
 *
 * RMSNorm, as Hugging Face's LlamaRMSNorm: out = w * (x * rstd), rstd = 1/sqrt(mean(x^2) +
 * eps), mean(x^2) summed in double per row, so that no result depends on the thread count.
 * rstd is kept per row (the backward reads it); kn_rmsnorm_apply is the one place that turns
 * (x, rstd) into out, which the forward calls too: a recompute gives the forward's bits.
 *
 * Rotary embeddings, as LlamaRotaryEmbedding and apply_rotary_pos_emb: position t turns pair
 * j (j < half) of every head by angle t * theta^(-2j/hs), the pair being elements j and
 * j + half of the head (rotate_half: [x1, x2] -> [-x2, x1]). That is HF's layout of q_proj
 * and k_proj, whose rows its conversion script permuted from Meta's adjacent pairs, so
 * checkpoints from the Hub need nothing more. The table of cos and sin is computed once in
 * double and rounded (HF rounds its inverse frequencies to float32 first: 1-2 ulp apart).
 * The rotation is in place: attention and the saved activations see rotated q and k, and
 * the backward turns their gradients back by the opposite angle.
 *
 * SwiGLU, as LlamaMLP: h = silu(g) * u, silu(g) = g * sigmoid(g), with gate and up side by
 * side in one row of gu (N, 2I): gate | up, the output of one fused matmul.
 */
#include "kn.h"

#include <math.h>

#include "kn_rows.h"

#define RMS_COLS 64 /* columns per task of the weight-gradient reduction */

/* out(N,C) = w * (x * rstd), rstd(N) = 1/sqrt(mean(x^2) + eps) */
void kn_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, float eps,
	int N, int C, uint16_t *bf)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		const float *x = inp + (size_t)r * C;
		double ss = 0.0;
		for (int c = 0; c < C; c++)
			ss += (double)x[c] * x[c];
		rstd[r] = (float)(1.0 / sqrt(ss / C + (double)eps));
	}
	kn_rmsnorm_apply(out, inp, rstd, w, N, C, bf);
}

/* out(N,C) = w * (x * rstd): in that order, as LlamaRMSNorm multiplies */
void kn_rmsnorm_apply(float *out, const float *inp, const float *rstd, const float *w, int N,
	int C, uint16_t *bf)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		const float *x = inp + (size_t)r * C;
		float *o = out + (size_t)r * C, s = rstd[r];
		for (int c = 0; c < C; c++)
			o[c] = w[c] * (x[c] * s);
		if (bf)
			kn_round_row(bf + (size_t)r * C, o, (size_t)C);
	}
}

/* dinp(N,C) +=, dw(C) += from dout(N,C), inp and rstd of the forward:
 * dx = rstd * (w dy - xhat * mean(w dy xhat)), xhat = x rstd; dw = sum over rows dy xhat */
void kn_rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp,
	const float *rstd, const float *w, int N, int C, uint16_t *bf)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		const float *x = inp + (size_t)r * C, *dy = dout + (size_t)r * C;
		float *dx = dinp + (size_t)r * C, s = rstd[r];
		double dot = 0.0;
		for (int c = 0; c < C; c++)
			dot += (double)(w[c] * dy[c]) * (x[c] * s);
		float m = (float)(dot / C);
		for (int c = 0; c < C; c++)
			dx[c] += (w[c] * dy[c] - (x[c] * s) * m) * s;
		if (bf)
			kn_round_row(bf + (size_t)r * C, dx, (size_t)C);
	}
	/* each task owns a block of columns and walks every row in order: a fixed order of
	 * the sum whatever the thread count; none for a frozen weight (dw NULL) */
	if (!dw)
		return;
	int nblk = (C + RMS_COLS - 1) / RMS_COLS;
#pragma omp parallel for schedule(static)
	for (int k = 0; k < nblk; k++) {
		int c0 = k * RMS_COLS, c1 = c0 + RMS_COLS < C ? c0 + RMS_COLS : C;
		float acc[RMS_COLS] = {0};
		for (int r = 0; r < N; r++) {
			const float *x = inp + (size_t)r * C, *dy = dout + (size_t)r * C;
			float s = rstd[r];
			for (int c = c0; c < c1; c++)
				acc[c - c0] += dy[c] * (x[c] * s);
		}
		for (int c = c0; c < c1; c++)
			dw[c] += acc[c - c0];
	}
}

/* cs(T, hs): row t holds cos(t f_j) for j < half, then sin(t f_j), f_j = theta^(-2j/hs) */
void kn_rope_table(float *cs, int T, int hs, double theta)
{
	int half = hs / 2;
	for (int t = 0; t < T; t++)
		for (int j = 0; j < half; j++) {
			double a = t * pow(theta, -2.0 * j / hs);
			cs[(size_t)t * hs + j] = (float)cos(a);
			cs[(size_t)t * hs + half + j] = (float)sin(a);
		}
}

/* x(B,T,ld): heads 0..nh-1 at columns h*hs of each row, turned in place by sign * angle */
static void rope_turn(float *x, const float *cs, int B, int T, int nh, int hs, int ld,
	float sign)
{
	int half = hs / 2;
#pragma omp parallel for schedule(static)
	for (int bt = 0; bt < B * T; bt++) {
		const float *c = cs + (size_t)(bt % T) * hs, *s = c + half;
		float *row = x + (size_t)bt * ld;
		for (int h = 0; h < nh; h++) {
			float *a = row + (size_t)h * hs, *b = a + half;
			for (int j = 0; j < half; j++) {
				float x1 = a[j], x2 = b[j], sn = sign * s[j];
				/* x * cos + rotate_half(x) * sin, rotate_half = [-x2, x1] */
				a[j] = x1 * c[j] - x2 * sn;
				b[j] = x2 * c[j] + x1 * sn;
			}
		}
	}
}

/* x(B,T,ld) in place: the nh heads at the row's first nh*hs columns, rotated for their
 * position t (cs from kn_rope_table) */
void kn_rope_forward(float *x, const float *cs, int B, int T, int nh, int hs, int ld)
{
	rope_turn(x, cs, B, T, nh, hs, ld, 1.0f);
}

/* dx(B,T,ld) in place: the gradient of the rotated heads turned back (the rotation's
 * transpose is the opposite angle) */
void kn_rope_backward(float *dx, const float *cs, int B, int T, int nh, int hs, int ld)
{
	rope_turn(dx, cs, B, T, nh, hs, ld, -1.0f);
}

/* The exponentials of a row first, then the rest: fused into one loop, GCC's vector code
 * for it ran 10x slower than the two loops (SmolLM-135M's 1024 x 1536: 15 ms against
 * 1.4 ms on 2 threads), the same arithmetic either way. e(I) = exp(-g). */
static inline void neg_exp(float *e, const float *g, int I)
{
	for (int i = 0; i < I; i++)
		e[i] = kn_expf(-g[i]);
}

/* h(N,I) = silu(gate) * up = gate * sigmoid(gate) * up, gu(N,2I) = gate | up per row */
void kn_swiglu_forward(float *h, const float *gu, int N, int I, uint16_t *bf)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		const float *g = gu + (size_t)r * 2 * I, *u = g + I;
		float *o = h + (size_t)r * I;
		neg_exp(o, g, I);
		for (int i = 0; i < I; i++)
			o[i] = g[i] * (1.0f / (1.0f + o[i])) * u[i];
		if (bf)
			kn_round_row(bf + (size_t)r * I, o, (size_t)I);
	}
}

/* dgu(N,2I) = d gate | d up from dh(N,I) and gu(N,2I):
 * d gate = dh u sig(g) (1 + g (1 - sig(g))), d up = dh silu(g) */
void kn_swiglu_backward(float *dgu, const float *dh, const float *gu, int N, int I,
	uint16_t *bf)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		const float *g = gu + (size_t)r * 2 * I, *u = g + I, *d = dh + (size_t)r * I;
		float *dg = dgu + (size_t)r * 2 * I, *du = dg + I;
		neg_exp(du, g, I);
		for (int i = 0; i < I; i++) {
			float sg = 1.0f / (1.0f + du[i]);
			du[i] = d[i] * (g[i] * sg);
			dg[i] = d[i] * u[i] * sg * (1.0f + g[i] * (1.0f - sg));
		}
		if (bf)
			kn_round_row(bf + (size_t)r * 2 * I, dg, (size_t)2 * I);
	}
}
