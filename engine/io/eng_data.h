/* eng_data.h - token data in llm.c's order (design.md §5), read a batch at a time.
 *
 * Formats: `llmc`, llm.c's token files (dev/data/data_common.py): a header of 256
 * little-endian int32 (magic, version, token count), then the tokens: magic 20240520
 * version 1 holds uint16 tokens (GPT-2's), magic 20240801 version 7 uint32 tokens (Llama
 * 3's, for vocabularies over 65,536). The count is header[2] read unsigned, with header[3]
 * its high word: llm.c writes 0 there (its files hold under 2^31 tokens), remat's files
 * may hold more. `bytes`: any file, one token a byte.
 *
 * A file is never read whole. Each batch's B*T+1 tokens are read with pread (as llm.c's
 * DataLoader fseeks and freads each batch) into a buffer of one sample, checked against
 * the vocabulary there (the kernels never see an id out of range) and widened to uint32;
 * the kernel is asked for the next sample ahead of time (posix_fadvise: SEQUENTIAL in file
 * order, WILLNEED on the next sample when shuffled). What data holds in memory is that
 * buffer and, shuffled, the permutation (4 bytes a sample): a few batches whatever the
 * file's size. The page cache holds what was read, counted by the kernel, not in this
 * process's RSS. A file that changes under a run fails the read with a message, where a
 * mapping of it would take SIGBUS.
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

#define ENG_LLMC_MAGIC 20240520     /* version 1: uint16 tokens */
#define ENG_LLMC_MAGIC_U32 20240801 /* version 7: uint32 tokens */
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

/* A token file as its header says. */
typedef struct eng_data_file {
	size_t ntok;      /* tokens in it */
	int width;        /* bytes a token: 1 (bytes), 2 or 4 (llmc) */
	size_t first;     /* the first token's offset: the header's size */
} eng_data_file;

typedef struct eng_data {
	int open;         /* 0: never opened, or closed (a zeroed struct is closed) */
	int fd;
	char path[ENG_PATH_LEN]; /* for messages */
	eng_data_format fmt;
	eng_data_file file;
	int vocab;        /* every token read is under it */
	uint8_t *raw;     /* one sample's tokens as the file holds them (ENG_MEM_DATA) */
	size_t ntok;      /* file.ntok */
	size_t nsamples;  /* (ntok - 1) / (ranks*B*T) */
	int B, T;
	int ranks, rank;  /* data parallel: a sample is ranks micro-batches, this rank's the
			   * rank-th (1 and 0 alone) */
	int shuffle;
	uint32_t *perm;   /* shuffled: this epoch's order of the nsamples (ENG_MEM_DATA) */
	eng_mt live;      /* shuffled: the generator after this epoch's permutation */
	eng_data_pos pos;
} eng_data;

/* Bytes eng_data_open holds for file f: a sample's buffer, and shuffled the permutation. */
size_t eng_data_bytes(const eng_data_file *f, int B, int T, int shuffle);

/* Opens path, keeping the descriptor; fails with a message naming the file on a short or
 * bad header, a count that disagrees with the file's size, or fewer than B*T+1 tokens (a
 * token >= vocab fails the read that meets it; eng_data_check reads them all). */
int eng_data_open(eng_data *d, const char *path, eng_data_format fmt, int vocab, int B, int T,
	eng_err *err);
/* 1 when d is open (a val file the spec gave), 0 else. */
int eng_data_opened(const eng_data *d);
void eng_data_close(eng_data *d); /* safe on a zeroed struct */

/* Tokens first .. first+n-1 (n at most B*T+1), checked and widened into tok (NULL: only
 * checked, left raw in d->raw): 0, or -1 naming the file and the token or the read. */
int eng_data_read(eng_data *d, size_t first, size_t n, uint32_t *tok, eng_err *err);

/* eng_data_open's checks and every token under vocab, read a chunk at a time: what a
 * job's validation needs; the file's count and width in *f. */
int eng_data_check(const char *path, eng_data_format fmt, int B, int T, int vocab,
	eng_data_file *f, eng_err *err);

/* Data parallel, llm.c's process_rank layout: a sample is `ranks` consecutive micro-batches
 * of B*T, rank r reading the r-th (tokens [(i*ranks + r)*B*T, +B*T+1) of sample i), so that
 * ranks of batch B together read what one process with grad_accum `ranks` reads; shuffled,
 * the same permutation (of the fewer, longer samples) on every rank. At open, before any
 * batch; fails when the file holds no whole sample of ranks*B*T+1 tokens. */
int eng_data_set_ranks(eng_data *d, int ranks, int rank, eng_err *err);

/* From file order to llm.c's shuffled order, seeded with seed, at the first epoch's start
 * (at open, before any batch). Fails only out of memory. */
int eng_data_shuffle(eng_data *d, uint32_t seed, eng_err *err);

/* Reads the next batch into inp and tgt (B*T each) and advances: past the last sample of
 * an epoch the next begins, shuffled with a new permutation. -1 (nothing advanced) when
 * the read fails or meets a token >= vocab, with a message. */
int eng_data_next(eng_data *d, uint32_t *inp, uint32_t *tgt, eng_err *err);

/* Back to (or on to) position p, as taken from d->pos earlier in this run or from a
 * checkpoint of a run on the same file and batch shape; the caller has checked that
 * p.sample < nsamples. */
void eng_data_seek(eng_data *d, const eng_data_pos *p);

/* The sample the next batch reads (its index in the file): what a checkpoint records as
 * its cursor, the token offset being that times B*T. */
size_t eng_data_next_sample(const eng_data *d);

#endif
