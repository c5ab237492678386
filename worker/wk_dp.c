/* wk_dp.c - rank 0's boundaries broadcast, every rank's counters gathered (see wk_dp.h). */
#include "wk_dp.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_backend.h"
#include "eng_dp.h"

/* One command as it travels: what a follower applies (every rank runs the same build, so
 * the policy goes as its bytes). */
typedef struct dp_cmd {
	int32_t op;
	int32_t rounds;
	uint64_t budget;
	eng_policy policy;
	uint32_t set_len;     /* then set_len bytes of job-set's JSON */
} dp_cmd;

/* The fixed part of a boundary, broadcast first. */
typedef struct dp_head {
	int32_t end, failed, gather, pad;
	uint64_t len;
} dp_head;

static int grow(wk_dp_msg *m, size_t more)
{
	if (m->len + more <= m->cap)
		return 0;
	size_t cap = m->cap ? m->cap : 4096;
	while (cap < m->len + more)
		cap *= 2;
	unsigned char *b = realloc(m->buf, cap);
	if (!b)
		return -1;
	m->buf = b;
	m->cap = cap;
	return 0;
}

int wk_dp_note(wk_dp_msg *m, const wk_ctl_cmd *cmd)
{
	if (eng_dp_size() == 1 || eng_dp_rank() != 0)
		return 0;
	char *set = cmd->set ? json_dumps(cmd->set, JSON_COMPACT) : NULL;
	dp_cmd d;
	memset(&d, 0, sizeof d);
	d.op = cmd->op;
	d.rounds = cmd->rounds;
	d.budget = cmd->budget;
	d.policy = cmd->policy;
	d.set_len = set ? (uint32_t)strlen(set) : 0;
	int rc = grow(m, sizeof d + d.set_len);
	if (rc == 0) {
		memcpy(m->buf + m->len, &d, sizeof d);
		if (d.set_len)
			memcpy(m->buf + m->len + sizeof d, set, d.set_len);
		m->len += sizeof d + d.set_len;
	}
	free(set);
	return rc;
}

static int send_head(wk_dp_msg *m, dp_head h, eng_err *err)
{
	if (eng_dp_size() == 1)
		return 0;
	int rc = eng_dp_bcast(&h, sizeof h, err) < 0 ||
		(m->len && eng_dp_bcast(m->buf, m->len, err) < 0) ? -1 : 0;
	m->len = 0;
	return rc;
}

int wk_dp_send(wk_dp_msg *m, int end, int failed, eng_err *err)
{
	return send_head(m, (dp_head){end, failed, 0, 0, m->len}, err);
}

int wk_dp_send_gather(wk_dp_msg *m, eng_err *err)
{
	return send_head(m, (dp_head){0, 0, 1, 0, m->len}, err);
}

int wk_dp_recv(wk_dp_msg *m, eng_err *err)
{
	dp_head h;
	if (eng_dp_bcast(&h, sizeof h, err) < 0)
		return -1;
	m->len = 0;
	m->end = h.end;
	m->failed = h.failed;
	m->gather = h.gather;
	if (h.len && grow(m, h.len) < 0)
		return eng_errf(err, "out of memory for a boundary of %llu bytes",
			(unsigned long long)h.len);
	m->len = h.len;
	return h.len ? eng_dp_bcast(m->buf, m->len, err) : 0;
}

wk_ctl_cmd *wk_dp_cmds(const wk_dp_msg *m)
{
	wk_ctl_cmd *head = NULL, **tail = &head;
	for (size_t at = 0; at + sizeof(dp_cmd) <= m->len;) {
		dp_cmd d;
		memcpy(&d, m->buf + at, sizeof d);
		at += sizeof d;
		wk_ctl_cmd *c = calloc(1, sizeof *c);
		if (!c || at + d.set_len > m->len) {
			free(c);
			break; /* rank 0 wrote it: only out of memory gets here */
		}
		c->op = (wk_ctl_op)d.op;
		c->rounds = d.rounds;
		c->budget = (size_t)d.budget;
		c->policy = d.policy;
		c->conn = -1;
		if (d.set_len)
			c->set = json_loadb((const char *)m->buf + at, d.set_len, 0, NULL);
		at += d.set_len;
		*tail = c;
		tail = &c->next;
	}
	return head;
}

void wk_dp_free(wk_dp_msg *m)
{
	free(m->buf);
	memset(m, 0, sizeof *m);
}

int wk_dp_gather(const eng_trainer *tr, const eng_step_stats *st, wk_ctl *c, eng_err *err)
{
	int n = eng_dp_size(), L = tr->model.cfg.n_layer;
	if (n == 1)
		return 0;
	wk_ctl_rank mine, *all = eng_dp_rank() == 0 ? calloc((size_t)n, sizeof *all) : NULL;
	eng_mem_stats ms;
	if (eng_dp_rank() == 0 && !all) {
		/* the others are in the gather already: the job cannot go on as one */
		fprintf(stderr, "remat-train: out of memory for %d ranks' counters\n", n);
		eng_dp_abort(1);
	}
	eng_mem_get_stats(&ms);
	memset(&mine, 0, sizeof mine);
	mine.rank = eng_dp_rank();
	mine.step = st->step;
	mine.step_ms = st->step_ms;
	mine.allreduce_ms = st->allreduce_ms;
	mine.allreduce_hidden_ms = st->allreduce_hidden_ms;
	mine.mem = ms;
	eng_backend_device_mem(&mine.dev);
	for (int i = 0; i <= L; i++)
		mine.saved[i] = eng_trainer_saved_bytes(tr, i);
	int rc = eng_dp_gather(&mine, sizeof mine, all, err);
	if (rc == 0 && all)
		wk_ctl_set_ranks(c, all, n); /* takes all */
	else
		free(all);
	return rc;
}
