#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/sqlite_bench.py: sqlite commits/s on the raw backing, a stripefs mount and mergerfs, interleaved.

A real application's bench (BENCHMARKS.md section 6): sqlite3 (Python's
sqlite3 module) in WAL mode with synchronous=FULL, one INSERT per
transaction (BEGIN; INSERT; COMMIT), for --runtime seconds or --rows rows,
whichever comes first, into a fresh database on each target:

  raw       a plain directory on the backing;
  stripefs  `stripefs mkfs` with 4 sparse drive files on the backing, mounted;
  mergerfs  mergerfs over 4 directories on the backing, bench/compare's options.

The backing, the targets and their teardown are bench/compare's
(bench/bench_targets.py). Every run measures every target; the order of the
targets rotates from run to run (raw, stripefs, mergerfs; then stripefs,
mergerfs, raw; ...), so drift on a shared machine hits all alike. The table
gives each run's commits/s, the median and the ratios stripefs/raw and
stripefs/mergerfs.

Each measurement runs in a child process (this script with --worker), so a
hung filesystem can be timed out. After the inserts it closes the database,
opens it again and checks that PRAGMA integrity_check says "ok" and that the
table holds exactly as many rows as inserts were committed. A failed check
fails the bench: the target is not measured again, the failure is printed
under the table and the exit status is 4.

