/* eng_model_int.h - what eng_model.c (the step, the head), eng_blocks.c (the blocks'
 * passes of both families, LoRA's products) and eng_products.c (the matmul products below
 * both) share inside the CPU model; not an interface of the engine's.
 */
#ifndef ENG_MODEL_INT_H
#define ENG_MODEL_INT_H

#include "eng_model.h"
#include "kn.h"

#define ENG_HEAD_PRODUCTS 12 /* the head's products start here in the table */

/* The step's products and their routes for a model of cfg at B x T with head chunks of R
 * rows, and oneDNN's bytes for them (*sc scratchpad, *pk packed weights): the count. */
int eng_prod_routes(const eng_config *cfg, int B, int T, int R, eng_product *pr, size_t *sc,
	size_t *pk);
/* Elements of the rounded-gradient workspace (precision bf16) */
size_t eng_prod_bf_out_elems(const eng_config *cfg, size_t N, size_t R);
/* oneDNN's scratchpads and packed weights for the current thread count: 0, or -1 */
int eng_prod_fit(eng_model *m, eng_err *err);
/* The weight product i multiplies by in layer l, as the product takes it (float32 or bf16) */
const void *eng_prod_weight(const eng_model *m, int i, int l);
/* The weights' bf16 and packed copies for this forward, unless still valid: 0, or -1 */
int eng_prod_wcopy(eng_model *m, eng_err *err);
/* C = op(A) op(B) + beta C: product i of the table (eng_model_products) in layer l, by its
 * route; oneDNN's first failure kept for the pass's end (m->mm_err) */
void eng_model_prod_run(eng_model *m, int i, int l, const void *A, const void *B, float *C);
/* A parameter's bf16 copy (precision bf16) */
const uint16_t *eng_model_wbf(const eng_model *m, const float *w);

/* The 4-bit weights (eng_model_q4.c): their block, views and product scratch for m's
 * table (eng_model_init; nothing without quantization): 0, or -1 out of memory */
int eng_q4_init(eng_model *m);
/* Linear layer k of block l with a 4-bit weight, every part of it (q|k|v, gate|up):
 * out(N,OC) = inp(N,in) W^T; dinp(N,in) = dout(N,OC) W */
void eng_q4_forward(eng_model *m, int k, int l, float *out, const float *inp, int N, int OC);
void eng_q4_backward(eng_model *m, int k, int l, float *dinp, const float *dout, int N,
	int OC);
/* Bytes of the products' workspace for a model of c at N rows (0 without quantization) */
size_t eng_q4_scratch_bytes(const eng_config *c, size_t N);
/* The largest oneDNN scratchpad the bf16 products of a model of c at N rows need, at the
 * current thread count, into *bytes (0 unless compute bf16). 0, or -1 with
 * kn_bf16_error(). */
int eng_q4_dnnl_bytes(const eng_config *c, int N, size_t *bytes);

/* Block l's passes from a (eng_layout_view): forward from a->x into out (NULL: stop before
 * the MLP's last product, as full recompute does); the selective recompute; the backward
 * (m->dres: dL/d(output) in, dL/d(input) out). GPT-2's or the Llama family's by m->cfg. */
void eng_block_forward(eng_model *m, int l, eng_acts *a, float *out);
void eng_block_recompute_selective(eng_model *m, int l, eng_acts *a);
void eng_block_backward(eng_model *m, int l, const eng_acts *a);
/* ln_f (a Llama's final RMSNorm): forward into lnf from the head's xf; backward of dbuf
 * (dL/dlnf) into dres */
void eng_final_norm_forward(eng_model *m, float *lnf);
void eng_final_norm_backward(eng_model *m);

/* Bytes of n floats, for the timing's counts (eng_timing.h) */
static inline double f4(size_t n)
{
	return 4.0 * (double)n;
}

/* dst = src rounded to bf16 (n elements), timed as such */
static inline void mm_round(eng_model *m, uint16_t *dst, const float *src, size_t n)
{
	ENG_TIMED(m->timing, ENG_TIMING_ROUND, 0, 6.0 * (double)n, kn_to_bf16(dst, src, n));
}

/* A float32 activation as a matmul's input (n elements): itself, or rounded into bf_in */
static inline const void *mm_input(eng_model *m, const float *x, size_t n)
{
	if (!m->cfg.mm_bf16)
		return x;
	mm_round(m, m->bf_in, x, n);
	return m->bf_in;
}

/* Where a matmul input field (ln1, ln2, gelu, lnf) is computed: the field itself in float32;
 * under bf16 the float32 scratch f, the kernel rounding it into the field (mm_bf) as it
 * goes (kn.h's trailing bf). */
static inline float *mm_f32(const eng_model *m, void *field, float *f)
{
	return m->cfg.mm_bf16 ? f : field;
}

static inline uint16_t *mm_bf(const eng_model *m, void *field)
{
	return m->cfg.mm_bf16 ? field : NULL;
}

/* Where a kernel that makes the next linear backward's dout rounds it: bf_out under bf16
 * (the backward told so: `rounded`), NULL in float32 */
static inline uint16_t *mm_grad_bf(const eng_model *m)
{
	return m->cfg.mm_bf16 ? m->bf_out : NULL;
}

/* Bytes of n bf16 values a kernel rounds on the way under bf16 (0 in float32), for the
 * timing's counts */
static inline double bf2(const eng_model *m, size_t n)
{
	return m->cfg.mm_bf16 ? 2.0 * (double)n : 0.0;
}

#endif
