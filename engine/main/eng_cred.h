/* eng_cred.h - the user a worker runs as: remat-train --as UID:GID[:G1,G2,...].
 *
 * rematd running as root starts a client's job as that client (its uid, gid and
 * supplementary groups, from SO_PEERCRED and SO_PEERGROUPS), so that the job can read and
 * write exactly what the client could. The worker drops everything before it opens any file
 * the spec names: supplementary groups, then the gid, then the uid, and checks that root
 * cannot be regained. Not here: who may connect (rematd's srv_conn.c).
 */
#ifndef ENG_CRED_H
#define ENG_CRED_H

#include <stddef.h>
#include <sys/types.h>

#define ENG_CRED_MAX_GROUPS 256 /* supplementary groups kept (Linux's NGROUPS_MAX is 65536) */

typedef struct eng_cred {
	uid_t uid;
	gid_t gid;
	int ngroups;                       /* entries of groups used */
	gid_t groups[ENG_CRED_MAX_GROUPS]; /* supplementary groups */
} eng_cred;

/* Parses "UID:GID" or "UID:GID:G1,G2,..." (decimal); -1 with a message in err. */
int eng_cred_parse(const char *arg, eng_cred *c, char *err, size_t errlen);
/* Becomes c: setgroups, setgid, setuid, then checks that the old ids are gone. Needs root;
 * -1 with a message when any step fails (the caller must then exit). */
int eng_cred_drop(const eng_cred *c, char *err, size_t errlen);

#endif
