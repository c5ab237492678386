/* eng_cuda_mem.c - the GPU's tracking allocator (see eng_cuda_mem.h), and the probe of
 * what GPUs this process can use (eng_cuda_probe, eng_cuda.h). Needs the CUDA runtime
 * only: no cuBLAS, no cuDNN, so rematd can link it for daemon-info.
 *
 * Live allocations are kept in one array sorted by address: a free finds its block by
 * binary search, and the blocks of a small arena are consecutive there, so first fit walks
 * the gaps between them. A few hundred allocations at most (a model's tensors and
 * activation buffers), so linear work per allocation is nothing next to cudaMalloc.
 */
#include "eng_cuda_mem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "eng_cuda.h"
#include "eng_err.h"

typedef struct dev_arena {
	char *base;             /* cudaMalloc'd */
	size_t size;            /* bytes asked of cudaMalloc */
	int cat;                /* eng_mem_cat of everything in it */
	int direct;             /* one allocation's own arena */
	int nlive;              /* allocations in it */
	struct dev_arena *next;
} dev_arena;

typedef struct dev_block {
	char *p;                /* user pointer */
	size_t bytes;           /* asked for */
	size_t span;            /* bytes taken in the arena: bytes rounded up to the alignment */
	dev_arena *a;
} dev_block;

typedef struct host_block {
	void *p;
	size_t bytes;
} host_block;

static pthread_mutex_t mem_mu = PTHREAD_MUTEX_INITIALIZER; /* guards everything below */
static dev_arena *arenas;       /* list of live arenas */
static dev_block *blocks;       /* sorted by p */
static size_t nblocks, capblocks;
static host_block *hblocks;     /* pinned host allocations, unsorted */
static size_t nhblocks, caphblocks;

/* counters, read by any thread */
static atomic_int mem_active, mem_arenas;
static eng_mem_counts mem_counts; /* device bytes asked for, by category */
static atomic_size_t mem_reserved, mem_reserved_peak, mem_pinned, mem_pinned_peak;
static atomic_size_t mem_dev_free, mem_dev_total;

static size_t align_up(size_t n)
{
	return (n + ENG_CUDA_ALIGN - 1) / ENG_CUDA_ALIGN * ENG_CUDA_ALIGN;
}

