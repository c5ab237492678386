/* test_proto.c - tests of the control protocol library (proto/): framing and request
 * parsing, and suite_proto, which test_proto_args.c (commands and arguments) and
 * test_proto_lines.c (building and reading lines) add their TCases to.
 *
 * What it covers: the framer on many lines per feed, byte-by-byte feeds, "\r\n", empty
 * lines, the 1 MiB limit on both sides of it, an endless line in bounded memory, stopping
 * and resuming; every way a request line can be refused and the class it gets, the id
 * echoed for every JSON type, in replies and errors too.
 * What it does not: sockets, the daemon or the worker (the end-to-end tests drive those),
 * and random input (tests/fuzz/fuzz_proto.c).
 */
#include "tests.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

/* More TCases of this suite: commands and arguments (test_proto_args.c), building and
 * reading lines (test_proto_lines.c). */
TCase *tcase_proto_args(void);
TCase *tcase_proto_lines(void);

/* ---- framing ---- */

#define MAX_SEEN 16

/* What a framer callback saw: copies of the lines, and when to ask for a stop. */
typedef struct seen {
	int n;                /* lines seen */
	char *line[MAX_SEEN]; /* copies (malloc'd) */
	size_t len[MAX_SEEN];
	int stop_at;          /* return 1 after this many lines (0: never) */
} seen;

static int seen_cb(const char *line, size_t len, void *ud)
{
	seen *s = ud;
	ck_assert_msg(line[len] == '\0', "line not NUL-terminated");
	ck_assert_msg(memchr(line, '\n', len) == NULL, "line holds a newline");
	ck_assert_int_lt(s->n, MAX_SEEN);
	s->line[s->n] = malloc(len + 1);
	ck_assert_ptr_nonnull(s->line[s->n]);
	memcpy(s->line[s->n], line, len + 1);
	s->len[s->n] = len;
	s->n++;
	return s->stop_at != 0 && s->n >= s->stop_at;
}

static void seen_free(seen *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->line[i]);
	memset(s, 0, sizeof *s);
}

static void seen_check(const seen *s, int i, const char *want)
{
	ck_assert_msg(i < s->n, "line %d missing (%d seen)", i, s->n);
	ck_assert_msg(s->len[i] == strlen(want) && strcmp(s->line[i], want) == 0,
		"line %d is '%s' (%zu bytes), want '%s'", i, s->line[i], s->len[i], want);
}

/* Only counts, for the long lines. */
static int count_cb(const char *line, size_t len, void *ud)
{
	size_t *lens = ud;
	ck_assert_msg(line[len] == '\0', "line not NUL-terminated");
	lens[0]++;
	lens[1] = len;
	return 0;
}

START_TEST(test_proto_framer_feed_many_lines)
{
	proto_framer f;
	seen s = {0};
	const char *in = "{\"a\":1}\n{\"b\":2}\nccc\n";
	proto_framer_init(&f);
	ck_assert_int_eq(proto_framer_feed(&f, in, strlen(in), seen_cb, &s), 0);
	ck_assert_int_eq(s.n, 3);
	seen_check(&s, 0, "{\"a\":1}");
	seen_check(&s, 1, "{\"b\":2}");
	seen_check(&s, 2, "ccc");
	ck_assert_uint_eq(f.len, 0);
	seen_free(&s);
	proto_framer_free(&f);
}
END_TEST

START_TEST(test_proto_framer_feed_byte_by_byte)
{
	proto_framer f;
	seen s = {0};
	const char *in = "{\"execute\":\"job-list\",\"id\":1}\r\nsecond line\npartial";
	proto_framer_init(&f);
	for (size_t i = 0; in[i]; i++)
		ck_assert_int_eq(proto_framer_feed(&f, in + i, 1, seen_cb, &s), 0);
	ck_assert_int_eq(s.n, 2);
	seen_check(&s, 0, "{\"execute\":\"job-list\",\"id\":1}");
	seen_check(&s, 1, "second line");
	ck_assert_uint_eq(f.len, strlen("partial")); /* kept until its newline */
	ck_assert_int_eq(proto_framer_feed(&f, "!\n", 2, seen_cb, &s), 0);
	seen_check(&s, 2, "partial!");
	seen_free(&s);
	proto_framer_free(&f);
}
END_TEST

