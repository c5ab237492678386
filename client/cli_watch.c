/* cli_watch.c - `rematctl watch JOB` (see cli_watch.h).
 *
 * State: the job-status reply, asked again every interval (its elapsed_s and eta_s come
 * from nowhere else: STEP events carry neither an ETA nor the worker's pause-free clock) and
 * kept current between polls by STEP, REMAT_APPLIED, REMAT_AUTO (the memory controller's
 * budget: a mark on the process's resident memory bar, and a line under it), REMAT_FAILED
 * (a policy change its step could not take, said under the view, and piped on a line of
 * its own), POOL_CHANGED (rematd --memory's share: a line under the memory bars) and
 * JOB_STATE_CHANGED events; the last
 * mem-stats reply, polled every interval and when a MEMORY event comes; remat-get again
 * after REMAT_APPLIED. An event, or a poll, and the queries it calls for make one update,
 * drawn once they are answered. On a terminal every update redraws the view; piped (plain
 * lines or --json) an update is written once an interval, at the poll, and at once only
 * for what a reader must not miss (a policy change, a checkpoint, the controller, the
 * job's state), so that --interval sets the output's rate; a plain line that would repeat
 * the one before is left out.
 * On a terminal the view is redrawn in place: cursor home, each line followed by "clear to
 * end of line", then "clear to end of screen", so nothing flickers; the cursor is hidden
 * while it runs and shown again on every way out. Lines are cut to the terminal's width so
 * that none wraps and shifts the view. Not here: raw keyboard input (Ctrl-C ends it).
 */
#include "cli_watch.h"

#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_fmt.h"
#include "cli_show.h"

#define BAR_MAX	   40	/* widest bar, in columns */
#define BAR_MIN	   10	/* narrowest bar */
#define LINE_LEN   1024 /* bytes of one line of the view */
#define MAX_GROUPS 64	/* section groups shown (consecutive blocks in one mode merge) */
#define LABEL_LEN  64	/* "h.0-11" */

typedef struct watch {
	const cli_watch_opts *o;
	cli_conn *c;
	const char *job;     /* label: the job id */
	json_t *status;	     /* job-status reply, updated by events */
	json_t *mem;	     /* last mem-stats reply, or NULL */
	json_t *sections;    /* remat-get's sections, used until mem-stats has some */
	json_t *failed;	     /* the last REMAT_FAILED's data, or NULL */
	const char *trigger; /* what caused the update being drawn: "STEP", "poll", ... */
	char dirty[32];	     /* what changed the view since it was drawn ("" when nothing) */
	char last[LINE_LEN]; /* the last plain line printed (an identical one is not repeated) */
	char note[LINE_LEN]; /* the last notable event, shown under the view */
	long updates;	     /* updates drawn */
	int tty;	     /* 1: redraw in place */
	int utf8;	     /* 1: block characters for bars */
	int cols;	     /* terminal width */
	int final;	     /* the job ended (cli_state_final) */
	int need_mem;	     /* poll mem-stats before waiting again */
	int need_policy;     /* poll remat-get before waiting again */
	int need_status;     /* poll job-status before waiting again (the ETA, the clock) */
	int status_code;     /* exit status when it ends */
} watch;

/* Writes one line of the view, cut to the terminal's width and cleared to its end. */
static void emit(watch *w, const char *fmt, ...)
{
	char line[LINE_LEN];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	size_t cols = 0, i = 0;
	for (; line[i]; i++) {
		if (((unsigned char)line[i] & 0xC0) != 0x80 && ++cols > (size_t)w->cols)
			break;
	}
	while (i > 0 && line[i - 1] == ' ')
		i--; /* padding of a last column */
	line[i] = '\0';
	fputs(line, stdout);
	fputs(w->tty ? "\033[K\n" : "\n", stdout);
}

/* A bar of width cols for value out of max; a mark (>= 0, out of max too) puts a '|' at its
 * column: the memory controller's budget on the process's bar. */
