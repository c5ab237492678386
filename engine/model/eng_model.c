/* eng_model.c - GPT-2 forward and backward with per-section activation checkpointing.
 *
 * Legend: B batch, T time, C channels, NH heads, V vocab, L layers, N = B*T rows.
 *
 * One step: encoder, L blocks, head (ln_f, tied lm_head, cross-entropy) forward; then the
 * head, the blocks from L-1 down to 0, and the encoder backward. A block's activations live
 * in its own buffers (`saved`) or, when its mode drops them, in the pool shared by all
 * blocks. Before a block's backward, dropped activations are rebuilt into the pool by the
 * very same kernels the forward ran, on buffers of the same alignment: that, and kernels
 * whose results do not depend on thread timing, is why every policy gives the same bits.
 * Recompute never writes into a saved buffer; it writes only into the pool.
 *
 * The head works in chunks of chunk_rows rows under both of its modes (the dwte sum is
 * taken chunk by chunk either way, so the bits agree): `off` keeps every chunk's logits from
 * forward to backward, `chunked` keeps only the log-sum-exp and recomputes a chunk's logits
 * into one buffer when its backward comes.
 *
 * The step's matmul products are one table (eng_model_products) that says who runs each:
 * OpenBLAS, or oneDNN's matmul primitive (kn_dnnl.c) for the float32 head's logits and dlnf
 * (dlnf with wte packed once a step for it) and for every bf16 product.
 *
 * Precision bf16 (cfg.mm_bf16): every product of a linear layer and of the head takes bf16
 * operands and sums in float32 (kn_dnnl_gemm): the weights from their bf16 copy
 * (wbf, which AdamW writes as it updates the float32 weights, rounded whole after any other
 * change), the inputs that only matmuls read (ln1, ln2, gelu, lnf: eng_acts.h `mm`) kept
 * in bf16, computed in float32 and rounded by the kernel that makes them as it stores each
 * row; gradients rounded the same way by the kernel that makes them (the norms' backward,
 * GELU's) or, for attention's and the logits', just before their products. Master
 * weights, gradients, AdamW, the residual stream, LayerNorm, attention, softmax and the
 * cross-entropy stay float32. A recompute rounds the same float32 values, so every policy
 * still gives the same bits.
 */
#include "eng_model.h"
#include "eng_model_int.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_mem.h"
#include "eng_memtrace.h"
#include "eng_util.h"
#include "kn.h"

#define ALIGN_FLOATS 16 /* 64 bytes: every tensor and chunk starts on a cache line */

/* ---- parameter table ---- */

/* Tensor t of `base`: the parameters' (grad 0), or the gradients' (grad 1: NULL when t is
 * frozen) */
static float *at_of(float *base, const eng_ptensor *t, int grad)
{
	if (!grad)
		return t->quant ? NULL : base + t->offset; /* 4 bits: m->qw's */
	return t->frozen ? NULL : base + t->goff;
}

/* Where a block's weight of slot s lives in eng_layer_w (ENG_SLOT_LN1W ..) */
static float **layer_field(eng_layer_w *h, eng_slot s)
{
	float **f[] = {&h->ln1w, &h->ln1b, &h->qkvw, &h->qkvb, &h->attprojw, &h->attprojb,
		&h->ln2w, &h->ln2b, &h->fcw, &h->fcb, &h->fcprojw, &h->fcprojb};
	return f[s - ENG_SLOT_LN1W];
}

/* Points w's fields at the tensors of `base` (params, or grads with grad 1: NULL where
 * frozen), each by its slot in the table (eng_tensors.h); a tied lm_head is wte. */
static void bind_weights(const eng_model *m, float *base, int grad, eng_weights *w)
{
	memset(w, 0, sizeof *w);
	for (int i = 0; i < m->ntensors; i++) {
		const eng_ptensor *t = &m->tensors[i];
		float *p = at_of(base, t, grad);
		eng_layer_w *h = t->section >= 0 && t->section < m->cfg.n_layer ? &w->h[t->section]
										 : NULL;
		switch (t->slot) {
		case ENG_SLOT_JOINED: break; /* inside the weight before it */
		case ENG_SLOT_WTE: w->wte = p; break;
		case ENG_SLOT_WPE: w->wpe = p; break;
		case ENG_SLOT_LNFW: w->lnfw = p; break;
		case ENG_SLOT_LNFB: w->lnfb = p; break;
		case ENG_SLOT_LMW: w->lmw = p; break;
		case ENG_SLOT_LORA_A: h->lora_a[t->unit] = p; break;
		case ENG_SLOT_LORA_B: h->lora_b[t->unit] = p; break;
		default: *layer_field(h, t->slot) = p; break;
		}
	}
	if (eng_config_tied(&m->cfg))
		w->lmw = w->wte;
}

