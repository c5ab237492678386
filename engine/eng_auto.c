/* eng_auto.c - the memory controller's decisions and the cgroup budget (see eng_auto.h). */
#include "eng_auto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int eng_auto_cgroup(const char *root, const char *proc_cgroup, size_t *bytes, eng_err *err)
{
	char line[4096], path[4096 + 64], val[64];
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
	snprintf(path, sizeof path, "%s%s/memory.max", root, strcmp(rel, "/") ? rel : "");
	f = fopen(path, "r");
	if (!f)
		return eng_errf(err, "cannot read the cgroup's limit '%s': %s", path, strerror(errno));
	int got = fgets(val, sizeof val, f) != NULL;
	fclose(f);
	val[strcspn(val, "\n")] = '\0';
	char *end;
	errno = 0;
	unsigned long long v = got ? strtoull(val, &end, 10) : 0;
	if (!got || strcmp(val, "max") == 0 || errno || end == val || *end || v == 0)
		return eng_errf(err, "the cgroup sets no memory limit ('%s' says '%.16s')", path,
			got ? val : "");
	*bytes = (size_t)v; /* the controller keeps its headroom below it */
	return 0;
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
