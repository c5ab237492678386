/* srv_job.c - the job table: ids, states and their events, the queue, cancel and removal,
 * answers from the table (job-status, job-list), shutdown of every job. See srv_job.h.
 * Not here: job-start's checks and files (srv_job_start.c), resume, a restart's look at a
 * save directory and plans without a worker (srv_job_resume.c), the worker processes and
 * their channels (srv_worker.c), the records on disk (srv_store.c), running remat-train
 * --check (srv_helper.c).
 */
#include "srv_job.h"
#include "srv_job_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_err.h"
#include "eng_fs.h"
#include "eng_plan_json.h"
#include "srv_store.h"
#include "srv_worker.h"

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

/* JOB_STATE_CHANGED from `from` to `to` (a state, or "removed") for reason: the record's
 * exit status (null while it has none), the signal that ended its worker, and an ended
 * job's last checkpoint */
static void publish_state(srv_job *job, const char *from, const char *to, const char *reason)
{
	json_t *data = json_pack("{s:s, s:s, s:s, s:s}", "job", job->id, "from", from, "to", to,
		"reason", reason);
	if (!data)
		return;
	json_object_set_new(data, "exit_status",
		job->exit_status >= 0 ? json_integer(job->exit_status) : json_null());
	/* beyond docs/protocol.md's keys (clients ignore unknown ones): what a failure needs */
	if (job->term_signal)
		json_object_set_new(data, "signal", json_integer(job->term_signal));
	if (proto_job_state_final(job->state))
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

void srv_job_emit_state(srv_job *job, const char *from)
{
	/* the service manager's STATUS= lists the jobs and their states */
	job->srv->on_jobs_changed(job->srv);
	publish_state(job, from, proto_job_state_name(job->state), job->reason);
}

void srv_job_set_state(srv_job *job, proto_job_state to, const char *reason)
{
	const char *from = proto_job_state_name(job->state);
	job->state = to;
	srv_copy_text(job->reason, sizeof job->reason, reason);
	srv_job_save_record(job);
	srv_job_emit_state(job, from);
	srv_pool_changed(job->srv, "a job's state changed");
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
	return 0;
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
	job->state = PROTO_JOB_QUEUED;
	snprintf(job->spec_file, sizeof job->spec_file, "job.json");
	return job;
}

/* Frees a forwarded request's record. */
void srv_job_pending_free(srv_pending *p)
{
	json_decref(p->client_id);
	free(p);
}

void srv_job_forget_worker(srv_job *job)
{
	while (job->pending) {
		srv_pending *p = job->pending;
		job->pending = p->next;
		srv_job_pending_free(p);
	}
	/* a new worker (a resume) has figures of its own */
	json_decref(job->last_mem);
	json_decref(job->last_remat);
	json_decref(job->tokenize);
	job->last_mem = job->last_remat = NULL;
	job->figures_ms = 0;
}

void srv_job_free(srv_job *job)
{
	if (!job)
		return;
	srv_job_forget_worker(job);
	free(job->last_checkpoint);
	json_decref(job->stop_ret);
	json_decref(job->policy);
	free(job->info);
	json_decref(job->last_save_error);
	srv_pool_job_free(job);
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
	return proto_job_state_final(job->state) && job->handles_open == 0 && !job->checking;
}

/* Takes the record at index i out of the table (not freed). */
void srv_job__table_take(srv_server *srv, int i)
{
	memmove(&srv->jobs[i], &srv->jobs[i + 1], (size_t)(srv->n_jobs - i - 1) *
		sizeof srv->jobs[0]);
	srv->n_jobs--;
}

/* 1 when a record may go to make room for its owner's next job: finished or failed (a
 * stopped or interrupted one can be resumed: only its owner's job-remove forgets it). */
static int job_evictable(const srv_job *job)
{
	return (job->state == PROTO_JOB_FINISHED || job->state == PROTO_JOB_FAILED) &&
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
		srv_job__table_take(srv, i);
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

/* ---- cancel and remove ---- */

void srv_job_cancel(srv_job *job, const char *why)
{
	srv_log("job %s cancelled: %s", job->id, why);
	srv_job_set_state(job, PROTO_JOB_STOPPED, why);
}

json_t *srv_job_remove(srv_job *job, proto_errclass *ec, char *desc, size_t desclen)
{
	static const char *const own[] = {"job.json", "resume.json", SRV_STORE_FILE,
		"worker.log", NULL};
	srv_server *srv = job->srv;
	*ec = PROTO_ERR_INVALID_STATE;
	if (!job_forgettable(job)) {
		srv_fmt(desc, desclen, "job %s is %s: stop it first (only an ended job is removed)",
			job->id, proto_job_state_name(job->state));
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
	publish_state(job, proto_job_state_name(job->state), "removed", "job-remove");
	for (int i = 0; i < srv->n_jobs; i++)
		if (srv->jobs[i] == job)
			srv_job__table_take(srv, i);
	srv_job_free(job);
	srv->on_jobs_changed(srv);
	return ret;
}

/* ---- answers from the table ---- */

/* What trains, from the check's "model" (remat-train --check): arch, params,
 * trainable_params and a 4-bit base's quantized into o (the job-start reply, job-status);
 * nothing when it has none. */
void srv_job__model_fields(const srv_job *job, json_t *o)
{
	const eng_check_info *ci = job->info;
	if (!o || !ci || ci->params <= 0) /* a record from before the check said it */
		return;
	json_object_set_new(o, "arch", json_string(eng_arch_name(ci->cfg.arch)));
	json_object_set_new(o, "params", json_integer((json_int_t)ci->params));
	json_object_set_new(o, "trainable_params", json_integer((json_int_t)ci->trainable_params));
	if (ci->cfg.quant) /* a 4-bit base: its weights and their bytes */
		json_object_set_new(o, "quantized", eng_quant_json(&ci->cfg, 1));
}

static json_t *job_opt_str(const char *s)
{
	return s ? json_string(s) : json_null();
}

/* "tokenizing": where a starting job's text data is (the last TOKENIZE event's figures),
 * or null. */
static json_t *job_tokenizing(const srv_job *job)
{
	if (!job->tokenize || job->state != PROTO_JOB_STARTING)
		return json_null();
	json_t *o = json_object();
	static const char *const keys[] = {"file", "phase", "percent", "done_bytes",
		"total_bytes"};
	for (size_t i = 0; o && i < sizeof keys / sizeof keys[0]; i++) {
		json_t *v = json_object_get(job->tokenize, keys[i]);
		if (v)
			json_object_set(o, keys[i], v);
	}
	return o ? o : json_null();
}

json_t *srv_job_status(const srv_job *job)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:i, s:s}", "job", job->id, "name",
		job->name, "state", proto_job_state_name(job->state), "step", job->step, "steps",
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
	json_object_set_new(o, "policy", job->policy ? json_deep_copy(job->policy) : job->info ?
		eng_policy_json(&job->info->policy) : json_object());
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
	json_object_set_new(o, "tokenizing", job_tokenizing(job));
	json_object_set_new(o, "memory", srv_pool_job_json(job));
	srv_job__model_fields(job, o);
	proto_status_complete(o); /* what only a worker knows (its rate, ranks ...): null */
	return o;
}

json_t *srv_job_list(srv_server *srv)
{
	json_t *jobs = json_array();
	for (int i = 0; jobs && i < srv->n_jobs; i++) {
		const srv_job *job = srv->jobs[i];
		json_t *e = json_pack("{s:s, s:s, s:s, s:i, s:i}", "job", job->id, "name",
			job->name, "state", proto_job_state_name(job->state), "step", job->step,
			"steps", job->steps);
		if (!e)
			continue;
		json_object_set_new(e, "loss", job->has_loss ? json_real(job->loss) : json_null());
		json_object_set_new(e, "pid", job->pid ? json_integer(job->pid) : json_null());
		json_object_set_new(e, "uid", json_integer((json_int_t)job->owner.uid));
		json_object_set_new(e, "tokenizing", job_tokenizing(job));
		json_object_set_new(e, "memory", srv_pool_job_json(job));
		json_array_append_new(jobs, e);
	}
	return json_pack("{s:o}", "jobs", jobs);
}

