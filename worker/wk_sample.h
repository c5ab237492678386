/* wk_sample.h - samples from the model: during a run (the spec's "sample": a SAMPLE
 * event and a line every sample.every steps and at the end) and from a checkpoint alone
 * (remat-train --sample). The decoding itself is eng_sample.h's.
 */
#ifndef WK_SAMPLE_H
#define WK_SAMPLE_H

#include "wk_ctl.h"
#include "wk_metrics.h"
#include "eng_sample.h"
#include "eng_train.h"

/* During a run: the spec's sample after step tr->step (seed sample.seed + step, so each is
 * reproducible), printed (text through the job's tokenizer or for bytes data, ids else;
 * one JSON object with --json), sent as SAMPLE {step, prompt, tokens[, text]} and logged
 * as that event's line in metrics.jsonl (mx). A failure is said, never fatal. */
void wk_sample_run(eng_trainer *tr, wk_ctl *c, wk_metrics *mx, int json);

/* remat-train --sample CKPT's options. */
typedef struct wk_sample_args {
	const char *ckpt;         /* a checkpoint directory or an llm.c model file */
	const char *prompt;       /* text (a byte model, or the checkpoint's tokenizer's) or
				   * token ids "1,2,3"; NULL: default */
	eng_sample_opts o;
	int threads;              /* 0: online CPUs */
	int json;
} wk_sample_args;

/* Loads the model and prints the continuation: the prompt and the text for a byte model
 * (its checkpoint's data.format, or vocab_size 256 without one) or through the tokenizer
 * the checkpoint carries, the new token ids else.
 * A token past 255 in a byte model's text shows as '?'.
 * Returns the exit status (1 and a message on stderr on bad input). */
int wk_sample_cli(const wk_sample_args *a);

#endif