/* The lowest block a step's backward must reach: the lowest with a trainable tensor, or 0
 * when the embedding trains (its gradient is the first block's input's); L when only the
 * head trains. Below it the gradient has nowhere to go. */
static int backward_floor(const eng_model *m)
{
	int floor = m->cfg.n_layer;
	for (int i = 0; i < m->ntensors; i++)
		if (!m->tensors[i].frozen) {
			int s = m->tensors[i].section;
			floor = s < 0 ? 0 : s < floor ? s : floor;
		}
	return floor;
}

const eng_ptensor *eng_model_find(const eng_model *m, const char *name)
{
	for (int i = 0; i < m->ntensors; i++)
		if (strcmp(m->tensors[i].name, name) == 0)
			return &m->tensors[i];
	return NULL;
}

/* Bytes of logits under head=off: one 64-byte-aligned slot per chunk, so a chunk sits at the
 * same alignment whether it is kept or recomputed. */
static size_t chunk_stride(const eng_model *m)
{
	return eng_round_up((size_t)m->chunk_rows * m->cfg.vocab_size, ALIGN_FLOATS);
}

static size_t logits_bytes(const eng_model *m)
{
	size_t N = (size_t)m->B * m->T;
	size_t nchunks = (N + m->chunk_rows - 1) / m->chunk_rows;
	return 4 * nchunks * chunk_stride(m);
}

/* The activation tables' sizes for this model (eng_act_bytes: float32, bf16 matmul inputs
 * under precision bf16), in eng_mem. */
static void layout_mem(eng_model *m)
{
	eng_layout_mem *mem = &m->mem;
	for (int k = 0; k < ENG_ACT_N; k++)
		mem->block_bytes[k] = eng_act_bytes(&eng_block_fields[k], &m->cfg, m->B, m->T,
			m->chunk_rows);
	for (int k = 0; k < ENG_HEAD_N; k++)
		mem->head_bytes[k] = eng_act_bytes(&eng_head_fields[k], &m->cfg, m->B, m->T,
			m->chunk_rows);
	/* chunks start 64-byte aligned, kept or rebuilt alike */
	mem->head_bytes[ENG_HEAD_logits] = logits_bytes(m);
	mem->head_bytes[ENG_HEAD_chunk] = 4 * chunk_stride(m);
	mem->alloc = eng_mem_alloc;
	mem->free = eng_mem_free;
	mem->size = eng_mem_size;
	mem->where = "memory";
}

/* The table's index of head product k (0 logits, 1 dlnf, 2 dwte) of a chunk of `rows`
 * rows (a short last chunk's shapes follow the full chunk's) */
static int head_prod(const eng_model *m, int k, int rows)
{
	return ENG_HEAD_PRODUCTS + k + (rows == m->chunk_rows ? 0 : 3);
}

static void head_mm(eng_model *m, int k, int rows, const void *A, const void *B, float *C)
{
	eng_model_prod_run(m, head_prod(m, k, rows), 0, A, B, C);
}

/* dwte += dlogits^T lnf for a chunk of `rows` rows: one product in float32; under bf16
 * block by block of the vocabulary (eng_model_dwte_rows), each straight into its rows of
 * dwte but the last when it would overlap the one before: that one is made in dbig (free
 * in the head's backward), from zero, and only its rows past the others' added */
static void head_dwte(eng_model *m, int rows, const void *dl, const void *lnf)
{
	int i = head_prod(m, 2, rows);
	int V = m->cfg.vocab_size, C = m->cfg.n_embd, nb = m->prod[i].mm.M, v0 = 0;
	if (!m->cfg.mm_bf16) {
		head_mm(m, 2, rows, dl, lnf, m->g.lmw);
		return;
	}
	for (; v0 + nb <= V; v0 += nb)
		eng_model_prod_run(m, i, 0, (const uint16_t *)dl + v0, lnf,
			m->g.lmw + (size_t)v0 * C);
	if (v0 == V)
		return;
	int b0 = V - nb;
	size_t skip = (size_t)(v0 - b0) * C, n = (size_t)(V - v0) * C;
	ENG_TIMED(m->timing, ENG_TIMING_ELEM, 0, f4((size_t)nb * C),
		memset(m->dbig, 0, sizeof(float) * nb * C));
	eng_model_prod_run(m, i, 0, (const uint16_t *)dl + b0, lnf, m->dbig);
	ENG_TIMED(m->timing, ENG_TIMING_ELEM, 0, f4(3 * n),
		kn_add(m->g.lmw + (size_t)v0 * C, m->dbig + skip, n));
}

