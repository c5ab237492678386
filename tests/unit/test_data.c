/* test_data.c - the data order: llm.c's shuffled and unshuffled sample orders, against the
 * indices llm.c's own DataLoader printed for a small file (tests/data/llmc_shuffle, its
 * README has the commands), MT19937 against its published outputs, a position taken and
 * sought back (what a failed step and a resume do) giving the same batches; and the rest of
 * a run's history in trainer_state.json, rematctl set's changes, checked on the way back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
		eng_data_next(d, inp, tgt);
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
			eng_data_next(&d, inp, tgt);
		eng_data_pos pos = d.pos;
		for (int i = 0; i < 80; i++) {
			seen[i] = eng_data_next_sample(&d);
			eng_data_next(&d, inp, tgt);
		}
		eng_data_seek(&d, &pos);
		for (int i = 0; i < 80; i++) {
			ck_assert_uint_eq(eng_data_next_sample(&d), seen[i]);
			eng_data_next(&d, inp, tgt);
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
	suite_add_tcase(s, tc);
	return s;
}
