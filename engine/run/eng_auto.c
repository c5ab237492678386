/* eng_auto.c - the memory controller's decisions and the cgroup budget (see eng_auto.h). */
#include "eng_auto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void eng_auto_set(eng_auto *a, size_t budget)
{
	memset(a, 0, sizeof *a);
	a->on = budget > 0;
	a->budget = budget;
	a->last_change = -1;
}

size_t eng_auto_room(const eng_auto *a)
{
	size_t keep = (size_t)((double)a->budget * ENG_AUTO_HEADROOM) + a->margin;
	return keep < a->budget ? a->budget - keep : 0;
}

int eng_auto_decide(eng_auto *a, const eng_plan_query *q, const eng_policy *cur,
	size_t measured_peak, int step, eng_policy *next, eng_plan *pred, char *why,
	size_t whylen)
{
	eng_plan now;
	eng_plan_query qq = *q;
	eng_plan_policy(q->cfg, q->B, q->T, q->chunk_rows, cur, &now);
	size_t now_peak = q->fixed + (a->held ? q->optional : 0) + now.peak_bytes;
	double now_cost = eng_plan_policy_cost(q->cfg, q->B, q->T, q->chunk_rows, q->costs, cur);
	if (q->optional && !a->held) /* doing without the optional bytes costs now too */
		now_cost += q->optional_cost;
	/* a prediction that fell short: aim that much lower from now on */
	if (measured_peak > now_peak && measured_peak - now_peak > a->margin)
		a->margin = measured_peak - now_peak;
	qq.budget = eng_auto_room(a);
	if (q->budget && q->budget < qq.budget) /* what the system refused, less nothing */
		qq.budget = q->budget;
	int fits = eng_plan_search(&qq, next, pred) == 0;
	if (!fits || eng_policy_equal(next, cur) || a->last_change < 0)
		a->held = fits && pred->optional_held; /* the optional bytes follow the answer */
	if (!fits) {
		snprintf(why, whylen, "no policy fits the budget of %.1f MiB (less %.0f%% headroom):"
			 " the least any needs is %.1f MiB", a->budget / 1048576.0,
			 100 * ENG_AUTO_HEADROOM, pred->peak_bytes / 1048576.0);
		return eng_policy_equal(next, cur) ? 0 : -1;
	}
	if (eng_policy_equal(next, cur)) {
		a->calm = 0;
		return 0;
	}
	size_t seen = measured_peak > now_peak ? measured_peak : now_peak;
	if (a->last_change < 0) {
		snprintf(why, whylen, "budget %.1f MiB", a->budget / 1048576.0);
	} else if (seen > qq.budget) {
		snprintf(why, whylen, "peak %.1f MiB within %.0f%% of the budget of %.1f MiB",
			 seen / 1048576.0, 100 * ENG_AUTO_HEADROOM, a->budget / 1048576.0);
	} else if (pred->cost < now_cost) {
		/* faster, and there is room: only after a calm spell, never right after a change */
		if (++a->calm < ENG_AUTO_CALM || step - a->last_change < ENG_AUTO_GAP)
			return 0;
		snprintf(why, whylen, "room under the budget of %.1f MiB for a faster policy",
			 a->budget / 1048576.0);
	} else {
		return 0; /* the same cost, or slower while there is room: no reason to move */
	}
	a->last_change = step;
	a->calm = 0;
	a->held = pred->optional_held;
	return 1;
}

/* The directory of this process's cgroup v2 (from proc_cgroup's "0::" line) under root,
 * into dir: 0, or -1 with err. */
