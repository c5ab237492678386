/* eng_import.c - models other programs wrote, into the model's table; and out to llm.c.
 *
 * Hugging Face GPT-2 and Llama model.safetensors as transformers writes them (with or
 * without the "transformer." or "model." prefix, with or without a tied lm_head, F32, F16 or
 * BF16, in one file or in shards named by model.safetensors.index.json), llm.c model
 * files through eng_llmc.c, and the choice between the two that model.init_from makes.
 * Not here: remat's own full checkpoints with optimizer state (eng_ckpt_*.c); the formats'
 * bytes (eng_st.c, eng_llmc.c).
 */
#include "eng_import.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_hfconfig.h"
#include "eng_llmc.h"
#include "eng_st.h"

#define HF_LM_HEAD    "lm_head.weight" /* never prefixed */
#define PATH_MAX_LEN  4096	       /* longest init_from path joined with a file name here */
#define HF_INDEX      "model.safetensors.index.json" /* a sharded checkpoint's map */

/* The prefix of the family's names in a ...ForCausalLM / ...LMHeadModel checkpoint (the
 * bare GPT2Model / LlamaModel's lack it); the lm_head is never prefixed */
static const char *hf_prefix(const eng_config *c)
{
	return c->arch == ENG_ARCH_LLAMA ? "model." : "transformer.";
}

static int has_prefix(const eng_config *c, const char *name)
{
	return strncmp(name, hf_prefix(c), strlen(hf_prefix(c))) == 0;
}

/* Buffers older transformers versions saved with the weights (name without the prefix),
 * of layers N < n_layer: GPT-2's causal masks h.N.attn.bias, h.N.attn.masked_bias; Llama's
 * rotary frequencies layers.N.self_attn.rotary_emb.inv_freq. */
static int is_mask_buffer(const eng_config *c, const char *name)
{
	const char *p = name, *blocks = c->arch == ENG_ARCH_LLAMA ? "layers." : "h.";
	int layer = 0, n_layer = c->n_layer;
	if (strncmp(p, blocks, strlen(blocks)) != 0)
		return 0;
	p += strlen(blocks);
	if (*p < '0' || *p > '9')
		return 0;
	for (; *p >= '0' && *p <= '9'; p++) {
		layer = layer * 10 + (*p - '0');
		if (layer >= n_layer)
			return 0;
	}
	if (c->arch == ENG_ARCH_LLAMA)
		return strcmp(p, ".self_attn.rotary_emb.inv_freq") == 0;
	return strcmp(p, ".attn.bias") == 0 || strcmp(p, ".attn.masked_bias") == 0;
}

/* What the files of one model said so far (one file, or the shards of a sharded one). */
typedef struct hf_load {
	int prefixed;                 /* -1 not known yet; else whether names carry the prefix */
	char first[ENG_NAME_MAX];     /* the name that decided it, for the mixing message */
	unsigned char *seen;          /* per tensor of the model's table: loaded */
	const char *what;             /* the file, or the index of the shards, in messages */
	int check;                    /* headers only (eng_import_check): every name, shape and
				       * offset checked, no weight read or copied */
} hf_load;

/* Loads the tensors of file f into m, checking each against the table and what the files
 * before it said (ls): names, prefix, shapes, no tensor twice. */
