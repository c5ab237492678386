/* srv_pool.c - one memory pool shared by rematd's jobs (see srv_pool.h). */
#include "srv_pool.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_cgroup.h"
#include "eng_plan.h"
#include "srv_job.h"

#define MIB(b) ((double)(b) / 1048576.0)

/* MemAvailable of /proc/meminfo in bytes, 0 when unknown. */
static long long mem_available(void)
{
	char line[256];
	long long kb = 0;
	FILE *f = fopen("/proc/meminfo", "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

int srv_pool_init(srv_server *srv, const char *arg, srv_pool_request_fn request,
	void (*schedule)(srv_server *srv), char *err, size_t errlen)
{
	srv_pool *p = &srv->pool;
	long long bytes = 0;
	memset(p, 0, sizeof *p);
	p->request = request;
	p->schedule = schedule;
	if (strcmp(arg, "auto") == 0) {
		size_t lim;
		eng_err e;
		if (eng_cgroup_limit(eng_cgroup_root(), eng_cgroup_proc(), &lim, &e) == 0) {
			bytes = (long long)lim;
			snprintf(p->source, sizeof p->source, "cgroup");
		} else {
			bytes = (long long)((double)mem_available() * (1.0 - SRV_POOL_AUTO_KEEP));
			snprintf(p->source, sizeof p->source, "available");
		}
	} else if (proto_size_parse(arg, &bytes) == 0 && bytes > 0) {
		snprintf(p->source, sizeof p->source, "size");
	} else {
		snprintf(err, errlen, "--memory '%.64s': give a size (\"24GiB\", bytes) or auto",
			arg);
		return -1;
	}
	if (bytes <= 0) {
		snprintf(err, errlen, "--memory auto: neither a cgroup limit nor MemAvailable");
		return -1;
	}
	p->on = 1;
	p->bytes = bytes;
	return 0;
}

/* The job's processes on this machine: its ranks (data parallel, mpirun on this host), each
 * a replica under the same budget; the pool's figures of a job are theirs together, its
 * controller's budget one rank's. */
static long long ranks_of(const srv_job *job)
{
	return job->info && job->info->ranks > 1 ? job->info->ranks : 1;
}

/* The planner's view of one rank of a job from its check: 0, or -1 (no shape; device cuda,
 * or ranks on other hosts (parallel.hostfile): outside the pool). */
static int job_query(const srv_job *job, eng_plan_query *q)
{
	const eng_check_info *ci = job->info;
	eng_err e;
	memset(q, 0, sizeof *q);
	if (!ci || ci->device != ENG_DEVICE_CPU || ci->hostfile[0] || !ci->has_fixed ||
		ci->batch < 1 ||
		ci->seq_len < 1 || ci->chunk_rows < 1 ||
		eng_config_validate(&ci->cfg, "the job's model", &e) < 0)
		return -1;
	q->cfg = &ci->cfg;
	q->B = ci->batch;
	q->T = ci->seq_len;
	q->chunk_rows = ci->chunk_rows;
	for (int c = 0; c < ENG_MEM_NCAT; c++)
		q->fixed += ci->fixed[c];
	q->fixed += ci->untracked;
	q->optional = ci->snapshot;
	return 0;
}

void srv_pool_job_init(srv_job *job, const json_t *spec, int resume)
{
	srv_pool_job *pj = &job->pool;
	eng_plan_query q;
	eng_policy off;
	eng_plan plan;
	srv_pool_job_terms(job, spec, resume);
	if (job_query(job, &q) < 0)
		return;
	pj->least = ranks_of(job) * (long long)eng_plan_least(q.cfg, q.B, q.T, q.chunk_rows,
		q.fixed, NULL);
	eng_policy_init(&off, q.cfg->n_layer);
	eng_plan_policy(q.cfg, q.B, q.T, q.chunk_rows, &off, &plan);
	pj->off = ranks_of(job) * (long long)(q.fixed + q.optional + plan.saved_bytes +
		plan.recompute_bytes);
	pj->model_flops = plan.model_flops;
}

void srv_pool_job_terms(srv_job *job, const json_t *spec, int resume)
{
	srv_pool_job *pj = &job->pool;
	json_t *pr = json_object_get(spec, "priority");
	/* a resume keeps what the job had: its spec's remat.budget is then the pool's last
	 * share, and its priority may have been set since (job-set) */
	int keep = resume && pj->known, own = keep ? pj->own
		: json_object_get(json_object_get(spec, "remat"), "budget") != NULL;
	int priority = keep ? pj->priority : json_is_integer(pr) ? (int)json_integer_value(pr)
		: 1;
	long long floor = keep ? pj->floor : 0;
	srv_pool_job_free(job); /* a resume's worker measures its costs again */
	memset(pj, 0, sizeof *pj);
	pj->known = 1;
	pj->priority = priority;
	pj->own = own;
	pj->floor = floor;
}

/* A job's least: the worker's own word once it has one (its controller counts the
 * resident bytes beyond the tracked ones it measured, which move a little from step to
 * step: SRV_POOL_STILL more), else its check's plan with SRV_POOL_MARGIN more (the check's
 * process is not the run's); never below what a refusal taught (floor). */
static long long job_least(const srv_job *job)
{
	const srv_pool_job *pj = &job->pool;
	long long w = job->autoc.least_bytes * ranks_of(job), least = w > 0
		? w + (long long)((double)w * SRV_POOL_STILL)
		: pj->least + (long long)((double)pj->least * SRV_POOL_MARGIN);
	return least > pj->floor ? least : pj->floor;
}

/* 1 when the job reserves its own budget (the spec's remat.budget, once known) */
static int reserves_own(const srv_job *job)
{
	return job->pool.own && job->autoc.on && job->autoc.budget_bytes;
}

/* What a job reserves: its own budget, else its least. */
static long long job_reserve(const srv_job *job)
{
	return reserves_own(job) ? job->autoc.budget_bytes * ranks_of(job) : job_least(job);
}

/* The budget a job of the pool may hold now: its share (the one before while a shrink
 * is not acknowledged), or while it has none its reserve. */
static long long job_holds(const srv_job *job)
{
	const srv_pool_job *pj = &job->pool;
	if (pj->ack_step != 0 && pj->told_from > pj->share)
		return pj->told_from;
	return pj->share ? pj->share : job_reserve(job);
}

/* 1 when the job is one of the pool's: device cpu with a plan, and its worker spawned and
 * not reaped, or admitted and waiting for the others to make room. */
static int in_pool(const srv_job *job)
{
	return ((job->proc_alive && !job->reaped) ||
		       (job->pool.admitted && job->state == PROTO_JOB_QUEUED)) &&
	       job->pool.least > 0;
}

/* The pool's jobs, how many, and the sum of what they may hold (*held) and reserve. */
static long long pool_taken(const srv_server *srv, int *n, long long *reserved)
{
	long long t = 0;
	*n = 0;
	*reserved = 0;
	for (int i = 0; i < srv->n_jobs; i++)
		if (in_pool(srv->jobs[i])) {
			t += job_holds(srv->jobs[i]);
			*reserved += job_reserve(srv->jobs[i]);
			(*n)++;
		}
	return t;
}

/* Sets the job's reason to why: 0, or -1 when it is new (for the record). */
static int wait_because(srv_job *job, const char *why)
{
	if (strcmp(job->reason, why) == 0)
		return 0;
	srv_copy_text(job->reason, sizeof job->reason, why);
	return -1;
}

int srv_pool_could_fit(const srv_job *job, char *desc, size_t desclen)
{
	const srv_server *srv = job->srv;
	long long need = job_reserve(job);
	if (!srv->pool.on || job->pool.least <= 0 || need <= srv->pool.bytes)
		return 0;
	srv_fmt(desc, desclen, "the job needs at least %.1f MiB of the pool (%s), and the pool "
		"is %.1f MiB (rematd --memory): it could never be admitted", MIB(need),
		reserves_own(job) ? "its remat.budget" : "its least policy's peak",
		MIB(srv->pool.bytes));
	return -1;
}

int srv_pool_admit(srv_job *job)
{
	srv_server *srv = job->srv;
	srv_pool_job *pj = &job->pool;
	char why[256];
	int n;
	long long reserved, taken;
	if (!srv->pool.on || pj->least <= 0)
		return 1;
	taken = pool_taken(srv, &n, &reserved);
	if (pj->admitted && reserved > srv->pool.bytes) {
		/* the running jobs' own words put their least above the plan's: it waits again */
		pj->admitted = 0;
		taken -= job_reserve(job);
		reserved -= job_reserve(job);
	}
	if (!pj->admitted) {
		/* admitted when every admitted job's least, and its own, fit */
		if (reserved + job_reserve(job) > srv->pool.bytes) {
			snprintf(why, sizeof why, "waiting for %.1f MiB of the pool: %d job%s hold "
				"at least %.1f MiB of %.1f MiB", MIB(reserved + job_reserve(job) -
				srv->pool.bytes), n, n == 1 ? "" : "s", MIB(reserved),
				MIB(srv->pool.bytes));
			return wait_because(job, why);
		}
		pj->admitted = 1;
		taken += job_reserve(job);
	}
	if (taken <= srv->pool.bytes) { /* room now: it starts */
		pj->admitted = 0;
		return 1;
	}
	/* the running jobs give back what it needs first (a division), then it starts */
	snprintf(why, sizeof why, "admitted: waiting for the running jobs to give back %.1f "
		"MiB of the pool", MIB(taken - srv->pool.bytes));
	int rc = wait_because(job, why);
	if (!srv->pool.scheduling) /* not from a division's end: that division counted it */
		srv_pool_changed(srv, "a job was admitted");
	return rc;
}

/* POOL_CHANGED for job: its share now, and why; a shrink with the step it applies at (its
 * worker's reply), once that is known. */
static void publish(srv_job *job, const char *phase, int at)
{
	const srv_pool_job *pj = &job->pool;
	json_t *d = json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:i,s:I}", "job", job->id, "phase", phase,
		"reason", pj->why, "share_bytes", (json_int_t)pj->share, "least_bytes",
		(json_int_t)job_least(job), "off_bytes", (json_int_t)pj->off, "priority",
		pj->priority, "pool_bytes", (json_int_t)job->srv->pool.bytes);
	if (d && at > 0)
		json_object_set_new(d, "applies_at_step", json_integer(at));
	char *line = d ? proto_event_line("POOL_CHANGED", d) : NULL;
	sv_msg *m = line ? sv_msg_take(line) : NULL;
	json_decref(d);
	if (m)
		srv_conn_publish(job->srv, job->id, "POOL_CHANGED", m);
	sv_msg_unref(m);
}

