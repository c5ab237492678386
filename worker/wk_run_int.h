/* wk_run_int.h - what the run's files share inside the worker, bottom up: wk_policy.c
 * (the policy of each step), wk_save.c (saves), wk_end.c (evaluations and the end), and
 * wk_run.c (the loop), which alone calls into all three; no file calls one above it
 * (tests/circles.sh). Not an interface of the worker's: wk_run.h is.
 */
#ifndef WK_RUN_INT_H
#define WK_RUN_INT_H

#include "eng_auto.h"
#include "eng_ckpt.h"
#include "wk_dp.h"
#include "wk_run.h"

typedef struct wk_run_ctl {
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
	proto_cause pending_cause; /* who asked, and the change number of its request (0:
				    * none), as the event that applies it says */
	int pending_change;
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
} wk_run_ctl;

/* ---- wk_policy.c ---- */

/* A probe of the sections' costs over the next PROTO_PROFILE_STEPS(rounds) steps; after
 * each of its steps, wk_policy_probe_next. */
void wk_policy_probe(eng_trainer *tr, wk_ctl *c, wk_run_ctl *rc, int rounds);
void wk_policy_probe_next(eng_trainer *tr, wk_ctl *c, wk_run_ctl *rc, int json);
/* A policy asked for from step `at` on by `cause` (remat-set: the request's change
 * number; a remat-set or a schedule entry is told when it cannot be applied). */
void wk_policy_ask(wk_run_ctl *rc, const eng_policy *p, int at, proto_cause cause,
	int change);
/* The controller on a budget from `step` on, or off (budget 0, for why). */
void wk_policy_auto(wk_ctl *c, wk_run_ctl *rc, size_t budget, eng_budget_src src, int step,
	const char *why);
/* A budget told while paused: the next step's policy laid out now, and said. */
void wk_policy_paused(eng_trainer *tr, wk_ctl *c, wk_run_ctl *rc);
/* What the control thread checks remat-set and remat-auto against. */
void wk_policy_publish_memory(const eng_trainer *tr, wk_ctl *c, const wk_run_ctl *rc);
void wk_policy_publish_auto(wk_ctl *c, const wk_run_ctl *rc);
/* Before a step: its policy (1 with it in *want; *by_auto: the controller chose). */
int wk_policy_want(const eng_trainer *tr, wk_run_ctl *rc, eng_policy *want, int *by_auto);
/* After a step: what changed its policy, said. */
void wk_policy_said(eng_trainer *tr, wk_ctl *c, wk_run_ctl *rc, const eng_policy *before,
	const eng_policy *asked, int by_auto, int step, int json);
/* The last step's measured peak as the controller weighs it. */
size_t wk_policy_step_peak(const eng_trainer *tr, wk_run_ctl *rc, const eng_step_stats *st,
	const eng_policy *before);

/* ---- wk_save.c ---- */

/* A save of the state now on the writer thread (name NULL: step_XXXXXXXX; cmd: a
 * ckpt-save to answer, or NULL): 0, or -1 with a message (busy when !wait). */
int wk_save_async(eng_trainer *tr, wk_ctl *c, eng_ckpt_writer *w, const char *name,
	const wk_ctl_cmd *cmd, int json, int wait, wk_run_ctl *run, eng_err *err);
/* The periodic save after a step, when one is due. */
void wk_save_periodic(eng_trainer *tr, wk_ctl *c, wk_run_ctl *run, int json);

/* ---- wk_end.c ---- */

/* The validation loss now, recorded and said (the answer to job-eval when cmd is one). */
void wk_end_eval(eng_trainer *tr, wk_ctl *c, wk_run_ctl *run, int json, const wk_ctl_cmd *cmd);
/* After a step: an evaluation and a sample when they are due. */
void wk_end_eval_due(eng_trainer *tr, wk_ctl *c, wk_run_ctl *run, int json);
/* The run reached its end or was asked to stop: 1 once it has ended; 0 when it goes on;
 * -1 when it failed (said). */
int wk_end_reach(eng_trainer *tr, wk_ctl *c, wk_run_ctl *run, int json, int *ended_once);

#endif
