/* test_nolost.c - nothing lost, nothing misreported, no one else's work at risk: the job
 * lifecycle of issue 26, through the real daemon (and the real worker where it matters).
 *
 *  - `rematctl stop JOB` saves; `--no-save` says how many steps since which checkpoint it
 *    dropped (or that there was none); `shutdown` saves every job, `--no-save` says so too;
 *  - daemon-shutdown from a --group member who is not root nor rematd's user is refused
 *    (PermissionDenied), the owner's job running on (root only: skipped in one line else);
 *  - 1,100 failing starts by one user leave another user's stopped job listed, across a
 *    restart; a user whose records are all resumable is refused a start (Busy, why);
 *  - after kill -9 of rematd the record holds a recent step, and the restarted daemon's
 *    status names the checkpoint the orphaned worker saved after the daemon died;
 *  - a worker's event naming another job reaches subscribers as its own job's only.
 */
#include "t_daemon.h"
#include "t_util.h"
#include "tests.h"

#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define FAILING_STARTS 1100
#define NL_WINDOW 8 /* job-starts in flight at once */

/* A tiny job on GPL's bytes: its steps and save directory (NULL: rematd's default). */
static char *nl_spec(int steps, const char *save_dir)
{
	char *s = NULL, save[800] = "";
	if (save_dir)
		snprintf(save, sizeof save, ",\"save\":{\"dir\":\"%s\"}", save_dir);
	ck_assert(asprintf(&s, "{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"" T_GPL
		"\",\"format\":\"bytes\"},\"batch\":2,\"seq_len\":32,\"steps\":%d,\"threads\":2%s}",
		steps, save) > 0);
	return s;
}

/* job-status until the job's step reaches step; its status. */
static json_t *nl_wait_step(td_conn *c, const char *job, int step)
{
	long end = td_ms() + T_JOB_MS;
	for (;;) {
		json_t *st = td_job_status(c, job);
		ck_assert_msg(strcmp(td_str(st, "state"), "failed") != 0, "job %s failed: %s", job,
			td_str(st, "reason"));
		if (json_integer_value(json_object_get(st, "step")) >= step)
			return st;
		json_decref(st);
		ck_assert_msg(td_ms() < end, "job %s did not reach step %d", job, step);
		td_sleep_ms(50);
	}
}

/* A daemon on the real worker (extra arguments a and b may be NULL), and a connection. */
static td_conn nl_daemon(td_daemon *d, const char *a, const char *b)
{
	const char *extra[] = {"--worker", t_env("REMAT_TRAIN"), a, b, NULL};
	td_daemon_paths(d);
	td_daemon_start(d, extra);
	return td_open(d);
}

/* The checkpoint save_dir's `latest` names, as a path (malloc'd). */
static char *nl_latest(const char *save_dir)
{
	char path[800], *name, *full = NULL;
	snprintf(path, sizeof path, "%s/latest", save_dir);
	size_t len;
	name = t_read_file(path, &len);
	name[strcspn(name, "\n")] = '\0';
	ck_assert(asprintf(&full, "%s/%s", save_dir, name) > 0);
	free(name);
	return full;
}

/* A daemon on the real worker and a job that runs until stopped, saving only when asked to
 * (into d's save/, written to save, 700 bytes): its id into job (16 bytes); returns its
 * worker's pid once it has done step steps. The worker outlives rematd in these tests: it comes
 * back to this process to be reaped. */
static pid_t nl_long_job(td_daemon *d, td_conn *c, char *job, char *save, int step)
{
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	*c = nl_daemon(d, NULL, NULL);
	snprintf(save, 700, "%s/save", d->dir);
	char *spec = nl_spec(1000000, save);
	snprintf(job, 16, "%s", td_job_start(c, spec, NULL));
	free(spec);
	json_t *st = nl_wait_step(c, job, step);
	pid_t wpid = (pid_t)json_integer_value(json_object_get(st, "pid"));
	json_decref(st);
	return wpid;
}

