/* test_budget_record.c - the memory controller is part of the job (issue 27, deliverable
 * 5, rematd's side): through the real daemon and the real worker, on a tiny job whose spec
 * starts the controller ("remat": {"budget": "1GiB"}),
 *
 *  - a budget set live (remat-auto budget_bytes) is in rematd's job-status of the stopped
 *    job, and survives stop then resume: the resume's spec carries it, the new worker keeps
 *    it;
 *  - it survives a restart of rematd (SIGTERM stops and saves the job; the new daemon lists
 *    it with its budget and resumes it under it);
 *  - a controller turned off live (remat-auto budget off, remat-set --force) stays off after
 *    a resume, although the spec had a budget;
 *  - a record of an earlier rematd, which kept no controller, still loads: its controller
 *    is the one its spec started.
 *
 * Timings are bounds, never measurements.
 */
#include "t_daemon.h"
#include "tests.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BR_SPEC_BUDGET 1073741824LL /* the spec's "1GiB" */
#define BR_LIVE_BUDGET 1610612736LL /* remat-auto's: 1.5 GiB, not the spec's */

/* A daemon on the real worker (its extra arguments into extra, 4 slots). */
static void br_daemon_args(const char **extra)
{
	extra[0] = "--worker";
	extra[1] = t_env("REMAT_TRAIN");
	extra[2] = NULL;
}

/* job-status until pred(status) holds (the status is returned) or T_JOB_MS passes (fails
 * the test with what, and the last status). */
static json_t *br_wait(td_conn *c, const char *job, int (*pred)(json_t *, long long),
	long long arg, const char *what)
{
	long end = td_ms() + T_JOB_MS;
	for (;;) {
		json_t *st = td_job_status(c, job);
		ck_assert_msg(strcmp(td_str(st, "state"), "failed") != 0, "job %s failed: %s", job,
			td_str(st, "reason"));
		if (pred(st, arg))
			return st;
		char *text = json_dumps(st, JSON_COMPACT);
		ck_assert_msg(td_ms() < end, "job %s: %s never came; last status %s", job, what,
			text);
		free(text);
		json_decref(st);
		td_sleep_ms(50);
	}
}

/* The worker answers (it runs) and its step is past arg: its first step's controller. */
static int br_past(json_t *st, long long step)
{
	return strcmp(json_string_value(json_object_get(st, "state")), "running") == 0 &&
	       json_integer_value(json_object_get(st, "step")) > step;
}

/* The controller's budget is arg bytes (0: off), as job-status says it. */
static int br_budget_is(json_t *st, long long bytes)
{
	json_t *b = json_object_get(st, "auto_budget_bytes");
	return bytes ? json_integer_value(b) == bytes : json_is_null(b);
}

/* Stopped, no worker left: rematd's own answer. */
static int br_stopped(json_t *st, long long unused)
{
	(void)unused;
	return strcmp(json_string_value(json_object_get(st, "state")), "stopped") == 0 &&
	       json_is_null(json_object_get(st, "pid"));
}

/* A job on the tiny model whose spec starts the controller at 1 GiB, saving into d's save/,
 * running: its id into job (16 bytes). */
static void br_start(td_daemon *d, td_conn *c, char *job)
{
	const char *extra[4];
	char spec[1400];
	br_daemon_args(extra);
	td_daemon_paths(d);
	td_daemon_start(d, extra);
	*c = td_open(d);
	snprintf(spec, sizeof spec, "{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"" T_GPL
		"\",\"format\":\"bytes\"},\"batch\":2,\"seq_len\":32,\"steps\":1000000,"
		"\"threads\":2,\"remat\":{\"budget\":\"1GiB\"},\"save\":{\"dir\":\"%s/save\"}}",
		d->dir);
	snprintf(job, 16, "%s", td_job_start(c, spec, NULL));
	/* the spec's controller is on from the first step */
	json_decref(br_wait(c, job, br_past, 0, "the first step"));
	json_decref(br_wait(c, job, br_budget_is, BR_SPEC_BUDGET, "the spec's budget"));
}

/* remat-auto with args (the inside of "arguments" after the job), then until the worker
 * says its budget is bytes (0: off). */
