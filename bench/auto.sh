#!/bin/sh
# bench/auto.sh - the memory controller in `make bench`: does remat keep a budget by
# itself, at the speed of the best static choice, and is out of memory a retry?
#
#   sh bench/auto.sh BINDIR [preset] [batch] [seq_len] [json-out]
#
# All on one job (weights from the seed, bytes of a text every Debian machine has, the
# preset's vocabulary kept), one remat-train --json process per part:
#  1. uniform: off, selective, full, full + head chunked, UROUNDS interleaved rounds of SEG
#     steps each; their steady peaks (the largest rss_peak_bytes of a segment's steps after
#     its first: the process's resident peak, the kernel's VmHWM over the step, which the
#     worker reads and resets at each step) and median step times.
#     The budget is halfway between the peaks of off and of full + chunked: a budget is the
#     process's memory (what top, a cgroup and the OOM killer see).
#  2. a worker (--control) with "remat": {"profile": true}. After its probe (24 steps) its
#     remat-plan predicts, from the measured costs, the step time of the four uniform
#     policies; then the same worker runs each of them alone (remat set, CROUNDS
#     interleaved rounds of SEG steps, the first of each dropped): within 10 %.
#     Its planner then picks the static candidates a user would try: for each head mode
#     and each count of full blocks (the first ones), the most off blocks (the last ones)
#     that fit the budget, the rest selective.
#  3. auto: "remat": {"budget": B} and a save every SAVE_EVERY steps: the controller keeps
#     the budget from the first step, learning the costs of what it runs. The process's
#     peak, read from outside (/proc/PID/status VmHWM and VmRSS, every few ms, the whole
#     run: start-up and saves included) and every step's own (switches included), must be
#     within the budget; its steady time is the median of the last STEADY steps.
#     Then trying them: the TOP candidates the cost table finds fastest (TOP=0: all) and
#     the controller's steady policy, interleaved over ROUNDS rounds of SEG steps in one
#     process (the first step of each segment dropped), so that a change in the machine's
#     load falls on all alike. The fastest whose measured peak is within the budget is the
#     fastest static policy that fits; the controller's policy must be within 5 % of it.
#  4. limit: "memory": {"limit": 80 % of off's tracked peak} (no room for a save's
#     snapshot: saves write from the live tensors) and no budget, off asked for, against
#     off without a limit: the run retries (oom_retries >= 1) and its final weights are the
#     unlimited run's, byte for byte.
# Prints tables and PASS/MISS lines for the targets; a JSON summary to json-out.
set -eu
bin=$1
preset=${2:-gpt2-small}
B=${3:-4}
T=${4:-256}
json_out=${5:-}
seg=${SEG:-3}
threads=${THREADS:-2}
steady=${STEADY:-6}
dir=$(mktemp -d "${TMPDIR:-/tmp}/remat-auto.XXXXXX")
trap 'rm -rf "$dir"' EXIT

# job FILE STEPS [EXTRA]: the bench's job with EXTRA keys
job() {
	cat > "$1" <<JOB
{"name": "auto", "model": {"preset": "$preset"},
 "data": {"train": "/usr/share/common-licenses/GPL-3", "format": "bytes"},
 "batch": $B, "seq_len": $T, "steps": $2, "threads": $threads,
 "schedule": "constant"${3:-}}
JOB
	case $preset in tiny) ;; *) sed -i 's/"preset": "[a-z0-9-]*"/&, "vocab_size": 50257/' "$1" ;; esac
}
median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
field() { grep -o "\"$1\":[0-9.e+-]*" | cut -d: -f2; }
# segment K's steady lines (steps after its first) of a --json run in FILE
segment() { awk -v k="$1" -v seg="$seg" '{ s = $0; sub(/.*"step":/, "", s); s = int(s) - 1
	if (int(s / seg) == k && s % seg != 0) print }' "$2"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

job "$dir/c.json" 1
L=$("$bin/remat-train" --check "$dir/c.json" | grep -o '"n_layer":[0-9]*' | cut -d: -f2)
[ "$L" -gt 0 ] || { echo "auto: cannot count the blocks of $preset" >&2; exit 1; }
echo "memory controller: $preset, batch $B x $T, $threads threads, $L blocks"

