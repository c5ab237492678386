/* proto_frame.c - the line framer of the control protocol (proto.h, design.md §2).
 *
 * What it is: bytes in, complete lines out through a callback. '\n' ends a line, one '\r'
 * before it is dropped, empty lines are skipped, and a line longer than PROTO_MAX_LINE is
 * refused as soon as its length is known to be too much, so a peer that never sends '\n'
 * costs at most PROTO_MAX_LINE + 1 bytes of buffer.
 * What it is not: it reads nothing (the caller owns the socket) and never looks inside a
 * line (proto_msg.c parses the JSON).
 */
#include "proto.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The most one line being assembled can need: PROTO_MAX_LINE bytes plus one, which is
 * either the NUL handed to the callback or the '\r' of a line exactly PROTO_MAX_LINE long
 * whose '\n' has not arrived yet. */
#define FRAME_CAP ((size_t)PROTO_MAX_LINE + 1)
#define FRAME_MIN 256            /* first allocation: most requests fit */
#define FRAME_BIG (64u << 10)    /* past this, a line is given all of FRAME_CAP at once */

void proto_framer_init(proto_framer *f)
{
	f->buf = NULL;
	f->len = 0;
	f->cap = 0;
	f->state = 0;
}

void proto_framer_free(proto_framer *f)
{
	free(f->buf);
	proto_framer_init(f);
}

/* Whether n raw bytes before a '\n' (or not ended yet), the last of them `last`, can still
 * be a line: at most PROTO_MAX_LINE once a trailing '\r' is dropped. */
static int frame_fits(size_t n, char last)
{
	return n <= PROTO_MAX_LINE || (n == FRAME_CAP && last == '\r');
}

/* Makes room for need bytes. Doubling up to FRAME_BIG; a line longer than that goes
 * straight to FRAME_CAP (one more copy instead of four), and a need within FRAME_CAP never
 * gets more, so an endless line stops growing the buffer at the limit. */
static int frame_grow(proto_framer *f, size_t need)
{
	if (need <= f->cap)
		return 0;
	size_t cap = f->cap ? f->cap : FRAME_MIN;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	if (need <= FRAME_CAP && cap > FRAME_BIG)
		cap = FRAME_CAP;
	char *p = realloc(f->buf, cap);
	if (p == NULL)
		return -1;
	f->buf = p;
	f->cap = cap;
	return 0;
}

/* p[0..n) is a raw line whose p[n] is the '\n' or spare room: drops a '\r', terminates it
 * and hands it over unless it is empty. Returns 1 when the callback asked to stop. */
static int frame_emit(char *p, size_t n, proto_line_cb cb, void *ud)
{
	if (n > 0 && p[n - 1] == '\r')
		n--;
	p[n] = '\0';
	if (n == 0)
		return 0;
	return cb(p, n, ud) != 0;
}

/* After a callback stopped: keeps the unread input (the buffer holds nothing else then). */
static int frame_keep(proto_framer *f, const char *rest, size_t n)
{
	if (n == 0)
		return 0;
	if (frame_grow(f, n) < 0)
		return -1;
	memcpy(f->buf, rest, n);
	f->len = n;
	f->state = 1;
	return 0;
}

/* Delivers the lines kept by an earlier stop. Returns 0 when only a partial line is left
 * (state back to 0, within the limit), 1 when a callback stopped again (data appended to
 * what is still kept), -1 on a line too long or no memory. */
static int frame_drain(proto_framer *f, const char *data, size_t n, proto_line_cb cb,
	void *ud)
{
	size_t off = 0;
	int stop = 0;
	for (;;) {
		char *p = f->buf + off;
		char *nl = memchr(p, '\n', f->len - off);
		if (nl == NULL)
			break;
		size_t raw = (size_t)(nl - p);
		if (!frame_fits(raw, raw ? p[raw - 1] : 0))
			return -1;
		off += raw + 1;
		if (frame_emit(p, raw, cb, ud)) {
			stop = 1;
			break;
		}
	}
	memmove(f->buf, f->buf + off, f->len - off);
	f->len -= off;
	if (stop) {
		if (n > SIZE_MAX - f->len || frame_grow(f, f->len + n) < 0)
			return -1;
		if (n > 0)
			memcpy(f->buf + f->len, data, n);
		f->len += n;
		f->state = f->len > 0;
		return 1;
	}
	f->state = 0;
	if (f->len > 0 && !frame_fits(f->len, f->buf[f->len - 1]))
		return -1;
	if (f->cap > FRAME_CAP) {
		/* what was kept may have grown it: back to the bound of one line */
		char *p = realloc(f->buf, FRAME_CAP);
		if (p == NULL)
			return -1;
		f->buf = p;
		f->cap = FRAME_CAP;
	}
	return 0;
}

int proto_framer_feed(proto_framer *f, const char *data, size_t n, proto_line_cb cb, void *ud)
{
	size_t off = 0;
	int rc = 0;

	if (f->state < 0)
		return -1;
	if (data == NULL)
		n = 0;
	if (f->state == 1) {
		rc = frame_drain(f, data, n, cb, ud);
		if (rc < 0)
			goto fail;
		if (rc > 0)
			return 1;
	}
	while (off < n) {
		const char *p = data + off;
		const char *nl = memchr(p, '\n', n - off);
		size_t seg = nl ? (size_t)(nl - p) : n - off;
		size_t raw = f->len + seg;
		/* the last raw byte of the line so far decides whether a '\r' can be dropped;
		 * seg and f->len are bounded by the checks, so raw cannot overflow */
		char last = seg ? p[seg - 1] : (f->len ? f->buf[f->len - 1] : 0);

		if (seg > FRAME_CAP || !frame_fits(raw, last))
			goto fail;
		/* a complete line needs room for its NUL unless a '\r' gives way to it */
		if (frame_grow(f, nl && raw < FRAME_CAP ? raw + 1 : raw) < 0)
			goto fail;
		if (seg > 0)
			memcpy(f->buf + f->len, p, seg);
		if (nl == NULL) {
			f->len = raw;
			break;
		}
		f->len = 0;
		off += seg + 1;
		if (frame_emit(f->buf, raw, cb, ud)) {
			if (frame_keep(f, data + off, n - off) < 0)
				goto fail;
			return 1;
		}
	}
	return 0;

fail:
	free(f->buf);
	f->buf = NULL;
	f->len = 0;
	f->cap = 0;
	f->state = -1;
	return -1;
}
