/* eng_spec_parse.c - the sections of a job spec (see eng_spec.h): name, data, model (its
 * shape, architecture, init_from), optim, schedule, remat, eval, sample, save, parallel,
 * memory, train, lora, and the root that reads them in a fixed order. Not here: the typed
 * readers (eng_spec_get.c), the defaults, the file, and what depends on the model's
 * shape (eng_spec.c).
 */
#include "eng_spec_int.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "proto.h"

const char *const eng_precision_names[] = {"fp32", "bf16", NULL};
const char *const eng_data_format_names[] = {"llmc", "bytes", "text", "jsonl", NULL};

static const char *const root_keys[] = {"name", "model", "data", "batch", "seq_len", "steps",
	"grad_accum", "seed", "optim", "schedule", "remat", "eval", "sample", "save", "threads",
	"device", "precision", "memory", "parallel", "train", "lora", "priority", NULL};
static const char *const lora_keys[] = {"r", "alpha", "targets", NULL};
static const char *const train_keys[] = {"freeze", NULL};
static const char *const model_keys[] = {"preset", "n_layer", "n_embd", "n_head",
	"n_positions", "vocab_size", "arch", "n_kv_head", "intermediate_size", "rope_theta",
	"rms_norm_eps", "tie_word_embeddings", "init_from", "resume", "quantize", NULL};
static const char *const quantize_keys[] = {"type", "double_quant", "block_size", "compute",
	NULL};
#define MODEL_SHAPE_KEYS 12 /* model_keys[0 .. 12): the preset and the shape's fields */
static const char *const arch_keys[] = {"gpt2", "llama", NULL}; /* as eng_arch */
static const char *const data_keys[] = {"train", "format", "val", "shuffle", "shuffle_seed",
	"tokenizer", "field", "cache", NULL};
static const char *const eval_keys[] = {"every", "batches", NULL};
static const char *const parallel_keys[] = {"ranks", "shard", "bucket_mb", "hosts",
	"hostfile", "mca", "launcher", NULL};
static const char *const sample_keys[] = {"every", "tokens", "prompt", "temperature", "top_k",
	"seed", NULL};
static const char *const optim_keys[] = {"lr", "beta1", "beta2", "eps", "weight_decay",
	"grad_clip", NULL};
static const char *const schedule_keys[] = {"kind", "warmup", "min_lr_frac", NULL};
static const char *const remat_keys[] = {"default", "sections", "aliases", "chunk_rows",
	"profile", "budget", NULL};
static const char *const save_keys[] = {"dir", "every", "keep", NULL};
static const char *const memory_keys[] = {"limit", NULL};

