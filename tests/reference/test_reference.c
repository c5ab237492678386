/* test_reference.c - the engine against PyTorch (tests/data/reference, float64 results
 * from float32 weights; see its README, and tests/data/GENERATED.md for wide/ and deep/):
 * losses of every step, step-1 logits and gradients, final weights, under every policy,
 * including one changed between steps.
 * Tolerances per tensor, relative L2: loss 1e-5, logits and gradients 1e-4, weights 3e-4.
 * A failure names the worst tensor and its error.
 *
 * Precision bf16 against the same float64 results (off and each case's mixed policy; the
 * numbers are the same under both, as every policy's are). bf16 keeps 8 bits of mantissa:
 * rounding to it is a relative error of at most u = 2^-9 = 2.0e-3, about u/sqrt(3) = 1.1e-3
 * RMS. Every product rounds both operands once and sums exactly enough in float32, so a
 * product's output carries about sqrt(2) x 1.1e-3 = 1.6e-3 RMS; measured (REMAT_VERBOSE=1)
 * on tiny, odd, wide and deep:
 *   - logits 2.3e-3 .. 3.1e-3: the head's product plus what the blocks' products left in
 *     the residual stream; tolerance 1e-2;
 *   - gradients of step 1, worst tensor 5.1e-3 .. 6.3e-3 (LayerNorm weights: sums over
 *     rows of products that partly cancel); tolerance 2e-2;
 *   - losses of every step 4e-6 .. 1.0e-4 (a mean over B*T rows averages the rounding
 *     out); tolerance 1e-3;
 *   - weights after the last step, worst tensor 7.8e-3 .. 4.8e-2: AdamW divides each
 *     gradient by its own RMS, so the relative error of a gradient element becomes the
 *     update's, largest where gradients are near zero and change sign, and biases that
 *     start at zero (mlp.c_proj.bias in deep) are nothing but updates; tolerance 1.5e-1.
 * Loose enough for rounding, tight enough for a wrong index, transpose or missing term
 * (errors of order 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "eng_import.h"
#include "eng_sample.h"
#include "t_util.h"
#include "tests.h"

typedef struct ref_case {
	const char *dir;    /* under reference/; with "/adapter": init_from the PEFT adapters */
	int B, T, steps;
	double lr, wd, clip;
	const char *sched;  /* schedule.kind: "constant" or "cosine" */
	int warmup;         /* schedule.warmup, in steps */
	double min_lr_frac; /* schedule.min_lr_frac (cosine only) */
	const char *mixed;  /* a policy mixing modes across blocks and head, valid for the
			     * case's layer count */
} ref_case;

/* As each folder's job.json says. wide: one layer, hs 12, T 45, clipping that engages,
 * cosine with warm-up, a data cursor that wraps; deep: five layers of one head each, T =
 * n_positions, constant with warm-up. */
static const ref_case cases[] = {
	{"tiny", 2, 32, 3, 1e-3, 0.1, 0.0, "constant", 0, 0.1,
		"h.0=full;h.1=selective;head=chunked"},
	{"odd", 3, 24, 2, 3e-3, 0.05, 0.5, "constant", 0, 0.1,
		"h.0=full;h.1=selective;head=chunked"},
	{"wide", 2, 45, 4, 2e-3, 0.1, 1.0, "cosine", 2, 0.2, "h.0=selective;head=chunked"},
	{"deep", 4, 20, 3, 5e-3, 0.0, 0.0, "constant", 2, 0.1,
		"h.0=full;h.1-2=selective;h.4=full;head=chunked"},
	/* the Llama family (GENERATED.md): GQA 6/2 heads of 6, SwiGLU 53 wide, untied, clipping,
	 * cosine; and tied, multi-query (4/1), rope_theta 5e5, rms_norm_eps 1e-6 */
	{"llama", 2, 24, 3, 3e-3, 0.1, 1.0, "cosine", 1, 0.1,
		"h.0=full;h.1=selective;head=chunked"},
	{"llama_tied", 3, 20, 2, 2e-3, 0.05, 0.0, "constant", 0, 0.1,
		"h.0=selective;h.1=full;head=chunked"},
	/* LoRA (GENERATED.md): adapters from PEFT's files on a frozen base; q_proj, v_proj,
	 * o_proj, down_proj of a GQA Llama (clipping engages), every weight of a GPT-2 */
	{"lora_llama/adapter", 2, 20, 3, 3e-3, 0.1, 0.02, "cosine", 1, 0.1,
		"h.0=full;h.1=selective;head=chunked"},
	{"lora_gpt2/adapter", 2, 24, 2, 2e-3, 0.05, 0.0, "constant", 0, 0.1,
		"h.0=selective;h.1=full;head=chunked"},
};
#define NBF16 6 /* cases precision bf16 runs: LoRA trains in fp32 only */

