/* eng_blocks.c - a block's passes on the CPU, GPT-2's and the Llama family's: forward,
 * the selective recompute, backward; the linear layers they run through the step's product
 * table (eng_model.c), and LoRA's adapters beside them.
 *
 * A linear weight of NULL is held in 4 bits (model.quantize): its products are
 * eng_model_q4.c's, read-only like any weight's, so recompute reads the very same bits.
 *
 * Legend: B batch, T time, C channels, NH heads, NKV key/value heads, hs head size, I the
 * Llama MLP's width, N = B*T rows, r LoRA's rank.
 *
 * The forward and the recompute of full run these very functions, on buffers of the same
 * alignment: that is why every policy gives the same bits (eng_model.c).
 */
#include "eng_model_int.h"

#include <stddef.h>
#include <string.h>

/* ---- LoRA (eng_config.h): y += s (x A^T) B^T beside each targeted weight, s = alpha / r ----
 *
 * Shapes: x (N, in) the layer's input, A (r, in), B (cols, r), mid (N, r) = x A^T kept per
 * unit in the block's `lora` field (unit j of the block's at j * N * r), y's columns
 * [col0, col0 + cols) of the layer's OC. In float32 (precision bf16 refuses adapters), by
 * OpenBLAS: the same calls in forward and recompute, so every policy keeps its bits. */

/* Walks the adapters of linear layer k of a block: each call gives the next one's unit
 * (u: units[i]) and its mid (slot j of the block's `lora` field, counting every targeted
 * unit in block order); 0 after the last. */
typedef struct lora_at {
	const eng_lora_unit *u;
	float *mid;
	int i, j;
} lora_at;

static int lora_next(const eng_model *m, int k, const eng_acts *a, lora_at *it,
	const eng_lora_unit *units, int nu)
{
	size_t slot = (size_t)m->B * m->T * m->cfg.lora_r;
	while (it->i < nu) {
		int i = it->i++;
		if (!(m->cfg.lora_units >> i & 1))
			continue;
		float *mid = (float *)a->lora + slot * (size_t)it->j++;
		if (units[i].layer != k)
			continue;
		it->u = &units[i];
		it->mid = mid;
		return 1;
	}
	return 0;
}

/* out(N,OC)[:, unit's columns] += s mid B^T, mid = x A^T, for the adapters of layer k;
 * out NULL: mid only (full recompute stops before the MLP's last product, whose adapters'
 * backward still needs it) */
static void lora_fwd(eng_model *m, int k, int l, const eng_acts *a, float *out,
	const void *inp, int N, int OC)
{
	eng_lora_unit units[ENG_LORA_UNITS];
	int nu = m->cfg.lora_r ? eng_lora_units(&m->cfg, units) : 0, r = m->cfg.lora_r;
	float s = eng_lora_scale(&m->cfg);
	lora_at it = {0};
	const eng_layer_w *w = &m->w.h[l];
	double t0 = eng_timing_t0(m->timing), flops = 0;
	while (lora_next(m, k, a, &it, units, nu)) {
		const eng_lora_unit *u = it.u;
		int i = (int)(u - units);
		kn_sgemm(0, 1, N, r, u->in, 1.0f, inp, u->in, w->lora_a[i], u->in, 0.0f, it.mid, r);
		if (out)
			kn_sgemm(0, 1, N, u->cols, r, s, it.mid, r, w->lora_b[i], r, 1.0f,
				out + u->col0, OC);
		flops += 2.0 * N * r * (u->in + (out ? u->cols : 0));
	}
	if (flops > 0)
		eng_timing_add(m->timing, ENG_TIMING_LORA, t0, flops, 0);
}

/* The adapters' gradients of layer k from dout(N,OC): dB += s dy^T mid, dmid = s dy B,
 * dA += dmid^T x, and dinp(N,in) += dmid A (dinp already holds the base weight's part) */