/* Row r of a matmul input field of C columns. */
static const void *mm_row(const eng_model *m, const void *field, int r, int C)
{
	return (const char *)field + (size_t)r * C * (m->cfg.mm_bf16 ? 2 : 4);
}

/* ---- lifetime ---- */

/* A step's workspace (ENG_MEM_WORKSPACE) of N rows, each `width` floats a row (WS_*);
 * then the attention scratch, per thread, and under llama the rotary table. What
 * eng_model_init allocates and eng_model_fixed_bytes counts. */
enum { WS_ROW, WS_C, WS_BIG, WS_QKV, WS_LORA };
static const struct ws_field {
	size_t offset; /* of the float * in eng_model */
	int width;
} workspace[] = {
	{offsetof(eng_model, losses), WS_ROW}, /* (B,T) per-row loss */
	{offsetof(eng_model, tmp), WS_C},      /* (B,T,C) */
	{offsetof(eng_model, dres), WS_C},     /* (B,T,C) */
	{offsetof(eng_model, dbuf), WS_C},     /* (B,T,C) */
	{offsetof(eng_model, dbig), WS_BIG},   /* (B,T,4C); llama (B,T,2I + I): dgu | dh */
	{offsetof(eng_model, dqkv), WS_QKV},   /* (B,T,3C); llama (B,T,(NH+2NKV) hs) */
	{offsetof(eng_model, dmid), WS_LORA},  /* (B,T,r), none without adapters */
};
#define NWORKSPACE (sizeof workspace / sizeof workspace[0])

/* Floats of workspace field k for N rows */
static size_t ws_floats(const eng_config *cfg, int k, size_t N)
{
	switch (workspace[k].width) {
	case WS_ROW: return N;
	case WS_C: return N * cfg->n_embd;
	case WS_BIG: return N * eng_config_big_width(cfg);
	case WS_LORA: return N * (size_t)cfg->lora_r;
	default: return N * eng_config_qkv(cfg);
	}
}

/* Floats of the rotary table: (T, hs) under llama, none under GPT-2 */
static size_t rope_floats(const eng_config *cfg, int T)
{
	return cfg->arch == ENG_ARCH_LLAMA ? (size_t)T * (cfg->n_embd / cfg->n_head) : 0;
}

void eng_model_fixed_bytes(const eng_config *cfg, int B, int T, int chunk_rows, int threads,
	const eng_model *live, size_t out[ENG_MEM_NCAT])
{
	size_t N = (size_t)B * T, C = cfg->n_embd, ws = 0;
	size_t ngrad, nfloats = eng_model_floats(cfg, &ngrad);
	for (size_t k = 0; k < NWORKSPACE; k++)
		ws += 4 * ws_floats(cfg, (int)k, N);
	ws += 4 * rope_floats(cfg, T);
	memset(out, 0, ENG_MEM_NCAT * sizeof out[0]);
	out[ENG_MEM_PARAMS] = 4 * nfloats + eng_model_q4_bytes(cfg, NULL);
	out[ENG_MEM_GRADS] = 4 * ngrad; /* frozen tensors have none */
	out[ENG_MEM_OPTIMIZER] = 2 * 4 * eng_config_opt_floats(cfg, ngrad); /* this rank's */
	out[ENG_MEM_WORKSPACE] = ws + 4 * kn_attention_scratch_floats_for(T, threads) +
				 eng_q4_scratch_bytes(cfg, N);
	int R = chunk_rows > 0 ? chunk_rows : eng_plan_chunk_rows(cfg, B, T);
	R = (size_t)R > N ? (int)N : R; /* as eng_model_init clamps it */
	eng_product pr[ENG_PRODUCTS];
	/* oneDNN's scratchpads and packed weights: a live model's, or at the current thread
	 * count (the caller's kn_set_threads), its primitives made here as the run will */
	size_t sc = live ? live->mm_scratch_bytes : 0, pk = live ? live->wpack_bytes : 0;
	if (!live)
		eng_prod_routes(cfg, B, T, R, pr, &sc, &pk);
	out[ENG_MEM_PARAMS] += pk;
	out[ENG_MEM_WORKSPACE] += sc;
	if (cfg->mm_bf16) { /* the bf16 weights, the rounded operands */
		out[ENG_MEM_PARAMS] += 2 * nfloats;
		out[ENG_MEM_WORKSPACE] += 2 * (eng_prod_bf_out_elems(cfg, N, R) + N * C);
	}
}

/* The run's settings the CPU model can take (eng_spec_finish refuses the others first):
 * LoRA and 4-bit weights in fp32 precision; bf16 compute where oneDNN's bf16 runs */
