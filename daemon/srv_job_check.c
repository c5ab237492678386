/* srv_job_check.c - a spec's checks for the job table: at once (paths, the spec's own
 * syntax), then remat-train --check as its owner (srv_helper.h), whose answer is read once
 * (eng_check_info.h) and handed to what the check was run for (job_check.done: a start, a
 * resume, a restart's look, a plan), the client waiting answered here. See srv_job_int.h.
 * Not here: what each kind does with a good answer (srv_job_start.c, srv_job_resume.c).
 */
#include "srv_job.h"
#include "srv_job_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_err.h"
#include "eng_fs.h"
#include "eng_spec.h"
#include "srv_helper.h"

#define JOB_FILE_MODE 0600      /* job.json, resume.json: a spec may name private paths */

/* Refuses relative paths, naming the key: each file a spec names (proto_spec_paths) must
 * be an absolute path, since the worker runs in the job's directory and a client's working
 * directory means nothing to rematd. */
int srv_job__check_paths(const json_t *spec, char *desc, size_t desclen)
{
	for (size_t i = 0; i < PROTO_SPEC_PATHS; i++) {
		const json_t *sec = json_object_get(spec, proto_spec_paths[i][0]);
		const json_t *v = json_is_object(sec) ? json_object_get(sec, proto_spec_paths[i][1])
						      : NULL;
		/* a value of the wrong type is left to the engine's check, which names it */
		if (!json_is_string(v) || json_string_value(v)[0] == '/')
			continue;
		char q[SRV_QUOTE_BUF];
		srv_fmt(desc, desclen, "spec: '%s.%s' must be an absolute path, not %s",
			proto_spec_paths[i][0], proto_spec_paths[i][1],
			srv_quote(json_string_value(v), json_string_length(v), q));
		return -1;
	}
	return 0;
}

/* The spec's own syntax (unknown keys, types, ranges), at once, before any helper runs. */
int srv_job__check_syntax(const json_t *spec, char *desc, size_t desclen)
{
	char *text = json_dumps(spec, JSON_COMPACT);
	if (!text) {
		srv_fmt(desc, desclen, "spec: cannot serialise it (out of memory?)");
		return -1;
	}
	eng_spec *es = calloc(1, sizeof *es);
	eng_err err = {0};
	int r = es ? eng_spec_parse(es, text, &err) : eng_errf(&err, "out of memory");
	free(text);
	free(es);
	if (r < 0)
		srv_fmt(desc, desclen, "spec: %s", err.msg);
	return r;
}

/* Frees a check's record (its references). */
void srv_job__check_free(job_check *k)
{
	json_decref(k->id);
	json_decref(k->spec);
	json_decref(k->args);
	free(k);
}

/* Writes spec to job->dir/name durably, mode 0600, never through a symlink. */
int srv_job__write_file(srv_job *job, const char *name, const json_t *spec, char *desc,
	size_t desclen)
{
	eng_dir d;
	eng_err e = {0};
	int rc = srv_job_dir_open(job, &d, &e);
	if (rc == 0) {
		rc = eng_fs_write_json(&d, name, JOB_FILE_MODE, spec, &e);
		eng_dir_close(&d);
	}
	if (rc < 0)
		srv_fmt(desc, desclen, "%s", e.msg);
	return rc;
}

/* A copy of what a check said, kept with the job (malloc'd), or NULL when out of memory. */
eng_check_info *srv_job__check_info(const eng_check_info *ci)
{
	eng_check_info *copy = malloc(sizeof *copy);
	if (copy)
		*copy = *ci;
	return copy;
}

/* A check's error as a reply: the worker's own message, in the class it gave (Busy when
 * another job holds the save directory, InvalidParameter when the spec must change). */
static proto_errclass check_error(const eng_check_info *ci, const char *why, char *desc,
	size_t desclen)
{
	if (!ci) {
		srv_fmt(desc, desclen, "cannot check the spec: %s", why ? why : "no answer");
		return PROTO_ERR_INTERNAL;
	}
	srv_fmt(desc, desclen, "spec: %s", ci->error[0] ? ci->error : "refused");
	return ci->busy ? PROTO_ERR_BUSY : PROTO_ERR_INVALID_PARAMETER;
}

/* Acts on a check's answer (ci, or NULL with why) by what it was run for (k->done), then
 * answers the client waiting, or logs why it was refused; frees k. */
