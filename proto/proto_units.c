/* proto_units.c - the sizes and numbers people write (see proto.h): shared by rematctl's
 * options and the job spec. No I/O. */
#include "proto.h"

#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
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


/* ---- the shortest text that reads back ---- */

/* "d.ddde+XX" of %.Ng: the decimal exponent after the 'e' (0 when there is none). */
static int text_exponent(const char *s)
{
	const char *e = strchr(s, 'e');
	return e ? atoi(e + 1) : 0;
}

char *proto_real_text(double v, char *buf, size_t len)
{
	if (!isfinite(v)) {
		snprintf(buf, len, "%g", v);
		return buf;
	}
	for (int n = 1; n <= 17; n++) {
		snprintf(buf, len, "%.*g", n, v);
		if (strtod(buf, NULL) != v || signbit(strtod(buf, NULL)) != signbit(v))
			continue;
		/* a whole number %g puts in exponent form at this precision ("1e+01") is
		 * written whole, as %.17g writes it, when that reads back too */
		int x = text_exponent(buf);
		if (strchr(buf, 'e') && x >= n && x < 17) {
			char whole[PROTO_NUM_LEN];
			snprintf(whole, sizeof whole, "%.*g", x + 1, v);
			if (strtod(whole, NULL) == v && !strchr(whole, 'e'))
				snprintf(buf, len, "%s", whole);
		}
		return buf;
	}
	snprintf(buf, len, "%.17g", v);
	return buf;
}

char *proto_f32_text(float v, char *buf, size_t len)
{
	if (!isfinite(v)) {
		snprintf(buf, len, "%g", (double)v);
		return buf;
	}
	for (int n = 1; n <= 9; n++) {
		snprintf(buf, len, "%.*g", n, (double)v);
		double d = strtod(buf, NULL);
		float a = strtof(buf, NULL), b = fabs(d) <= FLT_MAX ? (float)d : a; /* no UB cast */
		if (memcmp(&a, &v, sizeof v) == 0 && memcmp(&b, &v, sizeof v) == 0)
			return buf;
	}
	snprintf(buf, len, "%.9g", (double)v);
	return buf;
}

double proto_f32_double(float v)
{
	char buf[PROTO_NUM_LEN];
	return isfinite(v) ? strtod(proto_f32_text(v, buf, sizeof buf), NULL) : (double)v;
}

/* The length of a number token at s (JSON's characters of one), 0 when none starts there. */
static size_t number_token(const char *s, size_t left)
{
	size_t i = 0;
	if (!(s[0] == '-' || isdigit((unsigned char)s[0])))
		return 0;
	while (i < left && s[i] && (isdigit((unsigned char)s[i]) || strchr("+-.eE", s[i])))
		i++;
	return i;
}

char *proto_json_shorten(const char *text, size_t len)
{
	size_t reals = 0, o = 0;
	int in_str = 0;
	for (size_t i = 1; i < len; i++) /* each real has a '.' or an 'e' after a digit */
		reals += (text[i] == '.' || text[i] == 'e' || text[i] == 'E') &&
			 isdigit((unsigned char)text[i - 1]);
	/* a real's shortest text is never longer than 24 characters, and ".0" */
	char *out = malloc(len + 24 * reals + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < len;) {
		size_t n = in_str ? 0 : number_token(text + i, len - i);
		char tok[64], num[PROTO_NUM_LEN];
		if (n > 0 && n < sizeof tok) {
			memcpy(tok, text + i, n);
			tok[n] = '\0';
		}
		if (n > 0 && n < sizeof tok && strpbrk(tok, ".eE")) {
			proto_real_text(strtod(tok, NULL), num, sizeof num);
			size_t k = strlen(num);
			memcpy(out + o, num, k);
			o += k;
			if (!strpbrk(num, ".eni")) { /* still a real when read: "1.0" */
				memcpy(out + o, ".0", 2);
				o += 2;
			}
			i += n;
			continue;
		}
		if (n > 0) { /* an integer, as it was */
			memcpy(out + o, text + i, n);
			o += n;
			i += n;
			continue;
		}
		if (text[i] == '"')
			in_str = !in_str;
		else if (in_str && text[i] == '\\' && i + 1 < len)
			out[o++] = text[i++]; /* the escaped character is copied next */
		out[o++] = text[i++];
	}
	out[o] = '\0';
	return out;
}

char *proto_json_dumps(const json_t *j, size_t flags)
{
	size_t n = j ? json_dumpb(j, NULL, 0, flags) : 0;
	char *text = n ? malloc(n) : NULL, *out = NULL;
	if (text && json_dumpb(j, text, n, flags) == n)
		out = proto_json_shorten(text, n);
	free(text);
	return out;
}

/* n with a comma every three digits, as Python's {:,d}: "125,248". */
static char *grouped(long long n, char *buf, size_t len)
{
	char digits[32];
	int k = snprintf(digits, sizeof digits, "%lld", n < 0 ? 0 : n), o = 0;
	for (int i = 0; i < k && (size_t)o + 2 < len; i++) {
		if (i > 0 && (k - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = '\0';
	return buf;
}

char *proto_params_text(long long trainable, long long all, char *buf, size_t len)
{
	char t[40], a[40];
	snprintf(buf, len, "trainable params: %s || all params: %s || trainable%%: %.4f",
		grouped(trainable, t, sizeof t), grouped(all, a, sizeof a),
		all > 0 ? 100.0 * (double)trainable / (double)all : 0.0);
	return buf;
}
