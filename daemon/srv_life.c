/* srv_life.c - the daemon's life as others see it: what the service manager is told
 * (READY, STATUS= with the jobs, WATCHDOG, STOPPING and EXTEND_TIMEOUT_USEC while workers
 * stop; docs in rematd.c) and the shutdown (job-stop to every worker, the final saves, the
 * timeout, the last handles closed). See srv.h.
 * Not here: main, the options and start-up (rematd.c), the notification socket itself
 * (srv_notify.c).
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "srv.h"
#include "srv_conn.h"
#include "srv_helper.h"
#include "srv_job.h"
#include "srv_worker.h"

#define STATUS_REFRESH_MS 2000      /* STATUS= re-sent this often when its text changed */
#define STATUS_JOBS_SHOWN 8         /* jobs listed one by one in STATUS=; then "+N more" */
#define EXTEND_PERIOD_MS 5000       /* EXTEND_TIMEOUT_USEC= this often while workers stop */
#define EXTEND_USEC (3ull * EXTEND_PERIOD_MS * 1000u) /* each extension: three periods, so
					* one late or lost datagram costs nothing */

/* ---- the service manager ---- */

/* Sends one notification (printf-style "KEY=VALUE" lines). A failure is logged once, and
 * again only after a send succeeded: a manager that went away must not flood the log. */
void srv_life_notify(srv_server *srv, const char *fmt, ...)
{
	char msg[SRV_STATUS_LEN + 128];
	va_list ap;
	if (!srv_notify_enabled(&srv->notify))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (srv_notify_send(&srv->notify, msg) < 0) {
		if (!srv->notify_failing)
			srv_log("cannot notify '%s': %s", srv->notify.name, strerror(errno));
		srv->notify_failing = 1;
	} else {
		srv->notify_failing = 0;
	}
}

/* The STATUS= text: the jobs with a worker (id, state, step/steps), the queue; or how the
 * shutdown is going. Job names are left out: they are client input and could hold a
 * newline, which would end the STATUS= line. */
static void status_text(const srv_server *srv, char *buf, size_t len)
{
	size_t o = 0;
	int shown = 0, active = 0, queued = 0;
	if (srv->shutting_down) {
		snprintf(buf, len, "stopping: %d worker(s) %s", srv->n_active,
			srv->n_active == 0 ? "left" : srv->shutdown_save ? "saving" : "stopping");
		return;
	}
	buf[0] = '\0';
	for (int i = 0; i < srv->n_jobs; i++) {
		const srv_job *job = srv->jobs[i];
		if (job->state == PROTO_JOB_QUEUED) {
			queued++;
			continue;
		}
		if (proto_job_state_final(job->state))
			continue;
		active++;
		if (shown++ >= STATUS_JOBS_SHOWN || o >= len)
			continue;
		int n = snprintf(buf + o, len - o, "%s%s %s %d/%d", shown > 1 ? ", " : "",
			job->id, proto_job_state_name(job->state), job->step, job->steps);
		o += n > 0 ? (size_t)n : 0;
	}
	char tail[64] = "";
	if (active > STATUS_JOBS_SHOWN)
		snprintf(tail, sizeof tail, " (+%d more)", active - STATUS_JOBS_SHOWN);
	char head[SRV_STATUS_LEN];
	snprintf(head, sizeof head, "%s", buf);
	if (active == 0)
		snprintf(buf, len, "idle: no job running; %d queued", queued);
	else
		srv_fmt(buf, len, "%d job(s) running: %s%s; %d queued", active, head, tail,
			queued);
}

void srv_status_update(srv_server *srv)
{
	char text[SRV_STATUS_LEN];
	if (!srv_notify_enabled(&srv->notify))
		return;
	status_text(srv, text, sizeof text);
	if (strcmp(text, srv->status) == 0)
		return;
	snprintf(srv->status, sizeof srv->status, "%s", text);
	srv_life_notify(srv, "STATUS=%s", text);
}

/* READY=1 with the STATUS= text of the moment. */
void srv_life_ready(srv_server *srv)
{
	status_text(srv, srv->status, sizeof srv->status);
	srv_life_notify(srv, "READY=1\nSTATUS=%s", srv->status);
}

static void on_status_timer(uv_timer_t *t)
{
	srv_status_update(t->data);
}

/* The loop turned: it is healthy enough to run this callback on time, hence to serve. A
 * blocked or spinning-without-timers loop sends nothing, and the manager restarts us. */
static void on_watchdog_timer(uv_timer_t *t)
{
	srv_life_notify(t->data, "WATCHDOG=1");
}

