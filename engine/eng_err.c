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
	}
	return -1;
}