/* Policies, as remat-train's --remat-schedule texts applied before step 1; NULL stands for
 * the case's own mixed policy. */
static const char *policies[] = {"off", "selective", "full", "head=chunked", NULL};
#define NPOL (int)(sizeof policies / sizeof policies[0])

/* Worst relative L2 error of the model's tensors against prefix.<name> of ex (param. or
 * grad.), its name into *worst_name. */
static double worst_tensor(const eng_model *m, const float *x, eng_st_file *ex,
	const char *prefix, const char **worst_name)
{
	double worst = 0;
	eng_err err;
	int grads = x == m->grads; /* the trainable tensors', at their gradient offsets */
	for (int i = 0; i < m->ntensors; i++) {
		const eng_ptensor *t = &m->tensors[i];
		char name[128];
		if (grads && t->frozen)
			continue;
		snprintf(name, sizeof name, "%s.%s", prefix, t->name);
		float *r = malloc(t->numel * sizeof(float));
		ck_assert_msg(eng_st_get_f32(ex, name, t->ndim, t->shape, r, &err) == 0, "%s",
			err.msg);
		double e = t_rel_l2(x + (grads ? t->goff : t->offset), r, t->numel);
		if (e > worst) {
			worst = e;
			*worst_name = t->name;
		}
		free(r);
	}
	return worst;
}

/* Relative L2 tolerances of one precision: loss, logits, gradients, weights. */
typedef struct tolset {
	const char *precision;
	double loss, logits, grads, weights;
} tolset;

static const tolset tol_fp32 = {"fp32", 1e-5, 1e-4, 1e-4, 3e-4};
/* precision "bf16" (oneDNN's bf16 products, float32 sums, bf16 matmul inputs): the top of
 * this file has the errors measured and why these bound them */
static const tolset tol_bf16 = {"bf16", 1e-3, 1e-2, 2e-2, 1.5e-1};

/* Measured error against its tolerance, printed with REMAT_VERBOSE. */
static void check_rel(const ref_case *c, const char *policy, const tolset *tol,
	const char *what, const char *name, double e, double bound)
{
	if (getenv("REMAT_VERBOSE"))
		fprintf(stderr, "reference: %s %s [%s]: %s%s%s rel %.3e (tolerance %.0e)\n",
			tol->precision, c->dir, policy, what, *name ? " " : "", name, e, bound);
	ck_assert_msg(e < bound, "%s %s [%s]: %s%s%s rel err %.3g (tolerance %.0e)",
		tol->precision, c->dir, policy, what, *name ? " " : "", name, e, bound);
}

