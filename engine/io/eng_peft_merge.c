/* eng_peft_merge.c - remat-train --merge-lora: adapters folded into their base's weights
 * and written as a full Hugging Face model (PEFT's merge_and_unload). Above eng_import's
 * reading of what model.init_from names, which it calls; the adapters' files themselves
 * are eng_peft.c's.
 */
#include "eng_peft.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "eng_hfconfig.h"
#include "eng_import.h"
#include "eng_st.h"

#define PATH_LEN 4096 /* longest path kept here */

/* W += s B A for every adapter of m, in place in its base weights: a Linear's [out, in]
 * rows col0.. (of the joined q|k|v or gate|up too), a Conv1D's [in, out] columns col0..;
 * the sum of the r products in double, added once */
static void merge_into(eng_model *m)
{
	eng_lora_unit u[ENG_LORA_UNITS];
	int nu = eng_lora_units(&m->cfg, u), r = m->cfg.lora_r, conv = m->cfg.arch == ENG_ARCH_GPT2;
	double s = m->cfg.lora_alpha / m->cfg.lora_r;
	for (int l = 0; l < m->cfg.n_layer; l++)
		for (int k = 0; k < nu; k++) {
			const eng_layer_w *h = &m->w.h[l];
			if (!(m->cfg.lora_units >> k & 1))
				continue;
			float *W = (float *[]){h->qkvw, h->attprojw, h->fcw, h->fcprojw}[u[k].layer];
			const float *A = h->lora_a[k], *B = h->lora_b[k];
			int out = (int[]){eng_config_qkv(&m->cfg), m->cfg.n_embd,
				eng_config_ffn_in(&m->cfg), m->cfg.n_embd}[u[k].layer];
			for (int i = 0; i < u[k].cols; i++)
				for (int j = 0; j < u[k].in; j++) {
					double d = 0.0;
					for (int q = 0; q < r; q++)
						d += (double)B[(size_t)i * r + q] * A[(size_t)q * u[k].in + j];
					size_t at = conv ? (size_t)j * out + u[k].col0 + i
							 : (size_t)(u[k].col0 + i) * u[k].in + j;
					W[at] = (float)(W[at] + s * d);
				}
		}
}

/* 1 when directories a and b (open) are the same one */
static int same_dir(const eng_dir *a, const char *b)
{
	struct stat sa, sb;
	eng_dir d;
	eng_err e;
	if (eng_dir_open(&d, b, &e) < 0)
		return 0;
	int same = fstat(a->fd, &sa) == 0 && fstat(d.fd, &sb) == 0 && sa.st_dev == sb.st_dev &&
		   sa.st_ino == sb.st_ino;
	eng_dir_close(&d);
	return same;
}

/* out (opened, made when missing) may be written: not the adapters' directory, nor their
 * base, nor any checkpoint or adapter directory (a merged base beside adapter_config.json
 * would take them twice); its entries looked at through its descriptor, never a link's */
static int merge_target_ok(const eng_dir *out, const char *from, eng_err *err)
{
	char base[PATH_LEN + 32];
	eng_config c;
	if (eng_peft_read_config(from, &c, base, sizeof base, err) < 0)
		return -1;
	int adapter = eng_fs_entry(out, ENG_PEFT_CONFIG, 0, "overwrite", err);
	int ckpt = adapter < 0 ? 0 : eng_fs_entry(out, "trainer_state.json", 0, "overwrite", err);
	if (adapter < 0 || ckpt < 0)
		return -1;
	if (adapter || ckpt || same_dir(out, from) || same_dir(out, base))
		return eng_errf(err, "will not write the merged model into '%.200s': it is the "
				     "adapters' directory, their base, or a checkpoint; give a new "
				     "directory", out->path);
	return 0;
}

int eng_merge_lora(const char *from, const char *out, eng_err *err)
{
	eng_config cfg;
	eng_model m;
	eng_dir d = {-1, ""};
	int rc = -1;
	memset(&m, 0, sizeof m);
	if (eng_import_read_config(from, &cfg, err) < 0)
		return -1;
	if (!cfg.lora_r)
		return eng_errf(err, "'%s' holds no LoRA adapters (no %s)", from, ENG_PEFT_CONFIG);
	if (eng_dir_make(&d, out, err) < 0 || merge_target_ok(&d, from, err) < 0)
		goto out;
	for (int i = 0; i < eng_lora_base_tensors(&cfg); i++) /* no buffers for the base's */
		eng_config_freeze(&cfg, i);
	/* a quantized run's base: loaded in float32, then each weight its quantization
	 * dequantized (what the adapters trained beside), as a QLoRA merge onto a dequantized
	 * copy of the base */
	eng_config qc = cfg;
	eng_config_no_quant(&cfg);
	if (eng_model_init_host(&m, &cfg, err) < 0 || eng_import_load(&m, from, err) < 0 ||
		(qc.quant && eng_model_q4_roundtrip(&m, &qc, err) < 0))
		goto out;
	merge_into(&m);
	int nb = eng_lora_base_tensors(&cfg);
	eng_st_entry *e = calloc((size_t)nb, sizeof *e);
	if (!e) {
		eng_errf(err, "out of memory");
		goto out;
	}
	for (int i = 0; i < nb; i++) {
		const eng_ptensor *t = &m.tensors[i];
		e[i] = (eng_st_entry){t->name, t->ndim, {t->shape[0], t->shape[1]},
			m.params + t->offset};
	}
	eng_config base = cfg; /* config.json: the base's shape, no adapters */
	base.lora_r = 0;
	base.lora_units = 0;
	rc = eng_st_write_at(&d, "model.safetensors", e, nb, err) < 0 ||
			eng_hfconfig_write_at(&d, "config.json", &base, err) < 0
		? -1 : 0;
	free(e);
out:
	eng_dir_close(&d);
	eng_model_free(&m);
	return rc;
}
