/* test_llama_kernels.c - the Llama family's CPU kernels (kernels/cpu/kn_llama.c, and the
 * grouped key/value heads of kn_attention.c), as test_kernels.c checks the others.
 *
 * Every backward against its forward by central differences (t_kn.h: loss sum(out * r),
 * tensor by tensor); every forward against Hugging Face's equations written out in double
 * (LlamaRMSNorm, LlamaRotaryEmbedding with apply_rotary_pos_emb and rotate_half, LlamaMLP's
 * act_fn(gate) * up); grouped-query attention against the multi-head kernel run on keys and
 * values repeated as HF's repeat_kv repeats them; the recompute and thread-count promises
 * bitwise. Last, the kernels composed into a Llama forward and backward (test code, q|k|v
 * and gate|up fused as the engine will fuse them) on reference/llama and
 * reference/llama_tied's first batch: loss within 3.4e-8, logits 1.4e-7 and every gradient
 * 5.5e-7 of the float64 reference, which checks the reference's equations against code
 * written apart from them.
 */
#include "tests.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "eng_st.h"
#include "kn.h"
#include "t_kn.h"
#include "t_util.h"

#define TIMEOUT 60
#define SEED 0x11a3a2025u
#define REF_TOL 1e-6 /* a float kernel against the same equations in double */

/* FD shapes: odd sizes, several rows per reduction */
#define N_ 6
#define C_ 10
#define I_ 7

/* ---- RMSNorm ---- */

struct rms_ctx {
	float *inp, *w; /* (N,C), (C): perturbed */
	float *out, *rstd;
	const float *r;
	int N, C;
};

static double rms_loss(void *p)
{
	struct rms_ctx *c = p;
	kn_rmsnorm_forward(c->out, c->rstd, c->inp, c->w, 1e-5f, c->N, c->C, NULL);
	return dotd(c->out, c->r, (size_t)c->N * c->C);
}

START_TEST(test_kn_rmsnorm_backward_fd)
{
	int N = N_, C = C_;
	size_t nc = (size_t)N * C;
	rng_seed(SEED);
	kn_set_threads(2);
	struct rms_ctx c = {fnew(nc), fnew(C), fnew(nc), fnew(N), NULL, N, C};
	float *r = fnew(nc), *dinp = fnew(nc), *dw = fnew(C), *ni = fnew(nc), *nw = fnew(C);
	fill(c.inp, nc, -1.0f, 2.0f), fill(c.w, C, -1.5f, 1.5f), fill(r, nc, -1.0f, 1.0f);
	c.r = r;
	rms_loss(&c);
	kn_rmsnorm_backward(dinp, dw, r, c.inp, c.rstd, c.w, N, C, NULL);
	fd_grad(ni, c.inp, nc, rms_loss, &c);
	fd_grad(nw, c.w, C, rms_loss, &c);
	expect_grad("kn_rmsnorm_backward", "dinp", dinp, ni, nc);
	expect_grad("kn_rmsnorm_backward", "dw", dw, nw, C);
	free(nw), free(ni), free(dw), free(dinp), free(r);
	free(c.rstd), free(c.out), free(c.w), free(c.inp);
}
END_TEST

/* LlamaRMSNorm in double; apply redoes the forward bitwise; the backward accumulates;
 * 1 and 2 threads give the same bits */
START_TEST(test_kn_rmsnorm_reference)
{
	int N = 37, C = 200; /* more than one 64-column task */
	size_t nc = (size_t)N * C;
	float eps = 1e-6f;
	rng_seed(SEED);
	float *x = fnew(nc), *w = fnew(C), *r = fnew(nc), *out = fnew(nc), *rstd = fnew(N);
	float *want = fnew(nc), *again = fnew(nc);
	fill(x, nc, -2.0f, 2.0f), fill(w, C, -1.0f, 1.0f), fill(r, nc, -1.0f, 1.0f);
	kn_set_threads(2);
	kn_rmsnorm_forward(out, rstd, x, w, eps, N, C, NULL);
	for (int i = 0; i < N; i++) {
		double ss = 0.0;
		for (int c = 0; c < C; c++)
			ss += (double)x[i * C + c] * x[i * C + c];
		double s = 1.0 / sqrt(ss / C + eps);
		for (int c = 0; c < C; c++)
			want[i * C + c] = (float)(w[c] * (x[i * C + c] * s));
	}
	double err = rel_l2(out, want, nc);
	ck_assert_msg(err < REF_TOL, "kn_rmsnorm_forward off LlamaRMSNorm in double by %.3e", err);
	fill_const(again, nc, GARBAGE);
	kn_rmsnorm_apply(again, x, rstd, w, N, C, NULL);
	expect_bitwise("kn_rmsnorm_apply", "out", "against the forward", again, out, nc);

	float *dx[2], *dw[2];
	for (int k = 0; k < 2; k++) {
		kn_set_threads(k + 1);
		dx[k] = fnew(nc), dw[k] = fnew(C);
		kn_rmsnorm_backward(dx[k], dw[k], r, x, rstd, w, N, C, NULL);
	}
	expect_bitwise("kn_rmsnorm_backward", "dinp", "for 1 and 2 threads", dx[1], dx[0], nc);
	expect_bitwise("kn_rmsnorm_backward", "dw", "for 1 and 2 threads", dw[1], dw[0], C);
	/* += : a second backward onto the first gives twice it, dinp and dw */
	kn_rmsnorm_backward(dx[1], dw[1], r, x, rstd, w, N, C, NULL);
	for (size_t i = 0; i < nc; i++)
		ck_assert_msg(fabsf(dx[1][i] - 2 * dx[0][i]) <= 1e-6f * (1 + fabsf(dx[0][i])),
			"kn_rmsnorm_backward: dinp does not accumulate at [%zu]", i);
	for (int c = 0; c < C; c++)
		ck_assert_msg(fabsf(dw[1][c] - 2 * dw[0][c]) <= 1e-6f * (1 + fabsf(dw[0][c])),
			"kn_rmsnorm_backward: dw does not accumulate at [%d]", c);
	for (int k = 0; k < 2; k++)
		free(dw[k]), free(dx[k]);
	free(again), free(want), free(rstd), free(out), free(r), free(w), free(x);
}
END_TEST

