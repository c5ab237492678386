/* wk_ctl_cmd.c - the commands remat-train's control thread answers (docs/protocol.md):
 * queries from the snapshot the training thread publishes, and changes queued for the next
 * step boundary. Runs on the control thread with the controller's mutex held; no I/O but
 * wk_ctl__send_error. Not here: the memory commands (wk_ctl_mem.c), the connections and
 * the loop (wk_ctl_loop.c), the outbox and the command queue (wk_ctl.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng_auto.h"
#include "eng_devices.h"
#include "eng_ckpt.h"
#include "wk_ctl_int.h"
#include "eng_backend.h"
#include "eng_mem.h"
#include "eng_plan_json.h"
#include "eng_tensors.h"
#include "kn.h"

/* One handler per command (the table at the end, indexed by proto's command ids): the
 * reply, or NULL when it answered (an error) or will answer later (a deferred change). */
#define HANDLER(fn) static WK_CTL_HANDLER(fn)
#define UNUSED_ARGS (void)c, (void)k, (void)handle, (void)cmd, (void)args, (void)id

static const char *const budget_sources[] = {"size", "cgroup", "device"};

/* job-status' "auto": null when no controller is on, else its budget, where that came
 * from, whether it holds a policy remat-set gave, and the least any policy needs. */
static json_t *auto_json(const struct wk_ctl *c)
{
	if (!c->remat.autoc.budget)
		return json_null();
	return json_pack("{s:I,s:s,s:b,s:I}", "budget_bytes", (json_int_t)c->remat.autoc.budget,
		"source", budget_sources[c->remat.autoc.source], "pinned", c->remat.autoc.pinned,
		"least_bytes", (json_int_t)c->mem.memfig.least);
}

