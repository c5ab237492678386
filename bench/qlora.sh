#!/bin/sh
# bench/qlora.sh - LoRA over a 4-bit base (model.quantize, QLoRA) against LoRA over the same
# base in float32, in one run:
#
#   sh bench/qlora.sh BINDIR [json-out]
#
# 1. SmolLM-135M's shape (preset smollm-135m, its weights drawn from the seed and saved once
#    as the base), LoRA r 16 on every linear weight, batch 4 x 256, policy full: per base
#    (float32, nf4, nf4 double-quantized, nf4 computing in bf16) the bytes a quantized weight costs (remat-train
#    --check's model.quantized), the process's peak resident memory over the run, and the
#    median step time and tokens/s over steps 2..STEPS. Goals: at most 0.6 bytes a quantized
#    weight; a step at most 1.25x the float32 base's.
# 2. 300 LoRA steps on two small Llamas (llama-tiny, and mini's shape as a Llama: 6 layers of
#    384, GQA 6/2, byte-level), each over a base trained here first (300 steps on the GPL),
#    validated every 50 steps on the Apache licence: the 4-bit base's validation loss against
#    the float32 base's at every evaluation, computing in float32 and in bf16. Goal: within
#    2 %.
# THREADS (2) threads; STEPS (6) steps in part 1.
set -eu
bin=$1
json_out=${2:-}
threads=${THREADS:-2}
steps=${STEPS:-6}
dir=$(mktemp -d "${TMPDIR:-/tmp}/remat-qlora.XXXXXX")
trap 'rm -rf "$dir"' EXIT
gpl=/usr/share/common-licenses/GPL-3
apache=/usr/share/common-licenses/Apache-2.0

# base NAME MODEL STEPS FREEZE: a model trained STEPS steps on the GPL, saved as $dir/NAME
base() {
	cat > "$dir/$1-base.json" <<JOB
{"name": "base", "model": {$2}, "data": {"train": "$gpl", "format": "bytes"},
 "batch": 4, "seq_len": 64, "steps": $3, "threads": $threads, "seed": 5,
 "optim": {"lr": 1e-3}, $4 "save": {"dir": "$dir/$1-save", "every": $3}}
JOB
	"$bin/remat-train" "$dir/$1-base.json" > /dev/null
	ln -s "$dir/$1-save/$(cat "$dir/$1-save/latest")" "$dir/$1"
}

# lora NAME BASE QUANT STEPS B T R EVAL: a LoRA job over $dir/BASE, its --json lines into
# $dir/NAME.out, its --check into $dir/NAME.check
lora() {
	q=""
	[ -n "$3" ] && q=", \"quantize\": $3"
	ev=""
	[ "$8" -gt 0 ] && ev="\"eval\": {\"every\": $8, \"batches\": 8},"
	cat > "$dir/$1.json" <<JOB
{"name": "$1", "model": {"init_from": "$dir/$2"$q},
 "data": {"train": "$gpl", "val": "$apache", "format": "bytes"}, $ev
 "batch": $5, "seq_len": $6, "steps": $4, "threads": $threads, "seed": 7,
 "optim": {"lr": 2e-3}, "remat": {"default": "full"},
 "lora": {"r": $7, "alpha": $((2 * $7)), "targets": ["q_proj", "k_proj", "v_proj", "o_proj",
          "gate_proj", "up_proj", "down_proj"]}}
JOB
	"$bin/remat-train" --check "$dir/$1.json" > "$dir/$1.check"
	"$bin/remat-train" --json "$dir/$1.json" > "$dir/$1.out"
}

nf4='{"type": "nf4"}'
dq='{"type": "nf4", "double_quant": true}'
bf='{"type": "nf4", "compute": "bf16"}'
base smollm '"preset": "smollm-135m", "vocab_size": 49152' 1 '"train": {"freeze": ["embed", "blocks"]},'
for way in fp32 nf4 dq bf; do
	q=""
	[ $way = nf4 ] && q=$nf4
	[ $way = dq ] && q=$dq
	[ $way = bf ] && q=$bf
	lora "smollm-$way" smollm "$q" "$steps" 4 256 16 0
