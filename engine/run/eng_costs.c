/* eng_costs.c - the per-section cost table (see eng_costs.h). No I/O, no allocation. */
#include "eng_costs.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "eng_model.h"

void eng_costs_init(eng_costs *c, int n_layer)
{
	memset(c, 0, sizeof *c);
	c->n_layer = n_layer;
}

void eng_costs_copy(eng_costs *dst, const eng_costs *src)
{
	dst->n_layer = src->n_layer;
	memcpy(dst->block, src->block, (size_t)src->n_layer * sizeof src->block[0]);
	memcpy(dst->head, src->head, sizeof src->head);
	dst->rest = src->rest;
}

const eng_cost_cell *eng_costs_cell(const eng_costs *c, int i, eng_mode m)
{
	if (i < c->n_layer)
		return m == ENG_MODE_OFF || m == ENG_MODE_SELECTIVE || m == ENG_MODE_FULL
			       ? &c->block[i][m] : NULL;
	if (i == c->n_layer)
		return m == ENG_MODE_OFF ? &c->head[0] : m == ENG_MODE_CHUNKED ? &c->head[1] : NULL;
	return NULL;
}

void eng_costs_add(eng_costs *c, const eng_policy *p, const double (*sec_ms)[3],
	const size_t *saved, double step_ms)
{
	double rest = step_ms;
	for (int i = 0; i <= c->n_layer; i++) {
		rest -= sec_ms[i][0] + sec_ms[i][1] + sec_ms[i][2];
		eng_cost_cell *cell = (eng_cost_cell *)eng_costs_cell(c, i,
			i < c->n_layer ? p->block[i] : p->head);
		if (!cell)
			continue;
		for (int part = 0; part < 3; part++)
			cell->ms[part][cell->n % ENG_COSTS_WINDOW] = (float)sec_ms[i][part];
		cell->n++;
		cell->saved = saved[i];
	}
	c->rest.ms[0][c->rest.n++ % ENG_COSTS_WINDOW] = (float)(rest > 0 ? rest : 0);
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

double eng_cost_median(const eng_cost_cell *cell, int part)
{
	int n = cell->n < ENG_COSTS_WINDOW ? cell->n : ENG_COSTS_WINDOW;
	float v[ENG_COSTS_WINDOW];
	if (n == 0)
		return 0.0;
	memcpy(v, cell->ms[part], (size_t)n * sizeof v[0]);
	qsort(v, (size_t)n, sizeof v[0], cmp_float);
	return n % 2 ? v[n / 2] : 0.5 * ((double)v[n / 2 - 1] + v[n / 2]);
}

/* A cell's step time: its three parts' medians. */
static double cell_ms(const eng_cost_cell *cell)
{
	return eng_cost_median(cell, ENG_SEC_FWD) + eng_cost_median(cell, ENG_SEC_RECOMPUTE) +
	       eng_cost_median(cell, ENG_SEC_BWD);
}

double eng_costs_off_step_ms(const eng_costs *c)
{
	double ms = eng_cost_median(&c->rest, 0);
	for (int i = 0; i <= c->n_layer; i++) {
		const eng_cost_cell *off = i < c->n_layer ? &c->block[i][ENG_MODE_OFF] : &c->head[0];
		if (!off->n)
			return 0.0;
		ms += cell_ms(off);
	}
	return c->rest.n ? ms : 0.0;
}

/* Added milliseconds of a cell against off's, or NAN until both have samples. */
static double added_ms(const eng_cost_cell *cell, const eng_cost_cell *off)
{
	if (!cell || !off || !cell->n || !off->n)
		return NAN;
	return cell == off ? 0.0 : cell_ms(cell) - cell_ms(off);
}

void eng_costs_plan(const eng_costs *c, const eng_config *cfg, int B, int T, int chunk_rows,
	double ms_per_flop, eng_plan_costs *out, unsigned char (*measured)[ENG_COSTS_MODES])
{
	int L = c->n_layer;
	double rate = ms_per_flop > 0 ? ms_per_flop : 1.0;
	memset(out, 0, sizeof *out);
	for (int i = 0; i <= L; i++) {
		int nm = i < L ? ENG_COSTS_MODES : 2;
		for (int k = 0; k < nm; k++) {
			eng_mode m = i < L ? (eng_mode)k : k ? ENG_MODE_CHUNKED : ENG_MODE_OFF;
			eng_plan_section s;
			if (i < L)
				eng_plan_block(cfg, B, T, m, &s);
			else
				eng_plan_head(cfg, B, T, chunk_rows, m, &s);
			double ms = added_ms(eng_costs_cell(c, i, m), eng_costs_cell(c, i, ENG_MODE_OFF));
			int have = !isnan(ms);
			/* a measured difference can come out a hair below 0 (noise): no mode is
			 * cheaper than keeping everything */
			double v = have ? (ms > 0 ? ms : 0.0) : s.extra_flops * rate;
			if (i < L)
				out->block[i][k] = v;
			else
				out->head[k] = v;
			if (measured)
				measured[i][k] = (unsigned char)have;
		}
	}
}

double eng_costs_rate(const eng_config *cfg, int B, int T, int chunk_rows, const eng_policy *p,
	double step_ms)
{
	eng_plan now;
	if (step_ms <= 0)
		return 0.0;
	eng_plan_policy(cfg, B, T, chunk_rows, p, &now);
	return step_ms / (now.model_flops + now.extra_flops);
}

/* One mode's entry of a section in the table. */
static json_t *cell_json(const eng_cost_cell *cell, const eng_cost_cell *off,
	const eng_plan_section *s)
{
	double add = added_ms(cell, off);
	json_t *o = json_pack("{s:i,s:f,s:f,s:f,s:I,s:I}", "samples", cell->n, "forward_ms",
		eng_cost_median(cell, ENG_SEC_FWD), "recompute_ms",
		eng_cost_median(cell, ENG_SEC_RECOMPUTE), "backward_ms",
		eng_cost_median(cell, ENG_SEC_BWD), "saved_bytes", (json_int_t)cell->saved,
		"workspace_bytes", (json_int_t)s->workspace_bytes);
	if (!o)
		return NULL;
	json_object_set_new(o, "added_ms", isnan(add) ? json_null() : json_real(add));
	double mib = off && off->n && off->saved > cell->saved
			     ? (double)(off->saved - cell->saved) / 1048576.0 : 0.0;
	json_object_set_new(o, "ms_per_mib_saved",
		!isnan(add) && mib > 0 ? json_real(add / mib) : json_null());
	return o;
}

json_t *eng_costs_json(const eng_costs *c, const eng_config *cfg, int B, int T,
	int chunk_rows)
{
	int L = c->n_layer;
	json_t *a = json_array();
	for (int i = 0; a && i <= L; i++) {
		char name[16];
		eng_section_name(i, L, name, sizeof name);
		json_t *modes = json_object();
		int nm = i < L ? ENG_COSTS_MODES : 2;
		for (int k = 0; modes && k < nm; k++) {
			eng_mode m = i < L ? (eng_mode)k : k ? ENG_MODE_CHUNKED : ENG_MODE_OFF;
			const eng_cost_cell *cell = eng_costs_cell(c, i, m);
			eng_plan_section s;
			if (!cell->n)
				continue;
			if (i < L)
				eng_plan_block(cfg, B, T, m, &s);
			else
				eng_plan_head(cfg, B, T, chunk_rows, m, &s);
			json_object_set_new(modes, eng_mode_name(m),
				cell_json(cell, eng_costs_cell(c, i, ENG_MODE_OFF), &s));
		}
		json_array_append_new(a, json_pack("{s:s,s:s,s:o}", "name", name, "kind",
			i < L ? "block" : "head", "modes", modes));
	}
	return a;
}
