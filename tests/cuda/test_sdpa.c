/* test_sdpa.c - kc_sdpa (cuDNN's fused causal attention, kernels/cuda/kc_sdpa.cu) against
 * a straightforward float64 reference computed on the host.
 *
 * How: random q, k, v and dout, uniform in [-1, 1] and rounded to bf16 so that the device
 * and the reference see the very same numbers. The reference is the definition, one (b, h,
 * t) row at a time in double: scores, causal softmax, its log-sum-exp, P v; backward from
 * P recomputed the same way, D = rowsum(dout * out), dS = P (dP - D) / sqrt(hs). It is
 * itself checked first, on the host, against central differences of its own forward.
 * Outputs are prefilled with NaN bytes, so an element cuDNN leaves unwritten fails.
 *
 * Tolerances (bf16 keeps 8 significant bits: unit roundoff u = 2^-8 = 0.0039):
 *  - stats: 1e-3 absolute. cuDNN computes them in float from exact inputs (expected error
 *    about 1e-5); a causal mask off by one moves row t's log-sum-exp by about 1/t, far more
 *    than 1e-3 for the early rows of every shape (checked below on T=100: 0.004 or more
 *    for every row).
 *  - out: max|err| / max|ref| <= 2^-6. The probabilities are rounded to bf16 before the
 *    P v matmul (error u * sum_j P_j |v_j| <= u max|v|) and out itself is rounded (u |out|):
 *    at most 2u = 2^-7 of max|v| ~ max|out|; twice that for margin.
 *  - dq, dk, dv: max|err| / max|ref| <= 2^-5 each. Each is a sum of products with one factor
 *    rounded to bf16 (P for dv, dS for dq and dk) and the result rounded, and dS has both
 *    signs, so the sums cancel more than out's. D comes from the out the device produced
 *    (bf16), exactly as the device's backward computes it, so the comparison measures the
 *    backward alone.
 * Measured when this test was written, with a float64 emulation of that bf16 pipeline (P
 * and dS rounded before their matmuls, outputs rounded) on these very inputs: out 0.33 to
 * 0.37 %, dq 0.31 to 0.48 %, dk 0.27 to 0.43 %, dv 0.23 to 0.39 % of max|ref| over the four
 * shapes; against the same reference, a backward with its mask off by one is off by 41 %
 * (dv) to 156 % (dq), one without the rowsum term D by 69 % or more (dq, dk), and a
 * forward with its mask off by one by 110 % (out). So the tolerances sit 4x (out) and 6x
 * (gradients) above the rounding of a correct pipeline and 10x or more below those bugs.
 *
 * Without a GPU: the host checks run (refused shapes, the reference's own gradient check,
 * that the tolerances tell a broken mask apart, and both graphs through cuDNN's engine
 * support checks for a described sm90 and sm80 device, kc_sdpa_check_offline), and the
 * device test prints one line "...: skipped: no CUDA device: ..." and passes. A failure
 * names the tensor, its worst element and the error. Set CUDNN_LOGERR_DBG=1
 * CUDNN_LOGDEST_DBG=stderr to have cuDNN say why it refused a graph.
 */
#include "../unit/tests.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#include "eng_st.h"
#include "kc.h"

/* kc_sdpa.cu's test support, not in kc.h. */
int kc_sdpa_check_offline(const char *device_json, int B, int NH, int T, int hs, int *n_fwd,
	int *n_bwd, char *err, size_t errlen);

#define TIMEOUT   300          /* seconds per test: cuDNN builds its plans for each shape */
#define TOL_STATS 1e-3         /* absolute, on the log-sum-exp */
#define TOL_OUT   (1.0 / 64.0) /* max|err| / max|ref| of out */
#define TOL_GRAD  (1.0 / 32.0) /* max|err| / max|ref| of dq, dk, dv */
#define FD_H      1e-5         /* central-difference step of the reference check */
#define FD_TOL    1e-7         /* its max|err| / max|grad| (measured: 2.3e-11) */
#define SEED      0x5eed2024u

