/* eng_tok_conf.c - a tokenizer.json's normalizer, pre_tokenizer and decoder objects into
 * step lists (eng_tok_int.h), Sequences flattened, regexes compiled (PCRE2: UTF, UCP, JIT).
 *
 * Every type, every key and every value is checked here; what the tokenizer cannot do as
 * Hugging Face does is refused by name with the key at fault ("pre_tokenizer.type
 * 'Whitespace' is not supported (...)"). A message shows a name from the file only through
 * eng_err_plain, and a pattern never: PCRE2's own words and the offset say what is wrong.
 * Not here: running the steps (eng_tok_pre.c, eng_tok_dec.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_tok_int.h"

#define KEY_LEN 256   /* the longest key path kept for messages */
#define DEPTH_MAX 8   /* Sequences nested deeper are refused */

/* GPT-2's pattern: ByteLevel's use_regex (the tokenizers library's, unchanged) */
static const char gpt2_re[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+"
			      "|\\s+(?!\\S)|\\s+";

int tok_bad(eng_err *err, const char *label, const char *fmt, ...)
{
	char msg[ENG_ERR_LEN];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return eng_errf(err, "%s: %s", label, msg);
}

/* A new step at the end of s (zeroed), or NULL with a message when there are too many. */
static tok_step *push(tok_steps *s, tok_kind kind, const char *key, const char *label,
	eng_err *err)
{
	if (!s->v) {
		s->v = calloc(TOK_STEPS_MAX, sizeof *s->v);
		if (!s->v) {
			eng_err_nomem(err, "%s: out of memory", label);
			return NULL;
		}
	}
	if (s->n >= TOK_STEPS_MAX) {
		tok_bad(err, label, "%s: more than %d steps", key, TOK_STEPS_MAX);
		return NULL;
	}
	tok_step *st = &s->v[s->n++];
	memset(st, 0, sizeof *st);
	st->kind = kind;
	return st;
}

/* o[name] as a string (a copy in *out when out is given); absent or null: dflt (NULL:
 * the key is required). */
static int get_str(json_t *o, const char *name, const char *dflt, const char *key,
	const char *label, char **out, size_t *len, eng_err *err)
{
	json_t *v = json_object_get(o, name);
	const char *s = dflt;
	size_t n = dflt ? strlen(dflt) : 0;
	if (v && !json_is_null(v)) {
		if (!json_is_string(v))
			return tok_bad(err, label, "%s.%s is not a string", key, name);
		s = json_string_value(v);
		n = json_string_length(v);
	} else if (!dflt) {
		return tok_bad(err, label, "%s.%s is missing", key, name);
	}
	*out = malloc(n + 1);
	if (!*out)
		return eng_err_nomem(err, "%s: out of memory", label);
	memcpy(*out, s, n);
	(*out)[n] = '\0';
	*len = n;
	return 0;
}

/* o[name] as a boolean; absent or null: dflt. */
static int get_bool(json_t *o, const char *name, int dflt, const char *key, const char *label,
	int *out, eng_err *err)
{
	json_t *v = json_object_get(o, name);
	*out = dflt;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return tok_bad(err, label, "%s.%s is not true or false", key, name);
	*out = json_is_true(v);
	return 0;
}

/* o[name] as a count 0..1000; absent: 0. */
static int get_count(json_t *o, const char *name, const char *key, const char *label, int *out,
	eng_err *err)
{
	json_t *v = json_object_get(o, name);
	*out = 0;
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1000)
		return tok_bad(err, label, "%s.%s is not a count (0 to 1000)", key, name);
	*out = (int)json_integer_value(v);
	return 0;
}

