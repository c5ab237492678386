/* test_lora.c - LoRA runs' files: a checkpoint holds the adapters as PEFT saves them
 * (checked here by a reader of PEFT's layout of its own: the safetensors header parsed by
 * hand, adapter_config.json's keys), names its base or holds it, verifies, resumes bit for
 * bit and re-imports to the trained model's loss; remat-train --merge-lora writes the base
 * with B A folded in. The numbers of LoRA against PyTorch: tests/reference (lora_*). */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_ckpt.h"
#include "eng_import.h"
#include "eng_peft.h"
#include "t_util.h"
#include "tests.h"

#define TIMEOUT 60

/* A LoRA job on the lora_llama reference's base (its own adapters: the job's "lora"), or on
 * the llama-tiny preset (base NULL); save into save */
static void lora_trainer(eng_trainer *tr, const char *base, const char *save, const char *more)
{
	char *data = t_data("reference/lora_llama");
	char model[ENG_PATH_LEN + 64];
	if (base)
		snprintf(model, sizeof model, "\"init_from\":\"%s\"", base);
	else
		snprintf(model, sizeof model, "\"preset\":\"llama-tiny\",\"vocab_size\":131");
	t_trainer(tr, "{\"model\":{%s},\"data\":{\"train\":\"%s/train.bin\"},\"batch\":2,"
		"\"seq_len\":20,\"steps\":4,\"threads\":2,\"optim\":{\"lr\":3e-3},\"seed\":7,"
		"\"lora\":{\"r\":4,\"alpha\":16,\"targets\":[\"q_proj\",\"v_proj\",\"down_proj\"]},"
		"\"remat\":{\"default\":\"full\"},\"save\":{\"dir\":\"%s\"}%s}", model, data, save,
		more ? more : "");
	free(data);
}

/* PEFT's layout, read without eng_st: the header's JSON, every tensor F32 "base_model.model."
 * + a module of the model + ".lora_A.weight" (r, in) or ".lora_B.weight" (out, r), the data
 * offsets back to back; returns how many */
static int read_peft_weights(const char *path, const eng_model *m)
{
	size_t len;
	unsigned char *buf = (unsigned char *)t_read_file(path, &len);
	uint64_t hl = 0;
	for (int k = 7; k >= 0; k--)
		hl = hl << 8 | buf[k];
	ck_assert(8 + hl <= len);
	json_error_t je;
	json_t *h = json_loadb((const char *)buf + 8, hl, 0, &je), *v;
	ck_assert_msg(h != NULL, "header: %s", je.text);
	const char *name;
	int n = 0;
	size_t data = len - 8 - hl, total = 0;
	json_object_foreach(h, name, v) {
		if (strcmp(name, "__metadata__") == 0)
			continue;
		ck_assert_str_eq(json_string_value(json_object_get(v, "dtype")), "F32");
		ck_assert_msg(strncmp(name, "base_model.model.", 17) == 0, "%s", name);
		const eng_ptensor *t = eng_model_find(m, name + 17);
		ck_assert_msg(t && strstr(name, ".lora_") && t->ndim == 2, "%s", name);
		json_t *sh = json_object_get(v, "shape"), *off = json_object_get(v, "data_offsets");
		int64_t d0 = json_integer_value(json_array_get(sh, 0));
		int64_t d1 = json_integer_value(json_array_get(sh, 1));
		ck_assert(d0 == t->shape[0] && d1 == t->shape[1]);
		ck_assert(strstr(name, ".lora_A.") ? d0 == m->cfg.lora_r : d1 == m->cfg.lora_r);
		size_t a = (size_t)json_integer_value(json_array_get(off, 0));
		size_t b = (size_t)json_integer_value(json_array_get(off, 1));
		ck_assert(b - a == 4 * (size_t)(d0 * d1) && b <= data);
		total += b - a;
		n++;
	}
	ck_assert_uint_eq(total, data);
	json_decref(h);
	free(buf);
	return n;
}

