/* eng_spec_int.h - what the pieces of the job spec's parser share (eng_spec.h): the limits,
 * the typed readers of its JSON values with messages that name each key by its path
 * (eng_spec_get.c), and the sections' parse (eng_spec_parse.c) that eng_spec.c calls. Not
 * for use outside engine/core/eng_spec*.c.
 */
#ifndef ENG_SPEC_INT_H
#define ENG_SPEC_INT_H

#include <jansson.h>
#include <stddef.h>

#include "eng_err.h"
#include "eng_spec.h"

#define SPEC_MAX_BATCH 65536          /* B: far past any CPU or one-GPU batch */
#define SPEC_MAX_ACCUM ENG_MAX_ACCUM  /* grad_accum */
#define SPEC_MAX_SAMPLE 4096          /* sample.tokens: ENG_SAMPLE_MAX_TOKENS */
#define SPEC_LLMC_SHUFFLE_SEED 42     /* llm.c's shuffle seed, 42 + rank */
#define SPEC_MAX_SEQ 65536            /* T: as long as ENG_MAX_POSITIONS */
#define SPEC_MAX_STEPS 1000000000     /* steps, save.every and schedule.warmup */
#define SPEC_MAX_CHUNK_ROWS (1 << 20) /* remat.chunk_rows */
#define SPEC_MAX_THREADS 256          /* threads; also caps the default */
#define SPEC_DEFAULT_SEQ 256          /* seq_len when the spec gives none (or n_positions) */
#define SPEC_MAX_FILE (64 << 20)      /* a spec file larger than this is a wrong path */
#define SPEC_KEY_SHOW 64              /* characters of an outside key quoted in a message */
#define SPEC_PATH_LEN 64              /* "schedule.min_lr_frac": our own keys only */

/* The typed readers of one value of obj (prefix: obj's path, "" at the root), each
 * described above its definition in eng_spec_get.c: most return 1 when the key is present
 * and read into out, 0 when absent (out untouched), -1 with a message naming the key by its
 * path when its type or range is wrong. */
const char *es_field(char buf[SPEC_PATH_LEN], const char *prefix, const char *key);
int es_check_keys(json_t *obj, const char *prefix, const char *const *known, eng_err *err);
int es_get_object(json_t *obj, const char *key, json_t **out, eng_err *err);
int es_get_section(json_t *root, const char *key, const char *const *keys, json_t **out,
	eng_err *err);
int es_get_int64(json_t *obj, const char *prefix, const char *key, long long lo,
	long long hi, long long *out, eng_err *err);
int es_get_int(json_t *obj, const char *prefix, const char *key, int lo, int hi, int *out,
	eng_err *err);
int es_get_float(json_t *obj, const char *prefix, const char *key, double lo, int lo_open,
	double hi, int hi_open, float *out, eng_err *err);
int es_get_str(json_t *obj, const char *prefix, const char *key, char *dst, size_t cap,
	eng_err *err);
int es_get_choice(json_t *v, const char *path, const char *const *names, int *out,
	eng_err *err);
int es_get_real(json_t *obj, const char *prefix, const char *key, double lo, double hi,
	double *out, eng_err *err);
int es_get_str_list(json_t *list, const char *path, const char *what, int min, int max,
	size_t width, char *out, int *n, eng_err *err);

/* B*T tokens per step (and B*T*V logits) are counted in int further on: 0, or -1 when
 * batch x seq_len is over INT_MAX (eng_spec_parse.c). */
int es_check_tokens(const eng_spec *s, eng_err *err);

/* Every section of the spec's JSON root into s (defaults already set), in a fixed order
 * (eng_spec_parse.c). 0, or -1 with the first problem found. */
int es_parse_root(eng_spec *s, json_t *root, eng_err *err);

#endif
