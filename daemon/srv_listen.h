/* srv_listen.h - rematd's listening Unix socket and the lock file that guards it.
 *
 * PATH.lock is held with flock(LOCK_EX|LOCK_NB) for the daemon's whole life: when another
 * process holds it, a daemon is live on PATH and we refuse to start; when nobody does, a
 * socket file at PATH was left by a daemon that died, and is removed. The socket is bound
 * under umask 0177, so it never exists with a wider mode, then given the group and 0660
 * when a group is named. Not here: checking peers (srv_conn.c, SO_PEERCRED on accept).
 */
#ifndef SRV_LISTEN_H
#define SRV_LISTEN_H

#include <stddef.h>
#include <sys/types.h>
#include <uv.h>

#define SRV_LISTEN_BACKLOG 128   /* connections the kernel queues before we accept */
#define SRV_LISTEN_PATH_LEN 4096 /* room for the socket and lock paths */

typedef struct srv_listener {
	uv_pipe_t pipe;                   /* the bound, listening socket */
	int pipe_open;                    /* 1 from uv_pipe_init until uv_close */
	int bound;                        /* 1 while the socket file at path is ours */
	int lock_fd;                      /* PATH.lock held with flock; -1 when not held */
	char path[SRV_LISTEN_PATH_LEN];   /* the socket's path */
	char lock_path[SRV_LISTEN_PATH_LEN]; /* path + ".lock" */
} srv_listener;

/* Takes the lock, removes a stale socket, binds path (mode 0600, or 0660 and group gid when
 * has_group), creates its directory (0700, or 0710 with the group) when missing, and
 * listens; on_conn runs per connection with the pipe's data set to data. Returns 0, or -1
 * with a message in err (nothing left behind: no socket file, lock released). */
int srv_listen_start(srv_listener *l, uv_loop_t *loop, const char *path, int has_group,
	gid_t gid, uv_connection_cb on_conn, void *data, char *err, size_t errlen);

/* Stops accepting: unlinks the socket file, then closes the listening handle (libuv never
 * unlinks a bound pipe). Safe to call twice. The lock stays held. */
void srv_listen_close(srv_listener *l);

/* Releases the lock (unlinks PATH.lock, then closes it) once the daemon is done. */
void srv_listen_release(srv_listener *l);

#endif