/* The shapes of the device test and of the offline check: B, NH, T, hs. */
static const int shapes[][4] = {
	{2, 4, 64, 64},
	{2, 4, 256, 64},
	{2, 4, 100, 64}, /* T not a multiple of 64 */
	{1, 2, 37, 128}, /* the largest head size, odd T */
};
#define N_SHAPES (sizeof(shapes) / sizeof(shapes[0]))

/* ---- random numbers (bf16 conversions: eng_st.h) ---- */

static uint64_t rng_state = SEED;

static double rng_uniform(void) /* [-1, 1) */
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* n bf16-exact values in [-1, 1): as floats and as bf16 bits */
static void fill_bf16(float *f, uint16_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		b[i] = eng_bf16_from_f32((float)rng_uniform());
		f[i] = eng_bf16_to_f32(b[i]);
	}
}

/* ---- the reference (double) ----
 * qkv (B,T,3C), out and dout (B,T,C), lse (B,NH,T), dqkv (B,T,3C). `ahead` keys after the
 * query are let through: 0 is the causal mask; 1 is the off-by-one mask of the checks. */

/* p(T) = softmax row t of (b, h); returns the log-sum-exp of the scaled scores */
static double ref_row(double *p, const double *qkv, int T, int C, int hs, int b, int h, int t,
	int ahead)
{
	const double *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
	double scale = 1.0 / sqrt((double)hs), mx = -INFINITY, sum = 0.0;
	int n = t + ahead + 1 < T ? t + ahead + 1 : T; /* keys 0 .. n-1 */

	for (int u = 0; u < n; u++) {
		const double *k = qkv + ((size_t)b * T + u) * 3 * C + C + h * hs;
		double s = 0.0;
		for (int d = 0; d < hs; d++)
			s += q[d] * k[d];
		p[u] = s * scale;
		mx = p[u] > mx ? p[u] : mx;
	}
	for (int u = 0; u < n; u++) {
		p[u] = exp(p[u] - mx);
		sum += p[u];
	}
	for (int u = 0; u < T; u++)
		p[u] = u < n ? p[u] / sum : 0.0;
	return mx + log(sum);
}

static void ref_forward(double *out, double *lse, const double *qkv, int B, int T, int NH,
	int hs, int ahead)
{
	int C = NH * hs;
	double *p = malloc(sizeof(double) * T);

	ck_assert(p != NULL);
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++)
			for (int t = 0; t < T; t++) {
				double *o = out + ((size_t)b * T + t) * C + h * hs;
				lse[((size_t)b * NH + h) * T + t] =
					ref_row(p, qkv, T, C, hs, b, h, t, ahead);
				for (int d = 0; d < hs; d++) {
					double a = 0.0;
					for (int u = 0; u < T; u++)
						a += p[u] *
						     qkv[((size_t)b * T + u) * 3 * C + 2 * C + h * hs + d];
					o[d] = a;
				}
			}
	free(p);
}

/* dqkv = d(sum out * dout)/d qkv, with D = rowsum(dout * out) taken from `out` as given */
static void ref_backward(double *dqkv, const double *qkv, const double *out,
	const double *dout, int B, int T, int NH, int hs)
{
	int C = NH * hs;
	double scale = 1.0 / sqrt((double)hs);
	double *p = malloc(sizeof(double) * T);

	ck_assert(p != NULL);
	memset(dqkv, 0, sizeof(double) * (size_t)B * T * 3 * C);
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++)
			for (int t = 0; t < T; t++) {
				size_t rq = ((size_t)b * T + t) * 3 * C + h * hs;
				const double *dy = dout + ((size_t)b * T + t) * C + h * hs;
				const double *o = out + ((size_t)b * T + t) * C + h * hs;
				double D = 0.0;

				ref_row(p, qkv, T, C, hs, b, h, t, 0);
				for (int d = 0; d < hs; d++)
					D += dy[d] * o[d];
				for (int u = 0; u <= t; u++) {
					size_t ru = ((size_t)b * T + u) * 3 * C + h * hs;
					double dp = 0.0, ds;
					for (int d = 0; d < hs; d++)
						dp += dy[d] * qkv[ru + 2 * C + d];
					ds = p[u] * (dp - D) * scale;
					for (int d = 0; d < hs; d++) {
						dqkv[rq + d] += ds * qkv[ru + C + d];     /* dq */
						dqkv[ru + C + d] += ds * qkv[rq + d];     /* dk */
						dqkv[ru + 2 * C + d] += p[u] * dy[d];     /* dv */
					}
				}
			}
	free(p);
}

