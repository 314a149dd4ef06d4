#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that latency_bench, ycsb_bench or sqlite_bench.py printed every row
and column the seeds call for (used by smoke_test.sh). Shapes only: no timing
is judged, a measured value only has to be a non-negative number.

    check_bench_output.py latency|ycsb|sqlite OUTPUT.md OUTPUT.json
"""
import json
import re
import sys

SIZES = ["100", "1K", "10K", "100K", "1M"]
LATENCY_TARGETS = ["engine", "engine-noram", "mount", "mount-fd", "mount-direct"]
NAMED_TARGETS = ["engine", "engine-noram", "mount"]  # the ones that look a name up per operation
YCSB_TARGETS = ["engine", "engine-noram", "mount", "rocksdb"]
YCSB_COLUMNS = ["Workload", "Target", "RunTime(ms)", "Throughput(ops/sec)", "AvgLat(us)", "MinLat(us)",
                "MaxLat(us)", "Cache Size", "Cache Stats (ios, hits, evictions)"]

problems = []


def problem(msg):
    problems.append(msg)


def number(text, what):
    try:
        v = float(text)
    except ValueError:
        problem(f"{what}: '{text}' is not a number")
        return None
    if v < 0:
        problem(f"{what}: {v} is negative")
    return v


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def sections(text):
    """'## heading' -> the lines under it, up to the next '## '."""
    out, name = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            name = line[3:].split(":")[0].split(" (")[0].strip()
            out[name] = []
        elif name is not None:
            out[name].append(line)
    return out


def check_latency(text, data):
    secs = sections(text)
    for target in LATENCY_TARGETS:
        if target not in secs:
            problem(f"no table for target {target}")
            continue
        lines = secs[target]
        header = "| name | value | unit | p90 | p99 | description |"
        if header not in lines:
            problem(f"{target}: no '{header}' header")
        rows = {cells(l)[0]: cells(l) for l in lines if l.startswith("| ") and not l.startswith("| name")}
        want = []
        for s in SIZES:
            want += [f"basic.read{s}", f"basic.readBw{s}", f"basic.write{s}", f"basic.writeBw{s}"]
        if target in NAMED_TARGETS:
            want.append("readNotFound")
        for name in want:
            if name not in rows:
                problem(f"{target}: no row {name}")
                continue
            r = rows[name]
            number(r[1], f"{target} {name} value")
            unit = "MB/s" if "Bw" in name else "us"
            if r[2] != unit:
                problem(f"{target} {name}: unit '{r[2]}', expected '{unit}'")
            if unit == "us":
                number(r[3], f"{target} {name} p90")
                number(r[4], f"{target} {name} p99")
        subtables = {"multiRead": ["Num Objs", "Latency (us)", "Latency/Obj (us)"],
                     "readLoaded": ["numClients", "readLatency(us)", "p90 (us)", "p99 (us)",
                                    "throughput(total kreads/sec)"]}
        if target in NAMED_TARGETS:
            subtables["readVaryingKeyLength"] = ["Key Length", "Latency (us)", "p90 (us)", "p99 (us)",
                                                 "Bandwidth (MB/s)"]
            subtables["writeAsyncSync"] = ["firstWriteIsSync", "firstObjectSize", "firstWriteLatency(us)",
                                           "syncWriteLatency(us)"]
        tables = next((t for t in data["targets"] if t["target"] == target), {}).get("tables", {})
        for key, columns in subtables.items():
            t = tables.get(key)
            if not t:
                problem(f"{target}: no {key} table in the JSON")
                continue
            if t["columns"] != columns:
                problem(f"{target} {key}: columns {t['columns']}, expected {columns}")
            if not t["rows"]:
                problem(f"{target} {key}: no rows")
            header = "| " + " | ".join(columns) + " |"
            if header not in lines:
                problem(f"{target} {key}: the printed table has no '{header}' header")
            for row in t["rows"]:
                if len(row) != len(columns) or any(v is None or v < 0 for v in row):
                    problem(f"{target} {key}: bad row {row}")
        if key_lengths := [r[0] for r in tables.get("readVaryingKeyLength", {}).get("rows", [])]:
            if max(key_lengths) < 4000:
                problem(f"{target}: readVaryingKeyLength stops at {max(key_lengths)} bytes, not 4000")


def check_ycsb(text, data):
    header = "| " + " | ".join(YCSB_COLUMNS) + " |"
    lines = text.splitlines()
    if lines.count(header) < 2:
        problem(f"expected the load and workload tables with the header '{header}'")
    body = sections(text).get("Workloads", [])
    seen = {}
    for l in body:
        if not l.startswith("| ") or l.startswith("| Workload"):
            continue
        c = cells(l)
        if len(c) != len(YCSB_COLUMNS):
            problem(f"row with {len(c)} columns: {l}")
            continue
        seen[(c[0], c[1])] = c
        for i in range(2, 7):
            number(c[i], f"{c[0]} {c[1]} {YCSB_COLUMNS[i]}")
        if c[8] != "n/a" and not re.fullmatch(r"\d+, \d+, (\d+|n/a)", c[8]):
            problem(f"{c[0]} {c[1]}: cache stats '{c[8]}'")
    for w in "abcdef":
        for t in YCSB_TARGETS:
            if (w, t) not in seen:
                problem(f"no row for workload {w} target {t}")
    for t in YCSB_TARGETS:
        if not any(r["target"] == t for r in data.get("load", [])):
            problem(f"no load row for {t}")
    if len(data.get("rows", [])) != 6 * len(YCSB_TARGETS):
        problem(f"the JSON holds {len(data.get('rows', []))} rows, expected {6 * len(YCSB_TARGETS)}")


def check_sqlite(text, data):
    """sqlite_bench.py with --targets raw,stripefs: a row per target with a
    median, the stripefs/raw ratio, every run checked."""
    targets = data.get("config", {}).get("targets", [])
    runs = data.get("config", {}).get("runs", 0)
    lines = text.splitlines()
    header = next((l for l in lines if l.startswith("target ")), None)
    if header is None or "median commits/s" not in header:
        problem("no table header with 'median commits/s'")
    body = lines[lines.index(header) + 1:] if header else []
    for t in targets:
        row = next((l.split() for l in body if l.split()[:1] == [t]), None)
        if row is None:
            problem(f"no row for target {t}")
            continue
        for v in row[1:1 + runs + 3]:
            number(v, f"{t} run/median/p50/p99")
        if f"{runs}/{runs} ok" not in " ".join(row):
            problem(f"{t}: not every run checked ok: {' '.join(row)}")
        s = data.get("summary", {}).get(t, {})
        if s.get("median") is None or len(s.get("runs", [])) != runs:
            problem(f"{t}: the JSON summary has no median of {runs} runs: {s}")
    if "raw" in targets and "stripefs" in targets:
        if not any(l.startswith("stripefs/raw") for l in lines):
            problem("no stripefs/raw ratio line")
        if data.get("summary", {}).get("stripefs/raw") is None:
            problem("no stripefs/raw ratio in the JSON")
    if data.get("check_failures") or data.get("problems"):
        problem(f"failures: {data.get('check_failures')} {data.get('problems')}")
    if len(data.get("results", [])) != runs * len(targets):
        problem(f"the JSON holds {len(data.get('results', []))} results, expected {runs * len(targets)}")


def main():
    kind, md_path, json_path = sys.argv[1:4]
    with open(md_path) as f:
        text = f.read()
    with open(json_path) as f:
        data = json.load(f)
    {"latency": check_latency, "ycsb": check_ycsb, "sqlite": check_sqlite}[kind](text, data)
    for p in problems:
        print(f"check_bench_output: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
