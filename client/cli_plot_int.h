/* cli_plot_int.h - what the two halves of rematctl's plots share (cli_plot.c: numbers,
 * ranges, ticks and the braille text; cli_plot_img.c: the Cairo images). Not for any other
 * file: the module's interface is cli_plot.h. */
#ifndef CLI_PLOT_INT_H
#define CLI_PLOT_INT_H

#include <stddef.h>

#include "cli_plot.h"

#define PLOT_MAX_TICKS 5      /* y tick labels at most (nice numbers, 3 at least) */
#define PLOT_NAME_MAX 256     /* bytes of a title or series name shown, once cleaned */

/* Checks what both pictures take, then fills f's ranges from the finite points: x from
 * min to max (widened by 1 each way for a single step), y with a 5% margin (or 10% of the
 * value, or 1, for a flat series). The area fields are left alone. 0, or -1 with a
 * message. */
int cli_plot_range(const cli_series *s, int ns, cli_plot_frame *f, char *err, size_t errlen);

/* Nice ticks in [lo, hi]: the smallest step of 1, 2, 2.5 or 5 times a power of ten that
 * gives at most max (2..) and is at least min_step (room for the labels). Returns the
 * count, ticks in t[] (max of them) from lo up, the step in *step. */
int cli_plot_ticks(double lo, double hi, double min_step, int max, double *t, double *step);

/* The step numbers of an axis: integers as integers, anything else as a number. */
char *cli_plot_step_format(double v, char *buf, size_t len);

/* Copies text (NULL as "") into out with control characters (C0, DEL, C1) and broken
 * UTF-8 as '?'; with ascii, every non-ASCII code point too. Cut to fit, never inside a
 * code point. Returns out. */
char *cli_plot_clean(const char *text, int ascii, char *out, size_t outlen);

#endif
