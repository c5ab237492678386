/* eng_err.c - formatting of engine error messages (see eng_err.h). */
#include "eng_err.h"

#include <stdarg.h>

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
