/* srv_job.c - the job table: ids, job-start's checks and files, the queue, states and their
 * events, job-status and job-list from the table, shutdown of every job. See srv_job.h.
 * Not here: the worker processes and their channels (srv_worker.c).
 */
#include "srv_job.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_err.h"
#include "eng_spec.h"
#include "srv_worker.h"

#define JOB_DIR_MODE 0700       /* STATE_DIR/jobs/ID and its checkpoints directory */
#define JOB_FILE_MODE 0600      /* job.json: a spec may name private paths */
#define JOB_ID_TRIES 64         /* ids skipped because their directory exists already */

static const char *const job_state_names[] = {
	[SRV_JOB_QUEUED] = "queued",     [SRV_JOB_STARTING] = "starting",
	[SRV_JOB_RUNNING] = "running",   [SRV_JOB_PAUSED] = "paused",
	[SRV_JOB_STOPPING] = "stopping", [SRV_JOB_FINISHED] = "finished",
	[SRV_JOB_STOPPED] = "stopped",   [SRV_JOB_FAILED] = "failed",
};

/* Keys of a spec that name files: each must be an absolute path, since the worker runs in
 * the job's directory and a client's working directory means nothing to rematd. */
static const char *const job_path_keys[][2] = {
	{"data", "train"},
	{"data", "val"},
	{"model", "init_from"},
	{"save", "dir"},
};

const char *srv_job_state_name(srv_job_state s)
{
	ENG_ASSERT((unsigned)s < sizeof job_state_names / sizeof job_state_names[0]);
	return job_state_names[s];
}

int srv_job_state_parse(const char *name)
{
	for (size_t i = 0; name && i < sizeof job_state_names / sizeof job_state_names[0]; i++)
		if (strcmp(job_state_names[i], name) == 0)
			return (int)i;
	return -1;
}

int srv_job_state_final(srv_job_state s)
{
	return s == SRV_JOB_FINISHED || s == SRV_JOB_STOPPED || s == SRV_JOB_FAILED;
}

srv_job *srv_job_find(srv_server *srv, const char *id)
{
	for (int i = 0; i < srv->n_jobs; i++)
		if (strcmp(srv->jobs[i]->id, id) == 0)
			return srv->jobs[i];
	return NULL;
}

/* ---- state changes ---- */

void srv_job_emit_state(srv_job *job, const char *from)
{
	/* the service manager's STATUS= lists the jobs and their states */
	srv_status_update(job->srv);
	json_t *data = json_pack("{s:s, s:s, s:s, s:s}", "job", job->id, "from", from, "to",
		srv_job_state_name(job->state), "reason", job->reason);
	if (!data)
		return;
	json_object_set_new(data, "exit_status",
		job->exit_status >= 0 ? json_integer(job->exit_status) : json_null());
	/* beyond docs/protocol.md's keys (clients ignore unknown ones): what a failure needs */
	if (job->term_signal)
		json_object_set_new(data, "signal", json_integer(job->term_signal));
	if (srv_job_state_final(job->state))
		json_object_set_new(data, "last_checkpoint", job->last_checkpoint ?
			json_string(job->last_checkpoint) : json_null());
	srv_msg *m = srv_msg_take(proto_event_line("JOB_STATE_CHANGED", data));
	json_decref(data);
	if (!m) {
		srv_log("job %s: out of memory building an event", job->id);
		return;
	}
	srv_conn_publish(job->srv, job->id, "JOB_STATE_CHANGED", m);
	srv_msg_unref(m);
}

void srv_job_set_state(srv_job *job, srv_job_state to, const char *reason)
{
	const char *from = srv_job_state_name(job->state);
	job->state = to;
	srv_copy_text(job->reason, sizeof job->reason, reason);
	srv_job_emit_state(job, from);
}

/* ---- the table ---- */

int srv_job_table_init(srv_server *srv, char *err, size_t errlen)
{
	char dir[SRV_PATH_LEN];
	if ((size_t)snprintf(dir, sizeof dir, "%s/jobs", srv->state_dir) >= sizeof dir) {
		snprintf(err, errlen, "state directory path too long");
		return -1;
	}
	if (mkdir(dir, JOB_DIR_MODE) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create '%s': %s", dir, strerror(errno));
		return -1;
	}
	DIR *d = opendir(dir);
	if (!d) {
		snprintf(err, errlen, "cannot read '%s': %s", dir, strerror(errno));
		return -1;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		if (e->d_name[0] != 'j' || e->d_name[1] < '0' || e->d_name[1] > '9')
			continue;
		errno = 0;
		unsigned long n = strtoul(e->d_name + 1, &end, 10);
		if (!errno && !*end && n < 0xffffffffUL && n > srv->next_job_num)
			srv->next_job_num = (unsigned)n;
	}
	closedir(d);
	return 0;
}

