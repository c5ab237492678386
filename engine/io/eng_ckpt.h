/* eng_ckpt.h - full checkpoints (design.md §6): writing, verifying, finding, resuming.
 *
 *   <save dir>/step_00001200/   model.safetensors, config.json, optimizer.safetensors,
 *                               trainer_state.json (format version, step, data cursor, RNG
 *                               seed, schedule, optimizer and batch hyperparameters, SHA-256
 *                               of each other file)
 *   <save dir>/latest           name of the newest complete checkpoint
 *
 * A checkpoint describes a model and a training state, never how a run traded memory for
 * speed: no file holds the recompute policy, the thread count, the device or a socket, and
 * the same state gives byte-identical files under every policy (no timestamps either).
 *
 * Crash safety: files are written into step_XXXXXXXX.tmp/, each fsynced, the directory
 * renamed into place, the parent fsynced, then `latest` replaced the same way. A crash at any
 * point leaves the previous checkpoint loadable; a .tmp directory is never picked up and is
 * removed the next time the save directory is opened.
 *
 * Saving without stalling: the training thread copies parameters and moments into a
 * snapshot at a step boundary (eng_ckpt_snap_take: three memcpy), and a writer thread
 * (eng_ckpt_writer) writes it while the next steps run. One save at a time: a second
 * submission while one is being written is refused (the caller answers Busy or waits).
 *
 * Nothing here knows the trainer: a snapshot is taken of a model, a spec and a position in
 * the data (eng_ckpt_src), and a resume reads into a model and a data stream; the trainer
 * fills those from itself (engine/run/eng_train_ckpt.h).
 *
 * Written in three files: eng_ckpt_write.c (the snapshot, the files, latest, keep),
 * eng_ckpt_find.c (verify, find, clean, resume), eng_ckpt_writer.c (the writer thread).
 */
#ifndef ENG_CKPT_H
#define ENG_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "eng_data.h"
#include "eng_err.h"
#include "eng_model.h"
#include "eng_spec.h"

#define ENG_CKPT_FORMAT 1 /* trainer_state.json "format_version" this code writes and reads */

/* The tokenizer's files a checkpoint carries, under Hugging Face's names
 * (eng_ckpt_tok_names: tokenizer.json, tokenizer_config.json, special_tokens_map.json, and
 * GPT-2's vocab.json and merges.txt), as the run read them at its start: every checkpoint
 * holds the tokenizer the run trained with, and AutoTokenizer.from_pretrained(ckpt) loads
 * it as after Trainer.save_model. len 0: the run has no such file. */
#define ENG_CKPT_TOK_FILES 5
#define ENG_CKPT_TOK_NAMES "tokenizer.json", "tokenizer_config.json", \
	"special_tokens_map.json", "vocab.json", "merges.txt"
extern const char *const eng_ckpt_tok_names[ENG_CKPT_TOK_FILES];
typedef struct eng_ckpt_tok {
	char *bytes[ENG_CKPT_TOK_FILES]; /* (ENG_MEM_DATA) */
	size_t len[ENG_CKPT_TOK_FILES];
} eng_ckpt_tok;

/* The files of the tokenizer at path: a tokenizer.json (the others looked for beside it)
 * or a directory holding any of them, each a regular file read without following a link
 * at its last step, at most ENG_CKPT_TOK_MAX bytes: 0, or -1 naming the file (none there
 * at all is an error too). eng_ckpt_tok_free it. */
#define ENG_CKPT_TOK_MAX (256u << 20)
int eng_ckpt_tok_read(eng_ckpt_tok *t, const char *path, eng_err *err);
/* The bytes it holds. */
size_t eng_ckpt_tok_bytes(const eng_ckpt_tok *t);
void eng_ckpt_tok_free(eng_ckpt_tok *t); /* safe on a zeroed one */

