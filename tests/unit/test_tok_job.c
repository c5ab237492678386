/* test_tok_job.c - a job's tokenizer, suite "tokjob": data.tokenizer (or init_from's
 * directory) is loaded with the job, refused when it has more ids than the model, and its
 * files ride in every checkpoint as Hugging Face names them (byte for byte, in the
 * checkpoint's checksums); samples, during a run and from a checkpoint, come out as its
 * text. The tokenizer here is a byte-level BPE of GPT-2's 256 byte symbols and no merges,
 * so a byte model's token ids are its ids. */
#include "tests.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_ckpt.h"
#include "eng_data.h"
#include "eng_tok.h"
#include "t_util.h"

#define GPL "/usr/share/common-licenses/GPL-3"

static void byte_tokenizer(const char *dir, int extra)
{
	t_byte_tokenizer(dir, extra, 0);
}

/* A tiny byte model's spec on the GPL's bytes, saving into save, with an extra key of
 * model (init_from: no preset then) or of data. */
static void job(eng_trainer *tr, const char *save, const char *extra)
{
	int init = strstr(extra, "init_from") != NULL;
	t_trainer(tr, "{\"model\":{%s%s},\"data\":{\"train\":\"" GPL "\","
		      "\"format\":\"bytes\"%s},\"batch\":2,\"seq_len\":32,\"steps\":4,"
		      "\"threads\":2,\"save\":{\"dir\":\"%s\"}}",
		init ? "" : "\"preset\":\"tiny\"", init ? extra + 1 : "", init ? "" : extra, save);
}

/* d/name's bytes equal path's */
static void same_file(const char *d, const char *name, const char *path)
{
	char p[1200];
	size_t n1, n2;
	snprintf(p, sizeof p, "%s/%s", d, name);
	char *a = t_read_file(p, &n1), *b = t_read_file(path, &n2);
	ck_assert_msg(n1 == n2 && memcmp(a, b, n1) == 0, "%s differs from %s", p, path);
	free(a);
	free(b);
}

START_TEST(test_tokjob_checkpoint_carries_it)
{
	char *dir = t_tmp_dir("tokjob"), save[1100], ckpt[1300], extra[1400], src[1100];
	char cfg[1100], *out;
	byte_tokenizer(dir, 0);
	snprintf(save, sizeof save, "%s/save", dir);
	snprintf(extra, sizeof extra, ",\"tokenizer\":\"%s\"", dir);
	eng_trainer tr;
	eng_err err;
	job(&tr, save, extra);
	ck_assert_ptr_nonnull(tr.tok);
	ck_assert_str_eq(tr.tokenizer, dir);
	t_save(&tr, ckpt, sizeof ckpt);
	eng_trainer_free(&tr);
	/* the files as the run read them, in the checkpoint's checksums */
	snprintf(src, sizeof src, "%s/tokenizer.json", dir);
	snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
	same_file(ckpt, "tokenizer.json", src);
	same_file(ckpt, "tokenizer_config.json", cfg);
	ck_assert_msg(eng_ckpt_verify(ckpt, &err) == 0, "%s", err.msg);
	size_t n;
	char p[1400], *state = t_read_file((snprintf(p, sizeof p, "%s/trainer_state.json", ckpt),
		p), &n);
	ck_assert_msg(strstr(state, "\"tokenizer.json\"") && strstr(state,
		"\"tokenizer_config.json\"") && !strstr(state, "merges.txt"), "%s", state);
	free(state);
	/* from the checkpoint: its tokenizer by default, and --sample speaks text */
	snprintf(extra, sizeof extra, ",\"init_from\":\"%s\"", ckpt);
	job(&tr, save, extra);
	ck_assert_str_eq(tr.tokenizer, ckpt);
	eng_trainer_free(&tr);
	const char *args[] = {"--sample", ckpt, "--prompt", "Free software", "--tokens", "8",
		"--temperature", "0", "--json", NULL};
	ck_assert_msg(t_train_run(&out, 0, args) == 0, "%s", out);
	json_t *o = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
	const char *text = json_string_value(json_object_get(o, "text"));
	ck_assert_msg(text && strncmp(text, "Free software", 13) == 0 &&
		json_array_size(json_object_get(o, "prompt")) == 13 &&
		json_array_size(json_object_get(o, "tokens")) == 8, "%s", out);
	json_decref(o);
	free(out);
	/* a checkpoint whose tokenizer changed since it was saved does not verify */
	snprintf(p, sizeof p, "%s/tokenizer_config.json", ckpt);
	t_write_file(p, "{}", 2);
	ck_assert_int_eq(eng_ckpt_verify(ckpt, &err), -1);
	ck_assert_msg(strstr(err.msg, "tokenizer_config.json"), "%s", err.msg);
	free(dir);
}
END_TEST

