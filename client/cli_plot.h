/* cli_plot.h - rematctl's plots of a job's curves (loss, tokens/s, memory against the step):
 * as Unicode braille text for a terminal, or as a PNG image.
 *
 * What it is: a drawing module with no dependency but libc, libm and zlib (the PNG's
 * compression and CRCs). What it is not: it fetches nothing and parses nothing; the caller
 * hands it arrays of numbers and an open stream or descriptor, and it never aborts on them.
 * Nothing it returns needs freeing; the series stay the caller's.
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
#define CLI_PLOT_PNG_MIN 64	   /* each side of a PNG, pixels */
#define CLI_PLOT_PNG_MAX 4096	   /* 48 MiB of RGB at most */
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
	int left, top;	 /* the area's top-left corner, pixels (PNG) or dots (text: 0, 0) */
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

/* The same picture as a PNG of width x height pixels (RGB, 8 bits a channel) written to
 * the open descriptor fd: white background, light grey grid lines at the y ticks, black
 * axes, each series in cli_plot_png_color(k) 2 pixels wide, the title (when given), tick
 * labels (nice numbers, 3 to 5 where the height leaves room), the first and last step and
 * the legend in a built-in 5x7 bitmap font (printable ASCII; any other character shows as
 * '?'); from 800x600 up the font is doubled and lines 3 pixels wide. The file is the PNG
 * signature, IHDR, one IDAT (zlib, filter type 0 on every scanline) and IEND, each chunk
 * with its CRC. Returns 0, or -1 with a message in err: bad arguments as for
 * cli_plot_text, a side outside CLI_PLOT_PNG_MIN..CLI_PLOT_PNG_MAX or too small for the
 * labels, out of memory, or a write error (named with strerror); after a write error
 * part of the file may have been written. */
int cli_plot_png(int fd, const char *title, const cli_series *s, int ns, int width,
	int height, char *err, size_t errlen);

/* The frame cli_plot_png draws these arguments in (the same checks, the same answer), so
 * that a caller or a test can find a data point's pixel. Returns 0, or -1 with a message. */
int cli_plot_png_frame(const char *title, const cli_series *s, int ns, int width, int height,
	cli_plot_frame *f, char *err, size_t errlen);

/* The pixel (PNG) or dot (text) of the point (x, y) in frame f, rounded to the nearest;
 * points outside the ranges map outside the area. */
void cli_plot_map(const cli_plot_frame *f, double x, double y, int *px, int *py);

/* The RGB colour of series k (0..CLI_PLOT_MAX_SERIES-1; others wrap around) in a PNG. */
void cli_plot_png_color(int k, unsigned char rgb[3]);

/* An axis number, the one format of both pictures: enough decimals to tell ticks step
 * apart (step <= 0 or not finite: 3 significant digits), "%g"-like: "0", "2.5", "0.125",
 * "1200"; scientific from 1e5 up and below 1e-3, "1.2e+05", "2.5e-04"; "-" for NaN or
 * infinity. Returns buf. */
char *cli_plot_num_format(double v, double step, char *buf, size_t len);

#endif
