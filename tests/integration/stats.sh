#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# stripefs stats and the metrics file: valid JSON with the requests the test
# made, the RAM tier's hits for re-read small files, the segments; --watch
# repeats; -o metrics=FILE holds the same figures in Prometheus text.
MOUNT_OPTS=(-o "metrics=/tmp/stripefs-stats-test.$$.prom")
METRICS=/tmp/stripefs-stats-test.$$.prom
source "$(dirname "$0")/lib.sh"
remove_metrics() { rm -f "$METRICS"; }
CLEANUP_HOOKS+=(remove_metrics)

for i in $(seq 1 20); do head -c 3000 /dev/urandom >"$MNT/small$i"; done
for round in 1 2 3; do
    for i in $(seq 1 20); do dd if="$MNT/small$i" of=/dev/null bs=4k iflag=direct status=none; done
done
"$STRIPEFS" stats "$MNT" --json >"$TMP/stats.json" || fail "stats --json failed"
assert_eq "$(json 'd["requests"]["read"]["count"] >= 60 and d["requests"]["write"]["count"] >= 20' <"$TMP/stats.json")" true \
    "at least the 60 reads and 20 writes made are counted"
assert_eq "$(json 'd["cache"]["hits"] >= 40 and d["cache"]["capacity"] == 64 << 20' <"$TMP/stats.json")" true \
    "the RAM tier (64M) served the re-reads of small files"
assert_eq "$(json 'sorted(d.keys())' <"$TMP/stats.json")" \
    '["cache", "dirty_bytes", "errors", "eviction", "metadata", "repaired_blocks", "requests", "segments", "transport", "uptime_s", "version"]' \
    "stats document keys"
assert_eq "$(json 'all(k in r for r in d["requests"].values() for k in ("count", "bytes", "p50_us", "p90_us", "p99_us", "max_us"))' <"$TMP/stats.json")" \
    true "every request kind has count, bytes and latency percentiles"
"$STRIPEFS" stats "$MNT" >"$TMP/stats.txt" || fail "stats failed"
grep -q "^read .*" "$TMP/stats.txt" && grep -q "^RAM tier: " "$TMP/stats.txt" || fail "stats text: $(cat "$TMP/stats.txt")"
ok "stats prints a table: $(grep '^RAM tier' "$TMP/stats.txt")"
timeout 3 "$STRIPEFS" stats "$MNT" --json --watch 0.2 >"$TMP/watch.out" || true
(( $(wc -l <"$TMP/watch.out") >= 2 )) || fail "--watch printed $(wc -l <"$TMP/watch.out") documents"
ok "--watch repeats ($(wc -l <"$TMP/watch.out") documents in 3 s)"
sed -n 2p "$TMP/watch.out" >"$TMP/second.json"
assert_eq "$(json '"interval" in d and d["interval"]["seconds"] > 0 and d["interval"]["requests"]["getxattr"]["count"] >= 1' <"$TMP/second.json")" \
    true "from the second document on, --watch gives the interval's own figures (the stats getxattr itself)"
timeout 3 "$STRIPEFS" stats "$MNT" --watch 0.5 >"$TMP/watch.txt" || true
grep -q "read p99" "$TMP/watch.txt" || fail "stats --watch prints no interval header: $(cat "$TMP/watch.txt")"
grep -qE '^[0-9]{2}:[0-9]{2}:[0-9]{2} ' "$TMP/watch.txt" || fail "stats --watch prints no interval line: $(cat "$TMP/watch.txt")"
ok "stats --watch: $(grep -E '^[0-9]{2}:' "$TMP/watch.txt" | head -1)"
if "$STRIPEFS" stats "$TMP" 2>"$TMP/err"; then fail "stats of a plain directory succeeded"; fi
grep -q "not a stripefs mountpoint" "$TMP/err" || fail "stats of a plain directory: $(cat "$TMP/err")"

wait_until "the metrics file" test -s "$METRICS"
unmount_pool  # the daemon writes the file once more at unmount
grep -q '^stripefs_requests_total{kind="read"} [0-9]' "$METRICS" || fail "no read counter in the metrics file"
reads=$(sed -n 's/^stripefs_requests_total{kind="read"} //p' "$METRICS")
(( reads >= 60 )) || fail "metrics file counts $reads reads"
grep -q '^stripefs_segment_capacity_bytes{segment="0",kind="drive"} ' "$METRICS" || fail "no segment gauge"
grep -q '^# TYPE stripefs_cache_hits_total counter$' "$METRICS" || fail "no TYPE line"
ok "the metrics file holds the same counters in Prometheus text ($reads reads)"

# The daemon's log: a file chosen by -o log=, at the level of -o log_level=.
MOUNT_OPTS=(-o "log=$TMP/custom.log,log_level=debug")
mount_pool
unmount_pool
grep -q "\[info\] pool .* mounted at $MNT" "$TMP/custom.log" || fail "the custom log file lacks the mount line"
grep -q "unmounted cleanly" "$TMP/custom.log" || fail "the custom log file lacks the unmount line"
ok "-o log=FILE holds the daemon's log"
if "$STRIPEFS" mount "$META" "$MNT" -o log_level=loud 2>"$TMP/err"; then fail "log_level=loud was accepted"; fi
grep -q "log_level= takes" "$TMP/err" || fail "log_level=loud: $(cat "$TMP/err")"
