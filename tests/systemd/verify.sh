#!/bin/sh
# tests/systemd/verify.sh BINDIR OUTDIR - checks systemd/'s units the way systemd would
# read them, with @BINDIR@ pointing at the freshly built binaries (systemd-analyze verify
# checks that ExecStart='s program exists and is executable). Run by `make test`.
#
#   - `systemd-analyze verify` on rematd.socket and rematd.service: any line of output (a
#     warning included) fails. Documentation=man:rematd(8) is checked too when the tree has
#     man/rematd.8 and man(1) is installed (MANPATH points at a copy of it); otherwise with
#     --man=no, as the man page is not installed where man(1) would look for it;
#   - `systemd-analyze security --offline=yes` on the service: prints the exposure, fails
#     above MAX_EXPOSURE;
#   - the contract the units must keep (SocketMode=0660, SocketGroup=, RemoveOnStop=yes, the
#     socket outside any RuntimeDirectory=, Type=notify, the hardening directives);
#   - systemd/remat.sysusers parses (systemd-sysusers --dry-run on an empty root).
# Not here: the daemon's side of activation and notification (tests/e2e/test_systemd.c).
set -eu

MAX_EXPOSURE=2.0

[ $# -eq 2 ] || { echo "usage: $0 BINDIR OUTDIR" >&2; exit 2; }
bindir=$1
out=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "systemd: $*" >&2; exit 1; }

command -v systemd-analyze >/dev/null 2>&1 ||
	fail "systemd-analyze not found (Debian package systemd; scripts/deps.sh installs it)"
[ -x "$bindir/rematd" ] || fail "$bindir/rematd is not built"
case $bindir in /*) ;; *) fail "BINDIR must be absolute, not '$bindir'" ;; esac

rm -rf "$out"
mkdir -p "$out"
for u in rematd.socket rematd.service; do
	sed "s|@BINDIR@|$bindir|g" "$src/systemd/$u" >"$out/$u"
	if grep -n '@[A-Z_]*@' "$out/$u" >&2; then
		fail "$u: placeholder left after substitution"
	fi
done

# ---- systemd-analyze verify: silence is the only pass ----
man_opt=--man=no
man_note="Documentation= not checked: no man/rematd.8 or no man(1)"
if [ -f "$src/man/rematd.8" ] && command -v man >/dev/null 2>&1; then
	mkdir -p "$out/man/man8"
	cp "$src/man/rematd.8" "$out/man/man8/"
	man_opt=--man=yes
	man_note="Documentation=man:rematd(8) found"
fi
rc=0
log=$(cd "$out" && MANPATH="$out/man" systemd-analyze verify $man_opt \
	./rematd.socket ./rematd.service 2>&1) || rc=$?
if [ "$rc" -ne 0 ] || [ -n "$log" ]; then
	printf '%s\n' "$log" >&2
	fail "systemd-analyze verify: exit $rc," \
		"$(printf '%s\n' "$log" | grep -c .) line(s) of output"
fi

# ---- what the issue asks of the units, so that a later edit cannot drop it silently ----
need() { # FILE DIRECTIVE-LINE (a regular expression for a whole line)
	grep -Eq "^$2\$" "$out/$1" || fail "$1: no line matching '$2'"
}
need rematd.socket 'ListenStream=/.+'
need rematd.socket 'SocketMode=0660'
need rematd.socket 'SocketGroup=[a-z_][a-z0-9_-]*'
need rematd.socket 'RemoveOnStop=yes'
for d in 'Type=notify' 'DynamicUser=yes' 'StateDirectory=remat' 'ProtectSystem=strict' \
	'ProtectHome=(yes|read-only|tmpfs)' 'PrivateTmp=yes' 'NoNewPrivileges=yes' \
	'RestrictAddressFamilies=AF_UNIX' 'SystemCallFilter=@system-service' \
	'DevicePolicy=closed' 'DeviceAllow=char-nvidia.* rw' 'UMask=0027' 'WatchdogSec=.+'; do
	need rematd.service "$d"
done
if grep -Eq '^MemoryDenyWriteExecute=(yes|true|on|1)$' "$out/rematd.service"; then
	fail "rematd.service: MemoryDenyWriteExecute= breaks CUDA's PTX JIT"
fi
if grep -Eq '^PrivateDevices=(yes|true|on|1)$' "$out/rematd.service"; then
	fail "rematd.service: PrivateDevices= hides /dev/nvidia*"
fi
# rematd serves exactly one passed socket (LISTEN_FDS=1)
[ "$(grep -Ec '^Listen[A-Za-z]*=' "$out/rematd.socket")" -eq 1 ] ||
	fail "rematd.socket: more than one Listen*= line; rematd serves exactly one socket"
sock=$(sed -n 's/^ListenStream=//p' "$out/rematd.socket")
for rd in $(sed -n 's/^RuntimeDirectory=//p' "$out/rematd.service"); do
	case $sock in
	/run/"$rd"/*)
		fail "the socket $sock is inside RuntimeDirectory=$rd, removed at every stop" ;;
	esac
done

# ---- systemd-analyze security ----
rc=0
sec=$(systemd-analyze security --offline=yes --no-pager "$out/rematd.service" 2>&1) || rc=$?
line=$(printf '%s\n' "$sec" | grep 'Overall exposure level for rematd.service:' || true)
score=$(printf '%s\n' "$line" | sed -n 's/.*rematd\.service: \([0-9][0-9.]*\).*/\1/p')
if [ -z "$score" ]; then
	printf '%s\n' "$sec" >&2
	fail "systemd-analyze security gave no exposure level (exit $rc)"
fi
rating=$(printf '%s\n' "$line" | sed -n 's/.*: [0-9.]* \([A-Z]*\).*/\1/p')
if ! awk -v s="$score" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(s + 0 <= m + 0) }'; then
	printf '%s\n' "$sec" | grep '✗' >&2 || true
	fail "rematd.service: security exposure $score $rating, above $MAX_EXPOSURE"
fi

# ---- sysusers.d ----
if command -v systemd-sysusers >/dev/null 2>&1; then
	mkdir -p "$out/root/etc"
	cp "$src/systemd/remat.sysusers" "$out/remat.conf"
	rc=0
	log=$(systemd-sysusers --root="$out/root" --dry-run "$out/remat.conf" 2>&1) || rc=$?
	if [ "$rc" -ne 0 ] || printf '%s\n' "$log" | grep -Eiq 'unknown|fail|ignor|invalid'; then
		printf '%s\n' "$log" >&2
		fail "remat.sysusers: systemd-sysusers --dry-run: exit $rc"
	fi
	printf '%s\n' "$log" | grep -q "group 'remat'" ||
		fail "remat.sysusers: creates no group remat"
fi

echo "systemd: rematd.socket, rematd.service verified without a warning ($man_note);" \
	"security exposure $score $rating (at most $MAX_EXPOSURE)"
