#!/usr/bin/env bash
# gsi.sh — GSI endpoints, same run, loopback: ferry's GSI server driven by
# `ferry copy` (and by globus-url-copy) against GCT's globus-gridftp-server in
# GSI mode driven by tuned globus-url-copy; one big file and a tree of small
# files, each with the data channels authenticated (DCAU A, PROT C) and
# encrypted (PROT P); beside them the limits of the machine (cp in tmpfs,
# iperf3 on loopback, openssl's AES-GCM on one core). Issue 14.
#
#   bench/gsi.sh                       # everything, RUNS=3 WARMUP=1 (about 5 min)
#   RUNS=3 ROWS="big-a big-p" bench/gsi.sh
#
# Rows (ROWS, default all):  big-a    one BIG_MIB MiB file, DCAU A
#                            big-p    the same, PROT P
#                            small-a  SMALL_FILES files of SMALL_BYTES (-r), DCAU A
#                            small-p  the same, PROT P
# Kinds in every row (KINDS, default all):
#   gct    globus-url-copy $GUC_BIG / $GUC_SMALL (+ -dcpriv for P), GCT → GCT
#   ferry  ferry copy (its defaults; --encrypt for P), ferry → ferry
#   guc    globus-url-copy with GCT's flags, ferry → ferry (a control)
# All copies are third-party between two servers of the same kind. DCAU A
# is the default of both clients after a GSI login: each server presents the
# proxy the client delegated to it. Each row runs WARMUP untimed copies of
# every kind (default 1), then RUNS timed ones, alternating the order of the
# kinds; the median is reported. Every copy is verified: md5 of the big
# file; file count, total size and the md5 of the sorted md5 list of the tree.
#
# The PKI (a test CA as a hashed X509_CERT_DIR with signing_policy and CRL,
# a host certificate CN=host/127.0.0.1, a user certificate, a proxy from
# grid-proxy-init, the grid-mapfile) is made in $TMP and handed to every
# process in its environment; nothing reads or writes /etc/grid-security
# (except GCT's own gsi.conf) or $HOME. See interop/gsi_bed_test.go.
#
# Environment: RUNS WARMUP BIG_MIB SMALL_FILES SMALL_BYTES ROWS KINDS
#   GUC_BIG GUC_SMALL (globus-url-copy's flags) FERRY_FLAGS (extra ferry copy
#   flags, default none) LIMITS=0 (skip the limits) PORT_BASE (5 ports)
#   FERRY (a prebuilt ferry binary) KEEP_LOGS=1.
# Needs: go, globus-gridftp-server, globus-url-copy, grid-proxy-init, openssl,
# md5sum, root (GCT's GSI sessions run as the mapped user, nobody);
# iperf3 optional. Everything listens on 127.0.0.1 only.
set -Eeuo pipefail
shopt -s inherit_errexit
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${RUNS:-3}
WARMUP=${WARMUP:-1}
BIG_MIB=${BIG_MIB:-2048}
SMALL_FILES=${SMALL_FILES:-5000}
SMALL_BYTES=${SMALL_BYTES:-51200}
ROWS=$(selected_rows big-a big-p small-a small-p)
KINDS=${KINDS:-gct ferry guc}
GUC_BIG=${GUC_BIG:--fast -p 4}
GUC_SMALL=${GUC_SMALL:--fast -pp -cc 4 -cd}
FERRY_FLAGS=${FERRY_FLAGS:-}
LIMITS=${LIMITS:-1}
PORT_BASE=${PORT_BASE:-29971} # below the ephemeral range
KEEP_LOGS=${KEEP_LOGS:-0}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=/dev/shm/ferry-gsi.$$               # data: one root per server
TMP=$(mktemp -d /tmp/ferry-gsi.XXXXXX)   # binaries, PKI, logs
LOG=$TMP/logs
PKI=$TMP/pki
HZ=$(getconf CLK_TCK)
mkdir -p "$LOG"
chmod 0755 "$TMP" # GCT's sessions, as nobody, read the CA dir again (DCAU)

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop_servers
	rm -rf "$WORK"
	report_logs "$rc"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

