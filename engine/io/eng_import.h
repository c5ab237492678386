/* eng_import.h - weights from other programs' files into a model, and out to llm.c's format
 * (see eng_import.c: a model's own files; eng_import_from.c: the choice between a model
 * and adapters, and the export).
 *
 * What model.init_from may name, and so what eng_import_read_config / eng_import_load take:
 *   - a directory holding config.json and model.safetensors: a checkpoint of this engine or a
 *     Hugging Face GPT-2 as transformers saves it; or config.json,
 *     model.safetensors.index.json and the shards it names, as save_pretrained writes a model
 *     past its max_shard_size;
 *   - a regular file: an llm.c model file (eng_llmc.h), its shape read from its header.
 */
#ifndef ENG_IMPORT_H
#define ENG_IMPORT_H

#include "eng_config.h"
#include "eng_err.h"
#include "eng_model.h"

/* Copies tensors from a Hugging Face GPT-2 model.safetensors into m, checking names, shapes
 * and count against m's table. Names may carry the "transformer." prefix (GPT2LMHeadModel)
 * or not (GPT2Model), but one file may not mix the two. Dtypes F32, F16 and BF16 (widened
 * exactly by eng_st). Skipped: lm_head.weight (tied to wte; its shape must be wte's) and
 * the h.N.attn.bias / h.N.attn.masked_bias buffers older transformers saved. A missing
 * tensor, an unknown one, a wrong shape: -1 with a message naming the file and the tensor;
 * on failure m's weights may be partly overwritten. */
int eng_model_load_safetensors(eng_model *m, const char *path, eng_err *err);

/* 1 when `from` is a regular file (so init_from means an llm.c model file: its header
 * decides whether it is one), 0 otherwise (a checkpoint directory, or nothing). */
int eng_import_is_file(const char *from);

/* `from` is there to be read, as model.init_from: a directory this user may list, or a
 * regular file. 0, or -1 with a message naming the path as given: "model.init_from '/x':
 * no such directory (nor a model file)", "...: Permission denied", "...: Not a directory",
 * "...: it is a FIFO, neither a checkpoint directory nor a model file". */
int eng_import_exists(const char *from, eng_err *err);

/* The shape of the model `from` names: its config.json (eng_hfconfig_read) or its llm.c
 * header (eng_llmc_read_config). 0, or -1 with a message naming the file. */
int eng_import_read_config(const char *from, eng_config *cfg, eng_err *err);

/* Loads the weights `from` names into m (of the shape eng_import_read_config gave):
 * <from>/model.safetensors (eng_model_load_safetensors), or when it is absent the shards of
 * <from>/model.safetensors.index.json (each a plain file name of the directory, a symlink
 * followed as for model.safetensors, holding exactly the tensors the index maps to it, read
 * and freed one at a time), or the llm.c file itself (eng_model_load_llmc). 0, or -1 with a
 * message naming the file. */
int eng_import_load(eng_model *m, const char *from, eng_err *err);

/* What eng_import_load would check of the weights `from` names, for a model of shape cfg
 * (the run's, after eng_spec_finish), without reading them: each safetensors file's header
 * (eng_st_read_header: the length, the JSON, dtypes, shapes, offsets within the file's
 * length, the tiling), its tensors' names and shapes against cfg's table, each shard of a
 * sharded model against its index, every tensor present; an adapter directory's base the
 * same way. Files are opened as the load opens them (a FIFO or a device refused without
 * blocking; an unreadable file named). An llm.c file: nothing past its header, which
 * eng_import_read_config read. remat-train --check's way to refuse at job-start what the
 * start would. 0, or -1 with the load's message. */
int eng_import_check(const char *from, const eng_config *cfg, eng_err *err);

/* The same for a base model only (never an adapter directory: eng_peft.h's, whose base
 * these read). */
int eng_import_base_config(const char *from, eng_config *cfg, eng_err *err);
int eng_import_base_load(eng_model *m, const char *from, eng_err *err);
int eng_import_base_check(const char *from, const eng_config *cfg, eng_err *err);

/* remat-train --export-llmc: loads the model `from` names (as above) and writes it to `out`
 * as an llm.c model file of `version` (ENG_LLMC_F32 or ENG_LLMC_BF16) with
 * eng_model_save_llmc. The model is built for one token, so the memory is the parameters'
 * (gradient and moment buffers are mapped but never touched). 0, or -1 with a message. */
int eng_export_llmc(const char *from, const char *out, int version, eng_err *err);

#endif
