/* test_e2e.c - end to end: the real rematd, the real remat-train workers, driven with the
 * real rematctl (as a user would), on a temporary socket and state directory.
 *
 *  - `remat set` in the middle of a run: the reply names a step, REMAT_APPLIED arrives
 *    naming the same step, saved activations in `mem` drop, and the final weights are
 *    bitwise those of `remat-train --remat-schedule` switching at that step;
 *  - pause (the step stops advancing), resume, stop with save (a checkpoint that loads);
 *  - two clients at once, each getting its own replies while the other is subscribed;
 *  - the training loop: a job with shuffled data, grad_accum and eval paused, given a
 *    job-set and a job-eval, saved and resumed; metrics.jsonl (rematctl logs) holds every
 *    step once and every eval, the set applies at the step its reply named, a job
 *    resumed from the checkpoint taken with it reproduces the rest bit for bit, and
 *    rematctl plot draws it (text, PNG, and SVG with the set marked where it applied).
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
	t_write_file(path, text, strlen(text));
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

/* rematctl logs JOB: the job's metrics.jsonl lines, parsed, into an array (new ref). */
static json_t *logs_of(const td_daemon *d, const char *job)
{
	char *argv[] = {(char *)t_env("REMATCTL"), "--socket", (char *)d->sock, "logs",
		(char *)job, NULL};
	char *out;
	ck_assert_int_eq(t_run(argv, &out), 0);
	json_t *lines = json_array();
	for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
		json_t *o = json_loads(l, 0, NULL);
		ck_assert_msg(json_is_object(o), "logs: not a JSON object: %s", l);
		json_array_append_new(lines, o);
	}
	free(out);
	return lines;
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
	/* metrics.jsonl: the switch, once, at that step, before that step's line */
	json_t *lines = logs_of(&d, job), *o;
	size_t i, where = 0;
	int changes = 0;
	json_array_foreach(lines, i, o)
		if (json_object_get(o, "event")) {
			changes++;
			where = i;
		}
	json_t *sw = json_array_get(lines, where), *pol = json_object_get(sw, "policy");
	char *text = json_dumps(sw, JSON_COMPACT);
	ck_assert_msg(changes == 1 && int_at(sw, "step") == at && !strcmp(json_string_value(
		json_object_get(sw, "event")), "REMAT_APPLIED") && !strcmp(json_string_value(
		json_object_get(pol, "head")), "chunked") && int_at(json_array_get(lines,
		where + 1), "step") == at, "%d change lines, the last %s", changes, text);
	free(text);
	json_decref(lines);

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
	t_write_file(path, text, strlen(text));
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

/* ---- the training loop ---- */

/* A job on reference/accum's data: shuffled, grad_accum 3, eval every 5 steps over 2
 * batches; model is the inside of "model". */
static char *write_loop_spec(const td_daemon *d, const char *name, const char *model,
	const char *accum, int steps)
{
	char path[700], text[8192], *data = t_data("reference/accum");
	snprintf(path, sizeof path, "%s/%s", d->dir, name);
	snprintf(text, sizeof text,
		"{\"name\":\"loop\",\"model\":{%s},\"data\":{\"train\":\"%s/train.bin\","
		"\"val\":\"%s/val.bin\",\"shuffle\":true},\"batch\":2,\"seq_len\":24,"
		"\"steps\":%d,%s\"threads\":1,\"optim\":{\"lr\":1e-3},"
		"\"eval\":{\"every\":5,\"batches\":2},\"save\":{\"dir\":\"%s/%s.ckpt\"}}", model,
		data, data, steps, accum, d->dir, name);
	t_write_file(path, text, strlen(text));
	free(data);
	return strdup(path);
}

/* The line of lines with "step" == step that has (or, key NULL, is a step's: "loss"). */
static json_t *line_at(json_t *lines, int step, const char *key)
{
	size_t i;
	json_t *o;
	json_array_foreach(lines, i, o)
		if (json_integer_value(json_object_get(o, "step")) == step &&
			json_object_get(o, key ? key : "loss"))
			return o;
	return NULL;
}