/* ---- stop and shutdown save ---- */

/* rematctl resume job, again while its worker is still exiting (Busy: the stop was
 * answered before the process ended); fails the test on any other answer. */
static void nl_resume(const td_daemon *d, const char *job)
{
	long end = td_ms() + T_STOP_MS;
	for (;;) {
		char *out;
		int rc = td_ctl(d, &out, "resume", job, NULL);
		int busy = rc != 0 && strstr(out, "has not exited yet");
		ck_assert_msg(rc == 0 || (busy && td_ms() < end), "resume: %d %s", rc, out);
		free(out);
		if (rc == 0)
			return;
		td_sleep_ms(50);
	}
}

START_TEST(test_nolost_stop_saves)
{
	td_daemon d;
	td_conn c;
	char save[700], job[16], *out;
	nl_long_job(&d, &c, job, save, 3);
	/* no flag: saved at the next step boundary */
	int rc = td_ctl(&d, &out, "stop", job, NULL);
	ck_assert_msg(rc == 0 && strstr(out, "stopped at step") && strstr(out, "saved to") &&
		strstr(out, save), "stop: %d %s", rc, out);
	free(out);
	json_t *st = td_job_status(&c, job);
	char *ck = strdup(td_str(st, "last_checkpoint"));
	char *latest = nl_latest(save);
	ck_assert_str_eq(ck, latest);
	json_decref(st);
	free(latest);

	/* resumed, then stopped without saving: how many steps since that checkpoint */
	nl_resume(&d, job);
	const char *base = strrchr(ck, '/') + 1;
	int from = atoi(base + 5);
	json_decref(nl_wait_step(&c, job, from + 3));
	rc = td_ctl(&d, &out, "stop", job, "--no-save", NULL);
	char want[128];
	snprintf(want, sizeof want, "steps since %s dropped", base);
	ck_assert_msg(rc == 0 && strstr(out, "without saving:") && strstr(out, want),
		"stop --no-save: %d %s (wanted '%s')", rc, out, want);
	free(out);
	/* the reply's numbers: the steps dropped are the stop's step less the checkpoint's */
	nl_resume(&d, job);
	json_decref(nl_wait_step(&c, job, from + 2));
	json_t *r = td_request(&c, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\","
		"\"save\":false}}", job);
	json_t *ret = td_expect_return(r);
	ck_assert(json_is_null(json_object_get(ret, "checkpoint")));
	ck_assert_str_eq(td_str(ret, "since_checkpoint"), ck);
	ck_assert_int_eq(json_integer_value(json_object_get(ret, "dropped_steps")),
		json_integer_value(json_object_get(ret, "step")) - from);
	json_decref(r);

	/* a job that never saved: every step dropped, no checkpoint named */
	char save2[700];
	snprintf(save2, sizeof save2, "%s/save2", d.dir);
	char *spec2 = nl_spec(1000000, save2);
	char job2[16];
	snprintf(job2, sizeof job2, "%s", td_job_start(&c, spec2, NULL));
	json_decref(nl_wait_step(&c, job2, 2));
	rc = td_ctl(&d, &out, "stop", job2, "--no-save", NULL);
	ck_assert_msg(rc == 0 && strstr(out, "no checkpoint: all") && strstr(out, "dropped"),
		"stop --no-save without a checkpoint: %d %s", rc, out);
	free(out);
	char l2[800];
	snprintf(l2, sizeof l2, "%s/latest", save2);
	ck_assert_msg(access(l2, F_OK) < 0, "stop --no-save saved");
	/* --save is still taken (old scripts), and saves */
	nl_resume(&d, job);
	json_decref(nl_wait_step(&c, job, from + 1));
	rc = td_ctl(&d, &out, "stop", job, "--save", NULL);
	ck_assert_msg(rc == 0 && strstr(out, "saved to"), "stop --save: %d %s", rc, out);
	free(out);
	td_close(&c);
	td_daemon_stop(&d);
	free(spec2);
	free(ck);
}
END_TEST

