/* test_systemd.c - rematd under a service manager: socket activation (LISTEN_FDS) and the
 * notification protocol (NOTIFY_SOCKET, WATCHDOG_USEC), without systemd as PID 1.
 *
 * What it covers: daemon/srv_notify.c's address and watchdog parsing and a datagram sent
 * for real (path and '@' abstract names); the real rematd started through
 * systemd-socket-activate (the socket adopted, daemon-info on it, the adoption logged,
 * LISTEN_* and NOTIFY_SOCKET gone from a worker's environment, the socket left to its
 * owner at exit); a bad passed descriptor of every kind (datagram, not a socket, not
 * listening, not AF_UNIX, closed, two of them, garbage in LISTEN_FDS/LISTEN_PID) refused
 * with exit 1 and a message naming the problem; variables meant for another pid ignored;
 * the datagrams rematd sends to a socket this test binds: READY=1, STATUS= with a job
 * (at once when its state changes, and its steps as a real worker trains), WATCHDOG=1 at
 * half of WATCHDOG_USEC (and none when WATCHDOG_PID is another process), STOPPING=1 and
 * EXTEND_TIMEOUT_USEC= repeated while a worker outlives SIGTERM.
 * Not here: the unit files (tests/systemd/verify.sh, run by make test before this runner).
 * The binaries come from REMATD; scratch files go to REMAT_TMP.
 */
#include "tests.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <unistd.h>

#include "daemon/srv_notify.h"
#include "t_daemon.h"

#define TS_DGRAM_MAX 4096      /* the longest notification read */
#define TS_WATCHDOG_USEC 200000 /* WATCHDOG_USEC given: WATCHDOG=1 every 100 ms */
#define TS_WATCHDOGS 3         /* WATCHDOG=1 datagrams awaited */
#define TS_QUIET_MS 700        /* no WATCHDOG=1 this long when it is not ours (7 periods) */
#define TS_EXTEND_MS 9000      /* the second EXTEND_TIMEOUT_USEC= comes within this (5 s
				* period, on a busy machine) */
#define TS_MAX_ENV 8           /* environment assignments for one spawned daemon */
#define TS_STEP_MS 30000       /* a real worker's steps show in STATUS= within this (under
				* the test case's timeout, so a failure says what came) */
#define TS_ACTIVATE "systemd-socket-activate" /* from Debian's systemd package */

/* ---- a notification socket, as the service manager has one ---- */

typedef struct ts_notify {
	int fd;                    /* bound datagram socket */
	char name[108];            /* NOTIFY_SOCKET's value: a path or "@name" */
	char seen[8192];           /* every datagram read so far, for failure messages */
} ts_notify;

static void ts_notify_open(ts_notify *n, const char *name)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	socklen_t len;
	memset(n, 0, sizeof *n);
	ck_assert_uint_lt(strlen(name), sizeof sun.sun_path);
	snprintf(n->name, sizeof n->name, "%s", name);
	memcpy(sun.sun_path, name, strlen(name));
	if (name[0] == '@') {
		sun.sun_path[0] = '\0';
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name));
	} else {
		len = (socklen_t)sizeof sun;
	}
	n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(n->fd, 0);
	ck_assert_msg(bind(n->fd, (struct sockaddr *)&sun, len) == 0, "bind %s: %s", name,
		strerror(errno));
}

/* The next datagram as text (static buffer), or NULL after ms (0: only one already
 * queued). */
static const char *ts_notify_recv(ts_notify *n, int ms)
{
	static char buf[TS_DGRAM_MAX + 1];
	long end = td_ms() + ms;
	for (;;) {
		long left = end - td_ms();
		struct pollfd p = {.fd = n->fd, .events = POLLIN};
		int r = poll(&p, 1, left > 0 ? (int)left : 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return NULL;
		ssize_t got = recv(n->fd, buf, TS_DGRAM_MAX, 0);
		if (got < 0 && errno == EINTR)
			continue;
		ck_assert_msg(got >= 0, "recv: %s", strerror(errno));
		buf[got] = '\0';
		size_t used = strlen(n->seen);
		snprintf(n->seen + used, sizeof n->seen - used, "[%s] ", buf);
		return buf;
	}
}

/* Reads datagrams until one holds the line `line` (a whole "KEY=VALUE", or a prefix of
 * one when it ends in '*'); returns that datagram (static). Fails the test after ms (0:
 * it must be queued already). */
static const char *ts_notify_wait(ts_notify *n, const char *line, int ms, const char *log)
{
	size_t len = strlen(line);
	int prefix = len > 0 && line[len - 1] == '*';
	len -= (size_t)prefix;
	long end = td_ms() + ms;
	for (;;) {
		long left = end - td_ms();
		const char *m = ts_notify_recv(n, left > 0 ? (int)left : 0);
		ck_assert_msg(m != NULL, "no '%s' within %d ms; received: %s\nrematd's log:\n%s",
			line, ms, n->seen, td_slurp(log));
		/* line by line: "WATCHDOG=1" must not match "XWATCHDOG=10" */
		for (const char *p = m; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
			size_t l = strcspn(p, "\n");
			if (prefix ? l >= len && strncmp(p, line, len) == 0 :
				     l == len && strncmp(p, line, len) == 0)
				return m;
		}
	}
}

/* The value of KEY= in a datagram, or NULL (static). */
static const char *ts_field(const char *msg, const char *key)
{
	static char val[TS_DGRAM_MAX];
	size_t k = strlen(key);
	for (const char *p = msg; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, key, k) == 0 && p[k] == '=') {
			snprintf(val, sizeof val, "%.*s", (int)strcspn(p + k + 1, "\n"), p + k + 1);
			return val;
		}
	}
	return NULL;
}

