/* eng_cuda.c - the GPU model's lifetime, memory layout and transfers (see eng_cuda.h):
 * creation on its GPU, weights up and down, the activation layout of a policy (saved
 * buffers, the shared recompute pool, offload slots and pinned host copies), and what it
 * reports. The maths of a step is in eng_cuda_step.c.
 *
 * Layout rules, as eng_model.c on the CPU: a policy change allocates what the new layout
 * needs first and frees what it no longer needs last, so a failure leaves the old layout
 * whole; recompute writes only into the pool (or an offload slot), never into a saved
 * buffer. Every device buffer is 256-byte aligned (eng_cuda_mem.h), so a recomputed matmul
 * sees the alignment the forward saw and cuBLASLt picks the same algorithm.
 */
#include "eng_cuda_int.h"

#include <cudnn_graph.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_util.h"

eng_acts ec_block_view(const eng_cuda *g, int l, int slot)
{
	eng_acts a = eng_layout_view(&g->lay, l);
	for (int k = 0; k < ENG_ACT_N && slot >= 0; k++)
		if (!g->lay.saved[l].f[k] && eng_act_offloaded(k))
			a.f[k] = (char *)g->lay.slot[slot] + g->off_offset[k];
	return a;
}

const char *eng_cuda_libraries(void)
{
	static char buf[128];
	size_t dnn = cudnnGetVersion(); /* cuDNN 9: major*10000 + minor*100 + patch */
	snprintf(buf, sizeof buf, "%s, cuDNN %zu.%zu.%zu", kc_blas_version(), dnn / 10000,
		dnn / 100 % 100, dnn % 100);
	return buf;
}

int eng_cuda_opts_from_env(eng_cuda_opts *o, eng_err *err)
{
	static const char *const comms[] = {"auto", "nccl", "host"};
	const char *p = getenv("REMAT_CUDA_PRECISION"), *a = getenv("REMAT_CUDA_ATTENTION");
	const char *c = getenv("REMAT_CUDA_COMM");
	memset(o, 0, sizeof *o);
	if (p && *p) {
		if (strcmp(p, "fp32") == 0)
			o->fp32 = 1;
		else if (strcmp(p, "bf16") != 0)
			return eng_errf(err, "REMAT_CUDA_PRECISION='%.32s': expected bf16 or fp32", p);
	}
	if (a && *a) {
		if (strcmp(a, "own") == 0)
			o->no_cudnn = 1;
		else if (strcmp(a, "cudnn") != 0)
			return eng_errf(err, "REMAT_CUDA_ATTENTION='%.32s': expected cudnn or own", a);
	}
	if (!c || !*c)
		return 0;
	for (int i = 0; i < 3; i++)
		if (strcmp(c, comms[i]) == 0) {
			o->comm = (eng_cuda_comm)i;
			return 0;
		}
	return eng_errf(err, "REMAT_CUDA_COMM='%.32s': expected auto, nccl or host", c);
}

/* ---- lifetime ---- */

/* Points w's fields at the tensors of base, elements of es bytes, in table order. */
static void bind_weights(const eng_cuda *g, void *base, size_t es, ec_weights *w)
{
	const eng_ptensor *t = g->tensors;
	char *b = base;
	w->wte = b + es * t[0].offset;
	w->wpe = b + es * t[1].offset;
	for (int l = 0; l < g->cfg.n_layer; l++) {
		const eng_ptensor *lt = t + 2 + 12 * l;
		ec_layer_w *h = &w->h[l];
		void **f[12] = {&h->ln1w, &h->ln1b, &h->qkvw, &h->qkvb, &h->attprojw, &h->attprojb,
			&h->ln2w, &h->ln2b, &h->fcw, &h->fcb, &h->fcprojw, &h->fcprojb};
		for (int k = 0; k < 12; k++)
			*f[k] = b + es * lt[k].offset;
	}
	w->lnfw = b + es * t[g->ntensors - 2].offset;
	w->lnfb = b + es * t[g->ntensors - 1].offset;
}

