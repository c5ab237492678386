/* eng_train_int.h - what the trainer's files share inside engine/run, bottom up:
 * eng_train_spec.c (the spec's files and the shape, before any allocation),
 * eng_train_check.c (--check and the run's fixed bytes), eng_train_fit.c (what fits, out
 * of memory as a retry), eng_train_step.c (the step), eng_train.c (the start and the end);
 * no file calls one above it (tests/circles.sh). Not an interface of the engine's.
 */
#ifndef ENG_TRAIN_INT_H
#define ENG_TRAIN_INT_H

#include "eng_train.h"

/* eng_train_spec.c: init_from resolved and verified, the shape decided and the spec finished,
 * before anything is allocated; the spec's aliases and the policy it starts with. */
int eng_train_plan(eng_spec *s, eng_config *cfg, eng_err *err);
int eng_train_policy(const eng_spec *s, eng_aliases *al, eng_policy *p, eng_err *err);
/* The run's tokenizer, after eng_train_plan: data.tokenizer, or init_from's directory when
 * it holds one (a checkpoint of a run that had one carries it); its path into path ("":
 * none, and nothing loaded), loaded into *tok and its files read into *files (either may
 * be NULL: not wanted). One with more ids than the model's vocabulary is refused. */
int eng_train_tokenizer(const eng_spec *s, char path[ENG_PATH_LEN], struct eng_tok **tok,
	eng_ckpt_tok *files, eng_err *err);

/* The prompt of the spec's samples, after eng_train_tokenizer: sample.prompt's text
 * encoded by tok, after the token each document begins with in the data (eng_tokfile_sep),
 * or that token alone when text data gives no prompt. Refused: text with no tokenizer, or
 * more than ENG_MAX_PROMPT ids. */
int eng_train_prompt(eng_spec *s, struct eng_tok *tok, eng_err *err);

/* eng_train_text.c: text data (data.format text or jsonl) as token files. prepare: each
 * corpus found in the token cache or tokenized into it (rank 0; the other ranks wait and
 * take rank 0's paths), then s->train_path/val_path name the token files and
 * s->data_format is llmc. find: the same, with nothing made: a corpus not in the cache
 * keeps its path, its bytes added to *pending, and pending_train set when it is train's.
 * tok_path and files: eng_train_tokenizer's. */
int eng_train_text_prepare(eng_spec *s, const char *tok_path, const eng_ckpt_tok *files,
	const eng_train_hooks *h, eng_err *err);
int eng_train_text_find(eng_spec *s, const char *tok_path, const eng_ckpt_tok *files,
	uint64_t *pending, int pending_which[2], eng_err *err);

/* eng_train_check.c: the process's resident bytes beyond the tracked ones, once the
 * kernels have their buffers; "N MiB (...)", what a run needs at least as the refusals for
 * memory word it. */
size_t eng_train_untracked_now(const eng_config *cfg, int chunk_rows, int threads);
void eng_train_need_text(size_t need, size_t fixed, char *buf, size_t n);

/* eng_train_fit.c: whether a policy is laid out; a refusal learnt from (the next policy in
 * *p); a policy laid out for the next step, or the fastest that fits instead. */
int eng_train_laid_out(const eng_trainer *tr);
int eng_train_on_refusal(eng_trainer *tr, eng_policy *p, int *tries, eng_err *err);
int eng_train_lay_out(eng_trainer *tr, eng_policy *p, int *tries, eng_err *err);

#endif
