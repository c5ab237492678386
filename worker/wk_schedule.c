/* wk_schedule.c - --remat-schedule: its entries parsed and checked at the start (see
 * wk_run.h). Not here: asking for an entry's policy when its step comes (wk_run.c).
 */
#include "wk_run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 when item starts a schedule entry ("STEP:..."; a ':' before any '='), 0 for one more
 * item of the entry before it ("head=chunked"). */
static int starts_entry(const char *item)
{
	const char *colon = strchr(item, ':'), *eq = strchr(item, '=');
	return colon && (!eq || colon < eq);
}

/* Splits "0:off,5:full,9:h.0-1=selective,head=chunked" into entries sorted by step (stable
 * for equal steps). An item that does not start with "STEP:" continues the entry before
 * it, so a policy is written as it is printed (items joined by ','); ';' works too. */
int wk_schedule_parse(const char *arg, wk_schedule *sc)
{
	char *copy = strdup(arg), *save = NULL;
	wk_sched_entry *e = sc->e;
	int *n = &sc->n, rc = -1;
	*n = 0;
	if (!copy)
		return -1;
	for (char *it = strtok_r(copy, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
		if (!starts_entry(it)) {
			size_t len = *n ? strlen(e[*n - 1].text) : 0;
			if (*n == 0 || len + 1 + strlen(it) >= sizeof e->text) {
				fprintf(stderr, "remat-train: bad --remat-schedule entry '%.64s' "
						"(expected STEP:POLICY)\n", it);
				goto out;
			}
			snprintf(e[*n - 1].text + len, sizeof e->text - len, ",%s", it);
			continue;
		}
		char *colon = strchr(it, ':'), *end;
		if (*n >= WK_MAX_SCHEDULE) {
			fprintf(stderr, "remat-train: too many --remat-schedule entries (at most %d)\n",
				WK_MAX_SCHEDULE);
			goto out;
		}
		*colon = '\0';
		errno = 0;
		long at = strtol(it, &end, 10);
		if (errno || end == it || *end || at < 0 || at > 1000000000 ||
			strlen(colon + 1) >= sizeof e->text || !colon[1]) {
			fprintf(stderr, "remat-train: bad step '%.32s' in --remat-schedule\n", it);
			goto out;
		}
		e[*n].at = (int)at;
		snprintf(e[*n].text, sizeof e->text, "%s", colon + 1);
		(*n)++;
	}
	for (int i = 1; i < *n; i++) /* insertion sort: stable */
		for (int j = i; j > 0 && e[j - 1].at > e[j].at; j--) {
			wk_sched_entry t = e[j];
			e[j] = e[j - 1];
			e[j - 1] = t;
		}
	rc = 0;
out:
	free(copy);
	return rc;
}

/* Every --remat-schedule entry checked now, not hours into the run when it is reached:
 * 0, or 2 after saying what is wrong. */
int wk_schedule_check(const eng_trainer *tr, const wk_schedule *sc)
{
	eng_policy chk = tr->policy;
	eng_err err;
	const wk_sched_entry *sched = sc->e;
	for (int i = 0; i < sc->n; i++) {
		if (sched[i].at >= tr->spec.steps) {
			fprintf(stderr, "remat-train: --remat-schedule step %d is at or past the end of "
					"the run (steps %d)\n", sched[i].at, tr->spec.steps);
			return 2;
		}
		if (eng_policy_parse(&chk, &tr->aliases, sched[i].text, &err) < 0 ||
			eng_trainer_check_policy(tr, &chk, &err) < 0) {
			fprintf(stderr, "remat-train: --remat-schedule '%s': %s\n", sched[i].text,
				err.msg);
			return 2;
		}
	}
	return 0;
}
