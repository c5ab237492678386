/* eng_peft.h - LoRA adapters as Hugging Face PEFT saves them (save_pretrained of a
 * LoraModel): adapter_config.json (LoraConfig's keys) and adapter_model.safetensors, its
 * tensors named "base_model.model." + the weight's module path + ".lora_A.weight" /
 * ".lora_B.weight" (A (r, in), B (out, r), whatever the base layer's layout: GPT-2's Conv1D
 * too, where PEFT sets fan_in_fan_out).
 *
 * What model.init_from may name besides the base models of eng_import.h: such an adapter
 * directory, its base found by base_model_name_or_path (a path, absolute or relative to the
 * adapter directory: a Hub id is not a path and is refused; a path ending in
 * ENG_PEFT_BASE_DIR where the adapter directory has that subdirectory: the copy it carries,
 * wherever the directory has moved).
 */
#ifndef ENG_PEFT_H
#define ENG_PEFT_H

#include <stddef.h>

#include "eng_config.h"
#include "eng_err.h"
#include "eng_fs.h"
#include "eng_model.h"

#define ENG_PEFT_CONFIG "adapter_config.json"
#define ENG_PEFT_WEIGHTS "adapter_model.safetensors"
#define ENG_PEFT_PREFIX "base_model.model."
/* Where a checkpoint that carries its base holds it (config.json, model.safetensors): a
 * directory of its own, with no adapter_config.json (transformers, asked to load a base
 * from a directory that has one, would load the adapters into it too) */
#define ENG_PEFT_BASE_DIR "base"

/* 1 when dir holds adapter_config.json (an adapter directory), 0 otherwise (a file, no
 * directory); the entry looked at through the directory's descriptor, not followed. */
int eng_peft_is_adapter(const char *dir);
int eng_peft_is_adapter_at(const eng_dir *d);

/* Reads dir/adapter_config.json: peft_type "LORA", r, lora_alpha, target_modules (a list:
 * a regex string is refused), base_model_name_or_path into base (resolved against dir);
 * refused: bias other than "none", use_rslora, modules_to_save, DoRA. lora_dropout is read
 * and not applied (remat trains without dropout). Then the base's shape (its config.json)
 * with the adapters on it into *cfg. 0, or -1 with a message naming the file and key. */
int eng_peft_read_config(const char *dir, eng_config *cfg, char *base, size_t baselen,
	eng_err *err);

/* Loads dir/adapter_model.safetensors into m's adapter tensors (F32, F16 or BF16): every one
 * present with its shape, nothing else in the file. 0, or -1 with a message. */
int eng_peft_load(eng_model *m, const char *dir, eng_err *err);

/* Writes the adapters of tensors (the table, ntensors) from params into directory d as PEFT
 * would: adapter_config.json (base_model_name_or_path = base) and adapter_model.safetensors,
 * durably. 0, or -1 with a message. */
int eng_peft_write_at(const eng_dir *d, const eng_config *cfg, const eng_ptensor *tensors,
	int ntensors, const float *params, const char *base, eng_err *err);

/* What a LoRA run's checkpoints record of an external base, to find it unchanged when they
 * are verified: the SHA-256 of its config.json, and the size, inode and modification time
 * of its weights (model.safetensors, or the shards its index names), as a JSON object's
 * text into out. Not the weights' hash: that would read the whole base at every check; a
 * file rewritten in place keeps neither its time nor, mostly, its inode. 0, or -1. */
#define ENG_PEFT_PIN_LEN 192
int eng_peft_base_pin(const eng_dir *base, char *out, size_t outlen, eng_err *err);

/* remat-train --merge-lora: the model `from` names (an adapter directory: its base and its
 * adapters) with every adapter folded into its weight, W += (alpha / r) B A (PEFT's
 * merge_and_unload), written to the directory out (made when missing) as a full Hugging
 * Face checkpoint: config.json (the base's) and model.safetensors (F32). 0, or -1. */
int eng_merge_lora(const char *from, const char *out, eng_err *err);

#endif
