/* test_proto_args.c - tests of the command table and of strict argument validation
 * (proto/proto_cmd.c), a TCase of suite_proto (test_proto.c).
 *
 * What it covers: every command of docs/protocol.md found with its scope and deferral, the
 * event names, and every command's arguments accepted and refused: unknown keys, wrong
 * types, missing required keys, bad modes, bad event names, negative budgets, bad
 * checkpoint names, lengths on both sides of their limits, "job" optional for a worker;
 * each refusal's message must name the argument.
 * What it does not: what the daemon or the worker does with valid arguments.
 */
#include "tests.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

TCase *tcase_proto_args(void);

static const struct {
	const char *name;
	proto_scope scope;
	int deferred;
} documented[] = {
	{"daemon-info", PROTO_SCOPE_DAEMON, 0}, {"daemon-shutdown", PROTO_SCOPE_DAEMON, 0},
	{"job-start", PROTO_SCOPE_DAEMON, 0}, {"job-list", PROTO_SCOPE_DAEMON, 0},
	{"job-status", PROTO_SCOPE_JOB, 0}, {"job-pause", PROTO_SCOPE_JOB, 0},
	{"job-resume", PROTO_SCOPE_JOB, 0}, {"job-stop", PROTO_SCOPE_JOB, 1},
	{"remat-get", PROTO_SCOPE_JOB, 0}, {"remat-set", PROTO_SCOPE_JOB, 0},
	{"remat-plan", PROTO_SCOPE_JOB, 0}, {"mem-stats", PROTO_SCOPE_JOB, 0},
	{"mem-reset-peak", PROTO_SCOPE_JOB, 0}, {"ckpt-save", PROTO_SCOPE_JOB, 1},
	{"job-remove", PROTO_SCOPE_JOB, 0},
	{"remat-costs", PROTO_SCOPE_JOB, 0},
	{"remat-profile", PROTO_SCOPE_JOB, 0},
	{"remat-auto", PROTO_SCOPE_JOB, 0},
	{"remat-memlog", PROTO_SCOPE_JOB, 0},
	{"job-eval", PROTO_SCOPE_JOB, 1},
	{"job-set", PROTO_SCOPE_JOB, 0},
	{"job-metrics", PROTO_SCOPE_JOB, 0},
	{"job-kill", PROTO_SCOPE_JOB, 0},
	{"subscribe", PROTO_SCOPE_CONN, 0}, {"unsubscribe", PROTO_SCOPE_CONN, 0},
};
#define N_DOCUMENTED (sizeof documented / sizeof documented[0])

START_TEST(test_proto_command_find_documented)
{
	for (size_t i = 0; i < N_DOCUMENTED; i++) {
		const proto_command *c = proto_command_find(documented[i].name);
		ck_assert_msg(c != NULL, "%s not found", documented[i].name);
		ck_assert_str_eq(c->name, documented[i].name);
		ck_assert_msg(c->scope == documented[i].scope, "%s: scope", c->name);
		ck_assert_msg(c->deferred == documented[i].deferred, "%s: deferred", c->name);
	}
	size_t n = 0;
	for (const proto_command *c = proto_commands(); c->name != NULL; c++) {
		/* the servers' handler tables are indexed by id */
		ck_assert_msg(c->id == (proto_cmd_id)n, "%s: id %d at %zu", c->name, c->id, n);
		ck_assert_msg(c->schema != NULL, "%s: no schema", c->name);
		n++;
	}
	ck_assert_uint_eq(n, N_DOCUMENTED);
	ck_assert_uint_eq(n, PROTO_CMD_COUNT);
	/* what only looks: anyone may send it about any job, and rematd does not log it */
	const char *queries[] = {"daemon-info", "job-list", "job-status", "remat-get",
		"remat-plan", "mem-stats", "remat-costs", "remat-memlog", "job-metrics", "subscribe",
		"unsubscribe"};
	size_t nq = 0;
	for (const proto_command *c = proto_commands(); c->name != NULL; c++) {
		int want = 0;
		for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++)
			want |= strcmp(queries[i], c->name) == 0;
		ck_assert_msg(c->query == want, "%s: query %d", c->name, c->query);
		nq += c->query;
	}
	ck_assert_uint_eq(nq, sizeof queries / sizeof queries[0]);
	ck_assert_ptr_null(proto_command_find("job-lis"));
	ck_assert_ptr_null(proto_command_find("JOB-LIST"));
	ck_assert_ptr_null(proto_command_find(""));
	ck_assert_ptr_null(proto_command_find(NULL));
}
END_TEST

