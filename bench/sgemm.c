/* sgemm.c - bench-sgemm: the matmul ceiling on a model's shapes, through kn_sgemm.
 *
 *   bench-sgemm [preset|L,C,NH,P,V] [batch] [seq_len] [threads] [--lib blis|dnnl|dnnl-matmul]
 *
 * With --lib the same products go through another library, opened with dlopen so that its
 * cblas_sgemm never clashes with OpenBLAS's: BLIS (Debian's libblis4-openmp) or oneDNN's
 * dnnl_sgemm (libdnnl2); dnnl-matmul is oneDNN's matmul primitive in float32 (plain
 * layouts, kn_sgemm_dnnl). For `make bench-blas`, which compares them with OpenBLAS.
 *
 * Times every product one training step of the model makes (forward, and the two
 * backward products of each linear layer, the lm_head in the engine's chunks), each the
 * median of several runs, and prints GFLOP/s per shape and the FLOP-weighted ceiling: the
 * speed a step would reach if it were nothing but these products. A benchmark for
 * `make bench`; the library and kernel are the ones kn_blas_describe names, chosen as
 * remat-train chooses them (kn_fix_runtime: OpenBLAS's strongest kernel for the processor,
 * passive OpenMP waits), so that the ceiling is the one remat's steps run against.
 */
#include <dlfcn.h>
#include <stdint.h>
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

/* the library under test: kn_sgemm unless --lib names another */
typedef void (*cblas_fn)(int, int, int, int, int, int, float, const float *, int,
	const float *, int, float, float *, int);
typedef int (*dnnl_fn)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t,
	const float *, int64_t, float, float *, int64_t);
static cblas_fn lib_cblas;
static dnnl_fn lib_dnnl;
static int lib_matmul;      /* --lib dnnl-matmul */
static void *mm_scratch;    /* its scratchpads, grown to the largest */
static size_t mm_scratch_bytes;
static char lib_desc[128];

#define BLIS_SO "/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4"
#define DNNL_SO "libdnnl.so.2"

