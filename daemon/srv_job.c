/* srv_job.c - the job table: ids, job-start's checks and files, the queue, states and their
 * events, resume, cancel and removal, answers from the table (job-status, job-list, plans
 * of jobs without a worker), shutdown of every job. See srv_job.h.
 * Not here: the worker processes and their channels (srv_worker.c), the records on disk
 * (srv_store.c), running remat-train --check (srv_helper.c).
 */
#include "srv_job.h"
#include "srv_mpi.h"

#include <dirent.h>
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
#include "srv_store.h"
#include "srv_worker.h"

#define JOB_DIR_MODE 0700       /* STATE_DIR/jobs/ID when rematd runs as its users */
#define JOB_DIR_MODE_ROOT 0711  /* as root: the owner of a job must reach its checkpoints */
#define JOB_SAVE_MODE 0700      /* STATE_DIR/jobs/ID/checkpoints, the owner's */
#define JOB_FILE_MODE 0600      /* job.json, resume.json: a spec may name private paths */
#define JOB_ID_TRIES 64         /* ids skipped because their directory exists already */

static const char *const job_state_names[SRV_JOB_NSTATES] = {
	[SRV_JOB_QUEUED] = "queued",     [SRV_JOB_STARTING] = "starting",
	[SRV_JOB_RUNNING] = "running",   [SRV_JOB_PAUSED] = "paused",
	[SRV_JOB_STOPPING] = "stopping", [SRV_JOB_FINISHED] = "finished",
	[SRV_JOB_STOPPED] = "stopped",   [SRV_JOB_FAILED] = "failed",
	[SRV_JOB_INTERRUPTED] = "interrupted",
};

/* Keys of a spec that name files: each must be an absolute path, since the worker runs in
 * the job's directory and a client's working directory means nothing to rematd. */
static const char *const job_path_keys[][2] = {
	{"data", "train"}, {"data", "val"}, {"model", "init_from"}, {"save", "dir"},
	{"parallel", "hostfile"},
};

/* What a check was run for, and who waits for its answer. */
typedef enum { CHECK_START, CHECK_RESUME, CHECK_PLAN, CHECK_SCAN } check_kind;

typedef struct job_check {
	check_kind kind;
	unsigned conn_id;       /* the client waiting (0: none) */
	json_t *id;             /* its request's id (own reference, or NULL) */
	json_t *spec;           /* the spec checked (own reference) */
	json_t *args;           /* CHECK_PLAN: remat-plan's arguments (own reference) */
	eng_cred owner;         /* whose check it is */
	srv_job *job;           /* CHECK_RESUME, CHECK_SCAN: the job (held by
				 * job->checking) */
} job_check;

const char *srv_job_state_name(srv_job_state s)
{
	ENG_ASSERT((unsigned)s < SRV_JOB_NSTATES);
	return job_state_names[s];
}

int srv_job_state_parse(const char *name)
{
	for (int i = 0; name && i < SRV_JOB_NSTATES; i++)
		if (strcmp(job_state_names[i], name) == 0)
			return i;
	return -1;
}

int srv_job_state_final(srv_job_state s)
{
	return s == SRV_JOB_FINISHED || s == SRV_JOB_STOPPED || s == SRV_JOB_FAILED ||
	       s == SRV_JOB_INTERRUPTED;
}

srv_job *srv_job_find(srv_server *srv, const char *id)
{
	for (int i = 0; i < srv->n_jobs; i++)
		if (strcmp(srv->jobs[i]->id, id) == 0)
			return srv->jobs[i];
	return NULL;
}

int srv_job_may_change(const srv_job *job, const srv_conn *c, char *desc, size_t desclen)
{
	uid_t u = c->cred.uid;
	if (u == job->owner.uid || u == job->srv->uid || u == 0)
		return 1;
	srv_fmt(desc, desclen, "job %s belongs to uid %lu; uid %lu may only look at it", job->id,
		(unsigned long)job->owner.uid, (unsigned long)u);
	return 0;
}

/* ---- state changes ---- */

void srv_job_save_record(srv_job *job)
{
	char err[ENG_ERR_LEN];
	job->record_ms = srv_now_ms();
	if (!job->dir[0] || srv_store_save(job, err, sizeof err) == 0)
		return;
	char q[SRV_QUOTE_BUF];
	srv_log("job %s: cannot write its record: %s", job->id, srv_quote(err, strlen(err), q));
}

void srv_job_emit_state(srv_job *job, const char *from)
{
	/* the service manager's STATUS= lists the jobs and their states */
	srv_status_update(job->srv);
	json_t *data = json_pack("{s:s, s:s, s:s, s:s}", "job", job->id, "from", from, "to",
		srv_job_state_name(job->state), "reason", job->reason);
	if (!data)
		return;
	json_object_set_new(data, "exit_status",
		job->exit_status >= 0 ? json_integer(job->exit_status) : json_null());
	/* beyond docs/protocol.md's keys (clients ignore unknown ones): what a failure needs */
	if (job->term_signal)
		json_object_set_new(data, "signal", json_integer(job->term_signal));
	if (srv_job_state_final(job->state))
		json_object_set_new(data, "last_checkpoint", job->last_checkpoint ?
			json_string(job->last_checkpoint) : json_null());
	sv_msg *m = sv_msg_take(proto_event_line("JOB_STATE_CHANGED", data));
	json_decref(data);
	if (!m) {
		srv_log("job %s: out of memory building an event", job->id);
		return;
	}
	srv_conn_publish(job->srv, job->id, "JOB_STATE_CHANGED", m);
	sv_msg_unref(m);
}

void srv_job_set_state(srv_job *job, srv_job_state to, const char *reason)
{
	const char *from = srv_job_state_name(job->state);
	job->state = to;
	srv_copy_text(job->reason, sizeof job->reason, reason);
	srv_job_save_record(job);
	srv_job_emit_state(job, from);
}

