/* srv_conn.h - rematd's client connections.
 *
 * A connection is checked on accept (SO_PEERCRED: our uid, root, or the --group), greeted,
 * then read line by line (proto_framer) and each line handed to srv_cmd_handle. Limits:
 * PROTO_MAX_CONNECTIONS served at once (the next gets the greeting, Busy, and is closed),
 * PROTO_MAX_INFLIGHT requests awaiting a reply (the caller answers Busy past it), and
 * PROTO_MAX_OUTQ bytes queued for output (a client over it is dropped; the daemon never
 * waits for a slow reader). Events go only to subscribers; STEP events are limited to
 * SRV_STEP_PER_S a second per connection and job, the latest winning. A STEP held back
 * goes out before any other event of its job, so that the order holds.
 *
 * Lifetime: a srv_conn is freed in the close callbacks of its two handles, never before.
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

#define SRV_MAX_SUBS 16            /* subscription entries (distinct job filters) per conn */
#define SRV_STEP_SLOTS 8           /* jobs whose STEP rate one connection tracks at once */
#define SRV_STEP_PER_S 20          /* STEP events a second per connection and job */
#define SRV_LINGER_MS 2000         /* a last reply's flush waits at most this long */
#define SRV_JOB_ID_LEN 16          /* "j4294967295" and its NUL fit */

/* Event bits of a subscription. An event name we do not know (a newer worker) is only
 * delivered to subscriptions that named no events. */
#define SRV_EV_STEP (1u << PROTO_EV_STEP)
#define SRV_EV_OTHER (1u << 31)
#define SRV_EV_ALL 0xffffffffu

typedef struct srv_sub {
	char job[SRV_JOB_ID_LEN];  /* the job filter; "" for every job */
	uint32_t events;           /* SRV_EV_* bits wanted; 0 = entry unused */
} srv_sub;

typedef struct srv_step_slot {
	char job[SRV_JOB_ID_LEN];  /* the job whose STEP events this slot paces; "" = free */
	uint64_t last_ms;          /* when the last one went out (srv_now_ms) */
	srv_msg *pending;          /* the latest one held back, or NULL */
} srv_step_slot;

struct srv_conn {
	uv_pipe_t pipe;            /* the client's socket; pipe.data = this */
	uv_timer_t timer;          /* flushes held-back STEP events; later the linger limit */
	uv_shutdown_t shutdown;    /* flushes the output before a graceful close */
	srv_server *srv;           /* the daemon */
	srv_conn *next;            /* in srv->conns */
	srv_conn *prev;            /* in srv->conns */
	unsigned id;               /* client number: logs and reply routing */
	uid_t uid;                 /* the peer's credentials at connect (SO_PEERCRED) */
	pid_t pid;                 /* the peer's pid at connect */
	eng_cred cred;             /* its uid, gid and groups (SO_PEERGROUPS): its jobs' */
	int spoke;                 /* 1 once it sent a complete request (the idle limit) */
	proto_framer framer;       /* the line being assembled */
	int inflight;              /* requests forwarded to a worker and not yet answered */
	int served;                /* 1 while counted in srv->n_conns */
	int draining;              /* 1 once a last reply is flushing: nothing more is read or
				    * sent, the close follows */
	int closing;               /* 1 once uv_close was called */
	int handles_open;          /* pipe and timer until their close callbacks ran */
	srv_sub subs[SRV_MAX_SUBS];           /* subscriptions, added up */
	srv_step_slot steps[SRV_STEP_SLOTS];  /* STEP pacing per job */
};

/* The listening socket's connection callback: server->data is the srv_server. */
void srv_conn_on_connect(uv_stream_t *server, int status);

/* The connection with that id, or NULL when it is gone or closing. */
srv_conn *srv_conn_find(srv_server *srv, unsigned id);

/* Queues a line for the client (taking a new reference to m; the caller keeps its own).
 * A connection that is closing drops it; one whose output queue would pass PROTO_MAX_OUTQ
 * is closed. Returns 0 when queued, -1 when dropped. */
int srv_conn_send(srv_conn *c, srv_msg *m);
/* {"return":ret,"id":id} (ret NULL = {}), and {"error":...}; ids are borrowed. */
int srv_conn_reply(srv_conn *c, const json_t *ret, const json_t *id);
int srv_conn_error(srv_conn *c, proto_errclass ec, const char *desc, const json_t *id);

/* Answers and frees every waiter of *list (the connections still there, each counted in
 * its inflight): the error (ec, desc) when desc is not NULL, else ret (NULL: {}). */
void srv_conn_answer_waiters(srv_server *srv, srv_waiter **list, const json_t *ret,
	proto_errclass ec, const char *desc);

/* Sends nothing more, flushes what is queued (at most SRV_LINGER_MS), then closes. */
void srv_conn_drain(srv_conn *c);
/* Closes now; queued output is lost. why (may be NULL) goes to the log. */
void srv_conn_close(srv_conn *c, const char *why);
/* Drains every connection (shutdown). */
void srv_conn_drain_all(srv_server *srv);

/* Adds (on = 1) or removes (on = 0) the events of mask for job ("" = every job). Returns 0,
 * or -1 when SRV_MAX_SUBS different job filters are in use. */
int srv_conn_subscribe(srv_conn *c, const char *job, uint32_t mask, int on);
/* The SRV_EV_* bit of an event name (SRV_EV_OTHER when unknown). */
uint32_t srv_conn_event_bit(const char *name);

/* Sends event line m about job to every connection subscribed to it; STEP events are
 * paced. The caller keeps its reference to m. */
void srv_conn_publish(srv_server *srv, const char *job, const char *event, srv_msg *m);

#endif