START_TEST(test_nolost_shutdown_saves)
{
	for (int no_save = 0; no_save < 2; no_save++) {
		td_daemon d;
		td_conn c;
		char save[700], job[16], *out;
		nl_long_job(&d, &c, job, save, 3);
		int rc = td_ctl(&d, &out, "shutdown", no_save ? "--no-save" : NULL, NULL);
		ck_assert_int_eq(td_wait_pid(d.pid, T_STOP_MS), 0);
		d.pid = 0;
		char line[64];
		snprintf(line, sizeof line, "%s: stopped at step", job);
		if (!no_save) {
			char *latest = nl_latest(save);
			ck_assert_msg(rc == 0 && strstr(out, line) && strstr(out, latest),
				"shutdown: %d %s", rc, out);
			free(latest);
		} else {
			ck_assert_msg(rc == 0 && strstr(out, line) &&
				strstr(out, "no checkpoint: all"), "shutdown --no-save: %d %s", rc, out);
			char l[800];
			snprintf(l, sizeof l, "%s/latest", save);
			ck_assert_msg(access(l, F_OK) < 0, "shutdown --no-save saved");
		}
		free(out);
		td_close(&c);
	}
}
END_TEST

/* ---- who may shut the daemon down ---- */

START_TEST(test_nolost_group_shutdown_refused)
{
	if (geteuid() != 0) {
		printf("test_nolost_group_shutdown_refused: skipped: needs root (a client of "
			"another uid)\n");
		return;
	}
	td_daemon d;
	td_daemon_paths(&d);
	ck_assert_int_eq(chmod(d.dir, 0711), 0);
	if (!td_peer_can_reach("test_nolost_group_shutdown_refused", d.dir))
		return;
	char *out;
	const char *extra[] = {"--worker", t_env("REMAT_TRAIN"), "--group", TD_PEER_GROUP, NULL};
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	char job[16];
	snprintf(job, sizeof job, "%s", td_job_start(&c, T_TINY_SPEC, NULL));
	json_t *st = nl_wait_step(&c, job, 1);
	int step = (int)json_integer_value(json_object_get(st, "step"));
	json_decref(st);
	/* a member of the group, neither root nor rematd's user */
	char *sd[] = {(char *)t_env("REMATCTL"), "--socket", d.sock, "shutdown", NULL};
	int rc = td_run_as_peer(sd, &out);
	ck_assert_msg(rc == 1 && strstr(out, "PermissionDenied") && strstr(out, "root"),
		"a group member's shutdown: %d %s", rc, out);
	free(out);
	char *sdn[] = {(char *)t_env("REMATCTL"), "--socket", d.sock, "shutdown", "--no-save",
		NULL};
	rc = td_run_as_peer(sdn, &out);
	ck_assert_msg(rc == 1 && strstr(out, "PermissionDenied"), "shutdown --no-save: %d %s",
		rc, out);
	free(out);
	/* it may still look */
	char *ls[] = {(char *)t_env("REMATCTL"), "--socket", d.sock, "ls", NULL};
	rc = td_run_as_peer(ls, &out);
	ck_assert_msg(rc == 0 && strstr(out, job), "ls: %d %s", rc, out);
	free(out);
	/* the daemon and the owner's job go on */
	ck_assert_int_eq(td_wait_pid(d.pid, 200), -1);
	td_alive(&d);
	st = nl_wait_step(&c, job, step + 2);
	ck_assert_str_eq(td_str(st, "state"), "running");
	json_decref(st);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

/* ---- the job table ---- */

/* A record of an ended job as an earlier rematd left it: STATE_DIR/jobs/jNUM/state.json. */
static void nl_plant(const td_daemon *d, unsigned num, unsigned long uid, const char *state)
{
	char dir[800], path[900], text[1600];
	snprintf(dir, sizeof dir, "%s/jobs", d->state);
	mkdir(d->state, 0700);
	mkdir(dir, 0700);
	snprintf(dir, sizeof dir, "%s/jobs/j%u", d->state, num);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	snprintf(path, sizeof path, "%s/state.json", dir);
	snprintf(text, sizeof text, "{\"format\":1,\"job\":\"j%u\",\"name\":\"planted\",\"state\":"
		"\"%s\",\"reason\":\"job-stop\",\"step\":7,\"steps\":100,\"owner\":{\"uid\":%lu,"
		"\"gid\":%lu,\"groups\":[]},\"save_dir\":\"%s/checkpoints\",\"spec_file\":"
		"\"job.json\",\"created\":1}", num, state, uid, uid, dir);
	t_write_file(path, text, strlen(text));
}

/* A stand-in worker program: --check passes any spec at once, a worker fails at once. */
static char *nl_failing_worker(const td_daemon *d)
{
	char *path = malloc(700);
	ck_assert_ptr_nonnull(path);
	snprintf(path, 700, "%s/failing.sh", d->dir);
	const char *text = "#!/bin/sh\ncase \"$1\" in\n"
			   "--check) echo '{\"ok\":true,\"name\":\"f\",\"steps\":10,\"save_dir\":\"\"}';;\n"
			   "--info) echo '{\"blas\":\"none\"}';;\n*) exit 1;;\nesac\n";
	t_write_file(path, text, strlen(text));
	ck_assert_int_eq(chmod(path, 0755), 0);
	return path;
}

/* job-list: the state of job (NULL: not listed); *mine counts uid's records. */
static const char *nl_listed(td_conn *c, const char *job, unsigned long uid, int *mine)
{
	static char state[32];
	json_t *r = td_request(c, "{\"execute\":\"job-list\"}"), *e;
	size_t i;
	const char *found = NULL;
	*mine = 0;
	json_array_foreach(json_object_get(td_expect_return(r), "jobs"), i, e) {
		if ((unsigned long)json_integer_value(json_object_get(e, "uid")) == uid)
			(*mine)++;
		if (strcmp(td_str(e, "job"), job) == 0) {
			snprintf(state, sizeof state, "%s", td_str(e, "state"));
			found = state;
		}
	}
	json_decref(r);
	return found;
}

/* d's state directory moved to a tmpfs when there is one (/dev/shm): a thousand jobs'
 * records are each written durably, and on a disk their fsyncs alone take a minute. The
 * directory made (to be removed by nl_shm_done), or NULL. */
static char *nl_shm_state(td_daemon *d)
{
	char tmpl[] = "/dev/shm/remat-nolost-XXXXXX";
	if (!mkdtemp(tmpl))
		return NULL;
	snprintf(d->state, sizeof d->state, "%s/state", tmpl);
	return strdup(tmpl);
}

static void nl_shm_done(char *dir)
{
	char cmd[128];
	if (!dir)
		return;
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir); /* mkdtemp's name: no quote in it */
	ck_assert_int_eq(system(cmd), 0);
	free(dir);
}

