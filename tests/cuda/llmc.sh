#!/bin/sh
# llmc.sh - llm.c's own CUDA trainer, train_gpt2cu, on the tokens bench-gpu trains remat on:
# the outside figure remat's GPU step is held against (tests/cuda/run-on-gpu.sh runs it
# after bench-gpu when it is given a checkout of llm.c).
#
#   sh tests/cuda/llmc.sh LLMC_DIR BUILD_DIR [BATCH [SEQ [STEPS]]]   default 16 1024 8
#
# LLMC_DIR: a checkout of https://github.com/karpathy/llm.c (nothing is downloaded: the GPU
# machine may have no network). It is copied to BUILD_DIR/llmc and built there with
# `make train_gpt2cu` (one GPU, no MPI, no cuDNN: llm.c's own attention kernels). CUDA 13
# changed cudaMemAdvise's last argument from a device number to a cudaMemLocation, and
# llm.c makes one such call (its fallback to managed memory, which a run that fits never
# reaches): the copy's call is rewritten to the CUDA 13 form when nvcc is 13 or newer, and
# the script says so. Then GPT-2 124M from llm.c's random initialisation (`-e d12`), bf16
# (llm.c's default), no recompute (`-r 0`), on bench-gpu's shard of random tokens
# (`bench-gpu --tokens`), STEPS + 1 steps with validation at the first and last only and no
# sampling; prints the median of llm.c's step times past its first two, and its tokens/s:
#
#   llmc: train_gpt2cu -r 0, 16 x 1024: 123.4 ms/step, 132765 tokens/s (median of 6 steps)
#
# Exit 0 with that line, 1 when the build or the run failed (their output's tail printed).
set -u
src=$1
build=$(mkdir -p "$2" && cd "$2" && pwd) || exit 1
B=${3:-16}
T=${4:-1024}
STEPS=${5:-8}
cuda=${CUDA_HOME:-/usr/local/cuda}
nvcc=$(command -v nvcc 2>/dev/null || echo "$cuda/bin/nvcc")
dir=$build/llmc
if [ ! -f "$src/train_gpt2.cu" ] || [ ! -f "$src/Makefile" ]; then
	echo "llmc: $src is not a checkout of llm.c (no train_gpt2.cu and Makefile)"
	exit 1
fi
rm -rf "$dir" && mkdir -p "$dir" && cp -R "$src/." "$dir/" || exit 1

major=$("$nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
call='cudaMemAdvise(\*out, bytes, cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)'
new='cudaMemAdvise(*out, bytes, cudaMemAdviseSetPreferredLocation, '
new="${new}cudaMemLocation{cudaMemLocationTypeHost, 0})"
if [ "${major:-0}" -ge 13 ] && grep -q "$call" "$dir/llmc/cuda_utils.cuh" 2>/dev/null; then
	sed -i "s/$call/$new/" "$dir/llmc/cuda_utils.cuh"
	echo "llmc: nvcc $major: llm.c's cudaMemAdvise call rewritten to CUDA 13's" \
		"cudaMemLocation form"
fi
# NVML: llm.c reads the GPU's clocks through it when the toolkit has its header, and then
# links the toolkit's link-time copy (lib64/stubs, NVIDIA's name for it) or else the
# driver's libnvidia-ml.so.1, which is what runs either way
ld="-lcublas -lcublasLt -L$cuda/lib64 -Xlinker -rpath,$cuda/lib64"
if [ -f "$cuda/lib64/stubs/libnvidia-ml.so" ]; then
	nvml="-L$cuda/lib64/stubs -lnvidia-ml"
else
	nvml="-l:libnvidia-ml.so.1"
fi
[ -f "$cuda/include/nvml.h" ] && ld="$ld $nvml"
if ! make -C "$dir" train_gpt2cu NO_MULTI_GPU=1 NO_USE_MPI=1 USE_CUDNN=0 NVCC="$nvcc" \
	NVCC_LDFLAGS="$ld" ${LLMC_ARCH:+GPU_COMPUTE_CAPABILITY=$LLMC_ARCH} \
	>"$dir/build.log" 2>&1; then
	tail -20 "$dir/build.log"
	echo "llmc: the build of train_gpt2cu failed ($dir/build.log)"
	exit 1
fi

if ! "$build/bin/bench-gpu" --tokens "$dir/tokens.bin" gpt2-small "$B" "$T" "$STEPS"; then
	echo "llmc: bench-gpu could not write the tokens"
	exit 1
fi
(cd "$dir" && ./train_gpt2cu -e d12 -i tokens.bin -j tokens.bin -b "$B" -t "$T" \
	-x "$STEPS" -r 0 -v 100000 -m 1 -s 0 -h 0) >"$dir/run.log" 2>&1
rc=$?
# "step    3/8 | loss ... | 123.45 ms | 45.6% bf16 MFU | 132765 tok/s": steps 3 on
med=$(sed -n 's/^step *\([0-9]*\)\/[0-9]* |.*| *\([0-9.]*\) ms |.*/\1 \2/p' "$dir/run.log" |
	awk '$1 > 2 { print $2 }' | sort -n | awk '{ a[NR] = $1 } END {
		if (NR) printf "%s %d", a[int((NR + 1) / 2)], NR }')
if [ $rc -ne 0 ] || [ -z "$med" ]; then
	tail -20 "$dir/run.log"
	echo "llmc: train_gpt2cu failed (exit $rc; $dir/run.log)"
	exit 1
fi
ms=${med% *}
n=${med#* }
echo "llmc: train_gpt2cu -r 0, $B x $T: $ms ms/step, $(awk -v b="$B" -v t="$T" -v ms="$ms" \
	'BEGIN { printf "%.0f", b * t * 1000 / ms }') tokens/s (median of $n steps)"
