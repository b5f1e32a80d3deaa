#!/usr/bin/env bash
# queue.sh — the queue (issue 31): how fast `ferry server` drains a backlog
# of one-file tasks, and how long another user's task waits behind it, on
# SQLite (one process) and on PostgreSQL (two processes sharing it), with
# the real server, the real REST API and two `ferry gridftp` endpoints on
# 127.0.0.1.
#
#   bench/queue.sh                       # N=10000, both databases
#   N=1000 PG=0 bench/queue.sh
#
# For each database, on a fresh store:
#  idle     user probe submits PROBE_N one-file tasks (1 byte each), one
#           every PROBE_GAP s, with nothing else queued, and each one's
#           submission-to-completion (the task's completion_time less its
#           request_time, both the server's clock) is taken: median, p99.
#  backlog  with the servers restarted with --no-worker, user bulk submits
#           N one-file tasks over 4 keep-alive connections (curl -K);
#           then the servers restart with their workers and drain them,
#           while probe submits PROBE_N more as above (to the second
#           process on PostgreSQL). Reported: the drain, N over the first
#           start_time to the last completion_time of bulk's tasks, in
#           tasks/s (bulk runs --per-user at a time: 3); probe's median and
#           p99 behind the backlog (another user's backlog must not slow
#           it); the slowest submission of all (HTTP time) and the answers
#           that were not 2xx.
# Servers run with the defaults (--tasks 16 --per-user 3) unless
# SERVER_ARGS says otherwise. Times come from the store itself (sqlite3,
# psql), not from the CLI.
# PostgreSQL (PG=auto: when /usr/lib/postgresql/*/bin/postgres exists and
# we are root; PG=0 skips): a throwaway cluster as in service.sh.
# Environment: N PROBE_N PROBE_GAP PG ROWS (sqlite, pg) SERVER_ARGS PORT_BASE (5 ports)
#   FERRY KEEP_LOGS=1.
# Needs: go, curl, jq, ss, setsid, sqlite3; psql and runuser for PostgreSQL.
set -Eeuo pipefail
shopt -s inherit_errexit
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
selected_rows sqlite pg >/dev/null # a misspelt row fails here

