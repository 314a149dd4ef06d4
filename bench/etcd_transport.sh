#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gRPC against etcd's HTTP/JSON gateway, the two ways to reach etcd's v3 API,
# side by side in one run: it starts a 3-member etcd cluster on 127.0.0.1 in
# /dev/shm (tests/support/etcd_cluster.sh), then --runs times, alternating,
# runs build/bench/kv_bench (stripefs's gRPC client, C++) and
# bench/etcd_gateway_bench.py (the gateway, Python, one keep-alive
# connection), each on a fresh prefix and both against member 0, and prints
# the median commit and get rates of each. Stops what it started, by pid.
#
#   bench/etcd_transport.sh [--build DIR] [--runs 3] [--seconds 5]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../build runs=3 seconds=5
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    *) echo "etcd_transport.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -x "$build/bench/kv_bench" ]] || { echo "etcd_transport.sh: build kv_bench in $build first" >&2; exit 2; }
base=$(mktemp -d /dev/shm/stripefs-etcdtr.XXXXXX)
cleanup() { [[ -d "$base/etcd" ]] && bash "$here/../tests/support/etcd_cluster.sh" stop "$base/etcd"; rm -rf "$base"; }
trap cleanup EXIT
bash "$here/../tests/support/etcd_cluster.sh" start "$base/etcd" >/dev/null
member0=$(cut -d, -f1 "$base/etcd/endpoints")
for ((r = 1; r <= runs; r++)); do
  "$build/bench/kv_bench" --meta "etcd://$member0/grpc$r" --seconds "$seconds" | sed "s/^/grpc /" >>"$base/out"
  python3 "$here/etcd_gateway_bench.py" --endpoint "$member0" --prefix "gateway$r" --seconds "$seconds" |
    sed "s/^/gateway /" >>"$base/out"
  echo "run $r/$runs: $(grep -c . "$base/out") figures"
done
python3 - "$base/out" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    way, phase, rate = line.split()
    rows.setdefault((way, phase), []).append(float(rate))
print("ops/s, median of runs (1 thread, member 0, everything on tmpfs)")
print(f"{'phase':8}{'gRPC':>10}{'gateway':>10}{'gateway/gRPC':>14}")
for phase in ("commit", "get"):
    g, h = statistics.median(rows[("grpc", phase)]), statistics.median(rows[("gateway", phase)])
    print(f"{phase:8}{g:10.0f}{h:10.0f}{h / g:14.2f}")
PY
