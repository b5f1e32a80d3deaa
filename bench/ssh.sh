#!/usr/bin/env bash
# ssh.sh — the SSH command gateway (issue 15): N consecutive 1-byte
# transfers, each one `ssh USER@HOST scp src:/one.bin dst:/...` through the
# gateway of `ferry server --ssh-listen` (a new SSH connection, handshake
# and key login each time, as a user with nothing installed pays), against
# the installed CLI's `ferry scp` of the same file, same service, same two
# anonymous `ferry gridftp` endpoints on 127.0.0.1. Both are submit-and-wait
# in one command; each request is timed with the wall clock around the one
# client process (bash's $EPOCHREALTIME), after one untimed warm-up of each.
# The kinds alternate request by request, so that load drift hits both.
# Reported: seconds per request (mean and median) for each, and the ratio
# ssh / installed. For reference, the hosted Globus CLI over SSH measured
# 2.73 s per request; the goal here is < 0.2 s including the handshake.
#
#   bench/ssh.sh               # N=100
#   N=20 bench/ssh.sh
#
# Everything listens on 127.0.0.1 only; the CLI's login and the SSH keys
# and known_hosts are kept in a mktemp dir, never in ~/.config or ~/.ssh.
# Environment: N PORT_BASE (4 ports) FERRY KEEP_LOGS=1.
# Needs: go, ssh, ssh-keygen, ss, setsid, awk.
set -Eeuo pipefail
shopt -s inherit_errexit
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N=${N:-100}
PORT_BASE=${PORT_BASE:-29871} # below the ephemeral range
KEEP_LOGS=${KEEP_LOGS:-0}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=/dev/shm/ferry-ssh.$$ # the endpoints' roots
TMP=$(mktemp -d /tmp/ferry-ssh.XXXXXX) # binary, logs, service data, keys
LOG=$TMP/logs
mkdir -p "$LOG" "$TMP/config"
P_SRC=$PORT_BASE P_DST=$((PORT_BASE + 1)) P_API=$((PORT_BASE + 2)) P_SSH=$((PORT_BASE + 3))
trap cleanup EXIT
trap 'exit 130' INT TERM

need go ssh ssh-keygen ss setsid awk
ports_free "" "$P_SRC" "$P_DST" "$P_API" "$P_SSH"

say "== machine"
machine_facts
say "ssh:     $(ssh -V 2>&1)"
say "runs:    N=$N"

say "== build"
build_ferry

say "== servers"
mkdir -p "$WORK/src" "$WORK/dst/ssh" "$WORK/dst/cli"
head -c 1 /dev/urandom >"$WORK/src/one.bin"
PHASE=ssh
ferry_server src "" 127.0.0.1 "$P_SRC" "$WORK/src"
ferry_server dst "" 127.0.0.1 "$P_DST" "$WORK/dst"
PASSWORD=bench-$RANDOM-$RANDOM
show "echo PASSWORD | $FERRY user add bench --data $TMP/svc"
echo "$PASSWORD" | "$FERRY" user add bench --data "$TMP/svc" >>"$LOG/cli.log"
show "ssh-keygen -q -t ed25519 -N '' -f $TMP/id_ed25519; $FERRY user key add bench $TMP/id_ed25519.pub --data $TMP/svc"
ssh-keygen -q -t ed25519 -N '' -C bench -f "$TMP/id_ed25519"
"$FERRY" user key add bench "$TMP/id_ed25519.pub" --data "$TMP/svc" >>"$LOG/cli.log"
start_bg service "" "$P_SSH" "$LOG/service.log" "$FERRY" server --data "$TMP/svc" --listen "127.0.0.1:$P_API" \
	--ssh-listen "127.0.0.1:$P_SSH" --log-level warn

export XDG_CONFIG_HOME=$TMP/config FERRY_URL=http://127.0.0.1:$P_API
unset FERRY_TOKEN
show "echo PASSWORD | $FERRY login --username bench; $FERRY endpoint add src|dst --server ftp://127.0.0.1:PORT"
echo "$PASSWORD" | "$FERRY" login --username bench >>"$LOG/cli.log"
"$FERRY" endpoint add src --server "ftp://127.0.0.1:$P_SRC" >>"$LOG/cli.log"
"$FERRY" endpoint add dst --server "ftp://127.0.0.1:$P_DST" >>"$LOG/cli.log"

SSH=(ssh -F /dev/null -o StrictHostKeyChecking=no -o "UserKnownHostsFile=$TMP/known_hosts" -o IdentitiesOnly=yes
	-o BatchMode=yes -o LogLevel=ERROR -i "$TMP/id_ed25519" -p "$P_SSH" bench@127.0.0.1)

# one KIND I: one request of KIND (ssh or cli), file I; prints its seconds.
one() {
	local t0 t1
	t0=$EPOCHREALTIME
	if [[ $1 == ssh ]]; then
		"${SSH[@]}" scp src:/one.bin "dst:/ssh/f$2" >>"$LOG/ssh.out" 2>&1 </dev/null
	else
		"$FERRY" scp src:/one.bin "dst:/cli/f$2" >>"$LOG/cli.out" 2>&1 </dev/null
	fi
	t1=$EPOCHREALTIME
	awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f\n", b - a}'
}

say "== $N requests of each, alternating (one warm-up of each first)"
show "${SSH[*]} scp src:/one.bin dst:/ssh/fI"
show "$FERRY scp src:/one.bin dst:/cli/fI"
one ssh warm >/dev/null
one cli warm >/dev/null
: >"$TMP/ssh.s"
: >"$TMP/cli.s"
for ((i = 1; i <= N; i++)); do
	if ((i % 2)); then
		one ssh "$i" >>"$TMP/ssh.s"
		one cli "$i" >>"$TMP/cli.s"
	else
		one cli "$i" >>"$TMP/cli.s"
		one ssh "$i" >>"$TMP/ssh.s"
	fi
done
got_ssh=$(find "$WORK/dst/ssh" -name 'f[0-9]*' | wc -l)
got_cli=$(find "$WORK/dst/cli" -name 'f[0-9]*' | wc -l)
[[ $got_ssh == "$N" && $got_cli == "$N" ]] || { say "files arrived: ssh $got_ssh, cli $got_cli of $N" >&2; exit 1; }

mean() { awk '{s += $1} END {printf "%.4f", s / NR}'; }
ssh_mean=$(mean <"$TMP/ssh.s") cli_mean=$(mean <"$TMP/cli.s")
ssh_med=$(median <"$TMP/ssh.s") cli_med=$(median <"$TMP/cli.s")
say "== result (seconds per request; every file arrived)"
printf '%-26s %8s %8s\n' "" mean median
printf '%-26s %8.3f %8.3f\n' "ssh ... scp (gateway)" "$ssh_mean" "$ssh_med"
printf '%-26s %8.3f %8.3f\n' "ferry scp (installed CLI)" "$cli_mean" "$cli_med"
printf '%-26s %8.2f %8.2f\n' "ratio ssh / installed" "$(awk -v a="$ssh_mean" -v b="$cli_mean" 'BEGIN {print a / b}')" \
	"$(awk -v a="$ssh_med" -v b="$cli_med" 'BEGIN {print a / b}')"
say "load:    $(cut -d" " -f1-3 /proc/loadavg) (after the run)"
