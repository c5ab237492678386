#!/bin/sh
# tests/design.sh - every reference to a section of docs/design.md ("design.md §N", and
# "§N, §M" after it; "[design.md](design.md) §N" in Markdown) names a section there
# ("## N. "), and nothing points at a design outside the repository ("DESIGN §N",
# DESIGN.md). With --planted, the check itself on a reference to a section that does not
# exist, which it must refuse.
#
#   sh tests/design.sh [--planted]
#
# Prints one line when every reference holds; otherwise each bad one, and exits 1. Run by
# make test.
set -u
cd "$(dirname "$0")/.." || exit 1

# the sections there are
sections=$(sed -n 's/^## \([0-9][0-9]*\)\. .*/\1/p' docs/design.md)
[ -n "$sections" ] || { echo "design: docs/design.md has no numbered section" >&2; exit 1; }

# FILE:LINE:N for each reference in the files given
refs() {
	grep -n -o -E 'design\.md\)?[[:space:]]*§[0-9]+(, §[0-9]+)*' "$@" /dev/null |
		sed 's/:design\.md)\{0,1\}[[:space:]]*/:/' |
		awk -F: '{ n = split($3, s, ", "); for (i = 1; i <= n; i++) {
			sub(/^§/, "", s[i]); print $1 ":" $2 ":" s[i] } }'
}

# the references of files "$@" to sections not in docs/design.md, and the outside ones
check() {
	bad=0
	for r in $(refs "$@"); do
		n=${r##*:}
		if ! printf '%s\n' $sections | grep -qx "$n"; then
			echo "design: ${r%:*}: design.md §$n: no such section" >&2
			bad=$((bad + 1))
		fi
	done
	outside=$(grep -n -E 'DESIGN §|DESIGN\.md' "$@" /dev/null)
	if [ -n "$outside" ]; then
		printf '%s\n' "$outside" | sed 's/^/design: points outside the repository: /' >&2
		bad=$((bad + 1))
	fi
	return "$bad"
}

# the repository's files (this one aside: it plants a bad reference of its own)
files=$(git ls-files '*.c' '*.h' '*.cu' '*.md' '*.sh' '*.py' '*.[1-8]' Makefile 2>/dev/null)
[ -n "$files" ] || files=$(find . -path ./build -prune -o -type f \( -name '*.[ch]' -o \
	-name '*.md' -o -name '*.sh' -o -name '*.py' \) -print | sed 's|^\./||')
files=$(printf '%s\n' $files | grep -v '^tests/design\.sh$')

if [ "${1:-}" = "--planted" ]; then
	tmp=$(mktemp -d) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	printf '/* see docs/design.md §3, §99 */\n' >"$tmp/planted.c"
	if check "$tmp/planted.c" 2>"$tmp/err"; then
		echo "design: a planted reference to §99 was not refused" >&2
		exit 1
	fi
	grep -q "§99: no such section" "$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
	echo "design: a planted reference to a missing section (§99) is refused"
	exit 0
fi
# shellcheck disable=SC2086
check $files || exit 1
echo "design: $(refs $files | wc -l) references to docs/design.md's $(printf '%s\n' $sections | wc -l) sections, each there; none outside the repository"
