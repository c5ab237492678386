/* kc.h - the CUDA kernels behind the GPU model (kernels/cuda/), a C interface.
 *
 * Legend as kn.h: B batch, T time, C channels, NH heads, hs = C/NH, V vocab, N rows (= B*T
 * unless said otherwise), OC output channels; every tensor row-major. Linear weights are
 * stored [in, out] (Hugging Face's Conv1D), as on the CPU.
 *
 * Precision: activations, their gradients and the working copy of the weights have the
 * dtype `dt` a launcher takes (KC_BF16 for training as llm.c does it on GPUs, KC_F32 to
 * compare with the CPU backend); LayerNorm statistics, log-sum-exps, losses, weight
 * gradients, master weights and AdamW moments are always float32 (`float *`). Arithmetic
 * is float32 everywhere; bf16 values are rounded to nearest even when stored.
 *
 * Determinism: no kernel here uses floating-point atomics; every reduction has an order
 * fixed by the shapes alone, so a kernel run twice on the same inputs gives the same bits.
 * The GPU model's "same numbers under every policy" in float32 rests on that and on
 * cuBLASLt choosing the same algorithm for the same shapes and alignments.
 *
 * Errors: every launcher returns 0, or -1 after a CUDA / cuBLAS failure, with the message
 * in kc_error() (per thread). Launches are asynchronous on the stream given: a fault inside
 * a kernel surfaces at the next synchronisation. Nothing here allocates device memory: the
 * caller passes every buffer and scratch (sizes from the *_bytes functions).
 *
 * Shape comments mark outputs with `=` (overwritten) or `+=` (accumulated into).
 */
#ifndef KC_H
#define KC_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kc_dtype {
	KC_F32,  /* float32 */
	KC_BF16, /* bfloat16 */
} kc_dtype;

/* bytes of one element of dt */
size_t kc_dtype_size(kc_dtype dt);
/* "fp32", "bf16" */
const char *kc_dtype_name(kc_dtype dt);

/* The message of the last failure on the calling thread ("" when none). */
const char *kc_error(void);
/* Sets it (printf format); returns -1 so that `return kc_seterr(...)` reads well. */
int kc_seterr(const char *fmt, ...)
#ifdef __GNUC__
	__attribute__((format(printf, 1, 2)))
#endif
	;

/* ---- matmuls: cuBLASLt ---- */

#define KC_BLAS_WORKSPACE ((size_t)32 << 20) /* cuBLASLt workspace: 32 MiB, as llm.c on Hopper */

typedef struct kc_blas kc_blas;

/* "cuBLASLt 13.0.2": the library's version, loading it when needed (dlopen, see kc_blas.cu);
 * "cuBLASLt not loaded" when it cannot be. */
const char *kc_blas_version(void);
/* A cuBLASLt handle using `workspace` (device, KC_BLAS_WORKSPACE bytes, kept by the caller).
 * Loads cuBLASLt at the first call; -1 with kc_error() when it cannot. */
int kc_blas_create(kc_blas **out, void *workspace, size_t workspace_bytes);
void kc_blas_destroy(kc_blas *h); /* NULL is a no-op */
/* Epilogues that fell back to a plain product and a kernel of ours (cuBLASLt offered no
 * algorithm with the fused epilogue), since the handle was created. */
long kc_blas_fallbacks(const kc_blas *h);

typedef enum kc_epilogue {
	KC_EPI_NONE,  /* C = alpha op(A) op(B) + beta C */
	KC_EPI_BIAS,  /* ... then C[r, j] += bias[j] (epi_ptr: bias(N), dtype of C; beta 0) */
	KC_EPI_DGELU, /* ... then C *= gelu'(aux) (epi_ptr: aux(M,N) with ldc, dtype of C;
		       * beta 0): the product of a backward through GELU */
} kc_epilogue;

/* Row-major, as kn_sgemm: C(M,N) = alpha op(A)(M,K) op(B)(K,N) + beta C, op(X) = X or X^T
 * by trans flag, lda/ldb/ldc row strides as stored. A and B have dtype ab; C has dtype cdt
 * (cdt may be KC_F32 with ab KC_BF16: float32 weight gradients from bf16 activations).
 * Batched when batch > 1: matrix i at element offsets i*sA, i*sB, i*sC. Compute in float32
 * (no TF32). When cuBLASLt has no algorithm for a fused epilogue, the plain product plus a
 * kernel of ours does the same (counted in kc_blas_fallbacks). */
int kc_gemm(kc_blas *h, cudaStream_t st, int trans_a, int trans_b, int M, int N, int K,
	float alpha, const void *A, int lda, long long sA, const void *B, int ldb, long long sB,
	kc_dtype ab, float beta, void *C, int ldc, long long sC, kc_dtype cdt, int batch,
	kc_epilogue epi, const void *epi_ptr);

