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

# now: the time, in seconds; since T: the seconds since T (a now), to the
# millisecond.
now() { printf '%s' "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.3f", b - a}'; }

# peak_mib PID: the peak RSS (VmHWM) of process PID in MiB, "-" when it is
# gone.
peak_mib() { awk '/VmHWM/ {printf "%.0f", $2 / 1024; f = 1} END {if (!f) print "-"}' "/proc/$1/status" 2>/dev/null || echo -; }

# say prints its arguments as one line.
say() { printf '%s\n' "$*"; }

# show prints a command line, as run.
show() { printf '+ %s\n' "$*"; }

# --- the row selector ----------------------------------------------------------
# ROWS, read by every script that has more than one row: the rows (cases,
# kinds, parts) to run, by the names its header and bench/README.md give:
# globs, space- or comma-separated (ROWS="big small", ROWS='single-* fml-8-1',
# ROWS=big,cksum); unset or empty, all of them. A space in a row's name
# is matched as "-" (loopback.sh's "ferry MD5" is ferry-MD5).

# row_wanted ROW: whether ROWS selects ROW.
row_wanted() {
	local g gs
	local rows=${ROWS:-}
	read -ra gs <<<"${rows//,/ }"
	((${#gs[@]})) || return 0
	for g in "${gs[@]}"; do
		# shellcheck disable=SC2053 # a glob on purpose
		[[ ${1// /-} == $g ]] && return 0
	done
	return 1
}

# selected_rows ROW...: those of the script's rows ROW... that ROWS selects,
# in their order, on one line; fails on a glob of ROWS that selects none of
# them (a misspelt row).
selected_rows() {
	local g gs r hit out=()
	local rows=${ROWS:-}
	read -ra gs <<<"${rows//,/ }"
	for g in "${gs[@]}"; do
		hit=0
		# shellcheck disable=SC2053 # a glob on purpose
		for r; do [[ ${r// /-} == $g ]] && hit=1; done
		((hit)) || { say "ROWS: $g is none of the rows: $*" >&2; return 1; }
	done
	for r; do row_wanted "$r" && out+=("$r"); done
	say "${out[*]}"
}

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

# wan_up [SETUP-ARG...]: bring the link up with bench/wan/setup.sh's ARGs,
# by default 60 ms RTT, 1 Gbit/s, 0.01 % loss each way (WAN_CC: congestion
# control in the namespaces); print its congestion control and ping; sets
# WAN_RTT_MS (ping's average).
wan_up() {
	local args=(-delay 30ms -rate 1gbit -loss 0.0001)
	(($#)) && args=("$@")
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

# --- copies: the rows, their data, servers and timed runs ------------------
# What bench/copy.sh and bench/matrix.sh share. A script sets WORK (data:
# gct-src, gct-dst, ferry-src, ferry-dst), BIG_BYTES, NSMALL, SMALL_BYTES,
# NMED, MED_BYTES, IP_A, IP_B, NS_A, NS_B, CLIENT (the client's "ip netns
# exec NS" prefix, or none), the ports P_GSRC, P_GDST, P_FSRC, P_FDST,
# FERRY, PHASE (the name results are kept under), RUNS, WARMUP,
# WARMUP_ROWS, CAP, HZ (getconf CLK_TCK), optionally COPY_TIMEOUT (s: a
# copy that takes longer fails), and defines kinds PHASE ROW: one
# line per kind, label|servers|tool|args|flags (see bench/copy.sh).
# --- data --------------------------------------------------------------------
# Made once per phase and row group in gct-src, hard-linked into ferry-src
# (one inode, two roots), removed when no later row of the phase needs it.
data_of() { case $1 in big | cksum) echo big ;; *) echo "$1" ;; esac; }
make_data() { # GROUP
	local g=$1 src=$WORK/gct-src
	case $g in
	big)
		[[ -f $src/big.bin ]] && return 0
		show "head -c $BIG_BYTES /dev/urandom > $src/big.bin"
		head -c "$BIG_BYTES" /dev/urandom >"$src/big.bin"
		chmod 0666 "$src/big.bin"
		ln "$src/big.bin" "$WORK/ferry-src/big.bin"
		;;
	small | medium)
		local dir=small n=$NSMALL sz=$SMALL_BYTES pre=f
		[[ $g == medium ]] && dir=med n=$NMED sz=$MED_BYTES pre=m
		[[ -d $src/$dir ]] && return 0
		mkdir -m 0777 "$src/$dir"
		show "head -c $((n * sz)) /dev/urandom | split -b $sz -a 5 -d - $src/$dir/$pre"
		head -c $((n * sz)) /dev/urandom | split -b "$sz" -a 5 -d - "$src/$dir/$pre"
		chmod 0666 "$src/$dir"/*
		cp -al "$src/$dir" "$WORK/ferry-src/$dir"
		local got
		got=$(find "$WORK/ferry-src/$dir" -type f | wc -l)
		[[ $got == "$n" ]] || { say "made $got files, want $n" >&2; return 1; }
		;;
	esac
}
drop_data() { # GROUP
	case $1 in
	big) rm -f "$WORK"/{gct,ferry}-{src,dst}/big.bin ;;
	small) rm -rf "$WORK"/{gct,ferry}-{src,dst}/small ;;
	medium) rm -rf "$WORK"/{gct,ferry}-{src,dst}/med ;;
	esac
}
path_of() { case $1 in big | cksum) echo big.bin ;; small) echo small/ ;; medium) echo med/ ;; esac; }

# --- servers -----------------------------------------------------------------
start_servers() {
	ports_free "$NS_A $NS_B" "$P_GSRC" "$P_GDST" "$P_FSRC" "$P_FDST"
	gct_server gsrc "$NS_A" "$IP_A" "$P_GSRC" "$WORK/gct-src"
	gct_server gdst "$NS_B" "$IP_B" "$P_GDST" "$WORK/gct-dst"
	ferry_server fsrc "$NS_A" "$IP_A" "$P_FSRC" "$WORK/ferry-src"
	ferry_server fdst "$NS_B" "$IP_B" "$P_FDST" "$WORK/ferry-dst"
}


# cmd_of KINDLINE ROW: the client command line, one word per line.
cmd_of() {
	local label servers tool args flags src dst path
	IFS='|' read -r label servers tool args flags <<<"$1"
	path=$(path_of "$2")
	if [[ $servers == gct ]]; then
		src=ftp://$IP_A:$P_GSRC$WORK/gct-src/$path dst=ftp://$IP_B:$P_GDST$WORK/gct-dst/$path
	else
		src=ftp://$IP_A:$P_FSRC/$path dst=ftp://$IP_B:$P_FDST/$path
	fi
	args=${args//%S/$src}
	args=${args//%D/$dst}
	if [[ $tool == ferry ]]; then printf '%s\n' "$FERRY" copy; else printf '%s\n' globus-url-copy; fi
	# shellcheck disable=SC2086 # split on purpose: no argument has spaces
	printf '%s\n' $args
}

# --- measuring ---------------------------------------------------------------
cpu_ticks() { awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat"; }
settle() { sleep 0.2; }

prepare() { # ROW SERVERS: empty the destination
	local dst=$WORK/$2-dst
	rm -rf "${dst:?}/big.bin" "$dst/small" "$dst/med"
	case $1 in small) mkdir -m 0777 "$dst/small" ;; medium) mkdir -m 0777 "$dst/med" ;; esac
	settle
}

# verify ROW SERVERS CAPPED: prints the number of files that arrived intact.
verify() {
	local src=$WORK/$2-src dst=$WORK/$2-dst dir n=0 sz
	case $1 in
	big | cksum) cmp "$src/big.bin" "$dst/big.bin" >&2 && echo 1 ;;
	small | medium)
		dir=small n=$NSMALL sz=$SMALL_BYTES
		[[ $1 == medium ]] && dir=med n=$NMED sz=$MED_BYTES
		if [[ $3 == cap ]]; then
			local ok=0 f
			for f in "$dst/$dir"/*; do
				[[ -f $f && $(stat -c %s "$f") == "$sz" ]] && cmp -s "$f" "$src/$dir/${f##*/}" && ok=$((ok + 1))
			done
			echo "$ok"
			return 0
		fi
		local got
		got=$(find "$dst/$dir" -type f | wc -l)
		[[ $got == "$n" ]] || { say "$2: $got files arrived, want $n" >&2; return 1; }
		diff -rq "$src/$dir" "$dst/$dir" >&2 || return 1
		echo "$n"
		;;
	esac
}

NFAIL=0
# fail REASON: one() reports a failed copy; the client's output is kept.
fail() {
	cp "$TMP/client.out" "$LOG/failed-$$-$RANDOM.out"
	echo "FAIL $*"
}

# one ROW KINDLINE: one timed, verified copy; prints
# "secs files src_cpu dst_cpu client_cpu" (cpu in s).
one() {
	local row=$1 line=$2 label servers tool args flags spid dpid t0 t1 s0 d0 s1 d1 rc=0 files
	IFS='|' read -r label servers tool args flags <<<"$line"
	if [[ $servers == gct ]]; then spid=$PID_gsrc dpid=$PID_gdst; else spid=$PID_fsrc dpid=$PID_fdst; fi
	local cmd=()
	mapfile -t cmd < <(cmd_of "$line" "$row")
	if [[ $flags == cap ]]; then
		cmd=(timeout "$CAP" "${cmd[@]}")
	elif [[ -n ${COPY_TIMEOUT:-} ]]; then
		cmd=(timeout "$COPY_TIMEOUT" "${cmd[@]}")
	fi
	prepare "$row" "$servers"
	s0=$(cpu_ticks "$spid") d0=$(cpu_ticks "$dpid")
	echo "### $PHASE $row [$label] ${cmd[*]}" >>"$LOG/client.log"
	t0=$(date +%s%N)
	/usr/bin/time -f '%U %S' -o "$TMP/client.time" "${CLIENT[@]}" "${cmd[@]}" >"$TMP/client.out" 2>&1 || rc=$?
	t1=$(date +%s%N)
	cat "$TMP/client.out" >>"$LOG/client.log"
	[[ $flags == cap || $rc == 124 ]] && sleep 1 # let the servers' sessions of a killed client end
	: >"$TMP/settings"
	if [[ $tool == ferry ]]; then
		grep '^settings:' "$TMP/client.out" | sed 's/^settings: //' >"$TMP/settings" || true
	fi
	# A failed copy is reported and counted, not fatal: the other kinds still run.
	if [[ $rc == 124 && $flags != cap ]]; then
		fail "timed out after $COPY_TIMEOUT s"
		return 0
	fi
	if [[ $rc != 0 && ! ($flags == cap && $rc == 124) ]]; then
		fail "exit $rc: $(grep -v '^$' "$TMP/client.out" | tail -n 2 | tr '\n' ' ')"
		return 0
	fi
	if [[ $tool == ferry ]] && ! grep -Eq ' 0 failed' "$TMP/client.out"; then
		fail "ferry copy reported failed files"
		return 0
	fi
	settle
	s1=$(cpu_ticks "$spid") d1=$(cpu_ticks "$dpid")
	if ! files=$(verify "$row" "$servers" "$flags"); then
		fail "verification failed (exit $rc)"
		return 0
	fi
	# time(1) puts "Command exited with non-zero status N" first when it did
	awk -v ns=$((t1 - t0)) -v f="$files" -v s=$((s1 - s0)) -v d=$((d1 - d0)) -v hz="$HZ" 'NF {u = $1; y = $2} END {
		printf "%.4f %d %.2f %.2f %.2f\n", ns / 1e9, f, s / hz, d / hz, u + y }' "$TMP/client.time"
}

declare -A RES SET # RES[phase,row,i] = result lines; SET[phase,row,i] = ferry settings seen
declare -A LABEL CMDLINE FAILS
run_row() {
	local row=$1 i n r line res order=()
	local lines=()
	mapfile -t lines < <(kinds "$PHASE" "$row")
	n=${#lines[@]}
	say "== $PHASE row $row"
	for ((i = 0; i < n; i++)); do
		LABEL[$PHASE,$row,$i]=${lines[i]%%|*}
		local cmd=()
		mapfile -t cmd < <(cmd_of "${lines[i]}" "$row")
		[[ ${lines[i]} == *'|cap' ]] && cmd=(timeout "$CAP" "${cmd[@]}")
		CMDLINE[$PHASE,$row,$i]="$(nsexec "$NS_A")${cmd[*]}"
		show "${CMDLINE[$PHASE,$row,$i]}"
	done
	if [[ $WARMUP == 1 && $PHASE == loop && " $WARMUP_ROWS " == *" $row "* ]]; then
		for ((i = 0; i < n; i++)); do
			[[ ${lines[i]} == *'|cap' ]] && continue
			one "$row" "${lines[i]}" >/dev/null
		done
		say "  (warm-up: one untimed copy of each kind)"
	fi
	for ((r = 1; r <= RUNS; r++)); do
		for i in $(run_order "$r" "$n"); do
			line=${lines[i]}
			[[ $line == *'|cap' && $r -gt 1 ]] && continue
			res=$(one "$row" "$line")
			if [[ $res == FAIL* ]]; then
				FAILS[$PHASE,$row,$i]=$((${FAILS[$PHASE,$row,$i]:-0} + 1))
				say "  run $r $(printf '%-44s' "${LABEL[$PHASE,$row,$i]}:") FAILED: ${res#FAIL }"
				KEEP_LOGS=1 NFAIL=$((NFAIL + 1))
				continue
			fi
			RES[$PHASE,$row,$i]+="$res"$'\n'
			local st=""
			if [[ $line == *'|ferry|ferry|'* ]]; then
				st=$(<"$TMP/settings")
				SET[$PHASE,$row,$i]+="$st"$'\n'
				st="  [$st]"
			fi
			say "  run $r $(printf '%-44s' "${LABEL[$PHASE,$row,$i]}:") $(awk '{printf "%7.3f s  %5d files  cpu s: src %.2f dst %.2f client %.2f", $1, $2, $3, $4, $5}' <<<"$res")$st"
		done
	done
	prepare "$row" gct
	prepare "$row" ferry
	NK[$PHASE,$row]=$n
}
declare -A NK

# field PHASE ROW I COL: median of one column.
field() { printf '%s' "${RES[$1,$2,$3]:-}" | awk -v c="$4" 'NF {print $c}' | median; }
nruns() { printf '%s' "${RES[$1,$2,$3]:-}" | awk 'NF' | wc -l; }

# --- results of run_row ---
want_files() { case $1 in small) echo "$NSMALL" ;; medium) echo "$NMED" ;; *) echo 1 ;; esac; }
# rate PHASE ROW I: files per second (the measure every ratio uses).
rate() { awk -v s="$(field "$1" "$2" "$3" 1)" -v n="$(field "$1" "$2" "$3" 2)" 'BEGIN {printf "%.6f", n / s}'; }
# best PHASE ROW GLOB: the index of the fastest kind whose label matches GLOB
# (kinds against the ferry servers, "@ferry", left out).
best() {
	local i b=-1 br=-1 r
	for ((i = 0; i < ${NK[$1,$2]}; i++)); do
		# shellcheck disable=SC2053 # glob on purpose
		[[ ${LABEL[$1,$2,$i]} == $3 && ${LABEL[$1,$2,$i]} != *@ferry* ]] || continue
		[[ $(nruns "$1" "$2" "$i") != 0 ]] || continue
		r=$(rate "$1" "$2" "$i")
		if awk -v a="$r" -v b="$br" 'BEGIN {exit !(a > b)}'; then b=$i br=$r; fi
	done
	echo "$b"
}
