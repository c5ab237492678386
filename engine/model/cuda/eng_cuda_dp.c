/* eng_cuda_dp.c - a GPU model's gradient summed across the ranks of a data-parallel job
 * (eng_cuda.h: eng_cuda_dp_open, eng_cuda_sum_ranks; design.md §12).
 *
 * Two ways, chosen once at the start and the same on every rank (rank 0 decides from what
 * every rank tells it, and broadcasts the choice):
 *  - NCCL: libnccl.so.2 opened with dlopen (never linked: a build runs where NCCL is not
 *    installed), one communicator over the job's ranks, ncclAllReduce (sum) in place on the
 *    compute stream. It needs every rank on a GPU of its own: NCCL refuses two ranks on one
 *    device, so ranks that share a GPU (more ranks than GPUs) take the host path.
 *  - Host memory: the gradient copied to pinned host memory EC_STAGE_FLOATS at a time,
 *    summed by eng_dp_sum_floats (MPI's reduce-scatter and all-gather, in an order fixed by
 *    the sizes alone), copied back.
 * With two ranks either way sums a + b, each element once: the bits of one process with
 * grad_accum 2 (kc_add). With more, NCCL's ring or tree adds in its own order (the same on
 * every rank: the sum is computed once and copied), not the host path's.
 *
 * REMAT_CUDA_COMM=auto|nccl|host (eng_cuda_opts.comm) chooses; auto takes NCCL where it
 * serves. Device memory: NCCL's own buffers are NCCL's (not counted by eng_cuda_mem); the
 * host path's staging buffer is pinned host memory, counted with the offloads' (mem-stats
 * device.pinned).
 */
#include "eng_cuda_int.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_dp.h"

#if defined(__has_include)
#if __has_include(<nccl.h>)
#include <nccl.h>
#define EC_NCCL 1 /* the toolkit has NCCL's header: its types, never its library at the link */
#endif
#endif

#define EC_STAGE_FLOATS ((size_t)16 << 20) /* host path: 64 MiB of the gradient at a time */
#define EC_WHY_LEN 240

typedef enum ec_how { EC_HOW_HOST, EC_HOW_NCCL } ec_how;

#ifdef EC_NCCL
typedef struct ec_nccl {
	void *lib; /* dlopen("libnccl.so.2") */
	int version;
	ncclResult_t (*get_version)(int *);
	ncclResult_t (*get_unique_id)(ncclUniqueId *);
	ncclResult_t (*init_rank)(ncclComm_t *, int, ncclUniqueId, int);
	ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
		ncclComm_t, cudaStream_t);
	ncclResult_t (*abort)(ncclComm_t);
	const char *(*error_string)(ncclResult_t);
	ncclComm_t comm;
} ec_nccl;
#endif

struct ec_dp {
	ec_how how;
	float *stage;   /* host path: pinned, stage_n floats */
	size_t stage_n;
#ifdef EC_NCCL
	ec_nccl nccl;
#endif
	char desc[400]; /* eng_cuda_dp_describe */
};

/* What every rank tells rank 0. */
typedef struct ec_rank_gpu {
	int nccl;                    /* libnccl.so.2 loaded here */
	unsigned char uuid[16];      /* its GPU's */
	char why[EC_WHY_LEN];        /* why NCCL did not load */
} ec_rank_gpu;

/* What rank 0 tells every rank. */
typedef struct ec_choice {
	int how;                     /* ec_how */
	int failed;                  /* the job cannot start: msg says why */
	char msg[2 * EC_WHY_LEN];    /* why not NCCL, or why it failed */
	unsigned char id[128];       /* NCCL: the communicator's unique id (ncclUniqueId) */
} ec_choice;

void ec_dp_close(ec_dp *d)
{
	if (!d)
		return;
#ifdef EC_NCCL
	/* ncclCommAbort, not ncclCommDestroy: the destroy is collective, and a rank that ends
	 * alone (its own error) must not wait in it for the others; the library stays mapped
	 * (RTLD_NODELETE) for NCCL's threads */
	if (d->nccl.comm)
		d->nccl.abort(d->nccl.comm);
	if (d->nccl.lib)
		dlclose(d->nccl.lib);
#endif
	eng_cuda_host_free(d->stage);
	free(d);
}

