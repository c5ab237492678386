/* test_qlora.c - LoRA over a 4-bit base (model.quantize, QLoRA) on the reference bases of
 * test_lora.c, a Llama and a GPT-2: every policy and a change of policy mid-run give the
 * bits of `off` (recompute reads the same 4-bit weights, out of place); the 4-bit weights
 * are those kn_q4 gives the base's floats (a GPT-2 Conv1D transposed first), held in their
 * quantized size; the checkpoint names the base and its quantization, resumes bit for bit
 * and re-quantizes the base identically as init_from; --merge-lora of a run whose B is
 * still zero writes dequant(quant(W)); what cannot train is refused with the reason.
 * The kernels themselves against the generator's NF4 and FP4: test_q4.c. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng_ckpt.h"
#include "eng_import.h"
#include "eng_peft.h"
#include "eng_plan_json.h"
#include "eng_quant.h"
#include "kn.h"
#include "t_util.h"
#include "tests.h"

#define TIMEOUT 120

/* The two bases, their adapters' targets */
static const struct {
	const char *ref, *targets;
} bases[] = {
	{"reference/lora_llama", "[\"q_proj\",\"v_proj\",\"down_proj\"]"},
	{"reference/lora_gpt2", "[\"c_attn\",\"c_fc\"]"},
};
/* Quantizations tried: QLoRA's, and the other code with double quantization */
static const char *const quants[] = {
	"{\"type\":\"nf4\"}",
	"{\"type\":\"fp4\",\"double_quant\":true,\"block_size\":32}",
	"{\"type\":\"nf4\",\"compute\":\"bf16\"}", /* where oneDNN's bf16 runs */
};

/* A QLoRA job on base b with quantization q (NULL: none), policy `remat`, `more` members */
static void qlora_trainer(eng_trainer *tr, int b, const char *q, const char *from,
	const char *remat, const char *more)
{
	char *dir = t_data(bases[b].ref);
	char quant[256] = "";
	if (q)
		snprintf(quant, sizeof quant, ",\"quantize\":%s", q);
	t_trainer(tr, "{\"model\":{\"init_from\":\"%s\"%s},\"data\":{\"train\":\"%s/train.bin\"},"
		"\"batch\":2,\"seq_len\":20,\"steps\":4,\"threads\":2,\"optim\":{\"lr\":3e-3},"
		"\"seed\":7,\"lora\":{\"r\":4,\"alpha\":16,\"targets\":%s},\"remat\":%s%s}",
		from ? from : dir, quant, dir, bases[b].targets, remat, more ? more : "");
	free(dir);
}

/* Every policy, and off then full from step 3, against off: the same losses and weights,
 * bit for bit, on both bases and the three quantizations */
START_TEST(test_qlora_policies)
{
	static const char *const remat[] = {"{\"default\":\"off\"}", "{\"default\":\"full\"}",
		"{\"default\":\"selective\",\"sections\":{\"head\":\"chunked\"}}",
		"{\"default\":\"off\",\"sections\":{\"h.1\":\"full\"}}"};
	int b = _i / 3;
	const char *q = quants[_i % 3];
	eng_trainer ref, tr;
	if (_i % 3 == 2 && !t_bf16_here("qlora"))
		return;
	eng_step_stats st;
	eng_policy full;
	eng_err err;
	float want[5];
	qlora_trainer(&ref, b, q, NULL, remat[0], NULL);
	ck_assert(ref.model.cfg.quant && ref.model.q4);
	for (int s = 1; s <= 4; s++) {
		ck_assert_msg(eng_trainer_step_as(&ref, NULL, &st, &err) == 0, "%s", err.msg);
		want[s] = st.loss;
	}
	for (int p = 0; p <= 4; p++) {
		qlora_trainer(&tr, b, q, NULL, remat[p < 4 ? p : 0], NULL);
		ck_assert(eng_trainer_parse_policy(&tr, "full", &full, &err) == 0);
		for (int s = 1; s <= 4; s++) {
			/* p 4: off for two steps, then full */
			const eng_policy *as = p == 4 && s > 2 ? &full : NULL;
			ck_assert_msg(eng_trainer_step_as(&tr, as, &st, &err) == 0, "%s", err.msg);
			ck_assert_msg(st.loss == want[s], "%s, %s, policy %d, step %d: loss %.9g, "
				"off's %.9g", bases[b].ref, q, p, s, st.loss, want[s]);
		}
		ck_assert_msg(memcmp(tr.model.params, ref.model.params, ref.model.nfloats * 4) == 0,
			"%s, %s, policy %d: the weights differ from off's", bases[b].ref, q, p);
		eng_trainer_free(&tr);
	}
	eng_trainer_free(&ref);
}
END_TEST