static int parse_name(eng_spec *s, json_t *root, eng_err *err)
{
	if (es_get_str(root, "", "name", s->name, sizeof s->name, err) < 0)
		return -1;
	/* the name lands in log lines and file names: no control characters */
	for (const char *c = s->name; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return eng_errf(err, "'name' must not contain control characters");
	return 0;
}

/* data.format when not given: from the name of data.train, as Hugging Face's load_dataset
 * picks its loader ("text" for .txt, "json" for .jsonl), llmc for anything else */
static eng_data_format format_of_name(const char *path)
{
	size_t n = strlen(path);
	if (n > 4 && !strcmp(path + n - 4, ".txt"))
		return ENG_DATA_TEXT;
	if (n > 6 && !strcmp(path + n - 6, ".jsonl"))
		return ENG_DATA_JSONL;
	return ENG_DATA_LLMC;
}

/* data.format, data.field and data.cache, after data.train. */
static int parse_data_format(eng_spec *s, json_t *d, eng_err *err)
{
	json_t *f = json_object_get(d, "format");
	int k = (int)format_of_name(s->train_path);
	if (f && es_get_choice(f, "data.format", eng_data_format_names, &k, err) < 0)
		return -1;
	s->data_format = (eng_data_format)k;
	int field = es_get_str(d, "data", "field", s->data_field, sizeof s->data_field, err);
	if (field < 0 || es_get_str(d, "data", "cache", s->data_cache, sizeof s->data_cache,
				 err) < 0)
		return -1;
	if (field == 1 && s->data_format != ENG_DATA_JSONL)
		return eng_errf(err, "'data.field' names the key of a JSON Lines document: it "
				     "needs data.format \"jsonl\"");
	if (field == 1 && !s->data_field[0])
		return eng_errf(err, "'data.field' must not be empty");
	if (!field)
		snprintf(s->data_field, sizeof s->data_field, "text");
	if (s->data_cache[0] && !ENG_DATA_IS_TEXT(s->data_format))
		return eng_errf(err, "'data.cache' holds text tokenized: it needs data.format "
				     "\"text\" or \"jsonl\"");
	return 0;
}

static int parse_data(eng_spec *s, json_t *root, eng_err *err)
{
	json_t *d, *f;
	if (es_get_object(root, "data", &d, err) < 0)
		return -1;
	if (!d)
		return eng_errf(err, "missing 'data': give at least data.train, the token file");
	if (es_check_keys(d, "data", data_keys, err) < 0)
		return -1;
	int rc = es_get_str(d, "data", "train", s->train_path, sizeof s->train_path, err);
	if (rc < 0)
		return -1;
	if (rc == 0)
		return eng_errf(err, "missing 'data.train': the training token file");
	if (es_get_str(d, "data", "val", s->val_path, sizeof s->val_path, err) < 0 ||
		es_get_str(d, "data", "tokenizer", s->tokenizer, sizeof s->tokenizer, err) < 0 ||
		parse_data_format(s, d, err) < 0)
		return -1;
	long long seed = s->shuffle_seed;
	if ((f = json_object_get(d, "shuffle"))) {
		if (!json_is_boolean(f))
			return eng_errf(err, "'data.shuffle' must be true or false");
		s->shuffle = json_is_true(f);
	}
	if (es_get_int64(d, "data", "shuffle_seed", 0, UINT32_MAX, &seed, err) < 0)
		return -1;
	s->shuffle_seed = (uint32_t)seed;
	return 0;
}

static int parse_eval(eng_spec *s, json_t *root, eng_err *err)
{
	json_t *v;
	int sec = es_get_section(root, "eval", eval_keys, &v, err);
	if (sec <= 0)
		return sec;
	if (es_get_int(v, "eval", "every", 0, SPEC_MAX_STEPS, &s->eval_every, err) < 0 ||
		es_get_int(v, "eval", "batches", 0, INT_MAX, &s->eval_batches, err) < 0)
		return -1;
	if (!s->val_path[0])
		return eng_errf(err, "'eval' needs 'data.val', the validation token file");
	return 0;
}

/* model.arch over the preset's (*c): they must agree */
static int parse_arch(json_t *m, int preset, eng_config *c, eng_err *err)
{
	json_t *a = json_object_get(m, "arch");
	int arch = c->arch;
	if (a && es_get_choice(a, "model.arch", arch_keys, &arch, err) < 0)
		return -1;
	if (preset && arch != (int)c->arch)
		return eng_errf(err, "'model.arch' \"%s\" is not the preset's (\"%s\")",
			arch_keys[arch], eng_arch_name(c->arch));
	c->arch = (eng_arch)arch;
	return 0;
}

/* The Llama family's fields (eng_config.h) over the preset's, or LlamaConfig's defaults
 * (n_kv_head n_head, rope_theta 1e4, rms_norm_eps 1e-6, untied) without one;
 * intermediate_size has no default. Under gpt2 none of them may be given. */
static int parse_llama(json_t *m, int preset, eng_config *c, eng_err *err)
{
	static const char *const keys[] = {"n_kv_head", "intermediate_size", "rope_theta",
		"rms_norm_eps", "tie_word_embeddings"};
	if (c->arch != ENG_ARCH_LLAMA) {
		for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
			if (json_object_get(m, keys[i]))
				return eng_errf(err, "'model.%s' is a Llama setting: give \"arch\": "
						     "\"llama\" (or a Llama preset)", keys[i]);
		return 0;
	}
	if (!preset) {
		c->n_kv_head = c->n_head;
		c->rope_theta = 10000.0;
		c->rms_norm_eps = 1e-6;
		c->untied = 1;
	}
	if (es_get_int(m, "model", "n_kv_head", 1, ENG_MAX_EMBD, &c->n_kv_head, err) < 0 ||
	    es_get_int(m, "model", "intermediate_size", 1, ENG_MAX_FFN, &c->intermediate_size,
		    err) < 0 ||
	    es_get_real(m, "model", "rope_theta", 0.0, 1e12, &c->rope_theta, err) < 0 ||
	    es_get_real(m, "model", "rms_norm_eps", 0.0, 1.0, &c->rms_norm_eps, err) < 0)
		return -1;
	json_t *t = json_object_get(m, "tie_word_embeddings");
	if (t && !json_is_boolean(t))
		return eng_errf(err, "'model.tie_word_embeddings' must be true or false");
	if (t)
		c->untied = !json_is_true(t);
	if (!c->intermediate_size)
		return eng_errf(err, "'model.intermediate_size' is missing: a Llama's MLP width has "
				     "no default");
	return 0;
}

/* The shape from preset and fields, or init_from alone; needs s->data_format (bytes). */
/* model.quantize: {"type": "nf4" | "fp4", "double_quant" (false), "block_size" (64),
 * "compute": "fp32" | "bf16"}, bitsandbytes' BitsAndBytesConfig(load_in_4bit) */
static int parse_quantize(eng_spec *s, json_t *m, eng_err *err)
{
	static const char *const types[] = {"nf4", "fp4", NULL};
	json_t *q = json_object_get(m, "quantize"), *v;
	int type;
	if (!q)
		return 0;
	if (!json_is_object(q))
		return eng_errf(err, "'model.quantize' must be an object: {\"type\": \"nf4\", "
				     "...}");
	if (es_check_keys(q, "model.quantize", quantize_keys, err) < 0)
		return -1;
	if (!(v = json_object_get(q, "type")))
		return eng_errf(err, "'model.quantize.type' is missing: \"nf4\" (QLoRA's) or "
				     "\"fp4\"");
	if (es_get_choice(v, "model.quantize.type", types, &type, err) < 0)
		return -1;
	s->quant_bf16 = 0; /* bitsandbytes' default compute dtype: float32 */
	if ((v = json_object_get(q, "compute")) &&
		es_get_choice(v, "model.quantize.compute", eng_precision_names, &s->quant_bf16,
			err) < 0)
		return -1;
	s->quant = type == 0 ? ENG_QUANT_NF4 : ENG_QUANT_FP4;
	s->quant_block = ENG_QUANT_BLOCK;
	if ((v = json_object_get(q, "double_quant")) && !json_is_boolean(v))
		return eng_errf(err, "'model.quantize.double_quant' must be true or false");
	s->quant_dq = v && json_is_true(v);
	if (es_get_int(q, "model.quantize", "block_size", ENG_QUANT_BLOCK_MIN,
		    ENG_QUANT_BLOCK_MAX, &s->quant_block, err) < 0)
		return -1;
	eng_config c = {.quant = s->quant, .quant_block = s->quant_block};
	return eng_quant_validate(&c, "'model.quantize'", err);
}

static int parse_model(eng_spec *s, json_t *root, eng_err *err)
{
	json_t *m;
	eng_config c = {0};
	struct {
		const char *key;
		int *dst;
		int max;
	} shape[] = {
		{"n_layer", &c.n_layer, ENG_MAX_LAYERS},
		{"n_embd", &c.n_embd, ENG_MAX_EMBD},
		{"n_head", &c.n_head, ENG_MAX_EMBD},
		{"n_positions", &c.n_positions, ENG_MAX_POSITIONS},
		{"vocab_size", &c.vocab_size, ENG_MAX_VOCAB},
	};
	const int nshape = (int)(sizeof shape / sizeof shape[0]);

	if (es_get_object(root, "model", &m, err) < 0)
		return -1;
	if (!m)
		return eng_errf(err, "missing 'model': give a preset, a shape or init_from");
	if (es_check_keys(m, "model", model_keys, err) < 0 || parse_quantize(s, m, err) < 0)
		return -1;
	json_t *r = json_object_get(m, "resume");
	if (r && !json_is_boolean(r))
		return eng_errf(err, "'model.resume' must be true or false");
	s->resume = r && json_is_true(r);
	int rc = es_get_str(m, "model", "init_from", s->init_from, sizeof s->init_from, err);
	if (rc < 0)
		return -1;
	if (rc == 1) {
		for (int i = 0; i < MODEL_SHAPE_KEYS; i++)
			if (json_object_get(m, model_keys[i]))
				return eng_errf(err, "'model.init_from' cannot be combined with "
						     "'model.%s': the checkpoint's config decides "
						     "the shape", model_keys[i]);
		return 0;
	}
	if (s->resume)
		return eng_errf(err, "'model.resume' needs 'model.init_from'");

	json_t *p = json_object_get(m, "preset");
	if (p) {
		eng_err e;
		if (!json_is_string(p))
			return eng_errf(err, "'model.preset' must be a string");
		if (eng_config_preset(json_string_value(p), &c, &e) < 0)
			return eng_errf(err, "'model.preset': %s", e.msg);
	}
	if (parse_arch(m, p != NULL, &c, err) < 0)
		return -1;
	int vocab_given = 0;
	for (int i = 0; i < nshape; i++) {
		rc = es_get_int(m, "model", shape[i].key, 1, shape[i].max, shape[i].dst, err);
		if (rc < 0)
			return -1;
		vocab_given |= rc == 1 && shape[i].dst == &c.vocab_size;
	}
	/* a byte-level model, even over a preset's GPT-2 vocabulary */
	if (s->data_format == ENG_DATA_BYTES && !vocab_given)
		c.vocab_size = 256;
	char missing[128] = "";
	size_t used = 0;
	for (int i = 0; i < nshape; i++)
		if (*shape[i].dst == 0 && used < sizeof missing)
			used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%s",
				used ? ", " : "", shape[i].key);
	if (used)
		return eng_errf(err, "'model' shape is incomplete, missing %s (give model.preset, "
				     "all five shape fields, or model.init_from)", missing);
	if (parse_llama(m, p != NULL, &c, err) < 0)
		return -1;
	if (eng_config_validate(&c, "'model'", err) < 0)
		return -1;
	s->cfg = c;
	s->has_shape = 1;
	return 0;
}

