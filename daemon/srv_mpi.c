/* srv_mpi.c - a data-parallel job's launch (see srv_mpi.h). */
#include "srv_mpi.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "srv.h"
#include "srv_worker.h"

int srv_mpi_check(const srv_server *srv, const eng_check_info *check, char *desc,
	size_t desclen)
{
	long long ranks = check->ranks;
	if (ranks <= 1 || srv->mpirun_path[0])
		return 0;
	srv_fmt(desc, desclen, "parallel.ranks %lld needs mpirun, which rematd has not found on "
		"its PATH: install openmpi-bin, or start rematd with --mpirun PATH", (long long)ranks);
	return -1;
}

int srv_mpi_ranks(const srv_job *job)
{
	int n = job->info ? job->info->ranks : 1;
	return n > 1 ? n : 1;
}

/* The owner of the job's fd (an entry of the job's directory) becomes the job's owner when
 * rematd is root and the owner is not: mpirun and its ranks run as the owner. */
static int give_to_owner(const srv_job *job, int fd, const char *name, char *err,
	size_t errlen)
{
	if (geteuid() != 0 || job->owner.uid == 0 || fchown(fd, job->owner.uid,
		    job->owner.gid) == 0)
		return 0;
	snprintf(err, errlen, "cannot give %s to uid %lu: %s", name,
		(unsigned long)job->owner.uid, strerror(errno));
	return -1;
}

/* Removes the entry name of the job's directory when it is a socket (one left by a job
 * that died before rank 0 connected), through the directory's descriptor, never a link. */
static void remove_socket(const srv_job *job, const char *name)
{
	eng_dir d;
	eng_err e = {0};
	struct stat st;
	if (srv_job_dir_open(job, &d, &e) < 0)
		return;
	if (fstatat(d.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode))
		unlinkat(d.fd, name, 0);
	eng_dir_close(&d);
}

/* The listening socket at JOBDIR/ctl.sock: created 0600 (under a umask: bind takes a path,
 * the job's directory is rematd's own, 0711), the owner's (fchownat, no link followed). */
