/* test_e2e.c - end to end: the real rematd, the real remat-train workers, driven with the
 * real rematctl (as a user would), on a temporary socket and state directory.
 *
 *  - `remat set` in the middle of a run: the reply names a step, REMAT_APPLIED arrives
 *    naming the same step, saved activations in `mem` drop, and the final weights are
 *    bitwise those of `remat-train --remat-schedule` switching at that step;
 *  - pause (the step stops advancing), resume, stop with save (a checkpoint that loads);
 *  - two clients at once, each getting its own replies while the other is subscribed.
 * Bad input, killed workers, queueing and SIGTERM are in test_daemon.c. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t_daemon.h"
#include "t_util.h"
#include "tests.h"

#define E2E_MS 90000 /* a job of this file runs to its end within this */

/* Runs rematctl --socket SOCK --json ARGS...; returns its stdout parsed as JSON (new ref).
 * Fails the test on a non-zero exit, with rematctl's output. */
static json_t *ctl_json(const td_daemon *d, ...)
{
	char *argv[16] = {(char *)t_env("REMATCTL"), "--socket", (char *)d->sock, "--json"};
	int n = 4;
	va_list ap;
	va_start(ap, d);
	for (char *a; (a = va_arg(ap, char *)) && n < 15;)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	char *out;
	int rc = t_run(argv, &out);
	ck_assert_msg(rc == 0, "rematctl %s %s: exit %d: %s", argv[4], n > 5 ? argv[5] : "", rc,
		out);
	json_error_t je;
	json_t *o = json_loads(out, JSON_DISABLE_EOF_CHECK, &je);
	ck_assert_msg(o != NULL, "rematctl %s: not JSON: %s", argv[4], out);
	free(out);
	return o;
}

static json_int_t int_at(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	ck_assert_msg(json_is_integer(v), "'%s' missing or not an integer", key);
	return json_integer_value(v);
}

/* Polls `rematctl status` until the job's step reaches `step` or its state is `state`. */
static json_t *wait_status(const td_daemon *d, const char *job, int step, const char *state)
{
	long t0 = td_ms();
	for (;;) {
		json_t *st = ctl_json(d, "status", job, NULL);
		const char *s = json_string_value(json_object_get(st, "state"));
		if ((step >= 0 && int_at(st, "step") >= step) || (state && s && !strcmp(s, state)))
			return st;
		ck_assert_msg(s && strcmp(s, "failed") != 0, "job %s failed: %s", job,
			json_string_value(json_object_get(st, "reason")));
		ck_assert_msg(td_ms() - t0 < E2E_MS, "job %s: step %lld, state %s after %d ms", job,
			(long long)int_at(st, "step"), s, E2E_MS);
		json_decref(st);
		td_sleep_ms(20);
	}
}

static char *write_spec(const td_daemon *d, const char *name, const char *save, int steps)
{
	char path[700], text[2048];
	snprintf(path, sizeof path, "%s/%s", d->dir, name);
	/* two blocks of 128 channels at 4 x 64: about 7 ms a step on 2 cores, so a request
	 * lands in the middle of a run of a few hundred steps */
	snprintf(text, sizeof text,
		"{\"name\":\"e2e\",\"model\":{\"n_layer\":2,\"n_embd\":128,\"n_head\":4,"
		"\"n_positions\":64},\"data\":{\"train\":\"" T_GPL "\",\"format\":\"bytes\"},"
		"\"batch\":4,\"seq_len\":64,\"steps\":%d,\"seed\":11,\"threads\":2,"
		"\"optim\":{\"lr\":1e-3},\"save\":{\"dir\":\"%s/%s\"}}", steps, d->dir, save);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	return strdup(path);
}

/* `rematctl events --json` in the background, its output to path; returns its pid. */
static pid_t events_start(const td_daemon *d, const char *path)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		FILE *f = freopen(path, "w", stdout);
		(void)f;
		execl(t_env("REMATCTL"), "rematctl", "--socket", d->sock, "--json", "events",
			(char *)NULL);
		_exit(127);
	}
	return pid;
}

