#!/usr/bin/env bash
# service.sh — the managed service (issue 4): what `ferry server` adds to a
# transfer, measured with the real CLI against the real server and two
# `ferry gridftp` endpoints on 127.0.0.1, same machine, same run.
#
#   bench/service.sh                  # everything; RUNS=3
#   RUNS=1 CONC_NS="8 64" PG=0 bench/service.sh
#
# (1) dispatch   DISPATCH_N times, one after another: `ferry transfer` of a
#                1-byte file, then `ferry task wait -H` on its task; each timed
#                with the wall clock around the two CLI processes (bash's
#                $EPOCHREALTIME, no fork). One untimed warm-up first. The
#                task's request_time and completion_time (server clock, same
#                machine) split each total into CLI-to-request, the service's
#                own time, and completion-to-exit of the wait. For context,
#                CONTEXT_N times each: `ferry scp` (submit and wait in one CLI
#                process), `ferry copy --verify-checksum` of the same file
#                (the engine with no service: what a task does, minus the
#                service), `curl -T` of the file to the destination endpoint
#                (a plain FTP upload), and `ferry task show -F json` (one CLI
#                start-up and one authenticated GET: the CLI's floor).
#                scp itself is not measured: it needs an sshd, which these
#                machines do not have.
# (2) concurrency for N in CONC_NS: N tasks, each a recursive transfer of its
#                own directory of FILES × FILE_BYTES (hard links of one set)
#                to its own destination directory, all N `ferry transfer`
#                processes started at once (SUBMIT=serial: one after
#                another), then `ferry task wait` on each in turn. Aggregate
#                files/s = N × FILES / (first submit → last completion_time).
#                The server runs with --tasks (max N) --per-user 0, so all N
#                run at once; rows DEFAULT_NS rerun with the server's default
#                settings (--tasks 16 --per-user 3), which queue. RUNS runs
#                per N, the order of N reversed on every other run; median.
#                Every task must be SUCCEEDED with FILES files transferred;
#                the files that arrived are counted (and their size checked)
#                and one file per task is compared with cmp.
# (3) database   rows in each SQLite table before and after one task of
#                DB_FILES × FILE_BYTES (sqlite3 CLI, read-only), per file
#                transferred; the task's events by code; the growth of the
#                database (page_count × page_size).
# PostgreSQL (PG=auto: when /usr/lib/postgresql/*/bin/postgres exists and we
#                are root; PG=0 skips): a throwaway cluster (initdb and
#                postgres as user postgres, -F, synchronous_commit=off), a
#                server on it with --tasks (max N) --per-user 0, rows PG_NS of
#                (2) (with PostgreSQL's CPU and the sessions opened to it),
#                and (3) with the row writes the statistics collector counts
#                (n_tup_ins + n_tup_upd + n_tup_del per table) and the
#                transactions (pg_stat_database); the ferry server is stopped
#                before each reading so that its backends flush their counts.
# The service's --data (SQLite database, key) is under a mktemp dir in /tmp
# (SVC_DIR to put it elsewhere, e.g. /dev/shm); the endpoints' roots are in
# /dev/shm. Everything listens on 127.0.0.1 only; the CLI's login is kept
# under the temp dir (XDG_CONFIG_HOME), never in ~/.config.
# Environment: RUNS DISPATCH_N CONTEXT_N CONC_NS DEFAULT_NS FILES FILE_BYTES
#   DB_FILES SUBMIT PG PG_NS SVC_DIR ROWS (dispatch: (1); concurrency: (2) and
#   its reference; database: (3) on SQLite; pg: PostgreSQL) PORT_BASE (4 ports)
#   FERRY KEEP_LOGS=1.
# Needs: go, curl, cmp, jq, ss, setsid; sqlite3 for (3) on SQLite.
set -Eeuo pipefail
shopt -s inherit_errexit
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
selected_rows dispatch concurrency database pg >/dev/null # a misspelt row fails here

RUNS=${RUNS:-3}
DISPATCH_N=${DISPATCH_N:-100}
CONTEXT_N=${CONTEXT_N:-20}
CONC_NS=${CONC_NS:-1 8 32 64}
DEFAULT_NS=${DEFAULT_NS-8 64}
FILES=${FILES:-200}
FILE_BYTES=${FILE_BYTES:-51200}
DB_FILES=${DB_FILES:-1000}
SUBMIT=${SUBMIT:-parallel}
PG=${PG:-auto}
PG_NS=${PG_NS-8 64}
PORT_BASE=${PORT_BASE:-29851} # below the ephemeral range
KEEP_LOGS=${KEEP_LOGS:-0}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=/dev/shm/ferry-service.$$ # the endpoints' roots
TMP=$(mktemp -d /tmp/ferry-service.XXXXXX) # binary, logs, CLI config
SVC=${SVC_DIR:-$TMP}/svc.$$ # the service's --data
PGDIR="" # the PostgreSQL cluster, when there is one
LOG=$TMP/logs
mkdir -p "$LOG" "$TMP/config"
HZ=$(getconf CLK_TCK)
PGIDS=() # process groups of the servers we started
T_START=$(date +%s)
P_SRC=$PORT_BASE P_DST=$((PORT_BASE + 1)) P_API=$((PORT_BASE + 2)) P_PG=$((PORT_BASE + 3))


cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	local pg
	for pg in "${PGIDS[@]}"; do kill -TERM -- "-$pg" 2>/dev/null || true; done
	((${#PGIDS[@]})) && sleep 0.5
	for pg in "${PGIDS[@]}"; do kill -KILL -- "-$pg" 2>/dev/null || true; done
	if [[ -n ${PG_PGID:-} ]]; then # postgres last: the ferry servers are its clients
		kill -INT -- "-$PG_PGID" 2>/dev/null || true # fast shutdown
		for _ in $(seq 50); do kill -0 -- "-$PG_PGID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL -- "-$PG_PGID" 2>/dev/null || true
	fi
	rm -rf "$WORK"
	[[ -n $PGDIR ]] && rm -rf "$PGDIR"
	[[ -n ${SVC_DIR:-} ]] && rm -rf "$SVC"
	report_logs "$rc"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

need go curl cmp jq ss setsid
ulimit -n "$(ulimit -Hn)" # 64 tasks hold hundreds of control channels
for p in $P_SRC $P_DST $P_API $P_PG; do
	if [[ -n $(ss -Htan exclude time-wait "sport = :$p") ]]; then
		say "port $p is in use; set PORT_BASE" >&2
		exit 1
	fi
done
max_n=1 # the server's --tasks when all N run at once
for n in $CONC_NS $PG_NS; do ((n > max_n)) && max_n=$n; done
max_src=$max_n # source directories
for n in $DEFAULT_NS; do ((n > max_src)) && max_src=$n; done
PG_BIN=""
if [[ $PG != 0 ]]; then
	PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
	if [[ -z $PG_BIN || ! -x $PG_BIN/postgres || $(id -u) != 0 ]] || ! id postgres >/dev/null 2>&1; then
		[[ $PG == 1 ]] && { say "PG=1 but no PostgreSQL, no user postgres, or not root" >&2; exit 1; }
		PG_BIN=""
	fi
fi

load() { cut -d" " -f1-3 /proc/loadavg; }

# --- machine -----------------------------------------------------------------
say "== machine"
machine_facts
say "service data: $SVC ($(df --output=fstype "${SVC_DIR:-$TMP}" | tail -1 | tr -d ' ')); endpoints: $WORK (tmpfs)"
[[ -n $PG_BIN ]] && say "postgres: $("$PG_BIN/postgres" --version)"
say "runs:    RUNS=$RUNS DISPATCH_N=$DISPATCH_N CONTEXT_N=$CONTEXT_N CONC_NS=\"$CONC_NS\" DEFAULT_NS=\"$DEFAULT_NS\" FILES=$FILES FILE_BYTES=$FILE_BYTES DB_FILES=$DB_FILES SUBMIT=$SUBMIT PG_NS=\"${PG_BIN:+$PG_NS}\""

# --- build -------------------------------------------------------------------
say "== build"
build_ferry

# --- data --------------------------------------------------------------------
say "== data in $WORK"
mkdir -p "$WORK"/src/c "$WORK"/dst/{dispatch,scp,copy,curl,conc,db}
head -c 1 /dev/urandom >"$WORK/src/one.bin"
show "head -c $((FILES * FILE_BYTES)) /dev/urandom | split -b $FILE_BYTES -a 5 -d - $WORK/src/set/f"
mkdir "$WORK/src/set"
head -c $((FILES * FILE_BYTES)) /dev/urandom | split -b "$FILE_BYTES" -a 5 -d - "$WORK/src/set/f"
tname() { printf 't%02d' "$1"; }
show "cp -al $WORK/src/set $WORK/src/c/tNN   # NN = 01..$max_src: one directory per task, hard links"
for ((i = 1; i <= max_src; i++)); do cp -al "$WORK/src/set" "$WORK/src/c/$(tname "$i")"; done
show "head -c $((DB_FILES * FILE_BYTES)) /dev/urandom | split -b $FILE_BYTES -a 5 -d - $WORK/src/db/f"
mkdir "$WORK/src/db"
head -c $((DB_FILES * FILE_BYTES)) /dev/urandom | split -b "$FILE_BYTES" -a 5 -d - "$WORK/src/db/f"

# --- servers -----------------------------------------------------------------
start() { # name port command...: a server in its own process group
	local name=$1 port=$2
	shift 2
	show "$*"
	setsid "$@" >>"$LOG/$name.log" 2>&1 </dev/null &
	local pid=$!
	PGIDS+=("$pid")
	wait_listen "$port" "$pid"
	eval "PID_$name=$pid"
}
stop() { # name: stops a server started by start and waits for it
	local pid
	eval "pid=\$PID_$1"
	kill -TERM -- "-$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	local keep=() pg
	for pg in "${PGIDS[@]}"; do [[ $pg == "$pid" ]] || keep+=("$pg"); done
	PGIDS=("${keep[@]}")
}
DB_ARGS=() # --db DSN when on PostgreSQL
start_service() { # tasks per-user
	SERVER_SETTINGS="--tasks $1 --per-user $2"
	start server "$P_API" "$FERRY" server --data "$SVC" "${DB_ARGS[@]}" --listen "127.0.0.1:$P_API" \
		--tasks "$1" --per-user "$2" --log-level warn
}
stop_service() { stop server; }

export XDG_CONFIG_HOME=$TMP/config FERRY_URL=http://127.0.0.1:$P_API
unset FERRY_TOKEN
PASSWORD=bench-$RANDOM-$RANDOM
setup_service() { # the user, the login and the two endpoints of the store now in use
	show "echo PASSWORD | $FERRY user add bench --data $SVC ${DB_ARGS[*]}"
	echo "$PASSWORD" | "$FERRY" user add bench --data "$SVC" "${DB_ARGS[@]}" >>"$LOG/cli.log"
	start_service "${@}"
	show "echo PASSWORD | FERRY_URL=$FERRY_URL XDG_CONFIG_HOME=$XDG_CONFIG_HOME $FERRY login --username bench"
	echo "$PASSWORD" | "$FERRY" login --username bench >>"$LOG/cli.log"
	show "$FERRY endpoint add src --server ftp://127.0.0.1:$P_SRC; $FERRY endpoint add dst --server ftp://127.0.0.1:$P_DST"
	"$FERRY" endpoint add src --server "ftp://127.0.0.1:$P_SRC" >>"$LOG/cli.log"
	"$FERRY" endpoint add dst --server "ftp://127.0.0.1:$P_DST" >>"$LOG/cli.log"
}

say "== servers"
start src "$P_SRC" "$FERRY" gridftp --root "$WORK/src" --listen "127.0.0.1:$P_SRC" --anonymous --anonymous-write --log-level warn
start dst "$P_DST" "$FERRY" gridftp --root "$WORK/dst" --listen "127.0.0.1:$P_DST" --anonymous --anonymous-write --log-level warn
setup_service 16 3 # the defaults, said out loud

# --- measuring ---------------------------------------------------------------
cpu_ticks() { awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat"; }
settle() { sleep 0.3; }
# stats: numbers on stdin → "median p90 min max n" (p90: nearest rank)
stats() {
	sort -g | awk '{v[NR] = $1} END {
		if (!NR) {print "- - - - 0"; exit}
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		r = int(0.9 * NR); if (r < 0.9 * NR) r++
		print m, v[r], v[1], v[NR], NR}'
}
median() { stats | cut -d" " -f1; }
ms() { awk '{printf "%.1f", $1 * 1000}'; } # seconds → ms
secs() { date -d "$1" +%s.%N; }            # RFC 3339 → Unix seconds
sub() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.6f\n", a - b}'; }
NFAIL=0
fail() { NFAIL=$((NFAIL + 1)); say "FAIL: $*" >&2; }

# task_times ID: "request completion status files_transferred" (Unix s)
task_times() {
	local j
	j=$("$FERRY" task show "$1" -F json)
	printf '%s %s %s %s\n' "$(secs "$(jq -r .request_time <<<"$j")")" "$(secs "$(jq -r .completion_time <<<"$j")")" \
		"$(jq -r .status <<<"$j")" "$(jq -r .files_transferred <<<"$j")"
}

# PostgreSQL's CPU (runuser, the postmaster with its reaped children, and
# its live children, which are each in a session of their own) and the
# sessions opened to database ferry; 0 without.
PG_ON=""
pg_cpu() {
	[[ -n $PG_ON ]] || { echo 0; return; }
	local t=0 p v pm
	pm=$(pgrep -P "$PG_PGID" | head -1)
	for p in "$PG_PGID" $pm $(pgrep -P "$pm"); do
		v=$(cpu_ticks "$p" 2>/dev/null) || continue
		t=$((t + v))
	done
	echo "$t"
}
pg_sessions() {
	[[ -n $PG_ON ]] || { echo 0; return; }
	psqlq "SELECT sessions FROM pg_stat_database WHERE datname = 'ferry'"
}

# --- (1) dispatch ------------------------------------------------------------
if row_wanted dispatch; then
	say ""
	say "== (1) dispatch: $DISPATCH_N × (ferry transfer of 1 byte; ferry task wait), server $SERVER_SETTINGS; load $(load)"
	show "$FERRY transfer src:/one.bin dst:/dispatch/one-\$i.bin   # prints the task id"
	show "$FERRY task wait -H \$id                                   # -H: a dot per poll that saw the task unfinished"
	D=$TMP/dispatch.txt
	: >"$D"
	dispatch_one() { # destination name; appends "id t0 t1 t2 dots"
		local t0 t1 t2 id rc=0
		t0=$EPOCHREALTIME
		id=$("$FERRY" transfer src:/one.bin "dst:/dispatch/$1" 2>>"$LOG/cli.log") || rc=$?
		t1=$EPOCHREALTIME
		((rc == 0)) && { "$FERRY" task wait -H "$id" >/dev/null 2>"$TMP/dots" || rc=$?; }
		t2=$EPOCHREALTIME
		((rc == 0)) || { fail "dispatch $1: exit $rc"; return 0; }
		echo "$id $t0 $t1 $t2 $(tr -cd . <"$TMP/dots" | wc -c)"
	}
	dispatch_one warm.bin >/dev/null # untimed warm-up
	s0=$(cpu_ticks "$PID_server")
	for ((i = 1; i <= DISPATCH_N; i++)); do dispatch_one "one-$i.bin" >>"$D"; done
	s1=$(cpu_ticks "$PID_server")
	say "  load after: $(load); server CPU: $(awk -v t=$((s1 - s0)) -v hz="$HZ" -v n="$DISPATCH_N" 'BEGIN {printf "%.1f ms per task", t / hz * 1000 / n}')"
	# split each total with the task's own times
	: >"$TMP/dispatch.split"
	while read -r id t0 t1 t2 dots; do
		read -r rq co st _ < <(task_times "$id")
		[[ $st == SUCCEEDED ]] || fail "dispatch task $id is $st"
		echo "$(sub "$t2" "$t0") $(sub "$t1" "$t0") $(sub "$t2" "$t1") $(sub "$rq" "$t0") $(sub "$co" "$rq") $(sub "$t2" "$co") $dots" >>"$TMP/dispatch.split"
	done <"$D"
	got=0
	for ((i = 1; i <= DISPATCH_N; i++)); do
		cmp -s "$WORK/src/one.bin" "$WORK/dst/dispatch/one-$i.bin" && got=$((got + 1))
	done
	[[ $got == "$DISPATCH_N" ]] || fail "dispatch: $got of $DISPATCH_N files arrived intact"
	say "  verified: $got of $DISPATCH_N files arrived (cmp)"
	col() { awk -v c="$1" '{print $c}' "$TMP/dispatch.split"; }
	DSTAT=$(col 1 | stats)
	say "  total submit→wait exits: median/p90/min/max $(for v in $DSTAT; do printf '%s ' "$(ms <<<"$v")"; done| awk '{print $1" / "$2" / "$3" / "$4}') ms (n $(awk '{print $5}' <<<"$DSTAT"))"
	LAST_ID=$(tail -1 "$D" | cut -d" " -f1)

	# context: CONTEXT_N of each, after one untimed warm-up
	declare -A CTX CTXCMD
	timed() { # name command...: appends seconds to CTX[name]
		local name=$1 t0 t1 rc=0
		shift
		t0=$EPOCHREALTIME
		"$@" >>"$LOG/context.log" 2>&1 || rc=$?
		t1=$EPOCHREALTIME
		((rc == 0)) || { fail "$name: exit $rc"; return 0; }
		CTX[$name]+="$(sub "$t1" "$t0")"$'\n'
	}
	context() { # name pattern: the command line, with @ for the destination's number
		local name=$1 pat=$2 i
		CTXCMD[$name]=$pat
		show "${pat//@/\$i}"
		# shellcheck disable=SC2086 # split on purpose: no word has spaces
		eval "set -- ${pat//@/w}"
		"$@" >>"$LOG/context.log" 2>&1 || fail "$name warm-up"
		for ((i = 1; i <= CONTEXT_N; i++)); do
			# shellcheck disable=SC2086
			eval "set -- ${pat//@/$i}"
			timed "$name" "$@"
		done
	}
	say "== (1) context: $CONTEXT_N each; load $(load)"
	context "ferry scp" "$FERRY scp src:/one.bin dst:/scp/one-@.bin"
	context "ferry copy --verify-checksum" "$FERRY copy -q --verify-checksum ftp://127.0.0.1:$P_SRC/one.bin ftp://127.0.0.1:$P_DST/copy/one-@.bin"
	context "ferry copy" "$FERRY copy -q ftp://127.0.0.1:$P_SRC/one.bin ftp://127.0.0.1:$P_DST/copy/nv-@.bin"
	context "curl -T (FTP upload)" "curl -sS -T $WORK/src/one.bin ftp://127.0.0.1:$P_DST/curl/one-@.bin"
	context "ferry task show -F json" "$FERRY task show $LAST_ID -F json"
	SCP_NOTE="scp: not measured (no sshd on this machine)"
	if command -v sshd >/dev/null || [[ -x /usr/sbin/sshd ]]; then SCP_NOTE="scp: sshd is installed but this script does not start it"; fi
	for f in one- nv-; do
		n=$(find "$WORK/dst/copy" -name "$f*" | wc -l)
		[[ $n == $((CONTEXT_N + 1)) ]] || fail "ferry copy: $n files $f*"
	done
	for d in scp curl; do
		for ((i = 1; i <= CONTEXT_N; i++)); do
			cmp -s "$WORK/src/one.bin" "$WORK/dst/$d/one-$i.bin" || fail "$d: one-$i.bin differs or is missing"
		done
	done
fi

# --- (2) concurrency ---------------------------------------------------------
declare -A CONC # CONC[label,N] = lines "total_s svc_s submit_s waited_s server_cpu_s endpoints_cpu_s [postgres_cpu_s pg_sessions]"
# conc_run LABEL N RUN
conc_run() {
	local label=$1 n=$2 r=$3 i id pids=() ids=() t0 t1 t2 s0 s1 e0 e1 p0 p1 n0 n1 dir rc=0
	dir=$label-n$n-r$r
	settle
	s0=$(cpu_ticks "$PID_server") e0=$(($(cpu_ticks "$PID_src") + $(cpu_ticks "$PID_dst"))) p0=$(pg_cpu) n0=$(pg_sessions)
	t0=$EPOCHREALTIME
	for ((i = 1; i <= n; i++)); do
		if [[ $SUBMIT == serial ]]; then
			"$FERRY" transfer -r "src:/c/$(tname "$i")/" "dst:/conc/$dir/$(tname "$i")/" >"$TMP/id.$i" 2>>"$LOG/cli.log" || rc=$?
		else
			"$FERRY" transfer -r "src:/c/$(tname "$i")/" "dst:/conc/$dir/$(tname "$i")/" >"$TMP/id.$i" 2>>"$LOG/cli.log" &
			pids+=($!)
		fi
	done
	for p in "${pids[@]}"; do wait "$p" || rc=$?; done
	t1=$EPOCHREALTIME
	((rc == 0)) || { fail "$label N=$n run $r: a submission failed"; return 0; }
	for ((i = 1; i <= n; i++)); do
		ids+=("$(<"$TMP/id.$i")")
		"$FERRY" task wait "${ids[-1]}" >/dev/null 2>>"$LOG/cli.log" || rc=$?
	done
	t2=$EPOCHREALTIME
	s1=$(cpu_ticks "$PID_server") e1=$(($(cpu_ticks "$PID_src") + $(cpu_ticks "$PID_dst"))) p1=$(pg_cpu) n1=$(pg_sessions)
	((rc == 0)) || { fail "$label N=$n run $r: a task did not succeed"; return 0; }
	local first="" last=0 rq co st ft
	for id in "${ids[@]}"; do
		read -r rq co st ft < <(task_times "$id")
		[[ $st == SUCCEEDED && $ft == "$FILES" ]] || { fail "task $id: $st, $ft files"; rc=1; }
		if [[ -z $first ]] || awk -v a="$rq" -v b="$first" 'BEGIN {exit !(a < b)}'; then first=$rq; fi
		if awk -v a="$co" -v b="$last" 'BEGIN {exit !(a > b)}'; then last=$co; fi
	done
	local got
	got=$(find "$WORK/dst/conc/$dir" -type f -size "${FILE_BYTES}c" | wc -l)
	[[ $got == $((n * FILES)) ]] || { fail "$label N=$n run $r: $got files of $FILE_BYTES B arrived, want $((n * FILES))"; rc=1; }
	for ((i = 1; i <= n; i++)); do
		local f
		f=$(printf 'f%05d' $(((i * 37) % FILES)))
		cmp -s "$WORK/src/set/$f" "$WORK/dst/conc/$dir/$(tname "$i")/$f" || { fail "$dir/$(tname "$i")/$f differs"; rc=1; }
	done
	rm -rf "${WORK:?}/dst/conc/$dir"
	((rc == 0)) || return 0
	local line
	line="$(sub "$last" "$t0") $(sub "$last" "$first") $(sub "$t1" "$t0") $(sub "$t2" "$t0") $(awk -v t=$((s1 - s0)) -v e=$((e1 - e0)) -v hz="$HZ" 'BEGIN {printf "%.2f %.2f", t / hz, e / hz}')"
	[[ -n $PG_ON ]] && line+=" $(awk -v p=$((p1 - p0)) -v hz="$HZ" 'BEGIN {printf "%.2f", p / hz}') $((n1 - n0))"
	CONC[$label,$n]+="$line"$'\n'
	awk -v n="$n" -v f="$FILES" -v r="$r" -v l="$label" '{printf "  %s N=%d run %d: %.3f s first submit → last completion (%.0f files/s); service span %.3f s; submit %.3f s; waits returned at %.3f s; CPU s: server %.2f, endpoints %.2f", l, n, r, $1, n * f / $1, $2, $3, $4, $5, $6
		if (NF > 6) printf ", postgres %.2f; PostgreSQL sessions opened: %d", $7, $8
		print ""}' <<<"$line"
}
conc_rows() { # LABEL NS...: RUNS runs, order reversed on even runs
	local label=$1 r n order
	shift
	for ((r = 1; r <= RUNS; r++)); do
		order=$*
		((r % 2)) || order=$(printf '%s\n' "$@" | tac | xargs)
		for n in $order; do conc_run "$label" "$n" "$r"; done
	done
}
CONC_LABELS=()
conc_phase() { # LABEL "settings" NS...
	local label=$1 settings=$2
	shift 2
	CONC_LABELS+=("$label")
	CSET[$label]=$settings
	CNS[$label]=$*
	say ""
	say "== (2) concurrency [$label]: server $settings; N in $*; $SUBMIT submission; load $(load)"
	show "$FERRY transfer -r src:/c/tNN/ dst:/conc/$label-nN-rR/tNN/   # NN = 01..N, $([[ $SUBMIT == serial ]] && echo 'one after another' || echo 'all N at once (&)')"
	show "$FERRY task wait ID   # each in turn, then $FERRY task show ID -F json"
	conc_rows "$label" "$@"
	say "  load after: $(load)"
}
declare -A CSET CNS

# default settings first, on the server already running
# shellcheck disable=SC2086
[[ -n $DEFAULT_NS ]] && row_wanted concurrency && conc_phase "sqlite-default" "--tasks 16 --per-user 3 (defaults)" $DEFAULT_NS

# --- (3) database rows (SQLite) ----------------------------------------------
DBTAB="" DBNOTE=""
declare -A ROWS0 ROWS1
DB_ID=""
db_task() { # one task of DB_FILES files; sets DB_ID
	local id
	id=$("$FERRY" transfer -r src:/db/ dst:/db/ 2>>"$LOG/cli.log")
	DB_ID=$id
	"$FERRY" task wait "$id" >/dev/null 2>>"$LOG/cli.log" || fail "db task $id"
	local n
	n=$(find "$WORK/dst/db" -type f -size "${FILE_BYTES}c" | wc -l)
	[[ $n == "$DB_FILES" ]] || fail "db task: $n files arrived, want $DB_FILES"
	local f
	f=$(printf 'f%05d' $((DB_FILES / 2)))
	cmp -s "$WORK/src/db/$f" "$WORK/dst/db/$f" || fail "db task: $f differs"
	rm -rf "${WORK:?}/dst/db"
}
say ""
if row_wanted database; then
	if command -v sqlite3 >/dev/null; then
		DB=$SVC/ferry.db
		q() { sqlite3 -readonly "$DB" "$1"; }
		TABLES=$(q "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
		say "== (3) database rows, SQLite: one task of $DB_FILES × $FILE_BYTES B; load $(load)"
		show "sqlite3 -readonly $DB 'SELECT count(*) FROM TABLE'   # each table, before and after"
		show "$FERRY transfer -r src:/db/ dst:/db/; $FERRY task wait ID"
		for t in $TABLES; do ROWS0[$t]=$(q "SELECT count(*) FROM $t"); done
		sz0=$(q "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()")
		db_task
		id=$DB_ID
		for t in $TABLES; do ROWS1[$t]=$(q "SELECT count(*) FROM $t"); done
		sz1=$(q "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()")
		DBTAB="| table | rows before | rows after | added | per file |"$'\n'"|---|---:|---:|---:|---:|"$'\n'
		tot=0
		for t in $TABLES; do
			d=$((ROWS1[$t] - ROWS0[$t]))
			tot=$((tot + d))
			DBTAB+="| $t | ${ROWS0[$t]} | ${ROWS1[$t]} | $d | $(awk -v d="$d" -v n="$DB_FILES" 'BEGIN {printf "%.3f", d / n}') |"$'\n'
		done
		DBTAB+="| **total** | | | $tot | $(awk -v d="$tot" -v n="$DB_FILES" 'BEGIN {printf "%.3f", d / n}') |"
		DBNOTE="events of the task by code: $(q "SELECT group_concat(code || ' ' || n, ', ') FROM (SELECT code, count(*) n FROM events WHERE task_id = '$id' GROUP BY code ORDER BY min(seq))"); database grew $((sz1 - sz0)) B ($(awk -v d=$((sz1 - sz0)) -v n="$DB_FILES" 'BEGIN {printf "%.0f", d / n}') B per file; page_count × page_size)"
		say "$DBTAB"
		say "  $DBNOTE"
	else
		say "== (3) database rows, SQLite: skipped: no sqlite3 (apt-get install sqlite3)"
	fi
fi


# all N at once
stop_service
start_service "$max_n" 0
# shellcheck disable=SC2086
row_wanted concurrency && conc_phase "sqlite" "--tasks $max_n --per-user 0" $CONC_NS

# the engine alone, no service, one process: one task's directory, and all
# of them in one copy (the rate one engine reaches with this many files)
declare -A REF REFN REFCMD
if row_wanted concurrency; then
	say ""
	say "== (2) reference: the engine alone, ferry copy -r --verify-checksum (the tasks verify too), $RUNS each; load $(load)"
	for what in one all; do
		src=c/$(tname 1)/ REFN[$what]=$FILES
		[[ $what == all ]] && src=c/ REFN[$what]=$((max_src * FILES))
		cmd=("$FERRY" copy -q -r --verify-checksum "ftp://127.0.0.1:$P_SRC/$src" "ftp://127.0.0.1:$P_DST/ref/$what/")
		REFCMD[$what]="ferry copy -q -r --verify-checksum ftp://127.0.0.1:$P_SRC/$src ftp://127.0.0.1:$P_DST/ref/$what/"
		show "${cmd[*]}"
		for ((r = 1; r <= RUNS; r++)); do
			rm -rf "${WORK:?}/dst/ref"
			settle
			t0=$EPOCHREALTIME
			"${cmd[@]}" >>"$LOG/ref.log" 2>&1 || fail "ferry copy $src"
			t1=$EPOCHREALTIME
			got=$(find "$WORK/dst/ref/$what" -type f -size "${FILE_BYTES}c" | wc -l)
			[[ $got == "${REFN[$what]}" ]] || fail "ferry copy $src: $got files arrived, want ${REFN[$what]}"
			REF[$what]+="$(sub "$t1" "$t0")"$'\n'
			say "  $what run $r: $(sub "$t1" "$t0") s, $got files"
		done
		rm -rf "${WORK:?}/dst/ref"
	done
fi

# --- PostgreSQL --------------------------------------------------------------
PGTAB="" PGXACT=""
if [[ -n $PG_BIN ]] && row_wanted pg; then
	say ""
	say "== PostgreSQL: a throwaway cluster"
	PGDIR=$(mktemp -d /tmp/ferry-service-pg.XXXXXX)
	chown postgres: "$PGDIR"
	show "runuser -u postgres -- $PG_BIN/initdb -D $PGDIR/data -U postgres -A trust -E UTF8 --locale=C --no-sync"
	LC_ALL=C runuser -u postgres -- "$PG_BIN/initdb" -D "$PGDIR/data" -U postgres -A trust -E UTF8 --locale=C --no-sync >>"$LOG/initdb.log" 2>&1
	pgcmd=(runuser -u postgres -- "$PG_BIN/postgres" -D "$PGDIR/data" -k "$PGDIR" -p "$P_PG" -c listen_addresses=127.0.0.1
		-c max_connections=300 -F -c synchronous_commit=off -c full_page_writes=off)
	show "${pgcmd[*]}"
	LC_ALL=C setsid "${pgcmd[@]}" >>"$LOG/postgres.log" 2>&1 </dev/null &
	PG_PGID=$!
	wait_listen "$P_PG" "$PG_PGID"
	psqlq() { psql -X -q -At -h 127.0.0.1 -p "$P_PG" -U postgres -d "${2:-ferry}" -c "$1"; }
	for _ in $(seq 100); do psqlq "SELECT 1" postgres >/dev/null 2>&1 && break; sleep 0.1; done
	psqlq "CREATE DATABASE ferry" postgres
	DB_ARGS=(--db "postgres://postgres@127.0.0.1:$P_PG/ferry?sslmode=disable")
	PG_ON=1
	stop_service
	rm -rf "$SVC"
	setup_service "$max_n" 0
	# shellcheck disable=SC2086
	conc_phase "postgres" "--tasks $max_n --per-user 0" $PG_NS

	say ""
	say "== (3) database rows and row writes, PostgreSQL: one task of $DB_FILES × $FILE_BYTES B; load $(load)"
	show "psql -c 'SELECT relname, n_live_tup, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables'   # ferry server stopped: its backends flush their counts"
	pgstat() { psqlq "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables ORDER BY relname" | tr '|' ' '; }
	pgcount() { local t; for t in $(psqlq "SELECT relname FROM pg_stat_user_tables ORDER BY relname"); do echo "$t $(psqlq "SELECT count(*) FROM $t")"; done; }
	xacts() { psqlq "SELECT xact_commit || ' ' || xact_rollback FROM pg_stat_database WHERE datname = 'ferry'"; }
	stop_service
	sleep 0.5
	pgstat >"$TMP/pg0" && pgcount >"$TMP/pgc0"
	read -r xc0 xr0 <<<"$(xacts)" # last before the server starts: the psql backends above have flushed
	start_service "$max_n" 0
	db_task
	stop_service
	sleep 0.5
	read -r xc1 xr1 <<<"$(xacts)" # first after: counts the one before (1 commit) and the ferry server's
	pgstat >"$TMP/pg1" && pgcount >"$TMP/pgc1"
	PGXACT="transactions in database ferry (pg_stat_database): $((xc1 - xc0 - 1)) committed ($(awk -v d=$((xc1 - xc0 - 1)) -v n="$DB_FILES" 'BEGIN {printf "%.3f", d / n}') per file), $((xr1 - xr0)) rolled back"
	PGTAB="| table | rows added | inserts | updates | deletes | row writes | writes per file |"$'\n'"|---|---:|---:|---:|---:|---:|---:|"$'\n'
	PGTAB+=$(LC_ALL=C join "$TMP/pg0" "$TMP/pg1" | LC_ALL=C join - <(LC_ALL=C join "$TMP/pgc0" "$TMP/pgc1") | awk -v n="$DB_FILES" '{
		i = $5 - $2; u = $6 - $3; d = $7 - $4; a = $9 - $8; w = i + u + d
		ti += i; tu += u; td += d; ta += a; tw += w
		printf "| %s | %d | %d | %d | %d | %d | %.3f |\n", $1, a, i, u, d, w, w / n
	} END {printf "| **total** | %d | %d | %d | %d | %d | %.3f |", ta, ti, tu, td, tw, tw / n}')
	say "$PGTAB"
	say "  $PGXACT"
	say "  (includes one ferry server start and stop, its idle claims and the CLI's requests around the task)"
fi

# --- tables ------------------------------------------------------------------
say ""
say "== results"
say ""
if row_wanted dispatch; then
	say "(1) dispatch, server --tasks 16 --per-user 3, $DISPATCH_N consecutive 1-byte tasks, ms:"
	say ""
	say "| measure | median | p90 | min | max |"
	say "|---|---:|---:|---:|---:|"
	for c in "1 submit → wait exits (the goal's figure)" "2 ferry transfer process" "3 ferry task wait process" \
		"4 submit start → request_time (CLI start-up, POST)" "5 request_time → completion_time (the service)" "6 completion_time → wait exits (polling, CLI exit)"; do
		read -r m p lo hi _ <<<"$(col "${c%% *}" | stats)"
		say "| ${c#* } | $(ms <<<"$m") | $(ms <<<"$p") | $(ms <<<"$lo") | $(ms <<<"$hi") |"
	done
	say ""
	say "polls that saw the task unfinished, per wait: $(col 7 | sort -n | uniq -c | awk '{printf "%s%d× %d", (NR > 1 ? ", " : ""), $1, $2}')"
	say ""
	say "context, $CONTEXT_N each, ms ($SCP_NOTE):"
	say ""
	say "| command | median | p90 | min | max |"
	say "|---|---:|---:|---:|---:|"
	for name in "ferry scp" "ferry copy --verify-checksum" "ferry copy" "curl -T (FTP upload)" "ferry task show -F json"; do
		read -r m p lo hi _ <<<"$(printf '%s' "${CTX[$name]:-}" | awk NF | stats)"
		cmdline=${CTXCMD[$name]//@/N}
		cmdline=${cmdline//$FERRY/ferry}
		say "| \`${cmdline//$WORK/\$W}\` | $(ms <<<"$m") | $(ms <<<"$p") | $(ms <<<"$lo") | $(ms <<<"$hi") |"
	done
	dmed=$(col 1 | median)
	say ""
	say "goal (1): median $(ms <<<"$dmed") ms < 100 ms: $(awk -v m="$dmed" 'BEGIN {print (m < 0.1) ? "met" : "NOT MET"}')"
fi


say ""
say "(2) concurrency: $FILES × $FILE_BYTES B per task, median of $RUNS; files/s = N × $FILES / (first submit → last completion_time):"
say ""
say "| store | server | N | files | s (median) | files/s | vs N=8 | runs (s) | service span s | submit s | CPU s server / endpoints [/ postgres] | PG sessions opened |"
say "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"
declare -A RATE
for label in "${CONC_LABELS[@]}"; do
	for n in ${CNS[$label]}; do
		lines=${CONC[$label,$n]:-}
		[[ -n $lines ]] || continue
		m=$(awk 'NF {print $1}' <<<"$lines" | median)
		RATE[$label,$n]=$(awk -v n="$n" -v f="$FILES" -v m="$m" 'BEGIN {printf "%.0f", n * f / m}')
	done
done
for label in "${CONC_LABELS[@]}"; do
	for n in ${CNS[$label]}; do
		lines=${CONC[$label,$n]:-}
		[[ -n $lines ]] || { say "| ${label%%-*} | ${CSET[$label]} | $n | | FAILED | | | | | | | |"; continue; }
		m=$(awk 'NF {print $1}' <<<"$lines" | median)
		runs=$(awk 'NF {printf "%s%.2f", (NR > 1 ? ", " : ""), $1}' <<<"$lines")
		rel=""
		[[ -n ${RATE[$label,8]:-} && $n != 8 ]] && rel=$(awk -v a="${RATE[$label,$n]}" -v b="${RATE[$label,8]}" 'BEGIN {printf "%+.0f %%", (a / b - 1) * 100}')
		say "| ${label%%-*} | ${CSET[$label]} | $n | $((n * FILES)) | $(printf '%.3f' "$m") | ${RATE[$label,$n]} | $rel | $runs | $(awk 'NF {print $2}' <<<"$lines" | median | xargs printf '%.3f') | $(awk 'NF {print $3}' <<<"$lines" | median | xargs printf '%.3f') | $(awk 'NF {print $5}' <<<"$lines" | median) / $(awk 'NF {print $6}' <<<"$lines" | median)$(awk 'NF > 6 {print $7}' <<<"$lines" | median | sed '/^-$/d; s|^| / |') | $(awk 'NF > 6 {print $8}' <<<"$lines" | median | sed 's/^-$//') |"
	done
done
for what in one all; do
	lines=${REF[$what]:-}
	[[ -n $lines ]] || continue
	m=$(awk NF <<<"$lines" | median)
	say "| engine alone | \`${REFCMD[$what]}\` | 1 | ${REFN[$what]} | $(printf '%.3f' "$m") | $(awk -v n="${REFN[$what]}" -v m="$m" 'BEGIN {printf "%.0f", n / m}') | | $(awk 'NF {printf "%s%.2f", (NR > 1 ? ", " : ""), $1}' <<<"$lines") | | | | |"
done
say ""
for label in "${CONC_LABELS[@]}"; do
	if [[ -n ${RATE[$label,8]:-} && -n ${RATE[$label,64]:-} ]]; then
		say "goal (2) [$label, ${CSET[$label]}]: 8 → 64 tasks: $(awk -v a="${RATE[$label,64]}" -v b="${RATE[$label,8]}" 'BEGIN {d = (1 - a / b) * 100; printf "%.0f %% decline (%d → %d files/s): %s", d, b, a, (d <= 20) ? "met" : "NOT MET"}')"
	fi
done
say ""
[[ -n $DBTAB ]] && { say "(3) database rows per file, SQLite, one task of $DB_FILES files:"; say ""; say "$DBTAB"; say ""; say "$DBNOTE"; say ""; }
[[ -n $PGTAB ]] && { say "(3) PostgreSQL, one task of $DB_FILES files, rows and row writes (pg_stat_user_tables):"; say ""; say "$PGTAB"; say ""; say "$PGXACT"; say ""; }
say "load at the end: $(load)"
((NFAIL == 0)) || say "$NFAIL checks FAILED (see above)"
say "total time: $(($(date +%s) - T_START)) s"
((NFAIL == 0))
