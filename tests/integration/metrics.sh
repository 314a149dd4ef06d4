#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A mount's metrics as Prometheus expects them: -o metrics_listen serves
# /metrics over HTTP on loopback and -o metrics=FILE writes the same text;
# promtool check metrics passes on both; a real Prometheus server, started
# here on loopback, scrapes the mount under fio and its query API gives a
# non-zero read rate and a read latency quantile. A port already taken fails
# the mount with the reason. Every query of the Grafana dashboard that the
# package ships is valid PromQL on that server, names only metrics the
# endpoint exports, and its throughput panel shows the reads.
NO_DEFAULT_POOL=1
source "$(dirname "$0")/lib.sh"
need promtool; need prometheus; need curl; need fio

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
PROM_PORT=$(free_port)
PROM_PID=

stop_prometheus() {
    [[ -n "$PROM_PID" ]] || return 0
    kill -TERM "$PROM_PID" 2>/dev/null
    wait_pid_gone "$PROM_PID" || { kill -9 "$PROM_PID" 2>/dev/null; wait_pid_gone "$PROM_PID"; }
    PROM_PID=
}
BEFORE_UNMOUNT_HOOKS+=(stop_prometheus)

# query EXPR: the first value of an instant query to the Prometheus server, or "none".
query() {
    curl -sf --max-time 5 "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1" |
        json 'd["data"]["result"][0]["value"][1] if d["status"] == "success" and d["data"]["result"] else "none"'
}

mkfs_pool
MOUNT_OPTS=(-o "metrics=$TMP/metrics.prom,metrics_listen=$PORT")
mount_pool

log "--- the endpoint and the file"
head -c 8M /dev/urandom >"$MNT/warm"
cat "$MNT/warm" >/dev/null
curl -sf --max-time 5 "http://127.0.0.1:$PORT/metrics" >"$TMP/scrape.txt" || fail "no answer at http://127.0.0.1:$PORT/metrics"
promtool check metrics <"$TMP/scrape.txt" >"$TMP/promtool.out" 2>&1 || fail "promtool check metrics on the endpoint: $(cat "$TMP/promtool.out")"
ok "promtool check metrics passes on the endpoint ($(wc -l <"$TMP/scrape.txt") lines)"
grep -q '^# TYPE stripefs_request_duration_seconds histogram$' "$TMP/scrape.txt" || fail "no latency histogram"
grep -q '^stripefs_request_duration_seconds_bucket{kind="read",le="+Inf"} [1-9]' "$TMP/scrape.txt" ||
    fail "no read latency buckets: $(grep duration "$TMP/scrape.txt" | head -3)"
grep -q '^stripefs_build_info{version="[0-9.]*"} 1$' "$TMP/scrape.txt" || fail "no build_info"
grep -q '^stripefs_uptime_seconds ' "$TMP/scrape.txt" || fail "no uptime"
ok "$(grep '^stripefs_build_info' "$TMP/scrape.txt"), $(grep '^stripefs_uptime_seconds' "$TMP/scrape.txt")"
wait_until "the metrics file" test -s "$TMP/metrics.prom"
promtool check metrics <"$TMP/metrics.prom" >"$TMP/promtool.out" 2>&1 || fail "promtool check metrics on the file: $(cat "$TMP/promtool.out")"
ok "promtool check metrics passes on the file"
assert_eq "$(ss -Hltn "( sport = :$PORT )" | awk '{print $4}' | sort -u | tr '\n' ' ')" "127.0.0.1:$PORT " \
    "the addresses listening on port $PORT (loopback only)"

log "--- Prometheus scrapes the mount under fio"
cat >"$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: stripefs
    static_configs:
      - targets: ['127.0.0.1:$PORT']
EOF
promtool check config "$TMP/prometheus.yml" >/dev/null || fail "promtool check config"
prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
    --web.listen-address="127.0.0.1:$PROM_PORT" >"$TMP/prometheus.log" 2>&1 &
PROM_PID=$!
fio --name=read --filename="$MNT/warm" --rw=randread --bs=4k --direct=1 --time_based --runtime=600 \
    --output="$TMP/fio.out" >/dev/null 2>&1 &
