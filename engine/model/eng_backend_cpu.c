/* eng_backend_cpu.c - the cpu backend (eng_backend.h) over eng_model.h: the model's passes,
 * the sum of a step's micro-batch gradients, the ranks' sum through eng_dp, the gradient's
 * scale and sum of squares and the AdamW update over the parameter table with the kn_*
 * kernels, the host's tracked allocator (eng_mem.h) and its memory timeline. The numbers
 * are the ones the trainer computed itself before the backend existed, in the same order.
 * Not here: the model's maths (eng_model.c, eng_blocks.c), the schedule and clipping (the
 * trainer's).
 */
#include "eng_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_dp.h"
#include "eng_util.h"
#include "kn.h"

typedef struct cpu_backend {
	eng_backend be;          /* first: the handle the trainer holds */
	int accum;               /* grad_accum */
	float *acc;              /* accum > 1: the sum of the step's micro-batch gradients,
				  * ngrad floats (ENG_MEM_GRADS); else NULL */
	/* data parallel: the ranks' sum of this rank's part, overlapped with the last
	 * micro-batch's backward (NULL alone) */
	eng_dp_reducer *red;
	size_t *final_at;        /* stage s's watermark at [s + 1] (s = -1 .. L): the
				  * trainable floats from it on are final once the backward has
				  * done stage s (eng_model.on_final) */
	size_t fin;              /* the round's watermark so far */
	int begun;               /* a round is begun (the last micro-batch started) */
} cpu_backend;

/* The step's gradient: the sum of its micro-batches', or the model's own. */
static float *grads_of(const eng_backend *be)
{
	const cpu_backend *c = (const cpu_backend *)be;
	return c->acc ? c->acc : be->host->grads;
}

static int cpu_set_policy(eng_backend *be, const eng_policy *p, eng_err *err)
{
	return eng_model_set_policy(be->host, p, err);
}

static const eng_policy *cpu_policy(const eng_backend *be)
{
	return &be->host->lay.policy;
}

/* The backward has made stage's gradients final (eng_model.on_final, the step's last
 * micro-batch): those floats added to the step's sum (grad_accum > 1), then told to the
 * reducer, which sums them over the ranks while the backward goes on. */
static void on_final(void *ud, int stage)
{
	cpu_backend *c = ud;
	eng_model *m = c->be.host;
	size_t from = c->final_at[stage + 1];
	if (from >= c->fin)
		return;
	if (c->acc) {
		double t0 = eng_timing_t0(m->timing);
		kn_add(c->acc + from, m->grads + from, c->fin - from);
		eng_timing_add(m->timing, ENG_TIMING_ACCUM, t0, 0, 12.0 * (c->fin - from));
	}
	c->fin = from;
	eng_dp_reducer_final(c->red, from);
}

static int cpu_micro_step(eng_backend *be, const uint32_t *inp, const uint32_t *tgt, int k,
	float *loss, eng_err *err)
{
	cpu_backend *c = (cpu_backend *)be;
	eng_model *m = be->host;
	int last = c->red && k == c->accum - 1; /* its backward overlaps the ranks' sum */
	if (last) {
		eng_dp_reducer_begin(c->red, grads_of(be), m->ngrad);
		c->begun = 1;
		c->fin = m->ngrad;
		m->on_final = on_final;
		m->on_final_ud = c;
	}
	int rc = eng_model_step(m, inp, tgt, loss, err);
	m->on_final = NULL;
	if (rc < 0)
		return -1;
	double t0 = eng_timing_t0(m->timing), n = (double)m->ngrad;
	if (c->accum > 1 && k == 0) /* 0 + g, exactly */
		memcpy(c->acc, m->grads, m->ngrad * sizeof(float));
	else if (c->accum > 1 && !last) /* (the last one's: on_final, a stage at a time) */
		kn_add(c->acc, m->grads, m->ngrad);
	if (c->accum > 1 && !last)
		eng_timing_add(m->timing, ENG_TIMING_ACCUM, t0, 0, 4 * n * (k ? 3 : 2));
	return 0;
}

static int cpu_loss(eng_backend *be, const uint32_t *inp, const uint32_t *tgt, float *loss,
	eng_err *err)
{
	return eng_model_loss(be->host, inp, tgt, loss, err);
}

static double cpu_recompute_ms(const eng_backend *be)
{
	return be->host->recompute_ms;
}

static const double (*cpu_section_ms(const eng_backend *be))[3]
{
	return (const double (*)[3])be->host->sec_ms;
}

