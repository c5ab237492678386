/* q4.c - bench-q4: products with a 4-bit weight (kn_q4_linear_*, tiles of at most 256
 * rows dequantized at a time) against dequantizing the whole weight once and one product,
 * on SmolLM-135M's linear shapes (C 576, the MLP's 1536) at N = B*T rows, computing in
 * float32 (sgemm) and, where oneDNN's bf16 runs, in bf16 (the tile and the whole weight
 * rounded, oneDNN's bf16 matmul; the activations rounded once beforehand, for both).
 *
 *   bench-q4 [N] [threads]        (defaults 1024 and 1)
 *
 * Per shape and direction (forward: out = x W^T; input gradient: dx = dy W), the median
 * of REPS runs of each way, their ratio, and the bytes each holds for W: the 4-bit codes
 * and absmaxes against the whole float32 copy. The last line is JSON. For `make bench`.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kn.h"

#define REPS 7

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static float *alloc_fill(size_t n, uint64_t *s)
{
	float *p = aligned_alloc(64, (n * sizeof *p + 63) / 64 * 64);
	for (size_t i = 0; p && i < n; i++) {
		*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
		p[i] = (float)((double)(*s >> 40) / (double)(1ULL << 24) - 0.5) * 0.04f;
	}
	return p;
}

/* The operands of one shape, W(OC, IC) quantized, N rows (a bench_case) */
typedef struct bench_case {
	int OC, IC, N;
	size_t nw;
	float *x, *dy, *y, *dx, *whole, *scratch, *absmax;
	uint16_t *xb, *dyb, *wb;   /* bf16: x and dy rounded, the whole weight rounded */
	uint8_t *codes;
	void *ws;                  /* oneDNN's scratchpad (bf16) */
	size_t ws_bytes;
	kn_q4_weight q;
} bench_case;

/* The whole weight's bf16 products: forward y = x W^T, backward dx = dy W */
static kn_mm whole_mm(const bench_case *b, int backward)
{
	int N = b->N, OC = b->OC, IC = b->IC;
	return backward ? (kn_mm){1, 0, 0, N, IC, OC, OC, IC, IC, 0, 0}
			: (kn_mm){1, 0, 1, N, OC, IC, IC, IC, OC, 0, 0};
}

static void case_free(bench_case *b)
{
	void *p[] = {b->x, b->dy, b->y, b->dx, b->whole, b->scratch, b->absmax, b->xb, b->dyb,
		b->wb, b->codes, b->ws};
	for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
		free(p[i]);
}

/* The operands of W(OC, IC) at N rows, W quantized to NF4 in blocks of 64; with bf16 the
 * rounded copies and oneDNN's scratchpad for both ways. 0, or -1 (out of memory, oneDNN). */
static int case_init(bench_case *b, int OC, int IC, int N, int bf16)
{
	uint64_t s = 1;
	memset(b, 0, sizeof *b);
	b->OC = OC, b->IC = IC, b->N = N, b->nw = (size_t)OC * IC;
	float *w = alloc_fill(b->nw, &s);
	b->x = alloc_fill((size_t)N * IC, &s);
	b->dy = alloc_fill((size_t)N * OC, &s);
	b->y = alloc_fill((size_t)N * OC, &s);
	b->dx = alloc_fill((size_t)N * IC, &s);
	b->whole = alloc_fill(b->nw, &s);
	b->scratch = alloc_fill(kn_q4_scratch_floats(IC, 64), &s);
	b->absmax = malloc(b->nw / 64 * sizeof *b->absmax);
	b->codes = malloc(b->nw / 2);
	if (!w || !b->x || !b->dy || !b->y || !b->dx || !b->whole || !b->scratch || !b->absmax ||
		!b->codes) {
		free(w);
		return -1;
	}
	kn_q4_quantize(w, b->nw, 64, KN_Q4_NF4, b->codes, b->absmax);
	free(w);
	b->q = (kn_q4_weight){b->codes, b->absmax, NULL, NULL, 0.0f, OC, IC, 64, KN_Q4_NF4};
	if (!bf16)
		return 0;
	kn_mm f = whole_mm(b, 0), g = whole_mm(b, 1);
	size_t a, c, d;
	b->xb = malloc(2 * (size_t)N * IC);
	b->dyb = malloc(2 * (size_t)N * OC);
	b->wb = malloc(2 * b->nw);
	if (!b->xb || !b->dyb || !b->wb || kn_q4_bf16_sizes(&b->q, N, OC, &a) < 0 ||
		kn_dnnl_sizes(&f, &c, NULL) < 0 || kn_dnnl_sizes(&g, &d, NULL) < 0)
		return -1;
	b->ws_bytes = a > c ? (a > d ? a : d) : (c > d ? c : d);
	if (!(b->ws = malloc(b->ws_bytes + 64)))
		return -1;
	kn_to_bf16(b->xb, b->x, (size_t)N * IC);
	kn_to_bf16(b->dyb, b->dy, (size_t)N * OC);
	return 0;
}

/* Way k of a case: 0 tiled forward, 1 whole forward, 2 tiled backward, 3 whole backward
 * (whole: the weight dequantized whole, rounded whole under bf16, one product). 0 or -1. */
