/* srv_listen.c - the listening socket: lock file, stale socket removal, bind with a safe
 * mode, listen; or a socket passed by the service manager, checked and adopted. See
 * srv_listen.h. Not here: the connections themselves (srv_conn.c).
 *
 * Measured on Debian 12's libuv 1.44.2: there is no uv_pipe_bind2; uv_pipe_bind silently
 * truncates a path longer than sun_path (we check the length first); uv_pipe_chmod grants
 * more than 0660 (we use umask and chmod instead); binding over an existing file fails with
 * EADDRINUSE (hence the stale-socket handling under the lock).
 */
#include "srv_listen.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "srv.h"

#define LISTEN_LOCK_TRIES 8          /* lock files replaced under us before we give up */
#define LISTEN_UMASK 0177            /* the socket is born 0600 whatever the caller's umask */
#define LISTEN_MODE_USER 0600        /* socket mode without --group */
#define LISTEN_MODE_GROUP 0660       /* socket mode with --group */
#define LISTEN_DIR_MODE_USER 0700    /* mode of a socket directory we create */
#define LISTEN_DIR_MODE_GROUP 0710   /* with --group: the group may only traverse it */
#define LISTEN_PID_LEN 32            /* the pid written into the lock file */

/* The largest socket path the kernel takes, its terminating NUL excluded. */
static size_t listen_path_max(void)
{
	struct sockaddr_un sun;
	return sizeof sun.sun_path - 1;
}

/* Creates the socket's directory when it is missing (one level only: the runtime directory
 * above it must exist). */
static int listen_make_dir(const char *path, int has_group, gid_t gid, char *err,
	size_t errlen)
{
	char dir[SRV_LISTEN_PATH_LEN];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	mode_t mode = has_group ? LISTEN_DIR_MODE_GROUP : LISTEN_DIR_MODE_USER;
	if (mkdir(dir, mode) < 0) {
		if (errno == EEXIST)
			return 0;
		snprintf(err, errlen, "cannot create directory '%s': %s", dir, strerror(errno));
		return -1;
	}
	/* mkdir's mode went through the umask, and the group must be set before it can
	 * traverse: chown first, then chmod. */
	if ((has_group && chown(dir, (uid_t)-1, gid) < 0) || chmod(dir, mode) < 0) {
		snprintf(err, errlen, "cannot set the owner or mode of '%s': %s", dir,
			strerror(errno));
		return -1;
	}
	return 0;
}

/* Takes PATH.lock. Fails when another process holds it. */
static int listen_lock(srv_listener *l, char *err, size_t errlen)
{
	for (int tries = 0; tries < LISTEN_LOCK_TRIES; tries++) {
		/* O_NOFOLLOW: a symlink planted at the lock path is refused, never followed */
		int fd = open(l->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0) {
			snprintf(err, errlen, "cannot open lock file '%s': %s", l->lock_path,
				strerror(errno));
			return -1;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			int e = errno;
			char pid[LISTEN_PID_LEN] = "";
			ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
			pid[n > 0 ? n : 0] = '\0';
			pid[strcspn(pid, "\n")] = '\0';
			close(fd);
			if (e == EWOULDBLOCK)
				snprintf(err, errlen, "another rematd%s%s%s is running on '%s' (it "
					"holds '%s')", *pid ? " (pid " : "", pid, *pid ? ")" : "",
					l->path, l->lock_path);
			else
				snprintf(err, errlen, "cannot lock '%s': %s", l->lock_path,
					strerror(e));
			return -1;
		}
		/* The daemon before us unlinks its lock file before closing it; if that happened
		 * between our open and our flock, we now hold a lock on a file nobody else can
		 * find. Only a lock on the file that is at the path now counts. */
		struct stat held, now;
		if (fstat(fd, &held) == 0 && lstat(l->lock_path, &now) == 0 &&
			held.st_dev == now.st_dev && held.st_ino == now.st_ino) {
			/* our pid goes into this file alone: never one with other names (a hard
			 * link to a file elsewhere), another user's, or no regular file */
			if (!S_ISREG(held.st_mode) || held.st_uid != geteuid() || held.st_nlink != 1) {
				snprintf(err, errlen, "refusing to use lock file '%s': it is %s",
					l->lock_path, !S_ISREG(held.st_mode) ? eng_fs_kind(held.st_mode) :
					held.st_uid != geteuid() ? "another user's" :
					"a hard link (a file with other names)");
				close(fd);
				return -1;
			}
			char pid[LISTEN_PID_LEN];
			int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
			/* the pid only serves the message above: failing to write it is harmless */
			if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n)
				srv_log("cannot write our pid into '%s': %s", l->lock_path,
					strerror(errno));
			l->lock_fd = fd;
			return 0;
		}
		close(fd);
	}
	snprintf(err, errlen, "cannot lock '%s': the file keeps being replaced", l->lock_path);
	return -1;
}

