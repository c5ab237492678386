/* eng_plan_json.c - remat-plan's answer, the sections table and a policy as JSON (see
 * eng_plan_json.h). No I/O. */
#include "eng_plan_json.h"

#include <stdio.h>
#include <string.h>

int eng_plan_policy_args(const eng_aliases *al, eng_device device, const json_t *args,
	eng_policy *p, char *desc, size_t desclen)
{
	eng_err err;
	const char *sel;
	json_t *mode, *def = json_object_get(args, "default");
	if (def && eng_policy_apply(p, al, "all", json_string_value(def), &err) < 0)
		goto fail;
	json_object_foreach((json_t *)json_object_get(args, "sections"), sel, mode) {
		if (eng_policy_apply(p, al, sel, json_string_value(mode), &err) < 0)
			goto fail;
	}
	if (eng_policy_check_device(device, p, &err) < 0)
		goto fail;
	return 0;
fail:
	snprintf(desc, desclen, "%s", err.msg);
	return -1;
}

json_t *eng_plan_sections_json(const eng_policy *p, const eng_plan *plan,
	const size_t *measured)
{
	json_t *a = json_array();
	int L = p->n_layer;
	for (int i = 0; a && i <= L; i++) {
		char name[16];
		if (i < L)
			snprintf(name, sizeof name, "h.%d", i);
		else
			snprintf(name, sizeof name, "head");
		const eng_plan_section *s = i < L ? &plan->block[i] : &plan->head;
		json_array_append_new(a, json_pack("{s:s,s:s,s:s,s:I,s:I,s:f}", "name", name, "kind",
			i < L ? "block" : "head", "mode", eng_mode_name(i < L ? p->block[i] : p->head),
			"saved_bytes", (json_int_t)(measured ? measured[i] : s->saved_bytes),
			"workspace_bytes", (json_int_t)s->workspace_bytes, "extra_flops",
			s->extra_flops));
	}
	return a;
}

json_t *eng_plan_reply(const eng_plan_job *j, const json_t *args, char *desc,
	size_t desclen)
{
	eng_policy p = j->policy;
	eng_plan plan;
	json_t *budget = json_object_get(args, "budget_bytes");
	int has_pol = json_object_get(args, "sections") || json_object_get(args, "default");
	int fits = 1;
	if (eng_plan_policy_args(j->aliases, j->device, args, &p, desc, desclen) < 0)
		return NULL;
	if (budget && !has_pol)
		fits = eng_plan_fit(&j->cfg, j->B, j->T, j->chunk_rows,
			       (size_t)json_integer_value(budget), &p, &plan) == 0;
	else
		eng_plan_policy(&j->cfg, j->B, j->T, j->chunk_rows, &p, &plan);
	if (budget && has_pol)
		fits = plan.saved_bytes + plan.recompute_bytes <= (size_t)json_integer_value(budget);
	json_t *r = json_pack("{s:o,s:o,s:I,s:I,s:f,s:f}", "policy", eng_policy_json(&p),
		"sections", eng_plan_sections_json(&p, &plan, NULL), "saved_bytes",
		(json_int_t)plan.saved_bytes, "recompute_bytes", (json_int_t)plan.recompute_bytes,
		"extra_flops", plan.extra_flops, "model_flops", plan.model_flops);
	if (r && budget)
		json_object_set_new(r, "fits", json_boolean(fits));
	if (!r)
		snprintf(desc, desclen, "out of memory");
	return r;
}

static void json_item(void *ud, const char *sel, eng_mode m)
{
	json_object_set_new(ud, sel, json_string(eng_mode_name(m)));
}

json_t *eng_policy_json(const eng_policy *p)
{
	json_t *o = json_object();
	if (o)
		eng_policy_each(p, json_item, o);
	return o;
}