START_TEST(test_nolost_failing_starts_keep_others_jobs)
{
	td_daemon d;
	td_daemon_paths(&d);
	char *shm = nl_shm_state(&d);
	/* another user's stopped job, the oldest record of all */
	unsigned long me = (unsigned long)geteuid(), other = me == TD_NOBODY ? TD_NOBODY - 1 : TD_NOBODY;
	nl_plant(&d, 1, other, "stopped");
	char *w = nl_failing_worker(&d);
	const char *extra[] = {"--worker", w, "--max-jobs", "16", NULL};
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	const char *start = "{\"execute\":\"job-start\",\"arguments\":{\"spec\":" T_TINY_SPEC
			    "}}";
	long t0 = td_ms();
	/* NL_WINDOW starts in flight at a time: their checks run side by side */
	int sent = 0, done = 0;
	while (done < FAILING_STARTS) {
		for (; sent < FAILING_STARTS && sent - done < NL_WINDOW; sent++)
			td_send(&c, start);
		json_t *r = td_reply(&c, T_JOB_MS);
		const char *cls = json_string_value(json_object_get(json_object_get(r, "error"),
			"class"));
		/* Busy: the queue or the checks are full of jobs still failing; they end in a
		 * moment, and the start is sent again */
		ck_assert_msg(!cls || strcmp(cls, "Busy") == 0, "start %d: %s", done, cls);
		if (cls) {
			td_sleep_ms(20);
			sent--;
		} else {
			done++;
		}
		json_decref(r);
	}
	printf("test_nolost_failing_starts_keep_others_jobs: %d starts in %ld ms\n",
		FAILING_STARTS, td_ms() - t0);
	int mine;
	const char *state = nl_listed(&c, "j1", other, &mine);
	ck_assert_msg(state && strcmp(state, "stopped") == 0, "uid %lu's stopped job is %s", other,
		state ? state : "gone");
	ck_assert_int_eq(mine, 1);
	state = nl_listed(&c, "j1", me, &mine);
	ck_assert_msg(mine <= 256, "%d records of the starter kept", mine);
	td_close(&c);
	td_daemon_stop(&d);

	/* and across a restart, which loads every record on disk again */
	td_daemon_start(&d, extra);
	c = td_open(&d);
	state = nl_listed(&c, "j1", other, &mine);
	ck_assert_msg(state && strcmp(state, "stopped") == 0, "after a restart, uid %lu's "
		"stopped job is %s", other, state ? state : "gone");
	json_t *st = td_job_status(&c, "j1");
	ck_assert_int_eq(json_integer_value(json_object_get(st, "uid")), (json_int_t)other);
	json_decref(st);
	td_close(&c);
	td_daemon_stop(&d);
	nl_shm_done(shm);
	free(w);
}
END_TEST

