/* srv_metrics.h - job-metrics: a window of a job's metrics.jsonl (srv_metrics.c). */
#ifndef SRV_METRICS_H
#define SRV_METRICS_H

#include <jansson.h>

#include "proto.h"
#include "srv_job.h"

/* {"lines": [objects], "offset", "next" (where to ask from next), "size" (of the file),
 * "state"} for job-metrics' args ("offset", "lines"); a job that has not written any yet
 * has none. NULL with the class and a description when the file cannot be read. */
json_t *srv_metrics_read(srv_job *job, const json_t *args, proto_errclass *ec, char *desc,
	size_t desclen);

#endif
