#!/bin/bash
# tests/completion.sh - bash completion of rematctl (completion/rematctl.bash).
#
#   bash tests/completion.sh BIN_DIR TMP_DIR
#
# Sources the completion and calls _rematctl as bash does: COMP_LINE, COMP_POINT and
# COMP_WORDS split at COMP_WORDBREAKS (h.0=full is three words there), then compares
# COMPREPLY, as a set, with what a user must be offered. First with no daemon (commands,
# options, modes, events, files; nothing, at once and silently, where the daemon would be
# asked); then with a stand-in rematctl whose replies hold odd job names and a job on
# device cuda (offload); then with a real rematd on a scratch socket running a tiny job and
# queueing a second one (job ids filtered by state, section selectors and the job's aliases
# from remat-get, --socket, quoted paths and REMAT_SOCKET), and a worker run alone with
# --control. Kills only what it started. Prints one line when all is well; otherwise every mismatch, and exits 1.
# Run by `make test`.
set -u
bin=$1
tmp=$2
here=$(cd "$(dirname "$0")/.." && pwd)
ctl=$bin/rematctl
fails=0
checks=0
pids=()

cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
}
trap cleanup EXIT

rm -rf "$tmp" && mkdir -p "$tmp" || exit 1
# shellcheck source=../completion/rematctl.bash
. "$here/completion/rematctl.bash"

# compopt only works inside a real completion; record what the completion asked for
compopt() { COMPOPT_ARGS+=" $*"; }

