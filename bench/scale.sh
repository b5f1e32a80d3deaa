#!/usr/bin/env bash
# scale.sh — a hundred million files in one task (issue 31): how long,
# how fast, how soon the first file lands and how much memory each process
# peaks at, for trees of millions of files, with the real CLI, servers and
# service on 127.0.0.1, same machine, same run.
#
#   bench/scale.sh                                  # 1 M real files; 10 M and 100 M synthetic; 5 M in one directory
#   QUICK=1 bench/scale.sh                          # smoke run, about a minute
#   N_REAL=200000 N_SYNTH=200000 bench/scale.sh
#
# (1) real files  N_REAL files of BYTES bytes, PER_DIR to a directory
#                 (d000/f000 ...; made with head -c N /dev/urandom | split,
#                 two directories at a time) in REAL_DIR, copied three ways,
#                 each into an empty directory beside it:
#                   cp -r SRC DST                      (the local limit)
#                   ferry copy -r ftp://SRC/ ftp://DST/ between two `ferry
#                     gridftp` servers (third party, default settings)
#                   globus-url-copy GUC_FLAGS between two GCT
#                     globus-gridftp-servers (third party)
#                 Each copy is checked: the number of files that arrived, and
#                 diff -r of the first and the last directory.
# (2) synthetic   for each N in N_SYNTH: a `ferry gridftp --root
#                 synthetic:files=N,size=BYTES,per-dir=PER_DIR` source (a
#                 generated tree, no disk) and a `--root sink:` destination
#                 (hashes and discards; see ferry gridftp --help):
#                   ferry copy -r ftp://SRC/ ftp://DST/out/
#                   the service (SERVICE=1): `ferry server` on SQLite with
#                     the two as endpoints, `ferry transfer -r src:/
#                     dst:/out/` (verified, the service's default), `ferry
#                     task wait`; meanwhile `ferry task show TASK -F json`
#                     every SHOW_EVERY s, timed (its latency while the task
#                     runs), and the database's size per file at the end.
#                 Each must report N files transferred, none failed.
#                 Then the same for FLAT files in one directory (per-dir=FLAT;
#                 0: not run), and, through the service, `ferry ls src:/` of
#                 that directory first, sorted and then with -U (unsorted,
#                 each page as the service gets it): the time to its first
#                 line and to its end (it must list FLAT lines).
# Measured for every row: wall time (the client's, or submission to the end
# of the wait), files per second, the time to the first file (real: the
# first file below the destination directory, polled every 20 ms; sink: the
# destination server's first finished transfer in its metrics, polled every
# 50 ms — a tar stream of many files counts once, when it ends) and the peak
# RSS (VmHWM) of every process: the client's from time(1) (%M), each server's
# from /proc/PID/status, sampled every 0.5 s (GCT forks one process per
# session: the largest of them); the service row's client is `ferry task
# wait`. Servers are started afresh for each row, so their peaks are the
# row's. Each row also shows the 1-minute load average at its end.
# Environment: QUICK ROWS (real, synthetic, flat: (1), (2) nested, (2) in one
#   directory) N_REAL N_SYNTH FLAT PER_DIR BYTES SERVICE COPY (0: no
#   ferry copy row for the synthetic trees) GCT (auto|0|1)
#   GUC_FLAGS RUN_TIMEOUT (s a run may take; 0: no limit) SHOW_EVERY SINK
#   REAL_DIR (about 8 KiB per file on tmpfs, twice: a copy is removed once
#   checked) PORT_BASE (6 ports)
#   FERRY KEEP_LOGS=1.
# Needs: go, curl, jq, ss, setsid, split, /usr/bin/time; GCT's
# globus-gridftp-server and globus-url-copy for its row.
set -Eeuo pipefail
shopt -s inherit_errexit
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
selected_rows real synthetic flat >/dev/null # a misspelt row fails here

QUICK=${QUICK:-0}
if [[ $QUICK == 1 ]]; then
	N_REAL=${N_REAL:-20000}
	N_SYNTH=${N_SYNTH-200000}
	FLAT=${FLAT:-20000}
