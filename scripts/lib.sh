# shellcheck shell=bash
# Shared by the scripts (test, demo, zk-server, zk-ensemble, ...); source it, do not run it.
#   zkl_root                 the repository root (absolute, resolved from this file)
#   zkl_abspath PATH         PATH made absolute against the caller's cwd
#   zkl_deps                 install missing Debian packages (scripts/deps)
#   zkl_build DIR [OPT...]   meson setup (or reconfigure) DIR with -Dwerror=true and the
#                            given -D options, then ninja -C DIR
#   zkl_setup DIR [OPT...]   the same without ninja
#   zkl_build_quiet LOG DIR [OPT...]  the same with the output in LOG, shown on failure
#   zkl_threads_are PID T|run  every thread of PID stopped (T), or none stopped (run)

zkl_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)

zkl_abspath() {
	case "$1" in
		/*) printf '%s\n' "$1" ;;
		*) printf '%s\n' "$PWD/$1" ;;
	esac
}

zkl_deps() {
	"$zkl_root/scripts/deps"
}

zkl_build() {
	zkl_setup "$@" || return
	ninja -C "$1" || return
}

zkl_setup() {
	# Every step checks its status itself: errexit is off when this runs under "if".
	local dir=$1
	shift
	if [[ -f "$dir/meson-private/coredata.dat" ]]; then
		if ! meson setup --reconfigure "$dir" "$zkl_root" -Dwerror=true "$@"; then
			# A build dir of another meson version cannot be reconfigured: start over.
			echo "reconfiguring $dir failed; setting it up again from scratch" >&2
			meson setup --wipe "$dir" "$zkl_root" -Dwerror=true "$@" || return
		fi
	else
		meson setup "$dir" "$zkl_root" -Dwerror=true "$@" || return
	fi
}

zkl_build_quiet() {
	local log=$1
	shift
	if ! zkl_build "$@" >"$log" 2>&1; then
		cat "$log" >&2
		echo "build failed (log above, also in $log)" >&2
		return 1
	fi
}

# Whether every thread of pid is stopped (want=T) or none is (want=run). A SIGSTOP is
# taken by one thread first, which then stops the others: until the last one has, the
# server may still answer a request sent after kill returned (seen on a loaded machine).
zkl_threads_are() {
	local pid=$1 want=$2 t line state
	for t in /proc/"$pid"/task/*/stat; do
		# No process per thread: a JVM has dozens, and this runs while a test waits.
		read -r line 2>/dev/null <"$t" || continue
		state=${line##*) }
		state=${state%% *}
		[[ -z "$state" ]] && continue
		if [[ $want == T ]]; then
			[[ "$state" == T || "$state" == t ]] || return 1
		else
			[[ "$state" == T ]] && return 1
		fi
	done
	return 0
}
