/* eng_cuda_step.c - one training step of the GPU model: forward, backward, global norm,
 * AdamW (see eng_cuda.h). The sequence of operations is eng_model.c's, kernel for kernel,
 * so the two backends can be compared tensor by tensor.
 *
 * Legend: B batch, T time, C channels, NH heads, V vocab, Vp padded vocab, L layers,
 * N = B*T rows, R rows per logits chunk.
 *
 * Differences from the CPU model, all for the GPU's sake:
 * - Linear biases are added by cuBLASLt's BIAS epilogue, and the backward through GELU by
 *   its DGELU epilogue (kc_gemm falls back to our kernels where cuBLASLt cannot).
 * - The head computes each chunk's loss and gradient in one pass (kc_crossentropy_fused)
 *   and goes on with that chunk's backward products at once, in the forward: the logits
 *   are then never needed again, under `off` (which still keeps the B*T*V buffer, as the
 *   mode promises) or `chunked` alike, and nothing is recomputed.
 * - Offloaded blocks: forward writes into one of two device slots and a second stream
 *   copies the slot to the block's pinned host buffer; backward brings each block back
 *   into a slot on that stream, two blocks ahead, the compute stream waiting on events.
 *
 * Everything is queued on the model's streams; a step waits for the GPU once, to read the
 * losses, and AdamW once more at its end, so CUDA faults surface in the step that caused
 * them.
 */
#include "eng_cuda_int.h"

#include <math.h>
#include <string.h>

/* kc_* calls: on failure, the kernel layer's message into err and out of the function */
#define KC(call, what)                                                                     \
	do {                                                                               \
		if ((call) < 0)                                                            \
			return ec_kc_fail(what, err);                                      \
	} while (0)
#define CU(call, what)                                                                     \
	do {                                                                               \
		if (ec_cuda_check((call), what, err) < 0)                                  \
			return -1;                                                         \
	} while (0)

static char *at(void *base, size_t elems, size_t es)
{
	return (char *)base + elems * es;
}

/* y(N,OC) = x(N,Cin) w(Cin,OC) + b */
static int linear_fwd(eng_cuda *g, void *y, const void *x, const void *w, const void *b, int N,
	int Cin, int OC)
{
	return kc_gemm(g->blas, g->st, 0, 0, N, OC, Cin, 1.0f, x, Cin, 0, w, OC, 0, g->dt, 0.0f, y,
		OC, 0, g->dt, 1, KC_EPI_BIAS, b);
}

/* dx(N,Cin) = dy w^T (times gelu'(aux) when aux is given); dw += x^T dy; db += colsum dy */
static int linear_bwd(eng_cuda *g, void *dx, float *dw, float *db, const void *dy,
	const void *x, const void *w, const void *aux, int N, int Cin, int OC)
{
	if (kc_gemm(g->blas, g->st, 0, 1, N, Cin, OC, 1.0f, dy, OC, 0, w, OC, 0, g->dt, 0.0f, dx,
		    Cin, 0, g->dt, 1, aux ? KC_EPI_DGELU : KC_EPI_NONE, aux) < 0 ||
		kc_gemm(g->blas, g->st, 1, 0, Cin, OC, N, 1.0f, x, Cin, 0, dy, OC, 0, g->dt, 1.0f, dw,
			OC, 0, KC_F32, 1, KC_EPI_NONE, NULL) < 0 ||
		kc_bias_backward(g->st, g->dt, db, dy, N, OC, g->red_scratch) < 0)
		return -1;
	return 0;
}

/* Block forward from a->x into `out`; stops before the MLP's c_proj when out is NULL (full
 * recompute: backward never needs that product). */
