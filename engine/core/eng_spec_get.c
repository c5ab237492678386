/* eng_spec_get.c - the typed readers of a job spec's JSON values (see eng_spec_int.h):
 * each checks the type and the range of one key and names it by its path in messages,
 * never quoting more of an outside key than SPEC_KEY_SHOW characters. Not here: what the
 * keys mean (eng_spec_parse.c).
 */
#include "eng_spec_int.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* "optim" + "lr" -> "optim.lr"; "" + "batch" -> "batch". Only for the spec's own keys (the
 * tables of eng_spec_parse.c). */
const char *es_field(char buf[SPEC_PATH_LEN], const char *prefix, const char *key)
{
	snprintf(buf, SPEC_PATH_LEN, "%s%s%s", prefix, *prefix ? "." : "", key);
	return buf;
}

/* Refuses any key of obj that is not in known (NULL-terminated); the message lists known. */
int es_check_keys(json_t *obj, const char *prefix, const char *const *known, eng_err *err)
{
	const char *key;
	json_t *v;
	json_object_foreach(obj, key, v)
	{
		int ok = 0;
		for (int i = 0; known[i] && !ok; i++)
			ok = strcmp(key, known[i]) == 0;
		if (ok)
			continue;
		char list[256] = "";
		size_t used = 0;
		for (int i = 0; known[i] && used < sizeof list; i++)
			used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
				i ? ", " : "", known[i]);
		return eng_errf(err, "unknown key '%s%s%.*s' (known: %s)", prefix,
			*prefix ? "." : "", SPEC_KEY_SHOW, key, list);
	}
	return 0;
}

/* The object under key, or NULL when absent (*out NULL, return 0); -1 when not an object. */
int es_get_object(json_t *obj, const char *key, json_t **out, eng_err *err)
{
	*out = json_object_get(obj, key);
	if (*out && !json_is_object(*out))
		return eng_errf(err, "'%s' must be an object", key);
	return 0;
}

/* An optional section of the spec: root[key] into *out, an object of only `keys`. 1 when
 * present, 0 when absent (*out NULL), -1. */
int es_get_section(json_t *root, const char *key, const char *const *keys, json_t **out,
	eng_err *err)
{
	if (es_get_object(root, key, out, err) < 0)
		return -1;
	if (!*out)
		return 0;
	return es_check_keys(*out, key, keys, err) < 0 ? -1 : 1;
}

/* What every typed reader does first: obj's key, or NULL when it is absent (*rc 0) or not
 * of type want (*rc -1, err naming it and what it must be; JSON_REAL stands for any
 * number). */
static json_t *typed(json_t *obj, const char *prefix, const char *key, json_type want,
	int *rc, eng_err *err)
{
	char p[SPEC_PATH_LEN];
	json_t *v = json_object_get(obj, key);
	*rc = 0;
	if (!v)
		return NULL;
	if (want == JSON_REAL ? json_is_number(v) : json_typeof(v) == want)
		return v;
	*rc = eng_errf(err, "'%s' must be %s", es_field(p, prefix, key), want == JSON_INTEGER ?
		"an integer" : want == JSON_REAL ? "a number" : "a string");
	return NULL;
}

/* Integer fields. Return 1 when present and set, 0 when absent (*out untouched), -1. */
int es_get_int64(json_t *obj, const char *prefix, const char *key, long long lo,
	long long hi, long long *out, eng_err *err)
{
	char p[SPEC_PATH_LEN];
	int rc;
	json_t *v = typed(obj, prefix, key, JSON_INTEGER, &rc, err);
	if (!v)
		return rc;
	long long x = (long long)json_integer_value(v);
	if (x < lo || x > hi)
		return eng_errf(err, "'%s' %lld out of range %lld..%lld", es_field(p, prefix, key),
			x, lo, hi);
	*out = x;
	return 1;
}

int es_get_int(json_t *obj, const char *prefix, const char *key, int lo, int hi, int *out,
	eng_err *err)
{
	long long x = 0;
	int rc = es_get_int64(obj, prefix, key, lo, hi, &x, err);
	if (rc == 1)
		*out = (int)x;
	return rc;
}

/* A number (integers accepted) stored as a float; the range is checked on the float, so a
 * beta1 that rounds to 1 or an eps that rounds to 0 is refused. hi = INFINITY: no bound. */
