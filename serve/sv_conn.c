/* sv_conn.c - one connection of a control server (see sv_conn.h): reading lines, the
 * bounded output queue, graceful and hard closes, subscriptions and STEP pacing.
 */
#include "sv_conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define LINGER_MS 2000      /* default: a last reply's flush waits at most this long */
#define PROC_LINE 4096      /* longest /proc/PID/status line read */

static void on_timer(uv_timer_t *t);
static void on_idle(uv_timer_t *t);

static void say(sv_conn *k, const char *what)
{
	if (what && k->ops->log)
		k->ops->log(k, what);
}

/* ---- lifetime ---- */

/* The owner frees k once its three handles are closed: the only time it may. */
static void on_close(uv_handle_t *h)
{
	sv_conn *k = h->data;
	if (--k->handles_open > 0)
		return;
	for (int i = 0; i < SV_STEP_SLOTS; i++)
		sv_msg_unref(k->steps[i].pending);
	proto_framer_free(&k->framer);
	if (k->ops->on_closed)
		k->ops->on_closed(k);
}

void sv_conn_init(sv_conn *k, uv_loop_t *loop, const sv_conn_ops *ops, void *owner,
	char *rbuf, size_t rbuf_len)
{
	memset(k, 0, sizeof *k);
	k->ops = ops;
	k->owner = owner;
	k->rbuf = rbuf;
	k->rbuf_len = rbuf_len;
	k->step_gap_ms = SV_STEP_GAP_MS;
	k->linger_ms = LINGER_MS;
	proto_framer_init(&k->framer);
	/* both inits only fail on bad arguments; the handles are then closable */
	uv_pipe_init(loop, &k->pipe, 0);
	uv_timer_init(loop, &k->timer);
	uv_timer_init(loop, &k->idle);
	k->pipe.data = k;
	k->timer.data = k;
	k->idle.data = k;
	k->handles_open = 3;
}

void sv_conn_close(sv_conn *k, const char *why)
{
	if (k->closing)
		return;
	say(k, why);
	k->closing = 1;
	k->draining = 1;
	/* pending writes end with UV_ECANCELED before the close callbacks run */
	uv_close((uv_handle_t *)&k->pipe, on_close);
	uv_close((uv_handle_t *)&k->timer, on_close);
	uv_close((uv_handle_t *)&k->idle, on_close);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
	(void)status; /* flushed or not, the connection ends here */
	sv_conn_close(req->handle->data, NULL);
}

static void step_flush(sv_conn *k, sv_step_slot *s);

void sv_conn_drain(sv_conn *k)
{
	if (k->draining)
		return;
	/* the STEP events held back are older than the end: they go first */
	for (int i = 0; i < SV_STEP_SLOTS; i++)
		step_flush(k, &k->steps[i]);
	if (k->closing)
		return; /* a flush found the peer gone */
	k->draining = 1;
	uv_read_stop((uv_stream_t *)&k->pipe);
	uv_timer_stop(&k->idle); /* the linger limit ends it now */
	/* a peer that never reads would hold the flush forever: the linger limit */
	uv_timer_start(&k->timer, on_timer, k->linger_ms, 0);
	if (uv_shutdown(&k->shutdown, (uv_stream_t *)&k->pipe, on_shutdown) < 0)
		sv_conn_close(k, NULL);
}

/* ---- output ---- */

static void on_written(int status, void *data)
{
	sv_conn *k = data;
	char why[128];
	if (status >= 0 || status == UV_ECANCELED || k->closing)
		return;
	/* a peer that hung up before reading is no failure of ours */
	if (status == UV_EPIPE || status == UV_ECONNRESET)
		snprintf(why, sizeof why, "disconnected");
	else
		snprintf(why, sizeof why, "dropped: write failed: %s", uv_strerror(status));
	sv_conn_close(k, why);
}

int sv_conn_send(sv_conn *k, sv_msg *m)
{
	char why[128];
	if (!m) {
		say(k, "out of memory building a line for it");
		return -1;
	}
	if (k->draining)
		return -1;
	/* bytes libuv holds because the socket would block: the peer is not reading */
	size_t queued = uv_stream_get_write_queue_size((uv_stream_t *)&k->pipe);
	if (queued + m->len > PROTO_MAX_OUTQ) {
		snprintf(why, sizeof why, "dropped: over %u bytes of output queued (not reading)",
			PROTO_MAX_OUTQ);
		sv_conn_close(k, why);
		return -1;
	}
	int r = sv_stream_write((uv_stream_t *)&k->pipe, m, on_written, k);
	if (r < 0) {
		snprintf(why, sizeof why, "dropped: cannot write: %s", uv_strerror(r));
		sv_conn_close(k, why);
		return -1;
	}
	return 0;
}

int sv_conn_send_line(sv_conn *k, char *line)
{
	sv_msg *m = sv_msg_take(line);
	int r = sv_conn_send(k, m);
	sv_msg_unref(m);
	return r;
}

