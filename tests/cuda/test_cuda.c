/* test_cuda.c - the GPU model (eng_cuda.h) against PyTorch's reference results and the CPU
 * model, under every policy, and its device memory (suite "cuda").
 *
 * Built in every configuration: without the CUDA backend, or without a usable GPU, it
 * prints one line saying why the GPU tests are skipped and runs those that need no GPU
 * (offload refused on the CPU backend, device cuda refused with a clear message,
 * daemon-info's backends and gpus as the probe found them).
 *
 * Tolerances, relative L2 error per tensor (||gpu - ref|| / ||ref||):
 * - float32 (REMAT_CUDA_PRECISION=fp32) against PyTorch in float64: the reference README's
 *   loss 1e-5, gradients 1e-4, weights 3e-4 (PyTorch's own float32 lands at 7e-8, 6e-7,
 *   1.3e-5); against the CPU backend: 1e-4 for gradients, activations and weights, 1e-5 for
 *   the loss. The two backends differ only in float32 summation order and FMA contraction.
 * - bf16 (the default) against the CPU's float32: every stored activation is rounded to
 *   bf16 (u = 2^-9 = 2e-3 relative), about twenty roundings per block between the loss and
 *   a weight gradient, and the products see bf16 weights. Loss 2e-2 (the mean over B*T
 *   rows averages the rounding out: well under u per row is expected, 10x margin); block
 *   outputs 3e-2 (a few roundings per block, compounding over the layers); gradients 1.5e-1
 *   (the backward chain repeats the forward's roundings and adds its own, and small
 *   gradient tensors such as LayerNorm biases are sums that cancel); weights after three
 *   AdamW steps 1.5e-1 (AdamW normalises the gradient, so the relative error of a
 *   gradient becomes that of the update, and biases, which start at zero, are nothing but
 *   updates). Loose by design: they catch a wrong index, sign or missing term (errors of
 *   order 1), not the last bits. REMAT_CUDA_VERBOSE=1 prints every measured error.
 * Policies: float32, and bf16 with the engine's attention, give the same bits under every
 * policy (memcmp), as on the CPU; bf16 with cuDNN's attention is compared with 1e-3
 * (cuDNN's backward may accumulate in an order that varies run to run).
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../unit/t_util.h"
#include "t_cuda.h"
#include "../unit/tests.h"
#include "eng_devices.h"
#include "eng_ckpt.h"
#include "eng_cuda.h"
#include "eng_cuda_mem.h"
#include "eng_plan.h"

#define GPL "/usr/share/common-licenses/GPL-3" /* Debian's base-files: a byte corpus */
#define TIMEOUT 300 /* seconds per GPU test: CUDA, cuBLASLt and cuDNN load in each */
#define STEPS 3
#define GPL_LR 1e-3 /* gpl_trainer's learning rate */

static int verbose(void)
{
	return getenv("REMAT_CUDA_VERBOSE") != NULL;
}

static void check_err(const char *what, double e, double tol)
{
	if (verbose())
		fprintf(stderr, "cuda: %-52s rel L2 %.3e (tolerance %.2g)\n", what, e, tol);
	ck_assert_msg(e <= tol, "%s: rel L2 error %.3e > %.2g", what, e, tol);
}

/* A tiny byte-level trainer on device dev, batch 4 x 64, seed 7, constant lr GPL_LR. */
static void gpl_trainer(eng_trainer *tr, const char *dev, double clip, const char *extra)
{
	t_trainer(tr,
		"{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"" GPL "\",\"format\":"
		"\"bytes\"},\"batch\":4,\"seq_len\":64,\"steps\":%d,\"seed\":7,\"threads\":2,"
		"\"device\":\"%s\",\"optim\":{\"lr\":%g,\"grad_clip\":%g},\"schedule\":\"constant\""
		"%s}", STEPS + 2, dev, GPL_LR, clip, extra ? extra : "");
}

static void set_policy(eng_trainer *tr, const char *text)
{
	eng_policy p;
	eng_err err;
	ck_assert_msg(eng_trainer_parse_policy(tr, text, &p, &err) == 0, "%s", err.msg);
	ck_assert_msg(eng_trainer_set_policy(tr, &p, &err) == 0, "%s: %s", text, err.msg);
}

static float step(eng_trainer *tr)
{
	eng_step_stats st;
	eng_err err;
	ck_assert_msg(eng_trainer_step_as(tr, NULL, &st, &err) == 0, "%s", err.msg);
	return st.loss;
}

static float *gpu_grads(eng_trainer *tr)
{
	eng_err err;
	float *g = malloc(tr->model.nfloats * sizeof(float));
	ck_assert_ptr_nonnull(g);
	ck_assert_msg(eng_cuda_get_grads(eng_backend_gpu(tr->be), g, &err) == 0, "%s", err.msg);
	return g;
}

