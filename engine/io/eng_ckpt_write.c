/* eng_ckpt_write.c - writing full checkpoints (see eng_ckpt.h): a save directory's
 * listing and `latest` (which eng_ckpt_find.c reads too), the snapshot of a run, its files,
 * trainer_state.json with their checksums, `latest`, pruning beyond `keep`, and the checks
 * of a name a caller chose. Not here: verifying, finding and resuming (eng_ckpt_find.c,
 * above this file), the writer thread (eng_ckpt_writer.c), the safetensors format
 * (eng_st.c).
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
#include "eng_mem.h"
#include "eng_sha256.h"
#include "eng_st.h"
#include "eng_state_json.h"
#include "eng_util.h"
#include "proto.h"

/* The files of a checkpoint besides trainer_state.json (eng_ckpt_int.h) */
const char *const eng_ckpt__files[NFILES] = {"model.safetensors", "config.json",
	"optimizer.safetensors", ENG_PEFT_WEIGHTS, ENG_PEFT_CONFIG, ENG_CKPT_TOK_NAMES,
	ENG_PEFT_BASE_DIR "/model.safetensors", ENG_PEFT_BASE_DIR "/config.json"};

int eng_ckpt__open_file(const eng_dir *d, const char *name, struct stat *sb, eng_err *err)
{
	const char *slash = strchr(name, '/');
	char dir[32];
	eng_dir sub;
	if (!slash)
		return eng_fs_open_read_at(d, name, "checkpoint file", sb, err);
	snprintf(dir, sizeof dir, "%.*s", (int)(slash - name), name);
	if (eng_dir_open_at(&sub, d, dir, err) < 0)
		return -1;
	int fd = eng_fs_open_read_at(&sub, slash + 1, "checkpoint file", sb, err), e = errno;
	eng_dir_close(&sub);
	errno = e;
	return fd;
}


/* The files snapshot s writes */
static unsigned files_of(const eng_ckpt_snap *s)
{
	unsigned tok = 0;
	for (int k = 0; s->tok && k < ENG_CKPT_TOK_FILES; k++)
		tok |= s->tok->len[k] ? F(TOK_FILE0 + k) : 0;
	if (!s->cfg.lora_r)
		return FULL_FILES | tok;
	return LORA_FILES | tok | (s->lora_base[0] ? 0 : BASE_FILES);
}

/* Test hook: REMAT_CKPT_DELAY_US sleeps between the steps of a save, so the crash test can
 * kill a worker at many different points of one. Unset in normal use. */
static void test_delay(void)
{
	static int us = -1;
	if (us < 0) {
		const char *e = getenv("REMAT_CKPT_DELAY_US");
		us = e ? atoi(e) : 0;
	}
	if (us > 0)
		usleep((useconds_t)us);
}

/* ---- a save directory's listing ---- */

/* Parses "step_XXXXXXXX" into its step; -1 for any other name. */
static int step_of(const char *name)
{
	if (strncmp(name, "step_", 5) != 0 || strlen(name) != 13)
		return -1;
	int v = 0;
	for (int i = 5; i < 13; i++) {
		if (name[i] < '0' || name[i] > '9')
			return -1;
		v = v * 10 + (name[i] - '0');
	}
	return v;
}

static int cmp_int_desc(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x < y) - (x > y);
}

/* Steps of the step_ entries of the directory open as fd, newest first; the count. With
 * dirs_only, only real directories (no link) count: the ones pruning may remove. */
int eng_ckpt__list_steps(int fd, int dirs_only, int *steps, int max)
{
	int dup_fd = dup(fd);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return 0;
	}
	rewinddir(d); /* a dup shares the position of the descriptor it copies */
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < max) {
		struct stat st;
		int s = step_of(e->d_name);
		if (s < 0 || (dirs_only && (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
			!S_ISDIR(st.st_mode))))
			continue;
		steps[n++] = s;
	}
	closedir(d);
	qsort(steps, (size_t)n, sizeof *steps, cmp_int_desc);
	return n;
}

