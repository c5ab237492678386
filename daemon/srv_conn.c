/* srv_conn.c - client connections: peer check, greeting, framing, output queue limits,
 * graceful and hard closes, subscriptions and STEP pacing. See srv_conn.h.
 * Not here: what a request means (srv_cmd.c).
 */
#include "srv_conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "srv_cmd.h"

#define CONN_STEP_GAP_MS (1000u / SRV_STEP_PER_S) /* least time between two STEP events */
#define CONN_PROC_LINE 4096 /* longest /proc/PID/status line read */

/* Frees the connection once both handles are closed: the only place it is freed. */
static void conn_on_close(uv_handle_t *h)
{
	srv_conn *c = h->data;
	if (--c->handles_open > 0)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		c->srv->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	for (int i = 0; i < SRV_STEP_SLOTS; i++)
		srv_msg_unref(c->steps[i].pending);
	proto_framer_free(&c->framer);
	free(c);
}

/* Takes the connection out of the served count (once). */
static void conn_unserve(srv_conn *c)
{
	if (!c->served)
		return;
	c->served = 0;
	c->srv->n_conns--;
}

void srv_conn_close(srv_conn *c, const char *why)
{
	if (c->closing)
		return;
	if (why)
		srv_log("client %u %s", c->id, why);
	c->closing = 1;
	c->draining = 1;
	conn_unserve(c);
	/* pending writes end with UV_ECANCELED before the close callbacks run */
	uv_close((uv_handle_t *)&c->pipe, conn_on_close);
	uv_close((uv_handle_t *)&c->timer, conn_on_close);
}

static void conn_on_shutdown(uv_shutdown_t *req, int status)
{
	(void)status; /* flushed or not, the connection ends here */
	srv_conn_close(req->handle->data, NULL);
}

static void conn_on_timer(uv_timer_t *t);

void srv_conn_drain(srv_conn *c)
{
	if (c->draining)
		return;
	c->draining = 1;
	conn_unserve(c);
	uv_read_stop((uv_stream_t *)&c->pipe);
	/* a client that never reads would hold the flush forever: the linger limit */
	uv_timer_start(&c->timer, conn_on_timer, SRV_LINGER_MS, 0);
	if (uv_shutdown(&c->shutdown, (uv_stream_t *)&c->pipe, conn_on_shutdown) < 0)
		srv_conn_close(c, NULL);
}

void srv_conn_drain_all(srv_server *srv)
{
	for (srv_conn *c = srv->conns; c; c = c->next)
		srv_conn_drain(c);
}

srv_conn *srv_conn_find(srv_server *srv, unsigned id)
{
	for (srv_conn *c = srv->conns; c; c = c->next)
		if (c->id == id)
			return c->draining ? NULL : c;
	return NULL;
}

static void conn_on_written(int status, void *data)
{
	srv_conn *c = data;
	char why[128];
	if (status >= 0 || status == UV_ECANCELED || c->closing)
		return;
	/* a peer that hung up before reading is no failure of ours */
	if (status == UV_EPIPE || status == UV_ECONNRESET)
		snprintf(why, sizeof why, "disconnected");
	else
		snprintf(why, sizeof why, "dropped: write failed: %s", uv_strerror(status));
	srv_conn_close(c, why);
}

int srv_conn_send(srv_conn *c, srv_msg *m)
{
	if (!m) {
		srv_log("client %u: out of memory building a reply", c->id);
		return -1;
	}
	if (c->draining)
		return -1;
	/* bytes libuv holds because the socket would block: the client is not reading */
	size_t queued = uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe);
	if (queued + m->len > PROTO_MAX_OUTQ) {
		char why[128];
		snprintf(why, sizeof why, "dropped: over %u bytes of output queued (not reading)",
			PROTO_MAX_OUTQ);
		srv_conn_close(c, why);
		return -1;
	}
	int r = srv_stream_write((uv_stream_t *)&c->pipe, m, conn_on_written, c);
	if (r < 0) {
		char why[128];
		snprintf(why, sizeof why, "dropped: cannot write: %s", uv_strerror(r));
		srv_conn_close(c, why);
		return -1;
	}
	return 0;
}

int srv_conn_reply(srv_conn *c, const json_t *ret, const json_t *id)
{
	srv_msg *m = srv_msg_take(proto_reply_line(ret, id));
	int r = srv_conn_send(c, m);
	srv_msg_unref(m);
	return r;
}