static void sync_host(eng_trainer *tr)
{
	eng_err err;
	ck_assert_msg(eng_trainer_sync_host(tr, &err) == 0, "%s", err.msg);
}

/* ---- against PyTorch (tests/data/reference), float32 ---- */

typedef struct ref_case {
	const char *dir;
	int B, T, steps;
	double lr, wd, clip;
	const char *sched;
	int warmup;
	double min_lr_frac;
} ref_case;

/* as tests/reference/test_reference.c: each folder's job.json */
static const ref_case ref_cases[] = {
	{"tiny", 2, 32, 3, 1e-3, 0.1, 0.0, "constant", 0, 0.1},
	{"odd", 3, 24, 2, 3e-3, 0.05, 0.5, "constant", 0, 0.1},
	{"wide", 2, 45, 4, 2e-3, 0.1, 1.0, "cosine", 2, 0.2},
	{"deep", 4, 20, 3, 5e-3, 0.0, 0.0, "constant", 2, 0.1},
};
static const char *ref_policies[] = {"off", "full;head=chunked", "offload",
	"h.0=offload;head=chunked"};

static void reference_run(const ref_case *c, const char *policy)
{
	char rel[256], what[160];
	eng_err err;
	snprintf(rel, sizeof rel, "reference/%s", c->dir);
	char *dir = t_data(rel);
	eng_trainer tr;
	t_trainer(&tr,
		"{\"model\":{\"init_from\":\"%s\"},\"data\":{\"train\":\"%s/train.bin\"},"
		"\"batch\":%d,\"seq_len\":%d,\"steps\":%d,\"threads\":2,\"device\":\"cuda\","
		"\"optim\":{\"lr\":%g,\"beta1\":0.9,\"beta2\":0.95,\"eps\":1e-8,"
		"\"weight_decay\":%g,\"grad_clip\":%g},"
		"\"schedule\":{\"kind\":\"%s\",\"warmup\":%d,\"min_lr_frac\":%g},"
		"\"remat\":{\"chunk_rows\":16}}",
		dir, dir, c->B, c->T, c->steps, c->lr, c->wd, c->clip, c->sched, c->warmup,
		c->min_lr_frac);
	set_policy(&tr, policy);
	snprintf(rel, sizeof rel, "reference/%s/expected.safetensors", c->dir);
	char *exp_path = t_data(rel);
	eng_st_file ex;
	ck_assert_msg(eng_st_read(&ex, exp_path, &err) == 0, "%s", err.msg);
	const eng_model *m = &tr.model;
	for (int s = 1; s <= c->steps; s++) {
		float loss = step(&tr), rl;
		char name[32];
		snprintf(name, sizeof name, "loss.step%d", s);
		ck_assert_msg(eng_st_get_f32(&ex, name, 0, NULL, &rl, &err) == 0, "%s", err.msg);
		snprintf(what, sizeof what, "%s [%s] loss step %d", c->dir, policy, s);
		check_err(what, fabs(loss - rl) / fabs(rl), 1e-5);
		if (s > 1)
			continue;
		/* step 1's gradients, before clipping (the GPU clips inside AdamW) */
		float *g = gpu_grads(&tr);
		double worst = 0;
		const char *worst_name = "";
		for (int i = 0; i < m->ntensors; i++) {
			const eng_ptensor *t = &m->tensors[i];
			float *r = malloc(t->numel * sizeof(float));
			char full[ENG_NAME_MAX + 8];
			snprintf(full, sizeof full, "grad.%s", t->name);
			ck_assert_msg(eng_st_get_f32(&ex, full, t->ndim, t->shape, r, &err) == 0, "%s",
				err.msg);
			double e = t_rel_l2(g + t->offset, r, t->numel);
			if (e > worst) {
				worst = e;
				worst_name = t->name;
			}
			free(r);
		}
		snprintf(what, sizeof what, "%s [%s] worst gradient %s", c->dir, policy, worst_name);
		check_err(what, worst, 1e-4);
		free(g);
	}
	sync_host(&tr);
	double worst = 0;
	const char *worst_name = "";
	for (int i = 0; i < m->ntensors; i++) {
		const eng_ptensor *t = &m->tensors[i];
		float *r = malloc(t->numel * sizeof(float));
		char full[ENG_NAME_MAX + 8];
		snprintf(full, sizeof full, "param.%s", t->name);
		ck_assert_msg(eng_st_get_f32(&ex, full, t->ndim, t->shape, r, &err) == 0, "%s", err.msg);
		double e = t_rel_l2(m->params + t->offset, r, t->numel);
		if (e > worst) {
			worst = e;
			worst_name = t->name;
		}
		free(r);
	}
	snprintf(what, sizeof what, "%s [%s] worst weight %s", c->dir, policy, worst_name);
	check_err(what, worst, 3e-4);
	eng_st_free(&ex);
	eng_trainer_free(&tr);
	free(exp_path);
	free(dir);
}

