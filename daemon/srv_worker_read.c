/* srv_worker_read.c - what a worker says: its greeting, the replies to requests rematd
 * forwarded (routed back to their clients, and what they tell the job table kept), and its
 * events (the table kept current, then relayed to subscribers as the job's). See
 * srv_worker.h.
 * Not here: spawning, the channel, time limits and reaping (srv_worker.c).
 */
#include "srv_worker.h"
#include "srv_worker_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_conn.h"

/* ---- what the worker says ---- */

static void worker_set_checkpoint(srv_job *job, const json_t *path)
{
	if (!json_is_string(path))
		return;
	char *copy = strdup(json_string_value(path));
	if (!copy)
		return;
	free(job->last_checkpoint);
	job->last_checkpoint = copy;
	json_decref(job->last_save_error);
	job->last_save_error = NULL;
	srv_job_save_record(job);
}

static void worker_set_policy(srv_job *job, json_t *policy)
{
	if (!json_is_object(policy) || (job->policy && json_equal(job->policy, policy)))
		return;
	json_decref(job->policy);
	job->policy = json_incref(policy);
	srv_job_save_record(job); /* a resume runs under the policy last set */
}

/* A step moved: when, and how long it took (the watchdog's median, srv_worker_sweep) */
static void worker_note_step(srv_job *job)
{
	uint64_t now = srv_now_ms();
	if (job->progress_ms && now > job->progress_ms)
		job->step_gaps[job->n_gaps++ % SRV_STALL_GAPS] =
			(uint32_t)(now - job->progress_ms > UINT32_MAX ? UINT32_MAX
								 : now - job->progress_ms);
	job->progress_ms = now;
}

/* Keeps the table current from numbers the worker reports (STEP, job-status). */
static void worker_note_progress(srv_job *job, const json_t *o)
{
	const json_t *v = json_object_get(o, "step");
	if (json_is_integer(v) && (int)json_integer_value(v) > job->step)
		worker_note_step(job);
	if (json_is_integer(v))
		job->step = (int)json_integer_value(v);
	v = json_object_get(o, "loss");
	if (json_is_number(v)) {
		job->loss = json_number_value(v);
		job->has_loss = 1;
	}
	v = json_object_get(o, "lr");
	if (json_is_number(v)) {
		job->lr = json_number_value(v);
		job->has_lr = 1;
	}
}

/* An EVAL event's (or job-status') validation loss, kept for the job's record. */
static void worker_note_eval(srv_job *job, const json_t *o, const char *loss_key,
	const char *step_key)
{
	const json_t *v = json_object_get(o, loss_key);
	if (!json_is_number(v))
		return;
	job->val_loss = json_number_value(v);
	job->val_step = (int)json_integer_value(json_object_get(o, step_key));
	job->has_val = 1;
}

/* A copy of a mem-stats or remat-get reply into *slot, with the step it is as of: what
 * rematd answers once the job has ended. Not written at once: the record is written when
 * the job ends. */
static void worker_keep_figures(srv_job *job, json_t **slot, const json_t *ret)
{
	json_t *copy = json_deep_copy(ret);
	const json_t *step = json_object_get(ret, "step");
	if (!copy)
		return;
	json_object_set_new(copy, "as_of_step", json_is_integer(step) ? json_incref((json_t *)
		step) : json_integer(job->step));
	json_decref(*slot);
	*slot = copy;
}

/* The record's memory controller after what the worker said (changed: 1 when it did):
 * a new budget, source or off is logged and written at once (a resume, and a restarted
 * rematd, bring it back); pinned and least_bytes go with the record's next write. */
static void worker_auto_said(srv_job *job, const srv_auto *was, int changed)
{
	char before[64], now[64];
	if (!changed)
		return;
	srv_auto_format(was, before, sizeof before);
	srv_auto_format(&job->autoc, now, sizeof now);
	if (strcmp(before, now) == 0)
		return;
	srv_log("job %s: memory controller %s (was %s)", job->id, now, before);
	srv_job_save_record(job);
}

