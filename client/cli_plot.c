/* cli_plot.c - rematctl's plots (see cli_plot.h): the numbers, ranges and ticks both
 * pictures share (cli_plot_int.h), and the braille text for a terminal.
 *
 * Not here: the images (cli_plot_img.c, Cairo), fetching the numbers (the caller's),
 * colour choices beyond a fixed palette, any file naming. Everything file-local is static;
 * nothing outside libc and libm.
 */
#include "cli_plot.h"
#include "cli_plot_int.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PLOT_Y_MARGIN 0.05    /* share of the data's y span added above and below */

/* ---- numbers, ranges, ticks (shared by both pictures) ---- */

/* Drops trailing zeros of a printed fraction (before any exponent), and a "-0". */
static void num_strip(char *buf)
{
	char *e = strchr(buf, 'e');
	char *dot = strchr(buf, '.');
	size_t tail = e ? strlen(e) : 0;
	if (dot && (!e || dot < e)) {
		char *end = e ? e : buf + strlen(buf);
		char *p = end;
		while (p > dot + 1 && p[-1] == '0')
			p--;
		if (p == dot + 1)
			p = dot;
		memmove(p, end, tail + 1);
	}
	if (strcmp(buf, "-0") == 0)
		strcpy(buf, "0");
}

char *cli_plot_num_format(double v, double step, char *buf, size_t len)
{
	char tmp[CLI_PLOT_NUM_LEN + 16];
	double a = fabs(v);
	int p; /* the power of ten of the last digit shown */

	if (len == 0)
		return buf;
	if (!isfinite(v)) {
		snprintf(buf, len, "-");
		return buf;
	}
	int given = step > 0 && isfinite(step);
	/* rounding left over from the ticks' arithmetic: 0.1 * 3 - 0.3 */
	if (given && a < step * 1e-6)
		v = a = 0;
	int ev = a > 0 ? (int)floor(log10(a)) : 0;
	if (given) {
		/* the last digit of step: 0.25 -> -2, 2.5 -> -1, 500 -> 2 */
		p = (int)floor(log10(step));
		for (int k = 0; k < 3; k++) {
			double q = step / pow(10.0, p);
			if (fabs(q - nearbyint(q)) < 1e-6 * q)
				break;
			p--;
		}
	} else {
		p = ev - 2;
	}
	if (a == 0 || (a >= 1e-3 && a < 1e5)) {
		int dec = p < 0 ? -p : 0;
		snprintf(tmp, sizeof tmp, "%.*f", dec > 12 ? 12 : dec, v);
	} else {
		int dec = ev - p;
		snprintf(tmp, sizeof tmp, "%.*e", dec < 0 ? 0 : dec > 6 ? 6 : dec, v);
	}
	num_strip(tmp);
	snprintf(buf, len, "%s", tmp);
	return buf;
}

/* The step numbers of an axis (cli_plot_int.h). */
char *cli_plot_step_format(double v, char *buf, size_t len)
{
	if (v == nearbyint(v) && fabs(v) < 1e15) {
		snprintf(buf, len, "%.0f", v);
		return buf;
	}
	return cli_plot_num_format(v, 0, buf, len);
}

/* Checks the series and finds their ranges, y with PLOT_Y_MARGIN (cli_plot_int.h). */
int cli_plot_range(const cli_series *s, int ns, cli_plot_frame *f, char *err, size_t errlen)
{
	double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;

	if (!s || ns < 1) {
		snprintf(err, errlen, "nothing to plot: no series given");
		return -1;
	}
	if (ns > CLI_PLOT_MAX_SERIES) {
		snprintf(err, errlen, "too many series to plot (%d, at most %d)", ns,
			CLI_PLOT_MAX_SERIES);
		return -1;
	}
	for (int k = 0; k < ns; k++) {
		if (s[k].n > 0 && (!s[k].x || !s[k].y)) {
			snprintf(err, errlen, "series %d has %zu points but no arrays", k, s[k].n);
			return -1;
		}
		for (size_t i = 0; i < s[k].n; i++) {
			if (!isfinite(s[k].x[i]) || !isfinite(s[k].y[i]))
				continue;
			xlo = fmin(xlo, s[k].x[i]);
			xhi = fmax(xhi, s[k].x[i]);
			ylo = fmin(ylo, s[k].y[i]);
			yhi = fmax(yhi, s[k].y[i]);
		}
	}
	if (xlo > xhi) {
		snprintf(err, errlen, "nothing to plot: no series has a finite point");
		return -1;
	}
	if (xlo == xhi) {
		xlo -= 1;
		xhi += 1;
	}
	double pad = (yhi - ylo) * PLOT_Y_MARGIN;
	if (!(pad > 0))
		pad = yhi != 0 ? fabs(yhi) * 0.1 : 1.0;
	f->x0 = xlo;
	f->x1 = xhi;
	f->y0 = ylo - pad;
	f->y1 = yhi + pad;
	if (!isfinite(f->y1 - f->y0) || !isfinite(f->x1 - f->x0)) {
		snprintf(err, errlen, "cannot plot: the values span more than a double holds");
		return -1;
	}
	return 0;
}

