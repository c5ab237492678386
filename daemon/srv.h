/* srv.h - rematd's shared state and helpers: the one srv_server of the process, logging,
 * quoting of client input, and reference-counted output messages.
 *
 * rematd is one libuv loop on one thread; nothing here is locked. The modules:
 *   rematd.c          main: options, start-up, signals
 *   srv_life.c        the shutdown, and what the service manager is told
 *   srv_util.c        logging, quoting, waiters, credentials (this header's helpers)
 *   srv_listen.c      the listening socket and its lock file, or the one systemd passed
 *   srv_notify.c      the service manager's notification protocol (sd_notify without
 *                     libsystemd)
 *   srv_conn.c        client connections: framing, limits, output queues, subscriptions
 *   srv_cmd.c         requests: validation and dispatch
 *   srv_job.c         the job table: ids, states and their events, the queue, removal,
 *                     job-status and job-list from the table
 *   srv_job_check.c   a spec's checks: at once, then remat-train --check; its answer read
 *   srv_job_start.c   job-start: a checked spec becomes a job (id, files, queue)
 *   srv_job_resume.c  resume, a restart's look at save directories, plans without a worker
 *   srv_worker.c      a job's worker process (remat-train): spawn, channel, time limits, end
 *   srv_worker_read.c what the worker says: replies routed back, events relayed
 *   srv_mpi.c         a data-parallel job's launch (mpirun, rank 0's channel)
 *   srv_helper.c      short-lived remat-train runs: --check for a spec, --info for daemon-info
 *   srv_store.c       the job table on disk: STATE_DIR/jobs/ID/state.json, a record's format
 *   srv_store_load.c  the job table loaded from it at start-up
 *   srv_auto.c        a job's memory controller as its record keeps it (budget, source)
 *   srv_pool.c        --memory: one pool shared by the jobs, admission and live division
 *   srv_metrics.c     job-metrics: a job's metrics.jsonl read back
 * Not here: anything that computes; the daemon never trains (design.md §1).
 */
#ifndef SRV_H
#define SRV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "eng_cred.h"
#include "eng_fs.h"
#include "proto.h"
#include "sv_msg.h"
#include "srv_listen.h"
#include "srv_notify.h"

#define SRV_PATH_LEN 4096            /* longest path the daemon keeps (socket, state dir) */
#define SRV_READ_BUF (64u << 10)     /* bytes one read from a client or worker may return */
#define SRV_QUOTE_MAX 80             /* client input is cut to this many bytes in logs */
#define SRV_QUOTE_BUF (SRV_QUOTE_MAX * 4 + 8) /* room for it fully escaped, quotes, "..." */
#define SRV_STOP_TIMEOUT_S 60       /* default --stop-timeout: job-stop to SIGKILL at shutdown */
#define SRV_STATUS_LEN 512           /* the STATUS= text told to the service manager */
#define SRV_STALL_TIMEOUT_S 300     /* default --stall-timeout: a running job without a step
				      * this long (or SRV_STALL_STEPS of its steps) is failed */
#define SRV_STALL_STEPS 20           /* ... its median step time this many times, if longer */
#define SRV_STALL_GAPS 8             /* steps whose times the median is taken over */
#define SRV_IDLE_TIMEOUT_S 30        /* default --idle-timeout: a connection that has sent no
				      * complete request by then is closed */

typedef struct srv_helper srv_helper;

/* A request whose reply waits for something rematd does itself (a helper, the shutdown):
 * the connection by id and the client's id (own reference). */
typedef struct srv_waiter {
	unsigned conn_id;
	json_t *id;
	struct srv_waiter *next;
} srv_waiter;

typedef struct srv_conn srv_conn;
typedef struct srv_job srv_job;
typedef struct srv_server srv_server;

/* How the pool tells a worker its budget: srv_worker_request's shape. */
typedef int (*srv_pool_request_fn)(srv_job *job, const char *execute, const json_t *args,
	unsigned conn_id, const json_t *client_id);

/* rematd --memory: the pool its jobs share (srv_pool.h). */
typedef struct srv_pool {
	int on;                            /* --memory was given */
	long long bytes;                   /* the pool */
	char source[16];                   /* "size", "cgroup" (auto) or "available" (auto) */
	int dividing;                      /* shrinks told, not all acknowledged: grows wait */
	int again;                         /* a change came meanwhile: divide again after */
	int scheduling;                    /* the queue is being looked at after a division */
	int refused;                       /* a shrink of the division was refused: its
					    * grows are not told, it is divided again */
	char why[128];                     /* what the division under way answers */
	uint64_t swept_ms;                 /* when rates were last looked at */
	srv_pool_request_fn request;       /* srv_worker_request */
	void (*schedule)(srv_server *srv); /* srv_job_schedule */
} srv_pool;

