/* eng_mem.h - the engine's one tracking allocator.
 *
 * Every engine allocation goes through here, tagged with a category (design.md §4). Each
 * allocation is its own anonymous mapping, 64-byte aligned and zero-filled, so freeing it
 * returns the pages to the operating system at once (RSS drops when a policy change frees
 * activations). Counters are atomics: the control thread may read them while the training
 * thread allocates. Bytes counted are the bytes asked for, not the page-rounded mapping, so
 * they can be compared with the analytic predictor; RSS shows the rest.
 *
 * Not a general-purpose malloc: meant for tensors and large buffers, a few hundred at most.
 */
#ifndef ENG_MEM_H
#define ENG_MEM_H

#include <stdatomic.h>
#include <stddef.h>

typedef enum eng_mem_cat {
	ENG_MEM_PARAMS,      /* model weights */
	ENG_MEM_GRADS,       /* their gradients */
	ENG_MEM_OPTIMIZER,   /* AdamW moments */
	ENG_MEM_ACTIVATIONS, /* saved for backward, per section */
	ENG_MEM_RECOMPUTE,   /* transient buffers of dropped activations, shared by sections */
	ENG_MEM_WORKSPACE,   /* gradient scratch and other step temporaries */
	ENG_MEM_DATA,        /* token buffers */
	ENG_MEM_NCAT
} eng_mem_cat;

typedef struct eng_mem_stats {
	size_t current[ENG_MEM_NCAT];   /* bytes allocated now */
	size_t peak[ENG_MEM_NCAT];      /* highest since the process started */
	size_t peak_reset[ENG_MEM_NCAT]; /* highest since the last eng_mem_reset_peak */
	size_t total_current, total_peak, total_peak_reset; /* all categories together */
	size_t rss, rss_peak;           /* the process's resident bytes (VmRSS) and their most
					 * since it started (VmHWM, across its step windows);
					 * 0 if unknown */
	size_t untracked;               /* rss beyond the tracked total: the binary and its
					 * libraries, thread stacks, BLAS and oneDNN buffers,
					 * allocator slack, pages rounded up */
	size_t untracked_peak, untracked_peak_reset; /* its most at a step's peak (or when
					 * read), since start and since eng_mem_reset_peak */
} eng_mem_stats;

/* Bytes by category with their peaks (since start and since a reset), and the same over all
 * categories: what an allocator counts. Lock-free, so another thread may read while one
 * allocates; a zeroed (static) one is ready. This allocator has one, the device allocator
 * (eng_cuda_mem.c) another. */
typedef struct eng_mem_counts {
	atomic_size_t current[ENG_MEM_NCAT], peak[ENG_MEM_NCAT], peak_reset[ENG_MEM_NCAT];
	atomic_size_t total, total_peak, total_peak_reset;
	atomic_size_t peak_step[ENG_MEM_NCAT], total_peak_step; /* since eng_mem_counts_step */
} eng_mem_counts;

void eng_mem_counts_add(eng_mem_counts *k, eng_mem_cat cat, size_t bytes);
void eng_mem_counts_sub(eng_mem_counts *k, eng_mem_cat cat, size_t bytes);
/* Copies the counters: current, peak, peak_reset are arrays of ENG_MEM_NCAT. */
void eng_mem_counts_read(eng_mem_counts *k, size_t *current, size_t *peak, size_t *peak_reset,
	size_t *total, size_t *total_peak, size_t *total_peak_reset);
/* The peaks since a reset start again from the current values. */
void eng_mem_counts_reset_peak(eng_mem_counts *k);
/* A step's own peak window, apart from the user's reset (mem-reset-peak): the peaks so
 * far into peak (ENG_MEM_NCAT) and *total when not NULL, then (restart) a new window from
 * the current values. */
void eng_mem_counts_step(eng_mem_counts *k, size_t *peak, size_t *total, int restart);
/* *peak = max(*peak, value), lock-free. */
void eng_mem_peak_raise(atomic_size_t *peak, size_t value);

