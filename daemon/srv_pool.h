/* srv_pool.h - one memory pool shared by rematd's jobs (rematd --memory SIZE|auto).
 *
 * Every job can trade memory for time at a step boundary without changing its numbers,
 * so the daemon divides the machine's memory among the jobs it runs, live:
 *
 *  - Admission by the least memory. A queued job is admitted when every admitted job's
 *    reserve and its own fit the pool: a job's least (the least process memory any policy
 *    needs, from its check's plan: every block full, the head chunked), or its own
 *    remat.budget when the spec gives one. Otherwise it waits, oldest first, its reason
 *    saying how much it waits for ("waiting for 412.0 MiB of the pool: 2 jobs hold at least
 *    1.5 GiB of 1.9 GiB"). Admitted, it starts at once when the shares given leave room
 *    for its reserve; else the others are shrunk first (a division) and it starts once
 *    their shrinks are acknowledged ("admitted: waiting for the running jobs to give back
 *    ...").
 *  - A job starts with its reserve as its controller's budget, given on its worker's command
 *    line (remat-train --pool-budget: never refused, as a spec's remat.budget), then takes
 *    part in the division. A least its worker measures above it is run all the same (the
 *    least policy, said by REMAT_AUTO): the division after its first step sizes it from
 *    that least, the others shrunk first.
 *  - Division: the running jobs without a budget of their own share what the others
 *    (starting, paused, stopping, their own budget) leave: each at least its least, at
 *    most its `off` policy's peak, so that the sum over jobs of priority x added step
 *    time is least. A job's added time under a budget is the cost of the planner's cheapest
 *    policy (eng_plan_search) in milliseconds: each section's mode as its worker measured
 *    it (remat-costs, srv_pool_cost.c), else its extra FLOPs over the job's measured rate
 *    (its model's FLOPs over step_ms less recompute_ms); the division is exact over
 *    POOL_LEVELS budgets a job (dynamic programming over the jobs).
 *  - Shrinking before growing: a job whose share falls is told first (remat-auto); the
 *    ones whose share grows are told only once every shrink is acknowledged, by a STEP at
 *    or after the step the shrink applied at (the policy switch frees what the new policy
 *    no longer keeps before it allocates) or by the job's end. The sum of what the jobs
 *    may hold never passes the pool, during a change either.
 *  - A paused job is squeezed to its least: its worker lays the policy of its least out
 *    while paused and says so (REMAT_AUTO, which acknowledges the shrink); resumed, it
 *    takes part in the division again. (Not a job of several ranks: those but rank 0 take
 *    a budget with the next step only.)
 *  - Re-divided when a job is admitted, runs its first step, pauses or resumes, ends, its
 *    priority is set, and when a job's rate or costs moved by a quarter since the last
 *    division (looked at every SRV_POOL_MS).
 *  - POOL_CHANGED events say each division; job-list and job-status carry a job's
 *    "memory" (share, least, off, priority, resident), daemon-info the pool.
 *
 *  - A job of N ranks on this host (data parallel) is N replicas: its least, off peak and
 *    share are theirs together, and each rank's controller is told an Nth.
 *
 * Not here: a cuda job's device memory, and ranks on other hosts (parallel.hostfile): those
 * jobs are outside the pool, admitted as without one.
 */
#ifndef SRV_POOL_H
#define SRV_POOL_H

#include <jansson.h>

#include "eng_plan.h"
#include "srv.h"

#define SRV_POOL_LEVELS 64        /* budgets tried per job in a division */
#define SRV_POOL_MS 10000         /* how often rates are looked at */
#define SRV_POOL_RATE_MOVE 0.25   /* a rate moved this much re-divides */
#define SRV_POOL_MARGIN 0.08    /* a job's planned least, until its worker measured its
				   * own: this much more */
#define SRV_POOL_STILL 0.02      /* a share that would move by less is left as it is */
#define SRV_POOL_AUTO_KEEP 0.10   /* --memory auto without a cgroup limit: MemAvailable
				   * less this part of it */

/* A job's part of the pool (in srv_job). */
typedef struct srv_pool_job {
	long long least;      /* the least process memory any policy needs (check's plan) */
	long long off;        /* the off policy's peak, a save's snapshot held: the most */
	long long share;      /* the budget its controller keeps now (0: none given) */
	long long want;       /* the division's share not told yet (a grow waiting) */
	int ack_step;         /* a shrink told: acknowledged by a STEP at or after this step;
			       * -1 while its reply is awaited; 0 none pending */
	int priority;         /* the spec's "priority" (1 default): the division's weight */
	int own;              /* the spec gives remat.budget: the job keeps it, reserved */
	int admitted;         /* queued, admitted: its reserve counted, waiting for the
			       * running jobs' shrinks to make room */
	long long told_from;  /* the share before the last one told (a refusal goes back) */
	long long floor;      /* a refused budget and a twentieth: never told less again */
	double model_flops;   /* a step's forward and backward without recompute (plan) */
	double rate;          /* measured FLOPs a ms of its steps, 0 until a STEP */
	double rate_divided;  /* the rate the last division used */
	long long rss;        /* the last MEMORY event's resident bytes */
	int seen_step;        /* the last step its worker ran, or laid out while paused,
			       * under the budget told last (this worker's) */
	int known;            /* the figures above were set (priority and own are kept
			       * across a resume and a restart of rematd) */
	char why[96];         /* why its share was told last */
	float (*cost_ms)[3];  /* per section (blocks, then the head) and mode, the ms it adds
			       * to a step as its worker measured it (NAN: not run yet); NULL
			       * until remat-costs answered (srv_pool_cost.c) */
	double cost_divided;  /* every block full's cost when the last division was made */
} srv_pool_job;

