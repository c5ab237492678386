/* test_data.c - the data order: llm.c's shuffled and unshuffled sample orders, against the
 * indices llm.c's own DataLoader printed for a small file (tests/data/llmc_shuffle, its
 * README has the commands), MT19937 against its published outputs, a position taken and
 * sought back (what a failed step and a resume do) giving the same batches; and the rest of
 * a run's history in trainer_state.json, rematctl set's changes, checked on the way back. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng_data.h"
#include "eng_hparam.h"
#include "eng_mem.h"
#include "eng_state_json.h"
#include "eng_train.h"
#include "t_util.h"
#include "tests.h"

/* tokens.bin holds 1000 tokens, token i = i: a batch's first input is its offset. */
#define SHUF_VOCAB 1000

static void open_tokens(eng_data *d, int B, int T)
{
	char *path = t_data("llmc_shuffle/tokens.bin");
	eng_err err;
	ck_assert_msg(eng_data_open(d, path, ENG_DATA_LLMC, SHUF_VOCAB, B, T, &err) == 0, "%s",
		err.msg);
	free(path);
}

/* Every line of expected (batch sample first_token) against the batches d serves. */
static void check_against(eng_data *d, const char *expected)
{
	char *path = t_data(expected);
	FILE *f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	size_t n = (size_t)d->B * d->T;
	uint32_t *inp = malloc(n * sizeof *inp), *tgt = malloc(n * sizeof *tgt);
	char line[256];
	int lines = 0;
	while (fgets(line, sizeof line, f)) {
		long b, idx, first;
		if (line[0] == '#')
			continue;
		ck_assert_msg(sscanf(line, "%ld %ld %ld", &b, &idx, &first) == 3, "%s: '%s'",
			expected, line);
		ck_assert_int_eq(b, lines);
		ck_assert_msg(eng_data_next_sample(d) == (size_t)idx, "%s: batch %ld: sample %zu, "
			"llm.c read %ld", expected, b, eng_data_next_sample(d), idx);
		t_next(d, inp, tgt);
		ck_assert_int_eq(inp[0], first);
		ck_assert_int_eq(tgt[n - 1], first + (long)n); /* B*T+1 tokens, shifted by one */
		lines++;
	}
	ck_assert_int_gt(lines, 30);
	fclose(f);
	free(inp);
	free(tgt);
	free(path);
}

