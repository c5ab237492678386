/* eng_check_info.c - remat-train --check's answer written and read (see eng_check_info.h).
 * Not here: the check itself (engine/run), what rematd does with the answer.
 */
#include "eng_check_info.h"

#include <stdio.h>
#include <string.h>

#include "eng_plan_json.h"
#include "proto.h"

/* {NAME: SELECTOR} of the spec's aliases. New reference. */
static json_t *aliases_json(const eng_aliases *al)
{
	json_t *o = json_object();
	for (int i = 0; o && i < al->n; i++)
		json_object_set_new(o, al->a[i].name, json_string(al->a[i].selector));
	return o;
}

/* {CATEGORY: BYTES} of what the run holds whatever its policy (the categories it has).
 * New reference. */
static json_t *fixed_json(const size_t *fixed)
{
	json_t *o = json_object();
	for (int c = 0; o && c < ENG_MEM_NCAT; c++)
		if (fixed[c])
			json_object_set_new(o, eng_mem_cat_name((eng_mem_cat)c),
				json_integer((json_int_t)fixed[c]));
	return o;
}

json_t *eng_check_info_json(const eng_check_info *ci)
{
	if (!ci->ok)
		return json_pack("{s:b,s:s,s:s}", "ok", 0, "error", ci->error, "class",
			proto_errclass_name(ci->busy ? PROTO_ERR_BUSY
						     : PROTO_ERR_INVALID_PARAMETER));
	json_t *o = json_pack("{s:b,s:s,s:i,s:o,s:i,s:i,s:i,s:o,s:o,s:s,s:s,s:s,s:I}", "ok", 1,
		"name", ci->name, "steps", ci->steps, "config", eng_config_json(&ci->cfg), "batch",
		ci->batch, "seq_len", ci->seq_len, "chunk_rows", ci->chunk_rows, "policy",
		eng_policy_json(&ci->policy), "aliases", aliases_json(&ci->aliases), "init_from",
		ci->init_from, "save_dir", ci->save_dir, "device", ci->device == ENG_DEVICE_CUDA ?
		"cuda" : "cpu", "tokens", (json_int_t)ci->tokens);
	if (!o)
		return NULL;
	if (ci->has_resume_step)
		json_object_set_new(o, "resume_step", json_integer(ci->resume_step));
	if (ci->warning[0])
		json_object_set_new(o, "warnings", json_pack("[s]", ci->warning));
	/* what trains (rematd's job-start reply and job-status of a job not running) */
	json_object_set_new(o, "model", json_pack("{s:s,s:I,s:I}", "arch",
		eng_arch_name(ci->cfg.arch), "params", (json_int_t)ci->params, "trainable_params",
		(json_int_t)ci->trainable_params));
	if (ci->cfg.quant) /* a 4-bit base: how many weights, their bytes */
		json_object_set_new(json_object_get(o, "model"), "quantized",
			eng_quant_json(&ci->cfg, 1));
	json_object_set_new(o, "precision", json_string(eng_precision_names[ci->precision]));
	/* data parallel: what rematd passes to mpirun */
	json_object_set_new(o, "parallel", json_pack("{s:i,s:s,s:s,s:s,s:s,s:s}", "ranks",
		ci->ranks, "shard", ci->cfg.opt_shards ? "optimizer" : "none", "hosts", ci->hosts,
		"hostfile", ci->hostfile, "mca", ci->mca, "launcher", ci->launcher));
	/* the plan's terms: held whatever the policy, the process's beyond the tracked bytes,
	 * and a save's snapshot */
	if (ci->has_fixed)
		json_object_set_new(o, "fixed_bytes", fixed_json(ci->fixed));
	if (ci->has_untracked)
		json_object_set_new(o, "untracked_bytes", json_integer((json_int_t)ci->untracked));
	json_object_set_new(o, "snapshot_bytes", json_integer((json_int_t)ci->snapshot));
	return o;
}

/* The string o.key into dst (len bytes), "" when absent. */
static void str_of(const json_t *o, const char *key, char *dst, size_t len)
{
	const char *s = json_string_value(json_object_get(o, key));
	snprintf(dst, len, "%s", s ? s : "");
}

/* o.key as a count of bytes: 0 when absent or not positive. */
static size_t bytes_of(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	return json_is_integer(v) && json_integer_value(v) > 0 ? (size_t)json_integer_value(v)
							       : 0;
}

