#!/bin/sh
# make demo: rematd and rematctl end to end. Starts the daemon on a temporary socket, trains
# a small byte-level GPT-2 on a text every Debian machine has, watches it, switches the
# trunk to full checkpointing in the middle of the run and shows memory before and after,
# saves, stops the job and the daemon, and says where the checkpoint is and how to load it.
# Leaves no process behind (the trap kills the daemon, which stops its worker).
set -eu
bin=${1:-build/bin}
dir=$(mktemp -d "${TMPDIR:-/tmp}/remat-demo.XXXXXX")
sock="$dir/rematd.sock"
ctl() { "$bin/rematctl" --socket "$sock" "$@"; }

"$bin/rematd" --socket "$sock" --state-dir "$dir/state" 2>"$dir/rematd.log" &
daemon=$!
trap 'kill $daemon 2>/dev/null || true; wait $daemon 2>/dev/null || true' EXIT INT TERM
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done

cat > "$dir/job.json" <<JOB
{
  "name": "demo",
  "model": {"n_layer": 4, "n_embd": 128, "n_head": 4, "n_positions": 128},
  "data": {"train": "/usr/share/common-licenses/GPL-3", "format": "bytes"},
  "batch": 8, "seq_len": 128, "steps": 400, "seed": 1337,
  "optim": {"lr": 2e-3, "weight_decay": 0.1, "grad_clip": 1.0},
  "schedule": {"kind": "cosine", "warmup": 20, "min_lr_frac": 0.1},
  "remat": {"default": "off", "aliases": {"trunk": "h.1-3"}},
  "save": {"dir": "$dir/checkpoints"},
  "threads": 2
}
JOB

# step of a job, from `rematctl status --json`
step() { ctl --json status "$1" | sed 's/.*"step":\([0-9]*\).*/\1/'; }
wait_step() { while [ "$(step "$1")" -lt "$2" ]; do sleep 0.2; done; }

echo "== rematd is serving on $sock"
ctl info
echo
echo "== rematctl start $dir/job.json"
job=$(ctl start "$dir/job.json")
echo "job $job"
wait_step "$job" 30
echo
echo "== rematctl watch $job (a few updates; on a terminal it redraws in place)"
ctl watch "$job" --interval 1 --count 4
echo
echo "== memory with checkpointing off"
ctl mem "$job"
echo
echo "== rematctl remat set $job trunk=full   (trunk is an alias of this job: h.1-3)"
ctl remat set "$job" trunk=full
at=$(step "$job")
wait_step "$job" $((at + 10))
echo
echo "== memory with the trunk checkpointed: activations fell, the pages went back to the OS"
ctl mem "$job"
echo
ctl remat get "$job"
echo
echo "== rematctl watch $job"
ctl watch "$job" --interval 1 --count 3
echo
echo "== rematctl save $job"
ctl save "$job"
echo
echo "== rematctl stop $job (saves first: --no-save would drop the steps since the last save)"
ctl stop "$job"
ctl ls
ctl shutdown >/dev/null
wait $daemon 2>/dev/null || true
trap - EXIT INT TERM
latest="$dir/checkpoints/$(cat "$dir/checkpoints/latest")"
echo
echo "== checkpoint (Hugging Face GPT-2 layout; no recompute setting inside):"
ls -l "$latest"
echo
echo "Load it in Python: GPT2LMHeadModel.from_pretrained('$latest')"
echo "or train on from it: \"model\": {\"init_from\": \"$latest\"}"