# 1. the uniform policies, interleaved over URounds rounds
urounds=${UROUNDS:-3}
uni="off selective full full;head=chunked"
sched="" i=0
while [ $i -lt $((4 * urounds)) ]; do
	case $((i % 4)) in 0) p=off ;; 1) p=selective ;; 2) p=full ;; *) p="full;head=chunked" ;; esac
	sched="$sched${sched:+,}$((i * seg)):$p"
	i=$((i + 1))
done
job "$dir/u.json" $((4 * urounds * seg))
"$bin/remat-train" --json --remat-schedule "$sched" "$dir/u.json" > "$dir/u.out"
k=0
for p in $uni; do
	: > "$dir/seg"
	r=0
	while [ $r -lt "$urounds" ]; do
		segment $((4 * r + k)) "$dir/u.out" >> "$dir/seg"
		r=$((r + 1))
	done
	eval "peak$k=\$(field rss_peak_bytes < \"\$dir/seg\" | sort -g | tail -1)"
	eval "tpeak$k=\$(field peak_bytes < \"\$dir/seg\" | sort -g | tail -1)"
	eval "ms$k=\$(field step_ms < \"\$dir/seg\" | median)"
	k=$((k + 1))
done
budget=$(( (peak0 + peak3) / 2 ))
printf '%-44s %10s %12s %9s\n' policy rss_MiB tracked_MiB step_ms
k=0
for p in $uni; do
	eval "printf '%-44s %10s %12s %9.1f\n' \"\$p\" \"\$(mib \$peak$k)\" \"\$(mib \$tpeak$k)\" \"\$ms$k\""
	k=$((k + 1))
done
echo "budget: $(mib $budget) MiB of process memory (halfway between off and full + chunked)"

# 2. a worker that plans and measures costs: a probe fills its cost table ("profile")
sock=$dir/ctl.sock
job "$dir/p.json" 1000000 ", \"remat\": {\"profile\": true}"
: > "$dir/p.out"
"$bin/remat-train" --json --control "$sock" "$dir/p.json" > "$dir/p.out" &
pid=$!
while [ ! -S "$sock" ] || [ "$(wc -l < "$dir/p.out")" -lt 1 ]; do sleep 0.2; done
plan() { # the planner's peak of the policy SEL=MODE... (all of them given)
	# shellcheck disable=SC2086
	"$bin/rematctl" --control "$sock" --json remat plan $1 | grep -o '"peak_bytes":[0-9]*' | tail -1 | cut -d: -f2
}
# once the probe is over (24 steps and the one after; no query meanwhile: the steps it
# measures would share the cores), the predicted times of the four uniform policies from
# the measured costs; then each of them run alone in the same worker (remat set, SEG steps,
# the first dropped), over CROUNDS interleaved rounds: the machine's speed drifts more
# between processes than within one
while [ "$(wc -l < "$dir/p.out")" -lt 26 ]; do sleep 0.5; done
set -- "--default off" "--default selective head=off" "--default full head=off" \
	"--default full head=chunked"
k=0
for p in "$@"; do
	# shellcheck disable=SC2086
	eval "pred$k=\$(\"\$bin/rematctl\" --control \"\$sock\" --json remat plan $p | grep -o '\"step_ms\":[0-9.e+-]*' | tail -1 | cut -d: -f2)"
	eval ": > \"\$dir/alone$k\""
	k=$((k + 1))
done
crounds=${CROUNDS:-2}
r=0
while [ $r -lt "$crounds" ]; do
	k=0
	for p in "$@"; do
		# shellcheck disable=SC2086
		at=$("$bin/rematctl" --control "$sock" --json remat set $p | grep -o '"applies_at_step":[0-9]*' | cut -d: -f2)
		while [ "$(wc -l < "$dir/p.out")" -lt $((at + seg - 1)) ]; do sleep 0.2; done
		awk -v a="$at" -v b=$((at + seg - 1)) '{ s = $0; sub(/.*"step":/, "", s); s = int(s)
			if (s > a && s <= b) print }' "$dir/p.out" >> "$dir/alone$k"
		k=$((k + 1))
	done
	r=$((r + 1))
done
k=0
for p in $uni; do
	eval "alone_ms$k=\$(field step_ms < \"\$dir/alone$k\" | median)"
	k=$((k + 1))
done

