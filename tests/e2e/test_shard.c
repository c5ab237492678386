/* test_shard.c - a sharded optimizer ("parallel": {"shard": "optimizer"}, ZeRO stage 1)
 * and the gradient sum overlapped with the backward ("bucket_mb"), under `mpirun
 * --oversubscribe`, one thread a rank, alone and started by rematd:
 *
 *  - the sum in buckets small enough for many in a step of the tiny model gives the bits of
 *    the sum after the backward: 2 ranks against one process with grad_accum 2, 3 ranks,
 *    grad_accum 2 on 2 ranks (each stage added to the step's sum as it is made);
 *  - its weights and moments are the unsharded run's, bit for bit: 2 ranks against one
 *    process with grad_accum 2, 3 ranks against 3 unsharded, bf16 (where it runs) and LoRA
 *    (a frozen base: the weights go round through the gradient) against 2 unsharded;
 *  - its checkpoint, saved every 10 steps (the moments gathered on rank 0), resumes in one
 *    process, and one process's resumes on 2 sharded ranks, to the same bits;
 *  - through rematd: each rank holds its part of the moments (mem-stats' optimizer bytes,
 *    exactly), a ckpt-save mid-run gathers them whole, and the job steps on after it.
 * Skipped, with one line, as the mpi suite is.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "eng_config.h"
#include "eng_tensors.h"
#include "t_daemon.h"
#include "t_mpi.h"
#include "t_util.h"
#include "tests.h"

#define STEPS 20
#define SHARD2 "\"parallel\":{\"ranks\":2,\"shard\":\"optimizer\"},"
#define NEED(check) T_MPI_NEED("shard", check)

/* The run of spec keys `extra` on np ranks (one process: 1), saved under dir/name; the
 * path of its step-`step` checkpoint into ck (700 bytes). */
static void run(const char *dir, const char *name, const char *extra, const char *save_extra,
	int np, int step, char *ck)
{
	char file[64];
	snprintf(file, sizeof file, "%s.json", name);
	char *spec = t_mpi_spec(dir, file, extra, name, STEPS);
	if (save_extra[0]) { /* into "save", after its "dir" */
		size_t n;
		char *t = t_read_file(spec, &n), text[4096];
		char *at = strstr(t, "\"save\":{");
		ck_assert_ptr_nonnull(at);
		snprintf(text, sizeof text, "%.*s\"save\":{%s,%s", (int)(at - t), t, save_extra,
			at + strlen("\"save\":{"));
		t_write_file(spec, text, strlen(text));
		free(t);
	}
	if (np == 1) {
		t_mpi_train1(spec);
	} else {
		char *out;
		int rc = t_mpirun(spec, np, 0, &out);
		size_t len = strlen(out);
		ck_assert_msg(rc == 0, "mpirun -np %d %s: exit %d:\n...%s", np, name, rc,
			out + (len > 2000 ? len - 2000 : 0));
		free(out);
	}
	snprintf(ck, 700, "%s/%s/step_%08d", dir, name, step);
	free(spec);
}

/* Two runs that must give the same weights and moments: the spec keys of each, the ranks
 * of the first (one process: 1) and of the second, bf16 or not */
typedef struct pair {
	const char *what, *extra[2];
	int np[2], bf16;
} pair;

static void same_pairs(const pair *pairs, size_t n)
{
	td_daemon d;
	td_daemon_paths(&d);
	for (size_t i = 0; i < n; i++) {
		if (pairs[i].bf16 && !t_bf16_here("shard"))
			continue;
		char a[700], b[700], na[32], nb[32];
		snprintf(na, sizeof na, "a%zu", i);
		snprintf(nb, sizeof nb, "b%zu", i);
		run(d.dir, na, pairs[i].extra[0], "", pairs[i].np[0], STEPS, a);
		run(d.dir, nb, pairs[i].extra[1], "", pairs[i].np[1], STEPS, b);
		t_same_weights(a, b, pairs[i].what);
	}
}

