/* cli_wait.h - `rematctl remat set --wait`: a policy change and then its outcome.
 *
 * A remat-set reply only says when the change is to apply (applies_at_step): at that step
 * boundary the worker still fits the policy to the memory it has, and may refuse it. With
 * --wait the client subscribes to the job's REMAT_APPLIED, REMAT_FAILED and
 * JOB_STATE_CHANGED events before it sends remat-set (so that no outcome can come before
 * the subscription), prints the reply, then waits for the outcome: REMAT_APPLIED at that
 * step or later (applied, status 0), REMAT_FAILED of that step (the reason and the policy
 * the step ran under, status 1), or the job's end first (status 1; a REMAT_APPLIED with
 * at_resume, which a worker sends as it ends, is no outcome: it names the policy a resume
 * will run under). Not here: the request
 * itself (cli_cmd.c builds it), the reply's printing (cli_show.c).
 */
#ifndef CLI_WAIT_H
#define CLI_WAIT_H

#include "cli_cmd.h"
#include "cli_conn.h"

/* The events --wait subscribes to, NULL-terminated. */
extern const char *const cli_wait_events[];

/* Subscribes, sends cmd's request req (borrowed), prints the reply as run_request would
 * (cmd->show, or one JSON line with --json), then waits up to --timeout (default
 * CLI_DEFERRED_TIMEOUT_MS) for the outcome and prints it (--json: the deciding event as one
 * JSON line). Returns an exit status: CLI_EXIT_OK once applied; CLI_EXIT_FAIL for an error
 * reply, a change refused at its boundary, a job that ended first, or a reply with no step
 * to wait for (rematd queued it); CLI_EXIT_CONN for a lost connection or no outcome in
 * time. */
int cli_wait_run(cli_conn *c, const cli_command *cmd, const cli_args *a, const json_t *req);

#endif
