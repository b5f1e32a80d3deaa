#!/usr/bin/env bash
# striping.sh — issue 18: striped endpoints. One large file from a striped
# endpoint of W movers to another of the same width (W = 1, 2, 4), every
# mover in its own network namespace behind its own emulated access link of
# the same rate (bench/wan's star: setup.sh up -nodes 9): GCT's striped
# server (a front end with -r and data nodes with -dn) against ferry's
# (`ferry gridftp --movers` and `--mover`), with iperf3 over the same links
# as the physical limit.
#
# Why 100 Mbit/s: 4 pairs at once stay link-bound (iperf3 4 pairs 374 Mb/s =
# 3.99 × one pair) with the machine ~57 % busy (delay line ~50 % of a core,
# GCT's servers ~25 %) during GCT's width-4 copy (bench/LOG.md, issue 18).
#
#   bench/striping.sh                                     # RUNS=1, 2 GiB, 100 Mbit/s links (~11 min GCT only)
#   SIZE_MIB=256 WIDTHS="1 4" bench/striping.sh           # a quick run
#   ROWS="iperf-* gct-*" RUNS=3 bench/striping.sh         # GCT and the floor only, median of 3
#   FERRY=/path/to/ferry bench/striping.sh                # measure that binary instead of building one
#
# The star: bench/wan/setup.sh up -nodes 9 -rate RATE -delay DELAY -loss LOSS
# (ferry0 .. ferry8 at 10.77.1.10 .. 10.77.1.18; every node's uplink and
# downlink capped at RATE, DELAY each way on each, so a path has RTT
# 4 × DELAY, 60 ms by default; congestion control: the namespaces' default,
# bbr on these machines, WAN_CC to change it). Before bringing it up the
# script waits up to WAN_WAIT s while bench/wan/README.md is missing or a
# delay line runs (someone else's link); it takes the star down on exit
# (WAN_KEEP=1 keeps it).
#
#   node 0 (10.77.1.10)          the client: globus-url-copy, ferry copy
#   nodes 1 .. 4 (.11 .. .14)    the source endpoint's movers; its front ends on node 1
#   nodes 5 .. 8 (.15 .. .18)    the destination's movers; its front ends on node 5
#
# Width W uses movers 1 .. W and 5 .. 4+W. The servers are started afresh
# for each width (front ends list exactly W movers) and stopped after it.
# Both endpoints' movers share the host's file system: the source endpoint
# serves $WORK/gct-src (GCT) or $WORK/ferry-src (ferry; a hard link of the
# same file), the destination $WORK/gct-dst or $WORK/ferry-dst (/dev/shm).
#
# Servers, per width W (P_* = PORT_BASE + 0 .. 4):
#   GCT data node, nodes 1..W, 5..4+W:
#       globus-gridftp-server -dn -aa -anonymous-user nobody -p P_GDN -hostname IP
#           -control-interface IP -data-interface IP
#   GCT front end, node 1 (source) and 5 (destination):
#       globus-gridftp-server -aa -anonymous-user nobody -p P_GFE -hostname IP ...
#           -home-dir DIR -r IP1:P_GDN,IP2:P_GDN,...
#     (-aa turns the IPC's GSI off, -si false; globus_i_gfs_config.c)
#   ferry mover (when `ferry gridftp --help` lists --movers), same nodes:
#       ferry gridftp --root DIR --mover --mover-key KEY --listen IP:P_FMV
#   ferry front end, node 1 and 5:
#       ferry gridftp --root DIR --movers IP1:P_FMV,... --mover-key KEY --listen IP:P_FFE
#           --anonymous --anonymous-write
#           FERRY_FE_FLAGS (default: --pasv-any --port-allow 10.77.1.0/24)
#     KEY: head -c 32 /dev/urandom, one per endpoint, shared by its front end
#     and movers. FERRY_MOVER_FLAGS adds flags to the movers. --pasv-any:
#     without it a ferry server refuses globus-url-copy's third-party sender on
#     its passive port ("not the client's address"; guc sends SPAS before STOR).
#   iperf3 -s on nodes 5..4+W.
#
# Cases (ids; ROWS and SKIP take globs of them), for each W in WIDTHS:
#   iperf-W   iperf3 -c 10.77.1.(14+I) -n SIZE/W from node I, I = 1 .. W, all at
#             once: the same bytes over the same links, the physical floor.
#   gct-W     ip netns exec ferry0 globus-url-copy -stripe -p PARALLEL [-sbs SBS] GUC_FLAGS
#             ftp://GCT_FE_SRC/..big.bin ftp://GCT_FE_DST/..big.bin
#   fguc-W    the same globus-url-copy between the two ferry front ends
#   fcopy-W   ferry copy -q FCOPY_FLAGS ftp://FERRY_FE_SRC/big.bin ftp://FERRY_FE_DST/big.bin
#             (the engine may or may not stripe yet)
# The ferry cases run only when `$FERRY gridftp --help` shows --movers; else
# they are listed as pending.
# Every width: RUNS runs, the cases in order, reversed on every other run
# (run_order). Timing is wall-clock around the client (session set-up
# included). After each copy the destination's md5 is compared with the
# source's (iperf3: its exit status); a failed case or wrong bytes is
# reported as failed, kept out of the medians, and makes the script exit 1
# after the tables (logs kept). CPU per case: the machine's busy time (% of
# all cores, from /proc/stat: whoever else runs is in it), and, in % of one
# core, the delay line's, the servers' (every process in ferry1..8, their
# reaped children included) and the client's.
# Reported: median s, Mb/s (SIZE × 8 ÷ s), speed-up (the same kind at
# width 1 ÷ this), ferry ÷ GCT (GCT's s ÷ ferry's at the same width: > 1,
# ferry faster), and the issue's goals: 4 movers ≥ 3.5× one, ferry ≥ 1.0× GCT.
# Environment: RUNS(1) SIZE_MIB(2048) WIDTHS("1 2 4") RATE(100mbit) DELAY(15ms)
#   LOSS(0) PARALLEL(1) SBS("" = the servers' default, blocked 1 MiB) GUC_FLAGS FCOPY_FLAGS
#   FERRY_FE_FLAGS FERRY_MOVER_FLAGS ROWS (ONLY) SKIP TIMEOUT WAN_WAIT WAN_KEEP WAN_CC
#   PORT_BASE (5 ports) FERRY KEEP_LOGS=1.
# Needs: go, globus-gridftp-server, globus-url-copy, iperf3, md5sum, iproute2,
# root (namespaces; GCT serves anonymous users as nobody). Listens only on
# the star's addresses, inside its namespaces.
set -Eeuo pipefail
shopt -s inherit_errexit
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${RUNS:-1}
SIZE_MIB=${SIZE_MIB:-2048}
WIDTHS=${WIDTHS:-1 2 4}
RATE=${RATE:-100mbit} DELAY=${DELAY:-15ms} LOSS=${LOSS:-0}
PARALLEL=${PARALLEL:-1}
SBS=${SBS:-}
FCOPY_FLAGS=${FCOPY_FLAGS:-}
GUC_FLAGS=${GUC_FLAGS:-}
FERRY_FE_FLAGS=${FERRY_FE_FLAGS:---pasv-any --port-allow 10.77.1.0/24}
FERRY_MOVER_FLAGS=${FERRY_MOVER_FLAGS:-}
ROWS=${ROWS:-${ONLY:-}} SKIP=${SKIP:-} # ONLY: the old name of ROWS
TIMEOUT=${TIMEOUT:-1800}
WAN_WAIT=${WAN_WAIT:-1200}
WAN_KEEP=${WAN_KEEP:-0}
WAN_CC=${WAN_CC:-}
PORT_BASE=${PORT_BASE:-29951} # below the ephemeral range
KEEP_LOGS=${KEEP_LOGS:-0}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WANDIR=$REPO/bench/wan
WORK=/dev/shm/ferry-stripe.$$              # gct-src, gct-dst, ferry-src, ferry-dst
TMP=$(mktemp -d /tmp/ferry-stripe.XXXXXX) # binary, keys, logs
LOG=$TMP/logs
mkdir -p "$LOG"
T_START=$(date +%s)
NFAIL=0
PHASE=w0

