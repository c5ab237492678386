/* wk_ctl_mem.c - the control thread's memory commands (docs/protocol.md): mem-stats (the
 * allocators' counters and peaks, every rank's with data parallel), mem-reset-peak and
 * remat-memlog (the last steps' peaks, the last step's timeline); and the sections'
 * measured bytes, which job-status and remat-get show too. Runs on the control thread with
 * the controller's mutex held, on the snapshot the training thread publishes. Not here:
 * the other commands and the table (wk_ctl_cmd.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_backend.h"
#include "eng_mem.h"
#include "eng_plan_json.h"
#include "wk_ctl_int.h"

#define HANDLER(fn) WK_CTL_HANDLER(fn)
#define UNUSED_ARGS (void)c, (void)k, (void)handle, (void)cmd, (void)args, (void)id

void wk_ctl__plan_for(struct wk_ctl *c, const eng_policy *p, eng_plan *plan)
{
	const eng_model *m = &c->tr->model;
	eng_plan_policy(&m->cfg, m->B, m->T, m->chunk_rows, p, plan);
}

/* The measured sections (mode, saved and workspace bytes), without the planner's FLOPs. */
json_t *wk_ctl__measured_sections(struct wk_ctl *c)
{
	eng_plan plan;
	wk_ctl__plan_for(c, &c->remat.policy, &plan);
	json_t *secs = eng_plan_sections_json(&c->remat.policy, &plan, c->mem.saved), *s;
	size_t i;
	json_array_foreach(secs, i, s) json_object_del(s, "extra_flops");
	return secs;
}

/* mem-stats' "device" (docs/protocol.md): the GPU's categories, the allocator's reserved
 * bytes, free/total from cudaMemGetInfo, pinned host memory of offloaded activations. */
static json_t *device_json(const eng_device_mem *ds)
{
	json_t *cats = json_object();
	for (int i = 0; i < ENG_MEM_NCAT; i++)
		json_object_set_new(cats, eng_mem_cat_name(i), json_pack("{s:I,s:I,s:I}", "current",
			(json_int_t)ds->current[i], "peak", (json_int_t)ds->peak[i], "peak_since_reset",
			(json_int_t)ds->peak_reset[i]));
	return json_pack("{s:o,s:{s:I,s:I,s:I},s:I,s:I,s:i,s:I,s:I,s:I,s:I}", "categories", cats,
		"total", "current", (json_int_t)ds->total_current, "peak",
		(json_int_t)ds->total_peak, "peak_since_reset", (json_int_t)ds->total_peak_reset,
		"reserved", (json_int_t)ds->reserved, "reserved_peak", (json_int_t)ds->reserved_peak,
		"arenas", ds->arenas, "free", (json_int_t)ds->device_free, "total_memory",
		(json_int_t)ds->device_total, "pinned_host", (json_int_t)ds->pinned,
		"pinned_host_peak", (json_int_t)ds->pinned_peak);
}

/* {"categories": {cat: {current, peak[, peak_since_reset]}}, "total": {...}, "rss",
 * "rss_peak"} of one rank's counters */
static json_t *mem_json(const eng_mem_stats *ms, int reset)
{
	json_t *cats = json_object();
	for (int i = 0; i < ENG_MEM_NCAT; i++) {
		json_t *o = json_pack("{s:I,s:I}", "current", (json_int_t)ms->current[i], "peak",
			(json_int_t)ms->peak[i]);
		if (reset)
			json_object_set_new(o, "peak_since_reset", json_integer((json_int_t)ms->peak_reset[i]));
		json_object_set_new(cats, eng_mem_cat_name(i), o);
	}
	/* the process's beyond the tracked categories (rss less the tracked total now; its
	 * peak: the most a step held beyond its tracked peak) */
	json_t *u = json_pack("{s:I,s:I}", "current", (json_int_t)ms->untracked, "peak",
		(json_int_t)ms->untracked_peak);
	if (reset)
		json_object_set_new(u, "peak_since_reset",
			json_integer((json_int_t)ms->untracked_peak_reset));
	json_object_set_new(cats, "untracked", u);
	json_t *tot = json_pack("{s:I,s:I}", "current", (json_int_t)ms->total_current, "peak",
		(json_int_t)ms->total_peak);
	if (reset)
		json_object_set_new(tot, "peak_since_reset", json_integer((json_int_t)ms->total_peak_reset));
	return json_pack("{s:o,s:o,s:I,s:I}", "categories", cats, "total", tot, "rss",
		(json_int_t)ms->rss, "rss_peak", (json_int_t)ms->rss_peak);
}

