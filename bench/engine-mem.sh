#!/usr/bin/env bash
# engine-mem.sh — the streaming engine's memory at a glance (issue 31):
# `ferry copy -r` of a tree of DIRS directories of PER files of BYTES bytes
# between two `ferry gridftp` servers on loopback, files in /dev/shm; wall
# time and peak RSS of the client (/usr/bin/time -v) and of both servers
# (VmHWM), the CPU time of each, the time to the first file at the
# destination, and `cp -r` of the same tree for scale. One run; bench/scale.sh
# is the full benchmark.
#
#   bench/engine-mem.sh                      # 200 × 1,000 files of 100 bytes
#   DIRS=1000 PER=1000 bench/engine-mem.sh
#   FERRY=/path/to/ferry bench/engine-mem.sh
#   PROFILE=/tmp/prof bench/engine-mem.sh    # CPU profiles of the three processes
#
# Environment: DIRS PER BYTES PORT_BASE (2 ports) FERRY WORK PROFILE (a
# directory: client.prof, source.prof, destination.prof go there, for go
# tool pprof) NOCP (set: skip `cp -r`) GUC (globus-url-copy's options,
# e.g. "-cc 8 -pp -r": also the same tree between two GCT
# globus-gridftp-servers on the next two ports, third party).
# Needs: go (unless FERRY is given), GNU time. Listens on 127.0.0.1 only.
set -Eeuo pipefail

DIRS=${DIRS:-200} PER=${PER:-1000} BYTES=${BYTES:-100}
PORT_BASE=${PORT_BASE:-$((20000 + RANDOM % 20000))}
WORK=${WORK:-$(mktemp -d /dev/shm/ferry-mem.XXXXXX)}
if [[ -z ${FERRY:-} ]]; then
	FERRY=$WORK/ferry
	(cd "$(dirname "${BASH_SOURCE[0]}")/.." && go build -o "$FERRY" ./cmd/ferry)
fi
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT

mkdir -p "$WORK/src/tree" "$WORK/dst" "$WORK/cp"
python3 - "$WORK/src/tree" "$DIRS" "$PER" "$BYTES" <<'PY'
import os, sys
root, dirs, per, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
data = b"x" * size
for d in range(dirs):
    p = os.path.join(root, "d%05d" % d)
    os.mkdir(p)
    for f in range(per):
        with open(os.path.join(p, "f%06d" % f), "wb") as fh:
            fh.write(data)
PY

cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f s", ($14 + $15) / hz}' "/proc/$1/stat"; }
hwm() { awk '/VmHWM/ {print $2 " kB"}' "/proc/$1/status"; }
prof() { [[ -n ${PROFILE:-} ]] && echo "$PROFILE/$1.prof"; true; }
serve() {
	FERRY_CPUPROFILE=$(prof "$3") "$FERRY" gridftp --root "$1" --listen "127.0.0.1:$2" --anonymous --anonymous-write --log-level warn &
	pids+=($!)
}
serve "$WORK/src" "$PORT_BASE" source
serve "$WORK/dst" "$((PORT_BASE + 1))" destination
for port in "$PORT_BASE" "$((PORT_BASE + 1))"; do # until both listen
	for _ in {1..100}; do (: </dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.1; done
done

files=$((DIRS * PER))
start=$(date +%s.%N)
( # the first file at the destination, under any name
	until [[ -n $(find "$WORK/dst" -type f -print -quit 2>/dev/null) ]]; do sleep 0.05; done
	date +%s.%N >"$WORK/first"
) &
pids+=($!) # killed if the copy fails
FERRY_CPUPROFILE=$(prof client) /usr/bin/time -v -o "$WORK/time" "$FERRY" copy -r -q "ftp://127.0.0.1:$PORT_BASE/tree/" "ftp://127.0.0.1:$((PORT_BASE + 1))/tree/"
end=$(date +%s.%N)
got=$(find "$WORK/dst/tree" -type f | wc -l)
[[ $got == "$files" ]] || { echo "only $got of $files files arrived" >&2; exit 1; }
wait $!
printf 'first byte after %.2f s\n' "$(echo "$(cat "$WORK/first") - $start" | bc)"
printf 'ferry copy: %d files in %.2f s, client peak RSS %s kB, CPU %s+%s s; source server %s, CPU %s; destination server %s, CPU %s\n' \
	"$files" "$(echo "$end - $start" | bc)" "$(awk -F': ' '/Maximum resident/ {print $2}' "$WORK/time")" \
	"$(awk -F': ' '/User time/ {print $2}' "$WORK/time")" "$(awk -F': ' '/System time/ {print $2}' "$WORK/time")" \
	"$(hwm "${pids[0]}")" "$(cpu "${pids[0]}")" "$(hwm "${pids[1]}")" "$(cpu "${pids[1]}")"
if [[ -n ${GUC:-} ]]; then
	chmod 755 "$WORK"
	mkdir -m 777 "$WORK/gct"
	for port in "$((PORT_BASE + 2))" "$((PORT_BASE + 3))"; do
		globus-gridftp-server -aa -anonymous-user nobody -p "$port" -control-interface 127.0.0.1 \
			-data-interface 127.0.0.1 -d ERROR -l "$WORK/gct-$port.log" &
		pids+=($!)
	done
	for port in "$((PORT_BASE + 2))" "$((PORT_BASE + 3))"; do
		for _ in {1..100}; do (: </dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.1; done
	done
	start=$(date +%s.%N)
	# shellcheck disable=SC2086 # GUC is a list of options
	globus-url-copy $GUC "ftp://127.0.0.1:$((PORT_BASE + 2))$WORK/src/tree/" "ftp://127.0.0.1:$((PORT_BASE + 3))$WORK/gct/tree/"
	end=$(date +%s.%N)
	got=$(find "$WORK/gct/tree" -type f | wc -l)
	printf 'globus-url-copy %s (GCT): %d of %d files in %.2f s\n' "$GUC" "$got" "$files" "$(echo "$end - $start" | bc)"
fi
[[ -n ${NOCP:-} ]] && exit 0
start=$(date +%s.%N)
/usr/bin/time -f '%U+%S s' -o "$WORK/cptime" cp -r "$WORK/src/tree" "$WORK/cp/"
end=$(date +%s.%N)
printf 'cp -r:      %d files in %.2f s, CPU %s\n' "$files" "$(echo "$end - $start" | bc)" "$(cat "$WORK/cptime")"
