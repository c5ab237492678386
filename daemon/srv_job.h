/* srv_job.h - rematd's job table, queue and workers.
 *
 * Jobs get ids j1, j2, ... (numbering continues after the highest STATE_DIR/jobs/jN left by
 * an earlier daemon, so no earlier job's files are overwritten). A job's files:
 *   STATE_DIR/jobs/ID/job.json     the spec as started (mode 0600); save.dir added when
 *                                  the spec had none: STATE_DIR/jobs/ID/checkpoints
 *   STATE_DIR/jobs/ID/worker.log   the worker's stdout and stderr
 * At most srv->max_jobs workers run at once; the other jobs wait, queued, in order.
 *
 * A worker is `remat-train --control-fd 3 --job-id ID STATE_DIR/jobs/ID/job.json` in its own
 * session (terminal signals reach rematd only, which stops workers itself), with one end of
 * a socketpair as fd 3 speaking docs/protocol.md. rematd subscribes to all its events,
 * forwards clients' job requests with its own integer ids and routes the replies back,
 * and relays the worker's events to subscribers unchanged. When the worker ends (end of
 * the socketpair plus the exit status), the job keeps the state the worker reported
 * (finished, stopped, failed); without one it is failed with "exit status N" or "killed by
 * signal N" (exit status 0 without a report counts as finished, or stopped after a
 * job-stop). Its last checkpoint is the last CHECKPOINT_SAVED path seen, else the
 * save dir's `latest`. Requests still waiting on it get an InvalidState error.
 * Ended jobs stay in the table (the oldest ended ones are forgotten past SRV_MAX_TABLE).
 */
#ifndef SRV_JOB_H
#define SRV_JOB_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"
#include "srv.h"
#include "srv_conn.h"

#define SRV_MAX_TABLE 1024          /* jobs remembered; the oldest ended ones go first */
#define SRV_MAX_QUEUED 256          /* jobs waiting for a slot; job-start past it: Busy */
#define SRV_NAME_LEN 64             /* longest job name kept */
#define SRV_REASON_LEN 256          /* longest reason kept for a state change */
#define SRV_EXECUTE_LEN 64          /* longest command name (proto_request.execute) */

typedef enum srv_job_state {
	SRV_JOB_QUEUED,    /* waiting for a free worker slot */
	SRV_JOB_STARTING,  /* worker spawned, not yet greeted */
	SRV_JOB_RUNNING,
	SRV_JOB_PAUSED,
	SRV_JOB_STOPPING,
	SRV_JOB_FINISHED,  /* reached its steps */
	SRV_JOB_STOPPED,   /* job-stop, or shut down with the daemon */
	SRV_JOB_FAILED,    /* spawn failed, the worker crashed, or it reported a failure */
} srv_job_state;

/* A request forwarded to a worker, waiting for its reply. */
typedef struct srv_pending {
	uint64_t wid;                   /* the id rematd gave it on the worker's channel */
	unsigned conn_id;               /* the client's connection; 0 for rematd's own */
	json_t *client_id;              /* the client's id (new reference), or NULL */
	char execute[SRV_EXECUTE_LEN];  /* the command, to read what its reply tells */
	struct srv_pending *next;       /* in job->pending */
} srv_pending;

struct srv_job {
	srv_server *srv;                /* the daemon */
	unsigned num;                   /* N of "jN" */
	char id[SRV_JOB_ID_LEN];        /* "jN" */
	char name[SRV_NAME_LEN];        /* the name argument, else spec.name, else "job" */
	char dir[SRV_PATH_LEN];         /* STATE_DIR/jobs/ID */
	char save_dir[SRV_PATH_LEN];    /* the spec's save.dir (always set: see above) */
	srv_job_state state;            /* see srv_job_state */
	int steps;                      /* the spec's steps (where the run ends) */
	int step;                       /* the last step reported */
	double loss;                    /* the last loss reported */
	int has_loss;                   /* 0 until a loss was reported */
	char *last_checkpoint;          /* malloc'd path, or NULL */
	char reason[SRV_REASON_LEN];    /* why the last state change happened */
	int exit_status;                /* the worker's exit status; -1 when none */
	int term_signal;                /* the signal that killed it; 0 when none */
	double lr;                      /* the last learning rate reported */
	int has_lr;                     /* 0 until one was reported */
	json_t *policy;                 /* the last policy reported (REMAT_APPLIED, job-status,
					 * remat-set), or NULL */
	char killed_by[64];             /* why rematd SIGKILLed the worker, "" when it did not */

