/* cli_fmt.c - rematctl's pure helpers (see cli_fmt.h): sizes, durations, SEL=MODE
 * arguments, spec paths, the socket path, tables, and defensive reads of server JSON.
 *
 * Not here: any I/O (the caller prints what these return) and anything that needs a
 * connection. Linked alone into the unit test runner, so no main() and no globals.
 */
#include "cli_fmt.h"
#include "proto.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>
#include <unistd.h>


char *cli_size_format(double bytes, char *buf, size_t len)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	const int nunit = (int)(sizeof unit / sizeof unit[0]);
	double v = fabs(bytes);
	int u = 0;

	if (!isfinite(bytes)) {
		snprintf(buf, len, "-");
		return buf;
	}
	while (v >= 1024.0 && u < nunit - 1) {
		v /= 1024.0;
		u++;
	}
	/* 1023.97 KiB would print as "1024.0 KiB": move up a unit when rounding gets there */
	if (u > 0 && v >= 1023.95 && u < nunit - 1) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%s%.0f B", bytes < 0 ? "-" : "", v);
	else
		snprintf(buf, len, "%s%.1f %s", bytes < 0 ? "-" : "", v, unit[u]);
	return buf;
}

char *cli_mib_format(double bytes, char *buf, size_t len)
{
	if (isfinite(bytes))
		snprintf(buf, len, "%.1f MiB", bytes / (1024.0 * 1024.0));
	else
		snprintf(buf, len, "-");
	return buf;
}

