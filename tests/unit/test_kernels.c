/* test_kernels.c - the CPU kernels of kernels/kn.h, against finite differences and against
 * their own promises.
 *
 * How: every backward is checked against its forward by central differences. Small odd
 * shapes, a fixed seed, the scalar loss L = sum(out * r) for a fixed random r summed in
 * double (so dout = r; the mean loss for cross-entropy), every input coordinate moved by
 * +-FD_H in float, and the analytic gradient compared with the numeric one tensor by tensor
 * (relative L2 error). Outputs documented as `=` are prefilled with garbage, outputs
 * documented as `+=` start at zero and have their own accumulation tests.
 * Then the bitwise promises the engine builds on: kn_layernorm_apply redoes the forward
 * exactly (selective recompute), the fused kernels give the separate ones' bits, the
 * blocked attention matches the definition across query blocks and repeats itself, kernels
 * whose reductions are partitioned independently of the thread count give the same bits for
 * 1 and 2 threads, and the rest (kn_sgemm) the same bits run to run. Last, kn_adamw_update
 * against PyTorch's AdamW step and kn_sumsq against a loop, both in double.
 * Not a benchmark: each test takes milliseconds (`make bench` times the kernels).
 */
#include "tests.h"

#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eng_config.h"
#include "kn.h"
#include "cpu/kn_rows.h"
#include "t_kn.h"

#define TIMEOUT 60 /* seconds per test; each takes milliseconds */
#define SEED 0x5eed2024u

/* Shapes of the finite-difference checks: odd, several rows per reduction. */
#define FD_N 6   /* rows */
#define FD_C 12  /* channels */
#define FD_OC 20 /* output channels of the linear */
#define FD_B 2   /* batch */
#define FD_T 5   /* time */
#define FD_NH 3  /* heads: hs = 4 */
#define FD_V 17  /* vocabulary */

/* Shapes of the thread tests: wider than one 64-column task, so that two threads split
 * the column blocks, with a ragged last block. */
#define TH_N 37
#define TH_C 200
#define TH_OC 150

#define ADAM_TOL 1e-6     /* relative L2 error of one AdamW step against double */
#define SUMSQ_TOL 1e-12   /* kn_sumsq against a double loop in another order */
#define SGEMM_TOL 1e-6    /* kn_sgemm against a double loop */
#define ACCUM_TOL 1e-6    /* second backward into the first one's result: twice it */

/* ---- finite differences ----------------------------------------------------------------- */

struct ln_ctx {
	float *inp, *w, *b;       /* (N,C), (C), (C): perturbed */
	float *out, *mean, *rstd; /* (N,C), (N), (N) */
	const float *r;           /* (N,C) dout */
	int N, C;
};

static double ln_loss(void *p)
{
	struct ln_ctx *c = p;
	kn_layernorm_forward(c->out, c->mean, c->rstd, c->inp, c->w, c->b, c->N, c->C, NULL);
	return dotd(c->out, c->r, (size_t)c->N * c->C);
}

START_TEST(test_kn_layernorm_backward_fd)
{
	int N = FD_N, C = FD_C;
	size_t nc = (size_t)N * C;
	rng_seed(SEED);
	kn_set_threads(2);
	struct ln_ctx c = {fnew(nc), fnew(C), fnew(C), fnew(nc), fnew(N), fnew(N), NULL, N, C};
	float *r = fnew(nc);
	fill(c.inp, nc, -1.0f, 3.0f); /* off-centre, so the mean term matters */
	fill(c.w, C, -1.5f, 1.5f);
	fill(c.b, C, -1.0f, 1.0f);
	fill(r, nc, -1.0f, 1.0f);
	c.r = r;

	float *dinp = fnew(nc), *dw = fnew(C), *db = fnew(C);
	ln_loss(&c);
	kn_layernorm_backward(dinp, dw, db, r, c.inp, c.mean, c.rstd, c.w, N, C, NULL);

	float *ninp = fnew(nc), *nw = fnew(C), *nb = fnew(C);
	fd_grad(ninp, c.inp, nc, ln_loss, &c);
	fd_grad(nw, c.w, C, ln_loss, &c);
	fd_grad(nb, c.b, C, ln_loss, &c);
	expect_grad("kn_layernorm_backward", "dinp", dinp, ninp, nc);
	expect_grad("kn_layernorm_backward", "dw", dw, nw, C);
	expect_grad("kn_layernorm_backward", "db", db, nb, C);

	free(nb), free(nw), free(ninp), free(db), free(dw), free(dinp), free(r);
	free(c.rstd), free(c.mean), free(c.out), free(c.b), free(c.w), free(c.inp);
}
END_TEST

struct lin_ctx {
	float *inp, *w, *b; /* (N,C), (C,OC), (OC): perturbed */
	float *out;         /* (N,OC) */
	const float *r;     /* (N,OC) dout */
	int N, C, OC;
};

static double lin_loss(void *p)
{
	struct lin_ctx *c = p;
	kn_linear_forward(c->out, c->inp, c->w, c->b, c->N, c->C, c->OC);
	return dotd(c->out, c->r, (size_t)c->N * c->OC);
}

START_TEST(test_kn_linear_backward_fd)
{
	int N = FD_N, C = FD_C, OC = FD_OC;
	size_t nc = (size_t)N * C, no = (size_t)N * OC, co = (size_t)C * OC;
	rng_seed(SEED);
	kn_set_threads(2);
	struct lin_ctx c = {fnew(nc), fnew(co), fnew(OC), fnew(no), NULL, N, C, OC};
	float *r = fnew(no);
	fill(c.inp, nc, -1.0f, 1.0f);
	fill(c.w, co, -1.0f, 1.0f);
	fill(c.b, OC, -1.0f, 1.0f);
	fill(r, no, -1.0f, 1.0f);
	c.r = r;

	float *dinp = fnew(nc), *dw = fnew(co), *db = fnew(OC);
	fill_const(dinp, nc, GARBAGE); /* dinp is `=` */
	kn_linear_backward(dinp, dw, db, r, c.inp, c.w, N, C, OC);

	float *ninp = fnew(nc), *nw = fnew(co), *nb = fnew(OC);
	fd_grad(ninp, c.inp, nc, lin_loss, &c);
	fd_grad(nw, c.w, co, lin_loss, &c);
	fd_grad(nb, c.b, OC, lin_loss, &c);
	expect_grad("kn_linear_backward", "dinp", dinp, ninp, nc);
	expect_grad("kn_linear_backward", "dw", dw, nw, co);
	expect_grad("kn_linear_backward", "db", db, nb, OC);

	free(nb), free(nw), free(ninp), free(db), free(dw), free(dinp), free(r);
	free(c.out), free(c.b), free(c.w), free(c.inp);
}
END_TEST

struct att_ctx {
	float *qkv;     /* (B,T,3C): perturbed */
	float *lse;     /* (B,NH,T) */
	float *scratch; /* kn_attention_scratch_floats(T) */
	float *out;     /* (B,T,C) */
	const float *r; /* (B,T,C) dout */
	int B, T, C, NH;
};

static double att_loss(void *p)
{
	struct att_ctx *c = p;
	kn_attention_forward(c->out, c->lse, c->scratch, c->qkv, c->B, c->T, c->C, c->NH);
	return dotd(c->out, c->r, (size_t)c->B * c->T * c->C);
}