static int parse_optim(eng_spec *s, json_t *root, eng_err *err)
{
	/* open: the bound itself is refused; hi INFINITY: finite is the only upper bound */
	const struct {
		const char *key;
		double lo;
		int lo_open;
		double hi;
		int hi_open;
		float *dst;
	} fields[] = {
		{"lr", 0, 1, PROTO_LR_MAX, 0, &s->lr},
		{"beta1", 0, 0, 1, 1, &s->beta1},
		{"beta2", 0, 0, 1, 1, &s->beta2},
		{"eps", 0, 1, INFINITY, 0, &s->eps},
		{"weight_decay", 0, 0, INFINITY, 0, &s->weight_decay},
		{"grad_clip", 0, 0, INFINITY, 0, &s->grad_clip},
	};
	json_t *o;
	int sec = es_get_section(root, "optim", optim_keys, &o, err);
	if (sec <= 0)
		return sec;
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
		if (es_get_float(o, "optim", fields[i].key, fields[i].lo, fields[i].lo_open,
			    fields[i].hi, fields[i].hi_open, fields[i].dst, err) < 0)
			return -1;
	return 0;
}

/* Needs s->steps: warmup may not pass the end of the run. */
static int parse_schedule(eng_spec *s, json_t *root, eng_err *err)
{
	static const char *const kinds[] = {"cosine", "constant", NULL};
	json_t *v = json_object_get(root, "schedule");
	int k = 0;
	if (!v)
		return 0;
	if (json_is_string(v)) {
		if (es_get_choice(v, "schedule", kinds, &k, err) < 0)
			return -1;
	} else if (json_is_object(v)) {
		json_t *kind = json_object_get(v, "kind");
		if (es_check_keys(v, "schedule", schedule_keys, err) < 0)
			return -1;
		if (kind && es_get_choice(kind, "schedule.kind", kinds, &k, err) < 0)
			return -1;
		if (es_get_int(v, "schedule", "warmup", 0, SPEC_MAX_STEPS, &s->warmup, err) < 0)
			return -1;
		if (s->warmup > s->steps)
			return eng_errf(err, "'schedule.warmup' %d out of range 0..steps (%d)",
				s->warmup, s->steps);
		if (es_get_float(v, "schedule", "min_lr_frac", 0, 0, 1, 0, &s->min_lr_frac,
			    err) < 0)
			return -1;
	} else {
		return eng_errf(err, "'schedule' must be an object or a string (\"cosine\" or "
				     "\"constant\")");
	}
	s->sched = k == 1 ? ENG_SCHED_CONSTANT : ENG_SCHED_COSINE;
	return 0;
}

