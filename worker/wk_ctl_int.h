/* wk_ctl_int.h - what the files of remat-train's control side share, bottom up: the
 * training thread's half (wk_ctl.c: the outbox, events, the command queue), the memory
 * commands (wk_ctl_mem.c), the command handlers (wk_ctl_cmd.c) and the control thread
 * (wk_ctl_loop.c: the loop, connections); no file calls one above it (tests/circles.sh).
 * Private to worker/; wk_ctl.h is the interface.
 */
#ifndef ENG_CTL_INT_H
#define ENG_CTL_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <uv.h>

#include "wk_ctl.h"
#include "proto.h"
#include "sv_conn.h"

#define CTL_MAX_CONN PROTO_MAX_CONNECTIONS
#define CTL_MEMORY_MS 2000   /* MEMORY events while running */
#define CTL_FLUSH_MS 2000    /* at exit, how long peers get to read what is queued */
#define CTL_READ_BUF 65536   /* every read lands here (one loop: reads never interleave) */

/* Event bits: bit b is the event proto_event b. */
enum {
	EV_STEP = 1u << PROTO_EV_STEP,
	EV_APPLIED = 1u << PROTO_EV_REMAT_APPLIED,
	EV_SAVED = 1u << PROTO_EV_CHECKPOINT_SAVED,
	EV_STATE = 1u << PROTO_EV_JOB_STATE_CHANGED,
	EV_MEMORY = 1u << PROTO_EV_MEMORY,
	EV_FAILED = 1u << PROTO_EV_CHECKPOINT_FAILED,
	EV_AUTO = 1u << PROTO_EV_REMAT_AUTO,
	EV_EVAL = 1u << PROTO_EV_EVAL,
};

typedef struct ctl_out {
	char *line;            /* malloc'd, ends in '\n' */
	int conn;              /* target connection handle, or -1 for an event */
	int event;             /* EV_* bit of an event, 0 for a reply */
	int deferred;          /* a deferred reply: frees an in-flight slot when sent */
	struct ctl_out *next;
} ctl_out;

/* A peer: a client of --control, or rematd's link (--control-fd). Its connection is the
 * control servers' one layer (sv_conn.h): framing, output queue, subscriptions (every
 * event of this worker is about its one job: the filter is ""), STEP pacing. */
typedef struct ctl_conn {
	sv_conn k;             /* first member; k.owner = this */
	struct wk_ctl *ctl;
	unsigned id;           /* its handle: never reused, so a late reply never reaches a new
				* client */
	int served;            /* counted in ctl->n_conns */
	int inflight;          /* deferred requests awaiting their reply */
	int link;              /* rematd's socketpair: all events, no rate limit */
	struct ctl_conn *next, *prev;
} ctl_conn;

/* One step of remat-memlog: its peaks, all together and by category. */
typedef struct ctl_memrow {
	int step;
	size_t peak, cat[ENG_MEM_NCAT];
	int oom_retries;
} ctl_memrow;

/* A request that came while the job was starting (no trainer yet): answered once it has
 * started, before its first step, in the order received. */
typedef struct ctl_early {
	char execute[64];      /* the command */
	json_t *args;          /* its arguments (own reference) */
	json_t *id;            /* the request's id (own reference, or NULL) */
	int handle;            /* the connection to answer */
	struct ctl_early *next;
} ctl_early;

/* The run's progress as the training thread last published it (guarded by wk_ctl.mu). */
typedef struct ctl_run {
	wk_ctl_state state;
	int link_lost;         /* rematd's link (--control-fd) has closed: no one can reach
				* the run any more */
	char reason[256];      /* why the state last changed */
	int step, steps;       /* completed steps, and the step the run ends at */
	int in_step;           /* a step is running */
	eng_step_stats last;   /* figures of the last step */
	int has_last;
	json_t *last_eval;     /* the last evaluation's row (wk_eval_json), NULL before one */
	json_t *hparams;       /* the live hyperparameters in force (job-status) */
	wk_ctl_rank *ranks;    /* data parallel: every rank's counters after the last step */
	int nranks;            /* (0 alone) */
	int steps_here;        /* steps this process took, when the first began, and their
				* time, for job-status' elapsed_s and eta_s (pauses left out) */
	double first_step_s, busy_s;
	char last_ckpt[ENG_PATH_LEN + 64];
	json_t *save_error;    /* the last save's failure {step, path, reason}, NULL after a
				* save that worked (job-status' last_save_error) */
} ctl_run;

/* The policy and the memory controller, now and once what is queued applies (guarded by
 * wk_ctl.mu). */
