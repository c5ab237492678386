/* eng_hfconfig.h - Hugging Face GPT-2 config.json, read and written.
 *
 * What it is: the architecture half of a checkpoint (design.md §6), in the keys of
 * transformers' GPT2Config, so that GPT2LMHeadModel.from_pretrained loads a saved checkpoint
 * and this engine loads Hugging Face GPT-2 checkpoints.
 * What it is not: a place for run settings. The written file holds the architecture only,
 * never the recompute policy, threads, device or anything else transient, so checkpoints
 * saved under different policies are byte-identical.
 */
#ifndef ENG_HFCONFIG_H
#define ENG_HFCONFIG_H

#include "eng_config.h"
#include "eng_err.h"
#include "eng_fs.h"

/* Reads config.json at path into *cfg. Required integers: n_layer, n_embd, n_head,
 * n_positions ("n_ctx" when n_positions is absent; Hugging Face ignores n_ctx otherwise),
 * vocab_size. Optional keys must agree with what the engine computes (design.md §5):
 * model_type "gpt2"; activation_function "gelu_new" or "gelu_pytorch_tanh"; n_inner null
 * or 4*n_embd; layer_norm_epsilon 1e-5; tie_word_embeddings true; scale_attn_weights true;
 * scale_attn_by_inverse_layer_idx and add_cross_attention false. Other keys (dropout,
 * token ids, task settings) are ignored. Then eng_config_validate. Returns 0, or -1 with a
 * message naming the file and the key; *cfg is written only on success. */
int eng_hfconfig_read(const char *path, eng_config *cfg, eng_err *err);

/* Writes *cfg (validated first) to path as GPT2Config JSON: fixed key order, two-space
 * indent, a trailing newline; durably (eng_fs_write). Returns 0, or -1 with a message; on
 * failure nothing is left behind and an existing file of that name is untouched. */
int eng_hfconfig_write(const char *path, const eng_config *cfg, eng_err *err);
/* The same as d/name (eng_fs_write_at). */
int eng_hfconfig_write_at(const eng_dir *d, const char *name, const eng_config *cfg,
	eng_err *err);

#endif
