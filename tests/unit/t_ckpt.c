/* t_ckpt.c - helpers of the checkpoint tests (see t_ckpt.h). */
#include "tests.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "eng_ckpt.h"
#include "eng_hfconfig.h"
#include "eng_sha256.h"
#include "eng_st.h"
#include "t_daemon.h"
#include "t_ckpt.h"
#include "t_util.h"

/* Debian's copy of the GPL, 35 kB of English: a byte-level corpus every Debian system has. */

const char *const ckpt_files[] = {"model.safetensors", "config.json", "optimizer.safetensors",
	"trainer_state.json"};

/* ---- files and directories ---- */

char *path_join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);
	ck_assert_ptr_nonnull(p);
	snprintf(p, n, "%s/%s", dir, name);
	return p;
}

void write_text(const char *path, const char *text)
{
	t_write_file(path, text, strlen(text));
}

int exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* Copies the regular files of src into dst (created). Checkpoints are flat. */
void copy_dir(const char *src, const char *dst)
{
	ck_assert_msg(mkdir(dst, 0777) == 0, "mkdir %s: %s", dst, strerror(errno));
	DIR *d = opendir(src);
	ck_assert_msg(d != NULL, "opendir %s: %s", src, strerror(errno));
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char *a = path_join(src, e->d_name), *b = path_join(dst, e->d_name);
		size_t len;
		char *buf = t_read_file(a, &len);
		t_write_file(b, buf, len);
		free(buf);
		free(a);
		free(b);
	}
	closedir(d);
}

/* Entries of dir whose names end with suffix. */
int count_suffix(const char *dir, const char *suffix)
{
	DIR *d = opendir(dir);
	ck_assert_msg(d != NULL, "opendir %s: %s", dir, strerror(errno));
	int n = 0;
	size_t k = strlen(suffix);
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		n += len > k && strcmp(e->d_name + len - k, suffix) == 0;
	}
	closedir(d);
	return n;
}

/* Names of dir's entries, sorted, joined by spaces (static: valid until the next call). */
const char *listing(const char *dir)
{
	static char out[4096];
	char *names[256];
	int n = 0;
	DIR *d = opendir(dir);
	ck_assert_msg(d != NULL, "opendir %s: %s", dir, strerror(errno));
	struct dirent *e;
	while ((e = readdir(d)) && n < 256)
		if (e->d_name[0] != '.')
			names[n++] = strdup(e->d_name);
	closedir(d);
	for (int i = 1; i < n; i++) /* insertion sort: a handful of names */
		for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
			char *t = names[j];
			names[j] = names[j - 1];
			names[j - 1] = t;
		}
	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		size_t len = strlen(out);
		snprintf(out + len, sizeof out - len, "%s%s", i ? " " : "", names[i]);
		free(names[i]);
	}
	return out;
}

/* The name `latest` holds (malloc'd, newline trimmed), or NULL when there is none. */
char *latest_of(const char *dir)
{
	char *p = path_join(dir, "latest");
	if (!exists(p)) {
		free(p);
		return NULL;
	}
	size_t len;
	char *text = t_read_file(p, &len);
	text[strcspn(text, "\n")] = '\0';
	free(p);
	return text;
}

void set_latest(const char *dir, const char *name)
{
	char *p = path_join(dir, "latest");
	char text[64];
	snprintf(text, sizeof text, "%s\n", name);
	write_text(p, text);
	free(p);
}

/* The step of a "step_XXXXXXXX" name; fails the test for any other. */
int step_of(const char *name)
{
	int step = -1;
	ck_assert_msg(name && strlen(name) == 13 && sscanf(name, "step_%8d", &step) == 1,
		"'%s' is not a step_XXXXXXXX name", name ? name : "(none)");
	return step;
}

/* Case-insensitive search for word in len bytes (binary safe); word is lower case. */
int contains_word(const char *buf, size_t len, const char *word)
{
	size_t w = strlen(word);
	for (size_t i = 0; i + w <= len; i++) {
		size_t k = 0;
		while (k < w && tolower((unsigned char)buf[i + k]) == word[k])
			k++;
		if (k == w)
			return 1;
	}
	return 0;
}

