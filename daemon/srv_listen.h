/* srv_listen.h - rematd's listening Unix socket and the lock file that guards it.
 *
 * PATH.lock is held with flock(LOCK_EX|LOCK_NB) for the daemon's whole life: when another
 * process holds it, a daemon is live on PATH and we refuse to start; when nobody does, a
 * socket file at PATH was left by a daemon that died, and is removed. The socket is bound
 * under umask 0177, so it never exists with a wider mode, then given the group and 0660
 * when a group is named. Not here: checking peers (srv_conn.c, SO_PEERCRED on accept).
 *
 * Socket activation (systemd's rematd.socket, systemd-socket-activate, sd_listen_fds(3)):
 * when the service manager passes a listening socket (LISTEN_PID is ours, LISTEN_FDS=1, the
 * socket at fd 3), it is adopted instead: no lock file (the manager runs one instance), no
 * bind, no chown or chmod (the socket unit set the owner and mode), and the socket file is
 * never unlinked (the manager owns it and removes it: RemoveOnStop=).
 */
#ifndef SRV_LISTEN_H
#define SRV_LISTEN_H

#include <stddef.h>
#include <sys/types.h>
#include <uv.h>

#define SRV_LISTEN_BACKLOG 128   /* connections the kernel queues before we accept */
#define SRV_LISTEN_PATH_LEN 4096 /* room for the socket and lock paths */
#define SRV_LISTEN_FDS_START 3   /* the first descriptor a service manager passes
				  * (SD_LISTEN_FDS_START) */

typedef struct srv_listener {
	uv_pipe_t pipe;                   /* the bound, listening socket */
	int pipe_open;                    /* 1 from uv_pipe_init until uv_close */
	int bound;                        /* 1 while the socket file at path is ours */
	int lock_fd;                      /* PATH.lock held with flock; -1 when not held */
	int adopted;                      /* 1 when the service manager passed the socket:
					   * it owns the file, we never unlink it */
	char path[SRV_LISTEN_PATH_LEN];   /* the socket's path */
	char lock_path[SRV_LISTEN_PATH_LEN]; /* path + ".lock" */
} srv_listener;

/* Takes the lock, removes a stale socket, binds path (mode 0600, or 0660 and group gid when
 * has_group), creates its directory (0700, or 0710 with the group) when missing, and
 * listens; on_conn runs per connection with the pipe's data set to data. Returns 0, or -1
 * with a message in err (nothing left behind: no socket file, lock released). */
int srv_listen_start(srv_listener *l, uv_loop_t *loop, const char *path, int has_group,
	gid_t gid, uv_connection_cb on_conn, void *data, char *err, size_t errlen);

/* Looks for a socket passed by a service manager. With LISTEN_FDS unset: returns 0. With it
 * set, LISTEN_PID must parse and LISTEN_FDS be 0 or 1; when LISTEN_PID is another process's
 * (or missing) the variables are not for us: returns 0 with a note saying so. With
 * LISTEN_FDS=1, fd 3 must be an AF_UNIX stream socket that listens: returns 1 with *fd = 3,
 * marked FD_CLOEXEC. Anything else: -1 with a message in err. Whenever LISTEN_FDS or
 * LISTEN_PID was set, LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES are unset before returning
 * (the workers must not think the socket is theirs). note may be NULL. */
int srv_listen_fds(int *fd, char *note, size_t notelen, char *err, size_t errlen);

/* Serves the passed listening socket fd (from srv_listen_fds): l->path gets its address
 * (a path, or "@name" for an abstract one), and on_conn runs per connection with the pipe's
 * data set to data. Returns 0, or -1 with a message in err (fd closed). */
int srv_listen_adopt(srv_listener *l, uv_loop_t *loop, int fd, uv_connection_cb on_conn,
	void *data, char *err, size_t errlen);

/* Stops accepting: unlinks the socket file (not an adopted one), then closes the listening
 * handle (libuv never unlinks a bound pipe). Safe to call twice. The lock stays held. */
void srv_listen_close(srv_listener *l);

/* Releases the lock (unlinks PATH.lock, then closes it) once the daemon is done. */
void srv_listen_release(srv_listener *l);

#endif
