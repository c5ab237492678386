/* eng_model_q4.c - the CPU model's 4-bit weights (model.quantize, eng_quant.h): their block
 * and views, loading a tensor into them, reading one back, and the products of the blocks'
 * linear layers with them (kernels/cpu/kn_q4.c below). Above the tensor table, below the
 * blocks' passes (eng_blocks.c) and the loaders (eng_import.c, eng_model_init_weights).
 *
 * Legend: a quantized weight W(OC, IC) is its Hugging Face tensor as a product takes it:
 * a Linear's [out, in] as it is, a GPT-2 Conv1D's [in, out] transposed (as transformers
 * does before bitsandbytes quantizes one). A joined weight (q|k|v, gate|up) is several such
 * parts, each quantized on its own, their rows one after the other in the layer's output.
 */
#include "eng_model.h"
#include "eng_model_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_quant.h"

/* A Conv1D weight: stored [in, out] */
static int conv1d(const eng_config *c)
{
	return c->arch == ENG_ARCH_GPT2;
}

/* W's rows and columns for tensor t (OC, IC above) */
static void shape_of(const eng_config *c, const eng_ptensor *t, int *OC, int *IC)
{
	*OC = (int)t->shape[conv1d(c) ? 1 : 0];
	*IC = (int)t->shape[conv1d(c) ? 0 : 1];
}

static kn_q4_type kn_type(const eng_config *c)
{
	return c->quant == ENG_QUANT_FP4 ? KN_Q4_FP4 : KN_Q4_NF4;
}

/* The widest input or output of a block's linear layers */
static size_t widest(const eng_config *c)
{
	int w[] = {c->n_embd, eng_config_qkv(c), eng_config_ffn_in(c), eng_config_ffn(c)}, most = 0;
	for (int k = 0; k < 4; k++)
		most = w[k] > most ? w[k] : most;
	return (size_t)most;
}

/* Bytes of the bf16 operand buffer (compute bf16) */
static size_t bf_bytes(const eng_config *c, size_t N)
{
	return c->quant_bf16 ? 2 * N * widest(c) : 0;
}

size_t eng_q4_scratch_bytes(const eng_config *c, size_t N)
{
	int ff = eng_config_ffn(c), in = ff > c->n_embd ? ff : c->n_embd;
	return c->quant ? 4 * kn_q4_scratch_floats(in, c->quant_block) + bf_bytes(c, N) : 0;
}

int eng_q4_dnnl_bytes(const eng_config *c, int N, size_t *bytes)
{
	int nt = eng_model_ntensors(c), rc = 0;
	*bytes = 0;
	if (!c->quant_bf16)
		return 0;
	eng_ptensor *tab = calloc((size_t)nt, sizeof *tab);
	if (!tab)
		return -1;
	eng_model_table(c, tab, NULL);
	for (int i = 0, ld = 0; i < nt && rc == 0; i++) {
		kn_q4_weight w = {NULL, NULL, NULL, NULL, 0.0f, 0, 0, c->quant_block, kn_type(c)};
		size_t sc;
		if (!tab[i].quant)
			continue;
		shape_of(c, &tab[i], &w.OC, &w.IC);
		if (i == 0 || !tab[i - 1].joined) /* a layer's first part: its width */
			for (int k = i, more = 1; more; k++) {
				int oc, ic;
				shape_of(c, &tab[k], &oc, &ic);
				ld = (k == i ? 0 : ld) + oc;
				more = tab[k].joined;
			}
		rc = kn_q4_bf16_sizes(&w, N, ld, &sc);
		*bytes = sc > *bytes ? sc : *bytes;
	}
	free(tab);
	return rc;
}

/* Tensor t's view into m->q4 (its DQ offset read from the block: valid once loaded) */
static kn_q4_weight view_of(const eng_model *m, const eng_ptensor *t)
{
	eng_q4_layout q;
	const uint8_t *r = m->q4 + t->qoff;
	kn_q4_weight w = {r, NULL, NULL, NULL, 0.0f, 0, 0, m->cfg.quant_block,
		kn_type(&m->cfg)};
	eng_q4_layout_of(&m->cfg, t->numel, &q);
	shape_of(&m->cfg, t, &w.OC, &w.IC);
	if (!m->cfg.quant_dq) {
		w.absmax = (const float *)(r + q.absmax);
		return w;
	}
	w.qabs = r + q.qabs;
	w.absmax2 = (const float *)(r + q.absmax2);
	memcpy(&w.offset, r + q.offset, sizeof w.offset);
	return w;
}

