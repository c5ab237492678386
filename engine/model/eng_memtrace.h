/* eng_memtrace.h - one step's memory timeline, for people who would rather look than read.
 *
 * A trace holds the events of one step, in time order:
 *   - live/dead: a buffer of a section starts or stops holding what the step needs (block
 *     l's saved activations from its forward to the end of its backward; the recompute
 *     pool's buffers while block l rebuilds into them, in its forward and again in its
 *     backward; the head's from its forward to its backward's end). Memory that every step
 *     holds (weights, gradients, moments, workspace, data) is live from the start, one
 *     event a category;
 *   - map/unmap: the mappings the step itself makes and gives back (a policy change at its
 *     start, the attention scratch), from the allocator (eng_mem_trace_thread);
 *   - begin/end of each section's forward, recompute and backward.
 * Exported as the snapshot PyTorch's memory viewer reads (the dict that
 * torch.cuda.memory._dump_snapshot pickles: "segments" and "device_traces" with alloc and
 * free_completed actions, each with its frames: the viewer's Active Memory Timeline) or as
 * a Chrome trace (chrome://tracing, ui.perfetto.dev: a counter of live bytes by category,
 * a slice for each section's pass, an instant for each mapping).
 *
 * Bounded: at most cap events; later ones are counted in `dropped`, never allocated. Not
 * thread-safe: the training thread writes one, the control thread reads a copy.
 */
#ifndef ENG_MEMTRACE_H
#define ENG_MEMTRACE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "eng_mem.h"

#define ENG_MEMTRACE_CAP 6000 /* events of one step: 48 blocks under off, twice over */

typedef enum eng_mt_kind {
	ENG_MT_LIVE,   /* a buffer starts holding what the step needs */
	ENG_MT_DEAD,   /* and stops */
	ENG_MT_MAP,    /* the allocator maps memory (a new buffer) */
	ENG_MT_UNMAP,  /* and gives it back */
	ENG_MT_BEGIN,  /* a section's pass begins (field: 0 forward, 1 recompute, 2 backward) */
	ENG_MT_END,
} eng_mt_kind;

typedef struct eng_mt_ev {
	double t_us;         /* since the step began */
	uintptr_t addr;      /* the buffer (0 for passes) */
	size_t size;         /* bytes */
	unsigned char kind;  /* eng_mt_kind */
	unsigned char cat;   /* eng_mem_cat */
	short section;       /* block index, n_layer for the head, -1: none */
	short field;         /* the block or head field (eng_acts.h), the pass, or -1 */
} eng_mt_ev;

typedef struct eng_memtrace {
	eng_mt_ev *ev;       /* cap events (malloc'd: bookkeeping, not a tensor) */
	int n, cap, dropped;
	int step;            /* the step traced, 0: none yet */
	int n_layer;
	double t0_ms;        /* CLOCK_MONOTONIC at the step's start */
} eng_memtrace;

/* 0, or -1 when there is no memory for cap events. */
int eng_memtrace_init(eng_memtrace *t, int cap);
void eng_memtrace_free(eng_memtrace *t); /* safe on a zeroed one */

/* Starts step `step` afresh (its events replace the last step's). */
void eng_memtrace_begin(eng_memtrace *t, int step, int n_layer);

/* One event now. */
void eng_memtrace_add(eng_memtrace *t, eng_mt_kind kind, const void *p, size_t size,
	eng_mem_cat cat, int section, int field);

/* a and b trade places (buffers and all): how a step's trace is handed to a reader at
 * each step boundary without copying it; the other becomes the next step's to fill. */
void eng_memtrace_swap(eng_memtrace *a, eng_memtrace *b);

/* An eng_mem_trace_fn: the calling thread's mappings into ctx (an eng_memtrace). */
void eng_memtrace_on_alloc(void *ctx, int alloc, const void *p, size_t bytes, eng_mem_cat cat);

/* The snapshot PyTorch's memory viewer reads, and the Chrome trace (new references; NULL
 * when out of memory). by_section merges what one section makes live or dead at once
 * (its saved buffers, its pool buffers) into one buffer of their summed size, and the
 * Chrome counter into one sample: about a tenth of the events, for a step too large for
 * the protocol's line otherwise. */
json_t *eng_memtrace_pytorch(const eng_memtrace *t, int by_section);
json_t *eng_memtrace_chrome(const eng_memtrace *t, int by_section);

#endif
