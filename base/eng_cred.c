/* eng_cred.c - parsing --as and dropping to it (see eng_cred.h). */
#include "eng_cred.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A decimal id in s, ended by one of the characters in ends (or the string's end); 0 with
 * *v and *next, -1 otherwise. */
static int parse_id(const char *s, const char *ends, unsigned long *v, const char **next)
{
	char *end;
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	*v = strtoul(s, &end, 10);
	if (errno || *v >= (unsigned long)UINT_MAX || (*end && !strchr(ends, *end)))
		return -1;
	*next = end;
	return 0;
}

void eng_cred_format(const eng_cred *c, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "%lu:%lu", (unsigned long)c->uid,
		(unsigned long)c->gid);
	for (int i = 0; n < len && i < c->ngroups; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%lu", i ? "," : ":",
			(unsigned long)c->groups[i]);
}

int eng_cred_parse(const char *arg, eng_cred *c, char *err, size_t errlen)
{
	unsigned long v;
	const char *p = arg;
	memset(c, 0, sizeof *c);
	if (parse_id(p, ":", &v, &p) < 0 || *p != ':')
		goto bad;
	c->uid = (uid_t)v;
	if (parse_id(p + 1, ":", &v, &p) < 0)
		goto bad;
	c->gid = (gid_t)v;
	if (*p == ':') {
		if (!*++p)
			goto bad; /* a ':' says groups follow */
		while (*p) {
			if (c->ngroups >= ENG_CRED_MAX_GROUPS) {
				snprintf(err, errlen, "--as: more than %d groups", ENG_CRED_MAX_GROUPS);
				return -1;
			}
			if (parse_id(p, ",", &v, &p) < 0)
				goto bad;
			c->groups[c->ngroups++] = (gid_t)v;
			if (*p == ',' && !*++p)
				goto bad;
		}
	}
	return 0;
bad:
	snprintf(err, errlen, "--as '%.64s': expected UID:GID[:GROUP,...] in decimal", arg);
	return -1;
}

int eng_cred_drop(const eng_cred *c, char *err, size_t errlen)
{
	/* the order matters: groups and gid need root, which setuid gives away */
	if (setgroups((size_t)c->ngroups, c->groups) < 0) {
		snprintf(err, errlen, "cannot set the groups of uid %lu: %s", (unsigned long)c->uid,
			strerror(errno));
		return -1;
	}
	if (setgid(c->gid) < 0 || setuid(c->uid) < 0) {
		snprintf(err, errlen, "cannot become uid %lu gid %lu: %s", (unsigned long)c->uid,
			(unsigned long)c->gid, strerror(errno));
		return -1;
	}
	if (getuid() != c->uid || geteuid() != c->uid || getgid() != c->gid ||
		getegid() != c->gid || (c->uid != 0 && (setuid(0) == 0 || seteuid(0) == 0))) {
		snprintf(err, errlen, "dropping to uid %lu left a way back to root",
			(unsigned long)c->uid);
		return -1;
	}
	return 0;
}