/* remat.sections: selector -> mode, kept in the order written. */
static int parse_sections(eng_spec *s, json_t *sec, eng_err *err)
{
	const char *key;
	json_t *v;
	eng_err e;
	eng_mode m;
	if (!json_is_object(sec))
		return eng_errf(err, "'remat.sections' must be an object (selector: mode)");
	if (json_object_size(sec) > ENG_MAX_ASSIGN)
		return eng_errf(err, "'remat.sections' has %zu entries, at most %d",
			json_object_size(sec), ENG_MAX_ASSIGN);
	json_object_foreach(sec, key, v)
	{
		size_t n = strlen(key);
		if (n == 0)
			return eng_errf(err, "'remat.sections' has an empty selector");
		if (n >= ENG_SELECTOR_LEN)
			return eng_errf(err, "'remat.sections.%.*s...': selector too long (at most "
					     "%d characters)", SPEC_KEY_SHOW, key,
				ENG_SELECTOR_LEN - 1);
		if (!json_is_string(v))
			return eng_errf(err, "'remat.sections.%s' must be a mode string", key);
		if (eng_mode_parse(json_string_value(v), &m, &e) < 0)
			return eng_errf(err, "'remat.sections.%s': %s", key, e.msg);
		eng_assign *a = &s->assign[s->n_assign++];
		memcpy(a->selector, key, n + 1);
		snprintf(a->mode, sizeof a->mode, "%s", eng_mode_name(m));
	}
	return 0;
}

