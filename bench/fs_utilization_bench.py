#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""fs_utilization_bench: how much of the drive capacity the seed-000 workload
fills (BENCHMARKS.md §5), through a mount and through the object API.

For each mode ("kv": files of 3,274,752 B; "paired": each step one of those and
one indexer file of 658,432 B) it formats a fresh pool of --drives drive files
of --drive-size (no RAM segment) in a work directory made under --workdir
(default /dev/shm), mounts it, and writes files (one open/write/close each, the
same random bytes every time) until a write fails with ENOSPC. Then it removes
the partial file, samples, evicts 5 % of the live files (at least one) chosen
at random (random.Random(--seed)), runs os.sync(), and goes on, writing the
failed file again. The first failure (the first fill) is the warm-up; at each
of the next --rounds failures, before the eviction, it samples

    util    = bytes in live files / total drive capacity
    df_used = used / capacity of the drive segments of `stripefs df MNT --json`

and reports their mean, minimum (p0) and low tail p1/p5 (nearest rank from the
bottom: the smallest sample with at least 1 % / 5 % of the samples at or
below it). With --api (the default when build/bench/fs_utilization_api exists)
the same workload runs through the object API on a pool of its own
(bench/fs_utilization_api.cc). It prints a table and one JSON line with
everything (the table and progress go to stderr, the JSON to stdout).

Every command touching the mount runs under a timeout (subprocesses with
timeout=, file operations and os.sync() under a watchdog thread); the mounts
are unmounted and the work directory removed on every way out (normal end,
an error, SIGINT/SIGTERM/SIGHUP, a watchdog timeout).

    python3 bench/fs_utilization_bench.py                              # 4 x 1G drives, 200 rounds, kv and paired
    python3 bench/fs_utilization_bench.py --drive-size 256M --rounds 30 # quick check
    python3 bench/fs_utilization_bench.py --modes kv --no-api --seed 7