int eng_q4_init(eng_model *m)
{
	size_t bytes = eng_model_q4_bytes(&m->cfg, NULL);
	for (int l = 0; l < ENG_MAX_LAYERS; l++)
		for (int k = 0; k < 4; k++)
			m->qlin[l][k] = -1;
	if (!m->cfg.quant)
		return 0;
	m->q4 = eng_mem_alloc(ENG_MEM_PARAMS, bytes);
	m->qw = calloc((size_t)m->ntensors, sizeof *m->qw);
	size_t N = (size_t)m->B * m->T, bf = bf_bytes(&m->cfg, N);
	m->q4_scratch = eng_mem_alloc(ENG_MEM_WORKSPACE, eng_q4_scratch_bytes(&m->cfg, N) - bf);
	m->q4_bf = bf ? eng_mem_alloc(ENG_MEM_WORKSPACE, bf) : NULL;
	if (!m->q4 || !m->qw || !m->q4_scratch || (bf && !m->q4_bf))
		return -1;
	memset(m->q4, 0, bytes); /* a block of zero codes and absmax: W = 0 until loaded */
	static const eng_slot first[4] = {ENG_SLOT_QKVW, ENG_SLOT_PROJW, ENG_SLOT_FCW,
		ENG_SLOT_FCPROJW};
	for (int i = 0; i < m->ntensors; i++) {
		const eng_ptensor *t = &m->tensors[i];
		if (!t->quant)
			continue;
		m->qw[i] = view_of(m, t);
		for (int k = 0; k < 4; k++)
			if (t->slot == first[k])
				m->qlin[t->section][k] = i;
	}
	return 0;
}

/* Floats of the stage: the largest quantized tensor, its transpose, its absmax values */
static size_t stage_floats(const eng_model *m)
{
	size_t most = 0;
	for (int i = 0; i < m->ntensors; i++)
		if (m->tensors[i].quant && m->tensors[i].numel > most)
			most = m->tensors[i].numel;
	return 2 * most + most / (size_t)m->cfg.quant_block + 1;
}

float *eng_model_tensor_dst(eng_model *m, const eng_ptensor *t, eng_err *err)
{
	if (!t->quant)
		return m->params + t->offset;
	if (!m->qstage && !(m->qstage = eng_mem_alloc(ENG_MEM_WORKSPACE, 4 * stage_floats(m))))
		eng_err_nomem(err, "cannot allocate %.1f MiB to quantize the weights: out of "
				   "memory", 4.0 * stage_floats(m) / 1048576.0);
	return m->qstage;
}

/* out(cols, rows) = in(rows, cols)^T */
static void transpose(float *out, const float *in, int rows, int cols)
{
#pragma omp parallel for schedule(static)
	for (int c = 0; c < cols; c++)
		for (int r = 0; r < rows; r++)
			out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
}

void eng_model_tensor_loaded(eng_model *m, const eng_ptensor *t)
{
	if (!t->quant)
		return;
	int OC, IC, i = (int)(t - m->tensors);
	eng_q4_layout q;
	uint8_t *r = m->q4 + t->qoff;
	const float *w = m->qstage;
	float *tmp = m->qstage + t->numel, *am = tmp + t->numel;
	shape_of(&m->cfg, t, &OC, &IC);
	eng_q4_layout_of(&m->cfg, t->numel, &q);
	if (conv1d(&m->cfg)) {
		transpose(tmp, w, IC, OC);
		w = tmp;
	}
	if (!m->cfg.quant_dq)
		am = (float *)(r + q.absmax);
	kn_q4_quantize(w, t->numel, m->cfg.quant_block, kn_type(&m->cfg), r + q.codes, am);
	if (m->cfg.quant_dq)
		kn_q4_dq_quantize(am, q.nblocks, r + q.qabs, (float *)(r + q.absmax2),
			(float *)(r + q.offset));
	m->qw[i] = view_of(m, t);
}

void eng_model_load_end(eng_model *m)
{
	eng_mem_free(m->qstage);
	m->qstage = NULL;
}

