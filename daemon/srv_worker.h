/* srv_worker.h - one job's worker process and its channel, for srv_job.c (internal to the
 * daemon; srv_job.h describes the behaviour).
 *
 * A worker goes: spawned (proc_alive, chan_open) -> its channel ends and its process exits,
 * in either order -> reaped once both happened (the job's final state, pending requests
 * answered, the slot freed). Grace periods: a channel that ends while the process lives on
 * gets SRV_WORKER_EOF_GRACE_MS before SIGKILL; a process that exits while its channel is
 * open gets SRV_WORKER_DRAIN_MS for its last lines to be read.
 */
#ifndef SRV_WORKER_H
#define SRV_WORKER_H

#include <jansson.h>

#include "srv_job.h"

#define SRV_WORKER_EOF_GRACE_MS 10000 /* channel closed, process alive: SIGKILL after this */
#define SRV_WORKER_DRAIN_MS 2000      /* process gone, channel open: read its rest this long */
#define SRV_WORKER_CONTROL_FD 3       /* the worker's end of the socketpair */
#define SRV_WORKER_METRICS_FD 4       /* the job's metrics.jsonl, opened by rematd */
#define SRV_METRICS_FILE "metrics.jsonl" /* in the job's directory */

/* Starts queued jobs, oldest first, while worker slots are free (not while shutting down). */
void srv_job_schedule(srv_server *srv);
/* Spawns the job's worker (state starting), or marks the job failed when it cannot. */
void srv_worker_spawn(srv_job *job);
/* The job's channel is the connected socket *fd (taken: -1 after), read from now on; the
 * worker's subscription goes first. A channel that cannot be opened kills the worker. */
void srv_worker_channel_open(srv_job *job, int *fd);
/* Sends a request with a fresh integer id; its reply goes to connection conn_id with
 * client_id (borrowed), or is only logged when conn_id is 0 (rematd's own). 0 or -1. */
int srv_worker_request(srv_job *job, const char *execute, const json_t *args,
	unsigned conn_id, const json_t *client_id);
/* SIGKILLs a live worker and its process group (mpirun's local ranks); why is kept for the
 * job's reason. */
void srv_worker_kill(srv_job *job, const char *why);
/* Answers, from the table or with Busy, queries a worker has left unanswered for
 * SRV_WORKER_REPLY_MS (called every second). */
void srv_worker_sweep(srv_server *srv);

#endif
