/* test_proto_lines.c - tests of building and reading protocol lines (proto/proto_msg.c), a
 * TCase of suite_proto (test_proto.c).
 *
 * What it covers: the greeting, request, reply, error and event lines byte for byte where
 * the docs show them, each read back through proto_message_parse; descriptions that are
 * not UTF-8 or hold newlines still giving one valid line; the error class names exactly as
 * docs/protocol.md lists them; proto_message_parse on every kind and every bad shape.
 * What it does not: request parsing (test_proto.c) and arguments (test_proto_args.c).
 */
#include "tests.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "proto.h"

TCase *tcase_proto_lines(void);

/* Checks line is one line: ends in '\n', no other '\n', no '\r'. */
static void one_line(const char *line)
{
	ck_assert_ptr_nonnull(line);
	size_t n = strlen(line);
	ck_assert_msg(n > 1 && line[n - 1] == '\n', "'%s' does not end in a newline", line);
	ck_assert_msg(memchr(line, '\n', n - 1) == NULL, "'%s' holds a newline", line);
	ck_assert_msg(strchr(line, '\r') == NULL, "'%s' holds a carriage return", line);
}

/* Reads back line, which must be of kind k; returns the object (new ref). */
static json_t *read_back(const char *line, proto_kind k)
{
	json_t *obj = NULL;
	proto_kind got;
	char desc[PROTO_DESC_LEN] = "";
	one_line(line);
	int rc = proto_message_parse(line, strlen(line) - 1, &obj, &got, desc, sizeof desc);
	ck_assert_msg(rc == 0, "'%s' not read back: %s", line, desc);
	ck_assert_msg(got == k, "'%s' read as kind %d, want %d", line, (int)got, (int)k);
	return obj;
}

START_TEST(test_proto_greeting_exact)
{
	char *g = proto_greeting("daemon", NULL);
	ck_assert_str_eq(g, "{\"remat\":{\"version\":\"0.1.0\",\"protocol\":1,"
			    "\"capabilities\":[\"events\"],\"role\":\"daemon\"}}\n");
	json_decref(read_back(g, PROTO_KIND_GREETING));
	free(g);
	g = proto_greeting("worker", "j1");
	ck_assert_str_eq(g, "{\"remat\":{\"version\":\"0.1.0\",\"protocol\":1,"
			    "\"capabilities\":[\"events\"],\"role\":\"worker\",\"job\":\"j1\"}}\n");
	json_t *o = read_back(g, PROTO_KIND_GREETING);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(o, "remat"), "job")),
		"j1");
	json_decref(o);
	free(g);
}
END_TEST

START_TEST(test_proto_reply_line_roundtrip)
{
	json_t *id = json_integer(7);
	char *r = proto_reply_line(NULL, id);
	ck_assert_str_eq(r, "{\"return\":{},\"id\":7}\n");
	json_decref(read_back(r, PROTO_KIND_RETURN));
	free(r);
	json_t *ret = json_pack("{s:i, s:{s:s}}", "applies_at_step", 1201, "policy", "h.0-5",
		"full");
	r = proto_reply_line(ret, id);
	ck_assert_str_eq(r, "{\"return\":{\"applies_at_step\":1201,\"policy\":{\"h.0-5\":"
			    "\"full\"}},\"id\":7}\n");
	json_t *o = read_back(r, PROTO_KIND_RETURN);
	ck_assert(json_equal(json_object_get(o, "return"), ret));
	json_decref(o);
	free(r);
	/* no id: none on the line; the borrowed references are left as they were */
	r = proto_reply_line(ret, NULL);
	ck_assert_ptr_null(strstr(r, "\"id\""));
	free(r);
	ck_assert_int_eq(ret->refcount, 1);
	ck_assert_int_eq(id->refcount, 1);
	json_decref(ret);
	json_decref(id);
}
END_TEST