START_TEST(test_nolost_all_resumable_refused)
{
	td_daemon d;
	td_daemon_paths(&d);
	unsigned long me = (unsigned long)geteuid();
	for (unsigned i = 1; i <= 256; i++)
		nl_plant(&d, i, me, i % 2 ? "stopped" : "interrupted");
	char *w = nl_failing_worker(&d);
	const char *extra[] = {"--worker", w, NULL};
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	json_t *r = td_request(&c, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":"
		T_TINY_SPEC "}}");
	const char *desc = td_expect_error(r, "Busy");
	ck_assert_msg(strstr(desc, "256") && strstr(desc, "resumable") && strstr(desc, "rm"),
		"desc: %s", desc);
	json_decref(r);
	/* one removed: room for one */
	json_decref(td_request(&c, "{\"execute\":\"job-remove\",\"arguments\":{\"job\":\"j2\"}}"));
	r = td_request(&c, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":"
		T_TINY_SPEC "}}");
	td_expect_return(r);
	json_decref(r);
	int mine;
	ck_assert_ptr_nonnull(nl_listed(&c, "j1", me, &mine));
	ck_assert_int_eq(mine, 256);
	td_close(&c);
	td_daemon_stop(&d);
	free(w);
}
END_TEST

/* ---- the record after kill -9 ---- */

/* kill -9 of d's rematd (c, its connection, closed). */
static void nl_kill_daemon(td_daemon *d, td_conn *c)
{
	ck_assert_int_eq(kill(d->pid, SIGKILL), 0);
	ck_assert_int_eq(td_wait_pid(d->pid, T_STOP_MS), 128 + SIGKILL);
	d->pid = 0;
	td_close(c);
}