/* For two safetensors files that differ: the first tensor whose bytes differ, with the
 * count of differing floats (static text, for a failure message). */
const char *first_diff(const char *a, const char *b)
{
	static char what[512];
	eng_st_file fa, fb;
	eng_err err;
	snprintf(what, sizeof what, "the headers differ");
	if (eng_st_read(&fa, a, &err) < 0) {
		snprintf(what, sizeof what, "%s", err.msg);
		return what;
	}
	if (eng_st_read(&fb, b, &err) < 0) {
		snprintf(what, sizeof what, "%s", err.msg);
		eng_st_free(&fa);
		return what;
	}
	for (int i = 0; i < fa.n; i++) {
		const eng_st_tensor *ta = &fa.t[i], *tb = eng_st_find(&fb, ta->name);
		if (!tb || tb->end - tb->begin != ta->end - ta->begin) {
			snprintf(what, sizeof what, "tensor '%s' differs in shape", ta->name);
			break;
		}
		size_t n = (ta->end - ta->begin) / 4, bad = 0;
		const uint8_t *x = fa.data + ta->begin, *y = fb.data + tb->begin;
		for (size_t k = 0; k < n; k++)
			bad += memcmp(x + 4 * k, y + 4 * k, 4) != 0;
		if (bad) {
			snprintf(what, sizeof what, "tensor '%s': %zu of %zu floats differ",
				ta->name, bad, n);
			break;
		}
	}
	eng_st_free(&fa);
	eng_st_free(&fb);
	return what;
}

/* The four files of checkpoints a and b are byte for byte the same. */
void expect_same_ckpt(const char *a, const char *b)
{
	for (size_t i = 0; i < NFILES; i++) {
		char *pa = path_join(a, ckpt_files[i]), *pb = path_join(b, ckpt_files[i]);
		size_t na, nb;
		char *x = t_read_file(pa, &na), *y = t_read_file(pb, &nb);
		int eq = na == nb && memcmp(x, y, na) == 0;
		ck_assert_msg(eq, "%s and %s differ (%zu and %zu bytes; %s)", pa, pb, na, nb,
			strstr(ckpt_files[i], ".safetensors") ? first_diff(pa, pb) : "text");
		free(x);
		free(y);
		free(pa);
		free(pb);
	}
}

/* ---- jobs and runs ---- */

void need_gpl(void)
{
	ck_assert_msg(access(GPL, R_OK) == 0, "%s is missing (Debian's base-files has it)", GPL);
}

/* A job on GPL's bytes, batch 2 x 32, lr 1e-3 with a cosine schedule and a warm-up of 2
 * steps (so that where a run stands in it matters); model is the inside of "model", extra
 * adds top-level fields. malloc'd. */
char *job_text(const char *model, int steps, int threads, const char *extra)
{
	char *text = NULL;
	int n = asprintf(&text, "{\"model\": {%s}, \"data\": {\"train\": \"" GPL "\", \"format\": "
		"\"bytes\"}, \"batch\": 2, \"seq_len\": 32, \"steps\": %d, \"threads\": %d, "
		"\"optim\": {\"lr\": 1e-3}, \"schedule\": {\"kind\": \"cosine\", \"warmup\": 2, "
		"\"min_lr_frac\": 0.1}%s}", model, steps, threads, extra);
	ck_assert(n > 0);
	return text;
}

/* job_text written to dir/name; returns the path. */
char *job_file(const char *dir, const char *name, const char *model, int steps,
	int threads, const char *extra)
{
	char *text = job_text(model, steps, threads, extra), *path = path_join(dir, name);
	write_text(path, text);
	free(text);
	return path;
}

/* "\"init_from\": \"<from>\", \"resume\": true" (malloc'd). */
char *resume_from(const char *from)
{
	char *m = NULL;
	ck_assert(asprintf(&m, "\"init_from\": \"%s\", \"resume\": true", from) > 0);
	return m;
}


