/* eng_err.c - formatting of engine error messages (see eng_err.h). */
#include "eng_err.h"

#include <jansson.h>
#include <stdarg.h>
#include <string.h>

/* The message, of kind k; -1. */
static int err_vset(eng_err *err, eng_err_kind k, const char *fmt, va_list ap)
{
	if (err) {
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		err->kind = k;
	}
	return -1;
}

int eng_errf(eng_err *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err_vset(err, ENG_ERR_BAD, fmt, ap);
	va_end(ap);
	return -1;
}

int eng_err_nomem(eng_err *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err_vset(err, ENG_ERR_NOMEM, fmt, ap);
	va_end(ap);
	return -1;
}

int eng_err_invalid(eng_err *err, const char *kind, const char *path, const char *fmt, ...)
{
	char what[ENG_ERR_LEN];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	return eng_errf(err, "invalid %s '%s': %s", kind, path, what);
}

const char *eng_err_json(const json_error_t *je, char *buf, size_t n)
{
	/* json_error_code's order (jansson 2.11 and later) */
	static const char *const kinds[] = {"not valid JSON", "out of memory",
		"nested too deeply", "cannot be read", "invalid argument", "invalid UTF-8",
		"premature end of input", "end of input expected", "invalid syntax",
		"invalid format", "wrong type", "a NUL character", "a null value",
		"a NUL byte in a key", "duplicate object key", "number out of range",
		"item not found", "index out of range"};
	unsigned k = (unsigned)json_error_code(je);
	const char *kind = k < sizeof kinds / sizeof kinds[0] ? kinds[k] : kinds[0];
	if (k == json_error_cannot_open_file) /* the path and errno's text: no file bytes */
		snprintf(buf, n, "%s", je->text);
	else if (je->line > 0)
		snprintf(buf, n, "line %d, column %d: %s", je->line, je->column, kind);
	else
		snprintf(buf, n, "%s", kind);
	return buf;
}

#define ERR_PLAIN "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"

const char *eng_err_plain(const char *name)
{
	size_t n = strlen(name);
	return n == 0 || n > 128 || strspn(name, ERR_PLAIN) != n ? "(a name not shown)" : name;
}

const char *eng_err_path(const char *path)
{
	size_t n = strlen(path);
	return n == 0 || n > 200 || strspn(path, ERR_PLAIN "/+@=,") != n ? "(a path not shown)"
		: path;
}
