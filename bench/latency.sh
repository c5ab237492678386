#!/bin/sh
# bench/latency.sh - daemon-info latency of a rematd that has just started, then mem-stats
# latency through rematd while a job keeps both cores busy.
#
#   sh bench/latency.sh BINDIR [preset] [N]
#
# Starts rematd on a temporary socket, starts a job of the given preset (default
# gpt2-small, batch 4 x 256, 2 threads) through rematctl, waits for its first step, then
# times N mem-stats requests (bench-latency) while it trains, and stops everything.
set -eu
bin=$1
preset=${2:-gpt2-small}
n=${3:-1000}
dir=$(mktemp -d "${TMPDIR:-/tmp}/remat-lat.XXXXXX")
"$bin/rematd" --socket "$dir/sock" --state-dir "$dir/state" 2>"$dir/rematd.log" &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -S "$dir/sock" ] && break; sleep 0.1; done
# daemon-info on a daemon that has just started (its first answer included), before any job
"$bin/bench-latency" "$dir/sock" - 100 daemon-info
cat > "$dir/job.json" <<JOB
{"name": "latency", "model": {"preset": "$preset", "vocab_size": 50257},
 "data": {"train": "/usr/share/common-licenses/GPL-3", "format": "bytes"},
 "batch": 4, "seq_len": 256, "steps": 1000000, "threads": 2}
JOB
job=$("$bin/rematctl" --socket "$dir/sock" start "$dir/job.json")
# wait for the first step, so the measurement runs while the model trains
for _ in $(seq 600); do
	step=$("$bin/rematctl" --socket "$dir/sock" --json status "$job" |
		grep -o '"step":[0-9]*' | cut -d: -f2)
	[ "${step:-0}" -ge 1 ] && break
	sleep 0.5
done
"$bin/bench-latency" "$dir/sock" "$job" "$n" mem-stats
"$bin/rematctl" --socket "$dir/sock" stop "$job" >/dev/null
