/* eng_peft.c - LoRA adapters in PEFT's files (see eng_peft.h). */
#include "eng_peft.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_hfconfig.h"
#include "eng_import.h"
#include "eng_sha256.h"
#include "eng_st.h"

#define PATH_LEN 4096 /* longest path kept here */

/* "invalid adapter config '<path>': <problem>" into err; -1 */
#define bad(err, path, ...) eng_err_invalid(err, "adapter config", path, __VA_ARGS__)

int eng_peft_is_adapter_at(const eng_dir *d)
{
	struct stat st;
	/* the entry itself, never what a link points to: a regular file, or a link (the hub
	 * cache's to its blob), which is then read as model.safetensors is */
	return fstatat(d->fd, ENG_PEFT_CONFIG, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode));
}

int eng_peft_is_adapter(const char *dir)
{
	eng_dir d;
	eng_err e;
	if (eng_dir_open(&d, dir, &e) < 0) /* not a directory (an llm.c file), or none */
		return 0;
	int r = eng_peft_is_adapter_at(&d);
	eng_dir_close(&d);
	return r;
}

/* The LoraConfig keys remat does not compute: each must be absent or its default */
static int refuse_unsupported(const char *path, json_t *root, eng_err *err)
{
	json_t *v = json_object_get(root, "bias");
	if (v && !(json_is_string(v) && strcmp(json_string_value(v), "none") == 0))
		return bad(err, path, "'bias' must be \"none\": remat trains no biases beside the "
				      "adapters");
	static const char *const off[] = {"use_rslora", "use_dora"};
	for (size_t i = 0; i < sizeof off / sizeof off[0]; i++)
		if ((v = json_object_get(root, off[i])) && !json_is_false(v))
			return bad(err, path, "'%s' must be false: remat computes plain LoRA", off[i]);
	static const char *const none[] = {"modules_to_save", "layers_to_transform",
		"rank_pattern", "alpha_pattern"};
	for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
		v = json_object_get(root, none[i]);
		if (v && !json_is_null(v) && !(json_is_object(v) && json_object_size(v) == 0))
			return bad(err, path, "'%s' must be null: remat puts the same adapter on every "
					      "targeted weight", none[i]);
	}
	return 0;
}

/* target_modules: a list of module names, their units into *units */
static int read_targets(const char *path, json_t *root, const eng_config *c, unsigned *units,
	eng_err *err)
{
	json_t *t = json_object_get(root, "target_modules"), *v;
	const char *names[ENG_LORA_UNITS * 2];
	size_t i;
	eng_err e;
	if (json_is_string(t))
		return bad(err, path, "'target_modules' is a regular expression: remat takes a list "
				      "of module names");
	if (!json_is_array(t) || json_array_size(t) == 0 ||
		json_array_size(t) > sizeof names / sizeof names[0])
		return bad(err, path, "'target_modules' must be a list of 1 to %d module names",
			(int)(sizeof names / sizeof names[0]));
	json_array_foreach(t, i, v) {
		if (!json_is_string(v))
			return bad(err, path, "'target_modules[%zu]' is not a string", i);
		names[i] = json_string_value(v);
	}
	if (eng_lora_targets(c, names, (int)json_array_size(t), units, &e) < 0)
		return bad(err, path, "%s", e.msg);
	return 0;
}

/* 1 when b names a checkpoint's own base (its last component ENG_PEFT_BASE_DIR) and dir
 * holds that subdirectory (looked at without following a link): the copy that moved with
 * it, which the name written when it was saved may no longer reach */
