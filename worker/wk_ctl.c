/* wk_ctl.c - remat-train's control side, the training thread's half (see wk_ctl.h).
 *
 * Two threads share `struct wk_ctl`: the training thread (wk_main.c) and the control
 * thread (a libuv loop, wk_ctl_loop.c). Everything below `mu` is guarded by it. The control
 * thread owns the connections; the training thread never touches libuv: it appends lines
 * to the outbox and wakes the loop with uv_async_send, which may coalesce wake-ups, so each
 * wake-up drains the whole outbox. Here: that outbox, the events and replies, what the
 * training thread publishes and takes at a boundary, and the queue of commands. Not here:
 * the loop and the connections (wk_ctl_loop.c), the commands (wk_ctl_cmd.c, wk_ctl_mem.c).
 */
#include "wk_ctl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "eng_backend.h"
#include "eng_mem.h"
#include "eng_plan_json.h"
#include "wk_ctl_int.h"
#include "kn.h"

double wk_ctl__mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- helpers usable from both threads ---- */

/* Appends a line to the outbox (takes line) and wakes the loop. Caller holds no lock. */
static void out_push(struct wk_ctl *c, char *line, int conn, int event, int deferred)
{
	if (!line)
		return;
	ctl_out *o = calloc(1, sizeof *o);
	if (!o) {
		free(line);
		return;
	}
	o->line = line;
	o->conn = conn;
	o->event = event;
	o->deferred = deferred;
	pthread_mutex_lock(&c->mu);
	if (c->o_tail)
		c->o_tail->next = o;
	else
		c->o_head = o;
	c->o_tail = o;
	pthread_mutex_unlock(&c->mu);
	uv_async_send(&c->async);
}

void wk_ctl__emit(struct wk_ctl *c, int ev, json_t *data)
{
	const char *name = proto_event_name((proto_event)__builtin_ctz((unsigned)ev));
	json_object_set_new(data, "job", json_string(c->job));
	out_push(c, proto_event_line(name, data), -1, ev, 0);
	json_decref(data);
}

/* ---- training-thread API ---- */

void wk_ctl_attach(wk_ctl *c, eng_trainer *tr)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->tr = tr;
	c->run.step = tr->step;
	c->run.steps = tr->spec.steps;
	c->remat.policy = c->remat.pending = tr->policy;
	eng_costs_copy(&c->mem.costs, &tr->costs);
	for (int i = 0; i <= tr->model.cfg.n_layer; i++)
		c->mem.saved[i] = eng_trainer_saved_bytes(tr, i);
	snprintf(c->name, sizeof c->name, "%s", tr->spec.name);
	/* remat-memlog's: without memory for them the command says so, training goes on */
	c->mem.memlog = calloc(PROTO_MEMLOG_STEPS, sizeof *c->mem.memlog);
	c->mem.memlog_sec = calloc((size_t)PROTO_MEMLOG_STEPS * (tr->model.cfg.n_layer + 1),
		sizeof *c->mem.memlog_sec);
	if (eng_memtrace_init(&c->mem.trace, ENG_MEMTRACE_CAP) < 0 || !c->mem.memlog ||
		!c->mem.memlog_sec) {
		free(c->mem.memlog);
		free(c->mem.memlog_sec);
		eng_memtrace_free(&c->mem.trace);
		c->mem.memlog = NULL;
		c->mem.memlog_sec = NULL;
	}
	c->replay = 1; /* requests that came while starting are answered before step 1 */
	pthread_mutex_unlock(&c->mu);
	uv_async_send(&c->async);
	wk_ctl_set_state(c, CTL_RUNNING, "training");
	/* the policy the run starts with is said once its first step has run (wk_policy_said):
	 * a remat-set taken while the job started may be the one it runs */
}

int wk_ctl_unreachable(wk_ctl *c)
{
	if (!c)
		return 0;
	pthread_mutex_lock(&c->mu);
	int lost = c->run.link_lost;
	pthread_mutex_unlock(&c->mu);
	return lost;
}

wk_ctl_cmd *wk_ctl_take(wk_ctl *c)
{
	if (!c)
		return NULL;
	pthread_mutex_lock(&c->mu);
	wk_ctl_cmd *q = c->q_head;
	c->q_head = c->q_tail = NULL;
	pthread_mutex_unlock(&c->mu);
	return q;
}

wk_ctl_cmd *wk_ctl_wait(wk_ctl *c, int ms)
{
	if (!c)
		return NULL;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&c->mu);
	while (!c->q_head)
		if (pthread_cond_timedwait(&c->cv, &c->mu, &until) == ETIMEDOUT)
			break;
	wk_ctl_cmd *q = c->q_head;
	c->q_head = c->q_tail = NULL;
	pthread_mutex_unlock(&c->mu);
	return q;
}

int wk_ctl_begin_step(wk_ctl *c)
{
	if (!c)
		return 1;
	pthread_mutex_lock(&c->mu);
	while (c->replay && !c->quit)
		pthread_cond_wait(&c->cv, &c->mu);
	int ok = c->q_head == NULL;
	if (ok)
		c->run.in_step = 1;
	pthread_mutex_unlock(&c->mu);
	return ok;
}