/* Tensor t of base b's float32 file, as kn_q4 quantizes and dequantizes it under c: the
 * [out, in] weight (a Conv1D's transposed), back in the file's layout, into out */
static void roundtrip_by_hand(const eng_config *c, const eng_ptensor *t, const float *w,
	float *out)
{
	size_t n = t->numel, bs = (size_t)c->quant_block, nb = (n + bs - 1) / bs;
	int conv = c->arch == ENG_ARCH_GPT2, rows = (int)t->shape[0], cols = (int)t->shape[1];
	float *wt = malloc(n * sizeof *wt), *am = malloc(nb * sizeof *am), *back = malloc(n * 4);
	float *a2 = malloc((nb / 256 + 1) * sizeof *a2), off;
	uint8_t *codes = malloc(n / 2 + 1), *qa = malloc(nb);
	kn_q4_type type = c->quant == ENG_QUANT_FP4 ? KN_Q4_FP4 : KN_Q4_NF4;
	ck_assert(wt && am && back && a2 && codes && qa);
	for (size_t k = 0; k < n; k++) /* (rows, cols) -> (cols, rows) for a Conv1D */
		wt[k] = conv ? w[(k % rows) * cols + k / rows] : w[k];
	kn_q4_quantize(wt, n, c->quant_block, type, codes, am);
	if (c->quant_dq) {
		kn_q4_dq_quantize(am, nb, qa, a2, &off);
		kn_q4_dq_dequantize(qa, a2, off, 0, nb, am);
	}
	kn_q4_dequantize(codes, am, 0, n, c->quant_block, type, back);
	for (size_t k = 0; k < n; k++)
		out[k] = conv ? back[(k % cols) * rows + k / cols] : back[k];
	free(wt);
	free(am);
	free(back);
	free(a2);
	free(codes);
	free(qa);
}

/* The base's float32 tensors (a model without quantization loaded from dir) */
static void float_base(eng_model *m, const eng_config *qc, const char *dir)
{
	eng_config c = *qc;
	eng_err err;
	eng_config_no_quant(&c);
	ck_assert_msg(eng_model_init_host(m, &c, &err) == 0, "%s", err.msg);
	ck_assert_msg(eng_import_base_load(m, dir, &err) == 0, "%s", err.msg);
}

/* Checks the 4-bit weights of m against kn_q4's of base's floats, bit for bit; returns
 * their bytes, checked against the planner's */
