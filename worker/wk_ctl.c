/* wk_ctl.c - remat-train's control thread (see wk_ctl.h).
 *
 * Two threads share `struct wk_ctl`: the training thread (wk_main.c) and the control
 * thread (a libuv loop here). Everything below `mu` is guarded by it. The control thread
 * owns the connections; the training thread never touches libuv: it appends lines to the
 * outbox and wakes the loop with uv_async_send, which may coalesce wake-ups, so each
 * wake-up drains the whole outbox.
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

#include "eng_cuda_mem.h"
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

static void emit(struct wk_ctl *c, int ev, json_t *data)
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
	c->step = tr->step;
	c->steps = tr->spec.steps;
	c->policy = c->pending = tr->policy;
	eng_costs_copy(&c->costs, &tr->costs);
	for (int i = 0; i <= tr->model.cfg.n_layer; i++)
		c->saved[i] = eng_trainer_saved_bytes(tr, i);
	snprintf(c->name, sizeof c->name, "%s", tr->spec.name);
	/* remat-memlog's: without memory for them the command says so, training goes on */
	c->memlog = calloc(PROTO_MEMLOG_STEPS, sizeof *c->memlog);
	c->memlog_sec = calloc((size_t)PROTO_MEMLOG_STEPS * (tr->model.cfg.n_layer + 1),
		sizeof *c->memlog_sec);
	if (eng_memtrace_init(&c->trace, ENG_MEMTRACE_CAP) < 0 || !c->memlog || !c->memlog_sec) {
		free(c->memlog);
		free(c->memlog_sec);
		eng_memtrace_free(&c->trace);
		c->memlog = NULL;
		c->memlog_sec = NULL;
	}
	c->replay = 1; /* requests that came while starting are answered before step 1 */
	pthread_mutex_unlock(&c->mu);
	uv_async_send(&c->async);
	wk_ctl_set_state(c, CTL_RUNNING, "training");
	/* the policy the run starts with, for a client that subscribed while it started */
	emit(c, EV_APPLIED, json_pack("{s:i,s:o}", "step", tr->step + 1, "policy",
		eng_policy_json(&tr->policy)));
}

int wk_ctl_unreachable(wk_ctl *c)
{
	if (!c)
		return 0;
	pthread_mutex_lock(&c->mu);
	int lost = c->link_lost;
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
		c->in_step = 1;
	pthread_mutex_unlock(&c->mu);
	return ok;
}

/* The step just taken into remat-memlog's ring, and its timeline; mu held. */
static void memlog_add(wk_ctl *c, const eng_step_stats *st)
{
	int L = c->tr->model.cfg.n_layer, row = c->memlog_n % PROTO_MEMLOG_STEPS;
	ctl_memrow *r = &c->memlog[row];
	r->step = st->step;
	r->peak = st->peak_bytes;
	memcpy(r->cat, st->peak_cat, sizeof r->cat);
	r->oom_retries = st->oom_retries;
	for (int i = 0; i <= L; i++)
		c->memlog_sec[(size_t)row * (L + 1) + i] = eng_trainer_saved_bytes(c->tr, i);
	c->memlog_n++;
	eng_memtrace_swap(&c->trace, &c->tr->trace); /* no copy on the step path */
}

void wk_ctl_end_step(wk_ctl *c, const eng_step_stats *st, json_t *row)
{
	if (!c) {
		json_decref(row);
		return;
	}
	pthread_mutex_lock(&c->mu);
	c->last = *st;
	c->has_last = 1;
	c->step = st->step;
	c->in_step = 0;
	if (c->steps_here++ == 0)
		c->first_step_s = wk_ctl__mono_s() - st->step_ms / 1e3;
	c->busy_s += st->step_ms / 1e3;
	if (c->tr) /* remat-costs reads this copy, never the trainer's */
		eng_costs_copy(&c->costs, &c->tr->costs);
	if (c->tr && c->memlog)
		memlog_add(c, st);
	pthread_mutex_unlock(&c->mu);
	if (row)
		emit(c, EV_STEP, row);
}