int es_get_float(json_t *obj, const char *prefix, const char *key, double lo, int lo_open,
	double hi, int hi_open, float *out, eng_err *err)
{
	char p[SPEC_PATH_LEN];
	int rc;
	json_t *v = typed(obj, prefix, key, JSON_REAL, &rc, err);
	if (!v)
		return rc;
	double d = json_number_value(v);
	/* jansson refuses overflowing reals and JSON has no NaN; checked anyway, and a double
	 * past FLT_MAX must not reach the (undefined) conversion to float */
	int bad = !isfinite(d) || fabs(d) > FLT_MAX;
	float f = bad ? 0.0f : (float)d;
	bad = bad || (lo_open ? f <= lo : f < lo);
	bad = bad || (isinf(hi) ? 0 : hi_open ? f >= hi : f > hi);
	if (!bad) {
		*out = f;
		return 1;
	}
	es_field(p, prefix, key);
	if (isinf(hi))
		return eng_errf(err, "'%s' %g out of range (must be finite and %s %g)", p, d,
			lo_open ? ">" : ">=", lo);
	return eng_errf(err, "'%s' %g out of range %c%g, %g%c", p, d, lo_open ? '(' : '[', lo,
		hi, hi_open ? ')' : ']');
}

/* A string copied into dst[cap]; empty strings are refused. 1 present, 0 absent, -1. */
int es_get_str(json_t *obj, const char *prefix, const char *key, char *dst, size_t cap,
	eng_err *err)
{
	char p[SPEC_PATH_LEN];
	int rc;
	json_t *v = typed(obj, prefix, key, JSON_STRING, &rc, err);
	if (!v)
		return rc;
	size_t n = json_string_length(v);
	if (n == 0)
		return eng_errf(err, "'%s' must not be empty", es_field(p, prefix, key));
	if (n >= cap)
		return eng_errf(err, "'%s' is too long (%zu bytes, at most %zu)",
			es_field(p, prefix, key), n, cap - 1);
	memcpy(dst, json_string_value(v), n + 1);
	return 1;
}

/* A string that must be one of names[] (NULL-terminated); *out is its index. */
int es_get_choice(json_t *v, const char *path, const char *const *names, int *out,
	eng_err *err)
{
	if (json_is_string(v)) {
		for (int i = 0; names[i]; i++) {
			if (strcmp(json_string_value(v), names[i]) == 0) {
				*out = i;
				return 0;
			}
		}
	}
	char list[128] = "";
	size_t used = 0;
	for (int i = 0; names[i] && used < sizeof list; i++)
		used += (size_t)snprintf(list + used, sizeof list - used, "%s\"%s\"",
			i == 0 ? "" : names[i + 1] ? ", " : " or ", names[i]);
	if (!json_is_string(v))
		return eng_errf(err, "'%s' must be %s", path, list);
	return eng_errf(err, "'%s' must be %s, not '%.*s'", path, list, SPEC_KEY_SHOW,
		json_string_value(v));
}

/* A real number in (lo, hi) into *out: 1 present, 0 absent, -1. */
int es_get_real(json_t *obj, const char *prefix, const char *key, double lo, double hi,
	double *out, eng_err *err)
{
	char p[SPEC_PATH_LEN];
	int rc;
	json_t *v = typed(obj, prefix, key, JSON_REAL, &rc, err);
	if (!v)
		return rc;
	double d = json_number_value(v);
	if (!(d > lo && d < hi))
		return eng_errf(err, "'%s' %g out of range (%g, %g)", es_field(p, prefix, key), d,
			lo, hi);
	*out = d;
	return 1;
}

/* A list of min..max strings of 1..width-1 bytes each into out (rows of width bytes),
 * their count into *n; `what` says what each must be, in messages about path. */
int es_get_str_list(json_t *list, const char *path, const char *what, int min, int max,
	size_t width, char *out, int *n, eng_err *err)
{
	json_t *v;
	size_t i;
	if (!json_is_array(list) || json_array_size(list) < (size_t)min ||
		json_array_size(list) > (size_t)max)
		return eng_errf(err, "'%s' must be a list of %d to %d of: %s", path, min, max, what);
	json_array_foreach(list, i, v) {
		if (!json_is_string(v) || json_string_length(v) == 0 ||
			json_string_length(v) >= width)
			return eng_errf(err, "'%s[%zu]' must be a %s (1 to %zu characters)", path, i,
				what, width - 1);
		snprintf(out + i * width, width, "%s", json_string_value(v));
	}
	*n = (int)json_array_size(list);
	return 0;
}
