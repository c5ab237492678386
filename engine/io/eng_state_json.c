/* eng_state_json.c - a run's history in trainer_state.json (see eng_state_json.h). */
#include "eng_state_json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shuffle's generator before this epoch's permutation: {"seed", "index", "state": 624
 * words in hex, 8 digits each}. */
json_t *eng_state_rng_json(const eng_mt *g, uint32_t seed)
{
	char hex[ENG_MT_N * 8 + 1];
	for (int i = 0; i < ENG_MT_N; i++)
		snprintf(hex + 8 * i, 9, "%08" PRIx32, g->s[i]);
	return json_pack("{s:I,s:i,s:s}", "seed", (json_int_t)seed, "index", g->i, "state", hex);
}

/* rng_json's inverse: 0, or -1 when it is not one. */
int eng_state_rng_parse(const json_t *o, eng_mt *g)
{
	const char *hex = json_string_value(json_object_get(o, "state"));
	json_t *idx = json_object_get(o, "index");
	if (!hex || strlen(hex) != ENG_MT_N * 8 || !json_is_integer(idx) ||
		json_integer_value(idx) < 0 || json_integer_value(idx) > ENG_MT_N)
		return -1;
	for (int i = 0; i < ENG_MT_N; i++) {
		uint32_t w = 0;
		for (int k = 0; k < 8; k++) {
			int c = hex[8 * i + k];
			int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
			if (v < 0)
				return -1;
			w = w << 4 | (uint32_t)v;
		}
		g->s[i] = w;
	}
	g->i = (int)json_integer_value(idx);
	return 0;
}

/* What job-set changed, as a resume takes it back: {"set": {field: value, "lr": {"from",
 * "kind", "lr", "warmup", "min_lr_frac"}}, "changes": [{"step", "set"}, ...]}. */
json_t *eng_state_live_json(const eng_spec *sp)
{
	json_t *set = json_object(), *changes = json_loads(sp->hp_log, 0, NULL);
	if (sp->hp_set & ENG_HP_LR)
		json_object_set_new(set, "lr", json_pack("{s:i,s:s,s:f,s:i,s:f}", "from",
			sp->lr_from, "kind", sp->lr_kind == ENG_SCHED_COSINE ? "cosine" : "constant",
			"lr", (double)sp->lr_new, "warmup", sp->lr_warmup, "min_lr_frac",
			(double)sp->lr_min_frac));
	if (sp->hp_set & ENG_HP_GRAD_CLIP)
		json_object_set_new(set, "grad_clip", json_real(sp->grad_clip));
	if (sp->hp_set & ENG_HP_WEIGHT_DECAY)
		json_object_set_new(set, "weight_decay", json_real(sp->weight_decay));
	if (sp->hp_set & ENG_HP_EVAL_EVERY)
		json_object_set_new(set, "eval_every", json_integer(sp->eval_every));
	if (sp->hp_set & ENG_HP_SAVE_EVERY)
		json_object_set_new(set, "save_every", json_integer(sp->save_every));
	return json_pack("{s:o,s:o}", "set", set, "changes", changes ? changes : json_array());
}

/* live_json's inverse, onto s: 0, or -1 when it is not one. */
int eng_state_live_parse(const json_t *live, eng_spec *s)
{
	const json_t *set = json_object_get(live, "set"), *lr = json_object_get(set, "lr"), *v;
	if (!json_is_object(set))
		return -1;
	if (lr) {
		const char *kind = json_string_value(json_object_get(lr, "kind"));
		if (!json_is_integer(json_object_get(lr, "from")) || !kind ||
			!json_is_number(json_object_get(lr, "lr")))
			return -1;
		s->hp_set |= ENG_HP_LR;
		s->lr_from = (int)json_integer_value(json_object_get(lr, "from"));
		s->lr_kind = strcmp(kind, "cosine") == 0 ? ENG_SCHED_COSINE : ENG_SCHED_CONSTANT;
		s->lr_new = (float)json_number_value(json_object_get(lr, "lr"));
		s->lr_warmup = (int)json_integer_value(json_object_get(lr, "warmup"));
		s->lr_min_frac = (float)json_number_value(json_object_get(lr, "min_lr_frac"));
	}
	if ((v = json_object_get(set, "grad_clip"))) {
		s->hp_set |= ENG_HP_GRAD_CLIP;
		s->grad_clip = (float)json_number_value(v);
	}
	if ((v = json_object_get(set, "weight_decay"))) {
		s->hp_set |= ENG_HP_WEIGHT_DECAY;
		s->weight_decay = (float)json_number_value(v);
	}
	if ((v = json_object_get(set, "eval_every"))) {
		s->hp_set |= ENG_HP_EVAL_EVERY;
		s->eval_every = (int)json_integer_value(v);
	}
	if ((v = json_object_get(set, "save_every"))) {
		s->hp_set |= ENG_HP_SAVE_EVERY;
		s->save_every = (int)json_integer_value(v);
	}
	char *log = json_dumps(json_object_get(live, "changes"), JSON_COMPACT);
	if (log && strlen(log) < sizeof s->hp_log)
		snprintf(s->hp_log, sizeof s->hp_log, "%s", log);
	free(log);
	return 0;
}

