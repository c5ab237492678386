/* cli_show.c - rematctl's human output of each reply (see cli_show.h).
 *
 * Tables go through cli_fmt's cli_table; every string from the server is cleaned of
 * control characters before it reaches the terminal. Not here: --json, the watch view.
 */
#include "cli_show.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_fmt.h"

#define KEY_WIDTH 17  /* "last checkpoint: " and its value start in one column */
#define TEXT_LEN  512 /* longest value shown on one line */

const char *const cli_mem_categories[] = {"params",    "grads",	    "optimizer", "activations",
					  "recompute", "workspace", "data",	 NULL};

char *cli_show_num(const json_t *obj, const char *key, const char *fmt, char *buf, size_t len)
{
	double v;
	if (cli_jnum(obj, key, &v) && isfinite(v))
		snprintf(buf, len, fmt, v);
	else
		snprintf(buf, len, "-");
	return buf;
}

/* obj's number at key through format, or "-" when it has none. */
static char *show_bytes(const json_t *obj, const char *key, char *buf, size_t len,
	char *(*format)(double, char *, size_t))
{
	double v;
	if (cli_jnum(obj, key, &v))
		return format(v, buf, len);
	snprintf(buf, len, "-");
	return buf;
}

char *cli_show_mib(const json_t *obj, const char *key, char *buf, size_t len)
{
	return show_bytes(obj, key, buf, len, cli_mib_format);
}

char *cli_show_size(const json_t *obj, const char *key, char *buf, size_t len)
{
	return show_bytes(obj, key, buf, len, cli_size_format);
}

/* A string field, cleaned, or dflt. */
static char *show_str(const json_t *obj, const char *key, const char *dflt, char *buf, size_t len)
{
	const char *s = cli_jstr(obj, key);
	return cli_str_clean(s ? s : dflt, buf, len);
}

static void kv(FILE *f, const char *key, const char *value)
{
	fprintf(f, "%-*s %s\n", KEY_WIDTH - 1, key, value);
}

/* Prints the table and frees it; a table that cannot be built is reported. */
static void table_flush(FILE *f, cli_table *t)
{
	char *text = cli_table_render(t);
	if (text)
		fputs(text, f);
	else
		fprintf(stderr, "rematctl: out of memory\n");
	free(text);
	cli_table_free(t);
}

char *cli_show_state(const json_t *obj, char *buf, size_t len)
{
	const char *state = cli_jstr(obj, "state"), *file;
	json_t *t = cli_jobj(obj, "tokenizing");
	double pct;
	if (!t || !state || strcmp(state, "starting") != 0 || !cli_jnum(t, "percent", &pct))
		return show_str(obj, "state", "-", buf, len);
	file = cli_jstr(t, "file");
	snprintf(buf, len, "tokenizing %s%.0f %%", file && !strcmp(file, "val") ? "val " : "",
		pct >= 0 && pct <= 100 ? pct : 0.0);
	return buf;
}

/* "120/1000" from step and steps. */
static char *step_of(const json_t *obj, char *buf, size_t len)
{
	char a[32], b[32];
	cli_show_num(obj, "step", "%.0f", a, sizeof a);
	cli_show_num(obj, "steps", "%.0f", b, sizeof b);
	snprintf(buf, len, "%s/%s", a, b);
	return buf;
}

/* "41.2/52.0 MiB": a job's resident memory of its share of rematd's pool, "-" without. */
static char *pool_of(const json_t *j, char *buf, size_t len)
{
	json_t *m = cli_jobj(j, "memory");
	double share, rss;
	if (!m || !cli_jnum(m, "share_bytes", &share) || share <= 0)
		return snprintf(buf, len, "-"), buf;
	if (cli_jnum(m, "rss_bytes", &rss))
		snprintf(buf, len, "%.1f/%.1f MiB", rss / 1048576.0, share / 1048576.0);
	else
		snprintf(buf, len, "-/%.1f MiB", share / 1048576.0);
	return buf;
}

void cli_show_list(FILE *f, const char *job, const json_t *ret)
{
	(void)job;
	static const char *const head[] = {"JOB", "NAME", "STATE", "STEP", "LOSS", "MEMORY"};
	json_t *jobs = json_is_object(ret) ? json_object_get(ret, "jobs") : NULL;
	cli_table t;
	size_t i;
	json_t *j;
	int pool = 0; /* the MEMORY column, under rematd --memory alone */
	json_array_foreach(jobs, i, j)
		pool |= json_is_object(json_object_get(j, "memory"));
	cli_table_init(&t, pool ? 6 : 5, head, "lllrrr");
	json_array_foreach(jobs, i, j)
	{
		char id[64], name[128], state[32], step[64], loss[32], mem[48];
		cli_table_add(&t, show_str(j, "job", "-", id, sizeof id),
			      show_str(j, "name", "-", name, sizeof name),
			      cli_show_state(j, state, sizeof state),
			      step_of(j, step, sizeof step),
			      cli_show_num(j, "loss", "%.4f", loss, sizeof loss),
			      pool_of(j, mem, sizeof mem));
	}
	table_flush(f, &t);
}

