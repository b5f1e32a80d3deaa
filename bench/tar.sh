#!/usr/bin/env bash
# tar.sh — trees of small files (issue 12): `ferry copy` (which packs such
# trees as tar streams on its own, --tar auto) against the best tuned
# globus-url-copy and against globus-url-copy piping tar through GCT's popen
# driver, with floors (iperf3; cp -r and tar | tar on loopback). Every copy is
# third-party between two servers; files live in /dev/shm.
#
#   bench/tar.sh                             # loopback, then the emulated WAN; RUNS=3
#   PHASES=loop ROWS=l5k bench/tar.sh
#   PHASES=loop FILES=200 RUNS=1 bench/tar.sh   # a quick try: 200 files in every row
#   FERRY=/path/to/ferry bench/tar.sh        # measure that binary instead of building one
#
# Phases (PHASES, default "loop wan"):
#   loop  everything on 127.0.0.1
#   wan   bench/wan/setup.sh up -delay 30ms -rate 1gbit -loss 0.0001 (60 ms RTT,
#         1 Gbit/s, 0.01 % loss each way; congestion control: the namespaces'
#         default, bbr on these machines; WAN_CC=cubic to change it); source
#         servers in ferryA (10.77.0.1), destination servers in ferryB
#         (10.77.0.2), every client in ferryA. Before bringing the link up the
#         script waits up to WAN_WAIT s while bench/wan/README.md is missing or a
#         delay line runs (someone else's link); it takes the link down when the
#         phase ends and on exit (WAN_KEEP=1 keeps it).
# Rows (ROWS, default "w2k w20k l5k"; FILES=N sets every row's file count):
#   w2k   W2K_FILES (2,000) × W2K_BYTES (51,200 B), loop and wan
#   w20k  W20K_FILES (20,000) × W20K_BYTES (5,120 B), loop and wan
#   l5k   L5K_FILES (5,000) × L5K_BYTES (51,200 B), loop only
# Kinds per row, same run:
#   ferry              ferry copy -r -q ftp://SRC/ROW/ ftp://DST/ROW between two
#                      `ferry gridftp` servers, no tuning flag (--tar auto)
#   ferry --tar never  the same without tar packing (skipped when the ferry
#                      binary has no --tar flag)
#   guc best -cc N     globus-url-copy -fast -pp -cd -r -cc N between two GCT
#                      servers; N is the fastest of CC_SWEEP ("4 8 16 32"), one
#                      verified copy each, swept once per row before the runs
#   guc tar pipe       globus-url-copy -src-pipe "tar#cf#-#-C#SRCPARENT#ROW"
#                      -dst-pipe "tar#xf#-#-C#DSTDIR" ftp://A:PORT/x ftp://B:PORT/x
#                      between two GCT servers run with -fs-whitelist
#                      popen,file,ordering -popen-whitelist tar:/bin/tar (as nobody).
#                      The pipe commands are #-joined here: globus-url-copy 10.12
#                      splits them wrongly itself. The URL path is ignored by popen
#                      (it must not end in /).
#   guc tar pipe -fast -p 4   the same in MODE E with 4 streams (globus-url-copy
#                      adds ",ordering" to the destination's stack)
#   floor iperf3+3RTT  iperf3 -c DST -n ROWBYTES over a fresh connection on the
#                      same link (server in ferryB / on loopback, client in ferryA),
#                      its wall-clock time plus 3 RTTs (login, listing), RTT =
#                      ping's average on the link at the start of the phase
#   cp -r, tar cf - | tar xf -   (loop only) cp -r SRC DST and tar cf - | tar xf -, locally
# Known: with parallel streams (-p N > 1, MODE E) GCT 13.24's popen + ordering
# stack corrupts the stream now and then (about 1 copy in 5 on loopback in a
# quick test; -fast -p 1 never did): the destination's tar fails with "Skipping
# to next header" or the source's with "Broken pipe". Such a copy counts as
# failed like any other (and makes the exit status 1); the median is of the
# copies that passed, and the table shows how many failed.
# Each row: data made in /dev/shm, the guc -cc sweep, WARMUP (loop rows only)
# untimed copies of every kind, then RUNS timed copies per kind, the order of
# kinds reversed on every other run; the median is reported. Timing is
# wall-clock around the client process (start-up and session set-up
# included). Every copy is verified: file count and diff -rq against the
# source (iperf3: its exit status); a failed copy is reported on its line,
# counted, kept out of the medians, and makes the script exit 1 after the
# tables (logs kept).
# Reported: per kind, median seconds and files/s; the issue's ratios:
#   speedup vs guc best = guc best s ÷ ferry s (goal ≥ 1.5× w2k wan, ≥ 5× w20k wan)
#   ferry ÷ floor       = ferry s ÷ floor s   (goal ≤ 1.3 w2k wan)
#   cp -r vs ferry      = cp -r s ÷ ferry s   (goal ≥ 0.7 l5k loop)
# and, without goals, the same for the other rows, the tar pipe and --tar never.
# Environment: RUNS PHASES ROWS FILES WARMUP CC_SWEEP W2K_FILES W2K_BYTES
#   W20K_FILES W20K_BYTES L5K_FILES L5K_BYTES WAN_WAIT WAN_KEEP WAN_CC
#   PORT_BASE (7 ports) FERRY KEEP_LOGS=1.
# Needs: go, globus-gridftp-server, globus-url-copy, iperf3, tar, iproute2,
# root (GCT serves anonymous users as nobody; namespaces). Listens on
# 127.0.0.1 and, in the namespaces, on 10.77.0.1/10.77.0.2 only.
set -Eeuo pipefail
shopt -s inherit_errexit
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${RUNS:-3}
PHASES=${PHASES:-loop wan}
ROWS=$(selected_rows w2k w20k l5k)
FILES=${FILES:-}
WARMUP=${WARMUP:-1}
CC_SWEEP=${CC_SWEEP:-4 8 16 32}
W2K_FILES=${W2K_FILES:-2000} W2K_BYTES=${W2K_BYTES:-51200}
W20K_FILES=${W20K_FILES:-20000} W20K_BYTES=${W20K_BYTES:-5120}
L5K_FILES=${L5K_FILES:-5000} L5K_BYTES=${L5K_BYTES:-51200}
WAN_WAIT=${WAN_WAIT:-1200}
WAN_KEEP=${WAN_KEEP:-0}
WAN_CC=${WAN_CC:-}
PORT_BASE=${PORT_BASE:-29871} # below the ephemeral range
KEEP_LOGS=${KEEP_LOGS:-0}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WANDIR=$REPO/bench/wan
WORK=/dev/shm/ferry-tar.$$ # data: src (every source server's root), one destination root per kind
TMP=$(mktemp -d /tmp/ferry-tar.XXXXXX) # binary, logs
LOG=$TMP/logs
mkdir -p "$LOG"
T_START=$(date +%s)
NFAIL=0