static int block_forward(eng_cuda *g, int l, eng_acts *a, void *out, eng_err *err)
{
	int B = g->B, T = g->T, C = g->cfg.n_embd, NH = g->cfg.n_head, N = B * T;
	const ec_layer_w *w = &g->w.h[l];
	KC(kc_layernorm_forward(g->st, g->dt, a->ln1, a->ln1_mean, a->ln1_rstd, a->x, w->ln1w,
		   w->ln1b, N, C), "ln_1");
	KC(linear_fwd(g, a->qkv, a->ln1, w->qkvw, w->qkvb, N, C, 3 * C), "c_attn");
	if (g->sdpa)
		KC(kc_sdpa_forward(g->sdpa, g->st, a->qkv, a->atty, a->att_lse, g->sdpa_ws),
			"cuDNN attention (REMAT_CUDA_ATTENTION=own runs the engine's instead)");
	else
		KC(kc_attention_forward(g->blas, g->st, g->dt, a->atty, a->att_lse, a->qkv, B, T, C,
			   NH, g->att_scratch), "attention");
	KC(linear_fwd(g, g->tmp, a->atty, w->attprojw, w->attprojb, N, C, C), "attn.c_proj");
	KC(kc_residual_layernorm_forward(g->st, g->dt, a->res2, a->ln2, a->ln2_mean, a->ln2_rstd,
		   a->x, g->tmp, w->ln2w, w->ln2b, N, C), "ln_2");
	KC(linear_fwd(g, a->fch, a->ln2, w->fcw, w->fcb, N, C, 4 * C), "c_fc");
	KC(kc_gelu_forward(g->st, g->dt, a->gelu, a->fch, (size_t)N * 4 * C), "gelu");
	if (!out)
		return 0;
	KC(linear_fwd(g, g->tmp, a->gelu, w->fcprojw, w->fcprojb, N, 4 * C, C), "mlp.c_proj");
	KC(kc_residual_forward(g->st, g->dt, out, a->res2, g->tmp, (size_t)N * C), "residual");
	return 0;
}

/* Selective recompute: the dropped LayerNorm and GELU outputs, bitwise the forward's. */
static int block_recompute_selective(eng_cuda *g, int l, eng_acts *a, eng_err *err)
{
	int C = g->cfg.n_embd, N = g->B * g->T;
	const ec_layer_w *w = &g->w.h[l];
	KC(kc_layernorm_apply(g->st, g->dt, a->ln1, a->x, a->ln1_mean, a->ln1_rstd, w->ln1w,
		   w->ln1b, N, C), "ln_1 recompute");
	KC(kc_layernorm_apply(g->st, g->dt, a->ln2, a->res2, a->ln2_mean, a->ln2_rstd, w->ln2w,
		   w->ln2b, N, C), "ln_2 recompute");
	KC(kc_gelu_forward(g->st, g->dt, a->gelu, a->fch, (size_t)N * 4 * C), "gelu recompute");
	return 0;
}

/* dres holds dL/d(block output) on entry and dL/d(block input) on return.
 *
 * As on the CPU (eng_model.c): out = res2 + mlp(ln2(res2)), res2 = x + attn(ln1(x)), so
 * each LayerNorm backward accumulates (dinp +=) into dres, which already holds the
 * gradient that came straight through the residual add: after ln_2's it is dL/dres2,
 * after ln_1's dL/dx. Scratch, each holding several tensors in turn:
 *   dbig (B,T,4C)  dL/dfch (c_proj's input gradient, through GELU in the epilogue)
 *   dbuf (B,T,C)   dL/dln2, then dL/datty, then dL/dln1
 *   dqkv (B,T,3C)  dL/dqkv
 *   red_scratch    column-sum partials of each LayerNorm and bias gradient */
