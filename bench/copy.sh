#!/usr/bin/env bash
# copy.sh — `ferry copy` (the transfer engine, tuning itself) against
# globus-url-copy, default and hand-tuned, same machine, same run. Every copy
# is third-party between two servers: ferry copy drives two `ferry gridftp`
# servers, globus-url-copy drives two GCT globus-gridftp-servers (and, as a
# control, the two ferry servers). Files live in /dev/shm.
#
#   bench/copy.sh                         # loopback, then the emulated WAN; RUNS=3
#   PHASES=loop ROWS="big small" bench/copy.sh
#   RUNS=5 PHASES=wan bench/copy.sh
#
# Phases (PHASES, default "loop wan"):
#   loop  everything on 127.0.0.1
#   wan   bench/wan/setup.sh up -delay 30ms -rate 1gbit -loss 0.0001 (60 ms RTT,
#         1 Gbit/s, 0.01 % loss each way; congestion control: the namespaces'
#         default, bbr on these machines; WAN_CC=cubic to change it); source
#         servers in ferryA (10.77.0.1), destination servers in ferryB
#         (10.77.0.2), every client in ferryA. The script waits up to WAN_WAIT s
#         for bench/wan/README.md (the emulator's owner writes it when done
#         with the namespaces), takes the link down on exit (WAN_KEEP=1 keeps it).
# Rows (ROWS, default all):
#   big     one file (loop BIG_MIB, wan WAN_BIG_MIB MiB)
#   cksum   the same file with integrity checking: globus-url-copy
#           -verify-checksum (MD5); ferry --verify-checksum --checksum-algorithm MD5,
#           and ferry --verify-checksum (its default: the fastest both ends have)
#   small   SMALL_FILES (wan WAN_SMALL_FILES) files of SMALL_BYTES, -r
#   medium  MED_FILES (wan WAN_MED_FILES) files of MED_BYTES, -r
# Kinds per row: see kinds() below: ferry copy with no tuning flag ("ferry"),
# ferry copy with hand-picked flags ("ferry hand ..."), globus-url-copy
# default and tuned against GCT, and tuned globus-url-copy against the ferry
# servers ("@ferry"). Each row: WARMUP untimed copies of every kind (loop
# rows in WARMUP_ROWS), then RUNS timed copies per kind, the order of kinds
# reversed on every other run; the median is reported. A kind marked "cap"
# (untuned globus-url-copy with many small files over the WAN) runs once
# under `timeout CAP` s and is rated by the files that arrived.
# Timing is wall-clock around the client process (start-up and session set-up
# included). Every copy is verified: cmp for a file; for a directory, the
# file count and diff -rq (a capped run: count and cmp of what arrived).
# Environment: RUNS PHASES ROWS WARMUP WARMUP_ROWS BIG_MIB WAN_BIG_MIB
#   SMALL_FILES WAN_SMALL_FILES SMALL_BYTES MED_FILES WAN_MED_FILES MED_BYTES
#   CAP WAN_WAIT WAN_KEEP WAN_CC PORT_BASE (4 ports) FERRY KEEP_LOGS=1.
# Needs: go, globus-gridftp-server, globus-url-copy, iproute2, root (GCT
# serves anonymous users as nobody; namespaces). Listens on 127.0.0.1 and,
# in the namespaces, on 10.77.0.1/10.77.0.2 only.
set -Eeuo pipefail
shopt -s inherit_errexit
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${RUNS:-3}
PHASES=${PHASES:-loop wan}
ROWS=$(selected_rows big cksum small medium)
WARMUP=${WARMUP:-1}
WARMUP_ROWS=${WARMUP_ROWS:-big small medium} # loop only; cksum follows big on the same file
BIG_MIB=${BIG_MIB:-2048} WAN_BIG_MIB=${WAN_BIG_MIB:-512}
SMALL_FILES=${SMALL_FILES:-5000} WAN_SMALL_FILES=${WAN_SMALL_FILES:-2000} SMALL_BYTES=${SMALL_BYTES:-51200}
MED_FILES=${MED_FILES:-20} WAN_MED_FILES=${WAN_MED_FILES:-10} MED_BYTES=${MED_BYTES:-100000000}
CAP=${CAP:-60}
WAN_WAIT=${WAN_WAIT:-1200}
WAN_KEEP=${WAN_KEEP:-0}
WAN_CC=${WAN_CC:-}
PORT_BASE=${PORT_BASE:-29831} # below the ephemeral range
KEEP_LOGS=${KEEP_LOGS:-0}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WANDIR=$REPO/bench/wan
WORK=/dev/shm/ferry-copy.$$ # data: one root per server
TMP=$(mktemp -d /tmp/ferry-copy.XXXXXX) # binary, logs
LOG=$TMP/logs
mkdir -p "$LOG"
HZ=$(getconf CLK_TCK)
T_START=$(date +%s)