FIO_PID=$!
# Until the server has two scrapes of the counter in its window; up to 30 s
# (a slow machine), not a performance bound.
read_rate=none
for ((i = 0; i < 60; i++)); do
    pid_alive "$PROM_PID" || fail "prometheus exited: $(tail -5 "$TMP/prometheus.log")"
    read_rate=$(query 'rate(stripefs_requests_total{kind="read"}[5s])' 2>/dev/null || echo none)
    [[ "$read_rate" != none ]] && python3 -c "import sys; sys.exit(0 if float('$read_rate') > 0 else 1)" && break
    sleep 0.5
done
[[ "$read_rate" != none ]] || fail "Prometheus has no read rate for the mount: $(query 'up')"
python3 -c "import sys; sys.exit(0 if float('$read_rate') > 0 else 1)" || fail "read rate $read_rate"
ok "Prometheus: rate(stripefs_requests_total{kind=\"read\"}[5s]) = $read_rate reads/s"
p99=$(query 'histogram_quantile(0.99, rate(stripefs_request_duration_seconds_bucket{kind="read"}[5s]))')
python3 -c "import sys; sys.exit(0 if float('$p99') > 0 else 1)" || fail "read p99 from the histogram: $p99"
ok "Prometheus: read p99 from the histogram = $p99 s"

log "--- the Grafana dashboard's queries"
DASHBOARD=$(cd "$(dirname "$0")/../.." && pwd)/packaging/grafana/stripefs.json
# Each panel's queries, with Grafana's variables as it would fill them for this one mount.
python3 - "$DASHBOARD" >"$TMP/dashboard.exprs" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["uid"] == "stripefs" and d["panels"], "no panels"
for p in d["panels"]:
    assert p["datasource"]["uid"] == "${datasource}", p["title"]
    for t in p["targets"]:
        e = t["expr"].replace("$__rate_interval", "5s").replace("$__range", "1m").replace('"$instance"', '".*"')
        assert "$" not in e, e
        print(p["title"] + "\t" + e)
PY
(( $(wc -l <"$TMP/dashboard.exprs") >= 10 )) || fail "the dashboard has only $(wc -l <"$TMP/dashboard.exprs") queries"
while IFS=$'\t' read -r title expr; do
    status=$(curl -s --max-time 5 "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$expr" |
        json 'd["status"] + (" " + d.get("error", "") if d["status"] != "success" else "")')
    [[ $status == success ]] || fail "dashboard panel '$title': query $expr: $status"
    for name in $(grep -o 'stripefs_[a-z_]*' <<<"$expr" | sort -u); do
        grep -q "^$name[{ ]" "$TMP/scrape.txt" || fail "dashboard panel '$title' names $name, which the endpoint does not export"
    done
done <"$TMP/dashboard.exprs"
ok "all $(wc -l <"$TMP/dashboard.exprs") dashboard queries are valid and name exported metrics"
throughput=$(grep -P '^Read and write throughput\t' "$TMP/dashboard.exprs" | cut -f2)
read_bps=$(curl -sf --max-time 5 "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$throughput" |
    json '[r["value"][1] for r in d["data"]["result"] if r["metric"].get("kind") == "read"][0]')
python3 -c "import sys; sys.exit(0 if float('$read_bps') > 0 else 1)" || fail "the throughput panel's reads: $read_bps"
ok "the dashboard's throughput panel: $read_bps B/s read"
kill -TERM "$FIO_PID"; wait "$FIO_PID" 2>/dev/null || true
stop_prometheus
unmount_pool

log "--- a port already taken"
python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); print("listening", flush=True); time.sleep(600)' "$PORT" >"$TMP/holder.out" &
HOLDER=$!
wait_until "the port holder" grep -q listening "$TMP/holder.out"
if "$STRIPEFS" mount "$META" "$MNT" -o "metrics_listen=127.0.0.1:$PORT" 2>"$TMP/err"; then
    MOUNTED+=("$META|$MNT")
    fail "mounted with metrics_listen on a port in use"
fi
grep -qF "metrics_listen=127.0.0.1:$PORT: cannot listen there" "$TMP/err" || fail "the refusal: $(cat "$TMP/err")"
! mountpoint -q "$MNT" || fail "$MNT is mounted after the refusal"
ok "refused: $(head -c 300 "$TMP/err")"
kill "$HOLDER"; wait "$HOLDER" 2>/dev/null || true
if "$STRIPEFS" mount "$META" "$MNT" -o metrics_listen=99999 2>"$TMP/err"; then fail "metrics_listen=99999 was accepted"; fi
grep -qF "PORT from 1 to 65535" "$TMP/err" || fail "metrics_listen=99999: $(cat "$TMP/err")"