trap cleanup EXIT
trap 'exit 130' INT TERM

need go globus-gridftp-server globus-url-copy iperf3 md5sum ss setsid ip ping timeout
[[ $(id -u) == 0 ]] || { say "run as root (namespaces; GCT serves anonymous users as nobody)" >&2; exit 1; }
WMAX=0
for w in $WIDTHS; do
	[[ $w =~ ^[1-4]$ ]] || { say "WIDTHS: $w is not 1 .. 4" >&2; exit 1; }
	((w > WMAX)) && WMAX=$w
done
((WMAX)) || { say "WIDTHS is empty" >&2; exit 1; }
[[ $PARALLEL =~ ^[1-9][0-9]*$ ]] || { say "PARALLEL: $PARALLEL is not a count" >&2; exit 1; }
[[ -z $SBS || $SBS =~ ^[0-9]+$ ]] || { say "SBS: $SBS is not a byte count" >&2; exit 1; }
SIZE=$((SIZE_MIB << 20))
P_GFE=$PORT_BASE P_GDN=$((PORT_BASE + 1)) P_FFE=$((PORT_BASE + 2)) P_FMV=$((PORT_BASE + 3)) P_I=$((PORT_BASE + 4))
NODES=9 # the star: 0 client, 1..4 source movers, 5..8 destination movers

