/* eng_config.c - model shapes and presets (see eng_config.h). */
#include "eng_config.h"

#include <string.h>

static const struct {
	const char *name;
	eng_config cfg;
} presets[] = {
	/* name          L   C    NH  P     V */
	{"tiny",       {2,  64,  4,  256,  256, 0}},   /* seconds per hundred steps; byte-level */
	{"mini",       {6,  384, 6,  1024, 50257, 0}}, /* ~30M parameters, between tiny and gpt2 */
	{"gpt2-small", {12, 768, 12, 1024, 50257, 0}}, /* the 124M GPT-2 shape */
	{"gpt2",       {12, 768, 12, 1024, 50257, 0}}, /* Hugging Face's name for the same */
};

int eng_config_preset(const char *name, eng_config *cfg, eng_err *err)
{
	for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
		if (strcmp(presets[i].name, name) == 0) {
			*cfg = presets[i].cfg;
			return 0;
		}
	}
	return eng_errf(err, "unknown model preset '%.64s' (known: tiny, mini, gpt2-small, gpt2)",
		name);
}

int eng_config_validate(const eng_config *c, const char *what, eng_err *err)
{
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
	return 0;
}

size_t eng_config_num_params(const eng_config *c)
{
	size_t L = c->n_layer, C = c->n_embd, V = c->vocab_size, P = c->n_positions;
	size_t per_block = 2 * C + C * 3 * C + 3 * C + C * C + C + 2 * C + C * 4 * C + 4 * C +
			   4 * C * C + C;
	return V * C + P * C + L * per_block + 2 * C;
}
