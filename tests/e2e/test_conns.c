/* test_conns.c - rematd's connections and replies, through the real daemon: idle
 * connections (spoken ones too) are closed and root gets in, one user holds at most its
 * share of the places, a change the worker did not take in time is answered "queued" (never
 * "failed, try again" for something that then happens), a job-start being checked when
 * rematd is told to stop gets a reply before its connection closes, and an ended job still
 * shows its last memory figures and policy.
 *
 * Tests that need root (a peer of another uid) say so in one line and skip. Timings are
 * bounds, never measurements.
 */
#include "t_daemon.h"
#include "tests.h"

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto.h"
#include "t_util.h"

#define CONN_PER_UID (PROTO_MAX_CONNECTIONS / 2) /* rematd's SRV_CONN_PER_UID */

/* Until rematd has seen its start probe (client 1, td_wait_listening's) hang up: from then
 * on every connection of the test counts. */
static void probe_gone(const td_daemon *d)
{
	long end = td_ms() + T_READ_MS;
	while (!strstr(td_slurp(d->log), "client 1 disconnected")) {
		ck_assert_msg(td_ms() < end, "rematd never saw its probe go:\n%s", td_slurp(d->log));
		td_sleep_ms(20);
	}
}

/* ---- idle connections ---- */

/* 1 when rematd has closed c: nothing left to read, and the end of the stream. */
static int at_eof(td_conn *c)
{
	char b;
	struct pollfd p = {c->fd, POLLIN, 0};
	if (c->len > 0 || poll(&p, 1, T_READ_MS) != 1)
		return 0;
	return recv(c->fd, &b, 1, MSG_DONTWAIT) == 0;
}

/* 64 connections that each ask once and then say nothing: every place is taken, then the
 * idle limit closes them all, and root's job-list is answered. A subscribed connection (a
 * watch) stays, however silent. */
START_TEST(test_conns_spoken_idle_closed)
{
	td_daemon d;
	td_daemon_paths(&d);
	const char *extra[] = {"--idle-timeout", "1", NULL};
	td_daemon_start(&d, extra);
	probe_gone(&d);
	td_conn watch = td_open(&d);
	json_t *r = td_request(&watch, "{\"execute\":\"subscribe\"}");
	td_expect_return(r);
	json_decref(r);
	td_conn cs[PROTO_MAX_CONNECTIONS - 1];
	for (int i = 0; i < PROTO_MAX_CONNECTIONS - 1; i++) {
		cs[i] = td_open(&d);
		r = td_request(&cs[i], "{\"execute\":\"daemon-info\",\"id\":1}");
		td_expect_return(r);
		json_decref(r);
	}
	ck_assert_msg(!td_try_info(&d), "a 65th connection was served");
	td_sleep_ms(3000); /* the limit is 1 s: closed within 2 */
	/* root gets in while the test still holds its 63 sockets */
	td_conn c = td_open(&d);
	r = td_request(&c, "{\"execute\":\"job-list\",\"id\":2}");
	ck_assert_ptr_nonnull(json_object_get(td_expect_return(r), "jobs"));
	json_decref(r);
	td_close(&c);
	for (int i = 0; i < PROTO_MAX_CONNECTIONS - 1; i++) {
		ck_assert_msg(at_eof(&cs[i]), "connection %d still open", i);
		td_close(&cs[i]);
	}
	/* the subscriber was silent as long, and is still served */
	r = td_request(&watch, "{\"execute\":\"daemon-info\",\"id\":3}");
	td_expect_return(r);
	json_decref(r);
	td_close(&watch);
	ck_assert_ptr_nonnull(strstr(td_slurp(d.log), "closed: idle"));
	td_daemon_stop(&d);
}
END_TEST

/* ---- one user's share ---- */

