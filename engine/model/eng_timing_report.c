/* eng_timing_report.c - the timing's table (eng_timing.h): each class of the steady steps
 * against its own limit, measured in this process after the run. The limits:
 *   - a product: the same product alone (its shape, route and thread count; the median of
 *     PROD_REPS runs after one warm-up), times the calls a step made of it;
 *   - the matmul ceiling: those products' FLOPs over their times, FLOP-weighted as a step
 *     weighs them (bench-sgemm's figure), the limit of recompute and of LoRA's products;
 *   - a memory-bound class: its bytes at the bandwidth of a triad (a = b + s c, two
 *     threads' OpenMP) over the working set nearest above its bytes per call: a class
 *     that works in cache is held to the cache's speed;
 *   - attention: the slower of its FLOPs at the ceiling and its bytes at that bandwidth.
 * Data and the all-reduce have none here. */
#include "eng_timing.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eng_mem.h"
#include "eng_model.h"
#include "eng_util.h"
#include "kn.h"

#define PROD_REPS 5
#define BW_SIZES 4      /* working sets of the triad: 4, 16, 64, 256 MiB */
#define BW_MIN_S 0.05   /* each timed for at least this long */
#define BW_MIN_PASSES 5 /* and this many passes (one stalled pass is not the figure) */

/* Seconds on the monotonic clock */
static double now_s(void)
{
	return eng_now_ms() * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Elements of an operand of `rows` rows at stride ld */
static size_t span(int rows, int ld)
{
	return (size_t)rows * (size_t)ld;
}

/* n operand values (bf16 or float32) of a fixed pattern in [-0.5, 0.5) */
static void fill(void *x, size_t n, int bf16)
{
	for (size_t i = 0; i < n; i++) {
		float v = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
		uint32_t u;
		memcpy(&u, &v, 4);
		if (bf16)
			((uint16_t *)x)[i] = (uint16_t)(u >> 16);
		else
			((float *)x)[i] = v;
	}
}

/* Product pr once by its route (B packed into pk when it is) */
static int run_once(const eng_product *pr, const void *A, const void *B, const void *pk,
	float *C, void *sc, size_t scb)
{
	const kn_mm *q = &pr->mm;
	if (pr->route == ENG_ROUTE_OPENBLAS) {
		kn_sgemm(q->ta, q->tb, q->M, q->N, q->K, 1.0f, A, q->lda, B, q->ldb,
			(float)q->beta, C, q->ldc);
		return 0;
	}
	return kn_dnnl_gemm(q, A, pr->route == ENG_ROUTE_PACKED ? pk : B, C, sc, scb);
}

int eng_timing_alone(const struct eng_product *pr, double *s, eng_err *err)
{
	const kn_mm *q = &pr->mm;
	size_t es = q->bf16 ? 2 : 4, sc = 0, pkb = 0, na, nb, nc = span(q->M, q->ldc);
	na = span(q->ta ? q->K : q->M, q->lda);
	nb = span(q->tb ? q->N : q->K, q->ldb);
	double t[PROD_REPS];
	int rc = -1;
	if (pr->route != ENG_ROUTE_OPENBLAS && kn_dnnl_sizes(q, &sc, &pkb) < 0)
		return eng_errf(err, "oneDNN matmul %s: %s", pr->name, kn_bf16_error());
	void *A = malloc(na * es), *B = malloc(nb * es), *scr = sc ? malloc(sc) : NULL;
	void *pk = pr->route == ENG_ROUTE_PACKED ? malloc(pkb) : NULL;
	float *C = calloc(nc, sizeof(float));
	if (!A || !B || !C || (sc && !scr) || (pr->route == ENG_ROUTE_PACKED && !pk)) {
		eng_err_nomem(err, "out of memory timing %s alone", pr->name);
		goto out;
	}
	fill(A, na, q->bf16);
	fill(B, nb, q->bf16);
	if (pk && kn_dnnl_pack(q, B, pk, pkb) < 0)
		goto dnnl;
	for (int r = -1; r < PROD_REPS; r++) {
		double t0 = now_s();
		if (run_once(pr, A, B, pk, C, scr, sc) < 0)
			goto dnnl;
		if (r >= 0)
			t[r] = now_s() - t0;
	}
	qsort(t, PROD_REPS, sizeof t[0], cmp_double);
	*s = t[PROD_REPS / 2];
	rc = 0;
	goto out;
dnnl:
	eng_errf(err, "oneDNN matmul %s: %s", pr->name, kn_bf16_error());
out:
	free(A);
	free(B);
	free(C);
	free(scr);
	free(pk);
	return rc;
}

/* GB/s of a triad over `bytes` of three arrays, the best of at least BW_MIN_PASSES passes
 * and BW_MIN_S seconds; -1 out of memory */
static double triad_gbs(size_t bytes)
{
	size_t n = bytes / 12;
	float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
	double best = 1e30, spent = 0;
	if (!a || !b || !c) {
		best = -1;
		goto out;
	}
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++)
		a[i] = 0, b[i] = (float)(i & 1023), c[i] = 1.0f; /* touched by their threads */
	for (int pass = 0; pass < BW_MIN_PASSES || spent < BW_MIN_S; pass++) {
		double t0 = now_s();
#pragma omp parallel for schedule(static)
		for (size_t i = 0; i < n; i++)
			a[i] = b[i] + 0.5f * c[i];
		double dt = now_s() - t0;
		spent += dt;
		best = dt < best ? dt : best;
	}
	best = (double)n * 12 / best / 1e9;
out:
	free(a);
	free(b);
	free(c);
	return best;
}