static void run_case(const ref_case *c, const char *policy, const char *policy2,
	const tolset *tol)
{
	char rel[256];
	snprintf(rel, sizeof rel, "reference/%s", c->dir);
	char *from = t_data(rel);
	char *slash = strchr(rel + strlen("reference/"), '/');
	if (slash)
		*slash = '\0'; /* the case's folder: its train.bin, expected.safetensors */
	char *dir = t_data(rel);
	eng_trainer tr;
	/* chunk_rows 16 puts several chunks in the head, so chunking is exercised for real */
	t_trainer(&tr,
		"{\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":\"%s/train.bin\"},"
		"\"batch\":%d,\"seq_len\":%d,\"steps\":%d,\"threads\":2,"
		"\"optim\":{\"lr\":%g,\"beta1\":0.9,\"beta2\":0.95,\"eps\":1e-8,"
		"\"weight_decay\":%g,\"grad_clip\":%g},"
		"\"schedule\":{\"kind\":\"%s\",\"warmup\":%d,\"min_lr_frac\":%g},"
		"\"remat\":{\"chunk_rows\":16},\"precision\":\"%s\"}",
		from, dir, c->B, c->T, c->steps, c->lr, c->wd, c->clip, c->sched, c->warmup,
		c->min_lr_frac, tol->precision);
	eng_policy p;
	eng_err err;
	ck_assert_msg(eng_trainer_parse_policy(&tr, policy, &p, &err) == 0, "%s", err.msg);
	ck_assert_msg(eng_trainer_set_policy(&tr, &p, &err) == 0, "%s", err.msg);

	char *exp_path = malloc(strlen(dir) + 32);
	sprintf(exp_path, "%s/expected.safetensors", dir);
	eng_st_file ex;
	ck_assert_msg(eng_st_read(&ex, exp_path, &err) == 0, "%s", err.msg);

	eng_model *m = &tr.model;
	size_t N = (size_t)c->B * c->T, V = m->cfg.vocab_size;
	float *logits = malloc(N * V * sizeof(float)), *ref = malloc(N * V * sizeof(float));
	ck_assert(logits && ref);

	/* step 1, forward and backward only: logits and gradients before clipping */
	uint32_t *inp = malloc(N * sizeof *inp), *tgt = malloc(N * sizeof *tgt);
	ck_assert_msg(eng_data_read(&tr.train, 0, N, inp, &err) == 0, "%s", err.msg);
	ck_assert_msg(eng_data_read(&tr.train, 1, N, tgt, &err) == 0, "%s", err.msg);
	m->logits_tap = logits;
	float loss;
	ck_assert_msg(eng_model_step(m, inp, tgt, &loss, &err) == 0, "%s", err.msg);
	m->logits_tap = NULL;
	int64_t lshape[3] = {c->B, c->T, (int64_t)V};
	ck_assert_msg(eng_st_get_f32(&ex, "logits", 3, lshape, ref, &err) == 0, "%s", err.msg);
	check_rel(c, policy, tol, "logits", "", t_rel_l2(logits, ref, N * V), tol->logits);
	const char *worst_name = "";
	double worst = worst_tensor(m, m->grads, &ex, "grad", &worst_name);
	check_rel(c, policy, tol, "worst gradient", worst_name, worst, tol->grads);

	/* the real run: every step's loss, then the weights */
	for (int s = 1; s <= c->steps; s++) {
		if (s == 2 && policy2) {
			ck_assert_msg(eng_trainer_parse_policy(&tr, policy2, &p, &err) == 0, "%s",
				err.msg);
			ck_assert_msg(eng_trainer_set_policy(&tr, &p, &err) == 0, "%s", err.msg);
		}
		eng_step_stats st;
		ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
		char name[32];
		float rl;
		snprintf(name, sizeof name, "loss.step%d", s);
		ck_assert_msg(eng_st_get_f32(&ex, name, 0, NULL, &rl, &err) == 0, "%s", err.msg);
		snprintf(name, sizeof name, "step %d", s);
		check_rel(c, policy, tol, "loss", name, fabs(st.loss - rl) / fabs(rl), tol->loss);
	}
	worst = worst_tensor(m, m->params, &ex, "param", &worst_name);
	check_rel(c, policy, tol, "worst weight", worst_name, worst, tol->weights);
	free(inp);
	free(tgt);
	free(logits);
	free(ref);
	eng_st_free(&ex);
	eng_trainer_free(&tr);
	free(exp_path);
	free(dir);
	free(from);
}

