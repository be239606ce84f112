# shellcheck shell=bash
# Shared by tests/stress/run and tests/stress/inject; source it, do not run it.
#
# A run directory RUN holds:
#   worker.argv      the worker's command line, one argument a line, without --name
#   workers/W.pid    the pid of worker W's current process (W = w1, w2, ...)
#   workers/W.log    its stderr and stdout, every incarnation appended
#   faults.log       "FAULT KIND T0_NS T1_NS DETAIL" lines from the injector
#   resource.log     the resource's log (see resource.c)

# The pid of a live (not zombie) process, or failure.
st_alive() {
	local pid=$1 state
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	state=$(sed -e 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || return 1
	[[ -n "$state" && "$state" != Z && "$state" != X ]]
}

# Whether pid is stopped (SIGSTOP).
st_stopped() {
	local state
	state=$(sed -e 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
	[[ "$state" == T ]]
}

# The current pid of worker W in run dir RUN, if it is alive.
st_worker_pid() {
	local run=$1 w=$2 pid
	[[ -s "$run/workers/$w.pid" ]] || return 1
	pid=$(cat "$run/workers/$w.pid")
	st_alive "$pid" || return 1
	echo "$pid"
}

# Starts worker W in the background (a new incarnation after a kill) and records its pid.
# The worker's descriptors above 2 are closed: it must not hold a pipe of our caller.
st_start_worker() {
	local run=$1 w=$2
	local -a argv
	mapfile -t argv <"$run/worker.argv"
	(
		for fd in /proc/"$BASHPID"/fd/*; do
			fd=${fd##*/}
			if ((fd > 2)); then
				exec {fd}>&-
			fi
		done
		# With the firewall (run.uids), each worker runs as a user id of its own, so
		# that the injector can cut it off from ZooKeeper (st_fw_*).
		local -a as=()
		if [[ -s "$run/uids" ]]; then
			as=(setpriv --reuid "$(st_worker_uid "$run" "$w")" --regid
				"$(st_worker_uid "$run" "$w")" --clear-groups)
		fi
		exec "${as[@]}" "${argv[@]}" --name "$w" </dev/null >>"$run/workers/$w.log" 2>&1
	) &
	echo "$!" >"$run/workers/$w.pid.tmp"
	# Not our job to report when it is killed (the injector does that on purpose).
	disown "$!"
	mv "$run/workers/$w.pid.tmp" "$run/workers/$w.pid"
}

# The firewall: when RUN/uids holds "BASE CHAIN", worker wN runs as user id BASE+N; a
# mangle rule marks its connections with mark BASE+N, and st_fw_cut drops the packets
# of that worker's connections in one direction (out: what it sends, in: what it is
# sent) or both, in the filter chain CHAIN, until st_fw_heal.
st_worker_uid() {
	local base
	read -r base _ <"$1/uids"
	echo $((base + ${2#w}))
}

st_fw() {
	iptables -w "$@"
}

# Sets up the chains (root only). Fails if the firewall is not usable.
st_fw_setup() {
	local run=$1 base=$2 workers=$3 chain i
	chain="ZKLSTRESS$$"
	st_fw -t mangle -N "$chain" && st_fw -t mangle -I OUTPUT -j "$chain" &&
		st_fw -N "$chain" && st_fw -I OUTPUT -j "$chain" || return 1
	for ((i = 1; i <= workers; i++)); do
		st_fw -t mangle -A "$chain" -m owner --uid-owner $((base + i)) \
			-j CONNMARK --set-mark $((base + i)) || return 1
	done
	echo "$base $chain" >"$run/uids"
}

st_fw_cut() {
	local run=$1 w=$2 dir=$3 chain d x
	read -r _ chain <"$run/uids"
	case "$dir" in
		out) d=(ORIGINAL) ;;
		in) d=(REPLY) ;;
		*) d=(ORIGINAL REPLY) ;;
	esac
	for x in "${d[@]}"; do
		st_fw -A "$chain" -m connmark --mark "$(st_worker_uid "$run" "$w")" \
			-m conntrack --ctdir "$x" -j DROP
	done
}

st_fw_heal() {
	local chain
	[[ -s "$1/uids" ]] || return 0
	read -r _ chain <"$1/uids"
	st_fw -F "$chain" 2>/dev/null || true
}

# Removes every rule and chain of the run (on every exit path).
st_fw_remove() {
	local chain t
	[[ -s "$1/uids" ]] || return 0
	read -r _ chain <"$1/uids"
	for t in filter mangle; do
		while st_fw -t "$t" -D OUTPUT -j "$chain" 2>/dev/null; do :; done
		st_fw -t "$t" -F "$chain" 2>/dev/null || true
		st_fw -t "$t" -X "$chain" 2>/dev/null || true
	done
}