/* What the table is measured against */
typedef struct limits {
	double alone[ENG_TIMING_PRODUCTS]; /* seconds of product i alone */
	double ceiling;                  /* FLOP/s */
	double bw_bytes[BW_SIZES], bw[BW_SIZES]; /* working set, bytes/s */
} limits;

static int measure(const eng_model *m, limits *lim, eng_err *err)
{
	double f = 0, s = 0;
	for (int i = 0; i < m->nprod; i++) {
		const kn_mm *q = &m->prod[i].mm;
		if (eng_timing_alone(&m->prod[i], &lim->alone[i], err) < 0)
			return -1;
		f += 2.0 * q->M * q->N * q->K * m->prod[i].count;
		s += lim->alone[i] * m->prod[i].count;
	}
	lim->ceiling = s > 0 ? f / s : 0;
	for (int k = 0; k < BW_SIZES; k++) {
		lim->bw_bytes[k] = (double)(4u << (2 * k)) * 1048576.0;
		double g = triad_gbs((size_t)lim->bw_bytes[k]);
		if (g < 0)
			return eng_err_nomem(err, "out of memory measuring the bandwidth");
		lim->bw[k] = g * 1e9;
	}
	return 0;
}

/* The bandwidth at the working set nearest above w bytes */
static double bw_at(const limits *lim, double w)
{
	for (int k = 0; k < BW_SIZES; k++)
		if (w <= lim->bw_bytes[k])
			return lim->bw[k];
	return lim->bw[BW_SIZES - 1];
}

/* One class's row: its limit in seconds per step (0: none) and what sets it */
static double limit_of(const eng_model *m, const limits *lim, int c, const eng_timing_row *r,
	const char **by)
{
	double per_call = r->calls > 0 ? r->bytes / r->calls : r->bytes;
	double mem = r->bytes > 0 ? r->bytes / bw_at(lim, per_call) : 0;
	double fl = lim->ceiling > 0 ? r->flops / lim->ceiling : 0;
	*by = "";
	if (c < m->nprod) {
		*by = "alone";
		return lim->alone[c] * r->calls;
	}
	switch (c) {
	case ENG_TIMING_DATA:
	case ENG_TIMING_ALLREDUCE: return 0;
	case ENG_TIMING_RECOMPUTE:
	case ENG_TIMING_LORA: *by = "ceiling"; return fl;
	case ENG_TIMING_ATTN_FWD:
	case ENG_TIMING_ATTN_BWD: *by = fl > mem ? "ceiling" : "bandwidth"; return fl > mem ? fl
											  : mem;
	default: *by = "bandwidth"; return mem;
	}
}

/* A class's figures per steady step */
typedef struct row_fig {
	double ms, calls, gflops, gbs, limit_ms;
	const char *by;
} row_fig;

static row_fig figures(const eng_timing *p, const eng_model *m, const limits *lim, int c)
{
	eng_timing_row r = p->sum[c];
	double n = p->steps;
	r.s /= n, r.flops /= n, r.bytes /= n, r.calls /= n;
	row_fig f = {r.s * 1e3, r.calls, r.s > 0 ? r.flops / r.s / 1e9 : 0,
		r.s > 0 ? r.bytes / r.s / 1e9 : 0, 0, ""};
	f.limit_ms = limit_of(m, lim, c, &r, &f.by) * 1e3;
	return f;
}

static const char *row_name(const eng_model *m, int c)
{
	return c < m->nprod ? m->prod[c].name : eng_timing_class_name(c);
}

static void text_head(const eng_timing *p, const eng_model *m, const limits *lim, FILE *o)
{
	fprintf(o, "where the time goes: %d steady steps of policy %s, batch %d x %d, %d threads, "
		   "%s; a step %.1f ms (the run's first %.1f ms)\n", p->steps,
		p->policy[0] ? p->policy : "(mixed)", m->B, m->T, kn_get_threads(),
		m->cfg.mm_bf16 ? "bf16" : "fp32", p->step_ms / p->steps, p->first_ms);
	fprintf(o, "limits measured now: matmul ceiling %.1f GFLOP/s (the step's products alone, "
		   "FLOP-weighted); triad bandwidth", lim->ceiling / 1e9);
	for (int k = 0; k < BW_SIZES; k++)
		fprintf(o, "%s %.1f GB/s at %.0f MiB", k ? "," : "", lim->bw[k] / 1e9,
			lim->bw_bytes[k] / 1048576.0);
	fprintf(o, "\n%-24s %6s %9s %6s %8s %7s %9s %8s %8s  %s\n", "class", "calls", "ms/step",
		"share", "GFLOP/s", "GB/s", "limit ms", "of limit", "over ms", "limit by");
}