/* Tells the job's controller its budget (rematd's own remat-auto); a shrink is then
 * awaited (its reply's step, then a STEP at or after it). */
static void tell(srv_job *job, long long bytes, const char *phase, const char *why)
{
	srv_pool_job *pj = &job->pool;
	json_t *args = json_pack("{s:s,s:I}", "job", job->id, "budget_bytes",
		(json_int_t)(bytes / ranks_of(job))); /* each rank's */
	if (args && job->srv->pool.request(job, "remat-auto", args, 0, NULL) == 0) {
		pj->told_from = pj->share;
		pj->share = bytes;
		pj->ack_step = strcmp(phase, "shrink") == 0 ? -1 : 0;
		srv_copy_text(pj->why, sizeof pj->why, why);
		srv_log("job %s: pool share %.1f MiB (%s: %s)", job->id, MIB(bytes), phase, why);
		if (pj->ack_step == 0) /* a shrink's, with its step, once its reply comes */
			publish(job, phase, 0);
	}
	json_decref(args);
}

long long srv_pool_spawning(srv_job *job)
{
	srv_pool_job *pj = &job->pool;
	pj->admitted = 0;
	pj->seen_step = 0; /* a resume's worker counts from its checkpoint's step */
	pj->share = pj->told_from = 0; /* whatever an earlier worker of the job held */
	pj->ack_step = 0;
	if (!job->srv->pool.on || pj->least <= 0 || pj->own)
		return 0;
	/* given on its command line, not told: a budget it cannot refuse (a least above it,
	 * measured, runs the least policy and says so, and the pool divides again) */
	pj->share = job_least(job);
	srv_copy_text(pj->why, sizeof pj->why, "admitted at its least");
	return pj->share / ranks_of(job); /* each rank's */
}

