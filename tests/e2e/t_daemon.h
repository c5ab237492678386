/* t_daemon.h - helpers for the rematd tests (test_daemon.c): running the real daemon on a
 * temporary socket and state directory, and a small raw-protocol client (plain sockets and
 * poll with timeouts; rematctl is not used, so the daemon is tested on its own).
 *
 * Every daemon started here dies with its test process (PR_SET_PDEATHSIG), so a failed or
 * timed-out test leaves none behind. Failures are Check assertions that name what was
 * expected and quote the daemon's log where it helps.
 */
#ifndef T_DAEMON_H
#define T_DAEMON_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

#define T_READ_MS 5000         /* a reply the daemon owes at once arrives within this */
#define T_START_MS 10000       /* the daemon listens within this after exec */
#define T_STOP_MS 30000        /* and exits within this after SIGTERM */
#define T_JOB_MS 60000         /* a real worker reaches its first step within this */

/* Debian's copy of the GPL: a byte-level corpus every Debian system has. */
#define T_GPL "/usr/share/common-licenses/GPL-3"
/* A tiny job that runs until stopped or killed (the tests end it themselves). */
#define T_TINY_SPEC                                                                        \
	"{\"model\":{\"preset\":\"tiny\"},\"data\":{\"train\":\"" T_GPL "\","              \
	"\"format\":\"bytes\"},\"batch\":2,\"seq_len\":32,\"steps\":1000000,\"threads\":2}"

/* The start of a stand-in worker (td_script) that greets rematd on fd 3 as job $4 and says
 * it runs; what the script does next follows it. */
#define TD_WORKER_RUNNING                                                                  \
	"printf '{\"remat\":{\"version\":\"0.1.0\",\"protocol\":1,\"capabilities\":"       \
	"[\"events\"],\"role\":\"worker\",\"job\":\"%s\"}}\\n' \"$4\" >&3\n"                 \
	"printf '{\"event\":\"JOB_STATE_CHANGED\",\"data\":{\"job\":\"%s\",\"from\":"          \
	"\"starting\",\"to\":\"running\",\"reason\":\"training\"},\"timestamp\":{\"seconds\":" \
	"0,\"microseconds\":0}}\\n' \"$4\" >&3\n"

typedef struct td_daemon {
	pid_t pid;       /* the rematd process, 0 once reaped */
	char dir[512];   /* its scratch directory under REMAT_TMP */
	char sock[600];  /* dir/sock */
	char state[600]; /* dir/state */
	char log[600];   /* dir/rematd.log: its stderr */
} td_daemon;

typedef struct td_conn {
	int fd;          /* the client socket */
	char *buf;       /* bytes read and not yet returned as lines (malloc'd) */
	size_t len;      /* bytes in buf */
	size_t cap;      /* allocated */
} td_conn;

/* ---- time ---- */

long td_ms(void);            /* the monotonic clock in milliseconds */
void td_sleep_ms(int ms);
/* SIGSTOP to pid, then waits until every thread of it has stopped (kill only queues
 * the signal: a thread running on another core takes it a moment later). */
void td_sigstop(pid_t pid);

/* ---- the daemon ---- */

/* The first 64 KiB of a file as text (static buffer: valid until the next call). */
char *td_slurp(const char *path);
/* Fresh paths under REMAT_TMP for a daemon (the directory is created, mode 0700). */
void td_daemon_paths(td_daemon *d);
/* Runs rematd on d's socket and state dir with extra arguments (NULL-terminated, may be
 * NULL), stderr to d->log; returns its pid without waiting. */
pid_t td_daemon_exec(const td_daemon *d, const char *const *extra);
/* td_daemon_exec, then waits until the socket accepts connections (fails the test with the
 * log when the daemon exits or does not listen within T_START_MS). Sets d->pid. */
void td_daemon_start(td_daemon *d, const char *const *extra);
/* Waits until d->sock accepts connections; fails the test with the log when d->pid exits or
 * nothing listens within T_START_MS (a daemon started some other way, d->pid set). */