START_TEST(test_nolost_killed_daemon_names_newest_checkpoint)
{
	td_daemon d;
	td_conn c;
	char save[700], rec[800], job[16];
	pid_t wpid = nl_long_job(&d, &c, job, save, 1);
	/* long enough for a STEP's progress to reach the record */
	td_sleep_ms(4000);
	json_t *st = nl_wait_step(&c, job, 2);
	json_decref(st);
	nl_kill_daemon(&d, &c);
	snprintf(rec, sizeof rec, "%s/jobs/%s/state.json", d.state, job);
	json_t *o = json_load_file(rec, 0, NULL);
	ck_assert_ptr_nonnull(o);
	ck_assert_msg(json_integer_value(json_object_get(o, "step")) >= 1, "the record's step is "
		"%lld after the job ran for seconds", (long long)json_integer_value(json_object_get(o,
		"step")));
	json_decref(o);
	/* the orphan saves at its next step boundary and exits */
	int rc = td_wait_pid(wpid, T_STOP_MS);
	ck_assert_msg(rc == 0, "the orphaned worker ended with %d", rc);
	char *latest = nl_latest(save);

	const char *extra[] = {"--worker", t_env("REMAT_TRAIN"), NULL};
	td_daemon_start(&d, extra);
	c = td_open(&d);
	long end = td_ms() + T_JOB_MS;
	const char *ck = NULL;
	for (;;) {
		st = td_job_status(&c, job);
		ck_assert_str_eq(td_str(st, "state"), "interrupted");
		ck = json_string_value(json_object_get(st, "last_checkpoint"));
		if (ck && strcmp(ck, latest) == 0)
			break;
		json_decref(st);
		ck_assert_msg(td_ms() < end, "status never named %s (names %s)", latest,
			ck ? ck : "none");
		td_sleep_ms(100);
	}
	int ck_step = atoi(strrchr(latest, '/') + 6);
	ck_assert_int_ge(json_integer_value(json_object_get(st, "step")), ck_step);
	json_decref(st);
	/* ls says the same step */
	char *out;
	rc = td_ctl(&d, &out, "status", job, NULL);
	ck_assert_msg(rc == 0 && strstr(out, strrchr(latest, '/') + 1), "status: %d %s", rc, out);
	free(out);
	td_close(&c);
	td_daemon_stop(&d);
	free(latest);
}
END_TEST

/* rematd dies and the orphan's final save fails (its save directory's `latest` became a
 * symlink, which a save refuses): no one can reach it any more, so it must end rather than
 * train on unreachable, holding the directory's lock against the resume a new rematd
 * offers (it used to run on for good). */
START_TEST(test_nolost_orphan_ends_when_its_save_fails)
{
	td_daemon d;
	td_conn c;
	char save[700], latest[800], job[16];
	pid_t wpid = nl_long_job(&d, &c, job, save, 1);
	snprintf(latest, sizeof latest, "%s/latest", save);
	ck_assert_int_eq(symlink("/dev/null", latest), 0);
	nl_kill_daemon(&d, &c);
	int rc = td_wait_pid(wpid, T_STOP_MS);
	if (rc < 0)
		kill(wpid, SIGKILL), td_wait_pid(wpid, T_STOP_MS);
	ck_assert_msg(rc > 0, "the orphaned worker whose save failed %s", rc < 0 ?
		"still ran after 30 s" : "ended with status 0");
	char log[800];
	snprintf(log, sizeof log, "%s/jobs/%s/worker.log", d.state, job);
	ck_assert_msg(strstr(td_slurp(log), "latest"), "the worker's log does not say why");
}
END_TEST

/* ---- events forged by a worker ---- */