static int block_backward(eng_cuda *g, int l, const eng_acts *a, eng_err *err)
{
	int B = g->B, T = g->T, C = g->cfg.n_embd, NH = g->cfg.n_head, N = B * T;
	const ec_layer_w *w = &g->w.h[l];
	const ec_layer_w *gw = &g->g.h[l];
	/* MLP: the c_proj product's input gradient goes through GELU in the epilogue */
	KC(linear_bwd(g, g->dbig, gw->fcprojw, gw->fcprojb, g->dres, a->gelu, w->fcprojw, a->fch,
		   N, 4 * C, C), "mlp.c_proj backward");
	KC(linear_bwd(g, g->dbuf, gw->fcw, gw->fcb, g->dbig, a->ln2, w->fcw, NULL, N, C, 4 * C),
		"c_fc backward");
	/* dres += ln_2's backward: now dL/dres2 */
	KC(kc_layernorm_backward(g->st, g->dt, g->dres, gw->ln2w, gw->ln2b, g->dbuf, a->res2,
		   a->ln2_mean, a->ln2_rstd, w->ln2w, N, C, g->red_scratch), "ln_2 backward");
	KC(linear_bwd(g, g->dbuf, gw->attprojw, gw->attprojb, g->dres, a->atty, w->attprojw, NULL,
		   N, C, C), "attn.c_proj backward");
	if (g->sdpa)
		KC(kc_sdpa_backward(g->sdpa, g->st, a->qkv, a->atty, g->dbuf, a->att_lse, g->dqkv,
			   g->sdpa_ws),
			"cuDNN attention backward (REMAT_CUDA_ATTENTION=own runs the engine's instead)");
	else
		KC(kc_attention_backward(g->blas, g->st, g->dt, g->dqkv, g->dbuf, a->qkv, a->atty,
			   a->att_lse, B, T, C, NH, g->att_scratch), "attention backward");
	KC(linear_bwd(g, g->dbuf, gw->qkvw, gw->qkvb, g->dqkv, a->ln1, w->qkvw, NULL, N, C, 3 * C),
		"c_attn backward");
	/* dres += ln_1's backward: now dL/dx */
	KC(kc_layernorm_backward(g->st, g->dt, g->dres, gw->ln1w, gw->ln1b, g->dbuf, a->x,
		   a->ln1_mean, a->ln1_rstd, w->ln1w, N, C, g->red_scratch), "ln_1 backward");
	return 0;
}

/* The batch onto the device, and the embedding gradient's token buckets: the rows of each
 * distinct token, ascending (a counting sort, O(N + V)). */
static int upload_batch(eng_cuda *g, const uint32_t *inp, const uint32_t *tgt, eng_err *err)
{
	int N = g->B * g->T, V = g->cfg.vocab_size;
	memset(g->h_count, 0, (size_t)(V + 1) * sizeof(int));
	for (int i = 0; i < N; i++)
		g->h_count[inp[i] + 1]++;
	int nb = 0;
	for (int v = 0; v < V; v++) {
		if (g->h_count[v + 1]) {
			g->h_btok[nb] = v;
			g->h_bstart[nb] = g->h_count[v];
			nb++;
		}
		g->h_count[v + 1] += g->h_count[v]; /* now: first row slot of token v + 1 */
	}
	g->h_bstart[nb] = N;
	/* h_count[v] is the next free slot of token v: place rows in ascending order */
	for (int i = 0; i < N; i++)
		g->h_order[g->h_count[inp[i]]++] = i;
	g->nb = nb;
	size_t n2 = (size_t)N * sizeof(uint32_t), n4 = (size_t)N * sizeof(int);
	CU(cudaMemcpyAsync(g->d_inp, inp, n2, cudaMemcpyHostToDevice, g->st), "batch upload");
	CU(cudaMemcpyAsync(g->d_tgt, tgt, n2, cudaMemcpyHostToDevice, g->st), "batch upload");
	CU(cudaMemcpyAsync(g->d_order, g->h_order, n4, cudaMemcpyHostToDevice, g->st),
		"batch upload");
	CU(cudaMemcpyAsync(g->d_bstart, g->h_bstart, (size_t)(nb + 1) * sizeof(int),
		   cudaMemcpyHostToDevice, g->st), "batch upload");
	CU(cudaMemcpyAsync(g->d_btok, g->h_btok, (size_t)nb * sizeof(int), cudaMemcpyHostToDevice,
		   g->st), "batch upload");
	return 0;
}

