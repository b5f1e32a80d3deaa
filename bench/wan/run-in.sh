#!/usr/bin/env bash
# run-in.sh NS CMD... — run a command inside one of the emulated-WAN
# namespaces made by setup.sh: NS is ferryA (10.77.0.1) or ferryB
# (10.77.0.2), or just A or B. Same as `ip netns exec ferryA CMD...`.
set -euo pipefail
(($# >= 2)) || { echo "usage: $0 ferryA|ferryB|A|B CMD..." >&2; exit 2; }
ns=$1
shift
case $ns in
A | a) ns=ferryA ;;
B | b) ns=ferryB ;;
esac
exec ip netns exec "$ns" "$@"
