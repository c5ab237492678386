/* rematd.c - the remat daemon: options, start-up, signals, shutdown.
 *
 *   rematd [--socket PATH] [--group NAME] [--state-dir DIR] [--max-jobs N] [--worker PATH]
 *          [--memory SIZE|auto] [--stop-timeout SECONDS] [--idle-timeout SECONDS]
 *          [--stall-timeout SECONDS] [--foreground]
 *
 * Listens on a Unix socket for NDJSON requests (docs/protocol.md), keeps a job table, and
 * runs one remat-train worker per job, at most --max-jobs at once (and with --memory, as
 * many as one memory pool holds, divided among them live: srv_pool.h). Runs in the foreground
 * (the only mode: systemd or a terminal supervises it) and logs one line per event to
 * stderr. SIGTERM or SIGINT (or daemon-shutdown) stop it cleanly: no new connections, the
 * socket removed, job-stop to every worker, SIGKILL to those still alive after
 * --stop-timeout (default 60 s), connections flushed and closed, exit 0. A signal stops
 * the jobs with save: true, as remat-train alone saves when signalled (SIGTERM is how
 * systemd and batch schedulers preempt); daemon-shutdown saves too unless it says save:
 * false, and is refused to anyone but root and rematd's own user (srv_cmd.c). A second
 * signal during the shutdown kills the workers at once.
 *
 * Defaults: the socket is $XDG_RUNTIME_DIR/remat/rematd.sock, or /run/remat/rematd.sock as
 * root; the state directory $XDG_STATE_HOME/remat, else ~/.local/state/remat, or
 * /var/lib/remat as root; the worker is remat-train next to this executable, else found on
 * PATH. Exit status: 0 after a clean shutdown, 1 when it cannot start, 2 on bad usage.
 *
 * Under systemd (systemd/rematd.socket and rematd.service; no libsystemd):
 *   - socket activation: a listening socket passed with LISTEN_PID/LISTEN_FDS is served
 *     instead of binding --socket (srv_listen.h); the variables are then unset;
 *   - Type=notify, when $NOTIFY_SOCKET is set: READY=1 once listening; STATUS= with the
 *     jobs, sent when a job changes state and refreshed every STATUS_REFRESH_MS (steps);
 *     WATCHDOG=1 every WATCHDOG_USEC/2 (when WATCHDOG_PID is unset or ours) from a timer on
 *     the event loop, so it stops when the loop stops turning; STOPPING=1 when the shutdown
 *     starts, then EXTEND_TIMEOUT_USEC= every EXTEND_PERIOD_MS while workers are still
 *     stopping (saving), which --stop-timeout bounds. NOTIFY_SOCKET, WATCHDOG_USEC and
 *     WATCHDOG_PID are unset too: they are not the workers'.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "srv.h"
#include "srv_conn.h"
#include "srv_cmd.h"
#include "srv_helper.h"
#include "srv_job.h"
#include "srv_store.h"
#include "srv_worker.h"

#define MAX_JOBS_LIMIT 256          /* --max-jobs accepted: 1..this */
#define STOP_TIMEOUT_LIMIT 86400    /* --stop-timeout accepted: 0..this seconds */
#define STATE_DIR_MODE 0700         /* directories rematd creates for its state */
#define ERR_LEN 512                 /* start-up error messages */
#define WORKER_NAME "remat-train"   /* the worker binary's name */

static void usage(FILE *f)
{
	fprintf(f, "usage: rematd [--socket PATH] [--group NAME] [--state-dir DIR] "
		   "[--max-jobs N]\n"
		   "              [--worker PATH] [--mpirun PATH] [--memory SIZE|auto]\n"
		   "              [--stop-timeout SECONDS] [--idle-timeout SECONDS]\n"
		   "              [--stall-timeout SECONDS]\n"
		   "              [--foreground]\n"
		   "       rematd --version\n"
		   "Serves the remat control protocol on a Unix socket and runs one remat-train\n"
		   "per job (a job of parallel.ranks N: mpirun -np N remat-train). Runs in the\n"
		   "foreground; SIGTERM or SIGINT stop it cleanly.\n");
}