static size_t check_q4(const eng_model *m, const eng_model *base)
{
	size_t bytes = 0, floats = 0;
	eng_err err;
	for (int i = 0; i < m->ntensors; i++) {
		const eng_ptensor *t = &m->tensors[i], *bt = &base->tensors[i];
		if (!t->quant)
			continue;
		float *want = malloc(t->numel * 4), *got = malloc(t->numel * 4);
		eng_q4_layout q;
		roundtrip_by_hand(&m->cfg, t, base->params + bt->offset, want);
		ck_assert_msg(eng_model_tensor_get(m, t, got, &err) == 0, "%s", err.msg);
		ck_assert_msg(memcmp(want, got, t->numel * 4) == 0, "%s: not kn_q4's", t->name);
		eng_q4_layout_of(&m->cfg, t->numel, &q);
		bytes += q.bytes;
		floats += t->numel;
		free(want);
		free(got);
	}
	ck_assert(bytes > 0 && bytes == eng_model_q4_bytes(&m->cfg, NULL));
	/* their floats are gone from the parameters' block */
	ck_assert_uint_le(m->nfloats + floats, base->nfloats);
	size_t fixed[ENG_MEM_NCAT];
	eng_model_fixed_bytes(&m->cfg, m->B, m->T, m->chunk_rows, 2, m, fixed);
	ck_assert_uint_eq(fixed[ENG_MEM_PARAMS], 4 * m->nfloats + bytes + m->wpack_bytes);
	return bytes;
}

/* The 4-bit weights are kn_q4's of the base's floats, in their quantized bytes (the
 * planner's figure); the checkpoint of step 0 (B zero) names the base and its
 * quantization, --merge-lora writes dequant(quant(W)) (within 1e-6), and that checkpoint as
 * init_from quantizes the base again to the same bits. */
START_TEST(test_qlora_weights_and_merge)
{
	int b = _i / 2;
	char *dir = t_data(bases[b].ref), *root = t_tmp_dir("qlora");
	char more[ENG_PATH_LEN + 64], path[ENG_PATH_LEN + 64], file[ENG_PATH_LEN + 128];
	eng_trainer tr, again;
	eng_model base, merged;
	eng_config mc;
	eng_err err;
	snprintf(more, sizeof more, ",\"save\":{\"dir\":\"%s\"}", root);
	qlora_trainer(&tr, b, quants[_i % 2], NULL, "{\"default\":\"off\"}", more);
	float_base(&base, &tr.model.cfg, dir);
	size_t bytes = check_q4(&tr.model, &base);
	t_save(&tr, path, sizeof path);
	/* adapter_config.json: the quantization, as BitsAndBytesConfig names it */
	snprintf(file, sizeof file, "%s/" ENG_PEFT_CONFIG, path);
	json_error_t je;
	json_t *c = json_load_file(file, 0, &je), *q;
	ck_assert_msg(c != NULL, "%s", je.text);
	q = json_object_get(c, "base_model_quantization");
	ck_assert_str_eq(json_string_value(json_object_get(q, "bnb_4bit_quant_type")),
		eng_quant_names[tr.model.cfg.quant]);
	ck_assert(json_is_true(json_object_get(q, "load_in_4bit")));
	ck_assert(json_is_boolean(json_object_get(q, "bnb_4bit_use_double_quant")) &&
		  json_is_true(json_object_get(q, "bnb_4bit_use_double_quant")) ==
			  tr.model.cfg.quant_dq);
	json_decref(c);
	snprintf(file, sizeof file, "%s/config.json", path);
	ck_assert_msg(access(file, F_OK) != 0, "a LoRA run over a base on disk copied it");
	/* merged: dequant(quant(W)) + s B A with B zero */
	char out[ENG_PATH_LEN + 16], *res;
	snprintf(out, sizeof out, "%s/merged", root);
	const char *args[] = {"--merge-lora", path, out, NULL};
	int rc = t_train_run(&res, 0, args);
	ck_assert_msg(rc == 0, "exit %d: %s", rc, res);
	free(res);
	ck_assert_msg(eng_import_read_config(out, &mc, &err) == 0, "%s", err.msg);
	ck_assert(!mc.quant && !mc.lora_r);
	float_base(&merged, &mc, out);
	for (int i = 0; i < merged.ntensors; i++) {
		const eng_ptensor *t = &merged.tensors[i];
		const float *w = merged.params + t->offset;
		float *want = malloc(t->numel * 4);
		if (tr.model.tensors[i].quant)
			roundtrip_by_hand(&tr.model.cfg, t, base.params + base.tensors[i].offset,
				want);
		else
			memcpy(want, base.params + base.tensors[i].offset, t->numel * 4);
		for (size_t k = 0; k < t->numel; k++)
			ck_assert_msg(fabsf(w[k] - want[k]) <= 1e-6f * (1e-3f + fabsf(want[k])),
				"%s[%zu]: merged %g, dequant(quant(W)) %g", t->name, k, w[k],
				want[k]);
		free(want);
	}
	/* the checkpoint as init_from: its quantization taken, the base's 4 bits the same */
	qlora_trainer(&again, b, NULL, path, "{\"default\":\"off\"}", NULL);
	ck_assert(again.model.cfg.quant == tr.model.cfg.quant &&
		  again.model.cfg.quant_dq == tr.model.cfg.quant_dq &&
		  again.model.cfg.quant_block == tr.model.cfg.quant_block);
	ck_assert(memcmp(again.model.q4, tr.model.q4, bytes) == 0);
	eng_trainer_free(&again);
	eng_model_free(&merged);
	eng_model_free(&base);
	eng_trainer_free(&tr);
	free(root);
	free(dir);
}
END_TEST

