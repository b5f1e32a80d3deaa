#!/usr/bin/env bash
# setup.sh — an emulated wide-area link between two network namespaces,
# for machines without netem: a user-space delay line (bench/wan/delayline)
# owns TUN device tunA in namespace ferryA (10.77.0.1) and tunB in ferryB
# (10.77.0.2) and forwards packets between them with a one-way delay, a
# rate cap with a bounded drop-tail queue, and random or bursty loss, each
# direction (the same both ways unless a -*-ba option gives B->A its own).
#
#   bench/wan/setup.sh up [-delay 30ms] [-rate 1gbit] [-loss 0.0001] [-queue auto|PKTS|BYTES|0.25bdp|2bdp]
#                         [-loss-model random|bursty|bursty:B] [-delay-ba D] [-rate-ba R] [-loss-ba P] [-queue-ba Q]
#                         [-cc bbr|cubic|reno]
#   bench/wan/setup.sh down
#   bench/wan/setup.sh status
#
# Then, e.g.:  bench/wan/run-in.sh ferryB iperf3 -s -B 10.77.0.2 -D
#              bench/wan/run-in.sh ferryA iperf3 -c 10.77.0.2 -P 8
#
# Or a star of N namespaces (-nodes N, 2 to 64): ferry0 .. ferryN-1 with
# addresses 10.77.1.10 .. 10.77.1.(10+N-1) (ferryI = 10.77.1.(10+I)), each
# on its own TUN device tunI, joined by the delay line as a hub: each
# namespace's access link to the hub has -delay, -rate, -loss and -queue
# each direction (its uplink caps all it sends, its downlink all it
# receives), so a path between two nodes crosses two links: one-way delay
# 2 x -delay (default 15ms here: 60 ms RTT, as the pair's default), and
# -queue auto is one BDP of such a path. -link I:key=value[:key=value...]
# (repeatable) overrides node I's link: rate (both ways), up, down,
# delay, loss, queue.
#
#   bench/wan/setup.sh up -nodes 9 -delay 15ms -rate 100mbit -loss 0 [-link 0:up=1gbit]
#   bench/wan/run-in.sh ferry3 iperf3 -s -B 10.77.1.13 -D      # or: run-in.sh 3 ...
#   bench/wan/run-in.sh ferry0 iperf3 -c 10.77.1.13
#
# up is idempotent: it first tears down whatever a previous up (or a crashed
# one) left, then builds the delay line and starts it. down works after a
# crash too: it stops the delay line (any process running our binary, which
# the pid file names), every process left inside ferryA/ferryB (and the
# star's ferry0..), deletes the namespaces, removes their /etc/netns/NS (hosts, resolv.conf),
# and restores the root namespace's sysctls it changed (socket-buffer
# limits; the allowed congestion controls, when -cc needs one added).
# -cc sets the namespaces' TCP congestion control; by default they inherit
# the root namespace's (bbr on these machines; Linux's usual default is cubic).
# Needs root, go, iproute2. State (binary, pid, log, saved sysctls): $STATE.
set -Eeuo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STATE=${STATE:-/run/ferry-wan}
NS_A=ferryA NS_B=ferryB
TUN_A=tunA TUN_B=tunB
IP_A=10.77.0.1 IP_B=10.77.0.2
STAR_NET=10.77.1 STAR_BASE=10 # the star: ferryI has $STAR_NET.$((STAR_BASE + I))/24 on tunI
MTU=1500
BUF_MAX=$((64 << 20)) # socket buffers up to 64 MiB: 8x the BDP of 1 Gbit/s x 60 ms

