/* eng_import.c - loading weights from files other programs wrote into the model's table.
 *
 * Today: Hugging Face GPT-2 model.safetensors (float32, or F16/BF16 converted on load by
 * eng_st). Not here: remat's own full checkpoints with optimizer state (eng_ckpt.c).
 */
#include "eng_import.h"

#include <string.h>

#include "eng_st.h"

/* Tensors a Hugging Face GPT-2 file may carry that this engine does not keep: the tied
 * lm_head and the causal-mask buffers older transformers versions saved. */
static int skippable(const char *name)
{
	size_t n = strlen(name);
	return strcmp(name, "lm_head.weight") == 0 ||
	       (n > 9 && strcmp(name + n - 9, ".attn.bias") == 0) ||
	       (n > 16 && strcmp(name + n - 16, ".attn.masked_bias") == 0);
}

int eng_model_load_safetensors(eng_model *m, const char *path, eng_err *err)
{
	eng_st_file f;
	int rc = -1;
	if (eng_st_read(&f, path, err) < 0)
		return -1;
	for (int i = 0; i < f.n; i++) {
		if (!eng_model_find(m, f.t[i].name) && !skippable(f.t[i].name)) {
			eng_errf(err, "'%s': unexpected tensor '%.80s' for a GPT-2 of %d layers",
				path, f.t[i].name, m->cfg.n_layer);
			goto out;
		}
	}
	for (int i = 0; i < m->ntensors; i++) {
		const eng_ptensor *t = &m->tensors[i];
		if (eng_st_get_f32(&f, t->name, t->ndim, t->shape, m->params + t->offset, err) < 0)
			goto out;
	}
	rc = 0;
out:
	eng_st_free(&f);
	return rc;
}

