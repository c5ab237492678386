/* eng_config.c - model shapes and presets (see eng_config.h). */
#include "eng_config.h"

#include <stdio.h>
#include <string.h>

/* the Llama shapes, as ENG_GPT2 writes GPT-2's */
#define LLAMA(L, C, NH, NKV, I, P, V, theta, eps, unt)                                 \
	{.n_layer = L, .n_embd = C, .n_head = NH, .n_positions = P, .vocab_size = V,          \
		.arch = ENG_ARCH_LLAMA, .n_kv_head = NKV, .intermediate_size = I,               \
		.rope_theta = theta, .rms_norm_eps = eps, .untied = unt}

static const struct {
	const char *name;
	eng_config cfg;
} presets[] = {
	/* name          L   C    NH  P     V */
	{"tiny",       ENG_GPT2(2, 64, 4, 256, 256)},   /* seconds per hundred steps; byte-level */
	{"mini",       ENG_GPT2(6, 384, 6, 1024, 50257)}, /* ~30M parameters, between tiny and gpt2 */
	{"gpt2-small", ENG_GPT2(12, 768, 12, 1024, 50257)}, /* the 124M GPT-2 shape */
	{"gpt2",       ENG_GPT2(12, 768, 12, 1024, 50257)}, /* Hugging Face's name for the same */
	/* a Llama as small as "tiny": GQA 4/2, byte-level, untied */
	{"llama-tiny", LLAMA(2, 64, 4, 2, 176, 256, 256, 10000.0, 1e-5, 1)},
	/* HuggingFaceTB/SmolLM-135M's config.json (tied, theta 1e4, eps 1e-5, 2048 positions) */
	{"smollm-135m", LLAMA(30, 576, 9, 3, 1536, 2048, 49152, 10000.0, 1e-5, 0)},
};

int eng_config_preset(const char *name, eng_config *cfg, eng_err *err)
{
	for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
		if (strcmp(presets[i].name, name) == 0) {
			*cfg = presets[i].cfg;
			return 0;
		}
	}
	return eng_errf(err, "unknown model preset '%.64s' (known: tiny, mini, gpt2-small, gpt2, "
			     "llama-tiny, smollm-135m)", name);
}

static const char *const arch_names[] = {"gpt2", "llama"};

const char *eng_arch_name(eng_arch a)
{
	return (unsigned)a < 2 ? arch_names[a] : "?";
}

int eng_arch_parse(const char *s, eng_arch *a)
{
	for (int i = 0; i < 2; i++)
		if (strcmp(s, arch_names[i]) == 0) {
			*a = (eng_arch)i;
			return 0;
		}
	return -1;
}

/* The Llama fields' checks */
static int validate_llama(const eng_config *c, const char *what, eng_err *err)
{
	if (c->n_kv_head < 1 || c->n_kv_head > c->n_head || c->n_head % c->n_kv_head != 0)
		return eng_errf(err, "%s: n_kv_head %d must divide n_head %d", what, c->n_kv_head,
			c->n_head);
	if (c->intermediate_size < 1 || c->intermediate_size > ENG_MAX_FFN)
		return eng_errf(err, "%s: intermediate_size %d out of range 1..%d", what,
			c->intermediate_size, ENG_MAX_FFN);
	if (!(c->rope_theta > 0.0 && c->rope_theta < 1e12))
		return eng_errf(err, "%s: rope_theta %g must be positive (and below 1e12)", what,
			c->rope_theta);
	if (!(c->rms_norm_eps > 0.0 && c->rms_norm_eps < 1.0))
		return eng_errf(err, "%s: rms_norm_eps %g must be in (0, 1)", what, c->rms_norm_eps);
	if ((c->n_embd / c->n_head) % 2 != 0)
		return eng_errf(err, "%s: head_dim %d (n_embd / n_head) must be even for rotary "
				     "embeddings", what, c->n_embd / c->n_head);
	return 0;
}

