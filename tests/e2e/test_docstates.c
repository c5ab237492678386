/* test_docstates.c - docs/protocol.md's "Commands by job state" against a real rematd and
 * its workers: every job-scoped command of proto's table has its row; each is sent to a job
 * in each state the test can hold (queued behind another job under --max-jobs 1, running,
 * paused, stopped, failed, finished), and succeeds exactly where the document says
 * `worker`, `rematd` or `kept`, and is refused InvalidState where it says `no`. Starting is
 * held by a worker that delays its start (REMAT_START_DELAY_MS): the commands that leave
 * the job where it is are sent to one starting job together, each of the others to a
 * starting job of its own. job-status answers proto's keys (proto_status_keys), all of
 * them, in every state. The stopping column (a state a job passes through too fast to
 * hold) is checked for its words alone.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "t_daemon.h"
#include "t_util.h"
#include "tests.h"

#define TABLE "| command | queued | starting | running | paused | stopping | ended |"

/* Each job-scoped command, with arguments that are right for a running tiny job; `moves`:
 * when it succeeds the job leaves the state it was in (a fresh one is made for the next) */
static const struct {
	const char *name, *args;
	int moves;
} cmds[] = {
	{"job-status", "", 0}, {"remat-get", "", 0}, {"remat-plan", "", 0},
	{"mem-stats", "", 0}, {"mem-reset-peak", "", 0}, {"remat-costs", "", 0},
	{"remat-memlog", ",\"steps\":1", 0}, {"job-metrics", ",\"lines\":1", 0},
	{"remat-set", ",\"sections\":{\"h.0\":\"full\"}", 0},
	{"remat-auto", ",\"budget\":\"off\"", 0}, {"remat-profile", ",\"rounds\":1", 0},
	{"job-set", ",\"set\":{\"lr\":0.001}", 0}, {"ckpt-save", "", 0}, {"job-eval", "", 0},
	{"job-pause", "", 1}, {"job-resume", "", 1}, {"job-stop", ",\"save\":false", 1},
	{"job-kill", "", 1}, {"job-remove", "", 1},
};
#define NCMDS ((int)(sizeof cmds / sizeof cmds[0]))

/* The states held, and the column of each in TABLE's rows (ended: 6) */
static const struct {
	const char *name;
	int col;
} states[] = {{"queued", 1}, {"running", 3}, {"paused", 4}, {"stopped", 6},
	{"failed", 6}, {"finished", 6}};

typedef struct ds {
	td_daemon d;
	td_conn c;
	int saves;      /* save directories made: one a job */
	char blocker[16]; /* the running job that keeps the next one queued, or "" */
} ds;

/* A job started from the tiny spec with data.val and a save directory of its own, steps
 * long; its id into id */
static void start(ds *t, int steps, char *id)
{
	char spec[1600];
	snprintf(spec, sizeof spec, "{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"" T_GPL
		"\",\"val\":\"" T_GPL "\",\"format\":\"bytes\"},\"batch\":2,\"seq_len\":32,"
		"\"steps\":%d,\"threads\":1,\"save\":{\"dir\":\"%s/save%d\"}}", steps, t->d.dir,
		++t->saves);
	snprintf(id, 16, "%s", td_job_start(&t->c, spec, NULL));
}

/* job's state now ("gone" once removed); an ended job's worker may still be exiting: its
 * state is "exiting" until rematd has reaped it (its pid null) */
static const char *state_of(ds *t, const char *job)
{
	static char st[32];
	json_t *r = td_request(&t->c, "{\"execute\":\"job-status\",\"arguments\":{\"job\":"
		"\"%s\"}}", job), *ret = json_object_get(r, "return");
	snprintf(st, sizeof st, "%s", ret ? td_str(ret, "state") : "gone");
	if (ret && proto_job_state_final(proto_job_state_find(st)) &&
		!json_is_null(json_object_get(ret, "pid")))
		snprintf(st, sizeof st, "exiting");
	json_decref(r);
	return st;
}

/* Waits until job is in state `to` (an ended one: its worker reaped) */
static void wait_for(ds *t, const char *job, const char *to)
{
	long end = td_ms() + T_JOB_MS;
	while (strcmp(state_of(t, job), to) != 0) {
		ck_assert_msg(td_ms() < end, "job %s is %s, not %s, after %d ms", job,
			state_of(t, job), to, T_JOB_MS);
		td_sleep_ms(50);
	}
}

/* A reply's outcome: "ok", or the error class (new reply taken) */
static const char *outcome(json_t *r, char *buf, size_t len)
{
	json_t *e = json_object_get(r, "error");
	snprintf(buf, len, "%s", e ? td_str(e, "class") : "ok");
	json_decref(r);
	return buf;
}

static json_t *ask(ds *t, const char *cmd, const char *job, const char *more)
{
	return td_request(&t->c, "{\"execute\":\"%s\",\"arguments\":{\"job\":\"%s\"%s}}", cmd,
		job, more);
}

