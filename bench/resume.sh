#!/usr/bin/env bash
# resume.sh — kill -9 of the service halfway through a task of N files
# (default 10,000,000), then the task resumed by the restarted service: it
# must end SUCCEEDED with N files transferred, re-listing the tree but
# sending again only what was in flight, in memory that does not grow with
# what was done (issue 31). Everything on 127.0.0.1: a `ferry gridftp
# --root synthetic:files=N,size=BYTES,per-dir=PER_DIR` source (generated,
# no disk), a `--root sink:` destination (hashes and discards; its metrics
# count the bytes it received), `ferry server` on SQLite.
# Reported: the time to the kill and from the restart to the end, the
# files recorded at the kill, about how many files were sent again (the
# sink's bytes of finished transfers, counted in tar members, beyond N: a
# tar stream the kill cut is not counted, so its members that had landed
# and go again are not seen), the peak RSS (VmHWM) of the service before
# the kill and after the restart, and the task's counters at the end.
#
#   bench/resume.sh
#   N=1000000 AT=0.3 bench/resume.sh
#
# Environment: N PER_DIR BYTES AT (the fraction of N transferred when the
# service is killed, default 0.5) DOWN (s between the kill and the
# restart, default 2) RUN_TIMEOUT (s, default 3600) FERRY PORT_BASE
# (4 ports) KEEP_LOGS=1.
# Needs: go, curl, jq, ss, setsid.
set -Eeuo pipefail
shopt -s inherit_errexit

N=${N:-10000000}
PER_DIR=${PER_DIR:-1000}
BYTES=${BYTES:-10}
AT=${AT:-0.5}
DOWN=${DOWN:-2}
RUN_TIMEOUT=${RUN_TIMEOUT:-3600}
PORT_BASE=${PORT_BASE:-27891}
KEEP_LOGS=${KEEP_LOGS:-0}
P_SRC=$PORT_BASE P_DST=$((PORT_BASE + 1)) P_MET=$((PORT_BASE + 2)) P_API=$((PORT_BASE + 3))

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$REPO/bench/lib.sh"
TMP=$(mktemp -d /tmp/ferry-resume.XXXXXX)
LOG=$TMP/logs PHASE=resume SVC=$TMP/svc
mkdir -p "$LOG"
PGIDS=()
finish() {
	local rc=$?
	stop_servers
	report_logs "$rc"
}
trap finish EXIT
need go curl jq ss setsid
build_ferry
machine_facts
ports_free "" "$P_SRC" "$P_DST" "$P_MET" "$P_API"
say "files: $N of $BYTES bytes, $PER_DIR to a directory; kill -9 of the service at $AT of them, down $DOWN s"

sunk() { curl -fsS "http://127.0.0.1:$P_MET/metrics" | awk '/^ferry_gridftp_bytes_total\{direction="in"\}/ {printf "%.0f", $2}'; }
field() { "$FERRY" task show "$ID" -F json 2>>"$LOG/cli.log" | jq -r ".$1 // 0"; }

ferry_server src "" 127.0.0.1 "$P_SRC" "synthetic:files=$N,size=$BYTES,per-dir=$PER_DIR"
ferry_server dst "" 127.0.0.1 "$P_DST" sink: --metrics-listen "127.0.0.1:$P_MET"
export XDG_CONFIG_HOME=$TMP/config FERRY_URL=http://127.0.0.1:$P_API
unset FERRY_TOKEN
PASSWORD=bench-$RANDOM-$RANDOM
echo "$PASSWORD" | "$FERRY" user add bench --data "$SVC" >>"$LOG/cli.log" 2>&1
start_service() {
	start_bg server "" "$P_API" "$LOG/server-$1.log" "$FERRY" server --data "$SVC" --listen "127.0.0.1:$P_API" --log-level warn
}
start_service 1
echo "$PASSWORD" | "$FERRY" login --username bench >>"$LOG/cli.log" 2>&1
"$FERRY" endpoint add src --server "ftp://127.0.0.1:$P_SRC" >>"$LOG/cli.log"
"$FERRY" endpoint add dst --server "ftp://127.0.0.1:$P_DST" >>"$LOG/cli.log"

show "$FERRY transfer -r src:/ dst:/out/; kill -9 of ferry server once $AT of $N files are transferred; ferry server again"
t0=$(now)
ID=$("$FERRY" transfer -r src:/ dst:/out/ 2>>"$LOG/cli.log")
at=$(awk -v n="$N" -v a="$AT" 'BEGIN {printf "%d", n * a}')
while (($(field files_transferred) < at)); do
	(($(awk -v t="$(since "$t0")" -v m="$RUN_TIMEOUT" 'BEGIN {print (t > m)}'))) && { say "FAILED: $at files not transferred within $RUN_TIMEOUT s" >&2; exit 1; }
	sleep 0.5
done
before_mb=$(peak_mib "$PID_server")
kill -9 "$PID_server"
to_kill=$(since "$t0")
wait_gone() { while kill -0 "$1" 2>/dev/null; do sleep 0.05; done; }
wait_gone "$PID_server"
sunk_at_kill=$(sunk)
say "  killed after $to_kill s (service peak $before_mb MiB); the sink had received $sunk_at_kill bytes in finished transfers"
sleep "$DOWN"
PGIDS=("${PGIDS[@]:0:2}")
start_service 2
recorded=$(field files_transferred)
t1=$(now)
while :; do
	st=$(field status)
	[[ $st == SUCCEEDED || $st == FAILED ]] && break
	(($(awk -v t="$(since "$t1")" -v m="$RUN_TIMEOUT" 'BEGIN {print (t > m)}'))) && { say "FAILED: the task is still $st after $RUN_TIMEOUT s" >&2; exit 1; }
	sleep 1
done
after=$(since "$t1")
after_mb=$(peak_mib "$PID_server")
j=$("$FERRY" task show "$ID" -F json)
total=$(sunk)
# Files this small go as tar streams: a member is a 512-byte header and
# its data in 512-byte blocks (a stream's 1,024-byte end is not counted).
member=$((512 + (BYTES + 511) / 512 * 512))
again=$(awk -v s="$total" -v n="$N" -v m="$member" 'BEGIN {printf "%.0f", s / m - n}')
say "  task $ID: $(jq -r '"\(.status): \(.files_transferred) transferred, \(.files_skipped) skipped, \(.files_failed) failed, \(.bytes_transferred) bytes, \(.faults) faults"' <<<"$j")"
db=$(du -cb "$SVC"/ferry.db* | tail -1 | cut -f1)
say ""
say "| files | to the kill s | recorded at the restart | from the restart to the end s | ≈ files sent again | service MiB before the kill | service MiB after the restart | DB B/file |"
say "|---:|---:|---:|---:|---:|---:|---:|---:|"
say "| $N | $to_kill | $recorded | $after | $again | $before_mb | $after_mb | $(awk -v b="$db" -v n="$N" 'BEGIN {printf "%.0f", b / n}') |"
[[ $(jq -r .status <<<"$j") == SUCCEEDED && $(jq -r .files_transferred <<<"$j") == "$N" ]] || { say "FAILED: the task did not end with $N files transferred" >&2; exit 1; }
