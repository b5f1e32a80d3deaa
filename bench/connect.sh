#!/usr/bin/env bash
# connect.sh — ferry connect: transfers with agents against the same
# transfers between ordinary ferry gridftp servers, on the same machine, the
# same network paths, in the same run. Everything goes through a real
# `ferry server` (API, workers, relay) and the real CLI.
#
#   bench/connect.sh                 # RUNS=3, rows big and small
#   RUNS=5 ROWS=small bench/connect.sh
#
# Topology. Two network namespaces, ferryC1 (10.201.1.2) and ferryC2
# (10.201.2.2), each joined to this one by a veth pair (10.201.N.1 here).
# In each: a `ferry connect` agent (laptopA, laptopB) and, for the baseline,
# an ordinary `ferry gridftp` (s1, s2) serving the same directory. The
# namespaces' nftables firewall drops every inbound connection attempt but
# those to the baseline servers' ports (2811 and passive 30000-30099): the
# agents only connect out. Here: ferry server with its relay, and an ordinary
# ferry gridftp (dtn), all on 10.201.1.1. net.ipv4.ip_forward is set for the
# run (the baseline s1 -> s2 crosses this namespace) and restored after.
#
# Rows (ROWS): big (one BIG_MIB MiB file), small (SMALL_FILES files of
# SMALL_BYTES). Cases, each against its baseline:
#   agent -> ordinary     laptopA -> dtn       vs  s1 -> dtn    (direct: the
#                         agent sends, connecting to dtn)
#   ordinary -> agent     dtn -> laptopA       vs  dtn -> s1    (direct: dtn
#                         listens as a sender, FEAT PASVSEND; the agent connects)
#   agent -> agent        laptopA -> laptopB   vs  s1 -> s2     (relayed: both
#                         agents connect to the relay, which splices)
# Each: WARMUP untimed transfers, then RUNS timed ones per kind, in turn, the
# order swapped every other run; the median is reported. Time is the task's
# request_time to completion_time (the service's dispatch included), no
# checksums (--verify-checksum off on both). Every transfer is verified
# (cmp, or file count and diff -rq). Data in /dev/shm.
# Environment: RUNS ROWS WARMUP BIG_MIB SMALL_FILES SMALL_BYTES FERRY KEEP_LOGS=1.
# Needs: go, root, iproute2, nftables.
set -Eeuo pipefail
shopt -s inherit_errexit

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # selected_rows (say, cleanup and median are this script's own, below)

RUNS=${RUNS:-3}
ROWS=$(selected_rows big small)
WARMUP=${WARMUP:-1}
BIG_MIB=${BIG_MIB:-1024}
SMALL_FILES=${SMALL_FILES:-1000} SMALL_BYTES=${SMALL_BYTES:-65536}
KEEP_LOGS=${KEEP_LOGS:-0}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=/dev/shm/ferry-connect.$$
TMP=$(mktemp -d /tmp/ferry-connect.XXXXXX)
LOG=$TMP/logs
mkdir -p "$LOG" "$WORK"
HOST=10.201.1.1
API=$HOST:29841 RELAY=$HOST:29842 DTN=$HOST:29843
PGIDS=()
FWD=$(cat /proc/sys/net/ipv4/ip_forward)

say() { printf '%s\n' "$*"; }

