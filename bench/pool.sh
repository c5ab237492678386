#!/bin/sh
# bench/pool.sh - two jobs side by side under rematd --memory, in `make bench`: two
# mini-sized jobs (one thread each; b twice as long as a) whose `off` peaks together pass
# the pool by a third, against the two ways a user runs them today: one after the other
# (each at `off`), or both at once under a static budget of half the pool each.
#
#   sh bench/pool.sh BINDIR [json-out]
#
# Prints, for each way, the wall time until both jobs finished and the most resident
# memory the two workers held together (VmRSS summed, read from /proc every 0.1 s, from
# outside); whether the pool's jobs end with the weights of the jobs run alone, byte for
# byte; how many steps the job left alone (b) takes, once a ended, to run under `off`
# again (the policy its controller switches to when told the pool's room); and PASS/MISS
# lines. A JSON summary to json-out.
set -eu
bin=$1
json_out=${2:-}
preset=${PRESET:-mini}
steps=${STEPS:-20}
dir=$(mktemp -d "${TMPDIR:-/tmp}/remat-pool.XXXXXX")
sock=$dir/sock
dpid=
evpid=
trap '[ -n "$evpid" ] && kill "$evpid" 2>/dev/null; [ -n "$dpid" ] && kill "$dpid" 2>/dev/null; rm -rf "$dir"' EXIT
ctl() { "$bin/rematctl" --socket "$sock" "$@"; }

# spec NAME WAY [EXTRA]: the job NAME of way WAY (its own save directory)
spec() {
	n=$steps
	[ "$1" = b ] && n=$((2 * steps))
	n=${run_steps:-$n}
	cat > "$dir/$2-$1.json" <<JOB
{"name": "$1", "model": {"preset": "$preset"},
 "data": {"train": "/usr/share/common-licenses/GPL-3", "format": "bytes"},
 "batch": 4, "seq_len": 256, "steps": $n, "seed": 7, "threads": 1,
 "save": {"dir": "$dir/save-$2-$1"}${3:-}}
JOB
}

# daemon STATE [ARGS...]: a fresh rematd
daemon() {
	[ -n "$dpid" ] && { ctl shutdown --no-save >/dev/null 2>&1 || true; wait "$dpid" || true; }
	state=$1
	shift
	"$bin/rematd" --socket "$sock" --state-dir "$dir/$state" "$@" 2>"$dir/$state.log" &
	dpid=$!
	while ! ctl info >/dev/null 2>&1; do
		kill -0 "$dpid" 2>/dev/null || { cat "$dir/$state.log" >&2; exit 1; }
		sleep 0.1
	done
}

