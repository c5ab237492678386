/* proto_cmd.c - the command table of the control protocol and strict validation of every
 * command's arguments (proto.h; the schemas are the table in docs/protocol.md).
 *
 * What it is: which commands exist, their scope, which replies are deferred, and for each
 * argument its type, range and whether it is required; validation refuses unknown keys,
 * wrong types, missing keys and out-of-range values with a description naming the argument.
 * What it is not: nothing here knows jobs, sections or policies. Whether a selector names
 * a real section, a job exists, or a spec is complete is for the daemon and the engine.
 * Checks are explicit rather than json_unpack_ex's "{s:o, s?b !}": its messages cannot
 * name the argument the way a peer needs ("'save' must be a boolean").
 */
#include "proto.h"
#include "proto_int.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define JOB_ID_MAX 64    /* longest job id, in bytes */
#define JOB_NAME_MAX 64  /* longest job name, in bytes */
#define CKPT_NAME_MAX 64 /* longest checkpoint name */

typedef enum arg_type {
	ARG_JOB,      /* a job id: string, 1..JOB_ID_MAX bytes */
	ARG_BOOL,     /* true or false */
	ARG_SPEC,     /* a job spec: an object (its content is the engine's to check) */
	ARG_NAME,     /* a job name: string, 1..JOB_NAME_MAX bytes */
	ARG_SECTIONS, /* selector -> mode, any mode */
	ARG_DEFAULT,  /* a block mode: off, selective, full or offload */
	ARG_BYTES,    /* integer >= 0 */
	ARG_ROUNDS,   /* remat-profile's rounds: integer 1..PROTO_PROFILE_MAX_ROUNDS */
	ARG_BUDGET,   /* remat-auto's budget source: "cgroup", "device" or "off" */
	ARG_STEPS,    /* remat-memlog's steps: integer 1..PROTO_MEMLOG_STEPS */
	ARG_TRACE,    /* remat-memlog's trace format: "pytorch" or "chrome" */
	ARG_CKPT,     /* a checkpoint name: 1..64 of [A-Za-z0-9._-], no leading '.' */
	ARG_EVENTS,   /* array of event names */
	ARG_HPARAMS,  /* job-set's: an object of hyperparameter -> value (proto_hparam) */
	ARG_OFFSET,   /* job-metrics' byte offset: integer >= 0 */
	ARG_LINES,    /* job-metrics' most lines: integer 1..PROTO_METRICS_MAX_LINES */
} arg_type;

typedef enum arg_need {
	ARG_OPTIONAL,
	ARG_REQUIRED,
	ARG_REQUIRED_JOB, /* required, unless the caller validates for a worker */
	ARG_JOB_OR_SPEC,  /* ARG_REQUIRED_JOB, unless "spec" is given instead */
} arg_need;

typedef struct arg_spec {
	const char *name; /* NULL ends a schema */
	arg_type type;
	arg_need need;
} arg_spec;

#define MAX_ARGS 5 /* most arguments of one command */

typedef struct proto_schema {
	arg_spec args[MAX_ARGS + 1];
} cmd_schema;

#define JOB {"job", ARG_JOB, ARG_REQUIRED_JOB}
#define NO_ARGS {{NULL, ARG_JOB, ARG_OPTIONAL}} /* a schema that takes nothing */

/* The command table, indexed by id: each command's name, scope, whether its reply is
 * deferred, whether it only looks, and its arguments' schema. */
#define CMD(id_, name_, scope_, deferred_, query_, ...)                                     \
	[PROTO_CMD_##id_] = {name_, PROTO_CMD_##id_, PROTO_SCOPE_##scope_, deferred_, query_,  \
		&(const cmd_schema){__VA_ARGS__}}

