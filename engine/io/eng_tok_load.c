/* eng_tok_load.c - a tokenizer from its files: tokenizer.json, or GPT-2's vocab.json +
 * merges.txt, and the tokenizer_config.json beside either (BOS and EOS).
 *
 * Files are opened as a model's are (base/eng_fs.h's eng_fs_open_read, by the job's owner:
 * a link at the file's own name is followed, as Hugging Face's hub cache keeps its files
 * as links to blobs), checked to be regular (a FIFO or a device refused without blocking)
 * and at most ENG_TOK_FILE_MAX bytes, and read through that descriptor. Everything the
 * file says is checked before it is used: types, ids within ENG_TOK_VOCAB_MAX, ids and
 * tokens given once, merges naming tokens of the vocabulary whose join is one too; a
 * message names the key at fault ("model.merges[7]: 'a b' names a token not in
 * model.vocab" is said without the tokens: "its left token is not in model.vocab"), never
 * the file's bytes.
 * Not here: the steps' objects (eng_tok_conf.c), the tables (eng_tok_bpe.c).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_fs.h"
#include "eng_tok_int.h"

#define LABEL_LEN (2 * ENG_FS_PATH_LEN + 64) /* "invalid tokenizer 'dir/name'" */

/* d/name whole into *buf (malloc'd, NUL-terminated, *len): at most ENG_TOK_FILE_MAX
 * bytes. 1 when the file is absent (with the message in err), 0 read, -1 failed. */
static int read_at(const eng_dir *d, const char *name, char **buf, size_t *len, eng_err *err)
{
	*buf = eng_fs_read_all_in(d, name, "tokenizer file", ENG_TOK_FILE_MAX, len, err);
	return *buf ? 0 : errno == ENOENT ? 1 : -1;
}

/* Parses JSON text into *doc (an object); flags: jansson's, besides rejecting duplicate
 * keys. */
static int parse_json(const char *buf, size_t len, size_t flags, const char *label,
	json_t **doc, eng_err *err)
{
	json_error_t je;
	char why[160];
	*doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES | flags, &je);
	if (!*doc)
		return tok_bad(err, label, "not JSON: %s", eng_err_json(&je, why, sizeof why));
	if (!json_is_object(*doc)) {
		json_decref(*doc);
		*doc = NULL;
		return tok_bad(err, label, "the top level is not an object");
	}
	return 0;
}

/* An id value: an integer 0 <= v < ENG_TOK_VOCAB_MAX. */
static int get_id(json_t *v, uint32_t *id)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) >= ENG_TOK_VOCAB_MAX)
		return -1;
	*id = (uint32_t)json_integer_value(v);
	return 0;
}

/* The vocabulary object {token: id}; key names it in messages. */
static int load_vocab(eng_tok *t, json_t *v, const char *key, const char *label, eng_err *err)
{
	const char *tok, *what;
	json_t *val;
	json_object_foreach(v, tok, val)
	{
		uint32_t id;
		size_t len = strlen(tok);
		if (get_id(val, &id) < 0)
			return tok_bad(err, label, "%s: an id is not an integer from 0 to %u", key,
				ENG_TOK_VOCAB_MAX - 1);
		if (tok_vocab_add(t, tok, len, id, &what) < 0) {
			if (strcmp(what, "id") == 0)
				return tok_bad(err, label, "%s: id %u is given to two tokens", key, id);
			if (strcmp(what, "token") == 0)
				return tok_bad(err, label, "%s: a token is given twice", key);
			return eng_err_nomem(err, "%s: out of memory", label);
		}
	}
	return 0;
}