HANDLER(cmd_status)
{
	UNUSED_ARGS;
	const ctl_run *run = &c->run;
	json_t *r = json_pack("{s:s,s:s,s:s,s:i,s:i,s:i}", "job", c->job, "name", c->name,
		"state", proto_job_state_name(run->state), "step", run->step, "steps", run->steps,
		"pid", (int)getpid());
	/* float32 figures in their shortest text (0.0003, not 0.00029999999999999997) */
	json_object_set_new(r, "loss", run->has_last ? json_real(proto_f32_double(run->last.loss))
		: json_null());
	json_object_set_new(r, "lr", run->has_last ? json_real(proto_f32_double(run->last.lr))
		: json_null());
	json_object_set_new(r, "tokens_per_s",
		json_real(run->has_last ? run->last.tokens_per_s : 0));
	json_object_set_new(r, "step_ms", json_real(run->has_last ? run->last.step_ms : 0));
	json_object_set_new(r, "oom_retries",
		json_integer(run->has_last ? run->last.oom_retries : 0));
	json_object_set_new(r, "auto_budget_bytes", c->remat.autoc.budget ?
		json_integer((json_int_t)c->remat.autoc.budget) : json_null());
	json_object_set_new(r, "auto", auto_json(c));
	json_object_set_new(r, "policy", c->tr ? eng_policy_json(&c->remat.policy) : json_object());
	json_object_set_new(r, "last_checkpoint",
		run->last_ckpt[0] ? json_string(run->last_ckpt) : json_null());
	json_object_set_new(r, "reason", json_string(run->reason));
	json_object_set_new(r, "exit_status", json_null());
	json_object_set_new(r, "last_save_error", run->save_error ? json_deep_copy(run->save_error)
								: json_null());
	/* the last evaluation, the training so far and what remains at its pace here */
	const json_t *ev = run->last_eval;
	json_object_set_new(r, "val_loss", ev ? json_deep_copy(json_object_get(ev, "val_loss"))
					      : json_null());
	json_object_set_new(r, "val_step", ev ? json_deep_copy(json_object_get(ev, "step"))
					      : json_null());
	if (c->tr) {
		const eng_spec *s = &c->tr->spec;
		json_object_set_new(r, "grad_accum", json_integer(s->grad_accum));
		json_object_set_new(r, "precision", json_string(eng_trainer_precision(c->tr)));
		json_object_set_new(r, "tokens", json_integer((json_int_t)run->step *
			(json_int_t)eng_step_tokens(s)));
		/* what trains, as PEFT's print_trainable_parameters() counts it */
		size_t trainable, all = eng_model_params(&s->cfg, &trainable);
		json_object_set_new(r, "arch", json_string(eng_arch_name(s->cfg.arch)));
		json_object_set_new(r, "params", json_integer((json_int_t)all));
		json_object_set_new(r, "trainable_params", json_integer((json_int_t)trainable));
		if (s->cfg.quant)
			json_object_set_new(r, "quantized", eng_quant_json(&s->cfg, 1));
	}
	double el = run->steps_here ? wk_ctl__mono_s() - run->first_step_s : 0;
	json_object_set_new(r, "elapsed_s", json_real(el));
	json_object_set_new(r, "eta_s", run->steps_here && !wk_ctl__is_final(run->state)
		? json_real(run->busy_s / run->steps_here * (run->steps - run->step))
		: json_null());
	json_object_set_new(r, "hparams",
		run->hparams ? json_deep_copy(run->hparams) : json_object());
	/* data parallel: the ranks, and how their gradients are summed */
	const char *how = c->tr ? eng_trainer_allreduce(c->tr) : NULL;
	json_object_set_new(r, "ranks", json_integer(c->tr ? c->tr->spec.ranks : 1));
	json_object_set_new(r, "allreduce", how ? json_string(how) : json_null());
	if (run->nranks > 1) { /* each rank's last step, as gathered after it (wk_dp.c) */
		json_t *pr = json_array();
		for (int i = 0; pr && i < run->nranks; i++) {
			const wk_ctl_rank *k = &run->ranks[i];
			json_array_append_new(pr, json_pack("{s:i,s:i,s:f,s:f,s:f,s:I}", "rank",
				k->rank, "step", k->step, "step_ms", k->step_ms, "allreduce_ms",
				k->allreduce_ms, "allreduce_hidden_ms", k->allreduce_hidden_ms,
				"rss", (json_int_t)k->mem.rss));
		}
		json_object_set_new(r, "per_rank", pr);
	}
	proto_status_complete(r); /* the same keys in every state: null where none */
	return r;
}

HANDLER(cmd_list)
{
	UNUSED_ARGS;
	json_t *j = json_pack("{s:s,s:s,s:s,s:i,s:i}", "job", c->job, "name", c->name, "state",
		proto_job_state_name(c->run.state), "step", c->run.step, "steps", c->run.steps);
	json_object_set_new(j, "loss", c->run.has_last ? json_real(c->run.last.loss) : json_null());
	return json_pack("{s:[o]}", "jobs", j);
}

HANDLER(cmd_info)
{
	UNUSED_ARGS;
	json_t *r = json_pack("{s:s,s:i,s:f,s:s,s:s?,s:n,s:s,s:i,s:i}", "version", PROTO_VERSION,
		"pid", (int)getpid(), "uptime_s", wk_ctl__mono_s() - c->started, "role", "worker",
		"socket", c->path[0] ? c->path : NULL, "state_dir", "blas", kn_blas_describe(),
		"max_jobs", 1, "jobs_running", wk_ctl__is_final(c->run.state) ? 0 : 1);
	if (r && eng_devices_json(r) < 0) {
		json_decref(r);
		r = NULL;
	}
	return r;
}

/* subscribe, unsubscribe: the connection's event bits (every event here is of one job) */
HANDLER(cmd_subscribe)
{
	UNUSED_ARGS;
	sv_conn_subscribe(&k->k, "", sv_events_mask(json_object_get(args, "events")),
		cmd->id == PROTO_CMD_SUBSCRIBE);
	return json_object();
}

/* The job is starting (no trainer yet): the request is kept, and answered once the trainer
 * exists, before its first step (wk_ctl.c's early_answer). Always NULL. */
