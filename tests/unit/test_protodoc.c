/* test_protodoc.c - docs/protocol.md against proto's own tables, so that neither drifts:
 * every command has its row in the Commands table (and every row a command), with its
 * scope, "(deferred)" exactly when its reply waits for a step boundary, and each argument
 * of its schema named, with "?" exactly when it is optional, and job-status's every key of
 * its reply (proto_status_keys); every event has its row in the Events table (and every
 * row an event), REMAT_APPLIED's naming every cause of a policy change; the error classes
 * listed are proto's, in order.
 */
#include "proto.h"
#include "tests.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t_util.h"

/* 1 when text holds the backticked word w (as "`w`") */
static int has_code(const char *text, const char *w)
{
	char pat[96];
	int n = snprintf(pat, sizeof pat, "`%.80s`", w);
	return n < (int)sizeof pat && strstr(text, pat) != NULL;
}

static int is_command(const char *name)
{
	return proto_command_find(name) != NULL;
}

/* The rows of the table under header, each of which must name something known: how many */
static int table_rows(const char *doc, const char *header, int (*known)(const char *))
{
	const char *t = strstr(doc, header);
	int rows = 0;
	ck_assert_msg(t, "docs/protocol.md has no table '%s'", header);
	for (const char *p = strstr(t, "\n| `"); p && p[1] == '|'; p = strchr(p + 1, '\n')) {
		char name[64] = "";
		sscanf(p, "\n| `%63[^`]`", name);
		ck_assert_msg(known(name), "'%s' has a row for '%s', which proto does not know",
			header, name);
		rows++;
	}
	return rows;
}

START_TEST(test_protodoc_commands)
{
	char *doc = t_protocol_md();
	static const char *const scopes[] = {[PROTO_SCOPE_DAEMON] = "daemon",
		[PROTO_SCOPE_JOB] = "job", [PROTO_SCOPE_CONN] = "connection"};
	int n = 0;
	for (const proto_command *c = proto_commands(); c->name; c++, n++) {
		size_t len;
		const char *row = t_doc_row(doc, c->name, &len);
		ck_assert_msg(row, "docs/protocol.md has no row for the command %s", c->name);
		char scope[64], args[4096];
		t_doc_cell(row, len, 1, scope, sizeof scope);
		t_doc_cell(row, len, 2, args, sizeof args);
		ck_assert_msg(strstr(scope, scopes[c->scope]) == scope + 1, "%s: scope '%s', "
			"proto says %s", c->name, scope, scopes[c->scope]);
		ck_assert_msg(!strstr(scope, "(deferred)") == !c->deferred, "%s: '%s', but its "
			"reply is %sdeferred", c->name, scope, c->deferred ? "" : "not ");
		/* one of two: "`job` or `spec` obj", "`budget_bytes` int > 0 or `budget`" */
		int alt = strstr(args, " or `") != NULL;
		const char *a;
		int opt;
		for (int i = 0; (a = proto_command_arg(c, i, &opt)); i++) {
			char q[80];
			snprintf(q, sizeof q, "%s?", a);
			int marked = has_code(args, q), plain = has_code(args, a);
			ck_assert_msg(marked || plain, "%s: its argument '%s' is not in its row",
				c->name, a);
			ck_assert_msg(opt ? marked || alt : plain, "%s: '%s' is %s, the row says "
				"%s", c->name, a, opt ? "optional" : "required",
				marked ? "optional" : "required");
		}
	}
	ck_assert_int_eq(table_rows(doc, "| command | scope | arguments | returns |",
				 is_command), n);
	/* job-status's row names every key its reply has in every state */
	size_t len;
	const char *row = t_doc_row(doc, "job-status", &len);
	char *text = strndup(row, len);
	for (int i = 0; proto_status_keys[i]; i++)
		ck_assert_msg(has_code(text, proto_status_keys[i]), "job-status's row does not name "
			"its key %s", proto_status_keys[i]);
	free(text);
	free(doc);
}
END_TEST

START_TEST(test_protodoc_events_errors)
{
	char *doc = t_protocol_md();
	const char *t = strstr(doc, "| event | data |");
	ck_assert_ptr_nonnull(t);
	for (int e = 0; e < PROTO_EV_COUNT; e++) {
		size_t len;
		ck_assert_msg(t_doc_row(t, proto_event_name((proto_event)e), &len),
			"docs/protocol.md's Events table has no row for %s",
			proto_event_name((proto_event)e));
	}
	ck_assert_int_eq(table_rows(doc, "| event | data |", proto_event_known), PROTO_EV_COUNT);
	/* REMAT_APPLIED's row names every cause proto has (`"start"`, ...) */
	size_t len;
	char name[64];
	const char *r = t_doc_row(t, "REMAT_APPLIED", &len);
	char *row = strndup(r, len);
	for (int c = 0; c < PROTO_CAUSE_N; c++) {
		snprintf(name, sizeof name, "\"%s\"", proto_cause_name(c));
		ck_assert_msg(has_code(row, name), "REMAT_APPLIED's row does not name the cause %s",
			name);
	}
	free(row);
	/* "Error classes: `ParseError`, `InvalidRequest`, ..., `Internal`." in proto's order */
	const char *at = strstr(doc, "Error classes: ");
	ck_assert_ptr_nonnull(at);
	for (int c = PROTO_ERR_PARSE_ERROR; c <= PROTO_ERR_INTERNAL; c++) {
		char w[64];
		snprintf(w, sizeof w, "`%s`", proto_errclass_name((proto_errclass)c));
		const char *next = strstr(at, w);
		ck_assert_msg(next && next - at < 64, "error class %s is not next in the "
			"document's list", w);
		at = next + strlen(w);
	}
	ck_assert_msg(*at == '.', "the document lists error classes proto does not have");
	free(doc);
}
END_TEST

Suite *suite_protodoc(void)
{
	Suite *s = suite_create("protodoc");
	TCase *tc = tcase_create("protodoc");
	tcase_add_test(tc, test_protodoc_commands);
	tcase_add_test(tc, test_protodoc_events_errors);
	suite_add_tcase(s, tc);
	return s;
}
