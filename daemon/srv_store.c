/* srv_store.c - job records in STATE_DIR/jobs/ID/state.json, written and read (see
 * srv_store.h). Not here: the table loaded from them at start-up (srv_store_load.c). */
#include "srv_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "eng_fs.h"

#define STORE_MODE 0600 /* a record names private paths */

static json_t *opt_str(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *record_json(const srv_job *job)
{
	json_t *groups = json_array();
	for (int i = 0; groups && i < job->owner.ngroups; i++)
		json_array_append_new(groups, json_integer(job->owner.groups[i]));
	json_t *o = json_pack("{s:i,s:s,s:s,s:s,s:s,s:i,s:i,s:{s:I,s:I,s:o},s:s,s:s,s:I}",
		"format", SRV_STORE_FORMAT, "job", job->id, "name", job->name, "state",
		proto_job_state_name(job->state), "reason", job->reason, "step", job->step, "steps",
		job->steps, "owner", "uid", (json_int_t)job->owner.uid, "gid",
		(json_int_t)job->owner.gid, "groups", groups, "save_dir", job->save_dir,
		"spec_file", job->spec_file, "created", (json_int_t)job->created);
	if (!o)
		return NULL;
	json_object_set_new(o, "loss", job->has_loss ? json_real(job->loss) : json_null());
	json_object_set_new(o, "lr", job->has_lr ? json_real(job->lr) : json_null());
	json_object_set_new(o, "last_checkpoint", opt_str(job->last_checkpoint));
	json_object_set_new(o, "exit_status",
		job->exit_status >= 0 ? json_integer(job->exit_status) : json_null());
	json_object_set_new(o, "signal",
		job->term_signal ? json_integer(job->term_signal) : json_null());
	json_object_set_new(o, "policy", job->policy ? json_deep_copy(job->policy) : json_null());
	/* the memory controller (srv_auto.h): null when off; absent when not known */
	json_t *ctl = srv_auto_json(&job->autoc);
	if (ctl)
		json_object_set_new(o, "auto", ctl);
	json_object_set_new(o, "info", job->info ? eng_check_info_json(job->info) : json_null());
	/* its part of rematd's memory pool that outlives a worker: priority, own budget */
	json_object_set_new(o, "pool", srv_pool_job_record(job));
	json_object_set_new(o, "last_save_error", job->last_save_error ?
		json_deep_copy(job->last_save_error) : json_null());
	/* an ended job's last figures (mem-stats, remat-get), when rematd kept them */
	json_object_set_new(o, "last_mem", job->last_mem ? json_deep_copy(job->last_mem) :
		json_null());
	json_object_set_new(o, "last_remat", job->last_remat ?
		json_deep_copy(job->last_remat) : json_null());
	return o;
}

int srv_store_save(const srv_job *job, char *err, size_t errlen)
{
	json_t *o = record_json(job);
	eng_dir d;
	eng_err e = {0};
	int rc = -1;
	if (!o) {
		srv_fmt(err, errlen, "out of memory");
		return -1;
	}
	if (eng_dir_open_at(&d, &job->srv->jobs_d, job->id, &e) == 0) {
		rc = eng_fs_write_json(&d, SRV_STORE_FILE, STORE_MODE, o, &e);
		eng_dir_close(&d);
	}
	if (rc < 0)
		srv_fmt(err, errlen, "%s", e.msg);
	json_decref(o);
	return rc;
}

/* ---- loading ---- */

/* o[key] copied into dst (len bytes) when it is a string; 0, or -1 when missing. */
static int get_text(const json_t *o, const char *key, char *dst, size_t len)
{
	const char *s = json_string_value(json_object_get(o, key));
	if (!s)
		return -1;
	srv_copy_text(dst, len, s);
	return 0;
}

/* The record's copy of the job's check (eng_check_info.h), malloc'd; NULL, said in the log,
 * when it does not read (the job stays listed; it has no plan without a worker). */
static eng_check_info *load_info(const srv_job *job, const json_t *v)
{
	eng_check_info *ci = malloc(sizeof *ci);
	eng_err e;
	if (ci && eng_check_info_read(v, ci, &e) == 0)
		return ci;
	srv_log("job %s: its record's check does not read: %s", job->id,
		ci ? e.msg : "out of memory");
	free(ci);
	return NULL;
}

/* A record's fields into job; -1 with a message when one it needs is missing. */
int srv_store_read(srv_job *job, const json_t *o, char *err, size_t errlen)
{
	char state[32];
	json_t *v;
	if (json_integer_value(json_object_get(o, "format")) != SRV_STORE_FORMAT ||
		get_text(o, "state", state, sizeof state) < 0 ||
		get_text(o, "name", job->name, sizeof job->name) < 0 ||
		get_text(o, "save_dir", job->save_dir, sizeof job->save_dir) < 0 ||
		get_text(o, "spec_file", job->spec_file, sizeof job->spec_file) < 0 ||
		proto_job_state_find(state) < 0 || (strcmp(job->spec_file, "job.json") != 0 &&
		strcmp(job->spec_file, "resume.json") != 0)) {
		srv_fmt(err, errlen, "not a format-%d record", SRV_STORE_FORMAT);
		return -1;
	}
	job->state = (proto_job_state)proto_job_state_find(state);
	get_text(o, "reason", job->reason, sizeof job->reason);
	job->step = (int)json_integer_value(json_object_get(o, "step"));
	job->steps = (int)json_integer_value(json_object_get(o, "steps"));
	job->created = json_integer_value(json_object_get(o, "created"));
	if (json_is_number(v = json_object_get(o, "loss"))) {
		job->loss = json_number_value(v);
		job->has_loss = 1;
	}
	if (json_is_number(v = json_object_get(o, "lr"))) {
		job->lr = json_number_value(v);
		job->has_lr = 1;
	}
	if (json_is_string(v = json_object_get(o, "last_checkpoint")))
		job->last_checkpoint = strdup(json_string_value(v));
	job->exit_status = json_is_integer(v = json_object_get(o, "exit_status")) ?
		(int)json_integer_value(v) : -1;
	job->term_signal = (int)json_integer_value(json_object_get(o, "signal"));
	if (json_is_object(v = json_object_get(o, "policy")))
		job->policy = json_incref(v);
	srv_auto_load(&job->autoc, o);
	srv_pool_job_read(job, json_object_get(o, "pool"));
	if (json_is_object(v = json_object_get(o, "info")))
		job->info = load_info(job, v);
	if (json_is_object(v = json_object_get(o, "last_save_error")))
		job->last_save_error = json_incref(v);
	if (json_is_object(v = json_object_get(o, "last_mem")))
		job->last_mem = json_incref(v);
	if (json_is_object(v = json_object_get(o, "last_remat")))
		job->last_remat = json_incref(v);
	json_t *owner = json_object_get(o, "owner"), *groups = json_object_get(owner, "groups");
	job->owner.uid = (uid_t)json_integer_value(json_object_get(owner, "uid"));
	job->owner.gid = (gid_t)json_integer_value(json_object_get(owner, "gid"));
	size_t i;
	json_array_foreach(groups, i, v) {
		if (job->owner.ngroups < ENG_CRED_MAX_GROUPS && json_is_integer(v))
			job->owner.groups[job->owner.ngroups++] = (gid_t)json_integer_value(v);
	}
	return 0;
}

/* ---- what the workers run ---- */

/* The identity of the binary at path, as a JSON object; NULL when it cannot be stat'ed.
 * The administrator's --worker path, the one rematd executes: stat follows links as exec
 * does, so that the identity is that of what runs. */
static json_t *binary_id(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return NULL;
	return json_pack("{s:s,s:I,s:I,s:I,s:I,s:I}", "path", path, "dev", (json_int_t)st.st_dev,
		"ino", (json_int_t)st.st_ino, "size", (json_int_t)st.st_size, "mtime_s",
		(json_int_t)st.st_mtim.tv_sec, "mtime_ns", (json_int_t)st.st_mtim.tv_nsec);
}

json_t *srv_store_worker_info(const srv_server *srv, const char *path)
{
	eng_err e = {0};
	json_t *id = binary_id(path), *o = NULL, *info = NULL;
	FILE *f = id ? eng_fs_fopen_at(&srv->state_d, SRV_STORE_WORKER_INFO, "worker info", &e)
		     : NULL;
	if (f) {
		o = json_loadf(f, JSON_REJECT_DUPLICATES, NULL);
		fclose(f);
	}
	info = json_object_get(o, "info");
	if (json_is_object(info) && json_equal(json_object_get(o, "worker"), id))
		json_incref(info);
	else
		info = NULL;
	json_decref(o);
	json_decref(id);
	return info;
}

int srv_store_save_worker_info(const srv_server *srv, const char *path, const json_t *info,
	char *err, size_t errlen)
{
	eng_err e = {0};
	json_t *id = binary_id(path);
	json_t *o = id ? json_pack("{s:i,s:o,s:O}", "format", SRV_STORE_FORMAT, "worker", id,
				 "info", info)
		       : NULL;
	if (!o) {
		srv_fmt(err, errlen, "cannot stat '%s' or out of memory", path);
		return -1;
	}
	int rc = eng_fs_write_json(&srv->state_d, SRV_STORE_WORKER_INFO, STORE_MODE, o, &e);
	if (rc < 0)
		srv_fmt(err, errlen, "%s", e.msg);
	json_decref(o);
	return rc;
}
