#!/bin/sh
# bench/loop.sh - what the training loop's parts cost: gradient accumulation (memory saved,
# time), and an evaluation against a step.
#
#   sh bench/loop.sh BIN_DIR [preset] [steps] [out.json]
#
# On the preset (default mini) with the GPL as bytes and 2 threads, in one run (the
# machine is shared: ratios within a run, medians of steps 2..N):
#   - B 4 x 256 in one batch against the same 1024 tokens a step as grad_accum 4 of B 1
#     and grad_accum 2 of B 2: median tokens/s and the step's peak_bytes, as ratios to
#     the one batch;
#   - an evaluation every 2 steps over 4 batches of 4 x 256: its time per batch, from
#     metrics.jsonl's elapsed_s (the eval line less the step line before it), against the
#     time of one batch's forward and backward (step_ms / grad_accum).
# Prints one line a figure and writes them as JSON to out.json.
set -eu
bin=$1
preset=${2:-mini}
steps=${3:-12}
out=${4:-}
dir=$(mktemp -d "${TMPDIR:-/tmp}/remat-loop.XXXXXX")
trap 'rm -rf "$dir"' EXIT
gpl=/usr/share/common-licenses/GPL-3

job() { # name batch accum extra
	cat > "$dir/$1.json" <<JOB
{"name": "$1", "model": {"preset": "$preset", "vocab_size": 50257},
 "data": {"train": "$gpl", "val": "$gpl", "format": "bytes"},
 "batch": $2, "seq_len": 256, "grad_accum": $3, "steps": $steps, "threads": ${THREADS:-2},
 "schedule": "constant"$4}
JOB
	"$bin/remat-train" --metrics "$dir/$1.jsonl" "$dir/$1.json" > "$dir/$1.out"
}

# median of the step lines' field (steps 2..N), from a metrics.jsonl
median() { # file field
	grep '"loss"' "$1" | sed 's/.*"'"$2"'":\([0-9.e+-]*\).*/\1/' | tail -n +2 | sort -g |
		awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'
}

job b4 4 1 ""
job a4 1 4 ""
job a2 2 2 ""
job ev 4 1 ', "eval": {"every": 2, "batches": 4}'

t1=$(median "$dir/b4.jsonl" tokens_per_s); p1=$(median "$dir/b4.jsonl" peak_bytes)
t4=$(median "$dir/a4.jsonl" tokens_per_s); p4=$(median "$dir/a4.jsonl" peak_bytes)
t2=$(median "$dir/a2.jsonl" tokens_per_s); p2=$(median "$dir/a2.jsonl" peak_bytes)
# an eval line's elapsed_s less the step line's before it, per batch; and step_ms
ev=$(awk -F'"elapsed_s":' '/"loss"/ {split($2, a, "[,}]"); last = a[1]}
	/"val_loss"/ {split($2, a, "[,}]"); if (last != "") print (a[1] - last) * 1000 / 4}' \
	"$dir/ev.jsonl" | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}')
sm=$(median "$dir/ev.jsonl" step_ms)
awk -v t1="$t1" -v t2="$t2" -v t4="$t4" -v p1="$p1" -v p2="$p2" -v p4="$p4" -v ev="$ev" \
	-v sm="$sm" -v preset="$preset" -v out="$out" 'BEGIN {
	printf "loop %s, 1024 tokens a step: batch 4: %.0f tok/s, peak %.1f MiB\n", preset, t1, p1 / 1048576
	printf "loop %s: grad_accum 2 x batch 2: %.0f tok/s (%.3f of batch 4), peak %.1f MiB (%.3f)\n", preset, t2, t2 / t1, p2 / 1048576, p2 / p1
	printf "loop %s: grad_accum 4 x batch 1: %.0f tok/s (%.3f of batch 4), peak %.1f MiB (%.3f)\n", preset, t4, t4 / t1, p4 / 1048576, p4 / p1
	printf "loop %s: an eval batch of 4 x 256: %.1f ms, %.3f of a training step of it (%.1f ms)\n", preset, ev, ev / sm, sm
	if (out != "")
		printf "{\"preset\":\"%s\",\"batch4_tokens_per_s\":%.1f,\"batch4_peak_bytes\":%d,\"accum2_tokens_per_s\":%.1f,\"accum2_peak_bytes\":%d,\"accum4_tokens_per_s\":%.1f,\"accum4_peak_bytes\":%d,\"eval_batch_ms\":%.2f,\"step_ms\":%.2f}\n", preset, t1, p1, t2, p2, t4, p4, ev, sm > out
}'
