/* eng_cgroup.c - this process's cgroup v2: its directory, a number in one of its files, its
 * memory limit (see eng_cgroup.h). */
#include "eng_cgroup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int eng_cgroup_dir(const char *root, const char *proc_cgroup, char *dir, size_t len,
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

int eng_cgroup_bytes(const char *dir, const char *name, size_t *bytes, eng_err *err)
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

int eng_cgroup_limit(const char *root, const char *proc_cgroup, size_t *bytes, eng_err *err)
{
	char dir[4096];
	size_t v;
	if (eng_cgroup_dir(root, proc_cgroup, dir, sizeof dir, err) < 0 ||
		eng_cgroup_bytes(dir, "memory.max", &v, err) < 0)
		return -1;
	if (!v)
		return eng_errf(err, "the cgroup sets no memory limit ('%s/memory.max' says 'max')",
			dir);
	*bytes = v; /* the controller keeps its headroom below it */
	return 0;
}

const char *eng_cgroup_root(void)
{
	const char *e = getenv("REMAT_CGROUP_ROOT");
	return e && *e ? e : "/sys/fs/cgroup";
}

const char *eng_cgroup_proc(void)
{
	const char *e = getenv("REMAT_PROC_CGROUP");
	return e && *e ? e : "/proc/self/cgroup";
}