int srv_conn_error(srv_conn *c, proto_errclass ec, const char *desc, const json_t *id)
{
	srv_msg *m = srv_msg_take(proto_error_line(ec, desc, id));
	int r = srv_conn_send(c, m);
	srv_msg_unref(m);
	return r;
}

void srv_conn_answer_waiters(srv_server *srv, srv_waiter **list, const json_t *ret,
	proto_errclass ec, const char *desc)
{
	while (*list) {
		srv_waiter *w = *list;
		*list = w->next;
		srv_conn *c = srv_conn_find(srv, w->conn_id);
		if (c) {
			c->inflight--;
			if (desc)
				srv_conn_error(c, ec, desc, w->id);
			else
				srv_conn_reply(c, ret, w->id);
		}
		srv_waiter_free(w);
	}
}

/* ---- reading ---- */

static void conn_on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)suggested;
	srv_conn *c = h->data;
	*buf = uv_buf_init(c->srv->rbuf, sizeof c->srv->rbuf);
}

static int conn_on_line(const char *line, size_t len, void *ud)
{
	srv_conn *c = ud;
	if (!c->spoke) {
		/* it speaks: the idle limit no longer applies (the timer is STEP pacing's now) */
		c->spoke = 1;
		uv_timer_stop(&c->timer);
	}
	srv_cmd_handle(c, line, len);
	/* the request may have ended the connection (output queue, shutdown): stop feeding */
	return c->draining;
}

static void conn_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	srv_conn *c = s->data;
	if (n == 0 || c->draining)
		return;
	if (n < 0) {
		if (n != UV_EOF)
			srv_log("client %u disconnected: %s", c->id, uv_strerror((int)n));
		else if (c->framer.len > 0)
			srv_log("client %u disconnected mid-line (%zu bytes dropped)", c->id,
				c->framer.len);
		else
			srv_log("client %u disconnected", c->id);
		srv_conn_close(c, NULL);
		return;
	}
	if (proto_framer_feed(&c->framer, buf->base, (size_t)n, conn_on_line, c) < 0) {
		char desc[128];
		snprintf(desc, sizeof desc, "line longer than %u bytes", PROTO_MAX_LINE);
		srv_log("client %u: %s: closing", c->id, desc);
		srv_conn_error(c, PROTO_ERR_MESSAGE_TOO_LARGE, desc, NULL);
		srv_conn_drain(c);
	}
}

/* ---- accepting ---- */

/* The peer's supplementary groups into cr (SO_PEERGROUPS, Linux 4.13; else
 * /proc/PID/status, read while the peer is still connected). SO_PEERCRED only gives the
 * primary group. */
static void conn_peer_groups(int fd, pid_t pid, eng_cred *cr)
{
	socklen_t len = sizeof cr->groups;
	cr->ngroups = 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, cr->groups, &len) == 0) {
		cr->ngroups = (int)(len / sizeof cr->groups[0]);
		return;
	}
	char path[64], line[CONN_PROC_LINE];
	snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
	FILE *f = pid > 0 ? fopen(path, "re") : NULL;
	while (f && fgets(line, sizeof line, f)) {
		if (strncmp(line, "Groups:", 7) != 0)
			continue;
		char *p = line + 7, *end;
		for (;;) {
			errno = 0;
			unsigned long g = strtoul(p, &end, 10);
			if (end == p || errno || cr->ngroups >= ENG_CRED_MAX_GROUPS)
				break;
			cr->groups[cr->ngroups++] = (gid_t)g;
			p = end;
		}
		break;
	}
	if (f)
		fclose(f);
}

static int conn_peer_allowed(const srv_server *srv, const eng_cred *cr)
{
	if (cr->uid == srv->uid || cr->uid == 0)
		return 1;
	if (!srv->has_group)
		return 0;
	if (cr->gid == srv->group)
		return 1;
	for (int i = 0; i < cr->ngroups; i++)
		if (cr->groups[i] == srv->group)
			return 1;
	return 0;
}

/* The idle limit: a peer that has not sent one complete request in time goes, so that
 * idle connections never hold every slot (PROTO_MAX_CONNECTIONS) for good. */
static void conn_on_idle(uv_timer_t *t)
{
	srv_conn *c = t->data;
	char why[96];
	snprintf(why, sizeof why, "closed: no complete request within %d s",
		c->srv->idle_timeout_s);
	srv_conn_close(c, why);
}

