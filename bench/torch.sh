#!/bin/sh
# bench/torch.sh - remat against a tuned PyTorch on the same shapes, interleaved in one run.
#
#   sh bench/torch.sh BINDIR [rounds] [--install]
#
# Two shapes: gpt2-small at batch 4 x 256, and L4 C256 NH4 V50257 at batch 8 x 256, where
# the lm_head is about 78 % of the FLOPs. Two threads each.
#
# PyTorch (Debian's python3-torch; --install installs it with apt-get when missing, nothing
# else ever does) runs as a user who cares about speed would run it: thread counts fixed
# before import, OPENBLAS_CORETYPE set to the kernel remat-train picks for this processor
# (both sides on one kernel; OpenBLAS's own pick is its Prescott fallback on processors it
# does not know), OMP_WAIT_POLICY=PASSIVE, jemalloc preloaded when libjemalloc2 is installed
# with a MALLOC_CONF that keeps its pages, torch.set_flush_denormal(True) (without it a step
# that meets denormal numbers takes three times as long); float32 and bf16 autocast, each
# without checkpointing and with every block checkpointed (bench/torch_gpt2.py). The tuning
# is checked, not assumed: PyTorch's largest product must reach 85 % of bench-sgemm's
# ceiling measured in the same run, or the table says FAIL above it. remat runs its policies off, selective and
# full in float32 (one remat-train, --remat-schedule; the first step after each switch is
# dropped), and in bf16 (off, selective, full; where remat-train --version says it can).
# Each round runs one PyTorch process and then one remat process per shape, so a
# change in the machine's load falls on both; the table has the medians of every timed step
# of every round, and the ratios of those medians. "theory" is the cost of one more forward
# of every block: what `full` should add (eng_plan's FLOP count, attention included).
set -eu
bin=$1
rounds=${2:-3}
install=${3:-}
steps=${STEPS:-4}   # timed steps per PyTorch mode and round (after two warm-ups)
seg=${SEG:-3}       # remat steps per policy and round (the first dropped)
threads=2
py=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
if ! $py -c 'import torch' 2>/dev/null; then
	if [ "$install" != "--install" ]; then
		echo "bench/torch.sh: python3-torch is missing; run 'make bench-torch INSTALL=1' to install it" >&2
		exit 1
	fi
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch libjemalloc2 >/dev/null
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/remat-torch.XXXXXX")
trap 'rm -rf "$dir"' EXIT

# PyTorch's tuning, as its CPU tuning guide has it: the thread counts fixed before torch is
# imported (one OpenMP pool, the BLAS's the same size), remat-train's OpenBLAS kernel (both
# sides on the same one), passive waits, jemalloc only with a MALLOC_CONF that keeps its
# pages (preloaded bare, jemalloc hands pages back on every step and gpt2-small's step took
# 32 s instead of 7 here), flush-denormal (torch_gpt2.py).
core=$("$bin/remat-train" --version | sed -n 's/.*; kernel \([A-Za-z0-9]*\).*/\1/p' | head -1)
jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
[ -e "$jemalloc" ] || jemalloc=
keep_pages=oversize_threshold:0,dirty_decay_ms:-1,muzzy_decay_ms:-1
torch_env() {
	env ${core:+OPENBLAS_CORETYPE=$core} OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$threads \
		OPENBLAS_NUM_THREADS=$threads MKL_NUM_THREADS=$threads \
		${jemalloc:+LD_PRELOAD=$jemalloc MALLOC_CONF=$keep_pages} "$@"
}
echo "== PyTorch $($py -c 'import torch; print(torch.__version__)'), tuned: OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=$threads before import, OPENBLAS_CORETYPE=${core:-unset} (remat's kernel too), OMP_WAIT_POLICY=PASSIVE, jemalloc ${jemalloc:+with MALLOC_CONF=$keep_pages}${jemalloc:+ (}${jemalloc:-not installed: apt-get install libjemalloc2}${jemalloc:+)}, flush_denormal"
echo "== remat: $("$bin/remat-train" --version | sed -n 's/^backend cpu: //p')"
bf16_line=$("$bin/remat-train" --version | sed -n 's/^precision bf16 (cpu): //p')
echo "== remat bf16: $bf16_line"
bf16=1
case $bf16_line in "not available"*) bf16= ;; esac

# name,L,C,NH,P,V,batch,seq each (SHAPES overrides: a quick look at a small one)
shapes=${SHAPES:-"gpt2-small,12,768,12,1024,50257,4,256 L4-C256,4,256,4,1024,50257,8,256"}