Everything the script starts is undone on exit, including on errors and
Ctrl-C: the worker is stopped, stripefs and mergerfs are unmounted and their
daemons waited for (killed by pid only if they do not exit), the temp dirs
and the tmpfs are removed.
"""

import argparse
import json
import os
import sqlite3
import statistics
import sys
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve()
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(SCRIPT.parent))
from bench_targets import (  # noqa: E402  (bench/compare's backing, targets and teardown)
    Targets, add_target_args, die, log, run_main, set_prog)

set_prog("sqlite_bench", "bench/sqlite_bench.py")

CHECK_FAILED = 4


# ------------------------------------------------------------------ worker
def percentile(sorted_vals, q):
    if not sorted_vals:
        return None
    return sorted_vals[min(len(sorted_vals) - 1, int(q * len(sorted_vals)))]


def worker(db, runtime, rows, row_size):
    """One measurement: fresh database at db, commits until runtime or rows,
    then the checks on a new connection. Prints one JSON object."""
    res = {"db": db, "committed": 0}
    try:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.unlink(db + suffix)
        con = sqlite3.connect(db, isolation_level=None)  # autocommit: the BEGIN/COMMIT below are ours
        res["journal_mode"] = con.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        con.execute("PRAGMA synchronous=FULL")
        res["synchronous"] = con.execute("PRAGMA synchronous").fetchone()[0]
        if res["journal_mode"].lower() != "wal" or res["synchronous"] != 2:
            raise RuntimeError(f"journal_mode={res['journal_mode']} synchronous={res['synchronous']} "
                               "(wanted wal and 2 = FULL)")
        con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB NOT NULL)")
        payload = os.urandom(row_size)
        lat = []
        committed = 0
        clock = time.perf_counter
        t0 = clock()
        end = t0 + runtime if runtime else float("inf")
        t1 = t0
        while True:
            s = clock()
            con.execute("BEGIN")
            con.execute("INSERT INTO t(v) VALUES (?)", (payload,))
            con.execute("COMMIT")
            t1 = clock()
            committed += 1
            res["committed"] = committed
            lat.append(t1 - s)
            if t1 >= end or (rows and committed >= rows):
                break
        res["seconds"] = t1 - t0
        res["commits_per_s"] = committed / res["seconds"]
        lat.sort()
        res["commit_us_p50"] = percentile(lat, 0.50) * 1e6
        res["commit_us_p99"] = percentile(lat, 0.99) * 1e6
        res["commit_us_max"] = lat[-1] * 1e6
        con.close()
    except Exception as e:  # sqlite3.Error, OSError: the run failed before its checks
        res["error"] = f"{type(e).__name__}: {e} (after {res['committed']} commits)"
        print(json.dumps(res))
        return 1
    try:  # the checks, on a new connection to the closed database
        con = sqlite3.connect(db, isolation_level=None)
        res["integrity_check"] = [r[0] for r in con.execute("PRAGMA integrity_check").fetchall()]
        res["rows"] = con.execute("SELECT count(*) FROM t").fetchone()[0]
        con.close()
        res["db_bytes"] = os.stat(db).st_size
        for suffix in ("", "-wal", "-shm"):  # keep the backing small; a failed check keeps its files
            if res["integrity_check"] == ["ok"] and res["rows"] == committed and os.path.exists(db + suffix):
                os.unlink(db + suffix)
    except Exception as e:
        res["check_error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(res))
    return 0


# ------------------------------------------------------------------- bench
class SqliteBench(Targets):
    NAME = "sqlite"

    def __init__(self, args):
        super().__init__(args)
        self.results = []          # one dict per measurement
        self.check_failures = []   # clear messages; any of them fails the bench
        self.rows = None

    def per_target_bytes(self):
        # A database of --runtime seconds of 100-byte rows stays far below this,
        # the WAL at ~4 MiB (auto-checkpoint every 1000 pages); the drive files
        # are sparse, so this is address space.
        return 256 << 20

    def check_tools(self):
        self.check_target_tools()

    def collect_versions(self):
        v = self.versions
        v["sqlite"] = sqlite3.sqlite_version
        v["python"] = sys.version.split()[0]
        self.collect_target_versions()

    def measure(self, run, target, pos):
        a = self.a
        rec = {"run": run, "target": target, "position": pos}
        if target in self.broken:
            rec["error"] = f"skipped: {self.broken[target]}"
            self.results.append(rec)
            return
        db = os.path.join(self.targets[target]["dir"], f"sqlite_bench.r{run}.db")
        os.sync()  # the previous run's writeback is not this run's cost
        cmd = [sys.executable, str(SCRIPT), "--worker", db, "--runtime", str(a.runtime),
               "--rows", str(a.rows), "--row-size", str(a.row_size)]
        timeout = (a.runtime + 120) if a.runtime else 3600
        rc, out = self.run_child(cmd, timeout=timeout)
        if rc is None:
            rec["error"] = f"worker {out}"
            self.results.append(rec)
            self.mark_broken(target, f"sqlite worker {out} (hung?)")
            return
        try:
            w = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            w = {"error": f"worker exited {rc} without a result: {out[-1500:]}"}
        rec.update(w)
        if "error" in w:
            self.problems.append(f"run {run} on {target}: {w['error']}")
            log(f"run {run} {target:8}: FAILED: {w['error']}")
        else:
            why = []
            if "check_error" in w:
                why.append(f"the check could not run: {w['check_error']}")
            else:
                if w["integrity_check"] != ["ok"]:
                    why.append("PRAGMA integrity_check says " + "; ".join(w["integrity_check"])[:1000])
                if w["rows"] != w["committed"]:
                    why.append(f"the table holds {w['rows']} rows but {w['committed']} inserts were committed")
            rec["check"] = "FAILED" if why else "ok"
            log(f"run {run} {target:8}: {w['commits_per_s']:10.1f} commits/s ({w['committed']} commits in "
                f"{w['seconds']:.2f} s, p50 {w['commit_us_p50']:.0f} us, p99 {w['commit_us_p99']:.0f} us); "
                f"integrity_check {'+'.join(w.get('integrity_check', ['?']))[:40]}, rows {w.get('rows')}")
            if why:
                msg = f"CHECK FAILED: run {run} on {target} ({db}): {'; '.join(why)}"
                self.check_failures.append(msg)
                log(msg)
                self.mark_broken(target, "a check failed")
        self.results.append(rec)
        if target in self.targets and not self.target_alive(target):
            self.mark_broken(target, "mount gone or daemon dead after a run")

    def run_all(self):
        a = self.a
        per = f"{a.runtime:g}" if a.runtime else "?"
        log(f"{len(a.targets)} targets x {a.runs} runs of {per} s")
        for run in range(1, a.runs + 1):
            k = (run - 1) % len(a.targets)
            order = a.targets[k:] + a.targets[:k]
            log(f"run {run}/{a.runs}: order {', '.join(order)}")
            for pos, target in enumerate(order):
                self.measure(run, target, pos)

    # -------------------------------------------------------------- report
    def summary(self):
        a = self.a
        rows = {}
        for t in a.targets:
            ok = [r for r in self.results if r["target"] == t and r.get("check") == "ok"]
            vals = [r["commits_per_s"] for r in sorted(ok, key=lambda r: r["run"])]
            rows[t] = {
                "runs": vals,
                "median": statistics.median(vals) if vals else None,
                "commit_us_p50": statistics.median([r["commit_us_p50"] for r in ok]) if ok else None,
                "commit_us_p99": statistics.median([r["commit_us_p99"] for r in ok]) if ok else None,
            }
        for other in ("raw", "mergerfs"):
            s = rows.get("stripefs", {}).get("median")
            o = rows.get(other, {}).get("median")
            rows[f"stripefs/{other}"] = (s / o) if (s is not None and o) else None
        return rows

    def print_table(self, rows):
        a = self.a
        v = self.versions
        limit = f"{a.runtime:g} s" if a.runtime else ""
        if a.rows:
            limit = f"{limit} or {a.rows} rows, whichever first" if limit else f"{a.rows} rows"
        print()
        print(f"bench/sqlite_bench.py: sqlite {v['sqlite']} (Python {v['python']} sqlite3), journal_mode=WAL, "
              f"synchronous=FULL, one INSERT of a {a.row_size}-byte blob per transaction, {limit} per "
              f"measurement; median of {a.runs} interleaved run(s) (target order rotated each run)")
        print(f"backing   {self.backing_desc}")
        for t in a.targets:
            if t in self.targets:
                print(f"{t:9} {self.targets[t]['desc']}")
        vers = [f"kernel {v['kernel']}", v["fusermount3"], f"{v['cpus']} CPUs"]
        if "mergerfs" in v:
            vers.insert(0, v["mergerfs"])
        if "stripefs" in v:
            vers.insert(0, f"stripefs {v['stripefs']} ({v['stripefs_binary']} built "
                           f"{v['stripefs_binary_mtime']}, checkout HEAD {v.get('stripefs_git', '?')})")
        print(f"versions  {'; '.join(vers)}")
        v["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"load      {v['loadavg_start']} at start, {v['loadavg_end']} at end "
              f"(1/5/15-min load average; the machine may be shared)")
        print()
        hdr = ["target"] + [f"run {i}" for i in range(1, a.runs + 1)] + ["median commits/s", "p50 commit us",
                                                                        "p99 commit us", "checks"]
        table = [hdr]
        for t in a.targets:
            line = [t]
            for run in range(1, a.runs + 1):
                r = next((r for r in self.results if r["target"] == t and r["run"] == run), None)
                if r is None or "error" in r:
                    line.append("FAIL" if r is not None and not r["error"].startswith("skipped") else "-")
                elif r.get("check") != "ok":
                    line.append(f"{r['commits_per_s']:.0f} BAD")
                else:
                    line.append(f"{r['commits_per_s']:.0f}")
            s = rows[t]
            line.append("-" if s["median"] is None else f"{s['median']:.0f}")
            line.append("-" if s["commit_us_p50"] is None else f"{s['commit_us_p50']:.0f}")
            line.append("-" if s["commit_us_p99"] is None else f"{s['commit_us_p99']:.0f}")
            runs = [r for r in self.results if r["target"] == t and "check" in r]
            bad = sum(1 for r in runs if r["check"] != "ok")
            line.append(f"{len(runs) - bad}/{a.runs} ok" if not bad else f"{bad} FAILED")
            table.append(line)
        widths = [max(len(row[i]) for row in table) for i in range(len(hdr))]
        for row in table:
            print("  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(row, widths))))
        if "stripefs" in a.targets:
            print()
            for o in ("raw", "mergerfs"):
                if o in a.targets:
                    q = rows[f"stripefs/{o}"]
                    print(f"stripefs/{o:9} {'-' if q is None else f'{q:.2f}x' if q >= 0.095 else f'{q:.2g}x'}"
                          "  (ratio of the medians)")
        print("\nchecks: after each run, on a new connection: PRAGMA integrity_check = ok and "
              "count(*) = committed inserts")

    def write_json(self, rows, final_mounts):
        a = self.a
        doc = {
            "config": {k: v for k, v in vars(a).items() if k not in ("json", "worker")},
            "backing": self.backing_desc, "versions": self.versions,
            "targets": {t: {k: v for k, v in d.items() if k != "pid"} for t, d in self.targets.items()},
            "mergerfs_options": a.mergerfs_opts if "mergerfs" in a.targets else None,
            "results": self.results, "summary": rows, "check_failures": self.check_failures,
            "problems": self.problems, "mounts_left": final_mounts,
        }
        Path(a.json).write_text(json.dumps(doc, indent=1) + "\n")
        log(f"wrote {a.json}")

    def main(self):
        self.check_tools()
        self.collect_versions()
        os.chdir("/")
        self.setup_targets()
        self.run_all()
        self.rows = self.summary()
        self.print_table(self.rows)


def build_parser():
    p = argparse.ArgumentParser(
        prog="bench/sqlite_bench.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__,
        epilog="""examples:
  bench/sqlite_bench.py                                       # tmpfs backing, 3 runs of 10 s per target
  bench/sqlite_bench.py --backing tmpfs --runs 3 --runtime 5 --stripefs /work/main/build/tools/stripefs
  bench/sqlite_bench.py --backing disk --json sqlite.json     # a directory under /var/tmp on the root disk
  bench/sqlite_bench.py --targets raw,stripefs --runs 1 --runtime 1 --tmpfs-dir /dev/shm

