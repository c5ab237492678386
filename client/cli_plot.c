/* cli_plot.c - rematctl's plots (see cli_plot.h): braille text for a terminal and PNG
 * images, both from the same ranges, ticks and line drawing.
 *
 * Not here: fetching the numbers (the caller's), colour choices beyond a fixed palette,
 * fonts beyond printable ASCII, any file naming. Everything file-local is static; the only
 * library outside libc and libm is zlib, for the PNG's deflate stream and CRCs.
 */
#include "cli_plot.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define PLOT_MAX_TICKS 5      /* y tick labels at most (nice numbers, 3 at least) */
#define PLOT_Y_MARGIN 0.05    /* share of the data's y span added above and below */
#define PLOT_NAME_MAX 256     /* bytes of a title or series name shown, once cleaned */
#define PNG_GLYPH_W 5	      /* the bitmap font: 5 columns, 7 rows of body, 1 descender */
#define PNG_GLYPH_H 8
#define PNG_ADVANCE 6	      /* pixels from one character to the next, at scale 1 */
#define PNG_PAD 6	      /* blank border and gaps between parts, at scale 1 */
#define PNG_TICK 3	      /* length of a tick mark, at scale 1 */
#define PNG_MIN_AREA 16	      /* smallest plot area, pixels each side, worth drawing */
#define PNG_BIG_W 800	      /* from this size up the font and lines are drawn doubled */
#define PNG_BIG_H 600

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

/* The step numbers under the x axis: integers as integers, anything else as a number. */
static char *step_format(double v, char *buf, size_t len)
{
	if (v == nearbyint(v) && fabs(v) < 1e15) {
		snprintf(buf, len, "%.0f", v);
		return buf;
	}
	return cli_plot_num_format(v, 0, buf, len);
}

/* Checks what both pictures take, then fills f's ranges from the finite points: x from
 * min to max (widened by 1 each way for a single step), y with PLOT_Y_MARGIN (or 10% of
 * the value, or 1, for a flat series). The area fields are left alone. */
static int plot_range(const cli_series *s, int ns, cli_plot_frame *f, char *err,
	size_t errlen)
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

/* Nice y ticks in [lo, hi]: the smallest step of 1, 2, 2.5 or 5 times a power of ten that
 * gives at most PLOT_MAX_TICKS and is at least min_step (room for the labels). Where the
 * count is what stops it, the step before gave 6 or more, so this one gives 3 or more (of
 * 6 consecutive multiples of a step, 3 are multiples of the next); where min_step is,
 * there may be fewer. Returns the count, ticks in t[] bottom to top, the step in *step. */
static int plot_ticks(double lo, double hi, double min_step, double t[PLOT_MAX_TICKS],
	double *step)
{
	static const double mul[] = {1, 2, 2.5, 5};
	double base = pow(10.0, floor(log10(hi - lo)) - 2);
	double st = base, first = 0, last = 0;

	for (int k = 0; k < 40; k++) {
		st = base * mul[k % 4] * pow(10.0, k / 4);
		first = ceil(lo / st - 1e-9);
		last = floor(hi / st + 1e-9);
		if (last - first + 1 <= PLOT_MAX_TICKS && st >= min_step)
			break;
	}
	int n = 0;
	for (double i = first; i <= last && n < PLOT_MAX_TICKS; i++)
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

/* Copies text (NULL as "") into out with control characters (C0, DEL, C1) as '?', so a
 * job name cannot send escapes to the terminal; with ascii, every non-ASCII code point
 * becomes one '?' too (the PNG font's range). Cut to fit, never inside a code point. */
static char *text_clean(const char *text, int ascii, char *out, size_t outlen)
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
	"\033[32m", "\033[31m"}; /* blue, yellow, green, red: the PNG palette's nearest */
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
		nt = plot_ticks(f->y0, f->y1, min_step, t, step);
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
	step_format(f->x0, a, sizeof a);
	step_format(f->x1, b, sizeof b);
	int gap = cols - (int)strlen(a) - (int)strlen(b);
	fprintf(out, "\n%*s%s%*s%s\n", lw + 2, "", a, gap < 1 ? 1 : gap, "", b);
	fprintf(out, "%*s", lw + 2, "");
	for (int k = 0; k < ns; k++)
		fprintf(out, "%s%s%c%s %s", k ? "   " : "", color ? text_color[k] : "",
			text_marker[k], color ? TEXT_RESET : "",
			text_clean(s[k].name, 0, name, sizeof name));
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
	if (plot_range(s, ns, &f, err, errlen) < 0)
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
		fprintf(out, "%s\n", text_clean(title, 0, name, sizeof name));
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

