/* cli_show.c - rematctl's human output of each reply (see cli_show.h): jobs, their
 * states and changes, the daemon. The memory and policy views are cli_show_mem.c's.
 *
 * Tables go through cli_fmt's cli_table; every string from the server is cleaned of
 * control characters before it reaches the terminal. Not here: --json, the watch view.
 */
#include "cli_show.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_fmt.h"
#include "cli_show_int.h"
#include "proto.h"

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
char *cli_show__str(const json_t *obj, const char *key, const char *dflt, char *buf, size_t len)
{
	const char *s = cli_jstr(obj, key);
	return cli_str_clean(s ? s : dflt, buf, len);
}

void cli_show__kv(FILE *f, const char *key, const char *value)
{
	fprintf(f, "%-*s %s\n", KEY_WIDTH - 1, key, value);
}

/* Prints the table and frees it; a table that cannot be built is reported. */
void cli_show__flush(FILE *f, cli_table *t)
{
	char *text = cli_table_render(t);
	if (text)
		fputs(text, f);
	else
		fprintf(stderr, "rematctl: out of memory\n");
	free(text);
	cli_table_free(t);
}

void cli_show__ranks(FILE *f, const json_t *ranks)
{
	static const char *const head[] = {"RANK", "STEP", "STEP MS", "ALL-REDUCE MS",
		"HIDDEN MS", "RSS", "TRACKED", "TRACKED PEAK"};
	size_t i;
	const json_t *r;
	cli_table t;
	if (!json_is_array(ranks) || json_array_size(ranks) < 2)
		return;
	/* mem-stats' rows have the tracked total; job-status's only what the steps say */
	int mem = cli_jobj(json_array_get(ranks, 0), "total") != NULL;
	cli_table_init(&t, mem ? 8 : 6, head, "rrrrrrrr");
	json_array_foreach (ranks, i, r) {
		char k[16], s[32], ms[32], ar[32], hid[32], rss[32], cur[32], peak[32];
		const json_t *tot = cli_jobj(r, "total");
		cli_table_add(&t, cli_show_num(r, "rank", "%.0f", k, sizeof k),
			cli_show_num(r, "step", "%.0f", s, sizeof s),
			cli_show_num(r, "step_ms", "%.1f", ms, sizeof ms),
			cli_show_num(r, "allreduce_ms", "%.1f", ar, sizeof ar),
			cli_show_num(r, "allreduce_hidden_ms", "%.1f", hid, sizeof hid),
			cli_show_size(r, "rss", rss, sizeof rss),
			cli_show_size(tot, "current", cur, sizeof cur),
			cli_show_size(tot, "peak", peak, sizeof peak));
	}
	cli_show__flush(f, &t);
}

char *cli_show_state(const json_t *obj, char *buf, size_t len)
{
	const char *state = cli_jstr(obj, "state"), *file;
	json_t *t = cli_jobj(obj, "tokenizing");
	double pct;
	if (!t || !state || strcmp(state, "starting") != 0 || !cli_jnum(t, "percent", &pct))
		return cli_show__str(obj, "state", "-", buf, len);
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
		cli_table_add(&t, cli_show__str(j, "job", "-", id, sizeof id),
			      cli_show__str(j, "name", "-", name, sizeof name),
			      cli_show_state(j, state, sizeof state),
			      step_of(j, step, sizeof step),
			      cli_show_num(j, "loss", "%.4f", loss, sizeof loss),
			      pool_of(j, mem, sizeof mem));
	}
	cli_show__flush(f, &t);
}