static int load_file(eng_model *m, const eng_st_file *f, hf_load *ls, eng_err *err)
{
	const char *prefix = hf_prefix(&m->cfg);
	size_t plen = strlen(prefix);
	char full[ENG_NAME_MAX + 16];
	for (int i = 0; i < f->n; i++) {
		const eng_st_tensor *t = &f->t[i];
		const eng_ptensor *mt = NULL;
		if (strcmp(t->name, HF_LM_HEAD) == 0 && eng_config_tied(&m->cfg)) {
			/* tied: the engine's wte is the lm_head, so the copy is only checked */
			const eng_ptensor *wte = &m->tensors[0];
			if (t->ndim != 2 || t->shape[0] != wte->shape[0] ||
				t->shape[1] != wte->shape[1])
				return eng_errf(err, "'%s': tensor '" HF_LM_HEAD "' is not of wte's "
					"shape [%lld, %lld] (the lm_head is tied to wte)", f->path,
					(long long)wte->shape[0], (long long)wte->shape[1]);
			continue;
		}
		if (strcmp(t->name, HF_LM_HEAD) == 0) {
			mt = eng_model_find(m, HF_LM_HEAD); /* untied: a tensor of its own */
		} else {
			int pre = has_prefix(&m->cfg, t->name);
			if (ls->prefixed < 0) {
				ls->prefixed = pre;
				snprintf(ls->first, sizeof ls->first, "%s", t->name);
			} else if (pre != ls->prefixed) {
				return eng_errf(err, "'%s' mixes tensor names with and without the "
					"'%s' prefix ('%.80s' and '%.80s')", ls->what, prefix,
					eng_err_plain(ls->first), eng_err_plain(t->name));
			}
			const char *base = t->name + (pre ? plen : 0);
			if (is_mask_buffer(&m->cfg, base))
				continue;
			snprintf(full, sizeof full, "%s%s", prefix, base);
			mt = strlen(base) < sizeof full - plen ? eng_model_find(m, full) : NULL;
		}
		if (!mt)
			return eng_errf(err, "'%s': unexpected tensor '%.80s' for a %s of %d layers",
				f->path, eng_err_plain(t->name),
				m->cfg.arch == ENG_ARCH_LLAMA ? "Llama" : "GPT-2",
				m->cfg.n_layer);
		size_t k = (size_t)(mt - m->tensors);
		if (ls->seen[k])
			return eng_errf(err, "'%s': tensor '%.80s' again (an earlier shard held it)",
				f->path, eng_err_plain(t->name));
		if (ls->check) {
			if (eng_st_check_shape(f, t->name, mt->ndim, mt->shape, err) < 0)
				return -1;
		} else {
			float *dst = eng_model_tensor_dst(m, mt, err);
			if (!dst || eng_st_get_f32(f, t->name, mt->ndim, mt->shape, dst, err) < 0)
				return -1;
			eng_model_tensor_loaded(m, mt); /* 4 bits: quantized now */
		}
		ls->seen[k] = 1;
	}
	return 0;
}

/* Every tensor of the table loaded, or the first missing one, named as the files spell
 * them. */
static int load_done(eng_model *m, const hf_load *ls, eng_err *err)
{
	for (int i = 0; i < eng_lora_base_tensors(&m->cfg); i++) { /* adapters: eng_peft_load */
		const char *name = m->tensors[i].name;
		int pre = has_prefix(&m->cfg, name); /* all but an untied lm_head */
		if (!ls->seen[i])
			return eng_errf(err, "tensor '%s' not found in '%s'",
				name + (pre && ls->prefixed == 0 ? strlen(hf_prefix(&m->cfg)) : 0),
				ls->what);
	}
	if (!ls->check)
		eng_model_params_changed(m);
	return 0;
}

/* A safetensors file opened, its tensors read as they load (eng_st_open), or its header
 * alone when checking */
static int st_open(eng_st_file *f, const char *path, int check, eng_err *err)
{
	return check ? eng_st_read_header(f, path, err) : eng_st_open(f, path, err);
}

/* eng_model_load_safetensors, or with check its checks on the header alone */
static int load_single(eng_model *m, const char *path, int check, eng_err *err)
{
	eng_st_file f;
	hf_load ls = {-1, "", calloc((size_t)m->ntensors, 1), path, check};
	int rc = -1;
	memset(&f, 0, sizeof f);
	if (!ls.seen)
		eng_errf(err, "out of memory reading '%s'", path);
	else if (st_open(&f, path, check, err) == 0 && load_file(m, &f, &ls, err) == 0)
		rc = load_done(m, &ls, err);
	eng_st_free(&f);
	free(ls.seen);
	return rc;
}

