#!/usr/bin/env bash
# multilink.sh — issue 13: one file to 1, 2, 4 and 8 destinations over an
# emulated WAN, each server in its own network namespace behind its own
# access link (bench/wan's star: setup.sh up -nodes N). ferry's multilink
# layer (`ferry gridftp --multicast`, driven by globus-url-copy -MC) at
# fan-out 1, 2 and 4, against serial copies, against globus-url-copy -MC to
# GCT servers on the same trees, and against the single-destination time;
# iperf3 on the same links as the physical limit.
#
#   bench/multilink.sh                                  # RUNS=2, 64 MiB, 50 Mbit/s links
#   SIZE_MIB=1024 RUNS=1 ROWS="single-* fml-8-1 gml-8-1" bench/multilink.sh
#   FERRY=/path/to/ferry bench/multilink.sh             # measure that binary instead of building one
#
# The star: bench/wan/setup.sh up -nodes DMAX+1 -rate RATE -delay DELAY -loss LOSS
# (ferry0 .. ferryDMAX at 10.77.1.10 ..; every node's uplink and downlink
# capped at RATE, DELAY each way on each, so a path has RTT 4 × DELAY,
# 60 ms by default; congestion control: the namespaces' default, bbr on
# these machines, WAN_CC to change it). Before bringing it up the script
# waits up to WAN_WAIT s while bench/wan/README.md is missing or a delay
# line runs (someone else's link); it takes the star down on exit
# (WAN_KEEP=1 keeps it). ferry0 holds the source; ferryI (I ≥ 1) is
# destination I. Every node runs a `ferry gridftp --multicast` (root
# $WORK/nI/ferry) and a GCT server with -fs-whitelist file,gridftp_multicast
# (home $WORK/nI/gct); ferry1 .. ferryDMAX an iperf3 server. Every client
# runs in ferry0. Files live in /dev/shm.
#
# Cases (ids; ROWS and SKIP take globs of them):
#   iperf-D          iperf3 -n SIZE from ferryI to ferryI+1 for I = 0 .. D-1, all at
#                    once (the chain's pattern: every node's uplink and downlink
#                    carry one flow); the time until the last ends. D = 1 and DMAX.
#   single-ferry     ferry copy -q SRC DST1 between two ferry servers (ferry chooses
#                    streams; the reference of every ferry row's ratio)
#   single-gct       globus-url-copy SRC DST1 between two GCT servers (stream mode:
#                    one bbr stream fills the link; the reference of the GCT rows)
#   serial           ferry copy -q SRC DSTI for I = 1 .. DMAX, one after another
#                    (each verified); serial D is the time at which copy D ended,
#                    which is what D copies one after another take.
#   fml-D-C          globus-url-copy -MC FILE SRC to ferry servers: FILE lists
#                    DST1 .. DSTD, each line "ftp://ferryI:PORT/big.bin?cc=C": DST1 is
#                    the first hop (no DST argument: the first line's options are
#                    its own), every hop forwards to C children (GCT's plan,
#                    front-first; the script prints each tree). A fan-out that
#                    makes the same tree as a smaller one is not run again.
#   gml-D-C          the same file for GCT servers ("?cc=C;tcpbs=GCT_TCPBS": GCT's
#                    children get a fixed 128 KiB TCP buffer otherwise, which caps
#                    each hop at ~17 Mb/s at 60 ms; ferry's are autotuned).
#                    No -p: GCT corrupts the copies with parallel streams into the
#                    first hop (reference grid-extensions.md (b), bug 5).
#   gml-DMAX-1-default  (EXTRA=1) the GCT chain without tcpbs, as -MC gives it.
#   fml-DMAX-1-p4, gml-DMAX-1-p4  (EXTRA=1) the chains with globus-url-copy -p 4
#                    into the first hop. GCT's is expected to deliver wrong bytes
#                    (bug 5): reported as failed, marked known, not counted.
#   fmulti-D         ferry copy SRC DST1 .. DSTD: the engine builds the tree itself
#                    (see "multi-destination ferry copy" below).
# TIMELINE=1: during each copy the destinations' sizes are polled every 50 ms
# and each run's line is followed by when every destination's first bytes
# and last bytes arrived (s after the client started): where a chain or a
# tree spends its time. (Servers that wrote under a temporary name would
# show only the end.)
# Every run: the cases in order, reversed on every other run (run_order).
# Timing is wall-clock around the client (start-up and session set-up
# included). After each case every destination's md5 is compared with the
# source's (iperf3: its exit status); a case that fails or delivers wrong
# bytes is reported as failed, kept out of the medians, and makes the script
# exit 1 after the tables (logs kept). Each case's line also shows the
# machine's CPU use (% of both cores) and the delay line's (% of one core).
# Reported per case: median seconds, ÷ single (the single copy between the
# same kind of servers), effective throughput D × SIZE ÷ s (Mb/s = 10⁶ bit/s).
# Environment: RUNS SIZE_MIB DESTS FANOUTS RATE DELAY LOSS GCT_TCPBS EXTRA
#   TIMELINE ROWS (ONLY) SKIP TIMEOUT WAN_WAIT WAN_KEEP WAN_CC PORT_BASE (3 ports) FERRY KEEP_LOGS=1.
# Needs: go, globus-gridftp-server, globus-url-copy with
# libglobus-xio-gridftp-multicast, iperf3, md5sum, iproute2, root
# (namespaces; GCT serves anonymous users as nobody). Listens only on the
# star's addresses, inside its namespaces.
set -Eeuo pipefail
shopt -s inherit_errexit
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${RUNS:-2}
SIZE_MIB=${SIZE_MIB:-64}
DESTS=${DESTS:-1 2 4 8}
FANOUTS=${FANOUTS:-1 2 4}
RATE=${RATE:-50mbit} DELAY=${DELAY:-15ms} LOSS=${LOSS:-0}
GCT_TCPBS=${GCT_TCPBS:-2097152}
EXTRA=${EXTRA:-1}
TIMELINE=${TIMELINE:-0}
ROWS=${ROWS:-${ONLY:-}} SKIP=${SKIP:-} # ONLY: the old name of ROWS
TIMEOUT=${TIMEOUT:-1800}
WAN_WAIT=${WAN_WAIT:-1200}
WAN_KEEP=${WAN_KEEP:-0}
WAN_CC=${WAN_CC:-}
PORT_BASE=${PORT_BASE:-29931} # below the ephemeral range
KEEP_LOGS=${KEEP_LOGS:-0}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WANDIR=$REPO/bench/wan
WORK=/dev/shm/ferry-ml.$$              # nI/ferry, nI/gct: each node's roots
TMP=$(mktemp -d /tmp/ferry-ml.XXXXXX) # binary, -MC files, logs
LOG=$TMP/logs
mkdir -p "$LOG" "$TMP/mc"
T_START=$(date +%s)
NFAIL=0
PHASE=star

