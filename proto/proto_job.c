/* proto_job.c - the vocabulary of a job every peer shares (see proto.h): its states, the
 * keys of a spec that name files, and the grammar of a policy's text (SEL=MODE items).
 * No I/O. Not here: what a selector or a mode means (the engine's eng_policy.c, and
 * proto_mode_* in proto_cmd.c).
 */
#include "proto.h"
#include "proto_int.h"

#include <stdio.h>
#include <string.h>

#define POLICY_SEPS ",; \t" /* between the items of a policy's text */

static const char *const job_state_names[PROTO_JOB_NSTATES] = {
	[PROTO_JOB_QUEUED] = "queued",     [PROTO_JOB_STARTING] = "starting",
	[PROTO_JOB_RUNNING] = "running",   [PROTO_JOB_PAUSED] = "paused",
	[PROTO_JOB_STOPPING] = "stopping", [PROTO_JOB_FINISHED] = "finished",
	[PROTO_JOB_STOPPED] = "stopped",   [PROTO_JOB_FAILED] = "failed",
	[PROTO_JOB_INTERRUPTED] = "interrupted",
};

const char *const proto_spec_paths[PROTO_SPEC_PATHS][2] = {
	{"data", "train"}, {"data", "val"}, {"model", "init_from"}, {"save", "dir"},
	{"parallel", "hostfile"}, {"data", "tokenizer"}, {"data", "cache"},
};

const char *proto_job_state_name(int s)
{
	return s >= 0 && s < PROTO_JOB_NSTATES ? job_state_names[s] : "unknown";
}

int proto_job_state_find(const char *name)
{
	for (int i = 0; name != NULL && i < PROTO_JOB_NSTATES; i++)
		if (strcmp(job_state_names[i], name) == 0)
			return i;
	return -1;
}

int proto_job_state_final(int s)
{
	return s == PROTO_JOB_FINISHED || s == PROTO_JOB_STOPPED || s == PROTO_JOB_FAILED ||
	       s == PROTO_JOB_INTERRUPTED;
}

int proto_policy_parse(const char *text, proto_policy_item_fn fn, void *ud, char *desc,
	size_t desclen)
{
	char buf[PROTO_POLICY_TEXT_MAX + 1], *save = NULL;
	int n = 0;
	if (strlen(text) > PROTO_POLICY_TEXT_MAX) {
		proto__descf(desc, desclen, "policy text too long (at most %d bytes)",
			PROTO_POLICY_TEXT_MAX);
		return -1;
	}
	snprintf(buf, sizeof buf, "%s", text);
	for (char *item = strtok_r(buf, POLICY_SEPS, &save); item;
		item = strtok_r(NULL, POLICY_SEPS, &save)) {
		char *eq = strchr(item, '=');
		n++;
		if (!eq) { /* a bare mode: all=MODE */
			if (fn(ud, "all", item, desc, desclen) < 0)
				return -1;
			continue;
		}
		if (eq == item || eq[1] == '\0' || strchr(eq + 1, '=')) {
			proto__descf(desc, desclen, "malformed policy item '%.*s' (expected "
				"SECTION=MODE)", proto__clip(item), item);
			return -1;
		}
		*eq = '\0';
		if (fn(ud, item, eq + 1, desc, desclen) < 0)
			return -1;
	}
	if (n == 0) {
		proto__descf(desc, desclen, "empty policy (expected MODE or SECTION=MODE[,...])");
		return -1;
	}
	return 0;
}