START_TEST(test_proto_event_known_names)
{
	const char *known[] = {"STEP", "REMAT_APPLIED", "CHECKPOINT_SAVED", "JOB_STATE_CHANGED",
		"MEMORY", "EVAL", "HPARAMS_APPLIED", "SAMPLE", "TOKENIZE", "POOL_CHANGED"};
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
		ck_assert_msg(proto_event_known(known[i]), "%s unknown", known[i]);
	ck_assert(!proto_event_known("step"));
	ck_assert(!proto_event_known("STEPS"));
	ck_assert(!proto_event_known(""));
	ck_assert(!proto_event_known(NULL));
}
END_TEST

/* Validates args text for cmd (job_optional as given); needle NULL means it must pass. */
static void args_check(const char *cmd, const char *args, int job_optional,
	const char *needle)
{
	json_error_t err;
	char desc[PROTO_DESC_LEN] = "";
	const proto_command *c = proto_command_find(cmd);
	json_t *a = json_loads(args, 0, &err);
	ck_assert_msg(c != NULL, "no command %s", cmd);
	ck_assert_msg(a != NULL, "test JSON %s: %s", args, err.text);
	int rc = proto_args_validate_ex(c, a, job_optional, desc, sizeof desc);
	if (needle == NULL) {
		ck_assert_msg(rc == 0, "%s %s refused: %s", cmd, args, desc);
	} else {
		ck_assert_msg(rc == -1, "%s %s accepted (want '%s')", cmd, args, needle);
		ck_assert_msg(strstr(desc, needle) != NULL, "%s %s: '%s' lacks '%s'", cmd, args,
			desc, needle);
		size_t n = strlen(desc);
		ck_assert_msg(n > 0 && desc[n - 1] != '.', "'%s' ends with a full stop", desc);
	}
	if (job_optional == 0) /* the plain form agrees */
		ck_assert_int_eq(proto_args_validate(c, a, desc, sizeof desc), rc);
	json_decref(a);
}

#define OK(cmd, args) args_check(cmd, args, 0, NULL)
#define BAD(cmd, args, needle) args_check(cmd, args, 0, needle)

START_TEST(test_proto_args_validate_no_arguments)
{
	OK("daemon-info", "{}");
	OK("job-list", "{}");
	BAD("daemon-info", "{\"job\":\"j1\"}", "unknown argument 'job' for daemon-info");
	BAD("job-list", "{\"all\":true}", "unknown argument 'all' for job-list");
	/* NULL arguments are no arguments */
	char desc[PROTO_DESC_LEN];
	ck_assert_int_eq(proto_args_validate(proto_command_find("job-list"), NULL, desc,
				 sizeof desc),
		0);
	ck_assert_int_eq(proto_args_validate(proto_command_find("job-status"), NULL, desc,
				 sizeof desc),
		-1);
	/* arguments that are not an object, or no command */
	json_t *arr = json_array();
	ck_assert_int_eq(proto_args_validate(proto_command_find("job-list"), arr, desc,
				 sizeof desc),
		-1);
	ck_assert_int_eq(proto_args_validate(NULL, arr, desc, sizeof desc), -1);
	json_decref(arr);
}
END_TEST

START_TEST(test_proto_args_validate_daemon_shutdown)
{
	OK("daemon-shutdown", "{}");
	OK("daemon-shutdown", "{\"save\":true}");
	OK("daemon-shutdown", "{\"save\":false}");
	BAD("daemon-shutdown", "{\"save\":1}", "'save' must be a boolean");
	BAD("daemon-shutdown", "{\"save\":\"yes\"}", "'save' must be a boolean");
	BAD("daemon-shutdown", "{\"save\":null}", "'save' must be a boolean");
	BAD("daemon-shutdown", "{\"force\":true}", "unknown argument 'force' for daemon-shutdown");
}
END_TEST