void srv_pool_started(srv_job *job)
{
	if (!job->pool.share)
		return;
	srv_log("job %s: pool share %.1f MiB (admit: %s)", job->id, MIB(job->pool.share),
		job->pool.why);
	publish(job, "admit", 0);
}

/* ---- the division ---- */

/* Every block full's cost for the job now, 0 when it has no plan or rate. */
static double cost_ref(const srv_job *job)
{
	eng_plan_query q;
	return job->pool.rate > 0 && job_query(job, &q) == 0 ?
		srv_pool__cost_ref(job, &q, job->pool.rate) : 0.0;
}

/* 1 when x moved from was by more than SRV_POOL_RATE_MOVE of it. */
static int moved(double x, double was)
{
	return was > 0 && (x > was * (1 + SRV_POOL_RATE_MOVE) ||
			   x < was * (1 - SRV_POOL_RATE_MOVE));
}

/* One job the division sizes: its candidate budgets and what each costs it. */
typedef struct cand {
	srv_job *job;
	int n;                            /* candidates */
	long long bytes[SRV_POOL_LEVELS]; /* least .. off, rising */
	double cost[SRV_POOL_LEVELS];     /* priority x added ms (or FLOPs) under each */
} cand;

/* What a job will hold once the shrinks told are done: its share, or its reserve. */
static long long job_after(const srv_job *job)
{
	return job->pool.share ? job->pool.share : job_reserve(job);
}

