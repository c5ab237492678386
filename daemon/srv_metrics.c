/* srv_metrics.c - job-metrics: a job's metrics.jsonl read back (docs/protocol.md).
 *
 * The worker appends one JSON object a line to STATE_DIR/jobs/ID/metrics.jsonl, every step
 * and every eval (rematd opened it and handed the worker its descriptor). This reads a
 * window of it from a byte offset: whole lines only, at most PROTO_METRICS_MAX_LINES (or
 * the request's "lines") and PROTO_METRICS_MAX_BYTES (the lines are written back as read,
 * so the reply stays within PROTO_MAX_LINE), so that `rematctl logs -f` and
 * `rematctl plot` page through a long run with "next". Opened relative to the job's
 * directory, never through a link.
 */
#include "srv_metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "srv_worker.h"

/* Up to max lines of buf (n bytes, from file offset off) parsed into lines, as long as
 * they write back (as the reply will: numbers in jansson's form, which may be longer than
 * the file's) into PROTO_METRICS_MAX_BYTES; the offset just past the last whole line taken
 * into *next. A window without a line end is one line longer than any reply may carry, not
 * one of ours (a STEP row is a few hundred bytes): skipped, so that a reader paging
 * through never stalls. */
static void take_lines(const char *buf, size_t n, size_t off, int max, json_t *lines,
	size_t *next)
{
	size_t at = 0, out = 0;
	*next = off;
	while (at < n && (int)json_array_size(lines) < max) {
		const char *nl = memchr(buf + at, '\n', n - at);
		if (!nl) {
			if (at == 0 && n == PROTO_METRICS_MAX_BYTES)
				*next = off + n;
			break; /* else a line being written: the next read takes it */
		}
		size_t len = (size_t)(nl - (buf + at));
		json_t *o = json_loadb(buf + at, len, JSON_REJECT_DUPLICATES, NULL);
		size_t w = json_is_object(o) ? json_dumpb(o, NULL, 0, JSON_COMPACT) + 1 : 0;
		if (out + w > PROTO_METRICS_MAX_BYTES) {
			json_decref(o);
			if (json_array_size(lines) == 0) /* alone past a reply: skipped */
				*next = off + at + len + 1;
			break;
		}
		out += w;
		if (w)
			json_array_append_new(lines, o);
		else
			json_decref(o); /* not one of ours (a torn write after a crash): skipped */
		at += len + 1;
		*next = off + at;
	}
}

json_t *srv_metrics_read(srv_job *job, const json_t *args, proto_errclass *ec, char *desc,
	size_t desclen)
{
	json_t *o = json_object_get(args, "offset"), *l = json_object_get(args, "lines");
	size_t off = o ? (size_t)json_integer_value(o) : 0, next = off, size = 0;
	int max = l ? (int)json_integer_value(l) : PROTO_METRICS_MAX_LINES, fd = -1;
	char *buf = NULL;
	json_t *lines = json_array(), *ret = NULL;
	eng_dir d;
	eng_err e = {0};
	*ec = PROTO_ERR_IO_ERROR;
	if (!lines || srv_job_dir_open(job, &d, &e) < 0) {
		snprintf(desc, desclen, "%s", lines ? e.msg : "out of memory");
		goto out;
	}
	fd = openat(d.fd, SRV_METRICS_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	eng_dir_close(&d);
	struct stat st;
	if (fd < 0 && errno != ENOENT) {
		snprintf(desc, desclen, "job %s: cannot read its " SRV_METRICS_FILE ": %s", job->id,
			strerror(errno));
		goto out;
	}
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		size = (size_t)st.st_size;
	if (off < size) {
		size_t want = size - off < PROTO_METRICS_MAX_BYTES ? size - off
								  : PROTO_METRICS_MAX_BYTES;
		ssize_t got = (buf = malloc(want)) ? pread(fd, buf, want, (off_t)off) : -1;
		if (got < 0) {
			snprintf(desc, desclen, "job %s: cannot read its " SRV_METRICS_FILE ": %s",
				job->id, buf ? strerror(errno) : "out of memory");
			goto out;
		}
		take_lines(buf, (size_t)got, off, max, lines, &next);
	}
	ret = json_pack("{s:o,s:I,s:I,s:I,s:s}", "lines", lines, "offset", (json_int_t)off,
		"next", (json_int_t)next, "size", (json_int_t)size, "state",
		proto_job_state_name(job->state));
	lines = NULL;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	json_decref(lines);
	return ret;
}