static char *bar_marked(const watch *w, double value, double max, double mark, int cols,
	char *buf, size_t len)
{
	const char *full = w->utf8 ? "\u2588" : "#", *empty = w->utf8 ? "\u2591" : ".";
	const char *line = w->utf8 ? "\u2503" : "|";
	int n = (max > 0 && isfinite(value) && value > 0) ? (int)lround(cols * value / max) : 0;
	int m = (max > 0 && isfinite(mark) && mark >= 0) ? (int)lround(cols * mark / max) : -1;
	size_t o = 0;
	if (n > cols)
		n = cols;
	if (n == 0 && value > 0)
		n = 1; /* something is there: show it */
	if (m >= cols)
		m = cols - 1;
	buf[0] = '\0';
	for (int i = 0; i < cols; i++) {
		const char *s = i == m ? line : i < n ? full : empty;
		size_t k = strlen(s);
		if (o + k + 1 > len)
			break;
		memcpy(buf + o, s, k + 1);
		o += k;
	}
	return buf;
}

static char *bar(const watch *w, double value, double max, int cols, char *buf, size_t len)
{
	return bar_marked(w, value, max, -1, cols, buf, len);
}

static int bar_width(const watch *w)
{
	int b = w->cols - 48;
	return b > BAR_MAX ? BAR_MAX : b < BAR_MIN ? BAR_MIN : b;
}

/* Merges consecutive blocks in one mode: "h.0-5 full 72 MiB". */
typedef struct group {
	char label[LABEL_LEN];
	char mode[32];
	double saved;
} group;

static int block_index(const char *name)
{
	char *end;
	if (strncmp(name, "h.", 2) != 0)
		return -1;
	long i = strtol(name + 2, &end, 10);
	return (end != name + 2 && !*end && i >= 0 && i < 1000000) ? (int)i : -1;
}

static int groups_make(const json_t *sections, group *g, int max)
{
	int n = 0, first = -1, last = -1;
	size_t i;
	json_t *s;

	json_array_foreach(sections, i, s)
	{
		const char *name = cli_jstr(s, "name"), *mode = cli_jstr(s, "mode");
		double saved = 0;
		int b = name ? block_index(name) : -1;
		cli_jnum(s, "saved_bytes", &saved);
		if (!name || !mode)
			continue;
		if (n > 0 && b >= 0 && last >= 0 && b == last + 1 &&
		    strcmp(g[n - 1].mode, mode) == 0) {
			last = b;
			g[n - 1].saved += saved;
			snprintf(g[n - 1].label, LABEL_LEN, "h.%d-%d", first, last);
			continue;
		}
		if (n == max)
			break;
		cli_str_clean(name, g[n].label, LABEL_LEN);
		cli_str_clean(mode, g[n].mode, sizeof g[n].mode);
		g[n].saved = saved;
		first = last = b;
		n++;
	}
	return n;
}

/* 1 when key is a category the reply adds to the documented ones ("untracked"). */
static int extra_category(const char *key, const json_t *v)
{
	for (int i = 0; cli_mem_categories[i]; i++)
		if (strcmp(key, cli_mem_categories[i]) == 0)
			return 0;
	return json_is_object(v);
}

/* Under rematd --memory, the job's share of the pool (its budget, told by rematd). */
static void draw_pool(watch *w)
{
	char text[LINE_LEN / 2];
	if (cli_pool_text(w->status, 1, text, sizeof text))
		emit(w, "%-12s   %s", "pool share", text);
}

/* The memory bars, scaled to the largest: the documented categories and their total, then
 * those the reply adds in its order (the process's untracked memory, which that total
 * leaves out); the process's resident memory, and with the memory controller on a bar of
 * it with the budget marked. */
