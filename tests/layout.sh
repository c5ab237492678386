#!/bin/sh
# tests/layout.sh - the folders include what docs/architecture.md says they may, and no more:
#   proto/    proto/ only (no I/O, nothing of the engine)
#   serve/    proto/, serve/, eng_cred.h
#   kernels/  kernels/ only
#   engine/   nothing of serve/, worker/, daemon/, client/
#   daemon/   proto/, serve/, daemon/, and of the engine only libremat-core.a's headers
#   client/   proto/, client/
# (headers named as "x.h"; system headers are free). Prints one line when all is well;
# otherwise each include out of place, and exits 1. Run by make test.
set -u
cd "$(dirname "$0")/.." || exit 1
# libremat-core.a's engine headers (the Makefile's CORE_SRC)
core='eng_acts.h|eng_config.h|eng_cred.h|eng_err.h|eng_plan.h|eng_plan_json.h|eng_policy.h|eng_spec.h|eng_fs.h|eng_mem.h'

check() { # folder, allowed (an extended regex of header names)
	for f in "$1"/*.c "$1"/*.h "$1"/*.cu "$1"/*.cuh; do
		[ -f "$f" ] || continue
		grep -n '^#include "' "$f" | sed 's/^\([0-9]*\):#include "\([^"]*\)".*/\1 \2/' |
			while read -r line h; do
				echo "$h" | grep -Eqx "$2" || echo "layout: $f:$line includes $h"
			done
	done
}

out=$(
	check proto 'proto[a-z0-9_]*\.h'
	check serve 'proto\.h|sv_[a-z0-9_]+\.h|eng_cred\.h'
	check kernels/cpu 'kn[a-z0-9_]*\.h'
	check kernels/cuda 'k[cn][a-z0-9_]*\.(h|cuh)'
	for d in engine engine/io engine/cuda engine/dp; do
		check "$d" 'eng_[a-z0-9_]+\.h|kn\.h|kc\.h|proto\.h'
	done
	check daemon "srv[a-z0-9_]*\.h|proto\.h|sv_[a-z0-9_]+\.h|$core"
	check client 'cli[a-z0-9_]*\.h|proto\.h'
)
if [ -n "$out" ]; then
	printf '%s\n' "$out" >&2
	echo "layout: $(printf '%s\n' "$out" | wc -l) includes out of place" >&2
	exit 1
fi
checks=$(ls proto serve kernels/cpu kernels/cuda engine engine/io engine/cuda engine/dp daemon client |
	grep -Ec '\.(c|h|cu|cuh)$')
echo "layout: $checks files of proto/, serve/, kernels/, engine/, daemon/, client/ include only what their folder may"
