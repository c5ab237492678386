#!/bin/sh
# run-on-gpu.sh - the CUDA backend on a GPU machine, in one shot: build with CUDA=1, run the
# CUDA test suites (cuda, cuda-kernels, sdpa, then cuda-dp, whose rank tests need mpirun)
# printing every measured error, then the GPU benchmark, and print one table; then, given a
# checkout of llm.c (LLMC), llm.c's train_gpt2cu on the benchmark's shape and tokens
# (tests/cuda/llmc.sh) and remat's tokens/s under `off` against it. Each stage has a time
# limit, so the whole stays under 9.5 minutes (build 150 s, tests 300 s, benchmark 80 s,
# llm.c what is left of 570 s, skipped with under 45 s); the exit status is 0 only when
# the build, every test and the benchmark passed, and llm.c's stage when it ran.
#
#   sh tests/cuda/run-on-gpu.sh [BUILD_DIR]      default build-gpu
#
# Environment: JOBS (make -j, default nproc), PRESET BATCH SEQ STEPS (benchmark shape,
# default gpt2-small 16 1024 8), REMAT_CUDA_PRECISION, REMAT_CUDA_ATTENTION (eng_cuda.h),
# LLMC (a checkout of karpathy/llm.c: nothing is downloaded; gpt2-small only).
# Needs the packages of scripts/deps.sh and the CUDA toolkit (nvcc, cuBLAS, cuDNN); it
# installs nothing (`make binaries`, not `make`), so it works offline.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${1:-build-gpu}
JOBS=${JOBS:-$(nproc)}
PRESET=${PRESET:-gpt2-small}
BATCH=${BATCH:-16}
SEQ=${SEQ:-1024}
STEPS=${STEPS:-8}
T0=$(date +%s)
LOG=$BUILD/build.log
mkdir -p "$BUILD"

stage() { # stage NAME SECONDS CMD...: runs CMD under a time limit, prints how long it took
	name=$1 limit=$2
	shift 2
	s=$(date +%s)
	timeout --kill-after=10 "$limit" "$@"
	rc=$?
	[ $rc -eq 124 ] && echo "run-on-gpu: $name: over its limit of $limit s"
	echo "run-on-gpu: $name: $(( $(date +%s) - s )) s, exit $rc"
	return $rc
}

gpu=$(nvidia-smi -L 2>/dev/null | head -1)
echo "run-on-gpu: ${gpu:-no GPU listed by nvidia-smi}"
if ! stage build 150 sh -c 'exec make -j"$1" CUDA=1 BUILD="$2" binaries >"$3" 2>&1' sh \
	"$JOBS" "$BUILD" "$LOG"; then
	tail -40 "$LOG"
	exit 1
fi
"$BUILD/bin/remat-train" --version

export REMAT_CUDA_VERBOSE=1 # every measured error, with its tolerance
stage tests 300 make --no-print-directory CUDA=1 BUILD="$BUILD" test-cuda 2>&1 |
	tee "$BUILD/tests.log"
# the status of the stage, not of tee
tests_ok=1
grep -q "run-on-gpu: tests: .*exit 0$" "$BUILD/tests.log" || tests_ok=0

echo
stage benchmark 80 "$BUILD/bin/bench-gpu" "$PRESET" "$BATCH" "$SEQ" "$STEPS" |
	tee "$BUILD/bench.log"
bench_rc=0
grep -q "run-on-gpu: benchmark: .*exit 0$" "$BUILD/bench.log" || bench_rc=1

# llm.c beside it: what is left of 570 s, never under 45
llmc_ok=1
llmc="not given (LLMC)"
left=$(( 570 - ($(date +%s) - T0) ))
if [ -n "${LLMC:-}" ] && [ "$PRESET" = gpt2-small ] && [ $left -ge 45 ]; then
	echo
	stage llm.c $(( left < 150 ? left : 150 )) sh tests/cuda/llmc.sh "$LLMC" "$BUILD" \
		"$BATCH" "$SEQ" "$STEPS" | tee "$BUILD/llmc.log"
	llmc=ok
	grep -q "run-on-gpu: llm.c: .*exit 0$" "$BUILD/llmc.log" || { llmc_ok=0; llmc=FAILED; }
	ours=$(awk '$1 == "off" && $3 ~ /^[0-9]+$/ { print $3 }' "$BUILD/bench.log")
	theirs=$(sed -n 's/^llmc: .* ms\/step, \([0-9]*\) tokens\/s.*/\1/p' "$BUILD/llmc.log")
	[ -n "$ours" ] && [ -n "$theirs" ] && awk -v a="$ours" -v b="$theirs" 'BEGIN {
		printf "run-on-gpu: remat off %d tokens/s, llm.c -r 0 %d: %.2fx (goal 0.9x)\n",
			a, b, a / b }'
elif [ -n "${LLMC:-}" ]; then
	llmc="skipped (preset $PRESET, $left s left of 570)"
fi

echo
echo "run-on-gpu: tests $( [ $tests_ok -eq 1 ] && echo passed || echo FAILED), benchmark" \
	"exit $bench_rc, llm.c $llmc, $(( $(date +%s) - T0 )) s in all"
[ $tests_ok -eq 1 ] && [ $bench_rc -eq 0 ] && [ $llmc_ok -eq 1 ]