void srv_conn_on_connect(uv_stream_t *server, int status)
{
	srv_server *srv = server->data;
	if (status < 0) {
		srv_log("cannot accept a connection: %s", uv_strerror(status));
		return;
	}
	srv_conn *c = calloc(1, sizeof *c);
	if (!c) {
		srv_log("out of memory accepting a connection");
		return;
	}
	c->srv = srv;
	c->id = ++srv->next_conn_id;
	proto_framer_init(&c->framer);
	/* both inits only fail on bad arguments; the handles are then closable */
	uv_pipe_init(srv->loop, &c->pipe, 0);
	uv_timer_init(srv->loop, &c->timer);
	c->pipe.data = c;
	c->timer.data = c;
	c->handles_open = 2;
	c->next = srv->conns;
	if (srv->conns)
		srv->conns->prev = c;
	srv->conns = c;

	int r = uv_accept(server, (uv_stream_t *)&c->pipe);
	if (r < 0) {
		srv_log("cannot accept a connection: %s", uv_strerror(r));
		srv_conn_close(c, NULL);
		return;
	}
	uv_os_fd_t fd;
	struct ucred cr;
	socklen_t crlen = sizeof cr;
	if (uv_fileno((uv_handle_t *)&c->pipe, &fd) < 0 ||
		getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0) {
		char why[128];
		snprintf(why, sizeof why, "closed: cannot read its credentials: %s",
			strerror(errno));
		srv_conn_close(c, why);
		return;
	}
	c->uid = cr.uid;
	c->pid = cr.pid;
	c->cred.uid = cr.uid;
	c->cred.gid = cr.gid;
	conn_peer_groups(fd, cr.pid, &c->cred);
	if (!conn_peer_allowed(srv, &c->cred)) {
		char desc[128];
		srv_log("client %u refused: uid %lu, gid %lu, pid %ld is not allowed", c->id,
			(unsigned long)cr.uid, (unsigned long)cr.gid, (long)cr.pid);
		snprintf(desc, sizeof desc, "uid %lu may not use this daemon",
			(unsigned long)cr.uid);
		srv_conn_error(c, PROTO_ERR_PERMISSION_DENIED, desc, NULL);
		srv_conn_drain(c);
		return;
	}
	srv_msg *greeting = srv_msg_take(proto_greeting("daemon", NULL));
	if (srv->n_conns >= PROTO_MAX_CONNECTIONS) {
		char desc[96];
		snprintf(desc, sizeof desc, "too many connections (at most %d)",
			PROTO_MAX_CONNECTIONS);
		srv_log("client %u refused: %s", c->id, desc);
		srv_conn_send(c, greeting);
		srv_conn_error(c, PROTO_ERR_BUSY, desc, NULL);
		srv_msg_unref(greeting);
		srv_conn_drain(c);
		return;
	}
	c->served = 1;
	srv->n_conns++;
	if (srv->idle_timeout_s > 0)
		uv_timer_start(&c->timer, conn_on_idle, (uint64_t)srv->idle_timeout_s * 1000u, 0);
	srv_log("client %u connected (uid %lu, pid %ld)", c->id, (unsigned long)cr.uid,
		(long)cr.pid);
	r = srv_conn_send(c, greeting);
	srv_msg_unref(greeting);
	if (r < 0)
		return;
	r = uv_read_start((uv_stream_t *)&c->pipe, conn_on_alloc, conn_on_read);
	if (r < 0) {
		char why[128];
		snprintf(why, sizeof why, "closed: cannot read: %s", uv_strerror(r));
		srv_conn_close(c, why);
	}
}

/* ---- subscriptions and events ---- */

uint32_t srv_conn_event_bit(const char *name)
{
	int e = proto_event_find(name);
	return e >= 0 ? 1u << e : SRV_EV_OTHER;
}

int srv_conn_subscribe(srv_conn *c, const char *job, uint32_t mask, int on)
{
	srv_sub *found = NULL, *unused = NULL;
	for (int i = 0; i < SRV_MAX_SUBS; i++) {
		srv_sub *s = &c->subs[i];
		if (s->events && strcmp(s->job, job) == 0)
			found = s;
		else if (!s->events && !unused)
			unused = s;
	}
	if (!on) {
		if (found)
			found->events &= ~mask;
		return 0;
	}
	if (!found) {
		if (!unused || strlen(job) >= sizeof unused->job)
			return -1;
		found = unused;
		snprintf(found->job, sizeof found->job, "%s", job);
	}
	found->events |= mask;
	return 0;
}