static int open_lib(const char *name, int threads)
{
	void *h;
	if (strcmp(name, "blis") == 0) {
		h = dlopen(BLIS_SO, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
		if (!h || !(lib_cblas = (cblas_fn)dlsym(h, "cblas_sgemm")))
			goto fail;
		void (*set)(long) = (void (*)(long))dlsym(h, "bli_thread_set_num_threads");
		if (set)
			set(threads);
		snprintf(lib_desc, sizeof lib_desc, "BLIS (%s)", BLIS_SO);
		return 0;
	}
	if (strcmp(name, "dnnl-matmul") == 0) {
		lib_matmul = 1;
		snprintf(lib_desc, sizeof lib_desc, "oneDNN matmul primitive, float32 (%s)",
			kn_bf16_describe());
		return 0;
	}
	if (strcmp(name, "dnnl") == 0) {
		h = dlopen(DNNL_SO, RTLD_NOW | RTLD_LOCAL);
		if (!h || !(lib_dnnl = (dnnl_fn)dlsym(h, "dnnl_sgemm")))
			goto fail;
		snprintf(lib_desc, sizeof lib_desc, "oneDNN dnnl_sgemm (%s)", DNNL_SO);
		return 0;
	}
	fprintf(stderr, "bench-sgemm: --lib takes blis, dnnl or dnnl-matmul, not '%s'\n", name);
	return -1;
fail:
	fprintf(stderr, "bench-sgemm: cannot use %s: %s\n", name, dlerror());
	return -1;
}

/* CBLAS enum values (row-major 101, no-trans 111, trans 112), the same in every cblas.h */
static void sgemm(int ta, int tb, int M, int N, int K, const float *A, int lda,
	const float *B, int ldb, float *C, int ldc)
{
	if (lib_cblas)
		lib_cblas(101, ta ? 112 : 111, tb ? 112 : 111, M, N, K, 1.0f, A, lda, B, ldb, 0.0f,
			C, ldc);
	else if (lib_dnnl)
		lib_dnnl(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
	else if (lib_matmul)
		kn_sgemm_dnnl(ta, tb, M, N, K, A, lda, B, ldb, 0.0f, C, ldc, mm_scratch,
			mm_scratch_bytes);
	else
		kn_sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
}

/* A preset's name, or a shape written L,C,NH,P,V (n_layer, n_embd, n_head, n_positions,
 * vocab_size): the shapes the benchmarks compare that no preset has. */
static int parse_shape(const char *name, eng_config *cfg, eng_err *err)
{
	char end;
	if (!strchr(name, ','))
		return eng_config_preset(name, cfg, err);
	memset(cfg, 0, sizeof *cfg);
	if (sscanf(name, "%d,%d,%d,%d,%d%c", &cfg->n_layer, &cfg->n_embd, &cfg->n_head,
		    &cfg->n_positions, &cfg->vocab_size, &end) != 5)
		return eng_errf(err, "shape '%.64s': expected L,C,NH,P,V", name);
	return eng_config_validate(cfg, "shape", err);
}

typedef struct shape {
	const char *what;
	int ta, tb, M, N, K;
	int times;   /* how often one step makes this product */
} shape;

/* --lib dnnl-matmul: a scratchpad for product s, grown to the largest; -1 said */
static int fit_scratch(const shape *s, int lda, int ldb)
{
	long need = kn_dnnl_scratch(0, s->ta, s->tb, s->M, s->N, s->K, lda, ldb, s->N, 0.0f);
	if (need < 0) {
		fprintf(stderr, "bench-sgemm: %s\n", kn_bf16_error());
		return -1;
	}
	if ((size_t)need <= mm_scratch_bytes)
		return 0;
	eng_mem_free(mm_scratch);
	mm_scratch = eng_mem_alloc(ENG_MEM_WORKSPACE, (size_t)need);
	mm_scratch_bytes = mm_scratch ? (size_t)need : 0;
	if (!mm_scratch)
		fprintf(stderr, "bench-sgemm: out of memory for a scratchpad\n");
	return mm_scratch ? 0 : -1;
}

int main(int argc, char **argv)
{
	const char *preset = argc > 1 ? argv[1] : "gpt2-small";
	int B = argc > 2 ? atoi(argv[2]) : 4, T = argc > 3 ? atoi(argv[3]) : 256;
	int threads = argc > 4 ? atoi(argv[4]) : 2;
	const char *lib = argc > 6 && strcmp(argv[5], "--lib") == 0 ? argv[6] : NULL;
	eng_config cfg;
	eng_err err = {0};
	kn_fix_runtime(argv); /* remat-train's kernel and waits: may restart this program */
	if (parse_shape(preset, &cfg, &err) < 0 || B < 1 || T < 1) {
		fprintf(stderr, "bench-sgemm: %s\n", err.msg[0] ? err.msg : "batch and seq_len "
									      "must be positive");
		return 2;
	}
	kn_set_threads(threads);
	if (lib && open_lib(lib, threads) < 0)
		return 2;
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
	printf("%s, batch %d x %d, %d threads; %s\n", preset, B, T, threads,
		lib ? lib_desc : kn_blas_describe());
	printf("%-36s %8s %8s %8s %10s\n", "product", "M", "N", "K", "GFLOP/s");
	double total_flops = 0, total_s = 0;
	for (int i = 0; i < nsh; i++) {
		const shape *s = &sh[i];
		int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
		double t[REPS];
		if (lib_matmul && fit_scratch(s, lda, ldb) < 0)
			return 1;
		sgemm(s->ta, s->tb, s->M, s->N, s->K, A, lda, Bm, ldb, Cm, s->N);
		for (int r = 0; r < REPS; r++) {
			double t0 = now_s();
			sgemm(s->ta, s->tb, s->M, s->N, s->K, A, lda, Bm, ldb, Cm, s->N);
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
	printf("{\"library\":\"%s\",\"preset\":\"%s\",\"batch\":%d,\"seq_len\":%d,\"threads\":%d,"
	       "\"ceiling_gflops\":%.2f,\"model_flops\":%.6g}\n",
		lib ? lib : "openblas", preset, B, T, threads, total_flops / total_s / 1e9, plan.model_flops);
	eng_mem_free(mm_scratch);
	eng_mem_free(A);
	eng_mem_free(Bm);
	eng_mem_free(Cm);
	return 0;
}
