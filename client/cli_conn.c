/* cli_conn.c - rematctl's blocking connection to rematd or a worker (see cli_conn.h).
 *
 * Plain POSIX: a Unix stream socket, non-blocking after connect so that every wait goes
 * through poll() with a deadline; proto's framer splits the bytes into lines and
 * proto_message_parse checks each line's shape. Lines are parsed as soon as they arrive
 * and kept in a small queue, so a read that brings several messages loses none.
 * Not here: retrying, reconnecting (a client that lost its server reports it and exits).
 */
#include "cli_conn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli_fmt.h"

#define READ_CHUNK 65536 /* bytes asked of one read() */

long long cli_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The poll() timeout left until deadline (-1: none). */
static int left_ms(long long deadline)
{
	if (deadline < 0)
		return -1;
	long long left = deadline - cli_now_ms();
	return left < 0 ? 0 : left > 0x7fffffff ? 0x7fffffff : (int)left;
}

static int broken(cli_conn *c, const char *fmt, const char *a, const char *b)
{
	snprintf(c->err, sizeof c->err, fmt, a, b);
	c->broken = 1;
	return CLI_ECONN;
}

/* The kind of a message that proto_message_parse accepted. */
static proto_kind msg_kind(const json_t *msg)
{
	if (json_object_get(msg, "return"))
		return PROTO_KIND_RETURN;
	if (json_object_get(msg, "error"))
		return PROTO_KIND_ERROR;
	if (json_object_get(msg, "event"))
		return PROTO_KIND_EVENT;
	return PROTO_KIND_GREETING;
}

/* Framer callback: parses one line and queues it; stops at the first bad line. */
static int on_line(const char *line, size_t len, void *ud)
{
	cli_conn *c = ud;
	json_t *msg = NULL;
	proto_kind kind;
	char desc[PROTO_DESC_LEN];

	if (len == 0)
		return 0; /* an empty line carries nothing; tolerate it */
	if (proto_message_parse(line, len, &msg, &kind, desc, sizeof desc) < 0) {
		char clean[PROTO_DESC_LEN];
		broken(c, "protocol error: %s%s", cli_str_clean(desc, clean, sizeof clean), "");
		return 1;
	}
	/* what the rest of rematctl relies on, checked once here */
	if ((kind == PROTO_KIND_RETURN && !json_is_object(json_object_get(msg, "return"))) ||
	    (kind == PROTO_KIND_ERROR && !json_is_object(json_object_get(msg, "error"))) ||
	    (kind == PROTO_KIND_EVENT && !json_is_string(json_object_get(msg, "event"))) ||
	    (kind == PROTO_KIND_GREETING && !json_is_object(json_object_get(msg, "remat"))) ||
	    msg_kind(msg) != kind) {
		json_decref(msg);
		broken(c, "protocol error: a message of an unexpected shape%s%s", "", "");
		return 1;
	}
	if (json_array_append_new(c->queue, msg) < 0) {
		broken(c, "out of memory%s%s", "", "");
		return 1;
	}
	return 0;
}

/* An error message's description and class into c->err and c->err_class (cleaned). */
static void keep_error(cli_conn *c, const json_t *msg)
{
	json_t *e = json_object_get(msg, "error");
	const char *desc = cli_jstr(e, "desc"), *cls = cli_jstr(e, "class");
	cli_str_clean(desc ? desc : "(no description)", c->err, sizeof c->err);
	cli_str_clean(cls ? cls : "?", c->err_class, sizeof c->err_class);
}

