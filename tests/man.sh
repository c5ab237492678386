#!/bin/sh
# tests/man.sh - the man pages (man/) are well-formed and keep up with the programs.
#
#   sh tests/man.sh BIN_DIR MAN_DIR TMP_DIR
#
# Each page must pass `mandoc -T lint -W warning` and `groff -man -ww -z` (when groff is
# there) with no message at all, and have the sections a reader looks for. Then the pages
# are compared with what the programs say of themselves: every command and option in
# `rematctl --help`, every option in `rematd --help` and `remat-train --help`, and every key
# of the job spec that remat-train knows (the list its "unknown key" error gives for each
# object) must appear in the rendered page. Prints one line when all is well; otherwise
# every problem, and exits 1. Run by `make test`.
set -u
bin=$1
man=$2
tmp=$3
fails=0
checks=0

fail() {
	echo "man: $*" >&2
	fails=$((fails + 1))
}

rm -rf "$tmp" && mkdir -p "$tmp" || exit 1
command -v mandoc >/dev/null 2>&1 || { echo "man: mandoc not found (scripts/deps.sh installs it)" >&2; exit 1; }

pages="rematctl.1 remat-train.1 remat-job.5 rematd.8"
for p in $pages; do
	f=$man/$p
	[ -f "$f" ] || { fail "$f is missing"; continue; }
	checks=$((checks + 1))
	if ! mandoc -T lint -W warning "$f" >"$tmp/lint" 2>&1 || [ -s "$tmp/lint" ]; then
		fail "mandoc -T lint -W warning $f:"; cat "$tmp/lint" >&2
	fi
	if command -v groff >/dev/null 2>&1; then
		checks=$((checks + 1))
		if ! groff -man -ww -z "$f" >"$tmp/groff" 2>&1 || [ -s "$tmp/groff" ]; then
			fail "groff -man -ww -z $f:"; cat "$tmp/groff" >&2
		fi
	fi
	# plain text: overstrikes (bold, underline) removed, \- shown as -
	mandoc -T ascii -O width=1000 "$f" | sed 's/.\x08//g' >"$tmp/$p.txt"
	case $p in
	*.5) want="NAME SYNOPSIS DESCRIPTION FILES EXAMPLES SEE|ALSO" ;;
	*) want="NAME SYNOPSIS DESCRIPTION OPTIONS ENVIRONMENT FILES EXIT|STATUS EXAMPLES SEE|ALSO" ;;
	esac
	for s in $want; do
		checks=$((checks + 1))
		s=$(echo "$s" | tr '|' ' ')
		grep -qx "$s" "$tmp/$p.txt" || fail "$p has no section $s"
	done
	# every page it refers to is one of ours or a system one
	for ref in $(grep -o 'remat[a-z-]*([0-9])' "$tmp/$p.txt" | sort -u); do
		checks=$((checks + 1))
		name=${ref%(*}
		sec=${ref#*(}
		sec=${sec%)}
		[ -f "$man/$name.$sec" ] || fail "$p refers to $ref, which is not in $man"
	done
done

# $1 must occur in page $2 (its text): $3 says where the name came from
need() {
	checks=$((checks + 1))
	grep -qF -e "$1" "$tmp/$2.txt" || fail "$2 does not mention '$1' ($3)"
}

# rematctl: the commands (the words before the arguments) and the options
"$bin/rematctl" --help >"$tmp/rematctl.help" 2>&1 || fail "rematctl --help failed"
sed -n '/^commands:/,/^$/s/^  \([a-z][a-z]*\( [a-z][a-z]*\)*\)\( .*\)*$/\1/p' \
	"$tmp/rematctl.help" >"$tmp/rematctl.cmds"
[ "$(wc -l <"$tmp/rematctl.cmds")" -ge 10 ] || fail "cannot read the commands of rematctl --help"
while IFS= read -r c; do
	# described under its own tag: a line that starts with it
	checks=$((checks + 1))
	grep -Eq "^ +$c( |\$)" "$tmp/rematctl.1.txt" ||
		fail "rematctl.1 has no entry for the command '$c' of rematctl --help"
done <"$tmp/rematctl.cmds"
for o in $(grep -o -e '--[a-z][a-z-]*' "$tmp/rematctl.help" | sort -u); do
	need "$o" rematctl.1 "an option in rematctl --help"
done
for x in 0 1 2 3; do
	checks=$((checks + 1))
	sed -n '/^EXIT STATUS/,/^[A-Z]/p' "$tmp/rematctl.1.txt" | grep -Eq "^ +$x( |\$)" ||
		fail "rematctl.1 does not document exit status $x"
done

# rematd and remat-train: their options
for b in rematd:rematd.8 remat-train:remat-train.1; do
	prog=${b%%:*}
	page=${b#*:}
	"$bin/$prog" --help >"$tmp/$prog.help" 2>&1 || fail "$prog --help failed"
	n=0
	for o in $(grep -o -e '--[a-z][a-z-]*' "$tmp/$prog.help" | sort -u); do
		need "$o" "$page" "an option in $prog --help"
		n=$((n + 1))
	done
	[ "$n" -ge 3 ] || fail "cannot read the options of $prog --help"
done

# the job spec: remat-train's "unknown key" error lists the keys each object knows
for obj in "" data model optim schedule remat save; do
	case $obj in
	"") spec='{"zzz":1}' ;;
	data) spec='{"data":{"zzz":1}}' ;;
	model) spec='{"data":{"train":"x"},"model":{"zzz":1}}' ;;
	*) spec="{\"data\":{\"train\":\"x\"},\"model\":{\"preset\":\"tiny\"},\"$obj\":{\"zzz\":1}}" ;;
	esac
	echo "$spec" >"$tmp/spec.json"
	"$bin/remat-train" "$tmp/spec.json" >"$tmp/spec.out" 2>&1
	keys=$(sed -n 's/.*unknown key .*(known: \(.*\))$/\1/p' "$tmp/spec.out" | tr -d ',')
	[ -n "$keys" ] || { fail "no key list from remat-train for '$spec': $(cat "$tmp/spec.out")"; continue; }
	for k in $keys; do
		need "${obj:+$obj.}$k" remat-job.5 "a key remat-train knows"
	done
done

if [ "$fails" -gt 0 ]; then
	echo "man: $fails of $checks checks failed" >&2
	exit 1
fi
echo "man: 4 pages lint clean, $checks checks of sections, references, commands, options and spec keys passed"