char *cli_flops_format(double flops, char *buf, size_t len)
{
	static const char *const prefix[] = {"", "k", "M", "G", "T", "P", "E"};
	const int nprefix = (int)(sizeof prefix / sizeof prefix[0]);
	double v = fabs(flops);
	int u = 0;

	if (!isfinite(flops)) {
		snprintf(buf, len, "-");
		return buf;
	}
	while (v >= 1000.0 && u < nprefix - 1) {
		v /= 1000.0;
		u++;
	}
	if (u > 0 && v >= 999.95 && u < nprefix - 1) {
		v /= 1000.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%s%.0f FLOP", flops < 0 ? "-" : "", v);
	else
		snprintf(buf, len, "%s%.1f %sFLOP", flops < 0 ? "-" : "", v, prefix[u]);
	return buf;
}

int cli_state_final(const char *s)
{
	return proto_job_state_final(proto_job_state_find(s));
}

char *cli_duration_format(double s, char *buf, size_t len)
{
	long long t = s >= 0 && s < 1e15 ? (long long)(s + 0.5) : 0;
	if (!(s >= 0) || s >= 1e15)
		snprintf(buf, len, "-");
	else if (s < 1)
		snprintf(buf, len, "%.0f ms", s * 1e3);
	else if (s < 60)
		snprintf(buf, len, "%.1f s", s);
	else if (t < 3600)
		snprintf(buf, len, "%lldm%02llds", t / 60, t % 60);
	else if (t < 86400)
		snprintf(buf, len, "%lldh%02lldm", t / 3600, t % 3600 / 60);
	else
		snprintf(buf, len, "%lldd%02lldh", t / 86400, t % 86400 / 3600);
	return buf;
}

int cli_seconds_parse(const char *text, double *seconds)
{
	double v = 0, mult;
	size_t n = proto_number_scan(text, &v);

	if (n == 0)
		return -1;
	const char *u = text + n;
	if (!*u || strcmp(u, "s") == 0)
		mult = 1.0;
	else if (strcmp(u, "ms") == 0)
		mult = 1e-3;
	else if (strcmp(u, "m") == 0)
		mult = 60.0;
	else if (strcmp(u, "h") == 0)
		mult = 3600.0;
	else
		return -1;
	v *= mult;
	/* a day at most: poll() takes an int of milliseconds */
	if (!isfinite(v) || v <= 0 || v > 86400.0)
		return -1;
	*seconds = v;
	return 0;
}

/* Adds one item of a policy's text (proto_policy_parse's fn) to the sections object ud, a
 * later one moving to the end. */
static int section_add(void *ud, const char *sel, const char *mode, char *desc,
	size_t desclen)
{
	json_t *obj = ud, *m;
	char hint[64];
	/* a mode's name is known here: a typo is a usage error, said before connecting */
	if (proto_mode_find(mode) < 0) {
		snprintf(desc, desclen, "unknown mode '%.64s'%s", mode,
			proto_mode_hint(mode, hint, sizeof hint));
		return -1;
	}
	m = json_string(mode);
	/* delete first: re-adding appends, so the later setting comes later in order */
	json_object_del(obj, sel);
	if (!m || json_object_set_new(obj, sel, m) < 0) {
		snprintf(desc, desclen, "'%.64s' is not UTF-8", sel);
		return -1;
	}
	return 0;
}

int cli_sections_parse(char *const *args, int n, json_t **sections, char *err, size_t errlen)
{
	char desc[PROTO_DESC_LEN];
	json_t *obj = json_object();
	if (!obj) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* each word a policy's text, as remat-train reads one: a=x,b=y as printed */
	for (int i = 0; i < n; i++) {
		if (proto_policy_parse(args[i], section_add, obj, desc, sizeof desc) < 0) {
			snprintf(err, errlen, "bad section setting '%.64s': %s", args[i], desc);
			json_decref(obj);
			return -1;
		}
	}
	*sections = obj;
	return 0;
}

/* Appends "/" and a component of n bytes to out (length *len). */
static int path_push(char *out, size_t outlen, size_t *len, const char *comp, size_t n)
{
	if (*len + 1 + n + 1 > outlen)
		return -1;
	if (*len == 0 || out[*len - 1] != '/')
		out[(*len)++] = '/';
	memcpy(out + *len, comp, n);
	*len += n;
	out[*len] = '\0';
	return 0;
}

int cli_path_absolute(const char *cwd, const char *path, char *out, size_t outlen)
{
	size_t len = 0;
	int named = 0; /* a named component came: later ".." stay as written */

	if (outlen == 0)
		return -1;
	if (path[0] == '/') {
		if (strlen(path) + 1 > outlen)
			return -1;
		strcpy(out, path);
		return 0;
	}
	out[0] = '\0';
	/* cwd itself, its repeated and trailing slashes dropped */
	for (const char *p = cwd; *p;) {
		while (*p == '/')
			p++;
		size_t n = strcspn(p, "/");
		if (n && path_push(out, outlen, &len, p, n) < 0)
			return -1;
		p += n;
	}
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 0 || (n == 1 && p[0] == '.')) {
			/* empty or ".": nothing */
		} else if (n == 2 && p[0] == '.' && p[1] == '.' && !named) {
			char *slash = strrchr(out, '/');
			len = slash ? (size_t)(slash - out) : 0;
			out[len] = '\0';
		} else {
			if (path_push(out, outlen, &len, p, n) < 0)
				return -1;
			named = 1;
		}
		p += n;
		while (*p == '/')
			p++;
	}
	if (len == 0) {
		if (outlen < 2)
			return -1;
		strcpy(out, "/");
	}
	return 0;
}

int cli_spec_dir(const char *cwd, const char *spec_path, char *out, size_t outlen)
{
	if (strcmp(spec_path, "-") == 0) {
		if (strlen(cwd) >= outlen)
			return -1;
		strcpy(out, cwd);
		return 0;
	}
	if (cli_path_absolute(cwd, spec_path, out, outlen) < 0)
		return -1;
	char *slash = strrchr(out, '/');
	if (slash == out)
		out[1] = '\0'; /* a spec in / */
	else if (slash)
		*slash = '\0';
	return 0;
}

char *cli_spec_paths_text(const json_t *spec)
{
	size_t cap = 1, o = 0;
	for (size_t i = 0; i < PROTO_SPEC_PATHS; i++) {
		const char *const *field = proto_spec_paths[i];
		const char *p = cli_jstr(cli_jobj(spec, field[0]), field[1]);
		cap += p ? strlen(field[0]) + strlen(field[1]) + strlen(p) + 4 : 0;
	}
	char *text = malloc(cap);
	if (!text)
		return NULL;
	text[0] = '\0';
	for (size_t i = 0; i < PROTO_SPEC_PATHS; i++) {
		const char *const *field = proto_spec_paths[i];
		const char *p = cli_jstr(cli_jobj(spec, field[0]), field[1]);
		if (p && *p)
			o += (size_t)snprintf(text + o, cap - o, "%s.%s: %s\n", field[0], field[1],
				p);
	}
	return text;
}

