/* eng_state_json.h - the parts of trainer_state.json that are a run's history rather than
 * its hyperparameters (eng_ckpt_write.c writes the rest, eng_ckpt_find.c reads it): the
 * shuffle's generator, and what rematctl set changed mid-run. Each *_parse is its *_json's
 * inverse.
 */
#ifndef ENG_STATE_JSON_H
#define ENG_STATE_JSON_H

#include <jansson.h>

#include "eng_data.h"
#include "eng_spec.h"

/* {"seed", "index", "state": 624 words in hex, 8 digits each}: the generator before this
 * epoch's permutation was drawn. */
json_t *eng_state_rng_json(const eng_mt *g, uint32_t seed);
/* 0, or -1 when o is not one. */
int eng_state_rng_parse(const json_t *o, eng_mt *g);

/* The data position of trainer_state.json o (its "data": sample and epoch, or an older
 * state's cursor alone, in file order; shuffled, the generator) for samples of ranks x B x
 * T on ntok tokens. Saved with samples of another size (other ranks), a position in file
 * order is the cursor's; a shuffled one is none. 0, or -1 when it is not one of that data. */
int eng_state_pos(const json_t *o, int ranks, int B, int T, size_t ntok, eng_data_pos *pos);

/* {"set": {field: value, "lr": {"from", "kind", "lr", "warmup", "min_lr_frac"}},
 * "changes": [{"step", "set"}, ...]}: sp's ENG_HP_* fields as job-set left them. */
json_t *eng_state_live_json(const eng_spec *sp);
/* Onto s (its live history and the fields job-set changed) for a checkpoint at `step`,
 * every value checked as job-set checks it (a schedule from a step past the checkpoint's,
 * or a change after the step that follows it, is none): 0, or -1 when live is not one. */
int eng_state_live_parse(const json_t *live, int step, eng_spec *s);

#endif