static void lora_bwd(eng_model *m, int k, int l, const eng_acts *a, float *dinp,
	const float *dout, const void *inp, int N, int OC)
{
	eng_lora_unit units[ENG_LORA_UNITS];
	int nu = m->cfg.lora_r ? eng_lora_units(&m->cfg, units) : 0, r = m->cfg.lora_r;
	float s = eng_lora_scale(&m->cfg);
	lora_at it = {0};
	const eng_layer_w *w = &m->w.h[l];
	eng_layer_w *g = &m->g.h[l];
	double t0 = eng_timing_t0(m->timing), flops = 0;
	while (lora_next(m, k, a, &it, units, nu)) {
		const eng_lora_unit *u = it.u;
		int i = (int)(u - units);
		const float *dy = dout + u->col0;
		flops += 2.0 * N * r * (2.0 * u->cols + 2.0 * u->in);
		if (g->lora_b[i]) /* NULL: frozen (eng_spec refuses it; the gradient flows on) */
			kn_sgemm(1, 0, u->cols, r, N, s, dy, OC, it.mid, r, 1.0f, g->lora_b[i], r);
		kn_sgemm(0, 0, N, r, u->cols, s, dy, OC, w->lora_b[i], r, 0.0f, m->dmid, r);
		if (g->lora_a[i])
			kn_sgemm(1, 0, r, u->in, N, 1.0f, m->dmid, r, inp, u->in, 1.0f, g->lora_a[i],
				u->in);
		if (dinp)
			kn_sgemm(0, 0, N, u->in, r, 1.0f, m->dmid, r, w->lora_a[i], u->in, 1.0f, dinp,
				u->in);
	}
	if (flops > 0)
		eng_timing_add(m->timing, ENG_TIMING_LORA, t0, flops, 0);
}

/* A weight as the products take it: float32, or its bf16 copy */
static const void *wmm(const eng_model *m, const float *w)
{
	return m->cfg.mm_bf16 ? (const void *)eng_model_wbf(m, w) : w;
}

/* out(N,OC) += b(OC), timed */
static void add_bias(eng_model *m, float *out, const float *b, int N, int OC)
{
	ENG_TIMED(m->timing, ENG_TIMING_ELEM, 0, f4(2 * (size_t)N * OC),
		kn_add_bias(out, b, N, OC));
}

/* db(OC) += column sums of dout(N,OC), timed */
static void bias_grad(eng_model *m, float *db, const float *dout, int N, int OC)
{
	ENG_TIMED(m->timing, ENG_TIMING_BIAS_GRAD, 0, f4((size_t)N * OC),
		kn_bias_backward(db, dout, N, OC));
}

/* Linear layer k (0 qkv, 1 attention proj, 2 fc, 3 fc proj) of block l:
 * out(N,OC) = inp(N,C) w + b(OC), w (C,OC) under GPT-2 and (OC,C) under llama; inp float32,
 * or bf16 under precision bf16; b may be NULL. Its product is the table's (OpenBLAS's
 * sgemm for GPT-2's float32 ones, kn_linear_forward's very call), the bias added after. */
static void linear_fwd(eng_model *m, int k, int l, const eng_acts *a, float *out,
	const void *inp, const float *w, const float *b, int N, int C, int OC)
{
	if (!w) /* 4 bits (eng_model_q4.c); inp float32: quantization takes precision fp32 */
		ENG_TIMED(m->timing, 3 * k, 2.0 * N * C * OC, f4((size_t)N * (C + OC)) +
			C * OC / 2.0, eng_q4_forward(m, k, l, out, inp, N, OC));
	else
		eng_model_prod_run(m, 3 * k, l, inp, wmm(m, w), out);
	if (b)
		add_bias(m, out, b, N, OC);
	lora_fwd(m, k, l, a, out, inp, N, OC);
}

/* dinp(N,C) = dout through w, dw = its gradient (inp^T dout for GPT-2's (C,OC), dout^T inp
 * for llama's (OC,C)), db(OC) += column sums of dout(N,OC): dout float32 (rounded into
 * bf_out under bf16, unless the kernel that made it did: `rounded`, mm_grad_bf), inp as
 * linear_fwd's; dinp, dw, db may be NULL (dw, db: frozen) */
