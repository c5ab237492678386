/* eng_state_json.c - a run's history in trainer_state.json (see eng_state_json.h). */
#include "eng_state_json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_hparam.h"
#include "proto.h"

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

/* What job-set changed, as a resume takes it back (the live hyperparameters whose row in
 * eng_hparam.c says so): {"set": {"lr": {"from", "kind", "lr", "warmup", "min_lr_frac"},
 * name: value, ...}, "changes": [{"step", "set"}, ...]}, under job-set's names
 * ("eval.every"; a state written before says "eval_every", which a resume still reads). */
json_t *eng_state_live_json(const eng_spec *sp)
{
	const eng_live *l = &sp->live;
	json_t *set = json_object(), *changes = json_array();
	for (int i = 0; i < l->n_changes; i++)
		json_array_append_new(changes, eng_hparam_change_json(&l->changes[i]));
	if (l->set & ENG_HP_LR)
		json_object_set_new(set, "lr", json_pack("{s:i,s:s,s:f,s:i,s:f}", "from",
			l->lr_from, "kind", l->lr_kind == ENG_SCHED_COSINE ? "cosine" : "constant",
			"lr", proto_f32_double(l->lr_new), "warmup", l->lr_warmup, "min_lr_frac",
			proto_f32_double(l->lr_min_frac)));
	/* the rest under job-set's names, a float in its shortest text */
	for (int h = 0; h < PROTO_HP_COUNT; h++) {
		const eng_hparam_field *f = eng_hparam_field_of((proto_hparam)h);
		if (f->set == ENG_HP_LR || !f->resume || !(sp->live.set & f->set))
			continue;
		json_t *v = eng_hparam_get(sp, (proto_hparam)h);
		if (f->type == ENG_HPT_F32)
			json_real_set(v, proto_f32_double((float)json_real_value(v)));
		json_object_set_new(set, proto_hparam_name((proto_hparam)h), v);
	}
	return json_pack("{s:o,s:o}", "set", set, "changes", changes);
}

/* A value of live's "set" outside the schedule: under job-set's name, or the older
 * spelling a checkpoint written before may have (eval_every). */
static const json_t *live_value(const json_t *set, proto_hparam h)
{
	const char *was = eng_hparam_field_of(h)->was;
	const json_t *v = json_object_get(set, proto_hparam_name(h));
	return v || !was ? v : json_object_get(set, was);
}

/* One value of live's "set" through job-set's own check (proto's table): 0 when absent
 * or good, -1 else. */
static int live_ok(const json_t *v, proto_hparam h)
{
	char desc[PROTO_DESC_LEN];
	return !v || proto_hparam_check(h, v, desc, sizeof desc) == 0 ? 0 : -1;
}

/* live's "changes" onto l, each checked as job-set checks its values, at most the last
 * ENG_MAX_CHANGES kept (absent: none): 0, or -1 when one is not a job-set that applied
 * by the checkpoint's step. */
static int live_changes(const json_t *changes, int step, eng_live *l)
{
	size_t i;
	json_t *o;
	l->n_changes = 0;
	if (!changes)
		return 0;
	if (!json_is_array(changes))
		return -1;
	json_array_foreach(changes, i, o) {
		eng_live_change ch;
		eng_err err;
		json_t *at = json_object_get(o, "step");
		if (!json_is_integer(at) || json_integer_value(at) < 1 ||
			json_integer_value(at) > step + 1 ||
			eng_hparam_change(json_object_get(o, "set"), (int)json_integer_value(at),
				&ch, &err) < 0)
			return -1;
		eng_live_append(l, &ch);
	}
	return 0;
}

