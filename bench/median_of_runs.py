#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Median of several runs of latency_bench or ycsb_bench (their --json files),
printed as Markdown: one row per (target, row) for latency_bench, one per
(workload, target) for ycsb_bench, with the spread (min-max) of the main figure.

    median_of_runs.py ycsb run1.json run2.json run3.json
    median_of_runs.py latency run1.json run2.json run3.json [--tables]
"""
import json
import statistics
import sys


def med(values):
    return statistics.median(values) if values else float("nan")


def fmt(v, digits=2):
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 100:
        return f"{v:.1f}"
    return f"{v:.{digits}f}"


def ycsb(runs):
    order = "abcfde"
    targets = []
    cells = {}
    for run in runs:
        for r in run["rows"]:
            key = (r["workload"], r["target"])
            if r["target"] not in targets:
                targets.append(r["target"])
            cells.setdefault(key, []).append(r)
    print(f"{len(runs)} runs; median of each column; throughput range in brackets\n")
    print("| Workload | Target | RunTime(ms) | Throughput(ops/sec) | AvgLat(us) | p50 (us) | p99 (us) | "
          "MinLat(us) | MaxLat(us) | Cache Stats (ios, hits, evictions), first run |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for w in order:
        for t in targets:
            rs = cells.get((w, t))
            if not rs:
                continue
            tp = [r["throughput"] for r in rs]
            print(f"| {w} | {t} | {fmt(med([r['runtime_ms'] for r in rs]), 1)} | {fmt(med(tp))} "
                  f"[{fmt(min(tp))}-{fmt(max(tp))}] | {fmt(med([r['avg_us'] for r in rs]))} | "
                  f"{fmt(med([r.get('p50_us', 0) for r in rs]))} | {fmt(med([r.get('p99_us', 0) for r in rs]))} | "
                  f"{fmt(med([r['min_us'] for r in rs]))} | {fmt(med([r['max_us'] for r in rs]), 1)} | "
                  f"{rs[0]['cache_stats']} |")
    # The ratio the target is judged by: engine vs rocksdb.
    if "engine" in targets and "rocksdb" in targets:
        print("\n| Workload | engine / rocksdb throughput (medians) |\n|---|---:|")
        for w in order:
            e, r = cells.get((w, "engine")), cells.get((w, "rocksdb"))
            if e and r:
                print(f"| {w} | {med([x['throughput'] for x in e]) / med([x['throughput'] for x in r]):.2f}x |")


def latency(runs, tables):
    targets = [t["target"] for t in runs[0]["targets"]]
    print(f"{len(runs)} runs; median of each column; value range in brackets\n")
    for target in targets:
        per = [next(t for t in run["targets"] if t["target"] == target) for run in runs]
        print(f"\n### {target}\n\n| name | value | unit | p90 | p99 |\n|---|---:|---|---:|---:|")
        for i, row in enumerate(per[0]["rows"]):
            vals = [p["rows"][i]["value"] for p in per]
            p90 = [p["rows"][i]["p90"] for p in per]
            p99 = [p["rows"][i]["p99"] for p in per]
            extra = f" | {fmt(med(p90))} | {fmt(med(p99))}" if row["p90"] >= 0 else " | | "
            print(f"| {row['name']} | {fmt(med(vals))} [{fmt(min(vals))}-{fmt(max(vals))}] | {row['unit']}{extra} |")
        if not tables:
            continue
        for key, t in per[0].get("tables", {}).items():
            print(f"\n{key} ({target})\n\n| " + " | ".join(t["columns"]) + " |")
            print("|" + "---:|" * len(t["columns"]))
            for i, row in enumerate(t["rows"]):
                out = [row[0]]
                for c in range(1, len(row)):
                    out.append(med([p["tables"][key]["rows"][i][c] for p in per]))
                # The first two columns of writeAsyncSync and the first of the others are counts.
                counts = 2 if key == "writeAsyncSync" else 1
                print("| " + " | ".join(f"{v:.0f}" if c < counts else fmt(v) for c, v in enumerate(out)) + " |")


def main():
    kind, paths = sys.argv[1], [a for a in sys.argv[2:] if not a.startswith("--")]
    runs = []
    for p in paths:
        with open(p) as f:
            runs.append(json.load(f))
    if kind == "ycsb":
        ycsb(runs)
    else:
        latency(runs, "--tables" in sys.argv)


if __name__ == "__main__":
    main()
