/* srv_store_load.c - the job table loaded from STATE_DIR/jobs at start-up (see
 * srv_store.h): every record read (srv_store_read), the jobs that were alive made
 * interrupted, the table filled in id order.
 * Not here: a record's format, written and read (srv_store.c).
 */
#include "srv_store.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_fs.h"

/* The spec the job's worker ran (its spec file), a new reference; NULL when it cannot be
 * read. */
static json_t *load_spec(const srv_job *job)
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
	if (!json_is_object(spec)) {
		json_decref(spec);
		return NULL;
	}
	return spec;
}

/* What the record does not keep, from the spec (read only when needed): the memory
 * controller of a record of an earlier rematd without "auto", as the spec started it (live
 * changes then were not kept; not known when the spec cannot be read); the job's terms in
 * rematd's pool (priority and own budget as the record keeps them, else as the spec gives
 * them), and for a queued job, which starts without a new check, its figures (least, off
 * peak) from the check in the record: the others are planned again when resumed. */
static void load_from_spec(srv_job *job)
{
	json_t *spec = job->autoc.known && job->pool.known ? NULL : load_spec(job);
	json_t *none = spec ? NULL : json_object();
	if (spec && !job->autoc.known)
		srv_auto_from_spec(&job->autoc, spec);
	if (job->state == PROTO_JOB_QUEUED)
		srv_pool_job_init(job, spec ? spec : none, 1);
	else
		srv_pool_job_terms(job, spec ? spec : none, 1);
	json_decref(none);
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
			o ? "out of memory" : eng_err_json(&je, why, sizeof why));
		json_decref(o);
		return NULL;
	}
	job->num = num;
	snprintf(job->id, sizeof job->id, "j%u", num);
	srv_fmt(job->dir, sizeof job->dir, "%s/jobs/j%u", srv->state_dir, num);
	if (srv_store_read(job, o, why, sizeof why) < 0) {
		srv_log("job record %s: %s: skipped", srv_quote(path, strlen(path), q), why);
		json_decref(o);
		srv_job_free(job);
		return NULL;
	}
	json_decref(o);
	load_from_spec(job);
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