/* The aliases and the policy, read on the model's blocks (only when it has a shape: an
 * older record may have none). */
static int read_policy(const json_t *o, eng_check_info *ci, eng_err *err)
{
	const char *key;
	json_t *v;
	eng_policy_init(&ci->policy, ci->cfg.n_layer);
	if (eng_config_validate(&ci->cfg, "the check's model", err) < 0)
		return 0;
	json_object_foreach((json_t *)json_object_get(o, "aliases"), key, v) {
		if (!json_is_string(v))
			return eng_errf(err, "the check's alias '%.64s' is no string", key);
		if (eng_aliases_add(&ci->aliases, key, json_string_value(v), ci->cfg.n_layer,
			err) < 0)
			return -1;
	}
	json_object_foreach((json_t *)json_object_get(o, "policy"), key, v) {
		if (!json_is_string(v))
			return eng_errf(err, "the check's policy: the mode of '%.64s' is no string",
				key);
		if (eng_policy_apply(&ci->policy, &ci->aliases, key, json_string_value(v),
			err) < 0)
			return -1;
	}
	return 0;
}

int eng_check_info_read(const json_t *o, eng_check_info *ci, eng_err *err)
{
	const json_t *v;
	memset(ci, 0, sizeof *ci);
	if (!json_is_object(o))
		return eng_errf(err, "the check's answer is no JSON object");
	v = json_object_get(o, "ok");
	ci->ok = !v || json_is_true(v);
	if (!ci->ok) {
		str_of(o, "error", ci->error, sizeof ci->error);
		v = json_object_get(o, "class");
		ci->busy = json_is_string(v) &&
			   strcmp(json_string_value(v), proto_errclass_name(PROTO_ERR_BUSY)) == 0;
		return 0;
	}
	str_of(o, "name", ci->name, sizeof ci->name);
	ci->steps = (int)json_integer_value(json_object_get(o, "steps"));
	eng_config_from_json(json_object_get(o, "config"), &ci->cfg);
	ci->batch = (int)json_integer_value(json_object_get(o, "batch"));
	ci->seq_len = (int)json_integer_value(json_object_get(o, "seq_len"));
	ci->chunk_rows = (int)json_integer_value(json_object_get(o, "chunk_rows"));
	str_of(o, "init_from", ci->init_from, sizeof ci->init_from);
	str_of(o, "save_dir", ci->save_dir, sizeof ci->save_dir);
	v = json_object_get(o, "device");
	ci->device = json_is_string(v) && strcmp(json_string_value(v), "cuda") == 0 ?
		ENG_DEVICE_CUDA : ENG_DEVICE_CPU;
	ci->tokens = json_integer_value(json_object_get(o, "tokens"));
	v = json_object_get(o, "resume_step");
	ci->has_resume_step = json_is_integer(v);
	ci->resume_step = (int)json_integer_value(v);
	v = json_array_get(json_object_get(o, "warnings"), 0);
	snprintf(ci->warning, sizeof ci->warning, "%s", json_is_string(v) ?
		json_string_value(v) : "");
	v = json_object_get(o, "model");
	ci->params = json_integer_value(json_object_get(v, "params"));
	ci->trainable_params = json_integer_value(json_object_get(v, "trainable_params"));
	v = json_object_get(o, "precision");
	for (int i = 0; json_is_string(v) && eng_precision_names[i]; i++)
		if (strcmp(eng_precision_names[i], json_string_value(v)) == 0)
			ci->precision = (eng_precision)i;
	v = json_object_get(o, "parallel");
	ci->ranks = (int)json_integer_value(json_object_get(v, "ranks"));
	str_of(v, "hosts", ci->hosts, sizeof ci->hosts);
	str_of(v, "hostfile", ci->hostfile, sizeof ci->hostfile);
	str_of(v, "mca", ci->mca, sizeof ci->mca);
	str_of(v, "launcher", ci->launcher, sizeof ci->launcher);
	v = json_object_get(o, "fixed_bytes");
	ci->has_fixed = json_is_object(v);
	for (int c = 0; ci->has_fixed && c < ENG_MEM_NCAT; c++)
		ci->fixed[c] = bytes_of(v, eng_mem_cat_name((eng_mem_cat)c));
	ci->has_untracked = json_is_integer(json_object_get(o, "untracked_bytes"));
	ci->untracked = bytes_of(o, "untracked_bytes");
	ci->snapshot = bytes_of(o, "snapshot_bytes");
	return read_policy(o, ci, err);
}