# comp LINE: runs the completion for LINE (the cursor at its end) into COMPREPLY, with
# COMP_WORDS split as bash splits them (checked against bash 5.2 at a terminal): at blanks
# and around runs of COMP_WORDBREAKS characters, except inside quotes or after a backslash,
# which stay in the word as typed
comp() {
	local line=$1 i c k tok="" kind="" q=""
	COMP_LINE=$line
	COMP_POINT=${#line}
	COMP_WORDS=()
	for ((i = 0; i < ${#line}; i++)); do
		c=${line:i:1}
		if [[ -n $q || $c == [\'\"\\] ]]; then
			if [[ -n $tok && $kind == break ]]; then
				COMP_WORDS+=("$tok")
				tok=""
			fi
			if [[ $c == '\' && -z $q ]]; then
				c+=${line:i+1:1}
				((i++))
			elif [[ -z $q ]]; then
				q=$c
			elif [[ $c == "$q" ]]; then
				q=""
			fi
			tok+=$c
			kind=word
			continue
		fi
		if [[ $c == [[:space:]] ]]; then
			[[ -n $tok ]] && COMP_WORDS+=("$tok")
			tok=""
			kind=""
			continue
		fi
		if [[ $COMP_WORDBREAKS == *"$c"* ]]; then k="break"; else k="word"; fi
		if [[ -n $tok && $k != "$kind" ]]; then
			COMP_WORDS+=("$tok")
			tok=""
		fi
		tok+=$c
		kind=$k
	done
	COMP_WORDS+=("$tok") # the current word: empty after a blank
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMPREPLY=()
	COMPOPT_ARGS=""
	_rematctl rematctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
}

# expect LINE WORD...: the completion of LINE offers exactly the WORDs, each once (no
# subprocess here: a fork costs milliseconds on a busy machine)
expect() {
	local line=$1 w same=1
	local -A want=() got=()
	shift
	for w in "$@"; do want[$w]=1; done
	comp "$line" 2>"$tmp/stderr"
	checks=$((checks + 1))
	for w in "${COMPREPLY[@]}"; do
		[[ -n ${got[$w]-} || -z ${want[$w]-} ]] && same=0
		got[$w]=1
	done
	((${#got[@]} == ${#want[@]})) || same=0
	if ((!same)); then
		echo "completion: '$line': offered [${COMPREPLY[*]}], expected [$*]" >&2
		fails=$((fails + 1))
	fi
	if [[ -s $tmp/stderr ]]; then
		echo "completion: '$line' wrote to stderr: $(<"$tmp/stderr")" >&2
		fails=$((fails + 1))
	fi
}

# expect_opt LINE OPTION: the completion asked for compopt -o OPTION
expect_opt() {
	comp "$1" 2>/dev/null
	checks=$((checks + 1))
	if [[ $COMPOPT_ARGS != *"-o $2"* ]]; then
		echo "completion: '$1': no compopt -o $2 (got '$COMPOPT_ARGS')" >&2
		fails=$((fails + 1))
	fi
}

checks=$((checks + 1))
if [[ $(complete -p rematctl 2>&1) != *"-F _rematctl rematctl"* ]]; then
	echo "completion: the file does not register _rematctl for rematctl" >&2
	fails=$((fails + 1))
fi

cmds=(start plan ls status pause resume stop rm remat mem save eval set logs plot watch events info shutdown help)
globals=(--socket --control --json --timeout --help --version)
sock=$tmp/rematd.sock
x=$ctl # the command as typed: the path of the rematctl under test

# ---- no daemon: what needs none, and silence where the daemon would be asked ----
export REMAT_SOCKET=$tmp/none.sock
expect "$x " "${cmds[@]}"
expect "$x st" start status stop
expect "$x p" plan pause plot
expect "$x remat " get plan set costs profile auto memlog
expect "$x remat memlog j1 --" "${globals[@]}" --count --trace --format
expect "$x remat memlog j1 --format " pytorch chrome
expect_opt "$x remat memlog j1 --trace " filenames
expect "$x remat auto j1 --budget " cgroup device off
expect "$x remat s" set
expect "$x --j" --json
expect "$x -" "${globals[@]}"
expect "$x stop j1 --s" --save --socket
expect "$x remat plan j1 --" "${globals[@]}" --default --budget
expect "$x remat set j1 h.0=full --" "${globals[@]}" --default --force --wait
expect "$x remat set j1 --w" --wait
expect "$x watch j1 --" "${globals[@]}" --interval --count
expect "$x plot j1 --" "${globals[@]}" --png --svg
expect_opt "$x plot j1 --svg " filenames
expect_opt "$x plot j1 --png " filenames
expect "$x events --" "${globals[@]}" --event --count
expect "$x shutdown --" "${globals[@]}" --no-save --save
expect "$x stop j1 --n" --no-save --name
expect "$x start job.json --n" --name
expect "$x set j1 " lr= schedule= warmup= min_lr_frac= grad_clip= weight_decay= \
	eval.every= save.every= priority=
expect "$x remat set j1 h.0=" off selective full
expect "$x remat set j1 h.0=fu" full
expect "$x remat set j1 h.2-5=s" selective
expect "$x remat set j1 blocks=" off selective full
expect "$x remat set j1 head=" off chunked
expect "$x remat set j1 all=c" chunked
expect "$x remat set j1 h.0=full head=" off chunked
expect "$x remat set j1 " blocks= head= all=
expect_opt "$x remat set j1 " nospace
expect "$x remat set j1 --default " off selective full
expect "$x remat set j1 --default=se" selective
expect "$x remat plan j1 --budget " # a size: nothing to offer
# every event of the protocol's table, as rematctl's own error lists them
events=$("$ctl" events --event NOSUCH 2>&1 | sed -n "s/.*unknown event 'NOSUCH' (\(.*\))/\1/p" | tr -d ,)
# shellcheck disable=SC2086
expect "$x events --event " $events
expect "$x events --event=J" JOB_STATE_CHANGED
expect "$x -- --" # after --, no options
expect "$x ls " # ls takes no argument
start=$(date +%s%N)
expect "$x status "
expect "$x remat get "
expect "$x --socket $tmp/nowhere.sock pause "
took=$((($(date +%s%N) - start) / 1000000))
checks=$((checks + 1))
if ((took > 3000)); then
	# three completions with no daemon: connect() fails at once; the 1 s timeout is for a
	# daemon that hangs, and must not be what ends these
	echo "completion: three completions with no daemon took $took ms" >&2
	fails=$((fails + 1))
fi

# files: start offers directories and *.json; --socket any file
mkdir -p "$tmp/files/sub.d"
touch "$tmp/files/a.json" "$tmp/files/b.txt"
(
	fails=0
	cd "$tmp/files" || exit 1
	expect "$x start " a.json sub.d
	expect_opt "$x start " filenames
	expect "$x --socket " a.json b.txt sub.d
	expect "$x --socket=a" a.json
	exit $fails
)
fails=$((fails + $?))
checks=$((checks + 4))

# ---- replies of a stand-in rematctl: odd job names, a job on device cuda ----
# Names hold what the completion's patterns look for ("job":"x", braces), escaped as JSON
# escapes them; g1 is on cuda (its mem-stats has "device"), where blocks take offload.
mkdir -p "$tmp/fake"
cat >"$tmp/fake/rematctl" <<'FAKE'
#!/bin/bash
json=0 args=()
while (($#)); do
	case $1 in
	--socket | --control | --timeout) shift 2 ;;
	--json) json=1 && shift ;;
	*) args+=("$1") && shift ;;
	esac
done
((json)) || exit 2
case "${args[*]}" in
ls) echo '{"jobs":[{"job":"j7","name":"a\"job\":\"x\",\"state\":\"paused","state":"running","step":1,"steps":9,"loss":null,"pid":1},{"job":"g1","name":"}{","state":"paused","step":1,"steps":9,"loss":1.5,"pid":2},{"job":"j9","name":"q","state":"failed","step":0,"steps":9,"loss":null,"pid":null}]}' ;;
"remat get g1") echo '{"policy":{"h.0-2":"off","head":"off"},"sections":[{"name":"h.0","kind":"block","mode":"off","saved_bytes":1,"workspace_bytes":0},{"name":"h.1","kind":"block","mode":"off","saved_bytes":1,"workspace_bytes":0},{"name":"h.2","kind":"block","mode":"off","saved_bytes":1,"workspace_bytes":0},{"name":"head","kind":"head","mode":"off","saved_bytes":1,"workspace_bytes":0}],"aliases":{"mid":"h.1","top":"head"}}' ;;
"remat get j7") echo '{"policy":{"h.0":"off","head":"off"},"sections":[{"name":"h.0","kind":"block","mode":"off","saved_bytes":1,"workspace_bytes":0},{"name":"head","kind":"head","mode":"off","saved_bytes":1,"workspace_bytes":0}],"aliases":{}}' ;;
"mem g1") echo '{"categories":{},"total":{},"sections":[],"rss":1,"rss_peak":1,"step":1,"device":{"categories":{},"total":{},"reserved":1}}' ;;
"mem j7") echo '{"categories":{},"total":{},"sections":[],"rss":1,"rss_peak":1,"step":1}' ;;
*) echo "fake rematctl: ${args[*]}" >&2 && exit 1 ;;
esac
FAKE
chmod +x "$tmp/fake/rematctl"
x=$tmp/fake/rematctl
expect "$x status " j7 g1 j9
expect "$x pause " j7
expect "$x resume " g1 j9
expect "$x rm " j9
expect "$x stop " j7 g1
expect "$x remat set g1 " blocks= head= all= mid= top= h.0= h.1= h.2= h.0-2=
expect "$x remat set g1 h.1-" h.1-2=
expect "$x remat set g1 h.1=" off selective full offload
expect "$x remat set g1 mid=o" off offload
expect "$x remat set g1 all=" off selective full chunked offload
# every mode of the protocol's table, as rematctl --help lists them, is offered somewhere
# (a new mode fails here until the completion knows it)
# shellcheck disable=SC2046
expect "$x remat set g1 all=" $("$ctl" --help | sed -n 's/^MODE: //p' | tr -d ',;()' |
	tr ' ' '\n' | grep -Evx 'blocks|head|' | sort -u)
expect "$x remat set g1 top=" off chunked
expect "$x remat set j7 h.0=" off selective full
expect "$x remat set j7 " blocks= head= all= h.0=
x=$ctl

# ---- a daemon with one job running and one queued ----
"$bin/rematd" --socket "$sock" --state-dir "$tmp/state" --max-jobs 1 2>"$tmp/rematd.log" &
pids+=($!)
for ((i = 0; i < 100; i++)); do [[ -S $sock ]] && break; sleep 0.1; done
cat >"$tmp/job.json" <<JOB
{"name": "comp", "model": {"preset": "tiny"},
 "data": {"train": "/usr/share/common-licenses/GPL-3", "format": "bytes"},
 "batch": 2, "seq_len": 32, "steps": 1000000, "threads": 1,
 "remat": {"aliases": {"trunk": "h.1", "lm": "head", "every-block": "blocks"}}}
JOB
# stdout is the id alone; the resolved paths and the model's line go to stderr
j1=$("$ctl" --socket "$sock" start "$tmp/job.json" 2>"$tmp/start.err")
j2=$("$ctl" --socket "$sock" start "$tmp/job.json" 2>>"$tmp/start.err")
if [[ $j1 != j1 || $j2 != j2 ]]; then
	echo "completion: cannot start the jobs: $j1 $j2 $(cat "$tmp/start.err" "$tmp/rematd.log")" >&2
	exit 1
fi
state() { "$ctl" --socket "$sock" --json status "$1" 2>/dev/null | sed -n 's/.*"state":"\([a-z]*\)".*/\1/p'; }
for ((i = 0; i < 300; i++)); do [[ $(state j1) == running ]] && break; sleep 0.1; done

export REMAT_SOCKET=$sock
expect "$x status " j1 j2
expect "$x status j" j1 j2
expect "$x events " j1 j2
expect "$x pause " j1
expect "$x resume "
expect "$x stop " j1 j2
expect "$x mem " reset j1 j2
expect "$x mem reset " j1 j2
expect "$x remat get " j1 j2
expect "$x remat costs " j1 j2
expect "$x remat auto j1 --" --budget --socket --control --json --timeout --help --version
expect "$x remat profile " j1 j2
expect "$x remat set " j1 j2
expect "$x remat set j1 " blocks= head= all= trunk= lm= every-block= h.0= h.1= h.0-1=
expect_opt "$x remat set j1 " nospace
expect "$x remat set j1 tr" trunk=
expect "$x remat set j1 trunk=" off selective full
expect "$x remat set j1 lm=" off chunked
expect "$x remat set j1 every-block=f" full
expect "$x remat set j1 h." h.0= h.1= h.0-1=
expect "$x remat set j1 h.0-" h.0-1=
expect "$x remat plan j1 h.1=full h" h.0= h.1= h.0-1= head=
expect "$x remat plan j1 --budget 1G l" lm=
# the connection the line names wins over REMAT_SOCKET
export REMAT_SOCKET=$tmp/none.sock
expect "$x --socket $sock status " j1 j2
expect "$x --socket=$sock status " j1 j2
expect "$x status --socket $sock " j1 j2
expect "$x --json --socket $sock remat set j1 --default full h.1" h.1=
expect "$x --socket $tmp/none.sock status "
# a path the shell quotes: as typed, with quotes or a backslash
mkdir -p "$tmp/my dir=x"
ln -s "$sock" "$tmp/my dir=x/link.sock"
expect "$x --socket '$tmp/my dir=x/link.sock' status " j1 j2
expect "$x --socket \"$tmp/my dir=x/link.sock\" status " j1 j2
expect "$x --socket ${tmp}/my\\ dir=x/link.sock status " j1 j2

# pause j1: resume offers it, pause no longer does
"$ctl" --socket "$sock" pause j1 >/dev/null 2>&1
for ((i = 0; i < 300; i++)); do [[ $(state j1) == paused ]] && break; sleep 0.1; done
expect "$x --socket $sock resume " j1
expect "$x --socket $sock pause "

# ---- a worker alone: --control, where the job may be left out ----
wsock=$tmp/w.sock
(cd "$tmp" && exec "$bin/remat-train" --control "$wsock" "$tmp/job.json") >"$tmp/w.log" 2>&1 &
pids+=($!)
for ((i = 0; i < 300; i++)); do
	"$ctl" --control "$wsock" status >/dev/null 2>&1 && break
	sleep 0.1
done
expect "$x --control $wsock remat set " job blocks= head= all= trunk= lm= every-block= \
	h.0= h.1= h.0-1=
expect "$x --control $wsock remat set h.0=full t" trunk=
expect "$x --control $wsock remat plan lm=" off chunked
expect "$x --control $wsock status " job

"$ctl" --socket "$sock" shutdown >/dev/null 2>&1
if [[ $fails -gt 0 ]]; then
	echo "completion: $fails of $checks checks failed" >&2
	exit 1
fi
echo "completion: $checks checks passed (commands, options, modes, selectors and aliases, job ids of a running daemon and of a worker)"
