/* eng_train_ckpt.c - a trainer's snapshot and resume through eng_ckpt.h (see
 * eng_train_ckpt.h). Not here: the checkpoint's files (engine/io/eng_ckpt*.c).
 */
#include "eng_train_ckpt.h"

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
	eng_ckpt_src src = eng_trainer_ckpt_src(tr);
	return eng_ckpt_snap_take(s, &src, err);
}

void eng_trainer_snap_borrow(eng_ckpt_snap *s, const eng_trainer *tr)
{
	eng_ckpt_src src = eng_trainer_ckpt_src(tr);
	eng_ckpt_snap_borrow(s, &src);
}

int eng_trainer_resume(eng_trainer *tr, const char *ckpt, eng_err *err)
{
	return eng_ckpt_resume(ckpt, &tr->spec, &tr->model, &tr->train, &tr->step, err);
}
