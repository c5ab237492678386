/* srv_job_resume.c - job-resume (the resume spec, its check, the job queued again), a
 * restarted rematd's look at the save directories of interrupted jobs, and remat-plan for a
 * job without a worker or for a spec. See srv_job.h.
 * Not here: job-start and a check's answer (srv_job_start.c), the table (srv_job.c).
 */
#include "srv_job.h"
#include "srv_job_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_err.h"
#include "eng_plan_json.h"
#include "srv_worker.h"

/* ---- resume ---- */

static json_t *resume_checked(srv_server *srv, job_check *k, const eng_check_info *ci,
	proto_errclass *ec, char *desc, size_t desclen);

/* The spec a resume runs: job.json with the model taken from the save directory (resume:
 * true), the policy as last reported and the memory controller as the record keeps it
 * (its budget, or none when it was turned off). New reference, or NULL with desc. */
static json_t *resume_spec(const srv_job *job, char *desc, size_t desclen)
{
	char path[SRV_PATH_LEN + 16];
	json_error_t je;
	char why[96];
	snprintf(path, sizeof path, "%s/job.json", job->dir);
	json_t *spec = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(spec)) {
		srv_fmt(desc, desclen, "cannot read job %s's spec: %s", job->id,
			spec ? "not a JSON object" : eng_err_json(&je, why, sizeof why));
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
	/* the pool's last share is no budget of the job's: the pool tells it one again, its
	 * least when it is admitted (a share below what the resumed worker needs would fail
	 * the check) */
	if (srv_pool_divides(job))
		json_object_del(remat, "budget");
	return spec;
}