cleanup() {
	local pg
	for pg in "${PGIDS[@]}"; do kill -TERM -- "-$pg" 2>/dev/null || true; done
	sleep 0.5
	for pg in "${PGIDS[@]}"; do kill -KILL -- "-$pg" 2>/dev/null || true; done
	ip netns del ferryC1 2>/dev/null || true
	ip netns del ferryC2 2>/dev/null || true
	echo "$FWD" >/proc/sys/net/ipv4/ip_forward
	rm -rf "$WORK"
	if [[ $KEEP_LOGS == 1 ]]; then say "logs kept in $LOG"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT

for tool in ip nft python3; do
	command -v "$tool" >/dev/null || { say "connect.sh: $tool is missing (Debian: iproute2 nftables python3)"; exit 2; }
done
[[ $(id -u) == 0 ]] || { say "connect.sh: run as root (network namespaces)"; exit 2; }

FERRY=${FERRY:-$TMP/ferry}
if [[ $FERRY == "$TMP/ferry" ]]; then (cd "$REPO" && go build -o "$FERRY" ./cmd/ferry); fi

# start NAME CMD...: runs CMD in its own process group, output to LOG/NAME.
start() {
	local name=$1
	shift
	setsid "$@" >"$LOG/$name" 2>&1 &
	PGIDS+=($!)
}

# namespace N: ferryCN on 10.201.N.0/24 behind the firewall.
namespace() {
	local n=$1 ns=ferryC$1
	ip netns del "$ns" 2>/dev/null || true
	ip netns add "$ns"
	ip link add "fc${n}h" type veth peer name "fc${n}n"
	ip link set "fc${n}n" netns "$ns"
	ip addr add "10.201.$n.1/24" dev "fc${n}h"
	ip link set "fc${n}h" up
	ip netns exec "$ns" ip addr add "10.201.$n.2/24" dev "fc${n}n"
	ip netns exec "$ns" ip link set "fc${n}n" up
	ip netns exec "$ns" ip link set lo up
	ip netns exec "$ns" ip route add default via "10.201.$n.1"
	ip netns exec "$ns" nft -f - <<-EOF
		table inet f {
			chain in {
				type filter hook input priority 0; policy drop;
				ct state established,related accept
				iif lo accept
				tcp dport { 2811, 30000-30099 } accept
			}
		}
	EOF
}

namespace 1
namespace 2
echo 1 >/proc/sys/net/ipv4/ip_forward

export XDG_CONFIG_HOME=$TMP/config FERRY_URL=http://$API
mkdir -p "$WORK/data" "$WORK/dtn" "$WORK/a" "$WORK/b"
echo benchpw | "$FERRY" user add alice --data "$WORK/data" >/dev/null
start server "$FERRY" server --data "$WORK/data" --listen "$API" --relay-listen "$RELAY"
start dtn "$FERRY" gridftp --root "$WORK/dtn" --listen "$DTN" --anonymous --anonymous-write
for i in $(seq 50); do curl -fs "http://$API/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
echo benchpw | "$FERRY" login --username alice >/dev/null
"$FERRY" endpoint add dtn --server "ftp://$DTN" >/dev/null
for n in 1 2; do
	ab=$([[ $n == 1 ]] && echo a || echo b)
	AB=$([[ $n == 1 ]] && echo A || echo B)
	key=$("$FERRY" endpoint add "laptop$AB" --connect -F json | python3 -c 'import json,sys; print(json.load(sys.stdin)["setup_key"])')
	start "agent$AB" ip netns exec "ferryC$n" "$FERRY" connect --service "http://$API" --setup-key "$key" \
		--root "$WORK/$ab" --config "$TMP/agent$AB"
	start "s$n" ip netns exec "ferryC$n" "$FERRY" gridftp --root "$WORK/$ab" --listen "10.201.$n.2:2811" \
		--anonymous --anonymous-write --port-range 30000-30099
	"$FERRY" endpoint add "s$n" --server "ftp://10.201.$n.2:2811" >/dev/null
done
for AB in A B; do
	for i in $(seq 100); do
		"$FERRY" endpoint show "laptop$AB" -F json | grep -q '"connected": *true' && break
		((i < 100)) || { say "agent $AB did not connect"; cat "$LOG/agent$AB"; exit 1; }
		sleep 0.1
	done
done

# Source data: in dtn's root and in the agents' (a is also s1's).
head -c $((BIG_MIB << 20)) /dev/urandom >"$WORK/a/big.bin"
cp "$WORK/a/big.bin" "$WORK/dtn/big.bin"
mkdir -p "$WORK/a/small"
python3 - "$WORK/a/small" "$SMALL_FILES" "$SMALL_BYTES" <<-'EOF'
	import os, sys
	d, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
	for i in range(n):
	    with open(os.path.join(d, "f%05d" % i), "wb") as f:
	        f.write(os.urandom(size))
EOF
cp -r "$WORK/a/small" "$WORK/dtn/small"

# root ENDPOINT: the local directory an endpoint serves.
root() {
	case $1 in
	laptopA | s1) echo "$WORK/a" ;;
	laptopB | s2) echo "$WORK/b" ;;
	dtn) echo "$WORK/dtn" ;;
	esac
}

