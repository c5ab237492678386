#!/bin/sh
# bench/ckpt.sh - checkpoint save throughput and the training stall it causes.
#
#   sh bench/ckpt.sh [remat-train] [preset] [steps] [every]
#
# Trains the preset (default gpt2-small at batch 4 x 256, 2 threads) with save.every, and
# prints per save: MB written, write time and MB/s (the writer thread, while training goes
# on), and the stall: the copy of parameters and moments on the training thread. Also the
# median step time of steps that overlapped a write against those that did not.
set -eu
train=${1:-build/bin/remat-train}
preset=${2:-gpt2-small}
steps=${3:-9}
every=${4:-3}
dir=$(mktemp -d "${TMPDIR:-/tmp}/remat-ckpt.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cat > "$dir/job.json" <<JOB
{"name": "ckpt-bench", "model": {"preset": "$preset", "vocab_size": 50257},
 "data": {"train": "/usr/share/common-licenses/GPL-3", "format": "bytes"},
 "batch": 4, "seq_len": 256, "steps": $steps, "threads": ${THREADS:-2},
 "schedule": "constant", "save": {"dir": "$dir/ckpt", "every": $every, "keep": 2}}
JOB
"$train" "$dir/job.json" > "$dir/out.txt"
# saved DIR (X MiB in Y ms; training stalled Z ms)
grep '^saved .*stalled' "$dir/out.txt" | sed 's/.*(\([0-9.]*\) MiB in \([0-9.]*\) ms; training stalled \([0-9.]*\) ms)/\1 \2 \3/' |
	awk '{mb = $1 * 1.048576; printf "save: %.1f MB in %.0f ms = %.0f MB/s; training stalled %.1f ms\n", mb, $2, mb / ($2 / 1000), $3}'
# step lines right after a periodic save overlap its write
awk -v every="$every" '/^step /{split($2, a, "/"); s = a[1]; for (i = 1; i <= NF; i++) if ($i == "ms") ms = $(i - 1);
	if (s > 1 && (s - 1) % every == 0) print "during", ms; else if (s > 1) print "other", ms}' "$dir/out.txt" > "$dir/steps.txt"
for kind in during other; do
	grep "^$kind" "$dir/steps.txt" | cut -d' ' -f2 | sort -g |
		awk -v k="$kind" '{v[NR]=$1} END {if (NR) printf "median step %s a write: %.1f ms (%d steps)\n", k == "during" ? "overlapping" : "not overlapping", (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2), NR}'
done
