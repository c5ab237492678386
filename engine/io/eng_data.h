/* eng_data.h - token data in llm.c's order (DESIGN §5).
 *
 * Loads a whole file of tokens into memory (category data): `llmc` shards (a header of 256
 * little-endian int32: 20240520, version 1, token count; then uint16 tokens) or `bytes`
 * (any file, one token per byte). Every token is checked against the vocabulary at load,
 * so the kernels never see an id out of range.
 *
 * Batches are llm.c's samples (llmc/dataloader.h): the file holds nsamples = (ntok - 1) /
 * (B*T) of them (data parallel: of ranks*B*T, eng_data_set_ranks), sample i being
 * tokens[i*B*T : i*B*T + B*T + 1] (inputs the first B*T,
 * targets the same shifted by one; the tokens past the last whole sample are never read).
 * An epoch serves every sample once: in file order, or, shuffled, in the order of a
 * permutation drawn afresh each epoch exactly as llm.c draws it: one MT19937 (seeded with
 * shuffle_seed, llm.c's 42 + rank), a Fisher-Yates pass from the top (for i = n-1 .. 1, j =
 * draw % (i+1), swap) over the identity, n-1 draws an epoch. Unshuffled, this is the order
 * of llm.c's older cursor too (cur += B*T, back to 0 when cur + B*T + 1 > ntok).
 */
#ifndef ENG_DATA_H
#define ENG_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "eng_err.h"
#include "eng_spec.h"

#define ENG_LLMC_MAGIC 20240520
#define ENG_LLMC_HEADER_INTS 256

#define ENG_MT_N 624

/* MT19937 (the 32-bit Mersenne Twister, as C++'s std::mt19937 and llm.c's rand.h). */
typedef struct eng_mt {
	uint32_t s[ENG_MT_N];
	int i; /* words of s used; ENG_MT_N: the next draw twists */
} eng_mt;

void eng_mt_seed(eng_mt *g, uint32_t seed);
uint32_t eng_mt_next(eng_mt *g);

/* Where a run is in its data: all a checkpoint needs to take the next batch as the run
 * would have. */
typedef struct eng_data_pos {
	uint64_t epoch;   /* epochs begun before this one (0 in the first) */
	size_t sample;    /* samples of this epoch already served */
	eng_mt rng;       /* shuffled: the generator as it was before this epoch's permutation
			   * was drawn (the permutation, and the generator after it, follow) */
} eng_data_pos;

typedef struct eng_data {
	uint32_t *tok;    /* ntok tokens (ENG_MEM_DATA) */
	size_t ntok;
	size_t nsamples;  /* (ntok - 1) / (ranks*B*T) */
	int B, T;
	int ranks, rank;  /* data parallel: a sample is ranks micro-batches, this rank's the
			   * rank-th (1 and 0 alone) */
	int shuffle;
	uint32_t *perm;   /* shuffled: this epoch's order of the nsamples (ENG_MEM_DATA) */
	eng_mt live;      /* shuffled: the generator after this epoch's permutation */
	eng_data_pos pos;
} eng_data;

/* Bytes eng_data_open holds for a file of ntok tokens: the tokens, and shuffled the
 * permutation. */
size_t eng_data_bytes(size_t ntok, int B, int T, int shuffle);

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

/* Data parallel, llm.c's process_rank layout: a sample is `ranks` consecutive micro-batches
 * of B*T, rank r reading the r-th (tokens [(i*ranks + r)*B*T, +B*T+1) of sample i), so that
 * ranks of batch B together read what one process with grad_accum `ranks` reads; shuffled,
 * the same permutation (of the fewer, longer samples) on every rank. At open, before any
 * batch; fails when the file holds no whole sample of ranks*B*T+1 tokens. */
int eng_data_set_ranks(eng_data *d, int ranks, int rank, eng_err *err);

/* From file order to llm.c's shuffled order, seeded with seed, at the first epoch's start
 * (at open, before any batch). Fails only out of memory. */
int eng_data_shuffle(eng_data *d, uint32_t seed, eng_err *err);

/* Copies the next batch into inp and tgt (B*T each) and advances: past the last sample of
 * an epoch the next begins, shuffled with a new permutation. */
void eng_data_next(eng_data *d, uint32_t *inp, uint32_t *tgt);

/* Back to (or on to) position p, as taken from d->pos earlier in this run or from a
 * checkpoint of a run on the same file and batch shape; the caller has checked that
 * p.sample < nsamples. */
void eng_data_seek(eng_data *d, const eng_data_pos *p);

/* The sample the next batch reads (its index in the file): what a checkpoint records as
 * its cursor, the token offset being that times B*T. */
size_t eng_data_next_sample(const eng_data *d);

#endif