/* Loop index i (tcase_add_loop_test's _i): one policy each, the last the case's own mix */
static void run_policy(const ref_case *c, int i)
{
	run_case(c, policies[i] ? policies[i] : c->mixed, NULL, &tol_fp32);
}

START_TEST(test_reference_tiny_policy)
{
	run_policy(&cases[0], _i);
}
END_TEST

START_TEST(test_reference_odd_policy)
{
	run_policy(&cases[1], _i);
}
END_TEST

START_TEST(test_reference_wide_policy)
{
	run_policy(&cases[2], _i);
}
END_TEST

START_TEST(test_reference_deep_policy)
{
	run_policy(&cases[3], _i);
}
END_TEST

START_TEST(test_reference_llama_policy)
{
	run_policy(&cases[4], _i);
}
END_TEST

START_TEST(test_reference_llama_tied_policy)
{
	run_policy(&cases[5], _i);
}
END_TEST

START_TEST(test_reference_lora_policy)
{
	run_policy(&cases[6 + _i / NPOL], _i % NPOL);
}
END_TEST

/* precision bf16 against the same float64 results, every case, off and the case's own mix */
START_TEST(test_reference_bf16)
{
	if (!t_bf16_here("reference"))
		return;
	const ref_case *c = &cases[_i / 2];
	run_case(c, _i % 2 ? c->mixed : "off", NULL, &tol_bf16);
}
END_TEST

START_TEST(test_reference_policy_changed_between_steps)
{
	run_case(&cases[0], "off", "full;head=chunked", &tol_fp32);
	run_case(&cases[1], "h.0-1=full;head=chunked", "h.0=off;h.1=selective;head=off", &tol_fp32);
	run_case(&cases[2], "full", "selective;head=chunked", &tol_fp32);
	run_case(&cases[3], "h.0-2=full;head=chunked", "h.0=off;h.1-4=selective;head=off", &tol_fp32);
	run_case(&cases[4], "off", "full;head=chunked", &tol_fp32);
	run_case(&cases[5], "full;head=chunked", "h.0=off;h.1=selective;head=off", &tol_fp32);
	run_case(&cases[6], "off", "full;head=chunked", &tol_fp32);
	run_case(&cases[7], "h.1=full", "h.0=full;h.1=off;head=chunked", &tol_fp32);
}
END_TEST

/* ---- gradient accumulation and evaluation (reference/accum, GENERATED.md) ---- */

/* As accum/job.json says: B 2 x T 24, grad_accum 3, 3 steps, cosine with warm-up 1, clipping
 * at 0.8 (engages in step 1 only), eval every 2 steps over 2 batches of val.bin. */
static void accum_trainer(eng_trainer *tr, const char *dir, int B, int K, const char *policy)
{
	eng_policy p;
	eng_err err;
	t_trainer(tr,
		"{\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":\"%s/train.bin\","
		"\"val\":\"%s/val.bin\"},\"batch\":%d,\"seq_len\":24,\"steps\":3,"
		"\"grad_accum\":%d,\"threads\":2,\"optim\":{\"lr\":3e-3,\"beta1\":0.9,"
		"\"beta2\":0.95,\"eps\":1e-8,\"weight_decay\":0.1,\"grad_clip\":0.8},"
		"\"schedule\":{\"kind\":\"cosine\",\"warmup\":1,\"min_lr_frac\":0.1},"
		"\"eval\":{\"every\":2,\"batches\":2},\"remat\":{\"chunk_rows\":16}}",
		dir, dir, dir, B, K);
	ck_assert_msg(eng_trainer_parse_policy(tr, policy, &p, &err) == 0, "%s", err.msg);
	ck_assert_msg(eng_trainer_set_policy(tr, &p, &err) == 0, "%s", err.msg);
}