static int carried_base(const char *dir, const char *b)
{
	const char *last = strrchr(b, '/');
	struct stat st;
	if (strcmp(last ? last + 1 : b, ENG_PEFT_BASE_DIR) != 0)
		return 0;
	char p[PATH_MAX];
	int n = snprintf(p, sizeof p, "%s/" ENG_PEFT_BASE_DIR, dir);
	return n > 0 && (size_t)n < sizeof p && lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* base_model_name_or_path into base: a path, absolute or relative to dir, of a base model
 * directory that is not itself an adapter's; a checkpoint's own base where it carries it */
static int read_base(const char *path, const char *dir, json_t *root, char *base,
	size_t baselen, eng_err *err)
{
	const char *b = json_string_value(json_object_get(root, "base_model_name_or_path"));
	eng_dir d;
	eng_err e;
	int n;
	if (!b || !*b)
		return bad(err, path, "no 'base_model_name_or_path': the base model's directory");
	if (carried_base(dir, b))
		n = snprintf(base, baselen, "%s/" ENG_PEFT_BASE_DIR, dir);
	else if (b[0] == '/')
		n = snprintf(base, baselen, "%s", b);
	else
		n = snprintf(base, baselen, "%s/%s", dir, b);
	if (n < 0 || (size_t)n >= baselen)
		return bad(err, path, "'base_model_name_or_path' is too long");
	if (eng_dir_open(&d, base, &e) < 0)
		return bad(err, path, "'base_model_name_or_path' \"%s\" is not a directory here "
				      "(a Hub id must be downloaded first; give its path)",
			eng_err_path(b));
	/* "." (a checkpoint holding its base): the directory's config.json and weights */
	int adapter = strcmp(b, ".") != 0 && eng_peft_is_adapter_at(&d);
	eng_dir_close(&d);
	return adapter ? bad(err, path, "its base \"%s\" is an adapter directory itself",
				 eng_err_path(b)) : 0;
}

/* base_model_quantization (remat's; PEFT ignores a key it does not know): the 4-bit
 * quantization the adapters trained over, as BitsAndBytesConfig names it, into c; absent:
 * none */
static int read_quant(const char *path, json_t *root, eng_config *c, eng_err *err)
{
	json_t *q = json_object_get(root, "base_model_quantization");
	eng_err e;
	if (!q)
		return 0;
	const char *type = json_string_value(json_object_get(q, "bnb_4bit_quant_type"));
	const char *dt = json_string_value(json_object_get(q, "bnb_4bit_compute_dtype"));
	json_t *dq = json_object_get(q, "bnb_4bit_use_double_quant");
	json_t *bs = json_object_get(q, "bnb_4bit_blocksize");
	if (!json_is_object(q) || !type || !dt || !json_is_boolean(dq) || !json_is_integer(bs) ||
		!json_is_true(json_object_get(q, "load_in_4bit")))
		return bad(err, path, "'base_model_quantization' must hold load_in_4bit true, "
				      "bnb_4bit_quant_type, bnb_4bit_use_double_quant, "
				      "bnb_4bit_compute_dtype and bnb_4bit_blocksize");
	c->quant = strcmp(type, "nf4") == 0 ? ENG_QUANT_NF4
		: strcmp(type, "fp4") == 0 ? ENG_QUANT_FP4 : -1;
	c->quant_bf16 = strcmp(dt, "bfloat16") == 0 ? 1 : strcmp(dt, "float32") == 0 ? 0 : -1;
	c->quant_dq = json_is_true(dq);
	long long b = json_integer_value(bs);
	c->quant_block = b > 0 && b <= ENG_QUANT_BLOCK_MAX ? (int)b : -1;
	if (eng_quant_validate(c, "'base_model_quantization'", &e) < 0)
		return bad(err, path, "%s (types nf4 and fp4; compute float32 or bfloat16)", e.msg);
	return 0;
}

int eng_peft_read_config(const char *dir, eng_config *cfg, char *base, size_t baselen,
	eng_err *err)
{
	char path[PATH_LEN + 32];
	json_error_t je;
	json_t *root = NULL, *v;
	FILE *fp = NULL;
	eng_config c;
	int rc = -1, r = 0;
	snprintf(path, sizeof path, "%s/" ENG_PEFT_CONFIG, dir);
	if (!(fp = eng_fs_fopen_read(path, "adapter config", err)))
		return -1;
	if (!(root = json_loadf(fp, JSON_REJECT_DUPLICATES, &je)) || !json_is_object(root)) {
		char why[96];
		bad(err, path, "not a JSON object%s%s", root ? "" : ": ",
			root ? "" : eng_err_json(&je, why, sizeof why));
		goto out;
	}
	v = json_object_get(root, "peft_type");
	if (!json_is_string(v) || strcmp(json_string_value(v), "LORA") != 0) {
		bad(err, path, "'peft_type' must be \"LORA\"");
		goto out;
	}
	v = json_object_get(root, "r");
	if (json_is_integer(v) && json_integer_value(v) >= 1 &&
		json_integer_value(v) <= ENG_LORA_MAX_R)
		r = (int)json_integer_value(v);
	json_t *alpha = json_object_get(root, "lora_alpha");
	if (!r || !json_is_number(alpha) || !(json_number_value(alpha) > 0.0)) {
		bad(err, path, "'r' must be an integer 1..%d and 'lora_alpha' a positive number",
			ENG_LORA_MAX_R);
		goto out;
	}
	if (refuse_unsupported(path, root, err) < 0 ||
		read_base(path, dir, root, base, baselen, err) < 0 ||
		eng_import_base_config(base, &c, err) < 0 ||
		read_targets(path, root, &c, &c.lora_units, err) < 0 ||
		read_quant(path, root, &c, err) < 0)
		goto out;
	c.lora_r = r;
	c.lora_alpha = json_number_value(alpha);
	*cfg = c;
	rc = 0;
out:
	json_decref(root);
	fclose(fp);
	return rc;
}

int eng_peft_load(eng_model *m, const char *dir, eng_err *err)
{
	char path[PATH_LEN + 32], name[ENG_NAME_MAX + 32];
	eng_st_file f;
	int nb = eng_lora_base_tensors(&m->cfg), rc = -1, found = 0;
	memset(&f, 0, sizeof f);
	snprintf(path, sizeof path, "%s/" ENG_PEFT_WEIGHTS, dir);
	if (eng_st_read(&f, path, err) < 0)
		goto out;
	for (int i = nb; i < m->ntensors; i++) {
		const eng_ptensor *t = &m->tensors[i];
		snprintf(name, sizeof name, ENG_PEFT_PREFIX "%s", t->name);
		if (!eng_st_find(&f, name)) {
			eng_errf(err, "'%s': no tensor '%s' (the adapters of adapter_config.json's "
				      "target_modules)", path, name);
			goto out;
		}
		if (eng_st_get_f32(&f, name, t->ndim, t->shape, m->params + t->offset, err) < 0)
			goto out;
		found++;
	}
	if (f.n != found) {
		eng_errf(err, "'%s': %d tensors, the adapters of its config are %d", path, f.n, found);
		goto out;
	}
	eng_model_params_changed(m);
	rc = 0;
out:
	eng_st_free(&f);
	return rc;
}

/* eng_fs_fill_fn: adapter_config.json, two-space indent */
static int config_fill(FILE *f, void *ud, eng_err *err)
{
	(void)err;
	/* 17 digits: lora_alpha reads back as the same double (the scale of a resumed run) */
	if (json_dumpf(ud, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) == 0)
		fputc('\n', f);
	return 0;
}

/* LoraConfig for cfg's adapters: target_modules the units' module names (their last part,
 * as PEFT users write them, when that names no other unit) */
static json_t *lora_config(const eng_config *cfg, const char *base)
{
	eng_lora_unit u[ENG_LORA_UNITS];
	int nu = eng_lora_units(cfg, u);
	json_t *targets = json_array();
	for (int i = 0; targets && i < nu; i++)
		if (cfg->lora_units >> i & 1)
			json_array_append_new(targets, json_string(u[i].module));
	json_t *q = !cfg->quant ? NULL : json_pack("{s:s, s:b, s:s, s:b, s:s, s:i}",
		"quant_method", "bitsandbytes",
		"load_in_4bit", 1,
		"bnb_4bit_quant_type", eng_quant_names[cfg->quant],
		"bnb_4bit_use_double_quant", cfg->quant_dq,
		"bnb_4bit_compute_dtype", cfg->quant_bf16 ? "bfloat16" : "float32",
		"bnb_4bit_blocksize", cfg->quant_block);
	/* clang-format off */
	json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:f, s:o, s:f, s:s, s:b, s:b, s:b, s:n, s:b}",
		"peft_type", "LORA",
		"task_type", "CAUSAL_LM",
		"base_model_name_or_path", base,
		"r", cfg->lora_r,
		"lora_alpha", cfg->lora_alpha,
		"target_modules", targets,
		"lora_dropout", 0.0,
		"bias", "none",
		"fan_in_fan_out", cfg->arch == ENG_ARCH_GPT2,
		"init_lora_weights", 1,
		"inference_mode", 0,
		"modules_to_save",
		"use_rslora", 0);
	/* clang-format on */
	/* the base as the adapters saw it: its quantization, as BitsAndBytesConfig names it */
	if (o && q)
		json_object_set_new(o, "base_model_quantization", q);
	else
		json_decref(q);
	return o;
}

