/* wk_end.c - evaluations and the run's end (see wk_run_int.h): the validation loss when
 * eval.every or job-eval asks, and the end (finished, job-stop, a signal): the last
 * evaluation and sample, the final save, job-stop answered, the final state; a final save
 * that failed keeps the run, paused, while a controller can still act. Not here: the loop
 * that gets there (wk_run.c).
 */
#include "wk_run_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "wk_sample.h"

/* The validation loss now (eval.batches of data.val from its start), recorded: a line of
 * metrics.jsonl, an EVAL event, job-status' val_loss, the line printed; the answer to
 * job-eval when cmd is one. */
void wk_end_eval(eng_trainer *tr, wk_ctl *c, wk_run_ctl *run, int json,
	const wk_ctl_cmd *cmd)
{
	const eng_spec *s = &tr->spec;
	int fit = (int)(tr->val.nsamples < (size_t)INT32_MAX ? tr->val.nsamples : INT32_MAX);
	int used = s->eval_batches > 0 && s->eval_batches < fit ? s->eval_batches : fit;
	float v = eng_trainer_val_loss(tr, s->eval_batches);
	json_t *row = wk_eval_json(tr, v, used, run->mx);
	run->eval_step = tr->step;
	wk_metrics_write(run->mx, row);
	if (json) {
		char *line = proto_json_dumps(row, JSON_COMPACT | JSON_PRESERVE_ORDER);
		printf("%s\n", line ? line : "{}");
		free(line);
	} else {
		printf("val loss %.6f (after step %d, %d batches of %d x %d)\n", v, tr->step, used,
			s->batch, s->seq_len);
	}
	if (!row) { /* out of memory */
		if (cmd)
			wk_ctl_reply_error(c, cmd, PROTO_ERR_INTERNAL, "out of memory");
		return;
	}
	if (cmd)
		wk_ctl_reply(c, cmd, json_deep_copy(row));
	wk_ctl_event_eval(c, row);
}

/* After a step: an evaluation and a sample when eval.every and sample.every say so (the
 * last step's come with the end). */
void wk_end_eval_due(eng_trainer *tr, wk_ctl *c, wk_run_ctl *run, int json)
{
	const eng_spec *s = &tr->spec;
	if (eng_data_opened(&tr->val) && s->eval_every > 0 && tr->step % s->eval_every == 0 &&
		tr->step < s->steps)
		wk_end_eval(tr, c, run, json, NULL);
	if (s->sample_on && s->sample_every > 0 && tr->step % s->sample_every == 0 &&
		tr->step < s->steps)
		wk_sample_run(tr, c, run->mx, json);
}

/* job-stop's reply: the step and the checkpoint saved, or, unsaved, how many steps were
 * dropped since which checkpoint (the last one written, else the one it resumed from;
 * null: none, every step of the run dropped). */
static json_t *stop_reply(const eng_trainer *tr, const wk_run_ctl *run, const char *ckpt)
{
	if (ckpt)
		return json_pack("{s:i,s:s}", "step", tr->step, "checkpoint", ckpt);
	const char *since = run->last_saved >= 0 ? run->last_path :
			    tr->spec.resume ? tr->spec.init_from : NULL;
	int from = run->last_saved >= 0 ? run->last_saved : tr->spec.resume ? run->start_step : 0;
	return json_pack("{s:i,s:n,s:i,s:s?}", "step", tr->step, "checkpoint", "dropped_steps",
		tr->step - from, "since_checkpoint", since);
}

/* The end of the run: finished, stopped by job-stop, or interrupted by a signal. A stop
 * saves unless told not to; the end of the run and a signal save whenever save.dir is set.
 * Returns 0 once it has ended (the final state set, job-stop answered), or -1 when the
 * final save failed (the message in err): then nothing has ended, and the caller decides
 * whether the run can go on. */