ip_of() { echo "10.77.1.$((10 + $1))"; }
src_node() { echo "$1"; }       # I: the source endpoint's mover I (1-based)
dst_node() { echo $((4 + $1)); } # I: the destination's mover I

# --- machine -----------------------------------------------------------------
say "== machine"
machine_facts
say "shm:     /dev/shm free: $(df -h --output=avail /dev/shm | tail -1 | tr -d ' ')"
say "tcp cc:  $(sysctl -n net.ipv4.tcp_congestion_control) (root ns)"
say "GCT:     $(globus-gridftp-server -version 2>&1 | head -1); globus-url-copy $(globus-url-copy -version 2>&1 | awk '{print $2}'); $(iperf3 --version | head -1)"
say "runs:    RUNS=$RUNS (median), SIZE_MIB=$SIZE_MIB, WIDTHS=\"$WIDTHS\", PARALLEL=$PARALLEL, SBS=${SBS:-default}${GUC_FLAGS:+, GUC_FLAGS=\"$GUC_FLAGS\"}${FCOPY_FLAGS:+, FCOPY_FLAGS=\"$FCOPY_FLAGS\"}, star: $NODES nodes, RATE=$RATE DELAY=$DELAY (per link, each way) LOSS=$LOSS${ROWS:+, ROWS=\"$ROWS\"}${SKIP:+, SKIP=\"$SKIP\"}"

say "== build"
build_ferry
FERRY_STRIPED=0
if "$FERRY" gridftp --help 2>&1 | grep -q -- '--movers'; then
	FERRY_STRIPED=1
	say "ferry striped server: present (ferry gridftp --help lists --movers)"
else
	say "ferry striped server: absent (no --movers in ferry gridftp --help): the ferry cases are pending, not run"
fi

# --- cases -------------------------------------------------------------------
wanted() { # ID: selected by ROWS and not in SKIP
	local g ok=1
	row_wanted "$1" || ok=0
	for g in $SKIP; do [[ $1 == $g ]] && ok=0; done
	((ok))
}
KINDS="iperf gct fguc fcopy"
kind_label() {
	case $1 in
	iperf) echo "iperf3 × W pairs at once (floor)" ;;
	gct) echo "guc -stripe → GCT striped" ;;
	fguc) echo "guc -stripe → ferry striped" ;;
	fcopy) echo "ferry copy → ferry striped" ;;
	esac
}
ferry_kind() { [[ $1 == fguc || $1 == fcopy ]]; }
# cases W: the kinds to run at width W, one a line.
cases() {
	local k
	for k in $KINDS; do
		wanted "$k-$1" || continue
		ferry_kind "$k" && ((!FERRY_STRIPED)) && continue
		say "$k"
	done
}