/* A checkpoint after step 2 resumes steps 3 and 4 bit for bit: a LoRA run (the base read
 * again from where it lies, quantized again), and a run whose base is frozen by
 * train.freeze (its checkpoint a whole model, the 4-bit weights written dequantized) */
START_TEST(test_qlora_resume)
{
	int b = _i % 2, freeze = _i / 2;
	char *dir = t_data(bases[b].ref), *root = t_tmp_dir("qlora_resume");
	char more[ENG_PATH_LEN + 64], path[ENG_PATH_LEN + 64], job[ENG_PATH_LEN * 3];
	eng_trainer a, r;
	float loss[5];
	const char *q = quants[freeze ? 0 : b];
	snprintf(more, sizeof more, ",\"save\":{\"dir\":\"%s\"}", root);
	if (!freeze) {
		qlora_trainer(&a, b, q, NULL, "{\"default\":\"full\"}", more);
	} else {
		t_trainer(&a, "{\"model\":{\"init_from\":\"%s\",\"quantize\":%s},\"data\":"
			"{\"train\":\"%s/train.bin\"},\"batch\":2,\"seq_len\":20,\"steps\":4,"
			"\"threads\":2,\"optim\":{\"lr\":3e-3},\"train\":{\"freeze\":"
			"[\"blocks\"]}%s}", dir, q, dir, more);
	}
	t_steps_saving(&a, 4, 2, loss, path, sizeof path);
	/* the resumed job's spec is the first's, as rematd keeps it */
	snprintf(job, sizeof job, "{\"model\":{\"init_from\":\"%s\",\"resume\":true,\"quantize\":"
		"%s},\"data\":{\"train\":\"%s/train.bin\"},\"batch\":2,\"seq_len\":20,\"steps\":4,"
		"\"threads\":2,\"optim\":{\"lr\":3e-3},%s}", path, q, dir,
		freeze ? "\"train\":{\"freeze\":[\"blocks\"]}"
		       : b ? "\"remat\":{\"default\":\"full\"},\"lora\":{\"r\":4,\"alpha\":16,"
			     "\"targets\":[\"c_attn\",\"c_fc\"]}"
			   : "\"remat\":{\"default\":\"full\"},\"lora\":{\"r\":4,\"alpha\":16,"
			     "\"targets\":[\"q_proj\",\"v_proj\",\"down_proj\"]}");
	t_trainer(&r, "%s", job);
	ck_assert(r.model.cfg.quant);
	t_resumed_steps(&r, 3, 4, loss);
	ck_assert(memcmp(a.model.params, r.model.params, a.model.nfloats * 4) == 0);
	ck_assert(memcmp(a.model.q4, r.model.q4, eng_model_q4_bytes(&a.model.cfg, NULL)) == 0);
	eng_trainer_free(&r);
	eng_trainer_free(&a);
	free(root);
	free(dir);
}
END_TEST

