#!/usr/bin/env bash
# validate.sh — measure the emulated WAN of setup.sh: ping, iperf3 (1 and
# 8 streams, ferryA -> ferryB) with the delay line's CPU use, then GCT
# globus-gridftp-server in both namespaces and globus-url-copy third-party
# transfers driven from ferryA: one big file (default, -p 4, -p 8 -fast) and
# many small files (-fast -pp -cc 8; default and -fast alone for TIMEBOX s).
#
#   bench/wan/validate.sh                     # CCS="bbr cubic", RUNS=3
#   CCS=cubic RUNS=5 bench/wan/validate.sh
#
# Then the delay line's own limit: iperf3 with no rate cap and no loss
# (UNCAPPED=0 skips it).
# Environment: CCS (congestion controls, one full pass each) RUNS DELAY RATE
# LOSS QUEUE BIG_MIB SMALL_FILES SMALL_BYTES TIMEBOX IPERF_SECS UNCAPPED.
# Each row prints every run and the median. Copies are verified (cmp; file
# count and diff -r). Leaves the link down when done (setup.sh down).
# Needs root, iperf3, ping, globus-gridftp-server, globus-url-copy.
set -Eeuo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CCS=${CCS:-bbr cubic}
RUNS=${RUNS:-3}
DELAY=${DELAY:-30ms} RATE=${RATE:-1gbit} LOSS=${LOSS:-0.0001} QUEUE=${QUEUE:-auto}
BIG_MIB=${BIG_MIB:-512}
SMALL_FILES=${SMALL_FILES:-2000} SMALL_BYTES=${SMALL_BYTES:-51200}
TIMEBOX=${TIMEBOX:-60}
IPERF_SECS=${IPERF_SECS:-10}
W=/dev/shm/ferry-wan
STATE=${STATE:-/run/ferry-wan}
IP_A=10.77.0.1 IP_B=10.77.0.2 PORT=2811
HZ=$(getconf CLK_TCK)

say() { printf '%s\n' "$*"; }
show() { printf '+ %s\n' "$*"; }
in_a() { "$HERE/run-in.sh" ferryA "$@"; }
in_b() { "$HERE/run-in.sh" ferryB "$@"; }