need go globus-gridftp-server globus-url-copy grid-proxy-init openssl md5sum ss setsid
[[ $(id -u) == 0 ]] || { say "run as root (GCT's GSI sessions switch to the mapped user, nobody)" >&2; exit 1; }
P_GSRC=$PORT_BASE P_GDST=$((PORT_BASE + 1)) P_FSRC=$((PORT_BASE + 2)) P_FDST=$((PORT_BASE + 3)) P_IPERF=$((PORT_BASE + 4))
ports_free "" "$P_GSRC" "$P_GDST" "$P_FSRC" "$P_FDST" "$P_IPERF"

# The GSI settings of the caller never reach the programs run here.
GSI_VARS=(X509_CERT_DIR X509_USER_CERT X509_USER_KEY X509_USER_PROXY X509_VHOST_CRED_DIR GRIDMAP
	MYPROXY_SERVER MYPROXY_SERVER_PORT MYPROXY_SERVER_DN)
for v in "${GSI_VARS[@]}"; do unset "$v"; done

# --- machine -----------------------------------------------------------------
say "== machine"
machine_facts
say "GCT:     $(globus-gridftp-server -version 2>&1 | head -1); globus-url-copy $(globus-url-copy -version 2>&1 | awk '{print $2}')"
say "openssl: $(openssl version)"
say "gsi.conf: $(grep -s '^NAME_COMPATIBILITY' /etc/grid-security/gsi.conf || echo none)"

say "== build"
build_ferry

# --- PKI (as interop/gsi_bed_test.go's newGridCA, issue, gridProxyInit) -------
say "== PKI in $PKI"
CA_DIR=$PKI/certificates
mkdir -p "$CA_DIR" "$PKI/issued" "$PKI/private"
chmod 0755 "$PKI" "$CA_DIR" "$PKI/issued"
chmod 0700 "$PKI/private"
: >"$PKI/private/index.txt"
echo 01 >"$PKI/private/crlnumber"
cat >"$PKI/private/openssl.cnf" <<EOF
[req]
distinguished_name = dn
prompt = no
[dn]
[ca]
default_ca = ca_default
[ca_default]
database = $PKI/private/index.txt
crlnumber = $PKI/private/crlnumber
default_md = sha256
default_crl_days = 30
EOF
CNF=$PKI/private/openssl.cnf
CA_SUBJECT="/O=Grid/OU=ferry-test/CN=bench CA"
NS="/O=Grid/OU=ferry-test/OU=bench" # what the CA signs
USER_DN="$NS/CN=alice"
ossl() { openssl "$@" >>"$LOG/pki.log" 2>&1 || { say "openssl $1 failed" >&2; return 1; }; }
show "openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 30 -subj '$CA_SUBJECT' -addext basicConstraints=critical,CA:true -addext keyUsage=critical,keyCertSign,cRLSign ..."
ossl req -config "$CNF" -x509 -newkey rsa:2048 -nodes -sha256 -keyout "$PKI/private/ca.key" -out "$PKI/ca.pem" \
	-days 30 -subj "$CA_SUBJECT" -addext "basicConstraints=critical,CA:true" \
	-addext "keyUsage=critical,keyCertSign,cRLSign" -addext "subjectKeyIdentifier=hash"
HASH=$(openssl x509 -noout -hash -in "$PKI/ca.pem")
cp "$PKI/ca.pem" "$CA_DIR/$HASH.0"
printf "# ferry bench CA\naccess_id_CA   X509   '%s'\npos_rights     globus CA:sign\ncond_subjects  globus '\"%s/*\"'\n" \
	"$CA_SUBJECT" "$NS" >"$CA_DIR/$HASH.signing_policy"
