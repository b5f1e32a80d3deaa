#!/usr/bin/env bash
# matrix.sh — issue 17's link matrix: `ferry copy` with no tuning flag
# against the best of several tuned globus-url-copy settings to GCT, and
# iperf3 as the link's limit, on many emulated links (bench/wan): round trip,
# loss, congestion control and queue depth each varied.
#
#   bench/matrix.sh                                   # the default sample (below), RUNS=3
#   CELLS="60/0.01/bbr/deep 150/0.1/cubic/shallow" RUNS=1 bench/matrix.sh
#   CELLS=all bench/matrix.sh                         # all 36 cells: hours
#
# A cell is RTT/LOSS/CC/QUEUE: RTT in ms (20, 60, 150), LOSS in percent per
# packet each way (0, 0.01, 0.1), CC the namespaces' congestion control
# (bbr, cubic), QUEUE the bottleneck's drop-tail queue, shallow (0.25 BDP)
# or deep (2 BDP); the rate is RATE (1gbit) each way, the loss model
# LOSS_MODEL (random; bursty: bench/wan/README.md). Per cell: the link comes
# up (bench/wan/setup.sh), iperf3 -P 1 and -P 8 run for IPERF_SECS, then
# the rows (ROWS):
#   big     one file of BIG_MIB (512) MiB
#   medium  MED_FILES (10) files of MED_BYTES (100,000,000) B, -r
#   small   SMALL_FILES (2,000) files of SMALL_BYTES (51,200) B, -r
# and per row: ferry copy with no tuning flag (with -v when this ferry has
# it) between two `ferry gridftp` servers, and the tuned globus-url-copy
# settings of kinds() between two GCT servers; RUNS runs of each (median),
# the order of the kinds reversed every other run. A copy slower than
# COPY_TIMEOUT (300) s fails and is shown as such. The best tuned setting
# per row counts. Servers in ferryA (sources, 10.77.0.1) and ferryB
# (destinations, 10.77.0.2), every client in ferryA; data in /dev/shm.
#
# The default sample (about 45 minutes at RUNS=3 on 2 cores, the cubic
# cells with loss being the slow ones): every level of every factor at
# least once, the issue's nominal link (60/0.01) under both controls:
#   60/0.01/bbr/deep 60/0.01/cubic/shallow 20/0/cubic/deep
#   20/0.1/bbr/shallow 150/0/bbr/deep 150/0.01/cubic/deep
#
# Output, also in $OUT (default /tmp/ferry-matrix.DATE): matrix.out (this
# script's output: one table per cell, the goals), client.log (every client's
# output) and tuner.log (ferry copy's own lines: the settings it chose and,
# with -v, why). Goals (the issue): ferry ≥ 1.0× the best tuned
# globus-url-copy on every row, and the big and medium rows ≥ 85 % of
# iperf3's best.
# FERRY_HAND="-p 16" adds ferry copy with those flags to every row (shown in
# the runs, not in the tables): is a miss the tuner's plan or the engine?
# Environment: CELLS RUNS ROWS RATE LOSS_MODEL BIG_MIB MED_FILES MED_BYTES
#   SMALL_FILES SMALL_BYTES IPERF_SECS COPY_TIMEOUT FERRY_HAND OUT WAN_WAIT PORT_BASE
#   (5 ports) FERRY KEEP_LOGS=1.
# Needs: go, globus-gridftp-server, globus-url-copy, iperf3, iproute2, root;
# ping (iputils-ping) for the round trip shown per cell, else it shows as ?.
# Listens only in the namespaces; takes the link down on exit.
set -Eeuo pipefail
shopt -s inherit_errexit
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SAMPLE="60/0.01/bbr/deep 60/0.01/cubic/shallow 20/0/cubic/deep 20/0.1/bbr/shallow 150/0/bbr/deep 150/0.01/cubic/deep"
CELLS=${CELLS:-$SAMPLE}
RUNS=${RUNS:-3}
ROWS=$(selected_rows big medium small)
RATE=${RATE:-1gbit}
LOSS_MODEL=${LOSS_MODEL:-random}
BIG_MIB=${BIG_MIB:-512}
MED_FILES=${MED_FILES:-10} MED_BYTES=${MED_BYTES:-100000000}
SMALL_FILES=${SMALL_FILES:-2000} SMALL_BYTES=${SMALL_BYTES:-51200}
IPERF_SECS=${IPERF_SECS:-10}
COPY_TIMEOUT=${COPY_TIMEOUT:-300}
WAN_WAIT=${WAN_WAIT:-1200}
PORT_BASE=${PORT_BASE:-29891}
KEEP_LOGS=${KEEP_LOGS:-0}
FERRY_HAND=${FERRY_HAND:-}
WARMUP=0 WARMUP_ROWS="" CAP=0

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WANDIR=$REPO/bench/wan
WORK=/dev/shm/ferry-matrix.$$
TMP=$(mktemp -d /tmp/ferry-matrix.XXXXXX)
LOG=$TMP/logs
OUT=${OUT:-/tmp/ferry-matrix.$(date -u +%Y%m%d-%H%M)}
mkdir -p "$LOG" "$OUT"
HZ=$(getconf CLK_TCK)
T_START=$(date +%s)

