/* test_ckpt.c - full checkpoints (engine/eng_ckpt.c, DESIGN §6), through the engine's API
 * and the real remat-train binary.
 *
 * What it covers: the four files are byte-identical under every recompute policy and carry
 * none of it; N steps, save, resume, M steps equals N+M steps in one go, bit for bit, across
 * policy changes and from a save directory; a worker killed with SIGKILL at many points of
 * a save always leaves `latest` on a checkpoint that verifies and resumes, and its .tmp
 * directories are removed at the next start; every kind of damage is refused with a message
 * naming the file, by the checksums first and by the structural checks behind them (with
 * the checksums recomputed), and the newest checkpoint that verifies is offered instead;
 * the reference weights survive a load and a save exactly; ckpt-save while a save is being
 * written is Busy; save.keep never removes the checkpoint `latest` names; a crash while a
 * name is saved again leaves it recoverable; names that collide with the save directory's
 * own files are refused.
 * What it does not: the safetensors parser on arbitrary bytes (test_st.c and the fuzz
 * target), the numbers of a training step (test_reference.c, test_model.c).
 */
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
#include "t_util.h"

/* Debian's copy of the GPL, 35 kB of English: a byte-level corpus every Debian system has. */
#define GPL "/usr/share/common-licenses/GPL-3"
#define TINY "\"preset\": \"tiny\"" /* the inside of "model" for a fresh tiny model */
#define MAX_ARGS 8                  /* arguments one run of remat-train gets here */
#define MAX_STEP 16                 /* steps a run here may print */
#define CRASH_KILLS 25              /* SIGKILLs in the crash test, each at its own offset */
#define CRASH_DELAY_US "20000"      /* per step of a save: a save spans about 0.15 s */
#define BUSY_DELAY_US "200000"      /* per step of a save: a save spans about 1.2 s */
#define WAIT_MS 20000               /* a worker reaches a given point within this */

static const char *const ckpt_files[] = {"model.safetensors", "config.json",
	"optimizer.safetensors", "trainer_state.json"};
#define NFILES (sizeof ckpt_files / sizeof ckpt_files[0])

/* ---- files and directories ---- */

static char *path_join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);
	ck_assert_ptr_nonnull(p);
	snprintf(p, n, "%s/%s", dir, name);
	return p;
}

/* A fresh directory REMAT_TMP/<prefix>XXXXXX (malloc'd path). */
static char *tmp_dir(const char *prefix)
{
	char name[64];
	snprintf(name, sizeof name, "%sXXXXXX", prefix);
	char *p = path_join(t_env("REMAT_TMP"), name);
	ck_assert_msg(mkdtemp(p) != NULL, "mkdtemp %s: %s", p, strerror(errno));
	return p;
}

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap + 1);
	ck_assert_ptr_nonnull(buf);
	for (;;) {
		if (n == cap) {
			cap *= 2;
			buf = realloc(buf, cap + 1);
			ck_assert_ptr_nonnull(buf);
		}
		size_t r = fread(buf + n, 1, cap - n, f);
		if (r == 0)
			break;
		n += r;
	}
	ck_assert(!ferror(f));
	fclose(f);
	buf[n] = '\0'; /* for strstr on text files */
	*len = n;
	return buf;
}

static void write_all(const char *path, const void *buf, size_t len)
{
	FILE *f = fopen(path, "wb");
	ck_assert_msg(f != NULL, "cannot write %s: %s", path, strerror(errno));
	ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

static void write_text(const char *path, const char *text)
{
	write_all(path, text, strlen(text));
}

static int exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* Copies the regular files of src into dst (created). Checkpoints are flat. */
static void copy_dir(const char *src, const char *dst)
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
		char *buf = read_all(a, &len);
		write_all(b, buf, len);
		free(buf);
		free(a);
		free(b);
	}
	closedir(d);
}

/* Entries of dir whose names end with suffix. */
static int count_suffix(const char *dir, const char *suffix)
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
static const char *listing(const char *dir)
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
static char *latest_of(const char *dir)
{
	char *p = path_join(dir, "latest");
	if (!exists(p)) {
		free(p);
		return NULL;
	}
	size_t len;
	char *text = read_all(p, &len);
	text[strcspn(text, "\n")] = '\0';
	free(p);
	return text;
}

static void set_latest(const char *dir, const char *name)
{
	char *p = path_join(dir, "latest");
	char text[64];
	snprintf(text, sizeof text, "%s\n", name);
	write_text(p, text);
	free(p);
}

/* The step of a "step_XXXXXXXX" name; fails the test for any other. */
static int step_of(const char *name)
{
	int step = -1;
	ck_assert_msg(name && strlen(name) == 13 && sscanf(name, "step_%8d", &step) == 1,
		"'%s' is not a step_XXXXXXXX name", name ? name : "(none)");
	return step;
}

