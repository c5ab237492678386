/* srv_worker.c - a job's worker: spawning remat-train on a socketpair, reading its lines
 * (greeting, replies, events), forwarding requests with rematd's own ids and routing the
 * replies back, and reaping it when it ends. See srv_worker.h and srv_job.h.
 * Not here: what the worker's lines say to the job table (srv_worker_read.c), the job table
 * and job-start's checks (srv_job*.c).
 */
#include "srv_worker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_err.h"
#include "srv_conn.h"
#include "srv_mpi.h"
#include "srv_worker_int.h"

#define WORKER_LOG_TAIL 4096   /* bytes of worker.log read for a failure's reason */
#define WORKER_LOG_SHOW 120    /* longest worker log line kept in a reason */
#define WORKER_FD_ARG "3"      /* SRV_WORKER_CONTROL_FD as the worker's argument */
#define METRICS_FD_ARG "4"     /* SRV_WORKER_METRICS_FD */

static void worker_on_close(uv_handle_t *h)
{
	srv_job *job = h->data;
	/* the record outlives its handles; srv_job.c frees it only once this reaches 0 */
	job->handles_open--;
}

void srv_worker_kill(srv_job *job, const char *why)
{
	if (!job->proc_alive)
		return;
	if (!job->killed_by[0])
		snprintf(job->killed_by, sizeof job->killed_by, "%s", why);
	srv_log("job %s: killing worker (pid %ld): %s", job->id, (long)job->pid, why);
	/* its whole process group: it leads a session of its own (worker_start), and under
	 * mpirun the local ranks are in it too */
	int r = kill(-(pid_t)job->pid, SIGKILL) == 0 ? 0 : uv_process_kill(&job->proc, SIGKILL);
	if (r < 0)
		srv_log("job %s: cannot kill pid %ld: %s", job->id, (long)job->pid,
			uv_strerror(r));
}

int srv_job_live(const srv_job *job)
{
	return job->proc_alive && job->chan_open;
}

static void worker_ask_figures(srv_job *job);

int srv_worker_request(srv_job *job, const char *execute, const json_t *args,
	unsigned conn_id, const json_t *client_id)
{
	if (!srv_job_live(job))
		return -1;
	if (strcmp(execute, "job-stop") == 0)
		worker_ask_figures(job); /* answered before the stop: the job's last figures */
	srv_pending *p = calloc(1, sizeof *p);
	json_t *wid = json_integer((json_int_t)(job->next_wid + 1));
	sv_msg *m = p && wid ? sv_msg_take(proto_request_line(execute, args, wid)) : NULL;
	json_decref(wid);
	if (!m || sv_stream_write((uv_stream_t *)&job->chan, m, NULL, NULL) < 0) {
		/* a write error also ends the channel's reading: the reaping follows */
		sv_msg_unref(m);
		free(p);
		return -1;
	}
	sv_msg_unref(m);
	p->wid = ++job->next_wid;
	p->conn_id = conn_id;
	p->sent_ms = srv_now_ms();
	const proto_command *pc = proto_command_find(execute);
	p->deferred = pc && pc->deferred;
	p->client_id = client_id ? json_incref((json_t *)client_id) : NULL;
	snprintf(p->execute, sizeof p->execute, "%s", execute);
	if (strcmp(execute, "remat-auto") == 0) {
		/* its reply gives the bytes; where they come from is the request's */
		const char *b = json_string_value(json_object_get(args, "budget"));
		snprintf(p->auto_asked, sizeof p->auto_asked, "%s", b ? b : "size");
	}
	p->next = job->pending;
	job->pending = p;
	if (strcmp(execute, "job-stop") == 0)
		job->stop_requested = 1;
	return 0;
}

int srv_job_forward(srv_job *job, srv_conn *c, const char *execute, const json_t *args,
	const json_t *id, proto_errclass *ec, char *desc, size_t desclen)
{
	if (!srv_job_live(job)) {
		*ec = PROTO_ERR_INVALID_STATE;
		snprintf(desc, desclen, "job %s is %s", job->id, proto_job_state_name(job->state));
		return -1;
	}
	if (srv_worker_request(job, execute, args, c->id, id) < 0) {
		*ec = PROTO_ERR_INTERNAL;
		snprintf(desc, desclen, "cannot reach the worker of job %s", job->id);
		return -1;
	}
	c->inflight++;
	return 0;
}

