/* eng_sample.h - text from the model: a prompt continued greedily or by sampling.
 *
 * Each new token comes from the logits at the context's last position. The context is the
 * last T tokens of the prompt and what has been generated (T the model's sequence length,
 * as nanoGPT crops to its block size), put in row 0 of a B x T batch: attention is causal,
 * so the tokens after it in the row (token 0) and the other rows change nothing of those
 * logits. The forward is the evaluation's (it keeps nothing for a backward), in the buffers
 * the model has laid out for training: sampling raises no peak, and costs a forward of the
 * whole B x T batch a token.
 */
#ifndef ENG_SAMPLE_H
#define ENG_SAMPLE_H

#include <stdint.h>

#include "eng_err.h"
#include "eng_model.h"

#define ENG_SAMPLE_MAX_TOKENS 4096 /* new tokens one call makes at most */

typedef struct eng_sample_opts {
	int tokens;        /* new tokens, 1..ENG_SAMPLE_MAX_TOKENS */
	float temperature; /* 0: greedy (the argmax; the lowest id on a tie); > 0: sampled from
			    * softmax(logits / temperature) */
	int top_k;         /* > 0: sampled among the top_k likeliest only */
	uint32_t seed;     /* the sampler's MT19937 */
} eng_sample_opts;

/* Continues prompt (n >= 1 tokens, each < vocab) by o->tokens tokens into out. inp and tgt
 * are B*T scratch (the trainer's batch buffers will do). 0, or -1 with the model's error
 * (a policy change that failed: nothing laid out). */
int eng_sample(eng_model *m, const uint32_t *prompt, int n, const eng_sample_opts *o,
	uint32_t *inp, uint32_t *tgt, uint32_t *out, eng_err *err);

#endif