int eng_state_live_parse(const json_t *live, int step, eng_spec *s)
{
	const json_t *set = json_object_get(live, "set"), *lr = json_object_get(set, "lr");
	if (!json_is_object(set))
		return -1;
	for (int h = 0; h < PROTO_HP_COUNT; h++)
		if (eng_hparam_field_of((proto_hparam)h)->set != ENG_HP_LR &&
			live_ok(live_value(set, (proto_hparam)h), (proto_hparam)h) < 0)
			return -1;
	if (lr) {
		const char *kind = json_string_value(json_object_get(lr, "kind"));
		const json_t *from = json_object_get(lr, "from"), *w = json_object_get(lr, "warmup");
		if (!json_is_integer(from) || json_integer_value(from) < 0 ||
			json_integer_value(from) > step || !kind ||
			(strcmp(kind, "cosine") && strcmp(kind, "constant")) ||
			!json_object_get(lr, "lr") ||
			live_ok(json_object_get(lr, "lr"), PROTO_HP_LR) < 0 || !w ||
			live_ok(w, PROTO_HP_WARMUP) < 0 || !json_object_get(lr, "min_lr_frac") ||
			live_ok(json_object_get(lr, "min_lr_frac"), PROTO_HP_MIN_LR_FRAC) < 0)
			return -1;
		eng_live *l = &s->live;
		l->set |= ENG_HP_LR;
		l->lr_from = (int)json_integer_value(from);
		l->lr_kind = strcmp(kind, "cosine") == 0 ? ENG_SCHED_COSINE : ENG_SCHED_CONSTANT;
		l->lr_new = (float)json_number_value(json_object_get(lr, "lr"));
		l->lr_warmup = (int)json_integer_value(w);
		l->lr_min_frac = (float)json_number_value(json_object_get(lr, "min_lr_frac"));
	}
	for (int h = 0; h < PROTO_HP_COUNT; h++) {
		const eng_hparam_field *f = eng_hparam_field_of((proto_hparam)h);
		const json_t *v = live_value(set, (proto_hparam)h);
		eng_err err;
		if (f->set == ENG_HP_LR || !f->resume || !v)
			continue;
		if (eng_hparam_put(s, (proto_hparam)h, v, &err) < 0) /* checked above: never */
			return -1;
		s->live.set |= f->set;
	}
	return live_changes(json_object_get(live, "changes"), step, &s->live);
}

/* The data position of state o, for batches of B x T on ntok tokens (shuffled or not, as
 * the state says; an older state has its cursor alone, in file order): 0, or -1 when it
 * is not one of that data. */
int eng_state_pos(const json_t *o, int ranks, int B, int T, size_t ntok, eng_data_pos *pos)
{
	const json_t *data = json_object_get(o, "data");
	json_t *cur = json_object_get(data, "cursor"), *smp = json_object_get(data, "sample");
	json_t *ep = json_object_get(data, "epoch"), *st = json_object_get(data, "sample_tokens");
	size_t per = (size_t)ranks * B * T, nsamples = (ntok - 1) / per;
	int shuffled = json_is_true(json_object_get(data, "shuffle"));
	memset(pos, 0, sizeof *pos);
	/* samples of another size (saved with other ranks): in file order the position is
	 * the cursor's, shuffled it is a place in another permutation */
	/* a state without it was written by one process: samples of B x T */
	size_t was = st ? (json_is_integer(st) && json_integer_value(st) > 0
				  ? (size_t)json_integer_value(st) : 0)
			: (size_t)B * T;
	int same = was == per;
	if (!same && shuffled)
		return -1;
	if (smp && same) {
		if (!json_is_integer(smp) || json_integer_value(smp) < 0 ||
			(ep && (!json_is_integer(ep) || json_integer_value(ep) < 0)))
			return -1;
		pos->sample = (size_t)json_integer_value(smp);
		pos->epoch = ep ? (uint64_t)json_integer_value(ep) : 0;
	} else {
		if (!json_is_integer(cur) || json_integer_value(cur) < 0 ||
			(size_t)json_integer_value(cur) % per)
			return -1;
		pos->sample = (size_t)json_integer_value(cur) / per;
		pos->epoch = json_is_integer(ep) ? (uint64_t)json_integer_value(ep) : 0;
	}
	if (pos->sample >= nsamples)
		return -1;
	if (shuffled && eng_state_rng_parse(json_object_get(data, "shuffle_rng"), &pos->rng) < 0)
		return -1;
	return 0;
}
