#!/usr/bin/env bash
# slowdir.sh — one directory of N entries (default 5,000,000) across an
# emulated wide-area link (bench/wan: namespaces ferryA and ferryB joined by
# the user-space delay line): the issue-31 case "a directory of 5 M entries
# on a slow link". The directory is a `ferry gridftp --root
# synthetic:files=N,size=BYTES,per-dir=N` source (generated, no disk) in
# ferryA; everything else is in ferryB, so that both the listing and the
# data cross the link:
#   copy  `ferry copy -r ftp://A/ ftp://B/out/` into a `--root sink:`
#         destination in ferryB: wall time, files/s, the peak RSS (VmHWM)
#         of the client and of both servers; it must report N transferred;
#   ls    `ferry server` (SQLite) in ferryB with the source as an endpoint:
#         `ferry ls -U src:/` (entries in the server's order, printed as
#         they come) and `ferry ls src:/` (sorted): the time to the first
#         line and to the end, the lines, the service's peak RSS.
#
#   bench/slowdir.sh                                  # N=5000000, RTT 50 ms, 1 Gbit/s
#   N=200000 WAN="-delay 50ms -rate 100mbit" bench/slowdir.sh
#
# Environment: N BYTES WAN (bench/wan/setup.sh up arguments) FERRY
# RUN_TIMEOUT (s a run may take, default 1800) ROWS (copy, ls) PORT_BASE
# WAN_WAIT KEEP_LOGS=1.
# Needs: root, go, curl, jq, ss, setsid, /usr/bin/time.
set -Eeuo pipefail
shopt -s inherit_errexit

N=${N:-5000000}
BYTES=${BYTES:-10}
WAN=${WAN:--delay 25ms -rate 1gbit}
RUN_TIMEOUT=${RUN_TIMEOUT:-1800}
PORT_BASE=${PORT_BASE:-28891}
WAN_WAIT=${WAN_WAIT:-600}
KEEP_LOGS=${KEEP_LOGS:-0}
P_SRC=$PORT_BASE P_DST=$((PORT_BASE + 1)) P_API=$((PORT_BASE + 2))
A=10.77.0.1 B=10.77.0.2

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WANDIR=$REPO/bench/wan
. "$REPO/bench/lib.sh"
selected_rows copy ls >/dev/null # a misspelt row fails here
TMP=$(mktemp -d /tmp/ferry-slowdir.XXXXXX)
LOG=$TMP/logs PHASE=slowdir
mkdir -p "$LOG"
PGIDS=()
finish() {
	local rc=$?
	stop_servers
	wan_down
	report_logs "$rc"
}
trap finish EXIT
need go curl jq ss setsid /usr/bin/time
build_ferry
machine_facts
say "entries: $N of $BYTES bytes in one directory; link: $WAN"
wan_ready
# shellcheck disable=SC2086 # WAN is a list of arguments
wan_up $WAN

TABLE=()

# The copy.
if row_wanted copy; then
	ferry_server src ferryA "$A" "$P_SRC" "synthetic:files=$N,size=$BYTES,per-dir=$N"
	ferry_server dst ferryB "$B" "$P_DST" sink:
	show "ip netns exec ferryB $FERRY copy -r ftp://$A:$P_SRC/ ftp://$B:$P_DST/out/"
	t0=$(now)
	RC=0
	ip netns exec ferryB timeout "$RUN_TIMEOUT" /usr/bin/time -f '%M' -o "$TMP/time" \
		"$FERRY" copy -r "ftp://$A:$P_SRC/" "ftp://$B:$P_DST/out/" >"$LOG/copy.out" 2>&1 || RC=$?
	wall=$(since "$t0")
	grep -E '^[0-9]+ files?:|^settings:' "$LOG/copy.out" | sed 's/^/  /' || true
	if [[ $RC == 0 ]] && grep -Eq "^$N files?: $N transferred, 0 skipped, 0 failed" "$LOG/copy.out"; then
		TABLE+=("| ferry copy → sink | $wall | $(awk -v n="$N" -v s="$wall" 'BEGIN {printf "%.0f", n / s}') | - | $(awk '{printf "%.0f", $1 / 1024}' "$TMP/time") | $(peak_mib "$PID_src") | $(peak_mib "$PID_dst") | - |")
	else
		say "  FAILED: exit $RC; see $LOG/copy.out" >&2
		KEEP_LOGS=1
	fi
	stop_servers
fi

# The listings through the service.
if row_wanted ls; then
	ferry_server src ferryA "$A" "$P_SRC" "synthetic:files=$N,size=$BYTES,per-dir=$N"
	export XDG_CONFIG_HOME=$TMP/config FERRY_URL=http://$B:$P_API
	unset FERRY_TOKEN
	PASSWORD=bench-$RANDOM-$RANDOM
	echo "$PASSWORD" | "$FERRY" user add bench --data "$TMP/svc" >>"$LOG/cli.log" 2>&1
	start_bg server ferryB "$P_API" "$LOG/server.log" "$FERRY" server --data "$TMP/svc" --listen "$B:$P_API" --log-level warn
	echo "$PASSWORD" | ip netns exec ferryB "$FERRY" login --username bench >>"$LOG/cli.log" 2>&1
	ip netns exec ferryB "$FERRY" endpoint add src --server "ftp://$A:$P_SRC" >>"$LOG/cli.log"
	for flags in -U ""; do
		# shellcheck disable=SC2086 # flags is one flag or none
		show "ip netns exec ferryB $FERRY ls $flags src:/ -F unix | wc -l   # the time to its first line, and to its end"
		t0=$(now)
		RC=0
		# shellcheck disable=SC2086
		ip netns exec ferryB timeout "$RUN_TIMEOUT" /usr/bin/time -f '%M' -o "$TMP/time" "$FERRY" ls $flags src:/ -F unix 2>>"$LOG/cli.log" | {
			if IFS= read -r _; then since "$t0" >"$TMP/first"; fi
			wc -l >"$TMP/lines"
		} || RC=$?
		wall=$(since "$t0")
		lines=$(($(cat "$TMP/lines") + 1))
		if [[ $RC == 0 && $lines == "$N" ]]; then
			TABLE+=("| ferry ls ${flags:-(sorted)} through the service | $wall | $(awk -v n="$N" -v s="$wall" 'BEGIN {printf "%.0f", n / s}') | $(cat "$TMP/first") | $(awk '{printf "%.0f", $1 / 1024}' "$TMP/time") | $(peak_mib "$PID_src") | - | $(peak_mib "$PID_server") |")
		else
			say "  FAILED: exit $RC, $lines of $N lines; see $LOG" >&2
			KEEP_LOGS=1
		fi
	done
fi

say ""
say "| run | wall s | entries/s | first line s | client MiB | source server MiB | destination server MiB | service MiB |"
say "|---|---:|---:|---:|---:|---:|---:|---:|"
for r in "${TABLE[@]}"; do say "$r"; done
