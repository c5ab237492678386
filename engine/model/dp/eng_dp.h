/* eng_dp.h - data parallelism over MPI: the ranks of one job and the collectives the trainer
 * and the worker need (design.md §12).
 *
 * Every rank holds the whole model and takes its own micro-batches; their gradients are
 * summed across ranks once a step, so that every rank takes one identical AdamW step. The
 * sum is a reduce-scatter then an all-gather (what a ring all-reduce is): each part of the
 * vector is summed on one rank, in an order fixed by the sizes alone, and copied to the
 * others, so every rank holds the same bits whatever the timing, and with two ranks the sum
 * a + b is a one-process sum's (grad_accum 2). One process outside mpirun is a world of
 * one: every call below is then nothing (or its identity).
 *
 * Built with Open MPI when its headers are there (REMAT_MPI, engine/dp/eng_dp.c), else
 * engine/dp/eng_nodp.c: a world of one, and a clear error under mpirun.
 */
#ifndef ENG_DP_H
#define ENG_DP_H

#include <stddef.h>

#include "eng_err.h"

/* Under mpirun (its environment says so), MPI_Init; else a world of one. Call once, first
 * thing in main. 0, or -1 with a message (a build without MPI under mpirun). */
int eng_dp_init(int *argc, char ***argv, eng_err *err);
void eng_dp_finalize(void);
/* Ends every rank of the job now (MPI_Abort), or the process alone outside mpirun. */
void eng_dp_abort(int status);

int eng_dp_rank(void); /* 0 outside mpirun */
int eng_dp_size(void); /* 1 outside mpirun */
/* This rank's place among the ranks of its machine (0 outside mpirun): which GPU it takes. */
int eng_dp_local_rank(void);
/* The ranks of this rank's machine (1 outside mpirun): they share its processors. */
int eng_dp_local_size(void);
/* "Open MPI v4.1.4, 2 ranks" or "one process" */
const char *eng_dp_describe(void);

/* x(n) <- the sum over ranks of every rank's x(n), the same bits on every rank: the
 * reduce-scatter then the all-gather below. */
int eng_dp_sum_floats(float *x, size_t n, eng_err *err);
/* This rank's part of x(n) (eng_config_opt_part's) <- its sum over ranks (the rest undefined). */
int eng_dp_reduce_scatter(float *x, size_t n, eng_err *err);
/* Every rank's part of x(n) to every rank: x the same bits everywhere after. */
int eng_dp_allgather(float *x, size_t n, eng_err *err);
/* Rank 0's all(n) <- every rank's part, each sent from its mine (hi - lo floats); all is
 * rank 0's alone (the others may pass NULL). */
int eng_dp_gather_parts(const float *mine, size_t n, float *all, eng_err *err);

/* The reduce-scatter of a gradient overlapped with the backward that makes it (PyTorch
 * DDP's buckets): a thread of its own sums x(n), bucket floats at a time from its end, each
 * bucket once the caller has said all of it is final, so that the sum runs while the
 * backward goes on. Each float is summed along a chain of the ranks that ends at its owner
 * (eng_config_opt_part's): ((x[o+1] + x[o+2]) + ...) + x[o], every message 1 MiB, the order
 * fixed by the ranks alone (with 2 ranks a + b, the bits of MPI's sum), whatever the
 * bucket size or the timing. Without a bucket (0), or where MPI gives no
 * MPI_THREAD_SERIALIZED, the same sums run in eng_dp_reducer_finish. Between a round's
 * begin and its finish the calling thread makes no other MPI call. */
typedef struct eng_dp_reducer eng_dp_reducer;
/* Every rank together (it duplicates the communicator); NULL with err when it cannot. */
eng_dp_reducer *eng_dp_reducer_new(size_t bucket, eng_err *err);
/* 1 when its sums run beside the caller (a thread), 0 in eng_dp_reducer_finish */
int eng_dp_reducer_overlaps(const eng_dp_reducer *r);
/* A round over x(n): nothing of it final yet. */
void eng_dp_reducer_begin(eng_dp_reducer *r, float *x, size_t n);
/* x[from, n) is final (from only decreases within a round). */
void eng_dp_reducer_final(eng_dp_reducer *r, size_t from);
/* All of x final; returns once this rank's part is summed: *exposed_ms the time it waited
 * here, *busy_ms the round's time summing (hidden behind the backward: busy - exposed). */
void eng_dp_reducer_finish(eng_dp_reducer *r, double *exposed_ms, double *busy_ms);
void eng_dp_reducer_free(eng_dp_reducer *r);
/* x(n) <- the sum over ranks, for a few doubles (a loss, counts). */
int eng_dp_sum_doubles(double *x, int n, eng_err *err);
/* 1 when flag is non-zero on some rank (every rank calls it). */
int eng_dp_any(int flag);
/* The lowest rank whose `failed` is non-zero, with its *kind (an eng_err_kind) and msg (len
 * bytes) copied to every rank; -1 (both untouched) when none failed. */
int eng_dp_first_failure(int failed, int *kind, char *msg, size_t len);
/* n bytes of rank 0's buf to every rank's. The other ranks wait by polling (sleeping
 * between tests), so that a paused or evaluating rank 0 does not keep them spinning. */
int eng_dp_bcast(void *buf, size_t n, eng_err *err);
/* Rank 0 gets every rank's n bytes of mine in all (size x n), rank order. */
int eng_dp_gather(const void *mine, size_t n, void *all, eng_err *err);

#endif
