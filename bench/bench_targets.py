# SPDX-License-Identifier: Apache-2.0
"""bench/bench_targets.py: the targets the comparison benches run on, set up and torn down.

What bench/compare (fio) and bench/sqlite_bench.py share: one backing (a tmpfs
mounted in a temp dir, a temp dir in an existing tmpfs, or a temp dir on the
root disk) and on it the three targets

  raw       a plain directory on the backing;
  stripefs  `stripefs mkfs` with N sparse drive files on the backing, mounted
            with -o transport=dev (/dev/fuse);
  mergerfs  mergerfs over N directories on the backing, started in the foreground;

(bench/compare also has null, stripefs-uring and null-uring: see FIO_TARGETS)
and their undoing on every way out (errors, Ctrl-C, SIGTERM): the FUSE mounts
are unmounted, each stripefs daemon (pid from META/daemon.pid), mergerfs and
null_fuse (pid of the process started here) are waited for and, only if they
do not exit, killed by pid; the temp dirs and the tmpfs go. Processes are only
ever stopped by pid.

A bench subclasses Targets, says how much room a target needs
(per_target_bytes) and runs its measurements between setup_targets() and
the cleanup that run_main() does.
"""

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ALL_TARGETS = ["raw", "stripefs", "mergerfs"]
# null: build/bench/null_fuse, which stores nothing (writes are discarded, reads
# return zeros), with stripefs's FUSE settings: the transport's ceiling. Only
# fio's jobs can run on it (bench/compare --targets ...,null).
# stripefs-uring, null-uring: the same as stripefs and null (a pool of its own,
# a null_fuse of its own) over FUSE over io_uring instead of /dev/fuse, so one
# interleaved run compares the transports.
FIO_TARGETS = ALL_TARGETS + ["null", "stripefs-uring", "null-uring"]
STRIPEFS_TARGETS = ("stripefs", "stripefs-uring")
NULL_TARGETS = ("null", "null-uring")
# Each FUSE target's transport, given explicitly: stripefs and null stay the
# /dev/fuse baseline whatever stripefs's default is.
TRANSPORT = {"stripefs": "dev", "stripefs-uring": "uring", "null": "dev", "null-uring": "uring"}
# The kernel's switch for FUSE over io_uring. Only the tests and `make run` may
# change it (and they restore it); a bench only reads it.
ENABLE_URING = "/sys/module/fuse/parameters/enable_uring"
# The log (STATE_DIR/NAME.log) of each target started in the foreground.
FOREGROUND_LOG = {"mergerfs": "mergerfs", "null": "null_fuse", "null-uring": "null_fuse-uring"}

# cache.files=partial: the page cache is used and dropped when a file is
# opened -- the kernel FUSE mode stripefs runs in (no direct_io), so buffered
# runs compare like with like (stripefs also sets keep_cache, which differs
# only when a file is opened again, and fio opens each file once per job);
# O_DIRECT bypasses the page cache under it, as on stripefs (cache.files=off,
# FUSE direct_io on every open, measured the same with O_DIRECT here). dropcacheonclose=false: no
# fadvise per close; xattr=nosys: the kernel stops asking for
# security.capability before every write; fuse_msg_size=256: 1 MiB FUSE
# requests; category.create=mfs: new files on the branch with the most free
# space; threads=0: one thread per core (mergerfs's default).
DEFAULT_MERGERFS_OPTS = ("cache.files=partial,dropcacheonclose=false,xattr=nosys,"
                         "fuse_msg_size=256,category.create=mfs,threads=0,fsname=mergerfs-compare")

# The name in messages: "[compare] ..." and "bench/compare: ..."; each bench sets its own.
PROG = {"tag": "bench", "name": "bench"}


def set_prog(tag, name):
    PROG["tag"], PROG["name"] = tag, name


def log(msg):
    print(f"[{PROG['tag']}] {msg}", file=sys.stderr, flush=True)


def die(msg):
    raise SystemExit(f"{PROG['name']}: {msg}")


def parse_size(text):
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    mult = 1
    for i, suf in enumerate("KMGT", start=1):
        if t.endswith(suf):
            mult = 1024 ** i
            t = t[:-1]
            break
    try:
        v = float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 512M, 1G)")
    n = int(v * mult)
    if n <= 0:
        raise argparse.ArgumentTypeError(f"size must be positive: {text!r}")
    return n