void cli_show_status(FILE *f, const char *job, const json_t *ret)
{
	(void)job;
	char buf[TEXT_LEN];
	double v;

	kv(f, "job:", show_str(ret, "job", "-", buf, sizeof buf));
	kv(f, "name:", show_str(ret, "name", "-", buf, sizeof buf));
	kv(f, "state:", cli_show_state(ret, buf, sizeof buf));
	if (cli_model_text(ret, buf, sizeof buf)) /* what trains, as PEFT counts it */
		kv(f, "model:", buf);
	kv(f, "step:", step_of(ret, buf, sizeof buf));
	kv(f, "loss:", cli_show_num(ret, "loss", "%.4f", buf, sizeof buf));
	kv(f, "lr:", cli_show_num(ret, "lr", "%.3e", buf, sizeof buf));
	if (cli_jnum(ret, "val_loss", &v)) {
		char step[32];
		snprintf(buf, sizeof buf, "%.4f (after step %s)", v,
			cli_show_num(ret, "val_step", "%.0f", step, sizeof step));
		kv(f, "val loss:", buf);
	}
	json_t *pm = cli_jobj(ret, "memory");
	if (pm) { /* its part of rematd --memory's pool */
		char a[32], b[32], c[32], d[32], e[32];
		snprintf(buf, sizeof buf, "%s of the pool (least %s, off %s, priority %s), "
			"resident %s", cli_show_size(pm, "share_bytes", a, sizeof a),
			cli_show_size(pm, "least_bytes", b, sizeof b),
			cli_show_size(pm, "off_bytes", c, sizeof c),
			cli_show_num(pm, "priority", "%.0f", d, sizeof d),
			cli_show_size(pm, "rss_bytes", e, sizeof e));
		kv(f, "pool share:", buf);
	}
	kv(f, "tokens/s:", cli_show_num(ret, "tokens_per_s", "%.0f", buf, sizeof buf));
	kv(f, "step time:", cli_show_num(ret, "step_ms", "%.1f ms", buf, sizeof buf));
	if (cli_jnum(ret, "grad_accum", &v) && v > 1)
		kv(f, "grad accum:", cli_show_num(ret, "grad_accum", "%.0f micro-batches a step", buf,
			sizeof buf));
	const char *prec = json_string_value(json_object_get(ret, "precision"));
	if (prec && strcmp(prec, "fp32") != 0)
		kv(f, "precision:", prec);
	if (cli_jnum(ret, "elapsed_s", &v) && v > 0) {
		char eta[32] = "";
		double e;
		size_t n = strlen(cli_duration_format(v, buf, sizeof buf));
		if (cli_jnum(ret, "eta_s", &e))
			snprintf(buf + n, sizeof buf - n, ", %s to go",
				cli_duration_format(e, eta, sizeof eta));
		kv(f, "elapsed:", buf);
	}
	kv(f, "policy:", cli_policy_format(cli_jobj(ret, "policy"), buf, sizeof buf));
	if (cli_auto_text(ret, 0, buf, sizeof buf)) /* the memory controller, when one is on */
		kv(f, "memory budget:", buf);
	kv(f, "last checkpoint:", show_str(ret, "last_checkpoint", "-", buf, sizeof buf));
	json_t *se = cli_jobj(ret, "last_save_error");
	if (se) {
		char reason[TEXT_LEN], step[32];
		snprintf(buf, sizeof buf, "step %s: %s", cli_show_num(se, "step", "%.0f", step,
			sizeof step), show_str(se, "reason", "-", reason, sizeof reason));
		kv(f, "last save failed:", buf);
	}
	const char *reason = cli_jstr(ret, "reason");
	if (reason && *reason)
		kv(f, "reason:", cli_str_clean(reason, buf, sizeof buf));
	if (cli_jnum(ret, "exit_status", &v))
		kv(f, "exit status:", cli_show_num(ret, "exit_status", "%.0f", buf, sizeof buf));
}

/* A table of sections (array of {name, mode, saved_bytes, workspace_bytes[, extra_flops]})
 * with a total row, then the recompute workspace once: the blocks share one buffer (a
 * column of it repeated on every recomputing row would add up to a total that was never
 * held), and the head has its own. */