/* One merge "a b" (or [a, b]) at rank i. */
static int load_merge(eng_tok *t, json_t *m, size_t i, const char *key, const char *label,
	eng_err *err)
{
	const char *a, *b, *sp;
	size_t al, bl;
	int which;
	if (json_is_string(m)) {
		a = json_string_value(m);
		sp = strchr(a, ' ');
		if (!sp || strchr(sp + 1, ' ') || json_string_length(m) != strlen(a))
			return tok_bad(err, label, "%s[%zu] is not two tokens with one space between",
				key, i);
		al = (size_t)(sp - a);
		b = sp + 1;
		bl = strlen(b);
	} else if (json_is_array(m) && json_array_size(m) == 2 &&
		   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
		a = json_string_value(json_array_get(m, 0));
		al = json_string_length(json_array_get(m, 0));
		b = json_string_value(json_array_get(m, 1));
		bl = json_string_length(json_array_get(m, 1));
	} else {
		return tok_bad(err, label, "%s[%zu] is neither \"a b\" nor [\"a\", \"b\"]", key, i);
	}
	if (tok_merge_add(t, a, al, b, bl, (uint32_t)i, &which) < 0)
		return tok_bad(err, label, "%s[%zu]: %s", key, i, which == 0 ?
			"its left token is not in model.vocab" : which == 1 ?
			"its right token is not in model.vocab" :
			"the two tokens joined are not in model.vocab");
	return 0;
}

/* added_tokens: each {id, content, single_word, lstrip, rstrip, normalized, special}. */
static int load_added(eng_tok *t, json_t *a, const char *label, eng_err *err)
{
	size_t n = json_array_size(a);
	const char *what;
	t->added = calloc(n ? n : 1, sizeof *t->added);
	if (!t->added)
		return eng_err_nomem(err, "%s: out of memory", label);
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_array_get(a, i);
		tok_added *x = &t->added[i];
		const char *c;
		size_t cl;
		int norm = 0;
		json_error_t je;
		if (json_unpack_ex(o, &je, 0, "{s:o, s:s%, s?b, s?b, s?b, s?b, s?b}", "id",
			&(json_t *){ NULL }, "content", &c, &cl, "single_word", &x->single_word,
			"lstrip", &x->lstrip, "rstrip", &x->rstrip, "normalized", &norm, "special",
			&x->special) < 0 ||
		    get_id(json_object_get(o, "id"), &x->id) < 0 || cl == 0)
			return tok_bad(err, label, "added_tokens[%zu] is not {\"id\": id, \"content\": "
				"text, ...} with booleans", i);
		x->text = malloc(cl + 1);
		if (!x->text)
			return eng_err_nomem(err, "%s: out of memory", label);
		memcpy(x->text, c, cl + 1);
		x->len = cl;
		t->n_added = i + 1;
		uint32_t have = tok_vocab_get(t, c, cl);
		if (have == x->id)
			continue;
		if (have != ENG_TOK_NONE || tok_vocab_add(t, c, cl, x->id, &what) < 0)
			return tok_bad(err, label, "added_tokens[%zu]: %s", i, have != ENG_TOK_NONE ?
				"its content is another id's token" : "its id is another token's");
	}
	return 0;
}