static void draw_memory(watch *w, int bw)
{
	json_t *cats = cli_jobj(w->mem, "categories"), *m;
	char a[64], b[64], name[64], barbuf[BAR_MAX * 3 + 1], text[LINE_LEN / 2];
	const char *key;
	double max = 0, v, budget, rss = 0, peak = 0;

	json_object_foreach(cats, key, m)
		if (cli_jnum(m, "current", &v) && v > max)
			max = v;
	emit(w, "%-12s %-*s %10s %10s", "MEMORY", bw, "", "CURRENT", "PEAK");
	for (int i = 0; cli_mem_categories[i]; i++) {
		m = cli_jobj(cats, cli_mem_categories[i]);
		v = 0;
		cli_jnum(m, "current", &v);
		emit(w, "%-12s %s %10s %10s", cli_mem_categories[i],
		     bar(w, v, max, bw, barbuf, sizeof barbuf), cli_show_size(m, "current", a, 32),
		     cli_show_size(m, "peak", b, 32));
	}
	json_t *total = cli_jobj(w->mem, "total");
	emit(w, "%-12s %-*s %10s %10s", "total", bw, "", cli_show_size(total, "current", a, 32),
	     cli_show_size(total, "peak", b, 32));
	json_object_foreach(cats, key, m) {
		if (!extra_category(key, m))
			continue;
		v = 0;
		cli_jnum(m, "current", &v);
		emit(w, "%-12s %s %10s %10s", cli_str_clean(key, name, sizeof name),
		     bar(w, v, max, bw, barbuf, sizeof barbuf), cli_show_size(m, "current", a, 32),
		     cli_show_size(m, "peak", b, 32));
	}
	if (!cli_auto_budget(w->status, &budget)) {
		emit(w, "%-12s %-*s %10s %10s", "rss", bw, "", cli_show_size(w->mem, "rss", a, 32),
		     cli_show_size(w->mem, "rss_peak", b, 32));
		draw_pool(w);
		return;
	}
	/* the budget is the process's: its resident memory against it, the budget a mark */
	cli_jnum(w->mem, "rss", &rss);
	cli_jnum(w->mem, "rss_peak", &peak);
	double scale = fmax(budget, fmax(rss, peak));
	emit(w, "%-12s %s %10s %10s", "rss", bar_marked(w, rss, scale, budget, bw, barbuf,
		sizeof barbuf), cli_show_size(w->mem, "rss", a, 32),
	     cli_show_size(w->mem, "rss_peak", b, 32));
	/* the mark first, as on the bar: the line reads as its legend */
	emit(w, "%-12s %s %s", "budget", w->utf8 ? "\u2503" : "|",
	     cli_auto_text(w->status, 1, text, sizeof text));
	draw_pool(w);
}

static void draw_tty(watch *w)
{
	json_t *st = w->status, *sec;
	char a[64], b[64], c[64], d[64], e[64], name[64], state[32], barbuf[BAR_MAX * 3 + 1];
	group g[MAX_GROUPS];
	int bw = bar_width(w), ng;
	double max = 0, v;

	fputs("\033[H", stdout);
	cli_str_clean(cli_jstr(st, "name") ? cli_jstr(st, "name") : "-", name, sizeof name);
	cli_show_state(st, state, sizeof state);
	emit(w, "%s (%s)  %s  step %s/%s%s", w->job, name, state,
	     cli_show_num(st, "step", "%.0f", a, sizeof a),
	     cli_show_num(st, "steps", "%.0f", b, sizeof b),
	     w->final ? "" : "    (Ctrl-C to quit)");
	emit(w, "loss %s   val %s   lr %s   %s tok/s   step %s ms   recompute %s ms",
	     cli_show_num(st, "loss", "%.4f", a, sizeof a),
	     cli_show_num(st, "val_loss", "%.4f", name, sizeof name),
	     cli_show_num(st, "lr", "%.2e", b, 32),
	     cli_show_num(st, "tokens_per_s", "%.0f", c, sizeof c),
	     cli_show_num(st, "step_ms", "%.1f", d, sizeof d),
	     cli_show_num(st, "recompute_ms", "%.1f", e, sizeof e));
	c[0] = '\0';
	if (cli_jnum(st, "ranks", &v) && v > 1) /* data parallel */
		snprintf(c, sizeof c, "   ranks %.0f", v);
	emit(w, "elapsed %s   eta %s%s", cli_duration_format(cli_jnum(st, "elapsed_s", &v) ? v
							    : 0, a, sizeof a),
	     cli_duration_format(cli_jnum(st, "eta_s", &v) ? v : -1, b, sizeof b), c);
	emit(w, "");
	sec = json_array_size(json_object_get(w->mem, "sections"))
		  ? json_object_get(w->mem, "sections")
		  : w->sections;
	ng = groups_make(sec, g, MAX_GROUPS);
	for (int i = 0; i < ng; i++)
		max = g[i].saved > max ? g[i].saved : max;
	emit(w, "%-12s %-10s %-*s %10s", "SECTION", "MODE", bw, "", "SAVED");
	for (int i = 0; i < ng; i++)
		emit(w, "%-12s %-10s %s %10s", g[i].label, g[i].mode,
		     bar(w, g[i].saved, max, bw, barbuf, sizeof barbuf),
		     cli_size_format(g[i].saved, a, sizeof a));
	emit(w, "");
	draw_memory(w, bw);
	if (w->note[0]) {
		emit(w, "");
		emit(w, "%s", w->note);
	}
	fputs("\033[J", stdout);
}