# xfer SRC DST ROW: transfers ROW's data from SRC to a fresh directory at
# DST, checks it, removes it, and prints the seconds it took.
xfer() {
	local src=$1 dst=$2 row=$3 path recursive=() id out secs
	if [[ $row == big ]]; then path=big.bin; else path=small; recursive=(-r); fi
	id=$("$FERRY" transfer "$src:/$path" "$dst:/got/$path" "${recursive[@]}")
	out=$("$FERRY" task wait "$id" --timeout 600 -F json) || { say "task $id failed: $out" >&2; exit 1; }
	secs=$(python3 -c '
import json, sys
from datetime import datetime
t = json.loads(sys.argv[1])
assert t["status"] == "SUCCEEDED", t["status"]
p = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))
print("%.3f" % (p(t["completion_time"]) - p(t["request_time"])).total_seconds())' "$out")
	local want got
	want=$(root "$src")/$path got=$(root "$dst")/got/$path
	if [[ $row == big ]]; then
		cmp -s "$want" "$got" || { say "$src -> $dst: $got differs" >&2; exit 1; }
	else
		[[ $(ls "$got" | wc -l) == "$SMALL_FILES" ]] && diff -rq "$want" "$got" >/dev/null ||
			{ say "$src -> $dst: $got differs" >&2; exit 1; }
	fi
	rm -rf "$(root "$dst")/got"
	echo "$secs"
}

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

bytes() { if [[ $1 == big ]]; then echo $((BIG_MIB << 20)); else echo $((SMALL_FILES * SMALL_BYTES)); fi; }

CASES=(
	"agent -> ordinary|laptopA dtn|s1 dtn"
	"ordinary -> agent|dtn laptopA|dtn s1"
	"agent -> agent (relayed)|laptopA laptopB|s1 s2"
)

say "ferry connect bench: $(nproc) cores, RUNS=$RUNS, big=$BIG_MIB MiB, small=$SMALL_FILES x $SMALL_BYTES B; $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null); load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-36s %-6s %10s %10s %10s %10s %7s\n' case row agent_s base_s agent_MB/s base_MB/s ratio
for row in $ROWS; do
	for c in "${CASES[@]}"; do
		IFS='|' read -r name kase base <<<"$c"
		for _ in $(seq "$WARMUP"); do xfer ${kase} "$row" >/dev/null; xfer ${base} "$row" >/dev/null; done
		ks=() bs=()
		for r in $(seq "$RUNS"); do
			if ((r % 2)); then
				ks+=("$(xfer ${kase} "$row")") bs+=("$(xfer ${base} "$row")")
			else
				bs+=("$(xfer ${base} "$row")") ks+=("$(xfer ${kase} "$row")")
			fi
		done
		k=$(median "${ks[@]}") b=$(median "${bs[@]}") n=$(bytes "$row")
		printf '%-36s %-6s %10s %10s %10.1f %10.1f %7.2f   (agent: %s; base: %s)\n' "$name" "$row" "$k" "$b" \
			"$(echo "$n / $k / 1000000" | bc -l)" "$(echo "$n / $b / 1000000" | bc -l)" "$(echo "$b / $k" | bc -l)" \
			"${ks[*]}" "${bs[*]}"
	done
done
say "load $(cut -d' ' -f1-3 /proc/loadavg)"
