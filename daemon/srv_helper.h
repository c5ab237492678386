/* srv_helper.h - short-lived remat-train runs that answer rematd a question with one JSON
 * line: `--check` (is this job spec good, as the job's user? its model shape and policy)
 * and `--info` (the BLAS kernel and backends a worker really runs).
 *
 * The daemon never reads a client's files itself, nor links the engine's maths: it asks
 * remat-train, as the client (--as, when rematd is root and the client is not), and reads
 * the answer on a pipe from the event loop. A helper is bounded in time (killed after its
 * timeout) and in output (SRV_HELPER_OUT bytes). A spec given to it is written to a file of
 * rematd's own, STATE_DIR/tmp/helper-N.json (mode 0600), removed when the helper ends.
 */
#ifndef SRV_HELPER_H
#define SRV_HELPER_H

#include <jansson.h>
#include <uv.h>

#include "srv.h"

#define SRV_HELPER_OUT (256u << 10) /* bytes of a helper's output read; more is an error */
#define SRV_HELPER_MAX 16           /* helpers at once; job-start past it: Busy */
#define SRV_HELPER_PER_UID (SRV_HELPER_MAX / 4) /* of them for one user but root or rematd's:
				     * no user holds every check slot */
#define SRV_CHECK_MS 120000         /* a --check may take this long (it hashes init_from) */
#define SRV_INFO_MS 30000           /* --info (the first CUDA probe of a GPU machine) */
#define SRV_INFO_WAIT_MS 3000       /* how long the first start waits for it before serving */

/* Called once per helper: out is the object of its last line (borrowed; NULL when it did
 * not answer), why says what went wrong then (spawn failure, time-out, a signal, no JSON).
 * An answer with "ok": false is still an answer: out is set. */
typedef void (*srv_helper_done_fn)(srv_server *srv, void *ud, const json_t *out,
	const char *why);

/* Runs srv->worker_path with args (NULL-terminated, after the program name), then the
 * spec's file when spec is not NULL; as the user as when as is not NULL and
 * srv_cred_drops (a "--as" argument is added). done is called later, from the loop, never
 * from here. Returns 0, or -1 with a message (done is then never called). */
int srv_helper_run(srv_server *srv, const char *what, const char *const *args,
	const json_t *spec, const eng_cred *as, int timeout_ms, srv_helper_done_fn done,
	void *ud, char *err, size_t errlen);

/* Helpers running now; those running for uid. */
int srv_helper_count(const srv_server *srv);
int srv_helper_count_of(const srv_server *srv, uid_t uid);
/* SIGKILLs every helper (shutdown) and calls their done callbacks at once, with no answer
 * and why: their requests are answered before the connections close. */
void srv_helper_kill_all(srv_server *srv, const char *why);

#endif