/* one case per process (CUDA and its libraries load once), every policy */
START_TEST(test_cuda_reference_fp32)
{
	setenv("REMAT_CUDA_PRECISION", "fp32", 1);
	for (size_t k = 0; k < sizeof ref_policies / sizeof ref_policies[0]; k++)
		reference_run(&ref_cases[_i], ref_policies[k]);
}
END_TEST

/* ---- against the CPU model ---- */

typedef struct tolset {
	double loss, act, grad, weight;
} tolset;

static const tolset tol_fp32 = {1e-5, 1e-4, 1e-4, 1e-4};
static const tolset tol_bf16 = {2e-2, 3e-2, 1.5e-1, 1.5e-1};

/* The key bias (the middle third of c_attn.bias) has a gradient of zero in exact arithmetic:
 * adding b_k to every key adds q.b_k to a whole row of scores, which softmax ignores. What a
 * backend computes there is its own rounding noise, and AdamW, dividing by the gradient's
 * size, makes of that noise updates of up to about lr a step whose signs follow the order
 * of summation. Two correct backends part there (the emulated device measured 1.0-1.5
 * relative in float32 and 1.4e3 in bf16, against a CPU value of 3e-6 after 3 steps), so the
 * weights are compared without it, and key_bias_bounded checks what AdamW allows instead. */
static int key_bias(const eng_ptensor *t)
{
	const char *s = strstr(t->name, ".attn.c_attn.bias");
	return s && s[strlen(".attn.c_attn.bias")] == '\0' && t->numel % 3 == 0;
}

/* the worst relative L2 error over the tensors, the key biases' middle third left out when
 * skip_key is set (see key_bias) */
static double worst_tensor(const eng_model *m, const float *a, const float *b, int skip_key,
	const char **name)
{
	double worst = 0;
	*name = "";
	for (int i = 0; i < m->ntensors; i++) {
		const eng_ptensor *t = &m->tensors[i];
		const float *x = a + t->offset, *y = b + t->offset;
		double e;
		if (skip_key && key_bias(t)) {
			size_t c = t->numel / 3;
			e = fmax(t_rel_l2(x, y, c), t_rel_l2(x + 2 * c, y + 2 * c, c));
		} else {
			e = t_rel_l2(x, y, t->numel);
		}
		if (e > worst) {
			worst = e;
			*name = t->name;
		}
	}
	return worst;
}

/* every key bias within steps * 2 lr of its start (0): AdamW moves a parameter by at most
 * about lr a step whatever its gradient (|m^| / sqrt(v^) stays near 1 over a few steps) */
static void key_bias_bounded(const eng_model *m, const float *p, const char *who, double lr)
{
	double bound = 2.0 * STEPS * lr;
	for (int i = 0; i < m->ntensors; i++) {
		const eng_ptensor *t = &m->tensors[i];
		if (!key_bias(t))
			continue;
		size_t c = t->numel / 3;
		double worst = 0;
		for (size_t j = 0; j < c; j++)
			worst = fmax(worst, fabs(p[t->offset + c + j]));
		if (verbose())
			fprintf(stderr, "cuda: %s %s key third, largest %.3e (bound %.0e)\n", who,
				t->name, worst, bound);
		ck_assert_msg(worst <= bound, "%s %s: a key bias of %.3e, past AdamW's %.0e", who,
			t->name, worst, bound);
	}
}

/* _i: 0 float32, 1 bf16 (cuDNN attention where it serves), 2 bf16 with our attention */
START_TEST(test_cuda_matches_cpu)
{
	const tolset *tol = _i == 0 ? &tol_fp32 : &tol_bf16;
	const char *prec = _i == 0 ? "fp32" : "bf16";
	char what[160];
	eng_err err;
	setenv("REMAT_CUDA_PRECISION", prec, 1);
	setenv("REMAT_CUDA_ATTENTION", _i == 2 ? "own" : "cudnn", 1);
	eng_trainer cpu, gpu;
	gpl_trainer(&cpu, "cpu", 0.0, NULL);
	gpl_trainer(&gpu, "cuda", 0.0, NULL);
	if (verbose())
		fprintf(stderr, "cuda: %s\n", eng_trainer_backend(&gpu));
	const eng_model *m = &cpu.model;
	int L = m->cfg.n_layer;
	size_t nact = (size_t)m->B * m->T * m->cfg.n_embd;
	float *act = malloc(nact * sizeof(float));
	for (int s = 1; s <= STEPS; s++) {
		float lc = step(&cpu), lg = step(&gpu);
		snprintf(what, sizeof what, "%s step %d loss (%.6f vs %.6f)", prec, s, lg, lc);
		check_err(what, fabs(lg - lc) / fabs(lc), tol->loss);
		if (s > 1)
			continue;
		/* the inputs of every block and of ln_f, from step 1's forward */
		for (int l = 0; l <= L; l++) {
			ck_assert_msg(eng_cuda_get_block_input(eng_backend_gpu(gpu.be), l, act,
					      &err) == 0, "%s", err.msg);
			snprintf(what, sizeof what, "%s step 1 input of %s%d", prec,
				l < L ? "h." : "ln_f ", l);
			check_err(what, t_rel_l2(act, l < L ? m->lay.saved[l].x : m->lay.head.xf, nact), tol->act);
		}
		const char *name;
		float *g = gpu_grads(&gpu);
		double e = worst_tensor(m, g, m->grads, 0, &name);
		snprintf(what, sizeof what, "%s step 1 worst gradient %s", prec, name);
		check_err(what, e, tol->grad);
		free(g);
	}
	sync_host(&gpu);
	const char *name;
	double e = worst_tensor(m, gpu.model.params, m->params, 1, &name);
	snprintf(what, sizeof what, "%s weights after %d steps, worst %s", prec, STEPS, name);
	check_err(what, e, tol->weight);
	key_bias_bounded(m, m->params, "cpu", GPL_LR);
	key_bias_bounded(m, gpu.model.params, prec, GPL_LR);
	free(act);
	eng_trainer_free(&gpu);
	eng_trainer_free(&cpu);
}
END_TEST