trap cleanup EXIT
trap 'exit 130' INT TERM

need go globus-gridftp-server globus-url-copy iperf3 md5sum ss setsid ip ping timeout
[[ $(id -u) == 0 ]] || { say "run as root (namespaces; GCT serves anonymous users as nobody)" >&2; exit 1; }
DMAX=0
for d in $DESTS; do
	[[ $d =~ ^[1-9][0-9]*$ ]] || { say "DESTS: $d is not a count" >&2; exit 1; }
	((d > DMAX)) && DMAX=$d
done
((DMAX <= 63)) || { say "DESTS: at most 63 destinations" >&2; exit 1; }
for c in $FANOUTS; do [[ $c =~ ^[1-9][0-9]*$ ]] || { say "FANOUTS: $c is not a count" >&2; exit 1; }; done
SIZE=$((SIZE_MIB << 20))
P_F=$PORT_BASE P_G=$((PORT_BASE + 1)) P_I=$((PORT_BASE + 2))

ip_of() { echo "10.77.1.$((10 + $1))"; }

# --- machine -----------------------------------------------------------------
say "== machine"
machine_facts
say "shm:     /dev/shm free: $(df -h --output=avail /dev/shm | tail -1 | tr -d ' ')"
say "tcp cc:  $(sysctl -n net.ipv4.tcp_congestion_control) (root ns)"
say "GCT:     $(globus-gridftp-server -version 2>&1 | head -1); globus-url-copy $(globus-url-copy -version 2>&1 | awk '{print $2}'); $(iperf3 --version | head -1)"
say "runs:    RUNS=$RUNS (median), SIZE_MIB=$SIZE_MIB, DESTS=\"$DESTS\", FANOUTS=\"$FANOUTS\", star: $((DMAX + 1)) nodes, RATE=$RATE DELAY=$DELAY (per link, each way) LOSS=$LOSS${ROWS:+, ROWS=\"$ROWS\"}${SKIP:+, SKIP=\"$SKIP\"}"

