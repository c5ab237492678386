/* test_timing.c - the step timing (eng_timing.h, remat-train --timing):
 *  - it changes nothing: a run with it gives the bits of a run without;
 *  - every kernel is counted once, in its class: a steady step of GPT-2 and of a Llama
 *    makes each linear layer's three products, attention both ways and the norms L times
 *    (the head's per chunk), one AdamW, one batch; each product's FLOPs are its shape's;
 *  - a recompute is one region a block, its products left out of the product rows;
 *  - the classes fit inside the step, and leave little of it unaccounted;
 *  - the table (eng_timing_report) holds every row against a limit it measured. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_timing.h"
#include "t_util.h"
#include "tests.h"

#define GPL "/usr/share/common-licenses/GPL-3"
#define STEPS 4
#define L 3
#define OFF "\"default\":\"off\""
#define FULL "\"default\":\"full\",\"sections\":{\"head\":\"chunked\"}"

/* 3 layers, C 48, batch 2 x 32 in chunks of 20 rows (4 chunks, the last short) */
static void trainer(eng_trainer *tr, int llama, const char *remat)
{
	t_trainer(tr, "{\"model\":{\"n_layer\":%d,\"n_embd\":48,\"n_head\":4,\"n_positions\":64%s},"
		      "\"data\":{\"train\":\"" GPL "\",\"format\":\"bytes\"},\"batch\":2,"
		      "\"seq_len\":32,\"steps\":%d,\"threads\":2,\"seed\":7,"
		      "\"optim\":{\"grad_clip\":0.5},"
		      "\"remat\":{\"chunk_rows\":20,%s}}", L,
		llama ? ",\"arch\":\"llama\",\"n_kv_head\":2,\"intermediate_size\":72" : "", STEPS,
		remat);
}

static void steps(eng_trainer *tr, int n)
{
	eng_step_stats st;
	eng_err err;
	for (int i = 0; i < n; i++)
		ck_assert_msg(eng_trainer_step_as(tr, NULL, &st, &err) == 0, "%s", err.msg);
}

/* A trainer of `remat` with its timing, STEPS steps on: the timing */
static eng_timing *timed(eng_trainer *tr, int llama, const char *remat)
{
	eng_timing *p = calloc(1, sizeof *p);
	ck_assert(p != NULL);
	trainer(tr, llama, remat);
	tr->model.timing = p;
	steps(tr, STEPS);
	return p;
}

/* Calls of class c per steady step */
static double per_step(const eng_timing *p, int c)
{
	return p->sum[c].calls / p->steps;
}

START_TEST(test_timing_changes_no_bit)
{
	eng_trainer a, b;
	trainer(&a, _i, OFF);
	steps(&a, STEPS);
	eng_timing *p = timed(&b, _i, OFF);
	ck_assert_int_eq(p->steps, STEPS - 1); /* the first is left out */
	ck_assert(memcmp(a.model.params, b.model.params, a.model.nfloats * 4) == 0);
	ck_assert(memcmp(a.model.m, b.model.m, a.model.ngrad * 4) == 0);
	eng_trainer_free(&a);
	eng_trainer_free(&b);
}
END_TEST

START_TEST(test_timing_counts_each_kernel_once)
{
	eng_trainer tr;
	eng_timing *p = timed(&tr, _i, OFF);
	const eng_model *m = &tr.model;
	for (int i = 0; i < 12; i++) { /* the linear layers' products, one a block each */
		const kn_mm *q = &m->prod[i].mm;
		ck_assert_msg(per_step(p, i) == L, "%s: %g calls", m->prod[i].name, per_step(p, i));
		ck_assert_double_eq_tol(p->sum[i].flops / p->steps, 2.0 * q->M * q->N * q->K * L,
			1);
	}
	/* 64 rows in chunks of 20: three full ones and a short one */
	ck_assert_double_eq(per_step(p, 12), 3);
	ck_assert_double_eq(per_step(p, 15), 1);
	ck_assert_double_eq(per_step(p, ENG_TIMING_ATTN_FWD), L);
	ck_assert_double_eq(per_step(p, ENG_TIMING_ATTN_BWD), L);
	ck_assert_double_eq(per_step(p, ENG_TIMING_NORM_FWD), 2 * L + 1); /* ln_f */
	ck_assert_double_eq(per_step(p, ENG_TIMING_NORM_BWD), 2 * L + 1);
	ck_assert_double_eq(per_step(p, ENG_TIMING_LOSS), 4);
	ck_assert_double_eq(per_step(p, ENG_TIMING_OPT), 1);
	ck_assert_double_eq(per_step(p, ENG_TIMING_DATA), 1);
	ck_assert_double_eq(per_step(p, ENG_TIMING_RECOMPUTE), 0);
	/* the norm (the clip's scale is AdamW's) */
	ck_assert_double_eq(per_step(p, ENG_TIMING_CLIP), 1);
	double classes = 0;
	for (int c = 0; c < ENG_TIMING_N; c++)
		classes += p->sum[c].s * 1e3;
	ck_assert_msg(classes <= p->step_ms && classes >= 0.5 * p->step_ms,
		"classes %.3f ms of steps %.3f ms", classes, p->step_ms);
	eng_trainer_free(&tr);
}
END_TEST

