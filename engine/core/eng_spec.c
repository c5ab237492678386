/* eng_spec.c - the job spec (design.md §5): JSON text to a checked eng_spec (see eng_spec.h).
 *
 * What it is: jansson parsing, a refusal of every key it does not know (named with its path,
 * "optim.betas", and the keys that object does know), the defaults, and a type and range
 * check of every value. Nothing from outside can make it crash or overflow a buffer.
 *
 * What it is not: it opens no data file and no checkpoint, and it does not carry out the
 * remat policy. Selectors and aliases are only checked in eng_spec_finish, once the layer
 * count is known (a checkpoint named by init_from may be what decides it).
 *
 * Here: the defaults, the text or file parsed, and what depends on the model's shape
 * (eng_spec_finish) or on the machine (eng_spec_warning); the sections in eng_spec_parse.c,
 * the typed readers of values in eng_spec_get.c.
 */
#include "eng_spec_int.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng_fs.h"
#include "eng_tensors.h"

static void spec_defaults(eng_spec *s)
{
	memset(s, 0, sizeof *s);
	snprintf(s->name, sizeof s->name, "job");
	s->data_format = ENG_DATA_LLMC;
	s->batch = 4;
	s->seq_len = 0; /* min(SPEC_DEFAULT_SEQ, n_positions), set by eng_spec_finish */
	s->steps = 1000;
	s->grad_accum = 1;
	s->ranks = 1;
	s->bucket_mb = ENG_BUCKET_MB;
	s->priority = 1;
	s->sample_tokens = 64;
	s->sample_temperature = 1.0f;
	s->sample_seed = 1337;
	s->shuffle_seed = SPEC_LLMC_SHUFFLE_SEED;
	s->seed = 1337;
	s->lr = 3e-4f;
	s->beta1 = 0.9f;
	s->beta2 = 0.95f;
	s->eps = 1e-8f;
	s->weight_decay = 0.1f;
	s->grad_clip = 1.0f;
	s->sched = ENG_SCHED_COSINE;
	s->warmup = 0;
	s->min_lr_frac = 0.1f;
	snprintf(s->remat_default, sizeof s->remat_default, "off");
	s->chunk_rows = 0;
	s->save_every = 0;
	s->save_keep = 3;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	s->threads = n < 1 ? 1 : n > SPEC_MAX_THREADS ? SPEC_MAX_THREADS : (int)n;
	s->device = ENG_DEVICE_CPU;
}

int eng_spec_parse(eng_spec *spec, const char *json_text, eng_err *err)
{
	json_error_t je;
	ENG_ASSERT(spec != NULL);
	spec_defaults(spec);
	if (!json_text)
		return eng_errf(err, "no job spec text");
	json_t *root = json_loads(json_text, JSON_REJECT_DUPLICATES, &je);
	char why[96];
	if (!root)
		return eng_errf(err, "invalid JSON: %s", eng_err_json(&je, why, sizeof why));
	int rc = es_parse_root(spec, root, err);
	json_decref(root);
	return rc;
}

char *eng_spec_read(const char *path, size_t *lenp, eng_err *err)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	FILE *f = eng_fs_fopen_read(path, "job spec", err);
	if (!f)
		return NULL;
	for (;;) {
		if (len == cap) {
			/* one byte past the limit tells "exactly the limit" from "larger" */
			if (cap > SPEC_MAX_FILE) {
				eng_errf(err, "job spec '%s' is larger than %d MiB", path,
					SPEC_MAX_FILE >> 20);
				goto fail;
			}
			size_t ncap = cap ? 2 * cap : 4096;
			ncap = ncap > (size_t)SPEC_MAX_FILE + 1 ? (size_t)SPEC_MAX_FILE + 1 : ncap;
			char *nbuf = realloc(buf, ncap);
			if (!nbuf) {
				eng_errf(err, "cannot read job spec '%s': out of memory", path);
				goto fail;
			}
			buf = nbuf;
			cap = ncap;
		}
		size_t n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (n == 0) {
			if (ferror(f)) {
				eng_errf(err, "cannot read job spec '%s': %s", path,
					strerror(errno));
				goto fail;
			}
			break;
		}
	}
	fclose(f);
	if (!buf && !(buf = malloc(1))) {
		eng_errf(err, "cannot read job spec '%s': out of memory", path);
		return NULL;
	}
	*lenp = len;
	return buf;