/* model: {type BPE, vocab, merges, unk_token, fuse_unk, byte_fallback, ignore_merges} */
static int load_model(eng_tok *t, json_t *m, json_t *added, const char *label, eng_err *err)
{
	json_t *v = json_object_get(m, "vocab"), *ms = json_object_get(m, "merges");
	const char *type = json_string_value(json_object_get(m, "type"));
	const char *unk = json_string_value(json_object_get(m, "unk_token"));
	json_t *drop = json_object_get(m, "dropout");
	if (!json_is_object(m))
		return tok_bad(err, label, "model is missing or not an object");
	if (type && strcmp(type, "BPE") != 0)
		return tok_bad(err, label, "model.type '%s' is not supported (BPE only)",
			eng_err_plain(type));
	if (!json_is_object(v) || !json_is_array(ms))
		return tok_bad(err, label, "model.vocab is not an object or model.merges not an array");
	if (json_object_size(v) > ENG_TOK_VOCAB_MAX || json_array_size(ms) > ENG_TOK_VOCAB_MAX)
		return tok_bad(err, label, "model: more than %u tokens or merges", ENG_TOK_VOCAB_MAX);
	if (drop && !json_is_null(drop) && !(json_is_number(drop) && json_number_value(drop) == 0))
		return tok_bad(err, label, "model.dropout is not supported (null or 0 only)");
	static const char *const affix[] = { "continuing_subword_prefix", "end_of_word_suffix" };
	for (int i = 0; i < 2; i++) {
		json_t *x = json_object_get(m, affix[i]);
		if (x && !json_is_null(x) && !(json_is_string(x) && json_string_length(x) == 0))
			return tok_bad(err, label, "model.%s is not supported (null or \"\" only)",
				affix[i]);
	}
	json_t *unk_j = json_object_get(m, "unk_token");
	if (unk_j && !json_is_null(unk_j) && !unk)
		return tok_bad(err, label, "model.unk_token is not a string");
	if (json_unpack_ex(m, NULL, 0, "{s?b, s?b, s?b}", "fuse_unk", &t->fuse_unk,
		"byte_fallback", &t->byte_fallback, "ignore_merges", &t->ignore_merges) < 0)
		return tok_bad(err, label, "model.fuse_unk, byte_fallback or ignore_merges is not true "
			"or false");
	if (added && !json_is_array(added) && !json_is_null(added))
		return tok_bad(err, label, "added_tokens is not an array");
	if (json_array_size(added) > ENG_TOK_VOCAB_MAX)
		return tok_bad(err, label, "added_tokens: more than %u", ENG_TOK_VOCAB_MAX);
	if (tok_tables_init(t, json_object_size(v) + json_array_size(added),
		json_array_size(ms)) < 0)
		return eng_err_nomem(err, "%s: out of memory", label);
	if (load_vocab(t, v, "model.vocab", label, err) < 0)
		return -1;
	for (size_t i = 0; i < json_array_size(ms); i++)
		if (load_merge(t, json_array_get(ms, i), i, "model.merges", label, err) < 0)
			return -1;
	if (json_is_array(added) && load_added(t, added, label, err) < 0)
		return -1;
	t->unk = unk ? tok_vocab_get(t, unk, strlen(unk)) : ENG_TOK_NONE;
	if (unk && t->unk == ENG_TOK_NONE)
		return tok_bad(err, label, "model.unk_token is not in model.vocab");
	return 0;
}

/* A tokenizer.json's document into t. */
static int load_doc(eng_tok *t, json_t *doc, const char *label, eng_err *err)
{
	if (load_model(t, json_object_get(doc, "model"), json_object_get(doc, "added_tokens"),
		label, err) < 0 ||
	    tok_conf_norm(json_object_get(doc, "normalizer"), &t->norm, label, err) < 0 ||
	    tok_conf_pre(json_object_get(doc, "pre_tokenizer"), &t->pre, label, err) < 0 ||
	    tok_conf_dec(json_object_get(doc, "decoder"), &t->dec, label, err) < 0)
		return -1;
	return tok_model_finish(t, err);
}

static eng_tok *tok_new(eng_err *err)
{
	eng_tok *t = calloc(1, sizeof *t);
	if (!t)
		eng_err_nomem(err, "tokenizer: out of memory");
	else
		t->bos = t->eos = t->unk = ENG_TOK_NONE;
	return t;
}

/* The usual names of BOS and EOS, for a tokenizer without a config. */
static void default_ends(eng_tok *t)
{
	static const char *const bos[] = { "<s>", "<|begin_of_text|>" };
	static const char *const eos[] = { "</s>", "<|end_of_text|>", "<|endoftext|>" };
	for (int i = 0; i < 2 && t->bos == ENG_TOK_NONE; i++)
		t->bos = eng_tok_id(t, bos[i]);
	for (int i = 0; i < 3 && t->eos == ENG_TOK_NONE; i++)
		t->eos = eng_tok_id(t, eos[i]);
}

eng_tok *eng_tok_parse(const char *json, size_t len, const char *name, eng_err *err)
{
	char label[LABEL_LEN];
	json_t *doc = NULL;
	eng_tok *t = NULL;
	snprintf(label, sizeof label, "invalid tokenizer '%s'", name);
	if (parse_json(json, len, 0, label, &doc, err) < 0 || !(t = tok_new(err)))
		goto fail;
	if (load_doc(t, doc, label, err) < 0)
		goto fail;
	json_decref(doc);
	default_ends(t);
	return t;
fail:
	json_decref(doc);
	eng_tok_free(t);
	return NULL;
}