say() { printf 'setup.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
run() { printf '+ %s\n' "$*" >&2; "$@"; }

[[ $(id -u) == 0 ]] || die "run as root"

# our_pids: processes running our delay line binary (exact executable path).
our_pids() {
	local p exe
	for p in /proc/[0-9]*; do
		exe=$(readlink "$p/exe" 2>/dev/null) || continue
		[[ $exe == "$STATE/delayline" || $exe == "$STATE/delayline (deleted)" ]] && echo "${p#/proc/}"
	done
	return 0
}

# stop PID...: TERM, wait up to 3 s, then KILL.
stop() {
	(($#)) || return 0
	kill -TERM "$@" 2>/dev/null || true
	for _ in $(seq 30); do
		local alive=()
		for p in "$@"; do kill -0 "$p" 2>/dev/null && alive+=("$p"); done
		((${#alive[@]})) || return 0
		sleep 0.1
	done
	kill -KILL "$@" 2>/dev/null || true
}

# star_nss: the star's namespaces: those up recorded, and any other ferryN
# (a crashed up's).
star_nss() {
	{
		[[ ! -f $STATE/nodes ]] || cat "$STATE/nodes"
		ip netns list | awk '$1 ~ /^ferry[0-9]+$/ {print $1}'
	} | sort -u -V
}

down() {
	local pids nss
	# The pid file's process, and any other left by a crashed up, all
	# recognised by their executable, so a recycled pid is never hit.
	mapfile -t pids < <(our_pids)
	if ((${#pids[@]})); then
		say "stopping delay line (pid ${pids[*]})"
		stop "${pids[@]}"
	fi
	mapfile -t nss < <(printf '%s\n' "$NS_A" "$NS_B"; star_nss)
	for ns in "${nss[@]}"; do
		ip netns list | grep -q "^$ns\( \|$\)" || continue
		mapfile -t pids < <(ip netns pids "$ns" 2>/dev/null)
		if ((${#pids[@]})); then
			say "stopping processes in $ns: ${pids[*]}"
			stop "${pids[@]}"
		fi
		run ip netns del "$ns"
	done
	for ns in "${nss[@]}"; do
		rm -f "/etc/netns/$ns/hosts" "/etc/netns/$ns/resolv.conf"
		[[ ! -d /etc/netns/$ns ]] || rmdir "/etc/netns/$ns"
	done
	[[ ! -d /etc/netns ]] || rmdir --ignore-fail-on-non-empty /etc/netns
	if [[ -f $STATE/sysctl.saved ]]; then
		while read -r key val; do
			run sysctl -q -w "$key=$val" || true
		done <"$STATE/sysctl.saved"
		rm -f "$STATE/sysctl.saved"
	fi
	rm -f "$STATE/delayline.pid" "$STATE/nodes"
}

status() {
	local p
	for p in $(our_pids); do
		echo "delay line running, pid $p: $(tr '\0' ' ' <"/proc/$p/cmdline")"
	done
	[[ -n $(our_pids) ]] || echo "delay line not running"
	local nss
	mapfile -t nss < <(star_nss)
	((${#nss[@]})) || nss=("$NS_A" "$NS_B")
	for ns in "${nss[@]}"; do
		ip netns list | grep -q "^$ns\( \|$\)" || { echo "$ns: absent"; continue; }
		echo "$ns: $(ip -n "$ns" -br addr show | tr -s ' ' | paste -sd';')"
	done
	[[ -f $STATE/delayline.log ]] && tail -n 3 "$STATE/delayline.log"
	return 0
}

up() {
	local args=(-delay 30ms -rate 1gbit -loss 0 -queue auto) cc="" nodes=0 links=() delay_set=0
	while (($#)); do
		case $1 in
		-delay | -rate | -loss | -queue)
			(($# >= 2)) || die "$1 needs a value"
			local i
			for i in 0 2 4 6; do [[ ${args[i]} == "$1" ]] && args[i + 1]=$2; done
			[[ $1 != -delay ]] || delay_set=1
			shift 2
			;;
		-loss-model | -delay-ba | -rate-ba | -loss-ba | -queue-ba)
			(($# >= 2)) || die "$1 needs a value"
			args+=("$1" "$2")
			shift 2
			;;
		-nodes)
			(($# >= 2)) || die "-nodes needs a value"
			[[ $2 =~ ^[0-9]+$ ]] && (($2 >= 2 && $2 <= 64)) || die "-nodes $2: want 2 to 64"
			nodes=$2
			shift 2
			;;
		-link)
			(($# >= 2)) || die "-link needs I:key=value[:key=value...]"
			[[ $2 =~ ^[0-9]+:[a-z]+=[^:]+(:[a-z]+=[^:]+)*$ ]] || die "-link $2: want I:key=value[:key=value...]"
			links+=("$2")
			shift 2
			;;
		-cc)
			(($# >= 2)) || die "-cc needs a value"
			cc=$2
			shift 2
			;;
		*) die "unknown option $1 (want -delay -rate -loss -queue -loss-model -delay-ba -rate-ba -loss-ba -queue-ba -cc -nodes -link)" ;;
		esac
	done
	((nodes || ! ${#links[@]})) || die "-link needs -nodes"
	((!nodes)) || [[ " ${args[*]} " != *-ba\ * ]] || die "the -*-ba options are the pair's (the star: -link I:up=R:down=R)"
	((nodes == 0 || delay_set)) || args[1]=15ms
	local l
	for l in "${links[@]}"; do ((${l%%:*} < nodes)) || die "-link $l: there is no node ${l%%:*} of $nodes"; done
	down
	mkdir -p "$STATE"
	run go -C "$REPO" build -o "$STATE/delayline" ./bench/wan/delayline

	# Root namespace: let sockets ask for large buffers (globus-url-copy
	# -tcp-bs, iperf3 -w). Saved first, restored by down.
	: >"$STATE/sysctl.saved"
	for key in net.core.rmem_max net.core.wmem_max; do
		echo "$key $(sysctl -n "$key")" >>"$STATE/sysctl.saved"
		(($(sysctl -n "$key") >= BUF_MAX)) || run sysctl -q -w "$key=$BUF_MAX"
	done
	# A namespace may only pick a congestion control the root namespace allows.
	local allowed
	allowed=$(sysctl -n net.ipv4.tcp_allowed_congestion_control)
	if [[ -n $cc && " $allowed " != *" $cc "* ]]; then
		echo "net.ipv4.tcp_allowed_congestion_control $allowed" >>"$STATE/sysctl.saved"
		run sysctl -q -w net.ipv4.tcp_allowed_congestion_control="$allowed $cc"
	fi

	if ((nodes)); then
		up_star "$nodes" "$cc" "${#links[@]}" "${links[@]}" "${args[@]}"
		return
	fi
	for ns in "$NS_A" "$NS_B"; do
		# `ip netns exec` bind-mounts /etc/netns/NS/* over /etc: names for our
		# two addresses (GCT looks its -hostname up and fails without), and
		# a resolver that asks nobody outside the namespaces.
		# GCT's PASV also resolves the machine's own name: the namespace's address.
		local self=$IP_A
		[[ $ns == "$NS_B" ]] && self=$IP_B
		mkdir -p "/etc/netns/$ns"
		printf '127.0.0.1 localhost\n%s %s\n%s %s\n%s %s\n' "$IP_A" "$NS_A" "$IP_B" "$NS_B" "$self" "$(hostname)" \
			>"/etc/netns/$ns/hosts"
		printf 'nameserver 127.0.0.1\n' >"/etc/netns/$ns/resolv.conf"
		make_ns "$ns" "$cc"
	done

	printf '+ %s\n' "setsid $STATE/delayline -netns-a $NS_A -a $TUN_A -netns-b $NS_B -b $TUN_B -mtu $MTU ${args[*]} &" >&2
	setsid "$STATE/delayline" -netns-a "$NS_A" -a "$TUN_A" -netns-b "$NS_B" -b "$TUN_B" -mtu "$MTU" "${args[@]}" \
		</dev/null >"$STATE/delayline.log" 2>&1 &
	echo $! >"$STATE/delayline.pid"
	local pid=$!
	wait_devices "$pid" "$NS_A:$TUN_A" "$NS_B:$TUN_B"

	# Point-to-point: each side's address on its TUN, the peer routed through it.
	run ip -n "$NS_A" link set "$TUN_A" mtu "$MTU" txqueuelen 10000 up
	run ip -n "$NS_B" link set "$TUN_B" mtu "$MTU" txqueuelen 10000 up
	run ip -n "$NS_A" addr add "$IP_A/32" peer "$IP_B/32" dev "$TUN_A"
	run ip -n "$NS_B" addr add "$IP_B/32" peer "$IP_A/32" dev "$TUN_B"
	say "up: $NS_A $IP_A <-> $NS_B $IP_B via delay line pid $pid (${args[*]}); log $STATE/delayline.log"
}

# make_ns NS CC: the namespace, lo up, TCP buffers, congestion control CC ("" = inherited).
make_ns() {
	local ns=$1 cc=$2
	run ip netns add "$ns"
	run ip -n "$ns" link set lo up
	# TCP autotuning up to BUF_MAX; no cached ssthresh between runs.
	run ip netns exec "$ns" sysctl -q -w \
		net.ipv4.tcp_rmem="4096 131072 $BUF_MAX" \
		net.ipv4.tcp_wmem="4096 16384 $BUF_MAX" \
		net.ipv4.tcp_no_metrics_save=1
	[[ -z $cc ]] || run ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_congestion_control="$cc"
}

# wait_devices PID NS:DEV...: wait until the delay line PID made every device.
wait_devices() {
	local pid=$1 d ok
	shift
	for _ in $(seq 50); do
		kill -0 "$pid" 2>/dev/null || { cat "$STATE/delayline.log" >&2; die "delay line exited"; }
		ok=1
		for d; do ip -n "${d%%:*}" link show "${d#*:}" &>/dev/null || { ok=0; break; }; done
		((ok)) && return 0
		sleep 0.1
	done
	die "TUN devices did not appear"
}

# up_star N CC NLINKS LINK... DELAYLINE-ARG...: the star of N namespaces.
up_star() {
	local n=$1 cc=$2 nl=$3 i ns ip hosts opts l devs=() nodeargs=()
	shift 3
	local links=("${@:1:nl}")
	shift "$nl"
	hosts=$(printf '127.0.0.1 localhost\n'; for ((i = 0; i < n; i++)); do printf '%s.%d ferry%d\n' "$STAR_NET" $((STAR_BASE + i)) "$i"; done)
	: >"$STATE/nodes"
	for ((i = 0; i < n; i++)); do
		ns=ferry$i ip=$STAR_NET.$((STAR_BASE + i))
		echo "$ns" >>"$STATE/nodes"
		# As for the pair: every node's name, and the machine's as this one's address (GCT's PASV).
		mkdir -p "/etc/netns/$ns"
		printf '%s\n%s %s\n' "$hosts" "$ip" "$(hostname)" >"/etc/netns/$ns/hosts"
		printf 'nameserver 127.0.0.1\n' >"/etc/netns/$ns/resolv.conf"
		make_ns "$ns" "$cc"
		opts=""
		for l in "${links[@]}"; do [[ ${l%%:*} == "$i" ]] && opts+=":${l#*:}"; done
		nodeargs+=(-node "$ns:tun$i:$ip$opts")
		devs+=("$ns:tun$i")
	done
	printf '+ %s\n' "setsid $STATE/delayline ${nodeargs[*]} -mtu $MTU $* &" >&2
	setsid "$STATE/delayline" "${nodeargs[@]}" -mtu "$MTU" "$@" </dev/null >"$STATE/delayline.log" 2>&1 &
	echo $! >"$STATE/delayline.pid"
	local pid=$!
	wait_devices "$pid" "${devs[@]}"
	for ((i = 0; i < n; i++)); do
		# One /24 on the TUN device: every other node is routed through it to the hub.
		run ip -n "ferry$i" link set "tun$i" mtu "$MTU" txqueuelen 10000 up
		run ip -n "ferry$i" addr add "$STAR_NET.$((STAR_BASE + i))/24" dev "tun$i"
	done
	say "up: star of $n: ferry0 $STAR_NET.$STAR_BASE .. ferry$((n - 1)) $STAR_NET.$((STAR_BASE + n - 1)) via delay line pid $pid (${*}${links[*]:+; -link ${links[*]}}); log $STATE/delayline.log"
}

case ${1:-} in
up) shift; up "$@" ;;
down) down ;;
status) status ;;
*) die "usage: $0 up [-delay 30ms] [-rate 1gbit] [-loss 0.0001] [-queue auto|PKTS|BYTES|Fbdp] [-loss-model random|bursty[:B]] [-delay-ba D] [-rate-ba R] [-loss-ba P] [-queue-ba Q] [-cc ALG] [-nodes N [-link I:key=value...]] | down | status" ;;
esac
