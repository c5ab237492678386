/* eng_llmc.h - llm.c's GPT-2 model files (gpt2_124M.bin and the like), read and written.
 *
 * The format, as karpathy/llm.c's train_gpt2.py writes it and train_gpt2.c/.cu read it: a
 * header of 256 little-endian int32 (magic 20240326, version, maxT, V, L, NH, C, Vp, then
 * zeros), then every parameter, float32 (version 3) or bfloat16 (version 5), in llm.c's
 * order (eng_llmc.c lists it). wte has Vp >= V rows; the rows past V are padding.
 *
 * What it is: import of such files into an eng_model (transposing the linear weights from
 * llm.c's (out, in) to this engine's Conv1D (in, out), dropping wte's padding rows) and
 * export of a model to one (padding wte to a multiple of 128 rows with zeros, as llm.c does).
 * The reader trusts nothing in the file: every size in the header is checked against the
 * limits of eng_config and against the file's length before anything is allocated or read.
 * What it is not: llm.c's state files (optimizer, data position) or token files.
 */
#ifndef ENG_LLMC_H
#define ENG_LLMC_H

#include "eng_config.h"
#include "eng_err.h"
#include "eng_model.h"

#define ENG_LLMC_MODEL_MAGIC	   20240326 /* header[0] of an llm.c model file */
#define ENG_LLMC_F32		   3	    /* version: parameters in float32 */
#define ENG_LLMC_BF16		   5	    /* version: parameters in bfloat16 */
#define ENG_LLMC_MODEL_HEADER_INTS 256	    /* int32 in the header (1024 bytes) */
#define ENG_LLMC_VOCAB_ALIGN	   128	    /* the writer pads wte's rows to a multiple of this */

/* Reads the header of the llm.c model file at path into *cfg: n_positions maxT, vocab_size
 * V (the real vocabulary, not the padded Vp), n_layer L, n_head NH, n_embd C. Checks the
 * magic, the version (3 or 5), the shape (eng_config_validate), V <= Vp, and that the file
 * is exactly as long as the header says. Returns 0, or -1 with a message naming the file;
 * *cfg is written only on success. */
int eng_llmc_read_config(const char *path, eng_config *cfg, eng_err *err);

/* Reads the parameters of the llm.c model file at path (version 3 or 5; bfloat16 widened
 * to float32 exactly) into m, whose shape must equal the file's. The same checks as
 * eng_llmc_read_config come first. Returns 0, or -1 with a message naming the file; on
 * failure m's weights may be partly overwritten. */
int eng_model_load_llmc(eng_model *m, const char *path, eng_err *err);

/* Writes m's parameters to path (created or truncated) as an llm.c model file of version
 * ENG_LLMC_F32 or ENG_LLMC_BF16 (float32 rounded to nearest, ties to even; NaN stays NaN),
 * with wte padded to a multiple of ENG_LLMC_VOCAB_ALIGN rows. Flushed and fsync'd before it
 * is closed; the directory is not fsync'd. Returns 0, or -1 with a message; on failure the
 * partial file is removed. */
int eng_model_save_llmc(const eng_model *m, const char *path, int version, eng_err *err);

#endif