START_TEST(test_data_shuffle_is_llmc)
{
	static const struct { int B, T; const char *file; } cases[] = {
		{2, 16, "llmc_shuffle/expected_B2_T16.txt"},
		{3, 7, "llmc_shuffle/expected_B3_T7.txt"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		eng_data d;
		eng_err err;
		open_tokens(&d, cases[i].B, cases[i].T);
		ck_assert_msg(eng_data_shuffle(&d, 42, &err) == 0, "%s", err.msg);
		check_against(&d, cases[i].file);
		ck_assert_int_eq(d.pos.epoch, 3); /* three epochs and five batches */
		eng_data_close(&d);
	}
}
END_TEST

START_TEST(test_data_file_order_is_llmc)
{
	eng_data d;
	open_tokens(&d, 2, 16);
	check_against(&d, "llmc_shuffle/expected_noshuffle_B2_T16.txt");
	eng_data_close(&d);
	open_tokens(&d, 3, 7);
	check_against(&d, "llmc_shuffle/expected_noshuffle_B3_T7.txt");
	eng_data_close(&d);
}
END_TEST

/* The published check values: std::mt19937 seeded 5489 gives 3499211612 first and
 * 4123659995 as its 10000th output (C++11 [rand.predef]); llm.c's seed 42 starts with
 * 1608637542. */
START_TEST(test_data_mt19937)
{
	eng_mt g;
	eng_mt_seed(&g, 5489);
	ck_assert_uint_eq(eng_mt_next(&g), 3499211612u);
	uint32_t x = 0;
	for (int i = 1; i < 10000; i++)
		x = eng_mt_next(&g);
	ck_assert_uint_eq(x, 4123659995u);
	eng_mt_seed(&g, 42);
	ck_assert_uint_eq(eng_mt_next(&g), 1608637542u);
}
END_TEST

/* A position taken mid-epoch and one taken just before an epoch's end, sought back after
 * the run has gone on (across a reshuffle), serve the same batches again. */
START_TEST(test_data_seek_back)
{
	eng_data d;
	eng_err err;
	open_tokens(&d, 2, 16);
	ck_assert_msg(eng_data_shuffle(&d, 7, &err) == 0, "%s", err.msg);
	uint32_t inp[32], tgt[32];
	size_t seen[80];
	for (int at = 0; at < 2; at++) {
		int skip = at ? 29 : 10; /* 31 samples an epoch: 29 is two before its end */
		for (int i = 0; i < skip; i++)
			t_next(&d, inp, tgt);
		eng_data_pos pos = d.pos;
		for (int i = 0; i < 80; i++) {
			seen[i] = eng_data_next_sample(&d);
			t_next(&d, inp, tgt);
		}
		eng_data_seek(&d, &pos);
		for (int i = 0; i < 80; i++) {
			ck_assert_uint_eq(eng_data_next_sample(&d), seen[i]);
			t_next(&d, inp, tgt);
			ck_assert_uint_eq(inp[0], seen[i] * 32);
		}
	}
	eng_data_close(&d);
}
END_TEST

/* trainer_state.json's "live" (what rematctl set changed) round-trips, and a value job-set
 * would refuse, or a schedule from past the checkpoint's step, is refused on the way back. */
START_TEST(test_data_live_state)
{
	eng_spec a, b;
	eng_err err;
	ck_assert(eng_spec_parse(&a, "{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"t\"}}",
		&err) == 0);
	b = a;
	a.live.set = ENG_HP_LR | ENG_HP_GRAD_CLIP | ENG_HP_EVAL_EVERY;
	a.live.lr_from = 7;
	a.live.lr_kind = ENG_SCHED_COSINE;
	a.live.lr_new = 2e-3f;
	a.live.lr_warmup = 3;
	a.live.lr_min_frac = 0.2f;
	a.grad_clip = 0.5f;
	a.eval_every = 40;
	json_t *given = json_loads("{\"lr\":0.002,\"schedule\":\"cosine\",\"warmup\":3}", 0,
		NULL);
	ck_assert_int_eq(eng_hparam_change(given, 8, &a.live.changes[0], &err), 0);
	a.live.n_changes = 1;
	json_decref(given);
	json_t *live = eng_state_live_json(&a);
	ck_assert_int_eq(eng_state_live_parse(live, 10, &b), 0);
	const eng_live *la = &a.live, *lb = &b.live;
	ck_assert(lb->set == la->set && lb->lr_from == 7 && lb->lr_kind == ENG_SCHED_COSINE);
	ck_assert(lb->lr_new == la->lr_new && lb->lr_warmup == 3 &&
		lb->lr_min_frac == la->lr_min_frac);
	ck_assert(b.grad_clip == 0.5f && b.eval_every == 40 && b.live.n_changes == 1 &&
		memcmp(&b.live.changes[0], &a.live.changes[0], sizeof a.live.changes[0]) == 0);
	for (int k = 1; k < 1000; k++)
		ck_assert(eng_lr_at(&a, k) == eng_lr_at(&b, k));
	ck_assert_int_eq(eng_state_live_parse(live, 6, &b), -1); /* from 7, past step 6 */
	/* under job-set's names; a state written before (eval_every, save_every) resumes to
	 * the same values */
	json_t *set = json_object_get(live, "set");
	ck_assert_int_eq(json_integer_value(json_object_get(set, "eval.every")), 40);
	ck_assert_ptr_null(json_object_get(set, "eval_every"));
	json_t *old = json_loads("{\"set\":{\"eval_every\":40,\"save_every\":9,"
		"\"grad_clip\":0.5},\"changes\":[]}", 0, NULL);
	eng_spec c = b;
	c.live.set = 0;
	c.eval_every = c.save_every = 0;
	ck_assert_int_eq(eng_state_live_parse(old, 10, &c), 0);
	ck_assert_int_eq(c.live.set, ENG_HP_EVAL_EVERY | ENG_HP_SAVE_EVERY | ENG_HP_GRAD_CLIP);
	ck_assert(c.eval_every == 40 && c.save_every == 9 && c.grad_clip == 0.5f);
	json_decref(old);
	old = json_loads("{\"set\":{\"save_every\":-2}}", 0, NULL); /* still checked */
	ck_assert_int_eq(eng_state_live_parse(old, 10, &c), -1);
	json_decref(old);
	static const char *const bad[] = {"{\"set\":{\"grad_clip\":-1}}",
		"{\"set\":{\"eval_every\":\"x\"}}", "{\"set\":{\"lr\":{\"from\":0,\"kind\":\"linear\","
		"\"lr\":0.1,\"warmup\":0,\"min_lr_frac\":0}}}", "{\"set\":{\"lr\":{\"from\":0,"
		"\"kind\":\"cosine\",\"lr\":-0.1,\"warmup\":0,\"min_lr_frac\":0}}}", "{\"set\":5}",
		/* the history: a set past the checkpoint's next step, an unknown name, no list */
		"{\"set\":{},\"changes\":[{\"step\":12,\"set\":{\"lr\":0.1}}]}",
		"{\"set\":{},\"changes\":[{\"step\":3,\"set\":{\"momentum\":1}}]}",
		"{\"set\":{},\"changes\":{}}"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		json_t *o = json_loads(bad[i], 0, NULL);
		ck_assert_ptr_nonnull(o);
		ck_assert_msg(eng_state_live_parse(o, 10, &b) == -1, "accepted %s", bad[i]);
		json_decref(o);
	}
	json_decref(live);
}
END_TEST

/* The live hyperparameters' table: every row of proto's has its field, each value written
 * through it reads back, and what job-set changed is listed under job-set's names. */
START_TEST(test_data_hparam_table)
{
	eng_spec s;
	eng_err err;
	ck_assert(eng_spec_parse(&s, "{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"t\"}}",
		&err) == 0);
	static const char *const vals[PROTO_HP_COUNT] = {"0.25", "\"constant\"", "12", "0.5", "2.0",
		"0.75", "7", "11"};
	for (int h = 0; h < PROTO_HP_COUNT; h++) {
		const eng_hparam_field *f = eng_hparam_field_of((proto_hparam)h);
		ck_assert_msg(f->set != 0 && f->offset < sizeof s, "%s has no field",
			proto_hparam_name((proto_hparam)h));
		json_t *v = json_loads(vals[h], JSON_DECODE_ANY, NULL);
		ck_assert_int_eq(eng_hparam_put(&s, (proto_hparam)h, v, &err), 0);
		json_t *back = eng_hparam_get(&s, (proto_hparam)h);
		ck_assert_msg(json_equal(v, back), "%s: %s read back otherwise",
			proto_hparam_name((proto_hparam)h), vals[h]);
		json_decref(back);
		json_decref(v);
	}
	ck_assert(s.live.lr_new == 0.25f && s.live.lr_kind == ENG_SCHED_CONSTANT &&
		s.live.lr_warmup == 12 &&
		s.grad_clip == 2.0f && s.eval_every == 7 && s.save_every == 11);
	json_t *bad = json_real(11); /* lr at most 10: proto's limit */
	ck_assert_int_eq(eng_hparam_put(&s, PROTO_HP_LR, bad, &err), -1);
	ck_assert(s.live.lr_new == 0.25f);
	json_decref(bad);
	s.live.set = ENG_HP_EVAL_EVERY;
	json_t *ch = eng_hparam_changed(&s);
	ck_assert_int_eq(json_object_size(ch), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(ch, "eval.every")), 7);
	json_decref(ch);
}
END_TEST

