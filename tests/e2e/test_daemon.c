/* test_daemon.c - end-to-end tests of rematd (daemon/): the real daemon on a temporary
 * socket and state directory, driven through a small raw-protocol helper (t_daemon.c:
 * plain sockets and poll with timeouts; rematctl is not used).
 *
 * What it covers: bad input of every kind (invalid JSON, non-objects, a line over 1 MiB,
 * unknown commands, unknown and wrongly typed arguments, unknown jobs, relative paths in a
 * spec, half a message then a hang-up, 100 connections dropped, the connection limit, a
 * client that never reads), each followed by a check that the daemon still answers
 * daemon-info; a peer with another uid; a second daemon on a live socket; a stale socket
 * after kill -9; a socket path that is too long or not a socket; SIGTERM and
 * daemon-shutdown (exit 0, socket removed). Worker supervision with stand-in workers
 * (shell scripts that exit, get killed, or never answer): failed jobs with the exit status
 * or signal, pending requests answered when the worker dies and dropped when their client
 * is gone, the in-flight limit, the queue, the shutdown timeout. Then the same with the
 * real remat-train --control-fd: events relayed and paced, job-status forwarded, kill -9
 * of the worker, the queue, a deferred job-stop, shutdown with saving.
 * The binaries come from REMATD and REMAT_TRAIN; scratch files go to REMAT_TMP.
 */
#include "tests.h"

#include <errno.h>
#include <grp.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto.h"
#include "t_daemon.h"
#include "t_util.h"

#define T_MANY 100             /* connections opened and dropped */
#define T_UID_NOBODY 65534     /* the peer with another uid (Debian's nobody/nogroup) */
#define T_CHUNK 1000           /* requests per write in the slow-reader test */

/* ---- start, stop, bad input ---- */

START_TEST(test_daemon_info_and_sigterm)
{
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	struct stat sb;
	ck_assert_int_eq(stat(d.sock, &sb), 0);
	ck_assert_msg((sb.st_mode & 0777) == 0600, "socket mode %o", sb.st_mode & 0777);
	td_conn c = td_open(&d);
	json_t *r = td_request(&c, "{\"execute\":\"daemon-info\",\"id\":[1,{\"a\":null}]}");
	json_t *ret = td_expect_return(r);
	ck_assert_str_eq(td_str(ret, "version"), PROTO_VERSION);
	ck_assert_str_eq(td_str(ret, "socket"), d.sock);
	ck_assert_str_eq(td_str(ret, "state_dir"), d.state);
	ck_assert_int_eq(json_integer_value(json_object_get(ret, "max_jobs")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(ret, "jobs_running")), 0);
	ck_assert(json_is_number(json_object_get(ret, "uptime_s")));
	ck_assert(json_is_array(json_object_get(ret, "backends")));
	/* the id is echoed as given, whatever JSON it is */
	json_t *want = json_loads("[1,{\"a\":null}]", 0, NULL);
	ck_assert(json_equal(json_object_get(r, "id"), want));
	json_decref(want);
	json_decref(r);
	r = td_request(&c, "{\"execute\":\"job-list\"}");
	ck_assert_uint_eq(json_array_size(json_object_get(td_expect_return(r), "jobs")), 0);
	ck_assert_ptr_null(json_object_get(r, "id"));
	json_decref(r);
	td_daemon_stop(&d);
	/* the client is closed by the shutdown */
	ck_assert_ptr_null(td_read_line(&c, T_READ_MS));
	td_close(&c);
	char lock[700];
	snprintf(lock, sizeof lock, "%s.lock", d.sock);
	ck_assert_msg(access(lock, F_OK) < 0, "lock file left behind");
}
END_TEST

/* What the worker runs: the first start asks remat-train --info (here one that takes 2 s)
 * before it serves, so that even its first daemon-info answers at once; the answer is
 * kept with the binary's identity, and a restarted rematd answers from it while a new
 * --info (now one that takes 20 s) is under way. */
START_TEST(test_daemon_info_without_waiting)
{
	td_daemon d;
	char w[700], slow[700];
	td_daemon_paths(&d);
	snprintf(w, sizeof w, "%s/worker.sh", d.dir);
	snprintf(slow, sizeof slow, "%s/slow", d.dir);
	FILE *f = fopen(w, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "#!/bin/sh\n[ \"$1\" = --info ] || exit 3\n[ -e '%s' ] && sleep 20\nsleep 2\n"
		   "echo '{\"version\":\"0\",\"blas\":\"blas of the script\",\"backends\":[\"cpu\"],"
		   "\"gpus\":[]}'\n", slow);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(chmod(w, 0755), 0);
	const char *extra[] = {"--worker", w, NULL};
	for (int run = 0; run < 2; run++) {
		td_daemon_start(&d, extra);
		td_conn c = td_open(&d);
		long t0 = td_ms();
		json_t *r = td_request(&c, "{\"execute\":\"daemon-info\"}");
		long ms = td_ms() - t0;
		ck_assert_str_eq(td_str(td_expect_return(r), "blas"), "blas of the script");
		json_decref(r);
		ck_assert_msg(ms < 1000, "start %d: daemon-info waited %ld ms for --info", run + 1, ms);
		td_close(&c);
		td_daemon_stop(&d);
		/* the second start finds the answer kept, and a worker that is slow to answer */
		f = fopen(slow, "w");
		ck_assert_ptr_nonnull(f);
		fclose(f);
	}
}
END_TEST

