/* test_plot.c - tests of rematctl's plots (client/cli_plot.c): the PNG read back and
 * checked chunk by chunk and pixel by pixel, the braille text parsed cell by cell, and
 * the axis number format.
 *
 * What it covers: the PNG's signature, IHDR, chunk CRCs and inflated size; background,
 * grid, axis and series pixels where cli_plot_png_frame says they are; grid lines (so tick
 * labels) far enough apart at any height; lines joining sparse points and gaps at NaN, in
 * both pictures; the text's lines, title, legend, end markers, tick labels on the rows
 * they name, colours and cleaned escapes; every argument refused and write errors.
 * What it does not: how the pictures look (a person looks at them), nor where the numbers
 * come from (rematctl plot's end-to-end tests).
 */
#include "tests.h"

#include <errno.h>
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

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Renders a PNG into a temporary file (unlinked at once, so a failed test leaves nothing)
 * and reads it back whole. Returns the bytes (malloc'd), their count in *len. */
static unsigned char *png_render(const cli_series *s, int ns, int w, int h, size_t *len)
{
	const char *dir = getenv("REMAT_TMP");
	char path[4096], err[256] = "";
	struct stat st;

	snprintf(path, sizeof path, "%s/plot-XXXXXX", dir && *dir ? dir : "/tmp");
	int fd = mkstemp(path);
	ck_assert_msg(fd >= 0, "mkstemp %s: %s", path, strerror(errno));
	unlink(path);
	int rc = cli_plot_png(fd, "test plot", s, ns, w, h, err, sizeof err);
	ck_assert_msg(rc == 0, "cli_plot_png: %s", err);
	ck_assert_int_eq(fstat(fd, &st), 0);
	unsigned char *buf = malloc((size_t)st.st_size + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

/* Checks png is a well-formed 8-bit RGB PNG of w x h (signature, IHDR first, every CRC,
 * IEND last) and returns its scanlines inflated (malloc'd), each filter byte checked 0. */
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
			ck_assert_int_eq(data[10] | data[11] | data[12], 0);
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
	unsigned char *raw = malloc(got);
	ck_assert_ptr_nonnull(raw);
	int zrc = uncompress(raw, &got, idat, (uLong)nidat);
	ck_assert_msg(zrc == Z_OK, "uncompress: zlib error %d", zrc);
	ck_assert_msg(got == want, "inflated %lu bytes, want %zu", (unsigned long)got, want);
	for (int j = 0; j < h; j++)
		ck_assert_msg(raw[(size_t)j * (1 + 3 * (size_t)w)] == 0, "row %d filter %d", j,
			raw[(size_t)j * (1 + 3 * (size_t)w)]);
	free(idat);
	return raw;
}

/* The RGB of pixel (x, y) of inflated scanlines of width w. */
static const unsigned char *pixel(const unsigned char *raw, int w, int x, int y)
{
	return raw + (size_t)y * (1 + 3 * (size_t)w) + 1 + 3 * (size_t)x;
}

static int is_rgb(const unsigned char *p, int r, int g, int b)
{
	return p[0] == r && p[1] == g && p[2] == b;
}

static int is_series(const unsigned char *p, int k)
{
	unsigned char c[3];
	cli_plot_png_color(k, c);
	return memcmp(p, c, 3) == 0;
}

/* A grid pixel: light grey (the series' colours are not grey, the background white). */
static int is_grid(const unsigned char *p)
{
	return p[0] == p[1] && p[1] == p[2] && p[0] >= 192 && p[0] < 255;
}

/* Asserts that the data point (x, y) of frame f shows series k's colour. */
static void assert_series_at(const unsigned char *raw, const cli_plot_frame *f, int w,
	double x, double y, int k)
{
	int px, py;
	cli_plot_map(f, x, y, &px, &py);
	const unsigned char *p = pixel(raw, w, px, py);
	ck_assert_msg(is_series(p, k), "(%g, %g) at pixel (%d, %d) is %d,%d,%d, not series %d",
		x, y, px, py, p[0], p[1], p[2], k);
}

START_TEST(test_cli_plot_png_structure)
{
	cli_series s[2];
	size_t len;
	lines_init(s);
	unsigned char *png = png_render(s, 2, 320, 200, &len);
	free(png_decode(png, len, 320, 200));
	free(png);
}
END_TEST

START_TEST(test_cli_plot_png_pixels)
{
	const int W = 320, H = 200;
	cli_series s[2];
	cli_plot_frame f;
	char err[256] = "";
	size_t len;
	int px, py;

	lines_init(s);
	unsigned char *png = png_render(s, 2, W, H, &len);
	unsigned char *raw = png_decode(png, len, W, H);
	ck_assert_msg(cli_plot_png_frame("test plot", s, 2, W, H, &f, err, sizeof err) == 0,
		"%s", err);
	ck_assert(f.left > 0 && f.top > 0 && f.left + f.width < W && f.top + f.height < H);
	/* x from the first to the last step, y the data's with a small margin */
	ck_assert(f.x0 == 0 && f.x1 == 100);
	ck_assert_msg(f.y0 < 0 && f.y0 > -10 && f.y1 > 100 && f.y1 < 110, "y %g..%g", f.y0,
		f.y1);
	/* the area between the lines, halfway between grid lines, and outside it */
	cli_plot_map(&f, 10, 37.5, &px, &py);
	ck_assert_msg(is_rgb(pixel(raw, W, px, py), 255, 255, 255), "background not white");
	ck_assert(is_rgb(pixel(raw, W, 1, 1), 255, 255, 255));
	/* the crossing shows either line; each line's own stretch its colour */
	cli_plot_map(&f, 50, 50, &px, &py);
	const unsigned char *cross = pixel(raw, W, px, py);
	ck_assert_msg(is_series(cross, 0) || is_series(cross, 1), "(50, 50) is %d,%d,%d",
		cross[0], cross[1], cross[2]);
	assert_series_at(raw, &f, W, 10, 10, 0);
	assert_series_at(raw, &f, W, 90, 90, 0);
	assert_series_at(raw, &f, W, 90, 10, 1);
	assert_series_at(raw, &f, W, 10, 90, 1);
	/* the axes, just outside the area */
	ck_assert(is_rgb(pixel(raw, W, f.left - 1, f.top + f.height / 2), 0, 0, 0));
	ck_assert(is_rgb(pixel(raw, W, f.left + f.width / 2, f.top + f.height), 0, 0, 0));
	ck_assert(!is_rgb(pixel(raw, W, f.left + f.width / 2, f.top + f.height - 3), 0, 0, 0));
	/* 3 to 5 grid lines down a column away from both lines: runs of light grey */
	cli_plot_map(&f, 30, 0, &px, &py);
	int runs = 0, in = 0;
	for (int y = f.top; y < f.top + f.height; y++) {
		int grey = is_grid(pixel(raw, W, px, y));
		runs += grey && !in;
		in = grey;
	}
	ck_assert_msg(runs >= 3 && runs <= 5, "%d grid lines", runs);
	free(raw);
	free(png);
}
END_TEST

START_TEST(test_cli_plot_png_gap_and_sparse)
{
	const int W = 320, H = 200;
	static double x[NPT], flat[NPT], vx[3] = {0, 50, 100}, vy[3] = {0, 100, 0};
	cli_plot_frame f;
	char err[256] = "";
	size_t len;
	int px, py;

	for (int i = 0; i < NPT; i++) {
		x[i] = i;
		flat[i] = i >= 40 && i <= 60 ? NAN : 30;
	}
	cli_series s[2] = {{"flat", x, flat, NPT}, {"peak", vx, vy, 3}};
	unsigned char *png = png_render(s, 2, W, H, &len);
	unsigned char *raw = png_decode(png, len, W, H);
	ck_assert_msg(cli_plot_png_frame("test plot", s, 2, W, H, &f, err, sizeof err) == 0,
		"%s", err);
	assert_series_at(raw, &f, W, 20, 30, 0);
	assert_series_at(raw, &f, W, 80, 30, 0);
	cli_plot_map(&f, 50, 30, &px, &py);
	ck_assert_msg(!is_series(pixel(raw, W, px, py), 0), "the NaN gap is drawn");
	/* three points, joined: halfway up each side */
	assert_series_at(raw, &f, W, 25, 50, 1);
	assert_series_at(raw, &f, W, 75, 50, 1);
	free(raw);
	free(png);
}
END_TEST

START_TEST(test_cli_plot_png_grid_spacing)
{
	static const int heights[] = {80, 100, 120, 160, 200, 400};
	static double x[NPT], y[NPT];
	char err[256] = "";

	/* y = x with its middle missing, so that the column x = 50 shows the grid alone */
	for (int i = 0; i < NPT; i++) {
		x[i] = i;
		y[i] = i > 20 && i < 80 ? NAN : i;
	}
	cli_series s = {"ends", x, y, NPT};
	for (size_t h = 0; h < sizeof heights / sizeof heights[0]; h++) {
		const int W = 320, H = heights[h];
		cli_plot_frame f;
		size_t len;
		int px, py, runs = 0, in = 0, prev = -100;
		unsigned char *png = png_render(&s, 1, W, H, &len);
		unsigned char *raw = png_decode(png, len, W, H);
		ck_assert_msg(cli_plot_png_frame("test plot", &s, 1, W, H, &f, err, sizeof err) ==
			0, "%s", err);
		cli_plot_map(&f, 50, 0, &px, &py);
		for (int y = f.top; y < f.top + f.height; y++) {
			int grey = is_grid(pixel(raw, W, px, y));
			if (grey && !in) {
				/* a label's height (8) and a gap: labels never touch */
				ck_assert_msg(y - prev >= 10, "%dx%d: grid lines %d and %d", W, H,
					prev, y);
				prev = y;
				runs++;
			}
			in = grey;
		}
		ck_assert_msg(runs >= (H >= 200 ? 3 : 1) && runs <= 5, "%dx%d: %d grid lines",
			W, H, runs);
		free(raw);
		free(png);
	}
}
END_TEST

START_TEST(test_cli_plot_png_color_distinct)
{
	unsigned char c[CLI_PLOT_MAX_SERIES][3], again[3];
	for (int k = 0; k < CLI_PLOT_MAX_SERIES; k++) {
		cli_plot_png_color(k, c[k]);
		int grey = c[k][0] == c[k][1] && c[k][1] == c[k][2];
		ck_assert_msg(!grey, "series %d is grey", k);
		for (int j = 0; j < k; j++)
			ck_assert_msg(memcmp(c[j], c[k], 3) != 0, "series %d and %d share", j, k);
	}
	cli_plot_png_color(CLI_PLOT_MAX_SERIES + 1, again);
	ck_assert_mem_eq(again, c[1], 3);
}
END_TEST

/* Asserts cli_plot_png refuses these arguments with a message and writes nothing. */
static void png_bad(const cli_series *s, int ns, int w, int h, const char *needle)
{
	char err[256] = "";
	FILE *f = tmpfile();
	ck_assert_ptr_nonnull(f);
	int rc = cli_plot_png(fileno(f), "t", s, ns, w, h, err, sizeof err);
	ck_assert_msg(rc == -1, "%d series %dx%d accepted", ns, w, h);
	ck_assert_msg(strstr(err, needle) != NULL, "message '%s' lacks '%s'", err, needle);
	ck_assert_int_eq(lseek(fileno(f), 0, SEEK_END), 0);
	fclose(f);
}

START_TEST(test_cli_plot_png_bad_args)
{
	static const double nan2[2] = {NAN, NAN}, x2[2] = {1, 2};
	cli_series s[CLI_PLOT_MAX_SERIES + 1];
	lines_init(s);
	for (int k = 2; k <= CLI_PLOT_MAX_SERIES; k++)
		s[k] = s[0];
	png_bad(s, 2, 10, 10, "image size");
	png_bad(s, 2, CLI_PLOT_PNG_MAX + 1, 200, "image size");
	png_bad(s, 2, 320, CLI_PLOT_PNG_MIN - 1, "image size");
	png_bad(s, 0, 320, 200, "no series");
	png_bad(NULL, 2, 320, 200, "no series");
	png_bad(s, CLI_PLOT_MAX_SERIES + 1, 320, 200, "too many series");
	cli_series empty = {"none", NULL, NULL, 0};
	png_bad(&empty, 1, 320, 200, "no series has a finite point");
	cli_series nans = {"nan", x2, nan2, 2};
	png_bad(&nans, 1, 320, 200, "no series has a finite point");
	cli_series noarr = {"x", NULL, NULL, 5};
	png_bad(&noarr, 1, 320, 200, "no arrays");
	/* a title and wide y labels leave no plot area in the smallest image */
	static const double big[2] = {1.25e-300, 1.5e-300};
	cli_series tiny = {"t", x2, big, 2};
	png_bad(&tiny, 1, CLI_PLOT_PNG_MIN, CLI_PLOT_PNG_MIN, "too small");
	png_bad(&tiny, 1, CLI_PLOT_PNG_MIN, 400, "too small");
}
END_TEST

START_TEST(test_cli_plot_png_write_error)
{
	cli_series s[2];
	char err[256] = "";
	lines_init(s);
	int fd = open("/dev/null", O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(cli_plot_png(fd, "t", s, 2, 320, 200, err, sizeof err), -1);
	close(fd);
	ck_assert_msg(strstr(err, "cannot write png") && strstr(err, strerror(EBADF)),
		"message '%s'", err);
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
	TCase *tc = tcase_create("png");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_cli_plot_png_structure);
	tcase_add_test(tc, test_cli_plot_png_pixels);
	tcase_add_test(tc, test_cli_plot_png_gap_and_sparse);
	tcase_add_test(tc, test_cli_plot_png_grid_spacing);
	tcase_add_test(tc, test_cli_plot_png_color_distinct);
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
