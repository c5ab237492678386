/* wk_run.c - the worker's run: the step loop between remat-train's start and its end, and
 * what happens at each step boundary (see wk_run.h): the schedule's entries due, the
 * commands the control thread queued, the end, else one step and what follows it. Not
 * here: the policy of each step (wk_policy.c), saves (wk_save.c), evaluations and the end
 * (wk_end.c), --remat-schedule's parsing (wk_schedule.c).
 */
#include "wk_run_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_ckpt.h"
#include "eng_dp.h"
#include "eng_hparam.h"
#include "eng_mem.h"
#include "eng_train_ckpt.h"
#include "proto.h"
#include "wk_dp.h"
#include "wk_metrics.h"
#include "wk_sample.h"

#define PAUSE_POLL_MS 200 /* while paused, how often signals are looked at */
#define LOG_EVERY 100     /* under rematd (--control-fd), a progress line per this many steps */

/* job-set at a boundary (eng_trainer_set: the live hyperparameters' one table), said: the
 * line printed, HPARAMS_APPLIED with the values now (also a line of metrics.jsonl),
 * job-status' hparams. */
static void apply_set(eng_trainer *tr, wk_ctl *c, wk_metrics *mx, const json_t *set,
	int change, int json)
{
	const eng_spec *s = &tr->spec;
	eng_err err;
	char line[512];
	if (eng_trainer_set(tr, set, &err) < 0) { /* the control thread checked it: never */
		fprintf(stderr, "remat-train: job-set: %s\n", err.msg);
		return;
	}
	/* the rate the next step uses, and every value that is not the schedule's */
	double lr = eng_lr_at(s, tr->step);
	json_t *hp = json_pack("{s:f}", "lr", lr);
	size_t n = (size_t)snprintf(line, sizeof line, "set: from step %d: lr %.3e", tr->step + 1,
		lr);
	for (int h = 0; h < PROTO_HP_COUNT; h++) {
		if (eng_hparam_field_of((proto_hparam)h)->set == ENG_HP_LR)
			continue;
		const char *name = proto_hparam_name((proto_hparam)h);
		json_t *v = eng_hparam_get(s, (proto_hparam)h);
		if (n < sizeof line)
			n += (size_t)snprintf(line + n, sizeof line - n, json_is_integer(v) ? ", %s %.0f"
				: ", %s %g", name, json_number_value(v));
		json_object_set_new(hp, name, v);
	}
	if (!json)
		printf("%s\n", line);
	json_t *ev = json_pack("{s:i,s:O,s:o,s:i}", "step", tr->step + 1, "set", set, "now", hp,
		"change", change);
	wk_metrics_change(mx, PROTO_EV_HPARAMS_APPLIED, ev);
	wk_ctl_event(c, PROTO_EV_HPARAMS_APPLIED, ev);
	wk_ctl_set_hparams(c, json_deep_copy(set));
}

