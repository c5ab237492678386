/* kc_blas.cu - every matmul of the GPU model: one row-major wrapper over cuBLASLt.
 *
 * Legend as kn.h: C(M,N) = alpha op(A)(M,K) op(B)(K,N) + beta C, row-major. cuBLASLt is
 * column-major; a row-major matrix read column-major is its transpose, so the row-major
 * product C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T: cuBLASLt's
 * A is our B (transposed as trans_b says), its B our A, its m = N, n = M. A bias per
 * column of the row-major C is then a bias per row of cuBLASLt's D, which is what its BIAS
 * epilogue adds.
 *
 * Compute is float32 (CUBLAS_COMPUTE_32F: no TF32) whatever the storage types. cuBLASLt is
 * deterministic for a given algorithm (its split-K reduction schemes keep the order fixed),
 * and the heuristic picks the same algorithm for the same shapes, types and alignments:
 * the GPU model keeps every buffer 256-byte aligned so a recompute sees what the forward saw.
 *
 * Descriptors are built per call (microseconds; cuBLASLt caches its heuristic). When the
 * heuristic has no algorithm with a fused epilogue for a shape, the product runs without it
 * and a kernel of ours applies the bias or the GELU gradient (kc_blas_fallbacks counts it).
 *
 * cuBLASLt is opened with dlopen at the first kc_blas_create, not linked: a program linked
 * against it pays some 3 s and 200 MB of resident memory at every start (a 540 MB library
 * relocated), which every remat-train and rematd would pay, GPU job or not. The soname is
 * the one of the toolkit compiled against; after the usual search (LD_LIBRARY_PATH, the
 * program's runpath, ldconfig) the toolkit's own lib64 directory is tried.
 */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "kc.h"

#ifndef KC_CUDA_LIBDIR
#define KC_CUDA_LIBDIR "/usr/local/cuda/lib64" /* the Makefile passes the toolkit's */
#endif
#define KC_STR2(x) #x
#define KC_STR(x) KC_STR2(x)
#define LT_SONAME "libcublasLt.so." KC_STR(CUBLAS_VER_MAJOR)

/* the functions of cuBLASLt used here, resolved by lt_load */
#define LT_FUNCS(X)                                                                                \
	X(cublasLtCreate)                                                                          \
	X(cublasLtDestroy)                                                                         \
	X(cublasLtGetStatusString)                                                                 \
	X(cublasLtGetVersion)                                                                      \
	X(cublasLtMatmulDescCreate)                                                                \
	X(cublasLtMatmulDescDestroy)                                                               \
	X(cublasLtMatmulDescSetAttribute)                                                          \
	X(cublasLtMatrixLayoutCreate)                                                              \
	X(cublasLtMatrixLayoutDestroy)                                                             \
	X(cublasLtMatrixLayoutSetAttribute)                                                        \
	X(cublasLtMatmulPreferenceCreate)                                                          \
	X(cublasLtMatmulPreferenceDestroy)                                                         \
	X(cublasLtMatmulPreferenceSetAttribute)                                                    \
	X(cublasLtMatmulAlgoGetHeuristic)                                                          \
	X(cublasLtMatmul)

static struct {
#define LT_FIELD(f) decltype(&f) f##_;
	LT_FUNCS(LT_FIELD)
#undef LT_FIELD
} lt;
#define LT(f) (lt.f##_) /* the resolved function f */
static pthread_once_t lt_once = PTHREAD_ONCE_INIT;
static int lt_ok;           /* every function resolved */
static char lt_why[512];    /* why not */

static void lt_load(void)
{
	static const char *const names[] = {LT_SONAME, KC_CUDA_LIBDIR "/" LT_SONAME};
	void *so = NULL;
	for (size_t i = 0; i < sizeof names / sizeof names[0] && !so; i++)
		so = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!so) {
		snprintf(lt_why, sizeof lt_why, "cannot load cuBLASLt (%s): %s", LT_SONAME, dlerror());
		return;
	}
#define LT_RESOLVE(f)                                                                              \
	lt.f##_ = (decltype(lt.f##_))dlsym(so, #f);                                                \
	if (!lt.f##_) {                                                                            \
		snprintf(lt_why, sizeof lt_why, "%s has no %s", LT_SONAME, #f);                    \
		return;                                                                            \
	}
	LT_FUNCS(LT_RESOLVE)
#undef LT_RESOLVE
	lt_ok = 1;
}

static int lt_ready(void)
{
	pthread_once(&lt_once, lt_load);
	return lt_ok ? 0 : kc_seterr("%s", lt_why);
}

extern "C" const char *kc_blas_version(void)
{
	static char buf[64];
	if (lt_ready() < 0)
		return "cuBLASLt not loaded";
	size_t v = LT(cublasLtGetVersion)();
	snprintf(buf, sizeof buf, "cuBLASLt %zu.%zu.%zu", v / 10000, v / 100 % 100, v % 100);
	return buf;
}

struct kc_blas {
	cublasLtHandle_t handle; /* the cuBLASLt handle */
	void *ws;            /* device workspace, owned by the caller */
	size_t ws_bytes;
	long fallbacks;      /* epilogues done by our kernels */
};

