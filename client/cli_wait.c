/* cli_wait.c - `rematctl remat set --wait` (see cli_wait.h).
 *
 * Events that arrive with the reply (cli_conn_call hands them over before the step to wait
 * for is known) are kept and judged first, in the order they came; then the connection is
 * read until one decides. An event of another job, or one of this job that decides
 * nothing (an earlier change applied, a state that is not final), is passed over. The
 * change is known by its number (the reply's `change`): REMAT_APPLIED or REMAT_FAILED of
 * that number or a later one (a later set built on it, said at the same boundary) decides;
 * the controller's and a schedule's own changes do not.
 */
#include "cli_wait.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_fmt.h"

#define WAIT_TEXT 512 /* a reason or a policy, as printed */

const char *const cli_wait_events[] = {"REMAT_APPLIED", "REMAT_FAILED", "JOB_STATE_CHANGED",
	NULL};

typedef struct waiter {
	const cli_args *a;
	const char *job;  /* the job as printed: "j1", or "job" on a worker's own socket */
	const char *only; /* whose events count; NULL: every one (a worker's own socket) */
	json_t *early;	  /* events that came before the reply (array) */
	double step;	  /* the reply's applies_at_step */
	double change;	  /* the reply's change number; 0: it gave none (match by step) */
	int at_resume;	  /* the job is ending first: the change is the policy it resumes with */
} waiter;

static void keep_event(json_t *msg, void *ud)
{
	waiter *w = ud;
	json_array_append(w->early, msg);
}

/* The exit status and message for a cli_conn result other than CLI_OK. */
static int conn_failed(const cli_conn *c, int rc)
{
	if (rc == CLI_EREPLY) {
		fprintf(stderr, CLI_NAME ": %s (%s)\n", c->err, c->err_class);
		return CLI_EXIT_FAIL;
	}
	if (rc == CLI_EINTR)
		return CLI_EXIT_FAIL; /* interrupted before the outcome: not a success */
	fprintf(stderr, CLI_NAME ": %s\n", c->err);
	return CLI_EXIT_CONN;
}

/* --json: the deciding event as it came, one line. */
static void print_json(const json_t *msg)
{
	char *text = cli_json_text(msg, JSON_COMPACT);
	if (text)
		printf("%s\n", text);
	free(text);
}

static int say_applied(const waiter *w, const json_t *msg, const json_t *data)
{
	char pol[WAIT_TEXT], at[32];
	if (w->a->json) {
		print_json(msg);
		return CLI_EXIT_OK;
	}
	printf("%s: applied at step %s: %s\n", w->job,
	       cli_show_num(data, "step", "%.0f", at, sizeof at),
	       cli_policy_format(cli_jobj(data, "policy"), pol, sizeof pol));
	return CLI_EXIT_OK;
}

static int say_failed(const waiter *w, const json_t *msg, const json_t *data)
{
	char pol[WAIT_TEXT], asked[WAIT_TEXT], why[WAIT_TEXT];
	const char *reason = cli_jstr(data, "reason");
	if (w->a->json) {
		print_json(msg);
		return CLI_EXIT_FAIL;
	}
	fprintf(stderr, CLI_NAME ": %s: not applied at step %.0f: %s; the step ran under %s "
		"(asked: %s)\n", w->job, w->step, cli_str_clean(reason ? reason : "no reason given",
		why, sizeof why), cli_policy_format(cli_jobj(data, "policy"), pol, sizeof pol),
		cli_policy_format(cli_jobj(data, "asked"), asked, sizeof asked));
	return CLI_EXIT_FAIL;
}

static int say_ended(const waiter *w, const json_t *msg, const json_t *data)
{
	char st[32], why[WAIT_TEXT] = "";
	const char *reason = cli_jstr(data, "reason");
	if (w->a->json) {
		print_json(msg);
		return CLI_EXIT_FAIL;
	}
	if (reason && *reason) {
		char clean[WAIT_TEXT - 8];
		snprintf(why, sizeof why, " (%s)", cli_str_clean(reason, clean, sizeof clean));
	}
	fprintf(stderr, CLI_NAME ": %s: the job %s%s before step %.0f: the change was not "
		"applied%s\n", w->job, cli_str_clean(cli_jstr(data, "to"), st, sizeof st), why,
		w->step, w->at_resume ? "; a resume runs under it" : "");
	return CLI_EXIT_FAIL;
}

/* What msg says of the change: an exit status once it decides, -1 when it does not. */
static int outcome(waiter *w, const json_t *msg)
{
	const char *name = cli_jstr(msg, "event");
	json_t *data = cli_jobj(msg, "data");
	const char *job = cli_jstr(data, "job");
	double step;
	if (!name || !data || (w->only && (!job || strcmp(job, w->only) != 0)))
		return -1;
	int stepped = cli_jnum(data, "step", &step);
	double change;
	if (w->change > 0 && (!strcmp(name, "REMAT_APPLIED") || !strcmp(name, "REMAT_FAILED")))
		stepped = cli_jnum(data, "change", &change) && change >= w->change;
	/* applied at its step, or later where the boundary came late (a pause); a job that
	 * ends first says the policy is the one it resumes with, and then that it ended */
	if (strcmp(name, "REMAT_APPLIED") == 0 && json_is_true(json_object_get(data, "at_resume"))) {
		w->at_resume = 1;
		return -1;
	}
	if (strcmp(name, "REMAT_APPLIED") == 0 && stepped && (w->change > 0 || step >= w->step))
		return say_applied(w, msg, data);
	if (strcmp(name, "REMAT_FAILED") == 0 && stepped && (w->change > 0 || step == w->step))
		return say_failed(w, msg, data);
	if (strcmp(name, "JOB_STATE_CHANGED") == 0 && cli_state_final(cli_jstr(data, "to")))
		return say_ended(w, msg, data);
	return -1;
}