int cli_spec_absolutize(json_t *spec, const char *cwd, char *err, size_t errlen)
{
	char buf[CLI_PATH_MAX];

	if (!json_is_object(spec)) {
		snprintf(err, errlen, "a job spec must be a JSON object");
		return -1;
	}
	for (size_t i = 0; i < PROTO_SPEC_PATHS; i++) {
		const char *const *field = proto_spec_paths[i];
		json_t *parent = json_object_get(spec, field[0]);
		json_t *v = json_is_object(parent) ? json_object_get(parent, field[1]) : NULL;
		const char *p = json_is_string(v) ? json_string_value(v) : NULL;
		if (!p || !*p || p[0] == '/')
			continue;
		if (cli_path_absolute(cwd, p, buf, sizeof buf) < 0) {
			snprintf(err, errlen,
				 "'%s.%s' is too long once made absolute (at most %d "
				 "bytes)",
				 field[0], field[1], CLI_PATH_MAX - 1);
			return -1;
		}
		if (json_string_set(v, buf) < 0) {
			snprintf(err, errlen, "'%s.%s' is not valid UTF-8", field[0],
				 field[1]);
			return -1;
		}
	}
	return 0;
}

int cli_socket_path_in(const char *option, const char *remat_socket, const char *xdg_runtime,
		       const char *system_socket, char *out, size_t outlen, char *err,
		       size_t errlen)
{
	const size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
	int given = (option && *option) || (remat_socket && *remat_socket);
	int n;

	if (option && *option)
		n = snprintf(out, outlen, "%s", option);
	else if (remat_socket && *remat_socket)
		n = snprintf(out, outlen, "%s", remat_socket);
	else if (xdg_runtime && *xdg_runtime)
		n = snprintf(out, outlen, "%s/remat/rematd.sock", xdg_runtime);
	else
		n = snprintf(out, outlen, "%s", system_socket);
	/* A user's own daemon first; with none, the system's (systemd's rematd.socket), which
	 * members of its group reach from a login session that has XDG_RUNTIME_DIR set. */
	if (!given && xdg_runtime && *xdg_runtime && n > 0 && (size_t)n < outlen &&
		access(out, F_OK) != 0 && access(system_socket, F_OK) == 0)
		n = snprintf(out, outlen, "%s", system_socket);
	if (n < 0 || (size_t)n >= outlen || (size_t)n > max) {
		snprintf(err, errlen, "socket path '%.80s%s' is too long (%d bytes, at most %zu)",
			 out, n > 80 ? "..." : "", n, max);
		return -1;
	}
	return 0;
}

int cli_socket_path(const char *option, const char *remat_socket, const char *xdg_runtime,
		    char *out, size_t outlen, char *err, size_t errlen)
{
	return cli_socket_path_in(option, remat_socket, xdg_runtime, CLI_SYSTEM_SOCKET, out,
		outlen, err, errlen);
}

/* ---- tables ---- */

void cli_table_init(cli_table *t, int ncol, const char *const *head, const char *align)
{
	memset(t, 0, sizeof *t);
	if (ncol < 1)
		ncol = 1;
	if (ncol > CLI_TABLE_MAXCOL)
		ncol = CLI_TABLE_MAXCOL;
	t->ncol = ncol;
	size_t na = align ? strlen(align) : 0;
	for (int c = 0; c < ncol; c++) {
		t->head[c] = head[c];
		t->align[c] = ((size_t)c < na && align[c] == 'r') ? 'r' : 'l';
	}
}