#define LT_CHECK(call)                                                                             \
	do {                                                                                       \
		cublasStatus_t s_ = (call);                                                        \
		if (s_ != CUBLAS_STATUS_SUCCESS) {                                                 \
			rc = kc_seterr("%s: %s", #call, LT(cublasLtGetStatusString)(s_));              \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

extern "C" int kc_blas_create(kc_blas **out, void *workspace, size_t workspace_bytes)
{
	kc_blas *h = NULL;
	int rc = 0;
	*out = NULL;
	if (lt_ready() < 0)
		return -1;
	h = (kc_blas *)calloc(1, sizeof *h);
	if (!h)
		return kc_seterr("out of memory");
	LT_CHECK(LT(cublasLtCreate)(&h->handle));
	h->ws = workspace;
	h->ws_bytes = workspace_bytes;
	*out = h;
	return 0;
out:
	free(h);
	return rc;
}

extern "C" void kc_blas_destroy(kc_blas *h)
{
	if (!h)
		return;
	LT(cublasLtDestroy)(h->handle);
	free(h);
}

extern "C" long kc_blas_fallbacks(const kc_blas *h)
{
	return h ? h->fallbacks : 0;
}

static cudaDataType_t lt_type(kc_dtype dt)
{
	return dt == KC_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* A column-major layout of rows x cols with leading dimension ld, batched when batch > 1. */
static cublasStatus_t lt_layout(cublasLtMatrixLayout_t *l, kc_dtype dt, int rows, int cols,
	int ld, int batch, long long stride)
{
	cublasStatus_t s = LT(cublasLtMatrixLayoutCreate)(l, lt_type(dt), (uint64_t)rows,
		(uint64_t)cols, (int64_t)ld);
	if (s != CUBLAS_STATUS_SUCCESS || batch <= 1)
		return s;
	int32_t n = batch;
	int64_t st = stride;
	s = LT(cublasLtMatrixLayoutSetAttribute)(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n);
	if (s == CUBLAS_STATUS_SUCCESS)
		s = LT(cublasLtMatrixLayoutSetAttribute)(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
			&st, sizeof st);
	return s;
}

extern "C" void kc_gemm_colmajor(int trans_a, int trans_b, int M, int N, int K, int lda,
	long long sA, int ldb, long long sB, int ldc, long long sC, kc_colmajor *c)
{
	/* C^T(N,M) = op(B)^T op(A)^T: cuBLASLt's A is our B, its B our A; a row-major X(r, c)
	 * with row stride ld reads column-major as X^T(c, r) with leading dimension ld */
	c->op_a = trans_b;
	c->op_b = trans_a;
	c->m = N;
	c->n = M;
	c->k = K;
	c->a_rows = trans_b ? K : N;
	c->a_cols = trans_b ? N : K;
	c->a_ld = ldb;
	c->a_stride = sB;
	c->b_rows = trans_a ? M : K;
	c->b_cols = trans_a ? K : M;
	c->b_ld = lda;
	c->b_stride = sA;
	c->c_rows = N;
	c->c_cols = M;
	c->c_ld = ldc;
	c->c_stride = sC;
}

/* One cuBLASLt matmul with epilogue `epi` (cuBLASLt's); *no_algo set when the heuristic
 * offers none, which is not an error of its own. */
static int lt_matmul(kc_blas *h, cudaStream_t st, int trans_a, int trans_b, int M, int N, int K,
	float alpha, const void *A, int lda, long long sA, const void *B, int ldb, long long sB,
	kc_dtype ab, float beta, void *C, int ldc, long long sC, kc_dtype cdt, int batch,
	cublasLtEpilogue_t epi, const void *epi_ptr, int *no_algo)
{
	cublasLtMatmulDesc_t desc = NULL;
	cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
	cublasLtMatmulPreference_t pref = NULL;
	cublasLtMatmulHeuristicResult_t heur;
	cublasStatus_t hs;
	int found = 0, rc = 0;
	kc_colmajor cm;
	kc_gemm_colmajor(trans_a, trans_b, M, N, K, lda, sA, ldb, sB, ldc, sC, &cm);
	cublasOperation_t ta = cm.op_a ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasOperation_t tb = cm.op_b ? CUBLAS_OP_T : CUBLAS_OP_N;
	cudaDataType_t scale = CUDA_R_32F;
	*no_algo = 0;
	LT_CHECK(LT(cublasLtMatmulDescCreate)(&desc, CUBLAS_COMPUTE_32F, scale));
	LT_CHECK(LT(cublasLtMatmulDescSetAttribute)(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
	LT_CHECK(LT(cublasLtMatmulDescSetAttribute)(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
	LT_CHECK(LT(cublasLtMatmulDescSetAttribute)(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
		sizeof epi));
	if (epi == CUBLASLT_EPILOGUE_BIAS)
		LT_CHECK(LT(cublasLtMatmulDescSetAttribute)(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
			&epi_ptr, sizeof epi_ptr));
	if (epi == CUBLASLT_EPILOGUE_DGELU) {
		int64_t ld = cm.c_ld; /* the GELU input has C's layout */
		LT_CHECK(LT(cublasLtMatmulDescSetAttribute)(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
			&epi_ptr, sizeof epi_ptr));
		LT_CHECK(LT(cublasLtMatmulDescSetAttribute)(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
			&ld, sizeof ld));
	}
	LT_CHECK(lt_layout(&la, ab, cm.a_rows, cm.a_cols, cm.a_ld, batch, cm.a_stride));
	LT_CHECK(lt_layout(&lb, ab, cm.b_rows, cm.b_cols, cm.b_ld, batch, cm.b_stride));
	LT_CHECK(lt_layout(&lc, cdt, cm.c_rows, cm.c_cols, cm.c_ld, batch, cm.c_stride));
	LT_CHECK(LT(cublasLtMatmulPreferenceCreate)(&pref));
	LT_CHECK(LT(cublasLtMatmulPreferenceSetAttribute)(pref,
		CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &h->ws_bytes, sizeof h->ws_bytes));
	/* cuBLASLt says it has no algorithm in two ways: NOT_SUPPORTED (its documented answer
	 * when no heuristic serves the configuration, an epilogue it lacks for these types),
	 * or success with nothing found */
	hs = LT(cublasLtMatmulAlgoGetHeuristic)(h->handle, desc, la, lb, lc, lc, pref, 1, &heur,
		&found);
	if (hs != CUBLAS_STATUS_SUCCESS && hs != CUBLAS_STATUS_NOT_SUPPORTED) {
		rc = kc_seterr("cublasLtMatmulAlgoGetHeuristic: %s",
			LT(cublasLtGetStatusString)(hs));
		goto out;
	}
	if (hs == CUBLAS_STATUS_NOT_SUPPORTED || found == 0 ||
		heur.state != CUBLAS_STATUS_SUCCESS) {
		*no_algo = 1;
		rc = -1;
		goto out;
	}
	/* cuBLASLt's A is our B, its B our A (kc_gemm_colmajor) */
	LT_CHECK(LT(cublasLtMatmul)(h->handle, desc, &alpha, B, la, A, lb, &beta, C, lc, C, lc,
		&heur.algo, h->ws, h->ws_bytes, st));
out:
	if (pref)
		LT(cublasLtMatmulPreferenceDestroy)(pref);
	if (lc)
		LT(cublasLtMatrixLayoutDestroy)(lc);
	if (lb)
		LT(cublasLtMatrixLayoutDestroy)(lb);
	if (la)
		LT(cublasLtMatrixLayoutDestroy)(la);
	if (desc)
		LT(cublasLtMatmulDescDestroy)(desc);
	return rc;
}

extern "C" int kc_gemm(kc_blas *h, cudaStream_t st, int trans_a, int trans_b, int M, int N,
	int K, float alpha, const void *A, int lda, long long sA, const void *B, int ldb,
	long long sB, kc_dtype ab, float beta, void *C, int ldc, long long sC, kc_dtype cdt,
	int batch, kc_epilogue epi, const void *epi_ptr)
{
	int no_algo = 0;
	cublasLtEpilogue_t e = epi == KC_EPI_BIAS  ? CUBLASLT_EPILOGUE_BIAS
			       : epi == KC_EPI_DGELU ? CUBLASLT_EPILOGUE_DGELU
						     : CUBLASLT_EPILOGUE_DEFAULT;
	if (M == 0 || N == 0)
		return 0;
	if (epi != KC_EPI_NONE && (batch > 1 || beta != 0.0f || !epi_ptr))
		return kc_seterr("kc_gemm: an epilogue needs batch 1, beta 0 and its pointer");
	if (lt_matmul(h, st, trans_a, trans_b, M, N, K, alpha, A, lda, sA, B, ldb, sB, ab, beta, C,
		    ldc, sC, cdt, batch, e, epi_ptr, &no_algo) == 0)
		return 0;
	if (!no_algo || epi == KC_EPI_NONE) {
		if (no_algo)
			kc_seterr("cuBLASLt has no algorithm for %s x %s -> %s, M %d N %d K %d%s",
				kc_dtype_name(ab), kc_dtype_name(ab), kc_dtype_name(cdt), M, N, K,
				batch > 1 ? " (batched)" : "");
		return -1;
	}
	/* the same product without the epilogue, then ours */
	h->fallbacks++;
	if (lt_matmul(h, st, trans_a, trans_b, M, N, K, alpha, A, lda, sA, B, ldb, sB, ab, beta, C,
		    ldc, sC, cdt, batch, CUBLASLT_EPILOGUE_DEFAULT, NULL, &no_algo) < 0) {
		if (no_algo)
			kc_seterr("cuBLASLt has no algorithm for M %d N %d K %d", M, N, K);
		return -1;
	}
	if (epi == KC_EPI_BIAS)
		return kc_add_bias(st, cdt, C, epi_ptr, M, N, ldc);
	if (ldc != N)
		return kc_seterr("kc_gemm: the GELU gradient fallback needs ldc == N");
	return kc_gelu_backward(st, cdt, C, epi_ptr, C, (size_t)M * N);
}
