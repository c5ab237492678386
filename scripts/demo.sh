#!/bin/sh
# make demo: trains a small byte-level GPT-2 on a text every Debian machine has, switching
# activation checkpointing in the middle of the run, and saves the weights.
#
# The daemon and client (rematd, rematctl) are not built yet; this demo drives the engine
# through its foreground runner, remat-train, whose --remat-schedule option changes the
# policy between steps exactly as `rematctl remat set` will.
set -eu
train=${1:-build/bin/remat-train}
dir=$(mktemp -d "${TMPDIR:-/tmp}/remat-demo.XXXXXX")
text=/usr/share/common-licenses/GPL-3

cat > "$dir/job.json" <<JOB
{
  "name": "demo",
  "model": {"n_layer": 4, "n_embd": 128, "n_head": 4, "n_positions": 128},
  "data": {"train": "$text", "format": "bytes"},
  "batch": 8, "seq_len": 128, "steps": 60, "seed": 1337,
  "optim": {"lr": 2e-3, "weight_decay": 0.1, "grad_clip": 1.0},
  "schedule": {"kind": "cosine", "warmup": 5, "min_lr_frac": 0.1},
  "remat": {"default": "off", "aliases": {"trunk": "h.1-3"}},
  "save": {"dir": "$dir/ckpt"},
  "threads": 2
}
JOB

echo "== job spec: $dir/job.json"
cat "$dir/job.json"
echo
echo "== training: off for 20 steps, then trunk=full, then everything full with a chunked head"
"$train" --remat-schedule "0:off,20:trunk=full,40:full;head=chunked" "$dir/job.json"
echo
echo "== checkpoint (Hugging Face GPT-2 layout; no recompute setting inside):"
ls -l "$dir/ckpt/$(cat "$dir/ckpt/latest")"
echo
echo "Load it in Python with: GPT2LMHeadModel.from_pretrained('$dir/ckpt/$(cat "$dir/ckpt/latest")')"
echo "or continue from it with \"model\": {\"init_from\": \"$dir/ckpt/$(cat "$dir/ckpt/latest")\"}"
