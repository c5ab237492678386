/* kn_bf16.c - bfloat16 matmuls on the CPU through oneDNN's matmul primitive, and the
 * rounding to bf16 around them (precision "bf16", kn.h).
 *
 * Legend: M, N, K the product's dimensions; op(X) = X or X^T by flag; every matrix
 * row-major with its row stride (lda, ldb, ldc), as kn_sgemm.
 *
 * C(M,N) = op(A)(M,K) op(B)(K,N) [+ C], A and B bf16, C float32: the products of bf16
 * values are exact in float32 and oneDNN sums them in float32 (its brgemm kernels: AMX
 * tiles where the processor has them, AVX512-BF16 dot products otherwise). A transpose is
 * a memory descriptor's strides, never a copy of ours; beta 1 is oneDNN's sum post-op.
 *
 * One primitive per shape (transposes, dimensions, strides, beta, thread count), made on
 * first use and kept in a table that only grows: oneDNN's JIT and its choice of blocking
 * happen once. The products run on the training thread alone (one stream); the table's
 * lock is never held while one runs.
 * Scratchpads are the caller's (user mode): kn_dnnl_scratch says how much a shape
 * needs, so the engine counts that memory as its workspace instead of oneDNN mallocing it
 * behind every call. Determinism: oneDNN (OpenMP runtime, the engine's thread count)
 * partitions a product by its shape and thread count alone and sums each output in one
 * order; the same shape on buffers of the same alignment gives the same bits, which the
 * engine's "every policy, the same numbers" rests on (tests/unit/test_model.c checks it).
 * What pins it: the thread count in the key (a new count makes new primitives), the
 * engine's 64-byte-aligned buffers, and the strict fpmath mode set on every primitive.
 *
 * The same primitives in float32 (kn_sgemm_dnnl) serve bench-sgemm's comparison of
 * matmul libraries; the engine's float32 products stay OpenBLAS's (kn_sgemm), which that
 * comparison keeps choosing.
 *
 * Built with oneDNN's headers (Debian's libdnnl-dev) when REMAT_DNNL is defined; without
 * them every call says why not.
 */
#include "kn.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#ifdef REMAT_DNNL
#include <dnnl.h>
#include <dnnl_debug.h>
#endif

static _Thread_local char bf16_err[256]; /* each thread's last failure */

const char *kn_bf16_error(void)
{
	return bf16_err;
}

/* dst(n) = src(n) rounded to bf16, to nearest, ties to even; NaN stays NaN (quiet) */
void kn_to_bf16(uint16_t *dst, const float *src, size_t n)
{
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++) {
		uint32_t b;
		memcpy(&b, &src[i], sizeof b);
		if ((b & 0x7fffffffu) > 0x7f800000u)
			dst[i] = (uint16_t)((b >> 16) | 0x0040u);
		else
			dst[i] = (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
	}
}

#ifdef REMAT_DNNL

#define BF16_CACHE 96 /* shapes kept: a model makes at most 18 (eng_model.c) */

typedef struct bf16_key {
	int f32, ta, tb, M, N, K, lda, ldb, ldc, beta, threads; /* f32: float32 operands */
} bf16_key;

typedef struct bf16_prim {
	bf16_key key;
	dnnl_primitive_t prim;
	size_t scratch; /* bytes of its user scratchpad */
	dnnl_memory_desc_t a, b, c, s;
} bf16_prim;

static pthread_mutex_t bf16_lock = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t bf16_engine;
static dnnl_stream_t bf16_stream;
static bf16_prim bf16_cache[BF16_CACHE];
static int bf16_n;
static _Atomic int bf16_ok = -1; /* -1: not asked yet; read without the lock once known */
static char bf16_desc[160], bf16_why[320];

static int fail(const char *what, dnnl_status_t s)
{
	snprintf(bf16_err, sizeof bf16_err, "oneDNN: %s: %s", what, dnnl_status2str(s));
	return -1;
}