static void ts_notify_close(ts_notify *n)
{
	close(n->fd);
	if (n->name[0] == '/')
		unlink(n->name);
}

/* ---- spawning rematd with a prepared environment and fd 3 ---- */

typedef enum ts_fd3 {
	FD3_KEEP,        /* whatever the test process has there */
	FD3_LISTENING,   /* an AF_UNIX stream socket that listens (unnamed dir/fd3.sock) */
	FD3_DGRAM,       /* an AF_UNIX datagram socket */
	FD3_UNLISTENED,  /* an AF_UNIX stream socket that does not listen */
	FD3_INET,        /* an AF_INET stream socket that listens */
	FD3_DEVNULL,     /* /dev/null: not a socket */
	FD3_CLOSED,      /* nothing */
} ts_fd3;

typedef struct ts_spawn {
	const char *env[TS_MAX_ENV]; /* "NAME=VALUE" set in the child; NULL-terminated */
	const char *own_pid[2];      /* variables set to the child's pid (the pid rematd will
				      * have: exec keeps it), e.g. LISTEN_PID; NULL-terminated */
	ts_fd3 fd3;                  /* what the child has at fd 3 when it execs */
} ts_spawn;

/* Puts a socket of the given kind at fd 3 in the child; returns -1 on failure. */
static int ts_child_fd3(const td_daemon *d, ts_fd3 kind)
{
	int fd = -1, n;
	char path[700];
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	switch (kind) {
	case FD3_KEEP:
		return 0;
	case FD3_CLOSED:
		close(3);
		return 0;
	case FD3_DEVNULL:
		fd = open("/dev/null", O_RDWR);
		break;
	case FD3_DGRAM:
		fd = socket(AF_UNIX, SOCK_DGRAM, 0);
		break;
	case FD3_UNLISTENED:
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		break;
	case FD3_INET:
		/* listen(2) on an unbound socket binds an ephemeral port: no address needed */
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd >= 0 && listen(fd, 1) < 0)
			return -1;
		break;
	case FD3_LISTENING:
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		n = snprintf(path, sizeof path, "%s/fd3.sock", d->dir);
		if (n < 0 || (size_t)n >= sizeof sun.sun_path)
			return -1;
		memcpy(sun.sun_path, path, (size_t)n + 1);
		if (fd >= 0 && (bind(fd, (struct sockaddr *)&sun, sizeof sun) < 0 ||
			listen(fd, 1) < 0))
			return -1;
		break;
	}
	if (fd < 0)
		return -1;
	if (fd != 3) {
		if (dup2(fd, 3) < 0)
			return -1;
		close(fd);
	}
	return 0;
}

/* Forks and execs argv (argv[0] looked up on PATH) with stdout and stderr to d->log and
 * the setup of s; returns the pid, which is the daemon's (systemd-socket-activate execs
 * in place). The child dies with the test process. */
