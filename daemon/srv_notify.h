/* srv_notify.h - the service manager's notification protocol (sd_notify(3)) without
 * libsystemd: "KEY=VALUE" lines in one datagram on an AF_UNIX SOCK_DGRAM socket to the
 * address in $NOTIFY_SOCKET, and the watchdog interval from $WATCHDOG_USEC/$WATCHDOG_PID.
 *
 * $NOTIFY_SOCKET is an absolute path ("/run/systemd/notify") or, with a leading '@', a name
 * in the abstract namespace ("@foo": sun_path is "\0foo", and the address length counts
 * exactly those bytes, no trailing NUL). Anything else is refused with a message.
 *
 * This module only speaks the protocol; what to say and when (READY=1, STATUS=, WATCHDOG=1,
 * STOPPING=1, EXTEND_TIMEOUT_USEC=) is rematd.c's business. No libuv, no logging: errors
 * come back as messages, so the functions can be unit-tested alone.
 */
#ifndef SRV_NOTIFY_H
#define SRV_NOTIFY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#define SRV_NOTIFY_SEND_TIMEOUT_MS 500 /* a send blocks at most this long when the service
					* manager's queue is full; then the message is lost */
#define SRV_NOTIFY_NAME_LEN 128        /* room for $NOTIFY_SOCKET as given (sun_path is
					* 108 bytes) */

typedef struct srv_notify {
	int fd;                      /* our unbound datagram socket; -1 when notifications
				      * are off */
	struct sockaddr_un addr;     /* where datagrams go ($NOTIFY_SOCKET) */
	socklen_t addr_len;          /* the address's exact length (abstract names count) */
	char name[SRV_NOTIFY_NAME_LEN]; /* $NOTIFY_SOCKET as given, for messages */
	uint64_t watchdog_usec;      /* WATCHDOG_USEC when meant for us, else 0 (no watchdog) */
} srv_notify;

/* Parses a $NOTIFY_SOCKET value into addr and its length. Returns 0, or -1 with a message
 * in err (empty, relative, too long, "@" alone). */
int srv_notify_parse_addr(const char *value, struct sockaddr_un *addr, socklen_t *len,
	char *err, size_t errlen);

/* The watchdog interval meant for process self: usec parsed from $WATCHDOG_USEC when pid
 * ($WATCHDOG_PID) is NULL or equals self. Returns 1 with *usec set, 0 when there is no
 * watchdog for us (usec NULL, or pid another process), -1 with a message in err when a
 * value does not parse or usec is 0. */
int srv_notify_parse_watchdog(const char *usec, const char *pid, pid_t self, uint64_t *out,
	char *err, size_t errlen);

/* Reads $NOTIFY_SOCKET, $WATCHDOG_USEC and $WATCHDOG_PID, then unsets all three (they are
 * for this process, not for the workers it spawns). n->fd is -1 when $NOTIFY_SOCKET is
 * unset. Returns 0, or -1 with a message in err when a variable is malformed or the socket
 * cannot be created; n is then still usable (what was valid is kept; a bad address means
 * notifications are off, a bad watchdog means no watchdog). */
int srv_notify_init(srv_notify *n, char *err, size_t errlen);

/* 1 when n sends anything. */
int srv_notify_enabled(const srv_notify *n);

/* Sends state, one or more "KEY=VALUE" lines separated by '\n', as one datagram. Returns 0
 * (also when notifications are off), or -1 with errno set (the message is lost; a full
 * queue on the manager's side gives EAGAIN after SRV_NOTIFY_SEND_TIMEOUT_MS). */
int srv_notify_send(srv_notify *n, const char *state);

/* Closes the socket. Safe to call twice. */
void srv_notify_free(srv_notify *n);

#endif