/* Learns from a successful reply to p before it goes back to the client. */
static void worker_note_return(srv_job *job, const srv_pending *p, json_t *ret)
{
	const char *execute = p->execute;
	srv_auto was = job->autoc;
	if (strcmp(execute, "job-status") == 0) {
		worker_note_progress(job, ret);
		worker_note_eval(job, ret, "val_loss", "val_step");
		worker_set_policy(job, json_object_get(ret, "policy"));
		/* not while starting: the controller a spec asks for starts at its first step */
		if (job->state != PROTO_JOB_STARTING)
			worker_auto_said(job, &was, srv_auto_note_status(&job->autoc, ret));
		/* the worker cannot know its pid as rematd sees it in every namespace; tests
		 * and rematctl use it to find the process */
		if (!json_object_get(ret, "pid"))
			json_object_set_new(ret, "pid", json_integer(job->pid));
		/* whose job it is is rematd's to know, and its part of the pool */
		json_object_set_new(ret, "uid", json_integer((json_int_t)job->owner.uid));
		json_object_set_new(ret, "memory", srv_pool_job_json(job));
		proto_status_complete(ret); /* a worker's keys and rematd's: all of them */
	} else if (strcmp(execute, "job-stop") == 0) {
		/* what it saved, or dropped: a shutdown's reply lists it */
		json_decref(job->stop_ret);
		job->stop_ret = json_deep_copy(ret);
		worker_note_progress(job, ret);
		worker_set_checkpoint(job, json_object_get(ret, "checkpoint"));
	} else if (strcmp(execute, "ckpt-save") == 0) {
		worker_set_checkpoint(job, json_object_get(ret, "path"));
	} else if (strcmp(execute, "remat-set") == 0) {
		worker_set_policy(job, json_object_get(ret, "policy"));
		worker_auto_said(job, &was, srv_auto_note_set(&job->autoc, ret));
	} else if (strcmp(execute, "remat-auto") == 0) {
		worker_auto_said(job, &was, srv_auto_note_auto(&job->autoc, p->auto_asked, ret));
	} else if (strcmp(execute, "mem-stats") == 0) {
		worker_keep_figures(job, &job->last_mem, ret);
	} else if (strcmp(execute, "remat-get") == 0) {
		worker_keep_figures(job, &job->last_remat, ret);
	} else if (strcmp(execute, "remat-costs") == 0) {
		srv_pool_costs(job, ret); /* what the pool's division weighs */
	}
}

static srv_pending *worker_pending_take(srv_job *job, const json_t *id)
{
	if (!json_is_integer(id))
		return NULL;
	for (srv_pending **pp = &job->pending; *pp; pp = &(*pp)->next) {
		srv_pending *p = *pp;
		if ((json_int_t)p->wid == json_integer_value(id)) {
			*pp = p->next;
			return p;
		}
	}
	return NULL;
}

/* The outcome of a change answered "queued" (worker_expire_change), for the log. */
static void worker_log_late(const srv_job *job, const srv_pending *p, const json_t *obj,
	proto_kind kind)
{
	char q[SRV_QUOTE_BUF];
	const proto_command *pc = proto_command_find(p->execute);
	if (!pc || pc->query)
		return;
	const json_t *ret = json_object_get(obj, "return");
	const char *desc = json_string_value(json_object_get(json_object_get(obj, "error"),
		"desc"));
	if (kind == PROTO_KIND_ERROR)
		srv_log("job %s: %s, answered queued, was refused by the worker: %s", job->id,
			p->execute, srv_quote(desc ? desc : "", desc ? strlen(desc) : 0, q));
	else
		srv_log("job %s: %s, answered queued, was taken by the worker (applies at step "
			"%lld)", job->id, p->execute, (long long)json_integer_value(
			json_object_get(ret, "applies_at_step")));
}

