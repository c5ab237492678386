/* eng_products.c - the CPU model's matmul products: the table of the step's products and
 * who runs each (OpenBLAS, oneDNN, oneDNN with a packed weight), oneDNN's scratchpads and
 * packed weights for the thread count, the weights' bf16 and packed copies, and one
 * product's run. Below the blocks' and the head's passes (eng_blocks.c, eng_model.c),
 * which call it; not here: any pass itself.
 */
#include "eng_model.h"
#include "eng_model_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_mem.h"
#include "kn.h"

#define DWTE_ROWS 4096 /* the most vocabulary rows of a block of dwte (bf16) */

int eng_model_dwte_rows(const eng_config *cfg, int N)
{
	size_t room = (size_t)N * eng_config_big_width(cfg) / (size_t)cfg->n_embd; /* dbig's */
	size_t V = (size_t)cfg->vocab_size, most = room < DWTE_ROWS ? room : DWTE_ROWS;
	most = most < V ? most : V;
	size_t nblk = (V + most - 1) / most;
	return (int)((V + nblk - 1) / nblk);
}

int eng_model_products(const eng_config *cfg, int B, int T, int R, unsigned flags,
	eng_product *out)
{
	static const char *const layer[4][3] = {{"qkv fwd", "qkv dinp", "qkv dW"},
		{"proj fwd", "proj dinp", "proj dW"}, {"fc fwd", "fc dinp", "fc dW"},
		{"fcproj fwd", "fcproj dinp", "fcproj dW"}};
	static const char *const head[2][3] = {{"head logits", "head dlnf", "head dwte"},
		{"head logits, last chunk", "head dlnf, last chunk", "head dwte, last chunk"}};
	int N = B * T, C = cfg->n_embd, V = cfg->vocab_size, L = cfg->n_layer, bf = cfg->mm_bf16;
	int dnnl = !!(flags & ENG_PRODUCTS_DNNL), pack = bf && (flags & ENG_PRODUCTS_PACK_BF16);
	int n = 0, rows[2] = {R, N % R}, times[2] = {N / R, 1};
	/* bf16: dwte in blocks of dr vocabulary rows */
	int dr = bf ? eng_model_dwte_rows(cfg, N) : 0, nblk = bf ? (V + dr - 1) / dr : 0;
	/* the linear layers' widths: in and out columns (eng_config.h) */
	int qkv = eng_config_qkv(cfg), ffi = eng_config_ffn_in(cfg), ff = eng_config_ffn(cfg);
	int io[4][2] = {{C, qkv}, {C, C}, {C, ffi}, {ff, C}};
	/* bf16: all oneDNN's, every product of a weight packed with ENG_PRODUCTS_PACK_BF16;
	 * float32: OpenBLAS's but the head's logits and dlnf, where oneDNN's brgemm measured
	 * 10-40 % faster on 256-row chunks, dlnf's wte packed (bench-blas) */
	int lin = bf ? ENG_ROUTE_DNNL : ENG_ROUTE_OPENBLAS, wlin = pack ? ENG_ROUTE_PACKED : lin;
	int wide = bf || dnnl ? ENG_ROUTE_DNNL : ENG_ROUTE_OPENBLAS;
	for (int i = 0; i < 4; i++) {
		int in = io[i][0], o = io[i][1];
		if (cfg->arch == ENG_ARCH_LLAMA) {
			/* Linear [out, in]: y = x W^T; dx = dy W; dW = dy^T x */
			out[n++] = (eng_product){layer[i][0], {bf, 0, 1, N, o, in, in, in, o, 0, 0}, L,
				wlin};
			out[n++] = (eng_product){layer[i][1], {bf, 0, 0, N, in, o, o, in, in, 0, 0}, L,
				wlin};
			out[n++] = (eng_product){layer[i][2],
				{bf, 1, 0, o, in, N, o, in, in, 0, 0}, L, lin};
			continue;
		}
		/* Conv1D [in, out]: y = x W; dx = dy W^T; dW = x^T dy */
		out[n++] = (eng_product){layer[i][0], {bf, 0, 0, N, o, in, in, o, o, 0, 0}, L, wlin};
		out[n++] = (eng_product){layer[i][1], {bf, 0, 1, N, in, o, o, o, in, 0, 0}, L, wlin};
		out[n++] = (eng_product){layer[i][2], {bf, 1, 0, in, o, N, in, o, o, 0, 0}, L, lin};
	}
	for (int k = 0; k < 2; k++) {
		if (!rows[k])
			continue;
		int r = rows[k];
		/* wte packed for full chunks only (the last chunk's shape may want another
		 * layout): for both products in bf16, for dlnf in float32 */
		int pk0 = pack && k == 0, pk1 = (pack || (!bf && dnnl)) && k == 0;
		/* logits = lnf wte^T; dlnf = dlogits wte; dwte += dlogits^T lnf (bf16: its block
		 * of rows [v, v + dr) += dlogits[:, v:v+dr]^T lnf, the last block ending at V) */
		out[n++] = (eng_product){head[k][0], {bf, 0, 1, r, V, C, C, C, V, 0, 0}, times[k],
			pk0 ? ENG_ROUTE_PACKED : wide};
		out[n++] = (eng_product){head[k][1], {bf, 0, 0, r, C, V, V, C, C, 0, 0}, times[k],
			pk1 ? ENG_ROUTE_PACKED : wide};
		kn_mm dwte = {bf, 1, 0, bf ? dr : V, C, r, V, C, C, 1, 0};
		out[n++] = (eng_product){head[k][2], dwte, times[k] * (bf ? nblk : 1), lin};
	}
	for (int i = 0; i < n; i++)
		out[i].mm.packed = out[i].route == ENG_ROUTE_PACKED;
	return n;
}

