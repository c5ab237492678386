/* eng_util.c - the monotonic clock and rounding up (see eng_util.h). */
#include "eng_util.h"

#include <time.h>

double eng_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

size_t eng_round_up(size_t n, size_t a)
{
	return (n + a - 1) / a * a;
}
