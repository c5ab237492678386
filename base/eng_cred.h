/* eng_cred.h - the user a worker runs as: remat-train --as UID:GID[:G1,G2,...].
 *
 * rematd running as root starts a client's job as that client (its uid, gid and
 * supplementary groups, from SO_PEERCRED and SO_PEERGROUPS), so that the job can read and
 * write exactly what the client could. The worker drops everything before it opens any file
 * the spec names: supplementary groups, then the gid, then the uid, and checks that root
 * cannot be regained. rematd formats the argument, remat-train parses it: one module for
 * both. Not here: who may connect (rematd's srv_conn.c).
 */
#ifndef ENG_CRED_H
#define ENG_CRED_H

#include <stddef.h>
#include <sys/types.h>

#define ENG_CRED_MAX_GROUPS 256 /* supplementary groups kept (Linux's NGROUPS_MAX is 65536) */
#define ENG_CRED_ARG_LEN (ENG_CRED_MAX_GROUPS * 11 + 24) /* "UID:GID:G1,...": always fits */

typedef struct eng_cred {
	uid_t uid;
	gid_t gid;
	int ngroups;                       /* entries of groups used */
	gid_t groups[ENG_CRED_MAX_GROUPS]; /* supplementary groups */
} eng_cred;

/* "UID:GID" or "UID:GID:G1,G2,..." (decimal) into buf (ENG_CRED_ARG_LEN bytes). */
void eng_cred_format(const eng_cred *c, char *buf, size_t len);
/* Parses what eng_cred_format writes; -1 with a message in err. */
int eng_cred_parse(const char *arg, eng_cred *c, char *err, size_t errlen);
/* Becomes c: setgroups, setgid, setuid, then checks that the old ids are gone. Needs root;
 * -1 with a message when any step fails (the caller must then exit). */
int eng_cred_drop(const eng_cred *c, char *err, size_t errlen);

#endif