say "== build"
build_ferry

# --- trees -------------------------------------------------------------------
# tree CC FIRST URL...: the tree GCT's multicast driver (and ferry's layer,
# which plans the same way) makes: FIRST forwards to min(CC, n) children,
# the first URLs; each then takes, in turn, up to ceil(n / children) of the
# rest. Printed as "1→[2→4,3]".
tree() {
	local cc=$1 first=$2
	shift 2
	local urls=("$@") n=$# k each i m parts=()
	((n)) || { printf '%s' "$first"; return; }
	k=$((cc < n ? cc : n))
	each=$(((n + k - 1) / k))
	local rest=("${urls[@]:k}")
	for ((i = 0; i < k; i++)); do
		m=$((each < ${#rest[@]} ? each : ${#rest[@]}))
		parts+=("$(tree "$cc" "${urls[i]}" "${rest[@]:0:m}")")
		rest=("${rest[@]:m}")
	done
	if ((k > 1)); then
		printf '%s→[%s]' "$first" "$(IFS=,; echo "${parts[*]}")"
	else
		printf '%s→%s' "$first" "${parts[0]}"
	fi
}
tree_of() { # D CC: the tree from the source, node 0
	local d=$1 cc=$2
	printf '0→%s' "$(tree "$cc" 1 $(seq 2 "$d"))"
}

# --- cases -------------------------------------------------------------------
# One line per case: id|label|D|CC|type.
wanted() { # ID: selected by ROWS and not in SKIP
	local g ok=1
	row_wanted "$1" || ok=0
	for g in $SKIP; do [[ $1 == $g ]] && ok=0; done
	((ok))
}
declare -A TREE=()
cases() {
	local d c shape seen
	for d in 1 "$DMAX"; do
		wanted "iperf-$d" && say "iperf-$d|iperf3 ×$d at once (floor)|$d|-|iperf"
		[[ $d == "$DMAX" ]] && break
	done
	wanted single-ferry && say "single-ferry|ferry copy (single)|1|-|fcopy"
	wanted single-gct && say "single-gct|guc → GCT (single)|1|-|gcopy"
	wanted serial && say "serial|ferry copy × D, serial|$DMAX|-|serial"
	for d in $DESTS; do
		seen=""
		for c in $FANOUTS; do
			shape=$(tree_of "$d" "$c")
			[[ " $seen " == *" $shape "* ]] && continue
			seen+=" $shape"
			wanted "fml-$d-$c" && say "fml-$d-$c|ferry -MC fan-out $c|$d|$c|fml"
			wanted "gml-$d-$c" && say "gml-$d-$c|GCT -MC fan-out $c|$d|$c|gml"
		done
		if declare -F cmd_fmulti >/dev/null && wanted "fmulti-$d"; then
			say "fmulti-$d|ferry copy → $d destinations|$d|-|fmulti"
		fi
	done
	if [[ $EXTRA == 1 ]]; then
		wanted "gml-$DMAX-1-default" && say "gml-$DMAX-1-default|GCT -MC fan-out 1, default tcpbs|$DMAX|1|gmldef"
		wanted "fml-$DMAX-1-p4" && say "fml-$DMAX-1-p4|ferry -MC fan-out 1, -p 4|$DMAX|1|fmlp4"
		wanted "gml-$DMAX-1-p4" && say "gml-$DMAX-1-p4|GCT -MC fan-out 1, -p 4 (bug 5)|$DMAX|1|gmlp4"
	fi
	return 0
}
known_bad() { [[ $1 == gmlp4 ]]; } # TYPE: expected to fail (GCT's bug 5)

# Paths and URLs. Node I's file is big.bin in its roots.
f_url() { echo "ftp://$(ip_of "$1"):$P_F/big.bin"; }
g_url() { echo "ftp://$(ip_of "$1"):$P_G$WORK/n$1/gct/big.bin"; }
f_path() { echo "$WORK/n$1/ferry/big.bin"; }
g_path() { echo "$WORK/n$1/gct/big.bin"; }

# mcfile TYPE D CC: the -MC file (one line per destination), its path.
mcfile() {
	local t=$1 d=$2 cc=$3 i f=$TMP/mc/$1-$2-$3.mc
	: >"$f"
	for ((i = 1; i <= d; i++)); do
		case $t in
		fml | fmlp4) echo "$(f_url "$i")?cc=$cc" >>"$f" ;;
		gml | gmlp4) echo "$(g_url "$i")?cc=$cc;tcpbs=$GCT_TCPBS" >>"$f" ;;
		gmldef) echo "$(g_url "$i")?cc=$cc" >>"$f" ;;
		esac
	done
	echo "$f"
}