static float ref_scalar(eng_st_file *ex, const char *fmt, int k)
{
	char name[64];
	float v;
	eng_err err;
	snprintf(name, sizeof name, fmt, k);
	ck_assert_msg(eng_st_get_f32(ex, name, 0, NULL, &v, &err) == 0, "%s", err.msg);
	return v;
}

/* Every step's loss (the mean over its three micro-batches), the step-1 gradient norm (of
 * the accumulated gradient, before clipping), the validation loss before training and
 * after steps 2 and 3, and the weights after step 3, under every policy; and the weights
 * bit for bit the same under all of them. */
START_TEST(test_reference_accum_and_eval)
{
	char *dir = t_data("reference/accum");
	char *exp_path = t_data("reference/accum/expected.safetensors");
	eng_st_file ex;
	eng_err err;
	ck_assert_msg(eng_st_read(&ex, exp_path, &err) == 0, "%s", err.msg);
	float *first = NULL;
	for (int pi = 0; pi < NPOL; pi++) {
		const char *policy = policies[pi] ? policies[pi] : "h.0=full;h.1=selective;head=chunked";
		eng_trainer tr;
		accum_trainer(&tr, dir, 2, 3, policy);
		eng_model *m = &tr.model;
		/* the reference's gradient norm of step 1, from its gradients */
		double sq = 0;
		for (int i = 0; i < m->ntensors; i++) {
			const eng_ptensor *t = &m->tensors[i];
			char name[128];
			snprintf(name, sizeof name, "grad.%s", t->name);
			float *r = malloc(t->numel * sizeof(float));
			ck_assert_msg(eng_st_get_f32(&ex, name, t->ndim, t->shape, r, &err) == 0,
				"%s", err.msg);
			for (size_t j = 0; j < t->numel; j++)
				sq += (double)r[j] * r[j];
			free(r);
		}
		float v0 = eng_trainer_val_loss(&tr, 2), rv0 = ref_scalar(&ex, "val_loss.step%d", 0);
		ck_assert_msg(fabs(v0 - rv0) < 1e-5 * fabs(rv0), "val loss before training %.9g vs "
			"%.9g", v0, rv0);
		for (int s = 1; s <= 3; s++) {
			eng_step_stats st;
			ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
			ck_assert_int_eq(st.micro_batches, 3);
			float rl = ref_scalar(&ex, "loss.step%d", s);
			ck_assert_msg(fabs(st.loss - rl) < 1e-5 * fabs(rl), "[%s] step %d loss %.9g vs "
				"%.9g", policy, s, st.loss, rl);
			if (s == 1)
				ck_assert_msg(fabs(st.grad_norm - sqrt(sq)) < 1e-4 * sqrt(sq), "[%s] "
					"step-1 gradient norm %.9g vs %.9g", policy, st.grad_norm, sqrt(sq));
			if (s >= 2) {
				float v = eng_trainer_val_loss(&tr, 2);
				float rv = ref_scalar(&ex, "val_loss.step%d", s);
				ck_assert_msg(fabs(v - rv) < 1e-5 * fabs(rv), "[%s] val loss after step "
					"%d: %.9g vs %.9g", policy, s, v, rv);
			}
		}
		const char *wn = "";
		double w = worst_tensor(m, m->params, &ex, "param", &wn);
		ck_assert_msg(w < 3e-4, "[%s] worst weight %s rel err %.3g", policy, wn, w);
		size_t bytes = m->nfloats * sizeof(float);
		if (!first) {
			first = malloc(bytes);
			memcpy(first, m->params, bytes);
		} else {
			ck_assert_msg(memcmp(first, m->params, bytes) == 0, "policy %s changed the "
				"bits of a run with grad_accum", policy);
		}
		eng_trainer_free(&tr);
	}
	free(first);
	eng_st_free(&ex);
	free(exp_path);
	free(dir);
}
END_TEST

