/* eng_hfconfig.c - Hugging Face GPT-2 config.json (see eng_hfconfig.h). */
#include "eng_hfconfig.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LN_EPS	   1e-5	 /* the LayerNorm epsilon the engine uses (design.md §5) */
#define LN_EPS_TOL 1e-12 /* how far a config's layer_norm_epsilon may be from it */

/* "invalid config '<path>': <problem>" into err; -1 */
#define bad(err, path, ...) eng_err_invalid(err, "config", path, __VA_ARGS__)

/* root[key] as an int: -1 with a message when missing (and required), not an integer or
 * outside int; 1 when missing and optional; 0 when found. */
static int get_int(const char *path, json_t *root, const char *key, int required, int *out,
		   eng_err *err)
{
	json_t *v = json_object_get(root, key); /* borrowed */
	if (!v) {
		if (required)
			return bad(err, path, "missing key '%s'", key);
		return 1;
	}
	if (!json_is_integer(v))
		return bad(err, path, "'%s' is not an integer", key);
	json_int_t x = json_integer_value(v);
	if (x < INT_MIN || x > INT_MAX)
		return bad(err, path, "'%s' %lld is out of range", key, (long long)x);
	*out = (int)x;
	return 0;
}

/* root[key] as a number, *out untouched when it is missing (optional) or null */
static int get_num(const char *path, json_t *root, const char *key, double *out, eng_err *err)
{
	json_t *v = json_object_get(root, key); /* borrowed */
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_number(v))
		return bad(err, path, "'%s' is not a number", key);
	*out = json_number_value(v);
	return 0;
}

/* root[key], when present, must be the boolean want. */
static int check_bool(const char *path, json_t *root, const char *key, int want, eng_err *err)
{
	json_t *v = json_object_get(root, key); /* borrowed */
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return bad(err, path, "'%s' is not a boolean", key);
	if (json_is_true(v) != want)
		return bad(err, path, "'%s' must be %s: the engine only implements that", key,
			   want ? "true" : "false");
	return 0;
}

/* LlamaConfig's keys into *c (LlamaConfig's defaults where optional). Refused: what the
 * engine does not compute (another hidden_act, biases, rope_scaling, a head_dim other than
 * hidden_size / num_attention_heads). */
static int read_llama(const char *path, json_t *root, eng_config *c, eng_err *err)
{
	c->arch = ENG_ARCH_LLAMA;
	if (get_int(path, root, "num_hidden_layers", 1, &c->n_layer, err) < 0 ||
	    get_int(path, root, "hidden_size", 1, &c->n_embd, err) < 0 ||
	    get_int(path, root, "num_attention_heads", 1, &c->n_head, err) < 0 ||
	    get_int(path, root, "intermediate_size", 1, &c->intermediate_size, err) < 0 ||
	    get_int(path, root, "max_position_embeddings", 1, &c->n_positions, err) < 0 ||
	    get_int(path, root, "vocab_size", 1, &c->vocab_size, err) < 0)
		return -1;
	c->n_kv_head = c->n_head; /* LlamaConfig: None means multi-head attention */
	json_t *v = json_object_get(root, "num_key_value_heads");
	if (v && !json_is_null(v) &&
		get_int(path, root, "num_key_value_heads", 1, &c->n_kv_head, err) < 0)
		return -1;
	c->rope_theta = 10000.0;
	c->rms_norm_eps = 1e-6;
	if (get_num(path, root, "rope_theta", &c->rope_theta, err) < 0 ||
	    get_num(path, root, "rms_norm_eps", &c->rms_norm_eps, err) < 0)
		return -1;
	v = json_object_get(root, "tie_word_embeddings"); /* LlamaConfig's default: false */
	if (v && !json_is_boolean(v))
		return bad(err, path, "'tie_word_embeddings' is not a boolean");
	c->untied = !(v && json_is_true(v));
	v = json_object_get(root, "hidden_act");
	if (v && (!json_is_string(v) || strcmp(json_string_value(v), "silu") != 0))
		return bad(err, path, "'hidden_act' must be \"silu\" (SwiGLU is what the engine "
				      "computes)");
	v = json_object_get(root, "rope_scaling");
	if (v && !json_is_null(v))
		return bad(err, path, "'rope_scaling' must be null: the engine computes plain "
				      "rotary embeddings only");
	v = json_object_get(root, "head_dim");
	if (v && !json_is_null(v) && c->n_head > 0 &&
		(!json_is_integer(v) || c->n_embd % c->n_head != 0 ||
			json_integer_value(v) != c->n_embd / c->n_head))
		return bad(err, path, "'head_dim' must be hidden_size / num_attention_heads (%d)",
			c->n_head ? c->n_embd / c->n_head : 0);
	if (check_bool(path, root, "attention_bias", 0, err) != 0 ||
	    check_bool(path, root, "mlp_bias", 0, err) != 0)
		return -1;
	return 0;
}