/* 1 when the job is paused and holds more than its least: it is squeezed to it (paused,
 * memory buys it nothing; the others may need it). Not a job of several ranks: the others
 * wait for rank 0's next step to take a budget, so only rank 0 would give memory back. */
static int squeezable(const srv_job *job)
{
	return in_pool(job) && job->state == PROTO_JOB_PAUSED && !job->pool.own &&
	       ranks_of(job) == 1 && job->pool.share > job_least(job);
}

/* 1 when the division sizes this job: running, its rate measured, no budget of its own. */
static int divisible(const srv_job *job)
{
	return in_pool(job) && job->state == PROTO_JOB_RUNNING && !job->pool.own &&
	       job->pool.rate > 0;
}

/* The candidates of job: SRV_POOL_LEVELS budgets from its least to its off peak (at most
 * avail), each with its cheapest policy's cost in ms (measured, else FLOPs over rate),
 * times its priority. */
static void candidates(srv_job *job, long long avail, double rate, cand *c)
{
	eng_plan_query q;
	eng_plan_costs pc;
	eng_policy p;
	eng_plan out;
	const srv_pool_job *pj = &job->pool;
	long long least = job_least(job), off = pj->off > least ? pj->off : least;
	long long top = off < avail ? off : avail;
	c->job = job;
	c->n = 0;
	if (job_query(job, &q) < 0 || top < least)
		return;
	srv_pool__plan_costs(job, &q, rate, &pc);
	q.costs = &pc;
	for (int k = 0; k < SRV_POOL_LEVELS; k++) {
		long long b = least + (top - least) * k / (SRV_POOL_LEVELS - 1);
		if (c->n && b == c->bytes[c->n - 1])
			continue;
		q.budget = (size_t)(b / ranks_of(job));
		double ms = eng_plan_search(&q, &p, &out) == 0 ? out.cost : DBL_MAX / 8;
		c->bytes[c->n] = b;
		c->cost[c->n++] = pj->priority * ms;
	}
}

/* The cheapest choice of one candidate per job within avail bytes, counted in units of
 * avail/units: choice[j]; 0, or -1 when even the least of each does not fit. */
static int choose(cand *c, int n, long long avail, int *choice)
{
	enum { UNITS = 1024 };
	double unit = (double)avail / UNITS, (*dp)[UNITS + 1] = calloc((size_t)n + 1,
		sizeof *dp);
	unsigned char (*pick)[UNITS + 1] = calloc((size_t)n + 1, sizeof *pick);
	int rc = -1;
	if (!dp || !pick)
		goto out;
	for (int u = 0; u <= UNITS; u++)
		dp[0][u] = 0;
	for (int j = 1; j <= n; j++)
		for (int u = 0; u <= UNITS; u++) {
			dp[j][u] = DBL_MAX;
			for (int k = 0; k < c[j - 1].n; k++) {
				int need = (int)((double)c[j - 1].bytes[k] / unit + 0.999999);
				if (need > u || dp[j - 1][u - need] == DBL_MAX)
					continue;
				double v = dp[j - 1][u - need] + c[j - 1].cost[k];
				if (v <= dp[j][u]) { /* on a tie, the larger budget */
					dp[j][u] = v;
					pick[j][u] = (unsigned char)k;
				}
			}
		}
	if (dp[n][UNITS] == DBL_MAX)
		goto out;
	for (int j = n, u = UNITS; j >= 1; j--) {
		choice[j - 1] = pick[j][u];
		u -= (int)((double)c[j - 1].bytes[pick[j][u]] / unit + 0.999999);
	}
	rc = 0;
out:
	free(dp);
	free(pick);
	return rc;
}