/* Three micro-batches of 2 rows against one batch of 6 rows on the same tokens (a batch of
 * 6 x 24 reads the windows the three micro-batches read, and the data holds no wrap in
 * two steps): the weights agree within the reference's tolerance, 3e-4 relative L2 a
 * tensor (float32 rounding of a sum taken in another order). */
START_TEST(test_reference_accum_equals_larger_batch)
{
	char *dir = t_data("reference/accum");
	eng_trainer a, b;
	eng_err err;
	eng_step_stats st;
	accum_trainer(&a, dir, 2, 3, "off");
	accum_trainer(&b, dir, 6, 1, "off");
	a.spec.steps = b.spec.steps = 2;
	for (int s = 0; s < 2; s++) {
		ck_assert_msg(eng_trainer_step_as(&a, NULL, &st, &err) == 0, "%s", err.msg);
		float la = st.loss;
		ck_assert_msg(eng_trainer_step_as(&b, NULL, &st, &err) == 0, "%s", err.msg);
		ck_assert_msg(fabs(la - st.loss) < 1e-6 * fabs(st.loss), "step %d loss %.9g vs "
			"%.9g", s + 1, la, st.loss);
	}
	double worst = 0;
	for (int i = 0; i < a.model.ntensors; i++) {
		const eng_ptensor *t = &a.model.tensors[i];
		double e = t_rel_l2(a.model.params + t->offset, b.model.params + t->offset, t->numel);
		worst = e > worst ? e : worst;
	}
	ck_assert_msg(worst < 3e-4, "worst weight rel err %.3g", worst);
	ck_assert_msg(worst > 0, "no rounding difference at all: is accumulation running?");
	eng_trainer_free(&a);
	eng_trainer_free(&b);
	free(dir);
}
END_TEST

/* ---- greedy decoding (reference/greedy/expected.json, GENERATED.md) ---- */

/* expected.json's ids under key into ids (n of them). */
static int greedy_ids(const char *key, uint32_t *ids, int max)
{
	char *path = t_data("reference/greedy/expected.json");
	json_t *o = json_load_file(path, 0, NULL), *a = json_object_get(o, key), *v;
	ck_assert_msg(json_is_array(a), "%s: no '%s'", path, key);
	size_t i;
	int n = 0;
	json_array_foreach(a, i, v) if (n < max) ids[n++] = (uint32_t)json_integer_value(v);
	json_decref(o);
	free(path);
	return n;
}

/* The shared tiny model's greedy continuation of the prompt, from its initial weights and
 * after its three reference steps, is PyTorch's token for token, under every policy (the
 * sampler's forward runs in the training buffers of any layout); and remat-train --sample
 * prints the same from the checkpoint. */
