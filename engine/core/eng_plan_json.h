/* eng_plan_json.h - remat-plan's answer (docs/protocol.md), built from the planner's counts:
 * shared by the worker (a running job) and rematd (a queued job, or a spec file, from what
 * remat-train --check said of it), so both answer alike.
 *
 * Not here: the counts themselves (eng_plan.h), or where the job's shape comes from.
 */
#ifndef ENG_PLAN_JSON_H
#define ENG_PLAN_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "eng_mem.h"
#include "eng_plan.h"
#include "eng_policy.h"
#include "eng_spec.h"

/* What a plan needs of a job. */
typedef struct eng_plan_job {
	eng_config cfg;
	int B, T, chunk_rows;
	eng_device device;
	const eng_aliases *aliases;  /* the job's (borrowed) */
	eng_policy policy;           /* the one asked about is built on top of this */
	size_t fixed[ENG_MEM_NCAT];  /* held whatever the policy: params, grads, optimizer,
				      * workspace, data (activations and recompute 0) */
	const char *fixed_source;    /* "engine" (counted from the shape and data, as --check
				      * counts), "measured" (a running cuda job's device), NULL:
				      * not known (all 0) */
	/* a running job's step time: what each section's mode adds (ms), which of those were
	 * measured, and a step's time with every section off; costs NULL: FLOPs only */
	const eng_plan_costs *costs;
	const unsigned char (*measured)[3];
	double off_step_ms;
	size_t untracked;            /* the process's resident bytes beyond the tracked ones
				      * (device cpu): in every peak */
	const char *untracked_source; /* "measured" (a running job's steps), "check" (remat-train
				      * --check's own process, its kernels' buffers made), NULL */
	size_t snapshot;             /* a save's snapshot, when the run saves (0: it does not):
				      * held where the budget has room, else saves go live */
	double save_ms;              /* the last save's write (ms), 0 unknown: a live save's
				      * stall */
	double snap_stall_ms;        /* the last snapshot's copy (ms), 0 unknown */
	int save_every;              /* save.every: what a live save costs a step */
} eng_plan_job;

/* A model's shape as remat-train --check reports it ("config": n_layer, n_embd, n_head,
 * n_positions, vocab_size, mm_bf16, arch, lora_r, lora_alpha and lora_units with
 * adapters, and under llama n_kv_head, intermediate_size, rope_theta, rms_norm_eps,
 * tie_word_embeddings), and back (rematd's plans of a queued
 * job): the one description of those keys. NULL when out of memory. */
json_t *eng_config_json(const eng_config *c);
void eng_config_from_json(const json_t *o, eng_config *c);
/* c's quantization as JSON (a new reference): {"type", "double_quant", "block_size",
 * "compute"} as model.quantize writes them; with bytes, also "weights" (how many elements
 * are held in 4 bits, so 4 x weights bytes in float32) and "bytes" (what they cost so). */
json_t *eng_quant_json(const eng_config *c, int bytes);
/* Back (remat-train --check's config): c's quant fields from q, all 0 when q is not an
 * object of a known type; eng_config_validate checks the rest. */
void eng_quant_from_json(const json_t *q, eng_config *c);

/* Applies args' "default" then "sections" (selector -> mode, in order; aliases resolved)
 * on top of *p, and checks the result against the device (offload needs cuda). 0, or -1
 * with the message in desc (*p then partly changed). */
int eng_plan_policy_args(const eng_aliases *al, eng_device device, const json_t *args,
	eng_policy *p, char *desc, size_t desclen);

/* The "sections" array: for each block and the head, name, kind, mode, saved_bytes (the
 * measured ones when measured is not NULL: L + 1 of them), workspace_bytes and
 * extra_flops (new reference). */
json_t *eng_plan_sections_json(const eng_policy *p, const eng_plan *plan,
	const size_t *measured);

/* remat-plan's return for args {sections, default, budget_bytes}: the policy asked for
 * (or, with a budget and no policy, the cheapest whose whole peak fits), its sections and
 * totals, the peak by category ("memory": the fixed part with its source, the untracked
 * term and a save's snapshot where held, each term's meaning in "notes"), how saves go
 * ("saves"), and with a budget "fits", and "least_bytes" (the least peak any policy has) when it does not. With
 * j->costs the search minimises milliseconds and the answer predicts "step_ms", each
 * section's "added_ms" and "cost_source" (measured or analytic). NULL with desc on a bad
 * selector or mode. */
json_t *eng_plan_reply(const eng_plan_job *j, const json_t *args, char *desc,
	size_t desclen);

/* {"h.0-1":"full",...,"head":"chunked"} (new reference). */
json_t *eng_policy_json(const eng_policy *p);

#endif