static int run_settings_ok(const eng_config *cfg, eng_err *err)
{
	char why[160];
	if (cfg->lora_r && cfg->mm_bf16)
		return eng_errf(err, "LoRA adapters train in fp32 precision only so far");
	if (cfg->quant && cfg->mm_bf16)
		return eng_errf(err, "4-bit weights take precision fp32 (their compute dtype is "
				     "model.quantize.compute)");
	if (cfg->quant_bf16 && !kn_bf16_available(why, sizeof why))
		return eng_errf(err, "'model.quantize.compute' bf16: %s", why);
	return 0;
}

/* eng_model_init, with the step's matmul products (and their oneDNN state) or none */
static int model_init(eng_model *m, const eng_config *cfg, int B, int T, int chunk_rows,
	int products, eng_err *err)
{
	memset(m, 0, sizeof *m);
	if (eng_config_validate(cfg, "model", err) < 0)
		return -1;
	if (B < 1 || T < 1 || T > cfg->n_positions)
		return eng_errf(err, "batch %d x seq_len %d does not fit the model (n_positions %d)",
			B, T, cfg->n_positions);
	m->cfg = *cfg;
	m->B = B;
	m->T = T;
	size_t N = (size_t)B * T, C = cfg->n_embd;
	m->chunk_rows = chunk_rows > 0 ? chunk_rows : eng_plan_chunk_rows(cfg, B, T);
	if ((size_t)m->chunk_rows > N)
		m->chunk_rows = (int)N;
	m->ntensors = eng_model_ntensors(cfg);
	m->tensors = calloc((size_t)m->ntensors, sizeof *m->tensors);
	if (!m->tensors)
		goto oom;
	m->nfloats = eng_model_table(cfg, m->tensors, &m->ngrad);
	size_t pbytes = m->nfloats * sizeof(float), gbytes = m->ngrad * sizeof(float);
	if (!m->ngrad) {
		eng_model_free(m);
		return eng_errf(err, "every tensor is frozen: nothing would train");
	}
	if (run_settings_ok(cfg, err) < 0) {
		eng_model_free(m);
		return -1;
	}
	eng_config_opt_part(m->ngrad, cfg->opt_shards, cfg->opt_rank, &m->opt_lo, &m->opt_hi);
	size_t obytes = (m->opt_hi - m->opt_lo) * sizeof(float);
	m->params = eng_mem_alloc(ENG_MEM_PARAMS, pbytes);
	m->grads = eng_mem_alloc(ENG_MEM_GRADS, gbytes);
	m->m = eng_mem_alloc(ENG_MEM_OPTIMIZER, obytes ? obytes : sizeof(float));
	m->v = eng_mem_alloc(ENG_MEM_OPTIMIZER, obytes ? obytes : sizeof(float));
	if (!m->params || !m->grads || !m->m || !m->v || eng_q4_init(m) < 0)
		goto oom;
	bind_weights(m, m->params, 0, &m->w);
	bind_weights(m, m->grads, 1, &m->g);
	m->bwd_floor = backward_floor(m);

	for (size_t k = 0; k < NWORKSPACE; k++) {
		float **f = (float **)((char *)m + workspace[k].offset);
		size_t n = ws_floats(cfg, (int)k, N);
		if (n && !(*f = eng_mem_alloc(ENG_MEM_WORKSPACE, 4 * n)))
			goto oom;
	}
	if (rope_floats(cfg, T)) {
		if (!(m->rope = eng_mem_alloc(ENG_MEM_WORKSPACE, 4 * rope_floats(cfg, T))))
			goto oom;
		kn_rope_table(m->rope, T, C / cfg->n_head, cfg->rope_theta);
	}
	m->scratch_threads = kn_get_threads();
	m->att_scratch = eng_mem_alloc(ENG_MEM_WORKSPACE, 4 * kn_attention_scratch_floats(T));
	if (!m->att_scratch)
		goto oom;
	size_t sc, pk; /* eng_prod_fit allocates them, with the packed copies' offsets */
	m->nprod = products ? eng_prod_routes(cfg, B, T, m->chunk_rows, m->prod, &sc, &pk) : 0;
	if (cfg->mm_bf16) {
		m->wbf = eng_mem_alloc(ENG_MEM_PARAMS, 2 * m->nfloats);
		m->bf_out = eng_mem_alloc(ENG_MEM_WORKSPACE, 2 * eng_prod_bf_out_elems(cfg, N,
			m->chunk_rows));
		m->bf_in = eng_mem_alloc(ENG_MEM_WORKSPACE, 2 * N * C);
		if (!m->wbf || !m->bf_out || !m->bf_in)
			goto oom;
	}
	if (eng_prod_fit(m, err) < 0) {
		eng_model_free(m);
		return -1;
	}
	layout_mem(m);
	/* no activations laid out yet: lay.policy.n_layer 0 marks "nothing allocated" */
	return 0;
oom:
	eng_model_free(m);
	return eng_errf(err, "out of memory allocating a model of %zu parameters for batch %d x %d",
		eng_config_num_params(cfg), B, T);
}