static const proto_command commands[PROTO_CMD_COUNT + 1] = {
	CMD(DAEMON_INFO, "daemon-info", DAEMON, 0, 1, NO_ARGS),
	CMD(DAEMON_SHUTDOWN, "daemon-shutdown", DAEMON, 0, 0, {{"save", ARG_BOOL, ARG_OPTIONAL}}),
	CMD(JOB_START, "job-start", DAEMON, 0, 0,
		{{"spec", ARG_SPEC, ARG_REQUIRED}, {"name", ARG_NAME, ARG_OPTIONAL}}),
	CMD(JOB_LIST, "job-list", DAEMON, 0, 1, NO_ARGS),
	CMD(JOB_STATUS, "job-status", JOB, 0, 1, {JOB}),
	CMD(JOB_PAUSE, "job-pause", JOB, 0, 0, {JOB}),
	CMD(JOB_RESUME, "job-resume", JOB, 0, 0, {JOB}),
	CMD(JOB_STOP, "job-stop", JOB, 1, 0,
		{JOB, {"save", ARG_BOOL, ARG_OPTIONAL}, {"name", ARG_CKPT, ARG_OPTIONAL}}),
	CMD(REMAT_GET, "remat-get", JOB, 0, 1, {JOB}),
	CMD(REMAT_SET, "remat-set", JOB, 0, 0,
		{JOB, {"sections", ARG_SECTIONS, ARG_REQUIRED}, {"default", ARG_DEFAULT, ARG_OPTIONAL},
			{"force", ARG_BOOL, ARG_OPTIONAL}}),
	/* of a job, or of a spec (rematd checks that one of the two is given) */
	CMD(REMAT_PLAN, "remat-plan", JOB, 0, 1,
		{{"job", ARG_JOB, ARG_JOB_OR_SPEC}, {"sections", ARG_SECTIONS, ARG_OPTIONAL},
			{"default", ARG_DEFAULT, ARG_OPTIONAL}, {"budget_bytes", ARG_BYTES, ARG_OPTIONAL},
			{"spec", ARG_SPEC, ARG_OPTIONAL}}),
	CMD(MEM_STATS, "mem-stats", JOB, 0, 1, {JOB}),
	CMD(MEM_RESET_PEAK, "mem-reset-peak", JOB, 0, 0, {JOB}),
	CMD(CKPT_SAVE, "ckpt-save", JOB, 1, 0, {JOB, {"name", ARG_CKPT, ARG_OPTIONAL}}),
	CMD(JOB_REMOVE, "job-remove", JOB, 0, 0, {JOB}),
	CMD(REMAT_COSTS, "remat-costs", JOB, 0, 1, {JOB}),
	CMD(REMAT_PROFILE, "remat-profile", JOB, 0, 0,
		{JOB, {"rounds", ARG_ROUNDS, ARG_OPTIONAL}}),
	/* a budget in bytes, or one of its sources, or off (the worker wants exactly one) */
	CMD(REMAT_AUTO, "remat-auto", JOB, 0, 0,
		{JOB, {"budget_bytes", ARG_BYTES, ARG_OPTIONAL}, {"budget", ARG_BUDGET, ARG_OPTIONAL}}),
	CMD(REMAT_MEMLOG, "remat-memlog", JOB, 0, 1,
		{JOB, {"steps", ARG_STEPS, ARG_OPTIONAL}, {"trace", ARG_TRACE, ARG_OPTIONAL}}),
	CMD(JOB_EVAL, "job-eval", JOB, 1, 0, {JOB}),
	CMD(JOB_SET, "job-set", JOB, 0, 0, {JOB, {"set", ARG_HPARAMS, ARG_REQUIRED}}),
	CMD(JOB_METRICS, "job-metrics", JOB, 0, 1,
		{JOB, {"offset", ARG_OFFSET, ARG_OPTIONAL}, {"lines", ARG_LINES, ARG_OPTIONAL}}),
	CMD(JOB_KILL, "job-kill", JOB, 0, 0, {JOB}),
	CMD(SUBSCRIBE, "subscribe", CONN, 0, 1,
		{{"job", ARG_JOB, ARG_OPTIONAL}, {"events", ARG_EVENTS, ARG_OPTIONAL}}),
	CMD(UNSUBSCRIBE, "unsubscribe", CONN, 0, 1,
		{{"job", ARG_JOB, ARG_OPTIONAL}, {"events", ARG_EVENTS, ARG_OPTIONAL}}),
	[PROTO_CMD_COUNT] = {NULL, PROTO_CMD_COUNT, PROTO_SCOPE_DAEMON, 0, 0, NULL},
};