/* ---- rotary embeddings ---- */

/* apply_rotary_pos_emb for row position t, head h of x (ld columns a row), in double:
 * inv_freq_j = theta^(-2j/hs), emb = cat(freqs, freqs), x cos(emb) + rotate_half(x) sin */
static void rope_ref(double *out, const float *x, int t, int hs, double theta)
{
	int half = hs / 2;
	for (int i = 0; i < hs; i++) {
		int j = i % half;
		double a = t * (1.0 / pow(theta, 2.0 * j / hs));
		double rot = i < half ? -(double)x[i + half] : (double)x[i - half];
		out[i] = x[i] * cos(a) + rot * sin(a);
	}
}

START_TEST(test_kn_rope_reference)
{
	int B = 2, T = 40, nh = 3, hs = 6, ld = 5 * hs + 3; /* 3 heads rotated of 5, padding */
	double theta = 10000.0;
	size_t n = (size_t)B * T * ld;
	rng_seed(SEED);
	kn_set_threads(2);
	float *cs = fnew((size_t)T * hs), *x = fnew(n), *y = fnew(n);
	fill(x, n, -1.0f, 1.0f);
	memcpy(y, x, n * sizeof(float));
	kn_rope_table(cs, T, hs, theta);
	kn_rope_forward(y, cs, B, T, nh, hs, ld);
	double num = 0.0, den = 0.0, ref[64];
	for (int bt = 0; bt < B * T; bt++) {
		const float *xr = x + (size_t)bt * ld, *yr = y + (size_t)bt * ld;
		for (int h = 0; h < nh; h++) {
			rope_ref(ref, xr + h * hs, bt % T, hs, theta);
			for (int i = 0; i < hs; i++) {
				double d = yr[h * hs + i] - ref[i];
				num += d * d, den += ref[i] * ref[i];
			}
		}
		/* heads past nh and the padding are left alone; position 0 is the identity */
		ck_assert_msg(memcmp(yr + nh * hs, xr + nh * hs, sizeof(float) * (ld - nh * hs)) ==
			0, "kn_rope_forward wrote past its %d heads at row %d", nh, bt);
		if (bt % T == 0)
			expect_bitwise("kn_rope_forward", "x", "at position 0", yr, xr, nh * hs);
	}
	ck_assert_msg(sqrt(num / den) < REF_TOL, "kn_rope_forward off apply_rotary_pos_emb in "
		"double by %.3e", sqrt(num / den));
	/* the backward is the transpose: <R x, r> == <x, R^T r> */
	float *r = fnew(n), *rt = fnew(n);
	fill(r, n, -1.0f, 1.0f);
	memcpy(rt, r, n * sizeof(float));
	kn_rope_backward(rt, cs, B, T, nh, hs, ld);
	double lhs = dotd(y, r, n), rhs = dotd(x, rt, n);
	ck_assert_msg(fabs(lhs - rhs) < 1e-5 * (fabs(lhs) + 1), "kn_rope_backward is not the "
		"rotation's transpose: <Rx, r> %.9g, <x, R^T r> %.9g", lhs, rhs);
	free(rt), free(r), free(y), free(x), free(cs);
}
END_TEST

/* ---- SwiGLU ---- */

struct glu_ctx {
	float *gu; /* (N,2I): perturbed */
	float *h;
	const float *r;
	int N, I;
};

static double glu_loss(void *p)
{
	struct glu_ctx *c = p;
	kn_swiglu_forward(c->h, c->gu, c->N, c->I, NULL);
	return dotd(c->h, c->r, (size_t)c->N * c->I);
}

