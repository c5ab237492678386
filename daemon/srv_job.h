/* srv_job.h - rematd's job table, queue and workers.
 *
 * Jobs get ids j1, j2, ... (numbering continues after the highest STATE_DIR/jobs/jN left by
 * an earlier daemon, so no earlier job's files are overwritten). A job's files:
 *   STATE_DIR/jobs/ID/job.json     the spec as started (mode 0600); save.dir added when
 *                                  the spec had none: STATE_DIR/jobs/ID/checkpoints
 *   STATE_DIR/jobs/ID/resume.json  the spec of its last resume: init_from its save
 *                                  directory with resume, the policy as last set, the
 *                                  memory controller's budget as the record keeps it
 *                                  (remat.budget; none when it was turned off)
 *   STATE_DIR/jobs/ID/state.json   the job's record (srv_store.h), rewritten atomically at
 *                                  every change: a restarted rematd lists the job again
 *   STATE_DIR/jobs/ID/worker.log   the worker's stdout and stderr
 * At most srv->max_jobs workers run at once; the other jobs wait, queued, in order.
 *
 * job-start is answered once the spec was checked whole, as the job's user, by
 * `remat-train --check` (srv_helper.h): shapes, selectors, files, init_from, the save
 * directory, the device; a job that would fail later is refused now, with the worker's
 * message. A job's owner is the client that started it (uid, gid, groups); when rematd is
 * root and the owner is not, its worker and its checks run as the owner (--as), and the
 * default save directory belongs to the owner. Only the owner, rematd's own user or root may
 * change a job (stop, pause, set, save, resume, remove); anyone who may connect may look.
 *
 * A worker is `remat-train --control-fd 3 --job-id ID [--as ...] STATE_DIR/jobs/ID/SPEC`
 * in its own session (terminal signals reach rematd only, which stops workers itself),
 * with one end of a socketpair as fd 3 speaking docs/protocol.md. rematd subscribes to
 * all its events, forwards clients' job requests with its own integer ids and routes the
 * replies back (a worker that does not answer a query within SRV_WORKER_REPLY_MS gets the
 * client a Busy reply, or job-status from the table), and relays the worker's events to
 * subscribers, but for the final JOB_STATE_CHANGED, which rematd sends itself once the
 * worker has exited, with its exit status and last checkpoint. When the worker ends, the
 * job keeps the state the worker reported (finished, stopped, failed); without one it is
 * failed with "exit status N" or "killed by signal N" (exit status 0 without a report
 * counts as finished, or stopped after a job-stop). Its last checkpoint is the last
 * CHECKPOINT_SAVED path seen. Requests still waiting on it get an InvalidState error.
 * Ended jobs stay in the table until `job-remove`. The table holds at most SRV_MAX_TABLE
 * records, SRV_MAX_TABLE_PER_UID of one owner: past either, a job-start forgets the
 * starter's own oldest finished or failed record (its files stay); a resumable one
 * (stopped, interrupted) goes only by its owner's job-remove, and a starter with nothing
 * to forget is refused (Busy, saying why). No user's start drops another user's record.
 *
 * The record (state.json) is written at every change of state, every checkpoint, every
 * change of the memory controller (srv_auto.h: its budget and source, or off), and a
 * STEP's progress at most every SRV_RECORD_STEP_MS: after any death of rematd it names a
 * recent step and the newest checkpoint the daemon heard of; a resume runs under the
 * controller it names, and rematd's job-status of a job without a worker answers it. A job that was alive when
 * an earlier rematd died may have saved after it (a worker whose channel ends saves at its
 * next step boundary): the restarted daemon checks its resume as its owner
 * (srv_job_rescan_due: remat-train --check finds the newest checkpoint that verifies) and
 * takes that checkpoint and step when the record's are older.
 *
 * States: queued, starting (spawned, loading), running, paused, stopping, then finished,
 * stopped, failed, or interrupted (it was alive when an earlier rematd ended). A stopped,
 * failed or interrupted job can be resumed from its last checkpoint (job-resume); a queued
 * one stopped is cancelled.
 */
