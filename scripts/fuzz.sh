#!/usr/bin/env bash
# Nightly-style fuzzing (make fuzz): every fuzz target of the module, each
# for FUZZTIME (default 5m), one after the other. `make test` runs only
# their seed corpora.
#
# FUZZMINIMIZE (default 5s) bounds how long a new interesting input is
# minimized: with go's default minute, the server targets, whose inputs each
# cost a few milliseconds of real sockets, stood at 0 exec/s for tens of
# seconds after every find. FUZZPARALLEL (default: go's, GOMAXPROCS) sets
# the workers; FUZZ (a regexp) picks targets. A failing input is written
# to the package's testdata/fuzz and the run stops.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-5m}
FUZZMINIMIZE=${FUZZMINIMIZE:-5s}
FUZZ=${FUZZ:-.}
parallel=()
[[ -n ${FUZZPARALLEL:-} ]] && parallel=(-parallel "$FUZZPARALLEL")

# "package target" for each fuzz target: go test -list prints a package's
# targets, then its "ok" line.
targets=$("$GO" test -list '^Fuzz' ./... | awk '/^Fuzz/ {t[n++] = $1} /^ok/ {for (i = 0; i < n; i++) print $2, t[i]; n = 0}')
if [[ -z $targets ]]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi
while read -r pkg target; do
	[[ $target =~ $FUZZ ]] || continue
	echo "== $pkg $target for $FUZZTIME"
	"$GO" test "$pkg" -run '^$' -fuzz "^$target\$" -fuzztime "$FUZZTIME" \
		-fuzzminimizetime "$FUZZMINIMIZE" "${parallel[@]}"
done <<<"$targets"