/* adapter_config.json as PEFT's LoraConfig.from_pretrained reads it */
static void read_peft_config(const char *path, const char *base, const eng_model *m)
{
	json_error_t je;
	json_t *c = json_load_file(path, 0, &je);
	ck_assert_msg(c != NULL, "%s: %s", path, je.text);
	ck_assert_str_eq(json_string_value(json_object_get(c, "peft_type")), "LORA");
	ck_assert_int_eq(json_integer_value(json_object_get(c, "r")), m->cfg.lora_r);
	ck_assert(json_number_value(json_object_get(c, "lora_alpha")) == m->cfg.lora_alpha);
	ck_assert_str_eq(json_string_value(json_object_get(c, "base_model_name_or_path")), base);
	ck_assert_str_eq(json_string_value(json_object_get(c, "bias")), "none");
	json_t *t = json_object_get(c, "target_modules");
	ck_assert_int_eq((int)json_array_size(t), 3);
	ck_assert_str_eq(json_string_value(json_array_get(t, 0)), "self_attn.q_proj");
	json_decref(c);
}

/* Checkpoints of a LoRA run on a base that lives elsewhere: the adapters, the moments, the
 * state; the base named by its real path, never copied. It verifies, resumes bit for bit,
 * and as init_from gives the trained model's loss. */
/* A copy of the lora_llama reference's base (config.json, model.safetensors), malloc'd */
static char *base_copy(void)
{
	static const char *const files[] = {"config.json", "model.safetensors"};
	char *dir = t_tmp_dir("lora_base"), src[ENG_PATH_LEN], dst[ENG_PATH_LEN];
	for (int i = 0; i < 2; i++) {
		char *ref = t_data("reference/lora_llama");
		size_t len;
		snprintf(src, sizeof src, "%s/%s", ref, files[i]);
		snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
		char *buf = t_read_file(src, &len);
		t_write_file(dst, buf, len);
		free(buf);
		free(ref);
	}
	return dir;
}

START_TEST(test_lora_checkpoint_external_base)
{
	char *base = base_copy(), *root = t_tmp_dir("lora_ckpt");
	char path[ENG_PATH_LEN + 64], file[ENG_PATH_LEN + 128], real[PATH_MAX];
	eng_trainer a, b;
	eng_err err;
	float loss[5];
	struct stat sb;
	lora_trainer(&a, base, root, NULL);
	t_steps_saving(&a, 4, 2, loss, path, sizeof path);
	snprintf(file, sizeof file, "%s/model.safetensors", path);
	ck_assert_msg(stat(file, &sb) < 0, "the base was copied into the checkpoint");
	snprintf(file, sizeof file, "%s/" ENG_PEFT_WEIGHTS, path);
	ck_assert_int_eq(read_peft_weights(file, &a.model), 2 * 3 * a.model.cfg.n_layer);
	snprintf(file, sizeof file, "%s/" ENG_PEFT_CONFIG, path);
	ck_assert(realpath(base, real));
	read_peft_config(file, real, &a.model);
	ck_assert_msg(eng_ckpt_verify(path, &err) == 0, "%s", err.msg);
	/* resumed: steps 3 and 4 as the uninterrupted run took them; the job's "lora" kept, as
	 * rematd's resumed spec keeps it (the same adapters: accepted) */
	char *data = t_data("reference/lora_llama");
	t_trainer(&b, "{\"model\":{\"init_from\":\"%s\",\"resume\":true},\"data\":{\"train\":"
		"\"%s/train.bin\"},\"batch\":2,\"seq_len\":20,\"steps\":4,\"threads\":2,"
		"\"optim\":{\"lr\":3e-3},\"remat\":{\"default\":\"full\"},\"lora\":{\"r\":4,"
		"\"alpha\":16,\"targets\":[\"q_proj\",\"v_proj\",\"down_proj\"]}}", path, data);
	t_resumed_steps(&b, 3, 4, loss);
	ck_assert(memcmp(a.model.params, b.model.params, a.model.nfloats * 4) == 0);
	eng_trainer_free(&b);
	/* other adapters than the checkpoint's: refused */
	char text[16384];
	snprintf(text, sizeof text, "{\"model\":{\"init_from\":\"%s\",\"resume\":true},"
		"\"data\":{\"train\":\"%s/train.bin\"},\"batch\":2,\"seq_len\":20,\"steps\":4,"
		"\"lora\":{\"r\":8,\"targets\":[\"q_proj\"]}}", path, data);
	eng_spec sp;
	ck_assert(eng_spec_parse(&sp, text, &err) == 0);
	ck_assert_int_eq(eng_trainer_init(&b, &sp, &err), -1);
	ck_assert_msg(strstr(err.msg, "is not the adapters of model.init_from"), "%s", err.msg);
	/* the base changed under the checkpoint: it no longer verifies */
	snprintf(file, sizeof file, "%s/config.json", base);
	size_t clen;
	char *cfg = t_read_file(file, &clen), *orig = t_read_file(file, &clen);
	char *brace = strrchr(cfg, '}');
	ck_assert_ptr_nonnull(brace);
	*brace = '\0';
	char edited[8192];
	snprintf(edited, sizeof edited, "%s, \"pad_token_id\": 1}\n", cfg);
	t_write_file(file, edited, strlen(edited));
	free(cfg);
	ck_assert_int_eq(eng_ckpt_verify(path, &err), -1);
	ck_assert_msg(strstr(err.msg, "changed since it was saved"), "%s", err.msg);
	/* its config back, its weights written again (the same bytes, a new file): caught too */
	t_write_file(file, orig, clen);
	ck_assert_msg(eng_ckpt_verify(path, &err) == 0, "%s", err.msg);
	snprintf(file, sizeof file, "%s/model.safetensors", base);
	char *w = t_read_file(file, &clen);
	ck_assert(unlink(file) == 0);
	t_write_file(file, w, clen);
	free(w);
	free(orig);
	ck_assert_int_eq(eng_ckpt_verify(path, &err), -1);
	ck_assert_msg(strstr(err.msg, "changed since it was saved"), "%s", err.msg);
	/* a changed adapter file no longer verifies */
	snprintf(file, sizeof file, "%s/" ENG_PEFT_WEIGHTS, path);
	FILE *f = fopen(file, "r+b");
	ck_assert_ptr_nonnull(f);
	fseek(f, -3, SEEK_END);
	fputc(0x5a, f);
	fclose(f);
	ck_assert_int_eq(eng_ckpt_verify(path, &err), -1);
	ck_assert_msg(strstr(err.msg, ENG_PEFT_WEIGHTS) && strstr(err.msg, "SHA-256"), "%s",
		err.msg);
	eng_trainer_free(&a);
	free(data);
	free(root);
	free(base);
}
END_TEST