START_TEST(test_kn_swiglu_backward_fd)
{
	int N = N_, I = I_;
	size_t n2 = (size_t)N * 2 * I, n = (size_t)N * I;
	rng_seed(SEED);
	kn_set_threads(2);
	struct glu_ctx c = {fnew(n2), fnew(n), NULL, N, I};
	float *r = fnew(n), *d = fnew(n2), *nd = fnew(n2), *want = fnew(n);
	fill(c.gu, n2, -3.0f, 3.0f), fill(r, n, -1.0f, 1.0f);
	c.r = r;
	glu_loss(&c);
	for (int i = 0; i < N; i++) /* LlamaMLP: act_fn(gate_proj(x)) * up_proj(x), silu */
		for (int j = 0; j < I; j++) {
			double g = c.gu[(size_t)i * 2 * I + j], u = c.gu[(size_t)i * 2 * I + I + j];
			want[(size_t)i * I + j] = (float)(g / (1.0 + exp(-g)) * u);
		}
	double err = rel_l2(c.h, want, n);
	ck_assert_msg(err < REF_TOL, "kn_swiglu_forward off silu(g) * u in double by %.3e", err);
	fill_const(d, n2, GARBAGE); /* `=` */
	kn_swiglu_backward(d, r, c.gu, N, I, NULL);
	fd_grad(nd, c.gu, n2, glu_loss, &c);
	/* gate and up apart: one could hide the other */
	double eg = rel_l2_block(d, nd, N, I, 2 * I), eu = rel_l2_block(d + I, nd + I, N, I, 2 * I);
	ck_assert_msg(eg < FD_TOL && eu < FD_TOL, "kn_swiglu_backward off the finite differences: "
		"d gate %.3e, d up %.3e (limit %.0e)", eg, eu, FD_TOL);
	free(want), free(nd), free(d), free(r), free(c.h), free(c.gu);
}
END_TEST

/* The trailing bf (kn.h) of RMSNorm's and SwiGLU's kernels: the float32 output the same
 * bits with it as without, and bf that output rounded (test_kn_rounds_on_the_way's
 * GPT-2 kernels) */
START_TEST(test_kn_llama_rounds_on_the_way)
{
	int N = 37, C = 200, I = 150;
	size_t nc = (size_t)N * C, n = (size_t)N * I, n2 = 2 * n;
	rng_seed(SEED);
	kn_set_threads(2);
	float *x = fnew(nc), *w = fnew(C), *dy = fnew(nc), *o1 = fnew(nc), *o2 = fnew(nc);
	float *rstd = fnew(N), *gu = fnew(n2), *dh = fnew(n), *h1 = fnew(n), *h2 = fnew(n);
	float *d1 = fnew(n2 > nc ? n2 : nc), *d2 = fnew(n2 > nc ? n2 : nc);
	uint16_t *bf = calloc(n2 > nc ? n2 : nc, sizeof *bf);
	ck_assert(bf);
	fill(x, nc, -1.0f, 3.0f), fill(w, C, -1.5f, 1.5f), fill(dy, nc, -1.0f, 1.0f);
	fill(gu, n2, -3.0f, 3.0f), fill(dh, n, -1.0f, 1.0f);

	kn_rmsnorm_forward(o1, rstd, x, w, 1e-5f, N, C, NULL);
	kn_rmsnorm_forward(o2, rstd, x, w, 1e-5f, N, C, bf);
	expect_bitwise("kn_rmsnorm_forward", "out", "with bf", o2, o1, nc);
	expect_rounded("kn_rmsnorm_forward", "out", bf, o1, nc);
	memset(bf, 0, nc * sizeof *bf);
	kn_rmsnorm_apply(o2, x, rstd, w, N, C, bf);
	expect_rounded("kn_rmsnorm_apply", "out", bf, o1, nc);
	kn_rmsnorm_backward(d1, NULL, dy, x, rstd, w, N, C, NULL);
	kn_rmsnorm_backward(d2, NULL, dy, x, rstd, w, N, C, bf);
	expect_bitwise("kn_rmsnorm_backward", "dinp", "with bf", d2, d1, nc);
	expect_rounded("kn_rmsnorm_backward", "dinp", bf, d1, nc);

	kn_swiglu_forward(h1, gu, N, I, NULL);
	kn_swiglu_forward(h2, gu, N, I, bf);
	expect_bitwise("kn_swiglu_forward", "h", "with bf", h2, h1, n);
	expect_rounded("kn_swiglu_forward", "h", bf, h1, n);
	kn_swiglu_backward(d1, dh, gu, N, I, NULL);
	kn_swiglu_backward(d2, dh, gu, N, I, bf);
	expect_bitwise("kn_swiglu_backward", "dgu", "with bf", d2, d1, n2);
	expect_rounded("kn_swiglu_backward", "dgu", bf, d1, n2);

	free(bf), free(d2), free(d1), free(h2), free(h1), free(dh), free(gu), free(rstd);
	free(o2), free(o1), free(dy), free(w), free(x);
}
END_TEST

/* ---- grouped-query attention ---- */

struct gqa_ctx {
	float *qkv, *lse, *scratch, *out;
	const float *r;
	int B, T, NH, NKV, hs;
};

static double gqa_loss(void *p)
{
	struct gqa_ctx *c = p;
	kn_gqa_attention_forward(c->out, c->lse, c->scratch, c->qkv, c->B, c->T, c->NH, c->NKV,
		c->hs);
	return dotd(c->out, c->r, (size_t)c->B * c->T * c->NH * c->hs);
}

