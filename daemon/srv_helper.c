/* srv_helper.c - remat-train --check and --info, run from the loop (see srv_helper.h).
 * Not here: what their answers mean (srv_job.c, srv_cmd.c).
 */
#include "srv_helper.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_fs.h"

#define HELPER_MAX_ARGS 8        /* arguments one helper gets, program name excluded */
#define HELPER_TMP_MODE 0700     /* STATE_DIR/tmp */
#define HELPER_SPEC_MODE 0600    /* a spec given to a helper: it may name private paths */

struct srv_helper {
	srv_server *srv;
	uv_process_t proc;           /* remat-train */
	uv_pipe_t out;               /* its stdout */
	uv_timer_t timer;            /* its time limit */
	int handles_open;            /* until their close callbacks ran: then it is freed */
	int exited, eof;             /* the two ends it needs before it answers */
	int64_t status;              /* exit status */
	int sig;                     /* the signal that ended it, 0 none */
	int timed_out;               /* 1 when the timer killed it */
	int overflow;                /* 1 when it wrote more than SRV_HELPER_OUT */
	size_t len;                  /* bytes in buf */
	char buf[SRV_HELPER_OUT + 1];
	char what[32];               /* "check", "info": for messages */
	int has_uid;                 /* 1 when it runs for a user (as): uid */
	uid_t uid;
	char spec_name[64];          /* its spec file in STATE_DIR/tmp, "" when none */
	char spec_path[SRV_PATH_LEN + 80]; /* the same as a path, the helper's argument */
	srv_helper_done_fn done;
	void *ud;
	srv_helper *next;            /* in srv->helpers */
};

int srv_helper_count(const srv_server *srv)
{
	int n = 0;
	for (const srv_helper *h = srv->helpers; h; h = h->next)
		n++;
	return n;
}

int srv_helper_count_of(const srv_server *srv, uid_t uid)
{
	int n = 0;
	for (const srv_helper *h = srv->helpers; h; h = h->next)
		n += h->has_uid && h->uid == uid;
	return n;
}

static void helper_on_close(uv_handle_t *hd)
{
	srv_helper *h = hd->data;
	if (--h->handles_open > 0)
		return;
	for (srv_helper **pp = &h->srv->helpers; *pp; pp = &(*pp)->next)
		if (*pp == h) {
			*pp = h->next;
			break;
		}
	free(h);
}

/* STATE_DIR/tmp, rematd's own: made when missing, opened as a directory of ours that is no
 * link. */
static int helper_tmp_dir(srv_server *srv, eng_dir *d, char *err, size_t errlen)
{
	eng_err e = {0};
	int rc = eng_dir_make_at(d, &srv->state_d, "tmp", HELPER_TMP_MODE, 0, &e);
	if (rc < 0)
		srv_fmt(err, errlen, "%s", e.msg);
	return rc;
}

/* Writes spec to a fresh STATE_DIR/tmp/helper-PID-N.json (h->spec_name; its full path in
 * h->spec_path for the helper to read). */
static int helper_write_spec(srv_helper *h, const json_t *spec, char *err, size_t errlen)
{
	eng_dir d;
	eng_err e = {0};
	if (helper_tmp_dir(h->srv, &d, err, errlen) < 0)
		return -1;
	snprintf(h->spec_name, sizeof h->spec_name, "helper-%ld-%u.json", (long)getpid(),
		++h->srv->next_helper);
	int rc = eng_fs_write_json(&d, h->spec_name, HELPER_SPEC_MODE, spec, &e);
	if (rc == 0)
		srv_fmt(h->spec_path, sizeof h->spec_path, "%s/%s", d.path, h->spec_name);
	else
		srv_fmt(err, errlen, "%s", e.msg);
	eng_dir_close(&d);
	if (rc < 0)
		h->spec_name[0] = '\0';
	return rc;
}

/* Removes the spec file of h, if any (a file of ours, never through a link). */
static void helper_remove_spec(srv_helper *h)
{
	eng_dir d;
	char err[8];
	if (!h->spec_name[0] || helper_tmp_dir(h->srv, &d, err, sizeof err) < 0)
		return;
	eng_fs_remove_file(&d, h->spec_name, NULL);
	eng_dir_close(&d);
	h->spec_name[0] = '\0';
}

/* The object on the last non-empty line of what h wrote, or NULL. */
static json_t *helper_answer(srv_helper *h)
{
	size_t n = h->len;
	while (n > 0 && (h->buf[n - 1] == '\n' || h->buf[n - 1] == '\r'))
		n--;
	h->buf[n] = '\0';
	char *line = memrchr(h->buf, '\n', n);
	line = line ? line + 1 : h->buf;
	json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, NULL);
	if (o && !json_is_object(o)) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

/* Both ends seen: the answer to done, then the handles go. */
static void helper_finish(srv_helper *h)
{
	char why[256] = "";
	json_t *o = NULL;
	helper_remove_spec(h);
	if (h->timed_out)
		snprintf(why, sizeof why, "remat-train --%s did not finish in time", h->what);
	else if (h->overflow)
		snprintf(why, sizeof why, "remat-train --%s wrote more than %u bytes", h->what,
			SRV_HELPER_OUT);
	else if (h->sig)
		snprintf(why, sizeof why, "remat-train --%s was killed by signal %d", h->what,
			h->sig);
	else if (!(o = helper_answer(h)))
		snprintf(why, sizeof why, "remat-train --%s gave no answer (exit status %lld)",
			h->what, (long long)h->status);
	if (h->done) /* not yet told (srv_helper_kill_all tells at once) */
		h->done(h->srv, h->ud, o, o ? NULL : why);
	json_decref(o);
	uv_close((uv_handle_t *)&h->timer, helper_on_close);
}

