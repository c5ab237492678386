/* eng_mem.c - the tracking allocator (see eng_mem.h).
 *
 * Each allocation is one anonymous mmap: a 64-byte header (size, category, mapping length)
 * followed by the user's bytes, so the user pointer is 64-byte aligned and munmap gives the
 * pages back to the kernel immediately. glibc's malloc would keep large freed blocks once
 * its mmap threshold has adapted upwards, and RSS would not drop after a policy change.
 */
#include "eng_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "eng_err.h"

#define MEM_HEADER 64         /* header bytes before the user pointer; keeps 64-byte alignment */
#define MEM_MAGIC 0x72656d6174ULL /* "remat": catches frees of foreign pointers */
#define MEM_HUGE (4u << 20)       /* from this size on, ask for transparent huge pages */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23    /* Linux 5.14: fault the pages in, writable */
#endif

typedef struct mem_header {
	uint64_t magic;   /* MEM_MAGIC while the block is live */
	size_t bytes;     /* asked for */
	size_t mapped;    /* length of the mapping, header included */
	int cat;          /* eng_mem_cat */
} mem_header;

static eng_mem_counts mem_counts; /* this allocator's */

void eng_mem_peak_raise(atomic_size_t *peak, size_t value)
{
	size_t old = atomic_load(peak);
	while (value > old && !atomic_compare_exchange_weak(peak, &old, value))
		;
}

void eng_mem_counts_add(eng_mem_counts *k, eng_mem_cat cat, size_t bytes)
{
	size_t now = atomic_fetch_add(&k->current[cat], bytes) + bytes;
	eng_mem_peak_raise(&k->peak[cat], now);
	eng_mem_peak_raise(&k->peak_reset[cat], now);
	eng_mem_peak_raise(&k->peak_step[cat], now);
	size_t tot = atomic_fetch_add(&k->total, bytes) + bytes;
	eng_mem_peak_raise(&k->total_peak, tot);
	eng_mem_peak_raise(&k->total_peak_reset, tot);
	eng_mem_peak_raise(&k->total_peak_step, tot);
}

void eng_mem_counts_step(eng_mem_counts *k, size_t *peak, size_t *total, int restart)
{
	for (int c = 0; c < ENG_MEM_NCAT; c++) {
		if (peak)
			peak[c] = atomic_load(&k->peak_step[c]);
		if (restart)
			atomic_store(&k->peak_step[c], atomic_load(&k->current[c]));
	}
	if (total)
		*total = atomic_load(&k->total_peak_step);
	if (restart)
		atomic_store(&k->total_peak_step, atomic_load(&k->total));
}

void eng_mem_counts_sub(eng_mem_counts *k, eng_mem_cat cat, size_t bytes)
{
	atomic_fetch_sub(&k->current[cat], bytes);
	atomic_fetch_sub(&k->total, bytes);
}

void eng_mem_counts_read(eng_mem_counts *k, size_t *current, size_t *peak, size_t *peak_reset,
	size_t *total, size_t *total_peak, size_t *total_peak_reset)
{
	for (int c = 0; c < ENG_MEM_NCAT; c++) {
		current[c] = atomic_load(&k->current[c]);
		peak[c] = atomic_load(&k->peak[c]);
		peak_reset[c] = atomic_load(&k->peak_reset[c]);
	}
	*total = atomic_load(&k->total);
	*total_peak = atomic_load(&k->total_peak);
	*total_peak_reset = atomic_load(&k->total_peak_reset);
}

void eng_mem_counts_reset_peak(eng_mem_counts *k)
{
	for (int c = 0; c < ENG_MEM_NCAT; c++)
		atomic_store(&k->peak_reset[c], atomic_load(&k->current[c]));
	atomic_store(&k->total_peak_reset, atomic_load(&k->total));
}

static atomic_size_t mem_limit; /* 0: none */

void eng_mem_set_limit(size_t bytes)
{
	atomic_store(&mem_limit, bytes);
}

static _Thread_local eng_mem_trace_fn trace_fn; /* eng_mem_trace_thread */
static _Thread_local void *trace_ctx;

void eng_mem_trace_thread(eng_mem_trace_fn fn, void *ctx)
{
	trace_fn = fn;
	trace_ctx = ctx;
}

static atomic_size_t mem_refused;     /* eng_mem_refused */
static atomic_ulong mem_allocs;      /* allocations asked for so far */
static atomic_ulong mem_fail_at;     /* the hook: the allocation number refused, 0 none */

size_t eng_mem_refused(void)
{
	return atomic_load(&mem_refused);
}

size_t eng_mem_take_refused(void)
{
	return atomic_exchange(&mem_refused, 0);
}

void eng_mem_fail_nth(unsigned long n)
{
	atomic_store(&mem_fail_at, n ? atomic_load(&mem_allocs) + n : 0);
}

unsigned long eng_mem_allocs(void)
{
	return atomic_load(&mem_allocs);
}

int eng_mem_hook_refuses(void)
{
	unsigned long k = atomic_fetch_add(&mem_allocs, 1) + 1;
	unsigned long at = k;
	return atomic_compare_exchange_strong(&mem_fail_at, &at, 0);
}

void eng_mem_note_refused(size_t held, size_t bytes)
{
	atomic_store(&mem_refused, bytes > SIZE_MAX - held ? SIZE_MAX : held + bytes);
}