/* ---- comparisons ---- */

/* max|got - ref| / max|ref| (or max|got - ref| when absolute) over rows x run elements, rows
 * `stride` apart (a slice of an interleaved tensor); fails with the worst element */
static double compare(const char *what, const float *got, const double *ref, size_t rows,
	size_t run, size_t stride, double tol, int absolute)
{
	double worst = -1.0, maxref = 0.0, err;
	size_t wi = 0;

	for (size_t r = 0; r < rows; r++)
		for (size_t j = 0; j < run; j++) {
			size_t i = r * stride + j;
			double e = isnan(got[i]) ? INFINITY : fabs((double)got[i] - ref[i]);
			if (e > worst)
				worst = e, wi = i;
			if (fabs(ref[i]) > maxref)
				maxref = fabs(ref[i]);
		}
	err = absolute ? worst : worst / (maxref > 0.0 ? maxref : 1.0);
	ck_assert_msg(err <= tol,
		"%s: error %.3g over tolerance %.3g (worst element %zu: got %.6g, reference %.6g; "
		"max|reference| %.4g)",
		what, err, tol, wi, (double)got[wi], ref[wi], maxref);
	return err;
}

/* ---- host checks: no device needed ---- */

START_TEST(test_kc_sdpa_create_refuses_bad_shapes)
{
	static const int bad[][4] = {
		{2, 4, 64, 60},  /* hs not a multiple of 8 */
		{2, 4, 64, 136}, /* hs over 128 */
		{2, 4, 1, 64},   /* T = 1: cuDNN's backward refuses s_q = s_kv = 1 */
		{0, 4, 64, 64},  /* no batch */
		{2, 0, 64, 64},  /* no heads */
	};
	static const char *const why[] = {"multiple of 8", "multiple of 8", "T=1", "bad shape",
		"bad shape"};
	char err[512] = "";

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		kc_sdpa *s = (kc_sdpa *)&err; /* must come back NULL */
		int rc = kc_sdpa_create(&s, bad[i][0], bad[i][1], bad[i][2], bad[i][3], err,
			sizeof(err));
		ck_assert_msg(rc == -1 && s == NULL, "create(%d,%d,%d,%d) returned %d", bad[i][0],
			bad[i][1], bad[i][2], bad[i][3], rc);
		ck_assert_msg(strstr(err, why[i]) != NULL,
			"create(%d,%d,%d,%d): message '%s' lacks '%s'", bad[i][0], bad[i][1],
			bad[i][2], bad[i][3], err, why[i]);
	}
	err[0] = '\0';
	ck_assert_msg(kc_sdpa_create(NULL, 2, 4, 64, 64, err, sizeof(err)) == -1 && err[0],
		"create without a result pointer did not fail with a message");
}
END_TEST

/* The reference backward against central differences of the reference forward, on a
 * small odd shape: L = sum(out * r). */
START_TEST(test_sdpa_reference_gradient)
{
	enum { B = 1, T = 5, NH = 2, HS = 8, C = NH * HS, NQ = B * T * 3 * C, NO = B * T * C };
	static double qkv[NQ], r[NO], out[NO], lse[B * NH * T], dqkv[NQ];
	double worst = 0.0, maxg = 0.0;

	for (size_t i = 0; i < NQ; i++)
		qkv[i] = rng_uniform();
	for (size_t i = 0; i < NO; i++)
		r[i] = rng_uniform();
	ref_forward(out, lse, qkv, B, T, NH, HS, 0);
	ref_backward(dqkv, qkv, out, r, B, T, NH, HS);
	for (size_t i = 0; i < NQ; i++) {
		double keep = qkv[i], lp = 0.0, lm = 0.0, e;
		qkv[i] = keep + FD_H;
		ref_forward(out, lse, qkv, B, T, NH, HS, 0);
		for (size_t j = 0; j < NO; j++)
			lp += out[j] * r[j];
		qkv[i] = keep - FD_H;
		ref_forward(out, lse, qkv, B, T, NH, HS, 0);
		for (size_t j = 0; j < NO; j++)
			lm += out[j] * r[j];
		qkv[i] = keep;
		e = fabs((lp - lm) / (2 * FD_H) - dqkv[i]);
		worst = e > worst ? e : worst;
		maxg = fabs(dqkv[i]) > maxg ? fabs(dqkv[i]) : maxg;
	}
	ck_assert_msg(maxg > 0.0 && worst / maxg <= FD_TOL,
		"reference backward against central differences: error %.3g (tolerance %.3g)",
		worst / maxg, FD_TOL);
}
END_TEST

