/* test_budget.c - a memory budget is the process's memory, and remat keeps its word
 * (issue 27): the worker's peak resident memory, read from outside (/proc/PID/status), stays
 * under a budget set halfway between what off and the least policy hold; a save under a
 * memory.limit too small for a snapshot writes from the live tensors, the same bytes; a
 * budget no policy fits is refused (at the start and live), a remat-set over the budget is
 * refused with the reason, one that fits is held, --force hands control back, and a policy
 * asked for that a later budget overrules is reported (REMAT_FAILED).
 *
 * Memory figures, never timings. The runs are the tiny model at batch 8 x 256, where
 * activations are a third of the process (about 10 of 36..46 MB).
 */
#include "t_daemon.h"
#include "t_util.h"
#include "tests.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* tiny at 8 x 256 on GPL's bytes, 2 threads, `steps` steps; extra keys after them */
static char *wide_spec(const char *dir, const char *name, int steps, const char *extra)
{
	char path[600], text[2048];
	snprintf(path, sizeof path, "%s/%s.json", dir, name);
	snprintf(text, sizeof text, "{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"" T_GPL
		"\",\"format\":\"bytes\"},\"batch\":8,\"seq_len\":256,\"steps\":%d,\"threads\":2,"
		"\"schedule\":\"constant\"%s}", steps, extra ? extra : "");
	t_write_file(path, text, strlen(text));
	return strdup(path);
}

/* A field of /proc/PID/status in bytes ("VmHWM"), 0 when gone. */
static size_t status_bytes(pid_t pid, const char *key)
{
	char path[64], line[256];
	unsigned long kb = 0;
	size_t klen = strlen(key);
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, key, klen) && line[klen] == ':')
			sscanf(line + klen + 1, "%lu", &kb);
	if (f)
		fclose(f);
	return (size_t)kb * 1024;
}

/* remat-train --json [--remat-schedule sched] spec, its stdout into *out (malloc'd); the
 * most its VmHWM and VmRSS said while it ran, read from outside every millisecond (the
 * worker resets its high-water mark at each step: each window's peak stays readable until
 * the next step begins). Fails the test unless it exits 0. */
static size_t train_watched(const char *spec, const char *sched, char **out)
{
	char path[600];
	snprintf(path, sizeof path, "%s.out", spec);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || dup2(fd, 1) < 0)
			_exit(127);
		const char *bin = t_env("REMAT_TRAIN");
		if (sched)
			execl(bin, bin, "--json", "--remat-schedule", sched, spec, (char *)NULL);
		else
			execl(bin, bin, "--json", spec, (char *)NULL);
		_exit(127);
	}
	size_t most = 0;
	int status;
	for (;;) {
		size_t h = status_bytes(pid, "VmHWM"), r = status_bytes(pid, "VmRSS");
		most = h > most ? h : most;
		most = r > most ? r : most;
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		usleep(1000);
	}
	size_t len;
	*out = t_read_file(path, &len);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "remat-train %s: status %d\n%s",
		spec, status, *out);
	return most;
}

/* The largest integer value of "key": in the lines of out. */
static long long most_of(const char *out, const char *key)
{
	char pat[64];
	long long most = 0;
	snprintf(pat, sizeof pat, "\"%s\":", key);
	for (const char *p = strstr(out, pat); p; p = strstr(p + 1, pat)) {
		long long v = atoll(p + strlen(pat));
		most = v > most ? v : most;
	}
	return most;
}

/* The integer value of the last "key": in out. */
static long long last_of(const char *out, const char *key)
{
	char pat[64];
	const char *last = NULL;
	snprintf(pat, sizeof pat, "\"%s\":", key);
	for (const char *p = strstr(out, pat); p; p = strstr(p + 1, pat))
		last = p;
	return last ? atoll(last + strlen(pat)) : 0;
}

/* The budget halfway between off's and the least policy's peaks, both read from outside:
 * the whole run's peak (start-up included) stays under it, and off is never what it runs. */
