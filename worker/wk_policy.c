/* wk_policy.c - the policy of each step (see wk_run_int.h): a probe of the sections'
 * costs (remat-profile), the memory controller (remat-auto, remat.budget) and a policy the
 * user asked for, fitted to the budget before the step; after it, what changed its policy,
 * said (REMAT_APPLIED, REMAT_FAILED, REMAT_AUTO), and its measured peak. Not here: the
 * controller's decision itself (engine/run/eng_auto.c), laying a policy out and the retry
 * when memory refuses it (engine/run/eng_train_fit.c).
 */
#include "wk_run_int.h"

#include <stdio.h>
#include <string.h>

#include "eng_mem.h"
#include "proto.h"
#include "wk_metrics.h"

static void print_policy(const eng_trainer *tr, int json, int from_step)
{
	if (json)
		return;
	char buf[8192];
	eng_policy_format(&tr->policy, buf, sizeof buf);
	printf("remat: from step %d: %s\n", from_step, buf);
}

/* The next PROTO_PROFILE_STEPS(rounds) steps cycle every section through its modes, so
 * that each cell of the cost table gets samples: in pattern k of a round (each held
 * PROTO_PROFILE_HOLD steps: the step that changes the policy is no sample), block i runs
 * mode (i + k) % 3 (off, selective, full) and the head chunked at k == 1, off else. The
 * numbers do not change: no mode changes a bit of them. */
void wk_policy_probe(eng_trainer *tr, wk_ctl *c, wk_run_ctl *rc, int rounds)
{
	if (!rc->probe_left)
		rc->probe_base = tr->policy;
	rc->probe_left = PROTO_PROFILE_STEPS(rounds);
	rc->probe_k = 0;
	wk_ctl_set_probe(c, tr->step + rc->probe_left);
}

/* A policy asked for from step `at` on: the next step's, once fitted (policy_want). A
 * remat-set or a schedule entry is told when it cannot be applied. */
void wk_policy_ask(wk_run_ctl *rc, const eng_policy *p, int at, proto_cause cause,
	int change)
{
	rc->pending = *p;
	rc->has_pending = 1;
	rc->pending_at = at;
	rc->pending_said = cause == PROTO_CAUSE_SET || cause == PROTO_CAUSE_SCHEDULE;
	rc->pending_cause = cause;
	rc->pending_change = change;
	if (rc->autoc.on) /* the controller holds it while it fits */
		rc->pinned = 1;
}

/* The policy back to what it was, the probe over. */
static void probe_end(eng_trainer *tr, wk_ctl *c, wk_run_ctl *rc)
{
	rc->probe_left = 0;
	wk_ctl_set_probe(c, 0);
	if (!eng_policy_equal(&tr->policy, &rc->probe_base))
		wk_policy_ask(rc, &rc->probe_base, tr->step + 1, PROTO_CAUSE_PROFILE, 0);
}

/* Before a step: the probe's policy for it, when a probe runs. */
static void probe_want(const eng_trainer *tr, const wk_run_ctl *rc, eng_policy *p)
{
	*p = tr->policy;
	int k = rc->probe_k / PROTO_PROFILE_HOLD % 3;
	for (int i = 0; i < p->n_layer; i++)
		p->block[i] = (eng_mode)((i + k) % 3);
	p->head = k == 1 ? ENG_MODE_CHUNKED : ENG_MODE_OFF;
}

/* After a step of the probe. */
void wk_policy_probe_next(eng_trainer *tr, wk_ctl *c, wk_run_ctl *rc, int json)
{
	rc->probe_k++;
	(void)json;
	if (--rc->probe_left == 0)
		probe_end(tr, c, rc);
}

/* The run's fixed bytes as the controller counts them: the tracked fixed part, and on
 * the CPU the process's untracked term. */
static size_t fixed_bytes(const eng_trainer *tr)
{
	return eng_trainer_fixed_bytes(tr, NULL) + eng_trainer_untracked(tr);
}

