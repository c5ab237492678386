/* srv_notify.c - sd_notify(3)'s wire protocol and the watchdog variables, without
 * libsystemd. See srv_notify.h. Not here: what rematd says when (rematd.c).
 *
 * The socket is blocking with a send timeout rather than non-blocking: a datagram to a
 * receiver whose queue is full waits for room (READY=1 and STOPPING=1 matter), but never
 * longer than SRV_NOTIFY_SEND_TIMEOUT_MS: a stuck service manager stalls the loop no longer.
 * Each send names the address (sendto) instead of connecting once: the manager may
 * recreate its socket, and an unconnected datagram socket simply follows the path.
 */
#include "srv_notify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#define NOTIFY_ERR_LEN 256 /* a message about NOTIFY_SOCKET */

/* Parses a whole decimal number into *out; -1 when s is not one (sign, space, overflow). */
static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

int srv_notify_parse_addr(const char *value, struct sockaddr_un *addr, socklen_t *len,
	char *err, size_t errlen)
{
	size_t n = value ? strlen(value) : 0;
	memset(addr, 0, sizeof *addr);
	addr->sun_family = AF_UNIX;
	if (n == 0) {
		snprintf(err, errlen, "NOTIFY_SOCKET is empty");
		return -1;
	}
	if (value[0] != '/' && value[0] != '@') {
		snprintf(err, errlen, "NOTIFY_SOCKET '%.64s' is neither an absolute path nor an "
			"abstract name ('@...')", value);
		return -1;
	}
	if (value[0] == '@' && n == 1) {
		snprintf(err, errlen, "NOTIFY_SOCKET '@' names no abstract socket");
		return -1;
	}
	/* a path needs its NUL inside sun_path; an abstract name has none, but its first
	 * byte ('@' here) becomes the leading NUL, so both fit when n < sizeof sun_path */
	if (n >= sizeof addr->sun_path) {
		snprintf(err, errlen, "NOTIFY_SOCKET '%.64s...' is too long (%zu bytes; at most "
			"%zu)", value, n, sizeof addr->sun_path - 1);
		return -1;
	}
	memcpy(addr->sun_path, value, n);
	if (value[0] == '@') {
		addr->sun_path[0] = '\0';
		/* the kernel takes every byte up to the length as the name: no NUL counted */
		*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
	} else {
		*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	}
	return 0;
}

int srv_notify_parse_watchdog(const char *usec, const char *pid, pid_t self, uint64_t *out,
	char *err, size_t errlen)
{
	uint64_t v, p;
	*out = 0;
	if (!usec)
		return 0;
	if (parse_u64(usec, &v) < 0 || v == 0) {
		snprintf(err, errlen, "WATCHDOG_USEC '%.32s' is not a positive number of "
			"microseconds", usec);
		return -1;
	}
	if (pid) {
		if (parse_u64(pid, &p) < 0 || p == 0) {
			snprintf(err, errlen, "WATCHDOG_PID '%.32s' is not a process id", pid);
			return -1;
		}
		/* the watchdog of a process that exec'd us, or of a sibling: not ours */
		if (p != (uint64_t)self)
			return 0;
	}
	*out = v;
	return 1;
}

int srv_notify_init(srv_notify *n, char *err, size_t errlen)
{
	int rc = 0;
	memset(n, 0, sizeof *n);
	n->fd = -1;
	err[0] = '\0';

	const char *wusec = getenv("WATCHDOG_USEC"), *wpid = getenv("WATCHDOG_PID");
	if (srv_notify_parse_watchdog(wusec, wpid, getpid(), &n->watchdog_usec, err,
		errlen) < 0)
		rc = -1;

	const char *sock = getenv("NOTIFY_SOCKET");
	char msg[NOTIFY_ERR_LEN] = "";
	if (sock) {
		snprintf(n->name, sizeof n->name, "%s", sock);
		if (srv_notify_parse_addr(sock, &n->addr, &n->addr_len, msg, sizeof msg) == 0) {
			n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
			if (n->fd < 0)
				snprintf(msg, sizeof msg, "cannot create a socket for "
					"NOTIFY_SOCKET: %s", strerror(errno));
		}
	}
	if (n->fd >= 0) {
		struct timeval tv = {SRV_NOTIFY_SEND_TIMEOUT_MS / 1000,
			(SRV_NOTIFY_SEND_TIMEOUT_MS % 1000) * 1000};
		/* without the timeout a full queue would block the loop; failing to set it is
		 * not worth refusing to notify */
		(void)setsockopt(n->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	}
	if (msg[0]) {
		/* the first error wins the message: one is enough to act on */
		if (rc == 0)
			snprintf(err, errlen, "%s", msg);
		rc = -1;
	}
	/* after reading: the workers we spawn must not talk to our service manager or
	 * believe a watchdog is theirs */
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	return rc;
}

int srv_notify_enabled(const srv_notify *n)
{
	return n->fd >= 0;
}

int srv_notify_send(srv_notify *n, const char *state)
{
	if (n->fd < 0)
		return 0;
	size_t len = strlen(state);
	ssize_t r;
	do
		r = sendto(n->fd, state, len, MSG_NOSIGNAL, (const struct sockaddr *)&n->addr,
			n->addr_len);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -1;
	/* a datagram goes whole or not at all; a short count would be a kernel bug */
	if ((size_t)r != len) {
		errno = EMSGSIZE;
		return -1;
	}
	return 0;
}

void srv_notify_free(srv_notify *n)
{
	if (n->fd >= 0)
		close(n->fd);
	n->fd = -1;
}