# Paths and URLs.
g_url() { echo "ftp://$(ip_of "$1"):$P_GFE$WORK/gct-$2/big.bin"; } # NODE src|dst
f_url() { echo "ftp://$(ip_of "$1"):$P_FFE/big.bin"; }             # NODE
path_of() { # KIND: the destination file
	case $1 in
	gct) echo "$WORK/gct-dst/big.bin" ;;
	*) echo "$WORK/ferry-dst/big.bin" ;;
	esac
}
guc_flags() {
	local f
	printf '%s\n' -stripe -p "$PARALLEL"
	[[ -z $SBS ]] || printf '%s\n' -sbs "$SBS"
	for f in $GUC_FLAGS; do printf '%s\n' "$f"; done
}
# cmd_of KIND: the client's command, one word a line (run in ferry0).
cmd_of() {
	local f
	case $1 in
	gct) printf '%s\n' globus-url-copy $(guc_flags) "$(g_url 1 src)" "$(g_url 5 dst)" ;;
	fguc) printf '%s\n' globus-url-copy $(guc_flags) "$(f_url 1)" "$(f_url 5)" ;;
	fcopy)
		printf '%s\n' "$FERRY" copy -q
		for f in $FCOPY_FLAGS; do printf '%s\n' "$f"; done
		printf '%s\n' "$(f_url 1)" "$(f_url 5)"
		;;
	esac
}
shown() { # KIND W: the command line as run
	local w out="ip netns exec ferry0" words=()
	if [[ $1 == iperf ]]; then
		printf 'ip netns exec ferryI iperf3 -c 10.77.1.(14+I) -p %s -n %s (I = 1 .. %s, at once)' "$P_I" $((SIZE / $2)) "$2"
		return
	fi
	mapfile -t words < <(cmd_of "$1")
	for w in "${words[@]}"; do out+=" $w"; done
	printf '%s' "$out"
}

# --- measuring ---------------------------------------------------------------
# cpu_snap FILE: the machine's "busy total" jiffies (first line), the delay
# line's "dl J", then "PID J" for every process in ferry1 .. ferry8 (J:
# utime+stime+cutime+cstime: a session that ended was reaped by its daemon).
cpu_snap() {
	local f=$1 pid n
	awk '/^cpu / {t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $5 - $6, t}' /proc/stat >"$f"
	pid=$(cat /run/ferry-wan/delayline.pid 2>/dev/null || true)
	{
		[[ -n $pid && -r /proc/$pid/stat ]] && awk '{print "dl", $14 + $15}' "/proc/$pid/stat"
		for ((n = 1; n < NODES; n++)); do
			for pid in $(ip netns pids "ferry$n" 2>/dev/null); do
				# the comm field may hold spaces: count from the ") "
				sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | awk -v p="$pid" '{print p, $12 + $13 + $14 + $15}' || true
			done
		done
	} >>"$f"
}
# cpu_use SNAP0 SNAP1 CLIENT_J: "machine% dl% servers% client%" (machine:
# of all cores; the others: of one core).
cpu_use() {
	awk -v n="$(nproc)" -v cj="$3" '
		FNR == 1 { if (FILENAME == ARGV[1]) { b0 = $1; t0 = $2 } else { b1 = $1; t1 = $2 }; next }
		FILENAME == ARGV[1] { a[$1] = $2; next }
		{ if ($1 == "dl") dl = $2 - a["dl"]; else srv += $2 - ($1 in a ? a[$1] : 0) }
		END {
			t = t1 - t0
			if (t <= 0) { print "? ? ? ?"; exit }
			# jiffies of one core over the interval: t / n
			printf "%.0f %.0f %.0f %.0f\n", 100 * (b1 - b0) / t, 100 * n * dl / t, 100 * n * srv / t, 100 * n * cj / t
		}' "$1" "$2"
}
secs() { awk -v ns="$1" 'BEGIN {printf "%.3f\n", ns / 1e9}'; }

# run_client OUT CMD...: the command in ferry0 under TIMEOUT; sets RC, T_NS,
# CLIENT_J (its CPU jiffies: this shell's reaped children's, as timeout
# reaps the client).
run_client() {
	local out=$1 t0 t1 j0 j1
	shift
	RC=0
	j0=$(sed 's/^.*) //' "/proc/$BASHPID/stat" | awk '{print $14 + $15}')
	t0=$(date +%s%N)
	timeout -k 5 "$TIMEOUT" ip netns exec ferry0 "$@" >"$out" 2>&1 </dev/null || RC=$?
	t1=$(date +%s%N)
	j1=$(sed 's/^.*) //' "/proc/$BASHPID/stat" | awk '{print $14 + $15}')
	T_NS=$((t1 - t0)) CLIENT_J=$((j1 - j0))
}

