#!/bin/sh
# bench/bf16.sh - precision bf16 against fp32 on the CPU: the validation loss of the same
# run (same weights, same batches) in both precisions at every evaluation, and their speed.
#
#   sh bench/bf16.sh BINDIR [preset] [batch] [seq_len] [steps] [json-out]
#
# The training text is the GPL (/usr/share/common-licenses/GPL-3), the validation text the
# Apache licence beside it, byte tokens with the preset's vocabulary kept; eval every
# steps/6 steps over 8 batches. Prints each evaluation's two losses and how far apart they
# are, the largest gap, and the median step time of each precision. Skipped, with one
# line, where remat-train --version says bf16 does not run here.
set -eu
bin=$1
preset=${2:-mini}
B=${3:-4}
T=${4:-64}
steps=${5:-300}
json_out=${6:-}
threads=${THREADS:-2}
dir=$(mktemp -d "${TMPDIR:-/tmp}/remat-bf16.XXXXXX")
trap 'rm -rf "$dir"' EXIT
line=$("$bin/remat-train" --version | sed -n 's/^precision bf16 (cpu): //p')
case $line in
"not available"*) echo "bf16: skipped: $line"; exit 0 ;;
esac
every=$((steps / 6))
for p in fp32 bf16; do
	cat > "$dir/$p.json" <<JOB
{"name": "bench-bf16", "model": {"preset": "$preset"},
 "data": {"train": "/usr/share/common-licenses/GPL-3",
          "val": "/usr/share/common-licenses/Apache-2.0", "format": "bytes"},
 "batch": $B, "seq_len": $T, "steps": $steps, "threads": $threads, "seed": 3,
 "optim": {"lr": 1e-3}, "eval": {"every": $every, "batches": 8}, "precision": "$p"}
JOB
	case $preset in tiny) ;; *) sed -i 's/"preset": "[a-z0-9-]*"/&, "vocab_size": 50257/' "$dir/$p.json" ;; esac
	"$bin/remat-train" --json "$dir/$p.json" > "$dir/$p.out"
done
echo "$preset, batch $B x $T, $steps steps, $threads threads; bf16: $line"
/usr/bin/python3 - "$dir/fp32.out" "$dir/bf16.out" "$json_out" <<'PY'
import json, statistics, sys
def rows(path):
    ev, ms = {}, []
    for l in open(path):
        if not l.startswith("{"):
            continue
        r = json.loads(l)
        if "val_loss" in r:
            ev[r["step"]] = r["val_loss"]
        elif "step_ms" in r:
            ms.append(r["step_ms"])
    return ev, statistics.median(ms[1:])
fe, fms = rows(sys.argv[1])
be, bms = rows(sys.argv[2])
print("%6s %12s %12s %8s" % ("step", "fp32 val", "bf16 val", "gap %"))
worst = 0.0
for s in sorted(fe):
    gap = abs(be[s] - fe[s]) / fe[s] * 100
    worst = max(worst, gap)
    print("%6d %12.5f %12.5f %8.3f" % (s, fe[s], be[s], gap))
print("largest gap %.3f %% (goal: within 2 %%); median step fp32 %.1f ms, bf16 %.1f ms (x%.2f "
      "tokens/s)" % (worst, fms, bms, fms / bms))
if sys.argv[3]:
    json.dump({"evals": {str(s): [fe[s], be[s]] for s in fe}, "largest_gap_pct": worst,
               "step_ms": {"fp32": fms, "bf16": bms}}, open(sys.argv[3], "w"))
PY