static float batch_loss(const char *from, const char *data, eng_model *keep);

/* tests/data/peft_resolve.py ADAPTER run from the working directory cwd: PEFT's and
 * transformers' way to the base and the adapters' files. Its exit status, its output in
 * *out; -1 (a line said) without python3. */
static int peft_resolve(const char *cwd, const char *adapter, char **out)
{
	if (access("/usr/bin/python3", X_OK) != 0) {
		fprintf(stderr, "lora: PEFT's resolution not checked: no /usr/bin/python3 "
				"(scripts/deps.sh installs python3)\n");
		return -1;
	}
	char *script = t_data("peft_resolve.py");
	char *argv[] = {"/bin/sh", "-c", "cd \"$1\" && exec /usr/bin/python3 \"$2\" \"$3\"",
		"sh", (char *)cwd, script, (char *)adapter, NULL};
	int rc = t_run(argv, out);
	free(script);
	return rc;
}

/* The checkpoint at path, as PEFT opens it from / and from tmp: its base is own (the
 * absolute path of its base/ directory) */
static void peft_finds(const char *path, const char *own, const char *tmp)
{
	const char *const cwds[] = {"/", tmp};
	char want[PATH_MAX + 64];
	snprintf(want, sizeof want, "base %s\nok\n", own);
	for (int i = 0; i < 2; i++) {
		char *out = NULL;
		int rc = peft_resolve(cwds[i], path, &out);
		ck_assert_msg(rc < 0 || (rc == 0 && !strcmp(out, want)), "PEFT from %s: %d\n%s",
			cwds[i], rc, out ? out : "");
		free(out);
	}
}

/* A LoRA run of a preset (no base on disk): its checkpoints hold the base too, in base/,
 * named by its absolute path, so that PEFT and transformers find it from any working
 * directory (tests/data/peft_resolve.py follows them); they load back as the trained
 * model, also once moved elsewhere (remat takes the base they carry) */