# the static candidates: for each head mode and count of full blocks (on the first
# blocks), the most off blocks (the last ones) that the planner says fit, the rest
# selective; with the step time the cost table predicts for each
: > "$dir/cands"
for h in chunked off; do
	nf=0
	while [ $nf -le "$L" ]; do
		no=$((L - nf))
		while [ $no -ge 0 ]; do
			ns=$((L - nf - no)) p=""
			[ $nf -eq 0 ] || p="h.0-$((nf - 1))=full"
			[ $ns -eq 0 ] || p="$p${p:+;}h.$nf-$((nf + ns - 1))=selective"
			[ $no -eq 0 ] || p="$p${p:+;}h.$((nf + ns))-$((L - 1))=off"
			p="$p;head=$h"
			# shellcheck disable=SC2046
			"$bin/rematctl" --control "$sock" --json remat plan $(echo "$p" | tr ';' ' ') > "$dir/plan"
			pk=$(grep -o '"peak_bytes":[0-9]*' "$dir/plan" | tail -1 | cut -d: -f2)
			pms=$(grep -o '"step_ms":[0-9.e+-]*' "$dir/plan" | tail -1 | cut -d: -f2)
			if [ "$pk" -le "$budget" ]; then
				echo "$pms $p" >> "$dir/cands"
				break
			fi
			no=$((no - 1))
		done
		nf=$((nf + 1))
	done
done
"$bin/rematctl" --control "$sock" stop > /dev/null
wait $pid || true

# 3. the controller, with saves, its process watched from outside the whole run
total=$((12 + steady))
save_every=${SAVE_EVERY:-5}
job "$dir/a.json" "$total" ", \"remat\": {\"budget\": $budget}, \"save\": {\"dir\": \"$dir/asave\", \"every\": $save_every, \"keep\": 1}"
"$bin/remat-train" --json "$dir/a.json" > "$dir/a.out" &
apid=$!
outside=0
while kill -0 $apid 2>/dev/null; do
	kb=$(awk '$1 == "VmHWM:" || $1 == "VmRSS:" { if ($2 > m) m = $2 } END { print m + 0 }' "/proc/$apid/status" 2>/dev/null || echo 0)
	[ "${kb:-0}" -le "$outside" ] || outside=$kb
done
wait $apid
outside=$((outside * 1024))
over=$(field rss_peak_bytes < "$dir/a.out" | awk -v b="$budget" '$1 > b { n++ } END { print n + 0 }')
[ "$outside" -le "$budget" ] || over=$((over + 1))
apeak=$(field rss_peak_bytes < "$dir/a.out" | sort -g | tail -1)
saves=$(ls -d "$dir"/asave/step_* 2>/dev/null | wc -l)
ams=$(tail -n "$steady" "$dir/a.out" | field step_ms | median)
apol=$(tail -1 "$dir/a.out" | sed 's/.*"policy":{\([^}]*\)}.*/\1/; s/"//g; s/:/=/g; s/,/;/g')
echo "controller: $total steps, a save every $save_every ($saves kept); the process's peak $(mib "$apeak") MiB by its steps, $(mib "$outside") MiB read from outside; $over over the budget; steady $ams ms under $apol"

# 2b. trying them: the TOP candidates the cost table finds fastest (all of them with
# TOP=0) and the controller's steady policy, interleaved over ROUNDS rounds in one process
# so that a change in the machine's load falls on all alike
top=${TOP:-6}
srounds=${ROUNDS:-3}
sort -g "$dir/cands" | { if [ "$top" -gt 0 ]; then head -n "$top"; else cat; fi; } |
	cut -d' ' -f2 > "$dir/try"
grep -qxF "$apol" "$dir/try" || echo "$apol" >> "$dir/try"
n=$(wc -l < "$dir/try")
sched="" i=0
while [ $i -lt $((n * srounds)) ]; do
	p=$(sed -n "$((i % n + 1))p" "$dir/try")
	sched="$sched${sched:+,}$((i * seg)):$p"
	i=$((i + 1))
done
job "$dir/s.json" $((n * srounds * seg))
"$bin/remat-train" --json --remat-schedule "$sched" "$dir/s.json" > "$dir/s.out"
echo "$(wc -l < "$dir/cands") candidates fit by the planner; trying $n ($top fastest by the cost table, and the controller's), $srounds rounds of $seg steps:"
best_ms="" best_p="" auto_static=""
k=0
while [ $k -lt "$n" ]; do
	p=$(sed -n "$((k + 1))p" "$dir/try")
	: > "$dir/seg"
	r=0
	while [ $r -lt "$srounds" ]; do
		segment $((r * n + k)) "$dir/s.out" >> "$dir/seg"
		r=$((r + 1))
	done
	pk=$(field rss_peak_bytes < "$dir/seg" | sort -g | tail -1)
	ms=$(field step_ms < "$dir/seg" | median)
	fit=no
	if [ "$pk" -le "$budget" ]; then
		fit=yes
		if [ -z "$best_ms" ] || awk -v a="$ms" -v b="$best_ms" 'BEGIN { exit !(a < b) }'; then
			best_ms=$ms best_p=$p
		fi
	fi
	[ "$p" != "$apol" ] || auto_static=$ms
	printf '%-52s %10s %9.1f %s\n' "$p" "$(mib "$pk")" "$ms" "$fit"
	k=$((k + 1))