#define RAISE(a, b) ((a) = (b) > (a) ? (b) : (a))

/* Data parallel: each field the most over ranks (rank 0's own counters live, the others'
 * as of the last step): the rank that runs out is the largest. On the GPU the device's
 * too (free and total stay rank 0's). */
static void mem_max(eng_mem_stats *ms, eng_device_mem *ds, const wk_ctl_rank *rows,
	int n)
{
	for (int r = 0; r < n; r++) {
		const eng_mem_stats *o = &rows[r].mem;
		const eng_device_mem *d = &rows[r].dev;
		if (rows[r].rank == 0)
			continue;
		for (int i = 0; i < ENG_MEM_NCAT; i++) {
			RAISE(ms->current[i], o->current[i]);
			RAISE(ms->peak[i], o->peak[i]);
			RAISE(ds->current[i], d->current[i]);
			RAISE(ds->peak[i], d->peak[i]);
		}
		RAISE(ms->total_current, o->total_current);
		RAISE(ms->total_peak, o->total_peak);
		RAISE(ms->rss, o->rss);
		RAISE(ms->rss_peak, o->rss_peak);
		RAISE(ms->untracked, o->untracked);
		RAISE(ms->untracked_peak, o->untracked_peak);
		RAISE(ds->total_current, d->total_current);
		RAISE(ds->total_peak, d->total_peak);
		RAISE(ds->reserved, d->reserved);
		RAISE(ds->reserved_peak, d->reserved_peak);
		RAISE(ds->pinned, d->pinned);
		RAISE(ds->pinned_peak, d->pinned_peak);
	}
}

HANDLER(wk_ctl__cmd_mem)
{
	UNUSED_ARGS;
	eng_mem_stats ms;
	eng_device_mem ds;
	eng_mem_get_stats(&ms);
	eng_backend_device_mem(&ds); /* atomics only: no CUDA call on this thread */
	json_t *ranks = NULL;
	if (c->run.nranks > 1) {
		ranks = json_array();
		for (int r = 0; r < c->run.nranks; r++) {
			json_t *o = mem_json(&c->run.ranks[r].mem, 0);
			json_object_set_new(o, "rank", json_integer(c->run.ranks[r].rank));
			json_object_set_new(o, "step", json_integer(c->run.ranks[r].step));
			json_object_set_new(o, "step_ms", json_real(c->run.ranks[r].step_ms));
			json_object_set_new(o, "allreduce_ms",
				json_real(c->run.ranks[r].allreduce_ms));
			json_object_set_new(o, "allreduce_hidden_ms",
				json_real(c->run.ranks[r].allreduce_hidden_ms));
			if (c->run.ranks[r].dev.active)
				json_object_set_new(o, "device", device_json(&c->run.ranks[r].dev));
			json_array_append_new(ranks, o);
		}
		mem_max(&ms, &ds, c->run.ranks, c->run.nranks);
	}
	json_t *r = mem_json(&ms, 1);
	json_object_set_new(r, "sections", wk_ctl__measured_sections(c));
	json_object_set_new(r, "step", json_integer(c->run.step));
	if (ranks)
		json_object_set_new(r, "ranks", ranks);
	if (r && ds.active)
		json_object_set_new(r, "device", device_json(&ds));
	return r;
}

/* mem-reset-peak: the peaks of both allocators start again from now */
HANDLER(wk_ctl__cmd_mem_reset_peak)
{
	UNUSED_ARGS;
	eng_mem_reset_peak();
	eng_backend_device_mem_reset_peak();
	return json_object();
}

/* remat-memlog's row r: the step, its peaks all together and by category, and what each
 * section held. */