START_TEST(test_daemon_bad_json)
{
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	td_conn c = td_open(&d);
	static const char *const bad[] = {
		"{not json", "{\"execute\":\"daemon-info\"", "\"\\ud800", "\x01\x02\xff\xfe",
		"{\"execute\":\"daemon-info\"}}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		json_t *r = td_request(&c, "%s", bad[i]);
		td_expect_error(r, "ParseError");
		ck_assert_ptr_null(json_object_get(r, "id"));
		json_decref(r);
		td_alive(&d);
	}
	/* the same connection goes on serving */
	json_t *r = td_request(&c, "{\"execute\":\"daemon-info\",\"id\":1}");
	td_expect_return(r);
	json_decref(r);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_daemon_not_a_request)
{
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	td_conn c = td_open(&d);
	static const char *const bad[] = {"[1,2]", "42", "\"daemon-info\"", "null", "{}",
		"{\"id\":3}", "{\"execute\":\"daemon-info\",\"arguments\":[]}",
		"{\"execute\":\"daemon-info\",\"extra\":1}"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		json_t *r = td_request(&c, "%s", bad[i]);
		td_expect_error(r, "InvalidRequest");
		json_decref(r);
		td_alive(&d);
	}
	/* execute of the wrong type: InvalidRequest, and the id still echoed */
	json_t *r = td_request(&c, "{\"execute\":5,\"id\":9}");
	td_expect_error(r, "InvalidRequest");
	ck_assert_int_eq(json_integer_value(json_object_get(r, "id")), 9);
	json_decref(r);
	td_alive(&d);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_daemon_unknown_command)
{
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	td_conn c = td_open(&d);
	json_t *r = td_request(&c, "{\"execute\":\"rm-rf\",\"id\":\"abc\"}");
	ck_assert_ptr_nonnull(strstr(td_expect_error(r, "CommandNotFound"), "rm-rf"));
	ck_assert_str_eq(json_string_value(json_object_get(r, "id")), "abc");
	json_decref(r);
	td_alive(&d);
	/* control characters in a command name are escaped in the log, not written raw */
	r = td_request(&c, "{\"execute\":\"\\u001b[2Jx\",\"id\":2}");
	td_expect_error(r, "CommandNotFound");
	json_decref(r);
	td_alive(&d);
	ck_assert_ptr_null(strchr(td_slurp(d.log), '\x1b'));
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_daemon_bad_arguments)
{
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	td_conn c = td_open(&d);
	static const char *const bad[] = {
		"{\"execute\":\"daemon-info\",\"arguments\":{\"bogus\":1},\"id\":1}",
		"{\"execute\":\"job-status\",\"arguments\":{\"job\":5},\"id\":1}",
		"{\"execute\":\"job-status\",\"arguments\":{},\"id\":1}",
		/* must not shut the daemon down */
		"{\"execute\":\"daemon-shutdown\",\"arguments\":{\"save\":\"yes\"},\"id\":1}",
		"{\"execute\":\"job-start\",\"arguments\":{},\"id\":1}",
		"{\"execute\":\"job-start\",\"arguments\":{\"spec\":[1]},\"id\":1}",
		"{\"execute\":\"job-start\",\"arguments\":{\"spec\":{\"model\":{\"preset\":"
		"\"tiny\"},\"data\":{\"train\":\"" T_GPL "\"},\"bogus\":1}},\"id\":1}",
		"{\"execute\":\"job-start\",\"arguments\":{\"spec\":{\"model\":{\"preset\":"
		"\"tiny\"},\"data\":{\"train\":\"" T_GPL "\"},\"steps\":\"many\"}},\"id\":1}",
		"{\"execute\":\"subscribe\",\"arguments\":{\"events\":[\"NOPE\"]},\"id\":1}",
		"{\"execute\":\"subscribe\",\"arguments\":{\"events\":\"STEP\"},\"id\":1}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		json_t *r = td_request(&c, "%s", bad[i]);
		td_expect_error(r, "InvalidParameter");
		ck_assert_int_eq(json_integer_value(json_object_get(r, "id")), 1);
		json_decref(r);
		td_alive(&d);
	}
	/* nothing was started */
	json_t *r = td_request(&c, "{\"execute\":\"job-list\"}");
	ck_assert_uint_eq(json_array_size(json_object_get(td_expect_return(r), "jobs")), 0);
	json_decref(r);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_daemon_unknown_job)
{
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	td_conn c = td_open(&d);
	static const char *const cmds[] = {"job-status", "job-stop", "remat-get", "mem-stats",
		"ckpt-save", "job-pause", "subscribe"};
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
		json_t *r = td_request(&c, "{\"execute\":\"%s\",\"arguments\":{\"job\":\"j99\"},"
			"\"id\":7}", cmds[i]);
		ck_assert_ptr_nonnull(strstr(td_expect_error(r, "JobNotFound"), "j99"));
		json_decref(r);
		td_alive(&d);
	}
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_daemon_relative_paths)
{
	static const struct {
		const char *spec; /* a spec with one relative path */
		const char *key;  /* the key the error must name */
	} cases[] = {
		{"{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"data/train.bin\"}}",
			"data.train"},
		{"{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"" T_GPL "\","
		 "\"val\":\"./val.bin\"}}", "data.val"},
		{"{\"model\":{\"init_from\":\"ckpt/step_00000010\"},\"data\":{\"train\":\"" T_GPL
		 "\"}}", "model.init_from"},
		{"{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"" T_GPL "\"},"
		 "\"save\":{\"dir\":\"out\"}}", "save.dir"},
	};
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	td_conn c = td_open(&d);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		json_t *r = td_request(&c, "{\"execute\":\"job-start\",\"arguments\":"
			"{\"spec\":%s}}", cases[i].spec);
		const char *desc = td_expect_error(r, "InvalidParameter");
		ck_assert_msg(strstr(desc, cases[i].key) && strstr(desc, "absolute"),
			"'%s' does not name %s", desc, cases[i].key);
		json_decref(r);
		td_alive(&d);
	}
	json_t *r = td_request(&c, "{\"execute\":\"job-list\"}");
	ck_assert_uint_eq(json_array_size(json_object_get(td_expect_return(r), "jobs")), 0);
	json_decref(r);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_daemon_line_too_large)
{
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	td_conn c = td_open(&d);
	/* exactly one byte over the limit, no newline: the daemon reads all of it, so its
	 * close is a clean end of stream (unread bytes would turn it into a reset) */
	size_t n = PROTO_MAX_LINE + 1;
	char *big = malloc(n);
	ck_assert_ptr_nonnull(big);
	memset(big, 'a', n);
	td_send_raw(&c, big, n);
	free(big);
	json_t *r = td_reply(&c, T_READ_MS);
	td_expect_error(r, "MessageTooLarge");
	ck_assert_ptr_null(json_object_get(r, "id"));
	json_decref(r);
	ck_assert_msg(td_read_line(&c, T_READ_MS) == NULL, "connection not closed");
	td_close(&c);
	td_alive(&d);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_daemon_half_message)
{
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	/* half a request, then the hang-up */
	td_conn c = td_open(&d);
	td_send_raw(&c, "{\"execute\":\"daem", 16);
	td_sleep_ms(50);
	td_close(&c);
	td_alive(&d);
	/* a request split across writes is one request */
	c = td_open(&d);
	td_send_raw(&c, "{\"execute\":\"daem", 16);
	td_sleep_ms(50);
	td_send_raw(&c, "on-info\",\"id\":5}\r\n", 18);
	json_t *r = td_reply(&c, T_READ_MS);
	td_expect_return(r);
	ck_assert_int_eq(json_integer_value(json_object_get(r, "id")), 5);
	json_decref(r);
	/* two requests in one write: two replies, in order */
	static const char two[] = "{\"execute\":\"job-list\",\"id\":1}\n"
				  "{\"execute\":\"job-list\",\"id\":2}\n";
	td_send_raw(&c, two, sizeof two - 1);
	for (int i = 1; i <= 2; i++) {
		r = td_reply(&c, T_READ_MS);
		ck_assert_int_eq(json_integer_value(json_object_get(r, "id")), i);
		json_decref(r);
	}
	td_close(&c);
	td_alive(&d);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_daemon_many_connections)
{
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	int fds[T_MANY];
	for (int i = 0; i < T_MANY; i++) {
		fds[i] = td_connect(d.sock);
		ck_assert_msg(fds[i] >= 0, "connect %d: %s", i, strerror(errno));
		if (i % 3 == 0) /* some leave a request behind too */
			(void)!send(fds[i], "{\"execute\":\"daemon-info\"}\n", 26, MSG_NOSIGNAL);
	}
	for (int i = 0; i < T_MANY; i++)
		close(fds[i]);
	td_alive_soon(&d);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_daemon_connection_limit)
{
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	td_conn c[PROTO_MAX_CONNECTIONS];
	for (int i = 0; i < PROTO_MAX_CONNECTIONS; i++)
		c[i] = td_open(&d); /* greeted: counted by the daemon */
	/* one more: the greeting, Busy without id, then the end */
	td_conn extra = td_open(&d);
	json_t *r = td_reply(&extra, T_READ_MS);
	td_expect_error(r, "Busy");
	ck_assert_ptr_null(json_object_get(r, "id"));
	json_decref(r);
	ck_assert_ptr_null(td_read_line(&extra, T_READ_MS));
	td_close(&extra);
	/* the ones served still are */
	r = td_request(&c[0], "{\"execute\":\"daemon-info\"}");
	td_expect_return(r);
	json_decref(r);
	for (int i = 0; i < PROTO_MAX_CONNECTIONS; i++)
		td_close(&c[i]);
	/* the daemon sees the hang-ups asynchronously */
	td_alive_soon(&d);
	td_daemon_stop(&d);
}
END_TEST