static void helper_on_exit(uv_process_t *p, int64_t status, int sig)
{
	srv_helper *h = p->data;
	h->exited = 1;
	h->status = status;
	h->sig = sig;
	uv_close((uv_handle_t *)p, helper_on_close);
	if (h->eof)
		helper_finish(h);
}

static void helper_on_alloc(uv_handle_t *hd, size_t suggested, uv_buf_t *buf)
{
	(void)suggested;
	srv_helper *h = hd->data;
	/* one byte past the limit is room to notice an overflow */
	size_t room = h->len < SRV_HELPER_OUT ? SRV_HELPER_OUT - h->len : 1;
	if (h->len >= SRV_HELPER_OUT)
		*buf = uv_buf_init(h->srv->rbuf, 1);
	else
		*buf = uv_buf_init(h->buf + h->len, (unsigned)room);
}

static void helper_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	srv_helper *h = s->data;
	if (n > 0) {
		if (buf->base == h->srv->rbuf)
			h->overflow = 1;
		else
			h->len += (size_t)n;
		return;
	}
	if (n == 0)
		return;
	h->eof = 1;
	uv_close((uv_handle_t *)&h->out, helper_on_close);
	if (h->exited)
		helper_finish(h);
}

static void helper_on_timer(uv_timer_t *t)
{
	srv_helper *h = t->data;
	if (h->exited)
		return;
	h->timed_out = 1;
	uv_process_kill(&h->proc, SIGKILL);
}

int srv_helper_run(srv_server *srv, const char *what, const char *const *args,
	const json_t *spec, const eng_cred *as, int timeout_ms, srv_helper_done_fn done,
	void *ud, char *err, size_t errlen)
{
	char as_arg[ENG_CRED_ARG_LEN];
	char *argv[HELPER_MAX_ARGS + 5];
	int n = 0;
	srv_helper *h = calloc(1, sizeof *h);
	if (!h) {
		srv_fmt(err, errlen, "out of memory");
		return -1;
	}
	h->srv = srv;
	h->done = done;
	h->ud = ud;
	snprintf(h->what, sizeof h->what, "%s", what);
	h->has_uid = as != NULL;
	h->uid = as ? as->uid : 0;
	argv[n++] = srv->worker_path;
	for (int i = 0; args[i] && i < HELPER_MAX_ARGS; i++)
		argv[n++] = (char *)args[i];
	if (as)
		n += srv_cred_args(srv, as, as_arg, argv + n);
	if (spec) {
		if (helper_write_spec(h, spec, err, errlen) < 0) {
			free(h);
			return -1;
		}
		argv[n++] = h->spec_path;
	}
	argv[n] = NULL;

	uv_pipe_init(srv->loop, &h->out, 0);
	h->out.data = h;
	uv_stdio_container_t stdio[3];
	stdio[0].flags = UV_IGNORE;
	stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
	stdio[1].data.stream = (uv_stream_t *)&h->out;
	stdio[2].flags = UV_INHERIT_FD; /* its complaints go to rematd's log */
	stdio[2].data.fd = 2;
	uv_process_options_t opt;
	memset(&opt, 0, sizeof opt);
	opt.exit_cb = helper_on_exit;
	opt.file = srv->worker_path;
	opt.args = argv;
	opt.cwd = srv->state_dir;
	opt.stdio_count = 3;
	opt.stdio = stdio;
	h->proc.data = h;
	int r = uv_spawn(srv->loop, &h->proc, &opt);
	if (r < 0) {
		srv_fmt(err, errlen, "cannot start '%s': %s", srv->worker_path, uv_strerror(r));
		helper_remove_spec(h);
		/* both handles were initialised: closed, and h freed by the last callback */
		h->handles_open = 2;
		h->next = srv->helpers;
		srv->helpers = h;
		uv_close((uv_handle_t *)&h->proc, helper_on_close);
		uv_close((uv_handle_t *)&h->out, helper_on_close);
		return -1;
	}
	uv_timer_init(srv->loop, &h->timer);
	h->timer.data = h;
	h->handles_open = 3;
	h->next = srv->helpers;
	srv->helpers = h;
	uv_timer_start(&h->timer, helper_on_timer, (uint64_t)timeout_ms, 0);
	r = uv_read_start((uv_stream_t *)&h->out, helper_on_alloc, helper_on_read);
	if (r < 0) {
		/* no answer can come: it is killed, and its end reported as one */
		h->eof = 1;
		uv_close((uv_handle_t *)&h->out, helper_on_close);
		uv_process_kill(&h->proc, SIGKILL);
	}
	return 0;
}

void srv_helper_kill_all(srv_server *srv, const char *why)
{
	for (srv_helper *h = srv->helpers; h; h = h->next) {
		if (!h->exited)
			uv_process_kill(&h->proc, SIGKILL);
		/* told now, while its client is still served: the shutdown closes the
		 * connections before the helper's end is read */
		srv_helper_done_fn done = h->done;
		h->done = NULL;
		if (done)
			done(srv, h->ud, NULL, why);
	}
}
