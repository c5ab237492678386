#!/bin/sh
# tests/circles.sh - no two source files call each other, directly or round a longer loop:
# every module stands on the ones it calls, and none of those calls back. The calls are
# read from the object files (nm: what each defines, what each leaves undefined), so a
# call through a header's inline function or a macro counts where it is compiled. Loops are
# found by tsort(1). Callbacks through pointers (a table of handlers, an on_event hook) are
# how a lower module calls up, and are not calls here.
#
#   sh tests/circles.sh BUILD_DIR
#
# Prints one line when there is no loop; otherwise the files of each loop, and exits 1.
# Run by make test.
set -u
build=$1
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# the objects of the programs' sources (tests, benches and stale objects left out)
for src in $(ls base/*.c proto/*.c serve/*.c engine/*/*.c engine/*/*/*.c kernels/*/*.c \
	kernels/*/*.cu worker/*.c daemon/*.c client/*.c 2>/dev/null); do
	obj="$build/${src%.*}.o"
	[ -f "$obj" ] || continue
	nm "$obj" 2>/dev/null | awk -v f="${src%.*}" '
		NF == 3 && $2 ~ /^[TDBR]$/ { print "D", $3, f }
		NF == 2 && $1 == "U" { print "U", $2, f }'
done >"$tmp/syms"
files=$(awk '{ print $3 }' "$tmp/syms" | sort -u | wc -l)
[ "$files" -gt 50 ] || { echo "circles: only $files objects in $build: build first" >&2; exit 1; }

# an edge "caller callee" for each symbol one file uses and another defines
awk '$1 == "D" { def[$2] = $3 } $1 == "U" { use[NR] = $2 " " $3 }
	END { for (i in use) { split(use[i], u, " "); d = def[u[1]]
		if (d != "" && d != u[2]) print u[2], d } }' "$tmp/syms" | sort -u >"$tmp/edges"
edges=$(wc -l <"$tmp/edges")

# tsort reports one loop at a time and breaks it; each report names the loop's files
tsort "$tmp/edges" >/dev/null 2>"$tmp/loops"
if grep -q 'loop' "$tmp/loops"; then
	sed -n 's/^tsort: //p' "$tmp/loops" | sed 's/^-: input contains a loop:$/circles: a loop:/;
		s/^[^ ]*: input contains a loop:$/circles: a loop:/' >&2
	echo "circles: $(grep -c 'contains a loop' "$tmp/loops") loops between files" >&2
	exit 1
fi
echo "circles: $files files, $edges calls between them, no loop"