/* The next line from fd into buf (without '\n'), within T_READ_MS: 0, or -1. */
static int peer_line(int fd, char *buf, size_t len)
{
	size_t n = 0;
	long end = td_ms() + T_READ_MS;
	while (n + 1 < len) {
		struct pollfd p = {fd, POLLIN, 0};
		long left = end - td_ms();
		if (left <= 0 || poll(&p, 1, (int)left) <= 0 || read(fd, buf + n, 1) != 1)
			return -1;
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = '\0';
	return 0;
}

/* In the child, as uid TD_NOBODY: opens connections until one is refused (at most
 * PROTO_MAX_CONNECTIONS), each asked daemon-info; writes "served refusal" to out, then
 * holds them until in closes. */
static void peer_fill(const char *sock, int in, int out)
{
	static const char req[] = "{\"execute\":\"daemon-info\",\"id\":1}\n";
	char line[1024] = "", msg[1200];
	int served = 0;
	for (int i = 0; i < PROTO_MAX_CONNECTIONS; i++) {
		int fd = td_connect(sock); /* its checks hold: the path fits */
		if (fd < 0 || peer_line(fd, line, sizeof line) < 0) { /* the greeting */
			snprintf(line, sizeof line, "connection %d: no greeting", i);
			break;
		}
		/* a refused one is closed after its error: the request may not go */
		send(fd, req, sizeof req - 1, MSG_NOSIGNAL);
		if (peer_line(fd, line, sizeof line) < 0) {
			snprintf(line, sizeof line, "connection %d: no reply", i);
			break;
		}
		if (!strstr(line, "\"return\""))
			break; /* refused: line says why */
		served++;
		line[0] = '\0';
	}
	int n = snprintf(msg, sizeof msg, "%d %s", served, line);
	if (write(out, msg, (size_t)n) != n)
		_exit(1);
	close(out);
	char b;
	while (read(in, &b, 1) > 0)
		;
	_exit(0);
}

/* 0, with a line saying why test skips, when this process cannot be root for a peer of
 * another uid; else 1, d's paths set and its directory open to that peer. */
static int peer_daemon_paths(const char *test, td_daemon *d)
{
	if (geteuid() != 0) {
		printf("%s: skipped: needs root (a peer of another uid)\n", test);
		return 0;
	}
	td_daemon_paths(d);
	ck_assert_int_eq(chmod(d->dir, 0711), 0);
	return 1;
}

/* What a peer runs as uid TD_NOBODY (in group TD_PEER_GROUP): it writes its finding to out
 * and closes it, then may wait until in closes. */
typedef void (*peer_fn)(const char *sock, int in, int out);

/* Forks the peer fn on sock; what it writes goes into msg (len bytes). Returns its pid and
 * into *hold the end it waits on: peer_end lets it go. */
static pid_t peer_run(const char *sock, peer_fn fn, char *msg, size_t len, int *hold)
{
	int to_child[2], from_child[2];
	ck_assert_int_eq(pipe(to_child), 0);
	ck_assert_int_eq(pipe(from_child), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		gid_t g = (gid_t)atoi(TD_PEER_GROUP);
		close(to_child[1]);
		close(from_child[0]);
		if (setgroups(1, &g) < 0 || setgid(TD_NOBODY) < 0 || setuid(TD_NOBODY) < 0)
			_exit(126);
		fn(sock, to_child[0], from_child[1]);
		_exit(0);
	}
	close(to_child[0]);
	close(from_child[1]);
	size_t n = 0;
	ssize_t r;
	while (n + 1 < len && (r = read(from_child[0], msg + n, len - 1 - n)) > 0)
		n += (size_t)r;
	msg[n] = '\0';
	close(from_child[0]);
	*hold = to_child[1];
	return pid;
}

/* The peer let go, and ended well. */
static void peer_end(pid_t pid, int hold)
{
	int status;
	close(hold);
	waitpid(pid, &status, 0);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the peer: status %d",
		status);
}

START_TEST(test_conns_per_uid_cap)
{
	td_daemon d;
	if (!peer_daemon_paths("test_conns_per_uid_cap", &d))
		return;
	const char *extra[] = {"--group", TD_PEER_GROUP, NULL};
	td_daemon_start(&d, extra);
	probe_gone(&d);
	char msg[1300];
	int hold = -1;
	pid_t pid = peer_run(d.sock, peer_fill, msg, sizeof msg, &hold);
	/* the other user holds its share, and root still gets in */
	int alive = td_try_info(&d);
	peer_end(pid, hold);
	ck_assert_msg(atoi(msg) == CONN_PER_UID && strstr(msg, "Busy") &&
		strstr(msg, "too many connections of uid 65534"), "uid %d: %s", TD_NOBODY, msg);
	ck_assert_msg(alive, "root was refused while uid %d held %d places", TD_NOBODY,
		CONN_PER_UID);
	td_daemon_stop(&d);
}
END_TEST

/* ---- one user's checks ---- */

#define CHECKS_PER_UID 4 /* rematd's SRV_HELPER_PER_UID */

/* In the child, as uid TD_NOBODY: one more job-start than CHECKS_PER_UID on one
 * connection; writes the reply to the last (the others wait on their checks) to out, then
 * holds the connection until in closes. */