/* A job that may still have a worker, ended (killed): it holds no worker slot */
static void retire(ds *t, const char *job)
{
	const char *st = state_of(t, job);
	if (!strcmp(st, "gone") || proto_job_state_final(proto_job_state_find(st)))
		return;
	json_decref(ask(t, "job-kill", job, ""));
	long end = td_ms() + T_JOB_MS;
	while (!proto_job_state_final(proto_job_state_find(state_of(t, job))))
		ck_assert_msg(td_ms() < end, "job %s did not end after job-kill", job);
}

/* rematd keeps job's figures, which an ended job answers from (it asks every 2 s; a job
 * that ends sooner has none): asked for through it */
static void figures(ds *t, const char *job)
{
	char buf[32];
	ck_assert_str_eq(outcome(ask(t, "mem-stats", job, ""), buf, sizeof buf), "ok");
	ck_assert_str_eq(outcome(ask(t, "remat-get", job, ""), buf, sizeof buf), "ok");
}

/* A job in state st, its id into id */
static void make(ds *t, const char *st, char *id)
{
	char buf[32];
	if (!strcmp(st, "queued")) {
		if (!t->blocker[0]) {
			start(t, 1000000, t->blocker);
			wait_for(t, t->blocker, "running");
		}
		start(t, 1000000, id);
		ck_assert_str_eq(state_of(t, id), "queued");
		return;
	}
	if (!strcmp(st, "finished")) { /* paused at its start (kept), so that it has figures */
		start(t, 50, id);
		ck_assert_str_eq(outcome(ask(t, "job-pause", id, ""), buf, sizeof buf), "ok");
		wait_for(t, id, "paused");
		figures(t, id);
		ck_assert_str_eq(outcome(ask(t, "job-resume", id, ""), buf, sizeof buf), "ok");
		wait_for(t, id, "finished");
		return;
	}
	start(t, 1000000, id);
	wait_for(t, id, "running");
	if (!strcmp(st, "paused")) {
		ck_assert_str_eq(outcome(ask(t, "job-pause", id, ""), buf, sizeof buf), "ok");
		wait_for(t, id, "paused");
	} else if (!strcmp(st, "stopped")) { /* saved: a resume has a checkpoint */
		ck_assert_str_eq(outcome(ask(t, "job-stop", id, ""), buf, sizeof buf), "ok");
		wait_for(t, id, "stopped");
	} else if (!strcmp(st, "failed")) {
		figures(t, id); /* and a checkpoint to resume from */
		ck_assert_str_eq(outcome(ask(t, "ckpt-save", id, ""), buf, sizeof buf), "ok");
		ck_assert_str_eq(outcome(ask(t, "job-kill", id, ""), buf, sizeof buf), "ok");
		wait_for(t, id, "failed");
	}
}

/* The document's word for cmd in state s (column col): "worker", "rematd", "kept" or "no";
 * an ended column that says "finished: no" is no for a finished job */
static void doc_word(const char *table, const char *cmd, const char *s, int col, char *w,
	size_t len)
{
	size_t n;
	char cell[1024];
	const char *row = t_doc_row(table, cmd, &n);
	ck_assert_msg(row, "docs/protocol.md's Commands by job state has no row for %s", cmd);
	t_doc_cell(row, n, col, cell, sizeof cell);
	ck_assert_msg(sscanf(cell, " %15[a-z]", w) == 1, "%s, %s: '%s'", cmd, s, cell);
	if (!strcmp(s, "finished") && strstr(cell, "finished: no"))
		snprintf(w, len, "no");
}

/* job-status of job answers every key of proto_status_keys and no other (but `stale`) */
static void status_keys(ds *t, const char *job, const char *st)
{
	json_t *r = ask(t, "job-status", job, ""), *ret = json_object_get(r, "return");
	ck_assert_ptr_nonnull(ret);
	size_t n = 0;
	for (int i = 0; proto_status_keys[i]; i++, n++)
		ck_assert_msg(json_object_get(ret, proto_status_keys[i]), "job-status of a %s "
			"job has no '%s'", st, proto_status_keys[i]);
	ck_assert_msg(json_object_size(ret) == n + (json_object_get(ret, "stale") != NULL),
		"job-status of a %s job has %zu keys, proto_status_keys %zu", st,
		json_object_size(ret), n);
	json_decref(r);
}

/* The starting column: the commands that leave the job where it is sent together to one
 * starting job (the kept ones answered once it has started), each of the others to a
 * starting job of its own */