unsigned eng_model_route_flags(const eng_config *cfg)
{
	const char *e = getenv("REMAT_FP32_DNNL");
	int f32 = !(e && strcmp(e, "0") == 0) && kn_dnnl_available(NULL, 0);
	return (f32 ? ENG_PRODUCTS_DNNL : 0) |
	       (cfg->mm_bf16 && kn_bf16_pack_weights() ? ENG_PRODUCTS_PACK_BF16 : 0);
}

static int dnnl_bytes(const eng_product *pr, int n, int L, size_t *scratch, size_t *packed,
	size_t *at, size_t *sz);

/* The step's products and their routes here, and oneDNN's bytes for them (*sc scratchpad,
 * *pk packed weights; its primitives made on the way, once: later sizings find them).
 * float32 falls back to OpenBLAS for every product when oneDNN cannot make its primitives
 * (OpenBLAS alone trains it as well); bf16 has no such fallback: its failure is the run's,
 * at eng_prod_fit, and counts nothing here. */
int eng_prod_routes(const eng_config *cfg, int B, int T, int R, eng_product *pr, size_t *sc,
	size_t *pk)
{
	int n = eng_model_products(cfg, B, T, R, eng_model_route_flags(cfg), pr);
	size_t q4 = 0; /* the 4-bit products' in bf16 share the scratchpad */
	if (eng_q4_dnnl_bytes(cfg, B * T, &q4) == 0 &&
		dnnl_bytes(pr, n, cfg->n_layer, sc, pk, NULL, NULL) == 0) {
		*sc = q4 > *sc ? q4 : *sc;
		return n;
	}
	*sc = *pk = 0;
	return cfg->mm_bf16 ? n : eng_model_products(cfg, B, T, R, 0, pr);
}

/* Some product of m runs through oneDNN (the 4-bit ones under compute bf16 too) */
static int uses_dnnl(const eng_model *m)
{
	if (m->cfg.quant_bf16)
		return 1;
	for (int i = 0; i < m->nprod; i++)
		if (m->prod[i].route != ENG_ROUTE_OPENBLAS)
			return 1;
	return 0;
}

