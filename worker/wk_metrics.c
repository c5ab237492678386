/* wk_metrics.c - step and eval records, and metrics.jsonl (see wk_metrics.h). */
#include "wk_metrics.h"
#include "proto.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "eng_fs.h"

double wk_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void wk_metrics_init(wk_metrics *m)
{
	m->fd = -1;
	m->failed = 0;
	m->t0 = wk_now_s();
}

int wk_metrics_open(wk_metrics *m, const char *path)
{
	eng_err e = {0};
	/* appended to: a link (symbolic or hard: its bytes are also a file elsewhere), a FIFO
	 * or another user's file is refused (eng_fs_append) */
	m->fd = eng_fs_append(path, 0644, geteuid(), &e);
	if (m->fd >= 0)
		return 0;
	fprintf(stderr, "remat-train: --metrics '%s': %s\n", path, e.msg);
	return -1;
}

void wk_metrics_adopt(wk_metrics *m, int fd)
{
	m->fd = fd;
}

void wk_metrics_close(wk_metrics *m)
{
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
}

/* Tokens trained on after `step` optimizer steps, every rank's. */
static json_int_t tokens_at(const eng_trainer *tr, int step)
{
	return (json_int_t)step * (json_int_t)eng_step_tokens(&tr->spec);
}

/* The STEP fields every run has (wk_step_json adds the all-reduce's under ranks). */
static json_t *step_fields(const eng_trainer *tr, const eng_step_stats *st, const wk_metrics *m)
{
	/* the float32 figures as the floats' shortest text (the same bits when read back) */
	return json_pack("{s:i,s:f,s:f,s:f,s:I,s:f,s:f,s:f,s:f,s:i,s:I,s:I,s:i,s:f}", "step",
		st->step, "loss", proto_f32_double(st->loss), "lr", proto_f32_double(st->lr),
		"grad_norm", proto_f32_double(st->grad_norm), "tokens", tokens_at(tr, st->step), "tokens_per_s",
		st->tokens_per_s, "step_ms", st->step_ms, "recompute_ms", st->recompute_ms,
		"blocks_forward_ms", st->blocks_forward_ms, "micro_batches", st->micro_batches, "activation_bytes",
		(json_int_t)st->activation_bytes, "peak_bytes", (json_int_t)st->peak_bytes,
		"oom_retries", st->oom_retries, "elapsed_s", wk_now_s() - m->t0);
}

json_t *wk_step_json(const eng_trainer *tr, const eng_step_stats *st, const wk_metrics *m)
{
	json_t *o = step_fields(tr, st, m);
	if (o && tr->spec.ranks > 1) { /* data parallel: the step's gradient all-reduce */
		json_object_set_new(o, "allreduce_ms", json_real(st->allreduce_ms));
		json_object_set_new(o, "allreduce_hidden_ms", json_real(st->allreduce_hidden_ms));
	}
	if (o && st->rss_peak) /* device cpu: the process's own peak in the step */
		json_object_set_new(o, "rss_peak_bytes", json_integer((json_int_t)st->rss_peak));
	if (o && (st->rss_peak || !tr->be->ops->tracked_host))
		json_object_set_new(o, "untracked_bytes", json_integer((json_int_t)st->untracked_bytes));
	return o;
}


json_t *wk_eval_json(const eng_trainer *tr, float val_loss, int batches, const wk_metrics *m)
{
	/* a loss that is not finite (a batch failed, or the model diverged) is null: JSON has
	 * no NaN */
	return json_pack("{s:i,s:o,s:I,s:I,s:f}", "step", tr->step, "val_loss",
		isfinite(val_loss) ? json_real(proto_f32_double(val_loss)) : json_null(), "val_tokens",
		(json_int_t)batches * tr->spec.batch * tr->spec.seq_len, "tokens",
		tokens_at(tr, tr->step), "elapsed_s", wk_now_s() - m->t0);
}

void wk_metrics_write(wk_metrics *m, const json_t *o)
{
	if (m->fd < 0 || !o)
		return;
	/* reals in their shortest text: lr 0.0003, not 0.00029999999999999997 */
	char *line = proto_json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	size_t n = line ? strlen(line) : 0;
	if (line) {
		line[n] = '\n'; /* the dump's NUL becomes the line's end: one write, one line */
		ssize_t w = write(m->fd, line, n + 1);
		if (w != (ssize_t)(n + 1) && !m->failed) {
			m->failed = 1;
			fprintf(stderr, "remat-train: metrics.jsonl: %s; the run goes on without it\n",
				w < 0 ? strerror(errno) : "short write");
		}
	}
	free(line);
}

void wk_metrics_change(wk_metrics *m, proto_event ev, const json_t *data)
{
	if (!m || m->fd < 0 || !data)
		return;
	json_t *o = json_pack("{s:s}", "event", proto_event_name(ev));
	if (o && json_object_update(o, (json_t *)data) == 0)
		wk_metrics_write(m, o);
	json_decref(o);
}

void wk_metrics_sync(wk_metrics *m)
{
	if (m->fd >= 0)
		fsync(m->fd);
}