static pid_t ts_spawn_daemon(const td_daemon *d, const ts_spawn *s, char *const argv[])
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid > 0)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	int log = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
	int null = open("/dev/null", O_RDONLY);
	if (log < 0 || null < 0)
		_exit(127);
	dup2(null, 0);
	dup2(log, 1);
	dup2(log, 2);
	/* they may sit at fd 3, which is the test's to set */
	if (log > 2)
		close(log);
	if (null > 2)
		close(null);
	for (int i = 0; s->env[i]; i++)
		putenv((char *)s->env[i]);
	char pid_text[32];
	snprintf(pid_text, sizeof pid_text, "%ld", (long)getpid());
	for (int i = 0; s->own_pid[i]; i++)
		setenv(s->own_pid[i], pid_text, 1);
	if (ts_child_fd3(d, s->fd3) < 0) {
		fprintf(stderr, "test: cannot set up fd 3: %s\n", strerror(errno));
		_exit(127);
	}
	execvp(argv[0], argv);
	fprintf(stderr, "test: cannot exec %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* SIGTERM; rematd must exit 0 within T_STOP_MS. */
static void ts_stop(td_daemon *d)
{
	ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
	int st = td_wait_pid(d->pid, T_STOP_MS);
	if (st < 0)
		kill(d->pid, SIGKILL);
	ck_assert_msg(st == 0, "rematd exited with %d after SIGTERM:\n%s", st, td_slurp(d->log));
	d->pid = 0;
}

/* Waits for path to exist and hold a line; returns its contents (td_slurp's buffer). */
static const char *ts_wait_file(const char *path, const td_daemon *d)
{
	long end = td_ms() + T_READ_MS;
	struct stat st;
	while (stat(path, &st) < 0 || st.st_size == 0) {
		ck_assert_msg(td_ms() < end, "%s never written; rematd's log:\n%s", path,
			td_slurp(d->log));
		td_sleep_ms(20);
	}
	td_sleep_ms(50); /* the rest of env's output */
	return td_slurp(path);
}

/* The worker's environment env (env(1)'s output) holds mark, the test's own variable that
 * rematd passes on, and none of the service manager's. */
static void ts_check_worker_env(const char *env, const char *mark)
{
	static const char *const gone[] = {"LISTEN_FDS=", "LISTEN_PID=", "LISTEN_FDNAMES=",
		"NOTIFY_SOCKET=", "WATCHDOG_USEC=", "WATCHDOG_PID="};
	ck_assert_msg(strstr(env, mark) != NULL, "no %s in the worker's environment: %s", mark,
		env);
	for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++) {
		const char *p = strstr(env, gone[i]);
		ck_assert_msg(!(p && (p == env || p[-1] == '\n')), "the worker inherited %s",
			gone[i]);
	}
}

/* ---- srv_notify.c alone ---- */

START_TEST(test_notify_parse_addr_path)
{
	struct sockaddr_un a;
	socklen_t len = 0;
	char err[256] = "";
	ck_assert_int_eq(srv_notify_parse_addr("/run/systemd/notify", &a, &len, err,
		sizeof err), 0);
	ck_assert_int_eq(a.sun_family, AF_UNIX);
	ck_assert_str_eq(a.sun_path, "/run/systemd/notify");
	/* the path and its NUL */
	ck_assert_uint_eq(len, offsetof(struct sockaddr_un, sun_path) + 20);
}
END_TEST

START_TEST(test_notify_parse_addr_abstract)
{
	struct sockaddr_un a;
	socklen_t len = 0;
	char err[256] = "";
	ck_assert_int_eq(srv_notify_parse_addr("@sd/notify", &a, &len, err, sizeof err), 0);
	ck_assert_int_eq(a.sun_path[0], '\0');
	ck_assert_int_eq(memcmp(a.sun_path + 1, "sd/notify", 9), 0);
	/* the leading NUL and the name, nothing after: a trailing NUL would be another name */
	ck_assert_uint_eq(len, offsetof(struct sockaddr_un, sun_path) + 10);
}
END_TEST