static void check_done(srv_server *srv, job_check *k, const eng_check_info *ci, const char *why)
{
	char desc[PROTO_DESC_LEN];
	proto_errclass ec = PROTO_ERR_INTERNAL;
	json_t *ret = NULL;
	if (k->job)
		k->job->checking = 0;
	if (k->kind == CHECK_SCAN) {
		/* a restart's look at a save directory: answered to no one */
		if (!ci || !ci->ok)
			ec = check_error(ci, why, desc, sizeof desc);
		k->done(srv, k, ci, &ec, desc, sizeof desc);
		srv_job__check_free(k);
		return;
	}
	if (!ci && srv->shutting_down) {
		/* the shutdown stopped the check: said before the connection closes */
		ec = PROTO_ERR_INVALID_STATE;
		srv_fmt(desc, sizeof desc, "%s: the spec's check was stopped and %s%s%s", why,
			k->kind == CHECK_START ? "the job was not started" : k->kind ==
			CHECK_RESUME ? "job " : "no plan was made", k->kind == CHECK_RESUME ?
			k->job->id : "", k->kind == CHECK_RESUME ? " was not resumed" : "");
	} else if (!ci || !ci->ok) {
		ec = check_error(ci, why, desc, sizeof desc);
		const char *msg = ci && ci->error[0] ? ci->error : NULL;
		if (k->kind == CHECK_RESUME && msg) {
			/* its spec was good once: what stops it now is its state on disk */
			if (ec == PROTO_ERR_INVALID_PARAMETER)
				ec = PROTO_ERR_INVALID_STATE;
			srv_fmt(desc, sizeof desc, "job %s cannot resume: %s", k->job->id, msg);
		}
	} else {
		ret = k->done(srv, k, ci, &ec, desc, sizeof desc);
	}
	srv_conn *c = k->conn_id ? srv_conn_find(srv, k->conn_id) : NULL;
	if (c) {
		c->inflight--;
		if (ret)
			srv_conn_reply(c, ret, k->id);
		else
			srv_conn_error(c, ec, desc, k->id);
	}
	if (!ret) {
		char q[SRV_QUOTE_BUF];
		srv_log("client %u: %s refused: %s: %s", k->conn_id, k->kind == CHECK_START ?
			"job-start" : k->kind == CHECK_RESUME ? "job-resume" : "remat-plan",
			proto_errclass_name(ec), srv_quote(desc, strlen(desc), q));
	}
	json_decref(ret);
	srv_job__check_free(k);
}

/* remat-train --check answered (out, or NULL with why): read once into its struct
 * (eng_check_info.h), then acted on by what it was run for (check_done). */
static void check_answered(srv_server *srv, void *ud, const json_t *out, const char *why)
{
	char msg[ENG_ERR_LEN + 64];
	eng_check_info *ci = out ? malloc(sizeof *ci) : NULL;
	eng_err err;
	if (out && !ci) {
		why = "out of memory";
	} else if (ci && eng_check_info_read(out, ci, &err) < 0) {
		srv_fmt(msg, sizeof msg, "its answer does not read: %s", err.msg);
		why = msg;
		free(ci);
		ci = NULL;
	}
	check_done(srv, ud, ci, why);
	free(ci);
}

/* Runs remat-train --check on spec as owner for k; c (may be NULL) waits. */
int srv_job__check_run(srv_server *srv, job_check *k, srv_conn *c, proto_errclass *ec,
	char *desc, size_t desclen)
{
	static const char *const args[] = {"--check", NULL};
	*ec = PROTO_ERR_BUSY;
	if (srv_helper_count(srv) >= SRV_HELPER_MAX) {
		srv_fmt(desc, desclen, "%d specs are being checked already; try again",
			SRV_HELPER_MAX);
		return -1;
	}
	if (!srv_privileged(srv, k->owner.uid) &&
		srv_helper_count_of(srv, k->owner.uid) >= SRV_HELPER_PER_UID) {
		srv_fmt(desc, desclen, "%d specs of uid %lu are being checked already (at most %d "
			"a user); try again", SRV_HELPER_PER_UID, (unsigned long)k->owner.uid,
			SRV_HELPER_PER_UID);
		return -1;
	}
	if (srv_helper_run(srv, "check", args, k->spec, &k->owner, SRV_CHECK_MS, check_answered,
		k, desc, desclen) < 0) {
		*ec = PROTO_ERR_INTERNAL;
		return -1;
	}
	if (c)
		c->inflight++;
	return 0;
}