/* Head: ln_f, then per chunk the logits and, with grad, their loss and gradient at once
 * and that chunk's backward products (dlnf rows into dbuf, dwte +=). */
static int head(eng_cuda *g, int grad, eng_err *err)
{
	int C = g->cfg.n_embd, V = g->cfg.vocab_size, N = g->B * g->T, R = g->chunk_rows;
	size_t es = g->es, cs = ec_chunk_bytes(g);
	const eng_head_acts *h = &g->lay.head;
	float *lse = h->lse;
	KC(kc_layernorm_forward(g->st, g->dt, h->lnf, h->lnf_mean, h->lnf_rstd, h->xf, g->w.lnfw,
		   g->w.lnfb, N, C), "ln_f");
	for (int r0 = 0, k = 0; r0 < N; r0 += R, k++) {
		int rows = N - r0 < R ? N - r0 : R;
		void *buf = h->logits ? (char *)h->logits + (size_t)k * cs : h->chunk;
		const void *lnf = at(h->lnf, (size_t)r0 * C, es);
		/* logits(rows, V) = lnf wte^T, rows Vp apart */
		KC(kc_gemm(g->blas, g->st, 0, 1, rows, V, C, 1.0f, lnf, C, 0, g->w.wte, C, 0, g->dt,
			   0.0f, buf, g->Vp, 0, g->dt, 1, KC_EPI_NONE, NULL), "lm_head");
		if (!grad) {
			KC(kc_crossentropy_forward(g->st, g->dt, lse + r0, g->losses + r0, buf,
				   g->Vp, g->d_tgt + r0, rows, V), "cross-entropy");
			continue;
		}
		KC(kc_crossentropy_fused(g->st, g->dt, buf, g->Vp, lse + r0, g->losses + r0,
			   g->d_tgt + r0, 1.0f / N, rows, V), "cross-entropy");
		/* dlnf(rows, C) = dlogits wte; dwte(V, C) += dlogits^T lnf */
		KC(kc_gemm(g->blas, g->st, 0, 0, rows, C, V, 1.0f, buf, g->Vp, 0, g->w.wte, C, 0,
			   g->dt, 0.0f, at(g->dbuf, (size_t)r0 * C, es), C, 0, g->dt, 1, KC_EPI_NONE,
			   NULL), "lm_head backward");
		KC(kc_gemm(g->blas, g->st, 1, 0, V, C, rows, 1.0f, buf, g->Vp, 0, lnf, C, 0, g->dt,
			   1.0f, g->g.wte, C, 0, KC_F32, 1, KC_EPI_NONE, NULL), "lm_head backward");
	}
	return 0;
}

/* Offload: forward copies slot s to host buffer of block l once the block has written it */
static int offload_out(eng_cuda *g, int l, int s, eng_err *err)
{
	CU(cudaEventRecord(g->ev_written[s], g->st), "offload");
	CU(cudaStreamWaitEvent(g->cst, g->ev_written[s], 0), "offload");
	CU(cudaMemcpyAsync(g->lay.host[l], g->lay.slot[s], g->mem.offload_bytes, cudaMemcpyDeviceToHost,
		   g->cst), "offload to host");
	CU(cudaEventRecord(g->ev_free[s], g->cst), "offload");
	return 0;
}

/* Offload: backward brings block l back into slot s once the compute stream is done with
 * the slot's previous block */
static int offload_in(eng_cuda *g, int l, int s, eng_err *err)
{
	CU(cudaStreamWaitEvent(g->cst, g->ev_used[s], 0), "offload");
	CU(cudaMemcpyAsync(g->lay.slot[s], g->lay.host[l], g->mem.offload_bytes, cudaMemcpyHostToDevice,
		   g->cst), "offload from host");
	CU(cudaEventRecord(g->ev_loaded[s], g->cst), "offload");
	return 0;
}