# one KIND W: one timed, verified case; prints "SECONDS MACHINE% DL% SRV% CLIENT%", or "FAIL why".
one() {
	local k=$1 w=$2 cmd=() why="" i dst sum
	[[ $k == iperf ]] || rm -f "$(path_of "$k")"
	sleep 0.3
	if [[ $k == iperf ]]; then
		local pids=() t0 t1
		echo "### iperf-$w" >>"$LOG/client.log"
		cpu_snap "$TMP/cpu0"
		t0=$(date +%s%N)
		for ((i = 1; i <= w; i++)); do
			timeout -k 5 "$TIMEOUT" ip netns exec "ferry$(src_node "$i")" iperf3 -c "$(ip_of "$(dst_node "$i")")" -p "$P_I" \
				-n $((SIZE / w)) -f m >"$TMP/iperf.$i" 2>&1 </dev/null &
			pids+=($!)
		done
		for i in "${!pids[@]}"; do
			wait "${pids[i]}" || why+="iperf3 $((i + 1))→$((i + 5)) exit $? "
		done
		t1=$(date +%s%N)
		cpu_snap "$TMP/cpu1"
		for ((i = 1; i <= w; i++)); do cat "$TMP/iperf.$i" >>"$LOG/client.log"; done
		[[ -z $why ]] || { echo "FAIL $why"; return 0; }
		echo "$(secs $((t1 - t0))) $(cpu_use "$TMP/cpu0" "$TMP/cpu1" 0)"
		return 0
	fi
	mapfile -t cmd < <(cmd_of "$k")
	echo "### $k-$w: ${cmd[*]}" >>"$LOG/client.log"
	cpu_snap "$TMP/cpu0"
	run_client "$TMP/client.out" "${cmd[@]}"
	cpu_snap "$TMP/cpu1"
	cat "$TMP/client.out" >>"$LOG/client.log"
	dst=$(path_of "$k")
	if [[ $RC != 0 ]]; then
		why="exit $RC: $(grep -v '^$' "$TMP/client.out" | tail -n 3 | tr '\n' ' ')"
	elif [[ ! -f $dst ]]; then
		why="no destination file"
	else
		sum=$(md5sum <"$dst" | cut -d' ' -f1)
		[[ $sum == "$SRC_MD5" ]] || why="wrong bytes: $(stat -c %s "$dst") bytes, md5 $sum"
	fi
	rm -f "$dst"
	if [[ -n $why ]]; then
		cp "$TMP/client.out" "$LOG/failed-$k-$w-$RANDOM.out"
		echo "FAIL $why"
		return 0
	fi
	echo "$(secs "$T_NS") $(cpu_use "$TMP/cpu0" "$TMP/cpu1" "$CLIENT_J")"
}

# --- servers -----------------------------------------------------------------
# start_width W: GCT data nodes and front ends, ferry movers and front ends
# (if striped), iperf3 servers for width W.
start_width() {
	local w=$1 i n ip list_s="" list_d="" flist_s="" flist_d="" mflags feflags
	PHASE=w$w
	read -ra mflags <<<"$FERRY_MOVER_FLAGS"
	read -ra feflags <<<"$FERRY_FE_FLAGS"
	for ((i = 1; i <= w; i++)); do
		for n in $(src_node "$i") $(dst_node "$i"); do
			ip=$(ip_of "$n")
			start_bg "gdn$n" "ferry$n" "$P_GDN" "$LOG/$PHASE-gdn$n.out" \
				globus-gridftp-server -dn -aa -anonymous-user nobody -p "$P_GDN" -hostname "$ip" \
				-control-interface "$ip" -data-interface "$ip" -d ERROR -l "$LOG/$PHASE-gdn$n.log"
			if ((FERRY_STRIPED)); then
				local root=$WORK/ferry-src key=$TMP/src.key
				((n > 4)) && root=$WORK/ferry-dst key=$TMP/dst.key
				start_bg "fmv$n" "ferry$n" "$P_FMV" "$LOG/$PHASE-fmv$n.log" \
					"$FERRY" gridftp --root "$root" --mover --mover-key "$key" --listen "$ip:$P_FMV" --log-level warn "${mflags[@]}"
			fi
			if ((n > 4)); then
				start_bg "iperf$n" "ferry$n" "$P_I" "$LOG/$PHASE-iperf$n.log" iperf3 -s -B "$ip" -p "$P_I"
			fi
		done
		list_s+=${list_s:+,}$(ip_of "$(src_node "$i")"):$P_GDN
		list_d+=${list_d:+,}$(ip_of "$(dst_node "$i")"):$P_GDN
		flist_s+=${flist_s:+,}$(ip_of "$(src_node "$i")"):$P_FMV
		flist_d+=${flist_d:+,}$(ip_of "$(dst_node "$i")"):$P_FMV
	done
	gct_server gfe1 ferry1 "$(ip_of 1)" "$P_GFE" "$WORK/gct-src" -r "$list_s"
	gct_server gfe5 ferry5 "$(ip_of 5)" "$P_GFE" "$WORK/gct-dst" -r "$list_d"
	if ((FERRY_STRIPED)); then
		ferry_server ffe1 ferry1 "$(ip_of 1)" "$P_FFE" "$WORK/ferry-src" --movers "$flist_s" --mover-key "$TMP/src.key" "${feflags[@]}"
		ferry_server ffe5 ferry5 "$(ip_of 5)" "$P_FFE" "$WORK/ferry-dst" --movers "$flist_d" --mover-key "$TMP/dst.key" "${feflags[@]}"
	fi
}

