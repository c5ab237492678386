/* srv_job_start.c - job-start: the checks of a spec (at once, then remat-train --check as
 * its owner), and once it passed, the new job's id, directory, files and place in the
 * queue. See srv_job.h.
 * Not here: running the checks and reading their answers (srv_job_check.c), the table
 * (srv_job.c), resume and plans (srv_job_resume.c).
 */
#include "srv_job.h"
#include "srv_job_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "eng_err.h"
#include "eng_fs.h"
#include "eng_plan_json.h"
#include "eng_spec.h"
#include "srv_helper.h"
#include "srv_mpi.h"
#include "srv_worker.h"

#define JOB_SAVE_MODE 0700      /* STATE_DIR/jobs/ID/checkpoints, the owner's */
#define JOB_ID_TRIES 64         /* ids skipped because their directory exists already */

/* 0 when the queue has room for one more job of uid: SRV_MAX_QUEUED in all, and
 * SRV_QUEUED_PER_UID of one user but root or rematd's (with_checks: the checks under way
 * counted as queued, before a start's own); else -1 with why in desc (Busy). */
static int queue_room(const srv_server *srv, uid_t uid, int with_checks, char *desc,
	size_t desclen)
{
	int all = 0, mine = 0;
	for (int i = 0; i < srv->n_jobs; i++)
		if (srv->jobs[i]->state == PROTO_JOB_QUEUED) {
			all++;
			mine += srv->jobs[i]->owner.uid == uid;
		}
	if (with_checks) {
		all += srv_helper_count(srv);
		mine += srv_helper_count_of(srv, uid);
	}
	if (all >= SRV_MAX_QUEUED) {
		srv_fmt(desc, desclen, "too many jobs queued (at most %d)", SRV_MAX_QUEUED);
		return -1;
	}
	if (!srv_privileged(srv, uid) && mine >= SRV_QUEUED_PER_UID) {
		srv_fmt(desc, desclen, "uid %lu has %d jobs queued (at most %d a user)",
			(unsigned long)uid, mine, SRV_QUEUED_PER_UID);
		return -1;
	}
	return 0;
}

/* ---- job-start ---- */

/* Reserves a fresh id and creates its directory. */
static int job_reserve(srv_server *srv, srv_job *job, char *desc, size_t desclen)
{
	mode_t mode = srv->uid == 0 ? JOB_DIR_MODE_ROOT : JOB_DIR_MODE;
	for (int tries = 0; tries < JOB_ID_TRIES; tries++) {
		unsigned num = ++srv->next_job_num;
		snprintf(job->id, sizeof job->id, "j%u", num);
		if ((size_t)snprintf(job->dir, sizeof job->dir, "%s/jobs/%s", srv->state_dir,
			job->id) >= sizeof job->dir) {
			srv_fmt(desc, desclen, "state directory path too long");
			return -1;
		}
		eng_dir jd;
		eng_err e = {0};
		int r = eng_dir_make_at(&jd, &srv->jobs_d, job->id, mode, 1, &e);
		if (r == 0) {
			eng_dir_close(&jd);
			job->num = num;
			return 0;
		}
		if (r < 0) {
			srv_fmt(desc, desclen, "%s", e.msg);
			return -1;
		}
	}
	srv_fmt(desc, desclen, "cannot find a free job id under '%s/jobs'", srv->state_dir);
	return -1;
}

/* The default save directory, STATE_DIR/jobs/ID/checkpoints, the owner's: made and given
 * away relative to the job's directory, never through a link. */