N=${N:-10000}
PROBE_N=${PROBE_N:-100}
PROBE_GAP=${PROBE_GAP:-0.2}
PG=${PG:-auto}
SERVER_ARGS=${SERVER_ARGS:-}
PORT_BASE=${PORT_BASE:-29871}
KEEP_LOGS=${KEEP_LOGS:-0}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=/dev/shm/ferry-queue.$$ # the endpoints' roots
TMP=$(mktemp -d /tmp/ferry-queue.XXXXXX)
LOG=$TMP/logs
mkdir -p "$LOG"
P_SRC=$PORT_BASE P_DST=$((PORT_BASE + 1)) P_API=$((PORT_BASE + 2)) P_API2=$((PORT_BASE + 3)) P_PG=$((PORT_BASE + 4))
PGIDS=() PGDIR="" PG_PGID=""

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	local pg
	for pg in "${PGIDS[@]}"; do kill -TERM -- "-$pg" 2>/dev/null || true; done
	((${#PGIDS[@]})) && sleep 0.5
	for pg in "${PGIDS[@]}"; do kill -KILL -- "-$pg" 2>/dev/null || true; done
	if [[ -n $PG_PGID ]]; then
		kill -INT -- "-$PG_PGID" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 -- "-$PG_PGID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL -- "-$PG_PGID" 2>/dev/null || true
	fi
	rm -rf "$WORK"
	[[ -n $PGDIR ]] && rm -rf "$PGDIR"
	report_logs "$rc"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

need go curl jq ss setsid sqlite3
for p in $P_SRC $P_DST $P_API $P_API2 $P_PG; do
	if [[ -n $(ss -Htan exclude time-wait "sport = :$p") ]]; then
		say "port $p is in use; set PORT_BASE" >&2
		exit 1
	fi
done
PG_BIN=""
if [[ $PG != 0 ]]; then
	PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
	if [[ -z $PG_BIN || ! -x $PG_BIN/postgres || $(id -u) != 0 ]] || ! id postgres >/dev/null 2>&1 || ! command -v psql >/dev/null; then
		[[ $PG == 1 ]] && { say "PG=1 but no PostgreSQL, psql, user postgres, or not root" >&2; exit 1; }
		PG_BIN=""
	fi
fi

say "== machine"
machine_facts
say "runs: N=$N PROBE_N=$PROBE_N PROBE_GAP=$PROBE_GAP SERVER_ARGS=\"$SERVER_ARGS\" PG=${PG_BIN:+on}"
say "== build"
build_ferry

mkdir -p "$WORK"/src "$WORK"/dst
head -c 1 /dev/urandom >"$WORK/src/one.bin"

start() { # port command...: a server in its own process group
	local port=$1
	shift
	show "$*"
	setsid "$@" >>"$LOG/servers.log" 2>&1 </dev/null &
	PGIDS+=("$!")
	wait_listen "$port" "$!"
}
stop_services() { # the ferry servers, not the endpoints (the first two)
	local pg
	for pg in "${PGIDS[@]:2}"; do kill -TERM -- "-$pg" 2>/dev/null || true; done
	for pg in "${PGIDS[@]:2}"; do
		for _ in $(seq 100); do kill -0 -- "-$pg" 2>/dev/null || break; sleep 0.1; done
	done
	PGIDS=("${PGIDS[@]:0:2}")
}
start "$P_SRC" "$FERRY" gridftp --root "$WORK/src" --listen "127.0.0.1:$P_SRC" --anonymous --log-level warn
start "$P_DST" "$FERRY" gridftp --root "$WORK/dst" --listen "127.0.0.1:$P_DST" --anonymous --anonymous-write --log-level warn

URL=http://127.0.0.1:$P_API/api/v0.10
PASSWORD=bench-$RANDOM-$RANDOM
# token USER: a new API token of USER
token() {
	curl -fsS "$URL/auth/login" -H 'Content-Type: application/json' \
		-d "{\"username\": \"$1\", \"password\": \"$PASSWORD\"}" | jq -r .value
}
# body USER I: a one-file transfer of the 1-byte file to /USER/I.bin
body() { printf '{"DATA_TYPE": "transfer", "source_endpoint": "bulk#src", "destination_endpoint": "bulk#dst", "DATA": [{"DATA_TYPE": "transfer_item", "source_path": "/one.bin", "destination_path": "/%s/%s.bin"}]}' "$1" "$2"; }

# probe OUT: PROBE_N tasks of user probe, one every PROBE_GAP s; the
# HTTP status of each to OUT.
probe() {
	local tok i
	tok=$(URL=${PROBE_URL:-$URL} token probe)
	for ((i = 0; i < PROBE_N; i++)); do
		curl -sS -o /dev/null -w '%{http_code} %{time_total}\n' "${PROBE_URL:-$URL}/transfer" -H "Authorization: Bearer $tok" \
			-H 'Content-Type: application/json' -d "$(body probe "p$i")" >>"$1"
		sleep "$PROBE_GAP"
	done
}

# bulk OUT: N tasks of user bulk over 4 keep-alive connections; "status
# seconds" of each to OUT.
bulk() {
	local tok i c
	tok=$(token bulk)
	for c in 0 1 2 3; do : >"$TMP/bulk$c.curl"; done
	for ((i = 0; i < N; i++)); do
		c=$TMP/bulk$((i % 4)).curl
		[[ -s $c ]] && echo next >>"$c"
		printf 'url = "%s/transfer"\nheader = "Authorization: Bearer %s"\nheader = "Content-Type: application/json"\ndata = "%s"\noutput = "/dev/null"\nwrite-out = "%%{http_code} %%{time_total}\\n"\n' \
			"$URL" "$tok" "$(body bulk "b$i" | sed 's/"/\\"/g')" >>"$c"
	done
	show "curl -sS -K $TMP/bulkC.curl   # C = 0..3 at once: $N POST /transfer on 4 connections"
	local pids=()
	for c in 0 1 2 3; do
		curl -sS -K "$TMP/bulk$c.curl" >>"$1.$c" &
		pids+=("$!")
	done
	wait "${pids[@]}"
	cat "$1".? >>"$1"
	rm "$1".?
}

# sql Q: Q's rows, on the store now in use
sql() {
	if [[ -n ${PGDSN:-} ]]; then
		psql -X -q -At -F' ' "$PGDSN" -c "$1"
	else
		sqlite3 -separator ' ' "file:$SVC/ferry.db?mode=ro" "$1"
	fi
}
# wait_done USER COUNT: until USER has COUNT tasks and none ACTIVE
wait_done() {
	local uid=$(sql "SELECT id FROM users WHERE name = '$1'")
	while :; do
		read -r all active < <(sql "SELECT COUNT(*), COUNT(CASE WHEN status = 'ACTIVE' THEN 1 END) FROM tasks WHERE user_id = $uid")
		((all >= $2 && active == 0)) && return
		sleep 1
	done
}
# times USER: "request completion" (s) of USER's tasks, by request time
times() {
	sql "SELECT t.request_time / 1e6, t.completion_time / 1e6 FROM tasks t JOIN users u ON u.id = t.user_id
		WHERE u.name = '$1' AND t.status = 'SUCCEEDED' ORDER BY t.request_time"
}
# lat: "median p99 max n" of completion − request (s), from times on stdin
lat() {
	awk '{print $2 - $1}' | sort -g | awk '{v[NR] = $1} END {
		if (!NR) {print "- - - 0"; exit}
		r = int(0.99 * NR); if (r < 0.99 * NR) r++
		printf "%.3f %.3f %.3f %d\n", v[int((NR + 1) / 2)], v[r], v[NR], NR}'
}
# failed USER: how many of USER's tasks did not succeed
failed() { sql "SELECT COUNT(*) FROM tasks t JOIN users u ON u.id = t.user_id WHERE u.name = '$1' AND t.status <> 'SUCCEEDED'"; }

# run LABEL: both phases on the store of SVC and DB_ARGS, the servers
# started by serve (ARGS...).
run() {
	local label=$1 out=$TMP/$1
	mkdir -p "$out" "$WORK/dst/probe" "$WORK/dst/bulk"
	rm -f "$WORK"/dst/{probe,bulk}/*
	say "== $label: idle: $PROBE_N tasks of probe, one every $PROBE_GAP s"
	probe "$out/probe-idle.http"
	wait_done probe "$PROBE_N"
	read -r i_med i_p99 i_max i_n < <(times probe | lat)
	say "== $label: backlog: $N tasks of bulk queued with no worker running"
	stop_services
	serve --no-worker
	local t0=$EPOCHREALTIME
	bulk "$out/bulk.http"
	local t1=$EPOCHREALTIME
	say "  submitting $N took $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s"
	stop_services
	say "== $label: the workers drain them; $PROBE_N more tasks of probe, one every $PROBE_GAP s"
	serve
	probe "$out/probe-backlog.http"
	wait_done bulk "$N"
	wait_done probe $((2 * PROBE_N))
	local bad slow rate
	bad=$(cat "$out"/*.http | awk '$1 !~ /^2/' | wc -l)
	slow=$(cat "$out"/*.http | sort -g -k2 | tail -1 | awk '{printf "%.3f", $2}')
	read -r p_med p_p99 p_max p_n < <(times probe | tail -n "$PROBE_N" | lat)
	rate=$(sql "SELECT COUNT(*), MIN(t.start_time) / 1e6, MAX(t.completion_time) / 1e6 FROM tasks t JOIN users u ON u.id = t.user_id WHERE u.name = 'bulk'" |
		awk '{printf "%.1f", $1 / ($3 - $2)}')
	say "  failed tasks: bulk $(failed bulk), probe $(failed probe)"
	RESULT+=("| $label | $N | $rate | $i_med / $i_p99 | $p_med / $p_p99 | $slow | $bad |")
}

RESULT=()
# add_users_endpoints: the endpoints src and dst, public, added by bulk.
add_users_endpoints() {
	local tok
	tok=$(token bulk)
	for e in "src $P_SRC" "dst $P_DST"; do
		set -- $e
		FERRY_URL=http://127.0.0.1:$P_API FERRY_TOKEN=$tok "$FERRY" endpoint add "$1" --server "ftp://127.0.0.1:$2" --public >>"$LOG/cli.log"
	done
}

# --- SQLite: one process --------------------------------------------------------
if row_wanted sqlite; then
	SVC=$TMP/svc-sqlite DB_ARGS=() PGDSN=""
	echo "$PASSWORD" | "$FERRY" user add bulk --data "$SVC" >>"$LOG/cli.log"
	serve() { start "$P_API" "$FERRY" server --data "$SVC" --listen "127.0.0.1:$P_API" --log-level warn $SERVER_ARGS "$@"; }
	serve
	echo "$PASSWORD" | "$FERRY" user add probe --data "$SVC" >>"$LOG/cli.log"
	add_users_endpoints
	run "SQLite, 1 process"
	stop_services
fi

# --- PostgreSQL: two processes ---------------------------------------------------
if [[ -n $PG_BIN ]] && row_wanted pg; then
	say "== PostgreSQL: a throwaway cluster"
	PGDIR=$(mktemp -d /tmp/ferry-queue-pg.XXXXXX)
	chown postgres: "$PGDIR"
	LC_ALL=C runuser -u postgres -- "$PG_BIN/initdb" -D "$PGDIR/data" -U postgres -A trust -E UTF8 --locale=C --no-sync >>"$LOG/initdb.log" 2>&1
	pgcmd=(runuser -u postgres -- "$PG_BIN/postgres" -D "$PGDIR/data" -k "$PGDIR" -p "$P_PG" -c listen_addresses=127.0.0.1
		-c max_connections=300 -F -c synchronous_commit=off -c full_page_writes=off)
	show "${pgcmd[*]}"
	LC_ALL=C setsid "${pgcmd[@]}" >>"$LOG/postgres.log" 2>&1 </dev/null &
	PG_PGID=$!
	wait_listen "$P_PG" "$PG_PGID"
	for _ in $(seq 100); do psql -X -q -At -h 127.0.0.1 -p "$P_PG" -U postgres -d postgres -c "SELECT 1" >/dev/null 2>&1 && break; sleep 0.1; done
	psql -X -q -At -h 127.0.0.1 -p "$P_PG" -U postgres -d postgres -c "CREATE DATABASE ferry"
	PGDSN="postgres://postgres@127.0.0.1:$P_PG/ferry?sslmode=disable"
	SVC=$TMP/svc-pg DB_ARGS=(--db "$PGDSN")
	echo "$PASSWORD" | "$FERRY" user add bulk --data "$SVC" "${DB_ARGS[@]}" >>"$LOG/cli.log"
	echo "$PASSWORD" | "$FERRY" user add probe --data "$SVC" "${DB_ARGS[@]}" >>"$LOG/cli.log"
	serve() {
		local p
		for p in "$P_API" "$P_API2"; do
			start "$p" "$FERRY" server --data "$SVC-$p" "${DB_ARGS[@]}" --key-file "$TMP/shared.key" --worker-id "bench-$p" \
				--listen "127.0.0.1:$p" --log-level warn $SERVER_ARGS "$@"
		done
	}
	serve
	add_users_endpoints
	PROBE_URL=http://127.0.0.1:$P_API2/api/v0.10
	run "PostgreSQL, 2 processes"
	stop_services
fi

say ""
say "| store | tasks queued | drain, tasks/s | probe idle: median / p99 s | probe behind the backlog: median / p99 s | slowest submission s | answers not 2xx |"
say "|---|---|---|---|---|---|---|"
for r in "${RESULT[@]}"; do say "$r"; done
