#!/bin/sh
# bench/steps.sh - the step table of `make bench`: per recompute policy, median step time,
# tokens/s, model GFLOP/s and its fraction of the sgemm ceiling, saved activations, peak RSS.
#
#   sh bench/steps.sh BINDIR [preset] [batch] [seq_len] [steps] [json-out]
#
# Runs remat-train --json once per policy on the same job (weights from the seed, bytes of
# a text every Debian machine has, the preset's vocabulary kept) and bench-sgemm once for
# the ceiling. Medians over the steps after the first two; ratios to `off` from this run.
# Model FLOPs per step: 6 per parameter-token of the matmuls (lm_head included) plus the
# attention products, as eng_plan counts them.
set -eu
bin=$1
preset=${2:-gpt2-small}
B=${3:-4}
T=${4:-256}
steps=${5:-7}
json_out=${6:-}
threads=${THREADS:-2}
dir=$(mktemp -d "${TMPDIR:-/tmp}/remat-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT

cat > "$dir/job.json" <<JOB
{"name": "bench", "model": {"preset": "$preset"},
 "data": {"train": "/usr/share/common-licenses/GPL-3", "format": "bytes"},
 "batch": $B, "seq_len": $T, "steps": $steps, "threads": $threads,
 "schedule": "constant"}
JOB
# bytes data: keep the preset's vocabulary (a byte model would be a different shape)
case $preset in tiny) ;; *) sed -i 's/"preset": "[a-z0-9-]*"/&, "vocab_size": 50257/' "$dir/job.json" ;; esac

"$bin/bench-sgemm" "$preset" "$B" "$T" "$threads" > "$dir/sgemm.txt"
ceiling=$(tail -1 "$dir/sgemm.txt" | sed 's/.*"ceiling_gflops":\([0-9.e+-]*\).*/\1/')
mflops=$(tail -1 "$dir/sgemm.txt" | sed 's/.*"model_flops":\([0-9.e+-]*\).*/\1/')
echo "$preset, batch $B x $T, $threads threads; $(head -1 "$dir/sgemm.txt" | cut -d';' -f2-)"
echo "sgemm ceiling on the model's products: $ceiling GFLOP/s; model FLOPs per step: $mflops"

median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
field() { grep -o "\"$1\":[0-9.e+-]*" | cut -d: -f2; }

printf '%-18s %9s %8s %7s %8s %9s %9s %9s %7s\n' policy step_ms recomp tok/s GFLOP/s of_ceil act_MiB rss_MiB vs_off
off_ms=""
[ -z "$json_out" ] || printf '{"preset":"%s","batch":%s,"seq_len":%s,"threads":%s,"ceiling_gflops":%s,"model_flops":%s,"policies":[' \
	"$preset" "$B" "$T" "$threads" "$ceiling" "$mflops" > "$json_out"
sep=""
for policy in off selective full "full;head=chunked"; do
	"$bin/remat-train" --json --remat-schedule "0:$policy" "$dir/job.json" > "$dir/out.json"
	tail -n +3 "$dir/out.json" > "$dir/steady.json"
	ms=$(field step_ms < "$dir/steady.json" | median)
	rc=$(field recompute_ms < "$dir/steady.json" | median)
	act=$(field activation_bytes < "$dir/steady.json" | median)
	rss=$(field rss_peak < "$dir/out.json" | sort -g | tail -1)
	[ -n "$off_ms" ] || off_ms=$ms
	line=$(awk -v p="$policy" -v ms="$ms" -v rc="$rc" -v act="$act" -v rss="$rss" -v off="$off_ms" \
		-v n="$((B * T))" -v fl="$mflops" -v ceil="$ceiling" 'BEGIN {
		g = fl / (ms / 1000) / 1e9
		printf "%-18s %9.1f %8.1f %7.0f %8.1f %8.0f%% %9.1f %9.1f %7.3f|{\"policy\":\"%s\",\"step_ms\":%.2f,\"recompute_ms\":%.2f,\"tokens_per_s\":%.1f,\"gflops\":%.2f,\"of_ceiling\":%.4f,\"activation_mib\":%.2f,\"rss_peak_mib\":%.2f,\"vs_off\":%.4f}",
		p, ms, rc, n / (ms / 1000), g, 100 * g / ceil, act / 1048576, rss / 1048576, ms / off,
		p, ms, rc, n / (ms / 1000), g, g / ceil, act / 1048576, rss / 1048576, ms / off}')
	echo "${line%%|*}"
	[ -z "$json_out" ] || printf '%s%s' "$sep" "${line#*|}" >> "$json_out"
	sep=","
done
[ -z "$json_out" ] || echo "]}" >> "$json_out"