static void linear_bwd(eng_model *m, int k, int l, const eng_acts *a, float *dinp, float *dw,
	float *db, const float *dout, int rounded, const void *inp, const float *w, int N, int C,
	int OC)
{
	const void *d = dout;
	if (!w && dinp) /* 4 bits: frozen, so no dw */
		ENG_TIMED(m->timing, 3 * k + 1, 2.0 * N * C * OC, f4((size_t)N * (C + OC)) +
			C * OC / 2.0, eng_q4_backward(m, k, l, dinp, dout, N, OC));
	if (w && m->cfg.mm_bf16) {
		if (!rounded)
			mm_round(m, m->bf_out, dout, (size_t)N * OC);
		d = m->bf_out;
	}
	if (w && dinp)
		eng_model_prod_run(m, 3 * k + 1, l, d, wmm(m, w), dinp);
	if (w && dw && m->cfg.arch == ENG_ARCH_LLAMA)
		eng_model_prod_run(m, 3 * k + 2, l, d, inp, dw);
	else if (w && dw)
		eng_model_prod_run(m, 3 * k + 2, l, inp, d, dw);
	if (db)
		bias_grad(m, db, dout, N, OC);
	lora_bwd(m, k, l, a, dinp, dout, inp, N, OC);
}

/* out(N,C) = a + y (+ bias), timed */
static void residual(eng_model *m, float *out, const float *x, const float *y,
	const float *bias, int N, int C)
{
	ENG_TIMED(m->timing, ENG_TIMING_ELEM, 0, f4(3 * (size_t)N * C),
		kn_residual_forward(out, x, y, bias, N, C));
}

/* FLOPs of `products` causal attention products of the batch (each about T^2/2 x hs
 * multiply-adds per head and sequence: 2 in forward, 5 in backward with the scores
 * rebuilt) */
static double attn_flops(const eng_model *m, int products)
{
	return (double)products * m->B * (double)m->T * m->T * m->cfg.n_embd;
}

/* Block forward from a->x; writes the block output into `out`, or stops before the MLP's
 * c_proj when out is NULL (full recompute: backward never needs that product). Biases of
 * c_proj and c_fc are added by the fused kernels that follow their matmuls. */
static void block_forward(eng_model *m, int l, eng_acts *a, float *out)
{
	int B = m->B, T = m->T, C = m->cfg.n_embd, NH = m->cfg.n_head, N = B * T;
	const eng_layer_w *w = &m->w.h[l];
	size_t NC = (size_t)N * C;
	/* under bf16 the LayerNorm and GELU outputs are computed into dbuf and dbig (free in
	 * a forward and before a block's backward) and stored rounded */
	float *ln = mm_f32(m, a->ln1, m->dbuf);
	ENG_TIMED(m->timing, ENG_TIMING_NORM_FWD, 0, f4(2 * NC + 2 * (size_t)N) + bf2(m, NC),
		kn_layernorm_forward(ln, a->ln1_mean, a->ln1_rstd, a->x, w->ln1w, w->ln1b, N, C,
			mm_bf(m, a->ln1)));
	linear_fwd(m, 0, l, a, a->qkv, a->ln1, w->qkvw, w->qkvb, N, C, 3 * C);
	ENG_TIMED(m->timing, ENG_TIMING_ATTN_FWD, attn_flops(m, 2), f4(4 * NC),
		kn_attention_forward(a->atty, a->att_lse, m->att_scratch, a->qkv, B, T, C, NH));
	linear_fwd(m, 1, l, a, m->tmp, mm_input(m, a->atty, NC), w->attprojw, NULL, N, C, C);
	ln = mm_f32(m, a->ln2, m->dbuf);
	ENG_TIMED(m->timing, ENG_TIMING_NORM_FWD, 0, f4(4 * NC + 2 * (size_t)N) + bf2(m, NC),
		kn_residual_layernorm_forward(a->res2, ln, a->ln2_mean, a->ln2_rstd, a->x, m->tmp,
			w->attprojb, w->ln2w, w->ln2b, N, C, mm_bf(m, a->ln2)));
	linear_fwd(m, 2, l, a, a->fch, a->ln2, w->fcw, NULL, N, C, 4 * C);
	float *ge = mm_f32(m, a->gelu, m->dbig);
	ENG_TIMED(m->timing, ENG_TIMING_ACT_FWD, 0, f4(12 * NC) + bf2(m, 4 * NC),
		kn_bias_gelu_forward(a->fch, ge, w->fcb, N, 4 * C, mm_bf(m, a->gelu)));
	if (!out) {
		lora_fwd(m, 3, l, a, NULL, a->gelu, N, C);
		return;
	}
	linear_fwd(m, 3, l, a, m->tmp, a->gelu, w->fcprojw, NULL, N, 4 * C, C);
	residual(m, out, a->res2, m->tmp, w->fcprojb, N, C);
}

