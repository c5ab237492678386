/* wk_ctl_loop.c - remat-train's control thread (see wk_ctl.h): a libuv loop that owns the
 * connections (--control's clients, rematd's link), reads their requests and hands them to
 * the commands (wk_ctl_cmd.c), delivers the outbox the training thread fills, sends MEMORY
 * events, and answers the requests that came while the job was starting. Not here: the
 * training thread's side (wk_ctl.c), the commands (wk_ctl_cmd.c, wk_ctl_mem.c).
 */
#include "wk_ctl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "eng_backend.h"
#include "eng_mem.h"
#include "wk_ctl_int.h"

/* ---- control thread: connections ---- */

/* The served connection with that handle, or NULL when it is gone or closing. */
static ctl_conn *conn_get(struct wk_ctl *c, int handle)
{
	for (ctl_conn *k = c->conns; k && handle >= 0; k = k->next)
		if (k->id == (unsigned)handle)
			return k->k.draining ? NULL : k;
	return NULL;
}

static void conn_unserve(ctl_conn *k)
{
	if (k->served)
		k->ctl->n_conns--;
	k->served = 0;
}

/* rematd is gone (its end of the link read as closed, or a write to it failed first):
 * the run stops at the next step boundary, saved. Once. */
static void link_gone(ctl_conn *k, const char *how)
{
	pthread_mutex_lock(&k->ctl->mu);
	int first = !k->ctl->run.link_lost;
	k->ctl->run.link_lost = 1;
	wk_ctl_cmd *cmd = first ? calloc(1, sizeof *cmd) : NULL;
	if (cmd && !wk_ctl__is_final(k->ctl->run.state)) {
		cmd->op = CTL_OP_STOP;
		cmd->save = 1;
		cmd->conn = -1;
		wk_ctl__enqueue(k->ctl, cmd);
	} else {
		free(cmd);
	}
	pthread_mutex_unlock(&k->ctl->mu);
	if (first)
		fprintf(stderr, "remat-train: control link %s\n", how);
}

static void on_conn_end(sv_conn *sk, int status)
{
	ctl_conn *k = sk->owner;
	(void)status;
	if (k->link)
		link_gone(k, "closed by rematd");
}

/* Both handles closed: out of the list, and freed (the only place it is). rematd's link
 * closed while still served (not by our own end) means rematd is gone, whichever way the
 * loop found out: a write that failed closes it without an end of stream. */
static void on_conn_closed(sv_conn *sk)
{
	ctl_conn *k = sk->owner;
	if (k->link && k->served)
		link_gone(k, "lost (rematd is gone)");
	conn_unserve(k);
	if (k->prev)
		k->prev->next = k->next;
	else
		k->ctl->conns = k->next;
	if (k->next)
		k->next->prev = k->prev;
	free(k);
}



/* A client that stops reading is dropped, never waited for; that goes to the log (a
 * client's ordinary hang-up does not). */
static void conn_log(sv_conn *sk, const char *what)
{
	ctl_conn *k = sk->owner;
	if (strncmp(what, "disconnected", 12) != 0)
		fprintf(stderr, "remat-train: control: client %u %s\n", k->id, what);
}

static void on_conn_line(sv_conn *sk, const char *line, size_t len);

static const sv_conn_ops ctl_ops = {on_conn_line, on_conn_end, on_conn_closed, conn_log,
	NULL};

/* A new peer on the loop, in the list (not yet served). */
static ctl_conn *conn_new(struct wk_ctl *c)
{
	ctl_conn *k = calloc(1, sizeof *k);
	if (!k)
		return NULL;
	k->ctl = c;
	k->id = ++c->next_id & 0x7fffffffu;
	sv_conn_init(&k->k, &c->loop, &ctl_ops, k, c->rbuf, sizeof c->rbuf);
	k->k.linger_ms = CTL_FLUSH_MS;
	k->next = c->conns;
	if (c->conns)
		c->conns->prev = k;
	c->conns = k;
	return k;
}