static json_t *json_row(const char *name, const row_fig *f)
{
	return json_pack("{s:s,s:f,s:f,s:f,s:f,s:f,s:s}", "name", name, "calls", f->calls, "ms",
		f->ms, "gflops", f->gflops, "gbs", f->gbs, "limit_ms", f->limit_ms, "limit_by",
		f->by);
}

static void text_row(FILE *o, const char *name, const row_fig *f, double step)
{
	double of = f->ms > 0 && f->limit_ms > 0 ? 100 * f->limit_ms / f->ms : 0;
	fprintf(o, "%-24.24s %6.0f %9.2f %5.1f%% %8.1f %7.1f %9.2f %7.0f%% %8.2f  %s\n", name,
		f->calls, f->ms, 100 * f->ms / step, f->gflops, f->gbs, f->limit_ms, of,
		f->limit_ms > 0 ? f->ms - f->limit_ms : 0, f->by[0] ? f->by : "-");
}

/* The step's totals: what no class holds, the step against every class at its limit, its
 * model FLOPs against the ceiling, page faults and the first step */
typedef struct totals {
	double step, rest, lim_sum, gflops, faults;
} totals;

static void text_tail(FILE *o, const eng_timing *p, const limits *lim, const totals *t,
	double model_flops)
{
	fprintf(o, "%-24s %6s %9.2f %5.1f%%\n", "unaccounted", "", t->rest,
		100 * t->rest / t->step);
	fprintf(o, "%-24s %6s %9.2f %5.1f%% %8.1f %7s %9.2f %7.0f%% %8.2f  %s\n", "step", "",
		t->step, 100.0, t->gflops, "", t->lim_sum, 100 * t->lim_sum / t->step,
		t->step - t->lim_sum, "every class at its limit");
	fprintf(o, "model FLOPs %.4g a step: %.1f GFLOP/s, %.0f%% of the matmul ceiling; %.0f "
		   "minor page faults a step; the run's first step %.1f ms more (allocation, "
		   "first touch, warm-up)\n", model_flops, t->gflops,
		100 * t->gflops * 1e9 / lim->ceiling, t->faults, p->first_ms - t->step);
}

static void json_out(FILE *o, const eng_timing *p, const eng_model *m, const limits *lim,
	const totals *t, double model_flops, json_t *rows)
{
	json_t *bw = json_array();
	for (int k = 0; k < BW_SIZES; k++)
		json_array_append_new(bw, json_pack("{s:f,s:f}", "bytes", lim->bw_bytes[k], "gbs",
			lim->bw[k] / 1e9));
	json_t *v = json_pack("{s:{s:i,s:s,s:i,s:i,s:i,s:s,s:f,s:f,s:f,s:o,s:f,s:f,s:f,s:f,s:o}}",
		"timing", "steps", p->steps, "policy", p->policy, "batch", m->B, "seq_len", m->T,
		"threads", kn_get_threads(), "precision", m->cfg.mm_bf16 ? "bf16" : "fp32",
		"step_ms", t->step, "first_ms", p->first_ms, "ceiling_gflops", lim->ceiling / 1e9,
		"bandwidth", bw, "model_flops", model_flops, "unaccounted_ms", t->rest,
		"limit_ms", t->lim_sum, "faults_per_step", t->faults, "classes", rows);
	if (v) {
		json_dumpf(v, o, JSON_COMPACT | JSON_PRESERVE_ORDER);
		fputc('\n', o);
	}
	json_decref(v);
}

int eng_timing_report(const eng_timing *p, eng_model *m, FILE *text, FILE *json,
	eng_err *err)
{
	eng_plan plan; /* the model's FLOPs a step (eng_plan's count; any policy's) */
	limits lim;
	memset(&lim, 0, sizeof lim);
	if (p->steps < 1)
		return eng_errf(err, "no steady step to time: run at least two steps of one "
				     "policy");
	eng_plan_policy(&m->cfg, m->B, m->T, m->chunk_rows, &m->lay.policy, &plan);
	double model_flops = plan.model_flops;
	if (measure(m, &lim, err) < 0)
		return -1;
	totals t = {p->step_ms / p->steps, 0, 0, 0, (double)p->faults / p->steps};
	double classes = 0;
	json_t *rows = json_array();
	if (text)
		text_head(p, m, &lim, text);
	for (int c = 0; c < ENG_TIMING_N; c++) {
		if (p->sum[c].calls == 0 && p->sum[c].s == 0)
			continue;
		row_fig f = figures(p, m, &lim, c);
		classes += f.ms;
		t.lim_sum += f.limit_ms;
		json_array_append_new(rows, json_row(row_name(m, c), &f));
		if (text)
			text_row(text, row_name(m, c), &f, t.step);
	}
	t.rest = t.step - classes;
	t.gflops = model_flops / (t.step / 1e3) / 1e9;
	if (text)
		text_tail(text, p, &lim, &t, model_flops);
	if (json)
		json_out(json, p, m, &lim, &t, model_flops, rows);
	else
		json_decref(rows);
	return 0;
}