START_TEST(test_kn_attention_backward_fd)
{
	int B = FD_B, T = FD_T, C = FD_C, NH = FD_NH;
	size_t bt = (size_t)B * T, nqkv = bt * 3 * C;
	rng_seed(SEED);
	kn_set_threads(2);
	struct att_ctx c = {fnew(nqkv), fnew(bt * NH), fnew(kn_attention_scratch_floats(T)),
		fnew(bt * C), NULL, B, T, C, NH};
	float *r = fnew(bt * C);
	/* Wide enough that the softmax is far from uniform and dq, dk are not small. */
	fill(c.qkv, nqkv, -2.0f, 2.0f);
	fill(r, bt * C, -1.0f, 1.0f);
	c.r = r;

	float *dqkv = fnew(nqkv), *scratch = fnew(kn_attention_scratch_floats(T));
	fill_const(dqkv, nqkv, GARBAGE); /* dqkv is `=` */
	att_loss(&c);
	kn_attention_backward(dqkv, scratch, r, c.qkv, c.out, c.lse, B, T, C, NH);

	float *n = fnew(nqkv);
	fd_grad(n, c.qkv, nqkv, att_loss, &c);
	/* q, k and v apart: dv is the largest and would hide an error in the others. */
	static const char *name[3] = {"dq", "dk", "dv"};
	for (int part = 0; part < 3; part++) {
		double err = rel_l2_block(dqkv + part * C, n + part * C, bt, C, 3 * C);
		ck_assert_msg(err < FD_TOL, "kn_attention_backward: %s off the finite differences "
			"by relative L2 error %.3e (limit %.0e)", name[part], err, FD_TOL);
	}

	free(n), free(scratch), free(dqkv), free(r), free(c.out), free(c.scratch), free(c.lse);
	free(c.qkv);
}
END_TEST

struct gelu_ctx {
	float *x;       /* (n): perturbed */
	float *out;     /* (n) */
	const float *r; /* (n) dout */
	size_t n;
};

static double gelu_loss(void *p)
{
	struct gelu_ctx *c = p;
	kn_gelu_forward(c->out, c->x, c->n, NULL);
	return dotd(c->out, c->r, c->n);
}

START_TEST(test_kn_gelu_backward_fd)
{
	size_t n = (size_t)FD_N * FD_C;
	rng_seed(SEED);
	kn_set_threads(2);
	struct gelu_ctx c = {fnew(n), fnew(n), NULL, n};
	float *r = fnew(n);
	fill(c.x, n, -4.0f, 4.0f); /* both tails and the bend */
	fill(r, n, -1.0f, 1.0f);
	c.r = r;

	float *dx = fnew(n);
	fill_const(dx, n, GARBAGE);
	kn_gelu_backward(dx, c.x, r, n, NULL);
	float *nx = fnew(n);
	fd_grad(nx, c.x, n, gelu_loss, &c);
	expect_grad("kn_gelu_backward", "dinp", dx, nx, n);

	/* dinp may alias dout: the same bits in place */
	float *inplace = fdup(r, n);
	kn_gelu_backward(inplace, c.x, inplace, n, NULL);
	expect_bitwise("kn_gelu_backward", "dinp", "in place and out of place", inplace, dx, n);

	free(inplace), free(nx), free(dx), free(r), free(c.out), free(c.x);
}
END_TEST

struct ce_ctx {
	float *logits;          /* (N,V): perturbed */
	float *lse, *loss;      /* (N), (N) */
	const uint32_t *target; /* (N) */
	int N, V;
};

/* mean cross-entropy over the rows, as the trainer reports it */
static double ce_loss(void *p)
{
	struct ce_ctx *c = p;
	kn_crossentropy_forward(c->lse, c->loss, c->logits, c->target, c->N, c->V);
	double s = 0.0;
	for (int i = 0; i < c->N; i++)
		s += c->loss[i];
	return s / c->N;
}

START_TEST(test_kn_crossentropy_fused_fd)
{
	int N = FD_N, V = FD_V;
	size_t nv = (size_t)N * V;
	uint32_t target[FD_N];
	rng_seed(SEED);
	kn_set_threads(2);
	fill_tokens(target, N, V);
	struct ce_ctx c = {fnew(nv), fnew(N), fnew(N), target, N, V};
	fill(c.logits, nv, -3.0f, 3.0f);

	/* the fused kernel: the gradient in place of the logits, lse and loss as the forward */
	float *d = fdup(c.logits, nv), *lse = fnew(N), *loss = fnew(N);
	kn_crossentropy_fused(d, lse, loss, target, 1.0f / N, N, V);
	ce_loss(&c);
	expect_bitwise("kn_crossentropy_fused", "lse", "and kn_crossentropy_forward", lse, c.lse,
		N);
	expect_bitwise("kn_crossentropy_fused", "loss", "and kn_crossentropy_forward", loss,
		c.loss, N);
	float *n = fnew(nv);
	fd_grad(n, c.logits, nv, ce_loss, &c);
	expect_grad("kn_crossentropy_fused", "dlogits", d, n, nv);

	free(n), free(loss), free(lse), free(d), free(c.loss), free(c.lse), free(c.logits);
}
END_TEST

struct enc_ctx {
	float *wte, *wpe;    /* (V,C), (T,C): perturbed */
	float *out;          /* (B,T,C) */
	const float *r;      /* (B,T,C) dout */
	const uint32_t *tok; /* (B,T) */
	int B, T, C;
};

static double enc_loss(void *p)
{
	struct enc_ctx *c = p;
	kn_encoder_forward(c->out, c->tok, c->wte, c->wpe, c->B, c->T, c->C);
	return dotd(c->out, c->r, (size_t)c->B * c->T * c->C);
}

START_TEST(test_kn_encoder_backward_fd)
{
	int B = FD_B, T = FD_T, C = FD_C, V = FD_V;
	size_t btc = (size_t)B * T * C, vc = (size_t)V * C, tc = (size_t)T * C;
	uint32_t tok[FD_B * FD_T];
	rng_seed(SEED);
	kn_set_threads(2);
	fill_tokens(tok, (size_t)B * T, V);
	tok[7] = tok[2]; /* a token seen twice: its dwte row must sum both */
	struct enc_ctx c = {fnew(vc), fnew(tc), fnew(btc), NULL, tok, B, T, C};
	float *r = fnew(btc);
	fill(c.wte, vc, -1.0f, 1.0f);
	fill(c.wpe, tc, -1.0f, 1.0f);
	fill(r, btc, -1.0f, 1.0f);
	c.r = r;

	float *dwte = fnew(vc), *dwpe = fnew(tc);
	kn_encoder_backward(dwte, dwpe, r, tok, B, T, C);
	float *nwte = fnew(vc), *nwpe = fnew(tc);
	fd_grad(nwte, c.wte, vc, enc_loss, &c);
	fd_grad(nwpe, c.wpe, tc, enc_loss, &c);
	expect_grad("kn_encoder_backward", "dwte", dwte, nwte, vc);
	expect_grad("kn_encoder_backward", "dwpe", dwpe, nwpe, tc);

	free(nwpe), free(nwte), free(dwpe), free(dwte), free(r);
	free(c.out), free(c.wpe), free(c.wte);
}
END_TEST

/* ---- accumulation: `+=` outputs, called twice, hold twice the gradient -------------------- */

/* Fails unless got == 2 * once within ACCUM_TOL. */
static void expect_twice(const char *kernel, const char *tensor, const float *got,
	const float *once, size_t n)
{
	float *want = fnew(n);
	for (size_t i = 0; i < n; i++)
		want[i] = 2.0f * once[i];
	double err = rel_l2(got, want, n);
	ck_assert_msg(err < ACCUM_TOL, "%s: %s does not accumulate (+=): second call gives "
		"relative L2 error %.3e from twice the first", kernel, tensor, err);
	free(want);
}