static void sections_table(FILE *f, const json_t *sections, int flops)
{
	static const char *const head[] = {"SECTION", "MODE", "SAVED", "EXTRA-FLOPS"};
	double saved = 0, fl = 0, v, head_ws = 0;
	double ws = cli_block_workspace(sections, &head_ws);
	cli_table t;
	size_t i;
	json_t *s;

	cli_table_init(&t, flops ? 4 : 3, head, "llrr");
	json_array_foreach(sections, i, s)
	{
		char name[64], mode[32], a[32], c[32] = "-";
		if (cli_jnum(s, "saved_bytes", &v))
			saved += v;
		if (flops && cli_jnum(s, "extra_flops", &v)) {
			fl += v;
			cli_flops_format(v, c, sizeof c);
		}
		cli_table_add(&t, show_str(s, "name", "-", name, sizeof name),
			      show_str(s, "mode", "-", mode, sizeof mode),
			      cli_show_size(s, "saved_bytes", a, sizeof a), c);
	}
	if (json_array_size(sections) > 1) {
		char a[32], c[32];
		cli_table_add(&t, "total", "", cli_size_format(saved, a, sizeof a),
			      cli_flops_format(fl, c, sizeof c));
	}
	table_flush(f, &t);
	char a[32];
	if (ws > 0)
		fprintf(f, "shared recompute workspace: %s (one buffer for all full and selective "
			   "blocks, not one each)\n", cli_size_format(ws, a, sizeof a));
	if (head_ws > 0)
		fprintf(f, "head workspace: %s (its chunk of logits)\n",
			cli_size_format(head_ws, a, sizeof a));
}

/* A number with a unit, or "-" when the field is missing or null. */
static const char *show_ms(const json_t *o, const char *key, const char *fmt, char *buf,
	size_t len)
{
	double v;
	if (!cli_jnum(o, key, &v))
		return "-";
	snprintf(buf, len, fmt, v);
	return buf;
}

void cli_show_costs(FILE *f, const char *job, const json_t *ret)
{
	static const char *const head[] = {"SECTION", "MODE", "SAMPLES", "SAVED", "STEP-MS",
		"RECOMPUTE-MS", "ADDED-MS", "MS/MIB-SAVED"};
	const json_t *secs = json_object_get(ret, "sections");
	double noise = cli_costs_noise(secs);
	cli_table t;
	size_t i;
	json_t *s;
	double v;
	(void)job;
	cli_table_init(&t, 8, head, "llrrrrrr");
	json_array_foreach(secs, i, s) {
		const char *mode;
		json_t *cell;
		char name[64];
		show_str(s, "name", "-", name, sizeof name);
		json_object_foreach(cli_jobj(s, "modes"), mode, cell) {
			char n[16], sv[32], st[32], rc[32], add[32] = "-", per[32];
			double fw = 0, r = 0, bw = 0, a;
			cli_jnum(cell, "forward_ms", &fw);
			cli_jnum(cell, "recompute_ms", &r);
			cli_jnum(cell, "backward_ms", &bw);
			snprintf(n, sizeof n, "%.0f", cli_jnum(cell, "samples", &v) ? v : 0);
			snprintf(st, sizeof st, "%.2f", fw + r + bw);
			int noisy = cli_jnum(cell, "added_ms", &a) &&
				strcmp(cli_added_ms_format(a, noise, add, sizeof add), "~0 (noise)") == 0;
			cli_table_add(&t, name, mode, n, cli_show_size(cell, "saved_bytes", sv, sizeof sv),
				st, show_ms(cell, "recompute_ms", "%.2f", rc, sizeof rc), add,
				noisy ? "~0" : show_ms(cell, "ms_per_mib_saved", "%.3f", per, sizeof per));
		}
	}
	table_flush(f, &t);
	if (noise > 0)
		fprintf(f, "\nADDED-MS within the measured noise (%.2f ms: the most a mode came out "
			   "faster than off,\nwhich only noise does) is shown as ~0 (noise); the planner "
			   "counts it as 0\n", noise);
	if (cli_jnum(ret, "probing_until", &v))
		fprintf(f, "\nmeasuring every section's modes until step %.0f\n", v);
}

/* A change rematd answered "queued" (its worker did not take it in time): 1 after saying
 * so, in place of what the change would print. */
static int show_queued(FILE *f, const char *job, const json_t *ret)
{
	char what[64], s[32];
	if (!json_is_true(json_object_get(ret, "queued")))
		return 0;
	fprintf(f, "%s: %s queued, not yet applied: the worker has not taken it within %s s "
		   "(stopped, or too busy to read); it takes effect, or is refused, when the "
		   "worker reads it (see 'rematctl status %s' and rematd's log)\n", job,
		show_str(ret, "execute", "the change", what, sizeof what),
		cli_show_num(ret, "waited_s", "%.3g", s, sizeof s), job);
	return 1;
}

void cli_show_auto(FILE *f, const char *job, const json_t *ret)
{
	if (show_queued(f, job, ret))
		return;
	double a = 0, b = 0, least;
	char size[32], low[64] = "";
	cli_jnum(ret, "applies_at_step", &a);
	if (cli_jnum(ret, "least_bytes", &least)) {
		char l[32];
		snprintf(low, sizeof low, "; the least any policy needs is %s",
			cli_mib_format(least, l, sizeof l));
	}
	/* the budget is the process's memory: resident, as top and the OOM killer see it */
	if (cli_jnum(ret, "budget_bytes", &b))
		fprintf(f, "%s: keeping the process's memory under %s from step %.0f on%s "
			   "(REMAT_AUTO events say each change)\n", job,
			cli_mib_format(b, size, sizeof size), a, low);
	else
		fprintf(f, "%s: the memory controller is off from step %.0f on; the policy is "
			   "yours\n", job, a);
}