START_TEST(test_kn_gqa_attention_backward_fd)
{
	int B = 2, T = 5, NH = 4, NKV = 2, hs = 3, W = (NH + 2 * NKV) * hs;
	size_t bt = (size_t)B * T, nqkv = bt * W, no = bt * NH * hs;
	rng_seed(SEED);
	kn_set_threads(2);
	struct gqa_ctx c = {fnew(nqkv), fnew(bt * NH), fnew(kn_attention_scratch_floats(T)),
		fnew(no), NULL, B, T, NH, NKV, hs};
	float *r = fnew(no), *d = fnew(nqkv), *nd = fnew(nqkv);
	fill(c.qkv, nqkv, -2.0f, 2.0f), fill(r, no, -1.0f, 1.0f);
	c.r = r;
	gqa_loss(&c);
	fill_const(d, nqkv, GARBAGE); /* `=` */
	kn_gqa_attention_backward(d, c.scratch, r, c.qkv, c.out, c.lse, B, T, NH, NKV, hs);
	fd_grad(nd, c.qkv, nqkv, gqa_loss, &c);
	static const char *name[3] = {"dq", "dk", "dv"};
	int col[3] = {0, NH * hs, (NH + NKV) * hs}, width[3] = {NH * hs, NKV * hs, NKV * hs};
	for (int part = 0; part < 3; part++) {
		double err = rel_l2_block(d + col[part], nd + col[part], bt, width[part], W);
		ck_assert_msg(err < FD_TOL, "kn_gqa_attention_backward: %s off the finite "
			"differences by %.3e (limit %.0e)", name[part], err, FD_TOL);
	}
	free(nd), free(d), free(r), free(c.out), free(c.scratch), free(c.lse), free(c.qkv);
}
END_TEST

/* GQA is multi-head attention on keys and values repeated (HF's repeat_kv: kv head j serves
 * query heads j*rep .. j*rep+rep-1): the forward gives the same bits as the multi-head
 * kernel on the repeated qkv, dq too, and dk, dv are the repeated copies' sums; then
 * 1 and 2 threads give the same bits */
START_TEST(test_kn_gqa_attention_repeat_kv)
{
	int B = 2, T = 70, NH = 6, NKV = 2, hs = 6, rep = NH / NKV; /* two query blocks */
	int W = (NH + 2 * NKV) * hs, C = NH * hs;
	size_t bt = (size_t)B * T, nqkv = bt * W, nfull = bt * 3 * C, no = bt * C;
	size_t nl = bt * NH, sc = kn_attention_scratch_floats_for(T, 2);
	rng_seed(SEED);
	kn_set_threads(2);
	float *qkv = fnew(nqkv), *full = fnew(nfull), *r = fnew(no), *scratch = fnew(sc);
	float *o[3] = {fnew(no), fnew(no), fnew(no)}, *l[3] = {fnew(nl), fnew(nl), fnew(nl)};
	float *d[3] = {fnew(nqkv), fnew(nfull), fnew(nqkv)};
	fill(qkv, nqkv, -1.5f, 1.5f), fill(r, no, -1.0f, 1.0f);
	for (size_t i = 0; i < bt; i++) {
		const float *src = qkv + i * W;
		float *dst = full + i * 3 * C;
		memcpy(dst, src, sizeof(float) * C); /* q */
		for (int h = 0; h < NH; h++) {
			memcpy(dst + C + h * hs, src + C + (h / rep) * hs, sizeof(float) * hs);
			memcpy(dst + 2 * C + h * hs, src + C + (NKV + h / rep) * hs,
				sizeof(float) * hs);
		}
	}
	kn_gqa_attention_forward(o[0], l[0], scratch, qkv, B, T, NH, NKV, hs);
	kn_gqa_attention_backward(d[0], scratch, r, qkv, o[0], l[0], B, T, NH, NKV, hs);
	kn_attention_forward(o[1], l[1], scratch, full, B, T, C, NH);
	kn_attention_backward(d[1], scratch, r, full, o[1], l[1], B, T, C, NH);
	expect_bitwise("kn_gqa_attention_forward", "out", "against repeat_kv", o[0], o[1], no);
	expect_bitwise("kn_gqa_attention_forward", "lse", "against repeat_kv", l[0], l[1], nl);
	double num = 0.0, den = 0.0;
	for (size_t i = 0; i < bt; i++) {
		const float *g = d[0] + i * W, *f = d[1] + i * 3 * C;
		expect_bitwise("kn_gqa_attention_backward", "dq", "against repeat_kv", g, f, C);
		for (int kh = 0; kh < 2 * NKV; kh++) /* dk heads, then dv heads */
			for (int j = 0; j < hs; j++) {
				double s = 0.0;
				for (int h = (kh % NKV) * rep; h < (kh % NKV + 1) * rep; h++)
					s += f[(kh < NKV ? C : 2 * C) + h * hs + j];
				double e = g[C + kh * hs + j] - s;
				num += e * e, den += s * s;
			}
	}
	ck_assert_msg(sqrt(num / den) < REF_TOL, "kn_gqa_attention_backward: dk, dv off the "
		"sums over repeated heads by %.3e", sqrt(num / den));
	kn_set_threads(1);
	kn_gqa_attention_forward(o[2], l[2], scratch, qkv, B, T, NH, NKV, hs);
	kn_gqa_attention_backward(d[2], scratch, r, qkv, o[2], l[2], B, T, NH, NKV, hs);
	expect_bitwise("kn_gqa_attention_forward", "out", "for 1 and 2 threads", o[2], o[0], no);
	expect_bitwise("kn_gqa_attention_backward", "dqkv", "for 1 and 2 threads", d[2], d[0],
		nqkv);
	for (int k = 0; k < 3; k++)
		free(d[k]), free(l[k]), free(o[k]);
	free(scratch), free(r), free(full), free(qkv);
}
END_TEST

