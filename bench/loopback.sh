#!/usr/bin/env bash
# loopback.sh — issue 17: one 2 GiB file on loopback, files in /dev/shm,
# against the machine's own copy: cp, ferry copy (no flags), globus-url-copy
# in stream mode driving two ferry servers and driving two GCT servers; then
# the same file verified: ferry --verify-checksum --checksum-algorithm MD5
# and ferry --verify-checksum (its fast default) against globus-url-copy
# -verify-checksum to GCT. Every kind in the same run, interleaved, the order
# reversed on every other run; the median of RUNS. Each timed line shows the
# 1-minute load average just before it (this run's own copies count in it).
#
#   bench/loopback.sh                                  # RUNS=5
#   FERRY_BEFORE=/tmp/ferry-old bench/loopback.sh      # also an older binary, same run
#   PROFILE=/tmp/prof bench/loopback.sh                # and CPU profiles per ferry row
#
# FERRY_BEFORE: a second ferry binary whose copies (and servers) run in the
# same run as "… before" kinds. PROFILE=DIR: after the timed runs, each ferry
# row again (PROFILE_RUNS copies) with FERRY_CPUPROFILE set for both servers
# and the client, into DIR/<kind>-{src,dst,client}.prof, and `go tool pprof
# -top` of each. Environment: RUNS BIG_MIB FERRY FERRY_BEFORE PROFILE
# PROFILE_RUNS PORT_BASE (6 ports) KEEP_LOGS WARM_MIB ROWS ONLY. ROWS: globs of
# the kinds to run, a space in a kind's name written as - (ROWS='ferry-MD5*
# guc-*' for ferry's MD5 rows and globus-url-copy's); cp runs always, as the
# reference. ONLY, the old selector: a bash regular expression; only the
# kinds it matches run (ONLY='MD5|verify' for the MD5 rows and GCT's).
# WARM_MIB (default 3072):
# before each timed copy, touch that much fresh memory (0: none). A VM that
# hands freed pages back to its host (free page reporting) makes the first
# write of each such page fault on the host, inside whichever copy comes
# next: cp of 2 GiB took 0.8-4.8 s here without it, 0.8-1.1 s with it
# (bench/LOG.md, issue 17). Needs: go, globus-url-copy,
# globus-gridftp-server, root (GCT serves anonymous users as nobody).
set -Eeuo pipefail
shopt -s inherit_errexit
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${RUNS:-5}
BIG_MIB=${BIG_MIB:-2048}
PORT_BASE=${PORT_BASE:-29871}
PROFILE=${PROFILE:-} PROFILE_RUNS=${PROFILE_RUNS:-3}
FERRY_BEFORE=${FERRY_BEFORE:-}
KEEP_LOGS=${KEEP_LOGS:-0}
WARM_MIB=${WARM_MIB:-3072}
ONLY=${ONLY:-}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=/dev/shm/ferry-loopback.$$
TMP=$(mktemp -d /tmp/ferry-loopback.XXXXXX)
LOG=$TMP/logs PHASE=loop WAN_UP=0
mkdir -p "$LOG"
trap cleanup EXIT
trap 'exit 130' INT TERM
need go globus-gridftp-server globus-url-copy cmp python3
[[ $(id -u) == 0 ]] || { say "run as root (GCT serves anonymous users as nobody)" >&2; exit 1; }

say "== machine"
machine_facts
say "== build"
build_ferry