trap cleanup EXIT
trap 'exit 130' INT TERM

need go globus-gridftp-server globus-url-copy iperf3 tar cp diff ss setsid ip ping
[[ $(id -u) == 0 ]] || { say "run as root (GCT serves anonymous users as nobody; namespaces)" >&2; exit 1; }
[[ -x /bin/tar ]] || { say "missing: /bin/tar (GCT's popen whitelist names it)" >&2; exit 1; }
for row in $ROWS; do
	case $row in w2k | w20k | l5k) ;; *) say "unknown row $row (want w2k w20k l5k)" >&2; exit 1 ;; esac
done
for phase in $PHASES; do
	case $phase in loop | wan) ;; *) say "unknown phase $phase (want loop wan)" >&2; exit 1 ;; esac
done

# --- machine -----------------------------------------------------------------
say "== machine"
machine_facts
say "shm:     /dev/shm free: $(df -h --output=avail /dev/shm | tail -1 | tr -d ' ')"
say "tcp cc:  $(sysctl -n net.ipv4.tcp_congestion_control) (root ns)"
say "GCT:     $(globus-gridftp-server -version 2>&1 | head -1); globus-url-copy $(globus-url-copy -version 2>&1 | awk '{print $2}'); $(iperf3 --version | head -1); $(tar --version | head -1)"
say "runs:    RUNS=$RUNS (median), PHASES=\"$PHASES\", ROWS=\"$ROWS\"${FILES:+, FILES=$FILES}, CC_SWEEP=\"$CC_SWEEP\""

# --- build -------------------------------------------------------------------
say "== build"
build_ferry
HAVE_TAR=0
if "$FERRY" copy --help 2>&1 | grep -q -- '--tar'; then
	HAVE_TAR=1
else
	say "this ferry has no --tar flag: kind \"ferry --tar never\" skipped (\"ferry\" is then without tar packing too)"
