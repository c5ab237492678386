/* eng_ctl_cmd.c - the commands remat-train's control thread answers (docs/protocol.md):
 * queries from the snapshot the training thread publishes, and changes queued for the next
 * step boundary. Runs on the control thread with the controller's mutex held; no I/O but
 * eng_ctl__send_error. Not here: connections, the loop, the outbox (eng_ctl.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng_backends.h"
#include "eng_ctl_int.h"
#include "eng_cuda_mem.h"
#include "eng_mem.h"
#include "eng_plan_json.h"
#include "kn.h"

static void plan_for(struct eng_ctl *c, const eng_policy *p, eng_plan *plan)
{
	const eng_model *m = &c->tr->model;
	eng_plan_policy(&m->cfg, m->B, m->T, m->chunk_rows, p, plan);
}

/* The measured sections (mode, saved and workspace bytes), without the planner's FLOPs. */
static json_t *measured_sections(struct eng_ctl *c)
{
	eng_plan plan;
	plan_for(c, &c->policy, &plan);
	json_t *secs = eng_plan_sections_json(&c->policy, &plan, c->saved), *s;
	size_t i;
	json_array_foreach(secs, i, s) json_object_del(s, "extra_flops");
	return secs;
}

static json_t *cmd_status(struct eng_ctl *c)
{
	json_t *r = json_pack("{s:s,s:s,s:s,s:i,s:i,s:i}", "job", c->job, "name", c->name,
		"state", state_names[c->state], "step", c->step, "steps", c->steps, "pid",
		(int)getpid());
	json_object_set_new(r, "loss", c->has_last ? json_real(c->last.loss) : json_null());
	json_object_set_new(r, "lr", c->has_last ? json_real(c->last.lr) : json_null());
	json_object_set_new(r, "tokens_per_s", json_real(c->has_last ? c->last.tokens_per_s : 0));
	json_object_set_new(r, "step_ms", json_real(c->has_last ? c->last.step_ms : 0));
	json_object_set_new(r, "policy", c->tr ? eng_policy_json(&c->policy) : json_object());
	json_object_set_new(r, "last_checkpoint",
		c->last_ckpt[0] ? json_string(c->last_ckpt) : json_null());
	json_object_set_new(r, "reason", json_string(c->reason));
	json_object_set_new(r, "exit_status", json_null());
	json_object_set_new(r, "last_save_error", c->save_error ? json_deep_copy(c->save_error)
								: json_null());
	return r;
}

/* mem-stats' "device" (docs/protocol.md): the GPU's categories, the allocator's reserved
 * bytes, free/total from cudaMemGetInfo, pinned host memory of offloaded activations. */
static json_t *device_json(const eng_cuda_mem_stats *ds)
{
	json_t *cats = json_object();
	for (int i = 0; i < ENG_MEM_NCAT; i++)
		json_object_set_new(cats, eng_mem_cat_name(i), json_pack("{s:I,s:I,s:I}", "current",
			(json_int_t)ds->current[i], "peak", (json_int_t)ds->peak[i], "peak_since_reset",
			(json_int_t)ds->peak_reset[i]));
	return json_pack("{s:o,s:{s:I,s:I,s:I},s:I,s:I,s:i,s:I,s:I,s:I,s:I}", "categories", cats,
		"total", "current", (json_int_t)ds->total_current, "peak",
		(json_int_t)ds->total_peak, "peak_since_reset", (json_int_t)ds->total_peak_reset,
		"reserved", (json_int_t)ds->reserved, "reserved_peak", (json_int_t)ds->reserved_peak,
		"arenas", ds->arenas, "free", (json_int_t)ds->device_free, "total_memory",
		(json_int_t)ds->device_total, "pinned_host", (json_int_t)ds->pinned,
		"pinned_host_peak", (json_int_t)ds->pinned_peak);
}

static json_t *cmd_mem(struct eng_ctl *c)
{
	eng_mem_stats ms;
	eng_mem_get_stats(&ms);
	json_t *cats = json_object();
	for (int i = 0; i < ENG_MEM_NCAT; i++)
		json_object_set_new(cats, eng_mem_cat_name(i), json_pack("{s:I,s:I,s:I}", "current",
			(json_int_t)ms.current[i], "peak", (json_int_t)ms.peak[i], "peak_since_reset",
			(json_int_t)ms.peak_reset[i]));
	json_t *secs = measured_sections(c);
	json_t *r = json_pack("{s:o,s:{s:I,s:I,s:I},s:o,s:I,s:I,s:i}", "categories", cats, "total",
		"current", (json_int_t)ms.total_current, "peak", (json_int_t)ms.total_peak,
		"peak_since_reset", (json_int_t)ms.total_peak_reset, "sections", secs, "rss",
		(json_int_t)ms.rss, "rss_peak", (json_int_t)ms.rss_peak, "step", c->step);
	eng_cuda_mem_stats ds;
	eng_cuda_mem_get_stats(&ds); /* atomics only: no CUDA call on this thread */
	if (r && ds.active)
		json_object_set_new(r, "device", device_json(&ds));
	return r;
}