#ifndef SRV_JOB_H
#define SRV_JOB_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "eng_check_info.h"
#include "proto.h"
#include "srv.h"
#include "srv_auto.h"
#include "srv_conn.h"
#include "srv_pool.h"

#define SRV_MAX_TABLE 1024          /* jobs remembered; the oldest ended ones go first */
#define SRV_MAX_TABLE_PER_UID 256   /* jobs remembered of one owner: their oldest finished
				     * or failed ones go first, never a resumable one */
#define SRV_RECORD_STEP_MS 3000     /* a STEP's progress is written to the record at most
				     * this often (a checkpoint or a state change at once) */
#define SRV_RESCAN_MS 2000          /* a restart's look at a save directory, again after
				     * this while another process holds it */
#define SRV_RESCAN_TRIES 30         /* at most this many times */
#define SRV_MAX_QUEUED 256          /* jobs waiting for a slot; job-start past it: Busy */
#define SRV_QUEUED_PER_UID (SRV_MAX_QUEUED / 4) /* of them one user's but root or rematd's:
				     * no user fills the queue for the others */
#define SRV_NAME_LEN 64             /* longest job name kept */
#define SRV_REASON_LEN 512          /* longest reason kept for a state change */
#define SRV_EXECUTE_LEN 64          /* longest command name (proto_request.execute) */
#define SRV_WORKER_REPLY_MS 10000   /* a worker's answer to a query is awaited this long */
#define SRV_FIGURES_MS 2000         /* rematd asks a running worker for mem-stats and
				     * remat-get this often (an ended job's last figures) */

/* A request forwarded to a worker, waiting for its reply. */
typedef struct srv_pending {
	uint64_t wid;                   /* the id rematd gave it on the worker's channel */
	unsigned conn_id;               /* the client's connection; 0 for rematd's own */
	json_t *client_id;              /* the client's id (new reference), or NULL */
	char execute[SRV_EXECUTE_LEN];  /* the command, to read what its reply tells */
	uint64_t sent_ms;               /* when it was forwarded (srv_now_ms) */
	int deferred;                   /* job-stop, ckpt-save: no time limit on the reply */
	int expired;                    /* the client got its answer elsewhere (time limit):
					 * the worker's late reply is dropped */
	char auto_asked[8];             /* remat-auto: the budget asked for, "size" (bytes),
					 * "cgroup", "device" or "off" (srv_auto_note_auto) */
	struct srv_pending *next;       /* in job->pending */
} srv_pending;

struct srv_job {
	srv_server *srv;                /* the daemon */
	unsigned num;                   /* N of "jN" */
	char id[SRV_JOB_ID_LEN];        /* "jN" */
	char name[SRV_NAME_LEN];        /* the name argument, else spec.name, else "job" */
	char dir[SRV_PATH_LEN];         /* STATE_DIR/jobs/ID */
	char save_dir[SRV_PATH_LEN];    /* the spec's save.dir (always set: see above) */
	char spec_file[16];             /* in dir: the spec its worker runs, "job.json" or
					 * "resume.json" */
	eng_cred owner;                 /* who started it: whose rights its worker has */
	int64_t created;                /* when, in seconds since the epoch */
	eng_check_info *info;           /* what remat-train --check said of its spec
					 * (malloc'd; in the record), or NULL */
	proto_job_state state;          /* proto.h's proto_job_state */
	int steps;                      /* the spec's steps (where the run ends) */
	int step;                       /* the last step reported */
	double loss;                    /* the last loss reported */
	int has_loss;                   /* 0 until a loss was reported */
	double val_loss;                /* the last EVAL's, with its step */
	int val_step, has_val;
	char *last_checkpoint;          /* malloc'd path, or NULL */
	json_t *last_save_error;        /* the last CHECKPOINT_FAILED's data until a save
					 * works, or NULL */
	char reason[SRV_REASON_LEN];    /* why the last state change happened */
	int exit_status;                /* the worker's exit status; -1 when none */
	int term_signal;                /* the signal that killed it; 0 when none */
	double lr;                      /* the last learning rate reported */
	int has_lr;                     /* 0 until one was reported */
	json_t *policy;                 /* the last policy reported (REMAT_APPLIED, job-status,
					 * remat-set), or NULL */
	srv_auto autoc;                 /* the memory controller: budget and source, or off
					 * (srv_auto.h; in the record, and a resume's spec) */
	json_t *last_mem;               /* the worker's last mem-stats and remat-get replies,
					 * each with "as_of_step": what mem-stats and remat-get
					 * answer once it has ended (kept in the record) */
	json_t *last_remat;
	srv_pool_job pool;              /* its part of rematd --memory's pool (srv_pool.h) */
	json_t *tokenize;               /* a starting job's last TOKENIZE data (its text data
					 * being made ready), NULL once it runs */
	uint64_t figures_ms;            /* when rematd last asked its worker for them */
	char killed_by[64];             /* why rematd SIGKILLed the worker, "" when it did not */
	uint64_t progress_ms;           /* when the job last moved (a step, a state change:
					 * srv_now_ms), 0 before it runs: the stall watchdog's */
	uint32_t step_gaps[SRV_STALL_GAPS]; /* the last steps' times, ms (a ring) */
	int n_gaps;                     /* steps timed so far */
	long long log_from;             /* worker.log's size when this run's worker started:
					 * a failure's reason reads only what came after (a
					 * resumed job appends to its earlier runs' log) */
	int checking;                   /* a resume's check is running: the record must stay */
	json_t *stop_ret;               /* the worker's reply to the last job-stop (its step,
					 * checkpoint, or the steps it dropped), or NULL */
	uint64_t record_ms;             /* when the record was last written (srv_now_ms) */
	uint64_t rescan_at_ms;          /* a restart's look at the save directory is due then
					 * (srv_job_rescan_due); 0: none */
	int rescan_tries;               /* looks so far */

	/* the worker, from spawn to reaping; reset by each resume */
	uv_process_t proc;              /* the remat-train process */
	uv_pipe_t chan;                 /* rematd's end of the socketpair */
	uv_timer_t timer;               /* grace periods while it ends (see srv_worker.c) */
	int handles_open;               /* handles whose close callback is still due */
	pid_t pid;                      /* while alive, else 0 */
	int proc_alive;                 /* 1 from spawn until the exit callback */
	int chan_open;                  /* 1 from spawn until the channel's end */
	int mpi_lfd;                    /* data parallel: the socket rank 0 connects to (-1
					 * once it has, or none) */
	uv_poll_t mpi_poll;             /* readable: rank 0 is connecting */
	void (*mpi_connected)(srv_job *job, int *fd, const char *why); /* srv_mpi_wait's */
	int mpi_polling;
	int reaped;                     /* 1 once the end was recorded */
	int greeted;                    /* 1 once the worker's greeting came */
	int final_reported;             /* 1 once the worker reported finished/stopped/failed */
	char final_from[16];            /* the state it went from then (for rematd's event) */
	int stop_requested;             /* 1 once job-stop was sent to it */
	int stop_saving;                /* 1 while rematd's own job-stop {save} is awaited */
	int shutdown_cancelled;         /* 1: a queued job the shutdown under way stopped (queued
					 * again when the shutdown is called off) */
	uint64_t running_ms;            /* when it last entered running (reply time limits) */
	proto_framer framer;            /* the worker's line being assembled */
	uint64_t next_wid;              /* the last id used on the channel */
	srv_pending *pending;           /* requests forwarded, newest first */
};

/* The job called id (client input: any text), or NULL. */
srv_job *srv_job_find(srv_server *srv, const char *id);

/* Opens the state directory and STATE_DIR/jobs in it (as root, with the mode that lets the
 * owners of jobs reach their checkpoints); the jobs an earlier rematd left are loaded next
 * (srv_store_load). */
int srv_job_table_init(srv_server *srv, char *err, size_t errlen);
/* Frees every job record; only once the loop ended (all handles closed). */
void srv_job_table_free(srv_server *srv);
/* Adds a record to the table, making room by forgetting its owner's oldest finished or
 * failed record when the table (SRV_MAX_TABLE) or the owner's share of it
 * (SRV_MAX_TABLE_PER_UID) is full. When there is none to forget: -1 with why in desc, or,
 * with must (a record on disk at a restart), added all the same: a resumable record is
 * never dropped. */
int srv_job_table_add(srv_server *srv, srv_job *job, int must, char *desc, size_t desclen);
/* 0 when a record of uid's could be added now (srv_job_table_add), else -1 with desc. */
int srv_job_table_room(const srv_server *srv, uid_t uid, char *desc, size_t desclen);
/* Starts the looks at save directories that are due (a restart's, see above); called every
 * second. */
void srv_job_rescan_due(srv_server *srv);
/* A fresh record (state queued, no worker); NULL when out of memory. */
srv_job *srv_job_alloc(srv_server *srv);
/* Frees a record that holds no handle. */
void srv_job_free(srv_job *job);
/* Frees a forwarded request's record. */
void srv_job_pending_free(srv_pending *p);
/* Frees what a job record holds for its worker (pending requests, its last figures); the
 * handles must be closed. */
void srv_job_forget_worker(srv_job *job);

/* job-start from connection c: checks what it can at once (spec an object, paths absolute,
 * the spec's own syntax), then runs remat-train --check as the owner; the reply (job id and
 * state, or the check's error) reaches c later, with the client's id. 0 when the check
 * started (c->inflight counts it), -1 with ec/desc to reply now. */
int srv_job_start(srv_conn *c, const json_t *spec, const char *name, const json_t *id,
	proto_errclass *ec, char *desc, size_t desclen);
/* job-resume of a stopped, failed or interrupted job: checks the resume spec (init_from
 * the save directory, resume, the policy last set), then queues the job again; the reply
 * comes later. 0, or -1 with ec/desc. */
int srv_job_resume(srv_job *job, srv_conn *c, const json_t *id, proto_errclass *ec,
	char *desc, size_t desclen);
/* job-stop of a queued job: cancelled, never run. */
void srv_job_cancel(srv_job *job, const char *why);
/* job-remove of an ended job: forgets it and removes its own files (spec, record, log);
 * checkpoints are never removed. The return names what was kept (new reference), or NULL
 * with ec/desc. */
json_t *srv_job_remove(srv_job *job, proto_errclass *ec, char *desc, size_t desclen);
/* remat-plan answered by rematd: for a job without a worker, from what its check said;
 * NULL with ec/desc. */
json_t *srv_job_plan(const srv_job *job, const json_t *args, proto_errclass *ec, char *desc,
	size_t desclen);
/* remat-plan {spec}: checks the spec as c's user, then plans; the reply comes later. */
int srv_job_plan_spec(srv_conn *c, const json_t *spec, const json_t *args, const json_t *id,
	proto_errclass *ec, char *desc, size_t desclen);
/* 1 when c may change job (its owner, rematd's user, or root); else 0 with desc. */
int srv_job_may_change(const srv_job *job, const srv_conn *c, char *desc, size_t desclen);

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

/* ---- for srv_worker.c ---- */

/* Sets the state and reason, writes the record and publishes JOB_STATE_CHANGED. */
void srv_job_set_state(srv_job *job, proto_job_state to, const char *reason);
/* Publishes JOB_STATE_CHANGED from `from` to the current state. */
void srv_job_emit_state(srv_job *job, const char *from);
/* Writes the job's record (state.json); a failure is logged, the job goes on. */
void srv_job_save_record(srv_job *job);

/* The job's directory, STATE_DIR/jobs/ID, open: an entry of srv->jobs_d that is a
 * directory of ours and no symlink. */
int srv_job_dir_open(const srv_job *job, eng_dir *d, eng_err *err);

#endif