void cli_show_memlog(FILE *f, const char *job, const json_t *ret)
{
	/* what every step holds (weights, gradients, moments, data) in one column: the rest
	 * is what the policy and the step move */
	static const char *const head[] = {"STEP", "PEAK", "ACTIVATIONS", "RECOMPUTE",
		"WORKSPACE", "FIXED", "OOM-RETRIES"};
	static const char *const fixed[] = {"params", "grads", "optimizer", "data"};
	cli_table t;
	size_t i;
	json_t *row, *rows = json_object_get(ret, "steps"), *last = NULL;
	(void)job;
	cli_table_init(&t, 7, head, "rrrrrrr");
	json_array_foreach(rows, i, row) {
		char pk[CLI_SIZE_LEN], ac[CLI_SIZE_LEN], rc[CLI_SIZE_LEN], ws[CLI_SIZE_LEN],
			fx[CLI_SIZE_LEN], n[16], o[16];
		json_t *cats = cli_jobj(row, "categories");
		double sum = 0, v;
		for (int c = 0; c < 4; c++)
			sum += cli_jnum(cats, fixed[c], &v) ? v : 0;
		cli_table_add(&t, cli_show_num(row, "step", "%.0f", n, sizeof n),
			cli_show_size(row, "peak_bytes", pk, sizeof pk),
			cli_show_size(cats, "activations", ac, sizeof ac),
			cli_show_size(cats, "recompute", rc, sizeof rc),
			cli_show_size(cats, "workspace", ws, sizeof ws), cli_size_format(sum, fx, sizeof fx),
			cli_show_num(row, "oom_retries", "%.0f", o, sizeof o));
		last = row;
	}
	table_flush(f, &t);
	if (!last) {
		fprintf(f, "no step yet\n");
		return;
	}
	static const char *const shead[] = {"SECTION", "SAVED"};
	const char *name;
	json_t *v;
	double step = 0;
	cli_jnum(last, "step", &step);
	fprintf(f, "\nwhat each section held at step %.0f:\n", step);
	cli_table_init(&t, 2, shead, "lr");
	json_object_foreach(cli_jobj(last, "sections"), name, v) {
		char sec[64], sz[CLI_SIZE_LEN];
		cli_table_add(&t, cli_str_clean(name, sec, sizeof sec),
			cli_size_format(json_number_value(v), sz, sizeof sz));
	}
	table_flush(f, &t);
}

void cli_show_profile(FILE *f, const char *job, const json_t *ret)
{
	double a = 0, u = 0;
	if (show_queued(f, job, ret))
		return;
	cli_jnum(ret, "applies_at_step", &a);
	cli_jnum(ret, "until_step", &u);
	fprintf(f, "%s: measuring every section in every mode from step %.0f to %.0f; then "
		   "'remat costs %s'\n", job, a, u, job);
}

/* An ended job's figures, as rematd kept them: says so, and as of which step. */
static void show_final(FILE *f, const json_t *ret)
{
	char st[32], at[32], end[32];
	if (!json_is_true(json_object_get(ret, "final")))
		return;
	fprintf(f, "(last figures, as of step %s; job %s at step %s)\n\n",
		cli_show_num(ret, "as_of_step", "%.0f", at, sizeof at),
		show_str(ret, "state", "ended", st, sizeof st),
		cli_show_num(ret, "job_step", "%.0f", end, sizeof end));
}

void cli_show_remat_get(FILE *f, const char *job, const json_t *ret)
{
	(void)job;
	char buf[TEXT_LEN];
	json_t *aliases = cli_jobj(ret, "aliases");
	show_final(f, ret);

	kv(f, "policy:", cli_policy_format(cli_jobj(ret, "policy"), buf, sizeof buf));
	if (aliases && json_object_size(aliases) > 0)
		kv(f, "aliases:", cli_policy_format(aliases, buf, sizeof buf));
	fputc('\n', f);
	sections_table(f, json_object_get(ret, "sections"), 0);
}

/* A plan's fixed part as the sum of its terms (the reply's "memory"): what the engine
 * counts (weights, gradients, moments, workspace, data), the process's untracked memory
 * and a save's snapshot where the plan holds one; a term of 0 is left out. */
