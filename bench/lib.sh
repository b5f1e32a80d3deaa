# lib.sh — what the benchmark scripts share. Source it; it reads LOG, TMP
# and KEEP_LOGS when called.

# report_logs RC: after a failure (RC ≠ 0) show the tail of every log in
# $LOG and keep them; after success keep them only with KEEP_LOGS=1, else
# remove $TMP (which holds $LOG).
report_logs() {
	local rc=$1 f
	if [[ $rc -ne 0 ]]; then
		echo "FAILED (exit $rc); logs kept in $LOG:" >&2
		for f in "$LOG"/*; do
			[[ -s $f ]] && { echo "--- $f (tail)" >&2; tail -n 15 "$f" >&2; }
		done
	elif [[ $KEEP_LOGS == 1 ]]; then
		echo "logs kept in $LOG"
	else
		rm -rf "$TMP"
	fi
}

# need TOOL...: exit 1 unless every tool is on PATH.
need() {
	local tool
	for tool; do
		command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 1; }
	done
}