/* Nice ticks (cli_plot_int.h). Where the count is what stops it, the step before gave
 * more than max, so this one gives about half of that or more (of 6 consecutive multiples
 * of a step, 3 are multiples of the next: 3 at least for max 5); where min_step is, there
 * may be fewer. */
int cli_plot_ticks(double lo, double hi, double min_step, int max, double *t, double *step)
{
	static const double mul[] = {1, 2, 2.5, 5};
	double base = pow(10.0, floor(log10(hi - lo)) - 2);
	double st = base, first = 0, last = 0;

	for (int k = 0; k < 40; k++) {
		st = base * mul[k % 4] * pow(10.0, k / 4);
		first = ceil(lo / st - 1e-9);
		last = floor(hi / st + 1e-9);
		if (last - first + 1 <= max && st >= min_step)
			break;
	}
	int n = 0;
	for (double i = first; i <= last && n < max; i++)
		t[n++] = i * st;
	*step = st;
	return n;
}

void cli_plot_map(const cli_plot_frame *f, double x, double y, int *px, int *py)
{
	double fx = (x - f->x0) / (f->x1 - f->x0);
	double fy = (f->y1 - y) / (f->y1 - f->y0);
	/* far outside stays outside, without overflowing the int */
	fx = fx < -1 ? -1 : fx > 2 ? 2 : fx;
	fy = fy < -1 ? -1 : fy > 2 ? 2 : fy;
	*px = f->left + (int)lround(fx * (f->width - 1));
	*py = f->top + (int)lround(fy * (f->height - 1));
}

typedef void (*plot_dot_fn)(void *ctx, int x, int y);

/* Calls dot for every point of the line (x0,y0)-(x1,y1), ends included (Bresenham). */
static void plot_segment(int x0, int y0, int x1, int y1, plot_dot_fn dot, void *ctx)
{
	int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
	int dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
	int e = dx + dy;

	for (;;) {
		dot(ctx, x0, y0);
		if (x0 == x1 && y0 == y1)
			break;
		int e2 = 2 * e;
		if (e2 >= dy) {
			e += dy;
			x0 += sx;
		}
		if (e2 <= dx) {
			e += dx;
			y0 += sy;
		}
	}
}

/* Draws series s into frame f: consecutive finite points joined, a non-finite one a gap,
 * a point with no finite neighbour a single dot. */
static void plot_series(const cli_plot_frame *f, const cli_series *s, plot_dot_fn dot,
	void *ctx)
{
	int have = 0, px0 = 0, py0 = 0;

	for (size_t i = 0; i < s->n; i++) {
		int px, py;
		if (!isfinite(s->x[i]) || !isfinite(s->y[i])) {
			have = 0;
			continue;
		}
		cli_plot_map(f, s->x[i], s->y[i], &px, &py);
		if (have)
			plot_segment(px0, py0, px, py, dot, ctx);
		else
			dot(ctx, px, py);
		px0 = px;
		py0 = py;
		have = 1;
	}
}

/* The last finite point of s, 0 when it has none. */
static int series_last(const cli_series *s, double *x, double *y)
{
	for (size_t i = s->n; i-- > 0;)
		if (isfinite(s->x[i]) && isfinite(s->y[i])) {
			*x = s->x[i];
			*y = s->y[i];
			return 1;
		}
	return 0;
}

/* Text cleaned for a picture (cli_plot_int.h): a job name cannot send escapes to the
 * terminal. */