int cli_table_add(cli_table *t, ...)
{
	char buf[1024];
	va_list ap;
	int rc = -1;

	if (t->nrow == t->caprow) {
		int cap = t->caprow ? 2 * t->caprow : 16;
		char **cell = realloc(t->cell, (size_t)cap * (size_t)t->ncol * sizeof *cell);
		if (!cell)
			return -1;
		t->cell = cell;
		t->caprow = cap;
	}
	char **row = t->cell + (size_t)t->nrow * (size_t)t->ncol;
	va_start(ap, t);
	for (int c = 0; c < t->ncol; c++) {
		const char *s = va_arg(ap, const char *);
		row[c] = strdup(cli_str_clean(s ? s : "-", buf, sizeof buf));
		if (!row[c]) {
			while (c-- > 0)
				free(row[c]);
			goto out;
		}
	}
	t->nrow++;
	rc = 0;
out:
	va_end(ap);
	return rc;
}

/* Columns a string takes on a terminal: its UTF-8 code points (wide characters count one,
 * which is what job names and numbers need). */
static size_t text_width(const char *s)
{
	size_t w = 0;
	for (; *s; s++)
		if (((unsigned char)*s & 0xC0) != 0x80)
			w++;
	return w;
}

char *cli_table_render(const cli_table *t)
{
	size_t width[CLI_TABLE_MAXCOL] = {0};
	size_t total = 0;
	char *out = NULL, *p;

	for (int c = 0; c < t->ncol; c++) {
		width[c] = text_width(t->head[c]);
		for (int r = 0; r < t->nrow; r++) {
			size_t w = text_width(t->cell[(size_t)r * (size_t)t->ncol + (size_t)c]);
			if (w > width[c])
				width[c] = w;
		}
	}
	/* bytes: at most width + the cell's extra UTF-8 bytes + 2 per column, per line */
	for (int r = -1; r < t->nrow; r++) {
		for (int c = 0; c < t->ncol; c++) {
			const char *s =
			    r < 0 ? t->head[c] : t->cell[(size_t)r * (size_t)t->ncol + (size_t)c];
			total += width[c] + strlen(s) + 2;
		}
		total += 1;
	}
	out = malloc(total + 1);
	if (!out)
		return NULL;
	p = out;
	for (int r = -1; r < t->nrow; r++) {
		char *line = p;
		for (int c = 0; c < t->ncol; c++) {
			const char *s =
			    r < 0 ? t->head[c] : t->cell[(size_t)r * (size_t)t->ncol + (size_t)c];
			size_t pad = width[c] - text_width(s), n = strlen(s);
			if (c > 0) {
				memcpy(p, "  ", 2);
				p += 2;
			}
			if (t->align[c] == 'r') {
				memset(p, ' ', pad);
				p += pad;
			}
			memcpy(p, s, n);
			p += n;
			if (t->align[c] == 'l') {
				memset(p, ' ', pad);
				p += pad;
			}
		}
		while (p > line && p[-1] == ' ')
			p--;
		*p++ = '\n';
	}
	*p = '\0';
	return out;
}

void cli_table_free(cli_table *t)
{
	for (size_t i = 0; i < (size_t)t->nrow * (size_t)t->ncol; i++)
		free(t->cell[i]);
	free(t->cell);
	t->cell = NULL;
	t->nrow = t->caprow = 0;
}

/* ---- reading server JSON ---- */

char *cli_str_clean(const char *text, char *out, size_t outlen)
{
	size_t o = 0;

	if (outlen == 0)
		return out;
	for (const unsigned char *s = (const unsigned char *)text; *s && o + 1 < outlen; s++) {
		unsigned char ch = *s;
		if (ch < 0x20 || ch == 0x7F) {
			out[o++] = '?';
		} else if (ch == 0xC2 && s[1] >= 0x80 && s[1] <= 0x9F) {
			/* C1 controls (U+0080..U+009F): some terminals obey them as escapes */
			out[o++] = '?';
			s++;
		} else {
			/* never cut a UTF-8 sequence in two */
			size_t n = ch < 0x80	? 1
				   : ch >= 0xF0 ? 4
				   : ch >= 0xE0 ? 3
				   : ch >= 0xC0 ? 2
						: 1;
			size_t k = 0;
			while (k < n && s[k])
				k++;
			if (o + k + 1 > outlen)
				break;
			memcpy(out + o, s, k);
			o += k;
			s += k - 1;
		}
	}
	out[o] = '\0';
	return out;
}

