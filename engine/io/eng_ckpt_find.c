/* eng_ckpt_find.c - reading full checkpoints (see eng_ckpt.h): verifying a checkpoint
 * (checksums, the readers' checks, every tensor config.json implies), cleaning a save
 * directory at a job's start, finding the newest that verifies, and resuming from one.
 * Not here: writing, and the save directory's listing (eng_ckpt_write.c), the writer
 * thread (eng_ckpt_writer.c).
 */
#include "eng_ckpt_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_fs.h"
#include "eng_hfconfig.h"
#include "eng_peft.h"
#include "eng_sha256.h"
#include "eng_st.h"
#include "eng_state_json.h"

/* ---- verifying and finding ---- */

/* trainer_state.json's counts, where present: integers in their ranges, each refused by its
 * key (a negative step would otherwise pass for a batch shape that differs). The values are
 * never quoted: they are the file's. */
static int state_counts(const json_t *o, const char *ckpt, eng_err *err)
{
	static const struct {
		const char *obj, *key; /* obj: the object of o holding key, NULL for o itself */
		json_int_t lo;
	} k[] = {
		{NULL, "step", 0}, {NULL, "batch", 1}, {NULL, "seq_len", 1},
		{NULL, "grad_accum", 1}, {"data", "tokens", 0}, {"data", "cursor", 0},
		{"data", "epoch", 0}, {"data", "sample", 0}, {"data", "sample_tokens", 1},
	};
	for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
		const json_t *in = k[i].obj ? json_object_get(o, k[i].obj) : o;
		json_t *v = json_object_get(in, k[i].key);
		/* the step and the batch shape are ints in the run; the data's counts are not */
		json_int_t hi = k[i].obj ? LLONG_MAX : INT_MAX;
		if (v && (!json_is_integer(v) || json_integer_value(v) < k[i].lo ||
			json_integer_value(v) > hi))
			return eng_errf(err, "checkpoint '%s': trainer_state.json's \"%s%s%s\" is not "
				"an integer in %lld..%lld", ckpt, k[i].obj ? k[i].obj : "",
				k[i].obj ? "." : "", k[i].key, (long long)k[i].lo, (long long)hi);
	}
	return 0;
}

