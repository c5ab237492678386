/* eng_backend.c - what eng_backend.h's callers share whichever backend runs: the table of
 * a device's backend, whether it is usable, the free, the helpers that check an optional
 * op once, and the device allocator's counters. Not here: the backends themselves
 * (eng_backend_cpu.c, cuda/eng_backend_cuda.c).
 */
#include "eng_backend.h"

#include <stddef.h>

#include "eng_cuda.h"

void eng_backend_free(eng_backend *be)
{
	if (be)
		be->ops->destroy(be);
}

const eng_backend_ops *eng_backend_ops_for(eng_device d)
{
	return d == ENG_DEVICE_CUDA ? &eng_backend_cuda_ops : &eng_backend_cpu_ops;
}

int eng_backend_usable(eng_device d, eng_err *err)
{
	eng_cuda_info info;
	if (d != ENG_DEVICE_CUDA)
		return 0;
	eng_cuda_probe(&info);
	if (info.ngpus == 0)
		return eng_errf(err, "device 'cuda' is not available: %s", info.why);
	return 0;
}

int eng_backend_has_sections(const eng_backend *be)
{
	return be->ops->section_ms != NULL;
}

int eng_backend_sync_host(eng_backend *be, eng_err *err)
{
	return be->ops->download ? be->ops->download(be, err) : 0;
}

int eng_backend_sync_device(eng_backend *be, eng_err *err)
{
	return be->ops->upload ? be->ops->upload(be, err) : 0;
}

void eng_backend_step_end(eng_backend *be)
{
	if (be->ops->step_end)
		be->ops->step_end(be);
}

void eng_backend_device_mem(eng_device_mem *st)
{
	eng_cuda_mem_get_stats(st);
}

void eng_backend_device_mem_reset_peak(void)
{
	eng_cuda_mem_reset_peak();
}
