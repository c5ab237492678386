/* t_mpi.h - remat-train under Open MPI's mpirun, for the suites that run ranks
 * (tests/e2e/test_mpi.c: "mpi"; tests/e2e/test_hosts.c: "hosts"; tests/cuda/test_cuda_dp.c:
 * "cuda-dp"). */
#ifndef T_MPI_H
#define T_MPI_H

#include <sys/types.h>

#include "t_daemon.h"

/* Why MPI tests cannot run here, or NULL (the environment set for them when they can:
 * root may run mpirun, and make asan's suppressions of Open MPI's own leaks). */
const char *t_mpi_missing(void);
/* The same, or one core (rematd's mpirun takes Open MPI's slots as they are) */
const char *t_mpi_slots_missing(void);
/* Returns from the test with one line "SUITE: skipped: why" when check() says why */
#define T_MPI_NEED(suite, check)                                                           \
	do {                                                                               \
		const char *why_ = check();                                                \
		if (why_) {                                                                \
			fprintf(stderr, "%s: skipped: %s\n", suite, why_);                 \
			return;                                                            \
		}                                                                          \
	} while (0)

/* A tiny job on the GPL's bytes, batch 2 x 32, one thread, lr 1e-3, `steps` steps, written
 * to dir/name: extra is more keys (ending in ','), save under dir/save. Malloc'd path. */
char *t_mpi_spec(const char *dir, const char *name, const char *extra, const char *save,
	int steps);

/* mpirun --oversubscribe -np np [--mca btl self,tcp] remat-train spec: its exit status,
 * its output in *out (malloc'd). */
int t_mpirun(const char *spec, int np, int tcp, char **out);
/* The same with 2 ranks, which must exit 0. */
void t_mpirun2(const char *spec, int tcp);
/* remat-train spec alone, which must exit 0. */
void t_mpi_train1(const char *spec);

/* rematd (paths made) started on d with extra, and a job of spec keys parallel (ending in
 * ',') that would run for ever, past its first step: subscribed on *c, its id (16 bytes)
 * and the path of the spec its ranks run (700 bytes) */
void t_mpi_long_job(td_daemon *d, td_conn *c, const char *const *extra, const char *parallel,
	char *id, char *spec);
/* The pid of the rank-r remat-train of the job whose spec is at spec, or 0 */
pid_t t_rank_pid(const char *spec, int r);

/* The two checkpoints' weights and moments are the same bytes (what says which). */
void t_same_weights(const char *a, const char *b, const char *what);

#endif
