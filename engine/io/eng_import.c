/* eng_import.c - models other programs wrote, into the model's table; and out to llm.c.
 *
 * Hugging Face GPT-2 model.safetensors as transformers writes it (with or without the
 * "transformer." prefix, with or without the tied lm_head, F32, F16 or BF16), llm.c model
 * files through eng_llmc.c, and the choice between the two that model.init_from makes.
 * Not here: remat's own full checkpoints with optimizer state (eng_ckpt.c); the formats'
 * bytes (eng_st.c, eng_llmc.c).
 */
#include "eng_import.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "eng_hfconfig.h"
#include "eng_llmc.h"
#include "eng_st.h"

#define HF_PREFIX     "transformer." /* GPT2LMHeadModel's names; GPT2Model's lack it */
#define HF_PREFIX_LEN (sizeof HF_PREFIX - 1)
#define HF_LM_HEAD    "lm_head.weight" /* never prefixed */
#define PATH_MAX_LEN  4096	       /* longest init_from path joined with a file name here */

static int has_prefix(const char *name)
{
	return strncmp(name, HF_PREFIX, HF_PREFIX_LEN) == 0;
}

/* h.N.attn.bias or h.N.attn.masked_bias with N < n_layer (name without the prefix): the
 * causal-mask buffers older transformers versions saved with the weights. */
static int is_mask_buffer(const char *name, int n_layer)
{
	const char *p = name;
	int layer = 0;
	if (strncmp(p, "h.", 2) != 0)
		return 0;
	p += 2;
	if (*p < '0' || *p > '9')
		return 0;
	for (; *p >= '0' && *p <= '9'; p++) {
		layer = layer * 10 + (*p - '0');
		if (layer >= n_layer)
			return 0;
	}
	return strcmp(p, ".attn.bias") == 0 || strcmp(p, ".attn.masked_bias") == 0;
}

int eng_model_load_safetensors(eng_model *m, const char *path, eng_err *err)
{
	const eng_st_tensor *lm_head = NULL, *with = NULL, *without = NULL;
	char full[ENG_NAME_MAX + HF_PREFIX_LEN];
	eng_st_file f;
	int rc = -1;
	if (eng_st_read(&f, path, err) < 0)
		return -1;
	for (int i = 0; i < f.n; i++) {
		const eng_st_tensor *t = &f.t[i];
		if (strcmp(t->name, HF_LM_HEAD) == 0)
			lm_head = t;
		else if (has_prefix(t->name))
			with = with ? with : t;
		else
			without = without ? without : t;
	}
	if (with && without) {
		eng_errf(err,
			 "'%s' mixes tensor names with and without the '" HF_PREFIX "' prefix "
			 "('%.80s' and '%.80s')",
			 path, with->name, without->name);
		goto out;
	}
	/* Names as the file spells them: the engine's table always has the prefix. */
	size_t skip = without ? HF_PREFIX_LEN : 0;
	for (int i = 0; i < f.n; i++) {
		const eng_st_tensor *t = &f.t[i];
		const char *base = t == lm_head ? NULL : t->name + (without ? 0 : HF_PREFIX_LEN);
		if (!base || is_mask_buffer(base, m->cfg.n_layer))
			continue;
		snprintf(full, sizeof full, HF_PREFIX "%s", base);
		if (strlen(base) >= sizeof full - HF_PREFIX_LEN || !eng_model_find(m, full)) {
			eng_errf(err, "'%s': unexpected tensor '%.80s' for a GPT-2 of %d layers",
				 path, t->name, m->cfg.n_layer);
			goto out;
		}
	}
	if (lm_head) {
		/* tied: the engine's wte is the lm_head, so the copy is only checked, never read */
		const eng_ptensor *wte = &m->tensors[0];
		if (lm_head->ndim != 2 || lm_head->shape[0] != wte->shape[0] ||
		    lm_head->shape[1] != wte->shape[1]) {
			eng_errf(err,
				 "'%s': tensor '" HF_LM_HEAD "' is not of wte's shape [%lld, %lld] "
				 "(the lm_head is tied to wte)",
				 path, (long long)wte->shape[0], (long long)wte->shape[1]);
			goto out;
		}
	}
	for (int i = 0; i < m->ntensors; i++) {
		const eng_ptensor *t = &m->tensors[i];
		ENG_ASSERT(has_prefix(t->name));
		if (eng_st_get_f32(&f, t->name + skip, t->ndim, t->shape, m->params + t->offset,
				   err) < 0)
			goto out;
	}
	eng_model_params_changed(m);
	rc = 0;
out:
	eng_st_free(&f);
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

int eng_import_read_config(const char *from, eng_config *cfg, eng_err *err)
{
	char path[PATH_MAX_LEN + 32];
	if (eng_import_is_file(from))
		return eng_llmc_read_config(from, cfg, err);
	if (join(path, sizeof path, from, "config.json", err) < 0)
		return -1;
	return eng_hfconfig_read(path, cfg, err);
}

int eng_import_load(eng_model *m, const char *from, eng_err *err)
{
	char path[PATH_MAX_LEN + 32];
	if (eng_import_is_file(from))
		return eng_model_load_llmc(m, from, err);
	if (join(path, sizeof path, from, "model.safetensors", err) < 0)
		return -1;
	return eng_model_load_safetensors(m, path, err);
}

int eng_export_llmc(const char *from, const char *out, int version, eng_err *err)
{
	eng_config cfg;
	eng_model m;
	int rc = -1;
	memset(&m, 0, sizeof m);
	if (eng_import_read_config(from, &cfg, err) < 0 ||
	    eng_model_init(&m, &cfg, 1, 1, 0, err) < 0 || eng_import_load(&m, from, err) < 0 ||
	    eng_model_save_llmc(&m, out, version, err) < 0)
		goto out;
	rc = 0;
out:
	eng_model_free(&m);
	return rc;
}