START_TEST(test_proto_error_line_roundtrip)
{
	json_t *id = json_integer(7);
	char *e = proto_error_line(PROTO_ERR_INVALID_PARAMETER, "unknown section 'h.40'", id);
	ck_assert_str_eq(e, "{\"error\":{\"class\":\"InvalidParameter\",\"desc\":\"unknown "
			    "section 'h.40'\"},\"id\":7}\n");
	json_t *o = read_back(e, PROTO_KIND_ERROR);
	json_decref(o);
	free(e);
	e = proto_error_line(PROTO_ERR_MESSAGE_TOO_LARGE, "line longer than 1048576 bytes", NULL);
	ck_assert_str_eq(e, "{\"error\":{\"class\":\"MessageTooLarge\",\"desc\":\"line longer "
			    "than 1048576 bytes\"}}\n");
	json_decref(read_back(e, PROTO_KIND_ERROR));
	free(e);
	json_decref(id);
}
END_TEST

START_TEST(test_proto_error_line_hostile_desc)
{
	/* newlines, control bytes and bytes that are not UTF-8 still make one valid line */
	const char *desc = "cannot open '/tmp/\xff\xfe\n\r\x01' \xe2\x82";
	char *e = proto_error_line(PROTO_ERR_IO_ERROR, desc, NULL);
	json_t *o = read_back(e, PROTO_KIND_ERROR);
	const char *d = json_string_value(json_object_get(json_object_get(o, "error"), "desc"));
	ck_assert_msg(strncmp(d, "cannot open '/tmp/??\n\r\x01'", 24) == 0, "desc '%s'", d);
	json_decref(o);
	free(e);
	/* a huge description is cut to PROTO_DESC_LEN */
	char *big = malloc(100000);
	ck_assert_ptr_nonnull(big);
	memset(big, 'd', 99999);
	big[99999] = '\0';
	e = proto_error_line(PROTO_ERR_INTERNAL, big, NULL);
	one_line(e);
	ck_assert_uint_lt(strlen(e), PROTO_DESC_LEN + 64);
	free(e);
	free(big);
	e = proto_error_line(PROTO_ERR_INTERNAL, NULL, NULL);
	json_decref(read_back(e, PROTO_KIND_ERROR));
	free(e);
}
END_TEST

START_TEST(test_proto_error_line_utf8_repair)
{
	/* valid sequences of every length are kept; what jansson would refuse becomes '?';
	 * a sequence cut short at the end (a truncation) is dropped */
	const struct {
		const char *in, *out;
	} cases[] = {
		{"a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z",
			"a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z"},
		{"\xc0\xaf", "??"},             /* overlong, 2 bytes */
		{"\xe0\x80\xaf", "???"},        /* overlong, 3 bytes */
		{"\xf0\x80\x80\xaf", "????"},   /* overlong, 4 bytes */
		{"\xed\xa0\x80", "???"},        /* surrogate */
		{"\xf4\x90\x80\x80", "????"},   /* past U+10FFFF */
		{"\xf8\x88\x80\x80\x80", "?????"}, /* 5-byte form */
		{"\xc3x", "?x"},                 /* lead without continuation */
		{"\x80" "abc", "?abc"},          /* lone continuation */
		{"ok \xf0\x9f\x98", "ok "},       /* cut short at the end */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *e = proto_error_line(PROTO_ERR_IO_ERROR, cases[i].in, NULL);
		json_t *o = read_back(e, PROTO_KIND_ERROR);
		const char *d =
			json_string_value(json_object_get(json_object_get(o, "error"), "desc"));
		ck_assert_msg(strcmp(d, cases[i].out) == 0, "case %zu: desc '%s', want '%s'", i,
			d, cases[i].out);
		json_decref(o);
		free(e);
	}
}
END_TEST