START_TEST(test_proto_args_validate_job_start)
{
	OK("job-start", "{\"spec\":{\"model\":{\"preset\":\"tiny\"}}}");
	OK("job-start", "{\"spec\":{},\"name\":\"my run\"}");
	BAD("job-start", "{}", "missing argument 'spec' for job-start");
	BAD("job-start", "{\"name\":\"x\"}", "missing argument 'spec'");
	BAD("job-start", "{\"spec\":\"/abs/job.json\"}", "'spec' must be an object");
	BAD("job-start", "{\"spec\":[]}", "'spec' must be an object");
	BAD("job-start", "{\"spec\":{},\"name\":3}", "'name' must be a string");
	BAD("job-start", "{\"spec\":{},\"name\":\"\"}", "'name' must be 1 to 64 bytes");
	BAD("job-start",
		"{\"spec\":{},\"name\":\"0123456789012345678901234567890123456789"
		"01234567890123456789012345\"}",
		"'name' must be 1 to 64 bytes");
	BAD("job-start", "{\"spec\":{},\"job\":\"j1\"}", "unknown argument 'job' for job-start");
}
END_TEST

START_TEST(test_proto_args_validate_job_commands)
{
	const char *cmds[] = {"job-status", "job-pause", "job-resume", "job-stop", "remat-get",
		"mem-stats", "mem-reset-peak", "ckpt-save"};
	char want[128];
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
		OK(cmds[i], "{\"job\":\"j1\"}");
		OK(cmds[i], "{\"job\":\"0123456789012345678901234567890123456789012345678901234"
			    "567890123\"}"); /* 64 bytes */
		snprintf(want, sizeof want, "missing argument 'job' for %s", cmds[i]);
		BAD(cmds[i], "{}", want);
		BAD(cmds[i], "{\"job\":1}", "'job' must be a string");
		BAD(cmds[i], "{\"job\":null}", "'job' must be a string");
		BAD(cmds[i], "{\"job\":\"\"}", "'job' must be 1 to 64 bytes");
		BAD(cmds[i],
			"{\"job\":\"0123456789012345678901234567890123456789012345678901234567"
			"8901234\"}",
			"'job' must be 1 to 64 bytes");
		snprintf(want, sizeof want, "unknown argument 'foo' for %s", cmds[i]);
		BAD(cmds[i], "{\"job\":\"j1\",\"foo\":1}", want);
		/* a worker spoken to directly: job may be left out, not be wrong */
		args_check(cmds[i], "{}", 1, NULL);
		args_check(cmds[i], "{\"job\":\"j1\"}", 1, NULL);
		args_check(cmds[i], "{\"job\":7}", 1, "'job' must be a string");
		args_check(cmds[i], "{\"foo\":1}", 1, "unknown argument 'foo'");
	}
}
END_TEST

START_TEST(test_proto_args_validate_job_stop)
{
	OK("job-stop", "{\"job\":\"j1\",\"save\":true}");
	OK("job-stop", "{\"job\":\"j1\",\"save\":false}");
	BAD("job-stop", "{\"job\":\"j1\",\"save\":\"true\"}", "'save' must be a boolean");
	BAD("job-stop", "{\"job\":\"j1\",\"save\":0}", "'save' must be a boolean");
	BAD("job-stop", "{\"save\":true}", "missing argument 'job' for job-stop");
	BAD("job-pause", "{\"job\":\"j1\",\"save\":true}", "unknown argument 'save' for job-pause");
}
END_TEST

