/* cli_logs.c - rematctl logs and plot (see cli_logs.h). */
#include "cli_logs.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_fmt.h"
#include "cli_plot.h"
#include "eng_fs.h"

/* One page of job-metrics from *offset: CLI_OK with *ret (lines, next, size, state). */
static int page(cli_conn *c, const cli_args *a, long long offset, json_t **ret)
{
	json_t *req = json_pack("{s:I}", "offset", (json_int_t)offset);
	if (a->job)
		json_object_set_new(req, "job", json_string(a->job));
	int rc = cli_conn_call(c, "job-metrics", req, a->timeout_ms > 0 ? a->timeout_ms
									: CLI_TIMEOUT_MS,
		ret, NULL, NULL);
	json_decref(req);
	return rc;
}

static int failed(const cli_conn *c, int rc)
{
	if (rc == CLI_EINTR)
		return CLI_EXIT_OK;
	fprintf(stderr, CLI_NAME ": %s\n", c->err);
	return rc == CLI_EREPLY ? CLI_EXIT_FAIL : CLI_EXIT_CONN;
}

/* Waits s seconds, or less when a signal comes (the caller's stop flag ends the loop). */
static void pause_s(double s)
{
	poll(NULL, 0, (int)(s * 1000));
}

int cli_logs_run(cli_conn *c, const cli_args *a)
{
	long long off = 0;
	long shown = 0;
	for (;;) {
		json_t *ret = NULL, *line;
		size_t i;
		int rc = page(c, a, off, &ret);
		if (rc != CLI_OK)
			return failed(c, rc);
		json_array_foreach(json_object_get(ret, "lines"), i, line) {
			char *text = cli_json_text(line, JSON_COMPACT | JSON_PRESERVE_ORDER);
			printf("%s\n", text ? text : "{}");
			free(text);
			if (a->count > 0 && ++shown >= a->count)
				break;
		}
		long long next = json_integer_value(json_object_get(ret, "next"));
		long long size = json_integer_value(json_object_get(ret, "size"));
		int ended = cli_state_final(cli_jstr(ret, "state"));
		json_decref(ret);
		if (fflush(stdout) != 0 || (a->count > 0 && shown >= a->count))
			return CLI_EXIT_OK;
		if (next < size && next > off) { /* more is there already */
			off = next;
			continue;
		}
		off = next;
		if (!(a->given & CLI_OPT_FOLLOW) || ended || (c->stop && *c->stop))
			return CLI_EXIT_OK;
		pause_s(a->interval > 0 ? a->interval : CLI_LOGS_POLL_S);
		if (c->stop && *c->stop)
			return CLI_EXIT_OK;
	}
}

/* ---- plot ---- */

/* A growing series of points. */
typedef struct pts {
	double *x, *y;
	size_t n, cap;
} pts;

static int pts_add(pts *p, double x, double y)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 256;
		double *nx = realloc(p->x, cap * sizeof *nx);
		if (!nx)
			return -1;
		p->x = nx;
		double *ny = realloc(p->y, cap * sizeof *ny);
		if (!ny)
			return -1;
		p->y = ny;
		p->cap = cap;
	}
	p->x[p->n] = x;
	p->y[p->n++] = y;
	return 0;
}

/* The curves of a log: what each plot draws, by its key in the lines. */
enum { P_LOSS, P_VAL, P_SPEED, P_PEAK, P_RSS, P_N };
static const struct {
	const char *key, *name;
	double scale;
} curves[P_N] = {
	[P_LOSS] = {"loss", "train loss", 1},
	[P_VAL] = {"val_loss", "val loss", 1},
	[P_SPEED] = {"tokens_per_s", "tokens/s", 1},
	[P_PEAK] = {"peak_bytes", "tracked peak MiB", 1.0 / 1048576.0},
	/* the process's own peak in each step (device cpu): what a budget counts */
	[P_RSS] = {"rss_peak_bytes", "process peak MiB", 1.0 / 1048576.0},
};