static json_t *keep_early(struct wk_ctl *c, ctl_conn *k, int handle, const char *name,
	json_t *args, json_t *id)
{
	char desc[PROTO_DESC_LEN];
	ctl_early *e = NULL, **tail = &c->early;
	if (wk_ctl__is_final(c->run.state)) {
		snprintf(desc, sizeof desc, "job %s is %s", c->job,
			proto_job_state_name(c->run.state));
		wk_ctl__send_error(k, PROTO_ERR_INVALID_STATE, desc, id);
	} else if (k->inflight >= PROTO_MAX_INFLIGHT) {
		wk_ctl__send_error(k, PROTO_ERR_BUSY, "too many requests in flight", id);
	} else if (!(e = calloc(1, sizeof *e))) {
		wk_ctl__send_error(k, PROTO_ERR_INTERNAL, "out of memory", id);
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

HANDLER(cmd_remat_get)
{
	UNUSED_ARGS;
	json_t *al = json_object();
	for (int i = 0; i < c->tr->aliases.n; i++)
		json_object_set_new(al, c->tr->aliases.a[i].name,
			json_string(c->tr->aliases.a[i].selector));
	return json_pack("{s:o,s:o,s:o}", "policy", eng_policy_json(&c->remat.policy), "sections",
		wk_ctl__measured_sections(c), "aliases", al);
}

HANDLER(cmd_plan)
{
	UNUSED_ARGS;
	char desc[PROTO_DESC_LEN];
	const eng_model *m = &c->tr->model;
	eng_plan_job j = {.cfg = m->cfg, .B = m->B, .T = m->T, .chunk_rows = m->chunk_rows,
		.device = c->tr->spec.device, .aliases = &c->tr->aliases,
		.policy = c->remat.pending, .fixed_source = "measured"};
	/* what the run holds now whatever its policy: measured, on the device it runs on */
	eng_device_mem ds;
	eng_backend_device_mem(&ds); /* atomics only: no CUDA call on this thread */
	if (ds.active) { /* the device's, measured */
		for (int cat = 0; cat < ENG_MEM_NCAT; cat++)
			if (cat != ENG_MEM_ACTIVATIONS && cat != ENG_MEM_RECOMPUTE)
				j.fixed[cat] = ds.current[cat];
	} else { /* counted as the run was laid out (spec, shape, data: fixed since) */
		eng_trainer_fixed_bytes(c->tr, j.fixed);
		j.fixed_source = "engine";
	}
	j.untracked = c->mem.memfig.fixed - c->mem.memfig.tracked_fixed;
	j.untracked_source = "measured";
	j.snapshot = c->mem.memfig.snapshot;
	j.save_ms = c->mem.memfig.save_ms;
	j.snap_stall_ms = c->mem.memfig.stall_ms;
	j.save_every = c->tr->spec.save_every;
	/* the step time: measured per section where the table has it, the FLOPs at the rate
	 * the last step ran at else (device cpu: the GPU model times only its recomputes) */
	eng_plan_costs pc;
	unsigned char measured[ENG_MAX_LAYERS + 1][3];
	if (eng_backend_has_sections(c->tr->be) && c->run.has_last && c->run.last.step_ms > 0) {
		double rate = eng_costs_rate(&m->cfg, m->B, m->T, m->chunk_rows, &c->remat.policy,
			c->run.last.step_ms);
		eng_costs_plan(&c->mem.costs, &m->cfg, m->B, m->T, m->chunk_rows, rate, &pc,
			measured);
		double cur = eng_plan_policy_cost(&m->cfg, m->B, m->T, m->chunk_rows, &pc,
			&c->remat.policy);
		j.costs = &pc;
		j.measured = (const unsigned char (*)[3])measured;
		/* off's step from the table's medians, steadier than the last step alone */
		double off = eng_costs_off_step_ms(&c->mem.costs);
		j.off_step_ms = off > 0 ? off : c->run.last.step_ms - cur;
	}
	json_t *r = eng_plan_reply(&j, args, desc, sizeof desc);
	if (!r)
		wk_ctl__send_error(k, PROTO_ERR_INVALID_PARAMETER, desc, id);
	return r;
}

/* The changes, queued for the training thread's next step boundary: remat-set, job-pause
 * and job-resume answer now with the step they apply at; job-stop and ckpt-save when done.
 * NULL (an error sent) when the job can no longer change. */
static wk_ctl_cmd *change_new(struct wk_ctl *c, ctl_conn *k, json_t *id)
{
	char desc[PROTO_DESC_LEN];
	wk_ctl_cmd *cmd = NULL;
	if (wk_ctl__is_final(c->run.state) || c->run.state == CTL_STOPPING) {
		snprintf(desc, sizeof desc, "job %s is %s", c->job,
			proto_job_state_name(c->run.state));
		wk_ctl__send_error(k, PROTO_ERR_INVALID_STATE, desc, id);
	} else if (!(cmd = calloc(1, sizeof *cmd))) {
		wk_ctl__send_error(k, PROTO_ERR_INTERNAL, "out of memory", id);
	} else {
		cmd->conn = -1;
	}
	return cmd;
}

/* the step a change queued now applies at */
static int applies_at(const struct wk_ctl *c)
{
	return c->run.step + 1 + c->run.in_step;
}

/* 1 (and the error sent) while a probe owns the policy */
static int probing(struct wk_ctl *c, ctl_conn *k, json_t *id)
{
	char desc[PROTO_DESC_LEN];
	if (!c->remat.probe_until)
		return 0;
	snprintf(desc, sizeof desc, "job %s is measuring its sections' costs (remat-profile) "
		 "until step %d: set the policy after that", c->job, c->remat.probe_until);
	wk_ctl__send_error(k, PROTO_ERR_INVALID_STATE, desc, id);
	return 1;
}

/* The controller's budget once the changes queued so far apply (0: off). */
static size_t budget_now(const struct wk_ctl *c)
{
	return c->remat.auto_queued ? c->remat.auto_next : c->remat.autoc.budget;
}

/* The predicted peak of policy p: the fixed part (untracked included) and p's
 * activations and recompute buffers. */
static size_t predicted(struct wk_ctl *c, const eng_policy *p)
{
	eng_plan plan;
	wk_ctl__plan_for(c, p, &plan);
	return c->mem.memfig.fixed + plan.peak_bytes;
}

/* remat-set's policy p against memory.limit (an allocator's cap: the boundary would put
 * another policy in its place) and, with a controller on and no force, its budget: 0, or
 * -1 with why in desc. */
static int policy_fits(struct wk_ctl *c, const eng_policy *p, int force, char *desc,
	size_t len)
{
	const wk_ctl_memfig *m = &c->mem.memfig;
	eng_plan plan;
	char text[2048];
	size_t budget = budget_now(c), room = c->remat.auto_queued ?
		(size_t)((double)budget * (1.0 - ENG_AUTO_HEADROOM)) : m->room;
	wk_ctl__plan_for(c, p, &plan);
	size_t tracked = m->tracked_fixed + plan.peak_bytes, pred = m->fixed + plan.peak_bytes;
	eng_policy_format(p, text, sizeof text);
	if (m->limit && tracked > m->limit) {
		snprintf(desc, len, "policy %.160s needs %.1f MiB of tracked memory, over the job's "
			 "memory.limit of %.1f MiB: choose a policy that keeps less", text,
			 tracked / 1048576.0, m->limit / 1048576.0);
		return -1;
	}
	if (!budget || force || !room || pred <= room)
		return 0;
	snprintf(desc, len, "policy %.160s: its predicted peak of %.1f MiB (process memory) does "
		 "not fit the budget of %.1f MiB (%.1f MiB usable, less %.0f%% headroom and what "
		 "peaks ran above predictions); set a policy that keeps less, raise the budget "
		 "(remat auto), or --force hands control back (the controller turns off)", text,
		 pred / 1048576.0, budget / 1048576.0, room / 1048576.0, 100 * ENG_AUTO_HEADROOM);
	return -1;
}

HANDLER(cmd_remat_set)
{
	UNUSED_ARGS;
	char desc[PROTO_DESC_LEN];
	eng_policy p = c->remat.pending;
	if (probing(c, k, id))
		return NULL;
	wk_ctl_cmd *q = change_new(c, k, id);
	if (!q)
		return NULL;
	if (eng_plan_policy_args(&c->tr->aliases, c->tr->spec.device, args, &p, desc,
		    sizeof desc) < 0) {
		free(q);
		wk_ctl__send_error(k, PROTO_ERR_INVALID_PARAMETER, desc, id);
		return NULL;
	}
	q->force = json_is_true(json_object_get(args, "force"));
	if (policy_fits(c, &p, q->force, desc, sizeof desc) < 0) {
		free(q);
		wk_ctl__send_error(k, PROTO_ERR_INVALID_PARAMETER, desc, id);
		return NULL;
	}
	q->op = CTL_OP_POLICY;
	q->policy = c->remat.pending = p;
	q->applies_at = applies_at(c);
	q->change = ++c->remat.changes;
	q->budget_change = q->force && budget_now(c);
	wk_ctl__enqueue(c, q);
	json_t *r = json_pack("{s:i,s:i,s:o}", "applies_at_step", q->applies_at, "change",
		q->change, "policy", eng_policy_json(&p));
	if (!budget_now(c)) {
		json_object_set_new(r, "controller", json_null());
		return r;
	}
	json_object_set_new(r, "controller", json_string(q->force ? "off" : "on"));
	json_object_set_new(r, "predicted_peak_bytes", json_integer((json_int_t)predicted(c, &p)));
	json_object_set_new(r, "budget_bytes", json_integer((json_int_t)budget_now(c)));
	if (q->budget_change) { /* the controller lets go at the boundary */
		c->remat.auto_queued++;
		c->remat.auto_next = 0;
	}
	return r;
}

/* job-pause (pause 1) and job-resume (0): queued, unless the job already is as asked.
 * 0, or -1 with the error sent. */
static int queue_pause(struct wk_ctl *c, ctl_conn *k, json_t *id, int pause)
{
	char desc[PROTO_DESC_LEN];
	wk_ctl_cmd *q = change_new(c, k, id);
	if (!q)
		return -1;
	int paused = c->run.state == CTL_PAUSED || c->remat.pause_pending;
	if (paused == pause) {
		free(q);
		snprintf(desc, sizeof desc, "job %s is %s", c->job,
			pause ? "already paused" : "not paused");
		wk_ctl__send_error(k, PROTO_ERR_INVALID_STATE, desc, id);
		return -1;
	}
	q->op = pause ? CTL_OP_PAUSE : CTL_OP_RESUME;
	c->remat.pause_pending = pause;
	wk_ctl__enqueue(c, q);
	return 0;
}

HANDLER(cmd_pause)
{
	UNUSED_ARGS;
	if (queue_pause(c, k, id, 1) < 0)
		return NULL;
	/* the step it stops at, as job-status will say: the one running now, if any */
	return json_pack("{s:s,s:i,s:i}", "state", "paused", "step", applies_at(c) - 1,
		"applies_at_step", applies_at(c));
}

HANDLER(cmd_resume)
{
	UNUSED_ARGS;
	if (queue_pause(c, k, id, 0) < 0)
		return NULL;
	return json_pack("{s:s,s:i}", "state", "running", "step", c->run.step);
}

/* q's reply goes to connection handle (k) once the training thread is done with it */
static void defer_reply(wk_ctl_cmd *q, ctl_conn *k, int handle, json_t *id)
{
	q->conn = handle;
	q->id = json_incref(id);
	k->inflight++;
}

/* job-stop and ckpt-save: answered once done (wk_ctl_reply) */
HANDLER(cmd_deferred)
{
	UNUSED_ARGS;
	int stop = cmd->id == PROTO_CMD_JOB_STOP;
	/* job-stop saves unless told not to (a job without save.dir has nowhere to, and
	 * then stops unsaved, its reply saying what was dropped) */
	const json_t *sv = json_object_get(args, "save");
	int save = !stop || (sv ? json_is_true(sv) : c->tr->spec.save_dir[0] != 0);
	wk_ctl_cmd *q = change_new(c, k, id);
	if (!q)
		return NULL;
	if (save && !c->tr->spec.save_dir[0]) {
		free(q);
		wk_ctl__send_error(k, PROTO_ERR_INVALID_STATE, "the job has no save.dir", id);
		return NULL;
	}
	defer_reply(q, k, handle, id);
	json_t *n = json_object_get(args, "name");
	if (n)
		snprintf(q->name, sizeof q->name, "%s", json_string_value(n));
	q->op = stop ? CTL_OP_STOP : CTL_OP_SAVE;
	q->save = stop && save;
	wk_ctl__enqueue(c, q);
	return NULL;
}

/* remat-costs: the cost table as of the last step */
HANDLER(cmd_costs)
{
	UNUSED_ARGS;
	const eng_model *m = &c->tr->model;
	json_t *r = json_pack("{s:o,s:i}", "sections",
		eng_costs_json(&c->mem.costs, &m->cfg, m->B, m->T, m->chunk_rows), "step",
		c->run.step);
	if (r)
		json_object_set_new(r, "probing_until",
			c->remat.probe_until ? json_integer(c->remat.probe_until) : json_null());
	return r;
}

/* A change only a backend that times its sections measures for (the cpu's costs), and none
 * while a probe runs. */
static wk_ctl_cmd *cpu_change(struct wk_ctl *c, ctl_conn *k, json_t *id, const char *what)
{
	char desc[PROTO_DESC_LEN];
	if (!eng_backend_has_sections(c->tr->be)) {
		snprintf(desc, sizeof desc, "%s runs on device cpu only for now (the GPU model "
			 "does not measure its sections' costs)", what);
		wk_ctl__send_error(k, PROTO_ERR_INVALID_STATE, desc, id);
		return NULL;
	}
	return probing(c, k, id) ? NULL : change_new(c, k, id);
}

/* remat-profile: the next PROTO_PROFILE_STEPS(rounds) steps cycle every section through
 * its modes */
HANDLER(cmd_profile)
{
	UNUSED_ARGS;
	json_t *n = json_object_get(args, "rounds");
	int rounds = n ? (int)json_integer_value(n) : PROTO_PROFILE_ROUNDS;
	wk_ctl_cmd *q = cpu_change(c, k, id, "remat-profile");
	if (!q)
		return NULL;
	q->op = CTL_OP_PROFILE;
	q->rounds = rounds;
	c->remat.probe_until = applies_at(c) + PROTO_PROFILE_STEPS(rounds) - 1;
	wk_ctl__enqueue(c, q);
	return json_pack("{s:i,s:i,s:i}", "applies_at_step", applies_at(c), "until_step",
		c->remat.probe_until, "rounds", rounds);
}

/* budget device: what this process may hold on the GPU, the device memory free
 * (cudaMemGetInfo at the allocator's last refresh: atomics only, no CUDA call on this
 * thread) and its own arenas. */
static int device_budget(struct wk_ctl *c, size_t *bytes, char *desc, size_t len)
{
	eng_device_mem ds;
	if (c->tr->be->ops->tracked_host) {
		snprintf(desc, len, "budget device: the job runs on device cpu, whose memory is "
			 "the host's (give a size, or cgroup)");
		return -1;
	}
	eng_backend_device_mem(&ds);
	if (!ds.device_total) {
		snprintf(desc, len, "budget device: the device's free memory is not known yet");
		return -1;
	}
	*bytes = ds.device_free + ds.reserved;
	return 0;
}

/* remat-auto: the memory controller on a budget (bytes, the worker's cgroup, the GPU's
 * memory), or off */
HANDLER(cmd_auto)
{
	UNUSED_ARGS;
	char desc[PROTO_DESC_LEN];
	eng_err err = {0};
	json_t *b = json_object_get(args, "budget_bytes");
	const char *src = json_string_value(json_object_get(args, "budget"));
	size_t bytes = 0;
	if (!b == !src) {
		wk_ctl__send_error(k, PROTO_ERR_INVALID_PARAMETER, "give 'budget_bytes' or "
				    "'budget' (cgroup, device or off), one of the two", id);
		return NULL;
	}
	if (src && !strcmp(src, "device") && device_budget(c, &bytes, desc, sizeof desc) < 0) {
		wk_ctl__send_error(k, PROTO_ERR_INVALID_STATE, desc, id);
		return NULL;
	}
	if (src && !strcmp(src, "cgroup") && !c->tr->be->ops->tracked_host) {
		wk_ctl__send_error(k, PROTO_ERR_INVALID_STATE, "budget cgroup: a cgroup limits host "
				    "memory, and the job's is the GPU's (give a size, or device)", id);
		return NULL;
	}
	if (b)
		bytes = (size_t)json_integer_value(b);
	else if (!strcmp(src, "cgroup") && eng_cgroup_limit(eng_cgroup_root(),
						  eng_cgroup_proc(), &bytes, &err) < 0) {
		snprintf(desc, sizeof desc, "budget cgroup: %.400s", err.msg);
		wk_ctl__send_error(k, PROTO_ERR_INVALID_STATE, desc, id);
		return NULL;
	}
	if (b && !bytes) {
		wk_ctl__send_error(k, PROTO_ERR_INVALID_PARAMETER, "'budget_bytes' must be above 0 "
				    "('budget': \"off\" turns the controller off)", id);
		return NULL;
	}
	if (bytes && c->mem.memfig.least && bytes < c->mem.memfig.least) {
		snprintf(desc, sizeof desc, "no policy fits a budget of %.1f MiB: the least any "
			 "needs is %.1f MiB of process memory (every block full and the head chunked,"
			 " with %.1f MiB held whatever the policy); nothing changed",
			 bytes / 1048576.0, c->mem.memfig.least / 1048576.0,
			 c->mem.memfig.fixed / 1048576.0);
		wk_ctl__send_error(k, PROTO_ERR_INVALID_PARAMETER, desc, id);
		return NULL;
	}
	wk_ctl_cmd *q = probing(c, k, id) ? NULL : change_new(c, k, id);
	if (!q)
		return NULL;
	q->op = CTL_OP_AUTO;
	q->budget = bytes; /* 0: off */
	q->source = !src || !strcmp(src, "off") ? ENG_BUDGET_SIZE : !strcmp(src, "cgroup") ?
		ENG_BUDGET_CGROUP : ENG_BUDGET_DEVICE;
	q->budget_change = 1;
	wk_ctl__enqueue(c, q);
	c->remat.auto_queued++; /* what a remat-set after it is checked against */
	c->remat.auto_next = bytes;
	return json_pack("{s:i,s:o,s:o}", "applies_at_step", applies_at(c), "budget_bytes",
		bytes ? json_integer((json_int_t)bytes) : json_null(), "least_bytes",
		c->mem.memfig.least ? json_integer((json_int_t)c->mem.memfig.least) : json_null());
}

/* job-eval: the validation loss at the next step boundary, answered once computed */
HANDLER(cmd_eval)
{
	UNUSED_ARGS;
	if (!eng_data_opened(&c->tr->val)) {
		wk_ctl__send_error(k, PROTO_ERR_INVALID_STATE, "the job has no data.val to "
							      "evaluate on", id);
		return NULL;
	}
	wk_ctl_cmd *q = change_new(c, k, id);
	if (!q)
		return NULL;
	defer_reply(q, k, handle, id);
	q->op = CTL_OP_EVAL;
	wk_ctl__enqueue(c, q);
	return NULL;
}

/* job-set: the values are proto's to check (proto_hparam_check); what goes together is
 * the trainer's (eng_trainer_set_check: warmup and min_lr_frac shape a new schedule,
 * eval.every needs data.val, save.every save.dir). */
HANDLER(cmd_set)
{
	UNUSED_ARGS;
	const json_t *set = json_object_get(args, "set");
	eng_err err;
	if (eng_trainer_set_check(c->tr, set, &err) < 0) {
		wk_ctl__send_error(k, PROTO_ERR_INVALID_PARAMETER, err.msg, id);
		return NULL;
	}
	wk_ctl_cmd *q = change_new(c, k, id);
	if (!q)
		return NULL;
	q->op = CTL_OP_SET;
	q->set = json_deep_copy(set);
	q->change = ++c->remat.changes;
	wk_ctl__enqueue(c, q);
	return json_pack("{s:i,s:i,s:O}", "applies_at_step", applies_at(c), "change", q->change,
		"set", set);
}

/* What a worker answers, and whether it needs the trainer (while the job starts, those
 * requests are kept and answered before the first step: keep_early). A command without a
 * handler is rematd's. */
static const struct {
	json_t *(*fn)(struct wk_ctl *c, ctl_conn *k, int handle, const proto_command *cmd,
		json_t *args, json_t *id);
	int needs_trainer;
} handlers[PROTO_CMD_COUNT] = {
	[PROTO_CMD_DAEMON_INFO] = {cmd_info, 0},
	[PROTO_CMD_JOB_LIST] = {cmd_list, 0},
	[PROTO_CMD_JOB_STATUS] = {cmd_status, 0},
	[PROTO_CMD_SUBSCRIBE] = {cmd_subscribe, 0},
	[PROTO_CMD_UNSUBSCRIBE] = {cmd_subscribe, 0},
	[PROTO_CMD_MEM_STATS] = {wk_ctl__cmd_mem, 1},
	[PROTO_CMD_MEM_RESET_PEAK] = {wk_ctl__cmd_mem_reset_peak, 1},
	[PROTO_CMD_REMAT_GET] = {cmd_remat_get, 1},
	[PROTO_CMD_REMAT_PLAN] = {cmd_plan, 1},
	[PROTO_CMD_REMAT_SET] = {cmd_remat_set, 1},
	[PROTO_CMD_JOB_PAUSE] = {cmd_pause, 1},
	[PROTO_CMD_JOB_RESUME] = {cmd_resume, 1},
	[PROTO_CMD_JOB_STOP] = {cmd_deferred, 1},
	[PROTO_CMD_CKPT_SAVE] = {cmd_deferred, 1},
	[PROTO_CMD_REMAT_COSTS] = {cmd_costs, 1},
	[PROTO_CMD_REMAT_PROFILE] = {cmd_profile, 1},
	[PROTO_CMD_REMAT_AUTO] = {cmd_auto, 1},
	[PROTO_CMD_REMAT_MEMLOG] = {wk_ctl__cmd_memlog, 1},
	[PROTO_CMD_JOB_EVAL] = {cmd_eval, 1},
	[PROTO_CMD_JOB_SET] = {cmd_set, 1},
};

json_t *wk_ctl__dispatch(struct wk_ctl *c, ctl_conn *k, int handle, const char *name,
	json_t *args, json_t *id)
{
	char desc[PROTO_DESC_LEN];
	const proto_command *cmd = proto_command_find(name);
	if (!cmd || !handlers[cmd->id].fn) {
		snprintf(desc, sizeof desc, "this is a worker (remat-train); %.64s is rematd's",
			name);
		wk_ctl__send_error(k, PROTO_ERR_COMMAND_NOT_FOUND, desc, id);
		return NULL;
	}
	if (handlers[cmd->id].needs_trainer && !c->tr)
		return keep_early(c, k, handle, name, args, id);
	return handlers[cmd->id].fn(c, k, handle, cmd, args, id);
}