/* 1 when something accepts connections on path: a program that is not rematd (it would
 * hold the lock) but must not lose its socket either. */
static int listen_probe(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	/* the length was checked by srv_listen_start */
	memcpy(sun.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return 0;
	int r = connect(fd, (struct sockaddr *)&sun, sizeof sun);
	/* EAGAIN: the listener's backlog is full, so it is alive */
	int live = r == 0 || errno == EAGAIN || errno == EINPROGRESS;
	close(fd);
	return live;
}

/* Removes a socket left at path by a daemon that died. Only called with the lock held. */
static int listen_clear_stale(srv_listener *l, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(l->path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "cannot stat '%s': %s", l->path, strerror(errno));
		return -1;
	}
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "'%s' exists and is not a socket; not removing it", l->path);
		return -1;
	}
	if (listen_probe(l->path)) {
		snprintf(err, errlen, "'%s' is served by a program that holds no lock; not "
			"removing it", l->path);
		return -1;
	}
	if (unlink(l->path) < 0 && errno != ENOENT) {
		snprintf(err, errlen, "cannot remove stale socket '%s': %s", l->path,
			strerror(errno));
		return -1;
	}
	srv_log("removed stale socket '%s' (its daemon is gone)", l->path);
	return 0;
}

int srv_listen_start(srv_listener *l, uv_loop_t *loop, const char *path, int has_group,
	gid_t gid, uv_connection_cb on_conn, void *data, char *err, size_t errlen)
{
	memset(l, 0, sizeof *l);
	l->lock_fd = -1;
	size_t len = strlen(path);
	/* libuv 1.44 would cut a longer path silently and bind somewhere else */
	if (len == 0 || len > listen_path_max()) {
		snprintf(err, errlen, "socket path '%.*s%s' is too long (%zu bytes; at most %zu)",
			64, path, len > 64 ? "..." : "", len, listen_path_max());
		return -1;
	}
	snprintf(l->path, sizeof l->path, "%s", path);
	snprintf(l->lock_path, sizeof l->lock_path, "%s.lock", path);

	if (listen_make_dir(path, has_group, gid, err, errlen) < 0)
		goto fail;
	if (listen_lock(l, err, errlen) < 0)
		goto fail;
	if (listen_clear_stale(l, err, errlen) < 0)
		goto fail;

	int r = uv_pipe_init(loop, &l->pipe, 0);
	if (r < 0) {
		snprintf(err, errlen, "cannot create the listening pipe: %s", uv_strerror(r));
		goto fail;
	}
	l->pipe_open = 1;
	l->pipe.data = data;
	/* umask is per process; we are still single-threaded here */
	mode_t old = umask(LISTEN_UMASK);
	r = uv_pipe_bind(&l->pipe, path);
	umask(old);
	if (r < 0) {
		snprintf(err, errlen, "cannot bind '%s': %s", path, uv_strerror(r));
		goto fail;
	}
	l->bound = 1;
	/* group before mode: 0660 is only widened once the group is the right one */
	if (has_group && chown(path, (uid_t)-1, gid) < 0) {
		snprintf(err, errlen, "cannot give '%s' to group %ld: %s", path, (long)gid,
			strerror(errno));
		goto fail;
	}
	if (chmod(path, has_group ? LISTEN_MODE_GROUP : LISTEN_MODE_USER) < 0) {
		snprintf(err, errlen, "cannot chmod '%s': %s", path, strerror(errno));
		goto fail;
	}
	r = uv_listen((uv_stream_t *)&l->pipe, SRV_LISTEN_BACKLOG, on_conn);
	if (r < 0) {
		snprintf(err, errlen, "cannot listen on '%s': %s", path, uv_strerror(r));
		goto fail;
	}
	return 0;

fail:
	srv_listen_close(l);
	srv_listen_release(l);
	return -1;
}