/* The tolerances must reject a mask off by one: the reference with one future key let
 * through, against the true one, fails the out check by far and the stats check in every
 * row that has a next key. */
START_TEST(test_sdpa_tolerances_catch_a_wrong_mask)
{
	enum { B = 2, T = 100, NH = 4, HS = 64, C = NH * HS };
	size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, nl = (size_t)B * NH * T;
	double *qkv = malloc(sizeof(double) * nq), *o0 = malloc(sizeof(double) * no);
	double *o1 = malloc(sizeof(double) * no), *l0 = malloc(sizeof(double) * nl);
	double *l1 = malloc(sizeof(double) * nl);
	double eo = 0.0, mo = 0.0, el = INFINITY;

	ck_assert(qkv && o0 && o1 && l0 && l1);
	for (size_t i = 0; i < nq; i++)
		qkv[i] = eng_bf16_to_f32(eng_bf16_from_f32((float)rng_uniform()));
	ref_forward(o0, l0, qkv, B, T, NH, HS, 0);
	ref_forward(o1, l1, qkv, B, T, NH, HS, 1);
	for (size_t i = 0; i < no; i++) {
		eo = fabs(o1[i] - o0[i]) > eo ? fabs(o1[i] - o0[i]) : eo;
		mo = fabs(o0[i]) > mo ? fabs(o0[i]) : mo;
	}
	for (int bh = 0; bh < B * NH; bh++)
		for (int t = 0; t < T - 1; t++) {
			double e = fabs(l1[(size_t)bh * T + t] - l0[(size_t)bh * T + t]);
			el = e < el ? e : el;
		}
	/* measured: out moves by 1.1 of its max, every row's stats by 0.0041 or more */
	ck_assert_msg(eo / mo > 10 * TOL_OUT, "off-by-one mask changes out by only %.3g",
		eo / mo);
	ck_assert_msg(el > TOL_STATS, "off-by-one mask changes some row's stats by only %.3g", el);
	free(qkv), free(o0), free(o1), free(l0), free(l1);
}
END_TEST

/* ---- the graphs against cuDNN's engines, without a GPU ---- */

/* Devices as cuDNN describes them (CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION; the keys are
 * those cuDNN 9.19 asks for): an H100/H200-class sm90 and an A100-class sm80. The numbers
 * are the public specifications; the heuristics use them to rank, the support checks need
 * the architecture and the shared memory. */