/* ---- time limits ---- */

/* How long a worker's reply is awaited: SRV_WORKER_REPLY_MS, or REMAT_WORKER_REPLY_MS
 * from the environment (for tests, 100..600000). */
static uint64_t worker_reply_ms(void)
{
	static uint64_t ms;
	if (!ms) {
		const char *e = getenv("REMAT_WORKER_REPLY_MS");
		char *end;
		long v = e ? strtol(e, &end, 10) : 0;
		ms = e && *end == '\0' && v >= 100 && v <= 600000 ? (uint64_t)v
								   : SRV_WORKER_REPLY_MS;
	}
	return ms;
}

/* How long a client's request waits for the worker's reply, 0 for as long as it takes: a
 * job-stop waits for its step boundary and its save, as long as rematd's --stop-timeout
 * (what a save may take at shutdown too, or the reply wait when that is 0); ckpt-save and
 * job-eval, deferred too, without a limit; the rest worker_reply_ms. */
static uint64_t pending_limit_ms(const srv_job *job, const srv_pending *p)
{
	if (strcmp(p->execute, "job-stop") == 0 && job->srv->stop_timeout_s > 0)
		return (uint64_t)job->srv->stop_timeout_s * 1000u;
	return p->deferred && strcmp(p->execute, "job-stop") != 0 ? 0 : worker_reply_ms();
}

/* A change the worker has not taken in time (it is stopped, or too busy to read): the
 * request cannot be called back (it waits in the channel, and the worker applies what it
 * reads), so the client is told it is queued, never that it failed. */
static void worker_expire_change(srv_job *job, srv_pending *p, srv_conn *c)
{
	char note[PROTO_DESC_LEN];
	double s = (double)pending_limit_ms(job, p) / 1000.0;
	int stop = strcmp(p->execute, "job-stop") == 0;
	snprintf(note, sizeof note, "the worker of job %s has not %s %s within %.3g s "
		"(%s): the request stays queued and takes effect, or is refused, when the worker "
		"reads it; the job's events and rematd's log say which%s", job->id,
		stop ? "answered" : "taken", p->execute, s,
		stop ? "still saving, stuck, or stopped" : "stopped, or too busy to read",
		stop ? "; job-kill ends its worker now, unsaved" : "");
	json_t *ret = json_pack("{s:b, s:s, s:f, s:s}", "queued", 1, "execute", p->execute,
		"waited_s", s, "note", note);
	srv_log("job %s: %s not taken after %.3g s: answered queued", job->id, p->execute, s);
	if (ret)
		srv_conn_reply(c, ret, p->client_id);
	else
		srv_conn_error(c, PROTO_ERR_INTERNAL, "out of memory", p->client_id);
	json_decref(ret);
}

/* A request the worker has not answered in time. A query: the client gets job-status from
 * the table, or Busy ("try again": asking has no effect); a change: queued
 * (worker_expire_change). The worker's late reply is only logged then. job-stop waits as
 * long as --stop-timeout (pending_limit_ms); not timed: ckpt-save and job-eval, and
 * requests sent while the job was starting wait for it. */
static void worker_expire(srv_job *job, srv_pending *p)
{
	srv_conn *c = srv_conn_find(job->srv, p->conn_id);
	const proto_command *pc = proto_command_find(p->execute);
	p->expired = 1;
	if (!c)
		return;
	c->inflight--;
	if (pc && !pc->query) {
		worker_expire_change(job, p, c);
		return;
	}
	if (strcmp(p->execute, "job-status") == 0) {
		json_t *ret = srv_job_status(job);
		if (ret) {
			json_object_set_new(ret, "stale", json_true());
			srv_conn_reply(c, ret, p->client_id);
			json_decref(ret);
			return;
		}
	}
	char desc[PROTO_DESC_LEN];
	snprintf(desc, sizeof desc, "the worker of job %s did not answer %s within %.3g s; try "
		"again", job->id, p->execute, (double)worker_reply_ms() / 1000.0);
	srv_log("job %s: %s unanswered after %.3g s", job->id, p->execute,
		(double)worker_reply_ms() / 1000.0);
	srv_conn_error(c, PROTO_ERR_BUSY, desc, p->client_id);
}