/* The step just taken into remat-memlog's ring, and its timeline; mu held. */
static void memlog_add(wk_ctl *c, const eng_step_stats *st)
{
	int L = c->tr->model.cfg.n_layer, row = c->mem.memlog_n % PROTO_MEMLOG_STEPS;
	ctl_memrow *r = &c->mem.memlog[row];
	r->step = st->step;
	r->peak = st->peak_bytes;
	memcpy(r->cat, st->peak_cat, sizeof r->cat);
	r->oom_retries = st->oom_retries;
	for (int i = 0; i <= L; i++)
		c->mem.memlog_sec[(size_t)row * (L + 1) + i] = eng_trainer_saved_bytes(c->tr, i);
	c->mem.memlog_n++;
	eng_memtrace_swap(&c->mem.trace, &c->tr->trace); /* no copy on the step path */
}

void wk_ctl_end_step(wk_ctl *c, const eng_step_stats *st, json_t *row)
{
	if (!c) {
		json_decref(row);
		return;
	}
	pthread_mutex_lock(&c->mu);
	c->run.last = *st;
	c->run.has_last = 1;
	c->run.step = st->step;
	c->run.in_step = 0;
	if (c->run.steps_here++ == 0)
		c->run.first_step_s = wk_ctl__mono_s() - st->step_ms / 1e3;
	c->run.busy_s += st->step_ms / 1e3;
	if (c->tr) /* remat-costs reads this copy, never the trainer's */
		eng_costs_copy(&c->mem.costs, &c->tr->costs);
	if (c->tr && c->mem.memlog)
		memlog_add(c, st);
	pthread_mutex_unlock(&c->mu);
	if (row)
		wk_ctl__emit(c, EV_STEP, row);
}

void wk_ctl_event_eval(wk_ctl *c, json_t *row)
{
	if (!c || !row) {
		json_decref(row);
		return;
	}
	pthread_mutex_lock(&c->mu);
	json_decref(c->run.last_eval);
	c->run.last_eval = json_deep_copy(row);
	pthread_mutex_unlock(&c->mu);
	wk_ctl__emit(c, EV_EVAL, row);
}

void wk_ctl_event(wk_ctl *c, proto_event ev, json_t *data)
{
	if (!c || !data) {
		json_decref(data);
		return;
	}
	wk_ctl__emit(c, 1 << ev, data);
}

void wk_ctl_set_ranks(wk_ctl *c, wk_ctl_rank *rows, int n)
{
	if (!c) {
		free(rows);
		return;
	}
	pthread_mutex_lock(&c->mu);
	free(c->run.ranks);
	c->run.ranks = rows;
	c->run.nranks = n;
	pthread_mutex_unlock(&c->mu);
}

void wk_ctl_set_hparams(wk_ctl *c, json_t *hp)
{
	if (!c) {
		json_decref(hp);
		return;
	}
	pthread_mutex_lock(&c->mu);
	if (!c->run.hparams)
		c->run.hparams = json_object();
	json_object_update(c->run.hparams, hp); /* every value job-set has given, the last wins */
	pthread_mutex_unlock(&c->mu);
	json_decref(hp);
}

/* REMAT_APPLIED's and REMAT_FAILED's own fields: what caused the change, and the change
 * number of the request it carries out (null: none) */
static json_t *with_cause(json_t *d, proto_cause cause, int change)
{
	json_object_set_new(d, "cause", json_string(proto_cause_name(cause)));
	json_object_set_new(d, "change", change > 0 ? json_integer(change) : json_null());
	return d;
}

void wk_ctl_policy_applied(wk_ctl *c, int first_step, proto_cause cause, int change)
{
	if (!c)
		return;
	eng_trainer *tr = c->tr;
	pthread_mutex_lock(&c->mu);
	c->remat.policy = tr->policy;
	/* what a remat-set builds on: the policy now, unless one is queued still (the
	 * controller, a probe or a schedule changes the policy too) */
	int queued = 0;
	for (const wk_ctl_cmd *q = c->q_head; q; q = q->next)
		queued |= q->op == CTL_OP_POLICY;
	if (!queued)
		c->remat.pending = tr->policy;
	for (int i = 0; i <= tr->model.cfg.n_layer; i++)
		c->mem.saved[i] = eng_trainer_saved_bytes(tr, i);
	pthread_mutex_unlock(&c->mu);
	json_t *d = json_pack("{s:i,s:o}", "step", first_step, "policy",
		eng_policy_json(&tr->policy));
	wk_ctl__emit(c, EV_APPLIED, with_cause(d, cause, change));
}

void wk_ctl_policy_at_resume(wk_ctl *c, const eng_policy *p, int first_step,
	proto_cause cause, int change)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->remat.policy = *p;
	pthread_mutex_unlock(&c->mu);
	json_t *d = json_pack("{s:i,s:o,s:b}", "step", first_step, "policy", eng_policy_json(p),
		"at_resume", 1);
	wk_ctl__emit(c, EV_APPLIED, with_cause(d, cause, change));
}

