/* srv_cmd.c - one request line from a client: parse, look up, validate, dispatch by scope.
 * See srv_cmd.h. Not here: reading lines (srv_conn.c) or running jobs (srv_job.c).
 */
#include "srv_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "srv_job.h"
#include "srv_metrics.h"
#include "srv_worker.h"

/* Replies with an error and logs it as a bad request. */
static void cmd_refuse(srv_conn *c, const char *execute, proto_errclass ec, const char *desc,
	const json_t *id)
{
	char q[SRV_QUOTE_BUF];
	srv_log("client %u: %s refused: %s: %s", c->id, execute, proto_errclass_name(ec),
		srv_quote(desc, strlen(desc), q));
	srv_conn_error(c, ec, desc, id);
}

static int cmd_blank(const char *line, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (line[i] != ' ' && line[i] != '\t')
			return 0;
	return 1;
}

/* ---- daemon scope ---- */

/* 1 when cmd changes the daemon itself, for every user: of the daemon's commands, those
 * that do more than look, but job-start (which makes a job of the sender's own). */
static int cmd_daemon_wide(const proto_command *cmd)
{
	return cmd->scope == PROTO_SCOPE_DAEMON && !cmd->query && cmd->id != PROTO_CMD_JOB_START;
}

/* 1 when c may send cmd: a daemon-wide change is root's and rematd's own user's alone
 * (with --group, the members may look at everything and change their own jobs only);
 * else 0 with desc. */
static int cmd_may_daemon(const srv_conn *c, const proto_command *cmd, char *desc,
	size_t desclen)
{
	uid_t u = c->cred.uid;
	if (!cmd_daemon_wide(cmd) || u == 0 || u == c->srv->uid)
		return 1;
	snprintf(desc, desclen, "%s acts on every user's jobs: only root and rematd's own user "
		"(uid %lu) may send it, not uid %lu", cmd->name, (unsigned long)c->srv->uid,
		(unsigned long)u);
	return 0;
}

/* daemon-info's return: rematd's own facts, and what the workers run (remat-train --info,
 * asked once at start: the BLAS kernel and backends as a worker sees them, not as this
 * process, which never computes, would). */
static json_t *daemon_info(srv_server *srv)
{
	double uptime = (double)(uv_hrtime() - srv->started_ns) / 1e9;
	json_t *ret = json_pack("{s:s, s:i, s:f, s:s, s:s, s:i, s:i, s:s}",
		"version", PROTO_VERSION, "pid", (int)getpid(), "uptime_s", uptime, "socket",
		srv->socket_path, "state_dir", srv->state_dir, "max_jobs", srv->max_jobs,
		"jobs_running", srv->n_active, "worker", srv->worker_path);
	json_t *wi = srv->worker_info;
	if (!ret)
		return NULL;
	json_object_set_new(ret, "blas", json_string(wi ? json_string_value(json_object_get(wi,
		"blas")) : srv->worker_info_err));
	const char *mm = json_string_value(json_object_get(wi, "matmul"));
	json_object_set_new(ret, "matmul", json_string(mm ? mm : "-"));
	json_t *b = json_object_get(wi, "backends"), *g = json_object_get(wi, "gpus");
	json_object_set_new(ret, "backends", b ? json_deep_copy(b) : json_pack("[s]", "cpu"));
	json_object_set_new(ret, "gpus", g ? json_deep_copy(g) : json_array());
	json_object_set_new(ret, "pool", srv_pool_json(srv));
	return ret;
}

static void cmd_daemon_info(srv_conn *c, const proto_command *cmd, const proto_request *req)
{
	(void)cmd;
	srv_server *srv = c->srv;
	if (!srv->worker_info && !srv->worker_info_err[0]) {
		/* remat-train --info has not answered yet: the reply waits for it */
		srv_waiter *w = srv_waiter_new(c->id, req->id);
		if (w) {
			srv_waiter_push(&srv->info_waiters, w);
			c->inflight++;
			return;
		}
	}
	json_t *ret = daemon_info(srv);
	if (!ret) {
		srv_conn_error(c, PROTO_ERR_INTERNAL, "out of memory", req->id);
		return;
	}
	srv_conn_reply(c, ret, req->id);
	json_decref(ret);
}

void srv_cmd_info_ready(srv_server *srv)
{
	json_t *ret = daemon_info(srv);
	srv_conn_answer_waiters(srv, &srv->info_waiters, ret, PROTO_ERR_INTERNAL,
		ret ? NULL : "out of memory");
	json_decref(ret);
}

