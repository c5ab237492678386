/* kn.h - the compute kernels behind the engine (CPU backend: kernels/cpu/).
 *
 * Legend: B batch, T time, C channels, NH heads, hs = C/NH, V vocab, N rows (= B*T unless
 * said otherwise), OC output channels; every tensor row-major and float32. Linear weights
 * are stored [in, out] (Hugging Face's Conv1D layout), so y = x W + b is a plain NN product.
 * Each kernel states its outputs with `=` (overwritten) or `+=` (accumulated into).
 *
 * Determinism: for a fixed thread count every kernel gives bitwise identical results run to
 * run and for any 64-byte-aligned buffers: OpenMP loops use schedule(static), no float
 * reduction depends on thread timing, and the sgemm wrapper is the only matmul. What the
 * engine relies on for its "same numbers under every policy" guarantee.
 *
 * These functions trust their arguments (the engine checks shapes); token ids must be in
 * range, which the data loader checks.
 */
#ifndef KN_H
#define KN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- threads and the matmul library ---- */

/* Sets the thread count of OpenMP regions and of the BLAS library (>= 1). */
void kn_set_threads(int n);
int kn_get_threads(void);
/* "OpenBLAS 0.3.21 (kernel Haswell, openmp)": the library behind kn_sgemm. */
const char *kn_blas_describe(void);

/* Instruction sets the matmul kernels care about, as kn_cpu_features reports them. */
#define KN_CPU_AVX2 1u
#define KN_CPU_FMA 2u
#define KN_CPU_AVX512 4u /* F, CD, BW, DQ and VL: what OpenBLAS's SkylakeX kernels use */
unsigned kn_cpu_features(void);
/* The strongest OpenBLAS kernel these features run: "SkylakeX", "Haswell" or NULL. */
const char *kn_blas_best_kernel(unsigned features);
/* The OpenBLAS kernel to ask for instead of corename, or NULL to keep it: the best kernel
 * for the features when it is stronger than corename. OpenBLAS builds that do not know a
 * processor fall back to generic SSE kernels (Prescott and friends) that run 8x slower, or
 * to an older family's (Haswell on an AVX-512 machine, 1.5x slower). Names it does not
 * know are kept. Pure: corename and the features are arguments. */
const char *kn_blas_better_kernel(const char *corename, unsigned features);

/* Called first thing in main: re-executes the program once, with the environment that
 * OpenBLAS and libgomp read when they are loaded, when it needs (a) OPENBLAS_CORETYPE, if
 * unset and OpenBLAS picked a kernel weaker than the processor runs (kn_blas_better_kernel),
 * (b) OMP_WAIT_POLICY=passive, if neither it nor GOMP_SPINCOUNT is set: waiting threads
 * sleep instead of spinning, so they give their core back to a late one when the machine is
 * shared (kn_blas.c has the figures). Returns only when no re-execution is needed or
 * possible. */
void kn_fix_runtime(char **argv);

/* C(M,N) = alpha * op(A) op(B) + beta * C, row-major; op(X) = X or X^T per trans flag.
 * lda/ldb/ldc are row strides of the matrices as stored. The one matmul of the engine.
 * Called inside an OpenMP parallel region it runs on the calling thread only. */
void kn_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
	int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* ---- oneDNN's matmuls (kn_dnnl.c): precision "bf16", and float32 where they win ---- */

/* 1 when bf16 matmuls run here natively (oneDNN built in, and the processor's AVX512-BF16
 * or AMX as oneDNN sees them: ONEDNN_MAX_CPU_ISA can hide them); else 0 and why. */
int kn_bf16_available(char *why, size_t n);
/* 1 when oneDNN runs here at all (float32 products); else 0 and why. */
int kn_dnnl_available(char *why, size_t n);
/* 1 when bf16 products of a weight should take it packed (kn_dnnl_pack) once a step: where
 * oneDNN runs AMX, whose tiles want a layout of their own. On AVX512-BF16 alone every packed
 * variant measured slower per step (gpt2-small B4 x T256: 6.6-7.4 s against 6.2 s plain), so
 * not there. REMAT_BF16_PACK=1 or 0 overrides (tests, measurements). */
int kn_bf16_pack_weights(void);
/* "oneDNN 2.6.3, Intel AVX-512 with bfloat16 ...": the library and its instruction set. */
const char *kn_bf16_describe(void);
/* x rounded to bfloat16 bits: to nearest, ties to even; a NaN stays a (quiet) NaN rather
 * than rounding into an infinity. The one rounding of the engine (checkpoints' BF16 too). */