static int job_make_save_dir(srv_job *job, char *desc, size_t desclen)
{
	eng_dir jd;
	eng_err e = {0};
	int fd = -1, rc = -1;
	if ((size_t)snprintf(job->save_dir, sizeof job->save_dir, "%s/checkpoints", job->dir) >=
		sizeof job->save_dir) {
		srv_fmt(desc, desclen, "state directory path too long");
		return -1;
	}
	if (srv_job_dir_open(job, &jd, &e) < 0)
		goto out;
	if (mkdirat(jd.fd, "checkpoints", JOB_SAVE_MODE) < 0 && errno != EEXIST) {
		eng_errf(&e, "cannot create '%s': %s", job->save_dir, strerror(errno));
		goto out;
	}
	fd = openat(jd.fd, "checkpoints", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || (srv_cred_drops(job->srv, &job->owner) &&
		fchown(fd, job->owner.uid, job->owner.gid) < 0)) {
		eng_errf(&e, "cannot give '%s' to uid %lu: %s", job->save_dir,
			(unsigned long)job->owner.uid, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	eng_dir_close(&jd);
	if (rc < 0)
		srv_fmt(desc, desclen, "%s", e.msg);
	return rc;
}

srv_job *srv_job__using(srv_server *srv, const char *save_dir, const srv_job *self)
{
	for (int i = 0; i < srv->n_jobs; i++) {
		srv_job *j = srv->jobs[i];
		if (j != self && j->state != PROTO_JOB_FINISHED &&
			strcmp(j->save_dir, save_dir) == 0)
			return j;
	}
	return NULL;
}

void srv_job__using_text(const srv_job *other, const char *save, char *desc, size_t desclen)
{
	char q[SRV_QUOTE_BUF];
	int ended = proto_job_state_final(other->state);
	srv_fmt(desc, desclen, "save directory %s is used by job %s (%s): two jobs never share "
		"one%s%s%s", srv_quote(save, strlen(save), q), other->id,
		proto_job_state_name(other->state), ended ? " (its resume goes on from there: "
		"resume it, or forget it with job-remove, " : "", ended ? other->id : "",
		ended ? " first)" : "");
}

/* 0 when a spec that passed its check may become a job now: the daemon is not shutting
 * down, its save directory (save, may be NULL) is no other job's, the queue has room, a
 * data parallel job can be launched. Else -1 with ec/desc. */
static int job_may_create(srv_server *srv, const eng_check_info *ci, const char *save,
	uid_t owner, proto_errclass *ec, char *desc, size_t desclen)
{
	srv_job *other = save && save[0] ? srv_job__using(srv, save, NULL) : NULL;
	*ec = PROTO_ERR_BUSY;
	if (srv->shutting_down) {
		*ec = PROTO_ERR_INVALID_STATE;
		srv_fmt(desc, desclen, "the daemon is shutting down");
		return -1;
	}
	if (other) {
		srv_job__using_text(other, save, desc, desclen);
		return -1;
	}
	if (queue_room(srv, owner, 0, desc, desclen) < 0)
		return -1;
	if (srv_mpi_check(srv, ci, desc, desclen) < 0) {
		*ec = PROTO_ERR_INVALID_PARAMETER;
		return -1;
	}
	return 0;
}

/* The new job's save directory, the spec's (save, may be NULL) or the default one made
 * (then written into k->spec's save.dir), and its job.json. 0, or -1 with ec/desc. */
static int job_files(srv_job *job, job_check *k, const char *save, proto_errclass *ec,
	char *desc, size_t desclen)
{
	*ec = PROTO_ERR_IO_ERROR;
	if (save && save[0]) {
		snprintf(job->save_dir, sizeof job->save_dir, "%s", save);
	} else {
		/* without a save dir ckpt-save and the final save would have nowhere to go */
		json_t *s = json_object_get(k->spec, "save");
		if (!s) {
			s = json_object();
			json_object_set_new(k->spec, "save", s);
		}
		if (job_make_save_dir(job, desc, desclen) < 0)
			return -1;
		if (!s || json_object_set_new(s, "dir", json_string(job->save_dir)) < 0) {
			*ec = PROTO_ERR_INTERNAL;
			srv_fmt(desc, desclen, "out of memory");
			return -1;
		}
	}
	return srv_job__write_file(job, "job.json", k->spec, desc, desclen);
}

/* The job of a spec that passed its check: its id, files and place in the queue. */
static srv_job *job_create(srv_server *srv, job_check *k, const eng_check_info *ci,
	proto_errclass *ec, char *desc, size_t desclen)
{
	const char *save = ci->save_dir;
	if (job_may_create(srv, ci, save, k->owner.uid, ec, desc, desclen) < 0)
		return NULL;
	srv_job *job = srv_job_alloc(srv);
	if (!job) {
		srv_fmt(desc, desclen, "out of memory");
		return NULL;
	}
	job->owner = k->owner;
	if (srv_job_table_add(srv, job, 0, desc, desclen) < 0) {
		free(job);
		return NULL;
	}
	job->info = srv_job__check_info(ci);
	srv_auto_from_spec(&job->autoc, k->spec);
	srv_pool_job_init(job, k->spec, 0);
	*ec = PROTO_ERR_INVALID_PARAMETER;
	if (srv_pool_could_fit(job, desc, desclen) < 0)
		goto fail;
	*ec = PROTO_ERR_IO_ERROR;
	if (job_reserve(srv, job, desc, desclen) < 0 ||
		job_files(job, k, save, ec, desc, desclen) < 0)
		goto fail;
	srv_copy_text(job->name, sizeof job->name, ci->name[0] ? ci->name : "job");
	job->steps = ci->steps;
	job->policy = eng_policy_json(&ci->policy);
	job->created = (int64_t)time(NULL);
	snprintf(job->reason, sizeof job->reason, "job-start");
	srv_job_save_record(job);
	char q[SRV_QUOTE_BUF], qd[SRV_QUOTE_BUF];
	srv_log("job %s queued (name %s, %d steps, uid %lu, save dir %s)", job->id,
		srv_quote(job->name, strlen(job->name), q), job->steps,
		(unsigned long)job->owner.uid, srv_quote(job->save_dir, strlen(job->save_dir), qd));
	srv_job_emit_state(job, "none");
	srv_job_schedule(srv);
	return job;
fail:
	if (job->dir[0]) /* only when it is still empty */
		unlinkat(srv->jobs_d.fd, job->id, AT_REMOVEDIR);
	for (int i = 0; i < srv->n_jobs; i++)
		if (srv->jobs[i] == job)
			srv_job__table_take(srv, i);
	srv_job_free(job);
	return NULL;
}

/* The check's "warnings" (lines: allowed, but not what the spec hopes), passed on in
 * job-start's reply ret as remat-train gave them, when they are a list of strings. */
static void check_warnings(const eng_check_info *ci, json_t *ret)
{
	if (ret && ci->warning[0])
		json_object_set_new(ret, "warnings", json_pack("[s]", ci->warning));
}

/* job-start's check passed (job_check.done): the job, queued; the reply (its id, state,
 * warnings, what trains), or NULL with ec/desc. */
static json_t *start_checked(srv_server *srv, job_check *k, const eng_check_info *ci,
	proto_errclass *ec, char *desc, size_t desclen)
{
	srv_job *job = job_create(srv, k, ci, ec, desc, desclen);
	json_t *ret = NULL;
	if (job)
		ret = json_pack("{s:s, s:s}", "job", job->id, "state",
			proto_job_state_name(job->state));
	if (job) {
		check_warnings(ci, ret);
		srv_job__model_fields(job, ret);
	}
	return ret;
}

int srv_job_start(srv_conn *c, const json_t *spec, const char *name, const json_t *id,
	proto_errclass *ec, char *desc, size_t desclen)
{
	srv_server *srv = c->srv;
	*ec = PROTO_ERR_INVALID_PARAMETER;
	if (!json_is_object(spec)) {
		srv_fmt(desc, desclen, "'spec' must be an object");
		return -1;
	}
	if (srv_job__check_paths(spec, desc, desclen) < 0)
		return -1;
	job_check *k = calloc(1, sizeof *k);
	if (!k || !(k->spec = json_deep_copy(spec))) {
		*ec = PROTO_ERR_INTERNAL;
		srv_fmt(desc, desclen, "out of memory");
		free(k);
		return -1;
	}
	if (name)
		json_object_set_new(k->spec, "name", json_string(name));
	if (srv_job__check_syntax(k->spec, desc, desclen) < 0) {
		srv_job__check_free(k);
		return -1;
	}
	*ec = PROTO_ERR_BUSY;
	if (queue_room(srv, c->cred.uid, 1, desc, desclen) < 0) {
		srv_job__check_free(k);
		return -1;
	}
	/* no room for the starter's record: said now, before the check (and again after it,
	 * the table having changed meanwhile) */
	if (srv_job_table_room(srv, c->cred.uid, desc, desclen) < 0) {
		srv_job__check_free(k);
		return -1;
	}
	k->kind = CHECK_START;
	k->done = start_checked;
	k->conn_id = c->id;
	k->id = id ? json_incref((json_t *)id) : NULL;
	k->owner = c->cred;
	if (srv_job__check_run(srv, k, c, ec, desc, desclen) < 0) {
		srv_job__check_free(k);
		return -1;
	}
	return 0;
}
