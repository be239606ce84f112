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
		exec "${argv[@]}" --name "$w" </dev/null >>"$run/workers/$w.log" 2>&1
	) &
	echo "$!" >"$run/workers/$w.pid.tmp"
	# Not our job to report when it is killed (the injector does that on purpose).
	disown "$!"
	mv "$run/workers/$w.pid.tmp" "$run/workers/$w.pid"
}