/* What the control thread checks remat-set and remat-auto against: the memory terms now
 * and the controller's room. */
void wk_policy_publish_memory(const eng_trainer *tr, wk_ctl *c, const wk_run_ctl *rc)
{
	const eng_model *m = &tr->model;
	wk_ctl_memfig f = {0};
	f.tracked_fixed = eng_trainer_fixed_bytes(tr, NULL);
	f.fixed = fixed_bytes(tr);
	f.limit = tr->be->ops->tracked_host ? tr->spec.mem_limit : 0;
	f.room = rc->autoc.on ? eng_auto_room(&rc->autoc) : 0;
	f.least = eng_plan_least(&m->cfg, m->B, m->T, m->chunk_rows, f.fixed, NULL);
	f.snapshot = eng_trainer_snapshot_bytes(tr);
	f.save_ms = rc->save_ms;
	f.stall_ms = rc->stall_ms;
	wk_ctl_set_memfig(c, &f);
}

void wk_policy_publish_auto(wk_ctl *c, const wk_run_ctl *rc)
{
	wk_ctl_auto a = {rc->autoc.budget, rc->auto_src, rc->pinned};
	wk_ctl_set_auto(c, &a);
}

/* The controller on a budget from `step` on, or off (budget 0, for why). */
void wk_policy_auto(wk_ctl *c, wk_run_ctl *rc, size_t budget, eng_budget_src src, int step,
	const char *why)
{
	int was = rc->autoc.on;
	eng_err err;
	eng_auto_set(&rc->autoc, budget);
	rc->auto_src = src;
	if (rc->has_cg)
		eng_auto_cg_close(&rc->cg);
	/* under a cgroup's limit the step's peak is the cgroup's too (memory.current, and
	 * memory.peak over the step where the kernel has it) */
	rc->has_cg = budget && src == ENG_BUDGET_CGROUP && eng_auto_cg_open(&rc->cg,
		eng_cgroup_root(), eng_cgroup_proc(), &err) == 0;
	if (budget && src == ENG_BUDGET_CGROUP && !rc->has_cg)
		fprintf(stderr, "remat-train: remat-auto: %s: the process's own memory is measured "
				"instead\n", err.msg);
	rc->pinned = 0;
	wk_policy_publish_auto(c, rc);
	if (was && !budget)
		wk_ctl_event_auto(c, step, json_null(), why, 0, 0, rc->last_peak);
}

/* What a save without a snapshot adds to a step, in the costs' unit (ms when the rate is
 * known): the write the step waits for, over save.every steps; 0 while unknown. */
static double live_save_cost(const eng_trainer *tr, const wk_run_ctl *rc, double rate)
{
	return rate > 0 ? eng_plan_live_save_cost(rc->save_ms, tr->spec.save_every) : 0.0;
}

/* The user's policy held under the budget: 1 with it in *next while its predicted peak
 * fits; 0 when it no longer does (the hold ends, and why says so). */
static int pin_holds(const eng_trainer *tr, wk_run_ctl *rc, eng_policy *next)
{
	const eng_model *m = &tr->model;
	eng_plan pl;
	*next = rc->has_pending ? rc->pending : tr->policy;
	eng_plan_policy(&m->cfg, m->B, m->T, m->chunk_rows, next, &pl);
	size_t pred = fixed_bytes(tr) + pl.peak_bytes, room = eng_auto_room(&rc->autoc);
	size_t seen = eng_policy_equal(&tr->policy, next) ? rc->last_peak : 0;
	if (pred <= room && seen <= room) {
		snprintf(rc->auto_why, sizeof rc->auto_why, "the policy remat set asked for, held "
			 "within the budget of %.1f MiB", rc->autoc.budget / 1048576.0);
		return 1;
	}
	rc->pinned = 0;
	snprintf(rc->pin_why, sizeof rc->pin_why, "the policy remat set asked for (%.1f MiB "
		 "predicted, %.1f MiB measured) does not fit the budget of %.1f MiB (%.1f MiB "
		 "usable): the controller's choice instead", pred / 1048576.0, seen / 1048576.0,
		 rc->autoc.budget / 1048576.0, room / 1048576.0);
	return 0;
}