else
	N_REAL=${N_REAL:-1000000}
	N_SYNTH=${N_SYNTH-10000000 100000000}
	FLAT=${FLAT:-5000000}
fi
PER_DIR=${PER_DIR:-1000}
BYTES=${BYTES:-10}
SERVICE=${SERVICE:-1}
COPY=${COPY:-1}
GCT=${GCT:-auto}
GUC_FLAGS=${GUC_FLAGS:--fast -cc 8 -pp -r}
RUN_TIMEOUT=${RUN_TIMEOUT:-0}
SHOW_EVERY=${SHOW_EVERY:-1}
SINK=${SINK:-sink:} # the destination's root: e.g. sink:remember=262144 for more files in flight
REAL_DIR=${REAL_DIR:-/dev/shm}
PORT_BASE=${PORT_BASE:-29891} # below the ephemeral range
KEEP_LOGS=${KEEP_LOGS:-0}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$REAL_DIR/ferry-scale.$$ # the real trees
TMP=$(mktemp -d /tmp/ferry-scale.XXXXXX) # binary, logs, the service's data, CLI config
LOG=$TMP/logs
PHASE=scale
mkdir -p "$LOG" "$TMP/config"
P_SRC=$PORT_BASE P_DST=$((PORT_BASE + 1)) P_MET=$((PORT_BASE + 2)) P_API=$((PORT_BASE + 3))
P_GSRC=$((PORT_BASE + 4)) P_GDST=$((PORT_BASE + 5))
SAMPLER=""

scale_cleanup() {
	local rc=$?
	[[ -z $SAMPLER ]] || kill "$SAMPLER" 2>/dev/null || true
	(exit "$rc") # cleanup reports the script's status
	cleanup
}
trap scale_cleanup EXIT
trap 'exit 130' INT TERM

need go curl jq ss setsid split /usr/bin/time
if [[ $GCT != 0 ]]; then
	if command -v globus-gridftp-server >/dev/null && command -v globus-url-copy >/dev/null; then
		GCT=1
	elif [[ $GCT == 1 ]]; then
		need globus-gridftp-server globus-url-copy
	else
		GCT=0
	fi
fi
ports_free "" "$P_SRC" "$P_DST" "$P_MET" "$P_API" "$P_GSRC" "$P_GDST"
ulimit -n "$(ulimit -Hn)"

say "== machine"
machine_facts
say "runs:    N_REAL=$N_REAL N_SYNTH=\"$N_SYNTH\" FLAT=$FLAT PER_DIR=$PER_DIR BYTES=$BYTES SERVICE=$SERVICE COPY=$COPY GCT=$GCT GUC_FLAGS=\"$GUC_FLAGS\" RUN_TIMEOUT=$RUN_TIMEOUT REAL_DIR=$REAL_DIR SINK=$SINK"
say "== build"
build_ferry

# --- measuring ---------------------------------------------------------------

# hwm PID: the peak RSS (VmHWM, kB) of process PID now, 0 when it is gone.
hwm() {
	local k v _
	{
		while read -r k v _; do
			[[ $k == VmHWM: ]] && { printf '%s' "$v"; return; }
		done <"/proc/$1/status"
	} 2>/dev/null || true
	printf 0
}

# sample OUT PGID...: until killed, every 0.5 s, the largest VmHWM (kB) of
# any process in each process group, the most seen so far, to OUT as
# "PGID kB" lines. (A process's VmHWM only grows; one that ends between two
# samples loses what it reached since the last.)
sample() {
	local out=$1 pg pid v
	shift
	declare -A peak
	while :; do
		for pg; do
			for pid in $(pgrep -g "$pg" || true); do
				v=$(hwm "$pid")
				((v > ${peak[$pg]:-0})) && peak[$pg]=$v
			done
		done
		for pg; do printf '%s %s\n' "$pg" "${peak[$pg]:-0}"; done >"$out.new"
		mv "$out.new" "$out"
		sleep 0.5
	done
}
# watch PGID...: start sampling the groups (into $TMP/peaks).
watch() {
	rm -f "$TMP/peaks"
	sample "$TMP/peaks" "$@" &
	SAMPLER=$!
}
# peak PGID: MiB, once the sampler is stopped by unwatch.
unwatch() { kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null || true; SAMPLER=""; }
peak() {
	local pg=$1 kb
	kb=$(awk -v p="$pg" '$1 == p {print $2}' "$TMP/peaks" 2>/dev/null)
	# a ferry process is one process: its VmHWM now is exact
	((${kb:-0} < $(hwm "$pg"))) && kb=$(hwm "$pg")
	awk -v k="${kb:-0}" 'BEGIN {printf "%.0f", k / 1024}'
}