START_TEST(test_e2e_training_loop)
{
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	int steps = 400;
	char model[4096], *data = t_data("reference/accum");
	snprintf(model, sizeof model, "\"init_from\":\"%s\"", data);
	char *spec = write_loop_spec(&d, "a.json", model, "\"grad_accum\":3,", steps);
	json_t *r = ctl_json(&d, "start", spec, NULL);
	char job[64];
	snprintf(job, sizeof job, "%s", json_string_value(json_object_get(r, "job")));
	json_decref(r);
	json_decref(ctl_json(&d, "pause", job, NULL));
	json_t *st = wait_status(&d, job, -1, "paused");
	int k = (int)int_at(st, "step");
	json_decref(st);
	ck_assert_msg(k < steps - 10, "paused at step %d of %d", k, steps);

	r = ctl_json(&d, "set", job, "lr=1e-4", "grad_clip=0.5", "eval.every=7", NULL);
	ck_assert_int_eq(int_at(r, "applies_at_step"), k + 1);
	json_decref(r);
	r = ctl_json(&d, "save", job, NULL);
	char ckpt[1024];
	snprintf(ckpt, sizeof ckpt, "%s", json_string_value(json_object_get(r, "path")));
	ck_assert_int_eq(int_at(r, "step"), k);
	json_decref(r);
	r = ctl_json(&d, "eval", job, NULL);
	ck_assert_int_eq(int_at(r, "step"), k);
	double ev = json_number_value(json_object_get(r, "val_loss"));
	json_decref(r);
	json_decref(ctl_json(&d, "resume", job, NULL));
	st = wait_status(&d, job, -1, "finished");
	ck_assert_msg(json_number_value(json_object_get(st, "val_loss")) > 0, "no val_loss in "
		"status after the end");
	json_decref(st);

	/* every step once, in order; evals every 5 to the set, every 7 after, at the end and
	 * the job-eval's; the set's lr from the step it named */
	json_t *a = logs_of(&d, job);
	int nstep = 0, last = 0;
	size_t i;
	json_t *o;
	json_array_foreach(a, i, o) {
		if (!json_object_get(o, "loss"))
			continue;
		int s = (int)int_at(o, "step");
		ck_assert_msg(s == last + 1, "metrics.jsonl: step %d after %d", s, last);
		ck_assert_int_eq(int_at(o, "micro_batches"), 3);
		ck_assert_int_eq(int_at(o, "tokens"), (json_int_t)s * 3 * 2 * 24);
		last = s;
		nstep++;
	}
	ck_assert_int_eq(nstep, steps);
	for (int s = 5; s <= k; s += 5)
		ck_assert_msg(line_at(a, s, "val_loss"), "no eval after step %d", s);
	for (int s = (k / 7 + 1) * 7; s < steps; s += 7)
		ck_assert_msg(line_at(a, s, "val_loss"), "no eval after step %d (eval.every 7)", s);
	ck_assert_ptr_nonnull(line_at(a, steps, "val_loss"));
	ck_assert(json_number_value(json_object_get(line_at(a, k, "val_loss"), "val_loss")) == ev);
	/* lr is a float32, written in its shortest text: read back to the float's bits */
	ck_assert((float)json_number_value(json_object_get(line_at(a, k + 1, NULL), "lr")) ==
		1e-4f);
	ck_assert((float)json_number_value(json_object_get(line_at(a, k, NULL), "lr")) != 1e-4f);
	/* the set itself, one line where it took effect (what plot marks); no policy changed */
	json_t *hp = line_at(a, k + 1, "event");
	ck_assert_msg(hp && !strcmp(json_string_value(json_object_get(hp, "event")),
		"HPARAMS_APPLIED") && json_real_value(json_object_get(json_object_get(hp, "set"),
		"grad_clip")) == 0.5, "no HPARAMS_APPLIED line at step %d", k + 1);
	int nchange = 0;
	json_array_foreach(a, i, o)
		nchange += json_object_get(o, "event") != NULL;
	ck_assert_int_eq(nchange, 1);

	/* resumed from the checkpoint taken with the set: the same steps, bit for bit (the
	 * spec gives neither grad_accum nor the set: the checkpoint does) */
	snprintf(model, sizeof model, "\"init_from\":\"%s\",\"resume\":true", ckpt);
	char *spec2 = write_loop_spec(&d, "b.json", model, "", steps);
	r = ctl_json(&d, "start", spec2, NULL);
	char job2[64];
	snprintf(job2, sizeof job2, "%s", json_string_value(json_object_get(r, "job")));
	json_decref(r);
	json_decref(wait_status(&d, job2, -1, "finished"));
	json_t *b = logs_of(&d, job2);
	ck_assert(line_at(b, k, NULL) == NULL && line_at(b, k + 1, NULL) != NULL);
	for (int s = k + 1; s <= steps; s++) {
		json_t *x = line_at(a, s, NULL), *y = line_at(b, s, NULL);
		ck_assert_msg(y != NULL, "resumed run: no step %d", s);
		ck_assert_msg(json_number_value(json_object_get(x, "loss")) ==
			json_number_value(json_object_get(y, "loss")) &&
			json_number_value(json_object_get(x, "lr")) ==
			json_number_value(json_object_get(y, "lr")),
			"step %d: resumed loss %.9g lr %.9g, uninterrupted %.9g %.9g", s,
			json_number_value(json_object_get(y, "loss")),
			json_number_value(json_object_get(y, "lr")),
			json_number_value(json_object_get(x, "loss")),
			json_number_value(json_object_get(x, "lr")));
	}
	json_decref(b);
	json_decref(a);

	/* rematctl plot: text with both curves, and a PNG */
	char png[700], *out;
	snprintf(png, sizeof png, "%s/loss.png", d.dir);
	char *pargv[] = {(char *)t_env("REMATCTL"), "--socket", d.sock, "plot", job, NULL};
	ck_assert_int_eq(t_run(pargv, &out), 0);
	ck_assert_msg(strstr(out, "train loss") && strstr(out, "val loss") &&
		strstr(out, "tokens/s") && strstr(out, "\xe2\xa0"), "plot: %s", out);
	free(out);
	char svg[700], at[48];
	snprintf(svg, sizeof svg, "%s/loss.svg", d.dir);
	char *gargv[] = {(char *)t_env("REMATCTL"), "--socket", d.sock, "plot", job, "--png", png,
		"--svg", svg, NULL};
	ck_assert_int_eq(t_run(gargv, &out), 0);
	free(out);
	size_t n;
	char *img = t_read_file(png, &n);
	ck_assert_msg(n > 1000 && memcmp(img, "\x89PNG\r\n\x1a\n", 8) == 0, "%s: no PNG", png);
	free(img);
	/* the image marks the set at the step it took effect */
	img = t_read_file(svg, &n);
	snprintf(at, sizeof at, " at step %d", k + 1);
	char *mark = strstr(img, "set ");
	ck_assert_msg(mark && strstr(mark, "lr=0.0001") && strstr(mark, "grad_clip=0.5") &&
		strstr(mark, at), "%s: no mark of the set%s:\n%.3000s", svg, at, img);
	free(img);
	free(spec);
	free(spec2);
	free(data);
	td_daemon_stop(&d);
}
END_TEST

