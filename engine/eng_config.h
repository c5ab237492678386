/* eng_config.h - the architecture of a GPT-2-family model, and the named presets.
 *
 * Only the shape: n_layer, n_embd, n_head, n_positions, vocab_size. Everything else about
 * the architecture is fixed by DESIGN §5 (pre-LayerNorm, tanh GELU, learned positions, tied
 * lm_head, LayerNorm eps 1e-5, MLP width 4*n_embd).
 */
#ifndef ENG_CONFIG_H
#define ENG_CONFIG_H

#include "eng_err.h"

#define ENG_MAX_LAYERS 128      /* more layers than any GPT-2 shape this engine serves */
#define ENG_MAX_EMBD 8192       /* upper bound on n_embd accepted from outside */
#define ENG_MAX_VOCAB (1 << 20) /* upper bound on vocab_size accepted from outside */
#define ENG_MAX_POSITIONS 65536 /* upper bound on n_positions accepted from outside */

typedef struct eng_config {
	int n_layer;     /* L, number of transformer blocks */
	int n_embd;      /* C, channels */
	int n_head;      /* NH, attention heads; C % NH == 0 */
	int n_positions; /* P, longest sequence (rows of wpe) */
	int vocab_size;  /* V, rows of wte */
	/* Not the model's but its run's (never in config.json or a checkpoint): 1 under the
	 * CPU's precision bf16, where the matmuls take bf16 operands and their inputs are kept
	 * in bf16 (eng_acts.h `mm`). In the shape so that every size the engine derives from
	 * it (the model's buffers, the planner, the accounting) sees it. */
	int mm_bf16;
} eng_config;

/* Looks up a preset by name ("tiny", "mini", "gpt2-small"; "gpt2" is gpt2-small) into *cfg.
 * Returns 0, or -1 with a message listing the known names. */
int eng_config_preset(const char *name, eng_config *cfg, eng_err *err);

/* Checks that a shape is usable: all positive, within the limits above, C % NH == 0.
 * `what` names the source in the message ("job spec", "config.json 'x'"). */
int eng_config_validate(const eng_config *cfg, const char *what, eng_err *err);

/* Number of float parameters (tied lm_head counted once). */
size_t eng_config_num_params(const eng_config *cfg);

#endif