# --- star, data --------------------------------------------------------------
if ! wan_ready; then
	say "== $WANDIR/README.md is missing or a link busy after $WAN_WAIT s; nothing measured"
	exit 1
fi
say "== star"
star_up "$NODES" "$RATE" "$DELAY" "$LOSS"
RTT_MS=$WAN_RTT_MS

say "== data"
mkdir -p -m 0777 "$WORK/gct-src" "$WORK/gct-dst" "$WORK/ferry-src" "$WORK/ferry-dst"
chmod 0755 "$WORK"
show "head -c $SIZE /dev/urandom > $WORK/gct-src/big.bin   # hard-linked as $WORK/ferry-src/big.bin"
head -c "$SIZE" /dev/urandom >"$WORK/gct-src/big.bin"
chmod 0666 "$WORK/gct-src/big.bin"
ln "$WORK/gct-src/big.bin" "$WORK/ferry-src/big.bin"
SRC_MD5=$(md5sum <"$WORK/gct-src/big.bin" | cut -d' ' -f1)
say "  md5 $SRC_MD5"
(umask 077 && head -c 32 /dev/urandom >"$TMP/src.key" && head -c 32 /dev/urandom >"$TMP/dst.key")
nss=$(for ((i = 0; i < NODES; i++)); do printf 'ferry%d ' "$i"; done)
ports_free "$nss" "$P_GFE" "$P_GDN" "$P_FFE" "$P_FMV" "$P_I"

