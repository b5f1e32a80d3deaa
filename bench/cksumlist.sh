#!/usr/bin/env bash
# cksumlist.sh — verifying a tree by checksum lists against one CKSM per
# file, same machine, same run. A tree of FILES files of BYTES bytes each
# (in DIRS directories) is copied once; then `ferry copy --sync-level
# checksum` runs over the identical copy, so that every file is checksummed
# at both ends and none is sent:
#   list      the ferry binary under test ($FERRY, or built from this checkout):
#             each end computes a directory's checksums in one go (a ferry
#             server's cksum layer; GCT's popen md5sum)
#   per-file  $FERRY_PER_FILE: a ferry binary from before checksum lists
#             (one CKSM round trip per file at each end), built from
#             BASELINE (a commit, default dc0b8a5~1) unless given
# Pairs: ferry→ferry, and ferry→GCT whose popen whitelist holds md5sum
# (algorithm MD5 there; ferry→ferry with ALGS, default "MD5 XXH128").
# Phases (PHASES, default "loop wan"): loopback, and the emulated WAN of
# bench/wan (60 ms RTT, 1 Gbit/s, 0.01 % loss; source in ferryA, destination
# in ferryB, client in ferryA). RUNS timed runs per kind (default 3), order
# alternating; the median is reported with the ratio per-file ÷ list.
# Rows (ROWS, default all): ferry-ALG for each ALG of ALGS (ferry→ferry), gct
# (ferry→GCT).
# Environment: PHASES ROWS RUNS FILES DIRS BYTES ALGS FERRY FERRY_PER_FILE BASELINE
#   PORT_BASE (3 ports) WAN_WAIT WAN_KEEP WAN_CC KEEP_LOGS.
# Needs: go, git, globus-gridftp-server, md5sum, iproute2, root. Listens on
# 127.0.0.1 and, in the namespaces, on 10.77.0.1/10.77.0.2 only.
set -Eeuo pipefail
shopt -s inherit_errexit
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PHASES=${PHASES:-loop wan}
RUNS=${RUNS:-3}
FILES=${FILES:-10000} DIRS=${DIRS:-10} BYTES=${BYTES:-5120}
ALGS=${ALGS:-MD5 XXH128}
BASELINE=${BASELINE:-dc0b8a5~1}
PORT_BASE=${PORT_BASE:-29891}
WAN_WAIT=${WAN_WAIT:-1200}
KEEP_LOGS=${KEEP_LOGS:-0}
# shellcheck disable=SC2046 # one row a word
selected_rows $(printf 'ferry-%s ' $ALGS) gct >/dev/null # a misspelt row fails here

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WANDIR=$REPO/bench/wan
WORK=/dev/shm/ferry-cksumlist.$$
TMP=$(mktemp -d /tmp/ferry-cksumlist.XXXXXX)
LOG=$TMP/logs
mkdir -p "$LOG"

trap cleanup EXIT
trap 'exit 130' INT TERM

need go git globus-gridftp-server md5sum ss setsid ip ping
[[ $(id -u) == 0 ]] || { say "run as root (GCT serves anonymous users as nobody; namespaces)" >&2; exit 1; }

say "== machine"
machine_facts
say "tree:    $FILES files of $BYTES B in $DIRS directories; RUNS=$RUNS; PHASES=\"$PHASES\""

say "== build"
build_ferry
if [[ -z ${FERRY_PER_FILE:-} ]]; then
	show "git worktree add --detach $TMP/baseline $BASELINE && go build"
	git -C "$REPO" worktree add -q --detach "$TMP/baseline" "$BASELINE"
	(cd "$TMP/baseline" && go build -o "$TMP/ferry-per-file" ./cmd/ferry)
	git -C "$REPO" worktree remove --force "$TMP/baseline"
	FERRY_PER_FILE=$TMP/ferry-per-file
fi
say "per-file baseline: $FERRY_PER_FILE"

