#!/bin/sh
# bench/torch.sh - remat against PyTorch on the same shape, in the same run.
#
#   sh bench/torch.sh BINDIR [preset] [batch] [seq_len] [--install]
#
# Runs bench/torch_gpt2.py (Debian's python3-torch; --install installs it with apt-get when
# it is missing, nothing else ever does) and bench/steps.sh on the same shape, then prints
# remat/PyTorch ratios of tokens/s and saved activations.
set -eu
bin=$1
preset=${2:-gpt2-small}
B=${3:-4}
T=${4:-256}
install=${5:-}
py=/usr/bin/python3
if ! $py -c 'import torch' 2>/dev/null; then
	if [ "$install" != "--install" ]; then
		echo "bench/torch.sh: python3-torch is missing; run 'make bench-torch INSTALL=1' to install it" >&2
		exit 1
	fi
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/remat-torch.XXXXXX")
trap 'rm -rf "$dir"' EXIT
here=$(dirname "$0")
echo "== PyTorch $($py -c 'import torch; print(torch.__version__)'), $preset, batch $B x $T, 2 threads"
$py "$here/torch_gpt2.py" "$preset" "$B" "$T" 2 7 > "$dir/torch.json"
cat "$dir/torch.json"
echo "== remat"
sh "$here/steps.sh" "$bin" "$preset" "$B" "$T" 3 "$dir/remat.json"
$py - "$dir/torch.json" "$dir/remat.json" <<'PY'
import json, sys
torch = [json.loads(l) for l in open(sys.argv[1])]
remat = json.load(open(sys.argv[2]))["policies"]
t_off = next(t for t in torch if t["mode"] == "off")
t_ck = next(t for t in torch if t["mode"] == "checkpoint")
r = {p["policy"]: p for p in remat}
print("== remat / PyTorch, same run")
print("off:  tokens/s x%.2f, step time vs its own off 1.00 (PyTorch 1.00), saved %.1f vs %.1f MiB"
      % (r["off"]["tokens_per_s"] / t_off["tokens_per_s"], r["off"]["activation_mib"], t_off["saved_mib"]))
print("full: tokens/s x%.2f; overhead vs off x%.2f (PyTorch checkpointing x%.2f); saved %.1f vs %.1f MiB"
      % (r["full"]["tokens_per_s"] / t_ck["tokens_per_s"], r["full"]["vs_off"],
         t_ck["step_ms"] / t_off["step_ms"], r["full"]["activation_mib"], t_ck["saved_mib"]))
fc = r["full;head=chunked"]
print("full + chunked head: saved %.1f MiB = %.0f%% of off (PyTorch checkpointing keeps %.0f%%)"
      % (fc["activation_mib"], 100 * fc["activation_mib"] / r["off"]["activation_mib"],
         100 * t_ck["saved_mib"] / t_off["saved_mib"]))
PY