static void peer_checks(const char *sock, int in, int out)
{
	char line[2048] = "no reply", req[512];
	int fd = td_connect(sock);
	if (fd < 0 || peer_line(fd, line, sizeof line) < 0)
		_exit(2);
	for (int i = 1; i <= CHECKS_PER_UID + 1; i++) {
		int n = snprintf(req, sizeof req, "{\"execute\":\"job-start\",\"id\":%d,"
			"\"arguments\":{\"spec\":" T_TINY_SPEC "}}\n", i);
		if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
			_exit(3);
	}
	char want[32];
	snprintf(want, sizeof want, "\"id\":%d", CHECKS_PER_UID + 1);
	while (peer_line(fd, line, sizeof line) == 0 && !strstr(line, want))
		;
	size_t n = strlen(line);
	if (write(out, line, n) != (ssize_t)n)
		_exit(1);
	close(out);
	char b;
	while (read(in, &b, 1) > 0)
		;
	_exit(0);
}

/* A user holds at most CHECKS_PER_UID of rematd's spec checks at once: the next is Busy,
 * saying so, and root still gets its own checked (no user holds every check slot). */
START_TEST(test_conns_checks_per_uid_cap)
{
	td_daemon d;
	if (!peer_daemon_paths("test_conns_checks_per_uid_cap", &d))
		return;
	/* checks that take 3 s: the peer's stay under way while it asks for one more */
	char path[700], body[1024];
	snprintf(path, sizeof path, "%s/slow-check.sh", d.dir);
	snprintf(body, sizeof body, "#!/bin/sh\n[ \"$1\" = --check ] && sleep 3\n"
		"exec '%s' \"$@\"\n", t_env("REMAT_TRAIN"));
	t_write_file(path, body, strlen(body));
	ck_assert_int_eq(chmod(path, 0755), 0);
	const char *extra[] = {"--group", TD_PEER_GROUP, "--worker", path, NULL};
	td_daemon_start(&d, extra);
	char msg[2100];
	int hold = -1;
	pid_t pid = peer_run(d.sock, peer_checks, msg, sizeof msg, &hold);
	td_conn c = td_open(&d);
	json_t *mine = td_request(&c, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":"
		T_TINY_SPEC "}}");
	peer_end(pid, hold);
	ck_assert_msg(strstr(msg, "Busy") && strstr(msg, "at most 4 a user"), "uid %d: %s",
		TD_NOBODY, msg);
	ck_assert_msg(json_object_get(mine, "return"), "root: %s", json_dumps(mine, 0));
	json_decref(mine);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

#define QUEUED_PER_UID 64 /* rematd's SRV_QUEUED_PER_UID */

/* In the child, as uid TD_NOBODY: job-starts in rounds of CHECKS_PER_UID until one is
 * refused (at most QUEUED_PER_UID + 2); writes "accepted refusal" to out. */
static void peer_queue(const char *sock, int in, int out)
{
	(void)in;
	char line[2048] = "no reply", req[512], msg[2100];
	int fd = td_connect(sock), accepted = 0, refused = 0;
	if (fd < 0 || peer_line(fd, line, sizeof line) < 0)
		_exit(2);
	for (int sent = 0; !refused && sent < QUEUED_PER_UID + 2;) {
		int round = 0;
		for (; round < CHECKS_PER_UID && sent < QUEUED_PER_UID + 2; round++, sent++) {
			int n = snprintf(req, sizeof req, "{\"execute\":\"job-start\",\"id\":%d,"
				"\"arguments\":{\"spec\":" T_TINY_SPEC "}}\n", sent + 1);
			if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
				_exit(3);
		}
		for (int i = 0; i < round; i++) {
			if (peer_line(fd, line, sizeof line) < 0)
				_exit(4);
			if (strstr(line, "\"return\""))
				accepted++;
			else if (!refused++)
				snprintf(msg, sizeof msg, "%s", line);
		}
	}
	int n = snprintf(line, sizeof line, "%d %s", accepted, refused ? msg : "none refused");
	_exit(write(out, line, (size_t)n) == n ? 0 : 1);
}

/* A user holds at most QUEUED_PER_UID places in the queue: one job runs (a worker that
 * never goes on), QUEUED_PER_UID wait, and the next start is Busy, saying so. */
START_TEST(test_conns_queue_per_uid_cap)
{
	td_daemon d;
	if (!peer_daemon_paths("test_conns_queue_per_uid_cap", &d))
		return;
	char *w = td_script(&d, "worker.sh", "exec sleep 600");
	/* its silent worker is killed a second after the shutdown asks it to stop */
	const char *extra[] = {"--group", TD_PEER_GROUP, "--worker", w, "--max-jobs", "1",
		"--stop-timeout", "1", NULL};
	td_daemon_start(&d, extra);
	char msg[2200];
	int hold = -1;
	pid_t pid = peer_run(d.sock, peer_queue, msg, sizeof msg, &hold);
	peer_end(pid, hold);
	ck_assert_msg(atoi(msg) == QUEUED_PER_UID + 1 && strstr(msg, "Busy") &&
		strstr(msg, "has 64 jobs queued (at most 64 a user)"), "uid %d: %s", TD_NOBODY,
		msg);
	free(w);
	td_daemon_stop(&d);
}
END_TEST

/* ---- a change the worker does not take in time ---- */

/* job-status of job until pred holds (T_READ_MS): its return (new reference). */
static json_t *status_until(td_conn *c, const char *job, const char *state, double lr)
{
	long end = td_ms() + T_READ_MS;
	for (;;) {
		json_t *st = td_job_status(c, job);
		json_t *v = json_object_get(json_object_get(st, "hparams"), "lr");
		if (!strcmp(td_str(st, "state"), state) && json_is_number(v) &&
			json_number_value(v) == lr)
			return st;
		ck_assert_msg(td_ms() < end, "job %s never %s with lr %g", job, state, lr);
		json_decref(st);
		td_sleep_ms(100);
	}
}

/* A stopped worker: job-set and job-pause are answered "queued" once the time limit
 * passes (never Busy, "try again"), and both apply once it runs again. */
START_TEST(test_conns_change_timed_out_is_queued)
{
	td_daemon d;
	char job[16], line[512];
	setenv("REMAT_WORKER_REPLY_MS", "1500", 1);
	td_conn c = td_real_job(&d, job);
	unsetenv("REMAT_WORKER_REPLY_MS");
	json_t *st = td_job_status(&c, job);
	pid_t pid = (pid_t)json_integer_value(json_object_get(st, "pid"));
	json_decref(st);
	ck_assert_int_gt(pid, 0);
	td_sigstop(pid);
	long t0 = td_ms();
	snprintf(line, sizeof line, "{\"execute\":\"job-set\",\"arguments\":{\"job\":\"%s\","
		"\"set\":{\"lr\":0.5}},\"id\":11}", job);
	td_send(&c, line);
	snprintf(line, sizeof line, "{\"execute\":\"job-pause\",\"arguments\":{\"job\":"
		"\"%s\"},\"id\":12}", job);
	td_send(&c, line);
	for (int i = 0; i < 2; i++) {
		json_t *r = td_reply(&c, 3 * T_READ_MS);
		char *text = json_dumps(r, JSON_COMPACT);
		ck_assert_msg(td_ms() - t0 >= 1400, "answered after %ld ms: %s", td_ms() - t0,
			text);
		free(text);
		json_t *ret = td_expect_return(r);
		ck_assert_msg(json_is_true(json_object_get(ret, "queued")), "not queued");
		ck_assert_str_eq(td_str(ret, "execute"), json_integer_value(json_object_get(r,
			"id")) == 11 ? "job-set" : "job-pause");
		ck_assert_ptr_nonnull(strstr(td_str(ret, "note"), "takes effect"));
		json_decref(r);
	}
	ck_assert_int_eq(kill(pid, SIGCONT), 0);
	/* what it was told is queued takes effect */
	st = status_until(&c, job, "paused", 0.5);
	json_decref(st);
	long end = td_ms() + T_READ_MS;
	while (!strstr(td_slurp(d.log), "job-pause, answered queued, was taken")) {
		ck_assert_msg(td_ms() < end, "no late outcome logged:\n%s", td_slurp(d.log));
		td_sleep_ms(50);
	}
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

/* ---- the shutdown and a job-start being checked ---- */

/* SIGTERM while remat-train --check looks at a job-start's spec: the client is told the
 * daemon is shutting down and the job was not started, before its connection closes. */
START_TEST(test_conns_shutdown_during_check)
{
	td_daemon d;
	td_daemon_paths(&d);
	char *w = malloc(700);
	ck_assert_ptr_nonnull(w);
	snprintf(w, 700, "%s/slow-check.sh", d.dir);
	FILE *f = fopen(w, "w");
	ck_assert_ptr_nonnull(f);
	/* a check that takes its time; the rest is the real worker's */
	fprintf(f, "#!/bin/sh\ncase \"$1\" in --check) exec sleep 30;; esac\nexec '%s' \"$@\"\n",
		t_env("REMAT_TRAIN"));
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(chmod(w, 0755), 0);
	const char *extra[] = {"--worker", w, NULL};
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	char line[1024];
	snprintf(line, sizeof line, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":%s},"
		"\"id\":7}", T_TINY_SPEC);
	td_send(&c, line);
	long end = td_ms() + T_READ_MS;
	while (!strstr(td_slurp(d.log), "checking the spec")) {
		ck_assert_msg(td_ms() < end, "no check began:\n%s", td_slurp(d.log));
		td_sleep_ms(20);
	}
	ck_assert_int_eq(kill(d.pid, SIGTERM), 0);
	json_t *msg = td_read_msg(&c, T_STOP_MS);
	ck_assert_msg(msg != NULL, "EOF instead of a reply:\n%s", td_slurp(d.log));
	ck_assert_int_eq(json_integer_value(json_object_get(msg, "id")), 7);
	const char *desc = td_expect_error(msg, "InvalidState");
	ck_assert_msg(strstr(desc, "shutting down") && strstr(desc, "not started"), "%s", desc);
	json_decref(msg);
	ck_assert_int_eq(td_wait_pid(d.pid, T_STOP_MS), 0);
	d.pid = 0;
	td_close(&c);
	free(w);
}
END_TEST

/* ---- an ended job's last figures ---- */

/* rematctl's output for a command line after its path and --socket (malloc'd). */
static char *ctl_out(const td_daemon *d, const char *args)
{
	char cmd[2048];
	snprintf(cmd, sizeof cmd, "'%s' --socket '%s' %s 2>&1", t_env("REMATCTL"), d->sock, args);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	size_t cap = 1 << 16, len = 0, n;
	char *buf = malloc(cap);
	ck_assert_ptr_nonnull(buf);
	while (len + 1 < cap && (n = fread(buf + len, 1, cap - 1 - len, p)) > 0)
		len += n;
	buf[len] = '\0';
	pclose(p);
	return buf;
}

/* mem-stats and remat-get of an ended job: its last figures, said to be so. */
static void expect_last_figures(td_daemon *d, const char *job)
{
	char line[256];
	td_conn c = td_open(d);
	snprintf(line, sizeof line, "{\"execute\":\"mem-stats\",\"arguments\":{\"job\":\"%s\"}}",
		job);
	json_t *r = td_request(&c, "%s", line);
	json_t *ret = td_expect_return(r);
	ck_assert(json_is_true(json_object_get(ret, "final")));
	ck_assert_str_eq(td_str(ret, "state"), "stopped");
	ck_assert_int_ge(json_integer_value(json_object_get(ret, "as_of_step")), 1);
	ck_assert_int_gt(json_integer_value(json_object_get(json_object_get(ret, "total"),
		"peak")), 0);
	json_decref(r);
	snprintf(line, sizeof line, "{\"execute\":\"remat-get\",\"arguments\":{\"job\":\"%s\"}}",
		job);
	r = td_request(&c, "%s", line);
	ret = td_expect_return(r);
	ck_assert(json_is_true(json_object_get(ret, "final")));
	ck_assert(json_is_object(json_object_get(ret, "policy")));
	ck_assert(json_array_size(json_object_get(ret, "sections")) > 0);
	json_decref(r);
	td_close(&c);
	snprintf(line, sizeof line, "mem %s", job);
	char *out = ctl_out(d, line);
	ck_assert_msg(strstr(out, "(last figures, as of step") && strstr(out, "job stopped at "
		"step"), "rematctl mem: %s", out);
	free(out);
}

START_TEST(test_conns_ended_job_figures)
{
	td_daemon d;
	char job[16], line[256];
	td_conn c = td_real_job(&d, job);
	snprintf(line, sizeof line, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\","
		"\"save\":false}}", job);
	json_decref(td_request(&c, "%s", line));
	json_decref(td_wait_state(&c, job, "stopped", T_JOB_MS));
	td_close(&c);
	expect_last_figures(&d, job);
	/* kept in the record: the same after a restart */
	td_daemon_stop(&d);
	td_daemon_start(&d, NULL);
	expect_last_figures(&d, job);
	td_daemon_stop(&d);
}
END_TEST

Suite *suite_conns(void)
{
	Suite *s = suite_create("conns");
	TCase *tc = tcase_create("conns");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_conns_spoken_idle_closed);
	tcase_add_test(tc, test_conns_per_uid_cap);
	tcase_add_test(tc, test_conns_checks_per_uid_cap);
	tcase_add_test(tc, test_conns_queue_per_uid_cap);
	tcase_add_test(tc, test_conns_shutdown_during_check);
	tcase_add_test(tc, test_conns_change_timed_out_is_queued);
	tcase_add_test(tc, test_conns_ended_job_figures);
	suite_add_tcase(s, tc);
	return s;
}
