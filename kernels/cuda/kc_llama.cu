/* kc_llama.cu - the Llama family's CUDA kernels: RMSNorm, rotary position embeddings,
 * SwiGLU; forward, backward, and the re-apply recompute needs (kernels/cpu/kn_llama.c's
 * equations, as Hugging Face's modeling_llama.py writes them).
 *
 * Legend: N rows (B*T), C channels, B batch, T time, nh heads of hs columns (hs even, half =
 * hs/2), ld a row's stride, I the MLP's intermediate size; row-major. F is the activation
 * type (float or __nv_bfloat16), arithmetic float32.
 *
 * RMSNorm: out = w * (x * rstd), rstd = 1/sqrt(mean(x^2) + eps), one warp per row (a fixed
 * butterfly); rmsnorm_apply1 is the one device function that turns (x, rstd, w) into out,
 * written with explicit round-to-nearest intrinsics so that the forward and the re-apply
 * cannot be contracted differently: selective recompute gets the forward's bits. The weight
 * gradient goes through kc_ops.cu's slab partition (no atomics).
 * Rotary embeddings: in place on the first nh heads of each row, pair j with j + half
 * (rotate_half), cos and sin from the table kn_rope_table makes on the host (T, hs).
 * SwiGLU: h = silu(gate) * up, gu (N, 2I) holding gate | up per row.
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "kc.h"
#include "kc_dev.cuh"

/* ---- RMSNorm ---- */

__device__ __forceinline__ float rmsnorm_apply1(float x, float s, float w)
{
	return __fmul_rn(w, __fmul_rn(x, s));
}

/* rstd of row x(C) for the whole warp */
template <typename F>
__device__ float rms_rstd(const F *x, int C, float eps)
{
	float ss = 0.0f;
	for (int c = threadIdx.x % 32; c < C; c += 32) {
		float v = ldf(x + c);
		ss += v * v;
	}
	return rsqrtf(warp_sum(ss) / C + eps);
}

template <typename F>
__global__ void rmsnorm_fwd(F *out, float *rstd, const F *inp, const F *w, float eps, int N,
	int C)
{
	int r = blockIdx.x * ROW_WARPS + threadIdx.x / 32;
	if (r >= N)
		return;
	const F *x = inp + (size_t)r * C;
	float s = rms_rstd(x, C, eps);
	if (threadIdx.x % 32 == 0)
		rstd[r] = s;
	for (int c = threadIdx.x % 32; c < C; c += 32)
		stf(out + (size_t)r * C + c, rmsnorm_apply1(ldf(x + c), s, ldf(w + c)));
}

template <typename F>
__global__ void rmsnorm_apply(F *out, const F *inp, const float *rstd, const F *w, int N, int C)
{
	int r = blockIdx.x * ROW_WARPS + threadIdx.x / 32;
	if (r >= N)
		return;
	size_t o = (size_t)r * C;
	for (int c = threadIdx.x % 32; c < C; c += 32)
		stf(out + o + c, rmsnorm_apply1(ldf(inp + o + c), rstd[r], ldf(w + c)));
}

/* dinp += rstd * (w dy - xhat * mean(w dy xhat)), one warp per row */
template <typename F>
__global__ void rmsnorm_bwd_inp(F *dinp, const F *dout, const F *inp, const float *rstd,
	const F *w, int N, int C)
{
	int r = blockIdx.x * ROW_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
	if (r >= N)
		return;
	size_t o = (size_t)r * C;
	float s = rstd[r], dot = 0.0f;
	for (int c = lane; c < C; c += 32)
		dot += ldf(w + c) * ldf(dout + o + c) * (ldf(inp + o + c) * s);
	float m = warp_sum(dot) / C;
	for (int c = lane; c < C; c += 32) {
		float xh = ldf(inp + o + c) * s;
		float dn = ldf(w + c) * ldf(dout + o + c);
		stf(dinp + o + c, ldf(dinp + o + c) + (dn - xh * m) * s);
	}
}

/* pw[slab][c] = sum over the slab's rows of dy * x * rstd */
template <typename F>
__global__ void rmsnorm_bwd_cols(float *pw, const F *dout, const F *inp, const float *rstd,
	int N, int C)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x, slab = blockIdx.y;
	if (c >= C)
		return;
	int r0 = slab * SLAB_ROWS, r1 = r0 + SLAB_ROWS < N ? r0 + SLAB_ROWS : N;
	float acc = 0.0f;
	for (int r = r0; r < r1; r++) {
		size_t i = (size_t)r * C + c;
		acc += ldf(dout + i) * (ldf(inp + i) * rstd[r]);
	}
	pw[(size_t)slab * C + c] = acc;
}

extern "C" int kc_rmsnorm_forward(cudaStream_t st, kc_dtype dt, void *out, float *rstd,
	const void *inp, const void *w, float eps, int N, int C)
{
	KC_DISPATCH(dt, F, rmsnorm_fwd<F><<<row_blocks(N), ROW_WARPS * 32, 0, st>>>((F *)out, rstd,
				   (const F *)inp, (const F *)w, eps, N, C));
	return kc_check_launch("rmsnorm_forward");
}

extern "C" int kc_rmsnorm_apply(cudaStream_t st, kc_dtype dt, void *out, const void *inp,
	const float *rstd, const void *w, int N, int C)
{
	KC_DISPATCH(dt, F, rmsnorm_apply<F><<<row_blocks(N), ROW_WARPS * 32, 0, st>>>((F *)out,
				   (const F *)inp, rstd, (const F *)w, N, C));
	return kc_check_launch("rmsnorm_apply");
}