_Static_assert(ENG_OPT_SLICES == KN_SUMSQ_SLICES, "a rank's part is whole slices of kn_sumsq");

static int sharded(const eng_backend *be)
{
	return be->host->cfg.opt_shards > 1;
}

/* This rank's part summed: the round the last micro-batch began, finished (one whose
 * micro-batches failed before it begins it here: every rank's chains need every rank) */
static void cpu_reduce_part(eng_backend *be)
{
	cpu_backend *c = (cpu_backend *)be;
	double busy;
	if (!c->begun)
		eng_dp_reducer_begin(c->red, grads_of(be), be->host->ngrad);
	c->begun = 0;
	eng_dp_reducer_finish(c->red, &be->exposed_ms, &busy);
	be->hidden_ms = busy > be->exposed_ms ? busy - be->exposed_ms : 0;
}

/* Every rank's part to every rank; a sharded optimizer needs its own part alone */
static int cpu_sum_ranks(eng_backend *be, eng_err *err)
{
	return sharded(be) ? 0 : eng_dp_allgather(grads_of(be), be->host->ngrad, err);
}

/* The part of the gradient this rank steps: [opt_lo, opt_hi), all of it unsharded */
static int cpu_scale_grads(eng_backend *be, float s, eng_err *err)
{
	const eng_model *m = be->host;
	size_t n = m->opt_hi - m->opt_lo;
	(void)err;
	ENG_TIMED(m->timing, ENG_TIMING_CLIP, 0, 8.0 * n,
		kn_scale(grads_of(be) + m->opt_lo, s, n));
	return 0;
}

/* kn_sumsq's slices: this rank's own, the others' from them (each slice summed on one rank,
 * added to zeros elsewhere: the same bits), added in slice order as kn_sumsq does */
static int cpu_grad_sumsq(eng_backend *be, double *out, eng_err *err)
{
	const eng_model *m = be->host;
	double part[KN_SUMSQ_SLICES] = {0}, t0 = eng_timing_t0(m->timing);
	int s0 = 0, s1 = KN_SUMSQ_SLICES;
	if (sharded(be))
		eng_config_opt_slices(m->cfg.opt_shards, m->cfg.opt_rank, &s0, &s1);
	kn_sumsq_slices(grads_of(be), m->ngrad, s0, s1, part);
	if (sharded(be) && eng_dp_sum_doubles(part, KN_SUMSQ_SLICES, err) < 0)
		return -1;
	*out = 0;
	for (int s = 0; s < KN_SUMSQ_SLICES; s++)
		*out += part[s];
	eng_timing_add(m->timing, ENG_TIMING_CLIP, t0, 0, 4.0 * (m->opt_hi - m->opt_lo));
	return 0;
}

/* Every rank's part of the weights to every rank after a sharded step: in place when the
 * trainable floats are the weights' (nothing frozen: the same offsets), else through the
 * gradient (no longer needed) in the trainable floats' order; the bf16 copy of the others'
 * parts rounded here, or (through the gradient) before the next step. */
static int gather_weights(eng_backend *be, int wbf_written, eng_err *err)
{
	eng_model *m = be->host;
	double t0 = eng_now_ms();
	int direct = m->ngrad == m->nfloats, rc;
	float *buf = direct ? m->params : grads_of(be);
	for (int i = 0; !direct && i < m->ntensors; i++) { /* this rank's part in */
		const eng_ptensor *t = &m->tensors[i];
		size_t k, n = t->frozen ? 0 : eng_model_opt_span(m, t, &k);
		if (n)
			memcpy(buf + t->goff + k, m->params + t->offset + k, n * sizeof *buf);
	}
	rc = eng_dp_allgather(buf, m->ngrad, err);
	for (int i = 0; rc == 0 && !direct && i < m->ntensors; i++) {
		const eng_ptensor *t = &m->tensors[i];
		if (!t->frozen)
			memcpy(m->params + t->offset, buf + t->goff, t->numel * sizeof *buf);
	}
	if (rc == 0 && direct && wbf_written) {
		kn_to_bf16(m->wbf, m->params, m->opt_lo);
		kn_to_bf16(m->wbf + m->opt_hi, m->params + m->opt_hi, m->nfloats - m->opt_hi);
	}
	be->gather_ms = eng_now_ms() - t0;
	eng_model_params_stepped(m, direct && wbf_written);
	return rc;
}

