/* eng_dp.c - eng_dp.h over Open MPI (see eng_dp.h). One communicator, MPI_COMM_WORLD;
 * MPI_THREAD_FUNNELED: only the training thread calls MPI (the control thread of rank 0
 * never does). Errors are MPI's default, fatal: a rank that dies ends the job (mpirun
 * kills the others), which is what a step that can no longer be summed must do. */
#include "eng_dp.h"

#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eng_config.h"
#include "eng_mem.h"
#include "eng_util.h"
#include "kn.h"

#define DP_POLL_NS 200000 /* a waiting rank tests its broadcast this often */

static int dp_on, dp_rank, dp_size = 1, dp_local, dp_local_size = 1, dp_threads;
static int *dp_counts, *dp_displs; /* the all-reduce's parts: allocated at init, so that no
				    * rank can fail to enter it for want of memory */
static char dp_desc[128] = "one process";

int eng_dp_init(int *argc, char ***argv, eng_err *err)
{
	int provided, n = 0, len = 0;
	char ver[MPI_MAX_LIBRARY_VERSION_STRING];
	if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK"))
		return 0; /* not under mpirun: a world of one, MPI never started */
	/* serialized: the training thread, or the reducer's while the training thread waits
	 * for it (eng_dp_reducer) */
	if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
		return eng_errf(err, "MPI_Init_thread failed");
	dp_on = 1;
	dp_threads = provided >= MPI_THREAD_SERIALIZED;
	MPI_Comm_rank(MPI_COMM_WORLD, &dp_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &dp_size);
	MPI_Comm node;
	if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) !=
		MPI_SUCCESS)
		return eng_errf(err, "MPI_Comm_split_type failed");
	MPI_Comm_rank(node, &dp_local);
	MPI_Comm_size(node, &dp_local_size);
	MPI_Comm_free(&node);
	MPI_Get_library_version(ver, &len);
	/* "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4" */
	while (n < len && ver[n] != ',' && ver[n] != '\n')
		n++;
	snprintf(dp_desc, sizeof dp_desc, "%.*s, %d ranks", n, ver, dp_size);
	dp_counts = malloc(2 * (size_t)dp_size * sizeof *dp_counts);
	if (!dp_counts)
		return eng_errf(err, "out of memory for %d ranks", dp_size);
	dp_displs = dp_counts + dp_size;
	return 0;
}

void eng_dp_finalize(void)
{
	if (dp_on)
		MPI_Finalize();
	dp_on = 0;
	free(dp_counts);
	dp_counts = dp_displs = NULL;
}

void eng_dp_abort(int status)
{
	if (dp_on)
		MPI_Abort(MPI_COMM_WORLD, status);
	exit(status);
}

int eng_dp_rank(void)
{
	return dp_rank;
}

int eng_dp_size(void)
{
	return dp_size;
}

int eng_dp_local_rank(void)
{
	return dp_local;
}

int eng_dp_local_size(void)
{
	return dp_local_size;
}

const char *eng_dp_describe(void)
{
	return dp_desc;
}

/* dp_counts and dp_displs: every rank's part of n floats; -1 when one is too long for MPI */
static int parts_of(size_t n, eng_err *err)
{
	if (n > INT_MAX)
		return eng_errf(err, "%zu floats are more than one collective can move", n);
	for (int r = 0; r < dp_size; r++) {
		size_t lo, hi;
		eng_config_opt_part(n, dp_size, r, &lo, &hi);
		dp_counts[r] = (int)(hi - lo);
		dp_displs[r] = (int)lo;
	}
	return 0;
}

int eng_dp_reduce_scatter(float *x, size_t n, eng_err *err)
{
	if (dp_size == 1)
		return 0;
	if (parts_of(n, err) < 0)
		return -1;
	if (MPI_Reduce_scatter(MPI_IN_PLACE, x, dp_counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) !=
		MPI_SUCCESS)
		return eng_errf(err, "MPI_Reduce_scatter failed");
	/* in place, the sum of this rank's part lands at x's start: to its own place */
	memmove(x + dp_displs[dp_rank], x, (size_t)dp_counts[dp_rank] * sizeof *x);
	return 0;
}