int eng_peft_write_at(const eng_dir *d, const eng_config *cfg, const eng_ptensor *tensors,
	int ntensors, const float *params, const char *base, eng_err *err)
{
	int nb = eng_lora_base_tensors(cfg), n = ntensors - nb, rc = -1;
	eng_st_entry *e = calloc((size_t)(n > 0 ? n : 1), sizeof *e);
	char (*names)[ENG_NAME_MAX + 32] = calloc((size_t)(n > 0 ? n : 1), sizeof *names);
	json_t *root = lora_config(cfg, base);
	if (!e || !names || !root) {
		eng_errf(err, "out of memory writing the adapters");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		const eng_ptensor *t = &tensors[nb + i];
		snprintf(names[i], sizeof names[i], ENG_PEFT_PREFIX "%s", t->name);
		e[i] = (eng_st_entry){names[i], 2, {t->shape[0], t->shape[1]}, params + t->offset};
	}
	if (eng_st_write_at(d, ENG_PEFT_WEIGHTS, e, n, err) < 0 ||
		eng_fs_write_at(d, ENG_PEFT_CONFIG, config_fill, root, err) < 0)
		goto out;
	rc = 0;
out:
	json_decref(root);
	free(names);
	free(e);
	return rc;
}

/* The size, inode and modification time (ns) of d/name into *size, *ino, *mtime, the file
 * the loader reads (a link followed, as for the hub cache's blobs): 0 or -1 */
