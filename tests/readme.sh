#!/bin/sh
# tests/readme.sh - README.md says what the repository has, where a script can tell.
#
#   sh tests/readme.sh BIN_DIR
#
# Checks: the step count the README gives an example file (examples/*.json, "N steps" in
# the prose paragraph that names it, "every N steps" aside) is the file's "steps", and it
# gives one; every rematctl
# subcommand in the README's code (fenced blocks and `inline` spans) is one `rematctl
# --help` lists; every --option given to rematd or remat-train there is one its --help
# lists; every file the Layout section names exists (a name in a folder's line is looked
# for under that folder, a name with a slash from the top). Prints one line when all is
# well; otherwise every problem, and exits 1. Run by `make test`.
set -u
bin=$1
cd "$(dirname "$0")/.." || exit 1
readme=README.md
fails=0
checks=0
fail() {
	echo "readme: $*" >&2
	fails=$((fails + 1))
}
[ -f "$readme" ] || { echo "readme: $readme is missing" >&2; exit 1; }

# ---- the example files' step counts ----
# prose paragraphs (blank-line separated, code blocks left out) naming examples/X.json:
# "X.json<TAB>N" per count
counts=$(awk '/^```/ { fenced = !fenced; print ""; next } !fenced' "$readme" | awk 'BEGIN { RS = "" } {
	text = $0
	gsub(/\n/, " ", text)
	while (match(text, /examples\/[a-z0-9_-]+\.json/)) {
		f = substr(text, RSTART, RLENGTH)
		rest = text
		while (match(rest, /[0-9][0-9,]* steps/)) {
			before = substr(rest, 1, RSTART - 1)
			n = substr(rest, RSTART, RLENGTH - 6)
			rest = substr(rest, RSTART + RLENGTH)
			if (before ~ /every $/)
				continue
			gsub(/,/, "", n)
			print f "\t" n
		}
		text = substr(text, index(text, f) + length(f))
	}
}' | sort -u)
for f in examples/*.json; do
	checks=$((checks + 1))
	want=$(sed -n 's/.*"steps": *\([0-9][0-9]*\).*/\1/p' "$f" | head -1)
	[ -n "$want" ] || { fail "$f has no \"steps\""; continue; }
	printf '%s\n' "$counts" | grep -q "^$f	" ||
		fail "README.md names no step count for $f (it has $want steps)"
done
printf '%s\n' "$counts" | while IFS='	' read -r f n; do
	[ -n "$f" ] || continue
	want=$(sed -n 's/.*"steps": *\([0-9][0-9]*\).*/\1/p' "$f" 2>/dev/null | head -1)
	[ "$n" = "$want" ] || echo "README.md calls $f a $n-step job; the file has \"steps\": ${want:-none}"
done >"${TMPDIR:-/tmp}/readme.$$"
while read -r line; do fail "$line"; done <"${TMPDIR:-/tmp}/readme.$$"
rm -f "${TMPDIR:-/tmp}/readme.$$"

