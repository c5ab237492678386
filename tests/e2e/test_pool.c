/* test_pool.c - rematd --memory, suite "pool": one memory pool shared by the jobs, real
 * workers on a model whose `off` peak is far above its least.
 *
 *  - admission by the least: a pool that holds two jobs' least but not three runs two,
 *    the third waits saying for how much of the pool; when one stops it starts;
 *  - the division: the shares told (POOL_CHANGED, replayed in order) never add up to more
 *    than the pool, which holds only if every shrink is told before the grows it makes
 *    room for; the running jobs' resident memory, read from /proc, stays under the pool;
 *    each share lies between the job's least and its off peak;
 *  - priorities: of two squeezed jobs, the one of priority 10 gets the larger share;
 *  - a job with its own remat.budget keeps it, reserved as such;
 *  - remat-auto, remat-set --force and remat-profile of a pool's job are refused;
 *  - rematctl set JOB priority=N moves the division; watch shows the share; a paused job
 *    is squeezed to its least at once (its resident memory falls under it), the other
 *    grows into it, and resumed it is divided again;
 *  - across a restart of rematd (SIGKILL): a queued job is admitted by the pool, a resumed
 *    one keeps its priority as set and runs under the pool's shares, not its own;
 *  - a bad --memory is refused at start.
 * Under AddressSanitizer the jobs' tests run a job under a pool far above it, then skip
 * the rest with a line: its shadow and quarantine are the workers' memory as much as the
 * run's, so no least the plan gives holds there. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "t_daemon.h"
#include "t_util.h"
#include "tests.h"

#define POOL_MS 60000 /* what a test waits for at most */

/* A job whose activations (off: about 34 MiB) dwarf what it holds besides (about 45 MiB
 * with the process's own), running until stopped; extra: more root keys. */
static char *spec_of(char *buf, size_t len, const char *extra)
{
	snprintf(buf, len, "{\"model\":{\"n_layer\":4,\"n_embd\":128,\"n_head\":4,"
		"\"n_positions\":128,\"vocab_size\":256},\"data\":{\"train\":\"" T_GPL "\","
		"\"format\":\"bytes\"},\"batch\":8,\"seq_len\":128,\"steps\":1000000,\"threads\":1"
		"%s}", extra);
	return buf;
}

/* The job's "memory" in job-status (new reference). */
static json_t *memory_of(td_conn *c, const char *job)
{
	json_t *st = td_job_status(c, job);
	json_t *m = json_incref(json_object_get(st, "memory"));
	ck_assert_msg(json_is_object(m), "job %s: no memory in job-status", job);
	json_decref(st);
	return m;
}

static long long num(const json_t *o, const char *key)
{
	return (long long)json_integer_value(json_object_get(o, key));
}

/* A number of the job's job-status now: its worker's "pid", or one of its "memory" (the
 * share, the least, ...). */
static long long status_of(td_conn *rq, const char *job, const char *key)
{
	json_t *st = td_job_status(rq, job);
	const json_t *o = strcmp(key, "pid") ? json_object_get(st, "memory") : st;
	long long v = num(o, key);
	json_decref(st);
	return v;
}

#define share_of(rq, job) status_of(rq, job, "share_bytes")
#define pid_of(rq, job) status_of(rq, job, "pid")

/* A daemon with --memory pool (NULL: none), a connection subscribed to every event and
 * one for requests. */
static void pool_daemon_on(td_daemon *d, const char *pool, td_conn *ev, td_conn *rq)
{
	const char *extra[] = {"--worker", t_env("REMAT_TRAIN"), "--max-jobs", "4",
		pool ? "--memory" : NULL, pool, NULL};
	td_daemon_start(d, extra);
	*ev = td_open(d);
	*rq = td_open(d);
	json_decref(td_request(ev, "{\"execute\":\"subscribe\"}"));
}

/* The daemon and both connections ended. */
static void pool_daemon_end(td_daemon *d, td_conn *ev, td_conn *rq)
{
	td_close(ev);
	td_close(rq);
	td_daemon_stop(d);
}

/* pool_daemon_on, in a directory of its own. */
static void pool_daemon(td_daemon *d, const char *pool, td_conn *ev, td_conn *rq)
{
	td_daemon_paths(d);
	pool_daemon_on(d, pool, ev, rq);
}

