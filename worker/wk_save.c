/* wk_save.c - the run's saves (see wk_run_int.h): a snapshot handed to the checkpoint
 * writer thread while training goes on, or the live tensors written while it waits when
 * memory has no room for a copy; the periodic save; the outcome told (CHECKPOINT_SAVED,
 * CHECKPOINT_FAILED, ckpt-save's answer). Not here: the checkpoint's files and the writer
 * thread (engine/io/eng_ckpt*.c), the final save's place in the end (wk_end.c).
 */
#include "wk_run_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_mem.h"
#include "eng_train_ckpt.h"
#include "proto.h"

/* A save handed to the writer thread, and who to tell when it ends. */
typedef struct save_job {
	wk_ctl *c;
	int json;
	wk_run_ctl *run;       /* gets the outcome */
	int step;           /* the step saved */
	int live;           /* written from the live tensors (no snapshot) */
	char target[ENG_PATH_LEN + 80]; /* the checkpoint directory it writes, for messages */
	int has_cmd;
	wk_ctl_cmd cmd;    /* a ckpt-save to answer: its connection and id (own reference) */
} save_job;

/* Runs on the writer thread when a save ends. */
static void on_saved(void *ud, int ok, const eng_ckpt_result *res, const char *msg)
{
	save_job *j = ud;
	snprintf(j->run->last_err, sizeof j->run->last_err, "%s", ok ? "" : msg);
	if (ok) {
		wk_metrics_sync(j->run->mx); /* the log that led to the checkpoint, on disk too */
		j->run->last_saved = res->step;
		j->run->save_ms = res->ms;
		if (!j->live) /* a snapshot's copy (a live save's stall is the whole save) */
			j->run->stall_ms = res->stall_ms;
		snprintf(j->run->last_path, sizeof j->run->last_path, "%s", res->path);
		wk_ctl_event_saved(j->c, res->path, res->step, res->bytes);
		if (!j->json)
			printf("saved %s (%.1f MiB in %.0f ms; training stalled %.1f ms)\n", res->path,
				res->bytes / 1048576.0, res->ms, res->stall_ms);
		if (res->warning[0])
			fprintf(stderr, "remat-train: checkpoint: %s\n", res->warning);
		if (j->has_cmd)
			wk_ctl_reply(j->c, &j->cmd, json_pack("{s:s,s:i,s:I,s:f,s:f}", "path",
				res->path, "step", res->step, "bytes", (json_int_t)res->bytes, "ms",
				res->ms, "stall_ms", res->stall_ms));
	} else {
		/* the run goes on with its state in memory; the failure is said, not fatal */
		fprintf(stderr, "remat-train: checkpoint at step %d: %s\n", j->step, msg);
		wk_ctl_event_save_failed(j->c, j->target, j->step, msg);
		if (j->has_cmd)
			wk_ctl_reply_error(j->c, &j->cmd, PROTO_ERR_IO_ERROR, msg);
	}
	json_decref(j->cmd.id);
	free(j);
}

/* 1 when a save must write from the live tensors, without a snapshot: the controller
 * does without one, or memory.limit has no room for one next to what the run holds. */
static int save_live(const eng_trainer *tr, const wk_run_ctl *run)
{
	if (run->autoc.on)
		return !run->autoc.held;
	if (!tr->be->ops->tracked_host || !tr->spec.mem_limit)
		return 0;
	eng_mem_stats ms;
	eng_mem_get_counters(&ms);
	return ms.total_current + eng_trainer_snapshot_bytes(tr) > tr->spec.mem_limit;
}

/* A sharded optimizer's parts gathered whole here, the other ranks told to send theirs
 * (NULLs when not sharded). */
static int save_gather(eng_trainer *tr, wk_run_ctl *run, float *moments[2], eng_err *err)
{
	moments[0] = moments[1] = NULL;
	if (tr->model.cfg.opt_shards <= 1)
		return 0;
	if (run->dp_ended)
		return eng_errf(err, "the other ranks have ended: their parts of the optimizer "
				     "cannot be saved");
	if (wk_dp_send_gather(&run->dpm, err) < 0)
		return -1;
	return eng_trainer_gather_moments(tr, moments, err);
}

/* Copies the state now and lets the writer thread write it while training goes on (or,
 * without room for a copy, writes the live state while training waits). When a save is
 * still being written: waits for it (wait != 0), or fails with Busy's message. */
int wk_save_async(eng_trainer *tr, wk_ctl *c, eng_ckpt_writer *w, const char *name,
	const wk_ctl_cmd *cmd, int json, int wait, wk_run_ctl *run, eng_err *err)
{
	if (eng_ckpt_writer_busy(w)) {
		if (!wait)
			return eng_errf(err, "a checkpoint is being written; ask again after its "
					     "CHECKPOINT_SAVED event");
		eng_ckpt_writer_wait(w);
	}
	save_job *j = calloc(1, sizeof *j);
	eng_ckpt_snap snap;
	float *moments[2];
	if (!j)
		return eng_errf(err, "out of memory");
	if (eng_trainer_sync_host(tr, err) < 0 || save_gather(tr, run, moments, err) < 0) {
		free(j);
		return -1;
	}
	/* a copy lets training go on while the writer writes; where memory cannot hold one
	 * (the controller does without it, memory.limit, or the copy was refused), the save
	 * writes the live tensors, and training waits for it */
	int live = save_live(tr, run);
	if (!live && eng_trainer_snap(&snap, tr, 0, moments, err) < 0) {
		fprintf(stderr, "remat-train: %s: the save writes from the live tensors\n", err->msg);
		live = 1;
	}
	if (live)
		eng_trainer_snap(&snap, tr, 1, moments, err);
	j->c = c;
	j->json = json;
	j->run = run;
	j->step = tr->step;
	j->live = live;
	if (name)
		snprintf(j->target, sizeof j->target, "%s/%s", tr->spec.save_dir, name);
	else
		snprintf(j->target, sizeof j->target, "%s/step_%08d", tr->spec.save_dir, tr->step);
	if (cmd) {
		j->has_cmd = 1;
		j->cmd.conn = cmd->conn;
		j->cmd.id = json_incref(cmd->id);
	}
	/* this thread is the only one submitting, and the writer was idle: it takes it */
	eng_ckpt_writer_submit(w, &snap, tr->spec.save_dir, name, tr->spec.save_keep, on_saved, j);
	if (live) /* the live tensors must not move while they are written */
		eng_ckpt_writer_wait(w);
	return 0;
}

/* The periodic save after a step, when one is due; one that cannot even begin is said like
 * one that failed. */
void wk_save_periodic(eng_trainer *tr, wk_ctl *c, wk_run_ctl *run, int json)
{
	const eng_spec *s = &tr->spec;
	eng_err err;
	if (s->save_every <= 0 || tr->step % s->save_every != 0 || tr->step >= s->steps ||
		wk_save_async(tr, c, run->writer, NULL, NULL, json, 1, run, &err) == 0)
		return;
	char target[ENG_PATH_LEN + 80];
	snprintf(target, sizeof target, "%s/step_%08d", s->save_dir, tr->step);
	fprintf(stderr, "remat-train: checkpoint at step %d: %s\n", tr->step, err.msg);
	wk_ctl_event_save_failed(c, target, tr->step, err.msg);
}
