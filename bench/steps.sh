#!/bin/sh
# bench/steps.sh - median step time and saved activations per recompute policy.
#
#   sh bench/steps.sh [remat-train] [preset] [batch] [seq_len] [steps]
#
# Runs remat-train --json once per policy on the same job (weights from the seed, bytes of
# a text every Debian machine has, the model's vocabulary kept at its preset size) and
# prints, per policy: the median step_ms over the steps after the first two (warm-up), the
# median recompute_ms, tokens/s and saved-activation MiB, and the time ratio to `off` from
# the same run. The first building block of `make bench`.
set -eu
train=${1:-build/bin/remat-train}
preset=${2:-gpt2-small}
B=${3:-4}
T=${4:-256}
steps=${5:-7}
threads=${THREADS:-2}
dir=$(mktemp -d "${TMPDIR:-/tmp}/remat-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT

cat > "$dir/job.json" <<JOB
{"name": "bench", "model": {"preset": "$preset", "vocab_size": 50257},
 "data": {"train": "/usr/share/common-licenses/GPL-3", "format": "bytes"},
 "batch": $B, "seq_len": $T, "steps": $steps, "threads": $threads,
 "schedule": "constant"}
JOB

# median of the numbers on stdin
median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
field() { grep -o "\"$1\":[0-9.e+-]*" | cut -d: -f2; }

printf '%-20s %12s %12s %10s %12s %8s\n' policy step_ms recompute_ms tok/s act_MiB vs_off
off_ms=""
for policy in off selective full "full;head=chunked"; do
	"$train" --json --remat-schedule "0:$policy" "$dir/job.json" > "$dir/out.json"
	tail -n +3 "$dir/out.json" > "$dir/steady.json"
	ms=$(field step_ms < "$dir/steady.json" | median)
	rc=$(field recompute_ms < "$dir/steady.json" | median)
	act=$(field activation_bytes < "$dir/steady.json" | median)
	[ -n "$off_ms" ] || off_ms=$ms
	awk -v p="$policy" -v ms="$ms" -v rc="$rc" -v act="$act" -v off="$off_ms" \
		-v n="$((B * T))" 'BEGIN {printf "%-20s %12.1f %12.1f %10.0f %12.1f %8.3f\n",
		p, ms, rc, n / (ms / 1000), act / 1048576, ms / off}'
done