void cli_show_status(FILE *f, const char *job, const json_t *ret)
{
	(void)job;
	char buf[TEXT_LEN];
	double v;

	cli_show__kv(f, "job:", cli_show__str(ret, "job", "-", buf, sizeof buf));
	cli_show__kv(f, "name:", cli_show__str(ret, "name", "-", buf, sizeof buf));
	cli_show__kv(f, "state:", cli_show_state(ret, buf, sizeof buf));
	if (cli_model_text(ret, buf, sizeof buf)) /* what trains, as PEFT counts it */
		cli_show__kv(f, "model:", buf);
	cli_show__kv(f, "step:", step_of(ret, buf, sizeof buf));
	cli_show__kv(f, "loss:", cli_show_num(ret, "loss", "%.4f", buf, sizeof buf));
	cli_show__kv(f, "lr:", cli_show_num(ret, "lr", "%.3e", buf, sizeof buf));
	if (cli_jnum(ret, "val_loss", &v)) {
		char step[32];
		snprintf(buf, sizeof buf, "%.4f (after step %s)", v,
			cli_show_num(ret, "val_step", "%.0f", step, sizeof step));
		cli_show__kv(f, "val loss:", buf);
	}
	if (cli_pool_text(ret, 0, buf, sizeof buf)) { /* its part of rematd --memory's pool */
		char e[32];
		size_t n = strlen(buf);
		snprintf(buf + n, sizeof buf - n, ", resident %s",
			cli_show_size(cli_jobj(ret, "memory"), "rss_bytes", e, sizeof e));
		cli_show__kv(f, "pool share:", buf);
	}
	cli_show__kv(f, "tokens/s:", cli_show_num(ret, "tokens_per_s", "%.0f", buf, sizeof buf));
	cli_show__kv(f, "step time:", cli_show_num(ret, "step_ms", "%.1f ms", buf, sizeof buf));
	if (cli_jnum(ret, "grad_accum", &v) && v > 1)
		cli_show__kv(f, "grad accum:", cli_show_num(ret, "grad_accum",
			"%.0f micro-batches a step", buf, sizeof buf));
	const char *prec = json_string_value(json_object_get(ret, "precision"));
	if (prec && strcmp(prec, "fp32") != 0)
		cli_show__kv(f, "precision:", prec);
	if (cli_jnum(ret, "elapsed_s", &v) && v > 0) {
		char eta[32] = "";
		double e;
		size_t n = strlen(cli_duration_format(v, buf, sizeof buf));
		if (cli_jnum(ret, "eta_s", &e))
			snprintf(buf + n, sizeof buf - n, ", %s to go",
				cli_duration_format(e, eta, sizeof eta));
		cli_show__kv(f, "elapsed:", buf);
	}
	cli_show__kv(f, "policy:", cli_policy_format(cli_jobj(ret, "policy"), buf, sizeof buf));
	if (cli_auto_text(ret, 0, buf, sizeof buf)) /* the memory controller, when one is on */
		cli_show__kv(f, "memory budget:", buf);
	cli_show__kv(f, "last checkpoint:", cli_show__str(ret, "last_checkpoint", "-", buf,
		sizeof buf));
	json_t *se = cli_jobj(ret, "last_save_error");
	if (se) {
		char reason[TEXT_LEN], step[32];
		snprintf(buf, sizeof buf, "step %s: %s", cli_show_num(se, "step", "%.0f", step,
			sizeof step), cli_show__str(se, "reason", "-", reason, sizeof reason));
		cli_show__kv(f, "last save failed:", buf);
	}
	const char *reason = cli_jstr(ret, "reason");
	if (reason && *reason)
		cli_show__kv(f, "reason:", cli_str_clean(reason, buf, sizeof buf));
	if (cli_jnum(ret, "exit_status", &v))
		cli_show__kv(f, "exit status:", cli_show_num(ret, "exit_status", "%.0f", buf,
			sizeof buf));
	if (cli_jnum(ret, "ranks", &v) && v > 1) { /* data parallel */
		char how[TEXT_LEN];
		snprintf(buf, sizeof buf, "%.0f (%s)", v, cli_show__str(ret, "allreduce",
			"gradients summed", how, sizeof how));
		cli_show__kv(f, "ranks:", buf);
		cli_show__ranks(f, json_object_get(ret, "per_rank"));
	}
}

/* A change rematd answered "queued" (its worker did not take it in time): 1 after saying
 * so, in place of what the change would print. */
int cli_show__queued(FILE *f, const char *job, const json_t *ret)
{
	char what[64], s[32];
	if (!json_is_true(json_object_get(ret, "queued")))
		return 0;
	fprintf(f, "%s: %s queued, not yet applied: the worker has not taken it within %s s "
		   "(stopped, or too busy to read); it takes effect, or is refused, when the "
		   "worker reads it (see 'rematctl status %s' and rematd's log)\n", job,
		cli_show__str(ret, "execute", "the change", what, sizeof what),
		cli_show_num(ret, "waited_s", "%.3g", s, sizeof s), job);
	if (strcmp(what, "job-stop") == 0)
		fprintf(f, "%s: 'rematctl kill %s' ends its worker now, unsaved\n", job, job);
	return 1;
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

	cli_show__kv(f, "version:", cli_show__str(ret, "version", "-", buf, sizeof buf));
	cli_show__kv(f, "pid:", cli_show_num(ret, "pid", "%.0f", buf, sizeof buf));
	cli_jnum(ret, "uptime_s", &up);
	cli_show__kv(f, "uptime:", uptime_format(up, buf, sizeof buf));
	cli_show__kv(f, "socket:", cli_show__str(ret, "socket", "-", buf, sizeof buf));
	cli_show__kv(f, "state dir:", cli_show__str(ret, "state_dir", "-", buf, sizeof buf));
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
	cli_show__kv(f, "backends:", o ? buf : "-");
	cli_show__kv(f, "blas:", cli_show__str(ret, "blas", "-", buf, sizeof buf));
	cli_show__kv(f, "matmul:", cli_show__str(ret, "matmul", "-", buf, sizeof buf));
	cli_show__kv(f, "max jobs:", cli_show_num(ret, "max_jobs", "%.0f", buf, sizeof buf));
	cli_show__kv(f, "jobs running:", cli_show_num(ret, "jobs_running", "%.0f", buf,
		sizeof buf));
	json_t *pool = cli_jobj(ret, "pool"), *j;
	if (!pool)
		return;
	char a[32], g[32], c[32], src[32];
	snprintf(buf, sizeof buf, "%s (%s), %s given, the jobs' least %s",
		cli_show_size(pool, "bytes", a, sizeof a), cli_show__str(pool, "source", "-", src,
		sizeof src), cli_show_size(pool, "given_bytes", g, sizeof g),
		cli_show_size(pool, "least_bytes", c, sizeof c));
	cli_show__kv(f, "memory pool:", buf);
	json_array_foreach(json_object_get(pool, "jobs"), i, j) {
		char id[32];
		snprintf(buf, sizeof buf, "%s %s", cli_show__str(j, "job", "-", id, sizeof id),
			cli_show_size(j, "share_bytes", a, sizeof a));
		cli_show__kv(f, "", buf);
	}
}