/* oneDNN's CPU engine (for either type), then native bf16 (AVX512-BF16, or AMX) as oneDNN
 * sees it: ONEDNN_MAX_CPU_ISA lowers it. 1 when bf16 serves. */
static int bf16_start(void)
{
	dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
	const dnnl_version_t *v = dnnl_version();
	snprintf(bf16_desc, sizeof bf16_desc, "oneDNN %d.%d.%d, %s", v->major, v->minor, v->patch,
		dnnl_cpu_isa2str(isa));
	dnnl_status_t s = dnnl_engine_create(&bf16_engine, dnnl_cpu, 0);
	if (s == dnnl_success)
		s = dnnl_stream_create(&bf16_stream, bf16_engine, dnnl_stream_default_flags);
	if (s != dnnl_success) {
		if (bf16_engine)
			dnnl_engine_destroy(bf16_engine);
		bf16_engine = NULL;
		snprintf(bf16_why, sizeof bf16_why, "oneDNN: cannot start its CPU engine: %s",
			dnnl_status2str(s));
		return 0;
	}
	if ((isa & dnnl_cpu_isa_avx512_core_bf16) != dnnl_cpu_isa_avx512_core_bf16) {
		snprintf(bf16_why, sizeof bf16_why, "this processor has no bf16 matmul instructions "
			"as %.150s sees it (it needs AVX512-BF16 or AMX; ONEDNN_MAX_CPU_ISA may hide "
			"them)", bf16_desc);
		return 0;
	}
	return 1;
}

int kn_bf16_available(char *why, size_t n)
{
	if (bf16_ok < 0) { /* once: every product asks */
		pthread_mutex_lock(&bf16_lock);
		if (bf16_ok < 0)
			bf16_ok = bf16_start();
		pthread_mutex_unlock(&bf16_lock);
	}
	int ok = bf16_ok;
	if (!ok && why)
		snprintf(why, n, "%s", bf16_why);
	return ok;
}

const char *kn_bf16_describe(void)
{
	kn_bf16_available(NULL, 0);
	return bf16_desc;
}

/* An (rows x cols) matrix of type dt stored row-major with stride ld, seen transposed
 * when t: dims (cols x rows) then. */
static dnnl_status_t desc(dnnl_memory_desc_t *d, int t, int rows, int cols, int ld,
	dnnl_data_type_t dt)
{
	dnnl_dims_t dims = {rows, cols};
	dnnl_dims_t strides = {ld, 1};
	if (t) {
		dims[0] = cols;
		dims[1] = rows;
		strides[0] = 1;
		strides[1] = ld;
	}
	return dnnl_memory_desc_init_by_strides(d, 2, dims, dt, strides);
}

/* The primitive of key k, made now when the table has none (under bf16_lock). The table
 * only grows and its entries never move, so a primitive found in it stays valid while it
 * runs outside the lock; once it is full, new shapes get *tmp, which the caller destroys
 * after its one use (uncached_done). NULL with bf16_err. */