/* Copies of a packed product's B: one per layer for a linear layer's, wte's one. */
static int pack_copies(int i, int L)
{
	return i < ENG_HEAD_PRODUCTS ? L : 1;
}

/* oneDNN's bytes for the products that route through it at the current thread count (their
 * primitives made on the way): the largest scratchpad, and the packed weights, where each
 * packed product's copies start (at[i], 64-byte aligned) and how far apart (sz[i]; at and
 * sz may be NULL). -1 with kn_bf16_error(). */
static int dnnl_bytes(const eng_product *pr, int n, int L, size_t *scratch, size_t *packed,
	size_t *at, size_t *sz)
{
	*scratch = *packed = 0;
	for (int i = 0; i < n; i++) {
		size_t sc, pk;
		if (pr[i].route == ENG_ROUTE_OPENBLAS)
			continue;
		if (kn_dnnl_sizes(&pr[i].mm, &sc, &pk) < 0)
			return -1;
		*scratch = sc > *scratch ? sc : *scratch;
		if (pr[i].route != ENG_ROUTE_PACKED)
			continue;
		pk = (pk + 63) / 64 * 64;
		if (at)
			at[i] = *packed, sz[i] = pk;
		*packed += pk * pack_copies(i, L);
	}
	return 0;
}

/* Elements of the rounded-gradient workspace: the widest linear gradient (q|k|v, the MLP's
 * first product) or a chunk's. */
size_t eng_prod_bf_out_elems(const eng_config *cfg, size_t N, size_t R)
{
	size_t w = (size_t)eng_config_qkv(cfg), f = (size_t)eng_config_ffn_in(cfg);
	size_t lin = N * (w > f ? w : f), head = R * (size_t)cfg->vocab_size;
	return lin > head ? lin : head;
}

/* oneDNN's scratchpads and packed weights for the current thread count (its primitives are
 * per thread count, and their layouts may follow it). */
int eng_prod_fit(eng_model *m, eng_err *err)
{
	if (m->mm_threads == kn_get_threads() || !uses_dnnl(m))
		return 0;
	size_t need, packed, at[ENG_PRODUCTS] = {0}, sz[ENG_PRODUCTS] = {0}, q4;
	if (dnnl_bytes(m->prod, m->nprod, m->cfg.n_layer, &need, &packed, at, sz) < 0 ||
		eng_q4_dnnl_bytes(&m->cfg, m->B * m->T, &q4) < 0)
		return eng_errf(err, "oneDNN matmuls: %s", kn_bf16_error());
	need = q4 > need ? q4 : need;
	void *p = need ? eng_mem_alloc(ENG_MEM_WORKSPACE, need) : NULL;
	void *w = packed && packed != m->wpack_bytes ? eng_mem_alloc(ENG_MEM_PARAMS, packed) : NULL;
	if ((need && !p) || (packed && packed != m->wpack_bytes && !w)) {
		eng_mem_free(p);
		eng_mem_free(w);
		return eng_err_nomem(err, "cannot allocate %.1f MiB for oneDNN's matmuls "
				     "(scratchpad and packed weights): out of memory",
			(need + packed) / 1048576.0);
	}
	/* all or nothing: the offsets change only with the buffers they index */
	memcpy(m->pack_at, at, sizeof at);
	memcpy(m->pack_sz, sz, sizeof sz);
	eng_mem_free(m->mm_scratch);
	m->mm_scratch = p;
	m->mm_scratch_bytes = need;
	if (packed != m->wpack_bytes) {
		eng_mem_free(m->wpack);
		m->wpack = w;
		m->wpack_bytes = packed;
	}
	m->wcopy_valid = 0; /* a new thread count may pack another way */
	m->mm_threads = kn_get_threads();
	return 0;
}

void eng_model_params_changed(eng_model *m)
{
	m->wcopy_valid = m->wbf_valid = 0;
}

size_t eng_model_opt_span(const eng_model *m, const eng_ptensor *t, size_t *k)
{
	size_t g0 = t->goff > m->opt_lo ? t->goff : m->opt_lo;
	size_t g1 = t->goff + t->numel < m->opt_hi ? t->goff + t->numel : m->opt_hi;
	*k = g1 > g0 ? g0 - t->goff : 0;
	return g1 > g0 ? g1 - g0 : 0;
}

