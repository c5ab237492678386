/* eng_plan_json.c - remat-plan's answer, the sections table and a policy as JSON (see
 * eng_plan_json.h). No I/O. */
#include "eng_plan_json.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "eng_tensors.h"

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
		eng_section_name(i, L, name, sizeof name);
		const eng_plan_section *s = i < L ? &plan->block[i] : &plan->head;
		json_array_append_new(a, json_pack("{s:s,s:s,s:s,s:I,s:I,s:f}", "name", name, "kind",
			i < L ? "block" : "head", "mode", eng_mode_name(i < L ? p->block[i] : p->head),
			"saved_bytes", (json_int_t)(measured ? measured[i] : s->saved_bytes),
			"workspace_bytes", (json_int_t)s->workspace_bytes, "extra_flops",
			s->extra_flops));
	}
	return a;
}

/* What each term of "memory" is (the reply says it, so that a figure is never read for
 * another): one table for the keys and their meaning. */
static const char *const term_notes[][2] = {
	{"params", "weights"},
	{"grads", "their gradients"},
	{"optimizer", "AdamW's two moments"},
	{"activations", "saved for backward under the policy, at the step's peak"},
	{"recompute", "the buffers recomputed blocks and head chunks rebuild into"},
	{"workspace", "step temporaries"},
	{"data", "token files and the batch"},
	{"untracked", "the process's resident memory beyond the counted categories: the binary "
		      "and its libraries, thread stacks, BLAS buffers, allocator slack (measured)"},
	{"snapshot", "a save's copy of weights and moments, held while it is written; 0 when "
		     "saves write from the live tensors (training waits for them)"},
};

/* The peak by category: the fixed part as given, activations and recompute planned, the
 * untracked term and a save's snapshot when it is held; and what each is. */
static json_t *memory_json(const eng_plan_job *j, const eng_plan *plan, size_t snapshot)
{
	json_t *m = json_object(), *notes = json_object();
	for (int c = 0; m && c < ENG_MEM_NCAT; c++) {
		size_t v = c == ENG_MEM_ACTIVATIONS ? plan->saved_bytes
			 : c == ENG_MEM_RECOMPUTE   ? plan->recompute_bytes : j->fixed[c];
		json_object_set_new(m, eng_mem_cat_name((eng_mem_cat)c), json_integer((json_int_t)v));
	}
	json_object_set_new(m, "untracked", json_integer((json_int_t)j->untracked));
	json_object_set_new(m, "snapshot", json_integer((json_int_t)snapshot));
	for (size_t i = 0; notes && i < sizeof term_notes / sizeof term_notes[0]; i++)
		json_object_set_new(notes, term_notes[i][0], json_string(term_notes[i][1]));
	json_object_set_new(m, "notes", notes);
	json_object_set_new(m, "fixed_source",
		j->fixed_source ? json_string(j->fixed_source) : json_null());
	json_object_set_new(m, "untracked_source",
		j->untracked_source ? json_string(j->untracked_source) : json_null());
	return m;
}

/* How saves will go under the plan: "snapshot" (a copy, training goes on), "live" (no copy:
 * training waits for the write), or null without saves; and what each costs in time where
 * a save has measured it. */
static json_t *saves_json(const eng_plan_job *j, int held)
{
	if (!j->snapshot)
		return json_null();
	return json_pack("{s:s,s:I,s:o,s:o}", "way", held ? "snapshot" : "live",
		"snapshot_bytes", (json_int_t)j->snapshot, "snapshot_stall_ms", j->snap_stall_ms > 0
		? json_real(j->snap_stall_ms) : json_null(), "live_stall_ms", j->save_ms > 0 ?
		json_real(j->save_ms) : json_null());
}