static void br_auto(td_conn *c, const char *job, const char *args, long long bytes)
{
	json_t *r = td_request(c, "{\"execute\":\"remat-auto\",\"arguments\":{\"job\":\"%s\",%s}}",
		job, args);
	json_t *ret = td_expect_return(r);
	ck_assert(bytes ? json_integer_value(json_object_get(ret, "budget_bytes")) == bytes :
		json_is_null(json_object_get(ret, "budget_bytes")));
	json_decref(r);
	json_decref(br_wait(c, job, br_budget_is, bytes, "the budget asked for"));
}

/* job-stop (it saves), then until rematd answers for the stopped job. */
static void br_stop(td_conn *c, const char *job)
{
	char line[200];
	snprintf(line, sizeof line, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\"}}",
		job);
	td_send(c, line);
	json_t *r = td_reply(c, T_JOB_MS);
	td_expect_return(r);
	json_decref(r);
	json_decref(br_wait(c, job, br_stopped, 0, "the stopped state"));
}

/* job-resume, again while the stopped worker is still exiting (Busy); the step it resumes
 * from. */
static int br_resume(td_conn *c, const char *job)
{
	long end = td_ms() + T_STOP_MS;
	for (;;) {
		char line[200];
		snprintf(line, sizeof line, "{\"execute\":\"job-resume\",\"arguments\":{\"job\":\"%s\""
			"}}", job);
		td_send(c, line);
		json_t *r = td_reply(c, T_JOB_MS);
		json_t *err = json_object_get(r, "error");
		const char *cls = json_string_value(json_object_get(err, "class"));
		if (err && cls && strcmp(cls, "Busy") == 0 && td_ms() < end) {
			json_decref(r);
			td_sleep_ms(50);
			continue;
		}
		int step = (int)json_integer_value(json_object_get(td_expect_return(r), "step"));
		json_decref(r);
		return step;
	}
}

/* rematd's job-status of the stopped job: its budget is bytes (0: off) from source. */
static void br_record_says(td_conn *c, const char *job, long long bytes, const char *source)
{
	json_t *st = td_job_status(c, job);
	json_t *ctl = json_object_get(st, "auto");
	char *text = json_dumps(st, JSON_COMPACT);
	ck_assert_msg(br_stopped(st, 0), "not rematd's answer of a stopped job: %s", text);
	ck_assert_msg(br_budget_is(st, bytes), "auto_budget_bytes is not %lld: %s", bytes, text);
	if (bytes) {
		ck_assert_msg(json_integer_value(json_object_get(ctl, "budget_bytes")) == bytes &&
			strcmp(td_str(ctl, "source"), source) == 0 &&
			json_is_boolean(json_object_get(ctl, "pinned")) &&
			json_object_get(ctl, "least_bytes"), "auto is not {%lld, %s, ...}: %s", bytes,
			source, text);
	} else {
		ck_assert_msg(json_is_null(ctl), "auto is not null: %s", text);
	}
	free(text);
	json_decref(st);
}

/* The resume's spec (resume.json): its remat.budget is bytes (0: none). */
static void br_resume_spec_says(const td_daemon *d, const char *job, long long bytes)
{
	char path[800];
	json_error_t je;
	snprintf(path, sizeof path, "%s/jobs/%s/resume.json", d->state, job);
	json_t *spec = json_load_file(path, 0, &je);
	ck_assert_msg(spec != NULL, "%s: %s", path, je.text);
	json_t *b = json_object_get(json_object_get(spec, "remat"), "budget");
	char *text = json_dumps(spec, JSON_COMPACT);
	ck_assert_msg(bytes ? json_integer_value(b) == bytes : b == NULL, "resume.json's "
		"remat.budget is not %lld: %s", bytes, text);
	free(text);
	json_decref(spec);
}

/* Resumes job, then until its new worker has run a step: its controller's budget is bytes
 * (0: off), as the worker says and as its spec said. */
static void br_resumed_under(const td_daemon *d, td_conn *c, const char *job, long long bytes)
{
	int from = br_resume(c, job);
	br_resume_spec_says(d, job, bytes);
	json_t *st = br_wait(c, job, br_past, from, "a step of the resumed worker");
	char *text = json_dumps(st, JSON_COMPACT);
	ck_assert_msg(br_budget_is(st, bytes), "the resumed worker's auto_budget_bytes is not "
		"%lld: %s", bytes, text);
	free(text);
	json_decref(st);
}

