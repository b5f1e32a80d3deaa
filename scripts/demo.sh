#!/usr/bin/env bash
# The main job on the embedded default: start ferry server (SQLite under a
# temporary data directory) with two local endpoints served by ferry
# gridftp, submit a verified transfer of a small tree from one to the other
# with the CLI, wait for it to succeed, show what happened, and keep the
# service running so you can try it yourself. DEMO_EXIT=1 stops after the
# first transfer (and cleans up).
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/ferry ./cmd/ferry
ferry=$PWD/bin/ferry
work=$(mktemp -d /tmp/ferry-demo.XXXXXX)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/alpha" "$work/beta" "$work/data" "$work/config"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { # wait_port PORT
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.1; done
  echo "nothing listens on port $1" >&2; exit 1
}

# Two endpoints: plain directories served by ferry's GridFTP server.
pa=$(free_port); "$ferry" gridftp --root "$work/alpha" --listen "127.0.0.1:$pa" --anonymous --anonymous-write --log-level warn & pids+=($!)
pb=$(free_port); "$ferry" gridftp --root "$work/beta" --listen "127.0.0.1:$pb" --anonymous --anonymous-write --log-level warn & pids+=($!)

# The service, on SQLite under --data, with one user.
password=$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
echo "$password" | "$ferry" user add demo --data "$work/data" >/dev/null
ps=$(free_port)
"$ferry" server --data "$work/data" --listen "127.0.0.1:$ps" --log-level warn & pids+=($!)
wait_port "$pa"; wait_port "$pb"; wait_port "$ps"

export FERRY_URL="http://127.0.0.1:$ps" XDG_CONFIG_HOME="$work/config"
echo "$password" | "$ferry" login --username demo >/dev/null
"$ferry" endpoint add alpha --server "ftp://127.0.0.1:$pa" -F json >/dev/null
"$ferry" endpoint add beta --server "ftp://127.0.0.1:$pb" -F json >/dev/null

# Something to move: 200 small files and a 64 MiB one.
mkdir -p "$work/alpha/run1/small"
for i in $(seq -w 200); do head -c 50000 /dev/urandom > "$work/alpha/run1/small/f$i.dat"; done
head -c $((64 << 20)) /dev/urandom > "$work/alpha/run1/big.dat"

echo "== ferry ls alpha:/run1/ -l"
"$ferry" ls alpha:/run1/ -l
echo "== ferry transfer alpha:/run1/ beta:/copy/ -r --label demo"
task=$("$ferry" transfer alpha:/run1/ beta:/copy/ -r --label demo)
echo "task $task"
"$ferry" task wait "$task" --timeout 60
echo "== ferry task show $task"
"$ferry" task show "$task"
diff -r "$work/alpha/run1" "$work/beta/copy"
echo "OK: every byte arrived intact and verified"

if [[ ${DEMO_EXIT:-} == 1 ]]; then exit 0; fi
cat <<EOF

The service keeps running (Ctrl-C here stops everything). Open the web app at
$FERRY_URL/ and sign in as demo (password below), or try the CLI in another shell:

  export FERRY_URL=$FERRY_URL XDG_CONFIG_HOME=$work/config   # logged in as demo
  $ferry ls beta:/copy/ -l
  $ferry transfer alpha:/run1/ beta:/again/ -r --sync-level checksum
  $ferry task list
  $ferry task events $task
  curl -s $FERRY_URL/api/v0.10/openapi.json | head     # the REST API
  (the password of user demo is $password)
EOF
wait "${pids[@]}"