void eng_ctl__enqueue(struct eng_ctl *c, eng_ctl_cmd *cmd)
{
	if (c->q_tail)
		c->q_tail->next = cmd;
	else
		c->q_head = cmd;
	c->q_tail = cmd;
	pthread_cond_signal(&c->cv);
}

static json_t *cmd_list(struct eng_ctl *c)
{
	json_t *j = json_pack("{s:s,s:s,s:s,s:i,s:i}", "job", c->job, "name", c->name, "state",
		state_names[c->state], "step", c->step, "steps", c->steps);
	json_object_set_new(j, "loss", c->has_last ? json_real(c->last.loss) : json_null());
	return json_pack("{s:[o]}", "jobs", j);
}

static json_t *cmd_info(struct eng_ctl *c)
{
	json_t *r = json_pack("{s:s,s:i,s:f,s:s,s:s?,s:n,s:s,s:i,s:i}", "version", PROTO_VERSION,
		"pid", (int)getpid(), "uptime_s", eng_ctl__mono_s() - c->started, "role", "worker",
		"socket", c->path[0] ? c->path : NULL, "state_dir", "blas", kn_blas_describe(),
		"max_jobs", 1, "jobs_running", eng_ctl__is_final(c->state) ? 0 : 1);
	if (r && eng_backends_json(r) < 0) {
		json_decref(r);
		r = NULL;
	}
	return r;
}

/* subscribe, unsubscribe: the connection's event bits. */
static json_t *cmd_subscribe(ctl_conn *k, const char *name, const json_t *args)
{
	unsigned bits = 0;
	json_t *evs = json_object_get(args, "events"), *e;
	size_t i;
	if (!evs)
		bits = CTL_EV_ALL;
	json_array_foreach(evs, i, e) {
		int b = proto_event_find(json_string_value(e));
		if (b >= 0)
			bits |= 1u << b;
	}
	if (strcmp(name, "subscribe") == 0)
		k->events |= bits;
	else
		k->events &= ~bits;
	return json_object();
}

/* The job is starting (no trainer yet): the request is kept, and answered once the trainer
 * exists, before its first step (eng_ctl.c's early_answer). Always NULL. */
static json_t *keep_early(struct eng_ctl *c, ctl_conn *k, int handle, const char *name,
	json_t *args, json_t *id)
{
	char desc[PROTO_DESC_LEN];
	ctl_early *e = NULL, **tail = &c->early;
	if (eng_ctl__is_final(c->state)) {
		snprintf(desc, sizeof desc, "job %s is %s", c->job, state_names[c->state]);
		eng_ctl__send_error(k, PROTO_ERR_INVALID_STATE, desc, id);
	} else if (k->inflight >= PROTO_MAX_INFLIGHT) {
		eng_ctl__send_error(k, PROTO_ERR_BUSY, "too many requests in flight", id);
	} else if (!(e = calloc(1, sizeof *e))) {
		eng_ctl__send_error(k, PROTO_ERR_INTERNAL, "out of memory", id);
	} else {
		snprintf(e->execute, sizeof e->execute, "%s", name);
		e->args = json_incref(args);
		e->id = id ? json_incref(id) : NULL;
		e->handle = handle;
		while (*tail)
			tail = &(*tail)->next;
		*tail = e;
		k->inflight++;
	}
	return NULL;
}

static json_t *cmd_remat_get(struct eng_ctl *c)
{
	json_t *al = json_object();
	for (int i = 0; i < c->tr->aliases.n; i++)
		json_object_set_new(al, c->tr->aliases.a[i].name,
			json_string(c->tr->aliases.a[i].selector));
	return json_pack("{s:o,s:o,s:o}", "policy", eng_policy_json(&c->policy), "sections",
		measured_sections(c), "aliases", al);
}

static json_t *cmd_plan(struct eng_ctl *c, ctl_conn *k, const json_t *args, json_t *id)
{
	char desc[PROTO_DESC_LEN];
	const eng_model *m = &c->tr->model;
	eng_plan_job j = {m->cfg, m->B, m->T, m->chunk_rows, c->tr->spec.device,
		&c->tr->aliases, c->pending};
	json_t *r = eng_plan_reply(&j, args, desc, sizeof desc);
	if (!r)
		eng_ctl__send_error(k, PROTO_ERR_INVALID_PARAMETER, desc, id);
	return r;
}

/* The changes, queued for the training thread's next step boundary: remat-set, job-pause and
 * job-resume answer now with the step they apply at; job-stop and ckpt-save when done. */
