/* kn_dnnl.c - matmuls through oneDNN's matmul primitive: bfloat16 (precision "bf16"), and
 * the float32 products where it beats OpenBLAS (the engine's table says which); the
 * rounding to bf16 around them (kn.h).
 *
 * Legend: M, N, K the product's dimensions; op(X) = X or X^T by flag; every matrix
 * row-major with its row stride (lda, ldb, ldc), as kn_sgemm.
 *
 * C(M,N) = op(A)(M,K) op(B)(K,N) [+ C], A and B bf16 or float32, C float32: the products
 * of bf16 values are exact in float32 and oneDNN sums them in float32 (its brgemm kernels:
 * AMX tiles where the processor has them, AVX512-BF16 dot products otherwise). A transpose
 * is a memory descriptor's strides, never a copy of ours; beta 1 is oneDNN's sum post-op.
 * A packed product takes B in the layout its primitive prefers (oneDNN's "any"), reordered
 * once by kn_dnnl_pack, so that the kernel does not copy B into its blocks on every call:
 * the engine packs a weight after each optimizer step and uses it for every chunk.
 *
 * One primitive per product (kn_mm, and the thread count), made on first use and kept in a
 * table that only grows: oneDNN's JIT and its choice of blocking happen once. The products
 * run on the training thread alone (one stream); the table's lock is never held while one
 * runs. Scratchpads are the caller's (user mode): kn_dnnl_sizes says how much a product
 * needs, so the engine counts that memory as its workspace instead of oneDNN mallocing it
 * behind every call. Determinism: oneDNN (OpenMP runtime, the engine's thread count)
 * partitions a product by its shape and thread count alone and sums each output in one
 * order; the same product on buffers of the same alignment gives the same bits, which the
 * engine's "every policy, the same numbers" rests on (tests/unit/test_model.c checks it).
 * What pins it: the thread count in the key (a new count makes new primitives), the
 * engine's 64-byte-aligned buffers, and the strict fpmath mode set on every primitive.
 *
 * Built with oneDNN's headers (Debian's libdnnl-dev) when REMAT_DNNL is defined; without
 * them every call says why not (and the engine's float32 products all stay OpenBLAS's).
 */
#include "kn.h"
#include "kn_rows.h"

#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
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
#define BF_SPAN 8192 /* elements per task of kn_to_bf16 */

static KN_SIMD void to_bf16_span(uint16_t *dst, const float *src, size_t n)
{
	kn_round_row(dst, src, n);
}

void kn_to_bf16(uint16_t *dst, const float *src, size_t n)
{
	size_t nspan = (n + BF_SPAN - 1) / BF_SPAN;
#pragma omp parallel for schedule(static)
	for (size_t k = 0; k < nspan; k++) {
		size_t i0 = k * BF_SPAN;
		to_bf16_span(dst + i0, src + i0, n - i0 < BF_SPAN ? n - i0 : BF_SPAN);
	}
}

#ifdef REMAT_DNNL

#define PRIM_CACHE 96 /* products kept: a model makes at most 18 (eng_model.c) */

typedef struct prim_key {
	kn_mm mm;
	int threads;
} prim_key;

typedef struct dnnl_prim {
	prim_key key;
	dnnl_primitive_t prim, reorder; /* reorder: plain B into the packed layout (packed) */
	size_t scratch, packed;         /* bytes of its user scratchpad, of its packed B */
	dnnl_memory_desc_t a, b, c, s, bp; /* b: B as stored; bp: B as the primitive takes it */
} dnnl_prim;

static pthread_mutex_t prim_lock = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t dnnl_eng;
static dnnl_stream_t dnnl_strm;
static dnnl_prim prim_cache[PRIM_CACHE];
static int prim_n;
static _Atomic int bf16_ok = -1; /* -1: not asked yet; read without the lock once known */
static int amx;                  /* oneDNN runs AMX here (set with bf16_ok) */
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
	dnnl_status_t s = dnnl_engine_create(&dnnl_eng, dnnl_cpu, 0);
	if (s == dnnl_success)
		s = dnnl_stream_create(&dnnl_strm, dnnl_eng, dnnl_stream_default_flags);
	if (s != dnnl_success) {
		if (dnnl_eng)
			dnnl_engine_destroy(dnnl_eng);
		dnnl_eng = NULL;
		snprintf(bf16_why, sizeof bf16_why, "oneDNN: cannot start its CPU engine: %s",
			dnnl_status2str(s));
		return 0;
	}
	amx = (isa & dnnl_cpu_isa_avx512_core_amx) == dnnl_cpu_isa_avx512_core_amx;
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
		pthread_mutex_lock(&prim_lock);
		if (bf16_ok < 0)
			bf16_ok = bf16_start();
		pthread_mutex_unlock(&prim_lock);
	}
	int ok = bf16_ok;
	if (!ok && why)
		snprintf(why, n, "%s", bf16_why);
	return ok;
}

