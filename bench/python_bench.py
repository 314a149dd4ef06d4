#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""python_bench: the Python module against the C++ object API, in one run.

For each object size (100 B, 64 KiB, 1 MiB, 16 MiB), on a fresh pool each
time, both sides make the same calls in the same order: COUNT puts and a
sync, then every object read ROUNDS times with get (a new bytes object /
std::string) and ROUNDS times into one reused buffer (get_into / read_into),
after one untimed pass.
C++ is bench/object_throughput; Python is this script with the stripefs
module, in a process of its own as well. The runs interleave (C++,
Python, C++, Python, ...) and the table
gives the median of --runs for each, and Python / C++.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_bench.py --build build

The pool: 4 sparse drive files and a RAM segment on --dir (default /dev/shm,
so the figures are of the code, not of a disk); the objects fit the RAM tier.
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SIZES = [("100 B", 100, 20000), ("64 KiB", 64 << 10, 4000), ("1 MiB", 1 << 20, 384), ("16 MiB", 16 << 20, 24)]


def mkfs(stripefs, work):
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    drives = []
    for i in range(4):
        drives += ["--drive", f"{work}/drive{i}.img:1G"]
    subprocess.run([stripefs, "mkfs", "--meta", f"{work}/meta", *drives, "--ram", "768M"], check=True,
                   stdout=subprocess.DEVNULL)
    return f"{work}/meta"


def python_side(meta, size, count, rounds):
    import stripefs
    data = random.Random(1).randbytes(size)
    names = [f"bench/o{i}" for i in range(count)]
    with stripefs.Pool.open(meta) as pool:
        t = time.perf_counter()
        for name in names:
            pool.put(name, data)
        pool.sync()
        put_s = time.perf_counter() - t
        for name in names:  # one untimed pass, as the C++ side makes
            pool.get(name)
        t = time.perf_counter()
        for _ in range(rounds):
            for name in names:
                if len(pool.get(name)) != size:
                    sys.exit(f"short get of {name}")
        get_s = time.perf_counter() - t
        buf = bytearray(size)
        t = time.perf_counter()
        for _ in range(rounds):
            for name in names:
                if pool.get_into(name, buf) != size:
                    sys.exit(f"short get_into of {name}")
        into_s = time.perf_counter() - t
    reads = count * rounds
    return {"put_ops": count / put_s, "get_ops": reads / get_s, "get_into_ops": reads / into_s}


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "--python-side":
        meta, size, count, rounds = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        print(json.dumps(python_side(meta, size, count, rounds)))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="the build tree (its tools/stripefs and bench/object_throughput)")
    ap.add_argument("--dir", default="/dev/shm", help="where the pools' files go")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every object count (0.1 for a smoke run)")
    ap.add_argument("--json", help="also write the medians here")
    a = ap.parse_args()
    stripefs_bin = os.path.join(a.build, "tools", "stripefs")
    cxx_bin = os.path.join(a.build, "bench", "object_throughput")
    work = tempfile.mkdtemp(prefix="python-bench.", dir=a.dir)
    results = {}
    try:
        for run in range(a.runs):
            for label, size, count in SIZES:
                count = max(2, int(count * a.scale))
                meta = mkfs(stripefs_bin, f"{work}/pool")
                out = subprocess.run([cxx_bin, "--meta", meta, "--size", str(size), "--count", str(count),
                                      "--rounds", str(a.rounds)], check=True, capture_output=True, text=True)
                results.setdefault((label, "C++"), []).append(json.loads(out.stdout))
                # A fresh process too, as the C++ side: a process that has run
                # pools before reuses their memory and skips its page faults.
                meta = mkfs(stripefs_bin, f"{work}/pool")
                out = subprocess.run([sys.executable, __file__, "--python-side", meta, str(size), str(count),
                                      str(a.rounds)], check=True, capture_output=True, text=True)
                results.setdefault((label, "Python"), []).append(json.loads(out.stdout))
            print(f"run {run + 1} of {a.runs} done", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def med(label, side, key):
        return statistics.median(r[key] for r in results[(label, side)])

    print(f"Python module vs C++ object API, backing {a.dir} (tmpfs), RAM tier s3fifo; "
          f"median of {a.runs} interleaved runs, operations per second")
    print("(the ratio of each run's pair, C++ then Python, shows how much one machine's runs vary)")
    print("| size | op | C++ | Python | Python / C++ | runs' ratios, lowest-highest | Python MB/s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    medians = {}
    for label, size, _ in SIZES:
        for key, op in [("put_ops", "put (+ sync)"), ("get_ops", "get -> bytes"), ("get_into_ops", "get_into")]:
            c, p = med(label, "C++", key), med(label, "Python", key)
            pairs = [py[key] / cx[key] for cx, py in zip(results[(label, "C++")], results[(label, "Python")])]
            medians[f"{label} {op}"] = {"cxx": c, "python": p, "ratio": p / c, "run_ratios": pairs}
            print(f"| {label} | {op} | {c:,.0f} | {p:,.0f} | {p / c:.2f}x | {min(pairs):.2f}-{max(pairs):.2f}x "
                  f"| {p * size / 1e6:,.0f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(medians, f, indent=1)


if __name__ == "__main__":
    main()