/* The first step under a budget runs the policy of the least memory: what the process
 * holds beyond the tracked bytes (the kernels' buffers and code for the shapes a policy
 * uses) is known only once a step has run, and the start is kept under the budget too.
 * The controller moves to a faster policy after it, by its usual rules. */
static int safe_start(const eng_trainer *tr, wk_run_ctl *rc, eng_policy *next)
{
	const eng_model *m = &tr->model;
	eng_plan_least(&m->cfg, m->B, m->T, m->chunk_rows, fixed_bytes(tr), next);
	rc->autoc.last_change = tr->step + 1;
	rc->autoc.held = 0;
	snprintf(rc->auto_why, sizeof rc->auto_why, "budget %.1f MiB: the least memory first, "
		 "until a step has measured what the process holds beyond its counted memory",
		 rc->autoc.budget / 1048576.0);
	return !eng_policy_equal(next, &tr->policy);
}

/* Before a step: the controller's decision, on the run's fixed bytes (the untracked term
 * included), a save's snapshot as an optional term, its measured costs and what the
 * system refused: 1 with the policy it wants in *next (its reason in rc), 0 to keep the
 * policy. */
static int auto_want(const eng_trainer *tr, wk_run_ctl *rc, eng_policy *next)
{
	eng_plan_costs pc;
	eng_plan_query q;
	eng_plan pred;
	if (rc->pinned && pin_holds(tr, rc, next))
		return !eng_policy_equal(next, &tr->policy);
	if (!tr->last_ms) /* no step measured the process yet */
		return safe_start(tr, rc, next);
	/* a refusal's total is tracked bytes: the process's is that and the untracked */
	size_t cap = tr->mem_cap ? tr->mem_cap + eng_trainer_untracked(tr) : 0;
	double rate = eng_trainer_query(tr, fixed_bytes(tr), cap, &pc, &q);
	q.optional = eng_trainer_snapshot_bytes(tr);
	q.optional_cost = live_save_cost(tr, rc, rate);
	/* the last step's peak (0 when that step began with a change: step_peak) */
	size_t seen = rc->last_peak;
	int r = eng_auto_decide(&rc->autoc, &q, &tr->policy, seen, tr->step + 1, next,
		&pred, rc->auto_why, sizeof rc->auto_why); /* its plan: said after the step */
	if (r < 0)
		fprintf(stderr, "remat-train: remat-auto: %s: the least there is instead\n",
			rc->auto_why);
	return r != 0;
}

/* The next step's policy, the one way a policy reaches the trainer (which lays it out at
 * the step's start, fitted to memory.limit and what the system refused): a probe's, the
 * controller's (which holds a policy the user asked for while it fits its budget), or the
 * one asked for; 0 to keep the policy there is. *by_auto: the controller chose. */
int wk_policy_want(const eng_trainer *tr, wk_run_ctl *rc, eng_policy *want, int *by_auto)
{
	*by_auto = 0;
	if (rc->has_cg) /* the step's window on the cgroup's peak begins */
		eng_auto_cg_begin(&rc->cg);
	if (rc->probe_left) {
		probe_want(tr, rc, want);
		return 1;
	}
	if (rc->autoc.on)
		return *by_auto = auto_want(tr, rc, want);
	if (!rc->has_pending)
		return 0;
	*want = rc->pending;
	return 1;
}

/* A budget told while the run is paused (rematd's pool squeezing a paused job): the
 * next step's policy laid out now, within it, so that the memory is given back before the
 * run resumes. Said with REMAT_AUTO for that step whether the policy changed or not (the
 * reason begins "paused"): rematd takes it as the shrink done. */