static void check_starting(ds *t, const char *table)
{
	char job[16], want[16], got[32], line[600];
	int next = 0, sent = 0;
	start(t, 1000000, job);
	ck_assert_str_eq(state_of(t, job), "starting");
	status_keys(t, job, "starting");
	/* at most PROTO_MAX_INFLIGHT in flight on a connection: the first batch is kept */
	for (;;) {
		for (; next < NCMDS && sent < PROTO_MAX_INFLIGHT; next++) {
			if (cmds[next].moves)
				continue;
			snprintf(line, sizeof line, "{\"execute\":\"%s\",\"arguments\":{\"job\":"
				"\"%s\"%s},\"id\":%d}", cmds[next].name, job, cmds[next].args, next);
			td_send(&t->c, line);
			sent++;
		}
		if (!sent)
			break;
		json_t *r = td_reply(&t->c, T_JOB_MS);
		int i = (int)json_integer_value(json_object_get(r, "id"));
		ck_assert(i >= 0 && i < NCMDS);
		sent--;
		doc_word(table, cmds[i].name, "starting", 2, want, sizeof want);
		outcome(r, got, sizeof got);
		ck_assert_msg(strcmp(want, "no") ? !strcmp(got, "ok") : !strcmp(got,
			"InvalidState"), "%s to a starting job: %s; docs/protocol.md says '%s'",
			cmds[i].name, got, want);
	}
	retire(t, job);
	for (int i = 0; i < NCMDS; i++) {
		if (!cmds[i].moves)
			continue;
		start(t, 1000000, job);
		ck_assert_str_eq(state_of(t, job), "starting");
		doc_word(table, cmds[i].name, "starting", 2, want, sizeof want);
		outcome(ask(t, cmds[i].name, job, cmds[i].args), got, sizeof got);
		ck_assert_msg(strcmp(want, "no") ? !strcmp(got, "ok") : !strcmp(got,
			"InvalidState"), "%s to a starting job: %s; docs/protocol.md says '%s'",
			cmds[i].name, got, want);
		retire(t, job);
	}
}

/* Every command against a job in state states[s], fresh jobs where one moved it */
static void check_state(ds *t, const char *table, int s)
{
	const char *st = states[s].name;
	char job[16], want[16], got[32];
	make(t, st, job);
	status_keys(t, job, st);
	for (int i = 0; i < NCMDS; i++) {
		doc_word(table, cmds[i].name, st, states[s].col, want, sizeof want);
		outcome(ask(t, cmds[i].name, job, cmds[i].args), got, sizeof got);
		int ok = !strcmp(got, "ok");
		ck_assert_msg(strcmp(want, "no") ? ok : !strcmp(got, "InvalidState"), "%s to a "
			"%s job: %s; docs/protocol.md says '%s'", cmds[i].name, st, got, want);
		if (ok && cmds[i].moves) {
			retire(t, job);
			make(t, st, job);
		}
	}
	retire(t, job);
	if (t->blocker[0]) {
		retire(t, t->blocker);
		t->blocker[0] = '\0';
	}
}

START_TEST(test_docstates_table)
{
	ds t = {0};
	const char *extra[] = {"--worker", t_env("REMAT_TRAIN"), "--max-jobs", "1", NULL};
	char *doc = t_protocol_md();
	const char *table = strstr(doc, TABLE);
	ck_assert_msg(table, "docs/protocol.md has no table '%s'", TABLE);
	/* every job-scoped command is here and in the table; every cell a word it knows */
	for (const proto_command *c = proto_commands(); c->name; c++) {
		int here = 0;
		for (int i = 0; i < NCMDS; i++)
			here |= !strcmp(cmds[i].name, c->name);
		ck_assert_msg(here == (c->scope == PROTO_SCOPE_JOB), "%s: job-scoped %d, in the "
			"test %d", c->name, c->scope == PROTO_SCOPE_JOB, here);
	}
	for (int i = 0; i < NCMDS; i++)
		for (int col = 1; col <= 6; col++) {
			char w[16];
			doc_word(table, cmds[i].name, "", col, w, sizeof w);
			ck_assert_msg(!strcmp(w, "worker") || !strcmp(w, "rematd") ||
					      !strcmp(w, "kept") || !strcmp(w, "no"),
				"%s, column %d: '%s'", cmds[i].name, col, w);
		}
	td_daemon_paths(&t.d);
	td_daemon_start(&t.d, extra);
	t.c = td_open(&t.d);
	for (int s = 0; s < (int)(sizeof states / sizeof states[0]); s++)
		check_state(&t, table, s);
	td_close(&t.c);
	td_daemon_stop(&t.d);
	/* starting, held: a daemon whose workers delay their start */
	setenv("REMAT_START_DELAY_MS", "1000", 1);
	td_daemon_paths(&t.d);
	td_daemon_start(&t.d, extra);
	t.c = td_open(&t.d);
	check_starting(&t, table);
	td_close(&t.c);
	td_daemon_stop(&t.d);
	free(doc);
}
END_TEST

Suite *suite_docstates(void)
{
	Suite *s = suite_create("docstates");
	TCase *tc = tcase_create("docstates");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_docstates_table);
	suite_add_tcase(s, tc);
	return s;
}