/* ---- every policy, the same numbers ---- */

/* applied before step 1; "A|B" switches to B after step 1 */
static const char *policies[] = {"off", "selective", "full", "offload", "head=chunked",
	"h.0=offload;h.1=full;head=chunked", "full;head=chunked", "off|offload",
	"offload|h.0=selective;h.1=full"};
#define NPOL (int)(sizeof policies / sizeof policies[0])

typedef struct run_result {
	float loss[STEPS];
	float *params;
} run_result;

static void run_policy(const char *text, run_result *r)
{
	char first[128], *second;
	snprintf(first, sizeof first, "%s", text);
	second = strchr(first, '|');
	if (second)
		*second++ = '\0';
	eng_trainer tr;
	gpl_trainer(&tr, "cuda", 1.0, NULL); /* clipping engages: its scale goes through AdamW */
	set_policy(&tr, first);
	for (int s = 0; s < STEPS; s++) {
		if (s == 1 && second)
			set_policy(&tr, second);
		r->loss[s] = step(&tr);
	}
	sync_host(&tr);
	r->params = malloc(tr.model.nfloats * sizeof(float));
	ck_assert_ptr_nonnull(r->params);
	memcpy(r->params, tr.model.params, tr.model.nfloats * sizeof(float));
	eng_trainer_free(&tr);
}

/* _i: 0 float32, 1 bf16 with our attention (both bitwise), 2 bf16 with cuDNN's */
START_TEST(test_cuda_policies_same_numbers)
{
	int bitwise = _i < 2;
	const char *prec = _i == 0 ? "fp32" : "bf16";
	setenv("REMAT_CUDA_PRECISION", prec, 1);
	setenv("REMAT_CUDA_ATTENTION", _i == 2 ? "cudnn" : "own", 1);
	run_result base, r;
	run_policy(policies[0], &base);
	eng_trainer probe;
	gpl_trainer(&probe, "cuda", 1.0, NULL);
	size_t nf = probe.model.nfloats;
	eng_trainer_free(&probe);
	for (int k = 1; k < NPOL; k++) {
		run_policy(policies[k], &r);
		for (int s = 0; s < STEPS; s++) {
			if (bitwise)
				ck_assert_msg(memcmp(&r.loss[s], &base.loss[s], sizeof(float)) == 0,
					"%s [%s]: step %d loss %.9g, under off %.9g", prec, policies[k],
					s + 1, r.loss[s], base.loss[s]);
			else
				check_err("bf16 cuDNN loss against off", fabs(r.loss[s] - base.loss[s]) /
					fabs(base.loss[s]), 1e-3);
		}
		if (bitwise)
			ck_assert_msg(memcmp(r.params, base.params, nf * sizeof(float)) == 0,
				"%s [%s]: weights differ from the run under off", prec, policies[k]);
		else
			check_err("bf16 cuDNN weights against off", t_rel_l2(r.params, base.params, nf),
				1e-3);
		free(r.params);
	}
	free(base.params);
}
END_TEST

/* ---- activation bytes per mode, on the device ---- */