int eng_model_init(eng_model *m, const eng_config *cfg, int B, int T, int chunk_rows,
	eng_err *err)
{
	return model_init(m, cfg, B, T, chunk_rows, 1, err);
}

int eng_model_init_host(eng_model *m, const eng_config *cfg, eng_err *err)
{
	return model_init(m, cfg, 1, 1, 1, 0, err);
}

void eng_model_free(eng_model *m)
{
	if (m->mem.free)
		eng_layout_free(&m->lay, &m->mem);
	void *bufs[] = {m->params, m->grads, m->m, m->v, m->losses, m->tmp, m->dres, m->dbuf,
		m->dbig, m->dqkv, m->dmid, m->att_scratch, m->rope, m->wbf, m->wpack, m->bf_out, m->bf_in,
		m->mm_scratch, m->q4, m->q4_scratch, m->q4_bf, m->qstage};
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		eng_mem_free(bufs[i]);
	free(m->qw);
	free(m->tensors);
	free(m->timing);
	memset(m, 0, sizeof *m);
}

/* splitmix64: a small, well-mixed generator; the state is the seed plus a counter. */
static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double uniform01(uint64_t *s)
{
	return ((splitmix64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

int eng_model_init_weights(eng_model *m, uint64_t seed, eng_err *err)
{
	uint64_t s = seed;
	eng_model_params_changed(m);
	double proj_std = 0.02 / sqrt(2.0 * m->cfg.n_layer);
	int llama = m->cfg.arch == ENG_ARCH_LLAMA;
	memset(m->params, 0, m->nfloats * sizeof(float));
	int nb = eng_lora_base_tensors(&m->cfg);
	for (int i = 0; i < nb; i++) {
		const eng_ptensor *t = &m->tensors[i];
		float *p = eng_model_tensor_dst(m, t, err);
		if (!p)
			return -1;
		if (t->ndim == 1) {
			/* llama's 1-D tensors are all RMSNorm weights */
			int is_ln_w = llama || (strstr(t->name, "ln_") && strstr(t->name, ".weight"));
			for (size_t j = 0; j < t->numel; j++)
				p[j] = is_ln_w ? 1.0f : 0.0f;
			continue;
		}
		double std = !llama && strstr(t->name, "c_proj.weight") ? proj_std : 0.02;
		for (size_t j = 0; j < t->numel; j += 2) {
			/* Box-Muller: two normals per pair of uniforms */
			double u1 = uniform01(&s), u2 = uniform01(&s);
			double r = sqrt(-2.0 * log(u1));
			p[j] = (float)(std * r * cos(2 * M_PI * u2));
			if (j + 1 < t->numel)
				p[j + 1] = (float)(std * r * sin(2 * M_PI * u2));
		}
		eng_model_tensor_loaded(m, t);
	}
	eng_model_load_end(m);
	eng_model_init_adapters(m, seed);
	return 0;
}

void eng_model_init_adapters(eng_model *m, uint64_t seed)
{
	uint64_t s = seed ^ 0x4c6f5241ULL; /* a stream of their own: the base's is unchanged */
	eng_model_params_changed(m);
	for (int i = eng_lora_base_tensors(&m->cfg), k = 0; i < m->ntensors; i++, k++) {
		const eng_ptensor *t = &m->tensors[i];
		float *p = m->params + t->offset;
		/* as PEFT's reset_lora_parameters: A kaiming_uniform_(a = sqrt 5), that is
		 * uniform(-1/sqrt(in), 1/sqrt(in)); B zero, so that training starts at the base */
		double bound = 1.0 / sqrt((double)t->shape[1]);
		for (size_t j = 0; j < t->numel; j++)
			p[j] = k % 2 ? 0.0f : (float)(bound * (2 * uniform01(&s) - 1));
	}
}

/* ---- policy: activation layout ---- */

int eng_model_set_policy(eng_model *m, const eng_policy *p, eng_err *err)
{
	ENG_ASSERT(p->n_layer == m->cfg.n_layer);
	return eng_layout_set(&m->lay, &m->mem, p, err);
}

size_t eng_model_saved_bytes(const eng_model *m, int i)
{
	return eng_layout_saved_bytes(&m->lay, &m->mem, i);
}

/* ---- forward and backward ---- */

/* Logits of rows [r0, r0+rows) into buf (rows, V) */
static void head_logits(eng_model *m, float *buf, int r0, int rows)
{
	int C = m->cfg.n_embd;
	const void *lnf = mm_row(m, m->lay.head.lnf, r0, C);
	head_mm(m, 0, rows, lnf, eng_prod_weight(m, ENG_HEAD_PRODUCTS, 0), buf);
}

/* Chunk k of the logits: its own slot under head=off, the one rebuilt chunk under chunked. */
static float *chunk_buf(eng_model *m, int k)
{
	float *logits = m->lay.head.logits;
	return logits ? logits + (size_t)k * chunk_stride(m) : (float *)m->lay.head.chunk;
}

/* ---- the step's memory timeline (m->trace) ---- */

/* Block l's saved buffers (pool 0), or the pool's that l rebuilds into (pool 1: those its
 * mode does not keep), start or stop holding what the step needs. */
static void trace_block(const eng_model *m, int l, int pool, eng_mt_kind kind)
{
	const eng_acts *saved = &m->lay.saved[l];
	for (int k = 0; m->trace && k < ENG_ACT_N; k++) {
		void *p = pool ? (saved->f[k] ? NULL : m->lay.pool.f[k]) : saved->f[k];
		if (p)
			eng_memtrace_add(m->trace, kind, p, m->mem.size(p),
				pool ? ENG_MEM_RECOMPUTE : ENG_MEM_ACTIVATIONS, l, k);
	}
}

static void trace_head(const eng_model *m, eng_mt_kind kind)
{
	unsigned keep = ENG_KEEP(m->lay.policy.head);
	for (int k = 0; m->trace && k < ENG_HEAD_N; k++) {
		void *p = m->lay.head.f[k];
		if (p)
			eng_memtrace_add(m->trace, kind, p, m->mem.size(p), eng_head_fields[k].keep &
				keep ? ENG_MEM_ACTIVATIONS : ENG_MEM_RECOMPUTE, m->cfg.n_layer, k);
	}
}

/* Section s's pass (ENG_SEC_*) begins or ends. */
static void trace_pass(const eng_model *m, int s, int pass, eng_mt_kind kind)
{
	if (m->trace)
		eng_memtrace_add(m->trace, kind, NULL, 0, ENG_MEM_ACTIVATIONS, s, pass);
}

/* The attention scratch is per thread: follow a change of the thread count. */
static int fit_scratch(eng_model *m, eng_err *err)
{
	if (m->scratch_threads == kn_get_threads())
		return 0;
	size_t bytes = 4 * kn_attention_scratch_floats(m->T);
	float *s = eng_mem_alloc(ENG_MEM_WORKSPACE, bytes);
	if (!s)
		return eng_err_nomem(err, "cannot allocate %.1f MiB of attention workspace for %d "
				     "threads: out of memory", bytes / 1048576.0, kn_get_threads());
	eng_mem_free(m->att_scratch);
	m->att_scratch = s;
	m->scratch_threads = kn_get_threads();
	return 0;
}

/* Forward over the batch; with grad, the head leaves each kept chunk of logits (head=off)
 * holding its gradient already (kn_crossentropy_fused), which the backward then uses. */
static int forward(eng_model *m, const uint32_t *inp, const uint32_t *tgt, int grad,
	float *loss, eng_err *err)
{
	int B = m->B, T = m->T, C = m->cfg.n_embd, V = m->cfg.vocab_size, L = m->cfg.n_layer;
	int N = B * T, R = m->chunk_rows;
	const eng_head_acts *h = &m->lay.head;
	float *lse = h->lse;
	if (m->lay.policy.n_layer != L)
		return eng_errf(err, "no activations are laid out (a policy change failed): set a "
				     "policy that fits first");
	if (fit_scratch(m, err) < 0 || eng_prod_fit(m, err) < 0)
		return -1;
	if (eng_prod_wcopy(m, err) < 0)
		return -1;
	m->mm_err[0] = '\0';
	ENG_TIMED(m->timing, ENG_TIMING_EMBED, 0, f4(3 * (size_t)N * C),
		kn_encoder_forward(m->lay.saved[0].x, inp, m->w.wte, m->w.wpe, B, T, C));
	for (int l = 0; l < L; l++) {
		eng_acts a = eng_layout_view(&m->lay, l);
		double t0 = eng_now_ms();
		trace_pass(m, l, ENG_SEC_FWD, ENG_MT_BEGIN);
		trace_block(m, l, 0, ENG_MT_LIVE);
		trace_block(m, l, 1, ENG_MT_LIVE);
		eng_block_forward(m, l, &a, l + 1 < L ? m->lay.saved[l + 1].x : h->xf);
		trace_block(m, l, 1, ENG_MT_DEAD);
		trace_pass(m, l, ENG_SEC_FWD, ENG_MT_END);
		m->sec_ms[l][ENG_SEC_FWD] = eng_now_ms() - t0;
	}
	double t0 = eng_now_ms();
	trace_pass(m, L, ENG_SEC_FWD, ENG_MT_BEGIN);
	trace_head(m, ENG_MT_LIVE);
	eng_final_norm_forward(m, mm_f32(m, h->lnf, m->dbuf));
	for (int r0 = 0, k = 0; r0 < N; r0 += R, k++) {
		int rows = N - r0 < R ? N - r0 : R;
		float *buf = chunk_buf(m, k);
		head_logits(m, buf, r0, rows);
		if (m->logits_tap)
			memcpy(m->logits_tap + (size_t)r0 * V, buf, sizeof(float) * rows * V);
		if (m->row_tap && m->row_tap_at >= r0 && m->row_tap_at < r0 + rows)
			memcpy(m->row_tap, buf + (size_t)(m->row_tap_at - r0) * V, sizeof(float) * V);
		double t1 = eng_timing_t0(m->timing);
		if (grad && h->logits)
			kn_crossentropy_fused(buf, lse + r0, m->losses + r0, tgt + r0, 1.0f / N, rows,
				V);
		else
			kn_crossentropy_forward(lse + r0, m->losses + r0, buf, tgt + r0, rows, V);
		eng_timing_add(m->timing, ENG_TIMING_LOSS, t1, 0, f4((size_t)rows * V *
			(grad && h->logits ? 2 : 1)));
	}
	m->sec_ms[L][ENG_SEC_FWD] = eng_now_ms() - t0;
	trace_pass(m, L, ENG_SEC_FWD, ENG_MT_END);
	if (!grad)
		trace_head(m, ENG_MT_DEAD);
	double sum = 0.0;
	for (int r = 0; r < N; r++)
		sum += m->losses[r];
	*loss = (float)(sum / N);
	return m->mm_err[0] ? eng_errf(err, "%s", m->mm_err) : 0;
}

int eng_model_loss(eng_model *m, const uint32_t *inp, const uint32_t *tgt, float *loss,
	eng_err *err)
{
	return forward(m, inp, tgt, 0, loss, err);
}

/* The head backward: per chunk, dlogits in place (under head=off the forward left them
 * there; under chunked the chunk is rebuilt first), then its rows of dlnf into dbuf and
 * its part of dwte; then ln_f's backward into dres, the last block's output gradient.
 * Returns the milliseconds spent rebuilding logits. */
static double head_backward(eng_model *m, const uint32_t *tgt)
{
	int C = m->cfg.n_embd, V = m->cfg.vocab_size, N = m->B * m->T, R = m->chunk_rows;
	const eng_head_acts *h = &m->lay.head;
	float *lse = h->lse;
	double rc_ms = 0.0, start = eng_now_ms();
	for (int r0 = 0, k = 0; r0 < N; r0 += R, k++) {
		int rows = N - r0 < R ? N - r0 : R;
		float *buf = chunk_buf(m, k);
		if (!h->logits) {
			double t0 = eng_now_ms();
			eng_timing_rc_begin(m->timing);
			head_logits(m, buf, r0, rows);
			eng_timing_rc_end(m->timing);
			rc_ms += eng_now_ms() - t0;
			ENG_TIMED(m->timing, ENG_TIMING_LOSS, 0, f4(2 * (size_t)rows * V),
				kn_crossentropy_fused(buf, lse + r0, m->losses + r0, tgt + r0,
					1.0f / N, rows, V));
		}
		const void *lnf = mm_row(m, h->lnf, r0, C), *dl = buf;
		if (m->cfg.mm_bf16) {
			mm_round(m, m->bf_out, buf, (size_t)rows * V);
			dl = m->bf_out;
		}
		head_mm(m, 1, rows, dl, eng_prod_weight(m, ENG_HEAD_PRODUCTS, 0), m->dbuf + (size_t)r0 * C);
		if (m->g.lmw) /* NULL: frozen */
			head_dwte(m, rows, dl, lnf);
	}
	eng_final_norm_backward(m);
	int L = m->cfg.n_layer;
	m->sec_ms[L][ENG_SEC_RECOMPUTE] = rc_ms;
	m->sec_ms[L][ENG_SEC_BWD] = eng_now_ms() - start - rc_ms;
	return rc_ms;
}

/* A trainable linear weight (with its joined parts): its dW product writes the whole
 * gradient (beta 0, eng_model_products) every step, so nothing zeroes it first */
static int grad_overwritten(const eng_ptensor *t)
{
	return !t->frozen && !t->quant && (t->slot == ENG_SLOT_QKVW || t->slot == ENG_SLOT_PROJW ||
		t->slot == ENG_SLOT_FCW || t->slot == ENG_SLOT_FCPROJW);
}

/* The step's gradients zeroed but those its products overwrite (padding included); the
 * floats zeroed */
static size_t zero_grads(eng_model *m)
{
	size_t at = 0, zeroed = 0;
	for (int i = 0; i < m->ntensors; i++) {
		const eng_ptensor *t = &m->tensors[i];
		if (!grad_overwritten(t))
			continue;
		memset(m->grads + at, 0, (t->goff - at) * sizeof(float));
		zeroed += t->goff - at;
		while (i + 1 < m->ntensors && m->tensors[i + 1].slot == ENG_SLOT_JOINED)
			t = &m->tensors[++i];
		at = t->goff + t->numel;
	}
	memset(m->grads + at, 0, (m->ngrad - at) * sizeof(float));
	return zeroed + m->ngrad - at;
}

/* The backward has made the gradients of `stage` final (eng_model.on_final) */
static void said_final(eng_model *m, int stage)
{
	if (m->on_final)
		m->on_final(m->on_final_ud, stage);
}

int eng_model_step(eng_model *m, const uint32_t *inp, const uint32_t *tgt, float *loss,
	eng_err *err)
{
	int B = m->B, T = m->T, C = m->cfg.n_embd, L = m->cfg.n_layer;
	double t0 = eng_timing_t0(m->timing);
	eng_timing_add(m->timing, ENG_TIMING_ZERO, t0, 0, f4(zero_grads(m)));
	if (forward(m, inp, tgt, 1, loss, err) < 0)
		return -1;
	trace_pass(m, L, ENG_SEC_BWD, ENG_MT_BEGIN);
	double rc_ms = head_backward(m, tgt);
	trace_head(m, ENG_MT_DEAD);
	trace_pass(m, L, ENG_SEC_BWD, ENG_MT_END);
	said_final(m, L);
	for (int l = L - 1; l >= 0; l--) {
		eng_acts a = eng_layout_view(&m->lay, l);
		eng_mode mode = m->lay.policy.block[l];
		double t0 = eng_now_ms();
		if (l < m->bwd_floor) { /* frozen, and nothing below it trains */
			trace_block(m, l, 0, ENG_MT_DEAD);
			m->sec_ms[l][ENG_SEC_RECOMPUTE] = m->sec_ms[l][ENG_SEC_BWD] = 0.0;
			said_final(m, l);
			continue;
		}
		trace_block(m, l, 1, ENG_MT_LIVE);
		if (mode != ENG_MODE_OFF) {
			trace_pass(m, l, ENG_SEC_RECOMPUTE, ENG_MT_BEGIN);
			eng_timing_rc_begin(m->timing);
		}
		if (mode == ENG_MODE_SELECTIVE)
			eng_block_recompute_selective(m, l, &a);
		else if (mode == ENG_MODE_FULL)
			eng_block_forward(m, l, &a, NULL);
		if (mode != ENG_MODE_OFF) {
			eng_timing_rc_end(m->timing);
			trace_pass(m, l, ENG_SEC_RECOMPUTE, ENG_MT_END);
		}
		double t1 = eng_now_ms();
		rc_ms += t1 - t0;
		trace_pass(m, l, ENG_SEC_BWD, ENG_MT_BEGIN);
		eng_block_backward(m, l, &a);
		trace_block(m, l, 1, ENG_MT_DEAD);
		trace_block(m, l, 0, ENG_MT_DEAD);
		trace_pass(m, l, ENG_SEC_BWD, ENG_MT_END);
		m->sec_ms[l][ENG_SEC_RECOMPUTE] = t1 - t0;
		m->sec_ms[l][ENG_SEC_BWD] = eng_now_ms() - t1;
		said_final(m, l);
	}
	if (m->bwd_floor == 0)
		ENG_TIMED(m->timing, ENG_TIMING_EMBED, 0, f4(3 * (size_t)B * T * C),
			kn_encoder_backward(m->g.wte, m->g.wpe, m->dres, inp, B, T, C));
	said_final(m, -1);
	m->recompute_ms = rc_ms;
	return m->mm_err[0] ? eng_errf(err, "%s", m->mm_err) : 0;
}
