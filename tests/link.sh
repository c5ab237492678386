#!/bin/sh
# tests/link.sh - rematd and rematctl compute nothing, so they link nothing of the engine's
# maths: no OpenBLAS, OpenMP, cuDNN or CUDA runtime among the libraries they
# load (ldd), and no symbol of those in them (nm). remat-train, which computes, is held to
# the opposite, so that the check itself is shown able to fail.
# Each library has its one program: only rematctl loads Cairo (its plots), only remat-train
# loads OpenSSL's libcrypto (the checkpoints' SHA-256), PCRE2 and utf8proc (the tokenizer);
# rematd loads none of them. The program
# that has it is checked for it too, so each of these checks is shown able to fail.
#
#   sh tests/link.sh BIN_DIR
#
# Prints one line when all is well; otherwise every problem, and exits 1. Run by make test.
set -u
bin=$1
fails=0
checks=0
banned='libopenblas|libblas|libgomp|libcudnn|libcudart|libcublas'
symbols='cblas_|GOMP_|omp_|cuda[A-Z]|cudnn|openblas'

fail() {
	echo "link: $*" >&2
	fails=$((fails + 1))
}

for p in rematd rematctl; do
	checks=$((checks + 2))
	libs=$(ldd "$bin/$p" 2>&1) || fail "ldd $bin/$p: $libs"
	found=$(printf '%s\n' "$libs" | grep -E "$banned")
	[ -z "$found" ] || fail "$p loads what only a worker needs: $(echo $found)"
	syms=$(nm "$bin/$p" 2>/dev/null | grep -E " [TUuw] ($symbols)" | head -5)
	[ -z "$syms" ] || fail "$p holds symbols of the engine's maths: $(echo $syms)"
done
checks=$((checks + 1))
ldd "$bin/remat-train" 2>/dev/null | grep -q libopenblas ||
	fail "remat-train does not load OpenBLAS: this check could not tell"

# only: library (as ldd names it), the symbols' prefix, the one program that loads it
only() {
	for p in rematd rematctl remat-train; do
		checks=$((checks + 2))
		loads=$(ldd "$bin/$p" 2>/dev/null | grep -c "$1")
		syms=$(nm "$bin/$p" 2>/dev/null | grep -cE " [TUuw] $2")
		if [ "$p" = "$3" ]; then
			[ "$loads" -gt 0 ] || fail "$p does not load $1: this check could not tell"
			[ "$syms" -gt 0 ] || fail "$p calls nothing of $1 ($2*): this check could not tell"
		else
			[ "$loads" -eq 0 ] || fail "$p loads $1, which only $3 may"
			[ "$syms" -eq 0 ] || fail "$p holds symbols of $1 ($2*), which only $3 may"
		fi
	done
}
only libcairo 'cairo_' rematctl
only libcrypto 'EVP_' remat-train
# the tokenizer's (remat-train --encode/--decode): regexes and Unicode normalization
only libpcre2-8 'pcre2_' remat-train
only libutf8proc 'utf8proc_' remat-train

if [ "$fails" -gt 0 ]; then
	echo "link: $fails of $checks checks failed" >&2
	exit 1
fi
echo "link: rematd and rematctl load none of OpenBLAS, OpenMP, cuDNN, the CUDA runtime;" \
	"only rematctl loads Cairo, only remat-train libcrypto, PCRE2 and utf8proc" \
	"($checks checks)"
