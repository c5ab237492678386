/* eng_timing.c - the timing's counters (eng_timing.h): kernel calls timed into their class, a
 * recompute as one region, the steady steps summed. The table is eng_timing_report.c's. */
#include "eng_timing.h"

#include <string.h>
#include <sys/resource.h>

#include "eng_util.h"

/* Seconds on the monotonic clock */
static double now_s(void)
{
	return eng_now_ms() * 1e-3;
}

static long minor_faults(void)
{
	struct rusage ru;
	return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_minflt : 0;
}

double eng_timing__now(const eng_timing *p)
{
	return p->in_rc ? 0.0 : now_s();
}

void eng_timing__add(eng_timing *p, int cls, double t0, double flops, double bytes)
{
	eng_timing_row *r = &p->step[p->in_rc ? ENG_TIMING_RECOMPUTE : cls];
	r->flops += flops;
	r->bytes += bytes;
	if (p->in_rc)
		return; /* timed as the region's */
	r->s += now_s() - t0;
	r->calls += 1;
}

void eng_timing_rc_begin(eng_timing *p)
{
	if (!p)
		return;
	p->rc_t0 = now_s();
	p->in_rc = 1;
}

void eng_timing_rc_end(eng_timing *p)
{
	if (!p)
		return;
	p->in_rc = 0;
	p->step[ENG_TIMING_RECOMPUTE].s += now_s() - p->rc_t0;
	p->step[ENG_TIMING_RECOMPUTE].calls += 1;
}

void eng_timing_step_begin(eng_timing *p)
{
	if (!p)
		return;
	memset(p->step, 0, sizeof p->step);
	p->in_rc = 0;
	p->fault_mark = minor_faults();
}

void eng_timing_step_end(eng_timing *p, double ms, int changed, const char *policy)
{
	if (!p)
		return;
	int first = p->seen++ == 0;
	if (first)
		p->first_ms = ms;
	if (first || changed)
		return;
	if (p->steps && strcmp(p->policy, policy) != 0)
		p->policy[0] = '\0'; /* mixed: said as such */
	else if (!p->steps)
		snprintf(p->policy, sizeof p->policy, "%s", policy);
	for (int c = 0; c < ENG_TIMING_N; c++) {
		p->sum[c].s += p->step[c].s;
		p->sum[c].flops += p->step[c].flops;
		p->sum[c].bytes += p->step[c].bytes;
		p->sum[c].calls += p->step[c].calls;
	}
	p->faults += minor_faults() - p->fault_mark;
	p->step_ms += ms;
	p->steps++;
}

const char *eng_timing_class_name(int cls)
{
	static const char *const names[ENG_TIMING_N - ENG_TIMING_PRODUCTS] = {
		"attention fwd", "attention bwd", "norms fwd", "norms bwd", "activation fwd",
		"activation bwd", "adds, rope", "bias grads", "bf16 rounding",
		"LoRA products", "loss (softmax, CE)", "embeddings", "zero grads",
		"weight copies", "recompute", "grad accumulation", "grad norm, clip",
		"AdamW", "data", "all-reduce"};
	return cls >= ENG_TIMING_PRODUCTS && cls < ENG_TIMING_N ? names[cls - ENG_TIMING_PRODUCTS]
							     : "?";
}