/* A client that sends requests and never reads the replies is dropped once its output
 * queue passes PROTO_MAX_OUTQ; the daemon never blocks on it. */
START_TEST(test_daemon_slow_reader)
{
	/* A subscriber that never reads while a job streams events: it is dropped once its
	 * queue is full, and neither the daemon nor the job waits for it. Replies to a flood of
	 * requests fill the queue faster than paced STEP events would. */
	td_daemon d;
	td_daemon_paths(&d);
	const char *extra[] = {"--worker", t_env("REMAT_TRAIN"), NULL};
	td_daemon_start(&d, extra);
	td_conn w = td_open(&d);
	json_decref(td_request(&w, "{\"execute\":\"subscribe\",\"arguments\":"
				   "{\"events\":[\"STEP\",\"JOB_STATE_CHANGED\"]}}"));
	const char *job = td_job_start(&w, T_TINY_SPEC, NULL);
	char jb[64];
	snprintf(jb, sizeof jb, "%s", job);
	td_wait_step(&w, jb);
	td_conn c = td_open(&d);
	td_send(&c, "{\"execute\":\"subscribe\"}");
	static const char req[] = "{\"execute\":\"daemon-info\"}\n";
	char chunk[sizeof req * T_CHUNK];
	for (int i = 0; i < T_CHUNK; i++)
		memcpy(chunk + i * (sizeof req - 1), req, sizeof req - 1);
	size_t sent = 0;
	int dropped = 0;
	/* each reply is far longer than its request: the limit is reached well before this */
	while (!dropped && sent < 4 * (size_t)PROTO_MAX_OUTQ) {
		ssize_t n = send(c.fd, chunk, T_CHUNK * (sizeof req - 1), MSG_NOSIGNAL);
		if (n < 0)
			dropped = errno == EPIPE || errno == ECONNRESET;
		else
			sent += (size_t)n;
		ck_assert_msg(n >= 0 || dropped, "send: %s", strerror(errno));
	}
	ck_assert_msg(dropped, "not dropped after %zu bytes of requests", sent);
	td_close(&c);
	ck_assert_ptr_nonnull(strstr(td_slurp(d.log), "not reading"));
	td_alive(&d);
	/* the job went on training through all of it */
	json_t *st = td_job_status(&w, jb);
	json_int_t s0 = json_integer_value(json_object_get(st, "step"));
	json_decref(st);
	long t0 = td_ms();
	json_int_t s1 = s0;
	while (s1 <= s0 && td_ms() - t0 < T_JOB_MS) {
		td_sleep_ms(50);
		st = td_job_status(&w, jb);
		s1 = json_integer_value(json_object_get(st, "step"));
		json_decref(st);
	}
	ck_assert_msg(s1 > s0, "the job stalled at step %lld", (long long)s0);
	td_close(&w);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_daemon_other_uid)
{
	if (geteuid() != 0) {
		/* changing uid needs root; as a user the socket's 0600 alone keeps others out */
		fprintf(stderr, "test_daemon_other_uid: skipped (not root)\n");
		return;
	}
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	/* open the file system's door so that SO_PEERCRED has to refuse (when every directory
	 * above is searchable by nobody; otherwise connect() fails with EACCES, also right) */
	ck_assert_int_eq(chmod(d.dir, 0755), 0);
	ck_assert_int_eq(chmod(d.sock, 0666), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (setgroups(0, NULL) < 0 || setgid(T_UID_NOBODY) < 0 || setuid(T_UID_NOBODY) < 0)
			_exit(3);
		td_conn c = {.fd = td_connect(d.sock)};
		if (c.fd < 0)
			_exit(errno == EACCES ? 10 : 4);
		json_t *r = td_read_msg(&c, T_READ_MS);
		json_t *err = json_object_get(r, "error");
		const char *cls = json_string_value(json_object_get(err, "class"));
		if (!cls || strcmp(cls, "PermissionDenied") != 0)
			_exit(5);
		/* and nothing after it: closed */
		_exit(td_read_line(&c, T_READ_MS) == NULL ? 0 : 6);
	}
	int st = td_wait_pid(pid, T_READ_MS * 2);
	ck_assert_msg(st == 0 || st == 10, "peer with uid %d: status %d (3 setuid, 4 connect, "
		"5 no PermissionDenied, 6 not closed)", T_UID_NOBODY, st);
	fprintf(stderr, "test_daemon_other_uid: %s\n", st == 0 ? "PermissionDenied reply" :
		"EACCES at connect");
	if (st == 0)
		ck_assert_ptr_nonnull(strstr(td_slurp(d.log), "uid 65534"));
	td_alive(&d);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_daemon_second_refused)
{
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	td_daemon second = d;
	snprintf(second.log, sizeof second.log, "%s/second.log", d.dir);
	snprintf(second.state, sizeof second.state, "%s/state2", d.dir);
	pid_t pid = td_daemon_exec(&second, NULL);
	int st = td_wait_pid(pid, T_START_MS);
	ck_assert_msg(st == 1, "second daemon: status %d:\n%s", st, td_slurp(second.log));
	ck_assert_msg(strstr(td_slurp(second.log), "another rematd"), "message: %s",
		td_slurp(second.log));
	/* the first one kept its socket and answers */
	td_alive(&d);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_daemon_stale_socket)
{
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	ck_assert_int_eq(kill(d.pid, SIGKILL), 0);
	ck_assert_int_eq(td_wait_pid(d.pid, T_STOP_MS), 128 + SIGKILL);
	struct stat sb;
	ck_assert_msg(lstat(d.sock, &sb) == 0 && S_ISSOCK(sb.st_mode), "no stale socket");
	td_daemon_start(&d, NULL);
	ck_assert_ptr_nonnull(strstr(td_slurp(d.log), "stale socket"));
	td_alive(&d);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_daemon_not_a_socket)
{
	td_daemon d;
	td_daemon_paths(&d);
	/* a regular file where the socket goes is never removed */
	FILE *f = fopen(d.sock, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	pid_t pid = td_daemon_exec(&d, NULL);
	ck_assert_int_eq(td_wait_pid(pid, T_START_MS), 1);
	ck_assert_ptr_nonnull(strstr(td_slurp(d.log), "not a socket"));
	struct stat sb;
	ck_assert(lstat(d.sock, &sb) == 0 && S_ISREG(sb.st_mode));
}
END_TEST

START_TEST(test_daemon_path_too_long)
{
	td_daemon d;
	td_daemon_paths(&d);
	int n = snprintf(d.sock, sizeof d.sock, "%s/", d.dir);
	memset(d.sock + n, 'x', 150);
	d.sock[n + 150] = '\0';
	pid_t pid = td_daemon_exec(&d, NULL);
	ck_assert_int_eq(td_wait_pid(pid, T_START_MS), 1);
	ck_assert_ptr_nonnull(strstr(td_slurp(d.log), "too long"));
	/* nothing was bound at a truncated path either */
	ck_assert_int_eq(access(d.sock, F_OK), -1);
}
END_TEST

START_TEST(test_daemon_shutdown_command)
{
	td_daemon d;
	td_daemon_paths(&d);
	/* our own group: any user may give a file to it */
	char gid[32];
	snprintf(gid, sizeof gid, "%lu", (unsigned long)getgid());
	const char *const extra[] = {"--group", gid, NULL};
	td_daemon_start(&d, extra);
	struct stat sb;
	ck_assert_int_eq(stat(d.sock, &sb), 0);
	ck_assert_msg((sb.st_mode & 0777) == 0660, "socket mode %o with --group",
		sb.st_mode & 0777);
	ck_assert_uint_eq(sb.st_gid, getgid());
	td_conn c = td_open(&d);
	json_t *r = td_request(&c, "{\"execute\":\"daemon-shutdown\",\"id\":1}");
	td_expect_return(r);
	json_decref(r);
	ck_assert_int_eq(td_wait_pid(d.pid, T_STOP_MS), 0);
	ck_assert_int_eq(access(d.sock, F_OK), -1);
	td_close(&c);
}
END_TEST

/* ---- workers: stand-ins ---- */

START_TEST(test_daemon_worker_missing)
{
	td_daemon d;
	td_daemon_paths(&d);
	static const char *const extra[] = {"--worker", "/nonexistent/remat-train", NULL};
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	/* the spec is checked by the worker program before the job exists: refused now, with
	 * the path that is missing */
	json_t *r = td_request(&c, "{\"execute\":\"job-start\",\"arguments\":{\"spec\":%s}}",
		T_TINY_SPEC);
	const char *desc = td_expect_error(r, "Internal");
	ck_assert_msg(strstr(desc, "/nonexistent/remat-train"), "desc: %s", desc);
	json_decref(r);
	r = td_request(&c, "{\"execute\":\"job-list\"}");
	ck_assert_uint_eq(json_array_size(json_object_get(td_expect_return(r), "jobs")), 0);
	json_decref(r);
	/* daemon-info says why it cannot tell what the workers run */
	r = td_request(&c, "{\"execute\":\"daemon-info\"}");
	ck_assert_ptr_nonnull(strstr(td_str(td_expect_return(r), "blas"), "unknown"));
	json_decref(r);
	td_alive(&d);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_daemon_worker_exit_status)
{
	td_daemon d;
	td_daemon_paths(&d);
	char *w = td_script(&d, "worker.sh", "echo 'remat-train: cannot open data' >&2; exit 3");
	const char *extra[] = {"--worker", w, NULL};
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	const char *job = td_job_start(&c, T_TINY_SPEC, NULL);
	json_t *data = td_wait_state(&c, job, "failed", T_READ_MS);
	ck_assert_int_eq(json_integer_value(json_object_get(data, "exit_status")), 3);
	ck_assert_ptr_nonnull(strstr(td_str(data, "reason"), "exit status 3"));
	/* the worker's last words are in the reason, its log in the job's directory */
	ck_assert_ptr_nonnull(strstr(td_str(data, "reason"), "cannot open data"));
	json_decref(data);
	json_t *st = td_job_status(&c, job);
	ck_assert_str_eq(td_str(st, "state"), "failed");
	ck_assert_int_eq(json_integer_value(json_object_get(st, "exit_status")), 3);
	ck_assert(json_is_null(json_object_get(st, "pid")));
	json_decref(st);
	char path[800];
	snprintf(path, sizeof path, "%s/jobs/%s/job.json", d.state, job);
	struct stat sb;
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0600);
	/* save.dir was added under the state directory */
	json_t *spec = json_load_file(path, 0, NULL);
	ck_assert_ptr_nonnull(spec);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(json_object_get(spec,
		"save"), "dir")), d.state));
	json_decref(spec);
	td_alive(&d);
	td_close(&c);
	td_daemon_stop(&d);
	free(w);
}
END_TEST