static void job_free(srv_job *job)
{
	srv_worker_forget(job);
	free(job->last_checkpoint);
	json_decref(job->policy);
	free(job);
}

void srv_job_table_free(srv_server *srv)
{
	for (int i = 0; i < srv->n_jobs; i++)
		job_free(srv->jobs[i]);
	free(srv->jobs);
	srv->jobs = NULL;
	srv->n_jobs = srv->cap_jobs = 0;
}

/* Makes room for one more job: grows the table, or forgets the oldest ended job once
 * SRV_MAX_TABLE are kept. 0, or -1 when every job is still queued or alive. */
static int job_table_room(srv_server *srv)
{
	if (srv->n_jobs >= SRV_MAX_TABLE) {
		int i = 0;
		/* an ended job's handles are all closed once handles_open is 0: only then may
		 * its record go */
		while (i < srv->n_jobs && !(srv_job_state_final(srv->jobs[i]->state) &&
			srv->jobs[i]->handles_open == 0))
			i++;
		if (i == srv->n_jobs)
			return -1;
		job_free(srv->jobs[i]);
		memmove(&srv->jobs[i], &srv->jobs[i + 1],
			(size_t)(srv->n_jobs - i - 1) * sizeof srv->jobs[0]);
		srv->n_jobs--;
	}
	if (srv->n_jobs == srv->cap_jobs) {
		int cap = srv->cap_jobs ? srv->cap_jobs * 2 : 16;
		srv_job **jobs = realloc(srv->jobs, (size_t)cap * sizeof *jobs);
		if (!jobs)
			return -1;
		srv->jobs = jobs;
		srv->cap_jobs = cap;
	}
	return 0;
}

/* Starts queued jobs, oldest first, while worker slots are free. */
void srv_job_schedule(srv_server *srv)
{
	for (int i = 0; i < srv->n_jobs; i++) {
		if (srv->shutting_down || srv->n_active >= srv->max_jobs)
			return;
		if (srv->jobs[i]->state == SRV_JOB_QUEUED)
			srv_worker_spawn(srv->jobs[i]);
	}
}

/* ---- job-start ---- */

/* Refuses relative paths, naming the key. */
static int job_check_paths(const json_t *spec, char *desc, size_t desclen)
{
	for (size_t i = 0; i < sizeof job_path_keys / sizeof job_path_keys[0]; i++) {
		const json_t *sec = json_object_get(spec, job_path_keys[i][0]);
		const json_t *v = json_is_object(sec) ? json_object_get(sec, job_path_keys[i][1])
						      : NULL;
		/* a value of the wrong type is left to the engine's check, which names it */
		if (!json_is_string(v) || json_string_value(v)[0] == '/')
			continue;
		char q[SRV_QUOTE_BUF];
		snprintf(desc, desclen, "spec: '%s.%s' must be an absolute path, not %s",
			job_path_keys[i][0], job_path_keys[i][1],
			srv_quote(json_string_value(v), json_string_length(v), q));
		return -1;
	}
	return 0;
}

/* The engine's own validation of the spec (the worker repeats it): unknown keys, types,
 * ranges. Fills *out on success. */
static int job_check_spec(const json_t *spec, eng_spec *out, char *desc, size_t desclen)
{
	char *text = json_dumps(spec, JSON_COMPACT);
	if (!text) {
		snprintf(desc, desclen, "spec: cannot serialise it (out of memory?)");
		return -1;
	}
	eng_err err = {""};
	int r = eng_spec_parse(out, text, &err);
	free(text);
	if (r < 0)
		snprintf(desc, desclen, "spec: %s", err.msg);
	return r;
}