START_TEST(test_proto_framer_feed_crlf)
{
	proto_framer f;
	seen s = {0};
	/* one '\r' dropped, only right before the '\n'; a '\r' elsewhere is data */
	const char *in = "a\r\nb\r\r\nc\rd\n";
	proto_framer_init(&f);
	ck_assert_int_eq(proto_framer_feed(&f, in, strlen(in), seen_cb, &s), 0);
	ck_assert_int_eq(s.n, 3);
	seen_check(&s, 0, "a");
	seen_check(&s, 1, "b\r");
	seen_check(&s, 2, "c\rd");
	/* the '\r' and the '\n' in different feeds */
	ck_assert_int_eq(proto_framer_feed(&f, "e\r", 2, seen_cb, &s), 0);
	ck_assert_int_eq(s.n, 3);
	ck_assert_int_eq(proto_framer_feed(&f, "\n", 1, seen_cb, &s), 0);
	seen_check(&s, 3, "e");
	seen_free(&s);
	proto_framer_free(&f);
}
END_TEST

START_TEST(test_proto_framer_feed_empty_lines)
{
	proto_framer f;
	seen s = {0};
	const char *in = "\n\n\r\nx\n\n\r\n";
	proto_framer_init(&f);
	ck_assert_int_eq(proto_framer_feed(&f, in, strlen(in), seen_cb, &s), 0);
	ck_assert_int_eq(s.n, 1);
	seen_check(&s, 0, "x");
	ck_assert_int_eq(proto_framer_feed(&f, "", 0, seen_cb, &s), 0);
	ck_assert_int_eq(proto_framer_feed(&f, NULL, 0, seen_cb, &s), 0);
	ck_assert_int_eq(s.n, 1);
	seen_free(&s);
	proto_framer_free(&f);
}
END_TEST

START_TEST(test_proto_framer_feed_embedded_nul)
{
	proto_framer f;
	seen s = {0};
	proto_framer_init(&f);
	ck_assert_int_eq(proto_framer_feed(&f, "a\0b\n", 4, seen_cb, &s), 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_uint_eq(s.len[0], 3); /* the length counts, not strlen */
	ck_assert_int_eq(memcmp(s.line[0], "a\0b", 4), 0);
	seen_free(&s);
	proto_framer_free(&f);
}
END_TEST

/* A line of n 'x' then tail, fed in chunks of step bytes. */
static int feed_long(proto_framer *f, size_t n, const char *tail, size_t step, size_t *lens)
{
	size_t tl = strlen(tail);
	char *buf = malloc(n + tl);
	int rc = 0;
	ck_assert_ptr_nonnull(buf);
	memset(buf, 'x', n);
	memcpy(buf + n, tail, tl);
	for (size_t off = 0; off < n + tl && rc == 0; off += step) {
		size_t k = n + tl - off < step ? n + tl - off : step;
		rc = proto_framer_feed(f, buf + off, k, count_cb, lens);
		ck_assert_msg(f->cap <= PROTO_MAX_LINE + 1, "buffer grew to %zu bytes", f->cap);
	}
	free(buf);
	return rc;
}

START_TEST(test_proto_framer_feed_max_line)
{
	size_t steps[] = {PROTO_MAX_LINE + 1, 65536, 999};
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		proto_framer f;
		size_t lens[2] = {0, 0};
		proto_framer_init(&f);
		ck_assert_int_eq(feed_long(&f, PROTO_MAX_LINE, "\n", steps[i], lens), 0);
		ck_assert_uint_eq(lens[0], 1);
		ck_assert_uint_eq(lens[1], PROTO_MAX_LINE);
		/* the limit leaves out the '\r' as well as the '\n' */
		ck_assert_int_eq(feed_long(&f, PROTO_MAX_LINE, "\r\n", steps[i], lens), 0);
		ck_assert_uint_eq(lens[0], 2);
		ck_assert_uint_eq(lens[1], PROTO_MAX_LINE);
		/* and the framer goes on */
		ck_assert_int_eq(proto_framer_feed(&f, "ok\n", 3, count_cb, lens), 0);
		ck_assert_uint_eq(lens[0], 3);
		proto_framer_free(&f);
	}
}
END_TEST

START_TEST(test_proto_framer_feed_too_long)
{
	/* one byte over, with and without '\r', ended or not; and a '\r' that turns out
	 * not to end the line */
	const char *tails[] = {"\n", "\r\n", "", "\rx\n", "\r"};
	const size_t lens_x[] = {PROTO_MAX_LINE + 1, PROTO_MAX_LINE + 1, PROTO_MAX_LINE + 1,
		PROTO_MAX_LINE, PROTO_MAX_LINE + 1};
	for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
		proto_framer f;
		size_t lens[2] = {0, 0};
		size_t n = lens_x[i];
		proto_framer_init(&f);
		ck_assert_msg(feed_long(&f, n, tails[i], 4096, lens) == -1,
			"%zu bytes + tail %zu accepted", n, i);
		ck_assert_uint_eq(lens[0], 0);
		/* unusable from then on */
		ck_assert_int_eq(proto_framer_feed(&f, "ok\n", 3, count_cb, lens), -1);
		ck_assert_uint_eq(lens[0], 0);
		proto_framer_free(&f);
	}
}
END_TEST

