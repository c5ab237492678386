/* eng_import.h - weights from other programs' files into a model (see eng_import.c). */
#ifndef ENG_IMPORT_H
#define ENG_IMPORT_H

#include "eng_err.h"
#include "eng_model.h"

/* Copies tensors from a model.safetensors into m, checking names and shapes against m's
 * table; lm_head.weight (tied) and GPT-2's attention-mask buffers are skipped. */
int eng_model_load_safetensors(eng_model *m, const char *path, eng_err *err);

#endif