START_TEST(test_lora_checkpoint_own_base)
{
	char *root = t_tmp_dir("lora_own"), path[ENG_PATH_LEN + 64], file[ENG_PATH_LEN + 128];
	char own[PATH_MAX + 16];
	eng_trainer a, b;
	eng_step_stats st;
	eng_err err;
	lora_trainer(&a, NULL, root, NULL);
	for (int s = 0; s < 2; s++)
		ck_assert_msg(eng_trainer_step_as(&a, NULL, &st, &err) == 0, "%s", err.msg);
	t_save(&a, path, sizeof path);
	snprintf(file, sizeof file, "%s/" ENG_PEFT_CONFIG, path);
	ck_assert_ptr_nonnull(realpath(path, own));
	strcat(own, "/" ENG_PEFT_BASE_DIR);
	read_peft_config(file, own, &a.model);
	peft_finds(path, own, root);
	snprintf(file, sizeof file, "%s/model.safetensors", path);
	ck_assert_int_ne(access(file, F_OK), 0); /* nothing a loader without peft takes */
	snprintf(file, sizeof file, "%s/" ENG_PEFT_BASE_DIR "/model.safetensors", path);
	eng_st_file f;
	ck_assert_msg(eng_st_read(&f, file, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(f.n, eng_lora_base_tensors(&a.model.cfg)); /* the base's alone */
	eng_st_free(&f);
	ck_assert_msg(eng_ckpt_verify(path, &err) == 0, "%s", err.msg);
	char *data = t_data("reference/lora_llama");
	t_trainer(&b, "{\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":\"%s/train.bin\"},"
		"\"batch\":2,\"seq_len\":20,\"steps\":1,\"threads\":2}", path, data);
	ck_assert(b.model.cfg.lora_r == 4 && b.model.ntensors == a.model.ntensors);
	ck_assert(memcmp(a.model.params, b.model.params, a.model.nfloats * 4) == 0);
	float la, lb;
	t_next(&b.train, b.inp, b.tgt);
	ck_assert(eng_model_loss(&a.model, b.inp, b.tgt, &la, &err) == 0);
	ck_assert(eng_model_loss(&b.model, b.inp, b.tgt, &lb, &err) == 0);
	ck_assert(memcmp(&la, &lb, sizeof la) == 0);
	eng_trainer_free(&b);
	/* that checkpoint as the start of another run, saving elsewhere: its checkpoints hold
	 * the base too (the first's may be gone when they are read) */
	char save2[ENG_PATH_LEN + 16], path2[ENG_PATH_LEN + 64];
	snprintf(save2, sizeof save2, "%s/other", root);
	t_trainer(&b, "{\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":\"%s/train.bin\"},"
		"\"batch\":2,\"seq_len\":20,\"steps\":1,\"threads\":2,\"save\":{\"dir\":\"%s\"}}",
		path, data, save2);
	ck_assert_msg(eng_trainer_step_as(&b, NULL, &st, &err) == 0, "%s", err.msg);
	t_save(&b, path2, sizeof path2);
	snprintf(file, sizeof file, "%s/" ENG_PEFT_CONFIG, path2);
	ck_assert_ptr_nonnull(realpath(path2, own));
	strcat(own, "/" ENG_PEFT_BASE_DIR);
	read_peft_config(file, own, &b.model);
	ck_assert_msg(eng_ckpt_verify(path2, &err) == 0, "%s", err.msg);
	eng_trainer_free(&b);
	/* moved: the name written no longer reaches its base; remat takes the one it carries */
	float before = batch_loss(path2, data, NULL), after;
	char moved[ENG_PATH_LEN + 80], name[80], there[ENG_PATH_LEN + 160];
	snprintf(moved, sizeof moved, "%s.moved", save2);
	snprintf(name, sizeof name, "%s", strrchr(path2, '/') + 1);
	ck_assert_int_eq(rename(save2, moved), 0);
	snprintf(there, sizeof there, "%s/%s", moved, name);
	ck_assert_msg(eng_ckpt_verify(there, &err) == 0, "%s", err.msg);
	after = batch_loss(there, data, NULL);
	ck_assert(memcmp(&before, &after, sizeof before) == 0);
	eng_trainer_free(&a);
	free(data);
	free(root);
}
END_TEST

/* The loss of one batch of data/train.bin under the model `from` names; its weights into
 * keep (may be NULL) */
static float batch_loss(const char *from, const char *data, eng_model *keep)
{
	eng_trainer tr;
	eng_err err;
	float loss;
	t_trainer(&tr, "{\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":\"%s/train.bin\"},"
		"\"batch\":2,\"seq_len\":20,\"steps\":1,\"threads\":2}", from, data);
	t_next(&tr.train, tr.inp, tr.tgt);
	ck_assert_msg(eng_model_loss(&tr.model, tr.inp, tr.tgt, &loss, &err) == 0, "%s", err.msg);
	if (keep) { /* its weights, for the caller */
		eng_err e;
		ck_assert(eng_model_init_host(keep, &tr.model.cfg, &e) == 0);
		memcpy(keep->params, tr.model.params, tr.model.nfloats * 4);
	}
	eng_trainer_free(&tr);
	return loss;
}

/* remat-train --merge-lora: the base with every adapter folded in, W + (alpha/r) B A (a
 * Llama's q_proj rows of the joined q|k|v, down_proj; GPT-2's Conv1D columns), the loss of
 * the adapted model to float rounding */
START_TEST(test_lora_merge)
{
	static const char *const cases[] = {"reference/lora_llama", "reference/lora_gpt2"};
	char *dir = t_data(cases[_i]), *out = t_tmp_dir("merged"), *res;
	char adapter[ENG_PATH_LEN], merged[ENG_PATH_LEN + 16];
	snprintf(adapter, sizeof adapter, "%s/adapter", dir);
	snprintf(merged, sizeof merged, "%s/m", out);
	const char *args[] = {"--merge-lora", adapter, merged, NULL};
	int rc = t_train_run(&res, 0, args);
	ck_assert_msg(rc == 0, "exit %d: %s", rc, res);
	free(res);
	/* never over its own input */
	const char *again[] = {"--merge-lora", adapter, dir, NULL};
	rc = t_train_run(&res, 0, again);
	ck_assert_msg(rc == 1 && strstr(res, "will not write the merged model"), "%d: %s", rc, res);
	free(res);
	eng_model ad, mg;
	float la = batch_loss(adapter, dir, &ad), lm = batch_loss(merged, dir, &mg);
	ck_assert_msg(fabsf(la - lm) <= 1e-6f * fabsf(la), "merged loss %.9g, adapted %.9g", lm,
		la);
	ck_assert_int_eq(mg.ntensors, eng_lora_base_tensors(&ad.cfg));
	/* by hand, element by element: each base weight W + s sum_z B[o,z] A[z,j], o its output
	 * and j its input index (a Linear's (out, in) rows, a Conv1D's (in, out) columns) */
	eng_lora_unit u[ENG_LORA_UNITS];
	int nu = eng_lora_units(&ad.cfg, u), r = ad.cfg.lora_r, conv = ad.cfg.arch == ENG_ARCH_GPT2;
	double s = ad.cfg.lora_alpha / r, worst = 0.0;
	int merged_units = 0;
	for (int i = 0; i < mg.ntensors; i++) {
		const eng_ptensor *t = &mg.tensors[i];
		const float *w0 = ad.params + ad.tensors[i].offset, *w1 = mg.params + t->offset;
		const eng_ptensor *A = NULL, *B = NULL;
		char name[ENG_NAME_MAX + 16], suffix[64];
		for (int q = 0; q < nu && !A; q++) {
			snprintf(suffix, sizeof suffix, ".%s.weight", u[q].module);
			size_t n = strlen(t->name), k = strlen(suffix);
			if (!(ad.cfg.lora_units >> q & 1) || n < k || strcmp(t->name + n - k, suffix))
				continue;
			snprintf(name, sizeof name, "%.*s.%s.lora_A.weight", (int)(n - k), t->name,
				u[q].module);
			A = eng_model_find(&ad, name);
			name[strlen(name) - strlen("A.weight")] = 'B';
			B = eng_model_find(&ad, name);
			ck_assert(A && B);
			merged_units++;
		}
		int64_t in = A ? A->shape[1] : 1;
		for (size_t k = 0; k < t->numel; k++) {
			double want = w0[k];
			int64_t cols = t->ndim == 2 ? t->shape[1] : 1;
			size_t o = conv ? k % cols : k / in, j = conv ? k / cols : k % in;
			for (int z = 0; A && z < r; z++)
				want += s * (double)ad.params[B->offset + o * r + z] *
					ad.params[A->offset + z * in + j];
			double e = fabs(w1[k] - want) / (fabs(want) + 1e-3);
			worst = e > worst ? e : worst;
		}
	}
	ck_assert_int_eq(merged_units, eng_lora_count(&ad.cfg) * ad.cfg.n_layer);
	ck_assert_msg(worst < 1e-6, "%s: merged weights off W + s B A by %.3g", cases[_i], worst);
	eng_model_free(&ad);
	eng_model_free(&mg);
	free(out);
	free(dir);
}
END_TEST

/* What a LoRA job cannot mean, refused naming why */
static const struct {
	const char *lora, *more, *needle;
} bad[] = {
	{"{\"r\":4,\"targets\":[\"c_attn\"]}", "", "names no weight of a llama block"},
	{"{\"targets\":[\"q_proj\"]}", "", "'lora.r' is missing"},
	{"{\"r\":4,\"targets\":\"q_proj\"}", "", "must be a list"},
	{"{\"r\":4,\"targets\":[\"q_proj\"]}", ",\"precision\":\"bf16\"", "fp32 precision"},
	{"{\"r\":4,\"targets\":[\"q_proj\"]}", ",\"train\":{\"freeze\":[\"embed\"]}",
		"frozen already"},
	{"{\"r\":4,\"alpha\":-1,\"targets\":[\"q_proj\"]}", "", "'lora.alpha'"},
};

START_TEST(test_lora_refused)
{
	char text[4096];
	eng_spec sp;
	eng_trainer tr;
	eng_err err = {0};
	snprintf(text, sizeof text, "{\"model\":{\"preset\":\"llama-tiny\"},\"data\":{\"train\":"
		"\"/usr/share/common-licenses/GPL-3\",\"format\":\"bytes\"},\"steps\":1,"
		"\"lora\":%s%s}", bad[_i].lora, bad[_i].more);
	int rc = eng_spec_parse(&sp, text, &err);
	if (rc == 0)
		rc = eng_trainer_init(&tr, &sp, &err);
	ck_assert_msg(rc == -1, "%s accepted", text);
	ck_assert_msg(strstr(err.msg, bad[_i].needle), "%s: %s", bad[_i].lora, err.msg);
}
END_TEST

/* adapter_config.json's base_model_name_or_path is a downloaded file's text: a message
 * names a missing base by it only when it is a plain path, never with a terminal's escapes
 * or anything else it may hold */
START_TEST(test_lora_base_path_not_echoed)
{
	static const struct {
		const char *json, *shown, *hidden;
	} cases[] = {
		{"/nonexistent/plain-base", "\"/nonexistent/plain-base\" is not a directory", NULL},
		{"/nonexistent/\\u001b[31mSECRET\\nline", "(a path not shown)", "SECRET"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *dir = t_tmp_dir("peft_hostile"), path[ENG_PATH_LEN], text[512];
		char base[ENG_PATH_LEN];
		eng_config cfg;
		eng_err err = {0};
		snprintf(text, sizeof text, "{\"peft_type\":\"LORA\",\"r\":4,\"lora_alpha\":8,"
			"\"base_model_name_or_path\":\"%s\"}", cases[i].json);
		snprintf(path, sizeof path, "%s/adapter_config.json", dir);
		t_write_file(path, text, strlen(text));
		ck_assert_int_eq(eng_peft_read_config(dir, &cfg, base, sizeof base, &err), -1);
		ck_assert_msg(strstr(err.msg, cases[i].shown), "%s", err.msg);
		ck_assert_msg(!cases[i].hidden || !strstr(err.msg, cases[i].hidden), "%s", err.msg);
		ck_assert_msg(!strchr(err.msg, '\033') && !strchr(err.msg, '\n'), "%s", err.msg);
		free(dir);
	}
	ck_assert_str_eq(eng_err_path("/a/b_c-1.0/model+x@y=z,w"), "/a/b_c-1.0/model+x@y=z,w");
	ck_assert_str_eq(eng_err_path(""), "(a path not shown)");
	ck_assert_str_eq(eng_err_path("/a b"), "(a path not shown)");
}
END_TEST

Suite *suite_lora(void)
{
	Suite *s = suite_create("lora");
	TCase *tc = tcase_create("lora");
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_test(tc, test_lora_checkpoint_external_base);
	tcase_add_test(tc, test_lora_checkpoint_own_base);
	tcase_add_test(tc, test_lora_base_path_not_echoed);
	tcase_add_loop_test(tc, test_lora_refused, 0, (int)(sizeof bad / sizeof bad[0]));
	tcase_add_loop_test(tc, test_lora_merge, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
