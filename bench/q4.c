/* q4.c - bench-q4: products with a 4-bit weight (kn_q4_linear_*, tiles of at most 256
 * rows dequantized at a time) against dequantizing the whole weight once and one sgemm, on
 * SmolLM-135M's linear shapes (C 576, the MLP's 1536) at N = B*T rows.
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

/* One shape: W(OC, IC), N rows; the medians of the two ways, forward and backward, into
 * ms[4] (q4 fwd, whole fwd, q4 bwd, whole bwd). 0, or -1 out of memory. */
static int shape(int OC, int IC, int N, double ms[4])
{
	uint64_t s = 1;
	size_t nw = (size_t)OC * IC;
	float *w = alloc_fill(nw, &s), *x = alloc_fill((size_t)N * IC, &s);
	float *dy = alloc_fill((size_t)N * OC, &s), *y = alloc_fill((size_t)N * OC, &s);
	float *dx = alloc_fill((size_t)N * IC, &s), *whole = alloc_fill(nw, &s);
	float *scratch = alloc_fill(kn_q4_scratch_floats(IC, 64), &s);
	float *absmax = malloc(nw / 64 * sizeof *absmax);
	uint8_t *codes = malloc(nw / 2);
	double t[4][REPS];
	int rc = -1;
	if (!w || !x || !dy || !y || !dx || !whole || !scratch || !absmax || !codes)
		goto out;
	kn_q4_quantize(w, nw, 64, KN_Q4_NF4, codes, absmax);
	kn_q4_weight q = {codes, absmax, NULL, NULL, 0.0f, OC, IC, 64, KN_Q4_NF4};
	for (int r = -1; r < REPS; r++) { /* r -1: the warm-up */
		double t0 = now_ms();
		kn_q4_linear_forward(y, OC, x, &q, N, scratch);
		double t1 = now_ms();
		kn_q4_dequantize(codes, absmax, 0, nw, 64, KN_Q4_NF4, whole);
		kn_sgemm(0, 1, N, OC, IC, 1.0f, x, IC, whole, IC, 0.0f, y, OC);
		double t2 = now_ms();
		kn_q4_linear_backward(dx, dy, OC, &q, N, 0, scratch);
		double t3 = now_ms();
		kn_q4_dequantize(codes, absmax, 0, nw, 64, KN_Q4_NF4, whole);
		kn_sgemm(0, 0, N, IC, OC, 1.0f, dy, OC, whole, IC, 0.0f, dx, IC);
		double t4 = now_ms();
		if (r < 0)
			continue;
		t[0][r] = t1 - t0;
		t[1][r] = t2 - t1;
		t[2][r] = t3 - t2;
		t[3][r] = t4 - t3;
	}
	for (int k = 0; k < 4; k++) {
		qsort(t[k], REPS, sizeof t[k][0], cmp_double);
		ms[k] = t[k][REPS / 2];
	}
	rc = 0;
out:
	free(w);
	free(x);
	free(dy);
	free(y);
	free(dx);
	free(whole);
	free(scratch);
	free(absmax);
	free(codes);
	return rc;
}

int main(int argc, char **argv)
{
	int N = argc > 1 ? atoi(argv[1]) : 1024, threads = argc > 2 ? atoi(argv[2]) : 1;
	static const int shapes[][2] = {{576, 576}, {1536, 576}, {576, 1536}};
	double worst = 0.0;
	if (N < 1 || threads < 1) {
		fprintf(stderr, "usage: bench-q4 [N] [threads]\n");
		return 2;
	}
	kn_fix_runtime(argv);
	kn_set_threads(threads);
	printf("bench-q4: N %d, %d thread(s), %s; NF4, blocks of 64; median of %d\n", N, threads,
		kn_blas_describe(), REPS);
	printf("%-12s %10s %10s %7s %10s %10s %7s %12s\n", "W (OC x IC)", "fwd q4", "fwd whole",
		"ratio", "bwd q4", "bwd whole", "ratio", "W bytes");
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		int OC = shapes[i][0], IC = shapes[i][1];
		double ms[4];
		if (shape(OC, IC, N, ms) < 0) {
			fprintf(stderr, "bench-q4: out of memory\n");
			return 1;
		}
		size_t nw = (size_t)OC * IC;
		char name[32], bytes[48];
		snprintf(name, sizeof name, "%dx%d", OC, IC);
		snprintf(bytes, sizeof bytes, "%zu / %zu", nw / 2 + nw / 64 * 4, nw * 4);
		printf("%-12s %8.2fms %8.2fms %6.2fx %8.2fms %8.2fms %6.2fx %s\n", name, ms[0],
			ms[1], ms[0] / ms[1], ms[2], ms[3], ms[2] / ms[3], bytes);
		if (ms[0] / ms[1] > worst)
			worst = ms[0] / ms[1];
		if (ms[2] / ms[3] > worst)
			worst = ms[2] / ms[3];
	}
	printf("%s the tiled products within 10 %% of dequantizing whole and one sgemm (worst "
		"%.2fx)\n", worst <= 1.10 ? "PASS" : "MISS", worst);
	printf("{\"N\": %d, \"threads\": %d, \"worst_ratio\": %.4f}\n", N, threads, worst);
	return 0;
}