/* ---- the kernels composed: a Llama forward and backward against the float64 reference ---- */

/* A model of reference/<case>: its config, its weights by name, in float32 */
typedef struct llama_ref {
	int L, C, NH, NKV, hd, I, V, tied;
	double eps, theta;
	eng_st_file st;
} llama_ref;

static int jint_of(json_t *cfg, const char *key)
{
	json_t *v = json_object_get(cfg, key);
	ck_assert_msg(json_is_integer(v), "config.json: %s", key);
	return (int)json_integer_value(v);
}

static void llama_ref_open(llama_ref *r, const char *dir)
{
	char path[512];
	eng_err err;
	json_error_t jerr;
	snprintf(path, sizeof path, "%s/config.json", dir);
	json_t *cfg = json_load_file(path, 0, &jerr);
	ck_assert_msg(cfg != NULL, "%s: %s", path, jerr.text);
	r->L = jint_of(cfg, "num_hidden_layers"), r->C = jint_of(cfg, "hidden_size");
	r->NH = jint_of(cfg, "num_attention_heads"), r->NKV = jint_of(cfg, "num_key_value_heads");
	r->I = jint_of(cfg, "intermediate_size"), r->V = jint_of(cfg, "vocab_size");
	r->hd = r->C / r->NH;
	r->eps = json_real_value(json_object_get(cfg, "rms_norm_eps"));
	r->theta = json_number_value(json_object_get(cfg, "rope_theta"));
	r->tied = json_is_true(json_object_get(cfg, "tie_word_embeddings"));
	json_decref(cfg);
	snprintf(path, sizeof path, "%s/model.safetensors", dir);
	ck_assert_msg(eng_st_read(&r->st, path, &err) == 0, "%s", err.msg);
}

/* rows x cols tensor name of the reference, float32 (malloc'd), at dst when given */
static float *llama_w(const llama_ref *r, const char *name, int rows, int cols, float *dst)
{
	eng_err err;
	int64_t shape[2] = {rows, cols};
	float *w = dst ? dst : fnew((size_t)rows * (cols ? cols : 1));
	ck_assert_msg(eng_st_get_f32(&r->st, name, cols ? 2 : 1, shape, w, &err) == 0, "%s",
		err.msg);
	return w;
}

/* Decoder layer l's weights (q|k|v and gate|up fused the way the engine will fuse them:
 * rows of [q; k; v] and [gate; up], y = x W^T), its activations for the backward, and its
 * weight gradients. W = (NH + 2 NKV) hd, A = NH hd. */
typedef struct llama_layer {
	float *qkvw, *ow, *guw, *dw, *ln1, *ln2;            /* (W,C) (C,A) (2I,C) (C,I) (C) (C) */
	float *x, *r1, *h1, *qkv, *y, *lse, *xm, *r2, *h2, *gu, *m; /* saved */
	float *g[6];                                       /* gradients, as the weights */
} llama_layer;

static void layer_init(llama_layer *k, const llama_ref *r, int l, int N)
{
	int C = r->C, hd = r->hd, NH = r->NH, NKV = r->NKV, I = r->I;
	int W = (NH + 2 * NKV) * hd, A = NH * hd, at = 0, rows[3] = {A, NKV * hd, NKV * hd};
	static const char *const qkv[3] = {"q_proj", "k_proj", "v_proj"};
	char n[128];
	size_t sz[6] = {(size_t)W * C, (size_t)C * A, (size_t)2 * I * C, (size_t)C * I, C, C};
	memset(k, 0, sizeof *k);
	k->qkvw = fnew(sz[0]), k->guw = fnew(sz[2]), k->ln1 = fnew(C), k->ln2 = fnew(C);
	for (int j = 0; j < 3; at += rows[j++]) {
		snprintf(n, sizeof n, "model.layers.%d.self_attn.%s.weight", l, qkv[j]);
		llama_w(r, n, rows[j], C, k->qkvw + (size_t)at * C);
	}
	snprintf(n, sizeof n, "model.layers.%d.self_attn.o_proj.weight", l);
	k->ow = llama_w(r, n, C, A, NULL);
	snprintf(n, sizeof n, "model.layers.%d.mlp.gate_proj.weight", l);
	llama_w(r, n, I, C, k->guw);
	snprintf(n, sizeof n, "model.layers.%d.mlp.up_proj.weight", l);
	llama_w(r, n, I, C, k->guw + (size_t)I * C);
	snprintf(n, sizeof n, "model.layers.%d.mlp.down_proj.weight", l);
	k->dw = llama_w(r, n, C, I, NULL);
	snprintf(n, sizeof n, "model.layers.%d.input_layernorm.weight", l);
	llama_w(r, n, C, 0, k->ln1);
	snprintf(n, sizeof n, "model.layers.%d.post_attention_layernorm.weight", l);
	llama_w(r, n, C, 0, k->ln2);
	size_t NC = (size_t)N * C;
	k->x = fnew(NC), k->r1 = fnew(N), k->h1 = fnew(NC), k->qkv = fnew((size_t)N * W);
	k->y = fnew((size_t)N * A), k->lse = fnew((size_t)N * NH), k->xm = fnew(NC);
	k->r2 = fnew(N), k->h2 = fnew(NC), k->gu = fnew((size_t)N * 2 * I);
	k->m = fnew((size_t)N * I);
	for (int j = 0; j < 6; j++)
		k->g[j] = fnew(sz[j]);
}