# first_file DIR T0 OUT: wait for the first file below DIR; write the
# seconds since T0 to OUT.
first_file() {
	while [[ -z $(find "$1" -type f -print -quit 2>/dev/null) ]]; do sleep 0.02; done
	since "$2" >"$3"
}
# first_transfer PORT T0 OUT: wait until the server with metrics on PORT
# has finished a transfer; write the seconds since T0 to OUT.
first_transfer() {
	local n
	while :; do
		n=$(curl -fsS "http://127.0.0.1:$1/metrics" 2>/dev/null | awk '/^ferry_gridftp_transfers_total\{outcome="succeeded"\}/ {print $2}')
		[[ -n $n && $n != 0 ]] && break
		sleep 0.05
	done
	since "$2" >"$3"
}

# timed OUT CMD...: run CMD (under RUN_TIMEOUT), output to $LOG/OUT.out;
# sets WALL (s), CLIENT_MB (its peak RSS) and RC.
timed() {
	local out=$1 t0
	shift
	local cmd=("$@")
	((RUN_TIMEOUT > 0)) && cmd=(timeout "$RUN_TIMEOUT" "${cmd[@]}")
	show "${cmd[*]}"
	t0=$(now)
	RC=0
	/usr/bin/time -f '%M' -o "$TMP/time" "${cmd[@]}" >"$LOG/$out.out" 2>&1 || RC=$?
	WALL=$(since "$t0")
	CLIENT_MB=$(awk 'END {printf "%.0f", $1 / 1024}' "$TMP/time")
}

TABLE=()
# load: the 1-minute load average now (the machine is shared: say how much).
load() { cut -d" " -f1 /proc/loadavg; }
# row TREE TOOL FILES WALL TTFB CLIENT SRC DST SERVICE DB NOTE: one line of the table.
row() {
	local rate
	rate=$(awk -v n="$3" -v s="$4" 'BEGIN {printf "%.0f", n / s}')
	TABLE+=("| $1 | $2 | $3 | $4 | $rate | $5 | $6 | $7 | $8 | $9 | ${10} | $(load) | ${11} |")
	say "  => $2: $4 s, $rate files/s, first file ${5} s; peak RSS MiB: client $6, source $7, destination $8, service $9; db ${10} B/file; load $(load) ${11}"
}
declare -A RATE # RATE[tool]: files/s of the real rows, for the ratios

# --- (1) real files ------------------------------------------------------------
# count DIR: files below DIR.
count() { find "$1" -type f | wc -l; }
# same SRC DST: diff -r of the first and the last directory.
same() {
	local first last
	first=$(printf 'd%03d' 0) last=$(printf 'd%03d' $((NDIRS - 1)))
	diff -r "$1/$first" "$2/$first" >&2 && diff -r "$1/$last" "$2/$last" >&2
}
# check TOOL DST: the copy arrived whole; else the row fails.
check() {
	local got
	got=$(count "$2")
	if [[ $RC != 0 || $got != "$N_REAL" ]] || ! same "$WORK/src" "$2"; then
		say "  FAILED $1: exit $RC, $got of $N_REAL files; see $LOG" >&2
		KEEP_LOGS=1
		return 1
	fi
}
# real_row TOOL DST CMD...: one timed copy of the real tree into DST.
real_row() {
	local tool=$1 dst=$2 t0
	shift 2
	mkdir -p -m 0777 "$dst"
	t0=$(now)
	first_file "$dst" "$t0" "$TMP/ttfb" &
	local poller=$!
	timed "real-$tool" "$@"
	kill "$poller" 2>/dev/null || true
	wait "$poller" 2>/dev/null || true
	local ttfb=-
	[[ -s $TMP/ttfb ]] && ttfb=$(<"$TMP/ttfb")
	rm -f "$TMP/ttfb"
	if check "$tool" "$dst"; then
		RATE[$tool]=$(awk -v n="$N_REAL" -v s="$WALL" 'BEGIN {print n / s}')
		ROW_OK=1
		rm -rf "$dst" # checked: its memory (tmpfs) for the next
	else
		ROW_OK=0
	fi
	TTFB=$ttfb
}