/* The plan says what the 4-bit base saves (remat plan's "4-bit base:" line): its weights
 * (counted here over the tensor table) and their bytes, under one byte a weight (4 bits,
 * and the absmax values); the shape's quantization, compute bf16 too, crosses
 * remat-train --check's config JSON to rematd whole */
START_TEST(test_qlora_plan)
{
	eng_trainer tr;
	eng_config back;
	char desc[256];
	if (_i == 2 && !t_bf16_here("qlora"))
		return;
	qlora_trainer(&tr, _i % 2, quants[_i], NULL, "{\"default\":\"off\"}", NULL);
	const eng_config *c = &tr.model.cfg;
	json_t *cj = eng_config_json(c);
	eng_config_from_json(cj, &back);
	ck_assert(back.quant == c->quant && back.quant_dq == c->quant_dq &&
		  back.quant_block == c->quant_block && back.quant_bf16 == c->quant_bf16);
	json_decref(cj);
	eng_plan_job j = {.cfg = *c, .B = 2, .T = 20, .chunk_rows = tr.model.chunk_rows,
		.policy = tr.model.lay.policy};
	json_t *args = json_object(), *r = eng_plan_reply(&j, args, desc, sizeof desc);
	ck_assert_msg(r != NULL, "%s", desc);
	json_t *q = json_object_get(r, "quantize");
	size_t n = 0;
	for (int i = 0; i < tr.model.ntensors; i++)
		n += tr.model.tensors[i].quant ? tr.model.tensors[i].numel : 0;
	ck_assert_str_eq(json_string_value(json_object_get(q, "type")), eng_quant_names[c->quant]);
	ck_assert_int_eq(json_integer_value(json_object_get(q, "weights")), (json_int_t)n);
	ck_assert(json_integer_value(json_object_get(q, "bytes")) > 0 &&
		  json_integer_value(json_object_get(q, "bytes")) < (json_int_t)n);
	json_decref(r);
	json_decref(args);
	eng_trainer_free(&tr);
}
END_TEST

/* What cannot train over 4-bit weights, refused naming why */
static const struct {
	const char *model, *more, *needle;
} bad[] = {
	{"\"preset\":\"llama-tiny\",\"quantize\":{\"type\":\"nf4\"}", "", "give model.init_from"},
	{"\"init_from\":\"%\",\"quantize\":{\"type\":\"nf4\"}", ",\"device\":\"cuda\"",
		"device cuda has no 4-bit kernels"}, /* %: the GPT-2 base (cuda's family) */
	{"\"init_from\":\"@\",\"quantize\":{\"type\":\"nf4\"}", ",\"precision\":\"bf16\"",
		"trains in precision fp32"},
	{"\"init_from\":\"@\",\"quantize\":{\"type\":\"nf4\",\"block_size\":48}", "",
		"not a power of two"},
	{"\"init_from\":\"@\",\"quantize\":{\"type\":\"nf4\",\"block_size\":8192}", "",
		"block_size"},
	{"\"init_from\":\"@\",\"quantize\":{\"type\":\"int4\"}", "", "\"nf4\" or \"fp4\""},
	{"\"init_from\":\"@\",\"quantize\":{\"double_quant\":true}", "", "type' is missing"},
	{"\"init_from\":\"@\",\"quantize\":{\"type\":\"nf4\",\"double_quant\":1}", "",
		"true or false"},
	{"\"init_from\":\"@\",\"quantize\":{\"type\":\"nf4\",\"scale\":2}", "", "scale"},
	{"\"init_from\":\"@\",\"quantize\":\"nf4\"", "", "must be an object"},
	{"\"init_from\":\"@\",\"quantize\":{\"type\":\"nf4\",\"compute\":\"fp16\"}", "",
		"\"fp32\" or \"bf16\""},
	{"\"init_from\":\"@\",\"quantize\":{\"type\":\"nf4\"}", "", "needs a frozen base"},
	{"\"init_from\":\"@\",\"quantize\":{\"type\":\"nf4\"}",
		",\"train\":{\"freeze\":[\"embed\",\"h.0\"]}", "needs a frozen base"},
	{"\"init_from\":\"@\",\"quantize\":{\"type\":\"nf4\",\"double_quant\":true}",
		",\"train\":{\"freeze\":[\"blocks\"]}", "'model.quantize.double_quant' needs"},
};

