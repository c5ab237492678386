/* kc_dev.cuh - device helpers shared by the kernels of kernels/cuda/: loads and stores
 * that convert to and from float32, warp and block reductions with a fixed order, the
 * dtype dispatch and the launch check. Private to kernels/cuda/ (C++ only).
 */
#ifndef KC_DEV_CUH
#define KC_DEV_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kc.h"

/* Element loads and stores: float32 arithmetic whatever the storage type. */
__device__ __forceinline__ float ldf(const float *p)
{
	return *p;
}
__device__ __forceinline__ float ldf(const __nv_bfloat16 *p)
{
	return __bfloat162float(*p);
}
__device__ __forceinline__ void stf(float *p, float v)
{
	*p = v;
}
__device__ __forceinline__ void stf(__nv_bfloat16 *p, float v)
{
	*p = __float2bfloat16_rn(v);
}

/* Butterfly reductions: every lane ends with the same bits (float addition commutes, and
 * the tree is the same for all lanes), in an order fixed by the lane numbering. */
__device__ __forceinline__ float warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}
__device__ __forceinline__ float warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* Block reductions (blockDim.x a multiple of 32, at most 1024; sh: 32 floats of shared
 * memory): warp results in warp order, then one butterfly, computed by every warp alike;
 * lanes past the last warp's result hold the reduction's identity. The leading barrier
 * lets sh be reused by consecutive calls. */
template <float (*WARP)(float)>
__device__ __forceinline__ float block_reduce(float v, float *sh, float identity)
{
	int lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;
	v = WARP(v);
	__syncthreads();
	if (lane == 0)
		sh[w] = v;
	__syncthreads();
	return WARP(lane < nw ? sh[lane] : identity);
}
__device__ __forceinline__ float block_sum(float v, float *sh)
{
	return block_reduce<warp_sum>(v, sh, 0.0f);
}
__device__ __forceinline__ float block_max(float v, float *sh)
{
	return block_reduce<warp_max>(v, sh, -INFINITY);
}

/* Runs the statement with F the storage type of dt. */
#define KC_DISPATCH(dt, F, ...)                                                                    \
	do {                                                                                       \
		if ((dt) == KC_BF16) {                                                             \
			typedef __nv_bfloat16 F;                                                   \
			__VA_ARGS__;                                                               \
		} else {                                                                           \
			typedef float F;                                                           \
			__VA_ARGS__;                                                               \
		}                                                                                  \
	} while (0)

#define SLAB_ROWS 64   /* rows per partial of a column sum */
#define EW_THREADS 256 /* threads per block of elementwise kernels */
#define ROW_WARPS 8    /* warps per block of warp-per-row kernels */

/* Blocks for a grid-stride loop over n elements. */
static inline unsigned ew_blocks(size_t n)
{
	size_t b = (n + EW_THREADS - 1) / EW_THREADS;
	return (unsigned)(b < 1 ? 1 : b > (1u << 20) ? (1u << 20) : b);
}

/* Slabs of SLAB_ROWS rows of N, and blocks of ROW_WARPS rows, a warp each */
static inline int slabs(int N)
{
	return (N + SLAB_ROWS - 1) / SLAB_ROWS;
}
static inline unsigned row_blocks(int N)
{
	return (unsigned)((N + ROW_WARPS - 1) / ROW_WARPS);
}

/* out(C) += part(nslab, C) summed in slab order (kc_ops.cu): the column sums' last pass */
int kc_sum_slabs(cudaStream_t st, float *out, const float *part, int nslab, int C);

/* After every launch: a bad configuration or an earlier fault becomes an error return. */
static inline int kc_check_launch(const char *what)
{
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		return kc_seterr("%s: %s", what, cudaGetErrorString(e));
	return 0;
}

#endif