/* ---- socket activation ---- */

/* A whole decimal number in 0..max from an environment variable; -1 when it is not one. */
static long listen_env_number(const char *s, long max)
{
	char *end;
	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v > max)
		return -1;
	return v;
}

/* Checks that fd is what rematd can serve: an open AF_UNIX stream socket that listens. */
static int listen_check_fd(int fd, char *err, size_t errlen)
{
	struct stat st;
	int v = -1; /* what getsockopt gave; -1 when it failed */
	socklen_t len = sizeof v;
	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "LISTEN_FDS=1 but fd %d is not open: %s", fd,
			strerror(errno));
		return -1;
	}
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "LISTEN_FDS=1 but fd %d is not a socket", fd);
		return -1;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) < 0 || v != AF_UNIX) {
		snprintf(err, errlen, "the socket passed at fd %d is not a Unix socket (family "
			"%d): rematd listens on AF_UNIX only", fd, v);
		return -1;
	}
	len = sizeof v;
	v = -1;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) < 0 || v != SOCK_STREAM) {
		snprintf(err, errlen, "the socket passed at fd %d is a %s socket, not a stream "
			"socket (ListenStream=)", fd, v == SOCK_DGRAM ? "datagram" :
			v == SOCK_SEQPACKET ? "seqpacket" : "non-stream");
		return -1;
	}
	len = sizeof v;
	v = 0;
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) < 0 || !v) {
		snprintf(err, errlen, "the socket passed at fd %d does not listen (Accept=yes "
			"passes connections; rematd.socket must not set it)", fd);
		return -1;
	}
	return 0;
}

int srv_listen_fds(int *fd, char *note, size_t notelen, char *err, size_t errlen)
{
	const char *fds = getenv("LISTEN_FDS"), *pid = getenv("LISTEN_PID");
	int rc = 0;
	long n = -1, p = -1;
	*fd = -1;
	if (note && notelen)
		note[0] = '\0';
	if (!fds && !pid)
		return 0;
	if (!fds) {
		if (note)
			snprintf(note, notelen, "LISTEN_PID is set without LISTEN_FDS: ignored");
		goto out;
	}
	if ((n = listen_env_number(fds, INT_MAX)) < 0) {
		snprintf(err, errlen, "LISTEN_FDS '%.32s' is not a number of descriptors", fds);
		rc = -1;
		goto out;
	}
	if (pid && (p = listen_env_number(pid, LONG_MAX)) <= 0) {
		snprintf(err, errlen, "LISTEN_PID '%.32s' is not a process id", pid);
		rc = -1;
		goto out;
	}
	/* sd_listen_fds(3): without LISTEN_PID, or with another's, the sockets were meant for
	 * a process that exec'd us or spawned us by mistake; they are not ours to serve */
	if (p != (long)getpid()) {
		if (note)
			snprintf(note, notelen, "LISTEN_FDS=%ld is for %s%.32s, not for us (pid "
				"%ld): ignored", n, pid ? "pid " : "no LISTEN_PID", pid ? pid : "",
				(long)getpid());
		goto out;
	}
	if (n == 0) {
		if (note)
			snprintf(note, notelen, "LISTEN_FDS=0: no socket passed");
		goto out;
	}
	if (n > 1) {
		snprintf(err, errlen, "LISTEN_FDS=%ld: rematd serves exactly one socket (give "
			"rematd.socket one ListenStream=)", n);
		rc = -1;
		goto out;
	}
	if (listen_check_fd(SRV_LISTEN_FDS_START, err, errlen) < 0) {
		rc = -1;
		goto out;
	}
	/* the manager passes it inheritable; no worker may keep our listening socket open */
	int flags = fcntl(SRV_LISTEN_FDS_START, F_GETFD);
	if (flags < 0 || fcntl(SRV_LISTEN_FDS_START, F_SETFD, flags | FD_CLOEXEC) < 0) {
		snprintf(err, errlen, "cannot set FD_CLOEXEC on fd %d: %s", SRV_LISTEN_FDS_START,
			strerror(errno));
		rc = -1;
		goto out;
	}
	*fd = SRV_LISTEN_FDS_START;
	rc = 1;
out:
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return rc;
}

