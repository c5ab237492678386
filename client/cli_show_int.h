/* cli_show_int.h - what cli_show.c and cli_show_mem.c share: the layout of a key-value
 * line and the helpers every printer uses. Not an interface of the client's.
 */
#ifndef CLI_SHOW_INT_H
#define CLI_SHOW_INT_H

#include <jansson.h>
#include <stdio.h>

#include "cli_fmt.h"

#define KEY_WIDTH 17  /* "last checkpoint: " and its value start in one column */
#define TEXT_LEN  512 /* longest value shown on one line */

/* A string field cleaned for a terminal into buf, or dflt when missing; returns buf. */
char *cli_show__str(const json_t *obj, const char *key, const char *dflt, char *buf,
	size_t len);
/* "key:            value", the value in its column. */
void cli_show__kv(FILE *f, const char *key, const char *value);
/* Prints the table and frees it; a table that cannot be built is reported. */
void cli_show__flush(FILE *f, cli_table *t);
/* A data-parallel job's ranks (job-status's per_rank, mem-stats' ranks: an array of
 * {rank, step, step_ms, allreduce_ms, rss[, total]}) as a table, a rank a row: nothing
 * for a job of one process. */
void cli_show__ranks(FILE *f, const json_t *ranks);
/* A change rematd answered "queued" (its worker did not take it in time): 1 after saying
 * so, in place of what the change would print. */
int cli_show__queued(FILE *f, const char *job, const json_t *ret);

#endif
