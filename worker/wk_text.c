/* wk_text.c - a job's text data being made ready, told to its user (see wk_text.h). */
#include "wk_text.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng_tokcache.h"
#include "eng_util.h"

void wk_text_bar(FILE *f, const char *what, uint64_t done, uint64_t total, double rate)
{
	fprintf(f, "\rremat-train: tokenizing %s %3.0f %% (%.1f of %.1f MiB", what,
		total ? 100.0 * (double)done / (double)total : 100.0, done / 1048576.0,
		total / 1048576.0);
	if (rate > 0)
		fprintf(f, ", %.1f MiB/s", rate / 1048576.0);
	fputs(")", f);
	fflush(f);
}

/* The TOKENIZE event of n (its figures; the entry's once done). */
static json_t *note_json(const eng_text_note *n)
{
	static const char *const phases[] = {"hashing", "tokenizing", "done"};
	double pct = n->phase == ENG_TEXT_DONE ? 100.0 : n->total ? 100.0 * (double)n->done /
		(double)n->total : 0.0;
	json_t *o = json_pack("{s:s,s:s,s:s,s:f}", "file", n->which, "corpus", n->corpus,
		"phase", phases[n->phase], "percent", pct);
	if (!o)
		return NULL;
	if (n->phase == ENG_TEXT_TOKENIZING) {
		json_object_set_new(o, "done_bytes", json_integer((json_int_t)n->done));
		json_object_set_new(o, "total_bytes", json_integer((json_int_t)n->total));
	}
	const eng_tokcache_entry *e = n->entry;
	if (e && json_object_update(o, json_pack("{s:b,s:s,s:I,s:I,s:I,s:f}", "cached", e->hit,
		"path", e->path, "tokens", (json_int_t)e->tokens, "documents",
		(json_int_t)e->docs, "total_bytes", (json_int_t)e->bytes, "seconds",
		e->seconds)) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* What the user sees: the bar while tokenizing, a line when done. */
static void tell(wk_text *t, const eng_text_note *n, double now)
{
	const eng_tokcache_entry *e = n->entry;
	char what[96];
	snprintf(what, sizeof what, "%s '%.64s'", n->which, n->corpus);
	if (n->phase == ENG_TEXT_TOKENIZING && t->tty) {
		double dt = now - t->t0;
		wk_text_bar(stderr, what, n->done, n->total, dt > 0 ? n->done / dt : 0);
		t->bar = 1;
		return;
	}
	if (n->phase != ENG_TEXT_DONE)
		return;
	if (t->bar)
		fputc('\n', stderr);
	t->bar = 0;
	if (e->hit)
		fprintf(stderr, "remat-train: %s: %llu tokens, found in the token cache (%s)\n",
			what, (unsigned long long)e->tokens, e->path);
	else
		fprintf(stderr, "remat-train: %s: %llu tokens of %llu documents, tokenized "
				"in %.1f s (%.1f MiB/s) into %s\n", what,
			(unsigned long long)e->tokens, (unsigned long long)e->docs, e->seconds,
			e->seconds > 0 ? e->bytes / e->seconds / 1048576.0 : 0.0, e->path);
}

static void on_text(void *ud, const eng_text_note *n)
{
	wk_text *t = ud;
	double now = eng_now_ms() / 1000.0;
	if (n->phase == ENG_TEXT_HASHING)
		t->t0 = now;
	tell(t, n, now);
	/* the phases' edges always; the figures between them at most every WK_TEXT_EVENT_MS,
	 * and once they reach the total */
	if (n->phase == ENG_TEXT_TOKENIZING && n->done < n->total &&
		(now - t->last_ev) * 1000.0 < WK_TEXT_EVENT_MS)
		return;
	t->last_ev = now;
	if (t->c)
		wk_ctl_event(t->c, PROTO_EV_TOKENIZE, note_json(n));
	if (t->hold_ms > 0 && n->phase != ENG_TEXT_DONE)
		usleep((useconds_t)t->hold_ms * 1000u);
}

void wk_text_hooks(wk_text *t, wk_ctl *c, eng_train_hooks *h)
{
	memset(t, 0, sizeof *t);
	t->c = c;
	t->tty = isatty(STDERR_FILENO);
	const char *hold = getenv("REMAT_TEXT_DELAY_MS");
	t->hold_ms = hold ? atoi(hold) : 0;
	h->text = on_text;
	h->ud = t;
}
