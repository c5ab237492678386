/* eng_memtrace.c - one step's memory timeline and its two exports (see eng_memtrace.h). */
#include "eng_memtrace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_acts.h"
#include "eng_util.h"

int eng_memtrace_init(eng_memtrace *t, int cap)
{
	memset(t, 0, sizeof *t);
	t->ev = calloc((size_t)cap, sizeof *t->ev);
	if (!t->ev)
		return -1;
	t->cap = cap;
	return 0;
}

void eng_memtrace_free(eng_memtrace *t)
{
	free(t->ev);
	memset(t, 0, sizeof *t);
}

void eng_memtrace_begin(eng_memtrace *t, int step, int n_layer)
{
	t->n = t->dropped = 0;
	t->step = step;
	t->n_layer = n_layer;
	t->t0_ms = eng_now_ms();
}

void eng_memtrace_add(eng_memtrace *t, eng_mt_kind kind, const void *p, size_t size,
	eng_mem_cat cat, int section, int field)
{
	if (!t->ev)
		return;
	if (t->n == t->cap) {
		t->dropped++;
		return;
	}
	eng_mt_ev *e = &t->ev[t->n++];
	e->t_us = (eng_now_ms() - t->t0_ms) * 1e3;
	e->addr = (uintptr_t)p;
	e->size = size;
	e->kind = (unsigned char)kind;
	e->cat = (unsigned char)cat;
	e->section = (short)section;
	e->field = (short)field;
}

void eng_memtrace_swap(eng_memtrace *a, eng_memtrace *b)
{
	eng_memtrace t = *a;
	*a = *b;
	*b = t;
}

void eng_memtrace_on_alloc(void *ctx, int alloc, const void *p, size_t bytes, eng_mem_cat cat)
{
	eng_memtrace_add(ctx, alloc ? ENG_MT_MAP : ENG_MT_UNMAP, p, bytes, cat, -1, -1);
}

static const char *const pass_names[3] = {"forward", "recompute", "backward"};

/* "h.3", "head", or "" for an event of no section. */
static void section_name(const eng_memtrace *t, const eng_mt_ev *e, char *buf, size_t len)
{
	if (e->section < 0)
		snprintf(buf, len, "%s", "");
	else if (e->section >= t->n_layer)
		snprintf(buf, len, "head");
	else
		snprintf(buf, len, "h.%d", e->section);
}

/* What the viewer shows for a buffer: "h.3 qkv (saved)", "head logits (recompute)",
 * "params", "mapped: activations". */
static void buffer_name(const eng_memtrace *t, const eng_mt_ev *e, char *buf, size_t len)
{
	char sec[16];
	section_name(t, e, sec, sizeof sec);
	const char *cat = eng_mem_cat_name((eng_mem_cat)e->cat);
	if (e->kind == ENG_MT_MAP || e->kind == ENG_MT_UNMAP)
		snprintf(buf, len, "mapped: %s", cat);
	else if (e->section < 0 || e->field < 0)
		snprintf(buf, len, "%s", cat);
	else if (e->section >= t->n_layer)
		snprintf(buf, len, "head %s (%s)", e->field < ENG_HEAD_N ?
			eng_head_fields[e->field].name : "?", cat);
	else
		snprintf(buf, len, "%s %s (%s)", sec, e->field < ENG_ACT_N ?
			eng_block_fields[e->field].name : "?", cat);
}

/* Whether event i+1 continues event i's run: what one section made live or dead at once,
 * in one category (the same run, in the same order, ends it: the first address of each
 * stands for the run). */
static int same_run(const eng_memtrace *t, int i)
{
	const eng_mt_ev *a = &t->ev[i], *b = &t->ev[i + 1];
	return i + 1 < t->n && a->section >= 0 && (a->kind == ENG_MT_LIVE ||
		a->kind == ENG_MT_DEAD) && b->kind == a->kind && b->section == a->section &&
	       b->cat == a->cat;
}