/* One plain line: what tests and logs read. Returns 0 when it would repeat the last. */
static int draw_line(watch *w)
{
	json_t *st = w->status, *cats = cli_jobj(w->mem, "categories");
	char a[32], b[32], c[32], d[32], e[32], f[32], g[32], h[32], state[32];
	char pol[LINE_LEN / 2], line[LINE_LEN];

	cli_show_state(st, state, sizeof state);
	snprintf(line, sizeof line,
		 "%s %s step %s/%s loss %s tok/s %s step_ms %s activations "
		 "%s total %s rss %s policy %s",
		 w->job, state, cli_show_num(st, "step", "%.0f", a, sizeof a),
		 cli_show_num(st, "steps", "%.0f", b, sizeof b),
		 cli_show_num(st, "loss", "%.4f", c, sizeof c),
		 cli_show_num(st, "tokens_per_s", "%.0f", d, sizeof d),
		 cli_show_num(st, "step_ms", "%.1f", e, sizeof e),
		 cli_show_size(cli_jobj(cats, "activations"), "current", f, sizeof f),
		 cli_show_size(cli_jobj(w->mem, "total"), "current", g, sizeof g),
		 cli_show_size(w->mem, "rss", h, sizeof h),
		 cli_policy_format(cli_jobj(st, "policy"), pol, sizeof pol));
	double budget, v;
	if (cli_auto_budget(st, &budget)) { /* the memory controller's, of the process (rss) */
		size_t n = strlen(line);
		snprintf(line + n, sizeof line - n, " budget %s", cli_mib_format(budget, a, sizeof a));
	}
	size_t n = strlen(line);
	if (cli_jnum(cli_jobj(st, "memory"), "share_bytes", &v)) /* rematd --memory's share */
		n += (size_t)snprintf(line + n, sizeof line - n, " pool_share %s",
			cli_mib_format(v, a, sizeof a));
	if (cli_jnum(st, "val_loss", &v))
		n += (size_t)snprintf(line + n, sizeof line - n, " val_loss %.4f", v);
	if (n < sizeof line && cli_jnum(st, "ranks", &v) && v > 1) /* data parallel */
		n += (size_t)snprintf(line + n, sizeof line - n, " ranks %.0f", v);
	if (n < sizeof line && cli_jnum(st, "eta_s", &v))
		snprintf(line + n, sizeof line - n, " eta %s", cli_duration_format(v, a, sizeof a));
	if (strcmp(line, w->last) == 0)
		return 0;
	memcpy(w->last, line, sizeof line);
	emit(w, "%s", line);
	return 1;
}