static void layer_free(llama_layer *k)
{
	float *b[] = {k->qkvw, k->ow, k->guw, k->dw, k->ln1, k->ln2, k->x, k->r1, k->h1, k->qkv,
		k->y, k->lse, k->xm, k->r2, k->h2, k->gu, k->m};
	for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
		free(b[i]);
	for (int j = 0; j < 6; j++)
		free(k->g[j]);
}

/* x(N,C) in place through the layer, as modeling_llama.py: x += o(attn(rope(qkv(rms(x))))),
 * x += down(swiglu(gate|up(rms(x)))) */
static void layer_fwd(llama_layer *k, const llama_ref *r, float *x, const float *cs,
	float *sc, float *o, int B, int T)
{
	int N = B * T, C = r->C, hd = r->hd, NH = r->NH, NKV = r->NKV, I = r->I;
	int W = (NH + 2 * NKV) * hd, A = NH * hd;
	size_t NC = (size_t)N * C;
	memcpy(k->x, x, NC * sizeof(float));
	kn_rmsnorm_forward(k->h1, k->r1, x, k->ln1, (float)r->eps, N, C, NULL);
	kn_sgemm(0, 1, N, W, C, 1.0f, k->h1, C, k->qkvw, C, 0.0f, k->qkv, W);
	kn_rope_forward(k->qkv, cs, B, T, NH, hd, W);      /* q */
	kn_rope_forward(k->qkv + A, cs, B, T, NKV, hd, W); /* k */
	kn_gqa_attention_forward(k->y, k->lse, sc, k->qkv, B, T, NH, NKV, hd);
	kn_sgemm(0, 1, N, C, A, 1.0f, k->y, A, k->ow, A, 0.0f, o, C);
	for (size_t i = 0; i < NC; i++)
		x[i] += o[i];
	memcpy(k->xm, x, NC * sizeof(float));
	kn_rmsnorm_forward(k->h2, k->r2, x, k->ln2, (float)r->eps, N, C, NULL);
	kn_sgemm(0, 1, N, 2 * I, C, 1.0f, k->h2, C, k->guw, C, 0.0f, k->gu, 2 * I);
	kn_swiglu_forward(k->m, k->gu, N, I, NULL);
	kn_sgemm(0, 1, N, C, I, 1.0f, k->m, I, k->dw, I, 0.0f, o, C);
	for (size_t i = 0; i < NC; i++)
		x[i] += o[i];
}

/* dx(N,C): dL/d(layer output) in, dL/d(layer input) out; the weight gradients into k->g.
 * t1, t2: scratch of N * max(C, W, 2I) floats */
static void layer_bwd(llama_layer *k, const llama_ref *r, float *dx, const float *cs,
	float *sc, float *t1, float *t2, int B, int T)
{
	int N = B * T, C = r->C, hd = r->hd, NH = r->NH, NKV = r->NKV, I = r->I;
	int W = (NH + 2 * NKV) * hd, A = NH * hd;
	/* MLP: out = xm + m dw^T */
	kn_sgemm(0, 0, N, I, C, 1.0f, dx, C, k->dw, I, 0.0f, t1, I);          /* dm */
	kn_sgemm(1, 0, C, I, N, 1.0f, dx, C, k->m, I, 1.0f, k->g[3], I);
	kn_swiglu_backward(t2, t1, k->gu, N, I, NULL);                             /* dgu */
	kn_sgemm(0, 0, N, C, 2 * I, 1.0f, t2, 2 * I, k->guw, C, 0.0f, t1, C); /* dh2 */
	kn_sgemm(1, 0, 2 * I, C, N, 1.0f, t2, 2 * I, k->h2, C, 1.0f, k->g[2], C);
	kn_rmsnorm_backward(dx, k->g[5], t1, k->xm, k->r2, k->ln2, N, C, NULL);    /* dL/dxm */
	/* attention: xm = x + y o^T */
	kn_sgemm(0, 0, N, A, C, 1.0f, dx, C, k->ow, A, 0.0f, t1, A);          /* dy */
	kn_sgemm(1, 0, C, A, N, 1.0f, dx, C, k->y, A, 1.0f, k->g[1], A);
	kn_gqa_attention_backward(t2, sc, t1, k->qkv, k->y, k->lse, B, T, NH, NKV, hd);
	kn_rope_backward(t2, cs, B, T, NH, hd, W);
	kn_rope_backward(t2 + A, cs, B, T, NKV, hd, W);
	kn_sgemm(0, 0, N, C, W, 1.0f, t2, W, k->qkvw, C, 0.0f, t1, C);        /* dh1 */
	kn_sgemm(1, 0, W, C, N, 1.0f, t2, W, k->h1, C, 1.0f, k->g[0], C);
	kn_rmsnorm_backward(dx, k->g[4], t1, k->x, k->r1, k->ln1, N, C, NULL);     /* dL/dx */
}

/* Fails unless layer gradient rows [r0, r0+rows) of g (cols wide) match the reference's
 * grad.<name> within tol */