if ((N_REAL > 0)) && row_wanted real; then
	NDIRS=$(((N_REAL + PER_DIR - 1) / PER_DIR))
	WIDTH=${#PER_DIR} # split's suffix: f000 .. f999 for 1000
	((PER_DIR == 10 ** (WIDTH - 1))) && WIDTH=$((WIDTH - 1))
	((WIDTH < 1)) && WIDTH=1
	say "== (1) $N_REAL real files of $BYTES bytes, $PER_DIR to a directory, in $WORK/src"
	mkdir -p "$WORK/src"
	show "head -c \$((PER_DIR * BYTES)) /dev/urandom | split -b $BYTES -a $WIDTH -d - $WORK/src/dNNN/f   # NNN = 000..$((NDIRS - 1)), two at a time"
	t0=$(now)
	seq 0 $((NDIRS - 1)) | xargs -P 2 -I{} bash -c '
		d=$(printf "%s/d%03d" "$1" "$2"); n=$3
		(( ($2 + 1) * n > $5 )) && n=$(( $5 - $2 * n ))
		mkdir "$d" && head -c $((n * $4)) /dev/urandom | split -b "$4" -a "$6" -d - "$d/f"' _ "$WORK/src" {} "$PER_DIR" "$BYTES" "$N_REAL" "$WIDTH"
	got=$(count "$WORK/src")
	[[ $got == "$N_REAL" ]] || { say "made $got files, want $N_REAL" >&2; exit 1; }
	say "  made in $(since "$t0") s"

	say "== (1) cp -r"
	real_row "cp -r" "$WORK/dst-cp" cp -r "$WORK/src/." "$WORK/dst-cp/"
	((ROW_OK)) && row "$N_REAL real" "cp -r" "$N_REAL" "$WALL" "$TTFB" "$CLIENT_MB" - - - - "(the limit)"
	rm -rf "$WORK/dst-cp"

	say "== (1) ferry copy"
	start_bg fsrc "" "$P_SRC" "$LOG/real-fsrc.log" "$FERRY" gridftp --root "$WORK/src" --listen "127.0.0.1:$P_SRC" --anonymous --log-level warn
	mkdir -m 0777 "$WORK/dst-ferry"
	start_bg fdst "" "$P_DST" "$LOG/real-fdst.log" "$FERRY" gridftp --root "$WORK/dst-ferry" --listen "127.0.0.1:$P_DST" --anonymous --anonymous-write --log-level warn
	watch "$PID_fsrc" "$PID_fdst"
	real_row ferry "$WORK/dst-ferry" "$FERRY" copy -r "ftp://127.0.0.1:$P_SRC/" "ftp://127.0.0.1:$P_DST/"
	unwatch
	grep -E '^[0-9]+ files?:|^settings:' "$LOG/real-ferry.out" | sed 's/^/  /' || true
	((ROW_OK)) && row "$N_REAL real" "ferry copy" "$N_REAL" "$WALL" "$TTFB" "$CLIENT_MB" "$(peak "$PID_fsrc")" "$(peak "$PID_fdst")" - - \
		"$(awk -v f="${RATE[ferry]}" -v c="${RATE[cp -r]:-0}" 'BEGIN {if (c) printf "%.2f× cp -r", f / c}')"
	stop_servers
	rm -rf "$WORK/dst-ferry"

	if [[ $GCT == 1 ]]; then
		say "== (1) globus-url-copy to GCT"
		gct_server gsrc "" 127.0.0.1 "$P_GSRC" "$WORK"
		gct_server gdst "" 127.0.0.1 "$P_GDST" "$WORK"
		watch "$PID_gsrc" "$PID_gdst"
		# shellcheck disable=SC2086 # GUC_FLAGS: words on purpose
		real_row guc "$WORK/dst-gct" globus-url-copy $GUC_FLAGS "ftp://127.0.0.1:$P_GSRC$WORK/src/" "ftp://127.0.0.1:$P_GDST$WORK/dst-gct/"
		unwatch
		((ROW_OK)) && row "$N_REAL real" "globus-url-copy $GUC_FLAGS (GCT)" "$N_REAL" "$WALL" "$TTFB" "$CLIENT_MB" "$(peak "$PID_gsrc")" "$(peak "$PID_gdst")" - - \
			"$(awk -v f="${RATE[ferry]:-0}" -v g="${RATE[guc]:-0}" 'BEGIN {if (f && g) printf "ferry copy: %.2f× this", f / g}')"
		stop_servers
		rm -rf "$WORK/dst-gct"
	fi
	show "rm -rf $WORK/src"
	rm -rf "$WORK/src"
fi

# --- (2) synthetic files ---------------------------------------------------------
# endpoints N PER: the synthetic source of N files, PER to a directory, and
# the sink, with metrics on P_MET.
endpoints() {
	start_bg fsrc "" "$P_SRC" "$LOG/synth-$1-fsrc.log" "$FERRY" gridftp --root "synthetic:files=$1,size=$BYTES,per-dir=$2" \
		--listen "127.0.0.1:$P_SRC" --anonymous --log-level warn
	start_bg fdst "" "$P_DST" "$LOG/synth-$1-fdst.log" "$FERRY" gridftp --root "$SINK" --listen "127.0.0.1:$P_DST" \
		--anonymous --anonymous-write --metrics-listen "127.0.0.1:$P_MET" --log-level warn
	wait_listen "$P_MET" "$PID_fdst"
}

# service N: a fresh `ferry server` on SQLite in SVC, its user logged in,
# the endpoints src and dst.
service() {
	SVC=$TMP/svc-$1
	rm -rf "$SVC"
	show "echo PASSWORD | $FERRY user add bench --data $SVC"
	echo "$PASSWORD" | "$FERRY" user add bench --data "$SVC" >>"$LOG/cli.log" 2>&1
	start_bg server "" "$P_API" "$LOG/synth-$1-server.log" "$FERRY" server --data "$SVC" --listen "127.0.0.1:$P_API" --log-level warn
	echo "$PASSWORD" | "$FERRY" login --username bench >>"$LOG/cli.log" 2>&1
	show "$FERRY endpoint add src --server ftp://127.0.0.1:$P_SRC; $FERRY endpoint add dst --server ftp://127.0.0.1:$P_DST"
	"$FERRY" endpoint add src --server "ftp://127.0.0.1:$P_SRC" >>"$LOG/cli.log"
	"$FERRY" endpoint add dst --server "ftp://127.0.0.1:$P_DST" >>"$LOG/cli.log"
}

# end_row: stop the first-transfer poller and the RSS watch of a row; set
# ttfb (s, "-" if none came).
end_row() {
	kill "$poller" 2>/dev/null || true
	wait "$poller" 2>/dev/null || true
	unwatch
	ttfb=-
	[[ -s $TMP/ttfb ]] && ttfb=$(<"$TMP/ttfb")
	rm -f "$TMP/ttfb"
}

# web_page ID: the API calls the web app's task page makes at each refresh
# (web/assets/activity.js: the task, its events, the first page of its
# transferred and of its failed files), with the CLI's token.
web_page() {
	local tok base=$FERRY_URL/api/v0.10/task/$1
	tok=$(jq -r .token "$XDG_CONFIG_HOME/ferry/token") || return 1
	for q in "" "/event_list?offset=0&limit=1000" "/successful_transfers?limit=50" "/failed_transfers?limit=50"; do
		curl -fsS -o /dev/null -H "Authorization: Bearer $tok" "$base$q" 2>>"$LOG/cli.log" || return 1
	done
}

# spread: the median, the largest and the count of the numbers on stdin.
spread() {
	sort -g | awk '{v[NR] = $1} END {if (!NR) {print "- - 0"; exit}; printf "%.3f %.3f %d\n", v[int((NR + 1) / 2)], v[NR], NR}'
}

# summary_ok N OUT: the ferry copy summary says N transferred, none failed.
summary_ok() { grep -Eq "^$1 files?: $1 transferred, 0 skipped, 0 failed" "$LOG/$2.out"; }

export XDG_CONFIG_HOME=$TMP/config FERRY_URL=http://127.0.0.1:$P_API
unset FERRY_TOKEN
PASSWORD=bench-$RANDOM-$RANDOM

# The trees: "N PER TREE" — N_SYNTH nested, then FLAT in one directory.
TREES=()
row_wanted synthetic && for n in $N_SYNTH; do TREES+=("$n $PER_DIR $n synthetic"); done
((FLAT > 0)) && row_wanted flat && TREES+=("$FLAT $FLAT $FLAT synthetic, one directory")
for tree in "${TREES[@]}"; do
	read -r n per label <<<"$tree"
	if [[ $COPY == 1 ]]; then
		say "== (2) $label: ferry copy into a sink"
		endpoints "$n" "$per"
		watch "$PID_fsrc" "$PID_fdst"
		t0=$(now)
		first_transfer "$P_MET" "$t0" "$TMP/ttfb" &
		poller=$!
		timed "synth-$n-copy" "$FERRY" copy -r "ftp://127.0.0.1:$P_SRC/" "ftp://127.0.0.1:$P_DST/out/"
		end_row
		grep -E '^[0-9]+ files?:|^settings:' "$LOG/synth-$n-copy.out" | sed 's/^/  /' || true
		if [[ $RC == 0 ]] && summary_ok "$n" "synth-$n-copy"; then
			row "$label" "ferry copy → sink" "$n" "$WALL" "$ttfb" "$CLIENT_MB" "$(peak "$PID_fsrc")" "$(peak "$PID_fdst")" - - ""
		else
			say "  FAILED: exit $RC; see $LOG/synth-$n-copy.out" >&2
			KEEP_LOGS=1
		fi
		stop_servers
	fi

	[[ $SERVICE == 1 ]] || continue
	# ferry ls sorted (the default), then unsorted (-U: each page as the
	# service gets it).
	for lsflag in '' -U; do
		((per == n)) || break
		say "== (2) $label: ferry ls $lsflag of it through the service"
		endpoints "$n" "$per"
		service "$n-ls$lsflag"
		watch "$PID_fsrc" "$PID_server"
		show "$FERRY ls $lsflag src:/ -F unix | wc -l   # the time to its first line, and to its end"
		t0=$(now)
		RC=0
		ls_cmd=("$FERRY" ls ${lsflag:+"$lsflag"} src:/ -F unix)
		((RUN_TIMEOUT > 0)) && ls_cmd=(timeout "$RUN_TIMEOUT" "${ls_cmd[@]}")
		/usr/bin/time -f '%M' -o "$TMP/time" "${ls_cmd[@]}" 2>>"$LOG/cli.log" | {
			if IFS= read -r _; then since "$t0" >"$TMP/first"; fi
			wc -l >"$TMP/lines"
		} || RC=$?
		wall=$(since "$t0")
		unwatch
		CLIENT_MB=$(awk 'END {printf "%.0f", $1 / 1024}' "$TMP/time")
		lines=$(<"$TMP/lines")
		first=-
		[[ -s $TMP/first ]] && first=$(<"$TMP/first") lines=$((lines + 1))
		say "  $lines lines, the first after $first s"
		if [[ $RC == 0 && $lines == "$n" ]]; then
			row "$label" "service: ferry ls${lsflag:+ $lsflag}" "$n" "$wall" "$first" "$CLIENT_MB" "$(peak "$PID_fsrc")" - "$(peak "$PID_server")" - "first line of the listing"
		else
			say "  FAILED: exit $RC, $lines lines for $n files; see $LOG" >&2
			KEEP_LOGS=1
		fi
		stop_servers
		rm -rf "$SVC" "$TMP/first" "$TMP/lines"
	done

	say "== (2) $label: through the service (SQLite)"
	endpoints "$n" "$per"
	service "$n"
	watch "$PID_fsrc" "$PID_fdst" "$PID_server"
	show "$FERRY transfer -r src:/ dst:/out/; $FERRY task wait -H TASK; every $SHOW_EVERY s meanwhile: $FERRY task show TASK -F json"
	t0=$(now)
	first_transfer "$P_MET" "$t0" "$TMP/ttfb" &
	poller=$!
	RC=0
	id=$("$FERRY" transfer -r src:/ dst:/out/ 2>>"$LOG/cli.log") || RC=$?
	: >"$TMP/shows"
	: >"$TMP/pages"
	if [[ $RC == 0 ]]; then
		# task show while it runs: "latency status files_transferred"
		(
			while :; do
				s0=$(now)
				j=$("$FERRY" task show "$id" -F json 2>>"$LOG/cli.log") || j='{}'
				st=$(jq -r '.status // "?"' <<<"$j")
				printf '%s %s %s\n' "$(since "$s0")" "$st" "$(jq -r '.files_transferred // 0' <<<"$j")" >>"$TMP/shows"
				s0=$(now)
				web_page "$id" && printf '%s\n' "$(since "$s0")" >>"$TMP/pages"
				[[ $st == SUCCEEDED || $st == FAILED ]] && break
				sleep "$SHOW_EVERY"
			done
		) &
		shower=$!
		wait_cmd=("$FERRY" task wait -H "$id")
		((RUN_TIMEOUT > 0)) && wait_cmd+=(--timeout "$RUN_TIMEOUT")
		/usr/bin/time -f '%M' -o "$TMP/time" "${wait_cmd[@]}" >"$LOG/synth-$n-wait.out" 2>"$TMP/dots" || RC=$?
		CLIENT_MB=$(awk 'END {printf "%.0f", $1 / 1024}' "$TMP/time")
		wall=$(since "$t0")
		kill "$shower" 2>/dev/null || true
		wait "$shower" 2>/dev/null || true
	fi
	end_row
	j=$("$FERRY" task show "$id" -F json 2>>"$LOG/cli.log" || echo '{}')
	st=$(jq -r '.status // "?"' <<<"$j") done_files=$(jq -r '.files_transferred // 0' <<<"$j")
	read -r show_med show_max show_n < <(awk '{print $1}' "$TMP/shows" | spread)
	read -r page_med page_max page_n < <(spread <"$TMP/pages")
	say "  task $id: $st, $done_files files transferred; while it ran: ferry task show median $show_med s, max $show_max s ($show_n calls); the web task page's calls median $page_med s, max $page_max s ($page_n refreshes)"
	svc_mb=$(peak "$PID_server") src_mb=$(peak "$PID_fsrc") dst_mb=$(peak "$PID_fdst")
	stop_servers
	db=$(du -cb "$SVC"/ferry.db* | tail -1 | cut -f1)
	if [[ $RC == 0 && $st == SUCCEEDED && $done_files == "$n" ]]; then
		row "$label" "service: transfer + task wait" "$n" "$wall" "$ttfb" "$CLIENT_MB" "$src_mb" "$dst_mb" "$svc_mb" \
			"$(awk -v b="$db" -v n="$n" 'BEGIN {printf "%.0f", b / n}')" "task show: median $show_med s, max $show_max s; web task page: median $page_med s, max $page_max s"
	else
		say "  FAILED: exit $RC, task $st with $done_files of $n files; see $LOG" >&2
		KEEP_LOGS=1
	fi
	rm -rf "$SVC"
done

say ""
say "| tree | tool | files | wall s | files/s | first file s | client MiB | source server MiB | destination server MiB | service MiB | database B/file | load | |"
say "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for r in "${TABLE[@]}"; do say "$r"; done