int kn_dnnl_available(char *why, size_t n)
{
	kn_bf16_available(NULL, 0); /* starts the engine */
	if (!dnnl_eng && why)
		snprintf(why, n, "%s", bf16_why);
	return dnnl_eng != NULL;
}

int kn_bf16_pack_weights(void)
{
	const char *e = getenv("REMAT_BF16_PACK");
	if (e && (strcmp(e, "0") == 0 || strcmp(e, "1") == 0))
		return e[0] == '1';
	return kn_bf16_available(NULL, 0) && amx;
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

/* The memory descriptors of product q into p (a, b, c; bp: b's, or any layout oneDNN
 * chooses for a packed b) and the matmul's descriptor over them into md. */
static dnnl_status_t prim_descs(dnnl_prim *p, const kn_mm *q, dnnl_matmul_desc_t *md)
{
	dnnl_status_t s;
	dnnl_data_type_t dt = q->bf16 ? dnnl_bf16 : dnnl_f32;
	dnnl_dims_t kn = {q->K, q->N};
	/* op(A) is M x K: A is stored M x K, or K x M transposed */
	if ((s = desc(&p->a, q->ta, q->ta ? q->K : q->M, q->ta ? q->M : q->K, q->lda, dt)) !=
			dnnl_success ||
		(s = desc(&p->b, q->tb, q->tb ? q->N : q->K, q->tb ? q->K : q->N, q->ldb, dt)) !=
			dnnl_success ||
		(s = desc(&p->c, 0, q->M, q->N, q->ldc, dnnl_f32)) != dnnl_success)
		return s;
	p->bp = p->b;
	if (q->packed && (s = dnnl_memory_desc_init_by_tag(&p->bp, 2, kn, dt,
				  dnnl_format_tag_any)) != dnnl_success)
		return s;
	return dnnl_matmul_desc_init(md, &p->a, &p->bp, NULL, &p->c);
}

/* The attributes of product q into *attr, with its post-ops into *ops when it has any (the
 * caller destroys both, as far as they were made): the scratchpad is the caller's, the
 * maths strict, and beta adds C's old value (a sum post-op). */
static dnnl_status_t prim_attr(const kn_mm *q, dnnl_primitive_attr_t *attr,
	dnnl_post_ops_t *ops)
{
	dnnl_status_t s;
	if ((s = dnnl_primitive_attr_create(attr)) != dnnl_success ||
		(s = dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user)) !=
			dnnl_success ||
		/* strict: no implicit down-conversion, whatever ONEDNN_DEFAULT_FPMATH_MODE says */
		(s = dnnl_primitive_attr_set_fpmath_mode(*attr, dnnl_fpmath_mode_strict)) !=
			dnnl_success)
		return s;
	if (q->beta && ((s = dnnl_post_ops_create(ops)) != dnnl_success ||
			       (s = dnnl_post_ops_append_sum(*ops, 1.0f)) != dnnl_success ||
			       (s = dnnl_primitive_attr_set_post_ops(*attr, *ops)) != dnnl_success))
		return s;
	return dnnl_success;
}

/* A packed product's weights: the layout pd chose for B into p->bp (p->packed bytes) and
 * the reorder of B into it, its descriptor into *rpd (the caller destroys it). */
static dnnl_status_t prim_packed(dnnl_prim *p, dnnl_primitive_desc_t pd,
	dnnl_primitive_desc_t *rpd)
{
	dnnl_status_t s;
	const dnnl_memory_desc_t *wd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
	if (!wd)
		return dnnl_runtime_error;
	p->bp = *wd;
	p->packed = dnnl_memory_desc_get_size(&p->bp);
	if ((s = dnnl_reorder_primitive_desc_create(rpd, &p->b, dnnl_eng, &p->bp, dnnl_eng,
		     NULL)) != dnnl_success)
		return s;
	return dnnl_primitive_create(&p->reorder, *rpd);
}