#ifdef EC_NCCL
/* Opens libnccl.so.2 and finds what this file calls; 0, or -1 with why (n bytes). */
static int nccl_load(ec_nccl *n, char *why, size_t len)
{
	static const char *const names[] = {"ncclGetVersion", "ncclGetUniqueId",
		"ncclCommInitRank", "ncclAllReduce", "ncclCommAbort", "ncclGetErrorString"};
	void **slots[] = {(void **)&n->get_version, (void **)&n->get_unique_id,
		(void **)&n->init_rank, (void **)&n->all_reduce, (void **)&n->abort,
		(void **)&n->error_string};
	n->lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!n->lib) {
		snprintf(why, len, "libnccl.so.2: %s", dlerror());
		return -1;
	}
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		*slots[i] = dlsym(n->lib, names[i]);
		if (!*slots[i]) {
			snprintf(why, len, "libnccl.so.2 has no %s", names[i]);
			return -1;
		}
	}
	if (n->get_version(&n->version) != ncclSuccess) {
		snprintf(why, len, "ncclGetVersion failed");
		return -1;
	}
	return 0;
}

static int nccl_fail(const ec_nccl *n, ncclResult_t r, const char *what, eng_err *err)
{
	return eng_errf(err, "nccl: %s: %s", what, n->error_string(r));
}
#endif

/* This rank's part of the decision: its GPU, and whether NCCL loaded (d->nccl then open). */
static int describe_rank(eng_cuda *g, ec_dp *d, eng_cuda_comm comm, ec_rank_gpu *me,
	eng_err *err)
{
	struct cudaDeviceProp p;
	memset(me, 0, sizeof *me);
	if (ec_cuda_check(cudaGetDeviceProperties(&p, g->gpu), "cudaGetDeviceProperties", err) < 0)
		return -1;
	memcpy(me->uuid, p.uuid.bytes, sizeof me->uuid);
	if (comm == ENG_CUDA_COMM_HOST) {
		snprintf(me->why, sizeof me->why, "REMAT_CUDA_COMM=host");
		return 0;
	}
#ifdef EC_NCCL
	me->nccl = nccl_load(&d->nccl, me->why, sizeof me->why) == 0;
#else
	(void)d;
	snprintf(me->why, sizeof me->why, "built without NCCL's header (nccl.h)");
#endif
	return 0;
}

/* Rank 0: NCCL when every rank loaded it on a GPU of its own (and comm allows), else the
 * host path, with why; comm NCCL that cannot be had fails the job. */
static void choose(const ec_rank_gpu *all, int n, eng_cuda_comm comm, ec_choice *c)
{
	int a = -1, b = -1;
	memset(c, 0, sizeof *c);
	for (int i = 0; i < n && a < 0; i++)
		for (int j = i + 1; j < n && a < 0; j++)
			if (memcmp(all[i].uuid, all[j].uuid, sizeof all[i].uuid) == 0) {
				a = i;
				b = j;
			}
	if (comm == ENG_CUDA_COMM_HOST)
		snprintf(c->msg, sizeof c->msg, "REMAT_CUDA_COMM=host");
	for (int r = 0; r < n && !c->msg[0]; r++)
		if (!all[r].nccl)
			snprintf(c->msg, sizeof c->msg, "rank %d: %s", r, all[r].why);
	if (!c->msg[0] && a >= 0)
		snprintf(c->msg, sizeof c->msg, "ranks %d and %d share a GPU (NCCL needs one GPU "
						"a rank)", a, b);
	c->how = c->msg[0] ? EC_HOW_HOST : EC_HOW_NCCL;
	if (comm == ENG_CUDA_COMM_NCCL && c->how != EC_HOW_NCCL) {
		char why[sizeof c->msg];
		snprintf(why, sizeof why, "%s", c->msg);
		snprintf(c->msg, sizeof c->msg, "REMAT_CUDA_COMM=nccl: %.400s", why);
		c->failed = 1;
	}
}

