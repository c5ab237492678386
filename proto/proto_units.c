/* proto_units.c - the sizes and numbers people write (see proto.h): shared by rematctl's
 * options and the job spec. No I/O. */
#include "proto.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SIZE_MAX_BYTES 9.2e18 /* a little under 2^63: what a JSON integer here can hold */

/* Reads a plain decimal number at the start of s ("12", "1.5", ".5", "1e9", "2.5E-3"):
 * no sign, no hex, no inf or nan, which strtod alone would take. Returns the characters
 * used (0 when there is no number) and the value. */
size_t proto_number_scan(const char *s, double *v)
{
	char tmp[64];
	size_t i = 0, digits = 0;

	while (isdigit((unsigned char)s[i])) {
		i++;
		digits++;
	}
	if (s[i] == '.') {
		i++;
		while (isdigit((unsigned char)s[i])) {
			i++;
			digits++;
		}
	}
	if (digits == 0)
		return 0;
	/* an exponent only when digits follow, so "1EiB" is a number and a unit */
	if (s[i] == 'e' || s[i] == 'E') {
		size_t j = i + 1;
		if (s[j] == '+' || s[j] == '-')
			j++;
		if (isdigit((unsigned char)s[j])) {
			while (isdigit((unsigned char)s[j]))
				j++;
			i = j;
		}
	}
	if (i >= sizeof tmp)
		return 0;
	memcpy(tmp, s, i);
	tmp[i] = '\0';
	*v = strtod(tmp, NULL);
	return i;
}

int proto_size_parse(const char *text, long long *bytes)
{
	static const struct {
		const char *name;
		double mult;
	} unit[] = {
	    {"", 1.0},
	    {"b", 1.0},
	    {"k", 1024.0},
	    {"kib", 1024.0},
	    {"kb", 1e3},
	    {"m", 1048576.0},
	    {"mib", 1048576.0},
	    {"mb", 1e6},
	    {"g", 1073741824.0},
	    {"gib", 1073741824.0},
	    {"gb", 1e9},
	    {"t", 1099511627776.0},
	    {"tib", 1099511627776.0},
	    {"tb", 1e12},
	};
	double v = 0;
	size_t n = proto_number_scan(text, &v);

	if (n == 0 || !isfinite(v))
		return -1;
	const char *u = text + n;
	if (*u == ' ')
		u++;
	for (size_t i = 0; i < sizeof unit / sizeof unit[0]; i++) {
		if (strcasecmp(u, unit[i].name) != 0)
			continue;
		if (u != text + n && !*u)
			return -1; /* "12 " */
		double b = v * unit[i].mult;
		if (!isfinite(b) || b > SIZE_MAX_BYTES)
			return -1;
		*bytes = llround(b);
		return 0;
	}
	return -1;
}

