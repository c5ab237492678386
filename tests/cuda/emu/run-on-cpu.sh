#!/bin/sh
# run-on-cpu.sh - the CUDA backend's own kernels and its host code run on this CPU, before a
# GPU ever runs them: the build of the Makefile's CUDA_EMU (kernels through HIP-CPU, the CUDA
# runtime and cuBLASLt emulated, see kc_emu.h, emu_rt.c, emu_lt.cpp), then the GPU suites
# cuda, cuda-kernels and cuda-dp on the emulated device, every measured error printed. The
# suite sdpa is not run: it tests cuDNN's fused attention, and cuDNN is NVIDIA's library,
# not emulated (on the emulated device it finds no driver, and the model uses its own
# attention, as it does wherever cuDNN cannot serve).
#
#   sh tests/cuda/emu/run-on-cpu.sh HIPCPU_DIR [BUILD_DIR]     default build-emu
#
# HIPCPU_DIR: a checkout of github.com/ROCm/HIP-CPU (header only; it needs libtbb-dev).
# Nothing is downloaded, so `make test` does not run this: a developer does. The README's
# CUDA section says what it shows and what it cannot (timing, overlap, the GPU's own
# rounding of expf and of cuBLASLt's sums, cuDNN, NCCL).
# Environment: JOBS (make -j, default nproc), REMAT_EMU_LT_NO_EPILOGUE=1 (cuBLASLt offers no
# fused epilogue: kc_gemm's fallback runs), REMAT_EMU_DEVICE_MIB (the device's size).
set -u
cd "$(dirname "$0")/../../.." || exit 1
[ $# -ge 1 ] && [ -f "$1/include/hip/hip_runtime.h" ] || {
	echo "usage: $0 HIPCPU_DIR [BUILD_DIR] (HIPCPU_DIR: a checkout of ROCm/HIP-CPU)" >&2
	exit 2
}
HIPCPU=$(cd "$1" && pwd)
BUILD=${2:-build-emu}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$BUILD"
if ! dpkg -s libtbb-dev >/dev/null 2>&1; then
	echo "run-on-cpu: HIP-CPU needs libtbb-dev (apt-get install libtbb-dev)" >&2
	exit 2
fi
if ! make -j"$JOBS" CUDA=1 CUDA_EMU="$HIPCPU" BUILD="$BUILD" binaries >"$BUILD/build.log" 2>&1
then
	tail -40 "$BUILD/build.log"
	echo "run-on-cpu: the build failed ($BUILD/build.log)"
	exit 1
fi
# kc_blas.cu opens cuBLASLt by its soname: the emulation's comes first
LD_LIBRARY_PATH=$PWD/$BUILD/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
REMAT_CUDA_VERBOSE=1
# every kernel's threads run as fibers on two cores: the tests take several times a GPU's
# time (the controller's test, mini at 32 x 256, some 6 minutes), so Check's limits do too
CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-4}
export LD_LIBRARY_PATH REMAT_CUDA_VERBOSE CK_TIMEOUT_MULTIPLIER
echo "run-on-cpu: suite sdpa not run: cuDNN is not emulated"
make --no-print-directory CUDA=1 CUDA_EMU="$HIPCPU" BUILD="$BUILD" CUDA_SUITES="cuda cuda-kernels cuda-dp" test-cuda
rc=$?
echo "run-on-cpu: the GPU suites on the emulated device: exit $rc"
exit $rc
