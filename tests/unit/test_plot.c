/* test_plot.c - tests of rematctl's plots (client/cli_plot.c, cli_plot_img.c): the PNG
 * read back and checked chunk by chunk and pixel by pixel, the SVG parsed as XML, the
 * braille text parsed cell by cell, and the axis number format.
 *
 * What it covers: the PNG's signature, IHDR, chunk CRCs, filters and inflated size;
 * background, grid, axes, ticks on both axes and series pixels where
 * cli_plot_image_frame says they are; anti-aliased lines (blended pixels beside them);
 * text drawn in a font where the title and the axis names go; marks as dashed lines in
 * their colour with their labels; grid lines far enough apart at any height; lines joining
 * sparse points and gaps at NaN, in both pictures; the SVG well-formed (expat), its root,
 * size, series strokes, glyphs, and its words in <title> and <desc>; one frame for both
 * formats; the text's lines, title, legend, end markers, tick labels on the rows they
 * name, colours and cleaned escapes; every argument refused and write errors.
 * What it does not: how the pictures look (a person looks at them), nor where the numbers
 * come from (rematctl plot's end-to-end tests).
 */
#include "tests.h"

#include <errno.h>
#include <expat.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "cli_plot.h"

#define NPT 101 /* points of the test lines, x = 0..100 */
#define W 320	/* the images' size, unless a test says otherwise */
#define H 200

static double line_x[NPT], line_up[NPT], line_down[NPT];

/* y = x and y = 100 - x on x = 0..100: they cross at (50, 50). */
static void lines_init(cli_series s[2])
{
	for (int i = 0; i < NPT; i++) {
		line_x[i] = i;
		line_up[i] = i;
		line_down[i] = 100 - i;
	}
	s[0] = (cli_series){"y = x", line_x, line_up, NPT};
	s[1] = (cli_series){"y = 100 - x", line_x, line_down, NPT};
}

/* ---- images ---- */