trap cleanup EXIT
trap 'exit 130' INT TERM

need go globus-gridftp-server globus-url-copy cmp diff ss setsid ip timeout /usr/bin/time
[[ $(id -u) == 0 ]] || { say "run as root (GCT serves anonymous users as nobody; namespaces)" >&2; exit 1; }

# --- machine -----------------------------------------------------------------
say "== machine"
machine_facts
say "shm:     /dev/shm free: $(df -h --output=avail /dev/shm | tail -1 | tr -d ' ')"
say "tcp cc:  $(sysctl -n net.ipv4.tcp_congestion_control) (root ns)"
say "GCT:     $(globus-gridftp-server -version 2>&1 | head -1); globus-url-copy $(globus-url-copy -version 2>&1 | awk '{print $2}')"
say "runs:    RUNS=$RUNS (median), PHASES=\"$PHASES\", ROWS=\"$ROWS\""

# --- build -------------------------------------------------------------------
say "== build"
build_ferry

mkdir -p "$WORK"/{gct-src,gct-dst,ferry-src,ferry-dst}
chmod 0755 "$WORK"
chmod 0777 "$WORK"/*

# --- phase parameters --------------------------------------------------------
PHASE="" NS_A="" NS_B="" IP_A="" IP_B="" CLIENT=()
P_GSRC=$PORT_BASE P_GDST=$((PORT_BASE + 1)) P_FSRC=$((PORT_BASE + 2)) P_FDST=$((PORT_BASE + 3))
NBIG=0 NSMALL=0 NMED=0 BIG_BYTES=0

set_phase() {
	PHASE=$1
	if [[ $PHASE == loop ]]; then
		NS_A="" NS_B="" IP_A=127.0.0.1 IP_B=127.0.0.1 CLIENT=()
		BIG_BYTES=$((BIG_MIB << 20)) NSMALL=$SMALL_FILES NMED=$MED_FILES
	else
		NS_A=ferryA NS_B=ferryB IP_A=10.77.0.1 IP_B=10.77.0.2 CLIENT=(ip netns exec ferryA)
		BIG_BYTES=$((WAN_BIG_MIB << 20)) NSMALL=$WAN_SMALL_FILES NMED=$WAN_MED_FILES
	fi
}

# --- kinds -------------------------------------------------------------------
# kinds PHASE ROW: one line per kind: label|servers|tool|args|flags
#   servers: gct or ferry; tool: ferry (ferry copy) or guc (globus-url-copy);
#   args: %S and %D stand for the source and destination URLs;
#   flags: "cap" = run once under timeout CAP, rated by the files that arrived.
# The first ferry kind is ferry copy with no tuning flag; "tuned" kinds are the
# globus-url-copy settings found best by hand on this machine (see bench/LOG.md).
kinds() {
	local R="" M="--verify-checksum --checksum-algorithm MD5"
	[[ $2 == small || $2 == medium ]] && R="-r "
	case $1,$2 in
	loop,big) cat <<EOF
ferry|ferry|ferry|%S %D|
ferry hand -p 1|ferry|ferry|-p 1 %S %D|
ferry hand -cc 4 -p 1 chunks 256M|ferry|ferry|--cc 4 -p 1 --chunk-size 256M %S %D|
guc default|gct|guc|%S %D|
guc tuned -p 4 -fast|gct|guc|-p 4 -fast %S %D|
guc default @ferry|ferry|guc|%S %D|
guc tuned -p 4 -fast @ferry|ferry|guc|-p 4 -fast %S %D|
EOF
		;;
	wan,big) cat <<EOF
ferry|ferry|ferry|%S %D|
ferry hand -cc 4 -p 4 chunks 64M (its WAN plan)|ferry|ferry|--cc 4 -p 4 --chunk-size 64M %S %D|
guc default|gct|guc|%S %D|
guc tuned -p 8 -fast|gct|guc|-p 8 -fast %S %D|
guc tuned -p 8 -fast @ferry|ferry|guc|-p 8 -fast %S %D|
EOF
		;;
	loop,cksum) cat <<EOF
ferry MD5|ferry|ferry|$M %S %D|
ferry default hash|ferry|ferry|--verify-checksum %S %D|
ferry MD5 hand -cc 4 chunks 256M|ferry|ferry|$M --cc 4 --chunk-size 256M %S %D|
guc -verify-checksum|gct|guc|-verify-checksum %S %D|
guc tuned -verify-checksum -p 4 -fast|gct|guc|-verify-checksum -p 4 -fast %S %D|
guc -verify-checksum @ferry|ferry|guc|-verify-checksum %S %D|
EOF
		;;
	wan,cksum) cat <<EOF
ferry MD5|ferry|ferry|$M %S %D|
ferry default hash|ferry|ferry|--verify-checksum %S %D|
ferry MD5 hand -cc 8 -p 1 chunks 64M (its WAN plan)|ferry|ferry|$M --cc 8 -p 1 --chunk-size 64M %S %D|
guc -verify-checksum|gct|guc|-verify-checksum %S %D|
guc tuned -verify-checksum -p 8 -fast|gct|guc|-verify-checksum -p 8 -fast %S %D|
guc tuned -verify-checksum -p 8 -fast @ferry|ferry|guc|-verify-checksum -p 8 -fast %S %D|
EOF
		;;
	loop,small) cat <<EOF
ferry|ferry|ferry|$R%S %D|
ferry hand -cc 2 -pp 32|ferry|ferry|$R--cc 2 --pp=32 %S %D|
guc default|gct|guc|$R%S %D|
guc tuned -fast -pp -cc 4|gct|guc|$R-fast -pp -cc 4 %S %D|
guc tuned -fast -pp -cc 4 @ferry|ferry|guc|$R-fast -pp -cc 4 %S %D|
EOF
		;;
	wan,small) cat <<EOF
ferry|ferry|ferry|$R%S %D|
ferry hand -cc 8 -pp 32 (its WAN plan)|ferry|ferry|$R--cc 8 --pp=32 %S %D|
ferry hand -cc 16 -pp 64|ferry|ferry|$R--cc 16 --pp=64 %S %D|
guc default|gct|guc|$R%S %D|cap
guc tuned -fast -pp -cc 8|gct|guc|$R-fast -pp -cc 8 %S %D|
guc tuned -fast -pp -cc 32|gct|guc|$R-fast -pp -cc 32 %S %D|
guc tuned -fast -pp -cc 8 @ferry|ferry|guc|$R-fast -pp -cc 8 %S %D|
EOF
		;;
	loop,medium) cat <<EOF
ferry|ferry|ferry|$R%S %D|
ferry hand -cc 2 -p 1|ferry|ferry|$R--cc 2 -p 1 %S %D|
ferry hand -cc 4 -p 1|ferry|ferry|$R--cc 4 -p 1 %S %D|
guc default|gct|guc|$R%S %D|
guc tuned -fast -cc 4|gct|guc|$R-fast -cc 4 %S %D|
guc tuned -fast -pp -cc 4|gct|guc|$R-fast -pp -cc 4 %S %D|
guc tuned -fast -cc 4 @ferry|ferry|guc|$R-fast -cc 4 %S %D|
EOF
		;;
	wan,medium) cat <<EOF
ferry|ferry|ferry|$R%S %D|
ferry hand -cc 4 -p 4 (its WAN plan)|ferry|ferry|$R--cc 4 -p 4 %S %D|
guc default|gct|guc|$R%S %D|
guc tuned -fast -pp -cc 10 -p 2|gct|guc|$R-fast -pp -cc 10 -p 2 %S %D|
guc tuned -fast -pp -cc 10 -p 2 @ferry|ferry|guc|$R-fast -pp -cc 10 -p 2 %S %D|
EOF
		;;
	esac
}


# --- phases ------------------------------------------------------------------
DONE_PHASES=""
for phase in $PHASES; do
	set_phase "$phase"
	if [[ $phase == wan ]]; then
		if ! wan_ready; then
			say "== wan: $WANDIR/README.md is missing or the link busy after $WAN_WAIT s; WAN rows skipped"
			continue
		fi
		say "== wan link"
		wan_up
	fi
	say "== $phase servers"
	start_servers
	prev=""
	row_list=($ROWS)
	for ((ri = 0; ri < ${#row_list[@]}; ri++)); do
		row=${row_list[ri]}
		case $row in big | cksum | small | medium) ;; *) say "unknown row $row" >&2; exit 1 ;; esac
		g=$(data_of "$row")
		[[ -n $prev && $prev != "$g" ]] && drop_data "$prev"
		make_data "$g"
		prev=$g
		run_row "$row"
	done
	[[ -n $prev ]] && drop_data "$prev"
	stop_servers
	[[ $phase == wan ]] && wan_down
	DONE_PHASES+=" $phase"
done

# --- tables ------------------------------------------------------------------
# unit ROW: the rate column of a row.
rate_of() { # PHASE ROW SECS FILES
	local bytes
	case $2 in
	big | cksum) awk -v s="$3" -v b="$BIG_BYTES" 'BEGIN {printf "%.2f Gb/s", b * 8 / s / 1e9}' ;;
	small) awk -v s="$3" -v n="$4" 'BEGIN {printf "%.0f files/s", n / s}' ;;
	medium) awk -v s="$3" -v n="$4" -v sz="$MED_BYTES" 'BEGIN {printf "%.2f Gb/s, %.1f files/s", n * sz * 8 / s / 1e9, n / s}' ;;
	esac
}
say ""
say "== results: median of $RUNS runs (a capped kind: 1 run); 'ferry ÷ this' > 1 means ferry copy (no tuning flag) is faster"
for phase in $DONE_PHASES; do
	set_phase "$phase"
	say ""
	say "### $phase"
	say ""
	say "| row | kind | runs | median s | rate | ferry ÷ this | client/src/dst CPU s |"
	say "|---|---|---:|---:|---:|---:|---|"
	for row in $ROWS; do
		n=${NK[$phase,$row]:-0}
		((n)) || continue
		case $row in
		big) rl="1 file, $((BIG_BYTES >> 20)) MiB" ;;
		cksum) rl="1 file, $((BIG_BYTES >> 20)) MiB, checksum" ;;
		small) rl="$NSMALL × $SMALL_BYTES B" ;;
		medium) rl="$NMED × $MED_BYTES B" ;;
		esac
		# reference: kind 0 (ferry copy, no tuning flags); ratios are of files (or bytes) per second
		f_s=$(field "$phase" "$row" 0 1) f_n=$(field "$phase" "$row" 0 2)
		for ((i = 0; i < n; i++)); do
			nfail=${FAILS[$phase,$row,$i]:-0}
			runs=$(nruns "$phase" "$row" "$i")
			((nfail)) && runs+=" (+$nfail failed)"
			if [[ $(nruns "$phase" "$row" "$i") == 0 ]]; then
				say "| $rl | ${LABEL[$phase,$row,$i]} | $runs | – | every run failed | – | – |"
				continue
			fi
			s=$(field "$phase" "$row" "$i" 1) nf=$(field "$phase" "$row" "$i" 2)
			ratio=$(awk -v fs="$f_s" -v fn="$f_n" -v s="$s" -v n="$nf" 'BEGIN {
				if (fs == "" || fs == 0) {print "–"; exit}
				if (n == 0) {print "∞"; exit}
				printf "%.2f×", (fn / fs) / (n / s) }')
			cpu=$(printf '%.2f / %.2f / %.2f' "$(field "$phase" "$row" "$i" 5)" "$(field "$phase" "$row" "$i" 3)" "$(field "$phase" "$row" "$i" 4)")
			label=${LABEL[$phase,$row,$i]}
			[[ $i == 0 ]] && label="**$label**"
			rate=$(rate_of "$phase" "$row" "$s" "$nf")
			[[ $nf == "$(want_files "$row")" ]] || rate+=" ($nf of $(want_files "$row") files in the cap)"
			[[ $i == 0 ]] && ratio=1
			printf '| %s | %s | %s | %.3f | %s | %s | %s |\n' "$rl" "$label" "$runs" "$s" \
				"$rate" "$ratio" "$cpu"
		done
	done
	say ""
	say "settings ferry copy chose (each run):"
	for row in $ROWS; do
		n=${NK[$phase,$row]:-0}
		for ((i = 0; i < n; i++)); do
			[[ -n ${SET[$phase,$row,$i]:-} ]] || continue
			# one line per distinct choice (the measured rtt aside), with its rtt range
			printf '%s' "${SET[$phase,$row,$i]}" | awk -v pre="  $phase $row [${LABEL[$phase,$row,$i]}]: " 'NF {
				rtt = $0; sub(/.*, rtt /, "", rtt); sub(/,.*/, "", rtt)
				k = $0; sub(/, rtt [^,]*/, "", k)
				n[k]++; r[k] = r[k] (r[k] == "" ? "" : " ") rtt
			} END {for (k in n) printf "%s%d× %s; rtt %s\n", pre, n[k], k, r[k]}'
		done
	done
