/* eng_train_ckpt.h - a trainer's side of its checkpoints: the snapshot of a trainer and a
 * resume into one, through engine/io's trainer-free eng_ckpt.h (which takes a model, a spec
 * and the training data, never the trainer: io sits below run).
 *
 * Not here: writing, verifying and finding checkpoints (eng_ckpt.h), the worker's saves
 * beside training (worker/wk_save.c).
 */
#ifndef ENG_TRAIN_CKPT_H
#define ENG_TRAIN_CKPT_H

#include "eng_ckpt.h"
#include "eng_err.h"
#include "eng_train.h"

/* The trainer as a checkpoint sees it: its model, spec, training data, step and LoRA base
 * (pointers into tr, valid while tr is). */
eng_ckpt_src eng_trainer_ckpt_src(const eng_trainer *tr);

/* eng_ckpt_snap_take of the trainer's state (at a step boundary, on the training thread;
 * device cuda: after eng_trainer_sync_host). */
int eng_trainer_snap_take(eng_ckpt_snap *s, const eng_trainer *tr, eng_err *err);
/* The same with a sharded optimizer's moments gathered (eng_trainer_gather_moments; NULLs:
 * the model's), which s takes over unless it fails; live: eng_ckpt_snap_borrow of the live
 * weights (never fails). */
int eng_trainer_snap(eng_ckpt_snap *s, const eng_trainer *tr, int live, float *moments[2],
	eng_err *err);

/* A sharded optimizer's moments gathered whole on rank 0 for a save: a collective, every
 * rank calls it (rank 0 once it has told the others to). Rank 0's out[0..1]: ngrad floats
 * each (ENG_MEM_WORKSPACE, for eng_trainer_snap); the other ranks' and an unsharded
 * run's: NULLs. -1 on every rank when rank 0 has no memory for them. */
int eng_trainer_gather_moments(const eng_trainer *tr, float *out[2], eng_err *err);

/* eng_ckpt_resume into the trainer: the moments of checkpoint ckpt into its model, its
 * training data moved to the checkpoint's position, its step the checkpoint's. Its weights
 * were loaded from the same checkpoint. */
int eng_trainer_resume(eng_trainer *tr, const char *ckpt, eng_err *err);

#endif