/* Every rank: the communicator of c's unique id (NCCL), or the staging buffer (host). */
static int start(eng_cuda *g, ec_dp *d, const ec_choice *c, eng_err *err)
{
	d->how = (ec_how)c->how;
	if (d->how == EC_HOW_HOST) {
		d->stage_n = g->nfloats < EC_STAGE_FLOATS ? g->nfloats : EC_STAGE_FLOATS;
		if (!(d->stage = eng_cuda_host_alloc(d->stage_n * sizeof(float))))
			return eng_errf(err, "out of pinned host memory for the gradient's all-reduce "
					     "(%.1f MiB)", d->stage_n * 4 / 1048576.0);
		snprintf(d->desc, sizeof d->desc, "mpi: float32 gradients copied to host memory, "
			"reduce-scatter and all-gather there (not NCCL: %.300s)", c->msg);
		return 0;
	}
#ifdef EC_NCCL
	ncclUniqueId id;
	memcpy(&id, c->id, sizeof id);
	ncclResult_t r = d->nccl.init_rank(&d->nccl.comm, eng_dp_size(), id, eng_dp_rank());
	if (r != ncclSuccess) {
		d->nccl.comm = NULL;
		return nccl_fail(&d->nccl, r, "ncclCommInitRank", err);
	}
	/* 22707 for 2.27.7; before 2.9, 2804 for 2.8.4 */
	int v = d->nccl.version, major = v >= 10000 ? v / 10000 : v / 1000;
	snprintf(d->desc, sizeof d->desc, "nccl %d.%d.%d: all-reduce of float32 gradients on the "
		"device", major, v / 100 % 100, v % 100);
	return 0;
#else
	return eng_errf(err, "nccl chosen in a build without it");
#endif
}

int eng_cuda_dp_open(eng_cuda *g, eng_cuda_comm comm, eng_err *err)
{
	int n = eng_dp_size(), rc = -1;
	ec_rank_gpu me, *all = NULL;
	ec_choice c = {0};
	if (n == 1)
		return 0;
	ec_dp *d = calloc(1, sizeof *d);
	if (!d || (eng_dp_rank() == 0 && !(all = calloc((size_t)n, sizeof *all)))) {
		eng_errf(err, "out of memory");
		goto out; /* the other ranks wait in the gather: this rank's exit ends the job */
	}
	if (describe_rank(g, d, comm, &me, err) < 0 || eng_dp_gather(&me, sizeof me, all, err) < 0)
		goto out;
	if (eng_dp_rank() == 0) {
		choose(all, n, comm, &c);
#ifdef EC_NCCL
		ncclResult_t r;
		if (!c.failed && c.how == EC_HOW_NCCL &&
			(r = d->nccl.get_unique_id((ncclUniqueId *)c.id)) != ncclSuccess) {
			snprintf(c.msg, sizeof c.msg, "ncclGetUniqueId: %s", d->nccl.error_string(r));
			c.failed = 1;
		}
#endif
	}
	if (eng_dp_bcast(&c, sizeof c, err) < 0)
		goto out;
	if (c.failed) {
		eng_errf(err, "%s", c.msg);
		goto out;
	}
	if (start(g, d, &c, err) < 0)
		goto out;
	g->dp = d;
	d = NULL;
	rc = 0;
out:
	ec_dp_close(d);
	free(all);
	return rc;
}

int eng_cuda_sum_ranks(eng_cuda *g, eng_err *err)
{
	ec_dp *d = g->dp;
	float *x = ec_step_grads(g);
	if (!d)
		return 0;
#ifdef EC_NCCL
	if (d->how == EC_HOW_NCCL) {
		ncclResult_t r = d->nccl.all_reduce(x, x, g->nfloats, ncclFloat32, ncclSum,
			d->nccl.comm, g->st);
		if (r != ncclSuccess)
			return nccl_fail(&d->nccl, r, "ncclAllReduce", err);
		return ec_cuda_check(cudaStreamSynchronize(g->st), "all-reduce", err);
	}
#endif
	/* stream order keeps each chunk's copy back ahead of the next chunk's copy out */
	for (size_t at = 0; at < g->nfloats; at += d->stage_n) {
		size_t k = g->nfloats - at < d->stage_n ? g->nfloats - at : d->stage_n;
		if (ec_cuda_check(cudaMemcpyAsync(d->stage, x + at, k * sizeof(float),
				      cudaMemcpyDeviceToHost, g->st), "all-reduce: copy out", err) < 0 ||
			ec_cuda_check(cudaStreamSynchronize(g->st), "all-reduce", err) < 0 ||
			eng_dp_sum_floats(d->stage, k, err) < 0 ||
			ec_cuda_check(cudaMemcpyAsync(x + at, d->stage, k * sizeof(float),
				cudaMemcpyHostToDevice, g->st), "all-reduce: copy back", err) < 0)
			return -1;
	}
	return ec_cuda_check(cudaStreamSynchronize(g->st), "all-reduce", err);
}

const char *eng_cuda_dp_describe(const eng_cuda *g)
{
	return g->dp ? g->dp->desc : NULL;
}