/* index of the first block with p >= key */
static size_t block_lower(const char *key)
{
	size_t lo = 0, hi = nblocks;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if ((uintptr_t)blocks[mid].p < (uintptr_t)key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int block_insert(const dev_block *b)
{
	if (nblocks == capblocks) {
		size_t cap = capblocks ? 2 * capblocks : 64;
		dev_block *nb = realloc(blocks, cap * sizeof *nb);
		if (!nb)
			return -1;
		blocks = nb;
		capblocks = cap;
	}
	size_t i = block_lower(b->p);
	memmove(blocks + i + 1, blocks + i, (nblocks - i) * sizeof *blocks);
	blocks[i] = *b;
	nblocks++;
	return 0;
}

static dev_arena *arena_new(int cat, size_t size, int direct)
{
	dev_arena *a = calloc(1, sizeof *a);
	if (!a)
		return NULL;
	if (cudaMalloc((void **)&a->base, size) != cudaSuccess) {
		cudaGetLastError(); /* out of memory is not sticky: clear it */
		free(a);
		return NULL;
	}
	a->size = size;
	a->cat = cat;
	a->direct = direct;
	a->next = arenas;
	arenas = a;
	atomic_fetch_add(&mem_arenas, 1);
	size_t r = atomic_fetch_add(&mem_reserved, size) + size;
	eng_mem_peak_raise(&mem_reserved_peak, r);
	return a;
}

static void arena_release(dev_arena *a)
{
	for (dev_arena **pp = &arenas; *pp; pp = &(*pp)->next) {
		if (*pp == a) {
			*pp = a->next;
			break;
		}
	}
	cudaFree(a->base); /* waits for the device: nothing queued may still use it */
	atomic_fetch_sub(&mem_arenas, 1);
	atomic_fetch_sub(&mem_reserved, a->size);
	free(a);
}

/* First fit in a's gaps; NULL when span does not fit. */
static char *arena_fit(dev_arena *a, size_t span)
{
	char *cur = a->base, *end = a->base + a->size;
	for (size_t i = block_lower(a->base); i < nblocks && blocks[i].p < end; i++) {
		if ((size_t)(blocks[i].p - cur) >= span)
			return cur;
		cur = blocks[i].p + blocks[i].span;
	}
	return (size_t)(end - cur) >= span ? cur : NULL;
}

static void count_alloc(int cat, size_t bytes)
{
	atomic_store(&mem_active, 1);
	eng_mem_counts_add(&mem_counts, (eng_mem_cat)cat, bytes);
}

void *eng_cuda_mem_alloc(eng_mem_cat cat, size_t bytes)
{
	ENG_ASSERT(cat >= 0 && cat < ENG_MEM_NCAT);
	if (bytes == 0 || bytes > SIZE_MAX / 2)
		return NULL;
	size_t span = align_up(bytes);
	dev_block b = {NULL, bytes, span, NULL};
	size_t held = atomic_load(&mem_counts.total);
	if (eng_mem_hook_refuses()) {
		eng_mem_note_refused(held, bytes);
		return NULL;
	}
	pthread_mutex_lock(&mem_mu);
	if (span >= ENG_CUDA_ARENA_DIRECT) {
		b.a = arena_new(cat, span, 1);
		if (b.a)
			b.p = b.a->base;
	} else {
		for (dev_arena *a = arenas; a && !b.p; a = a->next) {
			if (a->direct || a->cat != (int)cat)
				continue;
			b.p = arena_fit(a, span);
			if (b.p)
				b.a = a;
		}
		if (!b.p && (b.a = arena_new(cat, ENG_CUDA_ARENA_SMALL, 0)))
			b.p = b.a->base;
	}
	if (b.p && block_insert(&b) < 0) {
		if (b.a->nlive == 0)
			arena_release(b.a);
		b.p = NULL;
	}
	if (b.p)
		b.a->nlive++;
	pthread_mutex_unlock(&mem_mu);
	if (!b.p) { /* cudaErrorMemoryAllocation: the event memory.limit is on the CPU */
		eng_mem_note_refused(held, bytes);
		return NULL;
	}
	count_alloc(cat, bytes);
	/* zeroed, as eng_mem gives it: the memset runs on the legacy stream, which the GPU
	 * model's non-blocking streams do not wait for, hence the synchronisation */
	if (cudaMemset(b.p, 0, bytes) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
		cudaGetLastError();
		eng_cuda_mem_free(b.p);
		return NULL;
	}
	eng_cuda_mem_refresh();
	return b.p;
}

void eng_cuda_mem_free(void *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&mem_mu);
	size_t i = block_lower(p);
	ENG_ASSERT(i < nblocks && blocks[i].p == (char *)p);
	dev_block b = blocks[i];
	memmove(blocks + i, blocks + i + 1, (nblocks - i - 1) * sizeof *blocks);
	nblocks--;
	int cat = b.a->cat;
	if (--b.a->nlive == 0)
		arena_release(b.a);
	pthread_mutex_unlock(&mem_mu);
	eng_mem_counts_sub(&mem_counts, (eng_mem_cat)cat, b.bytes);
	eng_cuda_mem_refresh();
}

size_t eng_cuda_mem_size(const void *p)
{
	if (!p)
		return 0;
	pthread_mutex_lock(&mem_mu);
	size_t i = block_lower(p);
	ENG_ASSERT(i < nblocks && blocks[i].p == (const char *)p);
	size_t n = blocks[i].bytes;
	pthread_mutex_unlock(&mem_mu);
	return n;
}

void *eng_cuda_host_alloc(size_t bytes)
{
	void *p = NULL;
	if (bytes == 0)
		return NULL;
	if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) != cudaSuccess) {
		cudaGetLastError();
		return NULL;
	}
	pthread_mutex_lock(&mem_mu);
	if (nhblocks == caphblocks) {
		size_t cap = caphblocks ? 2 * caphblocks : 64;
		host_block *nb = realloc(hblocks, cap * sizeof *nb);
		if (!nb) {
			pthread_mutex_unlock(&mem_mu);
			cudaFreeHost(p);
			return NULL;
		}
		hblocks = nb;
		caphblocks = cap;
	}
	hblocks[nhblocks].p = p;
	hblocks[nhblocks].bytes = bytes;
	nhblocks++;
	pthread_mutex_unlock(&mem_mu);
	memset(p, 0, bytes);
	size_t now = atomic_fetch_add(&mem_pinned, bytes) + bytes;
	eng_mem_peak_raise(&mem_pinned_peak, now);
	return p;
}