void wk_ctl_event_eval(wk_ctl *c, json_t *row)
{
	if (!c || !row) {
		json_decref(row);
		return;
	}
	pthread_mutex_lock(&c->mu);
	json_decref(c->last_eval);
	c->last_eval = json_deep_copy(row);
	pthread_mutex_unlock(&c->mu);
	emit(c, EV_EVAL, row);
}

void wk_ctl_event(wk_ctl *c, proto_event ev, json_t *data)
{
	if (!c || !data) {
		json_decref(data);
		return;
	}
	emit(c, 1 << ev, data);
}

void wk_ctl_set_ranks(wk_ctl *c, wk_ctl_rank *rows, int n)
{
	if (!c) {
		free(rows);
		return;
	}
	pthread_mutex_lock(&c->mu);
	free(c->ranks);
	c->ranks = rows;
	c->nranks = n;
	pthread_mutex_unlock(&c->mu);
}

void wk_ctl_set_hparams(wk_ctl *c, json_t *hp)
{
	if (!c) {
		json_decref(hp);
		return;
	}
	pthread_mutex_lock(&c->mu);
	if (!c->hparams)
		c->hparams = json_object();
	json_object_update(c->hparams, hp); /* every value job-set has given, the last wins */
	pthread_mutex_unlock(&c->mu);
	json_decref(hp);
}

void wk_ctl_policy_applied(wk_ctl *c, int first_step)
{
	if (!c)
		return;
	eng_trainer *tr = c->tr;
	pthread_mutex_lock(&c->mu);
	c->policy = tr->policy;
	/* what a remat-set builds on: the policy now, unless one is queued still (the
	 * controller, a probe or a schedule changes the policy too) */
	int queued = 0;
	for (const wk_ctl_cmd *q = c->q_head; q; q = q->next)
		queued |= q->op == CTL_OP_POLICY;
	if (!queued)
		c->pending = tr->policy;
	for (int i = 0; i <= tr->model.cfg.n_layer; i++)
		c->saved[i] = eng_trainer_saved_bytes(tr, i);
	pthread_mutex_unlock(&c->mu);
	json_t *d = json_pack("{s:i,s:o}", "step", first_step, "policy",
		eng_policy_json(&tr->policy));
	emit(c, EV_APPLIED, d);
}

void wk_ctl_policy_at_resume(wk_ctl *c, const eng_policy *p, int first_step)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->policy = *p;
	pthread_mutex_unlock(&c->mu);
	json_t *d = json_pack("{s:i,s:o,s:b}", "step", first_step, "policy", eng_policy_json(p),
		"at_resume", 1);
	emit(c, EV_APPLIED, d);
}

void wk_ctl_set_probe(wk_ctl *c, int until)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->probe_until = until;
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
	wk_ctl_state from = c->state;
	c->state = to;
	if (to == CTL_PAUSED || to == CTL_RUNNING)
		c->pause_pending = 0;
	snprintf(c->reason, sizeof c->reason, "%s", reason ? reason : "");
	pthread_mutex_unlock(&c->mu);
	json_t *d = json_pack("{s:s,s:s,s:s,s:n}", "from", proto_job_state_name(from), "to",
		proto_job_state_name(to), "reason", reason ? reason : "", "exit_status");
	emit(c, EV_STATE, d);
}

void wk_ctl_event_saved(wk_ctl *c, const char *path, int step, size_t bytes)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	snprintf(c->last_ckpt, sizeof c->last_ckpt, "%s", path);
	json_decref(c->save_error);
	c->save_error = NULL;
	pthread_mutex_unlock(&c->mu);
	emit(c, EV_SAVED, json_pack("{s:s,s:i,s:I}", "path", path, "step", step, "bytes",
				  (json_int_t)bytes));
}

void wk_ctl_event_save_failed(wk_ctl *c, const char *path, int step, const char *reason)
{
	if (!c)
		return;
	json_t *d = json_pack("{s:s,s:i,s:s}", "path", path, "step", step, "reason", reason);
	pthread_mutex_lock(&c->mu);
	json_decref(c->save_error);
	c->save_error = d ? json_deep_copy(d) : NULL;
	pthread_mutex_unlock(&c->mu);
	if (d)
		emit(c, EV_FAILED, d);
}