START_TEST(test_qlora_refused)
{
	const char *at = strpbrk(bad[_i].model, "@%");
	char text[8192], model[ENG_PATH_LEN + 256];
	char *dir = t_data(at && *at == '%' ? "reference/lora_gpt2" : "reference/lora_llama");
	eng_spec sp;
	eng_err err = {0};
	if (at)
		snprintf(model, sizeof model, "%.*s%s%s", (int)(at - bad[_i].model), bad[_i].model,
			dir, at + 1);
	else
		snprintf(model, sizeof model, "%s", bad[_i].model);
	snprintf(text, sizeof text, "{\"model\":{%s},\"data\":{\"train\":\"%s/train.bin\"},"
		"\"batch\":2,\"seq_len\":20,\"steps\":1%s}", model, dir, bad[_i].more);
	/* the spec and the shape it trains (what rematd checks before a worker starts) */
	int rc = eng_spec_parse(&sp, text, &err);
	eng_config c = sp.cfg;
	if (rc == 0 && sp.init_from[0])
		rc = eng_import_read_config(sp.init_from, &c, &err);
	if (rc == 0)
		rc = eng_spec_finish(&sp, &c, &err);
	ck_assert_msg(rc == -1, "%s accepted", text);
	ck_assert_msg(strstr(err.msg, bad[_i].needle), "%s: %s", text, err.msg);
	free(dir);
}
END_TEST

/* Fuzzing the new keys: model.quantize's members (and the object itself) drawn from values
 * of every JSON type, in range and out, with unknown keys among them; then the same values
 * as adapter_config.json's base_model_quantization. Each is accepted with a shape that
 * validates, or refused with a message naming the key; nothing else happens. */
static const char *const qvals[] = {"\"nf4\"", "\"fp4\"", "\"NF4\"", "\"\"", "null", "true",
	"false", "0", "1", "-1", "64", "32", "48", "4096", "8192", "1e300", "-1e300", "0.5",
	"[]", "{}", "[\"nf4\"]", "\"bf16\"", "\"fp32\"", "\"float32\"", "\"bfloat16\"",
	"2147483648", "\"\\u0000\"", "{\"type\":\"nf4\"}"};
static const char *const qkeys[] = {"type", "double_quant", "block_size", "compute", "scale",
	"bnb_4bit_quant_type", "bnb_4bit_use_double_quant", "bnb_4bit_compute_dtype",
	"bnb_4bit_blocksize", "load_in_4bit", "quant_method"};
#define NQV (int)(sizeof qvals / sizeof qvals[0])
#define NQK (int)(sizeof qkeys / sizeof qkeys[0])

/* A random object of up to five members of qkeys (the first `keys` of them) into buf */
static void random_object(unsigned *seed, int keys, char *buf, size_t len)
{
	int n = rand_r(seed) % 6, used = snprintf(buf, len, "{");
	for (int k = 0; k < n; k++)
		used += snprintf(buf + used, len - (size_t)used, "%s\"%s\":%s", k ? "," : "",
			qkeys[rand_r(seed) % keys], qvals[rand_r(seed) % NQV]);
	snprintf(buf + used, len - (size_t)used, "}");
}