/* Selective recompute: rebuild the dropped LayerNorm and GELU outputs from what the block
 * kept, with kernels that give the forward's bits (kn_rows.h). */
static void block_recompute_selective(eng_model *m, int l, eng_acts *a)
{
	int C = m->cfg.n_embd, N = m->B * m->T;
	const eng_layer_w *w = &m->w.h[l];
	size_t NC = (size_t)N * C;
	float *ln = mm_f32(m, a->ln1, m->dbuf);
	ENG_TIMED(m->timing, ENG_TIMING_NORM_FWD, 0, f4(2 * NC + 2 * (size_t)N) + bf2(m, NC),
		kn_layernorm_apply(ln, a->x, a->ln1_mean, a->ln1_rstd, w->ln1w, w->ln1b, N, C,
			mm_bf(m, a->ln1)));
	ln = mm_f32(m, a->ln2, m->dbuf);
	ENG_TIMED(m->timing, ENG_TIMING_NORM_FWD, 0, f4(2 * NC + 2 * (size_t)N) + bf2(m, NC),
		kn_layernorm_apply(ln, a->res2, a->ln2_mean, a->ln2_rstd, w->ln2w, w->ln2b, N,
			C, mm_bf(m, a->ln2)));
	float *ge = mm_f32(m, a->gelu, m->dbig);
	ENG_TIMED(m->timing, ENG_TIMING_ACT_FWD, 0, f4(8 * NC) + bf2(m, 4 * NC),
		kn_gelu_forward(ge, a->fch, 4 * NC, mm_bf(m, a->gelu)));
}

/* dres holds dL/d(block output) on entry and dL/d(block input) on return.
 *
 * The block is out = res2 + mlp(ln2(res2)) with res2 = x + attn(ln1(x)): each residual
 * stream's gradient is the gradient that flows straight through the add plus the one
 * through the branch. So the LayerNorm backwards accumulate (dinp +=) into dres, which at
 * that point already holds the straight-through part: after ln_2's it is dL/dres2, after
 * ln_1's dL/dx. Scratch, each holding several tensors in turn:
 *   dbig (B,T,4C)  dL/dgelu, then dL/dfch in place
 *   dbuf (B,T,C)   dL/dln2, then dL/datty, then dL/dln1
 *   dqkv (B,T,3C)  dL/dqkv */
static void block_backward(eng_model *m, int l, const eng_acts *a)
{
	int B = m->B, T = m->T, C = m->cfg.n_embd, NH = m->cfg.n_head, N = B * T;
	const eng_layer_w *w = &m->w.h[l];
	eng_layer_w *g = &m->g.h[l];
	size_t NC = (size_t)N * C;
	/* MLP branch: out = res2 + gelu(ln2 @ fcw + fcb) @ fcprojw + fcprojb */
	linear_bwd(m, 3, l, a, m->dbig, g->fcprojw, g->fcprojb, m->dres, 1, a->gelu, w->fcprojw, N,
		4 * C, C);
	ENG_TIMED(m->timing, ENG_TIMING_ACT_BWD, 0, f4(12 * NC) + bf2(m, 4 * NC),
		kn_gelu_backward(m->dbig, a->fch, m->dbig, 4 * NC, mm_grad_bf(m)));
	linear_bwd(m, 2, l, a, m->dbuf, g->fcw, g->fcb, m->dbig, 1, a->ln2, w->fcw, N, C, 4 * C);
	/* dres += ln_2's backward: now dL/dres2 */
	ENG_TIMED(m->timing, ENG_TIMING_NORM_BWD, 0, f4(4 * NC) + bf2(m, NC),
		kn_layernorm_backward(m->dres, g->ln2w, g->ln2b, m->dbuf, a->res2, a->ln2_mean,
			a->ln2_rstd, w->ln2w, N, C, mm_grad_bf(m)));
	/* attention branch: res2 = x + attn(ln1) @ attprojw + attprojb */
	linear_bwd(m, 1, l, a, m->dbuf, g->attprojw, g->attprojb, m->dres, 1,
		mm_input(m, a->atty, (size_t)N * C), w->attprojw, N, C, C);
	ENG_TIMED(m->timing, ENG_TIMING_ATTN_BWD, attn_flops(m, 5), f4(8 * NC),
		kn_attention_backward(m->dqkv, m->att_scratch, m->dbuf, a->qkv, a->atty,
			a->att_lse, B, T, C, NH));
	linear_bwd(m, 0, l, a, m->dbuf, g->qkvw, g->qkvb, m->dqkv, 0, a->ln1, w->qkvw, N, C,
		3 * C);
	/* dres += ln_1's backward: now dL/dx (rounded for the block below's first product) */
	ENG_TIMED(m->timing, ENG_TIMING_NORM_BWD, 0, f4(4 * NC) + bf2(m, NC),
		kn_layernorm_backward(m->dres, g->ln1w, g->ln1b, m->dbuf, a->x, a->ln1_mean,
			a->ln1_rstd, w->ln1w, N, C, mm_grad_bf(m)));
}

