/* kc_ops.cu - the CUDA kernels of the GPU model but matmuls and attention: embedding,
 * LayerNorm, bias gradients, GELU, residual, cross-entropy, global norm, AdamW, casts.
 *
 * Legend: B batch, T time, C channels, V vocab, N rows, OC output channels; row-major.
 * F is the activation type (float or __nv_bfloat16); arithmetic is float32, bf16 is only
 * a storage format (round to nearest even on store).
 *
 * Determinism (kc.h): no atomics. Row kernels reduce within one warp or one block with a
 * fixed butterfly; column sums (LayerNorm and bias gradients) go through a fixed slab
 * partition of the rows, the partials added in slab order; the embedding gradient walks
 * each token's rows in ascending order, as the CPU does.
 *
 * What recompute needs bitwise: kc_layernorm_apply gives exactly what the forward
 * LayerNorms wrote (one device function, written with explicit round-to-nearest
 * intrinsics so the compiler cannot contract it differently in two kernels), and GELU is
 * one kernel for the forward and the recompute alike.
 *
 * Not here: matmuls (kc_blas.cu), attention (kc_attn.cu, kc_sdpa.cu).
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "kc.h"
#include "kc_dev.cuh"

/* ---- errors ---- */

static thread_local char kc_errbuf[512]; /* kc_error(): per thread, as the docs promise */

extern "C" const char *kc_error(void)
{
	return kc_errbuf;
}

extern "C" int kc_seterr(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(kc_errbuf, sizeof kc_errbuf, fmt, ap);
	va_end(ap);
	return -1;
}

extern "C" size_t kc_dtype_size(kc_dtype dt)
{
	return dt == KC_BF16 ? 2 : 4;
}

extern "C" const char *kc_dtype_name(kc_dtype dt)
{
	return dt == KC_BF16 ? "bf16" : "fp32";
}

#define LN_EPS 1e-5f
#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define CE_THREADS 512             /* threads per row of the cross-entropy */

/* ---- embedding ---- */

/* out(B,T,C) = wte[tok] + wpe[t] */
template <typename F>
__global__ void encoder_fwd(F *out, const uint32_t *tok, const F *wte, const F *wpe, int T,
	int C, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
		i += (size_t)gridDim.x * blockDim.x) {
		size_t bt = i / C;
		int c = (int)(i % C), t = (int)(bt % T);
		stf(out + i, ldf(wte + (size_t)tok[bt] * C + c) + ldf(wpe + (size_t)t * C + c));
	}
}

/* dwte[tok k] += its rows of dout, in ascending row order */
template <typename F>
__global__ void encoder_bwd_wte(float *dwte, const F *dout, const int *order, const int *start,
	const int *btok, int C)
{
	int k = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
	if (c >= C)
		return;
	float *d = dwte + (size_t)btok[k] * C + c;
	float acc = *d;
	for (int i = start[k]; i < start[k + 1]; i++)
		acc += ldf(dout + (size_t)order[i] * C + c);
	*d = acc;
}

/* dwpe(T,C) += sum over b */
template <typename F>
__global__ void encoder_bwd_wpe(float *dwpe, const F *dout, int B, int T, int C)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i >= (size_t)T * C)
		return;
	float acc = dwpe[i];
	for (int b = 0; b < B; b++)
		acc += ldf(dout + (size_t)b * T * C + i);
	dwpe[i] = acc;
}

extern "C" int kc_encoder_forward(cudaStream_t st, kc_dtype dt, void *out, const uint32_t *tok,
	const void *wte, const void *wpe, int B, int T, int C)
{
	size_t n = (size_t)B * T * C;
	KC_DISPATCH(dt, F, encoder_fwd<F><<<ew_blocks(n), EW_THREADS, 0, st>>>((F *)out, tok,
				   (const F *)wte, (const F *)wpe, T, C, n));
	return kc_check_launch("encoder_forward");
}

extern "C" int kc_encoder_backward_wte(cudaStream_t st, kc_dtype dt, float *dwte,
	const void *dout, const int *order, const int *bucket_start, const int *bucket_tok, int nb,
	int C)
{
	if (nb == 0)
		return 0;
	dim3 grid(nb, (C + EW_THREADS - 1) / EW_THREADS);
	KC_DISPATCH(dt, F, encoder_bwd_wte<F><<<grid, EW_THREADS, 0, st>>>(dwte, (const F *)dout,
				   order, bucket_start, bucket_tok, C));
	return kc_check_launch("encoder_backward_wte");
}

