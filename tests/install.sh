#!/bin/sh
# tests/install.sh - `make install` and `make uninstall` into a scratch DESTDIR.
#
#   sh tests/install.sh MAKE BUILD TMP_DIR
#
# For the default PREFIX (/usr/local) and for PREFIX=/opt/remat: installs, then checks
# that exactly the expected files are there (no more, no fewer) with their modes; that the
# installed programs run (rematctl --help, remat-train --version, rematd --version); that
# the installed rematd serves and finds the remat-train beside it; that the installed
# example job trains (its first step, then SIGINT); that the units and man pages name the
# chosen prefix and the pages still lint clean; that the completion registers itself. Then
# uninstalls and checks that no file and no directory of ours is left. MAKE and BUILD are
# the Makefile's $(MAKE) and $(BUILD), so nothing is rebuilt. Prints one line when all is
# well; otherwise every problem, and exits 1. Run by `make test`.
set -u
make=$1
build=$2
tmp=$3
fails=0
checks=0
files=0

fail() {
	echo "install: $*" >&2
	fails=$((fails + 1))
}

# what `make install` must write, relative to PREFIX
expected="bin/remat-train bin/rematd bin/rematctl
share/man/man1/rematctl.1 share/man/man1/remat-train.1 share/man/man5/remat-job.5
share/man/man8/rematd.8 lib/systemd/system/rematd.service lib/systemd/system/rematd.socket
lib/sysusers.d/remat.conf share/bash-completion/completions/rematctl
share/doc/remat/examples/job.json share/doc/remat/protocol.md"

rm -rf "$tmp" && mkdir -p "$tmp" || exit 1
daemon=""
train=""
trap 'for p in $daemon $train; do kill "$p" 2>/dev/null; done' EXIT INT TERM

