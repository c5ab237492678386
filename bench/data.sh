#!/bin/sh
# bench/data.sh - a token file far larger than memory, in `make bench`: a 10 GiB llm.c
# file (sparse: GPT-2's token 0 throughout, so it costs no disk) trains in llm.c's
# shuffled order, each batch read from anywhere in the file, while what the job's data
# holds (mem's data category: a sample's buffer, the batch, the permutation) stays under
# 64 MiB and the process's resident memory grows by no more than that from its first
# steps to its last.
#
#   sh bench/data.sh BINDIR [json-out]
#
# One remat-train --json --control process; mem read through rematctl at the end. Prints
# the figures and PASS/MISS lines; a JSON summary to json-out.
set -eu
bin=$1
json_out=${2:-}
steps=${STEPS:-300}
dir=$(mktemp -d "${TMPDIR:-/tmp}/remat-data.XXXXXX")
sock=$dir/ctl.sock
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
size=$((10 * 1024 * 1024 * 1024))
ntok=$(((size - 1024) / 2))
# llm.c's header (magic 20240520, version 1, the count's low and high words), then a hole
/usr/bin/python3 -c 'import struct, sys
n = int(sys.argv[2])
h = [20240520, 1, n & 0xffffffff, n >> 32] + [0] * 252
open(sys.argv[1], "wb").write(struct.pack("<256I", *h))' "$dir/huge.bin" "$ntok"
truncate -s "$size" "$dir/huge.bin"
cat > "$dir/job.json" <<JOB
{"model": {"preset": "tiny"},
 "data": {"train": "$dir/huge.bin", "shuffle": true},
 "batch": 4, "seq_len": 256, "steps": $steps, "threads": 2}
JOB
"$bin/remat-train" --json --control "$sock" "$dir/job.json" > "$dir/out" 2> "$dir/err" &
pid=$!
# mem-stats near the end, while the worker still runs
while ! grep -q "\"step\":$((steps - 20))," "$dir/out" 2>/dev/null; do
	kill -0 "$pid" 2>/dev/null || { cat "$dir/err" >&2; exit 1; }
	sleep 0.2
done
"$bin/rematctl" --control "$sock" --json mem > "$dir/mem"
wait "$pid" || { cat "$dir/err" >&2; exit 1; }
pid=
/usr/bin/python3 - "$dir/out" "$dir/mem" "$size" "$json_out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
steps = [r for r in rows if "loss" in r]
mem = json.load(open(sys.argv[2]))
data = mem["categories"]["data"]["peak"]
rss = [r["rss"] for r in steps if "rss" in r]
first, last = rss[min(5, len(rss) - 1)], rss[-1]
grow = last - first
ms = sorted(r["step_ms"] for r in steps[5:])
MiB = 1 << 20
print(f"data: a {int(sys.argv[3]) / (1 << 30):.0f} GiB token file, shuffled, {len(steps)} steps "
      f"of {ms[len(ms) // 2]:.1f} ms (median): the data category's peak {data / MiB:.2f} MiB; "
      f"resident {first / MiB:.1f} MiB at step 6, {last / MiB:.1f} MiB at the end "
      f"(+{grow / MiB:.1f} MiB)")
for ok, what in ((data < 64 * MiB, "data category under 64 MiB"),
                 (grow < 64 * MiB, "resident memory grows by less than 64 MiB")):
    print(("PASS " if ok else "MISS ") + what)
if sys.argv[4]:
    json.dump({"file_bytes": int(sys.argv[3]), "steps": len(steps), "data_peak": data,
               "rss_first": first, "rss_last": last, "median_step_ms": ms[len(ms) // 2]},
              open(sys.argv[4], "w"))
PY