static void cmd_daemon_shutdown(srv_conn *c, const proto_command *cmd, const proto_request *req)
{
	(void)cmd;
	/* no command loses finished steps by default: every job saves unless told not to */
	const json_t *sv = json_object_get(req->args, "save");
	int save = sv ? json_is_true(sv) : 1;
	char why[64];
	/* answered once every job has stopped (or when a save fails and it is called off) */
	srv_waiter *w = srv_waiter_new(c->id, req->id);
	if (!w) {
		srv_conn_error(c, PROTO_ERR_INTERNAL, "out of memory", req->id);
		return;
	}
	c->inflight++;
	snprintf(why, sizeof why, "daemon-shutdown from client %u", c->id);
	srv_shutdown(c->srv, save, 0, w, why);
}

static void cmd_job_start(srv_conn *c, const proto_command *cmd, const proto_request *req)
{
	(void)cmd;
	srv_server *srv = c->srv;
	proto_errclass ec;
	char desc[PROTO_DESC_LEN];
	if (srv->shutting_down) {
		cmd_refuse(c, "job-start", PROTO_ERR_INVALID_STATE, "the daemon is shutting down",
			req->id);
		return;
	}
	const json_t *spec = json_object_get(req->args, "spec");
	const char *name = json_string_value(json_object_get(req->args, "name"));
	/* answered once remat-train --check has looked at the whole spec */
	if (srv_job_start(c, spec, name, req->id, &ec, desc, sizeof desc) < 0)
		cmd_refuse(c, "job-start", ec, desc, req->id);
	else
		srv_log("client %u: job-start: checking the spec", c->id);
}

static void cmd_job_list(srv_conn *c, const proto_command *cmd, const proto_request *req)
{
	(void)cmd;
	json_t *ret = srv_job_list(c->srv);
	if (!ret)
		srv_conn_error(c, PROTO_ERR_INTERNAL, "out of memory", req->id);
	else
		srv_conn_reply(c, ret, req->id);
	json_decref(ret);
}

/* ---- connection scope ---- */

static void cmd_subscribe(srv_conn *c, const proto_command *cmd, const proto_request *req)
{
	int on = cmd->id == PROTO_CMD_SUBSCRIBE;
	const char *job = json_string_value(json_object_get(req->args, "job"));
	const json_t *events = json_object_get(req->args, "events");
	char desc[PROTO_DESC_LEN], q[SRV_QUOTE_BUF];
	if (job && !srv_job_find(c->srv, job)) {
		snprintf(desc, sizeof desc, "no job %s", srv_quote(job, strlen(job), q));
		cmd_refuse(c, cmd->name, PROTO_ERR_JOB_NOT_FOUND, desc, req->id);
		return;
	}
	uint32_t mask = sv_events_mask(events);
	if (sv_conn_subscribe(&c->k, job ? job : "", mask, on) < 0) {
		snprintf(desc, sizeof desc, "too many subscriptions (at most %d job filters)",
			SV_MAX_SUBS);
		cmd_refuse(c, cmd->name, PROTO_ERR_INVALID_PARAMETER, desc, req->id);
		return;
	}
	srv_conn_reply(c, NULL, req->id);
}

/* ---- job scope ---- */

/* Replies with ret (stolen) or the error. */
static void cmd_answer(srv_conn *c, const char *execute, json_t *ret, proto_errclass ec,
	const char *desc, const json_t *id)
{
	if (ret)
		srv_conn_reply(c, ret, id);
	else
		cmd_refuse(c, execute, ec, desc, id);
	json_decref(ret);
}

/* What rematd answers itself about a job, by command: each returns 1 when it answered, 0
 * when the request goes on to the job's worker. A command without an entry goes to the
 * worker when there is one, else is refused: the job is not running. */
typedef int job_here_fn(srv_conn *c, const proto_request *req, srv_job *job);

static int here_remove(srv_conn *c, const proto_request *req, srv_job *job)
{
	proto_errclass ec = PROTO_ERR_INVALID_STATE;
	char desc[PROTO_DESC_LEN];
	json_t *ret = srv_job_remove(job, &ec, desc, sizeof desc);
	cmd_answer(c, "job-remove", ret, ec, desc, req->id);
	return 1;
}

/* without a worker, or while it starts: the record's status */
static int here_status(srv_conn *c, const proto_request *req, srv_job *job)
{
	if (srv_job_live(job) && job->state != PROTO_JOB_STARTING)
		return 0;
	cmd_answer(c, "job-status", srv_job_status(job), PROTO_ERR_INTERNAL, "out of memory",
		req->id);
	return 1;
}