/* How kc_gemm states its row-major product to cuBLASLt, which is column-major:
 * D(m,n) = op_a(A')(m,k) op_b(B')(k,n), with A' our B and B' our A, each described as
 * stored (rows x cols, leading dimension, batch stride in elements). Pure; the host test of
 * the mapping checks it against a column-major product of its own. */
typedef struct kc_colmajor {
	int op_a, op_b;           /* 1: transposed */
	int m, n, k;
	int a_rows, a_cols, a_ld; /* A' = our B */
	int b_rows, b_cols, b_ld; /* B' = our A */
	int c_rows, c_cols, c_ld;
	long long a_stride, b_stride, c_stride;
} kc_colmajor;
void kc_gemm_colmajor(int trans_a, int trans_b, int M, int N, int K, int lda, long long sA,
	int ldb, long long sB, int ldc, long long sC, kc_colmajor *out);

/* ---- embedding ---- */

/* out(B,T,C) = wte[tok[b,t]] + wpe[t]; tok on the device */
int kc_encoder_forward(cudaStream_t st, kc_dtype dt, void *out, const uint32_t *tok,
	const void *wte, const void *wpe, int B, int T, int C);
/* dwte(V,C) += sum of dout rows by token, from the token buckets: nb distinct tokens
 * bucket_tok(nb), their rows in order(N) from bucket_start(nb+1) on (rows ascending within
 * a bucket, so the sum's order is fixed); float32 dwte */
int kc_encoder_backward_wte(cudaStream_t st, kc_dtype dt, float *dwte, const void *dout,
	const int *order, const int *bucket_start, const int *bucket_tok, int nb, int C);
/* dwpe(T,C) += sum over b of dout(B,T,C); float32 dwpe */
int kc_encoder_backward_wpe(cudaStream_t st, kc_dtype dt, float *dwpe, const void *dout, int B,
	int T, int C);

/* ---- LayerNorm (eps 1e-5) ---- */

/* out(N,C) =, mean(N) =, rstd(N) = */
int kc_layernorm_forward(cudaStream_t st, kc_dtype dt, void *out, float *mean, float *rstd,
	const void *inp, const void *w, const void *b, int N, int C);
/* out(N,C) = from saved mean and rstd: bitwise what kc_layernorm_forward wrote */
int kc_layernorm_apply(cudaStream_t st, kc_dtype dt, void *out, const void *inp,
	const float *mean, const float *rstd, const void *w, const void *b, int N, int C);
/* res(N,C) = a + y (stored in dt), then out, mean, rstd = LayerNorm of the stored res:
 * bitwise kc_residual_forward then kc_layernorm_forward */
int kc_residual_layernorm_forward(cudaStream_t st, kc_dtype dt, void *res, void *out,
	float *mean, float *rstd, const void *a, const void *y, const void *w, const void *b,
	int N, int C);
/* dinp(N,C) +=, dw(C) +=, db(C) += (float32 dw, db); scratch: kc_layernorm_scratch_bytes */
int kc_layernorm_backward(cudaStream_t st, kc_dtype dt, void *dinp, float *dw, float *db,
	const void *dout, const void *inp, const float *mean, const float *rstd, const void *w,
	int N, int C, void *scratch);
size_t kc_layernorm_scratch_bytes(int N, int C);

/* ---- linear layers: the products are kc_gemm's; these are the rest ---- */

/* db(OC) += column sums of dout(N,OC), float32 db; scratch: kc_bias_scratch_bytes */
int kc_bias_backward(cudaStream_t st, kc_dtype dt, float *db, const void *dout, int N, int OC,
	void *scratch);
size_t kc_bias_scratch_bytes(int N, int OC);
/* out(N,OC) += bias(OC), rows of stride ld */
int kc_add_bias(cudaStream_t st, kc_dtype dt, void *out, const void *bias, int N, int OC,
	int ld);

/* ---- pointwise ---- */

/* out(n) = gelu_tanh(inp) */
int kc_gelu_forward(cudaStream_t st, kc_dtype dt, void *out, const void *inp, size_t n);
/* dinp(n) = gelu_tanh'(inp) * dout; dinp may alias dout */
int kc_gelu_backward(cudaStream_t st, kc_dtype dt, void *dinp, const void *inp,
	const void *dout, size_t n);
/* out(n) = a + b */
int kc_residual_forward(cudaStream_t st, kc_dtype dt, void *out, const void *a, const void *b,
	size_t n);

/* ---- attention (causal, scale 1/sqrt(hs)): the engine's own, for float32 and for the
 * shapes cuDNN cannot serve ---- */