# cmd_fmulti D: ferry copy to nodes 1 .. D at once (engine.CopyMany): the
# engine builds the tree itself (nearest first, a chain for a large file)
# and chooses the streams per hop.
cmd_fmulti() { # D
	local i
	printf '%s\n' "$FERRY" copy -q "$(f_url 0)"
	for ((i = 1; i <= $1; i++)); do f_url "$i"; done
}

# cmd_of TYPE D CC: the client's command, one word a line (run in ferry0).
cmd_of() {
	local t=$1 d=$2 cc=$3
	case $t in
	fcopy) printf '%s\n' "$FERRY" copy -q "$(f_url 0)" "$(f_url 1)" ;;
	gcopy) printf '%s\n' globus-url-copy "$(g_url 0)" "$(g_url 1)" ;;
	fml) printf '%s\n' globus-url-copy -MC "$(mcfile "$t" "$d" "$cc")" "$(f_url 0)" ;;
	fmlp4) printf '%s\n' globus-url-copy -p 4 -MC "$(mcfile "$t" "$d" "$cc")" "$(f_url 0)" ;;
	gml | gmldef) printf '%s\n' globus-url-copy -MC "$(mcfile "$t" "$d" "$cc")" "$(g_url 0)" ;;
	gmlp4) printf '%s\n' globus-url-copy -p 4 -MC "$(mcfile "$t" "$d" "$cc")" "$(g_url 0)" ;;
	fmulti) cmd_fmulti "$d" ;;
	esac
}
# dests_of TYPE D: the destination files, one a line.
dests_of() {
	local i
	for ((i = 1; i <= $2; i++)); do
		case $1 in
		gcopy | gml | gmldef | gmlp4) g_path "$i" ;;
		*) f_path "$i" ;;
		esac
	done
}
# shown TYPE D CC: the command line as run.
shown() {
	local w out="ip netns exec ferry0" words=()
	mapfile -t words < <(cmd_of "$@")
	for w in "${words[@]}"; do out+=" $w"; done
	[[ $1 == iperf ]] && out="ip netns exec ferryI iperf3 -c $(ip_of 1)..$(ip_of "$2") -p $P_I -n $SIZE (I = 0 .. $(($2 - 1)), at once)"
	[[ $1 == serial ]] && out="ip netns exec ferry0 $FERRY copy -q $(f_url 0) $(f_url 1); … $(f_url "$2") (one after another)"
	printf '%s' "$out"
}

# --- measuring ---------------------------------------------------------------
# cpu_snap: "busy total dl" jiffies: the machine's busy and total time, the delay line's.
cpu_snap() {
	local dl=0 pid
	pid=$(cat /run/ferry-wan/delayline.pid 2>/dev/null || true)
	[[ -n $pid && -r /proc/$pid/stat ]] && dl=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	awk -v dl="$dl" '/^cpu / {t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $5 - $6, t, dl}' /proc/stat
}
# cpu_use SNAP0 SNAP1: "machine% dl%" (machine: of both cores; delay line: of one).
cpu_use() {
	local ncpu
	ncpu=$(nproc)
	awk -v a="$1" -v b="$2" -v n="$ncpu" 'BEGIN {
		split(a, x, " "); split(b, y, " "); t = y[2] - x[2]
		if (t <= 0) { print "? ?"; exit }
		printf "%.0f %.0f\n", 100 * (y[1] - x[1]) / t, 100 * n * (y[3] - x[3]) / t }'
}