/* kn_adamw_update tensor by tensor over this rank's part, the clipping's scale inside it
 * (frozen tensors have no gradient and no moments: they never move), the bf16 copy of what
 * moved in the same pass where precision bf16 has one. The gradient itself stays unscaled. */
static int cpu_adamw(eng_backend *be, const eng_adamw_args *a, eng_err *err)
{
	eng_model *m = be->host;
	float *grads = grads_of(be);
	uint16_t *wbf = eng_model_opt_wbf(m);
	size_t lo = m->opt_lo, hi = m->opt_hi;
	double t0 = eng_timing_t0(m->timing);
	for (int i = 0; i < m->ntensors; i++) {
		const eng_ptensor *pt = &m->tensors[i];
		if (pt->frozen)
			continue;
		size_t k, n = eng_model_opt_span(m, pt, &k), g = pt->goff + k; /* in the part */
		if (!n)
			continue;
		kn_adamw_update(m->params + pt->offset + k, wbf ? wbf + pt->offset + k : NULL,
			m->m + (g - lo), m->v + (g - lo), grads + g, a->grad_scale, n, a->lr,
			a->beta1, a->beta2, a->eps, pt->decay ? a->weight_decay : 0.0f, a->bc1,
			a->bc2);
	}
	/* reads param, m, v, grad; writes param, m, v (and the bf16 copy) */
	eng_timing_add(m->timing, ENG_TIMING_OPT, t0, 0, (wbf ? 30.0 : 28.0) * (hi - lo));
	if (sharded(be))
		return gather_weights(be, wbf != NULL, err);
	eng_model_params_stepped(m, wbf != NULL); /* packed copies before the next step */
	return 0;
}

static size_t cpu_saved_bytes(const eng_backend *be, int i)
{
	return eng_model_saved_bytes(be->host, i);
}

static void cpu_mem_now(const eng_backend *be, size_t *cur, size_t *total)
{
	eng_mem_stats ms;
	(void)be;
	eng_mem_get_counters(&ms); /* no /proc read on the step path */
	memcpy(cur, ms.current, sizeof ms.current);
	*total = ms.total_current;
}

/* The peaks' window and the resident bytes' restart; what every step holds (all but
 * activations and recompute) live from the start, one event a category; the model adds
 * its sections' buffers, the allocator the mappings the step makes. */
static void cpu_step_begin(eng_backend *be, eng_memtrace *trace, int step)
{
	eng_mem_stats ms;
	eng_mem_step_peaks(NULL, NULL, 1);
	eng_memtrace_begin(trace, step, be->host->cfg.n_layer);
	eng_mem_rss_window(NULL, 1);
	eng_mem_get_counters(&ms);
	for (int c = 0; c < ENG_MEM_NCAT; c++)
		if (c != ENG_MEM_ACTIVATIONS && c != ENG_MEM_RECOMPUTE && ms.current[c])
			eng_memtrace_add(trace, ENG_MT_LIVE, (void *)((uintptr_t)(c + 1) << 40),
				ms.current[c], (eng_mem_cat)c, -1, -1);
	be->host->trace = trace;
	eng_mem_trace_thread(eng_memtrace_on_alloc, trace);
}

static void cpu_step_end(eng_backend *be)
{
	be->host->trace = NULL;
	eng_mem_trace_thread(NULL, NULL);
}

static void cpu_step_peaks(const eng_backend *be, size_t *peak, size_t *total)
{
	(void)be;
	eng_mem_step_peaks(peak, total, 0);
}

static int cpu_step_untracked(eng_backend *be, size_t peak_bytes, size_t *rss_peak,
	size_t *untracked)
{
	size_t hwm = 0;
	(void)be;
	if (eng_mem_rss_window(&hwm, 0) < 0 || !hwm)
		return -1;
	*rss_peak = hwm;
	*untracked = hwm > peak_bytes ? hwm - peak_bytes : 0;
	eng_mem_note_untracked(*untracked);
	return 0;
}

static const char *cpu_describe(const eng_backend *be)
{
	static char buf[512];
	int bf16 = be->host->cfg.mm_bf16;
	snprintf(buf, sizeof buf, "cpu: %s%s%s", kn_blas_describe(),
		bf16 ? "; bf16 matmuls: " : "", bf16 ? kn_bf16_describe() : "");
	return buf;
}

static const char *cpu_precision(const eng_backend *be)
{
	return be->host->cfg.mm_bf16 ? "bf16" : "fp32";
}

