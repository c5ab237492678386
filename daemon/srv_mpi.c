/* srv_mpi.c - a data-parallel job's launch (see srv_mpi.h). */
#include "srv_mpi.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "srv.h"
#include "srv_worker.h"

int srv_mpi_ranks(const srv_job *job)
{
	json_int_t n = json_integer_value(json_object_get(json_object_get(job->info, "parallel"),
		"ranks"));
	return n > 1 ? (int)n : 1;
}

/* The job's owner gets path (an entry of the job's directory) when rematd is root and the
 * owner is not: rank 0 runs as the owner. */
static int give_to_owner(const srv_job *job, const char *name, char *err, size_t errlen)
{
	eng_dir d;
	eng_err e = {0};
	if (geteuid() != 0 || job->owner.uid == 0)
		return 0;
	if (srv_job_dir_open(job, &d, &e) < 0) {
		snprintf(err, errlen, "%s", e.msg);
		return -1;
	}
	int rc = fchownat(d.fd, name, job->owner.uid, job->owner.gid, AT_SYMLINK_NOFOLLOW);
	eng_dir_close(&d);
	if (rc < 0)
		snprintf(err, errlen, "cannot give %s to uid %lu: %s", name,
			(unsigned long)job->owner.uid, strerror(errno));
	return rc;
}

/* The listening socket at JOBDIR/ctl.sock, mode 0600, the owner's. */
static int listen_socket(srv_job *job, char *path, size_t len, char *err, size_t errlen)
{
	struct sockaddr_un a;
	memset(&a, 0, sizeof a);
	a.sun_family = AF_UNIX;
	if ((size_t)snprintf(path, len, "%s/" SRV_MPI_SOCKET, job->dir) >= sizeof a.sun_path) {
		snprintf(err, errlen, "the job's socket path '%s' is longer than a socket's %zu bytes",
			path, sizeof a.sun_path - 1);
		return -1;
	}
	memcpy(a.sun_path, path, strlen(path) + 1); /* fits: checked above */
	struct stat st;
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path); /* a socket left by a job that died before rank 0 connected */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || chmod(path, 0600) < 0 ||
		give_to_owner(job, SRV_MPI_SOCKET, err, errlen) < 0 || listen(fd, 4) < 0) {
		if (!err[0])
			snprintf(err, errlen, "cannot listen at '%s': %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	job->mpi_lfd = fd;
	return 0;
}

/* JOBDIR/metrics.jsonl, created when missing, the owner's: rank 0 appends to it. */
static int metrics_file(srv_job *job, char *path, size_t len, char *err, size_t errlen)
{
	snprintf(path, len, "%s/" SRV_METRICS_FILE, job->dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
		return -1;
	}
	close(fd);
	return give_to_owner(job, SRV_METRICS_FILE, err, errlen);
}

int srv_mpi_prepare(srv_job *job, const char *as_arg, const char *spec_path, char **args,
	char *store, size_t storelen, char *err, size_t errlen)
{
	srv_server *srv = job->srv;
	const json_t *par = json_object_get(job->info, "parallel");
	const char *hosts = json_string_value(json_object_get(par, "hosts"));
	const char *hostfile = json_string_value(json_object_get(par, "hostfile"));
	size_t used = 0;
	int n = 0;
	err[0] = '\0';
	job->mpi_lfd = -1;
	/* store holds the strings the arguments point at, one after another */
#define KEEP(...) (used < storelen ? (args[n++] = store + used, \
	used += (size_t)snprintf(store + used, storelen - used, __VA_ARGS__) + 1) : 0)
	char sock[SRV_PATH_LEN + 16], metrics[SRV_PATH_LEN + 16];
	if (!srv->mpirun_path[0]) {
		snprintf(err, errlen, "no mpirun: install openmpi-bin, or start rematd with --mpirun");
		return -1;
	}
	if (listen_socket(job, sock, sizeof sock, err, errlen) < 0 ||
		metrics_file(job, metrics, sizeof metrics, err, errlen) < 0) {
		srv_mpi_close(job);
		return -1;
	}
	KEEP("%s", srv->mpirun_path);
	KEEP("-np");
	KEEP("%d", srv_mpi_ranks(job));
	if (geteuid() == 0)
		KEEP("--allow-run-as-root"); /* the ranks drop to the owner themselves (--as) */
	KEEP("--bind-to"); /* each rank's OpenMP threads stay free to spread */
	KEEP("none");
	if (hosts && hosts[0]) {
		KEEP("--host");
		KEEP("%s", hosts);
	} else if (hostfile && hostfile[0]) {
		KEEP("--hostfile");
		KEEP("%s", hostfile);
	}
	KEEP("%s", srv->worker_path);
	KEEP("--control-connect");
	KEEP("%s", sock);
	KEEP("--metrics");
	KEEP("%s", metrics);
	KEEP("--job-id");
	KEEP("%s", job->id);
	if (as_arg) {
		KEEP("--as");
		KEEP("%s", as_arg);
	}
	KEEP("%s", spec_path);
#undef KEEP
	if (used >= storelen || n >= SRV_MPI_MAX_ARGS) {
		snprintf(err, errlen, "mpirun's arguments are too long");
		srv_mpi_close(job);
		return -1;
	}
	args[n] = NULL;
	return 0;
}

static void on_poll_close(uv_handle_t *h)
{
	srv_job *job = h->data;
	job->handles_open--;
}

void srv_mpi_close(srv_job *job)
{
	char path[SRV_PATH_LEN + 16];
	if (job->mpi_polling) {
		uv_close((uv_handle_t *)&job->mpi_poll, on_poll_close);
		job->mpi_polling = 0;
	}
	if (job->mpi_lfd >= 0) {
		close(job->mpi_lfd);
		job->mpi_lfd = -1;
		snprintf(path, sizeof path, "%s/" SRV_MPI_SOCKET, job->dir);
		unlink(path);
	}
}

/* Rank 0, as the job's owner (or root): the job's channel from now on. */
static void on_connect(uv_poll_t *p, int status, int events)
{
	srv_job *job = p->data;
	(void)events;
	if (status < 0)
		return;
	int fd = accept4(job->mpi_lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	struct ucred cr;
	socklen_t len = sizeof cr;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 ||
		(cr.uid != job->owner.uid && cr.uid != geteuid())) {
		srv_log("job %s: refused a connection to its rank-0 socket from uid %lu", job->id,
			(unsigned long)cr.uid);
		close(fd);
		return;
	}
	srv_mpi_close(job);
	srv_worker_channel_open(job, &fd);
	if (fd >= 0)
		close(fd);
}

void srv_mpi_wait(srv_job *job)
{
	if (uv_poll_init(job->srv->loop, &job->mpi_poll, job->mpi_lfd) < 0)
		return;
	job->mpi_poll.data = job;
	job->handles_open++;
	job->mpi_polling = 1;
	uv_poll_start(&job->mpi_poll, UV_READABLE, on_connect);
	srv_job_set_state(job, SRV_JOB_STARTING, "mpirun spawned, waiting for rank 0");
}