void wk_policy_paused(eng_trainer *tr, wk_ctl *c, wk_run_ctl *rc)
{
	eng_policy next, before = tr->policy;
	eng_err err = {0};
	eng_plan pred;
	const eng_model *m = &tr->model;
	int by_auto, step = tr->step + 1;
	char why[sizeof rc->auto_why + 96];
	if (!rc->autoc.on)
		return;
	if (wk_policy_want(tr, rc, &next, &by_auto) && eng_trainer_lay_out_now(tr, &next,
			&err) < 0)
		fprintf(stderr, "remat-train: paused: %s: the next step lays its policy out\n",
			err.msg);
	if (!eng_policy_equal(&before, &tr->policy))
		wk_ctl_policy_applied(c, step, PROTO_CAUSE_CONTROLLER, 0);
	snprintf(why, sizeof why, "paused: laid out now within the budget of %.1f MiB (%s)",
		rc->autoc.budget / 1048576.0, eng_policy_equal(&before, &tr->policy) ?
		"the policy fits it" : rc->auto_why);
	eng_plan_policy(&m->cfg, m->B, m->T, m->chunk_rows, &tr->policy, &pred);
	wk_ctl_event_auto(c, step, eng_policy_json(&tr->policy), why, rc->autoc.budget,
		fixed_bytes(tr) + pred.peak_bytes, rc->last_peak);
}

/* A policy asked for and not applied: the asker is told (REMAT_FAILED), and stderr. */
static void pending_failed(eng_trainer *tr, wk_ctl *c, wk_run_ctl *rc, int step)
{
	char why[sizeof rc->auto_why + ENG_ERR_LEN + 64], text[8192];
	const eng_model *m = &tr->model;
	eng_plan pl;
	eng_plan_policy(&m->cfg, m->B, m->T, m->chunk_rows, &rc->pending, &pl);
	size_t tracked = eng_trainer_fixed_bytes(tr, NULL) + pl.peak_bytes;
	if (tr->oom_why[0])
		snprintf(why, sizeof why, "out of memory: %s", tr->oom_why);
	else if (rc->autoc.on)
		snprintf(why, sizeof why, "%s", rc->pin_why[0] ? rc->pin_why : rc->auto_why);
	else if (tr->be->ops->tracked_host && tr->spec.mem_limit && tracked > tr->spec.mem_limit)
		snprintf(why, sizeof why, "it needs %.1f MiB, over memory.limit %.1f MiB",
			tracked / 1048576.0, tr->spec.mem_limit / 1048576.0);
	else
		snprintf(why, sizeof why, "memory refused it earlier in the run");
	eng_policy_format(&rc->pending, text, sizeof text);
	fprintf(stderr, "remat-train: step %d: policy %s not applied: %s\n", step, text, why);
	wk_ctl_event_remat_failed(c, rc->pending_at > step ? rc->pending_at : step,
		eng_policy_json(&rc->pending), eng_policy_json(&tr->policy), why,
		rc->pending_cause, rc->pending_change);
}

/* What changed the policy of step `step` from the one before (a policy asked for that it
 * took is the asker's: *change its number) */
static proto_cause change_cause(const wk_run_ctl *rc, int oom, int took, int by_auto,
	int step, int *change)
{
	*change = took && !oom ? rc->pending_change : 0;
	if (oom)
		return PROTO_CAUSE_OOM;
	if (took)
		return rc->pending_cause;
	if (rc->probe_left)
		return PROTO_CAUSE_PROFILE;
	if (by_auto || step > rc->start_step + 1)
		return PROTO_CAUSE_CONTROLLER;
	return PROTO_CAUSE_START;
}