[[ $CELLS == all ]] && CELLS=$(for r in 20 60 150; do for l in 0 0.01 0.1; do for c in bbr cubic; do
	for q in shallow deep; do printf '%s ' "$r/$l/$c/$q"; done
done; done; done)

# save: keep the logs in $OUT, then cleanup (lib.sh: servers, link, data).
save() {
	local rc=$?
	[[ ! -f $LOG/client.log ]] || cp "$LOG/client.log" "$OUT/client.log"
	[[ ! -f $LOG/client.log ]] || awk '/^### / {keep = ($0 ~ / \[ferry\] /)} keep' "$LOG/client.log" >"$OUT/tuner.log"
	(exit "$rc")
	cleanup
}
trap save EXIT
trap 'exit 130' INT TERM
exec > >(tee "$OUT/matrix.out") 2>&1

need go globus-gridftp-server globus-url-copy iperf3 cmp diff ss setsid ip timeout /usr/bin/time
[[ $(id -u) == 0 ]] || { say "run as root (GCT serves anonymous users as nobody; namespaces)" >&2; exit 1; }

say "== machine"
machine_facts
say "GCT:     $(globus-gridftp-server -version 2>&1 | head -1); globus-url-copy $(globus-url-copy -version 2>&1 | awk '{print $2}'); $(iperf3 --version | head -1)"
say "matrix:  CELLS=\"$CELLS\""
say "         RUNS=$RUNS (median), ROWS=\"$ROWS\", RATE=$RATE, LOSS_MODEL=$LOSS_MODEL, IPERF_SECS=$IPERF_SECS, COPY_TIMEOUT=$COPY_TIMEOUT"
say "data:    big $BIG_MIB MiB; medium $MED_FILES × $MED_BYTES B; small $SMALL_FILES × $SMALL_BYTES B"
say "output:  $OUT"
build_ferry
V=""
"$FERRY" copy --help 2>&1 | grep -q -- '--verbose' && V="-v "
say "ferry copy: no tuning flag${V:+, with -v (it says why it chose its settings)}"

