#!/usr/bin/env bash
# dirwalk.sh — one flat directory walked whole by the endpoint server
# (issue 31), on loopback, each row on a fresh `ferry gridftp`:
#   tar    the tar layer packing one directory of N synthetic 10-byte files
#          (--root synthetic:files=N,size=10,per-dir=N): SITE SETDISKSTACK
#          tar, then RETR of the directory with no SITE MEMBERS, the stream
#          read and discarded; wall time, members reported ok, bytes, and
#          the server's peak RSS (VmHWM) after it;
#   rdel   SITE RDEL of one directory of RDEL_N empty files made in /dev/shm:
#          wall time of the command, whether the directory is gone, and the
#          server's peak RSS after it.
# With OLD=path/to/an/older/ferry the same rows for it first: before and
# after.
#
#   bench/dirwalk.sh                        # N=1000000 RDEL_N=200000
#   N=100000 OLD=/tmp/ferry-main bench/dirwalk.sh
#
# Environment: N RDEL_N ROWS (tar, rdel) FERRY OLD PORT_BASE KEEP_LOGS=1.
# Needs: go, python3, ss; /dev/shm with room for RDEL_N inodes.
set -Eeuo pipefail
shopt -s inherit_errexit

N=${N:-1000000}
RDEL_N=${RDEL_N:-200000}
KEEP_LOGS=${KEEP_LOGS:-0}
PORT_BASE=${PORT_BASE:-47330}
P_SRV=$PORT_BASE

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$REPO/bench/lib.sh"
selected_rows tar rdel >/dev/null # a misspelt row fails here
TMP=$(mktemp -d /tmp/ferry-dirwalk.XXXXXX)
WORK=$(mktemp -d /dev/shm/ferry-dirwalk.XXXXXX) # cleanup removes it
LOG=$TMP/logs PHASE=dirwalk
mkdir -p "$LOG"
trap cleanup EXIT
need go python3 ss
ports_free "" "$P_SRV"
build_ferry
machine_facts
say "entries: $N synthetic files to pack, $RDEL_N empty files to delete, each in one directory"

hwm() { awk '/VmHWM/ {printf "%.0f MiB", $2 / 1024}' "/proc/$1/status"; }

# client PORT MODE PATH: one anonymous session on 127.0.0.1:PORT; MODE tar
# packs PATH (RETR, its 113 member reports counted), rdel deletes it.
client() {
	python3 - "$@" <<-'EOF'
		import re, socket, sys, threading, time
		port, mode, p = int(sys.argv[1]), sys.argv[2], sys.argv[3]
		c = socket.create_connection(("127.0.0.1", port))
		f = c.makefile("rb")
		def reply():
		    lines = [f.readline().decode("utf-8", "replace").rstrip("\r\n")]
		    if lines[0][3:4] == "-":
		        while not lines[-1].startswith(lines[0][:3] + " "):
		            lines.append(f.readline().decode("utf-8", "replace").rstrip("\r\n"))
		    return lines
		def cmd(s):
		    c.sendall((s + "\r\n").encode())
		    return reply()
		reply(); cmd("USER anonymous"); cmd("PASS x"); cmd("TYPE I")
		t0 = time.time()
		if mode == "rdel":
		    r = cmd("SITE RDEL " + p)
		    print("%.2f s, reply %s" % (time.time() - t0, r[-1]))
		    sys.exit(0 if r[0].startswith("250") else 1)
		cmd("SITE SETDISKSTACK tar")
		h = re.search(r"(\d+),(\d+),(\d+),(\d+),(\d+),(\d+)", cmd("PASV")[0]).groups()
		d = socket.create_connection(("127.0.0.1", int(h[4]) * 256 + int(h[5])))
		c.sendall(("RETR " + p + "\r\n").encode())
		got = {"ok": 0, "fail": 0, "final": ""}
		def control():
		    while True:
		        r = reply()
		        if r[0].startswith("113"):
		            for l in r[1:-1]:
		                got[l.split()[0]] += 1
		        elif r[0][0] in "2345":
		            got["final"] = r[-1]
		            if r[0][0] != "1":
		                return
		t = threading.Thread(target=control)
		t.start()
		n = 0
		while b := d.recv(1 << 20):
		    n += len(b)
		t.join()
		print("%.2f s, %d members ok, %d failed, %d bytes, reply %s" % (time.time() - t0, got["ok"], got["fail"], n, got["final"]))
		sys.exit(0 if got["final"].startswith("226") and got["fail"] == 0 else 1)
	EOF
}

# rows LABEL BIN: the two rows for the ferry binary BIN.
rows() {
	local label=$1 FERRY=$2 pid out # FERRY: ferry_server's binary
	if row_wanted tar; then
		ferry_server "tar_$label" "" 127.0.0.1 "$P_SRV" "synthetic:files=$N,size=10,per-dir=$N"
		pid=$(eval "echo \$PID_tar_$label")
		out=$(client "$P_SRV" tar /)
		say "$label tar: $out, server peak RSS $(hwm "$pid")"
		stop_servers
	fi

	row_wanted rdel || return 0
	mkdir -p "$WORK/root/flat"
	show "python3: $RDEL_N empty files in $WORK/root/flat"
	python3 -c '
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    os.close(os.open(os.path.join(d, "f%08d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
' "$WORK/root/flat" "$RDEL_N"
	ferry_server "rdel_$label" "" 127.0.0.1 "$P_SRV" "$WORK/root"
	pid=$(eval "echo \$PID_rdel_$label")
	out=$(client "$P_SRV" rdel /flat)
	[[ -e $WORK/root/flat ]] && out+=", the directory is still there"
	say "$label rdel: $out, server peak RSS $(hwm "$pid")"
	stop_servers
	rm -rf "$WORK/root"
}

if [[ -n ${OLD:-} ]]; then
	rows old "$OLD"
fi
rows new "$FERRY"