/* count mem-stats requests for job with ids 1..count, one line each, into buf. */
static size_t t_batch(char *buf, size_t len, const char *job, int count)
{
	size_t n = 0;
	for (int i = 1; i <= count; i++) {
		n += (size_t)snprintf(buf + n, len - n, "{\"execute\":\"mem-stats\","
			"\"arguments\":{\"job\":\"%s\"},\"id\":%d}\n", job, i);
		ck_assert_uint_lt(n, len);
	}
	return n;
}

/* job-kill (rematctl kill): a worker that never answers, and a child of its own, both
 * SIGKILLed at once (its process group); the job fails with the kill as its reason; a
 * queued job is cancelled, an ended one refused. */
START_TEST(test_daemon_job_kill)
{
	td_daemon d;
	td_daemon_paths(&d);
	char *w = td_script(&d, "worker.sh", "sleep 600 & echo $! > child.pid; exec sleep 600");
	const char *extra[] = {"--worker", w, "--max-jobs", "1", NULL};
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	char job[16], queued[16];
	snprintf(job, sizeof job, "%s", td_job_start(&c, T_TINY_SPEC, "starting"));
	snprintf(queued, sizeof queued, "%s", td_job_start(&c, T_TINY_SPEC, "queued"));
	char path[800];
	snprintf(path, sizeof path, "%s/jobs/%s/child.pid", d.state, job);
	pid_t child = 0; /* td_slurp's buffer is its own */
	for (long end = td_ms() + T_READ_MS; child <= 0 && td_ms() < end; td_sleep_ms(20))
		child = (pid_t)atol(td_slurp(path));
	ck_assert_msg(child > 0, "the stand-in worker wrote no %s", path);

	char *out;
	int rc = td_ctl(&d, &out, "kill", job, NULL);
	ck_assert_msg(rc == 0 && strstr(out, "killed"), "kill: %d %s", rc, out);
	free(out);
	json_t *data = td_wait_state(&c, job, "failed", T_READ_MS);
	ck_assert_msg(strstr(td_str(data, "reason"), "killed by signal 9 (job-kill from client"),
		"reason: %s", td_str(data, "reason"));
	json_decref(data);
	/* the child went with it: gone, or a zombie waiting for whoever adopted it */
	char stat[64];
	snprintf(stat, sizeof stat, "/proc/%ld/stat", (long)child);
	int gone = 0;
	for (long end = td_ms() + T_READ_MS; !gone && td_ms() < end; td_sleep_ms(20))
		gone = access(stat, R_OK) < 0 || strstr(td_slurp(stat), ") Z ") != NULL;
	ck_assert_msg(gone, "the worker's child %ld outlived job-kill", (long)child);

	/* the queued one started when the slot freed: killed too; an ended job is refused */
	json_decref(td_wait_state(&c, queued, "starting", T_READ_MS));
	json_t *r = td_request(&c, "{\"execute\":\"job-kill\",\"arguments\":{\"job\":\"%s\"}}",
		job);
	ck_assert_ptr_nonnull(strstr(td_expect_error(r, "InvalidState"), "no worker to kill"));
	json_decref(r);
	rc = td_ctl(&d, &out, "kill", queued, NULL);
	ck_assert_msg(rc == 0, "kill: %d %s", rc, out);
	free(out);
	json_decref(td_wait_state(&c, queued, "failed", T_READ_MS));
	ck_assert_ptr_nonnull(strstr(td_slurp(d.log), "job-kill"));
	td_alive(&d);
	td_close(&c);
	td_daemon_stop(&d);
	free(w);
}
END_TEST