size_t ec_chunk_bytes(const eng_cuda *g)
{
	return eng_round_up(g->es * g->chunk_rows * g->Vp, ENG_CUDA_ALIGN);
}

static size_t logits_bytes(const eng_cuda *g)
{
	size_t N = (size_t)g->B * g->T;
	size_t nchunks = (N + g->chunk_rows - 1) / g->chunk_rows;
	return nchunks * ec_chunk_bytes(g);
}

/* The activation tables' sizes on this device (eng_act_bytes: es, cfg.act_bf16 saying
 * which, or 4 for float32 fields), the device
 * allocator, pinned host memory for offloaded blocks; and an offload slot's layout: the
 * fields `off` keeps but x, one after the other. */
static void layout_mem(eng_cuda *g)
{
	eng_layout_mem *mem = &g->mem;
	for (int k = 0; k < ENG_ACT_N; k++) {
		const eng_act_field *f = &eng_block_fields[k];
		mem->block_bytes[k] = eng_act_bytes(f, &g->cfg, g->B, g->T, g->chunk_rows);
	}
	for (int k = 0; k < ENG_HEAD_N; k++) {
		const eng_act_field *f = &eng_head_fields[k];
		mem->head_bytes[k] = eng_act_bytes(f, &g->cfg, g->B, g->T, g->chunk_rows);
	}
	/* logits rows Vp apart, each chunk aligned, kept or rebuilt alike */
	mem->head_bytes[ENG_HEAD_logits] = logits_bytes(g);
	mem->head_bytes[ENG_HEAD_chunk] = ec_chunk_bytes(g);
	size_t off = 0;
	for (int k = 0; k < ENG_ACT_N; k++) {
		g->off_offset[k] = (size_t)-1;
		if (!eng_act_offloaded(k))
			continue;
		g->off_offset[k] = off;
		off = eng_round_up(off + mem->block_bytes[k], ENG_CUDA_ALIGN);
	}
	mem->offload_bytes = off;
	mem->alloc = eng_cuda_mem_alloc;
	mem->free = eng_cuda_mem_free;
	mem->size = eng_cuda_mem_size;
	mem->host_alloc = eng_cuda_host_alloc;
	mem->host_free = eng_cuda_host_free;
	mem->host_size = eng_cuda_host_size;
	mem->where = "device memory (or pinned host memory)";
}

/* Allocates *p (device, category cat) or records the failure. */
static int dev_alloc(void **p, eng_mem_cat cat, size_t bytes, const char *what, eng_err *err)
{
	*p = eng_cuda_mem_alloc(cat, bytes);
	if (*p)
		return 0;
	eng_cuda_mem_stats ms;
	eng_cuda_mem_get_stats(&ms);
	return eng_err_nomem(err, "out of device memory for %s (%.1f MiB; %.1f MiB free of %.1f)",
		what, bytes / 1048576.0, ms.device_free / 1048576.0, ms.device_total / 1048576.0);
}

/* The two streams and the events of offload and of recompute timing. */
static int create_streams(eng_cuda *g, eng_err *err)
{
	if (ec_cuda_check(cudaStreamCreateWithFlags(&g->st, cudaStreamNonBlocking), "stream",
		    err) < 0 ||
		ec_cuda_check(cudaStreamCreateWithFlags(&g->cst, cudaStreamNonBlocking), "stream",
			err) < 0)
		return -1;
	for (int s = 0; s < ENG_LAYOUT_SLOTS; s++) {
		cudaEvent_t *evs[4] = {&g->ev_written[s], &g->ev_free[s], &g->ev_loaded[s],
			&g->ev_used[s]};
		for (int k = 0; k < 4; k++)
			if (ec_cuda_check(cudaEventCreateWithFlags(evs[k], cudaEventDisableTiming),
				    "event", err) < 0)
				return -1;
	}
	for (int k = 0; k < 2 * g->cfg.n_layer; k++)
		if (ec_cuda_check(cudaEventCreate(&g->rc_ev[k]), "event", err) < 0)
			return -1;
	return 0;
}