/* Everything a checkpoint holds, copied out of a run at a step boundary. */
typedef struct eng_ckpt_snap {
	eng_config cfg;
	int step;                 /* completed steps */
	size_t cursor;            /* the first token of the next batch (for the reader) */
	eng_data_pos pos;         /* where the data is: epoch, sample, shuffle generator */
	size_t ntok;              /* tokens in the training data (checked on resume) */
	eng_spec spec;            /* hyperparameters recorded (paths and run settings are not) */
	const eng_ptensor *tensors; /* the model's table (borrowed: the model outlives it) */
	const eng_model *q4;      /* the model, for its 4-bit weights (model.quantize: frozen,
				   * so borrowed as they are), written dequantized; NULL none */
	int ntensors;
	size_t nfloats, ngrad;
	float *params, *m, *v;    /* copies (ENG_MEM_WORKSPACE): nfloats, the moments ngrad;
				   * or, borrowed, the model's own */
	int borrowed;             /* 1: params, m, v are the live tensors (eng_ckpt_snap_borrow) */
	int own_moments;          /* 1: m, v are eng_ckpt_src.moments, freed with the snapshot,
				   * borrowed or not */
	double stall_ms;          /* how long the copy held the training thread */
	char lora_base[ENG_PATH_LEN]; /* LoRA: the base adapter_config.json names; "": the
				  * checkpoint holds the base itself (named ".") */
	char lora_pin[192];       /* what trainer_state.json records of that base */
	const eng_ckpt_tok *tok;  /* the tokenizer's files (borrowed from the run; NULL none) */
} eng_ckpt_snap;

/* What a snapshot is taken of: a run as a checkpoint sees it (borrowed for the call). */
typedef struct eng_ckpt_src {
	const eng_model *model;   /* config, tensor table, weights and moments */
	const eng_spec *spec;     /* hyperparameters recorded */
	const eng_data *train;    /* the training data: where the run is in it, its tokens */
	int step;                 /* completed steps */
	const char *lora_base;    /* eng_ckpt_snap.lora_base ("" or NULL: none) */
	const char *lora_pin;     /* eng_ckpt_snap.lora_pin ("" or NULL: none) */
	const eng_ckpt_tok *tok;  /* the tokenizer's files (NULL: none) */
	float *moments[2];        /* a sharded optimizer's moments gathered whole (ngrad floats
				   * each, ENG_MEM_WORKSPACE), which the snapshot takes over
				   * (a failed eng_ckpt_snap_take leaves them); NULL: the model's */
} eng_ckpt_src;

/* Copies a run's state (call at a step boundary, on the training thread). */
int eng_ckpt_snap_take(eng_ckpt_snap *s, const eng_ckpt_src *run, eng_err *err);
/* The bytes a snapshot holds (ENG_MEM_WORKSPACE) while it is written: nfloats of weights
 * and both moments of ngrad (the trainable tensors') floats. */
size_t eng_ckpt_snap_bytes(size_t nfloats, size_t ngrad);
void eng_ckpt_snap_free(eng_ckpt_snap *s); /* safe on a zeroed or borrowed snapshot */
/* A snapshot without copies: it points at the run's live weights and moments, so it
 * holds no memory, and training must wait until it is written (the state must not move
 * under the writer). What a save does when memory cannot hold a copy. */
void eng_ckpt_snap_borrow(eng_ckpt_snap *s, const eng_ckpt_src *run);

typedef struct eng_ckpt_result {
	char path[ENG_PATH_LEN + 64]; /* the checkpoint directory written */
	int step;
	size_t bytes;             /* of the four files */
	double ms;                /* writing, fsyncs and renames */
	double stall_ms;          /* how long training waited: the snapshot's copy, or, written
				   * from the live tensors, the whole save */
	char warning[ENG_ERR_LEN]; /* the save succeeded, but: what `keep` could not prune */
} eng_ckpt_result;

/* Writes snapshot s as <dir>/<name> (name NULL: step_XXXXXXXX), replaces `latest`, then
 * removes the oldest step_ checkpoints beyond `keep` (never the one latest names; named
 * checkpoints are never removed). Synchronous. A step_ checkpoint of the same step is
 * replaced; a name that exists is refused ("a checkpoint named 'x' exists in 'DIR': choose
 * another name"), and so is, before anything is written, a `latest` or `latest.tmp` that
 * is a link (symbolic or hard), another user's or no regular file (eng_fs_entry). */