/* A rematd with option (one second) whose job's stand-in worker says it runs, then neither
 * steps nor answers: subscribed on *c, the job's id into job (16 bytes), running; the
 * worker's path (the caller frees it). */
static char *silent_job(td_daemon *d, td_conn *c, char *job, const char *option)
{
	td_daemon_paths(d);
	char *w = td_script(d, "worker.sh", TD_WORKER_RUNNING "exec sleep 600");
	const char *extra[] = {"--worker", w, option, "1", NULL};
	td_daemon_start(d, extra);
	*c = td_open(d);
	json_decref(td_request(c, "{\"execute\":\"subscribe\"}"));
	snprintf(job, 16, "%s", td_job_start(c, T_TINY_SPEC, "starting"));
	json_decref(td_wait_state(c, job, "running", T_READ_MS));
	return w;
}

/* silent_job's job failing, its reason naming because; the daemon stopped, w freed: the ms
 * it took from the call */
static long silent_job_fails(td_daemon *d, td_conn *c, const char *job, char *w,
	const char *because)
{
	long t0 = td_ms();
	json_t *data = td_wait_state(c, job, "failed", T_READ_MS);
	long took = td_ms() - t0;
	ck_assert_msg(strstr(td_str(data, "reason"), because), "reason: %s",
		td_str(data, "reason"));
	json_decref(data);
	td_alive(d);
	td_close(c);
	td_daemon_stop(d);
	free(w);
	return took;
}

/* A worker that stops answering: a client's job-stop waits rematd's --stop-timeout, then is
 * told the stop stays asked and that kill ends the worker; kill does. */
START_TEST(test_daemon_stop_timeout)
{
	td_daemon d;
	td_conn c;
	char job[16], *w = silent_job(&d, &c, job, "--stop-timeout");
	char *out;
	long t0 = td_ms();
	int rc = td_ctl(&d, &out, "stop", job, NULL);
	long waited = td_ms() - t0;
	ck_assert_msg(rc == 0 && strstr(out, "job-stop queued, not yet applied") &&
			      strstr(out, "rematctl kill"), "stop: %d %s", rc, out);
	ck_assert_msg(waited >= 900 && waited < T_READ_MS, "stop answered after %ld ms", waited);
	free(out);
	/* still running (rematd's table: the worker answers nothing) */
	json_t *r = td_request(&c, "{\"execute\":\"job-list\"}");
	json_t *jobs = json_object_get(td_expect_return(r), "jobs");
	ck_assert_str_eq(td_str(json_array_get(jobs, 0), "state"), "running");
	json_decref(r);
	rc = td_ctl(&d, &out, "kill", job, NULL);
	ck_assert_msg(rc == 0, "kill: %d %s", rc, out);
	free(out);
	silent_job_fails(&d, &c, job, w, "(job-kill from client");
}
END_TEST

/* The stall watchdog: a running job whose step does not move for --stall-timeout fails,
 * its worker and its processes killed, the stall its reason. */
START_TEST(test_daemon_stall_timeout)
{
	td_daemon d;
	td_conn c;
	char job[16], *w = silent_job(&d, &c, job, "--stall-timeout");
	long took = silent_job_fails(&d, &c, job, w, "s: rematd's stall timeout)");
	ck_assert_msg(took >= 900, "failed after %ld ms, under its stall timeout", took);
}
END_TEST

/* A worker that never answers: requests stay in flight; kill -9 fails the job and every
 * pending request. */
START_TEST(test_daemon_worker_killed_inflight)
{
	td_daemon d;
	td_daemon_paths(&d);
	char *w = td_script(&d, "worker.sh", "exec sleep 60");
	const char *extra[] = {"--worker", w, NULL};
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\",\"arguments\":{\"events\":"
		"[\"JOB_STATE_CHANGED\"]}}"));
	const char *job = td_job_start(&c, T_TINY_SPEC, "starting");
	/* not greeted yet: job-status comes from the table, with the pid */
	json_t *st = td_job_status(&c, job);
	ck_assert_str_eq(td_str(st, "state"), "starting");
	pid_t wpid = (pid_t)json_integer_value(json_object_get(st, "pid"));
	ck_assert_int_gt(wpid, 0);
	json_decref(st);
	/* nine requests in one write: eight go to the worker, the ninth is Busy */
	char batch[4096];
	size_t n = t_batch(batch, sizeof batch, job, PROTO_MAX_INFLIGHT + 1);
	td_send_raw(&c, batch, n);
	json_t *r = td_reply(&c, T_READ_MS);
	td_expect_error(r, "Busy");
	ck_assert_int_eq(json_integer_value(json_object_get(r, "id")), PROTO_MAX_INFLIGHT + 1);
	json_decref(r);
	/* another client leaves requests pending and hangs up: their answers are dropped */
	td_conn gone = td_open(&d);
	n = t_batch(batch, sizeof batch, job, 3);
	td_send_raw(&gone, batch, n);
	r = td_request(&gone, "{\"execute\":\"job-list\"}");
	td_expect_return(r);
	json_decref(r);
	td_close(&gone);
	td_sleep_ms(50);
	ck_assert_int_eq(kill(wpid, SIGKILL), 0);
	/* the eight get an error naming the signal, then the state change */
	int seen[PROTO_MAX_INFLIGHT + 1] = {0};
	for (int i = 0; i < PROTO_MAX_INFLIGHT; i++) {
		r = td_reply(&c, T_READ_MS);
		const char *desc = td_expect_error(r, "InvalidState");
		ck_assert_msg(strstr(desc, "signal 9") && strstr(desc, job), "desc: %s", desc);
		int id = (int)json_integer_value(json_object_get(r, "id"));
		ck_assert(id >= 1 && id <= PROTO_MAX_INFLIGHT && !seen[id]);
		seen[id] = 1;
		json_decref(r);
	}
	json_t *data = td_wait_state(&c, job, "failed", T_READ_MS);
	ck_assert_ptr_nonnull(strstr(td_str(data, "reason"), "killed by signal 9"));
	ck_assert_int_eq(json_integer_value(json_object_get(data, "signal")), 9);
	ck_assert(json_is_null(json_object_get(data, "exit_status")));
	json_decref(data);
	ck_assert_ptr_nonnull(strstr(td_slurp(d.log), "failed: killed by signal 9"));
	td_alive(&d);
	td_close(&c);
	td_daemon_stop(&d);
	free(w);
}
END_TEST