# --- runs --------------------------------------------------------------------
declare -A RES=() FAILS=() CPU=() CMDLINE=()
for w in $WIDTHS; do
	mapfile -t KS < <(cases "$w")
	N=${#KS[@]}
	((N)) || continue
	say "== width $w: movers $(seq -s, 1 "$w") → $(seq -s, 5 $((4 + w))) (10.77.1.11.. → 10.77.1.15..)"
	start_width "$w"
	for k in "${KS[@]}"; do
		CMDLINE[$k-$w]=$(shown "$k" "$w")
		say "  $k-$w: ${CMDLINE[$k-$w]}"
	done
	for ((r = 1; r <= RUNS; r++)); do
		for i in $(run_order "$r" "$N"); do
			k=${KS[i]} id=${KS[i]}-$w
			res=$(one "$k" "$w")
			if [[ $res == FAIL* ]]; then
				FAILS[$id]=$((${FAILS[$id]:-0} + 1))
				NFAIL=$((NFAIL + 1)) KEEP_LOGS=1
				say "  !!! FAILED run $r $id: ${res#FAIL }"
				continue
			fi
			read -ra f <<<"$res"
			RES[$id]+="${f[0]}"$'\n'
			CPU[$id]+="${f[1]} ${f[2]} ${f[3]} ${f[4]}"$'\n'
			say "  run $r $(printf '%-9s' "$id:") $(printf '%8.3f s' "${f[0]}")  $(awk -v s="${f[0]}" -v b="$SIZE" 'BEGIN {printf "%7.1f Mb/s", b * 8 / s / 1e6}')  cpu: machine ${f[1]}% (of $(nproc)), delay line ${f[2]}%, servers ${f[3]}%, client ${f[4]}% (of one)"
		done
	done
	stop_servers
done

# --- tables ------------------------------------------------------------------
nruns() { printf '%s' "${RES[$1]:-}" | awk 'NF' | wc -l; }
med() { printf '%s' "${RES[$1]:-}" | awk 'NF' | median; }
medcpu() { printf '%s' "${CPU[$1]:-}" | awk -v k="$2" 'NF {print $k}' | median; } # ID FIELD
have() { [[ $(nruns "$1") != 0 ]]; }
ratio() { # A B: med A ÷ med B, "" when either has no run
	have "$1" && have "$2" || return 0
	awk -v a="$(med "$1")" -v b="$(med "$2")" 'BEGIN {printf "%.2f", a / b}'
}
W1=${WIDTHS%% *}
say ""
say "== results: median of $RUNS run(s); $SIZE_MIB MiB ($SIZE bytes); star of $NODES nodes, every access link $RATE each way, $DELAY each way (RTT $RTT_MS ms between two nodes), loss $LOSS"
say "   Mb/s: size × 8 ÷ s; speed-up: the same kind at width $W1 ÷ this; ferry ÷ GCT: gct-W's s ÷ this"
say "   cpu: the machine's (% of $(nproc) cores; others' work included) / the delay line's / the servers' / the client's (% of one core), median"
say ""
say "| W | case | runs | median s | Mb/s | speed-up vs W=$W1 | ferry ÷ GCT | cpu % (machine / delay line / servers / client) |"
say "|---:|---|---:|---:|---:|---:|---:|---|"
for w in $WIDTHS; do
	for k in $KINDS; do
		id=$k-$w
		wanted "$id" || continue
		if ferry_kind "$k" && ((!FERRY_STRIPED)); then
			say "| $w | $(kind_label "$k") | 0 | pending (no ferry striped server) | – | – | – | – |"
			continue
		fi
		runs=$(nruns "$id")
		nf=${FAILS[$id]:-0}
		((nf)) && runs+=" (+$nf **failed**)"
		if ! have "$id"; then
			say "| $w | $(kind_label "$k") | $runs | – | **every run failed** | – | – | – |"
			continue
		fi
		su=$(ratio "$k-$W1" "$id")
		fg=""
		ferry_kind "$k" && fg=$(ratio "gct-$w" "$id")
		awk -v w="$w" -v l="$(kind_label "$k")" -v runs="$runs" -v s="$(med "$id")" -v b="$SIZE" -v su="${su:-–}" -v fg="${fg:-–}" \
			-v c="$(medcpu "$id" 1) / $(medcpu "$id" 2) / $(medcpu "$id" 3) / $(medcpu "$id" 4)" 'BEGIN {
			printf "| %s | %s | %s | %.3f | %.1f | %s | %s | %s |\n", w, l, runs, s, b * 8 / s / 1e6, su, fg, c }'
	done
done

say ""
say "== the issue's goals"
say ""
say "| measure | value | goal |"
say "|---|---:|---|"
met() { awk -v v="$1" -v g="$2" 'BEGIN {print (v >= g) ? "met" : "**not met**"}'; }
for k in iperf gct fguc fcopy; do
	v=$(ratio "$k-1" "$k-4")
	[[ -n $v ]] || continue
	say "| $(kind_label "$k"): 4 movers ÷ 1 (speed-up) | ${v}× | ≥ 3.5 — $(met "$v" 3.5) |"
done
for w in $WIDTHS; do
	for k in fguc fcopy; do
		v=$(ratio "gct-$w" "$k-$w")
		[[ -n $v ]] || continue
		say "| W = $w: $(kind_label "$k") vs GCT (GCT s ÷ ferry s) | ${v}× | ≥ 1.0 — $(met "$v" 1.0) |"
	done
done
((FERRY_STRIPED)) || say "| ferry rows | pending | the ferry striped server (--movers) has not landed in $FERRY |"
say ""
say "rtt (ping average, ferry0 → ferry8): $RTT_MS ms"
say ""
say "== commands (as run; paths are this run's; W = the width)"
for w in $WIDTHS; do
	for k in $KINDS; do
		[[ -n ${CMDLINE[$k-$w]:-} ]] && say "  $k-$w: ${CMDLINE[$k-$w]}"
	done
done
say "  servers: see the '+' lines above each width"
say ""
say "delay line counters at the end:"
kill -USR1 "$(cat /run/ferry-wan/delayline.pid)" 2>/dev/null && sleep 0.3
grep -E ' (up|down) fwd |unroutable' /run/ferry-wan/delayline.log | tail -n $((2 * NODES + 1)) | sed 's/^/  /' || true
say ""
say "total time: $(($(date +%s) - T_START)) s"
if ((NFAIL)); then
	say ""
	say "!!! $NFAIL cases FAILED (see the lines marked !!! above); client output in $LOG/failed-*.out, all of it in $LOG/client.log"
	exit 1
fi