mkdir -p "$WORK"/{src,ferry-dst,gct-dst}
chmod 0755 "$WORK"
chmod 0777 "$WORK"/*
per=$((FILES / DIRS))
for d in $(seq -w 1 "$DIRS"); do
	mkdir -m 0777 "$WORK/src/d$d"
	head -c $((per * BYTES)) /dev/urandom | split -b "$BYTES" -a 5 -d - "$WORK/src/d$d/f"
done
chmod -R a+rX "$WORK/src"

P_FSRC=$PORT_BASE P_FDST=$((PORT_BASE + 1)) P_GDST=$((PORT_BASE + 2))
PHASE="" RESULTS=()

# one LABEL BIN URL ALG: one timed sync over the identical copy, checked.
one() {
	local label=$1 bin=$2 url=$3 alg=$4 out t0 t1
	t0=$(date +%s.%N)
	out=$(in_ns "$NS_A" "$bin" copy -q -r --sync-level checksum --checksum-algorithm "$alg" \
		"ftp://$IP_A:$P_FSRC/src/" "$url" 2>&1) || { say "!!! $label failed: $out" >&2; return 1; }
	t1=$(date +%s.%N)
	grep -q "0 transferred, $FILES skipped, 0 failed" <<<"$out" || { say "!!! $label: $out" >&2; return 1; }
	echo "$t1 - $t0" | bc
}

for PHASE in $PHASES; do
	if [[ $PHASE == wan ]]; then
		wan_ready || { say "the WAN link stayed busy" >&2; exit 1; }
		wan_up
		NS_A=ferryA NS_B=ferryB IP_A=10.77.0.1 IP_B=10.77.0.2
	else
		NS_A="" NS_B="" IP_A=127.0.0.1 IP_B=127.0.0.1
	fi
	say "== phase $PHASE"
	ports_free "$NS_A $NS_B" "$P_FSRC" "$P_FDST" "$P_GDST"
	ferry_server fsrc "$NS_A" "$IP_A" "$P_FSRC" "$WORK"
	ferry_server fdst "$NS_B" "$IP_B" "$P_FDST" "$WORK/ferry-dst"
	gct_server gdst "$NS_B" "$IP_B" "$P_GDST" "$WORK/gct-dst" \
		-fs-whitelist popen,file,ordering -popen-whitelist md5sum:/usr/bin/md5sum
	ferry_url="ftp://$IP_B:$P_FDST/src/"
	gct_url="ftp://$IP_B:$P_GDST$WORK/gct-dst/src/"
	for url in "$ferry_url" "$gct_url"; do
		show "$FERRY copy -q -r ftp://$IP_A:$P_FSRC/src/ $url"
		in_ns "$NS_A" "$FERRY" copy -q -r "ftp://$IP_A:$P_FSRC/src/" "$url" >/dev/null
	done
	diff -rq "$WORK/src" "$WORK/ferry-dst/src" && diff -rq "$WORK/src" "$WORK/gct-dst/src"
	cases=()
	for alg in $ALGS; do row_wanted "ferry-$alg" && cases+=("ferry→ferry $alg|$ferry_url|$alg"); done
	row_wanted gct && cases+=("ferry→GCT popen md5sum MD5|$gct_url|MD5")
	for c in "${cases[@]}"; do
		IFS='|' read -r label url alg <<<"$c"
		list=() perfile=()
		for run in $(seq "$RUNS"); do
			if ((run % 2)); then
				list+=("$(one "$label list" "$FERRY" "$url" "$alg")")
				perfile+=("$(one "$label per-file" "$FERRY_PER_FILE" "$url" "$alg")")
			else
				perfile+=("$(one "$label per-file" "$FERRY_PER_FILE" "$url" "$alg")")
				list+=("$(one "$label list" "$FERRY" "$url" "$alg")")
			fi
		done
		l=$(printf '%s\n' "${list[@]}" | median) p=$(printf '%s\n' "${perfile[@]}" | median)
		say "  $label: list ${list[*]} s, per-file ${perfile[*]} s"
		RESULTS+=("| $PHASE | $label | $(printf %.3f "$l") | $(printf %.3f "$p") | $(echo "scale=2; $p / $l" | bc)× |")
	done
	stop_servers
	wan_down
done

say ""
say "| phase | pair, algorithm | checksum lists (s) | one CKSM per file (s) | per-file ÷ list |"
say "|---|---|---:|---:|---:|"
printf '%s\n' "${RESULTS[@]}"