START_TEST(test_kn_layernorm_backward_accumulates)
{
	int N = FD_N, C = FD_C;
	size_t nc = (size_t)N * C;
	rng_seed(SEED);
	kn_set_threads(2);
	float *inp = fnew(nc), *w = fnew(C), *b = fnew(C), *r = fnew(nc);
	float *out = fnew(nc), *mean = fnew(N), *rstd = fnew(N);
	fill(inp, nc, -1.0f, 3.0f), fill(w, C, -1.5f, 1.5f), fill(b, C, -1.0f, 1.0f);
	fill(r, nc, -1.0f, 1.0f);
	kn_layernorm_forward(out, mean, rstd, inp, w, b, N, C, NULL);
	float *dinp = fnew(nc), *dw = fnew(C), *db = fnew(C);
	kn_layernorm_backward(dinp, dw, db, r, inp, mean, rstd, w, N, C, NULL);
	float *dinp1 = fdup(dinp, nc), *dw1 = fdup(dw, C), *db1 = fdup(db, C);
	kn_layernorm_backward(dinp, dw, db, r, inp, mean, rstd, w, N, C, NULL);
	expect_twice("kn_layernorm_backward", "dinp", dinp, dinp1, nc);
	expect_twice("kn_layernorm_backward", "dw", dw, dw1, C);
	expect_twice("kn_layernorm_backward", "db", db, db1, C);
	free(db1), free(dw1), free(dinp1), free(db), free(dw), free(dinp);
	free(rstd), free(mean), free(out), free(r), free(b), free(w), free(inp);
}
END_TEST

START_TEST(test_kn_linear_backward_accumulates)
{
	int N = FD_N, C = FD_C, OC = FD_OC;
	size_t nc = (size_t)N * C, no = (size_t)N * OC, co = (size_t)C * OC;
	rng_seed(SEED);
	kn_set_threads(2);
	float *inp = fnew(nc), *w = fnew(co), *r = fnew(no);
	fill(inp, nc, -1.0f, 1.0f), fill(w, co, -1.0f, 1.0f), fill(r, no, -1.0f, 1.0f);
	float *dinp = fnew(nc), *dw = fnew(co), *db = fnew(OC);
	kn_linear_backward(dinp, dw, db, r, inp, w, N, C, OC);
	float *dinp1 = fdup(dinp, nc), *dw1 = fdup(dw, co), *db1 = fdup(db, OC);
	/* dinp NULL: only the parameter gradients, which accumulate; dinp is left alone */
	kn_linear_backward(NULL, dw, db, r, inp, w, N, C, OC);
	expect_twice("kn_linear_backward", "dw", dw, dw1, co);
	expect_twice("kn_linear_backward", "db", db, db1, OC);
	/* dinp is `=`: a second call overwrites */
	kn_linear_backward(dinp, dw, db, r, inp, w, N, C, OC);
	expect_bitwise("kn_linear_backward", "dinp", "on a second call (it is `=`)", dinp, dinp1,
		nc);
	free(db1), free(dw1), free(dinp1), free(db), free(dw), free(dinp);
	free(r), free(w), free(inp);
}
END_TEST

START_TEST(test_kn_encoder_backward_accumulates)
{
	int B = FD_B, T = FD_T, C = FD_C, V = FD_V;
	size_t btc = (size_t)B * T * C, vc = (size_t)V * C, tc = (size_t)T * C;
	uint32_t tok[FD_B * FD_T];
	rng_seed(SEED);
	kn_set_threads(2);
	fill_tokens(tok, (size_t)B * T, V);
	tok[7] = tok[2];
	float *r = fnew(btc), *dwte = fnew(vc), *dwpe = fnew(tc);
	fill(r, btc, -1.0f, 1.0f);
	kn_encoder_backward(dwte, dwpe, r, tok, B, T, C);
	float *dwte1 = fdup(dwte, vc), *dwpe1 = fdup(dwpe, tc);
	kn_encoder_backward(dwte, dwpe, r, tok, B, T, C);
	expect_twice("kn_encoder_backward", "dwte", dwte, dwte1, vc);
	expect_twice("kn_encoder_backward", "dwpe", dwpe, dwpe1, tc);
	free(dwpe1), free(dwte1), free(dwpe), free(dwte), free(r);
}
END_TEST

/* ---- recompute: the same bits from saved statistics -------------------------------------- */

START_TEST(test_kn_layernorm_apply_bitwise)
{
	int N = TH_N, C = TH_C;
	size_t nc = (size_t)N * C;
	rng_seed(SEED);
	kn_set_threads(2);
	float *inp = fnew(nc), *w = fnew(C), *b = fnew(C);
	float *out = fnew(nc), *mean = fnew(N), *rstd = fnew(N), *again = fnew(nc);
	fill(inp, nc, -1.0f, 3.0f), fill(w, C, -1.5f, 1.5f), fill(b, C, -1.0f, 1.0f);
	kn_layernorm_forward(out, mean, rstd, inp, w, b, N, C, NULL);
	fill_const(again, nc, GARBAGE);
	kn_layernorm_apply(again, inp, mean, rstd, w, b, N, C, NULL);
	ck_assert_msg(memcmp(again, out, nc * sizeof(float)) == 0, "kn_layernorm_apply: out "
		"differs from kn_layernorm_forward's (relative L2 %.3e): selective recompute would "
		"not be exact", rel_l2(again, out, nc));
	free(again), free(rstd), free(mean), free(out), free(b), free(w), free(inp);
}
END_TEST

/* The fused pointwise kernels against the separate ones: selective recompute rebuilds with
 * the separate kernels what the forward computed fused, so the bits must agree. */
START_TEST(test_kn_fused_pointwise_bitwise)
{
	int N = TH_N, C = TH_C;
	size_t nc = (size_t)N * C;
	rng_seed(SEED);
	kn_set_threads(2);
	float *a = fnew(nc), *y = fnew(nc), *bias = fnew(C), *w = fnew(C), *b = fnew(C);
	fill(a, nc, -1.0f, 3.0f), fill(y, nc, -2.0f, 2.0f), fill(bias, C, -1.0f, 1.0f);
	fill(w, C, -1.5f, 1.5f), fill(b, C, -1.0f, 1.0f);

	/* residual + LayerNorm, with and without a bias */
	for (int with_bias = 0; with_bias < 2; with_bias++) {
		const float *bb = with_bias ? bias : NULL;
		float *res = fnew(nc), *out = fnew(nc), *mean = fnew(N), *rstd = fnew(N);
		float *res1 = fnew(nc), *out1 = fnew(nc), *mean1 = fnew(N), *rstd1 = fnew(N);
		fill_const(res, nc, GARBAGE), fill_const(out, nc, GARBAGE);
		kn_residual_layernorm_forward(res, out, mean, rstd, a, y, bb, w, b, N, C, NULL);
		kn_residual_forward(res1, a, y, bb, N, C);
		kn_layernorm_forward(out1, mean1, rstd1, res1, w, b, N, C, NULL);
		const char *when = with_bias ? "and the separate kernels, with a bias"
					     : "and the separate kernels, without a bias";
		expect_bitwise("kn_residual_layernorm_forward", "res", when, res, res1, nc);
		expect_bitwise("kn_residual_layernorm_forward", "out", when, out, out1, nc);
		expect_bitwise("kn_residual_layernorm_forward", "mean", when, mean, mean1, N);
		expect_bitwise("kn_residual_layernorm_forward", "rstd", when, rstd, rstd1, N);
		free(rstd1), free(mean1), free(out1), free(res1);
		free(rstd), free(mean), free(out), free(res);
	}
	double worst = 0.0; /* and res really is a + (y + bias) */
	float *res = fnew(nc), *out = fnew(nc), *mean = fnew(N), *rstd = fnew(N);
	kn_residual_layernorm_forward(res, out, mean, rstd, a, y, bias, w, b, N, C, NULL);
	for (size_t i = 0; i < nc; i++)
		worst = fmax(worst, fabs(res[i] - ((double)a[i] + y[i] + bias[i % C])));
	ck_assert_msg(worst < 1e-5, "kn_residual_layernorm_forward: res off a + y + bias by %g",
		worst);

	/* bias + GELU against a bias added by hand (as kn_linear_forward adds one) and
	 * kn_gelu_forward */
	float *f = fdup(y, nc), *g = fnew(nc), *f1 = fdup(y, nc), *g1 = fnew(nc);
	fill_const(g, nc, GARBAGE);
	kn_bias_gelu_forward(f, g, bias, N, C, NULL);
	for (int r = 0; r < N; r++)
		for (int c = 0; c < C; c++)
			f1[(size_t)r * C + c] += bias[c];
	kn_gelu_forward(g1, f1, nc, NULL);
	expect_bitwise("kn_bias_gelu_forward", "fch", "and the bias add", f, f1, nc);
	expect_bitwise("kn_bias_gelu_forward", "gelu", "and kn_gelu_forward", g, g1, nc);

	free(g1), free(f1), free(g), free(f), free(rstd), free(mean), free(out), free(res);
	free(b), free(w), free(bias), free(y), free(a);
}
END_TEST