/* ---- the Llama family's block (eng_config.h), the same fields as GPT-2's (eng_acts.h) ---- */

/* Block forward from a->x, as Hugging Face's LlamaDecoderLayer: h = x + o_proj(attn(
 * rope(q), rope(k), v)) of RMSNorm(x), out = h + down(silu(gate) * up) of RMSNorm(h); out
 * NULL stops before down_proj (full recompute: backward never needs that product). */
static void llama_block_forward(eng_model *m, int l, eng_acts *a, float *out)
{
	int B = m->B, T = m->T, C = m->cfg.n_embd, NH = m->cfg.n_head, N = B * T;
	int NKV = m->cfg.n_kv_head, hs = C / NH, W = eng_config_qkv(&m->cfg);
	int I = m->cfg.intermediate_size;
	float eps = (float)m->cfg.rms_norm_eps;
	const eng_layer_w *w = &m->w.h[l];
	size_t NC = (size_t)N * C;
	float *ln = mm_f32(m, a->ln1, m->dbuf);
	ENG_TIMED(m->timing, ENG_TIMING_NORM_FWD, 0, f4(2 * NC + (size_t)N) + bf2(m, NC),
		kn_rmsnorm_forward(ln, a->ln1_rstd, a->x, w->ln1w, eps, N, C, mm_bf(m, a->ln1)));
	linear_fwd(m, 0, l, a, a->qkv, a->ln1, w->qkvw, NULL, N, C, W);
	ENG_TIMED(m->timing, ENG_TIMING_ELEM, 0, f4(2 * (size_t)N * (NH + NKV) * hs),
		kn_rope_forward(a->qkv, m->rope, B, T, NH, hs, W);                /* q */
		kn_rope_forward((float *)a->qkv + NH * hs, m->rope, B, T, NKV, hs, W)); /* k */
	ENG_TIMED(m->timing, ENG_TIMING_ATTN_FWD, attn_flops(m, 2), f4((size_t)N * W + NC),
		kn_gqa_attention_forward(a->atty, a->att_lse, m->att_scratch, a->qkv, B, T, NH,
			NKV, hs));
	linear_fwd(m, 1, l, a, m->tmp, mm_input(m, a->atty, NC), w->attprojw, NULL, N, C, C);
	residual(m, a->res2, a->x, m->tmp, NULL, N, C);
	ln = mm_f32(m, a->ln2, m->dbuf);
	ENG_TIMED(m->timing, ENG_TIMING_NORM_FWD, 0, f4(2 * NC + (size_t)N) + bf2(m, NC),
		kn_rmsnorm_forward(ln, a->ln2_rstd, a->res2, w->ln2w, eps, N, C,
			mm_bf(m, a->ln2)));
	linear_fwd(m, 2, l, a, a->fch, a->ln2, w->fcw, NULL, N, C, 2 * I);
	float *h = mm_f32(m, a->gelu, m->dbig);
	ENG_TIMED(m->timing, ENG_TIMING_ACT_FWD, 0, f4(3 * (size_t)N * I) + bf2(m, (size_t)N * I),
		kn_swiglu_forward(h, a->fch, N, I, mm_bf(m, a->gelu)));
	if (!out) {
		lora_fwd(m, 3, l, a, NULL, a->gelu, N, C);
		return;
	}
	linear_fwd(m, 3, l, a, m->tmp, a->gelu, w->fcprojw, NULL, N, I, C);
	residual(m, out, a->res2, m->tmp, NULL, N, C);
}