static inline uint16_t kn_bf16_from_f32(float x)
{
	uint32_t b;
	memcpy(&b, &x, sizeof b);
	if ((b & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((b >> 16) | 0x0040u);
	return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}
/* dst(n) = src(n) rounded to bf16 (kn_bf16_from_f32) */
void kn_to_bf16(uint16_t *dst, const float *src, size_t n);

/* One product C(M,N) = op(A)(M,K) op(B)(K,N) + beta C, beta 0 or 1, through oneDNN: A and
 * B bf16 (bf16 1) or float32, C float32, sums in float32; strides and flags as kn_sgemm.
 * packed: B in the layout the primitive prefers, made by kn_dnnl_pack from B as tb and
 * ldb describe it. */
typedef struct kn_mm {
	int bf16, ta, tb, M, N, K, lda, ldb, ldc, beta, packed;
} kn_mm;
/* Bytes of scratchpad, and of a packed B (packed may be NULL), that product q needs at the
 * current thread count (its primitive made now, JIT and all); 0, or -1 with
 * kn_bf16_error(). */
int kn_dnnl_sizes(const kn_mm *q, size_t *scratch, size_t *packed);
/* dst (bytes, at least kn_dnnl_sizes's packed) = B in product q's packed layout. 0 or -1. */
int kn_dnnl_pack(const kn_mm *q, const void *B, void *dst, size_t bytes);
/* C = op(A) op(B) + beta C for product q; B packed when q is. scratch: at least
 * kn_dnnl_sizes's bytes. 0, or -1 with kn_bf16_error() (out of memory in oneDNN, a
 * scratchpad too small). */
int kn_dnnl_gemm(const kn_mm *q, const void *A, const void *B, float *C, void *scratch,
	size_t scratch_bytes);
/* The last failure's message ("" when none). */
const char *kn_bf16_error(void);
/* out(N,OC) += b(OC): a linear layer's bias, after its product */
void kn_add_bias(float *out, const float *b, int N, int OC);
/* db(OC) += column sums of dout(N,OC), in an order fixed by the shape */
void kn_bias_backward(float *db, const float *dout, int N, int OC);

/* ---- embedding ---- */

/* out(B,T,C) = wte[tok[b,t]] + wpe[t]; wpe NULL: no positions (rotary models) */
void kn_encoder_forward(float *out, const uint32_t *tok, const float *wte, const float *wpe,
	int B, int T, int C);
/* dwte(V,C) += scatter of dout by tok; dwpe(T',C) += sum over b of dout (either may be
 * NULL: not wanted) */
void kn_encoder_backward(float *dwte, float *dwpe, const float *dout, const uint32_t *tok,
	int B, int T, int C);

/* The norms' and activations' kernels end with `uint16_t *bf` (may be NULL): their float32
 * output also rounded into bf (kn_bf16_from_f32), row by row while the row is in cache: the
 * bf16 operand of the product that reads it next (precision bf16), where a pass of its own
 * read the output back from memory. */

/* ---- LayerNorm (eps 1e-5) ---- */

/* out(N,C) =, mean(N) =, rstd(N) = */
void kn_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
	const float *w, const float *b, int N, int C, uint16_t *bf);
/* out(N,C) = from saved mean and rstd: bitwise what kn_layernorm_forward wrote */
void kn_layernorm_apply(float *out, const float *inp, const float *mean, const float *rstd,
	const float *w, const float *b, int N, int C, uint16_t *bf);
/* res(N,C) = a + (y + bias), then LayerNorm of res: out(N,C) =, mean(N) =, rstd(N) =.
 * Bitwise kn_residual_forward followed by kn_layernorm_forward, in one visit of each row. */
void kn_residual_layernorm_forward(float *res, float *out, float *mean, float *rstd,
	const float *a, const float *y, const float *bias, const float *w, const float *b, int N,
	int C, uint16_t *bf);
/* dinp(N,C) +=, dw(C) +=, db(C) += (dw, db may be NULL: not wanted); bf: dinp's rounding */
void kn_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
	const float *inp, const float *mean, const float *rstd, const float *w, int N, int C,
	uint16_t *bf);

/* ---- linear y = x W + b ---- */