int eng_ckpt_write(const eng_ckpt_snap *s, const char *dir, const char *name, int keep,
	eng_ckpt_result *res, eng_err *err);
/* 0 when a save named name (a caller's) may go into save directory dir: a valid name that
 * nothing there holds yet; -1 with eng_ckpt_write's message otherwise. A check before the
 * snapshot is taken, so that the request is refused at once (eng_ckpt_write checks again). */
int eng_ckpt_name_free(const char *dir, const char *name, eng_err *err);

/* Checks a checkpoint directory: trainer_state.json parses with a known format, every file
 * it lists exists with its recorded size and SHA-256, the safetensors files pass the
 * reader's checks, and config.json's shape matches model.safetensors. */
int eng_ckpt_verify(const char *ckpt, eng_err *err);

/* A job's own save directory at its start: removes the *.tmp leftovers of interrupted
 * saves and puts back an X.old whose X is missing (eng_ckpt_write). Only entries of ours
 * are touched, never through a symlink: a link or another user's entry under one of
 * these names fails with a message naming it (eng_fs.h). Never call it on a directory
 * the job only reads (init_from). With dry_run, only checks that it would succeed. */
int eng_ckpt_clean_tmp(const char *save_dir, int dry_run, eng_err *err);

/* The newest checkpoint of a save directory that verifies: the one `latest` names (or its
 * X.old, left complete by an interrupted re-save), or, when that one fails, the newest
 * step_ directory that passes. Only directories of save_dir itself count, no link. Reads
 * only: nothing is cleaned or rewritten. Writes its path to out. -1 when there is none;
 * the message then says why latest was refused. */
int eng_ckpt_find(const char *save_dir, char *out, size_t outlen, eng_err *err);

/* For a checkpoint that failed to verify, the newest other checkpoint in the same save
 * directory that does verify; 0 with its path, -1 when none. */
int eng_ckpt_previous(const char *ckpt, char *out, size_t outlen);

/* Resume: loads the optimizer moments of a verified checkpoint into model m (whose weights
 * were loaded from the same checkpoint), moves the training data `train` to the
 * checkpoint's position and gives its step in *step. Checks batch and seq_len against
 * spec s, the data's token count, and that the run has steps left; on failure nothing but
 * m's moments may have changed. */
int eng_ckpt_resume(const char *ckpt, const eng_spec *s, eng_model *m, eng_data *train,
	int *step, eng_err *err);
/* Before a resumed run is built: what the checkpoint decides of its spec. grad_accum is a
 * hyperparameter of the run: the checkpoint's, unless the spec gives one (a different one
 * is refused, as a different batch is); data.shuffle must be the checkpoint's. */
int eng_ckpt_adopt(const char *ckpt, eng_spec *s, eng_err *err);
/* eng_ckpt_resume's checks alone, for a spec and training data of ntok tokens (0: not
 * known yet, text still to be tokenized: the data's checks are left to the run); the
 * checkpoint's step into *step. */
int eng_ckpt_check_resume(const char *ckpt, const eng_spec *s, size_t ntok, int *step,
	eng_err *err);

/* ---- the writer thread ---- */

typedef struct eng_ckpt_writer eng_ckpt_writer;

/* Called on the writer thread when a save ends: ok 1 with res, or 0 with the message. */
typedef void (*eng_ckpt_done_fn)(void *ud, int ok, const eng_ckpt_result *res,
	const char *errmsg);

eng_ckpt_writer *eng_ckpt_writer_start(void);
/* Hands the snapshot over (the writer frees it) to be written as eng_ckpt_write does;
 * returns -1 (snapshot untouched) while a save is in progress. */
int eng_ckpt_writer_submit(eng_ckpt_writer *w, eng_ckpt_snap *s, const char *dir,
	const char *name, int keep, eng_ckpt_done_fn done, void *ud);
int eng_ckpt_writer_busy(eng_ckpt_writer *w);
/* Waits until nothing is being written. */
void eng_ckpt_writer_wait(eng_ckpt_writer *w);
/* Waits, then ends the thread and frees w. NULL is a no-op. */
void eng_ckpt_writer_stop(eng_ckpt_writer *w);

#endif
