/* t_util.h - helpers shared by the engine tests: building a trainer from JSON text,
 * comparing tensors with a relative L2 error, and reading the reference files. */
#ifndef T_UTIL_H
#define T_UTIL_H

#include <stddef.h>

#include "eng_st.h"
#include "eng_train.h"

/* Parses spec JSON text (printf-style) and builds a trainer; fails the test on error. */
void t_trainer(eng_trainer *tr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A checkpoint of the trainer now, into save.dir as step_XXXXXXXX, the way remat-train
 * saves (wk_save.c): the host copy brought up to date, a snapshot taken and written by the
 * checkpoint writer thread; its path into path[len]. Fails the test on error. */
void t_save(eng_trainer *tr, char *path, size_t len);
/* The next batch of d into inp and tgt (eng_data_next), failing the test on an error. */
void t_next(eng_data *d, uint32_t *inp, uint32_t *tgt);

/* Steps 1..steps of a run (their losses into loss[1..steps]), saved after step save_at
 * (the checkpoint's path into path[len]). */
void t_steps_saving(eng_trainer *tr, int steps, int save_at, float *loss, char *path,
	size_t len);

/* Steps from..to of a resumed run: each must succeed with loss[s], the uninterrupted
 * run's (indexed by step). */
void t_resumed_steps(eng_trainer *tr, int from, int to, const float *loss);

/* ||a - b|| / ||b|| in double */
double t_rel_l2(const float *a, const float *b, size_t n);

/* 1 when precision bf16 runs here (kn_bf16_available); else 0, and one line on stderr:
 * "<suite>: bf16 skipped: why". */
int t_bf16_here(const char *suite);

/* Absolute path of a file under REMAT_TESTDATA (malloc'd). */
char *t_data(const char *rel);

/* 1 (after printing "<test>: skipped under AddressSanitizer: ...") in a sanitizer build,
 * where the process's resident memory is the sanitizer's shadow and quarantine as much as
 * the run's: a test of process-memory figures skips there. 0 otherwise. */
int t_asan_skips(const char *test);

/* The whole file at path (malloc'd, with a NUL after its len bytes); fails the test when
 * it cannot be read. */
char *t_read_file(const char *path, size_t *len);
/* docs/protocol.md, whole (malloc'd). */
char *t_protocol_md(void);
/* The line of a Markdown doc that begins "| `name` |", or NULL; its length into *len. */
const char *t_doc_row(const char *doc, const char *name, size_t *len);
/* Cell k (from 0) of a table row "| a | b | c |" into out (a bar after a backslash is
 * inside a cell). */
void t_doc_cell(const char *row, size_t len, int k, char *out, size_t cap);
/* A fresh directory REMAT_TMP/<prefix>XXXXXX (mkdtemp: made here, 0700, never one that was
 * there before); its path malloc'd. */
char *t_tmp_dir(const char *prefix);
/* Writes len bytes to path (created or truncated); fails the test on error. */
void t_write_file(const char *path, const void *buf, size_t len);

#define T_TRAIN_MAX_ARGS 16 /* arguments one t_train_run passes to remat-train */

/* Runs remat-train (REMAT_TRAIN) with args (NULL-terminated); stdout and stderr into *out,
 * or stderr alone (stdout to /dev/null through sh -c 'exec') with stderr_only. Returns the
 * exit status (128+signal when killed). */
int t_train_run(char **out, int stderr_only, const char *const *args);

/* A byte-level BPE tokenizer of GPT-2's 256 byte symbols and no merges (a byte's id is the
 * byte), `extra` more tokens past them, in dir/tokenizer.json and
 * dir/tokenizer_config.json; with eot, id 256 is <|endoftext|>, its EOS. */
void t_byte_tokenizer(const char *dir, int extra, int eot);

#endif