def human(n):
    for unit, div in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % (div // 16 or 1) == 0:
            v = n / div
            return f"{v:g}{unit}"
    return str(n)


def csv_list(allowed, name):
    def parse(text):
        items = [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in items if x not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(
                f"--{name}: {','.join(bad) or 'empty'} not in {','.join(allowed)}")
        return list(dict.fromkeys(items))
    return parse


def run_quiet(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def first_line(cmd):
    try:
        out = run_quiet(cmd, timeout=20).stdout.strip().splitlines()
        return out[0].strip().replace(" version:", "") if out else "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def read_mounts():
    """[(source, mountpoint, fstype, options)] from /proc/self/mounts."""
    res = []
    with open("/proc/self/mounts") as f:
        for line in f:
            p = line.split()
            if len(p) >= 4:
                mp = p[1].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
                res.append((p[0], mp, p[2], p[3]))
    return res


def is_mountpoint(path):
    path = os.path.realpath(path)
    return any(mp == path for _, mp, _, _ in read_mounts())


def mounts_under(path):
    path = os.path.realpath(path)
    return [mp for _, mp, _, _ in read_mounts() if mp == path or mp.startswith(path + "/")]


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        return False


def wait_pid_gone(pid, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not pid_alive(pid):
            return True
        time.sleep(0.1)
    return not pid_alive(pid)


def pid_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def stop_pid(pid, what, expect_in_cmdline, timeout=30):
    """Wait for pid to exit; then SIGTERM, then SIGKILL -- only this pid, only if
    its command line still names what we started (no pid-reuse accidents)."""
    if pid is None or wait_pid_gone(pid, timeout):
        return True
    if expect_in_cmdline not in pid_cmdline(pid):
        return True
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        log(f"{what} (pid {pid}) still running; sending {sig.name}")
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        if wait_pid_gone(pid, wait):
            return True
    log(f"WARNING: {what} (pid {pid}) did not exit")
    return False


def fuse_unmount(mnt, what):
    """fusermount3 -u with retries (EBUSY right after files close), then lazy."""
    if not is_mountpoint(mnt):
        return True
    for _ in range(50):
        r = run_quiet(["fusermount3", "-u", mnt])
        if r.returncode == 0 or not is_mountpoint(mnt):
            return True
        time.sleep(0.2)
    log(f"{what}: fusermount3 -u {mnt} failed ({r.stdout.strip()}); lazy unmount")
    run_quiet(["fusermount3", "-uz", mnt])
    if is_mountpoint(mnt):
        run_quiet(["umount", "-l", mnt])
    return not is_mountpoint(mnt)


class Cleanup:
    """A stack of undo actions run in reverse order, each on its own."""

    def __init__(self):
        self.actions = []
        self.done = False

    def push(self, desc, fn):
        self.actions.append((desc, fn))

    def run(self, first=None):
        if self.done:
            return
        self.done = True
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C must not cut cleanup short
        os.chdir("/")
        if first is not None:  # stop a running fio before unmounting under it
            try:
                first()
            except Exception as e:
                log(f"cleanup: {e}")
        while self.actions:
            desc, fn = self.actions.pop()
            try:
                fn()
            except Exception as e:  # keep going: every other action must still run
                log(f"cleanup: {desc}: {e}")


def final_mount_check(state_dir, backing_root):
    """Print `mount | grep -E 'fuse|stripefs|mergerfs'` and our leftovers."""
    r = run_quiet(["sh", "-c", "mount | grep -E 'fuse|stripefs|mergerfs' || true"])
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    ours = [ln for ln in lines
            if any(p and p in ln for p in (state_dir, backing_root))]
    for p in (state_dir, backing_root):
        if p:
            ours += [f"{mp} (mount)" for mp in mounts_under(p) if not any(mp in x for x in ours)]
    return lines, ours


class Targets:
    """The backing and the targets on it; self.a holds the parsed options of
    add_target_args(), and self.targets[name]["dir"] is where a bench works."""

    NAME = "bench"                 # temp dirs are stripefs-NAME.*
    SPACE_HINT = ""                # what to lower when the backing is too small

    def __init__(self, args):
        self.a = args
        self.cleanup = Cleanup()
        self.child = None          # the running measurement process, stopped on cleanup
        self.targets = {}          # name -> dict(dir=..., ...)
        self.broken = {}           # target -> reason; skipped afterwards
        self.problems = []
        self.versions = {}
        self.backing_desc = ""
        self.state_dir = None
        self.backing_root = None
        self.stripefs = None
        self.stripefs_pids = {}    # stripefs target -> its daemon's pid (META/daemon.pid)
        self.procs = {}            # mergerfs, null, null-uring -> the foreground process started here
        self.null_fuse = None

    def per_target_bytes(self):
        raise NotImplementedError

    # ---------------------------------------------------------------- setup
    def check_target_tools(self):
        """fusermount3, the stripefs binary (self.stripefs), null_fuse, mergerfs (installed with apt-get if missing)."""
        a = self.a
        if not shutil.which("fusermount3"):
            die("fusermount3 is not installed (apt-get install fuse3)")
        if any(t in a.targets for t in STRIPEFS_TARGETS):
            sf = a.stripefs or os.environ.get("STRIPEFS") or str(REPO / "build/tools/stripefs")
            if not (os.path.isfile(sf) and os.access(sf, os.X_OK)):
                die(f"stripefs binary not found at {sf} (build it, or give --stripefs PATH or STRIPEFS=PATH)")
            self.stripefs = os.path.realpath(sf)
        if any(t in a.targets for t in NULL_TARGETS):
            nf = a.null_fuse or str(REPO / "build/bench/null_fuse")
            if not (os.path.isfile(nf) and os.access(nf, os.X_OK)):
                die(f"null_fuse not found at {nf} (build the bench target null_fuse, or give --null-fuse PATH)")
            self.null_fuse = os.path.realpath(nf)
        uring = [t for t in a.targets if TRANSPORT.get(t) == "uring"]
        if uring:
            # Checked before anything starts; never switched on here (see ENABLE_URING).
            try:
                value = Path(ENABLE_URING).read_text().strip()
            except FileNotFoundError:
                die(f"--targets {','.join(uring)}: this kernel ({os.uname().release}) has no FUSE over io_uring "
                    f"(no {ENABLE_URING}; it needs Linux 6.14 or later)")
            if value not in ("Y", "1"):
                die(f"--targets {','.join(uring)}: FUSE over io_uring is turned off ({ENABLE_URING} is {value}); "
                    f"as root, run `echo 1 > {ENABLE_URING}` (until the next boot) and try again")
        if a.stripefs_mount_opts and "transport=" in a.stripefs_mount_opts:
            die("--stripefs-mount-opts: no transport= here; each stripefs target sets its own "
                "(stripefs: dev, stripefs-uring: uring)")
        if "mergerfs" in a.targets and not shutil.which("mergerfs"):
            if os.geteuid() != 0:
                die("mergerfs is not installed and installing it needs root (apt-get install mergerfs)")
            log("mergerfs is not installed: apt-get install -y mergerfs")
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            r = run_quiet(["apt-get", "install", "-y", "--no-install-recommends", "mergerfs"], env=env)
            if r.returncode != 0:
                run_quiet(["apt-get", "update"], env=env)
                r = run_quiet(["apt-get", "install", "-y", "--no-install-recommends", "mergerfs"], env=env)
            if r.returncode != 0 or not shutil.which("mergerfs"):
                die("could not install mergerfs:\n" + r.stdout[-2000:])

    def collect_target_versions(self):
        v = self.versions
        v["kernel"] = os.uname().release
        v["fusermount3"] = first_line(["fusermount3", "-V"])
        v["cpus"] = os.cpu_count()
        v["loadavg_start"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        if "mergerfs" in self.a.targets:
            v["mergerfs"] = first_line(["mergerfs", "-V"])
        if any(t in self.a.targets for t in NULL_TARGETS):
            v["null_fuse"] = self.null_fuse
        if any(t in self.a.targets for t in TRANSPORT):
            try:
                v["fuse_enable_uring"] = Path(ENABLE_URING).read_text().strip()
            except OSError:
                v["fuse_enable_uring"] = "absent"
        if any(t in self.a.targets for t in STRIPEFS_TARGETS):
            v["stripefs"] = first_line([self.stripefs, "--version"])
            v["stripefs_binary"] = self.stripefs
            v["stripefs_binary_mtime"] = time.strftime("%Y-%m-%d %H:%M:%S",
                                                       time.localtime(os.stat(self.stripefs).st_mtime))
            try:  # the checkout the binary sits in (its build dir), not this script's; read-only
                r = run_quiet(["git", "-C", os.path.dirname(self.stripefs), "rev-parse", "--short", "HEAD"],
                              timeout=10)
                v["stripefs_git"] = r.stdout.strip() if r.returncode == 0 else "?"
            except (OSError, subprocess.SubprocessError):
                pass

    def setup_backing(self):
        a = self.a
        self.state_dir = tempfile.mkdtemp(prefix=f"stripefs-{self.NAME}.")  # in $TMPDIR, else /tmp
        sd = self.state_dir
        self.cleanup.push(f"remove {sd}", lambda: self.rmtree_safe(sd))
        ntargets = len(a.targets)
        need = ntargets * self.per_target_bytes() + (1 << 30)   # data plus slack for metadata
        if a.backing == "tmpfs":
            mem_avail = 0
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        mem_avail = int(line.split()[1]) * 1024
            if mem_avail and need > mem_avail * 0.85:
                die(f"tmpfs backing needs about {human(need)} of RAM ({ntargets} targets x "
                    f"{human(self.per_target_bytes())} + 1G) but only {human(mem_avail)} is available"
                    f"{self.SPACE_HINT}")
            if a.tmpfs_dir:
                parent = a.tmpfs_dir
                if not os.path.isdir(parent):
                    die(f"--tmpfs-dir {parent} is not a directory")
                self.backing_root = tempfile.mkdtemp(prefix=f"stripefs-{self.NAME}.", dir=parent)
                root = self.backing_root
                self.cleanup.push(f"remove {root}", lambda: self.rmtree_safe(root))
                fstype = run_quiet(["stat", "-f", "-c", "%T", parent]).stdout.strip()
                self.backing_desc = f"tmpfs: directory {root} ({fstype} at {parent})"
            else:
                root = os.path.join(sd, "backing")
                os.mkdir(root)
                # A cap, not an allocation: the drive files are sparse.
                cap = 2 * need + (1 << 30) + 4 * self.drive_size()
                r = run_quiet(["mount", "-t", "tmpfs", "-o", f"size={cap},mode=0755", "tmpfs", root])
                if r.returncode != 0:
                    die(f"could not mount a tmpfs at {root}: {r.stdout.strip()} (run as root, or use --tmpfs-dir /dev/shm)")
                self.cleanup.push(f"unmount tmpfs {root}", lambda: self.umount_plain(root))
                self.backing_root = root
                self.backing_desc = f"tmpfs: a tmpfs mounted at {root} (size cap {human(cap)})"
        else:
            parent = a.disk_dir
            if not os.path.isdir(parent):
                die(f"--disk-dir {parent} is not a directory")
            free = shutil.disk_usage(parent).free
            if need > free:
                die(f"disk backing needs about {human(need)} free in {parent}, {human(free)} is free{self.SPACE_HINT}")
            self.backing_root = tempfile.mkdtemp(prefix=f"stripefs-{self.NAME}.", dir=parent)
            root = self.backing_root
            self.cleanup.push(f"remove {root}", lambda: self.rmtree_safe(root))
            src = run_quiet(["findmnt", "-n", "-o", "SOURCE,FSTYPE", "-T", root]).stdout.strip()
            self.backing_desc = f"disk: directory {root} (on {src or '?'})"
        log(f"backing {self.backing_desc}")

    def umount_plain(self, path):
        if not is_mountpoint(path):
            return
        r = run_quiet(["umount", path])
        if r.returncode != 0:
            log(f"umount {path}: {r.stdout.strip()}; lazy unmount")
            run_quiet(["umount", "-l", path])

    def rmtree_safe(self, path):
        """rm -rf, but never into a mount that is still there."""
        if not os.path.exists(path):
            return
        left = [m for m in mounts_under(path) if os.path.realpath(m) != os.path.realpath(path)]
        if left:
            log(f"WARNING: not removing {path}: still mounted below it: {' '.join(left)}")
            return
        if is_mountpoint(path):  # a tmpfs root: empty it is pointless, it is unmounted next
            return
        shutil.rmtree(path, ignore_errors=True)

    def drive_size(self):
        # Sparse files; room for all the data twice over even if placement is uneven.
        per = 2 * math.ceil(self.per_target_bytes() / self.a.drives) + (512 << 20)
        return (per + (1 << 20) - 1) // (1 << 20) * (1 << 20)

    def setup_raw(self):
        d = os.path.join(self.backing_root, "raw")
        os.mkdir(d)
        self.targets["raw"] = {"dir": d, "desc": f"plain directory {d}"}

    def private_copy(self, src, name):
        """A copy of a binary in the state dir, made once and shared by the
        targets that run it: a rebuild of the binary during the run (other
        people build in the same tree) cannot change or break it half-way."""
        exe = os.path.join(self.state_dir, name)
        if not os.path.exists(exe):
            try:
                shutil.copy2(src, exe)
            except OSError as e:
                die(f"cannot copy {src}: {e} (being rebuilt? try again)")
        return exe

    def setup_stripefs(self, target="stripefs"):
        """A pool of its own for each stripefs target, built alike; they differ
        only in -o transport= (TRANSPORT)."""
        a = self.a
        transport = TRANSPORT[target]
        base = os.path.join(self.backing_root, target)
        meta = os.path.join(base, "meta")
        mnt = os.path.join(self.state_dir, f"mnt-{target}")
        os.makedirs(base)
        os.mkdir(mnt)
        exe = self.private_copy(self.stripefs, "stripefs")
        self.stripefs_exe = exe
        dsize = self.drive_size()
        cmd = [exe, "mkfs", "--meta", meta]
        for i in range(a.drives):
            cmd += ["--drive", f"{base}/drive{i}.img:{dsize // (1 << 20)}M"]
        if a.chunk_size:
            cmd += ["--chunk-size", a.chunk_size]
        cmd += a.mkfs_opt
        r = run_quiet(cmd)
        if r.returncode != 0:
            die(f"{target}: stripefs mkfs failed (exit {r.returncode}: {' '.join(cmd)}):\n{r.stdout}")
        # Registered before mounting: a mount that half-succeeds is undone too.
        self.cleanup.push(f"unmount {target}", lambda: self.stop_stripefs(target, mnt, meta))
        opts = ",".join(o for o in (a.stripefs_mount_opts, f"transport={transport}") if o)
        cmd = [exe, "mount", meta, mnt, "-o", opts]
        r = run_quiet(cmd, timeout=120)
        pid = self.stripefs_pids[target] = self.read_daemon_pid(meta)
        if r.returncode != 0 or not is_mountpoint(mnt):
            die(f"{target} mount failed ({' '.join(cmd)}):\n{r.stdout}{self.log_tail(os.path.join(meta, 'stripefs.log'))}")
        if pid is None or not pid_alive(pid):
            die(f"{target} mounted but no live daemon pid in {meta}/daemon.pid")
        if transport == "uring":
            self.check_ring(target, exe, mnt, meta)
        self.targets[target] = {
            "dir": mnt, "meta": meta, "pid": pid, "transport": transport,
            "desc": (f"{a.drives} drive files of {human(dsize)} (sparse) in {base}, chunk size "
                     f"{a.chunk_size or '4M (default)'}, metadata {meta}, mounted at {mnt} -o {opts}")}
        log(f"{target} mounted at {mnt} (daemon pid {pid}, transport {transport})")

    def check_ring(self, target, exe, mnt, meta):
        """`stripefs mount` returns before the daemon's ring is in use, and the
        daemon reports "uring" only once a request has come through it: so
        make requests (a readdir) and ask `stripefs stats` for up to 5 s. A mount
        left on /dev/fuse would measure dev under the name uring."""
        got, end, r = "?", time.monotonic() + 5, None
        while True:
            try:
                os.listdir(mnt)
            except OSError:
                pass
            try:
                r = run_quiet([exe, "stats", mnt, "--json"], timeout=20)
                got = json.loads(r.stdout).get("transport", "?")
            except (OSError, subprocess.SubprocessError, ValueError, AttributeError):
                got = f"? (stripefs stats: {r.stdout.strip()[:300] if r else 'timed out'})"
            if got == "uring" or time.monotonic() > end:
                break
            time.sleep(0.25)
        if got != "uring":
            die(f"{target}: mounted with -o transport=uring, but `stripefs stats {mnt} --json` says transport "
                f"{got} after 5 s: the ring is not in use{self.log_tail(os.path.join(meta, 'stripefs.log'))}")

    @staticmethod
    def read_daemon_pid(meta):
        try:
            txt = "".join(c for c in Path(meta, "daemon.pid").read_text() if c.isdigit())
            return int(txt) if txt else None
        except OSError:
            return None

    @staticmethod
    def log_tail(path, n=30):
        try:
            lines = Path(path).read_text(errors="replace").splitlines()[-n:]
            return f"\n--- last lines of {path} ---\n" + "\n".join(lines)
        except OSError:
            return ""

    def stop_stripefs(self, target, mnt, meta):
        pid = self.stripefs_pids.get(target) or self.read_daemon_pid(meta)
        ok = fuse_unmount(mnt, target)
        if not ok and pid and pid_alive(pid):
            log(f"{target}: still mounted; killing its daemon by pid to abort the connection")
            os.kill(pid, signal.SIGKILL)
            wait_pid_gone(pid, 10)
            fuse_unmount(mnt, target)
        # The daemon syncs and exits after the unmount; give it time.
        if not stop_pid(pid, f"{target} daemon", "stripefs", timeout=60):
            self.problems.append(f"{target} daemon {pid} did not exit after unmount")
        self.save_log(os.path.join(meta, "stripefs.log"), f"{target}.log")  # both pools log to stripefs.log
        self.remove_mountpoint(mnt)

    def remove_mountpoint(self, mnt):
        """Removes an unmounted mountpoint directory; a mount still there is a problem."""
        if is_mountpoint(mnt):
            self.problems.append(f"could not unmount {mnt}")
        else:
            try:
                os.rmdir(mnt)
            except OSError:
                pass

    def save_log(self, path, name=None):
        """Copies path to --logs DIR, as DIR/name (default: its own name)."""
        if self.a.logs and os.path.exists(path):
            os.makedirs(self.a.logs, exist_ok=True)
            dest = os.path.join(self.a.logs, name or os.path.basename(path))
            shutil.copy(path, dest)
            log(f"saved {path} as {dest}")

    def start_foreground(self, target, cmd, mnt):
        """Starts target's FUSE daemon, which stays in the foreground (so its pid
        is ours: self.procs[target]), logging to STATE_DIR/FOREGROUND_LOG[target].log,
        and waits for its mount."""
        path = os.path.join(self.state_dir, f"{FOREGROUND_LOG[target]}.log")
        logf = open(path, "w")
        proc = self.procs[target] = subprocess.Popen(
            cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)  # Ctrl-C goes to us, not to it
        logf.close()
        end = time.monotonic() + 20
        while time.monotonic() < end and not is_mountpoint(mnt):
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        if not is_mountpoint(mnt):
            die(f"{target} did not mount ({' '.join(cmd)}):{self.log_tail(path)}")
        return proc

    def stop_foreground(self, target, mnt):
        proc = self.procs.get(target)
        fuse_unmount(mnt, target)
        if proc is not None:
            # The command line must still name the binary started (mergerfs, .../null_fuse).
            if not stop_pid(proc.pid, target, os.path.basename(proc.args[0]), timeout=20):
                self.problems.append(f"{target} {proc.pid} did not exit after unmount")
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.save_log(os.path.join(self.state_dir, f"{FOREGROUND_LOG[target]}.log"))
        self.remove_mountpoint(mnt)

    def setup_mergerfs(self):
        a = self.a
        base = os.path.join(self.backing_root, "mergerfs")
        branches = [os.path.join(base, f"branch{i}") for i in range(a.drives)]
        for b in branches:
            os.makedirs(b)
        mnt = os.path.join(self.state_dir, "mnt-mergerfs")
        os.mkdir(mnt)
        cmd = ["mergerfs", "-f", "-o", a.mergerfs_opts, ":".join(branches), mnt]
        self.cleanup.push("unmount mergerfs", lambda: self.stop_foreground("mergerfs", mnt))
        proc = self.start_foreground("mergerfs", cmd, mnt)
        self.targets["mergerfs"] = {"dir": mnt, "pid": proc.pid, "options": a.mergerfs_opts,
                                    "desc": f"over {a.drives} directories in {base}, mounted at {mnt}, "
                                            f"-o {a.mergerfs_opts}"}
        log(f"mergerfs mounted at {mnt} (pid {proc.pid}), -o {a.mergerfs_opts}")

    def setup_null(self, target="null"):
        """null_fuse holding fio's files (bench.N.0, each of --size bytes), one
        per null target, differing only in --transport (TRANSPORT)."""
        a = self.a
        transport = TRANSPORT[target]
        mnt = os.path.join(self.state_dir, f"mnt-{target}")
        os.mkdir(mnt)
        exe = self.private_copy(self.null_fuse, "null_fuse")
        size = getattr(a, "size", 1 << 30)
        cmd = [exe, mnt, "--loop", "workers", "--files", "64", "--size", str(size), "--name-format", "bench.{}.0",
               "--transport", transport]
        self.cleanup.push(f"unmount {target}", lambda: self.stop_foreground(target, mnt))
        # null_fuse tells its transport only at unmount (in its log): the mount is trusted here.
        proc = self.start_foreground(target, cmd, mnt)
        self.targets[target] = {"dir": mnt, "pid": proc.pid, "transport": transport,
                                "desc": f"null_fuse (stores nothing; stripefs's FUSE settings and session loop), "
                                        f"mounted at {mnt}, --transport {transport}"}
        log(f"{target}: null_fuse mounted at {mnt} (pid {proc.pid}, transport {transport})")

    # ------------------------------------------------------------ children
    def run_child(self, cmd, env=None, timeout=None):
        """Run cmd (fio, a bench worker) as a tracked child; returns (rc, output)."""
        self.child = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, text=True)
        try:
            out, _ = self.child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill_child()
            self.child = None
            return None, f"timed out after {timeout} s"
        # On any other exception (Ctrl-C, SIGTERM) self.child stays set, so
        # the cleanup stops it before unmounting.
        rc, self.child = self.child.returncode, None
        return rc, out

    def kill_child(self):
        c = self.child
        if c is None or c.poll() is not None:
            return
        for sig, wait in ((signal.SIGINT, 10), (signal.SIGTERM, 5), (signal.SIGKILL, 10)):
            try:
                c.send_signal(sig)
                c.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue
            except ProcessLookupError:
                return
        log(f"WARNING: child {c.pid} ({c.args[0]}) did not exit (stuck in a filesystem?)")

    def target_alive(self, target):
        t = self.targets[target]
        if target == "raw":
            return True
        if not is_mountpoint(t["dir"]):
            return False
        return pid_alive(t["pid"])

    def mark_broken(self, target, why):
        if target in self.broken:
            return
        extra = ""
        if target in STRIPEFS_TARGETS:
            extra = self.log_tail(os.path.join(self.targets[target]["meta"], "stripefs.log"))
        elif target in FOREGROUND_LOG:
            extra = self.log_tail(os.path.join(self.state_dir, f"{FOREGROUND_LOG[target]}.log"))
        self.broken[target] = why
        self.problems.append(f"{target}: {why}; skipped from then on")
        log(f"{target}: {why}; no more runs on it{extra}")

    # --------------------------------------------------------------- setup
    def setup_targets(self):
        """The backing, then every target of --targets on it, in that order."""
        self.setup_backing()
        for t in self.a.targets:
            if t in STRIPEFS_TARGETS:
                self.setup_stripefs(t)
            elif t in NULL_TARGETS:
                self.setup_null(t)
            else:
                {"raw": self.setup_raw, "mergerfs": self.setup_mergerfs}[t]()

    # ---------------------------------------------------------------- exit
    def finish(self, rc):
        """Undo everything (after stopping the running child), then check that
        no mount or daemon of this run is left and list the problems.
        Returns (rc, mounts of this run still there)."""
        self.cleanup.run(first=self.kill_child)
        lines, ours = final_mount_check(self.state_dir, self.backing_root)
        if ours:
            log("ERROR: mounts of this run are left behind:\n  " + "\n  ".join(ours))
            rc = rc or 1
        else:
            others = f" ({len(lines)} unrelated fuse mount(s) of other users present)" if lines else ""
            log(f"cleanup done: no mount of this run left (mount | grep -E 'fuse|stripefs|mergerfs'){others}")
        daemons = [(pid, f"{t} daemon") for t, pid in self.stripefs_pids.items()]
        daemons += [(p.pid, t) for t, p in self.procs.items()]
        for pid, what in daemons:
            if pid and pid_alive(pid):
                log(f"ERROR: {what} pid {pid} is still running")
                rc = rc or 1
        if self.problems:
            rc = rc or 3
            print("\nproblems:", file=sys.stderr)
            for p in self.problems:
                print(f"  - {p[:1500]}", file=sys.stderr)
        return rc, ours


def run_main(bench, body):
    """Run body() with SIGTERM/SIGHUP turned into exits, then bench.finish().
    die() gives 2, Ctrl-C 130, a signal 128+N, an exception 1.
    Returns (rc, mounts left)."""
    def on_signal(sig, _frame):
        raise SystemExit(128 + sig)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    rc = 0
    try:
        body()
    except KeyboardInterrupt:
        log("interrupted; cleaning up")
        rc = 130
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            rc = 2
        else:
            rc = e.code or 0
            if rc:
                log(f"stopped by signal {rc - 128}; cleaning up")
    except Exception:
        import traceback
        traceback.print_exc()
        rc = 1
    finally:
        rc, ours = bench.finish(rc)
    return rc, ours


def add_target_args(p, targets=ALL_TARGETS):
    """The options of the backing and the targets, as bench/compare has them;
    targets: those --targets may name (the default is ALL_TARGETS)."""
    p.add_argument("--backing", choices=["tmpfs", "disk"], default="tmpfs",
                   help="tmpfs: a tmpfs mounted in a temp dir (or --tmpfs-dir); disk: a temp dir under --disk-dir "
                        "(default %(default)s)")
    p.add_argument("--disk-dir", default="/var/tmp", help="parent of the disk backing's temp dir (default %(default)s)")
    p.add_argument("--tmpfs-dir", metavar="DIR",
                   help="use a temp dir in this existing tmpfs (e.g. /dev/shm) instead of mounting one")
    p.add_argument("--targets", type=csv_list(targets, "targets"), default=list(ALL_TARGETS),
                   help=f"subset of {','.join(targets)} (default {','.join(ALL_TARGETS)})")
    if "null" in targets:
        p.add_argument("--null-fuse", metavar="PATH",
                       help="null_fuse binary for the null targets (default build/bench/null_fuse of this checkout)")
    p.add_argument("--drives", type=int, default=4,
                   help="stripefs drive files and mergerfs branches (default 4)")
    p.add_argument("--stripefs", metavar="PATH",
                   help="stripefs binary (default $STRIPEFS, else build/tools/stripefs of this checkout)")
    p.add_argument("--chunk-size", help="stripefs mkfs --chunk-size (default: stripefs's, 4M)")
    p.add_argument("--mkfs-opt", action="append", default=[], metavar="ARG",
                   help="extra argument for stripefs mkfs (repeatable), e.g. --mkfs-opt=--strategy=random")
    p.add_argument("--stripefs-mount-opts", metavar="OPTS",
                   help="stripefs mount -o OPTS (each stripefs target adds its own transport=: dev, or uring "
                        "for stripefs-uring)")
    p.add_argument("--mergerfs-opts", default=DEFAULT_MERGERFS_OPTS, metavar="OPTS",
                   help="mergerfs -o OPTS (default %(default)s)")
    p.add_argument("--logs", metavar="DIR",
                   help="keep the daemons' logs (stripefs.log, mergerfs.log, ...): copy them to DIR on exit")