/* out(N,OC) = inp(N,C) w(C,OC) + b(OC); b may be NULL */
void kn_linear_forward(float *out, const float *inp, const float *w, const float *b, int N,
	int C, int OC);
/* dinp(N,C) = dout w^T, dw(C,OC) += inp^T dout, db(OC) += colsum dout; each may be NULL */
void kn_linear_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
	const float *w, int N, int C, int OC);

/* ---- attention (causal, scale 1/sqrt(hs)) ---- */

/* out(B,T,C) = softmax(q k^T * scale) v over the causal past, heads side by side;
 * lse(B,NH,T) = log-sum-exp of each row of scaled scores, all that backward keeps of the
 * softmax; q, k, v are the column blocks of qkv(B,T,3C). Never holds the B*NH*T*T
 * probabilities: blocks of query rows against their causal past, in scratch. */
void kn_attention_forward(float *out, float *lse, float *scratch, const float *qkv, int B,
	int T, int C, int NH);
/* dqkv(B,T,3C) = from dout(B,T,C), recomputing the probabilities from qkv and lse; out and
 * lse are what kn_attention_forward wrote */
void kn_attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
	const float *out, const float *lse, int B, int T, int C, int NH);
/* The same with grouped key/value heads (the Llama family): qkv(B,T,(NH+2 NKV) hs) holds
 * q | k | v, query head h reading kv head h / (NH/NKV); out(B,T,NH*hs), lse(B,NH,T).
 * NH must be a multiple of NKV (the caller's shape checks see to it: a kernel does not
 * check). kn_attention_forward/backward are these with NKV = NH, hs = C/NH. */
void kn_gqa_attention_forward(float *out, float *lse, float *scratch, const float *qkv,
	int B, int T, int NH, int NKV, int hs);
void kn_gqa_attention_backward(float *dqkv, float *scratch, const float *dout,
	const float *qkv, const float *out, const float *lse, int B, int T, int NH, int NKV,
	int hs);
/* floats of scratch either needs for T with the current thread count */
size_t kn_attention_scratch_floats(int T);
/* The same for a given number of threads (what a run of that many will need). */
size_t kn_attention_scratch_floats_for(int T, int threads);

/* ---- the Llama family (kn_llama.c): RMSNorm, rotary embeddings, SwiGLU ---- */

/* out(N,C) = w * (x * rstd), rstd(N) = 1/sqrt(mean(x^2) + eps) */
void kn_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, float eps,
	int N, int C, uint16_t *bf);
/* out(N,C) from the saved rstd: bitwise what kn_rmsnorm_forward wrote */
void kn_rmsnorm_apply(float *out, const float *inp, const float *rstd, const float *w, int N,
	int C, uint16_t *bf);
/* dinp(N,C) +=, dw(C) += (dw may be NULL); bf: dinp's rounding */
void kn_rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp,
	const float *rstd, const float *w, int N, int C, uint16_t *bf);
/* cs(T,hs) = cos | sin of position t's angles t * theta^(-2j/hs), j < hs/2 */
void kn_rope_table(float *cs, int T, int hs, double theta);
/* x(B,T,ld) in place: the first nh heads of hs columns of each row rotated as Hugging
 * Face's apply_rotary_pos_emb (rotate_half pairs j and j + hs/2) */
void kn_rope_forward(float *x, const float *cs, int B, int T, int nh, int hs, int ld);
/* dx(B,T,ld) in place: the gradient through that rotation (turned back) */
void kn_rope_backward(float *dx, const float *cs, int B, int T, int nh, int hs, int ld);
/* h(N,I) = silu(gate) * up, gu(N,2I) = gate | up per row */
void kn_swiglu_forward(float *h, const float *gu, int N, int I, uint16_t *bf);
/* dgu(N,2I) = d gate | d up from dh(N,I); bf: dgu's rounding */
void kn_swiglu_backward(float *dgu, const float *dh, const float *gu, int N, int I,
	uint16_t *bf);

/* ---- pointwise ---- */

/* out(N) = gelu_tanh(inp) */
void kn_gelu_forward(float *out, const float *inp, size_t N, uint16_t *bf);
/* dinp(N) = gelu_tanh'(inp) * dout; dinp may alias dout; bf: dinp's rounding */
void kn_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N,
	uint16_t *bf);
/* fch(N,OC) += bias(OC), then gelu(N,OC) = gelu_tanh(fch): a linear layer's bias and its
 * GELU in one pass, bitwise the bias add of kn_linear_forward then kn_gelu_forward; bf:
 * gelu's rounding */