/* Weights (float32 master and the bf16 working copy), gradients and moments. */
static int alloc_weights(eng_cuda *g, int accum, eng_err *err)
{
	size_t pbytes = g->nfloats * sizeof(float);
	if (dev_alloc((void **)&g->params, ENG_MEM_PARAMS, pbytes, "weights", err) < 0 ||
		(accum && dev_alloc((void **)&g->acc, ENG_MEM_GRADS, pbytes,
				  "the sum of the micro-batches' gradients", err) < 0) ||
		(g->dt != KC_F32 && dev_alloc(&g->wcopy, ENG_MEM_PARAMS, g->nfloats * g->es,
					    "the bf16 copy of the weights", err) < 0) ||
		dev_alloc((void **)&g->grads, ENG_MEM_GRADS, pbytes, "gradients", err) < 0 ||
		dev_alloc((void **)&g->m, ENG_MEM_OPTIMIZER, pbytes, "AdamW moments", err) < 0 ||
		dev_alloc((void **)&g->v, ENG_MEM_OPTIMIZER, pbytes, "AdamW moments", err) < 0)
		return -1;
	bind_weights(g, g->wcopy ? g->wcopy : (void *)g->params, g->es, &g->w);
	bind_weights(g, g->grads, sizeof(float), &g->g);
	return 0;
}

/* The step's workspace (see eng_cuda_int.h) and cuBLASLt on its workspace. */
static int alloc_workspace(eng_cuda *g, eng_err *err)
{
	size_t N = (size_t)g->B * g->T, C = g->cfg.n_embd, es = g->es;
	size_t red = kc_layernorm_scratch_bytes((int)N, (int)C);
	if (kc_bias_scratch_bytes((int)N, 4 * (int)C) > red)
		red = kc_bias_scratch_bytes((int)N, 4 * (int)C);
	if (dev_alloc((void **)&g->losses, ENG_MEM_WORKSPACE, 4 * N, "workspace", err) < 0 ||
		dev_alloc(&g->tmp, ENG_MEM_WORKSPACE, es * N * C, "workspace", err) < 0 ||
		dev_alloc(&g->dres, ENG_MEM_WORKSPACE, es * N * C, "workspace", err) < 0 ||
		dev_alloc(&g->dbuf, ENG_MEM_WORKSPACE, es * N * C, "workspace", err) < 0 ||
		dev_alloc(&g->dbig, ENG_MEM_WORKSPACE, es * 4 * N * C, "workspace", err) < 0 ||
		dev_alloc(&g->dqkv, ENG_MEM_WORKSPACE, es * 3 * N * C, "workspace", err) < 0 ||
		dev_alloc(&g->red_scratch, ENG_MEM_WORKSPACE, red, "workspace", err) < 0 ||
		dev_alloc((void **)&g->sumsq, ENG_MEM_WORKSPACE, 8 * (KC_SUMSQ_PARTS + 1),
			"workspace", err) < 0 ||
		dev_alloc(&g->blas_ws, ENG_MEM_WORKSPACE, KC_BLAS_WORKSPACE, "workspace", err) < 0)
		return -1;
	if (kc_blas_create(&g->blas, g->blas_ws, KC_BLAS_WORKSPACE) < 0)
		return ec_kc_fail("cuBLASLt", err);
	return 0;
}

/* Attention: cuDNN's fused kernels for bf16 where they serve the shape, ours else; and
 * the description eng_cuda_describe gives. */
