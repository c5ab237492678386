#!/bin/sh
# bench/blas.sh - the matmul libraries on the model's products, one table (`make bench-blas`).
#
#   sh bench/blas.sh BINDIR [preset] [batch] [seq_len] [--install]
#
# bench-sgemm's FLOP-weighted ceiling over one step's products, and its slowest and fastest
# product, for: OpenBLAS with the kernel it detects (no OPENBLAS_CORETYPE), with the kernel
# remat would ask for if detection fell back (kn_blas_better_kernel), forced to Haswell
# (AVX2) and to Prescott (the generic SSE3 fallback of processors it does not know); BLIS
# (Debian's libblis4-openmp) with the configuration it detects and forced to skx and zen3,
# and oneDNN's dnnl_sgemm (libdnnl2), both through dlopen; oneDNN's matmul primitive in
# float32 with plain layouts for every product, linked; and last what the engine runs: each
# product by its route (eng_model_products: OpenBLAS, the head's logits and dlnf by oneDNN's
# matmul, dlnf with wte packed once a step, that packing counted).
# bench-sgemm takes remat-train's kernel choice (kn_fix_runtime); the "detected" row keeps
# OpenBLAS's own (REMAT_BLAS_REEXEC=1: the choice counts as made).
# --install installs the two with apt-get when missing; nothing else ever does.
set -eu
bin=$1
preset=${2:-gpt2-small}
B=${3:-4}
T=${4:-256}
install=${5:-}
threads=${THREADS:-2}
blis=/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4
if [ "$install" = "--install" ]; then
	need=""
	[ -e "$blis" ] || need="$need libblis4-openmp"
	ldconfig -p | grep -q 'libdnnl.so.2 ' || need="$need libdnnl2"
	if [ -n "$need" ]; then
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
	fi
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/remat-blas.XXXXXX")
trap 'rm -rf "$dir"' EXIT

run() { # label, then the command
	label=$1
	shift
	if "$@" > "$dir/out.txt" 2> "$dir/err.txt"; then
		awk -v l="$label" 'NR > 2 && $NF ~ /^[0-9.]+$/ && !/ceiling/ { v = $NF + 0
			if (min == "" || v < min) min = v; if (v > max) max = v }
			/^ceiling/ { c = $(NF - 1) }
			END { printf "%-40s %9.1f %9.1f %9.1f\n", l, c, min, max }' "$dir/out.txt"
		tail -1 "$dir/out.txt" >> "$dir/all.json"
	else
		printf '%-40s %s\n' "$label" "unavailable: $(head -1 "$dir/err.txt")"
	fi
}

sg="$bin/bench-sgemm $preset $B $T $threads"
# OpenBLAS's own pick: what remat-train says it replaced, else the kernel it kept
ver=$(env -u OPENBLAS_CORETYPE "$bin/remat-train" --version)
detected=$(echo "$ver" | sed -n 's/.*OpenBLAS had picked \([A-Za-z0-9_]*\).*/\1/p')
[ -n "$detected" ] || detected=$(echo "$ver" | sed -n 's/.*; kernel \([A-Za-z0-9_]*\).*/\1/p')
echo "$preset, batch $B x $T, $threads threads: GFLOP/s over one step's matmul products"
printf '%-40s %9s %9s %9s\n' library ceiling slowest fastest
run "OpenBLAS, detected kernel ($detected)" env -u OPENBLAS_CORETYPE REMAT_BLAS_REEXEC=1 $sg --lib openblas
for k in SkylakeX Haswell Prescott; do
	[ "$k" = "$detected" ] || run "OpenBLAS, OPENBLAS_CORETYPE=$k" env OPENBLAS_CORETYPE=$k $sg --lib openblas
done
run "BLIS 0.9 (OpenMP), detected config" env -u OPENBLAS_CORETYPE -u BLIS_ARCH_TYPE $sg --lib blis
for a in skx zen3; do
	run "BLIS 0.9 (OpenMP), BLIS_ARCH_TYPE=$a" env -u OPENBLAS_CORETYPE BLIS_ARCH_TYPE=$a $sg --lib blis
done
run "oneDNN dnnl_sgemm" env -u OPENBLAS_CORETYPE $sg --lib dnnl
run "oneDNN matmul primitive, plain layouts" env -u OPENBLAS_CORETYPE $sg --lib dnnl-matmul
run "remat's routes (OpenBLAS + oneDNN head)" env -u OPENBLAS_CORETYPE $sg
echo "per-product figures: bench-sgemm $preset $B $T $threads [--lib openblas|blis|dnnl|dnnl-matmul]"