P_G=$PORT_BASE P_F=$((PORT_BASE + 2)) P_B=$((PORT_BASE + 4)) # source port; +1 the destination
mkdir -p "$WORK"/{gct-src,gct-dst,ferry-src,ferry-dst,before-src,before-dst,cp-dst}
chmod 0755 "$WORK"
chmod 0777 "$WORK"/*
show "head -c $((BIG_MIB << 20)) /dev/urandom > $WORK/gct-src/big.bin"
head -c $((BIG_MIB << 20)) /dev/urandom >"$WORK/gct-src/big.bin"
chmod 0666 "$WORK/gct-src/big.bin"
ln "$WORK/gct-src/big.bin" "$WORK/ferry-src/big.bin"
ln "$WORK/gct-src/big.bin" "$WORK/before-src/big.bin"

# servers [PROFDIR KIND]: GCT's pair, ferry's pair and, with FERRY_BEFORE,
# the older binary's pair; with PROFDIR the ferry servers write profiles.
servers() {
	ports_free "" $P_G $((P_G + 1)) $P_F $((P_F + 1)) $P_B $((P_B + 1))
	gct_server gsrc "" 127.0.0.1 $P_G "$WORK/gct-src"
	gct_server gdst "" 127.0.0.1 $((P_G + 1)) "$WORK/gct-dst"
	local bin pre port
	for pre in ferry before; do
		bin=$FERRY port=$P_F
		if [[ $pre == before ]]; then
			[[ -n $FERRY_BEFORE ]] || continue
			bin=$FERRY_BEFORE port=$P_B
		fi
		FERRY_CPUPROFILE=${1:+$1/$2-$pre-src.prof} FERRY=$bin ferry_server ${pre}src "" 127.0.0.1 $port "$WORK/$pre-src"
		FERRY_CPUPROFILE=${1:+$1/$2-$pre-dst.prof} FERRY=$bin ferry_server ${pre}dst "" 127.0.0.1 $((port + 1)) "$WORK/$pre-dst"
	done
}

# cmd_of KIND: the command line of a kind, one word per line.
cmd_of() {
	local f=ftp://127.0.0.1:$P_F/big.bin b=ftp://127.0.0.1:$P_B/big.bin
	local F="$f ftp://127.0.0.1:$((P_F + 1))/big.bin" B="$b ftp://127.0.0.1:$((P_B + 1))/big.bin"
	local G="ftp://127.0.0.1:$P_G$WORK/gct-src/big.bin ftp://127.0.0.1:$((P_G + 1))$WORK/gct-dst/big.bin"
	local M="--verify-checksum --checksum-algorithm MD5"
	case $1 in
	cp) echo cp "$WORK/gct-src/big.bin" "$WORK/cp-dst/big.bin" ;;
	"ferry") echo "$FERRY" copy $F ;;
	"ferry before") echo "$FERRY_BEFORE" copy $B ;;
	"guc @ferry") echo globus-url-copy $F ;;
	"guc @gct") echo globus-url-copy $G ;;
	"ferry MD5") echo "$FERRY" copy $M $F ;;
	"ferry MD5 before") echo "$FERRY_BEFORE" copy $M $B ;;
	"guc -verify-checksum @gct") echo globus-url-copy -verify-checksum $G ;;
	"ferry fast hash") echo "$FERRY" copy --verify-checksum $F ;;
	"ferry fast hash before") echo "$FERRY_BEFORE" copy --verify-checksum $B ;;
	esac | tr ' ' '\n'
}
dst_of() {
	case $1 in
	cp) echo "$WORK/cp-dst" ;; *@gct) echo "$WORK/gct-dst" ;; *before) echo "$WORK/before-dst" ;; *) echo "$WORK/ferry-dst" ;;
	esac
}

KINDS_ALL=("cp" "ferry" "ferry before" "guc @ferry" "guc @gct" "ferry MD5" "ferry MD5 before" "guc -verify-checksum @gct" "ferry fast hash" "ferry fast hash before")
KINDS=()
for k in "${KINDS_ALL[@]}"; do
	[[ $k == *before && -z $FERRY_BEFORE ]] && continue
	[[ $k == cp ]] || row_wanted "$k" || continue
	[[ -n $ONLY && $k != cp && ! $k =~ $ONLY ]] && continue
	KINDS+=("$k")
done

# one KIND [PROFILE]: one timed, verified copy; prints "secs load".
one() {
	local k=$1 d cmd=() t0 t1 load
	d=$(dst_of "$k")
	rm -f "$d/big.bin"
	((WARM_MIB > 0)) && python3 -c "b = bytearray($WARM_MIB << 20)"
	sleep 0.3
	mapfile -t cmd < <(cmd_of "$k")
	load=$(cut -d' ' -f1 /proc/loadavg)
	echo "### $k: ${cmd[*]}" >>"$LOG/client.log"
	t0=$(date +%s%N)
	FERRY_CPUPROFILE=${2:-} "${cmd[@]}" >>"$LOG/client.log" 2>&1
	t1=$(date +%s%N)
	cmp "$WORK/gct-src/big.bin" "$d/big.bin" >&2
	rm -f "$d/big.bin"
	awk -v ns=$((t1 - t0)) -v l="$load" 'BEGIN {printf "%.3f %s\n", ns / 1e9, l}'
}

say "== servers"
servers
declare -A T LD
n=${#KINDS[@]}
for k in "${KINDS[@]}"; do show "$(cmd_of "$k" | tr '\n' ' ')"; done
say "== runs (secs, load before)"
for ((r = 1; r <= RUNS; r++)); do
	for i in $(run_order "$r" "$n"); do
		k=${KINDS[i]}
		read -r s l < <(one "$k")
		T[$k]+="$s " LD[$k]+="$l "
		say "  run $r $(printf '%-28s' "$k:") $s s  load $l"
	done
done
stop_servers

med() { printf '%s\n' $1 | median; }
say ""
say "== results: median of $RUNS, one file of $BIG_MIB MiB in /dev/shm"
say ""
say "| kind | median s | Gb/s | ÷ cp | runs (s) | load before each |"
say "|---|---:|---:|---:|---|---|"
cpm=$(med "${T[cp]}")
for k in "${KINDS[@]}"; do
	m=$(med "${T[$k]}")
	say "$(awk -v k="$k" -v m="$m" -v c="$cpm" -v b=$((BIG_MIB << 20)) -v r="${T[$k]}" -v l="${LD[$k]}" 'BEGIN {
		printf "| %s | %.3f | %.2f | %.2f× | %s| %s|", k, m, b * 8 / m / 1e9, c / m, r, l }')"
done
say "(÷ cp: cp's median time ÷ this kind's; ≥ 1 is as fast as cp)"

if [[ -n $PROFILE ]]; then
	mkdir -p "$PROFILE"
	for k in "ferry" "ferry MD5" "ferry fast hash" ${FERRY_BEFORE:+"ferry before" "ferry MD5 before" "ferry fast hash before"}; do
		row_wanted "$k" || continue
		[[ -n $ONLY && ! $k =~ $ONLY ]] && continue
		tag=${k// /-}
		say "== profile $k ($PROFILE_RUNS copies; servers restarted with FERRY_CPUPROFILE)"
		servers "$PROFILE" "$tag"
		for ((r = 1; r <= PROFILE_RUNS; r++)); do one "$k" "$PROFILE/$tag-client$r.prof" >/dev/null; done
		stop_servers
		pre=ferry bin=$FERRY
		[[ $k == *before ]] && pre=before bin=$FERRY_BEFORE
		for side in src dst; do
			f=$PROFILE/$tag-$pre-$side.prof
			say "--- $k, $side: go tool pprof -top $bin $f"
			go tool pprof -top -nodecount=25 "$bin" "$f" 2>/dev/null | sed -n '4,40p'
		done
	done
fi