/* dst = a + b, failing when it does not fit. */
static int path_join(char *dst, size_t len, const char *a, const char *b)
{
	return (size_t)snprintf(dst, len, "%s%s", a, b) < len ? 0 : -1;
}

/* An absolute version of path (relative ones are taken from the current directory: the
 * workers run elsewhere). */
static int path_absolute(char *dst, size_t len, const char *path)
{
	char cwd[PATH_MAX];
	if (path[0] == '/')
		return path_join(dst, len, path, "");
	if (!getcwd(cwd, sizeof cwd))
		return -1;
	return (size_t)snprintf(dst, len, "%s/%s", cwd, path) < len ? 0 : -1;
}

/* mkdir -p with mode for the directories created. */
static int mkdir_p(const char *path, mode_t mode)
{
	char tmp[SRV_PATH_LEN];
	if (path_join(tmp, sizeof tmp, path, "") < 0)
		return -1;
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(tmp, mode) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

static int default_socket(char *dst, size_t len, char *err)
{
	if (geteuid() == 0)
		return path_join(dst, len, "/run/remat/rematd.sock", "");
	const char *run = getenv("XDG_RUNTIME_DIR");
	if (!run || run[0] != '/') {
		snprintf(err, ERR_LEN, "XDG_RUNTIME_DIR is not set (or not absolute): give "
			"--socket PATH");
		return -1;
	}
	if (path_join(dst, len, run, "/remat/rematd.sock") < 0) {
		snprintf(err, ERR_LEN, "XDG_RUNTIME_DIR is too long");
		return -1;
	}
	return 0;
}

static int default_state_dir(char *dst, size_t len, char *err)
{
	if (geteuid() == 0)
		return path_join(dst, len, "/var/lib/remat", "");
	const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	int r;
	if (state && state[0] == '/')
		r = path_join(dst, len, state, "/remat");
	else if (home && home[0] == '/')
		r = path_join(dst, len, home, "/.local/state/remat");
	else {
		snprintf(err, ERR_LEN, "neither XDG_STATE_HOME nor HOME is set: give --state-dir");
		return -1;
	}
	if (r < 0)
		snprintf(err, ERR_LEN, "the default state directory's path is too long");
	return r;
}

/* remat-train next to our own executable, else the bare name for a PATH lookup. */
static void default_worker(char *dst, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			slash[1] = '\0';
			if (path_join(dst, len, self, WORKER_NAME) == 0 && access(dst, X_OK) == 0)
				return;
		}
	}
	path_join(dst, len, WORKER_NAME, "");
}

/* The first executable `name` in a directory of $PATH into dst; "" when there is none. */
static void find_on_path(const char *name, char *dst, size_t len)
{
	const char *path = getenv("PATH");
	dst[0] = '\0';
	for (const char *p = path ? path : ""; *p;) {
		const char *colon = strchr(p, ':');
		size_t n = colon ? (size_t)(colon - p) : strlen(p);
		char cand[PATH_MAX];
		if (n && n < sizeof cand - strlen(name) - 2 && p[0] == '/') {
			snprintf(cand, sizeof cand, "%.*s/%s", (int)n, p, name);
			if (access(cand, X_OK) == 0 && strlen(cand) < len) {
				snprintf(dst, len, "%s", cand);
				return;
			}
		}
		p += n + (colon != NULL);
	}
}

static int parse_group(const char *name, gid_t *gid, char *err)
{
	struct group *g = getgrnam(name);
	if (g) {
		*gid = g->gr_gid;
		return 0;
	}
	char *end;
	errno = 0;
	unsigned long n = strtoul(name, &end, 10);
	if (!errno && end != name && !*end && n < (unsigned long)INT_MAX) {
		*gid = (gid_t)n;
		return 0;
	}
	snprintf(err, ERR_LEN, "unknown group '%.64s'", name);
	return -1;
}