/* Applies commands taken at a boundary; keeps job-stop requests in rc->stops. */
static void apply_cmds(eng_trainer *tr, wk_ctl *c, wk_ctl_cmd *cmds, wk_run_ctl *rc, int json)
{
	eng_err err;
	while (cmds) {
		wk_ctl_cmd *cmd = cmds;
		cmds = cmds->next;
		cmd->next = NULL;
		/* what every rank applies goes to the others before the next step */
		if ((cmd->op == CTL_OP_POLICY || cmd->op == CTL_OP_SET || cmd->op == CTL_OP_PROFILE ||
			    cmd->op == CTL_OP_AUTO) && wk_dp_note(&rc->dpm, cmd) < 0) {
			/* applied here and not there, the ranks would part: the job cannot go on */
			fprintf(stderr, "remat-train: out of memory for the other ranks' commands\n");
			eng_dp_abort(1);
		}
		switch (cmd->op) {
		case CTL_OP_POLICY:
			/* with force the controller lets go; else it holds the policy within its
			 * budget (the control thread refused one that does not fit) */
			if (cmd->force && rc->autoc.on)
				wk_policy_auto(c, rc, 0, ENG_BUDGET_SIZE, tr->step + 1, "off: remat set "
					 "--force gave the policy to the user");
			rc->pin_why[0] = '\0';
			wk_policy_ask(rc, &cmd->policy, cmd->applies_at, PROTO_CAUSE_SET,
				cmd->change);
			wk_policy_publish_auto(c, rc);
			break;
		case CTL_OP_PAUSE:
			rc->paused = 1;
			wk_ctl_set_state(c, CTL_PAUSED, "job-pause");
			break;
		case CTL_OP_RESUME:
			rc->paused = 0;
			rc->hold = 0; /* a run held after a failed final save tries that save again */
			wk_ctl_set_state(c, CTL_RUNNING, "job-resume");
			break;
		case CTL_OP_STOP:
			/* a final save under a name that is taken would fail at the end: refused now */
			if (cmd->save && cmd->name[0] && eng_ckpt_name_free(tr->spec.save_dir,
								cmd->name, &err) < 0) {
				wk_ctl_reply_error(c, cmd, PROTO_ERR_INVALID_PARAMETER, err.msg);
				break;
			}
			rc->stop = 1;
			rc->stop_save |= cmd->save;
			if (cmd->save && cmd->name[0])
				snprintf(rc->stop_name, sizeof rc->stop_name, "%s", cmd->name);
			cmd->next = rc->stops;
			rc->stops = cmd;
			continue; /* answered at the end */
		case CTL_OP_PROFILE:
			wk_policy_probe(tr, c, rc, cmd->rounds);
			break;
		case CTL_OP_AUTO:
			wk_policy_auto(c, rc, cmd->budget, cmd->source, tr->step + 1, "off: the policy is the "
				 "user's");
			wk_policy_publish_memory(tr, c, rc);
			if (rc->paused) /* the memory back now, not at the resume */
				wk_policy_paused(tr, c, rc);
			break;
		case CTL_OP_EVAL:
			wk_end_eval(tr, c, rc, json, cmd);
			break;
		case CTL_OP_SET:
			apply_set(tr, c, rc->mx, cmd->set, cmd->change, json);
			break;
		case CTL_OP_SAVE:
			/* a name that is taken: refused before any snapshot (never a replacement) */
			if (cmd->name[0] && eng_ckpt_name_free(tr->spec.save_dir, cmd->name, &err) < 0)
				wk_ctl_reply_error(c, cmd, PROTO_ERR_INVALID_PARAMETER, err.msg);
			else if (wk_save_async(tr, c, rc->writer, cmd->name[0] ? cmd->name : NULL, cmd,
					 json, 0, rc, &err) < 0)
				wk_ctl_reply_error(c, cmd, eng_ckpt_writer_busy(rc->writer) ?
					PROTO_ERR_BUSY : PROTO_ERR_IO_ERROR, err.msg);
			break;
		}
		wk_ctl_applied(c, cmd);
		wk_ctl_cmd_free(cmd);
	}
}

/* A step's line: with --json its row (wk_step_json) and the process's RSS and the policy,
 * else the progress line (under rematd, whose log it is, one in LOG_EVERY). */
static void print_step(const eng_trainer *tr, const eng_step_stats *st, const json_t *row,
	int json, int under_rematd)
{
	const eng_spec *s = &tr->spec;
	if (json) {
		eng_mem_stats ms;
		eng_mem_get_stats(&ms); /* RSS for the JSON line only */
		json_t *o = json_deep_copy(row);
		json_object_set_new(o, "rss", json_integer((json_int_t)ms.rss));
		json_object_set_new(o, "rss_peak", json_integer((json_int_t)ms.rss_peak));
		json_object_set_new(o, "policy", eng_policy_json(&tr->policy));
		char *line = proto_json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
		printf("%s\n", line ? line : "{}");
		free(line);
		json_decref(o);
	} else if (!under_rematd || st->step % LOG_EVERY == 0 || st->step == s->steps) {
		printf("step %6d/%d | loss %.6f | lr %.3e | %8.0f tok/s | %9.1f ms (recompute "
		       "%.1f) | act %.1f MiB\n", st->step, s->steps, st->loss, st->lr,
			st->tokens_per_s, st->step_ms, st->recompute_ms,
			st->activation_bytes / 1048576.0);
	}
}

/* A step that failed: said, and the run failed. Out of memory names the last checkpoint,
 * which is what the run can be resumed from. */
static void step_fatal(const eng_trainer *tr, wk_ctl *c, const wk_run_ctl *run,
	const eng_err *err)
{
	char msg[ENG_ERR_LEN + ENG_PATH_LEN + 128];
	eng_ckpt_writer_wait(run->writer); /* a save in progress is the last checkpoint */
	if (err->kind != ENG_ERR_NOMEM || !tr->spec.save_dir[0])
		snprintf(msg, sizeof msg, "%s", err->msg);
	else if (run->last_saved >= 0)
		snprintf(msg, sizeof msg, "%s; the last checkpoint is '%s' (step %d)", err->msg,
			run->last_path, run->last_saved);
	else if (tr->spec.resume)
		snprintf(msg, sizeof msg, "%s; the last checkpoint is the one it resumed from, "
			"'%s'", err->msg, tr->spec.init_from);
	else
		snprintf(msg, sizeof msg, "%s; no checkpoint was saved", err->msg);
	fprintf(stderr, "remat-train: %s\n", msg);
	wk_ctl_set_state(c, CTL_FAILED, msg);
}