static int setup_attention(eng_cuda *g, const eng_cuda_opts *o, eng_err *err)
{
	int NH = g->cfg.n_head, hs = g->cfg.n_embd / NH;
	char why[200] = "float32 run";
	if (g->dt == KC_BF16 && o->no_cudnn)
		snprintf(why, sizeof why, "REMAT_CUDA_ATTENTION=own");
	else if (g->dt == KC_BF16 &&
		 kc_sdpa_create(&g->sdpa, g->B, NH, g->T, hs, why, sizeof why) == 0) {
		size_t ws = kc_sdpa_workspace_bytes(g->sdpa);
		if (ws && dev_alloc(&g->sdpa_ws, ENG_MEM_WORKSPACE, ws, "cuDNN workspace", err) < 0)
			return -1;
	}
	if (!g->sdpa && dev_alloc(&g->att_scratch, ENG_MEM_WORKSPACE,
				kc_attention_scratch_bytes(g->dt, g->T, NH), "attention scratch",
				err) < 0)
		return -1;
	if (g->sdpa)
		snprintf(g->desc, sizeof g->desc, "%s activations and matmuls, attention: %.400s",
			kc_dtype_name(g->dt), kc_sdpa_describe(g->sdpa));
	else
		snprintf(g->desc, sizeof g->desc, "%s activations and matmuls, attention of the "
						  "engine (cuDNN not used: %.150s)", kc_dtype_name(g->dt), why);
	return 0;
}

/* The batch on the device and the host side of the embedding gradient's buckets. */
static int alloc_batch(eng_cuda *g, eng_err *err)
{
	size_t N = (size_t)g->B * g->T, V = g->cfg.vocab_size;
	size_t nt = sizeof *g->d_inp * N; /* token ids */
	if (dev_alloc((void **)&g->d_inp, ENG_MEM_DATA, nt, "the batch", err) < 0 ||
		dev_alloc((void **)&g->d_tgt, ENG_MEM_DATA, nt, "the batch", err) < 0 ||
		dev_alloc((void **)&g->d_order, ENG_MEM_DATA, 4 * N, "the batch", err) < 0 ||
		dev_alloc((void **)&g->d_bstart, ENG_MEM_DATA, 4 * (N + 1), "the batch", err) < 0 ||
		dev_alloc((void **)&g->d_btok, ENG_MEM_DATA, 4 * N, "the batch", err) < 0)
		return -1;
	g->h_count = calloc(V + 1, sizeof(int));
	g->h_order = malloc(N * sizeof(int));
	g->h_bstart = malloc((N + 1) * sizeof(int));
	g->h_btok = malloc(N * sizeof(int));
	g->h_losses = malloc(N * sizeof(float));
	if (!g->h_count || !g->h_order || !g->h_bstart || !g->h_btok || !g->h_losses)
		return eng_errf(err, "out of memory");
	return 0;
}

int eng_cuda_new(eng_cuda **out, const eng_model *host, const eng_cuda_opts *o, eng_err *err)
{
	eng_cuda_info info;
	*out = NULL;
	/* eng_spec_finish refuses these first: the device copies every tensor's gradient and
	 * moments, nfloats each */
	if (host->cfg.arch != ENG_ARCH_GPT2 || host->cfg.lora_r || host->ngrad != host->nfloats)
		return eng_errf(err, "the CUDA backend trains every tensor of GPT-2 models only so "
				     "far (no Llama, frozen tensors or LoRA)");
	eng_cuda_probe(&info);
	if (info.ngpus == 0)
		return eng_errf(err, "device 'cuda' is not available: %s", info.why);
	eng_cuda *g = calloc(1, sizeof *g);
	if (!g)
		return eng_errf(err, "out of memory");
	/* of the GPUs the probe could query, the (local rank)-th, round the list */
	g->gpu = info.gpu[(o->gpu < 0 ? 0 : o->gpu) % info.ngpus].device;
	if (ec_cuda_check(cudaSetDevice(g->gpu), "cudaSetDevice", err) < 0)
		goto fail;
	g->cfg = host->cfg;
	g->B = host->B;
	g->T = host->T;
	g->chunk_rows = host->chunk_rows;
	g->dt = o->fp32 ? KC_F32 : KC_BF16;
	g->es = kc_dtype_size(g->dt);
	g->Vp = (int)eng_round_up((size_t)g->cfg.vocab_size, EC_VOCAB_ALIGN);
	g->ntensors = host->ntensors;
	g->nfloats = host->nfloats;
	g->tensors = malloc((size_t)g->ntensors * sizeof *g->tensors);
	if (!g->tensors) {
		eng_errf(err, "out of memory");
		goto fail;
	}
	memcpy(g->tensors, host->tensors, (size_t)g->ntensors * sizeof *g->tensors);
	if (create_streams(g, err) < 0 || alloc_weights(g, o->accum, err) < 0 ||
		alloc_workspace(g, err) < 0 || setup_attention(g, o, err) < 0 ||
		alloc_batch(g, err) < 0)
		goto fail;
	layout_mem(g);
	*out = g;
	return 0;
fail:
	eng_cuda_destroy(g);
	return -1;
}