static void worker_on_reply(srv_job *job, json_t *obj, proto_kind kind)
{
	srv_pending *p = worker_pending_take(job, json_object_get(obj, "id"));
	if (!p) {
		srv_log("job %s: the worker answered a request it was never sent", job->id);
		return;
	}
	json_t *ret = json_object_get(obj, "return");
	if (kind == PROTO_KIND_RETURN && json_is_object(ret))
		worker_note_return(job, p, ret);
	const char *desc = json_string_value(json_object_get(json_object_get(obj, "error"),
		"desc"));
	int stop = strcmp(p->execute, "job-stop") == 0, saving = stop && job->stop_saving;
	if (stop) {
		job->stop_saving = 0;
		if (kind == PROTO_KIND_ERROR)
			job->stop_requested = 0; /* its final save failed: the job goes on */
	}
	if (p->expired) {
		/* the client was answered when the time limit passed: a change it was told is
		 * queued now has its outcome, for the log */
		worker_log_late(job, p, obj, kind);
		goto out;
	}
	if (p->conn_id == 0) {
		if (kind == PROTO_KIND_ERROR) {
			char q[SRV_QUOTE_BUF];
			srv_log("job %s: the worker refused %s: %s", job->id, p->execute,
				srv_quote(desc ? desc : "", desc ? strlen(desc) : 0, q));
		}
		/* the pool's budget: told, or refused */
		if (strcmp(p->execute, "remat-auto") == 0)
			srv_pool_auto_reply(job, kind == PROTO_KIND_RETURN && json_is_object(ret)
				? ret : NULL);
		/* the shutdown's final save failed: the job kept running */
		if (saving && kind == PROTO_KIND_ERROR)
			job->srv->on_save_failed(job->srv, job, desc ? desc : "the save failed");
		goto out;
	}
	/* the client may have gone meanwhile: then the reply is dropped */
	srv_conn *c = srv_conn_find(job->srv, p->conn_id);
	if (!c)
		goto out;
	c->inflight--;
	if (p->client_id)
		json_object_set(obj, "id", p->client_id);
	else
		json_object_del(obj, "id");
	char *text = json_dumps(obj, JSON_COMPACT);
	sv_msg *m = text ? sv_msg_copy(text, strlen(text)) : NULL;
	free(text);
	srv_conn_send(c, m);
	sv_msg_unref(m);
out:
	srv_job_pending_free(p);
}

static void worker_on_greeting(srv_job *job, const json_t *obj)
{
	const json_t *g = json_object_get(obj, "remat");
	const char *role = json_string_value(json_object_get(g, "role"));
	const char *id = json_string_value(json_object_get(g, "job"));
	if (!role || strcmp(role, "worker") != 0 || (id && strcmp(id, job->id) != 0))
		srv_log("job %s: unexpected greeting from the worker (role %s, job %s)", job->id,
			role ? "given" : "missing", id ? "given" : "missing");
	/* greeted, but still starting: running is the worker's to say, once its model and
	 * data are loaded */
	job->greeted = 1;
}

/* Publishes a worker's event as its job's: whatever "job" the worker put in it (a job's
 * owner may write to its channel: ptrace of their own ranks), the line rebuilt names the
 * worker's own job, and carries only the keys of an event. */
static void worker_publish(srv_job *job, const char *name, json_t *obj)
{
	json_t *data = json_object_get(obj, "data");
	json_t *out = json_is_object(data) ? json_deep_copy(data) : json_object();
	if (!out || json_object_set_new(out, "job", json_string(job->id)) < 0) {
		json_decref(out);
		srv_log("job %s: out of memory relaying an event", job->id);
		return;
	}
	json_t *ev = json_pack("{s:s,s:o}", "event", name, "data", out);
	json_t *ts = json_object_get(obj, "timestamp");
	if (ev && json_is_object(ts))
		json_object_set(ev, "timestamp", ts);
	char *text = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
	sv_msg *m = text ? sv_msg_copy(text, strlen(text)) : NULL;
	free(text);
	json_decref(ev);
	if (m)
		srv_conn_publish(job->srv, job->id, name, m);
	else
		srv_log("job %s: out of memory relaying an event", job->id);
	sv_msg_unref(m);
}

/* A STEP's progress goes to the record now and then (SRV_RECORD_STEP_MS): after any death
 * of the daemon, status and ls name a recent step. */
static void worker_step_record(srv_job *job)
{
	if (srv_now_ms() - job->record_ms >= SRV_RECORD_STEP_MS)
		srv_job_save_record(job);
}