START_TEST(test_proto_errclass_name_documented)
{
	/* docs/protocol.md, "Error classes", in order */
	static const char *const names[] = {"ParseError", "InvalidRequest", "CommandNotFound",
		"InvalidParameter", "JobNotFound", "InvalidState", "Busy", "IOError",
		"PermissionDenied", "MessageTooLarge", "Internal"};
	ck_assert_int_eq(PROTO_ERR_INTERNAL + 1, (int)(sizeof names / sizeof names[0]));
	for (int c = 0; c <= PROTO_ERR_INTERNAL; c++) {
		ck_assert_str_eq(proto_errclass_name((proto_errclass)c), names[c]);
		char *e = proto_error_line((proto_errclass)c, "x", NULL);
		char want[128];
		snprintf(want, sizeof want, "{\"error\":{\"class\":\"%s\",\"desc\":\"x\"}}\n",
			names[c]);
		ck_assert_str_eq(e, want);
		json_t *o = read_back(e, PROTO_KIND_ERROR);
		ck_assert_str_eq(json_string_value(json_object_get(json_object_get(o, "error"),
					 "class")),
			names[c]);
		json_decref(o);
		free(e);
	}
	ck_assert_str_eq(proto_errclass_name((proto_errclass)99), "Internal");
}
END_TEST

START_TEST(test_proto_event_line_roundtrip)
{
	struct timeval before, after;
	json_t *data = json_pack("{s:s, s:i, s:f}", "job", "j1", "step", 12, "loss", 2.5);
	gettimeofday(&before, NULL);
	char *ev = proto_event_line("STEP", data);
	gettimeofday(&after, NULL);
	const char *prefix = "{\"event\":\"STEP\",\"data\":{\"job\":\"j1\",\"step\":12,"
			     "\"loss\":2.5},\"timestamp\":{\"seconds\":";
	ck_assert_msg(strncmp(ev, prefix, strlen(prefix)) == 0, "event line '%s'", ev);
	json_t *o = read_back(ev, PROTO_KIND_EVENT);
	json_t *ts = json_object_get(o, "timestamp");
	json_int_t s = json_integer_value(json_object_get(ts, "seconds"));
	json_int_t us = json_integer_value(json_object_get(ts, "microseconds"));
	ck_assert(json_is_integer(json_object_get(ts, "microseconds")));
	ck_assert_int_ge(s, before.tv_sec);
	ck_assert_int_le(s, after.tv_sec);
	ck_assert_int_ge(us, 0);
	ck_assert_int_lt(us, 1000000);
	ck_assert(json_equal(json_object_get(o, "data"), data));
	json_decref(o);
	free(ev);
	ev = proto_event_line("MEMORY", NULL);
	o = read_back(ev, PROTO_KIND_EVENT);
	ck_assert_uint_eq(json_object_size(json_object_get(o, "data")), 0);
	json_decref(o);
	free(ev);
	json_decref(data);
}
END_TEST

START_TEST(test_proto_request_line_roundtrip)
{
	json_t *args = json_pack("{s:s, s:{s:s}, s:s}", "job", "j1", "sections", "h.0-5", "full",
		"default", "off");
	json_t *id = json_string("req-1");
	char *line = proto_request_line("remat-set", args, id);
	ck_assert_str_eq(line, "{\"execute\":\"remat-set\",\"arguments\":{\"job\":\"j1\","
			       "\"sections\":{\"h.0-5\":\"full\"},\"default\":\"off\"},"
			       "\"id\":\"req-1\"}\n");
	one_line(line);
	proto_request req;
	proto_errclass ec;
	char desc[PROTO_DESC_LEN];
	ck_assert_int_eq(proto_request_parse(line, strlen(line) - 1, &req, &ec, desc,
				 sizeof desc),
		0);
	ck_assert_str_eq(req.execute, "remat-set");
	ck_assert(json_equal(req.args, args));
	ck_assert(json_equal(req.id, id));
	ck_assert_int_eq(proto_args_validate(proto_command_find(req.execute), req.args, desc,
				 sizeof desc),
		0);
	proto_request_free(&req);
	free(line);
	line = proto_request_line("job-list", NULL, NULL);
	ck_assert_str_eq(line, "{\"execute\":\"job-list\"}\n");
	free(line);
	ck_assert_ptr_null(proto_request_line(NULL, NULL, NULL));
	json_decref(args);
	json_decref(id);
}
END_TEST