static int stat_of(const eng_dir *d, const char *name, long long *size, long long *ino,
	long long *mtime)
{
	struct stat st;
	if (fstatat(d->fd, name, &st, 0) < 0 || !S_ISREG(st.st_mode))
		return -1;
	*size = (long long)st.st_size;
	*ino = (long long)st.st_ino;
	*mtime = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
	return 0;
}

/* A regular file d/name opened to read as the loader opens a base's files (relative to the
 * base's descriptor; a final link followed, as the hub cache's to its blobs): the
 * descriptor, or -1 with a message */
static int open_base_file(const eng_dir *d, const char *name, eng_err *err)
{
	struct stat st;
	int fd = openat(d->fd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		fd = -1;
		errno = EINVAL;
	}
	if (fd < 0)
		eng_errf(err, "cannot read %s of the base '%s': %s", name, eng_err_path(d->path),
			errno == EINVAL ? "not a regular file" : strerror(errno));
	return fd;
}

/* The weights' files of the base d: model.safetensors, or the index's shards (each once,
 * plain names of d); their sizes summed, inodes and times folded, into *size, *ino,
 * *mtime */
static int weights_stat(const eng_dir *d, long long *size, long long *ino, long long *mtime,
	eng_err *err)
{
	if (stat_of(d, "model.safetensors", size, ino, mtime) == 0)
		return 0;
	int fd = open_base_file(d, "model.safetensors.index.json", err);
	json_t *root = fd >= 0 ? json_loadfd(fd, 0, NULL) : NULL;
	json_t *map = json_object_get(root, "weight_map");
	json_t *seen = json_object(), *v;
	const char *name;
	int rc = json_is_object(map) ? 0 : -1;
	*size = *ino = *mtime = 0;
	json_object_foreach(map, name, v) {
		const char *shard = json_string_value(v);
		long long s1, i1, m1;
		if (!shard || json_object_get(seen, shard))
			continue;
		json_object_set_new(seen, shard, json_true());
		if (strchr(shard, '/') || stat_of(d, shard, &s1, &i1, &m1) < 0) {
			rc = -1;
			break;
		}
		*size += s1;
		*ino = *ino * 31 + i1;
		*mtime = *mtime > m1 ? *mtime : m1;
	}
	json_decref(seen);
	json_decref(root);
	if (fd >= 0)
		close(fd);
	return rc < 0 ? eng_errf(err, "the base '%s': no model.safetensors nor shards of an "
				     "index that could be read", eng_err_path(d->path)) : 0;
}

int eng_peft_base_pin(const eng_dir *d, char *out, size_t outlen, eng_err *err)
{
	char cfg[65];
	long long size, ino, mtime;
	int fd = open_base_file(d, "config.json", err);
	if (fd < 0)
		return -1;
	int rc = eng_sha256_fd(fd, "config.json", cfg, err);
	close(fd);
	if (rc < 0 || weights_stat(d, &size, &ino, &mtime, err) < 0)
		return -1;
	int n = snprintf(out, outlen, "{\"config_sha256\":\"%s\",\"weights_bytes\":%lld,"
		"\"weights_inode\":%lld,\"weights_mtime_ns\":%lld}", cfg, size, ino, mtime);
	return n > 0 && (size_t)n < outlen ? 0 : eng_errf(err, "base pin too long");
}