START_TEST(test_qlora_fuzz_keys)
{
	char *dir = t_data("reference/lora_llama");
	char obj[512], text[8192], path[ENG_PATH_LEN + 64], base[ENG_PATH_LEN + 64];
	unsigned seed = 12345;
	int accepted = 0, refused = 0;
	for (int it = 0; it < 400; it++) {
		eng_spec sp;
		eng_err err = {0};
		eng_config c;
		if (it % 10 == 9)
			snprintf(obj, sizeof obj, "%s", qvals[rand_r(&seed) % NQV]);
		else
			random_object(&seed, 5, obj, sizeof obj);
		snprintf(text, sizeof text, "{\"model\":{\"init_from\":\"%s\",\"quantize\":%s},"
			"\"data\":{\"train\":\"%s/train.bin\"},\"lora\":{\"r\":2,\"targets\":"
			"[\"q_proj\"]},\"steps\":1}", dir, obj, dir);
		int rc = eng_spec_parse(&sp, text, &err);
		if (rc == 0 && (rc = eng_import_read_config(sp.init_from, &c, &err)) == 0)
			rc = eng_spec_finish(&sp, &c, &err);
		if (rc == 0) {
			ck_assert(eng_config_validate(&sp.cfg, "fuzz", &err) == 0);
			ck_assert(sp.cfg.quant == ENG_QUANT_NF4 || sp.cfg.quant == ENG_QUANT_FP4);
			ck_assert(eng_model_q4_bytes(&sp.cfg, NULL) > 0);
			accepted++;
		} else {
			ck_assert_msg(strstr(err.msg, "model.quantize") ||
					strstr(err.msg, "invalid JSON"), "%s: %s", obj, err.msg);
			refused++;
		}
	}
	/* adapter_config.json: PEFT's keys kept, base_model_quantization drawn */
	snprintf(path, sizeof path, "%s/adapter/" ENG_PEFT_CONFIG, dir);
	size_t len;
	char *orig = t_read_file(path, &len), *brace = strrchr(orig, '}');
	ck_assert_ptr_nonnull(brace);
	*brace = '\0';
	char *rel = strstr(orig, "\"..\""); /* the base by its absolute path: a copy elsewhere */
	ck_assert_ptr_nonnull(rel);
	*rel = '\0';
	snprintf(base, sizeof base, "\"%s\"", dir);
	char *adir = t_tmp_dir("qlora_adapter"), afile[ENG_PATH_LEN + 64];
	snprintf(afile, sizeof afile, "%s/" ENG_PEFT_CONFIG, adir);
	for (int it = 0; it < 200; it++) {
		eng_config c;
		eng_err err = {0};
		char bp[ENG_PATH_LEN + 64];
		random_object(&seed, NQK, obj, sizeof obj);
		int n = snprintf(text, sizeof text, "%s%s%s, \"base_model_quantization\": %s}\n",
			orig, base, rel + 4, obj);
		ck_assert(n > 0 && (size_t)n < sizeof text);
		t_write_file(afile, text, strlen(text));
		int rc = eng_peft_read_config(adir, &c, bp, sizeof bp, &err);
		if (rc == 0)
			ck_assert(eng_config_validate(&c, "fuzz", &err) == 0);
		else
			ck_assert_msg(strstr(err.msg, ENG_PEFT_CONFIG), "%s: %s", obj, err.msg);
	}
	ck_assert(accepted > 0 && refused > 0);
	free(orig);
	free(adir);
	free(dir);
}
END_TEST

Suite *suite_qlora(void)
{
	Suite *s = suite_create("qlora");
	TCase *tc = tcase_create("qlora");
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_loop_test(tc, test_qlora_policies, 0, 6);
	tcase_add_loop_test(tc, test_qlora_weights_and_merge, 0, 4);
	tcase_add_loop_test(tc, test_qlora_resume, 0, 4);
	tcase_add_loop_test(tc, test_qlora_plan, 0, 3);
	tcase_add_test(tc, test_qlora_fuzz_keys);
	tcase_add_loop_test(tc, test_qlora_refused, 0, (int)(sizeof bad / sizeof bad[0]));
	suite_add_tcase(s, tc);
	return s;
}