static char *plan_fixed(const json_t *mem, double fixed, char *buf, size_t len)
{
	static const char *const counted[] = {"params", "grads", "optimizer", "workspace", "data"};
	const char *src = cli_jstr(mem, "fixed_source"), *usrc = cli_jstr(mem, "untracked_source");
	char a[32], b[32], c[32], d[32], s1[32] = "", s2[32] = "";
	double sum = 0, v, untracked = 0, snapshot = 0;
	if (src)
		snprintf(s1, sizeof s1, "; %s", cli_str_clean(src, a, sizeof a));
	if (!cli_jnum(mem, "untracked", &untracked)) { /* a server before the process's terms */
		snprintf(buf, len, "%s (params, grads, optimizer, workspace, data%s)",
			 cli_size_format(fixed, a, sizeof a), s1);
		return buf;
	}
	for (size_t i = 0; i < sizeof counted / sizeof counted[0]; i++)
		sum += cli_jnum(mem, counted[i], &v) ? v : 0;
	cli_jnum(mem, "snapshot", &snapshot);
	if (usrc)
		snprintf(s2, sizeof s2, " (%s)", cli_str_clean(usrc, d, sizeof d));
	int n = snprintf(buf, len, "%s = %s counted (params, grads, optimizer, workspace, data%s)",
			 cli_size_format(fixed, a, sizeof a), cli_size_format(sum, b, sizeof b), s1);
	if (untracked > 0 && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, " + %s untracked%s",
			      cli_size_format(untracked, c, sizeof c), s2);
	if (snapshot > 0 && n >= 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, " + %s a save's snapshot",
			 cli_size_format(snapshot, c, sizeof c));
	return buf;
}

/* How saves go under a plan (the reply's "saves"), or NULL without saves. */
static char *plan_saves(const json_t *saves, char *buf, size_t len)
{
	const char *way = cli_jstr(saves, "way");
	char a[32], ms[48] = "";
	double v;
	if (!way)
		return NULL;
	if (strcmp(way, "snapshot") == 0) {
		if (cli_jnum(saves, "snapshot_stall_ms", &v))
			snprintf(ms, sizeof ms, "; its copy took %.0f ms", v);
		snprintf(buf, len, "a snapshot (%s) is held: training goes on while a save writes%s",
			 cli_show_size(saves, "snapshot_bytes", a, sizeof a), ms);
	} else if (strcmp(way, "live") == 0) {
		if (cli_jnum(saves, "live_stall_ms", &v))
			snprintf(ms, sizeof ms, " (the last save: %.0f ms)", v);
		snprintf(buf, len, "live: no room for a snapshot (%s), so a save writes from the "
			 "live tensors and training waits for it%s",
			 cli_show_size(saves, "snapshot_bytes", a, sizeof a), ms);
	} else {
		cli_str_clean(way, buf, len);
	}
	return buf;
}

void cli_show_plan(FILE *f, const json_t *ret, long long budget)
{
	char buf[TEXT_LEN], a[32], b[32];
	double saved = NAN, rec = NAN, extra = NAN, model = NAN, fixed = NAN, peak = NAN;
	double least = NAN;
	json_t *fits = json_is_object(ret) ? json_object_get(ret, "fits") : NULL;

	sections_table(f, json_object_get(ret, "sections"), 1);
	fputc('\n', f);
	kv(f, "policy:", cli_policy_format(cli_jobj(ret, "policy"), buf, sizeof buf));
	cli_jnum(ret, "saved_bytes", &saved);
	cli_jnum(ret, "recompute_bytes", &rec);
	cli_jnum(ret, "extra_flops", &extra);
	cli_jnum(ret, "model_flops", &model);
	cli_jnum(ret, "fixed_bytes", &fixed);
	cli_jnum(ret, "peak_bytes", &peak);
	cli_jnum(ret, "least_bytes", &least);
	kv(f, "saved:", cli_size_format(saved, a, sizeof a));
	kv(f, "recompute:", cli_size_format(rec, a, sizeof a));
	if (isfinite(fixed) && fixed > 0) {
		kv(f, "fixed:", plan_fixed(cli_jobj(ret, "memory"), fixed, buf, sizeof buf));
		kv(f, "peak:", cli_size_format(peak, a, sizeof a));
		if (plan_saves(cli_jobj(ret, "saves"), buf, sizeof buf))
			kv(f, "saves:", buf);
	} else {
		kv(f, "total:", cli_size_format(saved + rec, a, sizeof a));
	}
	if (isfinite(model) && model > 0)
		snprintf(buf, sizeof buf, "%s per step (+%.1f%% of %s)",
			 cli_flops_format(extra, a, sizeof a), 100.0 * extra / model,
			 cli_flops_format(model, b, sizeof b));
	else
		snprintf(buf, sizeof buf, "%s per step", cli_flops_format(extra, a, sizeof a));
	kv(f, "extra compute:", buf);
	double step_ms;
	if (cli_jnum(ret, "step_ms", &step_ms)) {
		const char *src = json_string_value(json_object_get(ret, "cost_source"));
		snprintf(buf, sizeof buf, "%.1f ms (%s)", step_ms, src ? src : "predicted");
		kv(f, "step time:", buf);
	}
	if (json_is_boolean(fits) || budget >= 0) {
		char verdict[96];
		if (json_is_true(fits))
			snprintf(verdict, sizeof verdict, "fits");
		else if (json_is_false(fits) && isfinite(least))
			snprintf(verdict, sizeof verdict, "does not fit: the least memory any policy "
				 "needs is %s", cli_size_format(least, b, sizeof b));
		else
			snprintf(verdict, sizeof verdict, "%s", json_is_false(fits) ? "does not fit" : "-");
		if (budget >= 0)
			snprintf(buf, sizeof buf, "%s: %s",
				 cli_size_format((double)budget, a, sizeof a), verdict);
		else
			snprintf(buf, sizeof buf, "%s", verdict);
		kv(f, "budget:", buf);
	}
}

