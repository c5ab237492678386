#!/bin/sh
# bench/mpi.sh - the gradient all-reduce of data parallel training: its time per step and
# its share of the step, for 2 ranks on this machine; and what a sharded optimizer
# ("shard": "optimizer", ZeRO stage 1) saves and costs.
#
#   sh bench/mpi.sh BIN_DIR [preset] [steps] [out.json]
#
# The preset (default mini) at batch 2 x 256 a rank, one thread a rank, under
# `mpirun -np 2`: over shared memory (Open MPI's default here) with the sum overlapped with
# the backward (25 MiB buckets) and all after it ("bucket_mb": 0), over TCP on loopback
# (--mca btl self,tcp), and sharded over shared memory. From rank 0's --metrics: the
# medians of steps 2..N of allreduce_ms (what the step waited for after the backward;
# sharded: with the weights' all-gather), allreduce_hidden_ms (the sum's time behind the
# backward), step_ms and the peak RSS, the share, and the rate (4 bytes a parameter,
# summed and sent back); from its banner, the moments a rank holds. Skips with one line
# without mpirun.
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
sed 's/"ranks": 2}/"ranks": 2, "shard": "optimizer"}/' "$dir/job.json" > "$dir/shard.json"
sed 's/"ranks": 2}/"ranks": 2, "bucket_mb": 0}/' "$dir/job.json" > "$dir/after.json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

median() { # file field
	grep '"loss"' "$1" | sed 's/.*"'"$2"'":\([0-9.e+-]*\).*/\1/' | tail -n +2 | sort -g |
		awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'
}

run() { # name, spec, mpirun's extra arguments
	name=$1
	spec=$2
	shift 2
	"$mpirun" --oversubscribe --bind-to none -np 2 "$@" "$bin/remat-train" \
		--metrics "$dir/$name.jsonl" "$dir/$spec" > "$dir/$name.out" 2>&1
}

run shm job.json
run after after.json
run tcp job.json --mca btl self,tcp
run shard shard.json
# the banner's "trainable params: 1,234 ||": the gradients that are summed
params=$(sed -n 's/.*trainable params: \([0-9,]*\) .*/\1/p' "$dir/shm.out" | head -1 | tr -d ,)
# the sharded banner's "the moments of 123 of 1234 floats here": rank 0's part
part=$(sed -n 's/.*the moments of \([0-9]*\) of [0-9]* floats here.*/\1/p' "$dir/shard.out" |
	head -1)
for link in shm after tcp shard; do
	ar=$(median "$dir/$link.jsonl" allreduce_ms)
	hid=$(median "$dir/$link.jsonl" allreduce_hidden_ms)
	st=$(median "$dir/$link.jsonl" step_ms)
	rss=$(median "$dir/$link.jsonl" rss_peak_bytes)
	awk -v l="$link" -v ar="$ar" -v hid="$hid" -v st="$st" -v p="$params" -v preset="$preset" -v rss="$rss" 'BEGIN {
		mb = 4 * p / 1e6
		printf "mpi %s, 2 ranks, %s: all-reduce of %.0f MB: %.1f ms a step exposed (%.1f%% of the step, %.1f ms), %.1f ms hidden behind the backward; %.2f GB/s of gradient over both; rank 0 peak RSS %.0f MiB\n", preset, l == "shm" ? "shared memory, 25 MiB buckets" : l == "after" ? "shared memory, after the backward" : l == "tcp" ? "TCP loopback, 25 MiB buckets" : "shared memory, optimizer sharded", mb, ar, 100 * ar / st, st, hid, mb / (ar + hid), rss / 1048576
	}'
	echo "$link $ar $st $rss $hid" >> "$dir/figures"
done
awk -v p="$params" -v k="$part" 'BEGIN {
	printf "mpi: AdamW moments a rank: %.1f MiB unsharded, %.1f MiB sharded (%.3f of them)\n", 8 * p / 1048576, 8 * k / 1048576, k / p }'
if [ -n "$out" ]; then
	awk -v p="$params" -v k="$part" -v preset="$preset" 'BEGIN {printf "{\"preset\":\"%s\",\"params\":%d,\"moments_bytes\":%d,\"shard_moments_bytes\":%d", preset, p, 8 * p, 8 * k}
		{printf ",\"%s_allreduce_ms\":%s,\"%s_step_ms\":%s,\"%s_rss\":%s,\"%s_hidden_ms\":%s", $1, $2, $1, $3, $1, $4, $1, $5}
		END {print "}"}' "$dir/figures" > "$out"
fi