/* One compact JSON object: the job's figures, memory per category in bytes. */
static void draw_json(watch *w)
{
	static const char *const keys[] = {
	    "job",	    "name",    "state",	       "step",	 "steps",  "loss",	  "lr",
	    "tokens_per_s", "step_ms", "recompute_ms", "policy", "reason", "exit_status",
	    "val_loss", "elapsed_s", "eta_s", "auto", "auto_budget_bytes", "ranks", NULL};
	json_t *o = json_object(), *mem = json_object(), *cats = cli_jobj(w->mem, "categories");
	const char *key;
	json_t *v;

	if (!o || !mem)
		goto out;
	for (int i = 0; keys[i]; i++)
		if ((v = json_object_get(w->status, keys[i])))
			json_object_set(o, keys[i], v);
	json_object_foreach(cats, key, v)
	{
		json_t *cur = json_is_object(v) ? json_object_get(v, "current") : NULL;
		if (json_is_number(cur))
			json_object_set(mem, key, cur);
	}
	if ((v = json_object_get(cli_jobj(w->mem, "total"), "current")))
		json_object_set(mem, "total", v);
	if ((v = json_object_get(w->mem, "rss")))
		json_object_set(mem, "rss", v);
	json_object_set_new(o, "memory", mem);
	mem = NULL;
	if (json_is_object(v = json_object_get(w->status, "memory"))) /* rematd's pool */
		json_object_set(o, "pool", v);
	json_object_set_new(o, "update", json_string(w->trigger));
	if (w->failed && strcmp(w->trigger, "REMAT_FAILED") == 0)
		json_object_set(o, "remat_failed", w->failed); /* the event's data, as it came */
	char *text = cli_json_text(o, JSON_COMPACT);
	if (text)
		printf("%s\n", text);
	free(text);
out:
	json_decref(mem);
	json_decref(o);
}

/* Draws an update when something changed (w->dirty names what). */
static void draw(watch *w)
{
	int drawn = 1;
	if (!w->dirty[0])
		return;
	w->trigger = w->dirty;
	if (w->o->json)
		draw_json(w);
	else if (w->tty)
		draw_tty(w);
	else
		drawn = draw_line(w);
	if (!w->o->json && !w->tty && (strcmp(w->dirty, "REMAT_FAILED") == 0 ||
		strcmp(w->dirty, "SAMPLE") == 0)) {
		/* a refused change leaves the line as it was, and a sample is not in it: each
		 * gets one of its own */
		emit(w, "%s %s", w->job, w->note);
		drawn = 1;
	}
	fflush(stdout);
	w->updates += drawn;
	w->dirty[0] = '\0';
}

/* A REMAT_AUTO event into the status: the controller's budget, none once it lets go (a
 * null policy); the rest of "auto" (source, pinned, least) comes with the next poll. */
static void auto_event(watch *w, const json_t *data)
{
	json_t *pol = cli_jobj(data, "policy"), *b = json_object_get(data, "budget_bytes");
	json_t *a = json_object_get(w->status, "auto");
	json_object_set_new(w->status, "auto_budget_bytes", pol && b ? json_incref(b) :
		json_null());
	if (!pol)
		json_object_set_new(w->status, "auto", json_null());
	else if (json_is_object(a) && json_is_number(b))
		json_object_set(a, "budget_bytes", b);
	else if (a) /* none was on at the last poll: auto_budget_bytes says it until the next */
		json_object_del(w->status, "auto");
}

/* A POOL_CHANGED event into the status' "memory": the share rematd told, and the figures
 * that came with it (resident bytes come with the next poll). */
static void pool_event(watch *w, const json_t *data)
{
	static const char *const keys[] = {"share_bytes", "least_bytes", "off_bytes", "priority",
		NULL};
	json_t *m = json_object_get(w->status, "memory");
	if (!json_is_object(m))
		return; /* none at the last poll: the next one brings it */
	for (int i = 0; keys[i]; i++)
		if (json_is_integer(json_object_get(data, keys[i])))
			json_object_set(m, keys[i], json_object_get(data, keys[i]));
}

/* A sample's note: its step and text (control characters, newlines too, shown as '?'). */
static void sample_note(watch *w, const json_t *data)
{
	char a[32], text[LINE_LEN / 2];
	const char *t = cli_jstr(data, "text");
	snprintf(w->note, sizeof w->note, "sample after step %s: %s",
		 cli_show_num(data, "step", "%.0f", a, sizeof a),
		 t ? cli_str_clean(t, text, sizeof text)
		   : "(token ids only: the job has no tokenizer)");
}