/* _i: 0 float32, 1 bf16 */
START_TEST(test_cuda_activation_bytes)
{
	const char *prec = _i == 0 ? "fp32" : "bf16";
	setenv("REMAT_CUDA_PRECISION", prec, 1);
	eng_trainer tr;
	gpl_trainer(&tr, "cuda", 1.0, NULL);
	static const char *modes[] = {"off", "selective", "full", "offload"};
	size_t dev[4], host[4], head_off = 0, head_chunked;
	const eng_model *m = &tr.model;
	for (int k = 0; k < 4; k++) {
		set_policy(&tr, modes[k]);
		step(&tr); /* the layout must also run */
		dev[k] = eng_trainer_saved_bytes(&tr, 0);
		host[k] = eng_cuda_offloaded_bytes(eng_backend_gpu(tr.be), 0);
		for (int l = 1; l < m->cfg.n_layer; l++)
			ck_assert_uint_eq(eng_trainer_saved_bytes(&tr, l), dev[k]);
		if (k == 0)
			head_off = eng_trainer_saved_bytes(&tr, m->cfg.n_layer);
		if (k < 3) {
			/* what remat-plan predicts, within 5 % (design.md §3): float32, and bf16
			 * through the model's act_bf16, which the backend sets */
			eng_plan_section ps;
			eng_plan_block(&m->cfg, m->B, m->T, (eng_mode)k, &ps);
			double r = (double)dev[k] / (double)ps.saved_bytes;
			ck_assert_msg(r > 0.95 && r < 1.05, "%s: measured %zu, planned %zu", modes[k],
				dev[k], ps.saved_bytes);
		}
	}
	set_policy(&tr, "head=chunked");
	head_chunked = eng_trainer_saved_bytes(&tr, m->cfg.n_layer);
	fprintf(stderr, "cuda: saved activations per block (tiny, batch 4 x 64, %s): off %zu, "
			"selective %zu, full %zu, offload %zu on the device + %zu pinned on the host; "
			"head off %zu, chunked %zu\n", prec, dev[0], dev[1], dev[2], dev[3], host[3],
		head_off, head_chunked);
	ck_assert_msg(dev[2] < dev[1] && dev[1] < dev[0], "full < selective < off");
	ck_assert_uint_eq(dev[3], dev[2]); /* offload keeps the block input, as full */
	ck_assert_uint_eq(host[0], 0);
	ck_assert_msg(host[3] >= dev[0] - dev[3], "offloaded %zu < what off keeps but x %zu",
		host[3], dev[0] - dev[3]);
	ck_assert_msg(head_chunked < head_off, "head chunked < off");
	eng_trainer_free(&tr);
}
END_TEST

/* ---- memory a policy change frees goes back to the device ---- */

START_TEST(test_cuda_memory_returned)
{
	setenv("REMAT_CUDA_PRECISION", "fp32", 1);
	eng_trainer tr;
	/* n_embd 256 at batch 4 x 256: a (B,T,C) activation is 1 MiB, an arena of its own */
	t_trainer(&tr,
		"{\"model\":{\"n_layer\":2,\"n_embd\":256,\"n_head\":4,\"n_positions\":256,"
		"\"vocab_size\":256},\"data\":{\"train\":\"" GPL "\",\"format\":\"bytes\"},"
		"\"batch\":4,\"seq_len\":256,\"steps\":5,\"threads\":2,\"device\":\"cuda\"}");
	eng_cuda_mem_stats off, full, again;
	set_policy(&tr, "off");
	step(&tr);
	eng_cuda_mem_get_stats(&off);
	set_policy(&tr, "full");
	eng_cuda_mem_get_stats(&full);
	size_t freed = off.current[ENG_MEM_ACTIVATIONS] - full.current[ENG_MEM_ACTIVATIONS];
	fprintf(stderr, "cuda: off -> full freed %zu activation bytes; reserved %zu -> %zu, "
			"device free %zu -> %zu\n", freed, off.reserved, full.reserved,
		off.device_free, full.device_free);
	ck_assert_msg(full.current[ENG_MEM_ACTIVATIONS] < off.current[ENG_MEM_ACTIVATIONS],
		"activations did not shrink");
	/* the recompute pool grows, the activations shrink by more: the difference is what
	 * cudaFree gave back (small allocations share arenas: a few may stay) */
	double grown = (double)full.current[ENG_MEM_RECOMPUTE] - off.current[ENG_MEM_RECOMPUTE];
	double dropped = (double)off.reserved - full.reserved;
	ck_assert_msg(dropped >= (double)freed - grown - 4.0 * ENG_CUDA_ARENA_SMALL,
		"reserved %zu -> %zu after freeing %zu (pool grew %.0f)", off.reserved,
		full.reserved, freed, grown);
	ck_assert_msg(full.device_free > off.device_free, "cudaMemGetInfo's free did not rise");
	set_policy(&tr, "off");
	eng_cuda_mem_get_stats(&again);
	ck_assert_uint_eq(again.current[ENG_MEM_ACTIVATIONS], off.current[ENG_MEM_ACTIVATIONS]);
	step(&tr);
	eng_trainer_free(&tr);
}
END_TEST

/* ---- remat-train with device cuda ---- */

