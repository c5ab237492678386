/* srv_util.c - logging, quoting of client input, output messages and stream writes shared
 * by rematd's modules (see srv.h). Not here: any policy about who gets what.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

#define LOG_LINE_MAX 2048 /* one log line, prefix and newline included; longer ones are cut */

void srv_log(const char *fmt, ...)
{
	char line[LOG_LINE_MAX];
	int n = snprintf(line, sizeof line, "rematd: ");
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	size_t len = (size_t)n + (size_t)m;
	if (len > sizeof line - 2)
		len = sizeof line - 2;
	line[len++] = '\n';
	/* one fwrite: lines from one process never interleave mid-line (stderr is unbuffered,
	 * so this is one write(2)) */
	fwrite(line, 1, len, stderr);
}

void srv_fmt(char *dst, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(dst, len, fmt, ap);
	va_end(ap);
}

void srv_copy_text(char *dst, size_t len, const char *src)
{
	size_t n = strlen(src);
	if (len == 0)
		return;
	if (n >= len) {
		n = len - 1;
		/* back off to the start of the character that did not fit */
		while (n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80)
			n--;
	}
	memcpy(dst, src, n);
	dst[n] = '\0';
}

char *srv_quote(const char *s, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	size_t cut = n > SRV_QUOTE_MAX ? SRV_QUOTE_MAX : n;
	out[o++] = '"';
	for (size_t i = 0; i < cut; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = (char)ch;
		} else if (ch == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else if (ch == '\t') {
			out[o++] = '\\';
			out[o++] = 't';
		} else if (ch < 0x20 || ch >= 0x7f) {
			/* bytes >= 0x80 too: a C1 control (0x9b is CSI) could drive the terminal
			 * that shows this log */
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[ch >> 4];
			out[o++] = hex[ch & 15];
		} else {
			out[o++] = (char)ch;
		}
	}
	out[o++] = '"';
	if (cut < n) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	return out;
}

uint64_t srv_now_ms(void)
{
	return uv_hrtime() / 1000000u;
}

/* ---- waiters ---- */

srv_waiter *srv_waiter_new(unsigned conn_id, const json_t *id)
{
	srv_waiter *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	w->conn_id = conn_id;
	w->id = id ? json_incref((json_t *)id) : NULL;
	return w;
}

void srv_waiter_free(srv_waiter *w)
{
	if (!w)
		return;
	json_decref(w->id);
	free(w);
}

void srv_waiter_push(srv_waiter **list, srv_waiter *w)
{
	w->next = *list;
	*list = w;
}

/* ---- credentials ---- */

int srv_cred_drops(const srv_server *srv, const eng_cred *owner)
{
	return srv->uid == 0 && owner->uid != 0;
}

int srv_privileged(const srv_server *srv, uid_t uid)
{
	return uid == 0 || uid == srv->uid;
}

int srv_cred_args(const srv_server *srv, const eng_cred *owner, char *buf, char **args)
{
	if (!srv_cred_drops(srv, owner))
		return 0;
	eng_cred_format(owner, buf, ENG_CRED_ARG_LEN);
	args[0] = "--as";
	args[1] = buf;
	return 2;
}