# verify TYPE D: every destination's md5 is the source's.
verify() {
	local f sum bad=()
	while read -r f; do
		[[ -f $f ]] || { bad+=("${f#"$WORK"/}: missing"); continue; }
		sum=$(md5sum <"$f" | cut -d' ' -f1)
		[[ $sum == "$SRC_MD5" ]] || bad+=("${f#"$WORK"/}: $(stat -c %s "$f") bytes, md5 $sum")
	done < <(dests_of "$1" "$2")
	((${#bad[@]} == 0)) || { printf '%s; ' "${bad[@]}"; return 1; }
}
clear_dests() { # TYPE D
	local f
	while read -r f; do rm -f "$f"; done < <(dests_of "$1" "$2")
}

# run_client OUT CMD...: the command in ferry0 under TIMEOUT; sets RC, T_NS.
# With TIMELINE=1 and POLL set (files), polls their sizes meanwhile into
# $TMP/timeline: "seconds-since-start name size ..." every 50 ms.
run_client() {
	local out=$1 t0 t1 poller=""
	shift
	RC=0
	t0=$(date +%s%N)
	if [[ $TIMELINE == 1 && -n ${POLL:-} ]]; then
		poll "${t0:0:10}.${t0:10:6}" $POLL >"$TMP/timeline" &
		poller=$!
	fi
	timeout -k 5 "$TIMEOUT" ip netns exec ferry0 "$@" >"$out" 2>&1 </dev/null || RC=$?
	t1=$(date +%s%N)
	if [[ -n $poller ]]; then
		kill "$poller" 2>/dev/null || true
		wait "$poller" 2>/dev/null || true
		poll_line "${t0:0:10}.${t0:10:6}" $POLL >>"$TMP/timeline" # the sizes at the end
	fi
	T_NS=$((t1 - t0))
}

# poll START FILE...: every 50 ms, the time since START (epoch seconds)
# and each existing FILE's name and size, on one line.
poll() {
	while :; do
		poll_line "$@"
		sleep 0.05
	done
}
poll_line() { # START FILE...
	local start=$1
	shift
	printf '%s %s\n' "$(awk -v a="$EPOCHREALTIME" -v b="$start" 'BEGIN {printf "%.2f", a - b}')" \
		"$(stat -c '%n %s' "$@" 2>/dev/null | tr '\n' ' ')"
}

# timeline D: "I first/last" per destination, from $TMP/timeline: when its
# file first had bytes and when it first had all of them (s).
timeline() {
	local i out=""
	for ((i = 1; i <= $1; i++)); do
		out+=$(awk -v n="/n$i/" -v size="$SIZE" '{
			for (k = 2; k < NF; k += 2) if (index($k, n)) {
				if (first == "" && $(k + 1) > 0) first = $1
				if (last == "" && $(k + 1) >= size) last = $1
			}
		} END {printf " %d:%s/%s", substr(n, 3) + 0, first == "" ? "-" : first, last == "" ? "-" : last}' "$TMP/timeline")
	done
	printf '%s' "$out"
}

secs() { awk -v ns="$1" 'BEGIN {printf "%.3f\n", ns / 1e9}'; }

# one TYPE D CC: one timed, verified case; prints "SECONDS CPU% DL%", or "FAIL why".
# serial prints "T1 T2 ... TD CPU% DL%" (cumulative).
one() {
	local t=$1 d=$2 cc=$3 cmd=() s0 s1 why="" i
	clear_dests "$t" "$d"
	sleep 0.3
	s0=$(cpu_snap)
	case $t in
	iperf)
		local pids=() rcs=() t0 t1
		echo "### iperf-$d" >>"$LOG/client.log"
		t0=$(date +%s%N)
		for ((i = 0; i < d; i++)); do
			timeout -k 5 "$TIMEOUT" ip netns exec "ferry$i" iperf3 -c "$(ip_of $((i + 1)))" -p "$P_I" -n "$SIZE" -f m \
				>"$TMP/iperf.$i" 2>&1 </dev/null &
			pids+=($!)
		done
		for i in "${!pids[@]}"; do
			wait "${pids[i]}" || why+="iperf3 $i→$((i + 1)) exit $? "
		done
		t1=$(date +%s%N)
		for ((i = 0; i < d; i++)); do cat "$TMP/iperf.$i" >>"$LOG/client.log"; done
		s1=$(cpu_snap)
		[[ -z $why ]] || { echo "FAIL $why"; return 0; }
		echo "$(secs $((t1 - t0))) $(cpu_use "$s0" "$s1")"
		return 0
		;;
	serial)
		local cum=0 out=""
		for ((i = 1; i <= d; i++)); do
			cmd=("$FERRY" copy -q "$(f_url 0)" "$(f_url "$i")")
			echo "### serial $i: ${cmd[*]}" >>"$LOG/client.log"
			run_client "$TMP/client.out" "${cmd[@]}"
			cat "$TMP/client.out" >>"$LOG/client.log"
			cum=$((cum + T_NS))
			if [[ $RC != 0 ]]; then
				why="copy $i: exit $RC: $(grep -v '^$' "$TMP/client.out" | tail -n 2 | tr '\n' ' ')"
				break
			fi
			out+="$(secs "$cum") "
		done
		s1=$(cpu_snap)
		if [[ -z $why ]]; then
			why=$(verify serial "$d") || why="wrong bytes: $why"
		fi
		clear_dests serial "$d"
		[[ -z $why ]] || { cp "$TMP/client.out" "$LOG/failed-serial-$RANDOM.out"; echo "FAIL $why"; return 0; }
		echo "$out$(cpu_use "$s0" "$s1")"
		return 0
		;;
	esac
	mapfile -t cmd < <(cmd_of "$t" "$d" "$cc")
	echo "### $t $d $cc: ${cmd[*]}" >>"$LOG/client.log"
	[[ $t == fml* || $t == gml* ]] && cat "$(mcfile "$t" "$d" "$cc")" >>"$LOG/client.log"
	POLL=$(dests_of "$t" "$d" | paste -sd' ')
	run_client "$TMP/client.out" "${cmd[@]}"
	POLL=""
	s1=$(cpu_snap)
	cat "$TMP/client.out" >>"$LOG/client.log"
	if [[ $RC != 0 ]]; then
		why="exit $RC: $(grep -v '^$' "$TMP/client.out" | tail -n 3 | tr '\n' ' ')"
	else
		why=$(verify "$t" "$d") || why="wrong bytes: $why"
	fi
	clear_dests "$t" "$d"
	if [[ -n $why ]]; then
		cp "$TMP/client.out" "$LOG/failed-$t-$d-$cc-$RANDOM.out"
		echo "FAIL $why"
		return 0
	fi
	echo "$(secs "$T_NS") $(cpu_use "$s0" "$s1")"
	[[ $TIMELINE != 1 ]] || echo "timeline (destination: first/last bytes, s):$(timeline "$d")" >"$TMP/timeline.line"
}

# --- star, data, servers -------------------------------------------------------
if ! wan_ready; then
	say "== $WANDIR/README.md is missing or a link busy after $WAN_WAIT s; nothing measured"
	exit 1
fi
say "== star"
star_up $((DMAX + 1)) "$RATE" "$DELAY" "$LOSS"
RTT_MS=$WAN_RTT_MS

say "== data"
for ((i = 0; i <= DMAX; i++)); do mkdir -p -m 0777 "$WORK/n$i/ferry" "$WORK/n$i/gct"; done
chmod 0755 "$WORK"
show "head -c $SIZE /dev/urandom > $(f_path 0)   # hard-linked as $(g_path 0)"
head -c "$SIZE" /dev/urandom >"$(f_path 0)"
chmod 0666 "$(f_path 0)"
ln "$(f_path 0)" "$(g_path 0)"
SRC_MD5=$(md5sum <"$(f_path 0)" | cut -d' ' -f1)
say "  md5 $SRC_MD5"

say "== servers"
nss=$(for ((i = 0; i <= DMAX; i++)); do printf 'ferry%d ' "$i"; done)
ports_free "$nss" "$P_F" "$P_G" "$P_I"
for ((i = 0; i <= DMAX; i++)); do
	ferry_server "f$i" "ferry$i" "$(ip_of "$i")" "$P_F" "$WORK/n$i/ferry" --multicast
	gct_server "g$i" "ferry$i" "$(ip_of "$i")" "$P_G" "$WORK/n$i/gct" -fs-whitelist file,gridftp_multicast
	((i == 0)) || start_bg "iperf$i" "ferry$i" "$P_I" "$LOG/$PHASE-iperf$i.log" iperf3 -s -B "$(ip_of "$i")" -p "$P_I"
done

# --- runs --------------------------------------------------------------------
declare -A RES=() FAILS=() LABEL=() CMDLINE=() KNOWN=() CPU=()
mapfile -t LINES < <(cases)
N=${#LINES[@]}
((N)) || { say "no case selected (ROWS=\"$ROWS\", SKIP=\"$SKIP\")" >&2; exit 1; }
say "== cases (trees from the source, node 0; node I = ferryI, $(ip_of 1) ..)"
for ((i = 0; i < N; i++)); do
	IFS='|' read -r id label d cc t <<<"${LINES[i]}"
	LABEL[$id]=$label
	CMDLINE[$id]=$(shown "$t" "$d" "$cc")
	[[ $cc != - ]] && TREE[$id]=$(tree_of "$d" "$cc")
	say "  $id: ${TREE[$id]:+tree ${TREE[$id]}; }${CMDLINE[$id]}"
	[[ $t == fml* || $t == gml* ]] && say "      -MC file: $(paste -sd' ' "$(mcfile "$t" "$d" "$cc")")"
done

for ((r = 1; r <= RUNS; r++)); do
	say "== run $r of $RUNS"
	for i in $(run_order "$r" "$N"); do
		IFS='|' read -r id label d cc t <<<"${LINES[i]}"
		res=$(one "$t" "$d" "$cc")
		if [[ $res == FAIL* ]]; then
			if known_bad "$t"; then
				KNOWN[$id]+="run $r: ${res#FAIL }"$'\n'
				say "  run $r $(printf '%-22s' "$id:") failed, as known: ${res#FAIL }"
			else
				FAILS[$id]=$((${FAILS[$id]:-0} + 1))
				NFAIL=$((NFAIL + 1)) KEEP_LOGS=1
				say "  !!! FAILED run $r $id: ${res#FAIL }"
			fi
			continue
		fi
		read -ra f <<<"$res"
		n=${#f[@]}
		CPU[$id]+="${f[n - 2]} ${f[n - 1]}"$'\n'
		if [[ $t == serial ]]; then
			for dd in $DESTS; do RES[serial-$dd]+="${f[dd - 1]}"$'\n'; done
			say "  run $r $(printf '%-22s' "$id:") $(for dd in $DESTS; do printf 'D=%s %.3f s  ' "$dd" "${f[dd - 1]}"; done) cpu ${f[n - 2]}% dl ${f[n - 1]}%"
		else
			RES[$id]+="${f[0]}"$'\n'
			say "  run $r $(printf '%-22s' "$id:") $(printf '%8.3f s' "${f[0]}")  $(awk -v d="$d" -v s="${f[0]}" -v b="$SIZE" 'BEGIN {printf "%7.1f Mb/s effective", d * b * 8 / s / 1e6}')  cpu ${f[1]}% dl ${f[2]}%"
			if [[ $TIMELINE == 1 && -f $TMP/timeline.line ]]; then
				say "        $(<"$TMP/timeline.line")"
				rm -f "$TMP/timeline.line"
			fi
		fi
	done
done
stop_servers

# --- tables ------------------------------------------------------------------
nruns() { printf '%s' "${RES[$1]:-}" | awk 'NF' | wc -l; }
med() { printf '%s' "${RES[$1]:-}" | awk 'NF' | median; }
medcpu() { printf '%s' "${CPU[$1]:-}" | awk -v k="$2" 'NF {print $k}' | median; } # ID FIELD(1 machine, 2 delay line)
ref_of() { # ID: the single case its ratio is to
	case $1 in gml-* | single-gct) echo single-gct ;; *) echo single-ferry ;; esac
}
ratio() { # A B: med A ÷ med B, "" when either has no run
	[[ $(nruns "$1") != 0 && $(nruns "$2") != 0 ]] || return 0
	awk -v a="$(med "$1")" -v b="$(med "$2")" 'BEGIN {printf "%.2f", a / b}'
}
say ""
say "== results: median of $RUNS runs; $SIZE_MIB MiB ($SIZE bytes); star of $((DMAX + 1)) nodes, every access link $RATE each way, $DELAY each way (RTT $RTT_MS ms between two nodes), loss $LOSS"
say "   ÷ single: this ÷ the single copy between the same servers (ferry rows and iperf3: ferry copy; GCT rows: guc → GCT)"
say "   effective: D × size ÷ s; cpu: the machine's (of $(nproc) cores) and the delay line's (of one core), median"
say ""
say "| D | case | tree | runs | median s | ÷ single | effective Mb/s | cpu % (machine / delay line) |"
say "|---:|---|---|---:|---:|---:|---:|---|"
for d in $DESTS; do
	for ((i = 0; i < N; i++)); do
		IFS='|' read -r id label dd cc t <<<"${LINES[i]}"
		key=$id
		if [[ $t == serial ]]; then
			key=serial-$d label="ferry copy × $d, serial"
			RES[$key]=${RES[$key]:-}
			FAILS[$key]=${FAILS[$id]:-0}
		elif [[ $dd != "$d" ]]; then
			continue
		fi
		runs=$(nruns "$key")
		nf=${FAILS[$key]:-0}
		((nf)) && runs+=" (+$nf **failed**)"
		if [[ -n ${KNOWN[$id]:-} ]]; then
			say "| $d | $label | ${TREE[$id]:-} | $runs | – | **wrong bytes** (known) | – | – |"
			continue
		fi
		if [[ $(nruns "$key") == 0 ]]; then
			say "| $d | $label | ${TREE[$id]:-} | $runs | – | **every run failed** | – | – |"
			continue
		fi
		rt=$(ratio "$key" "$(ref_of "$id")")
		awk -v d="$d" -v l="$label" -v tr="${TREE[$id]:-}" -v runs="$runs" -v s="$(med "$key")" -v rt="${rt:-–}" -v b="$SIZE" \
			-v c1="$(medcpu "$id" 1)" -v c2="$(medcpu "$id" 2)" 'BEGIN {
			printf "| %s | %s | %s | %s | %.3f | %s | %.1f | %s / %s |\n", d, l, tr, runs, s, rt, d * b * 8 / s / 1e6, c1, c2 }'
	done