/* Reserves a fresh id and creates its directory. */
static int job_reserve(srv_server *srv, srv_job *job, char *desc, size_t desclen)
{
	for (int tries = 0; tries < JOB_ID_TRIES; tries++) {
		unsigned num = ++srv->next_job_num;
		snprintf(job->id, sizeof job->id, "j%u", num);
		if ((size_t)snprintf(job->dir, sizeof job->dir, "%s/jobs/%s", srv->state_dir,
			job->id) >= sizeof job->dir) {
			snprintf(desc, desclen, "state directory path too long");
			return -1;
		}
		if (mkdir(job->dir, JOB_DIR_MODE) == 0) {
			job->num = num;
			return 0;
		}
		if (errno != EEXIST) {
			snprintf(desc, desclen, "cannot create '%s': %s", job->dir,
				strerror(errno));
			return -1;
		}
	}
	snprintf(desc, desclen, "cannot find a free job id under '%s/jobs'", srv->state_dir);
	return -1;
}

/* Writes the spec to job.json, mode 0600, never through a symlink. */
static int job_write_spec(srv_job *job, const json_t *spec, char *desc, size_t desclen)
{
	char path[SRV_PATH_LEN + 16];
	snprintf(path, sizeof path, "%s/job.json", job->dir);
	char *text = json_dumps(spec, JSON_INDENT(2));
	if (!text) {
		snprintf(desc, desclen, "cannot serialise the spec (out of memory?)");
		return -1;
	}
	int rc = -1;
	size_t len = strlen(text), done = 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, JOB_FILE_MODE);
	if (fd < 0)
		goto out;
	while (done < len) {
		ssize_t n = write(fd, text + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto out;
		done += (size_t)n;
	}
	if (write(fd, "\n", 1) != 1)
		goto out;
	rc = 0;
out:
	if (rc < 0)
		snprintf(desc, desclen, "cannot write '%s': %s", path, strerror(errno));
	if (fd >= 0 && close(fd) < 0 && rc == 0) {
		snprintf(desc, desclen, "cannot write '%s': %s", path, strerror(errno));
		rc = -1;
	}
	free(text);
	return rc;
}

static int job_count(const srv_server *srv, srv_job_state s)
{
	int n = 0;
	for (int i = 0; i < srv->n_jobs; i++)
		n += srv->jobs[i]->state == s;
	return n;
}

srv_job *srv_job_create(srv_server *srv, const json_t *spec, const char *name,
	proto_errclass *ec, char *desc, size_t desclen)
{
	srv_job *job = NULL;
	json_t *copy = NULL;
	eng_spec *es = NULL;

	*ec = PROTO_ERR_INVALID_PARAMETER;
	if (!json_is_object(spec)) {
		snprintf(desc, desclen, "'spec' must be an object");
		goto fail;
	}
	if (job_check_paths(spec, desc, desclen) < 0)
		goto fail;
	copy = json_deep_copy(spec);
	es = calloc(1, sizeof *es);
	job = calloc(1, sizeof *job);
	if (!copy || !es || !job) {
		*ec = PROTO_ERR_INTERNAL;
		snprintf(desc, desclen, "out of memory");
		goto fail;
	}
	if (name)
		json_object_set_new(copy, "name", json_string(name));
	if (job_check_spec(copy, es, desc, desclen) < 0)
		goto fail;
	*ec = PROTO_ERR_BUSY;
	if (job_count(srv, SRV_JOB_QUEUED) >= SRV_MAX_QUEUED) {
		snprintf(desc, desclen, "too many jobs queued (at most %d)", SRV_MAX_QUEUED);
		goto fail;
	}
	if (job_table_room(srv) < 0) {
		snprintf(desc, desclen, "the job table is full (%d jobs alive or queued)",
			srv->n_jobs);
		goto fail;
	}
	*ec = PROTO_ERR_IO_ERROR;
	if (job_reserve(srv, job, desc, desclen) < 0)
		goto fail;
	if (es->save_dir[0]) {
		snprintf(job->save_dir, sizeof job->save_dir, "%s", es->save_dir);
	} else {
		/* without a save dir ckpt-save and the final save would have nowhere to go */
		json_t *save = json_object_get(copy, "save");
		if (!save) {
			save = json_object();
			json_object_set_new(copy, "save", save);
		}
		if ((size_t)snprintf(job->save_dir, sizeof job->save_dir, "%s/checkpoints",
			job->dir) >= sizeof job->save_dir) {
			snprintf(desc, desclen, "state directory path too long");
			goto fail;
		}
		if (!save || json_object_set_new(save, "dir", json_string(job->save_dir)) < 0) {
			*ec = PROTO_ERR_INTERNAL;
			snprintf(desc, desclen, "out of memory");
			goto fail;
		}
		if (mkdir(job->save_dir, JOB_DIR_MODE) < 0 && errno != EEXIST) {
			snprintf(desc, desclen, "cannot create '%s': %s", job->save_dir,
				strerror(errno));
			goto fail;
		}
	}
	if (job_write_spec(job, copy, desc, desclen) < 0)
		goto fail;

	job->srv = srv;
	snprintf(job->name, sizeof job->name, "%s", es->name);
	job->steps = es->steps;
	job->exit_status = -1;
	job->state = SRV_JOB_QUEUED;
	snprintf(job->reason, sizeof job->reason, "job-start");
	srv->jobs[srv->n_jobs++] = job;
	char q[SRV_QUOTE_BUF], qd[SRV_QUOTE_BUF];
	srv_log("job %s queued (name %s, %d steps, save dir %s)", job->id,
		srv_quote(job->name, strlen(job->name), q), job->steps,
		srv_quote(job->save_dir, strlen(job->save_dir), qd));
	srv_job_emit_state(job, "none");
	srv_job_schedule(srv);
	json_decref(copy);
	free(es);
	return job;

fail:
	json_decref(copy);
	free(es);
	free(job);
	return NULL;
}