int eng_model_load_safetensors(eng_model *m, const char *path, eng_err *err)
{
	return load_single(m, path, 0, err);
}

/* A shard's name as the index gives it: a plain file name of the directory, nothing that
 * could leave it */
static int shard_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 255 || s[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(s[i] == '.' || s[i] == '-' || s[i] == '_' || (s[i] >= '0' && s[i] <= '9') ||
			    (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
			return 0;
	return 1;
}

/* The index's weight_map (tensor -> shard), checked: an object of shard names. Borrowed
 * from root. NULL with a message. */
static json_t *weight_map(json_t *root, const char *what, eng_err *err)
{
	json_t *map = json_is_object(root) ? json_object_get(root, "weight_map") : NULL;
	const char *name;
	json_t *v;
	if (!json_is_object(map) || json_object_size(map) == 0) {
		eng_errf(err, "'%s': no \"weight_map\" object of tensor names and shard files", what);
		return NULL;
	}
	json_object_foreach(map, name, v)
	{
		if (!json_is_string(v) || !shard_name_ok(json_string_value(v))) {
			eng_errf(err, "'%s': tensor '%.80s' is mapped to %s, not to a file name of "
				"its directory (letters, digits, '.', '-', '_')", what,
				eng_err_plain(name),
				json_is_string(v) ? "a path" : "something not a string");
			return NULL;
		}
	}
	return map;
}

/* Loads shard `file` (in directory from) of the index's map: every tensor it holds is one
 * the map puts in it, and it holds all `listed` of those. */
static int load_shard(eng_model *m, const char *from, const char *file, size_t listed,
	json_t *map, hf_load *ls, eng_err *err)
{
	eng_st_file f;
	char path[PATH_MAX_LEN + 260];
	int rc = -1;
	snprintf(path, sizeof path, "%s/%s", from, file);
	if (st_open(&f, path, ls->check, err) < 0)
		return -1;
	for (int i = 0; i < f.n; i++) {
		json_t *w = json_object_get(map, f.t[i].name);
		if (!w || strcmp(json_string_value(w), file) != 0) {
			eng_errf(err, "'%s' holds tensor '%.80s', which the index %s", f.path,
				eng_err_plain(f.t[i].name), w ? "puts in another shard" : "does not list");
			goto out;
		}
	}
	if ((size_t)f.n != listed)
		eng_errf(err, "'%s' holds %d tensors, the index lists %zu in it", f.path, f.n,
			listed);
	else
		rc = load_file(m, &f, ls, err);
out:
	eng_st_free(&f);
	return rc;
}

/* <from>/model.safetensors.index.json and the shards it names, as transformers'
 * save_pretrained writes a model past its max_shard_size: each shard read, checked and
 * freed in the order the map first names it. Shards are read as model.safetensors is, a
 * symlink followed (Hugging Face's hub cache links a snapshot's files to its blobs); the
 * index's plain file names keep them in the directory. */
static int load_sharded(eng_model *m, const char *from, int check, eng_err *err)
{
	json_t *root = NULL, *shards = json_object(), *map, *v; /* shards: file -> tensors */
	json_error_t jerr;
	struct stat st;
	char what[PATH_MAX_LEN + 64];
	hf_load ls = {-1, "", calloc((size_t)m->ntensors, 1), what, check};
	const char *name;
	int rc = -1, fd = -1;
	snprintf(what, sizeof what, "%s/" HF_INDEX, from);
	if (!ls.seen || !shards) {
		eng_errf(err, "out of memory reading '%s'", what);
		goto out;
	}
	if ((fd = eng_fs_open_read(what, "shard index", &st, err)) < 0)
		goto out;
	/* jansson builds the whole tree first: a bound, as for a safetensors header */
	if ((size_t)st.st_size > ENG_ST_MAX_HEADER) {
		eng_errf(err, "'%s': larger than any index of shards (16 MiB)", what);
		goto out;
	}
	if (!(root = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr))) {
		char why[96];
		eng_errf(err, "'%s': not JSON: %s", what, eng_err_json(&jerr, why, sizeof why));
		goto out;
	}
	if (!(map = weight_map(root, what, err)))
		goto out;
	json_object_foreach(map, name, v)
	{
		json_t *n = json_object_get(shards, json_string_value(v));
		json_object_set_new(shards, json_string_value(v),
			json_integer(n ? json_integer_value(n) + 1 : 1));
	}
	json_object_foreach(shards, name, v)
		if (load_shard(m, from, name, (size_t)json_integer_value(v), map, &ls, err) < 0)
			goto out;
	rc = load_done(m, &ls, err);
out:
	if (fd >= 0)
		close(fd);
	json_decref(shards);
	json_decref(root);
	free(ls.seen);
	return rc;
}

int eng_import_is_file(const char *from)
{
	struct stat st;
	return stat(from, &st) == 0 && S_ISREG(st.st_mode);
}

/* buf = dir/name; -1 with a message when it does not fit (a path is never silently cut) */
static int join(char *buf, size_t n, const char *dir, const char *name, eng_err *err)
{
	int w = snprintf(buf, n, "%s/%s", dir, name);
	if (w < 0 || (size_t)w >= n)
		return eng_errf(err, "path too long: '%.64s...'", dir);
	return 0;
}

int eng_import_base_config(const char *from, eng_config *cfg, eng_err *err)
{
	char path[PATH_MAX_LEN + 32];
	if (eng_import_is_file(from))
		return eng_llmc_read_config(from, cfg, err);
	if (join(path, sizeof path, from, "config.json", err) < 0)
		return -1;
	return eng_hfconfig_read(path, cfg, err);
}

int eng_import_exists(const char *from, eng_err *err)
{
	struct stat st;
	if (stat(from, &st) < 0)
		return eng_errf(err, "model.init_from '%s': %s", from, errno == ENOENT
			? "no such directory (nor a model file)" : strerror(errno));
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return eng_errf(err, "model.init_from '%s': it is %s, neither a checkpoint directory "
			"nor a model file", from, eng_fs_kind(st.st_mode));
	if (S_ISDIR(st.st_mode) && access(from, X_OK) < 0) /* its files cannot be reached */
		return eng_errf(err, "model.init_from '%s': %s", from, strerror(errno));
	return 0;
}

/* eng_import_base_load, or with check the checks of every file's header alone */
static int base_weights(eng_model *m, const char *from, int check, eng_err *err)
{
	char path[PATH_MAX_LEN + 32];
	if (eng_import_is_file(from)) /* llm.c: eng_llmc_read_config checked its header */
		return check ? 0 : eng_model_load_llmc(m, from, err);
	if (join(path, sizeof path, from, "model.safetensors", err) < 0)
		return -1;
	struct stat st;
	/* no model.safetensors but an index of shards: a sharded checkpoint */
	if (lstat(path, &st) < 0 && errno == ENOENT) {
		char index[PATH_MAX_LEN + 64];
		if (join(index, sizeof index, from, HF_INDEX, err) < 0)
			return -1;
		if (lstat(index, &st) == 0)
			return load_sharded(m, from, check, err);
	}
	return load_single(m, path, check, err);
}

int eng_import_base_load(eng_model *m, const char *from, eng_err *err)
{
	return base_weights(m, from, 0, err);
}

int eng_import_base_check(const char *from, const eng_config *cfg, eng_err *err)
{
	eng_model m; /* the tensor table alone: nothing is allocated for the weights */
	memset(&m, 0, sizeof m);
	m.cfg = *cfg;
	m.ntensors = eng_model_ntensors(cfg);
	if (!(m.tensors = calloc((size_t)m.ntensors, sizeof *m.tensors)))
		return eng_errf(err, "out of memory checking '%s'", from);
	m.nfloats = eng_model_table(cfg, m.tensors, &m.ngrad);
	int rc = base_weights(&m, from, 1, err);
	free(m.tensors);
	return rc;
}