START_TEST(test_reference_greedy)
{
	uint32_t prompt[16], init[64], trained[64], out[64];
	int np = greedy_ids("prompt", prompt, 16), ni = greedy_ids("init", init, 64);
	int nt = greedy_ids("trained", trained, 64);
	ck_assert(np == 6 && ni == 24 && nt == 24);
	eng_sample_opts o = {24, 0.0f, 0, 1};
	eng_err err;
	char *dir = t_data("reference/tiny");
	for (int pi = 0; pi < NPOL; pi++) {
		const char *policy = policies[pi] ? policies[pi] : cases[0].mixed;
		eng_trainer tr;
		eng_policy p;
		t_trainer(&tr, "{\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":\"%s/train.bin\"},"
			"\"batch\":2,\"seq_len\":32,\"steps\":3,\"threads\":2,\"optim\":{\"lr\":1e-3,"
			"\"beta1\":0.9,\"beta2\":0.95,\"eps\":1e-8,\"weight_decay\":0.1,\"grad_clip\":0},"
			"\"schedule\":\"constant\",\"remat\":{\"chunk_rows\":16}}", dir, dir);
		ck_assert_msg(eng_trainer_parse_policy(&tr, policy, &p, &err) == 0, "%s", err.msg);
		ck_assert_msg(eng_trainer_set_policy(&tr, &p, &err) == 0, "%s", err.msg);
		ck_assert_msg(eng_sample(&tr.model, prompt, np, &o, tr.inp, tr.tgt, out, &err) == 0,
			"%s", err.msg);
		for (int i = 0; i < ni; i++)
			ck_assert_msg(out[i] == init[i], "[%s] initial weights: token %d is %u, PyTorch's "
				"%u", policy, i, out[i], init[i]);
		for (int s = 0; s < 3; s++) {
			eng_step_stats st;
			ck_assert_msg(eng_trainer_step_as(&tr, NULL, &st, &err) == 0, "%s", err.msg);
		}
		ck_assert_msg(eng_sample(&tr.model, prompt, np, &o, tr.inp, tr.tgt, out, &err) == 0,
			"%s", err.msg);
		for (int i = 0; i < nt; i++)
			ck_assert_msg(out[i] == trained[i], "[%s] after 3 steps: token %d is %u, PyTorch's "
				"%u", policy, i, out[i], trained[i]);
		eng_trainer_free(&tr);
	}
	char ids[128] = "", want[256] = "", *text;
	for (int i = 0; i < np; i++)
		snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%u", i ? "," : "", prompt[i]);
	for (int i = 0; i < ni; i++)
		snprintf(want + strlen(want), sizeof want - strlen(want), "%s%u", i ? " " : "", init[i]);
	char *argv[] = {(char *)t_env("REMAT_TRAIN"), "--sample", dir, "--prompt", ids, "--tokens",
		"24", "--temperature", "0", NULL};
	ck_assert_int_eq(t_run(argv, &text), 0);
	ck_assert_msg(strncmp(text, want, strlen(want)) == 0, "remat-train --sample printed '%s', "
		"PyTorch's greedy is '%s'", text, want);
	free(text);
	char *bad[] = {(char *)t_env("REMAT_TRAIN"), "--sample", dir, "--prompt", "5,1000", NULL};
	ck_assert_int_eq(t_run(bad, &text), 2); /* 1000 is past tiny's vocabulary */
	ck_assert_msg(strstr(text, "vocab_size"), "%s", text);
	free(text);
	free(dir);
}
END_TEST

/* A model trained (in PyTorch) on an interleaved pattern, whose greedy continuation is the
 * pattern itself, 32 tokens of 12 ids (reference/greedy_trained): the engine's step-1
 * logits within 1e-4 of PyTorch's, and its 32 tokens PyTorch's, under every policy. */
