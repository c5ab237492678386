/* srv_auto.h - a job's memory controller (remat-auto, a spec's remat.budget) as rematd keeps
 * it in the job's record: the budget and where it comes from, or off. It is part of the job
 * (design.md §11): a resume's worker starts with it, a restarted rematd lists it, and job-status
 * of a job without a worker answers it.
 *
 * What rematd knows of it, in the order the worker's channel brings it:
 *  - job-start: the spec's remat.budget (a size: source "size"; "cgroup"), else off;
 *  - remat-auto's reply: the budget asked for ("size" for budget_bytes, "cgroup", "device"),
 *    or off, from the step it applies at;
 *  - remat-set's reply: "controller": "off" (force handed control back), from its step;
 *  - REMAT_AUTO events: a budget (source kept, "size" when none was on), or a null policy:
 *    the controller let go;
 *  - the worker's job-status (rematd asks it with the figures, every SRV_FIGURES_MS and
 *    before a job-stop): "auto" (null: off; {budget_bytes, source, pinned, least_bytes}),
 *    else "auto_budget_bytes" (null: off).
 * A report of a step before the one a change asked for applies at says what was before it,
 * and a worker says nothing of its spec's budget before its first step (the controller
 * starts at that boundary): such reports are not taken (from_step).
 *
 * On disk, the record's "auto": null (off) or {"budget_bytes": N or null, "source",
 * "pinned", "least_bytes": N or null}. A record of an earlier rematd that has no "auto" gets
 * the controller its spec started (srv_auto_from_spec on the spec its worker ran).
 */
#ifndef SRV_AUTO_H
#define SRV_AUTO_H

#include <jansson.h>

typedef struct srv_auto {
	int known;              /* 0: not known (a record without "auto" whose spec cannot be
				 * read): a resume runs its spec's own remat.budget */
	int on;                 /* 1: the controller keeps a budget */
	long long budget_bytes; /* the budget; 0 while not known (cgroup, before the worker read
				 * memory.max) */
	char source[8];         /* "size", "cgroup" or "device" */
	int pinned;             /* the worker's last word: a policy set by the user is held */
	long long least_bytes;  /* the worker's last word on the least any policy needs; 0: none */
	int from_step;          /* the worker's reports count from this step on */
} srv_auto;

/* The controller a spec starts (its remat.budget), or off; known. */
void srv_auto_from_spec(srv_auto *a, const json_t *spec);
/* A new worker whose first step is first_step: reports count from there. */
void srv_auto_spawned(srv_auto *a, int first_step);

/* What the worker said; each returns 1 when the record changed (to be written). */
int srv_auto_note_status(srv_auto *a, const json_t *status);
int srv_auto_note_event(srv_auto *a, const json_t *data);
/* remat-auto's return; asked: "size" (budget_bytes), "cgroup", "device" or "off". */
int srv_auto_note_auto(srv_auto *a, const char *asked, const json_t *ret);
int srv_auto_note_set(srv_auto *a, const json_t *ret);

/* The record's "auto" (new reference: null when off), or NULL when not known. */
json_t *srv_auto_json(const srv_auto *a);
/* The record's "auto" (present: known), else not known. */
void srv_auto_load(srv_auto *a, const json_t *record);
/* job-status' "auto_budget_bytes" and "auto" into o (null when off or not known). */
void srv_auto_status(const srv_auto *a, json_t *o);
/* A resume's spec: remat.budget the record's (bytes, or "cgroup"), none when off, the
 * spec's own when not known. 0, or -1 when out of memory. */
int srv_auto_spec(const srv_auto *a, json_t *spec);
/* What the controller is, for the log ("off", "1073741824 bytes (size)"). */
void srv_auto_format(const srv_auto *a, char *buf, size_t len);

#endif