/* Tells the grows the division holds, once no shrink is awaited. */
static void grow_waiting(srv_server *srv)
{
	for (int i = 0; i < srv->n_jobs; i++) {
		const srv_job *j = srv->jobs[i];
		if (in_pool(j) && j->pool.ack_step != 0)
			return;
	}
	srv->pool.dividing = 0;
	srv->pool.scheduling = 1; /* admitted jobs start in the room the shrinks made */
	srv->pool.schedule(srv);
	srv->pool.scheduling = 0;
	if (srv->pool.refused) {
		/* a shrink was refused: the grows counted on it, so none is told; the next
		 * division knows the job's least better */
		srv->pool.refused = 0;
		srv_pool_changed(srv, "a job refused a share below its least");
		return;
	}
	for (int i = 0; i < srv->n_jobs; i++) {
		srv_job *j = srv->jobs[i];
		if (divisible(j) && j->pool.want > j->pool.share)
			tell(j, j->pool.want, "grow", srv->pool.why);
	}
	if (srv->pool.again) {
		srv->pool.again = 0;
		srv_pool_changed(srv, "a change during the last division");
	}
}

/* Sizes the divisible jobs (their want) in what the others leave, and tells the shrinks;
 * the grows follow them (grow_waiting). */
static void divide(srv_server *srv)
{
	cand *c = calloc((size_t)srv->n_jobs + 1, sizeof *c);
	int *choice = calloc((size_t)srv->n_jobs + 1, sizeof *choice), n = 0;
	long long avail = srv->pool.bytes;
	if (!c || !choice)
		goto out;
	for (int i = 0; i < srv->n_jobs; i++) /* a grow the last division left untold lapses */
		srv->jobs[i]->pool.want = srv->jobs[i]->pool.share;
	srv->pool.dividing = 1;
	for (int i = 0; i < srv->n_jobs; i++)
		if (squeezable(srv->jobs[i]))
			tell(srv->jobs[i], job_least(srv->jobs[i]), "shrink", "the job is paused: "
				"squeezed to its least");
	/* the others' shares after their shrinks: no grow is told before those are done */
	for (int i = 0; i < srv->n_jobs; i++)
		if (in_pool(srv->jobs[i]) && !divisible(srv->jobs[i]))
			avail -= job_after(srv->jobs[i]);
	for (int i = 0; i < srv->n_jobs; i++)
		if (divisible(srv->jobs[i])) {
			candidates(srv->jobs[i], avail, srv->jobs[i]->pool.rate, &c[n]);
			n += c[n].n > 0;
		}
	int fits = n && avail > 0 && choose(c, n, avail, choice) == 0;
	if (n && !fits) /* what the jobs hold regardless: their least, measured, came above
			 * what their admission counted */
		srv_log("the pool is overcommitted: the running jobs' least, measured, passes the "
			"%.1f MiB the others leave them", MIB(avail > 0 ? avail : 0));
	if (!fits) {
		grow_waiting(srv); /* nothing to size: what waited on the squeezes follows them */
		goto out;
	}
	long long left = avail, held = 0;
	for (int j = 0; j < n; j++) {
		c[j].job->pool.want = c[j].bytes[choice[j]];
		left -= c[j].job->pool.want;
		held += c[j].job->pool.share;
	}
	/* what the candidates' steps leave: to the jobs in order, up to their off peak (never
	 * down to it: a job whose least, measured, passed its planned off peak keeps its want;
	 * taken down, it refused the share, and the next division took it down again) */
	for (int j = 0; j < n && left > 0; j++) {
		srv_pool_job *pj = &c[j].job->pool;
		long long room = pj->off > pj->want ? pj->off - pj->want : 0;
		long long more = room < left ? room : left;
		pj->want += more;
		left -= more;
	}
	/* the shares as they are fit what the others leave: a division that moves none by
	 * SRV_POOL_STILL of it is not worth the switches */
	int still = held <= avail;
	for (int j = 0; j < n; j++) {
		srv_pool_job *pj = &c[j].job->pool;
		pj->rate_divided = pj->rate;
		pj->cost_divided = cost_ref(c[j].job);
		/* a grow of under SRV_POOL_STILL of its share is not worth a step's switch (a
		 * shrink always is: the others' grows count on it) */
		long long d = pj->want - pj->share;
		if (pj->share && d > 0 && d < (long long)((double)pj->share * SRV_POOL_STILL))
			pj->want = pj->share;
		still &= pj->share && llabs(pj->want - pj->share) <
			(long long)((double)pj->share * SRV_POOL_STILL);
	}
	for (int j = 0; still && j < n; j++) /* nothing worth a switch moves: none is told */
		c[j].job->pool.want = c[j].job->pool.share;
	for (int j = 0; j < n; j++)
		if (c[j].job->pool.want < c[j].job->pool.share)
			tell(c[j].job, c[j].job->pool.want, "shrink", srv->pool.why);
	grow_waiting(srv);
out:
	free(c);
	free(choice);
}

