#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""POSIX behaviours below the basics, each as ext4 gives it (issue 20).

Usage: posix_depth.py MOUNTPOINT

  direct_then_buffered   a direct write (plain and AIO) is seen by a buffered
                         read of cached pages, and a buffered write by a
                         direct read
  rewinddir              a rewound directory stream lists names created
                         after opendir
  seek_after_punch       SEEK_DATA / SEEK_HOLE after a hole punched inside a
                         chunk agree with what reads return
  zero_range             fallocate ZERO_RANGE zeros its range (KEEP_SIZE or
                         growing the file)
  fstat_renamed_over     an open directory that another was renamed over
                         still answers fstat, with no links
  file_handles           name_to_handle_at / open_by_handle_at work after
                         the kernel dropped its caches (what an NFS export
                         needs); a deleted file's handle is ESTALE
  appends                six writers appending 4-byte records with O_APPEND
                         lose none and tear none
  tmpfile                open(O_TMPFILE) makes a file with no name; linkat
                         names it (not with O_EXCL); closed unnamed, its
                         space comes back

Every check runs; the exit status is 1 when any failed.
"""
import ctypes
import ctypes.util
import errno
import mmap
import os
import shutil
import subprocess
import sys
import threading
import time

MNT = sys.argv[1]
MiB = 1 << 20
failures = []
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def check(cond, what):
    print(("  ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        failures.append(what)


def path(name):
    return os.path.join(MNT, name)


def direct_then_buffered():
    p = path("dio")
    with open(p, "wb") as f:
        f.write(b"A" * MiB)
    with open(p, "rb") as f:  # the old bytes now sit in the page cache
        check(f.read() == b"A" * MiB, "buffered read of the file as written")
    # A plain O_DIRECT write, from an aligned buffer.
    buf = mmap.mmap(-1, 64 * 1024)
    buf.write(b"B" * len(buf))
    fd = os.open(p, os.O_WRONLY | os.O_DIRECT)
    check(os.pwrite(fd, buf, 0) == len(buf), "O_DIRECT pwrite of 64 KiB")
    os.close(fd)
    with open(p, "rb") as f:
        got = f.read(len(buf))
    check(got == b"B" * len(buf), "a buffered read after an O_DIRECT write sees the new bytes")
    # AIO direct writes (libaio through fio) over cached pages.
    with open(p, "rb") as f:
        f.read()
    r = subprocess.run(["fio", "--name=aio", f"--filename={p}", "--rw=write", "--bs=64k", f"--size={MiB}",
                        "--ioengine=libaio", "--iodepth=8", "--direct=1", "--buffer_pattern=0x43",
                        "--allow_file_create=0", "--overwrite=1", "--minimal"],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"fio libaio O_DIRECT write ran ({r.stderr.strip()[:200]})")
    with open(p, "rb") as f:
        got = f.read()
    check(got == b"C" * MiB, "a buffered read after AIO O_DIRECT writes sees the new bytes "
          f"({sum(1 for i in range(0, MiB, 4096) if got[i:i + 4096] != b'C' * 4096)} of 256 blocks stale)")
    # And the other way: a buffered write, not synced, read back direct.
    wfd = os.open(p, os.O_WRONLY)
    os.pwrite(wfd, b"D" * 8192, 0)  # in the page cache, not yet written back
    rbuf = mmap.mmap(-1, 8192)
    fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
    n = os.preadv(fd, [rbuf], 0)
    os.close(fd)
    os.close(wfd)
    check(n == 8192 and rbuf[:] == b"D" * 8192, "an O_DIRECT read sees a buffered write made before it")
    os.unlink(p)


def rewinddir():
    d = path("rewind")
    os.mkdir(d)
    for i in range(10):
        open(os.path.join(d, f"old{i}"), "w").close()
    libc.opendir.restype = ctypes.c_void_p
    libc.readdir.restype = ctypes.c_void_p
    libc.readdir.argtypes = [ctypes.c_void_p]
    libc.rewinddir.argtypes = [ctypes.c_void_p]
    libc.closedir.argtypes = [ctypes.c_void_p]
    name_offset = 8 + 8 + 2 + 1  # struct dirent: d_ino, d_off, d_reclen, d_type, d_name

    def names(dirp):
        out = set()
        while True:
            ent = libc.readdir(dirp)
            if not ent:
                return out
            out.add(ctypes.string_at(ent + name_offset).decode())

    dirp = libc.opendir(d.encode())
    check(bool(dirp), "opendir")
    first = names(dirp)
    check(first == {".", ".."} | {f"old{i}" for i in range(10)}, "the first pass lists the 10 names")
    for i in range(1000):
        open(os.path.join(d, f"new{i}"), "w").close()
    libc.rewinddir(dirp)
    second = names(dirp)
    libc.closedir(dirp)
    new = sum(1 for n in second if n.startswith("new"))
    check(new == 1000 and first <= second, f"after rewinddir the 1000 names created since appear ({new} did)")
    shutil.rmtree(d)


def fallocate(fd, mode, off, length):
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    if libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def seek_after_punch():
    FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 1, 2
    p = path("punched")
    with open(p, "wb") as f:
        f.write(os.urandom(3 * MiB))
    fd = os.open(p, os.O_RDWR)
    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, MiB, MiB)
    check(os.pread(fd, MiB, MiB) == bytes(MiB), "the punched MiB reads as zeros")
    check(os.lseek(fd, 0, os.SEEK_HOLE) == MiB, "SEEK_HOLE from 0 finds the punched hole at 1 MiB")
    check(os.lseek(fd, MiB, os.SEEK_DATA) == 2 * MiB, "SEEK_DATA from the hole finds the data at 2 MiB")
    check(os.lseek(fd, MiB + 5000, os.SEEK_DATA) == 2 * MiB, "SEEK_DATA from inside the hole finds 2 MiB")
    check(os.lseek(fd, 2 * MiB, os.SEEK_HOLE) == 3 * MiB, "SEEK_HOLE after the data finds the end of the file")
    # Block granularity: a 4 KiB hole punched between data blocks.
    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 2 * MiB + 8192, 4096)
    check(os.lseek(fd, 2 * MiB, os.SEEK_HOLE) == 2 * MiB + 8192, "a punched 4 KiB block is a hole")
    check(os.lseek(fd, 2 * MiB + 8192, os.SEEK_DATA) == 2 * MiB + 12288, "data resumes after the punched block")
    os.close(fd)
    os.unlink(p)


def zero_range():
    FALLOC_FL_KEEP_SIZE, FALLOC_FL_ZERO_RANGE = 1, 0x10
    p = path("zeroed")
    data = bytearray(os.urandom(3 * MiB))
    with open(p, "wb") as f:
        f.write(data)
    fd = os.open(p, os.O_RDWR)
    lo, hi = MiB - 100, 2 * MiB + 5000  # unaligned, over a whole chunk when chunks are 1 MiB
    fallocate(fd, FALLOC_FL_ZERO_RANGE, lo, hi - lo)
    data[lo:hi] = bytes(hi - lo)
    check(os.pread(fd, 3 * MiB, 0) == bytes(data), "ZERO_RANGE: zeros over the range, the rest as written")
    check(os.fstat(fd).st_size == 3 * MiB, "ZERO_RANGE inside the file keeps its size")
    fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 3 * MiB - 10, MiB)
    check(os.fstat(fd).st_size == 3 * MiB, "ZERO_RANGE with KEEP_SIZE past the end keeps the size")
    fallocate(fd, FALLOC_FL_ZERO_RANGE, 3 * MiB - 10, MiB)
    data[3 * MiB - 10:] = bytes(10)
    check(os.fstat(fd).st_size == 4 * MiB - 10, "ZERO_RANGE past the end grows the file")
    check(os.pread(fd, 4 * MiB, 0) == bytes(data) + bytes(MiB - 10), "the grown file reads as expected")
    os.close(fd)
    os.unlink(p)


def fstat_renamed_over():
    a, b = path("dir_a"), path("dir_b")
    os.mkdir(a)
    os.mkdir(b)
    ino = os.stat(a).st_ino
    fd = os.open(a, os.O_RDONLY | os.O_DIRECTORY)
    os.rename(b, a)
    try:
        st = os.fstat(fd)
        check(st.st_ino == ino and st.st_nlink == 0, f"fstat of the replaced directory: its inode, no links "
              f"(ino {st.st_ino}, nlink {st.st_nlink})")
    except OSError as e:
        check(False, f"fstat of a directory renamed over: {e}")
    os.close(fd)
    fd = os.open(a, os.O_RDONLY | os.O_DIRECTORY)
    check(os.fstat(fd).st_ino != ino, "the name now opens the directory renamed onto it")
    os.close(fd)
    os.rmdir(a)


def file_handles():
    class FileHandle(ctypes.Structure):
        _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int),
                    ("f_handle", ctypes.c_ubyte * 128)]

    libc.name_to_handle_at.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(FileHandle),
                                       ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    libc.open_by_handle_at.argtypes = [ctypes.c_int, ctypes.POINTER(FileHandle), ctypes.c_int]

    def handle_of(p):
        h, mount_id = FileHandle(), ctypes.c_int()
        h.handle_bytes = 128
        if libc.name_to_handle_at(-100, p.encode(), ctypes.byref(h), ctypes.byref(mount_id), 0) != 0:
            raise OSError(ctypes.get_errno(), f"name_to_handle_at {p}: {os.strerror(ctypes.get_errno())}")
        return h

    def open_by(h, flags):
        fd = libc.open_by_handle_at(mount_fd, ctypes.byref(h), flags)
        return fd, (0 if fd >= 0 else ctypes.get_errno())

    def drop_caches():  # the kernel forgets the inodes nothing holds open
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")

    d = path("handles")
    os.mkdir(d)
    f = os.path.join(d, "kept")
    with open(f, "wb") as out:
        out.write(b"handle me" * 1000)
    gone = os.path.join(d, "gone")
    open(gone, "w").close()
    hf, hd, hg = handle_of(f), handle_of(d), handle_of(gone)
    os.unlink(gone)
    mount_fd = os.open(MNT, os.O_RDONLY | os.O_DIRECTORY)
    drop_caches()
    fd, err = open_by(hf, os.O_RDONLY)
    check(fd >= 0, f"open_by_handle_at of a file after the caches dropped ({os.strerror(err) if err else 'ok'})")
    if fd >= 0:
        check(os.read(fd, 9000) == b"handle me" * 1000, "the handle opens the same file's bytes")
        os.close(fd)
    drop_caches()
    fd, err = open_by(hd, os.O_RDONLY | os.O_DIRECTORY)
    check(fd >= 0, f"open_by_handle_at of a directory after the caches dropped ({os.strerror(err) if err else 'ok'})")
    if fd >= 0:
        check(sorted(os.listdir(fd)) == ["kept"], "the directory's handle lists its names")
        os.close(fd)
    fd, err = open_by(hg, os.O_RDONLY)
    check(fd < 0 and err == errno.ESTALE, f"the handle of a deleted file is stale (errno {err})")  # ESTALE
    if fd >= 0:
        os.close(fd)
    os.close(mount_fd)
    os.unlink(f)
    os.rmdir(d)


def appends():
    p = path("appends")
    open(p, "wb").close()
    writers, each = 6, 2000

    def writer(w):
        fd = os.open(p, os.O_WRONLY | os.O_APPEND)
        for i in range(each):
            os.write(fd, bytes([65 + w]) + (i % 1000).to_bytes(2, "big") + b"\n")
        os.close(fd)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    data = open(p, "rb").read()
    check(len(data) == writers * each * 4, f"{writers} O_APPEND writers: {len(data)} bytes, "
          f"{writers * each * 4} expected")
    records = [data[i:i + 4] for i in range(0, len(data), 4)]
    per = {w: [r for r in records if r[0] == 65 + w] for w in range(writers)}
    whole = all(r[3:] == b"\n" and 65 <= r[0] < 65 + writers for r in records)
    ordered = all([int.from_bytes(r[1:3], "big") for r in per[w]] == [i % 1000 for i in range(each)]
                  for w in range(writers))
    check(whole and ordered, "every record whole, each writer's in its own order")
    os.unlink(p)


def link_fd(fd, name):
    """linkat(AT_FDCWD, /proc/self/fd/FD, AT_FDCWD, name, AT_SYMLINK_FOLLOW): 0 or the errno."""
    AT_FDCWD, AT_SYMLINK_FOLLOW = -100, 0x400
    rc = libc.linkat(AT_FDCWD, f"/proc/self/fd/{fd}".encode(), AT_FDCWD, name.encode(), AT_SYMLINK_FOLLOW)
    return 0 if rc == 0 else ctypes.get_errno()


def used_bytes():
    st = os.statvfs(MNT)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def tmpfile():
    d = path("tmpdir")
    os.mkdir(d)
    fd = os.open(d, os.O_TMPFILE | os.O_RDWR, 0o640)
    data = os.urandom(3 * MiB + 100)
    os.write(fd, data)
    st = os.fstat(fd)
    check(st.st_nlink == 0 and st.st_size == len(data) and (st.st_mode & 0o7777) == 0o640,
          f"an O_TMPFILE file has no links, its size and its mode ({st.st_nlink}, {st.st_size}, {oct(st.st_mode)})")
    check(os.listdir(d) == [], "an O_TMPFILE file is not listed in its directory")
    check(link_fd(fd, os.path.join(d, "named")) == 0, "linkat names an O_TMPFILE file")
    check(os.fstat(fd).st_nlink == 1 and os.listdir(d) == ["named"], "once linked, it has one link and is listed")
    os.close(fd)
    subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"], check=False)
    check(open(os.path.join(d, "named"), "rb").read() == data, "the linked file reads back what was written")

    fd = os.open(d, os.O_TMPFILE | os.O_WRONLY | os.O_EXCL, 0o600)
    check(link_fd(fd, os.path.join(d, "excl")) == errno.ENOENT, "an O_TMPFILE | O_EXCL file cannot be linked")
    os.close(fd)

    # Closed without a name, its blocks are freed: they come back to statvfs
    # once another file's fsync has made the release durable.
    os.unlink(os.path.join(d, "named"))
    def sync_one():
        f = os.open(os.path.join(d, "sync"), os.O_WRONLY | os.O_CREAT, 0o600)
        os.fsync(f)
        os.close(f)
    sync_one()
    before = used_bytes()
    fd = os.open(d, os.O_TMPFILE | os.O_RDWR, 0o600)
    os.write(fd, bytes(8 * MiB))
    os.fsync(fd)
    during = used_bytes()
    os.close(fd)
    # The kernel sends the release after close() returns: wait for it (up to 10 s).
    for _ in range(200):
        sync_one()
        after = used_bytes()
        if after <= before:
            break
        time.sleep(0.05)
    check(during >= before + 8 * MiB and after <= before,
          f"an unnamed file's space is freed when it is closed (used {before} -> {during} -> {after} bytes)")
    os.unlink(os.path.join(d, "sync"))
    os.rmdir(d)


for test in (direct_then_buffered, rewinddir, seek_after_punch, zero_range, fstat_renamed_over, file_handles, appends,
             tmpfile):
    print(f"--- {test.__name__}", flush=True)
    try:
        test()
    except Exception as e:  # noqa: BLE001 (one check's crash must not hide the others)
        check(False, f"{test.__name__} raised {type(e).__name__}: {e}")
sys.exit(1 if failures else 0)
