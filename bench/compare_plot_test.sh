#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Test of bench/compare --plot and --plot-from (ctest label "bench"). No
# figure or timing is checked, only the picture's shape:
#
#  1. --plot-from a JSON written here in the shape --json writes (raw,
#     stripefs, mergerfs and null; a cell mergerfs cannot run, a cell with
#     2 of 3 runs): a well-formed SVG that names every target, the units, the
#     backing and the runs, marks the stripefs bars with stripefs/mergerfs;
#     drawn twice, byte for byte the same file; .png gives a PNG; with
#     stripefs-uring and null-uring added, their bars and the marks
#     stripefs-uring/stripefs;
#  2. the errors: a missing or broken JSON, --plot-from without --plot, and
#     matplotlib missing (a stand-in package that fails to import): a message
#     and exit status 2, before anything runs;
#  3. a tiny real run (raw and stripefs, 1 run of 1 s, two jobs) with --json
#     and --plot: its SVG, and --plot-from its JSON draws the same file.
#
#   compare_plot_test.sh STRIPEFS_BINARY
#
# bench/compare cleans up after itself; should it be killed, the EXIT trap
# unmounts what is left under the private directory and removes it.
set -euo pipefail

export STRIPEFS=$1
here=$(cd "$(dirname "$0")" && pwd)
compare=$here/compare
dir=$(mktemp -d /dev/shm/stripefs-compare-plot.XXXXXX)