START_TEST(test_budgetrec_stop_resume)
{
	td_daemon d;
	td_conn c;
	char job[16];
	br_start(&d, &c, job);
	br_auto(&c, job, "\"budget_bytes\":1610612736", BR_LIVE_BUDGET);
	br_stop(&c, job);
	/* rematd's own answer of the stopped job shows the budget (rematctl status) */
	br_record_says(&c, job, BR_LIVE_BUDGET, "size");
	br_resumed_under(&d, &c, job, BR_LIVE_BUDGET);
	br_stop(&c, job);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_budgetrec_daemon_restart)
{
	td_daemon d;
	td_conn c;
	char job[16];
	const char *extra[4];
	br_daemon_args(extra);
	br_start(&d, &c, job);
	br_auto(&c, job, "\"budget_bytes\":1610612736", BR_LIVE_BUDGET);
	td_close(&c);
	/* SIGTERM: rematd stops and saves the job, then exits; a new one lists it */
	td_daemon_stop(&d);
	td_daemon_start(&d, extra);
	c = td_open(&d);
	br_record_says(&c, job, BR_LIVE_BUDGET, "size");
	br_resumed_under(&d, &c, job, BR_LIVE_BUDGET);
	br_stop(&c, job);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_budgetrec_off_stays_off)
{
	td_daemon d;
	td_conn c;
	char job[16];
	br_start(&d, &c, job);
	br_auto(&c, job, "\"budget\":\"off\"", 0);
	br_stop(&c, job);
	br_record_says(&c, job, 0, NULL);
	/* job.json still has remat.budget 1GiB: the resume's spec must not */
	br_resumed_under(&d, &c, job, 0);
	br_stop(&c, job);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

/* remat-set --force hands control back to the user: the controller is off, and stays off
 * after a resume, the spec's remat.budget notwithstanding. */
START_TEST(test_budgetrec_forced_set_stays_off)
{
	td_daemon d;
	td_conn c;
	char job[16];
	br_start(&d, &c, job);
	json_t *r = td_request(&c, "{\"execute\":\"remat-set\",\"arguments\":{\"job\":\"%s\","
		"\"sections\":{\"h.0-1\":\"full\"},\"force\":true}}", job);
	td_expect_return(r);
	json_decref(r);
	json_decref(br_wait(&c, job, br_budget_is, 0, "the controller off"));
	br_stop(&c, job);
	br_record_says(&c, job, 0, NULL);
	br_resumed_under(&d, &c, job, 0);
	br_stop(&c, job);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

/* state.json of an earlier rematd had no "auto": such a record loads, and its controller
 * is the one its spec started. */
START_TEST(test_budgetrec_old_record)
{
	td_daemon d;
	td_conn c;
	char job[16], path[800];
	const char *extra[4];
	json_error_t je;
	br_daemon_args(extra);
	br_start(&d, &c, job);
	br_stop(&c, job);
	td_close(&c);
	td_daemon_stop(&d);
	snprintf(path, sizeof path, "%s/jobs/%s/state.json", d.state, job);
	json_t *rec = json_load_file(path, 0, &je);
	ck_assert_msg(rec && json_object_get(rec, "auto"), "%s has no \"auto\": %s", path,
		rec ? "" : je.text);
	json_object_del(rec, "auto");
	ck_assert_int_eq(json_dump_file(rec, path, JSON_COMPACT), 0);
	json_decref(rec);
	td_daemon_start(&d, extra);
	c = td_open(&d);
	br_record_says(&c, job, BR_SPEC_BUDGET, "size");
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

Suite *suite_budgetrec(void)
{
	Suite *s = suite_create("budgetrec");
	TCase *tc = tcase_create("budgetrec");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_budgetrec_stop_resume);
	tcase_add_test(tc, test_budgetrec_daemon_restart);
	tcase_add_test(tc, test_budgetrec_off_stays_off);
	tcase_add_test(tc, test_budgetrec_forced_set_stays_off);
	tcase_add_test(tc, test_budgetrec_old_record);
	suite_add_tcase(s, tc);
	return s;
}