/* GPT2Config's keys into *c (see eng_hfconfig.h) */
static int read_gpt2(const char *path, json_t *root, eng_config *c, eng_err *err)
{
	json_t *v;
	if (get_int(path, root, "n_layer", 1, &c->n_layer, err) < 0 ||
	    get_int(path, root, "n_embd", 1, &c->n_embd, err) < 0 ||
	    get_int(path, root, "n_head", 1, &c->n_head, err) < 0 ||
	    get_int(path, root, "vocab_size", 1, &c->vocab_size, err) < 0)
		return -1;
	int rc = get_int(path, root, "n_positions", 0, &c->n_positions, err);
	if (rc == 1)
		rc = get_int(path, root, "n_ctx", 0, &c->n_positions, err);
	if (rc == 1)
		return bad(err, path, "missing key 'n_positions' (nor 'n_ctx')");
	if (rc != 0)
		return -1;
	v = json_object_get(root, "activation_function");
	const char *act = json_is_string(v) ? json_string_value(v) : "";
	if (v && strcmp(act, "gelu_new") != 0 && strcmp(act, "gelu_pytorch_tanh") != 0)
		return bad(err, path, "'activation_function' must be \"gelu_new\" or "
				      "\"gelu_pytorch_tanh\" (the tanh GELU the engine computes)");
	v = json_object_get(root, "n_inner");
	if (v && !json_is_null(v) &&
	    (!json_is_integer(v) || json_integer_value(v) != 4 * (json_int_t)c->n_embd))
		return bad(err, path, "'n_inner' must be null or 4*n_embd (%lld)",
			4 * (long long)c->n_embd);
	v = json_object_get(root, "layer_norm_epsilon");
	if (v && (!json_is_number(v) || !(fabs(json_number_value(v) - LN_EPS) <= LN_EPS_TOL)))
		return bad(err, path, "'layer_norm_epsilon' must be 1e-05");
	/* these change the computation; the engine implements Hugging Face's defaults */
	if (check_bool(path, root, "tie_word_embeddings", 1, err) != 0 ||
	    check_bool(path, root, "scale_attn_weights", 1, err) != 0 ||
	    check_bool(path, root, "scale_attn_by_inverse_layer_idx", 0, err) != 0 ||
	    check_bool(path, root, "add_cross_attention", 0, err) != 0)
		return -1;
	return 0;
}

int eng_hfconfig_read(const char *path, eng_config *cfg, eng_err *err)
{
	FILE *fp = NULL;
	json_t *root = NULL, *v;
	json_error_t jerr;
	eng_config c;
	char what[ENG_ERR_LEN];

	memset(&c, 0, sizeof c);
	fp = eng_fs_fopen_read(path, "config", err);
	if (!fp)
		goto fail;
	root = json_loadf(fp, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		bad(err, path, "not valid JSON: %s", eng_err_json(&jerr, what, sizeof what));
		goto fail;
	}
	if (!json_is_object(root)) {
		bad(err, path, "not a JSON object");
		goto fail;
	}

	v = json_object_get(root, "model_type");
	const char *type = json_is_string(v) ? json_string_value(v) : "";
	if (v && strcmp(type, "gpt2") != 0 && strcmp(type, "llama") != 0) {
		bad(err, path, "'model_type' must be \"gpt2\" or \"llama\"");
		goto fail;
	}
	if ((strcmp(type, "llama") == 0 ? read_llama : read_gpt2)(path, root, &c, err) < 0)
		goto fail;

	snprintf(what, sizeof what, "invalid config '%s'", path);
	if (eng_config_validate(&c, what, err) != 0)
		goto fail;
	json_decref(root);
	fclose(fp);
	*cfg = c;
	return 0;
fail:
	json_decref(root);
	if (fp)
		fclose(fp);
	return -1;
}

/* The LlamaConfig object for cfg, its keys sorted as transformers' to_json_string writes
 * them; NULL when out of memory */