/* ---- the table ---- */

int srv_job_table_init(srv_server *srv, char *err, size_t errlen)
{
	eng_err e = {0};
	struct stat st;
	mode_t mode = srv->uid == 0 ? JOB_DIR_MODE_ROOT : JOB_DIR_MODE;
	srv->jobs_d.fd = -1;
	/* the state directory is the administrator's path (its links followed, as for any
	 * path a user names for himself); what is in it is reached relative to it */
	if (eng_dir_open(&srv->state_d, srv->state_dir, &e) < 0)
		goto fail;
	/* as root, the owners of jobs pass through to their checkpoints (nothing is
	 * listable): our own state directory gets that mode */
	if (srv->uid == 0 && fstat(srv->state_d.fd, &st) == 0 && st.st_uid == 0 &&
		(st.st_mode & 07777) != mode && fchmod(srv->state_d.fd, mode) < 0) {
		eng_errf(&e, "cannot set the mode of '%s': %s", srv->state_dir, strerror(errno));
		goto fail;
	}
	if (eng_dir_make_at(&srv->jobs_d, &srv->state_d, "jobs", mode, 0, &e) < 0)
		goto fail;
	return srv_store_load(srv, err, errlen);
fail:
	srv_fmt(err, errlen, "%s", e.msg);
	return -1;
}

int srv_job_dir_open(const srv_job *job, eng_dir *d, eng_err *err)
{
	return eng_dir_open_at(d, &job->srv->jobs_d, job->id, err);
}

srv_job *srv_job_alloc(srv_server *srv)
{
	srv_job *job = calloc(1, sizeof *job);
	if (!job)
		return NULL;
	job->srv = srv;
	job->exit_status = -1;
	job->mpi_lfd = -1;
	job->state = SRV_JOB_QUEUED;
	snprintf(job->spec_file, sizeof job->spec_file, "job.json");
	return job;
}

void srv_job_free(srv_job *job)
{
	if (!job)
		return;
	srv_worker_forget(job);
	free(job->last_checkpoint);
	json_decref(job->stop_ret);
	json_decref(job->policy);
	json_decref(job->info);
	json_decref(job->last_save_error);
	free(job);
}

void srv_job_table_free(srv_server *srv)
{
	for (int i = 0; i < srv->n_jobs; i++)
		srv_job_free(srv->jobs[i]);
	free(srv->jobs);
	srv->jobs = NULL;
	srv->n_jobs = srv->cap_jobs = 0;
	eng_dir_close(&srv->jobs_d);
	eng_dir_close(&srv->state_d);
}

/* 1 when a record may go from memory: ended, its handles closed, no check on it. */
static int job_forgettable(const srv_job *job)
{
	return srv_job_state_final(job->state) && job->handles_open == 0 && !job->checking;
}

/* Takes the record at index i out of the table (not freed). */
static void job_table_take(srv_server *srv, int i)
{
	memmove(&srv->jobs[i], &srv->jobs[i + 1], (size_t)(srv->n_jobs - i - 1) *
		sizeof srv->jobs[0]);
	srv->n_jobs--;
}

/* 1 when a record may go to make room for its owner's next job: finished or failed (a
 * stopped or interrupted one can be resumed: only its owner's job-remove forgets it). */
static int job_evictable(const srv_job *job)
{
	return (job->state == SRV_JOB_FINISHED || job->state == SRV_JOB_FAILED) &&
	       job_forgettable(job);
}

/* The index of uid's oldest evictable record, or -1; *mine counts uid's records. */
static int job_table_victim(const srv_server *srv, uid_t uid, int *mine)
{
	int victim = -1;
	*mine = 0;
	for (int i = 0; i < srv->n_jobs; i++) {
		if (srv->jobs[i]->owner.uid != uid)
			continue;
		(*mine)++;
		if (victim < 0 && job_evictable(srv->jobs[i]))
			victim = i;
	}
	return victim;
}

/* -1 (with desc) when a record of uid's needs room and none of theirs can go; else the
 * index of the one to forget, or SRV_MAX_TABLE when there is room already. */
static int job_table_make_room(const srv_server *srv, uid_t uid, char *desc, size_t desclen)
{
	int mine, victim = job_table_victim(srv, uid, &mine);
	if (mine < SRV_MAX_TABLE_PER_UID && srv->n_jobs < SRV_MAX_TABLE)
		return SRV_MAX_TABLE;
	if (victim >= 0)
		return victim;
	if (mine >= SRV_MAX_TABLE_PER_UID)
		srv_fmt(desc, desclen, "your %d job records (uid %lu) are all resumable or "
			"alive: remove some with rematctl rm", mine, (unsigned long)uid);
	else
		srv_fmt(desc, desclen, "the job table is full (%d records) and none of yours (uid "
			"%lu) is finished or failed: remove some with rematctl rm", srv->n_jobs,
			(unsigned long)uid);
	return -1;
}

int srv_job_table_room(const srv_server *srv, uid_t uid, char *desc, size_t desclen)
{
	return job_table_make_room(srv, uid, desc, desclen) < 0 ? -1 : 0;
}

int srv_job_table_add(srv_server *srv, srv_job *job, int must, char *desc, size_t desclen)
{
	int i = job_table_make_room(srv, job->owner.uid, desc, desclen);
	if (i < 0 && !must)
		return -1;
	if (i >= 0 && i < srv->n_jobs) {
		/* forgotten by this daemon only: its record stays on disk */
		srv_job_free(srv->jobs[i]);
		job_table_take(srv, i);
	}
	if (srv->n_jobs == srv->cap_jobs) {
		int cap = srv->cap_jobs ? srv->cap_jobs * 2 : 16;
		srv_job **jobs = realloc(srv->jobs, (size_t)cap * sizeof *jobs);
		if (!jobs) {
			srv_fmt(desc, desclen, "out of memory");
			return -1;
		}
		srv->jobs = jobs;
		srv->cap_jobs = cap;
	}
	srv->jobs[srv->n_jobs++] = job;
	return 0;
}

