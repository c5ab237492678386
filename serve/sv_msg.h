/* sv_msg.h - one line to send, shared by every connection it goes to, and its write.
 *
 * A line built once (a reply, an event) may go to many peers: each uv_write holds a
 * reference, released in its callback. Used by both control servers (rematd's and the
 * worker's, through sv_conn.h) and by rematd's link to its workers.
 */
#ifndef SV_MSG_H
#define SV_MSG_H

#include <stddef.h>
#include <uv.h>

typedef struct sv_msg {
	unsigned refs;  /* holders: the creator plus one per write in flight */
	size_t len;     /* bytes in data, the final '\n' included */
	char *data;     /* the line (malloc'd, owned) */
} sv_msg;

/* Takes ownership of a malloc'd line that ends in '\n' (as the proto builders return);
 * NULL when line is NULL or memory runs out (then line is freed). refs = 1. */
sv_msg *sv_msg_take(char *line);
/* Copies n bytes and appends '\n'. refs = 1; NULL when memory runs out. */
sv_msg *sv_msg_copy(const char *s, size_t n);
sv_msg *sv_msg_ref(sv_msg *m);
void sv_msg_unref(sv_msg *m); /* NULL is a no-op */

/* Queues m on stream (taking a new reference). cb, when not NULL, runs after the write with
 * its status and data (UV_ECANCELED when the stream closed first). Returns 0 or a libuv
 * error (then no callback runs). */
typedef void (*sv_write_cb)(int status, void *data);
int sv_stream_write(uv_stream_t *stream, sv_msg *m, sv_write_cb cb, void *data);

#endif