extern "C" int kc_encoder_backward_wpe(cudaStream_t st, kc_dtype dt, float *dwpe,
	const void *dout, int B, int T, int C)
{
	size_t n = (size_t)T * C;
	unsigned blocks = (unsigned)((n + EW_THREADS - 1) / EW_THREADS);
	KC_DISPATCH(dt, F, encoder_bwd_wpe<F><<<blocks, EW_THREADS, 0, st>>>(dwpe, (const F *)dout,
				   B, T, C));
	return kc_check_launch("encoder_backward_wpe");
}

/* ---- LayerNorm ---- */

/* mean and rstd of row x(C) for the whole warp: two passes, float32 */
template <typename F>
__device__ void ln_stats(const F *x, int C, float *mean, float *rstd)
{
	int lane = threadIdx.x % 32;
	float s = 0.0f;
	for (int c = lane; c < C; c += 32)
		s += ldf(x + c);
	float m = warp_sum(s) / C;
	float v = 0.0f;
	for (int c = lane; c < C; c += 32) {
		float d = ldf(x + c) - m;
		v += d * d;
	}
	v = warp_sum(v) / C;
	*mean = m;
	*rstd = 1.0f / sqrtf(v + LN_EPS);
}

/* (x - m) * s * w + b, each operation rounded on its own: never contracted into an FMA, so
 * every kernel that calls it gives the same bits */
__device__ __forceinline__ float ln_apply1(float x, float m, float s, float w, float b)
{
	return __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(x, m), s), w), b);
}

template <typename F>
__device__ void ln_apply_row(F *o, const F *x, float m, float s, const F *w, const F *b, int C)
{
	for (int c = threadIdx.x % 32; c < C; c += 32)
		stf(o + c, ln_apply1(ldf(x + c), m, s, ldf(w + c), ldf(b + c)));
}

/* one warp per row: out, mean, rstd */
template <typename F>
__global__ void layernorm_fwd(F *out, float *mean, float *rstd, const F *inp, const F *w,
	const F *b, int N, int C)
{
	int r = blockIdx.x * ROW_WARPS + threadIdx.x / 32;
	if (r >= N)
		return;
	const F *x = inp + (size_t)r * C;
	float m, s;
	ln_stats(x, C, &m, &s);
	if (threadIdx.x % 32 == 0) {
		mean[r] = m;
		rstd[r] = s;
	}
	ln_apply_row(out + (size_t)r * C, x, m, s, w, b, C);
}

template <typename F>
__global__ void layernorm_apply(F *out, const F *inp, const float *mean, const float *rstd,
	const F *w, const F *b, int N, int C)
{
	int r = blockIdx.x * ROW_WARPS + threadIdx.x / 32;
	if (r >= N)
		return;
	ln_apply_row(out + (size_t)r * C, inp + (size_t)r * C, mean[r], rstd[r], w, b, C);
}

/* res = a + y stored, then LayerNorm of the stored row (each lane reads back only what it
 * wrote itself, so no barrier is needed) */
template <typename F>
__global__ void residual_layernorm_fwd(F *res, F *out, float *mean, float *rstd, const F *a,
	const F *y, const F *w, const F *b, int N, int C)
{
	int r = blockIdx.x * ROW_WARPS + threadIdx.x / 32;
	if (r >= N)
		return;
	size_t o = (size_t)r * C;
	for (int c = threadIdx.x % 32; c < C; c += 32)
		stf(res + o + c, ldf(a + o + c) + ldf(y + o + c));
	float m, s;
	ln_stats(res + o, C, &m, &s);
	if (threadIdx.x % 32 == 0) {
		mean[r] = m;
		rstd[r] = s;
	}
	ln_apply_row(out + o, res + o, m, s, w, b, C);
}

/* dinp += per row, one warp per row */
template <typename F>
__global__ void layernorm_bwd_inp(F *dinp, const F *dout, const F *inp, const float *mean,
	const float *rstd, const F *w, int N, int C)
{
	int r = blockIdx.x * ROW_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
	if (r >= N)
		return;
	size_t o = (size_t)r * C;
	float m = mean[r], s = rstd[r];
	float dmean = 0.0f, dnorm_mean = 0.0f;
	for (int c = lane; c < C; c += 32) {
		float norm = (ldf(inp + o + c) - m) * s;
		float dn = ldf(w + c) * ldf(dout + o + c);
		dmean += dn;
		dnorm_mean += dn * norm;
	}
	dmean = warp_sum(dmean) / C;
	dnorm_mean = warp_sum(dnorm_mean) / C;
	for (int c = lane; c < C; c += 32) {
		float norm = (ldf(inp + o + c) - m) * s;
		float dn = ldf(w + c) * ldf(dout + o + c);
		stf(dinp + o + c, ldf(dinp + o + c) + (dn - dmean - norm * dnorm_mean) * s);
	}
}