/* Starts queued jobs, oldest first, while worker slots are free. */
void srv_job_schedule(srv_server *srv)
{
	for (int i = 0; i < srv->n_jobs; i++) {
		if (srv->shutting_down || srv->n_active >= srv->max_jobs)
			return;
		if (srv->jobs[i]->state == SRV_JOB_QUEUED && !srv->jobs[i]->checking)
			srv_worker_spawn(srv->jobs[i]);
	}
}

/* ---- checks of a spec ---- */

/* Refuses relative paths, naming the key. */
static int job_check_paths(const json_t *spec, char *desc, size_t desclen)
{
	for (size_t i = 0; i < sizeof job_path_keys / sizeof job_path_keys[0]; i++) {
		const json_t *sec = json_object_get(spec, job_path_keys[i][0]);
		const json_t *v = json_is_object(sec) ? json_object_get(sec, job_path_keys[i][1])
						      : NULL;
		/* a value of the wrong type is left to the engine's check, which names it */
		if (!json_is_string(v) || json_string_value(v)[0] == '/')
			continue;
		char q[SRV_QUOTE_BUF];
		srv_fmt(desc, desclen, "spec: '%s.%s' must be an absolute path, not %s",
			job_path_keys[i][0], job_path_keys[i][1],
			srv_quote(json_string_value(v), json_string_length(v), q));
		return -1;
	}
	return 0;
}

/* The spec's own syntax (unknown keys, types, ranges), at once, before any helper runs. */
static int job_check_syntax(const json_t *spec, char *desc, size_t desclen)
{
	char *text = json_dumps(spec, JSON_COMPACT);
	if (!text) {
		srv_fmt(desc, desclen, "spec: cannot serialise it (out of memory?)");
		return -1;
	}
	eng_spec *es = calloc(1, sizeof *es);
	eng_err err = {0};
	int r = es ? eng_spec_parse(es, text, &err) : eng_errf(&err, "out of memory");
	free(text);
	free(es);
	if (r < 0)
		srv_fmt(desc, desclen, "spec: %s", err.msg);
	return r;
}

static int job_count(const srv_server *srv, srv_job_state s)
{
	int n = 0;
	for (int i = 0; i < srv->n_jobs; i++)
		n += srv->jobs[i]->state == s;
	return n;
}

static void check_free(job_check *k)
{
	json_decref(k->id);
	json_decref(k->spec);
	json_decref(k->args);
	free(k);
}

static void check_done(srv_server *srv, void *ud, const json_t *out, const char *why);

/* Runs remat-train --check on spec as owner for k; c (may be NULL) waits. */
static int check_run(srv_server *srv, job_check *k, srv_conn *c, proto_errclass *ec,
	char *desc, size_t desclen)
{
	static const char *const args[] = {"--check", NULL};
	if (srv_helper_count(srv) >= SRV_HELPER_MAX) {
		*ec = PROTO_ERR_BUSY;
		srv_fmt(desc, desclen, "%d specs are being checked already; try again",
			SRV_HELPER_MAX);
		return -1;
	}
	if (srv_helper_run(srv, "check", args, k->spec, &k->owner, SRV_CHECK_MS, check_done, k,
		desc, desclen) < 0) {
		*ec = PROTO_ERR_INTERNAL;
		return -1;
	}
	if (c)
		c->inflight++;
	return 0;
}

/* A check's error as a reply: the worker's own message, in the class it gave (Busy when
 * another job holds the save directory, InvalidParameter when the spec must change). */
