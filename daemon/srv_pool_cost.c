/* srv_pool_cost.c - what a share of rematd's pool costs a job (see srv_pool.h): each
 * section's measured milliseconds a mode adds to its step (its worker's remat-costs, asked
 * with its figures every SRV_FIGURES_MS), and where a mode has not run yet its analytic
 * extra FLOPs at the job's measured pace. The division weighs shares in these
 * milliseconds. */
#include "srv_pool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "srv_job.h"

/* Section i's mode k (blocks: off, selective, full; the head: off, chunked). */
static eng_mode mode_of(int i, int L, int k)
{
	return i < L ? (eng_mode)k : k ? ENG_MODE_CHUNKED : ENG_MODE_OFF;
}

void srv_pool_costs(srv_job *job, const json_t *ret)
{
	srv_pool_job *pj = &job->pool;
	const json_t *secs = json_object_get(ret, "sections"), *s;
	int L = job->info ? job->info->cfg.n_layer : 0;
	size_t i;
	if (!job->srv->pool.on || pj->least <= 0 || L < 1 || L > ENG_MAX_LAYERS ||
		json_array_size(secs) != (size_t)L + 1)
		return;
	if (!pj->cost_ms && !(pj->cost_ms = malloc((size_t)(L + 1) * sizeof *pj->cost_ms)))
		return;
	json_array_foreach(secs, i, s) {
		const json_t *modes = json_object_get(s, "modes"), *a;
		for (int k = 0; k < 3; k++) {
			const char *m = eng_mode_name(mode_of((int)i, L, k));
			a = k < 2 || (int)i < L ? json_object_get(json_object_get(modes, m),
				"added_ms") : NULL;
			/* noise can make a mode a hair cheaper than off: none is */
			pj->cost_ms[i][k] = json_is_number(a) ?
				(float)fmax(json_number_value(a), 0.0) : NAN;
		}
	}
}

void srv_pool__plan_costs(const srv_job *job, const eng_plan_query *q, double rate,
	eng_plan_costs *pc)
{
	const srv_pool_job *pj = &job->pool;
	int L = q->cfg->n_layer;
	memset(pc, 0, sizeof *pc);
	for (int i = 0; i <= L; i++)
		for (int k = 0; k < (i < L ? 3 : 2); k++) {
			eng_plan_section s;
			eng_mode m = mode_of(i, L, k);
			if (i < L)
				eng_plan_block(q->cfg, q->B, q->T, m, &s);
			else
				eng_plan_head(q->cfg, q->B, q->T, q->chunk_rows, m, &s);
			double ms = pj->cost_ms && !isnan(pj->cost_ms[i][k]) ? pj->cost_ms[i][k]
				: s.extra_flops / rate;
			if (i < L)
				pc->block[i][k] = ms;
			else
				pc->head[k] = ms;
		}
}

double srv_pool__cost_ref(const srv_job *job, const eng_plan_query *q, double rate)
{
	eng_plan_costs pc;
	eng_policy full;
	eng_policy_init(&full, q->cfg->n_layer);
	for (int i = 0; i < full.n_layer; i++)
		full.block[i] = ENG_MODE_FULL;
	full.head = ENG_MODE_CHUNKED;
	srv_pool__plan_costs(job, q, rate, &pc);
	return eng_plan_policy_cost(q->cfg, q->B, q->T, q->chunk_rows, &pc, &full);
}

void srv_pool_job_free(srv_job *job)
{
	free(job->pool.cost_ms);
	job->pool.cost_ms = NULL;
}