static const char *const offline_devices[][2] = {
	{"sm90",
		"{\"maxGridSize\":[2147483647,65535,65535],\"maxBlockSize\":[1024,1024,64],"
		"\"regsPerBlock\":65536,\"multiProcessorCount\":132,\"warpSize\":32,"
		"\"maxSharedMemoryPerBlock\":49152,\"maxSharedMemoryPerBlockOptin\":232448,"
		"\"reservedSharedMemoryPerBlock\":1024,\"maxRegistersPerSM\":65536,"
		"\"maxCtasPerSM\":32,\"maxThreadsPerBlock\":1024,\"maxThreadsPerSM\":2048,"
		"\"pciDeviceId\":0,\"isTccDriver\":0,\"supportCoopLaunch\":1,"
		"\"smClockRateKHz\":1980000,\"memClockRateKHz\":3201000,\"l2CacheSize\":52428800,"
		"\"deviceName\":\"NVIDIA H200\",\"deviceVer\":900,\"driverVer\":13000,"
		"\"cudaDeviceId\":0,\"totalGlobalMem\":150122151936}"},
	{"sm80",
		"{\"maxGridSize\":[2147483647,65535,65535],\"maxBlockSize\":[1024,1024,64],"
		"\"regsPerBlock\":65536,\"multiProcessorCount\":108,\"warpSize\":32,"
		"\"maxSharedMemoryPerBlock\":49152,\"maxSharedMemoryPerBlockOptin\":166912,"
		"\"reservedSharedMemoryPerBlock\":1024,\"maxRegistersPerSM\":65536,"
		"\"maxCtasPerSM\":32,\"maxThreadsPerBlock\":1024,\"maxThreadsPerSM\":2048,"
		"\"pciDeviceId\":0,\"isTccDriver\":0,\"supportCoopLaunch\":1,"
		"\"smClockRateKHz\":1410000,\"memClockRateKHz\":1593000,\"l2CacheSize\":41943040,"
		"\"deviceName\":\"NVIDIA A100-SXM4-80GB\",\"deviceVer\":800,\"driverVer\":13000,"
		"\"cudaDeviceId\":0,\"totalGlobalMem\":85899345920}"},
};

/* cuDNN's support checks need libcuda: the driver when there is one, else the toolkit's
 * stub (it answers nothing, which the checks do not ask for; loading a kernel would fail).
 * Loaded with its soname libcuda.so.1, so that cuDNN's own dlopen finds it. */
static int load_libcuda(void)
{
	static const char *const paths[] = {"libcuda.so.1", "/usr/local/cuda/lib64/stubs/libcuda.so",
		"/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so",
		"/usr/lib/x86_64-linux-gnu/stubs/libcuda.so"};

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		if (dlopen(paths[i], RTLD_NOW | RTLD_GLOBAL))
			return 1;
	return 0;
}

/* Both graphs of every test shape pass the support checks of some cuDNN engine on sm90
 * and sm80: the descriptors, data types, strides and the pattern are what the fused
 * attention engines take (what only a device can check, the numbers, is the next test's).
 * Measured with cuDNN 9.19: 4 forward and 3 backward configs on sm90 (2 and 2 for hs 128),
 * 3 and 3 on sm80 (1 and 2). */
START_TEST(test_kc_sdpa_graphs_accepted_offline)
{
#ifdef __SANITIZE_ADDRESS__
	/* `make asan`: cuDNN's engine libraries keep allocations LeakSanitizer calls leaks
	 * (measured: 0.8 MB in 11 blocks, inside cuDNN); memory errors are still caught */
	__lsan_disable();
#endif
	if (!load_libcuda()) {
		fprintf(stderr, "test_kc_sdpa_graphs_accepted_offline: skipped: no libcuda (driver "
				"or the toolkit's stub) for cuDNN's support checks\n");
		return;
	}
	for (size_t d = 0; d < sizeof(offline_devices) / sizeof(offline_devices[0]); d++)
		for (size_t i = 0; i < N_SHAPES; i++) {
			char err[1024] = "";
			int nf = 0, nb = 0;
			int rc = kc_sdpa_check_offline(offline_devices[d][1], shapes[i][0],
				shapes[i][1], shapes[i][2], shapes[i][3], &nf, &nb, err, sizeof(err));
			if (rc == 1) {
				fprintf(stderr,
					"test_kc_sdpa_graphs_accepted_offline: skipped: %s\n", err);
				return;
			}
			ck_assert_msg(rc == 0, "%s B=%d NH=%d T=%d hs=%d: %s",
				offline_devices[d][0], shapes[i][0], shapes[i][1], shapes[i][2],
				shapes[i][3], err);
		}
}
END_TEST

/* ---- on the device ---- */

#define CUDA_OK(call)                                                                         \
	do {                                                                                  \
		cudaError_t e_ = (call);                                                      \
		ck_assert_msg(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));    \
	} while (0)