/* The run's start, on every rank: the spec's probe and memory controller (each rank keeps
 * itself under the budget: policies change no bit, so the ranks' may differ). */
static void run_start(eng_trainer *tr, wk_ctl *c, wk_run_ctl *run, const wk_run_opts *o)
{
	const eng_spec *s = &tr->spec;
	eng_err err;
	run->sig = o->stop_signal;
	run->last_saved = -1;
	run->start_step = tr->step;
	run->eval_step = -1;
	run->mx = o->metrics;
	if (s->live.set)
		wk_ctl_set_hparams(c, eng_hparam_changed(s));
	if (s->remat_profile && eng_backend_has_sections(tr->be)) /* it times sections */
		wk_policy_probe(tr, c, run, PROTO_PROFILE_ROUNDS);
	size_t budget = s->remat_budget;
	if (s->remat_budget_cgroup && !tr->be->ops->tracked_host)
		fprintf(stderr, "remat-train: remat.budget cgroup: a cgroup limits host memory, "
				"and device cuda's is the GPU's: the controller stays off\n");
	else if (s->remat_budget_cgroup && eng_cgroup_limit(eng_cgroup_root(),
						  eng_cgroup_proc(), &budget, &err) < 0)
		fprintf(stderr, "remat-train: remat.budget cgroup: %s: the controller stays off\n",
			err.msg);
	/* data parallel: the ranks on this host share its cgroup */
	if (s->remat_budget_cgroup && s->ranks > 1 && eng_dp_local_size() > 1)
		budget /= (size_t)eng_dp_local_size();
	if (budget)
		wk_policy_auto(c, run, budget, s->remat_budget_cgroup ? ENG_BUDGET_CGROUP : ENG_BUDGET_SIZE,
			tr->step + 1, "");
	wk_policy_publish_memory(tr, c, run);
}

/* A --remat-schedule entry reached: the policy it gives is asked for from the next step
 * (every entry was checked at the start, wk_schedule_check). */
static int sched_ask(const eng_trainer *tr, wk_run_ctl *rc, const char *text)
{
	eng_err err;
	/* on top of what is asked already (an earlier entry of the same boundary) */
	eng_policy p = rc->has_pending ? rc->pending : tr->policy;
	if (eng_policy_parse(&p, &tr->aliases, text, &err) < 0) {
		fprintf(stderr, "remat-train: --remat-schedule '%s': %s\n", text, err.msg);
		return -1;
	}
	wk_policy_ask(rc, &p, tr->step + 1, PROTO_CAUSE_SCHEDULE, 0);
	return 0;
}

/* Data parallel, ranks but 0: each boundary as rank 0 broadcast it (its schedule entries,
 * then its commands), then the step, together; no output, no save, no evaluation, which
 * are rank 0's. Returns the exit status. */
static int follow(eng_trainer *tr, const wk_run_opts *o)
{
	wk_run_ctl run = {0};
	wk_dp_msg m = {0};
	eng_err err;
	int next = 0, rc = 1;
	const wk_schedule *sc = o->sched;
	run_start(tr, NULL, &run, o);
	for (;;) {
		for (; sc && next < sc->n && sc->e[next].at <= tr->step; next++)
			if (sched_ask(tr, &run, sc->e[next].text) < 0)
				goto out;
		if (wk_dp_recv(&m, &err) < 0) {
			fprintf(stderr, "remat-train: rank %d: %s\n", eng_dp_rank(), err.msg);
			goto out;
		}
		apply_cmds(tr, NULL, wk_dp_cmds(&m), &run, 0);
		if (m.gather) { /* rank 0 saves: this rank's part of the optimizer to it */
			float *none[2];
			if (eng_trainer_gather_moments(tr, none, &err) < 0)
				fprintf(stderr, "remat-train: rank %d: %s\n", eng_dp_rank(),
					err.msg);
			continue;
		}
		if (m.end) { /* rank 0's exit status says how it ended */
			*o->together = 1;
			rc = 0;
			break;
		}
		eng_policy want, before = tr->policy;
		eng_step_stats st;
		int by_auto, asked = wk_policy_want(tr, &run, &want, &by_auto);
		if (eng_trainer_step_as(tr, asked ? &want : NULL, &st, &err) < 0) {
			/* every rank failed it together: rank 0 says why, and exits so */
			fprintf(stderr, "remat-train: rank %d: %s\n", eng_dp_rank(), err.msg);
			*o->together = 1;
			rc = 0;
			goto out;
		}
		if (wk_dp_gather(tr, &st, NULL, &err) < 0)
			fprintf(stderr, "remat-train: rank %d: %s\n", eng_dp_rank(), err.msg);
		run.last_peak = wk_policy_step_peak(tr, &run, &st, &before);
		if (run.probe_left)
			wk_policy_probe_next(tr, NULL, &run, 0);
	}
out:
	if (run.has_cg)
		eng_auto_cg_close(&run.cg);
	wk_dp_free(&m);
	return rc;
}