void kn_bias_gelu_forward(float *fch, float *gelu, const float *bias, int N, int OC,
	uint16_t *bf);
/* out(N,C) = a + (y + bias): the residual add of a linear output whose bias is still to
 * add (bias may be NULL: out = a + y) */
void kn_residual_forward(float *out, const float *a, const float *y, const float *bias, int N,
	int C);

/* ---- head: softmax cross-entropy ---- */

/* For each row r of logits(N,V): lse(r) = log sum exp, loss(r) = lse - logits[r, target[r]] */
void kn_crossentropy_forward(float *lse, float *loss, const float *logits,
	const uint32_t *target, int N, int V);
/* Forward and backward in one visit of each row of logits(N,V): lse(N) = and loss(N) = as
 * kn_crossentropy_forward (same bits), and the row is overwritten by its gradient
 * (softmax(logits) - onehot(target)) * scale. */
void kn_crossentropy_fused(float *logits, float *lse, float *loss, const uint32_t *target,
	float scale, int N, int V);

/* ---- 4-bit weights (kn_q4.c): QLoRA's NormalFloat and FP4, blockwise absmax ---- */

/* The codes of bitsandbytes' two 4-bit types. NF4: 16 levels in [-1, 1] (the published
 * NormalFloat quantiles, 0 among them), code = the level's index in ascending order. FP4:
 * sign and magnitude, bit 3 the sign, the magnitudes 0, 1/192, 2/3, 1, 1/3, 1/2, 1/6, 1/4
 * by the low 3 bits (an e2m1 float over 12). */
typedef enum kn_q4_type { KN_Q4_NF4, KN_Q4_FP4 } kn_q4_type;

/* The level of code (0..15) of type t, a float in [-1, 1]. */
float kn_q4_level(kn_q4_type t, int code);
/* w(n) = codes((n+1)/2 bytes) and absmax(ceil(n/block)): each block of `block` (even)
 * consecutive elements is scaled by its largest magnitude (absmax; a block of zeros keeps
 * absmax 0, its codes level 0's), and each element w/absmax takes the nearest level (a
 * tie: the lower level, or for FP4 the lower magnitude, the sign that of w). Element 2j
 * is byte j's high nibble, 2j+1 its low one (bitsandbytes' order); an odd n pads the last
 * low nibble with 0. */
void kn_q4_quantize(const float *w, size_t n, int block, kn_q4_type t, uint8_t *codes,
	float *absmax);
/* w(n) = level(code) * absmax of its block, in float32, for the elements [first, first +
 * n) of a quantized array: what a product with the quantized weight multiplies by. */
void kn_q4_dequantize(const uint8_t *codes, const float *absmax, size_t first, size_t n,
	int block, kn_q4_type t, float *w);

/* A frozen linear weight W(OC, IC) in 4 bits: kn_q4_quantize of its row-major [out, in]
 * elements (blocks of `block` consecutive elements of that order); its absmax values as
 * they are (absmax), or double-quantized (absmax NULL: qabs, absmax2 and offset of
 * kn_q4_dq_quantize). */
typedef struct kn_q4_weight {
	const uint8_t *codes;
	const float *absmax;
	const uint8_t *qabs;
	const float *absmax2;
	float offset;
	int OC, IC, block;
	kn_q4_type type;
} kn_q4_weight;
#define KN_Q4_TILE 256 /* rows of W dequantized at a time, at most (tiles of equal height) */
/* Floats of the scratch a product with a weight of IC columns in blocks of `block` needs:
 * a tile of W, its blocks' absmax values when they are double-quantized, and the tile
 * rounded to bf16 (the bf16 products). */
size_t kn_q4_scratch_floats(int IC, int block);
/* out(N, OC) = inp(N,IC) W^T, out's rows ldo floats apart (OC <= ldo: one part of a wider
 * output): W's rows dequantized a tile at a time into scratch, each tile's columns of out
 * one product. Against dequantizing W whole and one product, on SmolLM-135M's shapes
 * (bench-q4): 1.02x to 1.09x the time, holding 0.56 bytes a weight instead of 4. */
void kn_q4_linear_forward(float *out, int ldo, const float *inp, const kn_q4_weight *w, int N,
	float *scratch);
/* dinp(N,IC) = dout(N, OC) W (dout's rows ldd floats apart), or += with accumulate; the
 * tiles' products summed in tile order (W is frozen: no gradient of its own) */
