/* eng_util.h - small helpers that the engine's files would otherwise each write again: a
 * monotonic clock in milliseconds, and rounding a count up to a multiple. In base/, so
 * that every floor above can use them (libremat-core.a holds it).
 *
 * Not here: anything with state, anything that can fail.
 */
#ifndef ENG_UTIL_H
#define ENG_UTIL_H

#include <stddef.h>

/* Milliseconds on the monotonic clock (CLOCK_MONOTONIC), for durations: the origin is
 * arbitrary. */
double eng_now_ms(void);

/* n rounded up to a multiple of a (a > 0). */
size_t eng_round_up(size_t n, size_t a);

#endif