done
[ -n "$best_ms" ] || { echo "auto: no static candidate fits the budget" >&2; exit 1; }
echo "fastest static policy that fits: $best_p, $best_ms ms; the controller's, run the same way: $auto_static ms"
ratio=$(awk -v a="$auto_static" -v b="$best_ms" 'BEGIN { printf "%.3f", a / b }')

# the costs the probe measured against the uniform policies run alone (part 2)
printf '%-20s %12s %12s %8s\n' "policy" "predicted_ms" "alone_ms" "ratio"
worst=0
k=0
for p in $uni; do
	eval "pr=\$pred$k; al=\$alone_ms$k"
	r=$(awk -v a="$pr" -v b="$al" 'BEGIN { printf "%.3f", a / b }')
	worst=$(awk -v w="$worst" -v r="$r" 'BEGIN { d = r > 1 ? r - 1 : 1 - r; print (d > w ? d : w) }')
	printf '%-20s %12.1f %12.1f %8s\n' "$p" "$pr" "$al" "$r"
	k=$((k + 1))
done

# 4. a hard limit (memory.limit: the tracked bytes, an allocator's cap) 20 % below what
# off's steps need, no room for a save's snapshot (the saves write from the live tensors),
# against off without a limit
limit=$((tpeak0 * 8 / 10))
job "$dir/l.json" 4 ", \"memory\": {\"limit\": $limit}, \"save\": {\"dir\": \"$dir/lim\"}"
job "$dir/f.json" 4 ", \"save\": {\"dir\": \"$dir/free\"}"
retries=0 same=no lpeak=0
if "$bin/remat-train" --json "$dir/l.json" > "$dir/l.out" 2> "$dir/l.err"; then
	"$bin/remat-train" --json "$dir/f.json" > "$dir/f.out"
	retries=$(tail -1 "$dir/l.out" | field oom_retries)
	lpeak=$(field peak_bytes < "$dir/l.out" | sort -g | tail -1)
	cmp -s "$dir/lim/step_00000004/model.safetensors" "$dir/free/step_00000004/model.safetensors" && same=yes
else
	cat "$dir/l.err"
fi
echo "limit $(mib $limit) MiB (80 % of off's tracked $(mib "$tpeak0") MiB, no room for a snapshot): oom_retries $retries, peak $(mib "$lpeak") MiB, final weights equal to off without a limit: $same"

verdict() { if [ "$1" = 1 ]; then echo "PASS  $2"; else echo "MISS  $2"; fi; }
verdict "$([ "$over" -eq 0 ] && echo 1)" "the process within the budget, every step and from outside ($over over)"
verdict "$(awk -v r="$ratio" 'BEGIN { print (r <= 1.05) }')" "controller $ratio x the fastest static policy that fits (target <= 1.05)"
verdict "$(awk -v w="$worst" 'BEGIN { print (w <= 0.10) }')" "costs within $(awk -v w="$worst" 'BEGIN { printf "%.1f", 100 * w }') % of the policies run alone (target 10 %)"
verdict "$([ "$retries" -ge 1 ] && [ "$same" = yes ] && echo 1)" "limit: oom_retries $retries, weights bitwise equal: $same"
[ -z "$json_out" ] || printf '{"preset":"%s","batch":%s,"seq_len":%s,"threads":%s,"budget_bytes":%s,"outside_peak_bytes":%s,"best_static":"%s","best_static_ms":%s,"auto_ms":%s,"auto_over_budget":%s,"auto_vs_static":%s,"cost_error":%s,"limit_bytes":%s,"oom_retries":%s,"limit_weights_equal":%s}\n' \
	"$preset" "$B" "$T" "$threads" "$budget" "$outside" "$best_p" "$best_ms" "$ams" "$over" "$ratio" "$worst" "$limit" "$retries" \
	"$([ "$same" = yes ] && echo true || echo false)" > "$json_out"
