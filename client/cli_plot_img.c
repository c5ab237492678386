/* cli_plot_img.c - rematctl's plot images (see cli_plot.h): PNG and SVG drawn with Cairo,
 * anti-aliased lines, text in a real font (fontconfig's "sans" through Cairo's toy text
 * API), axis names, ticks on both axes, markers where a setting changed.
 *
 * Not here: the ranges, ticks and number formats (cli_plot.c, shared through
 * cli_plot_int.h), the braille text, and opening any file: Cairo draws into memory and
 * writes its PNG or SVG into a growing buffer, which goes to the caller's descriptor (the
 * caller opened it as it chose: rematctl refuses to follow a link). Only rematctl links
 * Cairo (tests/link.sh).
 */
#include "cli_plot.h"
#include "cli_plot_int.h"

#include <cairo-svg.h>
#include <cairo.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define IMG_MAX_XTICKS 8     /* step labels under the x axis at most */
#define IMG_MIN_AREA 16	     /* smallest plot area, pixels each side, worth drawing */
#define IMG_BIG_W 800	     /* from this size up the series' lines are 2.5 pixels wide */
#define IMG_BIG_H 600
#define IMG_FONT "sans"

/* tab10's first four (matplotlib's default cycle): blue, orange, green, red */
static const unsigned char img_palette[CLI_PLOT_MAX_SERIES][3] = {
	{31, 119, 180}, {255, 127, 14}, {44, 160, 44}, {214, 39, 40}};
static const unsigned char img_mark[3] = {CLI_PLOT_MARK_RGB};
static const double img_grid = 225 / 255.0; /* the grid's grey */
static const double img_ink = 40 / 255.0;   /* text: a soft black */

void cli_plot_color(int k, unsigned char rgb[3])
{
	int i = ((k % CLI_PLOT_MAX_SERIES) + CLI_PLOT_MAX_SERIES) % CLI_PLOT_MAX_SERIES;
	memcpy(rgb, img_palette[i], 3);
}

/* Everything the picture's parts are placed by: sizes in pixels, texts cleaned. */
typedef struct img_layout {
	cli_plot_frame f;			     /* ranges and the plot area */
	double fs;				     /* the font's size */
	double line;				     /* a line of text's height */
	double pad, gap, tick;			     /* border, gap between parts, tick length */
	double lw;				     /* the series' line width */
	int nyt, nxt;				     /* ticks on each axis */
	double yt[PLOT_MAX_TICKS], xt[IMG_MAX_XTICKS]; /* their values, from the low end */
	char ylab[PLOT_MAX_TICKS][CLI_PLOT_NUM_LEN];   /* their labels */
	char xlab[IMG_MAX_XTICKS][CLI_PLOT_NUM_LEN];
	char title[PLOT_NAME_MAX];		     /* "" for none, as the axis names */
	char xname[PLOT_NAME_MAX], yname[PLOT_NAME_MAX];
} img_layout;

/* The font at size fs on cr, with metrics unhinted so that text measures the same on
 * every surface (the frame of a PNG and of an SVG is one). */