/* 1 while rematd's own request execute to job's worker awaits its reply. */
static int worker_own_pending(const srv_job *job, const char *execute)
{
	for (const srv_pending *p = job->pending; p; p = p->next)
		if (p->conn_id == 0 && strcmp(p->execute, execute) == 0)
			return 1;
	return 0;
}

/* Asks the worker for mem-stats, remat-get, job-status and under a pool remat-costs
 * (rematd's own requests; the replies are kept by worker_note_return: the figures an ended
 * job answers, the memory controller its record keeps, the costs the pool weighs), unless
 * it has not answered the last ones yet or is still starting (no figures before its
 * trainer exists). */
static void worker_ask_figures(srv_job *job)
{
	/* and under rematd --memory its sections' measured costs, which the division weighs */
	static const char *const asks[] = {"mem-stats", "remat-get", "job-status",
		"remat-costs"};
	const size_t n = sizeof asks / sizeof asks[0] - !job->srv->pool.on;
	if (job->state == PROTO_JOB_STARTING)
		return;
	for (size_t i = 0; i < n; i++)
		if (worker_own_pending(job, asks[i]))
			return;
	json_t *args = json_pack("{s:s}", "job", job->id);
	job->figures_ms = srv_now_ms();
	for (size_t i = 0; args && i < n; i++)
		if (srv_worker_request(job, asks[i], args, 0, NULL) < 0)
			break;
	json_decref(args);
}

/* The stall watchdog: a running job whose step has not moved for --stall-timeout, or for
 * SRV_STALL_STEPS times its median step when that is longer (a step of minutes is no
 * stall), is failed, its worker killed with its processes: a rank stuck in a collective
 * (a cut link) or a read never reaches the step boundary where a stop would end it. */
static void worker_watch(srv_job *job, uint64_t now)
{
	if (!job->srv->stall_timeout_s || job->state != PROTO_JOB_RUNNING || !job->progress_ms ||
		job->killed_by[0])
		return;
	uint32_t g[SRV_STALL_GAPS];
	int n = job->n_gaps < SRV_STALL_GAPS ? job->n_gaps : SRV_STALL_GAPS;
	memcpy(g, job->step_gaps, sizeof g);
	for (int i = 1; i < n; i++) /* insertion sort: eight at most */
		for (int j = i; j > 0 && g[j - 1] > g[j]; j--) {
			uint32_t t = g[j];
			g[j] = g[j - 1], g[j - 1] = t;
		}
	uint64_t limit = (uint64_t)job->srv->stall_timeout_s * 1000u;
	uint64_t steps = n ? (uint64_t)g[n / 2] * SRV_STALL_STEPS : 0;
	limit = steps > limit ? steps : limit;
	if (now - job->progress_ms < limit)
		return;
	char why[64];
	snprintf(why, sizeof why, "no step for %.0f s: rematd's stall timeout",
		(double)(now - job->progress_ms) / 1000.0);
	srv_worker_kill(job, why);
}

void srv_worker_sweep(srv_server *srv)
{
	uint64_t now = srv_now_ms();
	for (int i = 0; i < srv->n_jobs; i++) {
		srv_job *job = srv->jobs[i];
		if (!srv_job_live(job) || job->state == PROTO_JOB_STARTING)
			continue;
		for (srv_pending *p = job->pending; p; p = p->next) {
			uint64_t from = p->sent_ms > job->running_ms ? p->sent_ms : job->running_ms;
			uint64_t limit = pending_limit_ms(job, p);
			if (!limit || p->expired || p->conn_id == 0 || now - from < limit)
				continue;
			worker_expire(job, p);
		}
		if ((job->state == PROTO_JOB_RUNNING || job->state == PROTO_JOB_PAUSED) &&
			now - job->figures_ms >= SRV_FIGURES_MS)
			worker_ask_figures(job);
		worker_watch(job, now);
	}
	srv_pool_sweep(srv);
}

/* ---- the end of a worker ---- */

/* The last non-empty line of worker.log that this run wrote (from job->log_from on),
 * quoted, into out ("" when none). */