void eng_cuda_destroy(eng_cuda *g)
{
	if (!g)
		return;
	if (g->st)
		cudaStreamSynchronize(g->st);
	if (g->cst)
		cudaStreamSynchronize(g->cst);
	if (g->mem.free)
		eng_layout_free(&g->lay, &g->mem);
	ec_dp_close(g->dp);
	kc_sdpa_destroy(g->sdpa);
	kc_blas_destroy(g->blas);
	void *bufs[] = {g->params, g->wcopy, g->grads, g->acc, g->m, g->v, g->losses, g->tmp, g->dres,
		g->dbuf,
		g->dbig, g->dqkv, g->red_scratch, g->sumsq, g->blas_ws, g->sdpa_ws, g->att_scratch,
		g->d_inp, g->d_tgt, g->d_order, g->d_bstart, g->d_btok};
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		eng_cuda_mem_free(bufs[i]);
	for (int s = 0; s < ENG_LAYOUT_SLOTS; s++) {
		cudaEvent_t evs[4] = {g->ev_written[s], g->ev_free[s], g->ev_loaded[s], g->ev_used[s]};
		for (int k = 0; k < 4; k++)
			if (evs[k])
				cudaEventDestroy(evs[k]);
	}
	for (int k = 0; k < 2 * ENG_MAX_LAYERS; k++)
		if (g->rc_ev[k])
			cudaEventDestroy(g->rc_ev[k]);
	if (g->cst)
		cudaStreamDestroy(g->cst);
	if (g->st)
		cudaStreamDestroy(g->st);
	free(g->h_count);
	free(g->h_order);
	free(g->h_bstart);
	free(g->h_btok);
	free(g->h_losses);
	free(g->tensors);
	free(g);
}

const char *eng_cuda_describe(const eng_cuda *g)
{
	return g->desc;
}

int eng_cuda_device(const eng_cuda *g)
{
	return g->gpu;
}

const char *eng_cuda_precision(const eng_cuda *g)
{
	return kc_dtype_name(g->dt);
}

/* ---- weights up and down ---- */

int eng_cuda_upload(eng_cuda *g, const eng_model *host, eng_err *err)
{
	size_t bytes = g->nfloats * sizeof(float);
	ENG_ASSERT(host->nfloats == g->nfloats);
	if (ec_cuda_check(cudaMemcpyAsync(g->params, host->params, bytes, cudaMemcpyHostToDevice,
			      g->st), "upload of the weights", err) < 0 ||
		ec_cuda_check(cudaMemcpyAsync(g->m, host->m, bytes, cudaMemcpyHostToDevice, g->st),
			"upload of the moments", err) < 0 ||
		ec_cuda_check(cudaMemcpyAsync(g->v, host->v, bytes, cudaMemcpyHostToDevice, g->st),
			"upload of the moments", err) < 0)
		return -1;
	if (g->wcopy && kc_from_f32(g->st, g->dt, g->wcopy, g->params, g->nfloats) < 0)
		return ec_kc_fail("upload of the weights", err);
	return ec_cuda_check(cudaStreamSynchronize(g->st), "upload", err);
}