static json_t *memlog_row(const struct wk_ctl *c, int row)
{
	const ctl_memrow *r = &c->mem.memlog[row];
	int L = c->tr->model.cfg.n_layer;
	json_t *cats = json_object(), *secs = json_object();
	char name[16];
	for (int i = 0; i < ENG_MEM_NCAT; i++)
		json_object_set_new(cats, eng_mem_cat_name((eng_mem_cat)i),
			json_integer((json_int_t)r->cat[i]));
	for (int i = 0; i <= L; i++) {
		if (i < L)
			snprintf(name, sizeof name, "h.%d", i);
		else
			snprintf(name, sizeof name, "head");
		json_object_set_new(secs, name,
			json_integer((json_int_t)c->mem.memlog_sec[(size_t)row * (L + 1) + i]));
	}
	return json_pack("{s:i,s:I,s:o,s:o,s:i}", "step", r->step, "peak_bytes",
		(json_int_t)r->peak, "categories", cats, "sections", secs, "oom_retries",
		r->oom_retries);
}

/* remat-memlog: the last steps' peaks by category and by section, oldest first; with
 * "trace", the last step's memory timeline as PyTorch's snapshot or a Chrome trace */
HANDLER(wk_ctl__cmd_memlog)
{
	UNUSED_ARGS;
	json_t *n = json_object_get(args, "steps");
	const char *fmt = json_string_value(json_object_get(args, "trace"));
	int want = n ? (int)json_integer_value(n) : PROTO_MEMLOG_DEFAULT;
	if (!c->mem.memlog) {
		wk_ctl__send_error(k, PROTO_ERR_INTERNAL, "the worker had no memory for its "
				    "memory log", id);
		return NULL;
	}
	int have = c->mem.memlog_n < PROTO_MEMLOG_STEPS ? c->mem.memlog_n : PROTO_MEMLOG_STEPS;
	if (want > have)
		want = have;
	json_t *rows = json_array(), *r = NULL;
	for (int i = c->mem.memlog_n - want; rows && i < c->mem.memlog_n; i++)
		json_array_append_new(rows, memlog_row(c, i % PROTO_MEMLOG_STEPS));
	r = json_pack("{s:i,s:o}", "step", c->run.step, "steps", rows);
	/* the reply is one line: rows and timeline within the protocol's limit */
	size_t room = PROTO_MAX_LINE - 4096, used = r ? json_dumpb(r, NULL, 0, JSON_COMPACT) : 0;
	if (!r || used > room) {
		json_decref(r);
		wk_ctl__send_error(k, r ? PROTO_ERR_INVALID_PARAMETER : PROTO_ERR_INTERNAL, r ?
			"that many steps of this model are over the protocol's 1 MiB line: ask "
			"for fewer" : "out of memory", id);
		return NULL;
	}
	if (!fmt)
		return r;
	if (c->mem.trace.step == 0 || !c->tr->be->ops->tracked_host) {
		/* no step yet, or a backend whose memory is not the traced host allocator's */
		json_object_set_new(r, "trace", json_null());
		return r;
	}
	json_t *data = NULL;
	int merged, is_py = !strcmp(fmt, "pytorch");
	size_t size = 0;
	for (merged = 0; merged < 2; merged++) { /* each buffer, or else by section */
		json_decref(data);
		data = is_py ? eng_memtrace_pytorch(&c->mem.trace, merged)
			     : eng_memtrace_chrome(&c->mem.trace, merged);
		size = data ? json_dumpb(data, NULL, 0, JSON_COMPACT) : 0;
		if (!data || used + size <= room)
			break;
	}
	if (!data || merged == 2) {
		char desc[PROTO_DESC_LEN];
		int too_big = data != NULL;
		if (too_big)
			snprintf(desc, sizeof desc, "step %d's memory timeline is %.1f MiB as JSON "
				 "even merged by section, over the protocol's 1 MiB line: ask for fewer "
				 "steps", c->mem.trace.step, size / 1048576.0);
		else
			snprintf(desc, sizeof desc, "out of memory for step %d's memory timeline",
				c->mem.trace.step);
		json_decref(data);
		json_decref(r);
		wk_ctl__send_error(k, too_big ? PROTO_ERR_INVALID_STATE : PROTO_ERR_INTERNAL, desc,
			id);
		return NULL;
	}
	json_t *evs = is_py ? json_array_get(json_object_get(data, "device_traces"), 0)
			    : json_object_get(data, "traceEvents");
	json_object_set_new(r, "trace", json_pack("{s:i,s:s,s:b,s:I,s:i,s:o}", "step",
		c->mem.trace.step, "format", fmt, "merged", merged, "events",
		(json_int_t)json_array_size(evs), "dropped", c->mem.trace.dropped, "data", data));
	return r;
}
