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
/* How OpenMP threads wait for work, unless the user says (OMP_WAIT_POLICY, GOMP_SPINCOUNT):
 * passive, they sleep at once. libgomp's default spins about a millisecond first, which eats
 * the core a late thread needs whenever anything else runs on the machine (a second job,
 * the checkpoint writer, another tenant): measured on 2 cores with one busy process beside
 * it, a tiny-model step took 52.7 ms at the median (p90 151 ms) spinning against 20.3 ms
 * (p90 20.5) passive. Alone, the cost of sleeping is nil on mini (990 ms either way) and
 * 15 % on the tiny model's 13 ms steps, whose parallel regions are a few microseconds. */
#define KN_WAIT_POLICY "passive"
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
	static char desc[400];
	static const char *par[] = {"serial", "pthreads", "openmp"};
	int p = openblas_get_parallel();
	const char *core = openblas_get_corename();
	const char *from = getenv(KN_FALLBACK_FROM_ENV), *env = getenv("OPENBLAS_CORETYPE");
	char why[128] = "";
	if (from && getenv(KN_REEXEC_ENV)) {
		snprintf(why, sizeof why, ", set by remat: OpenBLAS had picked %.40s", from);
	} else if (env) {
		const char *better = kn_blas_better_kernel(core, kn_cpu_features());
		if (better)
			snprintf(why, sizeof why, ", from OPENBLAS_CORETYPE=%.20s: this processor "
				"could run %s, unset it for full speed", env, better);
		else
			snprintf(why, sizeof why, ", from OPENBLAS_CORETYPE=%.20s", env);
	}
	const char *spin = getenv("GOMP_SPINCOUNT"), *wait = getenv("OMP_WAIT_POLICY");
	char omp[64] = "";
	if (wait)
		snprintf(omp, sizeof omp, ", OMP_WAIT_POLICY=%.16s", wait);
	else if (spin)
		snprintf(omp, sizeof omp, ", GOMP_SPINCOUNT=%.16s", spin);
	snprintf(desc, sizeof desc, "OpenBLAS (%s; kernel %s%s; %s%s)", openblas_get_config(),
		core, why, (p >= 0 && p <= 2) ? par[p] : "unknown threading", omp);
	return desc;
}

/* OpenBLAS x86-64 kernels by the instructions they use: 0 the pre-AVX ones that
 * DYNAMIC_ARCH builds fall back to on a processor they do not know, 1 AVX, 2 AVX2 + FMA,
 * 3 AVX-512. Names not listed are left alone. */
static const struct {
	const char *name;
	int level;
} kn_cores[] = {{"Prescott", 0}, {"Core2", 0}, {"Penryn", 0}, {"Dunnington", 0},
	{"Nehalem", 0}, {"Atom", 0}, {"Katmai", 0}, {"Coppermine", 0}, {"Northwood", 0},
	{"Banias", 0}, {"Opteron", 0}, {"Opteron_SSE3", 0}, {"Barcelona", 0}, {"Bobcat", 0},
	{"Sandybridge", 1}, {"Bulldozer", 1}, {"Piledriver", 1}, {"Steamroller", 1},
	{"Excavator", 1}, {"Haswell", 2}, {"Zen", 2}, {"SkylakeX", 3}, {"Cooperlake", 3},
	{"SapphireRapids", 3}};

static int kn_core_level(const char *name)
{
	for (size_t i = 0; name && i < sizeof kn_cores / sizeof kn_cores[0]; i++)
		if (strcasecmp(name, kn_cores[i].name) == 0)
			return kn_cores[i].level;
	return -1;
}

const char *kn_blas_best_kernel(unsigned features)
{
	if ((features & KN_CPU_AVX512) == KN_CPU_AVX512)
		return "SkylakeX";
	if ((features & (KN_CPU_AVX2 | KN_CPU_FMA)) == (KN_CPU_AVX2 | KN_CPU_FMA))
		return "Haswell";
	return NULL;
}

const char *kn_blas_better_kernel(const char *corename, unsigned features)
{
	const char *best = kn_blas_best_kernel(features);
	int have = kn_core_level(corename);
	if (!best || have < 0)
		return NULL;
	return kn_core_level(best) > have ? best : NULL;
}

unsigned kn_cpu_features(void)
{
	__builtin_cpu_init();
	unsigned f = 0;
	if (__builtin_cpu_supports("avx2"))
		f |= KN_CPU_AVX2;
	if (__builtin_cpu_supports("fma"))
		f |= KN_CPU_FMA;
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		__builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
		__builtin_cpu_supports("avx512cd"))
		f |= KN_CPU_AVX512;
	return f;
}

void kn_fix_runtime(char **argv)
{
	if (getenv(KN_REEXEC_ENV))
		return; /* we did already */
	int again = 0;
	const char *core = openblas_get_corename(), *better = NULL;
	if (!getenv("OPENBLAS_CORETYPE")) { /* else the user chose; kn_blas_describe tells */
		better = kn_blas_better_kernel(core, kn_cpu_features());
		if (better) {
			setenv("OPENBLAS_CORETYPE", better, 1);
			setenv(KN_FALLBACK_FROM_ENV, core, 1);
			again = 1;
		}
	}
	if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT")) {
		setenv("OMP_WAIT_POLICY", KN_WAIT_POLICY, 1);
		again = 1;
	}
	if (!again)
		return;
	setenv(KN_REEXEC_ENV, "1", 1);
	execv("/proc/self/exe", argv);
	/* exec failed: carry on as we are, and say what is lost */
	if (better)
		fprintf(stderr, "remat: OpenBLAS picked its '%s' kernel and remat could not "
				"restart with %s; set OPENBLAS_CORETYPE=%s for full speed\n", core,
			better, better);
	unsetenv("OPENBLAS_CORETYPE");
	unsetenv(KN_FALLBACK_FROM_ENV);
	unsetenv("OMP_WAIT_POLICY");
	unsetenv(KN_REEXEC_ENV);
}

/* C(M,N) = alpha op(A) op(B) + beta C, row-major */
void kn_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
	int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
	cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
		trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