/* without a worker, or while it starts: the plan from the record and remat-train --info */
static int here_plan(srv_conn *c, const proto_request *req, srv_job *job)
{
	proto_errclass ec = PROTO_ERR_INVALID_STATE;
	char desc[PROTO_DESC_LEN];
	if (srv_job_live(job) && job->state != PROTO_JOB_STARTING)
		return 0;
	json_t *ret = srv_job_plan(job, req->args, &ec, desc, sizeof desc);
	cmd_answer(c, "remat-plan", ret, ec, desc, req->id);
	return 1;
}

/* a queued job is cancelled before it ran */
static int here_stop(srv_conn *c, const proto_request *req, srv_job *job)
{
	if (srv_job_live(job) || job->state != PROTO_JOB_QUEUED)
		return 0;
	srv_job_cancel(job, "cancelled before it ran (job-stop)");
	json_t *ret = json_pack("{s:i,s:s,s:n}", "step", job->step, "state",
		proto_job_state_name(job->state), "checkpoint");
	cmd_answer(c, "job-stop", ret, PROTO_ERR_INTERNAL, "out of memory", req->id);
	return 1;
}

/* job-kill: the worker's processes SIGKILLed now (srv_worker_kill: mpirun and its ranks
 * with it), no save, for a worker that does not answer (job-stop waits for its step
 * boundary); the job fails when it is reaped, the kill its reason, its last checkpoint
 * kept for a resume. A queued job is cancelled; an ended one has nothing to kill. */
static int here_kill(srv_conn *c, const proto_request *req, srv_job *job)
{
	char desc[PROTO_DESC_LEN];
	if (job->state == PROTO_JOB_QUEUED && !job->proc_alive) {
		srv_job_cancel(job, "cancelled before it ran (job-kill)");
	} else if (job->proc_alive) {
		snprintf(desc, sizeof desc, "job-kill from client %u", c->id);
		srv_worker_kill(job, desc);
	} else {
		snprintf(desc, sizeof desc, "job %s is %s: it has no worker to kill", job->id,
			proto_job_state_name(job->state));
		cmd_refuse(c, "job-kill", PROTO_ERR_INVALID_STATE, desc, req->id);
		return 1;
	}
	json_t *ret = json_pack("{s:s,s:s,s:b}", "job", job->id, "state",
		proto_job_state_name(job->state), "killed", job->proc_alive);
	cmd_answer(c, "job-kill", ret, PROTO_ERR_INTERNAL, "out of memory", req->id);
	return 1;
}

/* an ended job starts again from its last checkpoint */
static int here_resume(srv_conn *c, const proto_request *req, srv_job *job)
{
	proto_errclass ec;
	char desc[PROTO_DESC_LEN];
	if (srv_job_live(job) || !proto_job_state_final(job->state))
		return 0;
	if (srv_job_resume(job, c, req->id, &ec, desc, sizeof desc) < 0)
		cmd_refuse(c, "job-resume", ec, desc, req->id);
	return 1;
}

/* job-set's "priority" is rematd's: the job's weight in the pool, in any state, kept in
 * its record; given alone (the other keys are the worker's, and answered by it). */
static int here_set(srv_conn *c, const proto_request *req, srv_job *job)
{
	const json_t *set = json_object_get(req->args, "set");
	const json_t *v = json_object_get(set, PROTO_PRIORITY);
	if (!v)
		return 0;
	if (json_object_size(set) != 1) {
		cmd_refuse(c, "job-set", PROTO_ERR_INVALID_PARAMETER, "'priority' is rematd's and "
			"the others are the job's worker's: set it on its own (rematctl set JOB "
			"priority=N), then the others", req->id);
		return 1;
	}
	srv_pool_set_priority(job, (int)json_integer_value(v));
	srv_job_save_record(job);
	json_t *ret = json_pack("{s:O,s:o}", "set", set, "memory", srv_pool_job_json(job));
	cmd_answer(c, "job-set", ret, PROTO_ERR_INTERNAL, "out of memory", req->id);
	return 1;
}

/* the job's log, whatever its state: rematd keeps the file */
static int here_metrics(srv_conn *c, const proto_request *req, srv_job *job)
{
	proto_errclass ec;
	char desc[PROTO_DESC_LEN];
	json_t *ret = srv_metrics_read(job, req->args, &ec, desc, sizeof desc);
	cmd_answer(c, "job-metrics", ret, ec, desc, req->id);
	return 1;
}