static bf16_prim *prim_of(const bf16_key *k, bf16_prim *tmp)
{
	for (int i = 0; i < bf16_n; i++)
		if (memcmp(&bf16_cache[i].key, k, sizeof *k) == 0)
			return &bf16_cache[i];
	bf16_prim *p = bf16_n < BF16_CACHE ? &bf16_cache[bf16_n] : tmp;
	memset(p, 0, sizeof *p);
	p->key = *k;
	dnnl_matmul_desc_t md;
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t ops = NULL;
	dnnl_primitive_desc_t pd = NULL;
	dnnl_status_t s;
	dnnl_data_type_t dt = k->f32 ? dnnl_f32 : dnnl_bf16;
	/* op(A) is M x K: A is stored M x K, or K x M transposed */
	if ((s = desc(&p->a, k->ta, k->ta ? k->K : k->M, k->ta ? k->M : k->K, k->lda, dt)) !=
			dnnl_success ||
		(s = desc(&p->b, k->tb, k->tb ? k->N : k->K, k->tb ? k->K : k->N, k->ldb, dt)) !=
			dnnl_success ||
		(s = desc(&p->c, 0, k->M, k->N, k->ldc, dnnl_f32)) != dnnl_success ||
		(s = dnnl_matmul_desc_init(&md, &p->a, &p->b, NULL, &p->c)) != dnnl_success ||
		(s = dnnl_primitive_attr_create(&attr)) != dnnl_success ||
		(s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user)) !=
			dnnl_success ||
		/* strict: no implicit down-conversion, whatever ONEDNN_DEFAULT_FPMATH_MODE says */
		(s = dnnl_primitive_attr_set_fpmath_mode(attr, dnnl_fpmath_mode_strict)) !=
			dnnl_success)
		goto out;
	if (k->beta && ((s = dnnl_post_ops_create(&ops)) != dnnl_success ||
			       (s = dnnl_post_ops_append_sum(ops, 1.0f)) != dnnl_success ||
			       (s = dnnl_primitive_attr_set_post_ops(attr, ops)) != dnnl_success))
		goto out;
	if ((s = dnnl_primitive_desc_create(&pd, &md, attr, bf16_engine, NULL)) != dnnl_success)
		goto out;
	const dnnl_memory_desc_t *sd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md,
		0);
	if (sd)
		p->s = *sd;
	p->scratch = sd ? dnnl_memory_desc_get_size(sd) : 0;
	s = dnnl_primitive_create(&p->prim, pd);
out:
	if (pd)
		dnnl_primitive_desc_destroy(pd);
	if (ops)
		dnnl_post_ops_destroy(ops);
	if (attr)
		dnnl_primitive_attr_destroy(attr);
	if (s != dnnl_success) {
		char what[96];
		snprintf(what, sizeof what, "a %s matmul %d x %d x %d", k->f32 ? "float32" : "bf16",
			k->M, k->N, k->K);
		fail(what, s);
		return NULL;
	}
	if (p != tmp)
		bf16_n++;
	return p;
}

static void uncached_done(bf16_prim *p, bf16_prim *tmp)
{
	if (p == tmp && p->prim)
		dnnl_primitive_destroy(p->prim);
}

static void key_of(bf16_key *k, int f32, int ta, int tb, int M, int N, int K, int lda,
	int ldb, int ldc, float beta)
{
	memset(k, 0, sizeof *k);
	*k = (bf16_key){f32, ta, tb, M, N, K, lda, ldb, ldc, beta != 0.0f, kn_get_threads()};
}

long kn_dnnl_scratch(int bf16, int ta, int tb, int M, int N, int K, int lda, int ldb, int ldc,
	float beta)
{
	bf16_key k;
	if (!kn_bf16_available(bf16_err, sizeof bf16_err) && bf16)
		return -1;
	if (!bf16_engine)
		return fail("no CPU engine", dnnl_runtime_error);
	key_of(&k, !bf16, ta, tb, M, N, K, lda, ldb, ldc, beta);
	bf16_prim tmp = {0};
	pthread_mutex_lock(&bf16_lock);
	bf16_prim *p = prim_of(&k, &tmp);
	pthread_mutex_unlock(&bf16_lock);
	long n = p ? (long)p->scratch : -1;
	if (p)
		uncached_done(p, &tmp);
	return n;
}