void wk_ctl_set_auto(wk_ctl *c, const wk_ctl_auto *a)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->autoc = *a;
	pthread_mutex_unlock(&c->mu);
}

void wk_ctl_applied(wk_ctl *c, const wk_ctl_cmd *q)
{
	if (!c || !q->budget_change)
		return;
	pthread_mutex_lock(&c->mu);
	if (c->auto_queued > 0)
		c->auto_queued--;
	pthread_mutex_unlock(&c->mu);
}

void wk_ctl_set_memfig(wk_ctl *c, const wk_ctl_memfig *m)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->memfig = *m;
	pthread_mutex_unlock(&c->mu);
}

void wk_ctl_event_remat_failed(wk_ctl *c, int step, json_t *asked, json_t *policy,
	const char *why)
{
	if (!c) {
		json_decref(asked);
		json_decref(policy);
		return;
	}
	wk_ctl_event(c, PROTO_EV_REMAT_FAILED, json_pack("{s:i,s:o,s:o,s:s}", "step", step,
		"asked", asked, "policy", policy, "reason", why));
}

void wk_ctl_event_auto(wk_ctl *c, int step, json_t *policy, const char *why,
	size_t budget, size_t predicted, size_t measured)
{
	if (!c) {
		json_decref(policy);
		return;
	}
	json_t *d = json_pack("{s:i,s:o,s:s,s:I,s:I,s:I}", "step", step, "policy", policy,
		"reason", why, "budget_bytes", (json_int_t)budget, "predicted_peak_bytes",
		(json_int_t)predicted, "measured_peak_bytes", (json_int_t)measured);
	if (d)
		emit(c, EV_AUTO, d);
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

/* ---- control thread: connections ---- */

/* The served connection with that handle, or NULL when it is gone or closing. */
static ctl_conn *conn_get(struct wk_ctl *c, int handle)
{
	for (ctl_conn *k = c->conns; k && handle >= 0; k = k->next)
		if (k->id == (unsigned)handle)
			return k->k.draining ? NULL : k;
	return NULL;
}

static void conn_unserve(ctl_conn *k)
{
	if (k->served)
		k->ctl->n_conns--;
	k->served = 0;
}

/* rematd is gone (its end of the link read as closed, or a write to it failed first):
 * the run stops at the next step boundary, saved. Once. */
static void link_gone(ctl_conn *k, const char *how)
{
	pthread_mutex_lock(&k->ctl->mu);
	int first = !k->ctl->link_lost;
	k->ctl->link_lost = 1;
	wk_ctl_cmd *cmd = first ? calloc(1, sizeof *cmd) : NULL;
	if (cmd && !wk_ctl__is_final(k->ctl->state)) {
		cmd->op = CTL_OP_STOP;
		cmd->save = 1;
		cmd->conn = -1;
		wk_ctl__enqueue(k->ctl, cmd);
	} else {
		free(cmd);
	}
	pthread_mutex_unlock(&k->ctl->mu);
	if (first)
		fprintf(stderr, "remat-train: control link %s\n", how);
}

static void on_conn_end(sv_conn *sk, int status)
{
	ctl_conn *k = sk->owner;
	(void)status;
	if (k->link)
		link_gone(k, "closed by rematd");
}

/* Both handles closed: out of the list, and freed (the only place it is). rematd's link
 * closed while still served (not by our own end) means rematd is gone, whichever way the
 * loop found out: a write that failed closes it without an end of stream. */
static void on_conn_closed(sv_conn *sk)
{
	ctl_conn *k = sk->owner;
	if (k->link && k->served)
		link_gone(k, "lost (rematd is gone)");
	conn_unserve(k);
	if (k->prev)
		k->prev->next = k->next;
	else
		k->ctl->conns = k->next;
	if (k->next)
		k->next->prev = k->prev;
	free(k);
}



/* A client that stops reading is dropped, never waited for; that goes to the log (a
 * client's ordinary hang-up does not). */
static void conn_log(sv_conn *sk, const char *what)
{
	ctl_conn *k = sk->owner;
	if (strncmp(what, "disconnected", 12) != 0)
		fprintf(stderr, "remat-train: control: client %u %s\n", k->id, what);
}

static void on_conn_line(sv_conn *sk, const char *line, size_t len);

static const sv_conn_ops ctl_ops = {on_conn_line, on_conn_end, on_conn_closed, conn_log,
	NULL};

/* A new peer on the loop, in the list (not yet served). */
static ctl_conn *conn_new(struct wk_ctl *c)
{
	ctl_conn *k = calloc(1, sizeof *k);
	if (!k)
		return NULL;
	k->ctl = c;
	k->id = ++c->next_id & 0x7fffffffu;
	sv_conn_init(&k->k, &c->loop, &ctl_ops, k, c->rbuf, sizeof c->rbuf);
	k->k.linger_ms = CTL_FLUSH_MS;
	k->next = c->conns;
	if (c->conns)
		c->conns->prev = k;
	c->conns = k;
	return k;
}

void wk_ctl__send_error(ctl_conn *k, proto_errclass cls, const char *desc, const json_t *id)
{
	sv_conn_error(&k->k, cls, desc, id);
}

static void on_conn_line(sv_conn *sk, const char *line, size_t len)
{
	ctl_conn *k = sk->owner;
	struct wk_ctl *c = k->ctl;
	proto_request req;
	proto_errclass ec;
	char desc[PROTO_DESC_LEN];
	if (proto_request_parse(line, len, &req, &ec, desc, sizeof desc) < 0) {
		wk_ctl__send_error(k, ec, desc, req.id);
		goto out;
	}
	const proto_command *cmd = proto_command_find(req.execute);
	if (!cmd) {
		snprintf(desc, sizeof desc, "unknown command '%.64s'", req.execute);
		wk_ctl__send_error(k, PROTO_ERR_COMMAND_NOT_FOUND, desc, req.id);
		goto out;
	}
	if (proto_args_validate_ex(cmd, req.args, 1, desc, sizeof desc) < 0) {
		wk_ctl__send_error(k, PROTO_ERR_INVALID_PARAMETER, desc, req.id);
		goto out;
	}
	json_t *job = json_object_get(req.args, "job");
	if (job && strcmp(json_string_value(job), c->job) != 0) {
		snprintf(desc, sizeof desc, "no job '%.64s' here (this worker runs '%s')",
			json_string_value(job), c->job);
		wk_ctl__send_error(k, PROTO_ERR_JOB_NOT_FOUND, desc, req.id);
		goto out;
	}
	if (cmd->deferred && k->inflight >= PROTO_MAX_INFLIGHT) {
		wk_ctl__send_error(k, PROTO_ERR_BUSY, "too many requests in flight", req.id);
		goto out;
	}
	pthread_mutex_lock(&c->mu);
	json_t *ret = wk_ctl__dispatch(c, k, (int)k->id, req.execute, req.args, req.id);
	pthread_mutex_unlock(&c->mu);
	if (ret) {
		sv_conn_reply(&k->k, ret, req.id);
		json_decref(ret);
	}
out:
	proto_request_free(&req);
}

static void on_connection(uv_stream_t *server, int status)
{
	struct wk_ctl *c = server->data;
	char desc[96];
	eng_cred cr;
	pid_t pid;
	if (status < 0)
		return;
	ctl_conn *k = conn_new(c);
	if (!k)
		return;
	if (sv_conn_accept(&k->k, server) < 0) {
		sv_conn_close(&k->k, NULL);
		return;
	}
	/* the socket's mode is not the only guard: the peer must be our user, or root */
	int known = sv_conn_peer(&k->k, &cr, &pid) == 0;
	if (!known || (cr.uid != geteuid() && cr.uid != 0)) {
		snprintf(desc, sizeof desc, "uid %ld may not use this worker",
			known ? (long)cr.uid : -1L);
		fprintf(stderr, "remat-train: control: refused a connection: %s\n", desc);
		sv_conn_error(&k->k, PROTO_ERR_PERMISSION_DENIED, desc, NULL);
		sv_conn_drain(&k->k);
		return;
	}
	sv_conn_send_line(&k->k, proto_greeting("worker", c->job));
	if (c->n_conns >= CTL_MAX_CONN) {
		sv_conn_error(&k->k, PROTO_ERR_BUSY, "too many connections", NULL);
		sv_conn_drain(&k->k);
		return;
	}
	k->served = 1;
	c->n_conns++;
	sv_conn_read(&k->k);
}

/* ---- control thread: outbox, timers, lifetime ---- */

/* Answers the requests that came while the job was starting: through the commands, now
 * that the trainer is there (replay), or with an error when it never came (the job failed
 * to start, or the worker is finishing). Control thread, mu not held. */
static void early_answer(struct wk_ctl *c, int replay)
{
	pthread_mutex_lock(&c->mu);
	ctl_early *e = c->early;
	c->early = NULL;
	char why[PROTO_DESC_LEN];
	snprintf(why, sizeof why, "job %s ended before it started: %.400s", c->job, c->reason);
	while (e) {
		ctl_early *next = e->next;
		ctl_conn *k = conn_get(c, e->handle);
		if (k) {
			k->inflight--; /* it was counted as waiting; dispatch counts it anew */
			json_t *ret = replay ? wk_ctl__dispatch(c, k, e->handle, e->execute, e->args,
						     e->id) : NULL;
			if (ret) {
				sv_conn_reply(&k->k, ret, e->id);
				json_decref(ret);
			} else if (!replay) {
				wk_ctl__send_error(k, PROTO_ERR_INVALID_STATE, why, e->id);
			}
		}
		json_decref(e->args);
		json_decref(e->id);
		free(e);
		e = next;
	}
	c->replay = 0;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

static void deliver(struct wk_ctl *c, ctl_out *o)
{
	if (o->conn >= 0) {
		ctl_conn *k = conn_get(c, o->conn);
		if (k) {
			if (o->deferred && k->inflight > 0)
				k->inflight--;
			sv_conn_send_line(&k->k, o->line);
			o->line = NULL;
		}
		return;
	}
	sv_msg *m = sv_msg_take(o->line);
	o->line = NULL;
	for (ctl_conn *k = c->conns; k && m; k = k->next)
		if (k->served)
			sv_conn_event(&k->k, "", (uint32_t)o->event, m);
	sv_msg_unref(m);
}

static void on_async(uv_async_t *a)
{
	struct wk_ctl *c = a->data;
	pthread_mutex_lock(&c->mu);
	ctl_out *o = c->o_head;
	c->o_head = c->o_tail = NULL;
	int quit = c->quit, replay = c->replay;
	pthread_mutex_unlock(&c->mu);
	if (replay)
		early_answer(c, 1);
	while (o) {
		ctl_out *n = o->next;
		deliver(c, o);
		free(o->line);
		free(o);
		o = n;
	}
	if (!quit || uv_is_closing((uv_handle_t *)&c->async))
		return;
	/* Finish: requests still waiting for a start that never came get their error; each
	 * connection sends the STEP it held back (the final step is always seen) and what is
	 * queued, then closes; a peer that never reads gets CTL_FLUSH_MS (its linger limit).
	 * The loop ends once every handle is closed. */
	early_answer(c, 0);
	for (ctl_conn *k = c->conns; k; k = k->next) {
		conn_unserve(k);
		sv_conn_drain(&k->k);
	}
	if (c->listening) {
		unlink(c->path); /* unlink before closing: the other way round races a new bind */
		uv_close((uv_handle_t *)&c->listener, NULL);
		c->listening = 0;
	}
	uv_close((uv_handle_t *)&c->mem_timer, NULL);
	uv_close((uv_handle_t *)&c->async, NULL);
}

static void on_mem_timer(uv_timer_t *t)
{
	struct wk_ctl *c = t->data;
	eng_mem_stats ms;
	pthread_mutex_lock(&c->mu);
	int running = c->state == CTL_RUNNING && c->tr;
	int step = c->step;
	pthread_mutex_unlock(&c->mu);
	if (!running)
		return;
	eng_mem_get_stats(&ms);
	eng_cuda_mem_stats ds;
	eng_cuda_mem_get_stats(&ds);
	if (ds.active) {
		/* a job on the GPU: its memory is the device's, as in STEP events */
		ms.total_current = ds.total_current;
		ms.total_peak = ds.total_peak;
		ms.current[ENG_MEM_ACTIVATIONS] = ds.current[ENG_MEM_ACTIVATIONS];
	}
	json_t *d = json_pack("{s:i,s:{s:I,s:I},s:I,s:I}", "step", step, "total", "current",
		(json_int_t)ms.total_current, "peak", (json_int_t)ms.total_peak, "activations",
		(json_int_t)ms.current[ENG_MEM_ACTIVATIONS], "rss", (json_int_t)ms.rss);
	emit(c, EV_MEMORY, d); /* through the outbox, like every other event */
}

static void *ctl_main(void *arg)
{
	struct wk_ctl *c = arg;
	uv_run(&c->loop, UV_RUN_DEFAULT);
	return NULL;
}

static void close_walk(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

wk_ctl *wk_ctl_start(int fd, const char *path, const char *job, const char *name)
{
	struct wk_ctl *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	snprintf(c->job, sizeof c->job, "%s", job);
	snprintf(c->name, sizeof c->name, "%s", name ? name : job);
	c->started = wk_ctl__mono_s();
	c->link_fd = fd;
	c->state = CTL_STARTING;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	uv_loop_init(&c->loop);
	uv_async_init(&c->loop, &c->async, on_async);
	c->async.data = c;
	uv_timer_init(&c->loop, &c->mem_timer);
	c->mem_timer.data = c;
	uv_timer_start(&c->mem_timer, on_mem_timer, CTL_MEMORY_MS, CTL_MEMORY_MS);
	if (fd >= 0) {
		ctl_conn *k = conn_new(c);
		if (!k || sv_conn_open(&k->k, fd) < 0) {
			fprintf(stderr, "remat-train: --control-fd %d is not a usable socket\n", fd);
			goto fail;
		}
		k->link = 1;
		k->served = 1;
		c->n_conns++;
		k->k.step_gap_ms = 0; /* rematd paces for its own clients */
		sv_conn_subscribe(&k->k, "", SV_EV_ALL, 1);
		sv_conn_send_line(&k->k, proto_greeting("worker", c->job));
		if (sv_conn_read(&k->k) < 0)
			goto fail;
	}
	if (path) {
		if (strlen(path) >= sizeof c->path) {
			fprintf(stderr, "remat-train: control socket path too long (at most %zu bytes)\n",
				sizeof c->path - 1);
			goto fail;
		}
		snprintf(c->path, sizeof c->path, "%s", path);
		uv_pipe_init(&c->loop, &c->listener, 0);
		c->listener.data = c;
		mode_t old = umask(0177); /* the socket is created 0600: same uid only */
		int r = uv_pipe_bind(&c->listener, path);
		umask(old);
		if (r == 0)
			r = uv_listen((uv_stream_t *)&c->listener, 16, on_connection);
		if (r < 0) {
			fprintf(stderr, "remat-train: cannot listen on '%s': %s\n", path,
				r == UV_EADDRINUSE ? "the file exists (another worker, or a stale "
						     "socket to remove)" : uv_strerror(r));
			goto fail;
		}
		c->listening = 1;
	}
	if (pthread_create(&c->thread, NULL, ctl_main, c) != 0) {
		fprintf(stderr, "remat-train: cannot start the control thread\n");
		goto fail;
	}
	return c;
fail:
	/* Nothing ran on the loop yet: close the handles and let it finish them (the
	 * connections through their own close, which frees them). */
	for (ctl_conn *k = c->conns; k; k = k->next) {
		conn_unserve(k); /* our own close: no run to stop */
		sv_conn_close(&k->k, NULL);
	}
	uv_walk(&c->loop, close_walk, NULL);
	uv_run(&c->loop, UV_RUN_DEFAULT);
	uv_loop_close(&c->loop);
	free(c);
	return NULL;
}

void wk_ctl_stop(wk_ctl *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->quit = 1;
	pthread_mutex_unlock(&c->mu);
	uv_async_send(&c->async);
	pthread_join(c->thread, NULL);
	uv_loop_close(&c->loop);
	wk_ctl_cmd_free(c->q_head);
	json_decref(c->save_error);
	json_decref(c->last_eval);
	json_decref(c->hparams);
	free(c->ranks);
	free(c->memlog);
	free(c->memlog_sec);
	eng_memtrace_free(&c->trace);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	free(c);
}