static void message_bad(const char *text, const char *needle)
{
	json_t *obj = (json_t *)1;
	proto_kind k;
	char desc[PROTO_DESC_LEN] = "";
	int rc = proto_message_parse(text, strlen(text), &obj, &k, desc, sizeof desc);
	ck_assert_msg(rc == -1, "message %.80s accepted", text);
	ck_assert_ptr_null(obj);
	ck_assert_msg(strstr(desc, needle) != NULL, "message %.80s: '%s' lacks '%s'", text, desc,
		needle);
}

START_TEST(test_proto_message_parse_kinds)
{
	const struct {
		const char *text;
		proto_kind kind;
	} ok[] = {
		{"{\"remat\":{\"version\":\"9.9\",\"new\":1}}", PROTO_KIND_GREETING},
		{"{\"return\":{},\"id\":1}", PROTO_KIND_RETURN},
		{"{\"return\":[1,2],\"id\":{\"a\":1},\"extra\":true}", PROTO_KIND_RETURN},
		{"{\"error\":{\"class\":\"Busy\",\"desc\":\"\"}}", PROTO_KIND_ERROR},
		{"{\"error\":{\"class\":\"NewClass\",\"desc\":\"d\",\"more\":1},\"id\":1}",
			PROTO_KIND_ERROR},
		{"{\"event\":\"STEP\",\"data\":{},\"timestamp\":{}}", PROTO_KIND_EVENT},
		{"{\"event\":\"NEW_EVENT\",\"data\":{\"x\":1}}", PROTO_KIND_EVENT},
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		json_t *obj = NULL;
		proto_kind k;
		char desc[PROTO_DESC_LEN] = "";
		int rc = proto_message_parse(ok[i].text, strlen(ok[i].text), &obj, &k, desc,
			sizeof desc);
		ck_assert_msg(rc == 0, "%s refused: %s", ok[i].text, desc);
		ck_assert_msg(k == ok[i].kind, "%s: kind %d", ok[i].text, (int)k);
		ck_assert(json_is_object(obj));
		json_decref(obj);
	}
}
END_TEST

START_TEST(test_proto_message_parse_invalid)
{
	message_bad("not json", "invalid JSON");
	message_bad("", "empty");
	message_bad("[{\"return\":{}}]", "JSON object");
	message_bad("\"return\"", "JSON object");
	message_bad("{}", "not a greeting, reply, error or event");
	message_bad("{\"id\":1}", "not a greeting");
	message_bad("{\"remat\":\"0.1.0\"}", "'remat' must be an object");
	message_bad("{\"error\":\"Busy\"}", "'error' must be an object");
	message_bad("{\"error\":{\"class\":\"Busy\"}}", "'class' and 'desc'");
	message_bad("{\"error\":{\"class\":1,\"desc\":\"x\"}}", "'class' and 'desc'");
	message_bad("{\"event\":\"STEP\"}", "'data' object");
	message_bad("{\"event\":\"STEP\",\"data\":[]}", "'data' object");
	message_bad("{\"event\":5,\"data\":{}}", "'event' string");
	message_bad("{\"return\":{},\"return\":{}}", "duplicate");
	message_bad("{\"return\":\"\xff\"}", "invalid JSON");
	char *deep = malloc(20001);
	ck_assert_ptr_nonnull(deep);
	memset(deep, '[', 10000);
	memset(deep + 10000, ']', 10000);
	deep[20000] = '\0';
	message_bad(deep, "nested deeper");
	free(deep);
}
END_TEST

TCase *tcase_proto_lines(void)
{
	TCase *tc = tcase_create("lines");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_proto_greeting_exact);
	tcase_add_test(tc, test_proto_reply_line_roundtrip);
	tcase_add_test(tc, test_proto_error_line_roundtrip);
	tcase_add_test(tc, test_proto_error_line_hostile_desc);
	tcase_add_test(tc, test_proto_error_line_utf8_repair);
	tcase_add_test(tc, test_proto_errclass_name_documented);
	tcase_add_test(tc, test_proto_event_line_roundtrip);
	tcase_add_test(tc, test_proto_request_line_roundtrip);
	tcase_add_test(tc, test_proto_message_parse_kinds);
	tcase_add_test(tc, test_proto_message_parse_invalid);
	return tc;
}
