/* proto_msg.c - the JSON side of the control protocol (proto.h, design.md §2): parsing request
 * lines, building greeting / request / reply / error / event lines, reading what a server
 * sent, and the names of the error classes.
 *
 * What it is not: no framing (proto_frame.c), no command table or argument schemas
 * (proto_cmd.c), no I/O. Descriptions that go on the wire are kept valid UTF-8 here, since
 * jansson refuses to build a string that is not.
 */
#include "proto.h"
#include "proto_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Nesting accepted in what a server sends: replies wrap an id that was itself within
 * PROTO_MAX_DEPTH, so twice that leaves room without letting depth run free. */
#define PROTO_MSG_MAX_DEPTH (2 * PROTO_MAX_DEPTH)

/* Dump flags of every line: one compact line, keys in the order they were set. */
#define LINE_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER)

static const char *const errclass_names[] = {
	[PROTO_ERR_PARSE_ERROR] = "ParseError",
	[PROTO_ERR_INVALID_REQUEST] = "InvalidRequest",
	[PROTO_ERR_COMMAND_NOT_FOUND] = "CommandNotFound",
	[PROTO_ERR_INVALID_PARAMETER] = "InvalidParameter",
	[PROTO_ERR_JOB_NOT_FOUND] = "JobNotFound",
	[PROTO_ERR_INVALID_STATE] = "InvalidState",
	[PROTO_ERR_BUSY] = "Busy",
	[PROTO_ERR_IO_ERROR] = "IOError",
	[PROTO_ERR_PERMISSION_DENIED] = "PermissionDenied",
	[PROTO_ERR_MESSAGE_TOO_LARGE] = "MessageTooLarge",
	[PROTO_ERR_INTERNAL] = "Internal",
};

const char *proto_errclass_name(proto_errclass c)
{
	size_t n = sizeof errclass_names / sizeof errclass_names[0];
	/* a class from outside the enum still names something a peer can read */
	if ((size_t)c >= n)
		return "Internal";
	return errclass_names[c];
}

/* ---- descriptions ---- */

/* Length of the valid UTF-8 sequence starting s[0..n) (n >= 1); 0 when there is none, -1
 * when s is a valid beginning that n cuts short. Same rules as jansson: no overlong forms,
 * no surrogates, nothing past U+10FFFF. */
static int utf8_seq(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	for (size_t i = 1; i < len; i++) {
		if (i >= n)
			return -1;
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		if (i == 1 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) ||
				      (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f)))
			return 0;
	}
	return (int)len;
}

void proto__utf8_fix(char *s)
{
	unsigned char *u = (unsigned char *)s;
	size_t n = strlen(s);
	size_t i = 0;
	while (i < n) {
		int k = utf8_seq(u + i, n - i);
		if (k < 0) {
			u[i] = '\0'; /* cut by a truncation: drop the piece */
			break;
		}
		if (k == 0) {
			u[i] = '?';
			k = 1;
		}
		i += (size_t)k;
	}
}

void proto__descf(char *desc, size_t len, const char *fmt, ...)
{
	va_list ap;
	if (desc == NULL || len == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(desc, len, fmt, ap);
	va_end(ap);
	proto__utf8_fix(desc);
}

int proto__clip(const char *s)
{
	size_t n = strnlen(s, PROTO_QUOTE_MAX + 1);
	if (n <= PROTO_QUOTE_MAX)
		return (int)n;
	/* s[n] is the first byte left out; back off while it continues a sequence */
	n = PROTO_QUOTE_MAX;
	while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	return (int)n;
}

int proto__depth_ok(const char *s, size_t n, int max)
{
	int depth = 0, in_str = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (in_str) {
			if (c == '\\')
				i++; /* the escaped byte cannot end the string */
			else if (c == '"')
				in_str = 0;
		} else if (c == '"') {
			in_str = 1;
		} else if (c == '{' || c == '[') {
			if (++depth > max)
				return 0;
		} else if ((c == '}' || c == ']') && depth > 0) {
			depth--;
		}
	}
	return 1;
}