void wk_ctl_set_probe(wk_ctl *c, int until)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->remat.probe_until = until;
	pthread_mutex_unlock(&c->mu);
}

void wk_ctl_cmd_free(wk_ctl_cmd *cmds)
{
	while (cmds) {
		wk_ctl_cmd *n = cmds->next;
		json_decref(cmds->id);
		json_decref(cmds->set);
		free(cmds);
		cmds = n;
	}
}

void wk_ctl_set_state(wk_ctl *c, wk_ctl_state to, const char *reason)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	wk_ctl_state from = c->run.state;
	c->run.state = to;
	if (to == CTL_PAUSED || to == CTL_RUNNING)
		c->remat.pause_pending = 0;
	snprintf(c->run.reason, sizeof c->run.reason, "%s", reason ? reason : "");
	pthread_mutex_unlock(&c->mu);
	json_t *d = json_pack("{s:s,s:s,s:s,s:n}", "from", proto_job_state_name(from), "to",
		proto_job_state_name(to), "reason", reason ? reason : "", "exit_status");
	wk_ctl__emit(c, EV_STATE, d);
}

void wk_ctl_event_saved(wk_ctl *c, const char *path, int step, size_t bytes)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	snprintf(c->run.last_ckpt, sizeof c->run.last_ckpt, "%s", path);
	json_decref(c->run.save_error);
	c->run.save_error = NULL;
	pthread_mutex_unlock(&c->mu);
	wk_ctl__emit(c, EV_SAVED, json_pack("{s:s,s:i,s:I}", "path", path, "step", step, "bytes",
				  (json_int_t)bytes));
}

void wk_ctl_event_save_failed(wk_ctl *c, const char *path, int step, const char *reason)
{
	if (!c)
		return;
	json_t *d = json_pack("{s:s,s:i,s:s}", "path", path, "step", step, "reason", reason);
	pthread_mutex_lock(&c->mu);
	json_decref(c->run.save_error);
	c->run.save_error = d ? json_deep_copy(d) : NULL;
	pthread_mutex_unlock(&c->mu);
	if (d)
		wk_ctl__emit(c, EV_FAILED, d);
}

void wk_ctl_set_auto(wk_ctl *c, const wk_ctl_auto *a)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->remat.autoc = *a;
	pthread_mutex_unlock(&c->mu);
}

void wk_ctl_applied(wk_ctl *c, const wk_ctl_cmd *q)
{
	if (!c || !q->budget_change)
		return;
	pthread_mutex_lock(&c->mu);
	if (c->remat.auto_queued > 0)
		c->remat.auto_queued--;
	pthread_mutex_unlock(&c->mu);
}

void wk_ctl_set_memfig(wk_ctl *c, const wk_ctl_memfig *m)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->mem.memfig = *m;
	pthread_mutex_unlock(&c->mu);
}

void wk_ctl_event_remat_failed(wk_ctl *c, int step, json_t *asked, json_t *policy,
	const char *why, proto_cause cause, int change)
{
	if (!c) {
		json_decref(asked);
		json_decref(policy);
		return;
	}
	wk_ctl_event(c, PROTO_EV_REMAT_FAILED, with_cause(json_pack("{s:i,s:o,s:o,s:s}", "step",
		step, "asked", asked, "policy", policy, "reason", why), cause, change));
}

void wk_ctl_event_auto(wk_ctl *c, int step, json_t *policy, const char *why,
	size_t budget, size_t predicted, size_t measured)
{
	if (!c) {
		json_decref(policy);
		return;
	}
	/* off (budget 0): no budget, nothing predicted, as remat-auto's reply says it */
	json_t *d = json_pack("{s:i,s:o,s:s,s:o,s:o,s:I}", "step", step, "policy", policy,
		"reason", why, "budget_bytes", budget ? json_integer((json_int_t)budget) :
		json_null(), "predicted_peak_bytes", budget ? json_integer((json_int_t)predicted) :
		json_null(), "measured_peak_bytes", (json_int_t)measured);
	if (d)
		wk_ctl__emit(c, EV_AUTO, d);
}

void wk_ctl_reply(wk_ctl *c, const wk_ctl_cmd *cmd, json_t *ret)
{
	if (!c || cmd->conn < 0) {
		json_decref(ret);
		return;
	}
	out_push(c, proto_reply_line(ret, cmd->id), cmd->conn, 0, 1);
	json_decref(ret);
}

void wk_ctl_reply_error(wk_ctl *c, const wk_ctl_cmd *cmd, proto_errclass cls,
	const char *desc)
{
	if (!c || cmd->conn < 0)
		return;
	out_push(c, proto_error_line(cls, desc, cmd->id), cmd->conn, 0, 1);
}

void wk_ctl__enqueue(struct wk_ctl *c, wk_ctl_cmd *cmd)
{
	if (c->q_tail)
		c->q_tail->next = cmd;
	else
		c->q_head = cmd;
	c->q_tail = cmd;
	pthread_cond_signal(&c->cv);
}

void wk_ctl__send_error(ctl_conn *k, proto_errclass cls, const char *desc, const json_t *id)
{
	sv_conn_error(&k->k, cls, desc, id);
}
