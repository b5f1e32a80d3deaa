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

# in_ns NS CMD...: run CMD in network namespace NS ("" = here).
in_ns() {
	local ns=$1
	shift
	if [[ -n $ns ]]; then ip netns exec "$ns" "$@"; else "$@"; fi
}

# nsexec NS: the "ip netns exec NS " prefix a shown command line gets ("" = none).
nsexec() { [[ -n $1 ]] && printf 'ip netns exec %s ' "$1"; return 0; }

# wait_listen PORT PID [NS]: wait up to 10 s until something listens on
# PORT (in namespace NS, "" = here); fail early if process PID exits.
wait_listen() {
	for _ in $(seq 200); do
		[[ -n $(in_ns "${3:-}" ss -Hltn "sport = :$1") ]] && return 0
		kill -0 "$2" 2>/dev/null || { say "server on port $1 exited" >&2; return 1; }
		sleep 0.05
	done
	say "nothing listens on port $1" >&2
	return 1
}

# median: the median of the numbers on stdin, one a line.
# cleanup: the EXIT trap of the scripts that start servers and the WAN
# link: stop the servers, take the link down, remove $WORK, report the logs.
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop_servers
	wan_down
	rm -rf "$WORK"
	report_logs "$rc"
	exit "$rc"
}

# run_order R N: the kinds 0..N-1 in the order of run R: as listed on odd
# runs, reversed on even ones, so that no kind always runs first.
run_order() {
	local i
	for ((i = 0; i < $2; i++)); do
		if (($1 % 2)); then printf '%s\n' "$i"; else printf '%s\n' "$(($2 - 1 - i))"; fi
	done
}

median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# --- servers (loopback or the bench/wan namespaces) --------------------------
# Each server runs in its own process group (setsid), kept in PGIDS, so that
# stop_servers also ends GCT's forked sessions; ip netns exec execs, so the
# group's leader is the server and PID_<name> its pid. Logs go to
# $LOG/$PHASE-<name>.*.
PGIDS=()

# ports_free "NS..." PORT...: fail unless no socket uses any PORT, here
# ("" in the list) and in each NS.
ports_free() {
	local nss=$1 p ns
	shift
	for p; do
		for ns in $nss ""; do
			if [[ -n $(in_ns "$ns" ss -Htan exclude time-wait "sport = :$p") ]]; then
				say "port $p is in use${ns:+ in $ns}; set PORT_BASE" >&2
				return 1
			fi
		done
	done
}

# start_bg NAME NS PORT OUT CMD...: start CMD in namespace NS as a server in
# its own process group, output to OUT; wait until it listens on PORT (if
# PORT is not empty); set PID_NAME.
start_bg() {
	local name=$1 ns=$2 port=$3 out=$4
	shift 4
	show "$(nsexec "$ns")$*"
	if [[ -n $ns ]]; then
		setsid ip netns exec "$ns" "$@" >"$out" 2>&1 </dev/null &
	else
		setsid "$@" >"$out" 2>&1 </dev/null &
	fi
	local pid=$!
	PGIDS+=("$pid")
	[[ -z $port ]] || wait_listen "$port" "$pid" "$ns"
	eval "PID_$name=$pid"
}

# gct_server NAME NS IP PORT HOME [OPTION...]: a GCT globus-gridftp-server
# for anonymous users (served as nobody) on IP:PORT, in namespace NS (then
# with -hostname IP: GCT resolves its name for PASV); extra options last.
gct_server() {
	local name=$1 ns=$2 ip=$3 port=$4 home=$5
	shift 5
	local cmd=(globus-gridftp-server -aa -anonymous-user nobody -p "$port")
	[[ -n $ns ]] && cmd+=(-hostname "$ip")
	cmd+=(-control-interface "$ip" -data-interface "$ip" -home-dir "$home" -d ERROR -l "$LOG/$PHASE-$name.log" "$@")
	start_bg "$name" "$ns" "$port" "$LOG/$PHASE-$name.out" "${cmd[@]}"
}

# ferry_server NAME NS IP PORT ROOT [OPTION...]: `$FERRY gridftp` for
# anonymous users, writes allowed, on IP:PORT in namespace NS; extra options last.
ferry_server() {
	local name=$1 ns=$2 ip=$3 port=$4 root=$5
	shift 5
	start_bg "$name" "$ns" "$port" "$LOG/$PHASE-$name.log" \
		"$FERRY" gridftp --root "$root" --listen "$ip:$port" --anonymous --anonymous-write --log-level warn "$@"
}