static void expect_ref_grad(const eng_st_file *ex, const char *name, const float *g, int rows,
	int cols, double tol)
{
	eng_err err;
	char full[160];
	int64_t shape[2] = {rows, cols};
	float *want = fnew((size_t)rows * (cols ? cols : 1));
	snprintf(full, sizeof full, "grad.%s", name);
	ck_assert_msg(eng_st_get_f32(ex, full, cols ? 2 : 1, shape, want, &err) == 0, "%s",
		err.msg);
	double e = rel_l2(g, want, (size_t)rows * (cols ? cols : 1));
	ck_assert_msg(e < tol, "%s off the reference by %.3e (limit %.0e)", full, e, tol);
	free(want);
}

/* Every layer gradient of the composed model against the reference's step-1 gradients */
static void expect_layer_grads(const eng_st_file *ex, const llama_ref *r, llama_layer *k,
	int l, double tol)
{
	int C = r->C, hd = r->hd, A = r->NH * hd, KV = r->NKV * hd, I = r->I;
	char n[128];
	static const char *const name[] = {"self_attn.q_proj", "self_attn.k_proj",
		"self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj",
		"mlp.down_proj", "input_layernorm", "post_attention_layernorm"};
	const float *g[] = {k->g[0], k->g[0] + (size_t)A * C, k->g[0] + (size_t)(A + KV) * C,
		k->g[1], k->g[2], k->g[2] + (size_t)I * C, k->g[3], k->g[4], k->g[5]};
	int rows[] = {A, KV, KV, C, I, I, C, C, C}, cols[] = {C, C, C, A, C, C, I, 0, 0};
	for (int j = 0; j < 9; j++) {
		snprintf(n, sizeof n, "model.layers.%d.%s.weight", l, name[j]);
		expect_ref_grad(ex, n, g[j], rows[j], cols[j], tol);
	}
}

static const char *const llama_cases[] = {"reference/llama", "reference/llama_tied"};

/* dlogits(N,V) = (softmax - onehot) / N in place; returns the mean cross-entropy */
static double ce_backward(float *logits, const unsigned char *tok, int N, int V)
{
	double loss = 0.0;
	for (int i = 0; i < N; i++) {
		float *row = logits + (size_t)i * V;
		double mx = row[0], s = 0.0;
		for (int v = 1; v < V; v++)
			mx = row[v] > mx ? row[v] : mx;
		for (int v = 0; v < V; v++)
			s += exp(row[v] - mx);
		int t = tok[2 * (i + 1)] | tok[2 * (i + 1) + 1] << 8;
		loss += (mx + log(s) - row[t]) / N;
		for (int v = 0; v < V; v++)
			row[v] = (float)((exp(row[v] - mx) / s - (v == t)) / N);
	}
	return loss;
}

/* The composed model on one batch: its buffers, forward to backward */
typedef struct llama_run {
	llama_ref r;
	llama_layer *ly;
	int B, T, N;
	const unsigned char *tok;                 /* llm.c tokens: inputs, then targets */
	float *emb, *head, *nw, *cs, *sc, *o, *t1, *t2;
	float *x, *xl, *xf, *rstd, *logits;       /* residual, last layer's output, normed */
	float *gemb, *ghead, *gnw;
} llama_run;

/* Forward to the logits */
static void run_forward(llama_run *u)
{
	llama_ref *r = &u->r;
	int N = u->N, C = r->C, V = r->V;
	size_t wide = (size_t)N * (size_t)(3 * C + 2 * r->I + 2 * r->NKV * r->hd + r->NH * r->hd);
	u->emb = llama_w(r, "model.embed_tokens.weight", V, C, NULL);
	u->head = r->tied ? u->emb : llama_w(r, "lm_head.weight", V, C, NULL);
	u->nw = llama_w(r, "model.norm.weight", C, 0, NULL);
	u->cs = fnew((size_t)u->T * r->hd), u->sc = fnew(kn_attention_scratch_floats(u->T));
	u->o = fnew((size_t)N * C), u->t1 = fnew(wide), u->t2 = fnew(wide);
	u->x = fnew((size_t)N * C), u->xf = fnew((size_t)N * C), u->rstd = fnew(N);
	u->logits = fnew((size_t)N * V), u->gnw = fnew(C), u->ghead = fnew((size_t)V * C);
	u->gemb = r->tied ? u->ghead : fnew((size_t)V * C);
	u->ly = calloc((size_t)r->L, sizeof *u->ly);
	ck_assert_ptr_nonnull(u->ly);
	for (int i = 0; i < N; i++)
		memcpy(u->x + (size_t)i * C, u->emb + (size_t)(u->tok[2 * i] |
			u->tok[2 * i + 1] << 8) * C, sizeof(float) * C);
	kn_rope_table(u->cs, u->T, r->hd, r->theta);
	for (int l = 0; l < r->L; l++) {
		layer_init(&u->ly[l], r, l, N);
		layer_fwd(&u->ly[l], r, u->x, u->cs, u->sc, u->o, u->B, u->T);
	}
	u->xl = fdup(u->x, (size_t)N * C);
	kn_rmsnorm_forward(u->xf, u->rstd, u->x, u->nw, (float)r->eps, N, C, NULL);
	kn_sgemm(0, 1, N, V, C, 1.0f, u->xf, C, u->head, C, 0.0f, u->logits, V);
}

/* Backward from the logits' gradient: the head, the final RMSNorm, the layers from the
 * last, the embedding (tied: into the head's gradient) */