static int listen_socket(srv_job *job, char *path, size_t len, char *err, size_t errlen)
{
	struct sockaddr_un a;
	eng_dir d;
	eng_err e = {0};
	memset(&a, 0, sizeof a);
	a.sun_family = AF_UNIX;
	if ((size_t)snprintf(path, len, "%s/" SRV_MPI_SOCKET, job->dir) >= sizeof a.sun_path) {
		snprintf(err, errlen, "the job's socket path '%s' is longer than a socket's %zu bytes",
			path, sizeof a.sun_path - 1);
		return -1;
	}
	memcpy(a.sun_path, path, strlen(path) + 1); /* fits: checked above */
	remove_socket(job, SRV_MPI_SOCKET);
	if (srv_job_dir_open(job, &d, &e) < 0) {
		snprintf(err, errlen, "%s", e.msg);
		return -1;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	mode_t old = umask(0177);
	int bound = fd >= 0 ? bind(fd, (struct sockaddr *)&a, sizeof a) : -1;
	umask(old);
	int rc = bound < 0 || (geteuid() == 0 && job->owner.uid != 0 &&
		fchownat(d.fd, SRV_MPI_SOCKET, job->owner.uid, job->owner.gid,
			AT_SYMLINK_NOFOLLOW) < 0) || listen(fd, 4) < 0 ? -1 : 0;
	if (rc < 0) {
		snprintf(err, errlen, "cannot listen at '%s': %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
	} else {
		job->mpi_lfd = fd;
	}
	eng_dir_close(&d);
	return rc;
}

/* A file of the job's directory, opened through its descriptor (eng_fs_append_at: no link,
 * rematd's or the owner's), created (or emptied when trunc) 0600 and the owner's, written
 * with text when not NULL; its path for mpirun's arguments into path. */
static int owner_file(srv_job *job, const char *name, int trunc, const char *text,
	char *path, size_t len, char *err, size_t errlen)
{
	eng_dir d;
	eng_err e = {0};
	snprintf(path, len, "%s/%s", job->dir, name);
	if (srv_job_dir_open(job, &d, &e) < 0) {
		snprintf(err, errlen, "%s", e.msg);
		return -1;
	}
	/* a link (symbolic or hard) or a third user's file there is refused before anything
	 * is written or emptied: only then is it truncated */
	int fd = eng_fs_append_at(&d, name, 0600, job->owner.uid, &e);
	eng_dir_close(&d);
	if (fd < 0) {
		snprintf(err, errlen, "%s", e.msg);
		return -1;
	}
	if (trunc && ftruncate(fd, 0) < 0) {
		snprintf(err, errlen, "cannot empty '%s': %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	int rc = give_to_owner(job, fd, name, err, errlen);
	size_t n = text ? strlen(text) : 0;
	if (rc == 0 && n && write(fd, text, n) != (ssize_t)n) {
		snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
		rc = -1;
	}
	close(fd);
	return rc;
}

/* The spec the ranks read: job.json itself, or a copy that is the owner's when mpirun runs
 * as the owner (job.json is rematd's, 0600), read through the job's directory. */
static int rank_spec(srv_job *job, const char *spec_path, int drop, char *path, size_t len,
	char *err, size_t errlen)
{
	eng_dir d = {.fd = -1};
	eng_err e = {0};
	if (!drop) {
		snprintf(path, len, "%s", spec_path);
		return 0;
	}
	int fd = srv_job_dir_open(job, &d, &e) == 0 ? openat(d.fd, job->spec_file,
		O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
	if (d.fd >= 0)
		eng_dir_close(&d);
	json_t *spec = fd >= 0 ? json_loadfd(fd, JSON_REJECT_DUPLICATES, NULL) : NULL;
	if (fd >= 0)
		close(fd);
	char *text = spec ? json_dumps(spec, JSON_COMPACT) : NULL;
	int rc = text ? owner_file(job, SRV_MPI_SPEC, 1, text, path, len, err, errlen) : -1;
	if (!text)
		snprintf(err, errlen, "cannot read the job's spec '%s'", spec_path);
	free(text);
	json_decref(spec);
	return rc;
}

/* mpirun's argument vector as it is built: the strings one after another in store */
typedef struct argv_b {
	char **args, *store;
	size_t len, used;
	int n, full; /* full: a string or an argument did not fit */
} argv_b;

static void arg(argv_b *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void arg(argv_b *b, const char *fmt, ...)
{
	if (b->full || b->used >= b->len || b->n >= SRV_MPI_MAX_ARGS - 1) {
		b->full = 1;
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(b->store + b->used, b->len - b->used, fmt, ap);
	va_end(ap);
	b->args[b->n++] = b->store + b->used;
	b->used += (size_t)(w < 0 ? 0 : w) + 1;
	b->full = w < 0 || b->used > b->len;
}

/* Where the ranks run and how mpirun reaches them, as the spec's check said: --host or
 * --hostfile, the launcher (Open MPI's plm: rsh for ssh, or slurm) and parallel.mca's
 * "k=v;k=v" (checked by the spec's parser) as --mca KEY VALUE, an argument each (no shell
 * sees them) */
static void placement_args(argv_b *b, const eng_check_info *ci)
{
	if (!ci)
		return;
	if (ci->hosts[0])
		arg(b, "--host"), arg(b, "%s", ci->hosts);
	else if (ci->hostfile[0])
		arg(b, "--hostfile"), arg(b, "%s", ci->hostfile);
	if (ci->launcher[0]) {
		arg(b, "--mca");
		arg(b, "plm");
		arg(b, "%s", strcmp(ci->launcher, "slurm") ? "rsh" : "slurm");
	}
	for (const char *p = ci->mca; *p;) {
		const char *eq = strchr(p, '='), *end = p + strcspn(p, ";");
		if (!eq || eq > end)
			break;
		arg(b, "--mca");
		arg(b, "%.*s", (int)(eq - p), p);
		arg(b, "%.*s", (int)(end - eq - 1), eq + 1);
		p = *end ? end + 1 : end;
	}
}

int srv_mpi_prepare(srv_job *job, const char *as_arg, const char *pool_arg,
	const char *spec_path, char **args, char *store, size_t storelen, char *err,
	size_t errlen)
{
	srv_server *srv = job->srv;
	argv_b b = {args, store, storelen, 0, 0, 0};
	err[0] = '\0';
	job->mpi_lfd = -1;
	char sock[SRV_PATH_LEN + 16], metrics[SRV_PATH_LEN + 16], spec[SRV_PATH_LEN + 16];
	if (!srv->mpirun_path[0]) {
		snprintf(err, errlen, "no mpirun: install openmpi-bin, or start rematd with --mpirun");
		return -1;
	}
	/* Open MPI's Slurm launcher starts its daemons with srun inside the allocation rematd
	 * runs in; outside one it fails with no word of why */
	if (job->info && !strcmp(job->info->launcher, "slurm") && !getenv("SLURM_JOB_ID")) {
		snprintf(err, errlen, "'parallel.launcher' \"slurm\" needs rematd to run inside "
				      "a Slurm allocation (SLURM_JOB_ID is not set in its "
				      "environment)");
		return -1;
	}
	if (listen_socket(job, sock, sizeof sock, err, errlen) < 0 ||
		owner_file(job, SRV_METRICS_FILE, 0, NULL, metrics, sizeof metrics, err, errlen) < 0 ||
		rank_spec(job, spec_path, as_arg != NULL, spec, sizeof spec, err, errlen) < 0) {
		srv_mpi_close(job);
		return -1;
	}
	if (as_arg) /* mpirun, its daemons and every rank the owner's from the start */
		arg(&b, "%s", srv->worker_path), arg(&b, "--as"), arg(&b, "%s", as_arg),
			arg(&b, "--exec");
	arg(&b, "%s", srv->mpirun_path);
	arg(&b, "-np");
	arg(&b, "%d", srv_mpi_ranks(job));
	if (geteuid() == 0 && !as_arg)
		arg(&b, "--allow-run-as-root"); /* the owner is root */
	arg(&b, "--bind-to"); /* each rank's OpenMP threads stay free to spread */
	arg(&b, "none");
	placement_args(&b, job->info);
	arg(&b, "%s", srv->worker_path);
	arg(&b, "--control-connect");
	arg(&b, "%s", sock);
	arg(&b, "--metrics");
	arg(&b, "%s", metrics);
	arg(&b, "--job-id");
	arg(&b, "%s", job->id);
	if (pool_arg)
		arg(&b, "--pool-budget"), arg(&b, "%s", pool_arg);
	arg(&b, "%s", spec);
	if (b.full) {
		snprintf(err, errlen, "mpirun's arguments are too long");
		srv_mpi_close(job);
		return -1;
	}
	args[b.n] = NULL;
	return 0;
}

static void on_poll_close(uv_handle_t *h)
{
	srv_job *job = h->data;
	job->handles_open--;
}

void srv_mpi_close(srv_job *job)
{
	if (job->mpi_polling) {
		uv_close((uv_handle_t *)&job->mpi_poll, on_poll_close);
		job->mpi_polling = 0;
	}
	if (job->mpi_lfd >= 0) {
		close(job->mpi_lfd);
		job->mpi_lfd = -1;
		remove_socket(job, SRV_MPI_SOCKET);
	}
}

/* Whether pid descends from ancestor (its parents, from /proc, a few generations up). */
static int descends(pid_t pid, pid_t ancestor)
{
	for (int depth = 0; depth < 8 && pid > 1; depth++) {
		char p[64], buf[512];
		snprintf(p, sizeof p, "/proc/%ld/stat", (long)pid); /* the kernel's, not a client's */
		int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
		if (fd >= 0)
			close(fd);
		buf[n > 0 ? n : 0] = '\0';
		char *rp = strrchr(buf, ')'); /* "pid (comm) state ppid ..." */
		long ppid;
		if (!rp || sscanf(rp + 1, " %*c %ld", &ppid) != 1)
			return 0;
		if ((pid_t)ppid == ancestor)
			return 1;
		pid = (pid_t)ppid;
	}
	return 0;
}

/* Rank 0, a process of the job's own mpirun run as its owner (or root): the job's channel
 * from now on. Another process of the owner's is refused. */
static void on_connect(uv_poll_t *p, int status, int events)
{
	srv_job *job = p->data;
	(void)events;
	if (status < 0) {
		job->mpi_connected(job, NULL, "its rank-0 socket failed");
		srv_mpi_close(job);
		return;
	}
	int fd = accept4(job->mpi_lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	struct ucred cr;
	socklen_t len = sizeof cr;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 ||
		(cr.uid != job->owner.uid && cr.uid != geteuid()) || !descends(cr.pid, job->pid)) {
		srv_log("job %s: refused a connection to its rank-0 socket from pid %ld (uid %lu): "
			"not a process of its mpirun", job->id, (long)cr.pid, (unsigned long)cr.uid);
		close(fd);
		return;
	}
	srv_mpi_close(job);
	job->mpi_connected(job, &fd, NULL);
	if (fd >= 0)
		close(fd);
}

void srv_mpi_wait(srv_job *job, void (*connected)(srv_job *job, int *fd, const char *why))
{
	job->mpi_connected = connected;
	srv_job_set_state(job, PROTO_JOB_STARTING, "mpirun spawned, waiting for rank 0");
	if (uv_poll_init(job->srv->loop, &job->mpi_poll, job->mpi_lfd) < 0) {
		connected(job, NULL, "cannot wait for its rank 0");
		srv_mpi_close(job);
		return;
	}
	job->mpi_poll.data = job;
	job->handles_open++;
	job->mpi_polling = 1;
	if (uv_poll_start(&job->mpi_poll, UV_READABLE, on_connect) < 0) {
		connected(job, NULL, "cannot wait for its rank 0");
		srv_mpi_close(job);
	}
}
