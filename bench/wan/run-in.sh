#!/usr/bin/env bash
# run-in.sh NS CMD... — run a command inside one of the emulated-WAN
# namespaces made by setup.sh: NS is ferryA (10.77.0.1) or ferryB
# (10.77.0.2), or just A or B; with the star (setup.sh up -nodes N),
# ferryI (10.77.1.(10+I)) or just I. Same as `ip netns exec ferryA CMD...`.
set -euo pipefail
(($# >= 2)) || { echo "usage: $0 ferryA|ferryB|A|B|ferryI|I CMD..." >&2; exit 2; }
ns=$1
shift
case $ns in
A | a) ns=ferryA ;;
B | b) ns=ferryB ;;
[0-9] | [0-9][0-9]) ns=ferry$ns ;;
esac
exec ip netns exec "$ns" "$@"
