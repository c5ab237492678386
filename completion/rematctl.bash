# rematctl.bash - bash completion for rematctl(1): commands, options, recompute modes,
# section selectors and job ids.
#
# Job ids come from `rematctl --json ls` and section selectors (h.N, h.N-M, blocks, head,
# all and the job's aliases) from `rematctl --json remat get JOB`, asked of the daemon or
# worker that the line being completed names (--socket, --control, else $REMAT_SOCKET and
# rematctl's own defaults), with a one-second timeout and errors discarded: with no daemon
# running the connect fails at once and nothing is offered. Blocks are offered offload only
# on a job whose mem-stats has a "device" part (device cuda).
# Needs bash 4 or later, not the bash-completion package. Installed as
# $(PREFIX)/share/bash-completion/completions/rematctl, where bash-completion finds it by
# name; or source it from ~/.bashrc.

# Job states in which a job still has a worker (or is waiting for one).
_rematctl_live_states=" queued starting running paused stopping "

# Words of the line up to the cursor into _rematctl_w, as the user typed them: bash splits
# COMP_WORDS at COMP_WORDBREAKS (h.0=full is three words there), COMP_LINE says which pieces
# had no blank between them. _rematctl_keep gets the head of the current word that bash
# will not replace (up to its last word-break character, such as '=').
_rematctl_split()
{
	local line=${COMP_LINE:0:COMP_POINT} rest piece i c cur
	_rematctl_w=()
	if [[ -z ${COMP_LINE-} ]]; then
		_rematctl_w=("${COMP_WORDS[@]:0:COMP_CWORD+1}")
	else
		for ((i = 0; i <= COMP_CWORD && i < ${#COMP_WORDS[@]}; i++)); do
			rest=${line#"${line%%[![:space:]]*}"}
			if ((i == 0 || ${#_rematctl_w[@]} == 0)) || [[ $rest != "$line" ]]; then
				_rematctl_w+=("")
			fi
			line=$rest
			if ((i == COMP_CWORD)); then
				piece=$line # the current word: only what lies before the cursor
			else
				piece=${COMP_WORDS[i]}
				line=${line#"$piece"}
			fi
			_rematctl_w[${#_rematctl_w[@]} - 1]+=$piece
		done
		# the cursor after a blank: a new, empty word
		((COMP_CWORD >= ${#COMP_WORDS[@]})) && _rematctl_w+=("")
	fi
	cur=${_rematctl_w[${#_rematctl_w[@]} - 1]}
	_rematctl_keep=""
	for ((i = ${#cur} - 1; i >= 0; i--)); do
		c=${cur:i:1}
		if [[ $c != [[:space:]] && ${COMP_WORDBREAKS-} == *"$c"* ]]; then
			_rematctl_keep=${cur:0:i+1}
			break
		fi
	done
}

# COMPREPLY += the candidates ($@, whole words) that start with $cur, less _rematctl_keep,
# each once.
_rematctl_reply()
{
	local w seen=$'\n'
	for w in "${COMPREPLY[@]}"; do seen+=$w$'\n'; done
	for w in "$@"; do
		[[ $w == "$cur"* ]] || continue
		w=${w#"$_rematctl_keep"}
		[[ $seen == *$'\n'"$w"$'\n'* ]] && continue
		seen+=$w$'\n'
		COMPREPLY+=("$w")
	done
}

# Runs rematctl (the one being completed) on the connection the line names; prints its
# --json reply, nothing on any failure.
_rematctl_ask()
{
	local bin=${_rematctl_w[0]}
	[[ $bin == "~/"* ]] && bin=$HOME/${bin#"~/"}
	[[ $bin == */* && -x $bin ]] || type -P "$bin" >/dev/null 2>&1 || return 1
	"$bin" "${_rematctl_conn[@]}" --json --timeout 1 "$@" 2>/dev/null </dev/null
}

# Job ids into _rematctl_jobs: all of them, or those in one of the states listed in $1
# (" running paused ").
_rematctl_job_ids()
{
	local json s want=${1-} i
	local -a ids=() states=()
	_rematctl_jobs=()
	json=$(_rematctl_ask ls) || return
	# each object has one "job" and one "state"; a quote inside a name is escaped, so
	# neither pattern can match inside a string
	s=$json
	while [[ $s =~ \"job\":\"([A-Za-z0-9._-]+)\" ]]; do
		ids+=("${BASH_REMATCH[1]}")
		s=${s#*"${BASH_REMATCH[0]}"}
	done
	s=$json
	while [[ $s =~ \"state\":\"([a-z]+)\" ]]; do
		states+=("${BASH_REMATCH[1]}")
		s=${s#*"${BASH_REMATCH[0]}"}
	done
	for ((i = 0; i < ${#ids[@]}; i++)); do
		if [[ -z $want || ${#states[@]} -ne ${#ids[@]} || $want == *" ${states[i]} "* ]]
		then
			_rematctl_jobs+=("${ids[i]}")
		fi
	done
}

# The job's blocks (their count into _rematctl_nblocks) and aliases (name -> selector into
# _rematctl_alias) from remat-get; $1 is the job id, or empty for a worker's own job.
_rematctl_sections()
{
	local json s
	_rematctl_nblocks=0
	_rematctl_alias=()
	json=$(_rematctl_ask remat get ${1:+"$1"}) || return
	s=$json
	while [[ $s =~ \"name\":\"h\.([0-9]+)\" ]]; do
		((_rematctl_nblocks++))
		s=${s#*"${BASH_REMATCH[0]}"}
	done
	# alias names are [A-Za-z0-9_-] and their targets built-in selectors: no '}' inside
	if [[ $json =~ \"aliases\":\{([^}]*)\} ]]; then
		s=${BASH_REMATCH[1]}
		while [[ $s =~ \"([A-Za-z0-9_-]+)\":\"([a-z0-9.-]+)\" ]]; do
			_rematctl_alias[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
			s=${s#*"${BASH_REMATCH[0]}"}
		done
	fi
}

# Whether job $1 (empty: a worker's own) runs on device cuda, where blocks also take
# offload: its mem-stats reply then has a "device" object.
_rematctl_on_cuda()
{
	local json
	json=$(_rematctl_ask mem ${1:+"$1"}) || return 1
	[[ $json == *'"device":{'* ]]
}

# Candidates for a SELECTOR=MODE word ($cur) of remat set or plan on job $1.
_rematctl_selmode()
{
	local job=$1 sel target m lo i
	local -a cand=()
	local -A _rematctl_alias=()
	_rematctl_sections "$job"
	if [[ $cur == *=* ]]; then
		sel=${cur%%=*}
		target=${_rematctl_alias[$sel]-$sel}
		case $target in
		head) m="off chunked" ;;
		all) m="off selective full chunked" ;;
		blocks | h.*) m="off selective full" ;;
		*) m="off selective full chunked" ;;
		esac
		[[ $target != head ]] && _rematctl_on_cuda "$job" && m+=" offload"
		for i in $m; do cand+=("$sel=$i"); done
		_rematctl_reply "${cand[@]}"
		return
	fi
	cand=(blocks= head= all=)
	for sel in "${!_rematctl_alias[@]}"; do cand+=("$sel="); done
	if ((_rematctl_nblocks > 0)); then
		for ((i = 0; i < _rematctl_nblocks; i++)); do cand+=("h.$i="); done
		((_rematctl_nblocks > 1)) && cand+=("h.0-$((_rematctl_nblocks - 1))=")
		# "h.3-": every range that starts there
		if [[ $cur =~ ^h\.([0-9]+)- ]]; then
			lo=$((10#${BASH_REMATCH[1]}))
			for ((i = lo + 1; i < _rematctl_nblocks; i++)); do cand+=("h.$lo-$i="); done
		fi
	fi
	_rematctl_reply "${cand[@]}"
	[[ ${#COMPREPLY[@]} -gt 0 ]] && compopt -o nospace 2>/dev/null
}

# Candidates for the value of option $1; $2 is put before each (the "--opt=" form).
_rematctl_value()
{
	local opt=$1 pre=$2 v f
	local -a cand=()
	case $opt in
	--socket | --control)
		compopt -o filenames 2>/dev/null
		while IFS= read -r f; do
			cand+=("$pre$f")
		done < <(compgen -f -- "${cur#"$pre"}")
		;;
	--default) for v in off selective full; do cand+=("$pre$v"); done ;;
	--budget) # remat auto's sources (the caller's words so far); a plan takes a size
		[[ " ${pos[*]-} " == *" remat auto "* ]] &&
			for v in cgroup device off; do cand+=("$pre$v"); done
		;;
	--format) for v in pytorch chrome; do cand+=("$pre$v"); done ;;
	--trace | --png | --svg)
		compopt -o filenames 2>/dev/null
		while IFS= read -r f; do
			cand+=("$pre$f")
		done < <(compgen -f -- "${cur#"$pre"}")
		;;
	--event)
		for v in STEP REMAT_APPLIED CHECKPOINT_SAVED JOB_STATE_CHANGED MEMORY CHECKPOINT_FAILED \
			REMAT_AUTO EVAL HPARAMS_APPLIED SAMPLE REMAT_FAILED TOKENIZE POOL_CHANGED; do
			cand+=("$pre$v")
		done
		;;
	esac
	_rematctl_reply "${cand[@]}"
}

_rematctl()
{
	local cur i w opt_end=0 cmd="" f
	local -a pos=() cand=() _rematctl_w=() _rematctl_conn=() _rematctl_jobs=()
	local _rematctl_keep _rematctl_nblocks
	local value_opts=" --socket --control --timeout --name --default --budget --interval "
	value_opts+="--count --event --trace --format --png --svg "
	COMPREPLY=()
	_rematctl_split
	cur=${_rematctl_w[${#_rematctl_w[@]} - 1]}

	# the words before the current one: options (and their values) and positionals
	for ((i = 1; i < ${#_rematctl_w[@]} - 1; i++)); do
		w=${_rematctl_w[i]}
		if ((opt_end)) || [[ $w != -* || $w == - ]]; then
			pos+=("$w")
			continue
		fi
		case $w in
		--) opt_end=1 ;;
		--socket=* | --control=*) _rematctl_conn=("${w%%=*}" "${w#*=}") ;;
		*)
			[[ $value_opts == *" $w "* ]] || continue
			if ((i + 1 == ${#_rematctl_w[@]} - 1)); then
				_rematctl_value "$w" ""
				return 0
			fi
			((i++))
			[[ $w == --socket || $w == --control ]] &&
				_rematctl_conn=("$w" "${_rematctl_w[i]}")
			;;
		esac
	done
	# the socket's path as the shell will pass it: quotes and a leading ~/ undone
	if ((${#_rematctl_conn[@]} == 2)); then
		w=${_rematctl_conn[1]}
		if [[ $w == \'*\' || $w == \"*\" ]] && ((${#w} >= 2)); then
			w=${w:1:${#w}-2}
		else
			w=${w//\\/}
		fi
		[[ $w == "~/"* ]] && w=$HOME/${w#"~/"}
		_rematctl_conn[1]=$w
	fi
	cmd=${pos[0]-}
	[[ $cmd == remat || ($cmd == mem && ${pos[1]-} == reset) ]] && cmd+=" ${pos[1]-}"

	if ((!opt_end)) && [[ $cur == -* ]]; then
		if [[ $cur == --*=* ]]; then
			_rematctl_value "${cur%%=*}" "${cur%%=*}="
			return 0
		fi
		cand=(--socket --control --json --timeout --help --version)
		case $cmd in
		start | save) cand+=(--name) ;;
		stop) cand+=(--no-save --save --name) ;;
		shutdown) cand+=(--no-save --save) ;;
		"remat set") cand+=(--default --force --wait) ;;
		"remat plan" | plan) cand+=(--default --budget) ;;
		"remat auto") cand+=(--budget) ;;
		"remat memlog") cand+=(--count --trace --format) ;;
		watch) cand+=(--interval --count) ;;
		logs) cand+=(-f --follow --interval --count) ;;
		plot) cand+=(--png --svg) ;;
		events) cand+=(--event --count) ;;
		esac
		_rematctl_reply "${cand[@]}"
		return 0
	fi

	case ${#pos[@]}:$cmd in
	0:*)
		_rematctl_reply start plan ls status pause resume stop rm remat mem save eval set logs \
			plot watch events info shutdown help
		;;
	1:remat\ ) _rematctl_reply get plan set costs profile auto memlog ;;
	1:start | 1:plan)
		compopt -o filenames 2>/dev/null
		while IFS= read -r f; do
			cand+=("$f")
		done < <(compgen -d -- "$cur"; compgen -f -X '!*.json' -- "$cur")
		_rematctl_reply "${cand[@]}"
		;;
	1:status | 1:events)
		_rematctl_job_ids
		_rematctl_reply "${_rematctl_jobs[@]}"
		;;
	1:pause)
		_rematctl_job_ids " running "
		_rematctl_reply "${_rematctl_jobs[@]}"
		;;
	1:resume)
		# a paused job goes on; a stopped, failed or interrupted one from its checkpoint
		_rematctl_job_ids " paused stopped failed interrupted "
		_rematctl_reply "${_rematctl_jobs[@]}"
		;;
	1:rm)
		_rematctl_job_ids " finished stopped failed interrupted "
		_rematctl_reply "${_rematctl_jobs[@]}"
		;;
	1:mem)
		_rematctl_job_ids "$_rematctl_live_states"
		_rematctl_reply reset "${_rematctl_jobs[@]}"
		;;
	1:logs | 1:plot)
		# an ended job's log is still there
		_rematctl_job_ids
		_rematctl_reply "${_rematctl_jobs[@]}"
		;;
	*:set)
		# the job, then the live hyperparameters (proto's table, as rematctl set names them)
		# and rematd's priority
		if ((${#pos[@]} == 1)); then
			_rematctl_job_ids "$_rematctl_live_states"
			_rematctl_reply "${_rematctl_jobs[@]}"
		else
			compopt -o nospace 2>/dev/null
			_rematctl_reply lr= schedule= warmup= min_lr_frac= grad_clip= weight_decay= \
				eval.every= save.every= priority=
		fi
		;;
	1:stop | 1:save | 1:eval | 1:watch | 2:remat\ get | 2:remat\ costs | 2:remat\ profile | 2:remat\ auto | 2:remat\ memlog | 2:mem\ reset)
		_rematctl_job_ids "$_rematctl_live_states"
		_rematctl_reply "${_rematctl_jobs[@]}"
		;;
	2:remat\ set | 2:remat\ plan)
		# a job id; with --control the job may be left out, so selectors too
		_rematctl_job_ids "$_rematctl_live_states"
		if [[ ${_rematctl_conn[0]-} == --control ]]; then
			_rematctl_selmode ""
		fi
		_rematctl_reply "${_rematctl_jobs[@]}"
		;;
	*:remat\ set | *:remat\ plan)
		# the job is the first word after "set" unless it is a SELECTOR=MODE
		w=${pos[2]}
		[[ $w == *=* ]] && w=""
		_rematctl_selmode "$w"
		;;
	esac
	return 0
}

complete -F _rematctl rematctl
