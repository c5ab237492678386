/* eng_nocuda.c - the GPU model's interface in a build without CUDA (no nvcc at build time):
 * eng_cuda_new fails with a message that says so, the probe reports no GPU and why, and
 * the device memory counters read zero. Linked instead of eng_cuda*.c; never with them.
 */
#include <string.h>

#include "eng_cuda.h"
#include "eng_cuda_mem.h"

#define NOT_BUILT "this build has no CUDA backend (nvcc was not found when it was built; " \
		  "rebuild with CUDA=1 where the CUDA toolkit is installed)"

void eng_cuda_probe(eng_cuda_info *out)
{
	memset(out, 0, sizeof *out);
	snprintf(out->why, sizeof out->why, "%s", NOT_BUILT);
}

const char *eng_cuda_libraries(void)
{
	return "";
}

int eng_cuda_opts_from_env(eng_cuda_opts *o, eng_err *err)
{
	(void)err;
	memset(o, 0, sizeof *o);
	return 0;
}

int eng_cuda_new(eng_cuda **out, const eng_model *host, const eng_cuda_opts *o, eng_err *err)
{
	(void)host;
	(void)o;
	*out = NULL;
	return eng_errf(err, "device 'cuda' is not available: %s", NOT_BUILT);
}

void eng_cuda_destroy(eng_cuda *g)
{
	(void)g;
}

/* Below: never reached, as no eng_cuda can exist in this build. */

const char *eng_cuda_describe(const eng_cuda *g)
{
	(void)g;
	return NOT_BUILT;
}

int eng_cuda_device(const eng_cuda *g)
{
	(void)g;
	return 0;
}

const char *eng_cuda_precision(const eng_cuda *g)
{
	(void)g;
	return "fp32";
}

int eng_cuda_upload(eng_cuda *g, const eng_model *host, eng_err *err)
{
	(void)g;
	(void)host;
	return eng_errf(err, "%s", NOT_BUILT);
}

int eng_cuda_download(eng_cuda *g, eng_model *host, eng_err *err)
{
	(void)g;
	(void)host;
	return eng_errf(err, "%s", NOT_BUILT);
}

int eng_cuda_set_policy(eng_cuda *g, const eng_policy *p, eng_err *err)
{
	(void)g;
	(void)p;
	return eng_errf(err, "%s", NOT_BUILT);
}

const eng_policy *eng_cuda_policy(const eng_cuda *g)
{
	(void)g;
	return NULL;
}

int eng_cuda_step(eng_cuda *g, const uint32_t *inp, const uint32_t *tgt, float *loss,
	eng_err *err)
{
	(void)g;
	(void)inp;
	(void)tgt;
	(void)loss;
	return eng_errf(err, "%s", NOT_BUILT);
}

int eng_cuda_loss(eng_cuda *g, const uint32_t *inp, const uint32_t *tgt, float *loss,
	eng_err *err)
{
	return eng_cuda_step(g, inp, tgt, loss, err);
}

int eng_cuda_accumulate(eng_cuda *g, int k, eng_err *err)
{
	(void)g;
	(void)k;
	return eng_errf(err, "%s", NOT_BUILT);
}

int eng_cuda_scale_grads(eng_cuda *g, float s, eng_err *err)
{
	(void)g;
	(void)s;
	return eng_errf(err, "%s", NOT_BUILT);
}

int eng_cuda_dp_open(eng_cuda *g, eng_cuda_comm comm, eng_err *err)
{
	(void)g;
	(void)comm;
	return eng_errf(err, "%s", NOT_BUILT);
}

int eng_cuda_sum_ranks(eng_cuda *g, eng_err *err)
{
	(void)g;
	return eng_errf(err, "%s", NOT_BUILT);
}

const char *eng_cuda_dp_describe(const eng_cuda *g)
{
	(void)g;
	return NULL;
}

int eng_cuda_grad_sumsq(eng_cuda *g, double *out, eng_err *err)
{
	(void)g;
	(void)out;
	return eng_errf(err, "%s", NOT_BUILT);
}

int eng_cuda_adamw(eng_cuda *g, float grad_scale, float lr, float beta1, float beta2,
	float eps, float weight_decay, double bc1, double bc2, eng_err *err)
{
	(void)g;
	(void)grad_scale;
	(void)lr;
	(void)beta1;
	(void)beta2;
	(void)eps;
	(void)weight_decay;
	(void)bc1;
	(void)bc2;
	return eng_errf(err, "%s", NOT_BUILT);
}

size_t eng_cuda_saved_bytes(const eng_cuda *g, int i)
{
	(void)g;
	(void)i;
	return 0;
}

size_t eng_cuda_offloaded_bytes(const eng_cuda *g, int i)
{
	(void)g;
	(void)i;
	return 0;
}

double eng_cuda_recompute_ms(const eng_cuda *g)
{
	(void)g;
	return 0.0;
}

int eng_cuda_get_grads(eng_cuda *g, float *out, eng_err *err)
{
	(void)g;
	(void)out;
	return eng_errf(err, "%s", NOT_BUILT);
}

int eng_cuda_get_block_input(eng_cuda *g, int l, float *out, eng_err *err)
{
	(void)g;
	(void)l;
	(void)out;
	return eng_errf(err, "%s", NOT_BUILT);
}

void eng_cuda_mem_get_stats(eng_cuda_mem_stats *st)
{
	memset(st, 0, sizeof *st);
}

void eng_cuda_mem_reset_peak(void)
{
}

void eng_cuda_mem_step_peaks(size_t *peak, size_t *total, int restart)
{
	(void)restart;
	if (peak)
		memset(peak, 0, ENG_MEM_NCAT * sizeof *peak);
	if (total)
		*total = 0;
}
