/* eng_backend_cuda.c - the GPU backend (eng_backend.h) over eng_cuda.h: the GPU model with
 * its own gradients, their sum over micro-batches and ranks, the AdamW update, device
 * memory (eng_cuda_mem.h), and the host mirror kept up to date by download and upload.
 * Built in every build: without CUDA, eng_nocuda.c answers eng_cuda.h and create
 * fails with "this build has no CUDA backend". Not here: the GPU model itself (eng_cuda.c,
 * eng_cuda_step.c), section times and the memory timeline (not measured on the GPU).
 */
#include "eng_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_cuda.h"
#include "eng_dp.h"
#include "eng_plan.h"

typedef struct cuda_backend {
	eng_backend be;          /* first: the handle the trainer holds */
	eng_cuda *g;             /* the GPU model */
} cuda_backend;

static eng_cuda *gpu_of(const eng_backend *be)
{
	return ((const cuda_backend *)be)->g;
}

static int cuda_set_policy(eng_backend *be, const eng_policy *p, eng_err *err)
{
	return eng_cuda_set_policy(gpu_of(be), p, err);
}

static const eng_policy *cuda_policy(const eng_backend *be)
{
	return eng_cuda_policy(gpu_of(be));
}

static int cuda_micro_step(eng_backend *be, const uint32_t *inp, const uint32_t *tgt, int k,
	float *loss, eng_err *err)
{
	if (eng_cuda_step(gpu_of(be), inp, tgt, loss, err) < 0 ||
		eng_cuda_accumulate(gpu_of(be), k, err) < 0)
		return -1;
	return 0;
}

static int cuda_loss(eng_backend *be, const uint32_t *inp, const uint32_t *tgt, float *loss,
	eng_err *err)
{
	return eng_cuda_loss(gpu_of(be), inp, tgt, loss, err);
}

static double cuda_recompute_ms(const eng_backend *be)
{
	return eng_cuda_recompute_ms(gpu_of(be));
}

static int cuda_sum_ranks(eng_backend *be, eng_err *err)
{
	return eng_cuda_sum_ranks(gpu_of(be), err);
}

static int cuda_scale_grads(eng_backend *be, float s, eng_err *err)
{
	return eng_cuda_scale_grads(gpu_of(be), s, err);
}

static int cuda_grad_sumsq(eng_backend *be, double *out, eng_err *err)
{
	return eng_cuda_grad_sumsq(gpu_of(be), out, err);
}

/* The clipping scale is applied inside the update, as kn_scale would have. */
static int cuda_adamw(eng_backend *be, const eng_adamw_args *a, eng_err *err)
{
	return eng_cuda_adamw(gpu_of(be), a->grad_scale, a->lr, a->beta1, a->beta2, a->eps,
		a->weight_decay, a->bc1, a->bc2, err);
}

static size_t cuda_saved_bytes(const eng_backend *be, int i)
{
	return eng_cuda_saved_bytes(gpu_of(be), i);
}

static int cuda_download(eng_backend *be, eng_err *err)
{
	return eng_cuda_download(gpu_of(be), be->host, err);
}

static int cuda_upload(eng_backend *be, eng_err *err)
{
	return eng_cuda_upload(gpu_of(be), be->host, err);
}

static void cuda_mem_now(const eng_backend *be, size_t *cur, size_t *total)
{
	eng_cuda_mem_stats ds;
	(void)be;
	eng_cuda_mem_get_stats(&ds);
	for (int c = 0; c < ENG_MEM_NCAT; c++)
		cur[c] = ds.current[c];
	*total = ds.total_current;
}

/* The device allocator's window; the timeline begins empty (the GPU model's passes are not
 * traced). */
static void cuda_step_begin(eng_backend *be, eng_memtrace *trace, int step)
{
	eng_cuda_mem_step_peaks(NULL, NULL, 1);
	eng_memtrace_begin(trace, step, be->host->cfg.n_layer);
}

static void cuda_step_peaks(const eng_backend *be, size_t *peak, size_t *total)
{
	(void)be;
	eng_cuda_mem_step_peaks(peak, total, 0);
}

/* The device's used memory (cudaMemGetInfo, refreshed at the step's end) beyond the
 * allocator's tensors: the CUDA context, cuBLAS's and cuDNN's workspaces, the arenas'
 * slack, other processes on the GPU. */
static int cuda_step_untracked(eng_backend *be, size_t peak_bytes, size_t *rss_peak,
	size_t *untracked)
{
	eng_cuda_mem_stats ds;
	(void)be;
	(void)peak_bytes;
	(void)rss_peak;
	eng_cuda_mem_get_stats(&ds);
	size_t used = ds.device_total > ds.device_free ? ds.device_total - ds.device_free : 0;
	*untracked = used > ds.total_current ? used - ds.total_current : 0;
	return 0;
}