"""
import argparse
import errno
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

KV_SIZE = 3_274_752
INDEXER_SIZE = 658_432
EVICT_FRACTION = 0.05
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# ---------------------------------------------------------------------------
# Cleanup state: mounts made (mountpoint, meta dir, fuse connection id) and the
# work directory; children started (the API runs).
_lock = threading.RLock()
_mounts = []        # dicts: mnt, meta, conn
_workdirs = []
_children = []      # subprocess.Popen objects we started
_cleaned = False


def log(msg):
    print(f"fs_utilization_bench: {msg}", file=sys.stderr, flush=True)


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is gone for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


def _daemon_pid(meta):
    try:
        with open(os.path.join(meta, "daemon.pid")) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _is_mounted(mnt):
    real = os.path.realpath(mnt)
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                if line.split()[4] == real:
                    return True
    except OSError:
        pass
    return False


def _unmount(m, abort=False):
    """fusermount3 -u, then wait until the daemon (pid from META/daemon.pid) is gone."""
    mnt, meta = m["mnt"], m["meta"]
    pid = m.get("pid") or _daemon_pid(meta)
    if abort and m.get("conn") is not None:
        # A request is stuck: abort the FUSE connection so that it fails.
        try:
            with open(f"/sys/fs/fuse/connections/{m['conn']}/abort", "w") as f:
                f.write("1")
        except OSError as e:
            log(f"cleanup: cannot abort fuse connection {m['conn']}: {e}")
    ok = False
    for attempt in range(10):
        if not _is_mounted(mnt):
            ok = True
            break
        try:
            r = subprocess.run(["fusermount3", "-u", mnt], capture_output=True, text=True, timeout=30)
            if r.returncode == 0:
                ok = True
                break
            log(f"cleanup: fusermount3 -u {mnt}: {r.stderr.strip()} (retrying)")
        except subprocess.TimeoutExpired:
            log(f"cleanup: fusermount3 -u {mnt} timed out")
        time.sleep(1)
    if not ok and _is_mounted(mnt):
        log(f"cleanup: lazy unmount of {mnt}")
        try:
            subprocess.run(["fusermount3", "-u", "-z", mnt], capture_output=True, timeout=30)
        except subprocess.TimeoutExpired:
            pass
    # Only the daemon this run mounted, and only when it does not exit by itself.
    if pid and not _exits_within(pid, 30):
        log(f"cleanup: daemon {pid} still running 30 s after the unmount; SIGTERM")
        _signal(pid, signal.SIGTERM)
        if not _exits_within(pid, 15):
            log(f"cleanup: daemon {pid} ignored SIGTERM; SIGKILL")
            _signal(pid, signal.SIGKILL)
    return not _is_mounted(mnt)


def _exits_within(pid, seconds):
    deadline = time.monotonic() + seconds
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _pid_alive(pid)


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def cleanup(abort=False):
    global _cleaned
    with _lock:
        for c in list(_children):
            if c.poll() is None:
                c.terminate()  # the API run cleans its own work directory on SIGTERM
                try:
                    c.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    c.kill()
                    c.wait()
        _children.clear()
        still = False
        for m in list(_mounts):
            if not _unmount(m, abort=abort):
                log(f"cleanup: {m['mnt']} is still mounted")
                still = True
        _mounts.clear()
        for d in list(_workdirs):
            if still:
                log(f"cleanup: a mount under {d} is still present; not removing it")
                continue
            shutil.rmtree(d, ignore_errors=True)
            if os.path.exists(d):
                log(f"cleanup: cannot remove {d}")
        _workdirs.clear()
        _cleaned = True


class Interrupted(Exception):
    pass


def _on_signal(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


# ---------------------------------------------------------------------------
# Watchdog: operations on the mount that Python cannot time out by itself
# (open/write/close/unlink/os.sync) run under a deadline; when one is missed the
# watchdog aborts the FUSE connection, cleans up and exits.
class Watchdog:
    def __init__(self):
        self._deadline = None
        self._what = None
        self._cv = threading.Condition()
        t = threading.Thread(target=self._run, daemon=True)
        t.start()

    def arm(self, seconds, what):
        with self._cv:
            self._deadline = time.monotonic() + seconds
            self._what = what
            self._cv.notify()

    def disarm(self):
        with self._cv:
            self._deadline = None

    def _run(self):
        while True:
            with self._cv:
                while self._deadline is None:
                    self._cv.wait()
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._cv.wait(timeout=min(left, 1.0))
                    continue
                what = self._what
            log(f"timeout: {what}; aborting the mount and cleaning up")
            cleanup(abort=True)
            os._exit(3)


class Guard:
    def __init__(self, wd, seconds, what):
        self.wd, self.seconds, self.what = wd, seconds, what

    def __enter__(self):
        self.wd.arm(self.seconds, self.what)

    def __exit__(self, *exc):
        self.wd.disarm()
        return False


# ---------------------------------------------------------------------------
def run_cmd(argv, timeout, what):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{what}: timed out after {timeout} s: {' '.join(argv)}")
    if r.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {r.returncode}): {' '.join(argv)}\n{r.stdout}{r.stderr}")
    return r.stdout


def parse_size(text):
    t = text.strip().upper().rstrip("B").rstrip("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    if t and t[-1] in mult:
        return int(float(t[:-1]) * mult[t[-1]])
    return int(t)


def df(stripefs, target):
    out = run_cmd([stripefs, "df", target, "--json"], 60, "stripefs df")
    j = json.loads(out)
    cap = used = 0
    free_per_drive = []
    for s in j["segments"]:
        if s["kind"] != "drive":
            continue
        cap += s["capacity"]
        used += s["used"]
        free_per_drive.append(max(0, s["capacity"] - s["used"]))
    if cap == 0:
        raise RuntimeError(f"stripefs df {target} shows no drive capacity: {out}")
    return cap, used, free_per_drive


def low_tail(values, q):
    if not values:
        return 0.0
    v = sorted(values)
    idx = max(0, min(len(v) - 1, math.ceil(q * len(v)) - 1))
    return v[idx]


def figures(values):
    if not values:
        return {"mean": 0.0, "p0": 0.0, "p1": 0.0, "p5": 0.0, "max": 0.0}
    return {"mean": sum(values) / len(values), "p0": low_tail(values, 0), "p1": low_tail(values, 0.01),
            "p5": low_tail(values, 0.05), "max": max(values)}


def write_file(path, data):
    """One open/write/close. Returns None, or the errno of a failed write ("short" counted in stats)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    short = 0
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            if n < len(view):
                short += 1
            view = view[n:]
    finally:
        os.close(fd)
    return short