/* Returns a zeroed, 64-byte-aligned buffer of `bytes` (> 0), or NULL when the system has no
 * memory. Free with eng_mem_free. */
void *eng_mem_alloc(eng_mem_cat cat, size_t bytes);

/* A hard limit on the bytes held in all categories together (memory.limit; 0: none): an
 * allocation that would pass it is refused (NULL), as the system would refuse one it
 * cannot serve. */
void eng_mem_set_limit(size_t bytes);

/* What the last refused allocation would have brought the total to: the bytes held then
 * plus its own (0: none refused yet). A refusal is what the run knows of its memory:
 * nothing at or above that total is known to fit. */
size_t eng_mem_refused(void);
/* The same, and forgets it: each refusal is learnt once (0: none since). */
size_t eng_mem_take_refused(void);

/* Test hook: the n-th allocation from now on (1-based, this allocator's and the device's
 * together) is refused, once, as if memory had run out; 0 turns it off. The count of
 * allocations made so far (eng_mem_allocs) lets a test find each site of a step. */
void eng_mem_fail_nth(unsigned long n);
unsigned long eng_mem_allocs(void);
/* For an allocator (this one, the device's): counts one allocation and says whether the
 * hook refuses it (1); notes a refusal of `bytes` with `held` already allocated. */
int eng_mem_hook_refuses(void);
void eng_mem_note_refused(size_t held, size_t bytes);

/* Frees a buffer from eng_mem_alloc and returns its pages to the system. NULL is a no-op. */
void eng_mem_free(void *p);

/* Bytes asked for by the allocation p (0 for NULL). */
size_t eng_mem_size(const void *p);

/* Fills *st with a consistent-enough snapshot (each counter read atomically), RSS from
 * /proc included. */
void eng_mem_get_stats(eng_mem_stats *st);
/* The same without reading /proc (rss fields 0): cheap enough for every step. */
void eng_mem_get_counters(eng_mem_stats *st);

/* The process's resident bytes now (/proc/self/statm; 0 when unreadable): what top's RES,
 * a cgroup and the OOM killer count of it, cheaply enough for every step. */
size_t eng_mem_rss(void);
/* A window on the process's peak resident bytes: *peak (when not NULL) gets the most it
 * held since the window began (VmHWM), and with restart a new window begins at the
 * resident bytes now (writing 5 to /proc/self/clear_refs). -1 when the mark could not be
 * read or reset: *peak is then since the process started (the most it could be). The
 * peak since start that eng_mem_get_stats reports survives the resets. */
int eng_mem_rss_window(size_t *peak, int restart);
/* The untracked bytes a step held at its peak (its window's peak less the tracked one):
 * raises eng_mem_stats' untracked peaks. */
void eng_mem_note_untracked(size_t bytes);

/* Starts a new "since reset" peak window at the current values. */
void eng_mem_reset_peak(void);

/* This allocator's step window (eng_mem_counts_step). */
void eng_mem_step_peaks(size_t *peak, size_t *total, int restart);

/* The allocations and frees of the calling thread go to fn while it is set (NULL: none):
 * a step's trace sees the mappings it makes (eng_memtrace.h). Per thread, so another
 * thread's allocations (a save's snapshot) never land in the training thread's trace. */
typedef void (*eng_mem_trace_fn)(void *ctx, int alloc, const void *p, size_t bytes,
	eng_mem_cat cat);
void eng_mem_trace_thread(eng_mem_trace_fn fn, void *ctx);

/* Name of a category as used in the protocol: "params", "grads", ... (inline: the planner's
 * answer in libremat-core.a names them too, without this allocator) */
static inline const char *eng_mem_cat_name(eng_mem_cat cat)
{
	static const char *const names[ENG_MEM_NCAT] = {"params", "grads", "optimizer",
		"activations", "recompute", "workspace", "data"};
	return (cat >= 0 && cat < ENG_MEM_NCAT) ? names[cat] : "unknown";
}

#endif