/* --memory: "auto" or a size ("24GiB"); request is how a budget is told to a worker
 * (srv_worker_request) and schedule how queued jobs are started (srv_job_schedule), both
 * passed in: the pool sits below the worker's module. 0, or -1 with err. */
int srv_pool_init(srv_server *srv, const char *arg, srv_pool_request_fn request,
	void (*schedule)(srv_server *srv), char *err, size_t errlen);

/* A job's figures from its check (least, off) and its spec (priority, an own budget);
 * called when it is queued, and again for a resume (whose spec carries the budget the
 * pool gave as remat.budget: a job keeps whether the budget was its own). */
void srv_pool_job_init(srv_job *job, const json_t *spec, int resume);
/* Its terms alone (priority, own budget; a resume's, or one known from the record, kept),
 * its figures cleared: a job that must be checked again before it runs (a restart's
 * ended ones), whose plan is made then. */
void srv_pool_job_terms(srv_job *job, const json_t *spec, int resume);

/* 0 when the job could be admitted once the pool is free: what it reserves (its own
 * budget, else its least) is no more than the pool; else -1 with why in desc (a job that
 * waited for it would wait for ever, and every job queued behind it too). */
int srv_pool_could_fit(const srv_job *job, char *desc, size_t desclen);
/* Whether the queued job may start now: 1 (its reserve taken); 0 or -1, it waits, its
 * reason saying for what (-1: a new reason, for the record). Always 1 without a pool. */
int srv_pool_admit(srv_job *job);
/* Its worker about to be spawned: the budget its controller keeps from its first step
 * (remat-train --pool-budget, each rank's bytes), its reserve, published as its share; 0
 * when the pool gives it none (no pool, a budget of its own, outside the pool). */
long long srv_pool_spawning(srv_job *job);
/* Its worker started: that share said (POOL_CHANGED "admit"), when the pool gave one. */
void srv_pool_started(srv_job *job);

/* The job's state changed, or it ended: re-divides. */
void srv_pool_changed(srv_server *srv, const char *why);
/* A STEP of job: its rate, and the acknowledgement of a shrink. */
void srv_pool_step(srv_job *job, const json_t *data);
/* A REMAT_AUTO of job: under the budget told last from its step on (a paused job's says
 * so at once, its policy laid out while paused): the acknowledgement of a shrink. */
void srv_pool_auto_said(srv_job *job, const json_t *data);
/* A remat-costs reply of job's worker: its sections' measured costs. */
void srv_pool_costs(srv_job *job, const json_t *ret);
/* What each mode of each section adds to a step of job, in ms: measured, else its analytic
 * extra FLOPs over rate (FLOPs a ms). For the division (srv_pool.c). */
void srv_pool__plan_costs(const srv_job *job, const eng_plan_query *q, double rate,
	eng_plan_costs *pc);
/* Every block full and the head chunked, at those costs: how much they moved. */
double srv_pool__cost_ref(const srv_job *job, const eng_plan_query *q, double rate);
/* What the job's part holds (its costs), freed: when the job is. */
void srv_pool_job_free(srv_job *job);
/* A MEMORY event of job: its resident bytes. */
void srv_pool_memory(srv_job *job, const json_t *data);
/* The reply (ret, or NULL with an error) to rematd's own remat-auto. */
void srv_pool_auto_reply(srv_job *job, const json_t *ret);
/* Every SRV_POOL_MS: re-divides when a rate moved. */
void srv_pool_sweep(srv_server *srv);

/* 1 when the pool sets the job's budget: rematd runs one, and the job has no budget of
 * its own. */
int srv_pool_divides(const srv_job *job);

/* 1 with why in desc when a client's command would take the job's memory out of the
 * pool's hands: remat-auto (the budget is the pool's share, or the spec's own, reserved at
 * admission), remat-set with force (it turns the controller off) and remat-profile (its
 * probe runs policies over any budget). 0 otherwise, and always without a pool. */
int srv_pool_refuses(const srv_job *job, int cmd, const json_t *args, char *desc,
	size_t desclen);

/* job-set's "priority": the job's weight from now on (a division follows). */
void srv_pool_set_priority(srv_job *job, int priority);

/* What a job's record keeps of its part of the pool across a restart of rematd: priority,
 * own, floor (new reference). */
json_t *srv_pool_job_record(const srv_job *job);
/* And reads it back (o: the record's "pool"; nothing when it is not an object): then
 * known, which srv_pool_job_init with resume keeps. */
void srv_pool_job_read(srv_job *job, const json_t *o);

/* job-list's and job-status' "memory" (new reference; null without a pool). */
json_t *srv_pool_job_json(const srv_job *job);
/* daemon-info's "pool" (new reference; null without a pool). */
json_t *srv_pool_json(const srv_server *srv);

#endif
