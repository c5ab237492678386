/* srv_mpi.h - a data-parallel job's launch: mpirun -np N remat-train, and the socket rank 0
 * connects to (mpirun passes no descriptor but stdio to its ranks), in the job's directory.
 */
#ifndef SRV_MPI_H
#define SRV_MPI_H

#include <stddef.h>

#include "srv_job.h"

#define SRV_MPI_SOCKET "ctl.sock" /* in the job's directory, until rank 0 has connected */
#define SRV_MPI_SPEC "rank.json"  /* the spec the ranks read when they are not rematd's */
#define SRV_MPI_MAX_ARGS 64 /* 22 of rematd's own, --mca KEY VALUE for each allowed key */

/* At job-start, from remat-train --check's answer: -1 (why in desc) when the job wants
 * ranks and rematd has no mpirun. */
int srv_mpi_check(const srv_server *srv, const eng_check_info *check, char *desc,
	size_t desclen);

/* The ranks the job's check said (1: one remat-train). */
int srv_mpi_ranks(const srv_job *job);

/* Before the spawn: the socket rank 0 will connect to (listening, the owner's), the job's
 * metrics.jsonl (created, the owner's: rank 0 opens it), then the arguments into args
 * (SRV_MPI_MAX_ARGS, pointing into store): mpirun's, or with as_arg (rematd root, the owner
 * not) remat-train --as as_arg --exec mpirun..., so that mpirun, its daemons and every rank
 * are the owner's from the start, reading a copy of the spec that is theirs; pool_arg
 * (NULL: none) is each rank's --pool-budget. 0, or -1 with why in err. */
int srv_mpi_prepare(srv_job *job, const char *as_arg, const char *pool_arg,
	const char *spec_path, char **args, char *store, size_t storelen, char *err,
	size_t errlen);

/* After the spawn: waits for rank 0's connection (a peer of another user is refused and
 * waited past), then calls connected with its socket (*fd, which connected takes: -1
 * after), or with fd NULL and why when the wait failed (the worker must go). */
void srv_mpi_wait(srv_job *job, void (*connected)(srv_job *job, int *fd, const char *why));

/* The listening socket closed (the job ended before rank 0 connected, or a failed spawn);
 * nothing when there is none. */
void srv_mpi_close(srv_job *job);

#endif