/* Selective recompute: the RMSNorm outputs from their saved rstd, SwiGLU's product from
 * gate|up, bitwise the forward's (kn_rmsnorm_apply, the same kn_swiglu_forward). */
static void llama_block_recompute_selective(eng_model *m, int l, eng_acts *a)
{
	int C = m->cfg.n_embd, N = m->B * m->T, I = m->cfg.intermediate_size;
	const eng_layer_w *w = &m->w.h[l];
	size_t NC = (size_t)N * C;
	float *ln = mm_f32(m, a->ln1, m->dbuf);
	ENG_TIMED(m->timing, ENG_TIMING_NORM_FWD, 0, f4(2 * NC + (size_t)N) + bf2(m, NC),
		kn_rmsnorm_apply(ln, a->x, a->ln1_rstd, w->ln1w, N, C, mm_bf(m, a->ln1)));
	ln = mm_f32(m, a->ln2, m->dbuf);
	ENG_TIMED(m->timing, ENG_TIMING_NORM_FWD, 0, f4(2 * NC + (size_t)N) + bf2(m, NC),
		kn_rmsnorm_apply(ln, a->res2, a->ln2_rstd, w->ln2w, N, C, mm_bf(m, a->ln2)));
	float *h = mm_f32(m, a->gelu, m->dbig);
	ENG_TIMED(m->timing, ENG_TIMING_ACT_FWD, 0, f4(3 * (size_t)N * I) + bf2(m, (size_t)N * I),
		kn_swiglu_forward(h, a->fch, N, I, mm_bf(m, a->gelu)));
}

/* dres: dL/d(block output) in, dL/d(block input) out, as block_backward (the RMSNorm
 * backwards accumulate into it). Scratch: dbig holds dgu (B,T,2I) then dh (B,T,I) after it;
 * dbuf dL/dln2, dL/datty, dL/dln1 in turn; dqkv dL/dqkv, turned back through the rotation. */
static void llama_block_backward(eng_model *m, int l, const eng_acts *a)
{
	int B = m->B, T = m->T, C = m->cfg.n_embd, NH = m->cfg.n_head, N = B * T;
	int NKV = m->cfg.n_kv_head, hs = C / NH, W = eng_config_qkv(&m->cfg);
	int I = m->cfg.intermediate_size;
	const eng_layer_w *w = &m->w.h[l];
	eng_layer_w *g = &m->g.h[l];
	size_t NC = (size_t)N * C;
	float *dgu = m->dbig, *dh = m->dbig + (size_t)N * 2 * I;
	/* MLP: out = res2 + h down^T */
	linear_bwd(m, 3, l, a, dh, g->fcprojw, NULL, m->dres, 1, a->gelu, w->fcprojw, N, I, C);
	ENG_TIMED(m->timing, ENG_TIMING_ACT_BWD, 0, f4(5 * (size_t)N * I) +
		bf2(m, 2 * (size_t)N * I),
		kn_swiglu_backward(dgu, dh, a->fch, N, I, mm_grad_bf(m)));
	linear_bwd(m, 2, l, a, m->dbuf, g->fcw, NULL, dgu, 1, a->ln2, w->fcw, N, C, 2 * I);
	ENG_TIMED(m->timing, ENG_TIMING_NORM_BWD, 0, f4(4 * NC) + bf2(m, NC),
		kn_rmsnorm_backward(m->dres, g->ln2w, m->dbuf, a->res2, a->ln2_rstd, w->ln2w, N,
			C, mm_grad_bf(m)));
	/* attention: res2 = x + atty o^T */
	linear_bwd(m, 1, l, a, m->dbuf, g->attprojw, NULL, m->dres, 1,
		mm_input(m, a->atty, (size_t)N * C), w->attprojw, N, C, C);
	ENG_TIMED(m->timing, ENG_TIMING_ATTN_BWD, attn_flops(m, 5), f4(2 * (size_t)N * W + 2 * NC),
		kn_gqa_attention_backward(m->dqkv, m->att_scratch, m->dbuf, a->qkv, a->atty,
			a->att_lse, B, T, NH, NKV, hs));
	ENG_TIMED(m->timing, ENG_TIMING_ELEM, 0, f4(2 * (size_t)N * (NH + NKV) * hs),
		kn_rope_backward(m->dqkv, m->rope, B, T, NH, hs, W);
		kn_rope_backward(m->dqkv + NH * hs, m->rope, B, T, NKV, hs, W));
	linear_bwd(m, 0, l, a, m->dbuf, g->qkvw, NULL, m->dqkv, 0, a->ln1, w->qkvw, N, C, W);
	ENG_TIMED(m->timing, ENG_TIMING_NORM_BWD, 0, f4(4 * NC) + bf2(m, NC),
		kn_rmsnorm_backward(m->dres, g->ln1w, m->dbuf, a->x, a->ln1_rstd, w->ln1w, N, C,
			mm_grad_bf(m)));
}