static int cgroup_dir(const char *root, const char *proc_cgroup, char *dir, size_t len,
	eng_err *err)
{
	char line[4096];
	char *rel = NULL;
	FILE *f = fopen(proc_cgroup, "r");
	if (!f)
		return eng_errf(err, "cannot read '%s': %s", proc_cgroup, strerror(errno));
	while (fgets(line, sizeof line, f))
		if (strncmp(line, "0::", 3) == 0) {
			rel = line + 3;
			rel[strcspn(rel, "\n")] = '\0';
			break;
		}
	fclose(f);
	if (!rel)
		return eng_errf(err, "this process is in no cgroup v2 (no '0::' line in '%s')",
			proc_cgroup);
	if ((size_t)snprintf(dir, len, "%s%s", root, strcmp(rel, "/") ? rel : "") >= len)
		return eng_errf(err, "the cgroup's path is too long");
	return 0;
}

/* A cgroup file holding one number of bytes (or "max"): 0 with *bytes (0 for "max"), or
 * -1 with err. */
static int cgroup_bytes(const char *dir, const char *name, size_t *bytes, eng_err *err)
{
	char path[4200], val[64];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "r");
	if (!f)
		return eng_errf(err, "cannot read the cgroup's '%s': %s", path, strerror(errno));
	int got = fgets(val, sizeof val, f) != NULL;
	fclose(f);
	val[strcspn(val, "\n")] = '\0';
	char *end;
	errno = 0;
	unsigned long long v = got ? strtoull(val, &end, 10) : 0;
	if (got && strcmp(val, "max") == 0) {
		*bytes = 0;
		return 0;
	}
	if (!got || errno || end == val || *end)
		return eng_errf(err, "the cgroup's '%s' says '%.16s', not a number of bytes", path,
			got ? val : "");
	*bytes = (size_t)v;
	return 0;
}

int eng_auto_cgroup(const char *root, const char *proc_cgroup, size_t *bytes, eng_err *err)
{
	char dir[4096];
	size_t v;
	if (cgroup_dir(root, proc_cgroup, dir, sizeof dir, err) < 0 ||
		cgroup_bytes(dir, "memory.max", &v, err) < 0)
		return -1;
	if (!v)
		return eng_errf(err, "the cgroup sets no memory limit ('%s/memory.max' says 'max')",
			dir);
	*bytes = v; /* the controller keeps its headroom below it */
	return 0;
}

int eng_auto_cg_open(eng_auto_cg *cg, const char *root, const char *proc_cgroup, eng_err *err)
{
	char path[4200];
	size_t v;
	cg->peak_fd = -1;
	if (cgroup_dir(root, proc_cgroup, cg->dir, sizeof cg->dir, err) < 0 ||
		cgroup_bytes(cg->dir, "memory.current", &v, err) < 0)
		return -1;
	snprintf(path, sizeof path, "%s/memory.peak", cg->dir);
	cg->peak_fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW); /* -1: no such file */
	return 0;
}

void eng_auto_cg_begin(eng_auto_cg *cg)
{
	/* Linux 6.12: what this descriptor reads of memory.peak starts again from now */
	cg->windowed = cg->peak_fd >= 0 && pwrite(cg->peak_fd, "0\n", 2, 0) == 2;
}

size_t eng_auto_cg_peak(eng_auto_cg *cg)
{
	size_t cur = 0, peak = 0;
	eng_err err;
	char val[64];
	cgroup_bytes(cg->dir, "memory.current", &cur, &err);
	ssize_t n = cg->windowed ? pread(cg->peak_fd, val, sizeof val - 1, 0) : -1;
	if (n > 0) {
		val[n] = '\0';
		peak = (size_t)strtoull(val, NULL, 10);
	}
	return peak > cur ? peak : cur;
}

void eng_auto_cg_close(eng_auto_cg *cg)
{
	if (cg->peak_fd >= 0)
		close(cg->peak_fd);
	cg->peak_fd = -1;
}

const char *eng_auto_cgroup_root(void)
{
	const char *e = getenv("REMAT_CGROUP_ROOT");
	return e && *e ? e : "/sys/fs/cgroup";
}

const char *eng_auto_proc_cgroup(void)
{
	const char *e = getenv("REMAT_PROC_CGROUP");
	return e && *e ? e : "/proc/self/cgroup";
}