int eng_config_validate(const eng_config *c, const char *what, eng_err *err)
{
	if (c->arch != ENG_ARCH_GPT2 && c->arch != ENG_ARCH_LLAMA)
		return eng_errf(err, "%s: unknown architecture %d", what, (int)c->arch);
	if (c->n_layer < 1 || c->n_layer > ENG_MAX_LAYERS)
		return eng_errf(err, "%s: n_layer %d out of range 1..%d", what, c->n_layer,
			ENG_MAX_LAYERS);
	if (c->n_embd < 1 || c->n_embd > ENG_MAX_EMBD)
		return eng_errf(err, "%s: n_embd %d out of range 1..%d", what, c->n_embd,
			ENG_MAX_EMBD);
	if (c->n_head < 1 || c->n_head > c->n_embd)
		return eng_errf(err, "%s: n_head %d out of range 1..n_embd (%d)", what, c->n_head,
			c->n_embd);
	if (c->n_embd % c->n_head != 0)
		return eng_errf(err, "%s: n_embd %d is not a multiple of n_head %d", what,
			c->n_embd, c->n_head);
	if (c->n_positions < 1 || c->n_positions > ENG_MAX_POSITIONS)
		return eng_errf(err, "%s: n_positions %d out of range 1..%d", what,
			c->n_positions, ENG_MAX_POSITIONS);
	if (c->vocab_size < 1 || c->vocab_size > ENG_MAX_VOCAB)
		return eng_errf(err, "%s: vocab_size %d out of range 1..%d", what, c->vocab_size,
			ENG_MAX_VOCAB);
	eng_lora_unit u[ENG_LORA_UNITS];
	unsigned known = (1u << eng_lora_units(c, u)) - 1;
	if (c->lora_r && (c->lora_r < 1 || c->lora_r > ENG_LORA_MAX_R || !c->lora_units ||
			     (c->lora_units & ~known) || !(c->lora_alpha > 0.0 && c->lora_alpha < 1e6)))
		return eng_errf(err, "%s: LoRA r %d (1..%d), alpha %g (positive) and its targets", what,
			c->lora_r, ENG_LORA_MAX_R, c->lora_alpha);
	if (eng_quant_validate(c, what, err) < 0)
		return -1;
	return c->arch == ENG_ARCH_LLAMA ? validate_llama(c, what, err) : 0;
}

int eng_config_kv_heads(const eng_config *c)
{
	return c->arch == ENG_ARCH_LLAMA ? c->n_kv_head : c->n_head;
}

int eng_config_qkv(const eng_config *c)
{
	return (c->n_head + 2 * eng_config_kv_heads(c)) * (c->n_embd / c->n_head);
}

int eng_config_ffn(const eng_config *c)
{
	return c->arch == ENG_ARCH_LLAMA ? c->intermediate_size : 4 * c->n_embd;
}

int eng_config_ffn_in(const eng_config *c)
{
	return c->arch == ENG_ARCH_LLAMA ? 2 * c->intermediate_size : 4 * c->n_embd;
}

size_t eng_config_big_width(const eng_config *c)
{
	return c->arch == ENG_ARCH_LLAMA ? (size_t)eng_config_ffn_in(c) + eng_config_ffn(c)
					 : 4 * (size_t)c->n_embd;
}

int eng_config_tied(const eng_config *c)
{
	return c->arch != ENG_ARCH_LLAMA || !c->untied;
}

size_t eng_config_num_params(const eng_config *c)
{
	size_t L = c->n_layer, C = c->n_embd, V = c->vocab_size, P = c->n_positions;
	size_t W = eng_config_qkv(c), F = eng_config_ffn(c), Fi = eng_config_ffn_in(c);
	if (c->arch == ENG_ARCH_LLAMA) /* two RMSNorms, q|k|v, o, gate|up, down */
		return V * C * (eng_config_tied(c) ? 1 : 2) + C +
		       L * (2 * C + C * W + C * C + C * Fi + F * C);
	size_t per_block = 2 * C + C * W + W + C * C + C + 2 * C + C * F + F + F * C + C;
	return V * C + P * C + L * per_block + 2 * C;
}

/* ---- LoRA units ---- */

int eng_lora_units(const eng_config *c, eng_lora_unit *out)
{
	int C = c->n_embd, hs = C / c->n_head, A = c->n_head * hs, KV = eng_config_kv_heads(c) * hs;
	int I = c->intermediate_size, n = 0;
	if (c->arch == ENG_ARCH_LLAMA) {
		out[n++] = (eng_lora_unit){"self_attn.q_proj", 0, 0, A, C};
		out[n++] = (eng_lora_unit){"self_attn.k_proj", 0, A, KV, C};
		out[n++] = (eng_lora_unit){"self_attn.v_proj", 0, A + KV, KV, C};
		out[n++] = (eng_lora_unit){"self_attn.o_proj", 1, 0, C, A};
		out[n++] = (eng_lora_unit){"mlp.gate_proj", 2, 0, I, C};
		out[n++] = (eng_lora_unit){"mlp.up_proj", 2, I, I, C};
		out[n++] = (eng_lora_unit){"mlp.down_proj", 3, 0, C, I};
		return n;
	}
	out[n++] = (eng_lora_unit){"attn.c_attn", 0, 0, 3 * C, C};
	out[n++] = (eng_lora_unit){"attn.c_proj", 1, 0, C, C};
	out[n++] = (eng_lora_unit){"mlp.c_fc", 2, 0, 4 * C, C};
	out[n++] = (eng_lora_unit){"mlp.c_proj", 3, 0, C, 4 * C};
	return n;
}