void kn_q4_linear_backward(float *dinp, const float *dout, int ldd, const kn_q4_weight *w,
	int N, int accumulate, float *scratch);

/* The same two products computed in bf16 (bitsandbytes' bnb_4bit_compute_dtype bf16): each
 * tile dequantized, rounded to bf16 and multiplied by oneDNN's bf16 matmul (float32
 * accumulation and output) with inp or dout given in bf16. ws: oneDNN's scratchpad, at
 * least kn_q4_bf16_sizes's. 0, or -1 with kn_bf16_error(). */
int kn_q4_linear_forward_bf16(float *out, int ldo, const uint16_t *inp, const kn_q4_weight *w,
	int N, float *scratch, void *ws, size_t ws_bytes);
int kn_q4_linear_backward_bf16(float *dinp, const uint16_t *dout, int ldd,
	const kn_q4_weight *w, int N, int accumulate, float *scratch, void *ws, size_t ws_bytes);
/* The largest scratchpad those products of w need with N rows and leading dimension ld
 * (ldo, ldd) at the current thread count (their primitives made now) into *bytes. 0, or -1
 * with kn_bf16_error(). */
int kn_q4_bf16_sizes(const kn_q4_weight *w, int N, int ld, size_t *bytes);

/* Double quantization (QLoRA's) of nb absmax values, 8 bits each: offset = their mean (a
 * double sum in order, over nb, to float32); each block of KN_Q4_DQ_BLOCK of absmax -
 * offset (float32) is scaled by its largest magnitude (absmax2) and takes the nearest of
 * the 256 values of bitsandbytes' signed dynamic map (kn_q4_dq_value; a tie: the lower),
 * q = its index in ascending order. */
#define KN_Q4_DQ_BLOCK 256
void kn_q4_dq_quantize(const float *absmax, size_t nb, uint8_t *q, float *absmax2,
	float *offset);
/* absmax(nb) = float32(value(q) * absmax2 of its block) + offset, in float32, for the
 * values [first, first + nb) of a double-quantized array (q and absmax2 its whole). */
void kn_q4_dq_dequantize(const uint8_t *q, const float *absmax2, float offset, size_t first,
	size_t nb, float *absmax);
/* Value k (0..255, ascending) of the dynamic map: 0, 1, and for e = 0..6 the 2^e means of
 * neighbouring points of linspace(0.1, 1, 2^e + 1), times 10^(e-6), and their negatives;
 * each the float32 nearest the exact value. */
float kn_q4_dq_value(int k);

/* ---- optimizer ---- */

/* Sum of squares of x(N) in double, in an order fixed by N alone (not by threads): the
 * partial sums of KN_SUMSQ_SLICES slices, slice s being x[kn_sumsq_cut(N, s),
 * kn_sumsq_cut(N, s + 1)), added in slice order. */
double kn_sumsq(const float *x, size_t N);
#define KN_SUMSQ_SLICES 64
static inline size_t kn_sumsq_cut(size_t N, int s)
{
	return N * (size_t)s / KN_SUMSQ_SLICES;
}
/* part[s] for s in [s0, s1): slice s's partial sum of kn_sumsq(x, N), the same bits, read
 * from those slices of x alone (a rank holding only its part of x adds the others'). */
void kn_sumsq_slices(const float *x, size_t N, int s0, int s1, double *part);
/* x(N) *= s */
void kn_scale(float *x, float s, size_t N);
/* y(N) += x(N), element by element: the sum gradient accumulation and an all-reduce make */
void kn_add(float *y, const float *x, size_t N);
/* The same on the calling thread alone (no OpenMP team: a thread beside the training's). */
void kn_add_here(float *y, const float *x, size_t N);
/* One AdamW step (PyTorch semantics) on a tensor: param(N), m(N), v(N) updated from grad
 * times gscale (the clipping's factor, 1 for none; grad itself is left as it was); lr_t
 * already includes the schedule; bc1 = 1 - beta1^t, bc2 = 1 - beta2^t; decay 0 for
 * tensors that take none. param_bf16 (N; may be NULL): the new param rounded to bf16
 * (kn_bf16_from_f32), in the same pass. */
void kn_adamw_update(float *param, uint16_t *param_bf16, float *m, float *v,
	const float *grad, float gscale, size_t N, float lr, float beta1, float beta2, float eps,
	float weight_decay, double bc1, double bc2);

#endif
