/* wk_metrics.h - the run's records: the fields of a step and of an eval, as one table for
 * the STEP and EVAL events, remat-train --json and metrics.jsonl; and metrics.jsonl itself.
 *
 * metrics.jsonl holds every step and every eval, one JSON object a line, unthrottled, and
 * every change of a setting where it took effect and every sample: a line with "event"
 * (the protocol's event name: REMAT_APPLIED, HPARAMS_APPLIED, SAMPLE) and that event's
 * fields, so that a plot of the log marks what changed, and logs shows the samples, from
 * the log alone:
 * under rematd in the job's directory (rematd opens it, --metrics-fd), or where remat-train
 * --metrics FILE says. Each line is written whole with one write(2) on an O_APPEND
 * descriptor; the file is fsynced when a checkpoint has been written, so that what a
 * checkpoint resumes from is on disk with the log that led to it.
 */
#ifndef WK_METRICS_H
#define WK_METRICS_H

#include <jansson.h>

#include "eng_train.h"
#include "proto.h"

typedef struct wk_metrics {
	int fd;            /* -1: no file */
	int failed;        /* a write failed (said once) */
	double t0;         /* CLOCK_MONOTONIC seconds at the run's start (elapsed_s) */
} wk_metrics;

/* Seconds of CLOCK_MONOTONIC. */
double wk_now_s(void);

/* No file, the clock started. */
void wk_metrics_init(wk_metrics *m);
/* Appends to path, created 0644 when missing, never through a link: 0, or -1 said on
 * stderr. */
int wk_metrics_open(wk_metrics *m, const char *path);
/* Takes an open descriptor (rematd's). */
void wk_metrics_adopt(wk_metrics *m, int fd);
void wk_metrics_close(wk_metrics *m);

/* A step's fields: step, loss, lr, grad_norm, tokens (trained so far: step x grad_accum x
 * B x T), tokens_per_s, step_ms, recompute_ms, micro_batches, activation_bytes, peak_bytes,
 * oom_retries, elapsed_s (since the run's start in this process). */
json_t *wk_step_json(const eng_trainer *tr, const eng_step_stats *st, const wk_metrics *m);
/* An eval's: step, val_loss, val_tokens (evaluated), tokens (trained so far), elapsed_s. */
json_t *wk_eval_json(const eng_trainer *tr, float val_loss, int batches, const wk_metrics *m);

/* One line of o (borrowed) to the file, when there is one. */
void wk_metrics_write(wk_metrics *m, const json_t *o);
/* A setting changed (REMAT_APPLIED, HPARAMS_APPLIED) or a sample was drawn (SAMPLE): the
 * event's data (borrowed, with its "step") as one line with "event" first; m NULL
 * (another rank): nothing. */
void wk_metrics_change(wk_metrics *m, proto_event ev, const json_t *data);
/* fsync, when there is a file. */
void wk_metrics_sync(wk_metrics *m);

#endif
