/* sgemm.c - bench-sgemm: the matmul ceiling on a model's shapes, through kn_sgemm.
 *
 *   bench-sgemm [preset] [batch] [seq_len] [threads]
 *
 * Times every product one training step of the model makes (forward, and the two
 * backward products of each linear layer, the lm_head in the engine's chunks), each the
 * median of several runs, and prints GFLOP/s per shape and the FLOP-weighted ceiling: the
 * speed a step would reach if it were nothing but these products. A benchmark for
 * `make bench`; the library and kernel are the ones kn_blas_describe names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eng_config.h"
#include "eng_mem.h"
#include "eng_plan.h"
#include "kn.h"

#define REPS 5 /* timed runs per shape (after one warm-up) */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

typedef struct shape {
	const char *what;
	int ta, tb, M, N, K;
	int times;   /* how often one step makes this product */
} shape;

int main(int argc, char **argv)
{
	const char *preset = argc > 1 ? argv[1] : "gpt2-small";
	int B = argc > 2 ? atoi(argv[2]) : 4, T = argc > 3 ? atoi(argv[3]) : 256;
	int threads = argc > 4 ? atoi(argv[4]) : 2;
	eng_config cfg;
	eng_err err;
	if (eng_config_preset(preset, &cfg, &err) < 0 || B < 1 || T < 1) {
		fprintf(stderr, "bench-sgemm: %s\n", err.msg);
		return 2;
	}
	kn_set_threads(threads);
	int N = B * T, C = cfg.n_embd, V = cfg.vocab_size, L = cfg.n_layer;
	int R = eng_plan_chunk_rows(&cfg, B, T), chunks = (N + R - 1) / R;
	shape sh[] = {
		{"qkv fwd      N x C . C x 3C", 0, 0, N, 3 * C, C, L},
		{"qkv dinp     N x 3C . (C x 3C)^T", 0, 1, N, C, 3 * C, L},
		{"qkv dW       (N x C)^T . N x 3C", 1, 0, C, 3 * C, N, L},
		{"proj fwd     N x C . C x C", 0, 0, N, C, C, L},
		{"proj dinp", 0, 1, N, C, C, L},
		{"proj dW", 1, 0, C, C, N, L},
		{"fc fwd       N x C . C x 4C", 0, 0, N, 4 * C, C, L},
		{"fc dinp", 0, 1, N, C, 4 * C, L},
		{"fc dW", 1, 0, C, 4 * C, N, L},
		{"fcproj fwd   N x 4C . 4C x C", 0, 0, N, C, 4 * C, L},
		{"fcproj dinp", 0, 1, N, 4 * C, C, L},
		{"fcproj dW", 1, 0, 4 * C, C, N, L},
		{"head fwd     R x C . (V x C)^T", 0, 1, R, V, C, chunks},
		{"head dinp    R x V . V x C", 0, 0, R, C, V, chunks},
		{"head dW      (R x V)^T . R x C", 1, 0, V, C, R, chunks},
	};
	int nsh = (int)(sizeof sh / sizeof sh[0]);
	size_t maxf = 0;
	for (int i = 0; i < nsh; i++) {
		size_t a = (size_t)sh[i].M * sh[i].K, b = (size_t)sh[i].K * sh[i].N,
		       c = (size_t)sh[i].M * sh[i].N;
		maxf = a > maxf ? a : maxf;
		maxf = b > maxf ? b : maxf;
		maxf = c > maxf ? c : maxf;
	}
	float *A = eng_mem_alloc(ENG_MEM_WORKSPACE, maxf * 4);
	float *Bm = eng_mem_alloc(ENG_MEM_WORKSPACE, maxf * 4);
	float *Cm = eng_mem_alloc(ENG_MEM_WORKSPACE, maxf * 4);
	if (!A || !Bm || !Cm) {
		fprintf(stderr, "bench-sgemm: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < maxf; i++) {
		A[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
		Bm[i] = (float)((i * 104729) % 1000) * 1e-3f - 0.5f;
	}
	printf("%s, batch %d x %d, %d threads; %s\n", preset, B, T, threads, kn_blas_describe());
	printf("%-36s %8s %8s %8s %10s\n", "product", "M", "N", "K", "GFLOP/s");
	double total_flops = 0, total_s = 0;
	for (int i = 0; i < nsh; i++) {
		const shape *s = &sh[i];
		int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
		double t[REPS];
		kn_sgemm(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, Bm, ldb, 0.0f, Cm, s->N);
		for (int r = 0; r < REPS; r++) {
			double t0 = now_s();
			kn_sgemm(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, Bm, ldb, 0.0f, Cm,
				s->N);
			t[r] = now_s() - t0;
		}
		qsort(t, REPS, sizeof t[0], cmp);
		double flops = 2.0 * s->M * s->N * s->K;
		printf("%-36s %8d %8d %8d %10.1f\n", s->what, s->M, s->N, s->K, flops / t[REPS / 2] / 1e9);
		total_flops += flops * s->times;
		total_s += t[REPS / 2] * s->times;
	}
	printf("ceiling (FLOP-weighted over one step's products): %.1f GFLOP/s\n",
		total_flops / total_s / 1e9);
	eng_policy off;
	eng_plan plan;
	eng_policy_init(&off, L);
	eng_plan_policy(&cfg, B, T, R, &off, &plan);
	printf("{\"preset\":\"%s\",\"batch\":%d,\"seq_len\":%d,\"threads\":%d,"
	       "\"ceiling_gflops\":%.2f,\"model_flops\":%.6g}\n",
		preset, B, T, threads, total_flops / total_s / 1e9, plan.model_flops);
	eng_mem_free(A);
	eng_mem_free(Bm);
	eng_mem_free(Cm);
	return 0;
}