fi

mkdir -p "$WORK"/{src,ferry-dst,gct-dst,pipe-dst,cp-dst}
chmod 0755 "$WORK"
chmod 0777 "$WORK"/*

# --- phases and rows -----------------------------------------------------------
PHASE="" NS_A="" NS_B="" IP_A="" IP_B="" CLIENT=() RTT_MS=0
P_GSRC=$PORT_BASE P_GDST=$((PORT_BASE + 1)) P_PSRC=$((PORT_BASE + 2)) P_PDST=$((PORT_BASE + 3))
P_FSRC=$((PORT_BASE + 4)) P_FDST=$((PORT_BASE + 5)) P_IPERF=$((PORT_BASE + 6))

set_phase() {
	PHASE=$1
	if [[ $PHASE == loop ]]; then
		NS_A="" NS_B="" IP_A=127.0.0.1 IP_B=127.0.0.1 CLIENT=()
	else
		NS_A=ferryA NS_B=ferryB IP_A=10.77.0.1 IP_B=10.77.0.2 CLIENT=(ip netns exec ferryA)
	fi
}
rows_of() { # PHASE: the rows of ROWS this phase runs
	local r
	for r in $ROWS; do [[ $1 == wan && $r == l5k ]] || printf '%s\n' "$r"; done
}
nfiles() { # ROW
	[[ -n $FILES ]] && { echo "$FILES"; return; }
	case $1 in w2k) echo "$W2K_FILES" ;; w20k) echo "$W20K_FILES" ;; l5k) echo "$L5K_FILES" ;; esac
}
fsize() { case $1 in w2k) echo "$W2K_BYTES" ;; w20k) echo "$W20K_BYTES" ;; l5k) echo "$L5K_BYTES" ;; esac; }
row_label() { printf "%s: %s × %s B" "$1" "$(nfiles "$1")" "$(fsize "$1")"; }

make_data() { # ROW: $WORK/src/ROW
	local n sz d=$WORK/src/$1 got
	n=$(nfiles "$1") sz=$(fsize "$1")
	rm -rf "$d"
	mkdir -m 0777 "$d"
	show "head -c $((n * sz)) /dev/urandom | split -b $sz -a 5 -d - $d/f"
	head -c $((n * sz)) /dev/urandom | split -b "$sz" -a 5 -d - "$d/f"
	chmod 0666 "$d"/*
	got=$(find "$d" -type f | wc -l)
	[[ $got == "$n" ]] || { say "made $got files, want $n" >&2; return 1; }
}

# --- servers -----------------------------------------------------------------
start_servers() {
	ports_free "$NS_A $NS_B" "$P_GSRC" "$P_GDST" "$P_PSRC" "$P_PDST" "$P_FSRC" "$P_FDST" "$P_IPERF"
	local popen=(-fs-whitelist popen,file,ordering -popen-whitelist tar:/bin/tar)
	gct_server gsrc "$NS_A" "$IP_A" "$P_GSRC" "$WORK/src"
	gct_server gdst "$NS_B" "$IP_B" "$P_GDST" "$WORK/gct-dst"
	gct_server psrc "$NS_A" "$IP_A" "$P_PSRC" "$WORK/src" "${popen[@]}"
	gct_server pdst "$NS_B" "$IP_B" "$P_PDST" "$WORK/pipe-dst" "${popen[@]}"
	ferry_server fsrc "$NS_A" "$IP_A" "$P_FSRC" "$WORK/src"
	ferry_server fdst "$NS_B" "$IP_B" "$P_FDST" "$WORK/ferry-dst"
	start_bg iperf "$NS_B" "$P_IPERF" "$LOG/$PHASE-iperf3.log" iperf3 -s -B "$IP_B" -p "$P_IPERF"
}

# --- kinds -------------------------------------------------------------------
# kinds PHASE: one line per kind: label|type (the label may hold "\|", for
# markdown; the type follows the last "|"). The first is ferry copy with no
# tuning flag, the reference of every ratio.
kinds() {
	say "ferry|ferry"
	[[ $HAVE_TAR == 1 ]] && say "ferry --tar never|never"
	say "guc best|guc"
	say "guc tar pipe|pipe"
	say "guc tar pipe -fast -p 4|pipefast"
	say "floor iperf3+3RTT|iperf"
	if [[ $1 == loop ]]; then
		say "cp -r|cp"
		say "tar cf - \\| tar xf -|tartar"
	fi
}

GUC_CC="" # the sweep's choice for the current row
# cmd_of TYPE ROW: the command, one word per line; the destination in $DEST.
cmd_of() {
	local t=$1 row=$2 n
	n=$(nfiles "$row")
	case $t in
	ferry | never)
		DEST=$WORK/ferry-dst/$row
		printf '%s\n' "$FERRY" copy -r -q
		[[ $t == never ]] && printf '%s\n' --tar never
		printf '%s\n' "ftp://$IP_A:$P_FSRC/$row/" "ftp://$IP_B:$P_FDST/$row"
		;;
	guc | guc=*)
		DEST=$WORK/gct-dst/$row
		local cc=${GUC_CC}
		[[ $t == guc=* ]] && cc=${t#guc=}
		printf '%s\n' globus-url-copy -fast -pp -cd -r -cc "$cc" \
			"ftp://$IP_A:$P_GSRC$WORK/src/$row/" "ftp://$IP_B:$P_GDST$WORK/gct-dst/$row/"
		;;
	pipe | pipefast)
		DEST=$WORK/pipe-dst/$row
		printf '%s\n' globus-url-copy
		[[ $t == pipefast ]] && printf '%s\n' -fast -p 4
		printf '%s\n' -src-pipe "tar#cf#-#-C#$WORK/src#$row" -dst-pipe "tar#xf#-#-C#$WORK/pipe-dst" \
			"ftp://$IP_A:$P_PSRC/x" "ftp://$IP_B:$P_PDST/x"
		;;
	iperf)
		DEST=""
		printf '%s\n' iperf3 -c "$IP_B" -p "$P_IPERF" -n "$((n * $(fsize "$row")))"
		;;
	cp)
		DEST=$WORK/cp-dst/$row
		printf '%s\n' cp -r "$WORK/src/$row" "$WORK/cp-dst/"
		;;
	tartar)
		DEST=$WORK/cp-dst/$row
		printf '%s\n' bash -o pipefail -c "tar cf - -C $WORK/src $row | tar xf - -C $WORK/cp-dst"
		;;
	esac
}
# shown TYPE ROW: the command line as a shell would take it.
shown() {
	local w out=$(nsexec "$([[ $1 == cp || $1 == tartar ]] || echo "$NS_A")") words=()
	mapfile -t words < <(cmd_of "$1" "$2")
	for w in "${words[@]}"; do
		if [[ $w == *[\ \|\#]* ]]; then out+="\"$w\" "; else out+="$w "; fi
	done
	printf '%s' "${out% }"
}

# --- measuring ---------------------------------------------------------------
# verify ROW DEST: file count and diff -rq against the source.
verify() {
	local n got
	n=$(nfiles "$1")
	[[ -d $2 ]] || { say "$2 does not exist" >&2; return 1; }
	got=$(find "$2" -type f | wc -l)
	[[ $got == "$n" ]] || { say "$got files arrived, want $n" >&2; return 1; }
	diff -rq "$WORK/src/$1" "$2" >&2
}

# one ROW TYPE: one timed, verified copy; prints its seconds, or "FAIL why".
one() {
	local row=$1 t=$2 cmd=() pre=() t0 t1 rc=0 why
	mapfile -t cmd < <(cmd_of "$t" "$row")
	cmd_of "$t" "$row" >/dev/null # sets DEST in this shell
	[[ $t == cp || $t == tartar ]] || pre=("${CLIENT[@]}")
	[[ -n $DEST ]] && rm -rf "$DEST"
	sleep 0.2
	echo "### $PHASE $row [$t] ${pre[*]} ${cmd[*]}" >>"$LOG/client.log"
	t0=$(date +%s%N)
	"${pre[@]}" "${cmd[@]}" >"$TMP/client.out" 2>&1 </dev/null || rc=$?
	t1=$(date +%s%N)
	cat "$TMP/client.out" >>"$LOG/client.log"
	: >"$TMP/settings"
	[[ $t == ferry || $t == never ]] && { grep '^settings:' "$TMP/client.out" | sed 's/^settings: //' >"$TMP/settings" || true; }
	if [[ $rc != 0 ]]; then
		why="exit $rc: $(grep -v '^$' "$TMP/client.out" | tail -n 3 | tr '\n' ' ')"
	elif [[ ($t == ferry || $t == never) ]] && ! grep -q ' 0 failed' "$TMP/client.out"; then
		why="ferry copy reported failed files: $(grep -m1 'failed' "$TMP/client.out")"
	elif [[ -n $DEST ]] && ! verify "$row" "$DEST" 2>"$TMP/verify.out"; then
		why="verification failed: $(head -n 3 "$TMP/verify.out" | tr '\n' ' ')"
	fi
	[[ -n $DEST ]] && rm -rf "$DEST"
	if [[ -n ${why:-} ]]; then
		cp "$TMP/client.out" "$LOG/failed-$PHASE-$row-$t-$RANDOM.out"
		echo "FAIL $why"
		return 0
	fi
	if [[ $t == iperf ]]; then
		awk -v ns=$((t1 - t0)) -v rtt="$RTT_MS" 'BEGIN {printf "%.4f\n", ns / 1e9 + 3 * rtt / 1000}'
	else
		awk -v ns=$((t1 - t0)) 'BEGIN {printf "%.4f\n", ns / 1e9}'
	fi
}

declare -A RES FAILS SET LABEL CMDLINE NK SWEEP RTT
failed() { # PHASE ROW I WHY
	FAILS[$1,$2,$3]=$((${FAILS[$1,$2,$3]:-0} + 1))
	NFAIL=$((NFAIL + 1)) KEEP_LOGS=1
	say "  !!! FAILED $(printf '%-26s' "${LABEL[$1,$2,$3]}:") $4"
}

# sweep ROW: one verified copy per -cc of CC_SWEEP; sets GUC_CC to the fastest.
sweep() {
	local row=$1 cc res best="" bs=""
	say "  guc -cc sweep (one copy each): $(shown guc=N "$row")"
	for cc in $CC_SWEEP; do
		res=$(one "$row" "guc=$cc")
		if [[ $res == FAIL* ]]; then
			NFAIL=$((NFAIL + 1)) KEEP_LOGS=1
			say "  !!! FAILED sweep -cc $cc: ${res#FAIL }"
			SWEEP[$PHASE,$row]+=" -cc $cc FAILED;"
			continue
		fi
		say "    -cc $(printf '%-3s' "$cc") $(printf '%7.3f' "$res") s"
		SWEEP[$PHASE,$row]+=" -cc $cc $(printf '%.3f' "$res") s;"
		if [[ -z $bs ]] || awk -v a="$res" -v b="$bs" 'BEGIN {exit !(a < b)}'; then best=$cc bs=$res; fi
	done
	GUC_CC=${best:-${CC_SWEEP%% *}}
	[[ -n $best ]] || say "  !!! every -cc of the sweep failed; guc best runs with -cc $GUC_CC"
	say "  guc best: -cc $GUC_CC"
}

run_row() {
	local row=$1 i n r res t order=() lines=()
	mapfile -t lines < <(kinds "$PHASE")
	n=${#lines[@]}
	say "== $PHASE row $row: $(row_label "$row")"
	make_data "$row"
	sweep "$row"
	for ((i = 0; i < n; i++)); do
		LABEL[$PHASE,$row,$i]=${lines[i]%|*}
		t=${lines[i]##*|}
		[[ $t == guc ]] && LABEL[$PHASE,$row,$i]+=" -cc $GUC_CC"
		CMDLINE[$PHASE,$row,$i]=$(shown "$t" "$row")
		show "${CMDLINE[$PHASE,$row,$i]}"
	done
	if [[ $WARMUP == 1 && $PHASE == loop ]]; then
		for ((i = 0; i < n; i++)); do
			res=$(one "$row" "${lines[i]##*|}")
			[[ $res == FAIL* ]] && failed "$PHASE" "$row" "$i" "(warm-up) ${res#FAIL }"
		done
		say "  (warm-up: one untimed copy of each kind)"
	fi
	for ((r = 1; r <= RUNS; r++)); do
		for i in $(run_order "$r" "$n"); do
			t=${lines[i]##*|}
			res=$(one "$row" "$t")
			if [[ $res == FAIL* ]]; then
				failed "$PHASE" "$row" "$i" "run $r: ${res#FAIL }"
				continue
			fi
			RES[$PHASE,$row,$i]+="$res"$'\n'
			local st=""
			if [[ $t == ferry || $t == never ]]; then
				st=$(<"$TMP/settings")
				SET[$PHASE,$row,$i]+="$st"$'\n'
				st="  [$st]"
			fi
			say "  run $r $(printf '%-26s' "${LABEL[$PHASE,$row,$i]}:") $(printf '%8.3f s %8.0f files/s' "$res" "$(awk -v s="$res" -v n="$(nfiles "$row")" 'BEGIN {print n / s}')")$st"
		done
	done
	rm -rf "${WORK:?}/src/$row"
	NK[$PHASE,$row]=$n
}

# --- phases ------------------------------------------------------------------
DONE_PHASES=""
for phase in $PHASES; do
	set_phase "$phase"
	[[ -n $(rows_of "$phase") ]] || continue
	if [[ $phase == wan ]]; then
		if ! wan_ready; then
			say "== wan: $WANDIR/README.md is missing or the link busy after $WAN_WAIT s; WAN rows skipped"
			NFAIL=$((NFAIL + 1))
			continue
		fi
		say "== wan link"
		wan_up
		RTT_MS=$WAN_RTT_MS
	else
		show "ping -c 5 -i 0.2 127.0.0.1"
		RTT_MS=$(ping -c 5 -i 0.2 127.0.0.1 | tail -1 | awk -F/ '{print $5}')
	fi
	say "  rtt (ping average): $RTT_MS ms"
	RTT[$phase]=$RTT_MS
	say "== $phase servers"
	start_servers
	for row in $(rows_of "$phase"); do run_row "$row"; done
	stop_servers
	[[ $phase == wan ]] && wan_down
	DONE_PHASES+=" $phase"
done

# --- tables ------------------------------------------------------------------
nruns() { printf '%s' "${RES[$1,$2,$3]:-}" | awk 'NF' | wc -l; }
med() { printf '%s' "${RES[$1,$2,$3]:-}" | awk 'NF' | median; } # PHASE ROW I: median s
idx() { # PHASE ROW LABELPREFIX: the index of the first kind whose label starts so, or -1
	local i
	for ((i = 0; i < ${NK[$1,$2]:-0}; i++)); do
		[[ ${LABEL[$1,$2,$i]} == "$3"* ]] && { echo "$i"; return; }
	done
	echo -1
}
say ""
say "== results: median of $RUNS runs (wall-clock s, client start to exit); 'ferry speedup' = this s ÷ ferry s (> 1: ferry faster)"
say ""
say "| phase | row | kind | runs | median s | files/s | ferry speedup |"
say "|---|---|---|---:|---:|---:|---:|"
for phase in $DONE_PHASES; do
	for row in $(rows_of "$phase"); do
		n=${NK[$phase,$row]:-0}
		f_s=""
		[[ $(nruns "$phase" "$row" 0) != 0 ]] && f_s=$(med "$phase" "$row" 0)
		for ((i = 0; i < n; i++)); do
			runs=$(nruns "$phase" "$row" "$i")
			nfail=${FAILS[$phase,$row,$i]:-0}
			((nfail)) && runs+=" (+$nfail **failed**)"
			label=${LABEL[$phase,$row,$i]}
			[[ $i == 0 ]] && label="**$label**"
			if [[ $(nruns "$phase" "$row" "$i") == 0 ]]; then
				say "| $phase | $(row_label "$row") | $label | $runs | – | **every run failed** | – |"
				continue
			fi
			s=$(med "$phase" "$row" "$i")
			awk -v p="$phase" -v rl="$(row_label "$row")" -v l="$label" -v runs="$runs" -v s="$s" -v fs="$f_s" -v n="$(nfiles "$row")" -v i="$i" 'BEGIN {
				sp = (fs == "") ? "–" : (i == 0 ? "1" : sprintf("%.2f×", s / fs))
				printf "| %s | %s | %s | %s | %.3f | %.0f | %s |\n", p, rl, l, runs, s, n / s, sp }'
		done
	done
done
say ""
say "rtt (ping average, ms):$(for p in $DONE_PHASES; do printf ' %s %s;' "$p" "${RTT[$p]}"; done) the floor is iperf3's wall-clock time + 3 × rtt"
say "guc -cc sweep (one copy each; best used as guc best):"
for phase in $DONE_PHASES; do
	for row in $(rows_of "$phase"); do say "  $phase $row:${SWEEP[$phase,$row]:-}"; done
done
say "settings ferry copy chose (each run):"
for phase in $DONE_PHASES; do
	for row in $(rows_of "$phase"); do
		for ((i = 0; i < ${NK[$phase,$row]:-0}; i++)); do
			[[ -n ${SET[$phase,$row,$i]:-} ]] || continue
			printf '%s' "${SET[$phase,$row,$i]}" | awk -v pre="  $phase $row [${LABEL[$phase,$row,$i]}]: " 'NF {
				rtt = $0; sub(/.*, rtt /, "", rtt); sub(/,.*/, "", rtt)
				k = $0; sub(/, rtt [^,]*/, "", k)
				n[k]++; r[k] = r[k] (r[k] == "" ? "" : " ") rtt
			} END {for (k in n) printf "%s%d× %s; rtt %s\n", pre, n[k], k, r[k]}'
		done
	done