	/* the worker, from spawn to reaping */
	uv_process_t proc;              /* the remat-train process */
	uv_pipe_t chan;                 /* rematd's end of the socketpair */
	uv_timer_t timer;               /* grace periods while it ends (see srv_job.c) */
	int handles_open;               /* handles whose close callback is still due */
	pid_t pid;                      /* while alive, else 0 */
	int proc_alive;                 /* 1 from spawn until the exit callback */
	int chan_open;                  /* 1 from spawn until the channel's end */
	int reaped;                     /* 1 once the end was recorded */
	int greeted;                    /* 1 once the worker's greeting came */
	int final_reported;             /* 1 once the worker reported finished/stopped/failed */
	int stop_requested;             /* 1 once job-stop was sent to it */
	proto_framer framer;            /* the worker's line being assembled */
	uint64_t next_wid;              /* the last id used on the channel */
	srv_pending *pending;           /* requests forwarded, newest first */
};

const char *srv_job_state_name(srv_job_state s);
/* The state called name, or -1. */
int srv_job_state_parse(const char *name);
/* 1 for finished, stopped, failed. */
int srv_job_state_final(srv_job_state s);
/* The job called id (client input: any text), or NULL. */
srv_job *srv_job_find(srv_server *srv, const char *id);

/* Scans STATE_DIR/jobs so that new ids follow the highest one there. */
int srv_job_table_init(srv_server *srv, char *err, size_t errlen);
/* Frees every job record; only once the loop ended (all handles closed). */
void srv_job_table_free(srv_server *srv);

/* job-start: checks spec (an object; data.train, data.val, model.init_from, save.dir absolute;
 * the engine's own validation), writes job.json, queues the job and starts it when a slot
 * is free. Returns the job, or NULL with ec and desc. name may be NULL. */
srv_job *srv_job_create(srv_server *srv, const json_t *spec, const char *name,
	proto_errclass *ec, char *desc, size_t desclen);

/* 1 when the job's worker can take requests now. */
int srv_job_live(const srv_job *job);
/* Forwards a request to the worker; on success the reply reaches c (matched by c's id and
 * the client's id) and c->inflight counts it until then. Returns 0, or -1 with ec/desc. */
int srv_job_forward(srv_job *job, srv_conn *c, const char *execute, const json_t *args,
	const json_t *id, proto_errclass *ec, char *desc, size_t desclen);

/* job-status from the table (new reference): every key of docs/protocol.md, plus pid. */
json_t *srv_job_status(const srv_job *job);
/* job-list's return (new reference). */
json_t *srv_job_list(srv_server *srv);

/* Shutdown: job-stop {save} to every worker; queued jobs become stopped. */
void srv_job_stop_all(srv_server *srv, int save);
/* SIGKILL to every live worker (shutdown timeout, second signal); why goes to the log and
 * to the jobs' reasons. */
void srv_job_kill_all(srv_server *srv, const char *why);

/* ---- for srv_worker.c ---- */

/* Sets the state and reason and publishes JOB_STATE_CHANGED. */
void srv_job_set_state(srv_job *job, srv_job_state to, const char *reason);
/* Publishes JOB_STATE_CHANGED from `from` to the current state. */
void srv_job_emit_state(srv_job *job, const char *from);
/* Starts queued jobs while worker slots are free (not while shutting down). */
void srv_job_schedule(srv_server *srv);

#endif