/* Keeps the table current from an event, then relays it as the job's (worker_publish). */
static void worker_on_event(srv_job *job, json_t *obj)
{
	const char *name = json_string_value(json_object_get(obj, "event"));
	json_t *data = json_object_get(obj, "data");
	if (!name)
		return;
	if (!json_is_object(data))
		data = NULL;
	int ev = proto_event_find(name);
	if (ev == PROTO_EV_STEP && data) {
		worker_note_progress(job, data);
		worker_step_record(job);
	} else if (ev == PROTO_EV_MEMORY && data) {
		srv_pool_memory(job, data);
	} else if (ev == PROTO_EV_EVAL && data) {
		worker_note_eval(job, data, "val_loss", "step");
	} else if (ev == PROTO_EV_CHECKPOINT_SAVED && data) {
		worker_set_checkpoint(job, json_object_get(data, "path"));
	} else if (ev == PROTO_EV_CHECKPOINT_FAILED && data) {
		json_decref(job->last_save_error);
		job->last_save_error = json_deep_copy(data);
		json_object_del(job->last_save_error, "job");
		srv_job_save_record(job);
	} else if (ev == PROTO_EV_REMAT_APPLIED && data) {
		worker_set_policy(job, json_object_get(data, "policy"));
	} else if (ev == PROTO_EV_REMAT_AUTO && data) {
		srv_auto was = job->autoc;
		worker_auto_said(job, &was, srv_auto_note_event(&job->autoc, data));
	} else if (ev == PROTO_EV_TOKENIZE && data) {
		json_decref(job->tokenize); /* job-status and job-list show it while starting */
		job->tokenize = json_deep_copy(data);
	} else if (ev == PROTO_EV_JOB_STATE_CHANGED && data) {
		int to = proto_job_state_find(json_string_value(json_object_get(data, "to")));
		if (to == (int)job->state)
			return;
		/* queued, starting and interrupted are rematd's to say: a job the worker called
		 * queued would be spawned a second time */
		if (to == PROTO_JOB_QUEUED || to == PROTO_JOB_STARTING ||
			to == PROTO_JOB_INTERRUPTED)
			to = -1;
		if (to < 0)
			return;
		const char *why = json_string_value(json_object_get(data, "reason"));
		char q[SRV_QUOTE_BUF];
		if (to == PROTO_JOB_RUNNING && job->state == PROTO_JOB_STARTING)
			job->running_ms = srv_now_ms();
		job->progress_ms = srv_now_ms(); /* a pause's time is no stall's */
		if (proto_job_state_final((proto_job_state)to)) {
			/* said by rematd itself once the worker has exited, with its exit status
			 * and last checkpoint (srv_worker.c's reap) */
			snprintf(job->final_from, sizeof job->final_from, "%s",
				proto_job_state_name(job->state));
			job->final_reported = 1;
		}
		job->state = (proto_job_state)to;
		srv_copy_text(job->reason, sizeof job->reason, why ? why : "");
		srv_log("job %s %s: %s", job->id, proto_job_state_name(job->state),
			srv_quote(job->reason, strlen(job->reason), q));
		srv_job_save_record(job);
		srv_pool_changed(job->srv, "a job's state changed");
		if (job->final_reported)
			return;
	}
	worker_publish(job, name, obj);
	/* after the STEP went out: what the pool tells on its account follows it */
	if (ev == PROTO_EV_STEP && data)
		srv_pool_step(job, data);
	else if (ev == PROTO_EV_REMAT_AUTO && data)
		srv_pool_auto_said(job, data);
}

/* One line from the worker: acted on by its kind (a bad one is logged). */
int srv_worker__on_line(const char *line, size_t len, void *ud)
{
	srv_job *job = ud;
	json_t *obj = NULL;
	proto_kind kind;
	char desc[PROTO_DESC_LEN];
	if (len == 0)
		return 0;
	if (proto_message_parse(line, len, &obj, &kind, desc, sizeof desc) < 0) {
		char q[SRV_QUOTE_BUF], qd[SRV_QUOTE_BUF];
		srv_log("job %s: bad line from the worker: %s in %s", job->id,
			srv_quote(desc, strlen(desc), qd), srv_quote(line, len, q));
		return 0;
	}
	switch (kind) {
	case PROTO_KIND_GREETING:
		worker_on_greeting(job, obj);
		break;
	case PROTO_KIND_RETURN:
	case PROTO_KIND_ERROR:
		worker_on_reply(job, obj, kind);
		break;
	case PROTO_KIND_EVENT:
		worker_on_event(job, obj);
		break;
	}
	json_decref(obj);
	return 0;
}