int srv_listen_adopt(srv_listener *l, uv_loop_t *loop, int fd, uv_connection_cb on_conn,
	void *data, char *err, size_t errlen)
{
	struct sockaddr_un sun;
	socklen_t len = sizeof sun;
	memset(l, 0, sizeof *l);
	l->lock_fd = -1;
	l->adopted = 1;
	memset(&sun, 0, sizeof sun);
	if (getsockname(fd, (struct sockaddr *)&sun, &len) < 0) {
		snprintf(err, errlen, "cannot read the passed socket's address: %s",
			strerror(errno));
		close(fd);
		return -1;
	}
	size_t n = len > offsetof(struct sockaddr_un, sun_path) ?
		len - offsetof(struct sockaddr_un, sun_path) : 0;
	if (n == 0)
		snprintf(l->path, sizeof l->path, "(unnamed)");
	else if (sun.sun_path[0] == '\0') /* abstract: the name is every byte after the NUL */
		snprintf(l->path, sizeof l->path, "@%.*s", (int)(n - 1), sun.sun_path + 1);
	else
		snprintf(l->path, sizeof l->path, "%.*s", (int)strnlen(sun.sun_path, n),
			sun.sun_path);

	int r = uv_pipe_init(loop, &l->pipe, 0);
	if (r < 0) {
		snprintf(err, errlen, "cannot create the listening pipe: %s", uv_strerror(r));
		close(fd);
		return -1;
	}
	l->pipe_open = 1;
	l->pipe.data = data;
	r = uv_pipe_open(&l->pipe, fd);
	if (r < 0) {
		snprintf(err, errlen, "cannot use the passed socket '%s': %s", l->path,
			uv_strerror(r));
		/* not the pipe's yet: ours to close */
		close(fd);
		goto fail;
	}
	/* listen(2) again on a listening socket only sets the backlog; libuv needs the call
	 * to start accepting */
	r = uv_listen((uv_stream_t *)&l->pipe, SRV_LISTEN_BACKLOG, on_conn);
	if (r < 0) {
		snprintf(err, errlen, "cannot listen on the passed socket '%s': %s", l->path,
			uv_strerror(r));
		goto fail;
	}
	return 0;

fail:
	srv_listen_close(l);
	return -1;
}

void srv_listen_close(srv_listener *l)
{
	/* Unlink before closing: a client never finds a socket file nobody listens on. The
	 * lock is still ours, so no other daemon can have bound the path meanwhile. */
	if (l->bound && unlink(l->path) < 0 && errno != ENOENT)
		srv_log("cannot remove socket '%s': %s", l->path, strerror(errno));
	l->bound = 0;
	if (l->pipe_open)
		uv_close((uv_handle_t *)&l->pipe, NULL);
	l->pipe_open = 0;
}

void srv_listen_release(srv_listener *l)
{
	if (l->lock_fd < 0)
		return;
	/* Unlink while still holding the lock, then close: a daemon that opened the old file
	 * meanwhile gets a lock on an unlinked inode and retries (listen_lock's check). */
	if (unlink(l->lock_path) < 0 && errno != ENOENT)
		srv_log("cannot remove lock file '%s': %s", l->lock_path, strerror(errno));
	close(l->lock_fd);
	l->lock_fd = -1;
}