/* ---- answers from the table ---- */

static json_t *job_opt_str(const char *s)
{
	return s ? json_string(s) : json_null();
}

json_t *srv_job_status(const srv_job *job)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:i, s:s}", "job", job->id, "name",
		job->name, "state", srv_job_state_name(job->state), "step", job->step, "steps",
		job->steps, "reason", job->reason);
	if (!o)
		return NULL;
	json_object_set_new(o, "loss", job->has_loss ? json_real(job->loss) : json_null());
	json_object_set_new(o, "lr", job->has_lr ? json_real(job->lr) : json_null());
	/* rates only mean something while the worker runs, and then the worker answers */
	json_object_set_new(o, "tokens_per_s", json_null());
	json_object_set_new(o, "step_ms", json_null());
	json_object_set_new(o, "policy", job->policy ? json_deep_copy(job->policy) : json_object());
	json_object_set_new(o, "last_checkpoint", job_opt_str(job->last_checkpoint));
	json_object_set_new(o, "exit_status",
		job->exit_status >= 0 ? json_integer(job->exit_status) : json_null());
	json_object_set_new(o, "signal",
		job->term_signal ? json_integer(job->term_signal) : json_null());
	json_object_set_new(o, "pid", job->pid ? json_integer(job->pid) : json_null());
	return o;
}

json_t *srv_job_list(srv_server *srv)
{
	json_t *jobs = json_array();
	for (int i = 0; jobs && i < srv->n_jobs; i++) {
		const srv_job *job = srv->jobs[i];
		json_t *e = json_pack("{s:s, s:s, s:s, s:i, s:i}", "job", job->id, "name",
			job->name, "state", srv_job_state_name(job->state), "step", job->step,
			"steps", job->steps);
		if (!e)
			continue;
		json_object_set_new(e, "loss", job->has_loss ? json_real(job->loss) : json_null());
		json_object_set_new(e, "pid", job->pid ? json_integer(job->pid) : json_null());
		json_array_append_new(jobs, e);
	}
	return json_pack("{s:o}", "jobs", jobs);
}

/* ---- shutdown ---- */

void srv_job_stop_all(srv_server *srv, int save)
{
	for (int i = 0; i < srv->n_jobs; i++) {
		srv_job *job = srv->jobs[i];
		if (job->state == SRV_JOB_QUEUED) {
			srv_job_set_state(job, SRV_JOB_STOPPED, "daemon shut down before it ran");
			continue;
		}
		if (!srv_job_live(job))
			continue;
		json_t *args = json_pack("{s:s, s:b}", "job", job->id, "save", save);
		if (srv_worker_request(job, "job-stop", args, 0, NULL) < 0)
			srv_worker_kill(job, "it could not be asked to stop");
		json_decref(args);
	}
}

void srv_job_kill_all(srv_server *srv, const char *why)
{
	for (int i = 0; i < srv->n_jobs; i++)
		srv_worker_kill(srv->jobs[i], why);
}