typedef struct ctl_remat {
	eng_policy policy;     /* in force */
	eng_policy pending;    /* in force once queued changes apply */
	int pause_pending;     /* a job-pause queued and not yet applied */
	int probe_until;       /* a probe (remat-profile) runs to this step; 0: none */
	wk_ctl_auto autoc;     /* the memory controller (budget 0: off) */
	int auto_queued;       /* budget changes queued or taken and not yet applied: the
				* budget changes at the next boundary to auto_next (0: off) */
	size_t auto_next;
	int changes;           /* remat-set and job-set requests taken, numbered from 1 */
} ctl_remat;

/* The memory figures (guarded by wk_ctl.mu). */
typedef struct ctl_mem {
	wk_ctl_memfig memfig;  /* the run's memory terms at the last boundary */
	eng_costs costs;       /* the trainer's cost table as of the last step */
	size_t saved[ENG_MAX_LAYERS + 1]; /* measured saved bytes per section */
	/* remat-memlog: the last PROTO_MEMLOG_STEPS steps (a ring, memlog_n appended in all)
	 * and the last step's memory timeline; allocated at attach (NULL: none) */
	ctl_memrow *memlog;
	size_t *memlog_sec;    /* PROTO_MEMLOG_STEPS rows of n_layer + 1 saved bytes */
	int memlog_n;
	eng_memtrace trace;
} ctl_mem;

struct wk_ctl {
	pthread_t thread;
	uv_loop_t loop;
	uv_async_t async;      /* wakes the loop: outbox or stop */
	uv_pipe_t listener;    /* --control PATH */
	uv_timer_t mem_timer;  /* MEMORY events */
	int listening;
	int link_fd;           /* --control-fd, or -1 */
	char path[108];        /* listening socket path, "" when none */
	char job[72];          /* job id in events and arguments */
	char name[72];         /* job name */
	double started;        /* CLOCK_MONOTONIC seconds at start */
	ctl_conn *conns;       /* the peers, served or closing */
	int n_conns;           /* served, at most CTL_MAX_CONN */
	unsigned next_id;
	char rbuf[CTL_READ_BUF];

	pthread_mutex_t mu;
	pthread_cond_t cv;     /* signalled when a command is queued */
	/* --- guarded by mu --- */
	eng_trainer *tr;       /* NULL until attach; read only by the training thread after */
	ctl_run run;           /* the run's progress, what job-status answers from */
	ctl_remat remat;       /* the policy and the controller, what remat-set is checked on */
	ctl_mem mem;           /* the memory figures, what mem-stats and remat-memlog answer */
	ctl_early *early;      /* requests waiting for the job to start (control thread) */
	int replay;            /* attached: early requests are being answered; the first step
				* waits for it (wk_ctl_begin_step) */
	wk_ctl_cmd *q_head, *q_tail;     /* commands for the training thread */
	ctl_out *o_head, *o_tail;         /* lines for the control thread */
	int quit;              /* wk_ctl_stop asked the loop to finish */
};

double wk_ctl__mono_s(void);
/* An event (EV_* bit, data taken) into the outbox for every subscriber (either thread). */
void wk_ctl__emit(struct wk_ctl *c, int ev, json_t *data);
/* finished, stopped or failed */
static inline int wk_ctl__is_final(wk_ctl_state s)
{
	return proto_job_state_final((int)s);
}
/* Sends an error line to k (control thread; wk_ctl.c). */
void wk_ctl__send_error(ctl_conn *k, proto_errclass cls, const char *desc, const json_t *id);
/* Appends a command for the training thread and wakes it; called with mu held (wk_ctl.c). */
void wk_ctl__enqueue(struct wk_ctl *c, wk_ctl_cmd *cmd);
/* One handler per command (the table in wk_ctl_cmd.c, indexed by proto's command ids):
 * the reply, or NULL when it answered (an error) or will answer later (a deferred
 * change). Those of wk_ctl_mem.c: */
#define WK_CTL_HANDLER(fn) \
	json_t *fn(struct wk_ctl *c, ctl_conn *k, int handle, const proto_command *cmd, \
		json_t *args, json_t *id)
WK_CTL_HANDLER(wk_ctl__cmd_mem);
WK_CTL_HANDLER(wk_ctl__cmd_mem_reset_peak);
WK_CTL_HANDLER(wk_ctl__cmd_memlog);
/* The planner's figures of policy p for the run; the measured sections (mode, saved and
 * workspace bytes) without the planner's FLOPs (wk_ctl_mem.c). */
void wk_ctl__plan_for(struct wk_ctl *c, const eng_policy *p, eng_plan *plan);
json_t *wk_ctl__measured_sections(struct wk_ctl *c);
/* Handles one validated request, with mu held: the reply's return object, or NULL after
 * queueing a deferred command, keeping a request for the job's start (c->early), or
 * sending an error (wk_ctl_cmd.c). */
json_t *wk_ctl__dispatch(struct wk_ctl *c, ctl_conn *k, int handle, const char *name,
	json_t *args, json_t *id);

#endif