/* ---- requests ---- */

static void request_fail(proto_errclass *ec, proto_errclass c)
{
	if (ec != NULL)
		*ec = c;
}

/* The JSON value of a request line, or NULL with desc (a ParseError: empty, nested too
 * deep, not JSON). New reference. */
static json_t *request_load(const char *line, size_t len, char *desc, size_t desclen)
{
	json_error_t err;
	json_t *root;
	if (line == NULL || len == 0) {
		proto__descf(desc, desclen, "empty request");
		return NULL;
	}
	/* jansson stops at 2048 levels on its own; this refuses deep input sooner, in one
	 * pass, before anything is allocated for it */
	if (!proto__depth_ok(line, len, PROTO_MAX_DEPTH)) {
		proto__descf(desc, desclen, "JSON nested deeper than %d levels", PROTO_MAX_DEPTH);
		return NULL;
	}
	root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
	if (root == NULL)
		proto__descf(desc, desclen, "invalid JSON at byte %d: %s", err.position,
			err.text);
	return root;
}

/* A request object's keys (execute, arguments, id and no other) and its "execute" into
 * req->execute: 0, or -1 with desc (an InvalidRequest). */
static int request_execute(json_t *root, proto_request *req, char *desc, size_t desclen)
{
	const char *key;
	json_t *v;
	size_t n;
	json_object_foreach(root, key, v) {
		if (strcmp(key, "execute") != 0 && strcmp(key, "arguments") != 0 &&
			strcmp(key, "id") != 0) {
			proto__descf(desc, desclen, "unknown key '%.*s' in request",
				proto__clip(key), key);
			return -1;
		}
	}
	v = json_object_get(root, "execute");
	if (v == NULL) {
		proto__descf(desc, desclen, "missing 'execute'");
		return -1;
	}
	if (!json_is_string(v)) {
		proto__descf(desc, desclen, "'execute' must be a string");
		return -1;
	}
	n = json_string_length(v);
	if (n == 0 || n >= sizeof req->execute || memchr(json_string_value(v), '\0', n)) {
		proto__descf(desc, desclen, "'execute' must be 1 to %zu bytes, without NUL",
			sizeof req->execute - 1);
		return -1;
	}
	memcpy(req->execute, json_string_value(v), n + 1);
	return 0;
}

int proto_request_parse(const char *line, size_t len, proto_request *req, proto_errclass *ec,
	char *desc, size_t desclen)
{
	json_t *root = NULL;
	json_t *v;
	proto_errclass c = PROTO_ERR_INVALID_REQUEST;

	req->execute[0] = '\0';
	req->args = NULL;
	req->id = NULL;
	root = request_load(line, len, desc, desclen);
	if (root == NULL) {
		c = PROTO_ERR_PARSE_ERROR;
		goto fail;
	}
	if (!json_is_object(root)) {
		proto__descf(desc, desclen, "a request must be a JSON object");
		goto fail;
	}
	/* the id first, so that every later error can echo it */
	v = json_object_get(root, "id");
	if (v != NULL)
		req->id = json_incref(v);
	if (request_execute(root, req, desc, desclen) < 0)
		goto fail;
	v = json_object_get(root, "arguments");
	if (v != NULL && !json_is_object(v)) {
		proto__descf(desc, desclen, "'arguments' must be an object");
		goto fail;
	}
	req->args = v != NULL ? json_incref(v) : json_object();
	if (req->args == NULL) {
		c = PROTO_ERR_INTERNAL;
		proto__descf(desc, desclen, "out of memory");
		goto fail;
	}
	json_decref(root);
	return 0;

fail:
	/* what a failed parse leaves: no command, no arguments, the id when there was one */
	req->execute[0] = '\0';
	json_decref(req->args);
	req->args = NULL;
	json_decref(root);
	request_fail(ec, c);
	return -1;
}