const char *cli_jstr(const json_t *obj, const char *key)
{
	json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
	return json_is_string(v) ? json_string_value(v) : NULL;
}

int cli_jnum(const json_t *obj, const char *key, double *v)
{
	json_t *x = json_is_object(obj) ? json_object_get(obj, key) : NULL;
	if (!json_is_number(x))
		return 0;
	*v = json_number_value(x);
	return 1;
}

json_t *cli_jobj(const json_t *obj, const char *key)
{
	json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
	return json_is_object(v) ? v : NULL;
}

char *cli_policy_format(const json_t *policy, char *buf, size_t len)
{
	const char *key;
	json_t *v;
	size_t o = 0;
	char item[256];

	if (len == 0)
		return buf;
	if (!json_is_object(policy)) {
		snprintf(buf, len, "-");
		return buf;
	}
	buf[0] = '\0';
	json_object_foreach((json_t *)policy, key, v)
	{
		char k[128], m[64];
		cli_str_clean(key, k, sizeof k);
		cli_str_clean(json_is_string(v) ? json_string_value(v) : "?", m, sizeof m);
		int n = snprintf(item, sizeof item, "%s%s=%s", o ? "," : "", k, m);
		if (n < 0 || o + (size_t)n + 1 > len) {
			/* cut: end with "..." where it fits */
			size_t at = len > 4 ? len - 4 : 0;
			if (o < at)
				at = o;
			snprintf(buf + at, len - at, "...");
			return buf;
		}
		memcpy(buf + o, item, (size_t)n + 1);
		o += (size_t)n;
	}
	if (o == 0)
		snprintf(buf, len, "-");
	return buf;
}

/* ---- values ---- */

