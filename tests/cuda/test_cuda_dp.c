/* test_cuda_dp.c - device cuda beyond one micro-batch a step (suite "cuda-dp"): gradient
 * accumulation on the GPU, and data-parallel ranks on GPUs (eng_cuda_dp.c).
 *
 *  - Accumulation: the step's gradient of micro-batches a and b is ga + gb bit for bit
 *    (each computed alone, then kc_add), and scaling it by 1/2 is exact; grad_accum 2 trains
 *    as the CPU's grad_accum 2 within the CPU-against-GPU float32 tolerances of test_cuda.c
 *    (loss 1e-5, weights 1e-4 relative L2).
 *  - Ranks: mpirun -np 2 remat-train with device cuda gives the weights and moments of one
 *    process with grad_accum 2, bit for bit: through host memory in float32 and in bf16,
 *    both with the engine's attention (cuDNN's backward is not deterministic run to run),
 *    and by whichever path auto chose; remat-train's banner names the path (job-status'
 *    "allreduce" is the same string). REMAT_CUDA_COMM=nccl: with a GPU a rank NCCL runs and
 *    gives the same bits (a line says so when libnccl.so.2 does not load); where two ranks
 *    share a GPU the job fails, saying so.
 * Without a usable GPU, or without mpirun for the rank tests, each says so in one line.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "t_cuda.h"
#include "t_mpi.h"
#include "t_util.h"
#include "tests.h"
#include "eng_cuda.h"

#define DP_STEPS 6
#define DP_TIMEOUT 300 /* seconds: three GPU processes start in a test (CUDA, cuBLASLt) */
#define TINY_GPL(extra)                                                                    \
	"{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"/usr/share/common-licenses/"     \
	"GPL-3\",\"format\":\"bytes\"},\"batch\":4,\"seq_len\":64,\"steps\":8,\"seed\":7,"        \
	"\"threads\":2,\"optim\":{\"lr\":1e-3},\"schedule\":\"constant\"," extra "}"

static float *step_grads(eng_cuda *g, size_t n)
{
	eng_err err;
	float *x = malloc(n * sizeof(float));
	ck_assert_ptr_nonnull(x);
	ck_assert_msg(eng_cuda_get_grads(g, x, &err) == 0, "%s", err.msg);
	return x;
}

/* micro-batch (inp, tgt) forward and backward, then accumulated as its k-th */
static void micro(eng_cuda *g, const uint32_t *inp, const uint32_t *tgt, int k)
{
	eng_err err;
	float loss;
	ck_assert_msg(eng_cuda_step(g, inp, tgt, &loss, &err) == 0 &&
		eng_cuda_accumulate(g, k, &err) == 0, "%s", err.msg);
}

START_TEST(test_cuda_accum_is_the_sum)
{
	setenv("REMAT_CUDA_PRECISION", "fp32", 1);
	setenv("REMAT_CUDA_ATTENTION", "own", 1);
	eng_trainer tr;
	eng_err err;
	t_trainer(&tr, TINY_GPL("\"device\":\"cuda\",\"grad_accum\":2"));
	size_t nf = tr.model.nfloats;
	uint32_t inp[2][4 * 64], tgt[2][4 * 64];
	t_next(&tr.train, inp[0], tgt[0]);
	t_next(&tr.train, inp[1], tgt[1]);
	micro(eng_backend_gpu(tr.be), inp[0], tgt[0], 0);
	float *ga = step_grads(eng_backend_gpu(tr.be), nf);
	micro(eng_backend_gpu(tr.be), inp[1], tgt[1], 0);
	float *gb = step_grads(eng_backend_gpu(tr.be), nf);
	micro(eng_backend_gpu(tr.be), inp[0], tgt[0], 0);
	micro(eng_backend_gpu(tr.be), inp[1], tgt[1], 1);
	float *sum = step_grads(eng_backend_gpu(tr.be), nf);
	size_t bad = 0;
	for (size_t i = 0; i < nf; i++) {
		float want = ga[i] + gb[i];
		bad += memcmp(&want, &sum[i], sizeof want) != 0;
	}
	ck_assert_msg(bad == 0, "%zu of %zu gradient elements are not ga + gb", bad, nf);
	ck_assert_msg(eng_cuda_scale_grads(eng_backend_gpu(tr.be), 0.5f, &err) == 0, "%s",
		err.msg);
	float *half = step_grads(eng_backend_gpu(tr.be), nf);
	for (size_t i = 0; i < nf; i++) {
		float want = sum[i] * 0.5f;
		bad += memcmp(&want, &half[i], sizeof want) != 0;
	}
	ck_assert_msg(bad == 0, "%zu of %zu elements of the sum times 1/2 differ", bad, nf);
	free(ga);
	free(gb);
	free(sum);
	free(half);
	eng_trainer_free(&tr);
}
END_TEST

