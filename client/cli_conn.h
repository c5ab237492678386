/* cli_conn.h - rematctl's connection to rematd or to a worker: a blocking Unix socket, the
 * greeting, requests with integer ids, and replies matched by id (docs/protocol.md).
 *
 * One request at a time: cli_conn_call sends and waits for the reply with that id, handing
 * any event that arrives meanwhile to a callback (or dropping it). Every wait is bounded
 * (poll() with a deadline). Anything malformed from the server is a protocol error, never a
 * crash. Not here: what the replies mean (cli_show.c, cli_watch.c).
 */
#ifndef CLI_CONN_H
#define CLI_CONN_H

#include <jansson.h>
#include <signal.h>

#include "proto.h"

#define CLI_TIMEOUT_MS		30000  /* default wait for a greeting or a reply */
#define CLI_DEFERRED_TIMEOUT_MS 600000 /* job-stop, ckpt-save: they wait for a step boundary */
#define CLI_ERR_LEN		640    /* room for a message: a path, a description */

/* Results of cli_conn_* calls. */
#define CLI_OK	   0	/* done: a reply, a message */
#define CLI_EREPLY 1	/* the server answered with an error: c->err is "desc (Class)" */
#define CLI_ECONN  (-1) /* cannot connect, connection lost, protocol error: see c->err */
#define CLI_ETIME  (-2) /* the wait ran out (cli_conn_next only; calls report CLI_ECONN) */
#define CLI_EINTR  (-3) /* *c->stop was set by a signal while waiting */

/* Called for an event that arrives while cli_conn_call waits; msg is the whole line's
 * object ({"event":..,"data":..,"timestamp":..}), borrowed. */
typedef void (*cli_event_cb)(json_t *msg, void *ud);

typedef struct cli_conn {
	int fd;				   /* the socket, -1 when closed */
	char path[128];			   /* where it is connected (for messages) */
	proto_framer fr;		   /* splits what is read into lines */
	json_t *queue;			   /* messages read, not yet handed out (array) */
	json_t *greeting;		   /* the greeting's "remat" object */
	long long next_id;		   /* id of the next request, from 1 */
	const volatile sig_atomic_t *stop; /* when set and non-zero, waits end (CLI_EINTR) */
	int broken;			   /* 1 after end of stream or a protocol error */
	char err[CLI_ERR_LEN];		   /* why the last call did not return CLI_OK */
	char err_class[32];		   /* the error class of a CLI_EREPLY */
} cli_conn;

/* Connects to the Unix socket at path and reads the greeting (its protocol must be
 * PROTO_PROTOCOL). Returns CLI_OK, or CLI_ECONN with c->err such as "cannot connect to
 * 'P': No such file or directory (is rematd running?)", where server ("rematd") names what
 * should be listening. c->stop is kept: zero c, or point c->stop at a flag, first. Call
 * cli_conn_close either way. */
int cli_conn_open(cli_conn *c, const char *path, const char *server, int timeout_ms);

/* The monotonic clock in milliseconds (timeouts, polls). */
long long cli_now_ms(void);
/* The job a worker's greeting names, or NULL. */
const char *cli_conn_job(const cli_conn *c);

/* Sends {"execute":cmd,"arguments":args,"id":N} (args may be NULL); *id gets N when id is
 * not NULL. Returns CLI_OK, or CLI_ECONN (line over PROTO_MAX_LINE, write failed). */
int cli_conn_send(cli_conn *c, const char *cmd, const json_t *args, long long *id);

/* The next message from the server: CLI_OK with *msg (new reference, the whole line's
 * object) and *kind; CLI_ETIME when none came within timeout_ms (< 0: wait for ever);
 * CLI_ECONN; CLI_EINTR. */
int cli_conn_next(cli_conn *c, int timeout_ms, json_t **msg, proto_kind *kind);

/* Sends cmd and waits up to timeout_ms for its reply. CLI_OK with *ret (new reference to
 * the "return" object) when ret is not NULL; CLI_EREPLY for an error reply (an error
 * without an id counts as the answer: the server sends those when it gives up on the line
 * or the connection); CLI_ECONN (with "no reply to 'cmd' within N s" on a timeout);
 * CLI_EINTR. Events that arrive meanwhile go to on_event when it is not NULL. */
int cli_conn_call(cli_conn *c, const char *cmd, const json_t *args, int timeout_ms, json_t **ret,
		  cli_event_cb on_event, void *ud);

/* Closes the socket and frees what c holds; safe on a failed open and twice. */
void cli_conn_close(cli_conn *c);

#endif
