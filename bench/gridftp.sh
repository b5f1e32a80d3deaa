#!/usr/bin/env bash
# gridftp.sh — ferry's GridFTP endpoint server against GCT's globus-gridftp-server,
# same machine, same run, files in /dev/shm, third-party transfers driven by
# globus-url-copy; then the memory cost of idle logged-in control sessions.
#
#   bench/gridftp.sh                 # everything, 3 timed runs per row
#   RUNS=5 ROWS="stream p4" bench/gridftp.sh
#
# Rows (ROWS, default all): stream  one BIG_MIB file, stream mode
#                           p4      the same file, -p 4 (MODE E, 4 streams)
#                           small   SMALL_FILES files of SMALL_BYTES, -fast -pp -cc 4 -r
#                           idle    IDLE_SESSIONS idle sessions on one ferry server,
#                                   GCT_IDLE_SESSIONS on one GCT server
#                           limits  iperf3 on loopback (1 and 4 streams; skipped if
#                                   iperf3 is missing), cp and cp -r of the same data
# Each transfer row runs once untimed (warm-up, WARMUP=0 to skip), then RUNS
# times for each server kind, alternating which kind goes first; the median
# is reported. Every copy is verified (cmp, or file count and diff -r).
# Environment: RUNS BIG_MIB SMALL_FILES SMALL_BYTES IDLE_SESSIONS
#   GCT_IDLE_SESSIONS PORT_BASE (7 ports from it) FERRY (a prebuilt ferry
#   binary) KEEP_LOGS=1 WARMUP.
# Needs: go, globus-gridftp-server, globus-url-copy, root (GCT serves as
# user nobody). Everything listens on 127.0.0.1 only.
set -Eeuo pipefail
shopt -s inherit_errexit
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${RUNS:-3}
WARMUP=${WARMUP:-1}
BIG_MIB=${BIG_MIB:-2048}
SMALL_FILES=${SMALL_FILES:-5000}
SMALL_BYTES=${SMALL_BYTES:-51200}
IDLE_SESSIONS=${IDLE_SESSIONS:-2000}
GCT_IDLE_SESSIONS=${GCT_IDLE_SESSIONS:-100}
PORT_BASE=${PORT_BASE:-29811} # below the ephemeral range, so no data connection holds one
ROWS=$(selected_rows stream p4 small idle limits)
KEEP_LOGS=${KEEP_LOGS:-0}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=/dev/shm/ferry-bench.$$ # data: one root per server
TMP=$(mktemp -d /tmp/ferry-bench.XXXXXX) # binaries, logs
LOG=$TMP/logs
mkdir -p "$LOG"
HZ=$(getconf CLK_TCK)
PGIDS=() # process groups of the servers we started

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	for pg in "${PGIDS[@]}"; do
		kill -TERM -- "-$pg" 2>/dev/null || true
	done
	sleep 0.5
	for pg in "${PGIDS[@]}"; do
		kill -KILL -- "-$pg" 2>/dev/null || true
	done
	rm -rf "$WORK"
	report_logs "$rc"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM


need go globus-gridftp-server globus-url-copy cmp diff ss setsid
[[ $(id -u) == 0 ]] || { say "run as root (GCT serves anonymous users as nobody)" >&2; exit 1; }
ulimit -n "$(ulimit -Hn)" # idle sessions: one fd per session on each side
[[ $(ulimit -n) == unlimited || $(ulimit -n) -ge $((IDLE_SESSIONS + 200)) ]] ||
	{ say "ulimit -n $(ulimit -n) is too low for $IDLE_SESSIONS sessions" >&2; exit 1; }

