#!/usr/bin/env bash
# star-capacity.sh — what the star of setup.sh (up -nodes N) can carry on
# this machine: for each per-link rate of RATES, iperf3 flows between its
# namespaces in several patterns at once, each flow's and the sum's
# goodput, and the CPU used meanwhile (the delay line's, % of one core;
# the machine's, % of all cores). Used to choose a rate for
# bench/multilink.sh with headroom.
#
#   bench/wan/star-capacity.sh                   # RATES="0 50mbit 75mbit 100mbit", 9 nodes, 10 s
#   RATES=50mbit SECS=20 bench/wan/star-capacity.sh
#
# Patterns ("I>J": an iperf3 flow from ferryI to ferryJ; all of a pattern at once):
#   pair    0>1
#   4pairs  0>1 2>3 4>5 6>7              (disjoint: every link carries one flow)
#   chain   0>1 1>2 ... (N-2)>(N-1)      (every node sends one flow and receives one,
#                                         as a multicast chain does)
#   fan4    0>1 0>2 0>3 0>4              (four flows share ferry0's uplink)
# Environment: RATES NODES (9) SECS (10) DELAY (15ms) LOSS (0) ROWS (the
# patterns; PATTERNS, its old name) WAN_CC.
# Brings the star up for each rate (setup.sh up tears down any link first:
# run it only when no one else uses bench/wan) and takes it down at the end.
# Needs root, iperf3.
set -Eeuo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/../lib.sh" # selected_rows (say, show and cleanup are this script's own, below)
RATES=${RATES:-0 50mbit 75mbit 100mbit}
NODES=${NODES:-9}
SECS=${SECS:-10}
DELAY=${DELAY:-15ms} LOSS=${LOSS:-0}
ROWS=${ROWS:-${PATTERNS:-}} # PATTERNS: the old name of ROWS
PATTERNS=$(selected_rows pair 4pairs chain fan4)
WAN_CC=${WAN_CC:-}
STATE=${STATE:-/run/ferry-wan}
TMP=$(mktemp -d /tmp/star-capacity.XXXXXX)

say() { printf '%s\n' "$*"; }
show() { printf '+ %s\n' "$*"; }
cleanup() {
	local rc=$?
	trap - EXIT
	"$HERE/setup.sh" down >/dev/null 2>&1 || true # also stops the iperf3 servers
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
command -v iperf3 >/dev/null || { say "missing: iperf3" >&2; exit 1; }
if "$HERE/setup.sh" status 2>/dev/null | grep -q '^delay line running'; then
	say "a delay line is running (someone's link); stop it first ($HERE/setup.sh down)" >&2
	trap - EXIT
	exit 1
fi

ip_of() { echo "10.77.1.$((10 + $1))"; }
flows_of() {
	local i
	case $1 in
	pair) echo "0>1" ;;
	4pairs) echo "0>1 2>3 4>5 6>7" ;;
	chain) for ((i = 0; i < NODES - 1; i++)); do printf '%d>%d ' "$i" $((i + 1)); done ;;
	fan4) echo "0>1 0>2 0>3 0>4" ;;
	*) say "unknown pattern $1" >&2; return 1 ;;
	esac
}
snap() { # "busy total dl": jiffies
	local dl
	dl=$(awk '{print $14 + $15}' "/proc/$(cat "$STATE/delayline.pid")/stat")
	awk -v dl="$dl" '/^cpu / {t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $5 - $6, t, dl}' /proc/stat
}

say "== $(nproc) cpus, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%F %H:%M UTC'); $NODES nodes, $SECS s a pattern"
for rate in $RATES; do
	args=(-nodes "$NODES" -rate "$rate" -delay "$DELAY" -loss "$LOSS")
	[[ -z $WAN_CC ]] || args+=(-cc "$WAN_CC")
	show "$HERE/setup.sh up ${args[*]}"
	"$HERE/setup.sh" up "${args[@]}" >"$TMP/setup.log" 2>&1 || { cat "$TMP/setup.log" >&2; exit 1; }
	for ((j = 1; j < NODES; j++)); do
		ip netns exec "ferry$j" iperf3 -s -D -B "$(ip_of "$j")" -p 5201
	done
	sleep 0.5
	for pat in $PATTERNS; do
		read -ra flows <<<"$(flows_of "$pat")"
		# In every pattern each server (ferryJ) has one client: an iperf3 server takes one test at a time.
		pids=()
		s0=$(snap)
		for f in "${flows[@]}"; do
			i=${f%>*} j=${f#*>}
			ip netns exec "ferry$i" iperf3 -c "$(ip_of "$j")" -p 5201 -t "$SECS" -f m >"$TMP/$i-$j" 2>&1 &
			pids+=($!)
		done
		for p in "${pids[@]}"; do wait "$p" || true; done
		s1=$(snap)
		sum=0 line=""
		for f in "${flows[@]}"; do
			i=${f%>*} j=${f#*>}
			r=$(awk '/receiver/ {print $(NF - 2)}' "$TMP/$i-$j")
			[[ -n $r ]] || r="fail($(grep -m1 -i error "$TMP/$i-$j" | cut -c1-40))"
			line+=" $f $r;"
			[[ $r == fail* ]] || sum=$(awk -v s="$sum" -v r="$r" 'BEGIN {print s + r}')
		done
		cpu=$(awk -v a="$s0" -v b="$s1" -v n="$(nproc)" 'BEGIN {split(a, x, " "); split(b, y, " "); t = y[2] - x[2]
			printf "delay line %.0f%% of a core, machine %.0f%% of %d cores", 100 * n * (y[3] - x[3]) / t, 100 * (y[1] - x[1]) / t, n}')
		say "rate $rate, $pat: sum $sum Mb/s; $cpu;$line"
	done
done