/* Forward over the batch in d_inp/d_tgt; with grad, the head's backward too. */
static int forward(eng_cuda *g, int grad, eng_err *err)
{
	int B = g->B, T = g->T, C = g->cfg.n_embd, L = g->cfg.n_layer, noff = 0;
	if (g->lay.policy.n_layer != L)
		return eng_errf(err, "no activations are laid out (a policy change failed): set a "
				     "policy that fits first");
	KC(kc_encoder_forward(g->st, g->dt, g->lay.saved[0].x, g->d_inp, g->w.wte, g->w.wpe, B, T, C),
		"embedding");
	for (int l = 0; l < L; l++) {
		int off = g->lay.policy.block[l] == ENG_MODE_OFFLOAD, s = off ? noff++ % ENG_LAYOUT_SLOTS : -1;
		/* the slot's previous block must be on its way to the host before we overwrite */
		if (off && grad)
			CU(cudaStreamWaitEvent(g->st, g->ev_free[s], 0), "offload");
		eng_acts a = ec_block_view(g, l, s);
		if (block_forward(g, l, &a, l + 1 < L ? g->lay.saved[l + 1].x : g->lay.head.xf, err) < 0)
			return -1;
		if (off && grad && offload_out(g, l, s, err) < 0)
			return -1;
	}
	if (grad) {
		/* the first two offloaded blocks of backward start coming back now */
		for (int l = L - 1, j = 0; l >= 0 && j < ENG_LAYOUT_SLOTS; l--)
			if (g->lay.policy.block[l] == ENG_MODE_OFFLOAD && offload_in(g, l, j++, err) < 0)
				return -1;
	}
	return head(g, grad, err);
}

/* Waits for the GPU and returns the mean of the N losses (summed in double, in order). */
static int mean_loss(eng_cuda *g, float *loss, eng_err *err)
{
	int N = g->B * g->T;
	CU(cudaMemcpyAsync(g->h_losses, g->losses, (size_t)N * sizeof(float),
		   cudaMemcpyDeviceToHost, g->st), "loss download");
	CU(cudaStreamSynchronize(g->st), "step");
	CU(cudaStreamSynchronize(g->cst), "offload copies");
	double sum = 0.0;
	for (int r = 0; r < N; r++)
		sum += g->h_losses[r];
	*loss = (float)(sum / N);
	return 0;
}

int eng_cuda_loss(eng_cuda *g, const uint32_t *inp, const uint32_t *tgt, float *loss,
	eng_err *err)
{
	if (upload_batch(g, inp, tgt, err) < 0 || forward(g, 0, err) < 0)
		return -1;
	return mean_loss(g, loss, err);
}