char *cli_value_format(const json_t *v, char *buf, size_t len)
{
	char num[PROTO_NUM_LEN];
	if (json_is_real(v)) {
		cli_str_clean(proto_real_text(json_real_value(v), num, sizeof num), buf, len);
	} else if (json_is_integer(v)) {
		snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	} else if (json_is_string(v)) {
		cli_str_clean(json_string_value(v), buf, len);
	} else {
		char *t = v ? cli_json_text(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
		cli_str_clean(t ? t : "-", buf, len);
		free(t);
	}
	return buf;
}

char *cli_json_text(const json_t *j, size_t flags)
{
	return proto_json_dumps(j, flags);
}

/* ---- remat costs, and the sections' workspace ---- */

double cli_costs_noise(const json_t *sections)
{
	double noise = 0, v;
	size_t i;
	json_t *s, *cell;
	const char *mode;
	json_array_foreach(sections, i, s) {
		json_object_foreach(cli_jobj(s, "modes"), mode, cell) {
			if (cli_jnum(cell, "added_ms", &v) && isfinite(v) && -v > noise)
				noise = -v;
		}
	}
	return noise;
}

char *cli_added_ms_format(double added_ms, double noise, char *buf, size_t len)
{
	if (!isfinite(added_ms))
		snprintf(buf, len, "-");
	else if (added_ms < 0 || (added_ms > 0 && added_ms <= noise))
		snprintf(buf, len, "~0 (noise)");
	else
		snprintf(buf, len, "%+.2f", added_ms);
	return buf;
}

double cli_block_workspace(const json_t *sections, double *head)
{
	double blocks = 0, h = 0, v;
	size_t i;
	json_t *s;
	json_array_foreach(sections, i, s) {
		const char *name = cli_jstr(s, "name");
		if (!cli_jnum(s, "workspace_bytes", &v) || !isfinite(v))
			continue;
		if (name && strcmp(name, "head") == 0)
			h += v;
		else if (v > blocks)
			blocks = v;
	}
	if (head)
		*head = h;
	return blocks;
}

/* ---- what trains ---- */

char *cli_model_text(const json_t *ret, char *buf, size_t len)
{
	double all, trainable;
	char arch[32], params[160];
	if (!cli_jnum(ret, "params", &all) || !cli_jnum(ret, "trainable_params", &trainable))
		return NULL;
	cli_str_clean(cli_jstr(ret, "arch") ? cli_jstr(ret, "arch") : "-", arch, sizeof arch);
	int n = snprintf(buf, len, "%s, %s", arch,
		proto_params_text((long long)trainable, (long long)all, params, sizeof params));
	json_t *q = json_object_get(ret, "quantized");
	double bytes, w;
	char type[16], size[32];
	if (q && cli_jnum(q, "bytes", &bytes) && cli_jnum(q, "weights", &w) && n >= 0 &&
		(size_t)n < len) /* a 4-bit base */
		snprintf(buf + n, len - (size_t)n, "; 4-bit base (%s): %.1fM weights in %s",
			cli_str_clean(cli_jstr(q, "type") ? cli_jstr(q, "type") : "-", type,
				sizeof type), w / 1e6, cli_size_format(bytes, size, sizeof size));
	return buf;
}

/* ---- the memory controller ---- */

int cli_auto_budget(const json_t *st, double *budget)
{
	json_t *a = json_is_object(st) ? json_object_get(st, "auto") : NULL;
	if (a) /* the controller's own object: null when none is on */
		return cli_jnum(a, "budget_bytes", budget) && *budget > 0;
	return cli_jnum(st, "auto_budget_bytes", budget) && *budget > 0;
}

/* Where the budget came from, as a person names it (brief: one word). */
static const char *auto_source(const char *src, int brief, char *buf, size_t len)
{
	if (!src)
		return NULL;
	if (strcmp(src, "size") == 0)
		return brief ? "size" : "a size";
	if (strcmp(src, "cgroup") == 0)
		return brief ? "cgroup" : "cgroup memory.max";
	if (strcmp(src, "device") == 0)
		return brief ? "device" : "the device's free memory";
	return cli_str_clean(src, buf, len); /* a newer server's: as it is */
}

char *cli_auto_text(const json_t *st, int brief, char *buf, size_t len)
{
	char b[CLI_SIZE_LEN], l[CLI_SIZE_LEN], s[64];
	double budget, least;
	json_t *a = cli_jobj(st, "auto");
	int known = cli_auto_budget(st, &budget);
	if (!known && !a)
		return NULL;
	/* a controller whose bytes are read by the worker (cgroup, device) of a job without
	 * one: on, its size not known here */
	if (!known)
		snprintf(b, sizeof b, "%s", brief ? "?" : "not known until it runs");
	else
		cli_mib_format(budget, b, sizeof b);
	const char *src = auto_source(cli_jstr(a, "source"), brief, s, sizeof s);
	int pinned = json_is_true(json_object_get(a, "pinned"));
	int least_known = cli_jnum(a, "least_bytes", &least);
	snprintf(buf, len, "%s (%s%s%s%s%s)", b, src ? src : "", src ? "; " : "", pinned ? (brief ? "remat set's policy held" :
		"holding the policy set by remat set") : (brief ? "the controller's policy" :
		"the controller picks the policy"), least_known ? "; least " : "",
		least_known ? cli_mib_format(least, l, sizeof l) : "");
	return buf;
}

char *cli_pool_text(const json_t *st, int brief, char *buf, size_t len)
{
	char a[CLI_SIZE_LEN], b[CLI_SIZE_LEN], c[CLI_SIZE_LEN];
	double share = 0, least = 0, off = 0, priority = 1;
	json_t *pm = cli_jobj(st, "memory");
	if (!pm)
		return NULL;
	cli_jnum(pm, "share_bytes", &share);
	cli_jnum(pm, "least_bytes", &least);
	cli_jnum(pm, "off_bytes", &off);
	cli_jnum(pm, "priority", &priority);
	snprintf(buf, len, "%s%s (least %s, off %s, priority %.0f%s)", share > 0 ?
		cli_mib_format(share, a, sizeof a) : "none", brief ? "" : " of the pool",
		cli_mib_format(least, b, sizeof b), cli_mib_format(off, c, sizeof c), priority,
		json_is_true(json_object_get(pm, "own")) ? brief ? "; its own" :
		"; its own budget, reserved" : "");
	return buf;
}