fail:
	free(buf);
	fclose(f);
	return NULL;
}

int eng_spec_parse_buf(eng_spec *spec, const char *buf, size_t len, const char *path,
	eng_err *err)
{
	json_error_t je;
	eng_err e;
	ENG_ASSERT(spec != NULL && buf != NULL && path != NULL);
	spec_defaults(spec);
	/* json_loadb, not json_loads: a NUL byte in the file is an error, not an end */
	json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	char why[96];
	if (!root)
		return eng_errf(err, "job spec '%s': invalid JSON: %s", path,
			eng_err_json(&je, why, sizeof why));
	int rc = es_parse_root(spec, root, &e);
	if (rc < 0)
		eng_errf(err, "job spec '%s': %s", path, e.msg);
	json_decref(root);
	return rc;
}

int eng_policy_check_device(eng_device device, const eng_policy *p, eng_err *err)
{
	int l = eng_policy_find(p, ENG_MODE_OFFLOAD);
	if (l >= 0 && device != ENG_DEVICE_CUDA)
		return eng_errf(err, "mode 'offload' (h.%d) needs device cuda: it moves a block's "
				     "saved activations from the GPU to host memory", l);
	return 0;
}

/* The adapters on the model, the base frozen (PEFT's default: only A and B train) */
static int finish_lora(eng_spec *spec, eng_err *err)
{
	eng_config *c = &spec->cfg;
	const char *names[ENG_LORA_UNITS];
	eng_err e;
	if (spec->device == ENG_DEVICE_CUDA || spec->precision == ENG_PREC_BF16)
		return eng_errf(err, "'lora': adapters train on the cpu in fp32 precision so far");
	if (spec->n_freeze)
		return eng_errf(err, "'train.freeze' with 'lora': the adapters are what trains, "
				     "every base weight is frozen already");
	unsigned units = 0;
	for (int i = 0; i < spec->n_lora_target; i++)
		names[i] = spec->lora_target[i];
	if (spec->lora_r && eng_lora_targets(c, names, spec->n_lora_target, &units, &e) < 0)
		return eng_errf(err, "'lora.targets': %s", e.msg);
	/* adapters from init_from (an adapter directory, a LoRA run's checkpoint) and the
	 * job's "lora" too (a resumed job's spec keeps it): they must be the same */
	if (spec->lora_r && c->lora_r &&
		(c->lora_r != spec->lora_r || c->lora_alpha != spec->lora_alpha ||
			c->lora_units != units))
		return eng_errf(err, "'lora' (r %d, alpha %g) is not the adapters of "
				     "model.init_from (r %d, alpha %g, or other targets): leave "
				     "'lora' out to train those", spec->lora_r, spec->lora_alpha,
			c->lora_r, c->lora_alpha);
	if (spec->lora_r) {
		c->lora_r = spec->lora_r;
		c->lora_alpha = spec->lora_alpha;
		c->lora_units = units;
	}
	memset(c->frozen, 0, sizeof c->frozen);
	for (int i = 0; i < eng_lora_base_tensors(c); i++)
		eng_config_freeze(c, i);
	return eng_config_validate(c, "'lora'", err);
}

/* model.quantize onto the shape: the job's, or an adapter's own (init_from) when the job
 * gives none; where 4-bit weights can train */
