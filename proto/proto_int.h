/* proto_int.h - helpers shared by the proto_*.c files, not part of the API (proto.h is).
 *
 * Descriptions go back to peers inside JSON strings, which must be valid UTF-8: every
 * description is written through proto__descf, which repairs what a quoted name or a
 * truncation may have broken.
 */
#ifndef PROTO_INT_H
#define PROTO_INT_H

#include <stddef.h>

/* Longest name quoted in a description, in bytes ("unknown argument '...'"). */
#define PROTO_QUOTE_MAX 64

/* printf into desc[0..len) (nothing when desc is NULL or len 0), then proto__utf8_fix. */
void proto__descf(char *desc, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Makes s valid UTF-8 in place: a sequence cut short at the very end (by a truncation) is
 * dropped, and any other byte that does not start a valid sequence becomes '?'. */
void proto__utf8_fix(char *s);

/* How many bytes of s to quote: at most PROTO_QUOTE_MAX, never splitting a UTF-8 sequence.
 * For "%.*s". */
int proto__clip(const char *s);

/* 1 when s[0..n) nests arrays and objects at most max deep, counted without parsing (strings
 * skipped), so that input far deeper than any parser should see is refused in one pass; 0
 * otherwise. On input that is not JSON the answer means nothing, but it is still given. */
int proto__depth_ok(const char *s, size_t n, int max);

#endif