static proto_errclass check_error(const json_t *out, const char *why, char *desc,
	size_t desclen)
{
	const char *msg = json_string_value(json_object_get(out, "error"));
	const char *cls = json_string_value(json_object_get(out, "class"));
	if (!out) {
		srv_fmt(desc, desclen, "cannot check the spec: %s", why ? why : "no answer");
		return PROTO_ERR_INTERNAL;
	}
	srv_fmt(desc, desclen, "spec: %s", msg ? msg : "refused");
	return cls && strcmp(cls, proto_errclass_name(PROTO_ERR_BUSY)) == 0
		       ? PROTO_ERR_BUSY
		       : PROTO_ERR_INVALID_PARAMETER;
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

/* Writes spec to job->dir/name durably, mode 0600, never through a symlink. */
static int job_write_file(srv_job *job, const char *name, const json_t *spec, char *desc,
	size_t desclen)
{
	eng_dir d;
	eng_err e = {0};
	int rc = srv_job_dir_open(job, &d, &e);
	if (rc == 0) {
		rc = eng_fs_write_json(&d, name, JOB_FILE_MODE, spec, &e);
		eng_dir_close(&d);
	}
	if (rc < 0)
		srv_fmt(desc, desclen, "%s", e.msg);
	return rc;
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

/* What a check said, kept with the job (no "ok"). New reference. */
static json_t *check_info(const json_t *out)
{
	json_t *info = json_deep_copy(out);
	if (info)
		json_object_del(info, "ok");
	return info;
}

/* A live or queued job already writing to save_dir, or NULL. */
static srv_job *job_using(srv_server *srv, const char *save_dir)
{
	for (int i = 0; i < srv->n_jobs; i++) {
		srv_job *j = srv->jobs[i];
		if (!srv_job_state_final(j->state) && strcmp(j->save_dir, save_dir) == 0)
			return j;
	}
	return NULL;
}

/* The job of a spec that passed its check: its id, files and place in the queue. */
static srv_job *job_create(srv_server *srv, job_check *k, const json_t *out,
	proto_errclass *ec, char *desc, size_t desclen)
{
	const char *save = json_string_value(json_object_get(out, "save_dir"));
	srv_job *other = save && save[0] ? job_using(srv, save) : NULL;
	srv_job *job = NULL;
	*ec = PROTO_ERR_BUSY;
	if (srv->shutting_down) {
		*ec = PROTO_ERR_INVALID_STATE;
		srv_fmt(desc, desclen, "the daemon is shutting down");
		return NULL;
	}
	if (other) {
		char q[SRV_QUOTE_BUF];
		srv_fmt(desc, desclen, "save directory %s is used by job %s (%s): two jobs never "
			"share one", srv_quote(save, strlen(save), q), other->id,
			srv_job_state_name(other->state));
		return NULL;
	}
	if (job_count(srv, SRV_JOB_QUEUED) >= SRV_MAX_QUEUED) {
		srv_fmt(desc, desclen, "too many jobs queued (at most %d)", SRV_MAX_QUEUED);
		return NULL;
	}
	if (srv_mpi_check(srv, out, desc, desclen) < 0) {
		*ec = PROTO_ERR_INVALID_PARAMETER;
		return NULL;
	}
	job = srv_job_alloc(srv);
	if (!job) {
		srv_fmt(desc, desclen, "out of memory");
		return NULL;
	}
	job->owner = k->owner;
	if (srv_job_table_add(srv, job, 0, desc, desclen) < 0) {
		free(job);
		return NULL;
	}
	*ec = PROTO_ERR_IO_ERROR;
	if (job_reserve(srv, job, desc, desclen) < 0)
		goto fail;
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
			goto fail;
		if (!s || json_object_set_new(s, "dir", json_string(job->save_dir)) < 0) {
			*ec = PROTO_ERR_INTERNAL;
			srv_fmt(desc, desclen, "out of memory");
			goto fail;
		}
	}
	if (job_write_file(job, "job.json", k->spec, desc, desclen) < 0)
		goto fail;
	const char *jname = json_string_value(json_object_get(out, "name"));
	srv_copy_text(job->name, sizeof job->name, jname ? jname : "job");
	job->steps = (int)json_integer_value(json_object_get(out, "steps"));
	job->info = check_info(out);
	json_t *pol = json_object_get(out, "policy");
	job->policy = json_is_object(pol) ? json_incref(pol) : NULL;
	srv_auto_from_spec(&job->autoc, k->spec);
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
			job_table_take(srv, i);
	srv_job_free(job);
	return NULL;
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
	if (job_check_paths(spec, desc, desclen) < 0)
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
	if (job_check_syntax(k->spec, desc, desclen) < 0) {
		check_free(k);
		return -1;
	}
	*ec = PROTO_ERR_BUSY;
	if (job_count(srv, SRV_JOB_QUEUED) + srv_helper_count(srv) >= SRV_MAX_QUEUED) {
		srv_fmt(desc, desclen, "too many jobs queued (at most %d)", SRV_MAX_QUEUED);
		check_free(k);
		return -1;
	}
	/* no room for the starter's record: said now, before the check (and again after it,
	 * the table having changed meanwhile) */
	if (srv_job_table_room(srv, c->cred.uid, desc, desclen) < 0) {
		check_free(k);
		return -1;
	}
	k->kind = CHECK_START;
	k->conn_id = c->id;
	k->id = id ? json_incref((json_t *)id) : NULL;
	k->owner = c->cred;
	if (check_run(srv, k, c, ec, desc, desclen) < 0) {
		check_free(k);
		return -1;
	}
	return 0;
}

/* ---- resume ---- */

/* The spec a resume runs: job.json with the model taken from the save directory (resume:
 * true), the policy as last reported and the memory controller as the record keeps it
 * (its budget, or none when it was turned off). New reference, or NULL with desc. */
static json_t *resume_spec(const srv_job *job, char *desc, size_t desclen)
{
	char path[SRV_PATH_LEN + 16];
	json_error_t je;
	snprintf(path, sizeof path, "%s/job.json", job->dir);
	json_t *spec = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(spec)) {
		srv_fmt(desc, desclen, "cannot read job %s's spec: %s", job->id, je.text);
		json_decref(spec);
		return NULL;
	}
	json_t *model = json_pack("{s:s,s:b}", "init_from", job->save_dir, "resume", 1);
	json_t *remat = json_object_get(spec, "remat");
	if (!json_is_object(remat)) {
		remat = json_object();
		json_object_set_new(spec, "remat", remat);
	}
	/* the policy the run had when it ended, section by section, on top of the spec's */
	if (job->policy && remat)
		json_object_set_new(remat, "sections", json_deep_copy(job->policy));
	if (!model || json_object_set_new(spec, "model", model) < 0 ||
		srv_auto_spec(&job->autoc, spec) < 0) {
		srv_fmt(desc, desclen, "out of memory");
		json_decref(spec);
		return NULL;
	}
	return spec;
}

/* Clears what a worker left in the record, so that a new one can be spawned. */
static void job_reset_worker(srv_job *job)
{
	srv_worker_forget(job);
	job->pid = 0;
	job->proc_alive = job->chan_open = job->reaped = job->greeted = 0;
	job->final_reported = job->stop_requested = job->stop_saving = 0;
	job->final_from[0] = '\0';
	json_decref(job->stop_ret);
	job->stop_ret = NULL;
	job->rescan_at_ms = 0;
	job->exit_status = -1;
	job->term_signal = 0;
	job->killed_by[0] = '\0';
}