START_TEST(test_proto_framer_feed_endless_line)
{
	/* 10 MiB without a newline: refused as soon as it passes the limit, and the buffer
	 * never holds more than one line (feed_long checks cap after every feed) */
	proto_framer f;
	size_t lens[2] = {0, 0};
	size_t fed = 0, step = 65536;
	char *chunk = malloc(step);
	int rc = 0;
	ck_assert_ptr_nonnull(chunk);
	memset(chunk, '{', step);
	proto_framer_init(&f);
	while (fed < (size_t)10 << 20 && rc == 0) {
		rc = proto_framer_feed(&f, chunk, step, count_cb, lens);
		fed += step;
		ck_assert_msg(f.cap <= PROTO_MAX_LINE + 1, "buffer grew to %zu", f.cap);
		ck_assert_msg(f.len <= PROTO_MAX_LINE + 1, "buffer holds %zu", f.len);
	}
	ck_assert_int_eq(rc, -1);
	ck_assert_uint_le(fed, PROTO_MAX_LINE + step);
	ck_assert_uint_eq(lens[0], 0);
	free(chunk);
	proto_framer_free(&f);
}
END_TEST

START_TEST(test_proto_framer_feed_stop)
{
	proto_framer f;
	seen s = {0};
	const char *in = "one\ntwo\nthree\nfour";
	s.stop_at = 1;
	proto_framer_init(&f);
	ck_assert_int_eq(proto_framer_feed(&f, in, strlen(in), seen_cb, &s), 1);
	ck_assert_int_eq(s.n, 1);
	/* the kept lines come first, one per stop, then the new input */
	s.stop_at = 2;
	ck_assert_int_eq(proto_framer_feed(&f, NULL, 0, seen_cb, &s), 1);
	seen_check(&s, 1, "two");
	s.stop_at = 0;
	ck_assert_int_eq(proto_framer_feed(&f, "!\nfive\n", 7, seen_cb, &s), 0);
	ck_assert_int_eq(s.n, 5);
	seen_check(&s, 2, "three");
	seen_check(&s, 3, "four!");
	seen_check(&s, 4, "five");
	ck_assert_uint_eq(f.len, 0);
	seen_free(&s);
	proto_framer_free(&f);
}
END_TEST

START_TEST(test_proto_framer_feed_stop_keeps_new_input)
{
	proto_framer f;
	seen s = {0};
	s.stop_at = 1;
	proto_framer_init(&f);
	ck_assert_int_eq(proto_framer_feed(&f, "a\nb\n", 4, seen_cb, &s), 1);
	/* stopped again on the kept "b": the new input is kept behind it */
	s.stop_at = 2;
	ck_assert_int_eq(proto_framer_feed(&f, "c\nd", 3, seen_cb, &s), 1);
	seen_check(&s, 1, "b");
	s.stop_at = 0;
	ck_assert_int_eq(proto_framer_feed(&f, NULL, 0, seen_cb, &s), 0);
	ck_assert_int_eq(s.n, 3);
	seen_check(&s, 2, "c");
	ck_assert_int_eq(proto_framer_feed(&f, "\n", 1, seen_cb, &s), 0);
	seen_check(&s, 3, "d");
	seen_free(&s);
	proto_framer_free(&f);
}
END_TEST

/* A callback that stops after the first line and then only counts. */
static int stop_first_cb(const char *line, size_t len, void *ud)
{
	size_t *lens = ud;
	count_cb(line, len, ud);
	return lens[0] == 1;
}

START_TEST(test_proto_framer_feed_stop_kept_limits)
{
	/* what a stop keeps is held to the same limit when it is delivered */
	size_t n = (size_t)2 << 20;
	char *in = malloc(n);
	ck_assert_ptr_nonnull(in);
	memset(in, 'x', n);
	memcpy(in, "a\n", 2);
	const size_t ends[] = {n - 1, 0}; /* a newline at the end, or none */
	for (size_t i = 0; i < 2; i++) {
		proto_framer f;
		size_t lens[2] = {0, 0};
		in[n - 1] = ends[i] ? '\n' : 'x';
		proto_framer_init(&f);
		ck_assert_int_eq(proto_framer_feed(&f, in, n, stop_first_cb, lens), 1);
		ck_assert_uint_eq(lens[0], 1);
		ck_assert_int_eq(proto_framer_feed(&f, NULL, 0, count_cb, lens), -1);
		ck_assert_uint_eq(lens[0], 1);
		ck_assert_int_eq(proto_framer_feed(&f, "ok\n", 3, count_cb, lens), -1);
		proto_framer_free(&f);
	}
	free(in);
}
END_TEST