mkdir -p "$WORK"/{gct-src,gct-dst,ferry-src,ferry-dst}
chmod 0755 "$WORK"
chmod 0777 "$WORK"/*
NS_A=ferryA NS_B=ferryB IP_A=10.77.0.1 IP_B=10.77.0.2 CLIENT=(ip netns exec ferryA)
P_GSRC=$PORT_BASE P_GDST=$((PORT_BASE + 1)) P_FSRC=$((PORT_BASE + 2)) P_FDST=$((PORT_BASE + 3)) P_IPERF=$((PORT_BASE + 4))
BIG_BYTES=$((BIG_MIB << 20)) NSMALL=$SMALL_FILES NMED=$MED_FILES
PHASE=""

# kinds CELL ROW: ferry copy first (no tuning flag), then the tuned
# globus-url-copy settings tried (labels "guc tuned ..."; the best counts):
# parallel streams for one file, sessions × streams for 100 MB files,
# pipelined sessions for small files, around the best of bench/copy.sh's
# hand search on the 60 ms link (bench/LOG.md). With FERRY_HAND, also ferry
# copy with those flags, to tell the tuner's plan from the engine (shown,
# not counted).
kinds() {
	local R=""
	[[ $2 == big ]] || R="-r "
	printf 'ferry|ferry|ferry|%s%s%%S %%D|\n' "$V" "$R"
	[[ -z $FERRY_HAND ]] || printf 'ferry hand %s|ferry|ferry|%s%s %%S %%D|\n' "$FERRY_HAND" "$R" "$FERRY_HAND"
	case $2 in
	big) cat <<EOF
guc tuned -p 4 -fast|gct|guc|-p 4 -fast %S %D|
guc tuned -p 8 -fast|gct|guc|-p 8 -fast %S %D|
guc tuned -p 16 -fast|gct|guc|-p 16 -fast %S %D|
EOF
		;;
	medium) cat <<EOF
guc tuned -fast -cc 4 -p 4|gct|guc|$R-fast -cc 4 -p 4 %S %D|
guc tuned -fast -pp -cc 10 -p 2|gct|guc|$R-fast -pp -cc 10 -p 2 %S %D|
EOF
		;;
	small) cat <<EOF
guc tuned -fast -pp -cc 8|gct|guc|$R-fast -pp -cc 8 %S %D|
guc tuned -fast -pp -cc 16|gct|guc|$R-fast -pp -cc 16 %S %D|
guc tuned -fast -pp -cc 32|gct|guc|$R-fast -pp -cc 32 %S %D|
EOF
		;;
	esac
}

# cell_args RTT/LOSS/CC/QUEUE: bench/wan/setup.sh's arguments for the cell.
cell_args() {
	local rtt loss cc queue
	IFS=/ read -r rtt loss cc queue <<<"$1"
	[[ $rtt =~ ^[0-9]+$ && $loss =~ ^[0-9.]+$ && $cc =~ ^[a-z0-9]+$ ]] || { say "bad cell $1 (want RTT/LOSS/CC/QUEUE, e.g. 60/0.01/bbr/deep)" >&2; return 1; }
	case $queue in
	shallow) queue=0.25bdp ;;
	deep) queue=2bdp ;;
	*) say "bad queue in cell $1 (want shallow or deep)" >&2; return 1 ;;
	esac
	printf '%s\n' -delay "$(awk -v r="$rtt" 'BEGIN {print r / 2}')ms" -rate "$RATE" \
		-loss "$(awk -v l="$loss" 'BEGIN {print l / 100}')" -loss-model "$LOSS_MODEL" -queue "$queue" -cc "$cc"
}

# iperf STREAMS: iperf3's goodput in Mb/s (receiver), ferryA to ferryB.
iperf() {
	local mbps
	show "ip netns exec ferryA iperf3 -c $IP_B -p $P_IPERF -t $IPERF_SECS -P $1 -f m" >&2
	mbps=$(ip netns exec ferryA timeout $((IPERF_SECS + 30)) iperf3 -c "$IP_B" -p "$P_IPERF" -t "$IPERF_SECS" -P "$1" -f m 2>&1 |
		tee -a "$LOG/$PHASE-iperf3.out" | awk '/receiver/ {v = $(NF - 2)} END {print v + 0}')
	echo "$mbps"
}

declare -A IPERF1 IPERF8 PING
run_cell() {
	local cell=$1 args=() ok=1
	mapfile -t args < <(cell_args "$cell")
	PHASE=${cell//\//-}
	say ""
	say "== cell $cell"
	wan_ready || { say "the link is busy after $WAN_WAIT s; cell skipped"; return 1; }
	WAN_CC="" wan_up "${args[@]}"
	grep ' -> ' "$STATE_LOG" | sed 's/^delayline: [0-9:.]* /  /'
	PING[$PHASE]=$WAN_RTT_MS
	start_servers
	ports_free "$NS_A $NS_B" "$P_IPERF"
	start_bg iperf ferryB "$P_IPERF" "$LOG/$PHASE-iperf3-server.out" iperf3 -s -B "$IP_B" -p "$P_IPERF"
	IPERF1[$PHASE]=$(iperf 1)
	IPERF8[$PHASE]=$(iperf 8)
	say "  iperf3: 1 stream ${IPERF1[$PHASE]} Mb/s, 8 streams ${IPERF8[$PHASE]} Mb/s"
	for row in $ROWS; do
		case $row in big | small | medium) ;; *) say "unknown row $row" >&2; ok=0; break ;; esac
		make_data "$row"
		run_row "$row"
	done
	stop_servers
	wan_down
	((ok))
}
STATE_LOG=${STATE:-/run/ferry-wan}/delayline.log

# row_mbps ROW SECS FILES: the goodput of a row's copy, Mb/s.
row_mbps() {
	local bytes=$BIG_BYTES
	case $1 in small) bytes=$((SMALL_BYTES * $3)) ;; medium) bytes=$((MED_BYTES * $3)) ;; esac
	awk -v b="$bytes" -v s="$2" 'BEGIN {printf "%.0f", b * 8 / s / 1e6}'
}

# choices PHASE ROW: what ferry copy chose, each distinct choice once, rtt aside.
choices() {
	printf '%s' "${SET[$1,$2,0]:-}" | awk 'NF {sub(/, rtt [^,]*/, ""); if (!seen[$0]++) out = out (out == "" ? "" : " / ") $0} END {print out}'
}

