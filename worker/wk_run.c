/* wk_run.c - the worker's run: the step loop between remat-train's start and its end, and
 * what happens at each step boundary (see wk_run.h).
 */
#include "wk_run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_auto.h"
#include "eng_train_ckpt.h"
#include "eng_mem.h"
#include "eng_dp.h"
#include "proto.h"
#include "wk_dp.h"
#include "wk_metrics.h"
#include "wk_sample.h"

#define PAUSE_POLL_MS 200 /* while paused, how often signals are looked at */
#define LOG_EVERY 100     /* under rematd (--control-fd), a progress line per this many steps */

/* ---- --remat-schedule ---- */

/* 1 when item starts a schedule entry ("STEP:..."; a ':' before any '='), 0 for one more
 * item of the entry before it ("head=chunked"). */
static int starts_entry(const char *item)
{
	const char *colon = strchr(item, ':'), *eq = strchr(item, '=');
	return colon && (!eq || colon < eq);
}

/* Splits "0:off,5:full,9:h.0-1=selective,head=chunked" into entries sorted by step (stable
 * for equal steps). An item that does not start with "STEP:" continues the entry before
 * it, so a policy is written as it is printed (items joined by ','); ';' works too. */
int wk_schedule_parse(const char *arg, wk_schedule *sc)
{
	char *copy = strdup(arg), *save = NULL;
	wk_sched_entry *e = sc->e;
	int *n = &sc->n, rc = -1;
	*n = 0;
	if (!copy)
		return -1;
	for (char *it = strtok_r(copy, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
		if (!starts_entry(it)) {
			size_t len = *n ? strlen(e[*n - 1].text) : 0;
			if (*n == 0 || len + 1 + strlen(it) >= sizeof e->text) {
				fprintf(stderr, "remat-train: bad --remat-schedule entry '%.64s' "
						"(expected STEP:POLICY)\n", it);
				goto out;
			}
			snprintf(e[*n - 1].text + len, sizeof e->text - len, ",%s", it);
			continue;
		}
		char *colon = strchr(it, ':'), *end;
		if (*n >= WK_MAX_SCHEDULE) {
			fprintf(stderr, "remat-train: too many --remat-schedule entries (at most %d)\n",
				WK_MAX_SCHEDULE);
			goto out;
		}
		*colon = '\0';
		errno = 0;
		long at = strtol(it, &end, 10);
		if (errno || end == it || *end || at < 0 || at > 1000000000 ||
			strlen(colon + 1) >= sizeof e->text || !colon[1]) {
			fprintf(stderr, "remat-train: bad step '%.32s' in --remat-schedule\n", it);
			goto out;
		}
		e[*n].at = (int)at;
		snprintf(e[*n].text, sizeof e->text, "%s", colon + 1);
		(*n)++;
	}
	for (int i = 1; i < *n; i++) /* insertion sort: stable */
		for (int j = i; j > 0 && e[j - 1].at > e[j].at; j--) {
			wk_sched_entry t = e[j];
			e[j] = e[j - 1];
			e[j - 1] = t;
		}
	rc = 0;
out:
	free(copy);
	return rc;
}


/* Every --remat-schedule entry checked now, not hours into the run when it is reached:
 * 0, or 2 after saying what is wrong. */
int wk_schedule_check(const eng_trainer *tr, const wk_schedule *sc)
{
	eng_policy chk = tr->policy;
	eng_err err;
	const wk_sched_entry *sched = sc->e;
	for (int i = 0; i < sc->n; i++) {
		if (sched[i].at >= tr->spec.steps) {
			fprintf(stderr, "remat-train: --remat-schedule step %d is at or past the end of "
					"the run (steps %d)\n", sched[i].at, tr->spec.steps);
			return 2;
		}
		if (eng_policy_parse(&chk, &tr->aliases, sched[i].text, &err) < 0 ||
			eng_trainer_check_policy(tr, &chk, &err) < 0) {
			fprintf(stderr, "remat-train: --remat-schedule '%s': %s\n", sched[i].text,
				err.msg);
			return 2;
		}
	}
	return 0;
}


/* ---- the boundaries ---- */

static void print_policy(const eng_trainer *tr, int json, int from_step)
{
	if (json)
		return;
	char buf[8192];
	eng_policy_format(&tr->policy, buf, sizeof buf);
	printf("remat: from step %d: %s\n", from_step, buf);
}


/* What the control side asked for, accumulated over boundaries. */

typedef struct run_ctl {
	eng_ckpt_writer *writer; /* writes checkpoints beside training (NULL without save.dir) */
	/* the last save's outcome, written by the writer thread and read by the training
	 * thread only after eng_ckpt_writer_wait (whose mutex orders the two) */
	int last_saved;          /* step of the last checkpoint written, -1 none */
	int start_step;          /* the step the run started at (a resume's checkpoint's) */
	char last_path[ENG_PATH_LEN + 64]; /* where it went */
	char last_err[ENG_ERR_LEN];        /* why the last save failed, "" when it did not */
	int paused;
	int hold;                /* the run is done but its final save failed: it waits,
				  * paused, for a command (resume retries the save) */
	int stop, stop_save;
	char stop_name[72];      /* the name a job-stop asked the final save to have */
	wk_ctl_cmd *stops;   /* job-stop requests, answered when the run has stopped */
	const volatile sig_atomic_t *sig; /* set by SIGINT or SIGTERM */
	eng_auto autoc;          /* the memory controller (remat-auto, remat.budget) */
	eng_budget_src auto_src; /* where its budget came from */
	eng_auto_cg cg;          /* a budget from the cgroup: the kernel's count of it there */
	int has_cg;
	int pinned;              /* under the controller: a policy the user asked for is held
				  * while it fits the budget */
	size_t last_peak;        /* the last step's measured peak: the process's on the CPU
				  * (its resident bytes), the device's tracked bytes on cuda */
	/* the policy asked for (remat-set, a schedule entry, the end of a probe), the next
	 * step's once fitted to the budget and the limit (policy_want); the trainer holds the
	 * one applied. One copy: nothing else sets a policy. */
	eng_policy pending;
	int has_pending;
	int pending_at;          /* the step it was promised for */
	int pending_said;        /* a user asked: not applying it is said (REMAT_FAILED) */
	_Atomic double save_ms;  /* the last save's write (set by the writer thread), what a
				  * save without a snapshot costs the step that waits for it;
				  * 0: none yet */
	_Atomic double stall_ms; /* and its snapshot's copy (0 for a live save) */
	char auto_why[256];      /* why the controller asked for the next step's policy */
	char pin_why[256];       /* why it could not hold the policy the user asked for */
	int probe_left;          /* steps of a probe (remat-profile) still to run */
	int probe_k;             /* the probe's steps so far */
	eng_policy probe_base;   /* the policy to come back to after it */
	wk_metrics *mx;          /* metrics.jsonl (fd -1: none) and the run's clock */
	int eval_step;           /* the step of the last evaluation, -1 none */
	wk_dp_msg dpm;           /* data parallel, rank 0: what this boundary applied, for the
				  * other ranks */
	int dp_ended;            /* the other ranks know the run is over */
} run_ctl;

/* A save handed to the writer thread, and who to tell when it ends. */
typedef struct save_job {
	wk_ctl *c;
	int json;
	run_ctl *run;       /* gets the outcome */
	int step;           /* the step saved */
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
static int save_live(const eng_trainer *tr, const run_ctl *run)
{
	if (run->autoc.on)
		return !run->autoc.held;
	if (tr->gpu || !tr->spec.mem_limit)
		return 0;
	eng_mem_stats ms;
	eng_mem_get_counters(&ms);
	return ms.total_current + eng_trainer_snapshot_bytes(tr) > tr->spec.mem_limit;
}

/* Copies the state now and lets the writer thread write it while training goes on (or,
 * without room for a copy, writes the live state while training waits). When a save is
 * still being written: waits for it (wait != 0), or fails with Busy's message. */
static int save_async(eng_trainer *tr, wk_ctl *c, eng_ckpt_writer *w, const char *name,
	const wk_ctl_cmd *cmd, int json, int wait, run_ctl *run, eng_err *err)
{
	if (eng_ckpt_writer_busy(w)) {
		if (!wait)
			return eng_errf(err, "a checkpoint is being written; ask again after its "
					     "CHECKPOINT_SAVED event");
		eng_ckpt_writer_wait(w);
	}
	save_job *j = calloc(1, sizeof *j);
	eng_ckpt_snap snap;
	if (!j)
		return eng_errf(err, "out of memory");
	if (eng_trainer_sync_host(tr, err) < 0) {
		free(j);
		return -1;
	}
	/* a copy lets training go on while the writer writes; where memory cannot hold one
	 * (the controller does without it, memory.limit, or the copy was refused), the save
	 * writes the live tensors, and training waits for it */
	int live = save_live(tr, run);
	if (!live && eng_trainer_snap_take(&snap, tr, err) < 0) {
		fprintf(stderr, "remat-train: %s: the save writes from the live tensors\n", err->msg);
		live = 1;
	}
	if (live)
		eng_trainer_snap_borrow(&snap, tr);
	j->c = c;
	j->json = json;
	j->run = run;
	j->step = tr->step;
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

/* ---- a probe of the sections' costs (remat-profile) ---- */

/* The next PROTO_PROFILE_STEPS(rounds) steps cycle every section through its modes, so
 * that each cell of the cost table gets samples: in pattern k of a round (each held
 * PROTO_PROFILE_HOLD steps: the step that changes the policy is no sample), block i runs
 * mode (i + k) % 3 (off, selective, full) and the head chunked at k == 1, off else. The
 * numbers do not change: no mode changes a bit of them. */
static void probe_start(eng_trainer *tr, wk_ctl *c, run_ctl *rc, int rounds)
{
	if (!rc->probe_left)
		rc->probe_base = tr->policy;
	rc->probe_left = PROTO_PROFILE_STEPS(rounds);
	rc->probe_k = 0;
	wk_ctl_set_probe(c, tr->step + rc->probe_left);
}

/* A policy asked for from step `at` on: the next step's, once fitted (policy_want).
 * said: a user asked, and is told when it cannot be applied. */
static void ask_policy(run_ctl *rc, const eng_policy *p, int at, int said)
{
	rc->pending = *p;
	rc->has_pending = 1;
	rc->pending_at = at;
	rc->pending_said = said;
	if (rc->autoc.on) /* the controller holds it while it fits */
		rc->pinned = 1;
}

/* The policy back to what it was, the probe over. */
static void probe_end(eng_trainer *tr, wk_ctl *c, run_ctl *rc)
{
	rc->probe_left = 0;
	wk_ctl_set_probe(c, 0);
	if (!eng_policy_equal(&tr->policy, &rc->probe_base))
		ask_policy(rc, &rc->probe_base, tr->step + 1, 0);
}

/* Before a step: the probe's policy for it, when a probe runs. */
static void probe_want(const eng_trainer *tr, const run_ctl *rc, eng_policy *p)
{
	*p = tr->policy;
	int k = rc->probe_k / PROTO_PROFILE_HOLD % 3;
	for (int i = 0; i < p->n_layer; i++)
		p->block[i] = (eng_mode)((i + k) % 3);
	p->head = k == 1 ? ENG_MODE_CHUNKED : ENG_MODE_OFF;
}

/* After a step of the probe. */
static void probe_next(eng_trainer *tr, wk_ctl *c, run_ctl *rc, int json)
{
	rc->probe_k++;
	(void)json;
	if (--rc->probe_left == 0)
		probe_end(tr, c, rc);
}

/* ---- the memory controller (remat-auto) and the policy of each step ---- */

/* The run's fixed bytes as the controller counts them: the tracked fixed part, and on
 * the CPU the process's untracked term. */
static size_t fixed_bytes(const eng_trainer *tr)
{
	return eng_trainer_fixed_bytes(tr, NULL) + eng_trainer_untracked(tr);
}

/* What the control thread checks remat-set and remat-auto against: the memory terms now
 * and the controller's room. */
static void publish_memory(const eng_trainer *tr, wk_ctl *c, const run_ctl *rc)
{
	const eng_model *m = &tr->model;
	wk_ctl_memfig f = {0};
	f.tracked_fixed = eng_trainer_fixed_bytes(tr, NULL);
	f.fixed = fixed_bytes(tr);
	f.limit = tr->gpu ? 0 : tr->spec.mem_limit;
	f.room = rc->autoc.on ? eng_auto_room(&rc->autoc) : 0;
	f.least = eng_plan_least(&m->cfg, m->B, m->T, m->chunk_rows, f.fixed, NULL);
	f.snapshot = eng_trainer_snapshot_bytes(tr);
	f.save_ms = rc->save_ms;
	f.stall_ms = rc->stall_ms;
	wk_ctl_set_memfig(c, &f);
}

static void publish_auto(wk_ctl *c, const run_ctl *rc)
{
	wk_ctl_auto a = {rc->autoc.budget, rc->auto_src, rc->pinned};
	wk_ctl_set_auto(c, &a);
}

/* The controller on a budget from `step` on, or off (budget 0, for why). */
static void auto_set(wk_ctl *c, run_ctl *rc, size_t budget, eng_budget_src src, int step,
	const char *why)
{
	int was = rc->autoc.on;
	eng_err err;
	eng_auto_set(&rc->autoc, budget);
	rc->auto_src = src;
	if (rc->has_cg)
		eng_auto_cg_close(&rc->cg);
	/* under a cgroup's limit the step's peak is the cgroup's too (memory.current, and
	 * memory.peak over the step where the kernel has it) */
	rc->has_cg = budget && src == ENG_BUDGET_CGROUP && eng_auto_cg_open(&rc->cg,
		eng_auto_cgroup_root(), eng_auto_proc_cgroup(), &err) == 0;
	if (budget && src == ENG_BUDGET_CGROUP && !rc->has_cg)
		fprintf(stderr, "remat-train: remat-auto: %s: the process's own memory is measured "
				"instead\n", err.msg);
	rc->pinned = 0;
	publish_auto(c, rc);
	if (was && !budget)
		wk_ctl_event_auto(c, step, json_null(), why, 0, 0, rc->last_peak);
}

/* What a save without a snapshot adds to a step, in the costs' unit (ms when the rate is
 * known): the write the step waits for, over save.every steps; 0 while unknown. */
static double live_save_cost(const eng_trainer *tr, const run_ctl *rc, double rate)
{
	return rate > 0 ? eng_plan_live_save_cost(rc->save_ms, tr->spec.save_every) : 0.0;
}

/* The user's policy held under the budget: 1 with it in *next while its predicted peak
 * fits; 0 when it no longer does (the hold ends, and why says so). */
static int pin_holds(const eng_trainer *tr, run_ctl *rc, eng_policy *next)
{
	const eng_model *m = &tr->model;
	eng_plan pl;
	*next = rc->has_pending ? rc->pending : tr->policy;
	eng_plan_policy(&m->cfg, m->B, m->T, m->chunk_rows, next, &pl);
	size_t pred = fixed_bytes(tr) + pl.peak_bytes, room = eng_auto_room(&rc->autoc);
	size_t seen = eng_policy_equal(&tr->policy, next) ? rc->last_peak : 0;
	if (pred <= room && seen <= room) {
		snprintf(rc->auto_why, sizeof rc->auto_why, "the policy remat set asked for, held "
			 "within the budget of %.1f MiB", rc->autoc.budget / 1048576.0);
		return 1;
	}
	rc->pinned = 0;
	snprintf(rc->pin_why, sizeof rc->pin_why, "the policy remat set asked for (%.1f MiB "
		 "predicted, %.1f MiB measured) does not fit the budget of %.1f MiB (%.1f MiB "
		 "usable): the controller's choice instead", pred / 1048576.0, seen / 1048576.0,
		 rc->autoc.budget / 1048576.0, room / 1048576.0);
	return 0;
}

/* The first step under a budget runs the policy of the least memory: what the process
 * holds beyond the tracked bytes (the kernels' buffers and code for the shapes a policy
 * uses) is known only once a step has run, and the start is kept under the budget too.
 * The controller moves to a faster policy after it, by its usual rules. */
static int safe_start(const eng_trainer *tr, run_ctl *rc, eng_policy *next)
{
	const eng_model *m = &tr->model;
	eng_plan_least(&m->cfg, m->B, m->T, m->chunk_rows, fixed_bytes(tr), next);
	rc->autoc.last_change = tr->step + 1;
	rc->autoc.held = 0;
	snprintf(rc->auto_why, sizeof rc->auto_why, "budget %.1f MiB: the least memory first, "
		 "until a step has measured what the process holds beyond its counted memory",
		 rc->autoc.budget / 1048576.0);
	return !eng_policy_equal(next, &tr->policy);
}

/* Before a step: the controller's decision, on the run's fixed bytes (the untracked term
 * included), a save's snapshot as an optional term, its measured costs and what the
 * system refused: 1 with the policy it wants in *next (its reason in rc), 0 to keep the
 * policy. */
static int auto_want(const eng_trainer *tr, run_ctl *rc, eng_policy *next)
{
	const eng_model *m = &tr->model;
	eng_plan_costs pc;
	eng_plan pred;
	if (rc->pinned && pin_holds(tr, rc, next))
		return !eng_policy_equal(next, &tr->policy);
	if (!tr->last_ms) /* no step measured the process yet */
		return safe_start(tr, rc, next);
	double rate = eng_costs_rate(&m->cfg, m->B, m->T, m->chunk_rows, &tr->policy,
		tr->last_ms);
	eng_costs_plan(&tr->costs, &m->cfg, m->B, m->T, m->chunk_rows, rate, &pc, NULL);
	/* a refusal's total is tracked bytes: the process's is that and the untracked */
	size_t cap = tr->mem_cap ? tr->mem_cap + eng_trainer_untracked(tr) : 0;
	eng_plan_query q = {&m->cfg, m->B, m->T, m->chunk_rows, fixed_bytes(tr), &pc, cap,
		eng_trainer_snapshot_bytes(tr), live_save_cost(tr, rc, rate)};
	/* the last step's peak (0 when that step began with a change: step_peak) */
	size_t seen = rc->last_peak;
	int r = eng_auto_decide(&rc->autoc, &q, &tr->policy, seen, tr->step + 1, next,
		&pred, rc->auto_why, sizeof rc->auto_why); /* its plan: said after the step */
	if (r < 0)
		fprintf(stderr, "remat-train: remat-auto: %s: the least there is instead\n",
			rc->auto_why);
	return r != 0;
}

/* The next step's policy, the one way a policy reaches the trainer (which lays it out at
 * the step's start, fitted to memory.limit and what the system refused): a probe's, the
 * controller's (which holds a policy the user asked for while it fits its budget), or the
 * one asked for; 0 to keep the policy there is. *by_auto: the controller chose. */
static int policy_want(const eng_trainer *tr, run_ctl *rc, eng_policy *want, int *by_auto)
{
	*by_auto = 0;
	if (rc->has_cg) /* the step's window on the cgroup's peak begins */
		eng_auto_cg_begin(&rc->cg);
	if (rc->probe_left) {
		probe_want(tr, rc, want);
		return 1;
	}
	if (rc->autoc.on)
		return *by_auto = auto_want(tr, rc, want);
	if (!rc->has_pending)
		return 0;
	*want = rc->pending;
	return 1;
}

/* A policy asked for and not applied: the asker is told (REMAT_FAILED), and stderr. */
static void pending_failed(eng_trainer *tr, wk_ctl *c, run_ctl *rc, int step)
{
	char why[sizeof rc->auto_why + ENG_ERR_LEN + 64], text[8192];
	const eng_model *m = &tr->model;
	eng_plan pl;
	eng_plan_policy(&m->cfg, m->B, m->T, m->chunk_rows, &rc->pending, &pl);
	size_t tracked = eng_trainer_fixed_bytes(tr, NULL) + pl.peak_bytes;
	if (tr->oom_why[0])
		snprintf(why, sizeof why, "out of memory: %s", tr->oom_why);
	else if (rc->autoc.on)
		snprintf(why, sizeof why, "%s", rc->pin_why[0] ? rc->pin_why : rc->auto_why);
	else if (!tr->gpu && tr->spec.mem_limit && tracked > tr->spec.mem_limit)
		snprintf(why, sizeof why, "it needs %.1f MiB, over memory.limit %.1f MiB",
			tracked / 1048576.0, tr->spec.mem_limit / 1048576.0);
	else
		snprintf(why, sizeof why, "memory refused it earlier in the run");
	eng_policy_format(&rc->pending, text, sizeof text);
	fprintf(stderr, "remat-train: step %d: policy %s not applied: %s\n", step, text, why);
	wk_ctl_event_remat_failed(c, rc->pending_at > step ? rc->pending_at : step,
		eng_policy_json(&rc->pending), eng_policy_json(&tr->policy), why);
}

/* After a step: what changed its policy, said. `asked` is what was wanted (NULL: the
 * policy of the step before), `before` that policy. A policy asked for is consumed: said
 * applied (REMAT_APPLIED) or not (REMAT_FAILED). */
static void step_policy_said(eng_trainer *tr, wk_ctl *c, run_ctl *rc, const eng_policy *before,
	const eng_policy *asked, int by_auto, int step, int json)
{
	char why[sizeof rc->auto_why + ENG_ERR_LEN];
	int oom = tr->oom_why[0] != '\0';
	if (oom) {
		char buf[8192];
		eng_policy_format(&tr->policy, buf, sizeof buf);
		fprintf(stderr, "remat-train: step %d: out of memory (%s): %s instead\n", step,
			tr->oom_why, buf);
	}
	int same = eng_policy_equal(&tr->policy, before);
	if (rc->has_pending && !rc->probe_left) {
		int applied = eng_policy_equal(&tr->policy, &rc->pending);
		if (rc->pending_said && !applied)
			pending_failed(tr, c, rc, step);
		else if (rc->pending_said && same) /* asked for the policy there was: it is */
			wk_ctl_policy_applied(c, step);
		rc->has_pending = 0;
		publish_auto(c, rc); /* a hold may have ended */
	}
	if (same)
		return;
	wk_ctl_policy_applied(c, step);
	print_policy(tr, json, step);
	if (!rc->autoc.on)
		return;
	if (oom)
		snprintf(why, sizeof why, "out of memory: %s", tr->oom_why);
	else if (by_auto && asked && eng_policy_equal(&tr->policy, asked))
		snprintf(why, sizeof why, "%s", rc->auto_why);
	else
		snprintf(why, sizeof why, "the policy does not fit what the system refused");
	eng_plan pred;
	const eng_model *m = &tr->model;
	eng_plan_policy(&m->cfg, m->B, m->T, m->chunk_rows, &tr->policy, &pred);
	wk_ctl_event_auto(c, step, eng_policy_json(&tr->policy), why, rc->autoc.budget,
		fixed_bytes(tr) + pred.peak_bytes, rc->last_peak);
}

/* A step's measured peak: the process's resident bytes on the CPU (where known), and
 * under a budget from the cgroup the cgroup's count if more; on cuda the device's tracked
 * peak and what else its used memory held at the step's end. */
static size_t measured_peak(const eng_trainer *tr, run_ctl *rc, const eng_step_stats *st)
{
	size_t m = tr->gpu ? st->peak_bytes + st->untracked_bytes : st->rss_peak ? st->rss_peak :
		st->peak_bytes;
	size_t cg = rc->has_cg ? eng_auto_cg_peak(&rc->cg) : 0;
	return cg > m ? cg : m;
}

/* The last step's measured peak as the controller weighs it: 0 (nothing known) for a step
 * that began with a policy change, whose window opened on the layout before it. */
static size_t step_peak(const eng_trainer *tr, run_ctl *rc, const eng_step_stats *st,
	const eng_policy *before)
{
	size_t m = measured_peak(tr, rc, st);
	return eng_policy_equal(before, &tr->policy) ? m : 0;
}

/* ---- evaluation and live hyperparameters ---- */

/* The validation loss now (eval.batches of data.val from its start), recorded: a line of
 * metrics.jsonl, an EVAL event, job-status' val_loss, the line printed; the answer to
 * job-eval when cmd is one. */
static void run_eval(eng_trainer *tr, wk_ctl *c, run_ctl *run, int json,
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

/* One job-set entry, k -> v (checked by proto and the control thread), into the spec. */
static void set_one(eng_spec *s, const char *k, const json_t *v)
{
	double x = json_number_value(v);
	if (!strcmp(k, "grad_clip")) {
		s->grad_clip = (float)x;
		s->hp_set |= ENG_HP_GRAD_CLIP;
	} else if (!strcmp(k, "weight_decay")) {
		s->weight_decay = (float)x;
		s->hp_set |= ENG_HP_WEIGHT_DECAY;
	} else if (!strcmp(k, "eval.every")) {
		s->eval_every = (int)json_integer_value(v);
		s->hp_set |= ENG_HP_EVAL_EVERY;
	} else if (!strcmp(k, "save.every")) {
		s->save_every = (int)json_integer_value(v);
		s->hp_set |= ENG_HP_SAVE_EVERY;
	}
}

/* Appends {"step", "set"} to the spec's log of changes (the oldest dropped when it would
 * not fit). */
static void log_change(eng_spec *s, int step, const json_t *set)
{
	json_t *log = json_loads(s->hp_log, 0, NULL);
	if (!json_is_array(log)) {
		json_decref(log);
		log = json_array();
	}
	json_array_append_new(log, json_pack("{s:i,s:O}", "step", step, "set", set));
	for (;;) {
		char *text = json_dumps(log, JSON_COMPACT | JSON_PRESERVE_ORDER);
		if (text && strlen(text) < sizeof s->hp_log) {
			snprintf(s->hp_log, sizeof s->hp_log, "%s", text);
			free(text);
			break;
		}
		free(text);
		if (json_array_size(log) <= 1) {
			snprintf(s->hp_log, sizeof s->hp_log, "[]");
			break;
		}
		json_array_remove(log, 0);
	}
	json_decref(log);
}

/* job-set at a boundary: lr (and schedule, warmup, min_lr_frac) start a schedule of their
 * own from the next step; the rest replace the spec's values. Recorded in the spec, which
 * checkpoints write (trainer_state.json "live") and a resume takes back. */
static void apply_set(eng_trainer *tr, wk_ctl *c, const json_t *set, int json)
{
	eng_spec *s = &tr->spec;
	const char *k;
	json_t *v, *lr = json_object_get(set, "lr"), *kind = json_object_get(set, "schedule");
	if (lr || kind) {
		float now = eng_lr_at(s, tr->step); /* what the next step would have used */
		json_t *w = json_object_get(set, "warmup"), *f = json_object_get(set, "min_lr_frac");
		s->lr_new = lr ? (float)json_number_value(lr) : now;
		s->lr_kind = kind && !strcmp(json_string_value(kind), "cosine") ? ENG_SCHED_COSINE
										 : ENG_SCHED_CONSTANT;
		s->lr_warmup = w ? (int)json_integer_value(w) : 0;
		s->lr_min_frac = f ? (float)json_number_value(f) : s->min_lr_frac;
		s->lr_from = tr->step;
		s->hp_set |= ENG_HP_LR;
	}
	json_object_foreach((json_t *)set, k, v) set_one(s, k, v);
	log_change(s, tr->step + 1, set);
	if (!json)
		printf("set: from step %d: lr %.3e, grad_clip %g, weight_decay %g, eval.every %d, "
		       "save.every %d\n", tr->step + 1, eng_lr_at(s, tr->step), s->grad_clip,
			s->weight_decay, s->eval_every, s->save_every);
	json_t *hp = json_pack("{s:f,s:f,s:f,s:i,s:i}", "lr", (double)eng_lr_at(s, tr->step),
		"grad_clip", (double)s->grad_clip, "weight_decay", (double)s->weight_decay,
		"eval.every", s->eval_every, "save.every", s->save_every);
	wk_ctl_event(c, PROTO_EV_HPARAMS_APPLIED, json_pack("{s:i,s:O,s:o}", "step",
		tr->step + 1, "set", set, "now", hp));
	wk_ctl_set_hparams(c, json_deep_copy(set));
}

/* What job-set has changed in s, under job-set's names (job-status' hparams): after a
 * resume, what the checkpoint brought back. */
static json_t *live_values(const eng_spec *s)
{
	json_t *o = json_object();
	if (s->hp_set & ENG_HP_LR) {
		json_object_set_new(o, "lr", json_real(s->lr_new));
		json_object_set_new(o, "schedule", json_string(s->lr_kind == ENG_SCHED_COSINE
			? "cosine" : "constant"));
	}
	if (s->hp_set & ENG_HP_GRAD_CLIP)
		json_object_set_new(o, "grad_clip", json_real(s->grad_clip));
	if (s->hp_set & ENG_HP_WEIGHT_DECAY)
		json_object_set_new(o, "weight_decay", json_real(s->weight_decay));
	if (s->hp_set & ENG_HP_EVAL_EVERY)
		json_object_set_new(o, "eval.every", json_integer(s->eval_every));
	if (s->hp_set & ENG_HP_SAVE_EVERY)
		json_object_set_new(o, "save.every", json_integer(s->save_every));
	return o;
}

/* After a step: an evaluation and a sample when eval.every and sample.every say so (the
 * last step's come with the end). */
static void eval_due(eng_trainer *tr, wk_ctl *c, run_ctl *run, int json)
{
	const eng_spec *s = &tr->spec;
	if (tr->val.tok && s->eval_every > 0 && tr->step % s->eval_every == 0 &&
		tr->step < s->steps)
		run_eval(tr, c, run, json, NULL);
	if (s->sample_on && s->sample_every > 0 && tr->step % s->sample_every == 0 &&
		tr->step < s->steps)
		wk_sample_run(tr, c, json);
}

/* Applies commands taken at a boundary; keeps job-stop requests in rc->stops. */
static void apply_cmds(eng_trainer *tr, wk_ctl *c, wk_ctl_cmd *cmds, run_ctl *rc, int json)
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
				auto_set(c, rc, 0, ENG_BUDGET_SIZE, tr->step + 1, "off: remat set "
					 "--force gave the policy to the user");
			rc->pin_why[0] = '\0';
			ask_policy(rc, &cmd->policy, cmd->applies_at, 1);
			publish_auto(c, rc);
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
			probe_start(tr, c, rc, cmd->rounds);
			break;
		case CTL_OP_AUTO:
			auto_set(c, rc, cmd->budget, cmd->source, tr->step + 1, "off: the policy is the "
				 "user's");
			publish_memory(tr, c, rc);
			break;
		case CTL_OP_EVAL:
			run_eval(tr, c, rc, json, cmd);
			break;
		case CTL_OP_SET:
			apply_set(tr, c, cmd->set, json);
			break;
		case CTL_OP_SAVE:
			/* a name that is taken: refused before any snapshot (never a replacement) */
			if (cmd->name[0] && eng_ckpt_name_free(tr->spec.save_dir, cmd->name, &err) < 0)
				wk_ctl_reply_error(c, cmd, PROTO_ERR_INVALID_PARAMETER, err.msg);
			else if (save_async(tr, c, rc->writer, cmd->name[0] ? cmd->name : NULL, cmd,
					 json, 0, rc, &err) < 0)
				wk_ctl_reply_error(c, cmd, eng_ckpt_writer_busy(rc->writer) ?
					PROTO_ERR_BUSY : PROTO_ERR_IO_ERROR, err.msg);
			break;
		}
		wk_ctl_applied(c, cmd);
		wk_ctl_cmd_free(cmd);
	}
}

/* job-stop's reply: the step and the checkpoint saved, or, unsaved, how many steps were
 * dropped since which checkpoint (the last one written, else the one it resumed from;
 * null: none, every step of the run dropped). */
static json_t *stop_reply(const eng_trainer *tr, const run_ctl *run, const char *ckpt)
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
static int end_run(eng_trainer *tr, wk_ctl *c, run_ctl *run, int json, eng_err *err)
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
			if (save_async(tr, c, run->writer, name, NULL, json, 1, run, err) < 0)
				return -1;
			eng_ckpt_writer_wait(run->writer);
			if (run->last_saved != tr->step)
				return eng_errf(err, "%s", run->last_err);
			ckpt = run->last_path;
		}
	}
	/* a policy asked for whose step never came: the one a resume starts with */
	if (run->has_pending && run->pending_said)
		wk_ctl_policy_at_resume(c, &run->pending, tr->step + 1);
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
static void end_failed(eng_trainer *tr, wk_ctl *c, run_ctl *run, const char *why)
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
static int reach_end(eng_trainer *tr, wk_ctl *c, run_ctl *run, int json, int *ended_once)
{
	eng_err err;
	/* the last step's eval and sample, when the run reached its end: a stop or a signal
	 * wants its save now (rematd's stop timeout), not a sample first */
	int reached = !run->stop && !*run->sig;
	if (reached && tr->val.tok && !*ended_once && run->eval_step != tr->step)
		run_eval(tr, c, run, json, NULL);
	if (reached && tr->spec.sample_on && !*ended_once)
		wk_sample_run(tr, c, json);
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

/* The periodic save after a step, when one is due; one that cannot even begin is said like
 * one that failed. */
static void periodic_save(eng_trainer *tr, wk_ctl *c, run_ctl *run, int json)
{
	const eng_spec *s = &tr->spec;
	eng_err err;
	if (s->save_every <= 0 || tr->step % s->save_every != 0 || tr->step >= s->steps ||
		save_async(tr, c, run->writer, NULL, NULL, json, 1, run, &err) == 0)
		return;
	char target[ENG_PATH_LEN + 80];
	snprintf(target, sizeof target, "%s/step_%08d", s->save_dir, tr->step);
	fprintf(stderr, "remat-train: checkpoint at step %d: %s\n", tr->step, err.msg);
	wk_ctl_event_save_failed(c, target, tr->step, err.msg);
}


/* ---- the loop ---- */

/* A step that failed: said, and the run failed. Out of memory names the last checkpoint,
 * which is what the run can be resumed from. */
static void step_fatal(const eng_trainer *tr, wk_ctl *c, const run_ctl *run, const eng_err *err)
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
static void run_start(eng_trainer *tr, wk_ctl *c, run_ctl *run, const wk_run_opts *o)
{
	const eng_spec *s = &tr->spec;
	eng_err err;
	run->sig = o->stop_signal;
	run->last_saved = -1;
	run->start_step = tr->step;
	run->eval_step = -1;
	run->mx = o->metrics;
	if (s->hp_set)
		wk_ctl_set_hparams(c, live_values(s));
	if (s->remat_profile && s->device == ENG_DEVICE_CPU)
		probe_start(tr, c, run, PROTO_PROFILE_ROUNDS);
	size_t budget = s->remat_budget;
	if (s->remat_budget_cgroup && s->device != ENG_DEVICE_CPU)
		fprintf(stderr, "remat-train: remat.budget cgroup: a cgroup limits host memory, "
				"and device cuda's is the GPU's: the controller stays off\n");
	else if (s->remat_budget_cgroup && eng_auto_cgroup(eng_auto_cgroup_root(),
						  eng_auto_proc_cgroup(), &budget, &err) < 0)
		fprintf(stderr, "remat-train: remat.budget cgroup: %s: the controller stays off\n",
			err.msg);
	/* data parallel: the ranks on this host share its cgroup */
	if (s->remat_budget_cgroup && s->ranks > 1 && eng_dp_local_size() > 1)
		budget /= (size_t)eng_dp_local_size();
	if (budget)
		auto_set(c, run, budget, s->remat_budget_cgroup ? ENG_BUDGET_CGROUP : ENG_BUDGET_SIZE,
			tr->step + 1, "");
	publish_memory(tr, c, run);
}

/* A --remat-schedule entry reached: the policy it gives is asked for from the next step
 * (every entry was checked at the start, wk_schedule_check). */
static int sched_ask(const eng_trainer *tr, run_ctl *rc, const char *text)
{
	eng_err err;
	/* on top of what is asked already (an earlier entry of the same boundary) */
	eng_policy p = rc->has_pending ? rc->pending : tr->policy;
	if (eng_policy_parse(&p, &tr->aliases, text, &err) < 0) {
		fprintf(stderr, "remat-train: --remat-schedule '%s': %s\n", text, err.msg);
		return -1;
	}
	ask_policy(rc, &p, tr->step + 1, 1);
	return 0;
}

/* Data parallel, ranks but 0: each boundary as rank 0 broadcast it (its schedule entries,
 * then its commands), then the step, together; no output, no save, no evaluation, which
 * are rank 0's. Returns the exit status. */
static int follow(eng_trainer *tr, const wk_run_opts *o)
{
	run_ctl run = {0};
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
		if (m.end) { /* rank 0's exit status says how it ended */
			*o->together = 1;
			rc = 0;
			break;
		}
		eng_policy want, before = tr->policy;
		eng_step_stats st;
		int by_auto, asked = policy_want(tr, &run, &want, &by_auto);
		if (eng_trainer_step_as(tr, asked ? &want : NULL, &st, &err) < 0) {
			/* every rank failed it together: rank 0 says why, and exits so */
			fprintf(stderr, "remat-train: rank %d: %s\n", eng_dp_rank(), err.msg);
			*o->together = 1;
			rc = 0;
			goto out;
		}
		if (wk_dp_gather(tr, &st, NULL, &err) < 0)
			fprintf(stderr, "remat-train: rank %d: %s\n", eng_dp_rank(), err.msg);
		run.last_peak = step_peak(tr, &run, &st, &before);
		if (run.probe_left)
			probe_next(tr, NULL, &run, 0);
	}
out:
	if (run.has_cg)
		eng_auto_cg_close(&run.cg);
	wk_dp_free(&m);
	return rc;
}