START_TEST(test_e2e_remat_set_mid_run)
{
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	/* 400 steps, about 3 s: the job must still run through the status, mem and remat-set
	 * requests below (60 steps, 0.4 s, once finished under them on a quiet machine) */
	int steps = 400;
	char *spec = write_spec(&d, "job.json", "run1", steps);
	char evpath[700];
	snprintf(evpath, sizeof evpath, "%s/events.json", d.dir);
	pid_t ev = events_start(&d, evpath);
	td_sleep_ms(200); /* let the subscription land before the job exists */

	json_t *r = ctl_json(&d, "start", spec, NULL);
	char job[64];
	snprintf(job, sizeof job, "%s", json_string_value(json_object_get(r, "job")));
	json_decref(r);
	json_decref(wait_status(&d, job, 5, NULL));

	json_t *mem = ctl_json(&d, "mem", job, NULL);
	json_int_t act0 = int_at(json_object_get(json_object_get(mem, "categories"),
				  "activations"), "current");
	json_decref(mem);
	r = ctl_json(&d, "remat", "set", job, "h.0-1=full", "head=chunked", NULL);
	json_int_t at = int_at(r, "applies_at_step");
	json_decref(r);
	ck_assert_msg(at > 5 && at < steps, "applies_at_step %lld", (long long)at);
	json_decref(wait_status(&d, job, (int)at, NULL));
	mem = ctl_json(&d, "mem", job, NULL);
	json_int_t act1 = int_at(json_object_get(json_object_get(mem, "categories"),
				  "activations"), "current");
	json_decref(mem);
	ck_assert_msg(act1 < act0 / 2, "activations %lld -> %lld bytes after h.0-1=full",
		(long long)act0, (long long)act1);
	json_decref(wait_status(&d, job, -1, "finished"));

	/* REMAT_APPLIED names the step the reply named; the first one, as the job started,
	 * the policy it started with */
	kill(ev, SIGTERM);
	td_wait_pid(ev, 5000);
	size_t n;
	char *evs = t_read_file(evpath, &n);
	int seen = 0;
	for (char *line = strtok(evs, "\n"); line; line = strtok(NULL, "\n")) {
		json_t *e = json_loads(line, 0, NULL);
		const char *name = json_string_value(json_object_get(e, "event"));
		if (name && !strcmp(name, "REMAT_APPLIED")) {
			json_t *data = json_object_get(e, "data");
			ck_assert_str_eq(json_string_value(json_object_get(data, "job")), job);
			ck_assert_int_eq(int_at(data, "step"), seen ? at : 1);
			if (!seen)
				ck_assert_str_eq(json_string_value(json_object_get(json_object_get(data,
					"policy"), "head")), "off");
			seen++;
		}
		json_decref(e);
	}
	free(evs);
	ck_assert_msg(seen == 2, "%d REMAT_APPLIED events for %s, want the start's and one",
		seen, job);

	/* the same switch made by remat-train alone gives the same bits */
	char *spec2 = write_spec(&d, "job2.json", "run2", steps);
	char sched[64];
	snprintf(sched, sizeof sched, "%lld:h.0-1=full;head=chunked", (long long)at - 1);
	char *argv[] = {(char *)t_env("REMAT_TRAIN"), "--remat-schedule", sched, spec2, NULL};
	char *out;
	int rc = t_run(argv, &out);
	ck_assert_msg(rc == 0, "remat-train: %s", out);
	free(out);
	char p1[800], p2[800];
	snprintf(p1, sizeof p1, "%s/run1/step_%08d/model.safetensors", d.dir, steps);
	snprintf(p2, sizeof p2, "%s/run2/step_%08d/model.safetensors", d.dir, steps);
	size_t n1, n2;
	char *w1 = t_read_file(p1, &n1), *w2 = t_read_file(p2, &n2);
	ck_assert_msg(n1 == n2 && memcmp(w1, w2, n1) == 0,
		"weights after rematctl's switch differ from --remat-schedule's (step %lld)",
		(long long)at);
	free(w1);
	free(w2);
	free(spec);
	free(spec2);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_e2e_pause_resume_stop_save)
{
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	char *spec = write_spec(&d, "job.json", "ckpt", 1000000);
	json_t *r = ctl_json(&d, "start", spec, NULL);
	char job[64];
	snprintf(job, sizeof job, "%s", json_string_value(json_object_get(r, "job")));
	json_decref(r);
	json_decref(wait_status(&d, job, 2, NULL));

	r = ctl_json(&d, "pause", job, NULL);
	json_int_t at = int_at(r, "applies_at_step");
	json_decref(r);
	json_t *st = wait_status(&d, job, -1, "paused");
	json_int_t step = int_at(st, "step");
	json_decref(st);
	ck_assert_msg(step == at - 1, "paused after step %lld, the reply said before %lld",
		(long long)step, (long long)at);
	td_sleep_ms(300);
	st = ctl_json(&d, "status", job, NULL);
	ck_assert_int_eq(int_at(st, "step"), step);
	json_decref(st);

	json_decref(ctl_json(&d, "resume", job, NULL));
	json_decref(wait_status(&d, job, (int)step + 2, NULL));

	r = ctl_json(&d, "stop", job, "--save", NULL);
	const char *cp = json_string_value(json_object_get(r, "checkpoint"));
	ck_assert_msg(cp != NULL, "job-stop --save returned no checkpoint");
	char ckpt[700];
	snprintf(ckpt, sizeof ckpt, "%s", cp);
	char p[900];
	snprintf(p, sizeof p, "%s/model.safetensors", ckpt);
	ck_assert_msg(access(p, R_OK) == 0, "%s: %s", p, strerror(errno));
	json_int_t final = int_at(r, "step");
	json_decref(r);
	st = wait_status(&d, job, -1, "stopped");
	ck_assert_int_eq(int_at(st, "step"), final);
	json_decref(st);

	/* the checkpoint loads: a fine-tuning run starts from it */
	char text[1600], path[700];
	snprintf(path, sizeof path, "%s/resume.json", d.dir);
	snprintf(text, sizeof text, "{\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":\""
		T_GPL "\",\"format\":\"bytes\"},\"batch\":4,\"seq_len\":64,\"steps\":1,"
		"\"threads\":2}", ckpt);
	FILE *f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	char *argv[] = {(char *)t_env("REMAT_TRAIN"), path, NULL};
	char *out;
	ck_assert_msg(t_run(argv, &out) == 0, "loading %s: %s", ckpt, out);
	free(out);
	free(spec);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_e2e_two_clients)
{
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	td_conn a = td_open(&d), b = td_open(&d);
	const char *job = td_job_start(&a, T_TINY_SPEC, NULL);
	char jb[64];
	snprintf(jb, sizeof jb, "%s", job);
	json_t *rep = td_request(&a, "{\"execute\":\"subscribe\",\"arguments\":{\"job\":\"%s\"},"
				      "\"id\":\"a\"}", jb);
	td_expect_return(rep);
	json_decref(rep);
	td_wait_step(&a, jb);
	/* b asks while a listens: b's replies carry b's ids, a sees events and no reply */
	for (int i = 0; i < 20; i++) {
		char line[256];
		snprintf(line, sizeof line, "{\"execute\":\"%s\",\"arguments\":{\"job\":\"%s\"},"
			"\"id\":%d}", i % 2 ? "mem-stats" : "job-status", jb, 100 + i);
		td_send(&b, line);
		json_t *rep = td_reply(&b, T_READ_MS);
		ck_assert_int_eq(json_integer_value(json_object_get(rep, "id")), 100 + i);
		td_expect_return(rep);
		json_decref(rep);
	}
	/* a keeps receiving STEP events (the job runs on) and never one of b's replies: read
	 * until a few events have come, however slow the machine is today */
	int events = 0;
	for (json_t *m; events < 3 && (m = td_read_msg(&a, T_READ_MS));) {
		ck_assert_msg(json_object_get(m, "event") != NULL, "client a got a reply it did not "
								 "ask for");
		events++;
		json_decref(m);
	}
	ck_assert_msg(events == 3, "the subscribed client got %d events", events);
	json_decref(td_request(&b, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\"},"
				   "\"id\":1}", jb));
	td_close(&a);
	td_close(&b);
	td_daemon_stop(&d);
}
END_TEST

Suite *suite_e2e(void)
{
	Suite *s = suite_create("e2e");
	TCase *tc = tcase_create("rematctl");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_e2e_remat_set_mid_run);
	tcase_add_test(tc, test_e2e_pause_resume_stop_save);
	tcase_add_test(tc, test_e2e_two_clients);
	suite_add_tcase(s, tc);
	return s;
}