Needs root (tmpfs mount, apt-get install mergerfs if missing) and /dev/fuse.

exit status: 0 all measured and checked; 1 internal error or something left
behind; 2 bad setup (missing tool, mkfs/mount failed); 3 a run failed (sqlite
error, listed under "problems"); 4 a check failed (integrity_check not ok, or
the row count is not the number of committed inserts); 130/143 interrupted
(everything cleaned up).""")
    add_target_args(p)
    p.add_argument("--runs", type=int, default=3, help="interleaved runs; the table shows medians (default 3)")
    p.add_argument("--runtime", type=float, default=10,
                   help="seconds of inserts per measurement, 0 for no time limit (then --rows) (default 10)")
    p.add_argument("--rows", type=int, default=0,
                   help="stop a measurement after this many committed inserts (default 0: no limit)")
    p.add_argument("--row-size", type=int, default=100, help="bytes of the blob in each row (default 100)")
    p.add_argument("--json", metavar="FILE", help="write the configuration, every run's figures and the medians")
    p.add_argument("--worker", metavar="DB", help=argparse.SUPPRESS)
    return p


def main():
    parser = build_parser()
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.runtime, args.rows, args.row_size)
    if args.runs < 1 or args.drives < 1:
        parser.error("--runs and --drives must be at least 1")
    if args.runtime < 0 or args.rows < 0 or (not args.runtime and not args.rows):
        parser.error("give a positive --runtime or --rows")
    if args.row_size < 1:
        parser.error("--row-size must be at least 1")
    if args.json:
        args.json = os.path.abspath(args.json)
    if args.logs:
        args.logs = os.path.abspath(args.logs)
    if os.geteuid() != 0 and args.backing == "tmpfs" and not args.tmpfs_dir:
        die("mounting a tmpfs needs root: run as root or give --tmpfs-dir /dev/shm")

    b = SqliteBench(args)
    rc, ours = run_main(b, b.main)
    if b.check_failures:
        print("\nbench/sqlite_bench.py: FAILED: a check after a run did not hold:", file=sys.stderr)
        for m in b.check_failures:
            print(f"  - {m}", file=sys.stderr)
        rc = CHECK_FAILED if rc in (0, 3) else rc
    if args.json and b.results:
        try:
            b.write_json(b.rows if b.rows is not None else b.summary(), ours)
        except Exception as e:
            log(f"could not write {args.json}: {e}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