/* A job-status the worker never answers because it ends first (a clean exit just as the
 * request reached it): the client gets the record's answer, the job finished, never an
 * error (the race test_e2e_training_loop once lost on a loaded machine). */
START_TEST(test_daemon_status_cut_by_worker_end)
{
	td_daemon d;
	td_daemon_paths(&d);
	char *w = td_script(&d, "worker.sh", TD_WORKER_RUNNING
		"while IFS= read -r line <&3; do\n"
		"case $line in *'\"job-status\"'*) exit 0 ;; esac\n"
		"done\n");
	const char *extra[] = {"--worker", w, NULL};
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\",\"arguments\":{\"events\":"
		"[\"JOB_STATE_CHANGED\"]}}"));
	char job[16];
	snprintf(job, sizeof job, "%s", td_job_start(&c, T_TINY_SPEC, "starting"));
	json_decref(td_wait_state(&c, job, "running", T_READ_MS));
	json_t *r = td_request(&c, "{\"execute\":\"job-status\",\"arguments\":{\"job\":"
		"\"%s\"}}", job);
	ck_assert_str_eq(td_str(td_expect_return(r), "state"), "finished");
	json_decref(r);
	td_alive(&d);
	td_close(&c);
	td_daemon_stop(&d);
	free(w);
}
END_TEST

/* --max-jobs 1 queues the second job; it starts when the first ends. */
START_TEST(test_daemon_worker_queue)
{
	td_daemon d;
	td_daemon_paths(&d);
	char *w = td_script(&d, "worker.sh", "exec sleep 60");
	const char *extra[] = {"--worker", w, "--max-jobs", "1", "--stop-timeout", "1", NULL};
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	char j1[16], j2[16];
	snprintf(j1, sizeof j1, "%s", td_job_start(&c, T_TINY_SPEC, "starting"));
	snprintf(j2, sizeof j2, "%s", td_job_start(&c, T_TINY_SPEC, "queued"));
	json_t *r = td_request(&c, "{\"execute\":\"job-list\"}");
	json_t *jobs = json_object_get(td_expect_return(r), "jobs");
	ck_assert_uint_eq(json_array_size(jobs), 2);
	ck_assert_str_eq(td_str(json_array_get(jobs, 1), "job"), j2);
	ck_assert_str_eq(td_str(json_array_get(jobs, 1), "state"), "queued");
	ck_assert(json_is_null(json_object_get(json_array_get(jobs, 1), "pid")));
	pid_t wpid = (pid_t)json_integer_value(json_object_get(json_array_get(jobs, 0), "pid"));
	json_decref(r);
	r = td_request(&c, "{\"execute\":\"remat-get\",\"arguments\":{\"job\":\"%s\"}}", j2);
	ck_assert_ptr_nonnull(strstr(td_expect_error(r, "InvalidState"), "queued"));
	json_decref(r);
	ck_assert_int_eq(kill(wpid, SIGKILL), 0);
	json_decref(td_wait_state(&c, j1, "failed", T_READ_MS));
	json_decref(td_wait_state(&c, j2, "starting", T_READ_MS));
	/* shutdown: job-stop goes unanswered by this worker, the timeout kills it, exit 0 */
	td_daemon_stop(&d);
	ck_assert_ptr_nonnull(strstr(td_slurp(d.log), "shutdown timeout"));
	td_close(&c);
	free(w);
}
END_TEST

/* ---- the real worker (remat-train --control-fd) ---- */

START_TEST(test_daemon_real_worker_killed)
{
	td_daemon d;
	td_daemon_paths(&d);
	const char *extra[] = {"--worker", t_env("REMAT_TRAIN"), NULL};
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	const char *job = td_job_start(&c, T_TINY_SPEC, "starting");
	td_wait_step(&c, job);
	json_t *r = td_request(&c, "{\"execute\":\"job-list\"}");
	json_t *e = json_array_get(json_object_get(td_expect_return(r), "jobs"), 0);
	ck_assert_str_eq(td_str(e, "job"), job);
	ck_assert_str_eq(td_str(e, "state"), "running");
	json_decref(r);
	/* forwarded to the worker, with the pid added by the daemon */
	json_t *st = td_job_status(&c, job);
	ck_assert_str_eq(td_str(st, "state"), "running");
	ck_assert_int_gt(json_integer_value(json_object_get(st, "step")), 0);
	pid_t wpid = (pid_t)json_integer_value(json_object_get(st, "pid"));
	ck_assert_int_gt(wpid, 0);
	json_decref(st);
	/* STEP events are paced: at most SRV's 20 a second per job (a little slack) */
	long end = td_ms() + 1000;
	int steps = 0;
	while (td_ms() < end) {
		json_t *o = td_read_msg(&c, (int)(end - td_ms()) + 1);
		if (!o)
			break;
		const char *ev = json_string_value(json_object_get(o, "event"));
		steps += ev && strcmp(ev, "STEP") == 0;
		json_decref(o);
	}
	ck_assert_msg(steps <= 25, "%d STEP events in one second", steps);
	ck_assert_int_eq(kill(wpid, SIGKILL), 0);
	json_t *data = td_wait_state(&c, job, "failed", T_READ_MS);
	ck_assert_ptr_nonnull(strstr(td_str(data, "reason"), "signal 9"));
	json_decref(data);
	td_alive(&d);
	st = td_job_status(&c, job);
	ck_assert_str_eq(td_str(st, "state"), "failed");
	json_decref(st);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

START_TEST(test_daemon_real_worker_queue_and_shutdown)
{
	td_daemon d;
	td_daemon_paths(&d);
	const char *extra[] = {"--worker", t_env("REMAT_TRAIN"), "--max-jobs", "1", NULL};
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\",\"arguments\":{\"events\":"
		"[\"STEP\",\"JOB_STATE_CHANGED\"]}}"));
	char j1[16], j2[16];
	snprintf(j1, sizeof j1, "%s", td_job_start(&c, T_TINY_SPEC, "starting"));
	snprintf(j2, sizeof j2, "%s", td_job_start(&c, T_TINY_SPEC, "queued"));
	td_wait_step(&c, j1);
	/* job-stop's reply is deferred to the step boundary; then j2 gets the slot */
	json_t *r = td_request(&c, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\"},"
		"\"id\":\"stop\"}", j1);
	ck_assert_str_eq(json_string_value(json_object_get(r, "id")), "stop");
	ck_assert(json_is_integer(json_object_get(td_expect_return(r), "step")));
	json_decref(r);
	json_decref(td_wait_state(&c, j1, "stopped", T_JOB_MS));
	td_wait_step(&c, j2);
	/* shutdown with saving: the worker saves, the daemon exits 0 */
	r = td_request(&c, "{\"execute\":\"daemon-shutdown\",\"arguments\":{\"save\":true}}");
	td_expect_return(r);
	json_decref(r);
	ck_assert_int_eq(td_wait_pid(d.pid, T_JOB_MS), 0);
	ck_assert_int_eq(access(d.sock, F_OK), -1);
	char latest[800];
	snprintf(latest, sizeof latest, "%s/jobs/%s/checkpoints/latest", d.state, j2);
	ck_assert_msg(access(latest, F_OK) == 0, "no checkpoint saved at shutdown: %s", latest);
	td_close(&c);
}
END_TEST