remat_round() { # name L C NH P V B T out precision: one remat-train, off / selective / full
	cat > "$dir/job.json" <<JOB
{"name": "bench-torch", "model": {"n_layer": $2, "n_embd": $3, "n_head": $4,
 "n_positions": $5, "vocab_size": $6},
 "data": {"train": "/usr/share/common-licenses/GPL-3", "format": "bytes"},
 "batch": $7, "seq_len": $8, "steps": $((3 * seg)), "threads": $threads,
 "schedule": "constant", "precision": "${10}"}
JOB
	"$bin/remat-train" --json --remat-schedule "0:off,$seg:selective,$((2 * seg)):full" \
		"$dir/job.json" > "$dir/remat.out"
	awk -v seg="$seg" -v name="$1" -v prec="${10}" '/"step":/ { s = $0; sub(/.*"step":/, "", s); s = int(s) - 1
		if (s % seg == 0) next
		p = int(s / seg); pol = p == 0 ? "off" : p == 1 ? "selective" : "full"
		ms = $0; sub(/.*"step_ms":/, "", ms); sub(/[,}].*/, "", ms)
		act = $0; sub(/.*"activation_bytes":/, "", act); sub(/[,}].*/, "", act)
		rc = $0; sub(/.*"recompute_ms":/, "", rc); sub(/[,}].*/, "", rc)
		printf "{\"shape\":\"%s\",\"engine\":\"remat\",\"precision\":\"%s\",\"mode\":\"%s\",\"step_ms\":[%s],\"act\":[%s],\"rc\":[%s]}\n", name, prec, pol, ms, act, rc }' \
		"$dir/remat.out" >> "$9"
}

# The BLAS ceiling of each shape's products, measured in this run (bench-sgemm, remat's
# kernel): the tuning check holds PyTorch's largest product against it
for sh in $shapes; do
	IFS=, read -r name L C NH P V B T <<SHAPE
$sh
SHAPE
	"$bin/bench-sgemm" "$L,$C,$NH,$P,$V" "$B" "$T" $threads | tail -1 |
		sed "s/^{/{\"shape\":\"$name\",\"engine\":\"sgemm\",/" >> "$dir/rows.jsonl"
done

r=1
while [ $r -le "$rounds" ]; do
	for sh in $shapes; do
		IFS=, read -r name L C NH P V B T <<EOF
$sh
EOF
		saved=
		[ $r -eq 1 ] && saved=--saved
		echo "round $r/$rounds: $name, PyTorch" >&2
		torch_env $py "$here/torch_gpt2.py" "$L,$C,$NH,$P,$V" "$B" "$T" $threads "$steps" \
			--flush-denormal $saved |
			sed "s/^{/{\"shape\":\"$name\",\"engine\":\"torch\",/" >> "$dir/rows.jsonl"
		echo "round $r/$rounds: $name, remat" >&2
		remat_round "$name" "$L" "$C" "$NH" "$P" "$V" "$B" "$T" "$dir/rows.jsonl" fp32
		if [ -n "$bf16" ]; then
			echo "round $r/$rounds: $name, remat bf16" >&2
			remat_round "$name" "$L" "$C" "$NH" "$P" "$V" "$B" "$T" "$dir/rows.jsonl" bf16
		fi
	done
	r=$((r + 1))
done

$py - "$dir/rows.jsonl" "$shapes" "${JSON_OUT:-}" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
shapes = [s.split(",") for s in sys.argv[2].split()]
out = {"shapes": []}
info = next((r for r in rows if "torch" in r), {})
print("PyTorch %s: BLAS %s, oneDNN (mkldnn) %s" % (info.get("torch"), info.get("blas"),
      "yes" if info.get("mkldnn") else "no"))
for name in [s[0] for s in shapes]:
    ceil = next((r["ceiling_gflops"] for r in rows if r.get("engine") == "sgemm" and
                 r["shape"] == name), None)
    lp = [r["largest_product"] for r in rows if r.get("engine") == "torch" and
          r["shape"] == name and "largest_product" in r]
    if not ceil or not lp:
        continue
    g = statistics.median(x["gflops_fp32"] for x in lp)
    gb = statistics.median(x["gflops_bf16"] for x in lp)
    ok = g >= 0.85 * ceil
    print("%s PyTorch tuned (%s): its largest product (%d x %d x %d) %.0f GFLOP/s fp32 = %.0f %%"
          " of bench-sgemm's ceiling %.0f GFLOP/s in this run (goal >= 85 %%); bf16 autocast "
          "%.0f GFLOP/s" % ("PASS" if ok else "FAIL", name, lp[0]["M"], lp[0]["N"], lp[0]["K"],
                            g, 100 * g / ceil, ceil, gb))
    out.setdefault("tuning", {})[name] = {"torch_largest_gflops": g,
                                          "torch_largest_gflops_bf16": gb,
                                          "sgemm_ceiling_gflops": ceil, "ok": ok}

