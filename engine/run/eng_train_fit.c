/* eng_train_fit.c - memory: what fits, and out of memory as a retry (eng_train.h's
 * eng_trainer_step_as): the planner's peak of a policy, the bound a policy must fit after
 * refusals, the fastest policy under it, laying a policy out. Not here: the step that
 * retries (eng_train_step.c), the controller's decisions under a budget (eng_auto.c). */
#include "eng_train_int.h"

#include <stdio.h>
#include <string.h>

#include "eng_mem.h"

#define FIT_SLACK 0.03 /* of the bound, less each refusal: the plan misses chunk alignment */
#define FIT_TRIES 4    /* refusals in one step before the run gives up */

/* The bytes of all tracked categories held now, as the backend's allocator counts them
 * (the host's, or with device cuda the device's). */
static size_t held_bytes(const eng_trainer *tr)
{
	size_t cur[ENG_MEM_NCAT], total;
	tr->be->ops->mem_now(tr->be, cur, &total);
	return total;
}

int eng_train_laid_out(const eng_trainer *tr)
{
	int L = tr->model.cfg.n_layer;
	return tr->be->ops->policy(tr->be)->n_layer == L;
}

size_t eng_trainer_predicted_peak(const eng_trainer *tr, const eng_policy *p)
{
	const eng_model *m = &tr->model;
	eng_plan pl;
	eng_plan_policy(&m->cfg, m->B, m->T, m->chunk_rows, p, &pl);
	return eng_trainer_fixed_bytes(tr, NULL) + pl.peak_bytes;
}

/* What a policy must fit in after `tries` refusals: memory.limit (bounding the host's
 * tracked allocator: device cpu) or the least
 * total a refusal happened at, whichever is smaller, less FIT_SLACK a try; 0: unbounded. */
static size_t fit_bound(const eng_trainer *tr, int tries)
{
	size_t b = tr->be->ops->tracked_host ? tr->spec.mem_limit : 0;
	if (tr->mem_cap && (!b || tr->mem_cap < b))
		b = tr->mem_cap;
	return (size_t)((double)b * (1.0 - FIT_SLACK * tries));
}

double eng_trainer_query(const eng_trainer *tr, size_t fixed, size_t bound, eng_plan_costs *pc,
	eng_plan_query *q)
{
	const eng_model *m = &tr->model;
	double rate = eng_costs_rate(&m->cfg, m->B, m->T, m->chunk_rows, &tr->last_policy,
		tr->last_ms);
	eng_costs_plan(&tr->costs, &m->cfg, m->B, m->T, m->chunk_rows, rate, pc, NULL);
	eng_plan_query qq = {&m->cfg, m->B, m->T, m->chunk_rows, fixed, pc, bound, 0, 0.0};
	*q = qq;
	return rate;
}

/* The fastest policy whose predicted peak fits bound, on the run's measured costs (the
 * analytic FLOPs where there are none): 0; or -1 when none does, *p then the policy of the
 * least memory. The least any policy needs goes to *need. */
static int fit_policy(const eng_trainer *tr, size_t bound, eng_policy *p, size_t *need)
{
	eng_plan_costs pc;
	eng_plan_query q;
	eng_plan pl;
	eng_trainer_query(tr, eng_trainer_fixed_bytes(tr, NULL), bound, &pc, &q);
	int r = eng_plan_search(&q, p, &pl);
	*need = pl.peak_bytes;
	return r;
}

/* The run cannot go on: not even the policy of the least memory fits. `why` is the last
 * refusal ("" when memory.limit is known to be too small without trying). */
static int cannot_fit(const eng_trainer *tr, const char *why, eng_err *err)
{
	eng_policy least;
	size_t need, fixed = eng_trainer_fixed_bytes(tr, NULL);
	char what[320], msg[ENG_ERR_LEN];
	fit_policy(tr, 0, &least, &need);
	eng_train_need_text(need, fixed, what, sizeof what);
	snprintf(msg, sizeof msg, "%s", why);
	if (!why[0])
		return eng_err_nomem(err, "memory.limit %.1f MiB is too small: this run needs at "
					  "least %s", tr->spec.mem_limit / 1048576.0, what);
	return eng_err_nomem(err, "out of memory: this run needs at least %s, and even that was "
				  "refused (%.300s)", what, msg);
}

/* After an allocation was refused with policy p laid out or being laid out: the bound
 * learnt from it (what the refused allocation would have brought the total to), one OOM
 * retry counted, and in *p the fastest policy under the new bound, or the least there is.
 * -1 after FIT_TRIES refusals in this step. */
int eng_train_on_refusal(eng_trainer *tr, eng_policy *p, int *tries, eng_err *err)
{
	size_t at = eng_mem_take_refused(), need; /* 0: a refusal no allocator counted */
	if (at && (!tr->mem_cap || at < tr->mem_cap))
		tr->mem_cap = at;
	tr->oom_retries++;
	if (++*tries >= FIT_TRIES)
		return cannot_fit(tr, err->msg, err);
	snprintf(tr->oom_why, sizeof tr->oom_why, "%s", err->msg);
	fit_policy(tr, *tries >= FIT_TRIES - 1 ? 0 : fit_bound(tr, *tries), p, &need);
	return 0;
}

/* Lays policy p out for the next step; when memory will not have it, the fastest policy
 * that fits what is known instead (*p then the one laid out, each policy given up an OOM
 * retry): a policy predicted over memory.limit or over a refusal's total is given up
 * untried, one refused is given up after the try. The policy of the least memory is always
 * tried, unless memory.limit is known to be too small for it. `tries` counts this step's
 * refusals; -1 when there were too many, or on another error. */
int eng_train_lay_out(eng_trainer *tr, eng_policy *p, int *tries, eng_err *err)
{
	eng_policy least;
	size_t need;
	fit_policy(tr, 0, &least, &need);
	if (tr->be->ops->tracked_host && tr->spec.mem_limit && need > tr->spec.mem_limit)
		return cannot_fit(tr, "", err);
	for (;;) {
		size_t bound = fit_bound(tr, *tries);
		if (bound && !eng_policy_equal(p, &least) &&
			eng_trainer_predicted_peak(tr, p) > bound) {
			fit_policy(tr, bound, p, &need); /* the least when nothing fits */
			tr->oom_retries++;
		}
		if (eng_train_laid_out(tr) && eng_policy_equal(p, &tr->policy))
			return 0;
		if (eng_trainer_set_policy(tr, p, err) == 0)
			return 0;
		if (err->kind != ENG_ERR_NOMEM || eng_train_on_refusal(tr, p, tries, err) < 0)
			return -1;
	}
}

int eng_trainer_lay_out_now(eng_trainer *tr, eng_policy *p, eng_err *err)
{
	int tries = 0;
	if (!eng_train_laid_out(tr))
		return 0;
	if (eng_train_lay_out(tr, p, &tries, err) < 0)
		return -1;
	tr->relaid = 1;
	return 0;
}

int eng_trainer_check_policy(const eng_trainer *tr, const eng_policy *p, eng_err *err)
{
	return eng_policy_check_device(tr->spec.device, p, err);
}

int eng_trainer_set_policy(eng_trainer *tr, const eng_policy *p, eng_err *err)
{
	if (eng_trainer_check_policy(tr, p, err) < 0)
		return -1;
	if (tr->be->ops->set_policy(tr->be, p, err) < 0)
		return -1;
	tr->policy = *p; /* what the control thread and the progress lines read */
	if (tr->mem_cap && held_bytes(tr) >= tr->mem_cap)
		tr->mem_cap = 0; /* more than a refusal's total fits now: that memory came back */
	return 0;
}