# stop_servers: TERM, then KILL, every process group in PGIDS.
stop_servers() {
	local pg
	for pg in "${PGIDS[@]}"; do kill -TERM -- "-$pg" 2>/dev/null || true; done
	((${#PGIDS[@]})) && sleep 0.5
	for pg in "${PGIDS[@]}"; do kill -KILL -- "-$pg" 2>/dev/null || true; done
	PGIDS=()
}

# --- the emulated WAN (bench/wan) ---------------------------------------------
# Reads WANDIR (bench/wan), WAN_WAIT (s), WAN_CC, WAN_KEEP, LOG; WAN_UP is 1
# while this script's link is up.
WAN_UP=0

# wan_ready: wait up to WAN_WAIT s until the link is free: bench/wan/README.md
# exists (the emulator's owner writes it when done with the namespaces) and
# no delay line runs (someone else's link is up; ours never is here, as
# wan_up follows this). Fails when the wait runs out.
wan_ready() {
	local waited=0
	while [[ ! -f $WANDIR/README.md ]] || "$WANDIR/setup.sh" status 2>/dev/null | grep -q '^delay line running'; do
		if ((waited == 0)); then
			if [[ ! -f $WANDIR/README.md ]]; then
				say "waiting up to $WAN_WAIT s for $WANDIR/README.md (the emulator's owner is still using the namespaces)"
			else
				say "waiting up to $WAN_WAIT s: a delay line is running (someone else's link; if it is a leftover of yours, $WANDIR/setup.sh down)"
			fi
		fi
		((waited >= WAN_WAIT)) && return 1
		sleep 10
		waited=$((waited + 10))
	done
	return 0
}

# wan_up: bring the link up: 60 ms RTT, 1 Gbit/s, 0.01 % loss each way
# (WAN_CC: congestion control in the namespaces); print its congestion
# control and ping; sets WAN_RTT_MS (ping's average).
wan_up() {
	local args=(-delay 30ms -rate 1gbit -loss 0.0001)
	[[ -n ${WAN_CC:-} ]] && args+=(-cc "$WAN_CC")
	show "$WANDIR/setup.sh up ${args[*]}"
	WAN_UP=1
	"$WANDIR/setup.sh" up "${args[@]}" >"$LOG/wan-setup.log" 2>&1 ||
		{ cat "$LOG/wan-setup.log" >&2; return 1; }
	say "  congestion control in ferryA: $(ip netns exec ferryA sysctl -n net.ipv4.tcp_congestion_control)"
	show "ip netns exec ferryA ping -c 5 -i 0.2 10.77.0.2"
	local p
	p=$(ip netns exec ferryA ping -c 5 -i 0.2 10.77.0.2 | tail -1)
	say "  $p"
	WAN_RTT_MS=$(awk -F/ '{print $5}' <<<"$p")
}

# star_up N RATE DELAY LOSS: bring up bench/wan's star of N namespaces,
# ferry0 .. ferryN-1 (10.77.1.10 ..), each behind its own access link of
# RATE, DELAY and LOSS each direction (a path crosses two: RTT 4 × DELAY);
# WAN_CC as for wan_up. Prints the congestion control and ping between the
# first and the last node; sets WAN_RTT_MS.
star_up() {
	local args=(-nodes "$1" -rate "$2" -delay "$3" -loss "$4")
	[[ -n ${WAN_CC:-} ]] && args+=(-cc "$WAN_CC")
	show "$WANDIR/setup.sh up ${args[*]}"
	WAN_UP=1
	"$WANDIR/setup.sh" up "${args[@]}" >"$LOG/wan-setup.log" 2>&1 ||
		{ cat "$LOG/wan-setup.log" >&2; return 1; }
	say "  congestion control in ferry0: $(ip netns exec ferry0 sysctl -n net.ipv4.tcp_congestion_control)"
	local last=10.77.1.$((10 + $1 - 1)) p
	show "ip netns exec ferry0 ping -c 5 -i 0.2 $last"
	p=$(ip netns exec ferry0 ping -c 5 -i 0.2 "$last" | tail -1)
	say "  $p"
	WAN_RTT_MS=$(awk -F/ '{print $5}' <<<"$p")
}

# wan_down: take the link (or star) down if wan_up (star_up) brought it up
# (unless WAN_KEEP=1).
wan_down() {
	if [[ $WAN_UP == 1 && ${WAN_KEEP:-0} != 1 ]]; then
		show "$WANDIR/setup.sh down"
		"$WANDIR/setup.sh" down >>"$LOG/wan-setup.log" 2>&1 || true
		WAN_UP=0
	fi
}