START_TEST(test_reference_greedy_trained)
{
	char *dir = t_data("reference/greedy_trained"), *path = t_data(
		"reference/greedy_trained/expected.json");
	json_t *ex = json_load_file(path, 0, NULL), *v;
	ck_assert_ptr_nonnull(ex);
	uint32_t prompt[16], want[64], out[64];
	float ref[64], logits[64];
	size_t i, np = json_array_size(json_object_get(ex, "prompt"));
	size_t nw = json_array_size(json_object_get(ex, "greedy"));
	ck_assert(np <= 16 && nw <= 64);
	json_array_foreach(json_object_get(ex, "prompt"), i, v)
		prompt[i] = (uint32_t)json_integer_value(v);
	json_array_foreach(json_object_get(ex, "greedy"), i, v)
		want[i] = (uint32_t)json_integer_value(v);
	json_array_foreach(json_object_get(ex, "logits_step1"), i, v) if (i < 64) ref[i] = (float)json_number_value(v);
	eng_config cfg;
	eng_model m;
	eng_err err;
	eng_aliases al = {0};
	ck_assert_msg(eng_import_read_config(dir, &cfg, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(cfg.vocab_size, 64);
	ck_assert_msg(eng_model_init(&m, &cfg, 1, cfg.n_positions, 16, &err) == 0, "%s", err.msg);
	ck_assert_msg(eng_import_load(&m, dir, &err) == 0, "%s", err.msg);
	uint32_t inp[64], tgt[64];
	for (int pi = 0; pi < NPOL; pi++) {
		const char *policy = policies[pi] ? policies[pi] : "h.0=full;h.1=selective;head=chunked";
		eng_policy p;
		eng_policy_init(&p, cfg.n_layer);
		ck_assert_msg(eng_policy_parse(&p, &al, policy, &err) == 0, "%s", err.msg);
		ck_assert_msg(eng_model_set_policy(&m, &p, &err) == 0, "%s", err.msg);
		/* step 1's logits: the prompt's last position */
		float loss;
		memset(inp, 0, sizeof inp);
		memset(tgt, 0, sizeof tgt);
		memcpy(inp, prompt, np * sizeof *inp);
		m.row_tap = logits;
		m.row_tap_at = (int)np - 1;
		ck_assert_msg(eng_model_loss(&m, inp, tgt, &loss, &err) == 0, "%s", err.msg);
		m.row_tap = NULL;
		double e = t_rel_l2(logits, ref, 64);
		ck_assert_msg(e < 1e-4, "[%s] step-1 logits rel err %.3g", policy, e);
		eng_sample_opts o = {(int)nw, 0.0f, 0, 1};
		ck_assert_msg(eng_sample(&m, prompt, (int)np, &o, inp, tgt, out, &err) == 0, "%s",
			err.msg);
		for (size_t k = 0; k < nw; k++)
			ck_assert_msg(out[k] == want[k], "[%s] token %zu is %u, PyTorch's %u", policy, k,
				out[k], want[k]);
	}
	eng_model_free(&m);
	/* and remat-train --sample from the folder prints the same ids */
	char ids[128] = "", wants[512] = "", *text;
	for (size_t k = 0; k < np; k++)
		snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%u", k ? "," : "", prompt[k]);
	for (size_t k = 0; k < nw; k++)
		snprintf(wants + strlen(wants), sizeof wants - strlen(wants), "%s%u", k ? " " : "",
			want[k]);
	char n_new[16];
	snprintf(n_new, sizeof n_new, "%zu", nw);
	char *argv[] = {(char *)t_env("REMAT_TRAIN"), "--sample", dir, "--prompt", ids, "--tokens",
		n_new, "--temperature", "0", NULL};
	ck_assert_int_eq(t_run(argv, &text), 0);
	ck_assert_msg(strncmp(text, wants, strlen(wants)) == 0, "remat-train --sample printed "
		"'%s', PyTorch's greedy is '%s'", text, wants);
	free(text);
	json_decref(ex);
	free(path);
	free(dir);
}
END_TEST

Suite *suite_reference(void)
{
	Suite *s = suite_create("reference");
	TCase *tc = tcase_create("pytorch");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_reference_tiny_policy, 0, NPOL);
	tcase_add_loop_test(tc, test_reference_odd_policy, 0, NPOL);
	tcase_add_loop_test(tc, test_reference_wide_policy, 0, NPOL);
	tcase_add_loop_test(tc, test_reference_deep_policy, 0, NPOL);
	tcase_add_loop_test(tc, test_reference_llama_policy, 0, NPOL);
	tcase_add_loop_test(tc, test_reference_llama_tied_policy, 0, NPOL);
	tcase_add_loop_test(tc, test_reference_lora_policy, 0, 2 * NPOL);
	tcase_add_test(tc, test_reference_policy_changed_between_steps);
	tcase_add_loop_test(tc, test_reference_bf16, 0, 2 * NBF16);
	tcase_add_test(tc, test_reference_accum_and_eval);
	tcase_add_test(tc, test_reference_accum_equals_larger_batch);
	tcase_add_test(tc, test_reference_greedy);
	tcase_add_test(tc, test_reference_greedy_trained);
	suite_add_tcase(s, tc);
	return s;
}