static json_t *cmd_change(struct eng_ctl *c, ctl_conn *k, int handle, const char *name,
	json_t *args, json_t *id)
{
	char desc[PROTO_DESC_LEN];
	if (eng_ctl__is_final(c->state) || c->state == CTL_STOPPING) {
		snprintf(desc, sizeof desc, "job %s is %s", c->job, state_names[c->state]);
		eng_ctl__send_error(k, PROTO_ERR_INVALID_STATE, desc, id);
		return NULL;
	}
	eng_ctl_cmd *cmd = calloc(1, sizeof *cmd);
	if (!cmd) {
		eng_ctl__send_error(k, PROTO_ERR_INTERNAL, "out of memory", id);
		return NULL;
	}
	cmd->conn = -1;
	int applies = c->step + 1 + c->in_step;
	if (strcmp(name, "remat-set") == 0) {
		eng_policy p = c->pending;
		if (eng_plan_policy_args(&c->tr->aliases, c->tr->spec.device, args, &p, desc,
			sizeof desc) < 0) {
			free(cmd);
			eng_ctl__send_error(k, PROTO_ERR_INVALID_PARAMETER, desc, id);
			return NULL;
		}
		cmd->op = CTL_OP_POLICY;
		cmd->policy = c->pending = p;
		eng_ctl__enqueue(c, cmd);
		return json_pack("{s:i,s:o}", "applies_at_step", applies, "policy",
			eng_policy_json(&p));
	}
	if (strcmp(name, "job-pause") == 0) {
		if (c->state == CTL_PAUSED || c->pause_pending) {
			free(cmd);
			snprintf(desc, sizeof desc, "job %s is already paused", c->job);
			eng_ctl__send_error(k, PROTO_ERR_INVALID_STATE, desc, id);
			return NULL;
		}
		cmd->op = CTL_OP_PAUSE;
		c->pause_pending = 1;
		eng_ctl__enqueue(c, cmd);
		/* the step it stops at, as job-status will say: the one running now, if any */
		return json_pack("{s:s,s:i,s:i}", "state", "paused", "step", applies - 1,
			"applies_at_step", applies);
	}
	if (strcmp(name, "job-resume") == 0) {
		if (c->state != CTL_PAUSED && !c->pause_pending) {
			free(cmd);
			snprintf(desc, sizeof desc, "job %s is not paused", c->job);
			eng_ctl__send_error(k, PROTO_ERR_INVALID_STATE, desc, id);
			return NULL;
		}
		cmd->op = CTL_OP_RESUME;
		c->pause_pending = 0;
		eng_ctl__enqueue(c, cmd);
		return json_pack("{s:s,s:i}", "state", "running", "step", c->step);
	}
	/* deferred: job-stop, ckpt-save */
	int wants_save = strcmp(name, "ckpt-save") == 0 ||
			 json_is_true(json_object_get(args, "save"));
	if (wants_save && !c->tr->spec.save_dir[0]) {
		free(cmd);
		eng_ctl__send_error(k, PROTO_ERR_INVALID_STATE, "the job has no save.dir", id);
		return NULL;
	}
	cmd->conn = handle;
	cmd->id = json_incref(id);
	k->inflight++;
	json_t *n = json_object_get(args, "name");
	if (n)
		snprintf(cmd->name, sizeof cmd->name, "%s", json_string_value(n));
	if (strcmp(name, "job-stop") == 0) {
		cmd->op = CTL_OP_STOP;
		cmd->save = json_is_true(json_object_get(args, "save"));
	} else {
		cmd->op = CTL_OP_SAVE;
	}
	eng_ctl__enqueue(c, cmd);
	return NULL;
}


json_t *eng_ctl__dispatch(struct eng_ctl *c, ctl_conn *k, int handle, const char *name,
	json_t *args, json_t *id)
{
	if (strcmp(name, "job-status") == 0)
		return cmd_status(c);
	if (strcmp(name, "job-list") == 0)
		return cmd_list(c);
	if (strcmp(name, "daemon-info") == 0)
		return cmd_info(c);
	if (strcmp(name, "subscribe") == 0 || strcmp(name, "unsubscribe") == 0)
		return cmd_subscribe(k, name, args);
	if (strcmp(name, "job-start") == 0 || strcmp(name, "daemon-shutdown") == 0) {
		eng_ctl__send_error(k, PROTO_ERR_COMMAND_NOT_FOUND,
			"this is a worker (remat-train); job-start and daemon-shutdown are rematd's", id);
		return NULL;
	}
	if (!c->tr)
		return keep_early(c, k, handle, name, args, id);
	if (strcmp(name, "mem-stats") == 0)
		return cmd_mem(c);
	if (strcmp(name, "mem-reset-peak") == 0) {
		eng_mem_reset_peak();
		eng_cuda_mem_reset_peak();
		return json_object();
	}
	if (strcmp(name, "remat-get") == 0)
		return cmd_remat_get(c);
	if (strcmp(name, "remat-plan") == 0)
		return cmd_plan(c, k, args, id);
	return cmd_change(c, k, handle, name, args, id);
}