void srv_pool_changed(srv_server *srv, const char *why)
{
	if (!srv->pool.on)
		return;
	if (srv->pool.dividing) { /* after the shrinks under way (a job that ended owes none) */
		srv->pool.again = 1;
		grow_waiting(srv);
		return;
	}
	snprintf(srv->pool.why, sizeof srv->pool.why, "%s", why);
	divide(srv);
}

/* The job ran step `step`, or laid it out while paused, under the budget told last: a
 * shrink that applies by then is done, and the grows waiting for it may follow. */
static void laid(srv_job *job, int step)
{
	srv_pool_job *pj = &job->pool;
	if (step > pj->seen_step)
		pj->seen_step = step;
	if (pj->ack_step > 0 && step >= pj->ack_step) {
		pj->ack_step = 0;
		grow_waiting(job->srv);
	}
}

void srv_pool_step(srv_job *job, const json_t *data)
{
	srv_pool_job *pj = &job->pool;
	double ms = json_number_value(json_object_get(data, "step_ms"));
	double re = json_number_value(json_object_get(data, "recompute_ms"));
	int step = (int)json_integer_value(json_object_get(data, "step"));
	if (!job->srv->pool.on || pj->least <= 0)
		return;
	int first = pj->rate <= 0;
	if (ms > re)
		pj->rate = pj->model_flops / (ms - re);
	laid(job, step);
	if (first && pj->rate > 0)
		srv_pool_changed(job->srv, "a job ran its first step");
}

void srv_pool_auto_said(srv_job *job, const json_t *data)
{
	json_t *b = json_object_get(data, "budget_bytes");
	if (!job->srv->pool.on || job->pool.least <= 0 || !json_is_integer(b) ||
		json_integer_value(b) <= 0 || json_integer_value(b) * ranks_of(job) >
		job->pool.share)
		return; /* not under the share told last (an earlier budget's, or none) */
	laid(job, (int)json_integer_value(json_object_get(data, "step")));
}

void srv_pool_memory(srv_job *job, const json_t *data)
{
	json_t *r = json_object_get(data, "rss");
	json_t *cur = json_is_object(r) ? json_object_get(r, "current") : r;
	if (json_is_integer(cur))
		job->pool.rss = (long long)json_integer_value(cur);
}

void srv_pool_auto_reply(srv_job *job, const json_t *ret)
{
	srv_pool_job *pj = &job->pool;
	if (!ret) {
		/* refused: the worker keeps the budget it had, and needs more than it was told
		 * (its own least, measured): asked no less again */
		long long told = pj->share;
		pj->share = pj->told_from;
		pj->ack_step = 0;
		if (pj->floor < told + told / 20)
			pj->floor = told + told / 20;
		job->srv->pool.refused = 1;
		grow_waiting(job->srv);
		return;
	}
	if (pj->ack_step == -1) {
		pj->ack_step = (int)json_integer_value(json_object_get(ret, "applies_at_step"));
		publish(job, "shrink", pj->ack_step);
		if (pj->seen_step >= pj->ack_step) /* said done before this reply came */
			pj->ack_step = 0;
	}
	if (pj->ack_step <= 0)
		grow_waiting(job->srv);
}