/* The trailing bf (kn.h): each kernel's float32 output the same bits with it as without,
 * and bf that output rounded, every row of a ragged shape (two spans of the flat GELUs) */
START_TEST(test_kn_rounds_on_the_way)
{
	int N = TH_N, C = TH_C;
	size_t nc = (size_t)N * C;
	rng_seed(SEED);
	kn_set_threads(2);
	float *x = fnew(nc), *y = fnew(nc), *w = fnew(C), *b = fnew(C), *dy = fnew(nc);
	float *o1 = fnew(nc), *o2 = fnew(nc), *r1 = fnew(nc), *r2 = fnew(nc);
	float *mean = fnew(N), *rstd = fnew(N), *d1 = fnew(nc), *d2 = fnew(nc);
	uint16_t *bf = calloc(nc + 1, sizeof *bf);
	ck_assert(bf);
	fill(x, nc, -1.0f, 3.0f), fill(y, nc, -2.0f, 2.0f), fill(w, C, -1.5f, 1.5f);
	fill(b, C, -1.0f, 1.0f), fill(dy, nc, -1.0f, 1.0f);

	kn_layernorm_forward(o1, mean, rstd, x, w, b, N, C, NULL);
	kn_layernorm_forward(o2, mean, rstd, x, w, b, N, C, bf);
	expect_bitwise("kn_layernorm_forward", "out", "with bf", o2, o1, nc);
	expect_rounded("kn_layernorm_forward", "out", bf, o1, nc);
	kn_layernorm_apply(o2, x, mean, rstd, w, b, N, C, bf + 1); /* an odd start too */
	expect_rounded("kn_layernorm_apply", "out", bf + 1, o1, nc);
	kn_residual_layernorm_forward(r1, o1, mean, rstd, x, y, b, w, b, N, C, NULL);
	kn_residual_layernorm_forward(r2, o2, mean, rstd, x, y, b, w, b, N, C, bf);
	expect_bitwise("kn_residual_layernorm_forward", "out", "with bf", o2, o1, nc);
	expect_rounded("kn_residual_layernorm_forward", "out", bf, o1, nc);
	kn_layernorm_backward(d1, NULL, NULL, dy, r1, mean, rstd, w, N, C, NULL);
	kn_layernorm_backward(d2, NULL, NULL, dy, r1, mean, rstd, w, N, C, bf);
	expect_bitwise("kn_layernorm_backward", "dinp", "with bf", d2, d1, nc);
	expect_rounded("kn_layernorm_backward", "dinp", bf, d1, nc);

	float *f1 = fdup(y, nc), *f2 = fdup(y, nc);
	kn_bias_gelu_forward(f1, o1, b, N, C, NULL);
	kn_bias_gelu_forward(f2, o2, b, N, C, bf);
	expect_bitwise("kn_bias_gelu_forward", "gelu", "with bf", o2, o1, nc);
	expect_rounded("kn_bias_gelu_forward", "gelu", bf, o1, nc);
	kn_gelu_forward(o1, y, nc, NULL);
	kn_gelu_forward(o2, y, nc, bf);
	expect_bitwise("kn_gelu_forward", "out", "with bf", o2, o1, nc);
	expect_rounded("kn_gelu_forward", "out", bf, o1, nc);
	memcpy(d1, dy, nc * sizeof *d1), memcpy(d2, dy, nc * sizeof *d2);
	kn_gelu_backward(d1, y, d1, nc, NULL); /* in place, as the engine calls it */
	kn_gelu_backward(d2, y, d2, nc, bf);
	expect_bitwise("kn_gelu_backward", "dinp", "with bf", d2, d1, nc);
	expect_rounded("kn_gelu_backward", "dinp", bf, d1, nc);

	free(f2), free(f1), free(bf), free(d2), free(d1), free(rstd), free(mean);
	free(r2), free(r1), free(o2), free(o1), free(dy), free(b), free(w), free(y), free(x);
}
END_TEST

/* Attention in double, straight from the definition: out, lse and the backward of
 * L = sum(out * r), for one (b, h) at a time. */
static void att_reference(double *out, double *lse, double *dqkv, const float *qkv,
	const float *r, int B, int T, int C, int NH)
{
	int hs = C / NH, C3 = 3 * C;
	double scale = 1.0 / sqrt((double)hs);
	double *p = calloc((size_t)T * T, sizeof *p), *dp = calloc((size_t)T * T, sizeof *dp);
	ck_assert(p && dp);
	memset(dqkv, 0, sizeof(double) * B * T * C3);
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++) {
			const float *q = qkv + (size_t)b * T * C3 + h * hs, *k = q + C, *v = q + 2 * C;
			double *dq = dqkv + (size_t)b * T * C3 + h * hs, *dk = dq + C, *dv = dq + 2 * C;
			for (int t = 0; t < T; t++) {
				double mx = -INFINITY, s = 0.0;
				for (int u = 0; u <= t; u++) {
					double z = 0.0;
					for (int j = 0; j < hs; j++)
						z += (double)q[(size_t)t * C3 + j] * k[(size_t)u * C3 + j];
					p[(size_t)t * T + u] = z * scale;
					mx = fmax(mx, z * scale);
				}
				for (int u = 0; u <= t; u++)
					s += exp(p[(size_t)t * T + u] - mx);
				lse[((size_t)b * NH + h) * T + t] = mx + log(s);
				for (int u = 0; u <= t; u++)
					p[(size_t)t * T + u] = exp(p[(size_t)t * T + u] - mx) / s;
				for (int j = 0; j < hs; j++) {
					double o = 0.0;
					for (int u = 0; u <= t; u++)
						o += p[(size_t)t * T + u] * v[(size_t)u * C3 + j];
					out[((size_t)b * T + t) * C + h * hs + j] = o;
				}
			}
			/* dP = r v^T; dv = P^T r; dS = P (dP - rowsum(P dP)) scale; dq = dS k;
			 * dk = dS^T q */
			for (int t = 0; t < T; t++) {
				const float *rr = r + ((size_t)b * T + t) * C + h * hs;
				double dot = 0.0;
				for (int u = 0; u <= t; u++) {
					double z = 0.0;
					for (int j = 0; j < hs; j++)
						z += (double)rr[j] * v[(size_t)u * C3 + j];
					dp[(size_t)t * T + u] = z;
					dot += z * p[(size_t)t * T + u];
					for (int j = 0; j < hs; j++)
						dv[(size_t)u * C3 + j] += p[(size_t)t * T + u] * rr[j];
				}
				for (int u = 0; u <= t; u++) {
					double ds = p[(size_t)t * T + u] * (dp[(size_t)t * T + u] - dot) *
						    scale;
					for (int j = 0; j < hs; j++) {
						dq[(size_t)t * C3 + j] += ds * k[(size_t)u * C3 + j];
						dk[(size_t)u * C3 + j] += ds * q[(size_t)t * C3 + j];
					}
				}
			}
		}
	free(dp), free(p);
}

