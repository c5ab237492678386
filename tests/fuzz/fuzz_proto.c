/* fuzz_proto.c - libFuzzer target for proto/: everything a peer's bytes can reach.
 *
 * What it is: the input goes through a framer in several chunk sizes (whole, 1, 7, 4096
 * bytes, and once with a callback that stops after every line and is drained with n = 0);
 * every line through proto_request_parse, and a parsed request through proto_command_find
 * and proto_args_validate(_ex), then into a reply or error line that must read back through
 * proto_message_parse; a parsed request rebuilt with proto_request_line must parse again to
 * the same thing; every line also goes through proto_message_parse. Invariants that fail
 * abort, so libFuzzer reports them as crashes.
 * What it is not: a test of the daemon (no sockets, no event loop). Built by the Makefile
 * with clang -fsanitize=fuzzer,address,undefined; `make test` runs it briefly, `make fuzz`
 * longer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (!(cond))                                                               \
			abort();                                                           \
	} while (0)

/* Counts what one framing of the input produced, to compare framings. */
typedef struct fuzz_run {
	size_t lines;  /* lines delivered */
	uint64_t hash; /* FNV-1a over the lines' lengths and ends */
	size_t first;  /* length of the first line */
	int stop;      /* ask the framer to stop after every line */
} fuzz_run;

/* A line built by proto must be exactly one line and read back as kind k. */
static void check_built(char *line, proto_kind k)
{
	json_t *obj = NULL;
	proto_kind got;
	char desc[PROTO_DESC_LEN];
	CHECK(line != NULL);
	size_t n = strlen(line);
	CHECK(n > 1 && line[n - 1] == '\n' && memchr(line, '\n', n - 1) == NULL);
	CHECK(proto_message_parse(line, n - 1, &obj, &got, desc, sizeof desc) == 0);
	CHECK(got == k);
	json_decref(obj);
	free(line);
}

static void fuzz_request(const char *line, size_t len)
{
	proto_request req;
	proto_errclass ec = PROTO_ERR_INTERNAL;
	char desc[PROTO_DESC_LEN];
	const proto_command *cmd;

	desc[0] = '\0';
	if (proto_request_parse(line, len, &req, &ec, desc, sizeof desc) < 0) {
		CHECK(req.args == NULL);
		CHECK(ec == PROTO_ERR_PARSE_ERROR || ec == PROTO_ERR_INVALID_REQUEST);
		/* every description must be fit for the wire */
		check_built(proto_error_line(ec, desc, req.id), PROTO_KIND_ERROR);
		proto_request_free(&req);
		return;
	}
	CHECK(json_is_object(req.args));
	CHECK(req.execute[0] != '\0' && strlen(req.execute) < sizeof req.execute);

	/* rebuilt, it parses again to the same request */
	char *again = proto_request_line(req.execute, req.args, req.id);
	CHECK(again != NULL);
	proto_request req2;
	CHECK(proto_request_parse(again, strlen(again) - 1, &req2, &ec, desc, sizeof desc) == 0);
	CHECK(strcmp(req2.execute, req.execute) == 0);
	CHECK(json_equal(req2.args, req.args));
	CHECK((req.id == NULL) == (req2.id == NULL));
	CHECK(req.id == NULL || json_equal(req.id, req2.id));
	proto_request_free(&req2);
	free(again);

	cmd = proto_command_find(req.execute);
	if (cmd == NULL) {
		check_built(proto_error_line(PROTO_ERR_COMMAND_NOT_FOUND, req.execute, req.id),
			PROTO_KIND_ERROR);
	} else {
		int rc = proto_args_validate(cmd, req.args, desc, sizeof desc);
		int rc_opt = proto_args_validate_ex(cmd, req.args, 1, desc, sizeof desc);
		/* leaving job optional can only accept more */
		CHECK(rc == 0 || rc == -1);
		CHECK(rc != 0 || rc_opt == 0);
		if (rc < 0)
			check_built(proto_error_line(PROTO_ERR_INVALID_PARAMETER, desc, req.id),
				PROTO_KIND_ERROR);
		else
			check_built(proto_reply_line(req.args, req.id), PROTO_KIND_RETURN);
	}
	check_built(proto_event_line(req.execute, req.args), PROTO_KIND_EVENT);
	proto_request_free(&req);
}

static void fuzz_message(const char *line, size_t len)
{
	json_t *obj = NULL;
	proto_kind kind;
	char desc[PROTO_DESC_LEN];
	if (proto_message_parse(line, len, &obj, &kind, desc, sizeof desc) == 0) {
		CHECK(json_is_object(obj));
		CHECK(kind >= PROTO_KIND_GREETING && kind <= PROTO_KIND_EVENT);
		json_decref(obj);
	} else {
		CHECK(obj == NULL);
	}
}

