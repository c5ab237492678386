/* srv_auto.c - a job's memory controller in its record (see srv_auto.h). */
#include "srv_auto.h"

#include <stdio.h>
#include <string.h>

#include "proto.h"

static const char *const auto_sources[] = {"size", "cgroup", "device", NULL};

/* 1 when s is one of auto_sources. */
static int auto_source_ok(const char *s)
{
	for (int i = 0; s && auto_sources[i]; i++)
		if (strcmp(s, auto_sources[i]) == 0)
			return 1;
	return 0;
}

/* Off, and known; the step reports count from is kept. */
static void auto_off(srv_auto *a)
{
	int from = a->from_step;
	memset(a, 0, sizeof *a);
	a->known = 1;
	a->from_step = from;
}

/* On at bytes (0: not known yet) from source; pinned and least_bytes as they were when it
 * stays on. */
static void auto_on(srv_auto *a, long long bytes, const char *source)
{
	if (!a->on) {
		a->pinned = 0;
		a->least_bytes = 0;
	}
	a->known = a->on = 1;
	a->budget_bytes = bytes > 0 ? bytes : 0;
	if (source != a->source) /* kept: no copy onto itself */
		snprintf(a->source, sizeof a->source, "%s", source);
}

static int auto_same(const srv_auto *x, const srv_auto *y)
{
	return x->known == y->known && x->on == y->on && x->budget_bytes == y->budget_bytes &&
	       strcmp(x->source, y->source) == 0 && x->pinned == y->pinned &&
	       x->least_bytes == y->least_bytes;
}

/* A byte count above 0 in o[key], else 0. */
static long long auto_bytes(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	return json_is_integer(v) && json_integer_value(v) > 0 ? json_integer_value(v) : 0;
}

/* 1 when a report of step (o["step"]) says what the controller is now. */
static int auto_current(const srv_auto *a, const json_t *o)
{
	const json_t *step = json_object_get(o, "step");
	return json_is_integer(step) && json_integer_value(step) >= a->from_step;
}

void srv_auto_from_spec(srv_auto *a, const json_t *spec)
{
	const json_t *b = json_object_get(json_object_get(spec, "remat"), "budget");
	long long bytes = -1;
	memset(a, 0, sizeof *a);
	a->known = 1;
	if (json_is_string(b) && strcmp(json_string_value(b), "cgroup") == 0) {
		auto_on(a, 0, "cgroup");
		return;
	}
	/* as the spec's check reads it (eng_spec_parse.c): a size, or a number of bytes */
	if (json_is_integer(b))
		bytes = json_integer_value(b);
	else if (json_is_string(b) && proto_size_parse(json_string_value(b), &bytes) < 0)
		bytes = -1;
	if (bytes > 0)
		auto_on(a, bytes, "size");
}

void srv_auto_spawned(srv_auto *a, int first_step)
{
	a->from_step = first_step;
}

/* The "auto" object of the contract (docs/protocol.md, job-status). */
static void auto_take_object(srv_auto *a, const json_t *o)
{
	const char *src = json_string_value(json_object_get(o, "source"));
	if (!auto_source_ok(src))
		src = a->on ? a->source : "size";
	auto_on(a, auto_bytes(o, "budget_bytes"), src);
	a->pinned = json_is_true(json_object_get(o, "pinned"));
	a->least_bytes = auto_bytes(o, "least_bytes");
}

int srv_auto_note_status(srv_auto *a, const json_t *status)
{
	srv_auto was = *a;
	const json_t *o = json_object_get(status, "auto");
	const json_t *b = json_object_get(status, "auto_budget_bytes");
	if (!auto_current(a, status))
		return 0;
	if (json_is_object(o))
		auto_take_object(a, o);
	else if (o || json_is_null(b))
		auto_off(a);
	else if (auto_bytes(status, "auto_budget_bytes")) /* a worker before "auto" */
		auto_on(a, auto_bytes(status, "auto_budget_bytes"), a->on ? a->source : "size");
	return !auto_same(&was, a);
}