void eng_tok_free(eng_tok *t)
{
	if (!t)
		return;
	tok_model_free(t);
	tok_steps_free(&t->norm);
	tok_steps_free(&t->pre);
	tok_steps_free(&t->dec);
	free(t);
}

/* merges.txt's text: "#version" first line skipped, then "a b" a line. */
static int load_merges_txt(eng_tok *t, char *txt, const char *label, eng_err *err)
{
	size_t rank = 0, line = 0;
	for (char *p = txt; *p; line++) {
		char *nl = strchr(p, '\n'), *e = nl ? nl : p + strlen(p);
		if (e > p && e[-1] == '\r')
			e--;
		int which;
		char *sp = memchr(p, ' ', (size_t)(e - p));
		if ((line == 0 && strncmp(p, "#version", 8) == 0) || e == p)
			;
		else if (!sp || memchr(sp + 1, ' ', (size_t)(e - sp - 1)))
			return tok_bad(err, label, "line %zu is not two tokens with one space between",
				line + 1);
		else if (rank >= ENG_TOK_VOCAB_MAX)
			return tok_bad(err, label, "more than %u merges", ENG_TOK_VOCAB_MAX);
		else if (tok_merge_add(t, p, (size_t)(sp - p), sp + 1, (size_t)(e - sp - 1),
			(uint32_t)rank++, &which) < 0)
			return tok_bad(err, label, "line %zu: %s", line + 1, which == 0 ?
				"its left token is not in the vocabulary" : which == 1 ?
				"its right token is not in the vocabulary" :
				"the two tokens joined are not in the vocabulary");
		p = nl ? nl + 1 : e + strlen(e);
	}
	return 0;
}

/* GPT-2's files in d: vocab.json (or encoder.json) and merges.txt (or vocab.bpe). */
static eng_tok *load_gpt2(const eng_dir *d, eng_err *err)
{
	static const char *const vn[] = { "vocab.json", "encoder.json" };
	static const char *const mn[] = { "merges.txt", "vocab.bpe" };
	char *vb = NULL, *mb = NULL, label[LABEL_LEN];
	size_t vl, ml, nl = 0;
	json_t *v = NULL;
	eng_tok *t = NULL;
	int rc = 1, i, j;
	for (i = 0; i < 2 && rc == 1; i++)
		rc = read_at(d, vn[i], &vb, &vl, err);
	if (rc == 1)
		eng_errf(err, "no tokenizer in '%s': neither tokenizer.json nor vocab.json and "
			"merges.txt (nor encoder.json and vocab.bpe)", d->path);
	for (j = 0, rc = rc ? rc : 1; j < 2 && rc == 1 && vb; j++)
		rc = read_at(d, mn[j], &mb, &ml, err);
	if (rc)
		goto fail;
	snprintf(label, sizeof label, "invalid tokenizer vocabulary '%s/%s'", d->path, vn[i - 1]);
	if (parse_json(vb, vl, 0, label, &v, err) < 0 || !(t = tok_new(err)))
		goto fail;
	for (const char *p = mb; (p = strchr(p, '\n')); p++)
		nl++;
	if (json_object_size(v) > ENG_TOK_VOCAB_MAX)
		tok_bad(err, label, "more than %u tokens", ENG_TOK_VOCAB_MAX);
	else if (tok_tables_init(t, json_object_size(v), nl + 1) < 0)
		eng_err_nomem(err, "%s: out of memory", label);
	else if (load_vocab(t, v, "the vocabulary", label, err) == 0) {
		snprintf(label, sizeof label, "invalid tokenizer merges '%s/%s'", d->path,
			mn[j - 1]);
		rc = load_merges_txt(t, mb, label, err);
	}
	/* GPT-2's end of text is a special token, as Hugging Face's GPT2Tokenizer has it */
	uint32_t eot = rc ? ENG_TOK_NONE : eng_tok_id(t, "<|endoftext|>");
	if (rc || tok_conf_bytelevel(&t->pre, 1, err) < 0 ||
	    tok_conf_bytelevel(&t->dec, 0, err) < 0)
		goto fail;
	t->added = calloc(1, sizeof *t->added);
	if (!t->added || (eot != ENG_TOK_NONE && !(t->added[0].text = strdup("<|endoftext|>")))) {
		eng_err_nomem(err, "%s: out of memory", label);
		goto fail;
	}
	if (eot != ENG_TOK_NONE)
		t->added[t->n_added++] = (tok_added){ t->added[0].text, 13, eot, 0, 0, 0, 1 };
	if (tok_model_finish(t, err) < 0)
		goto fail;
	goto out;
fail:
	eng_tok_free(t);
	t = NULL;
out:
	json_decref(v);
	free(vb);
	free(mb);
	return t;
}