/* partials over one slab of rows: pw[slab][c] = sum of norm * dy, pb[slab][c] = sum of dy */
template <typename F>
__global__ void layernorm_bwd_cols(float *pw, float *pb, const F *dout, const F *inp,
	const float *mean, const float *rstd, int N, int C)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x, slab = blockIdx.y;
	if (c >= C)
		return;
	int r0 = slab * SLAB_ROWS, r1 = r0 + SLAB_ROWS < N ? r0 + SLAB_ROWS : N;
	float aw = 0.0f, ab = 0.0f;
	for (int r = r0; r < r1; r++) {
		size_t i = (size_t)r * C + c;
		float dy = ldf(dout + i);
		aw += (ldf(inp + i) - mean[r]) * rstd[r] * dy;
		ab += dy;
	}
	pw[(size_t)slab * C + c] = aw;
	if (pb)
		pb[(size_t)slab * C + c] = ab;
}

/* out(C) += partials(nslab, C) summed in slab order */
__global__ void sum_slabs(float *out, const float *part, int nslab, int C)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= C)
		return;
	float acc = 0.0f;
	for (int s = 0; s < nslab; s++)
		acc += part[(size_t)s * C + c];
	out[c] += acc;
}

int kc_sum_slabs(cudaStream_t st, float *out, const float *part, int nslab, int C)
{
	sum_slabs<<<(unsigned)((C + EW_THREADS - 1) / EW_THREADS), EW_THREADS, 0, st>>>(out, part,
		nslab, C);
	return kc_check_launch("column sums");
}

extern "C" int kc_layernorm_forward(cudaStream_t st, kc_dtype dt, void *out, float *mean,
	float *rstd, const void *inp, const void *w, const void *b, int N, int C)
{
	KC_DISPATCH(dt, F, layernorm_fwd<F><<<row_blocks(N), ROW_WARPS * 32, 0, st>>>((F *)out,
				   mean, rstd, (const F *)inp, (const F *)w, (const F *)b, N, C));
	return kc_check_launch("layernorm_forward");
}

extern "C" int kc_layernorm_apply(cudaStream_t st, kc_dtype dt, void *out, const void *inp,
	const float *mean, const float *rstd, const void *w, const void *b, int N, int C)
{
	KC_DISPATCH(dt, F, layernorm_apply<F><<<row_blocks(N), ROW_WARPS * 32, 0, st>>>((F *)out,
				   (const F *)inp, mean, rstd, (const F *)w, (const F *)b, N, C));
	return kc_check_launch("layernorm_apply");
}

extern "C" int kc_residual_layernorm_forward(cudaStream_t st, kc_dtype dt, void *res,
	void *out, float *mean, float *rstd, const void *a, const void *y, const void *w,
	const void *b, int N, int C)
{
	KC_DISPATCH(dt, F, residual_layernorm_fwd<F><<<row_blocks(N), ROW_WARPS * 32, 0, st>>>(
				   (F *)res, (F *)out, mean, rstd, (const F *)a, (const F *)y,
				   (const F *)w, (const F *)b, N, C));
	return kc_check_launch("residual_layernorm_forward");
}

extern "C" size_t kc_layernorm_scratch_bytes(int N, int C)
{
	return 2 * sizeof(float) * (size_t)slabs(N) * C;
}

extern "C" int kc_layernorm_backward(cudaStream_t st, kc_dtype dt, void *dinp, float *dw,
	float *db, const void *dout, const void *inp, const float *mean, const float *rstd,
	const void *w, int N, int C, void *scratch)
{
	int ns = slabs(N);
	float *pw = (float *)scratch, *pb = pw + (size_t)ns * C;
	dim3 cgrid((C + EW_THREADS - 1) / EW_THREADS, ns);
	KC_DISPATCH(dt, F, layernorm_bwd_inp<F><<<row_blocks(N), ROW_WARPS * 32, 0, st>>>(
				   (F *)dinp, (const F *)dout, (const F *)inp, mean, rstd,
				   (const F *)w, N, C));
	if (kc_check_launch("layernorm_backward (input)") < 0)
		return -1;
	KC_DISPATCH(dt, F, layernorm_bwd_cols<F><<<cgrid, EW_THREADS, 0, st>>>(pw, pb,
				   (const F *)dout, (const F *)inp, mean, rstd, N, C));
	if (kc_check_launch("layernorm_backward (columns)") < 0)
		return -1;
	return kc_sum_slabs(st, dw, pw, ns, C) < 0 ? -1 : kc_sum_slabs(st, db, pb, ns, C);
}

