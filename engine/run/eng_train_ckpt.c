/* eng_train_ckpt.c - a trainer's snapshot and resume through eng_ckpt.h (see
 * eng_train_ckpt.h). Not here: the checkpoint's files (engine/io/eng_ckpt*.c).
 */
#include "eng_train_ckpt.h"

#include "eng_dp.h"
#include "eng_mem.h"

eng_ckpt_src eng_trainer_ckpt_src(const eng_trainer *tr)
{
	eng_ckpt_src src = {
		.model = &tr->model,
		.spec = &tr->spec,
		.train = &tr->train,
		.step = tr->step,
		.lora_base = tr->lora_base,
		.lora_pin = tr->lora_pin,
		.tok = &tr->tok_files,
	};
	return src;
}

int eng_trainer_snap_take(eng_ckpt_snap *s, const eng_trainer *tr, eng_err *err)
{
	return eng_trainer_snap(s, tr, 0, NULL, err);
}

int eng_trainer_snap(eng_ckpt_snap *s, const eng_trainer *tr, int live, float *moments[2],
	eng_err *err)
{
	eng_ckpt_src src = eng_trainer_ckpt_src(tr);
	src.moments[0] = moments ? moments[0] : NULL;
	src.moments[1] = moments ? moments[1] : NULL;
	if (!live)
		return eng_ckpt_snap_take(s, &src, err);
	eng_ckpt_snap_borrow(s, &src);
	return 0;
}

int eng_trainer_gather_moments(const eng_trainer *tr, float *out[2], eng_err *err)
{
	const eng_model *m = &tr->model;
	int ok = 1, rc = 0;
	out[0] = out[1] = NULL;
	if (m->cfg.opt_shards <= 1)
		return 0;
	if (eng_dp_rank() == 0) { /* whole, as an unsharded run holds them */
		out[0] = eng_mem_alloc(ENG_MEM_WORKSPACE, m->ngrad * sizeof(float));
		out[1] = eng_mem_alloc(ENG_MEM_WORKSPACE, m->ngrad * sizeof(float));
		ok = out[0] && out[1];
	}
	if (eng_dp_bcast(&ok, sizeof ok, err) < 0 || !ok) {
		rc = ok ? -1 : eng_errf(err, "out of memory to gather the optimizer's moments "
					     "for a save (%.1f MiB)", m->ngrad * 8 / 1048576.0);
	} else if (eng_dp_gather_parts(m->m, m->ngrad, out[0], err) < 0 ||
		eng_dp_gather_parts(m->v, m->ngrad, out[1], err) < 0) {
		rc = -1;
	}
	if (rc < 0) {
		eng_mem_free(out[0]);
		eng_mem_free(out[1]);
		out[0] = out[1] = NULL;
	}
	return rc;
}

int eng_trainer_resume(eng_trainer *tr, const char *ckpt, eng_err *err)
{
	return eng_ckpt_resume(ckpt, &tr->spec, &tr->model, &tr->train, &tr->step, err);
}