/* tokenizer_config.json's bos_token or eos_token: a string or {"content": string}. */
static int config_end(eng_tok *t, json_t *cfg, const char *key, uint32_t *id,
	const char *label, eng_err *err)
{
	json_t *v = json_object_get(cfg, key);
	if (!v || json_is_null(v))
		return 0;
	if (json_is_object(v))
		v = json_object_get(v, "content");
	if (!json_is_string(v))
		return tok_bad(err, label, "%s is not a string or {\"content\": string}", key);
	*id = eng_tok_id(t, json_string_value(v));
	return 0;
}

/* BOS and EOS from d/tokenizer_config.json when it is there, else by their usual names. */
static int load_config(eng_tok *t, const eng_dir *d, eng_err *err)
{
	char *buf = NULL, label[LABEL_LEN];
	size_t len;
	json_t *cfg = NULL;
	int rc = read_at(d, "tokenizer_config.json", &buf, &len, err);
	if (rc == 1)
		rc = 0;
	snprintf(label, sizeof label, "invalid tokenizer config '%s/tokenizer_config.json'",
		d->path);
	/* its model_max_length is often 1e30 written as an integer: read numbers as reals */
	if (buf && (parse_json(buf, len, JSON_DECODE_INT_AS_REAL, label, &cfg, err) < 0 ||
		    config_end(t, cfg, "bos_token", &t->bos, label, err) < 0 ||
		    config_end(t, cfg, "eos_token", &t->eos, label, err) < 0))
		rc = -1;
	if (!buf)
		default_ends(t);
	json_decref(cfg);
	free(buf);
	return rc;
}

eng_tok *eng_tok_load(const char *path, eng_err *err)
{
	eng_dir d = { .fd = -1 };
	char name[ENG_FS_PATH_LEN], *buf = NULL;
	size_t len;
	eng_tok *t = NULL;
	/* a directory holding tokenizer.json, or a tokenizer.json by any name in one */
	if (eng_dir_open_file_or_dir(&d, path, name, sizeof name, err) < 0)
		return NULL;
	int is_dir = !name[0];
	if (is_dir)
		snprintf(name, sizeof name, "tokenizer.json");
	int rc = read_at(&d, name, &buf, &len, err);
	if (rc == 1 && is_dir)
		t = load_gpt2(&d, err);
	else if (rc == 0) {
		char full[2 * ENG_FS_PATH_LEN + 2];
		snprintf(full, sizeof full, "%s/%s", d.path, name);
		t = eng_tok_parse(buf, len, full, err);
	}
	if (t && load_config(t, &d, err) < 0) {
		eng_tok_free(t);
		t = NULL;
	}
	free(buf);
	eng_dir_close(&d);
	return t;
}

int eng_tok_present(const char *dir)
{
	eng_dir d;
	eng_err quiet;
	struct stat st;
	if (eng_dir_open(&d, dir, &quiet) < 0)
		return 0;
	int here = fstatat(d.fd, "tokenizer.json", &st, 0) == 0 ||
		(fstatat(d.fd, "vocab.json", &st, 0) == 0 &&
			fstatat(d.fd, "merges.txt", &st, 0) == 0);
	eng_dir_close(&d);
	return here;
}