/* The one table of event names: daemon, worker and client look names up here. */
static const char *const event_names[PROTO_EV_COUNT + 1] = {
	[PROTO_EV_STEP] = "STEP",
	[PROTO_EV_REMAT_APPLIED] = "REMAT_APPLIED",
	[PROTO_EV_CHECKPOINT_SAVED] = "CHECKPOINT_SAVED",
	[PROTO_EV_JOB_STATE_CHANGED] = "JOB_STATE_CHANGED",
	[PROTO_EV_MEMORY] = "MEMORY",
	[PROTO_EV_CHECKPOINT_FAILED] = "CHECKPOINT_FAILED",
	[PROTO_EV_REMAT_AUTO] = "REMAT_AUTO",
	[PROTO_EV_REMAT_FAILED] = "REMAT_FAILED",
	[PROTO_EV_EVAL] = "EVAL",
	[PROTO_EV_HPARAMS_APPLIED] = "HPARAMS_APPLIED",
	[PROTO_EV_SAMPLE] = "SAMPLE",
	[PROTO_EV_TOKENIZE] = "TOKENIZE",
	[PROTO_EV_POOL_CHANGED] = "POOL_CHANGED",
	[PROTO_EV_COUNT] = NULL,
};

/* The one table of modes: their names, and which sections each applies to. The engine
 * parses and prints modes through it; help texts list them from it. Any mode may go in
 * 'sections' (a block or the head), block modes only in 'default' (docs/protocol.md);
 * offload is a block mode of device cuda, which the worker checks. */
static const char *const mode_names[PROTO_MODE_COUNT + 1] = {
	[PROTO_MODE_OFF] = "off",
	[PROTO_MODE_SELECTIVE] = "selective",
	[PROTO_MODE_FULL] = "full",
	[PROTO_MODE_CHUNKED] = "chunked",
	[PROTO_MODE_OFFLOAD] = "offload",
	[PROTO_MODE_COUNT] = NULL,
};
#define ON_BLOCK 1
#define ON_HEAD 2
static const unsigned char mode_parts[PROTO_MODE_COUNT] = {
	[PROTO_MODE_OFF] = ON_BLOCK | ON_HEAD,
	[PROTO_MODE_SELECTIVE] = ON_BLOCK,
	[PROTO_MODE_FULL] = ON_BLOCK,
	[PROTO_MODE_CHUNKED] = ON_HEAD,
	[PROTO_MODE_OFFLOAD] = ON_BLOCK,
};

/* The one table of live hyperparameters: name, and the value each takes. */
typedef enum { HP_NUMBER, HP_COUNT, HP_SCHEDULE } hp_kind;
static const struct {
	const char *name;
	hp_kind kind;
	double lo, hi;  /* HP_NUMBER: lo < v (lo_open) or lo <= v, v <= hi */
	int lo_open;
} hparams[PROTO_HP_COUNT] = {
	[PROTO_HP_LR] = {"lr", HP_NUMBER, 0, PROTO_LR_MAX, 1},
	[PROTO_HP_SCHEDULE] = {"schedule", HP_SCHEDULE, 0, 0, 0},
	[PROTO_HP_WARMUP] = {"warmup", HP_COUNT, 0, 1e9, 0},
	[PROTO_HP_MIN_LR_FRAC] = {"min_lr_frac", HP_NUMBER, 0, 1, 0},
	[PROTO_HP_GRAD_CLIP] = {"grad_clip", HP_NUMBER, 0, 1e30, 0},
	[PROTO_HP_WEIGHT_DECAY] = {"weight_decay", HP_NUMBER, 0, 1e30, 0},
	[PROTO_HP_EVAL_EVERY] = {"eval.every", HP_COUNT, 0, 1e9, 0},
	[PROTO_HP_SAVE_EVERY] = {"save.every", HP_COUNT, 0, 1e9, 0},
};

const char *proto_hparam_name(proto_hparam h)
{
	return (unsigned)h < PROTO_HP_COUNT ? hparams[h].name : "?";
}

int proto_hparam_find(const char *name)
{
	for (int i = 0; name != NULL && i < PROTO_HP_COUNT; i++)
		if (strcmp(name, hparams[i].name) == 0)
			return i;
	return -1;
}

