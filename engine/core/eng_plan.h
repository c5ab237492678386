/* eng_plan.h - analytic memory and FLOP counts per section for a recompute policy.
 *
 * Bytes from the activation tables of eng_acts.h, the ones the backends lay out, in
 * float32 and without alignment: tests hold them against what eng_mem measures (design.md §3:
 * within 5 %). `remat-plan` answers from here. FLOPs are closed formulas.
 */
#ifndef ENG_PLAN_H
#define ENG_PLAN_H

#include <stddef.h>

#include "eng_config.h"
#include "eng_policy.h"

typedef struct eng_plan_section {
	size_t saved_bytes;     /* activations kept from forward to backward */
	size_t workspace_bytes; /* recompute buffers this section's mode needs (shared pool) */
	double extra_flops;     /* FLOPs recomputed in backward, per step */
} eng_plan_section;

typedef struct eng_plan {
	eng_plan_section block[ENG_MAX_LAYERS];
	eng_plan_section head;
	size_t saved_bytes;     /* sum over sections */
	size_t recompute_bytes; /* the shared pool: max over modes present, plus the head chunk */
	double extra_flops;     /* sum over sections */
	double model_flops;     /* forward + backward FLOPs of one step without recompute */
	size_t fixed_bytes;     /* what the run holds whatever the policy (the query's) */
	size_t peak_bytes;      /* fixed + saved + recompute: a step's tracked peak */
	double cost;            /* what the search minimised: the sections' costs summed (and
				 * the query's optional_cost when it does without) */
	int optional_held;      /* the search holds the query's optional bytes (in
				 * fixed_bytes); 0: it does without them */
} eng_plan;

/* What a mode adds to a step, per section: the search minimises their sum. Extra FLOPs by
 * default; measured milliseconds where a run measured them. Off costs what it costs too
 * (0 analytically). */
typedef struct eng_plan_costs {
	double block[ENG_MAX_LAYERS][3]; /* by mode: off, selective, full */
	double head[2];                  /* off, chunked */
} eng_plan_costs;

/* The summed cost of p under c (an offloaded block costs nothing here: it is not in the
 * table); NULL c: p's analytic extra FLOPs. */
double eng_plan_policy_cost(const eng_config *cfg, int B, int T, int chunk_rows,
	const eng_plan_costs *c, const eng_policy *p);

/* A search for the best policy under a memory budget. */
typedef struct eng_plan_query {
	const eng_config *cfg;
	int B, T, chunk_rows;
	size_t fixed;                /* bytes the run holds whatever the policy */
	const eng_plan_costs *costs; /* NULL: the analytic extra FLOPs */
	size_t budget;               /* on fixed + saved + recompute */
	size_t optional;             /* bytes the run may hold or do without (a save's
				      * snapshot): not in fixed */
	double optional_cost;        /* what doing without them adds to a step, in the costs'
				      * unit */
} eng_plan_query;

/* Default rows per logits chunk when the job does not set remat.chunk_rows: 256 (at most
 * 64 MiB of logits, at most B*T). The same partition is used under off and chunked so both
 * give the same bits. */
int eng_plan_chunk_rows(const eng_config *cfg, int B, int T);

/* One block (mode off/selective/full) or the head (off/chunked). */
void eng_plan_block(const eng_config *cfg, int B, int T, eng_mode mode, eng_plan_section *s);
void eng_plan_head(const eng_config *cfg, int B, int T, int chunk_rows, eng_mode mode,
	eng_plan_section *s);

/* Every section under policy p, and the totals. */
void eng_plan_policy(const eng_config *cfg, int B, int T, int chunk_rows, const eng_policy *p,
	eng_plan *out);

/* The cheapest policy (least summed cost, then the smaller peak) whose peak (fixed + saved
 * + recompute) fits q->budget, over every block mode off, selective or full and the head
 * off or chunked: an exact search, not a heuristic. A block's bytes under a mode are the
 * same for every block (one shape), so a policy's peak depends only on how many blocks are
 * full and selective and on the head; for each such count the cheapest assignment of
 * modes to blocks is a dynamic programme over the blocks, O(L^3). Among equal costs, full
 * goes to the first blocks, then selective: their activations live longest. Returns 0 and
 * fills *p and *out, or -1 when nothing fits: then *p is the policy of the least peak and
 * *out its counts (out->peak_bytes: the least memory any policy needs). With q->optional,
 * the search is made with those bytes held and without them (at q->optional_cost), and the
 * cheaper answer taken: holding them on equal costs; when nothing fits, the least is
 * without them. */
int eng_plan_search(const eng_plan_query *q, eng_policy *p, eng_plan *out);

/* What saving without a snapshot adds to a step: the write a step waits for (save_ms, the
 * last one measured; 0 unknown) over save.every steps; 0 while unknown or without saves.
 * A query's optional_cost for a save's snapshot. */
double eng_plan_live_save_cost(double save_ms, int save_every);

/* The least peak any policy has, fixed bytes included (every block full, the head
 * chunked, as eng_plan_search finds it without a budget); that policy into *p when p is
 * not NULL. */
size_t eng_plan_least(const eng_config *cfg, int B, int T, int chunk_rows, size_t fixed,
	eng_policy *p);

#endif
