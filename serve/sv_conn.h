/* sv_conn.h - one connection of a control server: rematd's clients and the worker's
 * (remat-train --control and its link to rematd) are all this.
 *
 * What it does, the same for both: reads lines (proto_framer; a line over PROTO_MAX_LINE
 * gets MessageTooLarge and the connection drains), queues output without ever waiting for
 * the peer (past PROTO_MAX_OUTQ bytes queued the peer is dropped: a subscriber that falls
 * behind goes, the server does not slow down), keeps the peer's subscriptions (event bits
 * per job filter) and paces STEP events: at most one a job every step_gap_ms, the latest
 * held back winning, and a STEP held back goes out before any other event of its job (and
 * before a drain), so that the order holds. The idle limit (idle_ms): a peer is closed once
 * it has been idle that long: no complete line received, no subscription, and nothing owed
 * to it (the owner's busy op: a reply still to come). Close gracefully (sv_conn_drain: what
 * is queued is flushed, at most linger_ms) or at once (sv_conn_close).
 *
 * What it leaves to its owner (ops): what a line means, what the end of the peer means,
 * freeing the memory that holds it (on_closed, after its handles closed: the only time it
 * may go), and where its log lines go. One libuv loop, one thread.
 */
#ifndef SV_CONN_H
#define SV_CONN_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "eng_cred.h"
#include "proto.h"
#include "sv_msg.h"

#define SV_MAX_SUBS 16            /* subscription entries (distinct job filters) per conn */
#define SV_STEP_SLOTS 8           /* jobs whose STEP rate one connection tracks at once */
#define SV_STEP_PER_S 20          /* STEP events a second per connection and job */
#define SV_STEP_GAP_MS (1000u / SV_STEP_PER_S)
#define SV_JOB_LEN 72             /* a job filter, with its NUL ("" for every job) */

/* Event bits of a subscription: bit e is proto_event e. An event name that is not known
 * (a newer worker's) is only delivered to subscriptions that named no events. */
#define SV_EV_STEP (1u << PROTO_EV_STEP)
#define SV_EV_OTHER (1u << 31)
#define SV_EV_ALL 0xffffffffu

typedef struct sv_conn sv_conn;

typedef struct sv_conn_ops {
	void (*on_line)(sv_conn *k, const char *line, size_t len); /* a complete line */
	void (*on_end)(sv_conn *k, int status); /* the peer hung up (UV_EOF) or reading failed;
						 * NULL: nothing to do. The close follows. */
	void (*on_closed)(sv_conn *k);          /* its handles closed: free what holds k */
	void (*log)(sv_conn *k, const char *what); /* "disconnected", "dropped: ..." */
	int (*busy)(sv_conn *k);                /* 1 while the peer is owed a reply (not idle);
						 * NULL: never */
} sv_conn_ops;

typedef struct sv_sub {
	char job[SV_JOB_LEN];      /* the job filter; "" for every job */
	uint32_t events;           /* SV_EV_* bits wanted; 0 = entry unused */
} sv_sub;

typedef struct sv_step_slot {
	char job[SV_JOB_LEN];      /* the job whose STEP events this slot paces; "" = free */
	uint64_t last_ms;          /* when the last one went out (the loop's clock) */
	sv_msg *pending;           /* the latest one held back, or NULL */
	int used;
} sv_step_slot;

struct sv_conn {
	uv_pipe_t pipe;            /* the peer's socket; pipe.data = this */
	uv_timer_t timer;          /* STEP pacing, then the linger limit */
	uv_timer_t idle;           /* the idle limit (armed only when idle_ms > 0) */
	uv_shutdown_t shutdown;    /* flushes the output before a graceful close */
	const sv_conn_ops *ops;
	void *owner;               /* the server's object for this peer */
	char *rbuf;                /* the read buffer: the owner's, shared by its connections */
	size_t rbuf_len;
	unsigned step_gap_ms;      /* least time between two STEP events of a job; 0: all go */
	unsigned linger_ms;        /* how long a drain waits for the peer to read */
	unsigned idle_ms;          /* the idle limit; 0: none */
	uint64_t active_ms;        /* the loop's clock when it was last not idle: connected, a
				    * complete line, or found busy or subscribed */
	proto_framer framer;       /* the line being assembled */
	int draining;              /* 1 once nothing more is read or sent: the close follows */
	int closing;               /* 1 once uv_close was called */
	int handles_open;          /* pipe and timers until their close callbacks ran */
	sv_sub subs[SV_MAX_SUBS];
	sv_step_slot steps[SV_STEP_SLOTS];
};

/* Sets k up on loop (pipe and timers initialised, all closable from now on). STEP pacing
 * SV_STEP_GAP_MS, linger 2 s, no idle limit: change the fields before sv_conn_read. */
void sv_conn_init(sv_conn *k, uv_loop_t *loop, const sv_conn_ops *ops, void *owner,
	char *rbuf, size_t rbuf_len);
/* Accepts the next connection of server into k, or takes over a connected socket fd: 0 or
 * a libuv error. */
int sv_conn_accept(sv_conn *k, uv_stream_t *server);
int sv_conn_open(sv_conn *k, int fd);
/* The peer's uid, gid and supplementary groups (SO_PEERCRED, then SO_PEERGROUPS or
 * /proc/PID/status), and its pid: 0, or -1 with errno. */
int sv_conn_peer(const sv_conn *k, eng_cred *cr, pid_t *pid);
/* Starts reading (and the idle limit, checked every idle_ms: a peer idle for the limit is
 * closed between one and two limits after it last was not idle): 0, or -1 after closing k
 * (logged). */
int sv_conn_read(sv_conn *k);

/* Queues a line for the peer (taking a new reference to m; the caller keeps its own). A
 * connection that is draining drops it; one whose output queue would pass PROTO_MAX_OUTQ
 * is closed. 0 when queued, -1 when dropped. */
int sv_conn_send(sv_conn *k, sv_msg *m);
/* The same for a malloc'd line, taken (NULL: out of memory, -1). */
int sv_conn_send_line(sv_conn *k, char *line);
/* {"return":ret,"id":id} (ret NULL = {}), and {"error":...}; ids are borrowed. */
int sv_conn_reply(sv_conn *k, const json_t *ret, const json_t *id);
int sv_conn_error(sv_conn *k, proto_errclass ec, const char *desc, const json_t *id);

/* Reads nothing more, sends the STEP events held back and what is queued (at most
 * linger_ms), then closes. */
void sv_conn_drain(sv_conn *k);
/* Closes now; queued output is lost. why (may be NULL) goes to the log. */
void sv_conn_close(sv_conn *k, const char *why);

/* Adds (on = 1) or removes (on = 0) the events of mask for job ("" = every job). 0, or -1
 * when SV_MAX_SUBS different job filters are in use or job is too long. */
int sv_conn_subscribe(sv_conn *k, const char *job, uint32_t mask, int on);
/* The SV_EV_* bit of an event name (SV_EV_OTHER when unknown), and the bits a subscribe's
 * "events" argument names (SV_EV_ALL when it names none). */
uint32_t sv_event_bit(const char *name);
uint32_t sv_events_mask(const json_t *events);
/* 1 when k has any subscription. */
int sv_conn_subscribed(const sv_conn *k);
/* 1 when k (served, not draining) wants event bit about job. */
int sv_conn_wants(const sv_conn *k, const char *job, uint32_t bit);
/* Sends event line m about job to k if it subscribed to it; STEP events paced. The caller
 * keeps its reference to m. */
void sv_conn_event(sv_conn *k, const char *job, uint32_t bit, sv_msg *m);

#endif