static void worker_log_tail(const srv_job *job, char *out, size_t outlen)
{
	char path[SRV_PATH_LEN + 16], buf[WORKER_LOG_TAIL + 1];
	out[0] = '\0';
	snprintf(path, sizeof path, "%s/worker.log", job->dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	off_t size = lseek(fd, 0, SEEK_END);
	off_t from = size > WORKER_LOG_TAIL ? size - WORKER_LOG_TAIL : 0;
	from = from > job->log_from ? from : (off_t)job->log_from;
	ssize_t n = size > from ? pread(fd, buf, (size_t)(size - from), from) : 0;
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	/* the last line that says something: not blank, not one of mpirun's rules of dashes;
	 * mpirun's word on a rank that died, when there is one */
	char *start = NULL, *line, *save = NULL;
	for (line = strtok_r(buf, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save)) {
		if (strstr(line, "noticed that process rank"))
			start = line;
		else if (line[strspn(line, "- ")] && !(start && strstr(start, "noticed that")))
			start = line;
	}
	if (!start)
		return;
	size_t len = strlen(start);
	while (len && start[len - 1] == ' ')
		start[--len] = '\0';
	/* the worker's text is as untrusted as a client's: escaped like it, cut shorter */
	char q[SRV_QUOTE_BUF];
	srv_quote(start, len > WORKER_LOG_SHOW ? WORKER_LOG_SHOW : len, q);
	snprintf(out, outlen, "%s%s", q, len > WORKER_LOG_SHOW ? "..." : "");
}

/* The requests the worker never answered: before the job's end is recorded (ended 0), an
 * error saying the job ended and how (desc) for each but job-status, which is kept; after
 * (ended 1), each job-status left gets the record's answer, what it would have got a
 * moment later: the job ended under it. */
static void worker_unanswered(srv_job *job, const char *desc, int ended)
{
	srv_pending **pp = &job->pending;
	while (*pp) {
		srv_pending *p = *pp;
		if (!ended && !strcmp(p->execute, "job-status")) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		srv_conn *c = p->conn_id && !p->expired ? srv_conn_find(job->srv, p->conn_id) : NULL;
		json_t *status = c && ended ? srv_job_status(job) : NULL;
		if (c)
			c->inflight--;
		if (status)
			srv_conn_reply(c, status, p->client_id);
		else if (c)
			srv_conn_error(c, PROTO_ERR_INVALID_STATE, desc, p->client_id);
		json_decref(status);
		srv_job_pending_free(p);
	}
}

/* Both ends seen (channel and process): records the end of the job. Runs once. */
static void worker_reap(srv_job *job)
{
	srv_server *srv = job->srv;
	if (job->reaped)
		return;
	job->reaped = 1;
	uv_close((uv_handle_t *)&job->timer, worker_on_close);
	proto_framer_free(&job->framer);
	job->pid = 0;
	srv->n_active--;

	char how[128], tail[SRV_QUOTE_BUF + 8] = "", reason[SRV_REASON_LEN];
	if (job->term_signal)
		snprintf(how, sizeof how, "killed by signal %d%s%s%s", job->term_signal,
			job->killed_by[0] ? " (" : "", job->killed_by,
			job->killed_by[0] ? ")" : "");
	else
		snprintf(how, sizeof how, "exit status %d", job->exit_status);
	proto_job_state to = job->state;
	if (job->final_reported) {
		snprintf(reason, sizeof reason, "%s", job->reason);
	} else if (!job->term_signal && job->exit_status == 0) {
		/* a clean exit that said nothing: it ran to its end, or obeyed job-stop */
		to = job->stop_requested ? PROTO_JOB_STOPPED : PROTO_JOB_FINISHED;
		snprintf(reason, sizeof reason, "%s", how);
	} else {
		to = PROTO_JOB_FAILED;
		if (!job->term_signal)
			worker_log_tail(job, tail, sizeof tail);
		srv_fmt(reason, sizeof reason, "%s%s%s", how, tail[0] ? ": " : "", tail);
	}
	char desc[PROTO_DESC_LEN];
	snprintf(desc, sizeof desc, "job %s %s: worker %s", job->id, proto_job_state_name(to),
		how);
	worker_unanswered(job, desc, 0);

	/* the worker's words and the client's paths are quoted in the log */
	char q[SRV_QUOTE_BUF], ckpt[SRV_QUOTE_BUF + 24] = "";
	if (job->last_checkpoint)
		snprintf(ckpt, sizeof ckpt, "; last checkpoint %s", srv_quote(job->last_checkpoint,
			strlen(job->last_checkpoint), q));
	if (to == PROTO_JOB_FAILED && job->final_reported)
		srv_log("job %s failed: %s (%s)%s", job->id, srv_quote(reason, strlen(reason), q),
			how, ckpt);
	else if (to == PROTO_JOB_FAILED)
		srv_log("job %s failed: %s%s", job->id, reason, ckpt);
	else
		srv_log("job %s %s (%s)", job->id, proto_job_state_name(to), how);
	if (job->final_reported) {
		/* the worker's own final event was held back for this one */
		srv_job_save_record(job);
		srv_job_emit_state(job, job->final_from);
	} else if (to != job->state) {
		srv_job_set_state(job, to, reason);
	} else {
		srv_job_save_record(job);
	}
	worker_unanswered(job, desc, 1);
	srv_pool_changed(srv, "a job ended"); /* its share back to the others */
	srv_job_schedule(srv);
	srv->on_worker_reaped(srv);
}

static void worker_chan_end(srv_job *job);

static void worker_on_timer(uv_timer_t *t)
{
	srv_job *job = t->data;
	if (job->proc_alive)
		srv_worker_kill(job, "it closed its channel but did not exit");
	else
		worker_chan_end(job);
}

static void worker_chan_end(srv_job *job)
{
	if (!job->chan_open)
		return;
	job->chan_open = 0;
	uv_close((uv_handle_t *)&job->chan, worker_on_close);
	if (job->proc_alive)
		uv_timer_start(&job->timer, worker_on_timer, SRV_WORKER_EOF_GRACE_MS, 0);
	else
		worker_reap(job);
}

static void worker_on_exit(uv_process_t *proc, int64_t status, int sig)
{
	srv_job *job = proc->data;
	job->proc_alive = 0;
	srv_mpi_close(job); /* mpirun ended before rank 0 connected */
	job->term_signal = sig;
	job->exit_status = sig ? -1 : (int)status;
	uv_close((uv_handle_t *)proc, worker_on_close);
	if (job->chan_open) /* its last lines may still be in the socket */
		uv_timer_start(&job->timer, worker_on_timer, SRV_WORKER_DRAIN_MS, 0);
	else
		worker_reap(job);
}

static void worker_on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)suggested;
	srv_job *job = h->data;
	*buf = uv_buf_init(job->srv->rbuf, sizeof job->srv->rbuf);
}

