#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Compares an allocation_strategy_bench output with the seed's tables (BENCHMARKS.md §1).

usage: compare_seed.py OURS.tsv [SEED.txt] [--markdown]

For every row of OURS it prints UtilRatio_avg, Throughput, P50, P99, Succ/Total,
the seed's row for the same workload, skew, strategy, replicas and segments
(Striped and TwoChoice, which the seed lacks, are set beside the seed's Random
row, the faster of its two), and whether the targets are met (a "*" after
Thr/seed: our cluster is not the seed's size, e.g. --quick's 256G segments, so
the live set and the allocator's trees are smaller than the seed's):
UtilRatio_avg >= 0.999 (rows with Succ == Total), throughput above the seed's,
P99 under 2 us.
"""
import sys

DEFAULT_SEED = "/work/shared/seeds/000_577f1a0878d1e1ff.txt"


def parse(path):
    """{(workload, skewed, strategy): {(replica, segments): {column: value}}}"""
    tables, key, header = {}, None, None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#") and "\t" not in line and " / Skewed=" not in line:
                continue
            if " / Skewed=" in line and "\t" not in line:
                parts = [p.strip().rstrip("#") for p in line.split(" / ")]
                workload = "kv" if parts[0].startswith("KV") else "paired"
                key = (workload, parts[1].split("=")[1], parts[2])
                tables[key] = {}
                header = None
                continue
            cells = line.split("\t")
            if cells[0] == "Replica":
                header = cells
                continue
            if key is None or header is None or len(cells) != len(header):
                continue
            row = dict(zip(header, cells))
            tables[key][(int(row["Replica"]), int(row["Segments"]))] = row
    return tables


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    md = "--markdown" in sys.argv
    if not args:
        print(__doc__)
        return 2
    ours = parse(args[0])
    seed = parse(args[1] if len(args) > 1 else DEFAULT_SEED)
    cols = ["Workload", "Skewed", "Strategy", "R", "S", "UtilRatio_avg", "Throughput", "P50(ns)", "P99(ns)",
            "Succ/Total", "Seed thr", "Seed P99", "Seed util", "Thr/seed", "Util>=0.999", "Thr>seed", "P99<2us"]
    sep = " | " if md else "\t"
    if md:
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
    else:
        print("\t".join(cols))
    met = {"util": [0, 0], "thr": [0, 0], "p99": [0, 0]}
    for (workload, skewed, strategy), rows in ours.items():
        seed_strategy = strategy if (workload, skewed, strategy) in seed else "Random"
        seed_rows = seed.get((workload, skewed, seed_strategy), {})
        for (r, s), row in rows.items():
            sr = seed_rows.get((r, s))
            succ, total = (int(x) for x in row["Succ/Total"].split("/"))
            util = row["UtilRatio_avg"]
            thr = float(row["Throughput"])
            p99 = int(row["P99(ns)"])
            ok_util = "n/a" if succ != total or util == "-" else ("yes" if float(util) >= 0.999 else "NO")
            ok_thr = "n/a" if not sr else ("yes" if thr > float(sr["Throughput"]) else "NO")
            ok_p99 = "yes" if p99 < 2000 else "NO"
            for name, ok in (("util", ok_util), ("thr", ok_thr), ("p99", ok_p99)):
                if ok != "n/a":
                    met[name][1] += 1
                    met[name][0] += ok == "yes"
            strat = strategy if seed_strategy == strategy else strategy + " (vs Random)"
            cells = [workload, skewed, strat, str(r), str(s), util, row["Throughput"], row["P50(ns)"], row["P99(ns)"],
                     row["Succ/Total"], sr["Throughput"] if sr else "-", sr["P99(ns)"] if sr else "-",
                     sr["UtilRatio_avg"] if sr else "-",
                     (f"{thr / float(sr['Throughput']):.2f}" +
                      ("" if row["Cluster(GB)"] == sr["Cluster(GB)"] else "*")) if sr else "-", ok_util, ok_thr, ok_p99]
            print(("| " + sep.join(cells) + " |") if md else sep.join(cells))
    print(f"\n# targets met: UtilRatio_avg>=0.999 {met['util'][0]}/{met['util'][1]} rows, "
          f"throughput>seed {met['thr'][0]}/{met['thr'][1]}, P99<2us {met['p99'][0]}/{met['p99'][1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
