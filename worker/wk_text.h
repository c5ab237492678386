/* wk_text.h - a job's text data being made ready, told to its user: a progress bar on a
 * terminal (stderr), a line when each corpus is ready, and TOKENIZE events on the control
 * connection (rematd shows them as the starting job's "tokenizing" figures).
 */
#ifndef WK_TEXT_H
#define WK_TEXT_H

#include <stdint.h>
#include <stdio.h>

#include "eng_train.h"
#include "wk_ctl.h"

#define WK_TEXT_EVENT_MS 500 /* TOKENIZE events while tokenizing: at most one this often */

typedef struct wk_text {
	wk_ctl *c;          /* NULL: no control connection */
	int tty;            /* stderr is a terminal: draw the bar */
	double t0;          /* when this corpus's tokenizing began (s) */
	double last_ev;     /* when the last TOKENIZE of it went out (s) */
	int bar;            /* a bar is on the terminal's line */
	int hold_ms;        /* test hook REMAT_TEXT_DELAY_MS: a pause after each event before
			     * the last, so that tests can see a job tokenizing (unset in use) */
} wk_text;

/* Hooks for eng_trainer_init_hooks that tell t's user (c may be NULL). */
void wk_text_hooks(wk_text *t, wk_ctl *c, eng_train_hooks *h);

/* "\rremat-train: tokenizing WHAT  41 % (12.3 of 30.0 MiB, 24.1 MiB/s)" on f (rate 0: not
 * said): the one bar of --tokenize and of a job's text. */
void wk_text_bar(FILE *f, const char *what, uint64_t done, uint64_t total, double rate);

#endif