static double rel_l2_d(const float *a, const double *b, size_t n)
{
	double num = 0.0, den = 0.0;
	for (size_t i = 0; i < n; i++) {
		num += (a[i] - b[i]) * (a[i] - b[i]);
		den += b[i] * b[i];
	}
	return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

/* The blocked kernel against the definition on shapes that cross query blocks: T = 150 is
 * two full blocks of 64 and a ragged one of 22, T = 64 exactly one. Float32 against double:
 * measured 1.4e-7 (out), 4.4e-8 (lse), 2.4e-7 (dqkv) at T = 150; broken on purpose, the
 * later blocks' keys cut short by one gave 2.9e-2 (out), the diagonal dropped from the
 * backward's probabilities 4.1e-1 (dqkv). */
#define ATT_REF_TOL 1e-5
static const int att_ref_T[] = {150, 64, 1};

START_TEST(test_kn_attention_reference)
{
	int B = 2, T = att_ref_T[_i], C = 32, NH = 2;
	size_t btc = (size_t)B * T * C, nqkv = btc * 3, nl = (size_t)B * NH * T;
	rng_seed(SEED);
	kn_set_threads(2);
	float *qkv = fnew(nqkv), *r = fnew(btc), *out = fnew(btc), *lse = fnew(nl);
	float *dqkv = fnew(nqkv), *scratch = fnew(kn_attention_scratch_floats(T));
	fill(qkv, nqkv, -1.5f, 1.5f), fill(r, btc, -1.0f, 1.0f);
	fill_const(out, btc, GARBAGE), fill_const(lse, nl, GARBAGE);
	fill_const(dqkv, nqkv, GARBAGE);
	fill_const(scratch, kn_attention_scratch_floats(T), GARBAGE);
	kn_attention_forward(out, lse, scratch, qkv, B, T, C, NH);
	kn_attention_backward(dqkv, scratch, r, qkv, out, lse, B, T, C, NH);

	double *rout = malloc(sizeof(double) * btc), *rlse = malloc(sizeof(double) * nl);
	double *rd = malloc(sizeof(double) * nqkv);
	ck_assert(rout && rlse && rd);
	att_reference(rout, rlse, rd, qkv, r, B, T, C, NH);
	double e_out = rel_l2_d(out, rout, btc), e_lse = rel_l2_d(lse, rlse, nl);
	double e_d = rel_l2_d(dqkv, rd, nqkv);
	ck_assert_msg(e_out < ATT_REF_TOL && e_lse < ATT_REF_TOL && e_d < ATT_REF_TOL,
		"kn_attention at T=%d: relative L2 error out %.3e, lse %.3e, dqkv %.3e "
		"(limit %.0e)", T, e_out, e_lse, e_d, ATT_REF_TOL);

	/* the same bits on a second call, from other buffers */
	float *qkv2 = fdup(qkv, nqkv), *out2 = fnew(btc), *lse2 = fnew(nl), *dqkv2 = fnew(nqkv);
	kn_attention_forward(out2, lse2, scratch, qkv2, B, T, C, NH);
	kn_attention_backward(dqkv2, scratch, r, qkv2, out2, lse2, B, T, C, NH);
	expect_bitwise("kn_attention_forward", "out", "on a second call", out2, out, btc);
	expect_bitwise("kn_attention_forward", "lse", "on a second call", lse2, lse, nl);
	expect_bitwise("kn_attention_backward", "dqkv", "on a second call", dqkv2, dqkv, nqkv);

	free(dqkv2), free(lse2), free(out2), free(qkv2), free(rd), free(rlse), free(rout);
	free(scratch), free(dqkv), free(lse), free(out), free(r), free(qkv);
}
END_TEST

/* ---- thread counts: partitions fixed by the shape give the same bits for 1 and 2 ------------ */

START_TEST(test_kn_layernorm_backward_threads)
{
	int N = TH_N, C = TH_C;
	size_t nc = (size_t)N * C;
	rng_seed(SEED);
	float *inp = fnew(nc), *w = fnew(C), *b = fnew(C), *r = fnew(nc);
	float *out = fnew(nc), *mean = fnew(N), *rstd = fnew(N);
	fill(inp, nc, -1.0f, 3.0f), fill(w, C, -1.5f, 1.5f), fill(b, C, -1.0f, 1.0f);
	fill(r, nc, -1.0f, 1.0f);
	float *dinp[2], *dw[2], *db[2];
	for (int k = 0; k < 2; k++) {
		kn_set_threads(k + 1);
		kn_layernorm_forward(out, mean, rstd, inp, w, b, N, C, NULL);
		dinp[k] = fnew(nc), dw[k] = fnew(C), db[k] = fnew(C);
		kn_layernorm_backward(dinp[k], dw[k], db[k], r, inp, mean, rstd, w, N, C, NULL);
	}
	const char *when = "for 1 and 2 threads";
	expect_bitwise("kn_layernorm_backward", "dinp", when, dinp[1], dinp[0], nc);
	expect_bitwise("kn_layernorm_backward", "dw", when, dw[1], dw[0], C);
	expect_bitwise("kn_layernorm_backward", "db", when, db[1], db[0], C);
	for (int k = 0; k < 2; k++)
		free(db[k]), free(dw[k]), free(dinp[k]);
	free(rstd), free(mean), free(out), free(r), free(b), free(w), free(inp);
}
END_TEST

START_TEST(test_kn_linear_backward_threads)
{
	/* db only: dinp and dw come from kn_sgemm, which promises nothing across counts */
	int N = TH_N, C = FD_C, OC = TH_OC;
	size_t nc = (size_t)N * C, no = (size_t)N * OC, co = (size_t)C * OC;
	rng_seed(SEED);
	float *inp = fnew(nc), *w = fnew(co), *r = fnew(no);
	fill(inp, nc, -1.0f, 1.0f), fill(w, co, -1.0f, 1.0f), fill(r, no, -1.0f, 1.0f);
	float *dw = fnew(co), *db[2];
	for (int k = 0; k < 2; k++) {
		kn_set_threads(k + 1);
		db[k] = fnew(OC);
		kn_linear_backward(NULL, dw, db[k], r, inp, w, N, C, OC);
	}
	expect_bitwise("kn_linear_backward", "db", "for 1 and 2 threads", db[1], db[0], OC);
	free(db[1]), free(db[0]), free(dw), free(r), free(w), free(inp);
}
END_TEST

START_TEST(test_kn_encoder_backward_threads)
{
	int B = 3, T = 7, C = TH_C, V = FD_V;
	size_t btc = (size_t)B * T * C, vc = (size_t)V * C, tc = (size_t)T * C;
	uint32_t tok[3 * 7];
	rng_seed(SEED);
	fill_tokens(tok, (size_t)B * T, V); /* 21 tokens of 17: repeats */
	float *r = fnew(btc), *dwte[2], *dwpe[2];
	fill(r, btc, -1.0f, 1.0f);
	for (int k = 0; k < 2; k++) {
		kn_set_threads(k + 1);
		dwte[k] = fnew(vc), dwpe[k] = fnew(tc);
		kn_encoder_backward(dwte[k], dwpe[k], r, tok, B, T, C);
	}
	const char *when = "for 1 and 2 threads";
	expect_bitwise("kn_encoder_backward", "dwte", when, dwte[1], dwte[0], vc);
	expect_bitwise("kn_encoder_backward", "dwpe", when, dwpe[1], dwpe[0], tc);
	for (int k = 0; k < 2; k++)
		free(dwpe[k]), free(dwte[k]);
	free(r);
}
END_TEST

START_TEST(test_kn_attention_backward_threads)
{
	/* kn_attention.c: one (b, h) per task, its matmuls on that thread alone */
	int B = FD_B, T = 70, C = 24, NH = FD_NH; /* two query blocks, the second ragged */
	size_t btc = (size_t)B * T * C, nqkv = btc * 3, nl = (size_t)B * NH * T;
	rng_seed(SEED);
	float *qkv = fnew(nqkv), *r = fnew(btc), *lse[2], *out[2], *dqkv[2];
	fill(qkv, nqkv, -2.0f, 2.0f), fill(r, btc, -1.0f, 1.0f);
	for (int k = 0; k < 2; k++) {
		kn_set_threads(k + 1);
		lse[k] = fnew(nl), out[k] = fnew(btc), dqkv[k] = fnew(nqkv);
		float *scratch = fnew(kn_attention_scratch_floats(T));
		kn_attention_forward(out[k], lse[k], scratch, qkv, B, T, C, NH);
		kn_attention_backward(dqkv[k], scratch, r, qkv, out[k], lse[k], B, T, C, NH);
		free(scratch);
	}
	const char *when = "for 1 and 2 threads";
	expect_bitwise("kn_attention_forward", "lse", when, lse[1], lse[0], nl);
	expect_bitwise("kn_attention_forward", "out", when, out[1], out[0], btc);
	expect_bitwise("kn_attention_backward", "dqkv", when, dqkv[1], dqkv[0], nqkv);
	for (int k = 0; k < 2; k++)
		free(dqkv[k]), free(out[k]), free(lse[k]);
	free(r), free(qkv);
}
END_TEST

static const size_t sumsq_sizes[] = {0, 1, 5, 63, 64, 65, 1000, 100003};
#define N_SUMSQ_SIZES (sizeof sumsq_sizes / sizeof sumsq_sizes[0])

START_TEST(test_kn_sumsq_threads)
{
	size_t n = sumsq_sizes[_i];
	rng_seed(SEED);
	float *x = fnew(n);
	fill(x, n, -1.0f, 1.0f);
	double s[2];
	for (int k = 0; k < 2; k++) {
		kn_set_threads(k + 1);
		s[k] = kn_sumsq(x, n);
	}
	ck_assert_msg(memcmp(&s[0], &s[1], sizeof(double)) == 0, "kn_sumsq: N=%zu gives "
		"%.17g with 1 thread, %.17g with 2: the gradient norm would depend on threads", n,
		s[0], s[1]);
	free(x);
}
END_TEST

/* A sharded optimizer's norm (eng_config_opt_part's parts): each part's slices read from
 * its own floats alone (the rest NaN), added to zeros, give kn_sumsq's bits; the parts
 * tile [0, N) in order. */
START_TEST(test_kn_sumsq_parts)
{
	size_t n = sumsq_sizes[_i];
	static const int parts[] = {2, 3, 7, 64, 100};
	rng_seed(SEED);
	float *x = fnew(n), *mine = fnew(n);
	fill(x, n, -1.0f, 1.0f);
	double whole = kn_sumsq(x, n);
	for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) {
		double part[KN_SUMSQ_SLICES] = {0}, total = 0;
		size_t at = 0;
		for (int r = 0; r < parts[k]; r++) {
			size_t lo, hi;
			eng_config_opt_part(n, parts[k], r, &lo, &hi);
			ck_assert_msg(lo == at && hi >= lo, "part %d of %d: [%zu, %zu)", r,
				parts[k], lo, hi);
			at = hi;
			if (parts[k] > KN_SUMSQ_SLICES)
				continue; /* an even split: no slices */
			for (size_t i = 0; i < n; i++)
				mine[i] = i >= lo && i < hi ? x[i] : NAN;
			double own[KN_SUMSQ_SLICES] = {0};
			int s0, s1;
			eng_config_opt_slices(parts[k], r, &s0, &s1);
			kn_sumsq_slices(mine, n, s0, s1, own);
			for (int s = 0; s < KN_SUMSQ_SLICES; s++)
				part[s] += own[s];
		}
		ck_assert_msg(at == n, "%d parts end at %zu of %zu", parts[k], at, n);
		for (int s = 0; s < KN_SUMSQ_SLICES; s++)
			total += part[s];
		int split = parts[k] > KN_SUMSQ_SLICES; /* no slices to add */
		ck_assert_msg(split || memcmp(&total, &whole, sizeof total) == 0,
			"N=%zu in %d parts: %.17g, kn_sumsq %.17g", n, parts[k], total, whole);
	}
	free(x);
	free(mine);
}
END_TEST