/* ---- token files: llm.c's two formats, files past 4G tokens, bad files under a run ---- */

/* A token file at REMAT_TMP/name: llm.c's header (magic, version, count low and high
 * words), then n tokens of width bytes from tok (NULL: a hole, the file sparse). */
static char *token_file(const char *name, int32_t magic, int32_t version, uint64_t n,
	int width, const uint32_t *tok)
{
	char *path = t_write_tmp(name, "");
	int32_t hdr[256] = {magic, version, (int32_t)(uint32_t)n, (int32_t)(uint32_t)(n >> 32)};
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fwrite(hdr, sizeof hdr, 1, f), 1);
	for (uint64_t i = 0; tok && i < n; i++)
		ck_assert_int_eq(fwrite(&tok[i], (size_t)width, 1, f), 1); /* little-endian */
	ck_assert_int_eq(fclose(f), 0);
	return path;
}

/* llm.c's uint32 format (Llama 3's: magic 20240801, version 7) serves the batches its
 * uint16 format serves for the same tokens, shuffled too; ids past 65,535 come back whole;
 * a version that does not go with its magic is refused naming both. */
START_TEST(test_data_llmc_u32)
{
	uint32_t tok[1000], inp[2][32], tgt[2][32];
	for (int i = 0; i < 1000; i++)
		tok[i] = (uint32_t)i;
	char *p16 = token_file("u16.bin", ENG_LLMC_MAGIC, 1, 1000, 2, tok);
	char *p32 = token_file("u32.bin", ENG_LLMC_MAGIC_U32, 7, 1000, 4, tok);
	eng_data a, b;
	eng_err err;
	ck_assert_msg(eng_data_open(&a, p16, ENG_DATA_LLMC, 1000, 2, 16, &err) == 0, "%s", err.msg);
	ck_assert_msg(eng_data_open(&b, p32, ENG_DATA_LLMC, 1000, 2, 16, &err) == 0, "%s", err.msg);
	ck_assert(a.file.width == 2 && b.file.width == 4 && b.ntok == 1000);
	ck_assert(eng_data_shuffle(&a, 3, &err) == 0 && eng_data_shuffle(&b, 3, &err) == 0);
	for (int i = 0; i < 100; i++) {
		t_next(&a, inp[0], tgt[0]);
		t_next(&b, inp[1], tgt[1]);
		ck_assert(memcmp(inp[0], inp[1], sizeof inp[0]) == 0 &&
			memcmp(tgt[0], tgt[1], sizeof tgt[0]) == 0);
	}
	eng_data_close(&a);
	eng_data_close(&b);
	for (int i = 0; i < 1000; i++)
		tok[i] = 128000u + (uint32_t)i * 7; /* Llama 3's ids run to 128,255 */
	char *big = token_file("u32big.bin", ENG_LLMC_MAGIC_U32, 7, 1000, 4, tok);
	ck_assert_msg(eng_data_open(&b, big, ENG_DATA_LLMC, 136000, 2, 16, &err) == 0, "%s",
		err.msg);
	t_next(&b, inp[1], tgt[1]);
	ck_assert(inp[1][0] == 128000u && tgt[1][31] == 128000u + 32 * 7);
	eng_data_close(&b);
	eng_data_file f;
	ck_assert_int_eq(eng_data_check(big, ENG_DATA_LLMC, 2, 16, 128500, &f, &err), -1);
	ck_assert_msg(strstr(err.msg, "token 72 is 128504"), "%s", err.msg);
	char *bad = token_file("u32v1.bin", ENG_LLMC_MAGIC_U32, 1, 1000, 4, tok);
	ck_assert_int_eq(eng_data_open(&b, bad, ENG_DATA_LLMC, 136000, 2, 16, &err), -1);
	ck_assert_msg(strstr(err.msg, "magic 20240801 has version 1") &&
		strstr(err.msg, "version 7"), "%s", err.msg);
	free(p16);
	free(p32);
	free(big);
	free(bad);
}
END_TEST