/* ---- bias ---- */

/* p[slab][j] = sum of dout[r][j] over the slab's rows */
template <typename F>
__global__ void bias_bwd_cols(float *p, const F *dout, int N, int OC)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x, slab = blockIdx.y;
	if (j >= OC)
		return;
	int r0 = slab * SLAB_ROWS, r1 = r0 + SLAB_ROWS < N ? r0 + SLAB_ROWS : N;
	float acc = 0.0f;
	for (int r = r0; r < r1; r++)
		acc += ldf(dout + (size_t)r * OC + j);
	p[(size_t)slab * OC + j] = acc;
}

template <typename F>
__global__ void add_bias(F *out, const F *bias, int OC, int ld, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
		i += (size_t)gridDim.x * blockDim.x) {
		size_t r = i / OC;
		int j = (int)(i % OC);
		F *o = out + r * ld + j;
		stf(o, ldf(o) + ldf(bias + j));
	}
}

extern "C" size_t kc_bias_scratch_bytes(int N, int OC)
{
	return sizeof(float) * (size_t)slabs(N) * OC;
}

extern "C" int kc_bias_backward(cudaStream_t st, kc_dtype dt, float *db, const void *dout, int N,
	int OC, void *scratch)
{
	int ns = slabs(N);
	unsigned cblocks = (unsigned)((OC + EW_THREADS - 1) / EW_THREADS);
	dim3 grid(cblocks, ns);
	KC_DISPATCH(dt, F, bias_bwd_cols<F><<<grid, EW_THREADS, 0, st>>>((float *)scratch,
				   (const F *)dout, N, OC));
	if (kc_check_launch("bias_backward (columns)") < 0)
		return -1;
	return kc_sum_slabs(st, db, (const float *)scratch, ns, OC);
}

extern "C" int kc_add_bias(cudaStream_t st, kc_dtype dt, void *out, const void *bias, int N,
	int OC, int ld)
{
	size_t n = (size_t)N * OC;
	KC_DISPATCH(dt, F, add_bias<F><<<ew_blocks(n), EW_THREADS, 0, st>>>((F *)out,
				   (const F *)bias, OC, ld, n));
	return kc_check_launch("add_bias");
}

/* ---- pointwise ---- */

/* tanh(u) = 1 - 2 / (exp(2u) + 1), as the CPU backend computes it */
__device__ __forceinline__ float gelu_tanh(float u)
{
	return 1.0f - 2.0f / (expf(2.0f * u) + 1.0f);
}

template <typename F>
__global__ void gelu_fwd(F *out, const F *inp, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
		i += (size_t)gridDim.x * blockDim.x) {
		float x = ldf(inp + i);
		float u = GELU_K * (x + 0.044715f * x * x * x);
		stf(out + i, 0.5f * x * (1.0f + gelu_tanh(u)));
	}
}

template <typename F>
__global__ void gelu_bwd(F *dinp, const F *inp, const F *dout, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
		i += (size_t)gridDim.x * blockDim.x) {
		float x = ldf(inp + i);
		float u = GELU_K * (x + 0.044715f * x * x * x);
		float th = gelu_tanh(u);
		float sech2 = 1.0f - th * th;
		float g = 0.5f * (1.0f + th) +
			  0.5f * x * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
		stf(dinp + i, g * ldf(dout + i));
	}
}

template <typename F>
__global__ void residual_fwd(F *out, const F *a, const F *b, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
		i += (size_t)gridDim.x * blockDim.x)
		stf(out + i, ldf(a + i) + ldf(b + i));
}

extern "C" int kc_gelu_forward(cudaStream_t st, kc_dtype dt, void *out, const void *inp, size_t n)
{
	KC_DISPATCH(dt, F, gelu_fwd<F><<<ew_blocks(n), EW_THREADS, 0, st>>>((F *)out,
				   (const F *)inp, n));
	return kc_check_launch("gelu_forward");
}