ossl ca -config "$CNF" -gencrl -keyfile "$PKI/private/ca.key" -cert "$PKI/ca.pem" -out "$CA_DIR/$HASH.r0"
chmod 0644 "$CA_DIR"/*

SERIAL=1
# issue STEM SUBJ(openssl -subj form) host|user: a certificate and key signed by the CA.
issue() {
	local stem=$PKI/issued/$1 exts
	SERIAL=$((SERIAL + 1))
	ossl req -config "$CNF" -new -newkey rsa:2048 -nodes -keyout "$stem.key" -out "$stem.csr" -subj "$2"
	exts="basicConstraints=critical,CA:false
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid"
	if [[ $3 == host ]]; then
		exts+=$'\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth'
	else
		exts+=$'\nkeyUsage=critical,digitalSignature,keyEncipherment,dataEncipherment\nextendedKeyUsage=clientAuth'
	fi
	printf '%s\n' "$exts" >"$stem.ext"
	ossl x509 -req -in "$stem.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/private/ca.key" -set_serial "$SERIAL" \
		-days 30 -sha256 -extfile "$stem.ext" -out "$stem.pem"
	chmod 0600 "$stem.key"
	chmod 0644 "$stem.pem"
}
show "openssl req -new ... -subj '$NS/CN=host\\/127.0.0.1'; openssl x509 -req -CA ... (host: serverAuth,clientAuth; no subjectAltName)"
issue host "$NS/CN=host\\/127.0.0.1" host
HOST_CERT=$PKI/issued/host.pem HOST_KEY=$PKI/issued/host.key
show "openssl req -new ... -subj '$USER_DN'; openssl x509 -req -CA ... (user: clientAuth)"
issue alice "$USER_DN" user
PROXY=$PKI/proxy.pem
show "X509_CERT_DIR=$CA_DIR grid-proxy-init -q -cert $PKI/issued/alice.pem -key $PKI/issued/alice.key -out $PROXY"
X509_CERT_DIR=$CA_DIR grid-proxy-init -q -cert "$PKI/issued/alice.pem" -key "$PKI/issued/alice.key" -out "$PROXY" >>"$LOG/pki.log" 2>&1
id=$(X509_CERT_DIR=$CA_DIR grid-proxy-info -f "$PROXY" -identity 2>/dev/null || true)
[[ $id == "$USER_DN" ]] || { say "grid-proxy-info -identity: '$id', want '$USER_DN'" >&2; exit 1; }
say "  proxy of $id, $(X509_CERT_DIR=$CA_DIR grid-proxy-info -f "$PROXY" -type 2>/dev/null)"
GRIDMAP=$PKI/grid-mapfile
printf '"%s" nobody\n' "$USER_DN" >"$GRIDMAP"
chmod 0644 "$GRIDMAP"
show "echo '\"$USER_DN\" nobody' > $GRIDMAP"

# Client environments.
CLIENT_ENV=(env "X509_CERT_DIR=$CA_DIR" "X509_USER_PROXY=$PROXY")
SERVER_ENV=(env "X509_CERT_DIR=$CA_DIR" "X509_USER_CERT=$HOST_CERT" "X509_USER_KEY=$HOST_KEY" "GRIDMAP=$GRIDMAP")

# --- data --------------------------------------------------------------------
BIG_BYTES=$((BIG_MIB * 1048576))
SMALL_TOTAL=$((SMALL_FILES * SMALL_BYTES))
say "== data in $WORK"
mkdir -p "$WORK"/{gct-src,gct-dst,ferry-src,ferry-dst}
chmod 0755 "$WORK" "$WORK/gct-src" "$WORK/ferry-src"
chmod 0777 "$WORK/gct-dst" "$WORK/ferry-dst" # GCT writes as nobody
if [[ " $ROWS " == *" big-"* ]]; then
	show "head -c $BIG_BYTES /dev/urandom > $WORK/gct-src/big.bin"
	head -c "$BIG_BYTES" /dev/urandom >"$WORK/gct-src/big.bin"
	chmod 0644 "$WORK/gct-src/big.bin"
	ln "$WORK/gct-src/big.bin" "$WORK/ferry-src/big.bin" # one inode, two roots
	BIG_MD5=$(md5sum <"$WORK/gct-src/big.bin" | cut -d' ' -f1)
	say "  md5 $BIG_MD5"
fi
# tree_sum DIR: "files bytes md5-of-the-sorted-md5-list" of the files under DIR.
tree_sum() {
	local n b m
	n=$(find "$1" -type f | wc -l)
	b=$(find "$1" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
	m=$(cd "$1" && find . -type f -print0 | sort -z | xargs -0r md5sum | md5sum | cut -d' ' -f1)
	echo "$n $b $m"
}
if [[ " $ROWS " == *" small-"* ]]; then
	mkdir -m 0755 "$WORK/gct-src/small"
	show "head -c $SMALL_TOTAL /dev/urandom | split -b $SMALL_BYTES -a 5 -d - $WORK/gct-src/small/f"
	head -c "$SMALL_TOTAL" /dev/urandom | split -b "$SMALL_BYTES" -a 5 -d - "$WORK/gct-src/small/f"
	chmod 0644 "$WORK"/gct-src/small/*
	cp -al "$WORK/gct-src/small" "$WORK/ferry-src/small"
	SMALL_SUM=$(tree_sum "$WORK/gct-src/small")
	say "  tree: $SMALL_SUM (files, bytes, md5 of the md5 list)"
	[[ ${SMALL_SUM%% *} == "$SMALL_FILES" ]] || { say "made ${SMALL_SUM%% *} files, want $SMALL_FILES" >&2; exit 1; }
fi

# --- servers -----------------------------------------------------------------
# GCT: GSI mode (no -aa), host credential and grid-mapfile from the
# environment; it forks a process per session, which switches to nobody.
start_gct() { # name port
	local cmd=(globus-gridftp-server -p "$2" -control-interface 127.0.0.1 -data-interface 127.0.0.1
		-home-dir "$WORK" -d ERROR -l "$LOG/$1.log")
	start_bg "$1" "" "$2" "$LOG/$1.out" "${SERVER_ENV[@]}" "${cmd[@]}"
}
start_ferry() { # name port root
	start_bg "$1" "" "$2" "$LOG/$1.log" "$FERRY" gridftp --root "$3" --listen "127.0.0.1:$2" \
		--gsi --cert "$HOST_CERT" --key "$HOST_KEY" --ca-dir "$CA_DIR" --gridmap "$GRIDMAP" \
		--max-sessions-per-address 0 --log-level warn
}
say "== servers"
PHASE=gsi
[[ " $KINDS " == *" gct "* ]] && { start_gct gsrc "$P_GSRC"; start_gct gdst "$P_GDST"; }
if [[ " $KINDS " == *" ferry "* || " $KINDS " == *" guc "* ]]; then
	start_ferry fsrc "$P_FSRC" "$WORK/ferry-src"
	start_ferry fdst "$P_FDST" "$WORK/ferry-dst"
fi

# --- measuring ---------------------------------------------------------------
# cpu_ticks PID: user+system time of the process and of its reaped children
# (GCT's per-session processes), in clock ticks.
cpu_ticks() { awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat"; }
# machine_ticks: "busy total" clock ticks of the whole machine (/proc/stat).
machine_ticks() { awk '$1 == "cpu" {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat; }
settle() { sleep 0.3; } # let GCT reap its sessions and tmpfs free its pages

U_GSRC=gsiftp://127.0.0.1:$P_GSRC$WORK/gct-src U_GDST=gsiftp://127.0.0.1:$P_GDST$WORK/gct-dst
U_FSRC=gsiftp://127.0.0.1:$P_FSRC U_FDST=gsiftp://127.0.0.1:$P_FDST

# cmd_of ROW KIND: the client command line of one case.
cmd_of() {
	local row=$1 kind=$2 src dst what flags prot=${1#*-}
	if [[ $kind == gct ]]; then src=$U_GSRC dst=$U_GDST; else src=$U_FSRC dst=$U_FDST; fi
	case $row in big-*) what="$src/big.bin $dst/big.bin" ;; small-*) what="$src/small/ $dst/small/" ;; esac
	if [[ $kind == ferry ]]; then
		flags="-q"
		[[ $row == small-* ]] && flags+=" -r"
		[[ $prot == p ]] && flags+=" --encrypt"
		[[ -n $FERRY_FLAGS ]] && flags+=" $FERRY_FLAGS"
		echo "$FERRY copy $flags $what"
	else
		if [[ $row == big-* ]]; then flags=$GUC_BIG; else flags="-r $GUC_SMALL"; fi
		[[ $prot == p ]] && flags+=" -dcpriv"
		echo "globus-url-copy $flags $what"
	fi
}

# prepare ROW KIND: empty the destination.
prepare() {
	local dst=$WORK/$([[ $2 == gct ]] && echo gct || echo ferry)-dst
	rm -rf "${dst:?}/big.bin" "$dst/small"
	[[ $1 == small-* ]] && mkdir -m 0777 "$dst/small"
	settle
}

# verify ROW KIND (to stderr: stdout of one() is its result)
verify() {
	local dst=$WORK/$([[ $2 == gct ]] && echo gct || echo ferry)-dst got
	case $1 in
	big-*)
		got=$(md5sum <"$dst/big.bin" | cut -d' ' -f1)
		[[ $got == "$BIG_MD5" ]] || { say "$1 $2: md5 $got, want $BIG_MD5" >&2; return 1; }
		;;
	small-*)
		got=$(tree_sum "$dst/small")
		[[ $got == "$SMALL_SUM" ]] || { say "$1 $2: tree $got, want $SMALL_SUM" >&2; return 1; }
		;;
	esac
}

# one ROW KIND: one timed, verified copy; prints "secs src_cpu dst_cpu
# client_cpu machine_busy%" (CPU in s; the machine's, others' work included,
# in % of all its cores).
one() {
	local row=$1 kind=$2 spid dpid t0 t1 s0 d0 s1 d1 m0 m1 cmd
	if [[ $kind == gct ]]; then spid=$PID_gsrc dpid=$PID_gdst; else spid=$PID_fsrc dpid=$PID_fdst; fi
	cmd=$(cmd_of "$row" "$kind")
	prepare "$row" "$kind"
	echo "### $row $kind: $cmd" >>"$LOG/client.log"
	s0=$(cpu_ticks "$spid") d0=$(cpu_ticks "$dpid") m0=$(machine_ticks)
	t0=$(date +%s%N)
	# shellcheck disable=SC2086 # cmd is split on purpose
	if ! /usr/bin/time -f '%U %S' -o "$TMP/client.time" "${CLIENT_ENV[@]}" $cmd >>"$LOG/client.log" 2>&1; then
		say "$row $kind: $cmd failed" >&2
		return 1
	fi
	t1=$(date +%s%N)
	m1=$(machine_ticks)
	settle
	s1=$(cpu_ticks "$spid") d1=$(cpu_ticks "$dpid")
	verify "$row" "$kind"
	awk -v ns=$((t1 - t0)) -v s=$((s1 - s0)) -v d=$((d1 - d0)) -v hz="$HZ" -v m0="$m0" -v m1="$m1" '{
		split(m0, a, " "); split(m1, b, " ")
		printf "%.4f %.2f %.2f %.2f %.0f\n", ns / 1e9, s / hz, d / hz, $1 + $2, 100 * (b[1] - a[1]) / (b[2] - a[2]) }' "$TMP/client.time"
}

declare -A RES # RES[row,kind] = lines "secs src_cpu dst_cpu client_cpu"
read -ra KIND_LIST <<<"$KINDS"
run_row() {
	local row=$1 r i kind line
	say "== row $row"
	for kind in "${KIND_LIST[@]}"; do show "$(cmd_of "$row" "$kind")"; done
	for ((r = 1; r <= WARMUP; r++)); do
		for kind in "${KIND_LIST[@]}"; do one "$row" "$kind" >/dev/null; done
	done
	for ((r = 1; r <= RUNS; r++)); do
		for i in $(run_order "$r" "${#KIND_LIST[@]}"); do
			kind=${KIND_LIST[$i]}
			line=$(one "$row" "$kind")
			RES[$row,$kind]+="$line"$'\n'
			say "  run $r $kind: $(awk '{printf "%.3f s  (cpu s: src %.2f, dst %.2f, client %.2f; machine %d %% busy)", $1, $2, $3, $4, $5}' <<<"$line")"
		done
	done
	for kind in "${KIND_LIST[@]}"; do prepare "$row" "$kind"; done
}
med() { printf '%s' "${RES[$1,$2]:-}" | awk -v f="$3" 'NF {print $f}' | median; }

for row in $ROWS; do
	case $row in big-a | big-p | small-a | small-p) run_row "$row" ;; *) say "unknown row $row" >&2; exit 1 ;; esac
done
# What ferry copy chose, per row (the "settings:" lines of its copies).
if [[ " $KINDS " == *" ferry "* ]]; then
	say "== what ferry copy chose"
	awk '/^### / {row = $2; kind = $3} /settings:/ && kind == "ferry:" {sub(/^.*settings: /, ""); print "  " row ": " $0}' "$LOG/client.log" | sort | uniq -c
fi
stop_servers

# --- limits ------------------------------------------------------------------
declare -A LIM
timed() { # command...: prints seconds
	local t0 t1
	t0=$(date +%s%N)
	"$@"
	t1=$(date +%s%N)
	awk -v ns=$((t1 - t0)) 'BEGIN {printf "%.4f\n", ns / 1e9}'
}
iperf() { # streams: prints receiver Gb/s
	iperf3 -s -B 127.0.0.1 -p "$P_IPERF" -1 >>"$LOG/iperf3.log" 2>&1 &
	local spid=$!
	wait_listen "$P_IPERF" "$spid"
	iperf3 -c 127.0.0.1 -B 127.0.0.1 -p "$P_IPERF" -t 3 -P "$1" -f g 2>>"$LOG/iperf3.log" |
		awk '/receiver/ {v = $(NF - 2)} END {print v}'
	wait "$spid" || true
}
if [[ $LIMITS == 1 ]]; then
	say "== limits"
	if command -v iperf3 >/dev/null; then
		for st in 1 4; do
			show "iperf3 -s -B 127.0.0.1 -p $P_IPERF -1 & iperf3 -c 127.0.0.1 -B 127.0.0.1 -p $P_IPERF -t 3 -P $st -f g"
			LIM[iperf$st]=$(iperf "$st")
			say "  iperf3 -P $st: ${LIM[iperf$st]} Gb/s"
		done
	else
		say "  iperf3 not installed: no loopback TCP limit"
	fi
	# One core's AES-GCM (what TLS 1.3 uses for PROT P) on 16 KiB records.
	for c in aes-128-gcm aes-256-gcm; do
		show "openssl speed -seconds 2 -bytes 16384 -evp $c"
		LIM[$c]=$(openssl speed -seconds 2 -bytes 16384 -evp "$c" 2>/dev/null | awk 'toupper($1) ~ /GCM/ && NF >= 2 {v = $NF} END {sub(/k$/, "", v); printf "%.0f", v * 1000 / 1e6}')
		say "  $c, one core: ${LIM[$c]} MB/s"
	done
	if [[ " $ROWS " == *" big-"* ]]; then
		show "cp $WORK/gct-src/big.bin $WORK/gct-dst/big.bin"
		LIM[cp]=$(timed cp "$WORK/gct-src/big.bin" "$WORK/gct-dst/big.bin")
		rm -f "$WORK/gct-dst/big.bin"
		say "  cp: ${LIM[cp]} s"
	fi
	if [[ " $ROWS " == *" small-"* ]]; then
		settle
		show "cp -r $WORK/gct-src/small $WORK/gct-dst/small"
		LIM[cpr]=$(timed cp -r "$WORK/gct-src/small" "$WORK/gct-dst/small")
		rm -rf "$WORK/gct-dst/small"
		say "  cp -r: ${LIM[cpr]} s"
	fi
fi

# --- table -------------------------------------------------------------------
say ""
say "== results: median of $RUNS run(s); MB = 10^6 B; ferry÷GCT > 1: ferry faster; P÷A = time with PROT P ÷ time with DCAU A"
say "   cpu: seconds of CPU per copy, source server / destination server / client; busy: the whole machine during the copy, % of $(nproc) cores"
printf '| %-28s | %-26s | %8s | %8s | %9s | %6s | %-19s | %4s |\n' row case s MB/s "ferry÷GCT" "P÷A" "cpu s (src/dst/cli)" busy
printf '|%s|%s|%s|%s|%s|%s|%s|%s|\n' "------------------------------" "----------------------------" "---------:" "---------:" "----------:" "-------:" "---------------------" "-----:"
label_of() {
	case $1 in
	big-a) echo "$BIG_MIB MiB, DCAU A" ;; big-p) echo "$BIG_MIB MiB, PROT P" ;;
	small-a) echo "$SMALL_FILES x $SMALL_BYTES B, DCAU A" ;; small-p) echo "$SMALL_FILES x $SMALL_BYTES B, PROT P" ;;
	esac
}
case_of() { case $1 in gct) echo "guc, GCT to GCT" ;; ferry) echo "ferry copy, ferry to ferry" ;; guc) echo "guc, ferry to ferry" ;; esac; }
for row in $ROWS; do
	bytes=$BIG_BYTES
	[[ $row == small-* ]] && bytes=$SMALL_TOTAL
	g=$(med "$row" gct 1)
	other=${row%-*}-a
	[[ $row == *-a ]] && other=""
	for kind in "${KIND_LIST[@]}"; do
		s=$(med "$row" "$kind" 1)
		a=""
		[[ -n $other ]] && a=$(med "$other" "$kind" 1)
		awk -v l="$(label_of "$row")" -v c="$(case_of "$kind")" -v s="$s" -v b="$bytes" -v g="$g" -v k="$kind" -v a="$a" \
			-v cs="$(med "$row" "$kind" 2)" -v cd="$(med "$row" "$kind" 3)" -v cc="$(med "$row" "$kind" 4)" -v mb="$(med "$row" "$kind" 5)" 'BEGIN {
			r = (k == "gct" || g == "") ? "–" : sprintf("%.2f×", g / s)
			p = (a == "") ? "" : sprintf("%.2f", s / a)
			printf "| %-28s | %-26s | %8.2f | %8.0f | %10s | %6s | %.1f / %.1f / %.1f     | %3.0f %% |\n", l, c, s, b / s / 1e6, r, p, cs, cd, cc, mb }'
	done
done
if [[ $LIMITS == 1 ]]; then
	say ""
	say "== limits on this machine, same run"
	[[ -n ${LIM[iperf1]:-} ]] && say "  iperf3 loopback -P 1 / -P 4:  ${LIM[iperf1]} / ${LIM[iperf4]} Gb/s  ($(awk -v a="${LIM[iperf1]}" -v b="${LIM[iperf4]}" 'BEGIN {printf "%.0f / %.0f MB/s", a * 125, b * 125}'))"
	say "  AES-128-GCM / AES-256-GCM, one core, 16 KiB: ${LIM[aes-128-gcm]} / ${LIM[aes-256-gcm]} MB/s"
	[[ -n ${LIM[cp]:-} ]] && awk -v s="${LIM[cp]}" -v b="$BIG_BYTES" 'BEGIN {printf "  cp of the big file (tmpfs):   %.2f s, %.0f MB/s\n", s, b / s / 1e6}'
	[[ -n ${LIM[cpr]:-} ]] && awk -v s="${LIM[cpr]}" -v b="$SMALL_TOTAL" -v n="$SMALL_FILES" 'BEGIN {printf "  cp -r of the tree (tmpfs):    %.2f s, %.0f MB/s, %.0f files/s\n", s, b / s / 1e6, n / s}'
fi
