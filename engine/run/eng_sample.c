/* eng_sample.c - greedy and sampled continuation of a prompt (see eng_sample.h). */
#include "eng_sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eng_data.h"
#include "eng_mem.h"

/* The index of the largest of x (V), the lowest on a tie. */
static int argmax(const float *x, int V)
{
	int best = 0;
	for (int i = 1; i < V; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

static int desc_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* A draw from softmax(logits / t) over the top_k likeliest (all when top_k <= 0; ties at
 * the k-th value all stay): the first index whose running sum of weights passes u * total,
 * u uniform in [0, 1). w: V doubles of scratch, sorted: V floats. */
static int draw(const float *logits, int V, float t, int top_k, eng_mt *g, double *w,
	float *sorted)
{
	float cut = -INFINITY, mx = logits[argmax(logits, V)];
	if (top_k > 0 && top_k < V) {
		memcpy(sorted, logits, (size_t)V * sizeof *sorted);
		qsort(sorted, (size_t)V, sizeof *sorted, desc_float);
		cut = sorted[top_k - 1];
	}
	double total = 0.0;
	for (int i = 0; i < V; i++) {
		w[i] = logits[i] >= cut ? exp((double)(logits[i] - mx) / t) : 0.0;
		total += w[i];
	}
	double u = (double)eng_mt_next(g) / 4294967296.0 * total, run = 0.0;
	for (int i = 0; i < V; i++) {
		run += w[i];
		if (w[i] > 0 && run > u)
			return i;
	}
	return argmax(logits, V);
}

int eng_sample(eng_model *m, const uint32_t *prompt, int n, const eng_sample_opts *o,
	uint32_t *inp, uint32_t *tgt, uint32_t *out, eng_err *err)
{
	int T = m->T, V = m->cfg.vocab_size, rc = -1;
	size_t N = (size_t)m->B * T;
	uint32_t *ctx = malloc((size_t)(n + o->tokens) * sizeof *ctx);
	float *row = malloc((size_t)V * sizeof *row);
	double *w = o->temperature > 0 ? malloc((size_t)V * sizeof *w) : NULL;
	float *sorted = o->temperature > 0 && o->top_k > 0 ? malloc((size_t)V * sizeof *sorted)
							   : NULL;
	eng_mt g;
	eng_mt_seed(&g, o->seed);
	if (!ctx || !row || (o->temperature > 0 && !w) ||
		(o->temperature > 0 && o->top_k > 0 && !sorted)) {
		eng_errf(err, "out of memory for sampling");
		goto out;
	}
	memcpy(ctx, prompt, (size_t)n * sizeof *ctx);
	memset(tgt, 0, N * sizeof *tgt);
	for (int k = 0; k < o->tokens; k++) {
		int len = n + k, c = len < T ? len : T;
		float loss;
		memset(inp, 0, N * sizeof *inp);
		memcpy(inp, ctx + len - c, (size_t)c * sizeof *inp);
		m->row_tap = row;
		m->row_tap_at = c - 1;
		int r = eng_model_loss(m, inp, tgt, &loss, err);
		m->row_tap = NULL;
		if (r < 0)
			goto out;
		int t = o->temperature > 0 ? draw(row, V, o->temperature, o->top_k, &g, w,
						sorted)
					   : argmax(row, V);
		ctx[len] = (uint32_t)t;
		out[k] = (uint32_t)t;
	}
	rc = 0;
out:
	free(ctx);
	free(row);
	free(w);
	free(sorted);
	return rc;
}