def mount_run(args, wd, mode, workdir, data):
    pool = os.path.join(workdir, f"mount-{mode}")
    meta, mnt = os.path.join(pool, "meta"), os.path.join(pool, "mnt")
    os.makedirs(mnt)
    argv = [args.stripefs, "mkfs", "--meta", meta]
    for i in range(args.drives):
        argv += ["--drive", f"{pool}/drive{i}.img:{args.drive_size_bytes}"]
    run_cmd(argv, 120, "stripefs mkfs")
    m = {"mnt": mnt, "meta": meta, "conn": None, "pid": None}
    with _lock:
        _mounts.append(m)  # registered before it exists: a signal during the mount still unmounts it
    run_cmd([args.stripefs, "mount", meta, mnt], 120, "stripefs mount")
    m["pid"] = _daemon_pid(meta)
    with Guard(wd, 30, f"stat {mnt}"):
        m["conn"] = os.minor(os.stat(mnt).st_dev)
    files_dir = os.path.join(mnt, "f")
    with Guard(wd, 30, f"mkdir {files_dir}"):
        os.mkdir(files_dir)

    capacity, _, _ = df(args.stripefs, mnt)
    rng = random.Random(args.seed)
    live = []          # [path, size]
    live_bytes = 0
    next_id = step = 0
    writes = bytes_written = failures = partial_removed = immediate = short_writes = 0
    since_failure = 0
    max_free = max_drive_free = 0
    with_room = 0      # sampled failures while a drive had room for the failed file (4 KiB rounded)
    failed_kind = {"kv": 0, "idx": 0}
    util, df_used, failure_free = [], [], []
    warmup = {}
    t0 = time.monotonic()
    last = t0
    op_timeout = args.op_timeout
    while len(util) < args.rounds:
        is_idx = mode == "paired" and step % 2 == 1
        size = INDEXER_SIZE if is_idx else KV_SIZE
        path = os.path.join(files_dir, f"{'idx' if is_idx else 'kv'}{next_id:08d}")
        err = None
        try:
            with Guard(wd, op_timeout, f"write {path}"):
                short_writes += write_file(path, data[is_idx])
        except OSError as e:
            err = e
        if err is None:
            live.append((path, size))
            live_bytes += size
            next_id += 1
            step += 1
            writes += 1
            since_failure += 1
            bytes_written += size
            continue
        if err.errno != errno.ENOSPC:
            raise RuntimeError(f"write {path} ({size} B): {err} (not ENOSPC)")
        try:
            with Guard(wd, op_timeout, f"unlink {path}"):
                os.unlink(path)
            partial_removed += 1
        except FileNotFoundError:
            pass
        if since_failure == 0 and failures > 0:
            immediate += 1
        since_failure = 0
        cap, used, free_per_drive = df(args.stripefs, mnt)
        u = live_bytes / capacity
        du = used / cap
        free_total = max(0, cap - used)
        if failures == 0:
            warmup = {"util": u, "df_used": du, "files": len(live)}
        else:
            util.append(u)
            df_used.append(du)
            max_free = max(max_free, free_total)
            max_drive_free = max([max_drive_free] + free_per_drive)
            failed_kind["idx" if is_idx else "kv"] += 1
            if max(free_per_drive) >= -(-size // 4096) * 4096:
                with_room += 1
        failures += 1
        if not live:
            raise RuntimeError(f"ENOSPC with no live file ({free_total} B free per df)")
        victims = max(1, int(len(live) * EVICT_FRACTION))
        with Guard(wd, op_timeout * 4, f"evicting {victims} files"):
            for _ in range(victims):
                if not live:
                    break
                i = rng.randrange(len(live))
                os.unlink(live[i][0])
                live_bytes -= live[i][1]
                live[i] = live[-1]
                live.pop()
        with Guard(wd, op_timeout * 4, "os.sync()"):
            os.sync()
        now = time.monotonic()
        if now - last > 10:
            last = now
            log(f"mount {mode}: round {len(util)}/{args.rounds} util {u:.4f} df {du:.4f} ({now - t0:.0f} s)")
    seconds = time.monotonic() - t0

    # Unmount now (the next mode gets a fresh pool) and drop the pool's files.
    with _lock:
        ok = _unmount(m)
        _mounts.remove(m)
    if not ok:
        raise RuntimeError(f"{mnt} is still mounted after fusermount3 -u")
    log_lines = []
    try:
        with open(os.path.join(meta, "stripefs.log"), errors="replace") as f:
            for line in f:
                low = line.lower()
                if "warn" in low or "error" in low or "no space" in low or "enospc" in low:
                    log_lines.append(line.rstrip("\n"))
    except OSError:
        pass
    shutil.rmtree(pool, ignore_errors=True)
    return {
        "path": "mount", "mode": mode, "drives": args.drives, "drive_size": args.drive_size_bytes,
        "capacity": capacity, "rounds": args.rounds, "seed": args.seed, "samples": len(util),
        "util": figures(util), "df_used": figures(df_used), "warmup": warmup,
        "puts": writes, "bytes_written": bytes_written, "enospc": failures,
        "enospc_right_after_eviction": immediate, "partial_removed": partial_removed,
        "short_writes": short_writes, "max_free_at_enospc": max_free,
        "max_drive_free_at_enospc": max_drive_free, "enospc_with_room_on_a_drive": with_room,
        "sampled_failures_by_kind": failed_kind, "live_files_end": len(live),
        "daemon_log_warnings": len(log_lines), "daemon_log_sample": log_lines[:3] + log_lines[-3:],
        "seconds": seconds, "write_MBps": bytes_written / 1e6 / seconds if seconds > 0 else 0.0,
    }


def api_run(args, mode, workdir):
    argv = [args.api_binary, "--mode", mode, "--drives", str(args.drives), "--drive-size",
            str(args.drive_size_bytes), "--rounds", str(args.rounds), "--seed", str(args.seed),
            "--workdir", workdir, "--stripefs", args.stripefs]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)  # progress on our stderr
    with _lock:
        _children.append(p)
    try:
        out, _ = p.communicate(timeout=args.api_timeout)
    except subprocess.TimeoutExpired:
        p.terminate()
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        raise RuntimeError(f"fs_utilization_api --mode {mode} timed out after {args.api_timeout} s")
    finally:
        with _lock:
            if p in _children:
                _children.remove(p)
    if p.returncode != 0:
        raise RuntimeError(f"fs_utilization_api --mode {mode} failed (exit {p.returncode})")
    return json.loads(out.strip().splitlines()[-1])