def med(engine, shape, precision, mode, key="step_ms"):
    t = [x for r in rows if r.get("engine") == engine and r["shape"] == shape and
         r.get("precision") == precision and r.get("mode") == mode for x in r.get(key, [])]
    return (statistics.median(t), len(t)) if t else (None, 0)

def theory(L, C, NH, V, B, T):
    """1 + one more forward of every block / the step's FLOPs (eng_plan's count: 2 per
    multiply-add, backward twice the forward)"""
    N = B * T
    block = 2 * N * 12 * C * C + 4 * B * T * T * C
    step = 3 * (L * block + 2 * N * C * V)
    return 1 + L * block / step

for name, L, C, NH, P, V, B, T in shapes:
    L, C, NH, V, B, T = int(L), int(C), int(NH), int(V), int(B), int(T)
    tok = B * T
    r_off, n1 = med("remat", name, "fp32", "off")
    r_sel, _ = med("remat", name, "fp32", "selective")
    r_full, _ = med("remat", name, "fp32", "full")
    t_off, n2 = med("torch", name, "fp32", "off")
    t_ck, _ = med("torch", name, "fp32", "checkpoint")
    b_off, _ = med("torch", name, "bf16", "off")
    b_ck, _ = med("torch", name, "bf16", "checkpoint")
    th = theory(L, C, NH, V, B, T)
    print("\n%s (L%d C%d NH%d V%d), batch %d x %d, %d threads: medians of %d remat and %d "
          "PyTorch steps a mode" % (name, L, C, NH, V, B, T, 2, n1, n2))
    print("%-34s %10s %10s %8s" % ("", "remat ms", "PyTorch ms", "remat x"))
    def line(what, r, t):
        ratio = "%.2f" % (t / r) if r and t else "-"
        print("%-34s %10s %10s %8s" % (what, "%.0f" % r if r else "-", "%.0f" % t if t else "-",
                                        ratio))
    line("fp32, no checkpointing", r_off, t_off)
    line("fp32, every block recomputed", r_full, t_ck)
    line("fp32, selective (remat only)", r_sel, None)
    rb_off, _ = med("remat", name, "bf16", "off")
    rb_full, _ = med("remat", name, "bf16", "full")
    line("bf16, no checkpointing", rb_off, b_off)
    line("bf16, every block recomputed", rb_full, b_ck)
    print("remat: full x%.3f of off, selective x%.3f; PyTorch: checkpoint x%.3f of off; "
          "theory x%.3f" % (r_full / r_off, r_sel / r_off, t_ck / t_off, th))
    # what full adds, measured inside its steps (the load of a shared machine moves whole
    # steps by +-10 %): its recompute against off's step, and the rest of its step
    rc, _ = med("remat", name, "fp32", "full", "rc")
    if rc is not None:
        rest = [s - c for r in rows if r.get("engine") == "remat" and r["shape"] == name and
                r.get("precision") == "fp32" and r.get("mode") == "full"
                for s, c in zip(r["step_ms"], r.get("rc", []))]
        print("remat full, inside its steps: the recompute adds x%.3f of off's step "
              "(theory x%.3f); the rest of the step x%.3f of off's" %
              (1 + rc / r_off, th, statistics.median(rest) / r_off))
    print("bf16 against fp32, tokens/s: PyTorch x%.2f, remat %s" % (t_off / b_off,
          "x%.2f" % (r_off / rb_off) if rb_off else "- (no bf16 here)"))
    acts = {p: statistics.median([x for r in rows if r.get("engine") == "remat" and
                                  r["shape"] == name and r.get("precision") == p and
                                  r.get("mode") == "off" for x in r.get("act", [])] or [0])
            for p in ("fp32", "bf16")}
    if acts["bf16"]:
        print("remat activations without checkpointing: fp32 %.1f MiB, bf16 %.1f MiB (x%.2f)"
              % (acts["fp32"] / 1048576, acts["bf16"] / 1048576, acts["bf16"] / acts["fp32"]))
    saved = {r["mode"]: r["saved_mib"] for r in rows
             if r.get("engine") == "torch" and r["shape"] == name and "saved_mib" in r}
    out["shapes"].append({"shape": name, "L": L, "C": C, "NH": NH, "V": V, "batch": B,
                          "seq_len": T, "remat_ms": {"off": r_off, "selective": r_sel,
                          "full": r_full, "bf16_off": rb_off, "bf16_full": rb_full},
                          "torch_ms": {"fp32": t_off, "fp32_checkpoint": t_ck,
                          "bf16": b_off, "bf16_checkpoint": b_ck},
                          "torch_saved_mib": saved, "theory_full": th,
                          "full_recompute_ms": rc,
                          "ratio_fp32": t_off / r_off, "ratio_full": t_ck / r_full})
if sys.argv[3]:
    out["torch"] = info
    json.dump(out, open(sys.argv[3], "w"), indent=1)
    print("\nJSON: %s" % sys.argv[3])
PY