static int finish_quant(eng_spec *spec, eng_err *err)
{
	eng_config *c = &spec->cfg;
	if (spec->quant && c->quant &&
		(c->quant != spec->quant || c->quant_dq != spec->quant_dq ||
			c->quant_block != spec->quant_block || c->quant_bf16 != spec->quant_bf16))
		return eng_errf(err, "'model.quantize' is not the quantization model.init_from's "
				     "adapters trained over (adapter_config.json's "
				     "base_model_quantization): leave it out to take theirs");
	if (spec->quant) {
		c->quant = spec->quant;
		c->quant_dq = spec->quant_dq;
		c->quant_block = spec->quant_block;
		c->quant_bf16 = spec->quant_bf16;
	}
	if (!c->quant)
		return 0;
	if (spec->device == ENG_DEVICE_CUDA)
		return eng_errf(err, "'model.quantize': device cuda has no 4-bit kernels yet; "
				     "QLoRA trains on the cpu");
	if (spec->precision == ENG_PREC_BF16)
		return eng_errf(err, "'model.quantize' trains in precision fp32: the 4-bit "
				     "products' dtype is model.quantize.compute");
	if (!spec->init_from[0])
		return eng_errf(err, "'model.quantize' quantizes a pretrained base as it loads: "
				     "give model.init_from (a Hugging Face model directory, or "
				     "adapters of one)");
	return 0;
}

/* Every 4-bit weight frozen (they have no float32 copy to train); double quantization only
 * under LoRA */
static int quant_frozen(const eng_config *c, eng_err *err)
{
	if (!c->quant)
		return 0;
	if (c->quant_dq && !c->lora_r)
		return eng_errf(err, "'model.quantize.double_quant' needs \"lora\": a run that "
				     "trains the base's other tensors saves the whole model, its "
				     "4-bit weights dequantized, which double quantization cannot "
				     "read back to the same bits");
	int nt = eng_model_ntensors(c), rc = 0;
	eng_ptensor *tab = calloc((size_t)nt, sizeof *tab);
	if (!tab)
		return eng_errf(err, "out of memory");
	eng_model_table(c, tab, NULL);
	for (int i = 0; i < nt && rc == 0; i++)
		if (tab[i].quant && !tab[i].frozen)
			rc = eng_errf(err, "'model.quantize' needs a frozen base: \"lora\", or "
					   "\"train.freeze\" covering every block's linear weight "
					   "('%s' would train)", tab[i].name);
	free(tab);
	return rc;
}

