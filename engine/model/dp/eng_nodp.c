/* eng_nodp.c - eng_dp.h in a build without MPI: a world of one (see eng_dp.h). */
#include "eng_dp.h"

#include <stdlib.h>
#include <string.h>

int eng_dp_init(int *argc, char ***argv, eng_err *err)
{
	(void)argc;
	(void)argv;
	if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK"))
		return eng_errf(err, "started by mpirun, but this build has no MPI (install "
				     "libopenmpi-dev, which scripts/deps.sh does, and rebuild)");
	return 0;
}

void eng_dp_finalize(void)
{
}

void eng_dp_abort(int status)
{
	exit(status);
}

int eng_dp_rank(void)
{
	return 0;
}

int eng_dp_size(void)
{
	return 1;
}

int eng_dp_local_rank(void)
{
	return 0;
}

int eng_dp_local_size(void)
{
	return 1;
}

const char *eng_dp_describe(void)
{
	return "one process (built without MPI)";
}

int eng_dp_sum_floats(float *x, size_t n, eng_err *err)
{
	(void)x;
	(void)n;
	(void)err;
	return 0;
}

int eng_dp_reduce_scatter(float *x, size_t n, eng_err *err)
{
	return eng_dp_sum_floats(x, n, err);
}

int eng_dp_allgather(float *x, size_t n, eng_err *err)
{
	return eng_dp_sum_floats(x, n, err);
}

int eng_dp_gather_parts(const float *mine, size_t n, float *all, eng_err *err)
{
	(void)err;
	memcpy(all, mine, n * sizeof *all);
	return 0;
}

int eng_dp_sum_doubles(double *x, int n, eng_err *err)
{
	(void)x;
	(void)n;
	(void)err;
	return 0;
}

int eng_dp_any(int flag)
{
	return flag != 0;
}

int eng_dp_first_failure(int failed, int *kind, char *msg, size_t len)
{
	(void)kind;
	(void)msg;
	(void)len;
	return failed ? 0 : -1;
}

int eng_dp_bcast(void *buf, size_t n, eng_err *err)
{
	(void)buf;
	(void)n;
	(void)err;
	return 0;
}

int eng_dp_gather(const void *mine, size_t n, void *all, eng_err *err)
{
	(void)err;
	memcpy(all, mine, n);
	return 0;
}

eng_dp_reducer *eng_dp_reducer_new(size_t bucket, eng_err *err)
{
	(void)bucket;
	eng_errf(err, "a build without MPI has no ranks to sum over");
	return NULL;
}

int eng_dp_reducer_overlaps(const eng_dp_reducer *r)
{
	(void)r;
	return 0;
}

void eng_dp_reducer_begin(eng_dp_reducer *r, float *x, size_t n)
{
	(void)r;
	(void)x;
	(void)n;
}

void eng_dp_reducer_final(eng_dp_reducer *r, size_t from)
{
	(void)r;
	(void)from;
}

void eng_dp_reducer_finish(eng_dp_reducer *r, double *exposed_ms, double *busy_ms)
{
	(void)r;
	*exposed_ms = *busy_ms = 0;
}

void eng_dp_reducer_free(eng_dp_reducer *r)
{
	(void)r;
}