/* One shape: forward and backward on the device against the reference. */
static void sdpa_check_shape(int B, int NH, int T, int hs)
{
	int C = NH * hs;
	size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, nl = (size_t)B * NH * T;
	float *fq = malloc(sizeof(float) * nq), *fo = malloc(sizeof(float) * no);
	float *fdo = malloc(sizeof(float) * no), *fl = malloc(sizeof(float) * nl);
	float *fdq = malloc(sizeof(float) * nq);
	uint16_t *bq = malloc(2 * nq), *bo = malloc(2 * no), *bdo = malloc(2 * no);
	uint16_t *bdq = malloc(2 * nq);
	double *dq = malloc(sizeof(double) * nq), *ro = malloc(sizeof(double) * no);
	double *rl = malloc(sizeof(double) * nl), *rdq = malloc(sizeof(double) * nq);
	double *dout = malloc(sizeof(double) * no);
	void *d_qkv, *d_out, *d_dout, *d_dqkv, *d_ws;
	float *d_stats;
	cudaStream_t st;
	kc_sdpa *s = NULL;
	char err[1024] = "";
	double e_st, e_out, e_dq, e_dk, e_dv;
	size_t ws;

	ck_assert(fq && fo && fdo && fl && fdq && bq && bo && bdo && bdq && dq && ro && rl &&
		  rdq && dout);
	fill_bf16(fq, bq, nq);
	fill_bf16(fdo, bdo, no);
	for (size_t i = 0; i < nq; i++)
		dq[i] = fq[i];
	for (size_t i = 0; i < no; i++)
		dout[i] = fdo[i];

	ck_assert_msg(kc_sdpa_create(&s, B, NH, T, hs, err, sizeof(err)) == 0,
		"kc_sdpa_create(B=%d NH=%d T=%d hs=%d): %s", B, NH, T, hs, err);
	ws = kc_sdpa_workspace_bytes(s);
	ck_assert_msg(ws >= (size_t)B * NH * T * (hs + 1) * sizeof(float),
		"workspace %zu bytes cannot hold softmax_sum and the dq accumulator", ws);
	CUDA_OK(cudaStreamCreate(&st));
	CUDA_OK(cudaMalloc(&d_qkv, 2 * nq));
	CUDA_OK(cudaMalloc(&d_out, 2 * no));
	CUDA_OK(cudaMalloc(&d_dout, 2 * no));
	CUDA_OK(cudaMalloc(&d_dqkv, 2 * nq));
	CUDA_OK(cudaMalloc((void **)&d_stats, sizeof(float) * nl));
	CUDA_OK(cudaMalloc(&d_ws, ws));
	CUDA_OK(cudaMemcpy(d_qkv, bq, 2 * nq, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d_dout, bdo, 2 * no, cudaMemcpyHostToDevice));
	/* NaN everywhere an output goes: what cuDNN leaves unwritten shows */
	CUDA_OK(cudaMemset(d_out, 0xff, 2 * no));
	CUDA_OK(cudaMemset(d_dqkv, 0xff, 2 * nq));
	CUDA_OK(cudaMemset(d_stats, 0xff, sizeof(float) * nl));
	CUDA_OK(cudaMemset(d_ws, 0xff, ws));

	/* a misaligned pointer is refused before cuDNN sees it */
	ck_assert_msg(kc_sdpa_forward(s, st, (char *)d_qkv + 2, d_out, d_stats, d_ws) == -1 &&
			      strstr(kc_error(), "aligned"),
		"a misaligned qkv was not refused: '%s'", kc_error());

	ck_assert_msg(kc_sdpa_forward(s, st, d_qkv, d_out, d_stats, d_ws) == 0,
		"kc_sdpa_forward: %s", kc_error());
	CUDA_OK(cudaStreamSynchronize(st));
	CUDA_OK(cudaMemcpy(bo, d_out, 2 * no, cudaMemcpyDeviceToHost));
	CUDA_OK(cudaMemcpy(fl, d_stats, sizeof(float) * nl, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < no; i++)
		fo[i] = eng_bf16_to_f32(bo[i]);
	ref_forward(ro, rl, dq, B, T, NH, hs, 0);
	e_st = compare("stats", fl, rl, nl, 1, 1, TOL_STATS, 1);
	e_out = compare("out", fo, ro, no, 1, 1, TOL_OUT, 0);

	ck_assert_msg(kc_sdpa_backward(s, st, d_qkv, d_out, d_dout, d_stats, d_dqkv, d_ws) == 0,
		"kc_sdpa_backward: %s", kc_error());
	CUDA_OK(cudaStreamSynchronize(st));
	CUDA_OK(cudaMemcpy(bdq, d_dqkv, 2 * nq, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < nq; i++)
		fdq[i] = eng_bf16_to_f32(bdq[i]);
	/* D from the bf16 out the device made and used */
	for (size_t i = 0; i < no; i++)
		ro[i] = fo[i];
	ref_backward(rdq, dq, ro, dout, B, T, NH, hs);
	/* dq, dk, dv: runs of C in rows of 3C */
	e_dq = compare("dq", fdq, rdq, (size_t)B * T, C, 3 * C, TOL_GRAD, 0);
	e_dk = compare("dk", fdq + C, rdq + C, (size_t)B * T, C, 3 * C, TOL_GRAD, 0);
	e_dv = compare("dv", fdq + 2 * C, rdq + 2 * C, (size_t)B * T, C, 3 * C, TOL_GRAD, 0);
	fprintf(stderr,
		"test_kc_sdpa_matches_reference: B=%d NH=%d T=%d hs=%d: stats %.2g (tolerance "
		"%.2g), out %.2g (%.2g), dq %.2g, dk %.2g, dv %.2g (%.2g); %s\n",
		B, NH, T, hs, e_st, TOL_STATS, e_out, TOL_OUT, e_dq, e_dk, e_dv, TOL_GRAD,
		kc_sdpa_describe(s));

	kc_sdpa_destroy(s);
	CUDA_OK(cudaFree(d_qkv));
	CUDA_OK(cudaFree(d_out));
	CUDA_OK(cudaFree(d_dout));
	CUDA_OK(cudaFree(d_dqkv));
	CUDA_OK(cudaFree(d_stats));
	CUDA_OK(cudaFree(d_ws));
	CUDA_OK(cudaStreamDestroy(st));
	free(fq), free(fo), free(fdo), free(fl), free(fdq), free(bq), free(bo), free(bdo);
	free(bdq), free(dq), free(ro), free(rl), free(rdq), free(dout);
}

START_TEST(test_kc_sdpa_matches_reference)
{
	struct cudaDeviceProp prop;
	int count = 0;
	cudaError_t ce = cudaGetDeviceCount(&count);

	if (ce != cudaSuccess || count == 0) {
		fprintf(stderr, "test_kc_sdpa_matches_reference: skipped: no CUDA device: %s\n",
			ce != cudaSuccess ? cudaGetErrorString(ce) : "none found");
		return;
	}
	CUDA_OK(cudaGetDeviceProperties(&prop, 0));
	if (prop.major < 8) {
		/* cuDNN's fused attention needs sm80: the refusal is the promise to check */
		kc_sdpa *s = NULL;
		char err[512] = "";
		ck_assert_msg(kc_sdpa_create(&s, 2, 4, 64, 64, err, sizeof(err)) == -1 &&
				      strstr(err, "compute capability"),
			"create on compute capability %d.%d: '%s'", prop.major, prop.minor, err);
		fprintf(stderr,
			"test_kc_sdpa_matches_reference: skipped: %s has compute capability %d.%d, "
			"cuDNN's fused attention needs 8.0 (its refusal checked)\n",
			prop.name, prop.major, prop.minor);
		return;
	}
	for (size_t i = 0; i < N_SHAPES; i++)
		sdpa_check_shape(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3]);
}
END_TEST

Suite *suite_sdpa(void)
{
	Suite *s = suite_create("sdpa");
	TCase *tc = tcase_create("host");

	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_test(tc, test_kc_sdpa_create_refuses_bad_shapes);
	tcase_add_test(tc, test_sdpa_reference_gradient);
	tcase_add_test(tc, test_sdpa_tolerances_catch_a_wrong_mask);
	tcase_add_test(tc, test_kc_sdpa_graphs_accepted_offline);
	suite_add_tcase(s, tc);

	tc = tcase_create("device");
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_test(tc, test_kc_sdpa_matches_reference);
	suite_add_tcase(s, tc);
	return s;
}