static void on_conn_line(sv_conn *sk, const char *line, size_t len)
{
	ctl_conn *k = sk->owner;
	struct wk_ctl *c = k->ctl;
	proto_request req;
	proto_errclass ec;
	char desc[PROTO_DESC_LEN];
	if (proto_request_parse(line, len, &req, &ec, desc, sizeof desc) < 0) {
		wk_ctl__send_error(k, ec, desc, req.id);
		goto out;
	}
	const proto_command *cmd = proto_command_find(req.execute);
	if (!cmd) {
		snprintf(desc, sizeof desc, "unknown command '%.64s'", req.execute);
		wk_ctl__send_error(k, PROTO_ERR_COMMAND_NOT_FOUND, desc, req.id);
		goto out;
	}
	if (proto_args_validate_ex(cmd, req.args, 1, desc, sizeof desc) < 0) {
		wk_ctl__send_error(k, PROTO_ERR_INVALID_PARAMETER, desc, req.id);
		goto out;
	}
	json_t *job = json_object_get(req.args, "job");
	if (job && strcmp(json_string_value(job), c->job) != 0) {
		snprintf(desc, sizeof desc, "no job '%.64s' here (this worker runs '%s')",
			json_string_value(job), c->job);
		wk_ctl__send_error(k, PROTO_ERR_JOB_NOT_FOUND, desc, req.id);
		goto out;
	}
	if (cmd->deferred && k->inflight >= PROTO_MAX_INFLIGHT) {
		wk_ctl__send_error(k, PROTO_ERR_BUSY, "too many requests in flight", req.id);
		goto out;
	}
	pthread_mutex_lock(&c->mu);
	json_t *ret = wk_ctl__dispatch(c, k, (int)k->id, req.execute, req.args, req.id);
	pthread_mutex_unlock(&c->mu);
	if (ret) {
		sv_conn_reply(&k->k, ret, req.id);
		json_decref(ret);
	}
out:
	proto_request_free(&req);
}

static void on_connection(uv_stream_t *server, int status)
{
	struct wk_ctl *c = server->data;
	char desc[96];
	eng_cred cr;
	pid_t pid;
	if (status < 0)
		return;
	ctl_conn *k = conn_new(c);
	if (!k)
		return;
	if (sv_conn_accept(&k->k, server) < 0) {
		sv_conn_close(&k->k, NULL);
		return;
	}
	/* the socket's mode is not the only guard: the peer must be our user, or root */
	int known = sv_conn_peer(&k->k, &cr, &pid) == 0;
	if (!known || (cr.uid != geteuid() && cr.uid != 0)) {
		snprintf(desc, sizeof desc, "uid %ld may not use this worker",
			known ? (long)cr.uid : -1L);
		fprintf(stderr, "remat-train: control: refused a connection: %s\n", desc);
		sv_conn_error(&k->k, PROTO_ERR_PERMISSION_DENIED, desc, NULL);
		sv_conn_drain(&k->k);
		return;
	}
	sv_conn_send_line(&k->k, proto_greeting("worker", c->job));
	if (c->n_conns >= CTL_MAX_CONN) {
		sv_conn_error(&k->k, PROTO_ERR_BUSY, "too many connections", NULL);
		sv_conn_drain(&k->k);
		return;
	}
	k->served = 1;
	c->n_conns++;
	sv_conn_read(&k->k);
}

/* ---- control thread: outbox, timers, lifetime ---- */

/* Answers the requests that came while the job was starting: through the commands, now
 * that the trainer is there (replay), or with an error when it never came (the job failed
 * to start, or the worker is finishing). Control thread, mu not held. */