char *cli_plot_clean(const char *text, int ascii, char *out, size_t outlen)
{
	size_t o = 0;
	const unsigned char *p = (const unsigned char *)(text ? text : "");

	while (*p && o + 1 < outlen) {
		size_t n = *p < 0x80 ? 1 : *p >= 0xF0 ? 4 : *p >= 0xE0 ? 3 : *p >= 0xC0 ? 2 : 1;
		size_t k = 1;
		while (k < n && (p[k] & 0xC0) == 0x80)
			k++;
		int ctl = *p < 0x20 || *p == 0x7F || (*p == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F);
		if (ctl || (ascii && *p >= 0x80) || k != n) {
			out[o++] = '?';
		} else {
			if (o + k + 1 > outlen)
				break;
			memcpy(out + o, p, k);
			o += k;
		}
		p += k;
	}
	out[o] = '\0';
	return out;
}

/* ---- text ---- */

static const char *const text_color[CLI_PLOT_MAX_SERIES] = {"\033[34m", "\033[33m",
	"\033[32m", "\033[31m"}; /* blue, yellow, green, red: the image palette's nearest */
static const char text_marker[CLI_PLOT_MAX_SERIES] = {'*', '+', 'o', 'x'};
#define TEXT_RESET "\033[0m"

typedef struct text_grid {
	int cols, rows;		/* cells */
	unsigned char *bits;	/* rows * cols braille dot bits, row-major */
	signed char *owner;	/* rows * cols: the series that drew last in a cell, -1 none */
	int cur;		/* the series being drawn */
} text_grid;

/* Sets dot (x, y) of the grid (2 x 4 dots a cell) for series g->cur. */
static void text_dot(void *ctx, int x, int y)
{
	/* Unicode's braille numbering: dots 1-3 and 7 down the left, 4-6 and 8 the right */
	static const unsigned char bit[2][4] = {{0x01, 0x02, 0x04, 0x40},
		{0x08, 0x10, 0x20, 0x80}};
	text_grid *g = ctx;
	if (x < 0 || y < 0 || x >= 2 * g->cols || y >= 4 * g->rows)
		return;
	size_t c = (size_t)(y / 4) * (size_t)g->cols + (size_t)(x / 2);
	g->bits[c] |= bit[x % 2][y % 4];
	g->owner[c] = (signed char)g->cur;
}

/* The y ticks of a text plot, each in a row of its own (a label stands for a whole row, so
 * two in one would show one of them at the wrong height): the nicest step that gives
 * distinct rows, tried coarser until it does. Returns the count; rows in row[]. */
static int text_ticks(const cli_plot_frame *f, double t[PLOT_MAX_TICKS],
	int row[PLOT_MAX_TICKS], double *step)
{
	double min_step = 0;
	int nt = 0;

	for (int tries = 0; tries < 40; tries++) {
		int distinct = 1, px;
		nt = cli_plot_ticks(f->y0, f->y1, min_step, PLOT_MAX_TICKS, t, step);
		for (int i = 0; i < nt; i++) {
			cli_plot_map(f, f->x0, t[i], &px, &row[i]);
			row[i] /= 4;
			distinct &= i == 0 || row[i] != row[i - 1];
		}
		if (distinct)
			break;
		min_step = *step * 1.1; /* the next step of the 1, 2, 2.5, 5 sequence */
	}
	return nt;
}

/* Writes plot row r: label (lw wide, blank when NULL), the axis, the cells up to the last
 * one inked, then the markers of the series whose last point is in this row. */
static void text_row(FILE *out, const text_grid *g, int r, const char *label, int lw,
	const int *endrow, int ns, int color)
{
	const unsigned char *bits = g->bits + (size_t)r * (size_t)g->cols;
	const signed char *owner = g->owner + (size_t)r * (size_t)g->cols;
	int end = g->cols, inked = -1;
	int marked = 0;

	for (int k = 0; k < ns; k++)
		marked |= endrow[k] == r;
	if (!marked)
		while (end > 0 && !bits[end - 1])
			end--;
	fprintf(out, "%*s %s", lw, label ? label : "", label ? "┤" : "│");
	for (int c = 0; c < end; c++) {
		if (!bits[c]) {
			fputc(' ', out);
			continue;
		}
		if (color && owner[c] != inked) {
			fputs(text_color[owner[c]], out);
			inked = owner[c];
		}
		/* U+2800 + bits in UTF-8: E2, A0 + the top 2 bits, 80 + the low 6 */
		fputc(0xE2, out);
		fputc(0xA0 | (bits[c] >> 6), out);
		fputc(0x80 | (bits[c] & 0x3F), out);
	}
	if (color && inked >= 0)
		fputs(TEXT_RESET, out);
	if (marked)
		fputc(' ', out);
	for (int k = 0; k < ns; k++)
		if (endrow[k] == r)
			fprintf(out, "%s%c%s", color ? text_color[k] : "", text_marker[k],
				color ? TEXT_RESET : "");
	fputc('\n', out);
}