/* ---- PNG ---- */

/* Printable ASCII, ' ' to '~': 8 rows of 5 bits each, bit 4 the leftmost column; rows 0-6
 * the body (capitals 7 high, lower case 5), row 7 the descender of g j p q y. */
static const unsigned char png_font[95][PNG_GLYPH_H] = {
	{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, /* space */
	{0x04, 0x04, 0x04, 0x04, 0x04, 0x00, 0x04, 0x00}, /* ! */
	{0x0a, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, /* " */
	{0x0a, 0x0a, 0x1f, 0x0a, 0x1f, 0x0a, 0x0a, 0x00}, /* # */
	{0x04, 0x0f, 0x14, 0x0e, 0x05, 0x1e, 0x04, 0x00}, /* $ */
	{0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03, 0x00}, /* % */
	{0x0c, 0x12, 0x14, 0x08, 0x15, 0x12, 0x0d, 0x00}, /* & */
	{0x04, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, /* quote */
	{0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02, 0x00}, /* ( */
	{0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08, 0x00}, /* ) */
	{0x00, 0x04, 0x15, 0x0e, 0x15, 0x04, 0x00, 0x00}, /* * */
	{0x00, 0x04, 0x04, 0x1f, 0x04, 0x04, 0x00, 0x00}, /* + */
	{0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x04, 0x08}, /* , */
	{0x00, 0x00, 0x00, 0x1f, 0x00, 0x00, 0x00, 0x00}, /* - */
	{0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x0c, 0x00}, /* . */
	{0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00, 0x00}, /* / */
	{0x0e, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0e, 0x00}, /* 0 */
	{0x04, 0x0c, 0x04, 0x04, 0x04, 0x04, 0x0e, 0x00}, /* 1 */
	{0x0e, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1f, 0x00}, /* 2 */
	{0x1f, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0e, 0x00}, /* 3 */
	{0x02, 0x06, 0x0a, 0x12, 0x1f, 0x02, 0x02, 0x00}, /* 4 */
	{0x1f, 0x10, 0x1e, 0x01, 0x01, 0x11, 0x0e, 0x00}, /* 5 */
	{0x06, 0x08, 0x10, 0x1e, 0x11, 0x11, 0x0e, 0x00}, /* 6 */
	{0x1f, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08, 0x00}, /* 7 */
	{0x0e, 0x11, 0x11, 0x0e, 0x11, 0x11, 0x0e, 0x00}, /* 8 */
	{0x0e, 0x11, 0x11, 0x0f, 0x01, 0x02, 0x0c, 0x00}, /* 9 */
	{0x00, 0x0c, 0x0c, 0x00, 0x0c, 0x0c, 0x00, 0x00}, /* : */
	{0x00, 0x0c, 0x0c, 0x00, 0x0c, 0x0c, 0x08, 0x00}, /* ; */
	{0x02, 0x04, 0x08, 0x10, 0x08, 0x04, 0x02, 0x00}, /* < */
	{0x00, 0x00, 0x1f, 0x00, 0x1f, 0x00, 0x00, 0x00}, /* = */
	{0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08, 0x00}, /* > */
	{0x0e, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04, 0x00}, /* ? */
	{0x0e, 0x11, 0x01, 0x0d, 0x15, 0x15, 0x0e, 0x00}, /* @ */
	{0x0e, 0x11, 0x11, 0x1f, 0x11, 0x11, 0x11, 0x00}, /* A */
	{0x1e, 0x11, 0x11, 0x1e, 0x11, 0x11, 0x1e, 0x00}, /* B */
	{0x0e, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0e, 0x00}, /* C */
	{0x1c, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1c, 0x00}, /* D */
	{0x1f, 0x10, 0x10, 0x1e, 0x10, 0x10, 0x1f, 0x00}, /* E */
	{0x1f, 0x10, 0x10, 0x1e, 0x10, 0x10, 0x10, 0x00}, /* F */
	{0x0e, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0f, 0x00}, /* G */
	{0x11, 0x11, 0x11, 0x1f, 0x11, 0x11, 0x11, 0x00}, /* H */
	{0x0e, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0e, 0x00}, /* I */
	{0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0c, 0x00}, /* J */
	{0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11, 0x00}, /* K */
	{0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1f, 0x00}, /* L */
	{0x11, 0x1b, 0x15, 0x15, 0x11, 0x11, 0x11, 0x00}, /* M */
	{0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11, 0x00}, /* N */
	{0x0e, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0e, 0x00}, /* O */
	{0x1e, 0x11, 0x11, 0x1e, 0x10, 0x10, 0x10, 0x00}, /* P */
	{0x0e, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0d, 0x00}, /* Q */
	{0x1e, 0x11, 0x11, 0x1e, 0x14, 0x12, 0x11, 0x00}, /* R */
	{0x0f, 0x10, 0x10, 0x0e, 0x01, 0x01, 0x1e, 0x00}, /* S */
	{0x1f, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x00}, /* T */
	{0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0e, 0x00}, /* U */
	{0x11, 0x11, 0x11, 0x11, 0x11, 0x0a, 0x04, 0x00}, /* V */
	{0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0a, 0x00}, /* W */
	{0x11, 0x11, 0x0a, 0x04, 0x0a, 0x11, 0x11, 0x00}, /* X */
	{0x11, 0x11, 0x0a, 0x04, 0x04, 0x04, 0x04, 0x00}, /* Y */
	{0x1f, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1f, 0x00}, /* Z */
	{0x0e, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0e, 0x00}, /* [ */
	{0x00, 0x10, 0x08, 0x04, 0x02, 0x01, 0x00, 0x00}, /* backslash */
	{0x0e, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0e, 0x00}, /* ] */
	{0x04, 0x0a, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00}, /* ^ */
	{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1f, 0x00}, /* _ */
	{0x08, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, /* ` */
	{0x00, 0x00, 0x0e, 0x01, 0x0f, 0x11, 0x0f, 0x00}, /* a */
	{0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1e, 0x00}, /* b */
	{0x00, 0x00, 0x0e, 0x10, 0x10, 0x11, 0x0e, 0x00}, /* c */
	{0x01, 0x01, 0x0d, 0x13, 0x11, 0x11, 0x0f, 0x00}, /* d */
	{0x00, 0x00, 0x0e, 0x11, 0x1f, 0x10, 0x0e, 0x00}, /* e */
	{0x06, 0x09, 0x08, 0x1c, 0x08, 0x08, 0x08, 0x00}, /* f */
	{0x00, 0x00, 0x0f, 0x11, 0x11, 0x0f, 0x01, 0x0e}, /* g */
	{0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11, 0x00}, /* h */
	{0x04, 0x00, 0x0c, 0x04, 0x04, 0x04, 0x0e, 0x00}, /* i */
	{0x02, 0x00, 0x06, 0x02, 0x02, 0x02, 0x12, 0x0c}, /* j */
	{0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12, 0x00}, /* k */
	{0x0c, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0e, 0x00}, /* l */
	{0x00, 0x00, 0x1a, 0x15, 0x15, 0x11, 0x11, 0x00}, /* m */
	{0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11, 0x00}, /* n */
	{0x00, 0x00, 0x0e, 0x11, 0x11, 0x11, 0x0e, 0x00}, /* o */
	{0x00, 0x00, 0x1e, 0x11, 0x11, 0x1e, 0x10, 0x10}, /* p */
	{0x00, 0x00, 0x0f, 0x11, 0x11, 0x0f, 0x01, 0x01}, /* q */
	{0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10, 0x00}, /* r */
	{0x00, 0x00, 0x0f, 0x10, 0x0e, 0x01, 0x1e, 0x00}, /* s */
	{0x08, 0x08, 0x1c, 0x08, 0x08, 0x09, 0x06, 0x00}, /* t */
	{0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0d, 0x00}, /* u */
	{0x00, 0x00, 0x11, 0x11, 0x11, 0x0a, 0x04, 0x00}, /* v */
	{0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0a, 0x00}, /* w */
	{0x00, 0x00, 0x11, 0x0a, 0x04, 0x0a, 0x11, 0x00}, /* x */
	{0x00, 0x00, 0x11, 0x11, 0x11, 0x0f, 0x01, 0x0e}, /* y */
	{0x00, 0x00, 0x1f, 0x02, 0x04, 0x08, 0x1f, 0x00}, /* z */
	{0x02, 0x04, 0x04, 0x08, 0x04, 0x04, 0x02, 0x00}, /* { */
	{0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x00}, /* | */
	{0x08, 0x04, 0x04, 0x02, 0x04, 0x04, 0x08, 0x00}, /* } */
	{0x00, 0x00, 0x08, 0x15, 0x02, 0x00, 0x00, 0x00}, /* ~ */
};

/* tab10's first four (matplotlib's default cycle): blue, orange, green, red */
static const unsigned char png_palette[CLI_PLOT_MAX_SERIES][3] = {
	{31, 119, 180}, {255, 127, 14}, {44, 160, 44}, {214, 39, 40}};
static const unsigned char png_black[3] = {0, 0, 0};
static const unsigned char png_grid[3] = {225, 225, 225};
static const unsigned char png_ink[3] = {40, 40, 40}; /* text: a soft black */

void cli_plot_png_color(int k, unsigned char rgb[3])
{
	int i = ((k % CLI_PLOT_MAX_SERIES) + CLI_PLOT_MAX_SERIES) % CLI_PLOT_MAX_SERIES;
	memcpy(rgb, png_palette[i], 3);
}

typedef struct png_canvas {
	unsigned char *rgb;	/* w * h * 3 bytes, top row first */
	int w, h;		/* pixels */
	int cx0, cy0, cx1, cy1; /* clip rectangle [cx0, cx1) x [cy0, cy1), inside the image */
	int brush;		/* side of the square png_dot paints */
	const unsigned char *color; /* what png_dot paints */
} png_canvas;

static void png_clip(png_canvas *c, int x0, int y0, int x1, int y1)
{
	c->cx0 = x0 < 0 ? 0 : x0;
	c->cy0 = y0 < 0 ? 0 : y0;
	c->cx1 = x1 > c->w ? c->w : x1;
	c->cy1 = y1 > c->h ? c->h : y1;
}

/* Fills the rectangle [x, x+w) x [y, y+h), cut to the clip rectangle. */
static void png_fill(png_canvas *c, int x, int y, int w, int h, const unsigned char rgb[3])
{
	int x0 = x < c->cx0 ? c->cx0 : x, x1 = x + w > c->cx1 ? c->cx1 : x + w;
	int y0 = y < c->cy0 ? c->cy0 : y, y1 = y + h > c->cy1 ? c->cy1 : y + h;
	for (int j = y0; j < y1; j++)
		for (int i = x0; i < x1; i++)
			memcpy(c->rgb + ((size_t)j * (size_t)c->w + (size_t)i) * 3, rgb, 3);
}

/* A series' pixel: a brush x brush square, its top-left corner at (x, y). */
static void png_dot(void *ctx, int x, int y)
{
	png_canvas *c = ctx;
	png_fill(c, x, y, c->brush, c->brush, c->color);
}

/* Width in pixels of text drawn at scale sc (text already cleaned to ASCII). */
static int png_text_width(const char *text, int sc)
{
	size_t n = strlen(text);
	return n ? (int)n * PNG_ADVANCE * sc - sc : 0;
}

/* Draws ASCII text with its top-left corner at (x, y), each font pixel sc x sc. */
static void png_text(png_canvas *c, int x, int y, const char *text, int sc,
	const unsigned char rgb[3])
{
	for (; *text; text++, x += PNG_ADVANCE * sc) {
		unsigned char ch = (unsigned char)*text;
		const unsigned char *g = png_font[(ch < 32 || ch > 126 ? '?' : ch) - 32];
		for (int r = 0; r < PNG_GLYPH_H; r++)
			for (int b = 0; b < PNG_GLYPH_W; b++)
				if (g[r] & (0x10 >> b))
					png_fill(c, x + b * sc, y + r * sc, sc, sc, rgb);
	}
}

/* Everything the picture's parts are placed by. */
typedef struct png_layout {
	cli_plot_frame f;			    /* ranges and the plot area */
	int sc;					    /* font and line scale, 1 or 2 */
	int nt;					    /* y ticks */
	double tick[PLOT_MAX_TICKS];		    /* bottom to top */
	char label[PLOT_MAX_TICKS][CLI_PLOT_NUM_LEN]; /* their labels */
	char title[PLOT_NAME_MAX];		    /* cleaned to ASCII; "" for none */
} png_layout;

/* Places the parts: the title on top, y labels on the left, the step labels and the legend
 * under the x axis, the plot area in what is left. */
static int png_layout_make(const char *title, const cli_series *s, int ns, int width,
	int height, png_layout *L, char *err, size_t errlen)
{
	double step;
	int lw = 0;

	if (width < CLI_PLOT_PNG_MIN || width > CLI_PLOT_PNG_MAX || height < CLI_PLOT_PNG_MIN ||
		height > CLI_PLOT_PNG_MAX) {
		snprintf(err, errlen, "bad image size %dx%d (each side %d..%d pixels)", width,
			height, CLI_PLOT_PNG_MIN, CLI_PLOT_PNG_MAX);
		return -1;
	}
	if (plot_range(s, ns, &L->f, err, errlen) < 0)
		return -1;
	L->sc = width >= PNG_BIG_W && height >= PNG_BIG_H ? 2 : 1;
	int sc = L->sc, pad = PNG_PAD * sc, line = PNG_GLYPH_H * sc;
	text_clean(title, 1, L->title, sizeof L->title);
	/* the top tick's label is centred on its row: half a line of room above the area */
	L->f.top = pad + (L->title[0] ? line + pad : 0) + line / 2;
	int bottom = 1 + PNG_TICK * sc + 2 * sc + line + pad + line + pad;
	L->f.height = height - L->f.top - bottom;
	if (L->f.height < PNG_MIN_AREA)
		goto small;
	/* ticks a label and a gap apart, so that labels never touch */
	double room = (double)(line + 2 * sc) * (L->f.y1 - L->f.y0) / (L->f.height - 1);
	L->nt = plot_ticks(L->f.y0, L->f.y1, room, L->tick, &step);
	for (int i = 0; i < L->nt; i++) {
		cli_plot_num_format(L->tick[i], step, L->label[i], sizeof L->label[i]);
		int w = png_text_width(L->label[i], sc);
		lw = w > lw ? w : lw;
	}
	L->f.left = pad + lw + 2 * sc + PNG_TICK * sc + 1;
	L->f.width = width - L->f.left - 2 * pad;
	if (L->f.width < PNG_MIN_AREA)
		goto small;
	return 0;
small:
	snprintf(err, errlen, "image %dx%d is too small for its labels and title (at least %d "
		"pixels each way left for the plot)", width, height, PNG_MIN_AREA);
	return -1;
}

int cli_plot_png_frame(const char *title, const cli_series *s, int ns, int width, int height,
	cli_plot_frame *f, char *err, size_t errlen)
{
	png_layout L;
	if (png_layout_make(title, s, ns, width, height, &L, err, errlen) < 0)
		return -1;
	*f = L.f;
	return 0;
}

/* Draws everything but the series: grid, axes, ticks, labels, title, legend. */
static void png_draw_frame(png_canvas *c, const png_layout *L, const cli_series *s, int ns)
{
	const cli_plot_frame *f = &L->f;
	int sc = L->sc, pad = PNG_PAD * sc, line = PNG_GLYPH_H * sc, tick = PNG_TICK * sc;
	int axis_x = f->left - 1, axis_y = f->top + f->height;
	char a[CLI_PLOT_NUM_LEN], name[PLOT_NAME_MAX];

	for (int i = 0; i < L->nt; i++) {
		int px, py;
		cli_plot_map(f, f->x0, L->tick[i], &px, &py);
		png_fill(c, f->left, py, f->width, 1, png_grid);
		png_fill(c, axis_x - tick, py, tick, 1, png_black);
		/* right-aligned, the body (7 rows) centred on the tick */
		png_text(c, axis_x - tick - 2 * sc - png_text_width(L->label[i], sc),
			py - 3 * sc, L->label[i], sc, png_ink);
	}
	png_fill(c, axis_x, f->top, 1, f->height + 1, png_black);
	png_fill(c, axis_x, axis_y, f->width + 1, 1, png_black);
	/* the first and last step, under ticks at the area's ends */
	int ly = axis_y + 1 + tick + 2 * sc;
	png_fill(c, f->left, axis_y + 1, 1, tick, png_black);
	png_fill(c, f->left + f->width - 1, axis_y + 1, 1, tick, png_black);
	png_text(c, f->left, ly, step_format(f->x0, a, sizeof a), sc, png_ink);
	step_format(f->x1, a, sizeof a);
	png_text(c, f->left + f->width - png_text_width(a, sc), ly, a, sc, png_ink);
	if (L->title[0]) {
		int tw = png_text_width(L->title, sc);
		int tx = (c->w - tw) / 2 < pad ? pad : (c->w - tw) / 2;
		png_text(c, tx, pad, L->title, sc, png_black);
	}
	/* the legend: a swatch of each series' line and its name */
	int x = f->left, y = ly + line + pad;
	for (int k = 0; k < ns; k++) {
		png_fill(c, x, y + 3 * sc - sc / 2, 12 * sc, sc + 1, png_palette[k]);
		x += 12 * sc + 4 * sc;
		text_clean(s[k].name, 1, name, sizeof name);
		png_text(c, x, y, name, sc, png_ink);
		x += png_text_width(name, sc) + 12 * sc;
	}
}

/* Writes all n bytes (retrying short writes and EINTR). */
static int png_write_all(int fd, const void *buf, size_t n, char *err, size_t errlen)
{
	const unsigned char *p = buf;
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			snprintf(err, errlen, "cannot write png: %s",
				w < 0 ? strerror(errno) : "nothing written");
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void png_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* One chunk: length, type, data, and the CRC of type and data. */
static int png_chunk(int fd, const char *type, const unsigned char *data, size_t n,
	char *err, size_t errlen)
{
	unsigned char head[8], tail[4];
	uLong crc = crc32(0L, (const Bytef *)type, 4);
	if (n)
		crc = crc32(crc, data, (uInt)n);
	png_be32(head, (uint32_t)n);
	memcpy(head + 4, type, 4);
	png_be32(tail, (uint32_t)crc);
	if (png_write_all(fd, head, 8, err, errlen) < 0 ||
		(n && png_write_all(fd, data, n, err, errlen) < 0) ||
		png_write_all(fd, tail, 4, err, errlen) < 0)
		return -1;
	return 0;
}

/* The canvas as a PNG file: each scanline behind a 0 (filter "None"), one zlib stream. */
static int png_encode(int fd, const png_canvas *c, char *err, size_t errlen)
{
	static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
	size_t row = 1 + 3 * (size_t)c->w, rawlen = row * (size_t)c->h;
	uLongf zlen = compressBound((uLong)rawlen);
	unsigned char ihdr[13] = {0};
	unsigned char *raw = malloc(rawlen), *z = malloc(zlen);
	int rc = -1;

	if (!raw || !z) {
		snprintf(err, errlen, "out of memory for a %dx%d png", c->w, c->h);
		goto fail;
	}
	for (int j = 0; j < c->h; j++) {
		raw[(size_t)j * row] = 0;
		memcpy(raw + (size_t)j * row + 1, c->rgb + (size_t)j * (size_t)c->w * 3, row - 1);
	}
	int zrc = compress2(z, &zlen, raw, (uLong)rawlen, Z_BEST_COMPRESSION);
	if (zrc != Z_OK) {
		snprintf(err, errlen, "cannot compress png: zlib error %d", zrc);
		goto fail;
	}
	png_be32(ihdr, (uint32_t)c->w);
	png_be32(ihdr + 4, (uint32_t)c->h);
	ihdr[8] = 8; /* bits a channel */
	ihdr[9] = 2; /* colour type: RGB; compression, filter, interlace methods all 0 */
	if (png_write_all(fd, sig, sizeof sig, err, errlen) < 0 ||
		png_chunk(fd, "IHDR", ihdr, sizeof ihdr, err, errlen) < 0 ||
		png_chunk(fd, "IDAT", z, zlen, err, errlen) < 0 ||
		png_chunk(fd, "IEND", NULL, 0, err, errlen) < 0)
		goto fail;
	rc = 0;
fail:
	free(z);
	free(raw);
	return rc;
}

int cli_plot_png(int fd, const char *title, const cli_series *s, int ns, int width,
	int height, char *err, size_t errlen)
{
	static const unsigned char white[3] = {255, 255, 255};
	png_layout L;
	png_canvas c = {NULL, width, height, 0, 0, 0, 0, 1, NULL};
	int rc = -1;

	if (png_layout_make(title, s, ns, width, height, &L, err, errlen) < 0)
		return -1;
	c.rgb = malloc((size_t)width * (size_t)height * 3);
	if (!c.rgb) {
		snprintf(err, errlen, "out of memory for a %dx%d png", width, height);
		goto fail;
	}
	png_clip(&c, 0, 0, width, height);
	png_fill(&c, 0, 0, width, height, white);
	png_draw_frame(&c, &L, s, ns);
	/* the series inside the plot area only; later series over earlier ones */
	png_clip(&c, L.f.left, L.f.top, L.f.left + L.f.width, L.f.top + L.f.height);
	c.brush = L.sc + 1;
	for (int k = 0; k < ns; k++) {
		c.color = png_palette[k];
		plot_series(&L.f, &s[k], png_dot, &c);
	}
	png_clip(&c, 0, 0, width, height);
	if (png_encode(fd, &c, err, errlen) < 0)
		goto fail;
	rc = 0;
fail:
	free(c.rgb);
	return rc;
}