static void worker_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	srv_job *job = s->data;
	if (n == 0 || !job->chan_open)
		return;
	if (n < 0) {
		if (n != UV_EOF)
			srv_log("job %s: reading from the worker: %s", job->id,
				uv_strerror((int)n));
		worker_chan_end(job);
		return;
	}
	if (proto_framer_feed(&job->framer, buf->base, (size_t)n, srv_worker__on_line, job) < 0) {
		srv_worker_kill(job, "it sent a line over the protocol's limit");
		worker_chan_end(job);
	}
}

/* Starts queued jobs, oldest first, while worker slots are free. */
void srv_job_schedule(srv_server *srv)
{
	for (int i = 0; i < srv->n_jobs; i++) {
		if (srv->shutting_down || srv->n_active >= srv->max_jobs)
			return;
		if (srv->jobs[i]->state != PROTO_JOB_QUEUED || srv->jobs[i]->checking)
			continue;
		/* oldest first: one waiting for the pool keeps the ones behind it waiting */
		int admit = srv_pool_admit(srv->jobs[i]);
		if (admit < 0)
			srv_job_save_record(srv->jobs[i]); /* its reason says what it waits for */
		if (admit <= 0)
			return;
		srv_worker_spawn(srv->jobs[i]);
	}
}

/* ---- spawning ---- */

/* Rank 0 connected (srv_mpi_wait): its socket becomes the job's channel; or the wait
 * failed (fd NULL), and the worker goes. */