cleanup() {
	local rc=$?
	trap - EXIT
	"$HERE/setup.sh" down 2>/dev/null || true # also stops everything left in the namespaces
	rm -rf "$W"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for t in iperf3 ping globus-gridftp-server globus-url-copy cmp diff; do
	command -v "$t" >/dev/null || { say "missing: $t" >&2; exit 1; }
done

median() { sort -n | awk '{a[NR]=$1} END {if (NR) print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
dl_pid() { cat "$STATE/delayline.pid"; }
dl_ticks() { awk '{print $14+$15}' "/proc/$(dl_pid)/stat"; }
now_ns() { date +%s%N; }

say "== machine: $(nproc) cpus, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%F %H:%M UTC')"
say "== GCT: $(globus-gridftp-server -version 2>&1 | head -1); $(iperf3 --version | head -1)"

# --- data --------------------------------------------------------------------
rm -rf "$W"
mkdir -p "$W"/{src/small,dst,log}
chmod 0755 "$W"
chmod 0777 "$W"/src "$W"/dst "$W"/src/small
show "head -c $((BIG_MIB << 20)) /dev/urandom > $W/src/big.bin"
head -c $((BIG_MIB << 20)) /dev/urandom >"$W/src/big.bin"
show "head -c $((SMALL_FILES * SMALL_BYTES)) /dev/urandom | split -b $SMALL_BYTES -a 5 -d - $W/src/small/f"
head -c $((SMALL_FILES * SMALL_BYTES)) /dev/urandom | split -b "$SMALL_BYTES" -a 5 -d - "$W/src/small/f"
chmod 0666 "$W"/src/big.bin "$W"/src/small/*

gct_start() {
	local ns ip dir
	for side in A B; do
		if [[ $side == A ]]; then ns=ferryA ip=$IP_A dir=src; else ns=ferryB ip=$IP_B dir=dst; fi
		show "ip netns exec $ns globus-gridftp-server -aa -anonymous-user nobody -p $PORT -hostname $ip -control-interface $ip -data-interface $ip -home-dir $W/$dir -d ERROR -l $W/log/gct-$ns.log &"
		setsid ip netns exec "$ns" globus-gridftp-server -aa -anonymous-user nobody -p "$PORT" \
			-hostname "$ip" -control-interface "$ip" -data-interface "$ip" -home-dir "$W/$dir" \
			-d ERROR -l "$W/log/gct-$ns.log" </dev/null >>"$W/log/gct-$ns.out" 2>&1 &
	done
	for _ in $(seq 50); do
		[[ -n $(in_a ss -Hltn "sport = :$PORT") && -n $(in_b ss -Hltn "sport = :$PORT") ]] && return 0
		sleep 0.1
	done
	say "GCT servers did not start" >&2
	cat "$W"/log/* >&2
	return 1
}

# one_pass CC: the whole set of measurements with one congestion control.
one_pass() {
	local cc=$1 r out mbps cpu t0 t1 c0 c1 vals cpus
	say ""
	say "======== congestion control: $cc"
	"$HERE/setup.sh" up -delay "$DELAY" -rate "$RATE" -loss "$LOSS" -queue "$QUEUE" -cc "$cc" 2>&1 | grep -E '^\+ setsid|^setup.sh: up'

	# ping
	show "ip netns exec ferryA ping -c 20 -i 0.2 $IP_B"
	in_a ping -q -c 20 -i 0.2 "$IP_B" | tail -1

	# iperf3
	show "ip netns exec ferryB iperf3 -s -B $IP_B -D"
	in_b iperf3 -s -B "$IP_B" -D
	sleep 0.3
	for P in 1 8; do
		vals=() cpus=()
		show "ip netns exec ferryA iperf3 -c $IP_B -t $IPERF_SECS -P $P   (x$RUNS)"
		for ((r = 1; r <= RUNS; r++)); do
			c0=$(dl_ticks) t0=$(now_ns)
			out=$(in_a iperf3 -c "$IP_B" -t "$IPERF_SECS" -P "$P" -f m)
			c1=$(dl_ticks) t1=$(now_ns)
			mbps=$(grep receiver <<<"$out" | tail -1 | awk '{print $(NF-2)}')
			cpu=$(((c1 - c0) * 100 * 1000000000 / HZ / (t1 - t0)))
			say "  run $r: $mbps Mb/s (receiver), retransmits $(grep sender <<<"$out" | tail -1 | awk '{print $(NF-1)}'), delay line CPU $cpu % of one core"
			vals+=("$mbps") cpus+=("$cpu")
		done
		say "  iperf3 -P $P [$cc]: median $(printf '%s\n' "${vals[@]}" | median) Mb/s, delay line CPU median $(printf '%s\n' "${cpus[@]}" | median) %"
	done

	# GCT, one big file
	gct_start
	local src=ftp://$IP_A:$PORT$W/src/big.bin dst=ftp://$IP_B:$PORT$W/dst/big.bin
	for opts in "" "-p 4" "-p 8 -fast"; do
		vals=() cpus=()
		show "ip netns exec ferryA globus-url-copy $opts $src $dst   (x$RUNS)"
		for ((r = 1; r <= RUNS; r++)); do
			rm -f "$W/dst/big.bin"
			c0=$(dl_ticks) t0=$(now_ns)
			# shellcheck disable=SC2086
			timeout 600 ip netns exec ferryA globus-url-copy $opts "$src" "$dst"
			c1=$(dl_ticks) t1=$(now_ns)
			cmp -s "$W/src/big.bin" "$W/dst/big.bin" || { say "  run $r: copy differs" >&2; return 1; }
			mbps=$(((BIG_MIB << 20) * 8 * 1000 / (t1 - t0)))
			cpu=$(((c1 - c0) * 100 * 1000000000 / HZ / (t1 - t0)))
			say "  run $r: $mbps Mb/s ($(((t1 - t0) / 1000000)) ms), delay line CPU $cpu %"
			vals+=("$mbps")
		done
		say "  ${BIG_MIB} MiB ${opts:-default} [$cc]: median $(printf '%s\n' "${vals[@]}" | median) Mb/s"
	done
	rm -f "$W/dst/big.bin"

	# GCT, many small files
	local ssrc=ftp://$IP_A:$PORT$W/src/small/ sdst=ftp://$IP_B:$PORT$W/dst/small/ n secs
	for opts in "-fast -pp -cc 8" "-fast -pp -cc 16" "-fast" ""; do
		local box=600
		[[ $opts == *-pp* ]] || box=$TIMEBOX
		vals=()
		local runs=$RUNS
		[[ $opts == *-pp* ]] || runs=1 # the slow rows are timeboxed: once is enough
		show "timeout $box ip netns exec ferryA globus-url-copy $opts -r $ssrc $sdst   (x$runs)"
		for ((r = 1; r <= runs; r++)); do
			rm -rf "$W/dst/small"
			mkdir -m 0777 "$W/dst/small"
			t0=$(now_ns)
			# shellcheck disable=SC2086
			timeout "$box" ip netns exec ferryA globus-url-copy $opts -r "$ssrc" "$sdst" || true
			t1=$(now_ns)
			n=$(find "$W/dst/small" -type f -size "${SMALL_BYTES}c" | wc -l)
			secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", (b-a)/1e9}')
			if [[ $n == "$SMALL_FILES" ]]; then
				diff -r "$W/src/small" "$W/dst/small" >/dev/null || { say "  small files differ" >&2; return 1; }
			fi
			say "  run $r: $n files in $secs s = $(awk -v n="$n" -v s="$secs" 'BEGIN {printf "%.1f", n/s}') files/s"
			vals+=("$(awk -v n="$n" -v s="$secs" 'BEGIN {printf "%.1f", n/s}')")
		done
		say "  ${SMALL_FILES} x ${SMALL_BYTES} B ${opts:-default} [$cc]: median $(printf '%s\n' "${vals[@]}" | median) files/s"
	done
	rm -rf "$W/dst/small"
	kill -USR1 "$(dl_pid)"
	sleep 0.2
	say "  delay line counters: $(tail -n 2 "$STATE/delayline.log" | sed 's/^delayline: [0-9:.]* //' | paste -sd'|' | sed 's/|/; /')"
}

# uncapped: what the delay line itself carries (30 ms each way, no rate cap,
# no loss), 1 and 4 streams, with the root namespace's congestion control.
uncapped() {
	local out cpu c0 c1 t0 t1
	say ""
	say "======== no rate cap, no loss (the delay line's own limit), default congestion control"
	"$HERE/setup.sh" up -delay "$DELAY" -rate 0 -loss 0 2>&1 | grep -E '^setup.sh: up'
	in_b iperf3 -s -B "$IP_B" -D
	sleep 0.3
	for P in 1 4; do
		show "ip netns exec ferryA iperf3 -c $IP_B -t $IPERF_SECS -P $P"
		c0=$(dl_ticks) t0=$(now_ns)
		out=$(in_a iperf3 -c "$IP_B" -t "$IPERF_SECS" -P "$P" -f m)
		c1=$(dl_ticks) t1=$(now_ns)
		cpu=$(((c1 - c0) * 100 * 1000000000 / HZ / (t1 - t0)))
		say "  iperf3 -P $P uncapped: $(grep receiver <<<"$out" | tail -1 | awk '{print $(NF-2)}') Mb/s, delay line CPU $cpu %"
	done
	kill -USR1 "$(dl_pid)"
	sleep 0.2
	say "  delay line counters: $(tail -n 2 "$STATE/delayline.log" | sed 's/^delayline: [0-9:.]* //' | paste -sd'|' | sed 's/|/; /')"
}

for cc in $CCS; do
	one_pass "$cc"
done
[[ ${UNCAPPED:-1} == 0 ]] || uncapped