/* One memory table: the documented categories in their order, then any others the server
 * adds, in its order (the process's untracked memory among them), then the total;
 * first is the first column's heading (CATEGORY, or DEVICE). The total is the tracked
 * categories' alone: beside an untracked row it says so. Returns 1 when it showed one. */
static int mem_table(FILE *f, const char *first, const json_t *cats, const json_t *total)
{
	const char *const head[] = {first, "CURRENT", "PEAK", "PEAK-SINCE-RESET"};
	json_t *v;
	const char *key;
	char a[32], b[32], c[32];
	cli_table t;
	int untracked = 0;

	cli_table_init(&t, 4, head, "lrrr");
	for (int i = 0; cli_mem_categories[i]; i++) {
		json_t *m = cli_jobj(cats, cli_mem_categories[i]);
		if (m)
			cli_table_add(&t, cli_mem_categories[i], cli_show_size(m, "current", a, 32),
				      cli_show_size(m, "peak", b, 32),
				      cli_show_size(m, "peak_since_reset", c, 32));
	}
	json_object_foreach((json_t *)cats, key, v)
	{
		int known = 0;
		for (int i = 0; cli_mem_categories[i]; i++)
			known |= strcmp(key, cli_mem_categories[i]) == 0;
		if (known || !json_is_object(v))
			continue;
		untracked |= strcmp(key, "untracked") == 0;
		cli_table_add(&t, key, cli_show_size(v, "current", a, 32),
			      cli_show_size(v, "peak", b, 32),
			      cli_show_size(v, "peak_since_reset", c, 32));
	}
	if (total)
		cli_table_add(&t, untracked ? "total tracked" : "total",
			      cli_show_size(total, "current", a, 32), cli_show_size(total, "peak", b, 32),
			      cli_show_size(total, "peak_since_reset", c, 32));
	table_flush(f, &t);
	return untracked;
}

void cli_show_mem(FILE *f, const char *job, const json_t *ret)
{
	(void)job;
	char a[32], b[32], buf[TEXT_LEN];
	show_final(f, ret);
	if (mem_table(f, "CATEGORY", cli_jobj(ret, "categories"), cli_jobj(ret, "total")))
		fprintf(f, "untracked: the process's resident memory beyond the tracked categories "
			   "(binary, libraries, thread stacks, BLAS buffers, allocator slack); not in "
			   "the tracked total\n");
	fputc('\n', f);
	sections_table(f, json_object_get(ret, "sections"), 0);
	fputc('\n', f);
	snprintf(buf, sizeof buf, "%s (peak %s)", cli_show_size(ret, "rss", a, sizeof a),
		 cli_show_size(ret, "rss_peak", b, sizeof b));
	kv(f, "rss:", buf);
	kv(f, "step:", cli_show_num(ret, "step", "%.0f", buf, sizeof buf));

	/* a job on device cuda: the GPU's memory (the table above is then host memory) */
	json_t *dev = cli_jobj(ret, "device");
	if (!dev)
		return;
	fputc('\n', f);
	mem_table(f, "DEVICE", cli_jobj(dev, "categories"), cli_jobj(dev, "total"));
	fputc('\n', f);
	char n[32];
	snprintf(buf, sizeof buf, "%s (peak %s) in %s arenas",
		 cli_show_size(dev, "reserved", a, sizeof a),
		 cli_show_size(dev, "reserved_peak", b, sizeof b),
		 cli_show_num(dev, "arenas", "%.0f", n, sizeof n));
	kv(f, "reserved:", buf);
	snprintf(buf, sizeof buf, "%s free of %s", cli_show_size(dev, "free", a, sizeof a),
		 cli_show_size(dev, "total_memory", b, sizeof b));
	kv(f, "device:", buf);
	snprintf(buf, sizeof buf, "%s (peak %s)", cli_show_size(dev, "pinned_host", a, sizeof a),
		 cli_show_size(dev, "pinned_host_peak", b, sizeof b));
	kv(f, "pinned host:", buf);
}

/* "3d 4h 5m 6s", leading zero units left out. */
static char *uptime_format(double s, char *buf, size_t len)
{
	if (!isfinite(s) || s < 0) {
		snprintf(buf, len, "-");
		return buf;
	}
	long long t = (long long)s;
	long long d = t / 86400, h = t / 3600 % 24, m = t / 60 % 60, sec = t % 60;
	if (d)
		snprintf(buf, len, "%lldd %lldh %lldm %llds", d, h, m, sec);
	else if (h)
		snprintf(buf, len, "%lldh %lldm %llds", h, m, sec);
	else if (m)
		snprintf(buf, len, "%lldm %llds", m, sec);
	else
		snprintf(buf, len, "%llds", sec);
	return buf;
}