/* An image of the test's usual kind: a title, both axis names, no marks. */
static cli_plot_image img_of(const cli_series *s, int ns, int w, int h, cli_plot_format fmt)
{
	cli_plot_image im = {"test plot", "step", "value", s, ns, NULL, 0, w, h, fmt};
	return im;
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Renders im into a temporary file (unlinked at once, so a failed test leaves nothing)
 * and reads it back whole. Returns the bytes (malloc'd, NUL-terminated), their count in
 * *len. */
static unsigned char *img_render(const cli_plot_image *im, size_t *len)
{
	const char *dir = getenv("REMAT_TMP");
	char path[4096], err[256] = "";
	struct stat st;

	snprintf(path, sizeof path, "%s/plot-XXXXXX", dir && *dir ? dir : "/tmp");
	int fd = mkstemp(path);
	ck_assert_msg(fd >= 0, "mkstemp %s: %s", path, strerror(errno));
	unlink(path);
	int rc = cli_plot_image_write(fd, im, err, sizeof err);
	ck_assert_msg(rc == 0, "cli_plot_image_write: %s", err);
	ck_assert_int_eq(fstat(fd, &st), 0);
	unsigned char *buf = malloc((size_t)st.st_size + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	buf[st.st_size] = '\0';
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

/* PNG's Paeth predictor. */
static int paeth(int a, int b, int c)
{
	int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
	return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/* Undoes the filter of each of h scanlines (of 3 * w bytes behind a filter byte) into
 * rgb. */
static void png_unfilter(const unsigned char *raw, int w, int h, unsigned char *rgb)
{
	size_t row = 3 * (size_t)w;
	for (int y = 0; y < h; y++) {
		const unsigned char *in = raw + (size_t)y * (row + 1);
		unsigned char *out = rgb + (size_t)y * row, *up = y ? out - row : NULL;
		ck_assert_msg(in[0] <= 4, "row %d: filter type %d", y, in[0]);
		for (size_t i = 0; i < row; i++) {
			int a = i >= 3 ? out[i - 3] : 0, b = up ? up[i] : 0;
			int c = up && i >= 3 ? up[i - 3] : 0, x = in[1 + i];
			int pred = in[0] == 0 ? 0 : in[0] == 1 ? a : in[0] == 2 ? b :
				in[0] == 3 ? (a + b) / 2 : paeth(a, b, c);
			out[i] = (unsigned char)(x + pred);
		}
	}
}

/* Checks png is a well-formed 8-bit RGB PNG of w x h (signature, IHDR first, every CRC,
 * IEND last, the inflated size) and returns its pixels, w * h * 3 bytes top row first
 * (malloc'd). */
static unsigned char *png_decode(const unsigned char *png, size_t len, int w, int h)
{
	static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
	unsigned char *idat = NULL;
	size_t nidat = 0, pos = 8;
	int chunks = 0, ended = 0;

	ck_assert_msg(len > 8 && memcmp(png, sig, 8) == 0, "no PNG signature");
	while (pos < len) {
		ck_assert_msg(!ended, "bytes after IEND at %zu", pos);
		ck_assert_msg(pos + 12 <= len, "chunk header cut at %zu", pos);
		uint32_t n = be32(png + pos);
		const unsigned char *type = png + pos + 4, *data = png + pos + 8;
		ck_assert_msg(n <= len - pos - 12, "chunk %.4s runs past the end", type);
		uLong crc = crc32(crc32(0L, type, 4), data, n);
		ck_assert_msg(be32(data + n) == (uint32_t)crc, "chunk %d (%.4s): CRC %08x, want "
			"%08lx", chunks, type, be32(data + n), crc);
		if (chunks == 0) {
			ck_assert_msg(memcmp(type, "IHDR", 4) == 0 && n == 13, "IHDR not first");
			ck_assert_int_eq(be32(data), (uint32_t)w);
			ck_assert_int_eq(be32(data + 4), (uint32_t)h);
			ck_assert_int_eq(data[8], 8); /* bit depth */
			ck_assert_int_eq(data[9], 2); /* colour type RGB */
			ck_assert_int_eq(data[10] | data[11] | data[12], 0); /* no interlace */
		} else if (memcmp(type, "IDAT", 4) == 0) {
			idat = realloc(idat, nidat + n + 1);
			ck_assert_ptr_nonnull(idat);
			memcpy(idat + nidat, data, n);
			nidat += n;
		} else if (memcmp(type, "IEND", 4) == 0) {
			ck_assert_int_eq(n, 0);
			ended = 1;
		}
		pos += 12 + n;
		chunks++;
	}
	ck_assert_msg(ended, "no IEND");
	ck_assert_msg(nidat > 0, "no IDAT");
	size_t want = (size_t)h * (1 + 3 * (size_t)w);
	uLongf got = (uLongf)want + 64; /* room for more, to see a wrong size */
	unsigned char *raw = malloc(got), *rgb = malloc(want);
	ck_assert(raw && rgb);
	int zrc = uncompress(raw, &got, idat, (uLong)nidat);
	ck_assert_msg(zrc == Z_OK, "uncompress: zlib error %d", zrc);
	ck_assert_msg(got == want, "inflated %lu bytes, want %zu", (unsigned long)got, want);
	png_unfilter(raw, w, h, rgb);
	free(raw);
	free(idat);
	return rgb;
}

/* im drawn as a PNG and decoded: its pixels (malloc'd). */
static unsigned char *img_pixels(const cli_plot_image *im)
{
	size_t len;
	unsigned char *png = img_render(im, &len);
	unsigned char *rgb = png_decode(png, len, im->width, im->height);
	free(png);
	return rgb;
}

/* The RGB of pixel (x, y) of an image w wide. */
static const unsigned char *pixel(const unsigned char *rgb, int w, int x, int y)
{
	return rgb + ((size_t)y * (size_t)w + (size_t)x) * 3;
}

/* The picture's colours, by which a pixel is told: the series 0..3, then these. */
enum { C_WHITE = CLI_PLOT_MAX_SERIES, C_GRID, C_BLACK, C_MARK, C_N };

static void color_of(int c, unsigned char rgb[3])
{
	static const unsigned char fixed[][3] = {{255, 255, 255}, {225, 225, 225}, {0, 0, 0},
		{CLI_PLOT_MARK_RGB}};
	if (c < CLI_PLOT_MAX_SERIES)
		cli_plot_color(c, rgb);
	else
		memcpy(rgb, fixed[c - C_WHITE], 3);
}

/* Which of the picture's colours p is nearest to. */
static int nearest(const unsigned char *p)
{
	int best = 0, bestd = 1 << 30;
	for (int c = 0; c < C_N; c++) {
		unsigned char q[3];
		color_of(c, q);
		int d = 0;
		for (int i = 0; i < 3; i++)
			d += (p[i] - q[i]) * (p[i] - q[i]);
		if (d < bestd) {
			bestd = d;
			best = c;
		}
	}
	return best;
}

/* A grid pixel: light grey (the series' colours are not grey, the background white). */
static int is_grid(const unsigned char *p)
{
	return p[0] == p[1] && p[1] == p[2] && p[0] >= 192 && p[0] < 255;
}

/* Ink: a dark pixel (text, axes). */
static int is_ink(const unsigned char *p)
{
	return p[0] < 128 && p[1] < 128 && p[2] < 128;
}

/* Asserts that the data point (x, y) of frame f shows series k's colour (anti-aliased:
 * nearer to it than to any other of the picture's colours). */
static void assert_series_at(const unsigned char *rgb, const cli_plot_frame *f, double x,
	double y, int k)
{
	int px, py;
	cli_plot_map(f, x, y, &px, &py);
	const unsigned char *p = pixel(rgb, W, px, py);
	ck_assert_msg(nearest(p) == k, "(%g, %g) at pixel (%d, %d) is %d,%d,%d, not series %d",
		x, y, px, py, p[0], p[1], p[2], k);
}

/* Ink pixels in the rectangle [x0, x1) x [y0, y1) of an image w wide. */
static int ink_in(const unsigned char *rgb, int w, int x0, int y0, int x1, int y1)
{
	int n = 0;
	for (int y = y0; y < y1; y++)
		for (int x = x0; x < x1; x++)
			n += is_ink(pixel(rgb, w, x, y));
	return n;
}

/* Runs of pixels satisfying is along a row (dx 1) or a column (dy 1) from (x, y), n long. */
static int runs(const unsigned char *rgb, int w, int x, int y, int dx, int dy, int n,
	int (*is)(const unsigned char *))
{
	int count = 0, in = 0;
	for (int i = 0; i < n; i++) {
		int on = is(pixel(rgb, w, x + i * dx, y + i * dy));
		count += on && !in;
		in = on;
	}
	return count;
}

static int is_black(const unsigned char *p)
{
	return p[0] == 0 && p[1] == 0 && p[2] == 0;
}

START_TEST(test_cli_plot_png_structure)
{
	cli_series s[2];
	lines_init(s);
	for (int k = 0; k < 2; k++) {
		/* an odd size too: no row padding assumed */
		cli_plot_image im = img_of(s, 2, k ? 333 : W, k ? 211 : H, CLI_PLOT_PNG);
		free(img_pixels(&im));
	}
}
END_TEST

START_TEST(test_cli_plot_png_pixels)
{
	cli_series s[2];
	cli_plot_frame f;
	char err[256] = "";
	int px, py;

	lines_init(s);
	cli_plot_image im = img_of(s, 2, W, H, CLI_PLOT_PNG);
	unsigned char *rgb = img_pixels(&im);
	ck_assert_msg(cli_plot_image_frame(&im, &f, err, sizeof err) == 0, "%s", err);
	ck_assert(f.left > 0 && f.top > 0 && f.left + f.width < W && f.top + f.height < H);
	/* x from the first to the last step, y the data's with a small margin */
	ck_assert(f.x0 == 0 && f.x1 == 100);
	ck_assert_msg(f.y0 < 0 && f.y0 > -10 && f.y1 > 100 && f.y1 < 110, "y %g..%g", f.y0,
		f.y1);
	/* between the lines, off the grid, and outside the area: white */
	cli_plot_map(&f, 7, 33, &px, &py);
	ck_assert_int_eq(nearest(pixel(rgb, W, px, py)), C_WHITE);
	ck_assert_int_eq(nearest(pixel(rgb, W, W - 2, H / 2)), C_WHITE);
	/* the crossing shows either line; each line's own stretch its colour */
	cli_plot_map(&f, 50, 50, &px, &py);
	int cross = nearest(pixel(rgb, W, px, py));
	ck_assert_msg(cross == 0 || cross == 1, "(50, 50) is colour %d", cross);
	assert_series_at(rgb, &f, 10, 10, 0);
	assert_series_at(rgb, &f, 93, 93, 0);
	assert_series_at(rgb, &f, 93, 7, 1);
	assert_series_at(rgb, &f, 10, 90, 1);
	/* the axes, just outside the area */
	int ay = f.top + f.height;
	ck_assert(is_black(pixel(rgb, W, f.left - 1, f.top + f.height / 3)));
	ck_assert(is_black(pixel(rgb, W, f.left + f.width / 3, ay)));
	ck_assert(!is_black(pixel(rgb, W, f.left + f.width / 3, ay - 3)));
	/* 3 to 5 grid lines down a column off both lines and the x ticks, as many y ticks
	 * left of the y axis */
	cli_plot_map(&f, 47, 0, &px, &py);
	int ny = runs(rgb, W, px, f.top, 0, 1, f.height, is_grid);
	ck_assert_msg(ny >= 3 && ny <= 5, "%d grid lines", ny);
	ck_assert_int_eq(runs(rgb, W, f.left - 3, f.top, 0, 1, f.height, is_black), ny);
	/* x ticks under the x axis: at the first and last step, 3 to 8 of them, each with a
	 * grid line up the area */
	int nx = runs(rgb, W, f.left, ay + 2, 1, 0, f.width, is_black);
	ck_assert_msg(nx >= 3 && nx <= 8, "%d x ticks", nx);
	ck_assert(is_black(pixel(rgb, W, f.left, ay + 2)));
	ck_assert(is_black(pixel(rgb, W, f.left + f.width - 1, ay + 2)));
	cli_plot_map(&f, 30, 70, &px, &py);
	ck_assert_int_eq(runs(rgb, W, f.left, py, 1, 0, f.width, is_grid), nx);
	/* step labels under the ticks */
	ck_assert(ink_in(rgb, W, f.left, ay + 4, f.left + f.width, H) > 20);
	free(rgb);
}
END_TEST

/* A pixel strictly between series k's colour and white, on the straight line between them
 * (not the grid's grey): what anti-aliasing leaves beside a line. */
static int blended(const unsigned char *p, int k)
{
	unsigned char c[3];
	double lo = 1, hi = 0;
	cli_plot_color(k, c);
	for (int i = 0; i < 3; i++) {
		if (255 - c[i] < 60)
			continue;
		double t = (p[i] - c[i]) / (255.0 - c[i]);
		lo = fmin(lo, t);
		hi = fmax(hi, t);
	}
	return lo > 0.05 && hi < 0.95 && hi - lo < 0.12;
}

START_TEST(test_cli_plot_png_antialiased)
{
	cli_series s[2];
	cli_plot_frame f;
	char err[256] = "";
	int n = 0, px0, py0, px1, py1;

	lines_init(s);
	cli_plot_image im = img_of(s, 1, W, H, CLI_PLOT_PNG);
	unsigned char *rgb = img_pixels(&im);
	ck_assert_msg(cli_plot_image_frame(&im, &f, err, sizeof err) == 0, "%s", err);
	/* around y = x from 5 to 45: a Bresenham line has its colour or white, nothing between */
	cli_plot_map(&f, 5, 45, &px0, &py0);
	cli_plot_map(&f, 45, 5, &px1, &py1);
	for (int y = py0; y <= py1; y++)
		for (int x = px0; x <= px1; x++)
			n += blended(pixel(rgb, W, x, y), 0);
	ck_assert_msg(n >= px1 - px0, "%d blended pixels along %d columns", n, px1 - px0);
	free(rgb);
}
END_TEST

START_TEST(test_cli_plot_png_gap_and_sparse)
{
	static double x[NPT], flat[NPT], vx[3] = {0, 50, 100}, vy[3] = {0, 100, 0};
	static double lone_x[3] = {10, 20, 30}, lone_y[3] = {NAN, 80, NAN};
	cli_plot_frame f;
	char err[256] = "";
	int px, py;

	for (int i = 0; i < NPT; i++) {
		x[i] = i;
		flat[i] = i >= 40 && i <= 60 ? NAN : 30;
	}
	cli_series s[3] = {{"flat", x, flat, NPT}, {"peak", vx, vy, 3},
		{"lone", lone_x, lone_y, 3}};
	cli_plot_image im = img_of(s, 3, W, H, CLI_PLOT_PNG);
	unsigned char *rgb = img_pixels(&im);
	ck_assert_msg(cli_plot_image_frame(&im, &f, err, sizeof err) == 0, "%s", err);
	assert_series_at(rgb, &f, 20, 30, 0);
	assert_series_at(rgb, &f, 80, 30, 0);
	cli_plot_map(&f, 50, 30, &px, &py);
	ck_assert_msg(nearest(pixel(rgb, W, px, py)) != 0, "the NaN gap is drawn");
	/* three points, joined: halfway up each side */
	assert_series_at(rgb, &f, 25, 50, 1);
	assert_series_at(rgb, &f, 75, 50, 1);
	/* a point between gaps: a dot */
	assert_series_at(rgb, &f, 20, 80, 2);
	free(rgb);
}
END_TEST

START_TEST(test_cli_plot_png_grid_spacing)
{
	static const int heights[] = {80, 100, 120, 160, 200, 400};
	static double x[NPT], y[NPT];
	char err[256] = "";

	/* y = x with its middle missing, so that the column x = 47 shows the grid alone */
	for (int i = 0; i < NPT; i++) {
		x[i] = i;
		y[i] = i > 20 && i < 80 ? NAN : i;
	}
	cli_series s = {"ends", x, y, NPT};
	for (size_t h = 0; h < sizeof heights / sizeof heights[0]; h++) {
		const int hh = heights[h];
		cli_plot_frame f;
		int px, py, n = 0, in = 0, prev = -100;
		cli_plot_image im = img_of(&s, 1, W, hh, CLI_PLOT_PNG);
		im.title = im.xlabel = NULL; /* room for the area at 80 pixels */
		unsigned char *rgb = img_pixels(&im);
		ck_assert_msg(cli_plot_image_frame(&im, &f, err, sizeof err) == 0, "%s", err);
		cli_plot_map(&f, 47, 0, &px, &py);
		for (int yy = f.top; yy < f.top + f.height; yy++) {
			int grey = is_grid(pixel(rgb, W, px, yy));
			if (grey && !in) {
				/* a label's height (9) and a gap: labels never touch */
				ck_assert_msg(yy - prev >= 12, "%dx%d: grid lines %d and %d", W, hh,
					prev, yy);
				prev = yy;
				n++;
			}
			in = grey;
		}
		ck_assert_msg(n >= (hh >= 200 ? 3 : 1) && n <= 5, "%dx%d: %d grid lines", W, hh,
			n);
		free(rgb);
	}
}
END_TEST

START_TEST(test_cli_plot_png_words)
{
	cli_series s[2];
	cli_plot_frame f, g;
	char err[256] = "";
	int grey = 0;

	lines_init(s);
	cli_plot_image im = img_of(s, 2, W, H, CLI_PLOT_PNG), bare = im;
	bare.title = bare.xlabel = bare.ylabel = NULL;
	unsigned char *a = img_pixels(&im), *b = img_pixels(&bare);
	ck_assert(cli_plot_image_frame(&im, &f, err, sizeof err) == 0);
	ck_assert(cli_plot_image_frame(&bare, &g, err, sizeof err) == 0);
	/* the title above the area, the y axis' name left of its labels, the x axis' name
	 * under the step labels: room is made for each, and ink is there */
	ck_assert(f.top > g.top && f.left > g.left && f.height + f.top < g.height + g.top);
	ck_assert_int_gt(ink_in(a, W, 0, 0, W, f.top - 8), 30);
	ck_assert_int_eq(ink_in(b, W, 0, 0, W, g.top - 8), 0);
	ck_assert_int_gt(ink_in(a, W, 0, f.top, f.left - g.left, f.top + f.height),
		ink_in(b, W, 0, g.top, f.left - g.left, g.top + g.height) + 15);
	/* a font's anti-aliased edges: greys between ink and paper in the title */
	for (int y = 0; y < f.top - 8; y++)
		for (int x = 0; x < W; x++) {
			const unsigned char *p = pixel(a, W, x, y);
			grey += p[0] == p[1] && p[1] == p[2] && p[0] > 80 && p[0] < 200;
		}
	ck_assert_int_gt(grey, 10);
	free(a);
	free(b);
}
END_TEST

static int is_mark(const unsigned char *p)
{
	return nearest(p) == C_MARK;
}

START_TEST(test_cli_plot_png_marks)
{
	cli_series s[2];
	cli_plot_frame f;
	char err[256] = "";
	int px, py, qx, qy;
	cli_plot_mark marks[3] = {{30, "policy change"}, {90, NULL}, {150, "outside"}};

	lines_init(s);
	cli_plot_image im = img_of(s + 1, 1, W, H, CLI_PLOT_PNG); /* y = 100 - x */
	im.marks = marks;
	im.nmarks = 3;
	unsigned char *rgb = img_pixels(&im);
	ck_assert(cli_plot_image_frame(&im, &f, err, sizeof err) == 0);
	/* dashed: runs of the mark's colour down each column, most of it */
	for (int m = 0; m < 2; m++) {
		cli_plot_map(&f, marks[m].x, 0, &px, &py);
		int n = 0;
		for (int y = f.top; y < f.top + f.height; y++)
			n += is_mark(pixel(rgb, W, px, y));
		ck_assert_msg(n > f.height / 3 && n < f.height, "mark %d: %d of %d", m, n,
			f.height);
		ck_assert_int_gt(runs(rgb, W, px, f.top, 0, 1, f.height, is_mark), 5);
	}
	/* the label written up along the first, right of it at the top (in the mark's
	 * colour, above where the line y = 100 - x passes); none by the second */
	cli_plot_map(&f, 30, 0, &px, &py);
	cli_plot_map(&f, 90, 0, &qx, &qy);
	int label = 0, none = 0, lines = 0;
	for (int y = f.top; y < f.top + 40; y++)
		for (int x = 2; x < 16; x++) {
			label += is_mark(pixel(rgb, W, px + x, y));
			none += is_mark(pixel(rgb, W, qx + x, y));
		}
	ck_assert_msg(label > 20 && none == 0, "label pixels %d, by the unlabelled mark %d",
		label, none);
	/* two dashed lines, none past the data */
	for (int x = f.left; x < f.left + f.width; x++) {
		int n = 0;
		for (int y = f.top; y < f.top + f.height; y++)
			n += is_mark(pixel(rgb, W, x, y));
		lines += n > f.height / 2;
	}
	ck_assert_int_eq(lines, 2);
	free(rgb);
}
END_TEST

START_TEST(test_cli_plot_png_color_distinct)
{
	unsigned char c[CLI_PLOT_MAX_SERIES][3], again[3];
	for (int k = 0; k < CLI_PLOT_MAX_SERIES; k++) {
		cli_plot_color(k, c[k]);
		int grey = c[k][0] == c[k][1] && c[k][1] == c[k][2];
		ck_assert_msg(!grey, "series %d is grey", k);
		for (int j = 0; j < k; j++)
			ck_assert_msg(memcmp(c[j], c[k], 3) != 0, "series %d and %d share", j, k);
		ck_assert_msg(nearest(c[k]) == k, "series %d is nearer another colour", k);
	}
	cli_plot_color(CLI_PLOT_MAX_SERIES + 1, again);
	ck_assert_mem_eq(again, c[1], 3);
}
END_TEST

/* The SVG as expat sees it. */
typedef struct svg_doc {
	int depth, elements, uses;
	char root[16];
	char width[32], height[32];
	char title[512], desc[2048]; /* their text */
	char *into;		     /* where character data goes now, NULL nowhere */
	size_t room;
} svg_doc;

static void XMLCALL svg_start(void *ud, const XML_Char *name, const XML_Char **attr)
{
	svg_doc *d = ud;
	if (d->depth++ == 0) {
		snprintf(d->root, sizeof d->root, "%s", name);
		for (int i = 0; attr[i]; i += 2) {
			if (!strcmp(attr[i], "width"))
				snprintf(d->width, sizeof d->width, "%s", attr[i + 1]);
			if (!strcmp(attr[i], "height"))
				snprintf(d->height, sizeof d->height, "%s", attr[i + 1]);
		}
	}
	d->elements++;
	d->uses += !strcmp(name, "use");
	d->into = !strcmp(name, "title") ? d->title : !strcmp(name, "desc") ? d->desc : NULL;
	d->room = !strcmp(name, "title") ? sizeof d->title : sizeof d->desc;
}

static void XMLCALL svg_end(void *ud, const XML_Char *name)
{
	svg_doc *d = ud;
	(void)name;
	d->depth--;
	d->into = NULL;
}

static void XMLCALL svg_text(void *ud, const XML_Char *s, int n)
{
	svg_doc *d = ud;
	if (d->into)
		strncat(d->into, s, (size_t)n < d->room - strlen(d->into) - 1 ? (size_t)n :
			d->room - strlen(d->into) - 1);
}

/* Parses svg (len bytes) with expat, asserting it is well-formed. */
static void svg_parse(const unsigned char *svg, size_t len, svg_doc *d)
{
	memset(d, 0, sizeof *d);
	XML_Parser p = XML_ParserCreate("UTF-8");
	ck_assert_ptr_nonnull(p);
	XML_SetUserData(p, d);
	XML_SetElementHandler(p, svg_start, svg_end);
	XML_SetCharacterDataHandler(p, svg_text);
	int ok = XML_Parse(p, (const char *)svg, (int)len, 1) == XML_STATUS_OK;
	ck_assert_msg(ok, "not well-formed XML, line %lu: %s",
		(unsigned long)XML_GetCurrentLineNumber(p), XML_ErrorString(XML_GetErrorCode(p)));
	XML_ParserFree(p);
	ck_assert_int_eq(d->depth, 0);
}

/* v with 6 decimals, trailing zeros (and a bare point) dropped, as Cairo writes it. */
static void pct(double v, char *buf, size_t len)
{
	snprintf(buf, len, "%f", v);
	char *e = buf + strlen(buf);
	while (e > buf && e[-1] == '0')
		*--e = '\0';
	if (e > buf && e[-1] == '.')
		e[-1] = '\0';
}

START_TEST(test_cli_plot_svg)
{
	cli_series s[2];
	cli_plot_mark marks[2] = {{30, "policy <a&b>"}, {60, "resumed"}};
	svg_doc d;
	size_t len;
	char stroke[128];

	lines_init(s);
	cli_plot_image im = img_of(s, 2, 640, 400, CLI_PLOT_SVG);
	im.title = "loss <&> \"quoted\" 'too'";
	im.marks = marks;
	im.nmarks = 2;
	unsigned char *svg = img_render(&im, &len);
	svg_parse(svg, len, &d);
	ck_assert_str_eq(d.root, "svg");
	ck_assert_str_eq(d.width, "640px");
	ck_assert_str_eq(d.height, "400px");
	/* the words: the title as given (escaped in the file, whole once parsed); the axes,
	 * the series and the marks in the description */
	ck_assert_str_eq(d.title, im.title);
	static const char *const words[] = {"step", "value", "y = x", "y = 100 - x",
		"policy <a&b> at step 30", "resumed at step 60"};
	for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
		ck_assert_msg(strstr(d.desc, words[i]) != NULL, "desc '%s' lacks '%s'", d.desc,
			words[i]);
	/* the texts drawn: a glyph for each of their letters at least */
	int letters = 0;
	for (const char *t = "loss<&>\"quoted\"'too'stepvaluey=xy=100-xpolicy<a&b>resumed"; *t;
		t++)
		letters++;
	ck_assert_msg(d.uses >= letters, "%d glyphs drawn, the texts have %d", d.uses, letters);
	/* each series' line, in its colour */
	for (int k = 0; k < 2; k++) {
		unsigned char c[3];
		cli_plot_color(k, c);
		char pc[3][32];
		for (int i = 0; i < 3; i++) /* Cairo's numbers: no trailing zeros */
			pct(c[i] / 2.55, pc[i], sizeof pc[i]);
		snprintf(stroke, sizeof stroke, "stroke:rgb(%s%%,%s%%,%s%%)", pc[0], pc[1], pc[2]);
		ck_assert_msg(strstr((const char *)svg, stroke) != NULL, "no %s", stroke);
	}
	free(svg);
}
END_TEST

START_TEST(test_cli_plot_frame_either_format)
{
	cli_series s[2];
	cli_plot_frame a, b;
	char err[256] = "";
	lines_init(s);
	for (int w = 64; w <= 1600; w = w * 3 / 2 + 1) {
		cli_plot_image im = img_of(s, 2, w, w * 2 / 3 < 64 ? 64 : w * 2 / 3,
			CLI_PLOT_PNG);
		int ra = cli_plot_image_frame(&im, &a, err, sizeof err);
		im.format = CLI_PLOT_SVG;
		int rb = cli_plot_image_frame(&im, &b, err, sizeof err);
		ck_assert_int_eq(ra, rb);
		ck_assert_msg(ra < 0 || memcmp(&a, &b, sizeof a) == 0, "%dx%d: the frames differ",
			im.width, im.height);
	}
}
END_TEST

/* Asserts cli_plot_image_write refuses im with a message and writes nothing. */
static void img_bad(const cli_plot_image *im, const char *needle)
{
	char err[256] = "";
	FILE *f = tmpfile();
	ck_assert_ptr_nonnull(f);
	int rc = cli_plot_image_write(fileno(f), im, err, sizeof err);
	ck_assert_msg(rc == -1, "%d series %dx%d accepted", im ? im->ns : 0,
		im ? im->width : 0, im ? im->height : 0);
	ck_assert_msg(strstr(err, needle) != NULL, "message '%s' lacks '%s'", err, needle);
	ck_assert_int_eq(lseek(fileno(f), 0, SEEK_END), 0);
	fclose(f);
}

START_TEST(test_cli_plot_png_bad_args)
{
	static const double nan2[2] = {NAN, NAN}, x2[2] = {1, 2};
	cli_series s[CLI_PLOT_MAX_SERIES + 1];
	cli_plot_mark m[CLI_PLOT_MAX_MARKS + 1] = {{0, NULL}};
	lines_init(s);
	for (int k = 2; k <= CLI_PLOT_MAX_SERIES; k++)
		s[k] = s[0];
	cli_plot_image im = img_of(s, 2, 10, 10, CLI_PLOT_PNG);
	img_bad(NULL, "no image");
	img_bad(&im, "image size");
	im = img_of(s, 2, CLI_PLOT_IMG_MAX + 1, 200, CLI_PLOT_SVG);
	img_bad(&im, "image size");
	im = img_of(s, 2, W, CLI_PLOT_IMG_MIN - 1, CLI_PLOT_PNG);
	img_bad(&im, "image size");
	im = img_of(s, 2, W, H, (cli_plot_format)7);
	img_bad(&im, "unknown image format");
	im = img_of(s, 0, W, H, CLI_PLOT_PNG);
	img_bad(&im, "no series");
	im = img_of(NULL, 2, W, H, CLI_PLOT_PNG);
	img_bad(&im, "no series");
	im = img_of(s, CLI_PLOT_MAX_SERIES + 1, W, H, CLI_PLOT_PNG);
	img_bad(&im, "too many series");
	im = img_of(s, 2, W, H, CLI_PLOT_PNG);
	im.marks = m;
	im.nmarks = CLI_PLOT_MAX_MARKS + 1;
	img_bad(&im, "bad marks");
	im.marks = NULL;
	im.nmarks = 1;
	img_bad(&im, "bad marks");
	cli_series empty = {"none", NULL, NULL, 0};
	im = img_of(&empty, 1, W, H, CLI_PLOT_PNG);
	img_bad(&im, "no series has a finite point");
	cli_series nans = {"nan", x2, nan2, 2};
	im = img_of(&nans, 1, W, H, CLI_PLOT_PNG);
	img_bad(&im, "no series has a finite point");
	cli_series noarr = {"x", NULL, NULL, 5};
	im = img_of(&noarr, 1, W, H, CLI_PLOT_PNG);
	img_bad(&im, "no arrays");
	/* a title and wide y labels leave no plot area in the smallest image */
	static const double big[2] = {1.25e-300, 1.5e-300};
	cli_series tiny = {"t", x2, big, 2};
	im = img_of(&tiny, 1, CLI_PLOT_IMG_MIN, CLI_PLOT_IMG_MIN, CLI_PLOT_PNG);
	img_bad(&im, "too small");
	im = img_of(&tiny, 1, CLI_PLOT_IMG_MIN, 400, CLI_PLOT_SVG);
	img_bad(&im, "too small");
}
END_TEST

START_TEST(test_cli_plot_png_write_error)
{
	cli_series s[2];
	lines_init(s);
	for (int k = 0; k < 2; k++) {
		char err[256] = "";
		cli_plot_image im = img_of(s, 2, W, H, k ? CLI_PLOT_SVG : CLI_PLOT_PNG);
		int fd = open("/dev/null", O_RDONLY);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(cli_plot_image_write(fd, &im, err, sizeof err), -1);
		close(fd);
		ck_assert_msg(strstr(err, k ? "cannot write svg" : "cannot write png") &&
			strstr(err, strerror(EBADF)), "message '%s'", err);
	}
}
END_TEST

/* ---- text ---- */

/* The text plot of these arguments (must succeed), as a malloc'd string. */
static char *text_render(const char *title, const cli_series *s, int ns, int cols, int rows,
	int color)
{
	char *buf = NULL, err[256] = "";
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(f);
	int rc = cli_plot_text(f, title, s, ns, cols, rows, color, err, sizeof err);
	ck_assert_msg(rc == 0, "cli_plot_text: %s", err);
	ck_assert_int_eq(fclose(f), 0);
	return buf;
}

/* Splits text into at most max lines (in place). Returns the count. */
static int split_lines(char *text, char **line, int max)
{
	int n = 0;
	for (char *p = text; *p && n < max;) {
		line[n++] = p;
		char *nl = strchr(p, '\n');
		if (!nl)
			break;
		*nl = '\0';
		p = nl + 1;
	}
	return n;
}

/* The cells of a plot line after its axis character: bits[c] the braille dots, or -1 for
 * a blank; stops at cols cells or at the line's end. Returns the cells read. */
static int row_cells(const char *line, int *bits, int cols)
{
	const char *p = strstr(line, "┤");
	if (!p)
		p = strstr(line, "│");
	ck_assert_msg(p != NULL, "no axis in '%s'", line);
	p += strlen("│");
	int c = 0;
	for (; c < cols && *p; c++) {
		const unsigned char *u = (const unsigned char *)p;
		if (*p == ' ') {
			bits[c] = -1;
			p++;
		} else if (u[0] == 0xE2 && u[1] >= 0xA0 && u[1] <= 0xA3) {
			bits[c] = (u[1] & 3) << 6 | (u[2] & 0x3F);
			p += 3;
		} else {
			ck_abort_msg("cell %d of '%s' is neither blank nor braille", c, line);
		}
	}
	return c;
}

START_TEST(test_cli_plot_text_layout)
{
	enum { COLS = 40, ROWS = 10 };
	cli_series s[2];
	char *line[64];
	int bits[COLS], ticks = 0, braille = 0;
	double last = -INFINITY;

	lines_init(s);
	char *text = text_render("loss of job 3", s, 2, COLS, ROWS, 0);
	ck_assert_msg(strchr(text, '\033') == NULL, "escapes without colour");
	int n = split_lines(text, line, 64);
	/* title, the rows, the x axis, its labels, the legend */
	ck_assert_int_eq(n, 1 + ROWS + 3);
	ck_assert_str_eq(line[0], "loss of job 3");
	for (int r = ROWS; r >= 1; r--) {
		int c = row_cells(line[r], bits, COLS);
		for (int i = 0; i < c; i++)
			braille += bits[i] > 0;
		if (strstr(line[r], "┤")) {
			/* tick labels go up the page */
			double v = strtod(line[r], NULL);
			ck_assert_msg(v > last && v >= -5 && v <= 105, "tick '%s'", line[r]);
			last = v;
			ticks++;
		}
	}
	ck_assert_msg(ticks >= 3 && ticks <= 5, "%d ticks", ticks);
	ck_assert_msg(braille >= COLS, "%d inked cells", braille);
	ck_assert_ptr_nonnull(strstr(line[ROWS + 1], "└────"));
	ck_assert_ptr_nonnull(strstr(line[ROWS + 2], "0"));
	ck_assert_ptr_nonnull(strstr(line[ROWS + 2], "100"));
	ck_assert_ptr_nonnull(strstr(line[ROWS + 3], "* y = x"));
	ck_assert_ptr_nonnull(strstr(line[ROWS + 3], "+ y = 100 - x"));
	/* each line's end marker beside its last point: y = x ends top right */
	ck_assert_ptr_nonnull(strstr(line[1], " *"));
	ck_assert_ptr_nonnull(strstr(line[ROWS], " +"));
	free(text);
}
END_TEST

START_TEST(test_cli_plot_text_color)
{
	cli_series s[2];
	lines_init(s);
	char *text = text_render(NULL, s, 2, 30, 6, 1);
	/* each series' colour on braille cells (lead byte E2), not only on its legend marker */
	ck_assert_ptr_nonnull(strstr(text, "\033[34m\xe2"));
	ck_assert_ptr_nonnull(strstr(text, "\033[33m\xe2"));
	ck_assert_ptr_nonnull(strstr(text, "\033[0m"));
	/* no title: the first line is a plot line */
	ck_assert_msg(strstr(text, "┤") < strchr(text, '\n'), "first line is not the plot");
	free(text);
}
END_TEST

START_TEST(test_cli_plot_text_constant)
{
	enum { COLS = 20, ROWS = 6 };
	static const int dotrow[4] = {0x09, 0x12, 0x24, 0xC0}; /* both dots of one row */
	static double x[100], y[100];
	char *line[64];
	int bits[COLS], inked_rows = 0;

	for (int i = 0; i < 100; i++) {
		x[i] = i;
		y[i] = i >= 40 && i <= 59 ? NAN : 3.0;
	}
	cli_series s = {"flat", x, y, 100};
	char *text = text_render("flat", &s, 1, COLS, ROWS, 0);
	ck_assert_int_eq(split_lines(text, line, 64), 1 + ROWS + 3);
	for (int r = 1; r <= ROWS; r++) {
		int c = row_cells(line[r], bits, COLS), ink = 0, mask = -1;
		for (int i = 0; i < c; i++)
			ink |= bits[i] > 0;
		if (!ink)
			continue;
		inked_rows++;
		ck_assert_int_eq(c, COLS);
		/* x 0..39 reach dot 15 (cell 7), x 60..99 start at dot 24 (cell 12) */
		for (int i = 0; i < COLS; i++) {
			int gap = i >= 8 && i <= 11;
			ck_assert_msg(gap ? bits[i] < 0 : bits[i] > 0, "cell %d: %d", i, bits[i]);
			if (gap)
				continue;
			for (int d = 0; d < 4 && mask < 0; d++)
				if (bits[i] == dotrow[d])
					mask = dotrow[d];
			ck_assert_msg(bits[i] == mask, "cell %d has dots %02x, not one row", i,
				bits[i]);
		}
	}
	ck_assert_int_eq(inked_rows, 1);
	free(text);
}
END_TEST

START_TEST(test_cli_plot_text_tick_rows)
{
	static const double x[3] = {0, 1, 2}, zero[3] = {0, 0, 0};
	char *line[600];
	int bits[10];

	/* y from -1 to 1: ticks every 0.25 up to every 1, each on its own row, so the row
	 * a flat line at 0 is drawn in carries the label "0", whatever the height */
	cli_series s = {"zero", x, zero, 3};
	for (int rows = CLI_PLOT_TEXT_MIN_ROWS; rows <= 40; rows++) {
		char *text = text_render(NULL, &s, 1, 10, rows, 0);
		int n = split_lines(text, line, 600), ticks = 0, found = 0;
		ck_assert_int_eq(n, rows + 3);
		for (int r = 0; r < rows; r++) {
			int c = row_cells(line[r], bits, 10), ink = 0;
			for (int i = 0; i < c; i++)
				ink |= bits[i] > 0;
			ticks += strstr(line[r], "┤") != NULL;
			if (ink) {
				char *end;
				double v = strtod(line[r], &end);
				found = 1;
				ck_assert_msg(end != line[r] && v == 0 &&
					strncmp(end, " ┤", strlen(" ┤")) == 0,
					"%d rows: the line at 0 is in '%s'", rows, line[r]);
			}
		}
		ck_assert_msg(found, "%d rows: no line", rows);
		ck_assert_msg(ticks >= (rows >= 7 ? 3 : 1) && ticks <= 5, "%d rows: %d ticks",
			rows, ticks);
		free(text);
	}
}
END_TEST

START_TEST(test_cli_plot_text_sparse)
{
	enum { COLS = 20, ROWS = 5 };
	static const double x[3] = {0, 50, 100}, y[3] = {0, 50, 100};
	char *line[64];
	int bits[COLS], col_ink[COLS] = {0};

	cli_series s = {"val loss", x, y, 3};
	char *text = text_render("val", &s, 1, COLS, ROWS, 0);
	ck_assert_int_eq(split_lines(text, line, 64), 1 + ROWS + 3);
	for (int r = 1; r <= ROWS; r++) {
		int c = row_cells(line[r], bits, COLS);
		for (int i = 0; i < c; i++)
			col_ink[i] |= bits[i] > 0;
	}
	for (int i = 0; i < COLS; i++)
		ck_assert_msg(col_ink[i], "column %d empty: the points are not joined", i);
	free(text);
}
END_TEST

START_TEST(test_cli_plot_text_escapes_cleaned)
{
	static const double x[2] = {0, 1}, y[2] = {1, 2};
	cli_series s = {"a\033[2Jb", x, y, 2};
	char *text = text_render("t\033]0;x\007", &s, 1, 10, 3, 0);
	ck_assert_msg(strchr(text, '\033') == NULL && strchr(text, '\007') == NULL,
		"control characters passed through");
	ck_assert_ptr_nonnull(strstr(text, "a?[2Jb"));
	free(text);
}
END_TEST

/* Asserts cli_plot_text refuses these arguments with a message and writes nothing. */
static void text_bad(const cli_series *s, int ns, int cols, int rows, const char *needle)
{
	char *buf = NULL, err[256] = "";
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(f);
	int rc = cli_plot_text(f, "t", s, ns, cols, rows, 1, err, sizeof err);
	ck_assert_msg(rc == -1, "%d series %dx%d accepted", ns, cols, rows);
	ck_assert_msg(strstr(err, needle) != NULL, "message '%s' lacks '%s'", err, needle);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_uint_eq(len, 0);
	free(buf);
}

START_TEST(test_cli_plot_text_bad_args)
{
	static const double nan2[2] = {NAN, INFINITY}, x2[2] = {1, 2};
	cli_series s[CLI_PLOT_MAX_SERIES + 1];
	char err[64] = "";
	lines_init(s);
	for (int k = 2; k <= CLI_PLOT_MAX_SERIES; k++)
		s[k] = s[0];
	text_bad(s, 2, CLI_PLOT_TEXT_MIN_COLS - 1, 10, "bad plot size");
	text_bad(s, 2, 40, CLI_PLOT_TEXT_MIN_ROWS - 1, "bad plot size");
	text_bad(s, 2, CLI_PLOT_TEXT_MAX_COLS + 1, 10, "bad plot size");
	text_bad(s, 0, 40, 10, "no series");
	text_bad(s, CLI_PLOT_MAX_SERIES + 1, 40, 10, "too many series");
	cli_series empty = {"none", NULL, NULL, 0};
	text_bad(&empty, 1, 40, 10, "no series has a finite point");
	cli_series nans = {"nan", x2, nan2, 2};
	text_bad(&nans, 1, 40, 10, "no series has a finite point");
	ck_assert_int_eq(cli_plot_text(NULL, "t", s, 2, 40, 10, 0, err, sizeof err), -1);
	/* the smallest size is fine */
	free(text_render("t", s, 2, CLI_PLOT_TEXT_MIN_COLS, CLI_PLOT_TEXT_MIN_ROWS, 0));
}
END_TEST

START_TEST(test_cli_plot_map_corners)
{
	cli_plot_frame f = {0, 10, -1, 1, 5, 7, 101, 21};
	int x, y;
	cli_plot_map(&f, 0, 1, &x, &y);
	ck_assert(x == 5 && y == 7);
	cli_plot_map(&f, 10, -1, &x, &y);
	ck_assert(x == 5 + 100 && y == 7 + 20);
	cli_plot_map(&f, 5, 0, &x, &y);
	ck_assert(x == 5 + 50 && y == 7 + 10);
	cli_plot_map(&f, 1e300, -1e300, &x, &y);
	ck_assert(x > 5 + 100 && y > 7 + 20);
}
END_TEST

START_TEST(test_cli_plot_num_format_cases)
{
	static const struct {
		double v, step;
		const char *want;
	} c[] = {
	    {0, 25, "0"},
	    {25, 25, "25"},
	    {2.5, 0.5, "2.5"},
	    {3, 0.5, "3"},
	    {2.25, 0.25, "2.25"},
	    {100.1, 0.1, "100.1"},
	    {0.3000000000000004, 0.1, "0.3"},
	    {-1e-17, 0.5, "0"}, /* 0 reached by adding steps */
	    {1200, 200, "1200"},
	    {-0.5, 0.5, "-0.5"},
	    {120000, 10000, "1.2e+05"},
	    {125000, 25000, "1.25e+05"},
	    {0.00025, 0.00005, "2.5e-04"},
	    {1e6, 0, "1e+06"},
	    {3.14159, 0, "3.14"},
	    {12345, 0, "12345"},
	    {123456, 0, "1.23e+05"},
	    {0.0123456, 0, "0.0123"},
	    {NAN, 1, "-"},
	    {INFINITY, 0, "-"},
	};
	char buf[CLI_PLOT_NUM_LEN];
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		cli_plot_num_format(c[i].v, c[i].step, buf, sizeof buf);
		ck_assert_msg(strcmp(buf, c[i].want) == 0, "%.17g step %g: '%s', want '%s'",
			c[i].v, c[i].step, buf, c[i].want);
	}
}
END_TEST

Suite *suite_plot(void)
{
	Suite *s = suite_create("plot");
	TCase *tc = tcase_create("image");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_cli_plot_png_structure);
	tcase_add_test(tc, test_cli_plot_png_pixels);
	tcase_add_test(tc, test_cli_plot_png_antialiased);
	tcase_add_test(tc, test_cli_plot_png_gap_and_sparse);
	tcase_add_test(tc, test_cli_plot_png_grid_spacing);
	tcase_add_test(tc, test_cli_plot_png_words);
	tcase_add_test(tc, test_cli_plot_png_marks);
	tcase_add_test(tc, test_cli_plot_png_color_distinct);
	tcase_add_test(tc, test_cli_plot_svg);
	tcase_add_test(tc, test_cli_plot_frame_either_format);
	tcase_add_test(tc, test_cli_plot_png_bad_args);
	tcase_add_test(tc, test_cli_plot_png_write_error);
	suite_add_tcase(s, tc);

	tc = tcase_create("text");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_cli_plot_text_layout);
	tcase_add_test(tc, test_cli_plot_text_color);
	tcase_add_test(tc, test_cli_plot_text_constant);
	tcase_add_test(tc, test_cli_plot_text_tick_rows);
	tcase_add_test(tc, test_cli_plot_text_sparse);
	tcase_add_test(tc, test_cli_plot_text_escapes_cleaned);
	tcase_add_test(tc, test_cli_plot_text_bad_args);
	tcase_add_test(tc, test_cli_plot_map_corners);
	tcase_add_test(tc, test_cli_plot_num_format_cases);
	suite_add_tcase(s, tc);
	return s;
}