static void worker_mpi_connected(srv_job *job, int *fd, const char *why)
{
	if (fd)
		srv_worker_channel_open(job, fd);
	else
		srv_worker_kill(job, why);
}

/* The worker runs: rematd's end of the socketpair (*fd, taken) becomes its channel, read
 * from now on, and rematd's own subscription goes first (the worker reads requests in
 * order). A channel that cannot be opened kills the worker. */
void srv_worker_channel_open(srv_job *job, int *fd)
{
	srv_server *srv = job->srv;
	uv_pipe_init(srv->loop, &job->chan, 0);
	job->chan.data = job;
	job->handles_open++;
	job->chan_open = 1;
	proto_framer_init(&job->framer);
	int r = uv_pipe_open(&job->chan, *fd);
	if (r == 0)
		*fd = -1; /* the pipe owns it now */
	if (r == 0)
		r = uv_read_start((uv_stream_t *)&job->chan, worker_on_alloc, worker_on_read);
	srv_log("job %s started (pid %ld)", job->id, (long)job->pid);
	srv_job_set_state(job, PROTO_JOB_STARTING, "worker spawned");
	if (r < 0 || srv_worker_request(job, "subscribe", NULL, 0, NULL) < 0) {
		srv_log("job %s: cannot talk to the worker: %s", job->id,
			r < 0 ? uv_strerror(r) : "write failed");
		srv_worker_kill(job, "its channel could not be opened");
		worker_chan_end(job);
		return;
	}
}

/* The job's file name in its directory, opened to append (created 0600): reached through
 * the directory's descriptor, and a link (symbolic or hard) or another user's file there is
 * refused (eng_fs_append_at). The descriptor, or -1 with why in err. */
static int job_append(const srv_job *job, const char *name, char *err, size_t errlen)
{
	eng_dir d;
	eng_err e = {0};
	int fd = srv_job_dir_open(job, &d, &e) < 0 ? -1 :
		 eng_fs_append_at(&d, name, 0600, geteuid(), &e);
	eng_dir_close(&d);
	if (fd < 0)
		srv_fmt(err, errlen, "%s", e.msg);
	return fd;
}

/* One remat-train's descriptors: the job's metrics.jsonl (every step and eval, appended by
 * the worker; a resumed job goes on in the same file, job-metrics reads it back) as fd 4,
 * the socketpair's end as fd 3. 0, or -1 with why in err. */
static int worker_fds(srv_job *job, int sv[2], int *metrics_fd, uv_stdio_container_t *stdio,
	char *err, size_t errlen)
{
	if ((*metrics_fd = job_append(job, SRV_METRICS_FILE, err, errlen)) < 0)
		return -1;
	/* CLOEXEC on both ends: libuv dup2s the child's end onto fd 3, which clears the flag
	 * there only; no other child inherits either end */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(err, errlen, "cannot create a socketpair: %s", strerror(errno));
		return -1;
	}
	stdio[SRV_WORKER_CONTROL_FD].flags = UV_INHERIT_FD;
	stdio[SRV_WORKER_CONTROL_FD].data.fd = sv[1];
	stdio[SRV_WORKER_METRICS_FD].flags = UV_INHERIT_FD;
	stdio[SRV_WORKER_METRICS_FD].data.fd = *metrics_fd;
	return 0;
}

/* Starts the process args[0] with args and stdio (n entries) in the job's directory, its
 * own session: 0, its handles counted, the slot taken and the timer its reaping closes
 * ready; or -1 with why in err. */
static int worker_start(srv_job *job, char **args, uv_stdio_container_t *stdio, int n,
	char *err, size_t errlen)
{
	srv_server *srv = job->srv;
	uv_process_options_t opt;
	memset(&opt, 0, sizeof opt);
	opt.exit_cb = worker_on_exit;
	opt.file = args[0];
	opt.args = args;
	opt.cwd = job->dir;
	/* its own session: a terminal's ^C reaches rematd alone, which stops workers in order */
	opt.flags = UV_PROCESS_DETACHED;
	opt.stdio_count = n;
	opt.stdio = stdio;
	job->proc.data = job;
	int r = uv_spawn(srv->loop, &job->proc, &opt);
	if (r < 0) {
		/* libuv initialised the handle all the same: it must be closed */
		job->handles_open++;
		uv_close((uv_handle_t *)&job->proc, worker_on_close);
		srv_fmt(err, errlen, "cannot start worker '%s': %s", args[0], uv_strerror(r));
		return -1;
	}
	job->handles_open++;
	job->proc_alive = 1;
	job->pid = job->proc.pid;
	/* its reports of the controller count from its first step (it starts the spec's
	 * budget at that boundary) */
	srv_auto_spawned(&job->autoc, job->step + 1);
	srv->n_active++;
	/* the reaping closes it, whether a channel ever opened (mpirun may end first) */
	uv_timer_init(srv->loop, &job->timer);
	job->timer.data = job;
	job->handles_open++;
	return 0;
}