int cli_conn_open(cli_conn *c, const char *path, const char *server, int timeout_ms)
{
	struct sockaddr_un sa;
	json_t *msg = NULL;
	proto_kind kind;
	int rc;
	const volatile sig_atomic_t *stop = c->stop;

	memset(c, 0, sizeof *c);
	c->stop = stop;
	c->fd = -1;
	c->next_id = 1;
	proto_framer_init(&c->fr);
	snprintf(c->path, sizeof c->path, "%s", path);
	c->queue = json_array();
	if (!c->queue)
		return broken(c, "out of memory%s%s", "", "");
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sa.sun_path || strlen(path) >= sizeof c->path)
		return broken(c, "socket path '%.100s' is too long%s", path, "");
	strcpy(sa.sun_path, path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return broken(c, "cannot create a socket: %s%s", strerror(errno), "");
	while ((rc = connect(c->fd, (struct sockaddr *)&sa, sizeof sa)) < 0 && errno == EINTR)
		;
	if (rc < 0) {
		int e = errno;
		char hint[64] = "";
		if (e == ENOENT || e == ECONNREFUSED)
			snprintf(hint, sizeof hint, " (is %s running?)", server);
		snprintf(c->err, sizeof c->err, "cannot connect to '%s': %s%s", path, strerror(e),
			 hint);
		c->broken = 1;
		return CLI_ECONN;
	}
	int fl = fcntl(c->fd, F_GETFL);
	if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return broken(c, "cannot set up the socket: %s%s", strerror(errno), "");
	rc = cli_conn_next(c, timeout_ms, &msg, &kind);
	if (rc == CLI_ETIME) {
		snprintf(c->err, sizeof c->err, "no greeting from '%s' within %d s", path,
			 timeout_ms / 1000);
		c->broken = 1;
		return CLI_ECONN;
	}
	if (rc != CLI_OK)
		return rc;
	if (kind == PROTO_KIND_ERROR && !json_object_get(msg, "id")) {
		/* refused before it greeted (PermissionDenied): its reason is the message */
		keep_error(c, msg);
		json_decref(msg);
		c->broken = 1;
		return CLI_EREPLY;
	}
	if (kind != PROTO_KIND_GREETING) {
		json_decref(msg);
		return broken(c, "protocol error: '%s' did not start with a greeting%s", path, "");
	}
	c->greeting = json_incref(json_object_get(msg, "remat"));
	json_decref(msg);
	json_t *proto = json_object_get(c->greeting, "protocol");
	if (!json_is_integer(proto) || json_integer_value(proto) != PROTO_PROTOCOL) {
		char got[32] = "none";
		if (json_is_integer(proto))
			snprintf(got, sizeof got, "%lld", (long long)json_integer_value(proto));
		snprintf(c->err, sizeof c->err,
			 "protocol error: the server speaks protocol %s, "
			 "%s speaks %d",
			 got, "rematctl", PROTO_PROTOCOL);
		c->broken = 1;
		return CLI_ECONN;
	}
	return CLI_OK;
}

const char *cli_conn_job(const cli_conn *c)
{
	return cli_jstr(c->greeting, "job");
}

/* After a send failed: reads what the server sent before it closed, and when that holds an
 * error without an id (its reason for closing), puts it in c->err: 1; 0 otherwise. */
static int server_said(cli_conn *c)
{
	char buf[READ_CHUNK];
	for (;;) {
		ssize_t n = read(c->fd, buf, sizeof buf);
		if (n <= 0)
			break;
		if (proto_framer_feed(&c->fr, buf, (size_t)n, on_line, c) < 0)
			break;
	}
	for (size_t i = 0; i < json_array_size(c->queue); i++) {
		json_t *msg = json_array_get(c->queue, i);
		if (msg_kind(msg) != PROTO_KIND_ERROR || json_object_get(msg, "id"))
			continue;
		keep_error(c, msg);
		c->broken = 1;
		return 1;
	}
	return 0;
}

int cli_conn_send(cli_conn *c, const char *cmd, const json_t *args, long long *id)
{
	json_t *jid = json_integer(c->next_id);
	char *line = jid ? proto_request_line(cmd, args, jid) : NULL;
	int rc = CLI_ECONN;

	json_decref(jid);
	if (c->broken) {
		/* c->err already says why */
		goto out;
	}
	if (!line) {
		snprintf(c->err, sizeof c->err, "cannot build the '%s' request", cmd);
		goto out;
	}
	size_t len = strlen(line), off = 0;
	if (len > PROTO_MAX_LINE + 1) {
		snprintf(c->err, sizeof c->err,
			 "the '%s' request is %zu bytes, over the "
			 "protocol's limit of %u",
			 cmd, len - 1, PROTO_MAX_LINE);
		goto out;
	}
	long long deadline = cli_now_ms() + CLI_TIMEOUT_MS;
	while (off < len) {
		ssize_t n = send(c->fd, line + off, len - off, MSG_NOSIGNAL);
		if (n >= 0) {
			off += (size_t)n;
			continue;
		}
		if (errno == EINTR && !(c->stop && *c->stop))
			continue;
		if (errno == EINTR) {
			rc = CLI_EINTR;
			goto out;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			int e = errno;
			/* the server may have said why it closed (Busy, PermissionDenied) first:
			 * that is the message, not the broken pipe */
			if (server_said(c))
				rc = CLI_EREPLY;
			else
				broken(c, "cannot send to '%s': %s", c->path, strerror(e));
			goto out;
		}
		struct pollfd p = {.fd = c->fd, .events = POLLOUT};
		int pr = poll(&p, 1, left_ms(deadline));
		if (pr == 0) {
			broken(c, "'%s' does not read its socket%s", c->path, "");
			goto out;
		}
		if (pr < 0 && errno == EINTR && c->stop && *c->stop) {
			rc = CLI_EINTR;
			goto out;
		}
	}
	if (id)
		*id = c->next_id;
	c->next_id++;
	rc = CLI_OK;
out:
	free(line);
	return rc;
}