int eng_lora_targets(const eng_config *c, const char *const *names, int n, unsigned *units,
	eng_err *err)
{
	eng_lora_unit u[ENG_LORA_UNITS];
	int nu = eng_lora_units(c, u);
	*units = 0;
	for (int k = 0; k < n; k++) {
		size_t len = strlen(names[k]);
		unsigned hit = 0;
		for (int i = 0; i < nu; i++) {
			size_t ml = strlen(u[i].module);
			if (strcmp(u[i].module, names[k]) == 0 ||
				(ml > len && u[i].module[ml - len - 1] == '.' &&
					strcmp(u[i].module + ml - len, names[k]) == 0))
				hit |= 1u << i;
		}
		if (!hit) {
			char list[160] = "";
			size_t used = 0;
			for (int i = 0; i < nu && used < sizeof list; i++)
				used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
					i ? ", " : "", strchr(u[i].module, '.') + 1);
			return eng_errf(err, "LoRA target '%.64s' names no weight of a %s block (%s)",
				names[k], eng_arch_name(c->arch), list);
		}
		*units |= hit;
	}
	return 0;
}

int eng_lora_count(const eng_config *c)
{
	return c->lora_r ? __builtin_popcount(c->lora_units) : 0;
}

float eng_lora_scale(const eng_config *c)
{
	return c->lora_r ? (float)(c->lora_alpha / c->lora_r) : 0.0f;
}

/* ---- quantization settings ---- */

const char *const eng_quant_names[] = {"none", "nf4", "fp4", NULL};

int eng_quant_validate(const eng_config *c, const char *what, eng_err *err)
{
	int b = c->quant_block;
	if (c->quant == ENG_QUANT_NONE)
		return c->quant_dq || c->quant_bf16 || b
			? eng_errf(err, "%s: quantization settings without a quantization type",
				  what)
			: 0;
	if (c->quant != ENG_QUANT_NF4 && c->quant != ENG_QUANT_FP4)
		return eng_errf(err, "%s: unknown quantization type %d", what, c->quant);
	if (b < ENG_QUANT_BLOCK_MIN || b > ENG_QUANT_BLOCK_MAX || (b & (b - 1)))
		return eng_errf(err, "%s: quantization block size %d is not a power of two in "
				     "%d..%d (bitsandbytes' 4-bit blocks; QLoRA's is %d)", what, b,
			ENG_QUANT_BLOCK_MIN, ENG_QUANT_BLOCK_MAX, ENG_QUANT_BLOCK);
	if ((c->quant_dq != 0 && c->quant_dq != 1) || (c->quant_bf16 != 0 && c->quant_bf16 != 1))
		return eng_errf(err, "%s: quantization flags out of range", what);
	return 0;
}

void eng_config_opt_part(size_t ngrad, int parts, int r, size_t *lo, size_t *hi)
{
	if (parts <= 1) {
		*lo = 0;
		*hi = ngrad;
		return;
	}
	if (parts > ENG_OPT_SLICES) { /* an even split: a sum of ranks that is not sharded */
		*lo = ngrad * (size_t)r / (size_t)parts;
		*hi = ngrad * (size_t)(r + 1) / (size_t)parts;
		return;
	}
	int s0, s1;
	eng_config_opt_slices(parts, r, &s0, &s1);
	*lo = ngrad * (size_t)s0 / ENG_OPT_SLICES; /* kn_sumsq_cut */
	*hi = ngrad * (size_t)s1 / ENG_OPT_SLICES;
}

void eng_config_opt_slices(int parts, int r, int *s0, int *s1)
{
	*s0 = ENG_OPT_SLICES * r / parts;
	*s1 = ENG_OPT_SLICES * (r + 1) / parts;
}

size_t eng_config_opt_floats(const eng_config *c, size_t ngrad)
{
	size_t most = 0, lo, hi;
	for (int r = 0; r < (c->opt_shards > 1 ? c->opt_shards : 1); r++) {
		eng_config_opt_part(ngrad, c->opt_shards, r, &lo, &hi);
		most = hi - lo > most ? hi - lo : most;
	}
	return most;
}