/* Writes the x axis, the first and last step under its ends, and the legend. */
static void text_footer(FILE *out, const cli_plot_frame *f, const cli_series *s, int ns,
	int cols, int lw, int color)
{
	char a[CLI_PLOT_NUM_LEN], b[CLI_PLOT_NUM_LEN], name[PLOT_NAME_MAX];

	fprintf(out, "%*s └", lw, "");
	for (int c = 0; c < cols; c++)
		fputs("─", out);
	cli_plot_step_format(f->x0, a, sizeof a);
	cli_plot_step_format(f->x1, b, sizeof b);
	int gap = cols - (int)strlen(a) - (int)strlen(b);
	fprintf(out, "\n%*s%s%*s%s\n", lw + 2, "", a, gap < 1 ? 1 : gap, "", b);
	fprintf(out, "%*s", lw + 2, "");
	for (int k = 0; k < ns; k++)
		fprintf(out, "%s%s%c%s %s", k ? "   " : "", color ? text_color[k] : "",
			text_marker[k], color ? TEXT_RESET : "",
			cli_plot_clean(s[k].name, 0, name, sizeof name));
	fputc('\n', out);
}

int cli_plot_text(FILE *out, const char *title, const cli_series *s, int ns, int cols,
	int rows, int color, char *err, size_t errlen)
{
	cli_plot_frame f;
	text_grid g = {cols, rows, NULL, NULL, 0};
	double tick[PLOT_MAX_TICKS], step;
	char label[PLOT_MAX_TICKS][CLI_PLOT_NUM_LEN], name[PLOT_NAME_MAX];
	int tickrow[PLOT_MAX_TICKS], endrow[CLI_PLOT_MAX_SERIES], lw = 0, rc = -1;

	if (!out || cols < CLI_PLOT_TEXT_MIN_COLS || cols > CLI_PLOT_TEXT_MAX_COLS ||
		rows < CLI_PLOT_TEXT_MIN_ROWS || rows > CLI_PLOT_TEXT_MAX_ROWS) {
		snprintf(err, errlen, "bad plot size %dx%d (columns %d..%d, rows %d..%d)", cols,
			rows, CLI_PLOT_TEXT_MIN_COLS, CLI_PLOT_TEXT_MAX_COLS,
			CLI_PLOT_TEXT_MIN_ROWS, CLI_PLOT_TEXT_MAX_ROWS);
		return -1;
	}
	if (cli_plot_range(s, ns, &f, err, errlen) < 0)
		return -1;
	f.left = f.top = 0;
	f.width = 2 * cols;
	f.height = 4 * rows;
	g.bits = calloc((size_t)cols * (size_t)rows, 1);
	g.owner = malloc((size_t)cols * (size_t)rows);
	if (!g.bits || !g.owner) {
		snprintf(err, errlen, "out of memory for a %dx%d plot", cols, rows);
		goto fail;
	}
	memset(g.owner, -1, (size_t)cols * (size_t)rows);
	for (int k = 0; k < ns; k++) {
		double x, y;
		int px, py;
		g.cur = k;
		plot_series(&f, &s[k], text_dot, &g);
		endrow[k] = -1;
		if (series_last(&s[k], &x, &y)) {
			cli_plot_map(&f, x, y, &px, &py);
			endrow[k] = py / 4;
		}
	}
	int nt = text_ticks(&f, tick, tickrow, &step);
	for (int i = 0; i < nt; i++) {
		int n = (int)strlen(cli_plot_num_format(tick[i], step, label[i], sizeof label[i]));
		lw = n > lw ? n : lw;
	}
	if (title && *title)
		fprintf(out, "%s\n", cli_plot_clean(title, 0, name, sizeof name));
	for (int r = 0; r < rows; r++) {
		const char *lab = NULL;
		for (int i = 0; i < nt && !lab; i++)
			if (tickrow[i] == r)
				lab = label[i];
		text_row(out, &g, r, lab, lw, endrow, ns, color);
	}
	text_footer(out, &f, s, ns, cols, lw, color);
	if (fflush(out) != 0 || ferror(out)) {
		snprintf(err, errlen, "cannot write plot: %s", strerror(errno));
		goto fail;
	}
	rc = 0;
fail:
	free(g.owner);
	free(g.bits);
	return rc;
}