static int fuzz_line(const char *line, size_t len, void *ud)
{
	fuzz_run *r = ud;
	CHECK(len > 0 && len <= PROTO_MAX_LINE && line[len] == '\0');
	CHECK(memchr(line, '\n', len) == NULL); /* a '\r' may end it: only one is dropped */
	if (r->lines++ == 0)
		r->first = len;
	r->hash = (r->hash ^ len) * 0x100000001b3ull;
	/* the length and both ends: enough to tell framings apart, cheap on 1 MiB lines */
	for (size_t i = 0; i < len; i = i == 256 && len > 512 ? len - 256 : i + 1)
		r->hash = (r->hash ^ (unsigned char)line[i]) * 0x100000001b3ull;
	return r->stop;
}

/* Frames pad bytes of 'x' and then data, in chunks of at most step bytes (0: whole), with
 * cb on every line. */
static int frame(size_t pad, const uint8_t *data, size_t size, size_t step, int stop,
	fuzz_run *r, proto_line_cb cb)
{
	static char xs[65536];
	proto_framer f;
	int rc = 0;
	memset(r, 0, sizeof *r);
	r->hash = 0xcbf29ce484222325ull;
	r->stop = stop;
	if (xs[0] != 'x')
		memset(xs, 'x', sizeof xs);
	proto_framer_init(&f);
	for (size_t off = 0; off < pad + size && rc >= 0;) {
		size_t left = off < pad ? pad - off : pad + size - off;
		size_t k = step == 0 || left < step ? left : step;
		const char *p = off < pad ? xs : (const char *)data + (off - pad);
		if (off < pad && k > sizeof xs)
			k = sizeof xs;
		rc = proto_framer_feed(&f, p, k, cb, r);
		off += k;
		/* a stopping callback: drain what was kept before feeding more */
		while (rc == 1)
			rc = proto_framer_feed(&f, NULL, 0, cb, r);
		CHECK(rc == 0 || rc == -1);
		CHECK(f.state != 0 || f.cap <= PROTO_MAX_LINE + 1);
	}
	proto_framer_free(&f);
	return rc;
}

static int parse_line(const char *line, size_t len, void *ud)
{
	fuzz_line(line, len, ud);
	fuzz_request(line, len);
	fuzz_message(line, len);
	return 0;
}

/* Frames data every way; the first framing also parses every line. Every framing must give
 * the same lines and the same end, refusal included (lines before a refused one count). */
static void fuzz_input(const uint8_t *data, size_t size)
{
	static const size_t steps[] = {1, 7, 4096};
	fuzz_run whole, r;
	int rc = frame(0, data, size, 0, 0, &whole, parse_line);
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		/* byte by byte is for small inputs: on long ones it is slow, not different */
		if (steps[i] == 1 && size > 4096)
			continue;
		CHECK(frame(0, data, size, steps[i], 0, &r, fuzz_line) == rc);
		CHECK(r.lines == whole.lines && r.hash == whole.hash);
	}
	CHECK(frame(0, data, size, 4096, 1, &r, fuzz_line) == rc);
	CHECK(r.lines == whole.lines && r.hash == whole.hash);
}

/* A line around the limit: pad bytes of 'x', then data. Inputs that long are out of reach
 * of -max_len, and slow under ASan (fresh pages for every 1 MiB buffer), so one framing,
 * with a stopping callback, checked against what the first line must give. */
static void fuzz_long(size_t pad, const uint8_t *data, size_t size)
{
	fuzz_run r;
	const uint8_t *nl = memchr(data, '\n', size);
	size_t k = nl ? (size_t)(nl - data) : size;
	size_t raw = pad + k;
	char last = k ? (char)data[k - 1] : 'x';
	int fits = raw <= PROTO_MAX_LINE || (raw == PROTO_MAX_LINE + 1 && last == '\r');
	int rc = frame(pad, data, size, 4093, 1, &r, fuzz_line);
	if (!fits) {
		CHECK(rc == -1 && r.lines == 0);
	} else if (nl == NULL) {
		CHECK(rc == 0 && r.lines == 0);
	} else {
		CHECK(r.lines >= 1 && r.first == raw - (last == '\r'));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* An input starting with 0xfe stands for a line around the limit: PROTO_MAX_LINE - 4
	 * to + 3 bytes of 'x' (by data[1]), then the rest of the input, which may end it with
	 * "\n" or "\r\n", or not. */
	if (size >= 2 && data[0] == 0xfe)
		fuzz_long(PROTO_MAX_LINE - 4 + (data[1] & 7), data + 2, size - 2);
	else
		fuzz_input(data, size);
	return 0;
}
