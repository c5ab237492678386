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

int eng_auto_cg_open(eng_auto_cg *cg, const char *root, const char *proc_cgroup, eng_err *err)
{
	char path[4200];
	size_t v;
	cg->peak_fd = -1;
	if (eng_cgroup_dir(root, proc_cgroup, cg->dir, sizeof cg->dir, err) < 0 ||
		eng_cgroup_bytes(cg->dir, "memory.current", &v, err) < 0)
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
	eng_cgroup_bytes(cg->dir, "memory.current", &cur, &err);
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