/* Subscribes to the outcome's events of the job (of any job on a worker's own socket). */
static int subscribe(cli_conn *c, const waiter *w, int timeout_ms)
{
	json_t *req = w->only ? json_pack("{s:s}", "job", w->only) : json_object();
	json_t *list = json_array();
	int rc = CLI_ECONN;
	if (req && list) {
		for (int i = 0; cli_wait_events[i]; i++)
			json_array_append_new(list, json_string(cli_wait_events[i]));
		json_object_set(req, "events", list);
		rc = cli_conn_call(c, "subscribe", req, timeout_ms, NULL, NULL, NULL);
	} else {
		snprintf(c->err, sizeof c->err, "out of memory");
	}
	json_decref(list);
	json_decref(req);
	return rc;
}

/* Prints the reply and takes its step; an exit status when there is nothing to wait for,
 * -1 to wait. */
static int take_reply(const cli_command *cmd, waiter *w, const json_t *ret)
{
	if (w->a->json)
		print_json(ret);
	else
		cmd->show(stdout, w->job, ret);
	fflush(stdout);
	if (json_is_true(json_object_get(ret, "queued"))) {
		/* rematd answered for a worker that has not read it: no step is known */
		fprintf(stderr, CLI_NAME ": --wait: no step to wait for: the worker has not taken "
			"the change yet; see 'rematctl status %s'\n", w->job);
		return CLI_EXIT_FAIL;
	}
	if (!cli_jnum(ret, "applies_at_step", &w->step)) {
		fprintf(stderr, CLI_NAME ": --wait: the reply names no applies_at_step to wait "
			"for\n");
		return CLI_EXIT_FAIL;
	}
	if (!cli_jnum(ret, "change", &w->change))
		w->change = 0;
	return -1;
}

/* Reads events until one decides, wait_ms pass or the connection ends. */
static int wait_outcome(cli_conn *c, waiter *w, int wait_ms)
{
	long long deadline = cli_now_ms() + wait_ms;
	for (;;) {
		json_t *msg = NULL;
		proto_kind kind;
		long long left = deadline - cli_now_ms();
		int rc = cli_conn_next(c, left < 0 ? 0 : (int)left, &msg, &kind);
		if (rc == CLI_ETIME) {
			fprintf(stderr, CLI_NAME ": %s: no outcome of the change (due at step %.0f) "
				"within %.3g s\n", w->job, w->step, wait_ms / 1000.0);
			return CLI_EXIT_CONN;
		}
		if (rc != CLI_OK)
			return conn_failed(c, rc);
		int done = kind == PROTO_KIND_EVENT ? outcome(w, msg) : -1;
		if (kind == PROTO_KIND_ERROR && !json_object_get(msg, "id")) {
			/* the server gave up on this connection (Busy, MessageTooLarge) */
			json_t *e = json_object_get(msg, "error");
			char d[WAIT_TEXT], k[32];
			const char *desc = cli_jstr(e, "desc"), *cls = cli_jstr(e, "class");
			fprintf(stderr, CLI_NAME ": %s (%s)\n", cli_str_clean(desc ? desc : "-", d,
				sizeof d), cli_str_clean(cls ? cls : "?", k, sizeof k));
			done = CLI_EXIT_FAIL;
		}
		json_decref(msg);
		if (done >= 0)
			return done;
	}
}

int cli_wait_run(cli_conn *c, const cli_command *cmd, const cli_args *a, const json_t *req)
{
	waiter w = {a, a->job ? a->job : cli_conn_job(c), a->job, json_array(), 0, 0, 0};
	int reply_ms = a->timeout_ms > 0 ? a->timeout_ms : CLI_TIMEOUT_MS;
	json_t *ret = NULL, *ev;
	size_t i;
	int rc, status = -1;

	if (!w.job)
		w.job = "job";
	if (!w.early) {
		fprintf(stderr, CLI_NAME ": out of memory\n");
		return CLI_EXIT_FAIL;
	}
	/* subscribed first: an outcome can never come before the subscription */
	rc = subscribe(c, &w, reply_ms);
	if (rc == CLI_OK)
		rc = cli_conn_call(c, cmd->execute, req, reply_ms, &ret, keep_event, &w);
	if (rc != CLI_OK) {
		status = conn_failed(c, rc);
		goto out;
	}
	status = take_reply(cmd, &w, ret);
	json_array_foreach(w.early, i, ev)
		if (status < 0)
			status = outcome(&w, ev);
	if (status < 0)
		status = wait_outcome(c, &w, a->timeout_ms > 0 ? a->timeout_ms :
			CLI_DEFERRED_TIMEOUT_MS);
out:
	json_decref(ret);
	json_decref(w.early);
	return status;
}
