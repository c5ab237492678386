/* sgemm.c - bench-sgemm: the float32 matmul ceiling on a model's products, run as the
 * engine runs them.
 *
 *   bench-sgemm [preset|L,C,NH,P,V] [batch] [seq_len] [threads]
 *               [--lib openblas|blis|dnnl|dnnl-matmul]
 *
 * Times every product one training step of the model makes (the engine's table,
 * eng_model_products: forward and the two backward products of each linear layer, the
 * lm_head's in the engine's chunks), each the median of several runs, and prints GFLOP/s
 * per product and the FLOP-weighted ceiling: the speed a step would reach if it were
 * nothing but these products. Without --lib each product goes where the engine sends it
 * (OpenBLAS, or oneDNN's matmul primitive for the head's logits and dlnf, dlnf with wte
 * packed: that packing, once a step, is timed and counted in the ceiling). With --lib all
 * of them go to one library: openblas (kn_sgemm), BLIS (Debian's libblis4-openmp) or
 * oneDNN's dnnl_sgemm (libdnnl2), those two opened with dlopen so that their cblas_sgemm
 * never clashes with OpenBLAS's; dnnl-matmul is oneDNN's matmul primitive with plain
 * layouts. For `make bench` and `make bench-blas`. OpenBLAS's kernel is chosen as
 * remat-train chooses it (kn_fix_runtime: the strongest for the processor, passive OpenMP
 * waits), so that the ceiling is the one remat's steps run against.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eng_config.h"
#include "eng_mem.h"
#include "eng_model.h"
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

/* the library under test: the engine's routes unless --lib names one */
typedef void (*cblas_fn)(int, int, int, int, int, int, float, const float *, int,
	const float *, int, float, float *, int);
typedef int (*dnnl_fn)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t,
	const float *, int64_t, float, float *, int64_t);
static cblas_fn lib_cblas;
static dnnl_fn lib_dnnl;
static int lib_force = -1;  /* --lib openblas or dnnl-matmul: that route for every product */
static void *mm_scratch;    /* oneDNN's scratchpads, grown to the largest */
static size_t mm_scratch_bytes;
static char lib_desc[192];

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
	if (strcmp(name, "openblas") == 0) {
		lib_force = ENG_ROUTE_OPENBLAS;
		snprintf(lib_desc, sizeof lib_desc, "%s", kn_blas_describe());
		return 0;
	}
	if (strcmp(name, "dnnl-matmul") == 0) {
		lib_force = ENG_ROUTE_DNNL;
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
	fprintf(stderr, "bench-sgemm: --lib takes openblas, blis, dnnl or dnnl-matmul, not "
		"'%s'\n", name);
	return -1;
fail:
	fprintf(stderr, "bench-sgemm: cannot use %s: %s\n", name, dlerror());
	return -1;
}

/* Product p once, by route (packed: B already packed), beta as the table has it. CBLAS
 * enum values: row-major 101, no-trans 111, trans 112, the same in every cblas.h. */
