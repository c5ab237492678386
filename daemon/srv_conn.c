/* srv_conn.c - rematd's client connections: the peer check, the greeting, the connection
 * limit, the idle limit, and the table of connections. See srv_conn.h; the connection
 * itself (framing, output, subscriptions, pacing) is serve/sv_conn.c. Not here: what a
 * request means (srv_cmd.c).
 */
#include "srv_conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_cmd.h"

/* Takes the connection out of the served count (once). */
static void conn_unserve(srv_conn *c)
{
	if (!c->served)
		return;
	c->served = 0;
	c->srv->n_conns--;
}

/* Both handles closed: out of the table, and freed (the only place it is). */
static void conn_on_closed(sv_conn *k)
{
	srv_conn *c = k->owner;
	conn_unserve(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		c->srv->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c);
}

static void conn_on_line(sv_conn *k, const char *line, size_t len)
{
	srv_conn *c = k->owner;
	c->srv->on_request(c, line, len);
}

static void conn_log(sv_conn *k, const char *what)
{
	srv_conn *c = k->owner;
	srv_log("client %u %s", c->id, what);
}

/* Not idle while a reply is owed: forwarded to a worker, or waiting for a helper or the
 * shutdown. */
static int conn_busy(sv_conn *k)
{
	srv_conn *c = k->owner;
	return c->inflight > 0;
}

static const sv_conn_ops conn_ops = {conn_on_line, NULL, conn_on_closed, conn_log, conn_busy};

void srv_conn_drain(srv_conn *c)
{
	conn_unserve(c);
	sv_conn_drain(&c->k);
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
			return c->k.draining ? NULL : c;
	return NULL;
}

int srv_conn_send(srv_conn *c, sv_msg *m)
{
	return sv_conn_send(&c->k, m);
}

int srv_conn_reply(srv_conn *c, const json_t *ret, const json_t *id)
{
	return sv_conn_reply(&c->k, ret, id);
}

int srv_conn_error(srv_conn *c, proto_errclass ec, const char *desc, const json_t *id)
{
	return sv_conn_error(&c->k, ec, desc, id);
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

/* ---- accepting ---- */

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

/* Why c may not be served now (into desc), or 0 when it may: the limits on connections. */
static int conn_over_limit(const srv_server *srv, const srv_conn *c, char *desc,
	size_t desclen)
{
	int mine = 0, others = 0;
	if (srv->n_conns >= PROTO_MAX_CONNECTIONS) {
		snprintf(desc, desclen, "too many connections (at most %d)",
			PROTO_MAX_CONNECTIONS);
		return 1;
	}
	if (srv_privileged(srv, c->uid))
		return 0;
	for (const srv_conn *o = srv->conns; o; o = o->next) {
		if (!o->served || srv_privileged(srv, o->uid))
			continue;
		others++;
		mine += o->uid == c->uid;
	}
	if (mine >= SRV_CONN_PER_UID) {
		snprintf(desc, desclen, "too many connections of uid %lu (at most %d a user)",
			(unsigned long)c->uid, SRV_CONN_PER_UID);
		return 1;
	}
	if (others >= PROTO_MAX_CONNECTIONS - SRV_CONN_RESERVE) {
		snprintf(desc, desclen, "too many connections (the last %d of %d are kept for "
			"root and the daemon's user)", SRV_CONN_RESERVE, PROTO_MAX_CONNECTIONS);
		return 1;
	}
	return 0;
}

/* The greeting, then Busy or PermissionDenied, and the end: for a peer not served. */
static void conn_refuse(srv_conn *c, sv_msg *greeting, proto_errclass ec, const char *desc)
{
	if (greeting)
		srv_conn_send(c, greeting);
	srv_conn_error(c, ec, desc, NULL);
	srv_conn_drain(c);
}

void srv_conn_on_connect(uv_stream_t *server, int status)
{
	srv_server *srv = server->data;
	char why[128], desc[128];
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
	sv_conn_init(&c->k, srv->loop, &conn_ops, c, srv->rbuf, sizeof srv->rbuf);
	c->next = srv->conns;
	if (srv->conns)
		srv->conns->prev = c;
	srv->conns = c;

	int r = sv_conn_accept(&c->k, server);
	if (r < 0) {
		snprintf(why, sizeof why, "not accepted: %s", uv_strerror(r));
		sv_conn_close(&c->k, why);
		return;
	}
	if (sv_conn_peer(&c->k, &c->cred, &c->pid) < 0) {
		snprintf(why, sizeof why, "closed: cannot read its credentials: %s",
			strerror(errno));
		sv_conn_close(&c->k, why);
		return;
	}
	c->uid = c->cred.uid;
	if (!conn_peer_allowed(srv, &c->cred)) {
		srv_log("client %u refused: uid %lu, gid %lu, pid %ld is not allowed", c->id,
			(unsigned long)c->cred.uid, (unsigned long)c->cred.gid, (long)c->pid);
		snprintf(desc, sizeof desc, "uid %lu may not use this daemon",
			(unsigned long)c->cred.uid);
		conn_refuse(c, NULL, PROTO_ERR_PERMISSION_DENIED, desc);
		return;
	}
	sv_msg *greeting = sv_msg_take(proto_greeting("daemon", NULL));
	if (conn_over_limit(srv, c, desc, sizeof desc)) {
		srv_log("client %u refused: %s", c->id, desc);
		conn_refuse(c, greeting, PROTO_ERR_BUSY, desc);
		sv_msg_unref(greeting);
		return;
	}
	c->served = 1;
	srv->n_conns++;
	/* idle connections must never hold a place for good */
	c->k.idle_ms = srv->idle_timeout_s > 0 ? (unsigned)srv->idle_timeout_s * 1000u : 0;
	srv_log("client %u connected (uid %lu, pid %ld)", c->id, (unsigned long)c->uid,
		(long)c->pid);
	r = srv_conn_send(c, greeting);
	sv_msg_unref(greeting);
	if (r == 0)
		sv_conn_read(&c->k);
}

/* ---- events ---- */

void srv_conn_publish(srv_server *srv, const char *job, const char *event, sv_msg *m)
{
	uint32_t bit = sv_event_bit(event);
	for (srv_conn *c = srv->conns; c; c = c->next)
		if (c->served)
			sv_conn_event(&c->k, job, bit, m);
}
