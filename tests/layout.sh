#!/bin/sh
# tests/layout.sh - every folder includes only what docs/architecture.md says it may: its
# own floor and the floors below, never one above. Bottom up:
#
#   proto/         the protocol's vocabulary: proto/ only (no I/O, nothing of the engine)
#   base/          errors, credentials, safe file access: + proto/
#   serve/         the control servers' connection layer: + base/
#   kernels/       the maths on arrays (cpu/, cuda/): kernels/ only
#   engine/core/   spec, config, policy, tensors, activations, planner, memory: + base/
#                  (with engine/core/, serve/ and base/: libremat-core.a)
#   engine/model/  the models and their backends (cuda/, dp/): + engine/core/, kernels/
#   engine/io/     file formats, checkpoints, data: + engine/model/
#   engine/run/    the trainer, the controller, costs, sampling: + engine/io/
#   worker/        remat-train: everything above but daemon/ and client/
#   daemon/        rematd: proto/, base/, serve/, engine/core/ (libremat-core.a) and itself
#   client/        rematctl: proto/, base/ (errors, safe file access) and itself
#
# Headers are named "x.h" by file name alone (system headers are free). Prints one line
# when all is well; otherwise each include out of place, and exits 1.
#
#   sh tests/layout.sh [ROOT]     ROOT: the tree to check (default: this one)
#   sh tests/layout.sh --planted  a copy of this tree with an upward include planted in
#                                 engine/core (the trainer's header): must be refused
#
# Run by make test both ways, so the check is shown able to fail.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = "--planted" ]; then
	tmp=$(mktemp -d) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	(cd "$here" && cp -r proto base serve kernels engine worker daemon client "$tmp/")
	printf '#include "eng_train.h"\n' >>"$tmp/engine/core/eng_spec.c"
	if out=$(sh "$here/tests/layout.sh" "$tmp" 2>&1); then
		echo "layout: a planted upward include passed: the check cannot fail" >&2
		exit 1
	fi
	case $out in
	*"engine/core/eng_spec.c:"*"includes eng_train.h"*) ;;
	*)
		printf 'layout: the planted include was not the one refused:\n%s\n' "$out" >&2
		exit 1
		;;
	esac
	echo "layout: a planted upward include (engine/core/eng_spec.c: eng_train.h) is refused"
	exit 0
fi
root=${1:-$here}
cd "$root" || exit 1

# the header names of folders, as an extended regex alternation
hdrs() {
	for d in "$@"; do
		ls "$d" 2>/dev/null | grep -E '\.(h|cuh)$'
	done | sed 's/\./\\./g' | paste -sd'|' -
}

check() { # folder, allowed (an extended regex of header names)
	for f in "$1"/*.c "$1"/*.h "$1"/*.cu "$1"/*.cuh; do
		[ -f "$f" ] || continue
		grep -n '^#include "' "$f" | sed 's/^\([0-9]*\):#include "\([^"]*\)".*/\1 \2/' |
			while read -r line h; do
				echo "$h" | grep -Eqx "$2" || echo "layout: $f:$line includes $h"
			done
	done
}

proto=$(hdrs proto)
base="$proto|$(hdrs base)"
serve="$base|$(hdrs serve)"
kernels=$(hdrs kernels kernels/cpu kernels/cuda)
core="$base|$(hdrs engine/core)"
model="$core|$kernels|$(hdrs engine/model engine/model/cuda engine/model/dp)"
io="$model|$(hdrs engine/io)"
run="$io|$(hdrs engine/run)"

out=$(
	check proto "$proto"
	check base "$base"
	check serve "$serve"
	for d in kernels kernels/cpu kernels/cuda; do
		check "$d" "$kernels"
	done
	check engine/core "$core"
	for d in engine/model engine/model/cuda engine/model/dp; do
		check "$d" "$model"
	done
	check engine/io "$io"
	check engine/run "$run"
	check worker "$run|$serve|$(hdrs worker)"
	check daemon "$serve|$core|$(hdrs daemon)"
	check client "$base|$(hdrs client)"
)
if [ -n "$out" ]; then
	printf '%s\n' "$out" >&2
	echo "layout: $(printf '%s\n' "$out" | wc -l) includes out of place" >&2
	exit 1
fi
folders="proto base serve kernels kernels/cpu kernels/cuda engine/core engine/model
	engine/model/cuda engine/model/dp engine/io engine/run worker daemon client"
checks=$(for d in $folders; do ls "$d"; done | grep -Ec '\.(c|h|cu|cuh)$')
echo "layout: $checks files in 11 floors include nothing from a floor above"
