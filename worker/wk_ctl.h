/* wk_ctl.h - remat-train's control side: a thread with a libuv loop that speaks the
 * remat protocol (docs/protocol.md) on rematd's socketpair (--control-fd) or on a socket of
 * its own (--control PATH), next to the training thread.
 *
 * Queries (job-status, mem-stats, remat-get, remat-plan) are answered at once from a
 * snapshot the training thread keeps current under a mutex, also in the middle of a step.
 * While the job is starting (no trainer yet), every request but job-status, job-list and
 * daemon-info is kept and answered once it has started, before its first step.
 * Commands that change the run (remat-set, job-pause, job-resume, job-stop, ckpt-save) go
 * into a queue the training thread drains at the next step boundary; the reply says at
 * which step the change applies (remat-set, job-pause) or comes once it is done (job-stop,
 * ckpt-save). Events and deferred replies from the training thread go through a locked
 * outbox and a uv_async wake-up (uv_async_send coalesces, the outbox does not).
 *
 * Not here: the training loop itself (wk_main.c) or the engine.
 */
#ifndef ENG_CTL_H
#define ENG_CTL_H

#include <jansson.h>
#include <pthread.h>

#include "eng_backend.h"
#include "eng_mem.h"
#include "eng_plan_json.h"
#include "eng_train.h"
#include "proto.h"

/* A worker's states: the protocol's (proto_job_state), starting .. failed. */
typedef enum wk_ctl_state {
	CTL_STARTING = PROTO_JOB_STARTING, CTL_RUNNING = PROTO_JOB_RUNNING,
	CTL_PAUSED = PROTO_JOB_PAUSED, CTL_STOPPING = PROTO_JOB_STOPPING,
	CTL_FINISHED = PROTO_JOB_FINISHED, CTL_STOPPED = PROTO_JOB_STOPPED,
	CTL_FAILED = PROTO_JOB_FAILED
} wk_ctl_state;

typedef enum wk_ctl_op { CTL_OP_POLICY, CTL_OP_PAUSE, CTL_OP_RESUME, CTL_OP_STOP,
	CTL_OP_SAVE, CTL_OP_PROFILE, CTL_OP_AUTO, CTL_OP_EVAL, CTL_OP_SET } wk_ctl_op;

/* One queued change, drained by the training thread at a step boundary. */
/* Where a memory controller's budget came from (job-status' auto.source). */
typedef enum eng_budget_src {
	ENG_BUDGET_SIZE,   /* a size the user gave */
	ENG_BUDGET_CGROUP, /* the worker's cgroup's memory.max */
	ENG_BUDGET_DEVICE  /* the GPU's memory (device cuda) */
} eng_budget_src;

/* The memory controller as the training thread last set it. */
typedef struct wk_ctl_auto {
	size_t budget;            /* bytes; 0: off */
	eng_budget_src source;
	int pinned;               /* a policy remat-set gave is held while it fits */
} wk_ctl_auto;

/* The run's memory terms at the last step boundary, as the training thread counts them:
 * what remat-set and remat-auto are checked against before they are queued. */
typedef struct wk_ctl_memfig {
	size_t fixed;      /* held whatever the policy: params, grads, optimizer, workspace,
			    * data, and the untracked term */
	size_t limit;      /* memory.limit (device cpu; tracked bytes), 0 none */
	size_t tracked_fixed; /* fixed less the untracked term: what memory.limit counts */
	size_t room;       /* with a controller on: the most a policy's predicted peak may be */
	size_t least;      /* the least any policy needs, fixed included */
	size_t snapshot;   /* a save's snapshot (0: the run does not save) */
	double save_ms, stall_ms; /* the last save's write and its snapshot's copy, 0: none */
} wk_ctl_memfig;

typedef struct wk_ctl_cmd {
	wk_ctl_op op;
	eng_policy policy;        /* CTL_OP_POLICY: the whole new policy */
	int force;                /* CTL_OP_POLICY: the controller lets go (remat-set force) */
	int applies_at;           /* CTL_OP_POLICY: the step the reply said it applies at */
	int change;               /* CTL_OP_POLICY, CTL_OP_SET: the job's change number, as
				   * the reply and the event that applies it say */
	int budget_change;        /* CTL_OP_AUTO, or a forced CTL_OP_POLICY under a
				   * controller: the budget changes when it applies */
	eng_budget_src source;    /* CTL_OP_AUTO: where budget came from */
	int save;                 /* CTL_OP_STOP: save first */
	int rounds;               /* CTL_OP_PROFILE: rounds of 3 steps */
	size_t budget;            /* CTL_OP_AUTO: bytes, 0 off */
	json_t *set;              /* CTL_OP_SET: hyperparameter -> value (own reference) */
	char name[72];            /* CTL_OP_SAVE, CTL_OP_STOP: checkpoint name, "" for
				   * step_XXXXXXXX */
	int conn;                 /* connection to reply to (deferred ops), -1 none */
	json_t *id;               /* request id to echo (new ref or NULL) */
	struct wk_ctl_cmd *next;
} wk_ctl_cmd;

typedef struct wk_ctl wk_ctl; /* opaque: the control thread and its loop */

/* One rank's counters after a step (data parallel: gathered on rank 0, wk_dp.h). */
typedef struct wk_ctl_rank {
	int rank, step;
	double step_ms;
	double allreduce_ms;          /* the step's gradient all-reduce: after the backward */
	double allreduce_hidden_ms;   /* and behind it */
	eng_mem_stats mem;            /* by category, current and peak, and RSS */
	eng_device_mem dev;       /* device cuda: the GPU's (dev.active 0 else) */
	size_t saved[ENG_MAX_LAYERS + 1]; /* saved bytes by section */
} wk_ctl_rank;

