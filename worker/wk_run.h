/* wk_run.h - the worker's run: from a trainer that is ready to the end of the job.
 *
 * One loop, each pass a step boundary: the --remat-schedule entries now due, the commands
 * the control thread queued (remat-set, pause and resume, ckpt-save, job-stop), the end
 * (steps done, job-stop, SIGINT/SIGTERM: the final save, the final state), else one step,
 * its periodic save (on the checkpoint writer thread, beside training) and its line.
 * A save that fails never ends the run; a final save that fails keeps it, paused, when a
 * controller can still act (resume retries). Not here: the command line, the spec, the
 * control server (wk_main.c, wk_ctl.c).
 */
#ifndef WK_RUN_H
#define WK_RUN_H

#include <signal.h>

#include "wk_ctl.h"
#include "eng_train.h"
#include "wk_metrics.h"

#define WK_MAX_SCHEDULE 64 /* entries of --remat-schedule */

typedef struct wk_sched_entry {
	int at;          /* completed steps when it applies */
	char text[512];  /* the policy text */
} wk_sched_entry;

typedef struct wk_schedule {
	int n;
	wk_sched_entry e[WK_MAX_SCHEDULE]; /* by step, stable for equal steps */
} wk_schedule;

/* Splits "0:off,5:full,9:h.0-1=selective,head=chunked" into entries: an entry S:P applies
 * once S steps are done; an item without "STEP:" continues the entry before it. 0, or -1
 * after saying what is wrong on stderr. */
int wk_schedule_parse(const char *arg, wk_schedule *sc);

/* Every entry checked against the run now, not hours in when it is reached: 0, or 2 (the
 * exit status) after saying what is wrong. */
int wk_schedule_check(const eng_trainer *tr, const wk_schedule *sc);

typedef struct wk_run_opts {
	int json;                              /* one JSON object per step */
	int under_rematd;                      /* --control-fd: rematd's log, one line in 100 */
	const wk_schedule *sched;              /* NULL: none */
	const volatile sig_atomic_t *stop_signal; /* non-zero once SIGINT or SIGTERM came */
	wk_metrics *metrics;                   /* every step and eval (fd -1: no file) */
	int *together;                         /* out, data parallel: 1 when every rank knows
						* the run is over (no rank waits in a
						* collective for this one) */
} wk_run_opts;

/* Trains tr (initialised, its policy laid out) under controller c (NULL: alone) to the end.
 * Returns the exit status: 0 finished or stopped, 1 failed (said on stderr and to c), 130
 * interrupted by a signal. */
int wk_run(eng_trainer *tr, wk_ctl *c, const wk_run_opts *o);

#endif