START_TEST(test_nolost_forged_event_restamped)
{
	td_daemon d;
	td_daemon_paths(&d);
	/* greets and runs; any job but j1 then tells of a step 999 and a checkpoint of j1's */
	char *w = td_script(&d, "worker.sh",
		TD_WORKER_RUNNING
		"if [ \"$4\" != j1 ]; then\n"
		"printf '{\"event\":\"STEP\",\"data\":{\"job\":\"j1\",\"step\":999,\"loss\":0.5},"
		"\"job\":\"j1\"}\\n' >&3\n"
		"printf '{\"event\":\"CHECKPOINT_SAVED\",\"data\":{\"job\":\"j1\",\"step\":999,"
		"\"path\":\"/forged\"}}\\n' >&3\n"
		"fi\nexec sleep 60");
	const char *extra[] = {"--worker", w, "--max-jobs", "4", "--stop-timeout", "1", NULL};
	td_daemon_start(&d, extra);
	td_conn all = td_open(&d), one = td_open(&d);
	json_decref(td_request(&all, "{\"execute\":\"subscribe\"}"));
	char *spec = nl_spec(100, NULL);
	const char *j = td_job_start(&all, spec, NULL);
	ck_assert_str_eq(j, "j1");
	json_decref(td_wait_state(&all, "j1", "running", T_READ_MS));
	json_decref(td_request(&one, "{\"execute\":\"subscribe\",\"arguments\":{\"job\":\"j1\"}}"));
	char attacker[16];
	snprintf(attacker, sizeof attacker, "%s", td_job_start(&all, spec, NULL));
	/* the unfiltered subscriber gets both forged events, as the attacker's own */
	int seen = 0;
	long end = td_ms() + T_READ_MS;
	while (seen < 2) {
		long left = end - td_ms();
		ck_assert_msg(left > 0, "the forged events never came (%d seen)", seen);
		json_t *m = td_read_msg(&all, (int)left);
		ck_assert_ptr_nonnull(m);
		const char *ev = json_string_value(json_object_get(m, "event"));
		json_t *data = json_object_get(m, "data");
		if (ev && json_integer_value(json_object_get(data, "step")) == 999) {
			ck_assert_msg(strcmp(td_str(data, "job"), attacker) == 0, "%s of job %s relayed "
				"as %s's", ev, attacker, td_str(data, "job"));
			ck_assert_ptr_null(json_object_get(m, "job"));
			seen++;
		}
		json_decref(m);
	}
	/* j1's subscriber never hears of them */
	for (json_t *m; (m = td_read_msg(&one, 500));) {
		json_t *data = json_object_get(m, "data");
		ck_assert_msg(json_integer_value(json_object_get(data, "step")) != 999,
			"a forged event reached j1's subscriber");
		json_decref(m);
	}
	/* nor do they touch j1's record; the attacker's own is its worker's to say */
	char rec[800];
	snprintf(rec, sizeof rec, "%s/jobs/j1/state.json", d.state);
	json_t *o = json_load_file(rec, 0, NULL);
	ck_assert_ptr_nonnull(o);
	ck_assert_int_ne(json_integer_value(json_object_get(o, "step")), 999);
	ck_assert(json_is_null(json_object_get(o, "last_checkpoint")));
	json_decref(o);
	td_close(&one);
	td_close(&all);
	td_daemon_stop(&d);
	free(spec);
	free(w);
}
END_TEST

/* One case per promise, so that each can be run alone (CK_RUN_CASE). The table's 1,100
 * starts take about 35 s on two idle cores, and minutes on a loaded machine: a bound, not
 * a measurement. */
static void nl_case(Suite *s, const char *name, const TTest *t)
{
	TCase *tc = tcase_create(name);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, t);
	suite_add_tcase(s, tc);
}

Suite *suite_nolost(void)
{
	Suite *s = suite_create("nolost");
	nl_case(s, "stop", test_nolost_stop_saves);
	nl_case(s, "shutdown", test_nolost_shutdown_saves);
	nl_case(s, "group", test_nolost_group_shutdown_refused);
	nl_case(s, "table", test_nolost_failing_starts_keep_others_jobs);
	nl_case(s, "resumable", test_nolost_all_resumable_refused);
	nl_case(s, "killed", test_nolost_killed_daemon_names_newest_checkpoint);
	nl_case(s, "orphan", test_nolost_orphan_ends_when_its_save_fails);
	nl_case(s, "forged", test_nolost_forged_event_restamped);
	return s;
}