void proto_request_free(proto_request *req)
{
	json_decref(req->args);
	json_decref(req->id);
	req->args = NULL;
	req->id = NULL;
	req->execute[0] = '\0';
}

/* ---- building lines ---- */

/* The compact text of obj, '\n' and NUL after it, in a buffer from malloc (json_dumps
 * would use jansson's allocator, which a caller may have replaced), every real in its
 * shortest text (proto_json_dumps). Takes obj's reference whatever happens, so callers can
 * pass what they just built, NULL included. */
static char *line_dump(json_t *obj)
{
	char *line = obj ? proto_json_dumps(obj, LINE_FLAGS) : NULL, *grown;
	size_t n = line ? strlen(line) : 0;
	if (line && !(grown = realloc(line, n + 2))) {
		free(line);
		line = NULL;
	} else if (line) {
		line = grown;
		line[n] = '\n';
		line[n + 1] = '\0';
	}
	json_decref(obj);
	return line;
}

/* Sets key to a borrowed value (a new reference is taken); NULL value: nothing set. */
static int set_borrowed(json_t *obj, const char *key, const json_t *value)
{
	if (value == NULL)
		return 0;
	return json_object_set(obj, key, (json_t *)value);
}

char *proto_greeting(const char *role, const char *job)
{
	json_t *obj = NULL;
	json_t *g = json_object();
	json_t *caps = json_array();
	if (g == NULL || caps == NULL || json_array_append_new(caps, json_string("events")) < 0)
		goto fail;
	if (json_object_set_new(g, "version", json_string(PROTO_VERSION)) < 0 ||
		json_object_set_new(g, "protocol", json_integer(PROTO_PROTOCOL)) < 0 ||
		json_object_set(g, "capabilities", caps) < 0)
		goto fail;
	if (role != NULL && json_object_set_new(g, "role", json_string(role)) < 0)
		goto fail;
	if (job != NULL && json_object_set_new(g, "job", json_string(job)) < 0)
		goto fail;
	obj = json_object();
	if (obj == NULL || json_object_set(obj, "remat", g) < 0)
		goto fail;
	json_decref(caps);
	json_decref(g);
	return line_dump(obj);

fail:
	json_decref(obj);
	json_decref(caps);
	json_decref(g);
	return NULL;
}

char *proto_request_line(const char *name, const json_t *args, const json_t *id)
{
	json_t *obj = json_object();
	if (obj == NULL || name == NULL ||
		json_object_set_new(obj, "execute", json_string(name)) < 0 ||
		set_borrowed(obj, "arguments", args) < 0 || set_borrowed(obj, "id", id) < 0)
		goto fail;
	return line_dump(obj);

fail:
	json_decref(obj);
	return NULL;
}

char *proto_reply_line(const json_t *ret, const json_t *id)
{
	json_t *obj = json_object();
	if (obj == NULL)
		goto fail;
	if (ret != NULL ? json_object_set(obj, "return", (json_t *)ret) < 0
			: json_object_set_new(obj, "return", json_object()) < 0)
		goto fail;
	if (set_borrowed(obj, "id", id) < 0)
		goto fail;
	return line_dump(obj);

fail:
	json_decref(obj);
	return NULL;
}

char *proto_error_line(proto_errclass c, const char *desc, const json_t *id)
{
	char text[PROTO_DESC_LEN];
	json_t *obj = NULL;
	json_t *e = json_object();
	/* a description may quote a path or an engine message that is not UTF-8 */
	proto__descf(text, sizeof text, "%s", desc != NULL ? desc : "");
	if (e == NULL || json_object_set_new(e, "class", json_string(proto_errclass_name(c))) < 0 ||
		json_object_set_new(e, "desc", json_string(text)) < 0)
		goto fail;
	obj = json_object();
	if (obj == NULL || json_object_set(obj, "error", e) < 0 ||
		set_borrowed(obj, "id", id) < 0)
		goto fail;
	json_decref(e);
	return line_dump(obj);

fail:
	json_decref(obj);
	json_decref(e);
	return NULL;
}