P_GSRC=$PORT_BASE P_GDST=$((PORT_BASE + 1)) P_FSRC=$((PORT_BASE + 2)) P_FDST=$((PORT_BASE + 3))
P_FIDLE=$((PORT_BASE + 4)) P_GIDLE=$((PORT_BASE + 5)) P_IPERF=$((PORT_BASE + 6))
for p in $P_GSRC $P_GDST $P_FSRC $P_FDST $P_FIDLE $P_GIDLE $P_IPERF; do
	if [[ -n $(ss -Htan exclude time-wait "sport = :$p") ]]; then
		say "port $p is in use; set PORT_BASE" >&2
		exit 1
	fi
done

# --- machine -----------------------------------------------------------------
say "== machine"
machine_facts
say "GCT:     $(globus-gridftp-server -version 2>&1 | head -1); globus-url-copy $(globus-url-copy -version 2>&1 | awk '{print $2}')"

# --- build -------------------------------------------------------------------
say "== build"
FERRY_NOTE=""
if [[ -n ${FERRY:-} ]]; then
	say "using FERRY=$FERRY"
elif (cd "$REPO" && show "go build -o $TMP/ferry ./cmd/ferry" && go build -o "$TMP/ferry" ./cmd/ferry 2>"$LOG/build.log"); then
	FERRY=$TMP/ferry
else
	# cmd/ferry can be mid-edit while the server packages build: wrap the
	# server in a throwaway main with the same flags.
	say "cmd/ferry does not build (see below); using a minimal main over ferry/gridftp/server"
	sed 's/^/  /' "$LOG/build.log"
	FERRY_NOTE=" (stand-in main: cmd/ferry did not build)"
	mkdir -p "$TMP/shim"
	cat >"$TMP/shim/main.go" <<'EOF'
// Command ferry is a stand-in for cmd/ferry's "gridftp" subcommand.
package main