START_TEST(test_cuda_accum_matches_cpu)
{
	setenv("REMAT_CUDA_PRECISION", "fp32", 1);
	setenv("REMAT_CUDA_ATTENTION", "own", 1);
	eng_trainer cpu, gpu;
	eng_step_stats a, b;
	eng_err err;
	t_trainer(&cpu, TINY_GPL("\"device\":\"cpu\",\"grad_accum\":2"));
	t_trainer(&gpu, TINY_GPL("\"device\":\"cuda\",\"grad_accum\":2"));
	for (int s = 0; s < 3; s++) {
		ck_assert_msg(eng_trainer_step_as(&cpu, NULL, &a, &err) == 0, "%s", err.msg);
		ck_assert_msg(eng_trainer_step_as(&gpu, NULL, &b, &err) == 0, "%s", err.msg);
		double e = fabs((double)b.loss - a.loss) / fabs((double)a.loss);
		ck_assert_msg(e <= 1e-5, "step %d: loss %.8g on the GPU, %.8g on the CPU", s + 1,
			(double)b.loss, (double)a.loss);
		ck_assert_int_eq(b.micro_batches, 2);
	}
	ck_assert_msg(eng_trainer_sync_host(&gpu, &err) == 0, "%s", err.msg);
	double e = t_rel_l2(gpu.model.params, cpu.model.params, cpu.model.nfloats);
	if (getenv("REMAT_CUDA_VERBOSE"))
		fprintf(stderr, "cuda-dp: grad_accum 2, weights after 3 steps: rel L2 %.3e "
				"(tolerance 1e-4)\n", e);
	ck_assert_msg(e <= 1e-4, "weights after 3 steps: rel L2 %.3e against the CPU", e);
	eng_trainer_free(&gpu);
	eng_trainer_free(&cpu);
}
END_TEST

/* ---- ranks ---- */

#define NEED_MPI()                                                                         \
	do {                                                                               \
		const char *why_ = t_mpi_missing();                                        \
		if (why_) {                                                                \
			fprintf(stderr, "cuda-dp: rank tests skipped: %s\n", why_);        \
			return;                                                            \
		}                                                                          \
	} while (0)

/* The line of remat-train's banner that says how the gradients are summed, checked. */
static void banner_says(const char *out, const char *want)
{
	const char *l = strstr(out, "gradients summed by ");
	ck_assert_msg(l, "no 'gradients summed by' in:\n%s", out);
	const char *end = strchr(l, '\n');
	int len = end ? (int)(end - l) : (int)strlen(l);
	fprintf(stderr, "cuda-dp: %.*s\n", len, l);
	ck_assert_msg(!want || strstr(l, want), "'%.*s' does not say '%s'", len, l, want);
}

/* 2 ranks of batch B (comm: REMAT_CUDA_COMM, NULL for auto) against one process with
 * grad_accum 2, precision as REMAT_CUDA_PRECISION; says how they were summed (want: what
 * the banner must say, or NULL). 0, or with comm "nccl" and no libnccl.so.2 to load, 1:
 * the job failed saying so. */