void srv_worker_spawn(srv_job *job)
{
	srv_server *srv = job->srv;
	char spec_path[SRV_PATH_LEN + 16], err[SRV_REASON_LEN];
	int sv[2] = {-1, -1}, log_fd = -1, metrics_fd = -1;

	/* one worker per job, ever: its handles live in the job record */
	ENG_ASSERT(job->state == PROTO_JOB_QUEUED && job->handles_open == 0 && !job->reaped);

	snprintf(spec_path, sizeof spec_path, "%s/%s", job->dir, job->spec_file);
	if ((log_fd = job_append(job, "worker.log", err, sizeof err)) < 0)
		goto fail;
	off_t log_size = lseek(log_fd, 0, SEEK_END);
	job->log_from = log_size > 0 ? (long long)log_size : 0;
	/* as its owner when rematd is root and the owner is not (remat-train drops first) */
	char as_arg[ENG_CRED_ARG_LEN], mpi_store[4 * SRV_PATH_LEN], pool_arg[24];
	char *args[SRV_MPI_MAX_ARGS] = {srv->worker_path, "--control-fd", WORKER_FD_ARG,
		"--job-id", job->id, "--metrics-fd", METRICS_FD_ARG};
	int mpi = srv_mpi_ranks(job) > 1, n = 7 + srv_cred_args(srv, &job->owner, as_arg, args + 7);
	long long share = srv_pool_spawning(job); /* its controller's budget from step 1 */
	snprintf(pool_arg, sizeof pool_arg, "%lld", share);
	if (share > 0 && !mpi) {
		args[n++] = "--pool-budget";
		args[n++] = pool_arg;
	}
	uv_stdio_container_t stdio[SRV_WORKER_METRICS_FD + 1];
	stdio[0].flags = UV_IGNORE; /* /dev/null */
	stdio[1].flags = UV_INHERIT_FD;
	stdio[1].data.fd = log_fd;
	stdio[2].flags = UV_INHERIT_FD;
	stdio[2].data.fd = log_fd;
	if (mpi) {
		/* mpirun -np N remat-train: rank 0 connects to a socket of the job's */
		if (srv_mpi_prepare(job, n > 7 ? as_arg : NULL, share > 0 ? pool_arg : NULL,
			    spec_path, args, mpi_store, sizeof mpi_store, err, sizeof err) < 0)
			goto fail;
	} else {
		args[n] = spec_path;
		if (worker_fds(job, sv, &metrics_fd, stdio, err, sizeof err) < 0)
			goto fail;
	}
	if (worker_start(job, args, stdio, mpi ? 3 : SRV_WORKER_METRICS_FD + 1, err,
		sizeof err) < 0)
		goto fail;
	srv_pool_started(job);
	if (sv[1] >= 0)
		close(sv[1]);
	close(log_fd);
	if (metrics_fd >= 0)
		close(metrics_fd);
	sv[1] = log_fd = metrics_fd = -1;

	if (mpi) {
		srv_mpi_wait(job, worker_mpi_connected); /* rank 0's connection: the channel */
		return;
	}
	srv_worker_channel_open(job, &sv[0]);
	if (sv[0] >= 0)
		close(sv[0]);
	return;

fail:
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	if (log_fd >= 0)
		close(log_fd);
	if (metrics_fd >= 0)
		close(metrics_fd);
	srv_mpi_close(job);
	srv_log("job %s failed: %s", job->id, err);
	srv_job_set_state(job, PROTO_JOB_FAILED, err);
}