static void early_answer(struct wk_ctl *c, int replay)
{
	pthread_mutex_lock(&c->mu);
	ctl_early *e = c->early;
	c->early = NULL;
	char why[PROTO_DESC_LEN];
	snprintf(why, sizeof why, "job %s ended before it started: %.400s", c->job, c->run.reason);
	while (e) {
		ctl_early *next = e->next;
		ctl_conn *k = conn_get(c, e->handle);
		if (k) {
			k->inflight--; /* it was counted as waiting; dispatch counts it anew */
			json_t *ret = replay ? wk_ctl__dispatch(c, k, e->handle, e->execute, e->args,
						     e->id) : NULL;
			if (ret) {
				sv_conn_reply(&k->k, ret, e->id);
				json_decref(ret);
			} else if (!replay) {
				wk_ctl__send_error(k, PROTO_ERR_INVALID_STATE, why, e->id);
			}
		}
		json_decref(e->args);
		json_decref(e->id);
		free(e);
		e = next;
	}
	c->replay = 0;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

static void deliver(struct wk_ctl *c, ctl_out *o)
{
	if (o->conn >= 0) {
		ctl_conn *k = conn_get(c, o->conn);
		if (k) {
			if (o->deferred && k->inflight > 0)
				k->inflight--;
			sv_conn_send_line(&k->k, o->line);
			o->line = NULL;
		}
		return;
	}
	sv_msg *m = sv_msg_take(o->line);
	o->line = NULL;
	for (ctl_conn *k = c->conns; k && m; k = k->next)
		if (k->served)
			sv_conn_event(&k->k, "", (uint32_t)o->event, m);
	sv_msg_unref(m);
}

static void on_async(uv_async_t *a)
{
	struct wk_ctl *c = a->data;
	pthread_mutex_lock(&c->mu);
	ctl_out *o = c->o_head;
	c->o_head = c->o_tail = NULL;
	int quit = c->quit, replay = c->replay;
	pthread_mutex_unlock(&c->mu);
	if (replay)
		early_answer(c, 1);
	while (o) {
		ctl_out *n = o->next;
		deliver(c, o);
		free(o->line);
		free(o);
		o = n;
	}
	if (!quit || uv_is_closing((uv_handle_t *)&c->async))
		return;
	/* Finish: requests still waiting for a start that never came get their error; each
	 * connection sends the STEP it held back (the final step is always seen) and what is
	 * queued, then closes; a peer that never reads gets CTL_FLUSH_MS (its linger limit).
	 * The loop ends once every handle is closed. */
	early_answer(c, 0);
	for (ctl_conn *k = c->conns; k; k = k->next) {
		conn_unserve(k);
		sv_conn_drain(&k->k);
	}
	if (c->listening) {
		unlink(c->path); /* unlink before closing: the other way round races a new bind */
		uv_close((uv_handle_t *)&c->listener, NULL);
		c->listening = 0;
	}
	uv_close((uv_handle_t *)&c->mem_timer, NULL);
	uv_close((uv_handle_t *)&c->async, NULL);
}

static void on_mem_timer(uv_timer_t *t)
{
	struct wk_ctl *c = t->data;
	eng_mem_stats ms;
	pthread_mutex_lock(&c->mu);
	int running = c->run.state == CTL_RUNNING && c->tr;
	int step = c->run.step;
	pthread_mutex_unlock(&c->mu);
	if (!running)
		return;
	eng_mem_get_stats(&ms);
	eng_device_mem ds;
	eng_backend_device_mem(&ds);
	if (ds.active) {
		/* a job on the GPU: its memory is the device's, as in STEP events */
		ms.total_current = ds.total_current;
		ms.total_peak = ds.total_peak;
		ms.current[ENG_MEM_ACTIVATIONS] = ds.current[ENG_MEM_ACTIVATIONS];
	}
	json_t *d = json_pack("{s:i,s:{s:I,s:I},s:I,s:I}", "step", step, "total", "current",
		(json_int_t)ms.total_current, "peak", (json_int_t)ms.total_peak, "activations",
		(json_int_t)ms.current[ENG_MEM_ACTIVATIONS], "rss", (json_int_t)ms.rss);
	wk_ctl__emit(c, EV_MEMORY, d); /* through the outbox, like every other event */
}

static void *ctl_main(void *arg)
{
	struct wk_ctl *c = arg;
	uv_run(&c->loop, UV_RUN_DEFAULT);
	return NULL;
}

static void close_walk(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

wk_ctl *wk_ctl_start(int fd, const char *path, const char *job, const char *name)
{
	struct wk_ctl *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	snprintf(c->job, sizeof c->job, "%s", job);
	snprintf(c->name, sizeof c->name, "%s", name ? name : job);
	c->started = wk_ctl__mono_s();
	c->link_fd = fd;
	c->run.state = CTL_STARTING;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	uv_loop_init(&c->loop);
	uv_async_init(&c->loop, &c->async, on_async);
	c->async.data = c;
	uv_timer_init(&c->loop, &c->mem_timer);
	c->mem_timer.data = c;
	uv_timer_start(&c->mem_timer, on_mem_timer, CTL_MEMORY_MS, CTL_MEMORY_MS);
	if (fd >= 0) {
		ctl_conn *k = conn_new(c);
		if (!k || sv_conn_open(&k->k, fd) < 0) {
			fprintf(stderr, "remat-train: --control-fd %d is not a usable socket\n", fd);
			goto fail;
		}
		k->link = 1;
		k->served = 1;
		c->n_conns++;
		k->k.step_gap_ms = 0; /* rematd paces for its own clients */
		sv_conn_subscribe(&k->k, "", SV_EV_ALL, 1);
		sv_conn_send_line(&k->k, proto_greeting("worker", c->job));
		if (sv_conn_read(&k->k) < 0)
			goto fail;
	}
	if (path) {
		if (strlen(path) >= sizeof c->path) {
			fprintf(stderr, "remat-train: control socket path too long (at most %zu bytes)\n",
				sizeof c->path - 1);
			goto fail;
		}
		snprintf(c->path, sizeof c->path, "%s", path);
		uv_pipe_init(&c->loop, &c->listener, 0);
		c->listener.data = c;
		mode_t old = umask(0177); /* the socket is created 0600: same uid only */
		int r = uv_pipe_bind(&c->listener, path);
		umask(old);
		if (r == 0)
			r = uv_listen((uv_stream_t *)&c->listener, 16, on_connection);
		if (r < 0) {
			fprintf(stderr, "remat-train: cannot listen on '%s': %s\n", path,
				r == UV_EADDRINUSE ? "the file exists (another worker, or a stale "
						     "socket to remove)" : uv_strerror(r));
			goto fail;
		}
		c->listening = 1;
	}
	if (pthread_create(&c->thread, NULL, ctl_main, c) != 0) {
		fprintf(stderr, "remat-train: cannot start the control thread\n");
		goto fail;
	}
	return c;
fail:
	/* Nothing ran on the loop yet: close the handles and let it finish them (the
	 * connections through their own close, which frees them). */
	for (ctl_conn *k = c->conns; k; k = k->next) {
		conn_unserve(k); /* our own close: no run to stop */
		sv_conn_close(&k->k, NULL);
	}
	uv_walk(&c->loop, close_walk, NULL);
	uv_run(&c->loop, UV_RUN_DEFAULT);
	uv_loop_close(&c->loop);
	free(c);
	return NULL;
}

void wk_ctl_stop(wk_ctl *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->quit = 1;
	pthread_mutex_unlock(&c->mu);
	uv_async_send(&c->async);
	pthread_join(c->thread, NULL);
	uv_loop_close(&c->loop);
	wk_ctl_cmd_free(c->q_head);
	json_decref(c->run.save_error);
	json_decref(c->run.last_eval);
	json_decref(c->run.hparams);
	free(c->run.ranks);
	free(c->mem.memlog);
	free(c->mem.memlog_sec);
	eng_memtrace_free(&c->mem.trace);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	free(c);
}
