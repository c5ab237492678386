/* eng_plan.h - analytic memory and FLOP counts per section for a recompute policy.
 *
 * Bytes from the activation tables of eng_acts.h, the ones the backends lay out, in
 * float32 and without alignment: tests hold them against what eng_mem measures (DESIGN §3:
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
} eng_plan;

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

/* Cheapest policy (fewest recomputed FLOPs) whose saved + recompute bytes fit in budget.
 * Returns 0 and fills *p, or -1 when even every block full and the head chunked do not fit
 * (then *p holds that policy, and *out its counts). */
int eng_plan_fit(const eng_config *cfg, int B, int T, int chunk_rows, size_t budget,
	eng_policy *p, eng_plan *out);

#endif