/* One product through oneDNN, operands bf16 or (f32) float32 */
static int gemm(int f32, int ta, int tb, int M, int N, int K, const void *A, int lda,
	const void *B, int ldb, float beta, float *C, int ldc, void *scratch,
	size_t scratch_bytes)
{
	bf16_key k;
	dnnl_memory_t ma = NULL, mb = NULL, mc = NULL, ms = NULL;
	int rc = -1;
	if (!kn_bf16_available(bf16_err, sizeof bf16_err) && !f32)
		return -1;
	if (!bf16_engine)
		return fail("no CPU engine", dnnl_runtime_error);
	key_of(&k, f32, ta, tb, M, N, K, lda, ldb, ldc, beta);
	/* the lock covers the table only: a query on another thread (the control side's
	 * plans) never waits behind a running product */
	bf16_prim tmp = {0};
	pthread_mutex_lock(&bf16_lock);
	bf16_prim *p = prim_of(&k, &tmp);
	pthread_mutex_unlock(&bf16_lock);
	dnnl_status_t s = dnnl_success;
	if (!p)
		goto out;
	if (p->scratch > scratch_bytes) {
		snprintf(bf16_err, sizeof bf16_err, "oneDNN: a matmul %d x %d x %d needs %zu bytes "
			"of scratchpad, %zu given", M, N, K, p->scratch, scratch_bytes);
		goto out;
	}
	if ((s = dnnl_memory_create(&ma, &p->a, bf16_engine, (void *)A)) != dnnl_success ||
		(s = dnnl_memory_create(&mb, &p->b, bf16_engine, (void *)B)) != dnnl_success ||
		(s = dnnl_memory_create(&mc, &p->c, bf16_engine, C)) != dnnl_success ||
		(p->scratch && (s = dnnl_memory_create(&ms, &p->s, bf16_engine, scratch)) !=
				       dnnl_success))
		goto out;
	dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc},
		{DNNL_ARG_SCRATCHPAD, ms}};
	if ((s = dnnl_primitive_execute(p->prim, bf16_stream, p->scratch ? 4 : 3, args)) !=
			dnnl_success ||
		(s = dnnl_stream_wait(bf16_stream)) != dnnl_success)
		goto out;
	rc = 0;
out:
	if (rc < 0 && s != dnnl_success)
		fail("a matmul", s);
	dnnl_memory_t mems[] = {ma, mb, mc, ms};
	for (int i = 0; i < 4; i++)
		if (mems[i])
			dnnl_memory_destroy(mems[i]);
	if (p)
		uncached_done(p, &tmp);
	return rc;
}

int kn_gemm_bf16(int ta, int tb, int M, int N, int K, const uint16_t *A, int lda,
	const uint16_t *B, int ldb, float beta, float *C, int ldc, void *scratch,
	size_t scratch_bytes)
{
	return gemm(0, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, scratch, scratch_bytes);
}

int kn_sgemm_dnnl(int ta, int tb, int M, int N, int K, const float *A, int lda,
	const float *B, int ldb, float beta, float *C, int ldc, void *scratch,
	size_t scratch_bytes)
{
	return gemm(1, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, scratch, scratch_bytes);
}

#else /* no oneDNN */

#define NO_DNNL "this build has no oneDNN (libdnnl-dev was missing when it was built)"

int kn_bf16_available(char *why, size_t n)
{
	if (why)
		snprintf(why, n, "%s", NO_DNNL);
	return 0;
}

const char *kn_bf16_describe(void)
{
	return "no oneDNN";
}

long kn_dnnl_scratch(int bf16, int ta, int tb, int M, int N, int K, int lda, int ldb, int ldc,
	float beta)
{
	(void)bf16, (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)lda, (void)ldb;
	(void)ldc, (void)beta;
	snprintf(bf16_err, sizeof bf16_err, "%s", NO_DNNL);
	return -1;
}

int kn_sgemm_dnnl(int ta, int tb, int M, int N, int K, const float *A, int lda,
	const float *B, int ldb, float beta, float *C, int ldc, void *scratch,
	size_t scratch_bytes)
{
	(void)ta, (void)tb, (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb;
	(void)beta, (void)C, (void)ldc, (void)scratch, (void)scratch_bytes;
	snprintf(bf16_err, sizeof bf16_err, "%s", NO_DNNL);
	return -1;
}

int kn_gemm_bf16(int ta, int tb, int M, int N, int K, const uint16_t *A, int lda,
	const uint16_t *B, int ldb, float beta, float *C, int ldc, void *scratch,
	size_t scratch_bytes)
{
	(void)ta, (void)tb, (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb;
	(void)beta, (void)C, (void)ldc, (void)scratch, (void)scratch_bytes;
	snprintf(bf16_err, sizeof bf16_err, "%s", NO_DNNL);
	return -1;
}

#endif