int eng_spec_finish(eng_spec *spec, const eng_config *cfg, eng_err *err)
{
	eng_aliases al;
	eng_policy p;
	eng_err e;

	ENG_ASSERT(spec != NULL && cfg != NULL);
	/* a checkpoint's config.json is outside input too, and eng_policy holds
	 * ENG_MAX_LAYERS blocks */
	if (eng_config_validate(cfg, "model", err) < 0)
		return -1;
	spec->cfg = *cfg;
	/* the matmuls in bf16: the CPU's precision bf16 (a GPU's bf16 is its own, eng_cuda.h:
	 * its activations in bf16, its default; REMAT_CUDA_PRECISION, which the worker's
	 * backend reads when the spec names none, may make it float32 there) */
	spec->cfg.mm_bf16 = spec->device == ENG_DEVICE_CPU && spec->precision == ENG_PREC_BF16;
	spec->cfg.act_bf16 = spec->device == ENG_DEVICE_CUDA &&
			     (!spec->has_precision || spec->precision == ENG_PREC_BF16);
	if (spec->seq_len == 0)
		spec->seq_len = cfg->n_positions < SPEC_DEFAULT_SEQ ? cfg->n_positions
								    : SPEC_DEFAULT_SEQ;
	if (spec->seq_len > cfg->n_positions)
		return eng_errf(err, "'seq_len' %d out of range 1..n_positions (%d)", spec->seq_len,
			cfg->n_positions);
	if (es_check_tokens(spec, err) < 0)
		return -1;
	if (spec->shard_optimizer && spec->device == ENG_DEVICE_CUDA)
		return eng_errf(err, "'parallel.shard': device cuda holds the whole optimizer on "
				     "each rank so far; shard on the cpu");
	if (spec->shard_optimizer && spec->ranks > ENG_OPT_SLICES)
		return eng_errf(err, "'parallel.shard': at most %d ranks share an optimizer "
				     "(%d asked)", ENG_OPT_SLICES, spec->ranks);
	/* this rank's part: eng_trainer_init sets opt_rank */
	spec->cfg.opt_shards = spec->shard_optimizer && spec->ranks > 1 ? spec->ranks : 0;
	if (spec->device == ENG_DEVICE_CUDA && cfg->arch != ENG_ARCH_GPT2)
		return eng_errf(err, "'device' cuda trains GPT-2 models only so far: a %s model "
				     "trains on the cpu", eng_arch_name(cfg->arch));
	if (spec->device == ENG_DEVICE_CUDA && spec->sample_on)
		return eng_errf(err, "'sample': device cuda does not sample yet; sample from the "
				     "checkpoints with remat-train --sample");
	if (spec->data_format == ENG_DATA_BYTES && cfg->vocab_size < 256)
		return eng_errf(err, "'data.format' is \"bytes\" but the model's vocab_size is %d "
				     "(bytes need at least 256)", cfg->vocab_size);
	if (spec->sample_on && spec->sample_n == 0 && !spec->sample_text[0] &&
		!ENG_DATA_IS_TEXT(spec->data_format)) {
		/* no prompt: a new line (nanoGPT's), or GPT-2's <|endoftext|> (llm.c's), or 0 */
		spec->sample_prompt[0] = spec->data_format == ENG_DATA_BYTES ? '\n'
			: cfg->vocab_size > 50256 ? 50256 : 0;
		spec->sample_n = 1;
	}
	for (int i = 0; i < spec->sample_n; i++)
		if (spec->sample_prompt[i] >= (uint32_t)cfg->vocab_size)
			return eng_errf(err, "'sample.prompt[%d]' is %u, out of range for "
					     "vocab_size %d", i, spec->sample_prompt[i],
				cfg->vocab_size);

	al.n = 0;
	for (int i = 0; i < spec->n_alias; i++)
		if (eng_aliases_add(&al, spec->alias[i].name, spec->alias[i].selector,
			    cfg->n_layer, &e) < 0)
			return eng_errf(err, "'remat.aliases.%s': %s", spec->alias[i].name, e.msg);
	eng_policy_init(&p, cfg->n_layer);
	if (eng_policy_apply(&p, &al, "all", spec->remat_default, &e) < 0)
		return eng_errf(err, "'remat.default': %s", e.msg);
	for (int i = 0; i < spec->n_assign; i++)
		if (eng_policy_apply(&p, &al, spec->assign[i].selector, spec->assign[i].mode,
			    &e) < 0)
			return eng_errf(err, "'remat.sections.%s': %s", spec->assign[i].selector,
				e.msg);
	if (spec->n_freeze && spec->device == ENG_DEVICE_CUDA)
		return eng_errf(err, "'train.freeze': device cuda trains every tensor so far; "
				     "frozen tensors train on the cpu");
	if (finish_quant(spec, err) < 0)
		return -1;
	if (spec->lora_r || spec->cfg.lora_r ? finish_lora(spec, err) < 0
		: eng_freeze_resolve(&spec->cfg, &al, spec->freeze, spec->n_freeze, err) < 0)
		return -1;
	return quant_frozen(&spec->cfg, err);
}

int eng_spec_warning(const eng_spec *s, char *buf, size_t len)
{
	cpu_set_t set;
	int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
	if (len > 0)
		buf[0] = '\0';
	if (!s->has_threads || cpus < 1 || s->threads <= cpus)
		return 0;
	snprintf(buf, len, "threads %d exceeds the %d CPU%s this process may use "
		"(sched_getaffinity): steps will be slower", s->threads, cpus, cpus > 1 ? "s" : "");
	return 1;
}