# the pid of job J's worker, "" once it has none
pid_of() { ctl --json status "$1" 2>/dev/null | python3 -c 'import json,sys
p = json.load(sys.stdin).get("pid"); print(p if p else "")'; }

# run WAY JOB...: waits for every job to finish, sampling the workers' summed VmRSS;
# prints "WALL_S MAX_RSS_BYTES"
run() {
	way=$1
	shift
	t0=$(date +%s.%N)
	max=0
	while :; do
		sum=0
		live=0
		for j in "$@"; do
			st=$(ctl --json status "$j" | python3 -c 'import json,sys
d = json.load(sys.stdin); print(d["state"], d.get("pid") or 0)')
			case $st in finished*) continue ;; failed*|stopped*) echo "$way: $j $st" >&2; exit 1 ;; esac
			live=1
			p=${st#* }
			r=$(awk '/^VmRSS:/ {print $2 * 1024}' "/proc/$p/status" 2>/dev/null || echo 0)
			sum=$((sum + ${r:-0}))
		done
		[ "$sum" -gt "$max" ] && max=$sum
		[ "$live" = 0 ] && break
		sleep 0.1
	done
	t1=$(date +%s.%N)
	echo "$(echo "$t1 - $t0" | bc) $max"
}

# pair WAY: way's two jobs started on its daemon and run to their end: "WALL RSS"
pair() {
	ja=$(ctl start "$dir/$1-a.json")
	jb=$(ctl start "$dir/$1-b.json")
	run "$1" "$ja" "$jb"
}

# the figures the pool plans for one job: least and off (a pool far larger than both)
run_steps=1000000 spec a probe
daemon probe --max-jobs 1 --memory 64GiB --worker "$bin/remat-train"
j=$(ctl start "$dir/probe-a.json")
until ctl --json status "$j" | python3 -c 'import json,sys
sys.exit(0 if json.load(sys.stdin)["step"] >= 2 else 1)'; do sleep 0.5; done
fig=$(ctl --json status "$j" | python3 -c 'import json,sys
m = json.load(sys.stdin)["memory"]; print(m["least_bytes"], m["off_bytes"])')
least=${fig% *}
off=${fig#* }
ctl stop "$j" --no-save >/dev/null 2>&1
pool=$((2 * off * 3 / 4))
half=$((pool / 2))
echo "pool: job least $((least / 1048576)) MiB, off $((off / 1048576)) MiB; pool $((pool / 1048576)) MiB (the two off peaks pass it by a third)"

# the pool: both at once
for n in a b; do spec $n pool; done
daemon pool --max-jobs 2 --memory "$pool" --worker "$bin/remat-train"
ctl --json events > "$dir/pool-events" 2>/dev/null &
evpid=$!
set -- $(pair pool)
pool_wall=$1
pool_rss=$2
kill "$evpid" 2>/dev/null || true
evpid=
# one after the other, each alone at off
for n in a b; do spec $n seq; done
daemon seq --max-jobs 1 --worker "$bin/remat-train"
set -- $(pair seq)
seq_wall=$1
seq_rss=$2
# both at once, a static half each
for n in a b; do spec $n half ", \"remat\": {\"budget\": $half}"; done
daemon half --max-jobs 2 --worker "$bin/remat-train"
set -- $(pair half)
half_wall=$1
half_rss=$2

same=yes
for n in a b; do
	k=$steps
	[ "$n" = b ] && k=$((2 * steps))
	f=$(printf 'step_%08d/model.safetensors' "$k")
	cmp -s "$dir/save-pool-$n/$f" "$dir/save-seq-$n/$f" || same=no
done
# b after a ended: its last step then, the grow it was told, the step its controller
# moved it to off at; "steps" between a's end and that
last=$(python3 - "$dir/pool-events" <<'PY'
import json, sys
a_end = b_step = grow = None
off_at = None
b_off = False  # b runs under off now (its last REMAT_AUTO or REMAT_APPLIED said so)
def all_off(pol):
    return bool(pol) and all(m == "off" for m in pol.values())
for line in open(sys.argv[1]):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    ev, d = e.get("event"), e.get("data", {})
    job = d.get("job")
    if ev == "JOB_STATE_CHANGED" and job == "j1" and d.get("to") == "finished":
        a_end = b_step
        if b_off:  # the division had given b its off peak while a ran
            off_at = b_step
    elif ev == "STEP" and job == "j2":
        b_step = d.get("step")
    elif a_end is not None and ev == "POOL_CHANGED" and job == "j2" and d.get("phase") == "grow":
        grow = d["share_bytes"]
    elif ev in ("REMAT_AUTO", "REMAT_APPLIED") and job == "j2":
        b_off = all_off(d.get("policy") or {})
        if grow and off_at is None and b_off:
            off_at = d.get("step")
if a_end is None or off_at is None:
    print("-1 b did not return to off after a ended")
elif grow is None:
    print("0 b at step %d when a ended, under off already (the division gave it its off "
          "peak while a ran)" % a_end)
else:
    print("%d b at step %d when a ended, told %.1f MiB, under off from step %d" %
          (off_at - a_end, a_end, grow / 1048576, off_at))
PY
)
back=${last%% *}
last=${last#* }
mib() { echo "$(($1 / 1048576))"; }
printf '%-28s %10s %16s\n' "way" "wall (s)" "max RSS (MiB)"
printf '%-28s %10.1f %16s\n' "pool, side by side" "$pool_wall" "$(mib "$pool_rss")"
printf '%-28s %10.1f %16s\n' "one after the other (off)" "$seq_wall" "$(mib "$seq_rss")"
printf '%-28s %10.1f %16s\n' "static halves, side by side" "$half_wall" "$(mib "$half_rss")"
echo "pool: the job left alone: $last"
ok() { if [ "$1" = 1 ]; then echo "PASS $2"; else echo "MISS $2"; fi; }
ok "$([ "$pool_rss" -le "$pool" ] && echo 1 || echo 0)" "the two workers' resident memory never passed the pool ($(mib "$pool_rss") <= $(mib "$pool") MiB)"
ok "$([ "$same" = yes ] && echo 1 || echo 0)" "the pool's jobs end with the weights they get alone, byte for byte"
ok "$(echo "$pool_wall < $seq_wall && $pool_wall < $half_wall" | bc)" "the pool's wall time is the least of the three"
# within a few steps: the step the grow applies at, the controller's move at once (to the
# fastest policy its room takes then: its untracked term is the most of the last 8 steps'),
# and at most one more towards speed after its calm gap (ENG_AUTO_GAP, 5 steps)
ok "$([ "$back" -ge 0 ] && [ "$back" -le 8 ] && echo 1 || echo 0)" "the job left alone runs under off again within 8 steps ($back)"
if [ "$back" -lt 0 ] || [ "$back" -gt 8 ]; then # what b was told and did, to say why
	echo "pool: rematd's lines on b, and the events of b's budget and policy:"
	grep ' j2[:( ]' "$dir/pool.log" | tail -n 12
	grep -E '"event":"(POOL_CHANGED|REMAT_AUTO|REMAT_APPLIED)".*"job":"j2"|"job":"j1".*"to":"finished"' \
		"$dir/pool-events" | cut -c1-400 | tail -n 12
fi
if [ -n "$json_out" ]; then
	cat > "$json_out" <<JSON
{"preset": "$preset", "steps": $steps, "least_bytes": $least, "off_bytes": $off,
 "pool_bytes": $pool, "pool": {"wall_s": $pool_wall, "max_rss_bytes": $pool_rss},
 "sequential": {"wall_s": $seq_wall, "max_rss_bytes": $seq_rss},
 "static_halves": {"wall_s": $half_wall, "max_rss_bytes": $half_rss},
 "bitwise_equal": "$same", "steps_back_to_off": $back}
JSON
fi
