/* test_check.c - the start-time check through rematd's job-start: what the start of a job
 * would refuse is refused by job-start, with a message that names the file and never quotes
 * it; what it allows but warns about comes back in the reply's "warnings".
 *
 * What it covers: a Hugging Face init_from whose model.safetensors is cut short, garbage, a
 * FIFO (refused at once: nothing waits on a writer), a link to nothing or (a root
 * rematd's --group peer asking) to a file only root may read, of another shape than its
 * config.json, or a shard of a sharded model cut short; an init_from that is not
 * there, named as given; a memory.limit below the least any policy needs (the planner's
 * figure); a section typo with its "did you mean"; threads above the CPUs the worker may use
 * (a warning, and the job starts; rematctl start and remat-train alone print it on
 * stderr). Each is a job-start of the real rematd with the real remat-train --check;
 * nothing is queued for a refused spec.
 * The binaries come from REMATD, REMATCTL and REMAT_TRAIN; scratch files go to REMAT_TMP;
 * the model is the reference tiny checkpoint of REMAT_TESTDATA.
 */
#include "tests.h"

#include <errno.h>
#include <grp.h>
#include <jansson.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t_daemon.h"
#include "t_util.h"

#define TINY_DIR "reference/tiny" /* config.json, model.safetensors, train.bin */

/* A spec of a tiny job from init_from, training on the reference tokens, with extra keys
 * (", \"k\": v" or ""). malloc'd. */
static char *spec_from(const char *init_from, const char *extra)
{
	char *train = t_data(TINY_DIR "/train.bin");
	size_t n = strlen(init_from) + strlen(train) + strlen(extra) + 256;
	char *s = malloc(n);
	ck_assert_ptr_nonnull(s);
	snprintf(s, n, "{\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":\"%s\"},"
		"\"batch\":2,\"seq_len\":32,\"steps\":1%s}", init_from, train, extra);
	free(train);
	return s;
}

static char *path2(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);
	ck_assert_ptr_nonnull(p);
	snprintf(p, n, "%s/%s", dir, name);
	return p;
}

/* A copy of the reference tiny checkpoint's config.json in a fresh directory, and its
 * model.safetensors cut to len bytes (all of it for (size_t)-1); nothing when len is 0. */
static char *hf_dir(const char *prefix, size_t len)
{
	char *dir = t_tmp_dir(prefix), *src = t_data(TINY_DIR "/config.json");
	char *dst = path2(dir, "config.json");
	size_t n;
	char *buf = t_read_file(src, &n);
	t_write_file(dst, buf, n);
	free(buf), free(dst), free(src);
	if (len) {
		src = t_data(TINY_DIR "/model.safetensors");
		dst = path2(dir, "model.safetensors");
		buf = t_read_file(src, &n);
		t_write_file(dst, buf, len < n ? len : n);
		free(buf), free(dst), free(src);
	}
	return dir;
}

/* job-start of spec is refused as InvalidParameter with every needle (NULL-terminated) in
 * its description and never `secret` (may be NULL); nothing is queued. */
static void expect_refused(td_conn *c, const char *spec, const char *secret, ...)
{
	va_list ap;
	json_t *r = td_request(c, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":%s}}", spec);
	const char *desc = td_expect_error(r, "InvalidParameter");
	va_start(ap, secret);
	for (const char *n = va_arg(ap, const char *); n; n = va_arg(ap, const char *))
		ck_assert_msg(strstr(desc, n), "job-start's refusal '%s' lacks '%s'", desc, n);
	va_end(ap);
	ck_assert_msg(!secret || !strstr(desc, secret), "'%s' quotes the file", desc);
	json_decref(r);
	r = td_request(c, "{\"execute\":\"job-list\"}");
	ck_assert_uint_eq(json_array_size(json_object_get(td_expect_return(r), "jobs")), 0);
	json_decref(r);
}