import (
	"flag"
	"log/slog"
	"net"
	"os"

	"ferry/gridftp/server"
	"ferry/storage/posix"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "gridftp" {
		os.Exit(2)
	}
	fl := flag.NewFlagSet("gridftp", flag.ExitOnError)
	root := fl.String("root", "", "directory served as /")
	listen := fl.String("listen", "127.0.0.1:2811", "control address")
	anonymous := fl.Bool("anonymous", false, "allow anonymous logins")
	level := fl.String("log-level", "info", "log level")
	fl.Parse(os.Args[2:])
	var l slog.Level
	if err := l.UnmarshalText([]byte(*level)); err != nil {
		panic(err)
	}
	fs, err := posix.New(*root)
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		panic(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
	panic((&server.Server{FS: fs, Anonymous: *anonymous, Logger: log}).Serve(ln))
}
EOF
	printf 'module ferrybench\n\ngo 1.26\n\nrequire ferry v0.0.0\n\nreplace ferry => %s\n' "$REPO" >"$TMP/shim/go.mod"
	cp "$REPO/go.sum" "$TMP/shim/"
	(cd "$TMP/shim" && go mod tidy >/dev/null 2>&1 && go build -o "$TMP/ferry" .)
	FERRY=$TMP/ferry
fi
(cd "$REPO" && show "go build -o $TMP/idle ./bench/idle" && go build -o "$TMP/idle" ./bench/idle)

# --- data --------------------------------------------------------------------
say "== data in $WORK"
mkdir -p "$WORK"/{gct-src,gct-dst,ferry-src,ferry-dst,idle}
chmod 0755 "$WORK"
chmod 0777 "$WORK"/*
BIG_BYTES=$((BIG_MIB * 1048576))
if [[ " $ROWS " == *" stream "* || " $ROWS " == *" p4 "* || " $ROWS " == *" limits "* ]]; then
	show "head -c $BIG_BYTES /dev/urandom > $WORK/gct-src/big.bin"
	head -c "$BIG_BYTES" /dev/urandom >"$WORK/gct-src/big.bin"
	chmod 0666 "$WORK/gct-src/big.bin"
	ln "$WORK/gct-src/big.bin" "$WORK/ferry-src/big.bin" # one inode, two roots
fi
if [[ " $ROWS " == *" small "* || " $ROWS " == *" limits "* ]]; then
	mkdir -m 0777 "$WORK/gct-src/small"
	show "head -c $((SMALL_FILES * SMALL_BYTES)) /dev/urandom | split -b $SMALL_BYTES -a 5 -d - $WORK/gct-src/small/f"
	head -c $((SMALL_FILES * SMALL_BYTES)) /dev/urandom | split -b "$SMALL_BYTES" -a 5 -d - "$WORK/gct-src/small/f"
	chmod 0666 "$WORK"/gct-src/small/*
	cp -al "$WORK/gct-src/small" "$WORK/ferry-src/small"
	n=$(find "$WORK/ferry-src/small" -type f | wc -l)
	[[ $n == "$SMALL_FILES" ]] || { say "made $n files, want $SMALL_FILES" >&2; exit 1; }
fi

# --- servers -----------------------------------------------------------------

# GCT stays a foreground child without -S (detach) and forks one process per
# connection (-daemon, the default and how it is deployed); each server gets
# its own process group so that cleanup ends the forked sessions too.
start_gct() { # name port home
	local cmd=(globus-gridftp-server -aa -anonymous-user nobody -p "$2" -control-interface 127.0.0.1
		-data-interface 127.0.0.1 -home-dir "$3" -d ERROR -l "$LOG/$1.log")
	show "${cmd[*]}"
	setsid "${cmd[@]}" >"$LOG/$1.out" 2>&1 </dev/null &
	local pid=$!
	PGIDS+=("$pid")
	wait_listen "$2" "$pid"
	eval "PID_$1=$pid"
}

start_ferry() { # name port root
	local cmd=("$FERRY" gridftp --root "$3" --listen "127.0.0.1:$2" --anonymous --anonymous-write --max-sessions-per-address 0 --log-level warn)
	show "${cmd[*]}"
	setsid "${cmd[@]}" >"$LOG/$1.log" 2>&1 </dev/null &
	local pid=$!
	PGIDS+=("$pid")
	wait_listen "$2" "$pid"
	eval "PID_$1=$pid"
}

say "== servers$FERRY_NOTE"
start_gct gsrc "$P_GSRC" "$WORK/gct-src"
start_gct gdst "$P_GDST" "$WORK/gct-dst"
start_ferry fsrc "$P_FSRC" "$WORK/ferry-src"
start_ferry fdst "$P_FDST" "$WORK/ferry-dst"
if [[ " $ROWS " == *" idle "* ]]; then # fresh servers, used only by the idle row
	start_ferry fidle "$P_FIDLE" "$WORK/idle"
	start_gct gidle "$P_GIDLE" "$WORK/idle"
fi

# --- measuring ---------------------------------------------------------------
# cpu_ticks PID: user+system time of the process and of its reaped children
# (GCT's per-connection processes), in clock ticks.
cpu_ticks() { awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat"; }

median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

URL_GSRC=ftp://127.0.0.1:$P_GSRC$WORK/gct-src URL_GDST=ftp://127.0.0.1:$P_GDST$WORK/gct-dst
URL_FSRC=ftp://127.0.0.1:$P_FSRC URL_FDST=ftp://127.0.0.1:$P_FDST

# row_args ROW KIND: the globus-url-copy arguments of one row.
row_args() {
	local src dst
	if [[ $2 == gct ]]; then src=$URL_GSRC dst=$URL_GDST; else src=$URL_FSRC dst=$URL_FDST; fi
	case $1 in
	stream) echo "$src/big.bin $dst/big.bin" ;;
	p4) echo "-p 4 $src/big.bin $dst/big.bin" ;;
	small) echo "-fast -pp -cc 4 -r $src/small/ $dst/small/" ;;
	esac
}

# prepare ROW KIND: empty the destination.
prepare() {
	local dst=$WORK/$2-dst
	rm -rf "${dst:?}/big.bin" "$dst/small"
	[[ $1 == small ]] && mkdir -m 0777 "$dst/small"
	settle
}
settle() { sleep 0.2; } # let freed tmpfs pages and reaped children settle

# verify ROW KIND (reports to stderr: stdout of one() is its result)
verify() {
	local src=$WORK/$2-src dst=$WORK/$2-dst
	case $1 in
	stream | p4) cmp "$src/big.bin" "$dst/big.bin" >&2 ;;
	small)
		local n
		n=$(find "$dst/small" -type f | wc -l)
		[[ $n == "$SMALL_FILES" ]] || { say "$2: $n files arrived, want $SMALL_FILES" >&2; return 1; }
		diff -rq "$src/small" "$dst/small" >&2
		;;
	esac
}

# one ROW KIND: one timed, verified copy; appends "secs src_cpu dst_cpu guc_cpu".
one() {
	local row=$1 kind=$2 spid dpid t0 t1 s0 d0 s1 d1
	if [[ $kind == gct ]]; then spid=$PID_gsrc dpid=$PID_gdst; else spid=$PID_fsrc dpid=$PID_fdst; fi
	# shellcheck disable=SC2046 # row_args is split on purpose
	set -- $(row_args "$row" "$kind")
	prepare "$row" "$kind"
	s0=$(cpu_ticks "$spid") d0=$(cpu_ticks "$dpid")
	t0=$(date +%s%N)
	if ! /usr/bin/time -f '%U %S' -o "$TMP/guc.time" globus-url-copy "$@" >>"$LOG/guc.log" 2>&1; then
		say "globus-url-copy $* failed" >&2
		return 1
	fi
	t1=$(date +%s%N)
	settle
	s1=$(cpu_ticks "$spid") d1=$(cpu_ticks "$dpid")
	verify "$row" "$kind"
	awk -v ns=$((t1 - t0)) -v s=$((s1 - s0)) -v d=$((d1 - d0)) -v hz="$HZ" '{
		printf "%.4f %.2f %.2f %.2f\n", ns / 1e9, s / hz, d / hz, $1 + $2 }' "$TMP/guc.time"
}

declare -A RES # RES[row,kind] = lines "secs src_cpu dst_cpu guc_cpu"
run_row() {
	local row=$1 r kinds
	say "== row $row"
	for kind in gct ferry; do show "globus-url-copy $(row_args "$row" "$kind")"; done
	if [[ $WARMUP == 1 ]]; then
		one "$row" gct >/dev/null
		one "$row" ferry >/dev/null
	fi
	for ((r = 1; r <= RUNS; r++)); do
		if ((r % 2)); then kinds="gct ferry"; else kinds="ferry gct"; fi
		for kind in $kinds; do
			local line
			line=$(one "$row" "$kind")
			RES[$row,$kind]+="$line"$'\n'
			say "  run $r $kind: $(awk '{printf "%.3f s  (cpu s: src %.2f, dst %.2f, globus-url-copy %.2f)", $1, $2, $3, $4}' <<<"$line")"
		done
	done
	prepare "$row" gct
	prepare "$row" ferry
}

# med ROW KIND FIELD
med() { printf '%s' "${RES[$1,$2]}" | awk -v f="$3" 'NF {print $f}' | median; }

for row in $ROWS; do
	case $row in stream | p4 | small) run_row "$row" ;; idle | limits) ;; *) say "unknown row $row" >&2; exit 1 ;; esac
done

# --- idle sessions -----------------------------------------------------------
IDLE_F="" IDLE_G="" IDLE_IN=""
result_field() { sed -n 's/.*RESULT.* '"$2"'=\([^ ]*\).*/\1/p' <<<"$1"; }
if [[ " $ROWS " == *" idle "* ]]; then
	say "== row idle"
	show "$TMP/idle -addr 127.0.0.1:$P_FIDLE -n $IDLE_SESSIONS -pid $PID_fidle"
	IDLE_F=$("$TMP/idle" -addr "127.0.0.1:$P_FIDLE" -n "$IDLE_SESSIONS" -pid "$PID_fidle")
	say "$IDLE_F"
	show "$TMP/idle -addr 127.0.0.1:$P_GIDLE -n $GCT_IDLE_SESSIONS -pid $PID_gidle -children"
	IDLE_G=$("$TMP/idle" -addr "127.0.0.1:$P_GIDLE" -n "$GCT_IDLE_SESSIONS" -pid "$PID_gidle" -children)
	say "$IDLE_G"
	show "$TMP/idle -inproc $WORK/idle -n $IDLE_SESSIONS"
	IDLE_IN=$("$TMP/idle" -inproc "$WORK/idle" -n "$IDLE_SESSIONS")
	say "$IDLE_IN"
fi

# --- limits ------------------------------------------------------------------
# What the machine gives without GridFTP: loopback TCP (iperf3, memory to
# memory) and a local copy between the same tmpfs directories (cp).
declare -A LIM # LIM[name] = lines of seconds or Gb/s
iperf() { # streams: prints receiver Gb/s
	iperf3 -s -B 127.0.0.1 -p "$P_IPERF" -1 >>"$LOG/iperf3.log" 2>&1 &
	local spid=$!
	wait_listen "$P_IPERF" "$spid"
	iperf3 -c 127.0.0.1 -B 127.0.0.1 -p "$P_IPERF" -t 3 -P "$1" -f g 2>>"$LOG/iperf3.log" |
		awk '/receiver/ {v = $(NF - 2)} END {print v}'
	wait "$spid" || true
}
timed() { # command...: prints seconds
	local t0 t1
	t0=$(date +%s%N)
	"$@"
	t1=$(date +%s%N)
	awk -v ns=$((t1 - t0)) 'BEGIN {printf "%.4f\n", ns / 1e9}'
}
if [[ " $ROWS " == *" limits "* ]]; then
	say "== row limits"
	if command -v iperf3 >/dev/null; then
		for st in 1 4; do
			show "iperf3 -s -B 127.0.0.1 -p $P_IPERF -1 & iperf3 -c 127.0.0.1 -B 127.0.0.1 -p $P_IPERF -t 3 -P $st -f g"
			for ((r = 1; r <= RUNS; r++)); do
				v=$(iperf "$st")
				LIM[iperf$st]+="$v"$'\n'
				say "  run $r iperf3 -P $st: $v Gb/s"
			done
		done
	else
		say "  iperf3 not installed: no loopback TCP limit"
	fi
	show "cp $WORK/gct-src/big.bin $WORK/gct-dst/big.bin"
	show "cp -r $WORK/gct-src/small $WORK/gct-dst/small"
	for ((r = 1; r <= RUNS; r++)); do
		rm -rf "$WORK/gct-dst/big.bin" "$WORK/gct-dst/small"
		settle
		v=$(timed cp "$WORK/gct-src/big.bin" "$WORK/gct-dst/big.bin")
		cmp "$WORK/gct-src/big.bin" "$WORK/gct-dst/big.bin"
		LIM[cp]+="$v"$'\n'
		rm -f "$WORK/gct-dst/big.bin"
		settle
		w=$(timed cp -r "$WORK/gct-src/small" "$WORK/gct-dst/small")
		diff -rq "$WORK/gct-src/small" "$WORK/gct-dst/small"
		LIM[cpr]+="$w"$'\n'
		say "  run $r cp: $v s, cp -r: $w s"
	done
	rm -rf "$WORK/gct-dst/big.bin" "$WORK/gct-dst/small"
fi
limit_med() { printf '%s' "${LIM[$1]:-}" | awk 'NF' | median; }

# --- table -------------------------------------------------------------------
say ""
say "== results: median of $RUNS runs; ferry/GCT > 1 means ferry is faster${FERRY_NOTE}"
printf '| %-36s | %14s | %14s | %9s |\n' "row" "GCT to GCT" "ferry to ferry" "ferry/GCT"
printf '|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..38})" "$(printf -- '-%.0s' {1..15}):" "$(printf -- '-%.0s' {1..15}):" "$(printf -- '-%.0s' {1..10}):"
for row in $ROWS; do
	case $row in
	stream | p4)
		g=$(med "$row" gct 1) f=$(med "$row" ferry 1)
		label="$BIG_MIB MiB file, $([[ $row == p4 ]] && echo "-p 4" || echo "stream mode") (Gb/s)"
		awk -v g="$g" -v f="$f" -v b="$BIG_BYTES" -v l="$label" 'BEGIN {
			printf "| %-36s | %14.2f | %14.2f | %8.2f× |\n", l, b * 8 / g / 1e9, b * 8 / f / 1e9, g / f }'
		;;
	small)
		g=$(med small gct 1) f=$(med small ferry 1)
		awk -v g="$g" -v f="$f" -v n="$SMALL_FILES" -v sz="$SMALL_BYTES" 'BEGIN {
			printf "| %-36s | %14.0f | %14.0f | %8.2f× |\n", n " files of " sz " B (files/s)", n / g, n / f, g / f
			printf "| %-36s | %14.2f | %14.2f | %8.2f× |\n", "  same files (Gb/s)", n * sz * 8 / g / 1e9, n * sz * 8 / f / 1e9, g / f }'
		;;
	esac