typedef struct srv_server {
	uv_loop_t *loop;                   /* the one event loop */
	char socket_path[SRV_PATH_LEN];    /* where clients connect */
	char state_dir[SRV_PATH_LEN];      /* jobs/ID/{job.json,worker.log,checkpoints} */
	eng_dir state_d;                   /* it, open (fd -1 until srv_job_table_init) */
	eng_dir jobs_d;                    /* STATE_DIR/jobs, open: every job directory is an
					    * entry of it, reached without following a link */
	char worker_path[SRV_PATH_LEN];    /* the remat-train binary spawned per job */
	char mpirun_path[SRV_PATH_LEN];    /* --mpirun or PATH's: data parallel jobs' launcher,
					    * "" none */
	int max_jobs;                      /* workers alive at once; more jobs wait queued */
	srv_pool pool;                     /* --memory: admission and the division */
	int stop_timeout_s;                /* shutdown: workers alive this long after job-stop
					    * are killed */
	int idle_timeout_s;                /* --idle-timeout: a connection silent this long
					    * after connecting is closed (0: never) */
	int stall_timeout_s;               /* --stall-timeout: a running job whose step has not
					    * moved this long is failed (0: never) */
	int has_group;                     /* 1 with --group */
	gid_t group;                       /* --group: its members may connect too */
	uid_t uid;                         /* our effective uid: peers with it may connect */
	uint64_t started_ns;               /* uv_hrtime() at start, for daemon-info's uptime */
	srv_listener listener;             /* the listening socket and the lock file */

	srv_conn *conns;                   /* every connection until its close callbacks ran */
	int n_conns;                       /* of them, those served (not refused, not closing) */
	unsigned next_conn_id;             /* last client number given: logs, reply routing */

	srv_job **jobs;                    /* the job table in creation order (malloc'd) */
	int n_jobs;                        /* entries used in jobs */
	int cap_jobs;                      /* entries allocated */
	unsigned next_job_num;             /* last N used for an id "jN" */
	int n_active;                      /* jobs with a worker spawned and not yet reaped */

	srv_helper *helpers;               /* helper processes running (srv_helper.c) */
	unsigned next_helper;              /* numbers their spec files */
	json_t *worker_info;               /* remat-train --info's answer, NULL until it came */
	char worker_info_err[256];         /* why it did not come, "" while it may */
	srv_waiter *info_waiters;          /* daemon-info requests waiting for it */

	int shutting_down;                 /* 1 once SIGTERM/SIGINT/daemon-shutdown came, until
					    * it ends or a save fails (then 0 again) */
	int shutdown_save;                 /* job-stop {save} sent to every worker then */
	int shutdown_by_signal;            /* 1 when a signal asked: a save that fails is not
					    * a reason to stay (the job is stopped unsaved) */
	srv_waiter *shutdown_waiters;      /* daemon-shutdown requests, answered at the end */
	int shutdown_done;                 /* 1 once the last handles are closing */
	uv_timer_t shutdown_timer;         /* SIGKILLs workers that outlive the timeout */
	uv_timer_t sweep_timer;            /* every second: queries workers left unanswered */
	uv_signal_t sig_term;              /* SIGTERM: shut down */
	uv_signal_t sig_int;               /* SIGINT: shut down; a second one kills workers */

	srv_notify notify;                 /* $NOTIFY_SOCKET: READY, STATUS, WATCHDOG, STOPPING */
	int notify_timers;                 /* 1 once the three timers below are initialised */
	int notify_failing;                /* 1 after a failed send, until one succeeds */
	uv_timer_t watchdog_timer;         /* WATCHDOG=1 every WATCHDOG_USEC/2 */
	uv_timer_t status_timer;           /* re-sends STATUS= when its text changed (steps) */
	uv_timer_t extend_timer;           /* EXTEND_TIMEOUT_USEC= while workers stop */
	char status[SRV_STATUS_LEN];       /* the STATUS= text last sent */

	/* calls up from the lower modules, set by main: a module never calls one above it by
	 * name (tests/circles.sh) */
	void (*on_request)(srv_conn *c, const char *line, size_t len); /* srv_cmd_handle */
	void (*on_jobs_changed)(struct srv_server *srv);   /* srv_status_update */
	void (*on_worker_reaped)(struct srv_server *srv);  /* srv_shutdown_progress */
	void (*on_save_failed)(struct srv_server *srv, srv_job *job,
		const char *desc);                          /* srv_shutdown_save_failed */

	char rbuf[SRV_READ_BUF];           /* every read lands here: reads never interleave on
					    * one thread, and each is consumed before the next */
} srv_server;

