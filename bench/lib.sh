# lib.sh — what the benchmark scripts share. Source it; it reads LOG, TMP
# and KEEP_LOGS when called.

# report_logs RC: after a failure (RC ≠ 0) show the tail of every log in
# $LOG and keep them; after success keep them only with KEEP_LOGS=1, else
# remove $TMP (which holds $LOG).
report_logs() {
	local rc=$1 f
	if [[ $rc -ne 0 ]]; then
		echo "FAILED (exit $rc); logs kept in $LOG:" >&2
		for f in "$LOG"/*; do
			[[ -s $f ]] && { echo "--- $f (tail)" >&2; tail -n 15 "$f" >&2; }
		done
	elif [[ $KEEP_LOGS == 1 ]]; then
		echo "logs kept in $LOG"
	else
		rm -rf "$TMP"
	fi
}

# need TOOL...: exit 1 unless every tool is on PATH.
need() {
	local tool
	for tool; do
		command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 1; }
	done
}

# say prints its arguments as one line.
say() { printf '%s\n' "$*"; }

# show prints a command line, as run.
show() { printf '+ %s\n' "$*"; }

# build_ferry sets FERRY to the binary to measure: $FERRY if given, else
# one built from the checkout $REPO into $TMP.
build_ferry() {
	if [[ -n ${FERRY:-} ]]; then
		say "using FERRY=$FERRY"
		return
	fi
	show "go build -o $TMP/ferry ./cmd/ferry"
	(cd "$REPO" && go build -o "$TMP/ferry" ./cmd/ferry)
	FERRY=$TMP/ferry
}

# machine_facts prints the lines every result starts with: date, CPUs,
# memory, kernel, load, Go, and the ferry commit of the checkout $REPO
# (noting changes outside bench/).
machine_facts() {
	local tree
	say "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
	say "cpus:    $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'))"
	say "memory:  $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
	say "kernel:  $(uname -r)"
	say "load:    $(cut -d" " -f1-3 /proc/loadavg) (1, 5, 15 min, before the run)"
	say "go:      $(go version)"
	tree=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo "?")
	[[ -n $(git -C "$REPO" status --porcelain -- . ':!bench' 2>/dev/null) ]] && tree+=" + uncommitted changes outside bench/"
	say "ferry:   $tree"
}

# wait_listen PORT PID: wait up to 10 s until something listens on
# 127.0.0.1:PORT; fail early if process PID exits.
wait_listen() {
	for _ in $(seq 200); do
		[[ -n $(ss -Hltn "sport = :$1") ]] && return 0
		kill -0 "$2" 2>/dev/null || { say "server on port $1 exited" >&2; return 1; }
		sleep 0.05
	done
	say "nothing listens on port $1" >&2
	return 1
}