extern "C" int kc_gelu_backward(cudaStream_t st, kc_dtype dt, void *dinp, const void *inp,
	const void *dout, size_t n)
{
	KC_DISPATCH(dt, F, gelu_bwd<F><<<ew_blocks(n), EW_THREADS, 0, st>>>((F *)dinp,
				   (const F *)inp, (const F *)dout, n));
	return kc_check_launch("gelu_backward");
}

extern "C" int kc_residual_forward(cudaStream_t st, kc_dtype dt, void *out, const void *a,
	const void *b, size_t n)
{
	KC_DISPATCH(dt, F, residual_fwd<F><<<ew_blocks(n), EW_THREADS, 0, st>>>((F *)out,
				   (const F *)a, (const F *)b, n));
	return kc_check_launch("residual_forward");
}

/* ---- cross-entropy: one block per row ---- */

/* max, sum of exp(l - max), lse and the target's logit of row l(V), for the whole block */
template <typename F>
__device__ void ce_row(const F *l, int V, int tgt, float *mx_out, float *sum_out,
	float *lse_out, float *lt_out)
{
	__shared__ float sh[32];
	float lt = ldf(l + tgt); /* read before any thread may overwrite the row */
	float mx = -INFINITY;
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		mx = fmaxf(mx, ldf(l + j));
	mx = block_max(mx, sh);
	float s = 0.0f;
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		s += expf(ldf(l + j) - mx);
	s = block_sum(s, sh);
	*mx_out = mx;
	*sum_out = s;
	*lse_out = mx + logf(s);
	*lt_out = lt;
}

template <typename F>
__global__ void ce_fwd(float *lse, float *loss, const F *logits, int ld, const uint32_t *target,
	int V)
{
	int r = blockIdx.x;
	float mx, s, z, lt;
	ce_row(logits + (size_t)r * ld, V, target[r], &mx, &s, &z, &lt);
	if (threadIdx.x == 0) {
		lse[r] = z;
		loss[r] = z - lt;
	}
}

template <typename F>
__global__ void ce_fused(F *logits, int ld, float *lse, float *loss, const uint32_t *target,
	float scale, int V)
{
	int r = blockIdx.x, tgt = target[r];
	F *l = logits + (size_t)r * ld;
	float mx, s, z, lt;
	ce_row(l, V, tgt, &mx, &s, &z, &lt);
	if (threadIdx.x == 0) {
		lse[r] = z;
		loss[r] = z - lt;
	}
	__syncthreads(); /* every thread has read the row (ce_row's last barrier) */
	float k = scale / s;
	for (int j = threadIdx.x; j < V; j += blockDim.x) {
		float p = expf(ldf(l + j) - mx) * k;
		stf(l + j, j == tgt ? p - scale : p);
	}
}

extern "C" int kc_crossentropy_forward(cudaStream_t st, kc_dtype dt, float *lse, float *loss,
	const void *logits, int ld, const uint32_t *target, int N, int V)
{
	if (N == 0)
		return 0;
	KC_DISPATCH(dt, F, ce_fwd<F><<<N, CE_THREADS, 0, st>>>(lse, loss, (const F *)logits, ld,
				   target, V));
	return kc_check_launch("crossentropy_forward");
}

extern "C" int kc_crossentropy_fused(cudaStream_t st, kc_dtype dt, void *logits, int ld,
	float *lse, float *loss, const uint32_t *target, float scale, int N, int V)
{
	if (N == 0)
		return 0;
	KC_DISPATCH(dt, F, ce_fused<F><<<N, CE_THREADS, 0, st>>>((F *)logits, ld, lse, loss,
				   target, scale, V));
	return kc_check_launch("crossentropy_fused");
}

/* ---- global norm and AdamW ---- */

#define SUMSQ_THREADS 256

