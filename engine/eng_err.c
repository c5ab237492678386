/* eng_err.c - formatting of engine error messages (see eng_err.h). */
#include "eng_err.h"

#include <stdarg.h>

int eng_errf(eng_err *err, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
		err->kind = ENG_ERR_BAD;
	}
	return -1;
}

int eng_err_nomem(eng_err *err, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
		err->kind = ENG_ERR_NOMEM;
	}
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