extern "C" size_t kc_rmsnorm_scratch_bytes(int N, int C)
{
	return sizeof(float) * (size_t)slabs(N) * C;
}

extern "C" int kc_rmsnorm_backward(cudaStream_t st, kc_dtype dt, void *dinp, float *dw,
	const void *dout, const void *inp, const float *rstd, const void *w, int N, int C,
	void *scratch)
{
	int ns = slabs(N);
	dim3 cgrid((C + EW_THREADS - 1) / EW_THREADS, ns);
	KC_DISPATCH(dt, F, rmsnorm_bwd_inp<F><<<row_blocks(N), ROW_WARPS * 32, 0, st>>>(
				   (F *)dinp, (const F *)dout, (const F *)inp, rstd, (const F *)w, N,
				   C));
	if (kc_check_launch("rmsnorm_backward (input)") < 0)
		return -1;
	KC_DISPATCH(dt, F, rmsnorm_bwd_cols<F><<<cgrid, EW_THREADS, 0, st>>>((float *)scratch,
				   (const F *)dout, (const F *)inp, rstd, N, C));
	if (kc_check_launch("rmsnorm_backward (columns)") < 0)
		return -1;
	return kc_sum_slabs(st, dw, (const float *)scratch, ns, C);
}

/* ---- rotary embeddings ---- */

/* one thread per (row, head, pair j): x1 = x[j], x2 = x[j + half] turned by sign * angle */
template <typename F>
__global__ void rope_turn(F *x, const float *cs, int B, int T, int nh, int hs, int ld,
	float sign)
{
	int half = hs / 2;
	size_t n = (size_t)B * T * nh * half;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
		i += (size_t)gridDim.x * blockDim.x) {
		int j = (int)(i % half), h = (int)(i / half % nh);
		size_t bt = i / ((size_t)half * nh);
		const float *c = cs + (bt % T) * hs;
		F *a = x + bt * ld + (size_t)h * hs;
		float x1 = ldf(a + j), x2 = ldf(a + j + half), sn = sign * c[half + j];
		stf(a + j, __fsub_rn(__fmul_rn(x1, c[j]), __fmul_rn(x2, sn)));
		stf(a + j + half, __fadd_rn(__fmul_rn(x2, c[j]), __fmul_rn(x1, sn)));
	}
}

extern "C" int kc_rope_forward(cudaStream_t st, kc_dtype dt, void *x, const float *cs, int B,
	int T, int nh, int hs, int ld)
{
	size_t n = (size_t)B * T * nh * (hs / 2);
	KC_DISPATCH(dt, F, rope_turn<F><<<ew_blocks(n), EW_THREADS, 0, st>>>((F *)x, cs, B, T, nh,
				   hs, ld, 1.0f));
	return kc_check_launch("rope_forward");
}

extern "C" int kc_rope_backward(cudaStream_t st, kc_dtype dt, void *dx, const float *cs, int B,
	int T, int nh, int hs, int ld)
{
	size_t n = (size_t)B * T * nh * (hs / 2);
	KC_DISPATCH(dt, F, rope_turn<F><<<ew_blocks(n), EW_THREADS, 0, st>>>((F *)dx, cs, B, T, nh,
				   hs, ld, -1.0f));
	return kc_check_launch("rope_backward");
}

/* ---- SwiGLU ---- */

__device__ __forceinline__ float sigmoid(float g)
{
	return 1.0f / (1.0f + expf(-g));
}

template <typename F>
__global__ void swiglu_fwd(F *h, const F *gu, int N, int I)
{
	size_t n = (size_t)N * I;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
		i += (size_t)gridDim.x * blockDim.x) {
		size_t r = i / I, j = i % I;
		float g = ldf(gu + r * 2 * I + j), u = ldf(gu + r * 2 * I + I + j);
		stf(h + i, __fmul_rn(__fmul_rn(g, sigmoid(g)), u));
	}
}

template <typename F>
__global__ void swiglu_bwd(F *dgu, const F *dh, const F *gu, int N, int I)
{
	size_t n = (size_t)N * I;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
		i += (size_t)gridDim.x * blockDim.x) {
		size_t r = i / I, j = i % I;
		float g = ldf(gu + r * 2 * I + j), u = ldf(gu + r * 2 * I + I + j), d = ldf(dh + i);
		float sg = sigmoid(g);
		stf(dgu + r * 2 * I + I + j, d * (g * sg));
		stf(dgu + r * 2 * I + j, d * u * sg * (1.0f + g * (1.0f - sg)));
	}
}

extern "C" int kc_swiglu_forward(cudaStream_t st, kc_dtype dt, void *h, const void *gu, int N,
	int I)
{
	KC_DISPATCH(dt, F, swiglu_fwd<F><<<ew_blocks((size_t)N * I), EW_THREADS, 0, st>>>((F *)h,
				   (const F *)gu, N, I));
	return kc_check_launch("swiglu_forward");
}

extern "C" int kc_swiglu_backward(cudaStream_t st, kc_dtype dt, void *dgu, const void *dh,
	const void *gu, int N, int I)
{
	KC_DISPATCH(dt, F, swiglu_bwd<F><<<ew_blocks((size_t)N * I), EW_THREADS, 0, st>>>(
				   (F *)dgu, (const F *)dh, (const F *)gu, N, I));
	return kc_check_launch("swiglu_backward");
}