int eng_dp_allgather(float *x, size_t n, eng_err *err)
{
	if (dp_size == 1)
		return 0;
	if (parts_of(n, err) < 0)
		return -1;
	if (MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, dp_counts, dp_displs,
		    MPI_FLOAT, MPI_COMM_WORLD) != MPI_SUCCESS)
		return eng_errf(err, "MPI_Allgatherv failed");
	return 0;
}

int eng_dp_sum_floats(float *x, size_t n, eng_err *err)
{
	/* rank r sums part r, then every part goes to every rank */
	return eng_dp_reduce_scatter(x, n, err) < 0 ? -1 : eng_dp_allgather(x, n, err);
}

int eng_dp_gather_parts(const float *mine, size_t n, float *all, eng_err *err)
{
	if (parts_of(n, err) < 0)
		return -1;
	if (dp_size == 1) {
		memcpy(all, mine, n * sizeof *all);
		return 0;
	}
	if (MPI_Gatherv(mine, dp_counts[dp_rank], MPI_FLOAT, all, dp_counts, dp_displs,
		    MPI_FLOAT, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
		return eng_errf(err, "MPI_Gatherv failed");
	return 0;
}

int eng_dp_sum_doubles(double *x, int n, eng_err *err)
{
	if (dp_size == 1)
		return 0;
	/* two ranks: a + b either way; more: MPI's order, the same on every rank for
	 * MPI_Allreduce of this size, which only losses and counts go through */
	if (MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
		return eng_errf(err, "MPI_Allreduce failed");
	return 0;
}

int eng_dp_any(int flag)
{
	int v = flag != 0, any = v;
	if (dp_size > 1)
		MPI_Allreduce(&v, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	return any;
}

int eng_dp_first_failure(int failed, int *kind, char *msg, size_t len)
{
	int me = failed ? dp_rank : INT_MAX, first = me;
	if (dp_size == 1)
		return failed ? 0 : -1;
	MPI_Allreduce(&me, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	if (first == INT_MAX)
		return -1;
	MPI_Bcast(kind, 1, MPI_INT, first, MPI_COMM_WORLD);
	MPI_Bcast(msg, (int)len, MPI_CHAR, first, MPI_COMM_WORLD);
	msg[len - 1] = '\0';
	return first;
}

int eng_dp_bcast(void *buf, size_t n, eng_err *err)
{
	if (dp_size == 1)
		return 0;
	if (n > INT_MAX)
		return eng_errf(err, "a broadcast of %zu bytes", n);
	MPI_Request req;
	int done = 0;
	if (MPI_Ibcast(buf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD, &req) != MPI_SUCCESS)
		return eng_errf(err, "MPI_Ibcast failed");
	struct timespec ts = {0, DP_POLL_NS};
	while (MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done)
		nanosleep(&ts, NULL);
	return done ? 0 : eng_errf(err, "MPI_Test failed");
}

int eng_dp_gather(const void *mine, size_t n, void *all, eng_err *err)
{
	if (dp_size == 1) {
		memcpy(all, mine, n);
		return 0;
	}
	if (n > INT_MAX)
		return eng_errf(err, "a gather of %zu bytes", n);
	if (MPI_Gather(mine, (int)n, MPI_BYTE, all, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD) !=
		MPI_SUCCESS)
		return eng_errf(err, "MPI_Gather failed");
	return 0;
}

/* ---- the overlapped reduce-scatter ---- */

#define RING_CHUNK (256 * 1024) /* floats a message: 1 MiB */
#define RING_TAG 7301

struct eng_dp_reducer {
	MPI_Comm comm;           /* its own: its messages never meet the collectives' */
	float *tmp;              /* RING_CHUNK floats received (ENG_MEM_GRADS) */
	size_t bucket;           /* floats a bucket; 0: all at once, in finish */
	int threaded;            /* th runs the rounds */
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* the round, under mu */
	float *x;
	size_t n, final_from;    /* x[final_from, n) is final */
	int begun, done, quit;
	double busy_ms;
};

/* x[c, c + k) of owner o's part: received from the rank before this one in the chain
 * o+1 .. o and added, then sent to the next (the owner keeps the sum) */
static void chain_chunk(eng_dp_reducer *r, float *x, int o, size_t c, size_t k)
{
	int pos = (dp_rank - o - 1 + 2 * dp_size) % dp_size;
	int next = (dp_rank + 1) % dp_size, prev = (dp_rank - 1 + dp_size) % dp_size;
	if (pos > 0) {
		MPI_Recv(r->tmp, (int)k, MPI_FLOAT, prev, RING_TAG, r->comm, MPI_STATUS_IGNORE);
		kn_add_here(x + c, r->tmp, k);
	}
	if (pos < dp_size - 1)
		MPI_Send(x + c, (int)k, MPI_FLOAT, next, RING_TAG, r->comm);
}

/* x[lo, hi) summed on its owners, 1 MiB at a time, owner by owner */
static void chain_span(eng_dp_reducer *r, float *x, size_t n, size_t lo, size_t hi)
{
	for (int o = 0; o < dp_size; o++) {
		size_t a, b;
		eng_config_opt_part(n, dp_size, o, &a, &b);
		a = a > lo ? a : lo;
		b = b < hi ? b : hi;
		for (size_t c = a; c < b; c += RING_CHUNK)
			chain_chunk(r, x, o, c, b - c < RING_CHUNK ? b - c : RING_CHUNK);
	}
}

/* A round: the buckets from x's end, each once final (mu held on entry and on return) */
static void round_run(eng_dp_reducer *r)
{
	size_t hi = r->n;
	while (hi > 0) {
		/* the same buckets on every rank, whatever the timing */
		size_t lo = r->bucket && hi > r->bucket ? hi - r->bucket : 0;
		while (r->final_from > lo)
			pthread_cond_wait(&r->cv, &r->mu);
		pthread_mutex_unlock(&r->mu);
		double t0 = eng_now_ms();
		chain_span(r, r->x, r->n, lo, hi);
		pthread_mutex_lock(&r->mu);
		r->busy_ms += eng_now_ms() - t0;
		hi = lo;
	}
	r->done = 1;
	pthread_cond_broadcast(&r->cv);
}

static void *reducer_main(void *arg)
{
	eng_dp_reducer *r = arg;
	pthread_mutex_lock(&r->mu);
	for (;;) {
		while (!r->quit && (!r->begun || r->done))
			pthread_cond_wait(&r->cv, &r->mu);
		if (r->quit)
			break;
		round_run(r);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

eng_dp_reducer *eng_dp_reducer_new(size_t bucket, eng_err *err)
{
	eng_dp_reducer *r = calloc(1, sizeof *r);
	if (!r || !(r->tmp = eng_mem_alloc(ENG_MEM_GRADS, RING_CHUNK * sizeof(float)))) {
		free(r);
		eng_errf(err, "out of memory for the gradient sum's buffer");
		return NULL;
	}
	MPI_Comm_dup(MPI_COMM_WORLD, &r->comm);
	r->bucket = bucket;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	r->threaded = bucket && dp_threads && pthread_create(&r->th, NULL, reducer_main, r) == 0;
	return r;
}

int eng_dp_reducer_overlaps(const eng_dp_reducer *r)
{
	return r->threaded;
}

void eng_dp_reducer_begin(eng_dp_reducer *r, float *x, size_t n)
{
	pthread_mutex_lock(&r->mu);
	r->x = x;
	r->n = r->final_from = n;
	r->begun = 1;
	r->done = 0;
	r->busy_ms = 0;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

void eng_dp_reducer_final(eng_dp_reducer *r, size_t from)
{
	pthread_mutex_lock(&r->mu);
	if (from < r->final_from) {
		r->final_from = from;
		pthread_cond_broadcast(&r->cv);
	}
	pthread_mutex_unlock(&r->mu);
}

void eng_dp_reducer_finish(eng_dp_reducer *r, double *exposed_ms, double *busy_ms)
{
	double t0 = eng_now_ms();
	eng_dp_reducer_final(r, 0);
	pthread_mutex_lock(&r->mu);
	if (!r->threaded)
		round_run(r); /* here, all at once */
	while (!r->done)
		pthread_cond_wait(&r->cv, &r->mu);
	r->begun = 0;
	*busy_ms = r->busy_ms;
	pthread_mutex_unlock(&r->mu);
	*exposed_ms = eng_now_ms() - t0;
}

void eng_dp_reducer_free(eng_dp_reducer *r)
{
	if (!r)
		return;
	if (r->threaded) {
		pthread_mutex_lock(&r->mu);
		r->quit = 1;
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
		pthread_join(r->th, NULL);
	}
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
	MPI_Comm_free(&r->comm);
	eng_mem_free(r->tmp);
	free(r);
}
