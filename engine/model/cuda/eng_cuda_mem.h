/* eng_cuda_mem.h - the GPU's tracking allocator: device memory in cudaMalloc'd arenas, by
 * the categories of eng_mem.h, and pinned host memory for offloaded activations.
 *
 * Arenas: an allocation of ENG_CUDA_ARENA_DIRECT bytes or more gets an arena of its own;
 * smaller ones share arenas of ENG_CUDA_ARENA_SMALL bytes, one set per category (first fit,
 * 256-byte aligned). An arena goes back to the device (cudaFree) as soon as its last
 * allocation is freed, so activation memory that a policy change frees is visible to other
 * processes at once: no cache keeps it. "Reserved" is the bytes of the arenas, "used" the
 * bytes asked for; device free/total come from cudaMemGetInfo at the last refresh.
 *
 * Threads: allocation and refresh on the thread that runs the GPU model (they call CUDA);
 * eng_cuda_mem_get_stats and eng_cuda_mem_reset_peak read and write atomics only, so the
 * control thread may call them at any time, also in a build without CUDA (zeros there).
 */
#ifndef ENG_CUDA_MEM_H
#define ENG_CUDA_MEM_H

#include <stddef.h>

#include "eng_mem.h"

#define ENG_CUDA_ARENA_SMALL ((size_t)2 << 20)  /* arena size for small allocations */
#define ENG_CUDA_ARENA_DIRECT ((size_t)1 << 20) /* from this size on: an arena of its own */
#define ENG_CUDA_ALIGN 256                      /* bytes; every device buffer starts there */

typedef struct eng_cuda_mem_stats {
	int active;                      /* the GPU model has allocated in this process */
	size_t current[ENG_MEM_NCAT];    /* device bytes in use, by category */
	size_t peak[ENG_MEM_NCAT];       /* highest since the process started */
	size_t peak_reset[ENG_MEM_NCAT]; /* highest since the last reset */
	size_t total_current, total_peak, total_peak_reset; /* all categories */
	size_t reserved, reserved_peak;  /* bytes of the arenas (cudaMalloc'd) */
	int arenas;                      /* how many */
	size_t pinned, pinned_peak;      /* pinned host memory of offloaded activations */
	size_t device_free, device_total; /* cudaMemGetInfo at the last refresh */
} eng_cuda_mem_stats;

/* Zeroed device memory of `bytes` (> 0), ENG_CUDA_ALIGN-aligned, or NULL when the device
 * has none left (the CUDA error is cleared). */
void *eng_cuda_mem_alloc(eng_mem_cat cat, size_t bytes);
/* Frees p (NULL: no-op); an arena left empty is returned to the device. Call it only when
 * no queued kernel uses p any more. */
void eng_cuda_mem_free(void *p);
/* Bytes asked for by device allocation p (0 for NULL). */
size_t eng_cuda_mem_size(const void *p);

/* Zeroed pinned (page-locked) host memory, or NULL. */
void *eng_cuda_host_alloc(size_t bytes);
void eng_cuda_host_free(void *p);
size_t eng_cuda_host_size(const void *p);

/* Reads cudaMemGetInfo into the counters (the thread of the GPU model). */
void eng_cuda_mem_refresh(void);

/* Any thread, no CUDA call. */
void eng_cuda_mem_get_stats(eng_cuda_mem_stats *st);
void eng_cuda_mem_reset_peak(void);
/* The device allocator's step window (eng_mem_counts_step). */
void eng_cuda_mem_step_peaks(size_t *peak, size_t *total, int restart);

#endif
