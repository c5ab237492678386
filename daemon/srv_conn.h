/* srv_conn.h - rematd's client connections, on the control servers' one connection layer
 * (serve/sv_conn.h: framing, the bounded output queue, subscriptions, STEP pacing).
 *
 * What rematd adds: a connection is checked on accept (SO_PEERCRED: our uid, root, or the
 * --group), greeted, then each line goes to srv->on_request (srv_cmd_handle). Limits:
 * PROTO_MAX_CONNECTIONS served at once (the next gets the greeting, Busy, and is closed),
 * of which any user but root and rematd's own holds at most SRV_CONN_PER_UID, and all such
 * users together leave SRV_CONN_RESERVE free (so no user, nor a few, can lock root out);
 * PROTO_MAX_INFLIGHT requests awaiting a reply (the caller answers Busy past it); the idle limit
 * (--idle-timeout): a connection with no request for that long, no reply owed and no
 * subscription is closed. Events go to subscribers of their job.
 *
 * Lifetime: a srv_conn is freed when its sv_conn's handles have closed, never before.
 * Code that keeps a reference across loop iterations keeps the connection's id and looks it
 * up again with srv_conn_find (NULL once it is closing).
 */
#ifndef SRV_CONN_H
#define SRV_CONN_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"
#include "srv.h"
#include "sv_conn.h"

#define SRV_JOB_ID_LEN 16          /* "j4294967295" and its NUL fit */
#define SRV_CONN_RESERVE 8         /* places only root and rematd's user may take */
#define SRV_CONN_PER_UID (PROTO_MAX_CONNECTIONS / 2) /* one other user's at most */

struct srv_conn {
	sv_conn k;                 /* the connection itself; k.owner = this */
	srv_server *srv;           /* the daemon */
	srv_conn *next;            /* in srv->conns */
	srv_conn *prev;            /* in srv->conns */
	unsigned id;               /* client number: logs and reply routing */
	uid_t uid;                 /* the peer's credentials at connect (SO_PEERCRED) */
	pid_t pid;                 /* the peer's pid at connect */
	eng_cred cred;             /* its uid, gid and groups (SO_PEERGROUPS): its jobs' */
	int inflight;              /* requests forwarded to a worker and not yet answered */
	int served;                /* 1 while counted in srv->n_conns */
};

/* The listening socket's connection callback: server->data is the srv_server. */
void srv_conn_on_connect(uv_stream_t *server, int status);

/* The connection with that id, or NULL when it is gone or closing. */
srv_conn *srv_conn_find(srv_server *srv, unsigned id);

/* sv_conn_send/_reply/_error on c (see sv_conn.h). */
int srv_conn_send(srv_conn *c, sv_msg *m);
int srv_conn_reply(srv_conn *c, const json_t *ret, const json_t *id);
int srv_conn_error(srv_conn *c, proto_errclass ec, const char *desc, const json_t *id);

/* Answers and frees every waiter of *list (the connections still there, each counted in
 * its inflight): the error (ec, desc) when desc is not NULL, else ret (NULL: {}). */
void srv_conn_answer_waiters(srv_server *srv, srv_waiter **list, const json_t *ret,
	proto_errclass ec, const char *desc);

/* Stops serving c: nothing more is read, what is queued is flushed, then it closes. */
void srv_conn_drain(srv_conn *c);
/* Drains every connection (shutdown). */
void srv_conn_drain_all(srv_server *srv);

/* Sends event line m about job to every connection subscribed to it; STEP events are
 * paced. The caller keeps its reference to m. */
void srv_conn_publish(srv_server *srv, const char *job, const char *event, sv_msg *m);

#endif