/* The family's block passes (eng_model_int.h) */
void eng_block_forward(eng_model *m, int l, eng_acts *a, float *out)
{
	if (m->cfg.arch == ENG_ARCH_LLAMA)
		llama_block_forward(m, l, a, out);
	else
		block_forward(m, l, a, out);
}

void eng_block_recompute_selective(eng_model *m, int l, eng_acts *a)
{
	if (m->cfg.arch == ENG_ARCH_LLAMA)
		llama_block_recompute_selective(m, l, a);
	else
		block_recompute_selective(m, l, a);
}

void eng_block_backward(eng_model *m, int l, const eng_acts *a)
{
	if (m->cfg.arch == ENG_ARCH_LLAMA)
		llama_block_backward(m, l, a);
	else
		block_backward(m, l, a);
}

/* ln_f forward (the final RMSNorm under llama) from xf: into the head's lnf, computed in
 * float32 into lnf (the field itself, or the scratch under bf16, rounded into the field) */
void eng_final_norm_forward(eng_model *m, float *lnf)
{
	const eng_head_acts *h = &m->lay.head;
	int C = m->cfg.n_embd, N = m->B * m->T;
	uint16_t *bf = mm_bf(m, h->lnf);
	double t0 = eng_timing_t0(m->timing);
	if (m->cfg.arch == ENG_ARCH_LLAMA)
		kn_rmsnorm_forward(lnf, h->lnf_rstd, h->xf, m->w.lnfw, (float)m->cfg.rms_norm_eps,
			N, C, bf);
	else
		kn_layernorm_forward(lnf, h->lnf_mean, h->lnf_rstd, h->xf, m->w.lnfw, m->w.lnfb, N,
			C, bf);
	eng_timing_add(m->timing, ENG_TIMING_NORM_FWD, t0, 0,
		f4(2 * (size_t)N * C + 2 * (size_t)N) + bf2(m, (size_t)N * C));
}

/* dres = ln_f's backward of dbuf (dL/dlnf), rounded into bf_out under bf16 for the last
 * block's first product */
void eng_final_norm_backward(eng_model *m)
{
	const eng_head_acts *h = &m->lay.head;
	int C = m->cfg.n_embd, N = m->B * m->T;
	double t0 = eng_timing_t0(m->timing);
	/* the backwards accumulate: dres starts at zero */
	memset(m->dres, 0, sizeof(float) * N * C);
	if (m->cfg.arch == ENG_ARCH_LLAMA)
		kn_rmsnorm_backward(m->dres, m->g.lnfw, m->dbuf, h->xf, h->lnf_rstd, m->w.lnfw, N,
			C, mm_grad_bf(m));
	else
		kn_layernorm_backward(m->dres, m->g.lnfw, m->g.lnfb, m->dbuf, h->xf, h->lnf_mean,
			h->lnf_rstd, m->w.lnfw, N, C, mm_grad_bf(m));
	eng_timing_add(m->timing, ENG_TIMING_NORM_BWD, t0, 0, f4(5 * (size_t)N * C) +
		bf2(m, (size_t)N * C));
}