done
tiny='"preset": "llama-tiny"'
mini='"arch": "llama", "n_layer": 6, "n_embd": 384, "n_head": 6, "n_kv_head": 2,
 "intermediate_size": 1024, "n_positions": 256, "vocab_size": 256'
base tiny "$tiny" 300 ""
base mini "$mini" 300 ""
for m in tiny mini; do
	lora "$m-fp32" $m "" 300 4 64 8 50
	lora "$m-nf4" $m "$nf4" 300 4 64 8 50
	lora "$m-bf" $m "$bf" 300 4 64 8 50
done
echo "bench-qlora: $threads threads; $("$bin/remat-train" --version | sed -n 2p | cut -c1-80)"
/usr/bin/python3 - "$dir" "$json_out" <<'PY'
import json, statistics, sys
d, out = sys.argv[1], sys.argv[2]
def lines(name):
    return [json.loads(l) for l in open("%s/%s.out" % (d, name)) if l.startswith("{")]
res = {"smollm": {}, "curves": {}}
print("SmolLM-135M, LoRA r16 on every linear, batch 4 x 256, policy full")
print("%-22s %14s %12s %10s %10s %8s" % ("base", "bytes/4-bit w", "process peak",
      "step ms", "tok/s", "x fp32"))
for way in ("fp32", "nf4", "dq", "bf"):
    rows = [r for r in lines("smollm-" + way) if "step_ms" in r]
    ms = statistics.median(r["step_ms"] for r in rows[1:])
    tps = statistics.median(r["tokens_per_s"] for r in rows[1:])
    peak = max(r["rss_peak"] for r in rows)
    chk = json.load(open("%s/smollm-%s.check" % (d, way)))
    q = chk["model"].get("quantized")
    bpw = q["bytes"] / q["weights"] if q else 4.0
    res["smollm"][way] = {"step_ms": ms, "tokens_per_s": tps, "rss_peak": peak,
                          "bytes_per_quantized_weight": bpw,
                          "params_bytes": chk["fixed_bytes"]["params"]}
    base = res["smollm"]["fp32"]["step_ms"]
    name = {"fp32": "float32", "nf4": "nf4", "dq": "nf4, double-quantized",
            "bf": "nf4, compute bf16"}[way]
    print("%-22s %14.3f %9.0f MiB %10.0f %10.1f %8.2f" % (name, bpw, peak / 2**20, ms, tps,
          ms / base))
for way in ("nf4", "dq", "bf"):
    s = res["smollm"][way]
    print("PASS" if s["bytes_per_quantized_weight"] <= 0.6 else "FAIL",
          "%s: %.3f bytes a quantized weight (goal <= 0.6)" % (way, s["bytes_per_quantized_weight"]))
    r = s["step_ms"] / res["smollm"]["fp32"]["step_ms"]
    print("PASS" if r <= 1.25 else "FAIL", "%s: step %.2fx the float32 base's (goal <= 1.25)"
          % (way, r))
for m in ("tiny", "mini"):
    f = {r["step"]: r["val_loss"] for r in lines(m + "-fp32") if "val_loss" in r}
    q = {r["step"]: r["val_loss"] for r in lines(m + "-nf4") if "val_loss" in r}
    b = {r["step"]: r["val_loss"] for r in lines(m + "-bf") if "val_loss" in r}
    print("\n%s Llama, LoRA r8 over its trained base, 300 steps: validation loss" % m)
    print("%6s %10s %10s %8s %12s %8s" % ("step", "float32", "nf4", "gap %", "nf4, bf16",
          "gap %"))
    worst = [0.0, 0.0]
    for s in sorted(f):
        g = [abs(x[s] - f[s]) / f[s] * 100 for x in (q, b)]
        worst = [max(w, x) for w, x in zip(worst, g)]
        print("%6d %10.5f %10.5f %8.3f %12.5f %8.3f" % (s, f[s], q[s], g[0], b[s], g[1]))
    res["curves"][m] = {"float32": f, "nf4": q, "nf4_bf16": b, "largest_gap_pct": worst}
    for name, w in zip(("nf4", "nf4, compute bf16"), worst):
        print("PASS" if w <= 2.0 else "FAIL", "%s, %s: largest gap %.3f %% (goal: within 2 %%)"
              % (m, name, w))
if out:
    json.dump(res, open(out, "w"))
PY