START_TEST(test_shard_equal)
{
	NEED(t_mpi_missing);
	static const pair pairs[] = {
		{"2 sharded ranks against one process with grad_accum 2",
			{"\"grad_accum\":2,", SHARD2}, {1, 2}, 0},
		{"3 sharded ranks against 3 unsharded", {"\"parallel\":{\"ranks\":3},",
			"\"parallel\":{\"ranks\":3,\"shard\":\"optimizer\"},"}, {3, 3}, 0},
		{"LoRA on 2 sharded ranks against 2 unsharded",
			{"\"lora\":{\"r\":4,\"targets\":[\"c_attn\",\"c_fc\"]},\"parallel\":{"
			 "\"ranks\":2},", "\"lora\":{\"r\":4,\"targets\":[\"c_attn\",\"c_fc\"]},"
			 SHARD2}, {2, 2}, 0},
		{"bf16 on 2 sharded ranks against 2 unsharded", {"\"precision\":\"bf16\","
			"\"parallel\":{\"ranks\":2},", "\"precision\":\"bf16\"," SHARD2},
			{2, 2}, 1},
	};
	same_pairs(pairs, sizeof pairs / sizeof pairs[0]);
}
END_TEST

START_TEST(test_shard_buckets)
{
	NEED(t_mpi_missing);
#define SMALL "\"bucket_mb\":0.01" /* 2621 floats: 51 buckets of tiny's 132864 */
	static const pair pairs[] = {
		{"2 ranks summing in buckets against one process with grad_accum 2",
			{"\"grad_accum\":2,", "\"parallel\":{\"ranks\":2," SMALL "},"}, {1, 2}, 0},
		{"3 ranks summing in buckets against 3 after the backward",
			{"\"parallel\":{\"ranks\":3,\"bucket_mb\":0},",
			 "\"parallel\":{\"ranks\":3," SMALL "},"}, {3, 3}, 0},
		{"grad_accum 2 on 2 ranks in buckets against the same after the backward",
			{"\"grad_accum\":2,\"parallel\":{\"ranks\":2,\"bucket_mb\":0},",
			 "\"grad_accum\":2,\"parallel\":{\"ranks\":2," SMALL "},"}, {2, 2}, 0},
		{"2 sharded ranks in buckets against 2 after the backward",
			{"\"parallel\":{\"ranks\":2,\"bucket_mb\":0},",
			 "\"parallel\":{\"ranks\":2,\"shard\":\"optimizer\"," SMALL "},"}, {2, 2},
			0},
	};
#undef SMALL
	same_pairs(pairs, sizeof pairs / sizeof pairs[0]);
}
END_TEST

START_TEST(test_shard_resume_across_ranks)
{
	NEED(t_mpi_missing);
	td_daemon d;
	td_daemon_paths(&d);
	char one[700], sh[700], one10[700], res[700], text[2048], path[800];
	run(d.dir, "one", "\"grad_accum\":2,", "", 1, STEPS, one);
	/* saved at step 10 by 2 sharded ranks, and by one process */
	run(d.dir, "sh", SHARD2, "\"every\":10", 2, 10, sh);
	run(d.dir, "one10", "\"grad_accum\":2,", "\"every\":10", 1, 10, one10);
	static const struct {
		const char *from, *name, *parallel, *what;
	} ways[] = {
		{"sh", "r1", "", "saved by 2 sharded ranks at step 10, resumed by one process"},
		{"one10", "r2", SHARD2, "saved by one process at step 10, resumed by 2 sharded "
					"ranks"},
	};
	for (int i = 0; i < 2; i++) {
		snprintf(text, sizeof text,
			"{\"model\":{\"init_from\":\"%s/%s/step_00000010\",\"resume\":true},%s"
			"\"data\":{\"train\":\"" T_GPL "\",\"format\":\"bytes\"},\"batch\":2,"
			"\"seq_len\":32,\"steps\":%d,\"threads\":1,\"optim\":{\"lr\":1e-3},"
			"\"save\":{\"dir\":\"%s/%s\"}}", d.dir, ways[i].from, ways[i].parallel,
			STEPS, d.dir, ways[i].name);
		snprintf(path, sizeof path, "%s/%s.json", d.dir, ways[i].name);
		t_write_file(path, text, strlen(text));
		if (i == 0) {
			t_mpi_train1(path);
		} else {
			t_mpirun2(path, 0);
		}
		snprintf(res, sizeof res, "%s/%s/step_%08d", d.dir, ways[i].name, STEPS);
		t_same_weights(one, res, ways[i].what);
	}
	/* the gathered moments of step 10 are one process's */
	t_same_weights(one10, sh, "step 10 saved by 2 sharded ranks against one process");
}
END_TEST