# ---- commands and options in the README's code ----
# the code: fenced blocks' lines and `inline` spans, one per line
code=$(awk '/^```/ { fenced = !fenced; next }
	fenced { print; next }
	{ s = $0; while (match(s, /`[^`]+`/)) { print substr(s, RSTART + 1, RLENGTH - 2); s = substr(s, RSTART + RLENGTH) } }' "$readme")

# rematctl's commands, one or two words, from its --help ("  remat set JOB ..." -> "remat set")
ctl_help=$("$bin/rematctl" --help 2>&1) || { fail "rematctl --help failed"; ctl_help=; }
commands=$(printf '%s\n' "$ctl_help" | sed -n 's/^  \([a-z][a-z-]*\)\( [a-z][a-z-]*\)\{0,1\}\( .*\)\{0,1\}$/\1\2/p')
# each use: the words after "rematctl", options (and the values of those that take one) skipped
uses=$(printf '%s\n' "$code" | awk '{
	n = split($0, w, /[ \t;|&()]+/)
	for (i = 1; i <= n; i++) {
		if (w[i] !~ /(^|\/)rematctl$/)
			continue
		j = i + 1
		while (j <= n && w[j] ~ /^-/) {
			if (w[j] ~ /^--(socket|control|timeout)$/)
				j++
			j++
		}
		if (j > n || w[j] !~ /^[a-z][a-z-]*$/)
			continue
		print w[j] (j < n && w[j + 1] ~ /^[a-z][a-z-]*$/ ? " " w[j + 1] : "")
	}
}' | sort -u)
printf '%s\n' "$uses" | while read -r one two; do
	[ -n "$one" ] || continue
	if printf '%s\n' "$commands" | grep -qx "$one $two"; then
		echo ok
	elif printf '%s\n' "$commands" | grep -qx "$one"; then
		echo ok
	else
		echo "README.md runs 'rematctl $one${two:+ $two}': rematctl --help has no such command"
	fi
done >"${TMPDIR:-/tmp}/readme.$$"
while read -r line; do
	checks=$((checks + 1))
	[ "$line" = ok ] || fail "$line"
done <"${TMPDIR:-/tmp}/readme.$$"
rm -f "${TMPDIR:-/tmp}/readme.$$"

# rematd's and remat-train's options: every --word after the program's name on a line
for prog in rematd remat-train; do
	help=$("$bin/$prog" --help 2>&1)
	opts=$(printf '%s\n' "$code" | awk -v p="$prog" '{
		n = split($0, w, /[ \t;|&()]+/)
		for (i = 1; i <= n; i++) {
			if (w[i] !~ ("(^|/)" p "$"))
				continue
			for (j = i + 1; j <= n && w[j] != "#"; j++)
				if (w[j] ~ /^--[a-z]/) {
					sub(/=.*/, "", w[j])
					print w[j]
				}
		}
	}' | sort -u)
	for o in $opts; do
		checks=$((checks + 1))
		printf '%s\n' "$help" | grep -q -- "$o\([^a-z-]\|$\)" ||
			fail "README.md gives $prog $o: '$prog --help' has no such option"
	done
done

# ---- the files the Layout section names ----
layout=$(awk '/^## Layout/ { on = 1; next } on && /^## / { on = 0 }
	on && /^```/ { fenced = !fenced; next } on && fenced' "$readme")
printf '%s\n' "$layout" | awk '
	/^[a-z][^ ]*\/? / { dir = $1; sub(/\/$/, "", dir); if (dir == "Makefile") { print ". Makefile"; dir = "." } }
	{ s = $0; sub(/^[^ ]+/, "", s)
	  n = split(s, w, /[ ,;:()+]+/)
	  for (i = 1; i <= n; i++)
		if (w[i] ~ /^[A-Za-z0-9_.*\/-]+\.(sh|c|h|cu|py|md|json|bash|socket|service|sysusers|[158]|\*)$/ ||
		    w[i] ~ /^(eng|kn|kc|sv|srv|wk|cli)_[a-z0-9_]+\*?$/ || w[i] ~ /^[a-z]+\/$/ || w[i] ~ /\/[a-z]+\*$/)
			print dir " " w[i] }' | sort -u >"${TMPDIR:-/tmp}/readme.$$"
while read -r dir name; do
	checks=$((checks + 1))
	case $name in
	*/*) base=. ;;
	*) base=$dir ;;
	esac
	pat=${name%/}
	case $pat in
	*.*) ;;
	*'*') ;;
	*) [ "$name" = "${name%/}" ] && pat="$pat.*" ;;
	esac
	# a name is under its folder (or from the top, with a slash), at any depth
	found=$(find "$base" -path "$base/$pat" -print 2>/dev/null | head -1)
	[ -n "$found" ] || found=$(find "$base" -name "${pat##*/}" -print 2>/dev/null | head -1)
	[ -n "$found" ] || fail "the Layout names $name in $dir/, which has no such file"
done <"${TMPDIR:-/tmp}/readme.$$"
rm -f "${TMPDIR:-/tmp}/readme.$$"

if [ "$fails" -gt 0 ]; then
	echo "readme: $fails of $checks checks of README.md failed" >&2
	exit 1
fi
echo "readme: $checks checks of README.md against the repository (the examples' step counts, the commands and options in its code, the files its Layout names)"