/* The primitive of key k, made now when the table has none (under prim_lock). The table
 * only grows and its entries never move, so a primitive found in it stays valid while it
 * runs outside the lock; once it is full, new products get *tmp, which the caller destroys
 * after its one use (uncached_done). NULL with bf16_err. */
static dnnl_prim *prim_of(const prim_key *k, dnnl_prim *tmp)
{
	for (int i = 0; i < prim_n; i++)
		if (memcmp(&prim_cache[i].key, k, sizeof *k) == 0)
			return &prim_cache[i];
	dnnl_prim *p = prim_n < PRIM_CACHE ? &prim_cache[prim_n] : tmp;
	const kn_mm *q = &k->mm;
	memset(p, 0, sizeof *p);
	p->key = *k;
	dnnl_matmul_desc_t md;
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t ops = NULL;
	dnnl_primitive_desc_t pd = NULL, rpd = NULL;
	dnnl_status_t s;
	if ((s = prim_descs(p, q, &md)) != dnnl_success ||
		(s = prim_attr(q, &attr, &ops)) != dnnl_success ||
		(s = dnnl_primitive_desc_create(&pd, &md, attr, dnnl_eng, NULL)) != dnnl_success)
		goto out;
	const dnnl_memory_desc_t *sd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md,
		0);
	if (sd)
		p->s = *sd;
	p->scratch = sd ? dnnl_memory_desc_get_size(sd) : 0;
	if (q->packed && (s = prim_packed(p, pd, &rpd)) != dnnl_success)
		goto out;
	s = dnnl_primitive_create(&p->prim, pd);
out:
	if (rpd)
		dnnl_primitive_desc_destroy(rpd);
	if (pd)
		dnnl_primitive_desc_destroy(pd);
	if (ops)
		dnnl_post_ops_destroy(ops);
	if (attr)
		dnnl_primitive_attr_destroy(attr);
	if (s != dnnl_success) {
		char what[96];
		if (p->reorder)
			dnnl_primitive_destroy(p->reorder);
		snprintf(what, sizeof what, "a %s matmul %d x %d x %d", q->bf16 ? "bf16" : "float32",
			q->M, q->N, q->K);
		fail(what, s);
		return NULL;
	}
	if (p != tmp)
		prim_n++;
	return p;
}

static void uncached_done(dnnl_prim *p, dnnl_prim *tmp)
{
	if (p != tmp)
		return;
	if (p->prim)
		dnnl_primitive_destroy(p->prim);
	if (p->reorder)
		dnnl_primitive_destroy(p->reorder);
}

/* The primitive of product q at the current thread count, found or made; NULL with
 * bf16_err. The lock covers the table only: a query on another thread (the control side's
 * plans) never waits behind a running product. */
static dnnl_prim *lookup(const kn_mm *q, dnnl_prim *tmp)
{
	prim_key k;
	memset(&k, 0, sizeof k); /* the key is compared bytewise */
	k.mm = *q;
	k.mm.beta = q->beta != 0;
	k.mm.packed = q->packed != 0;
	/* the count oneDNN's OpenMP will partition by on this thread (what kn_set_threads set
	 * here; another thread's primitives get their own key) */
	k.threads = omp_get_max_threads();
	/* starts the engine; its bf16 verdict matters to bf16 products only */
	if (!kn_bf16_available(q->bf16 ? bf16_err : NULL, sizeof bf16_err) && q->bf16)
		return NULL;
	if (!dnnl_eng) {
		fail("no CPU engine", dnnl_runtime_error);
		return NULL;
	}
	memset(tmp, 0, sizeof *tmp);
	pthread_mutex_lock(&prim_lock);
	dnnl_prim *p = prim_of(&k, tmp);
	pthread_mutex_unlock(&prim_lock);
	return p;
}

int kn_dnnl_sizes(const kn_mm *q, size_t *scratch, size_t *packed)
{
	dnnl_prim tmp;
	dnnl_prim *p = lookup(q, &tmp);
	if (!p)
		return -1;
	*scratch = p->scratch;
	if (packed)
		*packed = p->packed;
	uncached_done(p, &tmp);
	return 0;
}

/* Runs prim with its arguments, then waits for it. */
static dnnl_status_t run(dnnl_primitive_t prim, int n, const dnnl_exec_arg_t *args)
{
	dnnl_status_t s = dnnl_primitive_execute(prim, dnnl_strm, n, args);
	return s == dnnl_success ? dnnl_stream_wait(dnnl_strm) : s;
}

