#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/append_bench.py: concurrent O_APPEND writers of tiny records, on raw, stripefs and mergerfs, interleaved.

The shape of a log shared by several processes (issue 20, item 9): --writers
processes (default 6) open one fresh file with O_APPEND and each write(2)s
--record-byte records (default 4) for --runtime seconds. A record is the
writer's letter, a 2-byte count and a newline, so after each run the file is
checked: its size is exactly the records written times their size, every
record is whole, and each writer's records are in the order it wrote them.

Targets, backing and teardown are bench/compare's (bench/bench_targets.py);
the target order rotates every run. The table gives writes/s (all writers
together) per run, the median, and stripefs/raw and stripefs/mergerfs. A
failed check fails the bench (exit status 4).
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve()
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(SCRIPT.parent))
from bench_targets import Targets, add_target_args, die, log, run_main, set_prog  # noqa: E402

set_prog("append_bench", "bench/append_bench.py")

CHECK_FAILED = 4
RECORD = 4  # letter, 2-byte count, newline


def record(writer, i):
    return bytes([65 + writer]) + (i % 65536).to_bytes(2, "big") + b"\n"


def worker(path, writers, runtime):
    """One measurement: writers processes append to a fresh file at path for
    runtime seconds; then the checks. Prints one JSON object."""
    if os.path.exists(path):
        os.unlink(path)
    open(path, "wb").close()
    start = time.monotonic() + 0.2  # every writer starts at once
    pids = []
    for w in range(writers):
        r, wr = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            while time.monotonic() < start:
                pass
            end, n = start + runtime, 0
            while time.monotonic() < end:
                os.write(fd, record(w, n))
                n += 1
            os.close(fd)
            os.write(wr, str(n).encode())
            os._exit(0)
        os.close(wr)
        pids.append((pid, r))
    counts = []
    for pid, r in pids:
        counts.append(int(os.read(r, 64) or b"0"))
        os.close(r)
        os.waitpid(pid, 0)
    total = sum(counts)
    res = {"writes": total, "seconds": runtime, "writes_per_s": total / runtime, "per_writer": counts}
    data = Path(path).read_bytes()
    why = []
    if len(data) != total * RECORD:
        why.append(f"the file holds {len(data)} bytes, {total * RECORD} were written")
    seen = [0] * writers
    for at in range(0, len(data) - len(data) % RECORD, RECORD):
        rec = data[at:at + RECORD]
        w = rec[0] - 65
        if not 0 <= w < writers or rec != record(w, seen[w]):
            why.append(f"record at byte {at} is {rec!r}, not writer {w}'s record {seen[w] if 0 <= w < writers else '?'}")
            break
        seen[w] += 1
    if not why and seen != counts:
        why.append(f"records per writer {seen}, written {counts}")
    res["check"] = "; ".join(why) if why else "ok"
    if not why:
        os.unlink(path)
    print(json.dumps(res))
    return 0


class AppendBench(Targets):
    NAME = "appends"

    def __init__(self, args):
        super().__init__(args)
        self.results = []
        self.check_failures = []

    def per_target_bytes(self):
        return 256 << 20

    def check_tools(self):
        self.check_target_tools()

    def collect_versions(self):
        self.versions["python"] = sys.version.split()[0]
        self.collect_target_versions()

    def measure(self, run, target):
        a = self.a
        rec = {"run": run, "target": target}
        if target in self.broken:
            rec["error"] = f"skipped: {self.broken[target]}"
            self.results.append(rec)
            return
        path = os.path.join(self.targets[target]["dir"], f"append_bench.r{run}")
        os.sync()
        cmd = [sys.executable, str(SCRIPT), "--worker", path, "--writers", str(a.writers), "--runtime", str(a.runtime)]
        rc, out = self.run_child(cmd, timeout=a.runtime + 300)
        try:
            rec.update(json.loads(out.strip().splitlines()[-1]))
        except (ValueError, IndexError, AttributeError):
            rec["error"] = f"worker exited {rc} without a result: {str(out)[-1500:]}"
            self.problems.append(f"run {run} on {target}: {rec['error']}")
            self.mark_broken(target, "the worker failed")
            self.results.append(rec)
            return
        log(f"run {run} {target:8}: {rec['writes_per_s']:10.0f} writes/s, check {rec['check']}")
        if rec["check"] != "ok":
            self.check_failures.append(f"run {run} on {target} ({path}): {rec['check']}")
            self.mark_broken(target, "a check failed")
        self.results.append(rec)

    def main(self):
        a = self.a
        self.check_tools()
        self.collect_versions()
        os.chdir("/")
        self.setup_targets()
        for run in range(1, a.runs + 1):
            k = (run - 1) % len(a.targets)
            for target in a.targets[k:] + a.targets[:k]:
                self.measure(run, target)
        medians = {}
        print(f"\nbench/append_bench.py: {a.writers} processes appending {RECORD}-byte records with O_APPEND to one "
              f"file, {a.runtime:g} s per measurement; median of {a.runs} interleaved run(s)")
        print(f"backing   {self.backing_desc}")
        for t in a.targets:
            ok = [r["writes_per_s"] for r in self.results if r["target"] == t and r.get("check") == "ok"]
            medians[t] = statistics.median(ok) if ok else None
            runs = "  ".join(f"{v:9.0f}" for v in ok)
            print(f"{t:9} {runs}   median {'-' if medians[t] is None else f'{medians[t]:.0f}'} writes/s")
        for o in ("raw", "mergerfs"):
            if "stripefs" in a.targets and o in a.targets and medians.get("stripefs") and medians.get(o):
                print(f"stripefs/{o:9} {medians['stripefs'] / medians[o]:.3f}x")
        if a.json:
            Path(a.json).write_text(json.dumps({"config": {k: v for k, v in vars(a).items() if k != "worker"},
                                                "backing": self.backing_desc, "versions": self.versions,
                                                "results": self.results, "medians": medians,
                                                "check_failures": self.check_failures,
                                                "problems": self.problems}, indent=1) + "\n")


def main():
    p = argparse.ArgumentParser(prog="bench/append_bench.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="example: bench/append_bench.py --backing tmpfs --runs 3 --runtime 5")
    add_target_args(p)
    p.add_argument("--runs", type=int, default=3, help="interleaved runs (default 3)")
    p.add_argument("--runtime", type=float, default=5, help="seconds per measurement (default 5)")
    p.add_argument("--writers", type=int, default=6, help="appending processes (default 6)")
    p.add_argument("--json", metavar="FILE", help="write every run's figures and the medians")
    p.add_argument("--worker", metavar="FILE", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        return worker(a.worker, a.writers, a.runtime)
    if a.runs < 1 or a.writers < 1 or a.writers > 26 or a.runtime <= 0:
        p.error("--runs >= 1, --writers from 1 to 26 and a positive --runtime")
    if a.json:
        a.json = os.path.abspath(a.json)
    if os.geteuid() != 0 and a.backing == "tmpfs" and not a.tmpfs_dir:
        die("mounting a tmpfs needs root: run as root or give --tmpfs-dir /dev/shm")
    b = AppendBench(a)
    rc, _ = run_main(b, b.main)
    if b.check_failures:
        print("\nbench/append_bench.py: FAILED: " + "; ".join(b.check_failures), file=sys.stderr)
        rc = CHECK_FAILED if rc in (0, 3) else rc
    return rc


if __name__ == "__main__":
    sys.exit(main())
