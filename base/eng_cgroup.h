/* eng_cgroup.h - this process's cgroup v2, as the memory controller and rematd's pool read
 * it: the cgroup's directory, one of its files holding a number of bytes, and its memory
 * limit. In base/, so that rematd (the pool's "auto") and the worker (a budget "cgroup")
 * read it alike.
 *
 * Not here: watching a cgroup's memory over a step (eng_auto.h's eng_auto_cg).
 */
#ifndef ENG_CGROUP_H
#define ENG_CGROUP_H

#include <stddef.h>

#include "eng_err.h"

/* The directory of this process's cgroup v2 (from proc_cgroup's "0::" line) under root,
 * into dir: 0, or -1 with err. */
int eng_cgroup_dir(const char *root, const char *proc_cgroup, char *dir, size_t len,
	eng_err *err);
/* A cgroup file holding one number of bytes (or "max"): 0 with *bytes (0 for "max"), or
 * -1 with err. */
int eng_cgroup_bytes(const char *dir, const char *name, size_t *bytes, eng_err *err);
/* The cgroup's memory limit, memory.max: the cgroup this process is in (from proc_cgroup,
 * normally /proc/self/cgroup, the "0::" line) under root (normally /sys/fs/cgroup). 0 with
 * *bytes, or -1 with err (no cgroup v2, no limit: "max"). */
int eng_cgroup_limit(const char *root, const char *proc_cgroup, size_t *bytes, eng_err *err);

/* /sys/fs/cgroup and /proc/self/cgroup, or $REMAT_CGROUP_ROOT and $REMAT_PROC_CGROUP (a
 * fake tree, for tests). */
const char *eng_cgroup_root(void);
const char *eng_cgroup_proc(void);

#endif