START_TEST(test_cuda_remat_train)
{
	char *tmp = NULL, *out = NULL, *job = NULL, *save = NULL;
	ck_assert(asprintf(&tmp, "%s/cuda-train", t_env("REMAT_TMP")) > 0);
	mkdir(tmp, 0777);
	ck_assert(asprintf(&save, "%s/ckpt", tmp) > 0);
	ck_assert(asprintf(&job, "%s/job.json", tmp) > 0);
	char text[1024];
	snprintf(text, sizeof text,
		"{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"" GPL "\",\"format\":"
		"\"bytes\"},\"batch\":8,\"seq_len\":64,\"steps\":40,\"device\":\"cuda\","
		"\"optim\":{\"lr\":3e-3},\"schedule\":\"constant\",\"save\":{\"dir\":\"%s\"}}",
		save);
	t_write_file(job, text, strlen(text));
	const char *ver[] = {"--version", NULL};
	ck_assert_int_eq(t_train_run(&out, 0, ver), 0);
	ck_assert_msg(strstr(out, "backend cuda: GPU 0"), "%s", out);
	free(out);
	const char *args[] = {"--json", "--remat-schedule", "10:offload,20:h.0=full;head=chunked",
		job, NULL};
	int rc = t_train_run(&out, 0, args);
	ck_assert_msg(rc == 0, "remat-train exited %d:\n%s", rc, out);
	double first = -1, last = -1;
	int lines = 0;
	for (char *p = strstr(out, "{\"step\""); p; p = strstr(p + 1, "{\"step\"")) {
		char *l = strstr(p, "\"loss\":");
		ck_assert_ptr_nonnull(l);
		double v = atof(l + 7);
		if (first < 0)
			first = v;
		last = v;
		lines++;
	}
	ck_assert_msg(lines == 40, "%d step lines:\n%s", lines, out);
	ck_assert_msg(last < first - 0.5, "loss %g -> %g: not learning", first, last);
	/* the checkpoint of the last step verifies */
	char ck[512];
	eng_err err;
	snprintf(ck, sizeof ck, "%s/step_00000040", save);
	ck_assert_msg(eng_ckpt_verify(ck, &err) == 0, "%s", err.msg);
	free(out);
	free(job);
	free(save);
	free(tmp);
}
END_TEST

/* ---- what needs no GPU ---- */

START_TEST(test_cuda_offload_refused_on_cpu)
{
	eng_trainer tr;
	eng_policy p;
	eng_err err;
	gpl_trainer(&tr, "cpu", 1.0, NULL);
	ck_assert_int_eq(eng_trainer_parse_policy(&tr, "h.1=offload", &p, &err), 0);
	ck_assert_int_eq(eng_trainer_set_policy(&tr, &p, &err), -1);
	ck_assert_msg(strstr(err.msg, "offload") && strstr(err.msg, "needs device cuda"), "%s",
		err.msg);
	ck_assert_int_eq(tr.policy.block[1], ENG_MODE_OFF); /* unchanged */
	eng_trainer_free(&tr);
	/* from the job spec: refused before training */
	eng_spec spec;
	ck_assert_int_eq(eng_spec_parse(&spec,
		"{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"" GPL "\",\"format\":"
		"\"bytes\"},\"remat\":{\"default\":\"offload\"}}", &err), 0);
	ck_assert_int_eq(eng_trainer_init(&tr, &spec, &err), -1);
	ck_assert_msg(strstr(err.msg, "needs device cuda"), "%s", err.msg);
}
END_TEST

START_TEST(test_cuda_unavailable_refused)
{
	eng_spec spec;
	eng_trainer tr;
	eng_err err;
	ck_assert_int_eq(eng_spec_parse(&spec,
		"{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"" GPL "\",\"format\":"
		"\"bytes\"},\"device\":\"cuda\"}", &err), 0);
	ck_assert_int_eq(eng_trainer_init(&tr, &spec, &err), -1);
	ck_assert_msg(strstr(err.msg, "device 'cuda' is not available: "), "%s", err.msg);
}
END_TEST

/* daemon-info's backends and gpus agree with the probe */
START_TEST(test_cuda_backends_json)
{
	json_t *o = json_object();
	eng_cuda_info ci;
	ck_assert_int_eq(eng_devices_json(o), 0);
	eng_cuda_probe(&ci);
	json_t *b = json_object_get(o, "backends"), *g = json_object_get(o, "gpus");
	ck_assert(json_is_array(b) && json_is_array(g));
	ck_assert_str_eq(json_string_value(json_array_get(b, 0)), "cpu");
	ck_assert_uint_eq(json_array_size(b), ci.ngpus > 0 ? 2 : 1);
	ck_assert_uint_eq(json_array_size(g), (size_t)ci.ngpus);
	for (int i = 0; i < ci.ngpus; i++) {
		json_t *e = json_array_get(g, i);
		ck_assert_str_eq(json_string_value(json_object_get(e, "name")), ci.gpu[i].name);
		ck_assert(json_integer_value(json_object_get(e, "memory_bytes")) > 0);
	}
	json_decref(o);
}
END_TEST