/* mem-stats and remat-get of an ended job: its last figures, kept by rematd while it ran
 * (as of a step near its end; the policy is the record's, the one in force at the end) */
static int here_figures(srv_conn *c, const proto_request *req, srv_job *job)
{
	int mem = strcmp(req->execute, "mem-stats") == 0;
	json_t *kept = mem ? job->last_mem : job->last_remat;
	if (srv_job_live(job) || !proto_job_state_final(job->state) || !kept)
		return 0;
	json_t *ret = json_deep_copy(kept);
	if (ret) {
		json_object_set_new(ret, "final", json_true());
		json_object_set_new(ret, "state", json_string(proto_job_state_name(job->state)));
		json_object_set_new(ret, "job_step", json_integer(job->step));
		if (!mem && job->policy)
			json_object_set_new(ret, "policy", json_deep_copy(job->policy));
	}
	cmd_answer(c, req->execute, ret, PROTO_ERR_INTERNAL, "out of memory", req->id);
	return 1;
}

static job_here_fn *const job_here[PROTO_CMD_COUNT] = {
	[PROTO_CMD_MEM_STATS] = here_figures,
	[PROTO_CMD_REMAT_GET] = here_figures,
	[PROTO_CMD_JOB_METRICS] = here_metrics,
	[PROTO_CMD_JOB_REMOVE] = here_remove,
	[PROTO_CMD_JOB_STATUS] = here_status,
	[PROTO_CMD_REMAT_PLAN] = here_plan,
	[PROTO_CMD_JOB_STOP] = here_stop,
	[PROTO_CMD_JOB_RESUME] = here_resume,
	[PROTO_CMD_JOB_SET] = here_set,
	[PROTO_CMD_JOB_KILL] = here_kill,
};

/* 1 when rematd answered the command itself (job_here, or a refusal: no worker). */
static int cmd_job_here(srv_conn *c, const proto_command *cmd, const proto_request *req,
	srv_job *job)
{
	char desc[PROTO_DESC_LEN];
	job_here_fn *fn = job_here[cmd->id];
	if (fn && fn(c, req, job))
		return 1;
	if (srv_job_live(job))
		return 0;
	snprintf(desc, sizeof desc, "job %s is %s", job->id, proto_job_state_name(job->state));
	cmd_refuse(c, cmd->name, PROTO_ERR_INVALID_STATE, desc, req->id);
	return 1;
}

static void cmd_job(srv_conn *c, const proto_command *cmd, const proto_request *req)
{
	proto_errclass ec;
	char desc[PROTO_DESC_LEN], q[SRV_QUOTE_BUF];
	const char *id = json_string_value(json_object_get(req->args, "job"));
	const json_t *spec = json_object_get(req->args, "spec");
	if (cmd->id == PROTO_CMD_REMAT_PLAN && spec) {
		/* a plan for a spec file, before anything starts */
		if (id) {
			cmd_refuse(c, cmd->name, PROTO_ERR_INVALID_PARAMETER,
				"give 'job' or 'spec', not both", req->id);
		} else if (srv_job_plan_spec(c, spec, req->args, req->id, &ec, desc,
			sizeof desc) < 0) {
			cmd_refuse(c, cmd->name, ec, desc, req->id);
		}
		return;
	}
	if (!id) {
		/* a worker spoken to directly may take none; rematd must know which job */
		cmd_refuse(c, cmd->name, PROTO_ERR_INVALID_PARAMETER,
			"missing argument 'job' (the job's id, such as \"j1\")", req->id);
		return;
	}
	srv_job *job = srv_job_find(c->srv, id);
	if (!job) {
		snprintf(desc, sizeof desc, "no job %s", srv_quote(id, strlen(id), q));
		cmd_refuse(c, cmd->name, PROTO_ERR_JOB_NOT_FOUND, desc, req->id);
		return;
	}
	/* what only looks, anyone who may connect may ask; changes are the owner's, logged
	 * with their client as an audit trail (queries are not, so polling stays quiet) */
	if (!cmd->query && !srv_job_may_change(job, c, desc, sizeof desc)) {
		cmd_refuse(c, cmd->name, PROTO_ERR_PERMISSION_DENIED, desc, req->id);
		return;
	}
	if (!cmd->query)
		srv_log("client %u: %s %s", c->id, cmd->name, job->id);
	if (srv_pool_refuses(job, cmd->id, req->args, desc, sizeof desc)) {
		cmd_refuse(c, cmd->name, PROTO_ERR_INVALID_STATE, desc, req->id);
		return;
	}
	if (cmd_job_here(c, cmd, req, job))
		return;
	if (srv_job_forward(job, c, cmd->name, req->args, req->id, &ec, desc, sizeof desc) < 0)
		cmd_refuse(c, cmd->name, ec, desc, req->id);
}