START_TEST(test_proto_args_validate_remat_set)
{
	OK("remat-set", "{\"job\":\"j1\",\"sections\":{\"h.0-5\":\"full\"}}");
	OK("remat-set", "{\"job\":\"j1\",\"sections\":{\"h.0\":\"off\",\"blocks\":\"selective\","
			"\"head\":\"chunked\"},\"default\":\"off\"}");
	OK("remat-set", "{\"job\":\"j1\",\"sections\":{},\"default\":\"full\"}");
	OK("remat-set", "{\"job\":\"j1\",\"sections\":{},\"default\":\"selective\"}");
	BAD("remat-set", "{\"job\":\"j1\"}", "missing argument 'sections' for remat-set");
	BAD("remat-set", "{\"job\":\"j1\",\"default\":\"full\"}", "missing argument 'sections'");
	BAD("remat-set", "{\"sections\":{}}", "missing argument 'job' for remat-set");
	BAD("remat-set", "{\"job\":\"j1\",\"sections\":\"h.0=full\"}",
		"'sections' must be an object");
	BAD("remat-set", "{\"job\":\"j1\",\"sections\":[\"h.0\"]}", "'sections' must be an object");
	BAD("remat-set", "{\"job\":\"j1\",\"sections\":{\"h.0\":\"fast\"}}",
		"unknown mode 'fast' for section 'h.0'");
	BAD("remat-set", "{\"job\":\"j1\",\"sections\":{\"h.0\":\"FULL\"}}",
		"unknown mode 'FULL' for section 'h.0' (did you mean 'full'?)");
	BAD("remat-set", "{\"job\":\"j1\",\"sections\":{\"h.0\":\"ful\"}}",
		"unknown mode 'ful' for section 'h.0' (did you mean 'full'?)");
	BAD("remat-set", "{\"job\":\"j1\",\"sections\":{\"h.0\":\"xyzzy\"}}",
		"unknown mode 'xyzzy' for section 'h.0'");
	BAD("remat-set", "{\"job\":\"j1\",\"sections\":{\"h.0\":1}}",
		"mode for section 'h.0' must be a string");
	BAD("remat-set", "{\"job\":\"j1\",\"sections\":{\"\":\"full\"}}", "section selector");
	/* 63 bytes fit, 64 do not */
	OK("remat-set", "{\"job\":\"j1\",\"sections\":{\"h.01234567890123456789012345678901234"
			"56789012345678901234567890\":\"full\"}}");
	BAD("remat-set",
		"{\"job\":\"j1\",\"sections\":{\"h.0123456789012345678901234567890123456789"
		"0123456789012345678901\":\"full\"}}",
		"must be 1 to 63 bytes");
	BAD("remat-set", "{\"job\":\"j1\",\"sections\":{},\"default\":\"chunked\"}",
		"unknown mode 'chunked' for 'default'");
	BAD("remat-set", "{\"job\":\"j1\",\"sections\":{},\"default\":\"fast\"}",
		"unknown mode 'fast' for 'default'");
	BAD("remat-set", "{\"job\":\"j1\",\"sections\":{},\"default\":true}",
		"'default' must be a string");
	BAD("remat-set", "{\"job\":\"j1\",\"sections\":{},\"budget_bytes\":1}",
		"unknown argument 'budget_bytes' for remat-set");
	BAD("remat-set", "{\"job\":\"j1\",\"sections\":{},\"foo\":1}",
		"unknown argument 'foo' for remat-set");
}
END_TEST

START_TEST(test_proto_args_validate_remat_plan)
{
	OK("remat-plan", "{\"job\":\"j1\"}");
	OK("remat-plan", "{\"job\":\"j1\",\"budget_bytes\":0}");
	OK("remat-plan", "{\"job\":\"j1\",\"budget_bytes\":9007199254740993}");
	OK("remat-plan",
		"{\"job\":\"j1\",\"sections\":{\"head\":\"chunked\"},\"default\":\"full\"}");
	BAD("remat-plan", "{\"job\":\"j1\",\"budget_bytes\":-1}",
		"'budget_bytes' must not be negative");
	BAD("remat-plan", "{\"job\":\"j1\",\"budget_bytes\":1.5}",
		"'budget_bytes' must be an integer");
	BAD("remat-plan", "{\"job\":\"j1\",\"budget_bytes\":1e9}",
		"'budget_bytes' must be an integer");
	BAD("remat-plan", "{\"job\":\"j1\",\"budget_bytes\":\"1GiB\"}",
		"'budget_bytes' must be an integer");
	BAD("remat-plan", "{\"job\":\"j1\",\"sections\":{\"h.1\":\"most\"}}",
		"unknown mode 'most' for section 'h.1'");
	BAD("remat-plan", "{\"job\":\"j1\",\"sections\":1}", "'sections' must be an object");
	BAD("remat-plan", "{\"job\":\"j1\",\"default\":\"chunked\"}", "for 'default'");
	BAD("remat-plan", "{\"budget_bytes\":10}",
		"missing argument 'job' for remat-plan (or 'spec')");
	/* a spec instead of a job: a plan before anything starts */
	OK("remat-plan", "{\"spec\":{\"model\":{}},\"budget_bytes\":10}");
	BAD("remat-plan", "{\"spec\":[]}", "'spec' must be an object");
	BAD("remat-plan", "{\"job\":\"j1\",\"budget\":10}",
		"unknown argument 'budget' for remat-plan");
}
END_TEST