static size_t host_find(const void *p)
{
	for (size_t i = 0; i < nhblocks; i++)
		if (hblocks[i].p == p)
			return i;
	ENG_ASSERT(!"pinned block not found");
	return 0;
}

void eng_cuda_host_free(void *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&mem_mu);
	size_t i = host_find(p);
	size_t bytes = hblocks[i].bytes;
	hblocks[i] = hblocks[--nhblocks];
	pthread_mutex_unlock(&mem_mu);
	cudaFreeHost(p);
	atomic_fetch_sub(&mem_pinned, bytes);
}

size_t eng_cuda_host_size(const void *p)
{
	if (!p)
		return 0;
	pthread_mutex_lock(&mem_mu);
	size_t n = hblocks[host_find(p)].bytes;
	pthread_mutex_unlock(&mem_mu);
	return n;
}

void eng_cuda_mem_refresh(void)
{
	size_t fr = 0, tot = 0;
	if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
		cudaGetLastError();
		return;
	}
	atomic_store(&mem_dev_free, fr);
	atomic_store(&mem_dev_total, tot);
}

void eng_cuda_mem_get_stats(eng_cuda_mem_stats *st)
{
	memset(st, 0, sizeof *st);
	st->active = atomic_load(&mem_active);
	eng_mem_counts_read(&mem_counts, st->current, st->peak, st->peak_reset, &st->total_current,
		&st->total_peak, &st->total_peak_reset);
	st->reserved = atomic_load(&mem_reserved);
	st->reserved_peak = atomic_load(&mem_reserved_peak);
	st->arenas = atomic_load(&mem_arenas);
	st->pinned = atomic_load(&mem_pinned);
	st->pinned_peak = atomic_load(&mem_pinned_peak);
	st->device_free = atomic_load(&mem_dev_free);
	st->device_total = atomic_load(&mem_dev_total);
}

void eng_cuda_mem_reset_peak(void)
{
	eng_mem_counts_reset_peak(&mem_counts);
}

void eng_cuda_mem_step_peaks(size_t *peak, size_t *total, int restart)
{
	eng_mem_counts_step(&mem_counts, peak, total, restart);
}

/* ---- probe ---- */

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static eng_cuda_info probe_info;

static void probe_run(void)
{
	eng_cuda_info *in = &probe_info;
	int rt = 0, drv = 0, n = 0;
	in->built = 1;
	cudaRuntimeGetVersion(&rt);
	cudaDriverGetVersion(&drv); /* 0 when no driver is installed */
	snprintf(in->runtime, sizeof in->runtime, "CUDA runtime %d.%d, driver %d.%d", rt / 1000,
		rt % 1000 / 10, drv / 1000, drv % 1000 / 10);
	if (drv == 0) {
		snprintf(in->why, sizeof in->why, "no CUDA driver (libcuda.so.1 could not be loaded)");
		return;
	}
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		snprintf(in->why, sizeof in->why, "no usable CUDA device: %s",
			cudaGetErrorString(e));
		cudaGetLastError();
		return;
	}
	if (n == 0) {
		snprintf(in->why, sizeof in->why, "no CUDA device found");
		return;
	}
	for (int i = 0; i < n && in->ngpus < ENG_CUDA_MAX_GPUS; i++) {
		struct cudaDeviceProp p;
		if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
			cudaGetLastError();
			continue;
		}
		eng_cuda_gpu *g = &in->gpu[in->ngpus++];
		g->device = i;
		snprintf(g->name, sizeof g->name, "%.*s", (int)sizeof g->name - 1, p.name);
		g->memory_bytes = p.totalGlobalMem;
		g->cc_major = p.major;
		g->cc_minor = p.minor;
	}
	if (in->ngpus == 0)
		snprintf(in->why, sizeof in->why, "no CUDA device could be queried");
}

void eng_cuda_probe(eng_cuda_info *out)
{
	pthread_once(&probe_once, probe_run);
	*out = probe_info;
}
