#!/usr/bin/env bash
# hugedir.sh — one flat directory of N empty files (default 1,000,000), listed
# on loopback:
#   mlsd   globus-url-copy -list of it from `ferry gridftp`: wall time, lines,
#          and the endpoint server's peak RSS (VmHWM) after that one listing;
#   ls     `ferry ls` of it through `ferry server` (API and workers, SQLite):
#          time to the first line printed, total time, lines, and the
#          service's peak RSS (a fresh `ferry gridftp` serves the directory).
# With OLD=path/to/an/older/ferry the same rows for it first, then for
# FERRY: before and after. The directory is made in $TMP and removed after.
#
#   bench/hugedir.sh                       # N=1000000
#   N=100000 OLD=/tmp/ferry-main bench/hugedir.sh
#
# Environment: N FERRY OLD LS_TIMEOUT (s, default 600) OLD_LS_TIMEOUT (s, for
# OLD, default LS_TIMEOUT) ROWS (mlsd, ls) PORT_BASE KEEP_LOGS=1.
# Needs: go, globus-url-copy, python3, curl, ss.
set -Eeuo pipefail
shopt -s inherit_errexit

N=${N:-1000000}
LS_TIMEOUT=${LS_TIMEOUT:-600}
KEEP_LOGS=${KEEP_LOGS:-0}
PORT_BASE=${PORT_BASE:-47310}
P_SRV=$PORT_BASE P_API=$((PORT_BASE + 1))

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$REPO/bench/lib.sh"
selected_rows mlsd ls >/dev/null # a misspelt row fails here
TMP=$(mktemp -d /tmp/ferry-hugedir.XXXXXX)
LOG=$TMP/logs WORK=$TMP/work PHASE=hugedir
mkdir -p "$LOG" "$WORK/root/flat"
trap cleanup EXIT
need go globus-url-copy python3 curl ss
ports_free "" "$P_SRV" "$P_API"
build_ferry
machine_facts
say "entries: $N in one directory"

show "python3: $N empty files in $WORK/root/flat"
python3 - "$WORK/root/flat" "$N" <<-'EOF'
	import os, sys
	d, n = sys.argv[1], int(sys.argv[2])
	for i in range(n):
	    os.close(os.open(os.path.join(d, "f%08d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
EOF

hwm() { awk '/VmHWM/ {printf "%.0f MiB", $2 / 1024}' "/proc/$1/status"; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f s", b - a}'; }

# rows LABEL BIN LIMIT: the two rows for the ferry binary BIN, its ls cut
# after LIMIT seconds.
rows() {
	local label=$1 bin=$2 limit=$3 t0 t1 first lines pid
	local FERRY=$bin # ferry_server's binary too
	if row_wanted mlsd; then
		ferry_server "srv_$label" "" 127.0.0.1 "$P_SRV" "$WORK/root"
		pid=$(eval "echo \$PID_srv_$label")
		t0=$(now)
		lines=$(globus-url-copy -list "ftp://127.0.0.1:$P_SRV/flat/" | wc -l)
		t1=$(now)
		say "$label mlsd: $(secs "$t0" "$t1"), $lines lines, endpoint server peak RSS $(hwm "$pid")"
		stop_servers
	fi

	row_wanted ls || return 0
	export XDG_CONFIG_HOME=$TMP/config-$label FERRY_URL=http://127.0.0.1:$P_API
	mkdir -p "$TMP/data-$label"
	echo benchpw | "$bin" user add alice --data "$TMP/data-$label" >/dev/null
	start_bg "api_$label" "" "$P_API" "$LOG/$PHASE-api-$label.log" "$bin" server --data "$TMP/data-$label" --listen "127.0.0.1:$P_API"
	pid=$(eval "echo \$PID_api_$label")
	ferry_server "srv2_$label" "" 127.0.0.1 "$P_SRV" "$WORK/root"
	echo benchpw | "$bin" login --username alice >/dev/null
	"$bin" endpoint add flat --server "ftp://127.0.0.1:$P_SRV" >/dev/null
	t0=$(now)
	lines=$(timeout "$limit" "$bin" ls flat:/flat -F unix | {
		if read -r _; then
			now >"$TMP/first-$label"
			echo $(($(wc -l) + 1))
		else
			echo 0
		fi
	}) || say "$label ls: cut after $limit s, or failed"
	t1=$(now)
	first=never
	[[ -s $TMP/first-$label ]] && first="after $(secs "$t0" "$(cat "$TMP/first-$label")")"
	say "$label ls: first line $first, all after $(secs "$t0" "$t1"), $lines lines, service peak RSS $(hwm "$pid")"
	stop_servers
}

if [[ -n ${OLD:-} ]]; then
	rows old "$OLD" "${OLD_LS_TIMEOUT:-$LS_TIMEOUT}"
fi
rows new "$FERRY" "$LS_TIMEOUT"
