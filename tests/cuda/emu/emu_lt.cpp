/* emu_lt.cpp - the cuBLASLt calls of kernels/cuda/kc_blas.cu, answered on the CPU: the CUDA
 * emulation's libcublasLt (run-on-cpu.sh builds it as libcublasLt.so.<major> and puts it
 * first on LD_LIBRARY_PATH, where kc_blas.cu's dlopen finds it).
 *
 * What cuBLASLt documents, done plainly: D = alpha op(A) op(B) + beta C, column-major, op by
 * the descriptor's TRANSA/TRANSB, batched by the layouts' BATCH_COUNT and
 * STRIDED_BATCH_OFFSET, float32 compute (CUBLAS_COMPUTE_32F, scale type CUDA_R_32F) on
 * float32 or bf16 storage (bf16 rounded to nearest even when stored, by cuda_bf16.h's own
 * host conversion); the epilogues remat asks for: BIAS (bias[i] added to row i of D, in D's
 * type) and DGELU (D times the tanh-GELU's derivative at AUX, in D's type, leading dimension
 * AUX_LD). The products are OpenBLAS's float32 sgemm on float32 copies of A and B (a bf16
 * value widens exactly, and so does the product of two): deterministic for a given shape,
 * as cuBLASLt is for a fixed algorithm; then the epilogue and the store.
 *
 * Checked as cuBLASLt checks them (CUBLAS_STATUS_INVALID_VALUE, or NOT_SUPPORTED for a type
 * or an attribute outside the above): the layouts agree with m, n, k and op, every leading
 * dimension holds its rows, the batch counts agree, C and D have one layout.
 *
 * REMAT_EMU_LT_NO_EPILOGUE makes the heuristic offer no algorithm for a fused epilogue, as
 * cuBLASLt does for some types and shapes, in either of its two ways: 1, the status
 * CUBLAS_STATUS_NOT_SUPPORTED; empty, success with nothing found. kc_gemm's fallback (the
 * plain product, then a kernel of ours) must run instead.
 */
#include <cblas.h>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct cublasLtContext {
	int live;
};

typedef struct lt_layout {
	cudaDataType type;
	uint64_t rows, cols;
	int64_t ld, stride;
	int32_t batch;
} lt_layout;

typedef struct lt_desc {
	cublasOperation_t ta, tb;
	cublasLtEpilogue_t epi;
	const void *bias, *aux;
	int64_t aux_ld;
	int compute_ok; /* CUBLAS_COMPUTE_32F with a float32 scale */
} lt_desc;

