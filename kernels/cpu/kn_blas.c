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
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Declared by OpenBLAS's cblas.h in recent versions; repeated here for older headers. */
extern char *openblas_get_corename(void);
extern char *openblas_get_config(void);
extern int openblas_get_parallel(void);

static int kn_threads; /* 0 until kn_set_threads: then OpenMP's own default applies */

#define KN_REEXEC_ENV "REMAT_BLAS_REEXEC" /* set on the re-executed process: never twice */
#define KN_FALLBACK_FROM_ENV "REMAT_BLAS_DETECTED" /* what OpenBLAS had picked, for --version */

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
	static char desc[256];
	static const char *par[] = {"serial", "pthreads", "openmp"};
	int p = openblas_get_parallel();
	const char *from = getenv(KN_FALLBACK_FROM_ENV);
	char why[96] = "";
	if (from && getenv(KN_REEXEC_ENV))
		snprintf(why, sizeof why, ", set by remat: OpenBLAS had picked %.40s", from);
	snprintf(desc, sizeof desc, "OpenBLAS (%s; kernel %s%s; %s)", openblas_get_config(),
		openblas_get_corename(), why, (p >= 0 && p <= 2) ? par[p] : "unknown threading");
	return desc;
}

const char *kn_blas_better_kernel(const char *corename, int has_avx2, int has_fma)
{
	/* OpenBLAS's pre-AVX x86 kernels: what DYNAMIC_ARCH builds fall back to */
	static const char *const generic[] = {"Prescott", "Core2", "Penryn", "Dunnington",
		"Nehalem", "Atom", "Katmai", "Coppermine", "Northwood", "Banias", "Opteron",
		"Opteron_SSE3", "Barcelona", "Bobcat"};
	if (!corename || !has_avx2 || !has_fma)
		return NULL;
	for (size_t i = 0; i < sizeof generic / sizeof generic[0]; i++)
		if (strcasecmp(corename, generic[i]) == 0)
			return "Haswell";
	return NULL;
}

void kn_blas_fix_kernel(char **argv)
{
	if (getenv("OPENBLAS_CORETYPE") || getenv(KN_REEXEC_ENV))
		return; /* the user chose, or we already did */
	__builtin_cpu_init();
	const char *core = openblas_get_corename();
	const char *better = kn_blas_better_kernel(core, __builtin_cpu_supports("avx2"),
		__builtin_cpu_supports("fma"));
	if (!better)
		return;
	setenv("OPENBLAS_CORETYPE", better, 1);
	setenv(KN_REEXEC_ENV, "1", 1);
	setenv(KN_FALLBACK_FROM_ENV, core, 1);
	execv("/proc/self/exe", argv);
	/* exec failed: carry on with the slow kernel, and say so */
	fprintf(stderr, "remat: OpenBLAS picked its generic '%s' kernel and remat could not "
			"restart with %s; set OPENBLAS_CORETYPE=%s for full speed\n", core, better,
		better);
	unsetenv("OPENBLAS_CORETYPE");
}

/* C(M,N) = alpha op(A) op(B) + beta C, row-major */
void kn_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
	int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
	cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
		trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