done
say ""
say "== goals: ferry copy (no tuning flag) against globus-url-copy on GCT, ratio of rates (>1: ferry faster)"
say ""
say "| phase | row | ferry kind | vs globus-url-copy | ratio | goal |"
say "|---|---|---|---|---:|---|"
for phase in $DONE_PHASES; do
	set_phase "$phase"
	for row in $ROWS; do
		n=${NK[$phase,$row]:-0}
		((n)) || continue
		fk=()
		[[ $(nruns "$phase" "$row" 0) != 0 ]] && fk=(0)
		[[ $row == cksum ]] && fk+=("$(best "$phase" "$row" 'ferry default hash')")
		refs=("$(best "$phase" "$row" 'guc tuned*')" "$(best "$phase" "$row" 'guc default')")
		[[ $row == cksum ]] && refs[1]=$(best "$phase" "$row" 'guc -verify-checksum')
		for f in "${fk[@]}"; do
			((f >= 0)) || continue
			for g in "${refs[@]}"; do
				((g >= 0)) || continue
				goal=""
				if [[ $f == 0 && ${LABEL[$phase,$row,$g]} == "guc tuned"* ]]; then
					case $phase,$row in
					loop,cksum) goal="≥ 2.0×" ;;
					loop,*) goal="≥ 1.0×" ;;
					wan,small) goal="≥ 2.0×" ;;
					wan,big | wan,medium) goal="≥ 1.0×" ;;
					esac
				fi
				r=$(awk -v a="$(rate "$phase" "$row" "$f")" -v b="$(rate "$phase" "$row" "$g")" 'BEGIN {printf "%.2f", a / b}')
				if [[ -n $goal ]]; then
					goal+=$(awk -v r="$r" -v g="${goal//[^0-9.]/}" 'BEGIN {print (r >= g) ? " met" : " **not met**"}')
				fi
				say "| $phase | $row | ${LABEL[$phase,$row,$f]} | ${LABEL[$phase,$row,$g]} | ${r}× | $goal |"
			done
		done
	done
done
say "(guc tuned: the fastest of the tuned globus-url-copy kinds against GCT in that row)"
say ""
say "== commands (as run; URLs use this run's paths)"
for phase in $DONE_PHASES; do
	for row in $ROWS; do
		n=${NK[$phase,$row]:-0}
		for ((i = 0; i < n; i++)); do say "  $phase $row [${LABEL[$phase,$row,$i]}]: ${CMDLINE[$phase,$row,$i]}"; done
	done
done
say ""
((NFAIL == 0)) || say "$NFAIL copies FAILED (see the rows above); their client output is in $LOG/failed-*.out"
say "total time: $(($(date +%s) - T_START)) s"
