#!/bin/sh
# bench/steps.sh - the step table of `make bench`: per recompute policy, median step time,
# tokens/s, model GFLOP/s and its fraction of the sgemm ceiling, saved activations, RSS.
#
#   sh bench/steps.sh BINDIR [preset] [batch] [seq_len] [rounds] [json-out]
#
# One remat-train --json process on one job (weights from the seed, bytes of a text every
# Debian machine has, the preset's vocabulary kept) cycles through the four policies with
# --remat-schedule: `rounds` rounds of SEG (default 3) steps per policy, interleaved, so that
# a change in the machine's load during the run falls on every policy alike instead of on
# whichever ran last. The first step of each segment (the switch: allocation, first touch)
# is dropped; the rest give the medians, (SEG-1)*rounds steps per policy (6 by default).
# bench-sgemm runs first for the ceiling. Model FLOPs per step: 6 per parameter-token of
# the matmuls (lm_head included) plus the attention products, as eng_plan counts them.
# RSS: the largest resident size at the end of the policy's steps (the process-wide peak
# belongs to whichever policy holds the most).
# Last, full's recompute time against off's blocks' forward time (blocks_forward_ms): what
# full adds should be that forward, no more.
set -eu
bin=$1
preset=${2:-gpt2-small}
B=${3:-4}
T=${4:-256}
rounds=${5:-3}
seg=${SEG:-3}
json_out=${6:-}
threads=${THREADS:-2}
dir=$(mktemp -d "${TMPDIR:-/tmp}/remat-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT

cat > "$dir/job.json" <<JOB
{"name": "bench", "model": {"preset": "$preset"},
 "data": {"train": "/usr/share/common-licenses/GPL-3", "format": "bytes"},
 "batch": $B, "seq_len": $T, "steps": $((4 * rounds * seg)), "threads": $threads,
 "schedule": "constant"}
JOB
# bytes data: keep the preset's vocabulary (a byte model would be a different shape)
case $preset in
tiny | llama-tiny) vocab="" ;;
smollm-135m) vocab=49152 ;;
*) vocab=50257 ;;
esac
[ -z "$vocab" ] || sed -i "s/\"preset\": \"[a-z0-9-]*\"/&, \"vocab_size\": $vocab/" "$dir/job.json"

"$bin/bench-sgemm" "$preset" "$B" "$T" "$threads" > "$dir/sgemm.txt"
ceiling=$(tail -1 "$dir/sgemm.txt" | sed 's/.*"ceiling_gflops":\([0-9.e+-]*\).*/\1/')
mflops=$(tail -1 "$dir/sgemm.txt" | sed 's/.*"model_flops":\([0-9.e+-]*\).*/\1/')
echo "$preset, batch $B x $T, $threads threads; $(head -1 "$dir/sgemm.txt" | cut -d';' -f2-)"
echo "sgemm ceiling on the model's products: $ceiling GFLOP/s; model FLOPs per step: $mflops"

median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
field() { grep -o "\"$1\":[0-9.e+-]*" | cut -d: -f2; }

printf '%-18s %9s %8s %7s %8s %9s %9s %9s %7s %3s\n' policy step_ms recomp tok/s GFLOP/s of_ceil act_MiB rss_MiB vs_off n
# the schedule: segment i (steps i*seg+1 .. i*seg+seg) runs policy i % 4
sched=""
i=0
while [ $i -lt $((4 * rounds)) ]; do
	case $((i % 4)) in 0) p=off ;; 1) p=selective ;; 2) p=full ;; *) p="full;head=chunked" ;; esac
	sched="$sched${sched:+,}$((i * seg)):$p"
	i=$((i + 1))
done
"$bin/remat-train" --json --remat-schedule "$sched" "$dir/job.json" > "$dir/out.json"
[ -z "$json_out" ] || printf '{"preset":"%s","batch":%s,"seq_len":%s,"threads":%s,"rounds":%s,"segment_steps":%s,"ceiling_gflops":%s,"model_flops":%s,"policies":[' \
	"$preset" "$B" "$T" "$threads" "$rounds" "$seg" "$ceiling" "$mflops" > "$json_out"
off_ms=""
sep=""
k=0
for policy in off selective full "full;head=chunked"; do
	# this policy's steps, less the first of each segment
	awk -v k=$k -v seg=$seg '{ s = $0; sub(/.*"step":/, "", s); s = int(s) - 1
		if (int(s / seg) % 4 == k && s % seg != 0) print }' "$dir/out.json" > "$dir/steady.json"
	n=$(wc -l < "$dir/steady.json")
	ms=$(field step_ms < "$dir/steady.json" | median)
	rc=$(field recompute_ms < "$dir/steady.json" | median)
	act=$(field activation_bytes < "$dir/steady.json" | median)
	rss=$(field rss < "$dir/steady.json" | sort -g | tail -1)
	[ -n "$off_ms" ] || off_ms=$ms
	[ $k -ne 0 ] || off_fwd=$(field blocks_forward_ms < "$dir/steady.json" | median)
	[ "$policy" != full ] || full_rc=$rc
	line=$(awk -v p="$policy" -v ms="$ms" -v rc="$rc" -v act="$act" -v rss="$rss" -v off="$off_ms" \
		-v n="$((B * T))" -v fl="$mflops" -v ceil="$ceiling" -v cnt="$n" 'BEGIN {
		g = fl / (ms / 1000) / 1e9
		printf "%-18s %9.1f %8.1f %7.0f %8.1f %8.0f%% %9.1f %9.1f %7.3f %3d|{\"policy\":\"%s\",\"step_ms\":%.2f,\"recompute_ms\":%.2f,\"tokens_per_s\":%.1f,\"gflops\":%.2f,\"of_ceiling\":%.4f,\"activation_mib\":%.2f,\"rss_mib\":%.2f,\"vs_off\":%.4f,\"steps\":%d}",
		p, ms, rc, n / (ms / 1000), g, 100 * g / ceil, act / 1048576, rss / 1048576, ms / off, cnt,
		p, ms, rc, n / (ms / 1000), g, g / ceil, act / 1048576, rss / 1048576, ms / off, cnt}')
	echo "${line%%|*}"
	[ -z "$json_out" ] || printf '%s%s' "$sep" "${line#*|}" >> "$json_out"
	sep=","
	k=$((k + 1))
done
# what full adds is a forward of every block: its recompute against off's blocks' forward
awk -v rc="$full_rc" -v fwd="$off_fwd" 'BEGIN { if (fwd > 0)
	printf "full recomputes in %.1f ms a step; off'"'"'s blocks'"'"' forward takes %.1f ms (x%.3f)\n", rc, fwd, rc / fwd }'
[ -z "$json_out" ] || echo "]}" >> "$json_out"