int sv_conn_reply(sv_conn *k, const json_t *ret, const json_t *id)
{
	return sv_conn_send_line(k, proto_reply_line(ret, id));
}

int sv_conn_error(sv_conn *k, proto_errclass ec, const char *desc, const json_t *id)
{
	return sv_conn_send_line(k, proto_error_line(ec, desc, id));
}

/* ---- input ---- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)suggested;
	sv_conn *k = h->data;
	*buf = uv_buf_init(k->rbuf, (unsigned)k->rbuf_len);
}

static int on_framed(const char *line, size_t len, void *ud)
{
	sv_conn *k = ud;
	k->active_ms = uv_now(k->idle.loop); /* it speaks: idle from now */
	k->ops->on_line(k, line, len);
	/* the line may have ended the connection (output queue, shutdown): stop feeding */
	return k->draining;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	sv_conn *k = s->data;
	char why[128];
	if (n == 0 || k->draining)
		return;
	if (n < 0) {
		if (n != UV_EOF)
			snprintf(why, sizeof why, "disconnected: %s", uv_strerror((int)n));
		else if (k->framer.len > 0)
			snprintf(why, sizeof why, "disconnected mid-line (%zu bytes dropped)",
				k->framer.len);
		else
			snprintf(why, sizeof why, "disconnected");
		if (k->ops->on_end)
			k->ops->on_end(k, (int)n);
		sv_conn_close(k, why);
		return;
	}
	if (proto_framer_feed(&k->framer, buf->base, (size_t)n, on_framed, k) < 0) {
		snprintf(why, sizeof why, "line longer than %u bytes", PROTO_MAX_LINE);
		sv_conn_error(k, PROTO_ERR_MESSAGE_TOO_LARGE, why, NULL);
		say(k, "closed: it sent a line longer than the protocol's limit");
		sv_conn_drain(k);
	}
}

int sv_conn_accept(sv_conn *k, uv_stream_t *server)
{
	return uv_accept(server, (uv_stream_t *)&k->pipe);
}

int sv_conn_open(sv_conn *k, int fd)
{
	return uv_pipe_open(&k->pipe, fd);
}

/* The peer's supplementary groups into cr (SO_PEERGROUPS, Linux 4.13; else
 * /proc/PID/status, read while the peer is still connected). SO_PEERCRED only gives the
 * primary group. */
static void peer_groups(int fd, pid_t pid, eng_cred *cr)
{
	socklen_t len = sizeof cr->groups;
	cr->ngroups = 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, cr->groups, &len) == 0) {
		cr->ngroups = (int)(len / sizeof cr->groups[0]);
		return;
	}
	char path[64], line[PROC_LINE];
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