void *eng_mem_alloc(eng_mem_cat cat, size_t bytes)
{
	ENG_ASSERT(cat >= 0 && cat < ENG_MEM_NCAT);
	if (bytes == 0 || bytes > SIZE_MAX - 2 * MEM_HEADER)
		return NULL;
	/* a hard limit refuses as a GPU does at its capacity (the training thread allocates
	 * alone, so the check and the count cannot race another allocation) */
	size_t limit = atomic_load(&mem_limit), held = atomic_load(&mem_counts.total);
	void *base = MAP_FAILED;
	size_t mapped = bytes + MEM_HEADER;
	if (!eng_mem_hook_refuses() && !(limit && (bytes > limit || held > limit - bytes)))
		base = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED) {
		eng_mem_note_refused(held, bytes);
		return NULL;
	}
	/* 2 MiB pages where the kernel allows them (THP "madvise" mode is Debian's default):
	 * first-touch faults of a large buffer cost a 512th as many traps. Advice only: a
	 * kernel without THP ignores it. */
	if (bytes >= MEM_HUGE)
		madvise(base, mapped, MADV_HUGEPAGE);
	/* the pages now (Linux 5.14 on; advice only before): a new buffer's first touch is
	 * the allocation's cost, not the first step's after a policy change, whose sections'
	 * times the cost table takes as that policy's */
	if (madvise(base, mapped, MADV_POPULATE_WRITE) < 0 && errno == ENOMEM) {
		munmap(base, mapped); /* refused now rather than killed at the first touch */
		eng_mem_note_refused(held, bytes);
		return NULL;
	}
	mem_header *h = base;
	h->magic = MEM_MAGIC;
	h->bytes = bytes;
	h->mapped = mapped;
	h->cat = cat;
	eng_mem_counts_add(&mem_counts, cat, bytes);
	if (trace_fn)
		trace_fn(trace_ctx, 1, (char *)base + MEM_HEADER, bytes, cat);
	return (char *)base + MEM_HEADER;
}

void eng_mem_free(void *p)
{
	if (!p)
		return;
	mem_header *h = (mem_header *)((char *)p - MEM_HEADER);
	ENG_ASSERT(h->magic == MEM_MAGIC);
	h->magic = 0;
	if (trace_fn)
		trace_fn(trace_ctx, 0, p, h->bytes, (eng_mem_cat)h->cat);
	eng_mem_counts_sub(&mem_counts, h->cat, h->bytes);
	munmap(h, h->mapped);
}

size_t eng_mem_size(const void *p)
{
	if (!p)
		return 0;
	const mem_header *h = (const mem_header *)((const char *)p - MEM_HEADER);
	ENG_ASSERT(h->magic == MEM_MAGIC);
	return h->bytes;
}

/* ---- the process's resident memory ---- */

/* The most VmHWM said before each reset of it (a step window's start): the peak since the
 * process started, which VmHWM alone no longer is once reset. */
static atomic_size_t rss_life_peak;
/* The most untracked bytes a step held at its peak (eng_mem_note_untracked): since start,
 * and since the last eng_mem_reset_peak. */
static atomic_size_t untracked_peak, untracked_peak_reset;

/* Reads "VmRSS:" and "VmHWM:" (kB) from /proc/self/status; zeros when unreadable. */
static void mem_read_rss(size_t *rss, size_t *hwm)
{
	*rss = *hwm = 0;
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return;
	char line[256];
	unsigned long kb;
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "VmRSS: %lu kB", &kb) == 1)
			*rss = (size_t)kb * 1024;
		else if (sscanf(line, "VmHWM: %lu kB", &kb) == 1)
			*hwm = (size_t)kb * 1024;
	}
	fclose(f);
}

size_t eng_mem_rss(void)
{
	/* statm's second field: resident pages (cheaper than status: one number) */
	unsigned long size, resident;
	FILE *f = fopen("/proc/self/statm", "r");
	int ok = f && fscanf(f, "%lu %lu", &size, &resident) == 2;
	if (f)
		fclose(f);
	return ok ? (size_t)resident * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

int eng_mem_rss_window(size_t *peak, int restart)
{
	size_t rss, hwm;
	mem_read_rss(&rss, &hwm);
	if (peak)
		*peak = hwm;
	eng_mem_peak_raise(&rss_life_peak, hwm);
	if (!restart)
		return hwm ? 0 : -1;
	/* "5" resets the high-water mark to the resident set now (Linux 4.0, proc(5)) */
	int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
	int ok = fd >= 0 && write(fd, "5", 1) == 1;
	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

void eng_mem_note_untracked(size_t bytes)
{
	eng_mem_peak_raise(&untracked_peak, bytes);
	eng_mem_peak_raise(&untracked_peak_reset, bytes);
}

void eng_mem_get_stats(eng_mem_stats *st)
{
	eng_mem_get_counters(st);
	mem_read_rss(&st->rss, &st->rss_peak);
	size_t life = atomic_load(&rss_life_peak);
	if (life > st->rss_peak)
		st->rss_peak = life;
	st->untracked = st->rss > st->total_current ? st->rss - st->total_current : 0;
	eng_mem_note_untracked(st->untracked);
	st->untracked_peak = atomic_load(&untracked_peak);
	st->untracked_peak_reset = atomic_load(&untracked_peak_reset);
}

void eng_mem_get_counters(eng_mem_stats *st)
{
	memset(st, 0, sizeof *st);
	eng_mem_counts_read(&mem_counts, st->current, st->peak, st->peak_reset, &st->total_current,
		&st->total_peak, &st->total_peak_reset);
}

void eng_mem_reset_peak(void)
{
	eng_mem_counts_reset_peak(&mem_counts);
	atomic_store(&untracked_peak_reset, 0);
}

void eng_mem_step_peaks(size_t *peak, size_t *total, int restart)
{
	eng_mem_counts_step(&mem_counts, peak, total, restart);
}
