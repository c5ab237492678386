/* eng_train_set.c - job-set on a running trainer (see eng_train.h's eng_trainer_set): the
 * live hyperparameters checked and written into the run's spec through the one table
 * (proto's names and limits, engine/core/eng_hparam.c's fields), and the run's history
 * of them that checkpoints keep (eng_live). Not here: when a job-set is applied
 * (worker/wk_run.c, at a step boundary), what it prints and tells (the worker's),
 * trainer_state.json's form (eng_state_json.c).
 */
#include "eng_train_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_hparam.h"

int eng_trainer_set_check(const eng_trainer *tr, const json_t *set, eng_err *err)
{
	eng_live_change ch;
	if (!json_is_object(set) || json_object_size(set) == 0)
		return eng_errf(err, "'set' must be an object of hyperparameter -> value, not empty");
	if (json_object_get(set, PROTO_PRIORITY))
		return eng_errf(err, "'%s' weighs the job in rematd's memory pool: rematd takes "
				     "it, not the job's worker", PROTO_PRIORITY);
	if (eng_hparam_change(set, tr->step + 1, &ch, err) < 0) /* each name and value */
		return -1;
	if (!json_object_get(set, "schedule") && (json_object_get(set, "warmup") ||
						     json_object_get(set, "min_lr_frac")))
		return eng_errf(err, "'warmup' and 'min_lr_frac' shape a new schedule: give "
				     "'schedule' (cosine or constant) with them");
	if (json_integer_value(json_object_get(set, "eval.every")) > 0 &&
		!eng_data_opened(&tr->val))
		return eng_errf(err, "'eval.every' needs data.val, which the job has not");
	if (json_integer_value(json_object_get(set, "save.every")) > 0 && !tr->spec.save_dir[0])
		return eng_errf(err, "'save.every' needs save.dir, which the job has not");
	return 0;
}

int eng_trainer_set(eng_trainer *tr, const json_t *set, eng_err *err)
{
	eng_spec *s = &tr->spec;
	const char *k;
	json_t *v;
	if (eng_trainer_set_check(tr, set, err) < 0)
		return -1;
	if (json_object_get(set, "lr") || json_object_get(set, "schedule")) {
		/* a schedule of its own from the next step: what the set does not give is the
		 * rate the next step would have used, constant, no warm-up, the spec's floor */
		s->live.lr_new = eng_lr_at(s, tr->step);
		s->live.lr_kind = ENG_SCHED_CONSTANT;
		s->live.lr_warmup = 0;
		s->live.lr_min_frac = s->min_lr_frac;
		s->live.lr_from = tr->step;
	}
	json_object_foreach((json_t *)set, k, v) {
		proto_hparam h = (proto_hparam)proto_hparam_find(k);
		if (eng_hparam_put(s, h, v, err) < 0) /* checked above: never */
			return -1;
		s->live.set |= eng_hparam_field_of(h)->set;
	}
	eng_live_change ch;
	if (eng_hparam_change(set, tr->step + 1, &ch, err) < 0) /* checked above: never */
		return -1;
	eng_live_append(&s->live, &ch);
	return 0;
}