START_TEST(test_proto_framer_feed_stop_shrinks)
{
	/* many short lines kept past the one-line bound; once delivered the buffer is back
	 * within it, holding the partial line */
	size_t lines = 1100, per = 1000;
	size_t n = 2 + lines * per + 4;
	char *in = malloc(n);
	ck_assert_ptr_nonnull(in);
	memcpy(in, "a\n", 2);
	for (size_t i = 0; i < lines; i++) {
		memset(in + 2 + i * per, 'y', per - 1);
		in[2 + i * per + per - 1] = '\n';
	}
	memcpy(in + n - 4, "tail", 4);
	proto_framer f;
	size_t lens[2] = {0, 0};
	proto_framer_init(&f);
	ck_assert_int_eq(proto_framer_feed(&f, in, n, stop_first_cb, lens), 1);
	ck_assert_uint_eq(f.len, n - 2);
	ck_assert_int_eq(proto_framer_feed(&f, NULL, 0, count_cb, lens), 0);
	ck_assert_uint_eq(lens[0], 1 + lines);
	ck_assert_uint_eq(lens[1], per - 1);
	ck_assert_uint_eq(f.len, 4);
	ck_assert_uint_le(f.cap, PROTO_MAX_LINE + 1);
	ck_assert_int_eq(proto_framer_feed(&f, "\n", 1, count_cb, lens), 0);
	ck_assert_uint_eq(lens[0], 2 + lines);
	ck_assert_uint_eq(lens[1], 4);
	/* a stop on the last line keeps nothing: the next feed starts clean */
	lens[0] = 0;
	ck_assert_int_eq(proto_framer_feed(&f, "b\n", 2, stop_first_cb, lens), 1);
	ck_assert_uint_eq(f.len, 0);
	ck_assert_int_eq(f.state, 0);
	proto_framer_free(&f);
	free(in);
}
END_TEST

/* ---- requests ---- */

/* Parses text that must be refused with class c and a description containing needle; the
 * id read back (new ref, or NULL) is returned. */
static json_t *parse_bad(const char *text, size_t len, proto_errclass c, const char *needle)
{
	proto_request req;
	proto_errclass ec = PROTO_ERR_INTERNAL;
	char desc[PROTO_DESC_LEN] = "";
	int rc = proto_request_parse(text, len, &req, &ec, desc, sizeof desc);
	ck_assert_msg(rc == -1, "request %.100s accepted", text);
	ck_assert_msg(ec == c, "request %.100s: class %s, want %s (%s)", text,
		proto_errclass_name(ec), proto_errclass_name(c), desc);
	ck_assert_msg(strstr(desc, needle) != NULL, "request %.100s: '%s' lacks '%s'", text,
		desc, needle);
	ck_assert_ptr_null(req.args);
	json_t *id = req.id ? json_incref(req.id) : NULL;
	proto_request_free(&req);
	return id;
}

static void parse_bad_noid(const char *text, proto_errclass c, const char *needle)
{
	json_t *id = parse_bad(text, strlen(text), c, needle);
	ck_assert_msg(id == NULL, "request %s: an id was read", text);
}

static void parse_bad_id(const char *text, proto_errclass c, const char *needle, json_int_t id)
{
	json_t *got = parse_bad(text, strlen(text), c, needle);
	ck_assert_msg(json_is_integer(got) && json_integer_value(got) == id,
		"request %s: id not echoed", text);
	json_decref(got);
}

START_TEST(test_proto_request_parse_valid)
{
	proto_request req;
	proto_errclass ec;
	char desc[PROTO_DESC_LEN];
	const char *t = "{\"execute\":\"remat-set\",\"arguments\":{\"job\":\"j1\","
			"\"sections\":{\"h.0-5\":\"full\"}},\"id\":7}";
	ck_assert_int_eq(proto_request_parse(t, strlen(t), &req, &ec, desc, sizeof desc), 0);
	ck_assert_str_eq(req.execute, "remat-set");
	ck_assert_str_eq(json_string_value(json_object_get(req.args, "job")), "j1");
	ck_assert_int_eq(json_integer_value(req.id), 7);
	proto_request_free(&req);

	/* no arguments: an empty object; no id: NULL */
	t = "{\"execute\":\"job-list\"}";
	ck_assert_int_eq(proto_request_parse(t, strlen(t), &req, &ec, desc, sizeof desc), 0);
	ck_assert_msg(json_is_object(req.args) && json_object_size(req.args) == 0, "args");
	ck_assert_ptr_null(req.id);
	proto_request_free(&req);

	/* whitespace around and inside is JSON's business */
	t = "  { \"id\" : \"x\" , \"execute\" : \"daemon-info\" }  ";
	ck_assert_int_eq(proto_request_parse(t, strlen(t), &req, &ec, desc, sizeof desc), 0);
	ck_assert_str_eq(req.execute, "daemon-info");
	proto_request_free(&req);

	/* an execute of 63 bytes fits; an unknown name is for proto_command_find to say */
	char name[64];
	char line[128];
	memset(name, 'a', 63);
	name[63] = '\0';
	snprintf(line, sizeof line, "{\"execute\":\"%s\"}", name);
	ck_assert_int_eq(proto_request_parse(line, strlen(line), &req, &ec, desc, sizeof desc),
		0);
	ck_assert_str_eq(req.execute, name);
	proto_request_free(&req);
}
END_TEST

