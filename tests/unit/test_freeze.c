/* test_freeze.c - train.freeze (frozen parameters), on the Llama and GPT-2 references:
 *  - the gradients of the trainable tensors are bit for bit those of the run that freezes
 *    nothing (the same products in the same order: freezing only leaves some out), and so
 *    the float64 reference's within the reference tests' tolerance, under every policy;
 *    among them Hugging Face's trap: everything before a checkpointed block frozen
 *    (transformers' reentrant checkpoint gives such a block no gradient at all without
 *    enable_input_require_grads());
 *  - frozen tensors have no gradient and no moments: the accounting holds exactly the
 *    trainable tensors' floats, and their weights never move;
 *  - a checkpoint holds no moments for them, says which they are, and resumes bit for bit
 *    with the same train.freeze only;
 *  - what train.freeze cannot mean is refused, naming the item. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "eng_ckpt.h"
#include "eng_mem.h"
#include "t_util.h"
#include "tests.h"

#define TIMEOUT 60

/* A reference case and what it is frozen to */
typedef struct freeze_case {
	const char *dir;      /* under reference/ */
	int B, T;
	const char *freeze;   /* train.freeze's JSON list */
	const char *policy;   /* remat.default and sections, as JSON members */
} freeze_case;

static const freeze_case cases[] = {
	/* the trap: embed and h.0 frozen, the checkpointed h.1 after them */
	{"llama", 2, 24, "[\"embed\", \"h.0\"]", "\"sections\": {\"h.1\": \"full\"}"},
	{"llama", 2, 24, "[\"embed\", \"h.0\"]", "\"default\": \"full\", \"sections\": "
		"{\"head\": \"chunked\"}"},
	{"llama", 2, 24, "[\"*.self_attn.*\", \"head\"]", "\"default\": \"selective\""},
	{"llama", 2, 24, "[\"embed\", \"h.1\", \"model.layers.0.mlp.down_proj.weight\"]",
		"\"sections\": {\"h.0\": \"full\", \"head\": \"chunked\"}"},
	{"tiny", 2, 32, "[\"embed\", \"h.0\"]", "\"sections\": {\"h.1\": \"full\"}"},
	{"tiny", 2, 32, "[\"*.ln_*\", \"*.bias\"]", "\"default\": \"selective\""},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

static void trainer_of(eng_trainer *tr, const freeze_case *c, const char *freeze,
	const char *save)
{
	char *dir;
	char rel[64];
	snprintf(rel, sizeof rel, "reference/%s", c->dir);
	dir = t_data(rel);
	t_trainer(tr, "{\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":\"%s/train.bin\"},"
		"\"batch\":%d,\"seq_len\":%d,\"steps\":4,\"threads\":2,\"optim\":{\"lr\":3e-3},"
		"\"remat\":{%s,\"chunk_rows\":16},\"train\":{\"freeze\":%s}%s%s%s}", dir, dir, c->B,
		c->T, c->policy, freeze, save ? ",\"save\":{\"dir\":\"" : "", save ? save : "",
		save ? "\"}" : "");
	free(dir);
}

/* Step 1's gradients of the trainable tensors, frozen or not, against the unfrozen run's
 * (bitwise) and the reference's; frozen tensors have none */
START_TEST(test_freeze_gradients)
{
	const freeze_case *c = &cases[_i];
	eng_trainer all, fz;
	eng_err err;
	float la, lf;
	trainer_of(&all, c, "[]", NULL);
	trainer_of(&fz, c, c->freeze, NULL);
	/* the file's first batch, as a step takes it */
	t_next(&all.train, all.inp, all.tgt);
	t_next(&fz.train, fz.inp, fz.tgt);
	ck_assert_msg(eng_model_step(&all.model, all.inp, all.tgt, &la, &err) == 0, "%s",
		err.msg);
	ck_assert_msg(eng_model_step(&fz.model, fz.inp, fz.tgt, &lf, &err) == 0, "%s", err.msg);
	ck_assert(memcmp(&la, &lf, sizeof la) == 0);
	char rel[96];
	snprintf(rel, sizeof rel, "reference/%s/expected.safetensors", c->dir);
	char *exp = t_data(rel);
	eng_st_file ex;
	ck_assert_msg(eng_st_read(&ex, exp, &err) == 0, "%s", err.msg);
	const eng_model *a = &all.model, *f = &fz.model;
	int nfrozen = 0;
	size_t trained = 0;
	for (int i = 0; i < f->ntensors; i++) {
		const eng_ptensor *t = &f->tensors[i];
		if (t->frozen) {
			nfrozen++;
			continue;
		}
		trained += t->numel;
		ck_assert_msg(memcmp(f->grads + t->goff, a->grads + a->tensors[i].offset,
				      t->numel * 4) == 0, "%s [%s]: %s's gradient differs from the "
			"unfrozen run's", c->freeze, c->policy, t->name);
		char name[128];
		snprintf(name, sizeof name, "grad.%s", t->name);
		float *r = malloc(t->numel * 4);
		ck_assert(r && eng_st_get_f32(&ex, name, t->ndim, t->shape, r, &err) == 0);
		double e = t_rel_l2(f->grads + t->goff, r, t->numel);
		ck_assert_msg(e < 1e-4, "%s: %s off the reference by %.3g", c->freeze, t->name, e);
		free(r);
	}
	ck_assert_msg(nfrozen > 0 && f->ngrad < a->ngrad && f->ngrad >= trained,
		"%s: %d frozen, %zu of %zu gradient floats", c->freeze, nfrozen, f->ngrad, a->ngrad);
	eng_st_free(&ex);
	free(exp);
	eng_trainer_free(&fz);
	eng_trainer_free(&all);
}
END_TEST

/* No gradient or moment memory for frozen tensors, counted as held; their weights stay */
START_TEST(test_freeze_memory_and_weights)
{
	const freeze_case *c = &cases[_i];
	eng_trainer tr;
	eng_step_stats st;
	eng_err err;
	trainer_of(&tr, c, c->freeze, NULL);
	const eng_model *m = &tr.model;
	eng_mem_stats ms;
	eng_mem_get_stats(&ms);
	ck_assert_uint_eq(ms.current[ENG_MEM_GRADS], 4 * m->ngrad);
	ck_assert_uint_eq(ms.current[ENG_MEM_OPTIMIZER], 8 * m->ngrad);
	size_t fixed[ENG_MEM_NCAT];
	eng_trainer_fixed_bytes(&tr, fixed);
	ck_assert_uint_eq(fixed[ENG_MEM_GRADS], 4 * m->ngrad);
	ck_assert_uint_eq(fixed[ENG_MEM_OPTIMIZER], 8 * m->ngrad);
	float *before = malloc(m->nfloats * 4);
	ck_assert_ptr_nonnull(before);
	memcpy(before, m->params, m->nfloats * 4);
	for (int s = 0; s < 2; s++)
		ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
	for (int i = 0; i < m->ntensors; i++) {
		const eng_ptensor *t = &m->tensors[i];
		int same = memcmp(before + t->offset, m->params + t->offset, t->numel * 4) == 0;
		ck_assert_msg(same == t->frozen, "%s: %s %s", c->freeze, t->name,
			t->frozen ? "moved though frozen" : "never moved");
	}
	free(before);
	eng_trainer_free(&tr);
}
END_TEST

/* Saved with train.freeze: no moments for the frozen tensors, trainer_state.json lists
 * them, the checkpoint verifies and resumes bit for bit; a resume that freezes other
 * tensors is refused */
START_TEST(test_freeze_checkpoint_resume)
{
	const freeze_case *c = &cases[0];
	char *root = t_tmp_dir("freeze_ckpt"), path[ENG_PATH_LEN + 64], save[ENG_PATH_LEN];
	eng_trainer a, b;
	eng_err err;
	float loss[5];
	snprintf(save, sizeof save, "%s/a", root);
	trainer_of(&a, c, c->freeze, save);
	t_steps_saving(&a, 4, 2, loss, path, sizeof path);
	ck_assert_msg(eng_ckpt_verify(path, &err) == 0, "%s", err.msg);
	char file[ENG_PATH_LEN + 96];
	snprintf(file, sizeof file, "%s/optimizer.safetensors", path);
	eng_st_file f;
	ck_assert_msg(eng_st_read(&f, file, &err) == 0, "%s", err.msg);
	int trainable = 0;
	for (int i = 0; i < a.model.ntensors; i++) {
		char name[128];
		snprintf(name, sizeof name, "exp_avg.%s", a.model.tensors[i].name);
		ck_assert_msg((eng_st_find(&f, name) != NULL) == !a.model.tensors[i].frozen, "%s",
			name);
		trainable += !a.model.tensors[i].frozen;
	}
	ck_assert_int_eq(f.n, 2 * trainable);
	eng_st_free(&f);
	snprintf(file, sizeof file, "%s/trainer_state.json", path);
	json_error_t je;
	json_t *state = json_load_file(file, 0, &je);
	json_t *fz = json_object_get(state, "frozen");
	ck_assert_int_eq((int)json_array_size(fz), a.model.ntensors - trainable);
	ck_assert_str_eq(json_string_value(json_array_get(fz, 0)), "model.embed_tokens.weight");
	json_decref(state);
	/* resumed with the same train.freeze: the same steps 3 and 4 */
	char *dir = t_data("reference/llama");
	t_trainer(&b, "{\"model\":{\"init_from\":\"%s\",\"resume\":true},\"data\":{\"train\":"
		"\"%s/train.bin\"},\"batch\":2,\"seq_len\":24,\"steps\":4,\"threads\":2,"
		"\"optim\":{\"lr\":3e-3},\"remat\":{%s,\"chunk_rows\":16},\"train\":"
		"{\"freeze\":%s}}", path, dir,
		c->policy, c->freeze);
	t_resumed_steps(&b, 3, 4, loss);
	ck_assert(memcmp(a.model.params, b.model.params, a.model.nfloats * 4) == 0);
	eng_trainer_free(&b);
	/* without the freeze: refused */
	char text[16384];
	snprintf(text, sizeof text, "{\"model\":{\"init_from\":\"%s\",\"resume\":true},\"data\":"
		"{\"train\":\"%s/train.bin\"},\"batch\":2,\"seq_len\":24,\"steps\":4}", path, dir);
	eng_spec sp;
	ck_assert(eng_spec_parse(&sp, text, &err) == 0);
	ck_assert_int_eq(eng_trainer_init(&b, &sp, &err), -1);
	ck_assert_msg(strstr(err.msg, "other tensors frozen"), "%s", err.msg);
	eng_trainer_free(&a);
	free(dir);
	free(root);
}
END_TEST

/* What train.freeze cannot mean, each refused naming why */
static const struct {
	const char *freeze, *needle;
} bad[] = {
	{"[\"model.layers.0.self_attn.k_proj.weight\"]", "one weight of one product"},
	{"[\"*.gate_proj.*\"]", "freeze both or neither"},
	{"[\"all\"]", "freezes every tensor"},
	{"[\"embed\", \"blocks\", \"head\"]", "nothing would train"},
	{"[\"h.7\"]", "the model has blocks h.0-1"},
	{"[\"*.c_attn.*\"]", "names no tensor"},
	{"[\"bogus\"]", "neither \"embed\", a section"},
	{"[3]", "'train.freeze[0]' must be"},
	{"\"embed\"", "must be a list"},
};

START_TEST(test_freeze_refused)
{
	char *dir = t_data("reference/llama"), text[8192];
	eng_spec sp;
	eng_trainer tr;
	eng_err err = {0};
	snprintf(text, sizeof text, "{\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":"
		"\"%s/train.bin\"},\"batch\":2,\"seq_len\":24,\"steps\":1,\"train\":{\"freeze\":%s}}",
		dir, dir, bad[_i].freeze);
	int rc = eng_spec_parse(&sp, text, &err);
	if (rc == 0)
		rc = eng_trainer_init(&tr, &sp, &err);
	ck_assert_msg(rc == -1, "%s accepted", bad[_i].freeze);
	ck_assert_msg(strstr(err.msg, bad[_i].needle), "%s: %s", bad[_i].freeze, err.msg);
	free(dir);
}
END_TEST

Suite *suite_freeze(void)
{
	Suite *s = suite_create("freeze");
	TCase *tc = tcase_create("freeze");
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_loop_test(tc, test_freeze_gradients, 0, NCASES);
	tcase_add_loop_test(tc, test_freeze_memory_and_weights, 0, NCASES);
	tcase_add_test(tc, test_freeze_checkpoint_resume);
	tcase_add_loop_test(tc, test_freeze_refused, 0, (int)(sizeof bad / sizeof bad[0]));
	suite_add_tcase(s, tc);
	return s;
}