int wk_run(eng_trainer *tr, wk_ctl *c, const wk_run_opts *o)
{
	run_ctl run = {0};
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
			int r = reach_end(tr, c, &run, o->json, &ended_once);
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
		/* the step's policy: a probe's, the controller's, or the one there is; laid out
		 * by the step itself, which retries with less when memory runs out */
		eng_policy want, before = tr->policy;
		int by_auto, asked = policy_want(tr, &run, &want, &by_auto);
		eng_step_stats st;
		if (wk_dp_send(&run.dpm, 0, 0, &err) < 0) { /* the other ranks: step, as this */
			step_fatal(tr, c, &run, &err);
			goto out;
		}
		if (eng_trainer_step_as(tr, asked ? &want : NULL, &st, &err) < 0) {
			step_fatal(tr, c, &run, &err); /* the other ranks know: the step was theirs */
			run.dp_ended = 1;
			*o->together = 1;
			goto out;
		}
		step_policy_said(tr, c, &run, &before, asked ? &want : NULL, by_auto, st.step,
			o->json);
		json_t *row = wk_step_json(tr, &st, run.mx);
		wk_metrics_write(run.mx, row);
		print_step(tr, &st, row, o->json, o->under_rematd);
		/* the ranks' counters before the STEP event: a mem-stats that follows it has them */
		if (wk_dp_gather(tr, &st, c, &err) < 0)
			fprintf(stderr, "remat-train: the ranks' counters: %s\n", err.msg);
		wk_ctl_end_step(c, &st, row);
		periodic_save(tr, c, &run, o->json);
		eval_due(tr, c, &run, o->json);
		run.last_peak = step_peak(tr, &run, &st, &before);
		publish_memory(tr, c, &run);
		if (run.probe_left)
			probe_next(tr, c, &run, o->json);
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
