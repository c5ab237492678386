/* srv_store.c - job records in STATE_DIR/jobs/ID/state.json (see srv_store.h). */
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
	if (srv_job_dir_open(job, &d, &e) == 0) {
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
static int record_load(srv_job *job, const json_t *o, char *err, size_t errlen)
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

/* A record of an earlier rematd without "auto": the controller as the spec its worker ran
 * started it (live changes then were not kept); not known when that cannot be read. */
static void load_auto_from_spec(srv_job *job)
{
	eng_err e = {0};
	eng_dir jd;
	FILE *f = NULL;
	if (srv_job_dir_open(job, &jd, &e) == 0) {
		f = eng_fs_fopen_at(&jd, job->spec_file, "job spec", &e);
		eng_dir_close(&jd);
	}
	json_t *spec = f ? json_loadf(f, JSON_REJECT_DUPLICATES, NULL) : NULL;
	if (f)
		fclose(f);
	if (json_is_object(spec))
		srv_auto_from_spec(&job->autoc, spec);
	json_decref(spec);
}

static int cmp_num(const void *a, const void *b)
{
	unsigned x = (*(srv_job *const *)a)->num, y = (*(srv_job *const *)b)->num;
	return (x > y) - (x < y);
}

/* Reads STATE_DIR/jobs/jNUM/state.json into a new record; NULL when there is none or it
 * is bad (logged). */
static srv_job *load_one(srv_server *srv, unsigned num)
{
	char path[SRV_PATH_LEN + 64], why[256], name[16];
	char q[SRV_QUOTE_BUF];
	eng_err e = {0};
	eng_dir jd;
	FILE *f = NULL;
	srv_fmt(path, sizeof path, "%s/jobs/j%u/%s", srv->state_dir, num, SRV_STORE_FILE);
	snprintf(name, sizeof name, "j%u", num);
	/* an entry of jobs/ that is a directory of ours, its record no symlink */
	int absent = 0;
	if (eng_dir_open_at(&jd, &srv->jobs_d, name, &e) == 0) {
		f = eng_fs_fopen_at(&jd, SRV_STORE_FILE, "job record", &e);
		absent = !f && errno == ENOENT;
		eng_dir_close(&jd);
	}
	if (!f) {
		if (!absent)
			srv_log("%s: skipped", e.msg);
		return NULL;
	}
	json_error_t je;
	json_t *o = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
	fclose(f);
	srv_job *job = o ? srv_job_alloc(srv) : NULL;
	if (!job) {
		srv_log("job record %s: %s: skipped", srv_quote(path, strlen(path), q),
			o ? "out of memory" : je.text);
		json_decref(o);
		return NULL;
	}
	job->num = num;
	snprintf(job->id, sizeof job->id, "j%u", num);
	srv_fmt(job->dir, sizeof job->dir, "%s/jobs/j%u", srv->state_dir, num);
	if (record_load(job, o, why, sizeof why) < 0) {
		srv_log("job record %s: %s: skipped", srv_quote(path, strlen(path), q), why);
		json_decref(o);
		srv_job_free(job);
		return NULL;
	}
	json_decref(o);
	if (!job->autoc.known)
		load_auto_from_spec(job);
	return job;
}

int srv_store_load(srv_server *srv, char *err, size_t errlen)
{
	srv_job **found = NULL;
	size_t n = 0, cap = 0;
	/* the listing of the jobs/ opened at start (a descriptor of its own for the stream) */
	int fd = dup(srv->jobs_d.fd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		srv_fmt(err, errlen, "cannot read '%s': %s", srv->jobs_d.path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		if (e->d_name[0] != 'j' || e->d_name[1] < '0' || e->d_name[1] > '9')
			continue;
		errno = 0;
		unsigned long num = strtoul(e->d_name + 1, &end, 10);
		if (errno || *end || num >= 0xffffffffUL)
			continue;
		/* new ids follow the highest directory there, record or not: none is reused */
		if (num > srv->next_job_num)
			srv->next_job_num = (unsigned)num;
		char canon[16];
		snprintf(canon, sizeof canon, "j%lu", num);
		if (strcmp(canon, e->d_name) != 0)
			continue; /* "j007" is no job of ours */
		srv_job *job = load_one(srv, (unsigned)num);
		if (!job)
			continue;
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 64;
			srv_job **nf = realloc(found, ncap * sizeof *nf);
			if (!nf) {
				srv_job_free(job);
				break;
			}
			found = nf;
			cap = ncap;
		}
		found[n++] = job;
	}
	closedir(d);
	if (n > 1)
		qsort(found, n, sizeof *found, cmp_num);
	for (size_t i = 0; i < n; i++) {
		srv_job *job = found[i];
		if (!proto_job_state_final(job->state) && job->state != PROTO_JOB_QUEUED) {
			char why[SRV_REASON_LEN];
			snprintf(why, sizeof why, "rematd ended while the job was %s", 
				proto_job_state_name(job->state));
			job->state = PROTO_JOB_INTERRUPTED;
			srv_copy_text(job->reason, sizeof job->reason, why);
			srv_job_save_record(job);
			/* its worker may have saved after the record was written */
			job->rescan_at_ms = 1;
		}
		char desc[256];
		/* each owner's oldest finished or failed records make room; a resumable one is
		 * listed whatever the table holds */
		if (srv_job_table_add(srv, job, 1, desc, sizeof desc) < 0) {
			srv_log("job %s: not listed: %s", job->id, desc);
			srv_job_free(job);
		}
	}
	if (n)
		srv_log("%zu job(s) from an earlier rematd listed", n);
	free(found);
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