void cli_show_start(FILE *f, const char *job, const json_t *ret)
{
	(void)job;
	char id[64];
	/* the id alone, like `docker run -d`, so that JOB=$(rematctl start x.json) works */
	fprintf(f, "%s\n", cli_show__str(ret, "job", "-", id, sizeof id));
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
	if (cli_show__queued(f, job, ret))
		return;
	/* the step it stops after, as status will show it */
	fprintf(f, "%s: pauses at step %s\n", job,
		cli_show_num(ret, "step", "%.0f", step, sizeof step));
}

void cli_show_resume(FILE *f, const char *job, const json_t *ret)
{
	char st[32], step[32], path[TEXT_LEN];
	const char *ck = cli_jstr(ret, "checkpoint");
	if (cli_show__queued(f, job, ret))
		return;
	if (ck)
		/* an ended job, queued again to go on from its checkpoint */
		fprintf(f, "%s: resumes from %s at step %s (%s)\n", job,
			cli_str_clean(ck, path, sizeof path),
			cli_show_num(ret, "step", "%.0f", step, sizeof step),
			cli_show__str(ret, "state", "-", st, sizeof st));
	else
		fprintf(f, "%s: %s at step %s\n", job,
			cli_show__str(ret, "state", "-", st, sizeof st),
			cli_show_num(ret, "step", "%.0f", step, sizeof step));
}

void cli_show_remove(FILE *f, const char *job, const json_t *ret)
{
	char path[TEXT_LEN];
	fprintf(f, "%s: removed; its checkpoints stay in %s\n", job,
		cli_show__str(ret, "checkpoints", "-", path, sizeof path));
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
	if (cli_show__queued(f, job, ret))
		return;
	if (cli_jstr(ret, "state")) /* rematd's answer for a queued job: it never ran */
		fprintf(f, "%s: cancelled before it started", job);
	else
		fprintf(f, "%s: stopped at step %s", job,
			cli_show_num(ret, "step", "%.0f", step, sizeof step));
	show_stop_kept(f, ret);
	fputc('\n', f);
}

void cli_show_kill(FILE *f, const char *job, const json_t *ret)
{
	if (json_is_true(json_object_get(ret, "killed")))
		fprintf(f, "%s: its worker's processes killed, unsaved: it fails, resumable from "
			   "its last checkpoint\n", job);
	else
		fprintf(f, "%s: cancelled before it started\n", job);
}

void cli_show_remat_set(FILE *f, const char *job, const json_t *ret)
{
	char at[32], pol[TEXT_LEN], p[32], b[32];
	const char *ctl = cli_jstr(ret, "controller"); /* null: no controller was on */
	if (cli_show__queued(f, job, ret))
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
		cli_show__str(ret, "path", "-", path, sizeof path),
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
	if (cli_show__queued(f, job, ret))
		return;
	json_object_foreach(json_object_get(ret, "set"), k, v) {
		char t[TEXT_LEN / 2]; /* as typed: lr=0.0003, schedule=cosine */
		if (used < sizeof kv)
			used += (size_t)snprintf(kv + used, sizeof kv - used, "%s%s=%s",
				used ? " " : "", k, cli_value_format(v, t, sizeof t));
	}
	char clean[TEXT_LEN];
	if (json_object_get(json_object_get(ret, "set"), PROTO_PRIORITY)) { /* rematd's */
		const json_t *m = json_object_get(ret, "memory");
		fprintf(f, "%s: %s%s\n", job, cli_str_clean(kv, clean, sizeof clean),
			json_is_object(m) ? ": its weight in the memory pool from now on"
			: " (kept: rematd has no memory pool, rematd --memory, to weigh it in)");
		return;
	}
	fprintf(f, "%s: from step %s: %s\n", job,
		cli_show_num(ret, "applies_at_step", "%.0f", step, sizeof step),
		cli_str_clean(kv, clean, sizeof clean));
}

void cli_show_reset(FILE *f, const char *job, const json_t *ret)
{
	if (cli_show__queued(f, job, ret))
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
		fprintf(f, "%s: stopped at step %s", cli_show__str(e, "job", "-", id, sizeof id),
			cli_show_num(e, "step", "%.0f", step, sizeof step));
		show_stop_kept(f, e);
		fputc('\n', f);
	}
	fprintf(f, "rematd: every job has stopped; the daemon exits\n");
}