/* Reads the name that `latest` holds in the directory open as fd (trimmed, a bare name);
 * -1 when absent or malformed. A link or a FIFO named latest is no latest of ours. */
int eng_ckpt__read_latest_at(int fd, char *name, size_t n)
{
	int lfd = openat(fd, "latest", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (lfd < 0)
		return -1;
	struct stat st;
	ssize_t got = -1;
	if (fstat(lfd, &st) == 0 && S_ISREG(st.st_mode))
		got = read(lfd, name, n - 1);
	close(lfd);
	if (got <= 0)
		return -1;
	name[got] = '\0';
	name[strcspn(name, "\r\n")] = '\0';
	return name[0] && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..") ? 0 : -1;
}

/* ---- snapshot ---- */

size_t eng_ckpt_snap_bytes(size_t nfloats, size_t ngrad)
{
	return (nfloats + 2 * ngrad) * sizeof(float);
}

/* What a snapshot records besides the tensors, the same for a copy and a borrow. */
static void snap_state(eng_ckpt_snap *s, const eng_ckpt_src *run)
{
	const eng_model *m = run->model;
	const eng_data *train = run->train;
	s->cfg = m->cfg;
	s->step = run->step;
	/* the stream's position, whatever the ranks: the next sample's first token */
	s->cursor = eng_data_next_sample(train) * (size_t)train->ranks * train->B * train->T;
	s->pos = train->pos;
	s->ntok = train->ntok;
	s->spec = *run->spec;
	s->tensors = m->tensors;
	s->q4 = m->cfg.quant ? m : NULL;
	s->ntensors = m->ntensors;
	s->nfloats = m->nfloats;
	s->ngrad = m->ngrad;
	snprintf(s->lora_base, sizeof s->lora_base, "%s", run->lora_base ? run->lora_base : "");
	snprintf(s->lora_pin, sizeof s->lora_pin, "%s", run->lora_pin ? run->lora_pin : "");
	s->tok = run->tok;
}

int eng_ckpt_snap_take(eng_ckpt_snap *s, const eng_ckpt_src *run, eng_err *err)
{
	double t0 = eng_now_ms();
	const eng_model *m = run->model;
	memset(s, 0, sizeof *s);
	size_t bytes = m->nfloats * sizeof(float), gbytes = m->ngrad * sizeof(float);
	int gathered = run->moments[0] != NULL;
	s->params = eng_mem_alloc(ENG_MEM_WORKSPACE, bytes);
	s->own_moments = 1; /* copies, or the gathered ones taken over */
	s->m = gathered ? run->moments[0] : eng_mem_alloc(ENG_MEM_WORKSPACE, gbytes);
	s->v = gathered ? run->moments[1] : eng_mem_alloc(ENG_MEM_WORKSPACE, gbytes);
	if (!s->params || !s->m || !s->v) {
		if (gathered) /* still the caller's */
			s->m = s->v = NULL;
		eng_ckpt_snap_free(s);
		return eng_errf(err, "out of memory for a checkpoint snapshot (%zu MiB)",
			eng_ckpt_snap_bytes(m->nfloats, m->ngrad) >> 20);
	}
	/* The stall of a save: three copies (the moments of the trainable tensors only), split
	 * over the training threads (first-touch page faults of the fresh buffers are most of
	 * the cost, and they run in parallel). */
	const float *src[3] = {m->params, m->m, m->v};
	float *dst[3] = {s->params, s->m, s->v};
	size_t len[3] = {m->nfloats, gathered ? 0 : m->ngrad, gathered ? 0 : m->ngrad};
	size_t chunk = 1u << 20, nchunks = (m->nfloats + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) collapse(2)
	for (int k = 0; k < 3; k++) {
		for (size_t i = 0; i < nchunks; i++) {
			size_t off = i * chunk;
			size_t n = off >= len[k] ? 0 : len[k] - off < chunk ? len[k] - off : chunk;
			memcpy(dst[k] + off, src[k] + off, n * sizeof(float));
		}
	}
	snap_state(s, run);
	s->stall_ms = eng_now_ms() - t0;
	return 0;
}

void eng_ckpt_snap_borrow(eng_ckpt_snap *s, const eng_ckpt_src *run)
{
	const eng_model *m = run->model;
	memset(s, 0, sizeof *s);
	snap_state(s, run);
	s->params = m->params;
	s->own_moments = run->moments[0] != NULL;
	s->m = s->own_moments ? run->moments[0] : m->m;
	s->v = s->own_moments ? run->moments[1] : m->v;
	s->borrowed = 1;
}

void eng_ckpt_snap_free(eng_ckpt_snap *s)
{
	if (!s->borrowed)
		eng_mem_free(s->params);
	if (s->own_moments) {
		eng_mem_free(s->m);
		eng_mem_free(s->v);
	}
	s->params = s->m = s->v = NULL;
	s->own_moments = 0;
}

/* ---- writing ---- */

/* The 4-bit weights of s (none with moments), dequantized into one block (*out,
 * ENG_MEM_WORKSPACE; NULL when none): tensor i's at (*at)[i] floats. 0, or -1. */
static int q4_floats(const eng_ckpt_snap *s, int moments, float **out, size_t **at, eng_err *err)
{
	size_t n = 0;
	*out = NULL;
	*at = NULL;
	for (int i = 0; !moments && s->q4 && i < s->ntensors; i++)
		n += s->tensors[i].quant ? s->tensors[i].numel : 0;
	if (!n)
		return 0;
	*at = calloc((size_t)s->ntensors, sizeof **at);
	*out = eng_mem_alloc(ENG_MEM_WORKSPACE, n * sizeof **out);
	if (!*at || !*out)
		return eng_err_nomem(err, "out of memory dequantizing the 4-bit weights to write "
					  "them (%zu MiB)", n >> 18);
	n = 0;
	for (int i = 0; i < s->ntensors; i++) {
		const eng_ptensor *t = &s->tensors[i];
		if (!t->quant)
			continue;
		(*at)[i] = n;
		if (eng_model_tensor_get(s->q4, t, *out + n, err) < 0)
			return -1;
		n += t->numel;
	}
	return 0;
}

static int write_tensors(const eng_ckpt_snap *s, const eng_dir *d, const char *name,
	const char *prefix1, const float *base1, const char *prefix2, const float *base2,
	eng_err *err)
{
	/* two prefixes: the moments, of the trainable tensors, at their offsets in the
	 * gradients' layout; one: the weights, every tensor */
	int n = 0, moments = base2 != NULL, rc = -1, nb = eng_lora_base_tensors(&s->cfg);
	for (int i = 0; i < s->ntensors; i++) /* the weights: the base's (adapters: PEFT's) */
		n += moments ? 2 * !s->tensors[i].frozen : i < nb;
	eng_st_entry *e = calloc((size_t)n, sizeof *e);
	char (*names)[ENG_NAME_MAX + 16] = calloc((size_t)n, sizeof *names);
	float *q4 = NULL;
	size_t *q4_at = NULL;
	if (!e || !names) {
		eng_errf(err, "out of memory");
		goto out;
	}
	if (q4_floats(s, moments, &q4, &q4_at, err) < 0)
		goto out;
	for (int i = 0, k = 0; k < n; i++) {
		const eng_ptensor *t = &s->tensors[i % s->ntensors];
		int second = i >= s->ntensors;
		if (moments && t->frozen)
			continue;
		snprintf(names[k], sizeof names[k], "%s%s", second && prefix2 ? prefix2 : prefix1,
			t->name);
		e[k].name = names[k];
		e[k].ndim = t->ndim;
		e[k].shape[0] = t->shape[0];
		e[k].shape[1] = t->shape[1];
		e[k].data = t->quant && !moments ? q4 + q4_at[i]
			: (second ? base2 : base1) + (moments ? t->goff : t->offset);
		k++;
	}
	rc = eng_st_write_at(d, name, e, n, err);
out:
	eng_mem_free(q4);
	free(q4_at);
	free(e);
	free(names);
	return rc;
}

/* Bytes to write as they are (bytes_fill). */
typedef struct bytes_out {
	const char *b;
	size_t n;
} bytes_out;

/* eng_fs_fill_fn of a bytes_out. */
static int bytes_fill(FILE *f, void *ud, eng_err *err)
{
	const bytes_out *o = ud;
	(void)err;
	fwrite(o->b, 1, o->n, f);
	return 0;
}

/* eng_fs_fill_fn of one line of text. */
static int line_fill(FILE *f, void *ud, eng_err *err)
{
	(void)err;
	fprintf(f, "%s\n", (const char *)ud);
	return 0;
}

/* SHA-256 and size of d/name, a file written just before (never through a link). */
static int hash_at(const eng_dir *d, const char *name, char hex[65], size_t *size,
	eng_err *err)
{
	struct stat st;
	int fd = eng_ckpt__open_file(d, name, &st, err);
	if (fd < 0)
		return -1;
	int rc = eng_sha256_fd(fd, name, hex, err);
	close(fd);
	*size = rc == 0 ? (size_t)st.st_size : 0;
	return rc;
}

/* trainer_state.json: the training state and the checksums of the other files. */
static int write_state(const eng_ckpt_snap *s, const eng_dir *d, size_t *bytes, eng_err *err)
{
	const eng_spec *sp = &s->spec;
	json_t *files = json_object();
	char hex[65];
	int rc = -1;
	for (size_t i = 0; i < NFILES; i++) {
		size_t size = 0;
		if (!(files_of(s) & F(i)))
			continue;
		if (hash_at(d, eng_ckpt__files[i], hex, &size, err) < 0)
			goto out;
		json_object_set_new(files, eng_ckpt__files[i], json_pack("{s:s,s:I}", "sha256", hex,
						    "bytes", (json_int_t)size));
		*bytes += size;
	}
	json_t *o = json_pack("{s:i,s:i,s:{s:I,s:I,s:s,s:I,s:I,s:b},s:{s:I},"
			      "s:{s:s,s:i,s:f,s:f,s:i},s:{s:f,s:f,s:f,s:f,s:f,s:f},s:i,s:i,s:i,"
			      "s:o}",
		"format_version", ENG_CKPT_FORMAT, "step", s->step,
		"data", "cursor", (json_int_t)s->cursor, "tokens", (json_int_t)s->ntok, "format",
		sp->data_format == ENG_DATA_BYTES ? "bytes" : "llmc", "epoch",
		(json_int_t)s->pos.epoch, "sample", (json_int_t)s->pos.sample, "shuffle",
		sp->shuffle,
		"rng", "seed", (json_int_t)sp->seed,
		"schedule", "kind", sp->sched == ENG_SCHED_COSINE ? "cosine" : "constant", "warmup",
		sp->warmup, "min_lr_frac", proto_f32_double(sp->min_lr_frac), "lr",
		proto_f32_double(sp->lr), "steps", sp->steps,
		"optim", "lr", proto_f32_double(sp->lr), "beta1", proto_f32_double(sp->beta1),
		"beta2", proto_f32_double(sp->beta2), "eps", proto_f32_double(sp->eps),
		"weight_decay", proto_f32_double(sp->weight_decay), "grad_clip",
		proto_f32_double(sp->grad_clip),
		"batch", sp->batch, "seq_len", sp->seq_len, "grad_accum", sp->grad_accum * sp->ranks,
		"files",
		files);
	if (o && sp->shuffle)
		json_object_set_new(json_object_get(o, "data"), "shuffle_rng",
			eng_state_rng_json(&s->pos.rng, sp->shuffle_seed));
	/* a sample's tokens (every rank's micro-batch of it): the position's unit */
	if (o)
		json_object_set_new(json_object_get(o, "data"), "sample_tokens",
			json_integer((json_int_t)sp->ranks * sp->batch * sp->seq_len));
	if (o && sp->live.set)
		json_object_set_new(o, "live", eng_state_live_json(sp));
	/* a LoRA run's external base: what it was when this run loaded it */
	if (o && s->cfg.lora_r && s->lora_base[0])
		json_object_set_new(o, "lora_base", json_loads(s->lora_pin, 0, NULL));
	/* the tensors that have no moments here (train.freeze); absent when every one trains */
	json_t *fz = NULL;
	for (int i = 0; o && i < s->ntensors; i++) {
		if (!s->tensors[i].frozen)
			continue;
		if (!fz && !(fz = json_array()))
			break;
		json_array_append_new(fz, json_string(s->tensors[i].name));
	}
	if (fz)
		json_object_set_new(o, "frozen", fz);
	files = NULL; /* stolen by "o" */
	if (!o) {
		eng_errf(err, "cannot build trainer_state.json");
		goto out;
	}
	rc = eng_fs_write_json(d, "trainer_state.json", 0666, o, err);
	json_decref(o);
	struct stat st;
	if (rc == 0 && fstatat(d->fd, "trainer_state.json", &st, AT_SYMLINK_NOFOLLOW) == 0)
		*bytes += (size_t)st.st_size;
out:
	json_decref(files);
	return rc;
}

/* Removes the oldest step_ checkpoints beyond keep (never the one latest names; a named
 * checkpoint is never a step_ one). What cannot be removed is said in warn. */
static void prune(const eng_dir *d, int keep, char *warn, size_t warnlen)
{
	static _Thread_local int steps[CKPT_MAX_LIST];
	char latest[128] = "";
	eng_ckpt__read_latest_at(d->fd, latest, sizeof latest);
	int n = eng_ckpt__list_steps(d->fd, 1, steps, CKPT_MAX_LIST);
	for (int i = keep; i < n; i++) {
		char name[32];
		eng_err e;
		snprintf(name, sizeof name, "step_%08d", steps[i]);
		if (strcmp(name, latest) == 0)
			continue;
		if (eng_fs_remove_dir(d, name, &e) < 0 && !warn[0])
			snprintf(warn, warnlen, "keep: %s", e.msg);
	}
}

/* A checkpoint name the caller chose: the protocol's 1..64 of [A-Za-z0-9._-], not starting
 * with '.', and none of the names this module keeps for itself: latest, the X.tmp and
 * X.old of a save in progress (which the next start would remove or rename), and step_*,
 * the periodic checkpoints that `keep` prunes. */
static int check_name(const char *name, eng_err *err)
{
	size_t n = strlen(name);
	static const char ok_chars[] = "abcdefghijklmnopqrstuvwxyz"
				       "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
	int ok = n >= 1 && n <= CKPT_NAME_MAX && name[0] != '.' && strspn(name, ok_chars) == n;
	if (!ok)
		return eng_errf(err, "invalid checkpoint name '%.80s' (1 to %d of A-Z a-z 0-9 . _ "
				     "-, not starting with '.')", name, CKPT_NAME_MAX);
	if (strcmp(name, "latest") == 0 || strncmp(name, "step_", 5) == 0 ||
		(n > 4 && (strcmp(name + n - 4, ".tmp") == 0 || strcmp(name + n - 4, ".old") == 0)))
		return eng_errf(err, "checkpoint name '%s' is reserved (latest, step_*, *.tmp and "
				     "*.old are the save directory's own)", name);
	return 0;
}

/* -1 with a message when name (a caller's, NULL or "" for a periodic save) is taken in the
 * save directory d, by anything: a second save under one name would silently lose the
 * first. base is the name. */
static int named_taken(const eng_dir *d, const char *name, const char *base, eng_err *err)
{
	if (!name || !name[0])
		return 0;
	int r = eng_fs_entry(d, base, 1, "replace", err); /* a link's or a stranger's: why */
	if (r == 0)
		return 0;
	if (r == 1)
		eng_errf(err, "a checkpoint named '%s' exists in '%s': choose another name", base,
			d->path);
	return -1;
}

int eng_ckpt_name_free(const char *dir, const char *name, eng_err *err)
{
	eng_dir sd;
	if (check_name(name, err) < 0)
		return -1;
	if (eng_dir_open(&sd, dir, NULL) < 0)
		return 0; /* no save directory yet: every name is free (the save makes it) */
	int rc = named_taken(&sd, name, name, err);
	eng_dir_close(&sd);
	return rc;
}

/* The weights and config.json of snapshot s (a LoRA run's: its base's) into d */
static int write_model(const eng_ckpt_snap *s, const eng_dir *d, eng_err *err)
{
	test_delay();
	if (write_tensors(s, d, "model.safetensors", "", s->params, NULL, NULL, err) < 0)
		return -1;
	test_delay();
	return eng_hfconfig_write_at(d, "config.json", &s->cfg, err);
}

/* A LoRA checkpoint's own base: the subdirectory ENG_PEFT_BASE_DIR of d, durably */
static int write_own_base(const eng_ckpt_snap *s, const eng_dir *d, eng_err *err)
{
	eng_dir bd;
	if (eng_dir_make_at(&bd, d, ENG_PEFT_BASE_DIR, 0755, 1, err) != 0)
		return -1;
	int rc = write_model(s, &bd, err) < 0 || eng_fs_sync_dir(&bd, err) < 0 ? -1 : 0;
	eng_dir_close(&bd);
	return rc;
}

/* Writes the files of snapshot s into the fresh directory d; own_base: the absolute path
 * its own base will have (ENG_PEFT_BASE_DIR in the checkpoint's final directory), which
 * adapter_config.json names so that PEFT and transformers find it from any working
 * directory (they read base_model_name_or_path as a path from theirs). */
static int write_files(const eng_ckpt_snap *s, const eng_dir *d, const char *own_base,
	size_t *bytes, eng_err *err)
{
	unsigned files = files_of(s);
	if ((files & F(0)) && write_model(s, d, err) < 0)
		return -1;
	if ((files & F(BASE_W)) && write_own_base(s, d, err) < 0)
		return -1;
	test_delay();
	if ((files & F(3)) && eng_peft_write_at(d, &s->cfg, s->tensors, s->ntensors, s->params,
				      s->lora_base[0] ? s->lora_base : own_base, err) < 0)
		return -1;
	if (write_tensors(s, d, "optimizer.safetensors", "exp_avg.", s->m, "exp_avg_sq.", s->v,
		    err) < 0)
		return -1;
	for (int k = 0; k < ENG_CKPT_TOK_FILES; k++) { /* the tokenizer, as the run read it */
		bytes_out o = {s->tok ? s->tok->bytes[k] : NULL, s->tok ? s->tok->len[k] : 0};
		if ((files & F(TOK_FILE0 + k)) &&
			eng_fs_write_at(d, eng_ckpt__files[TOK_FILE0 + k], bytes_fill, &o, err) < 0)
			return -1;
	}
	test_delay();
	return write_state(s, d, bytes, err);
}

/* The absolute path checkpoint `name` of the save directory open in sd gives its own
 * base: read from the descriptor (the directory written into, whatever links its given
 * path went through), not looked up again by name */
static int own_base_path(const eng_dir *sd, const char *name, char *out, size_t len,
	eng_err *err)
{
	char link[64], real[PATH_MAX];
	snprintf(link, sizeof link, "/proc/self/fd/%d", sd->fd);
	ssize_t n = readlink(link, real, sizeof real - 1);
	if (n < 0)
		return eng_errf(err, "save directory '%s': its path: %s", sd->path,
			strerror(errno));
	real[n] = '\0';
	int w = snprintf(out, len, "%s/%s/" ENG_PEFT_BASE_DIR, real, name);
	return w < 0 || (size_t)w >= len ? eng_errf(err, "save directory path too long") : 0;
}

/* The written directory tmp of sd becomes checkpoint base. A periodic save of the same
 * step again (the final save right after a periodic one) replaces it: the old one is moved
 * aside to `old` first (*had_old) and removed by the caller last, so a crash in between
 * leaves a complete directory under one name. A name the caller chose is never replaced
 * (checked again here: it may have appeared while the files were written). */
static int swap_in(const eng_dir *sd, const char *name, const char *base, const char *tmp,
	const char *old, int *had_old, eng_err *err)
{
	*had_old = 0;
	if (eng_fs_remove_dir(sd, old, err) < 0 || named_taken(sd, name, base, err) < 0)
		return -1;
	int r = eng_fs_entry(sd, base, 1, "replace", err);
	if (r < 0 || (r == 1 && eng_fs_rename(sd, base, old, err) < 0))
		return -1;
	if (eng_fs_rename(sd, tmp, base, err) < 0) {
		if (r == 1)
			renameat(sd->fd, old, sd->fd, base);
		return -1;
	}
	*had_old = r == 1;
	return 0;
}

int eng_ckpt_write(const eng_ckpt_snap *s, const char *dir, const char *name, int keep,
	eng_ckpt_result *res, eng_err *err)
{
	char base[CKPT_NAME_MAX + 1], tmp[CKPT_NAME_MAX + 8], old[CKPT_NAME_MAX + 8];
	char own[PATH_MAX + CKPT_NAME_MAX + 16] = "";
	eng_dir sd = {-1, ""}, td = {-1, ""};
	double t0 = eng_now_ms();
	int rc = -1, had_old = 0;
	memset(res, 0, sizeof *res);
	if (name && name[0] && check_name(name, err) < 0)
		return -1;
	if (name && name[0])
		snprintf(base, sizeof base, "%s", name);
	else
		snprintf(base, sizeof base, "step_%08d", s->step);
	snprintf(tmp, sizeof tmp, "%s.tmp", base);
	snprintf(old, sizeof old, "%s.old", base);
	if (eng_dir_open(&sd, dir, err) < 0)
		return -1;
	if (path2(res->path, sizeof res->path, dir, base) < 0) {
		eng_errf(err, "save directory path too long");
		goto out;
	}
	/* a leftover of ours goes; a link or a stranger's entry under our names stops here,
	 * before anything is written (latest and latest.tmp are checked again when latest is
	 * written), and so does a named checkpoint that exists */
	if (eng_fs_entry(&sd, "latest.tmp", 0, "remove", err) < 0 ||
		eng_fs_entry(&sd, "latest", 0, "replace", err) < 0 ||
		named_taken(&sd, name, base, err) < 0 ||
		eng_fs_remove_dir(&sd, tmp, err) < 0 || eng_fs_mkdir(&sd, tmp, err) < 0)
		goto out;
	/* only a LoRA run that carries its base names it by a path of the save directory */
	if ((files_of(s) & F(BASE_W)) && own_base_path(&sd, base, own, sizeof own, err) < 0)
		goto out;
	if (eng_dir_open_at(&td, &sd, tmp, err) < 0 ||
		write_files(s, &td, own, &res->bytes, err) < 0)
		goto fail;
	test_delay();
	if (swap_in(&sd, name, base, tmp, old, &had_old, err) < 0)
		goto fail;
	if (eng_fs_sync_dir(&sd, err) < 0)
		goto out;
	test_delay();
	/* latest: replaced durably (a temporary name, fsynced, renamed, the parent fsynced) */
	if (eng_fs_write_at(&sd, "latest", line_fill, base, err) < 0)
		goto out;
	if (had_old && eng_fs_remove_dir(&sd, old, err) < 0)
		snprintf(res->warning, sizeof res->warning, "%s", err->msg);
	if (keep > 0)
		prune(&sd, keep, res->warning + strlen(res->warning),
			sizeof res->warning - strlen(res->warning));
	res->step = s->step;
	res->ms = eng_now_ms() - t0;
	/* written from the live tensors, training waited for all of it */
	res->stall_ms = s->borrowed ? res->ms : s->stall_ms;
	rc = 0;
	goto out;
fail:
	if (td.fd >= 0)
		eng_dir_close(&td);
	eng_fs_remove_dir(&sd, tmp, NULL);
out:
	eng_dir_close(&td);
	eng_dir_close(&sd);
	if (rc < 0)
		res->path[0] = '\0';
	return rc;
}