/* remat-train alone: --metrics FILE holds the steps, evals and the sample --json prints
 * (without the process's RSS and the policy; the sample as its SAMPLE event's line), and
 * a link at FILE is refused, not followed. */
START_TEST(test_e2e_metrics_file)
{
	td_daemon d;
	td_daemon_paths(&d); /* a scratch directory; no daemon */
	char model[4096], *data = t_data("reference/accum"), mpath[700], link[700], *out;
	snprintf(model, sizeof model, "\"init_from\":\"%s\"", data);
	char *spec = write_loop_spec(&d, "m.json", model, "\"sample\":{\"tokens\":5,"
		"\"prompt\":[1,2,3],\"temperature\":0},\"grad_accum\":2,", 12);
	snprintf(mpath, sizeof mpath, "%s/metrics.jsonl", d.dir);
	char *argv[] = {(char *)t_env("REMAT_TRAIN"), "--json", "--metrics", mpath, spec, NULL};
	ck_assert_msg(t_run(argv, &out) == 0, "%s", out);
	json_t *printed = json_array();
	for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n"))
		json_array_append_new(printed, json_loads(l, 0, NULL));
	free(out);
	size_t n;
	char *text = t_read_file(mpath, &n);
	json_t *logged = json_array();
	for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n"))
		json_array_append_new(logged, json_loads(l, 0, NULL));
	free(text);
	/* 12 steps, evals after 5, 10 and 12, the sample after 12 */
	ck_assert_int_eq(json_array_size(logged), 16);
	ck_assert_int_eq(json_array_size(printed), 16);
	json_t *smp = json_array_get(printed, 15);
	ck_assert_int_eq(json_array_size(json_object_get(smp, "tokens")), 5);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(logged, 15), "event")),
		"SAMPLE");
	json_object_del(json_array_get(logged, 15), "event");
	for (size_t i = 0; i < 16; i++) {
		json_t *p = json_deep_copy(json_array_get(printed, i));
		json_object_del(p, "rss");
		json_object_del(p, "rss_peak");
		json_object_del(p, "policy");
		ck_assert_msg(json_equal(p, json_array_get(logged, i)), "line %zu: printed %s, "
			"logged %s", i, json_dumps(p, JSON_COMPACT),
			json_dumps(json_array_get(logged, i), JSON_COMPACT));
		json_decref(p);
	}
	ck_assert_ptr_nonnull(json_object_get(json_array_get(logged, 5), "val_loss"));
	json_decref(printed);
	json_decref(logged);
	/* a symbolic link where the file goes: refused, the link's target untouched */
	snprintf(link, sizeof link, "%s/link.jsonl", d.dir);
	ck_assert_int_eq(symlink(mpath, link), 0);
	char *largv[] = {(char *)t_env("REMAT_TRAIN"), "--metrics", link, spec, NULL};
	ck_assert_int_eq(t_run(largv, &out), 1);
	ck_assert_msg(strstr(out, "symbolic link"), "%s", out);
	free(out);
	free(spec);
	free(data);
}
END_TEST