void srv_pool_sweep(srv_server *srv)
{
	uint64_t now = srv_now_ms();
	if (!srv->pool.on || now - srv->pool.swept_ms < SRV_POOL_MS)
		return;
	srv->pool.swept_ms = now;
	for (int i = 0; i < srv->n_jobs; i++) {
		const srv_pool_job *pj = &srv->jobs[i]->pool;
		if (!divisible(srv->jobs[i]))
			continue;
		if (moved(pj->rate, pj->rate_divided) || moved(cost_ref(srv->jobs[i]),
			pj->cost_divided)) {
			srv_pool_changed(srv, "a job's pace or measured costs moved");
			return;
		}
	}
}

int srv_pool_divides(const srv_job *job)
{
	/* a job the pool plans no share for (device cuda, ranks elsewhere) is outside: its
	 * budget is its own */
	eng_plan_query q;
	return job->srv->pool.on && job->pool.known && !job->pool.own && job_query(job, &q) == 0;
}

int srv_pool_refuses(const srv_job *job, int cmd, const json_t *args, char *desc,
	size_t desclen)
{
	const char *what = cmd == PROTO_CMD_REMAT_AUTO ? "its budget is"
		: cmd == PROTO_CMD_REMAT_PROFILE ? "a probe runs policies over its budget, which is"
		: cmd == PROTO_CMD_REMAT_SET && json_is_true(json_object_get(args, "force"))
			? "--force turns its memory controller off, whose budget is" : NULL;
	if (!what || !job->srv->pool.on || job->pool.least <= 0)
		return 0;
	snprintf(desc, desclen, "job %s is in rematd's memory pool (rematd --memory): %s %s, "
		"which keeps every job's memory inside the pool; rematctl set %s priority=N weighs "
		"its share (a budget of its own is the spec's remat.budget); nothing changed",
		job->id, what, job->pool.own ? "its own remat.budget, reserved when it was admitted"
		: "the pool's share", job->id);
	return 1;
}

void srv_pool_set_priority(srv_job *job, int priority)
{
	job->pool.priority = priority;
	srv_log("job %s: priority %d", job->id, priority);
	if (in_pool(job))
		srv_pool_changed(job->srv, "a job's priority changed");
}

json_t *srv_pool_job_record(const srv_job *job)
{
	const srv_pool_job *pj = &job->pool;
	return json_pack("{s:i,s:b,s:I}", "priority", pj->priority, "own", pj->own, "floor_bytes",
		(json_int_t)pj->floor);
}

void srv_pool_job_read(srv_job *job, const json_t *o)
{
	srv_pool_job *pj = &job->pool;
	json_int_t pr = json_integer_value(json_object_get(o, "priority"));
	if (!json_is_object(o))
		return;
	pj->known = 1;
	pj->priority = pr >= 1 && pr <= PROTO_PRIORITY_MAX ? (int)pr : 1;
	pj->own = json_is_true(json_object_get(o, "own"));
	pj->floor = json_integer_value(json_object_get(o, "floor_bytes"));
	if (pj->floor < 0)
		pj->floor = 0;
}

json_t *srv_pool_job_json(const srv_job *job)
{
	const srv_pool_job *pj = &job->pool;
	if (!job->srv->pool.on || pj->least <= 0)
		return json_null();
	return json_pack("{s:I,s:I,s:I,s:i,s:b,s:o}", "share_bytes",
		(json_int_t)(in_pool(job) ? job_holds(job) : 0), "least_bytes",
		(json_int_t)job_least(job), "off_bytes", (json_int_t)pj->off, "priority",
		pj->priority, "own", pj->own,
		"rss_bytes", pj->rss && in_pool(job) ? json_integer((json_int_t)pj->rss)
						     : json_null());
}

json_t *srv_pool_json(const srv_server *srv)
{
	if (!srv->pool.on)
		return json_null();
	int n;
	long long reserved, taken = pool_taken(srv, &n, &reserved);
	json_t *jobs = json_array();
	for (int i = 0; jobs && i < srv->n_jobs; i++)
		if (in_pool(srv->jobs[i]))
			json_array_append_new(jobs, json_pack("{s:s,s:I}", "job", srv->jobs[i]->id,
				"share_bytes", (json_int_t)job_holds(srv->jobs[i])));
	return json_pack("{s:I,s:s,s:I,s:I,s:o}", "bytes", (json_int_t)srv->pool.bytes, "source",
		srv->pool.source, "given_bytes", (json_int_t)taken, "least_bytes",
		(json_int_t)reserved, "jobs", jobs ? jobs : json_array());
}