int srv_auto_note_event(srv_auto *a, const json_t *data)
{
	srv_auto was = *a;
	const json_t *pol = json_object_get(data, "policy");
	long long bytes = auto_bytes(data, "budget_bytes");
	if (!auto_current(a, data) || !pol)
		return 0;
	if (json_is_null(pol))
		auto_off(a); /* the controller let go */
	else if (bytes)
		auto_on(a, bytes, a->on ? a->source : "size");
	return !auto_same(&was, a);
}

int srv_auto_note_auto(srv_auto *a, const char *asked, const json_t *ret)
{
	srv_auto was = *a;
	long long bytes = auto_bytes(ret, "budget_bytes");
	const json_t *at = json_object_get(ret, "applies_at_step");
	if (json_is_integer(at))
		a->from_step = (int)json_integer_value(at);
	if (!bytes || !auto_source_ok(asked)) {
		auto_off(a);
	} else {
		auto_on(a, bytes, asked);
		a->pinned = 0; /* a new budget: the controller chooses */
		if (auto_bytes(ret, "least_bytes"))
			a->least_bytes = auto_bytes(ret, "least_bytes");
	}
	return !auto_same(&was, a);
}

int srv_auto_note_set(srv_auto *a, const json_t *ret)
{
	srv_auto was = *a;
	const char *ctl = json_string_value(json_object_get(ret, "controller"));
	const json_t *at = json_object_get(ret, "applies_at_step");
	if (!ctl)
		return 0; /* no controller was on, or a worker before "controller" (its
			   * REMAT_AUTO says when one lets go) */
	if (json_is_integer(at))
		a->from_step = (int)json_integer_value(at);
	if (strcmp(ctl, "off") == 0)
		auto_off(a);
	else if (strcmp(ctl, "on") == 0 && a->on)
		a->pinned = 1; /* the policy set is held while it fits */
	return !auto_same(&was, a);
}

static json_t *auto_opt_bytes(long long n)
{
	return n > 0 ? json_integer(n) : json_null();
}

json_t *srv_auto_json(const srv_auto *a)
{
	if (!a->known)
		return NULL;
	if (!a->on)
		return json_null();
	return json_pack("{s:o,s:s,s:b,s:o}", "budget_bytes", auto_opt_bytes(a->budget_bytes),
		"source", a->source, "pinned", a->pinned, "least_bytes",
		auto_opt_bytes(a->least_bytes));
}

void srv_auto_load(srv_auto *a, const json_t *record)
{
	const json_t *o = json_object_get(record, "auto");
	memset(a, 0, sizeof *a);
	if (!o)
		return;
	a->known = 1;
	if (!json_is_object(o))
		return;
	auto_take_object(a, o);
}

void srv_auto_status(const srv_auto *a, json_t *o)
{
	json_t *v = srv_auto_json(a);
	json_object_set_new(o, "auto_budget_bytes", auto_opt_bytes(a->on ? a->budget_bytes : 0));
	json_object_set_new(o, "auto", v ? v : json_null());
}

int srv_auto_spec(const srv_auto *a, json_t *spec)
{
	json_t *remat = json_object_get(spec, "remat");
	if (!a->known)
		return 0;
	if (!json_is_object(remat)) {
		remat = json_object();
		if (!remat || json_object_set_new(spec, "remat", remat) < 0)
			return -1;
	}
	if (!a->on) {
		json_object_del(remat, "budget"); /* turned off during the run: it stays off */
		return 0;
	}
	if (strcmp(a->source, "cgroup") == 0)
		return json_object_set_new(remat, "budget", json_string("cgroup"));
	/* "device" is read again by a running worker only: its spec keeps the bytes */
	if (a->budget_bytes > 0)
		return json_object_set_new(remat, "budget", json_integer(a->budget_bytes));
	return 0;
}

void srv_auto_format(const srv_auto *a, char *buf, size_t len)
{
	if (!a->known)
		snprintf(buf, len, "as its spec says");
	else if (!a->on)
		snprintf(buf, len, "off");
	else if (a->budget_bytes > 0)
		snprintf(buf, len, "%lld bytes (%s)", a->budget_bytes, a->source);
	else
		snprintf(buf, len, "on (%s)", a->source);
}