START_TEST(test_proto_request_parse_not_json)
{
	parse_bad_noid("hello", PROTO_ERR_PARSE_ERROR, "invalid JSON");
	parse_bad_noid("{\"execute\":\"job-list\"", PROTO_ERR_PARSE_ERROR, "invalid JSON");
	parse_bad_noid("{\"execute\":\"job-list\"} {}", PROTO_ERR_PARSE_ERROR, "invalid JSON");
	parse_bad_noid("{'execute':'job-list'}", PROTO_ERR_PARSE_ERROR, "invalid JSON");
	parse_bad_noid("", PROTO_ERR_PARSE_ERROR, "empty");
	/* a NUL inside the line ends nothing: the rest is still there, and not JSON */
	json_t *id = parse_bad("{\"execute\":\"job-list\"}\0x", 24, PROTO_ERR_PARSE_ERROR,
		"invalid JSON");
	ck_assert_ptr_null(id);
	parse_bad_noid("{\"execute\":\"a\\u0000b\"}", PROTO_ERR_PARSE_ERROR, "invalid JSON");
}
END_TEST

START_TEST(test_proto_request_parse_not_object)
{
	parse_bad_noid("[\"execute\",\"job-list\"]", PROTO_ERR_INVALID_REQUEST, "JSON object");
	parse_bad_noid("42", PROTO_ERR_INVALID_REQUEST, "JSON object");
	parse_bad_noid("\"job-list\"", PROTO_ERR_INVALID_REQUEST, "JSON object");
	parse_bad_noid("null", PROTO_ERR_INVALID_REQUEST, "JSON object");
	parse_bad_noid("true", PROTO_ERR_INVALID_REQUEST, "JSON object");
}
END_TEST

START_TEST(test_proto_request_parse_bad_execute)
{
	parse_bad_id("{\"id\":1}", PROTO_ERR_INVALID_REQUEST, "missing 'execute'", 1);
	parse_bad_id("{\"arguments\":{},\"id\":2}", PROTO_ERR_INVALID_REQUEST, "'execute'", 2);
	parse_bad_id("{\"execute\":5,\"id\":3}", PROTO_ERR_INVALID_REQUEST,
		"'execute' must be a string", 3);
	parse_bad_id("{\"execute\":null,\"id\":4}", PROTO_ERR_INVALID_REQUEST, "string", 4);
	parse_bad_id("{\"execute\":[\"job-list\"],\"id\":5}", PROTO_ERR_INVALID_REQUEST,
		"string", 5);
	parse_bad_id("{\"execute\":\"\",\"id\":6}", PROTO_ERR_INVALID_REQUEST, "'execute'", 6);
	char line[256];
	char name[65];
	memset(name, 'a', 64);
	name[64] = '\0';
	snprintf(line, sizeof line, "{\"execute\":\"%s\",\"id\":7}", name);
	parse_bad_id(line, PROTO_ERR_INVALID_REQUEST, "'execute'", 7);
}
END_TEST

START_TEST(test_proto_request_parse_extra_key)
{
	parse_bad_id("{\"execute\":\"job-list\",\"id\":8,\"args\":{}}", PROTO_ERR_INVALID_REQUEST,
		"unknown key 'args'", 8);
	parse_bad_id("{\"execute\":\"job-list\",\"id\":9,\"Execute\":1}",
		PROTO_ERR_INVALID_REQUEST, "unknown key 'Execute'", 9);
}
END_TEST

START_TEST(test_proto_request_parse_arguments_not_object)
{
	const char *bad[] = {"[]", "\"x\"", "1", "null", "true"};
	char line[128];
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(line, sizeof line,
			"{\"execute\":\"job-list\",\"arguments\":%s,\"id\":10}", bad[i]);
		parse_bad_id(line, PROTO_ERR_INVALID_REQUEST, "'arguments' must be an object", 10);
	}
}
END_TEST