cleanup() {
    local rc=$? m
    set +e
    trap - EXIT
    while read -r m; do
        umount "$m" 2>/dev/null || { sleep 0.5; umount "$m" 2>/dev/null; } || umount -l "$m"
        echo "compare_plot_test: cleanup: unmounted $m left by bench/compare" >&2
        ((rc != 0)) || rc=1
    done < <(awk -v d="$dir/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r)
    if awk -v d="$dir/" 'index($5, d) == 1 {found = 1} END {exit !found}' /proc/self/mountinfo; then
        echo "compare_plot_test: cleanup: a mount is still under $dir; not removing it" >&2
    else
        rm -rf --one-file-system "$dir"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() { echo "compare_plot_test: FAIL: $*" >&2; exit 1; }
ok() { echo "compare_plot_test: ok: $*"; }

# check_svg FILE WORD...: FILE is an SVG document (XML with an <svg> root) whose text holds every WORD.
check_svg() {
    python3 - "$@" <<'EOF'
import sys
import xml.etree.ElementTree as ET
path, words = sys.argv[1], sys.argv[2:]
head = open(path, "rb").read(200)
if not (head.startswith(b"<?xml") and b"<svg" in open(path, "rb").read()):
    sys.exit(f"{path}: no XML header or no <svg> element: {head[:80]!r}")
root = ET.parse(path).getroot()
if root.tag != "{http://www.w3.org/2000/svg}svg":
    sys.exit(f"{path}: the root element is {root.tag}, not svg")
text = " ".join(t for e in root.iter() if e.tag.endswith("}text") for t in e.itertext())
missing = [w for w in words if w not in text]
if missing:
    sys.exit(f"{path}: the picture's text lacks {missing}; it has: {text[:1500]}")
EOF
}

# ---- 1. --plot-from a JSON in --json's shape
python3 - "$dir/fixture.json" <<'EOF'
import json, statistics, sys
targets = ["raw", "stripefs", "mergerfs", "null"]
unit = {"seqread": "MB/s", "seqwrite": "MB/s", "randread": "IOPS", "randwrite": "IOPS"}
figs = {  # job -> target -> the 3 runs' figures (MB/s or IOPS); None: the run failed
    "seqread": {"raw": [32133, 31000, 33000], "stripefs": [9442, 9000, 9800],
                "mergerfs": [2649, 2600, 2700], "null": [12000, 12500, 11800]},
    "seqwrite": {"raw": [22950, 22000, 23500], "stripefs": [6929, 7000, None],
                 "mergerfs": [None, None, None], "null": [11000, 11200, 10900]},
    "randread": {"raw": [1991689, 1900000, 2000000], "stripefs": [188749, 180000, 190000],
                 "mergerfs": [203719, 200000, 210000], "null": [250000, 240000, 260000]},
    "randwrite": {"raw": [1914431, 1900000, 1950000], "stripefs": [32766, 32000, 33000],
                  "mergerfs": [195876, 190000, 200000], "null": [240000, 235000, 245000]},
}
einval = "EINVAL: mergerfs 2.33.5 cannot write with O_DIRECT on this backing"
results, summary = [], []
for job, per in figs.items():
    row = {"job": job, "ioengine": "psync", "direct": 1, "unit": unit[job], "iodepth": 1}
    for t in targets:
        ok = [v for v in per[t] if v is not None]
        for run, v in enumerate(per[t], start=1):
            rec = {"run": run, "job": job, "ioengine": "psync", "direct": 1, "target": t,
                   "position": (targets.index(t) - run + 1) % 4, "iodepth": 1}
            if v is None:
                rec["error"] = einval if (t, job) == ("mergerfs", "seqwrite") else "fio exited 1"
            else:
                bw = v * 1e6 if unit[job] == "MB/s" else v * 4096
                rec.update({"bw_bytes": bw, "iops": bw / 4096 if unit[job] == "IOPS" else bw / (1 << 20),
                            "io_bytes": bw * 5, "runtime_ms": 5000, "clat_mean_ns": 1000.0,
                            "clat_p50_ns": 900, "clat_p99_ns": 5000, "usr_cpu": 1.0, "sys_cpu": 20.0})
            results.append(rec)
        row[t] = statistics.median(ok) if ok else None
        row[f"{t}_runs"] = ok
        if (t, job) == ("mergerfs", "seqwrite"):
            row[f"{t}_unsupported"] = einval
    for o in ("raw", "mergerfs", "null"):
        s, d = row["stripefs"], row[o]
        row[f"stripefs/{o}"] = s / d if (s is not None and d) else None
    row["mergerfs/null"] = row["mergerfs"] / row["null"] if row["mergerfs"] is not None else None
    summary.append(row)
doc = {
    "config": {"backing": "tmpfs", "disk_dir": "/var/tmp", "tmpfs_dir": None, "targets": targets,
               "null_fuse": None, "drives": 4, "stripefs": None, "chunk_size": None, "mkfs_opt": [],
               "stripefs_mount_opts": None, "mergerfs_opts": "cache.files=partial", "logs": None,
               "jobs": list(figs), "ioengines": ["psync"], "direct": [1], "runs": 3, "runtime": 5, "ramp": 1,
               "size": 1 << 30, "numjobs": 2, "iodepth": 16, "no_drop_caches": False, "meta": False,
               "meta_only": False, "meta_files": 100000, "meta_runs": 3, "metadata_bench": None},
    "command": ["bench/compare", "--targets", ",".join(targets), "--runs", "3", "--runtime", "5"],
    "date": "2026-12-04 12:00:00 +0000",
    "backing": "tmpfs: a tmpfs mounted at /tmp/stripefs-compare.x/backing (size cap 10G)",
    "versions": {"fio": "fio-3.33", "kernel": "6.1.0", "fusermount3": "fusermount3 version: 3.14.0", "cpus": 2,
                 "loadavg_start": "0.10 0.20 0.30", "loadavg_end": "2.00 1.50 1.00",
                 "mergerfs": "mergerfs v2.33.5", "stripefs": "stripefs 0.1.0"},
    "targets": {t: {"dir": f"/tmp/x/{t}", "desc": t} for t in targets},
    "mergerfs_options": "cache.files=partial", "results": results, "summary": summary, "metadata": None,
    "problems": ["run 3 seqwrite psync direct=1 on stripefs: fio exited 1"], "notes": [einval],
    "mounts_left": [],
}
open(sys.argv[1], "w").write(json.dumps(doc, indent=1) + "\n")
EOF
"$compare" --plot "$dir/fixture.svg" --plot-from "$dir/fixture.json" 2>"$dir/err.txt" \
    || fail "--plot-from a well-formed JSON exited $?: $(cat "$dir/err.txt")"
check_svg "$dir/fixture.svg" raw stripefs mergerfs null MB/s IOPS tmpfs "median of 3" "5 s" seqread randwrite \
    "3.56×" "0.17×" "stripefs / mergerfs" EINVAL "(2/3)" "2 CPUs" 2026-12-04 || fail "fixture.svg"
size=$(stat -c %s "$dir/fixture.svg")
((size < 200000)) || fail "fixture.svg is $size bytes"
ok "--plot-from: a ${size}-byte SVG with every target, both units, the ratios, EINVAL and (2/3)"
"$compare" --plot "$dir/again.svg" --plot-from "$dir/fixture.json" 2>/dev/null || fail "the second --plot-from"
cmp -s "$dir/fixture.svg" "$dir/again.svg" || fail "the same JSON drawn twice gives different SVGs"
ok "the same JSON drawn twice gives the same SVG"
"$compare" --plot "$dir/fixture.png" --plot-from "$dir/fixture.json" 2>/dev/null || fail "--plot x.png"
[[ $(head -c 8 "$dir/fixture.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "fixture.png is no PNG"
ok "--plot FILE.png writes a PNG"
# The transport targets: the same fixture plus stripefs-uring and null-uring
# (their bars, colours and the stripefs-uring/stripefs marks).
python3 - "$dir/fixture.json" "$dir/uring.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["config"]["targets"] += ["stripefs-uring", "null-uring"]
for row in doc["summary"]:
    for t, twin, k in (("stripefs-uring", "stripefs", 1.25), ("null-uring", "null", 1.5)):
        v = row[twin]
        row[t] = v * k if v is not None else None
        row[f"{t}_runs"] = [x * k for x in row[f"{twin}_runs"]]
    row["stripefs-uring/stripefs"] = 1.25 if row["stripefs"] is not None else None
json.dump(doc, open(sys.argv[2], "w"))
EOF
"$compare" --plot "$dir/uring.svg" --plot-from "$dir/uring.json" 2>"$dir/err.txt" \
    || fail "--plot-from with the uring targets exited $?: $(cat "$dir/err.txt")"
check_svg "$dir/uring.svg" stripefs-uring null-uring "1.25×" "stripefs-uring / stripefs" "stripefs / mergerfs" \
    || fail "uring.svg"
ok "--plot-from with stripefs-uring and null-uring: their bars and stripefs-uring/stripefs"

# ---- 2. the errors: a message and exit status 2
expect_error() {  # expect_error WHAT MESSAGE-PART ARGS...
    local what=$1 want=$2 rc=0
    shift 2
    "$compare" "$@" >"$dir/out.txt" 2>"$dir/err.txt" || rc=$?
    ((rc == 2)) || fail "$what: exit status $rc, expected 2 ($(cat "$dir/err.txt"))"
    grep -qF -- "$want" "$dir/err.txt" || fail "$what: no '$want' in: $(cat "$dir/err.txt")"
    ok "$what: exit 2, '$(grep -F -- "$want" "$dir/err.txt" | head -n 1)'"
}
expect_error "a missing JSON" "cannot read it" --plot "$dir/x.svg" --plot-from "$dir/none.json"
echo '{"config": {"targets": ["raw"]}, "summary": [' >"$dir/broken.json"
expect_error "a broken JSON" "cannot read it" --plot "$dir/x.svg" --plot-from "$dir/broken.json"
echo '{"results": []}' >"$dir/other.json"
expect_error "a JSON not from --json" "not a bench/compare --json file" --plot "$dir/x.svg" --plot-from "$dir/other.json"
expect_error "--plot-from without --plot" "--plot-from needs --plot" --plot-from "$dir/fixture.json"
mkdir -p "$dir/nompl/matplotlib"
echo 'raise ImportError("stand-in: no matplotlib here")' >"$dir/nompl/matplotlib/__init__.py"
PYTHONPATH=$dir/nompl expect_error "matplotlib missing (--plot-from)" "apt-get install python3-matplotlib" \
    --plot "$dir/x.svg" --plot-from "$dir/fixture.json"
PYTHONPATH=$dir/nompl expect_error "matplotlib missing (a run)" "apt-get install python3-matplotlib" \
    --plot "$dir/x.svg" --targets raw --jobs seqread --runs 1 --runtime 1 --tmpfs-dir "$dir"
[[ ! -e $dir/x.svg ]] || fail "an SVG was written although matplotlib was missing"
[[ -z $(find "$dir" -maxdepth 1 -name 'stripefs-compare.*') ]] || fail "the run started although matplotlib was missing"

# ---- 3. a tiny real run with --json and --plot, then --plot-from its JSON
status=0
timeout --kill-after=10 90 env TMPDIR="$dir" "$compare" --targets raw,stripefs --jobs seqread,randwrite \
    --runs 1 --runtime 1 --ramp 0 --size 8M --tmpfs-dir "$dir" --no-drop-caches --stripefs "$STRIPEFS" \
    --json "$dir/run.json" --plot "$dir/run.svg" >"$dir/run.txt" 2>"$dir/run.err" || status=$?
((status == 0)) || fail "the tiny run exited $status: $(tail -n 20 "$dir/run.err")"
check_svg "$dir/run.svg" raw stripefs MB/s IOPS tmpfs "median of 1 interleaved run," "1 s each" seqread randwrite \
    "stripefs / raw" "×" || fail "run.svg"
ok "a tiny run with --json and --plot: $(stat -c %s "$dir/run.svg")-byte SVG"
"$compare" --plot "$dir/redrawn.svg" --plot-from "$dir/run.json" 2>/dev/null || fail "--plot-from run.json"
cmp -s "$dir/run.svg" "$dir/redrawn.svg" || fail "--plot-from the run's JSON draws another SVG than the run did"
ok "--plot-from the run's JSON draws the same SVG as the run"
leftover=$(find "$dir" -mindepth 1 -maxdepth 1 -name 'stripefs-compare.*')
[[ -z $leftover ]] || fail "bench/compare left $leftover behind"
echo "compare_plot_test: all checks passed"
