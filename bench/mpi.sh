#!/bin/sh
# bench/mpi.sh - the gradient all-reduce of data parallel training: its time per step and
# its share of the step, for 2 ranks on this machine.
#
#   sh bench/mpi.sh BIN_DIR [preset] [steps] [out.json]
#
# The preset (default mini) at batch 2 x 256 a rank, one thread a rank, under
# `mpirun -np 2`: over shared memory (Open MPI's default here) and over TCP on loopback
# (--mca btl self,tcp). From rank 0's --metrics: the medians of steps 2..N of allreduce_ms
# and step_ms, the share, and the rate (4 bytes a parameter, summed and sent back: a ring
# all-reduce moves 2(n-1)/n of it per rank). Skips with one line without mpirun.
set -eu
bin=$1
preset=${2:-mini}
steps=${3:-8}
out=${4:-}
mpirun=$(command -v mpirun || true)
if [ -z "$mpirun" ]; then
	echo "mpi: skipped: no mpirun (scripts/deps.sh installs openmpi-bin)"
	exit 0
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/remat-mpi.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cat > "$dir/job.json" <<JOB
{"name": "mpi-bench", "model": {"preset": "$preset", "vocab_size": 50257},
 "data": {"train": "/usr/share/common-licenses/GPL-3", "format": "bytes"},
 "batch": 2, "seq_len": 256, "steps": $steps, "threads": 1, "schedule": "constant",
 "parallel": {"ranks": 2}}
JOB
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

median() { # file field
	grep '"loss"' "$1" | sed 's/.*"'"$2"'":\([0-9.e+-]*\).*/\1/' | tail -n +2 | sort -g |
		awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'
}

run() { # name, mpirun's extra arguments
	name=$1
	shift
	"$mpirun" --oversubscribe --bind-to none -np 2 "$@" "$bin/remat-train" \
		--metrics "$dir/$name.jsonl" "$dir/job.json" > "$dir/$name.out" 2>&1
}

run shm
run tcp --mca btl self,tcp
# the banner's "trainable params: 1,234 ||": the gradients that are summed
params=$(sed -n 's/.*trainable params: \([0-9,]*\) .*/\1/p' "$dir/shm.out" | head -1 | tr -d ,)
for link in shm tcp; do
	ar=$(median "$dir/$link.jsonl" allreduce_ms)
	st=$(median "$dir/$link.jsonl" step_ms)
	awk -v l="$link" -v ar="$ar" -v st="$st" -v p="$params" -v preset="$preset" 'BEGIN {
		mb = 4 * p / 1e6
		printf "mpi %s, 2 ranks, %s: all-reduce of %.0f MB: %.1f ms a step, %.1f%% of the step (%.1f ms); %.2f GB/s of gradient\n", preset, l == "shm" ? "shared memory" : "TCP loopback", mb, ar, 100 * ar / st, st, mb / ar
	}'
	echo "$link $ar $st" >> "$dir/figures"
done
if [ -n "$out" ]; then
	awk -v p="$params" -v preset="$preset" 'BEGIN {printf "{\"preset\":\"%s\",\"params\":%d", preset, p}
		{printf ",\"%s_allreduce_ms\":%s,\"%s_step_ms\":%s", $1, $2, $1, $3}
		END {print "}"}' "$dir/figures" > "$out"
fi