/* One handler per command, through proto's table: every job-scope command goes through
 * cmd_job (rematd's own answers, else the job's worker). */
typedef void cmd_fn(srv_conn *c, const proto_command *cmd, const proto_request *req);

static cmd_fn *const handlers[PROTO_CMD_COUNT] = {
	[PROTO_CMD_DAEMON_INFO] = cmd_daemon_info,
	[PROTO_CMD_DAEMON_SHUTDOWN] = cmd_daemon_shutdown,
	[PROTO_CMD_JOB_START] = cmd_job_start,
	[PROTO_CMD_JOB_LIST] = cmd_job_list,
	[PROTO_CMD_JOB_STATUS] = cmd_job,
	[PROTO_CMD_JOB_PAUSE] = cmd_job,
	[PROTO_CMD_JOB_RESUME] = cmd_job,
	[PROTO_CMD_JOB_STOP] = cmd_job,
	[PROTO_CMD_REMAT_GET] = cmd_job,
	[PROTO_CMD_REMAT_SET] = cmd_job,
	[PROTO_CMD_REMAT_PLAN] = cmd_job,
	[PROTO_CMD_MEM_STATS] = cmd_job,
	[PROTO_CMD_MEM_RESET_PEAK] = cmd_job,
	[PROTO_CMD_CKPT_SAVE] = cmd_job,
	[PROTO_CMD_JOB_REMOVE] = cmd_job,
	[PROTO_CMD_REMAT_COSTS] = cmd_job,
	[PROTO_CMD_REMAT_MEMLOG] = cmd_job,
	[PROTO_CMD_REMAT_PROFILE] = cmd_job,
	[PROTO_CMD_REMAT_AUTO] = cmd_job,
	[PROTO_CMD_JOB_EVAL] = cmd_job,
	[PROTO_CMD_JOB_SET] = cmd_job,
	[PROTO_CMD_JOB_METRICS] = cmd_job,
	[PROTO_CMD_JOB_KILL] = cmd_job,
	[PROTO_CMD_SUBSCRIBE] = cmd_subscribe,
	[PROTO_CMD_UNSUBSCRIBE] = cmd_subscribe,
};

void srv_cmd_handle(srv_conn *c, const char *line, size_t len)
{
	proto_request req;
	proto_errclass ec;
	char desc[PROTO_DESC_LEN], q[SRV_QUOTE_BUF], qd[SRV_QUOTE_BUF];

	if (cmd_blank(line, len))
		return; /* an empty line (a human at socat pressing Enter) asks nothing */
	if (proto_request_parse(line, len, &req, &ec, desc, sizeof desc) < 0) {
		srv_log("client %u: bad request: %s: %s in %s", c->id, proto_errclass_name(ec),
			srv_quote(desc, strlen(desc), qd), srv_quote(line, len, q));
		srv_conn_error(c, ec, desc, req.id);
		goto out;
	}
	const proto_command *cmd = proto_command_find(req.execute);
	if (!cmd) {
		snprintf(desc, sizeof desc, "unknown command %s",
			srv_quote(req.execute, strlen(req.execute), q));
		cmd_refuse(c, "request", PROTO_ERR_COMMAND_NOT_FOUND, desc, req.id);
		goto out;
	}
	if (c->inflight >= PROTO_MAX_INFLIGHT) {
		snprintf(desc, sizeof desc, "too many requests in flight (at most %d)",
			PROTO_MAX_INFLIGHT);
		cmd_refuse(c, cmd->name, PROTO_ERR_BUSY, desc, req.id);
		goto out;
	}
	if (proto_args_validate(cmd, req.args, desc, sizeof desc) < 0) {
		cmd_refuse(c, cmd->name, PROTO_ERR_INVALID_PARAMETER, desc, req.id);
		goto out;
	}
	if (!cmd_may_daemon(c, cmd, desc, sizeof desc)) {
		cmd_refuse(c, cmd->name, PROTO_ERR_PERMISSION_DENIED, desc, req.id);
		goto out;
	}
	if (handlers[cmd->id])
		handlers[cmd->id](c, cmd, &req);
	else /* proto knows a command this daemon does not serve */
		cmd_refuse(c, cmd->name, PROTO_ERR_COMMAND_NOT_FOUND,
			"this rematd does not serve that command", req.id);
out:
	proto_request_free(&req);
}