static int run_way(bench_case *b, int k, int bf16)
{
	int N = b->N, OC = b->OC, IC = b->IC;
	if (k == 1 || k == 3)
		kn_q4_dequantize(b->codes, b->absmax, 0, b->nw, 64, KN_Q4_NF4, b->whole);
	if (!bf16) {
		if (k == 0)
			kn_q4_linear_forward(b->y, OC, b->x, &b->q, N, b->scratch);
		else if (k == 1)
			kn_sgemm(0, 1, N, OC, IC, 1.0f, b->x, IC, b->whole, IC, 0.0f, b->y, OC);
		else if (k == 2)
			kn_q4_linear_backward(b->dx, b->dy, OC, &b->q, N, 0, b->scratch);
		else
			kn_sgemm(0, 0, N, IC, OC, 1.0f, b->dy, OC, b->whole, IC, 0.0f, b->dx, IC);
		return 0;
	}
	kn_mm f = whole_mm(b, 0), g = whole_mm(b, 1);
	if (k == 1 || k == 3)
		kn_to_bf16(b->wb, b->whole, b->nw);
	switch (k) {
	case 0: return kn_q4_linear_forward_bf16(b->y, OC, b->xb, &b->q, N, b->scratch, b->ws,
			b->ws_bytes);
	case 1: return kn_dnnl_gemm(&f, b->xb, b->wb, b->y, b->ws, b->ws_bytes);
	case 2: return kn_q4_linear_backward_bf16(b->dx, b->dyb, OC, &b->q, N, 0, b->scratch,
			b->ws, b->ws_bytes);
	default: return kn_dnnl_gemm(&g, b->dyb, b->wb, b->dx, b->ws, b->ws_bytes);
	}
}

/* One shape: W(OC, IC), N rows; the medians of REPS runs of the four ways (run_way) into
 * ms[4]. 0, or -1 (out of memory, oneDNN). */
static int shape(int OC, int IC, int N, int bf16, double ms[4])
{
	bench_case b;
	double t[4][REPS];
	int rc = case_init(&b, OC, IC, N, bf16);
	for (int r = -1; rc == 0 && r < REPS; r++) /* r -1: the warm-up */
		for (int k = 0; rc == 0 && k < 4; k++) {
			double t0 = now_ms();
			rc = run_way(&b, k, bf16);
			if (r >= 0)
				t[k][r] = now_ms() - t0;
		}
	for (int k = 0; rc == 0 && k < 4; k++) {
		qsort(t[k], REPS, sizeof t[k][0], cmp_double);
		ms[k] = t[k][REPS / 2];
	}
	case_free(&b);
	return rc;
}

/* The table of one compute dtype over the shapes; its worst ratio into *worst. 0 or -1. */
static int table(int N, int bf16, double *worst)
{
	static const int shapes[][2] = {{576, 576}, {1536, 576}, {576, 1536}};
	printf("compute %s (%s):\n", bf16 ? "bf16" : "fp32", bf16 ? "oneDNN's bf16 matmul, "
		"the whole weight rounded once" : "sgemm");
	printf("%-12s %10s %10s %7s %10s %10s %7s %12s\n", "W (OC x IC)", "fwd q4", "fwd whole",
		"ratio", "bwd q4", "bwd whole", "ratio", "W bytes");
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		int OC = shapes[i][0], IC = shapes[i][1];
		double ms[4];
		if (shape(OC, IC, N, bf16, ms) < 0)
			return -1;
		size_t nw = (size_t)OC * IC;
		char name[32], bytes[48];
		snprintf(name, sizeof name, "%dx%d", OC, IC);
		snprintf(bytes, sizeof bytes, "%zu / %zu", nw / 2 + nw / 64 * 4,
			nw * (bf16 ? 2 : 4));
		printf("%-12s %8.2fms %8.2fms %6.2fx %8.2fms %8.2fms %6.2fx %s\n", name, ms[0],
			ms[1], ms[0] / ms[1], ms[2], ms[3], ms[2] / ms[3], bytes);
		for (int k = 0; k < 4; k += 2)
			*worst = ms[k] / ms[k + 1] > *worst ? ms[k] / ms[k + 1] : *worst;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int N = argc > 1 ? atoi(argv[1]) : 1024, threads = argc > 2 ? atoi(argv[2]) : 1;
	double worst = 0.0, worst_bf = 0.0;
	char why[160];
	if (N < 1 || threads < 1) {
		fprintf(stderr, "usage: bench-q4 [N] [threads]\n");
		return 2;
	}
	kn_fix_runtime(argv);
	kn_set_threads(threads);
	int bf = kn_bf16_available(why, sizeof why);
	printf("bench-q4: N %d, %d thread(s), %s; NF4, blocks of 64; median of %d\n", N, threads,
		kn_blas_describe(), REPS);
	if (table(N, 0, &worst) < 0) {
		fprintf(stderr, "bench-q4: out of memory\n");
		return 1;
	}
	if (bf && table(N, 1, &worst_bf) < 0) {
		fprintf(stderr, "bench-q4: %s\n", kn_bf16_error());
		return 1;
	}
	char bfw[48] = "";
	if (bf)
		snprintf(bfw, sizeof bfw, ", %.2fx bf16", worst_bf);
	else
		printf("compute bf16: skipped: %s\n", why);
	printf("%s the tiled products within 10 %% of dequantizing whole and one product (worst "
		"%.2fx fp32%s)\n", worst <= 1.10 && worst_bf <= 1.10 ? "PASS" : "MISS", worst,
		bfw);
	printf("{\"N\": %d, \"threads\": %d, \"worst_ratio\": %.4f, \"worst_ratio_bf16\": %.4f}\n",
		N, threads, worst, bf ? worst_bf : -1.0);
	return 0;
}