START_TEST(test_budget_process_peak_from_outside)
{
	if (t_asan_skips("test_budget_process_peak_from_outside"))
		return;
	td_daemon d;
	char *out, extra[128];
	td_daemon_paths(&d);
	char *spec = wide_spec(d.dir, "plain", 4, NULL);
	/* their steady peaks, as the worker measured them (the start lays out the spec's
	 * policy before the schedule's first entry applies) */
	train_watched(spec, "0:off", &out);
	size_t off = (size_t)most_of(out, "rss_peak_bytes");
	free(out);
	train_watched(spec, "1:full;head=chunked", &out);
	size_t least = (size_t)last_of(out, "rss_peak_bytes");
	free(out);
	ck_assert_msg(least + (4u << 20) < off, "off %zu, least %zu: too close to test", off, least);
	size_t budget = (off + least) / 2;
	snprintf(extra, sizeof extra, ",\"remat\":{\"budget\":%zu}", budget);
	char *bspec = wide_spec(d.dir, "budget", 12, extra);
	size_t seen = train_watched(bspec, NULL, &out);
	ck_assert_msg(seen <= budget, "the process held %zu bytes under a budget of %zu (off %zu, "
		"least %zu)", seen, budget, off, least);
	/* what the worker measured of itself agrees: every step's peak within the budget */
	ck_assert_msg((size_t)most_of(out, "rss_peak_bytes") <= budget, "%s", out);
	const char *last = strrchr(out, '\n');
	while (last && last > out && !strstr(last, "\"policy\""))
		last = memrchr(out, '\n', (size_t)(last - out));
	ck_assert_msg(last && strstr(last, "\"policy\"") && !strstr(last, "\"h.0-1\":\"off\","
		"\"head\":\"off\""), "the last step ran off under a budget off does not fit: %s", out);
	free(out);
	free(spec);
	free(bspec);
}
END_TEST

/* The policy of the last step of a --json run's output (static text: "h.0-1=off,..."). */
static const char *last_policy(const char *out)
{
	static char buf[256];
	const char *p = NULL;
	for (const char *q = strstr(out, "\"policy\":{"); q; q = strstr(q + 1, "\"policy\":{"))
		p = q;
	ck_assert_ptr_nonnull(p);
	snprintf(buf, sizeof buf, "%.*s", (int)strcspn(p + 10, "}"), p + 10);
	return buf;
}

/* A budget from the cgroup counts what the kernel counts there (a fake tree): with room in
 * memory.current the controller goes on from its safe start to off; with the cgroup
 * nearly full (other processes, page cache) it keeps the least memory, though the
 * process's own would fit. */
START_TEST(test_budget_cgroup_counts_the_cgroup)
{
	td_daemon d;
	char root[600], path[800], cmd[1800], *out;
	td_daemon_paths(&d);
	snprintf(root, sizeof root, "%s/cg", d.dir);
	snprintf(cmd, sizeof cmd, "mkdir -p '%s/w'", root);
	ck_assert_int_eq(system(cmd), 0);
	snprintf(path, sizeof path, "%s/self", root);
	t_write_file(path, "0::/w\n", 6);
	setenv("REMAT_CGROUP_ROOT", root, 1);
	setenv("REMAT_PROC_CGROUP", path, 1);
	snprintf(path, sizeof path, "%s/w/memory.max", root);
	t_write_file(path, "1073741824\n", 11);
	snprintf(path, sizeof path, "%s/w/memory.current", root);
	char *spec = wide_spec(d.dir, "cg", 14, ",\"remat\":{\"budget\":\"cgroup\"}");
	t_write_file(path, "1048576\n", 8);
	train_watched(spec, NULL, &out);
	ck_assert_msg(strstr(last_policy(out), "\"h.0-1\":\"off\",\"head\":\"off\""), "room: %s",
		last_policy(out));
	free(out);
	t_write_file(path, "1072693248\n", 11); /* 1 MiB short of memory.max */
	train_watched(spec, NULL, &out);
	ck_assert_msg(strstr(last_policy(out), "\"head\":\"chunked\""), "full: %s",
		last_policy(out));
	free(out);
	unsetenv("REMAT_CGROUP_ROOT");
	unsetenv("REMAT_PROC_CGROUP");
	free(spec);
}
END_TEST