int eng_cuda_download(eng_cuda *g, eng_model *host, eng_err *err)
{
	size_t bytes = g->nfloats * sizeof(float);
	ENG_ASSERT(host->nfloats == g->nfloats);
	if (ec_cuda_check(cudaMemcpyAsync(host->params, g->params, bytes, cudaMemcpyDeviceToHost,
			      g->st), "download of the weights", err) < 0 ||
		ec_cuda_check(cudaMemcpyAsync(host->m, g->m, bytes, cudaMemcpyDeviceToHost, g->st),
			"download of the moments", err) < 0 ||
		ec_cuda_check(cudaMemcpyAsync(host->v, g->v, bytes, cudaMemcpyDeviceToHost, g->st),
			"download of the moments", err) < 0)
		return -1;
	return ec_cuda_check(cudaStreamSynchronize(g->st), "download", err);
}

int eng_cuda_get_grads(eng_cuda *g, float *out, eng_err *err)
{
	if (ec_cuda_check(cudaMemcpyAsync(out, ec_step_grads(g), g->nfloats * sizeof(float),
			      cudaMemcpyDeviceToHost, g->st), "download of the gradients", err) < 0)
		return -1;
	return ec_cuda_check(cudaStreamSynchronize(g->st), "download", err);
}

int eng_cuda_get_block_input(eng_cuda *g, int l, float *out, eng_err *err)
{
	size_t n = (size_t)g->B * g->T * g->cfg.n_embd;
	void *src = l < g->cfg.n_layer ? g->lay.saved[l].x : g->lay.head.xf;
	float *tmp = NULL;
	if (!src)
		return eng_errf(err, "no activations laid out");
	if (g->dt == KC_F32) {
		tmp = (float *)src;
	} else {
		/* convert on the device into the float32 workspace (dbig holds 4x as much) */
		tmp = (float *)g->dbig;
		if (kc_to_f32(g->st, g->dt, tmp, src, n) < 0)
			return ec_kc_fail("conversion", err);
	}
	if (ec_cuda_check(cudaMemcpyAsync(out, tmp, n * sizeof(float), cudaMemcpyDeviceToHost,
			      g->st), "download", err) < 0)
		return -1;
	return ec_cuda_check(cudaStreamSynchronize(g->st), "download", err);
}

/* ---- policy: activation layout ---- */

int eng_cuda_set_policy(eng_cuda *g, const eng_policy *p, eng_err *err)
{
	ENG_ASSERT(p->n_layer == g->cfg.n_layer);
	/* nothing queued may touch a buffer this call frees */
	if (ec_cuda_check(cudaStreamSynchronize(g->st), "policy change", err) < 0 ||
		ec_cuda_check(cudaStreamSynchronize(g->cst), "policy change", err) < 0 ||
		eng_layout_set(&g->lay, &g->mem, p, err) < 0)
		return -1;
	eng_cuda_mem_refresh();
	return 0;
}

const eng_policy *eng_cuda_policy(const eng_cuda *g)
{
	return &g->lay.policy;
}

/* ---- what it reports ---- */

size_t eng_cuda_saved_bytes(const eng_cuda *g, int i)
{
	return eng_layout_saved_bytes(&g->lay, &g->mem, i);
}

size_t eng_cuda_offloaded_bytes(const eng_cuda *g, int i)
{
	return eng_layout_host_bytes(&g->lay, &g->mem, i);
}

double eng_cuda_recompute_ms(const eng_cuda *g)
{
	return g->recompute_ms;
}