/* The image's markers: where a setting changed, as the log shows it. */
typedef struct marks {
	cli_plot_mark m[CLI_PLOT_MAX_MARKS];
	char label[CLI_PLOT_MAX_MARKS][48]; /* m[i].label's text */
	int n;
	double last;	 /* the step of the last step line, -1 before the first */
} marks;

/* A mark at step x (left out once there are CLI_PLOT_MAX_MARKS). */
static void mark_add(marks *mk, double x, const char *label)
{
	if (mk->n == CLI_PLOT_MAX_MARKS)
		return;
	snprintf(mk->label[mk->n], sizeof mk->label[mk->n], "%s", label);
	mk->m[mk->n] = (cli_plot_mark){x, mk->label[mk->n]};
	mk->n++;
}

/* "what k=v, k=v" of an object's members into buf (len bytes), "..." at the end when they
 * do not all fit. */
static void label_of(const char *what, const json_t *o, char *buf, size_t len)
{
	const char *k;
	json_t *v;
	size_t n = (size_t)snprintf(buf, len, "%s", what);
	json_object_foreach((json_t *)o, k, v) {
		char val[32];
		if (json_is_string(v))
			snprintf(val, sizeof val, "%s", json_string_value(v));
		else
			snprintf(val, sizeof val, "%g", json_number_value(v));
		n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%s=%s",
			n > strlen(what) ? ", " : " ", k, val);
		if (n >= len) {
			memcpy(buf + len - 4, "...", 4);
			return;
		}
	}
}

/* What a line of the log says changed, at step x: a step at or before the last step line
 * is a resume (the marks after it go, as its lines do); REMAT_APPLIED and HPARAMS_APPLIED
 * lines (the worker's, where a policy or job-set took effect) name what they set. Other
 * lines (evaluations, samples) mark nothing. */
static void marks_line(marks *mk, const json_t *line, double x)
{
	const char *ev = json_string_value(json_object_get(line, "event"));
	char label[48];
	if (ev ? strcmp(ev, "REMAT_APPLIED") && strcmp(ev, "HPARAMS_APPLIED")
	       : !json_is_number(json_object_get(line, "loss")))
		return; /* an evaluation, a sample */
	if (mk->last >= 0 && x <= mk->last) {
		while (mk->n && mk->m[mk->n - 1].x >= x)
			mk->n--;
		mark_add(mk, x, "resumed");
	}
	mk->last = ev ? x - 1 : x; /* a change names the first step it applies to */
	if (ev && strcmp(ev, "REMAT_APPLIED") == 0)
		label_of("policy", json_object_get(line, "policy"), label, sizeof label);
	else if (ev && strcmp(ev, "HPARAMS_APPLIED") == 0)
		label_of("set", json_object_get(line, "set"), label, sizeof label);
	else
		return;
	mark_add(mk, x, label);
}

/* Every line of the job's log into the curves and the marks; CLI_OK or a connection's
 * failure. */
static int fetch_all(cli_conn *c, const cli_args *a, pts p[P_N], marks *mk)
{
	long long off = 0;
	for (;;) {
		json_t *ret = NULL, *line;
		size_t i;
		int rc = page(c, a, off, &ret);
		if (rc != CLI_OK)
			return rc;
		json_array_foreach(json_object_get(ret, "lines"), i, line) {
			json_t *step = json_object_get(line, "step");
			if (!json_is_integer(step))
				continue;
			marks_line(mk, line, (double)json_integer_value(step));
			for (int k = 0; k < P_N; k++) {
				json_t *v = json_object_get(line, curves[k].key);
				double x = (double)json_integer_value(step);
				/* a resumed job logs its steps again from its checkpoint: the
				 * later lines replace the earlier (as TensorBoard purges) */
				while (json_is_number(v) && p[k].n && p[k].x[p[k].n - 1] >= x)
					p[k].n--;
				if (json_is_number(v) && pts_add(&p[k], x,
					json_number_value(v) * curves[k].scale) < 0) {
					json_decref(ret);
					snprintf(c->err, sizeof c->err, "out of memory");
					return CLI_ECONN;
				}
			}
		}
		long long next = json_integer_value(json_object_get(ret, "next"));
		long long size = json_integer_value(json_object_get(ret, "size"));
		json_decref(ret);
		if (next >= size || next <= off)
			return CLI_OK;
		off = next;
	}
}