/* Takes in an event; marks the view dirty when it changes what is shown. */
static void on_event(json_t *msg, void *ud)
{
	watch *w = ud;
	const char *name = cli_jstr(msg, "event");
	json_t *data = cli_jobj(msg, "data");
	const char *job = cli_jstr(data, "job");
	char a[32], text[LINE_LEN / 2];

	if (!name || !data || (w->o->job && job && strcmp(job, w->o->job) != 0))
		return;
	if (strcmp(name, "STEP") == 0) {
		/* its elapsed_s is the process's clock, not job-status' (since the job's first
		 * step): the polled one stays, so the view does not flip between the two */
		json_t *el = json_incref(json_object_get(w->status, "elapsed_s"));
		json_object_update(w->status, data);
		if (el)
			json_object_set(w->status, "elapsed_s", el);
		json_decref(el);
	} else if (strcmp(name, "REMAT_APPLIED") == 0) {
		json_t *pol = cli_jobj(data, "policy");
		int resume = json_is_true(json_object_get(data, "at_resume"));
		if (pol)
			json_object_set(w->status, "policy", pol);
		snprintf(w->note, sizeof w->note, resume ? "the job ends before step %s: a resume "
			 "runs under %s" : "policy changed at step %s: %s",
			 cli_show_num(data, "step", "%.0f", a, sizeof a),
			 cli_policy_format(pol, text, sizeof text));
		w->need_policy = w->need_mem = 1;
	} else if (strcmp(name, "JOB_STATE_CHANGED") == 0) {
		const char *to = cli_jstr(data, "to");
		json_t *v;
		if (to)
			json_object_set_new(w->status, "state", json_string(to));
		if ((v = json_object_get(data, "reason")))
			json_object_set(w->status, "reason", v);
		if ((v = json_object_get(data, "exit_status")))
			json_object_set(w->status, "exit_status", v);
		w->final = cli_state_final(to);
	} else if (strcmp(name, "CHECKPOINT_SAVED") == 0) {
		snprintf(w->note, sizeof w->note, "checkpoint saved at step %s: %s",
			 cli_show_num(data, "step", "%.0f", a, sizeof a),
			 cli_str_clean(cli_jstr(data, "path") ? cli_jstr(data, "path") : "-", text,
				       sizeof text));
	} else if (strcmp(name, "REMAT_AUTO") == 0) {
		auto_event(w, data);
		snprintf(w->note, sizeof w->note, "remat-auto at step %s: %s",
			 cli_show_num(data, "step", "%.0f", a, sizeof a),
			 cli_str_clean(cli_jstr(data, "reason") ? cli_jstr(data, "reason") : "-", text,
				       sizeof text));
		w->need_mem = 1;
	} else if (strcmp(name, "REMAT_FAILED") == 0) {
		/* a policy asked for that its step could not take: why, and what it ran under */
		char why[LINE_LEN / 4];
		json_decref(w->failed);
		w->failed = json_incref(data);
		snprintf(w->note, sizeof w->note, "policy for step %s not applied: %s; it ran "
			"under %s", cli_show_num(data, "step", "%.0f", a, sizeof a),
			cli_str_clean(cli_jstr(data, "reason") ? cli_jstr(data, "reason") : "-", why,
				sizeof why), cli_policy_format(cli_jobj(data, "policy"), text, sizeof text));
	} else if (strcmp(name, "MEMORY") == 0) {
		w->need_mem = 1; /* the figures come from mem-stats, asked next */
	} else if (strcmp(name, "SAMPLE") == 0) {
		sample_note(w, data);
	} else if (strcmp(name, "POOL_CHANGED") == 0) {
		pool_event(w, data);
		const char *ph = cli_jstr(data, "phase"), *why = cli_jstr(data, "reason");
		snprintf(w->note, sizeof w->note, "pool share %s: %s", cli_str_clean(ph ? ph : "-",
			a, sizeof a), cli_str_clean(why ? why : "-", text, sizeof text));
	} else {
		return;
	}
	/* piped, steps and memory are written at the next poll, once an interval */
	if (!w->tty && (strcmp(name, "STEP") == 0 || strcmp(name, "MEMORY") == 0))
		return;
	cli_str_clean(name, w->dirty, sizeof w->dirty);
}