/* Runs job with --json (and --remat-schedule sched when not NULL); it must exit 0. */
void train_json(const char *job, const char *sched, run_rows *r)
{
	const char *with[] = {"--json", "--remat-schedule", sched, job, NULL};
	const char *without[] = {"--json", job, NULL};
	char *out;
	int rc = t_train_run(&out, 0, sched ? with : without);
	ck_assert_msg(rc == 0, "%s (schedule %s): exit status %d:\n%s", job, sched ? sched : "-",
		rc, out);
	memset(r, 0, sizeof *r);
	for (char *p = out, *nl; *p; p = nl + 1) {
		nl = strchr(p, '\n');
		ck_assert_msg(nl != NULL, "unterminated line '%s'", p);
		json_t *o = json_loadb(p, (size_t)(nl - p), 0, NULL);
		ck_assert_msg(o != NULL, "not a --json line: '%.*s'", (int)(nl - p), p);
		int step = (int)json_integer_value(json_object_get(o, "step"));
		ck_assert_msg(step >= 1 && step <= MAX_STEP, "step %d", step);
		r->first = r->n++ ? r->first : step;
		r->last = step;
		r->loss[step] = json_number_value(json_object_get(o, "loss"));
		r->lr[step] = json_number_value(json_object_get(o, "lr"));
		json_decref(o);
	}
	free(out);
}

/* A trainer from job text (no save.dir unless extra gives one); fails the test on error. */
void trainer_from(eng_trainer *tr, const char *model, int steps, const char *extra)
{
	char *text = job_text(model, steps, 1, extra);
	t_trainer(tr, "%s", text);
	free(text);
}

/* One good checkpoint after `steps` steps of the tiny job, written by the engine into
 * save dir dir (created); returns the checkpoint's path. */
char *good_checkpoint(const char *dir, int steps, int job_steps)
{
	char extra[4200];
	snprintf(extra, sizeof extra, ", \"save\": {\"dir\": \"%s\", \"keep\": 100}", dir);
	eng_trainer tr;
	eng_err err;
	eng_step_stats st;
	trainer_from(&tr, TINY, job_steps, extra);
	for (int i = 0; i < steps; i++)
		ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "step: %s", err.msg);
	char path[ENG_PATH_LEN + 64];
	t_save(&tr, path, sizeof path);
	eng_trainer_free(&tr);
	return strdup(path);
}

/* ---- 1. the files do not depend on the recompute policy ---- */

/* Trains the tiny job for 3 steps under remat (a spec "remat" object) and sched (or NULL),
 * saving at step 2 through the writer thread and at the end; returns the save dir. */
char *train_policy(const char *root, const char *name, const char *remat,
	const char *sched)
{
	char *dir = path_join(root, name), extra[4400], file[80];
	snprintf(extra, sizeof extra, ", \"remat\": %s, \"save\": {\"dir\": \"%s\", \"every\": 2}",
		remat, dir);
	snprintf(file, sizeof file, "%s.json", name);
	char *job = job_file(root, file, TINY, 3, 2, extra);
	run_rows r;
	train_json(job, sched, &r);
	ck_assert_int_eq(r.n, 3);
	free(job);
	return dir;
}


/* Starts remat-train on job with REMAT_CKPT_DELAY_US (set by the caller) in the
 * environment and its output in log; it dies with the test process. */
pid_t spawn_train(const char *job, const char *log, const char *ctl)
{
	const char *bin = t_env("REMAT_TRAIN");
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		if (ctl)
			execl(bin, bin, "--control", ctl, job, (char *)NULL);
		else
			execl(bin, bin, job, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Waits until a step_*.tmp directory exists in dir (a save has begun): 1; 0 when the
 * worker exited first or ms passed. */
int wait_save_begins(const char *dir, pid_t pid, int ms)
{
	long end = td_ms() + ms;
	while (td_ms() < end) {
		DIR *d = opendir(dir);
		struct dirent *e;
		int found = 0;
		while (d && (e = readdir(d)))
			found |= strncmp(e->d_name, "step_", 5) == 0 && strstr(e->d_name, ".tmp");
		if (d)
			closedir(d);
		if (found)
			return 1;
		if (waitpid(pid, NULL, WNOHANG) != 0)
			return 0;
		usleep(500);
	}
	return 0;
}

/* The step `latest` of dir names (-1 when there is none). */
int latest_step(const char *dir)
{
	char *name = latest_of(dir);
	int step = name ? step_of(name) : -1;
	free(name);
	return step;
}