static void real_daemon(td_daemon *d)
{
	const char *extra[] = {"--worker", t_env("REMAT_TRAIN"), NULL};
	td_daemon_paths(d);
	td_daemon_start(d, extra);
}

/* A damaged Hugging Face model.safetensors, each kind: refused by job-start, not once the
 * job runs */
START_TEST(test_check_hf_damaged)
{
	td_daemon d;
	real_daemon(&d);
	td_conn c = td_open(&d);
	size_t n;
	char *src = t_data(TINY_DIR "/model.safetensors");
	free(t_read_file(src, &n));

	/* cut in its data section, and in its header */
	char *dir = hf_dir("chk_cut", n - 100), *spec = spec_from(dir, "");
	expect_refused(&c, spec, NULL, "model.safetensors", "past the end of the data section",
		NULL);
	free(spec), free(dir);
	dir = hf_dir("chk_cuthead", 100), spec = spec_from(dir, "");
	expect_refused(&c, spec, NULL, "model.safetensors", "past the end of the file", NULL);
	free(spec), free(dir);

	/* garbage: a header length and text that is not JSON, never quoted */
	dir = hf_dir("chk_garbage", 0), spec = spec_from(dir, "");
	char *p = path2(dir, "model.safetensors");
	t_write_file(p, "\x07\0\0\0\0\0\0\0notjson", 15);
	expect_refused(&c, spec, "notjson", "model.safetensors", "not valid JSON", NULL);

	/* a FIFO: refused at once (no writer is waited for), a link to nothing */
	unlink(p);
	ck_assert_int_eq(mkfifo(p, 0600), 0);
	long t0 = td_ms();
	expect_refused(&c, spec, NULL, "model.safetensors", "FIFO", NULL);
	ck_assert_int_lt(td_ms() - t0, T_READ_MS);
	unlink(p);
	ck_assert_int_eq(symlink("/nonexistent/blob", p), 0);
	expect_refused(&c, spec, NULL, "model.safetensors", "No such file", NULL);
	free(p), free(spec), free(dir);

	/* another model's weights: config.json says n_embd 64, the file's wte is 64 wide */
	dir = hf_dir("chk_shape", (size_t)-1), spec = spec_from(dir, "");
	p = path2(dir, "config.json");
	size_t cl;
	char *cfg = t_read_file(p, &cl), *at = strstr(cfg, "\"n_embd\": 64");
	ck_assert_ptr_nonnull(at);
	memcpy(at + strlen("\"n_embd\": "), "32", 2); /* n_head 4 still divides 32 */
	t_write_file(p, cfg, cl);
	expect_refused(&c, spec, NULL, "model.safetensors", "has shape", NULL);
	free(cfg), free(p), free(spec), free(dir), free(src);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

/* A sharded model: each shard's header checked against the index */
START_TEST(test_check_hf_shard)
{
	td_daemon d;
	real_daemon(&d);
	td_conn c = td_open(&d);
	/* one shard of everything, cut short, named by the index */
	char *dir = hf_dir("chk_shard", 0), *spec = spec_from(dir, "");
	char *src = t_data(TINY_DIR "/model.safetensors"), *p = path2(dir, "model-1.safetensors");
	size_t n;
	char *buf = t_read_file(src, &n);
	t_write_file(p, buf, n - 100);
	json_t *hdr = json_loadb(buf + 8, (size_t)(unsigned char)buf[0] |
		(size_t)(unsigned char)buf[1] << 8 | (size_t)(unsigned char)buf[2] << 16, 0, NULL);
	ck_assert_ptr_nonnull(hdr);
	json_t *map = json_object(), *v;
	const char *name;
	json_object_foreach(hdr, name, v)
		if (strcmp(name, "__metadata__") != 0)
			json_object_set_new(map, name, json_string("model-1.safetensors"));
	char *ip = path2(dir, "model.safetensors.index.json");
	json_t *index = json_pack("{s:o}", "weight_map", map);
	ck_assert_int_eq(json_dump_file(index, ip, 0), 0);
	expect_refused(&c, spec, NULL, "model-1.safetensors", "past the end", NULL);
	/* whole again: the job starts */
	t_write_file(p, buf, n);
	json_t *r = td_request(&c, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":%s}}",
		spec);
	td_expect_return(r);
	json_decref(r);
	json_decref(index), json_decref(hdr);
	free(ip), free(buf), free(p), free(src), free(spec), free(dir);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

/* init_from missing; memory.limit too small; a section typo */
START_TEST(test_check_spec_refused)
{
	td_daemon d;
	real_daemon(&d);
	td_conn c = td_open(&d);
	char *dir = t_tmp_dir("chk_missing"), *gone = path2(dir, "no-such-model");
	char *spec = spec_from(gone, "");
	json_t *r = td_request(&c, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":%s}}", spec);
	const char *desc = td_expect_error(r, "InvalidParameter");
	ck_assert_msg(strstr(desc, gone) && strstr(desc, "no such directory") &&
		!strstr(desc, "config.json"), "%s", desc);
	json_decref(r);
	free(spec), free(gone), free(dir);

	/* the tiny job needs about 3.6 MiB with every block full and the head chunked */
	char *ref = t_data(TINY_DIR);
	spec = spec_from(ref, ", \"memory\": {\"limit\": \"3MiB\"}");
	expect_refused(&c, spec, NULL, "memory.limit 3.0 MiB is too small", "needs at least",
		"every block full", NULL);
	free(spec);
	spec = spec_from(ref, ", \"remat\": {\"sections\": {\"hed\": \"chunked\"}}");
	expect_refused(&c, spec, NULL, "'hed'", "did you mean 'head'?", NULL);
	free(spec);
	spec = spec_from(ref, ", \"remat\": {\"sections\": {\"h.x\": \"full\"}}");
	expect_refused(&c, spec, NULL, "'h.x'", "did you mean h.N", NULL);
	free(spec);
	/* enough memory: the same job starts */
	spec = spec_from(ref, ", \"memory\": {\"limit\": \"8MiB\"}");
	r = td_request(&c, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":%s}}", spec);
	td_expect_return(r);
	json_decref(r);
	free(spec), free(ref);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

/* threads above the CPUs the worker may use: the job starts, with a warning */
START_TEST(test_check_threads_warning)
{
	cpu_set_t set;
	ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
	int cpus = CPU_COUNT(&set);
	td_daemon d;
	real_daemon(&d);
	td_conn c = td_open(&d);
	char *ref = t_data(TINY_DIR), extra[64], want[96];
	snprintf(extra, sizeof extra, ", \"threads\": %d", cpus + 1);
	char *spec = spec_from(ref, extra);
	json_t *r = td_request(&c, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":%s}}", spec);
	json_t *ret = td_expect_return(r), *w = json_object_get(ret, "warnings");
	ck_assert_msg(json_array_size(w) == 1, "no warnings in %s", json_dumps(ret, 0));
	snprintf(want, sizeof want, "threads %d exceeds the %d CPU", cpus + 1, cpus);
	const char *line = json_string_value(json_array_get(w, 0));
	ck_assert_msg(line && strstr(line, want) && strstr(line, "sched_getaffinity"), "%s",
		line ? line : "(not a string)");
	json_decref(r);
	/* rematctl start prints it on stderr; remat-train run alone too */
	char *dir = t_tmp_dir("chk_threads"), *job = path2(dir, "job.json"), *out;
	t_write_file(job, spec, strlen(spec));
	char *argv[] = {(char *)t_env("REMATCTL"), "--socket", d.sock, "start", job, NULL};
	ck_assert_int_eq(t_run(argv, &out), 0);
	ck_assert_msg(strstr(out, "rematctl: warning: ") && strstr(out, want), "%s", out);
	free(out);
	const char *args[] = {job, NULL};
	ck_assert_int_eq(t_train_run(&out, 1, args), 0);
	ck_assert_msg(strstr(out, "remat-train: warning: ") && strstr(out, want), "%s", out);
	free(out), free(job), free(dir);
	free(spec);
	/* as many as there are: no warning */
	snprintf(extra, sizeof extra, ", \"threads\": %d", cpus);
	spec = spec_from(ref, extra);
	r = td_request(&c, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":%s}}", spec);
	ck_assert_ptr_null(json_object_get(td_expect_return(r), "warnings"));
	json_decref(r);
	free(spec), free(ref);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

/* A root rematd's --group peer names a Hugging Face directory it may read whose
 * model.safetensors links to a file only root may read: the check, run as the peer, opens
 * it and refuses the job, naming the file */
START_TEST(test_check_hf_unreadable)
{
	if (geteuid() != 0) {
		fprintf(stderr, "test_check_hf_unreadable: skipped (not root)\n");
		return;
	}
	td_daemon d;
	td_daemon_paths(&d);
	ck_assert_int_eq(chmod(d.dir, 0711), 0);
	if (!td_peer_can_reach("test_check_hf_unreadable", d.dir))
		return;
	char *out;
	int rc;
	const char *extra[] = {"--worker", t_env("REMAT_TRAIN"), "--group", TD_PEER_GROUP, NULL};
	td_daemon_start(&d, extra);
	/* the peer's model directory, and root's copy of the weights beside it */
	char *hf = path2(d.dir, "hf"), *priv = path2(d.dir, "root-only.safetensors");
	char *src = t_data(TINY_DIR "/config.json"), *cfg = path2(hf, "config.json");
	size_t n;
	char *buf = t_read_file(src, &n);
	ck_assert_int_eq(mkdir(hf, 0755), 0);
	t_write_file(cfg, buf, n);
	free(buf), free(src);
	src = t_data(TINY_DIR "/model.safetensors");
	buf = t_read_file(src, &n);
	t_write_file(priv, buf, n);
	ck_assert_int_eq(chmod(priv, 0600), 0);
	char *link = path2(hf, "model.safetensors");
	ck_assert_int_eq(symlink(priv, link), 0);
	char *train = t_data(TINY_DIR "/train.bin"), *job = path2(d.dir, "job.json"), spec[8192];
	snprintf(spec, sizeof spec, "{\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":"
		"\"%s\"},\"batch\":2,\"seq_len\":32,\"steps\":1}", hf, train);
	t_write_file(job, spec, strlen(spec));
	ck_assert_int_eq(chmod(job, 0644), 0);
	char *argv[] = {(char *)t_env("REMATCTL"), "--socket", d.sock, "start", job, NULL};
	rc = td_run_as_peer(argv, &out);
	ck_assert_msg(rc == 1 && strstr(out, link) && strstr(out, "Permission denied"),
		"a link to a root-only model.safetensors: status %d: %s", rc, out);
	free(out);
	td_conn c = td_open(&d);
	json_t *r = td_request(&c, "{\"execute\":\"job-list\"}");
	ck_assert_uint_eq(json_array_size(json_object_get(td_expect_return(r), "jobs")), 0);
	json_decref(r);
	td_close(&c);
	td_daemon_stop(&d);
	free(job), free(train), free(link), free(buf), free(src), free(cfg), free(priv), free(hf);
}
END_TEST

Suite *suite_check(void)
{
	Suite *s = suite_create("check");
	TCase *tc = tcase_create("job-start");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_check_hf_damaged);
	tcase_add_test(tc, test_check_hf_shard);
	tcase_add_test(tc, test_check_hf_unreadable);
	tcase_add_test(tc, test_check_spec_refused);
	tcase_add_test(tc, test_check_threads_warning);
	suite_add_tcase(s, tc);
	return s;
}