/* SIGTERM with a job running: the worker is stopped with saving, the daemon exits 0. */
START_TEST(test_daemon_real_worker_sigterm)
{
	td_daemon d;
	td_daemon_paths(&d);
	const char *extra[] = {"--worker", t_env("REMAT_TRAIN"), NULL};
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	const char *job = td_job_start(&c, T_TINY_SPEC, "starting");
	td_wait_step(&c, job);
	td_daemon_stop(&d);
	char latest[800];
	snprintf(latest, sizeof latest, "%s/jobs/%s/checkpoints/latest", d.state, job);
	ck_assert_msg(access(latest, F_OK) == 0, "no checkpoint saved on SIGTERM: %s", latest);
	/* the subscriber saw the job stop before the daemon closed the connection */
	json_decref(td_wait_state(&c, job, "stopped", T_READ_MS));
	td_close(&c);
}
END_TEST

/* remat-profile through rematd: the next steps cycle every section through its modes,
 * remat-set is refused meanwhile, and remat-costs then has samples in every cell with the
 * bytes each mode kept (full < selective < off for a block, chunked < off for the head). */
START_TEST(test_daemon_profile_fills_costs)
{
	td_daemon d;
	char id[16];
	td_conn c = td_real_job(&d, id);
	json_t *r = td_request(&c, "{\"execute\":\"remat-profile\",\"arguments\":{\"job\":\"%s\","
		"\"rounds\":2}}", id);
	json_t *ret = td_expect_return(r);
	int until = (int)json_integer_value(json_object_get(ret, "until_step"));
	ck_assert_int_eq(until - (int)json_integer_value(json_object_get(ret, "applies_at_step")),
		PROTO_PROFILE_STEPS(2) - 1);
	json_decref(r);
	r = td_request(&c, "{\"execute\":\"remat-set\",\"arguments\":{\"job\":\"%s\","
		"\"sections\":{\"h.0\":\"full\"}}}", id);
	ck_assert_str_eq(td_str(json_object_get(r, "error"), "class"), "InvalidState");
	ck_assert_ptr_nonnull(strstr(td_str(json_object_get(r, "error"), "desc"), "measuring"));
	json_decref(r);
	for (int tries = 0;; tries++) {
		json_t *st = td_job_status(&c, id);
		int step = (int)json_integer_value(json_object_get(st, "step"));
		json_decref(st);
		if (step > until)
			break;
		ck_assert_msg(tries < 600, "the job did not pass step %d", until);
		td_sleep_ms(50);
	}
	r = td_request(&c, "{\"execute\":\"remat-costs\",\"arguments\":{\"job\":\"%s\"}}", id);
	ret = td_expect_return(r);
	ck_assert(json_is_null(json_object_get(ret, "probing_until")));
	json_t *secs = json_object_get(ret, "sections"), *sec;
	size_t i;
	ck_assert_uint_eq(json_array_size(secs), 3); /* tiny: h.0, h.1, head */
	json_array_foreach(secs, i, sec) {
		json_t *modes = json_object_get(sec, "modes");
		int head = i == 2;
		static const char *const bm[] = {"off", "selective", "full"}, *const hm[] = {"off",
			"chunked"};
		json_int_t prev = -1;
		for (int k = 0; k < (head ? 2 : 3); k++) {
			json_t *cell = json_object_get(modes, head ? hm[k] : bm[k]);
			ck_assert_msg(cell, "%s: no %s", td_str(sec, "name"), head ? hm[k] : bm[k]);
			ck_assert_int_ge(json_integer_value(json_object_get(cell, "samples")), 2);
			json_int_t saved = json_integer_value(json_object_get(cell, "saved_bytes"));
			ck_assert_msg(prev < 0 || saved < prev, "%s: %s keeps %lld, not less than %lld",
				td_str(sec, "name"), head ? hm[k] : bm[k], (long long)saved,
				(long long)prev);
			prev = saved;
			ck_assert(json_is_number(json_object_get(cell, "added_ms")));
		}
	}
	json_decref(r);
	/* the probe over, the policy is the user's again and can be set */
	r = td_request(&c, "{\"execute\":\"remat-set\",\"arguments\":{\"job\":\"%s\","
		"\"sections\":{\"h.0\":\"full\"}}}", id);
	td_expect_return(r);
	json_decref(r);
	td_daemon_stop(&d);
	td_close(&c);
}
END_TEST

/* rematctl's argv with argv[at] its --trace FILE: FILE a symbolic link (to a file not
 * there) or a hard link (to one there), in dir, is refused, and what it names stays as it
 * was (absent; its 4 bytes) */
static void trace_links_refused(char **argv, int at, const char *dir)
{
	char sym[700], hard[700], target[700], *out, *text;
	size_t len;
	snprintf(sym, sizeof sym, "%s/link.json", dir);
	snprintf(hard, sizeof hard, "%s/hard.json", dir);
	snprintf(target, sizeof target, "%s/elsewhere.json", dir);
	ck_assert_int_eq(symlink(target, sym), 0);
	argv[at] = sym;
	int rc = t_run(argv, &out);
	ck_assert_msg(rc == 1 && strstr(out, "symbolic link"), "%d: %s", rc, out);
	ck_assert_int_eq(access(target, F_OK), -1);
	free(out);
	t_write_file(target, "keep", 4);
	ck_assert_int_eq(link(target, hard), 0);
	argv[at] = hard;
	rc = t_run(argv, &out);
	ck_assert_msg(rc == 1 && strstr(out, "hard link"), "%d: %s", rc, out);
	free(out);
	text = t_read_file(target, &len);
	ck_assert(len == 4 && memcmp(text, "keep", 4) == 0);
	free(text);
}

/* remat-memlog through rematd: the last steps' peaks (each category within the step's
 * peak, every section named), the last step's timeline in PyTorch's snapshot and as a
 * Chrome trace, bad arguments refused; rematctl remat memlog --trace writes the file. */