int sv_conn_peer(const sv_conn *k, eng_cred *cr, pid_t *pid)
{
	uv_os_fd_t fd;
	struct ucred uc;
	socklen_t len = sizeof uc;
	memset(cr, 0, sizeof *cr);
	if (uv_fileno((const uv_handle_t *)&k->pipe, &fd) < 0) {
		errno = EBADF;
		return -1;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return -1;
	cr->uid = uc.uid;
	cr->gid = uc.gid;
	*pid = uc.pid;
	peer_groups(fd, uc.pid, cr);
	return 0;
}

int sv_conn_read(sv_conn *k)
{
	char why[128];
	k->active_ms = uv_now(k->idle.loop);
	if (k->idle_ms > 0)
		uv_timer_start(&k->idle, on_idle, k->idle_ms, 0);
	int r = uv_read_start((uv_stream_t *)&k->pipe, on_alloc, on_read);
	if (r < 0) {
		snprintf(why, sizeof why, "closed: cannot read: %s", uv_strerror(r));
		sv_conn_close(k, why);
		return -1;
	}
	return 0;
}

/* ---- subscriptions and events ---- */

uint32_t sv_event_bit(const char *name)
{
	int e = proto_event_find(name);
	return e >= 0 ? 1u << e : SV_EV_OTHER;
}

uint32_t sv_events_mask(const json_t *events)
{
	size_t i;
	const json_t *e;
	uint32_t mask = 0;
	if (!events)
		return SV_EV_ALL;
	json_array_foreach(events, i, e)
		if (json_is_string(e))
			mask |= sv_event_bit(json_string_value(e));
	return mask;
}

int sv_conn_subscribe(sv_conn *k, const char *job, uint32_t mask, int on)
{
	sv_sub *found = NULL, *unused = NULL;
	for (int i = 0; i < SV_MAX_SUBS; i++) {
		sv_sub *s = &k->subs[i];
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

int sv_conn_subscribed(const sv_conn *k)
{
	for (int i = 0; i < SV_MAX_SUBS; i++)
		if (k->subs[i].events)
			return 1;
	return 0;
}

int sv_conn_wants(const sv_conn *k, const char *job, uint32_t bit)
{
	if (k->draining)
		return 0;
	for (int i = 0; i < SV_MAX_SUBS; i++) {
		const sv_sub *s = &k->subs[i];
		if ((s->events & bit) && (!s->job[0] || strcmp(s->job, job) == 0))
			return 1;
	}
	return 0;
}

/* The STEP held back in s sent, unless an unsubscribe answered since removed it: no event
 * it removed follows its reply. */
static void step_flush(sv_conn *k, sv_step_slot *s)
{
	if (!s->pending)
		return;
	sv_msg *m = s->pending;
	s->pending = NULL;
	s->last_ms = uv_now(k->timer.loop);
	if (sv_conn_wants(k, s->job, SV_EV_STEP))
		sv_conn_send(k, m);
	sv_msg_unref(m);
}

/* The pacing slot of job: its own, a free one, or the least recently used (flushed). */
static sv_step_slot *step_slot(sv_conn *k, const char *job)
{
	sv_step_slot *free_slot = NULL, *oldest = &k->steps[0];
	for (int i = 0; i < SV_STEP_SLOTS; i++) {
		sv_step_slot *s = &k->steps[i];
		if (s->used && strcmp(s->job, job) == 0)
			return s;
		if (!s->used && !free_slot)
			free_slot = s;
		if (s->last_ms < oldest->last_ms)
			oldest = s;
	}
	sv_step_slot *s = free_slot ? free_slot : oldest;
	step_flush(k, s);
	snprintf(s->job, sizeof s->job, "%s", job);
	s->used = 1;
	s->last_ms = 0;
	return s;
}

/* Arms the timer for the earliest STEP event held back. */
static void step_arm(sv_conn *k)
{
	uint64_t now = uv_now(k->timer.loop), wait = UINT64_MAX;
	for (int i = 0; i < SV_STEP_SLOTS; i++) {
		const sv_step_slot *s = &k->steps[i];
		if (!s->pending)
			continue;
		uint64_t due = s->last_ms + k->step_gap_ms;
		uint64_t w = due > now ? due - now : 0;
		if (w < wait)
			wait = w;
	}
	if (wait != UINT64_MAX)
		uv_timer_start(&k->timer, on_timer, wait, 0);
}

/* The idle limit: a peer that is subscribed or owed a reply is not idle (a watch waits
 * for events, a job-stop for its save); any other is closed idle_ms after it was last
 * active. Checked when the limit would pass, so a connection costs no timer work while it
 * talks. */
static void on_idle(uv_timer_t *t)
{
	sv_conn *k = t->data;
	char why[96];
	uint64_t now = uv_now(t->loop);
	if (k->draining)
		return;
	if (sv_conn_subscribed(k) || (k->ops->busy && k->ops->busy(k)))
		k->active_ms = now;
	if (now - k->active_ms >= k->idle_ms) {
		snprintf(why, sizeof why, "closed: idle (no request, nothing owed) for %.1f s",
			k->idle_ms / 1000.0);
		sv_conn_close(k, why);
		return;
	}
	uv_timer_start(&k->idle, on_idle, k->active_ms + k->idle_ms - now, 0);
}

/* The pacing and linger timer: the linger limit while draining, else the STEP events held
 * back that are due. */
static void on_timer(uv_timer_t *t)
{
	sv_conn *k = t->data;
	if (k->draining) { /* the peer did not take its last lines in time */
		sv_conn_close(k, NULL);
		return;
	}
	uint64_t now = uv_now(t->loop);
	for (int i = 0; i < SV_STEP_SLOTS && !k->draining; i++) {
		sv_step_slot *s = &k->steps[i];
		if (s->pending && now - s->last_ms >= k->step_gap_ms)
			step_flush(k, s);
	}
	if (!k->draining)
		step_arm(k);
}

static void step_event(sv_conn *k, const char *job, sv_msg *m)
{
	sv_step_slot *s = step_slot(k, job);
	uint64_t now = uv_now(k->timer.loop);
	if (now - s->last_ms >= k->step_gap_ms) {
		/* due: this one goes out, any held back is older */
		sv_msg_unref(s->pending);
		s->pending = NULL;
		s->last_ms = now;
		sv_conn_send(k, m);
		return;
	}
	sv_msg_unref(s->pending); /* the latest wins */
	s->pending = sv_msg_ref(m);
	step_arm(k);
}

void sv_conn_event(sv_conn *k, const char *job, uint32_t bit, sv_msg *m)
{
	if (!sv_conn_wants(k, job, bit))
		return;
	if (bit == SV_EV_STEP && k->step_gap_ms > 0) {
		step_event(k, job, m);
		return;
	}
	/* a STEP held back is older than this event: keep the order */
	for (int i = 0; i < SV_STEP_SLOTS; i++)
		if (k->steps[i].pending && strcmp(k->steps[i].job, job) == 0)
			step_flush(k, &k->steps[i]);
	sv_conn_send(k, m);
}
