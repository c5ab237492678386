#!/bin/sh
# Installs the Debian packages remat builds and tests with, when any is missing.
# Called by the Makefile before every build; does nothing when all are present.
# Not a general installer: Debian 12 (apt) only; as root, or through sudo.
set -eu

# clang and its runtime: the protocol fuzz target (libFuzzer) that make test runs briefly.
# systemd: systemd-analyze, systemd-socket-activate and systemd-sysusers for the unit tests
# (container images of Debian 12 leave it out).
# mandoc and groff-base: tests/man.sh lints the man pages with both.
# zlib1g-dev: the tests read the PNGs rematctl plot writes (inflate).
# libcairo2-dev: rematctl plot draws its PNG and SVG pictures with Cairo.
# libexpat1-dev: the plot tests parse the SVG rematctl writes.
# libssl-dev: OpenSSL's libcrypto hashes checkpoints (SHA-256) in the worker.
# libopenmpi-dev, openmpi-bin: data parallelism ("parallel": {"ranks": N}) and its tests.
# libdnnl-dev: oneDNN's bf16 matmuls for "precision": "bf16" on the CPU.
# libpcre2-dev, libutf8proc-dev: the tokenizer's regexes and Unicode normalization.
# python3: make test runs examples/client.py (the standard library only) against rematd.
pkgs="build-essential pkg-config libuv1-dev libjansson-dev check libopenblas-openmp-dev
      clang libclang-rt-14-dev systemd mandoc groff-base zlib1g-dev libopenmpi-dev
      openmpi-bin libdnnl-dev libcairo2-dev libexpat1-dev libssl-dev libpcre2-dev
      libutf8proc-dev python3"

missing=""
for p in $pkgs; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "deps: installing missing Debian packages:$missing" >&2
if ! command -v apt-get >/dev/null 2>&1; then
	echo "deps: apt-get not found; install these by hand:$missing" >&2
	exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
		echo "deps: not root and no sudo; install these by hand:$missing" >&2
		exit 1
	fi
fi
# On a fresh machine the package lists can be empty: update once, then install.
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
# shellcheck disable=SC2086
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
