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

#define LN_EPS	   1e-5	 /* the LayerNorm epsilon the engine uses (DESIGN §5) */
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
		bad(err, path, "not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line,
		    jerr.column);
		goto fail;
	}
	if (!json_is_object(root)) {
		bad(err, path, "not a JSON object");
		goto fail;
	}

	v = json_object_get(root, "model_type");
	if (v && (!json_is_string(v) || strcmp(json_string_value(v), "gpt2") != 0)) {
		bad(err, path, "'model_type' must be \"gpt2\"");
		goto fail;
	}
	if (get_int(path, root, "n_layer", 1, &c.n_layer, err) < 0 ||
	    get_int(path, root, "n_embd", 1, &c.n_embd, err) < 0 ||
	    get_int(path, root, "n_head", 1, &c.n_head, err) < 0 ||
	    get_int(path, root, "vocab_size", 1, &c.vocab_size, err) < 0)
		goto fail;
	int rc = get_int(path, root, "n_positions", 0, &c.n_positions, err);
	if (rc == 1)
		rc = get_int(path, root, "n_ctx", 0, &c.n_positions, err);
	if (rc == 1)
		bad(err, path, "missing key 'n_positions' (nor 'n_ctx')");
	if (rc != 0)
		goto fail;

	v = json_object_get(root, "activation_function");
	const char *act = json_is_string(v) ? json_string_value(v) : "";
	if (v && strcmp(act, "gelu_new") != 0 && strcmp(act, "gelu_pytorch_tanh") != 0) {
		bad(err, path,
		    "'activation_function' must be \"gelu_new\" or "
		    "\"gelu_pytorch_tanh\" (the tanh GELU the engine computes)");
		goto fail;
	}
	v = json_object_get(root, "n_inner");
	if (v && !json_is_null(v) &&
	    (!json_is_integer(v) || json_integer_value(v) != 4 * (json_int_t)c.n_embd)) {
		bad(err, path, "'n_inner' must be null or 4*n_embd (%lld)",
		    4 * (long long)c.n_embd);
		goto fail;
	}
	v = json_object_get(root, "layer_norm_epsilon");
	if (v && (!json_is_number(v) || !(fabs(json_number_value(v) - LN_EPS) <= LN_EPS_TOL))) {
		bad(err, path, "'layer_norm_epsilon' must be 1e-05");
		goto fail;
	}
	/* these change the computation; the engine implements Hugging Face's defaults */
	if (check_bool(path, root, "tie_word_embeddings", 1, err) != 0 ||
	    check_bool(path, root, "scale_attn_weights", 1, err) != 0 ||
	    check_bool(path, root, "scale_attn_by_inverse_layer_idx", 0, err) != 0 ||
	    check_bool(path, root, "add_cross_attention", 0, err) != 0)
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

/* The GPT2Config object for cfg (validated first; what names the file in messages), in
 * the key order transformers' GPT2Config.to_json_string writes; NULL with a message. */
static json_t *config_json(const eng_config *cfg, const char *shown, eng_err *err)
{
	char what[ENG_ERR_LEN];
	snprintf(what, sizeof what, "cannot write config '%s'", shown);
	if (eng_config_validate(cfg, what, err) != 0)
		return NULL;
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