static void on_extend_timer(uv_timer_t *t)
{
	srv_server *srv = t->data;
	if (srv->n_active > 0)
		srv_life_notify(srv, "EXTEND_TIMEOUT_USEC=%llu", (unsigned long long)EXTEND_USEC);
}

/* Starts the timers that keep the manager informed. They are unreferenced: they alone must
 * not keep the loop running once everything else has closed. */
void srv_life_timers_start(srv_server *srv)
{
	if (!srv_notify_enabled(&srv->notify))
		return;
	uv_timer_t *timers[] = {&srv->watchdog_timer, &srv->status_timer, &srv->extend_timer};
	for (size_t i = 0; i < sizeof timers / sizeof timers[0]; i++) {
		uv_timer_init(srv->loop, timers[i]);
		timers[i]->data = srv;
		uv_unref((uv_handle_t *)timers[i]);
	}
	srv->notify_timers = 1;
	uv_timer_start(&srv->status_timer, on_status_timer, STATUS_REFRESH_MS,
		STATUS_REFRESH_MS);
	if (srv->notify.watchdog_usec) {
		/* half the interval, as sd_watchdog_enabled(3) advises; at least 1 ms */
		uint64_t ms = srv->notify.watchdog_usec / 2000u;
		ms = ms ? ms : 1;
		uv_timer_start(&srv->watchdog_timer, on_watchdog_timer, ms, ms);
		srv_log("watchdog: WATCHDOG=1 every %llu ms", (unsigned long long)ms);
	}
}

/* Closes those timers (at the end of main). */
void srv_life_timers_close(srv_server *srv)
{
	if (!srv->notify_timers)
		return;
	srv->notify_timers = 0;
	uv_close((uv_handle_t *)&srv->watchdog_timer, NULL);
	uv_close((uv_handle_t *)&srv->status_timer, NULL);
	uv_close((uv_handle_t *)&srv->extend_timer, NULL);
}

/* ---- shutdown ---- */

/* job-stop {save} to every worker (starting ones too: they answer at their first step
 * boundary); queued jobs become stopped (queued again if the shutdown is called off). */
