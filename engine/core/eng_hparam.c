/* eng_hparam.c - the live hyperparameters' fields in eng_spec (see eng_hparam.h): the
 * table, one row per proto_hparam, and reading and writing a field through it. */
#include "eng_hparam.h"

#include <stdio.h>
#include <string.h>

#define ROW(f, t, mark, res, old) {offsetof(eng_spec, f), t, mark, res, old}

static const eng_hparam_field fields[PROTO_HP_COUNT] = {
	[PROTO_HP_LR] = ROW(live.lr_new, ENG_HPT_F32, ENG_HP_LR, 1, NULL),
	[PROTO_HP_SCHEDULE] = ROW(live.lr_kind, ENG_HPT_SCHED, ENG_HP_LR, 1, NULL),
	[PROTO_HP_WARMUP] = ROW(live.lr_warmup, ENG_HPT_INT, ENG_HP_LR, 1, NULL),
	[PROTO_HP_MIN_LR_FRAC] = ROW(live.lr_min_frac, ENG_HPT_F32, ENG_HP_LR, 1, NULL),
	[PROTO_HP_GRAD_CLIP] = ROW(grad_clip, ENG_HPT_F32, ENG_HP_GRAD_CLIP, 1, NULL),
	[PROTO_HP_WEIGHT_DECAY] = ROW(weight_decay, ENG_HPT_F32, ENG_HP_WEIGHT_DECAY, 1, NULL),
	[PROTO_HP_EVAL_EVERY] = ROW(eval_every, ENG_HPT_INT, ENG_HP_EVAL_EVERY, 1, "eval_every"),
	[PROTO_HP_SAVE_EVERY] = ROW(save_every, ENG_HPT_INT, ENG_HP_SAVE_EVERY, 1, "save_every"),
};

/* each field of the type its row says (a row's offset and type must agree) */
#define IS(f, T) \
	_Static_assert(_Generic(((eng_spec *)0)->f, T: 1, default: 0), #f " is not " #T)
IS(live.lr_new, float);
IS(live.lr_kind, eng_sched_kind);
IS(live.lr_warmup, int);
IS(live.lr_min_frac, float);
IS(grad_clip, float);
IS(weight_decay, float);
IS(eval_every, int);
IS(save_every, int);
_Static_assert(PROTO_HP_COUNT == 8, "a live hyperparameter without its row here");

const eng_hparam_field *eng_hparam_field_of(proto_hparam h)
{
	return &fields[h];
}

int eng_hparam_put(eng_spec *s, proto_hparam h, const json_t *v, eng_err *err)
{
	char desc[PROTO_DESC_LEN];
	if ((unsigned)h >= PROTO_HP_COUNT)
		return eng_errf(err, "no live hyperparameter %d", (int)h);
	if (proto_hparam_check(h, v, desc, sizeof desc) < 0)
		return eng_errf(err, "%s", desc);
	void *at = (char *)s + fields[h].offset;
	switch (fields[h].type) {
	case ENG_HPT_F32:
		*(float *)at = (float)json_number_value(v);
		break;
	case ENG_HPT_INT:
		*(int *)at = (int)json_integer_value(v);
		break;
	case ENG_HPT_SCHED:
		*(eng_sched_kind *)at = strcmp(json_string_value(v), "cosine") == 0
			? ENG_SCHED_COSINE : ENG_SCHED_CONSTANT;
		break;
	}
	return 0;
}

json_t *eng_hparam_get(const eng_spec *s, proto_hparam h)
{
	const void *at = (const char *)s + fields[h].offset;
	switch (fields[h].type) {
	case ENG_HPT_F32:
		return json_real(*(const float *)at);
	case ENG_HPT_INT:
		return json_integer(*(const int *)at);
	case ENG_HPT_SCHED:
		return json_string(*(const eng_sched_kind *)at == ENG_SCHED_COSINE ? "cosine"
										   : "constant");
	}
	return json_null();
}

json_t *eng_hparam_changed(const eng_spec *s)
{
	json_t *o = json_object();
	for (int h = 0; h < PROTO_HP_COUNT; h++)
		if (s->live.set & fields[h].set)
			json_object_set_new(o, proto_hparam_name((proto_hparam)h),
				eng_hparam_get(s, (proto_hparam)h));
	return o;
}

int eng_hparam_change(const json_t *set, int step, eng_live_change *ch, eng_err *err)
{
	char desc[PROTO_DESC_LEN];
	const char *k;
	json_t *v;
	memset(ch, 0, sizeof *ch);
	ch->step = step;
	if (!json_is_object(set))
		return eng_errf(err, "a job-set must be an object of hyperparameter -> value");
	json_object_foreach((json_t *)set, k, v) {
		int h = proto_hparam_find(k);
		if (h < 0)
			return eng_errf(err, "'%.64s' is not a live hyperparameter", k);
		if (proto_hparam_check((proto_hparam)h, v, desc, sizeof desc) < 0)
			return eng_errf(err, "%s", desc);
		ch->given |= 1u << h;
		ch->value[h] = fields[h].type != ENG_HPT_SCHED ? json_number_value(v)
			: strcmp(json_string_value(v), "cosine") == 0 ? ENG_SCHED_COSINE
								   : ENG_SCHED_CONSTANT;
	}
	return 0;
}

json_t *eng_hparam_change_json(const eng_live_change *ch)
{
	json_t *set = json_object();
	for (int h = 0; set && h < PROTO_HP_COUNT; h++) {
		if (!(ch->given & 1u << h))
			continue;
		double x = ch->value[h];
		json_object_set_new(set, proto_hparam_name((proto_hparam)h),
			fields[h].type == ENG_HPT_F32 ? json_real(x)
			: fields[h].type == ENG_HPT_INT ? json_integer((json_int_t)x)
			: json_string(x == ENG_SCHED_COSINE ? "cosine" : "constant"));
	}
	return json_pack("{s:i,s:o}", "step", ch->step, "set", set ? set : json_object());
}

void eng_live_append(eng_live *l, const eng_live_change *ch)
{
	if (l->n_changes == ENG_MAX_CHANGES) {
		memmove(l->changes, l->changes + 1, (ENG_MAX_CHANGES - 1) * sizeof l->changes[0]);
		l->n_changes--;
	}
	l->changes[l->n_changes++] = *ch;
}
