#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A ram directory against a drive directory of the same mount.

Formats a pool (2 drive files and a RAM segment) in --dir, mounts it, and
times, in interleaved rounds, files created, written (--size bytes), fsynced
and closed in a directory with strategy ram and in one on the drives. Prints
the median per file of each and the ratio. The metadata (RocksDB) lives in
--dir too, so the drive directory's fsync pays for the drives and the WAL.

    bench/ram_dir_bench.py [--dir /var/tmp] [--rounds 5] [--files 300] [--size 65536]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def run(path, files, data, tag):
    start = time.perf_counter()
    for i in range(files):
        fd = os.open(f"{path}/{tag}_{i}", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
    return (time.perf_counter() - start) / files * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/var/tmp", help="where the drive files and metadata go (the backing)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--size", type=int, default=64 * 1024)
    ap.add_argument("--stripefs", default=os.environ.get("STRIPEFS", "build/tools/stripefs"))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ram_dir_bench.", dir=a.dir)
    meta, mnt = f"{work}/meta", f"{work}/mnt"
    os.mkdir(mnt)
    subprocess.run([a.stripefs, "mkfs", "--meta", meta, "--drive", f"{work}/d0:2G", "--drive", f"{work}/d1:2G",
                    "--ram", "512M"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([a.stripefs, "mount", meta, mnt], check=True)
    pid = int(open(f"{meta}/daemon.pid").read())
    try:
        os.mkdir(f"{mnt}/ram")
        os.mkdir(f"{mnt}/drives")
        os.setxattr(f"{mnt}/ram", "user.stripefs.strategy", b"ram")
        data = os.urandom(a.size)
        times = {"drives": [], "ram": []}
        for r in range(a.rounds):
            for d in ("drives", "ram") if r % 2 == 0 else ("ram", "drives"):
                times[d].append(run(f"{mnt}/{d}", a.files, data, f"r{r}"))
        backing = subprocess.run(["df", "--output=fstype,source", a.dir], capture_output=True, text=True).stdout
        print(f"# ram_dir_bench: {a.files} files of {a.size} B per round, create + write + fsync + close; "
              f"{a.rounds} interleaved rounds; backing {a.dir} ({' '.join(backing.split()[2:])})")
        print("| directory | µs per file (median) | rounds |\n|---|---:|---|")
        for d in ("drives", "ram"):
            print(f"| {d} | {statistics.median(times[d]):.0f} | {', '.join(f'{t:.0f}' for t in times[d])} |")
        print(f"\nram / drives time: {statistics.median(times['ram']) / statistics.median(times['drives']):.3f}")
    finally:
        subprocess.run(["fusermount3", "-u", mnt], check=False)
        for _ in range(100):  # the daemon exits once the unmount is done
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
