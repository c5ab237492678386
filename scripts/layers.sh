#!/bin/sh
# scripts/layers.sh - draws docs/layers.svg, the picture of remat's floors, from the include
# graph itself: one box per folder (with its files and lines), one arrow per pair of
# folders where a file of one includes a header of the other (labelled with how many
# includes). Needs Graphviz (apt-get install graphviz); the picture is kept in docs/, so
# building and testing never need it. tests/layout.sh checks the rules the picture shows.
#
#   sh scripts/layers.sh [OUT]     OUT: default docs/layers.svg
set -eu
cd "$(dirname "$0")/.."
out=${1:-docs/layers.svg}
command -v dot >/dev/null 2>&1 || {
	echo "layers: Graphviz's dot is not installed (apt-get install graphviz)" >&2
	exit 1
}
folders="proto base serve kernels kernels/cpu kernels/cuda engine/core engine/model
	engine/model/cuda engine/model/dp engine/io engine/run worker daemon client"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# header name -> folder
for d in $folders; do
	for h in "$d"/*.h "$d"/*.cuh; do
		[ -f "$h" ] && echo "$(basename "$h") $d"
	done
done >"$tmp/owner"

# "from to" for every include of ours between two folders
for d in $folders; do
	for f in "$d"/*.c "$d"/*.h "$d"/*.cu "$d"/*.cuh; do
		[ -f "$f" ] || continue
		sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f" | while read -r h; do
			echo "$d $h"
		done
	done
done | awk 'NR == FNR { own[$1] = $2; next }
	{ to = own[$2]; if (to != "" && to != $1) print $1, to }' "$tmp/owner" - |
	sort | uniq -c >"$tmp/edges"

{
	echo 'digraph layers {'
	echo '  rankdir=BT; newrank=true; node [shape=box, style="rounded,filled", fontname="sans",'
	echo '    fontsize=11, fillcolor="#eef3fb"]; edge [color="#667799", fontname="sans",'
	echo '    fontsize=9, arrowsize=0.6];'
	echo '  label="remat: who includes whom (arrows point at what a floor stands on)";'
	echo '  labelloc=t; fontname="sans";'
	for d in $folders; do
		n=$(ls "$d" | grep -Ec '\.(c|h|cu|cuh)$')
		l=$(cat "$d"/*.c "$d"/*.h "$d"/*.cu "$d"/*.cuh 2>/dev/null | wc -l)
		echo "  \"$d\" [label=\"$d/\\n$n files, $l lines\"];"
	done
	# the floors, bottom up (tests/layout.sh), as the picture's rows
	echo '  { rank=same; "proto"; "kernels"; }'
	echo '  { rank=same; "base"; "kernels/cpu"; "kernels/cuda"; }'
	echo '  { rank=same; "serve"; "engine/core"; }'
	echo '  { rank=same; "engine/model"; "engine/model/cuda"; "engine/model/dp"; }'
	echo '  { rank=same; "worker"; "daemon"; "client"; }'
	awk '{ printf "  \"%s\" -> \"%s\" [label=\"%d\"];\n", $2, $3, $1 }' "$tmp/edges"
	echo '}'
} >"$tmp/layers.dot"
dot -Tsvg "$tmp/layers.dot" >"$out"
echo "layers: $out: $(echo $folders | wc -w) folders, $(wc -l <"$tmp/edges") arrows"