/* Compiles a regex into st->re (and its match data). */
static int compile_re(tok_step *st, const char *pat, size_t len, const char *key,
	const char *label, eng_err *err)
{
	int ec;
	PCRE2_SIZE eo;
	st->re = pcre2_compile((PCRE2_SPTR)pat, len, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
	if (!st->re) {
		PCRE2_UCHAR why[160];
		if (pcre2_get_error_message(ec, why, sizeof why) < 0)
			snprintf((char *)why, sizeof why, "error %d", ec);
		return tok_bad(err, label, "%s: PCRE2 refuses the pattern at offset %zu: %s", key,
			(size_t)eo, (const char *)why);
	}
	(void)pcre2_jit_compile(st->re, PCRE2_JIT_COMPLETE); /* else PCRE2 interprets it */
	st->md = pcre2_match_data_create_from_pattern(st->re, NULL);
	if (!st->md)
		return eng_err_nomem(err, "%s: out of memory", label);
	return 0;
}

/* o.pattern: {"String": s} into st->pat, or {"Regex": r} compiled into st->re. */
static int get_pattern(json_t *o, tok_step *st, const char *key, const char *label,
	eng_err *err)
{
	json_t *p = json_object_get(o, "pattern");
	if (!json_is_object(p) || json_object_size(p) != 1)
		return tok_bad(err, label, "%s.pattern is not {\"String\": ...} or "
			"{\"Regex\": ...}", key);
	json_t *s = json_object_get(p, "String"), *r = json_object_get(p, "Regex");
	char k[KEY_LEN];
	if (json_is_string(s)) {
		snprintf(k, sizeof k, "%s.pattern", key);
		return get_str(p, "String", NULL, k, label, &st->pat, &st->pat_len, err);
	}
	if (!json_is_string(r))
		return tok_bad(err, label, "%s.pattern is not {\"String\": ...} or "
			"{\"Regex\": ...}", key);
	snprintf(k, sizeof k, "%s.pattern.Regex", key);
	return compile_re(st, json_string_value(r), json_string_length(r), k, label, err);
}

/* Metaspace's replacement (one character), prepend_scheme (or the older add_prefix_space)
 * and split. */
static int get_metaspace(json_t *j, tok_step *st, const char *key, const char *label,
	eng_err *err)
{
	char *scheme = NULL;
	size_t n;
	int legacy, rc = -1;
	if (get_str(j, "replacement", "\xe2\x96\x81", key, label, &st->str, &st->str_len, err) < 0)
		goto out;
	int cl = st->str_len ? (int)(1 + ((unsigned char)st->str[0] >= 0xc0) +
		((unsigned char)st->str[0] >= 0xe0) + ((unsigned char)st->str[0] >= 0xf0)) : 0;
	if (cl == 0 || (size_t)cl != st->str_len) {
		tok_bad(err, label, "%s.replacement is not one character", key);
		goto out;
	}
	if (get_bool(j, "add_prefix_space", 1, key, label, &legacy, err) < 0 ||
	    get_str(j, "prepend_scheme", legacy ? "always" : "never", key, label, &scheme, &n,
		    err) < 0 ||
	    get_bool(j, "split", 1, key, label, &st->flag, err) < 0)
		goto out;
	if (strcmp(scheme, "always") == 0)
		st->scheme = TOK_ALWAYS;
	else if (strcmp(scheme, "first") == 0)
		st->scheme = TOK_FIRST;
	else if (strcmp(scheme, "never") == 0)
		st->scheme = TOK_NEVER;
	else {
		tok_bad(err, label, "%s.prepend_scheme '%s' is not always, first or never", key,
			eng_err_plain(scheme));
		goto out;
	}
	rc = 0;
out:
	free(scheme);
	return rc;
}

/* j.type, or NULL with a message. */
static const char *type_of(json_t *j, const char *key, const char *label, eng_err *err)
{
	if (!json_is_object(j)) {
		tok_bad(err, label, "%s is not an object", key);
		return NULL;
	}
	const char *type = json_string_value(json_object_get(j, "type"));
	if (!type)
		tok_bad(err, label, "%s.type is missing or not a string", key);
	return type;
}

/* Each element of the array j[name] through fn, with its key "key.name[i]". */
typedef int (*one_fn)(json_t *j, tok_steps *s, const char *key, const char *label, int depth,
	eng_err *err);
static int each(json_t *j, const char *name, one_fn fn, tok_steps *s, const char *key,
	const char *label, int depth, eng_err *err)
{
	json_t *a = json_object_get(j, name);
	char k[KEY_LEN];
	if (!json_is_array(a))
		return tok_bad(err, label, "%s.%s is not an array", key, name);
	if (depth >= DEPTH_MAX)
		return tok_bad(err, label, "%s: Sequences nested more than %d deep", key, DEPTH_MAX);
	for (size_t i = 0; i < json_array_size(a); i++) {
		snprintf(k, sizeof k, "%s.%s[%zu]", key, name, i);
		if (fn(json_array_get(a, i), s, k, label, depth + 1, err) < 0)
			return -1;
	}
	return 0;
}

static int norm_one(json_t *j, tok_steps *s, const char *key, const char *label, int depth,
	eng_err *err)
{
	static const char *const plain[] = { "NFC", "NFD", "NFKC", "NFKD" };
	const char *type = type_of(j, key, label, err);
	tok_step *st;
	if (!type)
		return -1;
	if (strcmp(type, "Sequence") == 0)
		return each(j, "normalizers", norm_one, s, key, label, depth, err);
	for (int i = 0; i < 4; i++)
		if (strcmp(type, plain[i]) == 0)
			return push(s, (tok_kind)(TOK_N_NFC + i), key, label, err) ? 0 : -1;
	if (strcmp(type, "Lowercase") == 0)
		return push(s, TOK_N_LOWER, key, label, err) ? 0 : -1;
	if (strcmp(type, "Prepend") == 0) {
		if (!(st = push(s, TOK_N_PREPEND, key, label, err)))
			return -1;
		return get_str(j, "prepend", NULL, key, label, &st->str, &st->str_len, err);
	}
	if (strcmp(type, "Replace") == 0) {
		if (!(st = push(s, TOK_N_REPLACE, key, label, err)))
			return -1;
		if (get_pattern(j, st, key, label, err) < 0)
			return -1;
		return get_str(j, "content", NULL, key, label, &st->str, &st->str_len, err);
	}
	return tok_bad(err, label, "%s.type '%s' is not supported (NFC, NFD, NFKC, NFKD, Prepend, "
		"Replace, Lowercase, Sequence)", key, eng_err_plain(type));
}

static int split_behavior(json_t *j, tok_step *st, const char *key, const char *label,
	eng_err *err)
{
	static const char *const names[] = { "Isolated", "Removed", "MergedWithPrevious",
		"MergedWithNext", "Contiguous" };
	const char *b = json_string_value(json_object_get(j, "behavior"));
	if (!b)
		return tok_bad(err, label, "%s.behavior is missing or not a string", key);
	for (int i = 0; i < 5; i++)
		if (strcmp(b, names[i]) == 0) {
			st->behavior = (tok_split)i;
			return 0;
		}
	return tok_bad(err, label, "%s.behavior '%s' is not Isolated, Removed, MergedWithPrevious, "
		"MergedWithNext or Contiguous", key, eng_err_plain(b));
}

static int pre_one(json_t *j, tok_steps *s, const char *key, const char *label, int depth,
	eng_err *err)
{
	const char *type = type_of(j, key, label, err);
	tok_step *st;
	int use_regex;
	if (!type)
		return -1;
	if (strcmp(type, "Sequence") == 0)
		return each(j, "pretokenizers", pre_one, s, key, label, depth, err);
	if (strcmp(type, "ByteLevel") == 0) {
		if (!(st = push(s, TOK_P_BYTELEVEL, key, label, err)) ||
		    get_bool(j, "add_prefix_space", 1, key, label, &st->flag, err) < 0 ||
		    get_bool(j, "use_regex", 1, key, label, &use_regex, err) < 0)
			return -1;
		return use_regex ? compile_re(st, gpt2_re, sizeof gpt2_re - 1, key, label, err) : 0;
	}
	if (strcmp(type, "Split") == 0) {
		if (!(st = push(s, TOK_P_SPLIT, key, label, err)) ||
		    get_pattern(j, st, key, label, err) < 0 ||
		    split_behavior(j, st, key, label, err) < 0)
			return -1;
		return get_bool(j, "invert", 0, key, label, &st->invert, err);
	}
	if (strcmp(type, "Digits") == 0) {
		if (!(st = push(s, TOK_P_DIGITS, key, label, err)))
			return -1;
		return get_bool(j, "individual_digits", 0, key, label, &st->flag, err);
	}
	if (strcmp(type, "Metaspace") == 0) {
		if (!(st = push(s, TOK_P_METASPACE, key, label, err)))
			return -1;
		return get_metaspace(j, st, key, label, err);
	}
	return tok_bad(err, label, "%s.type '%s' is not supported (ByteLevel, Split, Digits, "
		"Metaspace, Sequence)", key, eng_err_plain(type));
}

static int dec_one(json_t *j, tok_steps *s, const char *key, const char *label, int depth,
	eng_err *err)
{
	const char *type = type_of(j, key, label, err);
	tok_step *st;
	if (!type)
		return -1;
	if (strcmp(type, "Sequence") == 0)
		return each(j, "decoders", dec_one, s, key, label, depth, err);
	if (strcmp(type, "ByteLevel") == 0)
		return push(s, TOK_D_BYTELEVEL, key, label, err) ? 0 : -1;
	if (strcmp(type, "ByteFallback") == 0)
		return push(s, TOK_D_BYTEFALLBACK, key, label, err) ? 0 : -1;
	if (strcmp(type, "Fuse") == 0)
		return push(s, TOK_D_FUSE, key, label, err) ? 0 : -1;
	if (strcmp(type, "Metaspace") == 0) {
		if (!(st = push(s, TOK_D_METASPACE, key, label, err)))
			return -1;
		return get_metaspace(j, st, key, label, err);
	}
	if (strcmp(type, "Replace") == 0) {
		if (!(st = push(s, TOK_D_REPLACE, key, label, err)) ||
		    get_pattern(j, st, key, label, err) < 0)
			return -1;
		return get_str(j, "content", NULL, key, label, &st->str, &st->str_len, err);
	}
	if (strcmp(type, "Strip") == 0) {
		if (!(st = push(s, TOK_D_STRIP, key, label, err)) ||
		    get_str(j, "content", NULL, key, label, &st->str, &st->str_len, err) < 0 ||
		    get_count(j, "start", key, label, &st->start, err) < 0 ||
		    get_count(j, "stop", key, label, &st->stop, err) < 0)
			return -1;
		if (st->str_len == 0 || st->str_len > 4)
			return tok_bad(err, label, "%s.content is not one character", key);
		return 0;
	}
	return tok_bad(err, label, "%s.type '%s' is not supported (ByteLevel, ByteFallback, "
		"Metaspace, Fuse, Strip, Replace, Sequence)", key, eng_err_plain(type));
}

/* A whole list from j (null or absent: none); on failure s is freed. */
static int conf(json_t *j, one_fn fn, const char *key, tok_steps *s, const char *label,
	eng_err *err)
{
	memset(s, 0, sizeof *s);
	if (!j || json_is_null(j))
		return 0;
	if (fn(j, s, key, label, 0, err) < 0) {
		tok_steps_free(s);
		return -1;
	}
	return 0;
}

int tok_conf_norm(json_t *j, tok_steps *s, const char *label, eng_err *err)
{
	return conf(j, norm_one, "normalizer", s, label, err);
}

int tok_conf_pre(json_t *j, tok_steps *s, const char *label, eng_err *err)
{
	return conf(j, pre_one, "pre_tokenizer", s, label, err);
}

int tok_conf_dec(json_t *j, tok_steps *s, const char *label, eng_err *err)
{
	return conf(j, dec_one, "decoder", s, label, err);
}

int tok_conf_bytelevel(tok_steps *s, int pre, eng_err *err)
{
	const char *label = "GPT-2 tokenizer";
	memset(s, 0, sizeof *s);
	tok_step *st = push(s, pre ? TOK_P_BYTELEVEL : TOK_D_BYTELEVEL, "ByteLevel", label, err);
	if (!st || (pre && compile_re(st, gpt2_re, sizeof gpt2_re - 1, "ByteLevel", label,
		err) < 0)) {
		tok_steps_free(s);
		return -1;
	}
	return 0;
}

void tok_steps_free(tok_steps *s)
{
	for (int i = 0; i < s->n; i++) {
		free(s->v[i].str);
		free(s->v[i].pat);
		pcre2_match_data_free(s->v[i].md);
		pcre2_code_free(s->v[i].re);
	}
	free(s->v);
	s->v = NULL;
	s->n = 0;
}
