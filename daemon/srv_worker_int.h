/* srv_worker_int.h - what srv_worker.c and srv_worker_read.c share; not part of the
 * daemon's interface (srv_worker.h is).
 */
#ifndef SRV_WORKER_INT_H
#define SRV_WORKER_INT_H

#include <stddef.h>

#include "srv_job.h"

/* One line from job's worker (the framer's callback, ud the job): a greeting, a reply or an
 * event, each acted on; a bad line is logged. Returns 0 (go on). */
int srv_worker__on_line(const char *line, size_t len, void *ud);

#endif