char *proto_event_line(const char *name, const json_t *data)
{
	struct timespec now;
	json_t *obj = NULL;
	json_t *ts = json_object();
	if (name == NULL || ts == NULL || clock_gettime(CLOCK_REALTIME, &now) != 0)
		goto fail;
	if (json_object_set_new(ts, "seconds", json_integer((json_int_t)now.tv_sec)) < 0 ||
		json_object_set_new(ts, "microseconds",
			json_integer((json_int_t)(now.tv_nsec / 1000))) < 0)
		goto fail;
	obj = json_object();
	if (obj == NULL || json_object_set_new(obj, "event", json_string(name)) < 0)
		goto fail;
	if (data != NULL ? json_object_set(obj, "data", (json_t *)data) < 0
			 : json_object_set_new(obj, "data", json_object()) < 0)
		goto fail;
	if (json_object_set(obj, "timestamp", ts) < 0)
		goto fail;
	json_decref(ts);
	return line_dump(obj);

fail:
	json_decref(obj);
	json_decref(ts);
	return NULL;
}

/* ---- reading lines ---- */

/* The kind of a parsed server line, or -1 with desc. */
static int message_kind(json_t *root, proto_kind *kind, char *desc, size_t desclen)
{
	json_t *v;
	if (!json_is_object(root)) {
		proto__descf(desc, desclen, "a message must be a JSON object");
		return -1;
	}
	if ((v = json_object_get(root, "remat")) != NULL) {
		if (!json_is_object(v)) {
			proto__descf(desc, desclen, "'remat' must be an object");
			return -1;
		}
		*kind = PROTO_KIND_GREETING;
	} else if (json_object_get(root, "return") != NULL) {
		*kind = PROTO_KIND_RETURN;
	} else if ((v = json_object_get(root, "error")) != NULL) {
		if (!json_is_object(v) || !json_is_string(json_object_get(v, "class")) ||
			!json_is_string(json_object_get(v, "desc"))) {
			proto__descf(desc, desclen,
				"'error' must be an object with 'class' and 'desc' strings");
			return -1;
		}
		*kind = PROTO_KIND_ERROR;
	} else if ((v = json_object_get(root, "event")) != NULL) {
		if (!json_is_string(v) || !json_is_object(json_object_get(root, "data"))) {
			proto__descf(desc, desclen,
				"an event needs an 'event' string and a 'data' object");
			return -1;
		}
		*kind = PROTO_KIND_EVENT;
	} else {
		proto__descf(desc, desclen, "not a greeting, reply, error or event");
		return -1;
	}
	return 0;
}

int proto_message_parse(const char *line, size_t len, json_t **obj, proto_kind *kind,
	char *desc, size_t desclen)
{
	json_t *root = NULL;
	json_error_t err;
	proto_kind k = PROTO_KIND_RETURN;

	*obj = NULL;
	if (line == NULL || len == 0) {
		proto__descf(desc, desclen, "empty message");
		goto fail;
	}
	if (!proto__depth_ok(line, len, PROTO_MSG_MAX_DEPTH)) {
		proto__descf(desc, desclen, "JSON nested deeper than %d levels",
			PROTO_MSG_MAX_DEPTH);
		goto fail;
	}
	root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
	if (root == NULL) {
		proto__descf(desc, desclen, "invalid JSON at byte %d: %s", err.position,
			err.text);
		goto fail;
	}
	if (message_kind(root, &k, desc, desclen) < 0)
		goto fail;
	*obj = root;
	if (kind != NULL)
		*kind = k;
	return 0;

fail:
	json_decref(root);
	return -1;
}