static int two_ranks_equal(const char *name, const char *precision, const char *comm,
	const char *want)
{
	char a[700], b[700], *out, pre[64];
	setenv("REMAT_CUDA_PRECISION", precision, 1);
	setenv("REMAT_CUDA_ATTENTION", "own", 1);
	if (comm)
		setenv("REMAT_CUDA_COMM", comm, 1);
	snprintf(pre, sizeof pre, "cuda-dp-%s-", name);
	char *dir = t_tmp_dir(pre);
	char *one = t_mpi_spec(dir, "one.json", "\"device\":\"cuda\",\"grad_accum\":2,", "one",
		DP_STEPS);
	char *two = t_mpi_spec(dir, "two.json", "\"device\":\"cuda\",\"parallel\":{\"ranks\":2},",
		"two", DP_STEPS);
	int rc = t_mpirun(two, 2, 0, &out);
	size_t len = strlen(out);
	if (rc != 0 && comm && strcmp(comm, "nccl") == 0 && strstr(out, "REMAT_CUDA_COMM=nccl: ") &&
		strstr(out, "libnccl.so.2")) {
		free(out);
		free(one);
		free(two);
		free(dir);
		return 1;
	}
	t_mpi_train1(one);
	ck_assert_msg(rc == 0, "mpirun -np 2, device cuda: exit %d:\n...%s", rc,
		out + (len > 3000 ? len - 3000 : 0));
	banner_says(out, want);
	snprintf(a, sizeof a, "%s/one/step_%08d", dir, DP_STEPS);
	snprintf(b, sizeof b, "%s/two/step_%08d", dir, DP_STEPS);
	t_same_weights(a, b, precision);
	free(out);
	free(one);
	free(two);
	free(dir);
	return 0;
}

/* the host path in both precisions, and what auto chooses (NCCL with a GPU a rank) */
static const struct {
	const char *name, *precision, *comm, *want;
} dp_cases[] = {
	{"host-fp32", "fp32", "host", "not NCCL: REMAT_CUDA_COMM=host"},
	{"host-bf16", "bf16", "host", "not NCCL: REMAT_CUDA_COMM=host"},
	{"auto-fp32", "fp32", NULL, NULL}, /* want: auto_choice() */
};

/* What auto must say here: with fewer GPUs than ranks, the host path and why (libnccl.so.2
 * missing, or ranks sharing a GPU); with more, NCCL where the build and libnccl.so.2 allow
 * it, which the job's own line tells (NULL: any path, named) */
static const char *auto_choice(void)
{
	eng_cuda_info info;
	eng_cuda_probe(&info);
	return info.ngpus < 2 ? "(not NCCL: " : NULL;
}

START_TEST(test_cuda_dp_two_ranks_equal_accum)
{
	NEED_MPI();
	const char *want = dp_cases[_i].comm ? dp_cases[_i].want : auto_choice();
	two_ranks_equal(dp_cases[_i].name, dp_cases[_i].precision, dp_cases[_i].comm, want);
}
END_TEST

/* NCCL asked for: it runs with a GPU a rank; where the ranks share one, the job says why
 * it cannot. */
START_TEST(test_cuda_dp_nccl)
{
	NEED_MPI();
	eng_cuda_info info;
	eng_cuda_probe(&info);
	if (info.ngpus >= 2) {
		if (two_ranks_equal("nccl", "fp32", "nccl", "by nccl "))
			fprintf(stderr, "cuda-dp: NCCL test skipped: libnccl.so.2 does not load here "
					"(the job said so)\n");
		return;
	}
	char *out;
	setenv("REMAT_CUDA_COMM", "nccl", 1);
	char *dir = t_tmp_dir("cuda-dp-nccl-shared-");
	char *two = t_mpi_spec(dir, "two.json", "\"device\":\"cuda\",\"parallel\":{\"ranks\":2},",
		"two", DP_STEPS);
	int rc = t_mpirun(two, 2, 0, &out);
	ck_assert_msg(rc != 0, "2 ranks on one GPU with REMAT_CUDA_COMM=nccl exited 0:\n%s", out);
	ck_assert_msg(strstr(out, "REMAT_CUDA_COMM=nccl: ") &&
		(strstr(out, "share a GPU") || strstr(out, "libnccl.so.2")), "%s", out);
	free(out);
	free(two);
	free(dir);
}
END_TEST

Suite *suite_cuda_dp(void)
{
	Suite *s = suite_create("cuda-dp");
	char why[320];
	TCase *tc = tcase_create("gpu");
	suite_add_tcase(s, tc);
	if (!t_cuda_usable(why, sizeof why)) {
		fprintf(stderr, "cuda-dp: GPU tests skipped: %s\n", why);
		return s;
	}
	tcase_set_timeout(tc, DP_TIMEOUT);
	tcase_add_test(tc, test_cuda_accum_is_the_sum);
	tcase_add_test(tc, test_cuda_accum_matches_cpu);
	tcase_add_loop_test(tc, test_cuda_dp_two_ranks_equal_accum, 0,
		(int)(sizeof dp_cases / sizeof dp_cases[0]));
	tcase_add_test(tc, test_cuda_dp_nccl);
	return s;
}