int srv_job_resume(srv_job *job, srv_conn *c, const json_t *id, proto_errclass *ec,
	char *desc, size_t desclen)
{
	srv_server *srv = job->srv;
	*ec = PROTO_ERR_INVALID_STATE;
	if (srv->shutting_down) {
		srv_fmt(desc, desclen, "the daemon is shutting down");
		return -1;
	}
	if (job->checking) {
		*ec = PROTO_ERR_BUSY;
		srv_fmt(desc, desclen, "job %s is being checked for its resume already", job->id);
		return -1;
	}
	if (job->state == SRV_JOB_FINISHED) {
		srv_fmt(desc, desclen, "job %s finished: it reached its last step (%d); start a "
			"new job from its checkpoint to train on", job->id, job->steps);
		return -1;
	}
	if (!srv_job_state_final(job->state)) {
		srv_fmt(desc, desclen, "job %s is %s", job->id, srv_job_state_name(job->state));
		return -1;
	}
	if (job->handles_open > 0) {
		/* its stop was answered, its process not yet reaped: a moment, not a refusal */
		*ec = PROTO_ERR_BUSY;
		srv_fmt(desc, desclen, "job %s is %s, but its worker has not exited yet: try again "
			"in a moment", job->id, srv_job_state_name(job->state));
		return -1;
	}
	job_check *k = calloc(1, sizeof *k);
	if (!k) {
		*ec = PROTO_ERR_INTERNAL;
		srv_fmt(desc, desclen, "out of memory");
		return -1;
	}
	*ec = PROTO_ERR_IO_ERROR;
	if (!(k->spec = resume_spec(job, desc, desclen))) {
		free(k);
		return -1;
	}
	k->kind = CHECK_RESUME;
	k->conn_id = c->id;
	k->id = id ? json_incref((json_t *)id) : NULL;
	k->owner = job->owner; /* it runs as its owner, whoever asked */
	k->job = job;
	if (check_run(srv, k, c, ec, desc, desclen) < 0) {
		check_free(k);
		return -1;
	}
	job->checking = 1;
	return 0;
}

/* The resume's check passed: resume.json, and the job queued again. */
static json_t *resume_checked(job_check *k, const json_t *out, proto_errclass *ec, char *desc,
	size_t desclen)
{
	srv_job *job = k->job;
	srv_server *srv = job->srv;
	*ec = PROTO_ERR_INVALID_STATE;
	if (srv->shutting_down) {
		srv_fmt(desc, desclen, "the daemon is shutting down");
		return NULL;
	}
	*ec = PROTO_ERR_IO_ERROR;
	if (job_write_file(job, "resume.json", k->spec, desc, desclen) < 0)
		return NULL;
	const char *ckpt = json_string_value(json_object_get(out, "init_from"));
	char why[SRV_REASON_LEN];
	job_reset_worker(job);
	snprintf(job->spec_file, sizeof job->spec_file, "resume.json");
	json_decref(job->info);
	job->info = check_info(out);
	job->step = (int)json_integer_value(json_object_get(out, "resume_step"));
	if (ckpt) {
		/* the newest one, found as its owner: newer than the record's when the worker
		 * saved on its way out of a daemon that had died */
		char *copy = strdup(ckpt);
		if (copy) {
			free(job->last_checkpoint);
			job->last_checkpoint = copy;
		}
	}
	char q[SRV_QUOTE_BUF], ctl[64];
	srv_fmt(why, sizeof why, "job-resume from %s", ckpt ? ckpt : "?");
	srv_auto_format(&job->autoc, ctl, sizeof ctl);
	srv_log("job %s queued again: resumes from %s at step %d, memory controller %s",
		job->id, srv_quote(ckpt ? ckpt : "", ckpt ? strlen(ckpt) : 0, q), job->step, ctl);
	srv_job_set_state(job, SRV_JOB_QUEUED, why);
	srv_job_schedule(srv);
	return json_pack("{s:s,s:s,s:i,s:s?}", "job", job->id, "state",
		srv_job_state_name(job->state), "step", job->step, "checkpoint", ckpt);
}

/* ---- a restart's look at a save directory ---- */

/* The step of a checkpoint directory named step_XXXXXXXX, or -1 (a named one). */
static int ckpt_step_of(const char *path)
{
	const char *base = path ? strrchr(path, '/') : NULL;
	char *end;
	base = base ? base + 1 : path;
	if (!base || strncmp(base, "step_", 5) != 0)
		return -1;
	long n = strtol(base + 5, &end, 10);
	return *end || n < 0 || n > 0x7fffffff ? -1 : (int)n;
}

/* The resume's check answered for a look (CHECK_SCAN): its checkpoint, the newest that
 * verifies as the owner sees the save directory, becomes the record's when it is newer;
 * a save directory another process holds (the orphaned worker saving) is looked at again
 * later. */
static void scan_done(srv_job *job, const json_t *out, proto_errclass ec, const char *desc)
{
	char q[SRV_QUOTE_BUF];
	const char *ckpt = json_string_value(json_object_get(out, "init_from"));
	int step = (int)json_integer_value(json_object_get(out, "resume_step"));
	if (!json_is_true(json_object_get(out, "ok"))) {
		if (ec == PROTO_ERR_BUSY && ++job->rescan_tries < SRV_RESCAN_TRIES &&
			!job->srv->shutting_down) {
			job->rescan_at_ms = srv_now_ms() + SRV_RESCAN_MS;
			return;
		}
		srv_log("job %s: its save directory was not looked at again: %s", job->id,
			srv_quote(desc, strlen(desc), q));
		return;
	}
	if (!ckpt || (job->last_checkpoint && strcmp(job->last_checkpoint, ckpt) == 0))
		return;
	int had = job->last_checkpoint ? ckpt_step_of(job->last_checkpoint) : -1;
	if (job->last_checkpoint && (had < 0 || step <= had))
		return; /* not newer than the record's (a named save is left as it is) */
	char *copy = strdup(ckpt);
	if (!copy)
		return;
	free(job->last_checkpoint);
	job->last_checkpoint = copy;
	if (step > job->step)
		job->step = step;
	srv_log("job %s: its save directory holds a newer checkpoint than its record: %s (step "
		"%d)", job->id, srv_quote(ckpt, strlen(ckpt), q), step);
	srv_job_save_record(job);
}

