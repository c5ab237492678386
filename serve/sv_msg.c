/* sv_msg.c - shared output lines and their writes (see sv_msg.h). */
#include "sv_msg.h"

#include <stdlib.h>
#include <string.h>

sv_msg *sv_msg_take(char *line)
{
	if (!line)
		return NULL;
	sv_msg *m = malloc(sizeof *m);
	if (!m) {
		free(line);
		return NULL;
	}
	m->refs = 1;
	m->len = strlen(line);
	m->data = line;
	return m;
}

sv_msg *sv_msg_copy(const char *s, size_t n)
{
	char *line = malloc(n + 2);
	if (!line)
		return NULL;
	memcpy(line, s, n);
	line[n] = '\n';
	line[n + 1] = '\0';
	sv_msg *m = sv_msg_take(line);
	if (m)
		m->len = n + 1; /* s may hold a NUL byte: never trust strlen here */
	return m;
}

sv_msg *sv_msg_ref(sv_msg *m)
{
	m->refs++;
	return m;
}

void sv_msg_unref(sv_msg *m)
{
	if (!m || --m->refs > 0)
		return;
	free(m->data);
	free(m);
}

typedef struct write_req {
	uv_write_t req;      /* the libuv request; req.data unused */
	sv_msg *msg;         /* the line being written (one reference) */
	sv_write_cb cb;      /* the caller's callback, or NULL */
	void *data;          /* its argument */
} write_req;

static void write_done(uv_write_t *req, int status)
{
	write_req *w = (write_req *)req;
	if (w->cb)
		w->cb(status, w->data);
	sv_msg_unref(w->msg);
	free(w);
}

int sv_stream_write(uv_stream_t *stream, sv_msg *m, sv_write_cb cb, void *data)
{
	write_req *w = malloc(sizeof *w);
	if (!w)
		return UV_ENOMEM;
	w->msg = sv_msg_ref(m);
	w->cb = cb;
	w->data = data;
	uv_buf_t buf = uv_buf_init(m->data, (unsigned)m->len);
	int r = uv_write(&w->req, stream, &buf, 1, write_done);
	if (r < 0) {
		sv_msg_unref(m);
		free(w);
	}
	return r;
}