static void run_backward(llama_run *u)
{
	llama_ref *r = &u->r;
	int N = u->N, C = r->C, V = r->V;
	kn_sgemm(0, 0, N, C, V, 1.0f, u->logits, V, u->head, C, 0.0f, u->o, C); /* dxf */
	kn_sgemm(1, 0, V, C, N, 1.0f, u->logits, V, u->xf, C, 1.0f, u->ghead, C);
	memset(u->x, 0, sizeof(float) * N * C);
	kn_rmsnorm_backward(u->x, u->gnw, u->o, u->xl, u->rstd, u->nw, N, C, NULL);
	for (int l = r->L - 1; l >= 0; l--)
		layer_bwd(&u->ly[l], r, u->x, u->cs, u->sc, u->t1, u->t2, u->B, u->T);
	for (int i = 0; i < N; i++) {
		float *g = u->gemb + (size_t)(u->tok[2 * i] | u->tok[2 * i + 1] << 8) * C;
		for (int c = 0; c < C; c++)
			g[c] += u->x[(size_t)i * C + c];
	}
}

static void run_free(llama_run *u)
{
	for (int l = 0; l < u->r.L; l++)
		layer_free(&u->ly[l]);
	free(u->ly);
	if (!u->r.tied)
		free(u->head), free(u->gemb);
	float *b[] = {u->emb, u->nw, u->cs, u->sc, u->o, u->t1, u->t2, u->x, u->xl, u->xf,
		u->rstd, u->logits, u->gnw, u->ghead};
	for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
		free(b[i]);
	eng_st_free(&u->r.st);
}

/* The first batch of the case's train.bin through the new kernels and kn_sgemm, forward and
 * backward: loss, logits and every gradient against the reference's float64 step-1 values
 * (rounded). Checks the kernels composed as a model, and the reference's equations against
 * code written apart from them. Tolerances as the GPT-2 reference's
 * (tests/reference/test_reference.c): loss 1e-5, logits and gradients 1e-4 relative. */
START_TEST(test_llama_forward_reference)
{
	char *dir = t_data(llama_cases[_i]), path[512];
	llama_run u;
	eng_err err;
	eng_st_file ex;
	json_error_t jerr;
	size_t len;
	memset(&u, 0, sizeof u);
	llama_ref_open(&u.r, dir);
	snprintf(path, sizeof path, "%s/job.json", dir);
	json_t *job = json_load_file(path, 0, &jerr);
	ck_assert_msg(job != NULL, "%s: %s", path, jerr.text);
	u.B = jint_of(job, "batch"), u.T = jint_of(job, "seq_len"), u.N = u.B * u.T;
	json_decref(job);
	int N = u.N, C = u.r.C, V = u.r.V;
	snprintf(path, sizeof path, "%s/train.bin", dir);
	unsigned char *bin = (unsigned char *)t_read_file(path, &len);
	ck_assert(len >= 1024 + 2 * (size_t)(N + 1));
	u.tok = bin + 1024; /* llm.c's header: 256 int32 */
	kn_set_threads(2);
	run_forward(&u);
	snprintf(path, sizeof path, "%s/expected.safetensors", dir);
	ck_assert_msg(eng_st_read(&ex, path, &err) == 0, "%s", err.msg);
	float want_loss, *want = fnew((size_t)N * V);
	int64_t lshape[3] = {u.B, u.T, V};
	ck_assert_msg(eng_st_get_f32(&ex, "loss.step1", 0, lshape, &want_loss, &err) == 0, "%s",
		err.msg);
	ck_assert_msg(eng_st_get_f32(&ex, "logits", 3, lshape, want, &err) == 0, "%s", err.msg);
	double eg = rel_l2(u.logits, want, (size_t)N * V);
	double loss = ce_backward(u.logits, u.tok, N, V), el = fabs(loss - want_loss) / want_loss;
	ck_assert_msg(el < 1e-5 && eg < 1e-4, "%s: loss %.7f against %.7f (%.2e), logits off "
		"by %.2e", llama_cases[_i], loss, want_loss, el, eg);
	run_backward(&u);
	for (int l = 0; l < u.r.L; l++)
		expect_layer_grads(&ex, &u.r, &u.ly[l], l, 1e-4);
	expect_ref_grad(&ex, "model.norm.weight", u.gnw, C, 0, 1e-4);
	expect_ref_grad(&ex, "model.embed_tokens.weight", u.gemb, V, C, 1e-4);
	if (!u.r.tied)
		expect_ref_grad(&ex, "lm_head.weight", u.ghead, V, C, 1e-4);
	run_free(&u);
	eng_st_free(&ex);
	free(want), free(bin), free(dir);
}
END_TEST

Suite *suite_llama_kernels(void)
{
	Suite *s = suite_create("llama-kernels");
	TCase *tc = tcase_create("llama");
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_test(tc, test_kn_rmsnorm_backward_fd);
	tcase_add_test(tc, test_kn_rmsnorm_reference);
	tcase_add_test(tc, test_kn_rope_reference);
	tcase_add_test(tc, test_kn_swiglu_backward_fd);
	tcase_add_test(tc, test_kn_llama_rounds_on_the_way);
	tcase_add_test(tc, test_kn_gqa_attention_backward_fd);
	tcase_add_test(tc, test_kn_gqa_attention_repeat_kv);
	tcase_add_loop_test(tc, test_llama_forward_reference, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