/* remat.aliases: name -> built-in selector, kept in the order written. */
static int parse_aliases(eng_spec *s, json_t *al, eng_err *err)
{
	const char *key;
	json_t *v;
	if (!json_is_object(al))
		return eng_errf(err, "'remat.aliases' must be an object (name: selector)");
	if (json_object_size(al) > ENG_MAX_ALIASES)
		return eng_errf(err, "'remat.aliases' has %zu entries, at most %d",
			json_object_size(al), ENG_MAX_ALIASES);
	json_object_foreach(al, key, v)
	{
		size_t n = strlen(key);
		if (n == 0)
			return eng_errf(err, "'remat.aliases' has an empty alias name");
		if (n >= ENG_ALIAS_LEN)
			return eng_errf(err, "'remat.aliases.%.*s...': alias name too long "
					     "(at most %d characters)", SPEC_KEY_SHOW, key,
				ENG_ALIAS_LEN - 1);
		if (!json_is_string(v))
			return eng_errf(err, "'remat.aliases.%s' must be a selector string", key);
		size_t sn = json_string_length(v);
		if (sn == 0 || sn >= ENG_SELECTOR_LEN)
			return eng_errf(err, "'remat.aliases.%s': selector must have 1 to %d "
					     "characters", key, ENG_SELECTOR_LEN - 1);
		eng_alias *a = &s->alias[s->n_alias++];
		memcpy(a->name, key, n + 1);
		memcpy(a->selector, json_string_value(v), sn + 1);
	}
	return 0;
}

/* A size in a spec ("6GiB", or a number of bytes) above 0, or -1. */
static long long spec_size(const json_t *v)
{
	long long bytes = -1;
	if (json_is_integer(v))
		bytes = json_integer_value(v);
	else if (json_is_string(v) && proto_size_parse(json_string_value(v), &bytes) < 0)
		bytes = -1;
	return bytes > 0 ? bytes : -1;
}

/* remat.budget: a size, a number of bytes, or "cgroup" (the worker's memory.max, read
 * when the run starts). */
static int parse_budget(eng_spec *s, const json_t *v, eng_err *err)
{
	const char *t = json_string_value(v);
	if (t && strcmp(t, "cgroup") == 0) {
		s->remat_budget_cgroup = 1;
		return 0;
	}
	long long bytes = spec_size(v);
	if (bytes < 0)
		return eng_errf(err, "'remat.budget' must be a size above 0 (\"6GiB\"), a number of "
				     "bytes or \"cgroup\"");
	s->remat_budget = (size_t)bytes;
	return 0;
}

static int parse_remat(eng_spec *s, json_t *root, eng_err *err)
{
	json_t *r, *v;
	eng_err e;
	eng_mode m;
	int sec = es_get_section(root, "remat", remat_keys, &r, err);
	if (sec <= 0)
		return sec;
	if ((v = json_object_get(r, "default"))) {
		if (!json_is_string(v))
			return eng_errf(err, "'remat.default' must be a mode string");
		if (eng_mode_parse(json_string_value(v), &m, &e) < 0)
			return eng_errf(err, "'remat.default': %s", e.msg);
		if (m == ENG_MODE_CHUNKED)
			return eng_errf(err, "'remat.default' must be off, selective or full, not "
					     "chunked (the head's mode goes in remat.sections)");
		snprintf(s->remat_default, sizeof s->remat_default, "%s", eng_mode_name(m));
	}
	if ((v = json_object_get(r, "sections")) && parse_sections(s, v, err) < 0)
		return -1;
	if ((v = json_object_get(r, "aliases")) && parse_aliases(s, v, err) < 0)
		return -1;
	if (es_get_int(r, "remat", "chunk_rows", 1, SPEC_MAX_CHUNK_ROWS, &s->chunk_rows, err) < 0)
		return -1;
	if ((v = json_object_get(r, "budget")) && parse_budget(s, v, err) < 0)
		return -1;
	if ((v = json_object_get(r, "profile"))) {
		if (!json_is_boolean(v))
			return eng_errf(err, "'remat.profile' must be true or false");
		s->remat_profile = json_is_true(v);
	}
	return 0;
}

/* train.freeze: a list of strings, each a selector, "embed", a tensor name or a glob */
static int parse_train(eng_spec *s, json_t *root, eng_err *err)
{
	json_t *t, *f;
	int sec = es_get_section(root, "train", train_keys, &t, err);
	if (sec <= 0)
		return sec;
	if (!(f = json_object_get(t, "freeze")))
		return 0;
	return es_get_str_list(f, "train.freeze", "section, \"embed\", tensor name or glob", 0,
		ENG_MAX_FREEZE, sizeof s->freeze[0], s->freeze[0], &s->n_freeze, err);
}

/* lora: {"r", "alpha" (default 8, PEFT's), "targets"} */
static int parse_lora(eng_spec *s, json_t *root, eng_err *err)
{
	json_t *l, *t;
	int sec = es_get_section(root, "lora", lora_keys, &l, err);
	if (sec <= 0)
		return sec;
	if (es_get_int(l, "lora", "r", 1, ENG_LORA_MAX_R, &s->lora_r, err) < 0 ||
		es_get_real(l, "lora", "alpha", 0.0, 1e6, &s->lora_alpha, err) < 0)
		return -1;
	if (!s->lora_r)
		return eng_errf(err, "'lora.r' is missing: the adapters' rank (PEFT's r)");
	if (s->lora_alpha == 0.0)
		s->lora_alpha = 8.0; /* PEFT's LoraConfig default */
	t = json_object_get(l, "targets");
	return es_get_str_list(t, "lora.targets", "module name (PEFT's target_modules: q_proj, "
		"c_attn, ...)", 1, ENG_LORA_UNITS, sizeof s->lora_target[0], s->lora_target[0],
		&s->n_lora_target, err);
}