def backing_of(path):
    real = os.path.realpath(path)
    best, fstype, source = "", "?", "?"
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            mp = parts[4]
            if (real == mp or real.startswith(mp.rstrip("/") + "/")) and len(mp) >= len(best):
                tail = line.split(" - ", 1)[1].split()
                best, fstype, source = mp, tail[0], tail[1]
    return f"{path} ({fstype} on {best}, mounted from {source})"


def table(results):
    head = f"{'path':<11} {'mode':<7} {'n':>4} {'mean':>7} {'p0':>7} {'p1':>7} {'p5':>7} " \
           f"{'df_mean':>7} {'df_p0':>7} {'first':>7} {'secs':>6}"
    lines = [head, "-" * len(head)]
    for r in results:
        u, d = r["util"], r["df_used"]
        lines.append(f"{r['path']:<11} {r['mode']:<7} {r['samples']:>4} {u['mean']:7.4f} {u['p0']:7.4f} "
                     f"{u['p1']:7.4f} {u['p5']:7.4f} {d['mean']:7.4f} {d['p0']:7.4f} "
                     f"{r['warmup'].get('util', 0):7.4f} {r['seconds']:6.1f}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stripefs", default=os.path.join(ROOT, "build", "tools", "stripefs"))
    ap.add_argument("--api-binary", default=os.path.join(ROOT, "build", "bench", "fs_utilization_api"))
    ap.add_argument("--api", dest="api", action="store_true", default=None,
                    help="also run the object-API path (default: when --api-binary exists)")
    ap.add_argument("--no-api", dest="api", action="store_false")
    ap.add_argument("--modes", default="kv,paired", help="comma-separated: kv, paired")
    ap.add_argument("--drives", type=int, default=4)
    ap.add_argument("--drive-size", default="1G")
    ap.add_argument("--rounds", type=int, default=200, help="sampled ENOSPC failures after the warm-up fill")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--workdir", default="/dev/shm", help="directory the work directory is made in")
    ap.add_argument("--op-timeout", type=float, default=60, help="seconds for one file operation on the mount")
    ap.add_argument("--api-timeout", type=float, default=3600, help="seconds for one object-API run")
    args = ap.parse_args()
    args.drive_size_bytes = parse_size(args.drive_size)
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in ("kv", "paired"):
            ap.error(f"--modes: unknown mode {m!r}")
    if not os.access(args.stripefs, os.X_OK):
        ap.error(f"no stripefs binary at {args.stripefs} (--stripefs)")
    if args.api is None:
        args.api = os.access(args.api_binary, os.X_OK)
    elif args.api and not os.access(args.api_binary, os.X_OK):
        ap.error(f"--api: no binary at {args.api_binary} (build the fs_utilization_api target)")

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _on_signal)
    wd = Watchdog()
    status = 0
    results = []
    t_start = time.monotonic()
    try:
        os.makedirs(args.workdir, exist_ok=True)
        workdir = tempfile.mkdtemp(prefix="fs_utilization_bench.", dir=args.workdir)
        with _lock:
            _workdirs.append(workdir)
        backing = backing_of(workdir)
        log(f"work dir {backing}; {args.drives} x {args.drive_size} drives, {args.rounds} rounds, "
            f"seed {args.seed}, modes {','.join(modes)}, api {'on' if args.api else 'off'}")
        gen = random.Random(args.seed)
        data = {False: gen.randbytes(KV_SIZE), True: gen.randbytes(INDEXER_SIZE)}
        for mode in modes:
            log(f"mount {mode}: start")
            results.append(mount_run(args, wd, mode, workdir, data))
            log(f"mount {mode}: done in {results[-1]['seconds']:.1f} s")
            if args.api:
                log(f"object API {mode}: start")
                results.append(api_run(args, mode, workdir))
                log(f"object API {mode}: done in {results[-1]['seconds']:.1f} s")
        results.sort(key=lambda r: (r["path"] != "mount", modes.index(r["mode"])))
        print(table(results), file=sys.stderr, flush=True)
        print(json.dumps({"bench": "fs_utilization_bench", "backing": backing, "drives": args.drives,
                          "drive_size": args.drive_size_bytes, "rounds": args.rounds, "seed": args.seed,
                          "kv_size": KV_SIZE, "indexer_size": INDEXER_SIZE, "evict_fraction": EVICT_FRACTION,
                          "total_seconds": time.monotonic() - t_start, "results": results}), flush=True)
    except Interrupted as e:
        log(f"interrupted ({e}); cleaning up")
        status = 130
    except Exception as e:  # noqa: BLE001 - report, clean up, exit non-zero
        log(f"error: {e}")
        status = 1
    finally:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)  # the cleanup itself is not interrupted
        cleanup()
    return status


if __name__ == "__main__":
    sys.exit(main())