/* Calls a job command; *out replaced on success. CLI_OK, or the error already reported
 * and w->status_code set. */
static int query(watch *w, const char *execute, json_t **out)
{
	json_t *args = w->o->job ? json_pack("{s:s}", "job", w->o->job) : json_object(), *ret;
	int rc = args ? cli_conn_call(w->c, execute, args, w->o->timeout_ms, &ret, on_event, w)
		      : CLI_ECONN;

	json_decref(args);
	if (rc == CLI_OK) {
		json_decref(*out);
		*out = ret;
		return CLI_OK;
	}
	if (rc == CLI_EREPLY && !w->final && (strcmp(w->c->err_class, "InvalidState") == 0)) {
		/* a job not running yet (queued) or any more: the state events will tell */
		snprintf(w->note, sizeof w->note, "%s: %s", execute, w->c->err);
		return CLI_OK;
	}
	if (rc == CLI_EINTR) {
		w->status_code = CLI_EXIT_OK;
	} else if (rc == CLI_EREPLY) {
		fprintf(stderr, CLI_NAME ": %s (%s)\n", w->c->err, w->c->err_class);
		w->status_code = CLI_EXIT_FAIL;
	} else {
		fprintf(stderr, CLI_NAME ": %s\n", w->c->err);
		w->status_code = CLI_EXIT_CONN;
	}
	return rc;
}

/* The polls an update asked for. */
static int refresh(watch *w)
{
	json_t *rg = NULL;
	if (w->final) {
		/* the worker is gone or going: nothing more to ask */
		w->need_policy = w->need_mem = w->need_status = 0;
		return 0;
	}
	if (w->need_status) {
		w->need_status = 0;
		json_t *st = NULL;
		if (query(w, "job-status", &st) != CLI_OK)
			return -1;
		if (st) { /* what the events said since is in it; the job's own ETA too */
			json_decref(w->status);
			w->status = st;
			w->final = cli_state_final(cli_jstr(st, "state"));
		}
	}
	if (w->need_policy) {
		w->need_policy = 0;
		if (query(w, "remat-get", &rg) != CLI_OK)
			return -1;
		json_t *pol = cli_jobj(rg, "policy"), *sec = json_object_get(rg, "sections");
		if (pol)
			json_object_set(w->status, "policy", pol);
		if (json_is_array(sec)) {
			json_decref(w->sections);
			w->sections = json_incref(sec);
		}
		json_decref(rg);
	}
	if (w->need_mem) {
		w->need_mem = 0;
		if (query(w, "mem-stats", &w->mem) != CLI_OK)
			return -1;
	}
	return 0;
}