/* job-metrics pages through a log longer than any reply: 12000 lines (1.9 MB) from a
 * stand-in worker on the descriptor rematd hands it, a 1.3 MB line of junk in the middle
 * skipped; rematctl logs prints every line once, in order, and rematd keeps serving. */
START_TEST(test_e2e_logs_longer_than_a_reply)
{
	td_daemon d;
	td_daemon_paths(&d);
	char *w = td_script(&d, "worker.sh",
		"i=1; while [ $i -le 6000 ]; do printf '{\"step\":%d,\"loss\":1.25,\"lr\":0.0003,"
		"\"pad\":\"%0120d\"}\\n' $i 0; i=$((i+1)); done >&4\n"
		"head -c 1300000 /dev/zero | tr '\\000' x >&4; echo >&4\n"
		"while [ $i -le 12000 ]; do printf '{\"step\":%d,\"loss\":1.25,\"lr\":0.0003,"
		"\"pad\":\"%0120d\"}\\n' $i 0; i=$((i+1)); done >&4\nexit 3");
	const char *extra[] = {"--worker", w, NULL};
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	const char *job = td_job_start(&c, T_TINY_SPEC, NULL);
	json_decref(td_wait_state(&c, job, "failed", E2E_MS));
	char *argv[] = {(char *)t_env("REMATCTL"), "--socket", d.sock, "logs", (char *)job, NULL};
	char *out;
	int rc = t_run(argv, &out);
	ck_assert_msg(rc == 0, "rematctl logs: exit %d: %.300s", rc, out);
	int n = 0;
	for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
		json_t *o = json_loads(l, 0, NULL);
		ck_assert_msg(o != NULL, "line %d is not JSON", n + 1);
		ck_assert_int_eq(json_integer_value(json_object_get(o, "step")), ++n);
		json_decref(o);
	}
	ck_assert_int_eq(n, 12000);
	free(out);
	td_alive(&d);
	td_close(&c);
	free(w);
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
	tcase_add_test(tc, test_e2e_training_loop);
	tcase_add_test(tc, test_e2e_metrics_file);
	tcase_add_test(tc, test_e2e_logs_longer_than_a_reply);
	suite_add_tcase(s, tc);
	return s;
}
