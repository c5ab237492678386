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
/* eng_ckpt_snap_borrow of the trainer's live weights and moments. */
void eng_trainer_snap_borrow(eng_ckpt_snap *s, const eng_trainer *tr);

/* eng_ckpt_resume into the trainer: the moments of checkpoint ckpt into its model, its
 * training data moved to the checkpoint's position, its step the checkpoint's. Its weights
 * were loaded from the same checkpoint. */
int eng_trainer_resume(eng_trainer *tr, const char *ckpt, eng_err *err);

#endif
