/* test_kc.c - every CUDA kernel of kernels/cuda/kc.h against its CPU counterpart in
 * kernels/kn.h, on random inputs, in float32 and in bf16 (suite "cuda-kernels"; built only
 * with the CUDA backend, skipped with one line when no GPU is usable).
 *
 * How: inputs drawn with a fixed seed; in bf16 they are rounded to bf16 first and the CPU
 * reference runs on those same rounded values, so what is measured is the GPU's own error,
 * not the input rounding. `+=` outputs start from random values on both sides. Error: the
 * relative L2 error ||gpu - cpu|| / ||cpu|| per output tensor.
 *
 * Tolerances. float32: 1e-4 for everything (the CPU and the GPU differ only in the order of
 * float32 reductions and in FMA contraction: measured against float64, both backends sit
 * near 1e-6). bf16 (unit roundoff u = 2^-9 = 1.95e-3):
 * - ROUND1 4e-3 (2u): outputs computed in float32 from identical inputs and rounded once
 *   when stored (embedding, LayerNorm output, residual, GELU, bias-epilogue products, the
 *   fused cross-entropy's gradient, AdamW's bf16 copy, `+=` into a bf16 gradient);
 * - F32OUT 1e-4: float32 outputs of float32 arithmetic on identical bf16 inputs (LayerNorm
 *   statistics and weight gradients, log-sum-exps, losses, float32 weight gradients of a
 *   product);
 * - ATT_OUT 1e-2 (5u): the attention output goes through two roundings (the probabilities
 *   are stored in bf16 before P v, then the output);
 * - ATT_GRAD 3e-2: dq and dk come from dS = P (dP - D) scale where D = dout . out is taken
 *   from the bf16 output and dP - D cancels: the rounding of P, of out and of dS is
 *   magnified by that cancellation (about 4u per rounding, three roundings, plus margin).
 * Set REMAT_CUDA_VERBOSE=1 to print every measured error (run-on-gpu.sh does).
 *
 * Then the bitwise promises the GPU model's recompute rests on: kc_layernorm_apply gives
 * the forward's bits, and a device round trip through bf16 is the host's
 * round-to-nearest-even.
 * On the host, with or without a GPU: kc_gemm's restatement of a row-major product for
 * column-major cuBLASLt (kc_gemm_colmajor), against both definitions of the product, for
 * every shape of product the model makes (transposes, padded rows, strided batches).
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/tests.h"
#include "eng_st.h"
#include "kc.h"
#include "kn.h"
#include "t_cuda.h"

#define TIMEOUT 120 /* seconds per test: most of it loading CUDA, cuBLASLt */
#define SEED 0xc0da2025u
#define TOL_F32 1e-4
#define ROUND1 4e-3
#define F32OUT 1e-4
#define ATT_OUT 1e-2
#define ATT_GRAD 3e-2

/* ---- host helpers ---- */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static float rnd(float lo, float hi)
{
	return lo + (hi - lo) * (float)((rng_next() >> 40) * (1.0 / 16777216.0));
}

/* n random floats in [lo, hi), rounded to bf16 when dt is */
static float *hrand(size_t n, float lo, float hi, kc_dtype dt)
{
	float *x = malloc((n ? n : 1) * sizeof(float));
	ck_assert_ptr_nonnull(x);
	for (size_t i = 0; i < n; i++) {
		x[i] = rnd(lo, hi);
		if (dt == KC_BF16)
			x[i] = eng_bf16_to_f32(eng_bf16_from_f32(x[i]));
	}
	return x;
}

static void cuda_ok(cudaError_t e, const char *what)
{
	ck_assert_msg(e == cudaSuccess, "%s: %s", what, cudaGetErrorString(e));
}

static void kc_ok(int rc, const char *what)
{
	ck_assert_msg(rc == 0, "%s: %s", what, kc_error());
}

/* device copy of x(n) in dt */
static void *dup_dev(const float *x, size_t n, kc_dtype dt)
{
	void *d = NULL;
	size_t es = kc_dtype_size(dt);
	cuda_ok(cudaMalloc(&d, (n ? n : 1) * es), "cudaMalloc");
	if (dt == KC_F32) {
		cuda_ok(cudaMemcpy(d, x, n * 4, cudaMemcpyHostToDevice), "upload");
		return d;
	}
	uint16_t *b = malloc((n ? n : 1) * 2);
	ck_assert_ptr_nonnull(b);
	for (size_t i = 0; i < n; i++)
		b[i] = eng_bf16_from_f32(x[i]);
	cuda_ok(cudaMemcpy(d, b, n * 2, cudaMemcpyHostToDevice), "upload");
	free(b);
	return d;
}

/* x(n) in dt on the device, as floats on the host (malloc'd) */
static float *get_dev(const void *d, size_t n, kc_dtype dt)
{
	float *x = malloc((n ? n : 1) * sizeof(float));
	ck_assert_ptr_nonnull(x);
	cuda_ok(cudaDeviceSynchronize(), "kernel");
	if (dt == KC_F32) {
		cuda_ok(cudaMemcpy(x, d, n * 4, cudaMemcpyDeviceToHost), "download");
		return x;
	}
	uint16_t *b = malloc((n ? n : 1) * 2);
	ck_assert_ptr_nonnull(b);
	cuda_ok(cudaMemcpy(b, d, n * 2, cudaMemcpyDeviceToHost), "download");
	for (size_t i = 0; i < n; i++)
		x[i] = eng_bf16_to_f32(b[i]);
	free(b);
	return x;
}