done

# The issue's goals.
say ""
say "== the issue's goals (ferry -MC = globus-url-copy -MC to ferry servers)"
say ""
say "| measure | value | goal |"
say "|---|---:|---|"
best="" bs=""
for c in $FANOUTS; do
	id=fml-$DMAX-$c
	[[ $(nruns "$id") != 0 ]] || continue
	s=$(med "$id")
	if [[ -z $bs ]] || awk -v a="$s" -v b="$bs" 'BEGIN {exit !(a < b)}'; then best=$id bs=$s; fi
done
if [[ -n $best && $(nruns single-ferry) == 0 ]]; then
	say "| D = $DMAX, best ferry fan-out (${best##*-}) ÷ single ferry copy | – (single-ferry not run) | ≤ 1.5 |"
elif [[ -n $best ]]; then
	v=$(ratio "$best" single-ferry)
	say "| D = $DMAX, best ferry fan-out (${best##*-}) ÷ single ferry copy | ${v:-–} | ≤ 1.5 — $(awk -v v="${v:-99}" 'BEGIN {print (v <= 1.5) ? "met" : "**not met**"}') |"
fi
for d in $DESTS; do
	for c in $FANOUTS; do
		[[ $(nruns "fml-$d-$c") != 0 && $(nruns "gml-$d-$c") != 0 ]] || continue
		v=$(ratio "gml-$d-$c" "fml-$d-$c")
		say "| D = $d, fan-out $c: GCT s ÷ ferry s (same tree) | ${v}× | > 1 — $(awk -v v="$v" 'BEGIN {print (v > 1) ? "met" : "**not met**"}')$(awk -v v="$v" 'BEGIN {if (v > 0.97 && v < 1.03) print " (within ±3 %: a tie at this noise)"}') |"
	done
done
say ""
say "rtt (ping average, ferry0 → ferry$DMAX): $RTT_MS ms"
if ((${#KNOWN[@]})); then
	say "known failures (GCT's bug 5: parallel streams into the first hop):"
	for id in "${!KNOWN[@]}"; do printf '%s' "${KNOWN[$id]}" | sed "s/^/  $id: /"; done
fi
say ""
say "== commands (as run; paths are this run's)"
for ((i = 0; i < N; i++)); do
	IFS='|' read -r id _ <<<"${LINES[i]}"
	say "  $id: ${CMDLINE[$id]}"
done
say ""
say "delay line counters at the end:"
kill -USR1 "$(cat /run/ferry-wan/delayline.pid)" 2>/dev/null && sleep 0.3
grep -E ' (up|down) fwd |unroutable' /run/ferry-wan/delayline.log | tail -n $((2 * (DMAX + 1) + 1)) | sed 's/^/  /' || true
say ""
say "total time: $(($(date +%s) - T_START)) s"
if ((NFAIL)); then
	say ""
	say "!!! $NFAIL cases FAILED (see the lines marked !!! above); client output in $LOG/failed-*.out, all of it in $LOG/client.log"
	exit 1
fi