/* Runs the resume's check of job as its owner, for scan_done. */
static void scan_start(srv_job *job)
{
	char desc[PROTO_DESC_LEN];
	proto_errclass ec;
	job->rescan_at_ms = 0;
	job_check *k = calloc(1, sizeof *k);
	if (!k || !(k->spec = resume_spec(job, desc, sizeof desc))) {
		free(k);
		return;
	}
	k->kind = CHECK_SCAN;
	k->owner = job->owner;
	k->job = job;
	if (check_run(job->srv, k, NULL, &ec, desc, sizeof desc) < 0) {
		check_free(k);
		if (ec == PROTO_ERR_BUSY) /* helpers all taken: next time round */
			job->rescan_at_ms = srv_now_ms() + SRV_RESCAN_MS;
		return;
	}
	job->checking = 1;
}

void srv_job_rescan_due(srv_server *srv)
{
	uint64_t now = srv_now_ms();
	for (int i = 0; i < srv->n_jobs && !srv->shutting_down; i++) {
		srv_job *job = srv->jobs[i];
		/* only while it stays interrupted: a resume finds its checkpoint itself */
		if (!job->rescan_at_ms || now < job->rescan_at_ms || job->checking)
			continue;
		if (job->state != SRV_JOB_INTERRUPTED)
			job->rescan_at_ms = 0;
		else
			scan_start(job);
	}
}

/* ---- plans without a worker ---- */

/* The planner's view of a job from what its check said (info) and a policy on top of the
 * one it starts with (policy, may be NULL). -1 with desc when info lacks something. */
static int plan_job_from(const json_t *info, const json_t *policy, eng_plan_job *j,
	eng_aliases *al, char *desc, size_t desclen)
{
	json_t *cfg = json_object_get(info, "config"), *v;
	const char *key;
	eng_err err;
	memset(j, 0, sizeof *j);
	memset(al, 0, sizeof *al);
	eng_config_from_json(cfg, &j->cfg);
	j->B = (int)json_integer_value(json_object_get(info, "batch"));
	j->T = (int)json_integer_value(json_object_get(info, "seq_len"));
	j->chunk_rows = (int)json_integer_value(json_object_get(info, "chunk_rows"));
	const char *dev = json_string_value(json_object_get(info, "device"));
	j->device = dev && strcmp(dev, "cuda") == 0 ? ENG_DEVICE_CUDA : ENG_DEVICE_CPU;
	/* what the run will hold whatever its policy, as remat-train --check counted it */
	json_t *fx = json_object_get(info, "fixed_bytes");
	for (int c = 0; json_is_object(fx) && c < ENG_MEM_NCAT; c++) {
		json_t *n = json_object_get(fx, eng_mem_cat_name((eng_mem_cat)c));
		if (json_is_integer(n) && json_integer_value(n) > 0)
			j->fixed[c] = (size_t)json_integer_value(n);
	}
	j->fixed_source = json_is_object(fx) ? "engine" : NULL;
	/* and the process's untracked term the check measured of itself, and a save's
	 * snapshot: every job of rematd's saves */
	json_t *u = json_object_get(info, "untracked_bytes");
	j->untracked = json_is_integer(u) && json_integer_value(u) > 0 ?
		(size_t)json_integer_value(u) : 0;
	j->untracked_source = json_is_integer(u) ? "check" : NULL;
	json_t *sn = json_object_get(info, "snapshot_bytes");
	j->snapshot = json_is_integer(sn) && json_integer_value(sn) > 0 ?
		(size_t)json_integer_value(sn) : 0;
	if (eng_config_validate(&j->cfg, "the job's model", &err) < 0 || j->B < 1 || j->T < 1 ||
		j->chunk_rows < 1) {
		srv_fmt(desc, desclen, "no plan for this job without a worker: its record holds "
			"no model shape");
		return -1;
	}
	json_object_foreach((json_t *)json_object_get(info, "aliases"), key, v) {
		if (!json_is_string(v) || eng_aliases_add(al, key, json_string_value(v),
			j->cfg.n_layer, &err) < 0) {
			srv_fmt(desc, desclen, "the job's aliases: %s", err.msg);
			return -1;
		}
	}
	j->aliases = al;
	eng_policy_init(&j->policy, j->cfg.n_layer);
	json_t *base = json_object_get(info, "policy");
	json_t *args = json_pack("{s:O}", "sections", policy ? policy : base ? base : json_null());
	int r = (policy || base) ? eng_plan_policy_args(NULL, j->device, args, &j->policy, desc,
		desclen) : 0;
	json_decref(args);
	return r;
}

json_t *srv_job_plan(const srv_job *job, const json_t *args, proto_errclass *ec, char *desc,
	size_t desclen)
{
	eng_plan_job j;
	eng_aliases al;
	*ec = PROTO_ERR_INVALID_STATE;
	if (!job->info || plan_job_from(job->info, job->policy, &j, &al, desc, desclen) < 0) {
		if (!job->info)
			srv_fmt(desc, desclen, "job %s has no plan without a worker: its record "
				"holds no model shape", job->id);
		return NULL;
	}
	*ec = PROTO_ERR_INVALID_PARAMETER;
	return eng_plan_reply(&j, args, desc, desclen);
}

