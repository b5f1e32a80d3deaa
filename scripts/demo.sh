#!/usr/bin/env bash
# The main job, until the service exists: start ferry's GridFTP endpoint
# server on a temporary directory, move a file into it (and, where
# globus-url-copy is installed, run a third-party transfer between two ferry
# servers), verify the bytes and clean up.
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/ferry ./cmd/ferry
work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/a" "$work/b"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start() { # start DIR PORT
  bin/ferry gridftp --root "$1" --listen "127.0.0.1:$2" --anonymous --log-level warn &
  pids+=($!)
  for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return; sleep 0.1; done
  echo "server on port $2 did not start" >&2; exit 1
}
pa=$(free_port); start "$work/a" "$pa"
pb=$(free_port); start "$work/b" "$pb"

head -c $((64 << 20)) /dev/urandom > "$work/data.bin"
echo "== upload 64 MiB into ftp://127.0.0.1:$pa/ (curl, plain FTP)"
curl -sS -T "$work/data.bin" "ftp://127.0.0.1:$pa/data.bin"
cmp "$work/data.bin" "$work/a/data.bin"
if command -v globus-url-copy >/dev/null; then
  echo "== third-party transfer A -> B, 4 parallel streams (globus-url-copy -p 4)"
  time globus-url-copy -p 4 "ftp://127.0.0.1:$pa/data.bin" "ftp://127.0.0.1:$pb/copy.bin"
else
  echo "== download and re-upload to B (install globus-gass-copy-progs for a third-party transfer)"
  curl -sS "ftp://127.0.0.1:$pa/data.bin" -o "$work/back.bin"
  curl -sS -T "$work/back.bin" "ftp://127.0.0.1:$pb/copy.bin"
fi
cmp "$work/data.bin" "$work/b/copy.bin"
echo "== listing of B"
curl -sS "ftp://127.0.0.1:$pb/"
echo "OK: every byte arrived intact ($(md5sum < "$work/b/copy.bin" | cut -d' ' -f1))"