static json_t *llama_json(const eng_config *cfg)
{
	/* clang-format off */
	return json_pack("{s:[s], s:b, s:f, s:i, s:i, s:i, s:s, s:i, s:f, s:i, s:i, s:b, s:s, "
			 "s:i, s:i, s:i, s:i, s:f, s:n, s:f, s:b, s:s, s:b, s:i}",
			 "architectures", "LlamaForCausalLM",
			 "attention_bias", 0,
			 "attention_dropout", 0.0,
			 "bos_token_id", 0,
			 "eos_token_id", cfg->vocab_size - 1,
			 "head_dim", cfg->n_embd / cfg->n_head,
			 "hidden_act", "silu",
			 "hidden_size", cfg->n_embd,
			 "initializer_range", 0.02,
			 "intermediate_size", cfg->intermediate_size,
			 "max_position_embeddings", cfg->n_positions,
			 "mlp_bias", 0,
			 "model_type", "llama",
			 "num_attention_heads", cfg->n_head,
			 "num_hidden_layers", cfg->n_layer,
			 "num_key_value_heads", cfg->n_kv_head,
			 "pretraining_tp", 1,
			 "rms_norm_eps", cfg->rms_norm_eps,
			 "rope_scaling",
			 "rope_theta", cfg->rope_theta,
			 "tie_word_embeddings", !cfg->untied,
			 "torch_dtype", "float32",
			 "use_cache", 1,
			 "vocab_size", cfg->vocab_size);
	/* clang-format on */
}

/* The config object for cfg (validated first; what names the file in messages): GPT2Config
 * in the key order its to_json_string writes, or LlamaConfig; NULL with a message. */
static json_t *config_json(const eng_config *cfg, const char *shown, eng_err *err)
{
	char what[ENG_ERR_LEN];
	snprintf(what, sizeof what, "cannot write config '%s'", shown);
	if (eng_config_validate(cfg, what, err) != 0)
		return NULL;
	if (cfg->arch == ENG_ARCH_LLAMA) {
		json_t *root = llama_json(cfg);
		if (!root)
			eng_errf(err, "cannot write '%s': out of memory", shown);
		return root;
	}
	/* json_pack keeps the order given here; JSON_PRESERVE_ORDER below keeps it on output */
	/* clang-format off */
	json_t *root = json_pack("{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:n, s:s, s:f, s:f, s:f, "
			 "s:f, s:f, s:b, s:i, s:i, s:s}",
			 "architectures", "GPT2LMHeadModel",
			 "model_type", "gpt2",
			 "vocab_size", cfg->vocab_size,
			 "n_positions", cfg->n_positions,
			 "n_embd", cfg->n_embd,
			 "n_layer", cfg->n_layer,
			 "n_head", cfg->n_head,
			 "n_inner",
			 "activation_function", "gelu_new",
			 "layer_norm_epsilon", LN_EPS,
			 "resid_pdrop", 0.0,
			 "embd_pdrop", 0.0,
			 "attn_pdrop", 0.0,
			 "initializer_range", 0.02,
			 "tie_word_embeddings", 1,
			 "bos_token_id", cfg->vocab_size - 1,
			 "eos_token_id", cfg->vocab_size - 1,
			 "torch_dtype", "float32");
	/* clang-format on */
	if (!root)
		eng_errf(err, "cannot write '%s': out of memory", shown);
	return root;
}

/* eng_fs_fill_fn: the JSON, two-space indent, a trailing newline. 15 significant digits:
 * 1e-5 and 0.02, not 1.0000000000000001e-05 (jansson drops the exponent's leading zero
 * that Python writes; both parse to the same double). */
static int config_fill(FILE *f, void *ud, eng_err *err)
{
	(void)err;
	size_t flags = JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15);
	if (json_dumpf(ud, f, flags) == 0)
		fputc('\n', f); /* a failure shows in the stream's error, found by the flush */
	return 0;
}

int eng_hfconfig_write_at(const eng_dir *d, const char *name, const eng_config *cfg,
	eng_err *err)
{
	json_t *root = config_json(cfg, name, err);
	if (!root)
		return -1;
	int rc = eng_fs_write_at(d, name, config_fill, root, err);
	json_decref(root);
	return rc;
}

int eng_hfconfig_write(const char *path, const eng_config *cfg, eng_err *err)
{
	json_t *root = config_json(cfg, path, err);
	if (!root)
		return -1;
	int rc = eng_fs_write(path, config_fill, root, err);
	json_decref(root);
	return rc;
}