/* The predicted step time of p and what each section adds, with where that came from. */
static void add_step_time(const eng_plan_job *j, const eng_policy *p, json_t *r)
{
	int L = p->n_layer, all = 1, none = 1;
	double ms = j->off_step_ms;
	json_t *secs = json_object_get(r, "sections");
	for (int i = 0; i <= L; i++) {
		int k = i < L ? (int)p->block[i] : p->head == ENG_MODE_CHUNKED;
		int offload = i < L && p->block[i] == ENG_MODE_OFFLOAD;
		double add = offload ? 0.0 : i < L ? j->costs->block[i][k] : j->costs->head[k];
		int meas = !offload && j->measured && j->measured[i][k];
		all &= meas;
		none &= !meas;
		ms += add;
		json_t *s = json_array_get(secs, (size_t)i);
		json_object_set_new(s, "added_ms", offload ? json_null() : json_real(add));
		json_object_set_new(s, "cost_source", json_string(offload ? "unknown" : meas ?
			"measured" : "analytic"));
	}
	json_object_set_new(r, "step_ms", j->off_step_ms > 0 ? json_real(ms) : json_null());
	json_object_set_new(r, "cost_source",
		json_string(all ? "measured" : none ? "analytic" : "measured and analytic"));
}

json_t *eng_plan_reply(const eng_plan_job *j, const json_t *args, char *desc,
	size_t desclen)
{
	eng_policy p = j->policy;
	eng_plan plan;
	json_t *budget = json_object_get(args, "budget_bytes");
	int has_pol = json_object_get(args, "sections") || json_object_get(args, "default");
	int fits = 1, held = 1;
	size_t fixed = j->untracked, b = budget ? (size_t)json_integer_value(budget) : SIZE_MAX;
	for (int c = 0; c < ENG_MEM_NCAT; c++)
		fixed += j->fixed[c];
	if (eng_plan_policy_args(j->aliases, j->device, args, &p, desc, desclen) < 0)
		return NULL;
	/* the snapshot is optional: held where it fits, as the run holds it */
	eng_plan_query q = {&j->cfg, j->B, j->T, j->chunk_rows, fixed, j->costs, b, j->snapshot,
		j->costs ? eng_plan_live_save_cost(j->save_ms, j->save_every) : 0.0};
	if (budget && !has_pol) {
		fits = eng_plan_search(&q, &p, &plan) == 0; /* else plan is the least there is */
		held = plan.optional_held;
	} else {
		eng_plan_policy(&j->cfg, j->B, j->T, j->chunk_rows, &p, &plan);
		held = fixed + j->snapshot + plan.peak_bytes <= b;
		plan.fixed_bytes = fixed + (held ? j->snapshot : 0);
		plan.peak_bytes += plan.fixed_bytes;
		fits = plan.peak_bytes <= b;
	}
	json_t *r = json_pack("{s:o,s:o,s:I,s:I,s:I,s:I,s:o,s:f,s:f}", "policy",
		eng_policy_json(&p), "sections", eng_plan_sections_json(&p, &plan, NULL),
		"saved_bytes", (json_int_t)plan.saved_bytes, "recompute_bytes",
		(json_int_t)plan.recompute_bytes, "fixed_bytes", (json_int_t)plan.fixed_bytes,
		"peak_bytes", (json_int_t)plan.peak_bytes, "memory", memory_json(j, &plan, held ?
		j->snapshot : 0), "extra_flops", plan.extra_flops, "model_flops", plan.model_flops);
	if (r)
		json_object_set_new(r, "saves", saves_json(j, held));
	if (r && j->cfg.quant) /* what the 4-bit base saves, in the params above */
		json_object_set_new(r, "quantize", eng_quant_json(&j->cfg, 1));
	if (r && j->costs)
		add_step_time(j, &p, r);
	if (r && budget) {
		json_object_set_new(r, "fits", json_boolean(fits));
		if (!fits) {
			/* the least memory any policy needs: what the search returned, or for a
			 * policy asked for, a search of its own */
			eng_policy least_p;
			eng_plan least = plan;
			q.budget = 0;
			q.optional = 0;
			if (has_pol)
				eng_plan_search(&q, &least_p, &least);
			json_object_set_new(r, "least_bytes", json_integer((json_int_t)least.peak_bytes));
		}
	}
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

json_t *eng_config_json(const eng_config *c)
{
	json_t *o = json_pack("{s:i,s:i,s:i,s:i,s:i,s:b,s:b,s:s}", "n_layer", c->n_layer,
		"n_embd", c->n_embd, "n_head", c->n_head, "n_positions", c->n_positions,
		"vocab_size", c->vocab_size, "mm_bf16", c->mm_bf16, "act_bf16", c->act_bf16,
		"arch", eng_arch_name(c->arch));
	if (o && c->lora_r) { /* the adapters' activations are the planner's to count */
		json_object_set_new(o, "lora_r", json_integer(c->lora_r));
		json_object_set_new(o, "lora_alpha", json_real(c->lora_alpha));
		json_object_set_new(o, "lora_units", json_integer((json_int_t)c->lora_units));
	}
	if (o && c->opt_shards > 1) /* each rank's optimizer: its part */
		json_object_set_new(o, "opt_shards", json_integer(c->opt_shards));
	if (o && c->quant) /* the 4-bit weights' bytes are the planner's to show */
		json_object_set_new(o, "quantize", eng_quant_json(c, 0));
	if (!o || c->arch != ENG_ARCH_LLAMA)
		return o;
	json_t *l = json_pack("{s:i,s:i,s:f,s:f,s:b}", "n_kv_head", c->n_kv_head,
		"intermediate_size", c->intermediate_size, "rope_theta", c->rope_theta,
		"rms_norm_eps", c->rms_norm_eps, "tie_word_embeddings", !c->untied);
	if (!l || json_object_update(o, l) < 0) {
		json_decref(o);
		o = NULL;
	}
	json_decref(l);
	return o;
}

/* o[key] as an int, 0 when absent */
static int int_of(const json_t *o, const char *key)
{
	return (int)json_integer_value(json_object_get(o, key));
}

void eng_config_from_json(const json_t *o, eng_config *c)
{
	const char *arch = json_string_value(json_object_get(o, "arch"));
	memset(c, 0, sizeof *c);
	c->n_layer = int_of(o, "n_layer");
	c->n_embd = int_of(o, "n_embd");
	c->n_head = int_of(o, "n_head");
	c->n_positions = int_of(o, "n_positions");
	c->vocab_size = int_of(o, "vocab_size");
	c->mm_bf16 = json_is_true(json_object_get(o, "mm_bf16")); /* the CPU's bf16 */
	c->act_bf16 = json_is_true(json_object_get(o, "act_bf16")); /* a GPU's */
	c->lora_r = int_of(o, "lora_r");
	c->lora_alpha = json_number_value(json_object_get(o, "lora_alpha"));
	c->lora_units = (unsigned)int_of(o, "lora_units") & ((1u << ENG_LORA_UNITS) - 1);
	c->opt_shards = int_of(o, "opt_shards");
	c->opt_shards = c->opt_shards > 1 && c->opt_shards <= ENG_OPT_SLICES ? c->opt_shards : 0;
	eng_quant_from_json(json_object_get(o, "quantize"), c);
	if (!arch || eng_arch_parse(arch, &c->arch) < 0 || c->arch != ENG_ARCH_LLAMA)
		return;
	c->n_kv_head = int_of(o, "n_kv_head");
	c->intermediate_size = int_of(o, "intermediate_size");
	c->rope_theta = json_number_value(json_object_get(o, "rope_theta"));
	c->rms_norm_eps = json_number_value(json_object_get(o, "rms_norm_eps"));
	c->untied = !json_is_true(json_object_get(o, "tie_word_embeddings"));
}

json_t *eng_quant_json(const eng_config *c, int bytes)
{
	json_t *o = json_pack("{s:s,s:b,s:i,s:s}", "type", eng_quant_names[c->quant],
		"double_quant", c->quant_dq, "block_size", c->quant_block, "compute",
		c->quant_bf16 ? "bf16" : "fp32");
	if (!o || !bytes)
		return o;
	size_t n, q = eng_model_q4_bytes(c, &n);
	json_object_set_new(o, "weights", json_integer((json_int_t)n));
	json_object_set_new(o, "bytes", json_integer((json_int_t)q));
	return o;
}

void eng_quant_from_json(const json_t *q, eng_config *c)
{
	const char *t = json_string_value(json_object_get(q, "type"));
	const char *dt = json_string_value(json_object_get(q, "compute"));
	eng_config_no_quant(c);
	for (int k = ENG_QUANT_NF4; t && k <= ENG_QUANT_FP4; k++)
		c->quant = strcmp(t, eng_quant_names[k]) == 0 ? k : c->quant;
	if (!c->quant)
		return;
	c->quant_dq = json_is_true(json_object_get(q, "double_quant"));
	c->quant_block = (int)json_integer_value(json_object_get(q, "block_size"));
	c->quant_bf16 = dt && strcmp(dt, "bf16") == 0;
}