/* ---- shutdown (srv_life.c) ---- */

/* Starts the shutdown: job-stop {save} to every worker (queued jobs are stopped), then,
 * once the last worker is reaped, stop accepting, remove the socket and close everything;
 * the socket is served until then (queries answered, job-start refused). waiter (may be
 * NULL: a signal) is a daemon-shutdown to answer at the end; by_signal says who asked. why
 * goes to the log. A second signal SIGKILLs the workers at once. */
void srv_shutdown(srv_server *srv, int save, int by_signal, srv_waiter *waiter,
	const char *why);
/* Called whenever a worker is reaped: finishes the shutdown once none is left. */
void srv_shutdown_progress(srv_server *srv);
/* A job's final save failed during the shutdown (desc says why). After daemon-shutdown
 * {save}: the shutdown is called off, its requests get IOError, and the job and the daemon
 * go on. After a signal: the job is stopped without saving (it keeps its last checkpoint). */
void srv_shutdown_save_failed(srv_server *srv, srv_job *job, const char *desc);

/* ---- the service manager (srv_life.c) ---- */

/* The job table changed (a job's state): tells the service manager STATUS= at once when
 * its text differs from the last sent. Does nothing without $NOTIFY_SOCKET. */
void srv_status_update(srv_server *srv);
/* Sends one notification (printf-style "KEY=VALUE" lines; nothing without $NOTIFY_SOCKET).
 * A failure is logged once, and again only after a send succeeded. */
void srv_life_notify(srv_server *srv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* READY=1 with the STATUS= text of the moment (serving, or serving again). */
void srv_life_ready(srv_server *srv);
/* Starts the timers that keep the manager informed (WATCHDOG=1, STATUS= refreshes,
 * EXTEND_TIMEOUT_USEC= while workers stop), unreferenced; _close closes them. */
void srv_life_timers_start(srv_server *srv);
void srv_life_timers_close(srv_server *srv);

/* ---- logging (srv_util.c) ---- */

/* One line to stderr: "rematd: " + the message + "\n", written with a single call. Never
 * pass client input unquoted: use srv_quote. */
void srv_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Writes s[0..n) into out (SRV_QUOTE_BUF bytes) in double quotes, control characters,
 * quotes, backslashes and bytes >= 0x80 escaped, cut after SRV_QUOTE_MAX input bytes with
 * "..." appended. Returns out. */
char *srv_quote(const char *s, size_t n, char *out);

/* snprintf for messages, where cutting a long path short is fine: says so to the reader
 * (and to -Wformat-truncation, which only checks direct snprintf calls). */
void srv_fmt(char *dst, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Copies the UTF-8 text src into dst (len bytes), cut at a character boundary when it
 * does not fit: text that goes back into JSON must stay valid UTF-8. */
void srv_copy_text(char *dst, size_t len, const char *src);

/* The monotonic clock in milliseconds (uv_hrtime based, not the loop's cached time). */
uint64_t srv_now_ms(void);

/* ---- waiters (srv_util.c) ---- */

/* A waiter for connection conn_id and the client's id (borrowed, may be NULL); NULL when
 * out of memory. */
srv_waiter *srv_waiter_new(unsigned conn_id, const json_t *id);
void srv_waiter_free(srv_waiter *w);
/* Pushes w on *list. */
void srv_waiter_push(srv_waiter **list, srv_waiter *w);

/* ---- credentials (srv_util.c) ---- */

/* 1 when a job of owner must run as another user than rematd's: rematd is root and the
 * owner is not. */
int srv_cred_drops(const srv_server *srv, const eng_cred *owner);
/* 1 for root and rematd's own user: exempt from the caps each other user has (on
 * connections, queued jobs, specs being checked), and theirs is the connections' reserve */
int srv_privileged(const srv_server *srv, uid_t uid);
/* The arguments a remat-train run for owner takes: "--as" and its value (in buf,
 * ENG_CRED_ARG_LEN bytes) into args[0..1] when srv_cred_drops; returns how many (0, 2). */
int srv_cred_args(const srv_server *srv, const eng_cred *owner, char *buf, char **args);

#endif