static cli_series series_of(const pts *p, int k)
{
	cli_series s = {curves[k].name, p[k].x, p[k].y, p[k].n};
	return s;
}

/* The image im into f's file (eng_fs_write's fill) */
static int fill_image(FILE *f, void *im, eng_err *err)
{
	char why[256];
	if (fflush(f) != 0 || cli_plot_image_write(fileno(f), im, why, sizeof why) < 0)
		return eng_errf(err, "%s", ferror(f) ? strerror(errno) : why);
	return 0;
}

/* The loss (train and val) as an image at path, with the marks, replaced as the engine
 * replaces a file (eng_fs_write: never through a symbolic or hard link, nor over another
 * user's file). */
static int write_image(const char *path, cli_plot_format fmt, const cli_series *loss, int n,
	const marks *mk)
{
	cli_plot_image im = {"loss", "step", "loss", loss, n, mk->m, mk->n, CLI_PNG_W, CLI_PNG_H,
		fmt};
	eng_err e = {0};
	if (eng_fs_write(path, fill_image, &im, &e) < 0) {
		fprintf(stderr, CLI_NAME ": cannot write '%s': %s\n", path, e.msg);
		return CLI_EXIT_FAIL;
	}
	return CLI_EXIT_OK;
}

int cli_plot_run(cli_conn *c, const cli_args *a)
{
	pts p[P_N];
	marks mk = {.n = 0, .last = -1};
	char err[256];
	int rc = CLI_EXIT_OK, color = isatty(STDOUT_FILENO) && !getenv("NO_COLOR");
	memset(p, 0, sizeof p);
	int r = fetch_all(c, a, p, &mk);
	if (r != CLI_OK) {
		rc = failed(c, r);
		goto out;
	}
	if (p[P_LOSS].n == 0) {
		fprintf(stderr, CLI_NAME ": job %s has no steps in its log yet\n",
			a->job ? a->job : "");
		rc = CLI_EXIT_FAIL;
		goto out;
	}
	cli_series loss[2] = {series_of(p, P_LOSS), series_of(p, P_VAL)};
	int nloss = p[P_VAL].n ? 2 : 1;
	if (a->png || a->svg) {
		rc = a->png ? write_image(a->png, CLI_PLOT_PNG, loss, nloss, &mk) : CLI_EXIT_OK;
		if (rc == CLI_EXIT_OK && a->svg)
			rc = write_image(a->svg, CLI_PLOT_SVG, loss, nloss, &mk);
		goto out;
	}
	cli_series speed = series_of(p, P_SPEED);
	cli_series peak[2] = {series_of(p, P_PEAK), series_of(p, P_RSS)};
	int npeak = p[P_RSS].n ? 2 : 1;
	if (cli_plot_text(stdout, "loss", loss, nloss, CLI_PLOT_COLS, CLI_PLOT_ROWS, color, err,
		    sizeof err) < 0 ||
		(printf("\n"), cli_plot_text(stdout, "tokens/s", &speed, 1, CLI_PLOT_COLS,
				       CLI_PLOT_ROWS / 2, color, err, sizeof err)) < 0 ||
		(printf("\n"), cli_plot_text(stdout, "peak memory (MiB)", peak, npeak,
				       CLI_PLOT_COLS, CLI_PLOT_ROWS / 2, color, err, sizeof err)) < 0) {
		fprintf(stderr, CLI_NAME ": plot: %s\n", err);
		rc = CLI_EXIT_FAIL;
	}
out:
	for (int k = 0; k < P_N; k++) {
		free(p[k].x);
		free(p[k].y);
	}
	return rc;
}
