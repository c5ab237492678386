/* srv_store.h - the job table on disk: one record per job, STATE_DIR/jobs/ID/state.json.
 *
 * A record holds what `rematctl ls`, `status` and `resume` need after rematd restarts: the
 * id, name, owner, state and reason, step, loss, learning rate, last checkpoint, exit
 * status, the policy as last reported, the memory controller (its budget and source, or
 * off: srv_auto.h), the save directory, the spec the worker runs, and what the spec's check
 * said (shape, policy, aliases). It is written durably and whole
 * (eng_fs_write: a temporary file, fsync, rename, fsync of the directory), mode 0600, at
 * every change of state, checkpoint or policy; a crash leaves the old record or the new
 * one. Not here: what the states mean (srv_job.h).
 */
#ifndef SRV_STORE_H
#define SRV_STORE_H

#include <stddef.h>

#include "srv_job.h"

#define SRV_STORE_FORMAT 1        /* "format" of the records written and read */
#define SRV_STORE_FILE "state.json"

/* Writes job's record; -1 with a message. */
int srv_store_save(const srv_job *job, char *err, size_t errlen);

/* Reads a record (o, a state.json's object) into job, whose id and directory are set: 0,
 * or -1 with why in err. */
int srv_store_read(srv_job *job, const json_t *o, char *err, size_t errlen);

/* ---- srv_store_load.c ---- */

/* Loads every record under STATE_DIR/jobs into the table, in id order, and makes new ids
 * follow the highest STATE_DIR/jobs/jN there. A job that was
 * alive (starting, running, paused, stopping) becomes interrupted, its record rewritten; a
 * queued one stays queued. A record that cannot be read is logged and skipped (its files
 * stay). 0, or -1 with a message when the directory cannot be read. */
int srv_store_load(srv_server *srv, char *err, size_t errlen);

/* What the workers run (remat-train --info's answer) is kept in STATE_DIR/worker-info.json
 * with the worker binary's identity (device, inode, size, modification time): a later
 * rematd answers daemon-info from it at once, while it asks the worker again in the
 * background. */
#define SRV_STORE_WORKER_INFO "worker-info.json"

/* The cached answer for the worker at path as it is now on disk (a new reference), or NULL
 * when there is none, or it was another binary's. */
json_t *srv_store_worker_info(const srv_server *srv, const char *path);

/* Keeps info as the answer of the worker at path; -1 with a message. */
int srv_store_save_worker_info(const srv_server *srv, const char *path, const json_t *info,
	char *err, size_t errlen);

#endif