/* Every function below accepts c == NULL (no control side) and then does nothing, so the
 * training loop has one shape with or without a controller. */

/* Starts the control thread on an inherited socket (fd >= 0, rematd's link: subscribed to
 * every event from the start) or a listening socket at path (path != NULL, created 0600,
 * refused when the file exists). job is the id used in events and accepted in "job"
 * arguments. Returns NULL with a message on stderr when it cannot. */
wk_ctl *wk_ctl_start(int fd, const char *path, const char *job, const char *name);

/* Called by the training thread once the trainer exists: queries then answer from it, and
 * the state becomes running. */
void wk_ctl_attach(wk_ctl *c, eng_trainer *tr);

/* 1 once rematd's link (--control-fd) has closed: nothing can reach the run any more (a
 * restarted rematd starts a new worker to resume it). 0 otherwise, and for c == NULL. */
int wk_ctl_unreachable(wk_ctl *c);

/* Training thread, at a step boundary: takes the queued commands (free with
 * wk_ctl_cmd_free). */
wk_ctl_cmd *wk_ctl_take(wk_ctl *c);
/* Blocks until a command is queued or ms pass (while paused), then takes them (NULL on a
 * time-out, so the caller can look at its signals). */
wk_ctl_cmd *wk_ctl_wait(wk_ctl *c, int ms);
/* Marks a step as running; returns 0 (and marks nothing) when commands arrived since the
 * last take, so they are applied first. Makes `applies_at_step` in replies exact. */
int wk_ctl_begin_step(wk_ctl *c);
/* Publishes the step's figures and the policy, marks the step done, queues a STEP event
 * of row (wk_step_json's fields; stolen). */
void wk_ctl_end_step(wk_ctl *c, const eng_step_stats *st, json_t *row);
/* An evaluation (wk_eval_json's row, stolen): job-status' val_loss, and an EVAL event. */
void wk_ctl_event_eval(wk_ctl *c, json_t *row);
/* Any other event of the training thread: HPARAMS_APPLIED, SAMPLE (data stolen). */
void wk_ctl_event(wk_ctl *c, proto_event ev, json_t *data);
/* Every rank's counters after the last step (n rows, taken): mem-stats' "ranks", and the
 * most over ranks at its top. */
void wk_ctl_set_ranks(wk_ctl *c, wk_ctl_rank *rows, int n);
/* Values job-set gave (stolen), merged into job-status' "hparams". */
void wk_ctl_set_hparams(wk_ctl *c, json_t *hp);
/* Publishes the policy and per-section bytes after a policy change; queues REMAT_APPLIED
 * naming the first step that runs under it, what caused it, and the change number of the
 * request it carries out (0: none, null on the wire). */
void wk_ctl_policy_applied(wk_ctl *c, int first_step, proto_cause cause, int change);

/* The run ends before the step a policy was asked for (p): it is the one the job resumes
 * with, and REMAT_APPLIED says so (at_resume true, step the first a resume runs). */
void wk_ctl_policy_at_resume(wk_ctl *c, const eng_policy *p, int first_step,
	proto_cause cause, int change);

/* A probe of the sections' costs (remat-profile) runs until step `until` (0: none now):
 * remat-set is refused until then. */
void wk_ctl_set_probe(wk_ctl *c, int until);

/* The memory controller now (budget 0: off), for job-status, and REMAT_AUTO: it set
 * `policy` from step `step` on, for `why`, predicting `predicted` bytes where the last
 * step measured `measured`. */
void wk_ctl_set_auto(wk_ctl *c, const wk_ctl_auto *a);
/* Command q, taken at a boundary, has been applied: a budget change it carried is no
 * longer queued (what remat-set is checked against). */
void wk_ctl_applied(wk_ctl *c, const wk_ctl_cmd *q);
/* The run's memory terms now (training thread, at a boundary). */
void wk_ctl_set_memfig(wk_ctl *c, const wk_ctl_memfig *m);
/* A policy asked for (remat-set, a schedule entry: cause, change) was not what step `step`
 * ran under: REMAT_FAILED with why and both policies (stolen). */
void wk_ctl_event_remat_failed(wk_ctl *c, int step, json_t *asked, json_t *policy,
	const char *why, proto_cause cause, int change);
void wk_ctl_event_auto(wk_ctl *c, int step, json_t *policy, const char *why,
	size_t budget, size_t predicted, size_t measured);

void wk_ctl_cmd_free(wk_ctl_cmd *cmds);

/* Changes the state (queues JOB_STATE_CHANGED). */
void wk_ctl_set_state(wk_ctl *c, wk_ctl_state to, const char *reason);
void wk_ctl_event_saved(wk_ctl *c, const char *path, int step, size_t bytes);
/* A save failed: CHECKPOINT_FAILED {path, step, reason}, and job-status' last_save_error
 * until a save works. */
void wk_ctl_event_save_failed(wk_ctl *c, const char *path, int step, const char *reason);
/* A deferred reply to cmd's connection (ret stolen) or an error; drops it when cmd has no
 * connection. */
void wk_ctl_reply(wk_ctl *c, const wk_ctl_cmd *cmd, json_t *ret);
void wk_ctl_reply_error(wk_ctl *c, const wk_ctl_cmd *cmd, proto_errclass cls,
	const char *desc);

/* Flushes what is queued, closes every connection, joins the thread, frees c. */
void wk_ctl_stop(wk_ctl *c);

#endif