MISSES=()
# table CELL: the cell's results and goals.
table() {
	local cell=$1 ph=${1//\//-} row g fs gs ratio mb best_ip pct goal1 goal2 n
	best_ip=$(awk -v a="${IPERF1[$ph]:-0}" -v b="${IPERF8[$ph]:-0}" 'BEGIN {print (a > b) ? a : b}')
	say ""
	say "### $cell: RTT ${cell%%/*} ms (ping ${PING[$ph]:-?} ms), $RATE, loss $(cut -d/ -f2 <<<"$cell") % ($LOSS_MODEL), $(cut -d/ -f3 <<<"$cell"), $(cut -d/ -f4 <<<"$cell") queue; iperf3 ${IPERF1[$ph]:-?} / ${IPERF8[$ph]:-?} Mb/s (1 / 8 streams)"
	say ""
	say "| row | ferry s | best tuned guc s (setting) | ferry ÷ guc | ferry Mb/s | % of iperf3's best | ferry chose |"
	say "|---|---:|---:|---:|---:|---:|---|"
	for row in $ROWS; do
		n=${NK[$ph,$row]:-0}
		((n)) || continue
		g=$(best "$ph" "$row" 'guc tuned*')
		fs="failed" gs="all failed" ratio="–" mb="–" pct="–" goal1="" goal2=""
		if [[ $(nruns "$ph" "$row" 0) != 0 ]]; then
			fs=$(printf '%.2f' "$(field "$ph" "$row" 0 1)")
			mb=$(row_mbps "$row" "$(field "$ph" "$row" 0 1)" "$(field "$ph" "$row" 0 2)")
			if [[ $row != small ]]; then
				pct=$(awk -v m="$mb" -v i="$best_ip" 'BEGIN {if (i > 0) printf "%.0f %%", 100 * m / i; else print "–"}')
				goal2=$(awk -v m="$mb" -v i="$best_ip" 'BEGIN {print (i > 0 && m >= 0.85 * i) ? "" : "iperf3"}')
			fi
		fi
		if ((g >= 0)); then
			gs="$(printf '%.2f' "$(field "$ph" "$row" "$g" 1)") (${LABEL[$ph,$row,$g]#guc tuned })"
			if [[ $fs != failed ]]; then
				ratio=$(awk -v a="$(rate "$ph" "$row" 0)" -v b="$(rate "$ph" "$row" "$g")" 'BEGIN {printf "%.2f×", a / b}')
				goal1=$(awk -v r="${ratio%×}" 'BEGIN {print (r >= 1.0) ? "" : "guc"}')
			fi
		fi
		[[ ${FAILS[$ph,$row,0]:-0} == 0 ]] || fs+=" (${FAILS[$ph,$row,0]} failed)"
		[[ $fs != failed* ]] || goal1="failed"
		say "| $row | $fs | $gs | $ratio | $mb | $pct | $(choices "$ph" "$row") |"
		[[ -z $goal1$goal2 ]] || MISSES+=("$cell $row: ${goal1:+ferry ÷ guc $ratio}${goal1:+${goal2:+, }}${goal2:+ferry at $pct of iperf3}")
	done
}

for cell in $CELLS; do cell_args "$cell" >/dev/null; done
DONE=()
for cell in $CELLS; do
	if run_cell "$cell"; then DONE+=("$cell"); fi
done

say ""
say "== results: median of $RUNS runs; ferry ÷ guc > 1: ferry copy (no tuning flag) faster than the best tuned globus-url-copy to GCT"
for cell in "${DONE[@]}"; do table "$cell"; done
say ""
say "== goals: ferry ≥ 1.0× the best tuned globus-url-copy on every row; big and medium rows ≥ 85 % of iperf3's best"
say "cells run: ${DONE[*]}"
if ((${#MISSES[@]})); then
	say "missed:"
	printf '  %s\n' "${MISSES[@]}"
else
	say "every goal met"
fi
say ""
say "== commands (as run; URLs use this run's paths)"
for cell in "${DONE[@]}"; do
	ph=${cell//\//-}
	say "  $cell: bench/wan/setup.sh up $(cell_args "$cell" | tr '\n' ' ')"
	for row in $ROWS; do
		for ((i = 0; i < ${NK[$ph,$row]:-0}; i++)); do say "    $row [${LABEL[$ph,$row,$i]}]: ${CMDLINE[$ph,$row,$i]}"; done
	done
done
say ""
((NFAIL == 0)) || say "$NFAIL copies FAILED (see the rows above); their client output is in $LOG/failed-*.out"
say "tuner log (ferry copy's lines): $OUT/tuner.log; every client's output: $OUT/client.log"
say "total time: $(($(date +%s) - T_START)) s"
