#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kv_bench's two phases over etcd's HTTP/JSON gateway instead of gRPC.

The other way stripefs could reach etcd's v3 API (docs/design.md, "Metadata
on etcd", "Transport"). One keep-alive HTTP/1.1 connection on one thread:

  commit  POST /v3/kv/txn: one compare (a lock key's version, as stripefs's
          Txns check the writer lock) and two puts of kv_bench's sizes;
  get     POST /v3/kv/range of a random key the commit phase wrote.

Keys and values travel base64-encoded in JSON, as the gateway requires.
Prints "phase ops/s" lines, as kv_bench does. It measures; nothing depends
on its timings.

  bench/etcd_gateway_bench.py --endpoint 127.0.0.1:2379 --prefix gw1 [--seconds 5]
"""
import argparse
import base64
import http.client
import json
import random
import sys
import time


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--endpoint", required=True, help="HOST:PORT of one member's client URL")
    ap.add_argument("--prefix", required=True, help="a key prefix holding no keys")
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    host, port = args.endpoint.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)

    def call(path: str, body: dict) -> dict:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{path}: HTTP {resp.status}: {data[:200]!r}")
        return json.loads(data)

    value = "v" * 120
    lock = b64(f"{args.prefix}/w")
    n = 0
    start = time.monotonic()
    while time.monotonic() - start < args.seconds:
        call("/v3/kv/txn", {
            "compare": [{"key": lock, "target": "VERSION", "result": "EQUAL", "version": "0"}],
            "success": [
                {"requestPut": {"key": b64(f"{args.prefix}/kI{n:012}"), "value": b64(value)}},
                {"requestPut": {"key": b64(f"{args.prefix}/kD{n:012}"), "value": b64(value[:24])}},
            ],
        })
        n += 1
    commits = n / (time.monotonic() - start)

    got = 0
    start = time.monotonic()
    while time.monotonic() - start < args.seconds:
        r = call("/v3/kv/range", {"key": b64(f"{args.prefix}/kI{random.randrange(n):012}")})
        if not r.get("kvs"):
            print("etcd_gateway_bench: a written key is missing", file=sys.stderr)
            return 1
        got += 1
    gets = got / (time.monotonic() - start)
    print(f"commit {commits:.0f}\nget {gets:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
