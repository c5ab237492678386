/* cli_plot.h - rematctl's plots of a job's curves (loss, tokens/s, memory against the step):
 * as Unicode braille text for a terminal (cli_plot.c), or as a PNG or SVG image drawn with
 * Cairo (cli_plot_img.c).
 *
 * What it is: a drawing module over libc, libm and, for images, Cairo (only rematctl links
 * it: tests/link.sh). What it is not: it fetches nothing, parses nothing and opens no
 * file; the caller hands it arrays of numbers and an open stream or descriptor, and it
 * never aborts on them. Nothing it returns needs freeing; the series stay the caller's.
 */
#ifndef CLI_PLOT_H
#define CLI_PLOT_H

#include <stddef.h>
#include <stdio.h>

#define CLI_PLOT_MAX_SERIES 4	   /* curves in one plot, each its own colour */
#define CLI_PLOT_TEXT_MIN_COLS 10  /* plot area of the text form, character cells */
#define CLI_PLOT_TEXT_MIN_ROWS 3
#define CLI_PLOT_TEXT_MAX_COLS 1000 /* well past any terminal; bounds the cell buffer */
#define CLI_PLOT_TEXT_MAX_ROWS 500
#define CLI_PLOT_IMG_MIN 64	   /* each side of an image, pixels */
#define CLI_PLOT_IMG_MAX 4096	   /* 64 MiB of pixels at most */
#define CLI_PLOT_MAX_MARKS 64	   /* vertical markers on an image */
#define CLI_PLOT_MARK_RGB 148, 103, 189 /* their colour: tab10's purple, no series' */
#define CLI_PLOT_NUM_LEN 32	   /* room for any cli_plot_num_format result */

typedef struct cli_series {
	const char *name;    /* legend: "train loss", "val loss", "tokens/s", "peak MiB" */
	const double *x, *y; /* n points, x increasing (the step); NaN or infinity is a gap */
	size_t n;
} cli_series;

/* Where the data lands: the plot area of a picture and the ranges it shows. */
typedef struct cli_plot_frame {
	double x0, x1;	 /* x at the left and right edge of the area (data min and max) */
	double y0, y1;	 /* y at the bottom and top edge (data range plus a margin) */
	int left, top;	 /* the area's top-left corner, pixels (image) or dots (text: 0, 0) */
	int width;	 /* the area's size in pixels or dots; the axes lie just outside it, */
	int height;	 /* at column left - 1 and row top + height */
} cli_plot_frame;

/* Draws up to CLI_PLOT_MAX_SERIES series on one x axis and one y axis as a braille plot
 * (U+2800..U+28FF, 2x4 dots a cell) of cols x rows character cells for the plot area, to
 * out. Lines, top to bottom:
 *   the title, when title is neither NULL nor ""
 *   rows lines: a y tick label or blanks, then '┤' at a tick or '│', the cells, then
 *     after a blank the marker of each series whose last point falls in that row (so that
 *     a curve can be told from the others without colour). Ticks are nice numbers, 3 to 5
 *     of them from 7 rows up, each in a row of its own (fewer on shorter plots)
 *   the x axis ('└' and '─'), and below it the first and last step
 *   the legend: each series' marker and name
 * The y range is the data's with a 5% margin, the x range the data's min to max.
 * Consecutive points are joined (Bresenham in dot space) so a sparse series still reads as
 * a curve; a NaN y breaks the line. With color != 0 each series is drawn in its own ANSI
 * colour (a cell several series share takes the last one's); without, they share one ink.
 * Control characters in the title and names are shown as '?'. Returns 0, or -1 with a
 * message in err on bad arguments (cols < 10, rows < 3, no series, more than 4, no finite
 * point) or when writing out fails. */
int cli_plot_text(FILE *out, const char *title, const cli_series *s, int ns, int cols,
	int rows, int color, char *err, size_t errlen);

/* A vertical marker on an image: a step where a setting changed. */
typedef struct cli_plot_mark {
	double x;	   /* the step; a mark outside the data's x range is not drawn */
	const char *label; /* what changed ("resumed", "policy ..."); NULL or "" for none */
} cli_plot_mark;

typedef enum cli_plot_format {
	CLI_PLOT_PNG, /* 8-bit RGB PNG */
	CLI_PLOT_SVG, /* SVG 1.1, sized in pixels */
} cli_plot_format;

/* What an image shows and how big. */
typedef struct cli_plot_image {
	const char *title;	     /* on top; NULL or "" for none */
	const char *xlabel, *ylabel; /* the axes' names; NULL or "" for none */
	const cli_series *s;	     /* 1..CLI_PLOT_MAX_SERIES curves */
	int ns;
	const cli_plot_mark *marks;  /* 0..CLI_PLOT_MAX_MARKS markers, x increasing */
	int nmarks;
	int width, height;	     /* pixels, CLI_PLOT_IMG_MIN..CLI_PLOT_IMG_MAX each */
	cli_plot_format format;
} cli_plot_image;

/* The picture of cli_plot_text as an image drawn with Cairo, written to the open
 * descriptor fd (Cairo never opens a file: it draws into memory, and the bytes are
 * written to fd, so the caller decides how the file is opened). White background, light
 * grey grid lines at the y ticks and x ticks (nice numbers: 3 to 5 y ticks where the
 * height leaves room, up to 8 steps along x, as many as their labels leave room for),
 * black axes, each series an anti-aliased line in cli_plot_color(k) (2 pixels wide, 2.5
 * from 800x600 up; a point with no finite neighbour a dot; a NaN a gap), each mark a
 * dashed vertical line in CLI_PLOT_MARK_RGB with its label written up along it (left out
 * where it would run into the one before), the title, tick labels, axis names and the
 * legend in the "sans" font. Control characters in the texts show as '?'. An SVG also
 * carries the texts as a <title> and a <desc> (Cairo draws its glyphs as shapes). Returns
 * 0, or -1 with a message in err: bad arguments as for cli_plot_text, a side outside
 * CLI_PLOT_IMG_MIN..CLI_PLOT_IMG_MAX or too small for the labels, more than
 * CLI_PLOT_MAX_MARKS marks, an unknown format, Cairo's failure (out of memory), or a write
 * error (named with strerror); after a write error part of the file may be written. */
int cli_plot_image_write(int fd, const cli_plot_image *im, char *err, size_t errlen);

/* The frame cli_plot_image_write draws im in (the same checks, the same answer for either
 * format), so that a caller or a test can find a data point's pixel. Returns 0, or -1 with
 * a message. */
int cli_plot_image_frame(const cli_plot_image *im, cli_plot_frame *f, char *err,
	size_t errlen);

/* The pixel (image) or dot (text) of the point (x, y) in frame f, rounded to the nearest;
 * points outside the ranges map outside the area. */
void cli_plot_map(const cli_plot_frame *f, double x, double y, int *px, int *py);

/* The RGB colour of series k (0..CLI_PLOT_MAX_SERIES-1; others wrap around) in an image. */
void cli_plot_color(int k, unsigned char rgb[3]);

/* An axis number, the one format of both pictures: enough decimals to tell ticks step
 * apart (step <= 0 or not finite: 3 significant digits), "%g"-like: "0", "2.5", "0.125",
 * "1200"; scientific from 1e5 up and below 1e-3, "1.2e+05", "2.5e-04"; "-" for NaN or
 * infinity. Returns buf. */
char *cli_plot_num_format(double v, double step, char *buf, size_t len);

#endif