int cli_conn_next(cli_conn *c, int timeout_ms, json_t **msg, proto_kind *kind)
{
	long long deadline = timeout_ms < 0 ? -1 : cli_now_ms() + timeout_ms;
	char buf[READ_CHUNK];

	for (;;) {
		/* what was queued is handed out before a broken state is reported */
		if (json_array_size(c->queue) > 0) {
			*msg = json_incref(json_array_get(c->queue, 0));
			json_array_remove(c->queue, 0);
			*kind = msg_kind(*msg);
			return CLI_OK;
		}
		if (c->broken || c->fd < 0)
			return CLI_ECONN;
		if (c->stop && *c->stop)
			return CLI_EINTR;
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		int pr = poll(&p, 1, left_ms(deadline));
		if (pr < 0) {
			if (errno == EINTR)
				continue;
			return broken(c, "poll: %s%s", strerror(errno), "");
		}
		if (pr == 0)
			return CLI_ETIME;
		ssize_t n = read(c->fd, buf, sizeof buf);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
				continue;
			return broken(c, "cannot read from '%s': %s", c->path, strerror(errno));
		}
		if (n == 0) {
			/* queued messages still go out first; then the end is reported */
			broken(c, "connection closed by the server%s%s", "", "");
			continue;
		}
		int fr = proto_framer_feed(&c->fr, buf, (size_t)n, on_line, c);
		if (fr < 0)
			broken(c, "protocol error: a line longer than %s bytes from '%s'",
			       "1048576", c->path);
	}
}

/* 1 when a reply's id is the integer id. */
static int id_is(const json_t *msg, long long id)
{
	json_t *v = json_object_get(msg, "id");
	return json_is_integer(v) && json_integer_value(v) == id;
}

int cli_conn_call(cli_conn *c, const char *cmd, const json_t *args, int timeout_ms, json_t **ret,
		  cli_event_cb on_event, void *ud)
{
	long long id, deadline;
	int rc = cli_conn_send(c, cmd, args, &id);

	if (rc != CLI_OK)
		return rc;
	deadline = cli_now_ms() + timeout_ms;
	for (;;) {
		json_t *msg = NULL;
		proto_kind kind;
		rc = cli_conn_next(c, left_ms(deadline), &msg, &kind);
		if (rc == CLI_ETIME) {
			snprintf(c->err, sizeof c->err, "no reply to '%s' within %d s", cmd,
				 (timeout_ms + 999) / 1000);
			return CLI_ECONN;
		}
		if (rc != CLI_OK)
			return rc;
		if (kind == PROTO_KIND_EVENT) {
			if (on_event)
				on_event(msg, ud);
		} else if (kind == PROTO_KIND_GREETING) {
			json_decref(msg);
			return broken(c, "protocol error: a second greeting%s%s", "", "");
		} else if (kind == PROTO_KIND_RETURN && id_is(msg, id)) {
			if (ret)
				*ret = json_incref(json_object_get(msg, "return"));
			json_decref(msg);
			return CLI_OK;
		} else if (kind == PROTO_KIND_ERROR &&
			   (id_is(msg, id) || !json_object_get(msg, "id"))) {
			keep_error(c, msg);
			json_decref(msg);
			return CLI_EREPLY;
		}
		/* a reply to some other id: not ours (one request at a time), skipped */
		json_decref(msg);
	}
}

void cli_conn_close(cli_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	proto_framer_free(&c->fr);
	memset(&c->fr, 0, sizeof c->fr); /* a second close then frees nothing twice */
	json_decref(c->queue);
	c->queue = NULL;
	json_decref(c->greeting);
	c->greeting = NULL;
}