static int parse_save(eng_spec *s, json_t *root, eng_err *err)
{
	json_t *v;
	int sec = es_get_section(root, "save", save_keys, &v, err);
	if (sec <= 0)
		return sec;
	if (es_get_str(v, "save", "dir", s->save_dir, sizeof s->save_dir, err) < 0 ||
		es_get_int(v, "save", "every", 0, SPEC_MAX_STEPS, &s->save_every, err) < 0 ||
		es_get_int(v, "save", "keep", 1, INT_MAX, &s->save_keep, err) < 0)
		return -1;
	return 0;
}

/* memory.limit: a size ("3GiB") or a number of bytes. */
static int parse_memory(eng_spec *s, json_t *root, eng_err *err)
{
	json_t *m, *v;
	long long bytes = -1;
	int sec = es_get_section(root, "memory", memory_keys, &m, err);
	if (sec <= 0)
		return sec;
	if (!(v = json_object_get(m, "limit")))
		return 0;
	if ((bytes = spec_size(v)) < 0)
		return eng_errf(err, "'memory.limit' must be a size above 0, such as \"3GiB\" or "
				     "a number of bytes");
	s->mem_limit = (size_t)bytes;
	return 0;
}

/* sample.prompt: a string (data.format bytes: a token a byte; otherwise text the job's
 * tokenizer encodes when the run starts) or an array of token ids (checked against the
 * vocabulary once it is known, eng_spec_finish). */
static int parse_prompt(eng_spec *s, json_t *v, eng_err *err)
{
	const char *t = json_string_value(v);
	size_t n = t ? json_string_length(v) : 0;
	if (s->data_format == ENG_DATA_BYTES) {
		if (!t || n < 1 || n > ENG_MAX_PROMPT)
			return eng_errf(err, "'sample.prompt' must be text of 1 to %d bytes (data.format "
					     "is bytes)", ENG_MAX_PROMPT);
		for (size_t i = 0; i < n; i++)
			s->sample_prompt[i] = (unsigned char)t[i];
		s->sample_n = (int)n;
		return 0;
	}
	if (t) {
		if (n < 1 || n >= sizeof s->sample_text || strlen(t) != n)
			return eng_errf(err, "'sample.prompt' must be text of 1 to %zu bytes, "
					     "without NUL", sizeof s->sample_text - 1);
		memcpy(s->sample_text, t, n + 1);
		return 0;
	}
	size_t i;
	json_t *x;
	n = json_array_size(v);
	if (!json_is_array(v) || n < 1 || n > ENG_MAX_PROMPT)
		return eng_errf(err, "'sample.prompt' must be text or an array of 1 to %d token "
				     "ids", ENG_MAX_PROMPT);
	json_array_foreach(v, i, x) {
		if (!json_is_integer(x) || json_integer_value(x) < 0 ||
			json_integer_value(x) >= ENG_MAX_VOCAB)
			return eng_errf(err, "'sample.prompt[%zu]' must be a token id 0..%d", i,
				ENG_MAX_VOCAB - 1);
		s->sample_prompt[i] = (uint32_t)json_integer_value(x);
	}
	s->sample_n = (int)n;
	return 0;
}

/* Needs s->data_format (the prompt's form). */
static int parse_sample(eng_spec *s, json_t *root, eng_err *err)
{
	json_t *v, *p;
	long long seed = s->sample_seed;
	int sec = es_get_section(root, "sample", sample_keys, &v, err);
	if (sec <= 0)
		return sec;
	s->sample_on = 1;
	if (es_get_int(v, "sample", "every", 0, SPEC_MAX_STEPS, &s->sample_every, err) < 0 ||
		es_get_int(v, "sample", "tokens", 1, SPEC_MAX_SAMPLE, &s->sample_tokens, err) < 0 ||
		es_get_float(v, "sample", "temperature", 0, 0, ENG_MAX_TEMPERATURE, 0,
			&s->sample_temperature, err) < 0 ||
		es_get_int(v, "sample", "top_k", 0, INT_MAX, &s->sample_top_k, err) < 0 ||
		es_get_int64(v, "sample", "seed", 0, UINT32_MAX, &seed, err) < 0)
		return -1;
	s->sample_seed = (uint32_t)seed;
	if ((p = json_object_get(v, "prompt")) && parse_prompt(s, p, err) < 0)
		return -1;
	return 0;
}

/* parallel.hosts: host names, each with an optional ":slots", for mpirun --host: letters,
 * digits, '.', '-' and '_' only (mpirun hands names on to remote shells). */