n=0
for prefix in /usr/local /opt/remat; do
	n=$((n + 1))
	dest=$tmp/dest$n
	root=$dest$prefix
	set -- BUILD="$build" DESTDIR="$dest"
	# the default PREFIX is the Makefile's own: not given on the command line
	[ "$prefix" = /usr/local ] || set -- "$@" PREFIX="$prefix"
	if ! $make --no-print-directory "$@" install >"$tmp/install.log" 2>&1; then
		fail "make install $*:"; cat "$tmp/install.log" >&2
		continue
	fi

	# exactly the expected files, with their modes
	(cd "$dest" && find . ! -type d | sed 's|^\./||' | sort) >"$tmp/found"
	for f in $expected; do echo "${prefix#/}/$f"; done | sort >"$tmp/want"
	checks=$((checks + 1))
	if ! cmp -s "$tmp/found" "$tmp/want"; then
		fail "PREFIX=$prefix: installed files differ from the expected (- expected, + found):"
		diff "$tmp/want" "$tmp/found" | grep '^[<>]' | sed 's/^</-/; s/^>/+/' >&2
	fi
	for f in $expected; do
		[ -e "$root/$f" ] || continue
		checks=$((checks + 1))
		case $f in bin/*) mode=755 ;; *) mode=644 ;; esac
		[ "$(stat -c %a "$root/$f")" = "$mode" ] || fail "$root/$f: mode $(stat -c %a "$root/$f"), not $mode"
		files=$((files + 1))
	done

	# the programs run
	checks=$((checks + 3))
	"$root/bin/rematctl" --help 2>&1 | grep -q '^usage: rematctl' || fail "$root/bin/rematctl --help"
	"$root/bin/remat-train" --version 2>&1 | grep -q '^remat-train [0-9]' ||
		fail "$root/bin/remat-train --version"
	"$root/bin/rematd" --version 2>&1 | grep -q '^rematd [0-9]' || fail "$root/bin/rematd --version"

	# the installed daemon serves, and its worker is the remat-train installed beside it
	# every file of a run is its prefix's own: the second run's loops below must never see
	# the first run's socket or output before its own process has replaced them
	sock=$tmp/d$n.sock
	"$root/bin/rematd" --socket "$sock" --state-dir "$tmp/state$n" 2>"$tmp/rematd.log" &
	daemon=$!
	i=0
	while [ ! -S "$sock" ] && [ $i -lt 100 ] && kill -0 "$daemon" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	checks=$((checks + 2))
	"$root/bin/rematctl" --socket "$sock" --json info >"$tmp/info" 2>&1 ||
		fail "rematctl info on the installed rematd: $(cat "$tmp/info" "$tmp/rematd.log")"
	grep -qF "\"worker\":\"$root/bin/remat-train\"" "$tmp/info" ||
		fail "the installed rematd does not run $root/bin/remat-train: $(cat "$tmp/info")"
	"$root/bin/rematctl" --socket "$sock" shutdown >/dev/null 2>&1
	wait "$daemon"
	st=$?
	daemon=""
	checks=$((checks + 1))
	[ "$st" -eq 0 ] || fail "the installed rematd exited with $st: $(cat "$tmp/rematd.log")"

	# the example job trains as installed: its first step, then SIGINT (exit 130)
	out=$tmp/train$n.out
	(cd "$tmp" && exec "$root/bin/remat-train" --json "$root/share/doc/remat/examples/job.json") \
		>"$out" 2>"$tmp/train$n.err" &
	train=$!
	i=0
	while ! grep -q '"step":1,' "$out" 2>/dev/null && [ $i -lt 300 ] && kill -0 "$train" 2>/dev/null
	do
		sleep 0.1
		i=$((i + 1))
	done
	kill -INT "$train" 2>/dev/null
	wait "$train"
	st=$?
	train=""
	checks=$((checks + 1))
	if ! grep -q '"step":1,' "$out" || [ "$st" -ne 130 ]; then
		fail "PREFIX=$prefix: the installed example job did not train and stop on SIGINT" \
			"(exit $st, $i polls): $(cat "$tmp/train$n.err"; tail -c 400 "$out")"
	fi

	# units: every placeholder filled, ExecStart= the installed rematd
	checks=$((checks + 2))
	grep -n '^[^#;]*@[A-Z][A-Z_]*@' "$root"/lib/systemd/system/* >&2 &&
		fail "a placeholder is left in a unit setting"
	grep -q "^ExecStart=$prefix/bin/rematd " "$root/lib/systemd/system/rematd.service" ||
		fail "rematd.service does not run $prefix/bin/rematd"

	# man pages: the chosen prefix's paths, still lint clean
	for p in "$root"/share/man/man?/*; do
		checks=$((checks + 1))
		if [ "$prefix" != /usr/local ] && grep -n /usr/local "$p" >&2; then
			fail "$p names /usr/local, not $prefix"
		fi
		if command -v mandoc >/dev/null 2>&1; then
			checks=$((checks + 1))
			if ! out=$(mandoc -T lint -W warning "$p" 2>&1) || [ -n "$out" ]; then
				fail "installed $p does not lint clean: $out"
			fi
		fi
	done
	checks=$((checks + 1))
	grep -qF "$prefix/share/doc/remat/examples/job.json" "$root/share/man/man8/rematd.8" ||
		fail "rematd.8 does not name $prefix/share/doc/remat/examples/job.json"

	# the completion loads and registers itself
	checks=$((checks + 1))
	bash -c '. "$1" && complete -p rematctl' sh "$root/share/bash-completion/completions/rematctl" \
		2>&1 | grep -q -- '-F _rematctl rematctl' || fail "the installed completion does not register"

	# uninstall: no file and no directory of ours left
	if ! $make --no-print-directory "$@" uninstall >"$tmp/uninstall.log" 2>&1; then
		fail "make uninstall $*:"; cat "$tmp/uninstall.log" >&2
		continue
	fi
	checks=$((checks + 2))
	left=$(cd "$dest" && find . ! -type d)
	[ -z "$left" ] || fail "PREFIX=$prefix: uninstall left files: $left"
	[ ! -e "$root/share/doc/remat" ] || fail "PREFIX=$prefix: uninstall left $root/share/doc/remat"
done

if [ "$fails" -gt 0 ]; then
	echo "install: $fails of $checks checks failed" >&2
	exit 1
fi
echo "install: $files files under PREFIX=/usr/local and /opt/remat, programs run, example trains, uninstall leaves none ($checks checks)"