uint16_t *eng_model_opt_wbf(const eng_model *m)
{
	return m->cfg.mm_bf16 && m->wbf_valid ? m->wbf : NULL;
}

void eng_model_params_stepped(eng_model *m, int wbf_written)
{
	m->wcopy_valid = 0;
	m->wbf_valid = m->wbf_valid && wbf_written;
}

const uint16_t *eng_model_wbf(const eng_model *m, const float *w)
{
	return m->wbf + (w - m->params);
}

/* The weight product i multiplies by in layer l (a linear layer's, or wte), as the product
 * takes it: float32, or its bf16 copy. */
const void *eng_prod_weight(const eng_model *m, int i, int l)
{
	const eng_layer_w *h = &m->w.h[l];
	const float *w = i >= ENG_HEAD_PRODUCTS ? m->w.lmw :
		(const float *[]){h->qkvw, h->attprojw, h->fcw, h->fcprojw}[i / 3];
	return m->cfg.mm_bf16 ? (const void *)eng_model_wbf(m, w) : w;
}

/* Product i's packed copy of layer l's weight */
static void *packed_of(const eng_model *m, int i, int l)
{
	return (char *)m->wpack + m->pack_at[i] + (size_t)l * m->pack_sz[i];
}

/* The weights' copies for this forward: bf16 (unless the optimizer wrote it), then the
 * packed ones (from those). */
int eng_prod_wcopy(eng_model *m, eng_err *err)
{
	if (m->wcopy_valid)
		return 0;
	double t0 = eng_timing_t0(m->timing), rounded = 0;
	if (m->cfg.mm_bf16 && !m->wbf_valid) {
		kn_to_bf16(m->wbf, m->params, m->nfloats);
		rounded = 6.0 * m->nfloats;
		m->wbf_valid = 1;
	}
	for (int i = 0; i < m->nprod; i++)
		for (int l = 0; m->prod[i].route == ENG_ROUTE_PACKED &&
				l < pack_copies(i, m->cfg.n_layer); l++)
			if (kn_dnnl_pack(&m->prod[i].mm, eng_prod_weight(m, i, l), packed_of(m, i, l),
				    m->pack_sz[i]) < 0)
				return eng_errf(err, "oneDNN matmuls: %s", kn_bf16_error());
	eng_timing_add(m->timing, ENG_TIMING_WCOPY, t0, 0, rounded + 2.0 * m->wpack_bytes);
	m->wcopy_valid = 1;
	return 0;
}

/* C = op(A) op(B) + beta C: product i of the table (in layer l), by its route, a packed
 * one with its packed weight for B; oneDNN's first failure is kept for the pass's end. */
void eng_model_prod_run(eng_model *m, int i, int l, const void *A, const void *B, float *C)
{
	const eng_product *p = &m->prod[i];
	const kn_mm *q = &p->mm;
	double t0 = eng_timing_t0(m->timing), es = q->bf16 ? 2.0 : 4.0;
	if (p->route == ENG_ROUTE_OPENBLAS)
		kn_sgemm(q->ta, q->tb, q->M, q->N, q->K, 1.0f, A, q->lda, B, q->ldb,
			(float)q->beta, C, q->ldc);
	else if (!m->mm_err[0] && kn_dnnl_gemm(q, A, p->route == ENG_ROUTE_PACKED ?
						      packed_of(m, i, l) : B, C, m->mm_scratch,
					  m->mm_scratch_bytes) < 0)
		snprintf(m->mm_err, sizeof m->mm_err, "oneDNN matmul: %s", kn_bf16_error());
	eng_timing_add(m->timing, i, t0, 2.0 * q->M * q->N * q->K, es * ((double)q->M * q->K +
		(double)q->K * q->N) + 4.0 * q->M * q->N * (1 + q->beta));
}