START_TEST(test_proto_request_parse_duplicate_keys)
{
	parse_bad_noid("{\"execute\":\"job-list\",\"execute\":\"daemon-info\"}",
		PROTO_ERR_PARSE_ERROR, "duplicate");
	parse_bad_noid("{\"execute\":\"job-stop\",\"arguments\":{\"job\":\"j1\",\"job\":\"j2\"}}",
		PROTO_ERR_PARSE_ERROR, "duplicate");
	parse_bad_noid("{\"id\":1,\"id\":2,\"execute\":\"job-list\"}", PROTO_ERR_PARSE_ERROR,
		"duplicate");
}
END_TEST

START_TEST(test_proto_request_parse_invalid_utf8)
{
	const char *bad[] = {
		"{\"execute\":\"job-\xff\"}",                 /* never valid */
		"{\"execute\":\"job-\xc0\xaf\"}",             /* overlong '/' */
		"{\"execute\":\"job\xed\xa0\x80\"}",          /* a surrogate */
		"{\"execute\":\"job-list\",\"id\":\"\xe2\x82\"}", /* cut short */
		"{\"execute\":\"job-list\",\"\xf5\x80\x80\x80\":1}", /* past U+10FFFF */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		json_t *id = parse_bad(bad[i], strlen(bad[i]), PROTO_ERR_PARSE_ERROR, "JSON");
		ck_assert_ptr_null(id);
	}
	/* and the description of one is itself valid UTF-8, fit for an error line */
	proto_request req;
	proto_errclass ec;
	char desc[PROTO_DESC_LEN];
	ck_assert_int_eq(proto_request_parse(bad[0], strlen(bad[0]), &req, &ec, desc,
				 sizeof desc),
		-1);
	char *line = proto_error_line(ec, desc, NULL);
	ck_assert_ptr_nonnull(line);
	free(line);
	proto_request_free(&req);
}
END_TEST

/* n nested arrays around a number inside the arguments of a valid request. */
static char *nested(size_t n)
{
	const char *pre = "{\"execute\":\"job-list\",\"id\":1,\"arguments\":{\"x\":";
	size_t pl = strlen(pre);
	char *s = malloc(pl + 2 * n + 8);
	ck_assert_ptr_nonnull(s);
	memcpy(s, pre, pl);
	memset(s + pl, '[', n);
	s[pl + n] = '1';
	memset(s + pl + n + 1, ']', n);
	strcpy(s + pl + 2 * n + 1, "}}");
	return s;
}

START_TEST(test_proto_request_parse_deep_nesting)
{
	proto_request req;
	proto_errclass ec;
	char desc[PROTO_DESC_LEN];
	/* the request object and the arguments object are two levels already */
	char *s = nested(PROTO_MAX_DEPTH - 2);
	ck_assert_int_eq(proto_request_parse(s, strlen(s), &req, &ec, desc, sizeof desc), 0);
	proto_request_free(&req);
	free(s);
	size_t deep[] = {PROTO_MAX_DEPTH - 1, 3000, 10000, 1000000};
	for (size_t i = 0; i < sizeof deep / sizeof deep[0]; i++) {
		s = nested(deep[i]);
		json_t *id = parse_bad(s, strlen(s), PROTO_ERR_PARSE_ERROR, "nested deeper");
		ck_assert_ptr_null(id);
		free(s);
	}
	/* brackets inside strings are data, not depth */
	char line[256] = "{\"execute\":\"job-list\",\"id\":\"";
	for (int i = 0; i < 100; i++)
		strcat(line, "[");
	strcat(line, "\\\"{\"}");
	ck_assert_int_eq(proto_request_parse(line, strlen(line), &req, &ec, desc, sizeof desc),
		0);
	proto_request_free(&req);
	/* and unbalanced closers do not buy depth */
	memset(line, ']', 50);
	memset(line + 50, '[', PROTO_MAX_DEPTH + 1);
	line[50 + PROTO_MAX_DEPTH + 1] = '\0';
	parse_bad_noid(line, PROTO_ERR_PARSE_ERROR, "nested deeper");
}
END_TEST

