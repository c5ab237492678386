/* kc_emu.h - what the CUDA kernels of kernels/cuda/ see when the CUDA emulation compiles them
 * for the CPU (tests/cuda/emu/run-on-cpu.sh): HIP-CPU's runtime (ROCm/HIP-CPU, header
 * only: blocks run in parallel, the threads of a block as fibers that meet at __syncthreads)
 * under the CUDA names the kernels use, in place of cuda_runtime.h, cuda_runtime_api.h and
 * cuda_bf16.h (include/ holds the three stand-ins, each including this file).
 *
 * What it maps:
 * - launches: the build rewrites `k<<<grid, block, shared, stream>>>(args)` as
 *   KC_EMU_LAUNCH(k, grid, block, shared, stream)(args). The launch is checked against the
 *   limits of a CUDA device (at most 1024 threads a block, 64 in z, grid y and z at most
 *   65535, 48 KiB of dynamic shared memory) — a launch past them fails as on a GPU, with
 *   cudaErrorInvalidConfiguration at the next cudaGetLastError — then runs to completion:
 *   every stream of the emulation is synchronous (emu_rt.c).
 * - __shfl_xor_sync(mask, v, o): HIP-CPU's __shfl_xor within its 64-lane groups; the
 *   kernels' butterflies use offsets below 32, so each 32-lane warp stays its own.
 * - __nv_bfloat16: 16 bits, converted by the engine's own round-to-nearest-even
 *   (eng_bf16_from_f32) and by widening.
 * - __fadd_rn, __fsub_rn, __fmul_rn: plain float operations, the build passing
 *   -ffp-contract=off so that none is fused into an FMA.
 * Not emulated: timing, occupancy, the float32 ULPs of the GPU's expf and logf (the host's
 * libm answers).
 */
#ifndef KC_EMU_H
#define KC_EMU_H

#include <hip/hip_runtime.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* HIP-CPU's __forceinline__ is empty unless NDEBUG: the kernels' headers define functions
 * that must be inline wherever they are included */
#undef __forceinline__
#define __forceinline__ inline __attribute__((always_inline))

/* ---- the runtime's types and the calls of the kernels' files (emu_rt.c has them) ---- */
typedef struct CUstream_st *cudaStream_t;
typedef enum cudaError {
	cudaSuccess = 0,
	cudaErrorInvalidConfiguration = 9,
} cudaError_t;
extern "C" {
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
void kc_emu_launch_failed(cudaError_t e, const char *what); /* the next GetLastError's */
uint16_t eng_bf16_from_f32(float x);
}

/* ---- bf16 ---- */
struct __nv_bfloat16 {
	uint16_t x;
};
static inline float __bfloat162float(__nv_bfloat16 h)
{
	uint32_t u = (uint32_t)h.x << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}
static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
	return __nv_bfloat16{eng_bf16_from_f32(f)};
}

/* ---- intrinsics ---- */
#define __shfl_xor_sync(mask, v, o) ((void)(mask), __shfl_xor((v), (o)))
static inline float __fadd_rn(float a, float b)
{
	return a + b;
}
static inline float __fsub_rn(float a, float b)
{
	return a - b;
}
static inline float __fmul_rn(float a, float b)
{
	return a * b;
}

/* ---- launches ---- */
static inline int kc_emu_config_ok(dim3 g, dim3 b, size_t shared)
{
	unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
	return g.x >= 1 && g.y >= 1 && g.z >= 1 && g.x <= 0x7fffffffu && g.y <= 65535 &&
	       g.z <= 65535 && threads >= 1 && threads <= 1024 && b.x <= 1024 && b.y <= 1024 &&
	       b.z <= 64 && shared <= 48 * 1024;
}

template <typename... P>
struct kc_emu_launch {
	void (*k)(P...);
	dim3 grid, block;
	size_t shared;
	const char *name;
	void operator()(P... args) const
	{
		if (!kc_emu_config_ok(grid, block, shared)) {
			kc_emu_launch_failed(cudaErrorInvalidConfiguration, name);
			return;
		}
		void (*kernel)(P...) = k;
		hipLaunchKernelGGL(kernel, grid, block, (std::uint32_t)shared, nullptr, args...);
		hipDeviceSynchronize();
	}
};

template <typename... P>
static inline kc_emu_launch<P...> kc_emu_launcher(void (*k)(P...), dim3 g, dim3 b, size_t s,
	const char *name)
{
	return kc_emu_launch<P...>{k, g, b, s, name};
}

#define KC_EMU_LAUNCH(k, g, b, s, st) ((void)(st), kc_emu_launcher(k, dim3(g), dim3(b), (s), #k))

#endif
