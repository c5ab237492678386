/* proto_job.c - the vocabulary of a job every peer shares (see proto.h): its states, the
 * causes of a policy change, the keys of a job-status reply, the keys of a spec that name
 * files, and the grammar of a policy's text (SEL=MODE items). No I/O. Not here: what a
 * selector or a mode means (the engine's eng_policy.c, and proto_mode_* in proto_cmd.c).
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

static const char *const cause_names[PROTO_CAUSE_N] = {
	[PROTO_CAUSE_START] = "start",           [PROTO_CAUSE_SET] = "remat-set",
	[PROTO_CAUSE_SCHEDULE] = "schedule",     [PROTO_CAUSE_CONTROLLER] = "controller",
	[PROTO_CAUSE_PROFILE] = "remat-profile", [PROTO_CAUSE_OOM] = "out of memory",
};

const char *const proto_status_keys[] = {
	"job", "name", "state", "step", "steps", "loss", "lr", "tokens_per_s", "step_ms",
	"oom_retries", "auto_budget_bytes", "auto", "policy", "last_checkpoint",
	"last_save_error", "reason", "exit_status", "signal", "pid", "uid", "tokenizing",
	"memory", "arch", "params", "trainable_params", "quantized", "val_loss", "val_step",
	"grad_accum", "precision", "tokens", "elapsed_s", "eta_s", "hparams", "ranks",
	"per_rank", "allreduce", NULL,
};

void proto_status_complete(json_t *ret)
{
	for (int i = 0; json_is_object(ret) && proto_status_keys[i]; i++)
		if (!json_object_get(ret, proto_status_keys[i]))
			json_object_set_new(ret, proto_status_keys[i], json_null());
}

const char *const proto_spec_paths[PROTO_SPEC_PATHS][2] = {
	{"data", "train"}, {"data", "val"}, {"model", "init_from"}, {"save", "dir"},
	{"parallel", "hostfile"}, {"data", "tokenizer"}, {"data", "cache"},
};

const char *proto_job_state_name(int s)
{
	return s >= 0 && s < PROTO_JOB_NSTATES ? job_state_names[s] : "unknown";
}

const char *proto_cause_name(int c)
{
	return c >= 0 && c < PROTO_CAUSE_N ? cause_names[c] : "unknown";
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