START_TEST(test_notify_parse_addr_bad)
{
	struct sockaddr_un a;
	socklen_t len;
	char err[256], longname[200];
	memset(longname, 'x', sizeof longname - 1);
	longname[0] = '/';
	longname[sizeof longname - 1] = '\0';
	static const struct {
		const char *value, *want;
	} bad[] = {
		{"", "empty"}, {"run/notify", "neither an absolute path"}, {"@", "names no"},
		{"x", "neither"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		ck_assert_int_eq(srv_notify_parse_addr(bad[i].value, &a, &len, err, sizeof err),
			-1);
		ck_assert_msg(strstr(err, bad[i].want) != NULL, "'%s': %s", bad[i].value, err);
	}
	ck_assert_int_eq(srv_notify_parse_addr(longname, &a, &len, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "too long") != NULL, "%s", err);
	longname[0] = '@';
	ck_assert_int_eq(srv_notify_parse_addr(longname, &a, &len, err, sizeof err), -1);
	/* the longest that fits: 107 bytes, as a path (NUL inside) or an abstract name */
	longname[107] = '\0';
	ck_assert_int_eq(srv_notify_parse_addr(longname, &a, &len, err, sizeof err), 0);
	ck_assert_uint_eq(len, sizeof a - 1);
	longname[0] = '/';
	ck_assert_int_eq(srv_notify_parse_addr(longname, &a, &len, err, sizeof err), 0);
	ck_assert_uint_eq(len, sizeof a);
}
END_TEST

START_TEST(test_notify_parse_watchdog)
{
	uint64_t us = 7;
	char err[256] = "";
	ck_assert_int_eq(srv_notify_parse_watchdog(NULL, NULL, 100, &us, err, sizeof err), 0);
	ck_assert_uint_eq(us, 0);
	ck_assert_int_eq(srv_notify_parse_watchdog("30000000", NULL, 100, &us, err, sizeof err),
		1);
	ck_assert_uint_eq(us, 30000000);
	ck_assert_int_eq(srv_notify_parse_watchdog("200000", "100", 100, &us, err, sizeof err),
		1);
	ck_assert_uint_eq(us, 200000);
	/* another process's watchdog: none for us, and no error */
	ck_assert_int_eq(srv_notify_parse_watchdog("200000", "101", 100, &us, err, sizeof err),
		0);
	ck_assert_uint_eq(us, 0);
	static const char *const bad_usec[] = {"", "0", "-5", "1e6", "12x", " 5",
		"99999999999999999999999"};
	for (size_t i = 0; i < sizeof bad_usec / sizeof bad_usec[0]; i++) {
		err[0] = '\0';
		ck_assert_int_eq(srv_notify_parse_watchdog(bad_usec[i], NULL, 100, &us, err,
			sizeof err), -1);
		ck_assert_msg(strstr(err, "WATCHDOG_USEC") != NULL, "'%s': %s", bad_usec[i], err);
	}
	ck_assert_int_eq(srv_notify_parse_watchdog("5", "pid", 100, &us, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "WATCHDOG_PID") != NULL, "%s", err);
	ck_assert_int_eq(srv_notify_parse_watchdog("5", "0", 100, &us, err, sizeof err), -1);
}
END_TEST

/* A datagram really arrives at an abstract name, whole; the variables are gone after. */
START_TEST(test_notify_send_abstract)
{
	ts_notify r;
	char name[64], pid[32], err[256];
	snprintf(name, sizeof name, "@remat-test-%ld-%ld", (long)getpid(), td_ms());
	ts_notify_open(&r, name);
	snprintf(pid, sizeof pid, "%ld", (long)getpid());
	setenv("NOTIFY_SOCKET", name, 1);
	setenv("WATCHDOG_USEC", "400000", 1);
	setenv("WATCHDOG_PID", pid, 1);
	srv_notify n;
	ck_assert_int_eq(srv_notify_init(&n, err, sizeof err), 0);
	ck_assert(srv_notify_enabled(&n));
	ck_assert_uint_eq(n.watchdog_usec, 400000);
	ck_assert_ptr_null(getenv("NOTIFY_SOCKET"));
	ck_assert_ptr_null(getenv("WATCHDOG_USEC"));
	ck_assert_ptr_null(getenv("WATCHDOG_PID"));
	ck_assert_int_eq(srv_notify_send(&n, "READY=1\nSTATUS=idle"), 0);
	const char *m = ts_notify_recv(&r, T_READ_MS);
	ck_assert_ptr_nonnull(m);
	ck_assert_str_eq(m, "READY=1\nSTATUS=idle");
	/* close-on-exec: no worker inherits it */
	ck_assert_int_ne(fcntl(n.fd, F_GETFD) & FD_CLOEXEC, 0);
	srv_notify_free(&n);
	srv_notify_free(&n);
	ts_notify_close(&r);
}
END_TEST

/* A malformed NOTIFY_SOCKET is an error message, notifications off, sends harmless. */
START_TEST(test_notify_init_bad)
{
	char err[256];
	setenv("NOTIFY_SOCKET", "relative/notify", 1);
	unsetenv("WATCHDOG_USEC");
	srv_notify n;
	ck_assert_int_eq(srv_notify_init(&n, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "NOTIFY_SOCKET") != NULL, "%s", err);
	ck_assert(!srv_notify_enabled(&n));
	ck_assert_int_eq(srv_notify_send(&n, "READY=1"), 0);
	ck_assert_ptr_null(getenv("NOTIFY_SOCKET"));
	srv_notify_free(&n);
	/* unset: off, and no error */
	ck_assert_int_eq(srv_notify_init(&n, err, sizeof err), 0);
	ck_assert(!srv_notify_enabled(&n));
	ck_assert_uint_eq(n.watchdog_usec, 0);
}
END_TEST

/* ---- socket activation ---- */

/* Through systemd-socket-activate, as rematd.socket would start it: the passed socket is
 * served, daemon-info names it, the workers do not see the variables, and at exit the
 * socket file is left to its owner. */
START_TEST(test_systemd_socket_activate)
{
	td_daemon d;
	td_daemon_paths(&d);
	char env_path[700], body[800], other[700], lock[700];
	snprintf(env_path, sizeof env_path, "%s/worker.env", d.dir);
	snprintf(body, sizeof body, "env > '%s'; exec sleep 30", env_path);
	char *worker = td_script(&d, "worker.sh", body);
	/* --socket names another path: the passed socket wins, and this one is never made */
	snprintf(other, sizeof other, "%s/unused.sock", d.dir);
	char *const argv[] = {TS_ACTIVATE, "-l", d.sock, "-E", "REMAT_TEST_MARK=1",
		(char *)t_env("REMATD"), "--socket", other, "--state-dir", d.state, "--worker",
		worker, "--stop-timeout", "5", NULL};
	ts_spawn s = {.fd3 = FD3_KEEP};
	d.pid = ts_spawn_daemon(&d, &s, argv);

	/* systemd-socket-activate listens first and execs rematd at the first connection */
	td_wait_listening(&d);
	td_conn c = td_open(&d);
	json_t *r = td_request(&c, "{\"execute\":\"daemon-info\"}");
	json_t *ret = td_expect_return(r);
	ck_assert_str_eq(td_str(ret, "socket"), d.sock);
	ck_assert_int_eq(json_integer_value(json_object_get(ret, "pid")), d.pid);
	json_decref(r);
	const char *log = td_slurp(d.log);
	ck_assert_msg(strstr(log, "a socket passed by the service manager (LISTEN_FDS)") != NULL,
		"no adoption in the log:\n%s", log);
	ck_assert_msg(strstr(log, "--socket '") != NULL && strstr(log, "' ignored") != NULL,
		"the ignored --socket is not said:\n%s", log);

	/* a worker's environment: the test's own variable, none of the manager's */
	td_job_start(&c, T_TINY_SPEC, NULL);
	ts_check_worker_env(ts_wait_file(env_path, &d), "REMAT_TEST_MARK=1");

	ts_stop(&d);
	td_close(&c);
	struct stat sb;
	ck_assert_msg(lstat(d.sock, &sb) == 0 && S_ISSOCK(sb.st_mode),
		"rematd removed the socket it was passed (its owner removes it)");
	ck_assert_msg(lstat(other, &sb) < 0 && errno == ENOENT, "--socket was bound too");
	snprintf(lock, sizeof lock, "%s.lock", d.sock);
	ck_assert_msg(lstat(lock, &sb) < 0 && errno == ENOENT, "a lock file beside a passed "
		"socket");
	free(worker);
}
END_TEST

/* Every kind of bad passed descriptor: exit 1 before binding anything, with a message that
 * names the problem. */
START_TEST(test_systemd_listen_fds_bad)
{
	static const struct {
		const char *fds, *pid; /* LISTEN_FDS; LISTEN_PID (NULL: the daemon's own) */
		ts_fd3 fd3;
		const char *want;      /* in the error */
	} cases[] = {
		{"1", NULL, FD3_DGRAM, "is a datagram socket, not a stream socket"},
		{"1", NULL, FD3_DEVNULL, "fd 3 is not a socket"},
		{"1", NULL, FD3_UNLISTENED, "does not listen"},
		{"1", NULL, FD3_INET, "is not a Unix socket"},
		{"1", NULL, FD3_CLOSED, "fd 3 is not open"},
		{"2", NULL, FD3_LISTENING, "LISTEN_FDS=2: rematd serves exactly one socket"},
		{"one", NULL, FD3_LISTENING, "LISTEN_FDS 'one' is not a number"},
		{"-1", NULL, FD3_LISTENING, "LISTEN_FDS '-1' is not a number"},
		{"1", "12ab", FD3_LISTENING, "LISTEN_PID '12ab' is not a process id"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		td_daemon d;
		td_daemon_paths(&d);
		char fds[64], pid[64];
		snprintf(fds, sizeof fds, "LISTEN_FDS=%s", cases[i].fds);
		snprintf(pid, sizeof pid, "LISTEN_PID=%s", cases[i].pid ? cases[i].pid : "");
		ts_spawn s = {.env = {fds, cases[i].pid ? pid : NULL}, .fd3 = cases[i].fd3};
		if (!cases[i].pid)
			s.own_pid[0] = "LISTEN_PID";
		char *const argv[] = {(char *)t_env("REMATD"), "--socket", d.sock, "--state-dir",
			d.state, NULL};
		d.pid = ts_spawn_daemon(&d, &s, argv);
		int st = td_wait_pid(d.pid, T_START_MS);
		if (st < 0)
			kill(d.pid, SIGKILL);
		const char *log = td_slurp(d.log);
		ck_assert_msg(st == 1, "case %zu: exit %d, not 1:\n%s", i, st, log);
		ck_assert_msg(strstr(log, cases[i].want) != NULL, "case %zu: no '%s' in:\n%s", i,
			cases[i].want, log);
		struct stat sb;
		ck_assert_msg(lstat(d.sock, &sb) < 0, "case %zu: bound its own socket", i);
	}
}
END_TEST

/* Variables meant for another process (LISTEN_PID not ours): ignored, said, and rematd
 * binds --socket as if started by hand. */
START_TEST(test_systemd_listen_pid_other)
{
	td_daemon d;
	td_daemon_paths(&d);
	ts_spawn s = {.env = {"LISTEN_FDS=1", "LISTEN_PID=1"}, .fd3 = FD3_DGRAM};
	char *const argv[] = {(char *)t_env("REMATD"), "--socket", d.sock, "--state-dir",
		d.state, NULL};
	d.pid = ts_spawn_daemon(&d, &s, argv);
	td_wait_listening(&d);
	td_alive(&d);
	const char *log = td_slurp(d.log);
	ck_assert_msg(strstr(log, "LISTEN_FDS=1 is for pid 1, not for us") != NULL, "%s", log);
	ck_assert_msg(strstr(log, "service manager (LISTEN_FDS)") == NULL, "%s", log);
	td_daemon_stop(&d); /* its own socket: removed */
}
END_TEST

/* ---- notifications ---- */

/* A path NOTIFY_SOCKET: READY=1, STATUS= naming a job, and on SIGTERM, while the worker
 * does not stop, STOPPING=1 with EXTEND_TIMEOUT_USEC=, repeated until the stop timeout
 * kills it. */
START_TEST(test_systemd_notify_status_and_extend)
{
	td_daemon d;
	td_daemon_paths(&d);
	ts_notify n;
	char nsock[700], env_path[700], body[800], nenv[800];
	snprintf(nsock, sizeof nsock, "%s/notify", d.dir);
	ts_notify_open(&n, nsock);
	snprintf(env_path, sizeof env_path, "%s/worker.env", d.dir);
	/* a worker that never answers job-stop: only the stop timeout ends it */
	snprintf(body, sizeof body, "env > '%s'; exec sleep 60", env_path);
	char *worker = td_script(&d, "worker.sh", body);
	snprintf(nenv, sizeof nenv, "NOTIFY_SOCKET=%s", nsock);
	ts_spawn s = {.env = {nenv, "REMAT_TEST_MARK=2"}, .fd3 = FD3_KEEP};
	char *const argv[] = {(char *)t_env("REMATD"), "--socket", d.sock, "--state-dir",
		d.state, "--worker", worker, "--stop-timeout", "7", NULL};
	d.pid = ts_spawn_daemon(&d, &s, argv);

	const char *m = ts_notify_wait(&n, "READY=1", T_START_MS, d.log);
	ck_assert_msg(ts_field(m, "STATUS") != NULL, "READY=1 without STATUS=: %s", m);
	ck_assert_str_eq(ts_field(m, "STATUS"), "idle: no job running; 0 queued");
	/* READY=1 means serving: a connection succeeds at once */
	td_conn c = td_open(&d);
	const char *job = td_job_start(&c, T_TINY_SPEC, NULL);
	ck_assert_str_eq(job, "j1");
	/* sent when the job changed state, before the reply was written (not at the next
	 * periodic refresh): already queued here */
	m = ts_notify_wait(&n, "STATUS=1 job(s) running: j1 starting 0/1000000; 0 queued", 0,
		d.log);
	ts_check_worker_env(ts_wait_file(env_path, &d), "REMAT_TEST_MARK=2");

	ck_assert_int_eq(kill(d.pid, SIGTERM), 0);
	m = ts_notify_wait(&n, "STOPPING=1", T_READ_MS, d.log);
	const char *ext = ts_field(m, "EXTEND_TIMEOUT_USEC");
	ck_assert_msg(ext != NULL, "STOPPING=1 without EXTEND_TIMEOUT_USEC= while a worker "
		"saves: %s", m);
	ck_assert_msg(strtoull(ext, NULL, 10) >= 5000000ull, "extension %s us", ext);
	ck_assert_str_eq(ts_field(m, "STATUS"), "stopping: 1 worker(s) saving");
	/* the worker is still there after the first period: extended again */
	long t0 = td_ms();
	ts_notify_wait(&n, "EXTEND_TIMEOUT_USEC=*", TS_EXTEND_MS, d.log);
	ck_assert_msg(td_ms() - t0 >= 4000, "the extension came again after %ld ms, not one "
		"period", td_ms() - t0);
	int st = td_wait_pid(d.pid, T_STOP_MS);
	if (st < 0)
		kill(d.pid, SIGKILL);
	ck_assert_msg(st == 0, "rematd exited with %d:\n%s", st, td_slurp(d.log));
	td_close(&c);
	ts_notify_close(&n);
	free(worker);
}
END_TEST

/* With a real worker: STATUS= follows its steps (the periodic refresh), and SIGTERM
 * gives STOPPING=1 while it saves. */
START_TEST(test_systemd_notify_status_steps)
{
	td_daemon d;
	td_daemon_paths(&d);
	ts_notify n;
	char nsock[700], nenv[800];
	snprintf(nsock, sizeof nsock, "%s/notify", d.dir);
	ts_notify_open(&n, nsock);
	snprintf(nenv, sizeof nenv, "NOTIFY_SOCKET=%s", nsock);
	ts_spawn s = {.env = {nenv}, .fd3 = FD3_KEEP};
	char *const argv[] = {(char *)t_env("REMATD"), "--socket", d.sock, "--state-dir",
		d.state, "--worker", (char *)t_env("REMAT_TRAIN"), NULL};
	d.pid = ts_spawn_daemon(&d, &s, argv);
	ts_notify_wait(&n, "READY=1", T_START_MS, d.log);
	td_conn c = td_open(&d);
	td_job_start(&c, T_TINY_SPEC, NULL);
	static const char running[] = "STATUS=1 job(s) running: j1 running ";
	long end = td_ms() + TS_STEP_MS;
	int step = 0;
	while (step <= 0) {
		long left = end - td_ms();
		const char *m = ts_notify_wait(&n, "STATUS=*", left > 0 ? (int)left : 0, d.log);
		const char *p = strstr(m, running);
		if (p)
			step = atoi(p + sizeof running - 1);
	}
	ck_assert_int_eq(kill(d.pid, SIGTERM), 0);
	const char *m = ts_notify_wait(&n, "STOPPING=1", T_READ_MS, d.log);
	ck_assert_str_eq(ts_field(m, "STATUS"), "stopping: 1 worker(s) saving");
	int st = td_wait_pid(d.pid, T_STOP_MS);
	if (st < 0)
		kill(d.pid, SIGKILL);
	ck_assert_msg(st == 0, "rematd exited with %d:\n%s", st, td_slurp(d.log));
	td_close(&c);
	ts_notify_close(&n);
}
END_TEST

/* An abstract NOTIFY_SOCKET and a watchdog that is ours: WATCHDOG=1 every
 * WATCHDOG_USEC/2; on SIGTERM with no worker, STOPPING=1 and no extension. */
START_TEST(test_systemd_notify_abstract_watchdog)
{
	td_daemon d;
	td_daemon_paths(&d);
	ts_notify n;
	char name[64], nenv[128], wenv[64];
	snprintf(name, sizeof name, "@remat-test-%ld-%ld", (long)getpid(), td_ms());
	ts_notify_open(&n, name);
	snprintf(nenv, sizeof nenv, "NOTIFY_SOCKET=%s", name);
	snprintf(wenv, sizeof wenv, "WATCHDOG_USEC=%d", TS_WATCHDOG_USEC);
	ts_spawn s = {.env = {nenv, wenv}, .own_pid = {"WATCHDOG_PID"}, .fd3 = FD3_KEEP};
	char *const argv[] = {(char *)t_env("REMATD"), "--socket", d.sock, "--state-dir",
		d.state, NULL};
	d.pid = ts_spawn_daemon(&d, &s, argv);
	ts_notify_wait(&n, "READY=1", T_START_MS, d.log);
	long first = 0;
	for (int i = 0; i < TS_WATCHDOGS; i++) {
		ts_notify_wait(&n, "WATCHDOG=1", T_READ_MS, d.log);
		if (i == 0)
			first = td_ms();
	}
	/* two periods of WATCHDOG_USEC/2 = 100 ms at least (a timer never fires early; a
	 * busy machine may make it late, so no upper bound) */
	long span = td_ms() - first;
	ck_assert_msg(span >= 190, "%d WATCHDOG=1 within %ld ms: not every %d us / 2",
		TS_WATCHDOGS, span, TS_WATCHDOG_USEC);
	ck_assert_msg(strstr(td_slurp(d.log), "watchdog: WATCHDOG=1 every 100 ms") != NULL,
		"%s", td_slurp(d.log));
	ck_assert_int_eq(kill(d.pid, SIGTERM), 0);
	const char *m = ts_notify_wait(&n, "STOPPING=1", T_READ_MS, d.log);
	ck_assert_msg(ts_field(m, "EXTEND_TIMEOUT_USEC") == NULL, "extension with no worker: %s",
		m);
	int st = td_wait_pid(d.pid, T_STOP_MS);
	ck_assert_msg(st == 0, "rematd exited with %d:\n%s", st, td_slurp(d.log));
	ts_notify_close(&n);
}
END_TEST

/* WATCHDOG_PID names another process: READY=1, but never WATCHDOG=1. */
START_TEST(test_systemd_notify_watchdog_not_ours)
{
	td_daemon d;
	td_daemon_paths(&d);
	ts_notify n;
	char name[64], nenv[128], wenv[64];
	snprintf(name, sizeof name, "@remat-test-%ld-%ld", (long)getpid(), td_ms());
	ts_notify_open(&n, name);
	snprintf(nenv, sizeof nenv, "NOTIFY_SOCKET=%s", name);
	snprintf(wenv, sizeof wenv, "WATCHDOG_USEC=%d", TS_WATCHDOG_USEC);
	ts_spawn s = {.env = {nenv, wenv, "WATCHDOG_PID=1"}, .fd3 = FD3_KEEP};
	char *const argv[] = {(char *)t_env("REMATD"), "--socket", d.sock, "--state-dir",
		d.state, NULL};
	d.pid = ts_spawn_daemon(&d, &s, argv);
	ts_notify_wait(&n, "READY=1", T_START_MS, d.log);
	long end = td_ms() + TS_QUIET_MS;
	for (long left; (left = end - td_ms()) > 0;) {
		const char *m = ts_notify_recv(&n, (int)left);
		ck_assert_msg(!m || !strstr(m, "WATCHDOG=1"), "WATCHDOG=1 for another pid's "
			"watchdog: %s", m);
	}
	td_daemon_stop(&d);
	ts_notify_close(&n);
}
END_TEST

/* A malformed NOTIFY_SOCKET: said in the log, and the daemon serves all the same. */
START_TEST(test_systemd_notify_bad_socket)
{
	td_daemon d;
	td_daemon_paths(&d);
	ts_spawn s = {.env = {"NOTIFY_SOCKET=not/absolute"}, .fd3 = FD3_KEEP};
	char *const argv[] = {(char *)t_env("REMATD"), "--socket", d.sock, "--state-dir",
		d.state, NULL};
	d.pid = ts_spawn_daemon(&d, &s, argv);
	td_wait_listening(&d);
	td_alive(&d);
	const char *log = td_slurp(d.log);
	ck_assert_msg(strstr(log, "NOTIFY_SOCKET 'not/absolute' is neither an absolute path") &&
		strstr(log, "ignored"), "%s", log);
	td_daemon_stop(&d);
}
END_TEST

Suite *suite_systemd(void)
{
	Suite *s = suite_create("systemd");
	TCase *tc = tcase_create("notify-protocol");
	tcase_add_test(tc, test_notify_parse_addr_path);
	tcase_add_test(tc, test_notify_parse_addr_abstract);
	tcase_add_test(tc, test_notify_parse_addr_bad);
	tcase_add_test(tc, test_notify_parse_watchdog);
	tcase_add_test(tc, test_notify_send_abstract);
	tcase_add_test(tc, test_notify_init_bad);
	suite_add_tcase(s, tc);

	tc = tcase_create("activation");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_systemd_socket_activate);
	tcase_add_test(tc, test_systemd_listen_fds_bad);
	tcase_add_test(tc, test_systemd_listen_pid_other);
	suite_add_tcase(s, tc);

	tc = tcase_create("notify");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_systemd_notify_status_and_extend);
	tcase_add_test(tc, test_systemd_notify_status_steps);
	tcase_add_test(tc, test_systemd_notify_abstract_watchdog);
	tcase_add_test(tc, test_systemd_notify_watchdog_not_ours);
	tcase_add_test(tc, test_systemd_notify_bad_socket);
	suite_add_tcase(s, tc);
	return s;
}