int proto_hparam_check(proto_hparam h, const json_t *v, char *desc, size_t desclen)
{
	const char *n = proto_hparam_name(h);
	double x = json_number_value(v);
	switch (hparams[h].kind) {
	case HP_SCHEDULE: {
		const char *k = json_string_value(v);
		if (k && (!strcmp(k, "cosine") || !strcmp(k, "constant")))
			return 0;
		proto__descf(desc, desclen, "'%s' must be \"cosine\" or \"constant\"", n);
		return -1;
	}
	case HP_COUNT:
		if (json_is_integer(v) && x >= hparams[h].lo && x <= hparams[h].hi)
			return 0;
		proto__descf(desc, desclen, "'%s' must be an integer from %.0f to %.0f", n,
			hparams[h].lo, hparams[h].hi);
		return -1;
	case HP_NUMBER:
		if (json_is_number(v) && (hparams[h].lo_open ? x > hparams[h].lo : x >= hparams[h].lo)
			&& x <= hparams[h].hi)
			return 0;
		if (hparams[h].hi < 1e29)
			proto__descf(desc, desclen, "'%s' must be a number %s %g, at most %g", n,
				hparams[h].lo_open ? "above" : "from", hparams[h].lo, hparams[h].hi);
		else
			proto__descf(desc, desclen, "'%s' must be a number >= %g", n, hparams[h].lo);
		return -1;
	}
	return -1;
}

/* job-set's object: at least one key, each a live hyperparameter with a value it takes. */
static int check_hparams(const json_t *v, char *desc, size_t desclen)
{
	const char *key;
	json_t *val;
	if (!json_is_object(v) || json_object_size(v) == 0) {
		proto__descf(desc, desclen, "'set' must be an object of hyperparameter -> value, "
			     "not empty");
		return -1;
	}
	json_object_foreach((json_t *)v, key, val) {
		int h = proto_hparam_find(key);
		if (!strcmp(key, PROTO_PRIORITY)) {
			if (json_is_integer(val) && json_integer_value(val) >= 1 &&
				json_integer_value(val) <= PROTO_PRIORITY_MAX)
				continue;
			proto__descf(desc, desclen, "'%s' must be an integer from 1 to %d",
				PROTO_PRIORITY, PROTO_PRIORITY_MAX);
			return -1;
		}
		if (h < 0) {
			char known[256];
			size_t used = 0;
			for (int i = 0; i < PROTO_HP_COUNT && used < sizeof known; i++)
				used += (size_t)snprintf(known + used, sizeof known - used, "%s%s",
					i ? ", " : "", hparams[i].name);
			proto__descf(desc, desclen, "'set' has '%.64s', which is not a live "
				     "hyperparameter (known: %s; and rematd's %s)", key, known,
				     PROTO_PRIORITY);
			return -1;
		}
		if (proto_hparam_check((proto_hparam)h, val, desc, desclen) < 0)
			return -1;
	}
	return 0;
}

const char *proto_mode_name(int m)
{
	return m >= 0 && m < PROTO_MODE_COUNT ? mode_names[m] : "unknown";
}

int proto_mode_find(const char *name)
{
	for (int i = 0; name != NULL && i < PROTO_MODE_COUNT; i++)
		if (strcmp(mode_names[i], name) == 0)
			return i;
	return -1;
}

int proto_mode_for_block(int m)
{
	return m >= 0 && m < PROTO_MODE_COUNT && (mode_parts[m] & ON_BLOCK);
}

int proto_mode_for_head(int m)
{
	return m >= 0 && m < PROTO_MODE_COUNT && (mode_parts[m] & ON_HEAD);
}

const char *proto_modes_of(int head, char *buf, size_t len)
{
	size_t n = 0;
	if (len)
		buf[0] = '\0';
	for (int m = 0; m < PROTO_MODE_COUNT; m++) {
		if (!(mode_parts[m] & (head ? ON_HEAD : ON_BLOCK)) || n >= len)
			continue;
		int w = snprintf(buf + n, len - n, "%s%s", n ? ", " : "", mode_names[m]);
		n += w > 0 ? (size_t)w : 0;
	}
	return buf;
}

const char *proto_modes_text(char *buf, size_t len)
{
	char blocks[96], head[96];
	snprintf(buf, len, "%s (blocks); %s (head)", proto_modes_of(0, blocks, sizeof blocks),
		proto_modes_of(1, head, sizeof head));
	return buf;
}