static void on_signal(uv_signal_t *h, int signum)
{
	/* save: a preempted run should lose no more than its current step */
	srv_shutdown(h->data, 1, 1, NULL, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

/* Every second: queries a worker left unanswered (srv_worker_sweep), and a restart's looks
 * at save directories that are due (srv_job_rescan_due). */
static void on_sweep_timer(uv_timer_t *t)
{
	srv_worker_sweep(t->data);
	srv_job_rescan_due(t->data);
}

/* remat-train --info answered: daemon-info tells what the workers run. */
static void on_worker_info(srv_server *srv, void *ud, const json_t *out, const char *why)
{
	char err[ERR_LEN];
	(void)ud;
	if (out) {
		json_decref(srv->worker_info);
		srv->worker_info = json_deep_copy(out);
		/* the next rematd answers daemon-info from it at once */
		if (srv_store_save_worker_info(srv, srv->worker_path, out, err, sizeof err) < 0)
			srv_log("cannot keep what the workers run: %s", err);
	} else if (!srv->worker_info) {
		srv_log("cannot learn what the workers run: %s", why);
		srv_fmt(srv->worker_info_err, sizeof srv->worker_info_err, "unknown: %s", why);
	} else {
		srv_log("cannot learn what the workers run: %s (answering from '%s')", why,
			SRV_STORE_WORKER_INFO);
	}
	srv_cmd_info_ready(srv);
}

/* ---- main ---- */

/* The socket the manager passed (passed_fd >= 0), adopted, or --socket bound: 0, or -1
 * with the message. */
static int listen_socket(srv_server *srv, int passed_fd, char *err, size_t errlen)
{
	if (passed_fd < 0)
		return srv_listen_start(&srv->listener, srv->loop, srv->socket_path, srv->has_group,
			srv->group, srv_conn_on_connect, srv, err, errlen);
	char given[SRV_PATH_LEN];
	memcpy(given, srv->socket_path, sizeof given);
	int r = srv_listen_adopt(&srv->listener, srv->loop, passed_fd, srv_conn_on_connect, srv,
		err, errlen);
	/* daemon-info reports where clients really connect */
	_Static_assert(sizeof srv->socket_path == sizeof srv->listener.path,
		"the socket path fits either way");
	if (r == 0)
		memcpy(srv->socket_path, srv->listener.path, sizeof srv->socket_path);
	if (r == 0 && given[0] && strcmp(given, srv->socket_path) != 0)
		srv_log("--socket '%s' ignored: serving the socket the service manager passed",
			given);
	return r;
}

/* Once listening: the timers and signals of the loop, what the service manager is told, the
 * workers' facts asked of remat-train --info, and the queue an earlier rematd left. */
static void start_serving(srv_server *srv)
{
	uv_loop_t *loop = srv->loop;
	uv_timer_init(loop, &srv->shutdown_timer);
	srv->shutdown_timer.data = srv;
	uv_timer_init(loop, &srv->sweep_timer);
	srv->sweep_timer.data = srv;
	uv_timer_start(&srv->sweep_timer, on_sweep_timer, 1000, 1000);
	uv_unref((uv_handle_t *)&srv->sweep_timer);
	uv_signal_init(loop, &srv->sig_term);
	uv_signal_init(loop, &srv->sig_int);
	srv->sig_term.data = srv->sig_int.data = srv;
	uv_signal_start(&srv->sig_term, on_signal, SIGTERM);
	uv_signal_start(&srv->sig_int, on_signal, SIGINT);
	/* they alone must not keep the loop running once everything else has closed */
	uv_unref((uv_handle_t *)&srv->sig_term);
	uv_unref((uv_handle_t *)&srv->sig_int);
	srv_life_timers_start(srv);

	srv_log("%s listening on '%s'%s (pid %ld, state dir '%s', worker '%s', max jobs %d)",
		PROTO_VERSION, srv->socket_path, srv->listener.adopted ? ", a socket passed by "
		"the service manager (LISTEN_FDS)" : "", (long)getpid(), srv->state_dir,
		srv->worker_path, srv->max_jobs);
	if (srv_notify_enabled(&srv->notify))
		srv_log("notifying the service manager at '%s'", srv->notify.name);
	srv_job_schedule(srv); /* queued jobs an earlier rematd left */
}

static uv_timer_t info_wait; /* bounds the first start's wait for remat-train --info */

static void on_info_wait(uv_timer_t *t)
{
	(void)t; /* it only wakes the loop: the wait is over */
}

/* What the workers run, asked of a worker (this process never computes): what the same
 * binary said before (STATE_DIR/worker-info.json) serves at once while it is asked again;
 * without that, the answer is awaited, at most SRV_INFO_WAIT_MS, before serving, so that
 * even the first daemon-info needs no wait. */
static void learn_worker_info(srv_server *srv)
{
	static const char *const info_args[] = {"--info", NULL};
	char ierr[256];
	srv->worker_info = srv_store_worker_info(srv, srv->worker_path);
	if (srv_helper_run(srv, "info", info_args, NULL, NULL, SRV_INFO_MS, on_worker_info, NULL,
		ierr, sizeof ierr) < 0) {
		srv_log("cannot learn what the workers run: %s", ierr);
		srv_fmt(srv->worker_info_err, sizeof srv->worker_info_err, "unknown: %s", ierr);
	}
	if (srv->worker_info || srv->worker_info_err[0])
		return;
	uv_timer_init(srv->loop, &info_wait);
	uv_timer_start(&info_wait, on_info_wait, SRV_INFO_WAIT_MS, 0);
	while (!srv->worker_info && !srv->worker_info_err[0] &&
		uv_is_active((uv_handle_t *)&info_wait))
		uv_run(srv->loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&info_wait, NULL);
	uv_run(srv->loop, UV_RUN_NOWAIT); /* its close */
}

enum { OPT_SOCKET = 256, OPT_GROUP, OPT_STATE_DIR, OPT_MAX_JOBS, OPT_WORKER, OPT_MPIRUN,
	OPT_MEMORY, OPT_STOP_TIMEOUT,
	OPT_IDLE_TIMEOUT, OPT_STALL_TIMEOUT, OPT_FOREGROUND, OPT_VERSION, OPT_HELP };

/* An integer option in lo..hi, or -1 after printing why. */
static long int_option(const char *name, const char *arg, long lo, long hi)
{
	char *end;
	errno = 0;
	long n = strtol(arg, &end, 10);
	if (errno || end == arg || *end || n < lo || n > hi) {
		fprintf(stderr, "rematd: --%s must be %ld..%ld, not '%.32s'\n", name, lo, hi, arg);
		return -1;
	}
	return n;
}

/* The paths the command line gave (NULL: not given). */
typedef struct opt_paths {
	const char *sock, *state, *worker, *mpirun;
} opt_paths;

/* srv's paths from those given, absolute, and the defaults of the others (the socket's is
 * chosen in main: a passed socket needs none). 0, or 1 with err. */
static int set_paths(srv_server *srv, const opt_paths *p, char *err)
{
	if (p->sock && path_absolute(srv->socket_path, sizeof srv->socket_path, p->sock) < 0) {
		snprintf(err, ERR_LEN, "socket path too long");
		return 1;
	}
	if (p->state ? path_absolute(srv->state_dir, sizeof srv->state_dir, p->state) < 0
		     : default_state_dir(srv->state_dir, sizeof srv->state_dir, err) < 0) {
		if (!err[0])
			snprintf(err, ERR_LEN, "state directory path too long");
		return 1;
	}
	/* a relative worker path would be looked up in the job's directory, the worker's cwd */
	if (p->worker && strchr(p->worker, '/')) {
		if (path_absolute(srv->worker_path, sizeof srv->worker_path, p->worker) < 0) {
			snprintf(err, ERR_LEN, "worker path too long");
			return 1;
		}
	} else if (p->worker) {
		path_join(srv->worker_path, sizeof srv->worker_path, p->worker, "");
	} else {
		default_worker(srv->worker_path, sizeof srv->worker_path);
	}
	/* data parallel jobs: --mpirun, or mpirun on PATH ("" none: such jobs are refused) */
	if (p->mpirun && path_absolute(srv->mpirun_path, sizeof srv->mpirun_path,
		p->mpirun) < 0) {
		snprintf(err, ERR_LEN, "mpirun path too long");
		return 1;
	}
	if (!p->mpirun)
		find_on_path("mpirun", srv->mpirun_path, sizeof srv->mpirun_path);
	return 0;
}

/* Fills srv from the command line; 0, 1 (error in err) or 2 (bad usage, printed). */
static int parse_options(srv_server *srv, int argc, char **argv, char *err)
{
	static const struct option opts[] = {
		{"socket", required_argument, NULL, OPT_SOCKET},
		{"group", required_argument, NULL, OPT_GROUP},
		{"state-dir", required_argument, NULL, OPT_STATE_DIR},
		{"max-jobs", required_argument, NULL, OPT_MAX_JOBS},
		{"memory", required_argument, NULL, OPT_MEMORY},
		{"worker", required_argument, NULL, OPT_WORKER},
		{"mpirun", required_argument, NULL, OPT_MPIRUN},
		{"stop-timeout", required_argument, NULL, OPT_STOP_TIMEOUT},
		{"idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT},
		{"stall-timeout", required_argument, NULL, OPT_STALL_TIMEOUT},
		{"foreground", no_argument, NULL, OPT_FOREGROUND},
		{"version", no_argument, NULL, OPT_VERSION},
		{"help", no_argument, NULL, OPT_HELP},
		{NULL, 0, NULL, 0},
	};
	opt_paths p = {NULL, NULL, NULL, NULL};
	int o;
	long n;
	srv->max_jobs = 1;
	srv->stop_timeout_s = SRV_STOP_TIMEOUT_S;
	srv->idle_timeout_s = SRV_IDLE_TIMEOUT_S;
	srv->stall_timeout_s = SRV_STALL_TIMEOUT_S;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case OPT_SOCKET: p.sock = optarg; break;
		case OPT_STATE_DIR: p.state = optarg; break;
		case OPT_WORKER: p.worker = optarg; break;
		case OPT_MPIRUN: p.mpirun = optarg; break;
		case OPT_FOREGROUND: break; /* the only mode */
		case OPT_GROUP:
			if (parse_group(optarg, &srv->group, err) < 0)
				return 1;
			srv->has_group = 1;
			break;
		case OPT_MAX_JOBS:
			if ((n = int_option("max-jobs", optarg, 1, MAX_JOBS_LIMIT)) < 0)
				return 2;
			srv->max_jobs = (int)n;
			break;
		case OPT_MEMORY:
			if (srv_pool_init(srv, optarg, srv_worker_request, srv_job_schedule, err,
				    ERR_LEN) < 0)
				return 1;
			break;
		case OPT_STOP_TIMEOUT:
			if ((n = int_option("stop-timeout", optarg, 0, STOP_TIMEOUT_LIMIT)) < 0)
				return 2;
			srv->stop_timeout_s = (int)n;
			break;
		case OPT_IDLE_TIMEOUT:
			if ((n = int_option("idle-timeout", optarg, 0, STOP_TIMEOUT_LIMIT)) < 0)
				return 2;
			srv->idle_timeout_s = (int)n;
			break;
		case OPT_STALL_TIMEOUT:
			if ((n = int_option("stall-timeout", optarg, 0, STOP_TIMEOUT_LIMIT)) < 0)
				return 2;
			srv->stall_timeout_s = (int)n;
			break;
		case OPT_VERSION:
			printf("rematd %s (protocol %d)\n", PROTO_VERSION, PROTO_PROTOCOL);
			exit(0);
		case OPT_HELP:
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	return set_paths(srv, &p, err);
}

static srv_server server; /* large (its read buffer): static, and one per process anyway */

/* A start that failed before serving: err said, and told the service manager when tell;
 * a passed socket closed. Returns main's exit status, 1. */
static int start_failed(srv_server *srv, const char *err, int tell, int passed_fd)
{
	fprintf(stderr, "rematd: %s\n", err);
	if (tell)
		srv_life_notify(srv, "STATUS=cannot start: %s", err);
	srv_notify_free(&srv->notify);
	if (passed_fd >= 0)
		close(passed_fd);
	return 1;
}

/* Before the loop: the service manager's variables, the socket it passed or the default
 * one, the state directory and the job table, the loop. 0, or -1 with err (*tell: whether
 * the service manager is to hear it). */
static int start_up(srv_server *srv, uv_loop_t *loop, int *passed_fd, int *tell, char *err)
{
	char note[ERR_LEN];
	/* a bad NOTIFY_SOCKET or WATCHDOG_USEC is the manager's problem, not a reason to
	 * refuse to serve: said, and the rest goes on without it */
	if (srv_notify_init(&srv->notify, err, ERR_LEN) < 0)
		srv_log("%s: ignored", err);
	*tell = 1;
	if (srv_listen_fds(passed_fd, note, sizeof note, err, ERR_LEN) < 0)
		return -1;
	if (note[0])
		srv_log("%s", note);
	if (*passed_fd < 0 && !srv->socket_path[0] &&
		default_socket(srv->socket_path, sizeof srv->socket_path, err) < 0) {
		if (!err[0])
			snprintf(err, ERR_LEN, "socket path too long");
		*tell = 0;
		return -1;
	}
	srv->uid = geteuid();
	srv->started_ns = uv_hrtime();
	if (mkdir_p(srv->state_dir, STATE_DIR_MODE) < 0) {
		srv_fmt(err, ERR_LEN, "cannot create state directory '%s': %s", srv->state_dir,
			strerror(errno));
		return -1;
	}
	if (srv_job_table_init(srv, err, ERR_LEN) < 0 || srv_store_load(srv, err, ERR_LEN) < 0)
		return -1;
	int r = uv_loop_init(loop);
	if (r < 0) {
		snprintf(err, ERR_LEN, "cannot create the event loop: %s", uv_strerror(r));
		return -1;
	}
	srv->loop = loop;
	return 0;
}

/* Serves until the shutdown ends, then closes everything: main's exit status (0, or 1 when
 * the socket could not be served or a handle was left open). */
static int serve(srv_server *srv, int passed_fd, char *err)
{
	int rc = 1, signals = 0;
	learn_worker_info(srv);
	if (listen_socket(srv, passed_fd, err, ERR_LEN) < 0) {
		fprintf(stderr, "rematd: %s\n", err);
		srv_life_notify(srv, "STATUS=cannot start: %s", err);
		srv_helper_kill_all(srv, "the daemon could not start");
		goto out;
	}
	start_serving(srv);
	signals = 1;
	/* serving from here on: connections queue in the backlog until the loop turns */
	srv_life_ready(srv);
	uv_run(srv->loop, UV_RUN_DEFAULT);
	rc = 0;
	srv_log("stopped");
out:
	if (signals) {
		uv_close((uv_handle_t *)&srv->sig_term, NULL);
		uv_close((uv_handle_t *)&srv->sig_int, NULL);
	}
	srv_life_timers_close(srv);
	/* let every close callback run, then check nothing was left open */
	uv_run(srv->loop, UV_RUN_DEFAULT);
	srv_listen_release(&srv->listener);
	srv_job_table_free(srv);
	json_decref(srv->worker_info);
	/* the connections are gone: nobody is answered, the waiters are freed */
	srv_conn_answer_waiters(srv, &srv->info_waiters, NULL, PROTO_ERR_INTERNAL, NULL);
	srv_conn_answer_waiters(srv, &srv->shutdown_waiters, NULL, PROTO_ERR_INTERNAL, NULL);
	if (uv_loop_close(srv->loop) != 0) {
		srv_log("BUG: handles still open at exit");
		rc = 1;
	}
	srv_notify_free(&srv->notify);
	return rc;
}

int main(int argc, char **argv)
{
	srv_server *srv = &server;
	uv_loop_t loop;
	char err[ERR_LEN] = "";
	int passed_fd = -1, tell = 0;
	srv->state_d.fd = srv->jobs_d.fd = -1; /* closed until srv_job_table_init opens them */
	srv->on_request = srv_cmd_handle;
	srv->on_jobs_changed = srv_status_update;
	srv->on_worker_reaped = srv_shutdown_progress;
	srv->on_save_failed = srv_shutdown_save_failed;

	/* jansson's hash seed before any thread exists (OpenBLAS may start some) */
	json_object_seed(0);
	/* a client that hangs up mid-write must cost an EPIPE, not the daemon */
	signal(SIGPIPE, SIG_IGN);

	int r = parse_options(srv, argc, argv, err);
	if (r != 0) {
		if (r == 1)
			fprintf(stderr, "rematd: %s\n", err);
		return r;
	}
	if (start_up(srv, &loop, &passed_fd, &tell, err) < 0)
		return start_failed(srv, err, tell, passed_fd);
	return serve(srv, passed_fd, err);
}