static int conn_wants(const srv_conn *c, const char *job, uint32_t bit)
{
	for (int i = 0; i < SRV_MAX_SUBS; i++) {
		const srv_sub *s = &c->subs[i];
		if ((s->events & bit) && (!s->job[0] || strcmp(s->job, job) == 0))
			return 1;
	}
	return 0;
}

/* Sends the STEP event held back for slot s, if any. */
static void conn_step_flush(srv_conn *c, srv_step_slot *s)
{
	if (!s->pending)
		return;
	srv_msg *m = s->pending;
	s->pending = NULL;
	s->last_ms = uv_now(c->srv->loop);
	srv_conn_send(c, m);
	srv_msg_unref(m);
}

/* The pacing slot of job: its own, a free one, or the least recently used (flushed). */
static srv_step_slot *conn_step_slot(srv_conn *c, const char *job)
{
	srv_step_slot *free_slot = NULL, *oldest = &c->steps[0];
	for (int i = 0; i < SRV_STEP_SLOTS; i++) {
		srv_step_slot *s = &c->steps[i];
		if (s->job[0] && strcmp(s->job, job) == 0)
			return s;
		if (!s->job[0] && !free_slot)
			free_slot = s;
		if (s->last_ms < oldest->last_ms)
			oldest = s;
	}
	srv_step_slot *s = free_slot ? free_slot : oldest;
	conn_step_flush(c, s);
	snprintf(s->job, sizeof s->job, "%s", job);
	s->last_ms = 0;
	return s;
}

/* Arms the timer for the earliest STEP event held back. */
static void conn_step_arm(srv_conn *c)
{
	uint64_t now = uv_now(c->srv->loop), wait = UINT64_MAX;
	for (int i = 0; i < SRV_STEP_SLOTS; i++) {
		const srv_step_slot *s = &c->steps[i];
		if (!s->pending)
			continue;
		uint64_t due = s->last_ms + CONN_STEP_GAP_MS;
		uint64_t w = due > now ? due - now : 0;
		if (w < wait)
			wait = w;
	}
	if (wait != UINT64_MAX)
		uv_timer_start(&c->timer, conn_on_timer, wait, 0);
}

static void conn_on_timer(uv_timer_t *t)
{
	srv_conn *c = t->data;
	if (c->draining) { /* the linger limit: the client did not take its last reply */
		srv_conn_close(c, NULL);
		return;
	}
	uint64_t now = uv_now(c->srv->loop);
	for (int i = 0; i < SRV_STEP_SLOTS && !c->draining; i++) {
		srv_step_slot *s = &c->steps[i];
		if (s->pending && now - s->last_ms >= CONN_STEP_GAP_MS)
			conn_step_flush(c, s);
	}
	if (!c->draining)
		conn_step_arm(c);
}

static void conn_step(srv_conn *c, const char *job, srv_msg *m)
{
	srv_step_slot *s = conn_step_slot(c, job);
	uint64_t now = uv_now(c->srv->loop);
	if (now - s->last_ms >= CONN_STEP_GAP_MS) {
		/* due: this one goes out, any held back is older */
		srv_msg_unref(s->pending);
		s->pending = NULL;
		s->last_ms = now;
		srv_conn_send(c, m);
		return;
	}
	srv_msg_unref(s->pending); /* the latest wins */
	s->pending = srv_msg_ref(m);
	conn_step_arm(c);
}

void srv_conn_publish(srv_server *srv, const char *job, const char *event, srv_msg *m)
{
	uint32_t bit = srv_conn_event_bit(event);
	for (srv_conn *c = srv->conns; c; c = c->next) {
		if (c->draining || !c->served || !conn_wants(c, job, bit))
			continue;
		if (bit == SRV_EV_STEP) {
			conn_step(c, job, m);
			continue;
		}
		/* a STEP held back is older than this event: keep the order */
		for (int i = 0; i < SRV_STEP_SLOTS; i++)
			if (c->steps[i].pending && strcmp(c->steps[i].job, job) == 0)
				conn_step_flush(c, &c->steps[i]);
		srv_conn_send(c, m);
	}
}
