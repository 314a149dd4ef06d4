#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""channel_bench: the object channel beside a live mount, against plain
pread on the same mount and against the in-process object API, in one run.

Each run, on a fresh pool: COUNT_1M objects of 1 MiB and COUNT_4K of 4 KiB
are put in-process and read there (unmounted); then the pool is mounted and
the same objects are read through the channel (stripefs.Pool.open on the
mounted pool) and with os.preadv on the mount's files. Every read goes into
one reused buffer (get_into / preadv), so no side pays for allocation: for
the object API a Pool.buffer (through the channel, memory the daemon fills
itself), and once more for the channel an ordinary buffer ("channel, a
copy": the client copies out of the shared region).
- 1 MiB: MB/s over ROUNDS passes of all objects, after one untimed pass.
- 4 KiB: the p50 of each read's own time, over ROUNDS passes.
The mount is read two ways: O_DIRECT (each read a FUSE request, what a read
the page cache does not hold costs) and buffered (after the untimed pass the
kernel's page cache holds every file: a copy, no request).
The table gives the median of --runs for each, and the ratios.

    PYTHONPATH=build/python /usr/bin/python3 bench/channel_bench.py --build build --runs 3

The pool: 4 sparse drive files and a RAM segment on --dir (default /dev/shm).
The mount uses the machine's default transport (stats --json tells which).
"""
import argparse
import json
import mmap
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

from python_bench import mkfs  # the same pool: 4 sparse 1 GiB drive files, a 768 MiB RAM segment

COUNT_1M, COUNT_4K = 128, 2048


def names(size):
    return [f"b{size}/o{i}" for i in range(COUNT_1M if size == 1 << 20 else COUNT_4K)]


def measure(read, rounds, alloc=lambda size: mmap.mmap(-1, size)):
    """MB/s of 1 MiB reads and p50 µs of 4 KiB reads; read(name, buf) fills buf, a buffer from alloc."""
    out = {}
    for size in (1 << 20, 4096):
        buf = alloc(size)  # page-aligned, as O_DIRECT needs
        for name in names(size):  # the untimed pass
            read(name, buf)
        if size == 1 << 20:
            t = time.perf_counter()
            for _ in range(rounds):
                for name in names(size):
                    read(name, buf)
            out["1M_MBps"] = rounds * COUNT_1M * size / 1e6 / (time.perf_counter() - t)
        else:
            lat = []
            for _ in range(rounds):
                for name in names(size):
                    t = time.perf_counter_ns()
                    read(name, buf)
                    lat.append(time.perf_counter_ns() - t)
            out["4K_p50_us"] = statistics.median(lat) / 1000
    return out


def run_once(stripefs_bin, work, rounds):
    import stripefs
    meta = mkfs(stripefs_bin, work)
    rng = random.Random(1)
    data = {size: rng.randbytes(size) for size in (1 << 20, 4096)}
    result = {}
    with stripefs.Pool.open(meta) as pool:
        assert pool.path == "in-process"
        for size in data:
            for name in names(size):
                pool.put(name, data[size])
        pool.sync()
        result["in-process"] = measure(lambda n, b: pool.get_into(n, b), rounds, pool.buffer)
    mnt = f"{work}/mnt"
    os.makedirs(mnt)
    subprocess.run(["timeout", "60", stripefs_bin, "mount", meta, mnt], check=True)
    daemon = int(open(f"{meta}/daemon.pid").read())
    try:
        stats = json.loads(subprocess.run(["timeout", "30", stripefs_bin, "stats", "--json", mnt], check=True,
                                          capture_output=True, text=True).stdout)
        result["transport"] = stats.get("transport")
        with stripefs.Pool.open(meta) as pool:
            assert pool.path == "daemon"
            got = bytearray(4096)
            pool.get_into(names(4096)[0], got)
            assert bytes(got) == data[4096]
            result["channel"] = measure(lambda n, b: pool.get_into(n, b), rounds, pool.buffer)
            result["channel, a copy"] = measure(lambda n, b: pool.get_into(n, b), rounds)
        for mode, flags in (("pread O_DIRECT", os.O_DIRECT), ("pread buffered", 0)):
            fds = {}
            for size in data:
                for name in names(size):
                    fds[name] = os.open(f"{mnt}/{name}", os.O_RDONLY | flags)
            result[mode] = measure(lambda n, b: os.preadv(fds[n], [b], 0), rounds)
            for fd in fds.values():
                os.close(fd)
    finally:
        subprocess.run(["timeout", "60", "fusermount3", "-u", mnt], check=True)
        for _ in range(600):
            try:
                os.kill(daemon, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
    shutil.rmtree(work)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default="/dev/shm/stripefs-channel-bench")
    ap.add_argument("--json", help="write every run's figures here")
    a = ap.parse_args()
    stripefs_bin = os.path.abspath(f"{a.build}/tools/stripefs")
    runs = []
    for i in range(a.runs):
        runs.append(run_once(stripefs_bin, a.dir, a.rounds))
        print(f"run {i + 1}: {json.dumps(runs[-1])}", file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(runs, f, indent=1)
    ways = ["in-process", "channel", "channel, a copy", "pread O_DIRECT", "pread buffered"]
    med = {w: {k: statistics.median(r[w][k] for r in runs) for k in ("1M_MBps", "4K_p50_us")} for w in ways}
    print(f"transport of the mount: {runs[0]['transport']}; median of {a.runs} runs")
    print(f"| way | 1 MiB get MB/s | 4 KiB get p50 µs |")
    print(f"|---|---:|---:|")
    for w in ways:
        print(f"| {w} | {med[w]['1M_MBps']:,.0f} | {med[w]['4K_p50_us']:.1f} |")
    for w in ways[3:]:
        print(f"channel / {w}: 1 MiB {med['channel']['1M_MBps'] / med[w]['1M_MBps']:.2f}x the throughput, "
              f"4 KiB p50 {med['channel']['4K_p50_us'] / med[w]['4K_p50_us']:.2f}x the latency")
    print(f"channel / in-process: 1 MiB {med['channel']['1M_MBps'] / med['in-process']['1M_MBps']:.2f}x, "
          f"4 KiB p50 {med['channel']['4K_p50_us'] / med['in-process']['4K_p50_us']:.2f}x")


if __name__ == "__main__":
    main()