/* After a step: what changed its policy, said; the run's first step says the policy it
 * started with. `asked` is what was wanted (NULL: the policy of the step before), `before`
 * that policy. A policy asked for is consumed: said applied (REMAT_APPLIED) or not
 * (REMAT_FAILED). */
void wk_policy_said(eng_trainer *tr, wk_ctl *c, wk_run_ctl *rc, const eng_policy *before,
	const eng_policy *asked, int by_auto, int step, int json)
{
	char why[sizeof rc->auto_why + ENG_ERR_LEN];
	int oom = tr->oom_why[0] != '\0', first = step == rc->start_step + 1, told = 0, took = 0;
	if (oom) {
		char buf[8192];
		eng_policy_format(&tr->policy, buf, sizeof buf);
		fprintf(stderr, "remat-train: step %d: out of memory (%s): %s instead\n", step,
			tr->oom_why, buf);
	}
	int same = eng_policy_equal(&tr->policy, before), change;
	if (rc->has_pending && !rc->probe_left) {
		took = eng_policy_equal(&tr->policy, &rc->pending);
		if (rc->pending_said && !took)
			pending_failed(tr, c, rc, step);
		else if (rc->pending_said && same) /* asked for the policy there was: it is */
			told = 1;
	}
	proto_cause cause = change_cause(rc, oom, took, by_auto, step, &change);
	if (told || (same && first))
		wk_ctl_policy_applied(c, step, told ? cause : PROTO_CAUSE_START, change);
	if (rc->has_pending && !rc->probe_left) {
		rc->has_pending = 0;
		wk_policy_publish_auto(c, rc); /* a hold may have ended */
	}
	if (same)
		return;
	json_t *d = json_pack("{s:i,s:o,s:s}", "step", step, "policy", eng_policy_json(&tr->policy),
		"cause", proto_cause_name(cause));
	json_object_set_new(d, "change", change ? json_integer(change) : json_null());
	wk_metrics_change(rc->mx, PROTO_EV_REMAT_APPLIED, d); /* what a plot marks */
	json_decref(d);
	wk_ctl_policy_applied(c, step, cause, change);
	print_policy(tr, json, step);
	if (!rc->autoc.on)
		return;
	if (oom)
		snprintf(why, sizeof why, "out of memory: %s", tr->oom_why);
	else if (by_auto && asked && eng_policy_equal(&tr->policy, asked))
		snprintf(why, sizeof why, "%s", rc->auto_why);
	else
		snprintf(why, sizeof why, "the policy does not fit what the system refused");
	eng_plan pred;
	const eng_model *m = &tr->model;
	eng_plan_policy(&m->cfg, m->B, m->T, m->chunk_rows, &tr->policy, &pred);
	wk_ctl_event_auto(c, step, eng_policy_json(&tr->policy), why, rc->autoc.budget,
		fixed_bytes(tr) + pred.peak_bytes, rc->last_peak);
}

/* A step's measured peak: the process's resident bytes on the CPU (where known), and
 * under a budget from the cgroup the cgroup's count if more; on cuda the device's tracked
 * peak and what else its used memory held at the step's end. */
static size_t measured_peak(const eng_trainer *tr, wk_run_ctl *rc, const eng_step_stats *st)
{
	size_t m = !tr->be->ops->tracked_host ? st->peak_bytes + st->untracked_bytes :
		st->rss_peak ? st->rss_peak : st->peak_bytes;
	size_t cg = rc->has_cg ? eng_auto_cg_peak(&rc->cg) : 0;
	return cg > m ? cg : m;
}

/* The last step's measured peak as the controller weighs it: 0 (nothing known) for a step
 * that began with a policy change, whose window opened on the layout before it. */
size_t wk_policy_step_peak(const eng_trainer *tr, wk_run_ctl *rc, const eng_step_stats *st,
	const eng_policy *before)
{
	size_t m = measured_peak(tr, rc, st);
	return eng_policy_equal(before, &tr->policy) ? m : 0;
}