/* Levenshtein distance of a and b, both at most NEAR_MAX_LEN bytes (else a large one). */
#define NEAR_MAX_LEN 32
static int edit_distance(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b);
	int row[NEAR_MAX_LEN + 1];
	if (n > NEAR_MAX_LEN || m > NEAR_MAX_LEN)
		return NEAR_MAX_LEN;
	for (size_t j = 0; j <= m; j++)
		row[j] = (int)j;
	for (size_t i = 1; i <= n; i++) {
		int diag = row[0];
		row[0] = (int)i;
		for (size_t j = 1; j <= m; j++) {
			int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	return row[m];
}

const char *proto_nearest(const char *word, const char *const *list)
{
	const char *best = NULL;
	size_t wl = word != NULL ? strlen(word) : 0;
	int best_d = wl >= 6 ? 3 : 2; /* what is still near: at most 1 edit, 2 for long words */
	if (wl == 0)
		return NULL;
	for (; *list != NULL; list++) {
		if (strcasecmp(*list, word) == 0 || (wl >= 3 && strncmp(*list, word, wl) == 0))
			return *list; /* "FULL" for "full", "sel" for "selective" */
		int d = edit_distance(word, *list);
		if (d < best_d) {
			best_d = d;
			best = *list;
		}
	}
	return best;
}

const char *proto_mode_hint(const char *word, char *buf, size_t len)
{
	const char *near = proto_nearest(word, mode_names);
	if (len > 0)
		buf[0] = '\0';
	if (near != NULL)
		snprintf(buf, len, " (did you mean '%s'?)", near);
	return buf;
}

const proto_command *proto_commands(void)
{
	return commands;
}

const char *proto_command_arg(const proto_command *cmd, int i, int *optional)
{
	if (i < 0 || i >= MAX_ARGS)
		return NULL;
	const arg_spec *a = &cmd->schema->args[i];
	*optional = a->need == ARG_OPTIONAL;
	return a->name;
}

const proto_command *proto_command_find(const char *name)
{
	if (name == NULL)
		return NULL;
	for (const proto_command *c = commands; c->name != NULL; c++)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

const char *proto_event_name(proto_event e)
{
	return (unsigned)e < PROTO_EV_COUNT ? event_names[e] : "?";
}

int proto_event_find(const char *name)
{
	for (int i = 0; name != NULL && i < PROTO_EV_COUNT; i++)
		if (strcmp(event_names[i], name) == 0)
			return i;
	return -1;
}

int proto_event_known(const char *name)
{
	return proto_event_find(name) >= 0;
}

/* The schema of cmd: its own, or by name for a caller-built copy without one. */
static const cmd_schema *schema_of(const proto_command *cmd)
{
	if (cmd->schema)
		return cmd->schema;
	const proto_command *c = proto_command_find(cmd->name);
	return c != NULL ? c->schema : NULL;
}

/* The value of a string argument, NULL when v is not a string or holds a NUL (which a
 * caller-built string can); *len its length. */
static const char *str_value(const json_t *v, size_t *len)
{
	if (!json_is_string(v))
		return NULL;
	const char *s = json_string_value(v);
	*len = json_string_length(v);
	return memchr(s, '\0', *len) == NULL ? s : NULL;
}

static int check_string(const char *name, const json_t *v, size_t max, char *desc,
	size_t desclen)
{
	size_t n = 0;
	const char *s = str_value(v, &n);
	if (s == NULL) {
		proto__descf(desc, desclen, "'%s' must be a string", name);
		return -1;
	}
	if (n == 0 || n > max) {
		proto__descf(desc, desclen, "'%s' must be 1 to %zu bytes long", name, max);
		return -1;
	}
	return 0;
}

static int check_sections(const json_t *v, char *desc, size_t desclen)
{
	const char *sel;
	json_t *mode;
	if (!json_is_object(v)) {
		proto__descf(desc, desclen, "'sections' must be an object");
		return -1;
	}
	json_object_foreach((json_t *)v, sel, mode) {
		size_t n = strlen(sel);
		const char *m;
		size_t mlen = 0;
		if (n == 0 || n > PROTO_SELECTOR_MAX) {
			proto__descf(desc, desclen,
				"section selector '%.*s' in 'sections' must be 1 to %d bytes long",
				proto__clip(sel), sel, PROTO_SELECTOR_MAX);
			return -1;
		}
		m = str_value(mode, &mlen);
		if (m == NULL) {
			proto__descf(desc, desclen, "mode for section '%.*s' must be a string",
				proto__clip(sel), sel);
			return -1;
		}
		if (proto_mode_find(m) < 0) {
			char hint[64];
			proto__descf(desc, desclen, "unknown mode '%.*s' for section '%.*s'%s",
				proto__clip(m), m, proto__clip(sel), sel, proto_mode_hint(m, hint,
				sizeof hint));
			return -1;
		}
	}
	return 0;
}

static int check_default(const json_t *v, char *desc, size_t desclen)
{
	size_t n = 0;
	const char *m = str_value(v, &n);
	if (m == NULL) {
		proto__descf(desc, desclen, "'default' must be a string");
		return -1;
	}
	if (!proto_mode_for_block(proto_mode_find(m))) {
		char hint[64], modes[96];
		proto__descf(desc, desclen, "unknown mode '%.*s' for 'default' (%s)%s",
			proto__clip(m), m, proto_modes_of(0, modes, sizeof modes),
			proto_mode_hint(m, hint, sizeof hint));
		return -1;
	}
	return 0;
}

/* An integer from 1 to max. */
static int check_count(const char *name, const json_t *v, int max, char *desc, size_t desclen)
{
	if (json_is_integer(v) && json_integer_value(v) >= 1 && json_integer_value(v) <= max)
		return 0;
	proto__descf(desc, desclen, "'%s' must be an integer from 1 to %d", name, max);
	return -1;
}

/* A checkpoint name becomes a file name: a safe alphabet, and no leading '.' so that it can
 * be neither hidden nor "." or "..". */
static int check_ckpt_name(const json_t *v, char *desc, size_t desclen)
{
	size_t n = 0;
	const char *s = str_value(v, &n);
	if (s == NULL) {
		proto__descf(desc, desclen, "'name' must be a string");
		return -1;
	}
	int ok = n >= 1 && n <= CKPT_NAME_MAX && s[0] != '.';
	for (size_t i = 0; ok && i < n; i++) {
		char c = s[i];
		ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		     c == '.' || c == '_' || c == '-';
	}
	if (!ok) {
		proto__descf(desc, desclen,
			"invalid checkpoint name '%.*s' in 'name' (1 to %d of A-Z a-z 0-9 . _ -, "
			"not starting with '.')",
			proto__clip(s), s, CKPT_NAME_MAX);
		return -1;
	}
	/* names the save directory uses itself: the latest file, the periodic checkpoints
	 * that "keep" prunes (step_*), interrupted saves (.tmp) and a replaced checkpoint
	 * kept aside during a re-save (.old) */
	if (strcmp(s, "latest") == 0 || strncmp(s, "step_", 5) == 0 ||
		(n > 4 && (strcmp(s + n - 4, ".tmp") == 0 || strcmp(s + n - 4, ".old") == 0))) {
		proto__descf(desc, desclen, "checkpoint name '%.*s' is reserved (latest, step_*, "
					     "*.tmp, *.old)", proto__clip(s), s);
		return -1;
	}
	return 0;
}

static int check_events(const json_t *v, char *desc, size_t desclen)
{
	size_t i;
	json_t *e;
	if (!json_is_array(v)) {
		proto__descf(desc, desclen, "'events' must be an array of event names");
		return -1;
	}
	json_array_foreach((json_t *)v, i, e) {
		size_t n = 0;
		const char *s = str_value(e, &n);
		if (s == NULL) {
			proto__descf(desc, desclen, "'events' must hold only strings");
			return -1;
		}
		if (!proto_event_known(s)) {
			proto__descf(desc, desclen, "unknown event '%.*s' in 'events'",
				proto__clip(s), s);
			return -1;
		}
	}
	return 0;
}

static int check_arg(const arg_spec *a, const json_t *v, char *desc, size_t desclen)
{
	switch (a->type) {
	case ARG_JOB:
		return check_string(a->name, v, JOB_ID_MAX, desc, desclen);
	case ARG_NAME:
		return check_string(a->name, v, JOB_NAME_MAX, desc, desclen);
	case ARG_BOOL:
		if (json_is_boolean(v))
			return 0;
		proto__descf(desc, desclen, "'%s' must be a boolean", a->name);
		return -1;
	case ARG_SPEC:
		if (json_is_object(v))
			return 0;
		proto__descf(desc, desclen, "'%s' must be an object", a->name);
		return -1;
	case ARG_SECTIONS:
		return check_sections(v, desc, desclen);
	case ARG_DEFAULT:
		return check_default(v, desc, desclen);
	case ARG_BYTES:
		if (!json_is_integer(v)) {
			proto__descf(desc, desclen, "'%s' must be an integer", a->name);
			return -1;
		}
		if (json_integer_value(v) < 0) {
			proto__descf(desc, desclen, "'%s' must not be negative", a->name);
			return -1;
		}
		return 0;
	case ARG_ROUNDS:
		return check_count(a->name, v, PROTO_PROFILE_MAX_ROUNDS, desc, desclen);
	case ARG_STEPS:
		return check_count(a->name, v, PROTO_MEMLOG_STEPS, desc, desclen);
	case ARG_LINES:
		return check_count(a->name, v, PROTO_METRICS_MAX_LINES, desc, desclen);
	case ARG_HPARAMS:
		return check_hparams(v, desc, desclen);
	case ARG_OFFSET:
		if (json_is_integer(v) && json_integer_value(v) >= 0)
			return 0;
		proto__descf(desc, desclen, "'%s' must be an integer >= 0", a->name);
		return -1;
	case ARG_TRACE: {
		const char *f = json_string_value(v);
		if (f && (!strcmp(f, "pytorch") || !strcmp(f, "chrome")))
			return 0;
		proto__descf(desc, desclen, "'%s' must be \"pytorch\" (the snapshot PyTorch's "
			     "memory viewer reads) or \"chrome\" (a Chrome trace)", a->name);
		return -1;
	}
	case ARG_BUDGET: {
		const char *b = json_string_value(v);
		if (b && (!strcmp(b, "cgroup") || !strcmp(b, "device") || !strcmp(b, "off")))
			return 0;
		proto__descf(desc, desclen, "'%s' must be \"cgroup\", \"device\" or \"off\" "
			     "(a size goes in 'budget_bytes')", a->name);
		return -1;
	}
	case ARG_CKPT:
		return check_ckpt_name(v, desc, desclen);
	case ARG_EVENTS:
		return check_events(v, desc, desclen);
	}
	proto__descf(desc, desclen, "'%s' has no schema", a->name);
	return -1;
}

int proto_args_validate_ex(const proto_command *cmd, const json_t *args, int job_optional,
	char *desc, size_t desclen)
{
	const cmd_schema *sc = cmd != NULL && cmd->name != NULL ? schema_of(cmd) : NULL;
	const arg_spec *a;
	const char *key;
	json_t *v;

	if (sc == NULL) {
		proto__descf(desc, desclen, "unknown command");
		return -1;
	}
	if (args != NULL && !json_is_object(args)) {
		proto__descf(desc, desclen, "arguments of %s must be an object", cmd->name);
		return -1;
	}
	/* unknown keys first: nothing else is looked at in a request that has one */
	if (args != NULL) {
		json_object_foreach((json_t *)args, key, v) {
			for (a = sc->args; a->name != NULL; a++)
				if (strcmp(a->name, key) == 0)
					break;
			if (a->name == NULL) {
				proto__descf(desc, desclen, "unknown argument '%.*s' for %s",
					proto__clip(key), key, cmd->name);
				return -1;
			}
		}
	}
	for (a = sc->args; a->name != NULL; a++) {
		v = args != NULL ? json_object_get(args, a->name) : NULL;
		if (v == NULL) {
			int spec = args != NULL && json_object_get(args, "spec") != NULL;
			if (a->need == ARG_REQUIRED ||
				(a->need == ARG_REQUIRED_JOB && !job_optional) ||
				(a->need == ARG_JOB_OR_SPEC && !job_optional && !spec)) {
				proto__descf(desc, desclen, "missing argument '%s' for %s%s",
					a->name, cmd->name, a->need == ARG_JOB_OR_SPEC ?
					" (or 'spec')" : "");
				return -1;
			}
			continue;
		}
		if (check_arg(a, v, desc, desclen) < 0)
			return -1;
	}
	return 0;
}

int proto_args_validate(const proto_command *cmd, const json_t *args, char *desc,
	size_t desclen)
{
	return proto_args_validate_ex(cmd, args, 0, desc, desclen);
}