void td_wait_listening(const td_daemon *d);
/* SIGTERM; the daemon must exit 0 within T_STOP_MS and leave no socket behind. */
void td_daemon_stop(td_daemon *d);
/* Waits up to ms for pid: its exit status, 128+signal, or -1 when still running. */
int td_wait_pid(pid_t pid, int ms);
/* Writes an executable shell script into d->dir (a stand-in worker: body runs as the
 * worker; --check and --info go to the real remat-train); malloc'd path. */
char *td_script(const td_daemon *d, const char *name, const char *body);

/* ---- the raw protocol ---- */

/* A connected socket, or -1 with errno. */
int td_connect(const char *path);
/* Connects and reads the daemon's greeting (fails the test otherwise). */
td_conn td_open(const td_daemon *d);
void td_close(td_conn *c);
void td_send_raw(td_conn *c, const char *data, size_t len);
/* line + "\n" */
void td_send(td_conn *c, const char *line);
/* The next line (malloc'd, without '\n'), or NULL at the end of the stream or after ms. */
char *td_read_line(td_conn *c, int ms);
/* The next line parsed (new reference; fails the test when it is not JSON), or NULL. */
json_t *td_read_msg(td_conn *c, int ms);
/* The next reply (return or error), skipping events; fails the test after ms. */
json_t *td_reply(td_conn *c, int ms);
/* Sends a request line (printf-style) and returns the reply (new reference). */
json_t *td_request(td_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Asserts reply is an error of class cls; returns its description (borrowed). */
const char *td_expect_error(json_t *reply, const char *cls);
/* Asserts reply is a return; returns the return object (borrowed). */
json_t *td_expect_return(json_t *reply);
/* o[key] as a string (borrowed); fails the test when missing or not a string. */
const char *td_str(json_t *o, const char *key);

/* 1 when a fresh connection gets a daemon-info reply from d's pid; 0 when the daemon
 * refused it (Busy) or closed it. */
int td_try_info(const td_daemon *d);
/* The daemon answers daemon-info on a fresh connection, at once. */
void td_alive(const td_daemon *d);
/* The same within T_READ_MS (the daemon sees earlier hang-ups asynchronously). */
void td_alive_soon(const td_daemon *d);

/* ---- rematctl ---- */

/* rematctl --socket d->sock ARGS... (NULL-terminated, at most 20): its exit status, its
 * stdout and stderr in *out (malloc'd; may be NULL). */
int td_ctl(const td_daemon *d, char **out, ...);

/* ---- another user (a root rematd's --group peer) ---- */

#define TD_NOBODY 65534      /* the peer's uid (Debian's nobody) */
#define TD_PEER_GROUP "4242" /* rematd's --group, by number: no /etc/group entry needed */

/* Runs argv as uid TD_NOBODY with supplementary group TD_PEER_GROUP: its exit status (126:
 * it could not become that user), its stdout and stderr into *out (malloc'd). */
int td_run_as_peer(char *const argv[], char **out);
/* 1 when uid TD_NOBODY can reach dir (every parent searchable); else prints the line that
 * says why the test `what` skips, and returns 0. */
int td_peer_can_reach(const char *what, const char *dir);

/* ---- jobs ---- */

/* job-start with spec; checks the returned state when want_state is not NULL; returns the
 * job id (static storage: valid until the next call). */
const char *td_job_start(td_conn *c, const char *spec, const char *want_state);
/* job-status's return (new reference). */
json_t *td_job_status(td_conn *c, const char *job);
/* Waits for JOB_STATE_CHANGED of job to state `to`; returns its data (new reference). */
json_t *td_wait_state(td_conn *c, const char *job, const char *to, int ms);
/* The next event called name about job (skipping others), its data (new reference); fails
 * the test after ms. */
json_t *td_wait_event(td_conn *c, const char *job, const char *name, int ms);
/* Waits for the first STEP event of job (T_JOB_MS), failing early if the job fails. */
void td_wait_step(td_conn *c, const char *job);
/* A rematd running the real worker, a connection subscribed to every event, and a tiny
 * job (T_TINY_SPEC) past its first step, whose id goes to id (16 bytes). */
td_conn td_real_job(td_daemon *d, char *id);

#endif
