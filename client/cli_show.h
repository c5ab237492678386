/* cli_show.h - rematctl's human output: one function per kind of reply, tables and
 * "key: value" lines with sizes in KiB/MiB/GiB (docs/protocol.md names the fields).
 *
 * Each takes the reply's "return" object (borrowed) and writes to f. Missing or wrongly
 * typed fields show as "-" and unknown fields are ignored, so a newer server never breaks
 * an older client. Not here: --json output (the caller prints the object as it is).
 */
#ifndef CLI_SHOW_H
#define CLI_SHOW_H

#include <jansson.h>
#include <stdio.h>

/* Every printer has this shape: job names the job in one-line results ("j1", or "job" on a
 * worker's socket when it was left out); printers of whole replies ignore it. */
typedef void cli_show_fn(FILE *f, const char *job, const json_t *ret);

cli_show_fn cli_show_list;	/* job-list: a table */
cli_show_fn cli_show_status;	/* job-status: key: value lines */
cli_show_fn cli_show_remat_get; /* remat-get: policy, aliases, a table of sections */
cli_show_fn cli_show_mem;	/* mem-stats: categories, sections, RSS */
cli_show_fn cli_show_info;	/* daemon-info: key: value lines */
cli_show_fn cli_show_start;	/* job-start: the new job's id alone */
cli_show_fn cli_show_pause;	/* one-line results */
cli_show_fn cli_show_resume;
cli_show_fn cli_show_remove;
cli_show_fn cli_show_eval;	/* job-eval: the validation loss */
cli_show_fn cli_show_set;	/* job-set: what applies from which step */
cli_show_fn cli_show_stop;
cli_show_fn cli_show_kill;
cli_show_fn cli_show_remat_set;
cli_show_fn cli_show_costs;   /* remat-costs: the measured cost table */
cli_show_fn cli_show_profile; /* remat-profile: the steps it measures */
cli_show_fn cli_show_auto;    /* remat-auto: the budget kept, or off */
cli_show_fn cli_show_memlog;  /* remat-memlog: peaks per step by category, sections */
cli_show_fn cli_show_save;
cli_show_fn cli_show_reset;
cli_show_fn cli_show_shutdown;
/* remat-plan: a table of sections, totals, and with a budget (bytes; < 0 when none was
 * asked for) whether the policy fits */
void cli_show_plan(FILE *f, const json_t *ret, long long budget);

/* Helpers shared with cli_watch.c: a JSON number as text with printf format fmt, or "-"
 * when key is missing or not a number; a size field likewise. Return buf. */
char *cli_show_num(const json_t *obj, const char *key, const char *fmt, char *buf, size_t len);
char *cli_show_size(const json_t *obj, const char *key, char *buf, size_t len);
/* A job's state as the user reads it (status, ls, watch): its "state", or, while it is
 * starting and its text data is being tokenized, "tokenizing 41 %" ("tokenizing val 41 %"
 * for data.val's), cleaned for a terminal. Returns buf. */
char *cli_show_state(const json_t *obj, char *buf, size_t len);
/* A size field in MiB whatever its size (cli_mib_format), or "-". Returns buf. */
char *cli_show_mib(const json_t *obj, const char *key, char *buf, size_t len);

/* The memory categories in the order people read them (design.md §4), NULL-terminated. */
extern const char *const cli_mem_categories[];

#endif