static int product(const kn_mm *q, int route, const float *A, const float *B,
	const void *packed, float *C)
{
	if (lib_cblas)
		lib_cblas(101, q->ta ? 112 : 111, q->tb ? 112 : 111, q->M, q->N, q->K, 1.0f, A,
			q->lda, B, q->ldb, (float)q->beta, C, q->ldc);
	else if (lib_dnnl)
		lib_dnnl(q->ta ? 'T' : 'N', q->tb ? 'T' : 'N', q->M, q->N, q->K, 1.0f, A, q->lda, B,
			q->ldb, (float)q->beta, C, q->ldc);
	else if (route == ENG_ROUTE_OPENBLAS)
		kn_sgemm(q->ta, q->tb, q->M, q->N, q->K, 1.0f, A, q->lda, B, q->ldb,
			(float)q->beta, C, q->ldc);
	else if (kn_dnnl_gemm(q, A, route == ENG_ROUTE_PACKED ? packed : B, C, mm_scratch,
			 mm_scratch_bytes) < 0) {
		fprintf(stderr, "bench-sgemm: %s\n", kn_bf16_error());
		return -1;
	}
	return 0;
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

/* A oneDNN product's scratchpad (grown to the largest) and packed B (*packed, *pbytes); -1
 * said */
static int fit_dnnl(const kn_mm *q, void **packed, size_t *pbytes)
{
	size_t need, pk;
	if (kn_dnnl_sizes(q, &need, &pk) < 0) {
		fprintf(stderr, "bench-sgemm: %s\n", kn_bf16_error());
		return -1;
	}
	if (need > mm_scratch_bytes) {
		eng_mem_free(mm_scratch);
		mm_scratch = eng_mem_alloc(ENG_MEM_WORKSPACE, need);
		mm_scratch_bytes = mm_scratch ? need : 0;
	}
	if (q->packed && pk > *pbytes) {
		eng_mem_free(*packed);
		*packed = eng_mem_alloc(ENG_MEM_WORKSPACE, pk);
		*pbytes = *packed ? pk : 0;
	}
	if ((need && !mm_scratch) || (q->packed && !*packed)) {
		fprintf(stderr, "bench-sgemm: out of memory for oneDNN\n");
		return -1;
	}
	return 0;
}

/* The median of REPS runs of product q (after one warm-up), or of its B's packing (pack);
 * -1 on failure */
static double median_s(const kn_mm *q, int route, int pack, const float *A, const float *B,
	void *packed, size_t pbytes, float *C)
{
	double t[REPS];
	for (int r = -1; r < REPS; r++) {
		double t0 = now_s();
		if (pack ? kn_dnnl_pack(q, B, packed, pbytes) < 0 :
			   product(q, route, A, B, packed, C) < 0)
			return -1;
		if (r >= 0)
			t[r] = now_s() - t0;
	}
	qsort(t, REPS, sizeof t[0], cmp);
	return t[REPS / 2];
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
	int L = cfg.n_layer, R = eng_plan_chunk_rows(&cfg, B, T);
	eng_product pr[ENG_PRODUCTS];
	int n = eng_model_products(&cfg, B, T, R, lib ? 0 : eng_model_route_flags(&cfg), pr);
	size_t maxf = 0, pbytes = 0;
	void *packed = NULL;
	for (int i = 0; i < n; i++) {
		const kn_mm *q = &pr[i].mm;
		size_t a = (size_t)q->M * q->K, b = (size_t)q->K * q->N, c = (size_t)q->M * q->N;
		maxf = a > maxf ? a : maxf;
		maxf = b > maxf ? b : maxf;
		maxf = c > maxf ? c : maxf;
		if (lib_force >= 0)
			pr[i].route = lib_force;
		pr[i].mm.packed = pr[i].route == ENG_ROUTE_PACKED;
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
		Cm[i] = 0.0f;
	}
	printf("%s, batch %d x %d, %d threads; %s\n", preset, B, T, threads,
		lib ? lib_desc : "as the engine runs them: OpenBLAS, oneDNN where marked");
	printf("%-26s %-9s %8s %8s %8s %10s\n", "product", "by", "M", "N", "K", "GFLOP/s");
	static const char *const by[] = {"OpenBLAS", "oneDNN", "oneDNN-p"};
	double total_flops = 0, total_s = 0;
	for (int i = 0; i < n; i++) {
		const kn_mm *q = &pr[i].mm;
		int route = pr[i].route;
		if (route != ENG_ROUTE_OPENBLAS && !lib_cblas && !lib_dnnl &&
			fit_dnnl(q, &packed, &pbytes) < 0)
			return 1;
		if (route == ENG_ROUTE_PACKED) { /* once a step, after the optimizer */
			double ps = median_s(q, route, 1, A, Bm, packed, pbytes, Cm);
			if (ps < 0)
				return 1;
			printf("%-26s %-9s %8s %8d %8d %8.1f ms\n", "  (packing its B)", "oneDNN", "",
				q->N, q->K, ps * 1e3);
			total_s += ps;
		}
		double t = median_s(q, route, 0, A, Bm, packed, pbytes, Cm);
		if (t < 0)
			return 1;
		double flops = 2.0 * q->M * q->N * q->K;
		printf("%-26s %-9s %8d %8d %8d %10.1f\n", pr[i].name, lib ? "" : by[route], q->M,
			q->N, q->K, flops / t / 1e9);
		total_flops += flops * pr[i].count;
		total_s += t * pr[i].count;
	}
	printf("ceiling (FLOP-weighted over one step's products): %.1f GFLOP/s\n",
		total_flops / total_s / 1e9);
	eng_policy off;
	eng_plan plan;
	eng_policy_init(&off, L);
	eng_plan_policy(&cfg, B, T, R, &off, &plan);
	printf("{\"library\":\"%s\",\"preset\":\"%s\",\"batch\":%d,\"seq_len\":%d,\"threads\":%d,"
	       "\"ceiling_gflops\":%.2f,\"model_flops\":%.6g}\n",
		lib ? lib : "engine", preset, B, T, threads, total_flops / total_s / 1e9,
		plan.model_flops);
	eng_mem_free(mm_scratch);
	eng_mem_free(packed);
	eng_mem_free(A);
	eng_mem_free(Bm);
	eng_mem_free(Cm);
	return 0;
}