/* The least and off peak the pool plans for the job (one started under a large pool). */
static void figures(long long *least, long long *off)
{
	td_daemon d;
	td_conn ev, rq;
	char spec[1024];
	pool_daemon(&d, "8GiB", &ev, &rq);
	const char *j = td_job_start(&rq, spec_of(spec, sizeof spec, ""), NULL);
	char job[16];
	snprintf(job, sizeof job, "%s", j);
	td_wait_step(&ev, job);
	json_t *m = memory_of(&rq, job);
	*least = num(m, "least_bytes");
	*off = num(m, "off_bytes");
	json_decref(m);
	ck_assert_msg(*least > 0 && *off > *least + *least / 3, "least %lld, off %lld", *least,
		*off);
	pool_daemon_end(&d, &ev, &rq);
}

/* The resident bytes of pid (VmRSS), 0 when gone. */
static long long rss_of(long long pid)
{
	char path[64], line[256];
	long long kb = 0;
	snprintf(path, sizeof path, "/proc/%lld/status", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %lld kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

/* The shares told so far, replayed from the events in order. */
typedef struct replay {
	long long pool, least, off; /* the pool, and a job's least and off peak in it */
	char arg[32];               /* rematd --memory's argument: the pool */
	char job[8][16];
	long long share[8], pid[8];
	int pending[8];        /* a shrink told, applying at this step: no grow till then */
	int ran[8];            /* the last step each ran (STEP), or said it runs under the
				* budget told (REMAT_AUTO, a paused job's at once) */
	int n, told, shrinks;
} replay;

static int slot(replay *r, const char *job)
{
	for (int i = 0; i < r->n; i++)
		if (!strcmp(r->job[i], job))
			return i;
	ck_assert_int_lt(r->n, 8);
	snprintf(r->job[r->n], sizeof r->job[r->n], "%s", job);
	r->share[r->n] = r->pid[r->n] = 0;
	r->pending[r->n] = r->ran[r->n] = 0;
	return r->n++;
}

/* Reads events for at most ms, until the event `until` of job (NULL: none ends it): each
 * POOL_CHANGED's share replayed, whose sum over the jobs never passes the pool, each share
 * between the job's least and its off peak; no grow (or admission) told while a shrink
 * waits for the STEP it applies at; a job that ended holds nothing; the jobs' resident
 * memory, read from /proc meanwhile, stays under the pool. */
static json_t *replay_for(td_conn *ev, td_conn *rq, replay *r, const char *job,
	const char *until, int ms)
{
	long end = td_ms() + ms;
	while (td_ms() < end) {
		/* the resident memory is weighed against the shares told only when every event
		 * sent before it was read has been replayed: a grow is published before the job
		 * can take it, and a job that took one since the last event read is no breach */
		long long rss = 0;
		for (int i = 0; i < r->n; i++)
			rss += r->pid[i] ? rss_of(r->pid[i]) : 0;
		json_t *o = td_read_msg(ev, 0);
		if (!o) {
			ck_assert_msg(rss <= r->pool, "the jobs hold %lld bytes, the pool is %lld",
				rss, r->pool);
			o = td_read_msg(ev, 100);
		}
		const char *name = json_string_value(json_object_get(o, "event"));
		json_t *d = json_object_get(o, "data");
		const char *of = d ? td_str(d, "job") : NULL;
		if (name && !strcmp(name, "STEP")) {
			int i = slot(r, of);
			if (!r->pid[i])
				r->pid[i] = pid_of(rq, of);
		}
		/* a shrink is done once the job ran the step it applies at, or said it runs
		 * under its budget from that step (a paused job lays its policy out at once) */
		if (name && (!strcmp(name, "STEP") || (!strcmp(name, "REMAT_AUTO") &&
			num(d, "budget_bytes") <= r->share[slot(r, of)]))) {
			int i = slot(r, of);
			if (num(d, "step") > r->ran[i])
				r->ran[i] = (int)num(d, "step");
			if (r->pending[i] && r->ran[i] >= r->pending[i])
				r->pending[i] = 0;
		}
		const char *to = name && !strcmp(name, "JOB_STATE_CHANGED") ? td_str(d, "to") : "";
		if (!strcmp(to, "stopped") || !strcmp(to, "failed")) {
			int i = slot(r, of);
			r->share[i] = r->pid[i] = 0;
			r->pending[i] = r->ran[i] = 0;
		}
		if (name && !strcmp(name, "POOL_CHANGED")) {
			long long sum = 0;
			const char *phase = td_str(d, "phase");
			int k = slot(r, of);
			r->share[k] = num(d, "share_bytes");
			if (!strcmp(phase, "shrink")) {
				/* said once the worker named the step: it may have run by then */
				int at = (int)num(d, "applies_at_step");
				r->pending[k] = at > r->ran[k] ? at : 0;
				r->shrinks++;
			}
			for (int i = 0; i < r->n; i++)
				ck_assert_msg(strcmp(phase, "shrink") == 0 || !r->pending[i],
					"%s of %s told before %s's shrink applied", phase, of,
					r->job[i]);
			for (int i = 0; i < r->n; i++)
				sum += r->share[i];
			ck_assert_msg(sum <= r->pool, "told %lld bytes of a pool of %lld (%s %s)",
				sum, r->pool, td_str(d, "phase"), of);
			ck_assert(num(d, "share_bytes") >= num(d, "least_bytes") * 99 / 100 &&
				num(d, "share_bytes") <= num(d, "off_bytes"));
			r->told++;
		}
		if (job && name && !strcmp(name, until) && !strcmp(of, job))
			return o;
		json_decref(o);
	}
	ck_assert_msg(!job, "no %s of job %s within %d ms", until, job, ms);
	return NULL;
}

/* replay_for until a STEP of job (NULL: for ms). */
static void replay_until(td_conn *ev, td_conn *rq, replay *r, const char *job, int ms)
{
	json_decref(replay_for(ev, rq, r, job, "STEP", ms));
}

/* A pool that squeezes two of the jobs (two leasts and half of what their off peaks add:
 * three do not fit), after the job's figures were read under a pool far above it (the
 * pool's own paths, which AddressSanitizer sees too); 0 under it, when the test stops
 * there (said on one line). */
static long long squeezed_pool(const char *test, long long *least, long long *off)
{
	figures(least, off);
	return t_asan_skips(test) ? 0 : 2 * *least + (*off - *least) / 2;
}

/* The squeezed pool's daemon, its figures in *r, and n jobs started (ids into job): the
 * first with the root keys first (spec_of's extra), the others plain, the first `running`
 * each run to its first step. 0 under AddressSanitizer, when the test stops there. */
static int squeezed_jobs(const char *test, td_daemon *d, td_conn *ev, td_conn *rq, replay *r,
	char (*job)[16], int n, int running, const char *first)
{
	char spec[1024];
	memset(r, 0, sizeof *r);
	if (!(r->pool = squeezed_pool(test, &r->least, &r->off)))
		return 0;
	snprintf(r->arg, sizeof r->arg, "%lld", r->pool);
	pool_daemon(d, r->arg, ev, rq);
	for (int i = 0; i < n; i++) {
		snprintf(job[i], sizeof job[i], "%s", td_job_start(rq, spec_of(spec, sizeof spec,
			i ? "" : first), NULL));
		if (i < running)
			replay_until(ev, rq, r, job[i], POOL_MS);
	}
	return 1;
}

START_TEST(test_pool_admission_and_division)
{
	char job[3][16];
	td_daemon d;
	td_conn ev, rq;
	replay r;
	if (!squeezed_jobs("test_pool_admission_and_division", &d, &ev, &rq, &r, job, 3, 2, ""))
		return;
	json_t *st = td_job_status(&rq, job[2]);
	ck_assert_str_eq(td_str(st, "state"), "queued");
	ck_assert_msg(strstr(td_str(st, "reason"), "waiting for") &&
		strstr(td_str(st, "reason"), "of the pool"), "%s", td_str(st, "reason"));
	json_decref(st);
	replay_until(&ev, &rq, &r, NULL, 8000);
	/* squeezed: the two together hold no more than the pool, each under its off peak */
	json_t *m0 = memory_of(&rq, job[0]), *m1 = memory_of(&rq, job[1]);
	ck_assert_int_le(num(m0, "share_bytes") + num(m1, "share_bytes"), r.pool);
	ck_assert_int_lt(num(m0, "share_bytes"), r.off);
	json_decref(m0);
	json_decref(m1);
	/* one stops: the waiting one starts */
	json_decref(td_request(&rq, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\","
		"\"save\":false}}", job[0]));
	replay_until(&ev, &rq, &r, job[2], POOL_MS);
	replay_until(&ev, &rq, &r, NULL, 4000);
	ck_assert_int_gt(r.told, 3);
	ck_assert_int_gt(r.shrinks, 0);
	json_t *info = td_request(&rq, "{\"execute\":\"daemon-info\"}");
	json_t *p = json_object_get(json_object_get(info, "return"), "pool");
	ck_assert_int_le(num(p, "given_bytes"), r.pool);
	json_decref(info);
	pool_daemon_end(&d, &ev, &rq);
}
END_TEST

START_TEST(test_pool_priority_and_own_budget)
{
	char spec[1024], job[2][16], extra[128];
	td_daemon d;
	td_conn ev, rq;
	replay r;
	if (!squeezed_jobs("test_pool_priority_and_own_budget", &d, &ev, &rq, &r, job, 2, 2,
		",\"priority\":10"))
		return;
	replay_until(&ev, &rq, &r, NULL, 6000);
	json_t *hi = memory_of(&rq, job[0]), *lo = memory_of(&rq, job[1]);
	ck_assert_int_eq(num(hi, "priority"), 10);
	ck_assert_msg(num(hi, "share_bytes") > num(lo, "share_bytes"), "priority 10: %lld, 1: "
		"%lld", num(hi, "share_bytes"), num(lo, "share_bytes"));
	json_decref(hi);
	json_decref(lo);
	json_decref(td_request(&rq, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\","
		"\"save\":false}}", job[1]));
	json_decref(td_wait_state(&ev, job[1], "stopped", POOL_MS));
	/* its own budget: reserved as it is, never resized */
	long long own = r.least + (r.off - r.least) / 4;
	snprintf(extra, sizeof extra, ",\"remat\":{\"budget\":%lld}", own);
	snprintf(job[1], sizeof job[1], "%s", td_job_start(&rq, spec_of(spec, sizeof spec, extra),
		NULL));
	td_wait_step(&ev, job[1]);
	td_sleep_ms(3000);
	json_t *m = memory_of(&rq, job[1]);
	json_t *info = td_request(&rq, "{\"execute\":\"daemon-info\"}");
	ck_assert_int_eq(num(m, "share_bytes"), own);
	json_t *p = json_object_get(json_object_get(info, "return"), "pool");
	ck_assert_int_eq(num(p, "bytes"), r.pool);
	ck_assert_int_le(num(p, "given_bytes"), r.pool);
	json_decref(m);
	json_decref(info);
	pool_daemon_end(&d, &ev, &rq);
}
END_TEST

START_TEST(test_pool_paused_squeezed_and_set_priority)
{
	char job[2][16];
	td_daemon d;
	td_conn ev, rq;
	replay r;
	if (!squeezed_jobs("test_pool_paused_squeezed_and_set_priority", &d, &ev, &rq, &r, job,
		2, 2, ""))
		return;
	replay_until(&ev, &rq, &r, NULL, 5000);
	/* rematctl set JOB priority=N: rematd's, the division follows it */
	char *out;
	int rc = td_ctl(&d, &out, "set", job[1], "priority=20", NULL);
	ck_assert_msg(rc == 0 && strstr(out, "priority=20") && strstr(out, "memory pool"),
		"set: %d %s", rc, out);
	free(out);
	/* what would take its memory out of the pool's hands is refused */
	static const char *const taking[] = {
		"\"remat-auto\",\"arguments\":{\"job\":\"%s\",\"budget\":\"off\"}",
		"\"remat-set\",\"arguments\":{\"job\":\"%s\",\"sections\":{\"h.0\":\"off\"},"
		"\"force\":true}",
		"\"remat-profile\",\"arguments\":{\"job\":\"%s\"}"};
	for (int i = 0; i < 3; i++) {
		char fmt[256];
		snprintf(fmt, sizeof fmt, "{\"execute\":%s}", taking[i]);
		json_t *no = td_request(&rq, fmt, job[1]);
		ck_assert_ptr_nonnull(strstr(td_expect_error(no, "InvalidState"), "memory pool"));
		json_decref(no);
	}
	rc = td_ctl(&d, &out, "watch", job[1], "--count", "1", NULL);
	ck_assert_msg(rc == 0 && strstr(out, " pool_share "), "watch: %d %s", rc, out);
	free(out);
	rc = td_ctl(&d, &out, "set", job[1], "priority=3", "lr=0.001", NULL);
	ck_assert_msg(rc != 0 && strstr(out, "on its own"), "set with lr: %d %s", rc, out);
	free(out);
	replay_until(&ev, &rq, &r, NULL, 6000);
	long long s0 = share_of(&rq, job[0]), s1 = share_of(&rq, job[1]);
	ck_assert_msg(s1 > s0, "priority 20: %lld, 1: %lld", s1, s0);
	/* paused: squeezed to its least, its policy laid out at once, and the memory is
	 * given back (its resident bytes fall to the least's); the other grows into it */
	long long pid = pid_of(&rq, job[1]);
	json_decref(td_request(&rq, "{\"execute\":\"job-pause\",\"arguments\":{\"job\":\"%s\"}}",
		job[1]));
	/* its controller may still say a move of the step that ran before the pause */
	json_t *said = NULL, *d1 = NULL;
	do {
		json_decref(said);
		said = replay_for(&ev, &rq, &r, job[1], "REMAT_AUTO", POOL_MS);
		d1 = json_object_get(said, "data");
	} while (strncmp(td_str(d1, "reason"), "paused", 6) != 0);
	ck_assert_msg(strstr(td_str(d1, "reason"), "within the budget"), "%s",
		td_str(d1, "reason"));
	long long told = num(d1, "budget_bytes");
	json_decref(said);
	ck_assert_int_eq(share_of(&rq, job[1]), told);
	ck_assert_msg(told < s1 && told <= r.least + r.least / 10, "paused: %lld (least %lld, "
		"was %lld)", told, r.least, s1);
	ck_assert_msg(rss_of(pid) <= told, "paused, it holds %lld bytes of its %lld",
		rss_of(pid), told);
	json_decref(replay_for(&ev, &rq, &r, job[0], "POOL_CHANGED", POOL_MS));
	replay_until(&ev, &rq, &r, NULL, 3000);
	ck_assert_msg(share_of(&rq, job[0]) > s0, "the running job: %lld, before %lld",
		share_of(&rq, job[0]), s0);
	/* resumed: it runs, and the two share the pool again */
	json_decref(td_request(&rq, "{\"execute\":\"job-resume\",\"arguments\":{\"job\":\"%s\"}}",
		job[1]));
	replay_until(&ev, &rq, &r, job[1], POOL_MS);
	replay_until(&ev, &rq, &r, NULL, 5000);
	ck_assert_int_le(share_of(&rq, job[0]) + share_of(&rq, job[1]), r.pool);
	ck_assert_int_gt(share_of(&rq, job[1]), told);
	pool_daemon_end(&d, &ev, &rq);
}
END_TEST

/* job-resume of an interrupted job, again while a restarted rematd still looks at its
 * save directory (Busy). */
static void resume_job(td_conn *rq, const char *job)
{
	long end = td_ms() + POOL_MS;
	for (;;) {
		json_t *r = td_request(rq, "{\"execute\":\"job-resume\",\"arguments\":"
			"{\"job\":\"%s\"}}", job);
		const char *cls = json_string_value(json_object_get(json_object_get(r, "error"),
			"class"));
		if (!cls || strcmp(cls, "Busy") != 0 || td_ms() > end) {
			td_expect_return(r);
			json_decref(r);
			return;
		}
		json_decref(r);
		td_sleep_ms(200);
	}
}

START_TEST(test_pool_daemon_restart)
{
	/* the workers outlive rematd: they must come back to us to be reaped */
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	char job[3][16];
	long long pid[2];
	td_daemon d;
	td_conn ev, rq;
	replay r;
	if (!squeezed_jobs("test_pool_daemon_restart", &d, &ev, &rq, &r, job, 3, 2,
		",\"priority\":7"))
		return;
	char *out;
	int rc = td_ctl(&d, &out, "set", job[0], "priority=4", NULL);
	ck_assert_msg(rc == 0, "set: %d %s", rc, out);
	free(out);
	for (int i = 0; i < 2; i++)
		pid[i] = pid_of(&rq, job[i]);
	/* rematd dies; its workers save at their next step and end */
	ck_assert_int_eq(kill(d.pid, SIGKILL), 0);
	ck_assert_int_eq(td_wait_pid(d.pid, T_STOP_MS), 128 + SIGKILL);
	d.pid = 0;
	td_close(&ev);
	td_close(&rq);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(td_wait_pid((pid_t)pid[i], T_STOP_MS), 0);
	/* a new rematd on the same state: the queued job is admitted by the pool (not outside
	 * it), the interrupted ones are admitted again when resumed, as their records say */
	pool_daemon_on(&d, r.arg, &ev, &rq);
	replay r2 = {.pool = r.pool};
	replay_until(&ev, &rq, &r2, job[2], POOL_MS);
	ck_assert_int_gt(share_of(&rq, job[2]), 0);
	resume_job(&rq, job[0]);
	replay_until(&ev, &rq, &r2, job[0], POOL_MS);
	resume_job(&rq, job[1]);
	replay_until(&ev, &rq, &r2, NULL, 6000);
	json_t *st = td_job_status(&rq, job[1]);
	ck_assert_str_eq(td_str(st, "state"), "queued");
	ck_assert_msg(strstr(td_str(st, "reason"), "of the pool"), "%s", td_str(st, "reason"));
	json_decref(st);
	/* its priority as set, not as its spec gave it; the budget its resume runs under is
	 * the pool's, not one of its own: divided as before */
	json_t *m = memory_of(&rq, job[0]);
	ck_assert_int_eq(num(m, "priority"), 4);
	ck_assert(json_is_false(json_object_get(m, "own")));
	ck_assert_int_le(share_of(&rq, job[0]) + share_of(&rq, job[2]), r.pool);
	json_decref(m);
	pool_daemon_end(&d, &ev, &rq);
}
END_TEST

/* A job that could never be admitted (its own budget, or its least, above the whole pool)
 * is refused at job-start: queued, it would wait for ever, and every job behind it too */
START_TEST(test_pool_never_admitted_refused)
{
	static const struct {
		const char *pool, *extra, *what;
	} cases[] = {
		{"256MiB", ",\"remat\":{\"budget\":\"1GiB\"}", "its remat.budget"},
		{"16MiB", "", "its least policy's peak"},
	};
	char spec[1024];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		td_daemon d;
		td_conn ev, rq;
		pool_daemon(&d, cases[i].pool, &ev, &rq);
		json_t *r = td_request(&rq, "{\"execute\":\"job-start\",\"arguments\":"
			"{\"spec\":%s}}", spec_of(spec, sizeof spec, cases[i].extra));
		json_t *e = json_object_get(r, "error");
		ck_assert_msg(e && !strcmp(td_str(e, "class"), "InvalidParameter") &&
			strstr(td_str(e, "desc"), "could never be admitted") &&
			strstr(td_str(e, "desc"), cases[i].what), "pool %s: %s", cases[i].pool,
			json_dumps(r, JSON_COMPACT));
		json_decref(r);
		r = td_request(&rq, "{\"execute\":\"job-list\"}");
		ck_assert_int_eq(json_array_size(json_object_get(json_object_get(r, "return"),
			"jobs")), 0);
		json_decref(r);
		pool_daemon_end(&d, &ev, &rq);
	}
}
END_TEST

START_TEST(test_pool_bad_option)
{
	td_daemon d;
	const char *extra[] = {"--memory", "lots", NULL};
	td_daemon_paths(&d);
	pid_t pid = td_daemon_exec(&d, extra);
	ck_assert_int_eq(td_wait_pid(pid, T_START_MS), 1);
	char *log = td_slurp(d.log);
	ck_assert_msg(strstr(log, "--memory 'lots': give a size"), "%s", log);
}
END_TEST

Suite *suite_pool(void)
{
	Suite *s = suite_create("pool");
	TCase *tc = tcase_create("pool");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_pool_admission_and_division);
	tcase_add_test(tc, test_pool_priority_and_own_budget);
	tcase_add_test(tc, test_pool_paused_squeezed_and_set_priority);
	tcase_add_test(tc, test_pool_daemon_restart);
	tcase_add_test(tc, test_pool_never_admitted_refused);
	tcase_add_test(tc, test_pool_bad_option);
	suite_add_tcase(s, tc);
	return s;
}