static void stop_all(srv_server *srv, int save)
{
	for (int i = 0; i < srv->n_jobs; i++) {
		srv_job *job = srv->jobs[i];
		/* the shutdown's reply lists the stops it asked for, and only those */
		json_decref(job->stop_ret);
		job->stop_ret = NULL;
		if (job->state == PROTO_JOB_QUEUED) {
			srv_job_cancel(job, "daemon shut down before it ran");
			job->shutdown_cancelled = 1;
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

/* SIGKILL to every live worker (shutdown timeout, second signal); why goes to the log and
 * to the jobs' reasons. */
static void kill_all(srv_server *srv, const char *why)
{
	for (int i = 0; i < srv->n_jobs; i++)
		srv_worker_kill(srv->jobs[i], why);
}

static void on_shutdown_timeout(uv_timer_t *t)
{
	srv_server *srv = t->data;
	srv_log("%d worker(s) still running %d s after job-stop", srv->n_active,
		srv->stop_timeout_s);
	kill_all(srv, "still running at the shutdown timeout");
}

void srv_shutdown(srv_server *srv, int save, int by_signal, srv_waiter *waiter,
	const char *why)
{
	if (waiter)
		srv_waiter_push(&srv->shutdown_waiters, waiter);
	if (srv->shutting_down) {
		/* a repeated request is not an emergency: only a second signal kills */
		if (by_signal) {
			srv_log("%s during the shutdown: killing the workers now", why);
			kill_all(srv, "a second stop request");
		}
		srv->shutdown_by_signal |= by_signal;
		srv_shutdown_progress(srv);
		return;
	}
	srv->shutting_down = 1;
	srv->shutdown_save = save;
	srv->shutdown_by_signal = by_signal;
	srv_log("shutting down (%s): %d worker(s) to stop%s", why, srv->n_active,
		save ? ", saving" : "");
	/* the socket stays served until the last worker is gone: queries are answered and
	 * job-start refused meanwhile */
	srv_helper_kill_all(srv, "the daemon is shutting down");
	stop_all(srv, save);
	/* the manager's stop timeout runs from STOPPING=1; final saves can outlast it, so it
	 * is extended while workers live (at most --stop-timeout, then they are killed) */
	status_text(srv, srv->status, sizeof srv->status);
	if (srv->n_active > 0) {
		srv_life_notify(srv, "STOPPING=1\nSTATUS=%s\nEXTEND_TIMEOUT_USEC=%llu", srv->status,
			(unsigned long long)EXTEND_USEC);
		if (srv->notify_timers)
			uv_timer_start(&srv->extend_timer, on_extend_timer, EXTEND_PERIOD_MS,
				EXTEND_PERIOD_MS);
	} else {
		srv_life_notify(srv, "STOPPING=1\nSTATUS=%s", srv->status);
	}
	uv_timer_start(&srv->shutdown_timer, on_shutdown_timeout,
		(uint64_t)srv->stop_timeout_s * 1000u, 0);
	srv_shutdown_progress(srv);
}

/* The queued jobs a shutdown that is called off had stopped: queued again, in their order */
static void requeue_cancelled(srv_server *srv)
{
	for (int i = 0; i < srv->n_jobs; i++) {
		srv_job *job = srv->jobs[i];
		if (job->shutdown_cancelled && job->state == PROTO_JOB_STOPPED) {
			srv_log("job %s queued again: the shutdown was called off", job->id);
			srv_job_set_state(job, PROTO_JOB_QUEUED, "queued again: the shutdown was "
				"called off");
		}
		job->shutdown_cancelled = 0;
	}
}

void srv_shutdown_save_failed(srv_server *srv, srv_job *job, const char *desc)
{
	char q[SRV_QUOTE_BUF], msg[PROTO_DESC_LEN];
	if (!srv->shutting_down)
		return;
	if (srv->shutdown_by_signal) {
		/* a signal means go: the job stops without this save, and keeps its last one */
		srv_log("job %s: the final save failed (%s); stopping it without saving (last "
			"checkpoint %s)", job->id, srv_quote(desc, strlen(desc), q),
			job->last_checkpoint ? job->last_checkpoint : "none");
		json_t *args = json_pack("{s:s, s:b}", "job", job->id, "save", 0);
		if (srv_worker_request(job, "job-stop", args, 0, NULL) < 0)
			srv_worker_kill(job, "it could not be asked to stop");
		json_decref(args);
		return;
	}
	/* daemon-shutdown {save}: nothing is lost for a shutdown; it is called off */
	srv_fmt(msg, sizeof msg, "job %s could not be saved: %s; the shutdown is called off, "
		"the daemon and the job go on: free space and shut down again, or shut down "
		"with --no-save", job->id, desc);
	srv_log("shutdown called off: %s", srv_quote(msg, strlen(msg), q));
	srv->shutting_down = 0;
	srv->shutdown_save = 0;
	uv_timer_stop(&srv->shutdown_timer);
	if (srv->notify_timers)
		uv_timer_stop(&srv->extend_timer);
	srv_conn_answer_waiters(srv, &srv->shutdown_waiters, NULL, PROTO_ERR_IO_ERROR, msg);
	srv->status[0] = '\0';
	requeue_cancelled(srv);
	srv_life_ready(srv);
	srv_job_schedule(srv);
}

/* daemon-shutdown's return: each job the shutdown stopped, with what its worker said (the
 * step, and its checkpoint or the steps it dropped since which checkpoint). */
static json_t *shutdown_return(srv_server *srv)
{
	json_t *jobs = json_array();
	for (int i = 0; jobs && i < srv->n_jobs; i++) {
		srv_job *job = srv->jobs[i];
		if (!job->stop_ret)
			continue;
		json_t *e = json_deep_copy(job->stop_ret);
		if (e && json_object_set_new(e, "job", json_string(job->id)) == 0)
			json_array_append(jobs, e);
		json_decref(e);
	}
	return jobs ? json_pack("{s:o}", "jobs", jobs) : NULL;
}

void srv_shutdown_progress(srv_server *srv)
{
	if (!srv->shutting_down || srv->shutdown_done || srv->n_active > 0)
		return;
	srv->shutdown_done = 1;
	/* the last handles: once the connections are flushed and closed, uv_run returns (the
	 * signal handles are unreferenced, so they keep catching signals until then) */
	json_t *ret = shutdown_return(srv);
	srv_conn_answer_waiters(srv, &srv->shutdown_waiters, ret, PROTO_ERR_INTERNAL,
		ret ? NULL : "out of memory");
	json_decref(ret);
	srv_listen_close(&srv->listener);
	uv_close((uv_handle_t *)&srv->shutdown_timer, NULL);
	uv_close((uv_handle_t *)&srv->sweep_timer, NULL);
	if (srv->notify_timers)
		uv_timer_stop(&srv->extend_timer);
	srv_status_update(srv);
	srv_conn_drain_all(srv);
}

