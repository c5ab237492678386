/* t_daemon.c - the rematd test helpers: the daemon as a child process, and a raw-protocol
 * client. See t_daemon.h. Not here: the tests themselves (test_daemon.c).
 */
#include "t_daemon.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests.h"

#define T_MAX_ARGS 24 /* arguments of one rematd command line here */

long td_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

void td_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ---- the daemon ---- */

char *td_slurp(const char *path)
{
	static char buf[1 << 16];
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : 0;
	buf[n > 0 ? n : 0] = '\0';
	if (fd >= 0)
		close(fd);
	return buf;
}

/* Runs rematd on the paths of d with extra arguments (NULL-terminated); returns its pid. */
pid_t td_daemon_exec(const td_daemon *d, const char *const *extra)
{
	const char *argv[T_MAX_ARGS];
	int n = 0;
	argv[n++] = t_env("REMATD");
	argv[n++] = "--socket";
	argv[n++] = d->sock;
	argv[n++] = "--state-dir";
	argv[n++] = d->state;
	for (int i = 0; extra && extra[i] && n < T_MAX_ARGS - 1; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* a failed or timed-out test must not leave a daemon behind */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		int log = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		int null = open("/dev/null", O_RDONLY);
		dup2(null, 0);
		dup2(log, 1);
		dup2(log, 2);
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "cannot exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

/* Waits up to ms for pid; its exit status, 128+signal, or -1 when still running. */
int td_wait_pid(pid_t pid, int ms)
{
	long end = td_ms() + ms;
	for (;;) {
		int st;
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
		ck_assert_msg(r == 0, "waitpid: %s", strerror(errno));
		if (td_ms() > end)
			return -1;
		td_sleep_ms(10);
	}
}

int td_connect(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	ck_assert_uint_lt(strlen(path), sizeof sun.sun_path);
	strcpy(sun.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Fresh paths under REMAT_TMP for a daemon. */
void td_daemon_paths(td_daemon *d)
{
	memset(d, 0, sizeof *d);
	snprintf(d->dir, sizeof d->dir, "%s/rdXXXXXX", t_env("REMAT_TMP"));
	ck_assert_msg(mkdtemp(d->dir) != NULL, "mkdtemp %s: %s", d->dir, strerror(errno));
	snprintf(d->sock, sizeof d->sock, "%s/sock", d->dir);
	snprintf(d->state, sizeof d->state, "%s/state", d->dir);
	snprintf(d->log, sizeof d->log, "%s/rematd.log", d->dir);
}

/* Starts rematd and waits until it accepts connections. */
void td_daemon_start(td_daemon *d, const char *const *extra)
{
	d->pid = td_daemon_exec(d, extra);
	td_wait_listening(d);
}

/* Waits until d->sock accepts a connection, failing if d->pid exits first. */
void td_wait_listening(const td_daemon *d)
{
	long end = td_ms() + T_START_MS;
	for (;;) {
		int fd = td_connect(d->sock);
		if (fd >= 0) {
			close(fd);
			return;
		}
		int st = td_wait_pid(d->pid, 0);
		ck_assert_msg(st < 0, "rematd exited with %d at start:\n%s", st, td_slurp(d->log));
		ck_assert_msg(td_ms() < end, "rematd does not listen on %s:\n%s", d->sock,
			td_slurp(d->log));
		td_sleep_ms(20);
	}
}

/* SIGTERM; rematd must exit 0 and leave no socket behind. */
void td_daemon_stop(td_daemon *d)
{
	ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
	int st = td_wait_pid(d->pid, T_STOP_MS);
	if (st < 0)
		kill(d->pid, SIGKILL);
	ck_assert_msg(st == 0, "rematd exited with %d after SIGTERM:\n%s", st, td_slurp(d->log));
	d->pid = 0;
	struct stat sb;
	ck_assert_msg(lstat(d->sock, &sb) < 0 && errno == ENOENT, "socket %s left behind",
		d->sock);
}

/* ---- the raw protocol ---- */

void td_send_raw(td_conn *c, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		ck_assert_msg(n > 0, "send: %s", strerror(errno));
		data += n;
		len -= (size_t)n;
	}
}

void td_send(td_conn *c, const char *line)
{
	td_send_raw(c, line, strlen(line));
	td_send_raw(c, "\n", 1);
}

/* The next line (malloc'd, without '\n'), or NULL at end of stream or after ms. */
char *td_read_line(td_conn *c, int ms)
{
	long end = td_ms() + ms;
	for (;;) {
		char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
		if (nl) {
			size_t n = (size_t)(nl - c->buf);
			char *line = malloc(n + 1);
			ck_assert_ptr_nonnull(line);
			memcpy(line, c->buf, n);
			line[n] = '\0';
			memmove(c->buf, nl + 1, c->len - n - 1);
			c->len -= n + 1;
			return line;
		}
		long left = end - td_ms();
		if (left <= 0)
			return NULL;
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		int r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return NULL;
		if (c->cap - c->len < 4096) {
			c->cap = c->cap ? c->cap * 2 : 65536;
			c->buf = realloc(c->buf, c->cap);
			ck_assert_ptr_nonnull(c->buf);
		}
		ssize_t n = read(c->fd, c->buf + c->len, c->cap - c->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return NULL; /* end of stream (or reset) */
		c->len += (size_t)n;
	}
}

json_t *td_read_msg(td_conn *c, int ms)
{
	char *line = td_read_line(c, ms);
	if (!line)
		return NULL;
	json_error_t e;
	json_t *o = json_loads(line, 0, &e);
	ck_assert_msg(o != NULL, "not JSON from rematd: %s", line);
	free(line);
	return o;
}

/* Connects and reads the greeting. */
td_conn td_open(const td_daemon *d)
{
	td_conn c = {.fd = td_connect(d->sock)};
	ck_assert_msg(c.fd >= 0, "connect %s: %s", d->sock, strerror(errno));
	json_t *g = td_read_msg(&c, T_READ_MS);
	ck_assert_msg(g != NULL, "no greeting");
	const char *role = json_string_value(json_object_get(json_object_get(g, "remat"), "role"));
	ck_assert_msg(role && strcmp(role, "daemon") == 0, "bad greeting");
	json_decref(g);
	return c;
}

void td_close(td_conn *c)
{
	close(c->fd);
	free(c->buf);
	memset(c, 0, sizeof *c);
}

/* The next reply (return or error), skipping events. */
json_t *td_reply(td_conn *c, int ms)
{
	for (;;) {
		json_t *o = td_read_msg(c, ms);
		ck_assert_msg(o != NULL, "no reply from rematd within %d ms", ms);
		if (!json_object_get(o, "event"))
			return o;
		json_decref(o);
	}
}

/* Sends a request line (printf-style) and returns the reply. */
json_t *td_request(td_conn *c, const char *fmt, ...)
{
	char line[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	td_send(c, line);
	return td_reply(c, T_READ_MS);
}

/* Asserts reply is an error of class cls; returns its description. */
const char *td_expect_error(json_t *reply, const char *cls)
{
	json_t *err = json_object_get(reply, "error");
	char *text = json_dumps(reply, JSON_COMPACT);
	ck_assert_msg(err != NULL, "expected %s, got %s", cls, text);
	const char *got = json_string_value(json_object_get(err, "class"));
	ck_assert_msg(got && strcmp(got, cls) == 0, "expected %s, got %s", cls, text);
	free(text);
	const char *desc = json_string_value(json_object_get(err, "desc"));
	ck_assert_ptr_nonnull(desc);
	return desc;
}

json_t *td_expect_return(json_t *reply)
{
	json_t *ret = json_object_get(reply, "return");
	char *text = json_dumps(reply, JSON_COMPACT);
	ck_assert_msg(json_is_object(ret), "expected a return, got %s", text);
	free(text);
	return ret;
}

/* 1 when a fresh connection gets a daemon-info reply from d's pid; 0 when the daemon
 * refused it (Busy) or closed it. */
int td_try_info(const td_daemon *d)
{
	static const char req[] = "{\"execute\":\"daemon-info\",\"id\":\"alive\"}\n";
	td_conn c = td_open(d);
	int ok = 0;
	if (send(c.fd, req, sizeof req - 1, MSG_NOSIGNAL) == (ssize_t)sizeof req - 1) {
		json_t *r = td_read_msg(&c, T_READ_MS);
		json_t *ret = json_object_get(r, "return");
		ok = ret && json_integer_value(json_object_get(ret, "pid")) == d->pid &&
			strcmp(json_string_value(json_object_get(r, "id")), "alive") == 0;
		json_decref(r);
	}
	td_close(&c);
	return ok;
}

/* The daemon still answers daemon-info, on a fresh connection. */
void td_alive(const td_daemon *d)
{
	ck_assert_msg(td_try_info(d), "rematd does not answer daemon-info:\n%s", td_slurp(d->log));
}

/* The same, allowing the daemon a moment to notice that earlier clients hung up. */
void td_alive_soon(const td_daemon *d)
{
	long end = td_ms() + T_READ_MS;
	while (!td_try_info(d)) {
		ck_assert_msg(td_ms() < end, "rematd does not answer daemon-info:\n%s",
			td_slurp(d->log));
		td_sleep_ms(20);
	}
}

/* Waits for JOB_STATE_CHANGED of job to state `to`; returns its data (new reference). */
json_t *td_wait_state(td_conn *c, const char *job, const char *to, int ms)
{
	long end = td_ms() + ms;
	for (;;) {
		long left = end - td_ms();
		ck_assert_msg(left > 0, "no JOB_STATE_CHANGED of %s to %s within %d ms", job, to,
			ms);
		json_t *o = td_read_msg(c, (int)left);
		ck_assert_msg(o != NULL, "connection ended waiting for %s to become %s", job, to);
		const char *ev = json_string_value(json_object_get(o, "event"));
		json_t *data = json_object_get(o, "data");
		const char *j = json_string_value(json_object_get(data, "job"));
		const char *t = json_string_value(json_object_get(data, "to"));
		if (ev && strcmp(ev, "JOB_STATE_CHANGED") == 0 && j && strcmp(j, job) == 0 && t &&
			strcmp(t, to) == 0) {
			json_incref(data);
			json_decref(o);
			return data;
		}
		json_decref(o);
	}
}

/* Writes an executable shell script to the daemon's directory: a stand-in worker. */
char *td_script(const td_daemon *d, const char *name, const char *body)
{
	char *path = malloc(700);
	ck_assert_ptr_nonnull(path);
	snprintf(path, 700, "%s/%s", d->dir, name);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	/* rematd asks its worker program to check specs (--check) and to say what it runs
	 * (--info): a stand-in leaves both to the real one, and is itself only as a worker */
	fprintf(f, "#!/bin/sh\ncase \"$1\" in --check|--info) exec '%s' \"$@\";; esac\n%s\n",
		t_env("REMAT_TRAIN"), body);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(chmod(path, 0755), 0);
	return path;
}

const char *td_str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	ck_assert_msg(s != NULL, "'%s' missing or not a string", key);
	return s;
}


/* Starts a job on c; returns its id (static storage) after checking the reply's state. */
const char *td_job_start(td_conn *c, const char *spec, const char *want_state)
{
	static char id[16];
	json_t *r = td_request(c, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":%s}}", spec);
	json_t *ret = td_expect_return(r);
	snprintf(id, sizeof id, "%s", td_str(ret, "job"));
	if (want_state)
		ck_assert_str_eq(td_str(ret, "state"), want_state);
	json_decref(r);
	return id;
}

json_t *td_job_status(td_conn *c, const char *job)
{
	json_t *r = td_request(c, "{\"execute\":\"job-status\",\"arguments\":{\"job\":\"%s\"}}",
		job);
	json_incref(td_expect_return(r));
	json_t *ret = json_object_get(r, "return");
	json_decref(r);
	return ret;
}
/* Waits for the first STEP event of job. */
void td_wait_step(td_conn *c, const char *job)
{
	long end = td_ms() + T_JOB_MS;
	for (;;) {
		long left = end - td_ms();
		ck_assert_msg(left > 0, "no STEP from %s within %d ms (does remat-train support "
			"--control-fd yet?)", job, T_JOB_MS);
		json_t *o = td_read_msg(c, (int)left);
		ck_assert_msg(o != NULL, "connection ended waiting for a STEP");
		const char *ev = json_string_value(json_object_get(o, "event"));
		json_t *data = json_object_get(o, "data");
		const char *to = json_string_value(json_object_get(data, "to"));
		ck_assert_msg(!(to && strcmp(to, "failed") == 0), "job failed: %s",
			json_string_value(json_object_get(data, "reason")));
		int hit = ev && strcmp(ev, "STEP") == 0 &&
			strcmp(json_string_value(json_object_get(data, "job")), job) == 0;
		json_decref(o);
		if (hit)
			return;
	}
}

json_t *td_wait_event(td_conn *c, const char *job, const char *name, int ms)
{
	long end = td_ms() + ms;
	for (;;) {
		long left = end - td_ms();
		ck_assert_msg(left > 0, "no %s event of %s within %d ms", name, job, ms);
		json_t *o = td_read_msg(c, (int)left);
		ck_assert_msg(o != NULL, "connection ended waiting for %s", name);
		const char *ev = json_string_value(json_object_get(o, "event"));
		json_t *data = json_object_get(o, "data");
		const char *j = json_string_value(json_object_get(data, "job"));
		if (ev && strcmp(ev, name) == 0 && j && strcmp(j, job) == 0) {
			json_incref(data);
			json_decref(o);
			return data;
		}
		json_decref(o);
	}
}


td_conn td_real_job(td_daemon *d, char *id)
{
	const char *extra[] = {"--worker", t_env("REMAT_TRAIN"), NULL};
	td_daemon_paths(d);
	td_daemon_start(d, extra);
	td_conn c = td_open(d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	snprintf(id, 16, "%s", td_job_start(&c, T_TINY_SPEC, "starting"));
	td_wait_step(&c, id);
	return c;
}

/* 1 when every thread of pid is stopped (state T in /proc/pid/task/TID/stat). */
static int td_all_stopped(pid_t pid)
{
	char dir[64], path[400], buf[512];
	snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
	DIR *d = opendir(dir);
	int all = d != NULL;
	for (struct dirent *e; all && (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s/stat", dir, e->d_name);
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
		if (f)
			fclose(f);
		buf[n] = '\0';
		const char *paren = strrchr(buf, ')');
		all = !paren || (paren[1] == ' ' && (paren[2] == 'T' || paren[2] == 't'));
	}
	if (d)
		closedir(d);
	return all;
}

void td_sigstop(pid_t pid)
{
	ck_assert_int_eq(kill(pid, SIGSTOP), 0);
	long end = td_ms() + T_READ_MS;
	while (!td_all_stopped(pid)) {
		ck_assert_msg(td_ms() < end, "process %d not stopped after SIGSTOP", (int)pid);
		td_sleep_ms(5);
	}
}

/* ---- rematctl ---- */

int td_ctl(const td_daemon *d, char **out, ...)
{
	char *argv[24];
	int n = 0;
	va_list ap;
	argv[n++] = (char *)t_env("REMATCTL");
	argv[n++] = "--socket";
	argv[n++] = (char *)d->sock;
	va_start(ap, out);
	for (char *a; n < 23 && (a = va_arg(ap, char *));)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	return t_run(argv, out);
}

/* ---- another user ---- */

int td_run_as_peer(char *const argv[], char **out)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		gid_t g = (gid_t)atoi(TD_PEER_GROUP);
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		if (setgroups(1, &g) < 0 || setgid(TD_NOBODY) < 0 || setuid(TD_NOBODY) < 0) {
			printf("cannot become uid %d: %s\n", TD_NOBODY, strerror(errno));
			_exit(126);
		}
		execv(argv[0], argv);
		printf("cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(p[1]);
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	ck_assert_ptr_nonnull(buf);
	ssize_t r;
	while (len + 1 < cap && (r = read(p[0], buf + len, cap - len - 1)) > 0)
		len += (size_t)r;
	buf[len] = '\0';
	close(p[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	*out = buf;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int td_peer_can_reach(const char *what, const char *dir)
{
	char *argv[] = {"/usr/bin/test", "-x", (char *)dir, NULL};
	char *out;
	int rc = td_run_as_peer(argv, &out);
	free(out);
	if (rc != 0)
		printf("%s: skipped: uid %d cannot reach %s\n", what, TD_NOBODY, dir);
	return rc == 0;
}
