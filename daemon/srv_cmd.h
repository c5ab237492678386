/* srv_cmd.h - rematd's requests: one line from a client in, replies out.
 *
 * Each line is parsed (proto_request_parse), its command looked up and its arguments
 * validated strictly (proto_args_validate) before anything happens. Daemon-scope commands
 * (daemon-info, daemon-shutdown, job-start, job-list) and connection-scope ones (subscribe,
 * unsubscribe) are answered here; job-scope ones go to the job's worker when it has one,
 * and otherwise are answered from the job table (job-status) or refused with InvalidState.
 * Bad input of any kind gets an error reply; nothing a client sends ends the daemon.
 */
#ifndef SRV_CMD_H
#define SRV_CMD_H

#include <stddef.h>

#include "srv_conn.h"

/* Handles one request line (without its newline) from connection c. */
void srv_cmd_handle(srv_conn *c, const char *line, size_t len);
/* remat-train --info answered (or failed): the daemon-info requests waiting get theirs. */
void srv_cmd_info_ready(srv_server *srv);

#endif