static const char *cuda_describe(const eng_backend *be)
{
	static char buf[512];
	eng_cuda_info info;
	eng_cuda_probe(&info);
	int d = eng_cuda_device(gpu_of(be));
	const eng_cuda_gpu *gpu = &info.gpu[0];
	for (int i = 0; i < info.ngpus; i++)
		if (info.gpu[i].device == d)
			gpu = &info.gpu[i];
	snprintf(buf, sizeof buf, "cuda: GPU %d, %s (%.1f GiB), %s", d, gpu->name,
		gpu->memory_bytes / 1073741824.0, eng_cuda_describe(gpu_of(be)));
	return buf;
}

static const char *cuda_precision(const eng_backend *be)
{
	return eng_cuda_precision(gpu_of(be));
}

static const char *cuda_allreduce(const eng_backend *be)
{
	return eng_cuda_dp_describe(gpu_of(be));
}

static void cuda_destroy(eng_backend *be)
{
	eng_cuda_destroy(gpu_of(be));
	free(be);
}

/* The host mirror: the tensor table and the host copies of the weights and moments that
 * checkpoints read and write, nothing of a step. It is made for batch 1 x 1 (activation and
 * workspace buffers of one row; the gradients freed), then given the run's batch, sequence
 * length and chunking, which the GPU model, the planner and the control commands read from
 * it. Its activations are never laid out: eng_model_step must not run on it. */
static int cuda_host_init(eng_model *m, const eng_spec *s, eng_err *err)
{
	if (s->batch < 1 || s->seq_len < 1 || s->seq_len > s->cfg.n_positions)
		return eng_errf(err, "batch %d x seq_len %d does not fit the model (n_positions %d)",
			s->batch, s->seq_len, s->cfg.n_positions);
	if (eng_model_init_host(m, &s->cfg, err) < 0)
		return -1;
	eng_mem_free(m->grads);
	m->grads = NULL;
	memset(&m->g, 0, sizeof m->g);
	size_t N = (size_t)s->batch * s->seq_len;
	m->B = s->batch;
	m->T = s->seq_len;
	m->chunk_rows = s->chunk_rows > 0 ? s->chunk_rows
					  : eng_plan_chunk_rows(&s->cfg, s->batch, s->seq_len);
	if ((size_t)m->chunk_rows > N)
		m->chunk_rows = (int)N;
	return 0;
}

struct eng_cuda *eng_backend_gpu(const eng_backend *be)
{
	return be && be->ops == &eng_backend_cuda_ops ? gpu_of(be) : NULL;
}

static int cuda_create(eng_backend **out, eng_model *host, const eng_spec *s, eng_err *err)
{
	eng_cuda_opts o;
	*out = NULL;
	/* rank 0's settings on every rank: mpirun passes no environment to other hosts */
	if (eng_cuda_opts_from_env(&o, err) < 0 || eng_dp_bcast(&o, sizeof o, err) < 0)
		return -1;
	if (s->has_precision) /* the spec's, over REMAT_CUDA_PRECISION */
		o.fp32 = s->precision == ENG_PREC_FP32;
	/* what the planner counts for this run, and (eng_cuda_new copies the host's config)
	 * what the GPU model's layout_mem sizes its activations by */
	host->cfg.act_bf16 = !o.fp32;
	o.gpu = eng_dp_local_rank(); /* ranks on one machine take its GPUs in turn */
	o.accum = s->grad_accum > 1;
	cuda_backend *c = calloc(1, sizeof *c);
	if (!c)
		return eng_err_nomem(err, "out of memory for the GPU backend");
	c->be.ops = &eng_backend_cuda_ops;
	c->be.host = host;
	if (eng_cuda_new(&c->g, host, &o, err) < 0 || eng_cuda_dp_open(c->g, o.comm, err) < 0) {
		cuda_destroy(&c->be);
		return -1;
	}
	*out = &c->be;
	return 0;
}

const eng_backend_ops eng_backend_cuda_ops = {
	.name = "cuda",
	.tracked_host = 0,
	.sum_fails_alone = 1,
	.set_policy = cuda_set_policy,
	.policy = cuda_policy,
	.micro_step = cuda_micro_step,
	.loss = cuda_loss,
	.recompute_ms = cuda_recompute_ms,
	.section_ms = NULL,
	.sum_ranks = cuda_sum_ranks,
	.scale_grads = cuda_scale_grads,
	.grad_sumsq = cuda_grad_sumsq,
	.adamw = cuda_adamw,
	.saved_bytes = cuda_saved_bytes,
	.download = cuda_download,
	.upload = cuda_upload,
	.mem_now = cuda_mem_now,
	.step_begin = cuda_step_begin,
	.step_end = NULL,
	.step_peaks = cuda_step_peaks,
	.step_untracked = cuda_step_untracked,
	.describe = cuda_describe,
	.precision = cuda_precision,
	.allreduce = cuda_allreduce,
	.destroy = cuda_destroy,
	.host_init = cuda_host_init,
	.create = cuda_create,
};
