/* eng_costs.h - the per-section cost table, measured online.
 *
 * For every block and the head, under each mode it has run: the time its forward, its
 * recompute in backward and its backward took (medians over the last ENG_COSTS_WINDOW
 * steps it ran in that mode, with the sample count), and the bytes it kept. Filled after
 * every step from the model's section timings (eng_model.sec_ms), but for a step that
 * began with a policy change (its new buffers make it slower than the policy's next
 * steps); a probe (remat-profile) runs a few steps with the sections cycled through their
 * modes, two steps a pattern, so that every cell gets samples. Switching modes never changes a bit of the numbers, so measuring by trying is
 * free of any effect on training.
 *
 * Not here: where the samples come from (eng_model.c), the search that uses the costs
 * (eng_plan.c). Device cpu only for now: the GPU model times only its recomputes.
 */
#ifndef ENG_COSTS_H
#define ENG_COSTS_H

#include <jansson.h>
#include <stddef.h>

#include "eng_plan.h"
#include "eng_policy.h"

#define ENG_COSTS_WINDOW 16 /* samples kept per cell and part: the median is over these */
#define ENG_COSTS_MODES 3   /* a block's modes in the table: off, selective, full */

typedef struct eng_cost_cell {
	float ms[3][ENG_COSTS_WINDOW]; /* forward, recompute, backward (ENG_SEC_*), a ring */
	int n;                         /* samples taken, all told */
	size_t saved;                  /* bytes it kept, as measured at the last sample */
} eng_cost_cell;

typedef struct eng_costs {
	int n_layer;
	eng_cost_cell block[ENG_MAX_LAYERS][ENG_COSTS_MODES];
	eng_cost_cell head[2];         /* off, chunked */
	eng_cost_cell rest;            /* ms[0]: a step's time outside its sections (the
					* encoder, the gradient norm, the optimizer) */
} eng_costs;

void eng_costs_init(eng_costs *c, int n_layer);

/* dst = src, copying only the n_layer blocks in use and the head (what a step boundary
 * hands the control thread: a few KiB, not the table's whole capacity). */
void eng_costs_copy(eng_costs *dst, const eng_costs *src);

/* One step's samples under policy p: sec_ms[i][part] for sections 0..L (the head at L),
 * saved[i] the bytes each kept, step_ms the whole step. Offloaded blocks are not
 * recorded. */
void eng_costs_add(eng_costs *c, const eng_policy *p, const double (*sec_ms)[3],
	const size_t *saved, double step_ms);

/* What a step under off takes, from the table: the median time outside the sections plus
 * every section's median under off; 0 while a section has no sample under off. */
double eng_costs_off_step_ms(const eng_costs *c);

/* The cell of section i (i == n_layer: the head) in mode m, or NULL when the table has no
 * such cell (offload; a block mode on the head). */
const eng_cost_cell *eng_costs_cell(const eng_costs *c, int i, eng_mode m);

/* The median of part (ENG_SEC_*) over the samples kept; 0 without one. */
double eng_cost_median(const eng_cost_cell *cell, int part);

/* What each section's mode adds to a step, in milliseconds, for the planner's search:
 * measured where the section has samples in that mode and in off (the sum of its three
 * parts, less off's), else the analytic extra FLOPs at ms_per_flop (the run's measured
 * rate; 0 when unknown: then the FLOPs themselves). measured[i][m] says which, for each
 * block mode m (0..2), the head at i == L (m 0..1). */
void eng_costs_plan(const eng_costs *c, const eng_config *cfg, int B, int T, int chunk_rows,
	double ms_per_flop, eng_plan_costs *out, unsigned char (*measured)[ENG_COSTS_MODES]);

/* Milliseconds per FLOP at which a step of policy p that took step_ms ran (its model and
 * recomputed FLOPs together); 0 when step_ms is not known. */
double eng_costs_rate(const eng_config *cfg, int B, int T, int chunk_rows, const eng_policy *p,
	double step_ms);

/* remat-costs' "sections": for each section, for each mode it has samples in, samples,
 * forward_ms, recompute_ms, backward_ms, saved_bytes, workspace_bytes (the plan's),
 * added_ms (against off, null until both are measured) and ms_per_mib_saved (added_ms per
 * MiB kept less than off; null where nothing is saved) (new reference). */
json_t *eng_costs_json(const eng_costs *c, const eng_config *cfg, int B, int T,
	int chunk_rows);

#endif