static void final_line(watch *w)
{
	char a[32], reason[256] = "", st[32];
	const char *to = cli_jstr(w->status, "state"), *why = cli_jstr(w->status, "reason");
	double ex;

	cli_str_clean(to ? to : "-", st, sizeof st);
	if (why && *why) {
		char clean[200];
		snprintf(reason, sizeof reason, ": %s", cli_str_clean(why, clean, sizeof clean));
	}
	if (cli_jnum(w->status, "exit_status", &ex) && ex != 0)
		snprintf(reason + strlen(reason), sizeof reason - strlen(reason),
			 " (exit status %.0f)", ex);
	if (!w->o->json)
		printf("%s %s at step %s%s\n", w->job, st,
		       cli_show_num(w->status, "step", "%.0f", a, sizeof a), reason);
	w->status_code = to && strcmp(to, "failed") == 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

/* w set up for o on c: the job shown, and the terminal (width, UTF-8) when stdout is one. */
static void watch_init(watch *w, cli_conn *c, const cli_watch_opts *o)
{
	struct winsize ws;
	memset(w, 0, sizeof *w);
	w->o = o;
	w->c = c;
	w->job = o->job ? o->job : cli_conn_job(c) ? cli_conn_job(c) : "job";
	w->status_code = CLI_EXIT_CONN;
	w->tty = !o->json && isatty(STDOUT_FILENO);
	w->cols = LINE_LEN - 1;
	if (w->tty) {
		w->cols =
		    ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
		setlocale(LC_CTYPE, "");
		w->utf8 = strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
	}
}

/* Subscribes to the job's events (or every job's): 0, or -1 with what went wrong said and
 * w->status_code set. */
static int watch_subscribe(watch *w)
{
	const cli_watch_opts *o = w->o;
	cli_conn *c = w->c;
	json_t *sub = o->job ? json_pack("{s:s}", "job", o->job) : json_object();
	int rc = sub ? cli_conn_call(c, "subscribe", sub, o->timeout_ms, NULL, NULL, NULL)
		     : CLI_ECONN;
	json_decref(sub);
	if (rc == CLI_OK)
		return 0;
	if (rc == CLI_EREPLY)
		fprintf(stderr, CLI_NAME ": %s (%s)\n", c->err, c->err_class);
	else if (rc != CLI_EINTR)
		fprintf(stderr, CLI_NAME ": %s\n", c->err);
	w->status_code = rc == CLI_EREPLY  ? CLI_EXIT_FAIL
			 : rc == CLI_EINTR ? 0
					   : CLI_EXIT_CONN;
	return -1;
}

int cli_watch_run(cli_conn *c, const cli_watch_opts *o)
{
	watch w;
	json_t *msg = NULL;
	int rc, cursor_hidden = 0;
	long long interval = (long long)(o->interval_s * 1000.0), next_poll;

	watch_init(&w, c, o);
	/* subscribe first, then read the state: no event falls between the two */
	if (watch_subscribe(&w) < 0)
		goto out;
	if (query(&w, "job-status", &w.status) != CLI_OK)
		goto out;
	if (!w.status && !(w.status = json_object()))
		goto out;
	w.final = cli_state_final(cli_jstr(w.status, "state"));
	w.need_policy = w.need_mem = !w.final;
	if (refresh(&w) < 0)
		goto out;
	if (w.tty) {
		fputs("\033[?25l\033[H\033[2J", stdout); /* hide the cursor, clear the screen */
		cursor_hidden = 1;
	}
	snprintf(w.dirty, sizeof w.dirty, "start");
	draw(&w);
	next_poll = cli_now_ms() + interval;
	while (!w.final && (o->count <= 0 || w.updates < o->count)) {
		long long left = next_poll - cli_now_ms();
		rc = cli_conn_next(c, left < 0 ? 0 : (int)left, &msg, &(proto_kind){0});
		if (rc == CLI_EINTR) {
			w.status_code = CLI_EXIT_OK;
			goto out;
		}
		if (rc == CLI_ETIME) {
			next_poll = cli_now_ms() + interval;
			w.need_mem = w.need_status = 1;
			snprintf(w.dirty, sizeof w.dirty, "poll");
		} else if (rc != CLI_OK) {
			fprintf(stderr, CLI_NAME ": %s\n", c->err);
			goto out;
		} else {
			/* replies to nothing in flight and stray errors are skipped */
			on_event(msg, &w);
			json_decref(msg);
			msg = NULL;
		}
		/* events that come during these queries are taken in too, drawn once below */
		if (refresh(&w) < 0)
			goto out;
		draw(&w);
	}
	if (w.final)
		final_line(&w);
	else
		w.status_code = CLI_EXIT_OK;
out:
	if (cursor_hidden) {
		fputs("\033[?25h", stdout);
		fflush(stdout);
	}
	json_decref(msg);
	json_decref(w.status);
	json_decref(w.mem);
	json_decref(w.sections);
	json_decref(w.failed);
	return w.status_code;
}
