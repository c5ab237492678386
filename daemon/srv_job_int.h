/* srv_job_int.h - what the pieces of the job table share (srv_job.c, srv_job_start.c,
 * srv_job_check.c, srv_job_resume.c); not part of the daemon's interface (srv_job.h is).
 */
#ifndef SRV_JOB_INT_H
#define SRV_JOB_INT_H

#include <jansson.h>

#include "eng_fs.h"
#include "eng_plan_json.h"
#include "srv_job.h"

#define JOB_DIR_MODE 0700       /* STATE_DIR/jobs/ID when rematd runs as its users */
#define JOB_DIR_MODE_ROOT 0711  /* as root: the owner of a job must reach its checkpoints */

/* What a check was run for, and who waits for its answer. */
typedef enum { CHECK_START, CHECK_RESUME, CHECK_PLAN, CHECK_SCAN } check_kind;

typedef struct job_check job_check;

/* What a check's answer does for its kind (job_check.done): given a good answer ci, the
 * reply (new reference), or NULL with *ec and desc. A look (CHECK_SCAN) is called with a
 * failed one too (ci NULL or not ok: *ec and desc say why), and answers no one. */
typedef json_t *(*job_checked_fn)(srv_server *srv, job_check *k, const eng_check_info *ci,
	proto_errclass *ec, char *desc, size_t desclen);

struct job_check {
	check_kind kind;
	job_checked_fn done;    /* acts on the answer (set by whoever runs the check) */
	unsigned conn_id;       /* the client waiting (0: none) */
	json_t *id;             /* its request's id (own reference, or NULL) */
	json_t *spec;           /* the spec checked (own reference) */
	json_t *args;           /* CHECK_PLAN: remat-plan's arguments (own reference) */
	eng_cred owner;         /* whose check it is */
	srv_job *job;           /* CHECK_RESUME, CHECK_SCAN: the job (held by
				 * job->checking) */
};

/* ---- the table (srv_job.c) ---- */

/* Takes the record at index i out of the table (not freed). */
void srv_job__table_take(srv_server *srv, int i);
/* What trains, from the check's "model": arch, params and trainable_params into o. */
void srv_job__model_fields(const srv_job *job, json_t *o);

/* ---- checks (srv_job_check.c) ---- */

/* Refuses relative paths in spec, naming the key: 0, or -1 with desc. */
int srv_job__check_paths(const json_t *spec, char *desc, size_t desclen);
/* The spec's own syntax (unknown keys, types, ranges), at once: 0, or -1 with desc. */
int srv_job__check_syntax(const json_t *spec, char *desc, size_t desclen);
/* Runs remat-train --check on k->spec as k->owner for k; c (may be NULL) waits. 0, or -1
 * with ec/desc (k is still the caller's). */
int srv_job__check_run(srv_server *srv, job_check *k, srv_conn *c, proto_errclass *ec,
	char *desc, size_t desclen);
void srv_job__check_free(job_check *k);
/* A copy of what a check said, kept with the job (malloc'd), or NULL. */
eng_check_info *srv_job__check_info(const eng_check_info *ci);
/* Writes spec to job->dir/name durably, mode 0600, never through a symlink. */
int srv_job__write_file(srv_job *job, const char *name, const json_t *spec, char *desc,
	size_t desclen);

/* ---- save directories (srv_job_start.c) ---- */

/* The job other than self (may be NULL) that holds save_dir, or NULL: a live or queued one
 * writing there, or an ended one that a resume would go on from there (stopped, failed,
 * interrupted: every record but a finished one's, until job-remove forgets it). */
srv_job *srv_job__using(srv_server *srv, const char *save_dir, const srv_job *self);
/* Why save is refused, other holding it, into desc. */
void srv_job__using_text(const srv_job *other, const char *save, char *desc, size_t desclen);

#endif