static json_t *load_state(const char *ckpt, eng_err *err)
{
	char p[CKPT_PATH];
	json_error_t je;
	if (join(p, sizeof p, ckpt, "/trainer_state.json") < 0) {
		eng_errf(err, "checkpoint path too long");
		return NULL;
	}
	FILE *f = eng_fs_fopen_read(p, "checkpoint file", err);
	if (!f)
		return NULL;
	json_t *o = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
	fclose(f);
	if (!o) {
		char why[96];
		eng_errf(err, "checkpoint '%s': trainer_state.json is not valid JSON: %s", ckpt,
			eng_err_json(&je, why, sizeof why));
		return NULL;
	}
	json_int_t fmt = json_integer_value(json_object_get(o, "format_version"));
	if (!json_is_object(o) || fmt != ENG_CKPT_FORMAT || !json_is_integer(json_object_get(o,
		"step")) || !json_is_object(json_object_get(o, "files"))) {
		eng_errf(err, "checkpoint '%s': trainer_state.json is not a format-%d state "
			      "(format_version, step, files)", ckpt, ENG_CKPT_FORMAT);
		json_decref(o);
		return NULL;
	}
	if (state_counts(o, ckpt, err) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static const char *const model_prefix[] = {""};
static const char *const adapter_prefix[] = {ENG_PEFT_PREFIX}; /* the adapters alone */
static const char *const moment_prefix[] = {"exp_avg.", "exp_avg_sq."};

/* What check_one needs to word its message. */
typedef struct tensor_check {
	const char *ckpt, *file;
	const eng_st_file *st;
	eng_err *err;
} tensor_check;

static int check_one(const tensor_check *k, const char *name, int ndim, int64_t d0,
	int64_t d1)
{
	const eng_st_tensor *t = eng_st_find(k->st, name);
	if (!t)
		return eng_errf(k->err, "checkpoint '%s': %s does not match config.json: no tensor "
					"'%s'", k->ckpt, k->file, name);
	if (t->dtype != ENG_ST_F32)
		return eng_errf(k->err, "checkpoint '%s': %s: tensor '%s' is %s, a checkpoint "
					"holds F32", k->ckpt, k->file, name,
			eng_st_dtype_name(t->dtype));
	if (t->ndim != ndim || t->shape[0] != d0 || (ndim == 2 && t->shape[1] != d1)) {
		char has[96] = "[", want[48];
		for (int i = 0; i < t->ndim; i++) {
			size_t n = strlen(has);
			snprintf(has + n, sizeof has - n, "%s%lld", i ? ", " : "",
				(long long)t->shape[i]);
		}
		strcat(has, "]"); /* 4 dims of 19 digits and separators fit in 96 */
		snprintf(want, sizeof want, ndim == 2 ? "[%lld, %lld]" : "[%lld]", (long long)d0,
			(long long)d1);
		return eng_errf(k->err, "checkpoint '%s': %s does not match config.json: tensor "
					"'%s' has shape %s, config.json's shape needs %s", k->ckpt,
			k->file, name, has, want);
	}
	return 0;
}

/* 1 when the directory open as fd is ckpt's own base: ckpt's ENG_PEFT_BASE_DIR (given
 * files BASE_FILES) or, from an older remat, ckpt itself (F(0)) */
static int own_base(int fd, const char *ckpt, unsigned files)
{
	eng_dir cd, sub;
	eng_err e;
	struct stat sb, sc;
	int same = 0;
	if (eng_dir_open(&cd, ckpt, &e) < 0)
		return 0;
	if (files & F(BASE_W)) {
		if (eng_dir_open_at(&sub, &cd, ENG_PEFT_BASE_DIR, &e) == 0) {
			same = fstat(fd, &sb) == 0 && fstat(sub.fd, &sc) == 0;
			eng_dir_close(&sub);
		}
	} else {
		same = fstat(fd, &sb) == 0 && fstat(cd.fd, &sc) == 0;
	}
	eng_dir_close(&cd);
	return same && sb.st_dev == sc.st_dev && sb.st_ino == sc.st_ino;
}

/* A LoRA checkpoint's base as adapter_config.json names it (base): its own, whose files
 * (model.safetensors, config.json) trainer_state.json must list, or an external one it
 * must have pinned ("lora_base"), found as it was saved */
static int lora_base_fits(const json_t *o, const char *ckpt, const char *base,
	unsigned files, eng_err *err)
{
	char pin[ENG_PEFT_PIN_LEN];
	json_t *was = json_object_get(o, "lora_base"), *now;
	eng_dir bd;
	if (eng_dir_open(&bd, base, NULL) < 0) /* a path the file holds: eng_err_path */
		return eng_errf(err, "checkpoint '%s': its base '%s': %s", ckpt, eng_err_path(base),
			strerror(errno));
	int self = own_base(bd.fd, ckpt, files), rc = -1;
	if (self != ((files & (F(0) | F(BASE_W))) != 0) || self == (was != NULL))
		eng_errf(err, "checkpoint '%s': adapter_config.json's base and trainer_state.json "
			      "disagree (%s)", ckpt, self ?
			      "it names itself but its base's files are not listed" :
			      "an external base, not pinned");
	else if (self)
		rc = 0;
	else if (eng_peft_base_pin(&bd, pin, sizeof pin, err) == 0) {
		now = json_loads(pin, 0, NULL);
		rc = now && json_equal(was, now) ? 0 :
			eng_errf(err, "checkpoint '%s': its base '%s' changed since it was saved "
				      "(its config.json, or its weights' size, inode or time)",
				ckpt, eng_err_path(base));
		json_decref(now);
	}
	eng_dir_close(&bd);
	return rc;
}

/* The tensors trainer_state.json's "frozen" names (none when absent), as cfg's frozen bits
 * (over any cfg had); -1 when it names one the model has not. */
static int frozen_of_state(const json_t *o, const char *ckpt, eng_config *cfg, eng_err *err)
{
	json_t *list = json_object_get(o, "frozen"), *v;
	size_t i;
	int nt = eng_model_ntensors(cfg), rc = 0;
	if (!list)
		return 0;
	eng_ptensor *tab = calloc((size_t)nt, sizeof *tab);
	if (!tab || !json_is_array(list)) {
		free(tab);
		return eng_errf(err, "checkpoint '%s': trainer_state.json's \"frozen\" is not a list "
				     "of tensor names", ckpt);
	}
	eng_model_table(cfg, tab, NULL);
	json_array_foreach(list, i, v) {
		int t = 0;
		while (t < nt && !(json_is_string(v) && strcmp(tab[t].name, json_string_value(v)) == 0))
			t++;
		if (t == nt) {
			rc = eng_errf(err, "checkpoint '%s': trainer_state.json's \"frozen\" names a "
					   "tensor config.json's model has not", ckpt);
			break;
		}
		eng_config_freeze(cfg, t);
	}
	free(tab);
	return rc;
}

/* The tensors of st are exactly those config.json implies, under each prefix: F32, with
 * their shapes, and no other; under two prefixes (the moments) the trainable ones only
 * (cfg's frozen bits, from trainer_state.json). */
static int check_tensors(const char *ckpt, const char *file, const eng_st_file *st,
	const eng_config *cfg, const char *const *prefix, int nprefix, eng_err *err)
{
	int nt = eng_model_ntensors(cfg), want = 0;
	tensor_check k = {ckpt, file, st, err};
	eng_ptensor *tab = calloc((size_t)nt, sizeof *tab);
	char name[ENG_NAME_MAX + 16];
	if (!tab)
		return eng_errf(err, "out of memory");
	eng_model_table(cfg, tab, NULL);
	int nb = eng_lora_base_tensors(cfg), adapters = prefix == adapter_prefix;
	for (int i = 0; i < nprefix; i++)
		for (int t = 0; t < nt; t++) {
			/* moments: the trainable tensors'; weights: the base's, or the adapters' */
			if ((nprefix == 2 && tab[t].frozen) || (nprefix == 1 && (t < nb) == adapters))
				continue;
			want++;
			snprintf(name, sizeof name, "%s%s", prefix[i], tab[t].name);
			if (check_one(&k, name, tab[t].ndim, tab[t].shape[0], tab[t].shape[1]) < 0) {
				free(tab);
				return -1;
			}
		}
	free(tab);
	/* all of them found, names unique (the reader refuses duplicates): a count says the rest */
	if (st->n != want)
		return eng_errf(err, "checkpoint '%s': %s does not match config.json: %d tensors, "
				     "its shape has %d", ckpt, file, st->n, want);
	return 0;
}

/* Each file of want (bits of eng_ckpt__files) in ckpt has the size and SHA-256 that
 * trainer_state.json's files lists: 0, or -1 naming the file. Each is opened once, in
 * the checkpoint's directory and never through a link (a FIFO or a device refused without
 * blocking), and its size and checksum read from that one descriptor. */
static int checksums(const char *ckpt, const json_t *files, unsigned want, eng_err *err)
{
	eng_dir d;
	char hex[65], p[CKPT_PATH];
	int rc = eng_dir_open(&d, ckpt, err);
	for (size_t i = 0; rc == 0 && i < NFILES; i++) {
		const char *name = eng_ckpt__files[i];
		json_t *f = json_object_get(files, name);
		const char *sum = json_string_value(json_object_get(f, "sha256"));
		json_t *size = json_object_get(f, "bytes");
		struct stat sb;
		if (!(want & F(i)))
			continue;
		if (!sum || !json_is_integer(size)) {
			rc = eng_errf(err, "checkpoint '%s': trainer_state.json lists no checksum "
					   "for %s", ckpt, name);
			break;
		}
		int fd = eng_ckpt__open_file(&d, name, &sb, err);
		if (fd < 0 && errno == ENOENT)
			eng_errf(err, "checkpoint '%s': %s is missing: %s", ckpt, name,
				strerror(ENOENT));
		if (fd < 0) {
			rc = -1;
		} else if ((json_int_t)sb.st_size != json_integer_value(size)) {
			rc = eng_errf(err, "checkpoint '%s': %s has %lld bytes, trainer_state.json "
					   "says %lld", ckpt, name, (long long)sb.st_size,
				(long long)json_integer_value(size));
		} else if ((rc = path2(p, sizeof p, ckpt, name)) == 0 &&
			   (rc = eng_sha256_fd(fd, p, hex, err)) == 0 && strcmp(hex, sum)) {
			rc = eng_errf(err, "checkpoint '%s': %s does not match its SHA-256 (damaged "
					   "or changed since it was saved)", ckpt, name);
		}
		if (fd >= 0)
			close(fd);
	}
	eng_dir_close(&d);
	return rc;
}

int eng_ckpt_verify(const char *ckpt, eng_err *err)
{
	json_t *o = load_state(ckpt, err);
	if (!o)
		return -1;
	json_t *files = json_object_get(o, "files");
	char p[CKPT_PATH];
	int rc = -1;
	eng_st_file st = {0};
	/* a LoRA run's (its adapter_config.json listed) holds its base, or names it */
	unsigned want_files = !json_object_get(files, ENG_PEFT_CONFIG) ? FULL_FILES :
		LORA_FILES | (json_object_get(files, eng_ckpt__files[BASE_W]) ? BASE_FILES :
		json_object_get(files, eng_ckpt__files[0]) ? F(0) | F(1) : 0);
	unsigned weights = want_files & F(BASE_W) ? BASE_W : 0; /* the base's weights */
	for (int k = 0; k < ENG_CKPT_TOK_FILES; k++) /* the tokenizer's, those it carries */
		want_files |= json_object_get(files, eng_ckpt__files[TOK_FILE0 + k])
			? F(TOK_FILE0 + k) : 0;
	if (checksums(ckpt, files, want_files, err) < 0)
		goto out;
	/* the checksums hold; the structure still gets the readers' full checks, and every
	 * tensor the one config.json implies (a checksum recomputed over a bad file, or a
	 * writer's bug, must not pass for a checkpoint that loads) */
	eng_config cfg;
	char base[CKPT_PATH] = "";
	join(p, sizeof p, ckpt, "/config.json");
	if (((want_files & F(4)) ? eng_peft_read_config(ckpt, &cfg, base, sizeof base, err)
				 : eng_hfconfig_read(p, &cfg, err)) < 0 ||
		frozen_of_state(o, ckpt, &cfg, err) < 0 ||
		((want_files & F(4)) && lora_base_fits(o, ckpt, base, want_files, err) < 0))
		goto out;
	path2(p, sizeof p, ckpt, eng_ckpt__files[weights]);
	if ((want_files & F(weights)) && (eng_st_read(&st, p, err) < 0 ||
		check_tensors(ckpt, eng_ckpt__files[weights], &st, &cfg, model_prefix, 1, err) < 0))
		goto out;
	eng_st_free(&st);
	join(p, sizeof p, ckpt, "/" ENG_PEFT_WEIGHTS);
	if ((want_files & F(3)) && (eng_st_read(&st, p, err) < 0 ||
		check_tensors(ckpt, ENG_PEFT_WEIGHTS, &st, &cfg, adapter_prefix, 1, err) < 0))
		goto out;
	eng_st_free(&st);
	join(p, sizeof p, ckpt, "/optimizer.safetensors");
	if (eng_st_read(&st, p, err) < 0 ||
		check_tensors(ckpt, "optimizer.safetensors", &st, &cfg, moment_prefix, 2, err) < 0)
		goto out;
	rc = 0;
out:
	eng_st_free(&st);
	json_decref(o);
	return rc;
}

/* 1 for a name ending in suffix (".tmp", ".old") with something before it. */
static int has_suffix(const char *name, const char *suffix)
{
	size_t n = strlen(name), k = strlen(suffix);
	return n > k && strcmp(name + n - k, suffix) == 0;
}

int eng_ckpt_clean_tmp(const char *save_dir, int dry_run, eng_err *err)
{
	eng_dir sd;
	if (eng_dir_open(&sd, save_dir, err) < 0)
		return -1;
	int dup_fd = dup(sd.fd), rc = 0;
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		eng_errf(err, "cannot read save directory '%s': %s", save_dir, strerror(errno));
		eng_dir_close(&sd);
		return -1;
	}
	struct dirent *e;
	while (rc == 0 && (e = readdir(d))) {
		const char *name = e->d_name;
		int tmp = has_suffix(name, ".tmp"), old = has_suffix(name, ".old");
		struct stat st;
		if (name[0] == '.' || (!tmp && !old) ||
			fstatat(sd.fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (tmp) {
			/* an interrupted save (a directory) or latest's temporary file: only ours,
			 * never through a link */
			if (dry_run)
				rc = eng_fs_entry(&sd, name, S_ISDIR(st.st_mode), "remove", err) < 0;
			else
				rc = S_ISDIR(st.st_mode) ? eng_fs_remove_dir(&sd, name, err)
							 : eng_fs_remove_file(&sd, name, err);
			rc = rc ? -1 : 0;
			continue;
		}
		/* X.old: a save under a name that existed was interrupted (eng_ckpt_write).
		 * Before its second rename X is missing and X.old is the complete old one: put
		 * it back; after it, X is the new one and X.old goes. */
		char base[CKPT_NAME_MAX + 8];
		snprintf(base, sizeof base, "%.*s", (int)strlen(name) - 4, name);
		if (eng_fs_entry(&sd, name, 1, "restore", err) < 0) {
			rc = -1;
			continue;
		}
		if (dry_run)
			continue;
		struct stat bs;
		if (fstatat(sd.fd, base, &bs, AT_SYMLINK_NOFOLLOW) == 0)
			rc = eng_fs_remove_dir(&sd, name, err);
		else
			rc = eng_fs_rename(&sd, name, base, err);
	}
	closedir(d);
	if (rc == 0 && !dry_run)
		rc = eng_fs_sync_dir(&sd, err);
	eng_dir_close(&sd);
	return rc;
}

/* 1 when dir/name is a directory entry itself (no link): a checkpoint of this save
 * directory, not one somewhere else. */
static int is_real_dir(const char *dir, const char *name)
{
	char p[CKPT_PATH];
	struct stat st;
	return path2(p, sizeof p, dir, name) == 0 && lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The newest step_ checkpoint of dir that verifies, other than `skip`; -1 when none. */
static int newest_valid(const char *dir, const char *skip, char *out, size_t outlen)
{
	static _Thread_local int steps[CKPT_MAX_LIST];
	eng_dir sd;
	if (eng_dir_open(&sd, dir, NULL) < 0)
		return -1;
	int n = eng_ckpt__list_steps(sd.fd, 1, steps, CKPT_MAX_LIST);
	eng_dir_close(&sd);
	for (int i = 0; i < n; i++) {
		char name[32], p[CKPT_PATH];
		snprintf(name, sizeof name, "/step_%08d", steps[i]);
		if (join(p, sizeof p, dir, name) < 0 || (skip && strcmp(p, skip) == 0))
			continue;
		eng_err e2;
		if (eng_ckpt_verify(p, &e2) == 0) {
			return join(out, outlen, p, "");
		}
	}
	return -1;
}

int eng_ckpt_find(const char *save_dir, char *out, size_t outlen, eng_err *err)
{
	char name[128], p[CKPT_PATH];
	eng_dir sd;
	/* read-only: another job's save directory is never cleaned or rewritten here */
	if (eng_dir_open(&sd, save_dir, err) < 0)
		return -1;
	int have = eng_ckpt__read_latest_at(sd.fd, name, sizeof name) == 0;
	eng_dir_close(&sd);
	if (!have) {
		eng_errf(err, "'%s' has no readable 'latest'", save_dir);
	} else if (!is_real_dir(save_dir, name)) {
		/* latest names X, and X is missing: an interrupted re-save left X.old, complete */
		char old[sizeof name + 8];
		snprintf(old, sizeof old, "%s.old", name);
		if (is_real_dir(save_dir, old) && path2(p, sizeof p, save_dir, old) == 0 &&
			eng_ckpt_verify(p, err) == 0)
			return join(out, outlen, p, "");
		/* what latest holds is the file's bytes: never quoted */
		eng_errf(err, "'latest' in '%s' names no checkpoint directory of it", save_dir);
	} else if (path2(p, sizeof p, save_dir, name) == 0 && eng_ckpt_verify(p, err) == 0) {
		return join(out, outlen, p, "");
	}
	return newest_valid(save_dir, NULL, out, outlen) == 0 ? 0 : -1;
}

int eng_ckpt_previous(const char *ckpt, char *out, size_t outlen)
{
	char dir[CKPT_PATH];
	snprintf(dir, sizeof dir, "%s", ckpt);
	size_t n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		dir[--n] = '\0';
	char *slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	return newest_valid(dir, ckpt, out, outlen);
}

/* ---- resume ---- */

/* Whether a run of spec s, on training data of ntok tokens, can resume from the state o of
 * checkpoint ckpt: the batch shape, the data and where the run is in it, and steps left. */
static int resume_fits(const json_t *o, const char *ckpt, const eng_spec *s, size_t ntok,
	eng_data_pos *pos, eng_err *err)
{
	json_int_t step = json_integer_value(json_object_get(o, "step"));
	json_t *data = json_object_get(o, "data");
	json_int_t tokens = json_integer_value(json_object_get(data, "tokens"));
	json_int_t B = json_integer_value(json_object_get(o, "batch"));
	json_int_t T = json_integer_value(json_object_get(o, "seq_len"));
	if (step < 0 || B != s->batch || T != s->seq_len)
		return eng_errf(err, "cannot resume from '%s': it was trained at batch %lld x %lld, "
				     "the job asks for %d x %d", ckpt, (long long)B, (long long)T,
			s->batch, s->seq_len);
	if (ntok && (size_t)tokens != ntok)
		return eng_errf(err, "cannot resume from '%s': its data had %lld tokens, '%s' has %zu",
			ckpt, (long long)tokens, s->train_path, ntok);
	json_t *st = json_object_get(data, "sample_tokens");
	json_int_t was = st ? json_integer_value(st) : (json_int_t)s->batch * s->seq_len;
	if (json_is_true(json_object_get(data, "shuffle")) &&
		was != (json_int_t)s->ranks * s->batch * s->seq_len)
		return eng_errf(err, "cannot resume from '%s': its data was shuffled in samples of "
				     "%lld tokens (its ranks x batch x seq_len), the job's are %lld: "
				     "shuffled data resumes with the ranks it was saved with", ckpt,
			(long long)was, (long long)s->ranks * s->batch * s->seq_len);
	if (ntok && eng_state_pos(o, s->ranks, s->batch, s->seq_len, ntok, pos) < 0)
		return eng_errf(err, "cannot resume from '%s': its trainer_state.json gives no "
				     "position in the data that fits it", ckpt);
	eng_config saved = s->cfg;
	memset(saved.frozen, 0, sizeof saved.frozen);
	if (frozen_of_state(o, ckpt, &saved, err) < 0)
		return -1;
	if (memcmp(saved.frozen, s->cfg.frozen, sizeof saved.frozen) != 0)
		return eng_errf(err, "cannot resume from '%s': it was trained with other tensors "
				     "frozen than the job's train.freeze (the optimizer's state is "
				     "the trainable tensors')", ckpt);
	if (step >= s->steps)
		return eng_errf(err, "cannot resume from '%s': it is at step %lld and the job ends at "
				     "step %d (\"steps\" is the step the run ends at)", ckpt,
			(long long)step, s->steps);
	return 0;
}

int eng_ckpt_adopt(const char *ckpt, eng_spec *s, eng_err *err)
{
	json_t *o = load_state(ckpt, err);
	if (!o)
		return -1;
	json_t *k = json_object_get(o, "grad_accum"), *data = json_object_get(o, "data");
	json_t *seed = json_object_get(json_object_get(data, "shuffle_rng"), "seed");
	json_int_t total = k ? json_integer_value(k) : 1, R = s->ranks;
	int rc = -1, shuffled = json_is_true(json_object_get(data, "shuffle"));
	uint32_t sseed = (uint32_t)json_integer_value(seed);
	/* grad_accum there is the micro-batches of a step, every rank's: here, per rank */
	json_int_t K = total / R;
	if (total < 1 || total > (json_int_t)ENG_MAX_ACCUM * ENG_MAX_RANKS ||
		(k && !json_is_integer(k)))
		eng_errf(err, "cannot resume from '%s': its grad_accum is not a count", ckpt);
	else if (total % R || K > ENG_MAX_ACCUM)
		eng_errf(err, "cannot resume from '%s': its steps took %lld micro-batches, which %lld "
			      "ranks cannot share (at most %d each)", ckpt, (long long)total,
			(long long)R, ENG_MAX_ACCUM);
	else if (s->has_grad_accum && K != s->grad_accum)
		eng_errf(err, "cannot resume from '%s': its steps took %lld micro-batches, the job "
			      "asks for %d x %lld ranks (leave grad_accum out to take %lld)", ckpt,
			(long long)total, s->grad_accum, (long long)R, (long long)K);
	else if (shuffled != s->shuffle)
		eng_errf(err, "cannot resume from '%s': its data was read %s, the job asks for %s "
			      "(data.shuffle %s)", ckpt, shuffled ? "shuffled" : "in file order",
			s->shuffle ? "shuffled" : "file order", shuffled ? "true" : "false");
	else if (shuffled && s->has_shuffle_seed && sseed != s->shuffle_seed)
		eng_errf(err, "cannot resume from '%s': its data was shuffled with shuffle_seed %u, "
			      "the job asks for %u (leave it out to take the checkpoint's)", ckpt,
			sseed, s->shuffle_seed);
	else if (json_object_get(o, "live") && eng_state_live_parse(json_object_get(o, "live"),
		(int)json_integer_value(json_object_get(o, "step")), s) < 0)
		eng_errf(err, "cannot resume from '%s': its trainer_state.json 'live' is not what "
			      "rematctl set records", ckpt);
	else
		rc = 0;
	if (rc == 0) {
		s->grad_accum = (int)K; /* at most ENG_MAX_ACCUM: total / R, R >= 1 */
		if (shuffled)
			s->shuffle_seed = sseed;
	}
	json_decref(o);
	return rc;
}

int eng_ckpt_check_resume(const char *ckpt, const eng_spec *s, size_t ntok, int *step,
	eng_err *err)
{
	eng_data_pos pos;
	json_t *o = load_state(ckpt, err);
	if (!o)
		return -1;
	int rc = resume_fits(o, ckpt, s, ntok, &pos, err);
	*step = (int)json_integer_value(json_object_get(o, "step"));
	json_decref(o);
	return rc;
}

int eng_ckpt_resume(const char *ckpt, const eng_spec *s, eng_model *m, eng_data *train,
	int *step_out, eng_err *err)
{
	json_t *o = load_state(ckpt, err);
	eng_st_file st = {0};
	eng_data_pos pos;
	int rc = -1;
	char p[CKPT_PATH], name[ENG_NAME_MAX + 16];
	if (!o)
		return -1;
	json_int_t step = json_integer_value(json_object_get(o, "step"));
	if (resume_fits(o, ckpt, s, train->ntok, &pos, err) < 0)
		goto out;
	join(p, sizeof p, ckpt, "/optimizer.safetensors");
	if (eng_st_open(&st, p, err) < 0) /* read as it goes: a rank reads its part alone */
		goto out;
	for (int i = 0; i < m->ntensors; i++) {
		const eng_ptensor *t = &m->tensors[i];
		if (t->frozen)
			continue;
		/* the tensor's floats in the model's moments, a sharded optimizer's part (none:
		 * its shape is still checked) */
		size_t k, n = eng_model_opt_span(m, t, &k), at = n ? t->goff + k - m->opt_lo : 0;
		snprintf(name, sizeof name, "exp_avg.%s", t->name);
		if (eng_st_get_f32_part(&st, name, t->ndim, t->shape, k, n, m->m + at, err) < 0)
			goto out;
		snprintf(name, sizeof name, "exp_avg_sq.%s", t->name);
		if (eng_st_get_f32_part(&st, name, t->ndim, t->shape, k, n, m->v + at, err) < 0)
			goto out;
	}
	*step_out = (int)step;
	eng_data_seek(train, &pos);
	rc = 0;
out:
	eng_st_free(&st);
	json_decref(o);
	return rc;
}