int srv_job_plan_spec(srv_conn *c, const json_t *spec, const json_t *args, const json_t *id,
	proto_errclass *ec, char *desc, size_t desclen)
{
	*ec = PROTO_ERR_INVALID_PARAMETER;
	if (job_check_paths(spec, desc, desclen) < 0 || job_check_syntax(spec, desc, desclen) < 0)
		return -1;
	job_check *k = calloc(1, sizeof *k);
	if (!k || !(k->spec = json_deep_copy(spec)) || !(k->args = json_deep_copy(args))) {
		*ec = PROTO_ERR_INTERNAL;
		srv_fmt(desc, desclen, "out of memory");
		if (k)
			check_free(k);
		return -1;
	}
	json_object_del(k->args, "spec");
	k->kind = CHECK_PLAN;
	k->conn_id = c->id;
	k->id = id ? json_incref((json_t *)id) : NULL;
	k->owner = c->cred;
	if (check_run(c->srv, k, c, ec, desc, desclen) < 0) {
		check_free(k);
		return -1;
	}
	return 0;
}

/* ---- a check's answer ---- */

/* The check's "warnings" (lines: allowed, but not what the spec hopes), passed on in
 * job-start's reply ret as remat-train gave them, when they are a list of strings. */
static void check_warnings(const json_t *out, json_t *ret)
{
	json_t *w = json_object_get(out, "warnings"), *v;
	size_t i;
	if (!ret || !json_is_array(w) || json_array_size(w) == 0)
		return;
	json_array_foreach(w, i, v)
		if (!json_is_string(v))
			return;
	json_object_set(ret, "warnings", w);
}

/* What trains, from the check's "model" (remat-train --check): arch, params and
 * trainable_params into o (the job-start reply, job-status); nothing when it has none. */
static void model_fields(const srv_job *job, json_t *o)
{
	static const char *const keys[] = {"arch", "params", "trainable_params"};
	json_t *m = json_object_get(job->info, "model");
	for (size_t i = 0; o && json_is_object(m) && i < sizeof keys / sizeof keys[0]; i++)
		if (json_object_get(m, keys[i]))
			json_object_set(o, keys[i], json_object_get(m, keys[i]));
}

static void check_done(srv_server *srv, void *ud, const json_t *out, const char *why)
{
	job_check *k = ud;
	char desc[PROTO_DESC_LEN];
	proto_errclass ec = PROTO_ERR_INTERNAL;
	json_t *ret = NULL;
	if (k->job)
		k->job->checking = 0;
	if (k->kind == CHECK_SCAN) {
		/* a restart's look at a save directory: answered to no one */
		if (!out || !json_is_true(json_object_get(out, "ok")))
			ec = check_error(out, why, desc, sizeof desc);
		scan_done(k->job, out, ec, desc);
		check_free(k);
		return;
	}
	if (!out && srv->shutting_down) {
		/* the shutdown stopped the check: said before the connection closes */
		ec = PROTO_ERR_INVALID_STATE;
		srv_fmt(desc, sizeof desc, "%s: the spec's check was stopped and %s%s%s", why,
			k->kind == CHECK_START ? "the job was not started" : k->kind ==
			CHECK_RESUME ? "job " : "no plan was made", k->kind == CHECK_RESUME ?
			k->job->id : "", k->kind == CHECK_RESUME ? " was not resumed" : "");
	} else if (!out || !json_is_true(json_object_get(out, "ok"))) {
		ec = check_error(out, why, desc, sizeof desc);
		const char *msg = json_string_value(json_object_get(out, "error"));
		if (k->kind == CHECK_RESUME && msg) {
			/* its spec was good once: what stops it now is its state on disk */
			if (ec == PROTO_ERR_INVALID_PARAMETER)
				ec = PROTO_ERR_INVALID_STATE;
			srv_fmt(desc, sizeof desc, "job %s cannot resume: %s", k->job->id, msg);
		}
	} else if (k->kind == CHECK_START) {
		srv_job *job = job_create(srv, k, out, &ec, desc, sizeof desc);
		if (job)
			ret = json_pack("{s:s, s:s}", "job", job->id, "state",
				srv_job_state_name(job->state));
		if (job) {
			check_warnings(out, ret);
			model_fields(job, ret);
		}
	} else if (k->kind == CHECK_RESUME) {
		ret = resume_checked(k, out, &ec, desc, sizeof desc);
	} else {
		eng_plan_job j;
		eng_aliases al;
		ec = PROTO_ERR_INVALID_PARAMETER;
		if (plan_job_from(out, NULL, &j, &al, desc, sizeof desc) == 0)
			ret = eng_plan_reply(&j, k->args, desc, sizeof desc);
	}
	srv_conn *c = k->conn_id ? srv_conn_find(srv, k->conn_id) : NULL;
	if (c) {
		c->inflight--;
		if (ret)
			srv_conn_reply(c, ret, k->id);
		else
			srv_conn_error(c, ec, desc, k->id);
	}
	if (!ret) {
		char q[SRV_QUOTE_BUF];
		srv_log("client %u: %s refused: %s: %s", k->conn_id, k->kind == CHECK_START ?
			"job-start" : k->kind == CHECK_RESUME ? "job-resume" : "remat-plan",
			proto_errclass_name(ec), srv_quote(desc, strlen(desc), q));
	}
	json_decref(ret);
	check_free(k);
}

/* ---- cancel and remove ---- */

void srv_job_cancel(srv_job *job, const char *why)
{
	srv_log("job %s cancelled: %s", job->id, why);
	srv_job_set_state(job, SRV_JOB_STOPPED, why);
}