/* part[s] = sum of squares of slice s in double */
__global__ void sumsq_parts(double *part, const float *x, size_t n)
{
	__shared__ double sh[SUMSQ_THREADS];
	int s = blockIdx.x;
	size_t i0 = n * s / KC_SUMSQ_PARTS, i1 = n * (s + 1) / KC_SUMSQ_PARTS;
	double acc = 0.0;
	for (size_t i = i0 + threadIdx.x; i < i1; i += SUMSQ_THREADS)
		acc += (double)x[i] * x[i];
	sh[threadIdx.x] = acc;
	__syncthreads();
	for (int w = SUMSQ_THREADS / 2; w > 0; w /= 2) {
		if ((int)threadIdx.x < w)
			sh[threadIdx.x] += sh[threadIdx.x + w];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		part[s] = sh[0];
}

__global__ void sumsq_total(double *out, const double *part)
{
	double t = 0.0;
	for (int s = 0; s < KC_SUMSQ_PARTS; s++)
		t += part[s];
	*out = t;
}

extern "C" int kc_sumsq(cudaStream_t st, double *out, double *scratch, const float *x, size_t n)
{
	sumsq_parts<<<KC_SUMSQ_PARTS, SUMSQ_THREADS, 0, st>>>(scratch, x, n);
	if (kc_check_launch("sumsq (slices)") < 0)
		return -1;
	sumsq_total<<<1, 1, 0, st>>>(out, scratch);
	return kc_check_launch("sumsq (total)");
}

/* kn_adamw_update's arithmetic, per element; the gradient scaled first (clipping) */
template <typename F>
__global__ void adamw(float *param, float *m, float *v, const float *grad, F *copy, size_t n,
	float beta1, float beta2, float eps, float decay, float step_size, float bc2_sqrt,
	float grad_scale)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
		i += (size_t)gridDim.x * blockDim.x) {
		float g = grad[i] * grad_scale;
		float p = param[i] * decay;
		float mi = beta1 * m[i] + (1.0f - beta1) * g;
		float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
		m[i] = mi;
		v[i] = vi;
		p = p - step_size * (mi / (sqrtf(vi) / bc2_sqrt + eps));
		param[i] = p;
		if (copy)
			stf(copy + i, p);
	}
}

extern "C" int kc_adamw(cudaStream_t st, float *param, float *m, float *v, const float *grad,
	void *copy, kc_dtype dt, size_t n, float lr, float beta1, float beta2, float eps,
	float weight_decay, double bc1, double bc2, float grad_scale)
{
	/* the scalars exactly as kn_adamw_update derives them */
	float decay = 1.0f - lr * weight_decay;
	float step_size = (float)(lr / bc1);
	float bc2_sqrt = (float)sqrt(bc2);
	KC_DISPATCH(dt, F, adamw<F><<<ew_blocks(n), EW_THREADS, 0, st>>>(param, m, v, grad,
				   (F *)copy, n, beta1, beta2, eps, decay, step_size, bc2_sqrt,
				   grad_scale));
	return kc_check_launch("adamw");
}

/* ---- sums of gradients ---- */

/* y(n) += x(n); one rounding per element, no contraction possible */
__global__ void add_f32(float *y, const float *x, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
		i += (size_t)gridDim.x * blockDim.x)
		y[i] = y[i] + x[i];
}

/* x(n) *= s */
__global__ void scale_f32(float *x, float s, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
		i += (size_t)gridDim.x * blockDim.x)
		x[i] = x[i] * s;
}

extern "C" int kc_add(cudaStream_t st, float *y, const float *x, size_t n)
{
	add_f32<<<ew_blocks(n), EW_THREADS, 0, st>>>(y, x, n);
	return kc_check_launch("add");
}

extern "C" int kc_scale(cudaStream_t st, float *x, float s, size_t n)
{
	scale_f32<<<ew_blocks(n), EW_THREADS, 0, st>>>(x, s, n);
	return kc_check_launch("scale");
}

/* ---- casts ---- */

template <typename F>
__global__ void from_f32(F *dst, const float *src, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
		i += (size_t)gridDim.x * blockDim.x)
		stf(dst + i, src[i]);
}

template <typename F>
__global__ void to_f32(float *dst, const F *src, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
		i += (size_t)gridDim.x * blockDim.x)
		dst[i] = ldf(src + i);
}

extern "C" int kc_from_f32(cudaStream_t st, kc_dtype dt, void *dst, const float *src, size_t n)
{
	KC_DISPATCH(dt, F, from_f32<F><<<ew_blocks(n), EW_THREADS, 0, st>>>((F *)dst, src, n));
	return kc_check_launch("from_f32");
}

extern "C" int kc_to_f32(cudaStream_t st, kc_dtype dt, float *dst, const void *src, size_t n)
{
	KC_DISPATCH(dt, F, to_f32<F><<<ew_blocks(n), EW_THREADS, 0, st>>>(dst, (const F *)src, n));
	return kc_check_launch("to_f32");
}