START_TEST(test_daemon_memlog)
{
	td_daemon d;
	char id[16];
	td_conn c = td_real_job(&d, id);
	td_sleep_ms(300); /* a few steps */
	json_t *r = td_request(&c, "{\"execute\":\"remat-memlog\",\"arguments\":{\"job\":\"%s\","
		"\"steps\":2,\"trace\":\"pytorch\"}}", id);
	json_t *ret = td_expect_return(r), *row;
	json_t *rows = json_object_get(ret, "steps");
	ck_assert_uint_eq(json_array_size(rows), 2);
	size_t i;
	json_array_foreach(rows, i, row) {
		json_int_t peak = json_integer_value(json_object_get(row, "peak_bytes")), sum = 0;
		const char *k;
		json_t *v;
		json_object_foreach(json_object_get(row, "categories"), k, v) {
			ck_assert_msg(json_integer_value(v) <= peak, "%s over the peak", k);
			sum += json_integer_value(v);
		}
		ck_assert_int_ge(sum, peak); /* each at its own peak: together at least the peak */
		json_t *secs = json_object_get(row, "sections");
		ck_assert_uint_eq(json_object_size(secs), 3); /* tiny: h.0, h.1, head */
		ck_assert_int_gt(json_integer_value(json_object_get(secs, "head")), 0);
	}
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(rows, 1), "step")),
		json_integer_value(json_object_get(json_array_get(rows, 0), "step")) + 1);
	json_t *tr = json_object_get(ret, "trace");
	ck_assert_str_eq(td_str(tr, "format"), "pytorch");
	json_t *dev = json_array_get(json_object_get(json_object_get(tr, "data"), "device_traces"), 0);
	ck_assert_int_gt(json_array_size(dev), 10);
	ck_assert_str_eq(td_str(json_array_get(dev, 0), "action"), "alloc");
	json_decref(r);
	r = td_request(&c, "{\"execute\":\"remat-memlog\",\"arguments\":{\"job\":\"%s\","
		"\"trace\":\"chrome\"}}", id);
	ret = td_expect_return(r);
	ck_assert_int_gt(json_array_size(json_object_get(json_object_get(json_object_get(ret,
		"trace"), "data"), "traceEvents")), 10);
	json_decref(r);
	static const char *const bad[] = {"\"steps\":0", "\"steps\":257", "\"trace\":\"svg\"",
		"\"trace\":true"};
	for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
		r = td_request(&c, "{\"execute\":\"remat-memlog\",\"arguments\":{\"job\":\"%s\",%s}}",
			id, bad[b]);
		ck_assert_msg(!strcmp(td_str(json_object_get(r, "error"), "class"),
			"InvalidParameter"), "%s accepted", bad[b]);
		json_decref(r);
	}
	char path[700], *out;
	snprintf(path, sizeof path, "%s/step.json", d.dir);
	char *argv[] = {(char *)t_env("REMATCTL"), "--socket", d.sock, "remat", "memlog", id,
		"--count", "3", "--trace", path, NULL};
	int rc = t_run(argv, &out);
	ck_assert_msg(rc == 0 && strstr(out, "PEAK") && strstr(out, "memory_viz"), "%d: %s", rc,
		out);
	free(out);
	size_t len;
	char *text = t_read_file(path, &len);
	json_t *snap = text ? json_loads(text, 0, NULL) : NULL;
	ck_assert_msg(json_is_array(json_object_get(snap, "device_traces")), "%s", path);
	json_decref(snap);
	free(text);
	trace_links_refused(argv, 9, d.dir);
	td_daemon_stop(&d);
	td_close(&c);
}
END_TEST

/* A step whose timeline, buffer by buffer, is over the protocol's 1 MiB line (100 blocks
 * under full): the worker merges it by section rather than sending a line rematd must cut
 * (which would kill the job); the job keeps running. */
START_TEST(test_daemon_memlog_large)
{
	td_daemon d;
	const char *extra[] = {"--worker", t_env("REMAT_TRAIN"), NULL};
	td_daemon_paths(&d);
	td_daemon_start(&d, extra);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\"}"));
	char id[16];
	snprintf(id, sizeof id, "%s", td_job_start(&c, "{\"model\":{\"n_layer\":100,\"n_embd\":32,"
		"\"n_head\":2,\"n_positions\":32,\"vocab_size\":256},\"data\":{\"train\":\"" T_GPL
		"\",\"format\":\"bytes\"},\"batch\":2,\"seq_len\":32,\"steps\":1000000,\"threads\":2,"
		"\"remat\":{\"default\":\"full\"}}", "starting"));
	td_wait_step(&c, id);
	static const char *const fmts[] = {"chrome", "pytorch"};
	for (int f = 0; f < 2; f++) {
		json_t *r = td_request(&c, "{\"execute\":\"remat-memlog\",\"arguments\":{\"job\":\"%s\","
			"\"trace\":\"%s\"}}", id, fmts[f]);
		json_t *tr = json_object_get(td_expect_return(r), "trace");
		/* Chrome's, a counter sample an event, is past the line unmerged (1.3 MB) */
		ck_assert_msg(f == 1 || json_is_true(json_object_get(tr, "merged")), "%s not merged",
			fmts[f]);
		ck_assert(json_is_object(json_object_get(tr, "data")));
		ck_assert_int_gt(json_integer_value(json_object_get(tr, "events")), 100);
		json_decref(r);
	}
	json_t *st = td_job_status(&c, id);
	ck_assert_str_eq(td_str(st, "state"), "running");
	json_decref(st);
	td_daemon_stop(&d);
	td_close(&c);
}
END_TEST

Suite *suite_daemon(void)
{
	Suite *s = suite_create("daemon");
	TCase *tc = tcase_create("daemon");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_daemon_info_and_sigterm);
	tcase_add_test(tc, test_daemon_info_without_waiting);
	tcase_add_test(tc, test_daemon_bad_json);
	tcase_add_test(tc, test_daemon_not_a_request);
	tcase_add_test(tc, test_daemon_unknown_command);
	tcase_add_test(tc, test_daemon_bad_arguments);
	tcase_add_test(tc, test_daemon_unknown_job);
	tcase_add_test(tc, test_daemon_relative_paths);
	tcase_add_test(tc, test_daemon_line_too_large);
	tcase_add_test(tc, test_daemon_half_message);
	tcase_add_test(tc, test_daemon_many_connections);
	tcase_add_test(tc, test_daemon_connection_limit);
	tcase_add_test(tc, test_daemon_slow_reader);
	tcase_add_test(tc, test_daemon_other_uid);
	tcase_add_test(tc, test_daemon_second_refused);
	tcase_add_test(tc, test_daemon_stale_socket);
	tcase_add_test(tc, test_daemon_not_a_socket);
	tcase_add_test(tc, test_daemon_path_too_long);
	tcase_add_test(tc, test_daemon_shutdown_command);
	suite_add_tcase(s, tc);

	tc = tcase_create("workers");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_daemon_worker_missing);
	tcase_add_test(tc, test_daemon_worker_exit_status);
	tcase_add_test(tc, test_daemon_worker_killed_inflight);
	tcase_add_test(tc, test_daemon_job_kill);
	tcase_add_test(tc, test_daemon_stop_timeout);
	tcase_add_test(tc, test_daemon_stall_timeout);
	tcase_add_test(tc, test_daemon_status_cut_by_worker_end);
	tcase_add_test(tc, test_daemon_worker_queue);
	suite_add_tcase(s, tc);

	/* needs remat-train --control-fd (the worker side of docs/protocol.md) */
	tc = tcase_create("real-worker");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_daemon_real_worker_killed);
	tcase_add_test(tc, test_daemon_real_worker_queue_and_shutdown);
	tcase_add_test(tc, test_daemon_real_worker_sigterm);
	tcase_add_test(tc, test_daemon_profile_fills_costs);
	tcase_add_test(tc, test_daemon_memlog);
	tcase_add_test(tc, test_daemon_memlog_large);
	suite_add_tcase(s, tc);
	return s;
}