/* A model trains on llm.c's uint32 file as on its uint16 file of the same tokens: the same
 * losses, bit for bit. */
START_TEST(test_data_u32_trains_the_same)
{
	char *dir = t_data("reference/accum"), src[4200];
	snprintf(src, sizeof src, "%s/train.bin", dir);
	eng_data d;
	eng_err err;
	ck_assert_msg(eng_data_open(&d, src, ENG_DATA_LLMC, 1 << 20, 1, 1, &err) == 0, "%s",
		err.msg);
	uint32_t *tok = malloc(d.ntok * sizeof *tok);
	ck_assert_ptr_nonnull(tok);
	for (size_t at = 0; at < d.ntok; at += 2) /* at most B*T+1 = 2 tokens a read here */
		ck_assert(eng_data_read(&d, at, d.ntok - at < 2 ? 1 : 2, tok + at, &err) == 0);
	char *u32 = token_file("accum32.bin", ENG_LLMC_MAGIC_U32, 7, d.ntok, 4, tok);
	eng_data_close(&d);
	float loss[2][3];
	for (int k = 0; k < 2; k++) {
		eng_trainer tr;
		t_trainer(&tr, "{\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":\"%s\"},"
			       "\"batch\":2,\"seq_len\":24,\"steps\":3,\"threads\":2,\"seed\":37}",
			dir, k ? u32 : src);
		for (int s = 0; s < 3; s++) {
			eng_step_stats st;
			ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s",
				err.msg);
			loss[k][s] = st.loss;
		}
		eng_trainer_free(&tr);
	}
	ck_assert(memcmp(loss[0], loss[1], sizeof loss[0]) == 0);
	free(tok);
	free(u32);
	free(dir);
}
END_TEST