static int parse_hosts(eng_spec *s, json_t *h, eng_err *err)
{
	size_t i, used = 0;
	json_t *v;
	if (!json_is_array(h) || json_array_size(h) == 0)
		return eng_errf(err, "'parallel.hosts' must be an array of host names");
	json_array_foreach(h, i, v) {
		const char *n = json_string_value(v);
		size_t len = n ? strlen(n) : 0, name = n ? strspn(n, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
			"abcdefghijklmnopqrstuvwxyz0123456789._-") : 0;
		int ok = n && name > 0 && n[0] != '-' && (name == len || (n[name] == ':' &&
			name + 1 < len && strspn(n + name + 1, "0123456789") == len - name - 1));
		if (!ok)
			return eng_errf(err, "'parallel.hosts[%zu]' must be a host name (letters, "
					     "digits, '.', '-', '_', not starting with '-') with an "
					     "optional ':slots'", i);
		if (used + len + 2 > sizeof s->hosts)
			return eng_errf(err, "'parallel.hosts' is longer than %zu bytes",
				sizeof s->hosts - 1);
		used += (size_t)snprintf(s->hosts + used, sizeof s->hosts - used, "%s%s",
			i ? "," : "", n);
	}
	return 0;
}

/* parallel.mca: Open MPI's parameters rematd passes to its mpirun as --mca KEY VALUE,
 * never through a shell: the transport's and the interfaces' alone (a parameter that names
 * a command, plm_rsh_agent, is not among them), values of letters, digits and
 * ".,:/^_-" (interface lists, CIDR ranges, component lists with '^' to exclude), not
 * starting with '-'. Kept as "k=v;k=v". */
static const char *const mca_allowed[] = {"btl", "btl_tcp_if_include", "btl_tcp_if_exclude",
	"oob_tcp_if_include", "oob_tcp_if_exclude", "btl_tcp_port_min_v4",
	"btl_tcp_port_range_v4", "pml", "mtl", "coll", "osc", "btl_vader_single_copy_mechanism",
	NULL};

static int parse_mca(eng_spec *s, json_t *m, eng_err *err)
{
	const char *k;
	json_t *v;
	size_t used = 0;
	if (!json_is_object(m))
		return eng_errf(err, "'parallel.mca' must be an object of Open MPI parameters");
	json_object_foreach(m, k, v) {
		int known = 0;
		for (int i = 0; mca_allowed[i]; i++)
			known |= strcmp(k, mca_allowed[i]) == 0;
		if (!known)
			return eng_errf(err, "'parallel.mca' does not take '%.48s' (it takes btl, "
					     "pml, mtl, coll, osc, the tcp interface and port "
					     "parameters)", k);
		const char *x = json_string_value(v);
		size_t len = x ? strlen(x) : 0;
		if (!x || !len || len >= ENG_MCA_VALUE || x[0] == '-' ||
			strspn(x, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				  "0123456789.,:/^_-") != len)
			return eng_errf(err, "'parallel.mca.%s' must be a string of letters, "
					     "digits and .,:/^_- (not starting with '-'), at most "
					     "%d bytes", k, ENG_MCA_VALUE - 1);
		int n = snprintf(s->mca + used, sizeof s->mca - used, "%s%s=%s", used ? ";" : "",
			k, x);
		if (n < 0 || (size_t)n >= sizeof s->mca - used)
			return eng_errf(err, "'parallel.mca' is longer than %zu bytes",
				sizeof s->mca - 1);
		used += (size_t)n;
	}
	return 0;
}

static int parse_parallel(eng_spec *s, json_t *root, eng_err *err)
{
	json_t *v, *h;
	int sec = es_get_section(root, "parallel", parallel_keys, &v, err);
	if (sec <= 0)
		return sec;
	if (es_get_int(v, "parallel", "ranks", 1, ENG_MAX_RANKS, &s->ranks, err) < 0 ||
		es_get_float(v, "parallel", "bucket_mb", 0, 0, ENG_MAX_BUCKET_MB, 0, &s->bucket_mb,
			err) < 0 ||
		es_get_str(v, "parallel", "hostfile", s->hostfile, sizeof s->hostfile, err) < 0)
		return -1;
	s->has_ranks = json_object_get(v, "ranks") != NULL;
	if ((h = json_object_get(v, "hosts")) && parse_hosts(s, h, err) < 0)
		return -1;
	if ((h = json_object_get(v, "mca")) && parse_mca(s, h, err) < 0)
		return -1;
	/* how mpirun starts its daemons on other hosts: Open MPI's plm, ssh or Slurm's */
	if (es_get_str(v, "parallel", "launcher", s->launcher, sizeof s->launcher, err) < 0)
		return -1;
	if (s->launcher[0] && strcmp(s->launcher, "ssh") && strcmp(s->launcher, "slurm"))
		return eng_errf(err, "'parallel.launcher' must be \"ssh\" or \"slurm\"");
	/* ZeRO stage 1: each rank holds its part of the optimizer's state */
	char shard[16] = "";
	if (es_get_str(v, "parallel", "shard", shard, sizeof shard, err) < 0)
		return -1;
	if (shard[0] && strcmp(shard, "optimizer") && strcmp(shard, "none"))
		return eng_errf(err, "'parallel.shard' must be \"optimizer\" or \"none\"");
	s->shard_optimizer = strcmp(shard, "optimizer") == 0;
	if (s->hosts[0] && s->hostfile[0])
		return eng_errf(err, "'parallel' takes 'hosts' or 'hostfile', not both");
	if (s->hostfile[0] == '-')
		return eng_errf(err, "'parallel.hostfile' must be a path, not an option");
	return 0;
}

