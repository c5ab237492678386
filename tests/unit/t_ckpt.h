/* t_ckpt.h - helpers of the checkpoint tests (test_ckpt.c, test_ckpt_damage.c): files and
 * directories, remat-train runs and their --json rows, jobs and checkpoints to start from.
 * Implemented in t_ckpt.c; failures are Check assertions naming what was expected. */
#ifndef T_CKPT_H
#define T_CKPT_H

#include <stddef.h>
#include <sys/types.h>

#include "eng_train.h"
#include "tests.h"

/* Debian's copy of the GPL, 35 kB of English: a byte-level corpus every Debian system has. */
#define GPL "/usr/share/common-licenses/GPL-3"
#define TINY "\"preset\": \"tiny\"" /* the inside of "model" for a fresh tiny model */
#define MAX_STEP 16                 /* steps a run here may print */
#define CRASH_KILLS 25              /* SIGKILLs in the crash test, each at its own offset */
#define CRASH_DELAY_US "20000"      /* per step of a save: a save spans about 0.15 s */
#define BUSY_DELAY_US "200000"      /* per step of a save: a save spans about 1.2 s */
#define WAIT_MS 20000               /* a worker reaches a given point within this */

extern const char *const ckpt_files[]; /* the four files of a checkpoint */
#define NFILES_CKPT 4
#define NFILES NFILES_CKPT

/* What a run printed with --json, by step. */
typedef struct run_rows {
	int n;                      /* step lines */
	int first, last;            /* their first and last step */
	double loss[MAX_STEP + 1];  /* by step */
	double lr[MAX_STEP + 1];
} run_rows;

char *path_join(const char *dir, const char *name);
void write_text(const char *path, const char *text);
int exists(const char *path);
void copy_dir(const char *src, const char *dst);
int count_suffix(const char *dir, const char *suffix);
const char *listing(const char *dir);
char *latest_of(const char *dir);
void set_latest(const char *dir, const char *name);
int step_of(const char *name);
int contains_word(const char *buf, size_t len, const char *word);
const char *first_diff(const char *a, const char *b);
void expect_same_ckpt(const char *a, const char *b);
void need_gpl(void);
char *job_text(const char *model, int steps, int threads, const char *extra);
char *job_file(const char *dir, const char *name, const char *model, int steps, int threads, const char *extra);
char *resume_from(const char *from);
void train_json(const char *job, const char *sched, run_rows *r);
void trainer_from(eng_trainer *tr, const char *model, int steps, const char *extra);
char *good_checkpoint(const char *dir, int steps, int job_steps);
char *train_policy(const char *root, const char *name, const char *remat, const char *sched);
pid_t spawn_train(const char *job, const char *log, const char *ctl);
int wait_save_begins(const char *dir, pid_t pid, int ms);
int latest_step(const char *dir);

/* Adds the tests of test_ckpt_damage.c to suite "ckpt" (test_ckpt.c). */
void tcase_ckpt_damage(Suite *s);

#endif