/* out(B,T,C) = causal softmax(q k^T * scale) v, heads side by side; lse(B,NH,T) = log-sum-exp
 * of each row of scaled scores (float32); q, k, v the column blocks of qkv(B,T,3C). One batch
 * row at a time through scratch (kc_attention_scratch_bytes): the NH*T*T probabilities of
 * one b exist only during the call. */
int kc_attention_forward(kc_blas *h, cudaStream_t st, kc_dtype dt, void *out, float *lse,
	const void *qkv, int B, int T, int C, int NH, void *scratch);
/* dqkv(B,T,3C) = from dout(B,T,C), recomputing the probabilities from qkv and lse; out and
 * lse are what kc_attention_forward wrote */
int kc_attention_backward(kc_blas *h, cudaStream_t st, kc_dtype dt, void *dqkv,
	const void *dout, const void *qkv, const void *out, const float *lse, int B, int T, int C,
	int NH, void *scratch);
size_t kc_attention_scratch_bytes(kc_dtype dt, int T, int NH);

/* ---- attention through cuDNN (kernels/cuda/kc_sdpa.cu) ---- */

/* Fused causal SDPA through the cuDNN v9 backend graph API, bf16 only. qkv (B,T,3,NH,hs)
 * bf16 — i.e. the c_attn output (B,T,3C) as is; out (B,T,NH,hs) bf16 = (B,T,C);
 * stats (B,NH,T) float32: the softmax log-sum-exp saved for backward. */
typedef struct kc_sdpa kc_sdpa;
/* 0 on success; -1 with a message in err when cuDNN cannot serve this shape (then use the
 * fallback). Caches the built forward and backward plans. */
int kc_sdpa_create(kc_sdpa **out, int B, int NH, int T, int hs, char *err, size_t errlen);
size_t kc_sdpa_workspace_bytes(const kc_sdpa *s);
int kc_sdpa_forward(kc_sdpa *s, cudaStream_t st, const void *qkv, void *out, float *stats,
	void *workspace);
int kc_sdpa_backward(kc_sdpa *s, cudaStream_t st, const void *qkv, const void *out,
	const void *dout, const float *stats, void *dqkv, void *workspace);
void kc_sdpa_destroy(kc_sdpa *s);
/* One line for logs: cuDNN's version, the GPU, the engines chosen, the workspace. */
const char *kc_sdpa_describe(const kc_sdpa *s);
#define KC_SDPA_DECLARED 1

/* ---- head: softmax cross-entropy over rows of logits (stride ld >= V) ---- */

/* lse(N) =, loss(N) = lse - logits[r, target[r]] (float32); targets on the device */
int kc_crossentropy_forward(cudaStream_t st, kc_dtype dt, float *lse, float *loss,
	const void *logits, int ld, const uint32_t *target, int N, int V);
/* lse and loss as kc_crossentropy_forward (same bits), and each row of logits(N,V)
 * overwritten by its gradient (softmax - onehot(target)) * scale: llm.c's fused classifier */
int kc_crossentropy_fused(cudaStream_t st, kc_dtype dt, void *logits, int ld, float *lse,
	float *loss, const uint32_t *target, float scale, int N, int V);

/* ---- optimizer ---- */

#define KC_SUMSQ_PARTS 1024 /* fixed partition of kc_sumsq, whatever the device */

/* *out (device double) = sum of squares of x(n), partial sums over KC_SUMSQ_PARTS slices
 * added in slice order; scratch: KC_SUMSQ_PARTS doubles */
int kc_sumsq(cudaStream_t st, double *out, double *scratch, const float *x, size_t n);
/* y(n) += x(n), float32, each element rounded once as kn_add does: the sum of the gradients
 * of a step's micro-batches */
int kc_add(cudaStream_t st, float *y, const float *x, size_t n);
/* x(n) *= s, float32, as kn_scale: the sum over micro-batches and ranks made a mean */
int kc_scale(cudaStream_t st, float *x, float s, size_t n);
/* One AdamW step (PyTorch semantics, as kn_adamw_update) on param(n), m(n), v(n) from
 * grad(n) * grad_scale; when copy is not NULL it receives the new param in dt (the working
 * copy of a mixed-precision run) */
int kc_adamw(cudaStream_t st, float *param, float *m, float *v, const float *grad,
	void *copy, kc_dtype dt, size_t n, float lr, float beta1, float beta2, float eps,
	float weight_decay, double bc1, double bc2, float grad_scale);

/* ---- conversions ---- */

/* dst(n) in dt = src(n) float32 */
int kc_from_f32(cudaStream_t st, kc_dtype dt, void *dst, const float *src, size_t n);
/* dst(n) float32 = src(n) in dt */
int kc_to_f32(cudaStream_t st, kc_dtype dt, float *dst, const void *src, size_t n);

#ifdef __cplusplus
}
#endif

#endif