/* Clears what a worker left in the record, so that a new one can be spawned. */
static void job_reset_worker(srv_job *job)
{
	srv_job_forget_worker(job);
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
	if (job->state == PROTO_JOB_FINISHED) {
		srv_fmt(desc, desclen, "job %s finished: it reached its last step (%d); start a "
			"new job from its checkpoint to train on", job->id, job->steps);
		return -1;
	}
	if (!proto_job_state_final(job->state)) {
		srv_fmt(desc, desclen, "job %s is %s", job->id, proto_job_state_name(job->state));
		return -1;
	}
	if (job->handles_open > 0) {
		/* its stop was answered, its process not yet reaped: a moment, not a refusal */
		*ec = PROTO_ERR_BUSY;
		srv_fmt(desc, desclen, "job %s is %s, but its worker has not exited yet: try again "
			"in a moment", job->id, proto_job_state_name(job->state));
		return -1;
	}
	srv_job *other = job->save_dir[0] ? srv_job__using(srv, job->save_dir, job) : NULL;
	if (other) { /* another job writes there, or would go on from there */
		*ec = PROTO_ERR_BUSY;
		srv_job__using_text(other, job->save_dir, desc, desclen);
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
	k->done = resume_checked;
	k->conn_id = c->id;
	k->id = id ? json_incref((json_t *)id) : NULL;
	k->owner = job->owner; /* it runs as its owner, whoever asked */
	k->job = job;
	if (srv_job__check_run(srv, k, c, ec, desc, desclen) < 0) {
		srv_job__check_free(k);
		return -1;
	}
	job->checking = 1;
	return 0;
}

/* The resume's check passed (job_check.done): resume.json, and the job queued again. */
static json_t *resume_checked(srv_server *srv, job_check *k, const eng_check_info *ci,
	proto_errclass *ec, char *desc, size_t desclen)
{
	srv_job *job = k->job;
	*ec = PROTO_ERR_INVALID_STATE;
	if (srv->shutting_down) {
		srv_fmt(desc, desclen, "the daemon is shutting down");
		return NULL;
	}
	*ec = PROTO_ERR_IO_ERROR;
	if (srv_job__write_file(job, "resume.json", k->spec, desc, desclen) < 0)
		return NULL;
	const char *ckpt = ci->init_from[0] ? ci->init_from : NULL;
	char why[SRV_REASON_LEN];
	job_reset_worker(job);
	snprintf(job->spec_file, sizeof job->spec_file, "resume.json");
	free(job->info);
	job->info = srv_job__check_info(ci);
	job->step = ci->resume_step;
	srv_pool_job_init(job, k->spec, 1);
	*ec = PROTO_ERR_INVALID_PARAMETER;
	if (srv_pool_could_fit(job, desc, desclen) < 0) /* a pool made smaller since */
		return NULL;
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
	srv_job_set_state(job, PROTO_JOB_QUEUED, why);
	srv_job_schedule(srv);
	return json_pack("{s:s,s:s,s:i,s:s?}", "job", job->id, "state",
		proto_job_state_name(job->state), "step", job->step, "checkpoint", ckpt);
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
static void scan_done(srv_job *job, const eng_check_info *ci, proto_errclass ec,
	const char *desc)
{
	char q[SRV_QUOTE_BUF];
	const char *ckpt = ci && ci->init_from[0] ? ci->init_from : NULL;
	int step = ci ? ci->resume_step : 0;
	if (!ci || !ci->ok) {
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

/* job_check.done of a look: scan_done, answering no one. */
static json_t *scan_checked(srv_server *srv, job_check *k, const eng_check_info *ci,
	proto_errclass *ec, char *desc, size_t desclen)
{
	(void)srv;
	(void)desclen;
	scan_done(k->job, ci, *ec, desc);
	return NULL;
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
	k->done = scan_checked;
	k->owner = job->owner;
	k->job = job;
	if (srv_job__check_run(job->srv, k, NULL, &ec, desc, sizeof desc) < 0) {
		srv_job__check_free(k);
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
		if (job->state != PROTO_JOB_INTERRUPTED)
			job->rescan_at_ms = 0;
		else
			scan_start(job);
	}
}

/* ---- plans without a worker ---- */

/* The planner's view of a job from what its check said (info) and a policy on top of the
 * one it starts with (policy, may be NULL). -1 with desc when info lacks something. */
static int plan_from(const eng_check_info *info, const json_t *policy, eng_plan_job *j,
	char *desc, size_t desclen)
{
	eng_err err;
	memset(j, 0, sizeof *j);
	j->cfg = info->cfg;
	j->B = info->batch;
	j->T = info->seq_len;
	j->chunk_rows = info->chunk_rows;
	j->device = info->device;
	/* what the run will hold whatever its policy, as remat-train --check counted it */
	memcpy(j->fixed, info->fixed, sizeof j->fixed);
	j->fixed_source = info->has_fixed ? "engine" : NULL;
	/* and the process's untracked term the check measured of itself, and a save's
	 * snapshot: every job of rematd's saves */
	j->untracked = info->untracked;
	j->untracked_source = info->has_untracked ? "check" : NULL;
	j->snapshot = info->snapshot;
	if (eng_config_validate(&j->cfg, "the job's model", &err) < 0 || j->B < 1 || j->T < 1 ||
		j->chunk_rows < 1) {
		srv_fmt(desc, desclen, "no plan for this job without a worker: its record holds "
			"no model shape");
		return -1;
	}
	j->aliases = &info->aliases;
	j->policy = info->policy;
	if (!policy)
		return 0;
	/* the policy last reported, on top of a fresh one as the worker's own is */
	eng_policy_init(&j->policy, j->cfg.n_layer);
	json_t *args = json_pack("{s:O}", "sections", policy);
	int r = eng_plan_policy_args(NULL, j->device, args, &j->policy, desc, desclen);
	json_decref(args);
	return r;
}

json_t *srv_job_plan(const srv_job *job, const json_t *args, proto_errclass *ec, char *desc,
	size_t desclen)
{
	eng_plan_job j;
	*ec = PROTO_ERR_INVALID_STATE;
	if (!job->info || plan_from(job->info, job->policy, &j, desc, desclen) < 0) {
		if (!job->info)
			srv_fmt(desc, desclen, "job %s has no plan without a worker: its record "
				"holds no model shape", job->id);
		return NULL;
	}
	*ec = PROTO_ERR_INVALID_PARAMETER;
	return eng_plan_reply(&j, args, desc, desclen);
}

/* remat-plan {spec}'s check passed (job_check.done): the plan, or NULL with ec/desc. */
static json_t *plan_checked(srv_server *srv, job_check *k, const eng_check_info *ci,
	proto_errclass *ec, char *desc, size_t desclen)
{
	eng_plan_job j;
	(void)srv;
	*ec = PROTO_ERR_INVALID_PARAMETER;
	if (plan_from(ci, NULL, &j, desc, desclen) < 0)
		return NULL;
	return eng_plan_reply(&j, k->args, desc, desclen);
}

int srv_job_plan_spec(srv_conn *c, const json_t *spec, const json_t *args, const json_t *id,
	proto_errclass *ec, char *desc, size_t desclen)
{
	*ec = PROTO_ERR_INVALID_PARAMETER;
	if (srv_job__check_paths(spec, desc, desclen) < 0 ||
		srv_job__check_syntax(spec, desc, desclen) < 0)
		return -1;
	job_check *k = calloc(1, sizeof *k);
	if (!k || !(k->spec = json_deep_copy(spec)) || !(k->args = json_deep_copy(args))) {
		*ec = PROTO_ERR_INTERNAL;
		srv_fmt(desc, desclen, "out of memory");
		if (k)
			srv_job__check_free(k);
		return -1;
	}
	json_object_del(k->args, "spec");
	k->kind = CHECK_PLAN;
	k->done = plan_checked;
	k->conn_id = c->id;
	k->id = id ? json_incref((json_t *)id) : NULL;
	k->owner = c->cred;
	if (srv_job__check_run(c->srv, k, c, ec, desc, desclen) < 0) {
		srv_job__check_free(k);
		return -1;
	}
	return 0;
}
