/* test_example.c - examples/client.py, the client written from docs/protocol.md in
 * Python's standard library, against the real rematd and worker: `start` a spec (the job's
 * id and state printed), `watch --count 2` (two STEP lines), `set` (the step it applies
 * at, which a REMAT_APPLIED event then names; with --wait, the event of its change
 * number that says it applied), an error reply (exit 1, its class on
 * stderr), and `watch` of a stopped job (its state, exit 0). Skipped with one line without
 * python3 (scripts/deps.sh installs it).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "t_daemon.h"
#include "t_util.h"
#include "tests.h"

#define PYTHON "/usr/bin/python3"

/* examples/client.py --socket d's ARGS...: its exit status, its output in *out */
static int client_py(const td_daemon *d, char **out, const char *a, const char *b,
	const char *c, const char *e)
{
	char script[700];
	snprintf(script, sizeof script, "%s/../../examples/client.py", t_env("REMAT_TESTDATA"));
	char *argv[] = {PYTHON, script, "--socket", (char *)d->sock, (char *)a, (char *)b,
		(char *)c, (char *)e, NULL};
	return t_run(argv, out);
}

/* Lines of out that begin with prefix */
static int lines_with(const char *out, const char *prefix)
{
	int n = 0;
	for (const char *p = out; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		n += strncmp(p, prefix, strlen(prefix)) == 0;
	return n;
}

START_TEST(test_example_client)
{
	if (access(PYTHON, X_OK) != 0) {
		fprintf(stderr, "example: skipped: no " PYTHON " (scripts/deps.sh installs "
				"python3)\n");
		return;
	}
	td_daemon d;
	td_daemon_paths(&d);
	td_daemon_start(&d, NULL);
	char spec[700], *out, id[16] = "";
	snprintf(spec, sizeof spec, "%s/job.json", d.dir);
	t_write_file(spec, T_TINY_SPEC, strlen(T_TINY_SPEC));
	int rc = client_py(&d, &out, "start", spec, NULL, NULL);
	ck_assert_msg(rc == 0 && sscanf(out, "%15s", id) == 1 && id[0] == 'j',
		"client.py start: %d\n%s", rc, out);
	free(out);
	rc = client_py(&d, &out, "watch", id, "--count=2", NULL);
	ck_assert_msg(rc == 0 && lines_with(out, "step ") == 2, "client.py watch: %d\n%s", rc,
		out);
	free(out);
	td_conn c = td_open(&d);
	json_decref(td_request(&c, "{\"execute\":\"subscribe\",\"arguments\":{\"events\":"
		"[\"REMAT_APPLIED\"]}}"));
	rc = client_py(&d, &out, "set", id, "h.0-1=full", NULL);
	int at = 0;
	ck_assert_msg(rc == 0 && sscanf(out, "applies at step %d:", &at) == 1 &&
			      strstr(out, "h.0-1=full"), "client.py set: %d\n%s", rc, out);
	free(out);
	int applied = 0;
	for (long t0 = td_ms(); !applied && td_ms() - t0 < 30000;) {
		json_t *m = td_read_msg(&c, 1000);
		const char *job = json_string_value(json_object_get(json_object_get(m, "data"),
			"job"));
		if (job && !strcmp(job, id))
			applied = (int)json_integer_value(json_object_get(json_object_get(m,
				"data"), "step"));
		json_decref(m);
	}
	ck_assert_msg(applied == at, "client.py set said step %d, REMAT_APPLIED %d", at,
		applied);
	/* --wait: until the event with its change number says it applied */
	rc = client_py(&d, &out, "set", id, "h.0=selective", "--wait");
	int waited = 0, change = 0;
	const char *line2 = out ? strchr(out, '\n') : NULL;
	ck_assert_msg(rc == 0 && line2 && sscanf(out, "applies at step %d:", &at) == 1 &&
			      sscanf(line2 + 1, "applied at step %d (remat-set, change %d)",
				      &waited, &change) == 2 && waited >= at && change == 2,
		"client.py set --wait: %d\n%s", rc, out);
	free(out);
	/* rematd's error reply: its class, exit 1 */
	rc = client_py(&d, &out, "set", id, "h.9=full", NULL);
	ck_assert_msg(rc == 1 && strstr(out, "InvalidParameter"), "client.py set h.9: %d\n%s",
		rc, out);
	free(out);
	json_decref(td_request(&c, "{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"%s\","
		"\"save\":false}}", id));
	rc = client_py(&d, &out, "watch", id, NULL, NULL);
	ck_assert_msg(rc == 0 && strstr(out, "stopped"), "client.py watch (stopped): %d\n%s",
		rc, out);
	free(out);
	td_close(&c);
	td_daemon_stop(&d);
}
END_TEST

Suite *suite_example(void)
{
	Suite *s = suite_create("example");
	TCase *tc = tcase_create("example");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_example_client);
	suite_add_tcase(s, tc);
	return s;
}