START_TEST(test_proto_args_validate_ckpt_save)
{
	OK("ckpt-save", "{\"job\":\"j1\",\"name\":\"step-100_best.v2\"}");
	OK("ckpt-save", "{\"job\":\"j1\",\"name\":\"a\"}");
	OK("ckpt-save", "{\"job\":\"j1\",\"name\":\"0123456789012345678901234567890123456789"
			"012345678901234567890123\"}"); /* 64 */
	const char *bad[] = {"", ".hidden", "..", ".", "a/b", "../x", "a b", "caf\\u00e9",
		"x\\n", "01234567890123456789012345678901234567890123456789012345678901234"};
	char args[256];
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(args, sizeof args, "{\"job\":\"j1\",\"name\":\"%s\"}", bad[i]);
		BAD("ckpt-save", args, "invalid checkpoint name");
	}
	/* the save directory's own names; step_* would be pruned by "keep" */
	const char *reserved[] = {"latest", "step_00000100", "step_best", "x.tmp", "x.old"};
	for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
		snprintf(args, sizeof args, "{\"job\":\"j1\",\"name\":\"%s\"}", reserved[i]);
		BAD("ckpt-save", args, "is reserved");
	}
	BAD("ckpt-save", "{\"job\":\"j1\",\"name\":5}", "'name' must be a string");
	BAD("ckpt-save", "{\"job\":\"j1\",\"path\":\"/tmp/x\"}",
		"unknown argument 'path' for ckpt-save");
}
END_TEST

/* job-set: each key of proto's table with the value it takes, nothing else; job-metrics'
 * window; job-eval takes the job alone. */
START_TEST(test_proto_args_validate_job_set)
{
	OK("job-set", "{\"job\":\"j1\",\"set\":{\"lr\":1e-4}}");
	OK("job-set", "{\"job\":\"j1\",\"set\":{\"lr\":2e-3,\"schedule\":\"cosine\","
		"\"warmup\":10,\"min_lr_frac\":0,\"grad_clip\":0,\"weight_decay\":0.05,"
		"\"eval.every\":200,\"save.every\":0}}");
	BAD("job-set", "{\"job\":\"j1\"}", "missing argument 'set'");
	BAD("job-set", "{\"job\":\"j1\",\"set\":{}}", "not empty");
	BAD("job-set", "{\"job\":\"j1\",\"set\":[1]}", "'set' must be an object");
	BAD("job-set", "{\"job\":\"j1\",\"set\":{\"lr\":0}}", "'lr' must be a number above 0");
	BAD("job-set", "{\"job\":\"j1\",\"set\":{\"lr\":11}}", "at most 10");
	BAD("job-set", "{\"job\":\"j1\",\"set\":{\"lr\":\"1e-4\"}}", "'lr' must be a number");
	BAD("job-set", "{\"job\":\"j1\",\"set\":{\"grad_clip\":-1}}", "'grad_clip' must be");
	BAD("job-set", "{\"job\":\"j1\",\"set\":{\"min_lr_frac\":1.5}}", "at most 1");
	BAD("job-set", "{\"job\":\"j1\",\"set\":{\"eval.every\":1.5}}",
		"'eval.every' must be an integer");
	BAD("job-set", "{\"job\":\"j1\",\"set\":{\"schedule\":\"linear\"}}",
		"\"cosine\" or \"constant\"");
	BAD("job-set", "{\"job\":\"j1\",\"set\":{\"batch\":8}}",
		"'batch', which is not a live hyperparameter (known: lr, schedule");
	OK("job-metrics", "{\"job\":\"j1\",\"offset\":1024,\"lines\":10}");
	BAD("job-metrics", "{\"job\":\"j1\",\"offset\":-1}", "'offset' must be an integer >= 0");
	BAD("job-metrics", "{\"job\":\"j1\",\"lines\":0}", "'lines' must be an integer from 1");
	OK("job-eval", "{\"job\":\"j1\"}");
	BAD("job-eval", "{\"job\":\"j1\",\"batches\":3}", "unknown argument 'batches'");
}
END_TEST