int kn_dnnl_pack(const kn_mm *q, const void *B, void *dst, size_t bytes)
{
	dnnl_prim tmp;
	dnnl_memory_t from = NULL, to = NULL;
	dnnl_status_t s = dnnl_success;
	int rc = -1;
	dnnl_prim *p = q->packed ? lookup(q, &tmp) : NULL;
	if (!p) {
		if (!q->packed)
			snprintf(bf16_err, sizeof bf16_err, "oneDNN: a plain product has no packed B");
		return -1;
	}
	if (p->packed > bytes) {
		snprintf(bf16_err, sizeof bf16_err, "oneDNN: a packed B of %d x %d needs %zu bytes, "
			"%zu given", q->K, q->N, p->packed, bytes);
		goto out;
	}
	if ((s = dnnl_memory_create(&from, &p->b, dnnl_eng, (void *)B)) != dnnl_success ||
		(s = dnnl_memory_create(&to, &p->bp, dnnl_eng, dst)) != dnnl_success)
		goto out;
	dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
	if ((s = run(p->reorder, 2, args)) == dnnl_success)
		rc = 0;
out:
	if (rc < 0 && s != dnnl_success)
		fail("packing a matmul's B", s);
	if (from)
		dnnl_memory_destroy(from);
	if (to)
		dnnl_memory_destroy(to);
	uncached_done(p, &tmp);
	return rc;
}

int kn_dnnl_gemm(const kn_mm *q, const void *A, const void *B, float *C, void *scratch,
	size_t scratch_bytes)
{
	dnnl_prim tmp;
	dnnl_memory_t ma = NULL, mb = NULL, mc = NULL, ms = NULL;
	int rc = -1;
	dnnl_prim *p = lookup(q, &tmp);
	dnnl_status_t s = dnnl_success;
	if (!p)
		return -1;
	if (p->scratch > scratch_bytes) {
		snprintf(bf16_err, sizeof bf16_err, "oneDNN: a matmul %d x %d x %d needs %zu bytes "
			"of scratchpad, %zu given", q->M, q->N, q->K, p->scratch, scratch_bytes);
		goto out;
	}
	if ((s = dnnl_memory_create(&ma, &p->a, dnnl_eng, (void *)A)) != dnnl_success ||
		(s = dnnl_memory_create(&mb, &p->bp, dnnl_eng, (void *)B)) != dnnl_success ||
		(s = dnnl_memory_create(&mc, &p->c, dnnl_eng, C)) != dnnl_success ||
		(p->scratch && (s = dnnl_memory_create(&ms, &p->s, dnnl_eng, scratch)) !=
				       dnnl_success))
		goto out;
	dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc},
		{DNNL_ARG_SCRATCHPAD, ms}};
	if ((s = run(p->prim, p->scratch ? 4 : 3, args)) == dnnl_success)
		rc = 0;
out:
	if (rc < 0 && s != dnnl_success)
		fail("a matmul", s);
	dnnl_memory_t mems[] = {ma, mb, mc, ms};
	for (int i = 0; i < 4; i++)
		if (mems[i])
			dnnl_memory_destroy(mems[i]);
	uncached_done(p, &tmp);
	return rc;
}

#else /* no oneDNN */

#define NO_DNNL "this build has no oneDNN (libdnnl-dev was missing when it was built)"

int kn_bf16_available(char *why, size_t n)
{
	if (why)
		snprintf(why, n, "%s", NO_DNNL);
	return 0;
}

int kn_dnnl_available(char *why, size_t n)
{
	return kn_bf16_available(why, n);
}

int kn_bf16_pack_weights(void)
{
	return 0;
}

const char *kn_bf16_describe(void)
{
	return "no oneDNN";
}

static int no_dnnl(void)
{
	snprintf(bf16_err, sizeof bf16_err, "%s", NO_DNNL);
	return -1;
}

int kn_dnnl_sizes(const kn_mm *q, size_t *scratch, size_t *packed)
{
	(void)q, (void)scratch, (void)packed;
	return no_dnnl();
}

int kn_dnnl_pack(const kn_mm *q, const void *B, void *dst, size_t bytes)
{
	(void)q, (void)B, (void)dst, (void)bytes;
	return no_dnnl();
}

int kn_dnnl_gemm(const kn_mm *q, const void *A, const void *B, float *C, void *scratch,
	size_t scratch_bytes)
{
	(void)q, (void)A, (void)B, (void)C, (void)scratch, (void)scratch_bytes;
	return no_dnnl();
}

#endif
