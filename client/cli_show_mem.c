/* cli_show_mem.c - rematctl's memory and policy views (see cli_show.h): remat costs, remat
 * auto, remat memlog, remat profile, remat get, plan, mem. The helpers they share with
 * cli_show.c are cli_show_int.h's.
 */
#include "cli_show.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_fmt.h"
#include "cli_show_int.h"

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
		cli_table_add(&t, cli_show__str(s, "name", "-", name, sizeof name),
			      cli_show__str(s, "mode", "-", mode, sizeof mode),
			      cli_show_size(s, "saved_bytes", a, sizeof a), c);
	}
	if (json_array_size(sections) > 1) {
		char a[32], c[32];
		cli_table_add(&t, "total", "", cli_size_format(saved, a, sizeof a),
			      cli_flops_format(fl, c, sizeof c));
	}
	cli_show__flush(f, &t);
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
		cli_show__str(s, "name", "-", name, sizeof name);
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
	cli_show__flush(f, &t);
	if (noise > 0)
		fprintf(f, "\nADDED-MS within the measured noise (%.2f ms: the most a mode came out "
			   "faster than off,\nwhich only noise does) is shown as ~0 (noise); the planner "
			   "counts it as 0\n", noise);
	if (cli_jnum(ret, "probing_until", &v))
		fprintf(f, "\nmeasuring every section's modes until step %.0f\n", v);
}


void cli_show_auto(FILE *f, const char *job, const json_t *ret)
{
	if (cli_show__queued(f, job, ret))
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
	cli_show__flush(f, &t);
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
	cli_show__flush(f, &t);
}

void cli_show_profile(FILE *f, const char *job, const json_t *ret)
{
	double a = 0, u = 0;
	if (cli_show__queued(f, job, ret))
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
		cli_show__str(ret, "state", "ended", st, sizeof st),
		cli_show_num(ret, "job_step", "%.0f", end, sizeof end));
}

void cli_show_remat_get(FILE *f, const char *job, const json_t *ret)
{
	(void)job;
	char buf[TEXT_LEN];
	json_t *aliases = cli_jobj(ret, "aliases");
	show_final(f, ret);

	cli_show__kv(f, "policy:", cli_policy_format(cli_jobj(ret, "policy"), buf, sizeof buf));
	if (aliases && json_object_size(aliases) > 0)
		cli_show__kv(f, "aliases:", cli_policy_format(aliases, buf, sizeof buf));
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

/* "nf4, blocks of 64, compute fp32: 106.9M weights in 60.1 MiB (407.8 MiB in float32:
 * saves 347.7 MiB)": what a 4-bit base saves, counted in params above; NULL when the job
 * quantizes nothing */
static char *plan_quantize(const json_t *q, char *buf, size_t len)
{
	const char *type = cli_jstr(q, "type"), *dt = cli_jstr(q, "compute");
	char t[16], d[16], a[32], b[32], c[32];
	double n, bytes, bs;
	if (!type || !cli_jnum(q, "weights", &n) || !cli_jnum(q, "bytes", &bytes) ||
		!cli_jnum(q, "block_size", &bs))
		return NULL;
	double f32 = 4 * n;
	snprintf(buf, len, "%s, blocks of %.0f%s, compute %s: %.1fM weights in %s (%s in "
		"float32: saves %s)", cli_str_clean(type, t, sizeof t), bs,
		json_is_true(json_object_get(q, "double_quant")) ? ", double-quantized" : "",
		cli_str_clean(dt ? dt : "fp32", d, sizeof d), n / 1e6,
		cli_size_format(bytes, a, sizeof a), cli_size_format(f32, b, sizeof b),
		cli_size_format(f32 - bytes, c, sizeof c));
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
	cli_show__kv(f, "policy:", cli_policy_format(cli_jobj(ret, "policy"), buf, sizeof buf));
	cli_jnum(ret, "saved_bytes", &saved);
	cli_jnum(ret, "recompute_bytes", &rec);
	cli_jnum(ret, "extra_flops", &extra);
	cli_jnum(ret, "model_flops", &model);
	cli_jnum(ret, "fixed_bytes", &fixed);
	cli_jnum(ret, "peak_bytes", &peak);
	cli_jnum(ret, "least_bytes", &least);
	cli_show__kv(f, "saved:", cli_size_format(saved, a, sizeof a));
	cli_show__kv(f, "recompute:", cli_size_format(rec, a, sizeof a));
	if (isfinite(fixed) && fixed > 0) {
		cli_show__kv(f, "fixed:", plan_fixed(cli_jobj(ret, "memory"), fixed, buf, sizeof buf));
		cli_show__kv(f, "peak:", cli_size_format(peak, a, sizeof a));
		if (plan_saves(cli_jobj(ret, "saves"), buf, sizeof buf))
			cli_show__kv(f, "saves:", buf);
		if (plan_quantize(cli_jobj(ret, "quantize"), buf, sizeof buf))
			cli_show__kv(f, "4-bit base:", buf);
	} else {
		cli_show__kv(f, "total:", cli_size_format(saved + rec, a, sizeof a));
	}
	if (isfinite(model) && model > 0)
		snprintf(buf, sizeof buf, "%s per step (+%.1f%% of %s)",
			 cli_flops_format(extra, a, sizeof a), 100.0 * extra / model,
			 cli_flops_format(model, b, sizeof b));
	else
		snprintf(buf, sizeof buf, "%s per step", cli_flops_format(extra, a, sizeof a));
	cli_show__kv(f, "extra compute:", buf);
	double step_ms;
	if (cli_jnum(ret, "step_ms", &step_ms)) {
		const char *src = json_string_value(json_object_get(ret, "cost_source"));
		snprintf(buf, sizeof buf, "%.1f ms (%s)", step_ms, src ? src : "predicted");
		cli_show__kv(f, "step time:", buf);
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
		cli_show__kv(f, "budget:", buf);
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
	cli_show__flush(f, &t);
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
	cli_show__kv(f, "rss:", buf);
	cli_show__kv(f, "step:", cli_show_num(ret, "step", "%.0f", buf, sizeof buf));
	const json_t *ranks = json_object_get(ret, "ranks");
	if (json_array_size(ranks) > 1) { /* data parallel: the figures above are the most */
		fprintf(f, "\n%zu ranks (the figures above: the most of any rank, each its own "
			   "after its last step):\n", json_array_size(ranks));
		cli_show__ranks(f, ranks);
	}

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
	cli_show__kv(f, "reserved:", buf);
	snprintf(buf, sizeof buf, "%s free of %s", cli_show_size(dev, "free", a, sizeof a),
		 cli_show_size(dev, "total_memory", b, sizeof b));
	cli_show__kv(f, "device:", buf);
	snprintf(buf, sizeof buf, "%s (peak %s)", cli_show_size(dev, "pinned_host", a, sizeof a),
		 cli_show_size(dev, "pinned_host_peak", b, sizeof b));
	cli_show__kv(f, "pinned host:", buf);
}