START_TEST(test_proto_request_parse_id_any_type)
{
	const char *ids[] = {"7", "-1", "1.5", "\"seven\"", "null", "true", "{\"a\":[1,2]}",
		"[1,\"x\"]", "\"\\u00e9\\n\""};
	for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
		char line[256];
		proto_request req;
		proto_errclass ec;
		char desc[PROTO_DESC_LEN];
		json_t *want = json_loads(ids[i], JSON_DECODE_ANY, NULL);
		ck_assert_ptr_nonnull(want);
		snprintf(line, sizeof line, "{\"id\":%s,\"execute\":\"job-list\"}", ids[i]);
		ck_assert_int_eq(proto_request_parse(line, strlen(line), &req, &ec, desc,
					 sizeof desc),
			0);
		ck_assert_msg(json_equal(req.id, want), "id %s not kept", ids[i]);
		/* and echoed as given in a reply and in an error */
		char *r = proto_reply_line(NULL, req.id);
		char *e = proto_error_line(PROTO_ERR_BUSY, "busy", req.id);
		json_t *rj = json_loads(r, 0, NULL);
		json_t *ej = json_loads(e, 0, NULL);
		ck_assert_msg(json_equal(json_object_get(rj, "id"), want), "reply %s", r);
		ck_assert_msg(json_equal(json_object_get(ej, "id"), want), "error %s", e);
		json_decref(rj);
		json_decref(ej);
		free(r);
		free(e);
		proto_request_free(&req);
		/* a refused request echoes it too */
		snprintf(line, sizeof line, "{\"id\":%s,\"execute\":1}", ids[i]);
		json_t *got = parse_bad(line, strlen(line), PROTO_ERR_INVALID_REQUEST, "'execute'");
		ck_assert_msg(json_equal(got, want), "id %s not echoed on error", ids[i]);
		json_decref(got);
		json_decref(want);
	}
}
END_TEST

START_TEST(test_proto_request_parse_max_line)
{
	/* a request exactly PROTO_MAX_LINE long, framed and parsed */
	const char *pre = "{\"execute\":\"job-start\",\"arguments\":{\"spec\":{\"pad\":\"";
	const char *post = "\"}},\"id\":1}";
	size_t n = PROTO_MAX_LINE;
	char *s = malloc(n + 1);
	ck_assert_ptr_nonnull(s);
	memset(s, 'p', n);
	memcpy(s, pre, strlen(pre));
	memcpy(s + n - strlen(post), post, strlen(post));
	s[n] = '\n';
	proto_framer f;
	size_t lens[2] = {0, 0};
	proto_framer_init(&f);
	ck_assert_int_eq(proto_framer_feed(&f, s, n + 1, count_cb, lens), 0);
	ck_assert_uint_eq(lens[1], n);
	proto_request req;
	proto_errclass ec;
	char desc[PROTO_DESC_LEN];
	ck_assert_int_eq(proto_request_parse(s, n, &req, &ec, desc, sizeof desc), 0);
	char d[PROTO_DESC_LEN];
	ck_assert_int_eq(proto_args_validate(proto_command_find(req.execute), req.args, d,
				 sizeof d),
		0);
	proto_request_free(&req);
	proto_framer_free(&f);
	free(s);
}
END_TEST

/* ---- jobs: states, spec paths, a policy's text ---- */

START_TEST(test_proto_job_states)
{
	/* the names on the wire, in the order rematd and the worker share */
	static const char *const names[] = {"queued", "starting", "running", "paused",
		"stopping", "finished", "stopped", "failed", "interrupted"};
	ck_assert_int_eq(PROTO_JOB_NSTATES, 9);
	for (int i = 0; i < PROTO_JOB_NSTATES; i++) {
		ck_assert_str_eq(proto_job_state_name(i), names[i]);
		ck_assert_int_eq(proto_job_state_find(names[i]), i);
		ck_assert_int_eq(proto_job_state_final(i), i >= PROTO_JOB_FINISHED);
	}
	ck_assert_str_eq(proto_job_state_name(-1), "unknown");
	ck_assert_str_eq(proto_job_state_name(PROTO_JOB_NSTATES), "unknown");
	ck_assert_int_eq(proto_job_state_find("Running"), -1);
	ck_assert_int_eq(proto_job_state_find(NULL), -1);
	ck_assert_int_eq(proto_job_state_final(-1), 0);
}
END_TEST

START_TEST(test_proto_spec_paths_table)
{
	static const char *const want[] = {"data.train", "data.val", "model.init_from",
		"save.dir", "parallel.hostfile", "data.tokenizer", "data.cache"};
	ck_assert_int_eq(PROTO_SPEC_PATHS, sizeof want / sizeof want[0]);
	for (int i = 0; i < PROTO_SPEC_PATHS; i++) {
		char key[64];
		snprintf(key, sizeof key, "%s.%s", proto_spec_paths[i][0], proto_spec_paths[i][1]);
		ck_assert_str_eq(key, want[i]);
	}
}
END_TEST

#define ITEMS_LEN (PROTO_DESC_LEN + 16) /* policy_items' text */

/* proto_policy_parse's items as "sel=mode " text, or "ERR: desc". */
static int items_cat(void *ud, const char *sel, const char *mode, char *desc, size_t desclen)
{
	char *out = ud;
	(void)desc;
	(void)desclen;
	snprintf(out + strlen(out), ITEMS_LEN - strlen(out), "%s=%s ", sel, mode);
	return 0;
}