json_t *srv_job_remove(srv_job *job, proto_errclass *ec, char *desc, size_t desclen)
{
	static const char *const own[] = {"job.json", "resume.json", SRV_STORE_FILE,
		"worker.log", NULL};
	srv_server *srv = job->srv;
	*ec = PROTO_ERR_INVALID_STATE;
	if (!job_forgettable(job)) {
		srv_fmt(desc, desclen, "job %s is %s: stop it first (only an ended job is removed)",
			job->id, srv_job_state_name(job->state));
		return NULL;
	}
	json_t *ret = json_pack("{s:s,s:s}", "job", job->id, "checkpoints", job->save_dir);
	if (!ret) {
		*ec = PROTO_ERR_INTERNAL;
		srv_fmt(desc, desclen, "out of memory");
		return NULL;
	}
	/* rematd's own files of the job, never through a link; its checkpoints are its
	 * owner's and stay */
	eng_dir jd;
	eng_err e = {0};
	if (srv_job_dir_open(job, &jd, &e) == 0) {
		for (int i = 0; own[i]; i++)
			if (eng_fs_remove_file(&jd, own[i], &e) < 0)
				srv_log("job %s: %s", job->id, e.msg);
		eng_dir_close(&jd);
	}
	/* only when no checkpoint is left in it */
	unlinkat(srv->jobs_d.fd, job->id, AT_REMOVEDIR);
	srv_log("job %s removed", job->id);
	json_t *data = json_pack("{s:s,s:s,s:s,s:s}", "job", job->id, "from",
		srv_job_state_name(job->state), "to", "removed", "reason", "job-remove");
	sv_msg *m = data ? sv_msg_take(proto_event_line("JOB_STATE_CHANGED", data)) : NULL;
	json_decref(data);
	if (m)
		srv_conn_publish(srv, job->id, "JOB_STATE_CHANGED", m);
	sv_msg_unref(m);
	for (int i = 0; i < srv->n_jobs; i++)
		if (srv->jobs[i] == job)
			job_table_take(srv, i);
	srv_job_free(job);
	srv_status_update(srv);
	return ret;
}

/* ---- answers from the table ---- */

static json_t *job_opt_str(const char *s)
{
	return s ? json_string(s) : json_null();
}

json_t *srv_job_status(const srv_job *job)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:i, s:s}", "job", job->id, "name",
		job->name, "state", srv_job_state_name(job->state), "step", job->step, "steps",
		job->steps, "reason", job->reason);
	if (!o)
		return NULL;
	json_object_set_new(o, "loss", job->has_loss ? json_real(job->loss) : json_null());
	json_object_set_new(o, "lr", job->has_lr ? json_real(job->lr) : json_null());
	json_object_set_new(o, "val_loss", job->has_val ? json_real(job->val_loss) : json_null());
	json_object_set_new(o, "val_step", job->has_val ? json_integer(job->val_step)
							: json_null());
	/* rates only mean something while the worker runs, and then the worker answers */
	json_object_set_new(o, "tokens_per_s", json_null());
	json_object_set_new(o, "step_ms", json_null());
	json_t *pol = job->policy ? job->policy : json_object_get(job->info, "policy");
	json_object_set_new(o, "policy", pol ? json_deep_copy(pol) : json_object());
	/* the controller is the job's: a stopped one's budget comes back with its resume */
	srv_auto_status(&job->autoc, o);
	json_object_set_new(o, "last_checkpoint", job_opt_str(job->last_checkpoint));
	json_object_set_new(o, "last_save_error", job->last_save_error ?
		json_deep_copy(job->last_save_error) : json_null());
	json_object_set_new(o, "exit_status",
		job->exit_status >= 0 ? json_integer(job->exit_status) : json_null());
	json_object_set_new(o, "signal",
		job->term_signal ? json_integer(job->term_signal) : json_null());
	json_object_set_new(o, "pid", job->pid ? json_integer(job->pid) : json_null());
	json_object_set_new(o, "uid", json_integer((json_int_t)job->owner.uid));
	model_fields(job, o);
	return o;
}

json_t *srv_job_list(srv_server *srv)
{
	json_t *jobs = json_array();
	for (int i = 0; jobs && i < srv->n_jobs; i++) {
		const srv_job *job = srv->jobs[i];
		json_t *e = json_pack("{s:s, s:s, s:s, s:i, s:i}", "job", job->id, "name",
			job->name, "state", srv_job_state_name(job->state), "step", job->step,
			"steps", job->steps);
		if (!e)
			continue;
		json_object_set_new(e, "loss", job->has_loss ? json_real(job->loss) : json_null());
		json_object_set_new(e, "pid", job->pid ? json_integer(job->pid) : json_null());
		json_object_set_new(e, "uid", json_integer((json_int_t)job->owner.uid));
		json_array_append_new(jobs, e);
	}
	return json_pack("{s:o}", "jobs", jobs);
}

/* ---- shutdown ---- */

void srv_job_stop_all(srv_server *srv, int save)
{
	for (int i = 0; i < srv->n_jobs; i++) {
		srv_job *job = srv->jobs[i];
		/* the shutdown's reply lists the stops it asked for, and only those */
		json_decref(job->stop_ret);
		job->stop_ret = NULL;
		if (job->state == SRV_JOB_QUEUED) {
			srv_job_cancel(job, "daemon shut down before it ran");
			continue;
		}
		if (!srv_job_live(job))
			continue;
		json_t *args = json_pack("{s:s, s:b}", "job", job->id, "save", save);
		if (srv_worker_request(job, "job-stop", args, 0, NULL) < 0)
			srv_worker_kill(job, "it could not be asked to stop");
		else
			job->stop_saving = save;
		json_decref(args);
	}
}

void srv_job_kill_all(srv_server *srv, const char *why)
{
	for (int i = 0; i < srv->n_jobs; i++)
		srv_worker_kill(srv->jobs[i], why);
}