/* More ids than the model has: refused at the start, naming both counts. */
START_TEST(test_tokjob_too_many_ids)
{
	char *dir = t_tmp_dir("tokjob"), spec[2000];
	byte_tokenizer(dir, 3);
	snprintf(spec, sizeof spec, "{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\""
		GPL "\",\"format\":\"bytes\",\"tokenizer\":\"%s\"},\"steps\":1}", dir);
	eng_spec s;
	eng_trainer tr;
	eng_err err;
	ck_assert_msg(eng_spec_parse(&s, spec, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(eng_trainer_init(&tr, &s, &err), -1);
	ck_assert_msg(strstr(err.msg, "has 259 ids, more than the model's vocab_size 256"), "%s",
		err.msg);
	free(dir);
}
END_TEST

/* A sample during a run: its text through the tokenizer, in the SAMPLE row remat-train
 * --json prints and in metrics.jsonl's SAMPLE line (what rematctl logs shows). */
START_TEST(test_tokjob_sample_text)
{
	char *dir = t_tmp_dir("tokjob"), spec[2000], path[1100], *out;
	byte_tokenizer(dir, 0);
	snprintf(spec, sizeof spec, "{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\""
		GPL "\",\"format\":\"bytes\",\"tokenizer\":\"%s\"},\"batch\":2,\"seq_len\":32,"
		"\"steps\":2,\"threads\":2,\"sample\":{\"tokens\":6,\"prompt\":\"GNU\","
		"\"temperature\":0}}", dir);
	snprintf(path, sizeof path, "%s/job.json", dir);
	t_write_file(path, spec, strlen(spec));
	char mx[1100];
	snprintf(mx, sizeof mx, "%s/metrics.jsonl", dir);
	const char *args[] = {"--json", "--metrics", mx, path, NULL};
	ck_assert_msg(t_train_run(&out, 0, args) == 0, "%s", out);
	char *line = strstr(out, "\"prompt\"");
	ck_assert_msg(line && strstr(line, "\"text\""), "%s", out);
	free(out);
	size_t n;
	out = t_read_file(mx, &n);
	line = strstr(out, "{\"event\":\"SAMPLE\",\"step\":2,");
	ck_assert_msg(line && strstr(line, "\"text\":\""), "%s", out);
	free(out);
	free(dir);
}
END_TEST

/* remat-train --tokenize: JSON Lines documents, each begun by the EOS (no BOS here), into
 * llm.c's uint16 file, the same bytes on 1 and 3 threads, which the data reader takes; a
 * line without the field is refused naming it, and leaves no file behind. */
START_TEST(test_tokjob_tokenize)
{
	char *dir = t_tmp_dir("tokjob"), corpus[1100], out[2][1100], *msg;
	t_byte_tokenizer(dir, 1, 1);
	snprintf(corpus, sizeof corpus, "%s/c.jsonl", dir);
	const char *text = "{\"text\": \"ab\"}\n\n{\"text\": \"\", \"id\": 2}\n"
			   "{\"body\": 1, \"text\": \"c d\"}\n";
	t_write_file(corpus, text, strlen(text));
	/* a hard link where the file is first written: refused, left as it was, never
	 * removed or written through */
	char other[1100], tmp0[1200];
	snprintf(other, sizeof other, "%s/other", dir);
	snprintf(tmp0, sizeof tmp0, "%s/t0.bin.tmp", dir);
	t_write_file(other, "keep", 4);
	ck_assert_int_eq(link(other, tmp0), 0);
	snprintf(out[0], sizeof out[0], "%s/t0.bin", dir);
	const char *linked[] = {"--tokenize", dir, out[0], "--jsonl", corpus, NULL};
	ck_assert_int_eq(t_train_run(&msg, 1, linked), 1);
	ck_assert_msg(strstr(msg, "refusing to remove 't0.bin.tmp'") && strstr(msg,
		"hard link"), "%s", msg);
	free(msg);
	ck_assert_int_eq(unlink(tmp0), 0);
	for (int k = 0; k < 2; k++) {
		snprintf(out[k], sizeof out[k], "%s/t%d.bin", dir, k);
		const char *args[] = {"--tokenize", dir, out[k], "--jsonl", "--threads",
			k ? "3" : "1", corpus, NULL};
		ck_assert_msg(t_train_run(&msg, 1, args) == 0, "%s", msg);
		free(msg);
	}
	size_t n, n2;
	unsigned char *a = (unsigned char *)t_read_file(out[0], &n);
	char *b = t_read_file(out[1], &n2);
	static const uint16_t want[] = {256, 'a', 'b', 256, 256, 'c', ' ', 'd'};
	int32_t hdr[3];
	memcpy(hdr, a, sizeof hdr);
	ck_assert(n == n2 && memcmp(a, b, n) == 0 && n == 1024 + sizeof want);
	ck_assert(hdr[0] == 20240520 && hdr[1] == 1 && hdr[2] == 8);
	ck_assert(memcmp(a + 1024, want, sizeof want) == 0); /* little-endian */
	free(a);
	free(b);
	a = (unsigned char *)t_read_file(other, &n);
	ck_assert(n == 4 && memcmp(a, "keep", 4) == 0);
	free(a);
	eng_data d;
	eng_err err;
	uint32_t inp[3], tgt[3];
	ck_assert_msg(eng_data_open(&d, out[0], ENG_DATA_LLMC, 257, 1, 3, &err) == 0, "%s",
		err.msg);
	t_next(&d, inp, tgt);
	ck_assert(inp[0] == 256 && inp[1] == 'a' && tgt[2] == 256);
	eng_data_close(&d);
	/* a line without the text: refused by its number, nothing left at OUT */
	text = "{\"text\": \"ok\"}\n{\"txt\": \"no\"}\n";
	t_write_file(corpus, text, strlen(text));
	unlink(out[0]);
	const char *bad[] = {"--tokenize", dir, out[0], "--jsonl", corpus, NULL};
	ck_assert_int_eq(t_train_run(&msg, 1, bad), 1);
	ck_assert_msg(strstr(msg, "line 2: not a JSON object with a string at 'text'"), "%s",
		msg);
	free(msg);
	struct stat st;
	char tmp[1200];
	snprintf(tmp, sizeof tmp, "%s.tmp", out[0]);
	ck_assert(stat(out[0], &st) < 0 && stat(tmp, &st) < 0);
	free(dir);
}
END_TEST

Suite *suite_tokjob(void)
{
	Suite *s = suite_create("tokjob");
	TCase *tc = tcase_create("tokjob");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_tokjob_checkpoint_carries_it);
	tcase_add_test(tc, test_tokjob_too_many_ids);
	tcase_add_test(tc, test_tokjob_sample_text);
	tcase_add_test(tc, test_tokjob_tokenize);
	suite_add_tcase(s, tc);
	return s;
}