static_assert(sizeof(lt_layout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "layout fits");
static_assert(sizeof(lt_desc) <= sizeof(cublasLtMatmulDescOpaque_t), "descriptor fits");

#define L(x) ((lt_layout *)(x))
#define D(x) ((lt_desc *)(x))

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
	*h = (cublasLtHandle_t)calloc(1, sizeof **h);
	return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
	free(h);
	return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusString(cublasStatus_t s)
{
	switch (s) {
	case CUBLAS_STATUS_SUCCESS:
		return "CUBLAS_STATUS_SUCCESS";
	case CUBLAS_STATUS_ALLOC_FAILED:
		return "CUBLAS_STATUS_ALLOC_FAILED";
	case CUBLAS_STATUS_INVALID_VALUE:
		return "CUBLAS_STATUS_INVALID_VALUE";
	case CUBLAS_STATUS_NOT_SUPPORTED:
		return "CUBLAS_STATUS_NOT_SUPPORTED";
	default:
		return "CUBLAS_STATUS_UNKNOWN (emulation)";
	}
}

size_t cublasLtGetVersion(void)
{
	return (size_t)CUBLAS_VER_MAJOR * 10000 + CUBLAS_VER_MINOR * 100 + CUBLAS_VER_PATCH;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute,
	cudaDataType_t scale)
{
	*d = (cublasLtMatmulDesc_t)calloc(1, sizeof **d);
	if (!*d)
		return CUBLAS_STATUS_ALLOC_FAILED;
	D(*d)->compute_ok = compute == CUBLAS_COMPUTE_32F && scale == CUDA_R_32F;
	D(*d)->epi = CUBLASLT_EPILOGUE_DEFAULT;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
	free(d);
	return CUBLAS_STATUS_SUCCESS;
}

/* *dst = the attribute's value when its size is what the attribute holds */
#define SET(dst, buf, size)                                                                        \
	(size == sizeof(dst) ? (memcpy(&(dst), buf, sizeof(dst)), CUBLAS_STATUS_SUCCESS)           \
			     : CUBLAS_STATUS_INVALID_VALUE)

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
	cublasLtMatmulDescAttributes_t attr, const void *buf, size_t size)
{
	switch (attr) {
	case CUBLASLT_MATMUL_DESC_TRANSA:
		return SET(D(d)->ta, buf, size);
	case CUBLASLT_MATMUL_DESC_TRANSB:
		return SET(D(d)->tb, buf, size);
	case CUBLASLT_MATMUL_DESC_EPILOGUE:
		return SET(D(d)->epi, buf, size);
	case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
		return SET(D(d)->bias, buf, size);
	case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
		return SET(D(d)->aux, buf, size);
	case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
		return SET(D(d)->aux_ld, buf, size);
	default:
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type,
	uint64_t rows, uint64_t cols, int64_t ld)
{
	if ((type != CUDA_R_32F && type != CUDA_R_16BF) || ld < (int64_t)rows || ld < 1)
		return type != CUDA_R_32F && type != CUDA_R_16BF ? CUBLAS_STATUS_NOT_SUPPORTED
								   : CUBLAS_STATUS_INVALID_VALUE;
	*l = (cublasLtMatrixLayout_t)calloc(1, sizeof **l);
	if (!*l)
		return CUBLAS_STATUS_ALLOC_FAILED;
	*L(*l) = lt_layout{type, rows, cols, ld, 0, 1};
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
	free(l);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
	cublasLtMatrixLayoutAttribute_t attr, const void *buf, size_t size)
{
	switch (attr) {
	case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
		return SET(L(l)->batch, buf, size);
	case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
		return SET(L(l)->stride, buf, size);
	default:
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
	*p = (cublasLtMatmulPreference_t)calloc(1, sizeof **p);
	return *p ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
	free(p);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
	cublasLtMatmulPreferenceAttributes_t attr, const void *buf, size_t size)
{
	(void)p;
	(void)buf;
	if (attr != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	return size == sizeof(uint64_t) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

} /* extern "C" */

static int same_layout(const lt_layout *x, const lt_layout *y)
{
	return x->type == y->type && x->rows == y->rows && x->cols == y->cols && x->ld == y->ld &&
	       x->batch == y->batch && (x->batch == 1 || x->stride == y->stride);
}

/* the problem's m, n, k when the descriptor and layouts agree; else the status */
static cublasStatus_t lt_check(const lt_desc *d, const lt_layout *a, const lt_layout *b,
	const lt_layout *c, const lt_layout *dd, uint64_t *m, uint64_t *n, uint64_t *k)
{
	uint64_t am = d->ta == CUBLAS_OP_N ? a->rows : a->cols;
	uint64_t ak = d->ta == CUBLAS_OP_N ? a->cols : a->rows;
	uint64_t bk = d->tb == CUBLAS_OP_N ? b->rows : b->cols;
	uint64_t bn = d->tb == CUBLAS_OP_N ? b->cols : b->rows;
	if (!d->compute_ok || a->type != b->type ||
		(d->epi != CUBLASLT_EPILOGUE_DEFAULT && d->epi != CUBLASLT_EPILOGUE_BIAS &&
			d->epi != CUBLASLT_EPILOGUE_DGELU))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if ((d->ta != CUBLAS_OP_N && d->ta != CUBLAS_OP_T) ||
		(d->tb != CUBLAS_OP_N && d->tb != CUBLAS_OP_T))
		return CUBLAS_STATUS_INVALID_VALUE;
	if (ak != bk || c->rows != am || c->cols != bn || !same_layout(c, dd) ||
		a->batch != c->batch || b->batch != c->batch || c->batch < 1)
		return CUBLAS_STATUS_INVALID_VALUE;
	if ((d->epi == CUBLASLT_EPILOGUE_BIAS && !d->bias) ||
		(d->epi == CUBLASLT_EPILOGUE_DGELU && (!d->aux || d->aux_ld < (int64_t)am)))
		return CUBLAS_STATUS_INVALID_VALUE;
	*m = am;
	*n = bn;
	*k = ak;
	return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h,
	cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
	cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref,
	int requested, cublasLtMatmulHeuristicResult_t results[], int *found)
{
	uint64_t m, n, k;
	const char *no_epi = getenv("REMAT_EMU_LT_NO_EPILOGUE");
	(void)h;
	(void)pref;
	*found = 0;
	if (requested < 1)
		return CUBLAS_STATUS_INVALID_VALUE;
	cublasStatus_t s = lt_check(D(desc), L(a), L(b), L(c), L(d), &m, &n, &k);
	if (s != CUBLAS_STATUS_SUCCESS)
		return s;
	if (no_epi && D(desc)->epi != CUBLASLT_EPILOGUE_DEFAULT) {
		if (strcmp(no_epi, "1") == 0) /* cuBLASLt's documented answer */
			return CUBLAS_STATUS_NOT_SUPPORTED;
		if (strcmp(no_epi, "empty") == 0) /* the other one: nothing found */
			return CUBLAS_STATUS_SUCCESS;
	}
	memset(&results[0], 0, sizeof results[0]);
	results[0].state = CUBLAS_STATUS_SUCCESS;
	results[0].wavesCount = 1.0f;
	*found = 1;
	return CUBLAS_STATUS_SUCCESS;
}

static float lt_ld(cudaDataType t, const void *p, size_t i)
{
	return t == CUDA_R_16BF ? __bfloat162float(((const __nv_bfloat16 *)p)[i])
				: ((const float *)p)[i];
}

static void lt_st(cudaDataType t, void *p, size_t i, float v)
{
	if (t == CUDA_R_16BF)
		((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
	else
		((float *)p)[i] = v;
}

/* dst(rows x cols, leading dimension rows) = the stored matrix of layout l at element
 * offset off, as float32 (bf16 widened: exact) */
static void lt_unpack(float *dst, const lt_layout *l, const void *p, size_t off)
{
	for (uint64_t j = 0; j < l->cols; j++)
		for (uint64_t i = 0; i < l->rows; i++)
			dst[i + j * l->rows] = lt_ld(l->type, p, off + i + j * l->ld);
}

/* d/dx of GELU's tanh form, as cuBLASLt's DGELU epilogue applies it */
static float lt_dgelu(float x)
{
	const float s = 0.7978845608028654f, a = 0.044715f;
	float u = s * (x + a * x * x * x), t = tanhf(u);
	return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * s * (1.0f + 3.0f * a * x * x);
}

extern "C" cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc,
	const void *alpha, const void *A, cublasLtMatrixLayout_t al, const void *B,
	cublasLtMatrixLayout_t bl, const void *beta, const void *C, cublasLtMatrixLayout_t cl,
	void *Dp, cublasLtMatrixLayout_t dl, const cublasLtMatmulAlgo_t *algo, void *ws,
	size_t ws_bytes, cudaStream_t st)
{
	const lt_desc *d = D(desc);
	const lt_layout *a = L(al), *b = L(bl), *c = L(cl);
	uint64_t m, n, k;
	(void)algo;
	(void)ws;
	(void)ws_bytes;
	(void)st;
	if (!h || !alpha || !beta)
		return CUBLAS_STATUS_INVALID_VALUE;
	cublasStatus_t s = lt_check(d, a, b, c, L(dl), &m, &n, &k);
	if (s != CUBLAS_STATUS_SUCCESS)
		return s;
	float al_ = *(const float *)alpha, be = *(const float *)beta;
	size_t na = a->rows * a->cols, nb = b->rows * b->cols;
	float *fa = (float *)malloc((na + nb + m * n + 1) * sizeof(float));
	if (!fa)
		return CUBLAS_STATUS_ALLOC_FAILED;
	float *fb = fa + na, *fd = fb + nb;
	for (int32_t q = 0; q < c->batch; q++) {
		size_t oc = (size_t)q * c->stride;
		lt_unpack(fa, a, A, (size_t)q * a->stride);
		lt_unpack(fb, b, B, (size_t)q * b->stride);
		CBLAS_TRANSPOSE ta = d->ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
		CBLAS_TRANSPOSE tb = d->tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
		if (m > 0 && n > 0 && k > 0)
			cblas_sgemm(CblasColMajor, ta, tb, (int)m, (int)n, (int)k, al_, fa,
				(int)a->rows, fb, (int)b->rows, 0.0f, fd, (int)m);
		else
			memset(fd, 0, m * n * sizeof(float));
		for (uint64_t j = 0; j < n; j++)
			for (uint64_t i = 0; i < m; i++) {
				size_t ic = oc + i + j * c->ld;
				float v = fd[i + j * m];
				if (be != 0.0f)
					v += be * lt_ld(c->type, C, ic);
				if (d->epi == CUBLASLT_EPILOGUE_BIAS)
					v += lt_ld(c->type, d->bias, i);
				if (d->epi == CUBLASLT_EPILOGUE_DGELU)
					v *= lt_dgelu(lt_ld(c->type, d->aux, i + j * d->aux_ld));
				lt_st(c->type, Dp, ic, v);
			}
	}
	free(fa);
	return CUBLAS_STATUS_SUCCESS;
}