/* Two files are the same bytes. */
static void same_file(const char *a, const char *b)
{
	size_t la, lb;
	char *x = t_read_file(a, &la), *y = t_read_file(b, &lb);
	ck_assert_msg(la == lb && memcmp(x, y, la) == 0, "%s differs from %s", a, b);
	free(x);
	free(y);
}

/* memory.limit with room for the least policy but not for a snapshot beside it: the run
 * starts (it used to be refused, the snapshot counted as fixed), its saves write from the
 * live tensors, and they are the bytes of the same run's saves without a limit. */
START_TEST(test_budget_save_without_room_for_a_snapshot)
{
	td_daemon d;
	char *out, extra[1400], sa[700], sb[700];
	td_daemon_paths(&d);
	snprintf(sa, sizeof sa, "%s/free", d.dir);
	snprintf(sb, sizeof sb, "%s/limited", d.dir);
	snprintf(extra, sizeof extra, ",\"save\":{\"dir\":\"%s\",\"every\":2}", sa);
	char *spec = wide_spec(d.dir, "free", 4, extra);
	train_watched(spec, "0:full;head=chunked", &out);
	long long peak = most_of(out, "peak_bytes");
	free(out);
	char *argv[] = {(char *)t_env("REMAT_TRAIN"), "--check", spec, NULL};
	ck_assert_int_eq(t_run(argv, &out), 0);
	long long snap = most_of(out, "snapshot_bytes");
	free(out);
	ck_assert_int_gt(snap, 0);
	/* room for the least policy's steps, not for a copy of weights and moments beside it */
	snprintf(extra, sizeof extra, ",\"save\":{\"dir\":\"%s\",\"every\":2},\"memory\":{\"limit\":"
		"%lld}", sb, peak + snap / 2);
	char *lspec = wide_spec(d.dir, "limited", 4, extra);
	train_watched(lspec, "0:full;head=chunked", &out);
	ck_assert_msg(strstr(out, "\"step\":4"), "%s", out);
	free(out);
	static const char *const files[] = {"model.safetensors", "optimizer.safetensors",
		"trainer_state.json"};
	for (int step = 2; step <= 4; step += 2)
		for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
			char a[900], b[900];
			snprintf(a, sizeof a, "%s/step_%08d/%s", sa, step, files[i]);
			snprintf(b, sizeof b, "%s/step_%08d/%s", sb, step, files[i]);
			same_file(a, b);
		}
	free(spec);
	free(lspec);
}
END_TEST

/* remat-auto JOB budget_bytes B: the reply (new reference). */
static json_t *auto_to(td_conn *c, const char *job, long long bytes)
{
	return td_request(c, "{\"execute\":\"remat-auto\",\"arguments\":{\"job\":\"%s\","
		"\"budget_bytes\":%lld}}", job, bytes);
}

/* job-status' "auto" (new reference). */
static json_t *auto_of(td_conn *c, const char *job)
{
	json_t *st = td_job_status(c, job), *a = json_incref(json_object_get(st, "auto"));
	json_decref(st);
	return a;
}

/* The budget's word is kept, live: none below the least; a remat-set over it refused, one
 * that fits held; a spec's budget below the least refused at job-start. */
