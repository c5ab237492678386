/* cli_logs.h - rematctl logs and rematctl plot: a job's metrics.jsonl, through rematd's
 * job-metrics (page by page from a byte offset), printed, followed, or drawn (cli_plot.h).
 */
#ifndef CLI_LOGS_H
#define CLI_LOGS_H

#include "cli_cmd.h"
#include "cli_conn.h"

#define CLI_LOGS_POLL_S 1.0 /* logs -f: how often it asks for more (--interval) */
#define CLI_PLOT_COLS 72    /* plot: the text plot's area, character cells */
#define CLI_PLOT_ROWS 16
#define CLI_PNG_W 960       /* plot --png, --svg: the image's size */
#define CLI_PNG_H 600

/* rematctl logs JOB [-f]: every line so far, as JSON lines; with -f (follow) it goes on
 * printing new ones until the job has ended (or --count lines). An exit status. */
int cli_logs_run(cli_conn *c, const cli_args *a);

/* rematctl plot JOB [--png FILE] [--svg FILE]: the training and validation loss, tokens/s
 * and peak memory against the step, as braille text; with --png or --svg (or both) the
 * loss as an image, marked where the log shows a resume or a policy change. An exit
 * status. */
int cli_plot_run(cli_conn *c, const cli_args *a);

#endif
