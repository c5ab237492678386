/* cli_watch.h - `rematctl watch JOB`: a live view of one job, fed by its events.
 *
 * On a terminal the view redraws in place (ANSI cursor home, clear to end): state, step,
 * loss, tokens/s, step time, the policy per section with saved bytes, and memory per
 * category as bars scaled to the largest. Elsewhere (a pipe, a file) it prints one plain
 * line per update, and with --json one compact JSON object per update, so that scripts and
 * tests can read it. Not here: connecting (the caller hands in an open connection).
 */
#ifndef CLI_WATCH_H
#define CLI_WATCH_H

#include "cli_conn.h"

typedef struct cli_watch_opts {
	const char *job;   /* job id, or NULL on a worker's own socket (--control) */
	double interval_s; /* how often mem-stats is polled (default 1 s) */
	long count;	   /* exit after this many updates; 0: until the job ends */
	int json;	   /* 1: one JSON object per update instead of a line */
	int timeout_ms;	   /* longest wait for one reply */
} cli_watch_opts;

/* Subscribes to the job's events and shows updates until the job reaches a final state
 * (finished, stopped, failed), count updates were shown, or *c->stop is set by a signal
 * (the view's cursor is restored). Returns an exit status: CLI_EXIT_OK when the job
 * finished or stopped, when count was reached or on a signal; CLI_EXIT_FAIL when the job
 * failed or a query got an error reply about the job; CLI_EXIT_CONN when the connection
 * broke. Errors are printed to stderr. */
int cli_watch_run(cli_conn *c, const cli_watch_opts *o);

#endif