/* Under full, each block's recompute is one region holding its forward's products; the
 * product rows keep the forward's and the backward's only */
START_TEST(test_timing_recompute_is_one_region)
{
	eng_trainer tr;
	eng_timing *p = timed(&tr, _i, FULL);
	ck_assert_double_eq(per_step(p, 0), L);
	ck_assert_double_eq(per_step(p, 12), 3);
	ck_assert_double_eq(per_step(p, ENG_TIMING_ATTN_FWD), L);
	/* a block each, and the head's four chunks of logits rebuilt */
	ck_assert_double_eq(per_step(p, ENG_TIMING_RECOMPUTE), L + 4);
	double fwd = 0;
	for (int i = 0; i < 12; i += 3)
		fwd += p->sum[i].flops;
	ck_assert_msg(p->sum[ENG_TIMING_RECOMPUTE].flops > 0.5 * fwd, "recompute %g FLOPs, "
		"forward products %g", p->sum[ENG_TIMING_RECOMPUTE].flops, fwd);
	ck_assert(strstr(p->policy, "full") != NULL);
	eng_trainer_free(&tr);
}
END_TEST

START_TEST(test_timing_report_holds_rows_to_limits)
{
	eng_trainer tr;
	eng_err err;
	eng_timing *p = calloc(1, sizeof *p);
	char *text = NULL, *js = NULL;
	size_t tn = 0, jn = 0;
	trainer(&tr, 0, OFF);
	tr.model.timing = p;
	ck_assert_int_eq(eng_timing_report(p, &tr.model, NULL, NULL, &err), -1);
	ck_assert_msg(strstr(err.msg, "no steady step") != NULL, "%s", err.msg);
	steps(&tr, STEPS);
	FILE *ft = open_memstream(&text, &tn), *fj = open_memstream(&js, &jn);
	ck_assert_int_eq(eng_timing_report(p, &tr.model, ft, fj, &err), 0);
	fclose(ft);
	fclose(fj);
	ck_assert(strstr(text, "where the time goes") && strstr(text, "qkv fwd") &&
		  strstr(text, "unaccounted") && strstr(text, "AdamW"));
	json_error_t je;
	json_t *o = json_loads(js, 0, &je), *pr = json_object_get(o, "timing");
	ck_assert_msg(pr != NULL, "%s", js);
	ck_assert_int_eq(json_integer_value(json_object_get(pr, "steps")), STEPS - 1);
	ck_assert(json_number_value(json_object_get(pr, "ceiling_gflops")) > 0);
	ck_assert_int_eq(json_array_size(json_object_get(pr, "bandwidth")), 4);
	size_t i;
	json_t *row;
	int products = 0;
	json_array_foreach(json_object_get(pr, "classes"), i, row) {
		const char *by = json_string_value(json_object_get(row, "limit_by"));
		const char *name = json_string_value(json_object_get(row, "name"));
		double lim = json_number_value(json_object_get(row, "limit_ms"));
		ck_assert(json_number_value(json_object_get(row, "ms")) >= 0);
		if (!strcmp(name, "data"))
			continue; /* no limit here */
		ck_assert_msg(lim > 0 && by[0], "%s: limit %g by '%s'", name, lim, by);
		products += !strcmp(by, "alone");
	}
	ck_assert_int_eq(products, 12 + 6); /* every product, both chunk sizes */
	json_decref(o);
	free(text);
	free(js);
	eng_trainer_free(&tr);
}
END_TEST

Suite *suite_timing(void)
{
	Suite *s = suite_create("timing");
	TCase *tc = tcase_create("timing");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_timing_changes_no_bit, 0, 2);
	tcase_add_loop_test(tc, test_timing_counts_each_kernel_once, 0, 2);
	tcase_add_loop_test(tc, test_timing_recompute_is_one_region, 0, 2);
	tcase_add_test(tc, test_timing_report_holds_rows_to_limits);
	suite_add_tcase(s, tc);
	return s;
}
