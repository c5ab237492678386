/* eng_data.h - token data in llm.c's order (DESIGN §5).
 *
 * Loads a whole file of tokens into memory (category data): `llmc` shards (a header of 256
 * little-endian int32: 20240520, version 1, token count; then uint16 tokens) or `bytes`
 * (any file, one token per byte). Every token is checked against the vocabulary at load,
 * so the kernels never see an id out of range. Batches: a cursor starts at 0; each batch
 * reads tokens[cur : cur + B*T + 1], inputs the first B*T, targets the same shifted by one;
 * then cur += B*T, and when cur + B*T + 1 > ntok the cursor returns to 0.
 */
#ifndef ENG_DATA_H
#define ENG_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "eng_err.h"
#include "eng_spec.h"

#define ENG_LLMC_MAGIC 20240520
#define ENG_LLMC_HEADER_INTS 256

typedef struct eng_data {
	uint16_t *tok;  /* ntok tokens (ENG_MEM_DATA) */
	size_t ntok;
	size_t cursor;  /* index of the next batch's first token */
	int B, T;
} eng_data;

/* Loads path; fails with a message naming the file on a short or bad header, a count that
 * disagrees with the file's size, fewer than B*T+1 tokens, or a token >= vocab. */
int eng_data_open(eng_data *d, const char *path, eng_data_format fmt, int vocab, int B, int T,
	eng_err *err);
void eng_data_close(eng_data *d); /* safe on a zeroed struct */

/* eng_data_open's checks without keeping the tokens (the file, its header, its size, one
 * batch at least, every token under vocab, read a chunk at a time): what a job's
 * validation needs; the token count in *ntok. */
int eng_data_check(const char *path, eng_data_format fmt, int B, int T, int vocab,
	size_t *ntok, eng_err *err);

/* Copies the next batch into inp and tgt (B*T each) and advances the cursor. */
void eng_data_next(eng_data *d, uint16_t *inp, uint16_t *tgt);

#endif