static void img_font(cairo_t *cr, double fs, int bold)
{
	cairo_font_options_t *o = cairo_font_options_create();
	cairo_font_options_set_hint_metrics(o, CAIRO_HINT_METRICS_OFF);
	cairo_font_options_set_hint_style(o, CAIRO_HINT_STYLE_NONE);
	cairo_set_font_options(cr, o);
	cairo_font_options_destroy(o);
	cairo_select_font_face(cr, IMG_FONT, CAIRO_FONT_SLANT_NORMAL,
		bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
	cairo_set_font_size(cr, fs);
}

/* The advance of text in cr's font, pixels. */
static double img_text_w(cairo_t *cr, const char *text)
{
	cairo_text_extents_t e;
	cairo_text_extents(cr, text, &e);
	return e.x_advance;
}

/* The x ticks: as many nice steps as their labels leave room for (whole steps when the
 * range is of whole steps), labelled as steps. */
static void img_xticks(cairo_t *cr, img_layout *L)
{
	const cli_plot_frame *f = &L->f;
	char a[CLI_PLOT_NUM_LEN], b[CLI_PLOT_NUM_LEN];
	double step;
	double w = fmax(img_text_w(cr, cli_plot_step_format(f->x0, a, sizeof a)),
		img_text_w(cr, cli_plot_step_format(f->x1, b, sizeof b)));
	double room = (w + 2 * L->fs) * (f->x1 - f->x0) / (f->width - 1);
	if (f->x0 == nearbyint(f->x0) && f->x1 == nearbyint(f->x1))
		room = fmax(room, 1);
	L->nxt = cli_plot_ticks(f->x0, f->x1, room, IMG_MAX_XTICKS, L->xt, &step);
	for (int i = 0; i < L->nxt; i++)
		if (step >= 1 && step == nearbyint(step))
			cli_plot_step_format(L->xt[i], L->xlab[i], sizeof L->xlab[i]);
		else
			cli_plot_num_format(L->xt[i], step, L->xlab[i], sizeof L->xlab[i]);
}

/* Places the parts on a measuring context: the title on top; the y name, tick labels and
 * ticks on the left; ticks, step labels, the x name and the legend under the x axis; the
 * plot area in what is left. 0, or -1 with a message. */
static int img_place(cairo_t *cr, const cli_plot_image *im, img_layout *L, char *err,
	size_t errlen)
{
	cli_plot_frame *f = &L->f;
	char a[CLI_PLOT_NUM_LEN];
	double step, lw = 0;

	L->fs = fmin(14, fmax(9, fmin(im->width, im->height) / 45.0));
	L->line = ceil(L->fs * 1.25);
	L->pad = ceil(L->fs * 0.8);
	L->gap = ceil(L->fs * 0.3);
	L->tick = ceil(L->fs * 0.4);
	L->lw = im->width >= IMG_BIG_W && im->height >= IMG_BIG_H ? 2.5 : 2;
	img_font(cr, L->fs, 0);
	/* the top tick's label is centred on its row: half a line of room above the area */
	f->top = (int)(L->pad + (L->title[0] ? L->line * 1.2 + L->gap : 0) + L->line / 2);
	double bottom = 1 + L->tick + L->gap + L->line + (L->xname[0] ? L->line : 0) +
		L->gap + L->line + L->pad;
	f->height = im->height - f->top - (int)ceil(bottom);
	if (f->height < IMG_MIN_AREA)
		goto small;
	/* ticks a label and a gap apart, so that labels never touch */
	double room = (L->line + L->gap) * (f->y1 - f->y0) / (f->height - 1);
	L->nyt = cli_plot_ticks(f->y0, f->y1, room, PLOT_MAX_TICKS, L->yt, &step);
	for (int i = 0; i < L->nyt; i++) {
		cli_plot_num_format(L->yt[i], step, L->ylab[i], sizeof L->ylab[i]);
		lw = fmax(lw, img_text_w(cr, L->ylab[i]));
	}
	f->left = (int)ceil(L->pad + (L->yname[0] ? L->line + L->gap : 0) + lw + L->gap +
		L->tick + 1);
	/* room on the right for half the last step's label */
	double right = L->pad + img_text_w(cr, cli_plot_step_format(f->x1, a, sizeof a)) / 2;
	f->width = im->width - f->left - (int)ceil(right);
	if (f->width < IMG_MIN_AREA)
		goto small;
	img_xticks(cr, L);
	return 0;
small:
	snprintf(err, errlen, "image %dx%d is too small for its labels and title (at least %d "
		"pixels each way left for the plot)", im->width, im->height, IMG_MIN_AREA);
	return -1;
}

/* Checks im and lays it out (the frame and every label). 0, or -1 with a message. */
static int img_layout_make(const cli_plot_image *im, img_layout *L, char *err, size_t errlen)
{
	if (!im) {
		snprintf(err, errlen, "nothing to plot: no image described");
		return -1;
	}
	if (im->width < CLI_PLOT_IMG_MIN || im->width > CLI_PLOT_IMG_MAX ||
		im->height < CLI_PLOT_IMG_MIN || im->height > CLI_PLOT_IMG_MAX) {
		snprintf(err, errlen, "bad image size %dx%d (each side %d..%d pixels)", im->width,
			im->height, CLI_PLOT_IMG_MIN, CLI_PLOT_IMG_MAX);
		return -1;
	}
	if (im->format != CLI_PLOT_PNG && im->format != CLI_PLOT_SVG) {
		snprintf(err, errlen, "unknown image format %d (png or svg)", (int)im->format);
		return -1;
	}
	if (im->nmarks < 0 || im->nmarks > CLI_PLOT_MAX_MARKS || (im->nmarks && !im->marks)) {
		snprintf(err, errlen, "bad marks: %d (at most %d, with an array)", im->nmarks,
			CLI_PLOT_MAX_MARKS);
		return -1;
	}
	if (cli_plot_range(im->s, im->ns, &L->f, err, errlen) < 0)
		return -1;
	cli_plot_clean(im->title, 0, L->title, sizeof L->title);
	cli_plot_clean(im->xlabel, 0, L->xname, sizeof L->xname);
	cli_plot_clean(im->ylabel, 0, L->yname, sizeof L->yname);
	/* measured on a pixel of its own: the same numbers whatever the target */
	cairo_surface_t *m = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
	cairo_t *cr = cairo_create(m);
	int rc = img_place(cr, im, L, err, errlen);
	if (rc == 0 && cairo_status(cr) != CAIRO_STATUS_SUCCESS) {
		snprintf(err, errlen, "cannot measure the image's text: %s",
			cairo_status_to_string(cairo_status(cr)));
		rc = -1;
	}
	cairo_destroy(cr);
	cairo_surface_destroy(m);
	return rc;
}

int cli_plot_image_frame(const cli_plot_image *im, cli_plot_frame *f, char *err,
	size_t errlen)
{
	img_layout L;
	if (img_layout_make(im, &L, err, errlen) < 0)
		return -1;
	*f = L.f;
	return 0;
}

/* The centre of the pixel of data point (x, y): where a 1-pixel line is crisp. */
static void img_at(const cli_plot_frame *f, double x, double y, double *px, double *py)
{
	int ix, iy;
	cli_plot_map(f, x, y, &ix, &iy);
	*px = ix + 0.5;
	*py = iy + 0.5;
}

static void img_rgb(cairo_t *cr, const unsigned char c[3])
{
	cairo_set_source_rgb(cr, c[0] / 255.0, c[1] / 255.0, c[2] / 255.0);
}

/* A 1-pixel line from (x0, y0) to (x1, y1), in the current colour. */
static void img_hair(cairo_t *cr, double x0, double y0, double x1, double y1)
{
	cairo_set_line_width(cr, 1);
	cairo_move_to(cr, x0, y0);
	cairo_line_to(cr, x1, y1);
	cairo_stroke(cr);
}

/* text with its left end at x and its baseline at y; with rotated, written upwards from
 * (x, y) instead. */
static void img_text(cairo_t *cr, double x, double y, const char *text, int rotated)
{
	cairo_save(cr);
	cairo_move_to(cr, x, y);
	if (rotated)
		cairo_rotate(cr, -M_PI / 2);
	cairo_show_text(cr, text);
	cairo_restore(cr);
}

/* The grid, the axes, their ticks and tick labels. */
static void img_axes(cairo_t *cr, const img_layout *L)
{
	const cli_plot_frame *f = &L->f;
	double ax = f->left - 0.5, ay = f->top + f->height + 0.5, px, py;
	double mid = L->fs * 0.35; /* from a digit's middle down to its baseline */

	for (int i = 0; i < L->nyt; i++) {
		img_at(f, f->x0, L->yt[i], &px, &py);
		cairo_set_source_rgb(cr, img_grid, img_grid, img_grid);
		img_hair(cr, f->left, py, f->left + f->width, py);
		cairo_set_source_rgb(cr, 0, 0, 0);
		img_hair(cr, ax - L->tick, py, ax, py);
		cairo_set_source_rgb(cr, img_ink, img_ink, img_ink);
		img_text(cr, ax - L->tick - L->gap - img_text_w(cr, L->ylab[i]), py + mid,
			L->ylab[i], 0);
	}
	for (int i = 0; i < L->nxt; i++) {
		img_at(f, L->xt[i], f->y0, &px, &py);
		cairo_set_source_rgb(cr, img_grid, img_grid, img_grid);
		img_hair(cr, px, f->top, px, f->top + f->height);
		cairo_set_source_rgb(cr, 0, 0, 0);
		img_hair(cr, px, ay, px, ay + L->tick);
		cairo_set_source_rgb(cr, img_ink, img_ink, img_ink);
		double w = img_text_w(cr, L->xlab[i]);
		img_text(cr, px - w / 2, ay + L->tick + L->gap + L->fs * 0.8, L->xlab[i], 0);
	}
	cairo_set_source_rgb(cr, 0, 0, 0);
	img_hair(cr, ax, f->top, ax, ay + 0.5);
	img_hair(cr, ax - 0.5, ay, f->left + f->width, ay);
}

/* The title, the axis names and the legend (a swatch of each series' line and its
 * name). */
static void img_words(cairo_t *cr, const img_layout *L, const cli_plot_image *im)
{
	const cli_plot_frame *f = &L->f;
	char name[PLOT_NAME_MAX];
	double under = f->top + f->height + 1 + L->tick + L->gap + L->line;

	cairo_set_source_rgb(cr, img_ink, img_ink, img_ink);
	if (L->xname[0]) {
		under += L->line;
		img_text(cr, f->left + (f->width - img_text_w(cr, L->xname)) / 2, under - L->gap,
			L->xname, 0);
	}
	if (L->yname[0])
		img_text(cr, L->pad + L->fs * 0.8, f->top + (f->height + img_text_w(cr,
			L->yname)) / 2, L->yname, 1);
	double x = f->left, y = under + L->gap + L->fs * 0.8;
	for (int k = 0; k < im->ns; k++) {
		cli_plot_clean(im->s[k].name, 0, name, sizeof name);
		img_rgb(cr, img_palette[k]);
		cairo_set_line_width(cr, L->lw);
		cairo_move_to(cr, x, y - L->fs * 0.3);
		cairo_line_to(cr, x + 2 * L->fs, y - L->fs * 0.3);
		cairo_stroke(cr);
		cairo_set_source_rgb(cr, img_ink, img_ink, img_ink);
		img_text(cr, x + 2.4 * L->fs, y, name, 0);
		x += 2.4 * L->fs + img_text_w(cr, name) + 1.5 * L->fs;
	}
	if (L->title[0]) {
		img_font(cr, L->fs * 1.2, 1);
		double w = img_text_w(cr, L->title);
		img_text(cr, fmax(L->pad, (im->width - w) / 2), L->pad + L->fs, L->title, 0);
		img_font(cr, L->fs, 0);
	}
}

/* Each mark inside the x range: a dashed vertical line and its label written up along
 * it, at the top, left out where it would run into the label before. */
static void img_marks(cairo_t *cr, const img_layout *L, const cli_plot_image *im)
{
	const cli_plot_frame *f = &L->f;
	static const double dash[2] = {4, 3};
	char label[PLOT_NAME_MAX];
	double last = -INFINITY, px, py;

	for (int i = 0; i < im->nmarks; i++) {
		double x = im->marks[i].x;
		if (!(x >= f->x0 && x <= f->x1))
			continue;
		img_at(f, x, f->y0, &px, &py);
		img_rgb(cr, img_mark);
		cairo_set_dash(cr, dash, 2, 0);
		img_hair(cr, px, f->top, px, f->top + f->height);
		cairo_set_dash(cr, NULL, 0, 0);
		cli_plot_clean(im->marks[i].label, 0, label, sizeof label);
		double w = img_text_w(cr, label);
		if (!label[0] || px - last < L->line || w + 2 * L->gap > f->height)
			continue;
		img_text(cr, px + L->gap + L->fs * 0.8, f->top + L->gap + w, label, 1);
		last = px;
	}
}

/* Series s as a line in the current colour: consecutive finite points joined, a
 * non-finite one a gap, a point with no finite neighbour a dot. */
static void img_series(cairo_t *cr, const img_layout *L, const cli_series *s)
{
	size_t run = 0;
	double px = 0, py = 0;

	cairo_set_line_width(cr, L->lw);
	cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
	cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
	for (size_t i = 0; i <= s->n; i++) {
		int ok = i < s->n && isfinite(s->x[i]) && isfinite(s->y[i]);
		if (ok) {
			img_at(&L->f, s->x[i], s->y[i], &px, &py);
			if (run++)
				cairo_line_to(cr, px, py);
			else
				cairo_move_to(cr, px, py);
			continue;
		}
		if (run == 1) { /* a lone point */
			cairo_new_path(cr);
			cairo_arc(cr, px, py, L->lw, 0, 2 * M_PI);
			cairo_fill(cr);
		} else if (run > 1) {
			cairo_stroke(cr);
		}
		run = 0;
	}
}

/* The whole picture onto cr. */
static void img_draw(cairo_t *cr, const img_layout *L, const cli_plot_image *im)
{
	const cli_plot_frame *f = &L->f;

	cairo_set_source_rgb(cr, 1, 1, 1);
	cairo_paint(cr);
	img_font(cr, L->fs, 0);
	img_axes(cr, L);
	img_words(cr, L, im);
	img_marks(cr, L, im);
	/* the series inside the plot area only; later series over earlier ones */
	cairo_save(cr);
	cairo_rectangle(cr, f->left, f->top, f->width, f->height);
	cairo_clip(cr);
	for (int k = 0; k < im->ns; k++) {
		img_rgb(cr, img_palette[k]);
		img_series(cr, L, &im->s[k]);
	}
	cairo_restore(cr);
}

/* ---- output ---- */

/* What Cairo writes: a growing buffer. */
typedef struct img_buf {
	unsigned char *p;
	size_t n, cap;
} img_buf;

/* Appends n bytes to b (Cairo's write function). */
static cairo_status_t img_put(void *closure, const unsigned char *data, unsigned int n)
{
	img_buf *b = closure;
	if (n > b->cap - b->n) {
		size_t cap = b->cap ? b->cap : 1 << 16;
		while (n > cap - b->n)
			cap *= 2;
		unsigned char *p = realloc(b->p, cap);
		if (!p)
			return CAIRO_STATUS_NO_MEMORY;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, data, n);
	b->n += n;
	return CAIRO_STATUS_SUCCESS;
}

/* Appends text to b with XML's five special characters as entities. 0, or -1. */
static int img_put_xml(img_buf *b, const char *text)
{
	for (const char *p = text; *p; p++) {
		const char *e = *p == '<' ? "&lt;" : *p == '>' ? "&gt;" : *p == '&' ? "&amp;" :
			*p == '"' ? "&quot;" : *p == '\'' ? "&apos;" : NULL;
		if (img_put(b, (const unsigned char *)(e ? e : p), e ? (unsigned)strlen(e) : 1))
			return -1;
	}
	return 0;
}

/* Appends <tag>, the texts that are not empty joined by "; ", and </tag> to b. 0, or
 * -1. */
static int img_put_elem(img_buf *b, const char *tag, const char *const *text, int n)
{
	char open[16], close[16];
	int rc = 0, said = 0;
	snprintf(open, sizeof open, "<%s>", tag);
	snprintf(close, sizeof close, "</%s>\n", tag);
	rc |= img_put(b, (const unsigned char *)open, (unsigned)strlen(open)) ? -1 : 0;
	for (int i = 0; i < n && rc == 0; i++) {
		if (!text[i] || !*text[i])
			continue;
		rc |= (said++ ? img_put_xml(b, "; ") : 0) | img_put_xml(b, text[i]);
	}
	rc |= img_put(b, (const unsigned char *)close, (unsigned)strlen(close)) ? -1 : 0;
	return rc;
}

/* svg with a <title> and a <desc> (the axis names, the series, the marks) as the root's
 * first children, into out: Cairo draws text as glyph shapes, so this is where the words
 * are for a reader, a search or a screen reader. 0, or -1 (out of memory, or no root). */
static int img_svg_words(const img_buf *svg, const img_layout *L, const cli_plot_image *im,
	img_buf *out)
{
	const char *words[2 + CLI_PLOT_MAX_SERIES + CLI_PLOT_MAX_MARKS];
	char names[CLI_PLOT_MAX_SERIES][PLOT_NAME_MAX];
	char marks[CLI_PLOT_MAX_MARKS][PLOT_NAME_MAX + 48], at[CLI_PLOT_NUM_LEN];
	char label[PLOT_NAME_MAX];
	int n = 0;

	const unsigned char *root = svg->n ? memmem(svg->p, svg->n, "<svg", 4) : NULL;
	const unsigned char *end = root ? memchr(root, '>', svg->n - (size_t)(root - svg->p)) :
		NULL;
	if (!end)
		return -1;
	size_t head = (size_t)(end + 1 - svg->p);
	words[n++] = L->xname[0] ? L->xname : NULL;
	words[n++] = L->yname[0] ? L->yname : NULL;
	for (int k = 0; k < im->ns; k++)
		words[n++] = cli_plot_clean(im->s[k].name, 0, names[k], sizeof names[k]);
	for (int i = 0; i < im->nmarks; i++) {
		cli_plot_clean(im->marks[i].label, 0, label, sizeof label);
		snprintf(marks[i], sizeof marks[i], "%s at step %s", label[0] ? label : "mark",
			cli_plot_step_format(im->marks[i].x, at, sizeof at));
		words[n++] = marks[i];
	}
	const char *title = L->title;
	if (img_put(out, svg->p, (unsigned)head) || img_put(out, (const unsigned char *)"\n", 1) ||
		img_put_elem(out, "title", &title, 1) || img_put_elem(out, "desc", words, n) ||
		img_put(out, svg->p + head, (unsigned)(svg->n - head)))
		return -1;
	return 0;
}

/* Writes all n bytes to fd (retrying short writes and EINTR). 0, or -1 with a message. */
static int img_write_all(int fd, const unsigned char *p, size_t n, const char *what,
	char *err, size_t errlen)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			snprintf(err, errlen, "cannot write %s: %s", what,
				w < 0 ? strerror(errno) : "nothing written");
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Draws L's picture on a surface of im's format whose bytes go to b. 0, or -1 with
 * Cairo's reason. */
static int img_render(const cli_plot_image *im, const img_layout *L, img_buf *b, char *err,
	size_t errlen)
{
	cairo_surface_t *sf;
	cairo_status_t st;

	if (im->format == CLI_PLOT_SVG) {
		sf = cairo_svg_surface_create_for_stream(img_put, b, im->width, im->height);
		cairo_svg_surface_restrict_to_version(sf, CAIRO_SVG_VERSION_1_1);
		cairo_svg_surface_set_document_unit(sf, CAIRO_SVG_UNIT_PX);
	} else {
		sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, im->width, im->height);
	}
	cairo_t *cr = cairo_create(sf);
	img_draw(cr, L, im);
	st = cairo_status(cr);
	cairo_destroy(cr);
	if (st == CAIRO_STATUS_SUCCESS && im->format == CLI_PLOT_PNG)
		st = cairo_surface_write_to_png_stream(sf, img_put, b);
	cairo_surface_finish(sf); /* an SVG's last bytes */
	if (st == CAIRO_STATUS_SUCCESS)
		st = cairo_surface_status(sf);
	cairo_surface_destroy(sf);
	if (st != CAIRO_STATUS_SUCCESS) {
		snprintf(err, errlen, "cannot draw the %dx%d image: %s", im->width, im->height,
			cairo_status_to_string(st));
		return -1;
	}
	return 0;
}

int cli_plot_image_write(int fd, const cli_plot_image *im, char *err, size_t errlen)
{
	img_layout L;
	img_buf b = {NULL, 0, 0}, svg = {NULL, 0, 0};
	int rc = -1;

	if (img_layout_make(im, &L, err, errlen) < 0)
		return -1;
	if (img_render(im, &L, &b, err, errlen) < 0)
		goto fail;
	if (im->format == CLI_PLOT_SVG && img_svg_words(&b, &L, im, &svg) < 0) {
		snprintf(err, errlen, "cannot write svg: out of memory, or Cairo wrote no root");
		goto fail;
	}
	if (im->format == CLI_PLOT_SVG)
		rc = img_write_all(fd, svg.p, svg.n, "svg", err, errlen);
	else
		rc = img_write_all(fd, b.p, b.n, "png", err, errlen);
fail:
	free(svg.p);
	free(b.p);
	return rc;
}