/* ---- run to run with the same thread count: kn_sgemm and what calls it -------------------- */

START_TEST(test_kn_sgemm_repeatable)
{
	/* big enough for OpenBLAS to split the product over the threads */
	int M = 131, N = 97, K = 75;
	int threads = _i + 1;
	rng_seed(SEED);
	kn_set_threads(threads);
	float *A = fnew((size_t)M * K), *B = fnew((size_t)K * N);
	float *C1 = fnew((size_t)M * N), *C2 = fnew((size_t)M * N);
	fill(A, (size_t)M * K, -1.0f, 1.0f), fill(B, (size_t)K * N, -1.0f, 1.0f);
	fill_const(C2, (size_t)M * N, GARBAGE);
	kn_sgemm(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C1, N);
	float *A2 = fdup(A, (size_t)M * K), *B2 = fdup(B, (size_t)K * N);
	kn_sgemm(0, 0, M, N, K, 1.0f, A2, K, B2, N, 0.0f, C2, N);
	expect_bitwise("kn_sgemm", "C", threads == 1 ? "run to run (1 thread)" :
		"run to run (2 threads)", C2, C1, (size_t)M * N);
	free(B2), free(A2), free(C2), free(C1), free(B), free(A);
}
END_TEST

START_TEST(test_kn_linear_forward_repeatable)
{
	int N = TH_N, C = 75, OC = TH_OC;
	size_t nc = (size_t)N * C, co = (size_t)C * OC, no = (size_t)N * OC;
	int threads = _i + 1;
	rng_seed(SEED);
	kn_set_threads(threads);
	float *inp = fnew(nc), *w = fnew(co), *b = fnew(OC), *o1 = fnew(no), *o2 = fnew(no);
	fill(inp, nc, -1.0f, 1.0f), fill(w, co, -1.0f, 1.0f), fill(b, OC, -1.0f, 1.0f);
	fill_const(o2, no, GARBAGE);
	kn_linear_forward(o1, inp, w, b, N, C, OC);
	float *inp2 = fdup(inp, nc), *w2 = fdup(w, co);
	kn_linear_forward(o2, inp2, w2, b, N, C, OC);
	expect_bitwise("kn_linear_forward", "out", threads == 1 ? "run to run (1 thread)" :
		"run to run (2 threads)", o2, o1, no);
	free(w2), free(inp2), free(o2), free(o1), free(b), free(w), free(inp);
}
END_TEST

/* ---- against double loops --------------------------------------------------------------- */

