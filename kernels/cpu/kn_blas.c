/* kn_blas.c - thread count and the one sgemm wrapper of the CPU backend.
 *
 * Every matmul of the engine goes through kn_sgemm, so the library behind it can change
 * (OpenBLAS today; BLIS or oneDNN are candidates measured by `make bench`) without touching
 * a kernel. Legend of kn.h applies. Not a place for hand-written matmul loops.
 */
#include "kn.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>

/* Declared by OpenBLAS's cblas.h in recent versions; repeated here for older headers. */
extern char *openblas_get_corename(void);
extern char *openblas_get_config(void);
extern int openblas_get_parallel(void);

static int kn_threads; /* 0 until kn_set_threads: then OpenMP's own default applies */

void kn_set_threads(int n)
{
	if (n < 1)
		n = 1;
	kn_threads = n;
	/* Fixed team sizes: a dynamic team would change the partition of static loops. */
	omp_set_dynamic(0);
	omp_set_num_threads(n);
	openblas_set_num_threads(n);
}

int kn_get_threads(void)
{
	/* Before kn_set_threads, a parallel region gets omp_get_max_threads() threads, and
	 * per-thread scratch must be sized for that many. */
	return kn_threads ? kn_threads : omp_get_max_threads();
}

const char *kn_blas_describe(void)
{
	static char desc[160];
	static const char *par[] = {"serial", "pthreads", "openmp"};
	int p = openblas_get_parallel();
	snprintf(desc, sizeof desc, "OpenBLAS (%s; kernel %s; %s)", openblas_get_config(),
		openblas_get_corename(), (p >= 0 && p <= 2) ? par[p] : "unknown threading");
	return desc;
}

/* C(M,N) = alpha op(A) op(B) + beta C, row-major */
void kn_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
	int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
	cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
		trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
