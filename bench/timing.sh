#!/bin/sh
# bench/timing.sh - where a step's time goes (remat-train --timing), for `make bench`.
#
#   sh bench/timing.sh BINDIR [json-out]
#
# gpt2-small at batch 4 x 256 and the head-heavy L4 C256 NH4 V50257 at batch 8 x 256 (the
# lm_head about 78 % of its FLOPs), two threads, policy off, in float32 and in bf16 where
# remat-train --version says this processor can; gpt2-small once more under full, for the
# recompute's row. Each run is STEPS steps (default 5; the first is left out of its table)
# on the bytes of a text every Debian machine has, the vocabulary kept, and ends with its
# table: each class of work against its limit, measured in the same process (the product
# alone; triad bandwidth at the class's working set; attention as a roofline). The tables
# go to standard output, their JSON lines, each with its shape, to json-out.
set -eu
bin=$1
json_out=${2:-}
steps=${STEPS:-5}
dir=$(mktemp -d "${TMPDIR:-/tmp}/remat-timing.XXXXXX")
trap 'rm -rf "$dir"' EXIT
: > "$dir/rows.jsonl"
bf16=bf16
case $("$bin/remat-train" --version | sed -n 's/^precision bf16 (cpu): //p') in
"not available"*) bf16= ;;
esac

# name L C NH B T precision policy
run() {
	cat > "$dir/job.json" <<JOB
{"name": "timing", "model": {"n_layer": $2, "n_embd": $3, "n_head": $4,
 "n_positions": 1024, "vocab_size": 50257},
 "data": {"train": "/usr/share/common-licenses/GPL-3", "format": "bytes"},
 "batch": $5, "seq_len": $6, "steps": $steps, "threads": 2, "schedule": "constant",
 "precision": "$7", "remat": {"default": "$8"}}
JOB
	echo "== $1 (L$2 C$3 NH$4), batch $5 x $6, $7, policy $8"
	"$bin/remat-train" --json --timing "$dir/job.json" 2>&1 > "$dir/out.jsonl" |
		grep -v '^remat-train: warning'
	grep '^{"timing":' "$dir/out.jsonl" |
		sed "s/^{/{\"shape\":\"$1\",/" >> "$dir/rows.jsonl"
}

for p in fp32 $bf16; do
	run gpt2-small 12 768 12 4 256 $p off
	run L4-C256 4 256 4 8 256 $p off
done
run gpt2-small 12 768 12 4 256 fp32 full
[ -z "$json_out" ] || cp "$dir/rows.jsonl" "$json_out"
