#!/usr/bin/env bash
# partname.sh — what writing through temporary names costs (issue 30):
# `ferry copy` between two `ferry gridftp` servers on loopback, each file
# written to .ferry-<hash>.part and renamed once whole (the default) against
# --inplace (written under its final name), same machine, same run.
#
#   bench/partname.sh                 # RUNS=5
#   RUNS=3 SMALL_FILES=500 ROWS="small tar" bench/partname.sh
#
# Rows (ROWS, default all):
#       small  SMALL_FILES files of SMALL_BYTES, -r --tar never (the
#              engine's own temporary names: ferry's server writes each
#              file under its temporary name and renames it itself, SITE
#              PARTSTOR; another server gets RNFR/RNTO on the session pair
#              that moved the file, pipelined with the next transfers)
#       tar    the same files, -r as ferry chooses: tar streams between two
#              ferry servers, which unpack through temporary names either way
#       big    one file of BIG_MIB MiB (chunked, as ferry chooses)
# Each row: one untimed copy of each kind, then RUNS timed copies per kind,
# the order of kinds reversed on every other run; the destination emptied
# before each copy. Reported: the median wall-clock time of the client,
# temp ÷ inplace (> 1: temporary names cost time), the median CPU time of
# the copy (client, source and destination server added up: steadier
# than wall-clock time on a shared machine) and its ratio, and the peak resident
# memory of the client (/usr/bin/time %M) and of the destination server
# (VmHWM, a fresh server per kind and row). Every copy is checked: cmp for
# the file, the file count and diff -rq for the tree, and no .ferry-*.part
# left.
# Environment: RUNS ROWS SMALL_FILES SMALL_BYTES BIG_MIB PORT_BASE (2 ports)
#   FERRY KEEP_LOGS=1. Needs: go, cmp, diff, ss, setsid, /usr/bin/time.
# Listens on 127.0.0.1 only. Data in /dev/shm.
set -Eeuo pipefail
shopt -s inherit_errexit
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${RUNS:-5}
ROWS=$(selected_rows small tar big)
SMALL_FILES=${SMALL_FILES:-2000} SMALL_BYTES=${SMALL_BYTES:-10240}
BIG_MIB=${BIG_MIB:-1024}
PORT_BASE=${PORT_BASE:-29931}
KEEP_LOGS=${KEEP_LOGS:-0}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=/dev/shm/ferry-partname.$$
TMP=$(mktemp -d /tmp/ferry-partname.XXXXXX)
LOG=$TMP/logs
PHASE=loop
mkdir -p "$LOG"
wan_down() { :; } # no link here

trap cleanup EXIT
trap 'exit 130' INT TERM
need go cmp diff ss setsid /usr/bin/time

say "== machine"
machine_facts
say "runs:    RUNS=$RUNS (median); small: $SMALL_FILES x $SMALL_BYTES B; big: $BIG_MIB MiB"
say "== build"
build_ferry

mkdir -p "$WORK"/src/small "$WORK"/dst
show "make $SMALL_FILES files of $SMALL_BYTES B, one of $BIG_MIB MiB"
for ((i = 0; i < SMALL_FILES; i++)); do
	head -c "$SMALL_BYTES" /dev/urandom >"$WORK/src/small/f$i"
done
head -c $((BIG_MIB << 20)) /dev/urandom >"$WORK/src/big"
P_SRC=$PORT_BASE P_DST=$((PORT_BASE + 1))
ports_free "" "$P_SRC" "$P_DST"
ferry_server src "" 127.0.0.1 "$P_SRC" "$WORK/src"

KINDS=(temp inplace)
flags_of() { [[ $1 == inplace ]] && echo --inplace || true; }

# cpu PID: the CPU seconds (user + system) of a process so far.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }

# copy ROW KIND: one copy into an empty destination, checked; prints seconds,
# the client's peak RSS (KiB) and the CPU seconds of the client and the
# source server (the destination's: dst_down).
copy() {
	local row=$1 kind=$2 src dst args
	rm -rf "${WORK:?}/dst/"*
	if [[ $row == small ]]; then
		src=ftp://127.0.0.1:$P_SRC/small dst=ftp://127.0.0.1:$P_DST/small args=(-r --tar never)
	elif [[ $row == tar ]]; then
		src=ftp://127.0.0.1:$P_SRC/small dst=ftp://127.0.0.1:$P_DST/small args=(-r)
	else
		src=ftp://127.0.0.1:$P_SRC/big dst=ftp://127.0.0.1:$P_DST/big args=()
	fi
	local t0 t1 c0 c1
	c0=$(cpu "$PID_src")
	t0=$(date +%s.%N)
	/usr/bin/time -f '%M %U %S' -o "$LOG/rss" "$FERRY" copy -q "${args[@]}" $(flags_of "$kind") "$src" "$dst" >"$LOG/copy.out" 2>&1
	t1=$(date +%s.%N)
	c1=$(cpu "$PID_src")
	if [[ $row != big ]]; then
		[[ $(ls "$WORK/dst/small" | wc -l) == "$SMALL_FILES" ]] && diff -rq "$WORK/src/small" "$WORK/dst/small" >/dev/null
	else
		cmp -s "$WORK/src/big" "$WORK/dst/big"
	fi
	[[ -z $(find "$WORK/dst" -name '.ferry-*.part') ]]
	local m u sy
	read -r m u sy <"$LOG/rss"
	printf '%s %s %s\n' "$(echo "$t1 - $t0" | bc -l)" "$m" "$(echo "$u + $sy + $c1 - $c0" | bc -l)"
}

# dst_up starts a fresh destination server (its VmHWM is then one copy's);
# dst_down stops it and prints that peak (KiB) and its CPU seconds.
dst_up() { ferry_server dst "" 127.0.0.1 "$P_DST" "$WORK/dst" >/dev/null; }
dst_down() {
	echo "$(awk '/VmHWM/ {print $2}' "/proc/$PID_dst/status") $(cpu "$PID_dst")"
	kill -TERM "$PID_dst"
	while kill -0 "$PID_dst" 2>/dev/null; do sleep 0.05; done
}

say "== results (median of $RUNS; RSS: peak, KiB)"
printf '%-6s %-8s %9s %9s %8s %9s %12s %12s\n' row kind seconds "÷inplace" "CPU s" "÷inplace" "client RSS" "server RSS"
for row in $ROWS; do
	declare -A secs=() cpus=() crss=() srss=()
	for kind in "${KINDS[@]}"; do secs[$kind]="" cpus[$kind]=""; crss[$kind]=0; done
	for kind in "${KINDS[@]}"; do # warm-up
		dst_up
		copy "$row" "$kind" >/dev/null
		dst_down >/dev/null
	done
	for ((r = 1; r <= RUNS; r++)); do
		for k in $(run_order "$r" ${#KINDS[@]}); do
			kind=${KINDS[$k]}
			dst_up
			read -r s m c < <(copy "$row" "$kind")
			read -r hwm dc < <(dst_down)
			secs[$kind]+="$s "
			cpus[$kind]+="$(echo "$c + $dc" | bc -l) "
			((m > crss[$kind])) && crss[$kind]=$m
			((hwm > ${srss[$kind]:-0})) && srss[$kind]=$hwm
		done
	done
	base=$(tr ' ' '\n' <<<"${secs[inplace]}" | grep . | median)
	cbase=$(tr ' ' '\n' <<<"${cpus[inplace]}" | grep . | median)
	for kind in "${KINDS[@]}"; do
		med=$(tr ' ' '\n' <<<"${secs[$kind]}" | grep . | median)
		cmed=$(tr ' ' '\n' <<<"${cpus[$kind]}" | grep . | median)
		printf '%-6s %-8s %9.3f %9.3f %8.3f %9.3f %12s %12s\n' "$row" "$kind" "$med" "$(echo "$med / $base" | bc -l)" \
			"$cmed" "$(echo "$cmed / $cbase" | bc -l)" "${crss[$kind]}" "${srss[$kind]}"
	done
	say "  $row runs (s): temp: ${secs[temp]}| inplace: ${secs[inplace]}"
	say "  $row CPU (s): temp: ${cpus[temp]}| inplace: ${cpus[inplace]}"
	unset secs cpus crss srss
done