START_TEST(test_proto_args_validate_subscribe)
{
	const char *cmds[] = {"subscribe", "unsubscribe"};
	char want[128];
	for (size_t i = 0; i < 2; i++) {
		OK(cmds[i], "{}");
		OK(cmds[i], "{\"job\":\"j1\"}");
		OK(cmds[i], "{\"events\":[\"STEP\",\"MEMORY\"]}");
		OK(cmds[i], "{\"job\":\"j2\",\"events\":[\"REMAT_APPLIED\",\"CHECKPOINT_SAVED\","
			    "\"JOB_STATE_CHANGED\"]}");
		OK(cmds[i], "{\"events\":[]}");
		BAD(cmds[i], "{\"events\":[\"STEP\",\"TICK\"]}",
			"unknown event 'TICK' in 'events'");
		BAD(cmds[i], "{\"events\":[\"step\"]}", "unknown event 'step'");
		BAD(cmds[i], "{\"events\":\"STEP\"}", "'events' must be an array");
		BAD(cmds[i], "{\"events\":{\"STEP\":true}}", "'events' must be an array");
		BAD(cmds[i], "{\"events\":[1]}", "'events' must hold only strings");
		BAD(cmds[i], "{\"job\":3}", "'job' must be a string");
		BAD(cmds[i], "{\"job\":\"\"}", "'job' must be 1 to 64 bytes");
		snprintf(want, sizeof want, "unknown argument 'event' for %s", cmds[i]);
		BAD(cmds[i], "{\"event\":[\"STEP\"]}", want);
	}
}
END_TEST

START_TEST(test_proto_args_validate_long_key_quoted)
{
	/* a huge unknown key is quoted in part, and the description stays valid UTF-8 when
	 * the cut falls inside a character: "a" then e-acutes, so every 2-byte sequence
	 * starts at an odd offset and byte PROTO_QUOTE_MAX (64) continues one */
	size_t n = 100001;
	char *key = malloc(n + 1);
	ck_assert_ptr_nonnull(key);
	key[0] = 'a';
	for (size_t i = 1; i + 2 <= n; i += 2)
		memcpy(key + i, "\xc3\xa9", 2);
	key[n] = '\0';
	json_t *args = json_object();
	json_t *v = json_integer(1);
	ck_assert_int_eq(json_object_set_new(args, key, v), 0);
	char desc[PROTO_DESC_LEN];
	ck_assert_int_eq(proto_args_validate(proto_command_find("job-list"), args, desc,
				 sizeof desc),
		-1);
	ck_assert_msg(strstr(desc, "unknown argument") != NULL, "%s", desc);
	ck_assert_uint_lt(strlen(desc), 200);
	json_t *s = json_string(desc);
	ck_assert_msg(s != NULL, "description is not UTF-8: %s", desc);
	json_decref(s);
	json_decref(args);
	free(key);
}
END_TEST

TCase *tcase_proto_args(void)
{
	TCase *tc = tcase_create("arguments");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_proto_command_find_documented);
	tcase_add_test(tc, test_proto_event_known_names);
	tcase_add_test(tc, test_proto_args_validate_no_arguments);
	tcase_add_test(tc, test_proto_args_validate_daemon_shutdown);
	tcase_add_test(tc, test_proto_args_validate_job_start);
	tcase_add_test(tc, test_proto_args_validate_job_commands);
	tcase_add_test(tc, test_proto_args_validate_job_stop);
	tcase_add_test(tc, test_proto_args_validate_remat_set);
	tcase_add_test(tc, test_proto_args_validate_remat_plan);
	tcase_add_test(tc, test_proto_args_validate_ckpt_save);
	tcase_add_test(tc, test_proto_args_validate_job_set);
	tcase_add_test(tc, test_proto_args_validate_subscribe);
	tcase_add_test(tc, test_proto_args_validate_long_key_quoted);
	return tc;
}