START_TEST(test_kn_sgemm_transposes)
{
	/* every op() pair, padded strides, alpha and beta both at work */
	int M = 7, N = 5, K = 9, pad = 3;
	float alpha = 0.5f, beta = -2.0f;
	int ta = _i & 1, tb = _i >> 1;
	rng_seed(SEED + (uint64_t)_i);
	kn_set_threads(2);
	int arows = ta ? K : M, acols = ta ? M : K, brows = tb ? N : K, bcols = tb ? K : N;
	int lda = acols + pad, ldb = bcols + pad, ldc = N + pad;
	float *A = fnew((size_t)arows * lda), *B = fnew((size_t)brows * ldb);
	float *C = fnew((size_t)M * ldc), *want = fnew((size_t)M * ldc);
	fill(A, (size_t)arows * lda, -1.0f, 1.0f), fill(B, (size_t)brows * ldb, -1.0f, 1.0f);
	fill(C, (size_t)M * ldc, -1.0f, 1.0f);
	for (int i = 0; i < M; i++)
		for (int j = 0; j < ldc; j++) {
			if (j >= N) { /* padding is left alone */
				want[i * ldc + j] = C[i * ldc + j];
				continue;
			}
			double s = 0.0;
			for (int k = 0; k < K; k++)
				s += (double)(ta ? A[k * lda + i] : A[i * lda + k]) *
				     (tb ? B[j * ldb + k] : B[k * ldb + j]);
			want[i * ldc + j] = (float)(alpha * s + (double)beta * C[i * ldc + j]);
		}
	kn_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
	double err = rel_l2(C, want, (size_t)M * ldc);
	ck_assert_msg(err < SGEMM_TOL, "kn_sgemm: C (trans_a %d, trans_b %d) off a double loop "
		"by relative L2 error %.3e (limit %.0e)", ta, tb, err, SGEMM_TOL);
	free(want), free(C), free(B), free(A);
}
END_TEST

/* oneDNN's float32 matmul, plain and with B packed (the engine's routes for the head):
 * every op() pair, padded strides, beta 0 and 1, against a double loop; run to run, and
 * packed against plain, bitwise (the engine needs neither, but a change would show here) */
START_TEST(test_kn_dnnl_gemm)
{
	int M = 37, N = 45, K = 300, pad = 3;
	int ta = _i & 1, tb = (_i >> 1) & 1, beta = _i >> 2;
	char why[320];
	if (!kn_dnnl_available(why, sizeof why)) {
		if (_i == 0)
			fprintf(stderr, "kernels: oneDNN's float32 matmul skipped: %s\n", why);
		return;
	}
	rng_seed(SEED + (uint64_t)_i);
	kn_set_threads(2);
	int arows = ta ? K : M, acols = ta ? M : K, brows = tb ? N : K, bcols = tb ? K : N;
	int lda = acols + pad, ldb = bcols + pad, ldc = N + pad;
	size_t na = (size_t)arows * lda, nb = (size_t)brows * ldb, nc = (size_t)M * ldc;
	float *A = fnew(na), *B = fnew(nb), *C0 = fnew(nc), *want = fnew(nc);
	float *C[3] = {fnew(nc), fnew(nc), fnew(nc)};
	fill(A, na, -1.0f, 1.0f), fill(B, nb, -1.0f, 1.0f), fill(C0, nc, -1.0f, 1.0f);
	for (int i = 0; i < M; i++)
		for (int j = 0; j < ldc; j++) {
			double s = 0.0;
			for (int k = 0; k < K && j < N; k++)
				s += (double)(ta ? A[k * lda + i] : A[i * lda + k]) *
				     (tb ? B[j * ldb + k] : B[k * ldb + j]);
			want[i * ldc + j] = j >= N ? C0[i * ldc + j] : /* padding is left alone */
				(float)(s + beta * (double)C0[i * ldc + j]);
		}
	void *scratch = NULL, *packed = NULL;
	for (int r = 0; r < 3; r++) { /* plain, plain again, packed */
		kn_mm q = {0, ta, tb, M, N, K, lda, ldb, ldc, beta, r == 2};
		size_t sb, pb;
		memcpy(C[r], C0, nc * sizeof(float));
		ck_assert_msg(kn_dnnl_sizes(&q, &sb, &pb) == 0, "%s", kn_bf16_error());
		free(scratch);
		scratch = aligned_alloc(64, (sb + 64) / 64 * 64); /* as the engine's */
		if (q.packed) {
			packed = aligned_alloc(64, (pb + 63) / 64 * 64);
			ck_assert_msg(kn_dnnl_pack(&q, B, packed, pb) == 0, "%s", kn_bf16_error());
		}
		ck_assert_msg(kn_dnnl_gemm(&q, A, q.packed ? packed : B, C[r], scratch, sb) == 0,
			"%s", kn_bf16_error());
		double err = rel_l2(C[r], want, nc);
		ck_assert_msg(err < SGEMM_TOL, "oneDNN matmul%s: C (trans_a %d, trans_b %d, beta %d) "
			"off a double loop by relative L2 error %.3e (limit %.0e)",
			q.packed ? ", B packed" : "", ta, tb, beta, err, SGEMM_TOL);
	}
	expect_bitwise("oneDNN matmul", "C", "run to run", C[1], C[0], nc);
	expect_bitwise("oneDNN matmul", "C", "B packed against plain", C[2], C[0], nc);
	free(packed), free(scratch);
	for (int r = 0; r < 3; r++)
		free(C[r]);
	free(want), free(C0), free(B), free(A);
}
END_TEST

START_TEST(test_kn_sumsq_double)
{
	size_t n = sumsq_sizes[_i];
	rng_seed(SEED);
	kn_set_threads(2);
	float *x = fnew(n);
	fill(x, n, -1.0f, 1.0f);
	double want = 0.0;
	for (size_t i = n; i-- > 0;) /* backwards: another order than the kernel's */
		want += (double)x[i] * x[i];
	double got = kn_sumsq(x, n);
	double err = n ? fabs(got - want) / want : fabs(got);
	ck_assert_msg(err < SUMSQ_TOL, "kn_sumsq: N=%zu gives %.17g, a double loop %.17g "
		"(relative error %.3e, limit %.0e)", n, got, want, err, SUMSQ_TOL);
	free(x);
}
END_TEST

#define ADAM_N 7
#define ADAM_STEPS 3

/* One hyperparameter set of the AdamW test. */
struct adam_case {
	float lr, beta1, beta2, eps, wd;
};