done

# ratio PHASE ROW A B: median s of kind A ÷ median s of kind B ("" when either has none).
ratio() {
	local a=$3 b=$4
	((a >= 0 && b >= 0)) || return 0
	[[ $(nruns "$1" "$2" "$a") != 0 && $(nruns "$1" "$2" "$b") != 0 ]] || return 0
	awk -v a="$(med "$1" "$2" "$a")" -v b="$(med "$1" "$2" "$b")" 'BEGIN {printf "%.2f", a / b}'
}
goal_row() { # PHASE ROW MEASURE VALUE SUFFIX GOAL(">= x" / "<= x" / "")
	local v=$4 g=$6 met=""
	[[ -n $v ]] || { say "| $1 | $2 | $3 | **no value (failed)** | $g |"; return; }
	if [[ -n $g ]]; then
		met=$(awk -v v="$v" -v op="${g%% *}" -v x="${g#* }" 'BEGIN {
			ok = (op == ">=") ? (v >= x) : (v <= x); print ok ? "met" : "**not met**" }')
		g="${g/>=/≥}"
		g="${g/<=/≤} — $met"
	fi
	say "| $1 | $2 | $3 | $v$5 | $g |"
}
say ""
say "== the issue's measures (ferry = ferry copy with no tuning flag)"
say ""
say "| phase | row | measure | value | goal |"
say "|---|---|---|---:|---|"
for phase in $DONE_PHASES; do
	for row in $(rows_of "$phase"); do
		rl=$(row_label "$row")
		g_sp="" g_fl="" g_cp=""
		case $phase,$row in
		wan,w2k) g_sp=">= 1.5" g_fl="<= 1.3" ;;
		wan,w20k) g_sp=">= 5" ;;
		loop,l5k) g_cp=">= 0.7" ;;
		esac
		goal_row "$phase" "$rl" "speedup vs guc best (guc s ÷ ferry s)" "$(ratio "$phase" "$row" "$(idx "$phase" "$row" "guc best")" 0)" "×" "$g_sp"
		for k in "guc tar pipe" "guc tar pipe -fast -p 4"; do
			i=$(idx "$phase" "$row" "$k")
			[[ ${LABEL[$phase,$row,$i]:-} == "$k" ]] || continue
			goal_row "$phase" "$rl" "speedup vs $k" "$(ratio "$phase" "$row" "$i" 0)" "×" ""
		done
		goal_row "$phase" "$rl" "ferry ÷ floor (ferry s ÷ iperf3+3RTT s)" "$(ratio "$phase" "$row" 0 "$(idx "$phase" "$row" "floor")")" "" "$g_fl"
		if [[ $phase == loop ]]; then
			goal_row "$phase" "$rl" "cp -r vs ferry (cp s ÷ ferry s)" "$(ratio "$phase" "$row" "$(idx "$phase" "$row" "cp -r")" 0)" "" "$g_cp"
		fi
		i=$(idx "$phase" "$row" "ferry --tar never")
		((i >= 0)) && goal_row "$phase" "$rl" "tar packing's gain (--tar never s ÷ ferry s)" "$(ratio "$phase" "$row" "$i" 0)" "×" ""
	done
done
say ""
say "== commands (as run; paths are this run's)"
for phase in $DONE_PHASES; do
	for row in $(rows_of "$phase"); do
		for ((i = 0; i < ${NK[$phase,$row]:-0}; i++)); do say "  $phase $row [${LABEL[$phase,$row,$i]}]: ${CMDLINE[$phase,$row,$i]}"; done
	done
done
say ""
say "total time: $(($(date +%s) - T_START)) s"
if ((NFAIL)); then
	say ""
	say "!!! $NFAIL copies FAILED (see the lines marked !!! above); client output in $LOG/failed-*.out, all of it in $LOG/client.log"
	exit 1
fi