void cli_show_info(FILE *f, const char *job, const json_t *ret)
{
	(void)job;
	char buf[TEXT_LEN];
	double up = NAN;
	json_t *backends = json_is_object(ret) ? json_object_get(ret, "backends") : NULL, *b;
	size_t i, o = 0;

	kv(f, "version:", show_str(ret, "version", "-", buf, sizeof buf));
	kv(f, "pid:", cli_show_num(ret, "pid", "%.0f", buf, sizeof buf));
	cli_jnum(ret, "uptime_s", &up);
	kv(f, "uptime:", uptime_format(up, buf, sizeof buf));
	kv(f, "socket:", show_str(ret, "socket", "-", buf, sizeof buf));
	kv(f, "state dir:", show_str(ret, "state_dir", "-", buf, sizeof buf));
	buf[0] = '\0';
	json_array_foreach(backends, i, b)
	{
		char name[64];
		if (!json_is_string(b))
			continue;
		cli_str_clean(json_string_value(b), name, sizeof name);
		int n = snprintf(buf + o, sizeof buf - o, "%s%s", o ? ", " : "", name);
		if (n < 0 || o + (size_t)n >= sizeof buf)
			break;
		o += (size_t)n;
	}
	kv(f, "backends:", o ? buf : "-");
	kv(f, "blas:", show_str(ret, "blas", "-", buf, sizeof buf));
	kv(f, "matmul:", show_str(ret, "matmul", "-", buf, sizeof buf));
	kv(f, "max jobs:", cli_show_num(ret, "max_jobs", "%.0f", buf, sizeof buf));
	kv(f, "jobs running:", cli_show_num(ret, "jobs_running", "%.0f", buf, sizeof buf));
	json_t *pool = cli_jobj(ret, "pool"), *j;
	if (!pool)
		return;
	char a[32], g[32], c[32], src[32];
	snprintf(buf, sizeof buf, "%s (%s), %s given, the jobs' least %s",
		cli_show_size(pool, "bytes", a, sizeof a), show_str(pool, "source", "-", src,
		sizeof src), cli_show_size(pool, "given_bytes", g, sizeof g),
		cli_show_size(pool, "least_bytes", c, sizeof c));
	kv(f, "memory pool:", buf);
	json_array_foreach(json_object_get(pool, "jobs"), i, j) {
		char id[32];
		snprintf(buf, sizeof buf, "%s %s", show_str(j, "job", "-", id, sizeof id),
			cli_show_size(j, "share_bytes", a, sizeof a));
		kv(f, "", buf);
	}
}

void cli_show_start(FILE *f, const char *job, const json_t *ret)
{
	(void)job;
	char id[64];
	/* the id alone, like `docker run -d`, so that JOB=$(rematctl start x.json) works */
	fprintf(f, "%s\n", show_str(ret, "job", "-", id, sizeof id));
	/* what the check allowed but warns about: on stderr, never in the id's way */
	json_t *w = json_object_get(ret, "warnings"), *v;
	size_t i;
	char line[TEXT_LEN];
	json_array_foreach(w, i, v)
		if (json_is_string(v))
			fprintf(stderr, "rematctl: warning: %s\n",
				cli_str_clean(json_string_value(v), line, sizeof line));
}

void cli_show_pause(FILE *f, const char *job, const json_t *ret)
{
	char step[32];
	if (show_queued(f, job, ret))
		return;
	/* the step it stops after, as status will show it */
	fprintf(f, "%s: pauses at step %s\n", job,
		cli_show_num(ret, "step", "%.0f", step, sizeof step));
}

void cli_show_resume(FILE *f, const char *job, const json_t *ret)
{
	char st[32], step[32], path[TEXT_LEN];
	const char *ck = cli_jstr(ret, "checkpoint");
	if (show_queued(f, job, ret))
		return;
	if (ck)
		/* an ended job, queued again to go on from its checkpoint */
		fprintf(f, "%s: resumes from %s at step %s (%s)\n", job,
			cli_str_clean(ck, path, sizeof path),
			cli_show_num(ret, "step", "%.0f", step, sizeof step),
			show_str(ret, "state", "-", st, sizeof st));
	else
		fprintf(f, "%s: %s at step %s\n", job, show_str(ret, "state", "-", st, sizeof st),
			cli_show_num(ret, "step", "%.0f", step, sizeof step));
}

void cli_show_remove(FILE *f, const char *job, const json_t *ret)
{
	char path[TEXT_LEN];
	fprintf(f, "%s: removed; its checkpoints stay in %s\n", job,
		show_str(ret, "checkpoints", "-", path, sizeof path));
}

/* What a stop kept or dropped: ", saved to X", or " without saving: N steps since X
 * dropped" (or every step, with no checkpoint). */
