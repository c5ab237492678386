/* eng_hparam.h - the live hyperparameters (job-set) as fields of eng_spec.
 *
 * A live hyperparameter is one row in each of two tables keyed by the same enum,
 * proto_hparam: proto's (its name and the values it takes, lr's "at most 10" among them:
 * what rematctl and rematd check a job-set with, knowing nothing of the engine) and this
 * one (the field of eng_spec it sets, of which C type, the mark it leaves in live.set, and
 * whether a checkpoint keeps it for a resume, under which older spelling too). A new one
 * is a row in each; eng_hparam.c checks at compile time that each field has the type its
 * row says. Not here: applying a job-set to a running trainer (eng_trainer_set,
 * engine/run), trainer_state.json's form (eng_state_json.c).
 */
#ifndef ENG_HPARAM_H
#define ENG_HPARAM_H

#include <stddef.h>

#include <jansson.h>

#include "eng_err.h"
#include "eng_spec.h"
#include "proto.h"

typedef enum eng_hparam_type {
	ENG_HPT_F32,   /* float (proto's numbers) */
	ENG_HPT_INT,   /* int (proto's counts) */
	ENG_HPT_SCHED, /* eng_sched_kind: "cosine" or "constant" */
} eng_hparam_type;

typedef struct eng_hparam_field {
	size_t offset;        /* of its field in eng_spec */
	eng_hparam_type type; /* the field's type */
	unsigned set;         /* the ENG_HP_* mark a job-set of it leaves in live.set: ENG_HP_LR
			       * for the four that start a schedule of their own (lr, schedule,
			       * warmup, min_lr_frac: lr_new, lr_kind, lr_warmup, lr_min_frac) */
	int resume;           /* 1: trainer_state.json's "live" keeps it and a resume takes it
			       * back; 0: it lasts as long as the process */
	const char *was;      /* an older spelling in trainer_state.json, still read (a
			       * checkpoint written before keeps its value); NULL none */
} eng_hparam_field;

/* h's row (h < PROTO_HP_COUNT). */
const eng_hparam_field *eng_hparam_field_of(proto_hparam h);

/* Writes v, a value proto_hparam_check accepts for h, into h's field of s (live.set is
 * the caller's): 0, or -1 with a message when it is not one. */
int eng_hparam_put(eng_spec *s, proto_hparam h, const json_t *v, eng_err *err);

/* h's field of s as JSON, under proto's form: a float as the double it holds, an int, a
 * schedule's name. */
json_t *eng_hparam_get(const eng_spec *s, proto_hparam h);

/* What job-set has changed in s, under job-set's names ({} when nothing): the rows whose
 * mark is in live.set (job-status' hparams after a resume). */
json_t *eng_hparam_changed(const eng_spec *s);

/* A job-set's object (name -> value, every value checked as job-set checks it) as the
 * change that applies from `step`: 0, or -1 with a message. */
int eng_hparam_change(const json_t *set, int step, eng_live_change *ch, eng_err *err);
/* The change as {"step", "set": {name: value}} (new reference). */
json_t *eng_hparam_change_json(const eng_live_change *ch);
/* Appends ch to l's changes, the oldest dropped when there are ENG_MAX_CHANGES. */
void eng_live_append(eng_live *l, const eng_live_change *ch);

#endif