/* A sparse file of 2^32 + 4097 uint16 tokens (8 GiB, the count's high word 1) opens,
 * serves shuffled batches from anywhere in it, and holds a sample's buffer and the
 * permutation, not the file: the data bytes counted stay under 8 MiB and the process's
 * resident memory grows by less than that over 200 batches. Skipped, said, where this file
 * system cannot hold such a file. */
START_TEST(test_data_past_4g_tokens)
{
	uint64_t n = (1ull << 32) + 4097;
	char *path = token_file("huge.bin", ENG_LLMC_MAGIC, 1, n, 2, NULL);
	int fd = open(path, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	if (ftruncate(fd, (off_t)(1024 + 2 * n)) < 0) {
		fprintf(stderr, "data: a sparse 8 GiB token file skipped: %s\n", strerror(errno));
		close(fd);
		unlink(path);
		free(path);
		return;
	}
	close(fd);
	eng_data d;
	eng_err err;
	uint32_t inp[4096], tgt[4096];
	ck_assert_msg(eng_data_open(&d, path, ENG_DATA_LLMC, 50257, 4, 1024, &err) == 0, "%s",
		err.msg);
	ck_assert(d.ntok == n && d.nsamples == (n - 1) / 4096);
	ck_assert_msg(eng_data_shuffle(&d, 42, &err) == 0, "%s", err.msg);
	size_t held = eng_data_bytes(&d.file, 4, 1024, 1);
	ck_assert_msg(held < 8u << 20, "data holds %zu bytes", held);
	size_t rss0 = eng_mem_rss();
	for (int i = 0; i < 200; i++)
		t_next(&d, inp, tgt);
	ck_assert(inp[0] == 0 && tgt[4095] == 0);
	/* the last whole sample, past 2^32 tokens */
	ck_assert_msg(eng_data_read(&d, (d.nsamples - 1) * 4096, 4097, NULL, &err) == 0, "%s",
		err.msg);
	size_t rss1 = eng_mem_rss();
	ck_assert_msg(rss1 < rss0 + (8u << 20), "resident memory %zu -> %zu bytes", rss0, rss1);
	eng_data_close(&d);
	unlink(path);
	free(path);
}
END_TEST

/* Under a run: a token out of range fails the batch that meets it, naming the token, and
 * serves nothing (asked again, the same batch fails the same way); a file cut short fails
 * the read with a message instead of a signal. */
START_TEST(test_data_bad_under_a_run)
{
	uint32_t tok[2000], inp[32], tgt[32];
	for (int i = 0; i < 2000; i++)
		tok[i] = (uint32_t)i % 500;
	tok[40] = 700;
	char *path = token_file("badtok.bin", ENG_LLMC_MAGIC, 1, 2000, 2, tok);
	eng_data d;
	eng_err err;
	ck_assert_msg(eng_data_open(&d, path, ENG_DATA_LLMC, 500, 2, 16, &err) == 0, "%s",
		err.msg);
	t_next(&d, inp, tgt); /* tokens 0..32 */
	for (int k = 0; k < 2; k++) {
		ck_assert_int_eq(eng_data_next(&d, inp, tgt, &err), -1);
		ck_assert_msg(strstr(err.msg, "token 40 is 700, out of range for vocab_size 500"),
			"%s", err.msg);
		ck_assert_uint_eq(eng_data_next_sample(&d), 1);
	}
	ck_assert_int_eq(truncate(path, 1024 + 2 * 100), 0);
	eng_data_pos far = {.sample = 10};
	eng_data_seek(&d, &far);
	ck_assert_int_eq(eng_data_next(&d, inp, tgt, &err), -1);
	ck_assert_msg(strstr(err.msg, "the file shrank"), "%s", err.msg);
	eng_data_close(&d);
	free(path);
}
END_TEST

Suite *suite_data(void)
{
	Suite *s = suite_create("data");
	TCase *tc = tcase_create("order");
	tcase_add_test(tc, test_data_shuffle_is_llmc);
	tcase_add_test(tc, test_data_file_order_is_llmc);
	tcase_add_test(tc, test_data_mt19937);
	tcase_add_test(tc, test_data_seek_back);
	tcase_add_test(tc, test_data_live_state);
	tcase_add_test(tc, test_data_hparam_table);
	tcase_add_test(tc, test_data_llmc_u32);
	tcase_add_test(tc, test_data_u32_trains_the_same);
	tcase_add_test(tc, test_data_past_4g_tokens);
	tcase_add_test(tc, test_data_bad_under_a_run);
	suite_add_tcase(s, tc);
	return s;
}