static const char *policy_items(const char *text, char *out)
{
	char desc[PROTO_DESC_LEN];
	out[0] = '\0';
	if (proto_policy_parse(text, items_cat, out, desc, sizeof desc) < 0)
		snprintf(out, ITEMS_LEN, "ERR: %s", desc);
	return out;
}

START_TEST(test_proto_policy_parse_grammar)
{
	char out[ITEMS_LEN];
	/* ',' as printed, ';' and blanks: one grammar */
	ck_assert_str_eq(policy_items("h.0-5=full,head=chunked", out), "h.0-5=full head=chunked ");
	ck_assert_str_eq(policy_items("h.0-5=full;head=chunked", out), "h.0-5=full head=chunked ");
	ck_assert_str_eq(policy_items("h.0-5=full head=chunked", out), "h.0-5=full head=chunked ");
	ck_assert_str_eq(policy_items("h.0=off,\th.1=full; head=off", out),
		"h.0=off h.1=full head=off ");
	/* a bare mode is all=MODE; empty items are skipped */
	ck_assert_str_eq(policy_items("full", out), "all=full ");
	ck_assert_str_eq(policy_items("full;head=chunked", out), "all=full head=chunked ");
	ck_assert_str_eq(policy_items(",h.1=full;;head=chunked;", out), "h.1=full head=chunked ");
	/* the grammar's errors; what a mode or a selector means is the caller's */
	ck_assert_str_eq(policy_items("h.0=fast", out), "h.0=fast ");
	static const char *const bad[][2] = {
		{"", "empty policy"}, {",;, ", "empty policy"}, {"=full", "malformed"},
		{"h.0=", "malformed"}, {"h.0=full=off", "malformed"},
		{"h.0=full,=off", "malformed policy item '=off'"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(strstr(policy_items(bad[i][0], out), bad[i][1]) == out + 5,
			"'%s': %s", bad[i][0], out);
	char big[PROTO_POLICY_TEXT_MAX + 2];
	memset(big, ';', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	memcpy(big, "full", 4);
	ck_assert_ptr_nonnull(strstr(policy_items(big, out), "too long"));
	big[sizeof big - 2] = '\0'; /* PROTO_POLICY_TEXT_MAX bytes: read */
	ck_assert_str_eq(policy_items(big, out), "all=full ");
}
END_TEST

Suite *suite_proto(void)
{
	Suite *s = suite_create("proto");
	TCase *tc = tcase_create("framer");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_proto_framer_feed_many_lines);
	tcase_add_test(tc, test_proto_framer_feed_byte_by_byte);
	tcase_add_test(tc, test_proto_framer_feed_crlf);
	tcase_add_test(tc, test_proto_framer_feed_empty_lines);
	tcase_add_test(tc, test_proto_framer_feed_embedded_nul);
	tcase_add_test(tc, test_proto_framer_feed_max_line);
	tcase_add_test(tc, test_proto_framer_feed_too_long);
	tcase_add_test(tc, test_proto_framer_feed_endless_line);
	tcase_add_test(tc, test_proto_framer_feed_stop);
	tcase_add_test(tc, test_proto_framer_feed_stop_keeps_new_input);
	tcase_add_test(tc, test_proto_framer_feed_stop_kept_limits);
	tcase_add_test(tc, test_proto_framer_feed_stop_shrinks);
	suite_add_tcase(s, tc);

	tc = tcase_create("request");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_proto_request_parse_valid);
	tcase_add_test(tc, test_proto_request_parse_not_json);
	tcase_add_test(tc, test_proto_request_parse_not_object);
	tcase_add_test(tc, test_proto_request_parse_bad_execute);
	tcase_add_test(tc, test_proto_request_parse_extra_key);
	tcase_add_test(tc, test_proto_request_parse_arguments_not_object);
	tcase_add_test(tc, test_proto_request_parse_duplicate_keys);
	tcase_add_test(tc, test_proto_request_parse_invalid_utf8);
	tcase_add_test(tc, test_proto_request_parse_deep_nesting);
	tcase_add_test(tc, test_proto_request_parse_id_any_type);
	tcase_add_test(tc, test_proto_request_parse_max_line);
	suite_add_tcase(s, tc);

	tc = tcase_create("job");
	tcase_add_test(tc, test_proto_job_states);
	tcase_add_test(tc, test_proto_spec_paths_table);
	tcase_add_test(tc, test_proto_policy_parse_grammar);
	suite_add_tcase(s, tc);

	suite_add_tcase(s, tcase_proto_args());
	suite_add_tcase(s, tcase_proto_lines());
	return s;
}
