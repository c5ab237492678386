/* wk_dp.h - the worker's side of data parallelism (eng_dp.h): one control point.
 *
 * Rank 0 is the worker rematd or a client speaks to; the other ranks follow it. At each step
 * boundary rank 0 broadcasts what it applied there (the commands it took: remat-set,
 * job-set, remat-profile, remat-auto; a stop or a pause changes only what rank 0 does next),
 * then "step" or "end"; every rank applies the same changes before the same step, the one a
 * reply named. After each step every rank's counters (memory by category, saved bytes by
 * section, step time, RSS) are gathered on rank 0, which answers mem-stats from them.
 */
#ifndef WK_DP_H
#define WK_DP_H

#include <stddef.h>

#include "wk_ctl.h"
#include "eng_mem.h"
#include "eng_train.h"

/* A boundary's message, built by rank 0 and received by the others. */
typedef struct wk_dp_msg {
	unsigned char *buf;  /* the commands, one after another (wk_dp.c) */
	size_t len, cap;
	int end;             /* the run is over: no step follows */
	int failed;          /* (with end) it failed */
	int gather;          /* not a step: a save gathers the optimizer's parts
			      * (eng_trainer_gather_moments), then the next message */
} wk_dp_msg;

/* Rank 0: cmd, applied at this boundary, goes to the others with the next message. */
int wk_dp_note(wk_dp_msg *m, const wk_ctl_cmd *cmd);
/* Rank 0: the boundary's message (step, or end), then empty for the next. */
int wk_dp_send(wk_dp_msg *m, int end, int failed, eng_err *err);
/* Rank 0, a save of a sharded optimizer: the others to join eng_trainer_gather_moments
 * now (with the commands noted so far, which they apply first). */
int wk_dp_send_gather(wk_dp_msg *m, eng_err *err);
/* The other ranks: the next message (waiting, without spinning, while rank 0 is paused). */
int wk_dp_recv(wk_dp_msg *m, eng_err *err);
/* The commands of a received message, to apply in order (free with wk_ctl_cmd_free). */
wk_ctl_cmd *wk_dp_cmds(const wk_dp_msg *m);
void wk_dp_free(wk_dp_msg *m);

/* Gathers every rank's counters after step st to rank 0's controller (c NULL on the
 * others): every rank calls it after every step. */
int wk_dp_gather(const eng_trainer *tr, const eng_step_stats *st, wk_ctl *c, eng_err *err);

#endif