static void *dev_zero(size_t bytes)
{
	void *d = NULL;
	cuda_ok(cudaMalloc(&d, bytes ? bytes : 1), "cudaMalloc");
	cuda_ok(cudaMemset(d, 0, bytes ? bytes : 1), "cudaMemset");
	return d;
}

static double rel_l2(const float *a, const float *b, size_t n)
{
	double num = 0.0, den = 0.0;
	for (size_t i = 0; i < n; i++) {
		double d = (double)a[i] - b[i];
		num += d * d;
		den += (double)b[i] * b[i];
	}
	return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* gpu (device, dt or float32 when f32) against cpu (host): rel L2 below tol */
static void expect(const char *what, kc_dtype dt, const void *gpu, int f32, const float *cpu,
	size_t n, double tol)
{
	float *g = get_dev(gpu, n, f32 ? KC_F32 : dt);
	double e = rel_l2(g, cpu, n);
	if (getenv("REMAT_CUDA_VERBOSE"))
		fprintf(stderr, "cuda-kernels: %-34s %s rel L2 %.3e (tolerance %.0e)\n", what,
			kc_dtype_name(dt), e, tol);
	ck_assert_msg(e <= tol, "%s (%s): rel L2 error %.3e > %.0e", what, kc_dtype_name(dt), e,
		tol);
	free(g);
}

static double tol(kc_dtype dt, double bf16)
{
	return dt == KC_F32 ? TOL_F32 : bf16;
}

static kc_blas *blas_new(void **ws)
{
	kc_blas *h = NULL;
	*ws = dev_zero(KC_BLAS_WORKSPACE);
	kc_ok(kc_blas_create(&h, *ws, KC_BLAS_WORKSPACE), "kc_blas_create");
	return h;
}

/* ---- embedding ---- */

START_TEST(test_kc_encoder)
{
	kc_dtype dt = (kc_dtype)_i;
	int B = 3, T = 17, C = 48, V = 40, N = B * T;
	rng_state = SEED;
	uint32_t tok[3 * 17];
	for (int i = 0; i < N; i++)
		tok[i] = (uint32_t)(rng_next() % (uint64_t)(V / 2)); /* repeats, and unused rows */
	float *wte = hrand((size_t)V * C, -1, 1, dt), *wpe = hrand((size_t)T * C, -1, 1, dt);
	float *out = malloc((size_t)N * C * 4);
	kn_encoder_forward(out, tok, wte, wpe, B, T, C);
	uint32_t *dtok = dev_zero(sizeof tok);
	cuda_ok(cudaMemcpy(dtok, tok, sizeof tok, cudaMemcpyHostToDevice), "upload");
	void *dwte_w = dup_dev(wte, (size_t)V * C, dt), *dwpe_w = dup_dev(wpe, (size_t)T * C, dt);
	void *dout_f = dev_zero((size_t)N * C * kc_dtype_size(dt));
	kc_ok(kc_encoder_forward(0, dt, dout_f, dtok, dwte_w, dwpe_w, B, T, C), "encoder");
	expect("encoder_forward out", dt, dout_f, 0, out, (size_t)N * C, tol(dt, ROUND1));

	/* backward: += into random float32 gradients, the rows of each token in order */
	float *dout = hrand((size_t)N * C, -1, 1, dt);
	float *gwte = hrand((size_t)V * C, -1, 1, KC_F32), *gwpe = hrand((size_t)T * C, -1, 1,
								  KC_F32);
	void *d_dout = dup_dev(dout, (size_t)N * C, dt);
	float *d_gwte = dup_dev(gwte, (size_t)V * C, KC_F32), *d_gwpe = dup_dev(gwpe,
								     (size_t)T * C, KC_F32);
	kn_encoder_backward(gwte, gwpe, dout, tok, B, T, C);
	int order[3 * 17], start[3 * 17 + 1], btok[3 * 17], nb = 0, k = 0;
	for (int v = 0; v < V; v++) {
		int first = k;
		for (int i = 0; i < N; i++)
			if (tok[i] == (uint32_t)v)
				order[k++] = i;
		if (k > first) {
			btok[nb] = v;
			start[nb++] = first;
		}
	}
	start[nb] = N;
	int *d_order = dup_dev((float *)order, (size_t)N, KC_F32); /* 4-byte ints, copied raw */
	int *d_start = dup_dev((float *)start, (size_t)nb + 1, KC_F32);
	int *d_btok = dup_dev((float *)btok, (size_t)nb, KC_F32);
	kc_ok(kc_encoder_backward_wte(0, dt, d_gwte, d_dout, d_order, d_start, d_btok, nb, C),
		"encoder wte");
	kc_ok(kc_encoder_backward_wpe(0, dt, d_gwpe, d_dout, B, T, C), "encoder wpe");
	expect("encoder_backward dwte", dt, d_gwte, 1, gwte, (size_t)V * C, tol(dt, F32OUT));
	expect("encoder_backward dwpe", dt, d_gwpe, 1, gwpe, (size_t)T * C, tol(dt, F32OUT));
	cudaFree(d_order);
	cudaFree(d_start);
	cudaFree(d_btok);
	cudaFree(d_gwte);
	cudaFree(d_gwpe);
	cudaFree(d_dout);
	cudaFree(dout_f);
	cudaFree(dwte_w);
	cudaFree(dwpe_w);
	cudaFree(dtok);
	free(dout);
	free(gwte);
	free(gwpe);
	free(out);
	free(wte);
	free(wpe);
}
END_TEST

/* ---- LayerNorm ---- */

START_TEST(test_kc_layernorm)
{
	kc_dtype dt = (kc_dtype)_i;
	int N = 77, C = 96;
	size_t n = (size_t)N * C, es = kc_dtype_size(dt);
	rng_state = SEED + 1;
	float *x = hrand(n, -2, 3, dt), *w = hrand(C, 0.5f, 1.5f, dt), *b = hrand(C, -1, 1, dt);
	float *out = malloc(n * 4), *mean = malloc(N * 4), *rstd = malloc(N * 4);
	kn_layernorm_forward(out, mean, rstd, x, w, b, N, C, NULL);
	void *dx = dup_dev(x, n, dt), *dw = dup_dev(w, C, dt), *db = dup_dev(b, C, dt);
	void *dout = dev_zero(n * es), *dout2 = dev_zero(n * es);
	float *dmean = dev_zero(N * 4), *drstd = dev_zero(N * 4);
	kc_ok(kc_layernorm_forward(0, dt, dout, dmean, drstd, dx, dw, db, N, C), "layernorm");
	expect("layernorm_forward out", dt, dout, 0, out, n, tol(dt, ROUND1));
	expect("layernorm_forward mean", dt, dmean, 1, mean, N, tol(dt, F32OUT));
	expect("layernorm_forward rstd", dt, drstd, 1, rstd, N, tol(dt, F32OUT));
	/* selective recompute's promise: apply from the saved statistics gives the same bits */
	kc_ok(kc_layernorm_apply(0, dt, dout2, dx, dmean, drstd, dw, db, N, C), "apply");
	float *a1 = get_dev(dout, n, dt), *a2 = get_dev(dout2, n, dt);
	ck_assert_msg(memcmp(a1, a2, n * 4) == 0, "layernorm_apply differs from the forward");
	free(a1);
	free(a2);

	/* residual + LayerNorm: res = a + y, then the LayerNorm of the stored res */
	float *a = hrand(n, -1, 1, dt), *y = hrand(n, -1, 1, dt), *res = malloc(n * 4);
	kn_residual_layernorm_forward(res, out, mean, rstd, a, y, NULL, w, b, N, C, NULL);
	void *da = dup_dev(a, n, dt), *dy = dup_dev(y, n, dt), *dres = dev_zero(n * es);
	kc_ok(kc_residual_layernorm_forward(0, dt, dres, dout, dmean, drstd, da, dy, dw, db, N, C),
		"residual_layernorm");
	float *gres = get_dev(dres, n, dt);
	expect("residual_layernorm res", dt, dres, 0, res, n, tol(dt, ROUND1));
	/* the CPU LayerNorm of the GPU's stored residual: isolates the LayerNorm's error from
	 * the residual's rounding */
	kn_layernorm_forward(out, mean, rstd, gres, w, b, N, C, NULL);
	expect("residual_layernorm out", dt, dout, 0, out, n, tol(dt, ROUND1));
	expect("residual_layernorm mean", dt, dmean, 1, mean, N, tol(dt, F32OUT));
	kc_ok(kc_layernorm_apply(0, dt, dout2, dres, dmean, drstd, dw, db, N, C), "apply");
	a1 = get_dev(dout, n, dt);
	a2 = get_dev(dout2, n, dt);
	ck_assert_msg(memcmp(a1, a2, n * 4) == 0, "layernorm_apply differs from the fused forward");
	free(a1);
	free(a2);

	/* backward: dinp, dw, db all += */
	float *g = hrand(n, -1, 1, dt), *dinp = hrand(n, -1, 1, dt);
	float *gw = hrand(C, -1, 1, KC_F32), *gb = hrand(C, -1, 1, KC_F32);
	kn_layernorm_forward(out, mean, rstd, x, w, b, N, C, NULL);
	kc_ok(kc_layernorm_forward(0, dt, dout, dmean, drstd, dx, dw, db, N, C), "layernorm");
	/* each side from its own statistics */
	void *dg = dup_dev(g, n, dt), *ddinp = dup_dev(dinp, n, dt);
	float *dgw = dup_dev(gw, C, KC_F32), *dgb = dup_dev(gb, C, KC_F32);
	void *scratch = dev_zero(kc_layernorm_scratch_bytes(N, C));
	kn_layernorm_backward(dinp, gw, gb, g, x, mean, rstd, w, N, C, NULL);
	kc_ok(kc_layernorm_backward(0, dt, ddinp, dgw, dgb, dg, dx, dmean, drstd, dw, N, C,
		      scratch), "layernorm_backward");
	expect("layernorm_backward dinp", dt, ddinp, 0, dinp, n, tol(dt, ROUND1));
	expect("layernorm_backward dw", dt, dgw, 1, gw, C, tol(dt, F32OUT));
	expect("layernorm_backward db", dt, dgb, 1, gb, C, tol(dt, F32OUT));
	void *bufs[] = {dx, dw, db, dout, dout2, dmean, drstd, da, dy, dres, dg, ddinp, dgw, dgb,
		scratch};
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		cudaFree(bufs[i]);
	float *hb[] = {x, w, b, out, mean, rstd, a, y, res, gres, g, dinp, gw, gb};
	for (size_t i = 0; i < sizeof hb / sizeof hb[0]; i++)
		free(hb[i]);
}
END_TEST

/* ---- linear layers through kc_gemm ---- */

START_TEST(test_kc_linear)
{
	kc_dtype dt = (kc_dtype)_i;
	int N = 37, C = 64, OC = 192;
	size_t es = kc_dtype_size(dt);
	void *ws;
	kc_blas *h = blas_new(&ws);
	rng_state = SEED + 2;
	float *x = hrand((size_t)N * C, -1, 1, dt), *w = hrand((size_t)C * OC, -0.2f, 0.2f, dt);
	float *b = hrand(OC, -1, 1, dt), *y = malloc((size_t)N * OC * 4);
	kn_linear_forward(y, x, w, b, N, C, OC);
	void *dx = dup_dev(x, (size_t)N * C, dt), *dw = dup_dev(w, (size_t)C * OC, dt);
	void *db = dup_dev(b, OC, dt), *dy = dev_zero((size_t)N * OC * es);
	kc_ok(kc_gemm(h, 0, 0, 0, N, OC, C, 1.0f, dx, C, 0, dw, OC, 0, dt, 0.0f, dy, OC, 0, dt, 1,
		      KC_EPI_BIAS, db), "gemm bias");
	expect("gemm + bias epilogue", dt, dy, 0, y, (size_t)N * OC, tol(dt, ROUND1));

	/* backward: dinp =, dw +=, db += */
	float *g = hrand((size_t)N * OC, -1, 1, dt), *dinp = malloc((size_t)N * C * 4);
	float *gw = hrand((size_t)C * OC, -1, 1, KC_F32), *gb = hrand(OC, -1, 1, KC_F32);
	void *dg = dup_dev(g, (size_t)N * OC, dt), *ddinp = dev_zero((size_t)N * C * es);
	float *dgw = dup_dev(gw, (size_t)C * OC, KC_F32), *dgb = dup_dev(gb, OC, KC_F32);
	void *scratch = dev_zero(kc_bias_scratch_bytes(N, OC));
	kn_linear_backward(dinp, gw, gb, g, x, w, N, C, OC);
	kc_ok(kc_gemm(h, 0, 0, 1, N, C, OC, 1.0f, dg, OC, 0, dw, OC, 0, dt, 0.0f, ddinp, C, 0, dt,
		      1, KC_EPI_NONE, NULL), "gemm dinp");
	kc_ok(kc_gemm(h, 0, 1, 0, C, OC, N, 1.0f, dx, C, 0, dg, OC, 0, dt, 1.0f, dgw, OC, 0,
		      KC_F32, 1, KC_EPI_NONE, NULL), "gemm dw");
	kc_ok(kc_bias_backward(0, dt, dgb, dg, N, OC, scratch), "bias_backward");
	expect("gemm dinp = dout w^T", dt, ddinp, 0, dinp, (size_t)N * C, tol(dt, ROUND1));
	expect("gemm dw += x^T dout (float32)", dt, dgw, 1, gw, (size_t)C * OC, tol(dt, F32OUT));
	expect("bias_backward db", dt, dgb, 1, gb, OC, tol(dt, F32OUT));

	/* through GELU: dinp = (dout w^T) * gelu'(aux), the DGELU epilogue or its fallback */
	float *aux = hrand((size_t)N * C, -3, 3, dt);
	void *daux = dup_dev(aux, (size_t)N * C, dt);
	kn_linear_backward(dinp, gw, NULL, g, x, w, N, C, OC);
	kn_gelu_backward(dinp, aux, dinp, (size_t)N * C, NULL);
	kc_ok(kc_gemm(h, 0, 0, 1, N, C, OC, 1.0f, dg, OC, 0, dw, OC, 0, dt, 0.0f, ddinp, C, 0, dt,
		      1, KC_EPI_DGELU, daux), "gemm dgelu");
	/* float32: the epilogue's GELU derivative is cuBLASLt's own, not ours, hence 1e-3 */
	expect("gemm + DGELU epilogue", dt, ddinp, 0, dinp, (size_t)N * C,
		dt == KC_F32 ? 1e-3 : 2 * ROUND1);
	if (getenv("REMAT_CUDA_VERBOSE"))
		fprintf(stderr, "cuda-kernels: epilogue fallbacks (%s): %ld\n", kc_dtype_name(dt),
			kc_blas_fallbacks(h));
	void *bufs[] = {dx, dw, db, dy, dg, ddinp, dgw, dgb, scratch, daux, ws};
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		cudaFree(bufs[i]);
	kc_blas_destroy(h);
	float *hb[] = {x, w, b, y, g, dinp, gw, gb, aux};
	for (size_t i = 0; i < sizeof hb / sizeof hb[0]; i++)
		free(hb[i]);
}
END_TEST

/* ---- pointwise ---- */

START_TEST(test_kc_pointwise)
{
	kc_dtype dt = (kc_dtype)_i;
	size_t n = 5003, es = kc_dtype_size(dt);
	rng_state = SEED + 3;
	float *x = hrand(n, -5, 5, dt), *g = hrand(n, -1, 1, dt), *y = malloc(n * 4);
	void *dx = dup_dev(x, n, dt), *dg = dup_dev(g, n, dt), *dy = dev_zero(n * es);
	kn_gelu_forward(y, x, n, NULL);
	kc_ok(kc_gelu_forward(0, dt, dy, dx, n), "gelu");
	expect("gelu_forward", dt, dy, 0, y, n, tol(dt, ROUND1));
	kn_gelu_backward(y, x, g, n, NULL);
	kc_ok(kc_gelu_backward(0, dt, dy, dx, dg, n), "gelu_backward");
	expect("gelu_backward", dt, dy, 0, y, n, tol(dt, ROUND1));
	kc_ok(kc_gelu_backward(0, dt, dg, dx, dg, n), "gelu_backward in place");
	expect("gelu_backward in place", dt, dg, 0, y, n, tol(dt, ROUND1));
	kn_residual_forward(y, x, g, NULL, 1, (int)n);
	cuda_ok(cudaFree(dg), "free");
	dg = dup_dev(g, n, dt);
	kc_ok(kc_residual_forward(0, dt, dy, dx, dg, n), "residual");
	expect("residual_forward", dt, dy, 0, y, n, tol(dt, ROUND1));
	/* bias added over rows of a wider stride */
	int rows = 7, OC = 30, ld = 40;
	float *m = hrand((size_t)rows * ld, -1, 1, dt), *bias = hrand(OC, -1, 1, dt);
	void *dm = dup_dev(m, (size_t)rows * ld, dt), *dbias = dup_dev(bias, OC, dt);
	for (int r = 0; r < rows; r++)
		for (int j = 0; j < OC; j++)
			m[r * ld + j] += bias[j];
	kc_ok(kc_add_bias(0, dt, dm, dbias, rows, OC, ld), "add_bias");
	expect("add_bias", dt, dm, 0, m, (size_t)rows * ld, tol(dt, ROUND1));
	cudaFree(dx);
	cudaFree(dg);
	cudaFree(dy);
	cudaFree(dm);
	cudaFree(dbias);
	free(x);
	free(g);
	free(y);
	free(m);
	free(bias);
}
END_TEST

/* ---- attention (ours) ---- */

static const int att_T[] = {50, 128};

static void attention_case(kc_dtype dt, int T)
{
	int B = 2, C = 64, NH = 4;
	size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, nl = (size_t)B * NH * T;
	size_t es = kc_dtype_size(dt);
	void *ws;
	kc_blas *h = blas_new(&ws);
	float *qkv = hrand(nq, -1, 1, dt), *dout = hrand(no, -1, 1, dt);
	float *out = malloc(no * 4), *lse = malloc(nl * 4), *dqkv = malloc(nq * 4);
	float *scr = malloc(kn_attention_scratch_floats(T) * 4);
	kn_attention_forward(out, lse, scr, qkv, B, T, C, NH);
	kn_attention_backward(dqkv, scr, dout, qkv, out, lse, B, T, C, NH);
	void *dq = dup_dev(qkv, nq, dt), *ddout = dup_dev(dout, no, dt);
	void *dO = dev_zero(no * es), *ddq = dev_zero(nq * es);
	float *dlse = dev_zero(nl * 4);
	void *scratch = dev_zero(kc_attention_scratch_bytes(dt, T, NH));
	kc_ok(kc_attention_forward(h, 0, dt, dO, dlse, dq, B, T, C, NH, scratch), "attention");
	char what[64];
	snprintf(what, sizeof what, "attention_forward out (T %d)", T);
	expect(what, dt, dO, 0, out, no, tol(dt, ATT_OUT));
	snprintf(what, sizeof what, "attention_forward lse (T %d)", T);
	expect(what, dt, dlse, 1, lse, nl, tol(dt, F32OUT));
	kc_ok(kc_attention_backward(h, 0, dt, ddq, ddout, dq, dO, dlse, B, T, C, NH, scratch),
		"attention_backward");
	snprintf(what, sizeof what, "attention_backward dqkv (T %d)", T);
	expect(what, dt, ddq, 0, dqkv, nq, tol(dt, ATT_GRAD));
	void *bufs[] = {dq, ddout, dO, ddq, dlse, scratch, ws};
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		cudaFree(bufs[i]);
	kc_blas_destroy(h);
	free(qkv);
	free(dout);
	free(out);
	free(lse);
	free(dqkv);
	free(scr);
}

START_TEST(test_kc_attention)
{
	rng_state = SEED + 4;
	kn_set_threads(1);
	for (size_t k = 0; k < sizeof att_T / sizeof att_T[0]; k++)
		attention_case((kc_dtype)_i, att_T[k]);
}
END_TEST

/* ---- cross-entropy ---- */

START_TEST(test_kc_crossentropy)
{
	kc_dtype dt = (kc_dtype)_i;
	int N = 37, V = 1000, ld = 1024;
	rng_state = SEED + 5;
	float *l = hrand((size_t)N * V, -4, 4, dt), *lp = calloc((size_t)N * ld, 4);
	uint32_t tgt[37];
	for (int r = 0; r < N; r++) {
		tgt[r] = (uint32_t)(rng_next() % (uint64_t)V);
		memcpy(lp + (size_t)r * ld, l + (size_t)r * V, (size_t)V * 4);
	}
	float *lse = malloc(N * 4), *loss = malloc(N * 4);
	kn_crossentropy_forward(lse, loss, l, tgt, N, V);
	void *dl = dup_dev(lp, (size_t)N * ld, dt);
	uint32_t *dtgt = dev_zero(sizeof tgt);
	cuda_ok(cudaMemcpy(dtgt, tgt, sizeof tgt, cudaMemcpyHostToDevice), "upload");
	float *dlse = dev_zero(N * 4), *dloss = dev_zero(N * 4);
	kc_ok(kc_crossentropy_forward(0, dt, dlse, dloss, dl, ld, dtgt, N, V), "crossentropy");
	expect("crossentropy_forward lse", dt, dlse, 1, lse, N, tol(dt, F32OUT));
	expect("crossentropy_forward loss", dt, dloss, 1, loss, N, tol(dt, F32OUT));
	float scale = 1.0f / N;
	kn_crossentropy_fused(l, lse, loss, tgt, scale, N, V);
	kc_ok(kc_crossentropy_fused(0, dt, dl, ld, dlse, dloss, dtgt, scale, N, V), "fused");
	expect("crossentropy_fused lse", dt, dlse, 1, lse, N, tol(dt, F32OUT));
	expect("crossentropy_fused loss", dt, dloss, 1, loss, N, tol(dt, F32OUT));
	float *gl = get_dev(dl, (size_t)N * ld, dt);
	for (int r = 0; r < N; r++) {
		for (int j = V; j < ld; j++) /* the padding past V: never written */
			ck_assert_msg(gl[(size_t)r * ld + j] == 0.0f, "row %d column %d written", r, j);
		/* compact in place: row r moves down, over rows already compared */
		memmove(gl + (size_t)r * V, gl + (size_t)r * ld, (size_t)V * 4);
	}
	double e = rel_l2(gl, l, (size_t)N * V);
	ck_assert_msg(e <= tol(dt, ROUND1), "crossentropy_fused dlogits (%s): rel L2 %.3e",
		kc_dtype_name(dt), e);
	cudaFree(dl);
	cudaFree(dtgt);
	cudaFree(dlse);
	cudaFree(dloss);
	free(l);
	free(lp);
	free(lse);
	free(loss);
	free(gl);
}
END_TEST

/* ---- optimizer ---- */

static const size_t sumsq_n[] = {1, 1000, 100003};

START_TEST(test_kc_sumsq)
{
	rng_state = SEED + 6;
	double *scratch = dev_zero((KC_SUMSQ_PARTS + 1) * 8);
	for (size_t k = 0; k < sizeof sumsq_n / sizeof sumsq_n[0]; k++) {
		size_t n = sumsq_n[k];
		float *x = hrand(n, -1, 1, KC_F32);
		float *dx = dup_dev(x, n, KC_F32);
		double got = 0, want = kn_sumsq(x, n);
		kc_ok(kc_sumsq(0, scratch + KC_SUMSQ_PARTS, scratch, dx, n), "sumsq");
		cuda_ok(cudaMemcpy(&got, scratch + KC_SUMSQ_PARTS, 8, cudaMemcpyDeviceToHost),
			"download");
		/* both add exact double products; only the order differs */
		ck_assert_msg(fabs(got - want) <= 1e-12 * want, "sumsq n %zu: %.17g vs %.17g", n, got,
			want);
		cudaFree(dx);
		free(x);
	}
	cudaFree(scratch);
}
END_TEST

START_TEST(test_kc_adamw)
{
	kc_dtype dt = (kc_dtype)_i;
	size_t n = 4099;
	rng_state = SEED + 7;
	float *p = hrand(n, -1, 1, KC_F32), *m = hrand(n, -0.1f, 0.1f, KC_F32);
	float *v = hrand(n, 0, 0.01f, KC_F32), *g = hrand(n, -1, 1, KC_F32);
	float *dp = dup_dev(p, n, KC_F32), *dm = dup_dev(m, n, KC_F32), *dv = dup_dev(v, n, KC_F32);
	float *dg = dup_dev(g, n, KC_F32);
	void *copy = dt == KC_BF16 ? dev_zero(n * 2) : NULL;
	float lr = 3e-3f, scale = 0.37f;
	double bc1 = 1 - pow(0.9, 3), bc2 = 1 - pow(0.95, 3);
	kn_adamw_update(p, NULL, m, v, g, scale, n, lr, 0.9f, 0.95f, 1e-8f, 0.1f, bc1, bc2);
	kc_ok(kc_adamw(0, dp, dm, dv, dg, copy, dt, n, lr, 0.9f, 0.95f, 1e-8f, 0.1f, bc1, bc2,
		      scale), "adamw");
	expect("adamw param", dt, dp, 1, p, n, 1e-6);
	expect("adamw m", dt, dm, 1, m, n, 1e-6);
	expect("adamw v", dt, dv, 1, v, n, 1e-6);
	if (copy)
		expect("adamw bf16 copy", dt, copy, 0, p, n, ROUND1);
	cudaFree(dp);
	cudaFree(dm);
	cudaFree(dv);
	cudaFree(dg);
	cudaFree(copy);
	free(p);
	free(m);
	free(v);
	free(g);
}
END_TEST

/* the sum of micro-batch gradients and its scaling: the CPU's bits, element by element */
START_TEST(test_kc_add_scale)
{
	size_t n = 100003;
	rng_state = SEED + 9;
	float *y = hrand(n, -1, 1, KC_F32), *x = hrand(n, -1e-3f, 1e-3f, KC_F32);
	float *dy = dup_dev(y, n, KC_F32), *dx = dup_dev(x, n, KC_F32);
	kn_add(y, x, n);
	kn_scale(y, 0.37f, n);
	kc_ok(kc_add(0, dy, dx, n), "add");
	kc_ok(kc_scale(0, dy, 0.37f, n), "scale");
	float *got = get_dev(dy, n, KC_F32);
	ck_assert_msg(memcmp(got, y, n * sizeof(float)) == 0, "kc_add + kc_scale differ from "
								 "kn_add + kn_scale");
	cudaFree(dy);
	cudaFree(dx);
	free(got);
	free(x);
	free(y);
}
END_TEST

START_TEST(test_kc_bf16_rounding)
{
	size_t n = 10007;
	rng_state = SEED + 8;
	float *x = hrand(n, -100, 100, KC_F32);
	float *dx = dup_dev(x, n, KC_F32);
	void *b = dev_zero(n * 2);
	kc_ok(kc_from_f32(0, KC_BF16, b, dx, n), "from_f32");
	kc_ok(kc_to_f32(0, KC_BF16, dx, b, n), "to_f32");
	float *y = get_dev(dx, n, KC_F32);
	for (size_t i = 0; i < n; i++) {
		float want = eng_bf16_to_f32(eng_bf16_from_f32(x[i]));
		ck_assert_msg(y[i] == want, "element %zu: device %a, host %a", i, (double)y[i],
			(double)want);
	}
	cudaFree(dx);
	cudaFree(b);
	free(x);
	free(y);
}
END_TEST

/* ---- host: how kc_gemm states a row-major product to cuBLASLt ---- */

typedef struct gemm_case {
	int ta, tb, M, N, K, lda;
	long long sA;
	int ldb;
	long long sB;
	int ldc;
	long long sC;
	int batch;
} gemm_case;

/* T 6, hs 4, C 8 (2 heads): the attention's products as kc_attn.cu states them, the
 * linear layers', and padded output rows as the head's logits */
static const gemm_case gemm_cases[] = {
	{0, 0, 5, 7, 3, 3, 0, 7, 0, 7, 0, 1},       /* y = x w */
	{0, 1, 5, 7, 3, 3, 0, 3, 0, 9, 0, 1},       /* dx = dy w^T, padded rows */
	{1, 0, 5, 7, 3, 5, 0, 7, 0, 7, 0, 1},       /* dw = x^T dy */
	{1, 1, 5, 7, 3, 6, 0, 4, 0, 8, 0, 1},
	{0, 1, 6, 6, 4, 24, 4, 24, 4, 6, 36, 2},    /* S = q k^T */
	{0, 0, 6, 4, 6, 6, 36, 24, 4, 8, 4, 2},     /* out = P v */
	{1, 0, 6, 4, 6, 6, 36, 8, 4, 24, 4, 2},     /* dv = P^T dy */
	{0, 1, 6, 6, 4, 8, 4, 24, 4, 6, 36, 2},     /* dP = dy v^T */
	{0, 0, 6, 4, 6, 6, 36, 24, 4, 24, 4, 2},    /* dq = dS k */
	{1, 0, 6, 4, 6, 6, 36, 24, 4, 24, 4, 2},    /* dk = dS^T q */
};

/* elements a row-major rows x cols matrix of row stride ld spans, batch times at stride s */
static size_t extent(int rows, int cols, int ld, long long s, int batch)
{
	return (size_t)(batch - 1) * (size_t)s + (size_t)(rows - 1) * ld + (size_t)cols;
}

START_TEST(test_kc_gemm_colmajor_mapping)
{
	const gemm_case *g = &gemm_cases[_i];
	kc_colmajor c;
	kc_gemm_colmajor(g->ta, g->tb, g->M, g->N, g->K, g->lda, g->sA, g->ldb, g->sB, g->ldc,
		g->sC, &c);
	/* what cuBLASLt requires of the layouts for its op(A)(m,k) op(B)(k,n) = D(m,n) */
	ck_assert_int_eq(c.op_a ? c.a_cols : c.a_rows, c.m);
	ck_assert_int_eq(c.op_a ? c.a_rows : c.a_cols, c.k);
	ck_assert_int_eq(c.op_b ? c.b_cols : c.b_rows, c.k);
	ck_assert_int_eq(c.op_b ? c.b_rows : c.b_cols, c.n);
	ck_assert_int_eq(c.c_rows, c.m);
	ck_assert_int_eq(c.c_cols, c.n);
	ck_assert(c.a_ld >= c.a_rows && c.b_ld >= c.b_rows && c.c_ld >= c.c_rows);
	rng_state = SEED + 9 + (uint64_t)_i;
	size_t na = extent(g->ta ? g->K : g->M, g->ta ? g->M : g->K, g->lda, g->sA, g->batch);
	size_t nb = extent(g->tb ? g->N : g->K, g->tb ? g->K : g->N, g->ldb, g->sB, g->batch);
	size_t nc = extent(g->M, g->N, g->ldc, g->sC, g->batch);
	float *A = hrand(na, -1, 1, KC_F32), *B = hrand(nb, -1, 1, KC_F32);
	double *want = calloc(nc, sizeof(double)), *got = calloc(nc, sizeof(double));
	ck_assert(want && got);
	for (int bi = 0; bi < g->batch; bi++) {
		const float *a = A + bi * g->sA, *b = B + bi * g->sB;
		/* row-major, as kn_sgemm means it */
		for (int r = 0; r < g->M; r++)
			for (int col = 0; col < g->N; col++) {
				double acc = 0;
				for (int p = 0; p < g->K; p++)
					acc += (double)(g->ta ? a[(size_t)p * g->lda + r]
							      : a[(size_t)r * g->lda + p]) *
					       (g->tb ? b[(size_t)col * g->ldb + p]
						      : b[(size_t)p * g->ldb + col]);
				want[bi * g->sC + (size_t)r * g->ldc + col] = acc;
			}
		/* column-major, as cuBLASLt means it, with A' = our B and B' = our A */
		const float *a2 = b, *b2 = a;
		for (int i = 0; i < c.m; i++)
			for (int j = 0; j < c.n; j++) {
				double acc = 0;
				for (int p = 0; p < c.k; p++)
					acc += (double)(c.op_a ? a2[p + (size_t)i * c.a_ld]
							       : a2[i + (size_t)p * c.a_ld]) *
					       (c.op_b ? b2[j + (size_t)p * c.b_ld]
						       : b2[p + (size_t)j * c.b_ld]);
				got[bi * c.c_stride + i + (size_t)j * c.c_ld] = acc;
			}
	}
	for (size_t i = 0; i < nc; i++)
		ck_assert_msg(fabs(got[i] - want[i]) <= 1e-12, "case %d element %zu: %g vs %g", _i, i,
			got[i], want[i]);
	ck_assert(c.a_stride == g->sB && c.b_stride == g->sA && c.c_stride == g->sC);
	free(A);
	free(B);
	free(want);
	free(got);
}
END_TEST

/* ---- the suite ---- */

Suite *suite_cuda_kernels(void)
{
	Suite *s = suite_create("cuda-kernels");
	char why[256];
	TCase *tc = tcase_create("host");
	tcase_add_loop_test(tc, test_kc_gemm_colmajor_mapping, 0,
		(int)(sizeof gemm_cases / sizeof gemm_cases[0]));
	suite_add_tcase(s, tc);
	if (!t_cuda_usable(why, sizeof why)) {
		fprintf(stderr, "cuda-kernels: GPU tests skipped: %s\n", why);
		return s;
	}
	tc = tcase_create("kernels");
	tcase_set_timeout(tc, TIMEOUT);
	/* _i: 0 float32, 1 bf16 */
	tcase_add_loop_test(tc, test_kc_encoder, 0, 2);
	tcase_add_loop_test(tc, test_kc_layernorm, 0, 2);
	tcase_add_loop_test(tc, test_kc_linear, 0, 2);
	tcase_add_loop_test(tc, test_kc_pointwise, 0, 2);
	tcase_add_loop_test(tc, test_kc_attention, 0, 2);
	tcase_add_loop_test(tc, test_kc_crossentropy, 0, 2);
	tcase_add_loop_test(tc, test_kc_adamw, 0, 2);
	tcase_add_test(tc, test_kc_sumsq);
	tcase_add_test(tc, test_kc_bf16_rounding);
	tcase_add_test(tc, test_kc_add_scale);
	suite_add_tcase(s, tc);
	return s;
}