int eng_model_tensor_get(const eng_model *m, const eng_ptensor *t, float *out, eng_err *err)
{
	if (!t->quant) {
		memcpy(out, m->params + t->offset, t->numel * sizeof *out);
		return 0;
	}
	const kn_q4_weight *w = &m->qw[t - m->tensors];
	size_t nb = (t->numel + (size_t)w->block - 1) / (size_t)w->block;
	float *am = w->absmax ? NULL : malloc(nb * sizeof *am);
	float *wt = conv1d(&m->cfg) ? malloc(t->numel * sizeof *wt) : out;
	int rc = -1;
	if ((!w->absmax && !am) || !wt) {
		eng_err_nomem(err, "out of memory reading the 4-bit weight '%s'", t->name);
		goto out;
	}
	if (am)
		kn_q4_dq_dequantize(w->qabs, w->absmax2, w->offset, 0, nb, am);
	kn_q4_dequantize(w->codes, am ? am : w->absmax, 0, t->numel, w->block, w->type, wt);
	if (wt != out)
		transpose(out, wt, w->OC, w->IC); /* back to the Conv1D's [in, out] */
	rc = 0;
out:
	free(am);
	if (wt != out)
		free(wt);
	return rc;
}

int eng_model_q4_roundtrip(eng_model *m, const eng_config *qc, eng_err *err)
{
	eng_model q;
	int rc = -1;
	memset(&q, 0, sizeof q);
	q.cfg = *qc;
	q.ntensors = eng_model_ntensors(qc);
	q.tensors = calloc((size_t)q.ntensors, sizeof *q.tensors);
	if (!q.tensors || q.ntensors != m->ntensors)
		goto oom;
	eng_model_table(qc, q.tensors, NULL);
	if (eng_q4_init(&q) < 0)
		goto oom;
	for (int i = 0; i < q.ntensors; i++) {
		const eng_ptensor *t = &q.tensors[i];
		float *w = m->params + m->tensors[i].offset;
		if (!t->quant)
			continue;
		float *dst = eng_model_tensor_dst(&q, t, err);
		if (!dst)
			goto out;
		memcpy(dst, w, t->numel * sizeof *w);
		eng_model_tensor_loaded(&q, t);
		if (eng_model_tensor_get(&q, t, w, err) < 0)
			goto out;
	}
	rc = 0;
	goto out;
oom:
	eng_err_nomem(err, "out of memory quantizing the base");
out:
	eng_model_load_end(&q);
	eng_mem_free(q.q4);
	eng_mem_free(q.q4_scratch);
	free(q.qw);
	free(q.tensors);
	return rc;
}

/* ---- products ---- */

/* A bf16 product's failure, kept for the pass's end (as eng_model_prod_run keeps it) */
static void bf16_failed(eng_model *m)
{
	if (!m->mm_err[0])
		snprintf(m->mm_err, sizeof m->mm_err, "oneDNN matmul (4-bit, bf16): %s",
			kn_bf16_error());
}

void eng_q4_forward(eng_model *m, int k, int l, float *out, const float *inp, int N, int OC)
{
	int i = m->qlin[l][k], col = 0, bf = m->cfg.quant_bf16;
	if (bf) /* the input rounded once for every part */
		kn_to_bf16(m->q4_bf, inp, (size_t)N * (size_t)m->qw[i].IC);
	do {
		const kn_q4_weight *w = &m->qw[i];
		if (!bf)
			kn_q4_linear_forward(out + col, OC, inp, w, N, m->q4_scratch);
		else if (!m->mm_err[0] &&
			 kn_q4_linear_forward_bf16(out + col, OC, m->q4_bf, w, N, m->q4_scratch,
				 m->mm_scratch, m->mm_scratch_bytes) < 0)
			bf16_failed(m);
		col += w->OC;
	} while (m->tensors[i++].joined);
}

void eng_q4_backward(eng_model *m, int k, int l, float *dinp, const float *dout, int N,
	int OC)
{
	int i = m->qlin[l][k], col = 0, bf = m->cfg.quant_bf16;
	if (bf)
		kn_to_bf16(m->q4_bf, dout, (size_t)N * (size_t)OC);
	do {
		const kn_q4_weight *w = &m->qw[i];
		if (!bf)
			kn_q4_linear_backward(dinp, dout + col, OC, w, N, col > 0, m->q4_scratch);
		else if (!m->mm_err[0] &&
			 kn_q4_linear_backward_bf16(dinp, m->q4_bf + col, OC, w, N, col > 0,
				 m->q4_scratch, m->mm_scratch, m->mm_scratch_bytes) < 0)
			bf16_failed(m);
		col += w->OC;
	} while (m->tensors[i++].joined);
}
