/* eng_ckpt_int.h - what the pieces of the checkpoint module share (eng_ckpt.h): writing
 * (eng_ckpt_write.c), verifying, finding and resuming (eng_ckpt_find.c), the writer thread
 * (eng_ckpt_writer.c). Not for use outside engine/io/eng_ckpt*.c.
 */
#ifndef ENG_CKPT_INT_H
#define ENG_CKPT_INT_H

#include <stdio.h>
#include <sys/stat.h>

#include "eng_ckpt.h"
#include "eng_fs.h"

#define CKPT_PATH (ENG_PATH_LEN + 128) /* room for a save dir, a name and a file name */
#define CKPT_MAX_LIST 4096             /* checkpoints considered in one save directory */
#define CKPT_NAME_MAX 64               /* longest checkpoint name (the protocol's limit) */

/* The files of a checkpoint besides trainer_state.json, in the order they are written: a
 * full checkpoint's first three; a LoRA run's adapters as PEFT saves them and the moments,
 * and its base's weights and config.json in its subdirectory base/ (ENG_PEFT_BASE_DIR)
 * only when the base is nowhere else on disk (eng_ckpt_write.c). A checkpoint of an older
 * remat holds such a base beside its adapters (F(0), F(1): base_model_name_or_path "."). */
#define NFILES (7 + ENG_CKPT_TOK_FILES)
extern const char *const eng_ckpt__files[NFILES];
#define F(i) (1u << (i))
#define FULL_FILES (F(0) | F(1) | F(2))
#define LORA_FILES (F(2) | F(3) | F(4))
#define TOK_FILE0 5 /* eng_ckpt__files[TOK_FILE0 + k] is eng_ckpt_tok_names[k] */
#define BASE_W (TOK_FILE0 + ENG_CKPT_TOK_FILES) /* "base/model.safetensors" */
#define BASE_C (BASE_W + 1)                     /* "base/config.json" */
#define BASE_FILES (F(BASE_W) | F(BASE_C))

/* Opens file `name` of the checkpoint directory d for reading: in d, or in its
 * subdirectory for a name "sub/file" (one level, the subdirectory opened without following
 * a link); the descriptor, its stat in *sb, or -1 with err (errno kept). */
int eng_ckpt__open_file(const eng_dir *d, const char *name, struct stat *sb, eng_err *err);

/* buf = a + b; -1 when it does not fit (a path is never silently cut). Not inlined: the
 * length check is here, and gcc's truncation warning cannot see it at call sites. Unused
 * in some of the files that include this. */
__attribute__((noinline, unused)) static int join(char *buf, size_t n, const char *a,
	const char *b)
{
	int w = snprintf(buf, n, "%s%s", a, b);
	return (w < 0 || (size_t)w >= n) ? -1 : 0;
}

/* buf = dir + "/" + name; -1 when it does not fit */
__attribute__((noinline, unused)) static int path2(char *buf, size_t n, const char *dir,
	const char *name)
{
	int w = snprintf(buf, n, "%s/%s", dir, name);
	return (w < 0 || (size_t)w >= n) ? -1 : 0;
}

/* ---- a save directory's listing (eng_ckpt_write.c) ---- */

/* Steps of the step_ entries of the directory open as fd, newest first; the count. With
 * dirs_only, only real directories (no link) count: the ones pruning may remove. */
int eng_ckpt__list_steps(int fd, int dirs_only, int *steps, int max);
/* Reads the name that `latest` holds in the directory open as fd (trimmed, a bare name);
 * -1 when absent or malformed. A link or a FIFO named latest is no latest of ours. */
int eng_ckpt__read_latest_at(int fd, char *name, size_t n);

#endif