static int end_run(eng_trainer *tr, wk_ctl *c, wk_run_ctl *run, int json, eng_err *err)
{
	const eng_spec *s = &tr->spec;
	int want_save = run->stop ? run->stop_save : s->save_dir[0] != 0;
	const char *ckpt = NULL, *name = run->stop && run->stop_name[0] ? run->stop_name : NULL;
	if (run->stop)
		wk_ctl_set_state(c, CTL_STOPPING, "job-stop");
	eng_ckpt_writer_wait(run->writer);
	if (want_save) {
		/* the writer thread writes it, as every save; a save of this very step that has
		 * just been written (a periodic one) is not written again, unless a name is
		 * asked for */
		if (!s->save_dir[0]) {
			return eng_errf(err, "the job has no save.dir");
		} else if (run->last_saved == tr->step && !name) {
			ckpt = run->last_path;
		} else {
			run->last_saved = -1;
			if (wk_save_async(tr, c, run->writer, name, NULL, json, 1, run, err) < 0)
				return -1;
			eng_ckpt_writer_wait(run->writer);
			if (run->last_saved != tr->step)
				return eng_errf(err, "%s", run->last_err);
			ckpt = run->last_path;
		}
	}
	/* a policy asked for whose step never came: the one a resume starts with */
	if (run->has_pending && run->pending_said)
		wk_ctl_policy_at_resume(c, &run->pending, tr->step + 1, run->pending_cause,
			run->pending_change);
	for (wk_ctl_cmd *k = run->stops; k; k = k->next)
		wk_ctl_reply(c, k, stop_reply(tr, run, ckpt));
	if (run->stop || *run->sig)
		wk_ctl_set_state(c, CTL_STOPPED, run->stop ? "job-stop" : "signal");
	else
		wk_ctl_set_state(c, CTL_FINISHED, "reached the last step");
	return 0;
}

/* The final save failed and a controller can still act: job-stop gets the error, and the
 * run goes on as it was (running, or paused), or holds, paused, when it was done. */
static void end_failed(eng_trainer *tr, wk_ctl *c, wk_run_ctl *run, const char *why)
{
	char msg[ENG_ERR_LEN + 256], reason[ENG_ERR_LEN + 128];
	int done = tr->step >= tr->spec.steps;
	snprintf(msg, sizeof msg, "the final save failed: %s; the job goes on%s with its state "
		"in memory: free space (or fix the save directory) and ask again", why,
		done || run->paused ? ", paused," : "");
	for (wk_ctl_cmd *k = run->stops; k; k = k->next)
		wk_ctl_reply_error(c, k, PROTO_ERR_IO_ERROR, msg);
	wk_ctl_cmd_free(run->stops);
	run->stops = NULL;
	run->stop = run->stop_save = 0;
	run->stop_name[0] = '\0';
	if (done) {
		run->paused = run->hold = 1;
		snprintf(reason, sizeof reason, "trained to the last step, but the final save failed: "
			"%s; resume or stop --save tries again", why);
	} else {
		snprintf(reason, sizeof reason, "the final save failed: %s", why);
	}
	wk_ctl_set_state(c, run->paused ? CTL_PAUSED : CTL_RUNNING, reason);
}

/* The run reached its end or was asked to stop: 1 once it has ended; 0 when it goes on
 * (its final save failed and a controller can still act); -1 when it failed (said). */
int wk_end_reach(eng_trainer *tr, wk_ctl *c, wk_run_ctl *run, int json, int *ended_once)
{
	eng_err err;
	/* the last step's eval and sample, when the run reached its end: a stop or a signal
	 * wants its save now (rematd's stop timeout), not a sample first */
	int reached = !run->stop && !*run->sig;
	if (reached && eng_data_opened(&tr->val) && !*ended_once && run->eval_step != tr->step)
		wk_end_eval(tr, c, run, json, NULL);
	if (reached && tr->spec.sample_on && !*ended_once)
		wk_sample_run(tr, c, run->mx, json);
	*ended_once = 1;
	if (end_run(tr, c, run, json, &err) == 0)
		return 1;
	/* without a controller, under a signal, or once rematd is gone (no one could ever
	 * ask again, and the run would hold its save directory's lock against the resume a
	 * restarted rematd offers), the process must end, and says so; with one the run is
	 * kept */
	fprintf(stderr, "remat-train: %s\n", err.msg);
	if (!c || *run->sig || wk_ctl_unreachable(c)) {
		for (wk_ctl_cmd *k = run->stops; k; k = k->next)
			wk_ctl_reply_error(c, k, PROTO_ERR_IO_ERROR, err.msg);
		wk_ctl_set_state(c, CTL_FAILED, err.msg);
		return -1;
	}
	end_failed(tr, c, run, err.msg);
	return 0;
}