START_TEST(test_budget_no_yes_to_the_impossible)
{
	td_daemon d;
	char id[16], *out;
	td_conn c = td_real_job(&d, id);
	json_t *a = auto_of(&c, id);
	ck_assert(json_is_null(a));
	json_decref(a);
	/* 5 MiB: the process alone holds more; refused, nothing changed, rematctl exits 1 */
	json_t *r = auto_to(&c, id, 5 << 20);
	ck_assert_ptr_nonnull(strstr(td_expect_error(r, "InvalidParameter"), "no policy fits"));
	json_decref(r);
	a = auto_of(&c, id);
	ck_assert(json_is_null(a));
	json_decref(a);
	int rc = td_ctl(&d, &out, "remat", "auto", id, "--budget", "5MiB", NULL);
	ck_assert_msg(rc != 0 && strstr(out, "no policy fits"), "rematctl: %d %s", rc, out);
	free(out);
	/* a roomy budget: its least in the reply; a remat-set fits it and is held */
	r = auto_to(&c, id, 1LL << 30);
	long long least = json_integer_value(json_object_get(td_expect_return(r), "least_bytes"));
	json_decref(r);
	ck_assert_int_gt(least, 5 << 20);
	r = td_request(&c, "{\"execute\":\"remat-set\",\"arguments\":{\"job\":\"%s\","
		"\"sections\":{\"h.0\":\"full\"}}}", id);
	json_t *ret = td_expect_return(r);
	ck_assert_str_eq(td_str(ret, "controller"), "on");
	ck_assert_int_le(json_integer_value(json_object_get(ret, "predicted_peak_bytes")),
		1LL << 30);
	json_decref(r);
	/* just above the least (accepted): nothing fits its headroom, so a set is refused (not
	 * under a sanitizer, where the least grows as its quarantine does) */
	if (!t_asan_skips("test_budget_no_yes_to_the_impossible: a budget at the least")) {
		r = auto_to(&c, id, least + least / 50);
		td_expect_return(r);
		json_decref(r);
		r = td_request(&c, "{\"execute\":\"remat-set\",\"arguments\":{\"job\":\"%s\","
			"\"sections\":{},\"default\":\"off\"}}", id);
		ck_assert_ptr_nonnull(strstr(td_expect_error(r, "InvalidParameter"),
			"does not fit the budget"));
		json_decref(r);
		/* in force from the next boundary */
		long end = td_ms() + T_READ_MS;
		for (;;) {
			a = auto_of(&c, id);
			long long now = json_integer_value(json_object_get(a, "budget_bytes"));
			json_decref(a);
			if (now == least + least / 50)
				break;
			ck_assert_msg(td_ms() < end, "budget %lld, not %lld", now,
				least + least / 50);
			td_sleep_ms(20);
		}
	}
	/* force hands control back */
	r = td_request(&c, "{\"execute\":\"remat-set\",\"arguments\":{\"job\":\"%s\","
		"\"sections\":{},\"default\":\"off\",\"force\":true}}", id);
	ck_assert_str_eq(td_str(td_expect_return(r), "controller"), "off");
	json_decref(r);
	json_decref(td_wait_event(&c, id, "REMAT_AUTO", T_JOB_MS));
	a = auto_of(&c, id);
	ck_assert(json_is_null(a));
	json_decref(a);
	/* a spec's budget no policy fits: refused at job-start, with the least */
	r = td_request(&c, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":{\"model\":{\"preset"
		"\":\"tiny\"},\"data\":{\"train\":\"" T_GPL "\",\"format\":\"bytes\"},\"batch\":2,"
		"\"seq_len\":32,\"steps\":10,\"threads\":2,\"remat\":{\"budget\":\"4MiB\"}}}}");
	ck_assert_ptr_nonnull(strstr(td_expect_error(r, "InvalidParameter"),
		"below the least any policy needs"));
	json_decref(r);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

/* A policy asked for and overruled before its step (a new budget it does not fit): the
 * asker hears of it (REMAT_FAILED, with the reason and the policy the step ran under). */
START_TEST(test_budget_overruled_set_reported)
{
	if (t_asan_skips("test_budget_overruled_set_reported"))
		return;
	td_daemon d;
	char id[16];
	td_conn c = td_real_job(&d, id);
	json_t *r = auto_to(&c, id, 1LL << 30);
	long long least = json_integer_value(json_object_get(td_expect_return(r), "least_bytes"));
	json_decref(r);
	r = td_request(&c, "{\"execute\":\"job-pause\",\"arguments\":{\"job\":\"%s\"}}", id);
	td_expect_return(r);
	json_decref(r);
	json_decref(td_wait_state(&c, id, "paused", T_JOB_MS));
	r = td_request(&c, "{\"execute\":\"remat-set\",\"arguments\":{\"job\":\"%s\","
		"\"sections\":{},\"default\":\"off\"}}", id);
	long long at = json_integer_value(json_object_get(td_expect_return(r), "applies_at_step"));
	json_decref(r);
	r = auto_to(&c, id, least + least / 50);
	td_expect_return(r);
	json_decref(r);
	r = td_request(&c, "{\"execute\":\"job-resume\",\"arguments\":{\"job\":\"%s\"}}", id);
	td_expect_return(r);
	json_decref(r);
	json_t *ev = td_wait_event(&c, id, "REMAT_FAILED", T_JOB_MS);
	ck_assert_int_ge(json_integer_value(json_object_get(ev, "step")), at);
	ck_assert_str_eq(td_str(json_object_get(ev, "asked"), "h.0-1"), "off");
	ck_assert_str_eq(td_str(json_object_get(ev, "policy"), "head"), "chunked");
	ck_assert_msg(strlen(td_str(ev, "reason")) > 10, "%s", td_str(ev, "reason"));
	json_decref(ev);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

/* remat-plan's peak_bytes for args (a JSON fragment: "job":... or "spec":...), off for
 * every section; its memory terms must be there. */
static long long plan_peak(td_conn *c, const char *args)
{
	json_t *r = td_request(c, "{\"execute\":\"remat-plan\",\"arguments\":{%s,"
		"\"default\":\"off\",\"sections\":{\"head\":\"off\"}}}", args);
	json_t *ret = td_expect_return(r), *m = json_object_get(ret, "memory");
	ck_assert_msg(json_integer_value(json_object_get(m, "untracked")) > 0 &&
		json_integer_value(json_object_get(m, "snapshot")) > 0 &&
		json_is_object(json_object_get(m, "notes")), "%s", json_dumps(ret, 0));
	long long peak = json_integer_value(json_object_get(ret, "peak_bytes"));
	json_decref(r);
	return peak;
}

/* One plan: the same spec planned from its file, queued, and running (after its untracked
 * term was measured by steps) agree within 2 %, every term counted alike (the untracked
 * term, and the snapshot every job of rematd's has). */
START_TEST(test_budget_plans_agree)
{
	if (t_asan_skips("test_budget_plans_agree"))
		return;
	td_daemon d;
	char id[16], spec[1024], args[1100], job[16];
	td_conn c = td_real_job(&d, id); /* holds rematd's one place: the next job queues */
	snprintf(spec, sizeof spec, "{\"model\":{\"preset\":\"mini\"},\"data\":{\"train\":\""
		T_GPL "\",\"format\":\"bytes\"},\"batch\":4,\"seq_len\":128,\"steps\":1000,"
		"\"threads\":2}");
	snprintf(args, sizeof args, "\"spec\":%s", spec);
	long long from_file = plan_peak(&c, args);
	snprintf(job, sizeof job, "%s", td_job_start(&c, spec, "queued"));
	snprintf(args, sizeof args, "\"job\":\"%s\"", job);
	long long queued = plan_peak(&c, args);
	json_t *r = td_request(&c, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\","
		"\"save\":false},\"id\":3}", id);
	td_expect_return(r);
	json_decref(r);
	td_wait_step(&c, job);
	td_wait_step(&c, job); /* a step after the first: its untracked term measured */
	long long running = plan_peak(&c, args);
	printf("test_budget_plans_agree: off's peak planned from the file %.2f MiB, queued %.2f "
		"MiB, running %.2f MiB\n", from_file / 1048576.0, queued / 1048576.0,
		running / 1048576.0);
	ck_assert_msg(llabs(from_file - running) <= running / 50 && llabs(queued - running) <=
		running / 50, "peaks planned: from the file %lld, queued %lld, running %lld",
		from_file, queued, running);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

Suite *suite_budget(void)
{
	Suite *s = suite_create("budget");
	TCase *tc = tcase_create("budget");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_budget_process_peak_from_outside);
	tcase_add_test(tc, test_budget_save_without_room_for_a_snapshot);
	tcase_add_test(tc, test_budget_no_yes_to_the_impossible);
	tcase_add_test(tc, test_budget_overruled_set_reported);
	tcase_add_test(tc, test_budget_plans_agree);
	tcase_add_test(tc, test_budget_cgroup_counts_the_cgroup);
	suite_add_tcase(s, tc);
	return s;
}