int eng_cuda_step(eng_cuda *g, const uint32_t *inp, const uint32_t *tgt, float *loss,
	eng_err *err)
{
	int B = g->B, T = g->T, C = g->cfg.n_embd, L = g->cfg.n_layer, N = B * T;
	int j = 0, noff = 0;
	int offl[ENG_MAX_LAYERS];
	g->rc_n = 0;
	for (int l = L - 1; l >= 0; l--)
		if (g->lay.policy.block[l] == ENG_MODE_OFFLOAD)
			offl[noff++] = l;
	if (upload_batch(g, inp, tgt, err) < 0)
		return -1;
	CU(cudaMemsetAsync(g->grads, 0, g->nfloats * sizeof(float), g->st), "zeroing gradients");
	if (forward(g, 1, err) < 0)
		return -1;
	/* the head's backward ran with its forward: dbuf holds dL/d(ln_f output) */
	CU(cudaMemsetAsync(g->dres, 0, g->es * N * C, g->st), "zeroing");
	KC(kc_layernorm_backward(g->st, g->dt, g->dres, g->g.lnfw, g->g.lnfb, g->dbuf,
		   g->lay.head.xf, g->lay.head.lnf_mean, g->lay.head.lnf_rstd, g->w.lnfw, N, C, g->red_scratch), "ln_f backward");
	for (int l = L - 1; l >= 0; l--) {
		eng_mode mode = g->lay.policy.block[l];
		int s = mode == ENG_MODE_OFFLOAD ? j % ENG_LAYOUT_SLOTS : -1;
		eng_acts a = ec_block_view(g, l, s);
		if (mode == ENG_MODE_SELECTIVE || mode == ENG_MODE_FULL) {
			CU(cudaEventRecord(g->rc_ev[2 * g->rc_n], g->st), "timing");
			if (mode == ENG_MODE_SELECTIVE ? block_recompute_selective(g, l, &a, err)
						       : block_forward(g, l, &a, NULL, err))
				return -1;
			CU(cudaEventRecord(g->rc_ev[2 * g->rc_n + 1], g->st), "timing");
			g->rc_n++;
		}
		if (s >= 0)
			CU(cudaStreamWaitEvent(g->st, g->ev_loaded[s], 0), "offload");
		if (block_backward(g, l, &a, err) < 0)
			return -1;
		if (s >= 0) {
			CU(cudaEventRecord(g->ev_used[s], g->st), "offload");
			if (j + ENG_LAYOUT_SLOTS < noff && offload_in(g, offl[j + ENG_LAYOUT_SLOTS], s, err) < 0)
				return -1;
			j++;
		}
	}
	KC(kc_encoder_backward_wte(g->st, g->dt, g->g.wte, g->dres, g->d_order, g->d_bstart,
		   g->d_btok, g->nb, C), "embedding backward");
	KC(kc_encoder_backward_wpe(g->st, g->dt, g->g.wpe, g->dres, B, T, C), "embedding backward");
	if (mean_loss(g, loss, err) < 0)
		return -1;
	g->recompute_ms = 0.0;
	for (int k = 0; k < g->rc_n; k++) {
		float ms = 0.0f;
		CU(cudaEventElapsedTime(&ms, g->rc_ev[2 * k], g->rc_ev[2 * k + 1]), "timing");
		g->recompute_ms += ms;
	}
	eng_cuda_mem_refresh();
	return 0;
}

int eng_cuda_grad_sumsq(eng_cuda *g, double *out, eng_err *err)
{
	KC(kc_sumsq(g->st, g->sumsq + KC_SUMSQ_PARTS, g->sumsq, ec_step_grads(g), g->nfloats),
		"gradient norm");
	CU(cudaMemcpyAsync(out, g->sumsq + KC_SUMSQ_PARTS, sizeof(double), cudaMemcpyDeviceToHost,
		   g->st), "gradient norm");
	CU(cudaStreamSynchronize(g->st), "gradient norm");
	return 0;
}

int eng_cuda_accumulate(eng_cuda *g, int k, eng_err *err)
{
	if (!g->acc)
		return 0;
	size_t bytes = g->nfloats * sizeof(float);
	if (k == 0)
		CU(cudaMemcpyAsync(g->acc, g->grads, bytes, cudaMemcpyDeviceToDevice, g->st),
			"gradient accumulation");
	else
		KC(kc_add(g->st, g->acc, g->grads, g->nfloats), "gradient accumulation");
	return 0;
}

int eng_cuda_scale_grads(eng_cuda *g, float s, eng_err *err)
{
	KC(kc_scale(g->st, ec_step_grads(g), s, g->nfloats), "gradient scaling");
	return 0;
}

int eng_cuda_adamw(eng_cuda *g, float grad_scale, float lr, float beta1, float beta2,
	float eps, float weight_decay, double bc1, double bc2, eng_err *err)
{
	const float *grads = ec_step_grads(g);
	for (int i = 0; i < g->ntensors; i++) {
		const eng_ptensor *t = &g->tensors[i];
		void *copy = g->wcopy ? at(g->wcopy, t->offset, g->es) : NULL;
		KC(kc_adamw(g->st, g->params + t->offset, g->m + t->offset, g->v + t->offset,
			   grads + t->offset, copy, g->dt, t->numel, lr, beta1, beta2, eps,
			   t->decay ? weight_decay : 0.0f, bc1, bc2, grad_scale), "AdamW");
	}
	CU(cudaStreamSynchronize(g->st), "AdamW");
	return 0;
}