/* One step and what follows it, on rank 0: its policy, the step (the other ranks told to
 * take it with this one), its line and STEP event, the periodic save, an evaluation; -1
 * when the step failed (said: the run has failed). */
static int run_step(eng_trainer *tr, wk_ctl *c, wk_run_ctl *run, const wk_run_opts *o)
{
	eng_err err;
	/* the step's policy: a probe's, the controller's, or the one there is; laid out
	 * by the step itself, which retries with less when memory runs out */
	eng_policy want, before = tr->policy;
	int by_auto, asked = wk_policy_want(tr, run, &want, &by_auto);
	eng_step_stats st;
	if (wk_dp_send(&run->dpm, 0, 0, &err) < 0) { /* the other ranks: step, as this */
		step_fatal(tr, c, run, &err);
		return -1;
	}
	if (eng_trainer_step_as(tr, asked ? &want : NULL, &st, &err) < 0) {
		step_fatal(tr, c, run, &err); /* the other ranks know: the step was theirs */
		run->dp_ended = 1;
		*o->together = 1;
		return -1;
	}
	wk_policy_said(tr, c, run, &before, asked ? &want : NULL, by_auto, st.step,
		o->json);
	json_t *row = wk_step_json(tr, &st, run->mx);
	wk_metrics_write(run->mx, row);
	print_step(tr, &st, row, o->json, o->under_rematd);
	/* the ranks' counters before the STEP event: a mem-stats that follows it has them */
	if (wk_dp_gather(tr, &st, c, &err) < 0)
		fprintf(stderr, "remat-train: the ranks' counters: %s\n", err.msg);
	wk_ctl_end_step(c, &st, row);
	wk_save_periodic(tr, c, run, o->json);
	wk_end_eval_due(tr, c, run, o->json);
	run->last_peak = wk_policy_step_peak(tr, run, &st, &before);
	wk_policy_publish_memory(tr, c, run);
	if (run->probe_left)
		wk_policy_probe_next(tr, c, run, o->json);
	return 0;
}

int wk_run(eng_trainer *tr, wk_ctl *c, const wk_run_opts *o)
{
	wk_run_ctl run = {0};
	eng_err err;
	int rc = 1;
	const eng_spec *s = &tr->spec;
	const wk_schedule *sc = o->sched;
	if (eng_dp_rank() > 0)
		return follow(tr, o);
	run_start(tr, c, &run, o);
	if (s->save_dir[0] && !(run.writer = eng_ckpt_writer_start())) {
		fprintf(stderr, "remat-train: cannot start the checkpoint writer thread\n");
		return 1;
	}
	int next = 0, ended_once = 0;
	for (;;) {
		for (; sc && next < sc->n && sc->e[next].at <= tr->step; next++)
			if (sched_ask(tr, &run, sc->e[next].text) < 0)
				goto out;
		apply_cmds(tr, c, wk_ctl_take(c), &run, o->json);
		if (run.stop || *run.sig || (tr->step >= s->steps && !run.hold)) {
			int r = wk_end_reach(tr, c, &run, o->json, &ended_once);
			if (r < 0)
				goto out;
			if (r > 0)
				break;
			continue;
		}
		if (run.paused) {
			apply_cmds(tr, c, wk_ctl_wait(c, PAUSE_POLL_MS), &run, o->json);
			continue;
		}
		if (!wk_ctl_begin_step(c))
			continue; /* a command came in since the take: apply it first */
		if (run_step(tr, c, &run, o) < 0)
			goto out;
	}
	if (*run.sig && !run.stop) {
		fprintf(stderr, "remat-train: interrupted after step %d\n", tr->step);
		rc = 130;
		goto out;
	}
	rc = 0;
out:
	/* the other ranks end with this one (after a step that failed they know already) */
	if (!run.dp_ended && wk_dp_send(&run.dpm, 1, rc != 0 && rc != 130, &err) < 0)
		fprintf(stderr, "remat-train: telling the other ranks: %s\n", err.msg);
	else
		*o->together = 1;
	wk_dp_free(&run.dpm);
	if (run.has_cg)
		eng_auto_cg_close(&run.cg);
	wk_ctl_cmd_free(run.stops);
	eng_ckpt_writer_stop(run.writer); /* a save in progress is finished, never cut */
	return rc;
}
