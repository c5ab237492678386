/* eng_auto.h - the memory controller's decisions (remat-auto): keep a run's memory inside
 * a budget at the least cost in time, by itself. The memory is the process's (design.md §4):
 * the caller's fixed bytes hold the tracked fixed part and the measured untracked term, and
 * its measured peaks are the process's.
 *
 * At each step boundary the controller asks the planner for the fastest policy whose
 * predicted peak fits the budget less a headroom (and less what measured peaks have run
 * above the predictions so far), on the run's measured costs. It changes the policy:
 *   - at once, when the budget is new, or when the current policy's measured or predicted
 *     peak comes within the headroom of the budget (a more aggressive one);
 *   - back to a faster one only when there is room for it for AUTO_CALM steps in a row and
 *     AUTO_GAP steps have passed since the last change (hysteresis: it never flaps);
 *   - when its costs change the answer (a new best under the same rules).
 * Switching never changes the numbers, so the controller is free to try.
 *
 * Not here: where the budget comes from (a size, the worker's cgroup: eng_cgroup_limit),
 * the events (worker/wk_run.c).
 */
#ifndef ENG_AUTO_H
#define ENG_AUTO_H

#include <stddef.h>

#include "eng_err.h"
#include "eng_cgroup.h"
#include "eng_plan.h"
#include "eng_policy.h"

#define ENG_AUTO_HEADROOM 0.05 /* of the budget kept free */
#define ENG_AUTO_GAP 5         /* steps at least between two changes towards speed */
#define ENG_AUTO_CALM 3        /* steps in a row with room before going faster */

typedef struct eng_auto {
	int on;
	size_t budget;      /* bytes the run may hold: the process's on the CPU */
	int last_change;    /* step of the last change, -1 none yet */
	int calm;           /* steps in a row a faster policy had room */
	size_t margin;      /* how far measured peaks ran above the predictions */
	int held;           /* the query's optional bytes (a save's snapshot) are held under
			     * the policy decided last; 0: done without (saves write from the
			     * live tensors) */
} eng_auto;

/* The most a policy's predicted peak may be under a's budget: the budget less the
 * headroom and the margin (what measured peaks ran above the predictions). */
size_t eng_auto_room(const eng_auto *a);

/* Turns the controller on for budget (bytes) from step on, or off (budget 0). */
void eng_auto_set(eng_auto *a, size_t budget);

/* The decision before step `step` (1-based, the next one): q holds the run's shape, its
 * fixed bytes (untracked included), the optional ones (a save's snapshot: held or done
 * without, whichever is cheaper, a->held says which) and costs, and in q->budget a
 * ceiling besides the controller's own (what an allocation was refused at, in the same
 * terms; 0 none); cur is the policy now, measured_peak the last step's measured peak (0:
 * none yet; the process's on the CPU). 1 when the policy should change, with *next, its
 * plan in *pred and the reason in why; 0 to keep it; -1 when no policy fits the budget at
 * all (*next is then the least there is, why says so). */
int eng_auto_decide(eng_auto *a, const eng_plan_query *q, const eng_policy *cur,
	size_t measured_peak, int step, eng_policy *next, eng_plan *pred, char *why,
	size_t whylen);

/* The worker's cgroup's own count of its memory, for a budget from the cgroup: what the
 * kernel holds against memory.max (memory.current; and memory.peak over a step, where the
 * kernel lets a descriptor reset it, Linux 6.12). */
typedef struct eng_auto_cg {
	char dir[4096];  /* the cgroup's directory */
	int peak_fd;     /* memory.peak, -1 without one */
	int windowed;    /* the step's window on memory.peak began */
} eng_auto_cg;
/* 0 when the cgroup's memory.current can be read, -1 with err. */
int eng_auto_cg_open(eng_auto_cg *cg, const char *root, const char *proc_cgroup, eng_err *err);
/* A step begins: its window on memory.peak, where the kernel has one. */
void eng_auto_cg_begin(eng_auto_cg *cg);
/* After the step: its peak (memory.peak over the window), or memory.current now,
 * whichever is more. */
size_t eng_auto_cg_peak(eng_auto_cg *cg);
void eng_auto_cg_close(eng_auto_cg *cg); /* safe after a failed open */

#endif
