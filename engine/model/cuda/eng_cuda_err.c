/* eng_cuda_err.c - a CUDA runtime or kernel library failure as the engine's error: below
 * every other file of the GPU model (eng_cuda.c, eng_cuda_step.c, eng_cuda_mem.c,
 * eng_cuda_dp.c), which all report through it.
 */
#include "eng_cuda_int.h"

int ec_cuda_check(int cuda_error, const char *what, eng_err *err)
{
	if (cuda_error == cudaSuccess)
		return 0;
	if (cuda_error == cudaErrorMemoryAllocation) /* the same event as a refusal */
		return eng_err_nomem(err, "cuda: %s: %s", what,
			cudaGetErrorString((cudaError_t)cuda_error));
	return eng_errf(err, "cuda: %s: %s", what, cudaGetErrorString((cudaError_t)cuda_error));
}

int ec_kc_fail(const char *what, eng_err *err)
{
	return eng_errf(err, "cuda: %s: %s", what, kc_error());
}