done
if [[ -n $IDLE_F ]]; then
	fr=$(result_field "$IDLE_F" rss_kib_per_session) gp=$(result_field "$IDLE_G" pss_kib_per_session)
	gr=$(result_field "$IDLE_G" rss_kib_per_session) gu=$(result_field "$IDLE_G" uss_kib_per_session)
	awk -v fr="$fr" -v gp="$gp" -v gr="$gr" -v gu="$gu" -v nf="$IDLE_SESSIONS" -v ng="$GCT_IDLE_SESSIONS" 'BEGIN {
		printf "| %-36s | %14s | %14s | %9s |\n", "idle session memory (KiB/session)", "", "", "GCT/ferry"
		printf "| %-36s | %14s | %14.1f | %9s |\n", "  ferry: RSS delta, " nf " sessions", "", fr, ""
		printf "| %-36s | %14.1f | %14s | %8.0f× |\n", "  GCT: sum PSS, " ng " sessions", gp, "", gp / fr
		printf "| %-36s | %14.1f | %14s | %8.0f× |\n", "  GCT: sum USS (private)", gu, "", gu / fr
		printf "| %-36s | %14.1f | %14s | %8.0f× |\n", "  GCT: sum RSS", gr, "", gr / fr }'
fi

if [[ " $ROWS " == *" limits "* ]]; then
	say ""
	say "== limits on this machine, same run (median of $RUNS)"
	for st in 1 4; do
		[[ -n ${LIM[iperf$st]:-} ]] && say "  iperf3 loopback, -P $st:            $(limit_med "iperf$st") Gb/s"
	done
	awk -v c="$(limit_med cp)" -v r="$(limit_med cpr)" -v b="$BIG_BYTES" -v n="$SMALL_FILES" 'BEGIN {
		printf "  cp of the big file (tmpfs):      %.2f Gb/s\n", b * 8 / c / 1e9
		printf "  cp -r of the small files:        %.0f files/s\n", n / r }'
fi

say ""
say "== CPU seconds per run (median): source server / destination server / globus-url-copy"
for row in $ROWS; do
	case $row in idle | limits) continue ;; esac
	for kind in gct ferry; do
		printf '  %-6s %-6s wall %6.3f s   cpu %5.2f / %5.2f / %5.2f\n' "$row" "$kind" \
			"$(med "$row" "$kind" 1)" "$(med "$row" "$kind" 2)" "$(med "$row" "$kind" 3)" "$(med "$row" "$kind" 4)"
	done
done