int t_cuda_usable(char *why, size_t n)
{
	int fd[2];
	if (pipe(fd) < 0) {
		snprintf(why, n, "pipe: %s", strerror(errno));
		return 0;
	}
	pid_t pid = fork();
	if (pid == 0) {
		eng_cuda_info ci;
		char msg[320];
		eng_cuda_probe(&ci);
		snprintf(msg, sizeof msg, "%d %s", ci.ngpus, ci.why);
		ssize_t w = write(fd[1], msg, strlen(msg));
		_exit(w > 0 ? 0 : 1);
	}
	close(fd[1]);
	char buf[320] = "";
	ssize_t r = pid > 0 ? read(fd[0], buf, sizeof buf - 1) : -1;
	close(fd[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	buf[r > 0 ? r : 0] = '\0';
	const char *msg = strchr(buf, ' ');
	snprintf(why, n, "%s", msg ? msg + 1 : "the CUDA probe failed");
	return atoi(buf) > 0;
}

/* ---- out of memory is a retry, on the device too ---- */

/* 4 steps asking for want[s] (NULL: the policy there is), float32; with fail_n the
 * fail_n-th allocation from the first step on (the device's among them) is refused. The
 * weights at the end into *params (malloc'd), the retries counted into *retries. */
static void run_wanting(unsigned long fail_n, float **params, int *retries,
	unsigned long *allocs)
{
	static const char *const want[] = {NULL, "full,head=chunked", "off", "selective"};
	eng_trainer tr;
	eng_err err;
	gpl_trainer(&tr, "cuda", 1.0, NULL);
	unsigned long a0 = eng_mem_allocs();
	eng_mem_fail_nth(fail_n);
	for (int s = 0; s < 4; s++) { /* of the trainer's STEPS + 2 */
		eng_policy p;
		eng_step_stats st;
		const char *w = want[s];
		if (w)
			ck_assert_msg(eng_trainer_parse_policy(&tr, w, &p, &err) == 0, "%s", err.msg);
		ck_assert_msg(eng_trainer_step_as(&tr, w ? &p : NULL, &st, &err) == 0,
			"allocation %lu refused: step %d: %s", fail_n, s + 1, err.msg);
	}
	eng_mem_fail_nth(0);
	*allocs = eng_mem_allocs() - a0;
	*retries = tr.oom_retries;
	sync_host(&tr);
	*params = malloc(tr.model.nfloats * sizeof(float));
	ck_assert_ptr_nonnull(*params);
	memcpy(*params, tr.model.params, tr.model.nfloats * sizeof(float));
	eng_trainer_free(&tr);
}

/* A device allocation refused at each site the steps allocate at (the buffers of every
 * policy change) is retried under a policy that fits, counted, and the run ends with an
 * uninterrupted run's weights, bit for bit (float32: every policy gives the same bits). */
START_TEST(test_cuda_oom_retry_every_site)
{
	setenv("REMAT_CUDA_PRECISION", "fp32", 1);
	setenv("REMAT_CUDA_ATTENTION", "own", 1);
	float *ref, *got;
	int retries;
	unsigned long allocs, a;
	run_wanting(0, &ref, &retries, &allocs);
	ck_assert_int_eq(retries, 0);
	ck_assert_msg(allocs >= 5, "the steps allocate only %lu times", allocs);
	eng_trainer probe;
	gpl_trainer(&probe, "cuda", 1.0, NULL);
	size_t nf = probe.model.nfloats;
	eng_trainer_free(&probe);
	for (unsigned long n = 1; n <= allocs; n++) {
		run_wanting(n, &got, &retries, &a);
		ck_assert_msg(retries >= 1, "allocation %lu of %lu refused: no retry counted", n,
			allocs);
		ck_assert_msg(memcmp(got, ref, nf * sizeof(float)) == 0, "allocation %lu of %lu "
			      "refused: the weights differ from an uninterrupted run's", n, allocs);
		free(got);
	}
	free(ref);
}
END_TEST

/* The measured peaks of a remat-train run of `steps` steps of mini at B x 256 on the GPU
 * with the spec's "remat" object remat: each step's into peaks, as the controller weighs it
 * (the device's tracked peak and what else its used memory held), the last step's policy
 * as JSON into policy. Returns the most. */
static double budget_run(int B, const char *remat, int steps, double *peaks, char **policy)
{
	char *dir = t_tmp_dir("cuda_budget"), *job = NULL, *out = NULL, text[1024];
	ck_assert(asprintf(&job, "%s/job.json", dir) > 0);
	snprintf(text, sizeof text,
		"{\"model\":{\"preset\":\"mini\"},\"data\":{\"train\":\"" GPL "\",\"format\":"
		"\"bytes\"},\"batch\":%d,\"seq_len\":256,\"steps\":%d,\"device\":\"cuda\","
		"\"remat\":%s}", B, steps, remat);
	t_write_file(job, text, strlen(text));
	const char *args[] = {"--json", job, NULL};
	int rc = t_train_run(&out, 0, args), n = 0;
	ck_assert_msg(rc == 0, "remat-train exited %d:\n%s", rc, out);
	double most = 0;
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		json_t *o = strncmp(line, "{\"step\"", 7) == 0 ? json_loads(line, 0, NULL) : NULL;
		if (!o)
			continue;
		double m = json_number_value(json_object_get(o, "peak_bytes")) +
			   json_number_value(json_object_get(o, "untracked_bytes"));
		ck_assert_msg(m > 0, "step line without a measured peak: %s", line);
		ck_assert_int_lt(n, steps);
		peaks[n++] = m;
		most = m > most ? m : most;
		free(*policy);
		*policy = json_dumps(json_object_get(o, "policy"), JSON_SORT_KEYS | JSON_COMPACT);
		json_decref(o);
	}
	ck_assert_msg(n == steps, "%d step lines of %d", n, steps);
	free(out);
	free(job);
	free(dir);
	return most;
}

/* The controller keeps a device budget set between the least policy's peak (every block
 * full, the head chunked) and off's, both measured first the way the controller measures
 * (the device's used memory): every step of the budgeted run stays at or under it, and the
 * run uses the room: its policy is neither (issue 34's last check). B rows of 256: enough
 * that the activations' gap stands out of what the CUDA context and the libraries hold. */
START_TEST(test_cuda_controller_keeps_budget)
{
	enum { PROBE = 3, RUN = 8, B = 32 };
	double pk[RUN];
	char *pol_off = NULL, *pol_least = NULL, *pol = NULL, remat[128];
	double off = budget_run(B, "{\"default\":\"off\"}", PROBE, pk, &pol_off);
	double least = budget_run(B, "{\"default\":\"full\",\"sections\":{\"head\":"
		"\"chunked\"}}", PROBE, pk, &pol_least);
	ck_assert_msg(off > least * 1.1, "off's peak %.1f MiB is not above the least's %.1f MiB "
		"by a tenth: no room for a budget between them", off / 1048576, least / 1048576);
	double budget = (off + least) / 2;
	snprintf(remat, sizeof remat, "{\"budget\":%.0f}", budget);
	double most = budget_run(B, remat, RUN, pk, &pol);
	for (int i = 0; i < RUN; i++)
		ck_assert_msg(pk[i] <= budget, "step %d: %.1f MiB over the budget of %.1f MiB "
			"(least %.1f, off %.1f)", i + 1, pk[i] / 1048576, budget / 1048576,
			least / 1048576, off / 1048576);
	ck_assert_msg(strcmp(pol, pol_least) != 0 && strcmp(pol, pol_off) != 0, "under a "
		"budget of %.1f MiB (least %.1f, off %.1f) the run ended under %s", budget / 1048576,
		least / 1048576, off / 1048576, pol);
	if (verbose())
		fprintf(stderr, "cuda: budget %.1f MiB between least %.1f and off %.1f: most %.1f, "
			"policy %s\n", budget / 1048576, least / 1048576, off / 1048576,
			most / 1048576, pol);
	free(pol_off);
	free(pol_least);
	free(pol);
}
END_TEST

Suite *suite_cuda(void)
{
	Suite *s = suite_create("cuda");
	char why[320];
	int usable = t_cuda_usable(why, sizeof why);
	TCase *tc = tcase_create("no_gpu_needed");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_cuda_offload_refused_on_cpu);
	tcase_add_test(tc, test_cuda_backends_json);
	if (!usable)
		tcase_add_test(tc, test_cuda_unavailable_refused);
	suite_add_tcase(s, tc);
	if (!usable) {
		fprintf(stderr, "cuda: GPU tests skipped: %s\n", why);
		return s;
	}
	tc = tcase_create("gpu");
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_loop_test(tc, test_cuda_reference_fp32, 0,
		(int)(sizeof ref_cases / sizeof ref_cases[0]));
	tcase_add_loop_test(tc, test_cuda_matches_cpu, 0, 3);
	tcase_add_loop_test(tc, test_cuda_policies_same_numbers, 0, 3);
	tcase_add_loop_test(tc, test_cuda_activation_bytes, 0, 2);
	tcase_add_test(tc, test_cuda_memory_returned);
	tcase_add_test(tc, test_cuda_remat_train);
	tcase_add_test(tc, test_cuda_oom_retry_every_site);
	tcase_add_test(tc, test_cuda_controller_keeps_budget);
	suite_add_tcase(s, tc);
	return s;
}