/* B*T tokens per step (and B*T*V logits) are counted in int further on. */
int es_check_tokens(const eng_spec *s, eng_err *err)
{
	if ((long long)s->batch * s->seq_len > INT_MAX)
		return eng_errf(err, "'batch' * 'seq_len' = %lld tokens per step, at most %d",
			(long long)s->batch * s->seq_len, INT_MAX);
	return 0;
}

/* The fields in a fixed order, so the first problem reported does not depend on key order
 * (beyond unknown keys, which come first). data before model: bytes decides the vocab. */
/* Text data needs a tokenizer (data.tokenizer, or one in init_from's directory: that one is
 * looked for when the files are checked). Its tokens go to data.cache or the save
 * directory's tokens/ (nothing is written outside a directory the job was given): the run
 * asks for one of them, rematd giving every job a save directory. */
static int check_text_data(const eng_spec *s, eng_err *err)
{
	if (!ENG_DATA_IS_TEXT(s->data_format))
		return 0;
	if (!s->tokenizer[0] && !s->init_from[0])
		return eng_errf(err, "'data.format' is \"%s\": give data.tokenizer (a "
				     "tokenizer.json or a directory holding one), or "
				     "model.init_from a model directory that holds one",
			eng_data_format_names[s->data_format]);
	return 0;
}

int es_parse_root(eng_spec *s, json_t *root, eng_err *err)
{
	static const char *const devices[] = {"cpu", "cuda", NULL};
	long long seed = (long long)s->seed;
	int dev = 0, prec = 0;
	json_t *v;
	if (!json_is_object(root))
		return eng_errf(err, "a job spec must be a JSON object, not %s",
			json_is_array(root) ? "an array" : "a scalar");
	if (es_check_keys(root, "", root_keys, err) < 0 || parse_name(s, root, err) < 0 ||
		parse_data(s, root, err) < 0 || parse_model(s, root, err) < 0 ||
		es_get_int(root, "", "batch", 1, SPEC_MAX_BATCH, &s->batch, err) < 0 ||
		es_get_int(root, "", "seq_len", 1, SPEC_MAX_SEQ, &s->seq_len, err) < 0 ||
		es_get_int(root, "", "steps", 1, SPEC_MAX_STEPS, &s->steps, err) < 0 ||
		es_get_int(root, "", "grad_accum", 1, SPEC_MAX_ACCUM, &s->grad_accum, err) < 0 ||
		es_get_int64(root, "", "seed", 0, INT64_MAX, &seed, err) < 0 ||
		es_check_tokens(s, err) < 0 || parse_optim(s, root, err) < 0 ||
		parse_schedule(s, root, err) < 0 || parse_remat(s, root, err) < 0 ||
		parse_eval(s, root, err) < 0 || parse_sample(s, root, err) < 0 ||
		parse_save(s, root, err) < 0 || parse_parallel(s, root, err) < 0 ||
		parse_memory(s, root, err) < 0 || parse_train(s, root, err) < 0 ||
		parse_lora(s, root, err) < 0 ||
		es_get_int(root, "", "threads", 1, SPEC_MAX_THREADS, &s->threads, err) < 0 ||
		es_get_int(root, "", "priority", 1, ENG_MAX_PRIORITY, &s->priority, err) < 0)
		return -1;
	s->seed = (uint64_t)seed;
	s->has_grad_accum = json_object_get(root, "grad_accum") != NULL;
	s->has_threads = json_object_get(root, "threads") != NULL;
	s->has_shuffle_seed = json_object_get(json_object_get(root, "data"), "shuffle_seed") != NULL;
	v = json_object_get(root, "device");
	if (v && es_get_choice(v, "device", devices, &dev, err) < 0)
		return -1;
	s->device = dev == 1 ? ENG_DEVICE_CUDA : ENG_DEVICE_CPU;
	v = json_object_get(root, "precision");
	if (v && es_get_choice(v, "precision", eng_precision_names, &prec, err) < 0)
		return -1;
	s->precision = (eng_precision)prec;
	s->has_precision = v != NULL;
	return check_text_data(s, err);
}