START_TEST(test_kn_adamw_update_torch)
{
	/* GPT-2's settings with decay; then no decay, an eps that the tiny gradients of
	 * element 5 make count, and beta2 close to 1 so that the bias corrections are large. */
	static const struct adam_case cases[] = {
		{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f},
		{3e-4f, 0.8f, 0.999f, 1e-6f, 0.0f},
	};
	/* a zero gradient at step 1 (0 / (0 + eps) = 0, not NaN), signs that flip, a large
	 * one, tiny ones */
	static const float grads[ADAM_STEPS][ADAM_N] = {
		{0.0f, 0.3f, -0.2f, 5.0f, 1e-3f, 2e-6f, -0.7f},
		{0.1f, -0.4f, -0.1f, 4.0f, -2e-3f, 1e-6f, 0.6f},
		{-0.2f, 0.2f, 0.3f, -3.0f, 1e-3f, -3e-6f, 0.5f},
	};
	static const float p0[ADAM_N] = {0.5f, -1.25f, 2.0f, 0.75f, -0.3f, 1.5f, -2.0f};
	struct adam_case k = cases[_i];
	float gs = _i == 1 ? 0.5f : 1.0f; /* the second case clipped */
	kn_set_threads(2);
	float p[ADAM_N], m[ADAM_N] = {0}, v[ADAM_N] = {0};
	memcpy(p, p0, sizeof p);
	for (int t = 1; t <= ADAM_STEPS; t++) {
		float g[ADAM_N];
		for (int i = 0; i < ADAM_N; i++)
			g[i] = grads[t - 1][i] * gs;
		double bc1 = 1.0 - pow(k.beta1, t), bc2 = 1.0 - pow(k.beta2, t);
		/* torch.optim.AdamW in double, from the float state before the step */
		float wp[ADAM_N], wm[ADAM_N], wv[ADAM_N];
		for (int i = 0; i < ADAM_N; i++) {
			double pi = p[i] * (1.0 - (double)k.lr * k.wd);
			double mi = k.beta1 * (double)m[i] + (1.0 - k.beta1) * (double)g[i];
			double vi = k.beta2 * (double)v[i] +
				    (1.0 - k.beta2) * (double)g[i] * g[i];
			double denom = sqrt(vi) / sqrt(bc2) + k.eps;
			wp[i] = (float)(pi - (double)k.lr / bc1 * mi / denom);
			wm[i] = (float)mi;
			wv[i] = (float)vi;
		}
		uint16_t pb[ADAM_N];
		kn_adamw_update(p, t % 2 ? pb : NULL, m, v, grads[t - 1], gs, ADAM_N, k.lr,
			k.beta1, k.beta2, k.eps, k.wd, bc1, bc2);
		if (t % 2) /* the copy of the new param's */
			expect_rounded("kn_adamw_update", "param", pb, p, ADAM_N);
		const float *got[3] = {p, m, v}, *want[3] = {wp, wm, wv};
		static const char *name[3] = {"param", "m", "v"};
		for (int j = 0; j < 3; j++) {
			double err = rel_l2(got[j], want[j], ADAM_N);
			ck_assert_msg(err < ADAM_TOL, "kn_adamw_update: %s at step %d (case %d) off "
				"PyTorch's AdamW in double by relative L2 error %.3e (limit %.0e)",
				name[j], t, _i, err, ADAM_TOL);
		}
	}
}
END_TEST

/* ---- the suite -------------------------------------------------------------------------- */

/* The BLAS kernel choice: a generic fallback on an AVX2+FMA processor is replaced by
 * Haswell; a detected modern kernel, or a processor without AVX2/FMA, is left alone. */
/* kn_expf against exp in double over its whole range, 2e6 points plus the ends and beyond
 * them (clamped). Measured worst relative error 2.5e-7 (at x = 6.585), two float ulps. */
#define KN_EXPF_TOL 3e-7
START_TEST(test_kn_expf)
{
	double worst = 0.0, at = 0.0;
	for (int i = 0; i <= 2000000; i++) {
		float x = -87.0f + 175.0f * (float)i / 2000000.0f;
		double want = exp((double)x), got = kn_expf(x);
		double e = fabs(got - want) / want;
		if (e > worst)
			worst = e, at = x;
	}
	ck_assert_msg(worst < KN_EXPF_TOL, "kn_expf: relative error %.3e at x = %.7g (limit "
		"%.0e)", worst, at, KN_EXPF_TOL);
	ck_assert(kn_expf(0.0f) == 1.0f);
	ck_assert(kn_expf(-1000.0f) == kn_expf(-87.0f) && kn_expf(-87.0f) > 0.0f);
	ck_assert(kn_expf(1000.0f) == kn_expf(88.0f) && isfinite(kn_expf(88.0f)));
	ck_assert(kn_fast_tanhf(100.0f) == 1.0f && kn_fast_tanhf(-100.0f) == -1.0f);
}
END_TEST

START_TEST(test_kn_blas_better_kernel)
{
	unsigned avx2 = KN_CPU_AVX2 | KN_CPU_FMA, avx512 = avx2 | KN_CPU_AVX512;
	ck_assert_str_eq(kn_blas_better_kernel("Prescott", avx2), "Haswell");
	ck_assert_str_eq(kn_blas_better_kernel("core2", avx2), "Haswell");
	ck_assert_str_eq(kn_blas_better_kernel("Nehalem", avx2), "Haswell");
	ck_assert_str_eq(kn_blas_better_kernel("Prescott", avx512), "SkylakeX");
	ck_assert_str_eq(kn_blas_better_kernel("Haswell", avx512), "SkylakeX");
	ck_assert_str_eq(kn_blas_better_kernel("Sandybridge", avx2), "Haswell");
	ck_assert_ptr_null(kn_blas_better_kernel("Prescott", KN_CPU_AVX2));
	ck_assert_ptr_null(kn_blas_better_kernel("Prescott", KN_CPU_FMA));
	ck_assert_ptr_null(kn_blas_better_kernel("Cooperlake", avx512));
	ck_assert_ptr_null(kn_blas_better_kernel("SkylakeX", avx512));
	ck_assert_ptr_null(kn_blas_better_kernel("Haswell", avx2));
	ck_assert_ptr_null(kn_blas_better_kernel("Zen", avx2));
	ck_assert_ptr_null(kn_blas_better_kernel("NewCoreOfTheFuture", avx512));
	ck_assert_ptr_null(kn_blas_better_kernel(NULL, avx512));
	ck_assert_ptr_null(kn_blas_best_kernel(0));
	/* this machine: whatever it has, the best kernel is one OpenBLAS knows */
	const char *best = kn_blas_best_kernel(kn_cpu_features());
	ck_assert(best == NULL || kn_blas_better_kernel("Prescott", kn_cpu_features()) == best);
}
END_TEST

Suite *suite_kernels(void)
{
	Suite *s = suite_create("kernels");

	TCase *tc = tcase_create("finite_differences");
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_test(tc, test_kn_layernorm_backward_fd);
	tcase_add_test(tc, test_kn_linear_backward_fd);
	tcase_add_test(tc, test_kn_attention_backward_fd);
	tcase_add_test(tc, test_kn_gelu_backward_fd);
	tcase_add_test(tc, test_kn_crossentropy_fused_fd);
	tcase_add_test(tc, test_kn_encoder_backward_fd);
	tcase_add_test(tc, test_kn_blas_better_kernel);
	tcase_add_test(tc, test_kn_expf);
	suite_add_tcase(s, tc);

	tc = tcase_create("accumulation");
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_test(tc, test_kn_layernorm_backward_accumulates);
	tcase_add_test(tc, test_kn_linear_backward_accumulates);
	tcase_add_test(tc, test_kn_encoder_backward_accumulates);
	suite_add_tcase(s, tc);

	tc = tcase_create("recompute");
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_test(tc, test_kn_layernorm_apply_bitwise);
	tcase_add_test(tc, test_kn_fused_pointwise_bitwise);
	tcase_add_test(tc, test_kn_rounds_on_the_way);
	suite_add_tcase(s, tc);

	tc = tcase_create("determinism");
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_test(tc, test_kn_layernorm_backward_threads);
	tcase_add_test(tc, test_kn_linear_backward_threads);
	tcase_add_test(tc, test_kn_encoder_backward_threads);
	tcase_add_test(tc, test_kn_attention_backward_threads);
	tcase_add_loop_test(tc, test_kn_sumsq_threads, 0, (int)N_SUMSQ_SIZES);
	tcase_add_loop_test(tc, test_kn_sumsq_parts, 0, (int)N_SUMSQ_SIZES);
	tcase_add_loop_test(tc, test_kn_sgemm_repeatable, 0, 2);
	tcase_add_loop_test(tc, test_kn_linear_forward_repeatable, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("reference");
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_loop_test(tc, test_kn_sgemm_transposes, 0, 4);
	tcase_add_loop_test(tc, test_kn_dnnl_gemm, 0, 8);
	tcase_add_loop_test(tc, test_kn_attention_reference, 0, 3);
	tcase_add_loop_test(tc, test_kn_sumsq_double, 0, (int)N_SUMSQ_SIZES);
	tcase_add_loop_test(tc, test_kn_adamw_update_torch, 0, 2);
	suite_add_tcase(s, tc);

	return s;
}