static const char *cpu_allreduce(const eng_backend *be)
{
	static char buf[320];
	const cpu_backend *c = (const cpu_backend *)be;
	const eng_model *m = be->host;
	int n = snprintf(buf, sizeof buf, "mpi: reduce-scatter of float32 gradients in host "
		"memory, %s", c->red && eng_dp_reducer_overlaps(c->red)
		? "overlapped with the backward" : "after the backward");
	if (sharded(be))
		snprintf(buf + n, sizeof buf - (size_t)n, ", AdamW on each rank's part (the "
			"optimizer sharded: the moments of %zu of %zu floats here), all-gather of "
			"the weights", m->opt_hi - m->opt_lo, m->ngrad);
	else
		snprintf(buf + n, sizeof buf - (size_t)n, ", then all-gather");
	return buf;
}

static void cpu_destroy(eng_backend *be)
{
	cpu_backend *c = (cpu_backend *)be;
	eng_dp_reducer_free(c->red);
	free(c->final_at);
	eng_mem_free(c->acc);
	free(c);
}

/* Data parallel: the reducer, and the watermark after each stage of the backward: stage s
 * leaves the trainable tensors of sections below it (the embedding's -1 among them) to be
 * made, the rest of the floats, from the end of the last of those, are final. */
static int ranks_sum(cpu_backend *c, const eng_spec *s, eng_err *err)
{
	const eng_model *m = c->be.host;
	int L = m->cfg.n_layer;
	if (!(c->final_at = calloc((size_t)L + 2, sizeof *c->final_at)))
		return eng_errf(err, "out of memory");
	for (int st = -1; st <= L; st++)
		for (int i = 0; i < m->ntensors; i++) {
			const eng_ptensor *t = &m->tensors[i];
			size_t end = t->goff + t->numel;
			if (!t->frozen && t->section < st && end > c->final_at[st + 1])
				c->final_at[st + 1] = end;
		}
	size_t bucket = (size_t)(s->bucket_mb * 262144.0); /* MiB of floats */
	c->red = eng_dp_reducer_new(s->bucket_mb > 0 && !bucket ? 1 : bucket, err);
	return c->red ? 0 : -1;
}

/* The whole model, for the spec's shape, batch, sequence length and chunking. */
static int cpu_host_init(eng_model *m, const eng_spec *s, eng_err *err)
{
	return eng_model_init(m, &s->cfg, s->batch, s->seq_len, s->chunk_rows, err);
}

static int cpu_create(eng_backend **out, eng_model *host, const eng_spec *s, eng_err *err)
{
	cpu_backend *c = calloc(1, sizeof *c);
	*out = NULL;
	if (!c)
		return eng_err_nomem(err, "out of memory for the cpu backend");
	c->be.ops = &eng_backend_cpu_ops;
	c->be.host = host;
	c->accum = s->grad_accum;
	size_t bytes = host->ngrad * sizeof(float);
	if (c->accum > 1 && !(c->acc = eng_mem_alloc(ENG_MEM_GRADS, bytes))) {
		free(c);
		return eng_errf(err, "out of memory for the accumulated gradients (%.1f MiB)",
			host->ngrad * 4 / 1048576.0);
	}
	if (eng_dp_size() > 1 && ranks_sum(c, s, err) < 0) {
		cpu_destroy(&c->be);
		return -1;
	}
	*out = &c->be;
	return 0;
}

const eng_backend_ops eng_backend_cpu_ops = {
	.name = "cpu",
	.tracked_host = 1,
	.sum_fails_alone = 0,
	.set_policy = cpu_set_policy,
	.policy = cpu_policy,
	.micro_step = cpu_micro_step,
	.loss = cpu_loss,
	.recompute_ms = cpu_recompute_ms,
	.section_ms = cpu_section_ms,
	.reduce_part = cpu_reduce_part,
	.sum_ranks = cpu_sum_ranks,
	.scale_grads = cpu_scale_grads,
	.grad_sumsq = cpu_grad_sumsq,
	.adamw = cpu_adamw,
	.saved_bytes = cpu_saved_bytes,
	.download = NULL,
	.upload = NULL,
	.mem_now = cpu_mem_now,
	.step_begin = cpu_step_begin,
	.step_end = cpu_step_end,
	.step_peaks = cpu_step_peaks,
	.step_untracked = cpu_step_untracked,
	.describe = cpu_describe,
	.precision = cpu_precision,
	.allreduce = cpu_allreduce,
	.destroy = cpu_destroy,
	.host_init = cpu_host_init,
	.create = cpu_create,
};