/* mem-stats' optimizer bytes of rank r now, and the ranks' count into *n */
static long long rank_optimizer(td_conn *c, const char *job, int r, int *n)
{
	json_t *m = td_request(c, "{\"execute\":\"mem-stats\",\"arguments\":{\"job\":\"%s\"}}",
		job);
	json_t *ranks = json_object_get(td_expect_return(m), "ranks");
	*n = (int)json_array_size(ranks);
	long long v = json_integer_value(json_object_get(json_object_get(json_object_get(
		json_array_get(ranks, (size_t)r), "categories"), "optimizer"), "current"));
	json_decref(m);
	return v;
}

START_TEST(test_shard_daemon)
{
	NEED(t_mpi_slots_missing);
	td_daemon d;
	td_conn c;
	char id[16], spec[700];
	td_daemon_paths(&d);
	t_mpi_long_job(&d, &c, NULL, SHARD2, id, spec);
	/* each rank its part of tiny's trainable floats, 2 moments of 4 bytes */
	eng_config cfg;
	eng_err e;
	size_t ngrad, lo, hi;
	ck_assert_int_eq(eng_config_preset("tiny", &cfg, &e), 0);
	eng_model_floats(&cfg, &ngrad);
	for (int r = 0; r < 2; r++) {
		int n;
		eng_config_opt_part(ngrad, 2, r, &lo, &hi);
		long long got = rank_optimizer(&c, id, r, &n);
		ck_assert_int_eq(n, 2);
		ck_assert_msg(got == (long long)(8 * (hi - lo)) && 2 * (hi - lo) < ngrad + 64,
			"rank %d holds %lld bytes of moments: its part of %zu floats is [%zu, %zu)",
			r, got, ngrad, lo, hi);
	}
	/* a save mid-run gathers the moments whole on rank 0; the ranks step on after it */
	json_t *m = td_request(&c, "{\"execute\":\"ckpt-save\",\"arguments\":{\"job\":\"%s\","
		"\"name\":\"mid\"}}", id);
	int saved = (int)json_integer_value(json_object_get(td_expect_return(m), "step"));
	json_decref(m);
	char path[800];
	struct stat st;
	snprintf(path, sizeof path, "%s/two/mid/optimizer.safetensors", d.dir);
	ck_assert_msg(stat(path, &st) == 0 && (size_t)st.st_size > 8 * ngrad,
		"%s: %lld bytes, the moments of %zu floats need %zu", path,
		(long long)st.st_size, ngrad, 8 * ngrad);
	long long step = 0;
	for (long t0 = td_ms(); step <= saved + 2 && td_ms() - t0 < 30000; td_sleep_ms(50)) {
		json_t *r = td_request(&c, "{\"execute\":\"job-status\",\"arguments\":{\"job\":"
			"\"%s\"}}", id);
		step = json_integer_value(json_object_get(td_expect_return(r), "step"));
		json_decref(r);
	}
	ck_assert_msg(step > saved + 2, "the job stopped stepping after the save at step %d "
		"(at %lld)", saved, step);
	json_decref(td_request(&c, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\","
		"\"save\":false}}", id));
	json_decref(td_wait_state(&c, id, "stopped", 60000));
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

Suite *suite_shard(void)
{
	Suite *s = suite_create("shard");
	TCase *tc = tcase_create("shard");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_shard_equal);
	tcase_add_test(tc, test_shard_buckets);
	tcase_add_test(tc, test_shard_resume_across_ranks);
	tcase_add_test(tc, test_shard_daemon);
	suite_add_tcase(s, tc);
	return s;
}