/* Case-insensitive search for word in len bytes (binary safe); word is lower case. */
static int contains_word(const char *buf, size_t len, const char *word)
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
static const char *first_diff(const char *a, const char *b)
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
static void expect_same_ckpt(const char *a, const char *b)
{
	for (size_t i = 0; i < NFILES; i++) {
		char *pa = path_join(a, ckpt_files[i]), *pb = path_join(b, ckpt_files[i]);
		size_t na, nb;
		char *x = read_all(pa, &na), *y = read_all(pb, &nb);
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

static void need_gpl(void)
{
	ck_assert_msg(access(GPL, R_OK) == 0, "%s is missing (Debian's base-files has it)", GPL);
}

/* A job on GPL's bytes, batch 2 x 32, lr 1e-3 with a cosine schedule and a warm-up of 2
 * steps (so that where a run stands in it matters); model is the inside of "model", extra
 * adds top-level fields. malloc'd. */
static char *job_text(const char *model, int steps, int threads, const char *extra)
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
static char *job_file(const char *dir, const char *name, const char *model, int steps,
	int threads, const char *extra)
{
	char *text = job_text(model, steps, threads, extra), *path = path_join(dir, name);
	write_text(path, text);
	free(text);
	return path;
}

/* "\"init_from\": \"<from>\", \"resume\": true" (malloc'd). */
static char *resume_from(const char *from)
{
	char *m = NULL;
	ck_assert(asprintf(&m, "\"init_from\": \"%s\", \"resume\": true", from) > 0);
	return m;
}

/* Runs remat-train with args (NULL-terminated); stdout and stderr into *out, or stderr
 * alone (stdout to /dev/null through sh -c 'exec') with stderr_only. The exit status. */
static int train_run(char **out, int stderr_only, const char *const *args)
{
	const char *argv[MAX_ARGS + 5];
	int n = 0;
	if (stderr_only) {
		argv[n++] = "/bin/sh";
		argv[n++] = "-c";
		argv[n++] = "exec \"$0\" \"$@\" >/dev/null";
	}
	argv[n++] = t_env("REMAT_TRAIN");
	for (int i = 0; args[i]; i++) {
		ck_assert(i < MAX_ARGS);
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	return t_run((char *const *)argv, out);
}

/* What a run printed with --json, by step. */
typedef struct run_rows {
	int n;                      /* step lines */
	int first, last;            /* their first and last step */
	double loss[MAX_STEP + 1];  /* by step */
	double lr[MAX_STEP + 1];
} run_rows;

/* Runs job with --json (and --remat-schedule sched when not NULL); it must exit 0. */
static void train_json(const char *job, const char *sched, run_rows *r)
{
	const char *with[] = {"--json", "--remat-schedule", sched, job, NULL};
	const char *without[] = {"--json", job, NULL};
	char *out;
	int rc = train_run(&out, 0, sched ? with : without);
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
static void trainer_from(eng_trainer *tr, const char *model, int steps, const char *extra)
{
	char *text = job_text(model, steps, 1, extra);
	t_trainer(tr, "%s", text);
	free(text);
}

/* One good checkpoint after `steps` steps of the tiny job, written by the engine into
 * save dir dir (created); returns the checkpoint's path. */
static char *good_checkpoint(const char *dir, int steps, int job_steps)
{
	char extra[4200];
	snprintf(extra, sizeof extra, ", \"save\": {\"dir\": \"%s\", \"keep\": 100}", dir);
	eng_trainer tr;
	eng_err err;
	eng_step_stats st;
	trainer_from(&tr, TINY, job_steps, extra);
	for (int i = 0; i < steps; i++)
		ck_assert_msg(eng_trainer_step(&tr, &st, &err) == 0, "step: %s", err.msg);
	char path[ENG_PATH_LEN + 64];
	ck_assert_msg(eng_trainer_save(&tr, NULL, path, sizeof path, NULL, &err) == 0, "save: %s",
		err.msg);
	eng_trainer_free(&tr);
	return strdup(path);
}

/* ---- 1. the files do not depend on the recompute policy ---- */

/* Trains the tiny job for 3 steps under remat (a spec "remat" object) and sched (or NULL),
 * saving at step 2 through the writer thread and at the end; returns the save dir. */
static char *train_policy(const char *root, const char *name, const char *remat,
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

START_TEST(test_ckpt_write_same_under_every_policy)
{
	need_gpl();
	char *root = tmp_dir("policy");
	static const struct {
		const char *name, *remat, *sched;
	} runs[] = {
		{"off", "{\"default\": \"off\"}", NULL},
		{"selective", "{\"default\": \"selective\"}", NULL},
		{"full", "{\"default\": \"full\"}", NULL},
		{"chunked", "{\"default\": \"off\", \"sections\": {\"head\": \"chunked\"}}", NULL},
		{"mixed", "{\"default\": \"selective\", \"aliases\": {\"top\": \"h.1\"}, "
			  "\"sections\": {\"top\": \"full\", \"head\": \"chunked\"}}", NULL},
		/* and a policy changed before every step, through the command line */
		{"changing", "{\"default\": \"off\"}", "0:full,1:h.0=selective;head=chunked,2:off"},
	};
	enum { NRUNS = sizeof runs / sizeof runs[0] };
	char *dirs[NRUNS];
	for (int i = 0; i < NRUNS; i++)
		dirs[i] = train_policy(root, runs[i].name, runs[i].remat, runs[i].sched);

	/* transient run settings, in any case, in any file; "checkpointing" covers
	 * gradient_checkpointing */
	static const char *const words[] = {"remat", "recompute", "checkpointing", "policy",
		"selective", "chunked", "thread", "device", "socket"};
	static const char *const ckpts[] = {"step_00000002", "step_00000003"};
	for (int i = 0; i < NRUNS; i++) {
		char *latest = latest_of(dirs[i]);
		ck_assert_msg(latest && strcmp(latest, "step_00000003") == 0, "%s: latest '%s'",
			dirs[i], latest ? latest : "(none)");
		free(latest);
		ck_assert_str_eq(listing(dirs[i]), "latest step_00000002 step_00000003");
		for (int c = 0; c < 2; c++) {
			char *ck = path_join(dirs[i], ckpts[c]);
			ck_assert_str_eq(listing(ck), "config.json model.safetensors "
						      "optimizer.safetensors trainer_state.json");
			if (i > 0) {
				char *ref = path_join(dirs[0], ckpts[c]);
				expect_same_ckpt(ref, ck);
				free(ref);
			}
			for (size_t f = 0; f < NFILES; f++) {
				char *p = path_join(ck, ckpt_files[f]);
				size_t len;
				char *buf = read_all(p, &len);
				ck_assert_msg(len > 0, "%s is empty", p);
				for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
					ck_assert_msg(!contains_word(buf, len, words[w]),
						"%s (policy %s) mentions '%s'", p, runs[i].name,
						words[w]);
				if (strcmp(ckpt_files[f], "trainer_state.json") == 0)
					/* no paths at all: a path could hold any word (and the
					 * checkpoint must not depend on where it was written) */
					ck_assert_msg(!strchr(buf, '/') && !contains_word(buf, len,
						"gpl"), "%s holds a path:\n%s", p, buf);
				free(buf);
				free(p);
			}
			ck_assert_int_eq(eng_ckpt_verify(ck, NULL), 0);
			free(ck);
		}
	}
	/* the two checkpoints of one run differ: the comparison above is not vacuous */
	char *s2 = path_join(dirs[0], "step_00000002/model.safetensors");
	char *s3 = path_join(dirs[0], "step_00000003/model.safetensors");
	size_t n2, n3;
	char *b2 = read_all(s2, &n2), *b3 = read_all(s3, &n3);
	ck_assert_msg(n2 == n3 && memcmp(b2, b3, n2) != 0, "steps 2 and 3 saved the same weights");
	free(b2);
	free(b3);
	free(s2);
	free(s3);
	for (int i = 0; i < NRUNS; i++)
		free(dirs[i]);
	free(root);
}
END_TEST

/* ---- 2. resume bit for bit ---- */

#define RESUME_N 3 /* steps before the save */
#define RESUME_T 6 /* the step the runs end at: N + M */

/* A run of the job to RESUME_T under remat and sched, from model (TINY or a resume),
 * saving into root/name (every `every` steps, 0: at the end only). Returns the save dir. */
static char *train_resume(const char *root, const char *name, const char *model,
	const char *remat, const char *sched, int every, run_rows *r)
{
	char *dir = path_join(root, name), extra[4400], file[80];
	snprintf(extra, sizeof extra, ", \"remat\": %s, \"save\": {\"dir\": \"%s\", \"every\": "
		"%d}", remat, dir, every);
	snprintf(file, sizeof file, "%s.json", name);
	char *job = job_file(root, file, model, RESUME_T, 2, extra);
	train_json(job, sched, r);
	free(job);
	return dir;
}

/* A resumed run went on from step N to the end, with the reference's rates and losses,
 * and saved what the reference saved. */
static void expect_resumed(const char *what, const run_rows *r, const run_rows *ref,
	const char *dir, const char *ref_dir)
{
	ck_assert_msg(r->n == RESUME_T - RESUME_N && r->first == RESUME_N + 1 &&
			r->last == RESUME_T, "%s: ran steps %d..%d (%d lines), want %d..%d", what,
		r->first, r->last, r->n, RESUME_N + 1, RESUME_T);
	for (int s = RESUME_N + 1; s <= RESUME_T; s++) {
		ck_assert_msg(r->lr[s] == ref->lr[s], "%s: step %d lr %.9g, in one go %.9g", what,
			s, r->lr[s], ref->lr[s]);
		ck_assert_msg(r->loss[s] == ref->loss[s], "%s: step %d loss %.9g, in one go %.9g",
			what, s, r->loss[s], ref->loss[s]);
	}
	char *a = path_join(dir, "step_00000006"), *b = path_join(ref_dir, "step_00000006");
	expect_same_ckpt(b, a);
	free(a);
	free(b);
}

START_TEST(test_ckpt_resume_bit_exact)
{
	need_gpl();
	char *root = tmp_dir("resume");
	run_rows ref, a_off, a_mix, r;
	/* the reference: N+M steps in one go, saved at the end only */
	char *ref_dir = train_resume(root, "ref", TINY, "{\"default\": \"off\"}", NULL, 0, &ref);
	ck_assert_int_eq(ref.n, RESUME_T);
	ck_assert_msg(ref.lr[1] < ref.lr[2] && ref.lr[4] < ref.lr[3], "the schedule is flat: "
		"%g %g %g %g", ref.lr[1], ref.lr[2], ref.lr[3], ref.lr[4]);

	/* the runs resumed from: N+M steps saved at N too (so the schedule is the same) */
	char *off = train_resume(root, "a_off", TINY, "{\"default\": \"off\"}", NULL, RESUME_N,
		&a_off);
	char *mix = train_resume(root, "a_mix", TINY, "{\"default\": \"selective\"}",
		"1:full,2:h.0=off;head=chunked", RESUME_N, &a_mix);
	char *ref6 = path_join(ref_dir, "step_00000006");
	char *off3 = path_join(off, "step_00000003"), *off6 = path_join(off, "step_00000006");
	char *mix3 = path_join(mix, "step_00000003"), *mix6 = path_join(mix, "step_00000006");
	expect_same_ckpt(ref6, off6); /* saving at N on the writer thread changed nothing */
	expect_same_ckpt(ref6, mix6);
	expect_same_ckpt(off3, mix3);

	/* off -> full with a chunked head */
	char *m = resume_from(off3);
	char *b1 = train_resume(root, "b_full", m, "{\"default\": \"full\", \"sections\": "
		"{\"head\": \"chunked\"}}", NULL, 0, &r);
	expect_resumed("off then full", &r, &ref, b1, ref_dir);
	free(m);

	/* a changing policy -> off, changed again in the middle of the resumed run */
	m = resume_from(mix3);
	char *b2 = train_resume(root, "b_change", m, "{\"default\": \"off\"}",
		"4:selective;head=chunked,5:h.1=full", 0, &r);
	expect_resumed("changing then off", &r, &ref, b2, ref_dir);
	free(m);

	/* from a save directory: init_from names it, latest picks the checkpoint, and the run
	 * saves into it */
	char *sd = path_join(root, "savedir"), *sd3 = path_join(sd, "step_00000003");
	ck_assert_int_eq(mkdir(sd, 0777), 0);
	copy_dir(off3, sd3);
	set_latest(sd, "step_00000003");
	m = resume_from(sd);
	char *b3 = train_resume(root, "savedir", m, "{\"default\": \"selective\", \"sections\": "
		"{\"h.0\": \"full\"}}", NULL, 0, &r);
	expect_resumed("from the save dir", &r, &ref, b3, ref_dir);
	char *latest = latest_of(sd);
	ck_assert_str_eq(latest, "step_00000006");
	ck_assert_str_eq(listing(sd), "latest step_00000003 step_00000006");
	free(latest);
	free(m);

	free(b3);
	free(sd3);
	free(sd);
	free(b2);
	free(b1);
	free(mix6);
	free(mix3);
	free(off6);
	free(off3);
	free(ref6);
	free(mix);
	free(off);
	free(ref_dir);
	free(root);
}
END_TEST

/* ---- 3. crashes in the middle of a save ---- */

/* Starts remat-train on job with REMAT_CKPT_DELAY_US (set by the caller) in the
 * environment and its output in log; it dies with the test process. */
static pid_t spawn_train(const char *job, const char *log, const char *ctl)
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
static int wait_save_begins(const char *dir, pid_t pid, int ms)
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
static int latest_step(const char *dir)
{
	char *name = latest_of(dir);
	int step = name ? step_of(name) : -1;
	free(name);
	return step;
}

START_TEST(test_ckpt_write_killed_mid_save)
{
	need_gpl();
	char *root = tmp_dir("crash"), *sd = path_join(root, "save");
	char *log = path_join(root, "train.log");
	/* one good checkpoint first, so `latest` exists before the first kill */
	free(good_checkpoint(sd, 1, 1000000));
	char extra[4200];
	snprintf(extra, sizeof extra, ", \"save\": {\"dir\": \"%s\", \"every\": 1, \"keep\": 2}",
		sd);
	char *model = resume_from(sd);
	char *job = job_file(root, "crash.json", model, 1000000, 1, extra);
	setenv("REMAT_CKPT_DELAY_US", CRASH_DELAY_US, 1);
	long window = 0; /* ms from a save's .tmp to its `latest`, measured by kill 0 */
	int prev = 1, left_tmp = 0, advanced = 0;
	for (int i = 0; i < CRASH_KILLS; i++) {
		pid_t pid = spawn_train(job, log, NULL);
		int began = wait_save_begins(sd, pid, WAIT_MS);
		ck_assert_msg(began, "kill %d: no save began within %d ms; log:\n%s", i, WAIT_MS,
			td_slurp(log));
		long t0 = td_ms(), at;
		if (i == 0) {
			/* the first one is watched to its end and killed right after */
			while (latest_step(sd) == prev && td_ms() < t0 + WAIT_MS)
				usleep(500);
			at = window = td_ms() - t0;
		} else {
			/* the others spread over two windows: inside a save, and after one */
			at = 2 * window * (i - 1) / (CRASH_KILLS - 2);
			usleep((useconds_t)(at * 1000));
		}
		kill(pid, SIGKILL);
		int status;
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
			"kill %d: the worker ended by itself (status 0x%x); log:\n%s", i, status,
			td_slurp(log));
		left_tmp += count_suffix(sd, ".tmp") > 0;

		/* latest names a checkpoint that verifies, never older than the last one */
		char *name = latest_of(sd);
		ck_assert_msg(name != NULL, "kill %d (%ld ms into a save): no latest in %s: %s", i,
			at, sd, listing(sd));
		int step = step_of(name);
		ck_assert_msg(step >= prev, "kill %d: latest went back from step %d to %d", i, prev,
			step);
		advanced += i > 0 && step > prev;
		prev = step;
		char *ck = path_join(sd, name);
		eng_err err = {{0}};
		ck_assert_msg(eng_ckpt_verify(ck, &err) == 0, "kill %d (%ld ms into a save): "
			"latest '%s' does not verify: %s", i, at, name, err.msg);

		/* finding it removes what the interrupted save left */
		char found[ENG_PATH_LEN + 64];
		ck_assert_msg(eng_ckpt_find(sd, found, sizeof found, &err) == 0,
			"kill %d: find: %s", i, err.msg);
		ck_assert_str_eq(found, ck);
		ck_assert_msg(count_suffix(sd, ".tmp") == 0 && count_suffix(sd, ".old") == 0,
			"kill %d: left after find: %s", i, listing(sd));

		/* and a trainer resumes from it: init_from the save dir, one more step */
		eng_trainer tr;
		eng_step_stats st;
		trainer_from(&tr, model, step + 1, "");
		ck_assert_int_eq(tr.step, step);
		ck_assert_msg(eng_trainer_step(&tr, &st, &err) == 0, "kill %d: step: %s", i,
			err.msg);
		ck_assert_int_eq(tr.step, step + 1);
		eng_trainer_free(&tr);
		free(ck);
		free(name);
	}
	/* the kills landed inside saves and after them, and the runs went on from one another */
	ck_assert_msg(window > 0 && prev > 2, "latest reached only step %d", prev);
	ck_assert_msg(left_tmp >= CRASH_KILLS / 4, "only %d of %d kills interrupted a save "
		"(a save takes %ld ms)", left_tmp, CRASH_KILLS, window);
	ck_assert_msg(advanced >= 1, "no kill came after a save (a save takes %ld ms)", window);
	free(job);
	free(model);
	free(log);
	free(sd);
	free(root);
}
END_TEST

/* ---- 4. damaged checkpoints ---- */

/* The 8-byte little-endian header length of a safetensors buffer. */
static size_t st_hlen(const char *buf)
{
	uint64_t h = 0;
	for (int i = 0; i < 8; i++)
		h |= (uint64_t)(unsigned char)buf[i] << (8 * i);
	return (size_t)h;
}

typedef void (*header_edit)(json_t *header);

/* Rewrites the JSON header of the safetensors file at path with edit (the data section
 * unchanged; the header re-padded with spaces to a multiple of 8, as the writer does). */
static void edit_header(const char *path, header_edit edit)
{
	size_t len;
	char *buf = read_all(path, &len);
	size_t hlen = st_hlen(buf);
	ck_assert(hlen + 8 <= len);
	json_t *h = json_loadb(buf + 8, hlen, 0, NULL);
	ck_assert_ptr_nonnull(h);
	edit(h);
	char *text = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
	size_t n = strlen(text), padded = (n + 7) / 8 * 8;
	size_t out_len = 8 + padded + (len - 8 - hlen);
	char *out = malloc(out_len);
	ck_assert_ptr_nonnull(out);
	for (int i = 0; i < 8; i++)
		out[i] = (char)((uint64_t)padded >> (8 * i));
	memcpy(out + 8, text, n);
	memset(out + 8 + n, ' ', padded - n);
	memcpy(out + 8 + padded, buf + 8 + hlen, len - 8 - hlen);
	write_all(path, out, out_len);
	free(out);
	free(text);
	json_decref(h);
	free(buf);
}

/* Sets entry[key] of tensor name in a header. */
static void set_entry(json_t *h, const char *name, const char *key, json_t *value)
{
	json_t *t = json_object_get(h, name);
	ck_assert_msg(t != NULL, "no tensor '%s' in the header", name);
	json_object_set_new(t, key, value);
}

static void edit_overlap(json_t *h)
{
	/* wpe starts right after wte; 4 bytes earlier, it overlaps wte's last float */
	json_t *o = json_object_get(json_object_get(h, "transformer.wpe.weight"), "data_offsets");
	json_int_t b = json_integer_value(json_array_get(o, 0));
	json_int_t e = json_integer_value(json_array_get(o, 1));
	set_entry(h, "transformer.wpe.weight", "data_offsets", json_pack("[I,I]", b - 4, e - 4));
}

static void edit_dtype_i32(json_t *h)
{
	set_entry(h, "transformer.h.0.ln_1.weight", "dtype", json_string("I32"));
}

static void edit_dtype_f16(json_t *h)
{
	set_entry(h, "exp_avg.transformer.ln_f.bias", "dtype", json_string("F16"));
}

/* Shapes with the right number of elements but the wrong layout for config.json. */
static void edit_shape_wte(json_t *h)
{
	set_entry(h, "transformer.wte.weight", "shape", json_pack("[i,i]", 64, 256));
}

static void edit_shape_fc(json_t *h)
{
	set_entry(h, "transformer.h.1.mlp.c_fc.weight", "shape", json_pack("[i,i]", 256, 64));
}

static void edit_shape_moment(json_t *h)
{
	set_entry(h, "exp_avg_sq.transformer.h.0.attn.c_attn.weight", "shape",
		json_pack("[i,i]", 192, 64));
}

/* One kind of damage, done to file of a copy of a good checkpoint. */
typedef struct damage {
	const char *what;
	const char *file;     /* the file damaged, which the message must name */
	int op;               /* what is done to it (enum below) */
	header_edit edit;     /* DMG_HEADER */
	const char *needle;   /* in the message with the recorded checksums */
	const char *needle2;  /* with the checksums recomputed; NULL: then it verifies */
} damage;

enum { DMG_TRUNCATE, DMG_FLIP_DATA, DMG_FLIP_HEADER, DMG_HLEN, DMG_HEADER, DMG_NEMBD,
	DMG_REMOVE, DMG_TEXT, DMG_FORMAT, DMG_SUM };

#define SUM_MSG "does not match its SHA-256"
static const damage damages[] = {
	{"truncated model", "model.safetensors", DMG_TRUNCATE, NULL, "trainer_state.json says",
		"past the end"},
	/* a flipped data byte is a valid file: only the checksum can tell */
	{"flipped data byte", "optimizer.safetensors", DMG_FLIP_DATA, NULL, SUM_MSG, NULL},
	{"flipped header byte", "model.safetensors", DMG_FLIP_HEADER, NULL, SUM_MSG,
		"not valid JSON"},
	{"header length past the end", "model.safetensors", DMG_HLEN, NULL, SUM_MSG,
		"past the end of the file"},
	{"overlapping offsets", "model.safetensors", DMG_HEADER, edit_overlap, SUM_MSG,
		"overlap"},
	{"unknown dtype", "model.safetensors", DMG_HEADER, edit_dtype_i32, SUM_MSG,
		"unsupported dtype 'I32'"},
	{"wrong dtype", "optimizer.safetensors", DMG_HEADER, edit_dtype_f16, SUM_MSG,
		"F16 needs"},
	{"n_embd changed in config.json", "config.json", DMG_NEMBD, NULL, SUM_MSG,
		"does not match config.json"},
	{"wte's shape transposed", "model.safetensors", DMG_HEADER, edit_shape_wte, SUM_MSG,
		"transformer.wte.weight"},
	{"c_fc's shape transposed", "model.safetensors", DMG_HEADER, edit_shape_fc, SUM_MSG,
		"transformer.h.1.mlp.c_fc.weight"},
	{"a moment's shape transposed", "optimizer.safetensors", DMG_HEADER, edit_shape_moment,
		SUM_MSG, "exp_avg_sq.transformer.h.0.attn.c_attn.weight"},
	{"missing optimizer", "optimizer.safetensors", DMG_REMOVE, NULL, "is missing", NULL},
	{"missing config", "config.json", DMG_REMOVE, NULL, "is missing", NULL},
	{"missing state", "trainer_state.json", DMG_REMOVE, NULL, "trainer_state.json", NULL},
	{"state not JSON", "trainer_state.json", DMG_TEXT, NULL, "trainer_state.json", NULL},
	{"state of format 2", "trainer_state.json", DMG_FORMAT, NULL, "format-1", NULL},
	{"wrong checksum in the state", "model.safetensors", DMG_SUM, NULL, SUM_MSG, NULL},
};
#define NDAMAGES (sizeof damages / sizeof damages[0])

static void damage_do(const char *ckpt, const damage *d)
{
	/* a wrong checksum names the file it is of, and is written into the state */
	char *p = path_join(ckpt, d->op == DMG_SUM ? "trainer_state.json" : d->file);
	size_t len;
	char *buf = d->op == DMG_REMOVE ? NULL : read_all(p, &len);
	switch (d->op) {
	case DMG_TRUNCATE:
		write_all(p, buf, len / 2);
		break;
	case DMG_FLIP_DATA:
		buf[len - 3] ^= 0x10; /* a float's exponent bits, near the end */
		write_all(p, buf, len);
		break;
	case DMG_FLIP_HEADER:
		buf[8] = '}'; /* the header's opening brace */
		write_all(p, buf, len);
		break;
	case DMG_HLEN:
		for (int i = 0; i < 8; i++) /* 8 + hlen = len + 8: the header ends past the file */
			buf[i] = (char)((uint64_t)len >> (8 * i));
		write_all(p, buf, len);
		break;
	case DMG_HEADER:
		edit_header(p, d->edit);
		break;
	case DMG_NEMBD: {
		char *at = strstr(buf, "\"n_embd\": 64");
		ck_assert_msg(at != NULL, "config.json has no \"n_embd\": 64:\n%s", buf);
		memcpy(at + strlen("\"n_embd\": "), "32", 2); /* n_head 4 still divides 32 */
		write_all(p, buf, len);
		break;
	}
	case DMG_REMOVE:
		ck_assert_int_eq(unlink(p), 0);
		break;
	case DMG_TEXT:
		write_text(p, "{\"format_version\": 1, \"step\": ");
		break;
	case DMG_FORMAT:
	case DMG_SUM: {
		json_t *o = json_loadb(buf, len, 0, NULL);
		ck_assert_ptr_nonnull(o);
		if (d->op == DMG_FORMAT)
			json_object_set_new(o, "format_version", json_integer(2));
		else
			json_object_set_new(json_object_get(json_object_get(o, "files"), d->file),
				"sha256", json_string("0123456789abcdef0123456789abcdef"
						      "0123456789abcdef0123456789abcdef"));
		ck_assert_int_eq(json_dump_file(o, p, JSON_INDENT(2) | JSON_PRESERVE_ORDER), 0);
		json_decref(o);
		break;
	}
	}
	free(buf);
	free(p);
}

/* Records in trainer_state.json the size and SHA-256 the files have now. */
static void recompute_sums(const char *ckpt)
{
	char *sp = path_join(ckpt, "trainer_state.json");
	json_t *o = json_load_file(sp, 0, NULL);
	ck_assert_ptr_nonnull(o);
	json_t *files = json_object_get(o, "files");
	for (size_t i = 0; i < NFILES - 1; i++) {
		char *p = path_join(ckpt, ckpt_files[i]), hex[65];
		struct stat st;
		eng_err err;
		ck_assert_int_eq(stat(p, &st), 0);
		ck_assert_msg(eng_sha256_file(p, hex, &err) == 0, "%s", err.msg);
		json_object_set_new(files, ckpt_files[i], json_pack("{s:s,s:I}", "sha256", hex,
			"bytes", (json_int_t)st.st_size));
		free(p);
	}
	ck_assert_int_eq(json_dump_file(o, sp, JSON_INDENT(2) | JSON_PRESERVE_ORDER), 0);
	json_decref(o);
	free(sp);
}

/* remat-train init_from ckpt with resume: exit 1 (not a signal), one line on stderr that
 * names the file (NULL: it must train instead). */
static void expect_train_refuses(const char *root, const char *ckpt, const char *what,
	const char *file, const char *needle)
{
	char *model = resume_from(ckpt);
	char *job = job_file(root, "damaged.json", model, 2, 1, ""); /* one step, if any */
	const char *args[] = {job, NULL};
	char *err;
	int rc = train_run(&err, 1, args);
	if (!file) {
		ck_assert_msg(rc == 0, "%s: remat-train refused it (%d): %s", what, rc, err);
	} else {
		ck_assert_msg(rc == 1, "%s: remat-train exit status %d, want 1:\n%s", what, rc,
			err);
		ck_assert_msg(strncmp(err, "remat-train: ", 13) == 0 && strchr(err, '\n') ==
			err + strlen(err) - 1, "%s: want one line on stderr, got:\n%s", what, err);
		ck_assert_msg(strstr(err, file) && strstr(err, needle), "%s: remat-train's message "
			"lacks '%s' or '%s': %s", what, file, needle, err);
	}
	free(err);
	free(job);
	free(model);
}

START_TEST(test_ckpt_verify_damaged)
{
	need_gpl();
	char *root = tmp_dir("damage");
	char *good = good_checkpoint(root, 1, 1000);
	ck_assert_int_eq(eng_ckpt_verify(good, NULL), 0);
	int n = 0;
	for (size_t i = 0; i < NDAMAGES; i++) {
		const damage *d = &damages[i];
		for (int resum = 0; resum < 2; resum++) {
			if (resum && d->op >= DMG_REMOVE)
				continue; /* damage to trainer_state.json, or a missing file */
			char what[128], name[64];
			snprintf(what, sizeof what, "%s%s", d->what,
				resum ? " (sums recomputed)" : "");
			/* each copy alone in its save dir: no other checkpoint to offer */
			snprintf(name, sizeof name, "d%02d%d", (int)i, resum);
			char *dir = tmp_dir(name), *ckpt = path_join(dir, "step_00000001");
			copy_dir(good, ckpt);
			damage_do(ckpt, d);
			if (resum)
				recompute_sums(ckpt);
			const char *needle = resum ? d->needle2 : d->needle;
			eng_err err = {{0}};
			int rc = eng_ckpt_verify(ckpt, &err);
			if (!needle) {
				ck_assert_msg(rc == 0, "%s: refused: %s", what, err.msg);
				expect_train_refuses(root, ckpt, what, NULL, NULL);
			} else {
				ck_assert_msg(rc == -1, "%s: eng_ckpt_verify accepted it", what);
				ck_assert_msg(strstr(err.msg, d->file) && strstr(err.msg, needle),
					"%s: message lacks '%s' or '%s': %s", what, d->file, needle,
					err.msg);
				expect_train_refuses(root, ckpt, what, d->file, needle);
			}
			n++;
			free(ckpt);
			free(dir);
		}
	}
	ck_assert_int_ge(n, 25);
	free(good);
	free(root);
}
END_TEST

START_TEST(test_ckpt_find_offers_previous)
{
	need_gpl();
	char *root = tmp_dir("previous"), *sd = path_join(root, "save");
	char extra[4200];
	snprintf(extra, sizeof extra, ", \"save\": {\"dir\": \"%s\"}", sd);
	eng_trainer tr;
	eng_step_stats st;
	eng_err err = {{0}};
	char path[ENG_PATH_LEN + 64];
	trainer_from(&tr, TINY, 1000, extra);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(eng_trainer_step(&tr, &st, &err), 0);
		ck_assert_msg(eng_trainer_save(&tr, NULL, path, sizeof path, NULL, &err) == 0, "%s",
			err.msg);
	}
	eng_trainer_free(&tr);
	char *s1 = path_join(sd, "step_00000001"), *s2 = path_join(sd, "step_00000002");
	char *latest = latest_of(sd);
	ck_assert_str_eq(latest, "step_00000002");
	free(latest);
	damage_do(s2, &damages[0]); /* model.safetensors truncated */

	/* the save dir: the previous one, and the message says why the newest was passed over */
	char found[ENG_PATH_LEN + 64];
	ck_assert_msg(eng_ckpt_find(sd, found, sizeof found, &err) == 0, "find: %s", err.msg);
	ck_assert_str_eq(found, s1);
	ck_assert_msg(strstr(err.msg, "step_00000002") && strstr(err.msg, "model.safetensors"),
		"find's message: %s", err.msg);
	ck_assert_int_eq(eng_ckpt_previous(s2, found, sizeof found), 0);
	ck_assert_str_eq(found, s1);

	/* a job from the save dir resumes at step 1 */
	char *m = resume_from(sd);
	trainer_from(&tr, m, 1000, "");
	ck_assert_int_eq(tr.step, 1);
	eng_trainer_free(&tr);
	free(m);

	/* init_from the damaged one: refused, naming the newest that verifies */
	m = resume_from(s2);
	char *text = job_text(m, 1000, 1, "");
	eng_spec spec;
	ck_assert_msg(eng_spec_parse(&spec, text, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(eng_trainer_init(&tr, &spec, &err), -1);
	ck_assert_msg(strstr(err.msg, "model.safetensors") && strstr(err.msg, s1) &&
		strstr(err.msg, "the newest checkpoint that verifies"), "message: %s", err.msg);
	expect_train_refuses(root, s2, "damaged newest", "model.safetensors", s1);
	free(text);
	free(m);

	/* nothing verifies: find fails and says why */
	damage_do(s1, &damages[0]);
	ck_assert_int_eq(eng_ckpt_find(sd, found, sizeof found, &err), -1);
	ck_assert_msg(strstr(err.msg, "model.safetensors"), "find's message: %s", err.msg);
	free(s2);
	free(s1);
	free(sd);
	free(root);
}
END_TEST

/* A crash while a checkpoint is saved again under the name `latest` holds (the final save
 * of a run stopped right after a periodic one, or ckpt-save of one name twice): the old
 * directory was moved to <name>.old and the new one not yet renamed into place. */
START_TEST(test_ckpt_find_resave_interrupted)
{
	need_gpl();
	char *root = tmp_dir("resave"), *sd = path_join(root, "save");
	char *ck = good_checkpoint(sd, 1, 1000);
	char *old = path_join(sd, "step_00000001.old"), *tmp = path_join(sd, "step_00000001.tmp");
	copy_dir(ck, tmp);
	ck_assert_int_eq(rename(ck, old), 0);
	char found[ENG_PATH_LEN + 64];
	eng_err err = {{0}};
	ck_assert_msg(eng_ckpt_find(sd, found, sizeof found, &err) == 0, "no checkpoint found "
		"(%s) in: %s", err.msg, listing(sd));
	ck_assert_str_eq(found, ck);
	ck_assert_str_eq(listing(sd), "latest step_00000001");

	/* after the second rename: the new one is in place, the old one goes */
	copy_dir(ck, old);
	ck_assert_int_eq(eng_ckpt_find(sd, found, sizeof found, &err), 0);
	ck_assert_str_eq(found, ck);
	ck_assert_str_eq(listing(sd), "latest step_00000001");
	free(tmp);
	free(old);
	free(ck);
	free(sd);
	free(root);
}
END_TEST

/* ---- 5. the reference weights, loaded and saved ---- */

static void round_trip(const char *which)
{
	char rel[64];
	snprintf(rel, sizeof rel, "reference/%s", which);
	char *ref = t_data(rel), *sd = tmp_dir("roundtrip");
	char *orig_st = path_join(ref, "model.safetensors"), *orig_cfg = path_join(ref,
		"config.json");
	char *train = path_join(ref, "train.bin");
	eng_trainer tr;
	t_trainer(&tr, "{\"model\": {\"init_from\": \"%s\"}, \"data\": {\"train\": \"%s\"}, "
		"\"batch\": 2, \"seq_len\": 16, \"steps\": 1, \"threads\": 1, \"save\": {\"dir\": "
		"\"%s\"}}", ref, train, sd);
	char out[ENG_PATH_LEN + 64];
	eng_err err = {{0}};
	ck_assert_msg(eng_trainer_save(&tr, NULL, out, sizeof out, NULL, &err) == 0, "%s",
		err.msg);
	eng_trainer_free(&tr);
	ck_assert_msg(eng_ckpt_verify(out, &err) == 0, "%s: %s", out, err.msg);

	/* every tensor, bit for bit, and no other */
	char *saved_st = path_join(out, "model.safetensors");
	eng_st_file a, b;
	ck_assert_msg(eng_st_read(&a, orig_st, &err) == 0, "%s", err.msg);
	ck_assert_msg(eng_st_read(&b, saved_st, &err) == 0, "%s", err.msg);
	ck_assert_msg(a.n == b.n, "%s: %d tensors, the reference %d", which, b.n, a.n);
	for (int i = 0; i < a.n; i++) {
		const eng_st_tensor *ta = &a.t[i], *tb = eng_st_find(&b, ta->name);
		ck_assert_msg(tb != NULL, "%s: '%s' not saved", which, ta->name);
		ck_assert_msg(ta->dtype == ENG_ST_F32 && tb->dtype == ENG_ST_F32 &&
			ta->ndim == tb->ndim && memcmp(ta->shape, tb->shape, sizeof ta->shape) == 0,
			"%s: '%s' saved with another dtype or shape", which, ta->name);
		ck_assert_msg(memcmp(a.data + ta->begin, b.data + tb->begin, ta->end - ta->begin) ==
			0, "%s: '%s' saved with other values (%s)", which, ta->name,
			first_diff(orig_st, saved_st));
	}
	eng_st_free(&a);
	eng_st_free(&b);

	/* the same shape in config.json */
	char *saved_cfg = path_join(out, "config.json");
	eng_config ca, cb;
	ck_assert_msg(eng_hfconfig_read(orig_cfg, &ca, &err) == 0, "%s", err.msg);
	ck_assert_msg(eng_hfconfig_read(saved_cfg, &cb, &err) == 0, "%s", err.msg);
	ck_assert_msg(ca.n_layer == cb.n_layer && ca.n_embd == cb.n_embd &&
		ca.n_head == cb.n_head && ca.n_positions == cb.n_positions &&
		ca.vocab_size == cb.vocab_size, "%s: config.json saved with another shape", which);
	free(saved_cfg);
	free(saved_st);
	free(train);
	free(orig_cfg);
	free(orig_st);
	free(sd);
	free(ref);
}

START_TEST(test_ckpt_write_reference_round_trip)
{
	round_trip("tiny");
	round_trip("odd");
}
END_TEST

/* ---- 6. one save at a time, and pruning ---- */

/* Reads replies (skipping events) until the one with id; counts step_*.tmp directories in
 * dir at every wake-up and returns it (new reference). */
static json_t *reply_with_id(td_conn *c, int id, const char *dir, int *max_tmp)
{
	long end = td_ms() + WAIT_MS;
	while (td_ms() < end) {
		int n = count_suffix(dir, ".tmp");
		*max_tmp = n > *max_tmp ? n : *max_tmp;
		json_t *o = td_read_msg(c, 20);
		if (!o)
			continue;
		if (!json_object_get(o, "event") &&
			json_integer_value(json_object_get(o, "id")) == id)
			return o;
		json_decref(o);
	}
	ck_abort_msg("no reply to request %d within %d ms", id, WAIT_MS);
	return NULL;
}

START_TEST(test_ckpt_writer_busy_over_control)
{
	need_gpl();
	char *root = tmp_dir("busy"), *sd = path_join(root, "save");
	char *sock = path_join(root, "ctl.sock"), *log = path_join(root, "train.log");
	char extra[4200];
	snprintf(extra, sizeof extra, ", \"save\": {\"dir\": \"%s\"}", sd);
	char *job = job_file(root, "busy.json", TINY, 1000000, 1, extra);
	setenv("REMAT_CKPT_DELAY_US", BUSY_DELAY_US, 1);
	pid_t pid = spawn_train(job, log, sock);

	/* connect once it listens, and wait until it trains */
	td_conn c = {.fd = -1};
	for (long end = td_ms() + WAIT_MS; c.fd < 0 && td_ms() < end; td_sleep_ms(10)) {
		ck_assert_msg(waitpid(pid, NULL, WNOHANG) == 0, "remat-train exited:\n%s",
			td_slurp(log));
		c.fd = td_connect(sock);
	}
	ck_assert_msg(c.fd >= 0, "remat-train does not listen on %s:\n%s", sock, td_slurp(log));
	json_t *g = td_read_msg(&c, T_READ_MS);
	ck_assert_msg(g && json_object_get(g, "remat"), "no greeting");
	json_decref(g);
	for (long end = td_ms() + WAIT_MS;; td_sleep_ms(10)) {
		ck_assert_msg(td_ms() < end, "no step within %d ms:\n%s", WAIT_MS, td_slurp(log));
		json_t *r = td_request(&c, "{\"execute\":\"job-status\",\"arguments\":{\"job\":"
					   "\"job\"},\"id\":0}");
		json_t *ret = json_object_get(r, "return");
		int step = (int)json_integer_value(json_object_get(ret, "step"));
		json_decref(r);
		if (step > 0)
			break;
	}

	/* two saves back to back, in one write: the second finds the first being written */
	static const char two[] =
		"{\"execute\":\"ckpt-save\",\"arguments\":{\"job\":\"job\"},\"id\":1}\n"
		"{\"execute\":\"ckpt-save\",\"arguments\":{\"job\":\"job\"},\"id\":2}\n";
	td_send_raw(&c, two, sizeof two - 1);
	int max_tmp = 0;
	json_t *r2 = reply_with_id(&c, 2, sd, &max_tmp);
	const char *desc = td_expect_error(r2, "Busy");
	ck_assert_msg(strstr(desc, "being written"), "Busy says: %s", desc);
	json_t *r1 = reply_with_id(&c, 1, sd, &max_tmp);
	json_t *ret = td_expect_return(r1);
	const char *path = td_str(ret, "path");
	ck_assert_msg(strncmp(path, sd, strlen(sd)) == 0 && strstr(path, "/step_"), "path %s",
		path);
	eng_err err = {{0}};
	ck_assert_msg(eng_ckpt_verify(path, &err) == 0, "%s: %s", path, err.msg);
	ck_assert_msg(max_tmp <= 1, "%d saves were being written at once", max_tmp);
	ck_assert_int_eq(count_suffix(sd, ".tmp"), 0);
	/* one checkpoint: the refused request wrote nothing */
	char want[128];
	snprintf(want, sizeof want, "latest %s", strrchr(path, '/') + 1);
	ck_assert_str_eq(listing(sd), want);
	json_decref(r1);
	json_decref(r2);

	/* once it is written, the next one is taken */
	td_send(&c, "{\"execute\":\"ckpt-save\",\"arguments\":{\"job\":\"job\",\"name\":"
		    "\"named\"},\"id\":3}");
	json_t *r3 = reply_with_id(&c, 3, sd, &max_tmp);
	ret = td_expect_return(r3);
	char *named = path_join(sd, "named");
	ck_assert_str_eq(td_str(ret, "path"), named);
	ck_assert_msg(max_tmp <= 1, "%d saves were being written at once", max_tmp);
	json_decref(r3);
	char *latest = latest_of(sd);
	ck_assert_str_eq(latest, "named");
	free(latest);

	/* stop without a save; the worker exits 0 */
	json_t *rs = td_request(&c, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"job\"},"
				    "\"id\":4}");
	td_expect_return(rs);
	json_decref(rs);
	int status = td_wait_pid(pid, WAIT_MS);
	ck_assert_msg(status == 0, "remat-train ended with %d:\n%s", status, td_slurp(log));
	td_close(&c);
	free(named);
	free(job);
	free(log);
	free(sock);
	free(sd);
	free(root);
}
END_TEST

static int saved_count; /* checkpoints the writer thread reported written */

static void on_done(void *ud, int ok, const eng_ckpt_result *res, const char *msg)
{
	(void)ud;
	(void)res;
	ck_assert_msg(ok, "the writer failed: %s", msg);
	saved_count++;
}

START_TEST(test_ckpt_writer_submit_busy)
{
	need_gpl();
	char *root = tmp_dir("writer"), *sd = path_join(root, "save");
	char extra[4200];
	snprintf(extra, sizeof extra, ", \"save\": {\"dir\": \"%s\"}", sd);
	eng_trainer tr;
	eng_err err;
	trainer_from(&tr, TINY, 1000, extra); /* creates sd */
	setenv("REMAT_CKPT_DELAY_US", "50000", 1); /* a save spans 0.3 s */
	eng_ckpt_writer *w = eng_ckpt_writer_start();
	ck_assert_ptr_nonnull(w);
	eng_ckpt_snap a, b;
	ck_assert_int_eq(eng_ckpt_snap_take(&a, &tr, &err), 0);
	ck_assert_int_eq(eng_ckpt_writer_submit(w, &a, sd, NULL, 3, on_done, NULL), 0);
	ck_assert_ptr_null(a.params); /* the writer owns it now */
	ck_assert_int_eq(eng_ckpt_writer_busy(w), 1);
	ck_assert_int_eq(eng_ckpt_snap_take(&b, &tr, &err), 0);
	ck_assert_int_eq(eng_ckpt_writer_submit(w, &b, sd, "second", 3, on_done, NULL), -1);
	ck_assert_ptr_nonnull(b.params); /* refused: still the caller's */
	eng_ckpt_writer_wait(w);
	ck_assert_int_eq(eng_ckpt_writer_busy(w), 0);
	ck_assert_int_eq(saved_count, 1);
	ck_assert_str_eq(listing(sd), "latest step_00000000");
	/* idle again: the refused snapshot is taken now */
	ck_assert_int_eq(eng_ckpt_writer_submit(w, &b, sd, "second", 3, on_done, NULL), 0);
	eng_ckpt_writer_stop(w); /* waits for it */
	ck_assert_int_eq(saved_count, 2);
	ck_assert_str_eq(listing(sd), "latest second step_00000000");
	eng_trainer_free(&tr);
	free(sd);
	free(root);
}
END_TEST

/* Writes snapshot s as step `step` (or as name) into dir, keeping keep. */
static void write_as(eng_ckpt_snap *s, const char *dir, int step, const char *name, int keep)
{
	eng_ckpt_result res;
	eng_err err = {{0}};
	s->step = step;
	ck_assert_msg(eng_ckpt_write(s, dir, name, keep, &res, &err) == 0, "write %d: %s", step,
		err.msg);
	ck_assert_int_eq(res.step, step);
	ck_assert_int_eq(eng_ckpt_verify(res.path, &err), 0);
}

START_TEST(test_ckpt_write_keep_prunes)
{
	need_gpl();
	char *root = tmp_dir("keep"), *sd = path_join(root, "save");
	eng_trainer tr;
	eng_err err;
	trainer_from(&tr, TINY, 1000, "");
	ck_assert_int_eq(mkdir(sd, 0777), 0);
	eng_ckpt_snap s;
	ck_assert_int_eq(eng_ckpt_snap_take(&s, &tr, &err), 0);
	for (int step = 1; step <= 5; step++)
		write_as(&s, sd, step, NULL, 2);
	ck_assert_str_eq(listing(sd), "latest step_00000004 step_00000005");

	/* a named checkpoint is never pruned, and counts for none of the keep */
	write_as(&s, sd, 6, "best", 2);
	ck_assert_str_eq(listing(sd), "best latest step_00000004 step_00000005");
	write_as(&s, sd, 7, NULL, 1);
	ck_assert_str_eq(listing(sd), "best latest step_00000007");

	/* a save older than the newest step_ (a resume from an earlier checkpoint): latest
	 * names it, and keep 1 keeps the newest step_ besides it */
	write_as(&s, sd, 8, NULL, 10);
	write_as(&s, sd, 9, NULL, 10);
	write_as(&s, sd, 3, NULL, 1);
	char *latest = latest_of(sd);
	ck_assert_str_eq(latest, "step_00000003");
	ck_assert_str_eq(listing(sd), "best latest step_00000003 step_00000009");
	free(latest);
	char found[ENG_PATH_LEN + 64];
	ck_assert_int_eq(eng_ckpt_find(sd, found, sizeof found, &err), 0);
	ck_assert_msg(strstr(found, "step_00000003") != NULL, "find: %s", found);
	eng_ckpt_snap_free(&s);
	eng_trainer_free(&tr);
	free(sd);
	free(root);
}
END_TEST

START_TEST(test_ckpt_write_name_checked)
{
	need_gpl();
	char *root = tmp_dir("names"), *sd = path_join(root, "save");
	eng_trainer tr;
	eng_err err = {{0}};
	trainer_from(&tr, TINY, 1000, "");
	ck_assert_int_eq(mkdir(sd, 0777), 0);
	eng_ckpt_snap s;
	ck_assert_int_eq(eng_ckpt_snap_take(&s, &tr, &err), 0);
	write_as(&s, sd, 1, NULL, 3);
	/* the protocol's longest name (64) is kept whole */
	char name[80];
	memset(name, 'n', 64);
	name[64] = '\0';
	write_as(&s, sd, 2, name, 3);
	char *latest = latest_of(sd), want[256];
	ck_assert_str_eq(latest, name);
	free(latest);
	snprintf(want, sizeof want, "latest %s step_00000001", name);
	ck_assert_str_eq(listing(sd), want);

	/* one more is refused, and so are the save directory's own names: nothing changes */
	strcat(name, "n");
	const char *bad[] = {name, "latest", "step_00000001.tmp", "step_00000001.old", ".hidden",
		"a/b"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		eng_ckpt_result res;
		ck_assert_msg(eng_ckpt_write(&s, sd, bad[i], 3, &res, &err) == -1, "'%s' accepted",
			bad[i]);
		ck_assert_msg(strstr(err.msg, "checkpoint name") != NULL, "'%s': %s", bad[i],
			err.msg);
		ck_assert_str_eq(listing(sd), want);
	}
	eng_ckpt_snap_free(&s);
	eng_trainer_free(&tr);
	free(sd);
	free(root);
}
END_TEST

Suite *suite_ckpt(void)
{
	Suite *s = suite_create("ckpt");
	TCase *tc = tcase_create("files");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_ckpt_write_same_under_every_policy);
	tcase_add_test(tc, test_ckpt_resume_bit_exact);
	tcase_add_test(tc, test_ckpt_write_reference_round_trip);
	tcase_add_test(tc, test_ckpt_write_keep_prunes);
	tcase_add_test(tc, test_ckpt_write_name_checked);
	suite_add_tcase(s, tc);

	tc = tcase_create("damage");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_ckpt_verify_damaged);
	tcase_add_test(tc, test_ckpt_find_offers_previous);
	tcase_add_test(tc, test_ckpt_find_resave_interrupted);
	suite_add_tcase(s, tc);

	/* real time: kills and saves slowed by REMAT_CKPT_DELAY_US; generous for a loaded or
	 * sanitizer build, the tests themselves take seconds */
	tc = tcase_create("crash");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_ckpt_write_killed_mid_save);
	tcase_add_test(tc, test_ckpt_writer_busy_over_control);
	tcase_add_test(tc, test_ckpt_writer_submit_busy);
	suite_add_tcase(s, tc);
	return s;
}