static void show_stop_kept(FILE *f, const json_t *ret)
{
	char path[TEXT_LEN], n[32];
	const char *ck = cli_jstr(ret, "checkpoint"), *since = cli_jstr(ret, "since_checkpoint");
	const char *base = since ? strrchr(since, '/') : NULL;
	if (ck) {
		fprintf(f, ", saved to %s", cli_str_clean(ck, path, sizeof path));
		return;
	}
	if (!json_is_integer(json_object_get(ret, "dropped_steps")))
		return; /* a queued job's cancel: nothing ran */
	cli_show_num(ret, "dropped_steps", "%.0f", n, sizeof n);
	if (since)
		fprintf(f, " without saving: %s step%s since %s dropped", n,
			strcmp(n, "1") ? "s" : "", cli_str_clean(base && base[1] ? base + 1 : since,
				path, sizeof path));
	else
		fprintf(f, " without saving, no checkpoint: all %s step%s dropped", n,
			strcmp(n, "1") ? "s" : "");
}

void cli_show_stop(FILE *f, const char *job, const json_t *ret)
{
	char step[32];
	if (cli_jstr(ret, "state")) /* rematd's answer for a queued job: it never ran */
		fprintf(f, "%s: cancelled before it started", job);
	else
		fprintf(f, "%s: stopped at step %s", job,
			cli_show_num(ret, "step", "%.0f", step, sizeof step));
	show_stop_kept(f, ret);
	fputc('\n', f);
}

void cli_show_remat_set(FILE *f, const char *job, const json_t *ret)
{
	char at[32], pol[TEXT_LEN], p[32], b[32];
	const char *ctl = cli_jstr(ret, "controller"); /* null: no controller was on */
	if (show_queued(f, job, ret))
		return;
	fprintf(f, "%s: applies at step %s: %s", job,
		cli_show_num(ret, "applies_at_step", "%.0f", at, sizeof at),
		cli_policy_format(cli_jobj(ret, "policy"), pol, sizeof pol));
	if (ctl && strcmp(ctl, "on") == 0)
		fprintf(f, "; the memory controller holds it under the budget (predicted %s of %s)",
			cli_show_mib(ret, "predicted_peak_bytes", p, sizeof p),
			cli_show_mib(ret, "budget_bytes", b, sizeof b));
	else if (ctl && strcmp(ctl, "off") == 0)
		fprintf(f, "; the memory controller is off: the policy is yours (remat auto "
			   "--budget turns it on again)");
	fputc('\n', f);
}

void cli_show_save(FILE *f, const char *job, const json_t *ret)
{
	char step[32], path[TEXT_LEN], size[32], ms[32];
	fprintf(f, "%s: saved step %s to %s (%s in %s ms)\n", job,
		cli_show_num(ret, "step", "%.0f", step, sizeof step),
		show_str(ret, "path", "-", path, sizeof path),
		cli_show_size(ret, "bytes", size, sizeof size),
		cli_show_num(ret, "ms", "%.0f", ms, sizeof ms));
}

void cli_show_eval(FILE *f, const char *job, const json_t *ret)
{
	char v[32], step[32], toks[32];
	fprintf(f, "%s: val loss %s after step %s (%s tokens)\n", job,
		cli_show_num(ret, "val_loss", "%.6f", v, sizeof v),
		cli_show_num(ret, "step", "%.0f", step, sizeof step),
		cli_show_num(ret, "val_tokens", "%.0f", toks, sizeof toks));
}

void cli_show_set(FILE *f, const char *job, const json_t *ret)
{
	char step[32], kv[TEXT_LEN] = "";
	const char *k;
	json_t *v;
	size_t used = 0;
	if (show_queued(f, job, ret))
		return;
	json_object_foreach(json_object_get(ret, "set"), k, v) {
		char t[TEXT_LEN / 2]; /* as typed: lr=0.0003, schedule=cosine */
		if (used < sizeof kv)
			used += (size_t)snprintf(kv + used, sizeof kv - used, "%s%s=%s",
				used ? " " : "", k, cli_value_format(v, t, sizeof t));
	}
	char clean[TEXT_LEN];
	fprintf(f, "%s: from step %s: %s\n", job,
		cli_show_num(ret, "applies_at_step", "%.0f", step, sizeof step),
		cli_str_clean(kv, clean, sizeof clean));
}

void cli_show_reset(FILE *f, const char *job, const json_t *ret)
{
	if (show_queued(f, job, ret))
		return;
	fprintf(f, "%s: peak memory counters reset\n", job);
}

void cli_show_shutdown(FILE *f, const char *job, const json_t *ret)
{
	char id[64], step[32];
	size_t i;
	json_t *e;
	(void)job;
	/* each job it stopped, as stop says it */
	json_array_foreach(json_object_get(ret, "jobs"), i, e) {
		fprintf(f, "%s: stopped at step %s", show_str(e, "job", "-", id, sizeof id),
			cli_show_num(e, "step", "%.0f", step, sizeof step));
		show_stop_kept(f, e);
		fputc('\n', f);
	}
	fprintf(f, "rematd: every job has stopped; the daemon exits\n");
}