json_t *eng_memtrace_pytorch(const eng_memtrace *t, int by_section)
{
	static const char *const actions[] = {[ENG_MT_LIVE] = "alloc",
		[ENG_MT_DEAD] = "free_completed"};
	json_t *trace = json_array(), *root = NULL;
	char name[96];
	if (!trace)
		return NULL;
	for (int i = 0; i < t->n; i++) {
		const eng_mt_ev *e = &t->ev[i];
		if (e->kind != ENG_MT_LIVE && e->kind != ENG_MT_DEAD)
			continue; /* passes and mappings are the Chrome trace's: the viewer maps
				   * segments only of its snapshot's "segments" */
		size_t size = e->size;
		int first = i, count = 1;
		while (by_section && same_run(t, i)) {
			size += t->ev[++i].size;
			count++;
		}
		buffer_name(t, &t->ev[first], name, sizeof name);
		if (count > 1) {
			char sec[16];
			section_name(t, e, sec, sizeof sec);
			snprintf(name, sizeof name, "%s: %d buffers (%s)", sec, count,
				eng_mem_cat_name((eng_mem_cat)e->cat));
		}
		json_t *o = json_pack("{s:s,s:I,s:I,s:i,s:I,s:[{s:s,s:s,s:i}]}", "action",
			actions[e->kind], "addr", (json_int_t)e->addr, "size", (json_int_t)size,
			"stream", 0, "time_us", (json_int_t)e->t_us, "frames", "name", name, "filename",
			"remat", "line", 0);
		if (!o || json_array_append_new(trace, o) < 0)
			goto fail;
	}
	root = json_pack("{s:[],s:[o]}", "segments", "device_traces", trace);
	return root;
fail:
	json_decref(trace);
	return NULL;
}

/* A counter event of the live bytes by category at time ts. */
static json_t *counter(double ts, const size_t live[ENG_MEM_NCAT])
{
	json_t *args = json_object();
	for (int c = 0; args && c < ENG_MEM_NCAT; c++)
		json_object_set_new(args, eng_mem_cat_name((eng_mem_cat)c),
			json_integer((json_int_t)live[c]));
	return json_pack("{s:s,s:s,s:f,s:i,s:i,s:o}", "name", "live bytes", "ph", "C", "ts", ts,
		"pid", 1, "tid", 0, "args", args);
}

json_t *eng_memtrace_chrome(const eng_memtrace *t, int by_section)
{
	json_t *evs = json_array();
	size_t live[ENG_MEM_NCAT] = {0};
	double begun[ENG_MAX_LAYERS + 1][3] = {{0}};
	char sec[16], name[48];
	if (!evs)
		return NULL;
	for (int i = 0; i < t->n; i++) {
		const eng_mt_ev *e = &t->ev[i];
		json_t *o = NULL;
		int s = e->section >= 0 && e->section <= t->n_layer ? e->section : -1;
		int pass = e->field >= 0 && e->field < 3 ? e->field : -1;
		if (e->kind == ENG_MT_LIVE || e->kind == ENG_MT_DEAD) {
			if (e->kind == ENG_MT_LIVE)
				live[e->cat] += e->size;
			else
				live[e->cat] -= e->size < live[e->cat] ? e->size : live[e->cat];
			if (by_section && same_run(t, i))
				continue; /* one sample at the run's end */
			o = counter(e->t_us, live);
		} else if (e->kind == ENG_MT_BEGIN && s >= 0 && pass >= 0) {
			begun[s][pass] = e->t_us;
			continue;
		} else if (e->kind == ENG_MT_END && s >= 0 && pass >= 0) {
			section_name(t, e, sec, sizeof sec);
			snprintf(name, sizeof name, "%s %s", sec, pass_names[pass]);
			o = json_pack("{s:s,s:s,s:s,s:f,s:f,s:i,s:i}", "name", name, "cat",
				pass_names[pass], "ph", "X", "ts", begun[s][pass], "dur",
				e->t_us - begun[s][pass], "pid", 1, "tid", 1);
		} else if (e->kind == ENG_MT_MAP || e->kind == ENG_MT_UNMAP) {
			snprintf(name, sizeof name, "%s %s %.2f MiB", e->kind == ENG_MT_MAP ?
				"mapped" : "unmapped", eng_mem_cat_name((eng_mem_cat)e->cat),
				e->size / 1048576.0);
			o = json_pack("{s:s,s:s,s:s,s:f,s:i,s:i,s:s}", "name", name, "cat", "allocator",
				"ph", "i", "ts", e->t_us, "pid", 1, "tid", 1, "s", "t");
		} else {
			continue;
		}
		if (!o || json_array_append_new(evs, o) < 0) {
			json_decref(evs);
			return NULL;
		}
	}
	return json_pack("{s:o,s:s}", "traceEvents", evs, "displayTimeUnit", "ms");
}
