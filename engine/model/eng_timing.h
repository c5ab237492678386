/* eng_timing.h - where a CPU step's time goes (remat-train --timing, make bench): the time,
 * FLOPs and bytes of each class of work, summed over the steady steps of a run, and the
 * table that holds each class against its own limit measured in the same process (the
 * product alone, for a product; memory bandwidth at the class's working set, for the
 * memory-bound ones; both, as a roofline, for attention).
 *
 * A model without timing (m->timing NULL, every run but --timing's) pays one test of a
 * NULL pointer per kernel call. With one, each kernel call is timed (two clock reads);
 * a recompute is timed as one region (ENG_TIMING_RECOMPUTE), its kernels' FLOPs and bytes
 * added to it: the classes never overlap, and with the unaccounted rest they sum to the
 * step.
 *
 * FLOPs are the multiply-adds' 2 per pair (attention's causal products counted as run,
 * about half of a full T x T); bytes are the least a kernel must move: each input read
 * once, each output written once (a STREAM count: no write-allocate).
 */
#ifndef ENG_TIMING_H
#define ENG_TIMING_H

#include <stddef.h>
#include <stdio.h>

#include "eng_err.h"

struct eng_model;
struct eng_product;

#define ENG_TIMING_PRODUCTS 18 /* == ENG_PRODUCTS (eng_model.h): product i of the model's table */

/* The classes after the products (the table in eng_timing.c names them) */
enum {
	ENG_TIMING_ATTN_FWD = ENG_TIMING_PRODUCTS,
	ENG_TIMING_ATTN_BWD,
	ENG_TIMING_NORM_FWD,  /* LayerNorm, RMSNorm (a residual add fused into it) */
	ENG_TIMING_NORM_BWD,
	ENG_TIMING_ACT_FWD,   /* bias + GELU, SwiGLU */
	ENG_TIMING_ACT_BWD,
	ENG_TIMING_ELEM,      /* residual and bias adds, rotary embedding */
	ENG_TIMING_BIAS_GRAD, /* a bias's gradient: column sums */
	ENG_TIMING_ROUND,     /* float32 rounded to bf16 for a product, by a pass of its own
	                       * (a kernel that rounds its output on the way counts it) */
	ENG_TIMING_LORA,      /* the adapters' products */
	ENG_TIMING_LOSS,      /* softmax and cross-entropy over the logits */
	ENG_TIMING_EMBED,     /* token and position embeddings, both ways */
	ENG_TIMING_ZERO,      /* the step's gradients zeroed */
	ENG_TIMING_WCOPY,     /* the weights' bf16 copy (but AdamW's) and packed copies */
	ENG_TIMING_RECOMPUTE, /* everything a backward recomputes */
	ENG_TIMING_ACCUM,     /* micro-batches' gradients summed */
	ENG_TIMING_CLIP,      /* the gradient's norm and scale */
	ENG_TIMING_OPT,       /* AdamW */
	ENG_TIMING_DATA,      /* the next batch read */
	ENG_TIMING_ALLREDUCE, /* the ranks' gradients summed */
	ENG_TIMING_N
};

typedef struct eng_timing_row {
	double s, flops, bytes; /* seconds, FLOPs, bytes */
	double calls;
} eng_timing_row;

typedef struct eng_timing {
	int in_rc;                /* inside a recompute: kernels add to ENG_TIMING_RECOMPUTE */
	double rc_t0;             /* its start */
	eng_timing_row step[ENG_TIMING_N]; /* the step under way */
	eng_timing_row sum[ENG_TIMING_N];  /* over the steady steps */
	int seen;                 /* steps ended */
	int steps;                /* steady steps summed */
	double step_ms;           /* their step times, summed */
	double first_ms;          /* the run's first step */
	long faults;              /* minor page faults in the steady steps */
	long fault_mark;          /* at the step's start */
	char policy[64];          /* the steady steps' policy ("" while mixed) */
} eng_timing;

/* Now, for a kernel call's start: 0 without timing (no clock read), or inside a
 * recompute */
double eng_timing__now(const eng_timing *p);
static inline double eng_timing_t0(const eng_timing *p)
{
	return p ? eng_timing__now(p) : 0.0;
}
/* A kernel call of class cls that began at t0 is over (nothing without timing) */
void eng_timing__add(eng_timing *p, int cls, double t0, double flops, double bytes);
static inline void eng_timing_add(eng_timing *p, int cls, double t0, double flops,
	double bytes)
{
	if (p)
		eng_timing__add(p, cls, t0, flops, bytes);
}
/* Times `call` as class cls */
#define ENG_TIMED(p, cls, flops, bytes, call) \
	do { \
		double t0_ = eng_timing_t0(p); \
		call; \
		eng_timing_add(p, cls, t0_, flops, bytes); \
	} while (0)

/* A recompute begins and ends (one region; its kernels add their FLOPs and bytes to it) */
void eng_timing_rc_begin(eng_timing *p);
void eng_timing_rc_end(eng_timing *p);

/* A step begins; it ended after ms milliseconds under `policy` (its text), after a change
 * of policy when changed: a steady step (neither the process's first nor the first of a
 * policy) is summed */
void eng_timing_step_begin(eng_timing *p);
void eng_timing_step_end(eng_timing *p, double ms, int changed, const char *policy);

/* The table (eng_timing_report.c): each class per steady step against its limit, measured
 * now (every product of m's table alone, the memory bandwidth at each class's working
 * set), with the step's unaccounted rest and its model FLOPs against the matmul ceiling;
 * the text to `text`, one JSON object to `json` (either NULL). -1: no steady step, or out
 * of memory for the limits. */
int eng_timing_report(const eng_timing *p, struct eng_model *m, FILE *text, FILE *json,
	eng_err *err);

/* Seconds product pr takes alone (its shape, route and thread count, the median of a few
 * runs after a warm-up, on buffers of its own): 0, or -1 (oneDNN failed, out of memory) */
int eng_timing_alone(const struct eng_product *pr, double *s, eng_err *err);

/* The class's name ("attention fwd"); products' come from the model's table */
const char *eng_timing_class_name(int cls);

#endif
